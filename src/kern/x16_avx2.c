/* x16_avx2.c - AVX2 kernels over Q4_K, Q8_0 and Q5_0 rows interleaved 16 at a time (kern.h,
 * "interleaved rows"), their sixteen-row twins over rows as stored (X16_ROWS) and the packing
 * transpose, bit-identical to x16.c's scalar reference.
 *
 * A super-block's 16 rows are done as two halves of 8 rows, one row per 32-bit lane of a
 * 256-bit vector, one half after the other within each super-block (one pass over the band).
 * Without VNNI, maddubs multiplies the code bytes by the broadcast activation bytes into
 * exact int16 pair sums (|pair| <= 2 * 15 * 128), eight steps of them add up in int16
 * without overflow (<= 30720), and one madd (Q4_K: by the sub-block's scale in both halves of
 * the lane; Q8_0 / Q5_0: by ones) gives each row's exact sub-block sum (times the scale).
 * The float steps per lane are the reference's.
 *
 * Register pressure decides the speed here (16 ymm registers): the Q4_K kernel sums one
 * nibble half of a group at a time (four token accumulators, not eight), and every running
 * sum passes an empty asm, because GCC otherwise reassociates the integer adds, issues all
 * of a group's products first and spills each to the stack (L1, four tokens: 51 -> 35 ns a
 * token and super-block on the Zen 4 host, PERFORMANCE round 21).
 */
#include "kern/kern_internal.h"

#include <immintrin.h>

#include "kern/x16_blk_avx2.h"

#define UNROLL _Pragma("GCC unroll 8")
#define X16_AVX2_TOKS 4
#define X16_AVX2_BOTH_TOKS 2 /* token counts up to this take both halves in one pass */

/* Halves h0 .. h0 + H - 1 (rows 8 h .. 8 h + 7; H = 2: both, sharing each broadcast of an
 * activation word) of the super-block at p against the tokens' super-blocks at q8, q8 + as,
 * ...: into the accumulators acc[h][t], accm[h][t]. */
static inline __attribute__((always_inline)) void q4_k_sb_halves(const uint8_t *p, const int h0,
								  const int H, const uint8_t *q8,
								  size_t as, const int T,
								  __m256 (*acc)[X16_AVX2_TOKS],
								  __m256 (*accm)[X16_AVX2_TOKS])
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256i sumi[2][X16_AVX2_TOKS];
	UNROLL for (int h = 0; h < H; h++)
		UNROLL for (int t = 0; t < T; t++)
			sumi[h][t] = _mm256_setzero_si256();
	for (int g = 0; g < 4; g++) {
		if (H == 2) /* one pass over the super-block: a quarter of the one ahead a group */
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q4K_SB, g);
		/* low nibbles (sub-block 2g), then high (2g + 1): one set of int16 accumulators
		 * at a time, so the tokens' sums stay in the 16 registers */
		UNROLL for (int nib = 0; nib < 2; nib++) {
			__m256i a16[2][X16_AVX2_TOKS];
			UNROLL for (int h = 0; h < H; h++)
				UNROLL for (int t = 0; t < T; t++)
					a16[h][t] = _mm256_setzero_si256();
			UNROLL for (int s = 0; s < 8; s++) {
				__m256i c[2];
				UNROLL for (int h = 0; h < H; h++) {
					const __m256i x = _mm256_loadu_si256(
						(const __m256i *)(p + 64 * (8 * g + s) + 32 * (h0 + h)));
					c[h] = nib ? _mm256_and_si256(_mm256_srli_epi16(x, 4), m4)
						   : _mm256_and_si256(x, m4);
				}
				UNROLL for (int t = 0; t < T; t++) {
					const uint8_t *qs = q8 + t * as + Q8K_QS + 64 * g + 32 * nib + 4 * s;
					const __m256i b = _mm256_set1_epi32((int)kern_u32(qs));
					UNROLL for (int h = 0; h < H; h++) {
						a16[h][t] = _mm256_add_epi16(a16[h][t],
									     _mm256_maddubs_epi16(c[h], b));
						/* keep each sum a running one: GCC otherwise
						 * reassociates the integer adds, issues all 64
						 * products first and spills every one of them */
						__asm__("" : "+x"(a16[h][t]));
					}
				}
			}
			/* the sub-block's scale in both halves of each lane: madd by it is the
			 * exact (pair sum) x scale (|sum| <= 30720, scale <= 63) */
			UNROLL for (int h = 0; h < H; h++) {
				const __m256i s32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
					(const __m128i *)(p + 2048 + 16 * nib + 32 * g + 8 * (h0 + h))));
				const __m256i sc16 = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
				UNROLL for (int t = 0; t < T; t++)
					sumi[h][t] = _mm256_add_epi32(sumi[h][t],
								      _mm256_madd_epi16(a16[h][t], sc16));
			}
		}
	}
	UNROLL for (int h = 0; h < H; h++) {
		const int hh = h0 + h;
		const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2304 + 16 * hh)));
		const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2336 + 16 * hh)));
		UNROLL for (int t = 0; t < T; t++) {
			__m256i msum = _mm256_setzero_si256();
			UNROLL for (int g = 0; g < 4; g++) {
				const __m256i mw = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p + 2176 + 32 * g + 16 * hh)));
				msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mw, _mm256_set1_epi32(kern_q8k_bsum_pair(q8 + t * as, g))));
			}
			const __m256 d8 = _mm256_set1_ps(kern_f32(q8 + t * as));
			acc[hh][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(sumi[h][t]), acc[hh][t]);
			accm[hh][t] = _mm256_fmadd_ps(_mm256_mul_ps(dm, d8), _mm256_cvtepi32_ps(msum), accm[hh][t]);
		}
	}
}

/* Super-block by super-block (the band read once, in order): one or two tokens take both
 * halves in one pass (each activation word broadcast once for 16 rows; the decode case),
 * more tokens one half after the other (their accumulators fill the registers). */
static inline __attribute__((always_inline)) void x16_q4_k(size_t n, const uint8_t *p,
							    const uint8_t *a, size_t as, const int T,
							    float *y, size_t ys)
{
	__m256 acc[2][X16_AVX2_TOKS], accm[2][X16_AVX2_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		acc[0][t] = accm[0][t] = acc[1][t] = accm[1][t] = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, p += PT_KERN_X16_Q4K_SB) {
		if (T <= X16_AVX2_BOTH_TOKS) {
			/* the requests spread over the pass: a burst of all four parts at once
			 * cost the expert products 5 ms a decode token (Qwen3, AVX2) */
			q4_k_sb_halves(p, 0, 2, a + i * Q8K_B, as, T, acc, accm);
		} else {
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q4K_SB, 0);
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q4K_SB, 1);
			q4_k_sb_halves(p, 0, 1, a + i * Q8K_B, as, T, acc, accm);
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q4K_SB, 2);
			pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q4K_SB, 3);
			q4_k_sb_halves(p, 1, 1, a + i * Q8K_B, as, T, acc, accm);
		}
	}
	UNROLL for (int t = 0; t < T; t++) {
		_mm256_storeu_ps(y + t * ys, _mm256_sub_ps(acc[0][t], accm[0][t]));
		_mm256_storeu_ps(y + t * ys + 8, _mm256_sub_ps(acc[1][t], accm[1][t]));
	}
}

/* Q8_0 and Q5_0 (32-column blocks, Q8_0 activations; kern.h), two halves of 8 rows as for
 * Q4_K.  maddubs takes the code side unsigned and saturates its int16 pair sums, so every
 * product is kept small enough to stay exact for any activation byte: Q8_0's stored codes
 * (w + 128, 0..255) go in as their two nibbles (pairs <= 2 * 15 * 128; eight steps add up to
 * 30720 in int16), the high nibble's sum counted 16 times; Q5_0's codes (0..31, pairs <= 2 *
 * 31 * 128) add up in int16 over the four steps of one nibble half (31744).  128 (Q8_0) or 16
 * (Q5_0) times the activation's block sum is then taken off, as in the AVX-512 kernel. */

/* Bit b (0-7) of every byte at bit 4 (x16_avx512.c's bit_to_4). */
static inline __m256i bit_to_4(__m256i v, int b)
{
	const __m256i m10 = _mm256_set1_epi8(0x10);
	if (b < 4)
		return _mm256_and_si256(_mm256_slli_epi16(v, (int)(4 - b)), m10);
	if (b == 4)
		return _mm256_and_si256(v, m10);
	return _mm256_and_si256(_mm256_srli_epi16(v, (int)(b - 4)), m10);
}

/* Half h of the block at p against the tokens' blocks at q8, q8 + as, ...: into acc[t];
 * off[t]: what token t's offset codes add to every row's sum. */
static inline __attribute__((always_inline)) void blk32_half(const uint8_t *p, const int h,
							      const uint8_t *q8, size_t as,
							      const int T, const int32_t *off,
							      __m256 *acc, const bool q5)
{
	const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
	__m256i s0[X16_AVX2_TOKS], s1[X16_AVX2_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		s0[t] = s1[t] = _mm256_setzero_si256();
	if (q5) {
		const __m256i hb = _mm256_loadu_si256((const __m256i *)(p + 256 + 32 * h));
		UNROLL for (int s = 0; s < 4; s++) {
			const __m256i x = _mm256_loadu_si256((const __m256i *)(p + 64 * s + 32 * h));
			const __m256i cl = _mm256_or_si256(_mm256_and_si256(x, m4), bit_to_4(hb, 2 * s));
			const __m256i ch = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4),
							   bit_to_4(hb, 2 * s + 1));
			UNROLL for (int t = 0; t < T; t++) {
				const uint8_t *qs = q8 + t * as + 2;
				s0[t] = _mm256_add_epi16(s0[t], _mm256_maddubs_epi16(cl, _mm256_set1_epi32((int)kern_u32(qs + 4 * s))));
				s1[t] = _mm256_add_epi16(s1[t], _mm256_maddubs_epi16(ch, _mm256_set1_epi32((int)kern_u32(qs + 16 + 4 * s))));
				__asm__("" : "+x"(s0[t]), "+x"(s1[t])); /* running sums (x16_q4_k) */
			}
		}
	} else {
		UNROLL for (int s = 0; s < 8; s++) {
			const __m256i x = _mm256_loadu_si256((const __m256i *)(p + 64 * s + 32 * h));
			const __m256i cl = _mm256_and_si256(x, m4);
			const __m256i ch = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
			UNROLL for (int t = 0; t < T; t++) {
				const __m256i b = _mm256_set1_epi32((int)kern_u32(q8 + t * as + 2 + 4 * s));
				s0[t] = _mm256_add_epi16(s0[t], _mm256_maddubs_epi16(cl, b));
				s1[t] = _mm256_add_epi16(s1[t], _mm256_maddubs_epi16(ch, b));
				__asm__("" : "+x"(s0[t]), "+x"(s1[t])); /* running sums (x16_q4_k) */
			}
		}
	}
	const size_t blk = q5 ? PT_KERN_X16_Q5_0_BLK : PT_KERN_X16_Q8_0_BLK;
	const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + blk - 32 + 16 * h)));
	UNROLL for (int t = 0; t < T; t++) {
		const uint8_t *qa = q8 + t * as;
		const __m256i lo = _mm256_madd_epi16(s0[t], ones), hi = _mm256_madd_epi16(s1[t], ones);
		__m256i sum = q5 ? _mm256_add_epi32(lo, hi) : _mm256_add_epi32(lo, _mm256_slli_epi32(hi, 4));
		sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(off[t]));
		const __m256 d8 = _mm256_set1_ps(_cvtsh_ss(kern_u16(qa)));
		acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(sum), acc[t]);
	}
}

static inline __attribute__((always_inline)) void x16_blk32(size_t n, const uint8_t *p,
							     const uint8_t *a, size_t as, const int T,
							     float *y, size_t ys, const bool q5)
{
	const size_t blk = q5 ? PT_KERN_X16_Q5_0_BLK : PT_KERN_X16_Q8_0_BLK;
	__m256 acc[2][X16_AVX2_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		acc[0][t] = acc[1][t] = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QK; i++, p += blk) {
		const uint8_t *q8 = a + i * Q8_0_B;
		int32_t off[X16_AVX2_TOKS]; /* once for both halves */
		pt_kern_x16_prefetch_blk(p, blk);
		UNROLL for (int t = 0; t < T; t++)
			off[t] = (q5 ? 16 : 128) * pt_kern_q8_0_block_sum(q8 + t * as + 2);
		blk32_half(p, 0, q8, as, T, off, acc[0], q5);
		blk32_half(p, 1, q8, as, T, off, acc[1], q5);
	}
	UNROLL for (int t = 0; t < T; t++) {
		_mm256_storeu_ps(y + t * ys, acc[0][t]);
		_mm256_storeu_ps(y + t * ys + 8, acc[1][t]);
	}
}

static inline __attribute__((always_inline)) void x16_q8_0(size_t n, const uint8_t *p,
							    const uint8_t *a, size_t as, const int T,
							    float *y, size_t ys)
{
	x16_blk32(n, p, a, as, T, y, ys, false);
}

static inline __attribute__((always_inline)) void x16_q5_0(size_t n, const uint8_t *p,
							    const uint8_t *a, size_t as, const int T,
							    float *y, size_t ys)
{
	x16_blk32(n, p, a, as, T, y, ys, true);
}

/* Q6_K (layout: x16.c's X6_*: per group g of 768 bytes the ql vectors of part c = 0, of
 * c = 1, then the qh vectors, four steps each; the scale bytes at 3072, sub-block j's 16
 * rows at 3072 + 16 j; d at 3328), two halves of 8 rows one after the other within each
 * super-block, as for Q4_K.  The codes (0..63) go to maddubs unsigned: a pair sum is at most
 * 2 * 63 * 128, so two steps add up in int16 (32256), and one madd by the sub-block's scale
 * in both halves of each lane makes them int32.  The -32 offset is taken once a super-block:
 * 32 times the sum over sub-blocks of scale x the activation's 16-element sum (bsums), a
 * madd per pair of sub-blocks.  The loop runs part by part (q outer, steps inner) so that one
 * code vector and one int16 sum a token are live: four tokens fit the 16 registers. */

/* Sub-block j's scale bytes of rows 8 hh .. 8 hh + 7, in the low 8 bytes. */
static inline __attribute__((always_inline)) __m128i q6_k_sc8(const uint8_t *p, int j, int hh)
{
	return _mm_loadl_epi64((const __m128i *)(p + 3072 + 16 * j + 8 * hh));
}

/* The same scales, each in both int16 halves of its lane. */
static inline __attribute__((always_inline)) __m256i q6_k_sc_pairs(const uint8_t *p, int j, int hh)
{
	const __m128i s = q6_k_sc8(p, j, hh);
	return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s, s));
}

/* -32 x sum over j of scale x bsums[j] for rows 8 hh .. 8 hh + 7 and each token: a lane's
 * int16 pair holds two sub-blocks' scales, the broadcast word their two bsums. */
static inline __attribute__((always_inline)) void q6_k_bias(const uint8_t *p, int hh,
							     const uint8_t *q8, size_t as, const int T,
							     __m256i *sumi)
{
	__m256i m[X16_AVX2_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		m[t] = _mm256_setzero_si256();
	UNROLL for (int j = 0; j < 16; j += 2) {
		const __m256i s = _mm256_cvtepi8_epi16(
			_mm_unpacklo_epi8(q6_k_sc8(p, j, hh), q6_k_sc8(p, j + 1, hh)));
		UNROLL for (int t = 0; t < T; t++) {
			const int32_t bs = (int32_t)kern_u32(q8 + t * as + Q8K_BSUMS + 2 * j);
			m[t] = _mm256_add_epi32(m[t], _mm256_madd_epi16(s, _mm256_set1_epi32(bs)));
		}
	}
	UNROLL for (int t = 0; t < T; t++)
		sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(m[t], 5));
}

static inline __attribute__((always_inline)) void x16_q6_k(size_t n, const uint8_t *p,
							    const uint8_t *a, size_t as, const int T,
							    float *y, size_t ys)
{
	const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
	__m256 acc[2][X16_AVX2_TOKS];
	UNROLL for (int t = 0; t < T; t++)
		acc[0][t] = acc[1][t] = _mm256_setzero_ps();
	for (size_t i = 0; i < n / QKK; i++, p += PT_KERN_X16_Q6K_SB) {
		const uint8_t *q8 = a + i * Q8K_B;
		UNROLL for (int hh = 0; hh < 2; hh++) {
			__m256i sumi[X16_AVX2_TOKS];
			q6_k_bias(p, hh, q8, as, T, sumi);
			for (int g = 0; g < 4; g++) {
				const int h = g / 2, k = g % 2;
				const uint8_t *gp = p + 768 * g + 32 * hh;
				if (hh == 0)
					pt_kern_x16_prefetch_ahead(p, PT_KERN_X16_Q6K_SB, g);
				UNROLL for (int q = 0; q < 4; q++) {
					const __m256i sc = q6_k_sc_pairs(p, 8 * h + 2 * q + k, hh);
					UNROLL for (int half = 0; half < 2; half++) {
						__m256i a16[X16_AVX2_TOKS];
						UNROLL for (int t = 0; t < T; t++)
							a16[t] = _mm256_setzero_si256();
						UNROLL for (int uu = 0; uu < 2; uu++) {
							const int u = 2 * half + uu, st = 4 * k + u;
							const __m256i l = _mm256_loadu_si256(
								(const __m256i *)(gp + 256 * (q % 2) + 64 * u));
							const __m256i hb = _mm256_loadu_si256(
								(const __m256i *)(gp + 512 + 64 * u));
							const __m256i lo = q < 2 ? _mm256_and_si256(l, m4)
								: _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
							const __m256i hi = q == 0 ? _mm256_slli_epi16(hb, 4)
								: q == 1 ? _mm256_slli_epi16(hb, 2)
								: q == 2 ? hb : _mm256_srli_epi16(hb, 2);
							const __m256i code = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
							UNROLL for (int t = 0; t < T; t++) {
								const uint8_t *qs = q8 + t * as + Q8K_QS + 128 * h + 32 * q + 4 * st;
								a16[t] = _mm256_add_epi16(a16[t], _mm256_maddubs_epi16(
									code, _mm256_set1_epi32((int)kern_u32(qs))));
								__asm__("" : "+x"(a16[t])); /* a running sum (above) */
							}
						}
						UNROLL for (int t = 0; t < T; t++)
							sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(a16[t], sc));
					}
				}
			}
			const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 3328 + 16 * hh)));
			UNROLL for (int t = 0; t < T; t++) {
				const __m256 d8 = _mm256_set1_ps(kern_f32(q8 + t * as));
				acc[hh][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(sumi[t]), acc[hh][t]);
			}
		}
	}
	UNROLL for (int t = 0; t < T; t++) {
		_mm256_storeu_ps(y + t * ys, acc[0][t]);
		_mm256_storeu_ps(y + t * ys + 8, acc[1][t]);
	}
}

/* A level kernel over any token count: groups of X16_AVX2_TOKS, each a call of KERN with its
 * token count as a constant (the register allocation is per count). */
#define X16_TOKS_FN(name, KERN)                                                                 \
	static void name(size_t n, const void *band, const void *a, size_t as, uint32_t n_tok,   \
			 float *y, size_t ys)                                                    \
	{                                                                                        \
		const uint8_t *p = band, *q = a;                                                 \
		for (uint32_t t0 = 0; t0 < n_tok; t0 += X16_AVX2_TOKS) {                         \
			const uint32_t nt = n_tok - t0 < X16_AVX2_TOKS ? n_tok - t0 : X16_AVX2_TOKS; \
			const uint8_t *qt = q + t0 * as;                                         \
			float *yt = y + t0 * ys;                                                 \
			switch (nt) {                                                            \
			case 1: KERN(n, p, qt, as, 1, yt, ys); break;                            \
			case 2: KERN(n, p, qt, as, 2, yt, ys); break;                            \
			case 3: KERN(n, p, qt, as, 3, yt, ys); break;                            \
			default: KERN(n, p, qt, as, 4, yt, ys); break;                           \
			}                                                                        \
		}                                                                                \
	}

X16_TOKS_FN(x16_q4_k_avx2, x16_q4_k)
X16_TOKS_FN(x16_q6_k_avx2, x16_q6_k)
X16_TOKS_FN(x16_q8_0_avx2, x16_q8_0)
X16_TOKS_FN(x16_q5_0_avx2, x16_q5_0)

const pt_kern_x16_fn pt_kern_x16_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_q4_k_avx2,
	[PT_TYPE_Q6_K] = x16_q6_k_avx2,
	[PT_TYPE_Q8_0] = x16_q8_0_avx2,
	[PT_TYPE_Q5_0] = x16_q5_0_avx2,
};

/* Rows r0 .. r0 + 7, words c0 .. c0 + 7: an 8x8 transpose into the 32-byte halves. */
static inline void transpose8(const uint8_t *src, size_t row_bytes, int r0, int c0,
			      uint8_t *const dst[16])
{
	__m256i t[8], u[8];
	for (int r = 0; r < 8; r += 2) {
		const __m256i a = _mm256_loadu_si256((const __m256i *)(src + (size_t)(r0 + r) * row_bytes + 4 * c0));
		const __m256i b = _mm256_loadu_si256((const __m256i *)(src + (size_t)(r0 + r + 1) * row_bytes + 4 * c0));
		t[r] = _mm256_unpacklo_epi32(a, b);
		t[r + 1] = _mm256_unpackhi_epi32(a, b);
	}
	for (int q = 0; q < 8; q += 4) {
		u[q] = _mm256_unpacklo_epi64(t[q], t[q + 2]);
		u[q + 1] = _mm256_unpackhi_epi64(t[q], t[q + 2]);
		u[q + 2] = _mm256_unpacklo_epi64(t[q + 1], t[q + 3]);
		u[q + 3] = _mm256_unpackhi_epi64(t[q + 1], t[q + 3]);
	}
	for (int j = 0; j < 4; j++) {
		_mm256_storeu_si256((__m256i *)(dst[c0 + j] + 4 * r0), _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
		_mm256_storeu_si256((__m256i *)(dst[c0 + 4 + j] + 4 * r0), _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
	}
}

void pt_kern_x16_transpose_avx2(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16])
{
	transpose8(src, row_bytes, 0, 0, dst);
	transpose8(src, row_bytes, 8, 0, dst);
	transpose8(src, row_bytes, 0, 8, dst);
	transpose8(src, row_bytes, 8, 8, dst);
}

/* ---- Q4_K: sixteen rows as stored, one token (PT_KERN_LAYOUT_X16_ROWS) ---------------------
 * x16_q4_k's numerics with row r in lane r % 8 of half r / 8, read from the rows as stored
 * (x16_avx512.c's twin in 256-bit vectors, without VNNI).  Per row, the four code vectors'
 * nibbles against the activation's 32-byte runs (maddubs: exact int16 pair sums) times each
 * sub-block's scale word (madd) add up to one vector whose sum is the row's exact scaled sum;
 * eight rows' vectors fold into one by hadd rounds.  The scales, mins, d and dmin of eight
 * rows come in eight lanes from a transpose of their first 16 bytes. */

/* Eight rows' 16 bytes (row r at p + r * rb) as four vectors of words: u[k] holds word k of
 * rows 0-7 in order (rows j and j + 4 in the 128-bit halves of a load pair, then a 4 x 4
 * transpose of words in each half). */
static inline __attribute__((always_inline)) void words8x4(const uint8_t *p, size_t rb,
							    __m256i u[4])
{
	__m256i z[4];
	UNROLL for (int j = 0; j < 4; j++)
		z[j] = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + (size_t)j * rb))),
			_mm_loadu_si128((const __m128i *)(p + (size_t)(j + 4) * rb)), 1);
	const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
	const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
	u[0] = _mm256_unpacklo_epi64(t0, t2);
	u[1] = _mm256_unpackhi_epi64(t0, t2);
	u[2] = _mm256_unpacklo_epi64(t1, t3);
	u[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Eight rows' sums in one vector, lane r = row r's, from v[2 j] = hadd(row 2 j's vector,
 * row 2 j + 1's) (the odd entries unused). */
static inline __attribute__((always_inline)) __m256i fold8_pairs(const __m256i v[8])
{
	/* per 128-bit half: the four rows' partial sums of that half, rows in order */
	const __m256i a = _mm256_hadd_epi32(v[0], v[2]), b = _mm256_hadd_epi32(v[4], v[6]);
	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
				_mm256_permute2x128_si256(a, b, 0x31));
}

/* pshufb controls: sub-block j's scale word in every word (scales as words 0-7 of a half). */
#define SCJ2(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define SCJ(j) { SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), \
		 SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j), SCJ2(j) }
static const char q4k_scale_ctrl[8][32] __attribute__((aligned(32))) = {
	SCJ(0), SCJ(1), SCJ(2), SCJ(3), SCJ(4), SCJ(5), SCJ(6), SCJ(7)
};

/* Eight rows (w, w + rb, ...) of one super-block against the token's at a: the rows' exact
 * scaled sums and min sums, a row a lane; d and dmin too. */
static inline __attribute__((always_inline)) void q4_k_rows8(const uint8_t *w, size_t rb,
							      const uint8_t *a, __m256i *isum,
							      __m256i *msum, __m256 *d, __m256 *dm)
{
	const __m256i m4b = _mm256_set1_epi8(0xF);
	const __m256i m6 = _mm256_set1_epi32(0x3f3f3f3f), m4 = _mm256_set1_epi32(0x0f0f0f0f);
	const __m256i m2 = _mm256_set1_epi32(0x03030303);
	__m256i u[4]; /* d | dmin << 16, scale bytes 0-3, 4-7, 8-11 */
	words8x4(w, rb, u);
	const __m256i sc_lo = _mm256_and_si256(u[1], m6), mn_lo = _mm256_and_si256(u[2], m6);
	const __m256i sc_hi = _mm256_or_si256(
		_mm256_and_si256(u[3], m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u[1], 6), m2), 4));
	const __m256i mn_hi = _mm256_or_si256(
		_mm256_and_si256(_mm256_srli_epi32(u[3], 4), m4),
		_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u[2], 6), m2), 4));
	/* each row's eight scales as eight bytes: rows 0, 1 | 4, 5 and 2, 3 | 6, 7 */
	const __m256i tl = _mm256_unpacklo_epi32(sc_lo, sc_hi), th = _mm256_unpackhi_epi32(sc_lo, sc_hi);
	const uint8_t *qs = a + Q8K_QS;
	__m256i v[8];
	UNROLL for (int r = 0; r < 8; r++) {
		const __m256i t = (r % 4) < 2 ? tl : th;
		const __m128i half = r < 4 ? _mm256_castsi256_si128(t) : _mm256_extracti128_si256(t, 1);
		const __m128i sc8 = r % 2 ? _mm_unpackhi_epi64(half, half) : half;
		const __m256i scw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
		const uint8_t *x = w + (size_t)r * rb + 16;
		__m256i sum = _mm256_setzero_si256();
		UNROLL for (int c = 0; c < 4; c++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(x + 32 * c));
			const __m256i lo = _mm256_and_si256(q, m4b);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4b);
			const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(qs + 64 * c)));
			const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(qs + 64 * c + 32)));
			sum = _mm256_add_epi32(sum, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(
				scw, _mm256_load_si256((const __m256i *)q4k_scale_ctrl[2 * c]))));
			sum = _mm256_add_epi32(sum, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(
				scw, _mm256_load_si256((const __m256i *)q4k_scale_ctrl[2 * c + 1]))));
			/* a running sum (x16_q4_k: GCC otherwise issues every row's products
			 * first and spills them) */
			__asm__("" : "+x"(sum));
		}
		v[r] = sum;
		if (r % 2) /* pairs folded as they come: fewer live registers */
			v[r - 1] = _mm256_hadd_epi32(v[r - 1], v[r]);
	}
	*isum = fold8_pairs(v);
	/* the mins of sub-blocks 2 g, 2 g + 1 as a word pair a lane, by the bsums' pairs */
	const __m256i mw01 = _mm256_broadcastsi128_si256(
		_mm_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1));
	const __m256i mw23 = _mm256_broadcastsi128_si256(
		_mm_setr_epi8(2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1));
	__m256i m = _mm256_setzero_si256();
	UNROLL for (int g = 0; g < 4; g++) {
		const __m256i mw = _mm256_shuffle_epi8(g < 2 ? mn_lo : mn_hi, g % 2 ? mw23 : mw01);
		m = _mm256_add_epi32(m, _mm256_madd_epi16(mw, _mm256_set1_epi32(kern_q8k_bsum_pair(a, g))));
	}
	*msum = m;
	/* d and dmin: the lanes' low and high words, packed (values fit) and put in row order */
	const __m256i dd = _mm256_permute4x64_epi64(
		_mm256_packus_epi32(_mm256_and_si256(u[0], _mm256_set1_epi32(0xFFFF)),
				    _mm256_srli_epi32(u[0], 16)),
		0xD8);
	*d = _mm256_cvtph_ps(_mm256_castsi256_si128(dd));
	*dm = _mm256_cvtph_ps(_mm256_extracti128_si256(dd, 1));
}

static void x16_dot16_q4_k(size_t n, const void *wv, size_t rb, const void *av, float *y)
{
	const uint8_t *w = wv, *a = av;
	__m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
	__m256 accm[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
	/* sixteen row streams: the next sixteen rows requested a share a super-block */
	const uintptr_t next = (uintptr_t)w + PT_KERN_X16_ROWS * rb, share = PT_KERN_X16_ROWS * Q4K_B;
	for (size_t i = 0; i < n / QKK; i++, w += Q4K_B, a += Q8K_B) {
		pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
		const __m256 d8 = _mm256_set1_ps(kern_f32(a));
		UNROLL for (int h = 0; h < 2; h++) {
			__m256i isum, msum;
			__m256 d, dm;
			q4_k_rows8(w + (size_t)(8 * h) * rb, rb, a, &isum, &msum, &d, &dm);
			acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(isum), acc[h]);
			accm[h] = _mm256_fmadd_ps(_mm256_mul_ps(dm, d8), _mm256_cvtepi32_ps(msum), accm[h]);
		}
	}
	UNROLL for (int h = 0; h < 2; h++)
		_mm256_storeu_ps(y + 8 * h, _mm256_sub_ps(acc[h], accm[h]));
}

/* ---- the block packers (x16.c's pack_q8_0_blk / pack_q5_0_blk, in registers) ------------
 * Word s of each of 16 rows to o + 64 s + 4 r: eight rows at a time, an 8 x 8 transpose of
 * 32-bit words (two unpack rounds, then the 128-bit halves).  Moves bytes only, so the bytes
 * are the scalar packers'; 3-4x fewer instructions than their 4-byte copies. */

/* z[r] = words 0-7 of row r (r < 8) -> v[k] = word k of rows 0-7 */
static inline __attribute__((always_inline)) void transpose8x8(const __m256i z[8], __m256i v[8])
{
	__m256i t[8], u[8];
	UNROLL for (int j = 0; j < 8; j += 2) {
		t[j] = _mm256_unpacklo_epi32(z[j], z[j + 1]);     /* words 0, 1 (4, 5) of rows j, j + 1 */
		t[j + 1] = _mm256_unpackhi_epi32(z[j], z[j + 1]); /* words 2, 3 (6, 7) */
	}
	UNROLL for (int g = 0; g < 8; g += 4) { /* rows g .. g + 3: u[g + k] word k (4 + k) */
		u[g] = _mm256_unpacklo_epi64(t[g], t[g + 2]);
		u[g + 1] = _mm256_unpackhi_epi64(t[g], t[g + 2]);
		u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
		u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
	}
	UNROLL for (int k = 0; k < 4; k++) {
		v[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
		v[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
	}
}

/* The d words of rows 8 h .. 8 h + 7 (each row's first 16 bytes, words8x4) in row order. */
static inline __attribute__((always_inline)) __m128i d8_words(const __m256i u0)
{
	const __m256i dw = _mm256_and_si256(u0, _mm256_set1_epi32(0xFFFF));
	return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(dw, dw), 0xD8));
}

void pt_kern_x16_pack_q8_0_avx2(const uint8_t *x0, size_t rb, uint8_t *o)
{
	const __m256i flip = _mm256_set1_epi8((char)0x80);
	UNROLL for (int h = 0; h < 2; h++) {
		const uint8_t *x = x0 + (size_t)(8 * h) * rb;
		__m256i z[8], v[8], u[4];
		UNROLL for (int r = 0; r < 8; r++) /* the codes, flipped to w + 128 */
			z[r] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + (size_t)r * rb + 2)),
						flip);
		transpose8x8(z, v);
		UNROLL for (int k = 0; k < 8; k++)
			_mm256_storeu_si256((__m256i *)(o + 64 * k + 32 * h), v[k]);
		words8x4(x, rb, u);
		_mm_storeu_si128((__m128i *)(o + 512 + 16 * h), d8_words(u[0]));
	}
}

void pt_kern_x16_pack_q5_0_avx2(const uint8_t *x0, size_t rb, uint8_t *o)
{
	const __m256i m4 = _mm256_set1_epi32(0xF), mul = _mm256_set1_epi32(0x00204081);
	const __m256i ones = _mm256_set1_epi32(0x01010101);
	UNROLL for (int h = 0; h < 2; h++) {
		const uint8_t *x = x0 + (size_t)(8 * h) * rb;
		__m256i u[4], q[4];
		words8x4(x + 6, rb, q); /* the 16 nibble bytes: word s of every row to o + 64 s */
		UNROLL for (int k = 0; k < 4; k++)
			_mm256_storeu_si256((__m256i *)(o + 64 * k + 32 * h), q[k]);
		words8x4(x, rb, u); /* d, then the fifth bits across words 0 and 1 */
		const __m256i qh = _mm256_or_si256(_mm256_srli_epi32(u[0], 16), _mm256_slli_epi32(u[1], 16));
		/* nibble v's bit k to bit 8 k by v * 0x00204081 (q5_0_spread) */
		__m256i w = _mm256_setzero_si256();
		UNROLL for (int st = 0; st < 4; st++) {
			const __m256i l = _mm256_and_si256(_mm256_srli_epi32(qh, 4 * st), m4);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(qh, 16 + 4 * st), m4);
			w = _mm256_or_si256(w, _mm256_slli_epi32(_mm256_and_si256(_mm256_mullo_epi32(l, mul), ones),
								 2 * st));
			w = _mm256_or_si256(w, _mm256_slli_epi32(_mm256_and_si256(_mm256_mullo_epi32(hi, mul), ones),
								 2 * st + 1));
		}
		_mm256_storeu_si256((__m256i *)(o + 256 + 32 * h), w);
		_mm_storeu_si128((__m128i *)(o + 320 + 16 * h), d8_words(u[0]));
	}
}

/* Q8_0 / Q5_0, sixteen rows as stored a call, in the X16 kernel's numerics (per block the
 * exact integer sum, then d * d8 and one FMA a row): without a twin these streamed rows ran
 * the row-major dot (Gemma 4's 2816 x 704 downs, one token, cold: Q5_0 12.1 and Q8_0 18.6
 * GMAC/s against the X16 kernel's 36.1 and 35.0).  Per block and half, each row's 32 codes
 * are one vector against the activation's 32 bytes (loaded once for the 16 rows): maddubs
 * into int16 pair sums, madd into eight dwords, and the rows folded in pairs by hadd as the
 * Q4_K twin does.  Exact for every code byte: Q5_0's codes (0..31) go in whole (pairs <= 2 *
 * 31 * 128), Q8_0's stored ones (w + 128) as their two nibbles, the high one's sum counted 16
 * times by its madd (x16_blk32's split); 16 or 128 times the activation's block sum comes
 * off after.  Q5_0's fifth bits: the row's word of them broadcast, byte k given bit k. */
static inline __attribute__((always_inline)) __m256i blk32_rows8(const uint8_t *w, size_t rb,
								 const __m256i act, __m256 *d,
								 const bool q5)
{
	const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
	__m256i u[4]; /* the rows' first 16 bytes: d (and Q5_0's fifth bits) in word 0 */
	words8x4(w, rb, u);
	*d = _mm256_cvtph_ps(d8_words(u[0]));
	__m256i v[8];
	UNROLL for (int r = 0; r < 8; r++) {
		const uint8_t *x = w + (size_t)r * rb;
		__m256i sum;
		if (q5) {
			/* byte k: qh's byte k / 8, then bit k % 8 of it as 0x10 */
			const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
							      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
			const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
			const __m256i hb = _mm256_and_si256(
				_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(
					_mm256_set1_epi32((int)kern_u32(x + 2)), pick), bit), bit),
				_mm256_set1_epi8(0x10));
			/* the 16 nibble bytes in both halves, the high nibbles in the upper one */
			const __m256i nb = _mm256_and_si256(
				_mm256_srlv_epi64(_mm256_broadcastsi128_si256(
							  _mm_loadu_si128((const __m128i *)(x + 6))),
						  _mm256_setr_epi64x(0, 0, 4, 4)),
				m4);
			sum = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_or_si256(nb, hb), act), ones);
		} else {
			const __m256i c = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + 2)),
							   _mm256_set1_epi8((char)0x80));
			const __m256i lo = _mm256_and_si256(c, m4);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
			sum = _mm256_add_epi32(
				_mm256_madd_epi16(_mm256_maddubs_epi16(lo, act), ones),
				_mm256_madd_epi16(_mm256_maddubs_epi16(hi, act), _mm256_set1_epi16(16)));
		}
		__asm__("" : "+x"(sum)); /* (q4_k_rows8) */
		v[r] = sum;
		if (r % 2)
			v[r - 1] = _mm256_hadd_epi32(v[r - 1], v[r]);
	}
	return fold8_pairs(v);
}

static inline __attribute__((always_inline)) void x16_dot16_blk32(size_t n, const uint8_t *w,
								   size_t rb, const uint8_t *a,
								   float *y, const bool q5)
{
	const size_t blk = q5 ? Q5_0_B : Q8_0_B;
	__m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
	const uintptr_t next = (uintptr_t)w + PT_KERN_X16_ROWS * rb, share = PT_KERN_X16_ROWS * blk;
	for (size_t i = 0; i < n / QK; i++, w += blk, a += Q8_0_B) {
		pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
		const __m256i act = _mm256_loadu_si256((const __m256i *)(a + 2));
		const __m256i off = _mm256_set1_epi32((q5 ? 16 : 128) * pt_kern_q8_0_block_sum(a + 2));
		const __m256 d8 = _mm256_set1_ps(_cvtsh_ss(kern_u16(a)));
		UNROLL for (int h = 0; h < 2; h++) {
			__m256 d;
			const __m256i isum = _mm256_sub_epi32(
				blk32_rows8(w + (size_t)(8 * h) * rb, rb, act, &d, q5), off);
			acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(isum), acc[h]);
		}
	}
	_mm256_storeu_ps(y, acc[0]);
	_mm256_storeu_ps(y + 8, acc[1]);
}

static void x16_dot16_q8_0(size_t n, const void *w, size_t rb, const void *a, float *y)
{
	x16_dot16_blk32(n, w, rb, a, y, false);
}

static void x16_dot16_q5_0(size_t n, const void *w, size_t rb, const void *a, float *y)
{
	x16_dot16_blk32(n, w, rb, a, y, true);
}

const pt_kern_x16_dot16_fn pt_kern_x16_dot16_avx2[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot16_q4_k,
	[PT_TYPE_Q8_0] = x16_dot16_q8_0,
	[PT_TYPE_Q5_0] = x16_dot16_q5_0,
};
