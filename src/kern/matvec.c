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

static void run_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct job *jb = ctx;
	const struct pt_kern_mat *w = jb->w;
	const uint8_t *data = w->data;
	uint64_t r0 = (uint64_t)task * jb->rows_per_task;
	uint64_t r1 = r0 + jb->rows_per_task < w->rows ? r0 + jb->rows_per_task : w->rows;
	(void)worker;
	for (uint64_t t0 = r0; t0 < r1; t0 += MATMUL_TILE_ROWS) {
		uint64_t t1 = t0 + MATMUL_TILE_ROWS < r1 ? t0 + MATMUL_TILE_ROWS : r1;
		for (uint64_t tok = 0; tok < jb->n_tok; tok++) {
			const uint8_t *xq = jb->xq + tok * jb->act_row_bytes;
			float *y = jb->y + tok * w->rows;
			for (uint64_t r = t0; r < t1; r++)
				y[r] = jb->ops->dot(w->cols, data + r * w->row_bytes, xq);
		}
	}
}

static void run_rows(struct job *jb, pt_pool *pool)
{
	uint64_t threads = pt_pool_threads(pool);
	uint64_t per = (jb->w->rows + threads * TASKS_PER_THREAD - 1) / (threads * TASKS_PER_THREAD);
	if (per < MIN_ROWS_PER_TASK)
		per = MIN_ROWS_PER_TASK;
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

enum pt_status pt_kern_matmul(const struct pt_kern_mat *w, const float *x, uint64_t n_tok,
			      float *y, void *scratch, pt_pool *pool, struct pt_error *err)
{
	const struct pt_kern_ops *ops;
	size_t arow;
	enum pt_status st = check_mat(w, &ops, &arow, err);
	if (st != PT_OK)
		return st;
	uint8_t *xq = scratch;
	for (uint64_t t = 0; t < n_tok; t++)
		pt_kern_quantize_row(ops->act_type, x + t * w->cols, xq + t * arow, w->cols);
	return pt_kern_matmul_q(w, xq, n_tok, y, pool, err);
}

enum pt_status pt_kern_matvec(const struct pt_kern_mat *w, const float *x, float *y,
			      void *scratch, pt_pool *pool, struct pt_error *err)
{
	return pt_kern_matmul(w, x, 1, y, scratch, pool, err);
}
