/* dn_avx2.c - Gated DeltaNet inner loops at the avx2 level (8 lanes, two vector partial
 * sums, the tail in index order; kern.h, struct pt_kern_dn_ops). */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern/kern.h"

float pt_kern_dn_dot_avx2(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_avx2(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_avx2(float *r, const float *k, const float *q, float eg, float v,
			      float beta, uint32_t n);

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

float pt_kern_dn_dot_avx2(const float *a, const float *b, uint32_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum(_mm256_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void pt_kern_dn_axpy_avx2(float *y, const float *x, float a, uint32_t n)
{
	const __m256 va = _mm256_set1_ps(a);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va,
							_mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += x[i] * a;
}

float pt_kern_dn_row_step_avx2(float *r, const float *k, const float *q, float eg, float v,
			       float beta, uint32_t n)
{
	const __m256 ve = _mm256_set1_ps(eg);
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) { /* decay and r . k in one pass */
		const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(r + i), ve);
		_mm256_storeu_ps(r + i, x);
		s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + i), s0);
	}
	float sk = hsum(s0);
	for (uint32_t j = i; j < n; j++) {
		r[j] *= eg;
		sk += r[j] * k[j];
	}
	const float d = (v - sk) * beta;
	const __m256 vd = _mm256_set1_ps(d);
	for (i = 0; i + 8 <= n; i += 8) { /* update and r . q in one pass */
		const __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vd, _mm256_loadu_ps(r + i));
		_mm256_storeu_ps(r + i, x);
		s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + i), s1);
	}
	float sq = hsum(s1);
	for (uint32_t j = i; j < n; j++) {
		r[j] += k[j] * d;
		sq += r[j] * q[j];
	}
	return sq;
}

void pt_kern_dn_gemm_avx2(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);

static const int32_t lane_tbl[16] = { -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0 };

static inline __m256i lanes(uint32_t w) /* the first min(w, 8) lanes */
{
	return _mm256_loadu_si256((const __m256i *)(lane_tbl + 8 - (w >= 8 ? 8 : w)));
}

/* Register tile: 4 rows of C x 16 columns (8 accumulators as named variables, so they stay
 * in registers); rows past m repeat the block's first row (never stored), columns past the
 * end are masked. */
#define DN_ROW(r)                                                                          \
	__m256 c##r##0 = ld(flags, r < R, m0, cp[r], vcs),                                 \
	       c##r##1 = ld(flags, r < R, m1, cp[r] + 8, vcs)
#define DN_FMA(r)                                                                          \
	do {                                                                               \
		const __m256 x = _mm256_broadcast_ss(ar[r] + l);                           \
		c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                 \
		c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                                 \
	} while (0)
#define DN_STORE(r)                                                                        \
	do {                                                                               \
		_mm256_maskstore_ps(cp[r], r < R ? m0 : none, c##r##0);                    \
		_mm256_maskstore_ps(cp[r] + 8, r < R ? m1 : none, c##r##1);                \
	} while (0)

static inline __m256 ld(unsigned flags, bool row, __m256i m, const float *p, __m256 cs)
{
	return (flags & PT_DN_GEMM_ACC) && row ? _mm256_mul_ps(_mm256_maskload_ps(p, m), cs)
					       : _mm256_setzero_ps();
}

void pt_kern_dn_gemm_avx2(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags)
{
	const __m256i none = _mm256_setzero_si256();
	const __m256 vcs = _mm256_set1_ps(cs);
	for (uint32_t i0 = 0; i0 < m; i0 += 4) {
		const uint32_t R = m - i0 < 4 ? m - i0 : 4;
		const uint32_t ke = (flags & PT_DN_GEMM_TRI_A) && i0 + R < k ? i0 + R : k;
		const uint32_t ne = (flags & PT_DN_GEMM_TRI_C) && i0 + R < n ? i0 + R : n;
		const float *ar[4];
		for (uint32_t r = 0; r < 4; r++)
			ar[r] = a + (size_t)(i0 + (r < R ? r : 0)) * lda;
		for (uint32_t j = 0; j < ne; j += 16) {
			const uint32_t w = ne - j;
			const __m256i m0 = lanes(w), m1 = lanes(w > 8 ? w - 8 : 0);
			float *cp[4];
			for (uint32_t r = 0; r < 4; r++)
				cp[r] = c + (size_t)(i0 + (r < R ? r : 0)) * ldc + j;
			DN_ROW(0);
			DN_ROW(1);
			DN_ROW(2);
			DN_ROW(3);
			for (uint32_t l = 0; l < ke; l++) {
				const float *bl = b + (size_t)l * ldb + j;
				const __m256 b0 = _mm256_maskload_ps(bl, m0);
				const __m256 b1 = _mm256_maskload_ps(bl + 8, m1);
				DN_FMA(0);
				DN_FMA(1);
				DN_FMA(2);
				DN_FMA(3);
			}
			DN_STORE(0);
			DN_STORE(1);
			DN_STORE(2);
			DN_STORE(3);
		}
	}
}
