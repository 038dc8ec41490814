/* attn_avx2.c - AVX2/FMA/F16C twins of the attention inner loops in src/kern/attn.c.  Each
 * output is computed exactly as the scalar code does it (one correctly rounded FMA per step,
 * in the same order; F16 rounding to nearest even), so results are bit-identical at every
 * level: the dots run 8 key rows side by side, one row per lane, instead of vectorizing one
 * row (which would reorder its sum). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kern/kern_internal.h"

/* One 8x8 block of F16 values (8 rows, 8 columns from col) transposed: c[i] lane j holds
 * row j, column col + i. */
static inline void transpose8(const uint16_t *const *k, uint32_t col, __m128i c[8])
{
	__m128i r[8], t[8], u[8];
	for (int j = 0; j < 8; j++)
		r[j] = _mm_loadu_si128((const __m128i *)(k[j] + col));
	for (int j = 0; j < 4; j++) {
		t[2 * j] = _mm_unpacklo_epi16(r[2 * j], r[2 * j + 1]);
		t[2 * j + 1] = _mm_unpackhi_epi16(r[2 * j], r[2 * j + 1]);
	}
	u[0] = _mm_unpacklo_epi32(t[0], t[2]);
	u[1] = _mm_unpackhi_epi32(t[0], t[2]);
	u[2] = _mm_unpacklo_epi32(t[1], t[3]);
	u[3] = _mm_unpackhi_epi32(t[1], t[3]);
	u[4] = _mm_unpacklo_epi32(t[4], t[6]);
	u[5] = _mm_unpackhi_epi32(t[4], t[6]);
	u[6] = _mm_unpacklo_epi32(t[5], t[7]);
	u[7] = _mm_unpackhi_epi32(t[5], t[7]);
	for (int j = 0; j < 4; j++) {
		c[2 * j] = _mm_unpacklo_epi64(u[j], u[j + 4]);
		c[2 * j + 1] = _mm_unpackhi_epi64(u[j], u[j + 4]);
	}
}

/* out[j] = the FMA chain over i of k[j][i] * q[i] for j < n_rows (at most 16): two groups
 * of 8 rows, so two independent chains hide the FMA latency behind the transposes. */
static void dots(const uint16_t *const *k, uint32_t n_rows, const float *q, uint32_t n,
		 float *out)
{
	const uint16_t *rows[16];
	for (uint32_t j = 0; j < 16; j++)
		rows[j] = k[j < n_rows ? j : 0]; /* padding lanes repeat row 0, dropped below */
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	const bool two = n_rows > 8;
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i c[8], e[8];
		transpose8(rows, i, c);
		if (two)
			transpose8(rows + 8, i, e);
		for (int t = 0; t < 8; t++) {
			const __m256 qb = _mm256_set1_ps(q[i + t]);
			acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(c[t]), qb, acc0);
			if (two)
				acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(e[t]), qb, acc1);
		}
	}
	float lane[16];
	_mm256_storeu_ps(lane, acc0);
	_mm256_storeu_ps(lane + 8, acc1);
	for (; i < n; i++)
		for (uint32_t j = 0; j < 16; j++)
			lane[j] = fmaf(_cvtsh_ss(rows[j][i]), q[i], lane[j]);
	for (uint32_t j = 0; j < n_rows && j < 16; j++)
		out[j] = lane[j];
}

void pt_kern_attn_dots_f32q_avx2(const uint16_t *const *k, uint32_t n_rows, const float *q,
				 uint32_t n, float *out)
{
	dots(k, n_rows, q, n, out);
}

/* F16 query: widened 64 values at a time on the stack (exact), then the same chains. */
void pt_kern_attn_dots_f16q_avx2(const uint16_t *const *k, uint32_t n_rows, const uint16_t *q,
				 uint32_t n, float *out)
{
	float qf[PT_KERN_ATTN_MAX_DIM];
	for (uint32_t i = 0; i < n; i++)
		qf[i] = _cvtsh_ss(q[i]);
	dots(k, n_rows, qf, n, out);
}

void pt_kern_attn_scale_f16_avx2(uint16_t *acc, float ms, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(ms);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc + i)));
		_mm_storeu_si128((__m128i *)(acc + i),
				 _mm256_cvtps_ph(_mm256_mul_ps(a, s), _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++)
		acc[i] = _cvtss_sh(_cvtsh_ss(acc[i]) * ms, _MM_FROUND_TO_NEAREST_INT);
}

void pt_kern_attn_axpy_f16_avx2(uint16_t *acc, const uint16_t *v, float vs, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(vs);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc + i)));
		__m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
		_mm_storeu_si128((__m128i *)(acc + i),
				 _mm256_cvtps_ph(_mm256_fmadd_ps(x, s, a), _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++)
		acc[i] = _cvtss_sh(fmaf(_cvtsh_ss(v[i]), vs, _cvtsh_ss(acc[i])),
				   _MM_FROUND_TO_NEAREST_INT);
}

void pt_kern_attn_axpy_f32_avx2(float *acc, const float *v, float vs, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(vs);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_loadu_ps(v + i), s,
							  _mm256_loadu_ps(acc + i)));
	for (; i < n; i++)
		acc[i] = fmaf(v[i], vs, acc[i]);
}

void pt_kern_attn_scale_f32_avx2(float *acc, float ms, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(ms);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), s));
	for (; i < n; i++)
		acc[i] *= ms;
}

void pt_kern_f16_to_f32_avx2(const uint16_t *x, float *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

void pt_kern_f32_to_f16_avx2(const float *x, uint16_t *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
