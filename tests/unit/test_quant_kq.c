/* test_quant_kq.c - quant module quantizers: quantize -> dequantize error bounds on random
 * rows, adversarial rows (zeros, outliers, denormals, negative-only, constant, fp16 extremes),
 * NaN/Inf rejection, determinism and idempotence, and the 4-lane K-quant search helpers
 * against the scalar ones.  Byte-exactness against ggml itself is tests/oracle/
 * test_quant_ggml.sh. */
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "quant/types.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "util/alloc.h"

/* Quantizable types with the relative RMS error bound for Gaussian data. */
static const struct {
	uint32_t type;
	double rel_rmse;
} qtypes[] = { /* bounds ~15% above the values measured for these seeds */
	{ PT_TYPE_F32, 0 },         { PT_TYPE_F16, 0.00025 },   { PT_TYPE_BF16, 0.002 },
	{ PT_TYPE_Q8_0, 0.0067 },   { PT_TYPE_Q6_K, 0.022 },    { PT_TYPE_Q5_0, 0.053 },
	{ PT_TYPE_Q5_1, 0.046 },    { PT_TYPE_Q5_K, 0.043 },    { PT_TYPE_Q4_0, 0.105 },
	{ PT_TYPE_Q4_1, 0.097 },    { PT_TYPE_Q4_K, 0.086 },    { PT_TYPE_IQ4_NL, 0.094 },
	{ PT_TYPE_IQ4_XS, 0.095 },  { PT_TYPE_MXFP4, 0.136 },   { PT_TYPE_Q3_K, 0.185 },
	{ PT_TYPE_Q2_K, 0.365 },
};
#define NQ (sizeof(qtypes) / sizeof(qtypes[0]))
#define MAXN 4096

static uint64_t rng_state;

static float unif(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((rng_state >> 40) + 0.5) / 16777216.0f;
}

static float gauss(void)
{
	return sqrtf(-2.0f * logf(unif())) * cosf(6.2831853f * unif());
}

/* Quantize + dequantize n values; returns the status, fills y. */
static enum pt_status round_trip(uint32_t type, const float *x, float *y, uint64_t n,
				 uint8_t *buf, struct pt_error *err)
{
	enum pt_status st = pt_quant_quantize_row(type, x, buf, n, err);
	if (st == PT_OK)
		st = pt_quant_dequant_row(type, buf, y, n, err);
	return st;
}

static double rel_rmse(const float *x, const float *y, uint64_t n)
{
	double se = 0, sx = 0;
	for (uint64_t i = 0; i < n; i++) {
		se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
		sx += (double)x[i] * x[i];
	}
	return sx > 0 ? sqrt(se / sx) : sqrt(se);
}

struct bufs {
	float *x, *y;
	uint8_t *q, *q2;
};

static int bufs_init(struct bufs *b)
{
	b->x = pt_mallocn(MAXN, sizeof(float));
	b->y = pt_mallocn(MAXN, sizeof(float));
	b->q = pt_malloc(MAXN * 4);
	b->q2 = pt_malloc(MAXN * 4);
	return b->x && b->y && b->q && b->q2;
}

static void bufs_fini(struct bufs *b)
{
	pt_free(b->x);
	pt_free(b->y);
	pt_free(b->q);
	pt_free(b->q2);
}

PT_TEST(test_quant_round_trip_error_bounds)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	static const uint64_t sizes[] = { 256, 1024, 4096 };
	for (size_t t = 0; t < NQ; t++) {
		double worst = 0;
		for (int seed = 1; seed <= 3; seed++) {
			for (size_t s = 0; s < 3; s++) {
				uint64_t n = sizes[s];
				rng_state = 0x12345678ull * (uint64_t)seed + s;
				float scale = seed == 2 ? 0.02f : seed == 3 ? 30.f : 1.f;
				for (uint64_t i = 0; i < n; i++)
					b.x[i] = gauss() * scale;
				struct pt_error err = { 0 };
				CHECK_EQ_INT(round_trip(qtypes[t].type, b.x, b.y, n, b.q, &err), PT_OK);
				double e = rel_rmse(b.x, b.y, n);
				worst = e > worst ? e : worst;
			}
		}
		if (!(worst <= qtypes[t].rel_rmse))
			pt_test_fail(__FILE__, __LINE__, "%s: relative RMSE %.5f > %.5f",
				     pt_type_name(qtypes[t].type), worst, qtypes[t].rel_rmse);
		if (getenv("PT_QUANT_VERBOSE"))
			printf("%-7s rel rmse %.5f\n", pt_type_name(qtypes[t].type), worst);
	}
	bufs_fini(&b);
}

/* Round-trips one adversarial row through every type; check(type, x, y, n) judges it. */
static void each_type(struct bufs *b, uint64_t n,
		      void (*check)(uint32_t type, const float *x, const float *y, uint64_t n))
{
	for (size_t t = 0; t < NQ; t++) {
		struct pt_error err = { 0 };
		enum pt_status st = round_trip(qtypes[t].type, b->x, b->y, n, b->q, &err);
		if (st != PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "%s: %s", pt_type_name(qtypes[t].type),
				     err.msg);
			continue;
		}
		check(qtypes[t].type, b->x, b->y, n);
	}
}

static void expect_exact_zeros(uint32_t type, const float *x, const float *y, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (y[i] != 0.0f) {
			pt_test_fail(__FILE__, __LINE__, "%s: zero row gives %g at %llu",
				     pt_type_name(type), y[i], (unsigned long long)i);
			return;
		}
}

PT_TEST(test_quant_zero_row_gives_exact_zeros)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	memset(b.x, 0, 1024 * sizeof(float));
	each_type(&b, 1024, expect_exact_zeros);
	bufs_fini(&b);
}

/* Per-family tolerance: plain and 32-element linear formats, K/IQ formats (6-bit sub-scales,
 * mins, non-uniform grids), and the coarse ones (MXFP4's power-of-two scale clips the peak by
 * up to 25%, Q2_K/Q3_K). */
static double type_tolerance(uint32_t type, double plain, double kq, double coarse)
{
	switch (type) {
	case PT_TYPE_MXFP4: case PT_TYPE_Q2_K: case PT_TYPE_Q3_K:
		return coarse;
	case PT_TYPE_Q4_K: case PT_TYPE_Q5_K: case PT_TYPE_Q6_K: case PT_TYPE_IQ4_NL:
	case PT_TYPE_IQ4_XS:
		return kq;
	default:
		return plain;
	}
}

/* The largest element of the row must come back within the type's tolerance. */
static void expect_peak_kept(uint32_t type, const float *x, const float *y, uint64_t n)
{
	uint64_t k = 0;
	for (uint64_t i = 1; i < n; i++)
		if (fabsf(x[i]) > fabsf(x[k]))
			k = i;
	double tol = type_tolerance(type, 0.02, 0.1, 0.3);
	if (!(fabs((double)y[k] - x[k]) <= tol * fabsf(x[k])))
		pt_test_fail(__FILE__, __LINE__, "%s: peak %g at %llu came back as %g",
			     pt_type_name(type), x[k], (unsigned long long)k, y[k]);
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(y[i])) {
			pt_test_fail(__FILE__, __LINE__, "%s: non-finite output", pt_type_name(type));
			return;
		}
}

PT_TEST(test_quant_outlier_row)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	rng_state = 99;
	for (int i = 0; i < 512; i++)
		b.x[i] = gauss() * 1e-3f;
	b.x[300] = -1000.0f;
	each_type(&b, 512, expect_peak_kept);
	bufs_fini(&b);
}

static void expect_close_rel(uint32_t type, const float *x, const float *y, uint64_t n,
			     double tol)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(fabs((double)y[i] - x[i]) <= tol * fabs(x[i]))) {
			pt_test_fail(__FILE__, __LINE__, "%s: %g came back as %g at %llu",
				     pt_type_name(type), x[i], y[i], (unsigned long long)i);
			return;
		}
}

static void expect_constant(uint32_t type, const float *x, const float *y, uint64_t n)
{
	/* linear formats represent a constant up to the fp16/bf16 scale rounding */
	expect_close_rel(type, x, y, n, type_tolerance(type, 4e-3, 0.03, 0.25));
}

PT_TEST(test_quant_constant_rows)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	static const float values[] = { 0.375f, -2.5f, 0.05f, 7.0f };
	for (size_t v = 0; v < 4; v++) {
		for (int i = 0; i < 512; i++)
			b.x[i] = values[v];
		each_type(&b, 512, expect_constant);
	}
	bufs_fini(&b);
}

static void expect_fp16_extremes(uint32_t type, const float *x, const float *y, uint64_t n)
{
	/* +-65504 and fp16-sized neighbours: the peaks must survive (fp16 scales cap here) */
	expect_peak_kept(type, x, y, n);
}

PT_TEST(test_quant_fp16_extreme_magnitudes)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	for (int i = 0; i < 512; i++)
		b.x[i] = (i % 3 == 0 ? 65504.0f : i % 3 == 1 ? -65504.0f : 60000.0f);
	each_type(&b, 512, expect_fp16_extremes);
	bufs_fini(&b);
}

static void expect_tiny(uint32_t type, const float *x, const float *y, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(y[i]) || fabsf(y[i] - x[i]) > 1e-18f) {
			pt_test_fail(__FILE__, __LINE__, "%s: denormal %g came back as %g",
				     pt_type_name(type), x[i], y[i]);
			return;
		}
}

PT_TEST(test_quant_denormal_rows)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	rng_state = 5;
	for (int i = 0; i < 512; i++) /* float subnormals and tiny normals */
		b.x[i] = gauss() * (i < 256 ? 1e-39f : 1e-20f);
	b.x[7] = 1.4e-45f;
	b.x[8] = -1.4e-45f;
	each_type(&b, 512, expect_tiny);
	bufs_fini(&b);
}

static void expect_nonpositive(uint32_t type, const float *x, const float *y, uint64_t n)
{
	for (size_t t = 0; t < NQ; t++)
		if (qtypes[t].type == type && rel_rmse(x, y, n) > qtypes[t].rel_rmse * 1.2)
			pt_test_fail(__FILE__, __LINE__, "%s: negative-only row error %.4f",
				     pt_type_name(type), rel_rmse(x, y, n));
	for (uint64_t i = 0; i < n; i++)
		if (y[i] > 0.02f * fabsf(x[i]) + 1e-3f) {
			pt_test_fail(__FILE__, __LINE__, "%s: %g came back positive (%g)",
				     pt_type_name(type), x[i], y[i]);
			return;
		}
}

PT_TEST(test_quant_negative_only_rows)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	rng_state = 77;
	for (int i = 0; i < 1024; i++)
		b.x[i] = -fabsf(gauss()) - 0.5f;
	each_type(&b, 1024, expect_nonpositive);
	bufs_fini(&b);
}

PT_TEST(test_quant_rejects_nan_and_inf)
{
	float x[256];
	uint8_t q[1024];
	memset(q, 0xA5, sizeof(q));
	for (int i = 0; i < 256; i++)
		x[i] = (float)i * 0.01f;
	static const float bad[] = { NAN, INFINITY, -INFINITY };
	for (size_t t = 0; t < NQ; t++) {
		for (int k = 0; k < 3; k++) {
			struct pt_error err = { 0 };
			x[77] = bad[k];
			x[200] = bad[k];
			CHECK_EQ_INT(pt_quant_quantize_row(qtypes[t].type, x, q, 256, &err),
				     PT_E_INVALID);
			CHECK_CONTAINS(err.msg, "index 77");
		}
		CHECK(q[0] == 0xA5 && q[1023] == 0xA5); /* nothing written */
	}
}

PT_TEST(test_quant_rejects_values_beyond_the_format)
{
	float x[256];
	uint8_t q[1024];
	for (int i = 0; i < 256; i++)
		x[i] = 1.0f;
	x[40] = 1e10f; /* fp16 scale overflows for every fp16-scaled format */
	static const uint32_t types[] = { PT_TYPE_F16, PT_TYPE_Q8_0, PT_TYPE_Q4_0, PT_TYPE_Q4_K,
					  PT_TYPE_Q6_K, PT_TYPE_IQ4_NL };
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct pt_error err = { 0 };
		CHECK_EQ_INT(pt_quant_quantize_row(types[t], x, q, 256, &err), PT_E_INVALID);
		CHECK_CONTAINS(err.msg, "too large");
	}
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q4_0, x, q, 256, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "index 32"); /* the block holding element 40 */
	/* formats with wider range take it */
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_BF16, x, q, 256, NULL), PT_OK);
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_MXFP4, x, q, 256, NULL), PT_OK);
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_F32, x, q, 256, NULL), PT_OK);
}

PT_TEST(test_quant_deterministic_and_idempotent)
{
	struct bufs b;
	REQUIRE(bufs_init(&b));
	rng_state = 4242;
	for (int i = 0; i < 2048; i++)
		b.x[i] = gauss();
	for (size_t t = 0; t < NQ; t++) {
		uint32_t type = qtypes[t].type;
		uint64_t rb;
		REQUIRE(pt_type_row_bytes(type, 2048, &rb) == 0);
		memset(b.q, 0x11, rb);
		memset(b.q2, 0x22, rb);
		CHECK_EQ_INT(pt_quant_quantize_row(type, b.x, b.q, 2048, NULL), PT_OK);
		CHECK_EQ_INT(pt_quant_quantize_row(type, b.x, b.q2, 2048, NULL), PT_OK);
		CHECK(memcmp(b.q, b.q2, rb) == 0);
	}
	/* Q8_0, F16, BF16 and F32 reproduce their own output exactly: q(dq(q(x))) == q(x) */
	static const uint32_t idem[] = { PT_TYPE_Q8_0, PT_TYPE_F16, PT_TYPE_BF16, PT_TYPE_F32 };
	for (size_t t = 0; t < 4; t++) {
		uint64_t rb;
		REQUIRE(pt_type_row_bytes(idem[t], 2048, &rb) == 0);
		CHECK_EQ_INT(pt_quant_quantize_row(idem[t], b.x, b.q, 2048, NULL), PT_OK);
		CHECK_EQ_INT(pt_quant_dequant_row(idem[t], b.q, b.y, 2048, NULL), PT_OK);
		CHECK_EQ_INT(pt_quant_quantize_row(idem[t], b.y, b.q2, 2048, NULL), PT_OK);
		if (memcmp(b.q, b.q2, rb) != 0)
			pt_test_fail(__FILE__, __LINE__, "%s not idempotent", pt_type_name(idem[t]));
	}
	bufs_fini(&b);
}

PT_TEST(test_quant_q8_0_known_answer)
{
	/* amax 127 -> d = 1 exactly; roundf is half away from zero: 2.5 -> 3, -2.5 -> -3 */
	float x[32] = { 127.0f, 2.5f, -2.5f, 0.49f, -126.5f };
	uint8_t q[34];
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q8_0, x, q, 32, NULL), PT_OK);
	CHECK(q[0] == 0x00 && q[1] == 0x3C); /* fp16 1.0 */
	CHECK_EQ_INT((int8_t)q[2], 127);
	CHECK_EQ_INT((int8_t)q[3], 3);
	CHECK_EQ_INT((int8_t)q[4], -3);
	CHECK_EQ_INT((int8_t)q[5], 0);
	CHECK_EQ_INT((int8_t)q[6], -127);
}

PT_TEST(test_quant_q4_0_known_answer)
{
	/* max |x| = -8 (first occurrence wins over +8): d = -8 / -8 = 1; q = trunc(x + 8.5) */
	float x[32] = { -8.0f, 8.0f, 0.4f, -0.6f, 6.9f };
	uint8_t q[18];
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q4_0, x, q, 32, NULL), PT_OK);
	CHECK(q[0] == 0x00 && q[1] == 0x3C);
	CHECK_EQ_INT(q[2] & 0xF, 0);   /* -8 -> 0 */
	CHECK_EQ_INT(q[3] & 0xF, 15);  /* 8 + 8.5 = 16 -> clamped 15 */
	CHECK_EQ_INT(q[4] & 0xF, 8);   /* 8.9 -> 8 */
	CHECK_EQ_INT(q[5] & 0xF, 7);   /* 7.9 -> 7 */
	CHECK_EQ_INT(q[6] & 0xF, 15);  /* 15.4 -> 15 */
	CHECK_EQ_INT(q[2] >> 4, 8);    /* element 16 = 0 -> 8 */
}

PT_TEST(test_quant_nearest_int_and_best_index)
{
	CHECK_EQ_INT(pt_quant_nearest_int(2.5f), 2); /* half to even, unlike roundf */
	CHECK_EQ_INT(pt_quant_nearest_int(3.5f), 4);
	CHECK_EQ_INT(pt_quant_nearest_int(-2.5f), -2);
	CHECK_EQ_INT(pt_quant_nearest_int(-0.7f), -1);
	CHECK_EQ_INT(pt_quant_nearest_int(4194303.0f), 4194303);
	static const int8_t kv[4] = { -10, 0, 4, 20 };
	CHECK_EQ_INT(pt_quant_best_index_int8(4, kv, -50.f), 0);
	CHECK_EQ_INT(pt_quant_best_index_int8(4, kv, 2.0f), 2); /* exact midpoint -> upper */
	CHECK_EQ_INT(pt_quant_best_index_int8(4, kv, 1.9f), 1);
	CHECK_EQ_INT(pt_quant_best_index_int8(4, kv, 12.0f), 3);
	CHECK_EQ_INT(pt_quant_best_index_int8(4, kv, 99.f), 3);
}

/* A sub-block generator with the shapes that exercise every branch of the searches. */
static void fill_subblocks(float *x, int n, int nsb, int round)
{
	for (int b = 0; b < nsb; b++) {
		float *xb = x + b * n;
		int shape = (b + round) % 7;
		for (int i = 0; i < n; i++) {
			float g = gauss();
			xb[i] = shape == 0 ? 0.0f : shape == 1 ? 0.25f : shape == 2 ? fabsf(g) + 1
			      : shape == 3 ? -fabsf(g) : shape == 4 ? g * 1e-20f : g;
		}
	}
}

static const struct {
	int n, nmax, nstep, mad;
	float rmin;
} lane_cfg[] = { { 32, 15, 20, 0, -1.0f }, { 32, 31, 15, 0, -0.5f }, { 16, 3, 15, 1, -0.5f } };

/* 300 rounds of 8 sub-blocks per configuration: the lane versions (level 0: SSE2 4-lane,
 * 1: AVX2 8-lane, 2: the dispatching entry point) against 8 scalar calls; returns the
 * number of mismatching results. */
#if !defined(__x86_64__)
/* No AVX2 twin outside x86-64 (Makefile ARCH); pt_quant_have_avx2() is 0, level 1 never runs. */
#define pt_quant_make_qkx2_quants_avx2 pt_quant_make_qkx2_quants_sse
#define pt_quant_make_qx_quants_avx2 pt_quant_make_qx_quants_sse
#endif

static int lane_mismatches(int level)
{
	float x[256], w[256], sc1[8], sc2[8], mn1[8], mn2[8];
	uint8_t L1[256], L2[256], Laux[32];
	int8_t S1[256], S2[256];
	int bad = 0;
	rng_state = 2024;
	for (int round = 0; round < 300; round++) {
		for (int c = 0; c < 3; c++) {
			int n = lane_cfg[c].n, nmax = lane_cfg[c].nmax, nstep = lane_cfg[c].nstep;
			int mad = lane_cfg[c].mad;
			float rmin = lane_cfg[c].rmin;
			fill_subblocks(x, n, 8, round);
			for (int i = 0; i < 8 * n; i++)
				w[i] = fabsf(x[i]) + 0.01f * (float)(i % 5);
			for (int b = 0; b < 8; b++)
				sc1[b] = pt_quant_make_qkx2_quants(n, nmax, x + b * n, w + b * n,
								   L1 + b * n, &mn1[b], Laux, rmin,
								   0.1f, nstep, mad);
			if (level == 0)
				pt_quant_make_qkx2_quants_sse(n, nmax, x, w, L2, sc2, mn2, rmin, 0.1f,
							      nstep, mad);
			else if (level == 1)
				pt_quant_make_qkx2_quants_avx2(n, nmax, x, w, L2, sc2, mn2, rmin, 0.1f,
							       nstep, mad);
			else
				pt_quant_make_qkx2_quants_x8(n, nmax, x, w, L2, sc2, mn2, rmin, 0.1f,
							     nstep, mad);
			bad += memcmp(sc1, sc2, sizeof(sc1)) != 0;
			bad += memcmp(mn1, mn2, sizeof(mn1)) != 0;
			bad += memcmp(L1, L2, (size_t)(8 * n)) != 0;
		}
		fill_subblocks(x, 16, 8, round);
		for (int b = 0; b < 8; b++)
			sc1[b] = pt_quant_make_qx_quants(16, 32, x + 16 * b, S1 + 16 * b, 1, NULL);
		if (level == 0)
			pt_quant_make_qx_quants_sse(16, 32, x, S2, sc2);
		else if (level == 1)
			pt_quant_make_qx_quants_avx2(16, 32, x, S2, sc2);
		else
			pt_quant_make_qx_quants_x8(16, 32, x, S2, sc2);
		bad += memcmp(sc1, sc2, sizeof(sc1)) != 0;
		bad += memcmp(S1, S2, 128) != 0;
	}
	return bad;
}

PT_TEST(test_quant_lane_searches_match_scalar)
{
	CHECK_EQ_INT(lane_mismatches(0), 0);
	if (pt_quant_have_avx2())
		CHECK_EQ_INT(lane_mismatches(1), 0);
	else
		printf("note: no AVX2 here, 8-lane search not exercised\n");
	CHECK_EQ_INT(lane_mismatches(2), 0);
}

PT_TEST(test_quant_mxfp4_exponent_and_exact_grid)
{
	/* max 6 -> e = floor(log2 6) - 2 + 127 = 127, scale 2^-1 x doubled table: E2M1 exact */
	static const float e2m1[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
	float x[32], y[32];
	uint8_t q[17];
	for (int j = 0; j < 32; j++)
		x[j] = (j & 8 ? -1.0f : 1.0f) * e2m1[j % 8];
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_MXFP4, x, q, 32, NULL), PT_OK);
	CHECK_EQ_INT(q[0], 127);
	CHECK_EQ_INT(pt_quant_dequant_row(PT_TYPE_MXFP4, q, y, 32, NULL), PT_OK);
	for (int j = 0; j < 32; j++)
		CHECK(y[j] == x[j]);
	/* max |x| in [2^-126, 2^-125): ggml's wrapped exponent would be 0xFF (invalid) */
	for (int j = 0; j < 32; j++)
		x[j] = j == 3 ? 1.5f * ldexpf(1, -126) : 0.0f;
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_MXFP4, x, q, 32, NULL), PT_OK);
	CHECK_EQ_INT(q[0], 0xFE);
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_MXFP4, q, 32, NULL), PT_OK);
	CHECK_EQ_INT(pt_quant_dequant_row(PT_TYPE_MXFP4, q, y, 32, NULL), PT_OK);
	CHECK(y[3] == 0.0f);
}

PT_TEST(test_quant_unaligned_rows)
{
	/* rows at odd addresses give the same floats and bytes as aligned ones */
	struct bufs b;
	REQUIRE(bufs_init(&b));
	rng_state = 31337;
	for (int i = 0; i < 512; i++)
		b.x[i] = gauss();
	for (size_t t = 0; t < NQ; t++) {
		uint32_t type = qtypes[t].type;
		uint64_t rb;
		REQUIRE(pt_type_row_bytes(type, 512, &rb) == 0);
		CHECK_EQ_INT(pt_quant_quantize_row(type, b.x, b.q, 512, NULL), PT_OK);
		CHECK_EQ_INT(pt_quant_quantize_row(type, b.x, b.q2 + 1, 512, NULL), PT_OK);
		CHECK(memcmp(b.q, b.q2 + 1, rb) == 0);
		float *y2 = b.x + 1024; /* spare room in x */
		CHECK_EQ_INT(pt_quant_dequant_row(type, b.q, b.y, 512, NULL), PT_OK);
		CHECK_EQ_INT(pt_quant_dequant_row(type, b.q2 + 1, y2, 512, NULL), PT_OK);
		CHECK(memcmp(b.y, y2, 512 * sizeof(float)) == 0);
	}
	bufs_fini(&b);
}
