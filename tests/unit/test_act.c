/* test_act.c - activation quantization gives the same bytes at every CPU level (the AVX2
 * Q8_K quantizer against the scalar one), including ties, zeros, NaN and infinities. */
#include <math.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "test.h"

#define N 1024
#define ROW_BYTES (4 * 292)

static void fill(uint32_t *s, float *x, int kind)
{
	for (int i = 0; i < N; i++) {
		*s = *s * 1664525u + 1013904223u;
		const float u = (float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f;
		x[i] = kind == 1 ? roundf(u * 8.0f) * 0.5f /* many ties and repeats */
		       : u * (kind == 2 ? 1e-30f : 3.0f);
	}
	if (kind == 3) { /* non-finite values and an all-zero block */
		x[3] = NAN;
		x[300] = INFINITY;
		x[600] = -NAN;
		memset(x + 768, 0, 256 * sizeof(float));
	}
}

PT_TEST(test_act_q8_k_same_bytes_at_every_level)
{
	const enum pt_kern_level saved = pt_kern_level();
	struct pt_error err = { 0 };
	static float x[N];
	static uint8_t ref[ROW_BYTES], got[ROW_BYTES];
	uint32_t seed = 11;
	for (int trial = 0; trial < 40; trial++) {
		fill(&seed, x, trial % 4);
		REQUIRE(pt_kern_set_level(PT_KERN_LEVEL_SCALAR, &err) == PT_OK);
		pt_kern_quantize_row(PT_TYPE_Q8_K, x, ref, N);
		for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv <= (int)pt_kern_level_max(); lv++) {
			REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
			memset(got, 0xa5, sizeof got);
			pt_kern_quantize_row(PT_TYPE_Q8_K, x, got, N);
			CHECK(memcmp(ref, got, sizeof ref) == 0);
		}
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
}

/* The Q8_0 and Q8_1 activation rows (AVX2 block quantizer vs scalar). */
PT_TEST(test_act_q8_0_q8_1_same_bytes_at_every_level)
{
	const enum pt_kern_level saved = pt_kern_level();
	struct pt_error err = { 0 };
	static float x[N];
	static uint8_t ref[N / 32 * 36], got[N / 32 * 36];
	const enum pt_type types[2] = { PT_TYPE_Q8_0, PT_TYPE_Q8_1 };
	const size_t bytes[2] = { N / 32 * 34, N / 32 * 36 };
	uint32_t seed = 5;
	for (int trial = 0; trial < 40; trial++) {
		fill(&seed, x, trial % 4);
		if (trial % 4 == 0) /* one value of largest magnitude negative, one exact tie */
			x[40] = -7.0f, x[41] = 3.5f;
		for (int k = 0; k < 2; k++) {
			REQUIRE(pt_kern_set_level(PT_KERN_LEVEL_SCALAR, &err) == PT_OK);
			pt_kern_quantize_row(types[k], x, ref, N);
			for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv <= (int)pt_kern_level_max(); lv++) {
				REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, &err) == PT_OK);
				memset(got, 0xa5, sizeof got);
				pt_kern_quantize_row(types[k], x, got, N);
				CHECK(memcmp(ref, got, bytes[k]) == 0);
			}
		}
	}
	CHECK(pt_kern_set_level(saved, &err) == PT_OK);
}
