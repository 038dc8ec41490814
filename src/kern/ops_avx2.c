/* swiglu_avx2.c - AVX2 twin of the forward pass's SwiGLU (model/ops.c pt_op_swiglu_ref):
 * every element with the same operations as the scalar reference, so results never depend on
 * the level (kept in src/kern so x86 intrinsics stay in one folder).  The exponential is pt_kern_expf's, lane for lane (kern/exp_avx2.h). */
#include <immintrin.h>

#include "kern/exp_avx2.h"
#include "kern/kern.h"

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
