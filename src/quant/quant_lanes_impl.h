/* quant_lanes_impl.h - body of the K-quant search helpers evaluated for LANES sub-blocks at
 * once, included by quant_lanes.c (PT_LANES 4: SSE2, every x86-64) and quant_lanes_avx2.c
 * (PT_LANES 8: AVX2, chosen at run time).
 *
 * make_qkx2_quants and make_qx_quants dominate quantization time (Q4_K: 21 trial scales per
 * sub-block), and their float sums are sequential chains that scalar code cannot overlap.
 * Here lane b of every vector is sub-block b: each lane performs exactly the scalar
 * algorithm's operations in the scalar order (branches become per-lane selects), so results
 * are bit-identical to the scalar helpers in quant_k.c (unit test and ggml oracle check it;
 * the build's -ffp-contract=off keeps FMA out even where -mfma is on).  GCC/clang vector
 * extensions; the functions are static, so each including file gets its own copy. */
#ifndef PT_QUANT_LANES_IMPL_H
#define PT_QUANT_LANES_IMPL_H

#ifndef PT_LANES
#define PT_LANES 4
#endif

#include <stdint.h>
#include <string.h>

#include "quant/quant_internal.h"

/* Vectors cross only static functions of this file, so the AVX-vs-SSE calling convention
 * difference gcc and clang warn about cannot matter. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* Vector types are the one place a typedef is needed: the attribute needs a type name. */
typedef float vf __attribute__((vector_size(4 * PT_LANES)));
typedef int32_t vi __attribute__((vector_size(4 * PT_LANES)));

#define LANES PT_LANES

static inline vf splat(float f)
{
	return (vf){ 0 } + f;
}

static inline vf sel(vi m, vf a, vf b)
{
	return (vf)((m & (vi)a) | (~m & (vi)b));
}

static inline vi seli(vi m, vi a, vi b)
{
	return (m & a) | (~m & b);
}

static inline vi nearest8(vf x)
{
	vi i = (vi)(x + 12582912.f);
	return (i & 0x007fffff) - 0x00400000;
}

static inline vi clamp8(vi v, int lo, int hi)
{
	v = seli(v < lo, (vi){ 0 } + lo, v);
	return seli(v > hi, (vi){ 0 } + hi, v);
}

static inline vf absf8(vf x)
{
	return (vf)((vi)x & 0x7fffffff);
}

static inline vf tof(vi v)
{
	return __builtin_convertvector(v, vf);
}

/* Load element i of LANES sub-blocks spaced `stride` floats apart. */
static inline vf gather(const float *x, int stride, int i)
{
	vf v;
	for (int b = 0; b < LANES; b++)
		v[b] = x[b * stride + i];
	return v;
}

static vf qkx_err8(int n, const vf *x, const vf *w, const vi *L, vf scale, vf min,
		    int use_mad)
{
	vf err = splat(0);
	for (int i = 0; i < n; i++) {
		vf diff = scale * tof(L[i]) + min - x[i];
		err += w[i] * (use_mad ? absf8(diff) : diff * diff);
	}
	return err;
}

static void qkx2_lanes(int n, int nmax, const float *xs, const float *ws, uint8_t *Ls,
		       float *scales, float *the_mins, float rmin, float rdelta, int nstep,
		       int use_mad)
{
	vf x[32] = { 0 }, w[32] = { 0 };
	vi L[32], Laux[32];
	for (int i = 0; i < n; i++) {
		x[i] = gather(xs, n, i);
		w[i] = gather(ws, n, i);
	}
	vf min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	for (int i = 1; i < n; i++) {
		min = sel(x[i] < min, x[i], min);
		max = sel(x[i] > max, x[i], max);
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	min = sel(min > 0, splat(0), min);
	vi degenerate = max == min;
	vf min0 = min;
	vf iscale = (float)nmax / (max - min);
	vf scale = 1 / iscale;
	for (int i = 0; i < n; i++)
		L[i] = clamp8(nearest8(iscale * (x[i] - min)), 0, nmax);
	vf best_error = qkx_err8(n, x, w, L, scale, min, use_mad);
	for (int is = 0; nstep >= 1 && is <= nstep; is++) {
		/* min moves with each accepted fit and feeds the next grid, as in ggml */
		iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
		vf sum_l = splat(0), sum_l2 = splat(0), sum_xl = splat(0);
		for (int i = 0; i < n; i++) {
			Laux[i] = clamp8(nearest8(iscale * (x[i] - min)), 0, nmax);
			vf l = tof(Laux[i]);
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		vf D = sum_w * sum_l2 - sum_l * sum_l;
		vf this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		vf this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
		vi pos = this_min > 0;
		this_min = sel(pos, splat(0), this_min);
		this_scale = sel(pos, sum_xl / sum_l2, this_scale);
		vf err = qkx_err8(n, x, w, Laux, this_scale, this_min, use_mad);
		vi take = (D > 0) & (err < best_error);
		for (int i = 0; i < n; i++)
			L[i] = seli(take, Laux[i], L[i]);
		best_error = sel(take, err, best_error);
		scale = sel(take, this_scale, scale);
		min = sel(take, this_min, min);
	}
	scale = sel(degenerate, splat(0), scale);
	for (int b = 0; b < LANES; b++) {
		scales[b] = scale[b];
		the_mins[b] = degenerate[b] ? -min0[b] : -min[b];
		for (int i = 0; i < n; i++)
			Ls[b * n + i] = degenerate[b] ? 0 : (uint8_t)L[i][b];
	}
}

/* sum w*x*l and sum w*l*l (w = x^2, make_qx_quants rmse_type 1) at inverse scales iscale. */
static void qx_sums8(int n, int nmax, const vf *x, vf iscale, vi *L, vf *sumlx,
		     vf *suml2)
{
	vf slx = splat(0), sl2 = splat(0);
	for (int i = 0; i < n; i++) {
		L[i] = clamp8(nearest8(iscale * x[i]), -nmax, nmax - 1);
		vf l = tof(L[i]);
		vf w = x[i] * x[i];
		slx += w * x[i] * l;
		sl2 += w * l * l;
	}
	*sumlx = slx;
	*suml2 = sl2;
}

static void qx_lanes(int n, int nmax, const float *xs, int8_t *Ls, float *scales)
{
	vf x[32] = { 0 }, amax = splat(0), max = splat(0), sumlx, suml2;
	vi L[32], Ltry[32];
	for (int i = 0; i < n; i++) {
		x[i] = gather(xs, n, i);
		vf ax = absf8(x[i]);
		vi bigger = ax > amax;
		amax = sel(bigger, ax, amax);
		max = sel(bigger, x[i], max);
	}
	vi zero = amax < PT_GROUP_MAX_EPS;
	vf iscale = (float)-nmax / max;
	qx_sums8(n, nmax, x, iscale, L, &sumlx, &suml2);
	vf scale = sel(suml2 != 0, sumlx / suml2, splat(0));
	vf best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -((float)nmax + 0.1f * (float)is) / max;
		qx_sums8(n, nmax, x, iscale, Ltry, &sumlx, &suml2);
		vi take = (suml2 > 0) & (sumlx * sumlx > best * suml2);
		vf s = sumlx / suml2;
		for (int i = 0; i < n; i++)
			L[i] = seli(take, Ltry[i], L[i]);
		scale = sel(take, s, scale);
		best = sel(take, s * sumlx, best);
	}
	scale = sel(zero, splat(0), scale);
	for (int b = 0; b < LANES; b++) {
		scales[b] = scale[b];
		for (int i = 0; i < n; i++)
			Ls[b * n + i] = zero[b] ? 0 : (int8_t)(L[i][b] + nmax);
	}
}


#endif
