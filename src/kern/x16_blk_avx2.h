/* x16_blk_avx2.h - the activation's block sum the Q8_0 / Q5_0 X16 kernels take off their
 * offset codes (x16_avx2.c, x16_avx512.c): one psadbw over a Q8_0 block's 32 codes.  The
 * target attribute lets the header compile anywhere; callers are AVX2 or AVX-512 code. */
#ifndef PT_KERN_X16_BLK_AVX2_H
#define PT_KERN_X16_BLK_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* Sum of the 32 signed codes at qs (exact: flipped to unsigned, summed, 32 * 128 taken off). */
static inline __attribute__((always_inline, target("avx2"))) int32_t
pt_kern_q8_0_block_sum(const uint8_t *qs)
{
	const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs),
					   _mm256_set1_epi8((char)0x80));
	const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
	const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	return (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
}

#endif
