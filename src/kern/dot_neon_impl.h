/* dot_neon_impl.h - the aarch64 dot products, one body instantiated twice: dot_neon.c (plain
 * NEON, every aarch64 CPU: widening vmull_s8 + pairwise vpadalq_s16) and dot_dotprod.c
 * (compiled with +dotprod: vdotq_s32).  Included only by those two files, after defining
 * PT_NEON_DOTPROD (0 or 1), PT_NEON_TABLE, PT_NEON_DOT4_TABLE and PT_NEON_TILE_TABLE (the
 * tables' names).
 *
 * Each type has one body over R weight rows x K activation rows (R 1 or 2, K 1 or 4,
 * constants after inlining): the dot is R = K = 1, dot4 (every type) R = 1, K = 4, and the
 * register tile (the prefill types Q4_0 Q5_0 Q8_0 Q4_K Q6_K, as on x86-64) R = 2, K = 4.
 * Each weight block is decoded once for all K rows and each activation load serves all R
 * rows; every (row, token) pair sees the R = K = 1 sequence of integer sums and float steps,
 * so dot4 and the tile are bit-identical to the dot (tests/unit/test_kern.c).
 *
 * Per-block integer sums are exact (int8 x int8 products fit int16, pairs and quads are
 * widened into int32), the same integers as the scalar reference; the 32-blocks and IQ4_XS
 * combine them in float in the reference's order, the K-quants sum each super-block's scaled
 * integers first and then apply d (one float term per super-block instead of the reference's
 * eight lanes): a different float summation, as the x86 levels.  F32 / F16 / BF16 multiply in
 * float (exact for F16 and BF16) and accumulate in double lanes.  Activations must come from
 * pt_kern_quantize_row (int8 in [-127, 127]).
 */
#include "kern/kern_internal.h"

#include <arm_neon.h>

#include "quant/types.h"

#ifndef PT_NEON_DOTPROD
#error "define PT_NEON_DOTPROD before including dot_neon_impl.h"
#endif

#define INLINE static inline __attribute__((always_inline))
#define MAXR 2 /* weight rows of the register tile */
#define MAXK 4 /* activation rows of dot4 and the tile */

static inline float h2f(const uint8_t *p)
{
	return kern_fp16_to_f32(kern_u16(p));
}

/* acc + the 16 products a[i] * b[i], in groups of four per int32 lane. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#if PT_NEON_DOTPROD
	return vdotq_s32(acc, a, b);
#else
	acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
	return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* Sum of 32 products: codes lo (elements 0-15) and hi (16-31) against q8[0..31]. */
static inline int32_t dot32(int8x16_t lo, int8x16_t hi, const int8_t *q8)
{
	int32x4_t acc = dot16(vdupq_n_s32(0), lo, vld1q_s8(q8));
	return vaddvq_s32(dot16(acc, hi, vld1q_s8(q8 + 16)));
}

/* acc + sc * (the 16 products codes[i] * q8[i]), lane-wise (exact: the K-quants' per-super-
 * block sums stay far below 2^31). */
static inline int32x4_t dot16_scaled(int32x4_t acc, int8x16_t codes, const int8_t *q8, int sc)
{
	return vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), codes, vld1q_s8(q8)), sc);
}

/* ---- float types ------------------------------------------------------------------------ */

/* kind 0 = F32, 1 = F16, 2 = BF16: four float products per step, summed in double lanes. */
static inline float32x4_t load4(int kind, const uint8_t *p)
{
	if (kind == 0)
		return vld1q_f32((const float *)p);
	uint16x4_t h = vld1_u16((const uint16_t *)p);
	if (kind == 1) /* FCVTL: exact, subnormals included */
		return vcvt_f32_f16(vreinterpret_f16_u16(h));
	return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

static inline float scalar1(int kind, const uint8_t *p)
{
	if (kind == 0)
		return kern_f32(p);
	if (kind == 1)
		return h2f(p);
	uint32_t bits = (uint32_t)kern_u16(p) << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Every body: x[r] weight row r (r < R), y[k] activation row k (k < K), out[r][k]. */
INLINE void float_body(int kind, size_t n, const uint8_t *const *x, const int R,
		       const uint8_t *const *y, const int K, float out[][MAXK])
{
	const size_t es = kind == 0 ? 4 : 2;
	float64x2_t s0[MAXR][MAXK], s1[MAXR][MAXK];
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			s0[r][k] = s1[r][k] = vdupq_n_f64(0.0);
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		float32x4_t wv[MAXR];
		for (int r = 0; r < R; r++)
			wv[r] = load4(kind, x[r] + es * i);
		for (int k = 0; k < K; k++) {
			const float32x4_t av = load4(kind, y[k] + es * i);
			for (int r = 0; r < R; r++) {
				float32x4_t p = vmulq_f32(wv[r], av);
				s0[r][k] = vaddq_f64(s0[r][k], vcvt_f64_f32(vget_low_f32(p)));
				s1[r][k] = vaddq_f64(s1[r][k], vcvt_high_f64_f32(p));
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++) {
			double sum = vaddvq_f64(vaddq_f64(s0[r][k], s1[r][k]));
			for (size_t j = i; j < n; j++)
				sum += (double)(scalar1(kind, x[r] + es * j) * scalar1(kind, y[k] + es * j));
			out[r][k] = (float)sum;
		}
}

INLINE void f32_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		     const int K, float out[][MAXK])
{
	float_body(0, n, x, R, y, K, out);
}

INLINE void f16_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		     const int K, float out[][MAXK])
{
	float_body(1, n, x, R, y, K, out);
}

INLINE void bf16_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float_body(2, n, x, R, y, K, out);
}

/* ---- 32-blocks ------------------------------------------------------------------------- */

/* Bits 0-15 of b as 16 bytes 0x10 / 0x00 (the fifth bit of Q5_0 / Q5_1 codes). */
static inline uint8x16_t bit5_16(uint32_t b)
{
	static const uint8_t m[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
	uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)b), vdup_n_u8((uint8_t)(b >> 8)));
	return vandq_u8(vtstq_u8(v, vld1q_u8(m)), vdupq_n_u8(0x10));
}

/* 16 packed nibbles minus bias: elements 0-15 (low nibbles) and 16-31 (high). */
static inline void nibbles(const uint8_t *qs, int bias, int8x16_t *lo, int8x16_t *hi)
{
	const uint8x16_t raw = vld1q_u8(qs);
	const int8x16_t b = vdupq_n_s8((int8_t)bias);
	*lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0xF))), b);
	*hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), b);
}

/* Q5 codes of a block minus bias: qs nibbles plus the fifth bit from qh. */
static inline void q5_codes(const uint8_t *qs, uint32_t qh, int bias, int8x16_t *lo, int8x16_t *hi)
{
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	const int8x16_t b = vdupq_n_s8((int8_t)bias);
	const uint8x16_t raw = vld1q_u8(qs);
	const uint8x16_t l = vorrq_u8(vandq_u8(raw, m4), bit5_16(qh));
	const uint8x16_t h = vorrq_u8(vshrq_n_u8(raw, 4), bit5_16(qh >> 16));
	*lo = vsubq_s8(vreinterpretq_s8_u8(l), b);
	*hi = vsubq_s8(vreinterpretq_s8_u8(h), b);
}

/* 16 packed nibbles looked up in a 16-entry int8 table: elements 0-15 and 16-31. */
static inline void table_codes(const uint8_t *qs, int8x16_t kv, int8x16_t *lo, int8x16_t *hi)
{
	const uint8x16_t raw = vld1q_u8(qs);
	*lo = vqtbl1q_s8(kv, vandq_u8(raw, vdupq_n_u8(0xF)));
	*hi = vqtbl1q_s8(kv, vshrq_n_u8(raw, 4));
}

INLINE void q4_0_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		float dx[MAXR];
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + ib * Q4_0_B;
			nibbles(xb + 2, 8, &lo[r], &hi[r]);
			dx[r] = h2f(xb);
		}
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_0_B;
			for (int r = 0; r < R; r++) {
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 2));
				sumf[r][k] += ((float)sumi * dx[r]) * h2f(yb);
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void q4_1_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		for (int r = 0; r < R; r++)
			nibbles(x[r] + ib * Q4_1_B + 4, 0, &lo[r], &hi[r]);
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_1_B;
			for (int r = 0; r < R; r++) {
				const uint8_t *xb = x[r] + ib * Q4_1_B;
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 4));
				sumf[r][k] += (h2f(xb) * h2f(yb)) * (float)sumi + h2f(xb + 2) * h2f(yb + 2);
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void q5_0_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + ib * Q5_0_B;
			q5_codes(xb + 6, kern_u32(xb + 2), 16, &lo[r], &hi[r]);
		}
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_0_B;
			for (int r = 0; r < R; r++) {
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 2));
				sumf[r][k] += (h2f(x[r] + ib * Q5_0_B) * h2f(yb)) * (float)sumi;
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void q5_1_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + ib * Q5_1_B;
			q5_codes(xb + 8, kern_u32(xb + 4), 0, &lo[r], &hi[r]);
		}
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_1_B;
			for (int r = 0; r < R; r++) {
				const uint8_t *xb = x[r] + ib * Q5_1_B;
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 4));
				sumf[r][k] += (h2f(xb) * h2f(yb)) * (float)sumi + h2f(xb + 2) * h2f(yb + 2);
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void q8_0_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t w0[MAXR], w1[MAXR];
		float dx[MAXR];
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + ib * Q8_0_B;
			w0[r] = vld1q_s8((const int8_t *)(xb + 2));
			w1[r] = vld1q_s8((const int8_t *)(xb + 18));
			dx[r] = h2f(xb);
		}
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_0_B;
			for (int r = 0; r < R; r++) {
				int sumi = dot32(w0[r], w1[r], (const int8_t *)(yb + 2));
				sumf[r][k] += (float)sumi * (dx[r] * h2f(yb));
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

/* IQ4_NL (the non-linear 4-bit table, fp16 d) and MXFP4 (the E2M1 table doubled, E8M0 d). */
INLINE void iq4_nl_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
			const int K, float out[][MAXK])
{
	const int8x16_t kv = vld1q_s8(pt_kvalues_iq4nl);
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		for (int r = 0; r < R; r++)
			table_codes(x[r] + ib * IQ4NL_B + 2, kv, &lo[r], &hi[r]);
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_0_B;
			for (int r = 0; r < R; r++) {
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 2));
				sumf[r][k] += (h2f(yb) * h2f(x[r] + ib * IQ4NL_B)) * (float)sumi;
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void mxfp4_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		       const int K, float out[][MAXK])
{
	const int8x16_t kv = vld1q_s8(pt_kvalues_mxfp4);
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		int8x16_t lo[MAXR], hi[MAXR];
		for (int r = 0; r < R; r++)
			table_codes(x[r] + ib * MXFP4_B + 1, kv, &lo[r], &hi[r]);
		for (int k = 0; k < K; k++) {
			const uint8_t *yb = y[k] + ib * Q8_0_B;
			for (int r = 0; r < R; r++) {
				const float d = h2f(yb) * kern_e8m0_half(x[r][ib * MXFP4_B]);
				int sumi = dot32(lo[r], hi[r], (const int8_t *)(yb + 2));
				sumf[r][k] += d * (float)sumi;
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

/* ---- K-quants against Q8_K ------------------------------------------------------------- */

/* Q2_K, Q3_K and Q6_K: a super-block is 16 groups of 16 codes, group j against the Q8_K
 * activations 16 j .. 16 j + 15 with an integer scale; the codes of all groups are decoded
 * once (16 registers), then each activation row's scaled integer sum is one vector. */

/* Q2_K: codes 0..3 (group j: bit pair 2 (j / 2 % 4) of byte 16 + 32 (j / 8) + 16 (j % 2)),
 * scale sc[j] & 15, min sc[j] >> 4 against the Q8_K group sums. */
static inline void q2_k_codes(const uint8_t *x, int8x16_t c[16])
{
	for (int j = 0; j < 16; j++) {
		const int shift = 2 * (j / 2 % 4);
		uint8x16_t v = vld1q_u8(x + 16 + 32 * (j / 8) + 16 * (j % 2));
		v = vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)-shift)), vdupq_n_u8(3));
		c[j] = vreinterpretq_s8_u8(v);
	}
}

INLINE void q2_k_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t i = 0; i < n / QKK; i++) {
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + i * Q2K_B, *sc = xb;
			int8x16_t c[16];
			q2_k_codes(xb, c);
			for (int k = 0; k < K; k++) {
				const uint8_t *yb = y[k] + i * Q8K_B;
				const int8_t *q8 = (const int8_t *)(yb + Q8K_QS);
				int summs = 0;
				for (int j = 0; j < 16; j++)
					summs += kern_i16(yb + Q8K_BSUMS + 2 * j) * (sc[j] >> 4);
				int32x4_t acc = vdupq_n_s32(0);
				for (int j = 0; j < 16; j++)
					acc = dot16_scaled(acc, c[j], q8 + 16 * j, sc[j] & 0xF);
				const float dall = kern_f32(yb) * h2f(xb + 80), dmin = kern_f32(yb) * h2f(xb + 82);
				sumf[r][k] += dall * (float)vaddvq_s32(acc) - dmin * (float)summs;
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

static inline int q3k_scale(const uint8_t *s, int b)
{
	int low4 = b < 8 ? s[b] & 0xF : s[b - 8] >> 4;
	int high2 = (s[8 + b % 4] >> (2 * (b / 4))) & 3;
	return (low4 | (high2 << 4)) - 32;
}

/* Q3_K: group j = 2 c + g: low bits plane c % 4 of half c / 4, high bit c of hmask; code =
 * low2 - 4 + 4 * hbit. */
static inline void q3_k_codes(const uint8_t *x, int8x16_t cd[16])
{
	const uint8x16_t m3 = vdupq_n_u8(3), m1 = vdupq_n_u8(1);
	for (int j = 0; j < 16; j++) {
		const int c = j / 2, g = j % 2;
		uint8x16_t lo = vld1q_u8(x + 32 + 32 * (c / 4) + 16 * g);
		uint8x16_t hb = vld1q_u8(x + 16 * g);
		lo = vandq_u8(vshlq_u8(lo, vdupq_n_s8((int8_t)(-2 * (c % 4)))), m3);
		hb = vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)-c)), m1);
		cd[j] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hb, 2))), vdupq_n_s8(4));
	}
}

INLINE void q3_k_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t i = 0; i < n / QKK; i++) {
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + i * Q3K_B;
			int8x16_t c[16];
			int sc[16];
			q3_k_codes(xb, c);
			for (int j = 0; j < 16; j++)
				sc[j] = q3k_scale(xb + 96, j);
			for (int k = 0; k < K; k++) {
				const uint8_t *yb = y[k] + i * Q8K_B;
				const int8_t *q8 = (const int8_t *)(yb + Q8K_QS);
				int32x4_t acc = vdupq_n_s32(0);
				for (int j = 0; j < 16; j++)
					acc = dot16_scaled(acc, c[j], q8 + 16 * j, sc[j]);
				sumf[r][k] += (h2f(xb + 108) * kern_f32(yb)) * (float)vaddvq_s32(acc);
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

/* Q4_K (five = 0) and Q5_K share everything but the fifth bit. */
INLINE void q45_k_body(int five, size_t n, const uint8_t *const *x, const int R,
		       const uint8_t *const *y, const int K, float out[][MAXK])
{
	const size_t bb = five ? Q5K_B : Q4K_B;
	const uint8x16_t m4 = vdupq_n_u8(0xF), b4 = vdupq_n_u8(0x10);
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t i = 0; i < n / QKK; i++) {
		int isum[MAXR][MAXK] = { { 0 } }, summ[MAXR][MAXK] = { { 0 } };
		for (int c = 0; c < 4; c++) {
			uint8_t sc_lo[MAXR], m_lo[MAXR], sc_hi[MAXR], m_hi[MAXR];
			int8x16_t lo[MAXR][2], hi[MAXR][2];
			for (int r = 0; r < R; r++) {
				const uint8_t *xb = x[r] + i * bb;
				const uint8_t *qh = xb + 16, *qs = xb + (five ? 48 : 16);
				kern_q4k_scale_min(xb + 4, 2 * c, &sc_lo[r], &m_lo[r]);
				kern_q4k_scale_min(xb + 4, 2 * c + 1, &sc_hi[r], &m_hi[r]);
				for (int g = 0; g < 2; g++) {
					uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * g);
					uint8x16_t l = vandq_u8(raw, m4), h4 = vshrq_n_u8(raw, 4);
					if (five) {
						uint8x16_t h = vld1q_u8(qh + 16 * g);
						l = vorrq_u8(l, vandq_u8(vshlq_n_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(-2 * c))), 4), b4));
						h4 = vorrq_u8(h4, vandq_u8(vshlq_n_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(-2 * c - 1))), 4), b4));
					}
					lo[r][g] = vreinterpretq_s8_u8(l);
					hi[r][g] = vreinterpretq_s8_u8(h4);
				}
			}
			for (int k = 0; k < K; k++) {
				const uint8_t *yb = y[k] + i * Q8K_B;
				const int8_t *q8 = (const int8_t *)(yb + Q8K_QS);
				const int8x16_t a0 = vld1q_s8(q8 + 64 * c), a1 = vld1q_s8(q8 + 64 * c + 16);
				const int8x16_t a2 = vld1q_s8(q8 + 64 * c + 32), a3 = vld1q_s8(q8 + 64 * c + 48);
				const int bs_lo = kern_i16(yb + Q8K_BSUMS + 8 * c) + kern_i16(yb + Q8K_BSUMS + 8 * c + 2);
				const int bs_hi = kern_i16(yb + Q8K_BSUMS + 8 * c + 4) + kern_i16(yb + Q8K_BSUMS + 8 * c + 6);
				for (int r = 0; r < R; r++) {
					int32x4_t alo = dot16(dot16(vdupq_n_s32(0), lo[r][0], a0), lo[r][1], a1);
					int32x4_t ahi = dot16(dot16(vdupq_n_s32(0), hi[r][0], a2), hi[r][1], a3);
					isum[r][k] += sc_lo[r] * vaddvq_s32(alo) + sc_hi[r] * vaddvq_s32(ahi);
					summ[r][k] += bs_lo * m_lo[r];
					summ[r][k] += bs_hi * m_hi[r];
				}
			}
		}
		for (int k = 0; k < K; k++) {
			const float d8 = kern_f32(y[k] + i * Q8K_B);
			for (int r = 0; r < R; r++) {
				const uint8_t *xb = x[r] + i * bb;
				sumf[r][k] += (h2f(xb) * d8) * (float)isum[r][k];
				sumf[r][k] -= (h2f(xb + 2) * d8) * (float)summ[r][k];
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void q4_k_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	q45_k_body(0, n, x, R, y, K, out);
}

INLINE void q5_k_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	q45_k_body(1, n, x, R, y, K, out);
}

/* Q6_K: half h of the super-block holds groups 8 h .. 8 h + 7 (j = 8 h + 2 q + g: quarter q,
 * elements 16 g .. 16 g + 15 of it): 4 low bits from ql, 2 high bits from qh, minus 32. */
static inline void q6_k_half(const uint8_t *x, int h, int8x16_t c[8])
{
	const uint8x16_t m4 = vdupq_n_u8(0xF), m3 = vdupq_n_u8(3);
	const int8x16_t s32 = vdupq_n_s8(32);
	for (int g = 0; g < 2; g++) {
		const uint8x16_t q0 = vld1q_u8(x + 64 * h + 16 * g);
		const uint8x16_t q1 = vld1q_u8(x + 64 * h + 32 + 16 * g);
		const uint8x16_t hb = vld1q_u8(x + 128 + 32 * h + 16 * g);
		const uint8x16_t u[4] = {
			vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
			vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
			vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
			vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
		};
		for (int q = 0; q < 4; q++)
			c[2 * q + g] = vsubq_s8(vreinterpretq_s8_u8(u[q]), s32);
	}
}

INLINE void q6_k_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
		      const int K, float out[][MAXK])
{
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t i = 0; i < n / QKK; i++) {
		int32x4_t acc[MAXR][MAXK];
		for (int r = 0; r < R; r++)
			for (int k = 0; k < K; k++)
				acc[r][k] = vdupq_n_s32(0);
		for (int h = 0; h < 2; h++) {
			int8x16_t c[MAXR][8];
			for (int r = 0; r < R; r++)
				q6_k_half(x[r] + i * Q6K_B, h, c[r]);
			for (int k = 0; k < K; k++) {
				const int8_t *q8 = (const int8_t *)(y[k] + i * Q8K_B + Q8K_QS) + 128 * h;
				for (int j = 0; j < 8; j++) {
					const int8x16_t a = vld1q_s8(q8 + 16 * j);
					for (int r = 0; r < R; r++) {
						const int8_t *sc = (const int8_t *)(x[r] + i * Q6K_B + 192);
						acc[r][k] = vmlaq_n_s32(acc[r][k], dot16(vdupq_n_s32(0), c[r][j], a),
									sc[8 * h + j]);
					}
				}
			}
		}
		for (int k = 0; k < K; k++) {
			const float d8 = kern_f32(y[k] + i * Q8K_B);
			for (int r = 0; r < R; r++)
				sumf[r][k] += (h2f(x[r] + i * Q6K_B + 208) * d8) * (float)vaddvq_s32(acc[r][k]);
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

INLINE void iq4_xs_body(size_t n, const uint8_t *const *x, const int R, const uint8_t *const *y,
			const int K, float out[][MAXK])
{
	const int8x16_t kv = vld1q_s8(pt_kvalues_iq4nl);
	float sumf[MAXR][MAXK] = { { 0.0f } };
	for (size_t i = 0; i < n / QKK; i++) {
		for (int r = 0; r < R; r++) {
			const uint8_t *xb = x[r] + i * IQ4XS_B;
			const uint16_t h = kern_u16(xb + 2);
			for (int ib = 0; ib < 8; ib++) {
				const int ls = ((xb[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((h >> (2 * ib)) & 3) << 4);
				int8x16_t lo, hi;
				table_codes(xb + 8 + 16 * ib, kv, &lo, &hi);
				for (int k = 0; k < K; k++) {
					const uint8_t *yb = y[k] + i * Q8K_B;
					const float dl = (h2f(xb) * kern_f32(yb)) * (float)(ls - 32);
					int sumi = dot32(lo, hi, (const int8_t *)(yb + Q8K_QS) + 32 * ib);
					sumf[r][k] += dl * (float)sumi;
				}
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++)
			out[r][k] = sumf[r][k];
}

/* ---- the entry points: dot (1 x 1), dot4 (1 x 4), tile (2 x 4) ----------------------- */

#define DOT_AND_DOT4(name)                                                                        \
	static float dot_##name(size_t n, const void *w, const void *a)                           \
	{                                                                                         \
		const uint8_t *x[1] = { w }, *y[1] = { a };                                       \
		float o[1][MAXK];                                                                 \
		name##_body(n, x, 1, y, 1, o);                                                    \
		return o[0][0];                                                                   \
	}                                                                                         \
	static void dot4_##name(size_t n, const void *w, const void *a, size_t as, float out[4])  \
	{                                                                                         \
		const uint8_t *x[1] = { w }, *ab = a;                                             \
		const uint8_t *y[MAXK] = { ab, ab + as, ab + 2 * as, ab + 3 * as };               \
		float o[1][MAXK];                                                                 \
		name##_body(n, x, 1, y, MAXK, o);                                                 \
		for (int k = 0; k < MAXK; k++)                                                    \
			out[k] = o[0][k];                                                         \
	}

/* Rows and tokens beyond the call's counts read the last valid one (results dropped). */
#define TILE(name)                                                                                \
	static void tile_##name(size_t n, const void *w, size_t w_stride, uint32_t n_rows,        \
				const void *a, size_t a_stride, uint32_t n_tok, float *yo,        \
				size_t y_stride)                                                  \
	{                                                                                         \
		const uint8_t *x[MAXR], *y[MAXK];                                                 \
		for (uint32_t r = 0; r < MAXR; r++)                                               \
			x[r] = (const uint8_t *)w + (r < n_rows ? r : n_rows - 1) * w_stride;     \
		for (uint32_t k = 0; k < MAXK; k++)                                               \
			y[k] = (const uint8_t *)a + (k < n_tok ? k : n_tok - 1) * a_stride;       \
		float o[MAXR][MAXK];                                                              \
		name##_body(n, x, MAXR, y, MAXK, o);                                              \
		for (uint32_t k = 0; k < n_tok; k++)                                              \
			for (uint32_t r = 0; r < n_rows; r++)                                     \
				yo[k * y_stride + r] = o[r][k];                                   \
	}

DOT_AND_DOT4(f32)
DOT_AND_DOT4(f16)
DOT_AND_DOT4(bf16)
DOT_AND_DOT4(q4_0)
DOT_AND_DOT4(q4_1)
DOT_AND_DOT4(q5_0)
DOT_AND_DOT4(q5_1)
DOT_AND_DOT4(q8_0)
DOT_AND_DOT4(iq4_nl)
DOT_AND_DOT4(mxfp4)
DOT_AND_DOT4(q2_k)
DOT_AND_DOT4(q3_k)
DOT_AND_DOT4(q4_k)
DOT_AND_DOT4(q5_k)
DOT_AND_DOT4(q6_k)
DOT_AND_DOT4(iq4_xs)
TILE(q4_0)
TILE(q5_0)
TILE(q8_0)
TILE(q4_k)
TILE(q6_k)

const pt_kern_dot_fn PT_NEON_TABLE[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot_f32,       [PT_TYPE_F16] = dot_f16,       [PT_TYPE_BF16] = dot_bf16,
	[PT_TYPE_Q4_0] = dot_q4_0,     [PT_TYPE_Q4_1] = dot_q4_1,     [PT_TYPE_Q5_0] = dot_q5_0,
	[PT_TYPE_Q5_1] = dot_q5_1,     [PT_TYPE_Q8_0] = dot_q8_0,     [PT_TYPE_IQ4_NL] = dot_iq4_nl,
	[PT_TYPE_MXFP4] = dot_mxfp4,   [PT_TYPE_Q2_K] = dot_q2_k,     [PT_TYPE_Q3_K] = dot_q3_k,
	[PT_TYPE_Q4_K] = dot_q4_k,     [PT_TYPE_Q5_K] = dot_q5_k,     [PT_TYPE_Q6_K] = dot_q6_k,
	[PT_TYPE_IQ4_XS] = dot_iq4_xs,
};

const pt_kern_dot4_fn PT_NEON_DOT4_TABLE[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot4_f32,     [PT_TYPE_F16] = dot4_f16,     [PT_TYPE_BF16] = dot4_bf16,
	[PT_TYPE_Q4_0] = dot4_q4_0,   [PT_TYPE_Q4_1] = dot4_q4_1,   [PT_TYPE_Q5_0] = dot4_q5_0,
	[PT_TYPE_Q5_1] = dot4_q5_1,   [PT_TYPE_Q8_0] = dot4_q8_0,   [PT_TYPE_IQ4_NL] = dot4_iq4_nl,
	[PT_TYPE_MXFP4] = dot4_mxfp4, [PT_TYPE_Q2_K] = dot4_q2_k,   [PT_TYPE_Q3_K] = dot4_q3_k,
	[PT_TYPE_Q4_K] = dot4_q4_k,   [PT_TYPE_Q5_K] = dot4_q5_k,   [PT_TYPE_Q6_K] = dot4_q6_k,
	[PT_TYPE_IQ4_XS] = dot4_iq4_xs,
};

/* 2 weight rows x 4 tokens for the prefill types (the types x86-64 tiles, and Q4_0). */
const struct pt_kern_tile PT_NEON_TILE_TABLE[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_0] = { .fn = tile_q4_0, .rows = MAXR, .toks = MAXK },
	[PT_TYPE_Q5_0] = { .fn = tile_q5_0, .rows = MAXR, .toks = MAXK },
	[PT_TYPE_Q8_0] = { .fn = tile_q8_0, .rows = MAXR, .toks = MAXK },
	[PT_TYPE_Q4_K] = { .fn = tile_q4_k, .rows = MAXR, .toks = MAXK },
	[PT_TYPE_Q6_K] = { .fn = tile_q6_k, .rows = MAXR, .toks = MAXK },
};
