/* attn.c - attention inner loops (key dots, F16/F32 accumulator updates, F16 conversion):
 * the scalar reference and the level dispatch.  The AVX2 twins (attn_avx2.c) compute every
 * value the same way, so switching levels never changes a result (tests/unit/test_attn.c). */
#include <math.h>

#include "kern/kern_internal.h"
#include "quant/types.h"

void pt_kern_attn_dots_f32q_avx2(const uint16_t *const *k, uint32_t n_rows, const float *q,
				 uint32_t n, float *out);
void pt_kern_attn_dots_f16q_avx2(const uint16_t *const *k, uint32_t n_rows, const uint16_t *q,
				 uint32_t n, float *out);
void pt_kern_attn_scale_f16_avx2(uint16_t *acc, float ms, uint32_t n);
void pt_kern_attn_axpy_f16_avx2(uint16_t *acc, const uint16_t *v, float vs, uint32_t n);
void pt_kern_attn_scale_f32_avx2(float *acc, float ms, uint32_t n);
void pt_kern_attn_axpy_f32_avx2(float *acc, const float *v, float vs, uint32_t n);
void pt_kern_f16_to_f32_avx2(const uint16_t *x, float *y, uint32_t n);
void pt_kern_f32_to_f16_avx2(const float *x, uint16_t *y, uint32_t n);

static void dots_f32q(const uint16_t *const *k, uint32_t n_rows, const float *q, uint32_t n,
		      float *out)
{
	for (uint32_t j = 0; j < n_rows; j++) {
		float acc = 0.0f;
		for (uint32_t i = 0; i < n; i++)
			acc = fmaf(kern_fp16_to_f32(k[j][i]), q[i], acc);
		out[j] = acc;
	}
}

static void dots_f16q(const uint16_t *const *k, uint32_t n_rows, const uint16_t *q, uint32_t n,
		      float *out)
{
	for (uint32_t j = 0; j < n_rows; j++) {
		float acc = 0.0f;
		for (uint32_t i = 0; i < n; i++)
			acc = fmaf(kern_fp16_to_f32(k[j][i]), kern_fp16_to_f32(q[i]), acc);
		out[j] = acc;
	}
}

static void scale_f16(uint16_t *acc, float ms, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		acc[i] = pt_f32_to_fp16(kern_fp16_to_f32(acc[i]) * ms);
}

static void axpy_f16(uint16_t *acc, const uint16_t *v, float vs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		acc[i] = pt_f32_to_fp16(fmaf(kern_fp16_to_f32(v[i]), vs, kern_fp16_to_f32(acc[i])));
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
	dots_f32q, dots_f16q, scale_f16, axpy_f16, scale_f32, axpy_f32, f16_to_f32, f32_to_f16,
};

static const struct pt_kern_attn_ops avx2_ops = {
	pt_kern_attn_dots_f32q_avx2, pt_kern_attn_dots_f16q_avx2, pt_kern_attn_scale_f16_avx2,
	pt_kern_attn_axpy_f16_avx2,  pt_kern_attn_scale_f32_avx2, pt_kern_attn_axpy_f32_avx2,
	pt_kern_f16_to_f32_avx2,     pt_kern_f32_to_f16_avx2,
};

const struct pt_kern_attn_ops *pt_kern_attn_ops_at(enum pt_kern_level level)
{
	if (level > pt_kern_level_max())
		return NULL;
	return level >= PT_KERN_LEVEL_AVX2 ? &avx2_ops : &scalar_ops;
}

const struct pt_kern_attn_ops *pt_kern_attn_ops(uint32_t dim)
{
	if (dim > PT_KERN_ATTN_MAX_DIM)
		return &scalar_ops;
	return pt_kern_attn_ops_at(pt_kern_level());
}
