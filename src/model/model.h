/* model.h - a loaded model: hyper-parameters read and checked through the arch descriptions
 * (model/arch.h), every tensor bound in place in the read-only mapping, and the expert
 * provider through which the forward pass reaches routed-expert weights.
 *
 * Nothing is copied at load (pt_model_repack, model/repack.h, may copy Q4_K matrices into an
 * interleaved layout afterwards): matrices are struct pt_kern_mat views into the mapping, 1-D
 * tensors (norm gains, scales, biases) must be F32 and are used as float pointers, and the
 * token embedding is dequantized one row at a time on demand. */
#ifndef PT_MODEL_MODEL_H
#define PT_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kern/kern.h"
#include "model/arch.h"
#include "util/status.h"

/* One routed expert's three matrices.  With a fused gate_up tensor, gate points at the fused
 * (2*n_ff_exp rows) matrix and up is NULL. */
struct pt_expert_ptrs {
	const void *gate;
	const void *up;
	const void *down;
	/* the expert's slices of ffn_{gate,up,down}_exps.bias (gpt-oss; NULL when absent):
	 * added to the gate / up / down outputs, read with the expert's weights */
	const float *gate_b, *up_b, *down_b;
};

/* Where expert weights come from.  Today: the mapping (pt_model_mmap_provider).  The
 * streaming cache will implement the same interface with slots; release is called once per
 * successful get when the forward pass is done with the pointers (may be NULL). */
struct pt_expert_provider {
	void *ctx;
	enum pt_status (*get)(void *ctx, uint32_t layer, uint32_t expert,
			      struct pt_expert_ptrs *out, struct pt_error *err);
	void (*release)(void *ctx, uint32_t layer, uint32_t expert);
	/* Optional streaming hooks (NULL for the mapping).  waves cuts the distinct experts a
	 * chunk needs on a layer into groups that fit the slots (reordered in place; wave w is
	 * experts[wave_end[w-1] .. wave_end[w])); prefetch pins one group and submits reads for
	 * its misses; next reports one prefetched expert whose bytes are ready (hits first,
	 * then in completion order), blocking until one is (*got false: all reported);
	 * end_layer drops what prefetch pinned.  get/release still bracket each use. */
	enum pt_status (*waves)(void *ctx, uint32_t layer, uint32_t *experts, uint32_t n,
				uint32_t *wave_end, uint32_t *n_waves, struct pt_error *err);
	enum pt_status (*prefetch)(void *ctx, uint32_t layer, const uint32_t *experts,
				   uint32_t n, struct pt_error *err);
	enum pt_status (*next)(void *ctx, uint32_t *expert, bool *got, struct pt_error *err);
	/* Optional: like next but never blocks (*got false: none ready now).  Decode groups
	 * the experts already ready behind each next into one batched product. */
	enum pt_status (*ready)(void *ctx, uint32_t *expert, bool *got, struct pt_error *err);
	void (*end_layer)(void *ctx, uint32_t layer);
	/* Optional read-ahead: in decode the forward pass's guess of the next layer's experts,
	 * made while this layer's reads are in flight; in a chunk of several waves the next
	 * wave, handed on once this wave's reads went out.  The provider may start reading
	 * them.  A hint only: it never changes what get returns. */
	void (*ahead)(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t n);
	/* Optional, never blocks: lets the provider start the reads that wait for others to
	 * land (the read-ahead queued behind this layer's misses).  Decode calls it between a
	 * group's gate/up and down products. */
	void (*poll)(void *ctx);
};

/* Layout of a 3-D expert tensor: expert e's matrix starts at data + e * expert_bytes. */
struct pt_expert_mat {
	enum pt_type type;
	uint64_t rows;
	uint64_t cols;
	size_t row_bytes;
	size_t expert_bytes;
	const uint8_t *data; /* in the mapping (NULL if the tensor is absent), or the
				interleaved copy (pt_model_repack) */
	enum pt_kern_layout layout; /* PT_KERN_LAYOUT_X16 after pt_model_repack, or when the
				       expert store reads an interleaved pack (then data still
				       points at the mapping's rows, which nothing reads) */
};

struct pt_layer_weights {
	const float *attn_norm, *q_norm, *k_norm, *post_attn_norm;
	const float *ffn_norm, *post_ffw_norm, *pre_ffw_norm_2, *post_ffw_norm_1,
		*post_ffw_norm_2;
	struct pt_kern_mat wq, wk, wv, wqkv, wo; /* absent: data NULL */
	const float *bq, *bk, *bv, *bo;          /* projection biases (absent: NULL) */
	struct pt_kern_mat ffn_gate, ffn_up, ffn_down;  /* dense / always-on MLP */
	struct pt_kern_mat sh_gate, sh_up, sh_down;     /* shared expert */
	struct pt_kern_mat router;                      /* ffn_gate_inp, F32 */
	const float *router_scale;    /* gemma4 ffn_gate_inp.scale [n_embd] */
	const float *exp_probs_b;     /* selection bias [n_expert] */
	const float *down_exps_scale; /* gemma4 per-expert output scale [n_expert] */
	const float *layer_out_scale; /* gemma4 layer_output_scale [1] */
	const float *attn_sinks;      /* gpt-oss per-head sink logits [n_head] */
	const float *router_b;        /* gpt-oss ffn_gate_inp.bias [n_expert], added to the
					 router logits before selection */
	const float *gate_exps_b, *up_exps_b, *down_exps_b; /* [n_expert][width] (mapping) */
	struct pt_expert_mat gate_exps, up_exps, gate_up_exps, down_exps;
	/* MLA (deepseek2): q_a -> q_a_norm -> q_b (or wq), kv_a_mqa -> kv_a_norm; k_b / v_b are
	 * one matrix per head, head h at data + h * rows * row_bytes */
	struct pt_kern_mat wq_a, wq_b, wkv_a, wk_b, wv_b;
	const float *q_a_norm, *kv_a_norm;
	bool is_moe;
	/* shared-expert gate (qwen35moe): the shared expert's output times
	 * sigmoid(sh_gate_inp . h), [n_embd] */
	const float *sh_gate_inp;
	/* linear attention (Gated DeltaNet; a layer with ssm_conv1d): qkv (attn_qkv), z
	 * (attn_gate), beta / alpha projections, output (ssm_out) */
	bool is_recr;
	struct pt_kern_mat ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
	const float *ssm_conv1d; /* [conv_dim][d_conv], F32 */
	const float *ssm_dt;     /* [n_v] dt bias */
	const float *ssm_a;      /* [n_v] -exp(A_log) */
	const float *ssm_norm;   /* [d_v], shared by the value heads */
};

/* Memory the model owns beside the mapping (pt_model_repack's copies). */
struct pt_model_buf {
	void *p;
	size_t bytes;
};

struct pt_model {
	pt_gguf *g;       /* owned */
	struct pt_hparams hp;
	const struct pt_gguf_tensor *tok_embd;
	const float *output_norm;
	const float *rope_freqs; /* gemma4 full layers */
	/* IMROPE sections (qwen35moe) that leave pairs unrotated for text positions (p, p, p,
	 * 0): freq factors 1 / INFINITY per pair; NULL when every pair rotates (plain NEOX) */
	float *rope_sect_ff;
	struct pt_kern_mat output; /* the lm head: output.weight or token_embd when tied */
	/* a tied head repacked (pt_model_repack): embedding rows are read from output's X16
	 * copy, the mapped token_embd pages were released */
	bool embd_in_output;
	struct pt_layer_weights *layers;
	struct pt_expert_provider mmap_provider;
	/* bytes of the tensors in the file that are never bound nor read (PT_ROLE_SKIP: GLM's
	 * NextN blocks): not computed, not resident, no expert slots */
	uint64_t skipped_bytes;
	/* interleaved copies made by pt_model_repack (model/repack.h), unmapped at close */
	struct pt_model_buf *repack;
	uint32_t n_repack, cap_repack;
};

/* Opens path, reads and validates the hyper-parameters, checks every tensor's presence,
 * shape and type, and binds the weights.  Errors name the key or tensor and what was
 * expected: PT_E_FORMAT (missing/misshapen), PT_E_UNSUPPORTED (unknown arch, type without a
 * kernel).  On failure *out is NULL. */
enum pt_status pt_model_open(const char *path, struct pt_model **out, struct pt_error *err);
/* Same over an already-open GGUF; takes ownership of g (closed on failure too). */
enum pt_status pt_model_from_gguf(pt_gguf *g, struct pt_model **out, struct pt_error *err);
void pt_model_close(struct pt_model *m); /* NULL-safe */

/* The blocks the forward pass computes (hp.n_layer: GLM's NextN blocks past the trunk are
 * not), for building an expert layout without opening the model (pack, pull); UINT32_MAX
 * (every block) when the file's hyper-parameters cannot be read. */
uint32_t pt_model_computed_layers(const pt_gguf *g);

/* Dequantizes embedding row tok (< n_vocab) into out[n_embd]. */
enum pt_status pt_model_embed_row(const struct pt_model *m, uint32_t tok, float *out,
				  struct pt_error *err);

#endif
