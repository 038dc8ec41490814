/* gpu_fwd_state.h - the device forward pass's state, shared by gpu_fwd.cu (decode steps,
 * planning, the expert store) and gpu_prefill.cu (chunks of prompt tokens).  C++ only. */
#ifndef PT_CUDA_GPU_FWD_STATE_H
#define PT_CUDA_GPU_FWD_STATE_H

#include <cuda_runtime.h>

extern "C" {
#include "cuda/gpu_fwd.h"
#include "expert/vstore.h"
}
#include "cuda/gpu_internal.h"


struct dmat {
	uint32_t type;
	uint32_t act;     /* the CPU path's activation format for the stored type */
	uint64_t rows, cols;
	size_t row_bytes;
	const uint8_t *d; /* NULL: absent */
};

struct glayer {
	const float *attn_norm, *q_norm, *k_norm, *post_attn_norm;
	const float *ffn_norm, *post_ffw_norm, *pre_ffw_norm_2, *post_ffw_norm_1, *post_ffw_norm_2;
	dmat wq, wk, wv, wqkv, wo, ffn_gate, ffn_up, ffn_down, sh_gate, sh_up, sh_down, router;
	const float *bq, *bk, *bv, *bo, *router_scale, *exp_probs_b, *down_exps_scale,
		*layer_out_scale;
	float *kc, *vc;
	int64_t cap;                 /* KV rows (sliding layers: a ring of n_swa + a prefill
				      * chunk - 1, kv_rows in gpu_fwd.cu) */
	struct pt_gpu_xdesc *desc;   /* [k] device: this token's experts */
	struct pt_gpu_xdesc *hdesc;  /* [k] pinned host copy source */
	struct pt_gpu_xdesc *table;  /* [n_expert] device, all-resident stores only */
};

struct pending {
	uint64_t off;
	const void *src;
	uint64_t bytes;
};


#define MAX_ALLOCS 8192

struct pt_gpu_fwd {
	const struct pt_model *m;
	const struct pt_arch_recipe *rc;
	cudaStream_t s, cs;
	cudaEvent_t ev_ids, ev_copy, ev_x;
	void *allocs[MAX_ALLOCS];
	uint32_t n_allocs;
	bool dry;           /* sizing pass: count bytes, allocate nothing */
	uint64_t counted;   /* bytes of the resident core */
	struct glayer *L;
	const float *output_norm, *rope_freqs;
	dmat output;
	float *x, *h, *h2, *t1, *t2, *q, *k, *v, *att, *qkv, *gb, *ub, *ab, *xg, *xa, *yk, *rl,
		*scores, *logits, *w, *xr, *xr2;
	int32_t *ids;
	int64_t *dpos;       /* device: this step's position (read by RoPE, KV store, attention) */
	int64_t *hpos;       /* pinned source of dpos */
	cudaGraphExec_t exec[2]; /* captured decode step without / with the output head */
	bool graphs;         /* capture the step (every expert resident, PARTICLE_GPU_GRAPH != 0) */
	float *hx, *hlogits; /* pinned */
	int32_t *hids;       /* pinned */
	uint8_t *pool;
	pt_vstore *vs;
	bool defer;
	struct pending *pend;
	uint32_t n_pend, max_pend;
	uint8_t *staging;
	uint64_t staging_bytes;
	void *reg;          /* the experts' span of the host mapping, registered (page-locked) */
	bool direct;        /* misses copied straight from it: no staging memcpy on the host */
	uint32_t n_ctx, w_ff, w_qk, n_k;
	int64_t pos;
	struct pt_gpu_fwd_stats st;
	struct pt_vstore_entry *entries;
	char plan[1024];
	/* batched prefill (gpu_prefill.cu): chunks of at most pf_cap tokens, every buffer with
	 * pf_cap rows; pf_on when the store holds every expert (or there is none) and
	 * PARTICLE_GPU_PREFILL is not 0 */
	uint32_t pf_cap;
	bool pf_on;
	float *cx, *ch, *ch2, *ct1, *ct2, *cxg, *cq, *ck, *cv, *catt, *cqkv, *cgb, *cub, *cxa,
		*cab, *cxr2, *cyk, *crl, *cscores, *clog, *cw, *cxr;
	int32_t *cids, *cplist, *ctiles, *cntiles;
	float *hxc; /* pinned: the chunk's embedding rows */
	/* chunks with an expert cache: the pairs' ids, lists and tiles built on the host
	 * (pinned), the groups' expert descriptors (pinned source, device copy), a count no
	 * grid reaches (the grouped kernel's tile bound), and compute-done events for the
	 * copy stream */
	int32_t *hcids, *hplist, *htiles, *cbig;
	struct pt_gpu_xdesc *hgtab, *dgtab;
	uint32_t n_gtab;
	cudaEvent_t ev_grp;
};

/* Prefill chunk rows (gpu_prefill.cu) and the logits rows of the output head per pass. */
#define PT_GPU_PF_CHUNK 256
#define PT_GPU_PF_HEAD 16
/* Device bytes of the chunk buffers for pf_cap rows (part of the planned scratch). */
uint64_t pt_gpu_prefill_bytes(const pt_gpu_fwd *g, uint32_t cap);
/* Allocates them through dalloc's accounting (gpu_fwd.cu calls it from alloc_scratch). */
enum pt_status pt_gpu_prefill_alloc(pt_gpu_fwd *g, struct pt_error *err);
/* n (<= pf_cap) prompt tokens as one chunk at g->pos: logits [n][n_vocab] when all, else
 * the last token's (NULL: none).  Advances g->pos. */
enum pt_status pt_gpu_prefill_chunk(pt_gpu_fwd *g, const uint32_t *tokens, uint32_t n,
				    float *logits, bool all, struct pt_error *err);
/* gpu_fwd.cu's helpers: dalloc; the queued expert misses copied on the copy stream, the
 * compute stream waiting for them */
enum pt_status pt_gpu_fwd_dalloc(pt_gpu_fwd *g, void **p, size_t bytes, struct pt_error *err);
enum pt_status pt_gpu_fwd_issue_copies(pt_gpu_fwd *g, struct pt_error *err);

#endif
