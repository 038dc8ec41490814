/* attn_internal.h - shared by the attention kernel files and kern/exp_avx2.h: the constants
 * of the attention exponential (pt_kern_expf and its SIMD twins must use the very same ones)
 * and each level's kernel entry points. */
#ifndef PT_KERN_ATTN_INTERNAL_H
#define PT_KERN_ATTN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Inputs are clamped to [LO, HI]: below LO the result rounds to 0, above HI it overflows to
 * infinity, and inside it rint(x log2 e) stays in [-150, 129]. */
#define ATTN_EXP_LO (-104.0f)
#define ATTN_EXP_HI 89.0f
#define ATTN_LOG2E 1.44269504088896341f
#define ATTN_LN2_HI 0.693145751953125f         /* 15 significant bits: k * hi is exact */
#define ATTN_LN2_LO 1.42860682030941723212e-6f /* ln 2 - hi */
#define ATTN_EXP_C3 (1.0f / 6.0f)
#define ATTN_EXP_C4 (1.0f / 24.0f)
#define ATTN_EXP_C5 (1.0f / 120.0f)
#define ATTN_EXP_C6 (1.0f / 720.0f)
#define ATTN_EXP_C7 (1.0f / 5040.0f)

/* tanh (pt_kern_tanhf): below TANH_SERIES_END its odd Taylor series to x^21 (C3 .. C21, the
 * coefficients rounded to F32; the first term left out is below 8e-10 there), from it on
 * 1 - 2 / (e^(2x) + 1) with x clamped to TANH_X_MAX, past which tanh rounds to 1. */
#define TANH_SERIES_END 0.625f
#define TANH_X_MAX 10.0f
#define TANH_C3 (-3.333333433e-01f)
#define TANH_C5 1.333333403e-01f
#define TANH_C7 (-5.396825448e-02f)
#define TANH_C9 2.186948806e-02f
#define TANH_C11 (-8.863235824e-03f)
#define TANH_C13 3.592127934e-03f
#define TANH_C15 (-1.455834368e-03f)
#define TANH_C17 5.900274264e-04f
#define TANH_C19 (-2.391291200e-04f)
#define TANH_C21 9.691537707e-05f

/* 2^n for n in [-126, 127] */
static inline float attn_pow2(int n)
{
	const uint32_t bits = (uint32_t)(n + 127) << 23;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* The softmax sums, s = s * ms + vs key by key (a rounded product, then a rounded sum, as
 * the scalar loop), for k <= 8 queries whose chains run interleaved in registers (one
 * query's chain is latency-bound): the NEON twin's; the x86 twins run the same chains one
 * query a lane over transposed rows (sums8 / sums16).  up: whether any of the k queries' m rose; where none
 * did, every ms is 1 and s * 1 == s exactly, so only the sums remain. */
static inline __attribute__((always_inline)) void sums_k(size_t ld, const uint32_t k,
							 uint32_t n, float *s, const float *ms,
							 const float *vs, bool up)
{
	float t[8];
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < k; i++)
		t[i] = s[i];
	if (up) {
		for (uint32_t j = 0; j < n; j++) {
			_Pragma("GCC unroll 8")
			for (uint32_t i = 0; i < k; i++) {
				const float p = t[i] * ms[i * ld + j];
				t[i] = p + vs[i * ld + j];
			}
		}
	} else {
		for (uint32_t j = 0; j < n; j++) {
			_Pragma("GCC unroll 8")
			for (uint32_t i = 0; i < k; i++)
				t[i] += vs[i * ld + j];
		}
	}
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < k; i++)
		s[i] = t[i];
}

static inline void sums(size_t ld, uint32_t k, uint32_t n, float *s, const float *ms,
			const float *vs, const bool *upv)
{
	bool up = false;
	for (uint32_t i = 0; i < k; i++)
		up |= upv[i];
	switch (k) {
	case 1: sums_k(ld, 1, n, s, ms, vs, up); break;
	case 2: sums_k(ld, 2, n, s, ms, vs, up); break;
	case 3: sums_k(ld, 3, n, s, ms, vs, up); break;
	case 4: sums_k(ld, 4, n, s, ms, vs, up); break;
	case 5: sums_k(ld, 5, n, s, ms, vs, up); break;
	case 6: sums_k(ld, 6, n, s, ms, vs, up); break;
	case 7: sums_k(ld, 7, n, s, ms, vs, up); break;
	default: sums_k(ld, 8, n, s, ms, vs, up); break;
	}
}

#define ATTN_VACC_ARGS                                                                          \
	float *acc, size_t acc_ld, uint32_t n_q, const uint16_t *v, size_t v_stride, uint32_t n_k, \
		const float *ms, const float *vs, size_t ld, uint32_t n, const uint16_t *v_next
#define ATTN_DOTS_ARGS                                                                         \
	const uint16_t *kb, size_t kb_stride, uint32_t n_blk, const float *q, size_t q_stride,   \
		uint32_t n_q, uint32_t n, float *out, size_t ld, const uint16_t *kb_next
#define ATTN_DOTS_W_ARGS                                                                       \
	const float *kw, size_t kw_stride, uint32_t n_blk, const float *q, size_t q_stride,      \
		uint32_t n_q, uint32_t n, float *out, size_t ld
#define ATTN_VACC_W_ARGS                                                                       \
	float *acc, size_t acc_ld, uint32_t n_q, const float *v, size_t v_stride, uint32_t n_k,  \
		const float *ms, const float *vs, size_t ld, uint32_t n
#define ATTN_WIDEN_Q8_ARGS                                                                     \
	const int8_t *codes, const uint16_t *scales, uint32_t n, float *y, const int8_t *next
#define ATTN_WIDEN_Q8V_ARGS                                                                    \
	const int8_t *rows, size_t row_bytes, uint32_t n_rows, uint32_t n, float *y,             \
		const int8_t *next
#define ATTN_SOFTMAX_ARGS                                                                      \
	const float *dots, size_t ld, uint32_t n_q, uint32_t n, float scale, float *m, float *s, \
		float *ms, float *vs

void pt_kern_attn_dots_avx2(ATTN_DOTS_ARGS);
void pt_kern_attn_softmax_avx2(ATTN_SOFTMAX_ARGS);
void pt_kern_attn_vacc_f16_avx2(ATTN_VACC_ARGS);
void pt_kern_attn_vacc_f32_avx2(ATTN_VACC_ARGS);
void pt_kern_attn_dots_w_avx2(ATTN_DOTS_W_ARGS);
void pt_kern_attn_vacc_w_avx2(ATTN_VACC_W_ARGS);
void pt_kern_widen_q8_k_avx2(ATTN_WIDEN_Q8_ARGS);
void pt_kern_widen_q8_v_avx2(ATTN_WIDEN_Q8V_ARGS);
void pt_kern_attn_dots_q8_avx2(const int8_t *kb, size_t kb_stride, uint32_t n_blk,
			       const float *q, size_t q_stride, uint32_t n_q, uint32_t n,
			       float *out, size_t ld, const int8_t *kb_next);
void pt_kern_attn_vacc_q8_avx2(float *acc, size_t acc_ld, uint32_t n_q, const int8_t *v,
			       size_t v_stride, uint32_t n_k, const float *ms, const float *vs,
			       size_t ld, uint32_t n, const int8_t *v_next);
void pt_kern_attn_scale_f32_avx2(float *acc, float ms, uint32_t n);
void pt_kern_attn_axpy_f32_avx2(float *acc, const float *v, float vs, uint32_t n);
void pt_kern_f16_to_f32_avx2(const uint16_t *x, float *y, uint32_t n);
void pt_kern_f32_to_f16_avx2(const float *x, uint16_t *y, uint32_t n);

void pt_kern_attn_dots_avx512(ATTN_DOTS_ARGS);
void pt_kern_attn_softmax_avx512(ATTN_SOFTMAX_ARGS);
void pt_kern_attn_vacc_f16_avx512(ATTN_VACC_ARGS);
void pt_kern_attn_vacc_f32_avx512(ATTN_VACC_ARGS);
void pt_kern_attn_dots_w_avx512(ATTN_DOTS_W_ARGS);
void pt_kern_attn_vacc_w_avx512(ATTN_VACC_W_ARGS);
void pt_kern_widen_q8_k_avx512(ATTN_WIDEN_Q8_ARGS);
void pt_kern_attn_dots_q8_avx512(const int8_t *kb, size_t kb_stride, uint32_t n_blk,
				 const float *q, size_t q_stride, uint32_t n_q, uint32_t n,
				 float *out, size_t ld, const int8_t *kb_next);
void pt_kern_attn_vacc_q8_avx512(float *acc, size_t acc_ld, uint32_t n_q, const int8_t *v,
				 size_t v_stride, uint32_t n_k, const float *ms, const float *vs,
				 size_t ld, uint32_t n, const int8_t *v_next);

/* aarch64 Advanced SIMD (attn_neon.c): every aarch64 level */
void pt_kern_attn_dots_neon(ATTN_DOTS_ARGS);
void pt_kern_attn_softmax_neon(ATTN_SOFTMAX_ARGS);
void pt_kern_attn_vacc_f16_neon(ATTN_VACC_ARGS);
void pt_kern_attn_vacc_f32_neon(ATTN_VACC_ARGS);
void pt_kern_attn_dots_w_neon(ATTN_DOTS_W_ARGS);
void pt_kern_attn_vacc_w_neon(ATTN_VACC_W_ARGS);
void pt_kern_attn_scale_f32_neon(float *acc, float ms, uint32_t n);
void pt_kern_attn_axpy_f32_neon(float *acc, const float *v, float vs, uint32_t n);
void pt_kern_f16_to_f32_neon(const uint16_t *x, float *y, uint32_t n);
void pt_kern_f32_to_f16_neon(const float *x, uint16_t *y, uint32_t n);

#endif
