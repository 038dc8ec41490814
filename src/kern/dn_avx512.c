/* dn_avx512.c - Gated DeltaNet inner loops at the avx512 level (16 lanes, two vector partial
 * sums, the tail in index order; kern.h, struct pt_kern_dn_ops). */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern/kern.h"

float pt_kern_dn_dot_avx512(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_avx512(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_avx512(float *r, const float *k, const float *q, float eg, float v,
			      float beta, uint32_t n);

float pt_kern_dn_dot_avx512(const float *a, const float *b, uint32_t n)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
	uint32_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
		s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
	}
	for (; i + 16 <= n; i += 16)
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
	float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void pt_kern_dn_axpy_avx512(float *y, const float *x, float a, uint32_t n)
{
	const __m512 va = _mm512_set1_ps(a);
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), va,
							_mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += x[i] * a;
}

float pt_kern_dn_row_step_avx512(float *r, const float *k, const float *q, float eg, float v,
				 float beta, uint32_t n)
{
	const __m512 ve = _mm512_set1_ps(eg);
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16) { /* decay and r . k in one pass */
		const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(r + i), ve);
		_mm512_storeu_ps(r + i, x);
		s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + i), s0);
	}
	float sk = _mm512_reduce_add_ps(s0);
	for (uint32_t j = i; j < n; j++) {
		r[j] *= eg;
		sk += r[j] * k[j];
	}
	const float d = (v - sk) * beta;
	const __m512 vd = _mm512_set1_ps(d);
	for (i = 0; i + 16 <= n; i += 16) { /* update and r . q in one pass */
		const __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vd, _mm512_loadu_ps(r + i));
		_mm512_storeu_ps(r + i, x);
		s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + i), s1);
	}
	float sq = _mm512_reduce_add_ps(s1);
	for (uint32_t j = i; j < n; j++) {
		r[j] += k[j] * d;
		sq += r[j] * q[j];
	}
	return sq;
}

void pt_kern_dn_gemm_avx512(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			    const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);

static inline __mmask16 lanes(uint32_t w)
{
	return w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1u);
}

/* Register tile: 4 rows of C x 64 columns (16 accumulators, written out as named variables
 * so they stay in registers); per k one broadcast of each row's a and four loads of b's
 * row.  Rows past m repeat the block's first row (computed, never stored); columns past
 * the end are masked. */
#define DN_ROW(r)                                                                          \
	__m512 c##r##0 = ld(flags, r < R, mk0, cp[r], vcs),                                \
	       c##r##1 = ld(flags, r < R, mk1, cp[r] + 16, vcs),                           \
	       c##r##2 = ld(flags, r < R, mk2, cp[r] + 32, vcs),                           \
	       c##r##3 = ld(flags, r < R, mk3, cp[r] + 48, vcs)
#define DN_FMA(r)                                                                          \
	do {                                                                               \
		const __m512 x = _mm512_set1_ps(ar[r][l]);                                 \
		c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                 \
		c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                                 \
		c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);                                 \
		c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3);                                 \
	} while (0)
#define DN_STORE(r)                                                                        \
	do {                                                                               \
		const __mmask16 on = r < R ? 0xffff : 0;                                   \
		_mm512_mask_storeu_ps(cp[r], mk0 & on, c##r##0);                            \
		_mm512_mask_storeu_ps(cp[r] + 16, mk1 & on, c##r##1);                       \
		_mm512_mask_storeu_ps(cp[r] + 32, mk2 & on, c##r##2);                       \
		_mm512_mask_storeu_ps(cp[r] + 48, mk3 & on, c##r##3);                       \
	} while (0)

static inline __m512 ld(unsigned flags, bool row, __mmask16 m, const float *p, __m512 cs)
{
	return (flags & PT_DN_GEMM_ACC) && row ? _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), cs)
					       : _mm512_setzero_ps();
}

void pt_kern_dn_gemm_avx512(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			    const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags)
{
	const __m512 vcs = _mm512_set1_ps(cs);
	for (uint32_t i0 = 0; i0 < m; i0 += 4) {
		const uint32_t R = m - i0 < 4 ? m - i0 : 4;
		const uint32_t ke = (flags & PT_DN_GEMM_TRI_A) && i0 + R < k ? i0 + R : k;
		const uint32_t ne = (flags & PT_DN_GEMM_TRI_C) && i0 + R < n ? i0 + R : n;
		const float *ar[4];
		for (uint32_t r = 0; r < 4; r++)
			ar[r] = a + (size_t)(i0 + (r < R ? r : 0)) * lda;
		for (uint32_t j = 0; j < ne; j += 64) {
			const uint32_t w = ne - j;
			const __mmask16 mk0 = lanes(w), mk1 = w > 16 ? lanes(w - 16) : 0;
			const __mmask16 mk2 = w > 32 ? lanes(w - 32) : 0, mk3 = w > 48 ? lanes(w - 48) : 0;
			float *cp[4];
			for (uint32_t r = 0; r < 4; r++)
				cp[r] = c + (size_t)(i0 + (r < R ? r : 0)) * ldc + j;
			DN_ROW(0);
			DN_ROW(1);
			DN_ROW(2);
			DN_ROW(3);
			for (uint32_t l = 0; l < ke; l++) {
				const float *bl = b + (size_t)l * ldb + j;
				const __m512 b0 = _mm512_maskz_loadu_ps(mk0, bl);
				const __m512 b1 = _mm512_maskz_loadu_ps(mk1, bl + 16);
				const __m512 b2 = _mm512_maskz_loadu_ps(mk2, bl + 32);
				const __m512 b3 = _mm512_maskz_loadu_ps(mk3, bl + 48);
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
