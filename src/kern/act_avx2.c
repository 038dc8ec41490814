/* act_avx2.c - AVX2 twin of act.c's Q8_K quantizer (the decode and prefill products of every
 * K-quant weight quantize their activations to Q8_K).  Bit-identical to the scalar code:
 * same first-largest |x| (NaN skipped), same scale, round-half-even products (cvtps_epi32
 * in the default rounding mode equals the 1.5*2^23 trick for |v| < 2^22), same clamp. */
#include <immintrin.h>
#include <math.h>

#include "kern/kern_internal.h"

/* Largest |x| over 256 values, NaN never selected (as `ax > amax` in the scalar loop). */
static float amax256(const float *x)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 m = _mm256_setzero_ps();
	for (int j = 0; j < QKK; j += 8) {
		__m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
		m = _mm256_blendv_ps(m, a, _mm256_cmp_ps(a, m, _CMP_GT_OQ));
	}
	float l[8], r = 0.0f;
	_mm256_storeu_ps(l, m);
	for (int i = 0; i < 8; i++)
		r = l[i] > r ? l[i] : r;
	return r;
}

void pt_kern_quantize_q8_k_avx2(const float *x, uint8_t *out, size_t n)
{
	for (size_t b = 0; b < n / QKK; b++, x += QKK, out += Q8K_B) {
		const float amax = amax256(x);
		int8_t *qs = (int8_t *)(out + Q8K_QS);
		int16_t bsums[16] = { 0 };
		float d = 0.0f;
		if (amax == 0.0f) {
			memset(qs, 0, QKK);
		} else {
			float max = 0.0f;
			for (int j = 0; j < QKK; j++) /* the first value of largest magnitude */
				if (fabsf(x[j]) == amax) {
					max = x[j];
					break;
				}
			const float iscale = -127.0f / max;
			const __m256 is = _mm256_set1_ps(iscale);
			const __m256i lim = _mm256_set1_epi32(127);
			for (int j = 0; j < QKK; j += 16) {
				__m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j)));
				__m256i c = _mm256_cvtps_epi32(
					_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8)));
				a = _mm256_min_epi32(a, lim);
				c = _mm256_min_epi32(c, lim);
				/* (int8_t) of an int: the low byte, as the scalar cast */
				const __m256i bytes = _mm256_setr_epi8(
					0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
					0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
				__m256i pa = _mm256_shuffle_epi8(a, bytes), pc = _mm256_shuffle_epi8(c, bytes);
				int8_t q[16];
				uint32_t w[4] = { (uint32_t)_mm256_extract_epi32(pa, 0),
						  (uint32_t)_mm256_extract_epi32(pa, 4),
						  (uint32_t)_mm256_extract_epi32(pc, 0),
						  (uint32_t)_mm256_extract_epi32(pc, 4) };
				memcpy(q, w, 16);
				memcpy(qs + j, q, 16);
				int s = 0;
				for (int t = 0; t < 16; t++)
					s += q[t];
				bsums[j / 16] = (int16_t)s;
			}
			d = 1.0f / iscale;
		}
		memcpy(out, &d, 4);
		memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
	}
}
