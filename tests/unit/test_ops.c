/* test_ops.c - forward-pass operators against plain double-precision references. */
#include "model/ops.h"
#include "test.h"

#include "quant/types.h"
#include "kern/kern.h"
#include "util/alloc.h"
#include <string.h>

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(float lo, float hi)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static double rel_err(double a, double b)
{
	return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
}

PT_TEST(test_ops_rmsnorm_matches_double)
{
	float x[96], w[96], y[96];
	for (int i = 0; i < 96; i++) {
		x[i] = frand(-3, 3);
		w[i] = frand(0.5f, 1.5f);
	}
	pt_op_rmsnorm(y, x, w, 96, 1e-6f);
	double ss = 0;
	for (int i = 0; i < 96; i++)
		ss += (double)x[i] * x[i];
	const double sc = 1.0 / sqrt(ss / 96 + 1e-6);
	for (int i = 0; i < 96; i++)
		CHECK(rel_err(y[i], x[i] * sc * w[i]) < 1e-6);
	/* no weight, in place, per head */
	float h[2 * 8];
	for (int i = 0; i < 16; i++)
		h[i] = (float)(i + 1);
	pt_op_rmsnorm_heads(h, NULL, 2, 8, 0.0f);
	double s2 = 0;
	for (int i = 8; i < 16; i++)
		s2 += (double)(i + 1) * (i + 1);
	CHECK(rel_err(h[8], 9.0 / sqrt(s2 / 8)) < 1e-6);
	double sumsq = 0;
	for (int i = 0; i < 8; i++)
		sumsq += (double)h[i] * h[i];
	CHECK_NEAR(sumsq / 8, 1.0, 1e-5);
}

static void rope_ref(double *v, int hd, int n_rot, long pos, double base, const float *ff,
		     int neox)
{
	for (int i = 0; i < n_rot / 2; i++) {
		double th = pos * pow(base, -2.0 * i / n_rot);
		if (ff)
			th /= ff[i];
		const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
		const double x0 = v[a], x1 = v[b];
		v[a] = x0 * cos(th) - x1 * sin(th);
		v[b] = x0 * sin(th) + x1 * cos(th);
	}
	(void)hd;
}

PT_TEST(test_ops_rope_neox_norm_and_freq_factors)
{
	enum { HD = 64, NH = 3 };
	float cs[HD], ff[HD / 2], x[NH * HD];
	double ref[NH * HD];
	for (int i = 0; i < HD / 2; i++)
		ff[i] = i < 8 ? 1.0f : 1e30f; /* Gemma 4 proportional: later pairs identity */
	for (int mode = 0; mode < 2; mode++) {
		for (int use_ff = 0; use_ff < 2; use_ff++) {
			const long pos = 37;
			const int n_rot = mode ? 48 : HD; /* partial rotation leaves the tail */
			for (int i = 0; i < NH * HD; i++)
				ref[i] = x[i] = frand(-1, 1);
			pt_op_rope_cache(cs, n_rot, pos, 10000.0f, use_ff ? ff : NULL);
			pt_op_rope_apply(x, NH, HD, n_rot, mode ? PT_ROPE_NEOX : PT_ROPE_NORM, cs);
			for (int h = 0; h < NH; h++)
				rope_ref(ref + h * HD, HD, n_rot, pos, 10000.0, use_ff ? ff : NULL,
					 mode);
			for (int i = 0; i < NH * HD; i++)
				CHECK_NEAR(x[i], ref[i], 2e-5);
		}
	}
	/* pos 0 is the identity; with 1e30 factors the pair is (numerically) untouched */
	pt_op_rope_cache(cs, HD, 0, 1e6f, NULL);
	CHECK(cs[0] == 1.0f && cs[1] == 0.0f && cs[HD - 2] == 1.0f);
	pt_op_rope_cache(cs, HD, 100000, 1e6f, ff);
	CHECK(cs[2 * 20] == 1.0f && cs[2 * 20 + 1] < 1e-20f);
}

PT_TEST(test_ops_rope_angle_is_repeated_float_product)
{
	/* The angle of pair i is pos * s^i accumulated in float, not powf(base, ...) each time. */
	float cs[256];
	const float base = 1e6f;
	pt_op_rope_cache(cs, 256, 4097, base, NULL);
	const float s = powf(base, -2.0f / 256.0f);
	float th = 4097.0f;
	for (int i = 0; i < 128; i++) {
		CHECK(cs[2 * i] == cosf(th));
		CHECK(cs[2 * i + 1] == sinf(th));
		th *= s;
	}
}

PT_TEST(test_ops_rope_yarn)
{
	/* Neutral parameters: the plain table, bit for bit. */
	float cs[128], ref[128];
	const struct pt_yarn none = { 1.0f, 0.0f, 1.0f, 0.0f, 0.0f };
	pt_op_rope_cache(ref, 64, 777, 150000.0f, NULL);
	pt_op_rope_cache_yarn(cs, 64, 777, 150000.0f, NULL, &none);
	CHECK(memcmp(cs, ref, 64 * sizeof(float)) == 0);
	/* gpt-oss-like: factor 32 over 4096 positions, base 150000, 64 rotated dims.  Against
	 * a double-precision evaluation of the YaRN formula (corr dims recomputed in double). */
	float lo, hi;
	pt_op_yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f, &lo, &hi);
	const double dlo = floor(64 * log(4096 / (2 * M_PI * 32)) / (2 * log(150000.0)));
	const double dhi = ceil(64 * log(4096 / (2 * M_PI * 1)) / (2 * log(150000.0)));
	CHECK(lo == (float)(dlo > 0 ? dlo : 0) && hi == (float)(dhi < 63 ? dhi : 63));
	CHECK(lo < hi && hi <= 63.0f);
	const struct pt_yarn y = { 1.0f / 32.0f, 1.0f, 1.0f, lo, hi };
	const long pos = 3001;
	pt_op_rope_cache_yarn(cs, 64, pos, 150000.0f, NULL, &y);
	const double mag = 1.0 + 0.1 * log(32.0);
	for (int i = 0; i < 32; i++) {
		const double ext = pos * pow(150000.0, -2.0 * i / 64.0), inter = ext / 32.0;
		double r = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
		r = r < 0 ? 0 : r > 1 ? 1 : r;
		const double mix = 1.0 - r, th = inter * (1.0 - mix) + ext * mix;
		CHECK_NEAR(cs[2 * i], cos(th) * mag, 2e-3);
		CHECK_NEAR(cs[2 * i + 1], sin(th) * mag, 2e-3);
	}
	/* low pairs (fast) keep the extrapolated angle, high pairs the interpolated one */
	const double e0 = (double)pos;
	CHECK_NEAR(cs[0], cos(e0) * mag, 2e-3);
}

PT_TEST(test_ops_softmax_sigmoid_silu)
{
	float x[50];
	double r[50], m = -1e300, sum = 0;
	for (int i = 0; i < 50; i++) {
		x[i] = frand(-20, 20);
		m = x[i] > m ? x[i] : m;
	}
	for (int i = 0; i < 50; i++)
		sum += r[i] = exp(x[i] - m);
	const float s0 = x[3];
	pt_op_softmax(x, 50);
	double tot = 0;
	for (int i = 0; i < 50; i++) {
		CHECK_NEAR(x[i], r[i] / sum, 1e-6 * (r[i] / sum) + 1e-12);
		tot += x[i];
	}
	CHECK_NEAR(tot, 1.0, 1e-5);
	CHECK(rel_err(pt_op_sigmoid(s0), 1.0 / (1.0 + exp(-(double)s0))) < 1e-6);
	for (float v = -30; v < 30; v += 0.37f) {
		CHECK(rel_err(pt_op_silu(v), v / (1.0 + exp(-(double)v))) < 2e-6);
	}
	float g[4] = { -1, 0.5f, 2, 3 }, u[4] = { 2, 2, -1, 0 }, o[4];
	pt_op_swiglu(o, g, u, 4);
	CHECK(rel_err(o[0], -1.0 / (1.0 + exp(1.0)) * 2) < 2e-6);
	CHECK(o[3] == 0.0f);
}

static double gelu_ref(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x)));
}

/* ggml's GELU (ggml_gelu_f32): the formula with libm's tanhf, in float. */
static float gelu_ggml(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x *
				       (1.0f + 0.044715f * x * x)));
}

PT_TEST(test_ops_gelu_f16_table_semantics)
{
	/* the table (built with pt_kern_tanhf) is ggml's (libm's tanhf) at every F16 input */
	int diff = 0;
	for (uint32_t i = 0; i < 65536; i++) {
		const float x = pt_fp16_to_f32((uint16_t)i);
		if (isnan(x) || x <= -10.0f || x >= 10.0f)
			continue;
		diff += pt_op_gelu(x) != pt_fp16_to_f32(pt_f32_to_fp16(gelu_ggml(x)));
	}
	CHECK_EQ_INT(diff, 0);
	CHECK(pt_op_gelu(-10.0f) == 0.0f);
	CHECK(pt_op_gelu(-50.0f) == 0.0f);
	CHECK(pt_op_gelu(10.0f) == 10.0f);
	CHECK(pt_op_gelu(123.5f) == 123.5f);
	for (float x = -9.99f; x < 9.99f; x += 0.0137f) {
		/* exactly: F16 round of the input, then F16 round of the formula */
		const float xr = pt_fp16_to_f32(pt_f32_to_fp16(x));
		const float want = pt_fp16_to_f32(pt_f32_to_fp16(pt_op_gelu_exact(xr)));
		CHECK(pt_op_gelu(x) == want);
		/* and near the double formula within F16 precision */
		CHECK(fabs(pt_op_gelu(x) - gelu_ref(x)) <= 2e-3 * fabs(gelu_ref(x)) + 2e-3);
	}
	float g[3] = { 1.0f, -20.0f, 0.25f }, u[3] = { 3.0f, 5.0f, -2.0f }, o[3];
	pt_op_geglu(o, g, u, 3);
	CHECK(o[0] == pt_op_gelu(1.0f) * 3.0f);
	CHECK(o[1] == 0.0f);
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* pt_op_geglu (the scalar reference's batched F16 conversions by the level's converter; the
 * AVX2 / NEON twins' formula in lanes at avx2 / neon and above) equals pt_op_gelu(g) * u element by element, bit for
 * bit, at every level, and so does pt_op_geglu_ref: every F16 neighbourhood (each F16 value,
 * its rounding midpoints and their neighbours: the ties), subnormals, the +-10 cut-offs,
 * inf and NaN, lengths that are not multiples of the vector width or the batch, in place. */
PT_TEST(test_ops_geglu_matches_gelu_every_level)
{
	enum { N = 4 * 65536 + 13 };
	float *g = pt_mallocn(N, sizeof(float)), *u = pt_mallocn(N, sizeof(float));
	float *o = pt_mallocn(N, sizeof(float)), *w = pt_mallocn(N, sizeof(float));
	REQUIRE(g && u && o && w);
	uint32_t x = 99;
	for (int i = 0; i < N; i++) {
		const uint16_t h = (uint16_t)(i / 4);
		const float v = pt_fp16_to_f32(h);
		float e = v;
		uint32_t b = f32_bits(v) + (uint32_t)((i % 4) == 1 ? 0x1000 : (i % 4) == 2 ? 0xfff : 0x1001);
		if (i % 4)
			memcpy(&e, &b, sizeof(e));
		g[i] = e;
		x = x * 1103515245u + 12345u;
		u[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
	}
	const float special[] = { -10.0f, 10.0f, -9.999999f, 9.999999f, -10.000001f, 1e-30f,
				  -1e-40f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 65519.0f, 65520.0f };
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		g[N - 1 - i] = special[i];
	for (int i = 0; i < N; i++)
		w[i] = pt_op_gelu(g[i]) * u[i];
	struct pt_error err;
	const enum pt_kern_level saved = pt_kern_level();
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
		int bad = 0;
		for (int len = N; len >= N - 9; len -= 3) {
			pt_op_geglu(o, g, u, len);
			for (int i = 0; i < len; i++)
				bad += f32_bits(o[i]) != f32_bits(w[i]) &&
				       !(isnan(o[i]) && isnan(w[i]));
		}
		pt_op_geglu_ref(o, g, u, N);
		for (int i = 0; i < N; i++)
			bad += f32_bits(o[i]) != f32_bits(w[i]) && !(isnan(o[i]) && isnan(w[i]));
		CHECK(bad == 0);
		memcpy(o, g, N * sizeof(float));
		pt_op_geglu(o, o, u, 1000); /* in place */
		bad = 0;
		for (int i = 0; i < 1000; i++)
			bad += f32_bits(o[i]) != f32_bits(w[i]);
		CHECK(bad == 0);
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
	pt_free(g);
	pt_free(u);
	pt_free(o);
	pt_free(w);
}

/* The interleaved double sum of squares against ggml's sequential one: on random rows of
 * every width 1..300 and real widths (scales from 1e-3 to 1e3) the normed floats agree bit
 * for bit (the double sums differ in their last bits at most, far below the float mean). */
PT_TEST(test_ops_rmsnorm_interleaved_sum_matches_sequential)
{
	enum { W = 4096 };
	float *x = pt_mallocn(W, sizeof(float)), *y = pt_mallocn(W, sizeof(float));
	REQUIRE(x && y);
	uint32_t st = 12345;
	size_t bad = 0, total = 0;
	for (int n = 1; n <= 300 + 6; n++) {
		const int width = n <= 300 ? n : (int[]){ 2048, 2816, 4096, 128, 256, 512 }[n - 301];
		const float scale = powf(10.0f, (float)(n % 7) - 3.0f);
		for (int i = 0; i < width; i++) {
			st = st * 1103515245u + 12345u;
			x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * scale;
		}
		double seq = 0.0;
		for (int i = 0; i < width; i++)
			seq += (double)x[i] * (double)x[i];
		const float inv = 1.0f / sqrtf((float)(seq / width) + 1e-6f);
		pt_op_rmsnorm(y, x, NULL, width, 1e-6f);
		for (int i = 0; i < width; i++, total++)
			bad += f32_bits(y[i]) != f32_bits(x[i] * inv);
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(total > 40000);
	pt_free(x);
	pt_free(y);
}

/* pt_op_rmsnorm at every level (the SIMD twins' partial sums lane for lane) equals the scalar
 * reference bit for bit: every width 1..80 and real ones, with and without a weight, in place
 * and not, values from 1e-30 to 1e30 (squares past F32's range: the sums are double), zeros
 * and a NaN row. */
PT_TEST(test_ops_rmsnorm_levels_match_reference)
{
	enum { W = 4096 };
	float *x = pt_mallocn(W, sizeof(float)), *w = pt_mallocn(W, sizeof(float));
	float *want = pt_mallocn(W, sizeof(float)), *y = pt_mallocn(W, sizeof(float));
	REQUIRE(x && w && want && y);
	uint32_t st = 99;
	for (int i = 0; i < W; i++) {
		st = st * 1103515245u + 12345u;
		w[i] = (float)(st >> 8) / 16777216.0f + 0.5f;
	}
	struct pt_error err;
	const enum pt_kern_level saved = pt_kern_level();
	size_t bad = 0, total = 0;
	for (int n = 1; n <= 80 + 6; n++) {
		const int width = n <= 80 ? n : (int[]){ 2048, 2816, 4096, 128, 256, 512 }[n - 81];
		const float scale = n % 9 == 8 ? 0.0f : powf(10.0f, (float)(n % 9) * 7.5f - 30.0f);
		for (int i = 0; i < width; i++) {
			st = st * 1103515245u + 12345u;
			x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * scale;
		}
		if (n == 40)
			x[7] = NAN;
		for (int wt = 0; wt < 2; wt++) {
			const float *ww = wt ? w : NULL;
			REQUIRE(pt_kern_set_level(PT_KERN_LEVEL_SCALAR, &err) == PT_OK);
			pt_op_rmsnorm_ref(want, x, ww, width, 1e-6f);
			for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
				REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
				pt_op_rmsnorm(y, x, ww, width, 1e-6f);
				for (int i = 0; i < width; i++, total++)
					bad += f32_bits(y[i]) != f32_bits(want[i]);
				memcpy(y, x, (size_t)width * sizeof(float));
				pt_op_rmsnorm(y, y, ww, width, 1e-6f); /* in place */
				for (int i = 0; i < width; i++, total++)
					bad += f32_bits(y[i]) != f32_bits(want[i]);
			}
		}
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
	CHECK_EQ_INT(bad, 0);
	CHECK(total > 40000);
	pt_free(x);
	pt_free(w);
	pt_free(want);
	pt_free(y);
}

/* pt_op_swiglu at every level (the AVX2 twin's exp8 lane for lane) equals the scalar
 * reference bit for bit: gate values over the whole exponential range, the clamps, tiny and
 * huge values, inf, NaN, lengths with tails, in place. */
PT_TEST(test_ops_swiglu_levels_match_reference)
{
	enum { N = 200003 };
	float *g = pt_mallocn(N, sizeof(float)), *u = pt_mallocn(N, sizeof(float));
	float *o = pt_mallocn(N, sizeof(float)), *w = pt_mallocn(N, sizeof(float));
	REQUIRE(g && u && o && w);
	uint32_t st = 7;
	for (int i = 0; i < N; i++) {
		st = st * 1103515245u + 12345u;
		const float v = (float)(st >> 8) / 16777216.0f - 0.5f;
		g[i] = v * (i % 3 == 0 ? 240.0f : i % 3 == 1 ? 20.0f : 1e-3f);
		st = st * 1103515245u + 12345u;
		u[i] = (float)(st >> 8) / 16777216.0f - 0.5f;
	}
	const float special[] = { 89.0f, -89.0f, 104.0f, -104.0f, 105.0f, -105.0f, 1e-40f,
				  -1e-40f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 3e38f, -3e38f };
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		g[N - 1 - i] = g[i] = special[i];
	pt_op_swiglu_ref(w, g, u, N);
	struct pt_error err;
	const enum pt_kern_level saved = pt_kern_level();
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
		for (int len = N; len >= N - 9; len -= 3) {
			pt_op_swiglu(o, g, u, len);
			size_t bad = 0;
			for (int i = 0; i < len; i++)
				bad += f32_bits(o[i]) != f32_bits(w[i]) && !(isnan(o[i]) && isnan(w[i]));
			CHECK_EQ_INT(bad, 0);
		}
		memcpy(o, g, N * sizeof(float));
		pt_op_swiglu(o, o, u, 1001); /* in place */
		size_t bad = 0;
		for (int i = 0; i < 1001; i++)
			bad += f32_bits(o[i]) != f32_bits(w[i]) && !(isnan(o[i]) && isnan(w[i]));
		CHECK_EQ_INT(bad, 0);
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
	/* and the reference is silu(g) * u with silu within a few ulp of the double formula */
	for (int i = 100; i < 2000; i++)
		if (fabsf(g[i]) < 80.0f && u[i] != 0.0f)
			CHECK(rel_err(w[i], g[i] / (1.0 + exp(-(double)g[i])) * u[i]) < 2e-6);
	pt_free(g);
	pt_free(u);
	pt_free(o);
	pt_free(w);
}

PT_TEST(test_ops_softcap)
{
	float x[4] = { 0.0f, 15.0f, -90.0f, 1000.0f };
	pt_op_softcap(x, 4, 30.0f);
	CHECK(x[0] == 0.0f);
	CHECK(rel_err(x[1], 30.0 * tanh(0.5)) < 1e-6);
	CHECK(rel_err(x[2], 30.0 * tanh(-3.0)) < 1e-6);
	CHECK(x[3] <= 30.0f && x[3] > 29.99f);
}

/* |got - want| in units of the last place of want (an F32's, want in double). */
static double tanh_ulp_err(float got, double want)
{
	int e;
	frexp(fabs(want), &e);
	return fabs((double)got - want) / ldexp(1.0, (e < -125 ? -125 : e) - 24);
}

/* pt_kern_tanhf is within 2 ulp of tanh: every seventh float from 2^-20 up to 0.75 (the
 * series, the start of the exponential form) and every one around the switch at 0.625, a
 * stride of 97 on to 12 (past which tanh rounds to 1), odd symmetry; tiny values, zeros,
 * infinities, NaN.  Also within 3 ulp of libm's tanhf, which ggml calls (the KL against
 * llama.cpp does not move). */
PT_TEST(test_ops_tanh_accurate)
{
	double worst = 0.0;
	uint32_t n = 0, libm_far = 0;
	float lo = 0x1p-20f;
	uint32_t bits;
	memcpy(&bits, &lo, 4);
	for (;; n++) {
		float x;
		memcpy(&x, &bits, 4);
		if (x > 12.0f)
			break;
		const float y = pt_kern_tanhf(x);
		const double u = tanh_ulp_err(y, tanh((double)x));
		worst = u > worst ? u : worst;
		libm_far += tanh_ulp_err(y, (double)tanhf(x)) > 3.0;
		CHECK(f32_bits(pt_kern_tanhf(-x)) == (f32_bits(y) ^ 0x80000000u));
		bits += x >= 0.6f && x < 0.65f ? 1 : x < 0.75f ? 7 : 97;
	}
	fprintf(stderr, "tanh: %u points, worst %.3f ulp vs exact, %u more than 3 ulp from libm\n",
		n, worst, libm_far);
	CHECK(n > 20000000);
	CHECK(worst <= 2.0);
	CHECK_EQ_INT(libm_far, 0);
	CHECK(pt_kern_tanhf(1e-30f) == 1e-30f && pt_kern_tanhf(-1e-40f) == -1e-40f);
	CHECK(f32_bits(pt_kern_tanhf(0.0f)) == 0 && f32_bits(pt_kern_tanhf(-0.0f)) == 0x80000000u);
	CHECK(pt_kern_tanhf(INFINITY) == 1.0f && pt_kern_tanhf(-INFINITY) == -1.0f);
	CHECK(pt_kern_tanhf(20.0f) == 1.0f && pt_kern_tanhf(-1e30f) == -1.0f);
	CHECK(isnan(pt_kern_tanhf(NAN)));
}

/* pt_op_softcap at every level (the SIMD twins' tanh lane for lane) equals the reference bit
 * for bit: logits over the softcap's whole range (both tanh forms), tiny and huge values,
 * inf, NaN, lengths with tails. */
PT_TEST(test_ops_softcap_levels_match_reference)
{
	enum { N = 100003 };
	float *x = pt_mallocn(N, sizeof(float)), *w = pt_mallocn(N, sizeof(float));
	float *o = pt_mallocn(N, sizeof(float));
	REQUIRE(x && w && o);
	uint32_t st = 11;
	for (int i = 0; i < N; i++) {
		st = st * 1103515245u + 12345u;
		const float v = (float)(st >> 8) / 16777216.0f - 0.5f;
		x[i] = v * (i % 3 == 0 ? 800.0f : i % 3 == 1 ? 40.0f : 1e-2f);
	}
	const float special[] = { 18.75f, -18.75f, 18.7499981f, 300.0f, -300.0f, 1e-40f,
				  -1e-40f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 3e38f, -3e38f };
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		x[N - 1 - i] = x[i] = special[i];
	memcpy(w, x, N * sizeof(float));
	pt_op_softcap_ref(w, N, 30.0f);
	struct pt_error err;
	const enum pt_kern_level saved = pt_kern_level();
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
		for (int len = N; len >= N - 9; len -= 3) {
			memcpy(o, x, N * sizeof(float));
			pt_op_softcap(o, len, 30.0f);
			size_t bad = 0;
			for (int i = 0; i < len; i++)
				bad += f32_bits(o[i]) != f32_bits(w[i]) && !(isnan(o[i]) && isnan(w[i]));
			CHECK_EQ_INT(bad, 0);
		}
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
	pt_free(x);
	pt_free(w);
	pt_free(o);
}

PT_TEST(test_ops_topk_descending_ties_low_index)
{
	const float s[8] = { 0.1f, 0.9f, 0.3f, 0.9f, -1.0f, 0.5f, 0.3f, 2.0f };
	int idx[8];
	pt_op_topk(s, 8, 5, idx);
	CHECK_EQ_INT(idx[0], 7);
	CHECK_EQ_INT(idx[1], 1);
	CHECK_EQ_INT(idx[2], 3);
	CHECK_EQ_INT(idx[3], 5);
	CHECK_EQ_INT(idx[4], 2);
	pt_op_topk(s, 8, 8, idx);
	CHECK_EQ_INT(idx[7], 4);
	/* random against a brute-force selection */
	float r[128];
	for (int i = 0; i < 128; i++)
		r[i] = frand(-5, 5);
	int ids[8];
	pt_op_topk(r, 128, 8, ids);
	for (int j = 0; j < 8; j++) {
		int rank = 0;
		for (int i = 0; i < 128; i++)
			rank += r[i] > r[ids[j]];
		CHECK_EQ_INT(rank, j);
	}
}

PT_TEST(test_ops_moe_route_softmax_norm)
{
	float l[6] = { 1.0f, 3.0f, 2.0f, -1.0f, 2.5f, 0.0f }, sc[6], w[2];
	int ids[2];
	double e[6], tot = 0;
	for (int i = 0; i < 6; i++)
		tot += e[i] = exp((double)l[i]);
	pt_op_moe_route(l, 6, PT_OP_GATING_SOFTMAX, NULL, 2, true, 0.0f, sc, ids, w);
	CHECK_EQ_INT(ids[0], 1);
	CHECK_EQ_INT(ids[1], 4);
	CHECK(rel_err(w[0], e[1] / (e[1] + e[4])) < 1e-6);
	CHECK(rel_err(w[1], e[4] / (e[1] + e[4])) < 1e-6);
	CHECK(rel_err(l[2], e[2] / tot) < 1e-6); /* logits now hold the probabilities */
}

PT_TEST(test_ops_moe_route_sigmoid_bias_scale_clamp)
{
	/* bias changes the choice but not the weights; weights normalised then x2.5 */
	float l[4] = { 0.0f, 1.0f, -1.0f, 0.5f }, sc[4], w[2];
	const float bias[4] = { 0.0f, 0.0f, 5.0f, 0.0f };
	int ids[2];
	pt_op_moe_route(l, 4, PT_OP_GATING_SIGMOID, bias, 2, true, 2.5f, sc, ids, w);
	CHECK_EQ_INT(ids[0], 2);
	CHECK_EQ_INT(ids[1], 1);
	const double p2 = 1 / (1 + exp(1.0)), p1 = 1 / (1 + exp(-1.0));
	CHECK(rel_err(w[0], 2.5 * p2 / (p1 + p2)) < 1e-6);
	CHECK(rel_err(w[1], 2.5 * p1 / (p1 + p2)) < 1e-6);
	/* tiny sums are clamped at the smallest normal F16 */
	float t[3] = { -30.0f, -31.0f, -32.0f }, tw[2];
	int tid[2];
	pt_op_moe_route(t, 3, PT_OP_GATING_SIGMOID, NULL, 2, true, 0.0f, sc, tid, tw);
	const double q0 = 1 / (1 + exp(30.0));
	CHECK(rel_err(tw[0], q0 / 6.103515625e-5) < 1e-5);
	/* without norm and with scale 1 the weights are the raw probabilities */
	float u[3] = { 0.0f, 1.0f, 2.0f }, uw[1];
	int uid[1];
	pt_op_moe_route(u, 3, PT_OP_GATING_SIGMOID, NULL, 1, false, 1.0f, sc, uid, uw);
	CHECK(rel_err(uw[0], 1 / (1 + exp(-2.0))) < 1e-6);
	/* SOFTMAX_WEIGHT: softmax over the k selected raw logits */
	float v[4] = { 0.0f, 3.0f, 1.0f, 2.0f }, vw[2];
	int vid[2];
	pt_op_moe_route(v, 4, PT_OP_GATING_SOFTMAX_WEIGHT, NULL, 2, false, 0.0f, sc, vid, vw);
	CHECK(vid[0] == 1 && vid[1] == 3);
	CHECK(rel_err(vw[0], 1 / (1 + exp(-1.0))) < 1e-6);
}

/* Group-limited selection (DeepSeek-V3): a group's score is the sum of its two largest
 * selection values (bias included), only the best n_group_used groups' experts are chosen,
 * weights are the unbiased probabilities; checked against a brute-force reference. */
PT_TEST(test_ops_moe_route_groups)
{
	/* 4 groups of 4; group 0 holds the single largest expert but a weak runner-up, so
	 * the two-largest rule keeps groups 1 and 3 and drops it */
	float l[16] = { 3.0f, -3.0f, -3.0f, -3.0f, 2.0f, 1.9f, -2.0f, -2.0f,
			-1.0f, -1.0f, -1.0f, -1.0f, 1.5f, 1.4f, 1.3f, -2.0f };
	float sc[16], w[3];
	int ids[3];
	pt_op_moe_route_groups(l, 16, PT_OP_GATING_SIGMOID, NULL, 4, 2, 3, true, 2.5f, sc, ids, w);
	CHECK(ids[0] == 4 && ids[1] == 5 && ids[2] == 12);
	const double p4 = 1 / (1 + exp(-2.0)), p5 = 1 / (1 + exp(-1.9)), p12 = 1 / (1 + exp(-1.5));
	CHECK(rel_err(w[0], 2.5 * p4 / (p4 + p5 + p12)) < 1e-6);
	/* one group kept: the best pair (2.0 + 1.9) beats the single 3.0; ties by index */
	float m[16] = { 3.0f, -3.0f, -3.0f, -3.0f, 2.0f, 1.9f, -2.0f, -2.0f,
			-1.0f, -1.0f, -1.0f, -1.0f, 1.5f, 1.4f, 1.3f, -2.0f };
	pt_op_moe_route_groups(m, 16, PT_OP_GATING_SIGMOID, NULL, 4, 1, 3, false, 0.0f, sc, ids, w);
	CHECK(ids[0] == 4 && ids[1] == 5 && ids[2] == 6);
	/* a bias steers groups too: +5 on expert 9 makes group 2 the best */
	float b[16] = { 0 };
	b[9] = 5.0f;
	float o[16] = { 3.0f, -3.0f, -3.0f, -3.0f, 2.0f, 1.9f, -2.0f, -2.0f,
			-1.0f, -1.0f, -1.0f, -1.0f, 1.5f, 1.4f, 1.3f, -2.0f };
	pt_op_moe_route_groups(o, 16, PT_OP_GATING_SIGMOID, b, 4, 1, 2, false, 0.0f, sc, ids, w);
	CHECK(ids[0] == 9 && ids[1] == 8);
	CHECK(rel_err(w[0], 1 / (1 + exp(1.0))) < 1e-6); /* unbiased probability */
	/* random cases against brute force: group scores, kept groups, top-k among them */
	uint64_t s = 99;
	for (int it = 0; it < 200; it++) {
		float x[64], y[64], sc2[64], wr[6];
		int got[6];
		for (int i = 0; i < 64; i++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			x[i] = y[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 8.0 - 4.0);
		}
		pt_op_moe_route_groups(x, 64, PT_OP_GATING_SIGMOID, NULL, 8, 3, 6, true, 1.0f, sc2,
				       got, wr);
		double gsc[8];
		for (int g = 0; g < 8; g++) {
			double a = -1e9, bb = -1e9;
			for (int i = 0; i < 8; i++) {
				const double v = 1 / (1 + exp(-(double)y[g * 8 + i]));
				if (v > a) { bb = a; a = v; } else if (v > bb) { bb = v; }
			}
			gsc[g] = a + bb;
		}
		for (int j = 0; j < 6; j++) {
			const int g = got[j] / 8;
			int better = 0;
			for (int h = 0; h < 8; h++)
				better += gsc[h] > gsc[g];
			CHECK(better < 3); /* its group is among the 3 best */
		}
	}
}

/* gpt-oss's swiglu_oai: the gate clamped from above only, up from both sides, alpha 1.702;
 * against a double evaluation, the clamps exactly, NaN gates stay NaN (std::min). */
PT_TEST(test_ops_swiglu_oai_clamps)
{
	const float g[] = { -3.0f, 0.0f, 1.5f, 6.9f, 7.0f, 12.0f, -40.0f, 2.0f, 3.0f };
	const float u[] = { 0.5f, 9.0f, -9.0f, 1.0f, -7.0f, 100.0f, 3.0f, -0.25f, NAN };
	float o[9];
	pt_op_swiglu_oai(o, g, u, 9);
	for (int i = 0; i < 8; i++) {
		const double x = g[i] > 7.0f ? 7.0 : g[i];
		const double y = u[i] < -7.0f ? -7.0 : u[i] > 7.0f ? 7.0 : u[i];
		const double want = x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
		CHECK(fabs(o[i] - want) <= 1e-6 * (fabs(want) + 1e-3));
	}
	CHECK(o[5] == o[5] && fabsf(o[5] - 7.0f / (1.0f + expf(-1.702f * 7.0f)) * 8.0f) < 1e-4f);
	CHECK(isnan(o[8])); /* std::clamp(NaN) is NaN */
	float nan_g = NAN, one = 1.0f, out;
	pt_op_swiglu_oai(&out, &nan_g, &one, 1);
	CHECK(isnan(out));
	/* in place (out aliases gate), as the forward pass calls it */
	float gg[9];
	memcpy(gg, g, sizeof gg);
	pt_op_swiglu_oai(gg, gg, u, 9);
	CHECK(memcmp(gg, o, sizeof o) == 0);
}

/* SOFTMAX_WEIGHT routing (gpt-oss): top-k of the raw logits, softmax over the k only, no
 * normalisation, no scale. */
PT_TEST(test_ops_moe_route_softmax_weight)
{
	float l[6] = { 0.5f, 2.0f, -1.0f, 1.0f, 3.0f, 0.0f }, scratch[6], w[2];
	int ids[2];
	pt_op_moe_route(l, 6, PT_OP_GATING_SOFTMAX_WEIGHT, NULL, 2, false, 0.0f, scratch, ids, w);
	CHECK_EQ_INT(ids[0], 4);
	CHECK_EQ_INT(ids[1], 1);
	CHECK(fabs(w[0] - 1.0 / (1.0 + exp(-1.0))) < 1e-6);
	CHECK(fabs(w[0] + w[1] - 1.0) < 1e-6);
}
