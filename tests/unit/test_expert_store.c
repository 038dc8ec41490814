/* test_expert_store.c - expert layout from a GGUF and the provider in every mode: each
 * part's bytes must equal the model file's slice, under eviction and fault injection. */
#include "test.h"

#include <errno.h>
#include <pthread.h>

#include "expert/store.h"
#include "expert_fixture.h"
#include "gguf/gguf.h"
#include "util/alloc.h"

static const char *fixture(const char *name)
{
	const char *p = pt_test_tmpfile(name);
	return fx_write_model(p) == 0 ? p : NULL;
}

PT_TEST(test_expert_layout_from_gguf)
{
	const char *path = fixture("lay.gguf");
	pt_gguf *g = NULL;
	struct pt_expert_layout l;
	REQUIRE(path && pt_gguf_open(path, &g, NULL) == PT_OK);
	REQUIRE(pt_expert_layout_from_gguf(g, &l, NULL) == PT_OK);
	CHECK_EQ_INT(l.n_expert, FX_EXPERTS);
	REQUIRE(l.n_moe == 2);
	CHECK_EQ_INT(l.moe[0].layer, 1);
	CHECK_EQ_INT(l.moe[1].layer, 2);
	REQUIRE(l.moe[0].n_parts == 4); /* gate, up, down, the 2-D scale; not the 1-D one */
	CHECK_EQ_INT(l.moe[0].part[0].kind, PT_PART_GATE);
	CHECK_EQ_INT(l.moe[0].part[1].kind, PT_PART_UP);
	CHECK_EQ_INT(l.moe[0].part[2].kind, PT_PART_DOWN);
	CHECK_EQ_STR(l.moe[0].part[3].name, "blk.1.ffn_gate_exps.scale");
	CHECK_EQ_INT(l.moe[0].part[0].stride, 40 * 9 * 4);
	CHECK_EQ_INT(l.moe[0].part[3].stride, 12);
	CHECK_EQ_INT(l.moe[1].n_parts, 3);
	CHECK_EQ_INT(l.moe[0].expert_bytes, 3 * 1440 + 12);
	CHECK_EQ_INT(pt_expert_layout_find(&l, 2), 1);
	CHECK_EQ_INT(pt_expert_layout_find(&l, 0), -1);
	const struct pt_gguf_tensor *t = pt_gguf_find_tensor(g, "blk.2.ffn_down_exps.weight");
	REQUIRE(t != NULL);
	CHECK_EQ_INT(l.moe[1].part[2].file_offset, t->file_offset);
	pt_expert_layout_free(&l);
	pt_gguf_close(g);
}

struct ctx {
	const char *path;
	uint8_t *file;
	uint64_t size;
	struct pt_expert_layout lay;
};

static int setup_n(struct ctx *c, const char *name, uint32_t n_experts)
{
	pt_gguf *g = NULL;
	c->path = pt_test_tmpfile(name);
	if (fx_write_model_n(c->path, n_experts) != 0)
		c->path = NULL;
	if (!c->path || pt_gguf_open(c->path, &g, NULL) != PT_OK)
		return -1;
	int rc = pt_expert_layout_from_gguf(g, &c->lay, NULL) == PT_OK ? 0 : -1;
	pt_gguf_close(g);
	c->file = fx_slurp(c->path, &c->size);
	return c->file && rc == 0 ? 0 : -1;
}

static int setup(struct ctx *c, const char *name)
{
	return setup_n(c, name, FX_EXPERTS);
}

static void teardown(struct ctx *c)
{
	pt_expert_layout_free(&c->lay);
	pt_free(c->file);
}

/* Every part of the view equals the file's slice. */
static int view_ok(const struct ctx *c, uint32_t m, uint32_t e, const struct pt_expert_view *v)
{
	const struct pt_expert_layer *L = &c->lay.moe[m];
	if (v->n_parts != L->n_parts)
		return 0;
	for (uint32_t i = 0; i < L->n_parts; i++) {
		uint64_t off = L->part[i].file_offset + e * L->part[i].stride;
		if (memcmp(v->part[i], c->file + off, L->part[i].stride) != 0)
			return 0;
	}
	return 1;
}

/* Runs a token stream through the store with prefetch/ready/get/release/end_layer. */
static void exercise(struct ctx *c, pt_expert_store *s, int *bad)
{
	static const uint32_t toks[][3] = { { 0, 1, 2 }, { 1, 2, 3 }, { 7, 0, 5 }, { 6, 6, 4 },
					    { 0, 1, 2 } };
	*bad = 0;
	for (uint32_t t = 0; t < 5; t++)
		for (uint32_t m = 0; m < 2; m++) {
			uint32_t layer = c->lay.moe[m].layer, e, n_ready = 0;
			bool got;
			struct pt_expert_view v;
			REQUIRE(pt_expert_store_prefetch(s, layer, toks[t], 3, NULL) == PT_OK);
			for (int spin = 0; spin < 100000 && n_ready < 3; spin++) {
				REQUIRE(pt_expert_store_ready(s, &e, &got, NULL) == PT_OK);
				n_ready += got;
			}
			for (uint32_t i = 0; i < 3; i++) {
				REQUIRE(pt_expert_store_get(s, layer, toks[t][i], &v, NULL) == PT_OK);
				*bad += !view_ok(c, m, toks[t][i], &v);
				pt_expert_store_release(s, layer, toks[t][i]);
			}
			pt_expert_store_end_layer(s, layer);
		}
}

static void run_mode(enum pt_io_mode mode, bool force_pread, const struct pt_pack *pack)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	int bad;
	REQUIRE(setup(&c, "st.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .pack = pack, .mode = mode, .slots_per_layer = 3,
					      .map_base = c.file, .map_size = c.size,
					      .force_pread = force_pread };
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	exercise(&c, s, &bad);
	CHECK_EQ_INT(bad, 0);
	if (mode != PT_IO_MMAP) {
		struct pt_cache_stats st;
		pt_expert_store_stats(s, UINT32_MAX, &st);
		CHECK_EQ_INT(st.requests, 2 * 15); /* {6,6,4}: 2 in the prefetch, +1 second get of 6 */
		CHECK(st.misses >= 2 * 8 && st.hits > 0);
		CHECK(st.bytes_read > 0);
		CHECK_EQ_INT(st.read_errors, 0);
	}
	pt_expert_store_close(s);
	teardown(&c);
}

PT_TEST(test_expert_store_mmap)
{
	run_mode(PT_IO_MMAP, false, NULL);
}

PT_TEST(test_expert_store_direct_uring)
{
	run_mode(PT_IO_DIRECT, false, NULL);
}

PT_TEST(test_expert_store_buffered_pread)
{
	run_mode(PT_IO_BUFFERED, true, NULL);
}

static int64_t eio_expert5(void *ctx, uint64_t tag, uint32_t range, uint64_t off, int64_t res)
{
	(void)ctx, (void)range, (void)off;
	return (uint32_t)tag == 5 ? -EIO : res;
}

PT_TEST(test_expert_store_read_error_is_sticky)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	struct pt_expert_view v;
	REQUIRE(setup(&c, "st2.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = PT_IO_DIRECT, .slots_per_layer = 3,
					      .fault = eio_expert5 };
	REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
	uint32_t ex[] = { 4, 5 };
	REQUIRE(pt_expert_store_prefetch(s, 2, ex, 2, NULL) == PT_OK);
	CHECK_EQ_INT(pt_expert_store_get(s, 2, 5, &v, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "expert 5 of layer 2");
	CHECK_CONTAINS(err.msg, "at offset");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_expert_store_get(s, 2, 4, &v, &err), PT_E_IO); /* sticky */
	CHECK_EQ_INT(pt_expert_store_get(s, 0, 4, &v, NULL), PT_E_INVALID); /* dense layer */
	pt_expert_store_close(s);
	teardown(&c);
}

PT_TEST(test_expert_store_prefetch_over_slots)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup(&c, "st3.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = PT_IO_BUFFERED, .slots_per_layer = 3 };
	REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
	CHECK_CONTAINS(pt_expert_store_describe(s), "3 slots/layer lfu");
	uint32_t ex[] = { 0, 1, 2, 3 };
	CHECK_EQ_INT(pt_expert_store_prefetch(s, 1, ex, 4, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "waves");
	/* the forward pass's view: gate/up/down pointers */
	const void *gate, *up, *down;
	REQUIRE(pt_expert_store_get_mats(s, 2, 5, &gate, &up, &down, NULL) == PT_OK);
	CHECK(memcmp(gate, c.file + c.lay.moe[1].part[0].file_offset + 5 * 1440, 1440) == 0);
	CHECK(memcmp(up, c.file + c.lay.moe[1].part[1].file_offset + 5 * 1440, 1440) == 0);
	CHECK(memcmp(down, c.file + c.lay.moe[1].part[2].file_offset + 5 * 1440, 1440) == 0);
	pt_expert_store_release(s, 2, 5);
	/* get without prefetch still works and leaves nothing pinned */
	struct pt_expert_view v;
	for (uint32_t e = 0; e < FX_EXPERTS; e++) {
		REQUIRE(pt_expert_store_get(s, 1, e, &v, NULL) == PT_OK);
		CHECK(view_ok(&c, 0, e, &v));
		pt_expert_store_release(s, 1, e);
	}
	pt_expert_store_close(s);
	teardown(&c);
}

struct worker_arg {
	struct ctx *c;
	pt_expert_store *s;
	uint32_t seed;
	int bad;
};

static void *worker(void *p)
{
	struct worker_arg *a = p;
	for (int i = 0; i < 300; i++) {
		a->seed = a->seed * 1103515245u + 12345u;
		uint32_t m = (a->seed >> 8) & 1, e = (a->seed >> 16) % FX_EXPERTS;
		struct pt_expert_view v;
		if (pt_expert_store_get(a->s, a->c->lay.moe[m].layer, e, &v, NULL) != PT_OK) {
			a->bad++;
			continue;
		}
		a->bad += !view_ok(a->c, m, e, &v); /* compute reads while others load */
		pt_expert_store_release(a->s, a->c->lay.moe[m].layer, e);
	}
	return NULL;
}

PT_TEST(test_expert_store_concurrent_gets)
{
	/* 3 threads x 300 gets on 3 slots/layer through the pread pool and io_uring: every view
	 * must hold the right bytes (run under ThreadSanitizer by `make test`). */
	for (int backend = 0; backend < 2; backend++) {
		struct ctx c;
		pt_expert_store *s = NULL;
		pthread_t th[3];
		struct worker_arg a[3];
		REQUIRE(setup(&c, "st4.gguf") == 0);
		struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
						      .mode = PT_IO_DIRECT, .slots_per_layer = 3,
						      .force_pread = backend == 0 };
		REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
		for (int i = 0; i < 3; i++) {
			a[i] = (struct worker_arg){ .c = &c, .s = s, .seed = 77u + (uint32_t)i };
			REQUIRE(pthread_create(&th[i], NULL, worker, &a[i]) == 0);
		}
		for (int i = 0; i < 3; i++) {
			pthread_join(th[i], NULL);
			CHECK_EQ_INT(a[i].bad, 0);
		}
		struct pt_cache_stats st;
		pt_expert_store_stats(s, UINT32_MAX, &st);
		CHECK_EQ_INT(st.requests, 900);
		pt_expert_store_close(s);
		teardown(&c);
	}
}

/* Layer 1's experts u[0..8) through the store in the waves it cuts (checked: n_waves of
 * them), as the forward pass does: each wave prefetched, the next one handed to read-ahead,
 * each expert's bytes checked; returns how many were wrong (-1: a call failed). */
static int eight_in_waves(struct ctx *c, pt_expert_store *s, uint32_t *u, uint32_t n_waves)
{
	uint32_t ends[8], nw = 0, start = 0;
	int bad = 0;
	if (pt_expert_store_waves(s, 1, u, 8, ends, &nw, NULL) != PT_OK || nw != n_waves)
		return -1;
	for (uint32_t w = 0; w < nw; w++) {
		if (pt_expert_store_prefetch(s, 1, u + start, ends[w] - start, NULL) != PT_OK)
			return -1;
		if (w + 1 < nw)
			pt_expert_store_ahead(s, 1, u + ends[w], ends[w + 1] - ends[w]);
		for (uint32_t i = start; i < ends[w]; i++) {
			struct pt_expert_view v;
			if (pt_expert_store_get(s, 1, u[i], &v, NULL) != PT_OK)
				return -1;
			bad += !view_ok(c, 0, u[i], &v);
			pt_expert_store_release(s, 1, u[i]);
		}
		pt_expert_store_end_layer(s, 1);
		start = ends[w];
	}
	return bad;
}

PT_TEST(test_expert_store_prefill_waves)
{
	/* a chunk touching all 8 experts of a layer with 4 slots: resident experts first,
	 * every expert's bytes right; with read-ahead on, waves of half the slots, each read
	 * ahead while the wave before it is used; without, waves of all 4 */
	for (int ahead = 1; ahead >= 0; ahead--) {
		struct ctx c;
		pt_expert_store *s = NULL;
		REQUIRE(setup(&c, "st5.gguf") == 0);
		struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
						      .mode = PT_IO_DIRECT, .slots_per_layer = 4,
						      .no_read_ahead = !ahead };
		REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
		struct pt_expert_view v;
		REQUIRE(pt_expert_store_get(s, 1, 6, &v, NULL) == PT_OK); /* make 6 resident */
		pt_expert_store_release(s, 1, 6);
		uint32_t u[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
		CHECK_EQ_INT(eight_in_waves(&c, s, u, ahead ? 4 : 2), 0);
		CHECK_EQ_INT(u[0], 6);
		struct pt_cache_stats st;
		pt_expert_store_stats(s, 0, &st);
		CHECK_EQ_INT(st.misses, 8); /* each expert read once */
		/* wave 0 is 6 (a hit) and 0; the other six were read while a wave computed */
		CHECK_EQ_INT(st.ahead_reads, ahead ? 6 : 0);
		CHECK_EQ_INT(st.ahead_used, ahead ? 6 : 0);
		CHECK_EQ_INT(st.read_errors, 0);
		/* only each slot's first read lands in never-touched memory */
		CHECK_EQ_INT(pt_expert_store_cold_reads(s), 4);
		pt_expert_store_close(s);
		teardown(&c);
	}
}

/* .populate: the slots are faulted in at open, so no read lands in never-touched memory
 * (none goes through a kernel worker), and every expert's bytes are still right. */
PT_TEST(test_expert_store_populate)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	REQUIRE(setup(&c, "st5p.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = PT_IO_DIRECT, .slots_per_layer = 3,
					      .populate = true };
	REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
	CHECK(pt_expert_store_populate_s(s) > 0);
	uint32_t u[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	CHECK_EQ_INT(eight_in_waves(&c, s, u, 8), 0); /* 3 slots: waves of 1 */
	CHECK_EQ_INT(pt_expert_store_cold_reads(s), 0);
	pt_expert_store_close(s);
	/* without it: the open touches nothing */
	cfg.populate = false;
	REQUIRE(pt_expert_store_open(&cfg, &s, NULL) == PT_OK);
	CHECK(pt_expert_store_populate_s(s) == 0);
	pt_expert_store_close(s);
	teardown(&c);
}

/* Prefetches want[n] on layer (MoE index m) and takes every expert next() reports: each
 * one of want, once, with the file's bytes; the reported set in *seen (bit per expert).
 * Returns the status next() ended with. */
static enum pt_status drain_wave(struct ctx *c, pt_expert_store *s, uint32_t m,
				 const uint32_t *want, uint32_t n, uint32_t *seen,
				 struct pt_error *err)
{
	const uint32_t layer = c->lay.moe[m].layer;
	uint32_t e, wanted = 0;
	bool got = true;
	for (uint32_t i = 0; i < n; i++)
		wanted |= 1u << want[i];
	*seen = 0;
	enum pt_status st = pt_expert_store_prefetch(s, layer, want, n, err);
	while (st == PT_OK && got) {
		st = pt_expert_store_next(s, &e, &got, err);
		if (st != PT_OK || !got)
			break;
		CHECK(wanted & (1u << e));
		CHECK(!(*seen & (1u << e)));
		*seen |= 1u << e;
		struct pt_expert_view v;
		CHECK(pt_expert_store_get(s, layer, e, &v, err) == PT_OK);
		CHECK(view_ok(c, m, e, &v));
		pt_expert_store_release(s, layer, e);
	}
	return st;
}

/* next(): every prefetched expert reported exactly once (blocking until ready), then got =
 * false; a failed read surfaces as next's error, never as a reported expert. */
static void next_mode(enum pt_io_mode mode, bool force_pread, pt_io_fault_fn fault)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup(&c, "stn.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = mode, .slots_per_layer = 3,
					      .force_pread = force_pread, .fault = fault };
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	static const uint32_t want[3] = { 0, 3, 5 };
	const uint32_t layer = c.lay.moe[1].layer;
	uint32_t seen = 0;
	enum pt_status st = drain_wave(&c, s, 1, want, 3, &seen, &err);
	if (fault) {
		CHECK(st == PT_E_IO);
		CHECK(!(seen & (1u << 5)));
	} else {
		CHECK(st == PT_OK && seen == ((1u << 0) | (1u << 3) | (1u << 5)));
	}
	pt_expert_store_end_layer(s, layer);
	pt_expert_store_close(s);
	teardown(&c);
}

PT_TEST(test_expert_store_next_reports_each_once)
{
	next_mode(PT_IO_DIRECT, false, NULL);
	next_mode(PT_IO_BUFFERED, true, NULL);
}

PT_TEST(test_expert_store_next_read_error)
{
	next_mode(PT_IO_DIRECT, false, eio_expert5);
}

/* Read-ahead hints: the next layer's guessed experts are read while this layer computes;
 * gets return the file's bytes whether the guess was right, wrong or still in flight; the
 * counters say how many were used; no_read_ahead and mmap mode ignore the hint. */
static void ahead_mode(bool off, enum pt_io_mode mode)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup(&c, "sta.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = mode, .slots_per_layer = 5,
					      .map_base = c.file, .map_size = c.size,
					      .no_read_ahead = off };
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	const uint32_t l0 = c.lay.moe[0].layer, l1 = c.lay.moe[1].layer;
	static const uint32_t t0[2] = { 0, 1 }, guess[2] = { 3, 6 }, real[2] = { 3, 7 };
	int bad = 0;
	for (int round = 0; round < 2; round++) {
		uint32_t e;
		bool got = true;
		struct pt_expert_view v;
		REQUIRE(pt_expert_store_prefetch(s, l0, t0, 2, &err) == PT_OK);
		pt_expert_store_ahead(s, l1, guess, 2); /* reads of layer l1 start now */
		while (got && pt_expert_store_next(s, &e, &got, &err) == PT_OK && got) {
			REQUIRE(pt_expert_store_get(s, l0, e, &v, &err) == PT_OK);
			bad += !view_ok(&c, 0, e, &v);
			pt_expert_store_release(s, l0, e);
		}
		pt_expert_store_end_layer(s, l0);
		REQUIRE(pt_expert_store_prefetch(s, l1, real, 2, &err) == PT_OK);
		for (got = true; got;) {
			REQUIRE(pt_expert_store_next(s, &e, &got, &err) == PT_OK);
			if (!got)
				break;
			REQUIRE(pt_expert_store_get(s, l1, e, &v, &err) == PT_OK);
			bad += !view_ok(&c, 1, e, &v);
			pt_expert_store_release(s, l1, e);
		}
		pt_expert_store_end_layer(s, l1);
	}
	CHECK_EQ_INT(bad, 0);
	struct pt_cache_stats st;
	pt_expert_store_stats(s, 1, &st);
	if (off || mode == PT_IO_MMAP) {
		CHECK_EQ_INT(st.ahead_reads, 0);
	} else {
		CHECK_EQ_INT(st.ahead_reads, 2); /* 3 and 6 once; resident in round 2 */
		CHECK_EQ_INT(st.ahead_used, 1);  /* 3 */
		CHECK_EQ_INT(st.misses, 2);      /* 3 (read ahead) and 7 */
		CHECK_EQ_INT(st.hits, 2);        /* round 2 */
	}
	pt_expert_store_close(s);
	teardown(&c);
}

PT_TEST(test_expert_store_read_ahead)
{
	ahead_mode(false, PT_IO_DIRECT);
	ahead_mode(true, PT_IO_DIRECT);
	ahead_mode(false, PT_IO_MMAP);
}

/* The order in which reads finish, as the read engine reports them (pread workers). */
struct read_log {
	pthread_mutex_t mu;
	uint32_t n;
	bool ahead[64];
};

/* Demand reads take 30 ms; read-ahead is instant.  Records each first range's result. */
static int64_t slow_demand(void *ctx, uint64_t tag, uint32_t range, uint64_t off, int64_t res)
{
	struct read_log *log = ctx;
	const bool ahead = (tag & PT_STORE_TAG_AHEAD) != 0;
	(void)off;
	if (!ahead) {
		struct timespec ts = { 0, 30 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&log->mu);
	if (range == 0 && log->n < 64)
		log->ahead[log->n++] = ahead;
	pthread_mutex_unlock(&log->mu);
	return res;
}

static uint32_t logged(struct read_log *log)
{
	pthread_mutex_lock(&log->mu);
	const uint32_t n = log->n;
	pthread_mutex_unlock(&log->mu);
	return n;
}

/* A pread store of 5 slots a layer over c's model whose demand reads take 30 ms and whose
 * read-ahead is instant (slow_demand, logged in log), with layer 0's batch {0, 1} (two
 * misses) prefetched and the guess {3, 6} of layer 1 handed on; a poll first with nothing
 * waiting (a no-op). */
static pt_expert_store *start_slow_demand(struct ctx *c, const char *name, struct read_log *log)
{
	static const uint32_t t0[2] = { 0, 1 }, guess[2] = { 3, 6 };
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	log->n = 0;
	pthread_mutex_init(&log->mu, NULL);
	if (setup(c, name) != 0)
		return NULL;
	struct pt_expert_store_config cfg = { .model_path = c->path, .layout = &c->lay,
					      .mode = PT_IO_BUFFERED, .slots_per_layer = 5,
					      .force_pread = true, .io_threads = 4,
					      .fault = slow_demand, .fault_ctx = log };
	if (pt_expert_store_open(&cfg, &s, &err) != PT_OK) {
		teardown(c);
		return NULL;
	}
	pt_expert_store_poll(s);
	if (pt_expert_store_prefetch(s, c->lay.moe[0].layer, t0, 2, &err) != PT_OK) {
		pt_expert_store_close(s);
		teardown(c);
		return NULL;
	}
	pt_expert_store_ahead(s, c->lay.moe[1].layer, guess, 2);
	return s;
}

/* After layer 0's batch t0 = {0, 1} with the guess {3, 6} of layer 1 handed on: takes layer
 * 0's experts as next reports them, then layer 1's guesses; each view must hold the file's
 * bytes, every read must have happened once (misses first, then the guesses) and both
 * guesses must have been used.  Closes s. */
static void check_guesses_hit(struct ctx *c, pt_expert_store *s, struct read_log *log)
{
	const uint32_t l0 = c->lay.moe[0].layer, l1 = c->lay.moe[1].layer;
	static const uint32_t guess[2] = { 3, 6 };
	struct pt_error err = { 0 };
	struct pt_expert_view v;
	uint32_t e, seen = 0;
	bool got = true;
	int bad = 0;
	while (got && pt_expert_store_next(s, &e, &got, &err) == PT_OK && got) {
		CHECK(pt_expert_store_get(s, l0, e, &v, &err) == PT_OK);
		bad += !view_ok(c, 0, e, &v);
		pt_expert_store_release(s, l0, e);
		seen++;
	}
	CHECK_EQ_INT(seen, 2);
	pt_expert_store_end_layer(s, l0);
	CHECK(pt_expert_store_prefetch(s, l1, guess, 2, &err) == PT_OK);
	for (uint32_t i = 0; i < 2; i++) {
		CHECK(pt_expert_store_get(s, l1, guess[i], &v, &err) == PT_OK);
		bad += !view_ok(c, 1, guess[i], &v);
		pt_expert_store_release(s, l1, guess[i]);
	}
	pt_expert_store_end_layer(s, l1);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(logged(log), 4);
	CHECK(!log->ahead[0] && !log->ahead[1] && log->ahead[2] && log->ahead[3]);
	struct pt_cache_stats st;
	pt_expert_store_stats(s, 1, &st);
	CHECK_EQ_INT(st.ahead_reads, 2);
	CHECK_EQ_INT(st.ahead_used, 2);
	pt_expert_store_close(s);
	pthread_mutex_destroy(&log->mu);
	teardown(c);
}

/* Read-ahead waits for the demand reads in flight: it reaches the disk only once every
 * read the current layer waits for has landed (together they shared the disk and all
 * finished late).  With slow demand reads and instant guesses, a guess issued at once
 * would finish first. */
PT_TEST(test_expert_store_ahead_after_demand)
{
	struct ctx c;
	struct read_log log;
	pt_expert_store *s = start_slow_demand(&c, "std.gguf", &log);
	REQUIRE(s);
	check_guesses_hit(&c, s, &log);
}

/* The read-ahead deferred behind a layer's misses reaches the disk at a poll once those have
 * landed, with no other store call (decode polls between a group's products; before, the
 * guesses waited for the next group and the disk sat idle), and the poll's reaping loses no
 * completion: the misses are still reported, the guesses still hit. */
PT_TEST(test_expert_store_poll_starts_deferred_ahead)
{
	struct ctx c;
	struct read_log log;
	pt_expert_store *s = start_slow_demand(&c, "stp.gguf", &log);
	REQUIRE(s);
	const struct timespec tick = { 0, 10 * 1000 * 1000 };
	for (int i = 0; i < 500 && logged(&log) < 2; i++) /* the misses land (30 ms each) */
		nanosleep(&tick, NULL);
	for (int i = 0; i < 5; i++) /* no store call: the guesses stay queued */
		nanosleep(&tick, NULL);
	CHECK_EQ_INT(logged(&log), 2);
	for (int i = 0; i < 500 && logged(&log) < 4; i++) { /* polls alone start them */
		pt_expert_store_poll(s);
		nanosleep(&tick, NULL);
	}
	CHECK_EQ_INT(logged(&log), 4);
	check_guesses_hit(&c, s, &log);
}

/* Warm-up reads take 40 ms each (a slow or busy disk). */
static int64_t slow_ahead(void *ctx, uint64_t tag, uint32_t range, uint64_t off, int64_t res)
{
	(void)ctx, (void)range, (void)off;
	if (tag & PT_STORE_TAG_AHEAD) {
		struct timespec ts = { 0, 40 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return res;
}

/* A buffered pread store of 9 slots a layer over c's model whose read-ahead and warm-up
 * reads take 40 ms each (slow_ahead). */
static struct pt_expert_store_config slow_cfg(const struct ctx *c)
{
	return (struct pt_expert_store_config){ .model_path = c->path, .layout = &c->lay,
						.mode = PT_IO_BUFFERED, .slots_per_layer = 9,
						.force_pread = true, .io_threads = 2,
						.fault = slow_ahead };
}

/* Demand reads wait for room in the read queue: warm-up reads still in flight on two layers
 * (13 of the 17 the queue holds) plus 5 demand misses would overflow it.  Once this failed
 * the whole run with "18 expert reads in flight, at most 17" (a CI flake under disk load). */
PT_TEST(test_expert_store_demand_waits_for_queue_room)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup_n(&c, "stq.gguf", 32) == 0);
	struct pt_expert_store_config cfg = slow_cfg(&c);
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	const uint32_t l0 = c.lay.moe[0].layer, l1 = c.lay.moe[1].layer;
	static const uint32_t warm[9] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };
	static const uint32_t want[5] = { 20, 21, 22, 23, 24 };
	CHECK_EQ_INT(pt_expert_store_warm(s, l0, warm, 9, 5), 4);
	CHECK_EQ_INT(pt_expert_store_warm(s, l1, warm, 9, 0), 9);
	REQUIRE(pt_expert_store_prefetch(s, l0, want, 5, &err) == PT_OK);
	uint32_t e, n = 0;
	bool got = true;
	int bad = 0;
	struct pt_expert_view v;
	while (got && pt_expert_store_next(s, &e, &got, &err) == PT_OK && got) {
		REQUIRE(pt_expert_store_get(s, l0, e, &v, &err) == PT_OK);
		bad += !view_ok(&c, 0, e, &v) || e < 20 || e > 24;
		pt_expert_store_release(s, l0, e);
		n++;
	}
	CHECK_EQ_INT(err.code, PT_OK);
	CHECK_EQ_INT(n, 5);
	pt_expert_store_end_layer(s, l0);
	/* the warmed experts of layer 1 land (hits, or misses for those still in flight) */
	REQUIRE(pt_expert_store_prefetch(s, l1, warm, 9, &err) == PT_OK);
	for (uint32_t i = 0; i < 9; i++) {
		REQUIRE(pt_expert_store_get(s, l1, warm[i], &v, &err) == PT_OK);
		bad += !view_ok(&c, 1, warm[i], &v);
		pt_expert_store_release(s, l1, warm[i]);
	}
	pt_expert_store_end_layer(s, l1);
	CHECK_EQ_INT(bad, 0);
	struct pt_cache_stats st;
	pt_expert_store_stats(s, 1, &st);
	CHECK_EQ_INT(st.requests, 9);
	CHECK_EQ_INT(st.read_errors, 0);
	pt_expert_store_close(s);
	teardown(&c);
}

/* A layer acquired while its guesses still wait behind demand reads: the right guess is
 * read at once as a demand read, the wrong one is dropped unread (its slot empty again). */
PT_TEST(test_expert_store_ahead_settled_by_acquire)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup(&c, "sts.gguf") == 0);
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = PT_IO_DIRECT, .slots_per_layer = 5 };
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	const uint32_t l0 = c.lay.moe[0].layer, l1 = c.lay.moe[1].layer;
	static const uint32_t t0[2] = { 0, 1 }, guess[2] = { 3, 6 }, real[2] = { 3, 7 };
	uint32_t e, n = 0;
	bool got = true;
	struct pt_expert_view v;
	int bad = 0;
	REQUIRE(pt_expert_store_prefetch(s, l0, t0, 2, &err) == PT_OK); /* 2 demand reads */
	pt_expert_store_ahead(s, l1, guess, 2);                        /* both deferred */
	REQUIRE(pt_expert_store_prefetch(s, l1, real, 2, &err) == PT_OK);
	while (got && pt_expert_store_next(s, &e, &got, &err) == PT_OK && got) {
		REQUIRE(pt_expert_store_get(s, l1, e, &v, &err) == PT_OK);
		bad += !view_ok(&c, 1, e, &v) || (e != 3 && e != 7);
		pt_expert_store_release(s, l1, e);
		n++;
	}
	pt_expert_store_end_layer(s, l1);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(n, 2);
	struct pt_cache_stats st;
	pt_expert_store_stats(s, 1, &st);
	CHECK_EQ_INT(st.ahead_reads, 1);   /* 3: read for the acquire that wanted it */
	CHECK_EQ_INT(st.ahead_dropped, 1); /* 6: never read */
	CHECK_EQ_INT(st.ahead_used, 1);
	CHECK_EQ_INT(st.misses, 2);
	REQUIRE(pt_expert_store_prefetch(s, l1, &guess[1], 1, &err) == PT_OK); /* 6: not there */
	REQUIRE(pt_expert_store_get(s, l1, 6, &v, &err) == PT_OK);
	CHECK(view_ok(&c, 1, 6, &v));
	pt_expert_store_release(s, l1, 6);
	pt_expert_store_end_layer(s, l1);
	pt_expert_store_stats(s, 1, &st);
	CHECK_EQ_INT(st.misses, 3);
	pt_expert_store_close(s);
	teardown(&c);
}

/* Demand reads in the callback at once (pread workers), the most seen, and which expert's
 * read started first. */
struct overlap_log {
	pthread_mutex_t mu;
	uint32_t now, most, n_started, first;
	uint32_t fail_expert; /* UINT32_MAX: none */
};

static int64_t count_overlap(void *ctx, uint64_t tag, uint32_t range, uint64_t off, int64_t res)
{
	struct overlap_log *log = ctx;
	(void)off;
	if (range != 0)
		return res;
	pthread_mutex_lock(&log->mu);
	if (log->n_started++ == 0)
		log->first = (uint32_t)tag;
	if (++log->now > log->most)
		log->most = log->now;
	pthread_mutex_unlock(&log->mu);
	struct timespec ts = { 0, 4 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&log->mu);
	log->now--;
	pthread_mutex_unlock(&log->mu);
	return (uint32_t)tag == log->fail_expert ? -EIO : res;
}

/* One wave of 8 misses with a pace of depth: next() reports every expert once with its
 * bytes; returns the status next ended with. */
static enum pt_status paced_wave(uint32_t depth, struct overlap_log *log, uint32_t *seen_out)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	if (setup(&c, "stp.gguf") != 0) {
		CHECK(!"fixture");
		return PT_E_INVALID;
	}
	struct pt_expert_store_config cfg = { .model_path = c.path, .layout = &c.lay,
					      .mode = PT_IO_BUFFERED, .slots_per_layer = 8,
					      .force_pread = true, .io_threads = 6,
					      .demand_depth = depth, .fault = count_overlap,
					      .fault_ctx = log };
	CHECK(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	if (!s) {
		teardown(&c);
		return PT_E_INVALID;
	}
	static const uint32_t want[8] = { 7, 6, 5, 4, 3, 2, 1, 0 };
	const uint32_t layer = c.lay.moe[1].layer;
	uint32_t seen = 0, e;
	bool got = true;
	enum pt_status st = drain_wave(&c, s, 1, want, 8, &seen, &err);
	if (st != PT_OK)
		CHECK_CONTAINS(err.msg, "expert");
	pt_expert_store_end_layer(s, layer);
	/* the layer's slots are usable again afterwards (no paced slot left loading) */
	static const uint32_t again[2] = { 0, 1 };
	if (st == PT_OK) {
		CHECK(pt_expert_store_prefetch(s, layer, again, 2, &err) == PT_OK);
		for (int i = 0; i < 2; i++) {
			CHECK(pt_expert_store_next(s, &e, &got, &err) == PT_OK && got);
		}
		pt_expert_store_end_layer(s, layer);
	}
	pt_expert_store_close(s);
	teardown(&c);
	*seen_out = seen;
	return st;
}

/* A wave's demand reads go to the disk `demand_depth` at a time, in the wave's order, and
 * the next as each lands (all together they share the disk and the first lands late);
 * unpaced, the six read workers overlap more than two. */
PT_TEST(test_expert_store_paced_demand_reads)
{
	struct overlap_log log = { .fail_expert = UINT32_MAX };
	pthread_mutex_init(&log.mu, NULL);
	uint32_t seen = 0;
	CHECK_EQ_INT(paced_wave(2, &log, &seen), PT_OK);
	CHECK_EQ_INT(seen, 0xff);
	CHECK(log.most >= 1 && log.most <= 2);
	CHECK(log.first == 7 || log.first == 6); /* the wave's first two went first */
	CHECK_EQ_INT(log.n_started, 8);         /* each once; the second wave's two are hits */
	log = (struct overlap_log){ .fail_expert = UINT32_MAX };
	pthread_mutex_init(&log.mu, NULL);
	CHECK_EQ_INT(paced_wave(8, &log, &seen), PT_OK);
	CHECK_EQ_INT(seen, 0xff);
	CHECK(log.most > 2);
	/* a failed read among the paced ones ends the wave with the error, never a hang */
	log = (struct overlap_log){ .fail_expert = 3 };
	pthread_mutex_init(&log.mu, NULL);
	CHECK_EQ_INT(paced_wave(2, &log, &seen), PT_E_IO);
	CHECK(!(seen & (1u << 3)));
}

/* Lending slots between evaluations (issue 21): warm-up reads still in flight (slow, 40 ms)
 * land first, then slots [3, 9) of both layers are dropped; a layer then waves through 3
 * slots with every expert's bytes right, giving them back makes 9 usable again (faulted in
 * as they return, so no read into them is a cold one), and reads keep matching the file.
 * mmap mode: a no-op. */
PT_TEST(test_expert_store_lend_slots)
{
	struct ctx c;
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	REQUIRE(setup_n(&c, "stl.gguf", 32) == 0);
	struct pt_expert_store_config cfg = slow_cfg(&c);
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	const uint32_t l0 = c.lay.moe[0].layer, l1 = c.lay.moe[1].layer;
	static const uint32_t warm[9] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };
	CHECK_EQ_INT(pt_expert_store_warm(s, l0, warm, 9, 0), 9);
	CHECK_EQ_INT(pt_expert_store_warm(s, l1, warm, 9, 5), 4);
	CHECK_EQ_INT(pt_expert_store_active_slots(s), 9);
	CHECK_EQ_INT(pt_expert_store_set_slots(s, 0, &err), PT_E_INVALID);
	REQUIRE(pt_expert_store_set_slots(s, 3, &err) == PT_OK);
	CHECK_EQ_INT(pt_expert_store_active_slots(s), 3);
	uint8_t res[32];
	uint32_t kept = 0;
	for (uint32_t m = 0; m < 2; m++) {
		pt_expert_store_resident(s, m, res, 32);
		for (uint32_t i = 0; i < 32; i++)
			kept += res[i];
	}
	CHECK_EQ_INT(kept, 6); /* the warmed experts of slots 0-2 of each layer landed */
	/* a prefill layer of 8 experts through 3 slots: waves of one (half the free slots),
	 * the bytes right */
	uint32_t want[8] = { 10, 11, 12, 13, 14, 15, 16, 17 }, ends[8], nw = 0;
	int bad = 0;
	REQUIRE(pt_expert_store_waves(s, l0, want, 8, ends, &nw, &err) == PT_OK);
	CHECK_EQ_INT(nw, 8);
	for (uint32_t w = 0, lo = 0; w < nw; lo = ends[w++]) {
		REQUIRE(pt_expert_store_prefetch(s, l0, want + lo, ends[w] - lo, &err) == PT_OK);
		for (uint32_t i = lo; i < ends[w]; i++) {
			struct pt_expert_view v;
			REQUIRE(pt_expert_store_get(s, l0, want[i], &v, &err) == PT_OK);
			bad += !view_ok(&c, 0, want[i], &v);
			pt_expert_store_release(s, l0, want[i]);
		}
		pt_expert_store_end_layer(s, l0);
	}
	const uint64_t cold = pt_expert_store_cold_reads(s);
	REQUIRE(pt_expert_store_set_slots(s, 9, &err) == PT_OK);
	CHECK_EQ_INT(pt_expert_store_active_slots(s), 9);
	REQUIRE(pt_expert_store_waves(s, l0, want, 8, ends, &nw, &err) == PT_OK);
	CHECK_EQ_INT(nw, 1);
	REQUIRE(pt_expert_store_prefetch(s, l0, want, 8, &err) == PT_OK);
	for (uint32_t i = 0; i < 8; i++) {
		struct pt_expert_view v;
		REQUIRE(pt_expert_store_get(s, l0, want[i], &v, &err) == PT_OK);
		bad += !view_ok(&c, 0, want[i], &v);
		pt_expert_store_release(s, l0, want[i]);
	}
	pt_expert_store_end_layer(s, l0);
	CHECK_EQ_INT(bad, 0);
	/* the given-back slots were faulted in as they came back: no read into them is cold */
	CHECK_EQ_INT(pt_expert_store_cold_reads(s), cold);
	struct pt_cache_stats st;
	pt_expert_store_stats(s, 0, &st);
	CHECK_EQ_INT(st.read_errors, 0);
	pt_expert_store_close(s);

	/* mmap mode: nothing to lend */
	cfg.mode = PT_IO_MMAP;
	cfg.map_base = c.file;
	cfg.map_size = c.size;
	REQUIRE(pt_expert_store_open(&cfg, &s, &err) == PT_OK);
	CHECK_EQ_INT(pt_expert_store_set_slots(s, 3, &err), PT_OK);
	pt_expert_store_close(s);
	teardown(&c);
}
