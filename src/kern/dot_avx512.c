/* dot_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) dot products, compiled with the Makefile's
 * ISA_AVX512 flags and reached only when dispatch.c found those extensions and OS ZMM state.
 *
 * 32-element block formats take two blocks per 512-bit register and use VNNI (vpdpbusd) for
 * the int8 products; the K-quants take two 32-element chunks (Q4_K/Q5_K/IQ4_XS) or four
 * 16-element sub-blocks (Q6_K) per register with maddubs/madd.  As at every level the
 * per-block integer sums are exact and only the float combination order differs.  Signed x
 * signed int8 products use |x| times y with x's sign moved onto y (AVX-512 has no vpsignb);
 * exact for activations in [-127, 127], which the quantizers guarantee.
 * dot4 variants share each weight decode between four activation rows, bit-identical to dot.
 * Q4_1/Q5_1 take unsigned levels straight into vpdpbusd (two blocks per register, the min
 * terms from one fp16 conversion of the pair's headers).  Q2_K and Q3_K take one 64-element
 * group (four sub-blocks) per register: Q2_K turns codes into code * scale with one pshufb
 * (<= 45) and then needs only vpdpbusd per row; Q3_K uses unsigned codes with maddubs, the
 * scales with vpdpwssd and its -4 offset through the bsums.
 * Q4_K, Q6_K, Q5_0 and Q8_0 live in tile_avx512.c (dot, dot4 and the prefill tile from one
 * body).  Every quantized type has an AVX-512 dot and dot4 here or there, except IQ4_XS
 * (dot only; matvec calls it four times).
 */
#include "kern/kern_internal.h"

#include <immintrin.h>

static inline float h2f(const uint8_t *p)
{
	return _cvtsh_ss(kern_u16(p));
}

static inline float hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline __m512i load2x256(const uint8_t *a, const uint8_t *b)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
				  _mm256_loadu_si256((const __m256i *)b), 1);
}

static inline __m512 set2_ps(float lo, float hi)
{
	return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

static inline __m512i set2_epi16(int lo, int hi)
{
	return _mm512_inserti64x4(_mm512_set1_epi16((int16_t)lo), _mm256_set1_epi16((int16_t)hi), 1);
}

static inline __m512i set2_epi8(int lo, int hi)
{
	return _mm512_inserti64x4(_mm512_set1_epi8((char)lo), _mm256_set1_epi8((char)hi), 1);
}

/* Exact signed int8 dot in groups of 4 -> 16 int32 lanes (VNNI). */
static inline __m512i dot_i8(__m512i x, __m512i y)
{
	__mmask64 neg = _mm512_movepi8_mask(x);
	__m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), sy);
}

/* Same, 16-bit pair sums (for a following madd with per-sub-block scales). */
static inline __m512i dot_i8_16(__m512i x, __m512i y)
{
	__mmask64 neg = _mm512_movepi8_mask(x);
	__m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
	return _mm512_maddubs_epi16(_mm512_abs_epi8(x), sy);
}

/* ---- float types ------------------------------------------------------------------------ */

/* Float rows: kind 0 = F32, 1 = F16, 2 = BF16; k masks the lanes loaded (tail).  Four
 * accumulators per output; na outputs (1 or 4) share each weight load. */
static inline __m512 load_fx(int kind, const uint8_t *p, __mmask16 k)
{
	if (kind == 0)
		return _mm512_maskz_loadu_ps(k, p);
	__m256i h = _mm256_maskz_loadu_epi16(k, p);
	if (kind == 1)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void float_n(int kind, size_t n, const uint8_t *w,
							   const uint8_t *a0, size_t as, int na,
							   float *out)
{
	const size_t es = kind == 0 ? 4 : 2;
	const __mmask16 all = 0xFFFF;
	__m512 s[4][4];
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			s[a][k] = _mm512_setzero_ps();
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
			const __m512 wv = load_fx(kind, w + es * (i + 16 * k), all);
			_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
				s[a][k] = _mm512_fmadd_ps(wv, load_fx(kind, a0 + a * as + es * (i + 16 * k), all),
							  s[a][k]);
		}
	}
	for (; i + 16 <= n; i += 16) {
		const __m512 wv = load_fx(kind, w + es * i, all);
		_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
			s[a][0] = _mm512_fmadd_ps(wv, load_fx(kind, a0 + a * as + es * i, all), s[a][0]);
	}
	if (i < n) { /* masked tail: lanes past n read as 0 */
		const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
		const __m512 wv = load_fx(kind, w + es * i, k);
		_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
			s[a][1] = _mm512_fmadd_ps(wv, load_fx(kind, a0 + a * as + es * i, k), s[a][1]);
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
		out[a] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]),
							    _mm512_add_ps(s[a][2], s[a][3])));
}

#define DOT_FLOAT(name, kind)                                                                \
	static float dot_##name(size_t n, const void *w, const void *a)                      \
	{                                                                                    \
		float r;                                                                     \
		float_n(kind, n, w, a, 0, 1, &r);                                            \
		return r;                                                                    \
	}                                                                                    \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t st, float o[4]) \
	{                                                                                    \
		float_n(kind, n, w, a, st, 4, o);                                            \
	}

DOT_FLOAT(f32, 0)
DOT_FLOAT(f16, 1)
DOT_FLOAT(bf16, 2)

/* ---- 32-blocks against Q8_0, two blocks per register ------------------------------------ */

/* Nibbles of two 32-blocks (16 bytes each at a and b) as 64 codes in element order. */
static inline __m512i nibbles2(const uint8_t *a, const uint8_t *b)
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256i raw = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
					      _mm_loadu_si128((const __m128i *)b), 1);
	__m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
	__m512i lh = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); /* lo_a lo_b hi_a hi_b */
	return _mm512_shuffle_i64x2(lh, lh, _MM_SHUFFLE(3, 1, 2, 0));     /* lo_a hi_a lo_b hi_b */
}

/* Generic two-blocks-at-a-time loop.  kind: 0 = Q8_0, 1 = Q4_0, 2 = IQ4_NL, 3 = MXFP4. */
static inline __m512i block_pair_codes(int kind, const uint8_t *x0, const uint8_t *x1, __m512i tbl)
{
	switch (kind) {
	case 0: return load2x256(x0 + 2, x1 + 2);
	case 1: return _mm512_sub_epi8(nibbles2(x0 + 2, x1 + 2), _mm512_set1_epi8(8));
	case 2: return _mm512_shuffle_epi8(tbl, nibbles2(x0 + 2, x1 + 2));
	default: return _mm512_shuffle_epi8(tbl, nibbles2(x0 + 1, x1 + 1));
	}
}

static inline float block_scale(int kind, const uint8_t *x, const uint8_t *y)
{
	if (kind == 3)
		return h2f(y) * kern_e8m0_half(x[0]);
	return kind == 2 ? h2f(y) * h2f(x) : h2f(x) * h2f(y);
}

/* na activation rows (1 or 4, constant after inlining) share each weight decode; every
 * output sees the operation sequence of the single-row case, so dot4 equals dot bit for bit. */
static inline __attribute__((always_inline)) void blocks32_n(int kind, size_t bb, size_t n, const uint8_t *x, const uint8_t *y0,
			      size_t ys, int na, const int8_t *table, float *out)
{
	const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(table ? table : pt_kvalues_iq4nl)));
	__m512 acc[4];
	for (int a = 0; a < na; a++)
		acc[a] = _mm512_setzero_ps();
	size_t nb = n / QK, ib = 0;
	for (; ib + 2 <= nb; ib += 2, x += 2 * bb) {
		__m512i q = block_pair_codes(kind, x, x + bb, tbl);
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + ib * Q8_0_B;
			__m512i p = dot_i8(q, load2x256(y + 2, y + Q8_0_B + 2));
			__m512 d = set2_ps(block_scale(kind, x, y), block_scale(kind, x + bb, y + Q8_0_B));
			acc[a] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[a]);
		}
	}
	if (ib < nb) { /* odd last block: pair it with itself, weight the copy 0 */
		__m512i q = block_pair_codes(kind, x, x, tbl);
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + ib * Q8_0_B;
			__m512i p = dot_i8(q, load2x256(y + 2, y + 2));
			acc[a] = _mm512_fmadd_ps(set2_ps(block_scale(kind, x, y), 0.0f),
						 _mm512_cvtepi32_ps(p), acc[a]);
		}
	}
	for (int a = 0; a < na; a++)
		out[a] = _mm512_reduce_add_ps(acc[a]);
}

#define BLOCKS32(name, kind, bb, table)                                                      \
	static float dot_##name(size_t n, const void *w, const void *a)                      \
	{                                                                                    \
		float r;                                                                     \
		blocks32_n(kind, bb, n, w, a, 0, 1, table, &r);                              \
		return r;                                                                    \
	}                                                                                    \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t s, float o[4]) \
	{                                                                                    \
		blocks32_n(kind, bb, n, w, a, s, 4, table, o);                               \
	}

BLOCKS32(q4_0, 1, Q4_0_B, NULL)
BLOCKS32(iq4_nl, 2, IQ4NL_B, pt_kvalues_iq4nl)
BLOCKS32(mxfp4, 3, MXFP4_B, pt_kvalues_mxfp4)

/* ---- Q4_1 / Q5_1 against Q8_1, two blocks per register ---------------------------------- */

/* Unsigned levels (0..15, or 0..31 with the fifth bit from qh) times the int8 activations with
 * vpdpbusd directly.  The four fp16 header fields of a block pair (d, m of the weights; d, s
 * of the activations) convert in one vcvtph2ps each: their product holds d0 * dy0, m0 * sy0,
 * d1 * dy1, m1 * sy1; lanes 0 and 2 scale the pair's int32 sums, lanes 1 and 3 (the min terms)
 * add up in a 4-lane accumulator whose other lanes are ignored. */
static inline __m512i q1_codes(int five, const uint8_t *x0, const uint8_t *x1)
{
	const size_t qo = five ? 8 : 4;
	__m512i q = nibbles2(x0 + qo, x1 + qo);
	if (five) {
		const __mmask64 hb = (__mmask64)kern_u32(x0 + 4) | (__mmask64)kern_u32(x1 + 4) << 32;
		q = _mm512_mask_add_epi8(q, hb, q, _mm512_set1_epi8(16));
	}
	return q;
}

/* hdr0 / hdr1: the 4-byte headers of the two blocks (0 for the absent copy of an odd block). */
static inline __m128 halves4(uint32_t hdr0, uint32_t hdr1)
{
	return _mm_cvtph_ps(_mm_cvtsi64_si128((int64_t)((uint64_t)hdr1 << 32 | hdr0)));
}

static inline __attribute__((always_inline)) void q1_n(int five, size_t n, const uint8_t *x,
							const uint8_t *y0, size_t ys, int na, float *out)
{
	const size_t bb = five ? Q5_1_B : Q4_1_B;
	const __m512i pick = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
	__m512 acc[4];
	__m128 accm[4];
	for (int a = 0; a < na; a++) {
		acc[a] = _mm512_setzero_ps();
		accm[a] = _mm_setzero_ps();
	}
	const size_t nb = n / QK;
	for (size_t ib = 0; ib < nb; ib += 2, x += 2 * bb) {
		const int odd = ib + 1 == nb; /* odd last block: pair it with itself, weight the copy 0 */
		const uint8_t *x1 = odd ? x : x + bb;
		const __m512i q = q1_codes(five, x, x1);
		const __m128 hx = halves4(kern_u32(x), odd ? 0 : kern_u32(x1));
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + ib * Q8_1_B, *yy = odd ? y : y + Q8_1_B;
			const __m128 prod = _mm_mul_ps(hx, halves4(kern_u32(y), odd ? 0 : kern_u32(yy)));
			__m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load2x256(y + 4, yy + 4));
			acc[a] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick, _mm512_castps128_ps512(prod)),
						 _mm512_cvtepi32_ps(p), acc[a]);
			accm[a] = _mm_add_ps(accm[a], prod);
		}
	}
	for (int a = 0; a < na; a++) {
		const __m128 m = _mm_add_ss(_mm_shuffle_ps(accm[a], accm[a], 1), _mm_shuffle_ps(accm[a], accm[a], 3));
		out[a] = _mm512_reduce_add_ps(acc[a]) + _mm_cvtss_f32(m);
	}
}

#define BLOCKS_Q1(name, five)                                                                \
	static float dot_##name(size_t n, const void *w, const void *a)                      \
	{                                                                                    \
		float r;                                                                     \
		q1_n(five, n, w, a, 0, 1, &r);                                               \
		return r;                                                                    \
	}                                                                                    \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t s, float o[4]) \
	{                                                                                    \
		q1_n(five, n, w, a, s, 4, o);                                                \
	}

BLOCKS_Q1(q4_1, 0)
BLOCKS_Q1(q5_1, 1)

/* ---- K-quants against Q8_K -------------------------------------------------------------- */

/* Q4_K/Q5_K packed scales, kept in registers: returns sc[0..7] as the bytes of a uint64
 * (little-endian) and sets *mins2 to 16 int16 lanes m0 m0 m1 m1 ... m7 m7, which line up
 * with the 16 Q8_K bsums so one madd gives the min terms. */
static inline uint64_t k4_scales(const uint8_t *s, __m256i *mins2)
{
	uint32_t u0 = kern_u32(s), u1 = kern_u32(s + 4), u2 = kern_u32(s + 8);
	uint32_t sc03 = u0 & 0x3f3f3f3f;
	uint32_t sc47 = (u2 & 0x0f0f0f0f) | (((u0 >> 6) & 0x03030303) << 4);
	uint32_t m03 = u1 & 0x3f3f3f3f;
	uint32_t m47 = ((u2 >> 4) & 0x0f0f0f0f) | (((u1 >> 6) & 0x03030303) << 4);
	__m128i m = _mm_cvtsi64_si128((int64_t)((uint64_t)m47 << 32 | m03));
	*mins2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
	return (uint64_t)sc47 << 32 | sc03;
}

static inline __m256 k4_min_terms(const uint8_t *y, __m256i mins2)
{
	__m256i bs = _mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS));
	return _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins2));
}

#define SC(sc, j) ((int16_t)(((sc) >> (8 * (j))) & 0xFF))

/* Q5_K (five = 1; five = 0 was the former Q4_K path): chunks 2p and 2p+1 per iteration.  Low nibbles of the 64 qs
 * bytes are sub-blocks 4p and 4p+2, high nibbles 4p+1 and 4p+3. */
static inline __attribute__((always_inline)) void q45_k_n(size_t n, const uint8_t *x, const uint8_t *y0, size_t ys, int na,
			   int five, float *out)
{
	const __m512i m4 = _mm512_set1_epi8(0xF), one = _mm512_set1_epi8(1);
	const size_t bb = five ? Q5K_B : Q4K_B;
	__m512 acc[4];
	__m256 accm[4];
	for (int a = 0; a < na; a++) {
		acc[a] = _mm512_setzero_ps();
		accm[a] = _mm256_setzero_ps();
	}
	for (size_t i = 0; i < n / QKK; i++, x += bb) {
		__m256i mins2;
		const uint64_t sc = k4_scales(x + 4, &mins2);
		const float dx = h2f(x), dmx = h2f(x + 2);
		const uint8_t *qs = x + (five ? 48 : 16);
		__m512i qh = five ? load2x256(x + 16, x + 16) : _mm512_setzero_si512();
		qh = _mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 2); /* upper half: chunk 2p+1 bits */
		__m512i sumi[4];
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + i * Q8K_B;
			accm[a] = _mm256_fmadd_ps(_mm256_set1_ps(dmx * kern_f32(y)), k4_min_terms(y, mins2), accm[a]);
			sumi[a] = _mm512_setzero_si512();
		}
		for (int p = 0; p < 2; p++, qh = _mm512_srli_epi16(qh, 4)) {
			__m512i q = _mm512_loadu_si512((const void *)(qs + 64 * p));
			__m512i lo = _mm512_and_si512(q, m4);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
			if (five) {
				lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(qh, one), 4));
				hi = _mm512_or_si512(hi, _mm512_slli_epi16(
					_mm512_and_si512(_mm512_srli_epi16(qh, 1), one), 4));
			}
			const __m512i slo = set2_epi16(SC(sc, 4 * p), SC(sc, 4 * p + 2));
			const __m512i shi = set2_epi16(SC(sc, 4 * p + 1), SC(sc, 4 * p + 3));
			for (int a = 0; a < na; a++) {
				const uint8_t *q8 = y0 + a * ys + i * Q8K_B + Q8K_QS + 128 * p;
				__m512i plo = _mm512_maddubs_epi16(lo, load2x256(q8, q8 + 64));
				__m512i phi = _mm512_maddubs_epi16(hi, load2x256(q8 + 32, q8 + 96));
				sumi[a] = _mm512_add_epi32(sumi[a], _mm512_madd_epi16(plo, slo));
				sumi[a] = _mm512_add_epi32(sumi[a], _mm512_madd_epi16(phi, shi));
			}
		}
		for (int a = 0; a < na; a++) {
			const float d8 = kern_f32(y0 + a * ys + i * Q8K_B);
			acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(dx * d8), _mm512_cvtepi32_ps(sumi[a]), acc[a]);
		}
	}
	for (int a = 0; a < na; a++)
		out[a] = _mm512_reduce_add_ps(acc[a]) - hsum256(accm[a]);
}

static float dot_q5_k(size_t n, const void *w, const void *a)
{
	float r;
	q45_k_n(n, w, a, 0, 1, 1, &r);
	return r;
}

static void dot4_q5_k(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q45_k_n(n, w, a, s, 4, 1, o);
}

/* ---- Q2_K / Q3_K ------------------------------------------------------------------------ */

/* Both store 2-bit codes the same way: element 128h + 32j + l is bits 2j of qs[32h + l].  A
 * register takes group m = 2h + p (elements 64m..64m+63, sub-blocks 4m..4m+3, one per 128-bit
 * lane): qs row h in both halves, the upper half pre-shifted by 2, then shifted by 4 per p.
 * The activations of a group are then one contiguous 64-byte load. */
static inline __m512i k2_row(const uint8_t *qs)
{
	__m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs));
	return _mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 2);
}

/* Q2_K: code (0..3) times the 4-bit scale is at most 45, so one pshufb per group turns codes
 * into code * scale (each 128-bit lane's table is 0, s, 2s, 3s of its sub-block) and vpdpbusd
 * multiplies those by the activations directly: exact int32, one instruction per row and
 * group.  The mins enter through bsums (8 lanes, their own float accumulator). */
static inline __attribute__((always_inline)) void q2_k_n(size_t n, const uint8_t *x, const uint8_t *y0,
							  size_t ys, int na, float *out)
{
	const __m512i m3 = _mm512_set1_epi8(3);
	const __m512i lane = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
	__m512 acc[4];
	__m256 accm[4];
	for (int a = 0; a < na; a++) {
		acc[a] = _mm512_setzero_ps();
		accm[a] = _mm256_setzero_ps();
	}
	for (size_t i = 0; i < n / QKK; i++, x += Q2K_B) {
		const __m128i scb = _mm_loadu_si128((const __m128i *)x);
		const __m128i lo = _mm_and_si128(scb, _mm_set1_epi8(0xF));
		const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scb, 4), _mm_set1_epi8(0xF)));
		/* dword b = scale_b * 0x03020100: the bytes 0, s, 2s, 3s (no carries: 3s <= 45) */
		const __m512i tabs = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(lo), _mm512_set1_epi32(0x03020100));
		const float dall = h2f(x + 80), dmin = h2f(x + 82);
		__m512i w[4];
		for (int h = 0; h < 2; h++) {
			const __m512i q2 = k2_row(x + 16 + 32 * h);
			for (int p = 0; p < 2; p++) {
				const int m = 2 * h + p;
				const __m512i tbl = _mm512_permutexvar_epi32(
					_mm512_add_epi32(lane, _mm512_set1_epi32(4 * m)), tabs);
				w[m] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(q2, 4 * p), m3));
			}
		}
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + i * Q8K_B;
			const float d8 = kern_f32(y);
			__m512i sumi = _mm512_setzero_si512();
			for (int m = 0; m < 4; m++)
				sumi = _mm512_dpbusd_epi32(sumi, w[m],
							   _mm512_loadu_si512((const void *)(y + Q8K_QS + 64 * m)));
			acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(d8 * dall), _mm512_cvtepi32_ps(sumi), acc[a]);
			const __m256i bs = _mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS));
			accm[a] = _mm256_fmadd_ps(_mm256_set1_ps(d8 * dmin),
						  _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins)), accm[a]);
		}
	}
	for (int a = 0; a < na; a++)
		out[a] = _mm512_reduce_add_ps(acc[a]) - hsum256(accm[a]);
}

static float dot_q2_k(size_t n, const void *w, const void *a)
{
	float r;
	q2_k_n(n, w, a, 0, 1, &r);
	return r;
}

static void dot4_q2_k(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q2_k_n(n, w, a, s, 4, o);
}

/* Q3_K's 16 six-bit scales (GGUF-AND-QUANTS.md 5.3) minus 32, as 16 int16 lanes: bytes 0-7
 * give the low 4 bits of scales 0-7 (low nibbles) and 8-15 (high nibbles), bytes 8-11 the
 * high 2 bits, scale b at bit 2 * (b / 4) of byte 8 + b % 4. */
static inline __m256i q3_scales(const uint8_t *s)
{
	const uint32_t u0 = kern_u32(s), u1 = kern_u32(s + 4), u2 = kern_u32(s + 8);
	const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
	const uint32_t a0 = (u0 & m4) | (u2 & m2) << 4;
	const uint32_t a1 = (u1 & m4) | ((u2 >> 2) & m2) << 4;
	const uint32_t a2 = ((u0 >> 4) & m4) | ((u2 >> 4) & m2) << 4;
	const uint32_t a3 = ((u1 >> 4) & m4) | ((u2 >> 6) & m2) << 4;
	const __m128i b = _mm_sub_epi8(_mm_set_epi32((int)a3, (int)a2, (int)a1, (int)a0), _mm_set1_epi8(32));
	return _mm256_cvtepi8_epi16(b);
}

/* Q3_K: codes taken unsigned as low2 + 4 * hbit (0..7) so maddubs multiplies them by the
 * activations (no saturation: 2 * 7 * 127); vpdpwssd applies the sub-block scales (exact
 * int32).  The -4 offset of each code is -4 * scale_b * bsums_b, one more vpdpwssd per row.
 * The high bit of element 64m + e (e < 32) is bit 2m of hmask[e], of 64m + 32 + e bit 2m + 1. */
static inline __attribute__((always_inline)) void q3_k_n(size_t n, const uint8_t *x, const uint8_t *y0,
							  size_t ys, int na, float *out)
{
	const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
	const __m512i sub = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
					     1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	__m512 acc[4];
	for (int a = 0; a < na; a++)
		acc[a] = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q3K_B) {
		const __m256i sc16 = q3_scales(x + 96);
		const __m512i sc = _mm512_zextsi256_si512(sc16);
		const __m512i bias = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(),
									      _mm256_slli_epi16(sc16, 2)));
		const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x));
		__m512i q[4], s[4];
		for (int h = 0; h < 2; h++) {
			const __m512i q2 = k2_row(x + 32 + 32 * h);
			for (int p = 0; p < 2; p++) {
				const int m = 2 * h + p;
				const __m512i bit = set2_epi8(1 << (2 * m), 1 << (2 * m + 1));
				const __m512i c = _mm512_and_si512(_mm512_srli_epi16(q2, 4 * p), m3);
				q[m] = _mm512_mask_add_epi8(c, _mm512_test_epi8_mask(hm, bit), c, four);
				s[m] = _mm512_permutexvar_epi16(_mm512_add_epi16(sub, _mm512_set1_epi16((short)(4 * m))), sc);
			}
		}
		const float dx = h2f(x + 108);
		for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + i * Q8K_B;
			__m512i sumi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bias,
							   _mm512_zextsi256_si512(_mm256_loadu_si256(
								   (const __m256i *)(y + Q8K_BSUMS))));
			for (int m = 0; m < 4; m++)
				sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[m], _mm512_loadu_si512(
									 (const void *)(y + Q8K_QS + 64 * m))),
							   s[m]);
			acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(dx * kern_f32(y)), _mm512_cvtepi32_ps(sumi), acc[a]);
		}
	}
	for (int a = 0; a < na; a++)
		out[a] = _mm512_reduce_add_ps(acc[a]);
}

static float dot_q3_k(size_t n, const void *w, const void *a)
{
	float r;
	q3_k_n(n, w, a, 0, 1, &r);
	return r;
}

static void dot4_q3_k(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q3_k_n(n, w, a, s, 4, o);
}

static float dot_iq4_xs(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
	__m512 acc = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += IQ4XS_B, y += Q8K_B) {
		const uint16_t h = kern_u16(x + 2);
		const uint8_t *q8 = y + Q8K_QS;
		__m512i sumi = _mm512_setzero_si512();
		for (int ib = 0; ib < 8; ib += 2) {
			int ls0 = ((x[4 + ib / 2] & 0xF) | (((h >> (2 * ib)) & 3) << 4)) - 32;
			int ls1 = ((x[4 + ib / 2] >> 4) | (((h >> (2 * ib + 2)) & 3) << 4)) - 32;
			__m512i v = _mm512_shuffle_epi8(tbl, nibbles2(x + 8 + 16 * ib, x + 24 + 16 * ib));
			__m512i p = dot_i8_16(v, _mm512_loadu_si512((const void *)(q8 + 32 * ib)));
			sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, set2_epi16(ls0, ls1)));
		}
		acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(x) * kern_f32(y)), _mm512_cvtepi32_ps(sumi), acc);
	}
	return _mm512_reduce_add_ps(acc);
}

const pt_kern_dot_fn pt_kern_dot_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot_f32,       [PT_TYPE_F16] = dot_f16,     [PT_TYPE_BF16] = dot_bf16,
	[PT_TYPE_Q8_0] = pt_kern_dot_q8_0_avx512,     [PT_TYPE_Q4_0] = dot_q4_0,   [PT_TYPE_Q5_0] = pt_kern_dot_q5_0_avx512,
	[PT_TYPE_IQ4_NL] = dot_iq4_nl,
	[PT_TYPE_MXFP4] = dot_mxfp4,   [PT_TYPE_Q4_K] = pt_kern_dot_q4_k_avx512,   [PT_TYPE_Q5_K] = dot_q5_k,
	[PT_TYPE_Q6_K] = pt_kern_dot_q6_k_avx512,     [PT_TYPE_IQ4_XS] = dot_iq4_xs,
	[PT_TYPE_Q4_1] = dot_q4_1,     [PT_TYPE_Q5_1] = dot_q5_1,   [PT_TYPE_Q2_K] = dot_q2_k,
	[PT_TYPE_Q3_K] = dot_q3_k,
};

const pt_kern_dot4_fn pt_kern_dot4_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot4_f32,      [PT_TYPE_F16] = dot4_f16,    [PT_TYPE_BF16] = dot4_bf16,
	[PT_TYPE_Q8_0] = pt_kern_dot4_q8_0_avx512,    [PT_TYPE_Q4_0] = dot4_q4_0,  [PT_TYPE_Q5_0] = pt_kern_dot4_q5_0_avx512,
	[PT_TYPE_IQ4_NL] = dot4_iq4_nl,
	[PT_TYPE_MXFP4] = dot4_mxfp4,  [PT_TYPE_Q4_K] = pt_kern_dot4_q4_k_avx512,  [PT_TYPE_Q5_K] = dot4_q5_k,
	[PT_TYPE_Q6_K] = pt_kern_dot4_q6_k_avx512,
	[PT_TYPE_Q4_1] = dot4_q4_1,    [PT_TYPE_Q5_1] = dot4_q5_1,  [PT_TYPE_Q2_K] = dot4_q2_k,
	[PT_TYPE_Q3_K] = dot4_q3_k,
};
