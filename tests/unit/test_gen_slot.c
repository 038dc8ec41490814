/* test_gen_slot.c - step-wise generation: N slots decoded together give each the ids and
 * text of the same request run alone (greedy and seeded, staggered starts, chunked
 * prefill, sliding-window layers), prefix reuse per slot, the token-choice and per-token
 * hooks, cancellation of one slot among others, and the start refusals. */
#include <stdio.h>
#include <string.h>

#include "gen/engine.h"
#include "gen/grammar.h"
#include "gen/slot.h"
#include "model/mkmodel.h"
#include "test.h"
#include "util/alloc.h"

#define NS 4
#define MAX_NEW 12

struct sink {
	char buf[2048];
	size_t n;
};

static bool collect(void *ctx, const char *text, size_t len)
{
	struct sink *s = ctx;
	if (s->n + len < sizeof s->buf) {
		memcpy(s->buf + s->n, text, len);
		s->n += len;
		s->buf[s->n] = 0;
	}
	return true;
}

static const char *model(enum pt_arch arch, const char *name)
{
	static char path[512];
	snprintf(path, sizeof path, "%s", pt_test_tmpfile(name));
	struct pt_mkmodel_opts mo = { .arch = arch, .preset = "tiny", .mix = PT_MIX_Q8_0,
				      .seed = 5, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	return pt_mkmodel_write(&mo, &err) == PT_OK ? path : NULL;
}

static enum pt_kv_type kv_type = PT_KV_F16; /* the engines' KV cache type */

static pt_engine *engine(const char *path, uint32_t n_seq)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 96, .n_batch = 8,
				    .no_lock = true, .n_seq = n_seq, .memory_budget = 1ull << 30,
				    .kv_type = kv_type };
	pt_engine *e = NULL;
	struct pt_error err = { 0 };
	return pt_engine_open(&o, &e, &err) == PT_OK ? e : NULL;
}

static uint32_t plen(uint32_t i)
{
	return 6 + 9 * i; /* 6 .. 33: the last wraps gemma4's 32-slot rings while decoding */
}

static void make_prompt(uint32_t i, int32_t *p)
{
	for (uint32_t j = 0; j < plen(i); j++)
		p[j] = (int32_t)((j * 29 + i * 71 + 3) % 250 + 3);
}

static struct pt_gen_slot_opts opts_for(uint32_t i, bool seeded, struct sink *out)
{
	struct pt_gen_slot_opts o = { .max_new = MAX_NEW, .emit = collect, .emit_ctx = out,
				      .prefill_chunk = 8 };
	pt_sampler_opts_default(&o.sampler);
	o.sampler.temperature = seeded ? 0.9f : 0.0f;
	o.sampler.seed = 1000 + i;
	return o;
}

struct result {
	int32_t ids[MAX_NEW];
	uint32_t n;
	struct sink text;
	struct pt_gen_stats st;
};

static void keep(pt_gen_slot *s, struct result *r)
{
	r->st = *pt_gen_slot_stats(s);
	r->n = r->st.gen_tokens;
	memcpy(r->ids, pt_gen_slot_ids(s), r->n * sizeof(int32_t));
	size_t len;
	const char *t = pt_gen_slot_text(s, &len);
	CHECK(len == r->text.n && memcmp(t, r->text.buf, len) == 0);
}

/* Each request alone on a one-sequence engine, the whole prompt at once. */
static void run_alone(const char *path, bool seeded, struct result *want)
{
	pt_engine *e = engine(path, 1);
	REQUIRE(e != NULL);
	struct pt_error err = { 0 };
	for (uint32_t i = 0; i < NS; i++) {
		int32_t p[64];
		make_prompt(i, p);
		struct pt_gen_slot_opts o = opts_for(i, seeded, &want[i].text);
		o.prefill_chunk = 0;
		pt_gen_slot *s = NULL;
		REQUIRE(pt_gen_slot_create(e, 0, &o, &s, &err) == PT_OK);
		REQUIRE(pt_gen_slot_start(s, NULL, p, plen(i), &err) == PT_OK);
		while (pt_gen_slot_busy(s))
			REQUIRE(pt_gen_step(e, &s, 1, &err) == PT_OK);
		keep(s, &want[i]);
		pt_gen_slot_destroy(s);
	}
	pt_engine_close(e);
}

/* All NS together, slot i started at step 2 * i (joining batches already running). */
static void run_together(const char *path, bool seeded, struct result *got, uint64_t *steps)
{
	pt_engine *e = engine(path, NS);
	REQUIRE(e != NULL);
	struct pt_error err = { 0 };
	pt_gen_slot *s[NS] = { 0 };
	int32_t p[NS][64];
	for (uint32_t i = 0; i < NS; i++) {
		struct pt_gen_slot_opts o = opts_for(i, seeded, &got[i].text);
		REQUIRE(pt_gen_slot_create(e, i, &o, &s[i], &err) == PT_OK);
		make_prompt(i, p[i]);
	}
	for (uint32_t step = 0; step < 200; step++) {
		bool busy = false;
		for (uint32_t i = 0; i < NS; i++) {
			if (step == 2 * i)
				REQUIRE(pt_gen_slot_start(s[i], NULL, p[i], plen(i), &err) == PT_OK);
			busy |= step <= 2 * i || pt_gen_slot_busy(s[i]);
		}
		if (!busy)
			break;
		REQUIRE(pt_gen_step(e, s, NS, &err) == PT_OK);
	}
	for (uint32_t i = 0; i < NS; i++) {
		CHECK(pt_gen_slot_state(s[i]) == PT_SLOT_DONE);
		keep(s[i], &got[i]);
		pt_gen_slot_destroy(s[i]);
	}
	struct pt_engine_stats st;
	pt_engine_stats(e, &st);
	*steps = st.decode_steps;
	pt_engine_close(e);
}

static void check_parallel_equals_alone(enum pt_arch arch, const char *name, bool seeded)
{
	const char *path = model(arch, name);
	REQUIRE(path != NULL);
	static struct result want[NS], got[NS];
	memset(want, 0, sizeof want);
	memset(got, 0, sizeof got);
	run_alone(path, seeded, want);
	uint64_t steps = 0;
	run_together(path, seeded, got, &steps);
	uint32_t total = 0;
	for (uint32_t i = 0; i < NS; i++) {
		CHECK_EQ_INT(got[i].n, want[i].n);
		CHECK(memcmp(got[i].ids, want[i].ids, want[i].n * sizeof(int32_t)) == 0);
		CHECK_EQ_STR(got[i].text.buf, want[i].text.buf);
		CHECK(got[i].st.stop == want[i].st.stop);
		CHECK(got[i].st.prompt_tokens == plen(i) && got[i].st.reused_tokens == 0);
		CHECK(got[i].st.prefill_tokens == plen(i));
		CHECK(got[i].st.ttft_s > 0 && got[i].st.reply_pos == (int64_t)plen(i));
		total += got[i].n;
	}
	/* the decodes shared passes: fewer steps than evaluated ids */
	CHECK(total > NS && steps < total - NS);
}

PT_TEST(test_gen_slot_parallel_equals_alone_greedy)
{
	check_parallel_equals_alone(PT_ARCH_QWEN3MOE, "slot_q.gguf", false);
	check_parallel_equals_alone(PT_ARCH_GEMMA4, "slot_g.gguf", false);
}

PT_TEST(test_gen_slot_parallel_equals_alone_seeded)
{
	check_parallel_equals_alone(PT_ARCH_BAILINGMOE2, "slot_b.gguf", true);
}

/* The Q8_0 cache attends in F32 over its dequantized values whatever the chunk: batched
 * with others and fed 8 rows at a time, each request still gets the tokens it gets alone
 * (gemma4: its sliding rings wrap while decoding). */
PT_TEST(test_gen_slot_parallel_equals_alone_q8_0_kv)
{
	kv_type = PT_KV_Q8_0;
	check_parallel_equals_alone(PT_ARCH_GEMMA4, "slot_g8.gguf", false);
	kv_type = PT_KV_F16;
}

/* Forces even ids through the token-choice hook; the per-token hook sees each id and its
 * logits, and cancels when told to. */
struct hooks {
	uint32_t n_vocab, seen, cancel_at;
	int32_t last;
};

static int32_t even_argmax(void *ctx, pt_sampler *s, const float *logits)
{
	const struct hooks *h = ctx;
	(void)s;
	int32_t best = 0;
	for (uint32_t i = 2; i < h->n_vocab; i += 2)
		if (logits[i] > logits[best])
			best = (int32_t)i;
	return best;
}

static bool on_token(void *ctx, int32_t id, const float *logits)
{
	struct hooks *h = ctx;
	h->last = id;
	h->seen++;
	return logits != NULL && h->seen != h->cancel_at;
}

PT_TEST(test_gen_slot_hooks_cancel_and_reuse)
{
	const char *path = model(PT_ARCH_QWEN3MOE, "slot_h.gguf");
	REQUIRE(path != NULL);
	pt_engine *e = engine(path, 2);
	REQUIRE(e != NULL);
	struct pt_error err = { 0 };
	struct sink t0 = { .n = 0 }, t1 = { .n = 0 };
	struct hooks h = { .n_vocab = pt_engine_n_vocab(e), .cancel_at = 0 };
	struct pt_gen_slot_opts o0 = opts_for(0, false, &t0), o1 = opts_for(1, false, &t1);
	o0.sample = even_argmax;
	o0.sample_ctx = &h;
	o0.on_token = on_token;
	o0.token_ctx = &h;
	o0.max_new = 6;
	o1.max_new = 40;
	pt_gen_slot *s[2];
	REQUIRE(pt_gen_slot_create(e, 0, &o0, &s[0], &err) == PT_OK);
	REQUIRE(pt_gen_slot_create(e, 1, &o1, &s[1], &err) == PT_OK);
	int32_t p[64], q[64];
	make_prompt(2, p);
	make_prompt(3, q);
	REQUIRE(pt_gen_slot_start(s[0], NULL, p, plen(2), &err) == PT_OK);
	REQUIRE(pt_gen_slot_start(s[1], NULL, q, plen(3), &err) == PT_OK);
	CHECK(pt_gen_slot_prefill_left(s[1]) == plen(3));
	for (int i = 0; i < 5; i++)
		REQUIRE(pt_gen_step(e, s, 2, &err) == PT_OK);
	pt_gen_slot_cancel(s[1]); /* a client went away */
	while (pt_gen_slot_busy(s[0]) || pt_gen_slot_busy(s[1]))
		REQUIRE(pt_gen_step(e, s, 2, &err) == PT_OK);
	const struct pt_gen_stats *st0 = pt_gen_slot_stats(s[0]), *st1 = pt_gen_slot_stats(s[1]);
	CHECK(st1->stop == PT_STOP_CANCELLED && st1->gen_tokens < 40);
	CHECK(st0->stop == PT_STOP_MAX_NEW || st0->stop == PT_STOP_EOS);
	for (uint32_t i = 0; i < st0->gen_tokens; i++)
		CHECK(pt_gen_slot_ids(s[0])[i] % 2 == 0);
	CHECK(h.seen == st0->gen_tokens && h.last == pt_gen_slot_ids(s[0])[h.seen - 1]);
	/* the next turn of slot 0: prompt + reply + more reuses everything evaluated */
	int32_t next[64];
	const uint32_t n0 = plen(2), g = st0->gen_tokens;
	memcpy(next, p, n0 * sizeof(int32_t));
	memcpy(next + n0, pt_gen_slot_ids(s[0]), g * sizeof(int32_t));
	next[n0 + g] = 77;
	next[n0 + g + 1] = 78;
	h.seen = 0;
	h.cancel_at = 2; /* the per-token hook cancels at its second id */
	REQUIRE(pt_gen_slot_start(s[0], NULL, next, n0 + g + 2, &err) == PT_OK);
	CHECK(pt_gen_slot_stats(s[0])->reused_tokens == n0 + g - 1);
	CHECK(pt_gen_slot_stats(s[0])->prefill_tokens == 3);
	while (pt_gen_slot_busy(s[0]))
		REQUIRE(pt_gen_step(e, s, 1, &err) == PT_OK);
	CHECK(pt_gen_slot_stats(s[0])->stop == PT_STOP_CANCELLED);
	CHECK(pt_gen_slot_stats(s[0])->gen_tokens == 1);
	/* new options at start: a fresh sampler; refusals leave the slot as it was */
	CHECK(pt_gen_slot_start(s[1], NULL, q, 0, &err) == PT_E_INVALID);
	int32_t big[100] = { 0 }, bad[2] = { 5, 1 << 30 };
	CHECK(pt_gen_slot_start(s[1], NULL, big, 100, &err) == PT_E_LIMIT);
	CHECK(pt_gen_slot_start(s[1], NULL, bad, 2, &err) == PT_E_INVALID);
	CHECK(pt_gen_slot_state(s[1]) == PT_SLOT_DONE);
	struct pt_gen_slot_opts o2 = opts_for(1, true, &t1);
	o2.max_new = 3;
	REQUIRE(pt_gen_slot_start(s[1], &o2, q, plen(3), &err) == PT_OK);
	CHECK(pt_gen_slot_stats(s[1])->reused_tokens == plen(3) - 1);
	while (pt_gen_slot_busy(s[1]))
		REQUIRE(pt_gen_step(e, &s[1], 1, &err) == PT_OK);
	CHECK(pt_gen_slot_stats(s[1])->stop == PT_STOP_MAX_NEW ||
	      pt_gen_slot_stats(s[1])->stop == PT_STOP_EOS);
	pt_gen_slot *x = NULL;
	CHECK(pt_gen_slot_create(e, 2, &o1, &x, &err) == PT_E_INVALID && x == NULL);
	pt_gen_slot_destroy(s[0]);
	pt_gen_slot_destroy(s[1]);
	pt_engine_close(e);
}

/* A grammar-constrained slot (any JSON object) decoded in a batch with an unconstrained one:
 * every id it takes is one the grammar allowed, and its text is a valid JSON-object prefix. */
PT_TEST(test_gen_slot_grammar_in_a_batch)
{
	const char *path = model(PT_ARCH_GEMMA4, "slot_gr.gguf");
	REQUIRE(path != NULL);
	pt_engine *e = engine(path, 2);
	REQUIRE(e != NULL);
	struct pt_error err = { 0 };
	pt_grammar *g = NULL;
	pt_grammar_vocab *v = NULL;
	pt_grammar_state *gs = NULL, *check = NULL;
	REQUIRE(pt_grammar_json_object(&g, &err) == PT_OK);
	REQUIRE(pt_grammar_vocab_build(pt_engine_tok(e), &v, &err) == PT_OK);
	REQUIRE(pt_grammar_state_new(g, v, &gs, &err) == PT_OK);
	REQUIRE(pt_grammar_state_new(g, v, &check, &err) == PT_OK);
	struct sink t0 = { .n = 0 }, t1 = { .n = 0 };
	struct pt_gen_slot_opts o0 = opts_for(0, true, &t0), o1 = opts_for(1, false, &t1);
	o0.grammar = gs;
	o0.max_new = 24;
	pt_gen_slot *s[2];
	REQUIRE(pt_gen_slot_create(e, 0, &o0, &s[0], &err) == PT_OK);
	REQUIRE(pt_gen_slot_create(e, 1, &o1, &s[1], &err) == PT_OK);
	int32_t p[64], q[64];
	make_prompt(1, p);
	make_prompt(2, q);
	REQUIRE(pt_gen_slot_start(s[0], NULL, p, plen(1), &err) == PT_OK);
	REQUIRE(pt_gen_slot_start(s[1], NULL, q, plen(2), &err) == PT_OK);
	while (pt_gen_slot_busy(s[0]) || pt_gen_slot_busy(s[1]))
		REQUIRE(pt_gen_step(e, s, 2, &err) == PT_OK);
	const struct pt_gen_stats *st = pt_gen_slot_stats(s[0]);
	CHECK(st->gen_tokens > 0);
	CHECK(st->stop == PT_STOP_EOS || st->stop == PT_STOP_MAX_NEW);
	for (uint32_t i = 0; i < st->gen_tokens; i++)
		CHECK(pt_grammar_state_accept(check, pt_gen_slot_ids(s[0])[i], &err) == PT_OK);
	size_t w = 0;
	while (w < t0.n && strchr(" \t\r\n", t0.buf[w]))
		w++;
	CHECK(w < t0.n && t0.buf[w] == '{');
	CHECK(st->stop != PT_STOP_EOS || pt_grammar_state_finished(gs));
	CHECK(pt_gen_slot_stats(s[1])->gen_tokens > 0);
	pt_gen_slot_destroy(s[0]);
	pt_gen_slot_destroy(s[1]);
	pt_grammar_state_free(gs);
	pt_grammar_state_free(check);
	pt_grammar_vocab_free(v);
	pt_grammar_free(g);
	pt_engine_close(e);
}
