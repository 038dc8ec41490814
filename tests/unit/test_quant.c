/* test_quant.c - quant module: hand-built known-answer blocks for every dequantizer, the
 * fp16/bf16/e8m0 conversions, the type table's agreement with blocks.h and the function
 * table, validation (ggml_validate_row_data semantics) and the row API's argument errors.
 * Round trips, adversarial rows and quantizer properties are in test_quant_kq.c. */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/types.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* fp16 bit patterns used below */
#define H_1 0x3C00     /* 1.0 */
#define H_0_5 0x3800   /* 0.5 */
#define H_0_25 0x3400  /* 0.25 */
#define H_0_125 0x3000 /* 0.125 */
#define H_2 0x4000     /* 2.0 */
#define H_M1 0xBC00    /* -1.0 */

static void dequant(uint32_t type, const void *blk, float *y, uint64_t n)
{
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_quant_dequant_row(type, blk, y, n, &err), PT_OK);
}

PT_TEST(test_quant_dequant_q4_0_nibble_order)
{
	struct pt_block_q4_0 b = { .d = H_0_5 };
	float y[32];
	for (int j = 0; j < 16; j++) /* low nibble = element j, high = element j + 16 */
		b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	dequant(PT_TYPE_Q4_0, &b, y, 32);
	for (int j = 0; j < 16; j++) {
		CHECK(y[j] == (float)(j - 8) * 0.5f);
		CHECK(y[j + 16] == (float)(7 - j) * 0.5f);
	}
	CHECK(y[0] == -4.0f && y[15] == 3.5f && y[16] == 3.5f && y[31] == -4.0f);
}

PT_TEST(test_quant_dequant_q4_1_scale_and_min)
{
	struct pt_block_q4_1 b = { .d = H_0_25, .m = H_M1 };
	float y[32];
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)(j | ((j ^ 5) << 4));
	dequant(PT_TYPE_Q4_1, &b, y, 32);
	for (int j = 0; j < 16; j++) {
		CHECK(y[j] == (float)j * 0.25f - 1.0f);
		CHECK(y[j + 16] == (float)(j ^ 5) * 0.25f - 1.0f);
	}
	CHECK(y[16] == 0.25f); /* code 5 */
}

PT_TEST(test_quant_dequant_q5_0_high_bits)
{
	struct pt_block_q5_0 b = { .d = H_1, .qh = { 0xFF, 0xFF, 0x00, 0x00 } };
	float y[32];
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)(j | (j << 4));
	dequant(PT_TYPE_Q5_0, &b, y, 32);
	for (int j = 0; j < 16; j++) {
		CHECK(y[j] == (float)j);           /* (j + 16) - 16: qh bit j set */
		CHECK(y[j + 16] == (float)(j - 16)); /* qh bit j + 16 clear */
	}
}

PT_TEST(test_quant_dequant_q5_1_high_bits)
{
	/* qh = 0x80000001 little-endian: element 0 and element 31 have the 5th bit */
	struct pt_block_q5_1 b = { .d = H_0_5, .m = H_2, .qh = { 0x01, 0, 0, 0x80 } };
	float y[32];
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)((15 - j) | (j << 4));
	dequant(PT_TYPE_Q5_1, &b, y, 32);
	CHECK(y[0] == 17.5f);  /* (15 + 16) * 0.5 + 2 */
	CHECK(y[31] == 17.5f); /* (15 + 16) * 0.5 + 2 */
	for (int j = 1; j < 16; j++)
		CHECK(y[j] == (float)(15 - j) * 0.5f + 2.0f);
	for (int j = 0; j < 15; j++)
		CHECK(y[j + 16] == (float)j * 0.5f + 2.0f);
}

PT_TEST(test_quant_dequant_q8_0_signed)
{
	struct pt_block_q8_0 b = { .d = H_0_125 };
	float y[32];
	for (int j = 0; j < 32; j++)
		b.qs[j] = (int8_t)(j * 8 - 128);
	dequant(PT_TYPE_Q8_0, &b, y, 32);
	for (int j = 0; j < 32; j++)
		CHECK(y[j] == (float)(j * 8 - 128) * 0.125f);
	CHECK(y[0] == -16.0f && y[31] == 15.0f);
}

/* Spec 5.2 element mapping for the 2-bit formats: e -> qs[32(e/128) + e%32] >> 2((e%128)/32) */
static int spec_q2(const uint8_t *qs, int e)
{
	return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

PT_TEST(test_quant_dequant_q2_K_layout)
{
	struct pt_block_q2_K b = { .d = H_1, .dmin = H_0_5 };
	float y[256];
	for (int i = 0; i < 16; i++)
		b.scales[i] = (uint8_t)(i | ((15 - i) << 4)); /* scale i, min 15 - i */
	for (int i = 0; i < 64; i++)
		b.qs[i] = (uint8_t)i;
	dequant(PT_TYPE_Q2_K, &b, y, 256);
	for (int e = 0; e < 256; e++) {
		int sb = e / 16;
		CHECK(y[e] == (float)sb * (float)spec_q2(b.qs, e) - 0.5f * (float)(15 - sb));
	}
	/* hand-worked: e=37: sub-block 2, qs[5]=5, shift 2 -> 1: 2*1 - 6.5 */
	CHECK(y[37] == -4.5f);
	/* e=200: sub-block 12, qs[32+8]=40=0b101000, shift 4 -> 2: 12*2 - 1.5 */
	CHECK(y[200] == 22.5f);
	CHECK(y[0] == -7.5f); /* q 0, min 15 * 0.5 */
}

PT_TEST(test_quant_dequant_q3_K_scales_and_hmask)
{
	struct pt_block_q3_K b;
	memset(&b, 0, sizeof(b));
	b.d = H_1;
	/* sub-block scale s_b = b - 8, stored as 6 bits (s + 32): low nibble in byte b (b<8) or
	 * high nibble of byte b-8; the top 2 bits in byte 8 + b%4 at bit 2(b/4) */
	for (int sb = 0; sb < 16; sb++) {
		int l = sb - 8 + 32;
		if (sb < 8)
			b.scales[sb] |= (uint8_t)(l & 0xF);
		else
			b.scales[sb - 8] |= (uint8_t)((l & 0xF) << 4);
		b.scales[8 + sb % 4] |= (uint8_t)((l >> 4) << (2 * (sb / 4)));
	}
	for (int sb = 0; sb < 16; sb++)
		CHECK_EQ_INT(pt_get_scale_q3_K(sb, b.scales), sb - 8);
	memset(b.qs, 0x1B, sizeof(b.qs)); /* low2 = 3, 2, 1, 0 for j = 0..3 */
	memset(b.hmask, 0x0F, sizeof(b.hmask)); /* hbit set for elements 0..127 */
	float y[256];
	dequant(PT_TYPE_Q3_K, &b, y, 256);
	for (int e = 0; e < 256; e++) {
		int low2 = 3 - (e % 128) / 32, q = low2 - (e < 128 ? 0 : 4);
		CHECK(y[e] == (float)(e / 16 - 8) * (float)q);
	}
	CHECK(y[0] == -24.0f);   /* scale -8, q 3 */
	CHECK(y[255] == -28.0f); /* scale 7, q 0 - 4 */
	/* all scale bytes zero decode to -32 */
	uint8_t zero[12] = { 0 };
	CHECK_EQ_INT(pt_get_scale_q3_K(13, zero), -32);
}

/* Pack 6-bit scales/mins the way GGUF-AND-QUANTS.md 5.4 describes. */
static void pack_k4(const int *sc, const int *m, uint8_t *s)
{
	memset(s, 0, 12);
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
		s[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
		s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
	}
}

PT_TEST(test_quant_dequant_q4_K_scale_min_packing)
{
	struct pt_block_q4_K b = { .d = H_0_5, .dmin = H_0_25 };
	int sc[8], m[8];
	for (int j = 0; j < 8; j++) {
		sc[j] = 10 + 7 * j; /* 10..59: uses the top 2 bits */
		m[j] = 63 - 5 * j;
	}
	pack_k4(sc, m, b.scales);
	for (int j = 0; j < 8; j++) {
		uint8_t s, mm;
		pt_get_scale_min_k4(j, b.scales, &s, &mm);
		CHECK_EQ_INT(s, sc[j]);
		CHECK_EQ_INT(mm, m[j]);
	}
	for (int i = 0; i < 128; i++)
		b.qs[i] = (uint8_t)((i & 0xF) | ((15 - (i & 0xF)) << 4));
	float y[256];
	dequant(PT_TYPE_Q4_K, &b, y, 256);
	for (int c = 0; c < 4; c++) {
		for (int l = 0; l < 32; l++) {
			int lo = l & 0xF, hi = 15 - lo;
			CHECK(y[64 * c + l] == 0.5f * (float)sc[2 * c] * (float)lo -
					       0.25f * (float)m[2 * c]);
			CHECK(y[64 * c + 32 + l] == 0.5f * (float)sc[2 * c + 1] * (float)hi -
						    0.25f * (float)m[2 * c + 1]);
		}
	}
	CHECK(y[1] == 5.0f - 15.75f); /* 0.5*10*1 - 0.25*63 */
}

PT_TEST(test_quant_dequant_q5_K_high_bits)
{
	struct pt_block_q5_K b = { .d = H_1, .dmin = H_1 };
	int sc[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, m[8] = { 0 };
	pack_k4(sc, m, b.scales);
	for (int l = 0; l < 32; l++)
		b.qh[l] = (uint8_t)(l * 37);
	for (int i = 0; i < 128; i++)
		b.qs[i] = (uint8_t)((i * 11) & 0xFF);
	float y[256];
	dequant(PT_TYPE_Q5_K, &b, y, 256);
	for (int c = 0; c < 4; c++) {
		for (int l = 0; l < 32; l++) {
			int q0 = (b.qs[32 * c + l] & 0xF) + 16 * ((b.qh[l] >> (2 * c)) & 1);
			int q1 = (b.qs[32 * c + l] >> 4) + 16 * ((b.qh[l] >> (2 * c + 1)) & 1);
			CHECK(y[64 * c + l] == (float)(sc[2 * c] * q0));
			CHECK(y[64 * c + 32 + l] == (float)(sc[2 * c + 1] * q1));
		}
	}
	/* element 33: qs[1] = 11 -> high nibble 0; qh[1] = 37 = 0b100101 bit 1 = 0 -> q 0 */
	CHECK(y[33] == 0.0f);
	/* element 64+2: qs[34] = 374 & 255 = 118 -> low 6; qh[2] = 74 = 0b1001010 bit 2 = 0 */
	CHECK(y[66] == 3.0f * 6.0f);
}

PT_TEST(test_quant_dequant_q6_K_layout)
{
	struct pt_block_q6_K b;
	for (int i = 0; i < 128; i++)
		b.ql[i] = (uint8_t)(i * 7);
	for (int i = 0; i < 64; i++)
		b.qh[i] = (uint8_t)(i * 13);
	for (int i = 0; i < 16; i++)
		b.scales[i] = (int8_t)(3 * i - 20);
	b.d = H_0_25;
	float y[256];
	dequant(PT_TYPE_Q6_K, &b, y, 256);
	for (int h = 0; h < 2; h++) {
		for (int l = 0; l < 32; l++) {
			const uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
			int q[4] = { (ql[l] & 0xF) | ((qh[l] & 3) << 4),
				     (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
				     (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
				     (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4) };
			for (int k = 0; k < 4; k++) {
				int e = 128 * h + 32 * k + l;
				CHECK(y[e] == 0.25f * (float)b.scales[e / 16] * (float)(q[k] - 32));
			}
		}
	}
	/* element 0: ql 0, qh 0 -> q -32, scale -20: 0.25 * -20 * -32 */
	CHECK(y[0] == 160.0f);
	/* element 96+1: ql[33]=231 -> high 14, qh[1]=13 -> bits 6-7 = 0: q -18, scale 3*6-20=-2 */
	CHECK(y[97] == 0.25f * -2.0f * -18.0f);
}

PT_TEST(test_quant_dequant_iq4_nl_table)
{
	struct pt_block_iq4_nl b = { .d = H_2 };
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	float y[32];
	dequant(PT_TYPE_IQ4_NL, &b, y, 32);
	static const int kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				    1, 13, 25, 38, 53, 69, 89, 113 };
	for (int j = 0; j < 16; j++) {
		CHECK(y[j] == 2.0f * (float)kv[j]);
		CHECK(y[j + 16] == 2.0f * (float)kv[15 - j]);
	}
	CHECK(y[0] == -254.0f && y[16] == 226.0f);
}

PT_TEST(test_quant_dequant_iq4_xs_scales)
{
	struct pt_block_iq4_xs b = { .d = H_0_5 };
	static const int ls[8] = { 0, 63, 32, 31, 33, 1, 62, 40 };
	for (int ib = 0; ib < 8; ib++) { /* low 4 bits in nibble ib%2 of byte ib/2 */
		b.scales_l[ib / 2] |= (uint8_t)((ls[ib] & 0xF) << (4 * (ib % 2)));
		b.scales_h |= (uint16_t)((ls[ib] >> 4) << (2 * ib));
	}
	CHECK_EQ_INT(b.scales_l[0], 0xF0);
	CHECK_EQ_INT(b.scales_h, 0x0 | (3 << 2) | (2 << 4) | (1 << 6) | (2 << 8) | (0 << 10) |
				 (3 << 12) | (2 << 14));
	for (int i = 0; i < 128; i++)
		b.qs[i] = (uint8_t)(i * 29);
	float y[256];
	dequant(PT_TYPE_IQ4_XS, &b, y, 256);
	for (int ib = 0; ib < 8; ib++) {
		for (int j = 0; j < 16; j++) {
			uint8_t q = b.qs[16 * ib + j];
			float dl = 0.5f * (float)(ls[ib] - 32);
			CHECK(y[32 * ib + j] == dl * (float)pt_kvalues_iq4nl[q & 0xF]);
			CHECK(y[32 * ib + 16 + j] == dl * (float)pt_kvalues_iq4nl[q >> 4]);
		}
	}
	CHECK(y[0] == -16.0f * -127.0f); /* ls 0 -> -32 * 0.5, code 0 */
}

PT_TEST(test_quant_dequant_mxfp4_e8m0_half)
{
	struct pt_block_mxfp4 b[3] = { { .e = 128 }, { .e = 1 }, { .e = 254 } };
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 16; j++)
			b[k].qs[j] = (uint8_t)(j | ((15 - j) << 4));
	float y[96];
	dequant(PT_TYPE_MXFP4, b, y, 96);
	static const float e2m1[16] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6,
					-0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6 };
	for (int j = 0; j < 16; j++) {
		/* e = 128: half of 2^(128-127), i.e. the E2M1 value times 2 times 0.5 */
		CHECK(y[j] == 2 * e2m1[j] * 1.0f);
		CHECK(y[j + 16] == 2 * e2m1[15 - j]);
		CHECK(y[32 + j] == ldexpf(2 * e2m1[j], -127)); /* e = 1: subnormal 2^-127 */
		CHECK(y[64 + j] == ldexpf(2 * e2m1[j], 126));
	}
	CHECK(y[7] == 12.0f && y[39] == ldexpf(12.0f, -127) && y[47] == ldexpf(-12.0f, -127));
	for (int e = 0; e < 255; e++)
		CHECK(pt_e8m0_to_f32_half((uint8_t)e) == ldexpf(1.0f, e - 128));
	CHECK(pt_e8m0_to_f32_half(255) == ldexpf(1.0f, 127));
}

PT_TEST(test_quant_dequant_plain_types)
{
	uint16_t h[4] = { H_1, 0xC000 /* -2 */, 0x0001 /* 2^-24 */, 0x7BFF /* 65504 */ };
	uint16_t bf[3] = { 0x3F80, 0xC040 /* -3 */, 0x0001 };
	float f[2] = { 1.5f, -0.0f }, y[4];
	dequant(PT_TYPE_F16, h, y, 4);
	CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == ldexpf(1, -24) && y[3] == 65504.0f);
	dequant(PT_TYPE_BF16, bf, y, 3);
	CHECK(y[0] == 1.0f && y[1] == -3.0f && y[2] == ldexpf(1, -133));
	dequant(PT_TYPE_F32, f, y, 2);
	CHECK(y[0] == 1.5f && signbit(y[1]));
}

/* ---- conversions ------------------------------------------------------------------------ */

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

PT_TEST(test_quant_fp16_exhaustive_round_trip)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = pt_fp16_to_f32((uint16_t)h);
		if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
			bad += !isnan(f);
			continue;
		}
		bad += pt_f32_to_fp16(f) != h;
		/* widening is exact: compare with the value computed from the fields */
		int ex = (h >> 10) & 0x1F, man = h & 0x3FF;
		double v = ex == 0 ? ldexp(man, -24) : ex == 31 ? INFINITY : ldexp(man + 1024, ex - 25);
		bad += (double)f != ((h & 0x8000) ? -v : v);
	}
	CHECK_EQ_INT(bad, 0);
}

PT_TEST(test_quant_fp16_rounding)
{
	CHECK_EQ_INT(pt_f32_to_fp16(1.0f + ldexpf(1, -11)), 0x3C00);       /* tie -> even (down) */
	CHECK_EQ_INT(pt_f32_to_fp16(1.0f + 3 * ldexpf(1, -11)), 0x3C02);   /* tie -> even (up) */
	CHECK_EQ_INT(pt_f32_to_fp16(nextafterf(1.0f + ldexpf(1, -11), 2)), 0x3C01);
	CHECK_EQ_INT(pt_f32_to_fp16(65504.0f), 0x7BFF);
	CHECK_EQ_INT(pt_f32_to_fp16(nextafterf(65520.0f, 0)), 0x7BFF);
	CHECK_EQ_INT(pt_f32_to_fp16(65520.0f), 0x7C00); /* overflow to inf at 65520 */
	CHECK_EQ_INT(pt_f32_to_fp16(-65520.0f), 0xFC00);
	CHECK_EQ_INT(pt_f32_to_fp16(1e30f), 0x7C00);
	CHECK_EQ_INT(pt_f32_to_fp16(INFINITY), 0x7C00);
	CHECK_EQ_INT(pt_f32_to_fp16(NAN), 0x7E00);
	CHECK_EQ_INT(pt_f32_to_fp16(-NAN), 0xFE00);
	/* subnormals: units of 2^-24, ties to even */
	CHECK_EQ_INT(pt_f32_to_fp16(ldexpf(1, -24)), 0x0001);
	CHECK_EQ_INT(pt_f32_to_fp16(ldexpf(1, -25)), 0x0000);                 /* tie -> 0 */
	CHECK_EQ_INT(pt_f32_to_fp16(nextafterf(ldexpf(1, -25), 1)), 0x0001);
	CHECK_EQ_INT(pt_f32_to_fp16(3 * ldexpf(1, -25)), 0x0002);             /* tie -> 2 */
	CHECK_EQ_INT(pt_f32_to_fp16(5 * ldexpf(1, -25)), 0x0002);             /* tie -> 2 */
	CHECK_EQ_INT(pt_f32_to_fp16(-ldexpf(1, -24)), 0x8001);
	CHECK_EQ_INT(pt_f32_to_fp16(ldexpf(1023.5f, -24)), 0x0400); /* rounds up to normal */
	CHECK_EQ_INT(pt_f32_to_fp16(ldexpf(1, -14)), 0x0400);
	CHECK_EQ_INT(pt_f32_to_fp16(1e-10f), 0x0000);
	CHECK_EQ_INT(pt_f32_to_fp16(-0.0f), 0x8000);
}

PT_TEST(test_quant_bf16_rounding)
{
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x3F808000)), 0x3F80); /* tie -> even */
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x3F818000)), 0x3F82); /* tie -> even (up) */
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x3F808001)), 0x3F81);
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x7F7F8000)), 0x7F80); /* overflow to inf */
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x7F800001)), 0x7FC0); /* NaN forced quiet */
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x00000001)), 0x0000); /* subnormal kept (ref) */
	CHECK_EQ_INT(pt_f32_to_bf16(from_bits(0x00018000)), 0x0002);
	for (uint32_t h = 0; h < 65536; h++) {
		if ((h & 0x7F80) == 0x7F80 && (h & 0x7F))
			continue;
		if (pt_f32_to_bf16(pt_bf16_to_f32((uint16_t)h)) != h ||
		    bits(pt_bf16_to_f32((uint16_t)h)) != h << 16) {
			CHECK(0);
			break;
		}
	}
}

/* ---- tables ----------------------------------------------------------------------------- */

PT_TEST(test_quant_table_matches_blocks_and_ops)
{
	struct {
		uint32_t type;
		size_t size, elems;
	} t[] = {
		{ PT_TYPE_Q4_0, sizeof(struct pt_block_q4_0), PT_QK4_0 },
		{ PT_TYPE_Q4_1, sizeof(struct pt_block_q4_1), PT_QK4_1 },
		{ PT_TYPE_Q5_0, sizeof(struct pt_block_q5_0), PT_QK5_0 },
		{ PT_TYPE_Q5_1, sizeof(struct pt_block_q5_1), PT_QK5_1 },
		{ PT_TYPE_Q8_0, sizeof(struct pt_block_q8_0), PT_QK8_0 },
		{ PT_TYPE_Q8_1, sizeof(struct pt_block_q8_1), PT_QK8_1 },
		{ PT_TYPE_Q2_K, sizeof(struct pt_block_q2_K), PT_QK_K },
		{ PT_TYPE_Q3_K, sizeof(struct pt_block_q3_K), PT_QK_K },
		{ PT_TYPE_Q4_K, sizeof(struct pt_block_q4_K), PT_QK_K },
		{ PT_TYPE_Q5_K, sizeof(struct pt_block_q5_K), PT_QK_K },
		{ PT_TYPE_Q6_K, sizeof(struct pt_block_q6_K), PT_QK_K },
		{ PT_TYPE_Q8_K, sizeof(struct pt_block_q8_K), PT_QK_K },
		{ PT_TYPE_IQ4_NL, sizeof(struct pt_block_iq4_nl), PT_QK4_NL },
		{ PT_TYPE_IQ4_XS, sizeof(struct pt_block_iq4_xs), PT_QK_K },
		{ PT_TYPE_MXFP4, sizeof(struct pt_block_mxfp4), PT_QK_MXFP4 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const struct pt_type_traits *tr = pt_type_traits(t[i].type);
		REQUIRE(tr != NULL);
		CHECK_EQ_INT(tr->block_bytes, t[i].size);
		CHECK_EQ_INT(tr->block_elems, t[i].elems);
	}
	int n_both = 0;
	for (uint32_t id = 0; id < PT_TYPE_COUNT + 2; id++) {
		const struct pt_type_traits *tr = pt_type_traits(id);
		const struct pt_quant_ops *ops = pt_quant_ops(id);
		int dq = ops && ops->dequant, q = ops && ops->quantize;
		CHECK_EQ_INT(tr ? tr->can_dequant : 0, dq);
		CHECK_EQ_INT(tr ? tr->can_quant : 0, q);
		n_both += dq && q;
	}
	CHECK_EQ_INT(n_both, 16);
	CHECK_EQ_INT(pt_kvalues_iq4nl[0], -127);
	CHECK_EQ_INT(pt_kvalues_mxfp4[15], -12);
}

/* ---- row API errors --------------------------------------------------------------------- */

PT_TEST(test_quant_row_api_errors)
{
	struct pt_error err = { 0 };
	float x[64] = { 0 }, y[64];
	uint8_t buf[256] = { 0 };
	CHECK_EQ_INT(pt_quant_dequant_row(PT_TYPE_Q4_0, buf, y, 33, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "block size 32");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_quant_dequant_row(PT_TYPE_IQ2_XXS, buf, y, 256, &err), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "dequantization");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q8_K, x, buf, 256, &err), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "Q8_K");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_quant_quantize_row(4 /* removed Q4_2 */, x, buf, 32, &err),
		     PT_E_UNSUPPORTED);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_quant_quantize_row(999, x, buf, 32, NULL), PT_E_UNSUPPORTED);
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q4_K, x, buf, 32, &err), PT_E_INVALID);
	CHECK(pt_quant_ops(PT_TYPE_Q8_1) == NULL);
	CHECK(pt_quant_ops(PT_TYPE_Q4_K) != NULL);
	/* n = 0 is a valid empty row */
	CHECK_EQ_INT(pt_quant_quantize_row(PT_TYPE_Q4_K, x, buf, 0, NULL), PT_OK);
}

/* ---- validation ------------------------------------------------------------------------- */

static void expect_invalid(uint32_t type, const void *data, uint64_t n, uint64_t offset)
{
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_quant_validate_row(type, data, n, &err), PT_E_FORMAT);
	CHECK_EQ_INT(err.offset, offset);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

PT_TEST(test_quant_validate_row_semantics)
{
	uint8_t buf[1024];
	float f[4] = { 1, 2, 3, NAN };
	memset(buf, 0, sizeof(buf));
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_F32, f, 3, NULL), PT_OK);
	expect_invalid(PT_TYPE_F32, f, 4, 12);
	f[3] = -INFINITY;
	expect_invalid(PT_TYPE_F32, f, 4, 12);
	put16(buf + 4, 0x7C00);
	expect_invalid(PT_TYPE_F16, buf, 8, 4);
	put16(buf + 4, 0x7BFF);
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_F16, buf, 8, NULL), PT_OK);
	put16(buf + 6, 0xFF80);
	expect_invalid(PT_TYPE_BF16, buf, 8, 6);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_BF16, buf, 8, NULL), PT_OK);
	/* quant types: d (and m/dmin) fields */
	put16(buf + 18, 0x7E00); /* Q4_0 block 1 d = NaN */
	expect_invalid(PT_TYPE_Q4_0, buf, 64, 18);
	memset(buf, 0, sizeof(buf));
	put16(buf + 2, 0xFC00); /* Q4_1 m = -inf */
	expect_invalid(PT_TYPE_Q4_1, buf, 32, 2);
	memset(buf, 0, sizeof(buf));
	put16(buf + 84 + 82, 0x7C00); /* Q2_K block 1 dmin */
	expect_invalid(PT_TYPE_Q2_K, buf, 512, 84 + 82);
	memset(buf, 0, sizeof(buf));
	put16(buf + 108, 0x7C00); /* Q3_K d is the last field */
	expect_invalid(PT_TYPE_Q3_K, buf, 256, 108);
	memset(buf, 0, sizeof(buf));
	put16(buf + 208, 0x7C01);
	expect_invalid(PT_TYPE_Q6_K, buf, 256, 208);
	memset(buf, 0, sizeof(buf));
	put16(buf + 2, 0x7C00); /* Q4_K dmin */
	expect_invalid(PT_TYPE_Q4_K, buf, 256, 2);
	memset(buf, 0, sizeof(buf));
	float inf = INFINITY;
	memcpy(buf + 292, &inf, 4); /* Q8_K block 1 float d */
	expect_invalid(PT_TYPE_Q8_K, buf, 512, 292);
	memset(buf, 0, sizeof(buf));
	buf[17] = 0xFF; /* MXFP4 block 1 exponent */
	expect_invalid(PT_TYPE_MXFP4, buf, 64, 17);
	buf[17] = 0xFE;
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_MXFP4, buf, 64, NULL), PT_OK);
	memset(buf, 0, sizeof(buf));
	/* IQ1_M: fp16 scale assembled from the top nibbles of the four u16 at offset 48 */
	put16(buf + 48 + 4, 0x7000); /* contributes 0x0700 */
	put16(buf + 48 + 6, 0xC000); /* contributes 0xC000 -> 0xC700: finite */
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_IQ1_M, buf, 256, NULL), PT_OK);
	put16(buf + 48 + 4, 0xC000);
	put16(buf + 48 + 6, 0x7000); /* 0x7C00 = inf */
	expect_invalid(PT_TYPE_IQ1_M, buf, 256, 0);
	memset(buf, 0xFF, sizeof(buf));
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_I32, buf, 16, NULL), PT_OK);
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_NVFP4, buf, 64, NULL), PT_OK);
	expect_invalid(PT_TYPE_IQ4_XS, buf, 256, 0);
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_quant_validate_row(5, buf, 32, &err), PT_E_UNSUPPORTED);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_quant_validate_row(PT_TYPE_Q8_0, buf, 31, &err), PT_E_INVALID);
}
