/* test_expert_pcache.c - the lazy pack cache: persistence across restarts, torn log tails,
 * a crash between data and commit, corrupt entries, identity changes, and the store serving
 * misses from it (with the source made unreadable). */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expert/pcache.h"
#include "expert/store.h"
#include "expert_fixture.h"
#include "util/alloc.h"

static uint8_t img[3][8192] __attribute__((aligned(4096)));

static struct pt_pcache_config cfg_for(const char *dir, const char *id)
{
	struct pt_pcache_config c = { .dir = dir, .size_bytes = 4 * 8192, .entry_bytes = 8192,
				      .n_moe = 2, .n_expert = 8, .identity = id };
	return c;
}

static const char *dir_for(const char *name)
{
	static char buf[4][512];
	static int k;
	char *b = buf[k++ & 3];
	snprintf(b, 512, "%s/%s", pt_test_tmpdir(), name);
	return b;
}

static void fill(void)
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 8192; j++)
			img[i][j] = (uint8_t)(i * 31 + j * 7);
}

PT_TEST(test_expert_pcache_persists_and_evicts)
{
	const char *dir = dir_for("pc1");
	struct pt_pcache_config c = cfg_for(dir, "m1");
	pt_pcache *pc = NULL;
	uint64_t len;
	fill();
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	CHECK_EQ_INT(pt_pcache_entries(pc), 4);
	struct pt_pcache_item it[3] = { { 0, 1, img[0], 8192 }, { 1, 2, img[1], 4096 },
					{ 1, 7, img[2], 8192 } };
	REQUIRE(pt_pcache_put(pc, it, 3, NULL) == PT_OK);
	CHECK_EQ_INT(pt_pcache_used(pc), 3);
	pt_pcache_close(pc);
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK); /* after a restart */
	CHECK_EQ_INT(pt_pcache_used(pc), 3);
	int32_t e = pt_pcache_lookup(pc, 1, 2, &len);
	REQUIRE(e >= 0);
	CHECK_EQ_INT(len, 4096);
	int fd = open(pt_pcache_data_path(pc), O_RDONLY);
	static uint8_t back[8192];
	REQUIRE(pread(fd, back, 4096, (off_t)pt_pcache_entry_offset(pc, (uint32_t)e)) == 4096);
	close(fd);
	CHECK(pt_pcache_check(pc, (uint32_t)e, back));
	CHECK(memcmp(back, img[1], 4096) == 0);
	back[5] ^= 1;
	CHECK(!pt_pcache_check(pc, (uint32_t)e, back));
	/* two more: 4 entries, so the oldest (layer 0 expert 1) goes */
	struct pt_pcache_item more[2] = { { 0, 3, img[0], 8192 }, { 0, 4, img[1], 8192 } };
	REQUIRE(pt_pcache_put(pc, more, 2, NULL) == PT_OK);
	CHECK_EQ_INT(pt_pcache_used(pc), 4);
	CHECK(pt_pcache_lookup(pc, 0, 1, &len) < 0);
	CHECK(pt_pcache_lookup(pc, 1, 7, &len) >= 0);
	pt_pcache_close(pc);
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	CHECK(pt_pcache_lookup(pc, 0, 1, &len) < 0);
	CHECK(pt_pcache_lookup(pc, 0, 4, &len) >= 0);
	pt_pcache_close(pc);
	c.identity = "another model"; /* different identity: reset */
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	CHECK_EQ_INT(pt_pcache_used(pc), 0);
	pt_pcache_close(pc);
}

PT_TEST(test_expert_pcache_torn_log_tail)
{
	const char *dir = dir_for("pc2");
	struct pt_pcache_config c = cfg_for(dir, "m2");
	pt_pcache *pc = NULL;
	uint64_t len;
	char log[600];
	fill();
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	struct pt_pcache_item it[2] = { { 0, 1, img[0], 8192 }, { 0, 2, img[1], 8192 } };
	REQUIRE(pt_pcache_put(pc, it, 2, NULL) == PT_OK);
	pt_pcache_close(pc);
	snprintf(log, sizeof log, "%s/particle-pcache.log", dir);
	/* a half-written record at the end, and a flipped byte in the last full record */
	FILE *f = fopen(log, "r+b");
	REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	long end = ftell(f);
	fseek(f, end - 20, SEEK_SET);
	fputc(0x5a, f);
	fseek(f, 0, SEEK_END);
	fwrite("PCRC partial", 1, 12, f);
	fclose(f);
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	CHECK(pt_pcache_lookup(pc, 0, 1, &len) >= 0); /* records before the damage survive */
	CHECK(pt_pcache_lookup(pc, 0, 2, &len) < 0);  /* the damaged commit is not used */
	pt_pcache_close(pc);
	f = fopen(log, "rb");
	REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	CHECK_EQ_INT(ftell(f) % 64, 0); /* cut back to whole records */
	fclose(f);
}

PT_TEST(test_expert_pcache_crash_before_commit)
{
	const char *dir = dir_for("pc3");
	struct pt_pcache_config c = cfg_for(dir, "m3");
	pt_pcache *pc = NULL;
	uint64_t len;
	fill();
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	struct pt_pcache_item a = { 1, 1, img[0], 8192 };
	REQUIRE(pt_pcache_put(pc, &a, 1, NULL) == PT_OK);
	pt_pcache_close(pc);
	/* overwrite everything: invalidates written, data written, commit never written */
	c.test_crash_before_commit = true;
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	struct pt_pcache_item b[4] = { { 0, 1, img[1], 8192 }, { 0, 2, img[1], 8192 },
				       { 0, 3, img[1], 8192 }, { 0, 4, img[2], 8192 } };
	REQUIRE(pt_pcache_put(pc, b, 3, NULL) == PT_OK); /* the 3 free entries */
	pt_pcache_close(pc);
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	for (uint32_t e = 1; e <= 3; e++)
		CHECK(pt_pcache_lookup(pc, 0, e, &len) < 0); /* torn entries never used */
	CHECK(pt_pcache_lookup(pc, 1, 1, &len) >= 0);    /* untouched entry still valid */
	/* now 4 items: the 4th overwrites (1,1), whose invalidate is durable before its data */
	REQUIRE(pt_pcache_put(pc, b, 4, NULL) == PT_OK);
	pt_pcache_close(pc);
	c.test_crash_before_commit = false;
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	CHECK(pt_pcache_lookup(pc, 1, 1, &len) < 0); /* not resurrected over torn data */
	CHECK_EQ_INT(pt_pcache_used(pc), 0);
	pt_pcache_close(pc);
}

static int64_t source_fails(void *ctx, uint64_t tag, uint32_t range, uint64_t off, int64_t res)
{
	(void)ctx, (void)range, (void)off;
	return tag & PT_STORE_TAG_PCACHE ? res : -EIO;
}

struct run {
	const char *model, *dir;
	struct pt_expert_layout *lay;
	const uint8_t *file;
};

/* Gets experts 0..5 of both layers; returns the number with wrong bytes, -1 on error. */
static int run_store(const struct run *r, pt_io_fault_fn fault, bool crash, uint64_t *hits,
		     uint64_t *bad_entries, uint64_t *written)
{
	struct pt_expert_store_config cfg = { .model_path = r->model, .layout = r->lay,
					      .mode = PT_IO_DIRECT, .slots_per_layer = 2,
					      .pack_cache_dir = r->dir,
					      .pack_cache_size = 64ull << 20, .identity = "fx",
					      .pack_cache_test_crash = crash, .fault = fault };
	pt_expert_store *s = NULL;
	int wrong = 0;
	if (pt_expert_store_open(&cfg, &s, NULL) != PT_OK)
		return -1;
	for (uint32_t m = 0; m < 2; m++)
		for (uint32_t e = 0; e < 6; e++) {
			const struct pt_expert_layer *L = &r->lay->moe[m];
			struct pt_expert_view v;
			uint32_t one = e;
			struct pt_error err = { 0 };
			if (pt_expert_store_prefetch(s, L->layer, &one, 1, &err) != PT_OK ||
			    pt_expert_store_get(s, L->layer, e, &v, &err) != PT_OK) {
				fprintf(stderr, "store: %s\n", err.msg);
				pt_expert_store_close(s);
				return -1;
			}
			for (uint32_t i = 0; i < L->n_parts; i++)
				wrong += memcmp(v.part[i], r->file + L->part[i].file_offset +
								   e * L->part[i].stride,
						L->part[i].stride) != 0;
			pt_expert_store_release(s, L->layer, e);
			pt_expert_store_end_layer(s, L->layer);
		}
	pt_expert_store_pcache_stats(s, hits, bad_entries, written);
	pt_expert_store_close(s);
	return wrong;
}

PT_TEST(test_expert_pcache_store_serves_misses)
{
	char model[512];
	uint64_t size, hits, bad, written;
	pt_gguf *g = NULL;
	struct pt_expert_layout lay;
	snprintf(model, sizeof model, "%s", pt_test_tmpfile("pcm.gguf"));
	REQUIRE(fx_write_model(model) == 0);
	REQUIRE(pt_gguf_open(model, &g, NULL) == PT_OK);
	REQUIRE(pt_expert_layout_from_gguf(g, &lay, NULL) == PT_OK);
	pt_gguf_close(g);
	uint8_t *file = fx_slurp(model, &size);
	REQUIRE(file != NULL);
	struct run r = { .model = model, .dir = dir_for("pc4"), .lay = &lay, .file = file };
	/* cold: everything from the source, copied into the pack cache */
	CHECK_EQ_INT(run_store(&r, NULL, false, &hits, &bad, &written), 0);
	CHECK_EQ_INT(hits, 0);
	CHECK_EQ_INT(written, 12);
	/* warm, with the source unreadable: every miss is served by the pack cache */
	CHECK_EQ_INT(run_store(&r, source_fails, false, &hits, &bad, &written), 0);
	CHECK_EQ_INT(hits, 12);
	CHECK_EQ_INT(written, 0);
	/* corrupt one entry's data: it is detected, dropped and read from the source */
	char data[600];
	snprintf(data, sizeof data, "%s/particle-pcache.data", r.dir);
	FILE *f = fopen(data, "r+b");
	REQUIRE(f != NULL);
	fseek(f, 100, SEEK_SET);
	fputc(0xee, f);
	fclose(f);
	CHECK_EQ_INT(run_store(&r, NULL, false, &hits, &bad, &written), 0);
	CHECK_EQ_INT(bad, 1);
	CHECK_EQ_INT(hits, 11);
	CHECK_EQ_INT(written, 1); /* re-cached after the source read */
	/* a different pack-cache dir where writes "crash" before commit: nothing is served */
	r.dir = dir_for("pc5");
	CHECK_EQ_INT(run_store(&r, NULL, true, &hits, &bad, &written), 0);
	CHECK_EQ_INT(run_store(&r, NULL, false, &hits, &bad, &written), 0);
	CHECK_EQ_INT(hits, 0);
	pt_free(file);
	pt_expert_layout_free(&lay);
}

/* issue 22: links or shared-writable files planted in the cache directory are refused, never
 * truncated, sized or written; the directory itself is created private. */
PT_TEST(test_expert_pcache_refuses_planted_links_and_open_dirs)
{
	const char *dir = dir_for("pc-hostile");
	const char *victim = dir_for("pc-victim");
	char data[600], log[600];
	struct pt_pcache_config c = cfg_for(dir, "m1");
	struct pt_error e = { 0 };
	struct stat st;
	pt_pcache *pc = NULL;
	FILE *f = fopen(victim, "w");
	REQUIRE(f);
	fputs("precious", f);
	fclose(f);
	REQUIRE(pt_pcache_open(&c, &pc, NULL) == PT_OK);
	REQUIRE(stat(dir, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0700);
	snprintf(data, sizeof data, "%s", pt_pcache_data_path(pc));
	pt_pcache_close(pc);
	snprintf(log, sizeof log, "%s/particle-pcache.log", dir);
	const char *names[2] = { data, log };
	for (int n = 0; n < 2; n++) {
		for (int kind = 0; kind < 2; kind++) {
			unlink(names[n]);
			REQUIRE((kind ? link(victim, names[n]) : symlink(victim, names[n])) == 0);
			pt_error_clear(&e);
			CHECK_EQ_INT(pt_pcache_open(&c, &pc, &e), PT_E_IO);
			CHECK(pc == NULL);
			CHECK_CONTAINS(e.msg, names[n]);
			REQUIRE(stat(victim, &st) == 0);
			CHECK_EQ_INT(st.st_size, 8); /* not truncated, not sized to the cache */
			unlink(names[n]);
		}
	}
	chmod(dir, 0777);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_pcache_open(&c, &pc, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "writable by group or others");
}
