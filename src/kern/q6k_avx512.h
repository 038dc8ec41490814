/* q6k_avx512.h - a Q6_K row's codes and scale words as the AVX-512 kernels over rows as
 * stored read them (tile_avx512.c's tiles and row twin, x16_avx512.c's sixteen-row twin).
 * Included only by files compiled with the AVX-512 flags. */
#ifndef PT_KERN_Q6K_AVX512_H
#define PT_KERN_Q6K_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* Per half h, the 64 ql bytes give quarters 0|1 (low nibbles) and 2|3 (high nibbles); qh is
 * duplicated with the upper copy shifted by 2 so one shift serves both quarters, then masked
 * to its two live 2-bit fields per byte (0x33): shifted left by 4 it supplies bits 4-5 of the
 * low-nibble codes, as it is those of the high-nibble codes, each merged with its nibble by
 * one bit select (whatever a 16-bit shift carries across a byte lands in the nibble bits the
 * select takes from ql).  The four 16-element sub-blocks of a register get their scales by a
 * word permute.  The -32 offset of the 6-bit codes is one bias per (row, token): the
 * activation bsums times the scales times -32, the integer sum's start. */
static inline __attribute__((always_inline)) void q6k_decode(const uint8_t *x, int h, __m512i scw,
							     __m512i *qa, __m512i *qb, __m512i *sa,
							     __m512i *sb)
{
	const __m512i m4 = _mm512_set1_epi8(0xF), m33 = _mm512_set1_epi8(0x33);
	const __m512i lane_sub = _mm512_srli_epi16(
		_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
				 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3);
	const __m512i l = _mm512_loadu_si512((const void *)(x + 64 * h));
	__m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h)));
	qh = _mm512_and_si512(_mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 2), m33);
	/* 0xD8: m4 ? nibble : qh bits (the first operand is the one overwritten) */
	*qa = _mm512_ternarylogic_epi32(_mm512_slli_epi16(qh, 4), l, m4, 0xD8);
	*qb = _mm512_ternarylogic_epi32(qh, _mm512_srli_epi16(l, 4), m4, 0xD8);
	*sa = _mm512_permutexvar_epi16(_mm512_add_epi16(lane_sub, _mm512_set1_epi16((int16_t)(8 * h))), scw);
	*sb = _mm512_permutexvar_epi16(_mm512_add_epi16(lane_sub, _mm512_set1_epi16((int16_t)(8 * h + 4))), scw);
}

#endif
