/* matvec_set.c - one pool dispatch for a set of single-token products (the decode path).
 *
 * Decode runs many small matrix-vector products per layer (Q, K, V; every selected expert's
 * gate, up and down); each pt_kern_matvec is one pool dispatch, whose fixed cost (waking and
 * synchronising the workers) is comparable to a small product's compute.  Here the output
 * rows of all products of a set are concatenated and cut into tasks of contiguous rows (a
 * task may span products), so a set costs one dispatch.  Every output element is still one
 * call of the level's dot function on the same bytes, so results are bit-identical to the
 * products run one by one, whatever the thread count.
 */
#include "kern/kern_internal.h"

#include <stdbool.h>

#include "util/status.h"

#define SET_TASKS_PER_THREAD 4
#define SET_MIN_ROWS 16   /* rows per task, at least (a row is a few hundred bytes) */
#define SET_TASK_BYTES (256u << 10)
/* software prefetch of the weight rows this far ahead (a hint; 0 to 16 rows measured the
 * same on the development host, docs/PERFORMANCE.md; pt_kern_prefetch_row) */
#define SET_PREFETCH_ROWS 4
#define GLU_CHUNK 64      /* gate/up values kept on the stack before the activation */

struct seg {
	const struct pt_kern_mat *w; /* gate (or fused gate_up) */
	const struct pt_kern_mat *u; /* up, NULL for plain products and fused gate_up */
	const struct pt_kern_ops *ops, *uops;
	const void *xq, *xq_up;
	float *y;
	const float *bg, *bu; /* optional gate / up biases */
	uint64_t rows;   /* output rows of this product */
	size_t up_off;   /* byte offset of up row r from gate row r, fused gate_up */
};

struct set_job {
	const struct seg *segs;
	uint32_t n;
	uint64_t per; /* rows per task */
	pt_kern_glu_fn act;
};

/* Whether w's products run sixteen rows a kernel call: interleaved bands (X16), or rows as
 * stored in the interleaved numerics (X16_ROWS) where the level has the sixteen-row twin. */
static bool banded(const struct pt_kern_mat *w, const struct pt_kern_ops *ops)
{
	return w->layout == PT_KERN_LAYOUT_X16 ||
	       (w->layout == PT_KERN_LAYOUT_X16_ROWS && ops->x16_dot16);
}

/* Band b (rows 16 b .. 16 b + 15) of a banded product into out[0 .. 16). */
static void band16(const struct pt_kern_mat *w, const struct pt_kern_ops *ops, const void *xq,
		   uint64_t b, float *out)
{
	const uint8_t *data = w->data;
	if (w->layout == PT_KERN_LAYOUT_X16) {
		ops->x16(w->cols, data + b * pt_kern_x16_band(w->type, w->cols), xq, 0, 1, out, 0);
		return;
	}
	/* (the twin requests the next sixteen rows itself) */
	ops->x16_dot16(w->cols, data + b * PT_KERN_X16_ROWS * w->row_bytes, w->row_bytes, xq, out);
}

/* Outputs [r0, r1) of a banded product into out[0 .. r1 - r0): whole bands where the range
 * covers them, a band the range cuts computed whole into a buffer (every output is the same
 * kernel call either way). */
static void x16_rows(const struct pt_kern_mat *w, const struct pt_kern_ops *ops, const void *xq,
		     uint64_t r0, uint64_t r1, float *out)
{
	/* the X16 kernels keep the stream's next lines requested; its first ones are asked here */
	if (r0 < r1 && w->layout == PT_KERN_LAYOUT_X16)
		pt_kern_x16_prefetch_start((const uint8_t *)w->data + r0 / PT_KERN_X16_ROWS *
							 pt_kern_x16_band(w->type, w->cols),
					   pt_kern_x16_ahead(w->type));
	for (uint64_t r = r0; r < r1;) {
		const uint64_t b = r / PT_KERN_X16_ROWS, lo = b * PT_KERN_X16_ROWS;
		const uint64_t hi = lo + PT_KERN_X16_ROWS, e = hi < r1 ? hi : r1;
		if (r == lo && e == hi) {
			band16(w, ops, xq, b, out + (r - r0));
		} else {
			float tmp[PT_KERN_X16_ROWS];
			band16(w, ops, xq, b, tmp);
			memcpy(out + (r - r0), tmp + (r - lo), (size_t)(e - r) * sizeof(float));
		}
		r = e;
	}
}

/* The row kernel of a matrix stored as rows: the level's dot, or for X16_ROWS the row twin
 * of the interleaved kernels (its numerics). */
static pt_kern_dot_fn row_dot(const struct pt_kern_mat *w, const struct pt_kern_ops *ops)
{
	return w->layout == PT_KERN_LAYOUT_X16_ROWS ? ops->x16_dot : ops->dot;
}

/* Plain product rows [r0, r1) of s. */
static void rows_plain(const struct seg *s, uint64_t r0, uint64_t r1)
{
	const struct pt_kern_mat *w = s->w;
	const uint8_t *data = w->data;
	if (banded(w, s->ops)) {
		x16_rows(w, s->ops, s->xq, r0, r1, s->y + r0);
		return;
	}
	const pt_kern_dot_fn dot = row_dot(w, s->ops);
	for (uint64_t r = r0; r < r1; r++) {
		if (SET_PREFETCH_ROWS && r + SET_PREFETCH_ROWS < r1)
			pt_kern_prefetch_row(data + (r + SET_PREFETCH_ROWS) * w->row_bytes, w->row_bytes);
		s->y[r] = dot(w->cols, data + r * w->row_bytes, s->xq);
	}
}

/* Gated rows [r0, r1) of s: y = act(gate . x, up . x), GLU_CHUNK rows at a time. */
static void rows_glu(const struct seg *s, uint64_t r0, uint64_t r1, pt_kern_glu_fn act)
{
	const struct pt_kern_mat *g = s->w;
	const uint8_t *gd = g->data;
	const uint8_t *ud = s->u ? (const uint8_t *)s->u->data : gd + s->up_off;
	const size_t urb = s->u ? s->u->row_bytes : g->row_bytes;
	const uint64_t ucols = s->u ? s->u->cols : g->cols;
	float gv[GLU_CHUNK], uv[GLU_CHUNK];
	const bool gx = banded(g, s->ops);
	const bool ux = s->u ? banded(s->u, s->uops) : gx;
	const pt_kern_dot_fn gdot = row_dot(g, s->ops);
	const pt_kern_dot_fn udot = s->u ? row_dot(s->u, s->uops) : gdot;
	if (gx || ux) { /* interleaved gate and/or up: a chunk of each, then the biases */
		for (uint64_t c0 = r0; c0 < r1; c0 += GLU_CHUNK) {
			const uint64_t c1 = c0 + GLU_CHUNK < r1 ? c0 + GLU_CHUNK : r1;
			if (gx)
				x16_rows(g, s->ops, s->xq, c0, c1, gv);
			else
				for (uint64_t r = c0; r < c1; r++)
					gv[r - c0] = gdot(g->cols, gd + r * g->row_bytes, s->xq);
			if (ux && s->u)
				x16_rows(s->u, s->uops, s->xq_up, c0, c1, uv);
			else if (ux) /* fused gate_up: the up rows follow the gate rows */
				x16_rows(g, s->ops, s->xq, s->rows + c0, s->rows + c1, uv);
			else
				for (uint64_t r = c0; r < c1; r++)
					uv[r - c0] = udot(ucols, ud + r * urb, s->xq_up);
			for (uint64_t r = c0; r < c1; r++) {
				if (s->bg)
					gv[r - c0] += s->bg[r];
				if (s->bu)
					uv[r - c0] += s->bu[r];
			}
			act(s->y + c0, gv, uv, (int)(c1 - c0));
		}
		return;
	}
	for (uint64_t c0 = r0; c0 < r1; c0 += GLU_CHUNK) {
		const uint64_t c1 = c0 + GLU_CHUNK < r1 ? c0 + GLU_CHUNK : r1;
		for (uint64_t r = c0; r < c1; r++) {
			if (SET_PREFETCH_ROWS && r + SET_PREFETCH_ROWS < r1) {
				const uint64_t ra = r + SET_PREFETCH_ROWS;
				pt_kern_prefetch_row(gd + ra * g->row_bytes, g->row_bytes);
				pt_kern_prefetch_row(ud + ra * urb, urb);
			}
			gv[r - c0] = gdot(g->cols, gd + r * g->row_bytes, s->xq);
			uv[r - c0] = udot(ucols, ud + r * urb, s->xq_up);
			if (s->bg)
				gv[r - c0] += s->bg[r];
			if (s->bu)
				uv[r - c0] += s->bu[r];
		}
		act(s->y + c0, gv, uv, (int)(c1 - c0));
	}
}

static void set_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct set_job *jb = ctx;
	uint64_t lo = (uint64_t)task * jb->per, hi = lo + jb->per, base = 0;
	(void)worker;
	for (uint32_t i = 0; i < jb->n && base < hi; i++) {
		const struct seg *s = &jb->segs[i];
		const uint64_t end = base + s->rows;
		if (end > lo) {
			const uint64_t r0 = lo > base ? lo - base : 0;
			const uint64_t r1 = hi < end ? hi - base : s->rows;
			if (jb->act)
				rows_glu(s, r0, r1, jb->act);
			else
				rows_plain(s, r0, r1);
		}
		base = end;
	}
}

static enum pt_status checked_ops(const struct pt_kern_mat *w, const struct pt_kern_ops **out,
				  struct pt_error *err)
{
	const struct pt_kern_ops *ops = pt_kern_ops(w->type);
	uint64_t wrow;
	if (!ops)
		return pt_error_set(err, PT_E_UNSUPPORTED, "no compute kernel for tensor type %s",
				    pt_type_name(w->type));
	if (w->cols == 0 || pt_type_row_bytes(w->type, w->cols, &wrow) != 0 ||
	    w->row_bytes < wrow)
		return pt_error_set(err, PT_E_INVALID, "%s matrix: %llu columns, row stride %zu",
				    pt_type_name(w->type), (unsigned long long)w->cols,
				    w->row_bytes);
	*out = ops;
	return pt_kern_check_layout(w, ops, err);
}

/* Rows per task: a share of the rows (SET_TASKS_PER_THREAD tasks per thread), at most about
 * SET_TASK_BYTES of weights (a descheduled worker holding a task delays the whole set by
 * that task at most: it bounds the tail on a busy host; claims cost ~0.1 us each), and at
 * least SET_MIN_ROWS.  row_bytes: the largest weight bytes one output row reads. */
static void run_set(struct set_job *jb, uint64_t total, size_t row_bytes, pt_pool *pool)
{
	const uint64_t parts = (uint64_t)pt_pool_threads(pool) * SET_TASKS_PER_THREAD;
	uint64_t per = (total + parts - 1) / parts;
	if (row_bytes && per > SET_TASK_BYTES / row_bytes)
		per = SET_TASK_BYTES / row_bytes;
	if (per < SET_MIN_ROWS)
		per = SET_MIN_ROWS;
	per = (per + 15) / 16 * 16; /* task boundaries on 64-byte lines of y (no false sharing) */
	jb->per = per;
	if (total)
		pt_pool_run(pool, set_task, jb, (uint32_t)((total + per - 1) / per));
}

enum pt_status pt_kern_matvec_set(const struct pt_kern_mv *set, uint32_t n, pt_pool *pool,
				  struct pt_error *err)
{
	struct seg segs[PT_KERN_SET_MAX];
	uint64_t total = 0;
	size_t rb = 0;
	if (n > PT_KERN_SET_MAX)
		return pt_error_set(err, PT_E_INVALID, "%u products in one set (at most %u)", n,
				    PT_KERN_SET_MAX);
	for (uint32_t i = 0; i < n; i++) {
		const struct pt_kern_ops *ops;
		enum pt_status st = checked_ops(&set[i].w, &ops, err);
		if (st != PT_OK)
			return st;
		segs[i] = (struct seg){ &set[i].w, NULL, ops, NULL, set[i].xq, NULL, set[i].y,
					NULL, NULL, set[i].w.rows, 0 };
		total += set[i].w.rows;
		rb = set[i].w.row_bytes > rb ? set[i].w.row_bytes : rb;
	}
	struct set_job jb = { segs, n, 0, NULL };
	run_set(&jb, total, rb, pool);
	return PT_OK;
}

enum pt_status pt_kern_glu_set(const struct pt_kern_glu *set, uint32_t n, pt_kern_glu_fn act,
			       pt_pool *pool, struct pt_error *err)
{
	struct seg segs[PT_KERN_SET_MAX];
	uint64_t total = 0;
	size_t rb = 0;
	if (n > PT_KERN_SET_MAX)
		return pt_error_set(err, PT_E_INVALID, "%u products in one set (at most %u)", n,
				    PT_KERN_SET_MAX);
	for (uint32_t i = 0; i < n; i++) {
		const struct pt_kern_glu *g = &set[i];
		const bool fused = g->up.data == NULL;
		const struct pt_kern_ops *ops, *uops;
		enum pt_status st = checked_ops(&g->gate, &ops, err);
		uops = ops;
		if (st == PT_OK && !fused)
			st = checked_ops(&g->up, &uops, err);
		if (st != PT_OK)
			return st;
		const uint64_t nf = fused ? g->gate.rows / 2 : g->gate.rows;
		if ((fused && g->gate.rows % 2) ||
		    (!fused && (g->up.rows != nf || g->up.cols != g->gate.cols)))
			return pt_error_set(err, PT_E_INVALID, "gate/up shapes disagree");
		segs[i] = (struct seg){ &g->gate, fused ? NULL : &g->up, ops, uops, g->xq,
					fused ? g->xq : g->xq_up, g->y, g->bias_gate, g->bias_up,
					nf, (size_t)nf * g->gate.row_bytes };
		total += nf;
		const size_t ub = fused ? g->gate.row_bytes : g->up.row_bytes;
		rb = g->gate.row_bytes + ub > rb ? g->gate.row_bytes + ub : rb;
	}
	struct set_job jb = { segs, n, 0, act };
	run_set(&jb, total, rb, pool);
	return PT_OK;
}
