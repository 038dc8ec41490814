/* test_server_stats.c - the /v1/stats/stream snapshot JSON: fields, interval rates, the
 * heat map, mapped mode, escaping, allocation failures. */
#include <cjson/cJSON.h>
#include <string.h>

#include "server/stats.h"
#include "test.h"
#include "util/alloc.h"

static const uint32_t LAYERS[3] = { 1, 2, 5 };

static struct pt_stats_model model(void)
{
	return (struct pt_stats_model){ .id = "tiny \"model\"", .arch = "qwen3moe", .n_ctx = 4096,
					.n_expert_used = 2, .n_moe = 3, .n_expert = 4,
					.layers = LAYERS };
}

static struct pt_stats_sample sample(double t)
{
	struct pt_stats_sample s = { .t_s = t, .wall_ms = 1700000000000, .uptime_s = t,
				     .rss_bytes = 300u << 20, .slots_total = 1, .ttft_s = -1 };
	s.eng.memory_budget = 1ull << 30;
	s.eng.peak_rss_bytes = 320u << 20;
	s.eng.io_engine = "io_uring+O_DIRECT";
	s.eng.cache_policy = "lfu";
	s.eng.slot_bytes = 1 << 20;
	s.eng.slots_per_layer = 2;
	s.eng.n_moe_layers = 3;
	return s;
}

static double getnum(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
	return cJSON_IsNumber(x) ? x->valuedouble : -12345.0;
}

static bool isnull(const cJSON *o, const char *a, const char *b)
{
	return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b));
}

PT_TEST(test_stats_json_first_event)
{
	struct pt_stats_model m = model();
	struct pt_stats_sample c = sample(1.0);
	char *txt = pt_stats_json(&m, NULL, &c, NULL, NULL);
	REQUIRE(txt != NULL);
	cJSON *o = cJSON_Parse(txt);
	REQUIRE(o != NULL);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "interval_s")));
	CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "model"), "id")->valuestring,
		     "tiny \"model\"");
	CHECK(getnum(o, "gen", "decode_tok_s") == 0);
	CHECK(isnull(o, "gen", "prefill_tok_s") && isnull(o, "gen", "ttft_s"));
	CHECK(isnull(o, "experts", "hit_rate") && isnull(o, "experts", "hit_rate_now"));
	CHECK(isnull(o, "experts", "mib_per_token") && isnull(o, "experts", "disk_mb_s"));
	CHECK(getnum(o, "memory", "budget_bytes") == 1073741824.0);
	CHECK(getnum(o, "memory", "rss_bytes") == 300.0 * 1048576);
	CHECK(getnum(o, "memory", "expert_cache_bytes") == 6.0 * 1048576);
	CHECK(getnum(o, "server", "slots_total") == 1);
	CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "experts"), "mode")->valuestring,
		     "cache");
	CHECK(cJSON_GetObjectItem(o, "heat") == NULL);
	cJSON_Delete(o);
	pt_free(txt);
}

PT_TEST(test_stats_json_interval_rates_and_heat)
{
	struct pt_stats_model m = model();
	struct pt_stats_sample p = sample(1.0), c = sample(1.5);
	p.eng.decode_tokens = 10;
	p.eng.decode_s = 1.0;
	p.eng.hits = 30;
	p.eng.misses = 10;
	p.eng.bytes_read = 100ull << 20;
	c.eng.decode_tokens = 30; /* 20 tokens in 0.4 s of decode */
	c.eng.decode_s = 1.4;
	c.eng.prefill_tokens = 64;
	c.eng.prefill_s = 0.08;
	c.eng.hits = 60; /* +30 hits, +10 misses in the interval */
	c.eng.misses = 20;
	c.eng.bytes_read = 140ull << 20; /* 40 MiB over 20 tokens */
	c.ttft_s = 0.25;
	c.prefill_done = 32;
	c.prefill_total = 64;
	c.slots_busy = 1;
	const uint8_t res[12] = { 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0 };
	const uint32_t uses[12] = { 5, 1, 7, 0, 0, 0, 0, 0, 9, 9, 4000000000u, 2 };
	char *txt = pt_stats_json(&m, &p, &c, res, uses);
	REQUIRE(txt != NULL);
	cJSON *o = cJSON_Parse(txt);
	REQUIRE(o != NULL);
	CHECK(fabs(cJSON_GetObjectItem(o, "interval_s")->valuedouble - 0.5) < 1e-9);
	CHECK(fabs(getnum(o, "gen", "decode_tok_s") - 50.0) < 1e-9);
	CHECK(fabs(getnum(o, "gen", "decode_tok_s_avg") - 30 / 1.4) < 1e-9);
	CHECK(fabs(getnum(o, "gen", "prefill_tok_s") - 800.0) < 1e-9);
	CHECK(getnum(o, "gen", "ttft_s") == 0.25);
	CHECK(getnum(o, "gen", "prefill_done") == 32 && getnum(o, "gen", "prefill_total") == 64);
	CHECK(fabs(getnum(o, "experts", "hit_rate") - 0.75) < 1e-9);
	CHECK(fabs(getnum(o, "experts", "hit_rate_now") - 0.75) < 1e-9);
	CHECK(fabs(getnum(o, "experts", "mib_per_token") - 2.0) < 1e-9);
	CHECK(fabs(getnum(o, "experts", "disk_mb_s") - 40.0 * 1048576 / 1e6 / 0.5) < 1e-6);
	const cJSON *h = cJSON_GetObjectItem(o, "heat");
	REQUIRE(h != NULL);
	const cJSON *rs = cJSON_GetObjectItem(h, "resident"), *us = cJSON_GetObjectItem(h, "uses");
	const cJSON *ls = cJSON_GetObjectItem(h, "layers");
	REQUIRE(cJSON_GetArraySize(rs) == 3 && cJSON_GetArraySize(us) == 3);
	CHECK_EQ_STR(cJSON_GetArrayItem(rs, 0)->valuestring, "1010");
	CHECK_EQ_STR(cJSON_GetArrayItem(rs, 1)->valuestring, "0000");
	CHECK_EQ_STR(cJSON_GetArrayItem(rs, 2)->valuestring, "1100");
	CHECK(cJSON_GetArrayItem(ls, 2)->valuedouble == 5);
	CHECK(cJSON_GetArrayItem(cJSON_GetArrayItem(us, 0), 2)->valuedouble == 7);
	CHECK(cJSON_GetArrayItem(cJSON_GetArrayItem(us, 2), 2)->valuedouble == 4000000000.0);
	CHECK(getnum(o, "heat", "n_expert") == 4);
	cJSON_Delete(o);
	pt_free(txt);
}

PT_TEST(test_stats_json_mapped_and_idle)
{
	struct pt_stats_model m = model();
	struct pt_stats_sample p = sample(2.0), c = sample(3.0);
	p.eng.io_engine = c.eng.io_engine = "mmap (every expert fits the budget; pages on demand)";
	p.proc_read_bytes = 1000;
	c.proc_read_bytes = 1000 + 3000000; /* page-ins count as reads in mapped mode */
	p.eng.decode_tokens = 5;
	c.eng.decode_tokens = 5; /* idle: nothing decoded */
	char *txt = pt_stats_json(&m, &p, &c, NULL, NULL);
	REQUIRE(txt != NULL);
	cJSON *o = cJSON_Parse(txt);
	REQUIRE(o != NULL);
	CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "experts"), "mode")->valuestring,
		     "mapped");
	CHECK(getnum(o, "experts", "read_bytes") == 3000000);
	CHECK(fabs(getnum(o, "experts", "disk_mb_s") - 3.0) < 1e-9);
	CHECK(isnull(o, "experts", "mib_per_token") && isnull(o, "experts", "hit_rate_now"));
	CHECK(getnum(o, "gen", "decode_tok_s") == 0);
	CHECK(getnum(o, "memory", "expert_cache_bytes") == 0);
	cJSON_Delete(o);
	pt_free(txt);
	m.n_moe = 0; /* a dense model */
	txt = pt_stats_json(&m, &p, &c, NULL, NULL);
	REQUIRE(txt != NULL);
	CHECK(strstr(txt, "\"mode\":\"none\"") != NULL);
	pt_free(txt);
}

PT_TEST(test_stats_json_allocation_failures)
{
	struct pt_stats_model m = model();
	struct pt_stats_sample p = sample(1.0), c = sample(2.0);
	const uint8_t res[12] = { 1 };
	const uint32_t uses[12] = { 1 };
	for (uint64_t k = 1; k < 8; k++) {
		pt_alloc_fail_at(k);
		char *txt = pt_stats_json(&m, &p, &c, res, uses);
		pt_alloc_fail_at(0);
		if (txt) {
			cJSON *o = cJSON_Parse(txt);
			CHECK(o != NULL);
			cJSON_Delete(o);
		}
		pt_free(txt);
	}
}

PT_TEST(test_stats_proc)
{
	uint64_t rss = 0, rd = 0;
	pt_stats_proc(&rss, &rd);
	CHECK(rss > (1u << 20));
	pt_stats_proc(NULL, NULL);
}
