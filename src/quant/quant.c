/* quant.c - the quant module's function table and its checked row API (see quant.h):
 * argument and value checks, float32/fp16/bf16 rows, and ggml_validate_row_data. */
#include "quant/quant.h"

#include <math.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant_internal.h"
#include "quant/types.h"

static void dequant_f32(const void *src, float *dst, uint64_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

static void quantize_f32(const float *src, void *dst, uint64_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

static void dequant_f16(const void *src, float *dst, uint64_t n)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		dst[i] = pt_fp16_to_f32(h);
	}
}

static void quantize_f16(const float *src, void *dst, uint64_t n)
{
	uint8_t *p = dst;
	for (uint64_t i = 0; i < n; i++) {
		uint16_t h = pt_f32_to_fp16(src[i]);
		memcpy(p + 2 * i, &h, 2);
	}
}

static void dequant_bf16(const void *src, float *dst, uint64_t n)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		dst[i] = pt_bf16_to_f32(h);
	}
}

static void quantize_bf16(const float *src, void *dst, uint64_t n)
{
	uint8_t *p = dst;
	for (uint64_t i = 0; i < n; i++) {
		uint16_t h = pt_f32_to_bf16(src[i]);
		memcpy(p + 2 * i, &h, 2);
	}
}

#define OPS(id, t) [id] = { pt_quant_dequant_##t, pt_quant_quantize_##t }

/* The one table: types.c's can_dequant/can_quant flags mirror its rows (a unit test checks). */
static const struct pt_quant_ops ops_table[PT_TYPE_COUNT] = {
	[PT_TYPE_F32] = { dequant_f32, quantize_f32 },
	[PT_TYPE_F16] = { dequant_f16, quantize_f16 },
	[PT_TYPE_BF16] = { dequant_bf16, quantize_bf16 },
	OPS(PT_TYPE_Q4_0, q4_0),
	OPS(PT_TYPE_Q4_1, q4_1),
	OPS(PT_TYPE_Q5_0, q5_0),
	OPS(PT_TYPE_Q5_1, q5_1),
	OPS(PT_TYPE_Q8_0, q8_0),
	OPS(PT_TYPE_Q2_K, q2_K),
	OPS(PT_TYPE_Q3_K, q3_K),
	OPS(PT_TYPE_Q4_K, q4_K),
	OPS(PT_TYPE_Q5_K, q5_K),
	OPS(PT_TYPE_Q6_K, q6_K),
	OPS(PT_TYPE_IQ4_NL, iq4_nl),
	OPS(PT_TYPE_IQ4_XS, iq4_xs),
	OPS(PT_TYPE_MXFP4, mxfp4),
};

const struct pt_quant_ops *pt_quant_ops(uint32_t type)
{
	if (type >= PT_TYPE_COUNT || (!ops_table[type].dequant && !ops_table[type].quantize))
		return NULL;
	return &ops_table[type];
}

/* Common argument checks; on success *nb is the number of blocks. */
static enum pt_status check_row(uint32_t type, uint64_t n, int quantize, uint64_t *nb,
				struct pt_error *err)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	const struct pt_quant_ops *ops = pt_quant_ops(type);
	int have = ops && (quantize ? ops->quantize != NULL : ops->dequant != NULL);
	if (!t || !have)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s to %s is not implemented",
				    quantize ? "quantization" : "dequantization",
				    quantize ? pt_type_name(type) : "F32");
	if (n % t->block_elems != 0)
		return pt_error_set(err, PT_E_INVALID,
				    "row of %llu elements is not a multiple of the %s block size %u",
				    (unsigned long long)n, t->name, t->block_elems);
	*nb = n / t->block_elems;
	return PT_OK;
}

/* The block structs with fp16 fields need 2-byte alignment; rows at odd addresses (not
 * produced by GGUF, whose data is 32-aligned, but allowed by this API) go through an
 * aligned bounce buffer one block at a time. */
union bounce {
	uint16_t align;
	uint8_t bytes[sizeof(struct pt_block_q8_K)]; /* the largest block */
};

static int needs_bounce(uint32_t type, const void *p)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	return ((uintptr_t)p & 1) && t->is_quantized && type != PT_TYPE_MXFP4;
}

enum pt_status pt_quant_dequant_row(uint32_t type, const void *src, float *dst, uint64_t n,
				    struct pt_error *err)
{
	uint64_t nb;
	enum pt_status st = check_row(type, n, 0, &nb, err);
	if (st != PT_OK)
		return st;
	if (!needs_bounce(type, src)) {
		ops_table[type].dequant(src, dst, nb);
		return PT_OK;
	}
	const struct pt_type_traits *t = pt_type_traits(type);
	union bounce b;
	for (uint64_t i = 0; i < nb; i++) {
		memcpy(b.bytes, (const uint8_t *)src + i * t->block_bytes, t->block_bytes);
		ops_table[type].dequant(b.bytes, dst + i * t->block_elems, 1);
	}
	return PT_OK;
}

static void quantize_bounced(uint32_t type, const float *src, void *dst, uint64_t nb)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	union bounce b;
	for (uint64_t i = 0; i < nb; i++) {
		ops_table[type].quantize(src + i * t->block_elems, b.bytes, 1);
		memcpy((uint8_t *)dst + i * t->block_bytes, b.bytes, t->block_bytes);
	}
}

enum pt_status pt_quant_quantize_row(uint32_t type, const float *src, void *dst, uint64_t n,
				     struct pt_error *err)
{
	uint64_t nb;
	enum pt_status st = check_row(type, n, 1, &nb, err);
	if (st != PT_OK)
		return st;
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(src[i]))
			return pt_error_set(err, PT_E_INVALID,
					    "cannot quantize non-finite value %g at index %llu",
					    (double)src[i], (unsigned long long)i);
	if (needs_bounce(type, dst))
		quantize_bounced(type, src, dst, nb);
	else
		ops_table[type].quantize(src, dst, nb);
	/* Finite input can still overflow a format (fp16 scale or value past 65504). */
	struct pt_error verr = { 0 };
	if (pt_quant_validate_row(type, dst, n, &verr) != PT_OK) {
		const struct pt_type_traits *t = pt_type_traits(type);
		uint64_t first = verr.offset / t->block_bytes * t->block_elems;
		return pt_error_set(err, PT_E_INVALID,
				    "values too large for %s in the block starting at index %llu",
				    t->name, (unsigned long long)first);
	}
	return PT_OK;
}

/* ---- validation (ggml_validate_row_data) ------------------------------------------------ */

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline int fp16_bad(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00;
}

/* Scan nb blocks of `size` bytes for a bad fp16 at byte `off1` (and `off2` if >= 0). */
static enum pt_status check_fp16(const uint8_t *p, uint64_t nb, uint32_t size, int off1,
				 int off2, struct pt_error *err)
{
	for (uint64_t i = 0; i < nb; i++, p += size) {
		int bad = fp16_bad(rd16(p + off1)) ? off1 : (off2 >= 0 && fp16_bad(rd16(p + off2)))
								? off2 : -1;
		if (bad >= 0)
			return pt_error_at(err, PT_E_FORMAT, i * size + (uint64_t)bad,
					   "non-finite fp16 scale in block %llu",
					   (unsigned long long)i);
	}
	return PT_OK;
}

static enum pt_status check_plain(uint32_t type, const uint8_t *p, uint64_t n,
				  struct pt_error *err)
{
	for (uint64_t i = 0; i < n; i++) {
		int bad;
		uint64_t size = type == PT_TYPE_F32 ? 4 : type == PT_TYPE_F64 ? 8 : 2;
		const uint8_t *v = p + i * size;
		if (type == PT_TYPE_F32) {
			float f;
			memcpy(&f, v, 4);
			bad = !isfinite(f);
		} else if (type == PT_TYPE_F64) {
			double f;
			memcpy(&f, v, 8);
			bad = !isfinite(f);
		} else if (type == PT_TYPE_F16) {
			bad = fp16_bad(rd16(v));
		} else {
			bad = (rd16(v) & 0x7f80) == 0x7f80;
		}
		if (bad)
			return pt_error_at(err, PT_E_FORMAT, i * size,
					   "non-finite %s value at index %llu", pt_type_name(type),
					   (unsigned long long)i);
	}
	return PT_OK;
}

static enum pt_status check_special(uint32_t type, const uint8_t *p, uint64_t nb, uint32_t size,
				    struct pt_error *err)
{
	for (uint64_t i = 0; i < nb; i++, p += size) {
		int bad;
		if (type == PT_TYPE_Q8_K) {
			float d;
			memcpy(&d, p, 4);
			bad = !isfinite(d);
		} else if (type == PT_TYPE_MXFP4) {
			bad = p[0] == 0xFF;
		} else { /* IQ1_M: fp16 super-scale from the top nibbles of 4 u16 at offset 48 */
			const uint8_t *sc = p + 48;
			uint16_t s = (uint16_t)((rd16(sc) >> 12) | ((rd16(sc + 2) >> 8) & 0x00f0) |
						((rd16(sc + 4) >> 4) & 0x0f00) |
						(rd16(sc + 6) & 0xf000));
			bad = fp16_bad(s);
		}
		if (bad)
			return pt_error_at(err, PT_E_FORMAT, i * size, "invalid %s scale in block %llu",
					   pt_type_name(type), (unsigned long long)i);
	}
	return PT_OK;
}

enum pt_status pt_quant_validate_row(uint32_t type, const void *data, uint64_t n,
				     struct pt_error *err)
{
	const struct pt_type_traits *t = pt_type_traits(type);
	if (!t || type == PT_TYPE_Q8_1)
		return pt_error_set(err, PT_E_UNSUPPORTED, "cannot validate type %s (id %u)",
				    pt_type_name(type), type);
	if (n % t->block_elems != 0)
		return pt_error_set(err, PT_E_INVALID,
				    "row of %llu elements is not a multiple of the %s block size %u",
				    (unsigned long long)n, t->name, t->block_elems);
	uint64_t nb = n / t->block_elems;
	const uint8_t *p = data;
	switch (type) {
	case PT_TYPE_F32: case PT_TYPE_F64: case PT_TYPE_F16: case PT_TYPE_BF16:
		return check_plain(type, p, n, err);
	case PT_TYPE_Q4_1: case PT_TYPE_Q5_1: case PT_TYPE_Q4_K: case PT_TYPE_Q5_K:
		return check_fp16(p, nb, t->block_bytes, 0, 2, err);
	case PT_TYPE_Q2_K:
		return check_fp16(p, nb, t->block_bytes, 80, 82, err);
	case PT_TYPE_Q3_K: case PT_TYPE_Q6_K: case PT_TYPE_TQ1_0: case PT_TYPE_TQ2_0:
		/* d is the last field of these blocks */
		return check_fp16(p, nb, t->block_bytes, (int)t->block_bytes - 2, -1, err);
	case PT_TYPE_Q8_K: case PT_TYPE_MXFP4: case PT_TYPE_IQ1_M:
		return check_special(type, p, nb, t->block_bytes, err);
	case PT_TYPE_I8: case PT_TYPE_I16: case PT_TYPE_I32: case PT_TYPE_I64: case PT_TYPE_NVFP4:
		return PT_OK;
	default: /* Q4_0 Q5_0 Q8_0 Q1_0 Q2_0 IQ*: fp16 d first */
		return check_fp16(p, nb, t->block_bytes, 0, -1, err);
	}
}
