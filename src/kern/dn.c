/* dn.c - Gated DeltaNet inner loops: the scalar reference and the level dispatch
 * (kern.h, struct pt_kern_dn_ops). */
#include "kern/kern.h"

static float dot(const float *a, const float *b, uint32_t n)
{
	float s = 0.0f;
	for (uint32_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static void axpy(float *y, const float *x, float a, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] += x[i] * a;
}

static float row_step(float *r, const float *k, const float *q, float eg, float v, float beta,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		r[i] *= eg;
	const float d = (v - dot(r, k, n)) * beta;
	axpy(r, k, d, n);
	return dot(r, q, n);
}

/* C (+)= A B, row by row in axpy order (every output summed over k in order). */
static void gemm(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
		 const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags)
{
	for (uint32_t i = 0; i < m; i++) {
		float *ci = c + i * ldc;
		const uint32_t ke = (flags & PT_DN_GEMM_TRI_A) && i + 1 < k ? i + 1 : k;
		const uint32_t ne = (flags & PT_DN_GEMM_TRI_C) && i + 1 < n ? i + 1 : n;
		for (uint32_t j = 0; j < ne; j++)
			ci[j] = flags & PT_DN_GEMM_ACC ? ci[j] * cs : 0.0f;
		for (uint32_t l = 0; l < ke; l++)
			axpy(ci, b + l * ldb, a[i * lda + l], ne);
	}
}

static const struct pt_kern_dn_ops scalar_ops = { dot, axpy, row_step, gemm };

#if defined(PT_KERN_X86)
float pt_kern_dn_dot_avx2(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_avx2(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_avx2(float *r, const float *k, const float *q, float eg, float v,
			       float beta, uint32_t n);
void pt_kern_dn_gemm_avx2(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);
void pt_kern_dn_gemm_avx512(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			    const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);
float pt_kern_dn_dot_avx512(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_avx512(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_avx512(float *r, const float *k, const float *q, float eg, float v,
				 float beta, uint32_t n);
static const struct pt_kern_dn_ops avx2_ops = { pt_kern_dn_dot_avx2, pt_kern_dn_axpy_avx2,
						pt_kern_dn_row_step_avx2, pt_kern_dn_gemm_avx2 };
static const struct pt_kern_dn_ops avx512_ops = { pt_kern_dn_dot_avx512, pt_kern_dn_axpy_avx512,
						  pt_kern_dn_row_step_avx512,
						  pt_kern_dn_gemm_avx512 };
#elif defined(PT_KERN_ARM64)
float pt_kern_dn_dot_neon(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_neon(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_neon(float *r, const float *k, const float *q, float eg, float v,
			       float beta, uint32_t n);
void pt_kern_dn_gemm_neon(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
			  const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);
/* the loops are F32: dotprod and i8mm add nothing, so every aarch64 level runs these */
static const struct pt_kern_dn_ops neon_ops = { pt_kern_dn_dot_neon, pt_kern_dn_axpy_neon,
						pt_kern_dn_row_step_neon, pt_kern_dn_gemm_neon };
#endif

const struct pt_kern_dn_ops *pt_kern_dn_ops_at(enum pt_kern_level level)
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
		return &neon_ops;
#endif
	return &scalar_ops;
}

const struct pt_kern_dn_ops *pt_kern_dn_ops(void)
{
	return pt_kern_dn_ops_at(pt_kern_level());
}
