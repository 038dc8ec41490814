/* test_gen_sample.c - sampler chain, determinism, bounds; stop strings and UTF-8 streaming. */
#include "gen/sample.h"
#include "gen/textout.h"
#include "test.h"

#include <math.h>

#include "util/alloc.h"

static pt_sampler *make(float temp, uint32_t k, float p, float minp, float pen, uint32_t n,
			uint64_t seed, uint32_t vocab)
{
	struct pt_sampler_opts o = { temp, k, p, minp, pen, n, seed };
	pt_sampler *s = NULL;
	struct pt_error e = { 0 };
	if (pt_sampler_create(&o, vocab, &s, &e) != PT_OK)
		return NULL;
	return s;
}

PT_TEST(test_gen_sample_greedy_picks_argmax_lowest_id_on_tie)
{
	float l[6] = { 0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f };
	pt_sampler *s = make(0, 64, 1, 0, 1, 0, 1, 6);
	REQUIRE(s);
	CHECK_EQ_INT(pt_sampler_sample(s, l), 1);
	pt_sampler_destroy(s);
}

PT_TEST(test_gen_sample_all_neg_inf_returns_minus_one)
{
	float l[3] = { -INFINITY, -INFINITY, NAN };
	pt_sampler *s = make(0, 2, 1, 0, 1, 0, 1, 3);
	pt_sampler *s2 = make(0.8f, 2, 1, 0, 1, 0, 1, 3);
	REQUIRE(s && s2);
	CHECK_EQ_INT(pt_sampler_sample(s, l), -1);
	CHECK_EQ_INT(pt_sampler_sample(s2, l), -1);
	pt_sampler_destroy(s);
	pt_sampler_destroy(s2);
}

PT_TEST(test_gen_sample_repetition_penalty_changes_greedy_choice)
{
	float l[4] = { 3.0f, 2.9f, -1.0f, 0.0f };
	pt_sampler *s = make(0, 0, 1, 0, 1.5f, 4, 1, 4);
	REQUIRE(s);
	CHECK_EQ_INT(pt_sampler_sample(s, l), 0);
	pt_sampler_accept(s, 0); /* 3.0 / 1.5 = 2.0 < 2.9 */
	CHECK_EQ_INT(pt_sampler_sample(s, l), 1);
	pt_sampler_accept(s, 1);
	pt_sampler_accept(s, 2);
	pt_sampler_accept(s, 3);
	pt_sampler_accept(s, 3); /* window of 4 now holds 1,2,3,3: token 0 no longer penalised */
	CHECK_EQ_INT(pt_sampler_sample(s, l), 0);
	pt_sampler_reset(s);
	CHECK_EQ_INT(pt_sampler_sample(s, l), 0);
	pt_sampler_destroy(s);
}

PT_TEST(test_gen_sample_top_k_one_is_greedy)
{
	float l[5] = { 0.1f, 0.2f, 5.0f, 0.3f, 0.4f };
	pt_sampler *s = make(1.0f, 1, 1, 0, 1, 0, 7, 5);
	REQUIRE(s);
	for (int i = 0; i < 50; i++)
		CHECK_EQ_INT(pt_sampler_sample(s, l), 2);
	pt_sampler_destroy(s);
}

/* The scans skip 64-logit blocks with no raw logit above the bar (sample.c): against a
 * plain reference over the chain's view of each logit, on vocabularies that end mid-block,
 * with the winners at block edges and in the tail, ties at the bar, NaN / -inf, and tokens a
 * penalty of 1.5 pushes down (or, at 0.5, up: no skipping then). */
static float ref_view(const float *l, uint32_t t, const uint8_t *pen, float p)
{
	return pen[t] && p != 1.0f ? (l[t] > 0 ? l[t] / p : l[t] * p) : l[t];
}

static bool ref_better(float a, uint32_t ia, float b, uint32_t ib)
{
	return a > b || (a == b && ia < ib);
}

PT_TEST(test_gen_sample_block_skip_matches_plain_scan)
{
	static const uint32_t vocabs[] = { 1, 63, 64, 65, 200, 1000, 4099 };
	static const float pens[] = { 1.0f, 1.5f, 0.5f };
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++)
		for (size_t pi = 0; pi < 3; pi++)
			for (int round = 0; round < 9; round++) {
				const uint32_t V = vocabs[vi];
				float *l = pt_mallocn(V, sizeof(float));
				uint8_t *pen = pt_calloc(V, 1);
				REQUIRE(l && pen);
				for (uint32_t t = 0; t < V; t++) {
					x = x * 6364136223846793005ull + 1442695040888963407ull;
					const uint32_t r = (uint32_t)(x >> 33);
					l[t] = (float)(r % 2000) / 100.0f - 12.0f;
					if (r % 97 == 0)
						l[t] = NAN;
					else if (r % 89 == 0)
						l[t] = -INFINITY;
				}
				/* winners where the blocks turn: edges, the tail, ties */
				const uint32_t spots[] = { 0, 63, 64, 127, V - 1, V / 2, V > 2 ? V - 2 : 0 };
				for (size_t i = 0; i < 7; i++) { /* one ulp apart, the top moving */
					float w = 25.0f;
					for (size_t u = (i + (size_t)round) % 7; u > 0; u--)
						w = nextafterf(w, 99.0f);
					l[spots[i] % V] = round % 4 == 1 ? 30.0f : w; /* or tied */
				}
				if (round == 2)
					for (uint32_t t = 0; t < V; t++)
						l[t] = 1.0f; /* every token tied */
				const uint32_t hist = V < 8 ? V : 8;
				struct pt_sampler_opts o = { 0, 0, 1.0f, 0, pens[pi], hist, 3 };
				pt_sampler *g = NULL, *k = NULL;
				struct pt_error e = { 0 };
				REQUIRE(pt_sampler_create(&o, V, &g, &e) == PT_OK);
				o.temperature = 1e6f; /* near-uniform over the kept candidates */
				o.top_k = 4;
				REQUIRE(pt_sampler_create(&o, V, &k, &e) == PT_OK);
				for (uint32_t i = 0; i < hist; i++) { /* penalize the winners first */
					const uint32_t t = (spots[i % 7] + (uint32_t)i / 7) % V;
					pt_sampler_accept(g, (int32_t)t);
					pt_sampler_accept(k, (int32_t)t);
					pen[t] = 1;
				}
				/* reference greedy and top-4 over the view */
				int32_t best = -1;
				uint32_t top[4], nt = 0;
				for (uint32_t t = 0; t < V; t++) {
					const float v = ref_view(l, t, pen, pens[pi]);
					if (isnan(v))
						continue;
					if (best < 0 || v > ref_view(l, (uint32_t)best, pen, pens[pi]))
						best = (int32_t)t;
					if (v == -INFINITY)
						continue;
					uint32_t at = nt < 4 ? nt++ : 4;
					while (at > 0 && ref_better(v, t, ref_view(l, top[at - 1], pen, pens[pi]),
								    top[at - 1])) {
						if (at < 4)
							top[at] = top[at - 1];
						at--;
					}
					if (at < 4)
						top[at] = t;
				}
				if (best >= 0 && ref_view(l, (uint32_t)best, pen, pens[pi]) == -INFINITY)
					best = -1;
				CHECK_EQ_INT(pt_sampler_sample(g, l), best);
				bool seen[4] = { false };
				for (int d = 0; d < 400; d++) {
					const int32_t t = pt_sampler_sample(k, l);
					bool in = false;
					for (uint32_t i = 0; i < nt; i++)
						if ((uint32_t)t == top[i])
							in = seen[i] = true;
					CHECK(in || (nt == 0 && t == -1));
				}
				for (uint32_t i = 0; i < nt; i++)
					CHECK(seen[i]);
				pt_sampler_destroy(g);
				pt_sampler_destroy(k);
				pt_free(l);
				pt_free(pen);
			}
}

PT_TEST(test_gen_sample_seed_determinism_and_distribution)
{
	enum { V = 8, N = 20000 };
	float l[V];
	int counts[V] = { 0 }, seq_a[64], seq_b[64], differ = 0;
	for (int i = 0; i < V; i++)
		l[i] = logf((float)(i + 1)); /* p_i proportional to i+1 at temperature 1 */
	pt_sampler *a = make(1.0f, 0, 1, 0, 1, 0, 42, V);
	pt_sampler *b = make(1.0f, 0, 1, 0, 1, 0, 42, V);
	pt_sampler *c = make(1.0f, 0, 1, 0, 1, 0, 43, V);
	REQUIRE(a && b && c);
	for (int i = 0; i < 64; i++) {
		seq_a[i] = pt_sampler_sample(a, l);
		seq_b[i] = pt_sampler_sample(b, l);
		differ += seq_a[i] != pt_sampler_sample(c, l);
	}
	CHECK(memcmp(seq_a, seq_b, sizeof seq_a) == 0);
	CHECK(differ > 0);
	for (int i = 0; i < N; i++)
		counts[pt_sampler_sample(a, l)]++;
	for (int i = 0; i < V; i++) /* expected N*(i+1)/36; allow 5 sigma */
		CHECK_NEAR(counts[i], N * (i + 1) / 36.0, 5 * sqrt(N * (i + 1) / 36.0) + 1);
	pt_sampler_destroy(a);
	pt_sampler_destroy(b);
	pt_sampler_destroy(c);
}

PT_TEST(test_gen_sample_top_p_and_min_p_truncate)
{
	/* probabilities 0.5, 0.3, 0.15, 0.05 */
	float l[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
	int seen[4] = { 0 };
	pt_sampler *s = make(1.0f, 0, 0.75f, 0, 1, 0, 3, 4); /* keeps 0.5 + 0.3 */
	pt_sampler *m = make(1.0f, 0, 1.0f, 0.5f, 1, 0, 3, 4); /* keeps p >= 0.25 */
	REQUIRE(s && m);
	for (int i = 0; i < 2000; i++)
		seen[pt_sampler_sample(s, l)]++;
	CHECK(seen[0] > 0 && seen[1] > 0);
	CHECK_EQ_INT(seen[2] + seen[3], 0);
	memset(seen, 0, sizeof seen);
	for (int i = 0; i < 2000; i++)
		seen[pt_sampler_sample(m, l)]++;
	CHECK(seen[0] > 0 && seen[1] > 0);
	CHECK_EQ_INT(seen[2] + seen[3], 0);
	pt_sampler_destroy(s);
	pt_sampler_destroy(m);
}

PT_TEST(test_gen_sample_low_temperature_concentrates)
{
	float l[3] = { 1.0f, 0.9f, 0.8f };
	int top = 0;
	pt_sampler *s = make(0.01f, 0, 1, 0, 1, 0, 9, 3);
	REQUIRE(s);
	for (int i = 0; i < 1000; i++)
		top += pt_sampler_sample(s, l) == 0;
	CHECK(top >= 999);
	pt_sampler_destroy(s);
}

PT_TEST(test_gen_sample_rejects_bad_options)
{
	struct pt_sampler_opts o;
	struct pt_error e = { 0 };
	pt_sampler *s = NULL;
	pt_sampler_opts_default(&o);
	o.top_p = 0;
	CHECK_EQ_INT(pt_sampler_create(&o, 10, &s, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "top-p");
	pt_sampler_opts_default(&o);
	o.temperature = NAN;
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_sampler_create(&o, 10, &s, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "temperature");
	pt_sampler_opts_default(&o);
	o.min_p = 2;
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_sampler_create(&o, 10, &s, &e), PT_E_INVALID);
	pt_sampler_opts_default(&o);
	o.repeat_penalty = 0;
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_sampler_create(&o, 10, &s, &e), PT_E_INVALID);
	CHECK(s == NULL);
}

PT_TEST(test_gen_sample_allocation_failure_sweep)
{
	struct pt_sampler_opts o;
	pt_sampler_opts_default(&o);
	for (uint64_t k = 1; k < 20; k++) {
		struct pt_error e = { 0 };
		pt_sampler *s = NULL;
		pt_alloc_fail_at(k);
		enum pt_status st = pt_sampler_create(&o, 1000, &s, &e);
		pt_alloc_fail_at(0);
		if (st == PT_OK) {
			pt_sampler_destroy(s);
			break;
		}
		CHECK_EQ_INT(st, PT_E_NOMEM);
		CHECK(s == NULL);
	}
}

/* ---- textout ---- */

struct sink {
	char buf[512];
	size_t len;
	int calls;
};

static bool to_sink(void *ctx, const char *text, size_t len)
{
	struct sink *k = ctx;
	if (k->len + len < sizeof k->buf) {
		memcpy(k->buf + k->len, text, len);
		k->len += len;
		k->buf[k->len] = '\0';
	}
	k->calls++;
	return true;
}

static pt_textout *mk_out(struct sink *k, const char *const *stops, size_t n)
{
	pt_textout *t = NULL;
	struct pt_error e = { 0 };
	memset(k, 0, sizeof *k);
	pt_textout_create(stops, n, to_sink, k, &t, &e);
	return t;
}

PT_TEST(test_gen_textout_stop_split_across_pieces_never_leaks)
{
	const char *stops[] = { "</end>", "STOP" };
	struct sink k;
	size_t idx = 99;
	pt_textout *t = mk_out(&k, stops, 2);
	REQUIRE(t);
	CHECK(!pt_textout_feed(t, "hello </", 8, &idx));
	CHECK_EQ_STR(k.buf, "hello ");
	CHECK(!pt_textout_feed(t, "en", 2, &idx));
	CHECK_EQ_STR(k.buf, "hello ");
	CHECK(pt_textout_feed(t, "d> tail", 7, &idx));
	CHECK_EQ_STR(k.buf, "hello ");
	CHECK_EQ_INT(idx, 0);
	CHECK(pt_textout_stopped(t));
	CHECK(pt_textout_feed(t, "more", 4, &idx));
	pt_textout_finish(t);
	CHECK_EQ_STR(k.buf, "hello ");
	pt_textout_destroy(t);
}

PT_TEST(test_gen_textout_false_prefix_is_released)
{
	const char *stops[] = { "</end>" };
	struct sink k;
	pt_textout *t = mk_out(&k, stops, 1);
	REQUIRE(t);
	pt_textout_feed(t, "a </e", 5, NULL);
	CHECK_EQ_STR(k.buf, "a ");
	pt_textout_feed(t, "x", 1, NULL);
	CHECK_EQ_STR(k.buf, "a </ex");
	pt_textout_feed(t, "<", 1, NULL);
	pt_textout_finish(t);
	CHECK_EQ_STR(k.buf, "a </ex<");
	pt_textout_destroy(t);
}

PT_TEST(test_gen_textout_earliest_stop_wins)
{
	const char *stops[] = { "bcd", "cd" };
	struct sink k;
	size_t idx = 9;
	pt_textout *t = mk_out(&k, stops, 2);
	REQUIRE(t);
	CHECK(pt_textout_feed(t, "abcde", 5, &idx));
	CHECK_EQ_STR(k.buf, "a");
	CHECK_EQ_INT(idx, 0);
	pt_textout_destroy(t);
}

PT_TEST(test_gen_textout_utf8_held_until_complete)
{
	struct sink k;
	pt_textout *t = mk_out(&k, NULL, 0);
	REQUIRE(t);
	/* "न" = E0 A4 A8 split over three pieces */
	pt_textout_feed(t, "x\xe0", 2, NULL);
	CHECK_EQ_STR(k.buf, "x");
	pt_textout_feed(t, "\xa4", 1, NULL);
	CHECK_EQ_STR(k.buf, "x");
	pt_textout_feed(t, "\xa8", 1, NULL);
	CHECK_EQ_STR(k.buf, "x\xe0\xa4\xa8");
	/* an emoji split 1+3 */
	pt_textout_feed(t, "\xf0", 1, NULL);
	pt_textout_feed(t, "\x9f\x98\x80", 3, NULL);
	CHECK_EQ_STR(k.buf, "x\xe0\xa4\xa8\xf0\x9f\x98\x80");
	pt_textout_destroy(t);
}

PT_TEST(test_gen_textout_invalid_bytes_become_replacement)
{
	struct sink k;
	pt_textout *t = mk_out(&k, NULL, 0);
	REQUIRE(t);
	pt_textout_feed(t, "a\xff" "b\xc0\xaf" "c", 6, NULL);
	CHECK_EQ_STR(k.buf, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c");
	pt_textout_reset(t);
	memset(&k, 0, sizeof k);
	pt_textout_feed(t, "z\xe2\x82", 3, NULL); /* incomplete euro sign at the end */
	CHECK_EQ_STR(k.buf, "z");
	pt_textout_finish(t);
	CHECK_EQ_STR(k.buf, "z\xef\xbf\xbd");
	pt_textout_destroy(t);
}

PT_TEST(test_gen_textout_rejects_empty_stop)
{
	const char *stops[] = { "ok", "" };
	pt_textout *t = NULL;
	struct pt_error e = { 0 };
	CHECK_EQ_INT(pt_textout_create(stops, 2, to_sink, NULL, &t, &e), PT_E_INVALID);
	CHECK(t == NULL);
	CHECK_CONTAINS(e.msg, "empty");
}

PT_TEST(test_gen_utf8_complete_prefix)
{
	CHECK_EQ_INT(pt_utf8_complete_prefix((const unsigned char *)"ab", 2), 2);
	CHECK_EQ_INT(pt_utf8_complete_prefix((const unsigned char *)"a\xe0\xa4", 3), 1);
	CHECK_EQ_INT(pt_utf8_complete_prefix((const unsigned char *)"a\xed\xa0", 3), 3);
	CHECK_EQ_INT(pt_utf8_complete_prefix((const unsigned char *)"\xf4\x90", 2), 2);
}
