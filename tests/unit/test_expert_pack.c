/* test_expert_pack.c - pack writing, manifest checks, corruption, and reading through it. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "expert/pack.h"
#include "expert/store.h"
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
