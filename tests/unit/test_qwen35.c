/* test_qwen35.c - qwen35moe's Gated DeltaNet layers and recurrent-state checkpoints: the
 * chunked delta rule against the per-token reference, the checkpoint set, and an engine
 * whose rewind restores a checkpoint and replays giving logits byte-identical to a fresh
 * run of the whole conversation (F32 KV, per-token recurrence), plus the plan counting
 * checkpoint memory. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gen/ckpt.h"
#include "gen/engine.h"
#include "gen/slot.h"
#include "model/deltanet.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

static float rnd(uint64_t *s)
{
	return (float)((double)(pt_mkmodel_splitmix64(s) >> 40) / 8388608.0 - 1.0);
}

static void l2(float *x, uint32_t n)
{
	double s = 0;
	for (uint32_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	for (uint32_t i = 0; i < n; i++)
		x[i] = (float)(x[i] / sqrt(s));
}

/* n tokens of one head through n pt_dn_step calls at the scalar level (the reference) and
 * through pt_dn_chunk (chunks of 64 and a ragged tail; chunked) or pt_dn_step at the given
 * level, from the same random state: outputs and final states agree to rounding. */
static void check_chunk_at(uint32_t dk, uint32_t n, float decay, enum pt_kern_level lv,
			   bool chunked, uint32_t chunk)
{
	const struct pt_dn_geom ref = { 1, 1, dk, dk, 4, 3 * dk, true, 1e-6f,
					pt_kern_dn_ops_at(PT_KERN_LEVEL_SCALAR), 0 };
	struct pt_dn_geom g = ref;
	g.ops = pt_kern_dn_ops_at(lv);
	g.chunk = chunk;
	if (!g.ops)
		return; /* the CPU lacks the level */
	uint64_t s = 42 + dk + n;
	float *q = pt_mallocn((size_t)n * dk, sizeof(float)), *k = pt_mallocn((size_t)n * dk, 4);
	float *v = pt_mallocn((size_t)n * dk, 4), *gt = pt_mallocn(n, 4), *bt = pt_mallocn(n, 4);
	float *o1 = pt_mallocn((size_t)n * dk, 4), *o2 = pt_mallocn((size_t)n * dk, 4);
	float *S1 = pt_mallocn((size_t)dk * dk, 4), *S2 = pt_mallocn((size_t)dk * dk, 4);
	float *scr = pt_mallocn(pt_dn_chunk_scratch_floats(&g), 4);
	REQUIRE(q && k && v && gt && bt && o1 && o2 && S1 && S2 && scr);
	for (uint32_t t = 0; t < n; t++) {
		for (uint32_t i = 0; i < dk; i++) {
			q[t * dk + i] = rnd(&s);
			k[t * dk + i] = rnd(&s);
			v[t * dk + i] = rnd(&s);
		}
		l2(q + t * dk, dk);
		l2(k + t * dk, dk);
		gt[t] = decay * (0.5f + 0.5f * rnd(&s)); /* log decay <= 0 */
		bt[t] = 0.5f + 0.45f * rnd(&s);
	}
	for (uint32_t i = 0; i < dk * dk; i++)
		S1[i] = S2[i] = 0.3f * rnd(&s);
	for (uint32_t t = 0; t < n; t++)
		pt_dn_step(&ref, S1, q + t * dk, k + t * dk, v + t * dk, gt[t], bt[t], o1 + t * dk);
	if (chunked)
		pt_dn_chunk(&g, S2, n, q, k, dk, v, dk, gt, bt, 1, o2, dk, scr);
	for (uint32_t t = 0; !chunked && t < n; t++)
		pt_dn_step(&g, S2, q + t * dk, k + t * dk, v + t * dk, gt[t], bt[t], o2 + t * dk);
	double emax = 0, omax = 0, smax = 0, es = 0;
	for (uint32_t i = 0; i < n * dk; i++) {
		emax = fmax(emax, fabs((double)o1[i] - o2[i]));
		omax = fmax(omax, fabs((double)o1[i]));
	}
	for (uint32_t i = 0; i < dk * dk; i++) {
		es = fmax(es, fabs((double)S1[i] - S2[i]));
		smax = fmax(smax, fabs((double)S1[i]));
	}
	if (!(emax <= 1e-4 * omax + 1e-6 && es <= 1e-4 * smax + 1e-6))
		pt_test_fail(__FILE__, __LINE__, "%s %s dk %u n %u decay %g: output err %g (max %g), "
			     "state err %g (max %g)", pt_kern_level_name(lv),
			     chunked ? "chunked" : "steps", dk, n, decay, emax, omax, es, smax);
	float *bufs[] = { q, k, v, gt, bt, o1, o2, S1, S2, scr };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		pt_free(bufs[i]);
}

static void check_chunk(uint32_t dk, uint32_t n, float decay)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		/* the default chunk, smaller and larger ones (ragged chunk tails, register-tile
		 * row and column tails) */
		static const uint32_t chunks[] = { 0, 5, 16, 128 };
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
			check_chunk_at(dk, n, decay, (enum pt_kern_level)lv, true, chunks[c]);
		check_chunk_at(dk, n, decay, (enum pt_kern_level)lv, false, 0);
	}
}

PT_TEST(test_dn_chunk_matches_token_steps)
{
	check_chunk(32, 1, -0.5f);
	check_chunk(32, 64, -0.5f);
	check_chunk(64, 150, -0.2f);
	check_chunk(128, 70, -3.0f);   /* strong decay: e^G underflows within a chunk */
	check_chunk(16, 200, -0.01f);  /* almost no decay: the state grows */
	check_chunk(20, 33, -0.3f);    /* vector tails */
}

PT_TEST(test_dn_conv_window_and_heads)
{
	/* conv over the window (w . [s0 s1 s2 x]) then silu; the window shifts in x */
	const struct pt_dn_geom g = { 1, 2, 2, 2, 4, 8, true, 1e-6f, NULL, 0 };
	float w[8 * 4], conv[8 * 3] = { 0 }, x[8], y[8];
	for (int i = 0; i < 32; i++)
		w[i] = (float)(i % 4) * 0.25f;
	for (int c = 0; c < 8; c++)
		x[c] = (float)(c + 1);
	pt_dn_conv_token(&g, w, conv, x, y);
	CHECK(conv[2] == 1.0f && conv[0] == 0.0f && conv[3 * 7 + 2] == 8.0f);
	const float z = 8.0f * 0.75f;
	CHECK(fabsf(y[7] - z / (1.0f + expf(-z))) < 1e-6f); /* a v channel: not normalised */
	CHECK(fabsf(y[0] * y[0] + y[1] * y[1] - 1.0f) < 1e-5f); /* q head L2-normalised */
	/* tiled value heads: h mod n_k; grouped: h / (n_v / n_k) */
	const struct pt_dn_geom t = { 2, 4, 8, 8, 4, 64, true, 1e-6f, NULL, 0 };
	struct pt_dn_geom gr = t;
	gr.tiled = false;
	CHECK(pt_dn_key_head(&t, 1) == 1 && pt_dn_key_head(&t, 2) == 0);
	CHECK(pt_dn_key_head(&gr, 1) == 0 && pt_dn_key_head(&gr, 2) == 1);
}

PT_TEST(test_ckpt_set_bounds_and_order)
{
	struct pt_ckpt_set s;
	struct pt_error err = { 0 };
	REQUIRE(pt_ckpt_init(&s, 3, 4, &err) == PT_OK);
	float st[4] = { 1, 2, 3, 4 };
	CHECK(pt_ckpt_put(&s, 0, true, st, &err) == PT_OK && s.n == 0); /* pos 0: zero state */
	CHECK(pt_ckpt_put(&s, 10, true, st, &err) == PT_OK);
	CHECK(pt_ckpt_put(&s, 30, false, st, &err) == PT_OK);
	CHECK(pt_ckpt_put(&s, 20, false, st, &err) == PT_OK);
	CHECK(s.n == 3 && s.c[0].pos == 10 && s.c[1].pos == 20 && s.c[2].pos == 30);
	CHECK(pt_ckpt_find(&s, 25)->pos == 20 && pt_ckpt_find(&s, 9) == NULL);
	CHECK(pt_ckpt_find(&s, 30)->pos == 30);
	st[0] = 9;
	CHECK(pt_ckpt_put(&s, 40, true, st, &err) == PT_OK); /* full: the oldest periodic goes */
	CHECK(s.n == 3 && s.c[0].pos == 10 && s.c[1].pos == 30 && s.c[2].pos == 40);
	CHECK(s.c[2].state[0] == 9.0f && pt_ckpt_bytes(&s) == 3 * 4 * sizeof(float));
	pt_ckpt_drop_after(&s, 35);
	CHECK(s.n == 2 && pt_ckpt_find(&s, 1000)->pos == 30);
	pt_ckpt_drop_after(&s, -1);
	CHECK(s.n == 0);
	pt_ckpt_fini(&s);
}

static pt_engine *open_q35(const char *path, bool exact, uint32_t batch, struct pt_error *err)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 256,
				    .n_batch = batch, .memory_budget = 1ull << 30, .no_lock = true,
				    .io_mode = "mmap", .ckpt_every = 32, .ckpt_max = 3 };
	if (exact) { /* row-independent numerics: any split of the tokens gives the same bytes */
		o.kv_type = PT_KV_F32;
		o.dn_chunk_min = UINT32_MAX;
	}
	pt_engine *e = NULL;
	return pt_engine_open(&o, &e, err) == PT_OK ? e : NULL;
}

#define T1 70   /* turn 1: prompt + reply */
#define KEEP 60 /* the next prompt shares 60 tokens (a re-rendered reply) */
#define T2 40   /* then 40 new ones */

static uint32_t conv_tok(uint32_t i, bool second)
{
	if (second && i >= KEEP)
		return (i * 53 + 11) % 240 + 5;
	return (i * 37 + 5) % 240 + 5;
}

/* Turn 1 (prefill + decode) with checkpoints, rewind into it, turn 2: each of turn 2's
 * rows equals the fresh run of the whole conversation; the rewind restored the periodic
 * checkpoint at 32 and replayed 28 tokens. */
static void check_restore_replay(const char *path, bool exact)
{
	struct pt_error err = { 0 };
	pt_engine *a = open_q35(path, exact, 16, &err), *b = open_q35(path, exact, 64, &err);
	REQUIRE(a && b);
	const uint32_t nv = pt_engine_n_vocab(a), n2 = KEEP + T2;
	uint32_t c1[T1], c2[KEEP + T2];
	for (uint32_t i = 0; i < T1; i++)
		c1[i] = conv_tok(i, false);
	for (uint32_t i = 0; i < n2; i++)
		c2[i] = conv_tok(i, true);
	float *la = pt_mallocn((size_t)n2 * nv, sizeof(float));
	float *lb = pt_mallocn((size_t)n2 * nv, sizeof(float));
	REQUIRE(la && lb);
	CHECK(pt_engine_eval(a, c1, 50, la, false, &err) == PT_OK);
	CHECK(pt_engine_seq_checkpoint(a, 0, &err) == PT_OK); /* prompt end */
	for (uint32_t i = 50; i < T1; i++) /* the reply, token by token */
		CHECK(pt_engine_eval(a, c1 + i, 1, la, false, &err) == PT_OK);
	CHECK(pt_engine_seq_checkpoint(a, 0, &err) == PT_OK); /* reply end */
	struct pt_engine_stats st;
	pt_engine_stats(a, &st);
	CHECK(st.ckpt_saved == 4 && st.ckpt_bytes == 3 * pt_hparams_rs_bytes(
						    &pt_engine_model(a)->hp)); /* 32, 50, 64, 70 */
	/* 60: the newest checkpoint at or before it is 50 (the prompt end) */
	CHECK(pt_engine_rewind(a, KEEP, &err) == PT_OK);
	CHECK(pt_engine_pos(a) == KEEP && pt_engine_seq_last_replay(a, 0) == KEEP - 50);
	CHECK(pt_engine_eval(a, c2 + KEEP, T2, la + (size_t)KEEP * nv, true, &err) == PT_OK);
	CHECK(pt_engine_eval(b, c2, n2, lb, true, &err) == PT_OK);
	if (exact) {
		CHECK(memcmp(la + (size_t)KEEP * nv, lb + (size_t)KEEP * nv,
			     (size_t)T2 * nv * sizeof(float)) == 0);
	} else { /* chunked prefill and F16 tiled attention: agreement to rounding */
		double dmax = 0;
		for (size_t i = (size_t)KEEP * nv; i < (size_t)n2 * nv; i++)
			dmax = fmax(dmax, fabs((double)la[i] - lb[i]));
		if (!(dmax < 1e-1)) /* chunk cuts differ: rounding, amplified by random weights */
			pt_test_fail(__FILE__, __LINE__, "restore+replay vs fresh: max |dlogit| %g",
				     dmax);
	}
	/* a rewind below every checkpoint replays from 0; one onto a checkpoint replays none */
	CHECK(pt_engine_rewind(a, 20, &err) == PT_OK && pt_engine_seq_last_replay(a, 0) == 20);
	CHECK(pt_engine_eval(a, c2 + 20, 44, la, false, &err) == PT_OK); /* 64: periodic */
	CHECK(pt_engine_rewind(a, 32, &err) == PT_OK && pt_engine_seq_last_replay(a, 0) == 0);
	pt_engine_stats(a, &st);
	CHECK(st.ckpt_restored == 2 && st.replayed_tokens == (KEEP - 50) + 20);
	CHECK(strstr(pt_engine_plan_line(a), "checkpoints") != NULL);
	pt_free(la);
	pt_free(lb);
	pt_engine_close(a);
	pt_engine_close(b);
}

PT_TEST(test_qwen35_checkpoint_restore_replay)
{
	const char *path = pt_test_tmpfile("q35_ckpt.gguf");
	struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN35MOE, .preset = "tiny",
				     .mix = PT_MIX_Q8_0, .seed = 3, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
	check_restore_replay(path, true);
	check_restore_replay(path, false);
}

/* --- a conversation edited in its middle (the server's case: checkpoints at message
 * boundaries as the prompt goes in) --- */

#define EC_N 120      /* prompt ids */
#define EC_GEN 3      /* greedy ids after it */
#define EC_EDIT 80    /* the edit: ids 80..84 of message 4 */
static const int64_t ec_marks[] = { 20, 45, 70, 95, 118 }; /* message boundaries */

struct ec_logits {
	uint32_t nv, n;
	float *l; /* [EC_GEN][nv]: the raw logits of each sampled id */
};

static bool ec_on_token(void *ctx, int32_t id, const float *logits)
{
	(void)id;
	struct ec_logits *c = ctx;
	if (c->n < EC_GEN)
		memcpy(c->l + (size_t)c->n++ * c->nv, logits, c->nv * sizeof(float));
	return true;
}

static uint32_t ec_tok(uint32_t i, bool edited)
{
	if (edited && i >= EC_EDIT && i < EC_EDIT + 5)
		return (i * 91 + 7) % 240 + 5;
	return (i * 37 + 11) % 240 + 5;
}

/* One reply on slot 0 of e: prompt c (EC_N ids), message-boundary marks, prefill pieces of
 * 32; the logits of its EC_GEN greedy ids into lg, its stats into st. */
static void ec_reply(pt_engine *e, const int32_t *c, struct ec_logits *lg,
		     struct pt_gen_stats *st)
{
	struct pt_error err = { 0 };
	struct pt_gen_slot_opts o = { 0 };
	pt_sampler_opts_default(&o.sampler);
	o.sampler.temperature = 0.0f;
	o.max_new = EC_GEN;
	o.prefill_chunk = 32;
	o.ckpt_marks = ec_marks;
	o.n_ckpt_marks = sizeof ec_marks / sizeof ec_marks[0];
	o.on_token = ec_on_token;
	o.token_ctx = lg;
	pt_gen_slot *s = NULL;
	REQUIRE(pt_gen_slot_create(e, 0, &o, &s, &err) == PT_OK);
	lg->n = 0;
	CHECK(pt_gen_slot_start(s, &o, c, EC_N, &err) == PT_OK);
	while (pt_gen_slot_busy(s))
		if (pt_gen_step(e, &s, 1, &err) != PT_OK)
			break;
	*st = *pt_gen_slot_stats(s);
	pt_gen_slot_destroy(s);
}

static pt_engine *ec_open(const char *path, enum pt_kv_type kv, struct pt_error *err)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 256,
				    .n_batch = 16, .memory_budget = 1ull << 30, .no_lock = true,
				    .io_mode = "mmap", .ckpt_max = 8, .kv_type = kv };
	pt_engine *e = NULL;
	return pt_engine_open(&o, &e, err) == PT_OK ? e : NULL;
}

/* The edited conversation on a warm engine restores the boundary checkpoint at 70 (the
 * nearest at or before the edit), evaluates from there, and its logits are byte-identical
 * to a fresh engine's run of the whole edited conversation: with the default chunked delta
 * rule, F32, F16 and Q8_0 KV, because both evaluate the same pieces. */
static void check_edit_mid(const char *path, enum pt_kv_type kv)
{
	struct pt_error err = { 0 };
	pt_engine *a = ec_open(path, kv, &err), *b = ec_open(path, kv, &err);
	REQUIRE(a && b);
	const uint32_t nv = pt_engine_n_vocab(a);
	int32_t c1[EC_N], c2[EC_N];
	for (uint32_t i = 0; i < EC_N; i++) {
		c1[i] = (int32_t)ec_tok(i, false);
		c2[i] = (int32_t)ec_tok(i, true);
	}
	struct ec_logits la = { nv, 0, pt_mallocn((size_t)EC_GEN * nv, sizeof(float)) };
	struct ec_logits lb = { nv, 0, pt_mallocn((size_t)EC_GEN * nv, sizeof(float)) };
	REQUIRE(la.l && lb.l);
	struct pt_gen_stats st;
	ec_reply(a, c1, &la, &st);
	CHECK(st.reused_tokens == 0 && st.replayed_tokens == 0 && la.n == EC_GEN);
	struct pt_engine_stats es;
	pt_engine_stats(a, &es);
	const uint64_t rs = pt_hparams_rs_bytes(&pt_engine_model(a)->hp);
	/* 5 boundaries + the prompt end + the reply end, within the 8 the plan counts */
	CHECK(es.ckpt_bytes == 7 * rs && es.ckpt_saved == 7);
	ec_reply(a, c2, &la, &st);
	CHECK(st.reused_tokens == EC_EDIT && st.replayed_tokens == EC_EDIT - 70);
	CHECK(st.prefill_tokens == EC_N - 70 && la.n == EC_GEN);
	pt_engine_stats(a, &es);
	CHECK(es.ckpt_restored == 1 && es.replayed_tokens == EC_EDIT - 70);
	ec_reply(b, c2, &lb, &st); /* fresh */
	CHECK(st.reused_tokens == 0 && lb.n == EC_GEN);
	if (memcmp(la.l, lb.l, (size_t)EC_GEN * nv * sizeof(float)) != 0)
		pt_test_fail(__FILE__, __LINE__, "kv %d: edited conversation's logits differ from "
			     "a fresh run", (int)kv);
	pt_free(la.l);
	pt_free(lb.l);
	pt_engine_close(a);
	pt_engine_close(b);
}

PT_TEST(test_qwen35_edit_mid_conversation)
{
	const char *path = pt_test_tmpfile("q35_edit.gguf");
	struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN35MOE, .preset = "tiny",
				     .mix = PT_MIX_Q8_0, .seed = 5, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
	check_edit_mid(path, PT_KV_F32);
	check_edit_mid(path, PT_KV_F16);
	check_edit_mid(path, PT_KV_Q8_0);
}

/* Eviction keeps the newest and spreads the rest: the copy whose removal leaves the
 * smallest hole goes (periodic holes count half), a new copy that would be the first to go
 * is not stored, and a full set never holds more than max states. */
PT_TEST(test_ckpt_eviction_spreads)
{
	struct pt_ckpt_set s;
	struct pt_error err = { 0 };
	REQUIRE(pt_ckpt_init(&s, 4, 2, &err) == PT_OK);
	const float st[2] = { 1, 2 };
	const int64_t turns[] = { 100, 110, 120, 400, 700 };
	for (size_t i = 0; i < 5; i++)
		CHECK(pt_ckpt_put(&s, turns[i], true, st, &err) == PT_OK);
	/* holes: 100 -> 110 (0..110 = 110), 110 -> 20, 120 -> 290, 400 -> 580: 110 goes */
	CHECK(s.n == 4 && s.c[0].pos == 100 && s.c[1].pos == 120 && s.c[2].pos == 400 &&
	      s.c[3].pos == 700);
	/* periodic 512: holes 100 -> 120 (from 0), 120 -> 300, 400 -> 392, 512 -> 300 / 2 =
	 * 150, doubled for turn copies: 100 goes (the zero state is near) */
	CHECK(pt_ckpt_put(&s, 512, false, st, &err) == PT_OK);
	CHECK(s.n == 4 && s.c[0].pos == 120 && s.c[1].pos == 400 && s.c[2].pos == 512 &&
	      s.c[3].pos == 700);
	CHECK(pt_ckpt_put(&s, 105, false, st, &err) == PT_OK); /* hole 120 / 2: first to go */
	CHECK(s.n == 4 && s.c[0].pos == 120 && s.c[1].pos == 400);
	/* turn 900: the periodic 512 (hole 300 / 2) goes, the newest always stays */
	CHECK(pt_ckpt_put(&s, 900, true, st, &err) == PT_OK);
	CHECK(s.n == 4 && s.c[0].pos == 120 && s.c[1].pos == 400 && s.c[2].pos == 700 &&
	      s.c[3].pos == 900 && pt_ckpt_bytes(&s) == 4 * 2 * sizeof(float));
	pt_ckpt_fini(&s);
}
