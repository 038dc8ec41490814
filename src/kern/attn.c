/* attn.c - attention inner loops (key dots over transposed K blocks, online-softmax weights,
 * F16/F32 V accumulation, the attention exponential, F16 conversion): the scalar reference
 * and the level dispatch.  The AVX2, AVX-512 and NEON twins (attn_avx2.c, attn_avx512.c,
 * attn_neon.c) compute
 * every value the same way, so switching levels never changes a result
 * (tests/unit/test_attn.c). */
#include <math.h>

#include "kern/attn_internal.h"
#include "kern/kern_internal.h"
#include "quant/types.h"

/* The polynomial and reduction constants are shared with the SIMD twins (attn_internal.h). */
float pt_kern_expf(float x)
{
	if (isnan(x))
		return x + x;
	x = x < ATTN_EXP_LO ? ATTN_EXP_LO : x > ATTN_EXP_HI ? ATTN_EXP_HI : x;
	const float k = rintf(x * ATTN_LOG2E);
	float r = fmaf(k, -ATTN_LN2_HI, x);
	r = fmaf(k, -ATTN_LN2_LO, r);
	float p = ATTN_EXP_C7;
	p = fmaf(p, r, ATTN_EXP_C6);
	p = fmaf(p, r, ATTN_EXP_C5);
	p = fmaf(p, r, ATTN_EXP_C4);
	p = fmaf(p, r, ATTN_EXP_C3);
	p = fmaf(p, r, 0.5f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	const int n = (int)k, n1 = n >> 1, n2 = n - n1; /* both in [-75, 65]: 2^n1, 2^n2 normal */
	return p * attn_pow2(n1) * attn_pow2(n2);
}

float pt_kern_tanhf(float x)
{
	if (isnan(x))
		return x + x;
	const float a = fabsf(x);
	float t;
	if (a < TANH_SERIES_END) {
		const float z = a * a;
		float p = TANH_C21;
		p = fmaf(p, z, TANH_C19);
		p = fmaf(p, z, TANH_C17);
		p = fmaf(p, z, TANH_C15);
		p = fmaf(p, z, TANH_C13);
		p = fmaf(p, z, TANH_C11);
		p = fmaf(p, z, TANH_C9);
		p = fmaf(p, z, TANH_C7);
		p = fmaf(p, z, TANH_C5);
		p = fmaf(p, z, TANH_C3);
		t = fmaf(a * z, p, a);
	} else {
		const float e = pt_kern_expf(2.0f * (a < TANH_X_MAX ? a : TANH_X_MAX));
		t = 1.0f - 2.0f / (e + 1.0f);
	}
	return copysignf(t, x);
}

/* Element at of F16 (wide false) or F32 data: the reference reads widened Q8_0 keys and
 * values (dots_w, vacc_w) through the same loops as F16 ones. */
static float elem(const void *x, size_t at, bool wide)
{
	return wide ? ((const float *)x)[at] : kern_fp16_to_f32(((const uint16_t *)x)[at]);
}

static void dots_any(const void *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		     size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld, bool wide)
{
	for (uint32_t i = 0; i < n_q; i++)
		for (uint32_t b = 0; b < n_blk; b++)
			for (uint32_t j = 0; j < PT_KERN_ATTN_BLOCK; j++) {
				const size_t k = b * kb_stride + j;
				float acc = 0.0f;
				for (uint32_t d = 0; d < n; d++)
					acc = fmaf(elem(kb, k + (size_t)d * PT_KERN_ATTN_BLOCK, wide),
						   q[i * q_stride + d], acc);
				out[i * ld + b * PT_KERN_ATTN_BLOCK + j] = acc;
			}
}

/* The reference ignores the prefetch hints (kb_next, v_next). */
static void dots(const uint16_t *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		 size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld,
		 const uint16_t *kb_next)
{
	(void)kb_next;
	dots_any(kb, kb_stride, n_blk, q, q_stride, n_q, n, out, ld, false);
}

static void softmax(const float *dots, size_t ld, uint32_t n_q, uint32_t n, float scale,
		    float *m, float *s, float *ms, float *vs)
{
	for (uint32_t i = 0; i < n_q; i++) {
		float mi = m[i], si = s[i];
		for (uint32_t j = 0; j < n; j++) {
			const float sc = dots[i * ld + j] * scale;
			float a = 1.0f, b = 1.0f;
			if (sc > mi) {
				a = pt_kern_expf(mi - sc);
				mi = sc;
			} else {
				b = pt_kern_expf(sc - mi);
			}
			ms[i * ld + j] = a;
			vs[i * ld + j] = b;
			const float t = si * a;
			si = t + b;
		}
		m[i] = mi;
		s[i] = si;
	}
}

static float round_f16(float x)
{
	return kern_fp16_to_f32(pt_f32_to_fp16(x));
}

static void vacc(float *acc, size_t acc_ld, uint32_t n_q, const void *v, size_t v_stride,
		 uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n, bool f16,
		 bool wide)
{
	for (uint32_t i = 0; i < n_q; i++) {
		float *a = acc + i * acc_ld;
		for (uint32_t j = 0; j < n_k; j++) {
			const float sm = ms[i * ld + j], sv = vs[i * ld + j];
			for (uint32_t d = 0; d < n; d++) {
				float x = a[d];
				if (sm != 1.0f) {
					x = x * sm;
					x = f16 ? round_f16(x) : x;
				}
				x = fmaf(elem(v, j * v_stride + d, wide), sv, x);
				a[d] = f16 ? round_f16(x) : x;
			}
		}
	}
}

static void vacc_f16(float *acc, size_t acc_ld, uint32_t n_q, const uint16_t *v,
		     size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		     uint32_t n, const uint16_t *v_next)
{
	(void)v_next;
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, true, false);
}

static void vacc_f32(float *acc, size_t acc_ld, uint32_t n_q, const uint16_t *v,
		     size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		     uint32_t n, const uint16_t *v_next)
{
	(void)v_next;
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, false, false);
}

static void dots_w(const float *kw, size_t kw_stride, uint32_t n_blk, const float *q,
		   size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld)
{
	dots_any(kw, kw_stride, n_blk, q, q_stride, n_q, n, out, ld, true);
}

static void vacc_w(float *acc, size_t acc_ld, uint32_t n_q, const float *v, size_t v_stride,
		   uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n)
{
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, false, true);
}

/* The NEON level uses these two as well: the products are exact, so any order is the
 * reference's. */
static void widen_q8_k(const int8_t *codes, const uint16_t *scales, uint32_t n, float *y,
		       const int8_t *next)
{
	(void)next;
	for (uint32_t d = 0; d < n; d++)
		for (uint32_t j = 0; j < PT_KERN_ATTN_BLOCK; j++)
			y[d * PT_KERN_ATTN_BLOCK + j] =
				(float)codes[d * PT_KERN_ATTN_BLOCK + j] *
				kern_fp16_to_f32(scales[d / 32 * PT_KERN_ATTN_BLOCK + j]);
}

static void widen_q8_v(const int8_t *rows, size_t row_bytes, uint32_t n_rows, uint32_t n,
		       float *y, const int8_t *next)
{
	(void)next;
	for (uint32_t r = 0; r < n_rows; r++) {
		const int8_t *codes = rows + r * row_bytes;
		const uint8_t *sc = (const uint8_t *)(codes + n); /* F16 scales, maybe unaligned */
		for (uint32_t d = 0; d < n; d++) {
			const uint16_t h = (uint16_t)(sc[d / 32 * 2] | sc[d / 32 * 2 + 1] << 8);
			y[(size_t)r * n + d] = (float)codes[d] * kern_fp16_to_f32(h);
		}
	}
}

static void scale_f32(float *acc, float ms, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		acc[i] *= ms;
}

static void axpy_f32(float *acc, const float *v, float vs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		acc[i] = fmaf(v[i], vs, acc[i]);
}

static void f16_to_f32(const uint16_t *x, float *y, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] = kern_fp16_to_f32(x[i]);
}

static void f32_to_f16(const float *x, uint16_t *y, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] = pt_f32_to_fp16(x[i]);
}

static const struct pt_kern_attn_ops scalar_ops = {
	.dots = dots, .softmax = softmax, .vacc_f16 = vacc_f16, .vacc_f32 = vacc_f32,
	.dots_w = dots_w, .vacc_w = vacc_w, .widen_q8_k = widen_q8_k, .widen_q8_v = widen_q8_v,
	.scale_f32 = scale_f32, .axpy_f32 = axpy_f32, .f16_to_f32 = f16_to_f32,
	.f32_to_f16 = f32_to_f16,
};

#if defined(PT_KERN_X86)
static const struct pt_kern_attn_ops avx2_ops = {
	.dots = pt_kern_attn_dots_avx2, .softmax = pt_kern_attn_softmax_avx2,
	.vacc_f16 = pt_kern_attn_vacc_f16_avx2, .vacc_f32 = pt_kern_attn_vacc_f32_avx2,
	.dots_w = pt_kern_attn_dots_w_avx2, .vacc_w = pt_kern_attn_vacc_w_avx2,
	.widen_q8_k = pt_kern_widen_q8_k_avx2, .widen_q8_v = pt_kern_widen_q8_v_avx2,
	.dots_q8 = pt_kern_attn_dots_q8_avx2, .vacc_q8 = pt_kern_attn_vacc_q8_avx2,
	.scale_f32 = pt_kern_attn_scale_f32_avx2, .axpy_f32 = pt_kern_attn_axpy_f32_avx2,
	.f16_to_f32 = pt_kern_f16_to_f32_avx2, .f32_to_f16 = pt_kern_f32_to_f16_avx2,
};

static const struct pt_kern_attn_ops avx512_ops = {
	.dots = pt_kern_attn_dots_avx512, .softmax = pt_kern_attn_softmax_avx512,
	.vacc_f16 = pt_kern_attn_vacc_f16_avx512, .vacc_f32 = pt_kern_attn_vacc_f32_avx512,
	.dots_w = pt_kern_attn_dots_w_avx512, .vacc_w = pt_kern_attn_vacc_w_avx512,
	.widen_q8_k = pt_kern_widen_q8_k_avx512, .widen_q8_v = pt_kern_widen_q8_v_avx2,
	.dots_q8 = pt_kern_attn_dots_q8_avx512, .vacc_q8 = pt_kern_attn_vacc_q8_avx512,
	.scale_f32 = pt_kern_attn_scale_f32_avx2, .axpy_f32 = pt_kern_attn_axpy_f32_avx2,
	.f16_to_f32 = pt_kern_f16_to_f32_avx2, .f32_to_f16 = pt_kern_f32_to_f16_avx2,
};
#elif defined(PT_KERN_ARM64)
static const struct pt_kern_attn_ops neon_ops = {
	.dots = pt_kern_attn_dots_neon, .softmax = pt_kern_attn_softmax_neon,
	.vacc_f16 = pt_kern_attn_vacc_f16_neon, .vacc_f32 = pt_kern_attn_vacc_f32_neon,
	.dots_w = pt_kern_attn_dots_w_neon, .vacc_w = pt_kern_attn_vacc_w_neon,
	.widen_q8_k = widen_q8_k, .widen_q8_v = widen_q8_v,
	.scale_f32 = pt_kern_attn_scale_f32_neon, .axpy_f32 = pt_kern_attn_axpy_f32_neon,
	.f16_to_f32 = pt_kern_f16_to_f32_neon, .f32_to_f16 = pt_kern_f32_to_f16_neon,
};
#endif

const struct pt_kern_attn_ops *pt_kern_attn_ops_at(enum pt_kern_level level)
{
	if (level > pt_kern_level_max())
		return NULL;
#if defined(PT_KERN_X86)
	if (level >= PT_KERN_LEVEL_AVX512)
		return &avx512_ops;
	if (level >= PT_KERN_LEVEL_AVX2)
		return &avx2_ops;
#elif defined(PT_KERN_ARM64)
	if (level >= PT_KERN_LEVEL_NEON)
		return &neon_ops; /* Advanced SIMD only: the same ops at neon, dotprod, i8mm */
#endif
	return &scalar_ops;
}

const struct pt_kern_attn_ops *pt_kern_attn_ops(uint32_t dim)
{
	if (dim > PT_KERN_ATTN_MAX_DIM)
		return &scalar_ops;
	return pt_kern_attn_ops_at(pt_kern_level());
}
