/* repack.c - pt_model_repack (repack.h).
 *
 * A 3-D expert tensor is n_expert matrices of rows x cols one after another, so with rows a
 * multiple of 16 it packs as one (n_expert * rows)-row matrix: expert e's bands are bands
 * e * rows / 16 onwards, and its X16 copy is rows / 16 bands long. */
#include "model/repack.h"

#include <string.h>
#include <time.h>

#include "kern/kern.h"
#include "util/alloc.h"

#define PACK_TASK_BANDS 64 /* bands per pool task (~1.2 MiB of a 2048-column matrix) */

struct pack_job {
	enum pt_type type;
	const uint8_t *src;
	size_t row_bytes;
	uint64_t cols, bands;
	uint8_t *dst;
};

static void pack_task(void *ctx, uint32_t task, uint32_t worker)
{
	const struct pack_job *j = ctx;
	const uint64_t b0 = (uint64_t)task * PACK_TASK_BANDS;
	const uint64_t b1 = b0 + PACK_TASK_BANDS < j->bands ? b0 + PACK_TASK_BANDS : j->bands;
	(void)worker;
	pt_kern_x16_pack(j->type, j->src, j->row_bytes, j->cols, b0, b1, j->dst);
}

/* Anonymous memory for a copy, in 2 MiB pages where the kernel gives them (a matrix is read
 * sequentially: fewer TLB misses), registered with the model to be unmapped at close. */
static void *copy_buffer(struct pt_model *m, size_t bytes)
{
	if (m->n_repack == m->cap_repack) {
		const uint32_t cap = m->cap_repack ? 2 * m->cap_repack : 64;
		struct pt_model_buf *b = pt_realloc(m->repack, (size_t)cap * sizeof *b);
		if (!b)
			return NULL;
		m->repack = b;
		m->cap_repack = cap;
	}
	void *p = pt_alloc_pages(bytes);
	if (!p)
		return NULL;
	m->repack[m->n_repack++] = (struct pt_model_buf){ p, bytes };
	return p;
}

/* rows x cols of type at src into a new X16 copy; *out NULL where the matrix does not
 * qualify (a type without the layout or kernel at this level, or the shape). */
static enum pt_status pack_matrix(struct pt_model *m, enum pt_type type, const uint8_t *src,
				  size_t row_bytes, uint64_t rows, uint64_t cols, pt_pool *pool,
				  struct pt_repack_stats *s, const uint8_t **out,
				  struct pt_error *err)
{
	*out = NULL;
	uint64_t rb;
	if (!pt_kern_x16_native(type) || !pt_kern_x16_ok(type, rows, cols) ||
	    pt_type_row_bytes(type, cols, &rb) != 0 || rb != row_bytes)
		return PT_OK;
	const size_t band = pt_kern_x16_band(type, cols);
	uint64_t bytes;
	if (pt_mul_overflow(rows / PT_KERN_X16_ROWS, band, &bytes) || bytes > SIZE_MAX)
		return pt_error_set(err, PT_E_NOMEM, "repack: %llu x %llu matrix too large",
				    (unsigned long long)rows, (unsigned long long)cols);
	uint8_t *dst = copy_buffer(m, (size_t)bytes);
	if (!dst)
		return pt_error_set(err, PT_E_NOMEM, "repack: cannot allocate %llu bytes for "
				    "an interleaved copy", (unsigned long long)bytes);
	struct pack_job j = { type, src, row_bytes, cols, rows / PT_KERN_X16_ROWS, dst };
	const uint64_t tasks = (j.bands + PACK_TASK_BANDS - 1) / PACK_TASK_BANDS;
	pt_pool_run(pool, pack_task, &j, (uint32_t)tasks);
	(void)pt_gguf_release(m->g, src, (size_t)(rows * row_bytes)); /* free for the next copy */
	s->bytes_in += rows * row_bytes;
	s->bytes_out += bytes;
	s->matrices++;
	*out = dst;
	return PT_OK;
}

/* A layer's resident matrices the repack may copy (not wk_b / wv_b: the forward pass slices
 * them per head; not the F32 router). */
#define N_COPYABLE 19
static void copyable_mats(struct pt_layer_weights *L, struct pt_kern_mat *mats[N_COPYABLE])
{
	struct pt_kern_mat *const all[N_COPYABLE] = {
		&L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down,
		&L->sh_gate, &L->sh_up, &L->sh_down, &L->ssm_qkv, &L->ssm_z, &L->ssm_beta,
		&L->ssm_alpha, &L->ssm_out, &L->wq_a, &L->wq_b, &L->wkv_a
	};
	memcpy(mats, all, sizeof all);
}

static enum pt_status repack_mat(struct pt_model *m, struct pt_kern_mat *w, pt_pool *pool,
				 struct pt_repack_stats *s, struct pt_error *err)
{
	if (!w->data || w->layout != PT_KERN_LAYOUT_ROWS)
		return PT_OK;
	const uint8_t *p;
	enum pt_status st = pack_matrix(m, w->type, w->data, w->row_bytes, w->rows, w->cols, pool, s,
					&p, err);
	if (st == PT_OK && p) {
		w->data = p;
		w->layout = PT_KERN_LAYOUT_X16;
	}
	return st;
}

static enum pt_status repack_exps(struct pt_model *m, struct pt_expert_mat *x, pt_pool *pool,
				  struct pt_repack_stats *s, struct pt_error *err)
{
	if (!x->data || x->layout != PT_KERN_LAYOUT_ROWS ||
	    x->expert_bytes != x->rows * x->row_bytes || x->rows % PT_KERN_X16_ROWS)
		return PT_OK;
	uint64_t rows;
	if (pt_mul_overflow(x->rows, m->hp.n_expert, &rows))
		return PT_OK;
	const uint8_t *p;
	enum pt_status st = pack_matrix(m, x->type, x->data, x->row_bytes, rows, x->cols, pool, s,
					&p, err);
	if (st == PT_OK && p) {
		x->data = p;
		x->expert_bytes = (size_t)(x->rows / PT_KERN_X16_ROWS) *
				  pt_kern_x16_band(x->type, x->cols);
		x->layout = PT_KERN_LAYOUT_X16;
	}
	return st;
}

enum pt_status pt_model_repack(struct pt_model *m, bool experts, pt_pool *pool,
			       struct pt_repack_stats *stats, struct pt_error *err)
{
	struct pt_repack_stats s = { 0 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum pt_status st = PT_OK;
	/* a head tied to the token embedding is repacked too (Gemma 4's is a fifth of a decode
	 * token's bytes): the embedding rows are then read back out of the copy */
	const bool tied = m->tok_embd && m->output.data == m->tok_embd->data;
	st = repack_mat(m, &m->output, pool, &s, err);
	if (st == PT_OK && tied && m->output.layout == PT_KERN_LAYOUT_X16)
		m->embd_in_output = true;
	for (uint32_t il = 0; st == PT_OK && il < m->hp.n_layer; il++) {
		struct pt_layer_weights *L = &m->layers[il];
		struct pt_kern_mat *mats[N_COPYABLE];
		copyable_mats(L, mats);
		for (size_t i = 0; st == PT_OK && i < N_COPYABLE; i++)
			st = repack_mat(m, mats[i], pool, &s, err);
		struct pt_expert_mat *ex[] = { &L->gate_exps, &L->up_exps, &L->gate_up_exps,
					       &L->down_exps };
		for (size_t i = 0; experts && st == PT_OK && i < 4; i++)
			st = repack_exps(m, ex[i], pool, &s, err);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	if (stats)
		*stats = s;
	return st;
}

uint32_t pt_model_x16_rows(struct pt_model *m)
{
	uint32_t n = 0;
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		struct pt_layer_weights *L = &m->layers[il];
		struct pt_expert_mat *xs[] = { &L->gate_exps, &L->up_exps, &L->gate_up_exps,
					       &L->down_exps };
		for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
			struct pt_expert_mat *x = xs[k];
			if (!x->rows || x->layout != PT_KERN_LAYOUT_ROWS ||
			    !pt_kern_x16_rows_native(x->type) ||
			    !pt_kern_x16_ok(x->type, x->rows, x->cols))
				continue;
			x->layout = PT_KERN_LAYOUT_X16_ROWS;
			n++;
		}
	}
	return n;
}

/* A resident matrix still read from the mapping (data in it, as stored) gets read-ahead back
 * and its pages read now; adds its bytes to *bytes. */
static void advise_whole(const struct pt_model *m, const struct pt_kern_mat *w, uint64_t *bytes)
{
	if (!w->data || w->layout != PT_KERN_LAYOUT_ROWS || !w->rows)
		return;
	const size_t len = (size_t)(w->rows * w->row_bytes);
	if (pt_gguf_advise_read_whole(m->g, w->data, len))
		*bytes += len;
}

uint64_t pt_model_advise_mapped(struct pt_model *m)
{
	uint64_t bytes = 0;
	advise_whole(m, &m->output, &bytes);
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		struct pt_layer_weights *L = &m->layers[il];
		struct pt_kern_mat *mats[N_COPYABLE];
		copyable_mats(L, mats);
		for (size_t i = 0; i < N_COPYABLE; i++)
			advise_whole(m, mats[i], &bytes);
		advise_whole(m, &L->router, &bytes);
		advise_whole(m, &L->wk_b, &bytes);
		advise_whole(m, &L->wv_b, &bytes);
	}
	return bytes;
}
