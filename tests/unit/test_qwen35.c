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
