/* dot_avx2.c - AVX2 + FMA + F16C dot products (compiled with the Makefile's ISA_AVX2 flags;
 * only reached when dispatch.c found those extensions and OS YMM support).
 *
 * Per-block integer sums are computed exactly (maddubs pairs stay far below int16 saturation
 * for every level range these formats can hold, madd widens to int32), then converted to float
 * and combined with FMA in 8 lanes: the same integers as the scalar reference, a different
 * float summation order.  Activations must come from pt_kern_quantize_row (int8 in
 * [-127, 127]; -128 could saturate the signed tricks).  The dot4 variants decode each weight
 * block once for four activation rows with the same per-output operation sequence as dot;
 * Q4_K, Q6_K, Q5_0 and Q8_0 also have prefill register tiles (several rows x tokens per call)
 * from the same body, so tile, dot4 and dot agree bit for bit.
 * Every type with a scalar kernel has one here.
 */
#include "kern/kern_internal.h"

#include <immintrin.h>
#include <math.h>

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

/* Float rows: kind 0 = F32, 1 = F16, 2 = BF16.  Four accumulators per output; na outputs
 * (1 or 4) share each weight load. */
static inline __m256 load_fx(int kind, const uint8_t *p)
{
	if (kind == 0)
		return _mm256_loadu_ps((const float *)p);
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	if (kind == 1)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float scalar_fx(int kind, const uint8_t *p)
{
	if (kind == 0) {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	return kind == 1 ? _cvtsh_ss(kern_u16(p)) : pt_bf16_to_f32(kern_u16(p));
}

static inline __attribute__((always_inline)) void float_n(int kind, size_t n, const uint8_t *w,
							   const uint8_t *a0, size_t as, int na,
							   float *out)
{
	const size_t es = kind == 0 ? 4 : 2;
	__m256 s[4][4];
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			s[a][k] = _mm256_setzero_ps();
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
			const __m256 wv = load_fx(kind, w + es * (i + 8 * k));
			_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
				s[a][k] = _mm256_fmadd_ps(wv, load_fx(kind, a0 + a * as + es * (i + 8 * k)), s[a][k]);
		}
	}
	for (; i + 8 <= n; i += 8) {
		const __m256 wv = load_fx(kind, w + es * i);
		_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
			s[a][0] = _mm256_fmadd_ps(wv, load_fx(kind, a0 + a * as + es * i), s[a][0]);
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++) {
		float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s[a][0], s[a][1]),
						  _mm256_add_ps(s[a][2], s[a][3])));
		for (size_t j = i; j < n; j++)
			sum += scalar_fx(kind, w + es * j) * scalar_fx(kind, a0 + a * as + es * j);
		out[a] = sum;
	}
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

/* ---- 32-blocks against Q8_0 ------------------------------------------------------------ */

/* Q8_0 and Q5_0 are dot, dot4 and the prefill tile from one body (q32_n below, after the
 * Q5_0 decode helpers). */

/* Bits 0..31 of qh as 32 bytes of 0xFF / 0x00, element order. */
static inline __m256i bits32(uint32_t qh)
{
	const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
					       0x0101010101010101, 0x0000000000000000);
	const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
	return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* Unsigned levels (0..31) against Q8_1: maddubs without sign games. */
static inline __m256i dot_u8(__m256i q, const uint8_t *y)
{
	__m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static float dot_q4_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	__m256 acc = _mm256_setzero_ps();
	float summ = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_1_B, y += Q8_1_B) {
		__m256i p = dot_u8(nibbles32(x + 4), y + 4);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), _mm256_cvtepi32_ps(p), acc);
		summ += h2f(x + 2) * h2f(y + 2);
	}
	return hsum_ps(acc) + summ;
}

static float dot_q5_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i b4 = _mm256_set1_epi8(0x10);
	__m256 acc = _mm256_setzero_ps();
	float summ = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q5_1_B, y += Q8_1_B) {
		__m256i q = _mm256_or_si256(nibbles32(x + 8), _mm256_and_si256(bits32(kern_u32(x + 4)), b4));
		__m256i p = dot_u8(q, y + 4);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), _mm256_cvtepi32_ps(p), acc);
		summ += h2f(x + 2) * h2f(y + 2);
	}
	return hsum_ps(acc) + summ;
}

/* Q8_0 (q5 = 0) and Q5_0 (q5 = 1) against Q8_0: R weight rows x T activation rows (the
 * dot is 1 x 1, dot4 1 x 4), each output with the single dot's operation sequence.  The
 * signed codes and their absolute values are made once per row and block; per (row, token)
 * the activation takes the code's sign (maddubs needs an unsigned operand), so the int32
 * lanes are the exact 4-element sums dot_i8 gives. */
#define Q32_R 2
#define Q32_T 6
#define UNROLL _Pragma("GCC unroll 8")

static inline __m256i q32_codes(int q5, const uint8_t *x)
{
	if (!q5)
		return _mm256_loadu_si256((const __m256i *)(x + 2));
	const __m256i b4 = _mm256_set1_epi8(0x10);
	__m256i q = _mm256_or_si256(nibbles32(x + 6), _mm256_and_si256(bits32(kern_u32(x + 2)), b4));
	return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}

static inline __attribute__((always_inline)) void q32_n(int q5, size_t n, const uint8_t *w, size_t ws,
							 const int R, const uint8_t *a, size_t as,
							 const int T, float *y, size_t ys)
{
	const size_t bb = q5 ? Q5_0_B : Q8_0_B;
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[Q32_R][Q32_T];
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int t = 0; t < T; t++)
			acc[r][t] = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++) {
		__m256i sx[Q32_R], ax[Q32_R];
		__m256 dx[Q32_R];
		UNROLL for (int r = 0; r < R; r++) {
			const uint8_t *x = w + r * ws + ib * bb;
			sx[r] = q32_codes(q5, x);
			ax[r] = _mm256_sign_epi8(sx[r], sx[r]);
			dx[r] = _mm256_set1_ps(h2f(x));
		}
		UNROLL for (int t = 0; t < T; t++) {
			const uint8_t *yb = a + t * as + ib * Q8_0_B;
			const __m256i yv = _mm256_loadu_si256((const __m256i *)(yb + 2));
			const __m256 dy = _mm256_set1_ps(h2f(yb));
			UNROLL for (int r = 0; r < R; r++) {
				__m256i p = _mm256_maddubs_epi16(ax[r], _mm256_sign_epi8(yv, sx[r]));
				p = _mm256_madd_epi16(p, ones);
				acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx[r], dy), _mm256_cvtepi32_ps(p), acc[r][t]);
			}
		}
	}
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int t = 0; t < T; t++)
			y[t * ys + r] = hsum_ps(acc[r][t]);
}

/* Every (rows, tokens) shape of a tile gets its own fully unrolled instance. */
#define Q32_TOKS(q5, R)                                                                      \
	switch (nt) {                                                                        \
	case 1: q32_n(q5, n, w, ws, R, a, as, 1, y, ys); break;                              \
	case 2: q32_n(q5, n, w, ws, R, a, as, 2, y, ys); break;                              \
	case 3: q32_n(q5, n, w, ws, R, a, as, 3, y, ys); break;                              \
	case 4: q32_n(q5, n, w, ws, R, a, as, 4, y, ys); break;                              \
	case 5: q32_n(q5, n, w, ws, R, a, as, 5, y, ys); break;                              \
	default: q32_n(q5, n, w, ws, R, a, as, 6, y, ys); break;                             \
	}

#define Q32_FNS(name, q5)                                                                    \
	static float dot_##name(size_t n, const void *w, const void *a)                      \
	{                                                                                    \
		float r;                                                                     \
		q32_n(q5, n, w, 0, 1, a, 0, 1, &r, 1);                                       \
		return r;                                                                    \
	}                                                                                    \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t s, float o[4]) \
	{                                                                                    \
		q32_n(q5, n, w, 0, 1, a, s, 4, o, 1);                                        \
	}                                                                                    \
	static void tile_##name(size_t n, const void *w, size_t ws, uint32_t nr, const void *a, \
				size_t as, uint32_t nt, float *y, size_t ys)                 \
	{                                                                                    \
		if (nr < 2) {                                                                \
			Q32_TOKS(q5, 1);                                                     \
		} else {                                                                     \
			Q32_TOKS(q5, 2);                                                     \
		}                                                                            \
	}

Q32_FNS(q8_0, 0)
Q32_FNS(q5_0, 1)

/* IQ4_NL and MXFP4: 4-bit codes into a 16-entry int8 table (one pshufb). */
static inline __m256i table32(const uint8_t *qs, __m256i tbl)
{
	return _mm256_shuffle_epi8(tbl, nibbles32(qs));
}

/* Q4_0 (kind 1), IQ4_NL (2) and MXFP4 (3) against Q8_0: na activation rows (1 or 4) share
 * each block decode, every output with the operation sequence of the single-row case. */
static inline __m256i codes32(int kind, const uint8_t *x, __m256i tbl)
{
	if (kind == 1)
		return _mm256_sub_epi8(nibbles32(x + 2), _mm256_set1_epi8(8));
	return table32(x + (kind == 2 ? 2 : 1), tbl);
}

static inline float scale32(int kind, const uint8_t *x, const uint8_t *y)
{
	if (kind == 3)
		return h2f(y) * kern_e8m0_half(x[0]);
	return kind == 2 ? h2f(y) * h2f(x) : h2f(x) * h2f(y);
}

static inline __attribute__((always_inline)) void blocks32_n(int kind, size_t bb, size_t n,
							      const uint8_t *x, const uint8_t *y0,
							      size_t ys, int na, float *out)
{
	const int8_t *table = kind == 3 ? pt_kvalues_mxfp4 : pt_kvalues_iq4nl;
	const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
	__m256 acc[4];
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
		acc[a] = _mm256_setzero_ps();
	for (size_t ib = 0; ib < n / QK; ib++, x += bb) {
		const __m256i q = codes32(kind, x, tbl);
		_Pragma("GCC unroll 4") for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + ib * Q8_0_B;
			__m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)(y + 2)));
			acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(scale32(kind, x, y)), _mm256_cvtepi32_ps(p), acc[a]);
		}
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < na; a++)
		out[a] = hsum_ps(acc[a]);
}

#define BLOCKS32(name, kind, bb)                                                             \
	static float dot_##name(size_t n, const void *w, const void *a)                      \
	{                                                                                    \
		float r;                                                                     \
		blocks32_n(kind, bb, n, w, a, 0, 1, &r);                                     \
		return r;                                                                    \
	}                                                                                    \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t s, float o[4]) \
	{                                                                                    \
		blocks32_n(kind, bb, n, w, a, s, 4, o);                                      \
	}

BLOCKS32(q4_0, 1, Q4_0_B)
BLOCKS32(iq4_nl, 2, IQ4NL_B)
BLOCKS32(mxfp4, 3, MXFP4_B)

/* ---- K-quants against Q8_K -------------------------------------------------------------- */

/* Two 16-element sub-block scales for the 16 int16 lanes of one maddubs result. */
static inline __m256i scale_pair(int lo, int hi)
{
	return _mm256_set_m128i(_mm_set1_epi16((int16_t)hi), _mm_set1_epi16((int16_t)lo));
}

/* Q2_K: levels 0..3 unsigned; the mins enter through bsums. */
static float dot_q2_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q2K_B, y += Q8K_B) {
		const uint8_t *sc = x;
		const float d8 = kern_f32(y);
		__m128i scb = _mm_loadu_si128((const __m128i *)sc);
		__m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scb, 4), _mm_set1_epi8(0xF)));
		__m256i mp = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS)), mins);
		__m128i m4 = _mm_add_epi32(_mm256_castsi256_si128(mp), _mm256_extracti128_si256(mp, 1));
		m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
		m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
		accm += (d8 * h2f(x + 82)) * (float)_mm_cvtsi128_si32(m4);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		__m256i sumi = _mm256_setzero_si256();
		for (int k = 0; k < 2; k++) {
			__m256i q2 = _mm256_loadu_si256((const __m256i *)(x + 16 + 32 * k));
			for (int j = 0; j < 4; j++, q8 += 32, q2 = _mm256_srli_epi16(q2, 2)) {
				int b = 8 * k + 2 * j;
				__m256i p = _mm256_maddubs_epi16(_mm256_and_si256(q2, m2),
								 _mm256_loadu_si256((const __m256i *)q8));
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[b] & 0xF, sc[b + 1] & 0xF)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d8 * h2f(x + 80)), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc) - accm;
}

/* Q3_K: levels used unsigned as low2 + 4 * hbit (0..7); the -4 offset enters once per
 * super-block as 4 * sum_b scale_b * bsums_b. */
static float dot_q3_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q3K_B, y += Q8K_B) {
		const uint8_t *s = x + 96;
		int16_t sc[16];
		for (int b = 0; b < 16; b++) {
			int low4 = b < 8 ? s[b] & 0xF : s[b - 8] >> 4;
			sc[b] = (int16_t)((low4 | (((s[8 + b % 4] >> (2 * (b / 4))) & 3) << 4)) - 32);
		}
		__m256i sc16 = _mm256_loadu_si256((const __m256i *)sc);
		__m256i bias = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS)), sc16);
		__m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 2));
		__m256i hm = _mm256_loadu_si256((const __m256i *)x);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		for (int k = 0; k < 2; k++) {
			__m256i q2 = _mm256_loadu_si256((const __m256i *)(x + 32 + 32 * k));
			for (int j = 0; j < 4; j++, q8 += 32, q2 = _mm256_srli_epi16(q2, 2),
				 hm = _mm256_srli_epi16(hm, 1)) {
				int b = 8 * k + 2 * j;
				__m256i q = _mm256_or_si256(_mm256_and_si256(q2, m2),
							    _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
				__m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[b], sc[b + 1])));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x + 108) * kern_f32(y)), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc);
}

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

/* na activation rows (1..Q4K_TOKS, constant after inlining) share each weight decode; the
 * loops are unrolled so the accumulators live in registers (without the unroll pragmas gcc
 * kept them on the stack, which is what made an earlier 4-token version slower than dot). */
#define Q4K_TOKS 3
static inline __attribute__((always_inline)) void q4_k_n(size_t n, const uint8_t *x, const uint8_t *y0, size_t ys, const int na,
			  float *out, size_t os)
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256 acc[Q4K_TOKS], accm[Q4K_TOKS];
	UNROLL for (int a = 0; a < na; a++)
		acc[a] = accm[a] = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q4K_B) {
		__m256i mins2;
		const uint64_t sc = k4_scales(x + 4, &mins2);
		const uint8_t *qs = x + 16;
		const float dx = h2f(x), dmx = h2f(x + 2);
		__m256i sumi[Q4K_TOKS];
		UNROLL for (int a = 0; a < na; a++) {
			const uint8_t *y = y0 + a * ys + i * Q8K_B;
			accm[a] = _mm256_fmadd_ps(_mm256_set1_ps(dmx * kern_f32(y)), k4_min_terms(y, mins2), accm[a]);
			sumi[a] = _mm256_setzero_si256();
		}
		UNROLL for (int c = 0; c < 4; c++) {
			__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
			__m256i lo = _mm256_and_si256(q, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			__m256i slo = _mm256_set1_epi16(SC(sc, 2 * c)), shi = _mm256_set1_epi16(SC(sc, 2 * c + 1));
			UNROLL for (int a = 0; a < na; a++) {
				const int8_t *q8 = (const int8_t *)(y0 + a * ys + i * Q8K_B + Q8K_QS);
				__m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c)));
				__m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));
				sumi[a] = _mm256_add_epi32(sumi[a], _mm256_madd_epi16(plo, slo));
				sumi[a] = _mm256_add_epi32(sumi[a], _mm256_madd_epi16(phi, shi));
				__asm__("" : "+x"(sumi[a])); /* a running sum (x16_avx2.c) */
			}
		}
		UNROLL for (int a = 0; a < na; a++) {
			const float d8 = kern_f32(y0 + a * ys + i * Q8K_B);
			acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(dx * d8), _mm256_cvtepi32_ps(sumi[a]), acc[a]);
		}
	}
	UNROLL for (int a = 0; a < na; a++)
		out[a * os] = hsum_ps(acc[a]) - hsum_ps(accm[a]);
}

/* Q4_K tile: one weight row (rows = 1) x up to Q4K_TOKS tokens. */
static void tile_q4_k(size_t n, const void *w, size_t ws, uint32_t nr, const void *a, size_t as,
		      uint32_t nt, float *y, size_t ys)
{
	(void)ws, (void)nr;
	switch (nt) {
	case 1: q4_k_n(n, w, a, as, 1, y, ys); break;
	case 2: q4_k_n(n, w, a, as, 2, y, ys); break;
	default: q4_k_n(n, w, a, as, 3, y, ys); break;
	}
}

static float dot_q4_k(size_t n, const void *w, const void *a)
{
	float r;
	q4_k_n(n, w, a, 0, 1, &r, 1);
	return r;
}

static inline int32_t hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

/* One Q4_K row as stored with the interleaved numerics (kern.h, PT_KERN_LAYOUT_X16_ROWS):
 * q4_k_n's exact integer lanes, summed as integers per super-block, then x16.c's two scalar
 * FMA chains; bit-identical to the X16 kernels on the same row. */
static float x16_dot_q4_k(size_t n, const void *w, const void *a)
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	const uint8_t *x = w, *y = a;
	float acc = 0.0f, accm = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q4K_B, y += Q8K_B) {
		__m256i mins2;
		const uint64_t sc = k4_scales(x + 4, &mins2);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		__m256i sumi = _mm256_setzero_si256();
		UNROLL for (int c = 0; c < 4; c++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(x + 16 + 32 * c));
			const __m256i lo = _mm256_and_si256(q, m4);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c)));
			const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(SC(sc, 2 * c))));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(SC(sc, 2 * c + 1))));
		}
		const __m256i bs = _mm256_loadu_si256((const __m256i *)(y + Q8K_BSUMS));
		const int32_t isum = hsum_i32(sumi), msum = hsum_i32(_mm256_madd_epi16(bs, mins2));
		const float d8 = kern_f32(y);
		acc = fmaf(h2f(x) * d8, (float)isum, acc);
		accm = fmaf(h2f(x + 2) * d8, (float)msum, accm);
	}
	return acc - accm;
}

static float dot_q5_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps(), accm = acc;
	for (size_t i = 0; i < n / QKK; i++, x += Q5K_B, y += Q8K_B) {
		__m256i mins2;
		const uint64_t sc = k4_scales(x + 4, &mins2);
		const float d8 = kern_f32(y);
		accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x + 2) * d8), k4_min_terms(y, mins2), accm);
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
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(SC(sc, 2 * c))));
			sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(SC(sc, 2 * c + 1))));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * d8), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum_ps(acc) - hsum_ps(accm);
}

/* Q6_K levels are used unsigned (0..63) in maddubs; the -32 offset is applied once per
 * super-block as -32 * sum_b scale_b * bsums_b, the integer sum's start.  A quarter's code is
 * its ql nibble | its qh 2-bit field moved to bits 4-5 (masked with 0x30 after a 16-bit shift,
 * so bits carried across a byte drop out).  Its two 16-element sub-blocks' scales (low and
 * high 128-bit lane) come from one pshufb of the half's eight int16 scales, broadcast to both
 * lanes. */
static inline __m256i q6_quarter(__m256i q, const int8_t *q8, __m256i s)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8)), s);
}

/* pshufb controls: word 2q in the low lane, word 2q + 1 in the high lane. */
#define Q6W(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define Q6L(j) Q6W(j), Q6W(j), Q6W(j), Q6W(j), Q6W(j), Q6W(j), Q6W(j), Q6W(j)
#define Q6Q(q) { Q6L(2 * (q)), Q6L(2 * (q) + 1) }
static const char q6_sc_ctrl[4][32] __attribute__((aligned(32))) = { Q6Q(0), Q6Q(1), Q6Q(2), Q6Q(3) };

/* (an integer constant gcc must not turn into a shift-and-negate) */
static inline __m256i opaque_i(__m256i v)
{
	__asm__("" : "+x"(v));
	return v;
}

/* Quarter j (0..3) of half h: ql nibble | qh field at bits 4-5, as 32 unsigned codes. */
static inline __m256i q6_codes(const uint8_t *x, int h, int j)
{
	const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
	const __m256i l = _mm256_loadu_si256((const __m256i *)(x + 64 * h + 32 * (j & 1)));
	const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
	const __m256i lo = j < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
	const __m256i hb = j == 0 ? _mm256_slli_epi16(qh, 4) : j == 1 ? _mm256_slli_epi16(qh, 2)
					: j == 2 ? qh : _mm256_srli_epi16(qh, 2);
	return _mm256_or_si256(lo, _mm256_and_si256(hb, m30));
}

/* One weight row x T activation rows (dot: T = 1, dot4 and the tile: up to Q6K_T), each
 * output with the single dot's operation sequence: the bias, then the quarters of half 0
 * and half 1 in order.  A quarter is decoded just before its tokens use it, so two
 * registers hold code and scales and the integer sums take the rest (two rows x 2-4 tokens
 * measured slower: each row's decode then spills). */
#define Q6K_T 4

/* The exact integer sums of super-block x against T activation super-blocks (a, a + as, ..):
 * eight int32 lanes a token, the bias first, then the quarters of half 0 and half 1. */
static inline __attribute__((always_inline)) void q6_k_sb_sums(const uint8_t *x,
								const uint8_t *a, size_t as,
								const int T, __m256i *sumi)
{
	const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
	/* scale x -32 fits int16 (|s| <= 128) */
	const __m256i sc32n = _mm256_mullo_epi16(sc16, opaque_i(_mm256_set1_epi16(-32)));
	UNROLL for (int t = 0; t < T; t++)
		sumi[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a + t * as + Q8K_BSUMS)), sc32n);
	UNROLL for (int h = 0; h < 2; h++) {
		const __m256i sh = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
				     : _mm256_permute2x128_si256(sc16, sc16, 0x00);
		UNROLL for (int j = 0; j < 4; j++) {
			const __m256i q = q6_codes(x, h, j);
			const __m256i sc = _mm256_shuffle_epi8(sh, _mm256_load_si256((const __m256i *)q6_sc_ctrl[j]));
			UNROLL for (int t = 0; t < T; t++) {
				const uint8_t *q8 = a + t * as + Q8K_QS + 128 * h + 32 * j;
				sumi[t] = _mm256_add_epi32(sumi[t], q6_quarter(q, (const int8_t *)q8, sc));
				__asm__("" : "+x"(sumi[t])); /* a running sum (x16_avx2.c) */
			}
		}
	}
}

static inline __attribute__((always_inline)) void q6_k_n(size_t n, const uint8_t *x,
							  const uint8_t *a, size_t as, const int T,
							  float *y, size_t ys)
{
	__m256 acc[Q6K_T];
	UNROLL for (int t = 0; t < T; t++)
		acc[t] = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B) {
		__m256i sumi[Q6K_T];
		q6_k_sb_sums(x, a + i * Q8K_B, as, T, sumi);
		const float dx = h2f(x + 208);
		UNROLL for (int t = 0; t < T; t++) {
			const float d8 = kern_f32(a + t * as + i * Q8K_B);
			acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * d8), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		y[t * ys] = hsum_ps(acc[t]);
}

/* Q6_K in the X16 numerics (x16.c's x16_dot_q6_k_scalar): the row dot's exact integer sums,
 * their total a super-block, one FMA chain. */
static inline __attribute__((always_inline)) void x16_q6_k_n(size_t n, const uint8_t *x,
							      const uint8_t *a, size_t as,
							      const int T, float *y)
{
	float acc[Q6K_T] = { 0 };
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B, a += Q8K_B) {
		__m256i sumi[Q6K_T];
		q6_k_sb_sums(x, a, as, T, sumi);
		const float dx = h2f(x + 208);
		UNROLL for (int t = 0; t < T; t++)
			acc[t] = fmaf(dx * kern_f32(a + t * as), (float)hsum_i32(sumi[t]), acc[t]);
	}
	UNROLL for (int t = 0; t < T; t++)
		y[t] = acc[t];
}

static float x16_dot_q6_k(size_t n, const void *w, const void *a)
{
	float r;
	x16_q6_k_n(n, w, a, 0, 1, &r);
	return r;
}

/* Four tokens a row (X16_ROWS products of a few tokens, below the packing threshold): the
 * row's decode shared, as dot4_q6_k's. */
static void x16_dot4_q6_k(size_t n, const void *w, const void *a, size_t as, float o[4])
{
	x16_q6_k_n(n, w, a, as, 4, o);
}

static float dot_q6_k(size_t n, const void *w, const void *a)
{
	float r;
	q6_k_n(n, w, a, 0, 1, &r, 1);
	return r;
}

static void dot4_q6_k(size_t n, const void *w, const void *a, size_t stride, float out[4])
{
	q6_k_n(n, w, a, stride, 4, out, 1);
}

/* Q6_K tile: one weight row (rows = 1) x up to Q6K_T tokens. */
static void tile_q6_k(size_t n, const void *w, size_t ws, uint32_t nr, const void *a, size_t as,
		      uint32_t nt, float *y, size_t ys)
{
	(void)ws, (void)nr;
	switch (nt) {
	case 1: q6_k_n(n, w, a, as, 1, y, ys); break;
	case 2: q6_k_n(n, w, a, as, 2, y, ys); break;
	case 3: q6_k_n(n, w, a, as, 3, y, ys); break;
	default: q6_k_n(n, w, a, as, 4, y, ys); break;
	}
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
	[PT_TYPE_Q6_K] = dot_q6_k,     [PT_TYPE_IQ4_XS] = dot_iq4_xs, [PT_TYPE_Q4_1] = dot_q4_1,
	[PT_TYPE_Q5_0] = dot_q5_0,     [PT_TYPE_Q5_1] = dot_q5_1,   [PT_TYPE_Q2_K] = dot_q2_k,
	[PT_TYPE_Q3_K] = dot_q3_k,
};

const pt_kern_dot_fn pt_kern_x16_dot_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot_q4_k,
	[PT_TYPE_Q6_K] = x16_dot_q6_k,
};

const pt_kern_dot4_fn pt_kern_x16_dot4_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_Q6_K] = x16_dot4_q6_k, /* (none for Q4_K: its dot4 spills, pt_kern_dot4_avx2) */
};

const pt_kern_dot4_fn pt_kern_dot4_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot4_f32,
	[PT_TYPE_F16] = dot4_f16,
	[PT_TYPE_BF16] = dot4_bf16,
	[PT_TYPE_Q8_0] = dot4_q8_0,
	[PT_TYPE_Q4_0] = dot4_q4_0,
	[PT_TYPE_IQ4_NL] = dot4_iq4_nl,
	[PT_TYPE_MXFP4] = dot4_mxfp4,
	/* no Q4_K: with 16 ymm registers its dot4 spills and measured slower than 4 x dot */
	[PT_TYPE_Q6_K] = dot4_q6_k,
	[PT_TYPE_Q5_0] = dot4_q5_0,
};

const struct pt_kern_tile pt_kern_tile_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = { .fn = tile_q4_k, .rows = 1, .toks = Q4K_TOKS },
	[PT_TYPE_Q8_0] = { .fn = tile_q8_0, .rows = Q32_R, .toks = Q32_T },
	[PT_TYPE_Q5_0] = { .fn = tile_q5_0, .rows = Q32_R, .toks = Q32_T },
	[PT_TYPE_Q6_K] = { .fn = tile_q6_k, .rows = 1, .toks = Q6K_T },
};
