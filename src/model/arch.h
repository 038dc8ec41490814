/* arch.h - one description per supported MoE architecture, shared by the file writer
 * (particle mkmodel) and the model loader (forward pass), so both agree by construction on
 * which GGUF keys an arch reads, which tensors it has, their shapes, their role in the
 * residency scheme and their llama-quant category (ARCHITECTURES.md, GGUF-AND-QUANTS.md 7).
 *
 * Flow: pt_arch_preset() or pt_arch_read_hparams() fills struct pt_hparams;
 * pt_arch_tensors() enumerates every tensor in llama.cpp's loader order (GGUF-AND-QUANTS.md
 * 2.10); pt_arch_write_hparams() writes the keys; pt_mix_tensor_type() picks a tensor's
 * storage type for a quantization mixture (q4_k_m ...). */
#ifndef PT_MODEL_ARCH_H
#define PT_MODEL_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "util/status.h"

#define PT_ARCH_MAX_LAYERS 256
#define PT_ARCH_MAX_NAME 64

enum pt_arch {
	PT_ARCH_QWEN3MOE = 0,
	PT_ARCH_BAILINGMOE2 = 1, /* Sarvam 30B; also written/read as "sarvam_moe" */
	PT_ARCH_GEMMA4 = 2,
	PT_ARCH_GLM4MOE = 3,     /* GLM-4.5 / 4.5-Air / 4.6 */
	PT_ARCH_QWEN35MOE = 4,   /* Qwen3.5 MoE: Gated DeltaNet + gated full attention */
	PT_ARCH_DEEPSEEK2 = 5,   /* DeepSeek-V2-Lite / V3 / R1, Kimi K2 (MLA) */
	PT_ARCH_GPTOSS = 6,      /* gpt-oss-20b / gpt-oss-120b ("gpt-oss") */
	PT_ARCH_COUNT = 7,
};

/* llama.cpp's gating enum (llama-hparams.h). */
enum pt_gating {
	PT_GATING_NONE = 0,
	PT_GATING_SOFTMAX = 1,
	PT_GATING_SIGMOID = 2,
	PT_GATING_SOFTMAX_WEIGHT = 3,
};

/* Every hyper-parameter any of the three archs reads, with llama.cpp's defaults applied by
 * pt_hparams_defaults().  Per-layer arrays are always filled for every layer (a scalar key
 * becomes a constant array). */
struct pt_hparams {
	enum pt_arch arch;
	char arch_name[24];        /* key prefix and general.architecture ("sarvam_moe" ok) */
	uint32_t n_vocab;
	uint32_t n_ctx_train;
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv[PT_ARCH_MAX_LAYERS];
	bool is_swa[PT_ARCH_MAX_LAYERS];   /* gemma4 sliding_window_pattern (true = sliding) */
	uint32_t n_ff;             /* dense FFN width (bailing layer 0, gemma4 always-on MLP) */
	uint32_t n_ff_exp;         /* routed expert width */
	uint32_t n_ff_shexp;       /* shared expert width (bailingmoe2) */
	uint32_t n_expert;
	uint32_t n_expert_used;
	uint32_t n_expert_shared;
	uint32_t n_expert_groups;  /* expert_group_count; only > 1 activates grouping */
	uint32_t n_group_used;
	uint32_t n_layer_dense_lead; /* leading_dense_block_count */
	uint32_t n_layer_nextn;    /* glm4moe nextn_predict_layers: blocks after the trunk,
				      counted in block_count, never computed */
	uint32_t head_dim_k;       /* attention.key_length (full-attention layers) */
	uint32_t head_dim_v;
	uint32_t head_dim_k_swa;   /* key_length_swa (gemma4 sliding layers) */
	uint32_t head_dim_v_swa;
	uint32_t n_rot;            /* rope.dimension_count */
	uint32_t n_rot_swa;
	float rope_freq_base;
	float rope_freq_base_swa;
	float rms_eps;
	uint32_t n_swa;            /* attention.sliding_window; 0 = none */
	uint32_t n_shared_kv_layers; /* gemma4 attention.shared_kv_layers */
	uint32_t n_embd_per_layer; /* gemma4 embedding_length_per_layer_input (must be 0) */
	enum pt_gating gating;
	bool expert_weights_norm;
	float expert_weights_scale; /* 0 or 1 = no scaling */
	float final_logit_softcap;  /* 0 = none (gemma4 default 30) */
	float rope_partial_full;    /* gemma4: fraction of the full head rotated (rope_freqs) */
	/* Tensor-layout choices (what the file contains; the loader detects them). */
	bool tied_embeddings;       /* no output.weight */
	bool fused_qkv;             /* attn_qkv instead of attn_q/k/v */
	bool fused_gate_up_exps;    /* ffn_gate_up_exps instead of gate/up */
	bool has_exp_probs_b;       /* router selection bias */
	bool has_layer_output_scale;
	bool k_eq_v_full;           /* gemma4: full layers have no attn_v (V = raw K) */
	bool has_attn_bias;         /* attn_q/k/v.bias (glm4moe) */
	bool has_qk_norm;           /* attn_q_norm / attn_k_norm (optional in glm4moe) */
	/* Linear-attention (Gated DeltaNet) layers (qwen35moe; ssm.* keys).  is_recr[l]: layer
	 * l is recurrent (conv + delta-rule state instead of a KV cache). */
	bool is_recr[PT_ARCH_MAX_LAYERS];
	uint32_t ssm_d_conv;        /* ssm.conv_kernel */
	uint32_t ssm_d_inner;       /* ssm.inner_size = n_v_heads * head_v_dim */
	uint32_t ssm_d_state;       /* ssm.state_size = head_k_dim = head_v_dim */
	uint32_t ssm_dt_rank;       /* ssm.time_step_rank = value heads */
	uint32_t ssm_n_group;       /* ssm.group_count = key heads */
	uint32_t full_attn_interval; /* full_attention_interval (written by mkmodel) */
	uint32_t rope_sections[4];  /* rope.dimension_sections (IMROPE) */
	/* Multi-head latent attention (deepseek2): the KV cache row is the compressed latent
	 * (kv_lora_rank) then the shared RoPE key (n_rot); key_length / value_length /
	 * head_count_kv are the cache's (kv_lora + n_rot, kv_lora, 1) as the files store them,
	 * the *_mla lengths the per-head Q/K (nope + rope) and V widths after decompression. */
	uint32_t q_lora_rank;       /* 0: attn_q directly (V2-Lite) */
	uint32_t kv_lora_rank;      /* 0: not MLA */
	uint32_t head_dim_k_mla;
	uint32_t head_dim_v_mla;
	/* RoPE scaling (rope.scaling.*): YaRN with its factor, original context and the
	 * deepseek2 log multiplier as stored (0.1 * mscale_all_dim) */
	bool rope_yarn;
	float rope_scaling_factor;  /* 0 or 1: none */
	uint32_t rope_orig_ctx;     /* original_context_length (0: context_length) */
	float rope_yarn_log_mul;
	/* mkmodel only: tokenizer.ggml.pre of the real model a preset stands for, written with
	 * the compact vocabulary (NULL: the compact vocabulary's own) */
	const char *preset_tok_pre;
};

/* Recurrent (linear-attention) layers: per-sequence state floats of layer l (conv window
 * (d_conv - 1) * conv_dim plus the delta-rule states n_v * d_v * d_k), 0 for others. */
bool pt_hparams_is_recurrent(const struct pt_hparams *hp, uint32_t layer);
uint64_t pt_hparams_conv_dim(const struct pt_hparams *hp);
uint64_t pt_hparams_rs_floats(const struct pt_hparams *hp, uint32_t layer);
/* Sum over every layer: one sequence's recurrent state in bytes (F32). */
uint64_t pt_hparams_rs_bytes(const struct pt_hparams *hp);

/* ---- the layer recipe: how the forward pass composes an arch's layer ----
 * Every difference between archs that is not visible in the tensor table is a field here,
 * filled once in the arch's own file (qwen3moe.c ...).  What the tensor table already says
 * is read from the loaded weights instead: which norms exist (attn/ffn pre-norms, per-head
 * Q/K norms, post-attention / post-FFN norms), Q/K/V/O biases, K=V layers (no attn_v), the
 * shared expert, the router selection bias, leading dense layers (no router), the layer
 * output scale and the RoPE factors.  Per-layer shapes (head dims, sliding pattern, partial
 * rotary width, RoPE bases) come from struct pt_hparams. */
enum pt_act {
	PT_ACT_SWIGLU = 0,          /* silu(gate) * up */
	PT_ACT_GEGLU,               /* gelu(gate) * up (tanh approximation) */
	PT_ACT_SWIGLU_OAI,          /* gpt-oss: min(g,7) sigma(1.702 min(g,7)) (clamp(u,-7,7)+1) */
};

enum pt_router_input {
	PT_ROUTER_IN_FFN_NORM = 0,  /* the ffn-normed rows (experts see the same rows) */
	PT_ROUTER_IN_SCALED_RESIDUAL, /* weightless RMSNorm(x) / sqrt(n_embd) * router scale;
					 experts see RMSNorm(x; pre_ffw_norm_2) (Gemma 4) */
};

enum pt_ffn_form {
	PT_FFN_SERIAL = 0,          /* dense MLP on dense layers, else routed experts (+ the
				       shared expert when present), summed into the residual */
	PT_FFN_PARALLEL,            /* Gemma 4: always-on dense MLP (post_ffw_norm_1) beside
				       the routed experts (post_ffw_norm_2), sum post-normed */
};

enum pt_attn_form {
	PT_ATTN_MHA = 0,            /* Q/K/V projections (or fused qkv), GQA over K/V heads */
	PT_ATTN_MLA,                /* deepseek2 latent attention, up-projections absorbed:
				       one cached latent + RoPE key per token (MQA) */
};

struct pt_arch_recipe {
	bool embd_scale_sqrt;       /* token embeddings times sqrt(n_embd) */
	bool v_norm;                /* weightless per-head RMSNorm of V */
	float attn_scale;           /* score scale; 0: 1/sqrt(head_dim_k) */
	bool rope_freqs_full;       /* rope_freqs divides the frequencies of full layers */
	enum pt_act act;            /* routed experts, shared expert and dense MLP */
	/* routing: gating, normalisation and scale as the file's keys say (hparams), or
	 * hard-coded softmax with normalised top-k weights and no scale */
	bool route_from_keys;
	/* with !route_from_keys: top-k of the raw logits, softmax over the k (llama.cpp's
	 * SOFTMAX_WEIGHT; gpt-oss), no normalisation, expert_weights_scale */
	bool route_softmax_weight;
	enum pt_router_input router_in;
	enum pt_ffn_form ffn;
	bool final_softcap;         /* hparams final_logit_softcap applies to the logits */
	/* the pre-FFN norm is stored as post_attention_norm (GLM), not ffn_norm; there is then
	 * no norm of the attention output */
	bool ffn_norm_post_attention;
	/* Q projection rows are per head [query (hd) | gate (hd)]; the attention output is
	 * multiplied by sigmoid(gate) before attn_output (Qwen3.5 / Qwen3-Next) */
	bool attn_out_gate;
	/* linear attention: value head h reads key head h mod n_k (tiled, qwen35moe) instead
	 * of h / (n_v / n_k) (grouped) */
	bool ssm_heads_tiled;
	enum pt_attn_form attn;
	bool rope_adjacent;         /* RoPE on adjacent pairs (ggml NORM), not NEOX halves */
};

/* The recipe of a (valid) arch. */
const struct pt_arch_recipe *pt_arch_recipe(enum pt_arch a);

/* Where a tensor lives at run time. */
enum pt_tensor_role {
	PT_ROLE_RESIDENT = 0,      /* read-only mmap, always resident */
	PT_ROLE_EXPERT = 1,        /* routed expert slabs: streamed into the expert cache */
	PT_ROLE_EXPERT_SCALE = 2,  /* per-expert scalars ({n_expert}) */
	PT_ROLE_ROUTER = 3,        /* ffn_gate_inp (+ scale), exp_probs_b */
	PT_ROLE_SKIP = 4,          /* in the file, never bound nor read (glm4moe NextN blocks) */
};

/* llama-quant.cpp name categories (GGUF-AND-QUANTS.md 7.2) plus "not quantizable". */
enum pt_tensor_cat {
	PT_CAT_NONE = 0,           /* never quantized: 1-D, norms, router, biases, scales */
	PT_CAT_OTHER,              /* quantizable, no special rule */
	PT_CAT_TOKEN_EMBD,
	PT_CAT_OUTPUT,
	PT_CAT_ATTN_Q,
	PT_CAT_ATTN_K,
	PT_CAT_ATTN_V,
	PT_CAT_ATTN_QKV,
	PT_CAT_ATTN_OUTPUT,
	PT_CAT_FFN_GATE,
	PT_CAT_FFN_UP,
	PT_CAT_FFN_DOWN,
	PT_CAT_COUNT,
};

/* How mkmodel fills a tensor (the loader ignores it). */
enum pt_tensor_init {
	PT_INIT_WEIGHT = 0,        /* zero-mean, scale 1/sqrt(fan_in) */
	PT_INIT_EMBED,             /* token embedding rows */
	PT_INIT_NORM,              /* RMSNorm gains near 1 */
	PT_INIT_POST_NORM,         /* gemma4 post-attention/FFN norm gains, large so layer
				      outputs outweigh the (tied) input embedding */
	PT_INIT_ROUTER,            /* zero-mean, diverse router rows */
	PT_INIT_ROUTER_BIAS,       /* exp_probs_b: zero unless --router-skew */
	PT_INIT_ONES,              /* scale vectors near 1 (gemma4 router/expert scales) */
	PT_INIT_ROPE_FREQS,        /* gemma4 proportional rope factors (1 then 1e30) */
	PT_INIT_LAYER_SCALE,       /* gemma4 layer_output_scale */
	PT_INIT_BIAS,              /* projection biases: small values around 0 */
	PT_INIT_SSM_A,             /* linear-attention decay rates -exp(A_log): in [-1, -0.1] */
};

struct pt_tensor_desc {
	char name[PT_ARCH_MAX_NAME];
	uint32_t n_dims;
	uint64_t ne[4];            /* dims past n_dims are 1 */
	int32_t layer;             /* -1 for non-layer tensors */
	enum pt_tensor_role role;
	enum pt_tensor_cat cat;
	enum pt_tensor_init init;
	uint64_t fan_in;           /* ne[0] for weights */
};

struct pt_tensor_list {
	struct pt_tensor_desc *t;
	uint32_t n;
	uint32_t cap;
};

/* ---- arch identification ---- */
const char *pt_arch_name(enum pt_arch a); /* canonical GGUF name */
/* Accepts "qwen3moe", "bailingmoe2", "sarvam_moe", "sarvam-moe", "gemma4", "glm4moe",
 * "qwen35moe", "gpt-oss". */
int pt_arch_from_name(const char *name, enum pt_arch *out);

/* ---- hyper-parameters ---- */
/* llama.cpp's defaults for keys the arch treats as optional; arch and arch_name set. */
void pt_hparams_defaults(struct pt_hparams *hp, enum pt_arch arch);
/* Preset "tiny" | "small" | "full" with n_layer layers (0 = the preset's count; per-layer
 * patterns such as gemma4's sliding/full interleave are extended).  n_vocab 0 means "the
 * compact vocabulary", sized by its builder; full presets carry the real vocabulary size. */
enum pt_status pt_arch_preset(enum pt_arch arch, const char *preset, uint32_t n_layer,
			      struct pt_hparams *hp, struct pt_error *err);
/* Consistency checks (widths, per-layer arrays, limits): PT_E_FORMAT / PT_E_INVALID. */
enum pt_status pt_hparams_validate(const struct pt_hparams *hp, struct pt_error *err);
/* Derived per-layer values. */
uint32_t pt_hparams_head_dim_k(const struct pt_hparams *hp, uint32_t layer);
uint32_t pt_hparams_head_dim_v(const struct pt_hparams *hp, uint32_t layer);
bool pt_hparams_is_moe_layer(const struct pt_hparams *hp, uint32_t layer);
bool pt_hparams_has_attn_v(const struct pt_hparams *hp, uint32_t layer);
/* MLA: V is the first head_dim_v values of the cached K row (no V array). */
bool pt_hparams_v_in_k(const struct pt_hparams *hp);
/* Values one position occupies in layer's KV cache (K, plus V unless it lives in K). */
uint64_t pt_hparams_kv_values(const struct pt_hparams *hp, uint32_t layer);

/* Writes every key the arch reads (with the hp->arch_name prefix). */
enum pt_status pt_arch_write_hparams(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err);
/* Reads the keys back from a file (general.architecture chooses the arch); required keys
 * missing -> PT_E_FORMAT naming the key. */
enum pt_status pt_arch_read_hparams(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err);

/* ---- tensors ---- */
/* Enumerates every tensor of the arch for hp, sorted in llama.cpp's loader order. */
enum pt_status pt_arch_tensors(const struct pt_hparams *hp, struct pt_tensor_list *out,
			       struct pt_error *err);
void pt_tensor_list_free(struct pt_tensor_list *l);
const struct pt_tensor_desc *pt_tensor_list_find(const struct pt_tensor_list *l,
						 const char *name);
/* Number of elements of a tensor. */
uint64_t pt_tensor_desc_nelems(const struct pt_tensor_desc *t);
/* Checks a file's tensor table against the description: every expected tensor present
 * with the expected shape, no unexpected tensors (names the first mismatch). */
enum pt_status pt_arch_check_tensors(const struct pt_hparams *hp, const pt_gguf *g,
				     struct pt_error *err);

/* ---- quantization mixtures (GGUF-AND-QUANTS.md 7) ---- */
enum pt_mix {
	PT_MIX_F32 = 0,
	PT_MIX_F16,
	PT_MIX_BF16,
	PT_MIX_Q8_0,
	PT_MIX_Q6_K,
	PT_MIX_Q4_K_M,
	PT_MIX_Q5_K_M,
	PT_MIX_Q4_0,
	PT_MIX_IQ4_XS,
	PT_MIX_MXFP4,
	PT_MIX_Q3_K_M,
	PT_MIX_Q3_K_L,
	PT_MIX_Q2_K,
	PT_MIX_COUNT,
};

int pt_mix_from_name(const char *name, enum pt_mix *out);
/* The mixture mkmodel writes without --quant: the arch's published one (gpt-oss: mxfp4),
 * else q4_k_m. */
enum pt_mix pt_arch_default_mix(enum pt_arch a);
const char *pt_mix_name(enum pt_mix m);
uint32_t pt_mix_file_type(enum pt_mix m); /* llama_ftype for general.file_type */
/* Storage type (enum pt_type) of every tensor in l for mixture m, written to types[]
 * (l->n entries).  Applies the category rules with llama.cpp's attn_v / layer counters and
 * the shape fallback. */
void pt_mix_assign(enum pt_mix m, const struct pt_hparams *hp, const struct pt_tensor_list *l,
		   uint32_t *types);

#endif
