/* test_expert_pack.c - pack writing, manifest checks, corruption, and reading through it. */
#include "test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "expert/pack.h"
#include "expert/pack_stream.h"
#include "expert/store.h"
#include "model/mkmodel.h"
#include "quant/types.h"
#include "expert_fixture.h"
#include "util/alloc.h"

struct pk {
	char model[512], pack[600], man[700];
	struct pt_expert_layout lay;
	uint8_t *file;
	uint64_t size;
};

static int pk_setup(struct pk *k, const char *name)
{
	pt_gguf *g = NULL;
	snprintf(k->model, sizeof k->model, "%s", pt_test_tmpfile(name));
	pt_pack_default_path(k->model, k->pack, sizeof k->pack);
	pt_pack_manifest_path(k->pack, k->man, sizeof k->man);
	if (fx_write_model(k->model) != 0 || pt_gguf_open(k->model, &g, NULL) != PT_OK)
		return -1;
	enum pt_status st = pt_expert_layout_from_gguf(g, &k->lay, NULL);
	pt_gguf_close(g);
	k->file = fx_slurp(k->model, &k->size);
	if (st != PT_OK || !k->file)
		return -1;
	return pt_pack_write(k->model, &k->lay, false, k->pack, NULL, NULL) == PT_OK ? 0 : -1;
}

static void pk_free(struct pk *k)
{
	pt_expert_layout_free(&k->lay);
	pt_free(k->file);
}

static void patch(const char *path, long off, uint8_t xor_with)
{
	FILE *f = fopen(path, "r+b");
	if (!f)
		return;
	fseek(f, off, SEEK_SET);
	int c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ xor_with, f);
	fclose(f);
}

PT_TEST(test_expert_pack_plan_geometry)
{
	struct pk k;
	struct pt_pack p;
	REQUIRE(pk_setup(&k, "pk0.gguf") == 0);
	REQUIRE(pt_pack_plan(&k.lay, false, &p, NULL) == PT_OK);
	CHECK_EQ_INT(p.n_moe, 2);
	CHECK_EQ_INT(p.layers[0].stride, 8192); /* 3 x 1440 (64-rounded 1472) + 12 */
	CHECK_EQ_INT(p.layers[0].part_off[1], 1472);
	CHECK_EQ_INT(p.layers[0].part_off[3], 3 * 1472);
	CHECK_EQ_INT(p.layers[1].offset, 8192 * FX_EXPERTS);
	CHECK_EQ_INT(p.size, (8192 + 8192) * FX_EXPERTS);
	struct stat st;
	REQUIRE(stat(k.pack, &st) == 0);
	CHECK_EQ_INT(st.st_size, p.size);
	pt_pack_free(&p);
	pk_free(&k);
}

PT_TEST(test_expert_pack_read_through_store)
{
	struct pk k;
	struct pt_pack p;
	struct pt_error err = { 0 };
	pt_expert_store *s = NULL;
	REQUIRE(pk_setup(&k, "pk1.gguf") == 0);
	REQUIRE(pt_pack_open(k.pack, k.model, &k.lay, true, &p, &err) == PT_OK);
	for (int direct = 0; direct < 2; direct++) {
		struct pt_expert_store_config cfg = { .model_path = k.model, .layout = &k.lay,
						      .pack = &p, .slots_per_layer = 2,
						      .mode = direct ? PT_IO_DIRECT : PT_IO_BUFFERED };
		REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
		CHECK_CONTAINS(pt_expert_store_describe(s), "expert pack");
		int bad = 0;
		for (uint32_t m = 0; m < 2; m++)
			for (uint32_t e = 0; e < FX_EXPERTS; e++) {
				struct pt_expert_view v;
				const struct pt_expert_layer *L = &k.lay.moe[m];
				REQUIRE(pt_expert_store_get(s, L->layer, e, &v, NULL) == PT_OK);
				for (uint32_t i = 0; i < L->n_parts; i++)
					bad += memcmp(v.part[i], k.file + L->part[i].file_offset +
								  e * L->part[i].stride,
						      L->part[i].stride) != 0;
				pt_expert_store_release(s, L->layer, e);
			}
		CHECK_EQ_INT(bad, 0);
		struct pt_cache_stats st;
		pt_expert_store_stats(s, UINT32_MAX, &st);
		CHECK_EQ_INT(st.bytes_read, 2 * FX_EXPERTS * 8192); /* one blob read per expert */
		pt_expert_store_close(s);
	}
	pt_pack_free(&p);
	pk_free(&k);
}

PT_TEST(test_expert_pack_corrupt_data)
{
	struct pk k;
	struct pt_pack p;
	struct pt_error err = { 0 };
	REQUIRE(pk_setup(&k, "pk2.gguf") == 0);
	patch(k.pack, 12345, 0x40);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, NULL), PT_OK); /* size ok */
	pt_pack_free(&p);
	CHECK_EQ_INT(pt_pack_open(k.pack, NULL, NULL, true, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "is corrupt: SHA-256");
	REQUIRE(truncate(k.pack, 4096) == 0);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "incomplete or corrupt");
	pk_free(&k);
}

PT_TEST(test_expert_pack_corrupt_manifest)
{
	struct pk k;
	struct pt_pack p;
	struct pt_error err = { 0 };
	REQUIRE(pk_setup(&k, "pk3.gguf") == 0);
	FILE *f = fopen(k.man, "w");
	REQUIRE(f != NULL);
	fputs("{\"format\": \"particle-expert-pack\", \"version\": 1, \"files\": [", f);
	fclose(f);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "corrupt pack manifest");
	remove(k.man);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "cannot open pack manifest");
	pk_free(&k);
}

PT_TEST(test_expert_pack_model_changed)
{
	struct pk k;
	struct pt_pack p;
	struct pt_error err = { 0 };
	REQUIRE(pk_setup(&k, "pk4.gguf") == 0);
	/* metadata byte changes (inside the header region): header hash differs */
	patch(k.model, 30, 0x01);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "different version");
	patch(k.model, 30, 0x01);
	/* same bytes, new mtime: a rewritten file is treated as different */
	struct timeval tv[2] = { { 1000000, 0 }, { 1000000, 0 } };
	REQUIRE(utimes(k.model, tv) == 0);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, false, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "mtime");
	/* pack-only verification does not need the model to match */
	CHECK_EQ_INT(pt_pack_open(k.pack, NULL, NULL, true, &p, NULL), PT_OK);
	pt_pack_free(&p);
	pk_free(&k);
}

PT_TEST(test_expert_pack_manifest_bounds)
{
	const char *good = "{\"format\":\"particle-expert-pack\",\"version\":1,\"n_expert\":2,"
			   "\"layers\":[{\"layer\":1,\"offset\":\"0\",\"stride\":4096,\"parts\":"
			   "[{\"off\":0,\"bytes\":100}]}]}";
	struct pt_pack p;
	struct pt_error err = { 0 };
	REQUIRE(pt_pack_manifest_parse(good, 8192, &p, NULL) == PT_OK);
	CHECK_EQ_INT(p.n_moe, 1);
	CHECK_EQ_INT(p.layers[0].stride, 4096);
	pt_pack_free(&p);
	/* 2 experts x 4096 do not fit a 4096-byte pack */
	CHECK_EQ_INT(pt_pack_manifest_parse(good, 4096, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "bad layer entry");
	const char *v3 = "{\"format\":\"particle-expert-pack\",\"version\":3}";
	CHECK_EQ_INT(pt_pack_manifest_parse(v3, 0, &p, NULL), PT_E_UNSUPPORTED);
	const char *v2 = "{\"format\":\"particle-expert-pack\",\"version\":2}";
	CHECK_EQ_INT(pt_pack_manifest_parse(v2, 0, &p, NULL), PT_E_FORMAT);
	const char *part = "{\"format\":\"particle-expert-pack\",\"version\":1,\"n_expert\":1,"
			   "\"layers\":[{\"layer\":1,\"offset\":\"0\",\"stride\":4096,\"parts\":"
			   "[{\"off\":4000,\"bytes\":100}]}]}";
	CHECK_EQ_INT(pt_pack_manifest_parse(part, 4096, &p, NULL), PT_E_FORMAT);
}

/* Version 2 (interleaved packs): parts say "layout": "x16" or "rows" (or nothing: rows); any
 * other value, and any layout in a version 1 manifest, is refused - a reader must never
 * take interleaved bytes for rows. */
PT_TEST(test_expert_pack_manifest_layouts)
{
	struct pt_pack p;
	struct pt_error err = { 0 };
	char buf[512];
	const char *fmt = "{\"format\":\"particle-expert-pack\",\"version\":%d,\"n_expert\":2,"
			  "\"layers\":[{\"layer\":1,\"offset\":\"0\",\"stride\":4096,\"parts\":"
			  "[{\"off\":0,\"bytes\":2368%s},{\"off\":2368,\"bytes\":100}]}]}";
	snprintf(buf, sizeof buf, fmt, 2, ",\"layout\":\"x16\"");
	REQUIRE(pt_pack_manifest_parse(buf, 8192, &p, NULL) == PT_OK);
	CHECK(p.x16 && p.layers[0].part_x16[0] && !p.layers[0].part_x16[1]);
	pt_pack_free(&p);
	snprintf(buf, sizeof buf, fmt, 2, ",\"layout\":\"rows\"");
	REQUIRE(pt_pack_manifest_parse(buf, 8192, &p, NULL) == PT_OK);
	CHECK(p.x16 && !p.layers[0].part_x16[0]);
	pt_pack_free(&p);
	const char *bad[] = { ",\"layout\":\"x32\"", ",\"layout\":16", ",\"layout\":null",
			      ",\"layout\":\"\"" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(buf, sizeof buf, fmt, 2, bad[i]);
		CHECK_EQ_INT(pt_pack_manifest_parse(buf, 8192, &p, &err), PT_E_FORMAT);
		CHECK_CONTAINS(err.msg, "bad part");
	}
	snprintf(buf, sizeof buf, fmt, 1, ",\"layout\":\"x16\"");
	CHECK_EQ_INT(pt_pack_manifest_parse(buf, 8192, &p, NULL), PT_E_FORMAT);
	snprintf(buf, sizeof buf, fmt, 1, ",\"layout\":\"rows\"");
	CHECK_EQ_INT(pt_pack_manifest_parse(buf, 8192, &p, NULL), PT_E_FORMAT);
	snprintf(buf, sizeof buf, fmt, 1, "");
	REQUIRE(pt_pack_manifest_parse(buf, 8192, &p, NULL) == PT_OK);
	CHECK(!p.x16 && !p.layers[0].part_x16[0]);
	pt_pack_free(&p);
}

/* The fixture's experts (10 x 256 rows) have no interleaved layout: an interleaved pack of
 * it is the plain pack's geometry under version 2, and opens as such. */
PT_TEST(test_expert_pack_x16_without_qualifying_parts)
{
	struct pk k;
	struct pt_pack a, b;
	REQUIRE(pk_setup(&k, "pk6.gguf") == 0);
	REQUIRE(pt_pack_plan(&k.lay, false, &a, NULL) == PT_OK);
	REQUIRE(pt_pack_plan(&k.lay, true, &b, NULL) == PT_OK);
	CHECK(b.x16 && !a.x16);
	CHECK_EQ_INT(a.size, b.size);
	for (uint32_t i = 0; i < k.lay.moe[0].n_parts; i++)
		CHECK(!b.layers[0].part_x16[i] && !pt_pack_part_x16(&k.lay.moe[0].part[i]));
	pt_pack_free(&a);
	pt_pack_free(&b);
	/* what qualifies: a Q4_K / Q6_K matrix of whole bands and super-blocks, stored densely;
	 * never an empty or padded one (a hostile file's shapes) */
	struct pt_expert_part q = { .kind = PT_PART_GATE, .type = PT_TYPE_Q4_K, .rows = 32,
				    .cols = 512, .stride = 32 * 288 };
	CHECK(pt_pack_part_x16(&q) && pt_pack_part_bytes(&q, true) == 2 * 2 * 2368 &&
	      pt_pack_part_bytes(&q, false) == 32 * 288);
	q.rows = 0;
	q.stride = 0;
	CHECK(!pt_pack_part_x16(&q) && pt_pack_part_bytes(&q, true) == 0);
	q.rows = 32;
	q.stride = 32 * 288 + 32; /* rows with padding */
	CHECK(!pt_pack_part_x16(&q));
	q.stride = 32 * 288;
	q.rows = 24; /* not whole bands */
	CHECK(!pt_pack_part_x16(&q));
	q.rows = 32;
	q.kind = PT_PART_OTHER;
	CHECK(!pt_pack_part_x16(&q));
	q.kind = PT_PART_DOWN;
	q.type = PT_TYPE_Q5_K; /* no interleaved layout */
	CHECK(!pt_pack_part_x16(&q));
	q.type = 9999;
	CHECK(!pt_pack_part_x16(&q));
	REQUIRE(pt_pack_write(k.model, &k.lay, true, k.pack, NULL, NULL) == PT_OK);
	struct pt_error err = { 0 };
	REQUIRE(pt_pack_open(k.pack, k.model, &k.lay, true, &a, &err) == PT_OK);
	CHECK(a.x16);
	pt_pack_free(&a);
	pk_free(&k);
}

/* ---- the pack built from the model's bytes in arrival order (pull --pack / --repack) ----- */

struct feed_job {
	pt_pack_stream *s;
	const uint8_t *file;
	const uint64_t *pc; /* piece k is [pc[2k], pc[2k + 1]) */
	uint32_t first, n;
	enum pt_status st;
};

/* Pieces first, first + 2, ...: two such threads feed every piece once, interleaved. */
static void *feed_thread(void *arg)
{
	struct feed_job *j = arg;
	struct pt_error err = { 0 };
	for (uint32_t k = j->first; k < j->n && j->st == PT_OK; k += 2)
		j->st = pt_pack_stream_feed(j->s, j->pc[2 * k], j->file + j->pc[2 * k],
					    (size_t)(j->pc[2 * k + 1] - j->pc[2 * k]), &err);
	return NULL;
}

static uint64_t xorshift(uint64_t *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

/* [0, size) cut into pieces of 1..max_piece bytes (cuts inside rows and experts), in a
 * shuffled order, as ranges land from several connections; *n pieces, pt_malloc'd pairs. */
static uint64_t *shuffled_pieces(uint64_t size, uint64_t max_piece, uint64_t seed, uint32_t *n)
{
	uint64_t r = seed, at = 0;
	uint32_t k = 0, cap = 0;
	for (; at < size; cap++) /* the count first, then the same cuts */
		at += 1 + xorshift(&r) % max_piece;
	uint64_t *pc = pt_mallocn(2 * (size_t)cap, sizeof *pc);
	if (!pc)
		return NULL;
	r = seed;
	at = 0;
	while (at < size) {
		uint64_t len = 1 + xorshift(&r) % max_piece;
		pc[2 * k] = at;
		pc[2 * k + 1] = at + len < size ? at + len : size;
		at = pc[2 * k + 1];
		k++;
	}
	for (uint32_t i = k - 1; i > 0; i--) {
		uint32_t o = (uint32_t)(xorshift(&r) % (i + 1));
		uint64_t a = pc[2 * i], b = pc[2 * i + 1];
		pc[2 * i] = pc[2 * o];
		pc[2 * i + 1] = pc[2 * o + 1];
		pc[2 * o] = a;
		pc[2 * o + 1] = b;
	}
	*n = k;
	return pc;
}

/* A small-preset model (Q4_K_M, or Q8_0 with mix_q8): 256-wide rows, so its expert matrices
 * can be interleaved. */
static const char *x16_model_mix(const char *name, struct pt_expert_layout *lay, bool mix_q8)
{
	const char *path = pt_test_tmpfile(name);
	struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN3MOE, .preset = "small", .n_layer = 2,
				     .mix = mix_q8 ? PT_MIX_Q8_0 : PT_MIX_Q4_K_M, .seed = 9,
				     .out_path = path, .threads = 2 };
	struct pt_error err = { 0 };
	pt_gguf *g = NULL;
	if (pt_mkmodel_write(&o, &err) != PT_OK || pt_gguf_open(path, &g, &err) != PT_OK)
		return NULL;
	enum pt_status st = pt_expert_layout_from_gguf(g, lay, &err);
	pt_gguf_close(g);
	return st == PT_OK ? path : NULL;
}

static const char *x16_model(const char *name, struct pt_expert_layout *lay)
{
	return x16_model_mix(name, lay, false);
}

/* The manifest at path parsed, edited by edit, written back (compact). */
static int edit_manifest(const char *path, void (*edit)(cJSON *root))
{
	uint64_t n = 0;
	char *text = (char *)fx_slurp(path, &n);
	cJSON *root = text ? cJSON_ParseWithLength(text, (size_t)n) : NULL;
	pt_free(text);
	if (!root)
		return -1;
	edit(root);
	char *out = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	FILE *f = out ? fopen(path, "wb") : NULL;
	const int ok = f && fwrite(out, 1, strlen(out), f) == strlen(out);
	if (f && fclose(f) != 0)
		return -1;
	cJSON_free(out);
	return ok ? 0 : -1;
}

static void to_version_2(cJSON *root)
{
	cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "version"), 2);
}

static void first_part_x16(cJSON *root)
{
	cJSON *L = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layers"), 0);
	cJSON *q = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(L, "parts"), 0);
	cJSON_AddStringToObject(q, "layout", "x16");
}

/* Q8_0 experts interleave now (x16.c); an interleaved pack written before they did (version
 * 2, those parts as stored) still opens with them as stored, and a manifest that calls a
 * part interleaved where it cannot be is refused. */
PT_TEST(test_expert_pack_x16_manifest_layouts_honoured)
{
	struct pt_expert_layout lay;
	const char *model = x16_model_mix("pk_q8.gguf", &lay, true);
	REQUIRE(model);
	uint32_t n_x16 = 0, n_q8 = 0;
	for (uint32_t m = 0; m < lay.n_moe; m++)
		for (uint32_t i = 0; i < lay.moe[m].n_parts; i++) {
			n_x16 += pt_pack_part_x16(&lay.moe[m].part[i]);
			n_q8 += lay.moe[m].part[i].type == PT_TYPE_Q8_0;
		}
	CHECK(n_q8 > 0 && n_x16 == n_q8);
	char pack[600], man[700];
	pt_pack_default_path(model, pack, sizeof pack);
	pt_pack_manifest_path(pack, man, sizeof man);
	struct pt_error err = { 0 };
	struct pt_pack p;
	/* the new interleaved pack: every Q8_0 part interleaved */
	REQUIRE(pt_pack_write(model, &lay, true, pack, NULL, &err) == PT_OK);
	REQUIRE(pt_pack_open(pack, model, &lay, true, &p, &err) == PT_OK);
	uint32_t got = 0;
	for (uint32_t m = 0; m < p.n_moe; m++)
		for (uint32_t i = 0; i < lay.moe[m].n_parts; i++)
			got += p.layers[m].part_x16[i];
	CHECK(p.x16 && got == n_x16);
	pt_pack_free(&p);
	/* an older build's version 2 pack of this model: the rows pack, version 2 */
	REQUIRE(pt_pack_write(model, &lay, false, pack, NULL, &err) == PT_OK);
	REQUIRE(edit_manifest(man, to_version_2) == 0);
	CHECK_EQ_INT(pt_pack_open(pack, model, &lay, true, &p, &err), PT_OK);
	got = 0;
	for (uint32_t m = 0; m < p.n_moe; m++)
		for (uint32_t i = 0; i < lay.moe[m].n_parts; i++)
			got += p.layers[m].part_x16[i];
	CHECK(p.x16 && got == 0);
	pt_pack_free(&p);
	pt_expert_layout_free(&lay);
	/* a part that cannot be interleaved (the fixture's shapes) called interleaved */
	struct pk k;
	REQUIRE(pk_setup(&k, "pk_q8_bad.gguf") == 0);
	REQUIRE(pt_pack_write(k.model, &k.lay, true, k.pack, NULL, &err) == PT_OK);
	REQUIRE(edit_manifest(k.man, first_part_x16) == 0);
	CHECK_EQ_INT(pt_pack_open(k.pack, k.model, &k.lay, true, &p, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "does not match");
	pk_free(&k);
}

/* The streamed pack of model (pieces in shuffled order from two threads) is pt_pack_write's,
 * pack and manifest byte for byte. */
static void check_streamed(const char *model, const struct pt_expert_layout *lay, bool x16,
			   uint64_t max_piece, uint64_t seed)
{
	char pack[600], man[700];
	pt_pack_default_path(model, pack, sizeof pack);
	pt_pack_manifest_path(pack, man, sizeof man);
	struct pt_error err = { 0 };
	uint64_t size = 0, wp_n = 0, wm_n = 0, gp_n = 0, gm_n = 0;
	REQUIRE(pt_pack_write(model, lay, x16, pack, NULL, &err) == PT_OK);
	uint8_t *want_pack = fx_slurp(pack, &wp_n), *want_man = fx_slurp(man, &wm_n);
	uint8_t *file = fx_slurp(model, &size);
	REQUIRE(want_pack && want_man && file);
	CHECK(unlink(pack) == 0 && unlink(man) == 0);
	uint32_t n = 0;
	uint64_t *pc = shuffled_pieces(size, max_piece, seed, &n);
	REQUIRE(pc);
	pt_pack_stream *s = NULL;
	REQUIRE(pt_pack_stream_begin(lay, pack, x16, &s, &err) == PT_OK);
	struct feed_job j[2] = { { s, file, pc, 0, n, PT_OK }, { s, file, pc, 1, n, PT_OK } };
	pthread_t th[2];
	for (int t = 0; t < 2; t++)
		REQUIRE(pthread_create(&th[t], NULL, feed_thread, &j[t]) == 0);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	CHECK(j[0].st == PT_OK && j[1].st == PT_OK);
	CHECK_EQ_INT(pt_pack_stream_finish(s, model, &err), PT_OK);
	uint8_t *got_pack = fx_slurp(pack, &gp_n), *got_man = fx_slurp(man, &gm_n);
	CHECK(got_pack && gp_n == wp_n && memcmp(got_pack, want_pack, wp_n) == 0);
	CHECK(got_man && gm_n == wm_n && memcmp(got_man, want_man, wm_n) == 0);
	struct pt_pack p;
	CHECK_EQ_INT(pt_pack_open(pack, model, lay, true, &p, &err), PT_OK);
	CHECK(p.x16 == x16);
	pt_pack_free(&p);
	pt_free(got_pack);
	pt_free(got_man);
	pt_free(want_pack);
	pt_free(want_man);
	pt_free(file);
	pt_free(pc);
}

PT_TEST(test_expert_pack_stream_rows_and_x16)
{
	struct pt_expert_layout lay;
	const char *model = x16_model("stream_x16.gguf", &lay);
	REQUIRE(model);
	uint32_t n_x16 = 0;
	for (uint32_t m = 0; m < lay.n_moe; m++)
		for (uint32_t i = 0; i < lay.moe[m].n_parts; i++)
			n_x16 += pt_pack_part_x16(&lay.moe[m].part[i]);
	CHECK(n_x16 == 3 * lay.n_moe); /* gate, up, down of every layer interleave */
	check_streamed(model, &lay, false, 300000, 7);
	check_streamed(model, &lay, true, 300000, 11); /* pieces span experts */
	check_streamed(model, &lay, true, 4000, 13);   /* many pieces to an expert's part */
	CHECK(pt_pack_stream_bytes(&lay, true) > pt_pack_stream_bytes(&lay, false));
	pt_expert_layout_free(&lay);
	/* the fixture's odd shapes: nothing qualifies, so x16 is the rows pack marked version 2 */
	struct pk k;
	REQUIRE(pk_setup(&k, "stream_rows.gguf") == 0);
	check_streamed(k.model, &k.lay, true, 5000, 17);
	check_streamed(k.model, &k.lay, false, 5000, 19);
	pk_free(&k);
}

PT_TEST(test_expert_pack_stream_x16_errors)
{
	struct pt_expert_layout lay;
	const char *model = x16_model("stream_x16_err.gguf", &lay);
	REQUIRE(model);
	char pack[600];
	pt_pack_default_path(model, pack, sizeof pack);
	uint64_t size = 0;
	uint8_t *file = fx_slurp(model, &size);
	REQUIRE(file);
	struct pt_error err = { 0 };
	const struct pt_expert_part *q = &lay.moe[0].part[0];
	REQUIRE(pt_pack_part_x16(q));
	const uint64_t mid = q->file_offset + 2 * q->stride + q->stride / 2; /* expert 2, mid-row */

	/* a byte of an interleaved part fed twice: an error, not a pack with a wrong expert */
	pt_pack_stream *s = NULL;
	REQUIRE(pt_pack_stream_begin(&lay, pack, true, &s, &err) == PT_OK);
	CHECK_EQ_INT(pt_pack_stream_feed(s, 0, file, (size_t)size, &err), PT_OK);
	CHECK_EQ_INT(pt_pack_stream_feed(s, mid, file + mid, 1, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "twice");
	pt_pack_stream_abort(s);
	struct stat sb;
	CHECK(stat(pack, &sb) != 0); /* nothing left at the pack's name */

	/* a gap inside an interleaved part: finish refuses (a rows-layout gap would be a hole of
	 * zeros, but the download layer guarantees every byte; an expert left as rows would be
	 * a wrong answer shown as right) */
	err = (struct pt_error){ 0 };
	REQUIRE(pt_pack_stream_begin(&lay, pack, true, &s, &err) == PT_OK);
	CHECK_EQ_INT(pt_pack_stream_feed(s, 0, file, (size_t)mid, &err), PT_OK);
	CHECK_EQ_INT(pt_pack_stream_feed(s, mid + 1, file + mid + 1, (size_t)(size - mid - 1), &err),
		     PT_OK);
	CHECK_EQ_INT(pt_pack_stream_finish(s, model, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "incomplete");
	CHECK(stat(pack, &sb) != 0);
	pt_free(file);
	pt_expert_layout_free(&lay);
}
