/* attn_neon.c - aarch64 NEON twins of the attention inner loops in src/kern/attn.c and of the
 * SwiGLU element loop (model/ops.c pt_op_swiglu_ref), bit-identical to the scalar code as the
 * AVX2 ones are: every value is computed with the same operations in the same order (FMLA is
 * one correctly rounded fused multiply-add like fmaf, FRINTN is rintf in the default rounding
 * mode, FCVT/FCVTN/FCVTL convert F16 with round-to-nearest-even and keep subnormals, the
 * kernel's default FPCR).  Key dots run one lane per key over the transposed K blocks (a
 * key's FMA chain stays in index order); several queries share each K load.  Advanced SIMD is
 * in every aarch64 CPU: these serve the neon, dotprod and i8mm levels alike. */
#include <arm_neon.h>
#include <math.h>
#include <stdbool.h>

#include "kern/attn_internal.h"
#include "kern/kern_internal.h"

#define BLK PT_KERN_ATTN_BLOCK
#define INLINE static inline __attribute__((always_inline))

/* pt_kern_expf on 4 lanes, operation for operation (clamp, rint, Cody-Waite, degree-7 Horner
 * by FMA, 2^k in two halves); NaN lanes return x + x as the scalar code. */
INLINE float32x4_t exp4(float32x4_t x)
{
	const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
	const float32x4_t xc =
		vminq_f32(vmaxq_f32(x, vdupq_n_f32(ATTN_EXP_LO)), vdupq_n_f32(ATTN_EXP_HI));
	const float32x4_t k = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(ATTN_LOG2E)));
	float32x4_t r = vfmaq_f32(xc, k, vdupq_n_f32(-ATTN_LN2_HI));
	r = vfmaq_f32(r, k, vdupq_n_f32(-ATTN_LN2_LO));
	float32x4_t p = vdupq_n_f32(ATTN_EXP_C7);
	p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C6), p, r);
	p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C5), p, r);
	p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C4), p, r);
	p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C3), p, r);
	p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
	const int32x4_t n = vcvtq_s32_f32(k); /* k is integral (NaN lanes give 0: replaced) */
	const int32x4_t n1 = vshrq_n_s32(n, 1), n2 = vsubq_s32(n, n1);
	const int32x4_t bias = vdupq_n_s32(127);
	const float32x4_t p1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
	const float32x4_t p2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
	const float32x4_t y = vmulq_f32(vmulq_f32(p, p1), p2);
	return vbslq_f32(nan, vaddq_f32(x, x), y);
}

void pt_kern_swiglu_neon(float *out, const float *gate, const float *up, int n)
{
	const float32x4_t one = vdupq_n_f32(1.0f);
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		const float32x4_t x = vld1q_f32(gate + i);
		const float32x4_t s = vdivq_f32(x, vaddq_f32(one, exp4(vnegq_f32(x))));
		vst1q_f32(out + i, vmulq_f32(s, vld1q_f32(up + i)));
	}
	for (; i < n; i++)
		out[i] = gate[i] / (1.0f + pt_kern_expf(-gate[i])) * up[i]; /* pt_op_silu */
}

/* pt_kern_tanhf on 4 lanes: both branches computed, the series taken below its end. */
INLINE float32x4_t tanh4(float32x4_t x)
{
	const float32x4_t a = vabsq_f32(x), z = vmulq_f32(a, a);
	float32x4_t p = vdupq_n_f32(TANH_C21);
	p = vfmaq_f32(vdupq_n_f32(TANH_C19), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C17), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C15), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C13), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C11), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C9), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C7), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C5), p, z);
	p = vfmaq_f32(vdupq_n_f32(TANH_C3), p, z);
	const float32x4_t series = vfmaq_f32(a, vmulq_f32(a, z), p);
	const float32x4_t one = vdupq_n_f32(1.0f);
	const float32x4_t e =
		exp4(vmulq_f32(vdupq_n_f32(2.0f), vminq_f32(a, vdupq_n_f32(TANH_X_MAX))));
	const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
	const float32x4_t t = vbslq_f32(vcltq_f32(a, vdupq_n_f32(TANH_SERIES_END)), series, big);
	const uint32x4_t sign = vdupq_n_u32(0x80000000u);
	const float32x4_t y = vreinterpretq_f32_u32(vorrq_u32(
		vreinterpretq_u32_f32(t), vandq_u32(sign, vreinterpretq_u32_f32(x))));
	return vbslq_f32(vceqq_f32(x, x), y, vaddq_f32(x, x));
}

/* The reference's eight double partial sums are four vectors of two (the squares are exact
 * in double, so each lane's adds are the scalar chain's). */
void pt_kern_rmsnorm_neon(float *y, const float *x, const float *w, int n, float eps)
{
	float64x2_t s2[4] = { vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0),
			      vdupq_n_f64(0.0) };
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
		const float64x2_t d[4] = { vcvt_f64_f32(vget_low_f32(a)), vcvt_high_f64_f32(a),
					   vcvt_f64_f32(vget_low_f32(b)), vcvt_high_f64_f32(b) };
		for (int k = 0; k < 4; k++)
			s2[k] = vaddq_f64(s2[k], vmulq_f64(d[k], d[k]));
	}
	double s[8];
	for (int k = 0; k < 4; k++)
		vst1q_f64(s + 2 * k, s2[k]);
	for (; i < n; i++)
		s[i % 8] += (double)x[i] * (double)x[i];
	const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	const float mean = (float)(sum / n);
	const float scale = 1.0f / sqrtf(mean + eps);
	const float32x4_t sc = vdupq_n_f32(scale);
	for (i = 0; i + 4 <= n; i += 4) {
		float32x4_t t = vmulq_f32(vld1q_f32(x + i), sc);
		if (w)
			t = vmulq_f32(t, vld1q_f32(w + i));
		vst1q_f32(y + i, t);
	}
	for (; i < n; i++)
		y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

void pt_kern_softcap_neon(float *x, int n, float cap)
{
	const float32x4_t inv = vdupq_n_f32(1.0f / cap), c = vdupq_n_f32(cap);
	int i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(x + i, vmulq_f32(tanh4(vmulq_f32(vld1q_f32(x + i), inv)), c));
	for (; i < n; i++)
		x[i] = pt_kern_tanhf(x[i] * (1.0f / cap)) * cap; /* pt_op_softcap_ref */
}

/* model/ops.c's pt_op_geglu_ref: the F16 GELU table's formula (pt_op_gelu_exact with
 * pt_kern_tanhf) in lanes, as ops_avx2.c's pt_kern_geglu_avx2: x rounded to F16 and back,
 * the formula's multiplies and adds in the reference's order, tanh4, the result rounded to
 * F16 and back, the +-10 cut-offs, times up (FCVTN rounds to nearest even as the table's
 * pt_f32_to_fp16 does; a NaN stays a NaN). */
void pt_kern_geglu_neon(float *out, const float *gate, const float *up, int n)
{
	const float32x4_t lo = vdupq_n_f32(-10.0f), hi = vdupq_n_f32(10.0f);
	const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		const float32x4_t x = vld1q_f32(gate + i);
		const float32x4_t xr = vcvt_f32_f16(vcvt_f16_f32(x));
		const float32x4_t inner = vmulq_f32(
			vmulq_f32(vdupq_n_f32(PT_GELU_SQRT_2_OVER_PI), xr),
			vaddq_f32(one, vmulq_f32(vmulq_f32(vdupq_n_f32(PT_GELU_COEF_A), xr), xr)));
		const float32x4_t gl = vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), xr),
						 vaddq_f32(one, tanh4(inner)));
		float32x4_t g = vcvt_f32_f16(vcvt_f16_f32(gl));
		g = vbslq_f32(vcgeq_f32(x, hi), x, g);
		g = vbslq_f32(vcleq_f32(x, lo), zero, g);
		vst1q_f32(out + i, vmulq_f32(g, vld1q_f32(up + i)));
	}
	if (i < n) { /* the tail in the same lanes, padded */
		float x[4] = { 0 }, u[4] = { 0 }, o[4];
		for (int j = 0; i + j < n; j++) {
			x[j] = gate[i + j];
			u[j] = up[i + j];
		}
		pt_kern_geglu_neon(o, x, u, 4);
		for (int j = 0; i + j < n; j++)
			out[i + j] = o[j];
	}
}

/* ---- F16 ------------------------------------------------------------------------------------ */

INLINE float32x4_t load_h4(const uint16_t *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* F32 -> F16 round to nearest even; NaN becomes the reference's canonical quiet NaN with the
 * sign kept (FCVTN would keep the payload). */
INLINE uint16x4_t to_h4(float32x4_t x)
{
	const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(x));
	const uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(x, x)));
	const uint16x4_t canon = vorr_u16(vand_u16(h, vdup_n_u16(0x8000)), vdup_n_u16(0x7e00));
	return vbsl_u16(nan, canon, h);
}

INLINE float32x4_t rnd16(float32x4_t x, const bool f16)
{
	return f16 ? vcvt_f32_f16(vcvt_f16_f32(x)) : x;
}

INLINE float rnd16_1(float x)
{
	return vgetq_lane_f32(vcvt_f32_f16(vcvt_f16_f32(vdupq_n_f32(x))), 0);
}

INLINE float h2f_1(uint16_t h)
{
	return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* wide: F32 data (the Q8_0 cache's widened keys and values), else F16 */
INLINE float32x4_t load_k4(const void *p, size_t at, const bool wide)
{
	return wide ? vld1q_f32((const float *)p + at) : load_h4((const uint16_t *)p + at);
}

INLINE float v_at(const void *p, size_t at, const bool wide)
{
	return wide ? ((const float *)p)[at] : h2f_1(((const uint16_t *)p)[at]);
}

void pt_kern_f16_to_f32_neon(const uint16_t *x, float *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, load_h4(x + i));
	for (; i < n; i++)
		y[i] = kern_fp16_to_f32(x[i]);
}

void pt_kern_f32_to_f16_neon(const float *x, uint16_t *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1_u16(y + i, to_h4(vld1q_f32(x + i)));
	for (; i < n; i++)
		y[i] = pt_f32_to_fp16(x[i]);
}

/* ---- key dots: 16 keys = 4 vectors, up to 4 queries = 16 independent FMA chains ----------- */

INLINE void dots_blk(const void *k, const float *q, size_t q_stride, const uint32_t nq,
		     uint32_t n, float *out, size_t ld, const bool wide)
{
	float32x4_t a[4][4];
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 4; c++)
			a[i][c] = vdupq_n_f32(0.0f);
	for (uint32_t d = 0; d < n; d++) {
		float32x4_t kk[4];
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 4; c++)
			kk[c] = load_k4(k, d * BLK + 4 * c, wide);
		_Pragma("GCC unroll 4")
		for (uint32_t i = 0; i < nq; i++) {
			const float32x4_t qb = vdupq_n_f32(q[i * q_stride + d]);
			_Pragma("GCC unroll 4")
			for (int c = 0; c < 4; c++)
				a[i][c] = vfmaq_f32(a[i][c], kk[c], qb);
		}
	}
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 4; c++)
			vst1q_f32(out + i * ld + 4 * c, a[i][c]);
}

INLINE void dots(const void *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		 size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld, const bool wide)
{
	const size_t es = wide ? sizeof(float) : sizeof(uint16_t);
	for (uint32_t b = 0; b < n_blk; b++) {
		const void *k = (const char *)kb + b * kb_stride * es;
		for (uint32_t i = 0; i < n_q; i += 4) {
			const float *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			switch (n_q - i) {
			case 1: dots_blk(k, qi, q_stride, 1, n, o, ld, wide); break;
			case 2: dots_blk(k, qi, q_stride, 2, n, o, ld, wide); break;
			case 3: dots_blk(k, qi, q_stride, 3, n, o, ld, wide); break;
			default: dots_blk(k, qi, q_stride, 4, n, o, ld, wide); break;
			}
		}
	}
}

/* The prefetch hints (kb_next, v_next) are ignored at this level (not measured on Arm). */
void pt_kern_attn_dots_neon(ATTN_DOTS_ARGS)
{
	(void)kb_next;
	dots(kb, kb_stride, n_blk, q, q_stride, n_q, n, out, ld, false);
}

void pt_kern_attn_dots_w_neon(ATTN_DOTS_W_ARGS)
{
	dots(kw, kw_stride, n_blk, q, q_stride, n_q, n, out, ld, true);
}

/* ---- softmax weights ------------------------------------------------------------------------ */

/* One query's keys j < n: the running max is the scalar loop's compare chain (cheap, and
 * NaN never rises above m), the exponentials of the differences run 4 lanes at a time. */
static float softmax_row(const float *dots, uint32_t n, float scale, float m, float *ms,
			 float *vs, bool *up_any)
{
	const float32x4_t one = vdupq_n_f32(1.0f), sv = vdupq_n_f32(scale);
	for (uint32_t j0 = 0; j0 < n; j0 += 4) {
		const uint32_t c = n - j0 < 4 ? n - j0 : 4;
		float buf[4] = { 0 }, prev[4] = { 0 }, sc[4];
		uint32_t upb[4] = { 0 };
		memcpy(buf, dots + j0, c * sizeof(float));
		const float32x4_t s = vmulq_f32(vld1q_f32(buf), sv);
		vst1q_f32(sc, s);
		for (uint32_t j = 0; j < c; j++) {
			prev[j] = m;
			if (sc[j] > m) {
				m = sc[j];
				upb[j] = ~0u;
				*up_any = true;
			}
		}
		const float32x4_t pv = vld1q_f32(prev);
		const uint32x4_t up = vld1q_u32(upb);
		/* sc > prev: ms = exp(prev - sc), vs = 1; else ms = 1, vs = exp(sc - prev) */
		const float32x4_t e = exp4(vbslq_f32(up, vsubq_f32(pv, s), vsubq_f32(s, pv)));
		float bm[4], bv[4];
		vst1q_f32(bm, vbslq_f32(up, e, one));
		vst1q_f32(bv, vbslq_f32(up, one, e));
		memcpy(ms + j0, bm, c * sizeof(float));
		memcpy(vs + j0, bv, c * sizeof(float));
	}
	return m;
}

void pt_kern_attn_softmax_neon(ATTN_SOFTMAX_ARGS)
{
	for (uint32_t i0 = 0; i0 < n_q; i0 += 8) {
		const uint32_t k = n_q - i0 < 8 ? n_q - i0 : 8;
		bool up[8] = { false };
		for (uint32_t i = i0; i < i0 + k; i++)
			m[i] = softmax_row(dots + i * ld, n, scale, m[i], ms + i * ld, vs + i * ld,
					   &up[i - i0]);
		sums(ld, k, n, s + i0, ms + i0 * ld, vs + i0 * ld, up);
	}
}

/* ---- V accumulation: up to 4 queries x NV vectors of accumulators in registers ----------- */

INLINE void vacc_cols(float *acc, size_t acc_ld, const uint32_t nq, const void *v,
		      size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		      const int nv, const bool f16, const bool wide)
{
	float32x4_t a[4][4];
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			a[i][c] = vld1q_f32(acc + i * acc_ld + 4 * c);
	for (uint32_t j = 0; j < n_k; j++) {
		float32x4_t x[4];
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			x[c] = load_k4(v, j * v_stride + 4 * c, wide);
		_Pragma("GCC unroll 4")
		for (uint32_t i = 0; i < nq; i++) {
			const float sm = ms[i * ld + j];
			if (sm != 1.0f)
				_Pragma("GCC unroll 4")
				for (int c = 0; c < nv; c++)
					a[i][c] = rnd16(vmulq_n_f32(a[i][c], sm), f16);
			const float32x4_t w = vdupq_n_f32(vs[i * ld + j]);
			_Pragma("GCC unroll 4")
			for (int c = 0; c < nv; c++)
				a[i][c] = rnd16(vfmaq_f32(a[i][c], x[c], w), f16);
		}
	}
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			vst1q_f32(acc + i * acc_ld + 4 * c, a[i][c]);
}

INLINE void vacc_tail(float *acc, size_t acc_ld, uint32_t n_q, const void *v,
		      size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		      uint32_t d0, uint32_t n, const bool f16, const bool wide)
{
	for (uint32_t i = 0; i < n_q; i++)
		for (uint32_t j = 0; j < n_k; j++) {
			const float sm = ms[i * ld + j], sv = vs[i * ld + j];
			for (uint32_t d = d0; d < n; d++) {
				float x = acc[i * acc_ld + d];
				if (sm != 1.0f) {
					x = x * sm;
					if (f16)
						x = rnd16_1(x);
				}
				x = fmaf(v_at(v, j * v_stride + d, wide), sv, x);
				if (f16)
					x = rnd16_1(x);
				acc[i * acc_ld + d] = x;
			}
		}
}

#define VACC_Q(nv, f16)                                                                       \
	switch (n_q - i) {                                                                    \
	case 1: vacc_cols(a, acc_ld, 1, vd, v_stride, n_k, mi, vi, ld, nv, f16, wide); break; \
	case 2: vacc_cols(a, acc_ld, 2, vd, v_stride, n_k, mi, vi, ld, nv, f16, wide); break; \
	case 3: vacc_cols(a, acc_ld, 3, vd, v_stride, n_k, mi, vi, ld, nv, f16, wide); break; \
	default: vacc_cols(a, acc_ld, 4, vd, v_stride, n_k, mi, vi, ld, nv, f16, wide); break; \
	}

INLINE void vacc_any(float *acc, size_t acc_ld, uint32_t n_q, const void *v, size_t v_stride,
		     uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n,
		     const bool f16, const bool wide)
{
	const size_t es = wide ? sizeof(float) : sizeof(uint16_t);
	uint32_t d = 0;
	for (; d + 16 <= n; d += 16)
		for (uint32_t i = 0; i < n_q; i += 4) {
			float *a = acc + i * acc_ld + d;
			const void *vd = (const char *)v + d * es;
			const float *mi = ms + i * ld, *vi = vs + i * ld;
			VACC_Q(4, f16)
		}
	for (; d + 4 <= n; d += 4)
		for (uint32_t i = 0; i < n_q; i += 4) {
			float *a = acc + i * acc_ld + d;
			const void *vd = (const char *)v + d * es;
			const float *mi = ms + i * ld, *vi = vs + i * ld;
			VACC_Q(1, f16)
		}
	if (d < n)
		vacc_tail(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, d, n, f16, wide);
}

/* The prefetch hint (v_next) is ignored at this level. */
void pt_kern_attn_vacc_f16_neon(ATTN_VACC_ARGS)
{
	(void)v_next;
	vacc_any(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, true, false);
}

void pt_kern_attn_vacc_f32_neon(ATTN_VACC_ARGS)
{
	(void)v_next;
	vacc_any(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, false, false);
}

void pt_kern_attn_vacc_w_neon(ATTN_VACC_W_ARGS)
{
	vacc_any(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, false, true);
}

/* ---- element-wise helpers ------------------------------------------------------------------ */

void pt_kern_attn_axpy_f32_neon(float *acc, const float *v, float vs, uint32_t n)
{
	const float32x4_t s = vdupq_n_f32(vs);
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(acc + i, vfmaq_f32(vld1q_f32(acc + i), vld1q_f32(v + i), s));
	for (; i < n; i++)
		acc[i] = fmaf(v[i], vs, acc[i]);
}

void pt_kern_attn_scale_f32_neon(float *acc, float ms, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(acc + i, vmulq_n_f32(vld1q_f32(acc + i), ms));
	for (; i < n; i++)
		acc[i] *= ms;
}
