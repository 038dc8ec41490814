/* gpu_fwd.cu - the decode forward pass on the device (gpu_fwd.h).
 *
 * Per token, on one compute stream: the embedding row (dequantized on the host, as the
 * embedding table stays there) is copied in; every layer runs model/forward.c's sequence of
 * operations on device buffers; the output head's logits are copied back.  Routed experts:
 * the router and top-k run on the device.  When every expert is resident, a kernel turns the
 * chosen ids into the experts' matrix addresses (no host round trip).  Otherwise the ids
 * come back to the host (an event wait on the compute stream, never a device-wide sync),
 * the store pins them, the products of the hits are queued at once, the misses are copied
 * from the host mapping through pinned staging on the copy stream, and the compute stream
 * waits on that copy's event before the misses' products.  Each expert writes its own
 * top-k rank's rows and the ranks are summed in order, so the logits are the same for every
 * budget. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "cuda/gpu_fwd.h"
#include "expert/plan.h"
#include "expert/vstore.h"
#include "kern/kern.h"
#include "quant/quant.h"
#include "util/alloc.h"
}
#include "cuda/gpu_internal.h"

#include "cuda/gpu_fwd_state.h"

static enum pt_status cuda_ok(cudaError_t e, const char *what, struct pt_error *err)
{
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, what);
}

/* Device memory for the resident core: counted in the sizing pass, allocated after. */
static enum pt_status dalloc(pt_gpu_fwd *g, void **p, size_t bytes, struct pt_error *err)
{
	*p = NULL;
	if (g->dry) {
		g->counted += (bytes + 255) / 256 * 256;
		return PT_OK;
	}
	if (g->n_allocs == MAX_ALLOCS)
		return pt_error_set(err, PT_E_LIMIT, "CUDA: more than %d device tensors", MAX_ALLOCS);
	enum pt_status st = pt_gpu_alloc(p, bytes, err);
	if (st == PT_OK)
		g->allocs[g->n_allocs++] = *p;
	return st;
}

enum pt_status pt_gpu_fwd_dalloc(pt_gpu_fwd *g, void **p, size_t bytes, struct pt_error *err)
{
	return dalloc(g, p, bytes, err);
}

static enum pt_status up_f32(pt_gpu_fwd *g, const float *h, size_t n, const float **out,
			     struct pt_error *err)
{
	*out = NULL;
	if (!h)
		return PT_OK;
	void *d;
	enum pt_status st = dalloc(g, &d, n * sizeof(float), err);
	if (st == PT_OK && d)
		st = cuda_ok(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), "upload",
			     err);
	*out = (const float *)d;
	return st;
}

static bool type_ok(uint32_t t)
{
	return t == PT_TYPE_F32 || t == PT_TYPE_F16 || t == PT_TYPE_Q4_0 || t == PT_TYPE_Q5_0 ||
	       t == PT_TYPE_Q8_0 || t == PT_TYPE_Q4_K || t == PT_TYPE_Q5_K || t == PT_TYPE_Q6_K;
}

static enum pt_status no_kernel(uint32_t t, const char *what, struct pt_error *err)
{
	return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: %s is %s, which has no device "
			    "kernel yet (F32, F16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K)", what,
			    pt_type_name((enum pt_type)t));
}

static uint32_t act_of(uint32_t type)
{
	const struct pt_kern_ops *ops = pt_kern_ops((enum pt_type)type);
	return ops ? (uint32_t)ops->act_type : (uint32_t)PT_TYPE_F32;
}

/* A resident matrix; a type without a device kernel is dequantized to F32 on load (its
 * activation format stays the stored type's, as on the CPU). */
static enum pt_status up_mat(pt_gpu_fwd *g, const struct pt_kern_mat *h, dmat *out,
			     struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	if (!h->data)
		return PT_OK;
	out->type = h->type;
	out->act = act_of(h->type);
	out->rows = h->rows;
	out->cols = h->cols;
	out->row_bytes = h->row_bytes;
	const bool deq = !type_ok(h->type);
	if (deq && !pt_type_traits(h->type)->can_dequant)
		return no_kernel(h->type, "a resident matrix", err);
	if (deq) {
		out->type = PT_TYPE_F32;
		out->row_bytes = (size_t)h->cols * 4;
	}
	const size_t bytes = (size_t)out->rows * out->row_bytes;
	void *d;
	enum pt_status st = dalloc(g, &d, bytes, err);
	out->d = (const uint8_t *)d;
	if (st != PT_OK || !d)
		return st;
	if (!deq)
		return cuda_ok(cudaMemcpy(d, h->data, bytes, cudaMemcpyHostToDevice), "upload", err);
	float *tmp = (float *)pt_mallocn(h->cols, sizeof(float));
	if (!tmp)
		return pt_error_set(err, PT_E_NOMEM, "CUDA: out of memory");
	for (uint64_t r = 0; st == PT_OK && r < h->rows; r++) {
		st = pt_quant_dequant_row(h->type, (const uint8_t *)h->data + r * h->row_bytes, tmp,
					  h->cols, err);
		if (st == PT_OK)
			st = cuda_ok(cudaMemcpy((uint8_t *)d + r * out->row_bytes, tmp, out->row_bytes,
						cudaMemcpyHostToDevice), "upload", err);
	}
	pt_free(tmp);
	return st;
}

/* The resident core of one layer (1-D tensors by their known lengths). */
static enum pt_status up_layer(pt_gpu_fwd *g, uint32_t il, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct pt_layer_weights *H = &g->m->layers[il];
	struct glayer *L = &g->L[il];
	const size_t D = hp->n_embd, E = hp->n_expert;
	const size_t hk = pt_hparams_head_dim_k(hp, il), hv = pt_hparams_head_dim_v(hp, il);
	const size_t nh = hp->n_head, nkv = hp->n_head_kv[il];
	struct {
		const float *h;
		size_t n;
		const float **d;
	} vecs[] = {
		{ H->attn_norm, D, &L->attn_norm }, { H->q_norm, hk, &L->q_norm },
		{ H->k_norm, hk, &L->k_norm }, { H->post_attn_norm, D, &L->post_attn_norm },
		{ H->ffn_norm, D, &L->ffn_norm }, { H->post_ffw_norm, D, &L->post_ffw_norm },
		{ H->pre_ffw_norm_2, D, &L->pre_ffw_norm_2 },
		{ H->post_ffw_norm_1, D, &L->post_ffw_norm_1 },
		{ H->post_ffw_norm_2, D, &L->post_ffw_norm_2 }, { H->bq, nh * hk, &L->bq },
		{ H->bk, nkv * hk, &L->bk }, { H->bv, nkv * hv, &L->bv }, { H->bo, D, &L->bo },
		{ H->router_scale, D, &L->router_scale }, { H->exp_probs_b, E, &L->exp_probs_b },
		{ H->down_exps_scale, E, &L->down_exps_scale },
		{ H->layer_out_scale, 1, &L->layer_out_scale },
	};
	enum pt_status st = PT_OK;
	for (size_t i = 0; st == PT_OK && i < sizeof vecs / sizeof vecs[0]; i++)
		st = up_f32(g, vecs[i].h, vecs[i].n, vecs[i].d, err);
	const struct pt_kern_mat *hm[] = { &H->wq, &H->wk, &H->wv, &H->wqkv, &H->wo,
					   &H->ffn_gate, &H->ffn_up, &H->ffn_down, &H->sh_gate,
					   &H->sh_up, &H->sh_down, &H->router };
	dmat *dm[] = { &L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->ffn_gate, &L->ffn_up,
		       &L->ffn_down, &L->sh_gate, &L->sh_up, &L->sh_down, &L->router };
	for (size_t i = 0; st == PT_OK && i < sizeof hm / sizeof hm[0]; i++)
		st = up_mat(g, hm[i], dm[i], err);
	if (st == PT_OK && H->is_moe) {
		const struct pt_expert_mat *xm[] = { &H->gate_exps, &H->up_exps, &H->gate_up_exps,
						     &H->down_exps };
		for (int i = 0; i < 4; i++)
			if (xm[i]->data && !type_ok(xm[i]->type))
				return no_kernel(xm[i]->type, "a routed expert matrix", err);
		if (hp->n_expert > 1024 || hp->n_expert_used > 32)
			return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: top-%u of %u experts "
					    "(the device router takes at most 1024 and 32)",
					    hp->n_expert_used, hp->n_expert);
	}
	return st;
}

static enum pt_status up_core(pt_gpu_fwd *g, struct pt_error *err)
{
	const struct pt_model *m = g->m;
	const struct pt_hparams *hp = &m->hp;
	enum pt_status st = up_f32(g, m->output_norm, hp->n_embd, &g->output_norm, err);
	if (st == PT_OK)
		st = up_f32(g, m->rope_freqs, hp->n_rot / 2, &g->rope_freqs, err);
	if (st == PT_OK)
		st = up_mat(g, &m->output, &g->output, err);
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++)
		st = up_layer(g, il, err);
	return st;
}

static void widths(pt_gpu_fwd *g)
{
	const struct pt_model *m = g->m;
	const struct pt_hparams *hp = &m->hp;
	g->w_ff = g->w_qk = g->n_k = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const uint32_t hk = pt_hparams_head_dim_k(hp, il), hv = pt_hparams_head_dim_v(hp, il);
		const struct pt_layer_weights *L = &m->layers[il];
		g->w_qk = g->w_qk > hp->n_head * (hk > hv ? hk : hv) ? g->w_qk
								   : hp->n_head * (hk > hv ? hk : hv);
		g->n_k = g->n_k > hp->n_head_kv[il] * (hk > hv ? hk : hv)
				 ? g->n_k : hp->n_head_kv[il] * (hk > hv ? hk : hv);
		const uint64_t ff[] = { L->ffn_gate.rows, L->sh_gate.rows, L->gate_exps.rows,
					L->gate_up_exps.rows / 2 };
		for (int i = 0; i < 4; i++)
			g->w_ff = ff[i] > g->w_ff ? (uint32_t)ff[i] : g->w_ff;
	}
}

static uint64_t kv_rows(const pt_gpu_fwd *g, uint32_t il)
{
	const struct pt_hparams *hp = &g->m->hp;
	/* a sliding layer's ring: the window plus a prefill chunk less one, so writing a
	 * chunk's keys never overwrites one that a token of the chunk still reads */
	if (hp->is_swa[il] && hp->n_swa > 0 && (uint64_t)hp->n_swa + PT_GPU_PF_CHUNK - 1 < g->n_ctx)
		return (uint64_t)hp->n_swa + PT_GPU_PF_CHUNK - 1;
	return g->n_ctx;
}

static uint64_t kv_bytes(const pt_gpu_fwd *g)
{
	const struct pt_hparams *hp = &g->m->hp;
	uint64_t b = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++)
		b += kv_rows(g, il) * hp->n_head_kv[il] *
		     (pt_hparams_head_dim_k(hp, il) + pt_hparams_head_dim_v(hp, il)) * 4;
	return b;
}

/* Float buffers of the token loop, in order of the table in alloc_scratch. */
static size_t hdv_max(const pt_gpu_fwd *g)
{
	size_t m = 0;
	for (uint32_t il = 0; il < g->m->hp.n_layer; il++) {
		const size_t v = pt_hparams_head_dim_v(&g->m->hp, il);
		m = v > m ? v : m;
	}
	return m;
}

#define N_SCRATCH 22
static void scratch_sizes(const pt_gpu_fwd *g, size_t n[N_SCRATCH])
{
	const struct pt_hparams *hp = &g->m->hp;
	const size_t D = hp->n_embd, K = hp->n_expert_used ? hp->n_expert_used : 1;
	const size_t E = hp->n_expert ? hp->n_expert : 1, F = g->w_ff ? g->w_ff : 1;
	const size_t qkv = (size_t)g->w_qk + 2 * (size_t)g->n_k;
	size_t xr = D > g->w_qk ? D : g->w_qk;
	xr = xr > F ? xr : F;
	const size_t v[N_SCRATCH] = { D, D, D, D, D, g->w_qk, g->n_k, g->n_k, g->w_qk, qkv,
				      (K + 1) * 2 * F, F, F, K * F, D, K * D, 2 * E,
				      (size_t)hp->n_head * ((g->n_ctx + 255) / 256) * (2 + hdv_max(g)),
				      g->m->output.rows, K, xr,
				      K * F };
	memcpy(n, v, sizeof v);
}

static uint64_t scratch_bytes(const pt_gpu_fwd *g)
{
	size_t n[N_SCRATCH];
	uint64_t b = 0;
	scratch_sizes(g, n);
	for (int i = 0; i < N_SCRATCH; i++)
		b += (n[i] * 4 + 255) / 256 * 256;
	return b + 256 + (uint64_t)g->m->hp.n_layer * 64 * 32 + (uint64_t)g->m->hp.n_layer *
		   g->m->hp.n_expert * 32 + pt_gpu_prefill_bytes(g, PT_GPU_PF_CHUNK);
}

static enum pt_status alloc_scratch(pt_gpu_fwd *g, struct pt_error *err)
{
	size_t n[N_SCRATCH];
	scratch_sizes(g, n);
	float **bufs[N_SCRATCH] = { &g->x, &g->h, &g->h2, &g->t1, &g->t2, &g->q, &g->k, &g->v,
				    &g->att, &g->qkv, &g->gb, &g->ub, &g->xa, &g->ab, &g->xg,
				    &g->yk, &g->rl, &g->scores, &g->logits, &g->w, &g->xr,
				    &g->xr2 };
	enum pt_status st = PT_OK;
	for (int i = 0; st == PT_OK && i < N_SCRATCH; i++)
		st = dalloc(g, (void **)bufs[i], n[i] * sizeof(float), err);
	void *p;
	if (st == PT_OK && (st = dalloc(g, &p, 64 * sizeof(int32_t), err)) == PT_OK)
		g->ids = (int32_t *)p;
	if (st == PT_OK && (st = dalloc(g, &p, sizeof(int64_t), err)) == PT_OK)
		g->dpos = (int64_t *)p;
	const struct pt_hparams *hp = &g->m->hp;
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++) {
		struct glayer *L = &g->L[il];
		const size_t rows = kv_rows(g, il), nk = hp->n_head_kv[il] *
			(size_t)pt_hparams_head_dim_k(hp, il), nv = hp->n_head_kv[il] *
			(size_t)pt_hparams_head_dim_v(hp, il);
		L->cap = (int64_t)rows;
		st = dalloc(g, (void **)&L->kc, rows * nk * 4, err);
		if (st == PT_OK)
			st = dalloc(g, (void **)&L->vc, rows * nv * 4, err);
		if (st == PT_OK && g->m->layers[il].is_moe) {
			st = dalloc(g, (void **)&L->desc, 64 * sizeof(struct pt_gpu_xdesc), err);
			if (st == PT_OK)
				st = cuda_ok(cudaMallocHost((void **)&L->hdesc,
							    64 * sizeof(struct pt_gpu_xdesc)),
					     "pinned allocation", err);
		}
	}
	if (st == PT_OK)
		st = cuda_ok(cudaMallocHost((void **)&g->hx, (size_t)hp->n_embd * 4), "pinned "
			     "allocation", err);
	if (st == PT_OK)
		st = cuda_ok(cudaMallocHost((void **)&g->hlogits, (size_t)g->m->output.rows * 4),
			     "pinned allocation", err);
	if (st == PT_OK)
		st = cuda_ok(cudaMallocHost((void **)&g->hids, 64 * sizeof(int32_t)),
			     "pinned allocation", err);
	if (st == PT_OK)
		st = cuda_ok(cudaMallocHost((void **)&g->hpos, sizeof(int64_t)), "pinned allocation",
			     err);
	if (st == PT_OK)
		st = pt_gpu_prefill_alloc(g, err);
	return st;
}

/* The store's copy: at create (filling every slot) a plain copy; in the token loop the
 * copies are queued (pending) and issued after the hits' products (issue_copies). */
extern "C" enum pt_status gpu_copy_cb(void *ctx, uint64_t off, const void *src, uint64_t bytes,
				      struct pt_error *err)
{
	pt_gpu_fwd *g = (pt_gpu_fwd *)ctx;
	if (!g->defer)
		return cuda_ok(cudaMemcpy(g->pool + off, src, bytes, cudaMemcpyHostToDevice),
			       "expert upload", err);
	if (g->n_pend == g->max_pend)
		return pt_error_set(err, PT_E_LIMIT, "CUDA: too many expert copies in one layer");
	g->pend[g->n_pend++] = (struct pending){ off, src, bytes };
	return PT_OK;
}

/* The queued misses through the pinned staging buffer on the copy stream; the compute stream
 * waits for them. */
static enum pt_status issue_copies(pt_gpu_fwd *g, struct pt_error *err);
enum pt_status pt_gpu_fwd_issue_copies(pt_gpu_fwd *g, struct pt_error *err)
{
	return issue_copies(g, err);
}

static enum pt_status issue_copies(pt_gpu_fwd *g, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	if (g->direct) { /* DMA from the registered mapping itself */
		for (uint32_t i = 0; st == PT_OK && i < g->n_pend; i++) {
			const struct pending *p = &g->pend[i];
			st = cuda_ok(cudaMemcpyAsync(g->pool + p->off, p->src, p->bytes,
						     cudaMemcpyHostToDevice, g->cs), "expert copy", err);
			g->st.bytes_copied += p->bytes;
		}
		g->n_pend = 0;
		if (st == PT_OK)
			st = cuda_ok(cudaEventRecord(g->ev_copy, g->cs), "event", err);
		if (st == PT_OK)
			st = cuda_ok(cudaStreamWaitEvent(g->s, g->ev_copy, 0), "event wait", err);
		return st;
	}
	/* the staging buffer's last copies (an earlier layer) must be done before reuse */
	st = cuda_ok(cudaEventSynchronize(g->ev_copy), "copy wait", err);
	uint64_t at = 0;
	for (uint32_t i = 0; st == PT_OK && i < g->n_pend; i++) {
		const struct pending *p = &g->pend[i];
		if (at + p->bytes > g->staging_bytes)
			return pt_error_set(err, PT_E_LIMIT, "CUDA: expert staging overflow");
		memcpy(g->staging + at, p->src, p->bytes);
		st = cuda_ok(cudaMemcpyAsync(g->pool + p->off, g->staging + at, p->bytes,
					     cudaMemcpyHostToDevice, g->cs), "expert copy", err);
		at += (p->bytes + 255) / 256 * 256;
		g->st.bytes_copied += p->bytes;
	}
	g->n_pend = 0;
	if (st == PT_OK)
		st = cuda_ok(cudaEventRecord(g->ev_copy, g->cs), "event", err);
	if (st == PT_OK)
		st = cuda_ok(cudaStreamWaitEvent(g->s, g->ev_copy, 0), "event wait", err);
	return st;
}

static enum pt_status round_in(float *y, const float *x, uint64_t n, uint32_t act,
			       struct pt_error *err)
{
	if (!pt_gpu_act_round(y, x, (int)n, act))
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: activation format %s "
				    "for %llu values", pt_type_name((enum pt_type)act),
				    (unsigned long long)n);
	return PT_OK;
}

/* y = W x, x first rounded through W's activation format into g->xr (as the CPU path's
 * product quantizes it). */
static enum pt_status mv(pt_gpu_fwd *g, const dmat *w, const float *x, float *y,
			 struct pt_error *err)
{
	if (w->act != PT_TYPE_F32) {
		enum pt_status st = round_in(g->xr, x, w->cols, w->act, err);
		if (st != PT_OK)
			return st;
		x = g->xr;
	}
	return pt_gpu_matvec(w->type, w->rows, w->cols, w->row_bytes, w->d, x, y, err);
}

static bool geglu(const pt_gpu_fwd *g)
{
	return g->rc->act == PT_ACT_GEGLU;
}

/* out = down(act(gate in) * (up in)); the input rounded once when gate and up share its
 * format. */
static enum pt_status mlp(pt_gpu_fwd *g, const dmat *gt, const dmat *up, const dmat *dn,
			  const float *in, float *out, struct pt_error *err)
{
	enum pt_status st;
	if (gt->act == up->act && gt->act != PT_TYPE_F32 && gt->cols == up->cols) {
		st = round_in(g->xr, in, gt->cols, gt->act, err);
		if (st == PT_OK)
			st = pt_gpu_matvec(gt->type, gt->rows, gt->cols, gt->row_bytes, gt->d, g->xr,
					   g->gb, err);
		if (st == PT_OK)
			st = pt_gpu_matvec(up->type, up->rows, up->cols, up->row_bytes, up->d, g->xr,
					   g->ub, err);
	} else {
		st = mv(g, gt, in, g->gb, err);
		if (st == PT_OK)
			st = mv(g, up, in, g->ub, err);
	}
	if (st != PT_OK)
		return st;
	pt_gpu_glu(g->xa, g->gb, g->ub, (int)gt->rows, 1, 0, geglu(g));
	return mv(g, dn, g->xa, out, err);
}

static void norm(float *y, const float *x, const float *w, int n, int rows, float eps)
{
	struct pt_error ignore;
	pt_gpu_rmsnorm(y, x, w, n, rows, eps, &ignore); /* shapes are the model's, checked */
}

static enum pt_status attention(pt_gpu_fwd *g, uint32_t il, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct glayer *L = &g->L[il];
	const int D = (int)hp->n_embd, nh = (int)hp->n_head, nkv = (int)hp->n_head_kv[il];
	const int hk = (int)pt_hparams_head_dim_k(hp, il), hv = (int)pt_hparams_head_dim_v(hp, il);
	const int nq = nh * hk, nk = nkv * hk, nv = nkv * hv;
	const bool swa = hp->is_swa[il];
	const int n_rot = (int)(swa ? hp->n_rot_swa : hp->n_rot);
	const float base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
	const float *ff = (!swa && g->rc->rope_freqs_full) ? g->rope_freqs : NULL;
	float *q = g->q, *k = g->k, *v = g->v;
	enum pt_status st;

	norm(g->h, g->x, L->attn_norm, D, 1, hp->rms_eps);
	if (L->wqkv.d) {
		st = mv(g, &L->wqkv, g->h, g->qkv, err);
		q = g->qkv, k = g->qkv + nq, v = g->qkv + nq + nk;
	} else {
		st = mv(g, &L->wq, g->h, q, err);
		if (st == PT_OK)
			st = mv(g, &L->wk, g->h, k, err);
		if (st == PT_OK && L->wv.d)
			st = mv(g, &L->wv, g->h, v, err);
		else if (st == PT_OK) /* K=V layers: V is the raw K projection */
			st = cuda_ok(cudaMemcpyAsync(v, k, (size_t)nv * 4, cudaMemcpyDeviceToDevice,
						     g->s), "copy", err);
	}
	if (st != PT_OK)
		return st;
	if (L->bq)
		pt_gpu_add(q, L->bq, nq);
	if (L->bk)
		pt_gpu_add(k, L->bk, nk);
	if (L->bv)
		pt_gpu_add(v, L->bv, nv);
	if (L->q_norm)
		norm(q, q, L->q_norm, hk, nh, hp->rms_eps);
	if (L->k_norm)
		norm(k, k, L->k_norm, hk, nkv, hp->rms_eps);
	if (g->rc->v_norm)
		norm(v, v, NULL, hv, nkv, hp->rms_eps);
	/* positions from device memory (g->dpos): one captured step serves every position */
	pt_gpu_rope_neox(q, nh, hk, n_rot, g->dpos, base, ff);
	pt_gpu_rope_neox(k, nkv, hk, n_rot, g->dpos, base, ff);
	/* the CPU path's default F16 cache: K, V and the query rounded to F16 */
	pt_gpu_act_round(q, q, nq, PT_TYPE_F16);
	pt_gpu_kv_store(L->kc, L->vc, k, v, nk, nv, g->dpos, L->cap);
	const int64_t window = swa && hp->n_swa > 0 ? (int64_t)hp->n_swa : 0;
	const int64_t max_count = window > 0 && window < (int64_t)g->n_ctx ? window
									    : (int64_t)g->n_ctx;
	const float scale = g->rc->attn_scale > 0.0f ? g->rc->attn_scale : 1.0f / sqrtf((float)hk);
	pt_gpu_attention(q, L->kc, L->vc, g->att, g->scores, nh, nkv, hk, hv, g->dpos, window,
			 max_count, L->cap, scale);
	st = mv(g, &L->wo, g->att, g->t1, err);
	if (st != PT_OK)
		return st;
	if (L->bo)
		pt_gpu_add(g->t1, L->bo, D);
	if (L->post_attn_norm)
		norm(g->t1, g->t1, L->post_attn_norm, D, 1, hp->rms_eps);
	pt_gpu_add(g->x, g->t1, D);
	return PT_OK;
}

/* The products of n experts of desc (device) on in: gate/up, activation, down into their
 * ranks' rows of yk. */
static enum pt_status expert_batch(pt_gpu_fwd *g, uint32_t il, const struct pt_gpu_xdesc *desc,
				   uint32_t n, const float *in, struct pt_error *err)
{
	const struct pt_layer_weights *H = &g->m->layers[il];
	const size_t D = g->m->hp.n_embd, K = g->m->hp.n_expert_used;
	enum pt_status st = PT_OK;
	if (n == 0)
		return PT_OK;
	const struct pt_expert_mat *dn = &H->down_exps;
	const uint32_t nf = (uint32_t)dn->cols;
	const bool fused = H->gate_up_exps.data != NULL;
	const struct pt_expert_mat *mats[2] = { fused ? &H->gate_up_exps : &H->gate_exps,
						fused ? NULL : &H->up_exps };
	uint32_t rounded = PT_TYPE_F32; /* the format g->xr holds `in` in (gate and up share it) */
	for (int i = 0; st == PT_OK && i < 2; i++) {
		const struct pt_expert_mat *x = mats[i];
		if (!x)
			continue;
		const uint32_t act = act_of(x->type);
		const float *xin = in;
		if (act != PT_TYPE_F32 && act != rounded) {
			st = round_in(g->xr, in, x->cols, act, err);
			rounded = act;
		}
		if (act != PT_TYPE_F32)
			xin = g->xr;
		if (st == PT_OK)
			st = pt_gpu_matvec_batch(x->type, x->rows, x->cols, x->row_bytes, desc, n, i,
						 xin, 0, g->gb + (size_t)i * nf, 2 * (size_t)nf, err);
	}
	if (st == PT_OK)
		pt_gpu_glu_batch(g->ab, g->gb, g->gb + nf, (int)nf, 2 * (size_t)nf, desc, (int)n,
				 geglu(g));
	const uint32_t act = act_of(dn->type);
	const float *din = g->ab;
	if (st == PT_OK && act != PT_TYPE_F32) { /* every rank's row; each rounds alone */
		st = round_in(g->xr2, g->ab, K * nf, act, err);
		din = g->xr2;
	}
	if (st == PT_OK)
		st = pt_gpu_matvec_batch(dn->type, dn->rows, dn->cols, dn->row_bytes, desc, n, 2, din,
					 nf, g->yk, D, err);
	return st;
}

/* Router on rin, then the routed experts on in, summed in rank order into out. */
static enum pt_status experts(pt_gpu_fwd *g, uint32_t il, const float *rin, const float *in,
			      float *out, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	struct glayer *L = &g->L[il];
	const int E = (int)hp->n_expert, K = (int)hp->n_expert_used;
	int gating = (int)hp->gating;
	bool wnorm = hp->expert_weights_norm;
	float wscale = hp->expert_weights_scale;
	if (!g->rc->route_from_keys) { /* the arch's graph: softmax, normalised, no scale */
		gating = PT_GATING_SOFTMAX;
		wnorm = true;
		wscale = 0.0f;
	}
	enum pt_status st = mv(g, &L->router, rin, g->rl, err);
	if (st == PT_OK)
		st = pt_gpu_route_ex(g->rl, E, K, gating, L->exp_probs_b, wnorm, wscale, g->ids, g->w,
				     err);
	if (st != PT_OK)
		return st;
	if (pt_vstore_all_resident(g->vs)) {
		pt_gpu_resolve(L->desc, L->table, g->ids, K);
		st = expert_batch(g, il, L->desc, (uint32_t)K, in, err); /* hits: counted in step */
	} else {
		st = cuda_ok(cudaMemcpyAsync(g->hids, g->ids, (size_t)K * 4, cudaMemcpyDeviceToHost,
					     g->s), "ids copy", err);
		if (st == PT_OK)
			st = cuda_ok(cudaEventRecord(g->ev_ids, g->s), "event", err);
		if (st == PT_OK) /* this stream's routing only: no device-wide sync */
			st = cuda_ok(cudaEventSynchronize(g->ev_ids), "routing wait", err);
		uint32_t nh = 0;
		g->defer = true;
		if (st == PT_OK)
			st = pt_vstore_acquire(g->vs, il, g->hids, (uint32_t)K, g->entries, &nh, err);
		g->defer = false;
		if (st != PT_OK)
			return st;
		for (int j = 0; j < K; j++) {
			const struct pt_vstore_entry *e = &g->entries[j];
			L->hdesc[j].w[0] = g->pool + e->off[0];
			L->hdesc[j].w[1] = e->off[1] == UINT64_MAX ? NULL : g->pool + e->off[1];
			L->hdesc[j].w[2] = g->pool + e->off[2];
			L->hdesc[j].rank = (int32_t)e->rank;
		}
		st = cuda_ok(cudaMemcpyAsync(L->desc, L->hdesc, (size_t)K * sizeof *L->hdesc,
					     cudaMemcpyHostToDevice, g->s), "descriptor copy", err);
		if (st == PT_OK) /* the hits compute while the misses are copied */
			st = expert_batch(g, il, L->desc, nh, in, err);
		if (st == PT_OK && nh < (uint32_t)K)
			st = issue_copies(g, err);
		if (st == PT_OK)
			st = expert_batch(g, il, L->desc + nh, (uint32_t)K - nh, in, err);
		g->n_pend = 0;
		pt_vstore_release(g->vs, il);
		if (st != PT_OK)
			return st;
	}
	pt_gpu_combine(out, g->yk, (int)hp->n_embd, K, g->ids, g->w, L->down_exps_scale);
	return st;
}

static enum pt_status ffn(pt_gpu_fwd *g, uint32_t il, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct glayer *L = &g->L[il];
	const bool moe = g->m->layers[il].is_moe;
	const int D = (int)hp->n_embd;
	enum pt_status st = PT_OK;
	norm(g->h, g->x, L->ffn_norm, D, 1, hp->rms_eps);
	if (g->rc->ffn == PT_FFN_PARALLEL) {
		if (moe) {
			/* router input: weightless RMSNorm of x, / sqrt(n_embd), times the scale */
			norm(g->h2, g->x, NULL, D, 1, hp->rms_eps);
			pt_gpu_mul_scaled(g->h2, g->h2, 1.0f / sqrtf((float)D), L->router_scale, D);
			norm(g->xg, g->x, L->pre_ffw_norm_2, D, 1, hp->rms_eps);
			st = experts(g, il, g->h2, g->xg, g->t2, err);
		}
		if (st == PT_OK)
			st = mlp(g, &L->ffn_gate, &L->ffn_up, &L->ffn_down, g->h, g->t1, err);
		if (st != PT_OK)
			return st;
		if (moe) {
			norm(g->t1, g->t1, L->post_ffw_norm_1, D, 1, hp->rms_eps);
			norm(g->t2, g->t2, L->post_ffw_norm_2, D, 1, hp->rms_eps);
			pt_gpu_add(g->t1, g->t2, D);
		}
		norm(g->t1, g->t1, L->post_ffw_norm, D, 1, hp->rms_eps);
	} else if (!moe) {
		st = mlp(g, &L->ffn_gate, &L->ffn_up, &L->ffn_down, g->h, g->t1, err);
	} else {
		st = experts(g, il, g->h, g->h, g->t1, err);
		if (st == PT_OK && L->sh_gate.d) {
			st = mlp(g, &L->sh_gate, &L->sh_up, &L->sh_down, g->h, g->t2, err);
			pt_gpu_add(g->t1, g->t2, D);
		}
	}
	if (st != PT_OK)
		return st;
	pt_gpu_add(g->x, g->t1, D);
	if (L->layer_out_scale)
		pt_gpu_scale_by(g->x, L->layer_out_scale, D);
	return PT_OK;
}

/* The device work of one decode step after the embedding and position are in: every
 * layer, then (head) the output head's logits into g->logits. */
static enum pt_status body(pt_gpu_fwd *g, bool head, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	enum pt_status st = PT_OK;
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++) {
		st = attention(g, il, err);
		if (st == PT_OK)
			st = ffn(g, il, err);
	}
	if (st == PT_OK && head) {
		norm(g->h, g->x, g->output_norm, (int)hp->n_embd, 1, hp->rms_eps);
		st = mv(g, &g->output, g->h, g->logits, err);
		if (st == PT_OK && g->rc->final_softcap && hp->final_logit_softcap > 0.0f)
			pt_gpu_softcap(g->logits, (int)g->output.rows, hp->final_logit_softcap);
	}
	return st;
}

/* body() as a CUDA graph, captured on first use (the step's shape never changes: the
 * position is read from device memory), then one launch per token instead of ~30 per
 * layer.  The same kernels with the same arguments run, so the logits are those of the
 * launched step, bit for bit. */
static enum pt_status graph_step(pt_gpu_fwd *g, bool head, struct pt_error *err)
{
	cudaGraphExec_t *ex = &g->exec[head ? 1 : 0];
	if (!*ex) {
		enum pt_status st = cuda_ok(cudaStreamBeginCapture(g->s,
								   cudaStreamCaptureModeThreadLocal),
					    "graph capture", err);
		if (st != PT_OK)
			return st;
		st = body(g, head, err);
		cudaGraph_t graph = NULL;
		const cudaError_t e = cudaStreamEndCapture(g->s, &graph);
		if (st == PT_OK)
			st = cuda_ok(e, "graph capture", err);
		if (st == PT_OK)
			st = cuda_ok(cudaGraphInstantiate(ex, graph, 0), "graph instantiate", err);
		if (graph)
			cudaGraphDestroy(graph);
		if (st != PT_OK) {
			*ex = NULL;
			return st;
		}
	}
	return cuda_ok(cudaGraphLaunch(*ex, g->s), "graph launch", err);
}

static enum pt_status step(pt_gpu_fwd *g, uint32_t tok, float *logits, struct pt_error *err)
{
	const struct pt_model *m = g->m;
	const struct pt_hparams *hp = &m->hp;
	/* the previous token's embedding and position copies read hx, hpos: done before they
	 * are rewritten */
	enum pt_status st = cuda_ok(cudaEventSynchronize(g->ev_x), "embedding wait", err);
	if (st == PT_OK)
		st = pt_model_embed_row(m, tok, g->hx, err);
	if (st != PT_OK)
		return st;
	if (g->rc->embd_scale_sqrt) {
		const float s = sqrtf((float)hp->n_embd);
		for (uint32_t i = 0; i < hp->n_embd; i++)
			g->hx[i] *= s;
	}
	*g->hpos = g->pos;
	st = cuda_ok(cudaMemcpyAsync(g->x, g->hx, (size_t)hp->n_embd * 4, cudaMemcpyHostToDevice,
				     g->s), "embedding copy", err);
	if (st == PT_OK)
		st = cuda_ok(cudaMemcpyAsync(g->dpos, g->hpos, sizeof *g->hpos,
					     cudaMemcpyHostToDevice, g->s), "position copy", err);
	if (st == PT_OK)
		st = cuda_ok(cudaEventRecord(g->ev_x, g->s), "event", err);
	if (st == PT_OK)
		st = g->graphs ? graph_step(g, logits != NULL, err) : body(g, logits != NULL, err);
	if (st == PT_OK && logits) {
		const int nv = (int)g->output.rows;
		st = cuda_ok(cudaMemcpyAsync(g->hlogits, g->logits, (size_t)nv * 4,
					     cudaMemcpyDeviceToHost, g->s), "logits copy", err);
		if (st == PT_OK)
			st = cuda_ok(cudaStreamSynchronize(g->s), "token", err);
		if (st == PT_OK)
			memcpy(logits, g->hlogits, (size_t)nv * 4);
	}
	if (st == PT_OK)
		st = pt_gpu_launched(err, "decode step");
	if (st == PT_OK && (!g->vs || pt_vstore_all_resident(g->vs)))
		g->st.hits += (uint64_t)hp->n_expert_used * pt_vstore_moe_layers(m);
	if (st == PT_OK)
		g->pos++;
	return st;
}

extern "C" enum pt_status pt_gpu_fwd_eval(pt_gpu_fwd *g, const uint32_t *tokens, uint32_t n,
					  float *logits, bool all, struct pt_error *err)
{
	if ((uint64_t)g->pos + n > g->n_ctx)
		return pt_error_set(err, PT_E_LIMIT, "context full: %lld + %u tokens > %u",
				    (long long)g->pos, n, g->n_ctx);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	const size_t nv = g->output.rows;
	pt_gpu_stream = g->s;
	enum pt_status st = PT_OK;
	for (uint32_t i = 0; i < n; i++)
		if (tokens[i] >= g->m->hp.n_vocab)
			return pt_error_set(err, PT_E_INVALID, "token id %u outside the vocabulary "
					    "(%u)", tokens[i], g->m->hp.n_vocab);
	/* prompts (more than one token) in chunks: the same values as decode steps */
	for (uint32_t i = 0; g->pf_on && n > 1 && st == PT_OK && i < n; i += g->pf_cap) {
		const uint32_t c = n - i < g->pf_cap ? n - i : g->pf_cap;
		float *l = NULL;
		if (logits && all)
			l = logits + (size_t)i * nv;
		else if (logits && i + c == n)
			l = logits;
		st = pt_gpu_prefill_chunk(g, tokens + i, c, l, all, err);
	}
	for (uint32_t i = 0; !(g->pf_on && n > 1) && st == PT_OK && i < n; i++) {
		if (tokens[i] >= g->m->hp.n_vocab)
			return pt_error_set(err, PT_E_INVALID, "token id %u outside the vocabulary "
					    "(%u)", tokens[i], g->m->hp.n_vocab);
		float *l = NULL;
		if (logits && all)
			l = logits + (size_t)i * nv;
		else if (logits && i + 1 == n)
			l = logits;
		st = step(g, tokens[i], l, err);
	}
	if (st == PT_OK)
		st = cuda_ok(cudaStreamSynchronize(g->s), "eval", err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	g->st.seconds += (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	g->st.tokens += n;
	return st;
}

/* All-resident stores: each expert's matrix addresses, per MoE layer, for pt_gpu_resolve. */
static enum pt_status build_tables(pt_gpu_fwd *g, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	struct pt_gpu_xdesc *h = (struct pt_gpu_xdesc *)pt_calloc(hp->n_expert, sizeof *h);
	if (!h)
		return pt_error_set(err, PT_E_NOMEM, "CUDA: out of memory");
	enum pt_status st = PT_OK;
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++) {
		if (!g->m->layers[il].is_moe)
			continue;
		for (uint32_t e = 0; e < hp->n_expert; e++) {
			uint64_t off[3];
			if (!pt_vstore_find(g->vs, il, e, off)) {
				st = pt_error_set(err, PT_E_IO, "CUDA: expert %u of layer %u not "
						  "resident", e, il);
				break;
			}
			h[e].w[0] = g->pool + off[0];
			h[e].w[1] = off[1] == UINT64_MAX ? NULL : g->pool + off[1];
			h[e].w[2] = g->pool + off[2];
			h[e].rank = 0;
		}
		if (st == PT_OK)
			st = dalloc(g, (void **)&g->L[il].table, hp->n_expert * sizeof *h, err);
		if (st == PT_OK)
			st = cuda_ok(cudaMemcpy(g->L[il].table, h, hp->n_expert * sizeof *h,
						cudaMemcpyHostToDevice), "upload", err);
	}
	pt_free(h);
	return st;
}

static enum pt_status plan(pt_gpu_fwd *g, const struct pt_gpu_fwd_opts *o,
			   const struct pt_gpu_info *info, struct pt_plan_input *in,
			   struct pt_plan *p, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	g->dry = true;
	g->counted = 0;
	enum pt_status st = up_core(g, err);
	g->dry = false;
	if (st != PT_OK)
		return st;
	uint64_t budget = o->vram;
	if (!budget) { /* free memory less 1/16 (at least 512 MiB) for the runtime */
		const uint64_t head = info->free_bytes / 16 > (512ull << 20) ? info->free_bytes / 16
									       : 512ull << 20;
		budget = info->free_bytes > head ? info->free_bytes - head : 0;
	}
	memset(in, 0, sizeof *in);
	in->budget = budget;
	in->resident_bytes = g->counted;
	in->kv_bytes = kv_bytes(g);
	in->scratch_bytes = scratch_bytes(g);
	in->slot_bytes = pt_vstore_slot_bytes(g->m);
	in->n_moe_layers = pt_vstore_moe_layers(g->m);
	in->top_k = hp->n_expert_used;
	in->n_expert = hp->n_expert;
	in->slots_override = o->expert_slots;
	st = pt_plan_compute(in, p, err);
	if (st == PT_E_LIMIT) { /* too little VRAM: a runtime failure (exit 1), with the numbers */
		const struct pt_error e2 = *err;
		err->code = PT_OK;
		return pt_error_set(err, PT_E_NOMEM, "VRAM on CUDA device %d (%s, %.1f GiB free): %s",
				    info->device, info->name, info->free_bytes / 1073741824.0,
				    e2.msg);
	}
	if (st != PT_OK)
		return st;
	return PT_OK;
}

/* Page-locks the span of the host mapping that holds the routed experts so misses are
 * copied by DMA straight from it (no memcpy into staging on the host, which bounds the copy
 * rate far below the link's).  Opt-in (PARTICLE_GPU_DIRECT=1): pinning a file's page-cache
 * pages is the kernel's work, and on the H200 host of 2026-12-04 (driver 13.0) a create on
 * this path did not finish within 30 s for 160 MiB of experts, nor within 100 s for 18 GB,
 * one thread running in the kernel throughout, file written back or not (docs/BENCHMARKS.md
 * 7d); work that cannot be bounded or interrupted must not be the default.  Even opted in,
 * a span above half the host's memory or one the driver refuses (a split file's separate
 * mappings) keeps the staging path. */
static void register_experts(pt_gpu_fwd *g)
{
	const char *env = getenv("PARTICLE_GPU_DIRECT");
	if (!env || strcmp(env, "1"))
		return;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (uint32_t il = 0; il < g->m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &g->m->layers[il];
		const struct pt_expert_mat *xm[] = { &L->gate_exps, &L->up_exps, &L->gate_up_exps,
						     &L->down_exps };
		for (int i = 0; L->is_moe && i < 4; i++) {
			if (!xm[i]->data)
				continue;
			const uintptr_t a = (uintptr_t)xm[i]->data;
			const uintptr_t b = a + (uintptr_t)xm[i]->expert_bytes * g->m->hp.n_expert;
			lo = a < lo ? a : lo;
			hi = b > hi ? b : hi;
		}
	}
	if (hi <= lo)
		return;
	/* page-locking faults the whole span in and keeps it: only a span well inside the
	 * host's memory (a model larger than RAM streams through staging) */
	const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || psz <= 0 || (uint64_t)(hi - lo) > (uint64_t)pages * (uint64_t)psz / 2)
		return;
	lo &= ~(uintptr_t)4095;
	hi = (hi + 4095) & ~(uintptr_t)4095;
	if (cudaHostRegister((void *)lo, hi - lo, cudaHostRegisterReadOnly) != cudaSuccess) {
		cudaGetLastError(); /* refused: the staging path */
		return;
	}
	g->reg = (void *)lo;
	g->direct = true;
}

extern "C" enum pt_status pt_gpu_fwd_create(const struct pt_model *m,
					    const struct pt_gpu_fwd_opts *o, pt_gpu_fwd **out,
					    struct pt_error *err)
{
	*out = NULL;
	const struct pt_hparams *hp = &m->hp;
	if (hp->n_expert_used > 64)
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: top-%u routing",
				    hp->n_expert_used);
	/* qwen35moe (issue 18): no device path for linear attention, the attention output gate
	 * or the gated shared expert yet */
	for (uint32_t il = 0; il < hp->n_layer; il++)
		if (m->layers[il].is_recr || m->layers[il].sh_gate_inp ||
		    pt_arch_recipe(hp->arch)->attn_out_gate)
			return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: %s's linear-attention "
					    "layers, attention output gate and gated shared expert have "
					    "no device path yet (run it on the CPU)", hp->arch_name);
	/* recipe parts the device layer does not compose yet (deepseek2) */
	const struct pt_arch_recipe *rc = pt_arch_recipe(hp->arch);
	if (rc->attn != PT_ATTN_MHA || rc->rope_adjacent || hp->n_expert_groups > 1)
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: %s needs %s, not on the "
				    "device yet (run it on the CPU)", hp->arch_name,
				    rc->attn != PT_ATTN_MHA ? "multi-head latent attention"
				    : hp->n_expert_groups > 1 ? "group-limited routing"
							      : "adjacent-pair RoPE");
	/* layer parts the device pass does not compute yet (gpt-oss): refuse, never approximate */
	bool oss = rc->act == PT_ACT_SWIGLU_OAI || rc->route_softmax_weight ||
		   hp->rope_yarn;
	for (uint32_t l = 0; !oss && l < hp->n_layer; l++) {
		const struct pt_layer_weights *W = &m->layers[l];
		oss = W->attn_sinks || W->router_b || W->gate_exps_b || W->up_exps_b || W->down_exps_b;
	}
	if (oss)
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA backend: %s needs attention sinks, "
				    "expert biases, swiglu_oai or scaled RoPE, which have no device "
				    "kernels yet (run it on the CPU)", hp->arch_name);
	struct pt_gpu_info info;
	enum pt_status st = pt_gpu_open(o->device, &info, err);
	if (st != PT_OK)
		return st;
	pt_gpu_fwd *g = (pt_gpu_fwd *)pt_calloc(1, sizeof *g);
	if (!g)
		return pt_error_set(err, PT_E_NOMEM, "CUDA: out of memory");
	g->m = m;
	g->rc = pt_arch_recipe(hp->arch);
	g->n_ctx = o->n_ctx ? o->n_ctx : (hp->n_ctx_train && hp->n_ctx_train < 4096 ? hp->n_ctx_train
										    : 4096);
	g->L = (struct glayer *)pt_calloc(hp->n_layer, sizeof *g->L);
	g->entries = (struct pt_vstore_entry *)pt_calloc(64, sizeof *g->entries);
	g->max_pend = 3 * 64;
	g->pend = (struct pending *)pt_calloc(g->max_pend, sizeof *g->pend);
	if (!g->L || !g->entries || !g->pend) {
		pt_gpu_fwd_destroy(g);
		return pt_error_set(err, PT_E_NOMEM, "CUDA: out of memory");
	}
	widths(g);
	struct pt_plan_input in;
	struct pt_plan p;
	st = plan(g, o, &info, &in, &p, err);
	if (st == PT_OK)
		st = cuda_ok(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking), "stream", err);
	if (st == PT_OK)
		st = cuda_ok(cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking), "stream", err);
	cudaEvent_t *evs[] = { &g->ev_ids, &g->ev_copy, &g->ev_x, &g->ev_grp };
	for (int i = 0; st == PT_OK && i < 4; i++)
		st = cuda_ok(cudaEventCreateWithFlags(evs[i], cudaEventDisableTiming), "event", err);
	if (st == PT_OK)
		st = up_core(g, err);
	if (st == PT_OK)
		st = alloc_scratch(g, err);
	if (st == PT_OK && in.n_moe_layers)
		st = dalloc(g, (void **)&g->pool, p.pool_bytes, err);
	if (st == PT_OK && in.n_moe_layers && !p.all_experts)
		register_experts(g);
	if (st == PT_OK && in.n_moe_layers && !p.all_experts && !g->direct) {
		g->staging_bytes = (uint64_t)hp->n_expert_used * (in.slot_bytes + 3 * 256);
		st = cuda_ok(cudaMallocHost((void **)&g->staging, g->staging_bytes), "pinned staging",
			     err);
	}
	if (st == PT_OK && in.n_moe_layers) {
		struct pt_vstore_cfg vc = { m, p.slots_per_layer,
					    (enum pt_cache_policy)o->cache_policy,
					    { g, gpu_copy_cb } };
		st = pt_vstore_create(&vc, &g->vs, err);
	}
	if (st == PT_OK && g->vs && pt_vstore_all_resident(g->vs))
		st = build_tables(g, err);
	if (st == PT_OK)
		st = cuda_ok(cudaDeviceSynchronize(), "upload", err);
	if (st != PT_OK) {
		pt_gpu_fwd_destroy(g);
		return st;
	}
	/* the step is a fixed launch sequence only without host round trips (every expert
	 * resident, or no MoE layers); PARTICLE_GPU_GRAPH=0 launches it kernel by kernel */
	const char *ge = getenv("PARTICLE_GPU_GRAPH");
	g->graphs = (!g->vs || pt_vstore_all_resident(g->vs)) && !(ge && !strcmp(ge, "0"));
	/* prompts in chunks (PARTICLE_GPU_PREFILL=0: token by token; =resident: in chunks only
	 * when every expert is resident; the same logits either way) */
	const char *pe = getenv("PARTICLE_GPU_PREFILL");
	g->pf_on = !(pe && !strcmp(pe, "0")) &&
		   (!(pe && !strcmp(pe, "resident")) || !g->vs || pt_vstore_all_resident(g->vs));
	g->st.vram_budget = in.budget;
	g->st.resident_bytes = in.resident_bytes;
	g->st.kv_bytes = in.kv_bytes;
	g->st.scratch_bytes = in.scratch_bytes;
	g->st.pool_bytes = p.pool_bytes;
	g->st.slots_per_layer = p.slots_per_layer;
	g->st.n_moe_layers = in.n_moe_layers;
	g->st.all_resident = p.all_experts;
	g->st.prefill_chunk = g->pf_on ? g->pf_cap : 0;
	char line[600];
	pt_plan_format(&in, &p, line, sizeof line);
	snprintf(g->plan, sizeof g->plan, "GPU %d (%s): %s%s", info.device, info.name, line,
		 g->direct ? "; misses copied straight from the page-locked mapping" : "");
	if (o->log)
		fprintf(o->log, "particle: plan: %s\n", g->plan);
	*out = g;
	return PT_OK;
}

extern "C" void pt_gpu_fwd_destroy(pt_gpu_fwd *g)
{
	if (!g)
		return;
	if (g->s)
		cudaStreamSynchronize(g->s);
	if (g->cs)
		cudaStreamSynchronize(g->cs);
	pt_vstore_destroy(g->vs);
	for (uint32_t i = 0; i < g->n_allocs; i++)
		cudaFree(g->allocs[i]);
	for (uint32_t il = 0; g->L && il < g->m->hp.n_layer; il++)
		if (g->L[il].hdesc)
			cudaFreeHost(g->L[il].hdesc);
	if (g->hx)
		cudaFreeHost(g->hx);
	if (g->hlogits)
		cudaFreeHost(g->hlogits);
	if (g->hids)
		cudaFreeHost(g->hids);
	if (g->hpos)
		cudaFreeHost(g->hpos);
	void *pinned[] = { g->hxc, g->hcids, g->hplist, g->htiles, g->hgtab };
	for (int i = 0; i < 5; i++)
		if (pinned[i])
			cudaFreeHost(pinned[i]);
	for (int i = 0; i < 2; i++)
		if (g->exec[i])
			cudaGraphExecDestroy(g->exec[i]);
	if (g->staging)
		cudaFreeHost(g->staging);
	if (g->reg)
		cudaHostUnregister(g->reg);
	cudaEvent_t evs[] = { g->ev_ids, g->ev_copy, g->ev_x, g->ev_grp };
	for (int i = 0; i < 4; i++)
		if (evs[i])
			cudaEventDestroy(evs[i]);
	if (g->s)
		cudaStreamDestroy(g->s);
	if (g->cs)
		cudaStreamDestroy(g->cs);
	if (pt_gpu_stream == g->s)
		pt_gpu_stream = 0;
	pt_free(g->L);
	pt_free(g->entries);
	pt_free(g->pend);
	pt_free(g);
}

extern "C" int64_t pt_gpu_fwd_pos(const pt_gpu_fwd *g)
{
	return g->pos;
}

extern "C" enum pt_status pt_gpu_fwd_truncate(pt_gpu_fwd *g, int64_t pos, struct pt_error *err)
{
	if (pos < 0 || pos > g->pos)
		return pt_error_set(err, PT_E_INVALID, "CUDA: truncate to %lld of %lld positions",
				    (long long)pos, (long long)g->pos);
	/* a ring of cap rows lost position p once p + cap was written: the keys pos needs,
	 * [pos - cap + 1, pos), survive only if nothing past pos wrapped onto them */
	for (uint32_t il = 0; il < g->m->hp.n_layer; il++) {
		const int64_t cap = g->L[il].cap;
		if (pos > 0 && cap < (int64_t)g->n_ctx && g->pos > cap && g->pos > pos + 1)
			return pt_error_set(err, PT_E_LIMIT, "CUDA: sliding window ring of layer %u "
					    "no longer holds position %lld", il, (long long)pos);
	}
	g->pos = pos;
	return PT_OK;
}

extern "C" void pt_gpu_fwd_stats(pt_gpu_fwd *g, struct pt_gpu_fwd_stats *out)
{
	*out = g->st;
	if (g->vs && !g->st.all_resident) {
		struct pt_cache_stats cs;
		pt_vstore_stats(g->vs, &cs);
		out->hits = cs.hits;
		out->misses = cs.misses;
	}
}

extern "C" const char *pt_gpu_fwd_plan_line(const pt_gpu_fwd *g)
{
	return g->plan;
}
