/* types.c - the ggml type table and scalar float conversions (see types.h). */
#include "quant/types.h"

#include "quant/blocks.h"

#include <string.h>
#include <strings.h>

#define T(id, nm, be, bb, q, vd) [id] = { nm, be, bb, q, 0, 0, vd }
/* A type the quant module converts both ways (quant.c's function table mirrors this). */
#define TQ(id, nm, be, bb, q, vd) [id] = { nm, be, bb, q, 1, 1, vd }
#define SZ(blk) ((uint32_t)sizeof(struct pt_block_##blk))

/* Block sizes of the formats we implement come from blocks.h, so they cannot drift. */
static const struct pt_type_traits table[PT_TYPE_COUNT] = {
	TQ(PT_TYPE_F32, "F32", 1, 4, 0, PT_TYPE_F32),
	TQ(PT_TYPE_F16, "F16", 1, 2, 0, PT_TYPE_F16),
	TQ(PT_TYPE_Q4_0, "Q4_0", PT_QK4_0, SZ(q4_0), 1, PT_TYPE_Q8_0),
	TQ(PT_TYPE_Q4_1, "Q4_1", PT_QK4_1, SZ(q4_1), 1, PT_TYPE_Q8_1),
	TQ(PT_TYPE_Q5_0, "Q5_0", PT_QK5_0, SZ(q5_0), 1, PT_TYPE_Q8_0),
	TQ(PT_TYPE_Q5_1, "Q5_1", PT_QK5_1, SZ(q5_1), 1, PT_TYPE_Q8_1),
	TQ(PT_TYPE_Q8_0, "Q8_0", PT_QK8_0, SZ(q8_0), 1, PT_TYPE_Q8_0),
	T(PT_TYPE_Q8_1, "Q8_1", PT_QK8_1, SZ(q8_1), 1, PT_TYPE_Q8_1),
	TQ(PT_TYPE_Q2_K, "Q2_K", PT_QK_K, SZ(q2_K), 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_Q3_K, "Q3_K", PT_QK_K, SZ(q3_K), 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_Q4_K, "Q4_K", PT_QK_K, SZ(q4_K), 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_Q5_K, "Q5_K", PT_QK_K, SZ(q5_K), 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_Q6_K, "Q6_K", PT_QK_K, SZ(q6_K), 1, PT_TYPE_Q8_K),
	T(PT_TYPE_Q8_K, "Q8_K", PT_QK_K, SZ(q8_K), 1, PT_TYPE_Q8_K),
	T(PT_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, 1, PT_TYPE_Q8_K),
	T(PT_TYPE_IQ2_XS, "IQ2_XS", 256, 74, 1, PT_TYPE_Q8_K),
	T(PT_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, 1, PT_TYPE_Q8_K),
	T(PT_TYPE_IQ1_S, "IQ1_S", 256, 50, 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_IQ4_NL, "IQ4_NL", PT_QK4_NL, SZ(iq4_nl), 1, PT_TYPE_Q8_0),
	T(PT_TYPE_IQ3_S, "IQ3_S", 256, 110, 1, PT_TYPE_Q8_K),
	T(PT_TYPE_IQ2_S, "IQ2_S", 256, 82, 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_IQ4_XS, "IQ4_XS", PT_QK_K, SZ(iq4_xs), 1, PT_TYPE_Q8_K),
	T(PT_TYPE_I8, "I8", 1, 1, 0, PT_TYPE_I8),
	T(PT_TYPE_I16, "I16", 1, 2, 0, PT_TYPE_I16),
	T(PT_TYPE_I32, "I32", 1, 4, 0, PT_TYPE_I32),
	T(PT_TYPE_I64, "I64", 1, 8, 0, PT_TYPE_I64),
	T(PT_TYPE_F64, "F64", 1, 8, 0, PT_TYPE_F64),
	T(PT_TYPE_IQ1_M, "IQ1_M", 256, 56, 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_BF16, "BF16", 1, 2, 0, PT_TYPE_BF16),
	T(PT_TYPE_TQ1_0, "TQ1_0", 256, 54, 1, PT_TYPE_Q8_K),
	T(PT_TYPE_TQ2_0, "TQ2_0", 256, 66, 1, PT_TYPE_Q8_K),
	TQ(PT_TYPE_MXFP4, "MXFP4", PT_QK_MXFP4, SZ(mxfp4), 1, PT_TYPE_Q8_0),
	T(PT_TYPE_NVFP4, "NVFP4", 64, 36, 1, PT_TYPE_Q8_0),
	T(PT_TYPE_Q1_0, "Q1_0", 128, 18, 1, PT_TYPE_Q8_0),
	T(PT_TYPE_Q2_0, "Q2_0", 64, 18, 1, PT_TYPE_Q8_0),
};

const struct pt_type_traits *pt_type_traits(uint32_t type)
{
	if (type >= PT_TYPE_COUNT || table[type].name == NULL)
		return NULL;
	return &table[type];
}

const char *pt_type_name(uint32_t type)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	return t ? t->name : "?";
}

int pt_type_from_name(const char *name, enum pt_type *out)
{
	for (uint32_t i = 0; i < PT_TYPE_COUNT; i++) {
		if (table[i].name && strcasecmp(table[i].name, name) == 0) {
			*out = (enum pt_type)i;
			return 0;
		}
	}
	return -1;
}

int pt_type_row_bytes(uint32_t type, uint64_t n, uint64_t *out)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	if (!t || n % t->block_elems != 0)
		return -1;
	if (__builtin_mul_overflow(n / t->block_elems, (uint64_t)t->block_bytes, out))
		return -1;
	return 0;
}

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float pt_fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	if (exp == 0x1f) /* inf / NaN */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return bits_f32(sign);
		/* subnormal: value = man * 2^-24, exact in binary32 */
		float v = (float)man * 0x1p-24f;
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t pt_f32_to_fp16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t abs = u & 0x7fffffffu;
	if (abs > 0x7f800000u) /* NaN -> canonical quiet NaN, sign kept */
		return sign | 0x7e00;
	if (abs >= 0x477ff000u) /* >= 65520 rounds to inf */
		return sign | 0x7c00;
	if (abs < 0x38800000u) { /* result is subnormal or zero: round man*2^-24 */
		/* value = abs_f * 2^24 rounded to nearest even integer */
		uint32_t exp = abs >> 23;
		if (exp < 102) /* below half of the smallest subnormal */
			return sign;
		uint32_t man = (abs & 0x7fffff) | 0x800000;
		uint32_t shift = 126 - exp; /* 14..24 */
		uint32_t q = man >> shift;
		uint32_t rem = man & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return sign | (uint16_t)q;
	}
	/* normal: rebias exponent, round 13 low mantissa bits to nearest even */
	uint32_t r = abs - 0x38000000u; /* exponent 127 -> 15 */
	uint32_t lsb = (r >> 13) & 1;
	r += 0xfff + lsb;
	return sign | (uint16_t)(r >> 13);
}

float pt_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t pt_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float pt_e8m0_to_f32_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	return bits_f32(bits);
}
