/* membw_avx2.c - the bandwidth probe's read loop with 32-byte loads (membw.c): four
 * independent accumulators, so the loop is bound by the loads alone. */
#include "kern/kern_internal.h"

#include <immintrin.h>

uint64_t pt_membw_sum_avx2(const void *buf, size_t bytes)
{
	const uint8_t *p = buf;
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	size_t i = 0;
	for (; i + 128 <= bytes; i += 128) {
		a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
		b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
		c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
		d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
	}
	for (; i + 32 <= bytes; i += 32)
		a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
	a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
	uint64_t l[4];
	_mm256_storeu_si256((__m256i *)l, a);
	return l[0] + l[1] + l[2] + l[3];
}
