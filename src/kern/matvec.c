/* matvec.c - matrix-vector and matrix-matrix products over the dispatched dot kernels.
 *
 * Work is split by output rows into tasks of whole rows; every output element is one call of
 * the level's dot function, so the result does not depend on the thread count, on which
 * thread ran a task, or (for pt_kern_matmul) on the batch size.
 */
#include "kern/kern_internal.h"

#include "util/alloc.h"
#include "util/status.h"

#define MIN_ROWS_PER_TASK 16
#define TASKS_PER_THREAD 4
#define MATVEC_TASK_BYTES (256u << 10)
#define MATMUL_TILE_ROWS 16 /* weight rows kept hot in L1/L2 while all tokens pass over them */

struct job {
	const struct pt_kern_mat *w;
	const struct pt_kern_ops *ops;
	const uint8_t *xq;
	size_t act_row_bytes;
	uint64_t n_tok;
	float *y;
	uint64_t rows_per_task;
};

static enum pt_status check_mat(const struct pt_kern_mat *w, const struct pt_kern_ops **ops_out,
				size_t *act_row_bytes, struct pt_error *err)
{
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	if (!ops)
		return pt_error_set(err, PT_E_UNSUPPORTED, "no compute kernel for tensor type %s",
				    pt_type_name(w->type));
	uint64_t wrow, arow;
	if (w->cols == 0 || pt_type_row_bytes(w->type, w->cols, &wrow) != 0 ||
	    pt_type_row_bytes(ops->act_type, w->cols, &arow) != 0)
		return pt_error_set(err, PT_E_INVALID, "%s matrix: %llu columns is not a multiple "
				    "of the block size", pt_type_name(w->type),
				    (unsigned long long)w->cols);
	if (w->row_bytes < wrow)
		return pt_error_set(err, PT_E_INVALID, "%s matrix: row stride %zu < row size %llu",
				    pt_type_name(w->type), w->row_bytes, (unsigned long long)wrow);
	enum pt_status st = pt_kern_check_layout(w, ops, err);
	if (st != PT_OK)
		return st;
	*ops_out = ops;
	*act_row_bytes = (size_t)arow;
	return PT_OK;
}

size_t pt_kern_act_bytes(const struct pt_kern_mat *w, uint64_t n_rows)
{
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	uint64_t arow, total;
	if (!ops || pt_type_row_bytes(ops->act_type, w->cols, &arow) != 0 ||
	    pt_mul_overflow(arow, n_rows, &total) || total > SIZE_MAX)
		return 0;
	return (size_t)total;
}

/* Software prefetch of the weight row this many rows ahead: on the development host it
 * raised single-thread DRAM streaming of expert slabs by roughly 15-30 % (noisy, shared
 * host; docs/PERFORMANCE.md); it is only a hint, so results are unaffected.  The distance is
 * about PREFETCH_BYTES, at most PREFETCH_ROWS rows: a whole row ~13 KB ahead (4 Q6_K rows of
 * 4096) streamed the output head ~8 % slower than ~7 KB ahead (docs/PERFORMANCE.md, "Q6_K
 * dot").  Into every cache level (pt_kern_prefetch_row; round 34: F32 rows 10.3 -> 18.5 GB/s
 * on Ice Lake, Q6_K / Q4_K / Q8_0 / F16 rows 1.3-1.7x, against prefetchnta). */
#define PREFETCH_ROWS 4
#define PREFETCH_BYTES (7u << 10)

static uint64_t prefetch_rows(size_t row_bytes)
{
	const uint64_t d = PREFETCH_BYTES / row_bytes;
	return d < 1 ? 1 : d > PREFETCH_ROWS ? PREFETCH_ROWS : d;
}

static inline void prefetch_l2(const uint8_t *p, size_t bytes)
{
	for (size_t off = 0; off < bytes; off += 64)
		__builtin_prefetch(p + off, 0, 2);
}

/* Weight rows of one block of the tiled matmul: the block stays in L1/L2 while every token
 * group passes over it, and each token group's activation panel stays in L1 while the block's
 * row tiles pass over it. */
#define MATMUL_BLOCK_BYTES (32u << 10)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Prepared tiles (pt_kern_tile.prep): each thread decodes a block's whole row tiles once
 * into this buffer, then every token group runs over the prepared rows.  Worth it from two
 * token groups on (the decoding costs about one group's share of the tile's work).  Blocks
 * of ~24 KiB prepared (with a 4-token activation panel they stay in a 48 KiB L1; 48 and 96
 * KiB were slower, docs/PERFORMANCE.md), at least one row tile of up to 128 KiB.  Where the
 * tokens' activation rows outgrow PREP_WIDE_ACT_BYTES (a dense product over a prefill chunk
 * of hundreds of rows) every block streams them all from L3 or DRAM again, so blocks grow
 * to PREP_WIDE_BLOCK_BYTES: 5x the rows per pass over the activations, the prepared rows
 * then read from L2 (bench_kern dense, two processes: Q4_K 2816 x 4096 at 2048 tokens
 * 76 -> 98 GMAC/s, at 128 tokens unchanged). */
#define PREP_BLOCK_BYTES (24u << 10)
#define PREP_WIDE_BLOCK_BYTES (120u << 10)
#define PREP_WIDE_ACT_BYTES (512u << 10)
#define PREP_SCRATCH_BYTES (128u << 10)
#define PREP_MIN_TOKS 8
static _Thread_local uint8_t prep_scratch[PREP_SCRATCH_BYTES] __attribute__((aligned(64)));

/* Prepared bytes per row tile of w, or 0 where the tile reads the weights as stored. */
static size_t prep_tile_bytes(const struct job *jb)
{
	const struct pt_kern_tile *tl = &jb->ops->tile;
	if (!tl->prep || jb->n_tok < PREP_MIN_TOKS)
		return 0;
	const uint64_t b = (jb->w->cols + tl->prep_cols - 1) / tl->prep_cols * tl->prep_unit;
	return b <= PREP_SCRATCH_BYTES ? (size_t)b : 0;
}

/* Rows [r0, r1) of a multi-token product through the level's register tile. */
static void run_tiles(const struct job *jb, uint64_t r0, uint64_t r1)
{
	const struct pt_kern_mat *w = jb->w;
	const struct pt_kern_tile *tl = &jb->ops->tile;
	const uint8_t *data = w->data;
	const size_t ab = jb->act_row_bytes, rb = w->row_bytes;
	const size_t prep = prep_tile_bytes(jb);
	uint64_t block = MATMUL_BLOCK_BYTES / rb / tl->rows * tl->rows;
	if (prep) {
		const uint64_t bb = jb->n_tok * ab > PREP_WIDE_ACT_BYTES ? PREP_WIDE_BLOCK_BYTES
									: PREP_BLOCK_BYTES;
		block = (bb > prep ? bb / prep : 1) * tl->rows;
	}
	if (block < tl->rows)
		block = tl->rows;
	const uint64_t groups = (jb->n_tok + tl->toks - 1) / tl->toks;
	for (uint64_t b0 = r0; b0 < r1; b0 += block) {
		const uint64_t b1 = min_u64(b0 + block, r1);
		/* whole row tiles of the block prepared (a partial last tile reads as stored) */
		const uint64_t n_prep = prep ? (b1 - b0) / tl->rows : 0;
		for (uint64_t k = 0; k < n_prep; k++)
			tl->prep(w->cols, data + (b0 + k * tl->rows) * rb, rb, prep_scratch + k * prep);
		/* the next block's rows (past r1: the next task's, which this thread usually runs
		 * next), fetched a slice per token group while this block runs */
		const uint8_t *next = data + b1 * rb;
		const size_t next_bytes = (size_t)(min_u64(b1 + block, w->rows) - b1) * rb;
		const size_t slice = ((next_bytes + groups - 1) / groups + 63) & ~(size_t)63;
		size_t pf = 0;
		for (uint64_t tok = 0; tok < jb->n_tok; tok += tl->toks) {
			const uint32_t nt = (uint32_t)min_u64(tl->toks, jb->n_tok - tok);
			if (pf < next_bytes) {
				prefetch_l2(next + pf, min_u64(slice, next_bytes - pf));
				pf += slice;
			}
			for (uint64_t k = 0; k < n_prep; k++)
				tl->prepped(w->cols, prep_scratch + k * prep, jb->xq + tok * ab, ab, nt,
					    jb->y + tok * w->rows + b0 + k * tl->rows, w->rows);
			for (uint64_t r = b0 + n_prep * tl->rows; r < b1; r += tl->rows)
				tl->fn(w->cols, data + r * rb, rb, (uint32_t)min_u64(tl->rows, b1 - r),
				       jb->xq + tok * ab, ab, nt, jb->y + tok * w->rows + r, w->rows);
		}
	}
}

/* Interleaved rows (X16): bands [r0 / 16, r1 / 16) in blocks of about X16_BLOCK_BYTES, each
 * group of up to PT_KERN_X16_TOKS tokens passing over the block's bands while they are hot;
 * decode is one token over every band, one sequential stream.  Where the tokens' activation
 * rows outgrow X16_PANEL_BYTES (a dense product over a prefill chunk of hundreds of rows:
 * 19 MB for 4,096 rows of 4,096 columns), every block would stream them all from L3 or DRAM
 * again, so blocks grow to about X16_WIDE_BLOCK_BYTES (L2) and the tokens pass over each in
 * panels of about X16_PANEL_BYTES: the activations are read once a block instead of once a
 * band.  Only the order of the kernel calls changes (every output is still one call). */
#define X16_BLOCK_BYTES (48u << 10)
#define X16_WIDE_BLOCK_BYTES (384u << 10)
#define X16_PANEL_BYTES (256u << 10)

/* From this many tokens a level's two-band kernel (x16_pair) takes the bands two at a time.
 * Q4_K, AVX-512, Ice Lake-SP, 32 cold experts of 768 x 2048 / 1024 x 4096, one thread, GMAC/s
 * single-band -> paired (docs/PERFORMANCE.md round 36): 256 tokens 81-121 -> 135-147, 24-32
 * 70-120 -> 73-137; at 16 no steady gain (1024 x 4096: 80-116 -> 83-106), at 6 a loss (67 ->
 * 59-63: two passes over the bands where one did, the first from DRAM). */
#define X16_PAIR_FROM 24

/* Whether a product's bands run two at a time (x16_block_pairs). */
static bool x16_pairs(const struct job *jb)
{
	return jb->ops->x16_pair && jb->n_tok >= X16_PAIR_FROM &&
	       jb->w->layout != PT_KERN_LAYOUT_ROWS;
}

/* Tokens [t0, t1) over bands [b0, b1), two bands a call: groups of at most
 * PT_KERN_X16_PAIR_TOKS tokens, as even as they divide (9 tokens: 3 + 3 + 3, not 4 + 4 + 1,
 * whose last call would run at a single token's rate); an odd last band by x16. */
static void x16_block_pairs(const struct job *jb, const uint8_t *data, size_t band,
			    uint64_t b0, uint64_t b1, uint64_t t0, uint64_t t1)
{
	const struct pt_kern_mat *w = jb->w;
	const size_t ab = jb->act_row_bytes;
	for (uint64_t tok = t0; tok < t1;) {
		const uint64_t left = t1 - tok;
		const uint64_t groups = (left + PT_KERN_X16_PAIR_TOKS - 1) / PT_KERN_X16_PAIR_TOKS;
		const uint32_t nt = (uint32_t)((left + groups - 1) / groups);
		const uint8_t *xq = jb->xq + tok * ab;
		float *y = jb->y + tok * w->rows;
		uint64_t b = b0;
		for (; b + 1 < b1; b += 2)
			jb->ops->x16_pair(w->cols, data + (b - b0) * band, band, xq, ab, nt,
					  y + b * PT_KERN_X16_ROWS, w->rows);
		if (b < b1)
			jb->ops->x16(w->cols, data + (b - b0) * band, xq, ab, nt,
				     y + b * PT_KERN_X16_ROWS, w->rows);
		tok += nt;
	}
}

/* Tokens [t0, t1) over bands [b0, b1) of bands at data (band bytes each). */
static void x16_block(const struct job *jb, const uint8_t *data, size_t band, uint64_t b0,
		      uint64_t b1, uint64_t t0, uint64_t t1)
{
	const struct pt_kern_mat *w = jb->w;
	const size_t ab = jb->act_row_bytes;
	if (x16_pairs(jb) && b1 - b0 >= 2) {
		x16_block_pairs(jb, data, band, b0, b1, t0, t1);
		return;
	}
	for (uint64_t tok = t0; tok < t1; tok += PT_KERN_X16_TOKS) {
		const uint32_t nt = (uint32_t)min_u64(PT_KERN_X16_TOKS, t1 - tok);
		for (uint64_t b = b0; b < b1; b++)
			jb->ops->x16(w->cols, data + (b - b0) * band, jb->xq + tok * ab, ab, nt,
				     jb->y + tok * w->rows + b * PT_KERN_X16_ROWS, w->rows);
	}
}

/* Bands per block and tokens per panel for a product of band-byte bands (x16_block's
 * caller loops panels inside blocks). */
static void x16_blocking(const struct job *jb, size_t band, uint64_t *per, uint64_t *panel)
{
	const uint64_t act = jb->n_tok * jb->act_row_bytes;
	const uint64_t bb = act > X16_PANEL_BYTES ? X16_WIDE_BLOCK_BYTES : X16_BLOCK_BYTES;
	*per = band < bb ? bb / band : 1;
	if (x16_pairs(jb)) /* whole pairs: a block of one band would run the single kernel */
		*per = *per < 2 ? 2 : *per / 2 * 2;
	*panel = jb->n_tok;
	if (act > X16_PANEL_BYTES) {
		const uint64_t p = X16_PANEL_BYTES / jb->act_row_bytes / PT_KERN_X16_TOKS;
		*panel = (p ? p : 1) * PT_KERN_X16_TOKS;
	}
}

static void run_x16(const struct job *jb, uint64_t r0, uint64_t r1)
{
	const struct pt_kern_mat *w = jb->w;
	const uint8_t *data = w->data;
	const size_t band = pt_kern_x16_band(w->type, w->cols);
	uint64_t per, panel;
	x16_blocking(jb, band, &per, &panel);
	/* the kernels keep the stream's next lines requested; its first ones are asked here */
	if (r0 < r1)
		pt_kern_x16_prefetch_start(data + r0 / PT_KERN_X16_ROWS * band,
					   pt_kern_x16_ahead(w->type));
	for (uint64_t b0 = r0 / PT_KERN_X16_ROWS; b0 < r1 / PT_KERN_X16_ROWS; b0 += per) {
		const uint64_t b1 = min_u64(b0 + per, r1 / PT_KERN_X16_ROWS);
		for (uint64_t t0 = 0; t0 < jb->n_tok; t0 += panel)
			x16_block(jb, data + b0 * band, band, b0, b1, t0,
				  min_u64(t0 + panel, jb->n_tok));
	}
}

/* Rows stored as in the file, computed with the interleaved numerics (X16_ROWS).  Fewer
 * tokens than x16r_pack_from: the sixteen-row twin where the level has it, else the row
 * kernel (four tokens a call where the level has it), each row against every token while it
 * is hot.  From there on: each block of
 * bands packed into this thread's scratch (register transposes), then run_x16's loops over
 * it: the X16 kernels' speed (about twice the row-major tiles' on Q4_K from ~96 tokens,
 * docs/PERFORMANCE.md round 26) for one packing a block.  Both give the same bits (kern.h). */
#define X16R_PACK_TOKS 8
#define X16R_PACK_TOKS_Q6K 16 /* its packing costs more (three transposes a super-block) */
/* Where the level has the sixteen-row twin (x16_dot16), which shares nothing between tokens:
 * Q8_0 / Q5_0 pack from two tokens (their packing is cheap; bench_kern layouts, 2816 x 704,
 * cold: four tokens 59-65 GMAC/s packed against 38-41 by the twin; one token 32-34 against
 * 17-20), Q4_K / Q6_K from four (768 x 2048 and 1024 x 4096 Q4_K, cold: two tokens 71-82 by
 * the twin against 58-62 packed, four 83-107 packed against 69-82; Q6_K 2048 x 768 and
 * 4096 x 1024: two 49-57 against 42-43, four 62-76 against 55-61; at AVX2, where Q4_K has
 * the twin: three tokens 45-49 by the twin, four 52-54 packed).  The AVX2 Q8_0 / Q5_0 twins
 * run 18-26 GMAC/s at any token count and packing with the AVX2 packers gives, Q5_0 / Q8_0,
 * two tokens 24-27 / 20-24, four 38 / 30, eight 39-52 / 30-38 (2816 x 704, cold): the same
 * rule */
#define X16R_PACK_TOKS_DOT16 2
#define X16R_PACK_TOKS_DOT16_K 4
#define X16R_SCRATCH_BYTES (384u << 10)
static _Thread_local uint8_t x16r_scratch[X16R_SCRATCH_BYTES] __attribute__((aligned(64)));
_Static_assert(X16_BLOCK_BYTES <= X16R_SCRATCH_BYTES && X16_WIDE_BLOCK_BYTES <= X16R_SCRATCH_BYTES,
	       "x16_blocking's blocks fit the packing scratch");

/* The token count from which an X16_ROWS product packs its bands. */
static uint64_t x16r_pack_from(enum pt_type type, const struct pt_kern_ops *ops)
{
	if (ops->x16_dot16)
		return pt_kern_x16_unit_cols(type) == QKK ? X16R_PACK_TOKS_DOT16_K : X16R_PACK_TOKS_DOT16;
	return type == PT_TYPE_Q6_K ? X16R_PACK_TOKS_Q6K : X16R_PACK_TOKS;
}

/* X16_ROWS by the sixteen-row twin: r0, r1 are whole bands (the twin requests the next ones). */
static void run_x16_rows16(const struct job *jb, uint64_t r0, uint64_t r1)
{
	const struct pt_kern_mat *w = jb->w;
	const uint8_t *data = w->data;
	for (uint64_t r = r0; r < r1; r += PT_KERN_X16_ROWS)
		for (uint64_t tok = 0; tok < jb->n_tok; tok++)
			jb->ops->x16_dot16(w->cols, data + r * w->row_bytes, w->row_bytes,
					   jb->xq + tok * jb->act_row_bytes, jb->y + tok * w->rows + r);
}

static void run_x16_rows(const struct job *jb, uint64_t r0, uint64_t r1)
{
	const struct pt_kern_mat *w = jb->w;
	const uint8_t *data = w->data;
	const size_t band = pt_kern_x16_band(w->type, w->cols), ab = jb->act_row_bytes;
	const size_t rb = w->row_bytes;
	const bool pack = jb->n_tok >= x16r_pack_from(w->type, jb->ops) && band <= X16R_SCRATCH_BYTES;
	if (!pack && jb->ops->x16_dot16) {
		run_x16_rows16(jb, r0, r1);
		return;
	}
	if (!pack) {
		const uint64_t pf = prefetch_rows(rb);
		for (uint64_t r = r0; r < r1; r++) {
			if (r + pf < r1)
				pt_kern_prefetch_row(data + (r + pf) * rb, rb);
			uint64_t tok = 0;
			for (; jb->ops->x16_dot4 && tok + 4 <= jb->n_tok; tok += 4) {
				float out[4];
				jb->ops->x16_dot4(w->cols, data + r * rb, jb->xq + tok * ab, ab, out);
				for (int k = 0; k < 4; k++)
					jb->y[(tok + k) * w->rows + r] = out[k];
			}
			for (; tok < jb->n_tok; tok++)
				jb->y[tok * w->rows + r] = jb->ops->x16_dot(w->cols, data + r * rb,
									    jb->xq + tok * ab);
		}
		return;
	}
	uint64_t per, panel; /* a block of bands fits the scratch (band <= it, checked above) */
	x16_blocking(jb, band, &per, &panel);
	for (uint64_t b0 = r0 / PT_KERN_X16_ROWS; b0 < r1 / PT_KERN_X16_ROWS; b0 += per) {
		const uint64_t b1 = min_u64(b0 + per, r1 / PT_KERN_X16_ROWS);
		pt_kern_x16_pack(w->type, data + b0 * PT_KERN_X16_ROWS * rb, rb, w->cols, 0, b1 - b0,
				 x16r_scratch);
		for (uint64_t t0 = 0; t0 < jb->n_tok; t0 += panel)
			x16_block(jb, x16r_scratch, band, b0, b1, t0, min_u64(t0 + panel, jb->n_tok));
	}
}

static void run_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct job *jb = ctx;
	const struct pt_kern_mat *w = jb->w;
	const uint8_t *data = w->data;
	const size_t ab = jb->act_row_bytes;
	uint64_t r0 = (uint64_t)task * jb->rows_per_task;
	uint64_t r1 = r0 + jb->rows_per_task < w->rows ? r0 + jb->rows_per_task : w->rows;
	(void)worker;
	if (w->layout == PT_KERN_LAYOUT_X16) {
		run_x16(jb, r0, r1);
		return;
	}
	if (w->layout == PT_KERN_LAYOUT_X16_ROWS) {
		run_x16_rows(jb, r0, r1);
		return;
	}
	if (jb->ops->tile.fn && jb->n_tok > 1) {
		run_tiles(jb, r0, r1);
		return;
	}
	const uint64_t pf = prefetch_rows(w->row_bytes);
	for (uint64_t t0 = r0; t0 < r1; t0 += MATMUL_TILE_ROWS) {
		uint64_t t1 = t0 + MATMUL_TILE_ROWS < r1 ? t0 + MATMUL_TILE_ROWS : r1;
		uint64_t tok = 0;
		for (; jb->ops->dot4 && tok + 4 <= jb->n_tok; tok += 4) {
			float *y = jb->y + tok * w->rows;
			for (uint64_t r = t0; r < t1; r++) {
				float out[4];
				jb->ops->dot4(w->cols, data + r * w->row_bytes, jb->xq + tok * ab, ab, out);
				for (int k = 0; k < 4; k++)
					y[k * w->rows + r] = out[k];
			}
		}
		for (; tok < jb->n_tok; tok++) {
			const uint8_t *xq = jb->xq + tok * ab;
			float *y = jb->y + tok * w->rows;
			for (uint64_t r = t0; r < t1; r++) {
				if (r + pf < r1)
					pt_kern_prefetch_row(data + (r + pf) * w->row_bytes, w->row_bytes);
				y[r] = jb->ops->dot(w->cols, data + r * w->row_bytes, xq);
			}
		}
	}
}

static void run_rows(struct job *jb, pt_pool *pool)
{
	uint64_t threads = pt_pool_threads(pool);
	uint64_t per = (jb->w->rows + threads * TASKS_PER_THREAD - 1) / (threads * TASKS_PER_THREAD);
	/* single token: tasks of at most ~MATVEC_TASK_BYTES of weights, so a descheduled worker
	 * holding one (busy host) delays the product by little (the output head is ~250 MB on
	 * real shapes: 1/8 of it is ~2 ms) */
	if (jb->n_tok == 1 && per > MATVEC_TASK_BYTES / jb->w->row_bytes)
		per = MATVEC_TASK_BYTES / jb->w->row_bytes;
	if (per < MIN_ROWS_PER_TASK)
		per = MIN_ROWS_PER_TASK;
	/* whole register tiles per task (rows is 2 or 4; dot4 / dot take any split); band pairs
	 * where the two-band kernel will run */
	const uint64_t tr = x16_pairs(jb) ? 2 * PT_KERN_X16_ROWS
			    : jb->w->layout != PT_KERN_LAYOUT_ROWS ? PT_KERN_X16_ROWS
			    : jb->ops->tile.fn && jb->ops->tile.rows > 1 ? jb->ops->tile.rows
									 : 2;
	per = (per + tr - 1) / tr * tr;
	uint64_t n_tasks = (jb->w->rows + per - 1) / per;
	if (n_tasks > UINT32_MAX) { /* cannot happen below 2^36 rows; keep the cast honest */
		per = (jb->w->rows + UINT32_MAX - 1) / UINT32_MAX;
		n_tasks = (jb->w->rows + per - 1) / per;
	}
	jb->rows_per_task = per;
	pt_pool_run(pool, run_task, jb, (uint32_t)n_tasks);
}

enum pt_status pt_kern_matmul_q(const struct pt_kern_mat *w, const void *xq, uint64_t n_tok,
				float *y, pt_pool *pool, struct pt_error *err)
{
	struct job jb = { .w = w, .xq = xq, .n_tok = n_tok, .y = y };
	enum pt_status st = check_mat(w, &jb.ops, &jb.act_row_bytes, err);
	if (st != PT_OK)
		return st;
	if (w->rows == 0 || n_tok == 0)
		return PT_OK;
	run_rows(&jb, pool);
	return PT_OK;
}

enum pt_status pt_kern_matvec_q(const struct pt_kern_mat *w, const void *xq, float *y,
				pt_pool *pool, struct pt_error *err)
{
	return pt_kern_matmul_q(w, xq, 1, y, pool, err);
}

/* Activation rows are quantized in parallel for prefill batches (each row independently, so
 * the bytes do not depend on the split). */
#define QUANT_PARALLEL_MIN_TOK 8

struct quant_job {
	enum pt_type act;
	const float *x;
	uint8_t *xq;
	uint64_t cols;
	size_t arow;
	uint64_t n_tok;
	uint32_t n_parts; /* tasks; task k quantizes rows k, k + n_parts, ... */
};

static void quant_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct quant_job *qj = ctx;
	(void)worker;
	for (uint64_t t = task; t < qj->n_tok; t += qj->n_parts)
		pt_kern_quantize_row(qj->act, qj->x + t * qj->cols, qj->xq + t * qj->arow, qj->cols);
}

enum pt_status pt_kern_matmul(const struct pt_kern_mat *w, const float *x, uint64_t n_tok,
			      float *y, void *scratch, pt_pool *pool, struct pt_error *err)
{
	const struct pt_kern_ops *ops;
	size_t arow;
	enum pt_status st = check_mat(w, &ops, &arow, err);
	if (st != PT_OK)
		return st;
	if (ops->act_type == PT_TYPE_F32) /* F32 weights take the activations as they are */
		return pt_kern_matmul_q(w, x, n_tok, y, pool, err);
	struct quant_job qj = { ops->act_type, x, scratch, w->cols, arow, n_tok, 1 };
	if (n_tok >= QUANT_PARALLEL_MIN_TOK)
		qj.n_parts = pt_pool_threads(pool);
	pt_pool_run(pool, quant_task, &qj, qj.n_parts);
	return pt_kern_matmul_q(w, scratch, n_tok, y, pool, err);
}

enum pt_status pt_kern_matvec(const struct pt_kern_mat *w, const float *x, float *y,
			      void *scratch, pt_pool *pool, struct pt_error *err)
{
	return pt_kern_matmul(w, x, 1, y, scratch, pool, err);
}
