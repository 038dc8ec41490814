/* dot_avx2.c - AVX2 + FMA + F16C dot products (compiled with the Makefile's ISA_AVX2 flags;
 * only reached when dispatch.c found those extensions and OS YMM support).
 *
 * Per-block integer sums are computed exactly (maddubs pairs stay far below int16 saturation
 * for every level range these formats can hold, madd widens to int32), then converted to float
 * and combined with FMA in 8 lanes: the same integers as the scalar reference, a different
 * float summation order.  Types without an entry here fall back to the scalar kernels.
 */
#include "kern/kern_internal.h"

#include <immintrin.h>

static inline float h2f(const uint8_t *p)
{
	return _cvtsh_ss(kern_u16(p));
}

static inline float hsum_ps(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Signed x signed int8 products summed in groups of 4 into 8 int32 lanes.  Exact for x in
 * [-128, 127] and y in [-127, 127] (activations never hold -128). */
static inline __m256i dot_i8(__m256i x, __m256i y)
{
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* 16 packed nibbles of a 32-block: low nibbles are elements 0-15, high nibbles 16-31. */
static inline __m256i nibbles32(const uint8_t *qs)
{
	__m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0xF);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
}

/* ---- float types ------------------------------------------------------------------------ */

static float dot_f32(size_t n, const void *vw, const void *va)
{
	const float *w = vw, *a = va;
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(a + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(a + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(a + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), s0);
	float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	for (; i < n; i++)
		sum += w[i] * a[i];
	return sum;
}

static inline __m256 load_f16(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16(const uint8_t *p)
{
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define DOT_HALF(name, load, scalar)                                                          \
	static float name(size_t n, const void *vw, const void *va)                           \
	{                                                                                     \
		const uint8_t *w = vw, *a = va;                                               \
		__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                   \
		size_t i = 0;                                                                 \
		for (; i + 32 <= n; i += 32) {                                                \
			s0 = _mm256_fmadd_ps(load(w + 2 * i), load(a + 2 * i), s0);           \
			s1 = _mm256_fmadd_ps(load(w + 2 * i + 16), load(a + 2 * i + 16), s1); \
			s2 = _mm256_fmadd_ps(load(w + 2 * i + 32), load(a + 2 * i + 32), s2); \
			s3 = _mm256_fmadd_ps(load(w + 2 * i + 48), load(a + 2 * i + 48), s3); \
		}                                                                             \
		for (; i + 8 <= n; i += 8)                                                    \
			s0 = _mm256_fmadd_ps(load(w + 2 * i), load(a + 2 * i), s0);           \
		float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3))); \
		for (; i < n; i++)                                                            \
			sum += scalar(kern_u16(w + 2 * i)) * scalar(kern_u16(a + 2 * i));     \
		return sum;                                                                   \
	}

DOT_HALF(dot_f16, load_f16, _cvtsh_ss)
DOT_HALF(dot_bf16, load_bf16, pt_bf16_to_f32)

/* ---- 32-blocks against Q8_0 ------------------------------------------------------------ */

static float dot_q8_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	__m256 acc = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++, x += Q8_0_B, y += Q8_0_B) {
		__m256i p = dot_i8(_mm256_loadu_si256((const __m256i *)(x + 2)),
				   _mm256_loadu_si256((const __m256i *)(y + 2)));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), _mm256_cvtepi32_ps(p), acc);
	}
	return hsum_ps(acc);
}

static float dot_q4_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	__m256 acc = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_0_B, y += Q8_0_B) {
		__m256i q = _mm256_sub_epi8(nibbles32(x + 2), _mm256_set1_epi8(8));
		__m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)(y + 2)));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), _mm256_cvtepi32_ps(p), acc);
	}
	return hsum_ps(acc);
}

/* IQ4_NL and MXFP4: 4-bit codes into a 16-entry int8 table (one pshufb). */
static inline __m256i table32(const uint8_t *qs, __m256i tbl)
{
	return _mm256_shuffle_epi8(tbl, nibbles32(qs));
}

static float dot_iq4_nl(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
	__m256 acc = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++, x += IQ4NL_B, y += Q8_0_B) {
		__m256i p = dot_i8(table32(x + 2, tbl), _mm256_loadu_si256((const __m256i *)(y + 2)));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(y) * h2f(x)), _mm256_cvtepi32_ps(p), acc);
	}
	return hsum_ps(acc);
}

static float dot_mxfp4(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_mxfp4));
	__m256 acc = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++, x += MXFP4_B, y += Q8_0_B) {
		__m256i p = dot_i8(table32(x + 1, tbl), _mm256_loadu_si256((const __m256i *)(y + 2)));
		float d = h2f(y) * pt_e8m0_to_f32_half(x[0]);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
	}
	return hsum_ps(acc);
}

/* ---- K-quants against Q8_K -------------------------------------------------------------- */

/* The 12 packed bytes of Q4_K/Q5_K as sc[0..7] in bytes 0-7 and m[0..7] in bytes 8-15. */
static inline void unpack_k4_scales(const uint8_t *s, uint8_t out[16])
{
	uint32_t u[4];
	memcpy(u, s, 12);
	u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
	const uint32_t m03 = u[1] & 0x3f3f3f3f;
	u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
	u[2] = m03;
	u[0] &= 0x3f3f3f3f;
	memcpy(out, u, 16);
}

/* Sum over sub-blocks j of m[j] * (bsums[2j] + bsums[2j+1]). */
static inline int k4_min_sum(const uint8_t *y, const uint8_t *mins)
{
	__m128i b0 = _mm_loadu_si128((const __m128i *)(y + Q8K_BSUMS));
	__m128i b1 = _mm_loadu_si128((const __m128i *)(y + Q8K_BSUMS + 16));
	__m128i pairs = _mm_hadd_epi16(b0, b1); /* |pair| <= 2 * 16 * 128 */
	__m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mins));
	__m128i p = _mm_madd_epi16(pairs, m);
	p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4e));
	p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xb1));
	return _mm_cvtsi128_si32(p);
}

static float dot_q4_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q4K_B, y += Q8K_B) {
		uint8_t sm[16];
		unpack_k4_scales(x + 4, sm);
		const float d8 = kern_f32(y);
		accm += (h2f(x + 2) * d8) * (float)k4_min_sum(y, sm + 8);
		const uint8_t *qs = x + 16;
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		__m256i sumi = _mm256_setzero_si256();
		for (int c = 0; c < 4; c++) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
			__m256i lo = _mm256_and_si256(q, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			__m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c)));
			__m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sm[2 * c])));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sm[2 * c + 1])));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * d8), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc) - accm;
}

static float dot_q5_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q5K_B, y += Q8K_B) {
		uint8_t sm[16];
		unpack_k4_scales(x + 4, sm);
		const float d8 = kern_f32(y);
		accm += (h2f(x + 2) * d8) * (float)k4_min_sum(y, sm + 8);
		const uint8_t *qs = x + 48;
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		__m256i qh = _mm256_loadu_si256((const __m256i *)(x + 16));
		__m256i sumi = _mm256_setzero_si256();
		for (int c = 0; c < 4; c++, qh = _mm256_srli_epi16(qh, 2)) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
			__m256i hlo = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
			__m256i hhi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
			__m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), hlo);
			__m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hhi);
			__m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c)));
			__m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sm[2 * c])));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sm[2 * c + 1])));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * d8), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc) - accm;
}

/* Q6_K levels are used unsigned (0..63) in maddubs; the -32 offset is applied once per
 * super-block as 32 * sum_b scale_b * bsums_b. */
static inline __m256i q6_quarter(__m256i ql, __m256i qh2, const int8_t *q8, const int8_t *sc)
{
	__m256i q = _mm256_or_si256(ql, _mm256_slli_epi16(qh2, 4));
	__m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
	__m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
	return _mm256_madd_epi16(p, s);
}

static float dot_q6_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B, y += Q8K_B) {
		const int8_t *sc = (const int8_t *)(x + 192);
		__m256i bs = _mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS));
		__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
		__m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
						_mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = x + 64 * h;
			const int8_t *q8 = (const int8_t *)(y + Q8K_QS + 128 * h);
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			__m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
			const int8_t *s = sc + 8 * h;
			sumi = _mm256_add_epi32(sumi, q6_quarter(_mm256_and_si256(l0, m4),
								 _mm256_and_si256(qh, m2), q8, s));
			sumi = _mm256_add_epi32(sumi, q6_quarter(_mm256_and_si256(l1, m4),
								 _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), q8 + 32, s + 2));
			sumi = _mm256_add_epi32(sumi, q6_quarter(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
								 _mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), q8 + 64, s + 4));
			sumi = _mm256_add_epi32(sumi, q6_quarter(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
								 _mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), q8 + 96, s + 6));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x + 208) * kern_f32(y)), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc);
}

static float dot_iq4_xs(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
	__m256 acc = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += IQ4XS_B, y += Q8K_B) {
		const uint16_t h = kern_u16(x + 2);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		__m256i sumi = _mm256_setzero_si256();
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((h >> (2 * ib)) & 3) << 4);
			__m256i v = table32(x + 8 + 16 * ib, tbl);
			__m256i q = _mm256_loadu_si256((const __m256i *)(q8 + 32 * ib));
			__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16((int16_t)(ls - 32))));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * kern_f32(y)), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc);
}

const pt_kern_dot_fn pt_kern_dot_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot_f32,       [PT_TYPE_F16] = dot_f16,     [PT_TYPE_BF16] = dot_bf16,
	[PT_TYPE_Q8_0] = dot_q8_0,     [PT_TYPE_Q4_0] = dot_q4_0,   [PT_TYPE_IQ4_NL] = dot_iq4_nl,
	[PT_TYPE_MXFP4] = dot_mxfp4,   [PT_TYPE_Q4_K] = dot_q4_k,   [PT_TYPE_Q5_K] = dot_q5_k,
	[PT_TYPE_Q6_K] = dot_q6_k,     [PT_TYPE_IQ4_XS] = dot_iq4_xs,
};
