/* act.c - activation quantizers: F32 rows to the partner formats of the dot products
 * (GGUF-AND-QUANTS.md section 6.2).  Quantized activations are identical whatever the
 * dispatch level: Q8_K (every K-quant product) and the Q8_0 / Q8_1 block have AVX2 and NEON
 * twins (act_avx2.c, act_neon.c) that reproduce these bytes exactly (tested); the other formats have one
 * implementation. */
#include "kern/kern_internal.h"

#include <assert.h>
#include <math.h>

#include "quant/types.h"

#if defined(PT_KERN_X86)
void pt_kern_quantize_q8_k_avx2(const float *x, uint8_t *out, size_t n);
int pt_kern_q8_block_avx2(const float *x, int8_t *qs, float *d_out);
#elif defined(PT_KERN_ARM64)
void pt_kern_quantize_q8_k_neon(const float *x, uint8_t *out, size_t n);
int pt_kern_q8_block_neon(const float *x, int8_t *qs, float *d_out);
#endif

/* ggml's nearest_int: round half to even via the 1.5*2^23 trick (|x| <= 4194303). */
static inline int nearest_int(float fval)
{
	float val = fval + 12582912.f;
	int32_t i;
	memcpy(&i, &val, 4);
	return (i & 0x007fffff) - 0x00400000;
}

static float block_amax(const float *x, size_t n)
{
	float amax = 0.0f;
	for (size_t j = 0; j < n; j++) {
		float v = fabsf(x[j]);
		amax = v > amax ? v : amax;
	}
	return amax;
}

/* One Q8_0-style block: returns the integer sum of the quants. d is amax/127 (float). */
static int q8_block(const float *x, int8_t *qs, float *d_out)
{
	float amax = block_amax(x, QK);
	float d = amax / 127.0f;
	float id = amax != 0.0f ? 127.0f / amax : 0.0f;
	int sum = 0;
	for (int j = 0; j < QK; j++) {
		/* nearbyintf rounds half to even in the default rounding mode, like
		 * _mm256_round_ps(_MM_ROUND_NEAREST).  For finite rows |x*id| <= 127 already;
		 * the clamp only keeps a NaN/inf row (a broken model) free of undefined casts. */
		int q = (int)nearbyintf(fminf(fmaxf(x[j] * id, -127.0f), 127.0f));
		qs[j] = (int8_t)q;
		sum += q;
	}
	*d_out = d;
	return sum;
}

/* The block quantizer of the current level (same bytes at every level). */
typedef int (*q8_block_fn)(const float *x, int8_t *qs, float *d_out);

static q8_block_fn q8_block_at_level(void)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() >= PT_KERN_LEVEL_AVX2)
		return pt_kern_q8_block_avx2;
#elif defined(PT_KERN_ARM64)
	if (pt_kern_level() >= PT_KERN_LEVEL_NEON)
		return pt_kern_q8_block_neon;
#endif
	return q8_block;
}

static void quantize_q8_0(const float *x, uint8_t *out, size_t n)
{
	const q8_block_fn blk = q8_block_at_level();
	for (size_t b = 0; b < n / QK; b++, x += QK, out += Q8_0_B) {
		float d;
		blk(x, (int8_t *)(out + 2), &d);
		uint16_t h = pt_f32_to_fp16(d);
		memcpy(out, &h, 2);
	}
}

static void quantize_q8_1(const float *x, uint8_t *out, size_t n)
{
	const q8_block_fn blk = q8_block_at_level();
	for (size_t b = 0; b < n / QK; b++, x += QK, out += Q8_1_B) {
		float d;
		int sum = blk(x, (int8_t *)(out + 4), &d);
		uint16_t h = pt_f32_to_fp16(d);
		uint16_t s = pt_f32_to_fp16((float)sum * d);
		memcpy(out, &h, 2);
		memcpy(out + 2, &s, 2);
	}
}

static void quantize_q8_k(const float *x, uint8_t *out, size_t n)
{
	for (size_t b = 0; b < n / QKK; b++, x += QKK, out += Q8K_B) {
		float amax = 0.0f, max = 0.0f;
		for (int j = 0; j < QKK; j++) {
			float ax = fabsf(x[j]);
			if (ax > amax) {
				amax = ax;
				max = x[j];
			}
		}
		int8_t *qs = (int8_t *)(out + Q8K_QS);
		int16_t bsums[16] = { 0 };
		float d = 0.0f;
		if (amax == 0.0f) {
			memset(qs, 0, QKK);
		} else {
			const float iscale = -127.0f / max;
			for (int j = 0; j < QKK; j++) {
				int v = nearest_int(iscale * x[j]);
				qs[j] = (int8_t)(v < 127 ? v : 127);
				bsums[j / 16] = (int16_t)(bsums[j / 16] + qs[j]);
			}
			d = 1.0f / iscale;
		}
		memcpy(out, &d, 4);
		memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
	}
}

void pt_kern_quantize_row(enum pt_type act_type, const float *x, void *out, size_t n)
{
	uint8_t *o = out;
	switch (act_type) {
	case PT_TYPE_F32:
		memcpy(o, x, n * sizeof(float));
		return;
	case PT_TYPE_F16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = pt_f32_to_fp16(x[i]);
			memcpy(o + 2 * i, &h, 2);
		}
		return;
	case PT_TYPE_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = pt_f32_to_bf16(x[i]);
			memcpy(o + 2 * i, &h, 2);
		}
		return;
	case PT_TYPE_Q8_0:
		assert(n % QK == 0);
		quantize_q8_0(x, o, n);
		return;
	case PT_TYPE_Q8_1:
		assert(n % QK == 0);
		quantize_q8_1(x, o, n);
		return;
	case PT_TYPE_Q8_K:
		assert(n % QKK == 0);
#if defined(PT_KERN_X86)
		if (pt_kern_level() >= PT_KERN_LEVEL_AVX2) {
			pt_kern_quantize_q8_k_avx2(x, o, n);
			return;
		}
#elif defined(PT_KERN_ARM64)
		if (pt_kern_level() >= PT_KERN_LEVEL_NEON) {
			pt_kern_quantize_q8_k_neon(x, o, n);
			return;
		}
#endif
		quantize_q8_k(x, o, n);
		return;
	default:
		assert(!"not an activation format");
	}
}
