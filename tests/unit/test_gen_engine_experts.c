/* test_gen_engine_experts.c - the heat-map data: pt_engine_layer_experts (residency and use
 * counts per MoE layer) in cache and mapped mode, read from another thread while the engine
 * evaluates, and the usage counters themselves. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "expert/usage.h"
#include "gen/engine.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

#define N_TOK 24

static const char *tiny_model(void)
{
	static bool made;
	const char *path = pt_test_tmpfile("experts-tiny.gguf");
	if (!made) {
		struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN3MOE, .preset = "tiny",
					     .mix = PT_MIX_Q8_0, .seed = 11, .out_path = path,
					     .threads = 1 };
		struct pt_error err = { 0 };
		made = pt_mkmodel_write(&o, &err) == PT_OK;
	}
	return made ? path : NULL;
}

static pt_engine *open_mode(const char *io_mode, uint32_t slots)
{
	const char *path = tiny_model();
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 64, .n_batch = 8,
				    .memory_budget = 1ull << 30, .expert_slots = slots,
				    .io_mode = io_mode, .no_lock = true };
	pt_engine *e = NULL;
	struct pt_error err = { 0 };
	if (!path || pt_engine_open(&o, &e, &err) != PT_OK)
		return NULL;
	return e;
}

/* Evaluates N_TOK tokens (a prefill chunk, then one-by-one decode) and returns true. */
static bool run_tokens(pt_engine *e)
{
	uint32_t toks[N_TOK];
	struct pt_error err = { 0 };
	float *logits = pt_mallocn(pt_engine_n_vocab(e), sizeof(float));
	bool ok = logits != NULL;
	for (uint32_t i = 0; i < N_TOK; i++)
		toks[i] = (i * 31 + 7) % 150 + 3;
	ok = ok && pt_engine_eval(e, toks, N_TOK / 2, logits, false, &err) == PT_OK;
	for (uint32_t i = N_TOK / 2; ok && i < N_TOK; i++)
		ok = pt_engine_eval(e, toks + i, 1, logits, false, &err) == PT_OK;
	pt_free(logits);
	return ok;
}

/* Per layer: the uses add up to tokens x k; residency as the mode says. */
static void check_layers(pt_engine *e, bool mapped, uint32_t slots)
{
	uint32_t n_expert = 0, layers[64];
	const uint32_t n_moe = pt_engine_n_moe_layers(e, &n_expert, NULL);
	REQUIRE(n_moe > 0 && n_moe <= 64 && n_expert > 0);
	CHECK_EQ_INT(pt_engine_n_moe_layers(e, NULL, layers), n_moe);
	for (uint32_t i = 1; i < n_moe; i++)
		CHECK(layers[i] > layers[i - 1]);
	const uint32_t k = pt_engine_model(e)->hp.n_expert_used;
	uint8_t *res = pt_calloc(n_expert, 1);
	uint32_t *uses = pt_calloc(n_expert, sizeof *uses);
	REQUIRE(res && uses);
	for (uint32_t l = 0; l < n_moe; l++) {
		REQUIRE(pt_engine_layer_experts(e, l, res, uses, n_expert));
		uint64_t sum = 0;
		uint32_t n_res = 0, n_used = 0;
		for (uint32_t x = 0; x < n_expert; x++) {
			sum += uses[x];
			n_res += res[x];
			n_used += uses[x] > 0;
			CHECK(res[x] <= 1);
			if (!mapped && res[x])
				CHECK(uses[x] > 0); /* only routed experts were ever read */
		}
		CHECK_EQ_INT(sum, (uint64_t)N_TOK * k);
		CHECK(n_used >= k);
		if (mapped) {
			CHECK_EQ_INT(n_res, n_expert);
		} else {
			uint64_t h, m, b;
			pt_engine_layer_stats(e, l, &h, &m, &b);
			CHECK(n_res > 0 && n_res <= slots);
			CHECK(h + m > 0 && h + m <= sum); /* requests: distinct experts per call */
		}
	}
	memset(uses, 0xab, n_expert * sizeof *uses);
	CHECK(!pt_engine_layer_experts(e, n_moe, res, uses, n_expert));
	CHECK(!pt_engine_layer_experts(e, 0, res, uses, n_expert + 1));
	CHECK(uses[0] == 0xabababab); /* untouched on refusal */
	pt_free(res);
	pt_free(uses);
}

PT_TEST(test_gen_engine_experts_cache_mode)
{
	pt_engine *e = open_mode("direct", 4);
	REQUIRE(e != NULL);
	/* before anything ran: nothing used, nothing resident */
	uint32_t n_expert = 0;
	pt_engine_n_moe_layers(e, &n_expert, NULL);
	uint8_t res[256];
	uint32_t uses[256];
	REQUIRE(n_expert <= 256);
	CHECK(pt_engine_layer_experts(e, 0, res, uses, n_expert));
	for (uint32_t x = 0; x < n_expert; x++)
		CHECK(res[x] == 0 && uses[x] == 0);
	CHECK(run_tokens(e));
	check_layers(e, false, 4);
	pt_engine_close(e);
}

PT_TEST(test_gen_engine_experts_mapped_mode)
{
	pt_engine *e = open_mode("mmap", 0);
	REQUIRE(e != NULL);
	CHECK(run_tokens(e));
	check_layers(e, true, 0);
	pt_engine_close(e);
}

struct reader {
	pt_engine *e;
	atomic_bool stop;
	bool monotonic;
	uint64_t reads;
};

/* Reads layer 0's heat map over and over while the main thread evaluates: the sums never
 * go down (TSan runs this suite: the accessor must be race-free). */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint32_t n_expert = 0;
	pt_engine_n_moe_layers(r->e, &n_expert, NULL);
	uint8_t res[256];
	uint32_t uses[256];
	uint64_t prev = 0;
	while (!atomic_load(&r->stop) && n_expert <= 256) {
		uint64_t sum = 0;
		if (!pt_engine_layer_experts(r->e, 0, res, uses, n_expert))
			break;
		for (uint32_t x = 0; x < n_expert; x++)
			sum += uses[x];
		if (sum < prev)
			r->monotonic = false;
		prev = sum;
		r->reads++;
	}
	return NULL;
}

PT_TEST(test_gen_engine_experts_concurrent_reader)
{
	pt_engine *e = open_mode("direct", 4);
	REQUIRE(e != NULL);
	struct reader r = { .e = e, .monotonic = true };
	atomic_init(&r.stop, false);
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, reader_main, &r) == 0);
	CHECK(run_tokens(e));
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	CHECK(r.monotonic);
	CHECK(r.reads > 0);
	check_layers(e, false, 4);
	pt_engine_close(e);
}

PT_TEST(test_expert_usage_counts_and_bounds)
{
	struct pt_expert_layer moe[2] = { { .layer = 1 }, { .layer = 3 } };
	struct pt_expert_layout lay = { .n_expert = 4, .n_moe = 2, .moe = moe };
	pt_expert_usage *u = NULL;
	struct pt_error err = { 0 };
	REQUIRE(pt_expert_usage_create(&lay, &u, &err) == PT_OK);
	const int ids[6] = { 0, 1, 1, 3, -1, 9 }; /* 3 rows of k = 2; the last has bad ids */
	pt_expert_usage_note(u, 3, 3, 2, ids);
	pt_expert_usage_note(u, 3, 1, 2, ids);
	pt_expert_usage_note(u, 0, 3, 2, ids); /* dense layer: ignored */
	pt_expert_usage_note(u, 2, 3, 2, ids);
	pt_expert_usage_note(u, 99, 3, 2, ids);
	uint32_t uses[6];
	pt_expert_usage_read(u, 1, uses, 6);
	CHECK(uses[0] == 2 && uses[1] == 3 && uses[2] == 0 && uses[3] == 1);
	CHECK(uses[4] == 0 && uses[5] == 0); /* beyond the model's experts */
	pt_expert_usage_read(u, 0, uses, 4);
	CHECK(uses[0] == 0 && uses[1] == 0 && uses[2] == 0 && uses[3] == 0);
	uses[0] = 7;
	pt_expert_usage_read(u, 2, uses, 4);
	CHECK(uses[0] == 0);
	pt_expert_usage_destroy(u);
	pt_expert_usage_destroy(NULL);
}
