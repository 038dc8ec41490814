/* kern_internal.h - shared by the kernel files only: block layouts (byte offsets, see
 * GGUF-AND-QUANTS.md sections 4-5), lookup tables, and each level's kernel table.  Kernels
 * read blocks through these offsets with unaligned loads, so rows need no alignment. */
#ifndef PT_KERN_INTERNAL_H
#define PT_KERN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/blocks.h"

#define QK 32   /* elements of a 32-block (Q4_0 ... Q8_1, IQ4_NL, MXFP4) */
#define QKK 256 /* elements of a K-quant super-block */

/* Block sizes in bytes. */
#define Q4_0_B 18
#define Q4_1_B 20
#define Q5_0_B 22
#define Q5_1_B 24
#define Q8_0_B 34
#define Q8_1_B 36
#define IQ4NL_B 18
#define MXFP4_B 17
#define Q2K_B 84
#define Q3K_B 110
#define Q4K_B 144
#define Q5K_B 176
#define Q6K_B 210
#define Q8K_B 292
#define IQ4XS_B 136

/* Q8_K field offsets: float d, int8 qs[256], int16 bsums[16]. */
#define Q8K_QS 4
#define Q8K_BSUMS 260

static inline uint16_t kern_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t kern_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4); /* little-endian host (x86-64, aarch64) */
	return v;
}

static inline float kern_f32(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

static inline int16_t kern_i16(const uint8_t *p)
{
	return (int16_t)kern_u16(p);
}

/* fp16 -> f32, exact (GGUF-AND-QUANTS.md 1.2), inline for the scalar kernels; equals
 * pt_fp16_to_f32 for all 65536 codes (tested).  Normal numbers take the first branch. */
static inline float kern_fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	uint32_t bits;
	float f;
	if (exp != 0 && exp != 0x1f) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else { /* zero or subnormal: man * 2^-24 is exact */
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	memcpy(&f, &bits, 4);
	return f;
}

/* E8M0 exponent byte to half its value, 2^(e-128) (GGUF-AND-QUANTS.md 1.4), inline for the
 * per-block MXFP4 loops; equals pt_e8m0_to_f32_half. */
static inline float kern_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Q4_K / Q5_K 6-bit scale and min of sub-block j (get_scale_min_k4). */
static inline void kern_q4k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

/* The activation sums of Q8_K sub-blocks 2g and 2g + 1 (32 elements each: two 16-element
 * bsums each, |sum| <= 4096) as the int16 pair of one 32-bit word, low = 2g: the X16 Q4_K
 * kernels' min-term operand. */
static inline int32_t kern_q8k_bsum_pair(const uint8_t *q8, int g)
{
	const uint8_t *bs = q8 + Q8K_BSUMS + 8 * g;
	const uint16_t lo = (uint16_t)(kern_i16(bs) + kern_i16(bs + 2));
	const uint16_t hi = (uint16_t)(kern_i16(bs + 4) + kern_i16(bs + 6));
	return (int32_t)((uint32_t)lo | (uint32_t)hi << 16);
}

/* The byte offsets used by the kernels are the quant module's block layouts. */
_Static_assert(sizeof(struct pt_block_q4_0) == Q4_0_B && sizeof(struct pt_block_q4_1) == Q4_1_B &&
		       sizeof(struct pt_block_q5_0) == Q5_0_B && sizeof(struct pt_block_q5_1) == Q5_1_B &&
		       sizeof(struct pt_block_q8_0) == Q8_0_B && sizeof(struct pt_block_q8_1) == Q8_1_B &&
		       sizeof(struct pt_block_iq4_nl) == IQ4NL_B && sizeof(struct pt_block_mxfp4) == MXFP4_B,
	       "32-block layouts");
_Static_assert(sizeof(struct pt_block_q2_K) == Q2K_B && sizeof(struct pt_block_q3_K) == Q3K_B &&
		       sizeof(struct pt_block_q4_K) == Q4K_B && sizeof(struct pt_block_q5_K) == Q5K_B &&
		       sizeof(struct pt_block_q6_K) == Q6K_B && sizeof(struct pt_block_q8_K) == Q8K_B &&
		       sizeof(struct pt_block_iq4_xs) == IQ4XS_B &&
		       offsetof(struct pt_block_q8_K, qs) == Q8K_QS &&
		       offsetof(struct pt_block_q8_K, bsums) == Q8K_BSUMS,
	       "K-block layouts");

/* Test hook: pretend the CPU supports at most `level` (PT_KERN_LEVEL_COUNT restores the
 * detected maximum), so the refusal of an unsupported PARTICLE_CPU level can be tested on any
 * machine.  Also lowers the current level if it is above the cap. */
void pt_kern_test_cap_level(enum pt_kern_level level);

/* Level tables: dot function per weight type, NULL where the level has no own kernel (the
 * dispatcher then falls back to the next lower level). */
extern const pt_kern_dot_fn pt_kern_dot_scalar[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_dot_avx2[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_dot_avx512[PT_TYPE_COUNT];
/* aarch64 (dot_neon.c, dot_dotprod.c; the i8mm level has no dots of its own: all NULL) */
extern const pt_kern_dot_fn pt_kern_dot_neon[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_dot_dotprod[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_dot_i8mm[PT_TYPE_COUNT];
/* Four-activation variants, NULL where a level has none (matvec then calls dot 4 times). */
extern const pt_kern_dot4_fn pt_kern_dot4_avx2[PT_TYPE_COUNT];
extern const pt_kern_dot4_fn pt_kern_dot4_avx512[PT_TYPE_COUNT];
extern const pt_kern_dot4_fn pt_kern_dot4_neon[PT_TYPE_COUNT];
extern const pt_kern_dot4_fn pt_kern_dot4_dotprod[PT_TYPE_COUNT];
/* Register tiles (tile_*.c), empty where a level has none for the type. */
extern const struct pt_kern_tile pt_kern_tile_avx2[PT_TYPE_COUNT];
extern const struct pt_kern_tile pt_kern_tile_avx512[PT_TYPE_COUNT];
/* aarch64 NEON / SDOT tiles (dot_neon_impl.h: 2 rows x 4 tokens, the dot's own body) */
extern const struct pt_kern_tile pt_kern_tile_neon[PT_TYPE_COUNT];
extern const struct pt_kern_tile pt_kern_tile_dotprod[PT_TYPE_COUNT];
/* aarch64 SMMLA tiles (tile_i8mm.c), bit-identical to the dotprod dots the i8mm level runs */
extern const struct pt_kern_tile pt_kern_tile_i8mm[PT_TYPE_COUNT];
/* Interleaved-rows kernels per level (x16.c: the scalar reference; x16_avx512.c, x16_avx2.c),
 * NULL where a level has none; all bit-identical to the scalar one (kern.h, "interleaved"). */
extern const pt_kern_x16_fn pt_kern_x16_scalar[PT_TYPE_COUNT];
extern const pt_kern_x16_fn pt_kern_x16_avx2[PT_TYPE_COUNT];
extern const pt_kern_x16_fn pt_kern_x16_avx512[PT_TYPE_COUNT];
/* Their two-band twins (kern.h, pt_kern_x16_pair_fn), NULL where a type has none. */
extern const pt_kern_x16_pair_fn pt_kern_x16_pair_avx512[PT_TYPE_COUNT];
/* The packing's one primitive (x16.c): 16 rows of 64 bytes (row r at src + r * row_bytes)
 * transposed as 32-bit words, word k of row r to dst[k] + 4 r.  Moves bytes only, so every
 * level's is the scalar one's; the AVX2 / AVX-512 twins are 8x8 / 16x16 register transposes. */
void pt_kern_x16_transpose_avx2(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16]);
void pt_kern_x16_transpose_avx512(const uint8_t *src, size_t row_bytes, uint8_t *const dst[16]);
/* Whether 16 rows row_bytes apart have 32-bit offsets (the AVX-512 packers and the
 * sixteen-row twin gather one word of each row). */
static inline bool pt_kern_x16_gather_ok(size_t row_bytes)
{
	return row_bytes <= INT32_MAX / PT_KERN_X16_ROWS;
}
/* One 32-column block of 16 rows (row r at x0 + r * row_bytes, pt_kern_x16_gather_ok) packed
 * into o (PT_KERN_X16_Q8_0_BLK / _Q5_0_BLK bytes): x16.c's scalar block packers' bytes. */
void pt_kern_x16_pack_q8_0_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o);
void pt_kern_x16_pack_q5_0_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o);
/* The same at AVX2 (8 x 8 word transposes; any row_bytes). */
void pt_kern_x16_pack_q8_0_avx2(const uint8_t *x0, size_t row_bytes, uint8_t *o);
void pt_kern_x16_pack_q5_0_avx2(const uint8_t *x0, size_t row_bytes, uint8_t *o);
/* The scales, mins, d and dmin of one Q4_K super-block of 16 rows into o's bytes [2048,
 * 2368) (the same bytes as x16.c's pack_q4_k_sb; pt_kern_x16_gather_ok). */
void pt_kern_x16_pack_q4_k_scales_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o);
/* The same for Q6_K: scales and d into o's bytes [3072, 3360). */
void pt_kern_x16_pack_q6_k_scales_avx512(const uint8_t *x0, size_t row_bytes, uint8_t *o);
/* Their row-as-stored twins (kern.h, PT_KERN_LAYOUT_X16_ROWS), NULL where a level has none. */
extern const pt_kern_dot_fn pt_kern_x16_dot_scalar[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_x16_dot_avx2[PT_TYPE_COUNT];
extern const pt_kern_dot_fn pt_kern_x16_dot_avx512[PT_TYPE_COUNT];
extern const pt_kern_dot4_fn pt_kern_x16_dot4_avx512[PT_TYPE_COUNT];
extern const pt_kern_dot4_fn pt_kern_x16_dot4_avx2[PT_TYPE_COUNT];
extern const pt_kern_x16_dot16_fn pt_kern_x16_dot16_avx2[PT_TYPE_COUNT];
extern const pt_kern_x16_dot16_fn pt_kern_x16_dot16_avx512[PT_TYPE_COUNT];
/* The X16 kernels request the lines PT_KERN_X16_AHEAD_SB super-blocks ahead of the one they
 * read, a quarter super-block per step (pt_kern_x16_prefetch_ahead), so a band streams with
 * its next lines always in flight while the kernel computes; bands of a matrix lie one after
 * another, so the stream runs on into the next band.  Whoever starts a stream requests its
 * first PT_KERN_X16_AHEAD_SB super-blocks (pt_kern_x16_prefetch_start).  bench_kern il, Zen 5,
 * one thread: Q4_K 27.0 -> 31.5 GB/s, Q6_K 26.8 -> 34.4 against the earlier burst of a whole
 * band right before it ran; two at once 50 -> 62 (docs/PERFORMANCE.md round 18).  One and two
 * super-blocks ahead measured the same for Q4_K, two the best for Q6_K; a whole band (8)
 * ahead lower.  Hints only: results unchanged, and a request past a matrix's end (the last
 * band's) touches nothing (addresses are formed as integers, never dereferenced). */
#define PT_KERN_X16_AHEAD_SB 2

/* Requests every line of [a, b) into every cache level (prefetcht0).  Not non-temporally: on
 * Intel a prefetchnta line bypasses L2 and is the first replaced in L1, so the row loops'
 * requests a row or more ahead were evicted before use and streaming fell to half
 * (docs/PERFORMANCE.md round 34). */
static inline void pt_kern_prefetch_range(uintptr_t a, uintptr_t b)
{
	for (uintptr_t l = a & ~(uintptr_t)63; l < b; l += 64)
		__builtin_prefetch((const void *)l, 0, 3);
}

/* The lines of one weight row (the row loops' request a few rows ahead). */
static inline void pt_kern_prefetch_row(const uint8_t *row, size_t bytes)
{
	pt_kern_prefetch_range((uintptr_t)row, (uintptr_t)row + bytes);
}

/* Bytes [*lo, *hi) after a super-block's start that its step `part` (0..3) requests: part
 * `part` of the super-block PT_KERN_X16_AHEAD_SB ahead (the four parts tile it). */
static inline void pt_kern_x16_ahead_part(size_t sb_bytes, int part, size_t *lo, size_t *hi)
{
	*lo = PT_KERN_X16_AHEAD_SB * sb_bytes + sb_bytes * (size_t)part / 4;
	*hi = PT_KERN_X16_AHEAD_SB * sb_bytes + sb_bytes * (size_t)(part + 1) / 4;
}

/* Besides the lines, a stream asks for one line PT_KERN_PAGE_AHEAD bytes ahead of every
 * 4 KiB page it enters, so the page's address translation is walked long before the lines'
 * requests two super-blocks ahead (~5 KB, ~150 ns at one core's rate) reach it.  On the
 * development VM (nested paging; a full-size model's 18 GB of copies, whose translation
 * tables do not stay cached) a page's first touch costs more than that: without it the
 * decode sets of a Qwen3-30B shape streamed 42-45 GB/s in the engine against 57-61 for the
 * same sets over 0.8 GB, and the page request brought the GLU sets to 52-55 GB/s and decode
 * from 23.0-24.3 to 25.9-27.2 tok/s (docs/PERFORMANCE.md round 41; 8 to 64 KiB measured
 * alike).  Each super-block (at most 3,360 bytes, less than a page) asks once, at its first
 * step, so every page of the stream is asked for some 9-12 KiB of the stream before it is read
 * (test_kern_x16_page_requests_lead_the_stream). */
#define PT_KERN_PAGE 4096u
#define PT_KERN_PAGE_AHEAD (16u << 10)

/* The line a step starting at `at` asks for a page ahead (an address, never read). */
static inline uintptr_t pt_kern_page_ahead_of(uintptr_t at)
{
	return at + PT_KERN_PAGE_AHEAD;
}

static inline void pt_kern_prefetch_page_ahead(uintptr_t at)
{
	__builtin_prefetch((const void *)pt_kern_page_ahead_of(at), 0, 3);
}

static inline void pt_kern_x16_prefetch_ahead(const uint8_t *sb, size_t sb_bytes, int part)
{
	size_t lo, hi;
	if (part == 0)
		pt_kern_prefetch_page_ahead((uintptr_t)sb);
	pt_kern_x16_ahead_part(sb_bytes, part, &lo, &hi);
	pt_kern_prefetch_range((uintptr_t)sb + lo, (uintptr_t)sb + hi);
}

/* The Q8_0 / Q5_0 kernels (32-column blocks of 544 / 352 bytes) request, per block, the
 * block PT_KERN_X16_AHEAD_BLK ahead: about the K-quants' distance in bytes. */
#define PT_KERN_X16_AHEAD_BLK 16

/* Whether the block of blk_bytes at blk asks for a page ahead: only a block that reaches
 * into the next page (one a page: seven to eleven blocks share one). */
static inline bool pt_kern_blk_asks_page(uintptr_t blk, size_t blk_bytes)
{
	return (blk + blk_bytes) / PT_KERN_PAGE != blk / PT_KERN_PAGE;
}

static inline void pt_kern_x16_prefetch_blk(const uint8_t *blk, size_t blk_bytes)
{
	const uintptr_t a = (uintptr_t)blk + PT_KERN_X16_AHEAD_BLK * blk_bytes;
	if (pt_kern_blk_asks_page((uintptr_t)blk, blk_bytes))
		pt_kern_prefetch_page_ahead((uintptr_t)blk);
	pt_kern_prefetch_range(a, a + blk_bytes);
}

/* Bytes a type's kernel keeps requested ahead of the one it reads (x16.c): the first bytes
 * of a stream its caller requests (pt_kern_x16_prefetch_start); 0 without the layout. */
size_t pt_kern_x16_ahead(enum pt_type type);

/* The first `ahead` bytes (pt_kern_x16_ahead) of a stream starting at band, and a line of
 * each page up to PT_KERN_PAGE_AHEAD (the pages its first steps' page requests skip). */
static inline void pt_kern_x16_prefetch_start(const uint8_t *band, size_t ahead)
{
	const uintptr_t a = (uintptr_t)band;
	for (uintptr_t p = a + PT_KERN_PAGE - a % PT_KERN_PAGE; p < a + PT_KERN_PAGE_AHEAD;
	     p += PT_KERN_PAGE)
		__builtin_prefetch((const void *)p, 0, 3);
	pt_kern_prefetch_range(a, a + ahead);
}

/* A matrix's layout against its ops (X16: the type has it and the shape allows it). */
enum pt_status pt_kern_check_layout(const struct pt_kern_mat *w, const struct pt_kern_ops *ops,
				    struct pt_error *err);
/* membw_avx2.c / membw_avx512.c: sum of the 64-bit words of bytes (a multiple of 64) bytes
 * with the level's widest loads: the bandwidth probe's read loop (membw.c). */
uint64_t pt_membw_sum_generic(const void *buf, size_t bytes); /* membw.c: any CPU */
uint64_t pt_membw_sum_avx2(const void *buf, size_t bytes);
uint64_t pt_membw_sum_avx512(const void *buf, size_t bytes);

/* tile_avx512.c's Q4_K / Q6_K / Q5_0 / Q8_0 dot and dot4 (one body with the tile, so bit-identical). */
float pt_kern_dot_q4_k_avx512(size_t n, const void *w, const void *a);
void pt_kern_dot4_q4_k_avx512(size_t n, const void *w, const void *a, size_t s, float o[4]);
float pt_kern_dot_q6_k_avx512(size_t n, const void *w, const void *a);
void pt_kern_dot4_q6_k_avx512(size_t n, const void *w, const void *a, size_t s, float o[4]);
float pt_kern_dot_q5_0_avx512(size_t n, const void *w, const void *a);
void pt_kern_dot4_q5_0_avx512(size_t n, const void *w, const void *a, size_t s, float o[4]);
float pt_kern_dot_q8_0_avx512(size_t n, const void *w, const void *a);
void pt_kern_dot4_q8_0_avx512(size_t n, const void *w, const void *a, size_t s, float o[4]);

#endif
