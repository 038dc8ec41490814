/* dot_neon_impl.h - the aarch64 dot products, one body instantiated twice: dot_neon.c (plain
 * NEON, every aarch64 CPU: widening vmull_s8 + pairwise vpadalq_s16) and dot_dotprod.c
 * (compiled with +dotprod: vdotq_s32).  Included only by those two files, after defining
 * PT_NEON_DOTPROD (0 or 1), PT_NEON_TABLE and PT_NEON_DOT4_TABLE (the tables' names).
 * dot4 (Q4_0 Q8_0 Q4_K Q5_K) is the dot's body with four activation rows.
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

static inline int32_t dot16s(int8x16_t a, const int8_t *q8)
{
	return vaddvq_s32(dot16(vdupq_n_s32(0), a, vld1q_s8(q8)));
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

static inline float float_dot(int kind, size_t n, const uint8_t *w, const uint8_t *a)
{
	const size_t es = kind == 0 ? 4 : 2;
	float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		float32x4_t p = vmulq_f32(load4(kind, w + es * i), load4(kind, a + es * i));
		s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(p)));
		s1 = vaddq_f64(s1, vcvt_high_f64_f32(p));
	}
	double sum = vaddvq_f64(vaddq_f64(s0, s1));
	for (; i < n; i++)
		sum += (double)(scalar1(kind, w + es * i) * scalar1(kind, a + es * i));
	return (float)sum;
}

static float dot_f32(size_t n, const void *w, const void *a) { return float_dot(0, n, w, a); }
static float dot_f16(size_t n, const void *w, const void *a) { return float_dot(1, n, w, a); }
static float dot_bf16(size_t n, const void *w, const void *a) { return float_dot(2, n, w, a); }

/* ---- 32-blocks ------------------------------------------------------------------------- */

/* Bits 0-15 of b as 16 bytes 0x10 / 0x00 (the fifth bit of Q5_0 / Q5_1 codes). */
static inline uint8x16_t bit5_16(uint32_t b)
{
	static const uint8_t m[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
	uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)b), vdup_n_u8((uint8_t)(b >> 8)));
	return vandq_u8(vtstq_u8(v, vld1q_u8(m)), vdupq_n_u8(0x10));
}

/* The dot bodies with a dot4 twin take K activation rows (a, a + a_stride, ...; K 1 or 4, a
 * constant after inlining): the weight block is decoded once, and each row's integer sums
 * and float steps are the K = 1 sequence, so dot4's out[k] equals dot(a + k a_stride). */
#define INLINE static inline __attribute__((always_inline))

INLINE void q4_0_body(size_t n, const uint8_t *x, const uint8_t *y, size_t as, const int K,
		      float *out)
{
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	const int8x16_t s8 = vdupq_n_s8(8);
	float sumf[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_0_B, y += Q8_0_B) {
		uint8x16_t raw = vld1q_u8(x + 2);
		int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, m4)), s8);
		int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), s8);
		const float dx = h2f(x);
		for (int k = 0; k < K; k++) {
			const uint8_t *yk = y + k * as;
			int sumi = dot32(lo, hi, (const int8_t *)(yk + 2));
			sumf[k] += ((float)sumi * dx) * h2f(yk);
		}
	}
	for (int k = 0; k < K; k++)
		out[k] = sumf[k];
}

static float dot_q4_0(size_t n, const void *vw, const void *va)
{
	float r;
	q4_0_body(n, vw, va, 0, 1, &r);
	return r;
}

static void dot4_q4_0(size_t n, const void *w, const void *a, size_t as, float out[4])
{
	q4_0_body(n, w, a, as, 4, out);
}

static float dot_q4_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_1_B, y += Q8_1_B) {
		uint8x16_t raw = vld1q_u8(x + 4);
		int sumi = dot32(vreinterpretq_s8_u8(vandq_u8(raw, m4)),
				 vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), (const int8_t *)(y + 4));
		sumf += (h2f(x) * h2f(y)) * (float)sumi + h2f(x + 2) * h2f(y + 2);
	}
	return sumf;
}

/* Q5 codes of a block minus bias: qs nibbles plus the fifth bit from qh. */
static inline int q5_sum(const uint8_t *qs, uint32_t qh, const int8_t *q8, int bias)
{
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	const int8x16_t b = vdupq_n_s8((int8_t)bias);
	uint8x16_t raw = vld1q_u8(qs);
	uint8x16_t lo = vorrq_u8(vandq_u8(raw, m4), bit5_16(qh));
	uint8x16_t hi = vorrq_u8(vshrq_n_u8(raw, 4), bit5_16(qh >> 16));
	return dot32(vsubq_s8(vreinterpretq_s8_u8(lo), b), vsubq_s8(vreinterpretq_s8_u8(hi), b), q8);
}

static float dot_q5_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q5_0_B, y += Q8_0_B) {
		int sumi = q5_sum(x + 6, kern_u32(x + 2), (const int8_t *)(y + 2), 16);
		sumf += (h2f(x) * h2f(y)) * (float)sumi;
	}
	return sumf;
}

static float dot_q5_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q5_1_B, y += Q8_1_B) {
		int sumi = q5_sum(x + 8, kern_u32(x + 4), (const int8_t *)(y + 4), 0);
		sumf += (h2f(x) * h2f(y)) * (float)sumi + h2f(x + 2) * h2f(y + 2);
	}
	return sumf;
}

INLINE void q8_0_body(size_t n, const uint8_t *x, const uint8_t *y, size_t as, const int K,
		      float *out)
{
	float sumf[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	for (size_t ib = 0; ib < n / QK; ib++, x += Q8_0_B, y += Q8_0_B) {
		const int8x16_t w0 = vld1q_s8((const int8_t *)(x + 2));
		const int8x16_t w1 = vld1q_s8((const int8_t *)(x + 18));
		const float dx = h2f(x);
		for (int k = 0; k < K; k++) {
			const uint8_t *yk = y + k * as;
			int sumi = dot32(w0, w1, (const int8_t *)(yk + 2));
			sumf[k] += (float)sumi * (dx * h2f(yk));
		}
	}
	for (int k = 0; k < K; k++)
		out[k] = sumf[k];
}

static float dot_q8_0(size_t n, const void *vw, const void *va)
{
	float r;
	q8_0_body(n, vw, va, 0, 1, &r);
	return r;
}

static void dot4_q8_0(size_t n, const void *w, const void *a, size_t as, float out[4])
{
	q8_0_body(n, w, a, as, 4, out);
}

/* 16 packed nibbles looked up in a 16-entry int8 table: elements 0-15 and 16-31. */
static inline int table_sum(const uint8_t *qs, int8x16_t kv, const int8_t *q8)
{
	uint8x16_t raw = vld1q_u8(qs);
	return dot32(vqtbl1q_s8(kv, vandq_u8(raw, vdupq_n_u8(0xF))), vqtbl1q_s8(kv, vshrq_n_u8(raw, 4)),
		     q8);
}

static float dot_iq4_nl(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const int8x16_t kv = vld1q_s8(pt_kvalues_iq4nl);
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += IQ4NL_B, y += Q8_0_B) {
		int sumi = table_sum(x + 2, kv, (const int8_t *)(y + 2));
		sumf += (h2f(y) * h2f(x)) * (float)sumi;
	}
	return sumf;
}

static float dot_mxfp4(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const int8x16_t kv = vld1q_s8(pt_kvalues_mxfp4);
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += MXFP4_B, y += Q8_0_B) {
		const float d = h2f(y) * kern_e8m0_half(x[0]);
		int sumi = table_sum(x + 1, kv, (const int8_t *)(y + 2));
		sumf += d * (float)sumi;
	}
	return sumf;
}

/* ---- K-quants against Q8_K ------------------------------------------------------------- */

static float dot_q2_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q2K_B, y += Q8K_B) {
		const uint8_t *sc = x;
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		int summs = 0;
		for (int j = 0; j < 16; j++)
			summs += kern_i16(y + Q8K_BSUMS + 2 * j) * (sc[j] >> 4);
		int isum = 0, is = 0;
		for (int k = 0; k < 2; k++) {
			for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
				for (int half = 0; half < 2; half++) {
					uint8x16_t v = vld1q_u8(x + 16 + 32 * k + 16 * half);
					v = vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)-shift)), vdupq_n_u8(3));
					isum += (sc[is++] & 0xF) * dot16s(vreinterpretq_s8_u8(v), q8 + 16 * half);
				}
			}
		}
		const float dall = kern_f32(y) * h2f(x + 80), dmin = kern_f32(y) * h2f(x + 82);
		sumf += dall * (float)isum - dmin * (float)summs;
	}
	return sumf;
}

static int q3k_scale(const uint8_t *s, int b)
{
	int low4 = b < 8 ? s[b] & 0xF : s[b - 8] >> 4;
	int high2 = (s[8 + b % 4] >> (2 * (b / 4))) & 3;
	return (low4 | (high2 << 4)) - 32;
}

static float dot_q3_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	const uint8x16_t m3 = vdupq_n_u8(3), m1 = vdupq_n_u8(1);
	for (size_t i = 0; i < n / QKK; i++, x += Q3K_B, y += Q8K_B) {
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		int isum = 0;
		for (int c = 0; c < 8; c++) { /* 32 elements: low bits plane c % 4 of half c / 4 */
			for (int g = 0; g < 2; g++) {
				uint8x16_t lo = vld1q_u8(x + 32 + 32 * (c / 4) + 16 * g);
				uint8x16_t hb = vld1q_u8(x + 16 * g);
				lo = vandq_u8(vshlq_u8(lo, vdupq_n_s8((int8_t)(-2 * (c % 4)))), m3);
				hb = vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)-c)), m1);
				/* code = low2 - 4 + 4 * hbit */
				int8x16_t a = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hb, 2))),
						       vdupq_n_s8(4));
				isum += q3k_scale(x + 96, 2 * c + g) * dot16s(a, q8 + 32 * c + 16 * g);
			}
		}
		sumf += (h2f(x + 108) * kern_f32(y)) * (float)isum;
	}
	return sumf;
}

/* Q4_K (five = 0) and Q5_K share everything but the fifth bit; K activation rows. */
INLINE void q45_k_body(size_t n, const uint8_t *x, const uint8_t *y, size_t as, int five,
		       const int K, float *out)
{
	const size_t bb = five ? Q5K_B : Q4K_B;
	const uint8x16_t m4 = vdupq_n_u8(0xF), b4 = vdupq_n_u8(0x10);
	float sumf[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	for (size_t i = 0; i < n / QKK; i++, x += bb, y += Q8K_B) {
		const uint8_t *qh = x + 16, *qs = x + (five ? 48 : 16);
		int isum[4] = { 0, 0, 0, 0 }, summ[4] = { 0, 0, 0, 0 };
		for (int c = 0; c < 4; c++) {
			uint8_t sc_lo, m_lo, sc_hi, m_hi;
			kern_q4k_scale_min(x + 4, 2 * c, &sc_lo, &m_lo);
			kern_q4k_scale_min(x + 4, 2 * c + 1, &sc_hi, &m_hi);
			int8x16_t lo[2], hi[2];
			for (int g = 0; g < 2; g++) {
				uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * g);
				uint8x16_t l = vandq_u8(raw, m4), h4 = vshrq_n_u8(raw, 4);
				if (five) {
					uint8x16_t h = vld1q_u8(qh + 16 * g);
					l = vorrq_u8(l, vandq_u8(vshlq_n_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(-2 * c))), 4), b4));
					h4 = vorrq_u8(h4, vandq_u8(vshlq_n_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(-2 * c - 1))), 4), b4));
				}
				lo[g] = vreinterpretq_s8_u8(l);
				hi[g] = vreinterpretq_s8_u8(h4);
			}
			for (int k = 0; k < K; k++) {
				const uint8_t *yk = y + k * as;
				const int8_t *q8 = (const int8_t *)(yk + Q8K_QS);
				int32x4_t alo = vdupq_n_s32(0), ahi = vdupq_n_s32(0);
				for (int g = 0; g < 2; g++) {
					alo = dot16(alo, lo[g], vld1q_s8(q8 + 64 * c + 16 * g));
					ahi = dot16(ahi, hi[g], vld1q_s8(q8 + 64 * c + 32 + 16 * g));
				}
				isum[k] += sc_lo * vaddvq_s32(alo) + sc_hi * vaddvq_s32(ahi);
				summ[k] += (kern_i16(yk + Q8K_BSUMS + 8 * c) + kern_i16(yk + Q8K_BSUMS + 8 * c + 2)) * m_lo;
				summ[k] += (kern_i16(yk + Q8K_BSUMS + 8 * c + 4) + kern_i16(yk + Q8K_BSUMS + 8 * c + 6)) * m_hi;
			}
		}
		for (int k = 0; k < K; k++) {
			const float d8 = kern_f32(y + k * as);
			sumf[k] += (h2f(x) * d8) * (float)isum[k];
			sumf[k] -= (h2f(x + 2) * d8) * (float)summ[k];
		}
	}
	for (int k = 0; k < K; k++)
		out[k] = sumf[k];
}

static float dot_q4_k(size_t n, const void *w, const void *a)
{
	float r;
	q45_k_body(n, w, a, 0, 0, 1, &r);
	return r;
}

static float dot_q5_k(size_t n, const void *w, const void *a)
{
	float r;
	q45_k_body(n, w, a, 0, 1, 1, &r);
	return r;
}

static void dot4_q4_k(size_t n, const void *w, const void *a, size_t as, float out[4])
{
	q45_k_body(n, w, a, as, 0, 4, out);
}

static void dot4_q5_k(size_t n, const void *w, const void *a, size_t as, float out[4])
{
	q45_k_body(n, w, a, as, 1, 4, out);
}

static float dot_q6_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const uint8x16_t m4 = vdupq_n_u8(0xF), m3 = vdupq_n_u8(3);
	const int8x16_t s32 = vdupq_n_s8(32);
	float sumf = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B, y += Q8K_B) {
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		const int8_t *sc = (const int8_t *)(x + 192);
		int isum = 0;
		for (int h = 0; h < 2; h++) {
			for (int g = 0; g < 2; g++) { /* elements l = 16 g .. 16 g + 15 of each quarter */
				uint8x16_t q0 = vld1q_u8(x + 64 * h + 16 * g);
				uint8x16_t q1 = vld1q_u8(x + 64 * h + 32 + 16 * g);
				uint8x16_t hb = vld1q_u8(x + 128 + 32 * h + 16 * g);
				uint8x16_t c[4] = {
					vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
					vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
					vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
					vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
				};
				for (int k = 0; k < 4; k++) {
					const int e = 128 * h + 32 * k + 16 * g; /* first element, scale e / 16 */
					int8x16_t a = vsubq_s8(vreinterpretq_s8_u8(c[k]), s32);
					isum += sc[e / 16] * dot16s(a, q8 + e);
				}
			}
		}
		sumf += (h2f(x + 208) * kern_f32(y)) * (float)isum;
	}
	return sumf;
}

static float dot_iq4_xs(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	const int8x16_t kv = vld1q_s8(pt_kvalues_iq4nl);
	float sumf = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += IQ4XS_B, y += Q8K_B) {
		const float d4d8 = h2f(x) * kern_f32(y);
		const uint16_t h = kern_u16(x + 2);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((h >> (2 * ib)) & 3) << 4);
			const float dl = d4d8 * (float)(ls - 32);
			int sumi = table_sum(x + 8 + 16 * ib, kv, q8 + 32 * ib);
			sumf += dl * (float)sumi;
		}
	}
	return sumf;
}

const pt_kern_dot_fn PT_NEON_TABLE[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot_f32,       [PT_TYPE_F16] = dot_f16,       [PT_TYPE_BF16] = dot_bf16,
	[PT_TYPE_Q4_0] = dot_q4_0,     [PT_TYPE_Q4_1] = dot_q4_1,     [PT_TYPE_Q5_0] = dot_q5_0,
	[PT_TYPE_Q5_1] = dot_q5_1,     [PT_TYPE_Q8_0] = dot_q8_0,     [PT_TYPE_IQ4_NL] = dot_iq4_nl,
	[PT_TYPE_MXFP4] = dot_mxfp4,   [PT_TYPE_Q2_K] = dot_q2_k,     [PT_TYPE_Q3_K] = dot_q3_k,
	[PT_TYPE_Q4_K] = dot_q4_k,     [PT_TYPE_Q5_K] = dot_q5_k,     [PT_TYPE_Q6_K] = dot_q6_k,
	[PT_TYPE_IQ4_XS] = dot_iq4_xs,
};

const pt_kern_dot4_fn PT_NEON_DOT4_TABLE[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_0] = dot4_q4_0, [PT_TYPE_Q8_0] = dot4_q8_0,
	[PT_TYPE_Q4_K] = dot4_q4_k, [PT_TYPE_Q5_K] = dot4_q5_k,
};
