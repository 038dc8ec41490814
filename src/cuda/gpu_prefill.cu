/* gpu_prefill.cu - prompt tokens in chunks on the device (issue 16): every layer runs over a
 * chunk of up to PT_GPU_PF_CHUNK tokens at once: matrix-matrix products for the resident
 * weights (pt_gpu_matmul: each weight decoded once for 8 tokens), the routed experts as
 * grouped products (router and top-k for the whole chunk on the device, the (token, rank)
 * pairs grouped by expert, each expert's weights decoded once for up to 8 of its pairs),
 * RMSNorm / RoPE / biases over the chunk's rows, the chunk's K/V written to the cache in
 * VRAM before its causal attention (token t sees positions up to its own).
 *
 * Every operation is the decode step's (gpu_fwd.cu) with a token dimension added: the same
 * kernels or kernels with the same per-element arithmetic and summation order, so each
 * token's values are bit-identical to its decode step's.  That keeps the logits identical
 * between prefill and decode steps and across VRAM budgets.  With an expert cache the
 * chunk's distinct experts go through the store in groups of top-k (pf_experts_cached).
 * PARTICLE_GPU_PREFILL=0: token by token; =resident: chunks only when every expert is
 * resident. */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

extern "C" {
#include "expert/pairs.h"
#include "expert/vstore.h"
#include "kern/kern.h"
#include "quant/quant.h"
}
#include "cuda/gpu_fwd_state.h"

static enum pt_status ok(cudaError_t e, const char *what, struct pt_error *err)
{
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, what);
}

static size_t mx(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* The widest routed-expert and dense/shared FFN of the model. */
static void ffn_widths(const pt_gpu_fwd *g, size_t *fe, size_t *fd)
{
	*fe = *fd = 1;
	for (uint32_t il = 0; il < g->m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &g->m->layers[il];
		*fd = mx(*fd, mx(L->ffn_gate.rows, L->sh_gate.rows));
		if (L->is_moe)
			*fe = mx(*fe, L->down_exps.cols);
	}
}

#define PF_N 26
static void pf_sizes(const pt_gpu_fwd *g, uint32_t T, size_t n[PF_N])
{
	const struct pt_hparams *hp = &g->m->hp;
	const size_t D = hp->n_embd, K = hp->n_expert_used ? hp->n_expert_used : 1;
	const size_t E = hp->n_expert ? hp->n_expert : 1;
	size_t fe, fd, hdv = 1;
	ffn_widths(g, &fe, &fd);
	for (uint32_t il = 0; il < hp->n_layer; il++)
		hdv = mx(hdv, pt_hparams_head_dim_v(hp, il));
	const size_t qkv = (size_t)g->w_qk + 2 * (size_t)g->n_k;
	const size_t xr = mx(mx(D, g->w_qk), mx(fd, fe));
	const size_t v[PF_N] = {
		T * D, T * D, T * D, T * D, T * D, T * D,               /* cx ch ch2 ct1 ct2 cxg */
		T * (size_t)g->w_qk, T * (size_t)g->n_k, T * (size_t)g->n_k, /* cq ck cv */
		T * (size_t)g->w_qk, T * qkv,                          /* catt cqkv */
		T * mx(2 * K * fe, fd), T * fd, T * fd,                /* cgb cub cxa */
		T * K * fe, T * K * fe, T * K * D, T * 2 * E,          /* cab cxr2 cyk crl */
		T * (size_t)hp->n_head * ((g->n_ctx + 255) / 256) * (2 + hdv), /* cscores */
		(size_t)PT_GPU_PF_HEAD * g->m->output.rows,            /* clog */
		T * K, T * xr,                                         /* cw cxr */
		T * K, T * K, 4 * (size_t)pt_gpu_group_max_tiles(T * (uint32_t)K, (uint32_t)E), 1,
		/* cids cplist ctiles cntiles (ints) */
	};
	memcpy(n, v, sizeof v);
}

uint64_t pt_gpu_prefill_bytes(const pt_gpu_fwd *g, uint32_t cap)
{
	size_t n[PF_N];
	uint64_t b = 0;
	pf_sizes(g, cap, n);
	for (int i = 0; i < PF_N; i++)
		b += (n[i] * 4 + 255) / 256 * 256;
	const uint64_t K = g->m->hp.n_expert_used ? g->m->hp.n_expert_used : 1;
	const uint64_t gtab = ((g->m->hp.n_expert + K - 1) / K + 1) * K; /* dgtab, cbig */
	return b + (gtab * sizeof(struct pt_gpu_xdesc) + 255) / 256 * 256 + 256;
}

enum pt_status pt_gpu_prefill_alloc(pt_gpu_fwd *g, struct pt_error *err)
{
	size_t n[PF_N];
	g->pf_cap = PT_GPU_PF_CHUNK;
	pf_sizes(g, g->pf_cap, n);
	void **bufs[PF_N] = {
		(void **)&g->cx, (void **)&g->ch, (void **)&g->ch2, (void **)&g->ct1,
		(void **)&g->ct2, (void **)&g->cxg, (void **)&g->cq, (void **)&g->ck,
		(void **)&g->cv, (void **)&g->catt, (void **)&g->cqkv, (void **)&g->cgb,
		(void **)&g->cub, (void **)&g->cxa, (void **)&g->cab, (void **)&g->cxr2,
		(void **)&g->cyk, (void **)&g->crl, (void **)&g->cscores, (void **)&g->clog,
		(void **)&g->cw, (void **)&g->cxr, (void **)&g->cids, (void **)&g->cplist,
		(void **)&g->ctiles, (void **)&g->cntiles,
	};
	enum pt_status st = PT_OK;
	for (int i = 0; st == PT_OK && i < PF_N; i++)
		st = pt_gpu_fwd_dalloc(g, bufs[i], n[i] * 4, err);
	const struct pt_hparams *hp = &g->m->hp;
	const size_t K = hp->n_expert_used ? hp->n_expert_used : 1, E = hp->n_expert;
	const size_t pairs = (size_t)g->pf_cap * K;
	g->n_gtab = (uint32_t)((E + K - 1) / K + 1) * (uint32_t)K;
	if (st == PT_OK)
		st = pt_gpu_fwd_dalloc(g, (void **)&g->dgtab, g->n_gtab * sizeof *g->dgtab, err);
	if (st == PT_OK)
		st = pt_gpu_fwd_dalloc(g, (void **)&g->cbig, sizeof(int32_t), err);
	if (st == PT_OK && g->cbig) /* 0x7f7f7f7f: more tiles than any grid has */
		st = ok(cudaMemset(g->cbig, 0x7f, sizeof(int32_t)), "memset", err);
	if (g->dry)
		return st;
	struct {
		void **p;
		size_t bytes;
	} pin[] = {
		{ (void **)&g->hxc, (size_t)g->pf_cap * hp->n_embd * 4 },
		{ (void **)&g->hcids, pairs * 4 },
		{ (void **)&g->hplist, pairs * 4 },
		{ (void **)&g->htiles, n[24] * 4 },
		{ (void **)&g->hgtab, g->n_gtab * sizeof *g->hgtab },
	};
	for (size_t i = 0; st == PT_OK && i < sizeof pin / sizeof pin[0]; i++)
		st = ok(cudaMallocHost(pin[i].p, pin[i].bytes), "pinned allocation", err);
	return st;
}

static void pnorm(float *y, const float *x, const float *w, int n, int rows, float eps)
{
	struct pt_error ignore;
	pt_gpu_rmsnorm(y, x, w, n, rows, eps, &ignore); /* shapes are the model's, checked */
}

static enum pt_status round_rows(float *y, const float *x, uint64_t n, uint32_t act,
				 struct pt_error *err)
{
	if (n > (uint64_t)INT32_MAX || !pt_gpu_act_round(y, x, (int)n, act))
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA prefill: activation format %s "
				    "for %llu values", pt_type_name((enum pt_type)act),
				    (unsigned long long)n);
	return PT_OK;
}

/* Y[t] = W X[t] for n rows of x (rows of w->cols, contiguous), x first rounded through W's
 * activation format into cxr as gpu_fwd.cu's mv rounds one token's. */
static enum pt_status mm(pt_gpu_fwd *g, const dmat *w, const float *x, uint32_t n, float *y,
			 size_t ys, struct pt_error *err)
{
	if (w->act != PT_TYPE_F32) {
		enum pt_status st = round_rows(g->cxr, x, (uint64_t)n * w->cols, w->act, err);
		if (st != PT_OK)
			return st;
		x = g->cxr;
	}
	return pt_gpu_matmul(w->type, w->rows, w->cols, w->row_bytes, w->d, x, w->cols, n, y, ys,
			     err);
}

static bool geglu(const pt_gpu_fwd *g)
{
	return g->rc->act == PT_ACT_GEGLU;
}

static enum pt_status pf_attention(pt_gpu_fwd *g, uint32_t il, uint32_t n, struct pt_error *err)
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
	float *q = g->cq, *k = g->ck, *v = g->cv;
	const int rows = (int)n;
	enum pt_status st;

	pnorm(g->ch, g->cx, L->attn_norm, D, rows, hp->rms_eps);
	if (L->wqkv.d) { /* fused: split the rows into contiguous Q, K, V */
		const size_t w = L->wqkv.rows;
		st = mm(g, &L->wqkv, g->ch, n, g->cqkv, w, err);
		if (st == PT_OK)
			st = ok(cudaMemcpy2DAsync(q, (size_t)nq * 4, g->cqkv, w * 4, (size_t)nq * 4, n,
						  cudaMemcpyDeviceToDevice, g->s), "copy", err);
		if (st == PT_OK)
			st = ok(cudaMemcpy2DAsync(k, (size_t)nk * 4, g->cqkv + nq, w * 4,
						  (size_t)nk * 4, n, cudaMemcpyDeviceToDevice, g->s),
				"copy", err);
		if (st == PT_OK)
			st = ok(cudaMemcpy2DAsync(v, (size_t)nv * 4, g->cqkv + nq + nk, w * 4,
						  (size_t)nv * 4, n, cudaMemcpyDeviceToDevice, g->s),
				"copy", err);
	} else {
		st = mm(g, &L->wq, g->ch, n, q, (size_t)nq, err);
		if (st == PT_OK)
			st = mm(g, &L->wk, g->ch, n, k, (size_t)nk, err);
		if (st == PT_OK && L->wv.d)
			st = mm(g, &L->wv, g->ch, n, v, (size_t)nv, err);
		else if (st == PT_OK) /* K=V layers: V is the raw K projection */
			st = ok(cudaMemcpy2DAsync(v, (size_t)nv * 4, k, (size_t)nk * 4, (size_t)nv * 4,
						  n, cudaMemcpyDeviceToDevice, g->s), "copy", err);
	}
	if (st != PT_OK)
		return st;
	if (L->bq)
		pt_gpu_add_rows(q, L->bq, nq, rows);
	if (L->bk)
		pt_gpu_add_rows(k, L->bk, nk, rows);
	if (L->bv)
		pt_gpu_add_rows(v, L->bv, nv, rows);
	if (L->q_norm)
		pnorm(q, q, L->q_norm, hk, nh * rows, hp->rms_eps);
	if (L->k_norm)
		pnorm(k, k, L->k_norm, hk, nkv * rows, hp->rms_eps);
	if (g->rc->v_norm)
		pnorm(v, v, NULL, hv, nkv * rows, hp->rms_eps);
	pt_gpu_rope_neox_rows(q, rows, (size_t)nq, nh, hk, n_rot, g->dpos, base, ff);
	pt_gpu_rope_neox_rows(k, rows, (size_t)nk, nkv, hk, n_rot, g->dpos, base, ff);
	pt_gpu_act_round(q, q, nq * rows, PT_TYPE_F16);
	/* the whole chunk's keys first: the ring holds window + chunk - 1 rows (kv_rows), so no
	 * key a token of the chunk still needs is overwritten */
	pt_gpu_kv_store_rows(L->kc, L->vc, k, v, nk, nv, rows, g->dpos, L->cap);
	const int64_t window = swa && hp->n_swa > 0 ? (int64_t)hp->n_swa : 0;
	const int64_t max_count = window > 0 && window < (int64_t)g->n_ctx ? window
									    : (int64_t)g->n_ctx;
	const float scale = g->rc->attn_scale > 0.0f ? g->rc->attn_scale : 1.0f / sqrtf((float)hk);
	pt_gpu_attention_rows(q, L->kc, L->vc, g->catt, g->cscores, rows, nh, nkv, hk, hv, g->dpos,
			      window, max_count, L->cap, scale);
	st = mm(g, &L->wo, g->catt, n, g->ct1, (size_t)D, err);
	if (st != PT_OK)
		return st;
	if (L->bo)
		pt_gpu_add_rows(g->ct1, L->bo, D, rows);
	if (L->post_attn_norm)
		pnorm(g->ct1, g->ct1, L->post_attn_norm, D, rows, hp->rms_eps);
	pt_gpu_add(g->cx, g->ct1, D * rows);
	return PT_OK;
}

/* gpu_fwd.cu's mlp over the chunk. */
static enum pt_status pf_mlp(pt_gpu_fwd *g, const dmat *gt, const dmat *up, const dmat *dn,
			     const float *in, uint32_t n, float *out, struct pt_error *err)
{
	enum pt_status st;
	const size_t nf = gt->rows;
	if (gt->act == up->act && gt->act != PT_TYPE_F32 && gt->cols == up->cols) {
		st = round_rows(g->cxr, in, (uint64_t)n * gt->cols, gt->act, err);
		if (st == PT_OK)
			st = pt_gpu_matmul(gt->type, gt->rows, gt->cols, gt->row_bytes, gt->d, g->cxr,
					   gt->cols, n, g->cgb, nf, err);
		if (st == PT_OK)
			st = pt_gpu_matmul(up->type, up->rows, up->cols, up->row_bytes, up->d, g->cxr,
					   up->cols, n, g->cub, nf, err);
	} else {
		st = mm(g, gt, in, n, g->cgb, nf, err);
		if (st == PT_OK)
			st = mm(g, up, in, n, g->cub, nf, err);
	}
	if (st != PT_OK)
		return st;
	pt_gpu_glu(g->cxa, g->cgb, g->cub, (int)nf, (int)n, nf, geglu(g));
	return mm(g, dn, g->cxa, n, out, g->m->hp.n_embd, err);
}

static enum pt_status pf_experts_cached(pt_gpu_fwd *g, uint32_t il, const float *in,
					uint32_t n, struct pt_error *err);

/* gpu_fwd.cu's experts over the chunk: router and top-k per token; every expert resident:
 * the n * k pairs grouped by expert on the device, gate/up and down as grouped products
 * (else pf_experts_cached); each token's ranks summed in order. */
static enum pt_status pf_experts(pt_gpu_fwd *g, uint32_t il, const float *rin, const float *in,
				 uint32_t n, float *out, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct pt_layer_weights *H = &g->m->layers[il];
	struct glayer *L = &g->L[il];
	const int E = (int)hp->n_expert, K = (int)hp->n_expert_used;
	const size_t D = hp->n_embd;
	int gating = (int)hp->gating;
	bool wnorm = hp->expert_weights_norm;
	float wscale = hp->expert_weights_scale;
	if (!g->rc->route_from_keys) { /* as experts() in gpu_fwd.cu */
		gating = PT_GATING_SOFTMAX;
		wnorm = true;
		wscale = 0.0f;
	}
	enum pt_status st = mm(g, &L->router, rin, n, g->crl, 2 * (size_t)E, err);
	if (st == PT_OK)
		st = pt_gpu_route_rows(g->crl, 2 * (size_t)E, (int)n, E, K, gating, L->exp_probs_b,
				       wnorm, wscale, g->cids, g->cw, err);
	if (st != PT_OK)
		return st;
	if (!pt_vstore_all_resident(g->vs)) {
		st = pf_experts_cached(g, il, in, n, err);
		if (st == PT_OK)
			pt_gpu_combine_rows(out, g->cyk, (int)D, K, (int)n, g->cids, g->cw,
					    L->down_exps_scale);
		return st;
	}
	const uint32_t pairs = n * (uint32_t)K;
	const uint32_t max_tiles = pt_gpu_group_max_tiles(pairs, (uint32_t)E);
	pt_gpu_group_pairs(g->cids, (int)pairs, E, g->cplist, g->ctiles, g->cntiles);

	const struct pt_expert_mat *dn = &H->down_exps;
	const size_t nf = dn->cols;
	const bool fused = H->gate_up_exps.data != NULL;
	const struct pt_expert_mat *mats[2] = { fused ? &H->gate_up_exps : &H->gate_exps,
						fused ? NULL : &H->up_exps };
	uint32_t rounded = PT_TYPE_F32;
	for (int i = 0; st == PT_OK && i < 2; i++) {
		const struct pt_expert_mat *x = mats[i];
		if (!x)
			continue;
		const uint32_t act = (uint32_t)(pt_kern_ops((enum pt_type)x->type)
							? pt_kern_ops((enum pt_type)x->type)->act_type
							: PT_TYPE_F32);
		const float *xin = in;
		if (act != PT_TYPE_F32 && act != rounded) {
			st = round_rows(g->cxr, in, (uint64_t)n * x->cols, act, err);
			rounded = act;
		}
		if (act != PT_TYPE_F32)
			xin = g->cxr;
		if (st == PT_OK)
			st = pt_gpu_matmul_grouped(x->type, x->rows, x->cols, x->row_bytes, L->table, i,
						   g->ctiles, g->cntiles, max_tiles, g->cplist, xin,
						   x->cols, K, g->cgb + (size_t)i * nf, 2 * nf, err);
	}
	if (st != PT_OK)
		return st;
	pt_gpu_glu(g->cab, g->cgb, g->cgb + nf, (int)nf, (int)pairs, 2 * nf, geglu(g));
	const struct pt_kern_ops *dops = pt_kern_ops((enum pt_type)dn->type);
	const uint32_t act = (uint32_t)(dops ? dops->act_type : PT_TYPE_F32);
	const float *din = g->cab;
	if (act != PT_TYPE_F32) {
		st = round_rows(g->cxr2, g->cab, (uint64_t)pairs * nf, act, err);
		din = g->cxr2;
	}
	if (st == PT_OK)
		st = pt_gpu_matmul_grouped(dn->type, dn->rows, dn->cols, dn->row_bytes, L->table, 2,
					   g->ctiles, g->cntiles, max_tiles, g->cplist, din, nf, 1,
					   g->cyk, D, err);
	if (st == PT_OK)
		pt_gpu_combine_rows(out, g->cyk, (int)D, K, (int)n, g->cids, g->cw,
				    L->down_exps_scale);
	return st;
}

/* pf_experts with an expert cache: the chunk's ids come to the host; its distinct experts
 * (in order of first use) go through the store in groups of top-k (what one acquire pins);
 * per group, the hits' and copied misses' gate/up and down run over the group's pairs.  The
 * copy stream waits for the compute queued so far before a group's copies (a released slot
 * may be refilled while an earlier group's products still read it).  GLU and the down
 * input's rounding take every pair's row each time: per-row operations, so rows of earlier
 * groups are recomputed from unchanged inputs to the same values, later ones are
 * overwritten by their own group. */
static enum pt_status pf_experts_cached(pt_gpu_fwd *g, uint32_t il, const float *in,
					uint32_t n, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct pt_layer_weights *H = &g->m->layers[il];
	const uint32_t E = hp->n_expert, K = hp->n_expert_used, pairs = n * K;
	const size_t D = hp->n_embd;
	enum pt_status st = ok(cudaMemcpyAsync(g->hcids, g->cids, (size_t)pairs * 4,
					       cudaMemcpyDeviceToHost, g->s), "ids copy", err);
	if (st == PT_OK)
		st = ok(cudaEventRecord(g->ev_ids, g->s), "event", err);
	if (st == PT_OK)
		st = ok(cudaEventSynchronize(g->ev_ids), "routing wait", err);
	if (st != PT_OK)
		return st;
	/* distinct experts in order of first use, in groups of k; each one's pairs in pair
	 * order, in tiles of at most 8, tile.x = the expert's index in its group */
	int32_t uniq[1024];
	uint32_t tile_at[1024 + 1];
	struct pt_pair_groups pg;
	st = pt_pairs_group(g->hcids, pairs, E, K, 8, uniq, g->hplist, g->htiles, tile_at, &pg,
			    err);
	if (st != PT_OK)
		return st;
	const uint32_t nu = pg.n_uniq, n_groups = pg.n_groups, nt = pg.n_tiles;
	st = ok(cudaMemcpyAsync(g->cplist, g->hplist, (size_t)pairs * 4, cudaMemcpyHostToDevice,
				g->s), "pair list copy", err);
	if (st == PT_OK)
		st = ok(cudaMemcpyAsync(g->ctiles, g->htiles, (size_t)nt * 16, cudaMemcpyHostToDevice,
					g->s), "tile copy", err);

	const struct pt_expert_mat *dn = &H->down_exps;
	const size_t nf = dn->cols;
	const bool fused = H->gate_up_exps.data != NULL;
	const struct pt_expert_mat *mats[2] = { fused ? &H->gate_up_exps : &H->gate_exps,
						fused ? NULL : &H->up_exps };
	/* gate and up share their activation format when both are quantized (as in
	 * pf_experts, the input is rounded once into cxr) */
	const float *xin[2] = { in, in };
	uint32_t rounded = PT_TYPE_F32;
	for (int i = 0; st == PT_OK && i < 2; i++) {
		if (!mats[i])
			continue;
		const struct pt_kern_ops *o = pt_kern_ops((enum pt_type)mats[i]->type);
		const uint32_t act = (uint32_t)(o ? o->act_type : PT_TYPE_F32);
		if (act == PT_TYPE_F32)
			continue;
		if (act != rounded) {
			if (rounded != PT_TYPE_F32)
				return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA prefill: gate and up "
						    "experts in two activation formats");
			st = round_rows(g->cxr, in, (uint64_t)n * mats[i]->cols, act, err);
			rounded = act;
		}
		xin[i] = g->cxr;
	}
	const struct pt_kern_ops *dops = pt_kern_ops((enum pt_type)dn->type);
	const uint32_t dact = (uint32_t)(dops ? dops->act_type : PT_TYPE_F32);
	for (uint32_t gi = 0; st == PT_OK && gi < n_groups; gi++) {
		const uint32_t kg = nu - gi * K < K ? nu - gi * K : K;
		uint32_t nh = 0;
		g->defer = true;
		st = pt_vstore_acquire(g->vs, il, uniq + gi * K, kg, g->entries, &nh, err);
		g->defer = false;
		if (st != PT_OK)
			break;
		struct pt_gpu_xdesc *hd = g->hgtab + (size_t)gi * K;
		for (uint32_t j = 0; j < kg; j++) {
			const struct pt_vstore_entry *e = &g->entries[j];
			struct pt_gpu_xdesc *d = &hd[e->rank];
			d->w[0] = g->pool + e->off[0];
			d->w[1] = e->off[1] == UINT64_MAX ? NULL : g->pool + e->off[1];
			d->w[2] = g->pool + e->off[2];
			d->rank = (int32_t)e->rank;
			d->pad = 0;
		}
		struct pt_gpu_xdesc *dd = g->dgtab + (size_t)gi * K;
		st = ok(cudaMemcpyAsync(dd, hd, kg * sizeof *hd, cudaMemcpyHostToDevice, g->s),
			"descriptor copy", err);
		if (st == PT_OK && nh < kg) { /* the misses, after every product queued so far */
			st = ok(cudaEventRecord(g->ev_grp, g->s), "event", err);
			if (st == PT_OK)
				st = ok(cudaStreamWaitEvent(g->cs, g->ev_grp, 0), "event wait", err);
			if (st == PT_OK)
				st = pt_gpu_fwd_issue_copies(g, err);
		}
		g->n_pend = 0;
		const uint32_t tb = tile_at[gi], ntg = tile_at[gi + 1] - tb;
		const int32_t *tiles = g->ctiles + 4 * (size_t)tb;
		for (int i = 0; st == PT_OK && i < 2; i++)
			if (mats[i])
				st = pt_gpu_matmul_grouped(mats[i]->type, mats[i]->rows, mats[i]->cols,
							   mats[i]->row_bytes, dd, i, tiles, g->cbig,
							   ntg, g->cplist, xin[i], mats[i]->cols, (int)K,
							   g->cgb + (size_t)i * nf, 2 * nf, err);
		if (st == PT_OK)
			pt_gpu_glu(g->cab, g->cgb, g->cgb + nf, (int)nf, (int)pairs, 2 * nf, geglu(g));
		const float *din = g->cab;
		if (st == PT_OK && dact != PT_TYPE_F32) {
			st = round_rows(g->cxr2, g->cab, (uint64_t)pairs * nf, dact, err);
			din = g->cxr2;
		}
		if (st == PT_OK)
			st = pt_gpu_matmul_grouped(dn->type, dn->rows, dn->cols, dn->row_bytes, dd, 2,
						   tiles, g->cbig, ntg, g->cplist, din, nf, 1, g->cyk,
						   D, err);
		pt_vstore_release(g->vs, il);
	}
	return st;
}

static enum pt_status pf_ffn(pt_gpu_fwd *g, uint32_t il, uint32_t n, struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const struct glayer *L = &g->L[il];
	const bool moe = g->m->layers[il].is_moe;
	const int D = (int)hp->n_embd, rows = (int)n;
	enum pt_status st = PT_OK;
	pnorm(g->ch, g->cx, L->ffn_norm, D, rows, hp->rms_eps);
	if (g->rc->ffn == PT_FFN_PARALLEL) {
		if (moe) {
			pnorm(g->ch2, g->cx, NULL, D, rows, hp->rms_eps);
			pt_gpu_mul_scaled_rows(g->ch2, g->ch2, 1.0f / sqrtf((float)D), L->router_scale, D,
					       rows);
			pnorm(g->cxg, g->cx, L->pre_ffw_norm_2, D, rows, hp->rms_eps);
			st = pf_experts(g, il, g->ch2, g->cxg, n, g->ct2, err);
		}
		if (st == PT_OK)
			st = pf_mlp(g, &L->ffn_gate, &L->ffn_up, &L->ffn_down, g->ch, n, g->ct1, err);
		if (st != PT_OK)
			return st;
		if (moe) {
			pnorm(g->ct1, g->ct1, L->post_ffw_norm_1, D, rows, hp->rms_eps);
			pnorm(g->ct2, g->ct2, L->post_ffw_norm_2, D, rows, hp->rms_eps);
			pt_gpu_add(g->ct1, g->ct2, D * rows);
		}
		pnorm(g->ct1, g->ct1, L->post_ffw_norm, D, rows, hp->rms_eps);
	} else if (!moe) {
		st = pf_mlp(g, &L->ffn_gate, &L->ffn_up, &L->ffn_down, g->ch, n, g->ct1, err);
	} else {
		st = pf_experts(g, il, g->ch, g->ch, n, g->ct1, err);
		if (st == PT_OK && L->sh_gate.d) {
			st = pf_mlp(g, &L->sh_gate, &L->sh_up, &L->sh_down, g->ch, n, g->ct2, err);
			pt_gpu_add(g->ct1, g->ct2, D * rows);
		}
	}
	if (st != PT_OK)
		return st;
	pt_gpu_add(g->cx, g->ct1, D * rows);
	if (L->layer_out_scale)
		pt_gpu_scale_by(g->cx, L->layer_out_scale, D * rows);
	return PT_OK;
}

/* Output head over rows [t0, t0 + nt) of the chunk into clog, then to the host. */
static enum pt_status pf_head(pt_gpu_fwd *g, uint32_t t0, uint32_t nt, float *dst,
			      struct pt_error *err)
{
	const struct pt_hparams *hp = &g->m->hp;
	const size_t D = hp->n_embd, nv = g->output.rows;
	pnorm(g->ch, g->cx + (size_t)t0 * D, g->output_norm, (int)D, (int)nt, hp->rms_eps);
	enum pt_status st = mm(g, &g->output, g->ch, nt, g->clog, nv, err);
	if (st != PT_OK)
		return st;
	if (g->rc->final_softcap && hp->final_logit_softcap > 0.0f)
		pt_gpu_softcap(g->clog, (int)(nt * nv), hp->final_logit_softcap);
	st = ok(cudaMemcpyAsync(dst, g->clog, (size_t)nt * nv * 4, cudaMemcpyDeviceToHost, g->s),
		"logits copy", err);
	if (st == PT_OK)
		st = ok(cudaStreamSynchronize(g->s), "prefill", err);
	return st;
}

enum pt_status pt_gpu_prefill_chunk(pt_gpu_fwd *g, const uint32_t *tokens, uint32_t n,
				    float *logits, bool all, struct pt_error *err)
{
	const struct pt_model *m = g->m;
	const struct pt_hparams *hp = &m->hp;
	const size_t D = hp->n_embd;
	if (n == 0 || n > g->pf_cap)
		return pt_error_set(err, PT_E_INVALID, "CUDA prefill: chunk of %u tokens (at most "
				    "%u)", n, g->pf_cap);
	/* the last copies from hxc / hpos (an earlier chunk or step) are done before reuse */
	enum pt_status st = ok(cudaEventSynchronize(g->ev_x), "embedding wait", err);
	for (uint32_t t = 0; st == PT_OK && t < n; t++)
		st = pt_model_embed_row(m, tokens[t], g->hxc + (size_t)t * D, err);
	if (st != PT_OK)
		return st;
	if (g->rc->embd_scale_sqrt) {
		const float s = sqrtf((float)hp->n_embd);
		for (size_t i = 0; i < (size_t)n * D; i++)
			g->hxc[i] *= s;
	}
	*g->hpos = g->pos;
	st = ok(cudaMemcpyAsync(g->cx, g->hxc, (size_t)n * D * 4, cudaMemcpyHostToDevice, g->s),
		"embedding copy", err);
	if (st == PT_OK)
		st = ok(cudaMemcpyAsync(g->dpos, g->hpos, sizeof *g->hpos, cudaMemcpyHostToDevice,
					g->s), "position copy", err);
	if (st == PT_OK)
		st = ok(cudaEventRecord(g->ev_x, g->s), "event", err);
	for (uint32_t il = 0; st == PT_OK && il < hp->n_layer; il++) {
		st = pf_attention(g, il, n, err);
		if (st == PT_OK)
			st = pf_ffn(g, il, n, err);
	}
	const size_t nv = g->output.rows;
	if (st == PT_OK && logits && all) {
		for (uint32_t t0 = 0; st == PT_OK && t0 < n; t0 += PT_GPU_PF_HEAD) {
			const uint32_t nt = n - t0 < PT_GPU_PF_HEAD ? n - t0 : PT_GPU_PF_HEAD;
			st = pf_head(g, t0, nt, logits + (size_t)t0 * nv, err);
		}
	} else if (st == PT_OK && logits) {
		st = pf_head(g, n - 1, 1, g->hlogits, err);
		if (st == PT_OK)
			memcpy(logits, g->hlogits, nv * 4);
	}
	if (st == PT_OK)
		st = pt_gpu_launched(err, "prefill chunk");
	if (st == PT_OK) {
		if (!g->vs || pt_vstore_all_resident(g->vs)) /* else the store counts */
			g->st.hits += (uint64_t)hp->n_expert_used * pt_vstore_moe_layers(m) * n;
		g->pos += n;
	}
	return st;
}
