/* dot_scalar.c - the scalar reference dot products, one per weight type, paired with the
 * activation formats of GGUF-AND-QUANTS.md section 6.3.  Per-block integer sums are exact
 * (int32); the float combination follows ggml's *_generic kernels term for term (blocks in
 * order, `sumf` from 0, the 8-lane `sums[l]` accumulators of the K-quants), compiled without
 * FMA contraction.  F32/F16/BF16 accumulate products in double, like ggml's scalar path.
 * Every SIMD kernel is tested against these. */
#include "kern/kern_internal.h"

#include "quant/types.h"

static inline float f16(const uint8_t *p)
{
	return kern_fp16_to_f32(kern_u16(p));
}

static inline float bf16(const uint8_t *p)
{
	uint32_t bits = (uint32_t)kern_u16(p) << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static float dot_f32(size_t n, const void *vw, const void *va)
{
	const float *w = vw, *a = va;
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += (double)(w[i] * a[i]);
	return (float)sum;
}

static float dot_f16(size_t n, const void *vw, const void *va)
{
	const uint8_t *w = vw, *a = va;
	double sum = 0.0;
	for (size_t i = 0; i < n; i++) /* the product of two fp16 values is exact in float */
		sum += (double)(f16(w + 2 * i) * f16(a + 2 * i));
	return (float)sum;
}

static float dot_bf16(size_t n, const void *vw, const void *va)
{
	const uint8_t *w = vw, *a = va;
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += (double)(bf16(w + 2 * i) * bf16(a + 2 * i));
	return (float)sum;
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ---------------------------------------------- */

static float dot_q4_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_0_B, y += Q8_0_B) {
		const int8_t *q8 = (const int8_t *)(y + 2);
		int sumi0 = 0, sumi1 = 0;
		for (int j = 0; j < 16; j++) {
			sumi0 += ((x[2 + j] & 0xF) - 8) * q8[j];
			sumi1 += ((x[2 + j] >> 4) - 8) * q8[j + 16];
		}
		sumf += ((float)(sumi0 + sumi1) * f16(x)) * f16(y);
	}
	return sumf;
}

static float dot_q4_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q4_1_B, y += Q8_1_B) {
		const int8_t *q8 = (const int8_t *)(y + 4);
		int sumi = 0;
		for (int j = 0; j < 16; j++)
			sumi += (x[4 + j] & 0xF) * q8[j] + (x[4 + j] >> 4) * q8[j + 16];
		sumf += (f16(x) * f16(y)) * (float)sumi + f16(x + 2) * f16(y + 2);
	}
	return sumf;
}

static int q5_sum(const uint8_t *qs, uint32_t qh, const int8_t *q8, int bias)
{
	int sumi = 0;
	for (int j = 0; j < 16; j++) {
		int lo = (qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
		int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
		sumi += (lo - bias) * q8[j] + (hi - bias) * q8[j + 16];
	}
	return sumi;
}

static float dot_q5_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q5_0_B, y += Q8_0_B) {
		int sumi = q5_sum(x + 6, kern_u32(x + 2), (const int8_t *)(y + 2), 16);
		sumf += (f16(x) * f16(y)) * (float)sumi;
	}
	return sumf;
}

static float dot_q5_1(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q5_1_B, y += Q8_1_B) {
		int sumi = q5_sum(x + 8, kern_u32(x + 4), (const int8_t *)(y + 4), 0);
		sumf += (f16(x) * f16(y)) * (float)sumi + f16(x + 2) * f16(y + 2);
	}
	return sumf;
}

static float dot_q8_0(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += Q8_0_B, y += Q8_0_B) {
		const int8_t *qx = (const int8_t *)(x + 2), *qy = (const int8_t *)(y + 2);
		int sumi = 0;
		for (int j = 0; j < QK; j++)
			sumi += qx[j] * qy[j];
		sumf += (float)sumi * (f16(x) * f16(y));
	}
	return sumf;
}

static int table_sum(const uint8_t *qs, const int8_t *kv, const int8_t *q8)
{
	int sumi = 0;
	for (int j = 0; j < 16; j++)
		sumi += q8[j] * kv[qs[j] & 0xF] + q8[j + 16] * kv[qs[j] >> 4];
	return sumi;
}

static float dot_iq4_nl(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += IQ4NL_B, y += Q8_0_B) {
		int sumi = table_sum(x + 2, pt_kvalues_iq4nl, (const int8_t *)(y + 2));
		sumf += (f16(y) * f16(x)) * (float)sumi;
	}
	return sumf;
}

static float dot_mxfp4(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t ib = 0; ib < n / QK; ib++, x += MXFP4_B, y += Q8_0_B) {
		const float d = f16(y) * kern_e8m0_half(x[0]);
		int sumi = table_sum(x + 1, pt_kvalues_mxfp4, (const int8_t *)(y + 2));
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
		const uint8_t *sc = x, *q2 = x + 16;
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		int summs = 0;
		for (int j = 0; j < 16; j++)
			summs += kern_i16(y + Q8K_BSUMS + 2 * j) * (sc[j] >> 4);
		const float dall = kern_f32(y) * f16(x + 80);
		const float dmin = kern_f32(y) * f16(x + 82);
		int isum = 0, is = 0;
		for (int k = 0; k < 2; k++, q2 += 32) {
			for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
				for (int half = 0; half < 2; half++) {
					int d = sc[is++] & 0xF, isuml = 0;
					for (int l = 16 * half; l < 16 * half + 16; l++)
						isuml += q8[l] * ((q2[l] >> shift) & 3);
					isum += d * isuml;
				}
			}
		}
		sumf += dall * (float)isum - dmin * (float)summs;
	}
	return sumf;
}

/* Decoded levels in element order with one scale per 16 elements, combined the generic way:
 * 8 int32 lanes (element index mod 8) per super-block, then sums[l] += d * aux[l]. */
static void lanes_accumulate(const int8_t *a, const int8_t *q8, const int *scale16, float d,
			     float sums[8])
{
	int32_t aux32[8] = { 0 };
	for (int j = 0; j < QKK / 16; j++) {
		for (int g = 0; g < 2; g++) {
			for (int l = 0; l < 8; l++)
				aux32[l] += scale16[j] * (q8[16 * j + 8 * g + l] * a[16 * j + 8 * g + l]);
		}
	}
	for (int l = 0; l < 8; l++)
		sums[l] += d * (float)aux32[l];
}

static float lanes_total(float sumf, const float sums[8])
{
	for (int l = 0; l < 8; l++)
		sumf += sums[l];
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
	float sums[8] = { 0 };
	for (size_t i = 0; i < n / QKK; i++, x += Q3K_B, y += Q8K_B) {
		int8_t a[QKK];
		int scale16[16];
		for (int e = 0; e < QKK; e++) {
			int h = e / 128, j = (e % 128) / 32, l = e % 32;
			int low2 = (x[32 + 32 * h + l] >> (2 * j)) & 3;
			int hbit = (x[e % 32] >> (e / 32)) & 1;
			a[e] = (int8_t)(low2 - (hbit ? 0 : 4));
		}
		for (int b = 0; b < 16; b++)
			scale16[b] = q3k_scale(x + 96, b);
		lanes_accumulate(a, (const int8_t *)(y + Q8K_QS), scale16, f16(x + 108) * kern_f32(y),
				 sums);
	}
	return lanes_total(0.0f, sums);
}

/* Q4_K (qh == NULL) and Q5_K share everything but the fifth bit. */
static float dot_q45_k(size_t n, const uint8_t *x, const uint8_t *y, int five)
{
	float sums[8] = { 0 }, sumf = 0.0f;
	const size_t bb = five ? Q5K_B : Q4K_B;
	for (size_t i = 0; i < n / QKK; i++, x += bb, y += Q8K_B) {
		const uint8_t *qh = x + 16, *qs = x + (five ? 48 : 16);
		int8_t a[QKK];
		int scale16[16], sumi = 0;
		for (int c = 0; c < 4; c++) {
			for (int l = 0; l < 32; l++) {
				int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
				if (five) {
					lo += 16 * ((qh[l] >> (2 * c)) & 1);
					hi += 16 * ((qh[l] >> (2 * c + 1)) & 1);
				}
				a[64 * c + l] = (int8_t)lo;
				a[64 * c + 32 + l] = (int8_t)hi;
			}
		}
		for (int j = 0; j < 8; j++) {
			uint8_t sc, m;
			kern_q4k_scale_min(x + 4, j, &sc, &m);
			scale16[2 * j] = scale16[2 * j + 1] = sc;
			sumi += (kern_i16(y + Q8K_BSUMS + 4 * j) + kern_i16(y + Q8K_BSUMS + 4 * j + 2)) * m;
		}
		lanes_accumulate(a, (const int8_t *)(y + Q8K_QS), scale16, f16(x) * kern_f32(y), sums);
		const float dmin = f16(x + 2) * kern_f32(y);
		sumf -= dmin * (float)sumi;
	}
	return lanes_total(sumf, sums);
}

static float dot_q4_k(size_t n, const void *w, const void *a)
{
	return dot_q45_k(n, w, a, 0);
}

static float dot_q5_k(size_t n, const void *w, const void *a)
{
	return dot_q45_k(n, w, a, 1);
}

static float dot_q6_k(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sums[8] = { 0 };
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B, y += Q8K_B) {
		const uint8_t *ql = x, *qh = x + 128;
		int8_t a[QKK];
		int scale16[16];
		for (int h = 0; h < 2; h++) {
			for (int l = 0; l < 32; l++) {
				int hb = qh[32 * h + l];
				const uint8_t *q = ql + 64 * h;
				a[128 * h + l] = (int8_t)(((q[l] & 0xF) | ((hb & 3) << 4)) - 32);
				a[128 * h + 32 + l] = (int8_t)(((q[l + 32] & 0xF) | (((hb >> 2) & 3) << 4)) - 32);
				a[128 * h + 64 + l] = (int8_t)(((q[l] >> 4) | (((hb >> 4) & 3) << 4)) - 32);
				a[128 * h + 96 + l] = (int8_t)(((q[l + 32] >> 4) | (((hb >> 6) & 3) << 4)) - 32);
			}
		}
		for (int b = 0; b < 16; b++)
			scale16[b] = (int8_t)x[192 + b];
		lanes_accumulate(a, (const int8_t *)(y + Q8K_QS), scale16, f16(x + 208) * kern_f32(y),
				 sums);
	}
	return lanes_total(0.0f, sums);
}

static float dot_iq4_xs(size_t n, const void *vw, const void *va)
{
	const uint8_t *x = vw, *y = va;
	float sumf = 0.0f;
	for (size_t i = 0; i < n / QKK; i++, x += IQ4XS_B, y += Q8K_B) {
		const float d4d8 = f16(x) * kern_f32(y);
		const uint16_t h = kern_u16(x + 2);
		const int8_t *q8 = (const int8_t *)(y + Q8K_QS);
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((h >> (2 * ib)) & 3) << 4);
			const float dl = d4d8 * (float)(ls - 32);
			int sumi = table_sum(x + 8 + 16 * ib, pt_kvalues_iq4nl, q8 + 32 * ib);
			sumf += dl * (float)sumi;
		}
	}
	return sumf;
}

const pt_kern_dot_fn pt_kern_dot_scalar[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = dot_f32,       [PT_TYPE_F16] = dot_f16,       [PT_TYPE_BF16] = dot_bf16,
	[PT_TYPE_Q4_0] = dot_q4_0,     [PT_TYPE_Q4_1] = dot_q4_1,     [PT_TYPE_Q5_0] = dot_q5_0,
	[PT_TYPE_Q5_1] = dot_q5_1,     [PT_TYPE_Q8_0] = dot_q8_0,     [PT_TYPE_IQ4_NL] = dot_iq4_nl,
	[PT_TYPE_MXFP4] = dot_mxfp4,   [PT_TYPE_Q2_K] = dot_q2_k,     [PT_TYPE_Q3_K] = dot_q3_k,
	[PT_TYPE_Q4_K] = dot_q4_k,     [PT_TYPE_Q5_K] = dot_q5_k,     [PT_TYPE_Q6_K] = dot_q6_k,
	[PT_TYPE_IQ4_XS] = dot_iq4_xs,
};
