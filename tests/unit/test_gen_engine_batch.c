/* test_gen_engine_batch.c - several sequences in one engine: a decode batch gives every row
 * the bytes of that token evaluated alone on its sequence (three archs, three weight types,
 * mapped and streamed experts), one expert fetch serves every row routed to it, per-sequence
 * rewind, KV snapshots (prompt cache) and the memory plan with n_seq caches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/engine.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

#define NSEQ 4
#define STEPS 6
#define CTX 64

static bool write_model(const char *path, enum pt_arch arch, enum pt_mix mix)
{
	struct pt_mkmodel_opts o = { .arch = arch, .preset = "tiny", .mix = mix, .seed = 11,
				     .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	return pt_mkmodel_write(&o, &err) == PT_OK;
}

/* streamed: O_DIRECT reads into top-k + 1 slots per layer (a thrashing cache); else the
 * mapping. */
static pt_engine *open_n(const char *path, uint32_t n_seq, bool streamed, uint64_t cache,
			 struct pt_error *err)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = CTX, .n_batch = 8,
				    .memory_budget = 1ull << 30, .no_lock = true,
				    .io_mode = streamed ? "direct" : "mmap", .n_seq = n_seq,
				    .prompt_cache_bytes = cache };
	if (streamed)
		o.expert_slots = 5;
	pt_engine *e = NULL;
	if (pt_engine_open(&o, &e, err) != PT_OK)
		return NULL;
	return e;
}

static uint32_t prompt_len(uint32_t s)
{
	return 5 + 11 * s; /* 5 .. 38: gemma4's sliding rings (32 slots) wrap on the last */
}

static uint32_t prompt_tok(uint32_t s, uint32_t i)
{
	return (i * 37 + s * 101 + 7) % 250 + 3;
}

static uint32_t argmax(const float *l, uint32_t n)
{
	uint32_t b = 0;
	for (uint32_t i = 1; i < n; i++)
		if (l[i] > l[b])
			b = i;
	return b;
}

/* Which sequences step t decodes, in the order given (all but one on odd steps, reversed on
 * even ones: rows must not depend on who else is in the batch or where). */
static uint32_t step_seqs(uint32_t t, uint32_t *seqs)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < NSEQ; i++) {
		const uint32_t s = t % 2 ? i : NSEQ - 1 - i;
		if (t % 2 && s == t % NSEQ)
			continue;
		seqs[n++] = s;
	}
	return n;
}

/* Runs the batched schedule on an NSEQ engine and records every decoded row's logits in
 * out[s][step] (steps a sequence skipped stay NaN-free zero and are skipped by the
 * reference too); the tokens fed are greedy choices. */
static bool run_batched(pt_engine *e, uint32_t nv, float *out, uint32_t *fed)
{
	struct pt_error err = { 0 };
	float *last = pt_mallocn(nv, sizeof(float));
	uint32_t next[NSEQ], toks[64];
	bool ok = last != NULL;
	for (uint32_t s = 0; ok && s < NSEQ; s++) {
		for (uint32_t i = 0; i < prompt_len(s); i++)
			toks[i] = prompt_tok(s, i);
		ok = pt_engine_seq_eval(e, s, toks, prompt_len(s), last, false, &err) == PT_OK;
		next[s] = argmax(last, nv);
	}
	for (uint32_t t = 0; ok && t < STEPS; t++) {
		uint32_t seqs[NSEQ], tk[NSEQ];
		const uint32_t n = step_seqs(t, seqs);
		for (uint32_t i = 0; i < n; i++)
			tk[i] = next[seqs[i]];
		ok = pt_engine_decode_batch(e, seqs, tk, n, NULL, &err) == PT_OK;
		const float *bl = pt_engine_batch_logits(e);
		for (uint32_t i = 0; ok && i < n; i++) {
			const uint32_t s = seqs[i];
			memcpy(out + ((size_t)s * STEPS + t) * nv, bl + (size_t)i * nv,
			       nv * sizeof(float));
			fed[s * STEPS + t] = tk[i];
			next[s] = argmax(bl + (size_t)i * nv, nv);
		}
	}
	if (!ok)
		fprintf(stderr, "batched run: %s\n", err.msg);
	pt_free(last);
	return ok;
}

/* The same tokens one sequence at a time on a one-sequence engine: each step's logits must
 * be the batched row's bytes.  Returns the number of differing rows. */
static int compare_single(pt_engine *e, uint32_t nv, const float *out, const uint32_t *fed)
{
	struct pt_error err = { 0 };
	float *l = pt_mallocn(nv, sizeof(float));
	uint32_t toks[64];
	int bad = 0;
	for (uint32_t s = 0; l && s < NSEQ; s++) {
		for (uint32_t i = 0; i < prompt_len(s); i++)
			toks[i] = prompt_tok(s, i);
		if (pt_engine_rewind(e, 0, &err) != PT_OK ||
		    pt_engine_eval(e, toks, prompt_len(s), l, false, &err) != PT_OK)
			return -1;
		for (uint32_t t = 0; t < STEPS; t++) {
			uint32_t seqs[NSEQ];
			const uint32_t n = step_seqs(t, seqs);
			bool in = false;
			for (uint32_t i = 0; i < n; i++)
				in |= seqs[i] == s;
			if (!in)
				continue;
			if (pt_engine_eval(e, &fed[s * STEPS + t], 1, l, false, &err) != PT_OK)
				return -1;
			bad += memcmp(l, out + ((size_t)s * STEPS + t) * nv, nv * sizeof(float)) != 0;
		}
	}
	pt_free(l);
	return bad;
}

static void check_batch_equals_single(enum pt_arch arch, enum pt_mix mix, const char *name)
{
	const char *p = pt_test_tmpfile(name);
	char path[512];
	snprintf(path, sizeof path, "%s", p);
	REQUIRE(write_model(path, arch, mix));
	for (int streamed = 0; streamed < 2; streamed++) {
		struct pt_error err = { 0 };
		pt_engine *b = open_n(path, NSEQ, streamed, 0, &err);
		pt_engine *one = open_n(path, 1, streamed, 0, &err);
		REQUIRE(b && one);
		const uint32_t nv = pt_engine_n_vocab(b);
		float *out = pt_calloc((size_t)NSEQ * STEPS * nv, sizeof(float));
		uint32_t fed[NSEQ * STEPS] = { 0 };
		REQUIRE(out != NULL);
		CHECK(run_batched(b, nv, out, fed));
		const int bad = compare_single(one, nv, out, fed);
		if (bad)
			fprintf(stderr, "%s %s: %d rows differ\n", name, streamed ? "streamed" : "mapped",
				bad);
		CHECK_EQ_INT(bad, 0);
		struct pt_engine_stats st;
		pt_engine_stats(b, &st);
		CHECK(st.n_seq == NSEQ && st.decode_steps == STEPS);
		CHECK(st.decode_tokens == (uint64_t)STEPS * NSEQ - STEPS / 2);
		if (streamed)
			CHECK(st.misses > 0 && st.slots_per_layer == 5);
		for (uint32_t s = 0; s < NSEQ; s++) {
			int64_t want = prompt_len(s);
			for (uint32_t t = 0; t < STEPS; t++)
				want += !(t % 2 && s == t % NSEQ);
			CHECK(pt_engine_seq_pos(b, s) == want);
		}
		pt_free(out);
		pt_engine_close(b);
		pt_engine_close(one);
	}
}

PT_TEST(test_gen_engine_batch_qwen3moe)
{
	check_batch_equals_single(PT_ARCH_QWEN3MOE, PT_MIX_F16, "b_q_f16.gguf");
	check_batch_equals_single(PT_ARCH_QWEN3MOE, PT_MIX_Q8_0, "b_q_q8.gguf");
	check_batch_equals_single(PT_ARCH_QWEN3MOE, PT_MIX_Q4_K_M, "b_q_q4k.gguf");
}

PT_TEST(test_gen_engine_batch_bailingmoe2)
{
	check_batch_equals_single(PT_ARCH_BAILINGMOE2, PT_MIX_F16, "b_b_f16.gguf");
	check_batch_equals_single(PT_ARCH_BAILINGMOE2, PT_MIX_Q8_0, "b_b_q8.gguf");
	check_batch_equals_single(PT_ARCH_BAILINGMOE2, PT_MIX_Q4_K_M, "b_b_q4k.gguf");
}

PT_TEST(test_gen_engine_batch_gemma4)
{
	check_batch_equals_single(PT_ARCH_GEMMA4, PT_MIX_F16, "b_g_f16.gguf");
	check_batch_equals_single(PT_ARCH_GEMMA4, PT_MIX_Q8_0, "b_g_q8.gguf");
	check_batch_equals_single(PT_ARCH_GEMMA4, PT_MIX_Q4_K_M, "b_g_q4k.gguf");
}

/* MLA (latent cache, V read out of K, per-head absorbed products) keeps the batch rule. */
PT_TEST(test_gen_engine_batch_deepseek2)
{
	check_batch_equals_single(PT_ARCH_DEEPSEEK2, PT_MIX_F16, "b_d_f16.gguf");
	check_batch_equals_single(PT_ARCH_DEEPSEEK2, PT_MIX_Q4_K_M, "b_d_q4k.gguf");
}

/* gpt-oss: the batched rows carry the per-expert gate/up biases in the glu set and add the
 * down bias per (expert, row) product; sinks and YaRN per row. */
PT_TEST(test_gen_engine_batch_gptoss)
{
	check_batch_equals_single(PT_ARCH_GPTOSS, PT_MIX_F16, "b_o_f16.gguf");
	check_batch_equals_single(PT_ARCH_GPTOSS, PT_MIX_MXFP4, "b_o_mx.gguf");
}

/* Four sequences with the same history route to the same experts: one batched step fetches
 * each expert once (k per MoE layer), and the store reads at most that many. */
PT_TEST(test_gen_engine_batch_shares_expert_reads)
{
	const char *path = pt_test_tmpfile("b_share.gguf");
	REQUIRE(write_model(path, PT_ARCH_QWEN3MOE, PT_MIX_Q8_0));
	struct pt_error err = { 0 };
	pt_engine *e = open_n(path, NSEQ, true, 0, &err);
	REQUIRE(e != NULL);
	const struct pt_hparams *hp = &pt_engine_model(e)->hp;
	uint32_t toks[20], seqs[NSEQ] = { 0, 1, 2, 3 }, next[NSEQ];
	for (uint32_t i = 0; i < 20; i++)
		toks[i] = prompt_tok(0, i);
	for (uint32_t s = 0; s < NSEQ; s++)
		REQUIRE(pt_engine_seq_eval(e, s, toks, 20, NULL, false, &err) == PT_OK);
	for (uint32_t s = 0; s < NSEQ; s++)
		next[s] = 42;
	struct pt_engine_stats a, b, c;
	pt_engine_stats(e, &a);
	REQUIRE(pt_engine_decode_batch(e, seqs, next, NSEQ, NULL, &err) == PT_OK);
	pt_engine_stats(e, &b);
	const uint64_t layers = b.n_moe_layers, k = hp->n_expert_used;
	CHECK_EQ_INT(b.expert_gets - a.expert_gets, layers * k);
	CHECK(b.misses - a.misses <= layers * k);
	CHECK(b.hits + b.misses - a.hits - a.misses == layers * k);
	/* the same four tokens one sequence at a time fetch four times as often */
	for (uint32_t s = 0; s < NSEQ; s++)
		REQUIRE(pt_engine_seq_rewind(e, s, 20, &err) == PT_OK);
	for (uint32_t s = 0; s < NSEQ; s++)
		REQUIRE(pt_engine_seq_eval(e, s, &next[s], 1, NULL, false, &err) == PT_OK);
	pt_engine_stats(e, &c);
	CHECK_EQ_INT(c.expert_gets - b.expert_gets, NSEQ * layers * k);
	/* rows of a batch that route differently still each get their own experts */
	const float *bl = pt_engine_batch_logits(e);
	CHECK(bl != NULL);
	pt_engine_close(e);
}

/* Sequences are independent: rewinding or refilling one leaves the others' results alone;
 * a full sequence refuses a batch without evaluating anyone; bad arguments are refused. */
PT_TEST(test_gen_engine_batch_rewind_per_sequence)
{
	const char *path = pt_test_tmpfile("b_rew.gguf");
	REQUIRE(write_model(path, PT_ARCH_GEMMA4, PT_MIX_Q8_0));
	struct pt_error err = { 0 };
	pt_engine *e = open_n(path, 2, false, 0, &err);
	REQUIRE(e != NULL);
	const uint32_t nv = pt_engine_n_vocab(e);
	uint32_t a[40], b[40];
	for (uint32_t i = 0; i < 40; i++) {
		a[i] = prompt_tok(0, i);
		b[i] = prompt_tok(3, i);
	}
	float *all = pt_mallocn((size_t)40 * nv, sizeof(float));
	float *l = pt_mallocn(nv, sizeof(float));
	REQUIRE(all && l);
	REQUIRE(pt_engine_seq_eval(e, 1, a, 40, all, true, &err) == PT_OK);
	REQUIRE(pt_engine_seq_eval(e, 0, b, 40, NULL, false, &err) == PT_OK);
	CHECK(pt_engine_pos(e) == 40 && pt_engine_seq_pos(e, 1) == 40);
	CHECK(memcmp(pt_engine_seq_tokens(e, 1), a, sizeof a) == 0);
	CHECK(memcmp(pt_engine_tokens(e), b, sizeof b) == 0);
	/* the sliding ring of sequence 1 lost the window of 20: replay from its own history */
	REQUIRE(pt_engine_seq_rewind(e, 1, 20, &err) == PT_OK);
	CHECK(pt_engine_seq_pos(e, 1) == 20 && pt_engine_seq_pos(e, 0) == 40);
	REQUIRE(pt_engine_rewind(e, 3, &err) == PT_OK);
	REQUIRE(pt_engine_seq_eval(e, 1, a + 20, 20, l, false, &err) == PT_OK);
	CHECK(memcmp(l, all + (size_t)39 * nv, nv * sizeof(float)) == 0);
	/* a batch row of sequence 1 after a rewind of one token */
	REQUIRE(pt_engine_seq_rewind(e, 1, 39, &err) == PT_OK);
	uint32_t seqs[2] = { 1, 0 }, tk[2] = { a[39], b[3] };
	REQUIRE(pt_engine_decode_batch(e, seqs, tk, 2, NULL, &err) == PT_OK);
	CHECK(memcmp(pt_engine_batch_logits(e), all + (size_t)39 * nv, nv * sizeof(float)) == 0);
	CHECK(pt_engine_seq_tokens(e, 0)[3] == b[3] && pt_engine_seq_tokens(e, 1)[39] == a[39]);
	/* refusals */
	uint32_t dup[2] = { 0, 0 }, out[2] = { 0, 5 };
	CHECK(pt_engine_decode_batch(e, dup, tk, 2, NULL, &err) == PT_E_INVALID);
	CHECK(pt_engine_decode_batch(e, out, tk, 2, NULL, &err) == PT_E_INVALID);
	CHECK(pt_engine_decode_batch(e, seqs, tk, 3, NULL, &err) == PT_E_INVALID);
	CHECK(pt_engine_seq_eval(e, 2, a, 1, l, false, &err) == PT_E_INVALID);
	CHECK(pt_engine_seq_rewind(e, 7, 0, &err) == PT_E_INVALID);
	CHECK(pt_engine_seq_pos(e, 2) == -1 && pt_engine_seq_tokens(e, 2) == NULL);
	uint32_t fill[CTX];
	for (uint32_t i = 0; i < CTX; i++)
		fill[i] = prompt_tok(1, i);
	REQUIRE(pt_engine_rewind(e, 0, &err) == PT_OK);
	REQUIRE(pt_engine_seq_eval(e, 0, fill, CTX, NULL, false, &err) == PT_OK);
	const int64_t p1 = pt_engine_seq_pos(e, 1);
	CHECK(pt_engine_decode_batch(e, seqs, tk, 2, NULL, &err) == PT_E_LIMIT);
	CHECK(pt_engine_seq_pos(e, 1) == p1 && pt_engine_pos(e) == CTX);
	pt_free(all);
	pt_free(l);
	pt_engine_close(e);
}

/* A snapshot restored into another sequence gives exactly the state it was taken at: the
 * continuation's logits equal a fresh evaluation, also after a rewind that must replay a
 * sliding ring; snapshots stay within the budget set aside for them. */
static void check_snapshot(enum pt_arch arch, const char *name)
{
	const char *path = pt_test_tmpfile(name);
	REQUIRE(write_model(path, arch, PT_MIX_Q8_0));
	struct pt_error err = { 0 };
	pt_engine *e = open_n(path, 2, false, 0, &err);
	REQUIRE(e != NULL);
	const uint64_t one = pt_engine_snap_size(e, 40);
	CHECK(pt_engine_snap_budget(e) == 0 && one > pt_engine_snap_size(e, 39));
	pt_engine_close(e);
	/* --cache-prompts N: room for N whole-context snapshots */
	struct pt_engine_opts co = { .model_path = path, .threads = 1, .n_ctx = CTX, .n_batch = 8,
				     .memory_budget = 1ull << 30, .no_lock = true, .n_seq = 2,
				     .prompt_cache_seqs = 3 };
	REQUIRE(pt_engine_open(&co, &e, &err) == PT_OK);
	CHECK(pt_engine_snap_budget(e) == 3 * pt_engine_snap_size(e, CTX));
	pt_engine_close(e);
	e = open_n(path, 2, false, one + one / 2, &err);
	pt_engine *ref = open_n(path, 1, false, 0, &err);
	REQUIRE(e && ref);
	CHECK_CONTAINS(pt_engine_plan_line(e), "prompt cache");
	const uint32_t nv = pt_engine_n_vocab(e);
	uint32_t a[48], junk[30];
	for (uint32_t i = 0; i < 48; i++)
		a[i] = prompt_tok(2, i);
	for (uint32_t i = 0; i < 30; i++)
		junk[i] = prompt_tok(1, i);
	float *want = pt_mallocn((size_t)48 * nv, sizeof(float));
	float *got = pt_mallocn((size_t)8 * nv, sizeof(float));
	REQUIRE(want && got);
	REQUIRE(pt_engine_eval(ref, a, 48, want, true, &err) == PT_OK);
	/* snapshot of 40 tokens on sequence 0, then sequence 0 moves on to other text */
	REQUIRE(pt_engine_seq_eval(e, 0, a, 40, NULL, false, &err) == PT_OK);
	pt_engine_snap *s = NULL, *s2 = NULL;
	REQUIRE(pt_engine_seq_snapshot(e, 0, &s, &err) == PT_OK);
	CHECK(pt_engine_snap_pos(s) == 40 && pt_engine_snap_bytes(s) == one);
	CHECK(memcmp(pt_engine_snap_tokens(s), a, 40 * sizeof(uint32_t)) == 0);
	CHECK(pt_engine_snap_used(e) == one && pt_engine_snap_budget(e) == one + one / 2);
	/* a second one does not fit the budget */
	CHECK(pt_engine_seq_snapshot(e, 0, &s2, &err) == PT_E_LIMIT && s2 == NULL);
	REQUIRE(pt_engine_rewind(e, 0, &err) == PT_OK);
	REQUIRE(pt_engine_seq_eval(e, 0, junk, 30, NULL, false, &err) == PT_OK);
	/* restore into sequence 1 (full state), continue: the fresh run's rows */
	REQUIRE(pt_engine_seq_eval(e, 1, junk, 25, NULL, false, &err) == PT_OK);
	REQUIRE(pt_engine_seq_restore(e, 1, s, &err) == PT_OK);
	CHECK(pt_engine_seq_pos(e, 1) == 40);
	CHECK(memcmp(pt_engine_seq_tokens(e, 1), a, 40 * sizeof(uint32_t)) == 0);
	REQUIRE(pt_engine_seq_eval(e, 1, a + 40, 8, got, true, &err) == PT_OK);
	CHECK(memcmp(got, want + (size_t)40 * nv, (size_t)8 * nv * sizeof(float)) == 0);
	/* restore into sequence 0, keep a common prefix of 30 (gemma4: the ring is replayed) */
	REQUIRE(pt_engine_seq_restore(e, 0, s, &err) == PT_OK);
	REQUIRE(pt_engine_seq_rewind(e, 0, 30, &err) == PT_OK);
	REQUIRE(pt_engine_seq_eval(e, 0, a + 30, 18, got, false, &err) == PT_OK);
	CHECK(memcmp(got, want + (size_t)47 * nv, nv * sizeof(float)) == 0);
	/* copy of a prefix into the other sequence, continued by a decode batch */
	REQUIRE(pt_engine_seq_copy(e, 1, 0, 44, &err) == PT_OK);
	CHECK(pt_engine_seq_pos(e, 1) == 44 && pt_engine_seq_tokens(e, 1)[43] == a[43]);
	uint32_t seqs[1] = { 1 };
	REQUIRE(pt_engine_decode_batch(e, seqs, &a[44], 1, NULL, &err) == PT_OK);
	CHECK(memcmp(pt_engine_batch_logits(e), want + (size_t)44 * nv, nv * sizeof(float)) == 0);
	CHECK(pt_engine_seq_copy(e, 1, 0, 49, &err) == PT_E_INVALID);
	pt_engine_snap_free(e, s);
	CHECK(pt_engine_snap_used(e) == 0);
	REQUIRE(pt_engine_seq_snapshot(e, 0, &s2, &err) == PT_OK); /* room again */
	pt_engine_snap_free(e, s2);
	pt_free(want);
	pt_free(got);
	pt_engine_close(e);
	pt_engine_close(ref);
}

PT_TEST(test_gen_engine_batch_snapshot_restore)
{
	check_snapshot(PT_ARCH_QWEN3MOE, "b_snap_q.gguf");
	check_snapshot(PT_ARCH_GEMMA4, "b_snap_g.gguf");
	check_snapshot(PT_ARCH_DEEPSEEK2, "b_snap_d.gguf"); /* a cache without V arrays */
}

/* The plan counts n_seq KV caches (and says so), and refuses a budget too small for them
 * with the numbers. */
PT_TEST(test_gen_engine_batch_plan)
{
	const char *path = pt_test_tmpfile("b_plan.gguf");
	REQUIRE(write_model(path, PT_ARCH_BAILINGMOE2, PT_MIX_Q8_0));
	struct pt_error err = { 0 };
	pt_engine *one = open_n(path, 1, true, 0, &err);
	pt_engine *four = open_n(path, 4, true, 0, &err);
	REQUIRE(one && four);
	struct pt_engine_stats s1, s4;
	pt_engine_stats(one, &s1);
	pt_engine_stats(four, &s4);
	CHECK(s4.kv_bytes == 4 * s1.kv_bytes && s1.n_seq == 1);
	CHECK_CONTAINS(pt_engine_plan_line(four), "(4 sequences)");
	CHECK(strstr(pt_engine_plan_line(one), "sequences") == NULL);
	CHECK(pt_engine_batch_logits(one) == NULL && pt_engine_batch_logits(four) != NULL);
	pt_engine_close(one);
	pt_engine_close(four);
	/* the smallest budget for one sequence is too small for eight */
	struct pt_engine_opts o = { .model_path = path, .memory_budget = 1 << 20, .n_ctx = 4096,
				    .n_batch = 8, .no_lock = true, .io_mode = "direct" };
	pt_engine *e = NULL;
	REQUIRE(pt_engine_open(&o, &e, &err) == PT_E_LIMIT);
	const char *at = strstr(err.msg, "works: ");
	REQUIRE(at != NULL);
	o.memory_budget = strtoull(at + 7, NULL, 10);
	REQUIRE(pt_engine_open(&o, &e, &err) == PT_OK);
	pt_engine_close(e);
	o.n_seq = 8;
	pt_error_clear(&err);
	CHECK(pt_engine_open(&o, &e, &err) == PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "(8 sequences)");
	o.n_seq = PT_ENGINE_MAX_SEQ + 1;
	o.memory_budget = 1ull << 30;
	CHECK(pt_engine_open(&o, &e, &err) == PT_E_INVALID);
}

/* Gemma 4's final logit softcap runs over the pool in chunks of 16,384 logits when a chunk's
 * logits are more than one (forward.c softcap_rows): a prompt's every-row logits (the split
 * path) equal the same tokens evaluated one at a time (one row, below a chunk: the serial
 * path), so no logit is capped twice or left out at a chunk edge. */
PT_TEST(test_gen_engine_softcap_split_equals_serial)
{
	const char *p = pt_test_tmpfile("softcap_g.gguf");
	char path[512];
	snprintf(path, sizeof path, "%s", p);
	REQUIRE(write_model(path, PT_ARCH_GEMMA4, PT_MIX_Q8_0));
	struct pt_error err = { 0 };
	enum { LONG = 256 };
	struct pt_engine_opts o = { .model_path = path, .threads = 3, .n_ctx = LONG,
				    .n_batch = LONG, .memory_budget = 1ull << 30, .no_lock = true,
				    .io_mode = "mmap" };
	pt_engine *e = NULL;
	REQUIRE(pt_engine_open(&o, &e, &err) == PT_OK);
	const uint32_t nv = pt_engine_n_vocab(e);
	/* enough rows that the logits of one chunk span several softcap tasks, not a whole
	 * number of them (the prompt is one chunk: n_batch) */
	const uint32_t n = 16384 / nv * 3 + 2 < LONG ? 16384 / nv * 3 + 2 : LONG - 1;
	CHECK((uint64_t)n * nv > 2 * 16384 && ((uint64_t)n * nv) % 16384 != 0);
	CHECK(nv < 16384);
	uint32_t toks[LONG];
	for (uint32_t i = 0; i < n; i++)
		toks[i] = prompt_tok(1, i);
	float *all = pt_calloc((size_t)n * nv, sizeof(float)), *one = pt_calloc(nv, sizeof(float));
	REQUIRE(all && one);
	REQUIRE(pt_engine_eval(e, toks, n, all, true, &err) == PT_OK);
	REQUIRE(pt_engine_rewind(e, 0, &err) == PT_OK);
	int bad = 0;
	for (uint32_t i = 0; i < n; i++) {
		REQUIRE(pt_engine_eval(e, &toks[i], 1, one, false, &err) == PT_OK);
		bad += memcmp(one, all + (size_t)i * nv, nv * sizeof(float)) != 0;
	}
	CHECK_EQ_INT(bad, 0);
	/* and capped: |logit| below the cap (30) everywhere */
	int over = 0;
	for (size_t i = 0; i < (size_t)n * nv; i++)
		over += !(all[i] > -30.0f && all[i] < 30.0f);
	CHECK_EQ_INT(over, 0);
	pt_free(all);
	pt_free(one);
	pt_engine_close(e);
}
