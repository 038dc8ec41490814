/* test_gen_engine_chunk.c - PT_ENGINE_BATCH_AUTO (issue 21, expert-major prefill): the
 * engine picks a prefill chunk as large as the plan allows, a whole prompt in one chunk
 * gives the same logits byte for byte as small chunks (F32 KV, and F16 KV with the default
 * F32 attention numerics; with PARTICLE_ATTN=ggml, chunks below PT_ATTN_TILED_ROWS rows
 * take ggml's F16-accumulating one-row path, src/model/forward.h, and differ in the last
 * bits), streamed through a few slots byte for byte as mapped (either KV type), and each
 * routed expert is fetched once per layer and chunk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen/engine.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

#define N_CTX 400
#define N_PROMPT 300

static const char *tiny_model(void)
{
	static bool made;
	const char *path = pt_test_tmpfile("chunk-tiny.gguf");
	if (!made) {
		struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN3MOE, .preset = "tiny",
					     .mix = PT_MIX_Q4_K_M, .seed = 5, .out_path = path,
					     .threads = 1 };
		struct pt_error err = { 0 };
		made = pt_mkmodel_write(&o, &err) == PT_OK;
	}
	return made ? path : NULL;
}

static enum pt_kv_type kv = PT_KV_F32;

static pt_engine *open_chunk(uint32_t n_batch, const char *io_mode, uint32_t slots,
			     uint64_t budget)
{
	const char *path = tiny_model();
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = N_CTX,
				    .n_batch = n_batch, .memory_budget = budget, .kv_type = kv,
				    .expert_slots = slots, .io_mode = io_mode, .no_lock = true };
	pt_engine *e = NULL;
	struct pt_error err = { 0 };
	if (!path || pt_engine_open(&o, &e, &err) != PT_OK)
		return NULL;
	return e;
}

/* The prompt's last logits into out[n_vocab]; true on success. */
static bool prompt_logits(pt_engine *e, float *out)
{
	uint32_t toks[N_PROMPT];
	struct pt_error err = { 0 };
	for (uint32_t i = 0; i < N_PROMPT; i++)
		toks[i] = (i * 37 + 11) % 150 + 3;
	return pt_engine_eval(e, toks, N_PROMPT, out, false, &err) == PT_OK;
}

/* Expert fetches (hits + misses) summed over the MoE layers of a streaming engine. */
static uint64_t fetches(const pt_engine *e, uint32_t *max_layer)
{
	uint64_t sum = 0;
	const uint32_t n_moe = pt_engine_n_moe_layers(e, NULL, NULL);
	*max_layer = 0;
	for (uint32_t l = 0; l < n_moe; l++) {
		uint64_t h = 0, m = 0, b = 0;
		pt_engine_layer_stats(e, l, &h, &m, &b);
		sum += h + m;
		if (h + m > *max_layer)
			*max_layer = (uint32_t)(h + m);
	}
	return sum;
}

PT_TEST(test_gen_engine_chunk_auto_is_large_and_exact)
{
	pt_engine *small = open_chunk(16, "mmap", 0, 1ull << 30);
	pt_engine *big = open_chunk(PT_ENGINE_BATCH_AUTO, NULL, 0, 1ull << 30);
	REQUIRE(small && big);
	CHECK_EQ_INT(pt_engine_n_batch(small), 16);
	/* a tiny model under 1 GiB: the whole context is one chunk */
	CHECK_EQ_INT(pt_engine_n_batch(big), N_CTX);
	const uint32_t nv = pt_engine_n_vocab(big);
	float *a = pt_mallocn(nv, sizeof(float)), *b = pt_mallocn(nv, sizeof(float));
	REQUIRE(a && b);
	CHECK(prompt_logits(small, a));
	CHECK(prompt_logits(big, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	pt_engine_close(small);
	pt_engine_close(big);

	/* streamed through k + 1 slots per layer: still the mapped bytes, and one chunk
	 * fetches each expert at most once per layer (16-row chunks fetch more) */
	const uint32_t k = 8; /* tiny qwen3moe top-k */
	pt_engine *s16 = open_chunk(16, "direct", k + 1, 1ull << 30);
	pt_engine *sall = open_chunk(PT_ENGINE_BATCH_AUTO, "direct", k + 1, 1ull << 30);
	REQUIRE(s16 && sall);
	REQUIRE(pt_engine_model(sall)->hp.n_expert_used <= k);
	CHECK_EQ_INT(pt_engine_n_batch(sall), N_CTX);
	CHECK(prompt_logits(s16, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	memset(b, 0, nv * sizeof(float));
	CHECK(prompt_logits(sall, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	uint32_t max16 = 0, maxall = 0, n_expert = 0;
	pt_engine_n_moe_layers(sall, &n_expert, NULL);
	const uint64_t f16 = fetches(s16, &max16), fall = fetches(sall, &maxall);
	CHECK(maxall <= n_expert);
	CHECK(fall < f16);
	pt_engine_close(s16);
	pt_engine_close(sall);
	pt_free(a);
	pt_free(b);
}

/* F16 KV: streamed == mapped still exact at the chosen chunk */
PT_TEST(test_gen_engine_chunk_f16_streamed_equals_mapped)
{
	kv = PT_KV_F16;
	pt_engine *m = open_chunk(PT_ENGINE_BATCH_AUTO, "mmap", 0, 1ull << 30);
	pt_engine *s = open_chunk(PT_ENGINE_BATCH_AUTO, "direct", 9, 1ull << 30);
	kv = PT_KV_F32;
	REQUIRE(m && s);
	CHECK_EQ_INT(pt_engine_n_batch(s), N_CTX);
	const uint32_t nv = pt_engine_n_vocab(m);
	float *a = pt_mallocn(nv, sizeof(float)), *b = pt_mallocn(nv, sizeof(float));
	REQUIRE(a && b);
	CHECK(prompt_logits(m, a));
	CHECK(prompt_logits(s, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	pt_free(a);
	pt_free(b);
	pt_engine_close(m);
	pt_engine_close(s);
}

/* F16 KV: the default numerics make chunking invisible (16-row chunks, one token at a time
 * and the whole prompt agree byte for byte); PARTICLE_ATTN=ggml really selects ggml's one-row
 * path (its 16-row chunks differ from its whole-prompt chunk); a bad value is refused. */
PT_TEST(test_gen_engine_chunk_f16_numerics_default_exact_ggml_onerow)
{
	kv = PT_KV_F16;
	pt_engine *c16 = open_chunk(16, "mmap", 0, 1ull << 30);
	pt_engine *c1 = open_chunk(1, "mmap", 0, 1ull << 30);
	pt_engine *all = open_chunk(PT_ENGINE_BATCH_AUTO, "mmap", 0, 1ull << 30);
	REQUIRE(setenv("PARTICLE_ATTN", "ggml", 1) == 0);
	pt_engine *g16 = open_chunk(16, "mmap", 0, 1ull << 30);
	pt_engine *gall = open_chunk(PT_ENGINE_BATCH_AUTO, "mmap", 0, 1ull << 30);
	REQUIRE(setenv("PARTICLE_ATTN", "f16", 1) == 0);
	pt_engine *bad = open_chunk(16, "mmap", 0, 1ull << 30);
	unsetenv("PARTICLE_ATTN");
	kv = PT_KV_F32;
	REQUIRE(c16 && c1 && all && g16 && gall);
	CHECK(bad == NULL);
	pt_engine_close(bad);
	CHECK_EQ_INT(pt_engine_n_batch(all), N_CTX);
	const uint32_t nv = pt_engine_n_vocab(all);
	float *a = pt_mallocn(nv, sizeof(float)), *b = pt_mallocn(nv, sizeof(float));
	float *c = pt_mallocn(nv, sizeof(float));
	REQUIRE(a && b && c);
	CHECK(prompt_logits(all, a));
	CHECK(prompt_logits(c16, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	CHECK(prompt_logits(c1, c));
	CHECK(memcmp(a, c, nv * sizeof(float)) == 0);
	CHECK(prompt_logits(gall, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0); /* whole prompt: the tiled path either way */
	CHECK(prompt_logits(g16, c));
	CHECK(memcmp(b, c, nv * sizeof(float)) != 0);
	float worst = 0.0f;
	for (uint32_t i = 0; i < nv; i++)
		worst = fabsf(b[i] - c[i]) > worst ? fabsf(b[i] - c[i]) : worst;
	CHECK(worst < 0.05f); /* the F16 rounding, not a different computation */
	pt_free(a);
	pt_free(b);
	pt_free(c);
	pt_engine_close(c16);
	pt_engine_close(c1);
	pt_engine_close(all);
	pt_engine_close(g16);
	pt_engine_close(gall);
}

PT_TEST(test_gen_engine_chunk_auto_bounded_by_budget)
{
	/* budgets from roomy to tight: the chunk never grows as the budget shrinks, stays in
	 * [128, n_ctx], and an explicit chunk is kept as asked */
	const uint64_t budgets[] = { 1ull << 30, 64ull << 20, 48ull << 20, 40ull << 20 };
	uint32_t prev = N_CTX;
	for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
		pt_engine *e = open_chunk(PT_ENGINE_BATCH_AUTO, NULL, 0, budgets[i]);
		if (!e)
			continue; /* too tight for the model at all */
		const uint32_t c = pt_engine_n_batch(e);
		CHECK(c >= 128 && c <= N_CTX);
		CHECK(c <= prev);
		prev = c;
		pt_engine_close(e);
	}
	pt_engine *e = open_chunk(200, NULL, 0, 1ull << 30);
	REQUIRE(e != NULL);
	CHECK_EQ_INT(pt_engine_n_batch(e), 200);
	pt_engine_close(e);
}

/* Slots lent to a long prompt (issue 21): under a budget where experts stream and the plan
 * picks the slots, a chunk of more rows than a decode's borrows slots for as long as it runs,
 * so decode keeps more slots than a plan holding the chunk's buffers would give it.  The
 * prompt's logits stay those of the mapped run, the loan shows in the stats and is repaid
 * (every slot in use again after the prompt), and the next tokens decode exactly too. */
PT_TEST(test_gen_engine_chunk_prompt_lends_slots)
{
	pt_engine *e = NULL;
	struct pt_engine_stats st = { 0 };
	/* the whole context as one chunk (the tiny model's buffers are small beside the
	 * runtime's fixed reserve, so the automatic chunk stays at 128 under such budgets) */
	for (uint64_t b = 40ull << 20; b >= 24ull << 20 && !e; b -= 256ull << 10) {
		e = open_chunk(N_CTX, "direct", 0, b);
		if (!e)
			continue;
		pt_engine_stats(e, &st);
		if (st.slots_lend_max == 0) {
			pt_engine_close(e);
			e = NULL;
		}
	}
	REQUIRE(e != NULL);
	CHECK_EQ_INT(pt_engine_n_batch(e), N_CTX);
	CHECK_EQ_INT(st.slots_active, st.slots_per_layer);
	pt_engine *m = open_chunk(PT_ENGINE_BATCH_AUTO, "mmap", 0, 1ull << 30);
	REQUIRE(m != NULL);
	const uint32_t nv = pt_engine_n_vocab(m);
	float *a = pt_mallocn(nv, sizeof(float)), *b = pt_mallocn(nv, sizeof(float));
	REQUIRE(a && b);
	CHECK(prompt_logits(m, a));
	CHECK(prompt_logits(e, b));
	CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	pt_engine_stats(e, &st);
	printf("    budget %.2f MiB: %u slots/layer, a prompt lends up to %u, this one %u\n",
	       (double)st.memory_budget / (1 << 20), st.slots_per_layer, st.slots_lend_max,
	       st.slots_lent_peak);
	CHECK(st.slots_lent_peak > 0 && st.slots_lent_peak <= st.slots_lend_max);
	CHECK_EQ_INT(st.slots_active, st.slots_per_layer);
	/* decode after the loan, through the slots given back */
	struct pt_error err = { 0 };
	for (uint32_t t = 0; t < 4; t++) {
		const uint32_t tok = 5 + t;
		REQUIRE(pt_engine_eval(m, &tok, 1, a, false, &err) == PT_OK);
		REQUIRE(pt_engine_eval(e, &tok, 1, b, false, &err) == PT_OK);
		CHECK(memcmp(a, b, nv * sizeof(float)) == 0);
	}
	/* a short turn lends nothing */
	pt_engine_stats(e, &st);
	const uint32_t peak = st.slots_lent_peak;
	uint32_t turn[20];
	for (uint32_t i = 0; i < 20; i++)
		turn[i] = 40 + i;
	REQUIRE(pt_engine_eval(e, turn, 20, b, false, &err) == PT_OK);
	pt_engine_stats(e, &st);
	CHECK_EQ_INT(st.slots_lent_peak, peak);
	CHECK_EQ_INT(st.slots_active, st.slots_per_layer);
	pt_free(a);
	pt_free(b);
	pt_engine_close(m);
	pt_engine_close(e);
}
