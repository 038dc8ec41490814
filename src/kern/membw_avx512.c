/* membw_avx512.c - the bandwidth probe's read loop with 64-byte loads (membw.c): four
 * independent accumulators, so the loop is bound by the loads alone. */
#include "kern/kern_internal.h"

#include <immintrin.h>

uint64_t pt_membw_sum_avx512(const void *buf, size_t bytes)
{
	const uint8_t *p = buf;
	__m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
	size_t i = 0;
	for (; i + 256 <= bytes; i += 256) {
		a = _mm512_add_epi64(a, _mm512_loadu_si512((const void *)(p + i)));
		b = _mm512_add_epi64(b, _mm512_loadu_si512((const void *)(p + i + 64)));
		c = _mm512_add_epi64(c, _mm512_loadu_si512((const void *)(p + i + 128)));
		d = _mm512_add_epi64(d, _mm512_loadu_si512((const void *)(p + i + 192)));
	}
	for (; i + 64 <= bytes; i += 64)
		a = _mm512_add_epi64(a, _mm512_loadu_si512((const void *)(p + i)));
	a = _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d));
	return (uint64_t)_mm512_reduce_add_epi64(a);
}
