/* test_attn.c - the attention inner loops give bit-identical results at every CPU level
 * (the AVX2 twins must reproduce the scalar FMA chains and F16 rounding exactly). */
#include <math.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "test.h"

#define ROWS PT_KERN_ATTN_ROWS
#define DIM 203 /* not a multiple of 8: the tails run too */

static uint32_t rng_next(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static float rnd(uint32_t *s, float scale)
{
	return ((float)rng_next(s) / 16777216.0f * 2.0f - 1.0f) * scale;
}

static void fill(uint32_t *s, uint16_t *h, float *f, uint32_t n, float scale)
{
	for (uint32_t i = 0; i < n; i++) {
		const float x = rnd(s, scale);
		h[i] = pt_f32_to_fp16(x);
		f[i] = x;
	}
}

PT_TEST(test_attn_levels_bit_identical)
{
	const struct pt_kern_attn_ops *ref = pt_kern_attn_ops_at(PT_KERN_LEVEL_SCALAR);
	REQUIRE(ref != NULL);
	static uint16_t k[ROWS][DIM], qh[DIM], acc_a[DIM], acc_b[DIM], v[DIM], h_a[DIM], h_b[DIM];
	static float qf[DIM], kf[DIM], f_a[DIM], f_b[DIM], vf[DIM];
	uint32_t seed = 7;
	for (int lv = PT_KERN_LEVEL_AVX2; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue; /* the CPU lacks the level */
		for (int trial = 0; trial < 20; trial++) {
			const float scale = trial < 10 ? 4.0f : 3000.0f; /* large: F16 overflow */
			for (int r = 0; r < ROWS; r++)
				fill(&seed, k[r], kf, DIM, scale);
			fill(&seed, qh, qf, DIM, 2.0f);
			const uint16_t *rows[ROWS];
			for (int r = 0; r < ROWS; r++)
				rows[r] = k[r];
			const uint32_t n_rows = 1 + (uint32_t)trial % ROWS, n = DIM - (uint32_t)trial;
			float d_a[ROWS] = { 0 }, d_b[ROWS] = { 0 };
			ref->dots_f32q(rows, n_rows, qf, n, d_a);
			ops->dots_f32q(rows, n_rows, qf, n, d_b);
			CHECK(memcmp(d_a, d_b, sizeof d_a) == 0);
			ref->dots_f16q(rows, n_rows, qh, n, d_a);
			ops->dots_f16q(rows, n_rows, qh, n, d_b);
			CHECK(memcmp(d_a, d_b, sizeof d_a) == 0);
			fill(&seed, acc_a, f_a, DIM, scale);
			fill(&seed, v, vf, DIM, scale);
			memcpy(acc_b, acc_a, sizeof acc_a);
			memcpy(f_b, f_a, sizeof f_a);
			const float s = rnd(&seed, 1.5f);
			ref->axpy_f16(acc_a, v, s, n);
			ops->axpy_f16(acc_b, v, s, n);
			ref->scale_f16(acc_a, s * 0.7f, n);
			ops->scale_f16(acc_b, s * 0.7f, n);
			CHECK(memcmp(acc_a, acc_b, sizeof acc_a) == 0);
			ref->axpy_f32(f_a, vf, s, n);
			ops->axpy_f32(f_b, vf, s, n);
			ref->scale_f32(f_a, s * 0.7f, n);
			ops->scale_f32(f_b, s * 0.7f, n);
			CHECK(memcmp(f_a, f_b, sizeof f_a) == 0);
			ref->f32_to_f16(f_a, h_a, n);
			ops->f32_to_f16(f_a, h_b, n);
			CHECK(memcmp(h_a, h_b, n * sizeof(uint16_t)) == 0);
			ref->f16_to_f32(h_a, f_a, n);
			ops->f16_to_f32(h_a, f_b, n);
			CHECK(memcmp(f_a, f_b, n * sizeof(float)) == 0);
		}
	}
}

PT_TEST(test_attn_f16_conversions_match_reference_on_all_codes)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		static uint16_t h[65536], back[65536];
		static float f[65536];
		for (uint32_t i = 0; i < 65536; i++)
			h[i] = (uint16_t)i;
		ops->f16_to_f32(h, f, 65536);
		uint32_t bad = 0;
		for (uint32_t i = 0; i < 65536; i++) {
			const float r = pt_fp16_to_f32((uint16_t)i);
			if (!isnan(r) && memcmp(&r, &f[i], 4) != 0)
				bad++;
		}
		CHECK_EQ_INT(bad, 0);
		/* non-NaN codes round-trip; halfway values round to even like the reference */
		ops->f32_to_f16(f, back, 65536);
		bad = 0;
		for (uint32_t i = 0; i < 65536; i++)
			if (!isnan(f[i]) && back[i] != h[i])
				bad++;
		CHECK_EQ_INT(bad, 0);
		float mid[3] = { 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f };
		uint16_t got[3];
		ops->f32_to_f16(mid, got, 3);
		for (int i = 0; i < 3; i++)
			CHECK_EQ_INT(got[i], pt_f32_to_fp16(mid[i]));
	}
}
