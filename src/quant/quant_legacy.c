/* quant_legacy.c - the 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4.
 * Dequantizers and ggml's reference quantizers (GGUF-AND-QUANTS.md section 4, 5.8).  The
 * quantizers mirror ggml's rounding primitive per format: truncating casts for Q4/Q5,
 * roundf for Q8_0, nearest_int / best-index searches for IQ4_NL; every float operation is
 * evaluated separately and in ggml's order so the bytes match (the build has no FMA
 * contraction). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant_internal.h"
#include "quant/types.h"

int pt_quant_best_index_int8(int n, const int8_t *val, float x)
{
	if (x <= val[0])
		return 0;
	if (x >= val[n - 1])
		return n - 1;
	int ml = 0, mu = n - 1;
	while (mu - ml > 1) {
		int mav = (ml + mu) / 2;
		if (x < val[mav])
			mu = mav;
		else
			ml = mav;
	}
	return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* ggml's (int8_t)/(uint8_t) casts of a float, made defined: x86 converts through a 32-bit
 * cvttss2si, whose out-of-range answer 0x80000000 truncates to 0.  Reachable only when a
 * block's max is subnormal, so 1/d overflows (the stored fp16 scale is then 0 anyway). */
static inline int32_t trunc_i32(float v)
{
	return v > -2147483648.f && v < 2147483648.f ? (int32_t)v : INT32_MIN;
}

static inline int8_t trunc_i8(float v)
{
	return (int8_t)(uint8_t)((uint32_t)trunc_i32(v) & 0xFF);
}

/* Signed value of the largest |x| (first occurrence) and that magnitude. */
static float signed_absmax(const float *x, int n, float *amax_out)
{
	float amax = 0, max = 0;
	for (int j = 0; j < n; j++) {
		float ax = fabsf(x[j]);
		if (amax < ax) {
			amax = ax;
			max = x[j];
		}
	}
	*amax_out = amax;
	return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
	float lo = FLT_MAX, hi = -FLT_MAX;
	for (int j = 0; j < n; j++) {
		if (x[j] < lo)
			lo = x[j];
		if (x[j] > hi)
			hi = x[j];
	}
	*mn = lo;
	*mx = hi;
}

void pt_quant_dequant_q4_0(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q4_0 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK4_0) {
		float d = pt_fp16_to_f32(b->d);
		for (int j = 0; j < PT_QK4_0 / 2; j++) {
			dst[j] = (float)((b->qs[j] & 0xF) - 8) * d;
			dst[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
		}
	}
}

void pt_quant_quantize_q4_0(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q4_0 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK4_0) {
		float amax;
		float max = signed_absmax(x, PT_QK4_0, &amax);
		float d = max / -8;
		float id = d ? 1.0f / d : 0.0f;
		y->d = pt_f32_to_fp16(d);
		for (int j = 0; j < PT_QK4_0 / 2; j++) {
			int8_t v0 = trunc_i8(x[j] * id + 8.5f);
			int8_t v1 = trunc_i8(x[j + 16] * id + 8.5f);
			uint8_t q0 = (uint8_t)(v0 < 15 ? v0 : 15), q1 = (uint8_t)(v1 < 15 ? v1 : 15);
			y->qs[j] = (uint8_t)(q0 | (q1 << 4));
		}
	}
}

void pt_quant_dequant_q4_1(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q4_1 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK4_1) {
		float d = pt_fp16_to_f32(b->d), m = pt_fp16_to_f32(b->m);
		for (int j = 0; j < PT_QK4_1 / 2; j++) {
			dst[j] = (float)(b->qs[j] & 0xF) * d + m;
			dst[j + 16] = (float)(b->qs[j] >> 4) * d + m;
		}
	}
}

void pt_quant_quantize_q4_1(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q4_1 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK4_1) {
		float min, max;
		min_max(x, PT_QK4_1, &min, &max);
		float d = (max - min) / 15;
		float id = d ? 1.0f / d : 0.0f;
		y->d = pt_f32_to_fp16(d);
		y->m = pt_f32_to_fp16(min);
		for (int j = 0; j < PT_QK4_1 / 2; j++) {
			int8_t v0 = trunc_i8((x[j] - min) * id + 0.5f);
			int8_t v1 = trunc_i8((x[j + 16] - min) * id + 0.5f);
			uint8_t q0 = (uint8_t)(v0 < 15 ? v0 : 15), q1 = (uint8_t)(v1 < 15 ? v1 : 15);
			y->qs[j] = (uint8_t)(q0 | (q1 << 4));
		}
	}
}

static void dequant_q5(const uint8_t *qs, uint32_t qh, float d, float m, int bias, float *dst)
{
	for (int j = 0; j < 16; j++) {
		int q0 = (qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
		int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
		if (bias) {
			dst[j] = (float)(q0 - 16) * d;
			dst[j + 16] = (float)(q1 - 16) * d;
		} else {
			dst[j] = (float)q0 * d + m;
			dst[j + 16] = (float)q1 * d + m;
		}
	}
}

void pt_quant_dequant_q5_0(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q5_0 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK5_0) {
		uint32_t qh;
		memcpy(&qh, b->qh, 4);
		dequant_q5(b->qs, qh, pt_fp16_to_f32(b->d), 0, 1, dst);
	}
}

void pt_quant_dequant_q5_1(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q5_1 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK5_1) {
		uint32_t qh;
		memcpy(&qh, b->qh, 4);
		dequant_q5(b->qs, qh, pt_fp16_to_f32(b->d), pt_fp16_to_f32(b->m), 0, dst);
	}
}

/* Pack 32 five-bit levels: low nibbles into qs, bit 4 into qh (element j -> bit j). */
static void pack_q5(const int *q, uint8_t *qs, uint8_t *qh_out)
{
	uint32_t qh = 0;
	for (int j = 0; j < 16; j++) {
		qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
		qh |= (uint32_t)((q[j] & 0x10) >> 4) << j;
		qh |= (uint32_t)((q[j + 16] & 0x10) >> 4) << (j + 16);
	}
	memcpy(qh_out, &qh, 4);
}

void pt_quant_quantize_q5_0(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q5_0 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK5_0) {
		float amax;
		float max = signed_absmax(x, PT_QK5_0, &amax);
		float d = max / -16;
		float id = d ? 1.0f / d : 0.0f;
		int q[PT_QK5_0];
		y->d = pt_f32_to_fp16(d);
		for (int j = 0; j < PT_QK5_0; j++) {
			int8_t v = trunc_i8(x[j] * id + 16.5f);
			q[j] = v < 31 ? v : 31;
		}
		pack_q5(q, y->qs, y->qh);
	}
}

void pt_quant_quantize_q5_1(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q5_1 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK5_1) {
		float min, max;
		min_max(x, PT_QK5_1, &min, &max);
		float d = (max - min) / 31;
		float id = d ? 1.0f / d : 0.0f;
		int q[PT_QK5_1];
		y->d = pt_f32_to_fp16(d);
		y->m = pt_f32_to_fp16(min);
		for (int j = 0; j < PT_QK5_1; j++)
			q[j] = (uint8_t)trunc_i8((x[j] - min) * id + 0.5f);
		pack_q5(q, y->qs, y->qh);
	}
}

void pt_quant_dequant_q8_0(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q8_0 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK8_0) {
		float d = pt_fp16_to_f32(b->d);
		for (int j = 0; j < PT_QK8_0; j++)
			dst[j] = (float)b->qs[j] * d;
	}
}

void pt_quant_quantize_q8_0(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q8_0 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK8_0) {
		float amax = 0;
		for (int j = 0; j < PT_QK8_0; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127;
		float id = d ? 1.0f / d : 0.0f;
		y->d = pt_f32_to_fp16(d);
		for (int j = 0; j < PT_QK8_0; j++)
			y->qs[j] = trunc_i8(roundf(x[j] * id));
	}
}

void pt_quant_dequant_iq4_nl(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_iq4_nl *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK4_NL) {
		float d = pt_fp16_to_f32(b->d);
		for (int j = 0; j < PT_QK4_NL / 2; j++) {
			dst[j] = d * (float)pt_kvalues_iq4nl[b->qs[j] & 0xF];
			dst[j + 16] = d * (float)pt_kvalues_iq4nl[b->qs[j] >> 4];
		}
	}
}

/* Weighted fit of the IQ4 table to x at inverse scale id: the codes, sum w*q*x, sum w*q*q. */
static void iq4_fit(const float *x, const float *w, float id, uint8_t *L, float *sqx,
		    float *sq2)
{
	float sumqx = 0, sumq2 = 0;
	for (int j = 0; j < 32; j++) {
		int l = pt_quant_best_index_int8(16, pt_kvalues_iq4nl, id * x[j]);
		float q = pt_kvalues_iq4nl[l];
		if (L)
			L[j] = (uint8_t)l;
		sumqx += w[j] * q * x[j];
		sumq2 += w[j] * q * q;
	}
	*sqx = sumqx;
	*sq2 = sumq2;
}

float pt_quant_iq4_block_scale(const float *x, uint8_t *L)
{
	const int ntry = 7;
	float w[32], amax, sumqx, sumq2;
	float max = signed_absmax(x, 32, &amax);
	for (int j = 0; j < 32; j++)
		w[j] = x[j] * x[j];
	if (amax < PT_GROUP_MAX_EPS)
		return 0;
	float d = -max / pt_kvalues_iq4nl[0];
	iq4_fit(x, w, 1 / d, L, &sumqx, &sumq2);
	d = sumq2 > 0 ? sumqx / sumq2 : 0;
	float best = d * sumqx;
	for (int itry = -ntry; itry <= ntry; itry++) {
		float id = (float)(itry + pt_kvalues_iq4nl[0]) / max;
		iq4_fit(x, w, id, NULL, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			d = sumqx / sumq2;
			best = d * sumqx;
		}
	}
	return d;
}

void pt_quant_quantize_iq4_nl(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_iq4_nl *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK4_NL) {
		uint8_t L[32];
		float d = pt_quant_iq4_block_scale(x, L);
		float id = d ? 1 / d : 0;
		y->d = pt_f32_to_fp16(d);
		for (int j = 0; j < 32; j++)
			L[j] = (uint8_t)pt_quant_best_index_int8(16, pt_kvalues_iq4nl, id * x[j]);
		for (int j = 0; j < 16; j++)
			y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
	}
}

void pt_quant_dequant_mxfp4(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_mxfp4 *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_MXFP4) {
		float d = pt_e8m0_to_f32_half(b->e);
		for (int j = 0; j < PT_QK_MXFP4 / 2; j++) {
			dst[j] = (float)pt_kvalues_mxfp4[b->qs[j] & 0xF] * d;
			dst[j + 16] = (float)pt_kvalues_mxfp4[b->qs[j] >> 4] * d;
		}
	}
}

/* First table index minimising |kv[i]*d - x|. */
static int best_index_mxfp4(float x, float d)
{
	int best = 0;
	float best_err = fabsf((float)pt_kvalues_mxfp4[0] * d - x);
	for (int i = 1; i < 16; i++) {
		float err = fabsf((float)pt_kvalues_mxfp4[i] * d - x);
		if (err < best_err) {
			best = i;
			best_err = err;
		}
	}
	return best;
}

void pt_quant_quantize_mxfp4(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_mxfp4 *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_MXFP4) {
		float amax = 0;
		for (int j = 0; j < PT_QK_MXFP4; j++)
			if (amax < fabsf(x[j]))
				amax = fabsf(x[j]);
		float e = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0;
		/* Below 0 (max |x| < 2^-125) ggml's cast wraps on x86, giving a huge scale and
		 * all-zero codes; the one wrap to 0xFF, which ggml's own validator rejects, is
		 * stored as 0xFE instead (same zero codes and values). */
		uint8_t eb = (uint8_t)((uint32_t)trunc_i32(e) & 0xFF);
		y->e = eb == 0xFF ? 0xFE : eb;
		float d = pt_e8m0_to_f32_half(y->e);
		for (int j = 0; j < PT_QK_MXFP4 / 2; j++) {
			int q0 = best_index_mxfp4(x[j], d);
			int q1 = best_index_mxfp4(x[j + 16], d);
			y->qs[j] = (uint8_t)(q0 | (q1 << 4));
		}
	}
}
