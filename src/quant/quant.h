/* quant.h - conversion between float32 rows and ggml tensor formats.
 *
 * Owns: dequantization (any stored format -> float32), the reference quantizers that
 * llama-quantize uses without an importance matrix (float32 -> stored format, byte-identical
 * to ggml when built with -ffp-contract=off, which the Makefile does), and content validation
 * with ggml_validate_row_data semantics.  Specification: GGUF-AND-QUANTS.md sections 1, 4, 5.
 * Activation quantizers (Q8_0/Q8_1/Q8_K for dot products) belong to the kern module.
 *
 * Supported (see pt_type_traits()->can_dequant / can_quant, which agree with this module):
 *   dequant and quantize: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K
 *                         IQ4_NL IQ4_XS MXFP4
 * Quantizer choices where ggml has two: IQ4_NL uses ntry = 7 (quantize_iq4_nl, what
 * llama-quantize writes), not the ntry = -1 from_float_ref.  Where ggml casts an
 * out-of-range float to an integer (C-undefined; only for blocks whose max |x| is a float
 * subnormal or near it), we reproduce what ggml does on x86-64; the single case where that
 * yields a block ggml's validator rejects (MXFP4 exponent 0xFF) is stored as 0xFE, which
 * decodes to the same zeros.
 *
 * Nothing here allocates; scratch lives on the stack.  All functions are thread-safe. */
#ifndef PT_QUANT_QUANT_H
#define PT_QUANT_QUANT_H

#include <stdint.h>

#include "util/status.h"

/* Per-format block functions; one table row per type drives every format.  They take whole
 * blocks (n_blocks * block_elems floats, n_blocks * block_bytes bytes), check nothing and
 * never fail: callers that have untrusted sizes or values use the row functions below.
 * quantize expects finite input. */
struct pt_quant_ops {
	void (*dequant)(const void *src, float *dst, uint64_t n_blocks);
	void (*quantize)(const float *src, void *dst, uint64_t n_blocks);
};

/* The function row for a type id, or NULL if this module implements neither direction.
 * Either pointer may be NULL when only one direction exists.  The result is static. */
const struct pt_quant_ops *pt_quant_ops(uint32_t type);

/* Dequantize n elements (a multiple of the type's block size) of src into dst[n].  src may
 * have any alignment (the pt_quant_ops functions need the block struct's alignment, 2).
 * Errors: PT_E_UNSUPPORTED for a type without dequantization, PT_E_INVALID when n is not a
 * multiple of the block size.  On error dst is untouched.  Values are bit-exact with ggml's
 * dequantize_row_* (inf/NaN scales propagate as ggml does; use pt_quant_validate_row first
 * to reject such data). */
enum pt_status pt_quant_dequant_row(uint32_t type, const void *src, float *dst, uint64_t n,
				    struct pt_error *err);

/* Quantize n floats (a multiple of the block size) into dst (pt_type_row_bytes bytes).
 * The input is checked first: any NaN or infinity fails with PT_E_INVALID naming the first
 * offending element index, and dst is untouched.  A finite value too large for the format
 * (a block scale that would overflow fp16 to infinity, or bf16/f16 overflow) fails with
 * PT_E_INVALID naming the block's first element; dst then holds partial output.
 * PT_E_UNSUPPORTED for a type without a quantizer; PT_E_INVALID for a bad n.
 * Deterministic: the same input always gives the same bytes. */
enum pt_status pt_quant_quantize_row(uint32_t type, const float *src, void *dst, uint64_t n,
				     struct pt_error *err);

/* Check stored data the way ggml_validate_row_data does (llama.cpp --check-tensors):
 * F32/F64/F16/BF16 values must be finite; the fp16 scales (d, and m/dmin where present) of
 * Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q1_0 Q2_0 Q2_K..Q6_K, every IQ type and TQ1_0/TQ2_0 must be
 * finite (IQ1_M: the scale assembled from its scales[] nibbles), Q8_K's float d finite,
 * MXFP4's exponent byte not 0xFF (253 and 254 pass, as in ggml, though their largest codes
 * decode to infinity); integer types and NVFP4 carry nothing to check.
 * PT_E_FORMAT with err->offset = byte offset (relative to data) of the first bad field or
 * value; PT_E_UNSUPPORTED for an unknown id and for Q8_1 (activation-only; ggml rejects it
 * too); PT_E_INVALID when n is not a whole number of blocks.  data is read only. */
enum pt_status pt_quant_validate_row(uint32_t type, const void *data, uint64_t n,
				     struct pt_error *err);

#endif
