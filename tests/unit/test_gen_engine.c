/* test_gen_engine.c - the engine object: eval with all / last-row logits, rewind (linear
 * layers and the sliding-ring replay), model lock, context limit, counters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/engine.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

#define N_TOK 40

static bool write_tiny(const char *path, enum pt_arch arch)
{
	struct pt_mkmodel_opts o = { .arch = arch, .preset = "tiny", .mix = PT_MIX_Q8_0,
				     .seed = 7, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	return pt_mkmodel_write(&o, &err) == PT_OK;
}

static pt_engine *open_engine(const char *path, bool no_lock, struct pt_error *err)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 64, .n_batch = 4,
				    .memory_budget = 1ull << 30, .expert_slots = 4,
				    .io_mode = "direct", .no_lock = no_lock };
	pt_engine *e = NULL;
	if (pt_engine_open(&o, &e, err) != PT_OK)
		return NULL;
	return e;
}

/* Evaluates N_TOK tokens with every row's logits, then checks that rewinding to `back` and
 * re-evaluating the rest reproduces the last row bit for bit. */
static void check_rewind(enum pt_arch arch, const char *name, bool expect_replay)
{
	const char *path = pt_test_tmpfile(name);
	CHECK(write_tiny(path, arch));
	struct pt_error err = { 0 };
	pt_engine *e = open_engine(path, true, &err);
	CHECK(e != NULL);
	if (!e)
		return;
	const uint32_t nv = pt_engine_n_vocab(e);
	uint32_t toks[N_TOK];
	for (uint32_t i = 0; i < N_TOK; i++)
		toks[i] = (i * 37 + 5) % 200 + 3;
	float *all = pt_mallocn((size_t)N_TOK * nv, sizeof(float));
	float *last = pt_mallocn(nv, sizeof(float));
	CHECK(all && last);
	CHECK(pt_engine_eval(e, toks, N_TOK, all, true, &err) == PT_OK);
	CHECK(pt_engine_pos(e) == N_TOK);
	CHECK(memcmp(pt_engine_tokens(e), toks, sizeof toks) == 0);
	const struct pt_hparams *hp = &pt_engine_model(e)->hp;
	/* the sliding ring holds n_swa + n_batch - 1 positions: rewinding to 20 from 40 must
	 * replay when the window of 20 has been overwritten */
	const int64_t need = 20 - (int64_t)hp->n_swa + 1, cap = (int64_t)hp->n_swa + 4 - 1;
	const bool ring_lost = hp->n_swa && need > 0 && cap < 64 && need < N_TOK - cap;
	CHECK(ring_lost == expect_replay);
	CHECK(pt_engine_rewind(e, 20, &err) == PT_OK);
	CHECK(pt_engine_pos(e) == 20);
	CHECK(pt_engine_eval(e, toks + 20, N_TOK - 20, last, false, &err) == PT_OK);
	CHECK(memcmp(last, all + (size_t)(N_TOK - 1) * nv, nv * sizeof(float)) == 0);
	/* decode-style: rewind one token and evaluate it alone */
	CHECK(pt_engine_rewind(e, N_TOK - 1, &err) == PT_OK);
	CHECK(pt_engine_eval(e, toks + N_TOK - 1, 1, last, false, &err) == PT_OK);
	CHECK(memcmp(last, all + (size_t)(N_TOK - 1) * nv, nv * sizeof(float)) == 0);
	CHECK(pt_engine_rewind(e, N_TOK + 1, &err) == PT_E_INVALID);
	struct pt_engine_stats st;
	pt_engine_stats(e, &st);
	CHECK(st.misses > 0 && st.hits + st.misses > 0 && st.bytes_read > 0);
	CHECK(st.peak_rss_bytes > 0 && st.slots_per_layer == 4);
	CHECK(st.prefill_tokens == N_TOK + 20 && st.decode_tokens == 1);
	pt_free(all);
	pt_free(last);
	pt_engine_close(e);
}

PT_TEST(test_gen_engine_rewind_linear)
{
	check_rewind(PT_ARCH_QWEN3MOE, "eng_qwen.gguf", false);
}

PT_TEST(test_gen_engine_rewind_sliding_replays)
{
	check_rewind(PT_ARCH_GEMMA4, "eng_gemma.gguf", true);
}

PT_TEST(test_gen_engine_lock_and_limits)
{
	const char *path = pt_test_tmpfile("eng_lock.gguf");
	CHECK(write_tiny(path, PT_ARCH_BAILINGMOE2));
	struct pt_error err = { 0 };
	pt_engine *a = open_engine(path, false, &err);
	CHECK(a != NULL);
	pt_engine *b = open_engine(path, false, &err);
	CHECK(b == NULL && err.code == PT_E_BUSY);
	pt_error_clear(&err);
	pt_engine *c = open_engine(path, true, &err); /* --no-lock */
	CHECK(c != NULL);
	uint32_t toks[65] = { 0 };
	float *l = a ? pt_mallocn(pt_engine_n_vocab(a), sizeof(float)) : NULL;
	CHECK(l != NULL);
	if (a && l) {
		CHECK(pt_engine_n_ctx(a) == 64);
		pt_error_clear(&err);
		CHECK(pt_engine_eval(a, toks, 65, l, false, &err) == PT_E_LIMIT);
		CHECK(pt_engine_pos(a) == 0);
		CHECK(strstr(pt_engine_plan_line(a), "slots/layer") != NULL);
	}
	pt_free(l);
	pt_engine_close(c);
	pt_engine_close(a);
	struct pt_engine_opts o = { .model_path = path, .memory_budget = 1 << 20, .no_lock = true };
	pt_error_clear(&err);
	CHECK(pt_engine_open(&o, &b, &err) == PT_E_LIMIT && b == NULL);
	CHECK(strstr(err.msg, "smallest budget that works") != NULL);
}

/* Opens path with io_mode / slots / budget, evaluates N_TOK tokens, returns the last row's
 * logits (caller frees) and the expert source description. */
static uint32_t g_nv; /* the last eval_with's vocabulary size */

static float *eval_with(const char *path, const char *io, uint32_t slots, uint64_t budget,
			char *engine, size_t n_engine, char *plan, size_t n_plan)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 1, .n_ctx = 64, .n_batch = 8,
				    .memory_budget = budget, .expert_slots = slots, .io_mode = io,
				    .no_lock = true };
	struct pt_error err = { 0 };
	pt_engine *e = NULL;
	uint32_t toks[N_TOK];
	for (uint32_t i = 0; i < N_TOK; i++)
		toks[i] = (i * 53 + 11) % 200 + 3;
	if (pt_engine_open(&o, &e, &err) != PT_OK)
		return NULL;
	g_nv = pt_engine_n_vocab(e);
	float *l = pt_mallocn(g_nv, sizeof(float));
	if (l && pt_engine_eval(e, toks, N_TOK, l, false, &err) != PT_OK) {
		pt_free(l);
		l = NULL;
	}
	struct pt_engine_stats st;
	pt_engine_stats(e, &st);
	snprintf(engine, n_engine, "%s", st.io_engine);
	snprintf(plan, n_plan, "%s", pt_engine_plan_line(e));
	pt_engine_close(e);
	return l;
}

/* Auto mode maps the model when every expert fits the budget, streams when it does not or
 * when slots or a mode are given; logits are the same bytes either way. */
PT_TEST(test_gen_engine_auto_mmap_when_everything_fits)
{
	const char *path = pt_test_tmpfile("eng_auto.gguf");
	REQUIRE(write_tiny(path, PT_ARCH_QWEN3MOE));
	char eng[4][200], plan[4][600];
	float *fits = eval_with(path, NULL, 0, 1ull << 30, eng[0], 200, plan[0], 600);
	float *forced = eval_with(path, "direct", 0, 1ull << 30, eng[1], 200, plan[1], 600);
	float *slots = eval_with(path, NULL, 5, 1ull << 30, eng[2], 200, plan[2], 600);
	REQUIRE(fits && forced && slots);
	CHECK_CONTAINS(eng[0], "mmap (every expert fits the budget");
	CHECK_CONTAINS(plan[0], "every expert fits: mapped");
	CHECK_CONTAINS(eng[1], "O_DIRECT");
	CHECK_CONTAINS(eng[2], "5 slots/layer");
	/* a budget below every-expert: the planner's minimum plus a little, from the refusal */
	struct pt_engine_opts o = { .model_path = path, .memory_budget = 1 << 20, .n_ctx = 64,
				    .n_batch = 8, .no_lock = true };
	struct pt_error err = { 0 };
	pt_engine *e = NULL;
	REQUIRE(pt_engine_open(&o, &e, &err) == PT_E_LIMIT);
	const char *at = strstr(err.msg, "works: ");
	REQUIRE(at != NULL);
	const uint64_t min = strtoull(at + 7, NULL, 10);
	float *tight = eval_with(path, NULL, 0, min, eng[3], 200, plan[3], 600);
	REQUIRE(tight != NULL);
	CHECK_CONTAINS(eng[3], "slots/layer");
	CHECK(strstr(plan[3], "every expert fits") == NULL);
	const size_t nv = g_nv;
	CHECK(memcmp(fits, forced, nv * sizeof(float)) == 0);
	CHECK(memcmp(fits, slots, nv * sizeof(float)) == 0);
	CHECK(memcmp(fits, tight, nv * sizeof(float)) == 0);
	pt_free(fits);
	pt_free(forced);
	pt_free(slots);
	pt_free(tight);
}

/* pt_engine_set_device (issue 16): sequence 0 goes to the device pass - eval, position,
 * rewind, and a truncate the device refuses (PT_E_LIMIT) replayed from 0 with the kept
 * history.  A fake device: logits[v] = the token evaluated + v, its own position. */
struct fake_dev {
	int64_t pos;
	uint32_t evals, truncates, replayed;
	uint32_t seen[64];
	int64_t refuse_below; /* truncate to a position below this: PT_E_LIMIT */
	uint32_t nv;
};

static enum pt_status fake_eval(void *ctx, const uint32_t *t, uint32_t n, float *logits,
				bool all, struct pt_error *err)
{
	struct fake_dev *d = ctx;
	if (d->pos + n > 64)
		return pt_error_set(err, PT_E_LIMIT, "fake device full");
	d->evals++;
	for (uint32_t i = 0; i < n; i++) {
		d->seen[d->pos++] = t[i];
		float *l = logits && all ? logits + (size_t)i * d->nv
			   : logits && i + 1 == n ? logits : NULL;
		for (uint32_t v = 0; l && v < d->nv; v++)
			l[v] = (float)t[i] + (float)v;
	}
	return PT_OK;
}

static int64_t fake_pos(void *ctx)
{
	return ((struct fake_dev *)ctx)->pos;
}

static enum pt_status fake_truncate(void *ctx, int64_t pos, struct pt_error *err)
{
	struct fake_dev *d = ctx;
	d->truncates++;
	if (pos > 0 && pos < d->refuse_below)
		return pt_error_set(err, PT_E_LIMIT, "fake ring lost");
	d->pos = pos;
	return PT_OK;
}

PT_TEST(test_gen_engine_device_pass)
{
	const char *path = pt_test_tmpfile("engine_dev.gguf");
	CHECK(write_tiny(path, PT_ARCH_QWEN3MOE));
	struct pt_error err = { 0 };
	pt_engine *e = open_engine(path, true, &err);
	REQUIRE(e != NULL);
	const uint32_t nv = pt_engine_n_vocab(e);
	struct fake_dev d = { .nv = nv, .refuse_below = 8 };
	const struct pt_engine_device dev = { &d, fake_eval, fake_pos, fake_truncate };
	pt_engine_set_device(e, &dev);
	uint32_t toks[12];
	for (uint32_t i = 0; i < 12; i++)
		toks[i] = 10 + i;
	float *l = pt_mallocn(nv, sizeof(float));
	REQUIRE(l != NULL);
	CHECK(pt_engine_eval(e, toks, 12, l, false, &err) == PT_OK);
	CHECK(d.pos == 12 && pt_engine_pos(e) == 12 && l[0] == 21.0f && l[3] == 24.0f);
	CHECK(memcmp(pt_engine_tokens(e), toks, sizeof toks) == 0);
	CHECK(pt_engine_rewind(e, 10, &err) == PT_OK && d.pos == 10 && pt_engine_pos(e) == 10);
	/* refused: truncate to 0, then the kept 5 tokens replayed through the device */
	const uint32_t before = d.evals;
	CHECK(pt_engine_rewind(e, 5, &err) == PT_OK);
	CHECK(d.pos == 5 && d.evals == before + 1 && memcmp(d.seen, toks, 5 * sizeof *toks) == 0);
	CHECK(pt_engine_rewind(e, 6, &err) == PT_E_INVALID); /* past the end */
	CHECK(pt_engine_eval(e, toks, 60, NULL, false, &err) == PT_E_LIMIT); /* n_ctx 64 */
	pt_engine_set_device(e, NULL); /* the CPU pass again: still at its own position 0 */
	CHECK(pt_engine_pos(e) == 0);
	pt_free(l);
	pt_engine_close(e);
	remove(path);
}
