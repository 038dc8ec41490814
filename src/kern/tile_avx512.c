/* tile_avx512.c - AVX-512 Q4_K and Q6_K products against Q8_K: the dot, and the register tile
 * that prefill uses (TILE_R weight rows x up to TILE_T activation rows per call).
 *
 * One body per type, instantiated for every (rows, tokens) shape the tile can take: each
 * output (row, token) sees exactly the operation sequence of the 1 x 1 instance, which is the
 * dot, so tiles, dot4 and dot agree bit for bit.  Within a tile each weight block is decoded
 * once for all its tokens and each activation load serves all its rows.
 *
 * Integer part: maddubs (unsigned weight codes x signed int8 activations -> exact int16 pair
 * sums, no saturation for codes <= 63) then vpdpwssd with the sub-block scales (exact int32),
 * i.e. the former maddubs + madd + add in two instructions.  The activation is read with plain
 * 64-byte loads; for Q4_K the weight register holds chunk 2g (low nibbles) in its lower half
 * and chunk 2g + 1 (high nibbles of the same 32 bytes) in its upper half, which is what puts
 * the 64 matching activation bytes next to each other.  Every int32 lane stays below 2^24, so
 * the conversion to float is exact; only the float combination (per super-block FMA per lane,
 * then one horizontal sum) is level-specific.
 */
#include "kern/kern_internal.h"
#include "kern/q6k_avx512.h"

#include <immintrin.h>
#include <math.h>

#define TILE_R 2
#define TILE_T 4
#define UNROLL _Pragma("GCC unroll 8")

static inline float hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Sum of 16 lanes by halving: lane i + lane i + 8, then hsum256's tree.  The full tile
 * reduces its eight accumulators together (reduce8) with the same tree per output. */
static inline float hsum512(__m512 v)
{
	return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* Chunk-wise (128-bit) halving of two vectors that each hold two outputs of 8 lanes, as
 * [a lanes 0-3, a 4-7, b 0-3, b 4-7] and [c ..., d ...]: gives [a, b, c, d], one 4-lane
 * partial per chunk, each lane the sum of lanes j and j + 4 of its output (hsum256's first
 * step). */
static inline __m512 halve_pairs(__m512 p, __m512 q)
{
	return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
			     _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The last two steps of hsum256 on [v0 v1 v2 v3] and [v4 v5 v6 v7] (4 lanes each): output
 * k lands in lane 4k (k < 4) or 4(k - 4) + 2. */
static inline __m512 finish8(__m512 w0, __m512 w1)
{
	const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(1, 0, 1, 0)),
				       _mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 2, 3, 2)));
	return _mm512_add_ps(z, _mm512_permute_ps(z, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Eight 16-lane sums at once (v[k] -> lane of finish8), each by hsum512's tree. */
static inline __m512 reduce8(const __m512 v[8])
{
	__m512 u[4];
	UNROLL for (int k = 0; k < 4; k++) /* lane i + lane i + 8 of v[2k] and of v[2k + 1] */
		u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
				     _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
	return finish8(halve_pairs(u[0], u[1]), halve_pairs(u[2], u[3]));
}

/* Writes the 2 x 4 tile's outputs from finish8 order (output k = 2t + r). */
static inline void store8(__m512 s, float *y, size_t ys)
{
	float l[16];
	_mm512_storeu_ps(l, s);
	UNROLL for (int k = 0; k < 8; k++)
		y[(k >> 1) * ys + (k & 1)] = l[k < 4 ? 4 * k : 4 * (k - 4) + 2];
}

/* Final sums of a R x T tile of accumulators acc[r][t] (as y[t * ys + r]): full token groups
 * of an even number of rows by row pairs through reduce8. */
#define TILE_STORE(acc, R, T, y, ys)                                                          \
	do {                                                                                  \
		if ((R) % 2 == 0 && (T) == TILE_T) {                                          \
			UNROLL for (int p_ = 0; p_ < (R); p_ += 2) {                          \
				__m512 v_[8];                                                 \
				UNROLL for (int k_ = 0; k_ < 8; k_++)                         \
					v_[k_] = (acc)[p_ + (k_ & 1)][k_ >> 1];               \
				store8(reduce8(v_), (y) + p_, (ys));                          \
			}                                                                     \
		} else {                                                                      \
			UNROLL for (int r_ = 0; r_ < (R); r_++)                               \
				UNROLL for (int t_ = 0; t_ < (T); t_++)                       \
					(y)[t_ * (ys) + r_] = hsum512((acc)[r_][t_]);         \
		}                                                                             \
	} while (0)

static inline __m512 bcast_f32(const uint8_t *p)
{
	return _mm512_set1_ps(kern_f32(p));
}

/* (a word broadcast and one vcvtph2ps: the scalar conversion then broadcast is two more) */
static inline __m512 bcast_f16(const uint8_t *p)
{
	return _mm512_cvtph_ps(_mm256_set1_epi16((short)kern_u16(p)));
}

/* A weight scale splat the compiler must treat as an opaque vector: otherwise gcc folds
 * mul(splat dx, splat d8) into a scalar multiply plus a register broadcast per (row, token),
 * one more shuffle than a vmulps with an embedded broadcast of d8 from memory.  Same value
 * and rounding either way. */
static inline __m512 opaque(__m512 v)
{
	__asm__("" : "+v"(v));
	return v;
}

/* (an integer constant gcc must not turn into a shift-and-negate: one vpmullw is one
 * instruction) */
static inline __m512i opaque_i(__m512i v)
{
	__asm__("" : "+v"(v));
	return v;
}

/* ---- Q4_K --------------------------------------------------------------------------------- */

/* Packed 6-bit scales and mins of one super-block (get_scale_min_k4): the eight scales as
 * int16 words 0..7 of a 128-bit lane broadcast to all four lanes, the mins as int16 words
 * m0 m0 m1 m1 ... m7 m7 (lined up with the 16 Q8_K bsums). */
static inline __m512i q4k_scales(const uint8_t *s, __m256i *mins2)
{
	uint32_t u0 = kern_u32(s), u1 = kern_u32(s + 4), u2 = kern_u32(s + 8);
	uint32_t sc03 = u0 & 0x3f3f3f3f;
	uint32_t sc47 = (u2 & 0x0f0f0f0f) | (((u0 >> 6) & 0x03030303) << 4);
	uint32_t m03 = u1 & 0x3f3f3f3f;
	uint32_t m47 = ((u2 >> 4) & 0x0f0f0f0f) | (((u1 >> 6) & 0x03030303) << 4);
	__m128i m = _mm_cvtsi64_si128((int64_t)((uint64_t)m47 << 32 | m03));
	*mins2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
	__m128i sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((int64_t)((uint64_t)sc47 << 32 | sc03)));
	return _mm512_broadcast_i32x4(sc);
}

/* pshufb controls: words sc[2g] in the lower 256 bits, sc[2g + 1] in the upper 256 bits. */
#define SCW(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define SCL(j) SCW(j), SCW(j), SCW(j), SCW(j), SCW(j), SCW(j), SCW(j), SCW(j)
#define SCG(g) { SCL(2 * (g)), SCL(2 * (g)), SCL(2 * (g) + 1), SCL(2 * (g) + 1) }
static const char q4k_sc_ctrl[4][64] __attribute__((aligned(64))) = { SCG(0), SCG(1), SCG(2), SCG(3) };

/* Prepared Q4_K (prep_q4_k): per super-block, a pair of rows as the tile's registers hold
 * them, so the token loop only loads: the codes of chunk pairs g = 0..3 of row r (64 bytes
 * each, as q4k_codes splits them), both rows' min words and min scales (one register each),
 * each row's eight scale words and its scale as f32.  704 bytes against 2 x 144 stored. */
#define Q4KP_CODES 0   /* [r][g] 64 bytes */
#define Q4KP_MINS 512  /* int16 x 32: row 0's mins2, row 1's */
#define Q4KP_DMIN 576  /* f32 x 16: row 0's dmin x 8, row 1's x 8 */
#define Q4KP_SC 640    /* [r] int16 x 8 */
#define Q4KP_D 672     /* [r] f32 */
#define Q4KP_B 704

/* Row codes of chunk pair g: low nibbles of the 32 bytes in the lower half, high in the upper. */
static inline __m512i q4k_codes(const uint8_t *x, int g)
{
	const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + 16 + 32 * g)));
	return _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFFFF0000u, b, 4), _mm512_set1_epi8(0xF));
}

/* prepared = 0: R rows w, w + ws as stored; prepared = 1: w is prep_q4_k's output (R = 2). */
static inline __attribute__((always_inline)) void q4k_tile_any(const int prepared, size_t n, const uint8_t *w,
							       size_t ws, const int R, const uint8_t *a, size_t as,
							       const int T, float *y, size_t ys)
{
	__m512 acc[TILE_R][TILE_T], accm[TILE_T];
	UNROLL for (int t = 0; t < T; t++) {
		accm[t] = _mm512_setzero_ps();
		UNROLL for (int r = 0; r < R; r++)
			acc[r][t] = _mm512_setzero_ps();
	}
	for (size_t i = 0; i < n / QKK; i++) {
		const uint8_t *x[TILE_R], *pb = prepared ? w + i * Q4KP_B : w;
		__m512i scw[TILE_R];
		__m256i mins2[TILE_R];
		__m512i mins;
		__m512 dmx;
		if (prepared) {
			UNROLL for (int r = 0; r < R; r++)
				scw[r] = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(pb + Q4KP_SC + 16 * r)));
			mins = _mm512_load_si512((const void *)(pb + Q4KP_MINS));
			dmx = _mm512_load_ps((const void *)(pb + Q4KP_DMIN));
		} else {
			UNROLL for (int r = 0; r < R; r++) {
				x[r] = w + r * ws + i * Q4K_B;
				scw[r] = q4k_scales(x[r] + 4, &mins2[r]);
			}
			/* min terms: rows 0 and 1 in the lower and upper 8 lanes of one register */
			mins = _mm512_castsi256_si512(mins2[0]);
			if (R == 2) {
				mins = _mm512_inserti64x4(mins, mins2[1], 1);
				dmx = _mm512_insertf32x8(bcast_f16(x[0] + 2), _mm256_set1_ps(_cvtsh_ss(kern_u16(x[1] + 2))), 1);
			} else {
				dmx = opaque(bcast_f16(x[0] + 2));
			}
		}
		UNROLL for (int t = 0; t < T; t++) {
			const uint8_t *q8 = a + t * as + i * Q8K_B;
			__m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(q8 + Q8K_BSUMS)));
			__m512 mt = _mm512_cvtepi32_ps(_mm512_madd_epi16(bs, mins));
			accm[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmx, bcast_f32(q8)), mt, accm[t]);
		}
		__m512i sumi[TILE_R][TILE_T];
		UNROLL for (int g = 0; g < 4; g++) {
			__m512i q[TILE_R], s[TILE_R];
			const __m512i ctrl = _mm512_load_si512((const void *)q4k_sc_ctrl[g]);
			UNROLL for (int r = 0; r < R; r++) {
				q[r] = prepared ? _mm512_load_si512((const void *)(pb + Q4KP_CODES + 64 * (4 * r + g)))
						: q4k_codes(x[r], g);
				s[r] = _mm512_shuffle_epi8(scw[r], ctrl);
			}
			UNROLL for (int t = 0; t < T; t++) {
				const __m512i y8 = _mm512_loadu_si512((const void *)(a + t * as + i * Q8K_B + Q8K_QS + 64 * g));
				UNROLL for (int r = 0; r < R; r++) {
					__m512i p = _mm512_maddubs_epi16(q[r], y8);
					sumi[r][t] = g == 0 ? _mm512_madd_epi16(p, s[r])
							    : _mm512_dpwssd_epi32(sumi[r][t], p, s[r]);
				}
			}
		}
		UNROLL for (int r = 0; r < R; r++) {
			const __m512 dx = opaque(prepared ? _mm512_set1_ps(kern_f32(pb + Q4KP_D + 4 * r)) : bcast_f16(x[r]));
			UNROLL for (int t = 0; t < T; t++) {
				const __m512 d = _mm512_mul_ps(dx, bcast_f32(a + t * as + i * Q8K_B));
				acc[r][t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
			}
		}
	}
	if (R == TILE_R && T == TILE_T) {
		/* accm[t] holds outputs (0, t) and (1, t) as its 256-bit halves: halving pairs of
		 * them lines them up with reduce8's order */
		__m512 v[8];
		UNROLL for (int k = 0; k < 8; k++)
			v[k] = acc[k & 1][k >> 1];
		const __m512 m = finish8(halve_pairs(accm[0], accm[1]), halve_pairs(accm[2], accm[3]));
		store8(_mm512_sub_ps(reduce8(v), m), y, ys);
		return;
	}
	UNROLL for (int t = 0; t < T; t++) {
		const float m0 = hsum256(_mm512_castps512_ps256(accm[t]));
		y[t * ys] = hsum512(acc[0][t]) - m0;
		if (R == 2)
			y[t * ys + 1] = hsum512(acc[1][t]) - hsum256(_mm512_extractf32x8_ps(accm[t], 1));
	}
}

static void prep_q4_k(size_t n, const void *w, size_t ws, void *out)
{
	uint8_t *o = out;
	for (size_t i = 0; i < n / QKK; i++, o += Q4KP_B) {
		const uint8_t *x[2];
		__m256i mins2[2];
		UNROLL for (int r = 0; r < 2; r++) {
			x[r] = (const uint8_t *)w + r * ws + i * Q4K_B;
			_mm_store_si128((__m128i *)(o + Q4KP_SC + 16 * r),
					_mm512_castsi512_si128(q4k_scales(x[r] + 4, &mins2[r])));
			UNROLL for (int g = 0; g < 4; g++)
				_mm512_store_si512((void *)(o + Q4KP_CODES + 64 * (4 * r + g)), q4k_codes(x[r], g));
			const float d = _cvtsh_ss(kern_u16(x[r]));
			memcpy(o + Q4KP_D + 4 * r, &d, sizeof d);
		}
		_mm512_store_si512((void *)(o + Q4KP_MINS), _mm512_inserti64x4(_mm512_castsi256_si512(mins2[0]), mins2[1], 1));
		_mm512_store_ps((void *)(o + Q4KP_DMIN),
				_mm512_insertf32x8(bcast_f16(x[0] + 2), _mm256_set1_ps(_cvtsh_ss(kern_u16(x[1] + 2))), 1));
		memset(o + Q4KP_D + 8, 0, Q4KP_B - Q4KP_D - 8);
	}
}

/* The prepared tile over 1..4 tokens: body(prepared, n, w, ws, R, a, as, T, y, ys), every
 * token count its own fully unrolled instance. */
#define PREPPED_FN(name, body, R)                                                             \
	static void name(size_t n, const void *p, const void *a, size_t as, uint32_t nt, float *y, \
			 size_t ys)                                                           \
	{                                                                                     \
		const uint8_t *P = p, *A = a;                                                 \
		switch (nt) {                                                                 \
		case 1: body(1, n, P, 0, R, A, as, 1, y, ys); break;                          \
		case 2: body(1, n, P, 0, R, A, as, 2, y, ys); break;                          \
		case 3: body(1, n, P, 0, R, A, as, 3, y, ys); break;                          \
		default: body(1, n, P, 0, R, A, as, 4, y, ys); break;                         \
		}                                                                             \
	}

PREPPED_FN(prepped_q4_k, q4k_tile_any, 2)

float pt_kern_dot_q4_k_avx512(size_t n, const void *w, const void *a)
{
	float r;
	q4k_tile_any(0, n, w, 0, 1, a, 0, 1, &r, 1);
	return r;
}

void pt_kern_dot4_q4_k_avx512(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q4k_tile_any(0, n, w, 0, 1, a, s, 4, o, 1);
}

/* ---- Q6_K --------------------------------------------------------------------------------- */

/* Prepared Q6_K (prep_q6_k): per super-block, a pair of rows' decoded registers: the codes
 * qa, qb of halves 0 and 1, their scale words sa, sb, the -32-scaled scales of the bias, the
 * row scale as f32.  1,152 bytes against 2 x 210 stored. */
#define Q6KP_CODES 0  /* [r][h] qa, qb: 64 bytes each */
#define Q6KP_SCW 512  /* [r][h] sa, sb */
#define Q6KP_BIAS 1024 /* [r] int16 x 16: scale x -32 */
#define Q6KP_D 1088   /* [r] f32 */
#define Q6KP_B 1152

/* prepared = 0: R rows w, w + ws as stored; prepared = 1: w is prep_q6_k's output (R = 2). */
static inline __attribute__((always_inline)) void q6k_tile_any(const int prepared, size_t n, const uint8_t *w,
							       size_t ws, const int R, const uint8_t *a, size_t as,
							       const int T, float *y, size_t ys)
{
	__m512 acc[TILE_R][TILE_T];
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int t = 0; t < T; t++)
			acc[r][t] = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++) {
		const uint8_t *x[TILE_R], *pb = prepared ? w + i * Q6KP_B : w;
		__m256i sc16[TILE_R];
		__m512i sc32n[TILE_R];
		__m512i sumi[TILE_R][TILE_T];
		UNROLL for (int r = 0; r < R; r++) {
			if (prepared) {
				sc32n[r] = _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(pb + Q6KP_BIAS + 32 * r)));
				continue;
			}
			x[r] = w + r * ws + i * Q6K_B;
			sc16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x[r] + 192)));
			/* scale x -32 fits int16 (|s| <= 128); words 16-31 are not used */
			sc32n[r] = _mm512_mullo_epi16(_mm512_castsi256_si512(sc16[r]), opaque_i(_mm512_set1_epi16(-32)));
		}
		UNROLL for (int t = 0; t < T; t++) {
			const __m512i bs = _mm512_castsi256_si512(
				_mm256_loadu_si256((const __m256i *)(a + t * as + i * Q8K_B + Q8K_BSUMS)));
			UNROLL for (int r = 0; r < R; r++) /* lanes 8-15 start at 0 */
				sumi[r][t] = _mm512_maskz_madd_epi16(0x00FF, bs, sc32n[r]);
		}
		UNROLL for (int h = 0; h < 2; h++) {
			__m512i qa[TILE_R], qb[TILE_R], sa[TILE_R], sb[TILE_R];
			UNROLL for (int r = 0; r < R; r++) {
				if (prepared) {
					const uint8_t *c = pb + Q6KP_CODES + 256 * r + 128 * h;
					const uint8_t *k = pb + Q6KP_SCW + 256 * r + 128 * h;
					qa[r] = _mm512_load_si512((const void *)c);
					qb[r] = _mm512_load_si512((const void *)(c + 64));
					sa[r] = _mm512_load_si512((const void *)k);
					sb[r] = _mm512_load_si512((const void *)(k + 64));
				} else {
					q6k_decode(x[r], h, _mm512_castsi256_si512(sc16[r]), &qa[r], &qb[r], &sa[r], &sb[r]);
				}
			}
			UNROLL for (int t = 0; t < T; t++) {
				const uint8_t *q8 = a + t * as + i * Q8K_B + Q8K_QS + 128 * h;
				const __m512i ya = _mm512_loadu_si512((const void *)q8);
				const __m512i yb = _mm512_loadu_si512((const void *)(q8 + 64));
				UNROLL for (int r = 0; r < R; r++) {
					sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(qa[r], ya), sa[r]);
					sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(qb[r], yb), sb[r]);
				}
			}
		}
		UNROLL for (int r = 0; r < R; r++) {
			const __m512 dx = opaque(prepared ? _mm512_set1_ps(kern_f32(pb + Q6KP_D + 4 * r)) : bcast_f16(x[r] + 208));
			UNROLL for (int t = 0; t < T; t++) {
				const __m512 d = _mm512_mul_ps(dx, bcast_f32(a + t * as + i * Q8K_B));
				acc[r][t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
			}
		}
	}
	TILE_STORE(acc, R, T, y, ys);
}

static void prep_q6_k(size_t n, const void *w, size_t ws, void *out)
{
	uint8_t *o = out;
	for (size_t i = 0; i < n / QKK; i++, o += Q6KP_B) {
		UNROLL for (int r = 0; r < 2; r++) {
			const uint8_t *x = (const uint8_t *)w + r * ws + i * Q6K_B;
			const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
			_mm256_store_si256((__m256i *)(o + Q6KP_BIAS + 32 * r),
					   _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32)));
			UNROLL for (int h = 0; h < 2; h++) {
				__m512i qa, qb, sa, sb;
				q6k_decode(x, h, _mm512_castsi256_si512(sc16), &qa, &qb, &sa, &sb);
				_mm512_store_si512((void *)(o + Q6KP_CODES + 256 * r + 128 * h), qa);
				_mm512_store_si512((void *)(o + Q6KP_CODES + 256 * r + 128 * h + 64), qb);
				_mm512_store_si512((void *)(o + Q6KP_SCW + 256 * r + 128 * h), sa);
				_mm512_store_si512((void *)(o + Q6KP_SCW + 256 * r + 128 * h + 64), sb);
			}
			const float d = _cvtsh_ss(kern_u16(x + 208));
			memcpy(o + Q6KP_D + 4 * r, &d, sizeof d);
		}
		memset(o + Q6KP_D + 8, 0, Q6KP_B - Q6KP_D - 8);
	}
}

PREPPED_FN(prepped_q6_k, q6k_tile_any, 2)

float pt_kern_dot_q6_k_avx512(size_t n, const void *w, const void *a)
{
	float r;
	q6k_tile_any(0, n, w, 0, 1, a, 0, 1, &r, 1);
	return r;
}

void pt_kern_dot4_q6_k_avx512(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q6k_tile_any(0, n, w, 0, 1, a, s, 4, o, 1);
}

/* ---- Q5_0 and Q8_0 against Q8_0 ---------------------------------------------------------- */

/* Two 32-blocks per register.  The weight codes are taken unsigned (Q5_0: nibble | high bit
 * << 4 = value + 16; Q8_0: int8 value + 128, a sign-bit flip) so vpdpbusd multiplies them by
 * the int8 activations directly; the offset (16 or 128) x the activation's 4-element sums is
 * computed once per token and block pair (vpdpbusd with a constant) and is the accumulator
 * start of every row: exact int32, equal lane by lane to the signed products. */
static inline __m512i q5_0_codes(const uint8_t *x0, const uint8_t *x1)
{
	/* (Q8_0 codes: see q32_pair) */
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256i raw = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(x0 + 6))),
					      _mm_loadu_si128((const __m128i *)(x1 + 6)), 1);
	__m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
	__m512i lh = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); /* lo_0 lo_1 hi_0 hi_1 */
	__m512i nib = _mm512_shuffle_i64x2(lh, lh, _MM_SHUFFLE(3, 1, 2, 0)); /* element order */
	const __mmask64 hbit = (__mmask64)kern_u32(x0 + 2) | (__mmask64)kern_u32(x1 + 2) << 32;
	return _mm512_mask_add_epi8(nib, hbit, nib, _mm512_set1_epi8(16));
}

static inline __m512 set2_f16(const uint8_t *a, const uint8_t *b)
{
	return _mm512_insertf32x8(bcast_f16(a), _mm256_set1_ps(_cvtsh_ss(kern_u16(b))), 1);
}

/* Rows of the Q5_0 / Q8_0 tile: the per-token work of a block pair (activation load, offset,
 * scale) is a large share of these short blocks, so it is spread over four rows (4 x 4
 * accumulators + 4 codes + 4 scales + 3 token registers fit the 32 zmm). */
#define Q32_R 4

/* Codes and scales of one row's block pair (x1 = x0 for the odd last block, its scale 0). */
static inline __attribute__((always_inline)) void q32_row(const int q8w, const uint8_t *x0, int odd, size_t bb,
							  __m512i *q, __m512 *dw)
{
	const uint8_t *x1 = odd ? x0 : x0 + bb;
	if (q8w)
		*q = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x0 + 2))),
							 _mm256_loadu_si256((const __m256i *)(x1 + 2)), 1),
				      _mm512_set1_epi8((char)0x80));
	else
		*q = q5_0_codes(x0, x1);
	*dw = odd ? _mm512_insertf32x8(bcast_f16(x0), _mm256_setzero_ps(), 1) : set2_f16(x0, x1);
}

/* Prepared Q5_0 / Q8_0 (prep_q32): per block pair, the Q32_R rows' code and scale registers
 * (64 bytes each, row after row), so the token loop only loads them. */
#define Q32P_B (Q32_R * 128)

/* One pair of blocks (x0/x1 of each row, y0/y1 of each token; the odd last block of a row
 * is paired with itself and its copy weighted 0).  prepared: w is prep_q32's output. */
static inline __attribute__((always_inline)) void q32_pair(const int q8w, const int prepared, const uint8_t *w,
							   size_t ws, const int R, const uint8_t *a, size_t as,
							   const int T, size_t ib, int odd, __m512 acc[Q32_R][TILE_T])
{
	const size_t bb = q8w ? Q8_0_B : Q5_0_B;
	__m512i q[Q32_R];
	__m512 dw[Q32_R];
	UNROLL for (int r = 0; r < R; r++) {
		if (prepared) {
			const uint8_t *pp = w + ib / 2 * Q32P_B + 128 * r;
			q[r] = _mm512_load_si512((const void *)pp);
			dw[r] = _mm512_load_ps((const void *)(pp + 64));
		} else {
			q32_row(q8w, w + r * ws + ib * bb, odd, bb, &q[r], &dw[r]);
		}
	}
	UNROLL for (int t = 0; t < T; t++) {
		const uint8_t *y0 = a + t * as + ib * Q8_0_B, *y1 = odd ? y0 : y0 + Q8_0_B;
		const __m512i y8 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y0 + 2))),
						      _mm256_loadu_si256((const __m256i *)(y1 + 2)), 1);
		const __m512i off = _mm512_sub_epi32(_mm512_setzero_si512(),
						     _mm512_dpbusd_epi32(_mm512_setzero_si512(),
									 _mm512_set1_epi8((char)(q8w ? 128 : 16)), y8));
		const __m512 d8 = set2_f16(y0, y1);
		UNROLL for (int r = 0; r < R; r++) {
			const __m512i p = _mm512_dpbusd_epi32(off, q[r], y8);
			acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], d8), _mm512_cvtepi32_ps(p), acc[r][t]);
		}
	}
}

static inline __attribute__((always_inline)) void q32_tile_any(const int q8w, const int prepared, size_t n,
							       const uint8_t *w, size_t ws, const int R,
							       const uint8_t *a, size_t as, const int T,
							       float *y, size_t ys)
{
	__m512 acc[Q32_R][TILE_T];
	UNROLL for (int r = 0; r < R; r++)
		UNROLL for (int t = 0; t < T; t++)
			acc[r][t] = _mm512_setzero_ps();
	const size_t nb = n / QK;
	size_t ib = 0;
	for (; ib + 2 <= nb; ib += 2)
		q32_pair(q8w, prepared, w, ws, R, a, as, T, ib, 0, acc);
	if (ib < nb)
		q32_pair(q8w, prepared, w, ws, R, a, as, T, ib, 1, acc);
	TILE_STORE(acc, R, T, y, ys);
}

static inline __attribute__((always_inline)) void prep_q32(const int q8w, size_t n, const uint8_t *w, size_t ws,
							   uint8_t *out)
{
	const size_t bb = q8w ? Q8_0_B : Q5_0_B, nb = n / QK;
	for (size_t ib = 0; ib < nb; ib += 2, out += Q32P_B)
		UNROLL for (int r = 0; r < Q32_R; r++) {
			__m512i q;
			__m512 dw;
			q32_row(q8w, w + r * ws + ib * bb, ib + 1 == nb, bb, &q, &dw);
			_mm512_store_si512((void *)(out + 128 * r), q);
			_mm512_store_ps((void *)(out + 128 * r + 64), dw);
		}
}

static void prep_q5_0(size_t n, const void *w, size_t ws, void *out)
{
	prep_q32(0, n, w, ws, out);
}

static void prep_q8_0(size_t n, const void *w, size_t ws, void *out)
{
	prep_q32(1, n, w, ws, out);
}

static inline __attribute__((always_inline)) void q5_0_tile_any(const int prepared, size_t n, const uint8_t *w,
								size_t ws, const int R, const uint8_t *a, size_t as,
								const int T, float *y, size_t ys)
{
	q32_tile_any(0, prepared, n, w, ws, R, a, as, T, y, ys);
}

static inline __attribute__((always_inline)) void q8_0_tile_any(const int prepared, size_t n, const uint8_t *w,
								size_t ws, const int R, const uint8_t *a, size_t as,
								const int T, float *y, size_t ys)
{
	q32_tile_any(1, prepared, n, w, ws, R, a, as, T, y, ys);
}

PREPPED_FN(prepped_q5_0, q5_0_tile_any, Q32_R)
PREPPED_FN(prepped_q8_0, q8_0_tile_any, Q32_R)

float pt_kern_dot_q5_0_avx512(size_t n, const void *w, const void *a)
{
	float r;
	q5_0_tile_any(0, n, w, 0, 1, a, 0, 1, &r, 1);
	return r;
}

void pt_kern_dot4_q5_0_avx512(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q5_0_tile_any(0, n, w, 0, 1, a, s, 4, o, 1);
}

float pt_kern_dot_q8_0_avx512(size_t n, const void *w, const void *a)
{
	float r;
	q8_0_tile_any(0, n, w, 0, 1, a, 0, 1, &r, 1);
	return r;
}

void pt_kern_dot4_q8_0_avx512(size_t n, const void *w, const void *a, size_t s, float o[4])
{
	q8_0_tile_any(0, n, w, 0, 1, a, s, 4, o, 1);
}

/* ---- tiles -------------------------------------------------------------------------------- */

/* Every (rows, tokens) shape gets its own fully unrolled instance. */
#define TILE_FN(name, body)                                                                   \
	static void name(size_t n, const void *w, size_t ws, uint32_t nr, const void *a,     \
			 size_t as, uint32_t nt, float *y, size_t ys)                        \
	{                                                                                     \
		const uint8_t *W = w, *A = a;                                                 \
		switch ((nr == 2 ? 4 : 0) + nt - 1) {                                         \
		case 0: body(0, n, W, ws, 1, A, as, 1, y, ys); break;                            \
		case 1: body(0, n, W, ws, 1, A, as, 2, y, ys); break;                            \
		case 2: body(0, n, W, ws, 1, A, as, 3, y, ys); break;                            \
		case 3: body(0, n, W, ws, 1, A, as, 4, y, ys); break;                            \
		case 4: body(0, n, W, ws, 2, A, as, 1, y, ys); break;                            \
		case 5: body(0, n, W, ws, 2, A, as, 2, y, ys); break;                            \
		case 6: body(0, n, W, ws, 2, A, as, 3, y, ys); break;                            \
		default: body(0, n, W, ws, 2, A, as, 4, y, ys); break;                           \
		}                                                                             \
	}

TILE_FN(tile_q4_k, q4k_tile_any)
TILE_FN(tile_q6_k, q6k_tile_any)
/* ... and for up to four rows. */
#define TILE_FN4(name, body)                                                                  \
	static void name(size_t n, const void *w, size_t ws, uint32_t nr, const void *a,     \
			 size_t as, uint32_t nt, float *y, size_t ys)                        \
	{                                                                                     \
		const uint8_t *W = w, *A = a;                                                 \
		switch ((nr - 1) * 4 + nt - 1) {                                              \
		case 0: body(0, n, W, ws, 1, A, as, 1, y, ys); break;                            \
		case 1: body(0, n, W, ws, 1, A, as, 2, y, ys); break;                            \
		case 2: body(0, n, W, ws, 1, A, as, 3, y, ys); break;                            \
		case 3: body(0, n, W, ws, 1, A, as, 4, y, ys); break;                            \
		case 4: body(0, n, W, ws, 2, A, as, 1, y, ys); break;                            \
		case 5: body(0, n, W, ws, 2, A, as, 2, y, ys); break;                            \
		case 6: body(0, n, W, ws, 2, A, as, 3, y, ys); break;                            \
		case 7: body(0, n, W, ws, 2, A, as, 4, y, ys); break;                            \
		case 8: body(0, n, W, ws, 3, A, as, 1, y, ys); break;                            \
		case 9: body(0, n, W, ws, 3, A, as, 2, y, ys); break;                            \
		case 10: body(0, n, W, ws, 3, A, as, 3, y, ys); break;                           \
		case 11: body(0, n, W, ws, 3, A, as, 4, y, ys); break;                           \
		case 12: body(0, n, W, ws, 4, A, as, 1, y, ys); break;                           \
		case 13: body(0, n, W, ws, 4, A, as, 2, y, ys); break;                           \
		case 14: body(0, n, W, ws, 4, A, as, 3, y, ys); break;                           \
		default: body(0, n, W, ws, 4, A, as, 4, y, ys); break;                           \
		}                                                                             \
	}

TILE_FN4(tile_q5_0, q5_0_tile_any)
TILE_FN4(tile_q8_0, q8_0_tile_any)

const struct pt_kern_tile pt_kern_tile_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = { .fn = tile_q4_k, .rows = TILE_R, .toks = TILE_T, .prep = prep_q4_k,
			   .prepped = prepped_q4_k, .prep_cols = QKK, .prep_unit = Q4KP_B },
	[PT_TYPE_Q6_K] = { .fn = tile_q6_k, .rows = TILE_R, .toks = TILE_T, .prep = prep_q6_k,
			   .prepped = prepped_q6_k, .prep_cols = QKK, .prep_unit = Q6KP_B },
	[PT_TYPE_Q5_0] = { .fn = tile_q5_0, .rows = Q32_R, .toks = TILE_T, .prep = prep_q5_0,
			   .prepped = prepped_q5_0, .prep_cols = 2 * QK, .prep_unit = Q32P_B },
	[PT_TYPE_Q8_0] = { .fn = tile_q8_0, .rows = Q32_R, .toks = TILE_T, .prep = prep_q8_0,
			   .prepped = prepped_q8_0, .prep_cols = 2 * QK, .prep_unit = Q32P_B },
};

/* ---- one row as stored, with the interleaved numerics (PT_KERN_LAYOUT_X16_ROWS) ------------
 * The tile's integer work (the same exact lanes), then per super-block the lanes summed as
 * integers and the interleaved layout's two scalar FMA chains (x16.c's definition) instead
 * of 16 float lanes: bit-identical to the X16 kernels on the same row, at every level. */
/* Sums of the 4-lane int32 partials p (lanes 0-3) and q (lanes 0-3) into lanes 0 and 1. */
static inline __m128i hsum2_i32(__m128i p, __m128i q)
{
	const __m128i h = _mm_hadd_epi32(p, q); /* p0+p1 p2+p3 q0+q1 q2+q3 */
	return _mm_hadd_epi32(h, h);
}

static inline __m128i fold512(__m512i v)
{
	const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline __m128i fold256(__m256i v)
{
	return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

/* Q4_K: the scaled sum and the min term side by side, [isum, msum] and [d, dmin] x d8, one
 * two-lane FMA per super-block: each lane's the scalar chain of x16.c (same roundings).  T
 * tokens (1-4) share each super-block's decoding; every output is the 1-token sequence. */
static inline __attribute__((always_inline)) void x16_rows_q4_k(size_t n, const uint8_t *x,
								 const uint8_t *a, size_t as, const int T,
								 float *out)
{
	__m128 acc[4];
	UNROLL for (int t = 0; t < T; t++)
		acc[t] = _mm_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q4K_B) {
		__m256i mins2;
		const __m512i scw = q4k_scales(x + 4, &mins2);
		const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)kern_u32(x)));
		__m512i sumi[4];
		UNROLL for (int g = 0; g < 4; g++) {
			const __m512i s = _mm512_shuffle_epi8(scw, _mm512_load_si512((const void *)q4k_sc_ctrl[g]));
			const __m512i q = q4k_codes(x, g);
			UNROLL for (int t = 0; t < T; t++) {
				const __m512i y8 = _mm512_loadu_si512((const void *)(a + t * as + i * Q8K_B + Q8K_QS + 64 * g));
				const __m512i p = _mm512_maddubs_epi16(q, y8);
				sumi[t] = g == 0 ? _mm512_madd_epi16(p, s) : _mm512_dpwssd_epi32(sumi[t], p, s);
			}
		}
		UNROLL for (int t = 0; t < T; t++) {
			const uint8_t *q8 = a + t * as + i * Q8K_B;
			const __m256i bs = _mm256_loadu_si256((const __m256i *)(q8 + Q8K_BSUMS));
			const __m128i im = hsum2_i32(fold512(sumi[t]), fold256(_mm256_madd_epi16(bs, mins2)));
			acc[t] = _mm_fmadd_ps(_mm_mul_ps(dm, _mm_set1_ps(kern_f32(q8))), _mm_cvtepi32_ps(im), acc[t]);
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		out[t] = _mm_cvtss_f32(acc[t]) - _mm_cvtss_f32(_mm_shuffle_ps(acc[t], acc[t], 1));
}

static float x16_dot_q4_k(size_t n, const void *w, const void *a)
{
	float r;
	x16_rows_q4_k(n, w, a, 0, 1, &r);
	return r;
}

static void x16_dot4_q4_k(size_t n, const void *w, const void *a, size_t as, float o[4])
{
	x16_rows_q4_k(n, w, a, as, 4, o);
}

static inline __attribute__((always_inline)) void x16_rows_q6_k(size_t n, const uint8_t *x,
								 const uint8_t *a, size_t as, const int T,
								 float *out)
{
	__m128 acc[4];
	UNROLL for (int t = 0; t < T; t++)
		acc[t] = _mm_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B) {
		const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
		/* the -32 offset: sum_j sc_j x -32 x bsums_j (|sc x 32| fits int16) */
		const __m256i sc32n = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32));
		const float d = _cvtsh_ss(kern_u16(x + 208));
		__m512i sumi[4];
		UNROLL for (int t = 0; t < T; t++)
			sumi[t] = _mm512_setzero_si512();
		UNROLL for (int h = 0; h < 2; h++) {
			__m512i qa, qb, sa, sb;
			q6k_decode(x, h, _mm512_castsi256_si512(sc16), &qa, &qb, &sa, &sb);
			UNROLL for (int t = 0; t < T; t++) {
				const uint8_t *y = a + t * as + i * Q8K_B + Q8K_QS + 128 * h;
				sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(qa, _mm512_loadu_si512((const void *)y)), sa);
				sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(qb, _mm512_loadu_si512((const void *)(y + 64))), sb);
			}
		}
		UNROLL for (int t = 0; t < T; t++) {
			const uint8_t *q8 = a + t * as + i * Q8K_B;
			const __m256i bs = _mm256_loadu_si256((const __m256i *)(q8 + Q8K_BSUMS));
			const __m128i v = _mm_add_epi32(fold512(sumi[t]), fold256(_mm256_madd_epi16(bs, sc32n)));
			const __m128i im = hsum2_i32(v, v);
			acc[t] = _mm_fmadd_ss(_mm_set_ss(d * kern_f32(q8)), _mm_cvtepi32_ps(im), acc[t]);
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		out[t] = _mm_cvtss_f32(acc[t]);
}

static float x16_dot_q6_k(size_t n, const void *w, const void *a)
{
	float r;
	x16_rows_q6_k(n, w, a, 0, 1, &r);
	return r;
}

static void x16_dot4_q6_k(size_t n, const void *w, const void *a, size_t as, float o[4])
{
	x16_rows_q6_k(n, w, a, as, 4, o);
}

const pt_kern_dot4_fn pt_kern_x16_dot4_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot4_q4_k,
	[PT_TYPE_Q6_K] = x16_dot4_q6_k,
};

const pt_kern_dot_fn pt_kern_x16_dot_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot_q4_k,
	[PT_TYPE_Q6_K] = x16_dot_q6_k,
};
