/* dn_neon.c - Gated DeltaNet inner loops at the aarch64 NEON level (4 lanes, two vector
 * partial sums, the tail in index order; kern.h, struct pt_kern_dn_ops).  The twin of
 * dn_avx2.c; every aarch64 level above NEON uses it (the loops are F32: SDOT/SMMLA add
 * nothing). */
#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kern/kern.h"

float pt_kern_dn_dot_neon(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_neon(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_neon(float *r, const float *k, const float *q, float eg, float v,
			       float beta, uint32_t n);
void pt_kern_dn_gemm_neon(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);

float pt_kern_dn_dot_neon(const float *a, const float *b, uint32_t n)
{
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
		s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
	}
	for (; i + 4 <= n; i += 4)
		s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
	float s = vaddvq_f32(vaddq_f32(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void pt_kern_dn_axpy_neon(float *y, const float *x, float a, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
	for (; i < n; i++)
		y[i] += x[i] * a;
}

float pt_kern_dn_row_step_neon(float *r, const float *k, const float *q, float eg, float v,
			       float beta, uint32_t n)
{
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4) { /* decay and r . k in one pass */
		const float32x4_t x = vmulq_n_f32(vld1q_f32(r + i), eg);
		vst1q_f32(r + i, x);
		s0 = vfmaq_f32(s0, x, vld1q_f32(k + i));
	}
	float sk = vaddvq_f32(s0);
	for (uint32_t j = i; j < n; j++) {
		r[j] *= eg;
		sk += r[j] * k[j];
	}
	const float d = (v - sk) * beta;
	for (i = 0; i + 4 <= n; i += 4) { /* update and r . q in one pass */
		const float32x4_t x = vfmaq_n_f32(vld1q_f32(r + i), vld1q_f32(k + i), d);
		vst1q_f32(r + i, x);
		s1 = vfmaq_f32(s1, x, vld1q_f32(q + i));
	}
	float sq = vaddvq_f32(s1);
	for (uint32_t j = i; j < n; j++) {
		r[j] += k[j] * d;
		sq += r[j] * q[j];
	}
	return sq;
}

/* Register tile: 4 rows of C x 8 columns (8 accumulators, named so they stay in registers);
 * rows past m repeat the block's first row (computed, never stored); the last columns
 * (fewer than 8) are summed one by one in the same per-output order. */
#define DN_LD(r, h) ((flags & PT_DN_GEMM_ACC) && r < R ? vmulq_n_f32(vld1q_f32(cp[r] + 4 * h), cs) \
						       : vdupq_n_f32(0.0f))

void pt_kern_dn_gemm_neon(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags)
{
	for (uint32_t i0 = 0; i0 < m; i0 += 4) {
		const uint32_t R = m - i0 < 4 ? m - i0 : 4;
		const uint32_t ke = (flags & PT_DN_GEMM_TRI_A) && i0 + R < k ? i0 + R : k;
		const uint32_t ne = (flags & PT_DN_GEMM_TRI_C) && i0 + R < n ? i0 + R : n;
		const float *ar[4];
		for (uint32_t r = 0; r < 4; r++)
			ar[r] = a + (size_t)(i0 + (r < R ? r : 0)) * lda;
		uint32_t j = 0;
		for (; j + 8 <= ne; j += 8) {
			float *cp[4];
			for (uint32_t r = 0; r < 4; r++)
				cp[r] = c + (size_t)(i0 + (r < R ? r : 0)) * ldc + j;
			float32x4_t c00 = DN_LD(0, 0), c01 = DN_LD(0, 1), c10 = DN_LD(1, 0),
				    c11 = DN_LD(1, 1), c20 = DN_LD(2, 0), c21 = DN_LD(2, 1),
				    c30 = DN_LD(3, 0), c31 = DN_LD(3, 1);
			for (uint32_t l = 0; l < ke; l++) {
				const float *bl = b + (size_t)l * ldb + j;
				const float32x4_t b0 = vld1q_f32(bl), b1 = vld1q_f32(bl + 4);
				c00 = vfmaq_n_f32(c00, b0, ar[0][l]);
				c01 = vfmaq_n_f32(c01, b1, ar[0][l]);
				c10 = vfmaq_n_f32(c10, b0, ar[1][l]);
				c11 = vfmaq_n_f32(c11, b1, ar[1][l]);
				c20 = vfmaq_n_f32(c20, b0, ar[2][l]);
				c21 = vfmaq_n_f32(c21, b1, ar[2][l]);
				c30 = vfmaq_n_f32(c30, b0, ar[3][l]);
				c31 = vfmaq_n_f32(c31, b1, ar[3][l]);
			}
			vst1q_f32(cp[0], c00);
			vst1q_f32(cp[0] + 4, c01);
			if (R > 1) {
				vst1q_f32(cp[1], c10);
				vst1q_f32(cp[1] + 4, c11);
			}
			if (R > 2) {
				vst1q_f32(cp[2], c20);
				vst1q_f32(cp[2] + 4, c21);
			}
			if (R > 3) {
				vst1q_f32(cp[3], c30);
				vst1q_f32(cp[3] + 4, c31);
			}
		}
		for (; j < ne; j++)
			for (uint32_t r = 0; r < R; r++) {
				float *cij = c + (size_t)(i0 + r) * ldc + j;
				float s = (flags & PT_DN_GEMM_ACC) ? *cij * cs : 0.0f;
				for (uint32_t l = 0; l < ke; l++)
					s = fmaf(ar[r][l], b[(size_t)l * ldb + j], s);
				*cij = s;
			}
	}
}
