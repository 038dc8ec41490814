/* exp_avx2.h - pt_kern_expf on 8 AVX2 lanes, operation for operation (clamp, rint,
 * Cody-Waite, degree-7 Horner by FMA, 2^k in two halves; NaN in, NaN out), for every AVX2
 * kernel that needs the exponential (attention softmax, SwiGLU).  The target attribute lets
 * the header compile anywhere; callers are AVX2 code. */
#ifndef PT_KERN_EXP_AVX2_H
#define PT_KERN_EXP_AVX2_H

#include <immintrin.h>

#include "kern/attn_internal.h"

static inline __attribute__((always_inline, target("avx2,fma"))) __m256
pt_kern_exp8_avx2(__m256 x)
{
	const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(ATTN_EXP_LO)),
					_mm256_set1_ps(ATTN_EXP_HI));
	const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(ATTN_LOG2E)),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-ATTN_LN2_HI), xc);
	r = _mm256_fmadd_ps(k, _mm256_set1_ps(-ATTN_LN2_LO), r);
	__m256 p = _mm256_set1_ps(ATTN_EXP_C7);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C5));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	const __m256i n = _mm256_cvtps_epi32(k);
	const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
	const __m256i bias = _mm256_set1_epi32(127);
	const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, p1), p2);
	return _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan);
}

#endif
