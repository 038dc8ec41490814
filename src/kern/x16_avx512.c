/* x16_avx512.c - AVX-512 VNNI kernels over rows interleaved 16 at a time (kern.h,
 * "interleaved rows"), their sixteen-row twins over rows as stored (X16_ROWS) and the
 * register packers, all bit-identical to x16.c's scalar reference.
 *
 * One row per 32-bit lane: vpdpbusd multiplies a vector of 4 code bytes of each of the 16
 * rows by the activation's 4 bytes broadcast to every lane (unsigned codes, signed
 * activations: the instruction's operand order), giving each row's exact sub-block sum in its
 * lane; the scales (widened from bytes) and the min words then apply per lane.  The integer
 * sums are exact, and the float steps per lane are the reference's, so any token count gives
 * the same bits.  Up to PT_KERN_X16_TOKS tokens share each code vector's nibble split.
 */
#include "kern/kern_internal.h"

#include <immintrin.h>

#include "kern/q6k_avx512.h"
#include "kern/x16_blk_avx2.h"

#define UNROLL _Pragma("GCC unroll 8")

/* A code vector loaded once for both of its nibble splits: left to itself the compiler folds
 * the load into the AND and again into the shift, and here 64-byte loads, not the ALU ports,
 * bound the kernels (a vpbroadcastd to a ZMM costs a 64-byte load's slot: one activation word
 * a vpdpbusd, Ice Lake-SP ~1.3 such loads a cycle).  Q4_K, 8 tokens, one band hot in L1: 126
 * -> 136 GMAC/s. */
static inline __attribute__((always_inline)) __m512i load_once(const void *p)
{
	__m512i x = _mm512_loadu_si512(p);
	__asm__("" : "+v"(x));
	return x;
}


/* NB (1 or 2) adjacent bands of Q4_K, band bytes apart, times T tokens: up to
 * PT_KERN_X16_TOKS tokens on one band, PT_KERN_X16_PAIR_TOKS on two (their 16 sums and 8
 * super-block sums fill the registers).  With two, each activation word broadcast feeds a
 * vpdpbusd of either band: half the broadcasts of two single-band calls, the loads that bound
 * the kernel.  Each band's lanes take the same steps either way: the same bits.  Q4_K, 8
 * tokens over 4 bands hot in L1, Ice Lake-SP: 136 GMAC/s one band a call, 151 two. */
static inline __attribute__((always_inline)) void x16_q4_k(size_t n, const uint8_t *p0,
							    size_t band, const uint8_t *a, size_t as,
							    const int T, const int NB, float *y,
							    size_t ys)
{
	enum { NBMAX = 2, TP = PT_KERN_X16_TOKS };
	const __m512i m4 = _mm512_set1_epi8(0xF);
	__m512 acc[NBMAX][TP], accm[NBMAX][TP];
	UNROLL for (int b = 0; b < NB; b++)
		UNROLL for (int t = 0; t < T; t++)
			acc[b][t] = accm[b][t] = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++) {
		const uint8_t *q8 = a + i * Q8K_B;
		const uint8_t *pb[NBMAX] = { p0 + i * PT_KERN_X16_Q4K_SB,
					     p0 + band + i * PT_KERN_X16_Q4K_SB };
		__m512i sumi[NBMAX][TP];
		UNROLL for (int b = 0; b < NB; b++)
			UNROLL for (int t = 0; t < T; t++)
				sumi[b][t] = _mm512_setzero_si512();
		for (int g = 0; g < 4; g++) {
			UNROLL for (int b = 0; b < NB; b++)
				pt_kern_x16_prefetch_ahead(pb[b], PT_KERN_X16_Q4K_SB, g);
			__m512i lo[NBMAX][TP], hi[NBMAX][TP];
			UNROLL for (int b = 0; b < NB; b++)
				UNROLL for (int t = 0; t < T; t++)
					lo[b][t] = hi[b][t] = _mm512_setzero_si512();
			UNROLL for (int s = 0; s < 8; s++) {
				__m512i cl[NBMAX], ch[NBMAX];
				UNROLL for (int b = 0; b < NB; b++) {
					const __m512i x = load_once(pb[b] + 64 * (8 * g + s));
					cl[b] = _mm512_and_si512(x, m4);
					ch[b] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
				}
				UNROLL for (int t = 0; t < T; t++) {
					const uint8_t *qs = q8 + t * as + Q8K_QS + 64 * g + 4 * s;
					const __m512i al = _mm512_set1_epi32((int)kern_u32(qs));
					const __m512i ah = _mm512_set1_epi32((int)kern_u32(qs + 32));
					UNROLL for (int b = 0; b < NB; b++) {
						lo[b][t] = _mm512_dpbusd_epi32(lo[b][t], cl[b], al);
						hi[b][t] = _mm512_dpbusd_epi32(hi[b][t], ch[b], ah);
					}
				}
			}
			UNROLL for (int b = 0; b < NB; b++) {
				const __m512i sl = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pb[b] + 2048 + 32 * g)));
				const __m512i sh = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pb[b] + 2064 + 32 * g)));
				UNROLL for (int t = 0; t < T; t++)
					sumi[b][t] = _mm512_add_epi32(sumi[b][t],
								      _mm512_add_epi32(_mm512_mullo_epi32(lo[b][t], sl),
										       _mm512_mullo_epi32(hi[b][t], sh)));
			}
		}
		UNROLL for (int t = 0; t < T; t++) {
			int32_t bsum[4];
			UNROLL for (int g = 0; g < 4; g++)
				bsum[g] = kern_q8k_bsum_pair(q8 + t * as, g);
			const __m512 d8 = _mm512_set1_ps(kern_f32(q8 + t * as));
			UNROLL for (int b = 0; b < NB; b++) {
				const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb[b] + 2304)));
				const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb[b] + 2336)));
				__m512i msum = _mm512_setzero_si512();
				UNROLL for (int g = 0; g < 4; g++) {
					const __m512i mw = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(pb[b] + 2176 + 32 * g)));
					msum = _mm512_dpwssd_epi32(msum, mw, _mm512_set1_epi32(bsum[g]));
				}
				acc[b][t] = _mm512_fmadd_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(sumi[b][t]), acc[b][t]);
				accm[b][t] = _mm512_fmadd_ps(_mm512_mul_ps(dm, d8), _mm512_cvtepi32_ps(msum), accm[b][t]);
			}
		}
	}
	UNROLL for (int b = 0; b < NB; b++)
		UNROLL for (int t = 0; t < T; t++)
			_mm512_storeu_ps(y + t * ys + PT_KERN_X16_ROWS * b, _mm512_sub_ps(acc[b][t], accm[b][t]));
}

static void x16_q4_k_avx512(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	const uint8_t *p = band, *q = a;
	switch (n_tok) {
	case 1: x16_q4_k(n, p, 0, q, as, 1, 1, y, ys); break;
	case 2: x16_q4_k(n, p, 0, q, as, 2, 1, y, ys); break;
	case 3: x16_q4_k(n, p, 0, q, as, 3, 1, y, ys); break;
	case 4: x16_q4_k(n, p, 0, q, as, 4, 1, y, ys); break;
	case 5: x16_q4_k(n, p, 0, q, as, 5, 1, y, ys); break;
	case 6: x16_q4_k(n, p, 0, q, as, 6, 1, y, ys); break;
	case 7: x16_q4_k(n, p, 0, q, as, 7, 1, y, ys); break;
	case 8: x16_q4_k(n, p, 0, q, as, 8, 1, y, ys); break;
	default: break;
	}
}

static void x16_q4_k_pair_avx512(size_t n, const void *band0, size_t band, const void *a,
				 size_t as, uint32_t n_tok, float *y, size_t ys)
{
	const uint8_t *p = band0, *q = a;
	switch (n_tok) {
	case 1: x16_q4_k(n, p, band, q, as, 1, 2, y, ys); break;
	case 2: x16_q4_k(n, p, band, q, as, 2, 2, y, ys); break;
	case 3: x16_q4_k(n, p, band, q, as, 3, 2, y, ys); break;
	case 4: x16_q4_k(n, p, band, q, as, 4, 2, y, ys); break;
	default: break;
	}
}
_Static_assert(PT_KERN_X16_PAIR_TOKS == 4, "x16_q4_k_pair_avx512 switches over 1-4 tokens");

/* Q6_K (layout: kern.h, x16.c), group by group in storage order: per step, one load each of
 * the two ql vectors and the qh vector gives the codes of four sub-blocks (parts q = 0..3):
 * the nibbles and the qh bit pairs (16-bit shifts: the mask drops what crosses a byte).  The
 * -32 offset is taken from the activation's 16-element sums (32 * bsums[j]) before the scale.
 * Four sub-block sums per token live in registers, so a call takes at most X6_TOKS tokens. */
#define X6_TOKS 4

static inline __attribute__((always_inline)) void x16_q6_k(size_t n, const uint8_t *p,
							    const uint8_t *a, size_t as, const int T,
							    float *y, size_t ys)
{
	const __m512i m4 = _mm512_set1_epi8(0xF), m33 = _mm512_set1_epi8(0x33);
	__m512 acc[X6_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		acc[t] = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, p += PT_KERN_X16_Q6K_SB) {
		const uint8_t *q8 = a + i * Q8K_B;
		__m512i sumi[X6_TOKS];
		UNROLL for (int t = 0; t < T; t++)
			sumi[t] = _mm512_setzero_si512();
		UNROLL for (int g = 0; g < 4; g++) {
			const int h = g / 2, k = g % 2;
			const uint8_t *gp = p + 768 * g;
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q6K_SB, g);
			__m512i sj[4][X6_TOKS];
			UNROLL for (int q = 0; q < 4; q++)
				UNROLL for (int t = 0; t < T; t++)
					sj[q][t] = _mm512_setzero_si512();
			UNROLL for (int u = 0; u < 4; u++) {
				const int st = 4 * k + u;
				const __m512i l0 = load_once(gp + 64 * u);
				const __m512i l1 = load_once(gp + 256 + 64 * u);
				const __m512i hb = _mm512_loadu_si512((const void *)(gp + 512 + 64 * u));
				/* qh's bit pairs 0|2 and 1|3 of each byte, masked to bits 0-1 and 4-5
				 * (0x33): shifted left by 4 a pair lands on code bits 4-5 with zeros above
				 * (what crosses into the next byte falls on nibble bits), unshifted the
				 * upper pair already sits there; one bit select a code merges the nibble
				 * (q6k_avx512.h's trick; 11 operations for 17) */
				const __m512i qa = _mm512_and_si512(hb, m33);
				const __m512i qb = _mm512_and_si512(_mm512_srli_epi16(hb, 2), m33);
				__m512i code[4]; /* 0xD8: m4 ? nibble : qh bits */
				code[0] = _mm512_ternarylogic_epi32(_mm512_slli_epi16(qa, 4), l0, m4, 0xD8);
				code[1] = _mm512_ternarylogic_epi32(_mm512_slli_epi16(qb, 4), l1, m4, 0xD8);
				code[2] = _mm512_ternarylogic_epi32(qa, _mm512_srli_epi16(l0, 4), m4, 0xD8);
				code[3] = _mm512_ternarylogic_epi32(qb, _mm512_srli_epi16(l1, 4), m4, 0xD8);
				UNROLL for (int q = 0; q < 4; q++)
					UNROLL for (int t = 0; t < T; t++) {
						const uint8_t *qs = q8 + t * as + Q8K_QS + 128 * h + 32 * q + 4 * st;
						sj[q][t] = _mm512_dpbusd_epi32(sj[q][t], code[q],
									       _mm512_set1_epi32((int)kern_u32(qs)));
					}
			}
			UNROLL for (int q = 0; q < 4; q++) {
				const int j = 8 * h + 2 * q + k;
				const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 3072 + 16 * j)));
				UNROLL for (int t = 0; t < T; t++) {
					const int32_t off = 32 * kern_i16(q8 + t * as + Q8K_BSUMS + 2 * j);
					sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(
						_mm512_sub_epi32(sj[q][t], _mm512_set1_epi32(off)), sc));
				}
			}
		}
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 3328)));
		UNROLL for (int t = 0; t < T; t++) {
			const __m512 d8 = _mm512_set1_ps(kern_f32(q8 + t * as));
			acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(sumi[t]), acc[t]);
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		_mm512_storeu_ps(y + t * ys, acc[t]);
}

static void x16_q6_k_avx512(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	const uint8_t *p = band, *q = a;
	for (uint32_t t0 = 0; t0 < n_tok; t0 += X6_TOKS) {
		const uint32_t nt = n_tok - t0 < X6_TOKS ? n_tok - t0 : X6_TOKS;
		switch (nt) {
		case 1: x16_q6_k(n, p, q + t0 * as, as, 1, y + t0 * ys, ys); break;
		case 2: x16_q6_k(n, p, q + t0 * as, as, 2, y + t0 * ys, ys); break;
		case 3: x16_q6_k(n, p, q + t0 * as, as, 3, y + t0 * ys, ys); break;
		default: x16_q6_k(n, p, q + t0 * as, as, 4, y + t0 * ys, ys); break;
		}
	}
}

/* Q8_0 and Q5_0 (32-column blocks, Q8_0 activations: d, then 32 codes).  vpdpbusd takes the
 * weight side unsigned: Q8_0 codes are stored as w + 128 and Q5_0's are 0..31 (w + 16), so
 * the sum over a block is the exact one plus 128 (or 16) times the activation's block sum,
 * which is taken off per token (one psadbw: the 16 rows share it).  Q5_0's fifth bits come
 * from one vector per block, each step's at fixed bits of every byte (kern.h). */

/* Bit b (0-7) of every byte at bit 4 (16-bit shifts: the mask keeps bit 4, which a shift of
 * at most 4 left or 3 right fills from the same byte). */
static inline __m512i bit_to_4(__m512i v, int b)
{
	const __m512i m10 = _mm512_set1_epi8(0x10);
	if (b < 4)
		return _mm512_and_si512(_mm512_slli_epi16(v, (unsigned)(4 - b)), m10);
	if (b == 4)
		return _mm512_and_si512(v, m10);
	return _mm512_and_si512(_mm512_srli_epi16(v, (unsigned)(b - 4)), m10);
}

static inline __attribute__((always_inline)) void x16_blk32(size_t n, const uint8_t *p,
							     const uint8_t *a, size_t as, const int T,
							     float *y, size_t ys, const bool q5)
{
	const size_t blk = q5 ? PT_KERN_X16_Q5_0_BLK : PT_KERN_X16_Q8_0_BLK;
	const int32_t off = q5 ? 16 : 128;
	const __m512i m4 = _mm512_set1_epi8(0xF);
	__m512 acc[PT_KERN_X16_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		acc[t] = _mm512_setzero_ps();
	for (size_t i = 0; i < n / QK; i++, p += blk) {
		pt_kern_x16_prefetch_blk(p, blk);
		__m512i code[8];
		if (q5) {
			const __m512i hb = _mm512_loadu_si512((const void *)(p + 256));
			UNROLL for (int s = 0; s < 4; s++) {
				const __m512i x = _mm512_loadu_si512((const void *)(p + 64 * s));
				code[s] = _mm512_or_si512(_mm512_and_si512(x, m4), bit_to_4(hb, 2 * s));
				code[4 + s] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x, 4), m4),
							      bit_to_4(hb, 2 * s + 1));
			}
		} else {
			UNROLL for (int s = 0; s < 8; s++)
				code[s] = _mm512_loadu_si512((const void *)(p + 64 * s));
		}
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + blk - 32)));
		UNROLL for (int t = 0; t < T; t++) {
			const uint8_t *qa = a + t * as + i * Q8_0_B;
			__m512i sum = _mm512_setzero_si512();
			UNROLL for (int c = 0; c < 8; c++)
				sum = _mm512_dpbusd_epi32(sum, code[c],
							  _mm512_set1_epi32((int)kern_u32(qa + 2 + 4 * c)));
			sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(off * pt_kern_q8_0_block_sum(qa + 2)));
			const __m512 d8 = _mm512_set1_ps(_cvtsh_ss(kern_u16(qa)));
			acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(sum), acc[t]);
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		_mm512_storeu_ps(y + t * ys, acc[t]);
}

#define X16_BLK32_FN(name, q5)                                                                  \
	static void name(size_t n, const void *band, const void *a, size_t as, uint32_t n_tok,   \
			 float *y, size_t ys)                                                    \
	{                                                                                        \
		const uint8_t *p = band, *q = a;                                                 \
		switch (n_tok) {                                                                 \
		case 1: x16_blk32(n, p, q, as, 1, y, ys, q5); break;                             \
		case 2: x16_blk32(n, p, q, as, 2, y, ys, q5); break;                             \
		case 3: x16_blk32(n, p, q, as, 3, y, ys, q5); break;                             \
		case 4: x16_blk32(n, p, q, as, 4, y, ys, q5); break;                             \
		case 5: x16_blk32(n, p, q, as, 5, y, ys, q5); break;                             \
		case 6: x16_blk32(n, p, q, as, 6, y, ys, q5); break;                             \
		case 7: x16_blk32(n, p, q, as, 7, y, ys, q5); break;                             \
		case 8: x16_blk32(n, p, q, as, 8, y, ys, q5); break;                             \
		default: break;                                                                  \
		}                                                                                \
	}

X16_BLK32_FN(x16_q8_0_avx512, false)
X16_BLK32_FN(x16_q5_0_avx512, true)

/* ---- sixteen rows as stored, one token (PT_KERN_LAYOUT_X16_ROWS) --------------------------
 * x16_blk32's numerics with row r in lane r, read from the rows as stored: a row of 32-column
 * blocks computed alone pays a reduction and a dependent FMA every 22 or 34 bytes, sixteen at
 * once share them.  A vector holds two rows' 32 codes (rows j and j + 4 of a group of eight,
 * low and high half), vpdpbusd against the activation's 32 bytes in both halves leaves eight
 * partial sums a row, and three rounds of unpack and add fold the eight vectors into one
 * vector of the 16 rows' exact sums in row order.  The row scales come in by one gather. */

/* The 16 row sums of eight vectors s[j] holding rows (j, j + 4) for j < 4 and (j + 4, j + 8)
 * for j >= 4 in their halves, eight 32-bit partials each. */
static inline __attribute__((always_inline)) __m512i fold16(const __m512i s[8])
{
	__m512i a[4], b[2];
	UNROLL for (int j = 0; j < 4; j++) /* per 128-bit lane: [x0 + x2, y0 + y2, x1 + x3, y1 + y3] */
		a[j] = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2 * j], s[2 * j + 1]),
					_mm512_unpackhi_epi32(s[2 * j], s[2 * j + 1]));
	UNROLL for (int k = 0; k < 2; k++) /* per lane: the four vectors' rows, half sums */
		b[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * k], a[2 * k + 1]),
					_mm512_unpackhi_epi64(a[2 * k], a[2 * k + 1]));
	/* b[0]'s lanes: rows 0-3, 0-3, 4-7, 4-7 (the two halves of each row's codes); b[1]: 8-15 */
	return _mm512_add_epi32(_mm512_shuffle_i32x4(b[0], b[1], 0x88),
				_mm512_shuffle_i32x4(b[0], b[1], 0xDD));
}

/* The 32-bit byte offsets of 16 rows rb apart, for gathers (pt_kern_x16_gather_ok(rb)). */
static inline __m512i row_offsets(size_t rb)
{
	return _mm512_mullo_epi32(_mm512_set1_epi32((int)rb),
				  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

/* Rows too far apart for the twins' 32-bit gather offsets (pt_kern_x16_gather_ok): the
 * scalar reference a row (the same bits); true if it ran. */
static bool dot16_by_rows(enum pt_type t, size_t n, const uint8_t *w, size_t rb, const uint8_t *a,
			  float *y)
{
	if (pt_kern_x16_gather_ok(rb))
		return false;
	for (int r = 0; r < PT_KERN_X16_ROWS; r++)
		y[r] = pt_kern_x16_dot_scalar[t](n, w + r * rb, a);
	return true;
}

/* Row of vector j's low (high) half: see fold16. */
static inline int fold_row(int j, int high)
{
	return (j < 4 ? j : j + 4) + 4 * high;
}

static inline __attribute__((always_inline)) void x16_dot16_blk32(size_t n, const uint8_t *w,
								   size_t rb, const uint8_t *a,
								   float *y, const bool q5)
{
	if (dot16_by_rows(q5 ? PT_TYPE_Q5_0 : PT_TYPE_Q8_0, n, w, rb, a, y))
		return;
	const size_t blk = q5 ? Q5_0_B : Q8_0_B;
	const int32_t off = q5 ? 16 : 128;
	const __m512i m4 = _mm512_set1_epi8(0xF), b4 = _mm512_set1_epi8(0x10);
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	/* Q5_0's nibbles: the low ones in 128-bit lanes 0 and 2, the high ones in 1 and 3 */
	const __m512i nib_shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004,
						    0, 0, 0x0004000400040004, 0x0004000400040004);
	const __m512i rows = row_offsets(rb);
	__m512 acc = _mm512_setzero_ps();
	/* sixteen rows read a block at a time are sixteen streams, more than the hardware
	 * prefetchers follow: the next sixteen rows (adjacent, as a caller's next band) are
	 * requested a share a block */
	const uintptr_t next = (uintptr_t)w + PT_KERN_X16_ROWS * rb, share = PT_KERN_X16_ROWS * blk;
	for (size_t i = 0; i < n / QK; i++, w += blk, a += Q8_0_B) {
		pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
		const __m512i act = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a + 2)));
		__m512i s[8];
		UNROLL for (int j = 0; j < 8; j++) {
			const uint8_t *lo = w + (size_t)fold_row(j, 0) * rb;
			const uint8_t *hi = w + (size_t)fold_row(j, 1) * rb;
			__m512i code;
			if (q5) {
				const __m512i x = _mm512_inserti64x4(
					_mm512_castsi256_si512(_mm256_broadcastsi128_si256(
						_mm_loadu_si128((const __m128i *)(lo + 6)))),
					_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(hi + 6))),
					1);
				const __mmask64 qh = (__mmask64)kern_u32(lo + 2) |
						     (__mmask64)kern_u32(hi + 2) << 32;
				code = _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi16(x, nib_shift), m4),
						       _mm512_maskz_mov_epi8(qh, b4));
			} else {
				code = _mm512_xor_si512(
					_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
								   (const __m256i *)(lo + 2))),
							   _mm256_loadu_si256((const __m256i *)(hi + 2)), 1),
					flip);
			}
			s[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), code, act);
		}
		const __m512i sum = _mm512_sub_epi32(fold16(s),
						     _mm512_set1_epi32(off * pt_kern_q8_0_block_sum(a + 2)));
		/* each row's d: the low 16 bits of the word at the block's start */
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(rows, w, 1)));
		const __m512 d8 = _mm512_set1_ps(_cvtsh_ss(kern_u16(a)));
		acc = _mm512_fmadd_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(sum), acc);
	}
	_mm512_storeu_ps(y, acc);
}

static void x16_dot16_q8_0(size_t n, const void *w, size_t rb, const void *a, float *y)
{
	x16_dot16_blk32(n, w, rb, a, y, false);
}

static void x16_dot16_q5_0(size_t n, const void *w, size_t rb, const void *a, float *y)
{
	x16_dot16_blk32(n, w, rb, a, y, true);
}

const pt_kern_x16_fn pt_kern_x16_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_q4_k_avx512,
	[PT_TYPE_Q6_K] = x16_q6_k_avx512,
	[PT_TYPE_Q8_0] = x16_q8_0_avx512,
	[PT_TYPE_Q5_0] = x16_q5_0_avx512,
};

const pt_kern_x16_pair_fn pt_kern_x16_pair_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_q4_k_pair_avx512,
};

/* ---- Q8_0 / Q5_0 packing: sixteen rows' blocks in registers (kern.h's band layout) ------
 * The code words transpose as 32-bit words (Q8_0: 16 rows x 8 words, two rows a vector;
 * Q5_0: 16 x 4, four rows a vector), the row scales and Q5_0's fifth-bit words come in by
 * gather, and the fifth bits are spread in all sixteen lanes at once (q5_0_spread's
 * multiply).  Moves the same bytes as x16.c's scalar packers
 * (test_kern_x16_pack_same_at_every_level); the caller checked pt_kern_x16_gather_ok. */

/* The 16 rows' F16 words at x0 + 16-bit offsets r * rb, as 16 halves at o. */
static inline void pack_d16(const uint8_t *x0, __m512i rows, uint8_t *o)
{
	_mm256_storeu_si256((__m256i *)o, _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(rows, x0, 1)));
}

void pt_kern_x16_pack_q8_0_avx512(const uint8_t *x0, size_t rb, uint8_t *o)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512i z[8], t[8], u[8];
	UNROLL for (int j = 0; j < 8; j++) /* rows j (low half) and j + 8 (high), words 0-7 */
		z[j] = _mm512_xor_si512(
			_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
						   (const __m256i *)(x0 + (size_t)j * rb + 2))),
					   _mm256_loadu_si256((const __m256i *)(x0 + (size_t)(j + 8) * rb + 2)), 1),
			flip);
	UNROLL for (int j = 0; j < 8; j += 2) {
		t[j] = _mm512_unpacklo_epi32(z[j], z[j + 1]);
		t[j + 1] = _mm512_unpackhi_epi32(z[j], z[j + 1]);
	}
	UNROLL for (int g = 0; g < 8; g += 4) { /* u[g + j]'s lanes: rows g.. word j, 4 + j, g + 8.. j, 4 + j */
		u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
		u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
		u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
		u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
	}
	const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
	const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
	UNROLL for (int j = 0; j < 4; j++) {
		_mm512_storeu_si512((void *)(o + 64 * j), _mm512_permutex2var_epi64(u[j], lo, u[4 + j]));
		_mm512_storeu_si512((void *)(o + 64 * (4 + j)),
				    _mm512_permutex2var_epi64(u[j], hi, u[4 + j]));
	}
	pack_d16(x0, row_offsets(rb), o + 512);
}

/* Sixteen rows' 16 bytes (row r at p + r * rb) as four vectors of words: u[k] holds word k
 * (bytes 4 k .. 4 k + 3) of rows 0-15 in order.  Four rows a vector (row j + 4 L in 128-bit
 * lane L), then a 4 x 4 transpose of words in every lane. */
static inline __attribute__((always_inline)) void words16x4(const uint8_t *p, size_t rb,
							     __m512i u[4])
{
	__m512i z[4];
	UNROLL for (int j = 0; j < 4; j++) {
		__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + (size_t)j * rb)));
		v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (size_t)(j + 4) * rb)), 1);
		v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (size_t)(j + 8) * rb)), 2);
		z[j] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (size_t)(j + 12) * rb)), 3);
	}
	const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
	const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
	u[0] = _mm512_unpacklo_epi64(t0, t2);
	u[1] = _mm512_unpackhi_epi64(t0, t2);
	u[2] = _mm512_unpacklo_epi64(t1, t3);
	u[3] = _mm512_unpackhi_epi64(t1, t3);
}

void pt_kern_x16_pack_q5_0_avx512(const uint8_t *x0, size_t rb, uint8_t *o)
{
	__m512i u[4]; /* the nibble bytes: word s of every row to o + 64 s */
	words16x4(x0 + 6, rb, u);
	UNROLL for (int k = 0; k < 4; k++)
		_mm512_storeu_si512((void *)(o + 64 * k), u[k]);
	const __m512i rows = row_offsets(rb);
	/* the fifth bits: nibble v's bit k to bit 8 k by v * 0x00204081 (q5_0_spread) */
	const __m512i qh = _mm512_i32gather_epi32(rows, x0 + 2, 1);
	const __m512i m4 = _mm512_set1_epi32(0xF), mul = _mm512_set1_epi32(0x00204081);
	const __m512i ones = _mm512_set1_epi32(0x01010101);
	__m512i w = _mm512_setzero_si512();
	UNROLL for (int st = 0; st < 4; st++) {
		const __m512i l = _mm512_and_si512(_mm512_srli_epi32(qh, (unsigned)(4 * st)), m4);
		const __m512i h = _mm512_and_si512(_mm512_srli_epi32(qh, (unsigned)(16 + 4 * st)), m4);
		w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_and_si512(_mm512_mullo_epi32(l, mul), ones),
							 (unsigned)(2 * st)));
		w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_and_si512(_mm512_mullo_epi32(h, mul), ones),
							 (unsigned)(2 * st + 1)));
	}
	_mm512_storeu_si512((void *)(o + 256), w);
	pack_d16(x0, rows, o + 320);
}

/* Four bytes of each of 16 rows (row r's in dword r) placed byte-major: byte j of row r at
 * 16 j + r.  Dword j of each 128-bit lane gathers byte j of its four rows, then dword 4 j + L
 * takes lane L's dword j (both steps the same pattern). */
static inline __m512i bytes_by_row(__m512i v)
{
	const __m512i bsel = _mm512_broadcast_i32x4(
		_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
	const __m512i dsel = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_epi32(dsel, _mm512_shuffle_epi8(v, bsel));
}

/* Sixteen rows' Q4_K scales and mins from their three packed words a (bytes 4-7 of the
 * super-block), b (8-11), c (12-15), a row a lane: scales 0-3 and 4-7, mins 0-3 and 4-7 as
 * the bytes of a word each (x16.c's pack_q4_k_sb on 32-bit words). */
static inline __attribute__((always_inline)) void q4k_scales16(__m512i a, __m512i b, __m512i c,
								 __m512i *sc_lo, __m512i *sc_hi,
								 __m512i *mn_lo, __m512i *mn_hi)
{
	const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f);
	const __m512i m2 = _mm512_set1_epi32(0x03030303);
	*sc_lo = _mm512_and_si512(a, m6);
	*mn_lo = _mm512_and_si512(b, m6);
	*sc_hi = _mm512_or_si512(_mm512_and_si512(c, m4),
				 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a, 6), m2), 4));
	*mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), m4),
				 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b, 6), m2), 4));
}

/* A Q4_K super-block's scales, mins and d / dmin words of 16 rows (x16.c's pack_q4_k_sb
 * per row, here in the sixteen lanes at once): the 12 packed scale bytes come in as three
 * gathered words a row and are unpacked as the scalar packer does on 32-bit words; the bytes
 * (and 16-bit words) then move to their places by in-lane shuffles and permutes.  Writes
 * o[2048, 2368); the caller checked pt_kern_x16_gather_ok. */
void pt_kern_x16_pack_q4_k_scales_avx512(const uint8_t *x0, size_t rb, uint8_t *o)
{
	const __m512i rows = row_offsets(rb);
	const __m512i a = _mm512_i32gather_epi32(rows, x0 + 4, 1);
	const __m512i b = _mm512_i32gather_epi32(rows, x0 + 8, 1);
	const __m512i c = _mm512_i32gather_epi32(rows, x0 + 12, 1);
	const __m512i dd = _mm512_i32gather_epi32(rows, x0, 1); /* d | dmin << 16 */
	__m512i sc_lo, sc_hi, mn_lo, mn_hi;
	q4k_scales16(a, b, c, &sc_lo, &sc_hi, &mn_lo, &mn_hi);
	_mm512_storeu_si512((void *)(o + 2048), bytes_by_row(sc_lo));
	_mm512_storeu_si512((void *)(o + 2112), bytes_by_row(sc_hi));
	/* 16-bit words: word g of row r at 32 g + 2 r (the mins' pairs; d then dmin) */
	static const uint16_t wsel_w[32] = { 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
					     22, 24, 26, 28, 30, 1,  3,  5,  7,  9,  11,
					     13, 15, 17, 19, 21, 23, 25, 27, 29, 31 };
	const __m512i wsel = _mm512_loadu_si512((const void *)wsel_w);
	_mm512_storeu_si512((void *)(o + 2176), _mm512_permutexvar_epi16(wsel, mn_lo));
	_mm512_storeu_si512((void *)(o + 2240), _mm512_permutexvar_epi16(wsel, mn_hi));
	_mm512_storeu_si512((void *)(o + 2304), _mm512_permutexvar_epi16(wsel, dd));
}

/* A Q6_K super-block's 16 scale bytes and d of 16 rows (x16.c's pack_q6_k_sb per row): the
 * rows' scale bytes transposed as 32-bit words (four rows a vector), then each vector's bytes
 * as pt_kern_x16_pack_q4_k_scales_avx512's; d gathered from the word ending it (206: a row's
 * last bytes, nothing read past it).  Writes o[3072, 3360). */
void pt_kern_x16_pack_q6_k_scales_avx512(const uint8_t *x0, size_t rb, uint8_t *o)
{
	__m512i u[4]; /* u[k]: word k (scale bytes 4 k ..) of rows 0-15 in order */
	words16x4(x0 + 192, rb, u);
	UNROLL for (int k = 0; k < 4; k++) /* scale 4 k + m of row r at 16 (4 k + m) + r */
		_mm512_storeu_si512((void *)(o + 3072 + 64 * k), bytes_by_row(u[k]));
	const __m512i d = _mm512_srli_epi32(_mm512_i32gather_epi32(row_offsets(rb), x0 + 206, 1), 16);
	_mm256_storeu_si256((__m256i *)(o + 3328), _mm512_cvtepi32_epi16(d));
}

/* ---- Q4_K: sixteen rows as stored, one token (PT_KERN_LAYOUT_X16_ROWS) ---------------------
 * x16_q4_k's numerics with row r in lane r.  A row's 128 code bytes are two vectors; their
 * low and high nibbles are four vectors of codes, each two sub-blocks (lower and upper 256
 * bits), multiplied with the activation's matching bytes (vpmaddubsw) and the words by the
 * sub-blocks' scales (vpmaddwd): one vector a row whose sum is the row's exact scaled sum.
 * Sixteen such vectors fold into one (fold16 after a first pairing of halves), and the mins,
 * d and dmin come in sixteen lanes from a transpose of the rows' first 16 bytes.  Integer
 * sums are exact in any order, and the float steps per lane are x16_q4_k's. */

/* [a's lower + upper 256 bits, b's]: two rows' eight partials each, in halves (fold16's s[j]). */
static inline __m512i pair_halves(__m512i a, __m512i b)
{
	return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xEE));
}

/* 128-bit lane `lane` of v in all four (a switch: the shuffle's selector must be a literal). */
static inline __attribute__((always_inline)) __m512i lane128(__m512i v, int lane)
{
	switch (lane) {
	case 0: return _mm512_shuffle_i32x4(v, v, 0x00);
	case 1: return _mm512_shuffle_i32x4(v, v, 0x55);
	case 2: return _mm512_shuffle_i32x4(v, v, 0xAA);
	default: return _mm512_shuffle_i32x4(v, v, 0xFF);
	}
}

/* vpshufb controls over a row's eight scale words (in every 128-bit lane): sub-block ja's
 * word in the lower 256 bits, jb's in the upper (the code vectors' two sub-blocks). */
#define SCW2(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define SCW16(j) SCW2(j), SCW2(j), SCW2(j), SCW2(j), SCW2(j), SCW2(j), SCW2(j), SCW2(j)
#define SC_PAIR(ja, jb) { SCW16(ja), SCW16(ja), SCW16(jb), SCW16(jb) }
static const char q4k_pair_ctrl[4][64] __attribute__((aligned(64))) = {
	SC_PAIR(0, 2), SC_PAIR(1, 3), SC_PAIR(4, 6), SC_PAIR(5, 7)
};

static void x16_dot16_q4_k(size_t n, const void *wv, size_t rb, const void *av, float *y)
{
	const uint8_t *w = wv, *a = av;
	if (dot16_by_rows(PT_TYPE_Q4_K, n, w, rb, a, y))
		return;
	const __m512i m4b = _mm512_set1_epi8(0xF);
	/* a dword's bytes 0, 1 (2, 3) as two words: the mins of sub-blocks 2 g, 2 g + 1 */
	const __m512i mw01 = _mm512_broadcast_i32x4(
		_mm_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1));
	const __m512i mw23 = _mm512_broadcast_i32x4(
		_mm_setr_epi8(2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1));
	__m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
	const uintptr_t next = (uintptr_t)w + PT_KERN_X16_ROWS * rb, share = PT_KERN_X16_ROWS * Q4K_B;
	for (size_t i = 0; i < n / QKK; i++, w += Q4K_B, a += Q8K_B) {
		pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
		__m512i u[4]; /* d | dmin << 16, scale bytes 0-3, 4-7, 8-11 of rows 0-15 */
		words16x4(w, rb, u);
		__m512i sc_lo, sc_hi, mn_lo, mn_hi;
		q4k_scales16(u[1], u[2], u[3], &sc_lo, &sc_hi, &mn_lo, &mn_hi);
		/* each row's eight scales as words in a 128-bit lane: sw[k] holds rows
		 * (k & 2) + 8 (k & 1) + {0, 1, 4, 5} */
		const __m512i tl = _mm512_unpacklo_epi32(sc_lo, sc_hi), th = _mm512_unpackhi_epi32(sc_lo, sc_hi);
		const __m512i sw[4] = {
			_mm512_cvtepu8_epi16(_mm512_castsi512_si256(tl)),
			_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(tl, 1)),
			_mm512_cvtepu8_epi16(_mm512_castsi512_si256(th)),
			_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(th, 1)),
		};
		const uint8_t *qs = a + Q8K_QS;
		__m512i act[4]; /* the activation bytes of code vector k's two sub-blocks */
		UNROLL for (int k = 0; k < 4; k++) {
			const int lo = 128 * (k / 2) + 32 * (k % 2);
			act[k] = _mm512_inserti64x4(
				_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(qs + lo))),
				_mm256_loadu_si256((const __m256i *)(qs + lo + 64)), 1);
		}
		__m512i s[8];
		UNROLL for (int j = 0; j < 8; j++) {
			__m512i v[2];
			UNROLL for (int h = 0; h < 2; h++) {
				const int r = fold_row(j, h);
				const int vec = 2 * ((r % 4) / 2) + r / 8, lane = 2 * ((r / 4) % 2) + r % 2;
				const __m512i scw = lane128(sw[vec], lane);
				const uint8_t *x = w + (size_t)r * rb + 16;
				__m512i sum = _mm512_setzero_si512();
				UNROLL for (int c = 0; c < 2; c++) {
					const __m512i b = _mm512_loadu_si512((const void *)(x + 64 * c));
					const __m512i lo = _mm512_and_si512(b, m4b);
					const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4b);
					sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(lo, act[2 * c]),
						_mm512_shuffle_epi8(scw, _mm512_load_si512((const void *)q4k_pair_ctrl[2 * c])));
					sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(hi, act[2 * c + 1]),
						_mm512_shuffle_epi8(scw, _mm512_load_si512((const void *)q4k_pair_ctrl[2 * c + 1])));
				}
				v[h] = sum;
			}
			s[j] = pair_halves(v[0], v[1]);
		}
		const __m512i isum = fold16(s);
		__m512i msum = _mm512_setzero_si512();
		UNROLL for (int g = 0; g < 4; g++) {
			const __m512i mn = g < 2 ? mn_lo : mn_hi;
			const __m512i mw = _mm512_shuffle_epi8(mn, g % 2 ? mw23 : mw01);
			msum = _mm512_dpwssd_epi32(msum, mw, _mm512_set1_epi32(kern_q8k_bsum_pair(a, g)));
		}
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(u[0]));
		const __m512 dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(u[0], 16)));
		const __m512 d8 = _mm512_set1_ps(kern_f32(a));
		acc = _mm512_fmadd_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(isum), acc);
		accm = _mm512_fmadd_ps(_mm512_mul_ps(dm, d8), _mm512_cvtepi32_ps(msum), accm);
	}
	_mm512_storeu_ps(y, _mm512_sub_ps(acc, accm));
}

/* Q6_K, the same way: a row's codes and scale words as its row twin decodes them
 * (q6k_decode: per half, two code vectors, each four 16-element sub-blocks, and their scale
 * words), vpmaddubsw and vpmaddwd into one vector a row, sixteen folded into one; the -32
 * offset is the activation's 16-element sums times the scales (sixteen lanes, from a transpose
 * of the rows' scale bytes) times 32, taken off the folded sums. */
static void x16_dot16_q6_k(size_t n, const void *wv, size_t rb, const void *av, float *y)
{
	const uint8_t *w = wv, *a = av;
	if (dot16_by_rows(PT_TYPE_Q6_K, n, w, rb, a, y))
		return;
	const __m512i rows = row_offsets(rb);
	__m512 acc = _mm512_setzero_ps();
	const uintptr_t next = (uintptr_t)w + PT_KERN_X16_ROWS * rb, share = PT_KERN_X16_ROWS * Q6K_B;
	for (size_t i = 0; i < n / QKK; i++, w += Q6K_B, a += Q8K_B) {
		pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
		const uint8_t *qs = a + Q8K_QS;
		__m512i act[4];
		UNROLL for (int k = 0; k < 4; k++)
			act[k] = _mm512_loadu_si512((const void *)(qs + 64 * k));
		__m512i s[8];
		UNROLL for (int j = 0; j < 8; j++) {
			__m512i v[2];
			UNROLL for (int h2 = 0; h2 < 2; h2++) {
				const uint8_t *x = w + (size_t)fold_row(j, h2) * rb;
				const __m512i scw = _mm512_castsi256_si512(
					_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192))));
				__m512i sum = _mm512_setzero_si512();
				UNROLL for (int h = 0; h < 2; h++) {
					__m512i qa, qb, sa, sb;
					q6k_decode(x, h, scw, &qa, &qb, &sa, &sb);
					sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(qa, act[2 * h]), sa);
					sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(qb, act[2 * h + 1]), sb);
				}
				v[h2] = sum;
			}
			s[j] = pair_halves(v[0], v[1]);
		}
		/* sum_j scale_j x bsums_j in sixteen lanes: the signed scale bytes as word pairs
		 * (bytes 0, 2 and 1, 3 of each word of four) against the bsums' matching pairs */
		__m512i u[4], bias = _mm512_setzero_si512();
		words16x4(w + 192, rb, u);
		UNROLL for (int k = 0; k < 4; k++) {
			const __m512i even = _mm512_srai_epi16(_mm512_slli_epi16(u[k], 8), 8);
			const __m512i odd = _mm512_srai_epi16(u[k], 8);
			const uint8_t *bs = a + Q8K_BSUMS + 8 * k;
			bias = _mm512_dpwssd_epi32(bias, even, _mm512_set1_epi32(
				(int)((uint32_t)kern_u16(bs) | (uint32_t)kern_u16(bs + 4) << 16)));
			bias = _mm512_dpwssd_epi32(bias, odd, _mm512_set1_epi32(
				(int)((uint32_t)kern_u16(bs + 2) | (uint32_t)kern_u16(bs + 6) << 16)));
		}
		const __m512i isum = _mm512_sub_epi32(fold16(s), _mm512_slli_epi32(bias, 5));
		/* each row's d: the high word of the word ending its super-block (nothing past it) */
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
			_mm512_srli_epi32(_mm512_i32gather_epi32(rows, w + 206, 1), 16)));
		acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(kern_f32(a))), _mm512_cvtepi32_ps(isum), acc);
	}
	_mm512_storeu_ps(y, acc);
}

const pt_kern_x16_dot16_fn pt_kern_x16_dot16_avx512[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot16_q4_k,
	[PT_TYPE_Q6_K] = x16_dot16_q6_k,
	[PT_TYPE_Q8_0] = x16_dot16_q8_0,
	[PT_TYPE_Q5_0] = x16_dot16_q5_0,
};

void pt_kern_x16_transpose_avx512(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16])
{
	__m512i t[16], u[16];
	UNROLL for (int r = 0; r < 16; r += 2) {
		const __m512i a = _mm512_loadu_si512((const void *)(src + (size_t)r * row_bytes));
		const __m512i b = _mm512_loadu_si512((const void *)(src + (size_t)(r + 1) * row_bytes));
		t[r] = _mm512_unpacklo_epi32(a, b);     /* per 128-bit lane L: words 4L, 4L + 1 */
		t[r + 1] = _mm512_unpackhi_epi32(a, b); /* words 4L + 2, 4L + 3 */
	}
	UNROLL for (int q = 0; q < 16; q += 4) { /* rows q .. q + 3: u[q + j] holds word 4L + j */
		u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
		u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
		u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
		u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
	}
	UNROLL for (int j = 0; j < 4; j++) { /* lane L of the four row groups: word 4L + j */
		const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
		const __m512i w0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
		const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
		const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
		_mm512_storeu_si512((void *)dst[j], _mm512_shuffle_i32x4(v0, w0, 0x88));
		_mm512_storeu_si512((void *)dst[8 + j], _mm512_shuffle_i32x4(v0, w0, 0xDD));
		_mm512_storeu_si512((void *)dst[4 + j], _mm512_shuffle_i32x4(v1, w1, 0x88));
		_mm512_storeu_si512((void *)dst[12 + j], _mm512_shuffle_i32x4(v1, w1, 0xDD));
	}
}
