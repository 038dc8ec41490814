/* quant_k.c - the 256-element super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
 * Dequantizers, ggml's search helpers (make_qx/q3/qkx2_quants) and its reference
 * quantizers without importance matrix (GGUF-AND-QUANTS.md section 5).  Operation order and
 * rounding (nearest_int = half to even) follow ggml exactly; see quant_legacy.c's header. */
#include <math.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant_internal.h"
#include "quant/types.h"

#define NEAREST pt_quant_nearest_int

static inline int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- search helpers (5.1) --------------------------------------------------------------- */

static float signed_absmax(const float *x, int n, float *amax_out)
{
	float amax = 0, max = 0;
	for (int i = 0; i < n; i++) {
		float ax = fabsf(x[i]);
		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	*amax_out = amax;
	return max;
}

static float qx_weight(const float *qw, int rmse_type, const float *x, int i)
{
	if (qw)
		return qw[i];
	switch (rmse_type) {
	case 1: return x[i] * x[i];
	case 2: return 1;
	case 3: return fabsf(x[i]);
	default: return sqrtf(fabsf(x[i]));
	}
}

/* sum w*x*l and sum w*l*l over levels at inverse scale iscale; stores biased L if asked. */
static void qx_sums(int n, int nmax, const float *x, const float *qw, int rmse_type,
		    float iscale, int8_t *L, float *sumlx, float *suml2)
{
	float slx = 0, sl2 = 0;
	for (int i = 0; i < n; i++) {
		int l = clampi(NEAREST(iscale * x[i]), -nmax, nmax - 1);
		if (L)
			L[i] = (int8_t)(l + nmax);
		float w = qx_weight(qw, rmse_type, x, i);
		slx += w * x[i] * (float)l;
		sl2 += w * (float)l * (float)l;
	}
	*sumlx = slx;
	*suml2 = sl2;
}

float pt_quant_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
			      const float *qw)
{
	float amax, sumlx, suml2;
	float max = signed_absmax(x, n, &amax);
	if (amax < PT_GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = (float)-nmax / max;
	if (rmse_type == 0) {
		for (int i = 0; i < n; i++)
			L[i] = (int8_t)(nmax + clampi(NEAREST(iscale * x[i]), -nmax, nmax - 1));
		return 1 / iscale;
	}
	int return_early = rmse_type < 0;
	if (return_early)
		rmse_type = -rmse_type;
	qx_sums(n, nmax, x, qw, rmse_type, iscale, L, &sumlx, &suml2);
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	if (return_early)
		return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
	float best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -((float)nmax + 0.1f * (float)is) / max;
		qx_sums(n, nmax, x, qw, rmse_type, iscale, NULL, &sumlx, &suml2);
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			qx_sums(n, nmax, x, qw, rmse_type, iscale, L, &sumlx, &suml2);
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* One coordinate-descent pass of make_q3_quants; returns the number of accepted changes. */
static int q3_refine_pass(int n, int nmax, const float *x, int8_t *L, float *sumlx,
			  float *suml2)
{
	int changed = 0;
	for (int i = 0; i < n; i++) {
		float w = x[i] * x[i];
		float slx = *sumlx - w * x[i] * (float)L[i];
		if (!(slx > 0))
			continue;
		float sl2 = *suml2 - w * (float)L[i] * (float)L[i];
		int new_l = clampi(NEAREST(x[i] * sl2 / slx), -nmax, nmax - 1);
		if (new_l == L[i])
			continue;
		slx += w * x[i] * (float)new_l;
		sl2 += w * (float)new_l * (float)new_l;
		if (sl2 > 0 && slx * slx * *suml2 > *sumlx * *sumlx * sl2) {
			L[i] = (int8_t)new_l;
			*sumlx = slx;
			*suml2 = sl2;
			changed++;
		}
	}
	return changed;
}

float pt_quant_make_q3_quants(int n, int nmax, const float *x, int8_t *L, int do_rmse)
{
	float amax;
	float max = signed_absmax(x, n, &amax);
	if (amax < PT_GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = (float)-nmax / max;
	if (!do_rmse) {
		for (int i = 0; i < n; i++)
			L[i] = (int8_t)(nmax + clampi(NEAREST(iscale * x[i]), -nmax, nmax - 1));
		return 1 / iscale;
	}
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = clampi(NEAREST(iscale * x[i]), -nmax, nmax - 1);
		L[i] = (int8_t)l;
		float w = x[i] * x[i];
		sumlx += w * x[i] * (float)l;
		suml2 += w * (float)l * (float)l;
	}
	for (int itry = 0; itry < 5; itry++)
		if (!q3_refine_pass(n, nmax, x, L, &sumlx, &suml2))
			break;
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

static inline float qkx_err(float diff, int use_mad)
{
	return use_mad ? fabsf(diff) : diff * diff;
}

/* Weighted error of levels L under (scale, min). */
static float qkx_error(int n, const float *x, const float *w, const uint8_t *L, float scale,
		       float min, int use_mad)
{
	float err = 0;
	for (int i = 0; i < n; i++) {
		float diff = scale * (float)L[i] + min - x[i];
		err += w[i] * qkx_err(diff, use_mad);
	}
	return err;
}

float pt_quant_make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L,
				float *the_min, uint8_t *Laux, float rmin, float rdelta,
				int nstep, int use_mad)
{
	float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*the_min = -min;
		return 0.f;
	}
	float iscale = (float)nmax / (max - min);
	float scale = 1 / iscale;
	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)clampi(NEAREST(iscale * (x[i] - min)), 0, nmax);
	float best_error = qkx_error(n, x, w, L, scale, min, use_mad);
	for (int is = 0; nstep >= 1 && is <= nstep; is++) {
		iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < n; i++) {
			int l = clampi(NEAREST(iscale * (x[i] - min)), 0, nmax);
			Laux[i] = (uint8_t)l;
			sum_l += w[i] * (float)l;
			sum_l2 += w[i] * (float)l * (float)l;
			sum_xl += w[i] * (float)l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (!(D > 0))
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
		if (this_min > 0) {
			this_min = 0;
			this_scale = sum_xl / sum_l2;
		}
		float err = qkx_error(n, x, w, Laux, this_scale, this_min, use_mad);
		if (err < best_error) {
			memcpy(L, Laux, (size_t)n);
			best_error = err;
			scale = this_scale;
			min = this_min;
		}
	}
	*the_min = -min;
	return scale;
}

/* ---- shared packing --------------------------------------------------------------------- */

/* 2-bit levels: qs[32h + l] holds elements 128h + l + 32j at bits 2j (Q2_K, Q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
	for (int j = 0; j < PT_QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
						  (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

static inline int q2bit(const uint8_t *qs, int e)
{
	return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* ---- Q2_K ------------------------------------------------------------------------------- */

void pt_quant_dequant_q2_K(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q2_K *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K) {
		float d = pt_fp16_to_f32(b->d), dmin = pt_fp16_to_f32(b->dmin);
		for (int e = 0; e < PT_QK_K; e++) {
			uint8_t sc = b->scales[e / 16];
			float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
			dst[e] = dl * (float)q2bit(b->qs, e) - ml;
		}
	}
}

/* Requantize a sub-block of n against stored (dq, dm): L = clamp(round((x + dm)/dq), 0, nmax). */
static void requant_min(const float *x, int n, float dq, float dm, int nmax, uint8_t *L)
{
	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)clampi(NEAREST((x[i] + dm) / dq), 0, nmax);
}

void pt_quant_quantize_q2_K(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q2_K *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		uint8_t L[PT_QK_K];
		float w[PT_QK_K], mins[16], scales[16], max_scale = 0, max_min = 0;
		for (int l = 0; l < PT_QK_K; l++)
			w[l] = fabsf(x[l]);
		for (int h = 0; h < 2; h++)
			pt_quant_make_qkx2_quants_x8(16, 3, x + 128 * h, w + 128 * h, L + 128 * h,
						     scales + 8 * h, mins + 8 * h, -0.5f, 0.1f, 15, 1);
		for (int j = 0; j < 16; j++) {
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		memset(y->scales, 0, sizeof(y->scales));
		y->d = pt_f32_to_fp16(0.f);
		y->dmin = pt_f32_to_fp16(0.f);
		if (max_scale > 0) {
			float iscale = 15.f / max_scale;
			for (int j = 0; j < 16; j++)
				y->scales[j] = (uint8_t)NEAREST(iscale * scales[j]);
			y->d = pt_f32_to_fp16(max_scale / 15.f);
		}
		if (max_min > 0) {
			float iscale = 15.f / max_min;
			for (int j = 0; j < 16; j++)
				y->scales[j] |= (uint8_t)((unsigned)NEAREST(iscale * mins[j]) << 4);
			y->dmin = pt_f32_to_fp16(max_min / 15.f);
		}
		for (int j = 0; j < 16; j++) {
			float dq = pt_fp16_to_f32(y->d) * (float)(y->scales[j] & 0xF);
			if (!dq)
				continue;
			float dm = pt_fp16_to_f32(y->dmin) * (float)(y->scales[j] >> 4);
			requant_min(x + 16 * j, 16, dq, dm, 3, L + 16 * j);
		}
		pack_2bit(L, y->qs);
	}
}

/* ---- Q3_K ------------------------------------------------------------------------------- */

void pt_quant_dequant_q3_K(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q3_K *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K) {
		float d = pt_fp16_to_f32(b->d);
		for (int e = 0; e < PT_QK_K; e++) {
			float dl = d * (float)pt_get_scale_q3_K(e / 16, b->scales);
			int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
			dst[e] = dl * (float)(q2bit(b->qs, e) - (hbit ? 0 : 4));
		}
	}
}

/* Quantize the 16 sub-block scales to signed 6 bits against max_scale; returns d. */
static float q3_pack_scales(const float *scales, float max_scale, uint8_t *s)
{
	float iscale = -32.f / max_scale;
	memset(s, 0, 12);
	for (int j = 0; j < 16; j++) {
		int8_t l8 = (int8_t)NEAREST(iscale * scales[j]);
		int l = clampi(l8, -32, 31) + 32;
		if (j < 8)
			s[j] = (uint8_t)(l & 0xF);
		else
			s[j - 8] |= (uint8_t)((l & 0xF) << 4);
		s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
	}
	return 1 / iscale;
}

void pt_quant_quantize_q3_K(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q3_K *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		int8_t L[PT_QK_K];
		float scales[16], max_scale = 0, amax = 0;
		for (int j = 0; j < 16; j++) {
			scales[j] = pt_quant_make_q3_quants(16, 4, x + 16 * j, L + 16 * j, 1);
			if (fabsf(scales[j]) > amax) {
				amax = fabsf(scales[j]);
				max_scale = scales[j];
			}
		}
		memset(y->scales, 0, 12);
		y->d = pt_f32_to_fp16(max_scale ? q3_pack_scales(scales, max_scale, y->scales) : 0.f);
		for (int j = 0; j < 16; j++) {
			float dq = pt_fp16_to_f32(y->d) * (float)pt_get_scale_q3_K(j, y->scales);
			if (!dq)
				continue;
			for (int ii = 0; ii < 16; ii++)
				L[16 * j + ii] = (int8_t)(clampi(NEAREST(x[16 * j + ii] / dq), -4, 3) + 4);
		}
		memset(y->hmask, 0, sizeof(y->hmask));
		for (int e = 0; e < PT_QK_K; e++) {
			if (L[e] > 3) {
				y->hmask[e % 32] |= (uint8_t)(1u << (e / 32));
				L[e] -= 4;
			}
		}
		pack_2bit((const uint8_t *)L, y->qs);
	}
}

/* ---- Q4_K / Q5_K ------------------------------------------------------------------------ */

static void dequant_k4k5(uint16_t dh, uint16_t dminh, const uint8_t *scales, const uint8_t *qs,
			 const uint8_t *qh, float *dst)
{
	float d = pt_fp16_to_f32(dh), dmin = pt_fp16_to_f32(dminh);
	for (int c = 0; c < 4; c++) {
		for (int half = 0; half < 2; half++) {
			uint8_t sc, m;
			pt_get_scale_min_k4(2 * c + half, scales, &sc, &m);
			float d1 = d * (float)sc, m1 = dmin * (float)m;
			for (int l = 0; l < 32; l++) {
				int q = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
				if (qh)
					q += 16 * ((qh[l] >> (2 * c + half)) & 1);
				dst[64 * c + 32 * half + l] = d1 * (float)q - m1;
			}
		}
	}
}

void pt_quant_dequant_q4_K(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q4_K *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K)
		dequant_k4k5(b->d, b->dmin, b->scales, b->qs, NULL, dst);
}

void pt_quant_dequant_q5_K(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q5_K *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K)
		dequant_k4k5(b->d, b->dmin, b->scales, b->qs, b->qh, dst);
}

/* Steps 1-5 of quantize_row_q4_K_ref / q5_K_ref: per-32 scale+min search, 6-bit packing of
 * scales and mins, fp16 super-scales, requantization against the stored values. */
static void k4k5_levels(const float *x, int nmax, float rmin, int nstep, uint16_t *d,
			uint16_t *dmin, uint8_t *s, uint8_t *L)
{
	float w[PT_QK_K], mins[8], scales[8], max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; j++) {
		const float *xb = x + 32 * j;
		float sum_x2 = 0;
		for (int l = 0; l < 32; l++)
			sum_x2 += xb[l] * xb[l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			w[32 * j + l] = av_x + fabsf(xb[l]);
	}
	pt_quant_make_qkx2_quants_x8(32, nmax, x, w, L, scales, mins, rmin, 0.1f, nstep, 0);
	for (int j = 0; j < 8; j++) {
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	for (int j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)NEAREST(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)NEAREST(inv_min * mins[j]);
		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			s[j] = ls;
			s[j + 4] = lm;
		} else {
			s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
			s[j - 4] |= (uint8_t)((ls >> 4) << 6);
			s[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	*d = pt_f32_to_fp16(max_scale / 63.f);
	*dmin = pt_f32_to_fp16(max_min / 63.f);
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		pt_get_scale_min_k4(j, s, &sc, &m);
		float dq = pt_fp16_to_f32(*d) * (float)sc;
		if (!dq)
			continue;
		float dm = pt_fp16_to_f32(*dmin) * (float)m;
		requant_min(x + 32 * j, 32, dq, dm, nmax, L + 32 * j);
	}
}

void pt_quant_quantize_q4_K(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q4_K *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		uint8_t L[PT_QK_K];
		k4k5_levels(x, 15, -1.f, 20, &y->d, &y->dmin, y->scales, L);
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; l++)
				y->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
	}
}

void pt_quant_quantize_q5_K(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q5_K *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		uint8_t L[PT_QK_K];
		k4k5_levels(x, 31, -0.5f, 15, &y->d, &y->dmin, y->scales, L);
		memset(y->qh, 0, sizeof(y->qh));
		for (int c = 0; c < 4; c++) {
			for (int l = 0; l < 32; l++) {
				int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
				if (l1 > 15) {
					l1 -= 16;
					y->qh[l] |= (uint8_t)(1u << (2 * c));
				}
				if (l2 > 15) {
					l2 -= 16;
					y->qh[l] |= (uint8_t)(2u << (2 * c));
				}
				y->qs[32 * c + l] = (uint8_t)(l1 | (l2 << 4));
			}
		}
	}
}

/* ---- Q6_K ------------------------------------------------------------------------------- */

void pt_quant_dequant_q6_K(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_q6_K *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K) {
		float d = pt_fp16_to_f32(b->d);
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
			for (int l = 0; l < 32; l++) {
				int q[4] = {
					(ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4),
					(ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
					(ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
					(ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
				};
				for (int k = 0; k < 4; k++) {
					int e = 128 * h + 32 * k + l;
					dst[e] = d * (float)b->scales[e / 16] * (float)(q[k] - 32);
				}
			}
		}
	}
}

static void pack_q6(const int8_t *L, uint8_t *ql, uint8_t *qh)
{
	for (int j = 0; j < PT_QK_K; j += 128, ql += 64, qh += 32) {
		for (int l = 0; l < 32; l++) {
			ql[l] = (uint8_t)((L[j + l] & 0xF) | ((L[j + l + 64] & 0xF) << 4));
			ql[l + 32] = (uint8_t)((L[j + l + 32] & 0xF) | ((L[j + l + 96] & 0xF) << 4));
			qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
					  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
		}
	}
}

void pt_quant_quantize_q6_K(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_q6_K *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		int8_t L[PT_QK_K];
		float scales[16], max_scale = 0, max_abs_scale = 0;
		pt_quant_make_qx_quants_x8(16, 32, x, L, scales);
		pt_quant_make_qx_quants_x8(16, 32, x + 128, L + 128, scales + 8);
		for (int ib = 0; ib < 16; ib++) {
			if (fabsf(scales[ib]) > max_abs_scale) {
				max_abs_scale = fabsf(scales[ib]);
				max_scale = scales[ib];
			}
		}
		if (max_abs_scale < PT_GROUP_MAX_EPS) {
			memset(y, 0, sizeof(*y));
			continue;
		}
		float iscale = -128.f / max_scale;
		y->d = pt_f32_to_fp16(1 / iscale);
		for (int ib = 0; ib < 16; ib++) {
			int v = NEAREST(iscale * scales[ib]);
			y->scales[ib] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < 16; j++) {
			float dq = pt_fp16_to_f32(y->d) * (float)y->scales[j];
			if (!dq)
				continue;
			for (int ii = 0; ii < 16; ii++)
				L[16 * j + ii] = (int8_t)(clampi(NEAREST(x[16 * j + ii] / dq), -32, 31) + 32);
		}
		pack_q6(L, y->ql, y->qh);
	}
}

/* ---- IQ4_XS ----------------------------------------------------------------------------- */

void pt_quant_dequant_iq4_xs(const void *src, float *dst, uint64_t nb)
{
	const struct pt_block_iq4_xs *b = src;
	for (uint64_t i = 0; i < nb; i++, b++, dst += PT_QK_K) {
		float d = pt_fp16_to_f32(b->d);
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
				 (((b->scales_h >> (2 * ib)) & 3) << 4);
			float dl = d * (float)(ls - 32);
			const uint8_t *qs = b->qs + 16 * ib;
			for (int j = 0; j < 16; j++) {
				dst[32 * ib + j] = dl * (float)pt_kvalues_iq4nl[qs[j] & 0xF];
				dst[32 * ib + 16 + j] = dl * (float)pt_kvalues_iq4nl[qs[j] >> 4];
			}
		}
	}
}

void pt_quant_quantize_iq4_xs(const float *x, void *dst, uint64_t nb)
{
	struct pt_block_iq4_xs *y = dst;
	for (uint64_t i = 0; i < nb; i++, y++, x += PT_QK_K) {
		uint8_t L[32];
		float scales[8], max_scale = 0, amax_scale = 0;
		for (int ib = 0; ib < 8; ib++) {
			scales[ib] = pt_quant_iq4_block_scale(x + 32 * ib, L);
			if (fabsf(scales[ib]) > amax_scale) {
				amax_scale = fabsf(scales[ib]);
				max_scale = scales[ib];
			}
		}
		float d = -max_scale / 32;
		float id = d ? 1 / d : 0.f;
		uint16_t sh = 0;
		y->d = pt_f32_to_fp16(d);
		memset(y->scales_l, 0, sizeof(y->scales_l));
		for (int ib = 0; ib < 8; ib++) {
			const float *xb = x + 32 * ib;
			int l = clampi(NEAREST(id * scales[ib]), -32, 31);
			float dl = d * (float)l;
			float idl = dl ? 1 / dl : 0.f;
			for (int j = 0; j < 32; j++)
				L[j] = (uint8_t)pt_quant_best_index_int8(16, pt_kvalues_iq4nl, idl * xb[j]);
			for (int j = 0; j < 16; j++)
				y->qs[16 * ib + j] = (uint8_t)(L[j] | (L[j + 16] << 4));
			l += 32;
			y->scales_l[ib / 2] |= (uint8_t)((l & 0xF) << (4 * (ib % 2)));
			sh |= (uint16_t)((l >> 4) << (2 * ib));
		}
		y->scales_h = sh;
	}
}
