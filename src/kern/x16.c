/* x16.c - interleaved rows (PT_KERN_LAYOUT_X16, kern.h): the layout's packing and the scalar
 * reference kernel, which defines the numerics every SIMD twin reproduces bit for bit.
 *
 * Why: decode reads each weight once per token, so it runs at the speed one core streams
 * rows through its dot.  Row by row, each 256-weight super-block pays its own scale
 * unpacking, shuffles and final reductions; with 16 rows interleaved, one load feeds 16
 * rows, the scales of 16 rows arrive unpacked side by side, and the band is one sequential
 * stream (docs/PERFORMANCE.md, issue 21 rounds 9-10).
 */
#include "kern/kern_internal.h"

#include <math.h>

#include "util/status.h"

#define X16_CODES 0
#define X16_SC 2048
#define X16_MIN 2176
#define X16_D 2304
#define X16_DMIN 2336
_Static_assert(X16_DMIN + 32 == PT_KERN_X16_Q4K_SB, "X16 Q4_K super-block layout");

/* Q6_K codes in the order the kernels read them (one sequential stream): four groups g = 2 h +
 * st / 4 of 768 bytes, each the ql vectors of steps st of part c = 0, of c = 1, then the qh
 * vectors of those steps. */
#define X6_QL(h, c, st) (768 * (2 * (h) + (st) / 4) + 256 * (c) + 64 * ((st) % 4))
#define X6_QH(h, st) (768 * (2 * (h) + (st) / 4) + 512 + 64 * ((st) % 4))
#define X6_SC 3072
#define X6_D 3328
_Static_assert(X6_D + 32 == PT_KERN_X16_Q6K_SB, "X16 Q6_K super-block layout");

/* Q8_0 (kern.h): 8 code vectors (bytes 4 s .. of each row, stored as w + 128), then d. */
#define X8_D 512
_Static_assert(X8_D + 32 == PT_KERN_X16_Q8_0_BLK, "X16 Q8_0 block layout");
/* Q5_0: 4 vectors of qs bytes 4 s .. of each row, the high-bit word of each row, then d. */
#define X5_QH 256
#define X5_D 320
_Static_assert(X5_D + 32 == PT_KERN_X16_Q5_0_BLK, "X16 Q5_0 block layout");

/* A type's packed unit: columns, bytes of one row as stored, bytes of 16 rows packed. */
struct x16_unit {
	uint32_t cols, in, out;
};

static const struct x16_unit *unit_of(enum pt_type type)
{
	static const struct x16_unit q4k = { QKK, Q4K_B, PT_KERN_X16_Q4K_SB };
	static const struct x16_unit q6k = { QKK, Q6K_B, PT_KERN_X16_Q6K_SB };
	static const struct x16_unit q8_0 = { QK, Q8_0_B, PT_KERN_X16_Q8_0_BLK };
	static const struct x16_unit q5_0 = { QK, Q5_0_B, PT_KERN_X16_Q5_0_BLK };
	switch (type) {
	case PT_TYPE_Q4_K: return &q4k;
	case PT_TYPE_Q6_K: return &q6k;
	case PT_TYPE_Q8_0: return &q8_0;
	case PT_TYPE_Q5_0: return &q5_0;
	default: return NULL;
	}
}

uint32_t pt_kern_x16_unit_cols(enum pt_type type)
{
	const struct x16_unit *u = unit_of(type);
	return u ? u->cols : 0;
}

size_t pt_kern_x16_ahead(enum pt_type type)
{
	const struct x16_unit *u = unit_of(type);
	if (!u)
		return 0;
	return u->cols == QKK ? (size_t)PT_KERN_X16_AHEAD_SB * u->out
			      : (size_t)PT_KERN_X16_AHEAD_BLK * u->out;
}

bool pt_kern_x16_ok(enum pt_type type, uint64_t rows, uint64_t cols)
{
	const struct x16_unit *u = unit_of(type);
	return u && rows % PT_KERN_X16_ROWS == 0 && cols % u->cols == 0 && cols > 0;
}

size_t pt_kern_x16_band(enum pt_type type, uint64_t cols)
{
	const struct x16_unit *u = unit_of(type);
	if (!u || cols % u->cols || cols / u->cols > SIZE_MAX / u->out)
		return 0;
	return (size_t)(cols / u->cols) * u->out;
}

/* Packing: the code bytes of 16 rows move as a transpose of 32-bit words (64 bytes a row at
 * a time: pt_kern_x16_transpose_*, 5-8x the byte-moving loop's speed at AVX2 / AVX-512,
 * which is what lets X16_ROWS products pack a block of bands for every prefill product), the
 * scales row by row (a Q4_K row's 12 scale bytes unpacked as three 32-bit words at once). */
typedef void (*transpose_fn)(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16]);

static void transpose_scalar(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16])
{
	for (int r = 0; r < PT_KERN_X16_ROWS; r++, src += row_bytes)
		for (int k = 0; k < 16; k++)
			memcpy(dst[k] + 4 * r, src + 4 * k, 4);
}

static transpose_fn level_transpose(void)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() == PT_KERN_LEVEL_AVX512)
		return pt_kern_x16_transpose_avx512;
	if (pt_kern_level() == PT_KERN_LEVEL_AVX2)
		return pt_kern_x16_transpose_avx2;
#endif
	return transpose_scalar;
}

static inline __attribute__((always_inline)) void pack_q6_k_codes(const uint8_t *x0,
								   size_t row_bytes, uint8_t *o,
								   transpose_fn tr)
{
	uint8_t *dst[16];
	for (int h = 0; h < 2; h++) { /* ql bytes 64 h + 4 k = 64 h + 32 c + 4 st */
		for (int k = 0; k < 16; k++)
			dst[k] = o + X6_QL(h, k / 8, k % 8);
		tr(x0 + 64 * h, row_bytes, dst);
	}
	for (int k = 0; k < 16; k++) /* qh bytes 128 + 4 k = 128 + 32 h + 4 st */
		dst[k] = o + X6_QH(k / 8, k % 8);
	tr(x0 + 128, row_bytes, dst);
}

static inline __attribute__((always_inline)) void pack_q6_k_sb(const uint8_t *x0,
								size_t row_bytes, uint8_t *o,
								transpose_fn tr)
{
	pack_q6_k_codes(x0, row_bytes, o, tr);
	for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
		const uint8_t *x = x0 + r * row_bytes;
		for (int j = 0; j < 16; j++)
			o[X6_SC + 16 * j + r] = x[192 + j];
		memcpy(o + X6_D + 2 * r, x + 208, 2);
	}
}

static inline __attribute__((always_inline)) void pack_q4_k_codes(const uint8_t *x0,
								   size_t row_bytes, uint8_t *o,
								   transpose_fn tr)
{
	uint8_t *dst[16];
	for (int half = 0; half < 2; half++) { /* v = 8 g + s: qs bytes 32 g + 4 s = 4 v */
		for (int k = 0; k < 16; k++)
			dst[k] = o + X16_CODES + 64 * (16 * half + k);
		tr(x0 + 16 + 64 * half, row_bytes, dst);
	}
}

static inline __attribute__((always_inline)) void pack_q4_k_sb(const uint8_t *x0, size_t row_bytes,
								uint8_t *o, transpose_fn tr)
{
	pack_q4_k_codes(x0, row_bytes, o, tr);
	for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
		const uint8_t *x = x0 + r * row_bytes;
		/* kern_q4k_scale_min for j = 0..7 on 32-bit words: byte j % 4 of the j / 4 word */
		const uint32_t a = kern_u32(x + 4), b = kern_u32(x + 8), c = kern_u32(x + 12);
		const uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
		const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 6) & 0x03030303u) << 4;
		const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 6) & 0x03030303u) << 4;
		for (int j = 0; j < 4; j++) {
			o[X16_SC + 16 * j + r] = (uint8_t)(sc_lo >> 8 * j);
			o[X16_SC + 16 * (j + 4) + r] = (uint8_t)(sc_hi >> 8 * j);
		}
		for (int g = 0; g < 2; g++) { /* mins 2 g, 2 g + 1 side by side */
			o[X16_MIN + 32 * g + 2 * r] = (uint8_t)(mn_lo >> 16 * g);
			o[X16_MIN + 32 * g + 2 * r + 1] = (uint8_t)(mn_lo >> (16 * g + 8));
			o[X16_MIN + 32 * (g + 2) + 2 * r] = (uint8_t)(mn_hi >> 16 * g);
			o[X16_MIN + 32 * (g + 2) + 2 * r + 1] = (uint8_t)(mn_hi >> (16 * g + 8));
		}
		memcpy(o + X16_D + 2 * r, x, 2);
		memcpy(o + X16_DMIN + 2 * r, x + 2, 2);
	}
}

typedef void (*pack_sb_fn)(const uint8_t *x0, size_t row_bytes, uint8_t *o, transpose_fn tr);

/* A super-block (block) at a time the packing reads a little of each of 16 rows: sixteen
 * streams, more than the hardware prefetchers follow, so the next band's rows (adjacent; past
 * a matrix's last band the requests touch nothing) are requested a share a super-block.
 * bench_kern layouts, cold experts, one thread: packed products of 8-32 tokens 10-45 %
 * faster on Q4_K / Q6_K, 5-8 % at 96; Q8_0 / Q5_0 at 8 tokens 3x (the packing had cost more
 * than the products). */
static inline __attribute__((always_inline)) void pack_bands(
	pack_sb_fn sb_fn, size_t sb_in, size_t sb_out, const uint8_t *src, size_t row_bytes,
	size_t nsb, uint64_t b0, uint64_t b1, uint8_t *dst)
{
	const transpose_fn tr = level_transpose();
	const size_t share = PT_KERN_X16_ROWS * sb_in;
	for (uint64_t b = b0; b < b1; b++) {
		const uint8_t *rows = src + b * PT_KERN_X16_ROWS * row_bytes;
		const uintptr_t next = (uintptr_t)rows + PT_KERN_X16_ROWS * row_bytes;
		uint8_t *o = dst + b * nsb * sb_out;
		for (size_t i = 0; i < nsb; i++) {
			pt_kern_prefetch_range(next + i * share, next + (i + 1) * share);
			sb_fn(rows + i * sb_in, row_bytes, o + i * sb_out, tr);
		}
	}
}

/* Q8_0: codes move 4 bytes at a time with their sign bit flipped (w + 128: the kernels'
 * vpdpbusd takes the weight side unsigned). */
static inline __attribute__((always_inline)) void pack_q8_0_blk(const uint8_t *x0,
								 size_t row_bytes, uint8_t *o,
								 transpose_fn tr)
{
	(void)tr; /* 34-byte blocks: 4 bytes at a time */
	for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
		const uint8_t *x = x0 + r * row_bytes;
		for (int s = 0; s < 8; s++) {
			const uint32_t v = kern_u32(x + 2 + 4 * s) ^ 0x80808080u;
			memcpy(o + 64 * s + 4 * r, &v, 4);
		}
		memcpy(o + X8_D + 2 * r, x, 2);
	}
}

/* Q5_0's high bits rearranged so that step s finds them at fixed bits of each byte k: bit
 * 2 s of byte k is element 4 s + k's (a low nibble), bit 2 s + 1 element 16 + 4 s + k's. */
static uint32_t q5_0_spread(uint32_t qh)
{
	/* nibble v's bit k to bit 8 k: v * 0x00204081 places copies of v at bits 0, 7, 14, 21
	 * (no carries: they do not overlap), and the mask keeps bit k of the copy at 7 k */
	uint32_t w = 0;
	for (int s = 0; s < 4; s++) {
		w |= (((qh >> 4 * s) & 0xFu) * 0x00204081u & 0x01010101u) << 2 * s;
		w |= (((qh >> (16 + 4 * s)) & 0xFu) * 0x00204081u & 0x01010101u) << (2 * s + 1);
	}
	return w;
}

static uint32_t q5_0_gather(uint32_t w)
{
	uint32_t qh = 0;
	for (int s = 0; s < 4; s++)
		for (int k = 0; k < 4; k++) {
			qh |= ((w >> (8 * k + 2 * s)) & 1u) << (4 * s + k);
			qh |= ((w >> (8 * k + 2 * s + 1)) & 1u) << (16 + 4 * s + k);
		}
	return qh;
}

static inline __attribute__((always_inline)) void pack_q5_0_blk(const uint8_t *x0,
								 size_t row_bytes, uint8_t *o,
								 transpose_fn tr)
{
	(void)tr; /* 22-byte blocks: 4 bytes at a time */
	for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
		const uint8_t *x = x0 + r * row_bytes;
		for (int s = 0; s < 4; s++)
			memcpy(o + 64 * s + 4 * r, x + 6 + 4 * s, 4);
		const uint32_t w = q5_0_spread(kern_u32(x + 2));
		memcpy(o + X5_QH + 4 * r, &w, 4);
		memcpy(o + X5_D + 2 * r, x, 2);
	}
}

/* The AVX-512 packers (x16_avx512.c: registers, gathers with 32-bit row offsets; Q8_0 / Q5_0
 * blocks whole, the K-quants' scales) where the level has them and the rows' offsets fit,
 * then for Q8_0 / Q5_0 the AVX2 ones (x16_avx2.c), the scalar ones otherwise: PACKER /
 * PACKER_BLK(row_bytes, type) picks.  Same bytes either way. */
#if defined(PT_KERN_X86)
static void pack_q4_k_sb_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o, transpose_fn tr)
{
	pack_q4_k_codes(x0, row_bytes, o, tr);
	pt_kern_x16_pack_q4_k_scales_avx512(x0, row_bytes, o);
}

static void pack_q6_k_sb_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o, transpose_fn tr)
{
	pack_q6_k_codes(x0, row_bytes, o, tr);
	pt_kern_x16_pack_q6_k_scales_avx512(x0, row_bytes, o);
}

/* The block packers in pack_bands' shape (they move whole blocks: no transpose to pass). */
#define BLK_PACKER(name, fn)                                                                  \
	static void name(const uint8_t *x0, size_t row_bytes, uint8_t *o, transpose_fn tr)     \
	{                                                                                      \
		(void)tr;                                                                      \
		fn(x0, row_bytes, o);                                                          \
	}
BLK_PACKER(pack_q8_0_blk_avx512, pt_kern_x16_pack_q8_0_avx512)
BLK_PACKER(pack_q5_0_blk_avx512, pt_kern_x16_pack_q5_0_avx512)
BLK_PACKER(pack_q8_0_blk_avx2, pt_kern_x16_pack_q8_0_avx2)
BLK_PACKER(pack_q5_0_blk_avx2, pt_kern_x16_pack_q5_0_avx2)

#define PACKER(rb, name)                                                                      \
	(pt_kern_level() == PT_KERN_LEVEL_AVX512 && pt_kern_x16_gather_ok(rb)                  \
		 ? name##_avx512                                                               \
		 : name)
/* Q8_0 / Q5_0 have AVX2 packers too (no gathers: any row_bytes) */
#define PACKER_BLK(rb, name)                                                                  \
	(pt_kern_level() == PT_KERN_LEVEL_AVX512 && pt_kern_x16_gather_ok(rb)                  \
		 ? name##_avx512                                                               \
		 : pt_kern_level() >= PT_KERN_LEVEL_AVX2 ? name##_avx2 : name)
#else
#define PACKER(rb, name) name
#define PACKER_BLK(rb, name) name
#endif

void pt_kern_x16_pack(enum pt_type type, const void *src, size_t row_bytes, uint64_t cols,
		      uint64_t b0, uint64_t b1, void *dst)
{
	const struct x16_unit *u = unit_of(type);
	const size_t nsb = (size_t)(cols / u->cols);
	switch (type) {
	case PT_TYPE_Q6_K:
		pack_bands(PACKER(row_bytes, pack_q6_k_sb), u->in,
			   u->out, src, row_bytes, nsb, b0, b1, dst);
		break;
	case PT_TYPE_Q8_0:
		pack_bands(PACKER_BLK(row_bytes, pack_q8_0_blk), u->in,
			   u->out, src, row_bytes, nsb, b0, b1, dst);
		break;
	case PT_TYPE_Q5_0:
		pack_bands(PACKER_BLK(row_bytes, pack_q5_0_blk), u->in,
			   u->out, src, row_bytes, nsb, b0, b1, dst);
		break;
	default:
		pack_bands(PACKER(row_bytes, pack_q4_k_sb), u->in,
			   u->out, src, row_bytes, nsb, b0, b1, dst);
		break;
	}
}

/* The inverses: row r of one packed super-block back as stored (the embedding rows of a
 * head tied to the token embedding are read from its X16 copy). */
static void unpack_q6_k_sb(const uint8_t *o, int r, uint8_t *x)
{
	for (int h = 0; h < 2; h++)
		for (int st = 0; st < 8; st++) {
			for (int c = 0; c < 2; c++)
				memcpy(x + 64 * h + 32 * c + 4 * st, o + X6_QL(h, c, st) + 4 * r, 4);
			memcpy(x + 128 + 32 * h + 4 * st, o + X6_QH(h, st) + 4 * r, 4);
		}
	for (int j = 0; j < 16; j++)
		x[192 + j] = o[X6_SC + 16 * j + r];
	memcpy(x + 208, o + X6_D + 2 * r, 2);
}

static void unpack_q4_k_sb(const uint8_t *o, int r, uint8_t *x)
{
	uint8_t sc[8], mn[8];
	for (int j = 0; j < 8; j++) {
		sc[j] = o[X16_SC + 16 * j + r];
		mn[j] = o[X16_MIN + 32 * (j / 2) + 2 * r + j % 2];
	}
	for (int j = 0; j < 4; j++) { /* kern_q4k_scale_min's packing of 6-bit scales and mins */
		x[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		x[8 + j] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
		x[12 + j] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
	}
	for (int v = 0; v < 32; v++)
		memcpy(x + 16 + 4 * v, o + X16_CODES + 64 * v + 4 * r, 4);
	memcpy(x, o + X16_D + 2 * r, 2);
	memcpy(x + 2, o + X16_DMIN + 2 * r, 2);
}

static void unpack_q8_0_blk(const uint8_t *o, int r, uint8_t *x)
{
	for (int s = 0; s < 8; s++) {
		const uint32_t v = kern_u32(o + 64 * s + 4 * r) ^ 0x80808080u;
		memcpy(x + 2 + 4 * s, &v, 4);
	}
	memcpy(x, o + X8_D + 2 * r, 2);
}

static void unpack_q5_0_blk(const uint8_t *o, int r, uint8_t *x)
{
	for (int s = 0; s < 4; s++)
		memcpy(x + 6 + 4 * s, o + 64 * s + 4 * r, 4);
	const uint32_t qh = q5_0_gather(kern_u32(o + X5_QH + 4 * r));
	memcpy(x + 2, &qh, 4);
	memcpy(x, o + X5_D + 2 * r, 2);
}

void pt_kern_x16_unpack_row(enum pt_type type, const void *band, uint64_t cols, uint32_t r,
			    void *row)
{
	const struct x16_unit *u = unit_of(type);
	const size_t nsb = (size_t)(cols / u->cols);
	for (size_t i = 0; i < nsb; i++) {
		const uint8_t *o = (const uint8_t *)band + i * u->out;
		uint8_t *x = (uint8_t *)row + i * u->in;
		switch (type) {
		case PT_TYPE_Q6_K: unpack_q6_k_sb(o, (int)r, x); break;
		case PT_TYPE_Q8_0: unpack_q8_0_blk(o, (int)r, x); break;
		case PT_TYPE_Q5_0: unpack_q5_0_blk(o, (int)r, x); break;
		default: unpack_q4_k_sb(o, (int)r, x); break;
		}
	}
}

/* The definition (kern.h): per super-block exact integer sums, then one FMA chain per output
 * for the scaled sums and one for the min terms. */
static void x16_q4_k_scalar(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	const size_t nsb = n / QKK;
	for (uint32_t t = 0; t < n_tok; t++)
		for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
			float acc = 0.0f, accm = 0.0f;
			const uint8_t *p = band;
			const uint8_t *q8 = (const uint8_t *)a + t * as;
			for (size_t i = 0; i < nsb; i++, p += PT_KERN_X16_Q4K_SB, q8 += Q8K_B) {
				int32_t isum = 0, msum = 0;
				for (int j = 0; j < 8; j++) {
					const int g = j / 2, hi = j % 2;
					int32_t s = 0;
					for (int k = 0; k < 32; k++) {
						const uint8_t b = p[X16_CODES + 64 * (8 * g + k / 4) + 4 * r + k % 4];
						const int code = hi ? b >> 4 : b & 0xF;
						s += code * (int8_t)q8[Q8K_QS + 64 * g + 32 * hi + k];
					}
					isum += s * p[X16_SC + 16 * j + r];
					const int32_t bs = kern_i16(q8 + Q8K_BSUMS + 4 * j) +
							   kern_i16(q8 + Q8K_BSUMS + 4 * j + 2);
					msum += bs * p[X16_MIN + 32 * g + 2 * r + hi];
				}
				const float d8 = kern_f32(q8);
				const float dd = kern_fp16_to_f32(kern_u16(p + X16_D + 2 * r)) * d8;
				const float dm = kern_fp16_to_f32(kern_u16(p + X16_DMIN + 2 * r)) * d8;
				acc = fmaf(dd, (float)isum, acc);
				accm = fmaf(dm, (float)msum, accm);
			}
			y[t * ys + r] = acc - accm;
		}
}

/* Q6_K: sub-block j (16 elements) = half h = j / 8, part q = (j / 2) % 4, steps st = 4 (j % 2)
 * .. + 3; element 128 h + 32 q + 4 st + i has its low bits in the ql vector (h, c = q % 2, st)
 * (the high nibble for q >= 2) and bits 2 q, 2 q + 1 of the qh vector (h, st). */
static void x16_q6_k_scalar(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	const size_t nsb = n / QKK;
	for (uint32_t t = 0; t < n_tok; t++)
		for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
			float acc = 0.0f;
			const uint8_t *p = band;
			const uint8_t *q8 = (const uint8_t *)a + t * as;
			for (size_t i = 0; i < nsb; i++, p += PT_KERN_X16_Q6K_SB, q8 += Q8K_B) {
				int32_t isum = 0;
				for (int j = 0; j < 16; j++) {
					const int h = j / 8, q = (j / 2) % 4;
					int32_t s = 0;
					for (int k = 0; k < 16; k++) {
						const int st = 4 * (j % 2) + k / 4, b = 4 * r + k % 4;
						const uint8_t lb = p[X6_QL(h, q % 2, st) + b];
						const uint8_t hb = p[X6_QH(h, st) + b];
						const int code = (q >= 2 ? lb >> 4 : lb & 0xF) |
								 ((hb >> (2 * q)) & 3) << 4;
						s += (code - 32) *
						     (int8_t)q8[Q8K_QS + 128 * h + 32 * q + 4 * st + k % 4];
					}
					isum += s * (int8_t)p[X6_SC + 16 * j + r];
				}
				const float dd = kern_fp16_to_f32(kern_u16(p + X6_D + 2 * r)) * kern_f32(q8);
				acc = fmaf(dd, (float)isum, acc);
			}
			y[t * ys + r] = acc;
		}
}

/* Q8_0 and Q5_0 against Q8_0 activations (d, then 32 codes): per block the exact integer
 * sum of weight times activation, then one FMA chain, A = fma(d * d8, (float)isum, A). */
static inline int blk32_weight(const uint8_t *p, int r, int k, bool q5)
{
	if (!q5)
		return p[64 * (k / 4) + 4 * r + k % 4] - 128;
	const int hi = k >= 16, s = (k % 16) / 4, kk = k % 4;
	const uint8_t b = p[64 * s + 4 * r + kk];
	const uint32_t hw = kern_u32(p + X5_QH + 4 * r);
	return ((hi ? b >> 4 : b & 0xF) | (int)((hw >> (8 * kk + 2 * s + hi)) & 1u) << 4) - 16;
}

static inline __attribute__((always_inline)) void x16_blk32_scalar(
	size_t n, const void *band, const void *a, size_t as, uint32_t n_tok, float *y, size_t ys,
	const bool q5)
{
	const size_t blk = q5 ? PT_KERN_X16_Q5_0_BLK : PT_KERN_X16_Q8_0_BLK;
	for (uint32_t t = 0; t < n_tok; t++)
		for (int r = 0; r < PT_KERN_X16_ROWS; r++) {
			float acc = 0.0f;
			const uint8_t *p = band;
			const uint8_t *q8 = (const uint8_t *)a + t * as;
			for (size_t i = 0; i < n / QK; i++, p += blk, q8 += Q8_0_B) {
				int32_t isum = 0;
				for (int k = 0; k < QK; k++)
					isum += blk32_weight(p, r, k, q5) * (int8_t)q8[2 + k];
				const float dd = kern_fp16_to_f32(kern_u16(p + blk - 32 + 2 * r)) *
						 kern_fp16_to_f32(kern_u16(q8));
				acc = fmaf(dd, (float)isum, acc);
			}
			y[t * ys + r] = acc;
		}
}

static void x16_q8_0_scalar(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	x16_blk32_scalar(n, band, a, as, n_tok, y, ys, false);
}

static void x16_q5_0_scalar(size_t n, const void *band, const void *a, size_t as,
			    uint32_t n_tok, float *y, size_t ys)
{
	x16_blk32_scalar(n, band, a, as, n_tok, y, ys, true);
}

const pt_kern_x16_fn pt_kern_x16_scalar[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_q4_k_scalar,
	[PT_TYPE_Q6_K] = x16_q6_k_scalar,
	[PT_TYPE_Q8_0] = x16_q8_0_scalar,
	[PT_TYPE_Q5_0] = x16_q5_0_scalar,
};

/* ---- one row as stored, with the interleaved numerics (PT_KERN_LAYOUT_X16_ROWS) ------------
 * The reference for the levels' row kernels: the same exact integers per super-block and the
 * same FMA chains as x16_q4_k_scalar / x16_q6_k_scalar above, read from the row as stored
 * (Q4_K: d, dmin, 12 packed scale bytes, 128 code bytes; Q6_K: ql, qh, scales, d). */
static float x16_dot_q4_k_scalar(size_t n, const void *w, const void *a)
{
	float acc = 0.0f, accm = 0.0f;
	const uint8_t *x = w, *q8 = a;
	for (size_t i = 0; i < n / QKK; i++, x += Q4K_B, q8 += Q8K_B) {
		int32_t isum = 0, msum = 0;
		for (int j = 0; j < 8; j++) {
			const int g = j / 2, hi = j % 2;
			uint8_t sc, mn;
			kern_q4k_scale_min(x + 4, j, &sc, &mn);
			int32_t s = 0;
			for (int k = 0; k < 32; k++) {
				const uint8_t b = x[16 + 32 * g + k];
				s += (hi ? b >> 4 : b & 0xF) * (int8_t)q8[Q8K_QS + 64 * g + 32 * hi + k];
			}
			isum += s * sc;
			msum += (kern_i16(q8 + Q8K_BSUMS + 4 * j) + kern_i16(q8 + Q8K_BSUMS + 4 * j + 2)) * mn;
		}
		const float d8 = kern_f32(q8);
		acc = fmaf(kern_fp16_to_f32(kern_u16(x)) * d8, (float)isum, acc);
		accm = fmaf(kern_fp16_to_f32(kern_u16(x + 2)) * d8, (float)msum, accm);
	}
	return acc - accm;
}

static float x16_dot_q6_k_scalar(size_t n, const void *w, const void *a)
{
	float acc = 0.0f;
	const uint8_t *x = w, *q8 = a;
	for (size_t i = 0; i < n / QKK; i++, x += Q6K_B, q8 += Q8K_B) {
		int32_t isum = 0;
		for (int j = 0; j < 16; j++) {
			int32_t s = 0;
			for (int e = 16 * j; e < 16 * j + 16; e++) {
				const int h = e / 128, q = e % 128 / 32, k = e % 32;
				const uint8_t lb = x[64 * h + 32 * (q % 2) + k];
				const int code = (q >= 2 ? lb >> 4 : lb & 0xF) |
						 ((x[128 + 32 * h + k] >> (2 * q)) & 3) << 4;
				s += (code - 32) * (int8_t)q8[Q8K_QS + e];
			}
			isum += s * (int8_t)x[192 + j];
		}
		acc = fmaf(kern_fp16_to_f32(kern_u16(x + 208)) * kern_f32(q8), (float)isum, acc);
	}
	return acc;
}

/* Q8_0 / Q5_0 rows (d, then 32 codes; Q5_0: d, the fifth bits, 16 nibble bytes) against Q8_0
 * activations: per block the exact integer sum, then x16_blk32_scalar's FMA chain.  Only the
 * reference one row at a time: a row of 32-element blocks pays a reduction and a dependent FMA
 * every 22 or 34 bytes, which a one-row SIMD twin measured at about half the row-major dot's
 * speed (Gemma 4's 2816 x 704 Q5_0 down, one token: 14.6 against 25.2 GMAC/s); the levels'
 * twins take sixteen rows a call (pt_kern_ops.x16_dot16), and only where one exists are these
 * types run as X16_ROWS by the engine (pt_kern_x16_rows_native). */
static inline __attribute__((always_inline)) float x16_dot_blk32_scalar(size_t n, const void *w,
									 const void *a, const bool q5)
{
	float acc = 0.0f;
	const uint8_t *x = w, *q8 = a;
	for (size_t i = 0; i < n / QK; i++, x += q5 ? Q5_0_B : Q8_0_B, q8 += Q8_0_B) {
		int32_t isum = 0;
		const uint32_t qh = q5 ? kern_u32(x + 2) : 0;
		for (int k = 0; k < QK; k++) {
			const int wk = !q5 ? (int8_t)x[2 + k]
				       : ((k < 16 ? x[6 + k] & 0xF : x[6 + k - 16] >> 4) |
					  (int)((qh >> k) & 1u) << 4) - 16;
			isum += wk * (int8_t)q8[2 + k];
		}
		const float dd = kern_fp16_to_f32(kern_u16(x)) * kern_fp16_to_f32(kern_u16(q8));
		acc = fmaf(dd, (float)isum, acc);
	}
	return acc;
}

static float x16_dot_q8_0_scalar(size_t n, const void *w, const void *a)
{
	return x16_dot_blk32_scalar(n, w, a, false);
}

static float x16_dot_q5_0_scalar(size_t n, const void *w, const void *a)
{
	return x16_dot_blk32_scalar(n, w, a, true);
}

const pt_kern_dot_fn pt_kern_x16_dot_scalar[PT_TYPE_COUNT] = {
	[PT_TYPE_Q4_K] = x16_dot_q4_k_scalar,
	[PT_TYPE_Q6_K] = x16_dot_q6_k_scalar,
	[PT_TYPE_Q8_0] = x16_dot_q8_0_scalar,
	[PT_TYPE_Q5_0] = x16_dot_q5_0_scalar,
};

bool pt_kern_x16_rows_native(enum pt_type type)
{
	const struct pt_kern_ops *o = pt_kern_ops(type);
	return o && o->x16 && o->x16_level != PT_KERN_LEVEL_SCALAR &&
	       ((o->x16_dot && o->x16_dot_level != PT_KERN_LEVEL_SCALAR) || o->x16_dot16);
}

bool pt_kern_x16_native(enum pt_type type)
{
	const struct pt_kern_ops *o = pt_kern_ops(type);
	return o && o->x16 && o->x16_level != PT_KERN_LEVEL_SCALAR;
}

enum pt_status pt_kern_check_layout(const struct pt_kern_mat *w, const struct pt_kern_ops *ops,
				    struct pt_error *err)
{
	if (w->layout == PT_KERN_LAYOUT_ROWS)
		return PT_OK;
	if (w->layout != PT_KERN_LAYOUT_X16 && w->layout != PT_KERN_LAYOUT_X16_ROWS)
		return pt_error_set(err, PT_E_INVALID, "unknown matrix layout %d", (int)w->layout);
	if (!ops->x16 || (w->layout == PT_KERN_LAYOUT_X16_ROWS && !ops->x16_dot) ||
	    !pt_kern_x16_ok(w->type, w->rows, w->cols))
		return pt_error_set(err, PT_E_INVALID, "%s matrix %llu x %llu: no interleaved "
				    "(x16) layout for this type and shape", pt_type_name(w->type),
				    (unsigned long long)w->rows, (unsigned long long)w->cols);
	return PT_OK;
}
