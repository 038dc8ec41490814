/* types.h - the one table of ggml tensor types.  Every format question (block size, bytes per
 * block, name, which activation format a dot product pairs it with) is answered here, so the
 * GGUF validator, inspect, mkmodel and the kernels agree by construction.
 *
 * Enum values are ggml's on-disk ids (GGUF-AND-QUANTS.md section 3). */
#ifndef PT_QUANT_TYPES_H
#define PT_QUANT_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum pt_type {
	PT_TYPE_F32 = 0,
	PT_TYPE_F16 = 1,
	PT_TYPE_Q4_0 = 2,
	PT_TYPE_Q4_1 = 3,
	PT_TYPE_Q5_0 = 6,
	PT_TYPE_Q5_1 = 7,
	PT_TYPE_Q8_0 = 8,
	PT_TYPE_Q8_1 = 9,
	PT_TYPE_Q2_K = 10,
	PT_TYPE_Q3_K = 11,
	PT_TYPE_Q4_K = 12,
	PT_TYPE_Q5_K = 13,
	PT_TYPE_Q6_K = 14,
	PT_TYPE_Q8_K = 15,
	PT_TYPE_IQ2_XXS = 16,
	PT_TYPE_IQ2_XS = 17,
	PT_TYPE_IQ3_XXS = 18,
	PT_TYPE_IQ1_S = 19,
	PT_TYPE_IQ4_NL = 20,
	PT_TYPE_IQ3_S = 21,
	PT_TYPE_IQ2_S = 22,
	PT_TYPE_IQ4_XS = 23,
	PT_TYPE_I8 = 24,
	PT_TYPE_I16 = 25,
	PT_TYPE_I32 = 26,
	PT_TYPE_I64 = 27,
	PT_TYPE_F64 = 28,
	PT_TYPE_IQ1_M = 29,
	PT_TYPE_BF16 = 30,
	PT_TYPE_TQ1_0 = 34,
	PT_TYPE_TQ2_0 = 35,
	PT_TYPE_MXFP4 = 39,
	PT_TYPE_NVFP4 = 40,
	PT_TYPE_Q1_0 = 41,
	PT_TYPE_Q2_0 = 42,
	PT_TYPE_COUNT = 43, /* ids >= this are unknown */
};

struct pt_type_traits {
	const char *name;       /* ggml's name, e.g. "Q4_K"; NULL for removed/unknown ids */
	uint32_t block_elems;   /* elements per block (1 for plain types) */
	uint32_t block_bytes;   /* bytes per block */
	uint8_t is_quantized;
	uint8_t can_dequant;    /* pt_quant_dequant_row supports it (quant.h) */
	uint8_t can_quant;      /* pt_quant_quantize_row supports it (quant.h) */
	enum pt_type vec_dot;   /* activation partner format for dot products (ggml's
				   vec_dot_type); equals the type itself for F32/F16/BF16 */
};

/* Traits for an on-disk id, or NULL if the id is unknown or removed (size not computable). */
const struct pt_type_traits *pt_type_traits(uint32_t type);
/* Name for display; "unknown(N)"-style names are not produced: returns "?" for unknown ids. */
const char *pt_type_name(uint32_t type);
/* Look up by case-insensitive name ("q4_k", "Q4_K", "f16"); returns 0 and sets *out, or -1. */
int pt_type_from_name(const char *name, enum pt_type *out);

/* Bytes of a row of n elements.  Returns 0 on success; -1 if the type is unknown, n is not a
 * multiple of the block size, or the result overflows. */
int pt_type_row_bytes(uint32_t type, uint64_t n, uint64_t *out);

/* Scalar conversions, bit-exact with ggml's reference (GGUF-AND-QUANTS.md 1.2-1.4). */
float pt_fp16_to_f32(uint16_t h);
uint16_t pt_f32_to_fp16(float f);
float pt_bf16_to_f32(uint16_t h);
uint16_t pt_f32_to_bf16(float f);
float pt_e8m0_to_f32_half(uint8_t e);

#endif
