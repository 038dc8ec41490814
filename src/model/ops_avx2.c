/* ops_avx2.c - AVX2 twins of forward-pass operators (see ops.h): each computes every element
 * with the same operations as its scalar reference in ops.c, so results never depend on the
 * level.  The exponential is pt_kern_expf's, lane for lane, from the constants the attention
 * kernels share (kern/attn_internal.h). */
#include <immintrin.h>

#include "kern/attn_internal.h"
#include "kern/kern.h"
#include "model/ops.h"

/* pt_kern_expf on 8 lanes, operation for operation (clamp, rint, Cody-Waite, degree-7 Horner
 * by FMA, 2^k in two halves; NaN in, NaN out). */
static inline __attribute__((always_inline)) __m256 exp8(__m256 x)
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

void pt_op_swiglu_avx2(float *out, const float *gate, const float *up, int n)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 x = _mm256_loadu_ps(gate + i);
		const __m256 e = exp8(_mm256_xor_ps(x, sign));
		const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
		_mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++)
		out[i] = pt_op_silu(gate[i]) * up[i];
}
