/* kern.h - compute kernels: activation quantizers, per-type dot products, matrix-vector and
 * matrix-matrix products, with runtime CPU dispatch (scalar / AVX2 / AVX-512).
 *
 * Numerics (GGUF-AND-QUANTS.md sections 6.2-6.3): a product with a weight of type T first
 * converts the F32 activation row to T's partner format (pt_type_traits(T)->vec_dot: F32, F16,
 * BF16, Q8_0, Q8_1 or Q8_K), then every output element is one dot product whose per-block
 * integer sums are exact; only the float combination of block terms differs between levels
 * (relative differences around 1e-6).  The activation quantizers are the same code at every
 * level, so quantized activation bytes never depend on the CPU level.
 *
 * Interleaved rows (PT_KERN_LAYOUT_X16, below): Q4_K, Q6_K, Q8_0 and Q5_0 matrices copied
 * into bands of 16 rows (model/repack.c, --repack) run their own kernels (x16*.c: scalar
 * reference, AVX-512 and AVX2 for all four), with their own numerics, identical at every
 * level; PT_KERN_LAYOUT_X16_ROWS computes rows as stored in those numerics (row twins:
 * scalar reference for all four, AVX-512 and AVX2 Q4_K and Q6_K; sixteen rows a call:
 * AVX-512 all four, AVX2 all but Q6_K).
 *
 * Determinism: every output element is computed by exactly one thread, by the level's dot
 * function or its dot4 / tile twins (bit-identical to it: one body instantiated per shape, so
 * each output sees the dot's operation sequence), whatever the thread count or batch size:
 * results are bit-identical across thread counts, and pt_kern_matmul row t equals
 * pt_kern_matvec of X[t] at the same level.  Results differ between levels in the last bits.
 *
 * Coverage.  Weight types with kernels: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4
 * Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS (scalar reference, AVX2 and AVX-512 for all of them).
 * aarch64 (dot_neon_impl.h): NEON and dotprod (SDOT) dot and dot4 for all of them, and
 * register tiles (2 rows x 4 tokens, the dot's own body) for Q4_0 Q5_0 Q8_0 Q4_K Q6_K; the
 * i8mm level runs the dotprod dots and dot4 plus SMMLA register tiles for Q8_0 Q4_0 Q5_0
 * Q4_K Q6_K at 2 rows x 4 tokens (tile_i8mm.c, bit-identical to the dotprod dot); attention,
 * SwiGLU, GeGLU and the Q8_K / Q8_0 / Q8_1 quantizers have NEON twins at every aarch64 level
 * (attn_neon.c, act_neon.c, bit-identical to scalar).
 * dot4 (four activation rows per weight decode): AVX2 F32 F16 BF16 Q8_0 Q4_0 Q5_0 IQ4_NL MXFP4
 * Q6_K; AVX-512 every type but IQ4_XS.  Register tiles (several weight rows x several tokens per
 * call, used by pt_kern_matmul for two or more tokens before dot4): AVX-512 Q4_K Q6_K at
 * 2 rows x 4 tokens, Q5_0 Q8_0 at 4 rows x 4 tokens (maddubs + vpdpwssd, or vpdpbusd on unsigned codes with the
 * offset taken from the activation sums: the same exact integers as the dot; tile_avx512.c;
 * all four also prepared: rows decoded once, then many token groups, pt_kern_tile.prep),
 * AVX2 Q4_K at 1 row x 3 tokens, Q6_K at 1 x 4, Q5_0 Q8_0 at 2 x 6 (dot_avx2.c).  The
 * AVX-512 level requires VNNI (dispatch.c): a CPU with AVX-512 F/BW but no VNNI runs the AVX2
 * level.  Types with no kernel at all (IQ2/IQ3/IQ1, TQ,
 * NVFP4, Q1_0/Q2_0): pt_kern_ops returns NULL, products fail with PT_E_UNSUPPORTED.
 *
 * Kernels never allocate: callers pass scratch sized by pt_kern_act_bytes.
 */
#ifndef PT_KERN_H
#define PT_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern/pool.h"
#include "particle.h"
#include "quant/types.h"

/* The levels are per architecture (the Makefile compiles only that architecture's kernel
 * files): x86-64 scalar / avx2 / avx512, aarch64 scalar / neon / dotprod / i8mm, anything
 * else scalar only.  Level 0 is always the scalar reference. */
#if defined(__x86_64__)
#define PT_KERN_X86 1
#elif defined(__aarch64__)
#define PT_KERN_ARM64 1
#endif

enum pt_kern_level {
	PT_KERN_LEVEL_SCALAR = 0,
#if defined(PT_KERN_X86)
	PT_KERN_LEVEL_AVX2 = 1,   /* AVX2 + FMA + F16C + BMI2 */
	PT_KERN_LEVEL_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI, on top of the AVX2 set */
	PT_KERN_LEVEL_COUNT = 3,
#elif defined(PT_KERN_ARM64)
	PT_KERN_LEVEL_NEON = 1,    /* Advanced SIMD (every aarch64 CPU) */
	PT_KERN_LEVEL_DOTPROD = 2, /* + SDOT (HWCAP_ASIMDDP, Armv8.2+) */
	PT_KERN_LEVEL_I8MM = 3,    /* + SMMLA (HWCAP2_I8MM): dotprod's dots, SMMLA tiles */
	PT_KERN_LEVEL_COUNT = 4,
#else
	PT_KERN_LEVEL_COUNT = 1,
#endif
};

/* Dot product of n elements (a multiple of the weight block size): w is one row of weight
 * blocks, a the activation row already in the partner format.  Returns the float result. */
typedef float (*pt_kern_dot_fn)(size_t n, const void *w, const void *a);

/* Four dot products of one weight row against activation rows a, a + a_stride, ... (bytes):
 * out[k] is bit-identical to dot(n, w, a + k * a_stride); the weight is decoded once. */
typedef void (*pt_kern_dot4_fn)(size_t n, const void *w, const void *a, size_t a_stride,
				float out[4]);

/* Register tile: n_rows <= rows weight rows (w, w + w_stride, ...) times n_tok <= toks
 * activation rows (a, a + a_stride, ...; strides in bytes) into y[t * y_stride + r] (floats).
 * Every output is bit-identical to dot(n, w + r * w_stride, a + t * a_stride): each weight
 * block is decoded once for all n_tok tokens, each activation load serves all n_rows rows. */
typedef void (*pt_kern_tile_fn)(size_t n, const void *w, size_t w_stride, uint32_t n_rows,
				const void *a, size_t a_stride, uint32_t n_tok, float *y,
				size_t y_stride);

/* Prepared tile (optional): prep decodes `rows` whole weight rows of n columns (w, w +
 * w_stride, ...) once into out, laid out as the tile consumes them (codes split, scales
 * unpacked: ceil(n / prep_cols) * prep_unit bytes, out 64-byte aligned); prepped then runs the
 * rows x n_tok (<= toks) tile over them.  Outputs are bit-identical to fn's: only the exact
 * integer decoding moved out of the token loop, which pays where many token groups pass over
 * the same rows (prefill). */
typedef void (*pt_kern_tile_prep_fn)(size_t n, const void *w, size_t w_stride, void *out);
typedef void (*pt_kern_tile_prepped_fn)(size_t n, const void *prepared, const void *a,
					size_t a_stride, uint32_t n_tok, float *y, size_t y_stride);

struct pt_kern_tile {
	pt_kern_tile_fn fn; /* NULL if the level has no tile kernel for the type */
	uint32_t rows;      /* most weight rows per call */
	uint32_t toks;      /* most activation rows per call */
	pt_kern_tile_prep_fn prep;       /* NULL: the tile reads the weights as stored */
	pt_kern_tile_prepped_fn prepped; /* with prep: the tile over prepared rows */
	uint32_t prep_cols;              /* columns per prepared unit */
	uint32_t prep_unit;              /* prepared bytes per unit of `rows` rows */
};

/* Interleaved-rows kernel (PT_KERN_LAYOUT_X16): the 16 rows of one band (pt_kern_x16_band
 * bytes: n / 256 super-blocks or n / 32 blocks, see below) times n_tok <= PT_KERN_X16_TOKS activation rows (a,
 * a + a_stride, ...; bytes) into y[t * y_stride + r], r < 16 (floats). */
typedef void (*pt_kern_x16_fn)(size_t n, const void *band, const void *a, size_t a_stride,
			       uint32_t n_tok, float *y, size_t y_stride);

/* Two adjacent bands (band0 and band0 + band_bytes: 32 rows) times n_tok <=
 * PT_KERN_X16_PAIR_TOKS activation rows into y[t * y_stride + r], r < 32: bit-identical to
 * x16 on each band (each activation word loaded serves both bands). */
typedef void (*pt_kern_x16_pair_fn)(size_t n, const void *band0, size_t band_bytes,
				    const void *a, size_t a_stride, uint32_t n_tok, float *y,
				    size_t y_stride);

/* Sixteen consecutive rows as stored (rows, rows + row_bytes, ...) times one activation row
 * in the interleaved layout's numerics (PT_KERN_LAYOUT_X16_ROWS): y[r], r < 16, bit-identical
 * to x16's output r for those rows packed as a band. */
typedef void (*pt_kern_x16_dot16_fn)(size_t n, const void *rows, size_t row_bytes, const void *a,
				     float *y);

struct pt_kern_ops {
	enum pt_type type;          /* weight type */
	enum pt_type act_type;      /* partner (activation) format */
	pt_kern_dot_fn dot;         /* never NULL for a supported type */
	pt_kern_dot4_fn dot4;       /* NULL if this level has no multi-activation kernel */
	enum pt_kern_level level;   /* level the dot actually runs at (scalar if no SIMD twin) */
	struct pt_kern_tile tile;   /* prefill tile, .fn NULL if none (matmul then uses dot4) */
	pt_kern_x16_fn x16;         /* interleaved rows, NULL if the type has no such layout */
	enum pt_kern_level x16_level; /* level x16 runs at (the scalar reference if no twin) */
	/* One row as stored with the interleaved layout's numerics (PT_KERN_LAYOUT_X16_ROWS):
	 * bit-identical to x16's output for that row of a packed band; NULL if none. */
	pt_kern_dot_fn x16_dot;
	enum pt_kern_level x16_dot_level;
	pt_kern_dot4_fn x16_dot4; /* x16_dot on four tokens (its level's; NULL: four calls) */
	/* x16_dot on sixteen rows at once: they share the reductions and the FMA chains a row
	 * alone pays every block or super-block (AVX-512: every type with the layout; AVX2:
	 * Q4_K, Q8_0, Q5_0); NULL if this level has none */
	pt_kern_x16_dot16_fn x16_dot16;
	/* x16 over two bands at once, at x16's level only (AVX-512: Q4_K); NULL if none */
	pt_kern_x16_pair_fn x16_pair;
};

/* ---- CPU level ------------------------------------------------------------------------- */

/* Detects the CPU (CPUID + XGETBV: the OS must save YMM / ZMM state) and selects the level:
 * PARTICLE_CPU=scalar|avx2|avx512 (aarch64: scalar|neon|dotprod|i8mm) forces one, otherwise the best available.  Fails with
 * PT_E_INVALID for an unknown PARTICLE_CPU value and PT_E_UNSUPPORTED for a level this CPU
 * lacks (the level is then left unchanged).  Safe to call more than once; call it once at
 * start-up from one thread.  Without a call, the first kernel use selects the best level and
 * ignores PARTICLE_CPU. */
enum pt_status pt_kern_init(struct pt_error *err);
/* Forces a level (tests, benchmarks).  PT_E_UNSUPPORTED if the CPU lacks it.  Not to be called
 * while kernels run on other threads. */
enum pt_status pt_kern_set_level(enum pt_kern_level level, struct pt_error *err);
enum pt_kern_level pt_kern_level(void);
/* Highest level the CPU and OS support. */
enum pt_kern_level pt_kern_level_max(void);
/* "scalar", "avx2", "avx512"; aarch64 "scalar", "neon", "dotprod", "i8mm". */
const char *pt_kern_level_name(enum pt_kern_level level);
/* Human-readable CPU description for --verbose, e.g. "avx512 (AMD EPYC 9B14; avx2 fma f16c
 * avx512f/bw/vl/dq vnni)"; a static string valid for the process lifetime. */
const char *pt_kern_cpu_name(void);

/* Ops of a weight type at the current level, or NULL if the type has no kernel. */
const struct pt_kern_ops *pt_kern_ops(enum pt_type type);
/* Ops at an explicit level (tests compare levels); NULL if unsupported type or level. */
const struct pt_kern_ops *pt_kern_ops_at(enum pt_kern_level level, enum pt_type type);

/* ---- activation quantization ----------------------------------------------------------- */

/* Converts n floats to act_type (F32 copy, F16, BF16, Q8_0, Q8_1, Q8_K); n must be a multiple
 * of the format's block size (checked by callers; asserted here).  Q8_0 / Q8_1 follow ggml's
 * x86 SIMD quantizer: id = 127/amax and round-half-to-even (the scalar ggml reference uses
 * 1/d and half-away-from-zero; the two differ only on exact .5 ties).  Q8_K is ggml's
 * quantize_row_q8_K (bsums of an all-zero block are 0). */
void pt_kern_quantize_row(enum pt_type act_type, const float *x, void *out, size_t n);

/* ---- matrix products ------------------------------------------------------------------- */

/* How a matrix's rows are stored: as in the file (row after row), or interleaved 16 at a
 * time (pt_kern_x16_pack: a copy made at load for faster decode, see "interleaved rows").
 * X16_ROWS: stored as in the file but computed with the interleaved layout's numerics, so
 * its products are bit-identical to those of its X16 copy: single tokens run the row kernel
 * (pt_kern_ops.x16_dot, or x16_dot16 sixteen rows a call where the level has it), several
 * tokens pack each block of bands into a thread's scratch and
 * run the X16 kernel over it (the streamed experts of --repack: prefill at the interleaved
 * kernels' speed without a copy, decode as fast as the row-major dot). */
enum pt_kern_layout {
	PT_KERN_LAYOUT_ROWS = 0,
	PT_KERN_LAYOUT_X16 = 1,
	PT_KERN_LAYOUT_X16_ROWS = 2,
};

struct pt_kern_mat {
	enum pt_type type;
	uint64_t rows;       /* output features */
	uint64_t cols;       /* input features (ne0), a multiple of the type's block size */
	size_t row_bytes;    /* stride between rows, >= the packed row size (as stored in the
				file: for X16 it only sizes the activation) */
	const void *data;    /* [rows][row_bytes], or X16 bands */
	enum pt_kern_layout layout; /* 0: rows */
};

/* Scratch bytes for n_rows quantized activation rows of a product with w (0 on overflow or
 * an unsupported type). */
size_t pt_kern_act_bytes(const struct pt_kern_mat *w, uint64_t n_rows);

/* y[rows] = W x.  x has w->cols floats; scratch holds pt_kern_act_bytes(w, 1) bytes (not
 * touched for F32 weights, which read x directly).  pool may be NULL (caller thread only).  PT_E_UNSUPPORTED for a type without kernels, PT_E_INVALID for
 * inconsistent shapes; y is untouched on failure. */
enum pt_status pt_kern_matvec(const struct pt_kern_mat *w, const float *x, float *y,
			      void *scratch, pt_pool *pool, struct pt_error *err);
/* Same with the activation already converted (pt_kern_quantize_row to the partner format):
 * the MoE path quantizes x once and reuses it for every expert of a layer. */
enum pt_status pt_kern_matvec_q(const struct pt_kern_mat *w, const void *xq, float *y,
				pt_pool *pool, struct pt_error *err);
/* Y[n_tok][rows] = X[n_tok][cols] W^T.  scratch holds pt_kern_act_bytes(w, n_tok) bytes.
 * Activation rows are converted in parallel from 8 tokens on; then each task takes a band of
 * weight rows (whole tiles).  With a register tile (two or more tokens): blocks of weight
 * rows of about 32 KiB are reused across all tokens, tile.toks tokens at a time, each group's
 * activation panel passing over the block's row tiles (from 8 tokens, where the tile has a
 * prepared form: blocks of ~24 KiB prepared once per thread, then every group runs over
 * them); otherwise blocks of 16 rows, four
 * tokens per weight decode where the level has dot4.  Errors as pt_kern_matvec. */
enum pt_status pt_kern_matmul(const struct pt_kern_mat *w, const float *x, uint64_t n_tok,
			      float *y, void *scratch, pt_pool *pool, struct pt_error *err);
/* Same with pre-quantized activations, rows of act_row_bytes (pt_kern_act_bytes(w, 1)). */
enum pt_status pt_kern_matmul_q(const struct pt_kern_mat *w, const void *xq, uint64_t n_tok,
				float *y, pt_pool *pool, struct pt_error *err);

/* ---- interleaved rows (X16) ------------------------------------------------------------
 * Q4_K and Q6_K (a Q4_K_M file's matrices), Q8_0 and Q5_0 (a Q8_0 file's; a Q4_K_M file's
 * matrices whose rows are not whole super-blocks, e.g. Gemma 4's 704-wide expert downs).
 * Rows are grouped in bands of 16 (rows must be a
 * multiple of 16); a Q4_K band stores, per super-block of 256 columns, PT_KERN_X16_Q4K_SB
 * bytes:
 *   [0, 2048)     codes: 64-byte vector v = 8 g + s (chunk pair g < 4, step s < 8) holds at
 *                 bytes 4 r .. 4 r + 3 the qs bytes 32 g + 4 s .. + 3 of row r (low nibbles:
 *                 elements 64 g + 4 s .., high: 64 g + 32 + 4 s ..);
 *   [2048, 2176)  sub-block scales, u8: scale of sub-block j of row r at 16 j + r;
 *   [2176, 2304)  sub-block mins, u8: min of sub-block j of row r at 32 (j / 2) + 2 r + j % 2;
 *   [2304, 2336)  d of row r (F16) at 2 r;  [2336, 2368) dmin of row r (F16) at 2 r.
 * A Q6_K band, PT_KERN_X16_Q6K_SB bytes a super-block (as stored: 16 x 210):
 *   [0, 3072)     codes, four groups of 768 bytes (half h of the super-block, steps st = 4 k
 *                 .. 4 k + 3; group 2 h + k): the 64-byte vectors of the ql bytes 64 h + 4 st
 *                 .. + 3 of each row (4 r .. 4 r + 3 holds row r's), then of ql bytes 64 h +
 *                 32 + 4 st .., then of qh bytes 32 h + 4 st .., each for st = 4 k .. 4 k + 3
 *                 (the order the kernels read them: one sequential stream);
 *   [3072, 3328)  scales, i8: sub-block j (16 elements) of row r at 16 j + r;
 *   [3328, 3360)  d of row r (F16) at 2 r.
 * A Q8_0 band, PT_KERN_X16_Q8_0_BLK bytes a block of 32 columns (as stored: 16 x 34):
 *   [0, 512)      codes: vector s < 8 holds at bytes 4 r .. 4 r + 3 the codes 4 s .. 4 s + 3
 *                 of row r plus 128 (the sign bit flipped: stored unsigned);
 *   [512, 544)    d of row r (F16) at 2 r.
 * A Q5_0 band, PT_KERN_X16_Q5_0_BLK bytes a block (as stored: 16 x 22):
 *   [0, 256)      vector s < 4 holds at bytes 4 r .. the qs bytes 4 s .. 4 s + 3 of row r (low
 *                 nibbles: elements 4 s + k, high: 16 + 4 s + k);
 *   [256, 320)    row r's fifth bits as a 32-bit word at 4 r: bit 2 s of byte k is element 4 s
 *                 + k's, bit 2 s + 1 element 16 + 4 s + k's (step s finds its bits in place);
 *   [320, 352)    d of row r (F16) at 2 r.
 * One 64-byte load then carries 4 code bytes of each of 16 rows, one lane per row: the
 * activation's 4 bytes are broadcast to every lane, and a band streams as one sequence.
 *
 * Numerics (every level and shape bit-identical: the scalar reference defines them): per
 * super-block exact integers, for Q4_K isum = sum_j sc_j sum_k q_k a_k and msum = sum_j m_j
 * (bsums[2j] + bsums[2j+1]), then super-block by super-block A = fma(d * d8, (float)isum, A)
 * and M = fma(dmin * d8, (float)msum, M) (products rounded to F32), y = A - M; for Q6_K
 * isum = sum_j sc_j sum_k (q_k - 32) a_k, A as for Q4_K, y = A; for Q8_0 and Q5_0 (Q8_0
 * activations, d8 their F16 scale) per block isum = sum_k w_k a_k, A = fma(d * d8, (float)isum,
 * A) block by block, y = A.  This
 * differs from the per-row dot's float order in the last bits (the dot keeps 16 partial
 * lanes), so a matrix is either X16 (or X16_ROWS) for every product (prefill and decode) or
 * not at all. */
#define PT_KERN_X16_ROWS 16
#define PT_KERN_X16_TOKS 8
#define PT_KERN_X16_PAIR_TOKS 4
#define PT_KERN_X16_Q4K_SB 2368
#define PT_KERN_X16_Q6K_SB 3360
#define PT_KERN_X16_Q8_0_BLK 544
#define PT_KERN_X16_Q5_0_BLK 352

/* Whether type has the X16 layout, and the matrix's shape allows it (rows a multiple of 16,
 * cols of the type's unit: 256 for Q4_K / Q6_K, 32 for Q8_0 / Q5_0). */
bool pt_kern_x16_ok(enum pt_type type, uint64_t rows, uint64_t cols);
/* Columns of one packed unit of type (256 or 32; 0 if the type has no X16 layout). */
uint32_t pt_kern_x16_unit_cols(enum pt_type type);
/* Bytes of one band of 16 rows of cols columns (0 if the type has no X16 layout). */
size_t pt_kern_x16_band(enum pt_type type, uint64_t cols);
/* Bands [b0, b1) of a rows-layout matrix (row r at src + r * row_bytes) into dst (band b at
 * dst + b * pt_kern_x16_band; dst is the whole matrix's copy).  Exact: bytes are moved, not
 * requantized.  The caller checked pt_kern_x16_ok. */
void pt_kern_x16_pack(enum pt_type type, const void *src, size_t row_bytes, uint64_t cols,
		      uint64_t b0, uint64_t b1, void *dst);
/* Row r (0-15) of a band of cols columns back into row as stored (row_bytes of the type):
 * the exact inverse of pt_kern_x16_pack.  The caller checked pt_kern_x16_ok. */
void pt_kern_x16_unpack_row(enum pt_type type, const void *band, uint64_t cols, uint32_t r,
			    void *row);
/* Whether the current level runs X16 products with a SIMD kernel of its own (where it does
 * not, the layout still computes, with the scalar reference: correct but slow). */
bool pt_kern_x16_native(enum pt_type type);
/* Whether the current level runs PT_KERN_LAYOUT_X16_ROWS products of type natively: an X16
 * kernel and a row kernel of its own, one row or sixteen a call (the matrix's shape as for
 * pt_kern_x16_ok). */
bool pt_kern_x16_rows_native(enum pt_type type);

/* ---- sets of single-token products (decode) -------------------------------------------- */

/* A set runs in one pool dispatch: the output rows of all its products are concatenated and
 * cut into tasks of contiguous rows, so k small products cost one wake-up of the workers
 * instead of k.  Every output element is the same dot call as pt_kern_matvec_q makes, so
 * results are bit-identical to running the products one by one, at any thread count. */
#define PT_KERN_SET_MAX 32

struct pt_kern_mv {
	struct pt_kern_mat w;
	const void *xq; /* the activation in w's partner format (pt_kern_quantize_row) */
	float *y;       /* [w.rows] */
};
/* y = W xq for every product of the set.  Errors as pt_kern_matvec_q (checked before any
 * work), PT_E_INVALID above PT_KERN_SET_MAX products. */
enum pt_status pt_kern_matvec_set(const struct pt_kern_mv *set, uint32_t n, pt_pool *pool,
				  struct pt_error *err);

/* Element-wise gated activation out[i] = f(gate[i]) * up[i] (pt_op_swiglu, pt_op_geglu).  It
 * is called on sub-ranges, so it must be a pure function of each element. */
typedef void (*pt_kern_glu_fn)(float *out, const float *gate, const float *up, int n);

struct pt_kern_glu {
	struct pt_kern_mat gate; /* [nf][cols]; with up.data NULL, a fused gate_up of 2 nf rows:
				  * the gate rows, then the up rows */
	struct pt_kern_mat up;   /* [nf][cols] */
	const void *xq;          /* the activation in gate's partner format */
	const void *xq_up;       /* the same activation in up's partner format (unused if fused) */
	float *y;                /* [nf] = act(gate xq, up xq_up) */
	/* optional biases [nf] added to the gate / up dots before act (gpt-oss experts) */
	const float *bias_gate, *bias_up;
};
/* Gated feed-forward inputs for every entry of the set: each task computes the gate and up
 * dots of its rows and applies act, bit-identical to two pt_kern_matvec_q calls and act over
 * the whole row.  Errors as pt_kern_matvec_set, PT_E_INVALID if gate and up disagree. */
enum pt_status pt_kern_glu_set(const struct pt_kern_glu *set, uint32_t n, pt_kern_glu_fn act,
			       pt_pool *pool, struct pt_error *err);

/* ---- attention inner loops ------------------------------------------------------------- */

/* Each output is computed as the scalar code computes it (one correctly rounded FMA per step,
 * in index order; F16 results rounded to nearest even; exponentials by pt_kern_expf), so
 * every level gives bit-identical results and the level never changes attention.
 * Keys come in transposed F16 blocks of PT_KERN_ATTN_BLOCK positions (the KV cache's K
 * layout, src/gen/kv.h): element d of the block's key j at [d * PT_KERN_ATTN_BLOCK + j], so
 * a vector lane per key runs that key's FMA chain with no transposes.  Head dimensions above
 * PT_KERN_ATTN_MAX_DIM take the scalar ops. */
#define PT_KERN_ATTN_MAX_DIM 1024
#define PT_KERN_ATTN_BLOCK 16
struct pt_kern_attn_ops {
	/* out[i * ld + b * BLOCK + j] = FMA chain over d < n, in order, of f32(key j of block b)
	 * * q[i * q_stride + d], for blocks b < n_blk at kb + b * kb_stride, queries i < n_q.
	 * kb_next (NULL: none): the next call's first block, same stride; the x86 levels
	 * request its n_blk blocks' lines spread over this call's work (a hint: never read,
	 * never changes a result), so a stream of calls finds its keys in cache.  The blocks
	 * of one KV head lie a page or more apart, where the hardware prefetchers stop. */
	void (*dots)(const uint16_t *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		     size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld,
		     const uint16_t *kb_next);
	/* Online-softmax weights of keys j < n for queries i < n_q (rows of ld): sc = dot * scale;
	 * sc > m: ms = expf(m - sc), vs = 1, m = sc; else ms = 1, vs = expf(sc - m); then
	 * s = s * ms + vs (a rounded product, then a rounded sum).  m, s: [n_q], updated. */
	void (*softmax)(const float *dots, size_t ld, uint32_t n_q, uint32_t n, float scale,
			float *m, float *s, float *ms, float *vs);
	/* V accumulation of keys j < n_k (v + j * v_stride, F16) into acc row i (acc + i * acc_ld,
	 * n values) for queries i < n_q, keys in order: where ms[i * ld + j] != 1, acc = acc * ms
	 * rounded; then acc = fma(f32(v), vs[i * ld + j], acc) rounded.  vacc_f16 rounds to F16
	 * after each step (an F16 accumulator kept in F32 storage), vacc_f32 does not.
	 * v_next (NULL: none): the next call's first row, same stride, whose n_k rows of n
	 * values are requested as kb_next's blocks are. */
	void (*vacc_f16)(float *acc, size_t acc_ld, uint32_t n_q, const uint16_t *v,
			 size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
			 uint32_t n, const uint16_t *v_next);
	void (*vacc_f32)(float *acc, size_t acc_ld, uint32_t n_q, const uint16_t *v,
			 size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
			 uint32_t n, const uint16_t *v_next);
	/* The Q8_0 KV cache (src/gen/kv.h) widens each call's keys and values to F32 (d * code
	 * is exact in F32) and runs these on them.  dots_w: as dots, over F32 blocks of n * BLOCK
	 * floats (element d of key j at [d * BLOCK + j]) kw_stride floats apart.  vacc_w: as
	 * vacc_f32 over F32 rows (n_k <= 64). */
	void (*dots_w)(const float *kw, size_t kw_stride, uint32_t n_blk, const float *q,
		       size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld);
	void (*vacc_w)(float *acc, size_t acc_ld, uint32_t n_q, const float *v, size_t v_stride,
		       uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n);
	/* Q8_0 widening.  A K block of BLOCK keys x n dims (n a multiple of 32): codes[d * BLOCK
	 * + j] (int8) then scales[(d / 32) * BLOCK + j] (F16, one per key and 32 dims) ->
	 * y[d * BLOCK + j] = code * scale.  V (n a multiple of 32 too): n_rows rows row_bytes
	 * apart, each n codes then its n / 32 scales -> y[r * n + d] = code[d] * scale[d / 32].
	 * next (NULL: none): the next call's matching block or first row (same layout), whose
	 * lines are requested (a hint, never read). */
	void (*widen_q8_k)(const int8_t *codes, const uint16_t *scales, uint32_t n, float *y,
			   const int8_t *next);
	void (*widen_q8_v)(const int8_t *rows, size_t row_bytes, uint32_t n_rows, uint32_t n,
			   float *y, const int8_t *next);
	/* The same as widen_q8_k + dots_w and widen_q8_v + vacc_w for calls of few queries (a
	 * decode's GQA group), reading the Q8_0 codes and scales in place: the widening's stores
	 * cost more than 8 queries save.  K blocks kb_stride bytes apart, V rows v_stride bytes
	 * apart (layouts as above); n a multiple of 32; n_q <= 8; n_k <= 64.  NULL at a level
	 * without them (the caller widens). */
	void (*dots_q8)(const int8_t *kb, size_t kb_stride, uint32_t n_blk, const float *q,
			size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld,
			const int8_t *kb_next);
	void (*vacc_q8)(float *acc, size_t acc_ld, uint32_t n_q, const int8_t *v,
			size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
			uint32_t n, const int8_t *v_next);
	void (*scale_f32)(float *acc, float ms, uint32_t n);                 /* acc *= ms */
	void (*axpy_f32)(float *acc, const float *v, float vs, uint32_t n);  /* fma */
	void (*f16_to_f32)(const uint16_t *x, float *y, uint32_t n);
	void (*f32_to_f16)(const float *x, uint16_t *y, uint32_t n); /* NaN: canonical quiet */
};
/* Ops at the current level (dim: the head dimension the caller will pass). */
const struct pt_kern_attn_ops *pt_kern_attn_ops(uint32_t dim);
/* Ops at an explicit level (tests); NULL where the CPU lacks the level. */
const struct pt_kern_attn_ops *pt_kern_attn_ops_at(enum pt_kern_level level);

/* e^x in F32, the exponential of attention (the scalar definition the SIMD twins reproduce
 * bit for bit): x = k ln2 + r with k = rint(x log2 e), Cody-Waite r, a degree-7 Taylor
 * polynomial by FMA Horner, then 2^k applied in two exact-or-once-rounded halves (so
 * subnormal results round once).  Within 1 ulp of a correctly rounded expf; NaN in, NaN out. */
float pt_kern_expf(float x);

/* tanh in F32, the logit softcap's (the scalar definition the SIMD twins reproduce bit for
 * bit): below 0.625 in magnitude its odd Taylor series to x^21 by FMA Horner, above it
 * 1 - 2 / (pt_kern_expf(2|x|) + 1), the sign put back.  Within 2 ulp of tanh (tested); NaN
 * in, NaN out.  libm's tanhf cost Gemma 4 1.4 ms of a decoded token's ~52 (262,144 logits). */
float pt_kern_tanhf(float x);
/* The tanh-approximate GELU's constants (model/ops.c pt_op_gelu_exact, ggml's). */
#define PT_GELU_SQRT_2_OVER_PI 0.79788456080286535587989211986876f
#define PT_GELU_COEF_A 0.044715f

#if defined(PT_KERN_X86)
/* out[i] = x / (1 + pt_kern_expf(-x)) * up[i], x = gate[i]: model/ops.c's pt_op_swiglu_ref
 * bit for bit, 8 lanes (ops_avx2.c).  Only at level avx2 or above. */
void pt_kern_swiglu_avx2(float *out, const float *gate, const float *up, int n);
/* x[i] = pt_kern_tanhf(x[i] * (1 / cap)) * cap: model/ops.c's pt_op_softcap_ref bit for bit,
 * 8 lanes (ops_avx2.c).  Only at level avx2 or above. */
void pt_kern_softcap_avx2(float *x, int n, float cap);
/* model/ops.c's pt_op_rmsnorm_ref bit for bit (its eight double partial sums in two vectors;
 * ops_avx2.c).  Only at level avx2 or above. */
void pt_kern_rmsnorm_avx2(float *y, const float *x, const float *w, int n, float eps);
/* out[i] = g * up[i], g = 0 for gate[i] <= -10, gate[i] for gate[i] >= 10, else the F16
 * table's entry at gate[i]'s F16 rounding computed from its formula: model/ops.c's
 * pt_op_geglu_ref bit for bit, 8 lanes (ops_avx2.c).  Only at level avx2 or above. */
void pt_kern_geglu_avx2(float *out, const float *gate, const float *up, int n);
#elif defined(PT_KERN_ARM64)
/* The same four on aarch64 Advanced SIMD lanes (attn_neon.c), at level neon or above. */
void pt_kern_swiglu_neon(float *out, const float *gate, const float *up, int n);
void pt_kern_softcap_neon(float *x, int n, float cap);
void pt_kern_rmsnorm_neon(float *y, const float *x, const float *w, int n, float eps);
void pt_kern_geglu_neon(float *out, const float *gate, const float *up, int n);
#endif

/* ---- linear-attention (Gated DeltaNet) inner loops (model/deltanet.c) ------------------
 * F32 vectors.  The scalar level sums in index order; the SIMD levels keep vector partial
 * sums (as ggml_vec_dot_f32 does), so dots differ between levels in the last bits (the
 * model's tests compare levels with a tolerance). */
struct pt_kern_dn_ops {
	float (*dot)(const float *a, const float *b, uint32_t n);
	void (*axpy)(float *y, const float *x, float a, uint32_t n); /* y += a * x */
	/* one row of the delta rule: r *= eg; d = (v - r . k) * beta; r += d * k; returns
	 * r . q (the updated row) */
	float (*row_step)(float *r, const float *k, const float *q, float eg, float v,
			  float beta, uint32_t n);
	/* the chunked form's small matrix products (row-major, leading dimensions in floats):
	 * C[m x n] = (flags & PT_DN_GEMM_ACC ? cs C : 0) + A[m x k] B[k x n].  PT_DN_GEMM_TRI_A:
	 * A is lower triangular (row i may read only columns <= i; the rest must be 0 in
	 * memory), so row blocks stop the sum early; PT_DN_GEMM_TRI_C: only C's lower
	 * triangle (column <= row) is wanted; entries above it are left undefined.  Sums run
	 * over k in order per output (scalar), per lane (SIMD). */
	void (*gemm)(uint32_t m, uint32_t n, uint32_t k, const float *a, size_t lda,
		     const float *b, size_t ldb, float *c, size_t ldc, float cs, unsigned flags);
};
#define PT_DN_GEMM_ACC 1u
#define PT_DN_GEMM_TRI_A 2u
#define PT_DN_GEMM_TRI_C 4u
const struct pt_kern_dn_ops *pt_kern_dn_ops(void);
/* Ops at an explicit level (tests); NULL where the CPU lacks the level. */
const struct pt_kern_dn_ops *pt_kern_dn_ops_at(enum pt_kern_level level);

#endif
