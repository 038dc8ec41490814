/* test_compare.c - distribution comparison on synthetic distributions with known answers. */
#include "test.h"

#include <stdio.h>

#include "model/compare.h"

static void softmax(const double *l, float *p, int n)
{
	double m = l[0], s = 0;
	for (int i = 1; i < n; i++)
		m = l[i] > m ? l[i] : m;
	for (int i = 0; i < n; i++)
		s += exp(l[i] - m);
	for (int i = 0; i < n; i++)
		p[i] = (float)(exp(l[i] - m) / s);
}

PT_TEST(test_compare_identical_is_zero)
{
	float a[3 * 16];
	double l[16];
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 16; i++)
			l[i] = sin(i * 1.7 + r);
		softmax(l, a + r * 16, 16);
	}
	struct pt_compare_stats s;
	struct pt_error err = { 0 };
	REQUIRE(pt_compare_dists(a, a, 3, 16, &s, &err) == PT_OK);
	CHECK_EQ_INT(s.positions, 3);
	CHECK_NEAR(s.kl_mean, 0, 1e-12);
	CHECK_NEAR(s.kl_max, 0, 1e-12);
	CHECK_NEAR(s.top1_agree, 1.0, 0);
	CHECK_NEAR(s.max_dlogp_top10, 0, 0);
}

PT_TEST(test_compare_known_kl_and_top1)
{
	/* Row 0: o = (1/2, 1/2), p = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3); argmax 0 vs 1.
	 * Row 1: equal, so mean = KL0 / 2, max at position 0, top-1 agreement 1/2. */
	float o[4] = { 0.5f, 0.5f, 0.9f, 0.1f }, p[4] = { 0.25f, 0.75f, 0.9f, 0.1f };
	struct pt_compare_stats s;
	struct pt_error err = { 0 };
	REQUIRE(pt_compare_dists(o, p, 2, 2, &s, &err) == PT_OK);
	double kl0 = 0.5 * log(2.0) + 0.5 * log(2.0 / 3.0);
	CHECK_NEAR(s.kl_max, kl0, 1e-7);
	CHECK_EQ_INT(s.kl_max_pos, 0);
	CHECK_NEAR(s.kl_mean, kl0 / 2, 1e-7);
	CHECK_NEAR(s.top1_agree, 0.5, 1e-12);
	CHECK_NEAR(s.max_dlogp_top10, log(2.0), 1e-7); /* |ln .5 - ln .25| */
	CHECK_EQ_INT(s.dlogp_pos, 0);
}

PT_TEST(test_compare_top10_ignores_tail)
{
	/* 20 tokens; the particle is wrong only on the oracle's 11th-best token. */
	float o[20], p[20];
	double l[20];
	for (int i = 0; i < 20; i++)
		l[i] = -0.3 * i;
	softmax(l, o, 20);
	memcpy(p, o, sizeof o);
	p[10] *= 0.5f;
	p[0] += o[10] * 0.5f;
	struct pt_compare_stats s;
	struct pt_error err = { 0 };
	REQUIRE(pt_compare_dists(o, p, 1, 20, &s, &err) == PT_OK);
	CHECK(s.kl_mean > 0);
	CHECK(s.max_dlogp_top10 < 0.1);   /* only token 0 moved among the top 10 */
	p[9] *= 0.5f;
	REQUIRE(pt_compare_dists(o, p, 1, 20, &s, &err) == PT_OK);
	CHECK_NEAR(s.max_dlogp_top10, log(2.0), 1e-6);
}

PT_TEST(test_compare_zero_probability_is_finite)
{
	float o[2] = { 0.5f, 0.5f }, p[2] = { 1.0f, 0.0f };
	struct pt_compare_stats s;
	struct pt_error err = { 0 };
	REQUIRE(pt_compare_dists(o, p, 1, 2, &s, &err) == PT_OK);
	CHECK(isfinite(s.kl_mean) && s.kl_mean > 10);
	/* oracle zeros contribute nothing */
	REQUIRE(pt_compare_dists(p, o, 1, 2, &s, &err) == PT_OK);
	CHECK_NEAR(s.kl_mean, log(2.0), 1e-7);
}

PT_TEST(test_compare_rejects_bad_rows)
{
	float o[4] = { 0.5f, 0.5f, 0.5f, 0.5f }, p[4] = { 0.5f, 0.5f, NAN, 0.5f };
	struct pt_compare_stats s;
	struct pt_error err = { 0 };
	CHECK(pt_compare_dists(o, p, 2, 2, &s, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "particle");
	CHECK_CONTAINS(err.msg, "position 1");
	pt_error_clear(&err);
	p[2] = -0.1f;
	CHECK(pt_compare_dists(p, o, 2, 2, &s, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "oracle");
	pt_error_clear(&err);
	CHECK(pt_compare_dists(o, o, 0, 2, &s, &err) == PT_E_INVALID);
}

PT_TEST(test_compare_files)
{
	float o[6] = { 0.5f, 0.25f, 0.25f, 0.1f, 0.1f, 0.8f };
	float p[6] = { 0.25f, 0.5f, 0.25f, 0.1f, 0.1f, 0.8f };
	char po[512], pp[512];
	snprintf(po, sizeof po, "%s", pt_test_tmpfile("cmp_o.f32"));
	snprintf(pp, sizeof pp, "%s", pt_test_tmpfile("cmp_p.f32"));
	FILE *f = fopen(po, "wb");
	REQUIRE(f && fwrite(o, 4, 6, f) == 6 && fclose(f) == 0);
	f = fopen(pp, "wb");
	REQUIRE(f && fwrite(p, 4, 6, f) == 6 && fclose(f) == 0);
	struct pt_compare_stats s, m;
	struct pt_error err = { 0 };
	REQUIRE(pt_compare_files(po, pp, 3, &s, &err) == PT_OK);
	REQUIRE(pt_compare_dists(o, p, 2, 3, &m, &err) == PT_OK);
	CHECK_EQ_INT(s.positions, 2);
	CHECK_NEAR(s.kl_mean, m.kl_mean, 0);
	CHECK_NEAR(s.top1_agree, 0.5, 0);
	/* 6 floats are not whole rows of 4 */
	CHECK(pt_compare_files(po, pp, 4, &s, &err) == PT_E_FORMAT);
	pt_error_clear(&err);
	f = fopen(pp, "wb");
	REQUIRE(f && fwrite(p, 4, 3, f) == 3 && fclose(f) == 0);
	CHECK(pt_compare_files(po, pp, 3, &s, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "positions");
	pt_error_clear(&err);
	CHECK(pt_compare_files(po, "/nonexistent/x.f32", 3, &s, &err) == PT_E_IO);
}
