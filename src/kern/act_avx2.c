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

/* The first value of x (256) whose |x| equals amax (> 0, so NaN never matches). */
static float first_of_magnitude(const float *x, float amax)
{
	const __m256 sign = _mm256_set1_ps(-0.0f), m = _mm256_set1_ps(amax);
	for (int j = 0; j < QKK; j += 8) {
		const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
		const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, m, _CMP_EQ_OQ));
		if (hit)
			return x[j + __builtin_ctz((unsigned)hit)];
	}
	return 0.0f; /* not reached: amax is one of the |x| */
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
			const float max = first_of_magnitude(x, amax);
			const float iscale = -127.0f / max;
			const __m256 is = _mm256_set1_ps(iscale);
			const __m256i lim = _mm256_set1_epi32(127);
			/* (int8_t) of an int: the low byte, as the scalar cast */
			const __m256i bytes = _mm256_setr_epi8(
				0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
				0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
			const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
			for (int j = 0; j < QKK; j += 32) {
				__m256i p[4];
				for (int k = 0; k < 4; k++) {
					__m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * k)));
					p[k] = _mm256_shuffle_epi8(_mm256_min_epi32(v, lim), bytes);
				}
				/* dwords 0 and 4 of each p[k] hold its 8 codes */
				const __m256i q = _mm256_permutevar8x32_epi32(
					_mm256_or_si256(_mm256_or_si256(p[0], _mm256_slli_si256(p[1], 4)),
							_mm256_or_si256(_mm256_slli_si256(p[2], 8), _mm256_slli_si256(p[3], 12))),
					order);
				_mm256_storeu_si256((__m256i *)(qs + j), q);
				/* the two 16-code sums (exact in int16: |sum| <= 16 * 128) */
				const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
				const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
				__m128i s4 = _mm_hadd_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
				s4 = _mm_hadd_epi32(s4, s4);
				bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(s4);
				bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(s4, 1);
			}
			d = 1.0f / iscale;
		}
		memcpy(out, &d, 4);
		memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
	}
}

/* Q8_0 / Q8_1 block of 32 (act.c's q8_block): largest |x| with NaN never selected (max_ps
 * returns its second operand when one is NaN), the same d and 1/d, products clamped as
 * fminf(fmaxf(., -127), 127) (a NaN product becomes -127 in both) and rounded half to even
 * by cvtps_epi32.  Returns the exact integer sum of the codes. */
int pt_kern_q8_block_avx2(const float *x, int8_t *qs, float *d_out)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4], m = _mm256_setzero_ps();
	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m);
	}
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	const float amax = _mm_cvtss_f32(h);
	const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
	const __m256 idv = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
	__m256i q[4];
	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], idv), lo), hi));
	const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
	_mm256_storeu_si256((__m256i *)qs, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
	__m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
	*d_out = amax / 127.0f;
	return _mm_cvtsi128_si32(s4);
}
