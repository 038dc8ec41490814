/* ops_avx2.c - AVX2 twins of forward-pass element loops (model/ops.c pt_op_rmsnorm_ref,
 * pt_op_swiglu_ref, pt_op_softcap_ref, pt_op_geglu_ref): every element with the same
 * operations as the scalar reference, so results never depend on the level (kept in
 * src/kern so x86 intrinsics stay in one folder).  The exponential is pt_kern_expf's, lane
 * for lane (kern/exp_avx2.h). */
#include <immintrin.h>
#include <math.h>

#include "kern/exp_avx2.h"
#include "kern/kern.h"

/* The reference's eight double partial sums are two vectors of four; the squares are exact
 * in double, so each lane's adds are the scalar chain's. */
void pt_kern_rmsnorm_avx2(float *y, const float *x, const float *w, int n, float eps)
{
	__m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 v = _mm256_loadu_ps(x + i);
		const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
		const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
		lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
		hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
	}
	double s[8];
	_mm256_storeu_pd(s, lo);
	_mm256_storeu_pd(s + 4, hi);
	for (; i < n; i++)
		s[i % 8] += (double)x[i] * (double)x[i];
	const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	const float mean = (float)(sum / n);
	const float scale = 1.0f / sqrtf(mean + eps);
	const __m256 sc = _mm256_set1_ps(scale);
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), sc);
		if (w)
			t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
		_mm256_storeu_ps(y + i, t);
	}
	for (; i < n; i++)
		y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/* pt_kern_tanhf on 8 lanes: both branches computed, the series taken below its end. */
static inline __attribute__((always_inline)) __m256 tanh8(__m256 x)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256 a = _mm256_andnot_ps(sign, x);
	const __m256 z = _mm256_mul_ps(a, a);
	__m256 p = _mm256_set1_ps(TANH_C21);
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C19));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C17));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C15));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C13));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C11));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C9));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C7));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C5));
	p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_C3));
	const __m256 series = _mm256_fmadd_ps(_mm256_mul_ps(a, z), p, a);
	const __m256 a2 = _mm256_mul_ps(_mm256_set1_ps(2.0f),
					_mm256_min_ps(a, _mm256_set1_ps(TANH_X_MAX)));
	const __m256 e = pt_kern_exp8_avx2(a2);
	const __m256 one = _mm256_set1_ps(1.0f);
	const __m256 big = _mm256_sub_ps(
		one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
	const __m256 t = _mm256_blendv_ps(
		big, series, _mm256_cmp_ps(a, _mm256_set1_ps(TANH_SERIES_END), _CMP_LT_OQ));
	const __m256 y = _mm256_or_ps(t, _mm256_and_ps(sign, x));
	return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

void pt_kern_softcap_avx2(float *x, int n, float cap)
{
	const __m256 inv = _mm256_set1_ps(1.0f / cap), c = _mm256_set1_ps(cap);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 t = tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
		_mm256_storeu_ps(x + i, _mm256_mul_ps(t, c));
	}
	for (; i < n; i++)
		x[i] = pt_kern_tanhf(x[i] * (1.0f / cap)) * cap; /* pt_op_softcap_ref */
}

void pt_kern_swiglu_avx2(float *out, const float *gate, const float *up, int n)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 x = _mm256_loadu_ps(gate + i);
		const __m256 e = pt_kern_exp8_avx2(_mm256_xor_ps(x, sign));
		const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
		_mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++)
		out[i] = gate[i] / (1.0f + pt_kern_expf(-gate[i])) * up[i]; /* pt_op_silu */
}

/* The reference reads a table of f16(gelu(x)) at the F16 rounding of x; the table's formula
 * (model/ops.c pt_op_gelu_exact, with pt_kern_tanhf) is computed here in lanes instead, the
 * same operations in the same order, and rounded to F16 as the table was: the same floats
 * for every F16 input, with no table load (the scalar loop waited on one after another:
 * ~1.8 ms a Gemma 4 decode token on the calling thread). */
static inline __attribute__((always_inline)) __m256 f16_round8(__m256 x)
{
	return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __attribute__((always_inline)) __m256 gelu8_f16(__m256 x)
{
	const __m256 xr = f16_round8(x);
	const __m256 one = _mm256_set1_ps(1.0f);
	const __m256 inner = _mm256_mul_ps(
		_mm256_mul_ps(_mm256_set1_ps(PT_GELU_SQRT_2_OVER_PI), xr),
		_mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(PT_GELU_COEF_A), xr), xr)));
	const __m256 g = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), xr),
				       _mm256_add_ps(one, tanh8(inner)));
	return f16_round8(g);
}

void pt_kern_geglu_avx2(float *out, const float *gate, const float *up, int n)
{
	const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 x = _mm256_loadu_ps(gate + i);
		__m256 g = gelu8_f16(x);
		g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
		g = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), g);
		_mm256_storeu_ps(out + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
	}
	if (i < n) { /* the tail in the same lanes, padded */
		float x[8] = { 0 }, u[8] = { 0 }, o[8];
		for (int j = 0; i + j < n; j++) {
			x[j] = gate[i + j];
			u[j] = up[i + j];
		}
		pt_kern_geglu_avx2(o, x, u, 8);
		for (int j = 0; i + j < n; j++)
			out[i + j] = o[j];
	}
}
