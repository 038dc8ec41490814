/* fuzz_quant.c - libFuzzer target for the quant module.  Byte 0 picks a type id, the rest is
 * stored data (at an odd address, exercising the unaligned path): every dequantizer must stay
 * in bounds, and data that pt_quant_validate_row accepts must dequantize to finite floats
 * (except MXFP4, see below).  The same bytes read as floats go through the
 * quantizer: accepted input must give output that validates and dequantizes finitely. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/types.h"
#include "util/alloc.h"

#define MAX_ELEMS 4096

static void check_finite(const float *y, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(y[i]))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint32_t type = data[0] % PT_TYPE_COUNT;
	const struct pt_type_traits *t = pt_type_traits(type);
	const struct pt_quant_ops *ops = pt_quant_ops(type);
	if (!t || !ops)
		return 0;
	data++;
	size--;
	uint64_t nb = size / t->block_bytes;
	if (nb * t->block_elems > MAX_ELEMS)
		nb = MAX_ELEMS / t->block_elems;
	uint64_t n = nb * t->block_elems;
	float *y = pt_mallocn(MAX_ELEMS, sizeof(float));
	float *x = pt_mallocn(MAX_ELEMS, sizeof(float));
	uint8_t *q = pt_malloc(MAX_ELEMS * 4);
	if (!y || !x || !q)
		goto out;
	if (pt_quant_dequant_row(type, data, y, n, NULL) != PT_OK)
		__builtin_trap();
	/* MXFP4 exponents 253 and 254 pass ggml's check yet overflow large codes to inf */
	if (pt_quant_validate_row(type, data, n, NULL) == PT_OK && type != PT_TYPE_MXFP4)
		check_finite(y, n);
	uint64_t nf = size / 4 / t->block_elems * t->block_elems;
	if (nf > MAX_ELEMS)
		nf = MAX_ELEMS / t->block_elems * t->block_elems;
	memcpy(x, data, nf * 4);
	if (pt_quant_quantize_row(type, x, q, nf, NULL) == PT_OK) {
		if (pt_quant_validate_row(type, q, nf, NULL) != PT_OK)
			__builtin_trap();
		pt_quant_dequant_row(type, q, y, nf, NULL);
		check_finite(y, nf);
	}
out:
	pt_free(y);
	pt_free(x);
	pt_free(q);
	return 0;
}
