/* forward.c - the forward pass of the three MoE archs (ARCHITECTURES.md 1.3, 2.4, 3.3).
 *
 * One chunk of B tokens flows through every layer as [B][n] row blocks: norms per row,
 * projections as one pt_kern_matmul over the B rows, K/V of all rows stored before any row
 * attends (causality comes from each row's own position range), attention one task per
 * (row, head), MoE rows grouped by expert.  The arch differences are data: which tensors
 * exist (norms, shared expert, dense layers, ...), per-layer shapes from the hparams, and
 * the arch's layer recipe (struct pt_arch_recipe in model/arch.h: embedding scale, V norm,
 * score scale, activation, routing, router input, serial or parallel FFN, logit softcap).
 * Nothing here tests which arch it runs. */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "model/deltanet.h"
#include "model/ops.h"
#include "util/alloc.h"

/* Partner formats one decode input may need at once (Q8_K, Q8_0, ...: the types of Q, K and V
 * can differ in mixed quantizations). */
#define XQ_FORMATS 3
#define XQ_SLOTS (2 * XQ_FORMATS) /* two inputs at once: routed experts + Gemma's dense MLP */

/* One row x quantized lazily into each partner format asked for, in buffers buf[XQ_FORMATS]. */
struct xq_cache {
	void *const *buf;
	const float *x;
	uint32_t n;
	enum pt_type type[XQ_FORMATS];
};

/* An always-on FFN folded into a decode expert group: out = down(act(g in) * (u in)), then
 * RMSNorm by post_norm if set. */
struct ffn_ref {
	const struct pt_kern_mat *g, *u, *d;
	const float *in;
	float *out;
	const float *post_norm;
};

/* One sequence: its KV cache, its recurrent state (linear-attention layers: conv window and
 * delta-rule matrices, f->rs_floats floats, layer il's at f->rs_off[il]) and the next
 * position. */
struct fwd_seq {
	struct pt_kv kv;
	float *rs;
	int64_t pos;
};

#define TRIM_MAX 32

static uint64_t ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct pt_fwd {
	const struct pt_model *m;
	const struct pt_arch_recipe *rc; /* the arch's layer recipe */
	const struct pt_expert_provider *prov;
	pt_pool *pool;
	uint32_t n_batch, n_ctx, n_threads;
	uint32_t n_rows;  /* rows of the buffers: max(n_batch, n_seq) */
	uint32_t swa_rows; /* rows a sliding layer stores and attends per pass (<= n_batch) */
	uint64_t phase_ns[PT_FWD_PH_COUNT]; /* wall time per part, for the bench's decode split */
	uint64_t expert_gets; /* provider get calls (one per expert, layer and chunk) */
	struct fwd_seq *seqs;
	uint32_t n_seq;
	/* the chunk being run: each row's sequence and position; decode_rows: every row is a
	 * decode of its own sequence (one-row attention numerics whatever the row count) */
	uint32_t *rseq;
	int64_t *rpos;
	bool decode_rows;
	bool attn_ggml;   /* PT_ATTN_NUMERICS_GGML: ggml's one-row path below its tiled rows */
	bool ahead_done;  /* this layer's read-ahead was made */
	/* the row buffers of 1 MiB or more (rows_alloc): what pt_fwd_trim hands back */
	struct { void *p; size_t bytes; } trim[TRIM_MAX];
	uint32_t n_trim;
	/* MLA (recipe attn PT_ATTN_MLA): the decompressed-width Q (then the heads' V outputs)
	 * [n_rows][n_head * max(hk, hv)], the q_a rows [n_rows][q_lora], one head's rows
	 * gathered for its k_b / v_b product [n_rows][mg_w], YaRN and the score scale */
	float *mq, *mqa, *mg_in, *mg_out;
	uint32_t mq_w, mg_w;
	uint8_t *mh_xq;  /* decode: every head's input row quantized, [n_head][mh_xrow] */
	size_t mh_xrow;
	struct pt_yarn yarn;
	float kq_scale_mla;
	/* row blocks, [n_rows][width]; q, k, v, qkv, att and agate (attention) share f->phase
	 * with yk (the routed experts' outputs), see phase_layout; t3 and the read-ahead rows
	 * have one row per sequence (decode only) */
	float *x, *h, *q, *k, *v, *qkv, *att, *t1, *t2, *t3, *gate, *up;
	float *h2, *rl, *rw, *yk, *xg, *sel, *phase;
	float *spec_x, *spec_l, *spec_w; /* read-ahead prediction, per row: [n_embd], [n_expert],
					    [k] */
	/* prefill experts: the layer input quantized once for every gate/up product [n_batch]
	 * [xq_row] (xin_row bytes a row when xin_on), and one expert's rows gathered from it */
	uint8_t *xin, *xgq;
	size_t xin_row;
	bool xin_on;
	int *ids, *rows, *spec_ids;
	/* prefill: where each (row, rank) slot's expert output sits in f->yk when the outputs
	 * are kept in expert order (yk_sorted: slot f->rows[i] at yk row i) */
	uint32_t *slot_pos;
	bool yk_sorted;
	uint32_t *uni, *wave_end; /* a chunk's distinct experts on a layer, its waves */
	uint32_t *eoff;           /* [n_expert + 1]: each expert's run of f->rows */
	void (*on_route)(void *, uint32_t, int64_t, uint32_t, uint32_t, const int *);
	void *route_ctx;
	float *attn_scratch; /* per thread */
	float *parts;        /* split-K partial states: [n_head][blocks][2 + head_dim_v] */
	uint32_t attn_block;
	size_t attn_scratch_n;
	float *rope_cs;      /* [n_threads][rope_cs_n]: a pool thread's RoPE table of a row */
	size_t rope_cs_n;    /* the largest n_rot */
	struct pt_yarn *yarn_layers; /* per layer, YaRN on standard attention (gpt-oss);
					NULL: plain RoPE */
	void *act;           /* activation quantization scratch */
	size_t act_bytes;
	/* decode (single-row) products: one row in each partner format an input needs, and
	 * the batched expert group's intermediates [group_max][w_ff] / [group_max][n_embd] and
	 * quantized down inputs [group_max][xq_row] */
	void *xqb[XQ_SLOTS];
	size_t xq_row;
	float *dg, *dy;
	uint8_t *xqd;
	uint32_t group_max;
	/* decode batches (n_seq > 1): PT_KERN_SET_MAX (expert, row) products' intermediates
	 * [w_ff], outputs [n_embd] and quantized down inputs [xq_row] */
	float *bdg, *bdy;
	uint8_t *bxqd;
	uint32_t w_qk, w_v, w_ff, n_k; /* widths */
	float *agate;        /* attention output gates [n_rows][n_head * head_dim] */
	/* linear attention: geometry, per-layer state offsets, projections [n_rows][...] of
	 * qkv (raw and convolved), z, beta, alpha and the head outputs, per-thread chunk
	 * scratch */
	struct pt_dn_geom dn;
	size_t *rs_off, rs_floats;
	float *lin_qkv, *lin_y, *lin_z, *lin_b, *lin_a, *lin_o, *dn_scratch;
	size_t dn_scratch_n;
	uint32_t dn_chunk_min; /* prefill chunks of at least this many rows use the chunked
				  delta rule (0: never) */
};

struct attn_task {
	pt_fwd *f;
	uint32_t il, n_head, hd_k, hd_v;
	struct pt_attn_args a;
	uint32_t n_blocks; /* split-K tasks per head group (single-row chunks) */
	uint32_t r_off;    /* the pass's first row in the chunk (a sliding layer's passes) */
	uint32_t n_rows;   /* rows of the pass */
	uint32_t group;    /* query heads per KV head */
	uint32_t n_sub;    /* head groups per KV head: tasks take group / n_sub heads each */
	const float *sinks; /* per-head sink logits (gpt-oss), NULL: none */
	uint32_t tile_rows; /* rows per attn_fn task (attn_tile_rows; 1 for a one-row chunk) */
};

/* Keys per split-K block.  Block boundaries depend only on the query position, and blocks
 * are merged in order, so results ignore the thread count and whether blocks ran as
 * separate tasks. */
#define ATTN_BLOCK_DEFAULT 1024
/* Prefill chunks of at least this many rows run the chunked delta rule (below it the
 * per-token form costs about the same) */
#define DN_CHUNK_MIN_DEFAULT 16

/* Prefill rows per attention task: the tile's rows (x the KV head's query heads) pass over
 * each K/V chunk together while it is in L1/L2, instead of every row streaming the whole
 * context again.  Results are unchanged (pt_attn_tile).  About ATTN_TILE_QUERIES queries a
 * tile, ATTN_TILE_ROWS to ATTN_TILE_ROWS_MAX rows: a GQA group of 2 (Gemma 4's sliding
 * layers) takes 32 rows, so the kernels see as many queries a call as a group of 8 does
 * (they convert each F16 key or value once for all of them, src/kern/attn_avx512.c). */
#define ATTN_TILE_ROWS 8
#define ATTN_TILE_ROWS_MAX 32
#define ATTN_TILE_QUERIES 64

static uint32_t attn_tile_rows(uint32_t group)
{
	const uint32_t r = ATTN_TILE_QUERIES / (group ? group : 1);
	return r < ATTN_TILE_ROWS ? ATTN_TILE_ROWS : r > ATTN_TILE_ROWS_MAX ? ATTN_TILE_ROWS_MAX : r;
}

/* Per-worker scratch of a task: pt_attn_group's part, then the block's (m, s, acc) and the
 * running total's, n_q heads each (n_q: the query heads of a task's tile of rows). */
struct attn_mem {
	float *s, *pm, *ps, *pacc, *tm, *ts, *tacc;
};

static struct attn_mem attn_mem(pt_fwd *f, const struct attn_task *t, uint32_t worker)
{
	struct attn_mem w;
	const uint32_t n_q = t->group / t->n_sub * t->tile_rows;
	w.s = f->attn_scratch + (size_t)worker * f->attn_scratch_n;
	w.pm = w.s + pt_attn_scratch_floats(&f->seqs[0].kv, t->il, n_q) -
	       2 * (size_t)n_q * (2 + t->hd_v);
	w.ps = w.pm + n_q;
	w.pacc = w.ps + n_q;
	w.tm = w.pacc + (size_t)n_q * t->hd_v;
	w.ts = w.tm + n_q;
	w.tacc = w.ts + n_q;
	return w;
}

/* Whether row r + 1 continues row r's sequence at the next position, and either with the
 * same first key (a tile's rows then share every split-K block boundary) or, in a sliding
 * window, with the next one while both rows' keys are one split-K block (each row's keys
 * then run as one block: its own first keys, the keys all rows see, its own last keys). */
static bool attn_rows_chain(const pt_fwd *f, uint32_t il, uint32_t r)
{
	if (f->rseq[r + 1] != f->rseq[r] || f->rpos[r + 1] != f->rpos[r] + 1)
		return false;
	const struct pt_kv *kv = &f->seqs[f->rseq[r]].kv;
	int64_t f0, c0, f1, c1;
	pt_kv_range(kv, il, f->rpos[r], &f0, &c0);
	pt_kv_range(kv, il, f->rpos[r + 1], &f1, &c1);
	return f0 == f1 || (f1 == f0 + 1 && c0 <= f->attn_block && c1 <= f->attn_block);
}

/* Rows [r0, r0 + nr) of one chain (attn_rows_chain), query heads h0 .. h0 + n_q of KV head
 * kvh: every split-K block of the rows' keys, merged in order.  Keys every row of the block
 * sees run for all rows at once; the few keys only some rows see run row by row around them
 * (positions rise by one a row, so row i sees i more keys than row 0 at the end of the last
 * block and, in a sliding window, i fewer at the start of its one block).  Each query's steps
 * are those of a task of its own: the same keys in the same order, the same blocks. */
static void attn_rows(const struct attn_task *t, const struct attn_mem *w, uint32_t r0,
		      uint32_t nr, uint32_t kvh, uint32_t h0, uint32_t n_q)
{
	pt_fwd *f = t->f;
	const uint32_t hd_v = t->hd_v, nq = nr * n_q;
	const float *q = f->q + (size_t)r0 * f->w_qk + (size_t)h0 * t->hd_k;
	const struct pt_kv *kv = &f->seqs[f->rseq[r0]].kv;
	int64_t first, count0, first_last, count_last;
	pt_kv_range(kv, t->il, f->rpos[r0], &first, &count0);
	pt_kv_range(kv, t->il, f->rpos[r0 + nr - 1], &first_last, &count_last);
	const int64_t end0 = first + count0; /* row i's keys end at end0 + i */
	const int64_t blk = f->attn_block;
	/* sliding: row i's keys start at its own first (first .. first_last) and are one block */
	const bool slide = first_last != first;
	if (slide && (first_last > end0 || count_last > blk)) {
		/* a window narrower than the chain, or wider than a block: row by row */
		for (uint32_t r = 0; r < nr; r++)
			attn_rows(t, w, r0 + r, 1, kvh, h0, n_q);
		return;
	}
	for (uint32_t i = 0; i < nq; i++) {
		w->tm[i] = -INFINITY;
		w->ts[i] = 0.0f;
	}
	memset(w->tacc, 0, (size_t)nq * hd_v * sizeof(float));
	for (int64_t p = slide ? first_last : first; p < end0 + nr - 1; p += blk) {
		for (uint32_t i = 0; i < nq; i++) {
			w->pm[i] = -INFINITY;
			w->ps[i] = 0.0f;
		}
		memset(w->pacc, 0, (size_t)nq * hd_v * sizeof(float));
		const int64_t bend = slide ? end0 + nr - 1 : p + blk;
		const int64_t common = end0 < bend ? end0 : bend;
		for (uint32_t r = 0; slide && r + 1 < nr; r++) {
			int64_t fr, cr;
			pt_kv_range(kv, t->il, f->rpos[r0 + r], &fr, &cr);
			const size_t x = (size_t)r * n_q;
			pt_attn_tile(kv, t->il, kvh, q + (size_t)r * f->w_qk, t->hd_k, 0, n_q, 1, fr,
				     first_last, &t->a, w->pm + x, w->ps + x, w->pacc + x * hd_v, w->s);
		}
		pt_attn_tile(kv, t->il, kvh, q, t->hd_k, f->w_qk, n_q, nr, p, common, &t->a, w->pm,
			     w->ps, w->pacc, w->s);
		for (uint32_t r = 1; r < nr; r++) {
			const int64_t hi = end0 + r < bend ? end0 + r : bend;
			const int64_t lo = common > p ? common : p;
			const size_t x = (size_t)r * n_q;
			pt_attn_tile(kv, t->il, kvh, q + (size_t)r * f->w_qk, t->hd_k, 0, n_q, 1, lo,
				     hi, &t->a, w->pm + x, w->ps + x, w->pacc + x * hd_v, w->s);
		}
		for (uint32_t i = 0; i < nq; i++) {
			struct pt_attn_part tot = { w->tm[i], w->ts[i], w->tacc + (size_t)i * hd_v };
			const struct pt_attn_part part = { w->pm[i], w->ps[i],
							   w->pacc + (size_t)i * hd_v };
			pt_attn_merge(&tot, &part, hd_v);
			w->tm[i] = tot.m;
			w->ts[i] = tot.s;
		}
	}
	for (uint32_t r = 0; r < nr; r++)
		for (uint32_t i = 0; i < n_q; i++) {
			const size_t x = (size_t)r * n_q + i;
			struct pt_attn_part tot = { w->tm[x], w->ts[x], w->tacc + x * hd_v };
			if (t->sinks)
				pt_attn_sink(&tot, t->sinks[h0 + i], hd_v);
			pt_attn_finish(&tot, hd_v,
				       f->att + (size_t)(r0 + r) * f->w_qk + (size_t)(h0 + i) * hd_v);
		}
}

/* One task per (tile of rows, KV head, head group), tiles from the last rows (the most keys)
 * down so the pool's tail is short; a tile's rows that do not chain (another sequence, a
 * position gap, a sliding window) run as separate chains. */
static void attn_fn(void *ctx, uint32_t task, uint32_t worker)
{
	const struct attn_task *t = ctx;
	pt_fwd *f = t->f;
	const uint32_t per_row = t->n_head / t->group * t->n_sub, n_q = t->group / t->n_sub;
	const uint32_t tile = task / per_row, g = task % per_row;
	const uint32_t kvh = g / t->n_sub, h0 = g * n_q;
	const uint32_t r_end = t->r_off + t->n_rows - tile * t->tile_rows;
	const uint32_t r_beg = r_end - t->r_off > t->tile_rows ? r_end - t->tile_rows : t->r_off;
	const struct attn_mem w = attn_mem(f, t, worker);
	for (uint32_t r = r_beg; r < r_end;) {
		uint32_t e = r + 1;
		while (e < r_end && attn_rows_chain(f, t->il, e - 1))
			e++;
		attn_rows(t, &w, r, e - r, kvh, h0, n_q);
		r = e;
	}
}

/* Split-K for a single-row chunk (decode): task = (head group, key block); each head's
 * partial state (max, sum, acc) goes to f->parts and attn_merge_row combines the blocks in
 * order. */
static void attn_block_fn(void *ctx, uint32_t task, uint32_t worker)
{
	const struct attn_task *t = ctx;
	pt_fwd *f = t->f;
	const uint32_t n_q = t->group / t->n_sub;
	const uint32_t g = task / t->n_blocks, b = task % t->n_blocks, h0 = g * n_q;
	const struct attn_mem w = attn_mem(f, t, worker);
	const struct pt_kv *kv = &f->seqs[f->rseq[0]].kv;
	int64_t first, count;
	pt_kv_range(kv, t->il, f->rpos[0], &first, &count);
	const int64_t lo = first + (int64_t)b * f->attn_block;
	const int64_t hi = lo + f->attn_block < first + count ? lo + f->attn_block : first + count;
	pt_attn_group(kv, t->il, g / t->n_sub, f->q + (size_t)h0 * t->hd_k, t->hd_k, n_q, lo,
		      hi, &t->a, w.pm, w.ps, w.pacc, w.s);
	for (uint32_t i = 0; i < n_q; i++) {
		float *slot = f->parts + ((size_t)(h0 + i) * t->n_blocks + b) * (2 + t->hd_v);
		slot[0] = w.pm[i];
		slot[1] = w.ps[i];
		memcpy(slot + 2, w.pacc + (size_t)i * t->hd_v, t->hd_v * sizeof(float));
	}
}

static void attn_merge_row(pt_fwd *f, const struct attn_task *t)
{
	float *acc = f->attn_scratch;
	for (uint32_t h = 0; h < t->n_head; h++) {
		struct pt_attn_part tot = { -INFINITY, 0.0f, acc };
		memset(acc, 0, t->hd_v * sizeof(float));
		for (uint32_t b = 0; b < t->n_blocks; b++) {
			float *slot = f->parts + ((size_t)h * t->n_blocks + b) * (2 + t->hd_v);
			const struct pt_attn_part part = { slot[0], slot[1], slot + 2 };
			pt_attn_merge(&tot, &part, t->hd_v);
		}
		if (t->sinks)
			pt_attn_sink(&tot, t->sinks[h], t->hd_v);
		pt_attn_finish(&tot, t->hd_v, f->att + (size_t)h * t->hd_v);
	}
}

/* Head groups per KV head: a single-row chunk splits a KV head's query heads until there are
 * two tasks per thread (grouping never changes a head's result, only how K/V loads are
 * shared). */
static uint32_t attn_subgroups(const pt_fwd *f, uint32_t n_rows, uint32_t n_kv, uint32_t group)
{
	uint32_t n_sub = 1;
	if (n_rows > 1 || f->n_threads < 2)
		return 1;
	while (n_kv * n_sub < 2 * f->n_threads && group % (2 * n_sub) == 0)
		n_sub *= 2;
	return n_sub;
}

static enum pt_status mm(pt_fwd *f, const struct pt_kern_mat *w, const float *x, uint32_t n,
			 float *y, struct pt_error *err)
{
	return pt_kern_matmul(w, x, n, y, f->act, f->pool, err);
}

struct quant_rows_job {
	enum pt_type type;
	const float *x;
	uint8_t *xq;
	size_t cols, row_bytes;
	uint32_t n, n_parts;
};

static void quant_rows_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct quant_rows_job *j = ctx;
	(void)worker;
	for (uint32_t r = task; r < j->n; r += j->n_parts)
		pt_kern_quantize_row(j->type, j->x + (size_t)r * j->cols, j->xq + r * j->row_bytes,
				     j->cols);
}

/* n rows of x (cols wide) to type at row_bytes a row, split over the pool's threads for
 * batches as pt_kern_matmul splits them (each row alone, so the bytes ignore the split). */
static void quant_rows(pt_fwd *f, enum pt_type type, const float *x, uint32_t n, size_t cols,
		       uint8_t *out, size_t row_bytes)
{
	struct quant_rows_job j = { type, x, out, cols, row_bytes, n, 1 };
	if (n >= 8)
		j.n_parts = pt_pool_threads(f->pool);
	pt_pool_run(f->pool, quant_rows_task, &j, j.n_parts);
}

/* Which input f->act holds quantized, for products of one input in a row (Q, K, V; gate,
 * up): zero-initialised per input by the caller, valid only while no other product runs. */
struct act_once {
	enum pt_type type;
	uint64_t cols;
	bool ok;
};

/* Y = W x like mm, x quantized into f->act only when a does not already hold it in w's
 * partner format (the same bytes pt_kern_matmul would make, so results are unchanged). */
static enum pt_status mm_once(pt_fwd *f, struct act_once *a, const struct pt_kern_mat *w,
			      const float *x, uint32_t n, float *y, struct pt_error *err)
{
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	const size_t row = pt_kern_act_bytes(w, 1);
	if (!ops || ops->act_type == PT_TYPE_F32 || row == 0 || n < 2)
		return mm(f, w, x, n, y, err);
	if (!a->ok || a->type != ops->act_type || a->cols != w->cols) {
		quant_rows(f, ops->act_type, x, n, w->cols, f->act, row);
		*a = (struct act_once){ ops->act_type, w->cols, true };
	}
	return pt_kern_matmul_q(w, f->act, n, y, f->pool, err);
}

/* x in w's partner format, quantized at most once per format (the bytes are those
 * pt_kern_matmul would produce, so decode products stay bit-identical to it).  NULL for a
 * type without kernels (the product then reports it) or when the slots are exhausted. */
static const void *xq_of(struct xq_cache *c, const struct pt_kern_mat *w)
{
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	if (!ops)
		return NULL;
	if (ops->act_type == PT_TYPE_F32)
		return c->x;
	for (uint32_t i = 0; i < c->n; i++)
		if (c->type[i] == ops->act_type)
			return c->buf[i];
	if (c->n == XQ_FORMATS)
		return NULL;
	pt_kern_quantize_row(ops->act_type, c->x, c->buf[c->n], w->cols);
	c->type[c->n] = ops->act_type;
	return c->buf[c->n++];
}

static pt_kern_glu_fn glu_fn(const pt_fwd *f)
{
	switch (f->rc->act) {
	case PT_ACT_GEGLU: return pt_op_geglu;
	case PT_ACT_SWIGLU_OAI: return pt_op_swiglu_oai;
	default: return pt_op_swiglu;
	}
}

static enum pt_status no_xq(const struct pt_kern_mat *w, struct pt_error *err)
{
	return pt_kern_ops(w->type) ? pt_error_set(err, PT_E_INVALID, "forward: too many "
						   "activation formats for one input")
				    : pt_error_set(err, PT_E_UNSUPPORTED, "no compute kernel for "
						   "tensor type %s", pt_type_name(w->type));
}

/* Rows [r0, r1) of a chunk; worker: the pool thread running them (its scratch). */
typedef void (*rows_fn)(void *ctx, uint32_t r0, uint32_t r1, uint32_t worker);

struct rows_job {
	rows_fn fn;
	void *ctx;
	uint32_t n, per;
};

static void rows_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct rows_job *j = ctx;
	const uint32_t r0 = task * j->per, r1 = r0 + j->per < j->n ? r0 + j->per : j->n;
	j->fn(j->ctx, r0, r1, worker);
}

/* A prompt chunk's element-wise steps (norms, RoPE, residual adds, KV stores, activations)
 * over the pool in row ranges: done on the calling thread alone, they left the other
 * threads idle for ~15 % of a prompt (PERFORMANCE round 39 §3).  Each row's operations are
 * the same whichever thread runs them, so the split changes nothing.  Fewer than min_rows
 * rows (a decode), or one thread: on the calling thread.  Never called inside a pool task. */
static void par_rows(pt_fwd *f, uint32_t n, uint32_t min_rows, rows_fn fn, void *ctx)
{
	const uint32_t threads = pt_pool_threads(f->pool);
	if (n < min_rows || threads < 2) {
		fn(ctx, 0, n, 0);
		return;
	}
	struct rows_job j = { fn, ctx, n, (n + 2 * threads - 1) / (2 * threads) };
	pt_pool_run(f->pool, rows_task, &j, (n + j.per - 1) / j.per);
}

/* Rows a step needs before the pool pays for its dispatch. */
#define PAR_ROWS 32

struct norm_job {
	float *y;
	const float *x, *w;
	uint32_t width;
	float eps;
};

static void norm_task(void *ctx, uint32_t r0, uint32_t r1, uint32_t worker)
{
	const struct norm_job *j = ctx;
	(void)worker;
	for (uint32_t r = r0; r < r1; r++)
		pt_op_rmsnorm(j->y + (size_t)r * j->width, j->x + (size_t)r * j->width, j->w,
			      (int)j->width, j->eps);
}

static void norm_rows(pt_fwd *f, float *y, const float *x, const float *w, uint32_t n,
		      uint32_t width, float eps)
{
	struct norm_job j = { y, x, w, width, eps };
	par_rows(f, n, PAR_ROWS, norm_task, &j);
}

/* Element-wise loops written as blocks of 8 independent statements: -O2's cheap vectorizer
 * turns each block into vector instructions (a plain loop would need alias checks and an
 * epilogue, which that cost model refuses).  Same operations, same results. */
#define BLOCK8(i, n, stmt)                                   \
	do {                                                 \
		size_t i##0_ = 0;                            \
		for (; i##0_ + 8 <= (n); i##0_ += 8)         \
			for (size_t i = i##0_; i < i##0_ + 8; i++) \
				stmt;                        \
		for (size_t i = i##0_; i < (n); i++)         \
			stmt;                                \
	} while (0)

static void add_rows(float *restrict x, const float *restrict y, size_t count)
{
	BLOCK8(i, count, x[i] += y[i]);
}

/* x[r] += y[r] (times *scale after, where given) for n rows of width on the pool. */
struct add_job {
	float *x;
	const float *y, *scale;
	uint32_t width;
};

static void add_task(void *ctx, uint32_t r0, uint32_t r1, uint32_t worker)
{
	const struct add_job *j = ctx;
	float *x = j->x + (size_t)r0 * j->width;
	const size_t cnt = (size_t)(r1 - r0) * j->width;
	(void)worker;
	add_rows(x, j->y + (size_t)r0 * j->width, cnt);
	for (size_t i = 0; j->scale && i < cnt; i++)
		x[i] *= j->scale[0];
}

static void add_rows_par(pt_fwd *f, float *x, const float *y, uint32_t n, uint32_t width,
			 const float *scale)
{
	struct add_job j = { x, y, scale, width };
	par_rows(f, n, PAR_ROWS, add_task, &j);
}

/* out[r] = act(gate[r]) * up[r] over n rows of nf values (rows os / is floats apart) on the
 * pool.  Row-wise only where nf is a multiple of 16, so every row runs whole vector steps
 * as one call over all rows would. */
struct glu_job {
	pt_kern_glu_fn glu;
	float *out;
	const float *gate, *up;
	size_t os, is;
	uint32_t nf;
};

static void glu_task(void *ctx, uint32_t r0, uint32_t r1, uint32_t worker)
{
	const struct glu_job *j = ctx;
	(void)worker;
	if (j->os == j->nf && j->is == j->nf) { /* packed rows: one call */
		j->glu(j->out + r0 * j->os, j->gate + r0 * j->is, j->up + r0 * j->is,
		       (int)((r1 - r0) * j->nf));
		return;
	}
	for (uint32_t r = r0; r < r1; r++)
		j->glu(j->out + r * j->os, j->gate + r * j->is, j->up + r * j->is, (int)j->nf);
}

static void glu_rows(pt_fwd *f, pt_kern_glu_fn glu, float *out, size_t os, const float *gate,
		     const float *up, size_t is, uint32_t nf, uint32_t n)
{
	struct glu_job j = { glu, out, gate, up, os, is, nf };
	par_rows(f, n, nf % 16 == 0 ? PAR_ROWS : UINT32_MAX, glu_task, &j);
}

/* Decode: Q, K and V of one row in one dispatch, straight into f->q / f->k / f->v. */
static enum pt_status qkv_one(pt_fwd *f, const struct pt_layer_weights *L, uint32_t nv,
			      struct pt_error *err)
{
	struct xq_cache c = { .buf = f->xqb, .x = f->h };
	struct pt_kern_mv set[3] = { { L->wq, xq_of(&c, &L->wq), f->q },
				     { L->wk, xq_of(&c, &L->wk), f->k } };
	uint32_t ns = 2;
	if (L->wv.data)
		set[ns++] = (struct pt_kern_mv){ L->wv, xq_of(&c, &L->wv), f->v };
	for (uint32_t i = 0; i < ns; i++)
		if (!set[i].xq)
			return no_xq(&set[i].w, err);
	enum pt_status st = pt_kern_matvec_set(set, ns, f->pool, err);
	/* Gemma 4 full layers without attn_v: V is the raw K projection (before k_norm). */
	if (st == PT_OK && !L->wv.data)
		memcpy(f->v, f->k, nv * sizeof(float));
	return st;
}

/* Q, K, V for n rows from the normed input f->h into f->q / f->k / f->v (row strides
 * w_qk, n_k, w_v). */
static enum pt_status qkv_proj(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
			       uint32_t nq, uint32_t nk, uint32_t nv, struct pt_error *err)
{
	enum pt_status st;
	if (n == 1 && !L->wqkv.data)
		return qkv_one(f, L, nv, err);
	if (L->wqkv.data) {
		const uint32_t w = nq + nk + nv;
		st = mm(f, &L->wqkv, f->h, n, f->qkv, err);
		for (uint32_t r = 0; st == PT_OK && r < n; r++) {
			const float *src = f->qkv + (size_t)r * w;
			memcpy(f->q + (size_t)r * f->w_qk, src, nq * sizeof(float));
			memcpy(f->k + (size_t)r * f->n_k, src + nq, nk * sizeof(float));
			memcpy(f->v + (size_t)r * f->w_v, src + nq + nk, nv * sizeof(float));
		}
		return st;
	}
	struct act_once a = { 0 };
	st = mm_once(f, &a, &L->wq, f->h, n, f->qkv, err);
	for (uint32_t r = 0; st == PT_OK && r < n; r++)
		memcpy(f->q + (size_t)r * f->w_qk, f->qkv + (size_t)r * nq, nq * sizeof(float));
	if (st == PT_OK)
		st = mm_once(f, &a, &L->wk, f->h, n, f->qkv, err);
	for (uint32_t r = 0; st == PT_OK && r < n; r++)
		memcpy(f->k + (size_t)r * f->n_k, f->qkv + (size_t)r * nk, nk * sizeof(float));
	if (st == PT_OK && L->wv.data)
		st = mm_once(f, &a, &L->wv, f->h, n, f->qkv, err);
	/* Gemma 4 full layers without attn_v: V is the raw K projection (before k_norm). */
	for (uint32_t r = 0; st == PT_OK && r < n; r++)
		memcpy(f->v + (size_t)r * f->w_v, f->qkv + (size_t)r * nv, nv * sizeof(float));
	return st;
}

/* Attention of rows [r0, r0 + n) of the chunk's n_chunk rows of f->q (stride w_qk, head_dim
 * hd_k) over the cache of layer il into f->att (stride w_qk, head h at h * hd_v). */
static void attend(pt_fwd *f, uint32_t il, uint32_t r0, uint32_t n, uint32_t n_chunk,
		   uint32_t n_head, uint32_t n_kv, uint32_t hd_k, uint32_t hd_v, float scale)
{
	struct attn_task t = { f, il, n_head, hd_k, hd_v, { 0.0f, 0.0f, false }, 1, r0, n,
			       n_head / n_kv, 1, f->m->layers[il].attn_sinks, 1 };
	t.n_sub = attn_subgroups(f, n_chunk, n_kv, t.group);
	t.a.scale = scale;
	t.a.softcap = 0.0f;
	/* F32 numerics: the tiled path for every chunk.  ggml's: the chunk's rows decide, not
	 * the pass's, and a batch of decodes keeps each row's one-row numerics */
	t.a.f32_acc = !f->attn_ggml || (n_chunk >= PT_ATTN_TILED_ROWS && !f->decode_rows);
	int64_t first, count;
	pt_kv_range(&f->seqs[f->rseq[0]].kv, il, f->rpos[0], &first, &count);
	t.n_blocks = (uint32_t)((count + f->attn_block - 1) / f->attn_block);
	if (n_chunk == 1 && t.n_blocks > 1) {
		pt_pool_run(f->pool, attn_block_fn, &t, n_kv * t.n_sub * t.n_blocks);
		attn_merge_row(f, &t);
	} else {
		if (n_chunk > 1)
			t.tile_rows = attn_tile_rows(t.group / t.n_sub);
		const uint32_t n_tiles = (n + t.tile_rows - 1) / t.tile_rows;
		pt_pool_run(f->pool, attn_fn, &t, n_tiles * n_kv * t.n_sub);
	}
}

/* Head h's matrix of a per-head 3-D weight (attn_k_b / attn_v_b). */
static struct pt_kern_mat head_mat(const struct pt_kern_mat *w, uint32_t h)
{
	struct pt_kern_mat m = *w;
	m.data = (const uint8_t *)w->data + (size_t)h * w->rows * w->row_bytes;
	return m;
}

/* For each head h: out[r][out_off + h * out_stride ..] = W_h in[r][in_off + h * in_stride ..]
 * over the n rows (row strides in_row / out_row), one matmul per head on its gathered
 * rows (each product's activation quantized as ggml quantizes the head's rows). */
static enum pt_status per_head(pt_fwd *f, const struct pt_kern_mat *w, uint32_t n_head,
			       const float *in, size_t in_row, size_t in_stride, float *out,
			       size_t out_row, size_t out_stride, uint32_t n,
			       struct pt_error *err)
{
	const uint32_t ci = (uint32_t)w->cols, co = (uint32_t)w->rows;
	enum pt_status st = PT_OK;
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	const size_t xrow = pt_kern_act_bytes(w, 1);
	if (n == 1 && ops && xrow <= f->mh_xrow) {
		/* decode: the heads' products as sets of single-row products (each the dot calls
		 * pt_kern_matmul makes on the same quantized row), one dispatch per set */
		struct pt_kern_mv set[PT_KERN_SET_MAX];
		for (uint32_t h0 = 0; st == PT_OK && h0 < n_head; h0 += PT_KERN_SET_MAX) {
			const uint32_t cnt = n_head - h0 < PT_KERN_SET_MAX ? n_head - h0
									 : PT_KERN_SET_MAX;
			for (uint32_t j = 0; j < cnt; j++) {
				const float *x = in + (size_t)(h0 + j) * in_stride;
				uint8_t *q = f->mh_xq + (size_t)(h0 + j) * f->mh_xrow;
				if (ops->act_type != PT_TYPE_F32)
					pt_kern_quantize_row(ops->act_type, x, q, ci);
				set[j] = (struct pt_kern_mv){ head_mat(w, h0 + j),
							      ops->act_type == PT_TYPE_F32 ? (const void *)x
											   : q,
							      out + (size_t)(h0 + j) * out_stride };
			}
			st = pt_kern_matvec_set(set, cnt, f->pool, err);
		}
		return st;
	}
	for (uint32_t h = 0; st == PT_OK && h < n_head; h++) {
		const struct pt_kern_mat m = head_mat(w, h);
		for (uint32_t r = 0; r < n; r++)
			memcpy(f->mg_in + (size_t)r * ci, in + r * in_row + h * in_stride,
			       ci * sizeof(float));
		st = mm(f, &m, f->mg_in, n, f->mg_out, err);
		for (uint32_t r = 0; st == PT_OK && r < n; r++)
			memcpy(out + r * out_row + h * out_stride, f->mg_out + (size_t)r * co,
			       co * sizeof(float));
	}
	return st;
}

/* Multi-head latent attention with the up-projections absorbed (deepseek2): per row the
 * latent c = RMSNorm(kv_a c-part) and the RoPE'd shared key k_pe are cached as one K row
 * [c | k_pe] (V = c, read out of K); each head's query becomes [k_b_h^T q_nope_h | q_pe_h],
 * one KV head serves all heads (MQA), and each head's output o_h (latent width) is
 * decompressed by v_b_h before attn_output. */
static enum pt_status attention_mla(pt_fwd *f, uint32_t il, uint32_t n, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const struct pt_layer_weights *L = &f->m->layers[il];
	const uint32_t H = hp->n_head, C = hp->kv_lora_rank, nr = hp->n_rot;
	const uint32_t hk = hp->head_dim_k_mla, hv = hp->head_dim_v_mla, nope = hk - nr;
	const uint32_t dk = C + nr, wq = H * hk, D = hp->n_embd;
	const enum pt_rope_mode mode = f->rc->rope_adjacent ? PT_ROPE_NORM : PT_ROPE_NEOX;
	struct act_once a = { 0 };
	enum pt_status st;

	norm_rows(f, f->h, f->x, L->attn_norm, n, D, hp->rms_eps);
	if (L->wq_a.data) {
		st = mm_once(f, &a, &L->wq_a, f->h, n, f->mqa, err);
		if (st == PT_OK)
			st = mm_once(f, &a, &L->wkv_a, f->h, n, f->k, err);
		norm_rows(f, f->mqa, f->mqa, L->q_a_norm, n, hp->q_lora_rank, hp->rms_eps);
		if (st == PT_OK)
			st = mm(f, &L->wq_b, f->mqa, n, f->mq, err);
	} else {
		st = mm_once(f, &a, &L->wq, f->h, n, f->mq, err);
		if (st == PT_OK)
			st = mm_once(f, &a, &L->wkv_a, f->h, n, f->k, err);
	}
	if (st != PT_OK)
		return st;
	for (uint32_t r = 0; r < n; r++) {
		float *q = f->mq + (size_t)r * wq, *kv = f->k + (size_t)r * dk;
		pt_op_rope_cache_yarn(f->rope_cs, (int)nr, f->rpos[r], hp->rope_freq_base, NULL,
				      &f->yarn);
		pt_op_rope_apply(q + nope, (int)H, (int)hk, (int)nr, mode, f->rope_cs);
		pt_op_rope_apply(kv + C, 1, (int)nr, (int)nr, mode, f->rope_cs);
		pt_op_rmsnorm(kv, kv, L->kv_a_norm, (int)C, hp->rms_eps);
		pt_kv_store(&f->seqs[f->rseq[r]].kv, il, f->rpos[r], kv, NULL);
		for (uint32_t h = 0; h < H; h++) /* the RoPE part after each absorbed query */
			memcpy(f->q + (size_t)r * f->w_qk + (size_t)h * dk + C, q + (size_t)h * hk + nope,
			       nr * sizeof(float));
	}
	/* absorbed queries: q_abs_h = k_b_h q_nope_h (latent width) */
	st = per_head(f, &L->wk_b, H, f->mq, wq, hk, f->q, f->w_qk, dk, n, err);
	if (st != PT_OK)
		return st;
	attend(f, il, 0, n, n, H, 1, dk, C, f->kq_scale_mla);
	/* decompress each head's latent output: u_h = v_b_h o_h, packed [n][H * hv] */
	st = per_head(f, &L->wv_b, H, f->att, f->w_qk, C, f->mq, (size_t)H * hv, hv, n, err);
	if (st == PT_OK)
		st = mm(f, &L->wo, f->mq, n, f->t1, err);
	if (st != PT_OK)
		return st;
	add_rows_par(f, f->x, f->t1, n, D, NULL);
	return PT_OK;
}

/* A chunk's rows after the Q/K/V products: the output gate's half set aside (gated Q rows
 * are per head [query | gate]), biases, the Q/K(/V) norms, RoPE (each pool thread its own
 * table of a row's angles). */
struct qk_job {
	pt_fwd *f;
	const struct pt_layer_weights *L;
	uint32_t il;
	bool gated;
	uint32_t n_rot;
	float base;
	const float *ff;
};

static void qk_task(void *ctx, uint32_t r0, uint32_t r1, uint32_t worker)
{
	const struct qk_job *j = ctx;
	pt_fwd *f = j->f;
	const struct pt_hparams *hp = &f->m->hp;
	const struct pt_layer_weights *L = j->L;
	const uint32_t il = j->il, n_head = hp->n_head, n_kv = hp->n_head_kv[il];
	const uint32_t hd_k = pt_hparams_head_dim_k(hp, il), hd_v = pt_hparams_head_dim_v(hp, il);
	const uint32_t nq = n_head * hd_k;
	float *cs = f->rope_cs + (size_t)worker * f->rope_cs_n;
	for (uint32_t r = r0; r < r1; r++) {
		float *q = f->q + (size_t)r * f->w_qk, *k = f->k + (size_t)r * f->n_k;
		float *v = f->v + (size_t)r * f->w_v;
		for (uint32_t h = 0; j->gated && h < n_head; h++) {
			memcpy(f->agate + (size_t)r * nq + (size_t)h * hd_k, q + (size_t)h * 2 * hd_k + hd_k,
			       hd_k * sizeof(float));
			memmove(q + (size_t)h * hd_k, q + (size_t)h * 2 * hd_k, hd_k * sizeof(float));
		}
		if (L->bq)
			add_rows(q, L->bq, (size_t)n_head * hd_k);
		if (L->bk)
			add_rows(k, L->bk, (size_t)n_kv * hd_k);
		if (L->bv)
			add_rows(v, L->bv, (size_t)n_kv * hd_v);
		if (L->q_norm)
			pt_op_rmsnorm_heads(q, L->q_norm, (int)n_head, (int)hd_k, hp->rms_eps);
		if (L->k_norm)
			pt_op_rmsnorm_heads(k, L->k_norm, (int)n_kv, (int)hd_k, hp->rms_eps);
		if (f->rc->v_norm)
			pt_op_rmsnorm_heads(v, NULL, (int)n_kv, (int)hd_v, hp->rms_eps);
		if (f->yarn_layers)
			pt_op_rope_cache_yarn(cs, (int)j->n_rot, f->rpos[r], j->base, j->ff,
					      &f->yarn_layers[il]);
		else
			pt_op_rope_cache(cs, (int)j->n_rot, f->rpos[r], j->base, j->ff);
		pt_op_rope_apply(q, (int)n_head, (int)hd_k, (int)j->n_rot, PT_ROPE_NEOX, cs);
		pt_op_rope_apply(k, (int)n_kv, (int)hd_k, (int)j->n_rot, PT_ROPE_NEOX, cs);
	}
}

/* Rows [r0 + a, r0 + b) of a pass into their sequences' caches (each row its own slot). */
struct store_job {
	pt_fwd *f;
	uint32_t il, r0;
};

static void store_task(void *ctx, uint32_t a, uint32_t b, uint32_t worker)
{
	const struct store_job *j = ctx;
	pt_fwd *f = j->f;
	(void)worker;
	for (uint32_t r = j->r0 + a; r < j->r0 + b; r++)
		pt_kv_store(&f->seqs[f->rseq[r]].kv, j->il, f->rpos[r], f->k + (size_t)r * f->n_k,
			    f->v + (size_t)r * f->w_v);
}

static enum pt_status attention(pt_fwd *f, uint32_t il, uint32_t n, struct pt_error *err)
{
	const struct pt_model *m = f->m;
	const struct pt_hparams *hp = &m->hp;
	const struct pt_layer_weights *L = &m->layers[il];
	const uint32_t n_head = hp->n_head, n_kv = hp->n_head_kv[il];
	const uint32_t hd_k = pt_hparams_head_dim_k(hp, il), hd_v = pt_hparams_head_dim_v(hp, il);
	const struct pt_arch_recipe *rc = f->rc;
	const bool swa = hp->is_swa[il];
	const uint32_t n_rot = swa ? hp->n_rot_swa : hp->n_rot;
	const float base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
	const float *ff = (!swa && rc->rope_freqs_full) ? m->rope_freqs : m->rope_sect_ff;

	const bool gated = rc->attn_out_gate;
	const uint32_t nq = n_head * hd_k;

	norm_rows(f, f->h, f->x, L->attn_norm, n, hp->n_embd, hp->rms_eps);
	enum pt_status st = qkv_proj(f, L, n, gated ? 2 * nq : nq, n_kv * hd_k, n_kv * hd_v, err);
	if (st != PT_OK)
		return st;
	struct qk_job j = { f, L, il, gated, n_rot, base, ff };
	par_rows(f, n, PAR_ROWS, qk_task, &j);
	/* a sliding ring holds n_swa + swa_rows - 1 keys: store and attend in passes of
	 * swa_rows rows, so every query still finds its window (full layers: one pass) */
	const uint32_t pass = swa && hp->n_swa > 0 ? f->swa_rows : n;
	for (uint32_t r0 = 0; r0 < n; r0 += pass) {
		const uint32_t np = n - r0 < pass ? n - r0 : pass;
		struct store_job sj = { f, il, r0 };
		par_rows(f, np, PAR_ROWS, store_task, &sj);
		attend(f, il, r0, np, n, n_head, n_kv, hd_k, hd_v,
		       rc->attn_scale > 0.0f ? rc->attn_scale : 1.0f / sqrtf((float)hd_k));
	}
	/* the output gate: attention output times sigmoid(gate), element by element */
	for (uint32_t r = 0; gated && r < n; r++) {
		float *o = f->att + (size_t)r * f->w_qk;
		const float *gt = f->agate + (size_t)r * nq;
		for (uint32_t i = 0; i < n_head * hd_v; i++)
			o[i] *= pt_op_sigmoid(gt[i]);
	}
	/* attn output rows have stride w_qk; the projection wants packed rows */
	const uint32_t w_att = n_head * hd_v;
	for (uint32_t r = 1; r < n && w_att != f->w_qk; r++)
		memmove(f->att + (size_t)r * w_att, f->att + (size_t)r * f->w_qk,
			w_att * sizeof(float));
	st = mm(f, &L->wo, f->att, n, f->t1, err);
	if (st != PT_OK)
		return st;
	for (uint32_t r = 0; L->bo && r < n; r++)
		add_rows(f->t1 + (size_t)r * hp->n_embd, L->bo, hp->n_embd);
	if (L->post_attn_norm)
		norm_rows(f, f->t1, f->t1, L->post_attn_norm, n, hp->n_embd, hp->rms_eps);
	add_rows_par(f, f->x, f->t1, n, hp->n_embd, NULL);
	return PT_OK;
}

/* Linear attention, one task per value head: every row of the chunk in order through the
 * delta rule on its own sequence's state (token by token, or in the chunked form when the
 * chunk is a prefill of at least dn_chunk_min rows of one sequence). */
struct dn_task {
	pt_fwd *f;
	uint32_t il, n;
	bool chunked; /* dn_head_fn: the chunked form */
	bool out;     /* dn_rows_fn: the output norm (else the q/k norms and gates) */
};

static void dn_head_fn(void *ctx, uint32_t h, uint32_t worker)
{
	const struct dn_task *t = ctx;
	pt_fwd *f = t->f;
	const struct pt_dn_geom *g = &f->dn;
	const size_t C = g->conv_dim, V = (size_t)g->n_v * g->d_v, K = (size_t)g->n_k * g->d_k;
	const size_t conv_floats = (size_t)(g->d_conv - 1) * C, S_floats = (size_t)g->d_v * g->d_k;
	const uint32_t kh = pt_dn_key_head(g, h);
	const float *q = f->lin_y + (size_t)kh * g->d_k, *k = q + K;
	const float *v = f->lin_y + 2 * K + (size_t)h * g->d_v;
	if (t->chunked) {
		float *S = f->seqs[f->rseq[0]].rs + f->rs_off[t->il] + conv_floats + h * S_floats;
		pt_dn_chunk(g, S, t->n, q, k, C, v, C, f->lin_a + h, f->lin_b + h, g->n_v,
			    f->lin_o + (size_t)h * g->d_v, V,
			    f->dn_scratch + (size_t)worker * f->dn_scratch_n);
		return;
	}
	for (uint32_t r = 0; r < t->n; r++) {
		float *S = f->seqs[f->rseq[r]].rs + f->rs_off[t->il] + conv_floats + h * S_floats;
		pt_dn_step(g, S, q + r * C, k + r * C, v + r * C, f->lin_a[(size_t)r * g->n_v + h],
			   f->lin_b[(size_t)r * g->n_v + h], f->lin_o + r * V + (size_t)h * g->d_v);
	}
}

/* Channels per conv task: channels are independent, rows run in order within a task (each
 * on its own sequence's window), so any split gives the same bytes. */
#define DN_CONV_SPAN 128

static void dn_conv_fn(void *ctx, uint32_t i, uint32_t worker)
{
	(void)worker;
	const struct dn_task *t = ctx;
	pt_fwd *f = t->f;
	const struct pt_dn_geom *g = &f->dn;
	const size_t C = g->conv_dim;
	const uint32_t c0 = i * DN_CONV_SPAN;
	const uint32_t c1 = c0 + DN_CONV_SPAN < g->conv_dim ? c0 + DN_CONV_SPAN : g->conv_dim;
	const float *w = f->m->layers[t->il].ssm_conv1d;
	for (uint32_t r = 0; r < t->n; r++)
		pt_dn_conv_span(g, w, f->seqs[f->rseq[r]].rs + f->rs_off[t->il],
				f->lin_qkv + r * C, f->lin_y + r * C, c0, c1);
}

/* Per row: q/k L2 norms and the gates (before the delta rule), or the gated output norm
 * (after it). */
static void dn_rows_fn(void *ctx, uint32_t r, uint32_t worker)
{
	(void)worker;
	const struct dn_task *t = ctx;
	pt_fwd *f = t->f;
	const struct pt_dn_geom *g = &f->dn;
	const struct pt_layer_weights *L = &f->m->layers[t->il];
	const size_t V = (size_t)g->n_v * g->d_v;
	if (t->out) {
		pt_dn_out_norm(g, f->lin_o + r * V, L->ssm_norm, f->lin_z + r * V,
			       f->m->hp.rms_eps);
		return;
	}
	pt_dn_qk_norm(g, f->lin_y + r * g->conv_dim);
	pt_dn_gates(g, L->ssm_dt, L->ssm_a, f->lin_b + (size_t)r * g->n_v,
		    f->lin_a + (size_t)r * g->n_v);
}

/* A Gated DeltaNet layer (ARCHITECTURES-NEXT.md 4.3): projections over the chunk, the
 * conv (tasks over channel spans), norms and gates (tasks over rows), the delta rule per
 * value head, the gated output norm (tasks over rows), ssm_out, residual. */
static enum pt_status linear_attention(pt_fwd *f, uint32_t il, uint32_t n,
				       struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const struct pt_layer_weights *L = &f->m->layers[il];
	const struct pt_dn_geom *g = &f->dn;
	norm_rows(f, f->h, f->x, L->attn_norm, n, hp->n_embd, hp->rms_eps);
	struct act_once a = { 0 };
	enum pt_status st = mm_once(f, &a, &L->ssm_qkv, f->h, n, f->lin_qkv, err);
	if (st == PT_OK)
		st = mm_once(f, &a, &L->ssm_z, f->h, n, f->lin_z, err);
	if (st == PT_OK)
		st = mm_once(f, &a, &L->ssm_beta, f->h, n, f->lin_b, err);
	if (st == PT_OK)
		st = mm_once(f, &a, &L->ssm_alpha, f->h, n, f->lin_a, err);
	if (st != PT_OK)
		return st;
	struct dn_task t = { f, il, n, false, false };
	pt_pool_run(f->pool, dn_conv_fn, &t, (g->conv_dim + DN_CONV_SPAN - 1) / DN_CONV_SPAN);
	pt_pool_run(f->pool, dn_rows_fn, &t, n);
	t.chunked = !f->decode_rows && f->dn_chunk_min && n >= f->dn_chunk_min;
	pt_pool_run(f->pool, dn_head_fn, &t, g->n_v);
	t.out = true;
	pt_pool_run(f->pool, dn_rows_fn, &t, n);
	st = mm(f, &L->ssm_out, f->lin_o, n, f->t1, err);
	if (st == PT_OK)
		add_rows_par(f, f->x, f->t1, n, hp->n_embd, NULL);
	return st;
}

/* out = down(act(gate x) * (up x)) for n rows of in (width n_embd). */
static enum pt_status mlp(pt_fwd *f, const struct pt_kern_mat *g, const struct pt_kern_mat *u,
			  const struct pt_kern_mat *d, const float *in, uint32_t n, float *out,
			  struct pt_error *err)
{
	const uint32_t nf = (uint32_t)g->rows;
	if (n == 1) { /* decode: gate, up and the activation in one dispatch */
		struct xq_cache c = { .buf = f->xqb, .x = in };
		struct pt_kern_glu gs = { *g, *u, xq_of(&c, g), xq_of(&c, u), f->gate, NULL,
					  NULL };
		if (!gs.xq || !gs.xq_up)
			return no_xq(gs.xq ? u : g, err);
		enum pt_status st = pt_kern_glu_set(&gs, 1, glu_fn(f), f->pool, err);
		return st == PT_OK ? mm(f, d, f->gate, 1, out, err) : st;
	}
	struct act_once a = { 0 };
	enum pt_status st = mm_once(f, &a, g, in, n, f->gate, err);
	if (st == PT_OK)
		st = mm_once(f, &a, u, in, n, f->up, err);
	if (st != PT_OK)
		return st;
	glu_rows(f, glu_fn(f), f->gate, nf, f->gate, f->up, nf, nf, n);
	return mm(f, d, f->gate, n, out, err);
}


/* Routes one row of router logits into ids / w (k each). */
static void route_row(pt_fwd *f, const struct pt_layer_weights *L, float *logits, int *ids,
		      float *w)
{
	const struct pt_hparams *hp = &f->m->hp;
	enum pt_op_gating gating = (enum pt_op_gating)hp->gating;
	bool norm = hp->expert_weights_norm;
	float scale = hp->expert_weights_scale;
	if (L->router_b) /* ffn_gate_inp.bias: part of the logits, before any gating */
		add_rows(logits, L->router_b, hp->n_expert);
	if (!f->rc->route_from_keys && f->rc->route_softmax_weight) {
		/* top-k of the raw logits, softmax over the k, no normalisation */
		gating = PT_OP_GATING_SOFTMAX_WEIGHT;
		norm = false;
	} else if (!f->rc->route_from_keys) {
		/* the arch's graph hard-codes softmax, normalisation and no scale */
		gating = PT_OP_GATING_SOFTMAX;
		norm = true;
		scale = 0.0f;
	}
	/* group-limited selection whenever the file has groups (build_moe_ffn) */
	const int groups = f->rc->route_from_keys ? (int)hp->n_expert_groups : 0;
	pt_op_moe_route_groups(logits, (int)hp->n_expert, gating, L->exp_probs_b, groups,
			       (int)hp->n_group_used, (int)hp->n_expert_used, norm, scale, f->sel,
			       ids, w);
}

/* Router weights for n rows of f->rl into f->ids / f->rw. */
static void route(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n)
{
	const uint32_t E = f->m->hp.n_expert, k = f->m->hp.n_expert_used;
	for (uint32_t r = 0; r < n; r++)
		route_row(f, L, f->rl + (size_t)r * E, f->ids + (size_t)r * k, f->rw + (size_t)r * k);
}

/* The scaled-residual router input (Gemma 4): the weightless RMSNorm of x times 1/sqrt(n_embd) times
 * ffn_gate_inp.scale, into out (n rows). */
static void scaled_router_in(pt_fwd *f, const struct pt_layer_weights *L, const float *x,
			     float *out, uint32_t n)
{
	const struct pt_hparams *hp = &f->m->hp;
	const uint32_t D = hp->n_embd;
	const float c = 1.0f / sqrtf((float)D);
	norm_rows(f, out, x, NULL, n, D, hp->rms_eps);
	for (uint32_t r = 0; r < n; r++) {
		float *v = out + (size_t)r * D;
		for (uint32_t i = 0; i < D; i++)
			v[i] = (v[i] * c) * L->router_scale[i];
	}
}

/* Decode read-ahead: predicts the next layer's experts by applying its router (and its own
 * router-input norm) to this layer's residual f->x, and lets the provider start reading
 * them now, so this layer's tail and the next layer's attention overlap reads (FATE-style;
 * docs/PERFORMANCE.md has the hit rate of the guess and the waste).  Only which reads start
 * early depends on it, never a result.  A decode batch guesses for each of its n rows and
 * hands on the distinct experts (at most AHEAD_MAX). */
#define AHEAD_MAX 256
static void read_ahead(pt_fwd *f, uint32_t il, uint32_t n)
{
	const struct pt_hparams *hp = &f->m->hp;
	const uint32_t k = hp->n_expert_used, E = hp->n_expert;
	uint32_t ids[AHEAD_MAX], nu = 0;
	struct pt_error ignore = { 0 };
	if (!f->prov->ahead || il + 1 >= hp->n_layer || !f->m->layers[il + 1].is_moe || k > 64)
		return;
	const struct pt_layer_weights *N = &f->m->layers[il + 1];
	if (f->rc->router_in == PT_ROUTER_IN_SCALED_RESIDUAL)
		scaled_router_in(f, N, f->x, f->spec_x, n);
	else
		norm_rows(f, f->spec_x, f->x, N->ffn_norm, n, hp->n_embd, hp->rms_eps);
	if (mm(f, &N->router, f->spec_x, n, f->spec_l, &ignore) != PT_OK)
		return; /* a guess: nothing to report */
	for (uint32_t r = 0; r < n; r++) {
		int *ri = f->spec_ids + (size_t)r * k;
		route_row(f, N, f->spec_l + (size_t)r * E, ri, f->spec_w + (size_t)r * k);
		for (uint32_t j = 0; j < k && nu < AHEAD_MAX; j++) {
			uint32_t u = 0;
			while (u < nu && ids[u] != (uint32_t)ri[j])
				u++;
			if (u == nu)
				ids[nu++] = (uint32_t)ri[j];
		}
	}
	f->prov->ahead(f->prov->ctx, il + 1, ids, nu);
}

static struct pt_kern_mat expert_mat(const struct pt_expert_mat *x, const void *data)
{
	struct pt_kern_mat k = { x->type, x->rows, x->cols, x->row_bytes, data, x->layout };
	return k;
}

/* An expert's gate/up product on its gathered rows: the pre-quantized ones (f->xgq) when
 * the layer's input was quantized once (the same bytes pt_kern_matmul would make from
 * f->xg), else the float rows f->xg. */
static enum pt_status mm_in(pt_fwd *f, const struct pt_kern_mat *w, uint32_t cnt, float *y,
			    struct pt_error *err)
{
	if (f->xin_on)
		return pt_kern_matmul_q(w, f->xgq, cnt, y, f->pool, err);
	return mm(f, w, f->xg, cnt, y, err);
}

/* Bytes of one row of a layer's expert input quantized once for every gate and up product,
 * or 0 where its gate/up types do not share one quantized partner format. */
static size_t xin_row_of(const struct pt_layer_weights *L)
{
	const bool fused = L->gate_up_exps.data != NULL;
	const struct pt_expert_mat *g = fused ? &L->gate_up_exps : &L->gate_exps;
	const struct pt_kern_mat gm = expert_mat(g, g->data);
	const struct pt_kern_ops *og = pt_kern_ops(g->type);
	const struct pt_kern_ops *ou = fused ? og : pt_kern_ops(L->up_exps.type);
	if (!og || !ou || og->act_type != ou->act_type || og->act_type == PT_TYPE_F32 ||
	    (!fused && L->up_exps.cols != g->cols))
		return 0;
	return pt_kern_act_bytes(&gm, 1);
}

/* Prefill: the n rows of in quantized once into f->xin for every routed expert's gate and
 * up products (row by row, so the bytes equal pt_kern_matmul's on the gathered rows), when
 * the layer's gate/up types share one quantized partner format. */
static void quant_expert_input(pt_fwd *f, const struct pt_layer_weights *L, const float *in,
			       uint32_t n)
{
	const bool fused = L->gate_up_exps.data != NULL;
	const struct pt_expert_mat *g = fused ? &L->gate_up_exps : &L->gate_exps;
	f->xin_on = false;
	f->xin_row = n < 2 ? 0 : xin_row_of(L);
	if (f->xin_row == 0 || f->xin_row > f->xq_row)
		return;
	quant_rows(f, pt_kern_ops(g->type)->act_type, in, n, g->cols, f->xin, f->xin_row);
	f->xin_on = true;
}

/* Gathered rows f->xg[cnt] through expert e: out[cnt][n_embd] = down(act(gate) * up). */
static enum pt_status expert_ffn(pt_fwd *f, const struct pt_layer_weights *L,
				 const struct pt_expert_ptrs *p, uint32_t cnt, float *out,
				 struct pt_error *err)
{
	const pt_kern_glu_fn glu = glu_fn(f);
	uint32_t nf;
	enum pt_status st;
	if (p->up) {
		const struct pt_kern_mat g = expert_mat(&L->gate_exps, p->gate);
		const struct pt_kern_mat u = expert_mat(&L->up_exps, p->up);
		nf = (uint32_t)g.rows;
		st = mm_in(f, &g, cnt, f->gate, err);
		if (st == PT_OK)
			st = mm_in(f, &u, cnt, f->up, err);
		if (st != PT_OK)
			return st;
		for (uint32_t c = 0; p->gate_b && c < cnt; c++)
			add_rows(f->gate + (size_t)c * nf, p->gate_b, nf);
		for (uint32_t c = 0; p->up_b && c < cnt; c++)
			add_rows(f->up + (size_t)c * nf, p->up_b, nf);
		glu_rows(f, glu, f->gate, nf, f->gate, f->up, nf, nf, cnt);
	} else {
		const struct pt_kern_mat gu = expert_mat(&L->gate_up_exps, p->gate);
		nf = (uint32_t)(gu.rows / 2);
		st = mm_in(f, &gu, cnt, f->up, err);
		if (st != PT_OK)
			return st;
		/* fused rows: first nf outputs are gate, next nf are up; row c's result goes to
		 * gate row c, which never overlaps a later row's inputs */
		glu_rows(f, glu, f->gate, nf, f->up, f->up + nf, 2 * (size_t)nf, nf, cnt);
	}
	const struct pt_kern_mat d = expert_mat(&L->down_exps, p->down);
	st = mm(f, &d, f->gate, cnt, out, err);
	for (uint32_t c = 0; st == PT_OK && p->down_b && c < cnt; c++)
		add_rows(out + (size_t)c * d.rows, p->down_b, d.rows);
	return st;
}

/* dst = (y * s) * w, or y * w without a per-expert scale s (the loop split so each
 * vectorizes). */
static void scale_row(float *restrict dst, const float *restrict y, uint32_t D,
		      const float *s, float w)
{
	if (s) {
		const float sv = *s;
		BLOCK8(i, D, dst[i] = (y[i] * sv) * w);
	} else {
		BLOCK8(i, D, dst[i] = y[i] * w);
	}
}

/* The routed (row, rank) slots of each expert e in ascending order, f->rows[f->eoff[e] ..
 * f->eoff[e + 1]) (a counting sort), and the distinct experts in order of first use in
 * f->uni; returns their number. */
static uint32_t sort_rows(pt_fwd *f, uint32_t n_ids)
{
	const uint32_t E = f->m->hp.n_expert;
	uint32_t nu = 0;
	memset(f->eoff, 0, ((size_t)E + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < n_ids; i++)
		if (f->eoff[f->ids[i] + 1]++ == 0)
			f->uni[nu++] = (uint32_t)f->ids[i];
	for (uint32_t e = 0; e < E; e++)
		f->eoff[e + 1] += f->eoff[e];
	for (uint32_t i = 0; i < n_ids; i++) /* eoff[e] becomes the end of e's run */
		f->rows[f->eoff[f->ids[i]]++] = (int)i;
	for (uint32_t e = E; e > 0; e--)
		f->eoff[e] = f->eoff[e - 1];
	f->eoff[0] = 0;
	return nu;
}

/* Expert e over the rows of in that chose it: gather, fetch, compute, scatter each row's
 * weighted output into its own rank slot of f->yk (summed later in rank order, so results
 * do not depend on the order experts are computed in).  With f->yk_sorted (prefill) the
 * down product writes the unweighted outputs straight into yk rows eoff[e] .. (expert
 * order), and the rank-order sum applies the weights: no copy through f->t3 and no
 * separate weighting pass over the slots. */
static enum pt_status one_expert(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				 uint32_t e, const float *in, struct pt_error *err)
{
	const uint32_t k = f->m->hp.n_expert_used, D = f->m->hp.n_embd;
	const int *rows = f->rows + f->eoff[e];
	const uint32_t cnt = f->eoff[e + 1] - f->eoff[e];
	for (uint32_t c = 0; c < cnt && f->xin_on; c++)
		memcpy(f->xgq + (size_t)c * f->xin_row, f->xin + (size_t)(rows[c] / k) * f->xin_row,
		       f->xin_row);
	for (uint32_t c = 0; c < cnt && !f->xin_on; c++)
		memcpy(f->xg + (size_t)c * D, in + (size_t)(rows[c] / k) * D, D * sizeof(float));
	struct pt_expert_ptrs p;
	enum pt_status st = f->prov->get(f->prov->ctx, il, e, &p, err);
	if (st != PT_OK)
		return st;
	f->expert_gets++;
	st = expert_ffn(f, L, &p, cnt, f->yk_sorted ? f->yk + (size_t)f->eoff[e] * D : f->t3,
			err);
	if (f->prov->release)
		f->prov->release(f->prov->ctx, il, e);
	if (st != PT_OK || f->yk_sorted)
		return st;
	for (uint32_t c = 0; c < cnt; c++)
		scale_row(f->yk + (size_t)rows[c] * D, f->t3 + (size_t)c * D, D,
			  L->down_exps_scale ? &L->down_exps_scale[e] : NULL, f->rw[rows[c]]);
	return PT_OK;
}

/* Between a decode group's products: the provider starts the reads waiting for this
 * layer's misses to land (the next layer's guesses), instead of at the next group. */
static void poll_reads(pt_fwd *f)
{
	if (f->prov->poll)
		f->prov->poll(f->prov->ctx);
}

/* Decode (one row): the gate/up/activation of every expert of a group (and of sh, an
 * always-on FFN folded in) in one dispatch, every down product in a second.  Each product
 * is the same dot calls on the same quantized bytes as expert_ffn makes, so the outputs are
 * bit-identical to one expert at a time.  Down outputs go to f->dy[j] (sh: sh->out). */
static enum pt_status group_ffn(pt_fwd *f, const struct pt_layer_weights *L,
				const struct pt_expert_ptrs *p, uint32_t ne, const float *in,
				const struct ffn_ref *sh, struct pt_error *err)
{
	struct pt_kern_glu gs[PT_KERN_SET_MAX];
	struct pt_kern_mv ds[PT_KERN_SET_MAX];
	struct xq_cache c = { .buf = f->xqb, .x = in }, cs = { .buf = f->xqb + XQ_FORMATS };
	const uint32_t D = f->m->hp.n_embd, ns = ne + (sh ? 1 : 0);
	for (uint32_t j = 0; j < ne; j++) {
		const bool fused = !p[j].up;
		gs[j].gate = expert_mat(fused ? &L->gate_up_exps : &L->gate_exps, p[j].gate);
		gs[j].up = fused ? (struct pt_kern_mat){ 0 } : expert_mat(&L->up_exps, p[j].up);
		gs[j].xq = xq_of(&c, &gs[j].gate);
		gs[j].xq_up = fused ? gs[j].xq : xq_of(&c, &gs[j].up);
		gs[j].y = f->dg + (size_t)j * f->w_ff;
		gs[j].bias_gate = p[j].gate_b;
		gs[j].bias_up = p[j].up_b;
		ds[j] = (struct pt_kern_mv){ expert_mat(&L->down_exps, p[j].down), NULL,
					     f->dy + (size_t)j * D };
	}
	if (sh) {
		cs.x = sh->in;
		gs[ne] = (struct pt_kern_glu){ *sh->g, *sh->u, xq_of(&cs, sh->g), xq_of(&cs, sh->u),
					       f->dg + (size_t)ne * f->w_ff, NULL, NULL };
		ds[ne] = (struct pt_kern_mv){ *sh->d, NULL, sh->out };
	}
	for (uint32_t j = 0; j < ns; j++)
		if (!gs[j].xq || !gs[j].xq_up)
			return no_xq(gs[j].xq ? &gs[j].up : &gs[j].gate, err);
	enum pt_status st = pt_kern_glu_set(gs, ns, glu_fn(f), f->pool, err);
	poll_reads(f);
	for (uint32_t j = 0; st == PT_OK && j < ns; j++) {
		const struct pt_kern_ops *ops = pt_kern_ops(ds[j].w.type);
		if (!ops)
			return no_xq(&ds[j].w, err);
		ds[j].xq = gs[j].y;
		if (ops->act_type != PT_TYPE_F32) {
			ds[j].xq = f->xqd + (size_t)j * f->xq_row;
			pt_kern_quantize_row(ops->act_type, gs[j].y, f->xqd + (size_t)j * f->xq_row,
					     ds[j].w.cols);
		}
	}
	if (st == PT_OK)
		st = pt_kern_matvec_set(ds, ns, f->pool, err);
	for (uint32_t j = 0; st == PT_OK && j < ne; j++)
		if (p[j].down_b)
			add_rows(f->dy + (size_t)j * D, p[j].down_b, D);
	if (st == PT_OK && sh && sh->post_norm)
		norm_rows(f, sh->out, sh->out, sh->post_norm, 1, D, f->m->hp.rms_eps);
	return st;
}

/* Decode: a group of experts ready together (ex[ne], ne <= f->group_max - 1): fetch all,
 * group_ffn, release all, then each expert's weighted output into its rank slot of f->yk
 * exactly as one_expert writes it. */
static enum pt_status expert_group(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				   const uint32_t *ex, uint32_t ne, const float *in,
				   const struct ffn_ref *sh, struct pt_error *err)
{
	const uint32_t k = f->m->hp.n_expert_used, D = f->m->hp.n_embd;
	struct pt_expert_ptrs p[PT_KERN_SET_MAX];
	enum pt_status st = PT_OK;
	uint32_t got = 0;
	while (got < ne && (st = f->prov->get(f->prov->ctx, il, ex[got], &p[got], err)) == PT_OK)
		got++;
	f->expert_gets += got;
	if (st == PT_OK)
		st = group_ffn(f, L, p, ne, in, sh, err);
	for (uint32_t j = 0; f->prov->release && j < got; j++)
		f->prov->release(f->prov->ctx, il, ex[j]);
	for (uint32_t j = 0; st == PT_OK && j < ne; j++) {
		const float s = L->down_exps_scale ? L->down_exps_scale[ex[j]] : 1.0f;
		const float *y = f->dy + (size_t)j * D;
		for (uint32_t r = 0; r < k; r++) {
			if (f->ids[r] != (int)ex[j])
				continue;
			const float w = f->rw[r];
			float *dst = f->yk + (size_t)r * D;
			for (uint32_t i = 0; i < D; i++)
				dst[i] = L->down_exps_scale ? (y[i] * s) * w : y[i] * w;
		}
	}
	return st;
}

/* Work overlapped with the expert reads of the first wave (shared expert, dense MLP). */
typedef enum pt_status (*overlap_fn)(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
				     struct pt_error *err);

static enum pt_status shared_expert(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
				    struct pt_error *err);
static enum pt_status parallel_dense(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
				     struct pt_error *err);

/* The overlapped work as an FFN to fold into the first decode group (false: run it apart). */
static bool fold_overlap(pt_fwd *f, const struct pt_layer_weights *L, overlap_fn overlap,
			 struct ffn_ref *sh)
{
	if (overlap == shared_expert)
		*sh = (struct ffn_ref){ &L->sh_gate, &L->sh_up, &L->sh_down, f->h, f->t2, NULL };
	else if (overlap == parallel_dense)
		*sh = (struct ffn_ref){ &L->ffn_gate, &L->ffn_up, &L->ffn_down, f->h, f->t1,
					L->post_ffw_norm_1 };
	return overlap == shared_expert || overlap == parallel_dense;
}

/* Decode wave: the experts in groups, each group what is ready behind one blocking next
 * (with the mapping or all hits: the whole wave in one group). */
static enum pt_status wave_grouped(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				   const uint32_t *ex, uint32_t cnt, const float *in,
				   const struct ffn_ref *sh, struct pt_error *err)
{
	const struct pt_expert_provider *pv = f->prov;
	uint32_t grp[PT_KERN_SET_MAX], done = 0;
	enum pt_status st = PT_OK;
	if (!(pv->prefetch && pv->next))
		return expert_group(f, L, il, ex, cnt, in, sh, err);
	while (st == PT_OK && done < cnt) {
		uint32_t ng = 0;
		bool got = true;
		st = pv->next(pv->ctx, &grp[0], &got, err);
		if (st == PT_OK && !got)
			st = pt_error_set(err, PT_E_IO, "layer %u: %u of %u experts never became ready",
					  il, cnt - done, cnt);
		for (ng = 1; st == PT_OK && pv->ready && done + ng < cnt; ng++) {
			st = pv->ready(pv->ctx, &grp[ng], &got, err);
			if (!got)
				break;
		}
		if (st == PT_OK)
			st = expert_group(f, L, il, grp, ng, in, sh, err);
		sh = NULL;
		done += ng;
	}
	return st;
}

/* Decode batch: the experts ex[ne] (fetched together) over their rows as one set of
 * single-row products per (expert, row): gate/up/activation in one dispatch, downs in a
 * second.  Inputs are the rows' quantized layer input (f->xin); every product is the dot
 * calls on the bytes one_expert's matmul would use, so each row's output is bit-identical,
 * and is scattered into its rank slot of f->yk exactly as one_expert does. */
static enum pt_status rows_group(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				 const uint32_t *ex, uint32_t ne, struct pt_error *err)
{
	const uint32_t k = f->m->hp.n_expert_used, D = f->m->hp.n_embd;
	struct pt_kern_glu gs[PT_KERN_SET_MAX] = { 0 };
	struct pt_kern_mv ds[PT_KERN_SET_MAX] = { 0 };
	struct pt_expert_ptrs p[PT_KERN_SET_MAX];
	int slot_of_entry[PT_KERN_SET_MAX];
	const float *down_b[PT_KERN_SET_MAX];
	for (uint32_t j = 0, total = 0; j < ne; j++) /* wave_rows's invariant */
		if ((total += f->eoff[ex[j] + 1] - f->eoff[ex[j]]) > PT_KERN_SET_MAX)
			return pt_error_set(err, PT_E_INVALID, "forward: expert group too large");
	uint32_t got = 0, m = 0;
	enum pt_status st = PT_OK;
	while (got < ne && (st = f->prov->get(f->prov->ctx, il, ex[got], &p[got], err)) == PT_OK)
		got++;
	f->expert_gets += got;
	for (uint32_t j = 0; st == PT_OK && j < ne; j++) {
		const bool fused = !p[j].up;
		const struct pt_kern_mat g = expert_mat(fused ? &L->gate_up_exps : &L->gate_exps,
							p[j].gate);
		const struct pt_kern_mat u = fused ? (struct pt_kern_mat){ 0 }
						   : expert_mat(&L->up_exps, p[j].up);
		const struct pt_kern_mat d = expert_mat(&L->down_exps, p[j].down);
		for (uint32_t c = f->eoff[ex[j]]; c < f->eoff[ex[j] + 1]; c++, m++) {
			const uint8_t *xq = f->xin + (size_t)(f->rows[c] / k) * f->xin_row;
			gs[m] = (struct pt_kern_glu){ g, u, xq, xq, f->bdg + (size_t)m * f->w_ff,
						      p[j].gate_b, p[j].up_b };
			ds[m] = (struct pt_kern_mv){ d, NULL, f->bdy + (size_t)m * D };
			down_b[m] = p[j].down_b;
			slot_of_entry[m] = f->rows[c];
		}
	}
	if (st == PT_OK)
		st = pt_kern_glu_set(gs, m, glu_fn(f), f->pool, err);
	poll_reads(f);
	for (uint32_t j = 0; st == PT_OK && j < m; j++) {
		const struct pt_kern_ops *ops = pt_kern_ops(ds[j].w.type);
		if (!ops) {
			st = no_xq(&ds[j].w, err);
			break;
		}
		ds[j].xq = gs[j].y;
		if (ops->act_type != PT_TYPE_F32) {
			ds[j].xq = f->bxqd + (size_t)j * f->xq_row;
			pt_kern_quantize_row(ops->act_type, gs[j].y, f->bxqd + (size_t)j * f->xq_row,
					     ds[j].w.cols);
		}
	}
	if (st == PT_OK)
		st = pt_kern_matvec_set(ds, m, f->pool, err);
	for (uint32_t j = 0; st == PT_OK && j < m; j++)
		if (down_b[j])
			add_rows(f->bdy + (size_t)j * D, down_b[j], D);
	for (uint32_t j = 0; f->prov->release && j < got; j++)
		f->prov->release(f->prov->ctx, il, ex[j]);
	for (uint32_t j = 0, m2 = 0; st == PT_OK && j < ne; j++) {
		const float *sc = L->down_exps_scale ? &L->down_exps_scale[ex[j]] : NULL;
		for (uint32_t c = f->eoff[ex[j]]; c < f->eoff[ex[j] + 1]; c++, m2++)
			scale_row(f->yk + (size_t)slot_of_entry[m2] * D, f->bdy + (size_t)m2 * D, D,
				  sc, f->rw[slot_of_entry[m2]]);
	}
	return st;
}

/* Rows routed to e on this layer. */
static uint32_t rows_of(const pt_fwd *f, uint32_t e)
{
	return f->eoff[e + 1] - f->eoff[e];
}

/* Decode-batch wave: experts as they are ready, in groups of at most PT_KERN_SET_MAX
 * (expert, row) products (an expert with more rows than that runs alone, by one_expert). */
static enum pt_status wave_rows(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				const uint32_t *ex, uint32_t cnt, const float *in,
				struct pt_error *err)
{
	const struct pt_expert_provider *pv = f->prov;
	const bool stream = pv->prefetch && pv->next;
	const uint32_t none = UINT32_MAX;
	uint32_t carry = none, done = 0;
	enum pt_status st = PT_OK;
	while (st == PT_OK && done < cnt) {
		uint32_t grp[PT_KERN_SET_MAX], ng = 0, ent = 0;
		while (st == PT_OK && done + ng < cnt && ent < PT_KERN_SET_MAX) {
			uint32_t e = ex[done + ng];
			bool got = true;
			if (carry != none) {
				e = carry;
				carry = none;
			} else if (stream && ng == 0) {
				st = pv->next(pv->ctx, &e, &got, err);
				if (st == PT_OK && !got)
					st = pt_error_set(err, PT_E_IO, "layer %u: %u of %u experts "
							  "never became ready", il, cnt - done, cnt);
			} else if (stream) {
				if (!pv->ready)
					break;
				st = pv->ready(pv->ctx, &e, &got, err);
				if (!got)
					break;
			}
			if (st != PT_OK)
				break;
			if (ng > 0 && ent + rows_of(f, e) > PT_KERN_SET_MAX) {
				if (stream)
					carry = e; /* taken from the provider: first of the next group */
				break;
			}
			grp[ng++] = e;
			ent += rows_of(f, e);
		}
		if (st != PT_OK)
			break;
		if (ng == 1 && ent > PT_KERN_SET_MAX)
			st = one_expert(f, L, il, grp[0], in, err);
		else
			st = rows_group(f, L, il, grp, ng, err);
		done += ng;
	}
	return st;
}

/* One wave: prefetch (reads of the misses in flight), the next wave handed to the provider's
 * read-ahead (read while this one computes), the overlapped work, then each expert as its
 * bytes are ready (hits first, misses in completion order).  Decode takes the grouped
 * path, with the overlapped FFN folded into the first group; a decode batch groups
 * (expert, row) products (wave_rows). */
static enum pt_status wave(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
			   const uint32_t *ex, uint32_t cnt, const float *in, uint32_t n,
			   overlap_fn overlap, const uint32_t *next, uint32_t next_cnt,
			   struct pt_error *err)
{
	const struct pt_expert_provider *pv = f->prov;
	const bool stream = pv->prefetch && pv->next;
	const bool grouped = n == 1 && cnt < f->group_max;
	const bool rows = n > 1 && f->decode_rows && f->xin_on && f->bdg;
	struct ffn_ref shr;
	bool folded = false;
	enum pt_status st = stream ? pv->prefetch(pv->ctx, il, ex, cnt, err) : PT_OK;
	if (st == PT_OK && stream && (n == 1 || f->decode_rows) && !f->ahead_done) {
		read_ahead(f, il, n);
		f->ahead_done = true; /* once per layer, after the first wave's reads went out */
	}
	if (st == PT_OK && stream && next_cnt && pv->ahead)
		pv->ahead(pv->ctx, il, next, next_cnt);
	if (st == PT_OK && overlap) {
		folded = grouped && cnt > 0 && fold_overlap(f, L, overlap, &shr);
		if (!folded)
			st = overlap(f, L, n, err);
	}
	if (st == PT_OK && grouped)
		st = wave_grouped(f, L, il, ex, cnt, in, folded ? &shr : NULL, err);
	if (st == PT_OK && rows)
		st = wave_rows(f, L, il, ex, cnt, in, err);
	for (uint32_t i = 0; st == PT_OK && !grouped && !rows && i < cnt; i++) {
		uint32_t e = ex[i];
		bool got = true;
		if (stream)
			st = pv->next(pv->ctx, &e, &got, err);
		if (st == PT_OK && !got)
			st = pt_error_set(err, PT_E_IO, "layer %u: %u of %u experts never became ready",
					  il, cnt - i, cnt);
		if (st == PT_OK)
			st = one_expert(f, L, il, e, in, err);
	}
	if (pv->end_layer)
		pv->end_layer(pv->ctx, il);
	return st;
}

/* dst += (y * s) * w, or y * w without a per-expert scale s: the same roundings as
 * scale_row into a slot followed by add_rows of that slot (no contraction: the build has
 * -ffp-contract=off). */
static void add_scaled_row(float *restrict dst, const float *restrict y, uint32_t D,
			   const float *s, float w)
{
	if (s) {
		const float sv = *s;
		BLOCK8(i, D, dst[i] = dst[i] + (y[i] * sv) * w);
	} else {
		BLOCK8(i, D, dst[i] = dst[i] + y[i] * w);
	}
}

struct sum_job {
	pt_fwd *f;
	const struct pt_layer_weights *L;
	uint32_t n, per;
	float *out;
};

/* Rows [task * per, ...) of sum_sorted: each row alone, so the split changes nothing. */
static void sum_sorted_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct sum_job *jb = ctx;
	const pt_fwd *f = jb->f;
	const uint32_t k = f->m->hp.n_expert_used, D = f->m->hp.n_embd;
	const uint32_t r0 = task * jb->per, r1 = r0 + jb->per < jb->n ? r0 + jb->per : jb->n;
	(void)worker;
	for (uint32_t r = r0; r < r1; r++) {
		float *o = jb->out + (size_t)r * D;
		for (uint32_t j = 0; j < k; j++) {
			const uint32_t slot = r * k + j;
			const float *y = f->yk + (size_t)f->slot_pos[slot] * D;
			const float *sc = jb->L->down_exps_scale
						  ? &jb->L->down_exps_scale[f->ids[slot]] : NULL;
			if (j == 0)
				scale_row(o, y, D, sc, f->rw[slot]);
			else
				add_scaled_row(o, y, D, sc, f->rw[slot]);
		}
	}
}

/* Prefill, outputs in expert order (f->yk_sorted): out[r] = the weighted outputs of row r's
 * ranks summed in rank order, bit-identical to weighting into rank slots and summing them;
 * rows split over the pool (a 2048-row chunk of the Sarvam shape reads ~200 MB of slots). */
static void sum_sorted(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n, float *out)
{
	const uint32_t k = f->m->hp.n_expert_used;
	for (uint32_t i = 0; i < n * k; i++)
		f->slot_pos[f->rows[i]] = i;
	struct sum_job jb = { f, L, n, 16, out };
	const uint32_t parts = 4 * pt_pool_threads(f->pool);
	if (n / parts > jb.per)
		jb.per = (n + parts - 1) / parts;
	pt_pool_run(f->pool, sum_sorted_task, &jb, (n + jb.per - 1) / jb.per);
}

/* Routed experts for n rows of in (routing already in f->ids / f->rw): the chunk's distinct
 * experts in waves that fit the provider's slots, each expert's weights fetched once;
 * out[r] = sum over ranks in rank order. */
static enum pt_status experts_run(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				  const float *in, uint32_t n, float *out, overlap_fn overlap,
				  struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const uint32_t k = hp->n_expert_used, D = hp->n_embd;
	uint32_t n_waves = 1;
	const uint32_t nu = sort_rows(f, n * k);
	/* the observer sees runs of consecutive positions: a decode batch row by row */
	for (uint32_t r = 0; f->on_route && r < n; r += f->decode_rows ? 1 : n)
		f->on_route(f->route_ctx, il, f->rpos[r], f->decode_rows ? 1 : n, k,
			    f->ids + (size_t)r * k);
	enum pt_status st = PT_OK;
	f->ahead_done = false;
	quant_expert_input(f, L, in, n);
	/* plain prefill (every expert through one_expert, see wave()): outputs in expert order */
	f->yk_sorted = n > 1 && !(f->decode_rows && f->xin_on && f->bdg);
	f->wave_end[0] = nu;
	if (f->prov->waves)
		st = f->prov->waves(f->prov->ctx, il, f->uni, nu, f->wave_end, &n_waves, err);
	for (uint32_t w = 0; st == PT_OK && w < n_waves; w++) {
		const uint32_t lo = w ? f->wave_end[w - 1] : 0;
		const uint32_t hi = f->wave_end[w];
		const uint32_t next_cnt = w + 1 < n_waves ? f->wave_end[w + 1] - hi : 0;
		st = wave(f, L, il, f->uni + lo, hi - lo, in, n, w ? NULL : overlap,
			  f->uni + hi, next_cnt, err);
	}
	if (st == PT_OK && n_waves == 0 && overlap)
		st = overlap(f, L, n, err);
	if (st != PT_OK)
		return st;
	if (f->yk_sorted) {
		sum_sorted(f, L, n, out);
		return PT_OK;
	}
	for (uint32_t r = 0; r < n; r++) {
		float *o = out + (size_t)r * D;
		memcpy(o, f->yk + (size_t)r * k * D, D * sizeof(float));
		for (uint32_t j = 1; j < k; j++)
			add_rows(o, f->yk + ((size_t)r * k + j) * D, D);
	}
	return PT_OK;
}

static enum pt_status experts(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
			      const float *in, uint32_t n, float *out, overlap_fn overlap,
			      struct pt_error *err)
{
	const uint64_t t0 = ns_now();
	enum pt_status st = experts_run(f, L, il, in, n, out, overlap, err);
	f->phase_ns[PT_FWD_PH_EXPERTS] += ns_now() - t0;
	return st;
}

/* Bailing's shared expert on the ffn-normed rows f->h into f->t2. */
static enum pt_status shared_expert(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
				    struct pt_error *err)
{
	return mlp(f, &L->sh_gate, &L->sh_up, &L->sh_down, f->h, n, f->t2, err);
}

/* The parallel FFN's always-on MLP (Gemma 4) on f->h into f->t1, post-normed. */
static enum pt_status parallel_dense(pt_fwd *f, const struct pt_layer_weights *L, uint32_t n,
				     struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	enum pt_status st = mlp(f, &L->ffn_gate, &L->ffn_up, &L->ffn_down, f->h, n, f->t1, err);
	if (st == PT_OK)
		norm_rows(f, f->t1, f->t1, L->post_ffw_norm_1, n, hp->n_embd, hp->rms_eps);
	return st;
}

/* Serial FFN: router on router_in, experts on in (both the ffn-normed rows). */
static enum pt_status moe(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
			  const float *router_in, const float *in, uint32_t n, float *out,
			  struct pt_error *err)
{
	const uint64_t t0 = ns_now();
	enum pt_status st = mm(f, &L->router, router_in, n, f->rl, err);
	if (st != PT_OK)
		return st;
	route(f, L, n);
	f->phase_ns[PT_FWD_PH_ROUTER] += ns_now() - t0;
	return experts(f, L, il, in, n, out, L->sh_gate.data ? shared_expert : NULL, err);
}

/* Parallel FFN (Gemma 4): router input is the weightless RMSNorm of the residual x1 (f->x) times
 * 1/sqrt(n_embd) times ffn_gate_inp.scale; experts see RMSNorm(x1; pre_ffw_norm_2).
 * Result in f->t2. */
static enum pt_status moe_parallel(pt_fwd *f, const struct pt_layer_weights *L, uint32_t il,
				   uint32_t n, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const uint32_t D = hp->n_embd;
	const uint64_t t0 = ns_now();
	scaled_router_in(f, L, f->x, f->h2, n);
	enum pt_status st = mm(f, &L->router, f->h2, n, f->rl, err);
	if (st != PT_OK)
		return st;
	route(f, L, n);
	f->phase_ns[PT_FWD_PH_ROUTER] += ns_now() - t0;
	norm_rows(f, f->h2, f->x, L->pre_ffw_norm_2, n, D, hp->rms_eps);
	return experts(f, L, il, f->h2, n, f->t2, parallel_dense, err);
}

/* The shared expert's gate (qwen35moe): y *= sigmoid(w . h), one scalar per row (an F32
 * product with a 1-D weight in llama.cpp). */
static void shexp_gate(float *y, const float *h, const float *w, uint32_t D)
{
	float s = 0.0f;
	for (uint32_t i = 0; i < D; i++)
		s += w[i] * h[i];
	const float g = pt_op_sigmoid(s);
	for (uint32_t i = 0; i < D; i++)
		y[i] *= g;
}

static enum pt_status ffn(pt_fwd *f, uint32_t il, uint32_t n, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const struct pt_layer_weights *L = &f->m->layers[il];
	enum pt_status st = PT_OK;
	const uint64_t t0 = ns_now(), inner0 = f->phase_ns[PT_FWD_PH_ROUTER] +
					    f->phase_ns[PT_FWD_PH_EXPERTS];
	norm_rows(f, f->h, f->x, L->ffn_norm, n, hp->n_embd, hp->rms_eps);
	if (f->rc->ffn == PT_FFN_PARALLEL) {
		/* the dense MLP runs inside the MoE step, while the expert reads are in flight */
		if (!L->is_moe)
			st = mlp(f, &L->ffn_gate, &L->ffn_up, &L->ffn_down, f->h, n, f->t1, err);
		else
			st = moe_parallel(f, L, il, n, err);
		if (st == PT_OK && L->is_moe) {
			norm_rows(f, f->t2, f->t2, L->post_ffw_norm_2, n, hp->n_embd, hp->rms_eps);
			add_rows_par(f, f->t1, f->t2, n, hp->n_embd, NULL);
		}
		if (st != PT_OK)
			return st;
		norm_rows(f, f->t1, f->t1, L->post_ffw_norm, n, hp->n_embd, hp->rms_eps);
	} else if (!L->is_moe) {
		if (n == 1 || f->decode_rows) /* a leading dense layer: the first MoE layer's reads
						 start here */
			read_ahead(f, il, n);
		st = mlp(f, &L->ffn_gate, &L->ffn_up, &L->ffn_down, f->h, n, f->t1, err);
	} else {
		st = moe(f, L, il, f->h, f->h, n, f->t1, err); /* shared expert into t2 */
		for (uint32_t r = 0; st == PT_OK && L->sh_gate_inp && r < n; r++)
			shexp_gate(f->t2 + (size_t)r * hp->n_embd, f->h + (size_t)r * hp->n_embd,
				   L->sh_gate_inp, hp->n_embd);
		if (st == PT_OK && L->sh_gate.data)
			add_rows_par(f, f->t1, f->t2, n, hp->n_embd, NULL);
	}
	if (st != PT_OK)
		return st;
	add_rows_par(f, f->x, f->t1, n, hp->n_embd, L->layer_out_scale);
	f->phase_ns[PT_FWD_PH_FFN_REST] += ns_now() - t0 - (f->phase_ns[PT_FWD_PH_ROUTER] +
							    f->phase_ns[PT_FWD_PH_EXPERTS] - inner0);
	return PT_OK;
}

/* The final logit softcap over the pool's threads (libm's tanhf on each of Gemma 4's 262,144
 * logits took 3-4 ms a decoded token on the caller alone; pt_op_softcap's SIMD tanh about a
 * tenth of that).  Each element alone, so the logits do not depend on the split. */
#define SOFTCAP_TASK 16384

struct softcap_job {
	float *x;
	size_t n;
	float cap;
};

static void softcap_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct softcap_job *j = ctx;
	const size_t a = (size_t)task * SOFTCAP_TASK;
	const size_t b = a + SOFTCAP_TASK < j->n ? a + SOFTCAP_TASK : j->n;
	(void)worker;
	pt_op_softcap(j->x + a, (int)(b - a), j->cap);
}

/* One task (a row below 16,384 logits) runs inline on the caller (pt_pool_run).  n is a
 * chunk's logits, far below 2^32 tasks of 16,384. */
static void softcap_rows(pt_fwd *f, float *x, size_t n, float cap)
{
	struct softcap_job j = { x, n, cap };
	pt_pool_run(f->pool, softcap_task, &j, (uint32_t)((n + SOFTCAP_TASK - 1) / SOFTCAP_TASK));
}

/* The output head for rows [r0, n) of the chunk into logits[n - r0][n_vocab]. */
static enum pt_status head(pt_fwd *f, uint32_t r0, uint32_t n, float *logits,
			   struct pt_error *err)
{
	const struct pt_model *m = f->m;
	const struct pt_hparams *hp = &m->hp;
	const uint32_t rows = n - r0;
	const uint64_t t0 = ns_now();
	norm_rows(f, f->h, f->x + (size_t)r0 * hp->n_embd, m->output_norm, rows, hp->n_embd,
		  hp->rms_eps);
	enum pt_status st = mm(f, &m->output, f->h, rows, logits, err);
	if (st == PT_OK && f->rc->final_softcap && hp->final_logit_softcap > 0.0f)
		softcap_rows(f, logits, (size_t)rows * m->output.rows, hp->final_logit_softcap);
	f->phase_ns[PT_FWD_PH_HEAD] += ns_now() - t0;
	return st;
}

/* logits: NULL (no output head), every row (all) or the last row only. */
static enum pt_status chunk(pt_fwd *f, const uint32_t *tokens, uint32_t n, float *logits,
			    bool all, struct pt_error *err)
{
	const struct pt_model *m = f->m;
	const struct pt_hparams *hp = &m->hp;
	enum pt_status st = PT_OK;
	for (uint32_t r = 0; st == PT_OK && r < n; r++) {
		float *x = f->x + (size_t)r * hp->n_embd;
		st = pt_model_embed_row(m, tokens[r], x, err);
		if (st == PT_OK && f->rc->embd_scale_sqrt) {
			const float s = sqrtf((float)hp->n_embd);
			for (uint32_t i = 0; i < hp->n_embd; i++)
				x[i] *= s;
		}
	}
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++) {
		const uint64_t t0 = ns_now();
		if (m->layers[il].is_recr)
			st = linear_attention(f, il, n, err);
		else if (f->rc->attn == PT_ATTN_MLA)
			st = attention_mla(f, il, n, err);
		else
			st = attention(f, il, n, err);
		f->phase_ns[PT_FWD_PH_ATTN] += ns_now() - t0;
		if (st == PT_OK)
			st = ffn(f, il, n, err);
	}
	if (st == PT_OK && logits)
		st = head(f, all ? 0 : n - 1, n, logits, err);
	for (uint32_t r = 0; st == PT_OK && r < n; r++) /* rows ascend within a sequence */
		f->seqs[f->rseq[r]].pos = f->rpos[r] + 1;
	return st;
}

static enum pt_status bad_seq(const pt_fwd *f, uint32_t seq, struct pt_error *err)
{
	return pt_error_set(err, PT_E_INVALID, "sequence %u out of range (%u sequences)", seq,
			    f->n_seq);
}

enum pt_status pt_fwd_seq_eval(pt_fwd *f, uint32_t seq, const uint32_t *tokens, uint32_t n,
			       float *logits, bool all_logits, struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	struct fwd_seq *S = &f->seqs[seq];
	if ((uint64_t)S->pos + n > f->n_ctx)
		return pt_error_set(err, PT_E_LIMIT, "context full: %lld + %u tokens > %u",
				    (long long)S->pos, n, f->n_ctx);
	const size_t nv = f->m->output.rows;
	f->decode_rows = false;
	for (uint32_t i = 0; i < n; i += f->n_batch) {
		const uint32_t c = n - i < f->n_batch ? n - i : f->n_batch;
		float *l = NULL;
		if (logits && all_logits)
			l = logits + (size_t)i * nv;
		else if (logits && i + c == n)
			l = logits; /* the last chunk's last row */
		for (uint32_t r = 0; r < c; r++) {
			f->rseq[r] = seq;
			f->rpos[r] = S->pos + r;
		}
		enum pt_status st = chunk(f, tokens + i, c, l, all_logits, err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

enum pt_status pt_fwd_eval_rows(pt_fwd *f, const uint32_t *tokens, uint32_t n, float *logits,
				bool all_logits, struct pt_error *err)
{
	return pt_fwd_seq_eval(f, 0, tokens, n, logits, all_logits, err);
}

enum pt_status pt_fwd_eval(pt_fwd *f, const uint32_t *tokens, uint32_t n, float *logits,
			   struct pt_error *err)
{
	return pt_fwd_seq_eval(f, 0, tokens, n, logits, true, err);
}

enum pt_status pt_fwd_decode_batch(pt_fwd *f, const uint32_t *seqs, const uint32_t *tokens,
				   uint32_t n, float *logits, struct pt_error *err)
{
	if (n == 0 || n > f->n_seq)
		return pt_error_set(err, PT_E_INVALID, "decode batch of %u rows (%u sequences)", n,
				    f->n_seq);
	for (uint32_t i = 0; i < n; i++) {
		if (seqs[i] >= f->n_seq)
			return bad_seq(f, seqs[i], err);
		for (uint32_t j = 0; j < i; j++)
			if (seqs[j] == seqs[i])
				return pt_error_set(err, PT_E_INVALID,
						    "decode batch: sequence %u appears twice", seqs[i]);
		if (f->seqs[seqs[i]].pos + 1 > (int64_t)f->n_ctx)
			return pt_error_set(err, PT_E_LIMIT, "context full: sequence %u at %lld of %u",
					    seqs[i], (long long)f->seqs[seqs[i]].pos, f->n_ctx);
	}
	for (uint32_t i = 0; i < n; i++) {
		f->rseq[i] = seqs[i];
		f->rpos[i] = f->seqs[seqs[i]].pos;
	}
	f->decode_rows = true;
	enum pt_status st = chunk(f, tokens, n, logits, true, err);
	f->decode_rows = false;
	return st;
}

enum pt_status pt_fwd_seq_truncate(pt_fwd *f, uint32_t seq, int64_t pos, struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	struct fwd_seq *S = &f->seqs[seq];
	if (pos < 0 || pos > S->pos)
		return pt_error_set(err, PT_E_INVALID, "truncate to %lld: only %lld positions",
				    (long long)pos, (long long)S->pos);
	/* a recurrent state holds the whole prefix: it can only go back to the start (the
	 * caller restores a checkpoint or replays) */
	if (S->rs && pos != S->pos && pos != 0)
		return pt_error_set(err, PT_E_LIMIT, "recurrent state cannot rewind from %lld to "
				    "%lld", (long long)S->pos, (long long)pos);
	if (S->rs && pos == 0 && S->pos != 0)
		memset(S->rs, 0, f->rs_floats * sizeof(float));
	for (uint32_t il = 0; il < S->kv.n_layer; il++) {
		const struct pt_kv_layer *L = &S->kv.layers[il];
		/* the ring holds positions [S->pos - cap, S->pos); the query at pos needs its
		 * window's keys from pos - n_swa + 1 on */
		const int64_t need = pos - (int64_t)L->d.n_swa + 1;
		if (L->d.n_swa > 0 && need > 0 && need < S->pos - (int64_t)L->cap)
			return pt_error_set(err, PT_E_LIMIT,
					    "layer %u: sliding ring no longer holds position %lld",
					    il, (long long)need);
	}
	S->pos = pos;
	return PT_OK;
}

enum pt_status pt_fwd_truncate(pt_fwd *f, int64_t pos, struct pt_error *err)
{
	return pt_fwd_seq_truncate(f, 0, pos, err);
}

uint64_t pt_fwd_head_ns(const pt_fwd *f)
{
	return f->phase_ns[PT_FWD_PH_HEAD];
}

uint64_t pt_fwd_phase_ns(const pt_fwd *f, enum pt_fwd_phase ph)
{
	return ph < PT_FWD_PH_COUNT ? f->phase_ns[ph] : 0;
}

uint64_t pt_fwd_expert_gets(const pt_fwd *f)
{
	return f->expert_gets;
}

uint32_t pt_fwd_n_seq(const pt_fwd *f)
{
	return f->n_seq;
}

int64_t pt_fwd_pos(const pt_fwd *f)
{
	return f->seqs[0].pos;
}

int64_t pt_fwd_seq_pos(const pt_fwd *f, uint32_t seq)
{
	return seq < f->n_seq ? f->seqs[seq].pos : -1;
}

uint64_t pt_fwd_snapshot_bytes(const pt_fwd *f, int64_t pos)
{
	return pt_kv_snapshot_bytes(&f->seqs[0].kv, pos) + f->rs_floats * sizeof(float);
}

uint64_t pt_fwd_rs_bytes(const pt_fwd *f)
{
	return f->rs_floats * sizeof(float);
}

enum pt_status pt_fwd_seq_rs_save(const pt_fwd *f, uint32_t seq, float *buf,
				  struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	if (f->rs_floats)
		memcpy(buf, f->seqs[seq].rs, f->rs_floats * sizeof(float));
	return PT_OK;
}

enum pt_status pt_fwd_seq_rs_restore(pt_fwd *f, uint32_t seq, int64_t pos, const float *buf,
				     struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	struct fwd_seq *S = &f->seqs[seq];
	if (pos < 0 || pos > S->pos)
		return pt_error_set(err, PT_E_INVALID, "restore to %lld: only %lld positions",
				    (long long)pos, (long long)S->pos);
	if (f->rs_floats)
		memcpy(S->rs, buf, f->rs_floats * sizeof(float));
	S->pos = pos; /* the KV rows below pos are unchanged */
	return PT_OK;
}

enum pt_status pt_fwd_seq_save(const pt_fwd *f, uint32_t seq, void *buf, uint64_t size,
			       struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	const struct fwd_seq *S = &f->seqs[seq];
	if (size != pt_kv_snapshot_bytes(&S->kv, S->pos))
		return pt_error_set(err, PT_E_INVALID, "KV snapshot: %llu bytes for %lld positions",
				    (unsigned long long)size, (long long)S->pos);
	pt_kv_save(&S->kv, S->pos, buf);
	if (f->rs_floats)
		memcpy((uint8_t *)buf + (size - f->rs_floats * sizeof(float)), S->rs,
		       f->rs_floats * sizeof(float));
	return PT_OK;
}

enum pt_status pt_fwd_seq_load(pt_fwd *f, uint32_t seq, int64_t pos, const void *buf,
			       uint64_t size, struct pt_error *err)
{
	if (seq >= f->n_seq)
		return bad_seq(f, seq, err);
	struct fwd_seq *S = &f->seqs[seq];
	if (pos < 0 || pos > (int64_t)f->n_ctx || size != pt_kv_snapshot_bytes(&S->kv, pos))
		return pt_error_set(err, PT_E_INVALID, "KV snapshot: %llu bytes for %lld positions",
				    (unsigned long long)size, (long long)pos);
	pt_kv_load(&S->kv, pos, buf);
	if (f->rs_floats)
		memcpy(S->rs, (const uint8_t *)buf + (size - f->rs_floats * sizeof(float)),
		       f->rs_floats * sizeof(float));
	S->pos = pos;
	return PT_OK;
}

enum pt_status pt_fwd_seq_copy(pt_fwd *f, uint32_t dst, uint32_t src, struct pt_error *err)
{
	if (dst >= f->n_seq || src >= f->n_seq)
		return bad_seq(f, dst >= f->n_seq ? dst : src, err);
	if (dst != src) {
		pt_kv_copy(&f->seqs[dst].kv, &f->seqs[src].kv, f->seqs[src].pos);
		if (f->rs_floats)
			memcpy(f->seqs[dst].rs, f->seqs[src].rs, f->rs_floats * sizeof(float));
		f->seqs[dst].pos = f->seqs[src].pos;
	}
	return PT_OK;
}

uint32_t pt_fwd_n_ctx(const pt_fwd *f)
{
	return f->n_ctx;
}


static size_t umax(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* Largest activation scratch any product of the model needs for n_batch rows. */
static size_t act_need(const struct pt_model *m, uint32_t nb)
{
	size_t need = pt_kern_act_bytes(&m->output, nb);
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &m->layers[il];
		const struct pt_kern_mat *mats[] = { &L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo,
						     &L->ffn_gate, &L->ffn_up, &L->ffn_down,
						     &L->sh_gate, &L->sh_up, &L->sh_down,
						     &L->router, &L->ssm_qkv, &L->ssm_z,
						     &L->ssm_beta, &L->ssm_alpha, &L->ssm_out,
						     &L->wq_a, &L->wq_b, &L->wkv_a,
						     &L->wk_b, &L->wv_b };
		for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]); i++)
			if (mats[i]->data)
				need = umax(need, pt_kern_act_bytes(mats[i], nb));
		const struct pt_expert_mat *ex[] = { &L->gate_exps, &L->up_exps, &L->gate_up_exps,
						     &L->down_exps };
		for (size_t i = 0; i < 4; i++) {
			if (!ex[i]->data)
				continue;
			const struct pt_kern_mat km = expert_mat(ex[i], ex[i]->data);
			need = umax(need, pt_kern_act_bytes(&km, nb));
		}
	}
	return need;
}

/* Row widths of the per-chunk buffers from the per-layer shapes. */
uint32_t pt_fwd_ff_width(const struct pt_model *m)
{
	size_t w = 0;
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &m->layers[il];
		w = umax(w, L->ffn_gate.rows);
		w = umax(w, L->sh_gate.rows);
		w = umax(w, L->gate_exps.rows);
		w = umax(w, L->gate_up_exps.rows);
	}
	return (uint32_t)w;
}

/* Row widths of the per-chunk buffers from the per-layer shapes and the tensors. */
struct row_widths {
	size_t w_qk, n_k, w_v, w_qkv, w_ff, max_rot;
	size_t gate; /* attention output gates (gated attention; 0: none) */
};

static void row_widths(const struct pt_model *m, const struct pt_arch_recipe *rc,
		       struct row_widths *w)
{
	const struct pt_hparams *hp = &m->hp;
	*w = (struct row_widths){ .w_ff = pt_fwd_ff_width(m) };
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const uint32_t hk = pt_hparams_head_dim_k(hp, il), hv = pt_hparams_head_dim_v(hp, il);
		const uint32_t nkv = hp->n_head_kv[il];
		w->w_qk = umax(w->w_qk, (size_t)hp->n_head * (hk > hv ? hk : hv));
		w->n_k = umax(w->n_k, (size_t)nkv * hk);
		w->w_v = umax(w->w_v, (size_t)nkv * hv);
		w->w_qkv = umax(w->w_qkv, (size_t)hp->n_head * hk + (size_t)nkv * (hk + hv));
		w->max_rot = umax(w->max_rot, hp->is_swa[il] ? hp->n_rot_swa : hp->n_rot);
		const struct pt_layer_weights *L = &m->layers[il];
		/* gated Q projections: [query | gate] per head, split after the product */
		w->w_qk = umax(w->w_qk, L->wq.rows);
		w->w_qkv = umax(w->w_qkv, L->wq.rows);
	}
	if (rc->attn_out_gate)
		w->gate = (size_t)hp->n_head * hp->head_dim_k;
}

static size_t align16(size_t n)
{
	return (n + 15) / 16 * 16;
}

/* Attention's rows (Q and its output at stride w_qk, K, V, the fused QKV product, the
 * output gates) are dead once its output projection has run, and the routed experts' rank
 * slots (yk, k x n_embd a row) are filled after that: one allocation of the larger serves
 * both phases.  Offsets of the attention buffers in it, 64-byte aligned. */
struct phase_layout {
	size_t q, v, att, k, qkv, gate, floats;
};

/* Rows a buffer of the FFN needs: t2 holds a shared expert's output or a parallel FFN's
 * routed half, h2 the parallel FFN's expert input; xg gathers an expert's float rows where
 * a layer's expert input is not quantized once for all (quant_expert_input); else one row a
 * sequence (decode) or none. */
struct ffn_rows {
	bool t2, h2, xg;
};

static struct ffn_rows ffn_rows(const struct pt_model *m, const struct pt_arch_recipe *rc)
{
	struct ffn_rows r = { rc->ffn == PT_FFN_PARALLEL, rc->ffn == PT_FFN_PARALLEL, false };
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &m->layers[il];
		r.t2 = r.t2 || L->sh_gate.data;
		r.xg = r.xg || (L->is_moe && xin_row_of(L) == 0);
	}
	return r;
}

static struct phase_layout phase_layout(const struct row_widths *w, size_t B, size_t kD)
{
	struct phase_layout p = { 0 };
	p.v = p.q + align16(B * w->w_qk);
	p.att = p.v + align16(B * w->w_v);
	p.k = p.att + align16(B * w->w_qk);
	p.qkv = p.k + align16(B * w->n_k);
	p.gate = p.qkv + align16(B * w->w_qkv);
	p.floats = umax(p.gate + align16(B * w->gate), B * kD);
	return p;
}

/* One quantized input row of the widest product, in 64-byte multiples so each row sits on
 * its own cache lines. */
static size_t xq_row_bytes(const struct pt_model *m)
{
	return (act_need(m, 1) + 63) / 64 * 64;
}

uint64_t pt_fwd_rows_bytes(const struct pt_model *m, uint32_t n_rows, uint32_t n_seq)
{
	const struct pt_hparams *hp = &m->hp;
	const struct pt_arch_recipe *rc = pt_arch_recipe(hp->arch);
	const uint64_t B = n_rows > n_seq ? n_rows : n_seq, S = n_seq ? n_seq : 1;
	const uint64_t D = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used;
	struct row_widths w;
	row_widths(m, rc, &w);
	const struct phase_layout p = phase_layout(&w, B, k * D);
	const struct ffn_rows fr = ffn_rows(m, rc);
	const uint64_t floats = B * (3 * D + 2 * w.w_ff + E + k) + p.floats +
				(fr.h2 ? B * D : 1) + (fr.t2 ? B * D : 1) + (fr.xg ? B : S) * D +
				S * (2 * D + E + k);
	const uint64_t ints = B * 3 * k + S * k + B;
	return floats * 4 + ints * 4 + B * 8 + 2 * B * xq_row_bytes(m) + act_need(m, (uint32_t)B);
}

static void widths(pt_fwd *f, struct row_widths *w, size_t *attn_n)
{
	const struct pt_hparams *hp = &f->m->hp;
	row_widths(f->m, f->rc, w);
	f->w_qk = (uint32_t)w->w_qk;
	f->n_k = (uint32_t)w->n_k;
	f->w_v = (uint32_t)w->w_v;
	f->w_ff = (uint32_t)w->w_ff;
	*attn_n = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const uint32_t group = hp->n_head / hp->n_head_kv[il];
		*attn_n = umax(*attn_n, pt_attn_scratch_floats(&f->seqs[0].kv, il,
							       group * attn_tile_rows(group)));
	}
}

/* pt_mallocn for a buffer sized by the chunk's rows: large ones are listed for pt_fwd_trim. */
static void *rows_alloc(pt_fwd *f, size_t n, size_t size)
{
	void *p = pt_mallocn(n, size);
	if (p && n * size >= (1u << 20) && f->n_trim < TRIM_MAX) {
		f->trim[f->n_trim].p = p;
		f->trim[f->n_trim++].bytes = n * size;
	}
	return p;
}

void pt_fwd_trim(pt_fwd *f)
{
	const long pg = sysconf(_SC_PAGESIZE);
	const uintptr_t mask = pg > 0 ? ~((uintptr_t)pg - 1) : ~(uintptr_t)4095;
	for (uint32_t i = 0; i < f->n_trim; i++) {
		/* whole pages inside the buffer only: its neighbours keep theirs */
		const uintptr_t a = ((uintptr_t)f->trim[i].p + ~mask) & mask;
		const uintptr_t b = ((uintptr_t)f->trim[i].p + f->trim[i].bytes) & mask;
		if (b > a)
			madvise((void *)a, b - a, MADV_DONTNEED);
	}
}

uint64_t pt_fwd_trim_bytes(const pt_fwd *f)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < f->n_trim; i++)
		n += f->trim[i].bytes;
	return n;
}

/* Decode buffers: a group holds the top-k experts plus one folded FFN. */
static enum pt_status alloc_decode(pt_fwd *f, struct pt_error *err)
{
	const size_t k = f->m->hp.n_expert_used, D = f->m->hp.n_embd;
	f->group_max = (uint32_t)(k + 1 < PT_KERN_SET_MAX ? k + 1 : PT_KERN_SET_MAX);
	f->xq_row = xq_row_bytes(f->m);
	for (size_t i = 0; i < XQ_SLOTS; i++)
		if (!(f->xqb[i] = pt_malloc(f->xq_row ? f->xq_row : 1)))
			return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	f->dg = pt_mallocn((size_t)f->group_max * (f->w_ff ? f->w_ff : 1), sizeof(float));
	f->dy = pt_mallocn((size_t)f->group_max * D, sizeof(float));
	f->xqd = pt_mallocn(f->group_max, f->xq_row ? f->xq_row : 1);
	f->xin = rows_alloc(f, f->n_rows, f->xq_row ? f->xq_row : 1);
	f->xgq = rows_alloc(f, f->n_rows, f->xq_row ? f->xq_row : 1);
	if (!f->dg || !f->dy || !f->xqd || !f->xin || !f->xgq)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	if (f->n_seq > 1) {
		f->bdg = pt_mallocn((size_t)PT_KERN_SET_MAX * (f->w_ff ? f->w_ff : 1), sizeof(float));
		f->bdy = pt_mallocn((size_t)PT_KERN_SET_MAX * D, sizeof(float));
		f->bxqd = pt_mallocn(PT_KERN_SET_MAX, f->xq_row ? f->xq_row : 1);
		if (!f->bdg || !f->bdy || !f->bxqd)
			return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	}
	return PT_OK;
}

/* The attention gate rows and, with recurrent layers, the linear-attention rows, the chunk
 * scratch per thread and each sequence's state (zeroed: the state before any token). */
static enum pt_status alloc_linear(pt_fwd *f, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const size_t B = f->n_rows;
	f->rs_off = pt_calloc(hp->n_layer, sizeof(size_t));
	if (!f->rs_off)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	f->rs_floats = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		f->rs_off[il] = f->rs_floats;
		f->rs_floats += (size_t)pt_hparams_rs_floats(hp, il);
	}
	if (f->rs_floats == 0)
		return PT_OK;
	f->dn = (struct pt_dn_geom){ hp->ssm_n_group, hp->ssm_dt_rank, hp->ssm_d_state,
				     hp->ssm_d_inner / hp->ssm_dt_rank, hp->ssm_d_conv,
				     (uint32_t)pt_hparams_conv_dim(hp), f->rc->ssm_heads_tiled,
				     hp->rms_eps, NULL, 0 };
	f->dn.chunk = pt_dn_chunk_env(); /* 0: PT_DN_CHUNK */
	const size_t C = f->dn.conv_dim, V = hp->ssm_d_inner, H = hp->ssm_dt_rank;
	float **bufs[] = { &f->lin_qkv, &f->lin_y, &f->lin_z, &f->lin_b, &f->lin_a, &f->lin_o };
	const size_t n[] = { B * C, B * C, B * V, B * H, B * H, B * V };
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
		if (!(*bufs[i] = rows_alloc(f, n[i], sizeof(float))))
			return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	f->dn_scratch_n = pt_dn_chunk_scratch_floats(&f->dn);
	f->dn_scratch = pt_mallocn((size_t)f->n_threads * f->dn_scratch_n, sizeof(float));
	if (!f->dn_scratch)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	for (uint32_t s = 0; s < f->n_seq; s++)
		if (!(f->seqs[s].rs = pt_calloc(f->rs_floats, sizeof(float))))
			return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate the recurrent "
					    "state (%zu floats)", f->rs_floats);
	return PT_OK;
}

/* MLA buffers, YaRN table parameters and the score scale as llama.cpp derives them
 * (llama_context's yarn_attn_factor, deepseek2's kq_scale with mscale^2). */
static enum pt_status alloc_mla(pt_fwd *f, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	if (f->rc->attn != PT_ATTN_MLA)
		return PT_OK;
	const uint32_t hk = hp->head_dim_k_mla, hv = hp->head_dim_v_mla;
	const uint32_t nope = hk - hp->n_rot, C = hp->kv_lora_rank;
	f->mq_w = hp->n_head * (hk > hv ? hk : hv);
	f->mg_w = (uint32_t)umax(umax(C, nope), hv);
	if (f->n_k < C + hp->n_rot)
		return pt_error_set(err, PT_E_INVALID, "forward: MLA key row %u > cache row %u",
				    C + hp->n_rot, f->n_k);
	f->mq = rows_alloc(f, (size_t)f->n_rows * f->mq_w, sizeof(float));
	f->mqa = rows_alloc(f, (size_t)f->n_rows * (hp->q_lora_rank ? hp->q_lora_rank : 1),
			    sizeof(float));
	f->mg_in = rows_alloc(f, (size_t)f->n_rows * f->mg_w, sizeof(float));
	f->mg_out = rows_alloc(f, (size_t)f->n_rows * f->mg_w, sizeof(float));
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		f->mh_xrow = umax(f->mh_xrow, pt_kern_act_bytes(&f->m->layers[il].wk_b, 1));
		f->mh_xrow = umax(f->mh_xrow, pt_kern_act_bytes(&f->m->layers[il].wv_b, 1));
	}
	f->mh_xrow = (f->mh_xrow + 63) / 64 * 64;
	f->mh_xq = pt_mallocn(hp->n_head, f->mh_xrow ? f->mh_xrow : 1);
	if (!f->mq || !f->mqa || !f->mg_in || !f->mg_out || !f->mh_xq)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	/* llama_context: freq_scale = 1 / factor, ext_factor 1 for yarn; the attn_factor the
	 * RoPE kernel gets is get_mscale(f, m) / get_mscale(f, mall) with the kernel's own
	 * (1 + 0.1 ln f) cancelled; the graph undoes that to scale the scores by mscale^2 */
	const bool yarn = hp->rope_yarn && hp->rope_scaling_factor > 1.0f;
	const float fs = yarn ? 1.0f / hp->rope_scaling_factor : 1.0f;
	const float mall = hp->rope_yarn_log_mul / 0.1f; /* stored as 0.1 * mscale_all_dim */
	float attn = 1.0f;
	if (yarn) {
		const float factor = 1.0f / fs;
		if (mall != 0.0f) {
			const float ms = mall != 1.0f ? mall : 1.0f;
			const float a = factor <= 1.0f ? 1.0f : 0.1f * ms * logf(factor) + 1.0f;
			const float b = factor <= 1.0f ? 1.0f : 0.1f * mall * logf(factor) + 1.0f;
			attn = a / b;
		} else {
			attn = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
		}
		attn *= 1.0f / (1.0f + 0.1f * logf(factor));
	}
	f->yarn.freq_scale = fs;
	f->yarn.ext_factor = yarn ? 1.0f : 0.0f;
	f->yarn.attn_factor = attn;
	const uint32_t n_orig = hp->rope_orig_ctx ? hp->rope_orig_ctx : hp->n_ctx_train;
	pt_op_yarn_corr_dims((int)hp->n_rot, n_orig, hp->rope_freq_base, 32.0f, 1.0f,
			     &f->yarn.corr_low, &f->yarn.corr_high);
	const float attn_org = attn * (1.0f + 0.1f * logf(1.0f / fs));
	const float mscale = attn_org * (1.0f + 0.1f * mall * logf(1.0f / fs));
	f->kq_scale_mla = 1.0f * mscale * mscale / sqrtf((float)hk);
	return PT_OK;
}

static enum pt_status alloc_buffers(pt_fwd *f, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	const size_t B = f->n_rows, D = hp->n_embd, k = hp->n_expert_used, S = f->n_seq;
	struct row_widths w;
	widths(f, &w, &f->attn_scratch_n);
	const struct phase_layout p = phase_layout(&w, B, k * D);
	const struct ffn_rows fr = ffn_rows(f->m, f->rc);
	f->rope_cs_n = w.max_rot;
	/* decode-only rows (one per sequence): t3 (one_expert outside prefill), read-ahead */
	float **bufs[] = { &f->x, &f->h, &f->h2, &f->t1, &f->t2, &f->t3, &f->xg, &f->phase,
			   &f->gate, &f->up, &f->rl, &f->rw, &f->sel, &f->rope_cs,
			   &f->attn_scratch, &f->spec_x, &f->spec_l, &f->spec_w };
	const size_t n[] = { B * D, B * D, fr.h2 ? B * D : 1, B * D, fr.t2 ? B * D : 1, S * D,
			     (fr.xg ? B : S) * D, p.floats, B * w.w_ff, B * w.w_ff,
			     B * hp->n_expert, B * k, hp->n_expert, (size_t)f->n_threads * w.max_rot,
			     (size_t)f->n_threads * f->attn_scratch_n, S * D, S * hp->n_expert,
			     S * k };
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		*bufs[i] = rows_alloc(f, n[i] ? n[i] : 1, sizeof(float));
		if (!*bufs[i])
			return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	}
	f->q = f->phase + p.q;
	f->v = f->phase + p.v;
	f->att = f->phase + p.att;
	f->k = f->phase + p.k;
	f->qkv = f->phase + p.qkv;
	f->agate = w.gate ? f->phase + p.gate : NULL;
	f->yk = f->phase;
	const size_t max_blocks = (f->n_ctx + f->attn_block - 1) / f->attn_block;
	f->parts = pt_mallocn((size_t)hp->n_head * max_blocks, (2 + (size_t)f->w_qk / hp->n_head) * sizeof(float));
	f->ids = rows_alloc(f, B * k, sizeof(int));
	f->rows = rows_alloc(f, B * k, sizeof(int));
	f->slot_pos = rows_alloc(f, k ? B * k : 1, sizeof(uint32_t));
	f->spec_ids = pt_mallocn(k ? S * k : 1, sizeof(int));
	f->rseq = pt_mallocn(B, sizeof(uint32_t));
	f->rpos = pt_mallocn(B, sizeof(int64_t));
	f->uni = pt_mallocn(hp->n_expert ? hp->n_expert : 1, sizeof(uint32_t));
	f->wave_end = pt_mallocn(hp->n_expert ? hp->n_expert : 1, sizeof(uint32_t));
	f->eoff = pt_mallocn((size_t)hp->n_expert + 1, sizeof(uint32_t));
	f->act_bytes = act_need(f->m, f->n_rows);
	f->act = rows_alloc(f, f->act_bytes ? f->act_bytes : 1, 1);
	if (!f->ids || !f->rows || !f->slot_pos || !f->act || !f->parts || !f->uni || !f->wave_end ||
	    !f->spec_ids || !f->eoff || !f->rseq || !f->rpos)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate buffers");
	enum pt_status st = alloc_linear(f, err);
	if (st == PT_OK)
		st = alloc_mla(f, err);
	return st == PT_OK ? alloc_decode(f, err) : st;
}

static enum pt_status kv_create(pt_fwd *f, enum pt_kv_type type, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	struct pt_kv_layer_desc *d = pt_calloc(hp->n_layer, sizeof(*d));
	if (!d)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate KV descriptors");
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		if (pt_hparams_is_recurrent(hp, il))
			continue; /* no KV cache: the recurrent state (alloc_linear) */
		d[il].n_kv_head = hp->n_head_kv[il];
		d[il].head_dim_k = pt_hparams_head_dim_k(hp, il);
		d[il].head_dim_v = pt_hparams_head_dim_v(hp, il);
		d[il].n_swa = hp->is_swa[il] ? hp->n_swa : 0;
		d[il].v_in_k = pt_hparams_v_in_k(hp);
	}
	enum pt_status st = PT_OK;
	f->seqs = pt_calloc(f->n_seq, sizeof(*f->seqs));
	if (!f->seqs)
		st = pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate sequences");
	for (uint32_t s = 0; st == PT_OK && s < f->n_seq; s++)
		st = pt_kv_init(&f->seqs[s].kv, type, hp->n_layer, d, f->n_ctx, f->swa_rows, err);
	pt_free(d);
	return st;
}

/* YaRN constants per layer for standard (non-MLA) attention, as llama.cpp's context computes
 * them (llama_context constructor; ARCHITECTURES-NEXT.md 0.2; alloc_mla does the same for
 * MLA): freq_scale = 1 / factor, ext_factor 1, attn_factor = get_mscale(f, m) /
 * get_mscale(f, mall) (or get_mscale(f, 1) without a log multiplier) with the kernel's own
 * (1 + 0.1 ln f) cancelled; correction dims from each layer's rotated width and base and the
 * original context, beta_fast 32, beta_slow 1 (gpt-oss: sliding layers rotate alike). */
static enum pt_status yarn_layers(pt_fwd *f, struct pt_error *err)
{
	const struct pt_hparams *hp = &f->m->hp;
	if (!hp->rope_yarn || !(hp->rope_scaling_factor > 1.0f) || f->rc->attn == PT_ATTN_MLA)
		return PT_OK;
	f->yarn_layers = pt_calloc(hp->n_layer, sizeof(*f->yarn_layers));
	if (!f->yarn_layers)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate RoPE tables");
	const float fs = 1.0f / hp->rope_scaling_factor, factor = 1.0f / fs;
	const float mall = hp->rope_yarn_log_mul / 0.1f; /* stored as 0.1 * mscale_all_dim */
	float attn;
	if (mall != 0.0f) {
		const float a = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * logf(factor) + 1.0f;
		const float b = factor <= 1.0f ? 1.0f : 0.1f * mall * logf(factor) + 1.0f;
		attn = a / b;
	} else {
		attn = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * logf(factor) + 1.0f;
	}
	attn *= 1.0f / (1.0f + 0.1f * logf(factor));
	const uint32_t n_orig = hp->rope_orig_ctx ? hp->rope_orig_ctx : hp->n_ctx_train;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const bool swa = hp->is_swa[il];
		struct pt_yarn *y = &f->yarn_layers[il];
		*y = (struct pt_yarn){ fs, 1.0f, attn, 0.0f, 0.0f };
		pt_op_yarn_corr_dims((int)(swa ? hp->n_rot_swa : hp->n_rot), n_orig,
				     swa ? hp->rope_freq_base_swa : hp->rope_freq_base, 32.0f, 1.0f,
				     &y->corr_low, &y->corr_high);
	}
	return PT_OK;
}

enum pt_status pt_attn_numerics_parse(const char *s, enum pt_attn_numerics *out,
				      struct pt_error *err)
{
	if (!s || !*s || !strcmp(s, "f32")) {
		*out = PT_ATTN_NUMERICS_F32;
		return PT_OK;
	}
	if (!strcmp(s, "ggml")) {
		*out = PT_ATTN_NUMERICS_GGML;
		return PT_OK;
	}
	return pt_error_set(err, PT_E_INVALID, "PARTICLE_ATTN=%.40s: expected f32 or ggml", s);
}

enum pt_status pt_fwd_create(const struct pt_model *m, const struct pt_fwd_opts *opts,
			     pt_fwd **out, struct pt_error *err)
{
	*out = NULL;
	pt_fwd *f = pt_calloc(1, sizeof(*f));
	if (!f)
		return pt_error_set(err, PT_E_NOMEM, "forward: cannot allocate the context");
	f->m = m;
	f->rc = pt_arch_recipe(m->hp.arch);
	f->pool = opts->pool;
	f->n_threads = pt_pool_threads(opts->pool);
	f->prov = opts->experts ? opts->experts : &m->mmap_provider;
	f->on_route = opts->on_route;
	f->route_ctx = opts->route_ctx;
	f->n_ctx = opts->n_ctx ? opts->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
	f->n_batch = opts->n_batch ? opts->n_batch : 128;
	f->attn_block = opts->attn_block ? opts->attn_block : ATTN_BLOCK_DEFAULT;
	enum pt_attn_numerics an = opts->attn_numerics;
	if (an == PT_ATTN_NUMERICS_ENV &&
	    pt_attn_numerics_parse(getenv("PARTICLE_ATTN"), &an, err) != PT_OK) {
		pt_free(f);
		return PT_E_INVALID;
	}
	f->attn_ggml = an == PT_ATTN_NUMERICS_GGML;
	if (f->n_ctx == 0) {
		pt_free(f);
		return pt_error_set(err, PT_E_INVALID, "forward: context length 0");
	}
	if (f->n_batch > f->n_ctx)
		f->n_batch = f->n_ctx;
	f->n_seq = opts->n_seq ? opts->n_seq : 1;
	f->dn_chunk_min = opts->dn_chunk_min == UINT32_MAX ? 0 : opts->dn_chunk_min ?
			  opts->dn_chunk_min : DN_CHUNK_MIN_DEFAULT;
	if (f->n_seq > PT_FWD_MAX_SEQ) {
		pt_free(f);
		return pt_error_set(err, PT_E_INVALID, "forward: %u sequences (at most %u)",
				    opts->n_seq, PT_FWD_MAX_SEQ);
	}
	f->n_rows = f->n_batch > f->n_seq ? f->n_batch : f->n_seq;
	f->swa_rows = opts->swa_rows && opts->swa_rows < f->n_batch ? opts->swa_rows
								     : pt_fwd_swa_rows(f->n_batch);
	enum pt_status st = kv_create(f, opts->kv_type, err);
	if (st == PT_OK)
		st = alloc_buffers(f, err);
	if (st == PT_OK)
		st = yarn_layers(f, err);
	if (st != PT_OK) {
		pt_fwd_destroy(f);
		return st;
	}
	*out = f;
	return PT_OK;
}

void pt_fwd_destroy(pt_fwd *f)
{
	if (!f)
		return;
	float *bufs[] = { f->x, f->h, f->h2, f->t1, f->t2, f->t3, f->xg, f->phase, f->gate,
			  f->up, f->rl, f->rw, f->sel, f->rope_cs, f->attn_scratch, f->spec_x,
			  f->spec_l, f->spec_w };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		pt_free(bufs[i]);
	pt_free(f->ids);
	pt_free(f->rows);
	pt_free(f->slot_pos);
	pt_free(f->spec_ids);
	pt_free(f->rseq);
	pt_free(f->rpos);
	pt_free(f->uni);
	pt_free(f->wave_end);
	pt_free(f->eoff);
	pt_free(f->yarn_layers);
	pt_free(f->parts);
	pt_free(f->act);
	for (size_t i = 0; i < XQ_SLOTS; i++)
		pt_free(f->xqb[i]);
	pt_free(f->dg);
	pt_free(f->dy);
	pt_free(f->xqd);
	pt_free(f->bdg);
	pt_free(f->bdy);
	pt_free(f->bxqd);
	pt_free(f->xin);
	pt_free(f->xgq);
	pt_free(f->mq);
	pt_free(f->mqa);
	pt_free(f->mg_in);
	pt_free(f->mg_out);
	pt_free(f->mh_xq);
	float *lin[] = { f->lin_qkv, f->lin_y, f->lin_z, f->lin_b, f->lin_a, f->lin_o,
			 f->dn_scratch };
	for (size_t i = 0; i < sizeof(lin) / sizeof(lin[0]); i++)
		pt_free(lin[i]);
	pt_free(f->rs_off);
	for (uint32_t s = 0; f->seqs && s < f->n_seq; s++) {
		pt_kv_fini(&f->seqs[s].kv);
		pt_free(f->seqs[s].rs);
	}
	pt_free(f->seqs);
	pt_free(f);
}
