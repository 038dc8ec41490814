/* act_neon.c - aarch64 Advanced SIMD twins of act.c's Q8_K quantizer and Q8_0 / Q8_1 block,
 * bit-identical to the scalar code (the quantized activation bytes never depend on the
 * level): the same first-largest |x| (a compare-select, so NaN is never selected, as
 * `ax > amax`), the same scale, products rounded half to even by FCVTNS (equal to the
 * 1.5*2^23 trick and to nearbyintf for these magnitudes), clamps as the scalar code's
 * (FMAXNM / FMINNM treat a quiet NaN as missing, like fmaxf / fminf). */
#include <arm_neon.h>

#include "kern/kern_internal.h"

/* Largest |x| of n (a multiple of 4) values; NaN never wins. */
static inline float amax_n(const float *x, int n)
{
	float32x4_t m = vdupq_n_f32(0.0f);
	for (int j = 0; j < n; j += 4) {
		const float32x4_t a = vabsq_f32(vld1q_f32(x + j));
		m = vbslq_f32(vcgtq_f32(a, m), a, m);
	}
	float l[4], r = 0.0f;
	vst1q_f32(l, m);
	for (int i = 0; i < 4; i++)
		r = l[i] > r ? l[i] : r;
	return r;
}

void pt_kern_quantize_q8_k_neon(const float *x, uint8_t *out, size_t n)
{
	for (size_t b = 0; b < n / QKK; b++, x += QKK, out += Q8K_B) {
		const float amax = amax_n(x, QKK);
		int8_t *qs = (int8_t *)(out + Q8K_QS);
		int16_t bsums[16] = { 0 };
		float d = 0.0f;
		if (amax == 0.0f) {
			memset(qs, 0, QKK);
		} else {
			float max = 0.0f;
			for (int j = 0; j < QKK; j++) /* the first value of that magnitude */
				if (__builtin_fabsf(x[j]) == amax) {
					max = x[j];
					break;
				}
			const float iscale = -127.0f / max;
			const int32x4_t lim = vdupq_n_s32(127);
			for (int j = 0; j < QKK; j += 16) {
				int32x4_t v[4];
				for (int k = 0; k < 4; k++)
					v[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)), lim);
				/* (int8_t) of an int in [-128, 127]: narrowing keeps the value */
				const int16x8_t h0 = vcombine_s16(vmovn_s32(v[0]), vmovn_s32(v[1]));
				const int16x8_t h1 = vcombine_s16(vmovn_s32(v[2]), vmovn_s32(v[3]));
				vst1q_s8(qs + j, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
				bsums[j / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
			}
			d = 1.0f / iscale;
		}
		memcpy(out, &d, 4);
		memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
	}
}

int pt_kern_q8_block_neon(const float *x, int8_t *qs, float *d_out)
{
	const float amax = amax_n(x, QK);
	const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
	const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
	int32x4_t q[8], s = vdupq_n_s32(0);
	for (int k = 0; k < 8; k++) {
		const float32x4_t p = vmulq_n_f32(vld1q_f32(x + 4 * k), id);
		q[k] = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(p, lo), hi));
		s = vaddq_s32(s, q[k]);
	}
	for (int k = 0; k < 8; k += 4) {
		const int16x8_t h0 = vcombine_s16(vmovn_s32(q[k]), vmovn_s32(q[k + 1]));
		const int16x8_t h1 = vcombine_s16(vmovn_s32(q[k + 2]), vmovn_s32(q[k + 3]));
		vst1q_s8(qs + 4 * k, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
	}
	*d_out = amax / 127.0f;
	return vaddvq_s32(s);
}
