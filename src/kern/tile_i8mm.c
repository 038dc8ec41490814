/* tile_i8mm.c - aarch64 register tiles with SMMLA (vmmlaq_s32, FEAT_I8MM): 2 weight rows x
 * up to 4 tokens per call for Q8_0, Q4_0, Q5_0, Q4_K and Q6_K, the prefill types (the other
 * types take the dotprod level's NEON tile or dot4: dot_neon_impl.h).  One SMMLA multiplies
 * a 2x8 int8 block of weight codes (two rows' next 8 codes) by the transposed 2x8 block of
 * two tokens' activations into the four int32 dot products of the pair, so each decoded
 * weight chunk serves every token and each activation chunk both rows.  The per-block
 * integer sums are exact (the same integers as the dot), and their float combination is
 * dot_neon_impl.h's for the type in the same order, so every output is bit-identical to the
 * dotprod level's dot, which the i8mm level runs (tests/unit/test_kern.c
 * test_kern_tile_matches_dot, under qemu -cpu max).  Compiled with the Makefile's ISA_I8MM
 * and reached only when dispatch.c found HWCAP2_I8MM. */
#include <arm_neon.h>

#include "kern/kern_internal.h"

#define ROWS 2
#define TOKS 4

static inline float h2f(const uint8_t *p)
{
	return kern_fp16_to_f32(kern_u16(p));
}

/* acc[0] += [w0.t0, w0.t1, w1.t0, w1.t1], acc[1] += [w0.t2, w0.t3, w1.t2, w1.t3] over 32
 * codes: w0 / w1 the rows' codes (elements 0-15, 16-31), t[k] token k's 32 activations. */
static inline void mm32(int8x16_t w0a, int8x16_t w0b, int8x16_t w1a, int8x16_t w1b,
			const int8_t *const t[TOKS], int32x4_t acc[2])
{
	const int64x2_t r0a = vreinterpretq_s64_s8(w0a), r0b = vreinterpretq_s64_s8(w0b);
	const int64x2_t r1a = vreinterpretq_s64_s8(w1a), r1b = vreinterpretq_s64_s8(w1b);
	const int8x16_t wa0 = vreinterpretq_s8_s64(vzip1q_s64(r0a, r1a));
	const int8x16_t wa1 = vreinterpretq_s8_s64(vzip2q_s64(r0a, r1a));
	const int8x16_t wb0 = vreinterpretq_s8_s64(vzip1q_s64(r0b, r1b));
	const int8x16_t wb1 = vreinterpretq_s8_s64(vzip2q_s64(r0b, r1b));
	for (int p = 0; p < 2; p++) {
		const int64x2_t xa = vreinterpretq_s64_s8(vld1q_s8(t[2 * p]));
		const int64x2_t xb = vreinterpretq_s64_s8(vld1q_s8(t[2 * p] + 16));
		const int64x2_t ya = vreinterpretq_s64_s8(vld1q_s8(t[2 * p + 1]));
		const int64x2_t yb = vreinterpretq_s64_s8(vld1q_s8(t[2 * p + 1] + 16));
		int32x4_t a = acc[p];
		a = vmmlaq_s32(a, wa0, vreinterpretq_s8_s64(vzip1q_s64(xa, ya)));
		a = vmmlaq_s32(a, wa1, vreinterpretq_s8_s64(vzip2q_s64(xa, ya)));
		a = vmmlaq_s32(a, wb0, vreinterpretq_s8_s64(vzip1q_s64(xb, yb)));
		a = vmmlaq_s32(a, wb1, vreinterpretq_s8_s64(vzip2q_s64(xb, yb)));
		acc[p] = a;
	}
}

/* mm32 over 16 codes (Q6_K's scale groups): w0 / w1 the rows' codes, t[k] token k's 16
 * activations; acc[0] = [w0.t0, w0.t1, w1.t0, w1.t1], acc[1] the same for tokens 2, 3. */
static inline void mm16(int8x16_t w0, int8x16_t w1, const int8_t *const t[TOKS], int32x4_t acc[2])
{
	const int64x2_t r0 = vreinterpretq_s64_s8(w0), r1 = vreinterpretq_s64_s8(w1);
	const int8x16_t wa = vreinterpretq_s8_s64(vzip1q_s64(r0, r1));
	const int8x16_t wb = vreinterpretq_s8_s64(vzip2q_s64(r0, r1));
	for (int p = 0; p < 2; p++) {
		const int64x2_t xa = vreinterpretq_s64_s8(vld1q_s8(t[2 * p]));
		const int64x2_t ya = vreinterpretq_s64_s8(vld1q_s8(t[2 * p + 1]));
		int32x4_t a = vmmlaq_s32(acc[p], wa, vreinterpretq_s8_s64(vzip1q_s64(xa, ya)));
		acc[p] = vmmlaq_s32(a, wb, vreinterpretq_s8_s64(vzip2q_s64(xa, ya)));
	}
}

/* The int32 sum of row r, token k from mm32's accumulators. */
static inline int32_t lane(const int32x4_t acc[2], int r, int k)
{
	int32_t v[4];
	vst1q_s32(v, acc[k / 2]);
	return v[2 * r + k % 2];
}

/* Rows and tokens beyond the call's counts read the last valid one (results dropped). */
static inline void setup(const uint8_t *w, size_t w_stride, uint32_t n_rows, const uint8_t *a,
			 size_t a_stride, uint32_t n_tok, const uint8_t *wr[ROWS],
			 const uint8_t *at[TOKS])
{
	for (uint32_t r = 0; r < ROWS; r++)
		wr[r] = w + (r < n_rows ? r : n_rows - 1) * w_stride;
	for (uint32_t k = 0; k < TOKS; k++)
		at[k] = a + (k < n_tok ? k : n_tok - 1) * a_stride;
}

static inline void store(float s[ROWS][TOKS], uint32_t n_rows, uint32_t n_tok, float *y,
			 size_t y_stride)
{
	for (uint32_t k = 0; k < n_tok; k++)
		for (uint32_t r = 0; r < n_rows; r++)
			y[k * y_stride + r] = s[r][k];
}

static void tile_q8_0(size_t n, const void *w, size_t w_stride, uint32_t n_rows, const void *a,
		      size_t a_stride, uint32_t n_tok, float *y, size_t y_stride)
{
	const uint8_t *x[ROWS], *q[TOKS];
	setup(w, w_stride, n_rows, a, a_stride, n_tok, x, q);
	float s[ROWS][TOKS] = { { 0 } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		const size_t o = ib * Q8_0_B;
		const int8_t *t[TOKS];
		for (int k = 0; k < TOKS; k++)
			t[k] = (const int8_t *)(q[k] + o + 2);
		int32x4_t acc[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		mm32(vld1q_s8((const int8_t *)(x[0] + o + 2)), vld1q_s8((const int8_t *)(x[0] + o + 18)),
		     vld1q_s8((const int8_t *)(x[1] + o + 2)), vld1q_s8((const int8_t *)(x[1] + o + 18)),
		     t, acc);
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < TOKS; k++) /* dot_q8_0's order */
				s[r][k] += (float)lane(acc, r, k) * (h2f(x[r] + o) * h2f(q[k] + o));
	}
	store(s, n_rows, n_tok, y, y_stride);
}

static void tile_q4_0(size_t n, const void *w, size_t w_stride, uint32_t n_rows, const void *a,
		      size_t a_stride, uint32_t n_tok, float *y, size_t y_stride)
{
	const uint8_t *x[ROWS], *q[TOKS];
	setup(w, w_stride, n_rows, a, a_stride, n_tok, x, q);
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	const int8x16_t s8 = vdupq_n_s8(8);
	float s[ROWS][TOKS] = { { 0 } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		const size_t ow = ib * Q4_0_B, oa = ib * Q8_0_B;
		int8x16_t lo[ROWS], hi[ROWS];
		for (int r = 0; r < ROWS; r++) {
			const uint8x16_t raw = vld1q_u8(x[r] + ow + 2);
			lo[r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, m4)), s8);
			hi[r] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), s8);
		}
		const int8_t *t[TOKS];
		for (int k = 0; k < TOKS; k++)
			t[k] = (const int8_t *)(q[k] + oa + 2);
		int32x4_t acc[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		mm32(lo[0], hi[0], lo[1], hi[1], t, acc);
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < TOKS; k++) /* dot_q4_0's order */
				s[r][k] += ((float)lane(acc, r, k) * h2f(x[r] + ow)) * h2f(q[k] + oa);
	}
	store(s, n_rows, n_tok, y, y_stride);
}

/* Bits 0-15 of b as 16 bytes 0x10 / 0x00 (the fifth bit of Q5_0 codes; dot_neon_impl.h). */
static inline uint8x16_t bit5_16(uint32_t b)
{
	static const uint8_t m[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
	uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)b), vdup_n_u8((uint8_t)(b >> 8)));
	return vandq_u8(vtstq_u8(v, vld1q_u8(m)), vdupq_n_u8(0x10));
}

static void tile_q5_0(size_t n, const void *w, size_t w_stride, uint32_t n_rows, const void *a,
		      size_t a_stride, uint32_t n_tok, float *y, size_t y_stride)
{
	const uint8_t *x[ROWS], *q[TOKS];
	setup(w, w_stride, n_rows, a, a_stride, n_tok, x, q);
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	const int8x16_t s16 = vdupq_n_s8(16);
	float s[ROWS][TOKS] = { { 0 } };
	for (size_t ib = 0; ib < n / QK; ib++) {
		const size_t ow = ib * Q5_0_B, oa = ib * Q8_0_B;
		int8x16_t lo[ROWS], hi[ROWS];
		for (int r = 0; r < ROWS; r++) {
			const uint32_t qh = kern_u32(x[r] + ow + 2);
			const uint8x16_t raw = vld1q_u8(x[r] + ow + 6);
			const uint8x16_t l = vorrq_u8(vandq_u8(raw, m4), bit5_16(qh));
			const uint8x16_t h = vorrq_u8(vshrq_n_u8(raw, 4), bit5_16(qh >> 16));
			lo[r] = vsubq_s8(vreinterpretq_s8_u8(l), s16);
			hi[r] = vsubq_s8(vreinterpretq_s8_u8(h), s16);
		}
		const int8_t *t[TOKS];
		for (int k = 0; k < TOKS; k++)
			t[k] = (const int8_t *)(q[k] + oa + 2);
		int32x4_t acc[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		mm32(lo[0], hi[0], lo[1], hi[1], t, acc);
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < TOKS; k++) /* dot_q5_0's order */
				s[r][k] += (h2f(x[r] + ow) * h2f(q[k] + oa)) * (float)lane(acc, r, k);
	}
	store(s, n_rows, n_tok, y, y_stride);
}

static void tile_q4_k(size_t n, const void *w, size_t w_stride, uint32_t n_rows, const void *a,
		      size_t a_stride, uint32_t n_tok, float *y, size_t y_stride)
{
	const uint8_t *x[ROWS], *q[TOKS];
	setup(w, w_stride, n_rows, a, a_stride, n_tok, x, q);
	const uint8x16_t m4 = vdupq_n_u8(0xF);
	float s[ROWS][TOKS] = { { 0 } };
	for (size_t i = 0; i < n / QKK; i++) {
		const size_t ow = i * Q4K_B, oa = i * Q8K_B;
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		int summ[ROWS][TOKS] = { { 0 } };
		for (int c = 0; c < 4; c++) {
			uint8_t sc[ROWS][2], mn[ROWS][2];
			int8x16_t lo[ROWS][2], hi[ROWS][2];
			for (int r = 0; r < ROWS; r++) {
				kern_q4k_scale_min(x[r] + ow + 4, 2 * c, &sc[r][0], &mn[r][0]);
				kern_q4k_scale_min(x[r] + ow + 4, 2 * c + 1, &sc[r][1], &mn[r][1]);
				for (int g = 0; g < 2; g++) {
					const uint8x16_t raw = vld1q_u8(x[r] + ow + 16 + 32 * c + 16 * g);
					lo[r][g] = vreinterpretq_s8_u8(vandq_u8(raw, m4));
					hi[r][g] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
				}
			}
			for (int half = 0; half < 2; half++) { /* low nibbles, then high nibbles */
				const int8_t *t[TOKS];
				for (int k = 0; k < TOKS; k++)
					t[k] = (const int8_t *)(q[k] + oa + Q8K_QS) + 64 * c + 32 * half;
				int32x4_t acc[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
				if (half == 0)
					mm32(lo[0][0], lo[0][1], lo[1][0], lo[1][1], t, acc);
				else
					mm32(hi[0][0], hi[0][1], hi[1][0], hi[1][1], t, acc);
				/* lanes [r0 r0 r1 r1]: the rows' sub-block scales (exact integers) */
				const int32_t scv[4] = { sc[0][half], sc[0][half], sc[1][half], sc[1][half] };
				const int32x4_t sv = vld1q_s32(scv);
				isum[0] = vmlaq_s32(isum[0], acc[0], sv);
				isum[1] = vmlaq_s32(isum[1], acc[1], sv);
			}
			for (int k = 0; k < TOKS; k++) {
				const uint8_t *bs = q[k] + oa + Q8K_BSUMS + 8 * c;
				const int lo_s = kern_i16(bs) + kern_i16(bs + 2);
				const int hi_s = kern_i16(bs + 4) + kern_i16(bs + 6);
				for (int r = 0; r < ROWS; r++)
					summ[r][k] += lo_s * mn[r][0] + hi_s * mn[r][1];
			}
		}
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < TOKS; k++) { /* q45_k_body's order */
				const float d8 = kern_f32(q[k] + oa);
				s[r][k] += (h2f(x[r] + ow) * d8) * (float)lane(isum, r, k);
				s[r][k] -= (h2f(x[r] + ow + 2) * d8) * (float)summ[r][k];
			}
	}
	store(s, n_rows, n_tok, y, y_stride);
}

/* Q6_K half h of a super-block: groups j = 2 q + g (quarter q, elements 16 g .. 16 g + 15),
 * the codes minus 32 (dot_neon_impl.h's q6_k_half). */
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
		for (int qq = 0; qq < 4; qq++)
			c[2 * qq + g] = vsubq_s8(vreinterpretq_s8_u8(u[qq]), s32);
	}
}

static void tile_q6_k(size_t n, const void *w, size_t w_stride, uint32_t n_rows, const void *a,
		      size_t a_stride, uint32_t n_tok, float *y, size_t y_stride)
{
	const uint8_t *x[ROWS], *q[TOKS];
	setup(w, w_stride, n_rows, a, a_stride, n_tok, x, q);
	float s[ROWS][TOKS] = { { 0 } };
	for (size_t i = 0; i < n / QKK; i++) {
		const size_t ow = i * Q6K_B, oa = i * Q8K_B;
		const int8_t *sc0 = (const int8_t *)(x[0] + ow + 192);
		const int8_t *sc1 = (const int8_t *)(x[1] + ow + 192);
		int32x4_t isum[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
		for (int h = 0; h < 2; h++) {
			int8x16_t c[ROWS][8];
			for (int r = 0; r < ROWS; r++)
				q6_k_half(x[r] + ow, h, c[r]);
			for (int j = 0; j < 8; j++) {
				const int8_t *t[TOKS];
				for (int k = 0; k < TOKS; k++)
					t[k] = (const int8_t *)(q[k] + oa + Q8K_QS) + 128 * h + 16 * j;
				int32x4_t acc[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
				mm16(c[0][j], c[1][j], t, acc);
				/* lanes [r0 r0 r1 r1]: the rows' group scales (exact integers) */
				const int32_t scv[4] = { sc0[8 * h + j], sc0[8 * h + j], sc1[8 * h + j],
							 sc1[8 * h + j] };
				const int32x4_t sv = vld1q_s32(scv);
				isum[0] = vmlaq_s32(isum[0], acc[0], sv);
				isum[1] = vmlaq_s32(isum[1], acc[1], sv);
			}
		}
		for (int r = 0; r < ROWS; r++)
			for (int k = 0; k < TOKS; k++) /* q6_k_body's order */
				s[r][k] += (h2f(x[r] + ow + 208) * kern_f32(q[k] + oa)) *
					   (float)lane(isum, r, k);
	}
	store(s, n_rows, n_tok, y, y_stride);
}

const struct pt_kern_tile pt_kern_tile_i8mm[PT_TYPE_COUNT] = {
	[PT_TYPE_Q8_0] = { .fn = tile_q8_0, .rows = ROWS, .toks = TOKS },
	[PT_TYPE_Q4_0] = { .fn = tile_q4_0, .rows = ROWS, .toks = TOKS },
	[PT_TYPE_Q4_K] = { .fn = tile_q4_k, .rows = ROWS, .toks = TOKS },
	[PT_TYPE_Q5_0] = { .fn = tile_q5_0, .rows = ROWS, .toks = TOKS },
	[PT_TYPE_Q6_K] = { .fn = tile_q6_k, .rows = ROWS, .toks = TOKS },
};
