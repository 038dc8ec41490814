/* blocks.h - the byte layout of every ggml quantization block we read or write.
 *
 * One struct per format, named pt_block_<type>, laid out exactly as ggml's block_<type>
 * (GGUF-AND-QUANTS.md sections 4-5).  No field needs padding: every struct's size and the
 * offsets of its later fields are asserted below, and types.c sizes the type table from
 * these structs, so the table and the layouts cannot drift apart.  Alignment is 2 (fp16
 * fields; 4 for Q8_K's float d), which GGUF rows satisfy because tensor data is 32-aligned
 * and every row is a whole number of blocks.  Multi-byte fields are little-endian; particle
 * targets little-endian hosts only.
 *
 * fp16/bf16 fields are raw uint16_t bit patterns: widen with pt_fp16_to_f32 (types.h). */
#ifndef PT_QUANT_BLOCKS_H
#define PT_QUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Elements per block. */
#define PT_QK4_0 32
#define PT_QK4_1 32
#define PT_QK5_0 32
#define PT_QK5_1 32
#define PT_QK8_0 32
#define PT_QK8_1 32
#define PT_QK4_NL 32
#define PT_QK_MXFP4 32
#define PT_QK_K 256
#define PT_K_SCALE_SIZE 12 /* packed 6-bit scales/mins of Q4_K and Q5_K */

/* 4-bit formats: qs[j] low nibble = element j, high nibble = element j + 16. */
struct pt_block_q4_0 {
	uint16_t d;               /* fp16 scale */
	uint8_t qs[PT_QK4_0 / 2]; /* y = (q - 8) * d */
};

struct pt_block_q4_1 {
	uint16_t d;               /* fp16 scale */
	uint16_t m;               /* fp16 min: y = q * d + m */
	uint8_t qs[PT_QK4_1 / 2];
};

struct pt_block_q5_0 {
	uint16_t d;               /* fp16 scale */
	uint8_t qh[4];            /* u32 LE: bit j = 5th bit of element j */
	uint8_t qs[PT_QK5_0 / 2]; /* y = (q - 16) * d */
};

struct pt_block_q5_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qh[4];
	uint8_t qs[PT_QK5_1 / 2]; /* y = q * d + m */
};

struct pt_block_q8_0 {
	uint16_t d;               /* fp16 scale */
	int8_t qs[PT_QK8_0];      /* y = qs * d */
};

/* Activation format for Q4_1/Q5_1 dot products; s = fp16(d * sum(qs)). */
struct pt_block_q8_1 {
	uint16_t d;
	uint16_t s;
	int8_t qs[PT_QK8_1];
};

/* Q2_K: 16 sub-blocks of 16; scales[b] low nibble = scale code, high nibble = min code. */
struct pt_block_q2_K {
	uint8_t scales[PT_QK_K / 16];
	uint8_t qs[PT_QK_K / 4];  /* 2-bit levels: element 128h+32j+l at qs[32h+l] bits 2j */
	uint16_t d;               /* fp16 super-scale of the scales */
	uint16_t dmin;            /* fp16 super-scale of the mins */
};

/* Q3_K: 16 sub-blocks of 16; 6-bit signed scales (bias 32) packed in 12 bytes. */
struct pt_block_q3_K {
	uint8_t hmask[PT_QK_K / 8]; /* hmask[e % 32] bit e/32 set: level >= 0 (else minus 4) */
	uint8_t qs[PT_QK_K / 4];    /* low 2 bits, packed like Q2_K */
	uint8_t scales[12];
	uint16_t d;
};

/* Q4_K: 8 sub-blocks of 32; 6-bit scales and mins packed (get_scale_min_k4). */
struct pt_block_q4_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[PT_K_SCALE_SIZE];
	uint8_t qs[PT_QK_K / 2];  /* chunk c: qs[32c+l] low = element 64c+l, high = 64c+32+l */
};

struct pt_block_q5_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[PT_K_SCALE_SIZE];
	uint8_t qh[PT_QK_K / 8];  /* qh[l] bit 2c / 2c+1: 5th bit of element 64c+l / 64c+32+l */
	uint8_t qs[PT_QK_K / 2];
};

/* Q6_K: 16 sub-blocks of 16; signed 8-bit sub-scales. */
struct pt_block_q6_K {
	uint8_t ql[PT_QK_K / 2];      /* low 4 bits */
	uint8_t qh[PT_QK_K / 4];      /* high 2 bits */
	int8_t scales[PT_QK_K / 16];
	uint16_t d;
};

/* Q8_K: activation format for K-quant dot products; d is a float32, not fp16. */
struct pt_block_q8_K {
	float d;
	int8_t qs[PT_QK_K];
	int16_t bsums[PT_QK_K / 16]; /* sum of each group of 16 qs */
};

struct pt_block_iq4_nl {
	uint16_t d;
	uint8_t qs[PT_QK4_NL / 2];    /* codes into pt_kvalues_iq4nl */
};

/* IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (bias 32). */
struct pt_block_iq4_xs {
	uint16_t d;
	uint16_t scales_h;            /* bits 2ib..2ib+1: high bits of scale ib */
	uint8_t scales_l[PT_QK_K / 64]; /* nibble ib%2 of byte ib/2: low bits of scale ib */
	uint8_t qs[PT_QK_K / 2];      /* sub-block ib: qs[16ib+j] low = 32ib+j, high = 32ib+16+j */
};

/* MXFP4: E2M1 codes with one E8M0 exponent; y = pt_kvalues_mxfp4[code] * 2^(e-128). */
struct pt_block_mxfp4 {
	uint8_t e;
	uint8_t qs[PT_QK_MXFP4 / 2];
};

_Static_assert(sizeof(struct pt_block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(struct pt_block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(struct pt_block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(struct pt_block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(struct pt_block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(struct pt_block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(struct pt_block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(struct pt_block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(struct pt_block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(struct pt_block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(struct pt_block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(struct pt_block_q8_K) == 292, "block_q8_K layout");
_Static_assert(sizeof(struct pt_block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(struct pt_block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(struct pt_block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(offsetof(struct pt_block_q2_K, d) == 80, "q2_K d offset");
_Static_assert(offsetof(struct pt_block_q3_K, scales) == 96, "q3_K scales offset");
_Static_assert(offsetof(struct pt_block_q3_K, d) == 108, "q3_K d offset");
_Static_assert(offsetof(struct pt_block_q5_K, qs) == 48, "q5_K qs offset");
_Static_assert(offsetof(struct pt_block_q6_K, scales) == 192, "q6_K scales offset");
_Static_assert(offsetof(struct pt_block_q6_K, d) == 208, "q6_K d offset");
_Static_assert(offsetof(struct pt_block_q8_K, bsums) == 260, "q8_K bsums offset");
_Static_assert(offsetof(struct pt_block_iq4_xs, qs) == 8, "iq4_xs qs offset");

/* Non-linear 4-bit value tables (ggml kvalues_iq4nl, kvalues_mxfp4), defined in blocks.c.
 * The MXFP4 table is E2M1 doubled; the block exponent is halved to match (types.h). */
extern const int8_t pt_kvalues_iq4nl[16];
extern const int8_t pt_kvalues_mxfp4[16];

/* The 6-bit scale and min of sub-block j (0..7) from Q4_K/Q5_K packed scales. */
static inline void pt_get_scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

/* The signed scale (-32..31) of Q3_K sub-block b (0..15) from its 12 packed bytes. */
static inline int pt_get_scale_q3_K(int b, const uint8_t *s)
{
	int low4 = b < 8 ? (s[b] & 0xF) : (s[b - 8] >> 4);
	int high2 = (s[8 + b % 4] >> (2 * (b / 4))) & 3;
	return (low4 | (high2 << 4)) - 32;
}

#endif
