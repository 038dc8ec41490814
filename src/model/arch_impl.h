/* arch_impl.h - private interface between arch.c (shared tables, keys, mixtures, the tensor
 * runs every arch lists alike) and the per-arch description files (qwen3moe.c, gemma4.c, ...). */
#ifndef PT_MODEL_ARCH_IMPL_H
#define PT_MODEL_ARCH_IMPL_H

#include "model/arch.h"

struct pt_arch_ops {
	const char *name;
	struct pt_arch_recipe recipe; /* how the forward pass composes the layer */
	bool mix_mxfp4;               /* published files: MXFP4 experts (mkmodel's default) */
	/* Fills hp for a preset (defaults already applied); PT_E_INVALID for unknown presets. */
	enum pt_status (*preset)(const char *preset, struct pt_hparams *hp,
				 struct pt_error *err);
	/* Appends every tensor (any order; arch.c sorts). */
	enum pt_status (*tensors)(const struct pt_hparams *hp, struct pt_tensor_list *l,
				  struct pt_error *err);
	/* Arch-specific keys beyond the generic ones. */
	enum pt_status (*write_keys)(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err);
	enum pt_status (*read_keys)(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err);
};

extern const struct pt_arch_ops pt_arch_qwen3moe_ops;
extern const struct pt_arch_ops pt_arch_bailingmoe2_ops;
extern const struct pt_arch_ops pt_arch_gemma4_ops;
extern const struct pt_arch_ops pt_arch_glm4moe_ops;
extern const struct pt_arch_ops pt_arch_qwen35moe_ops;
extern const struct pt_arch_ops pt_arch_deepseek2_ops;
extern const struct pt_arch_ops pt_arch_gptoss_ops;

/* The fields every arch's preset table starts an entry with (an arch's own struct preset
 * holds this first, then what only it has).  head_dim is head_dim_k = head_dim_v = n_rot. */
struct pt_preset_base {
	const char *name, *alias; /* alias: a second name for the entry (NULL: none) */
	uint32_t n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim;
	uint32_t n_ff, n_ff_exp, n_expert, n_used;
};

/* preset.c: finds `name` (or an alias) among the n entries of `size` bytes at table, each
 * starting with a struct pt_preset_base, applies that base to hp (n_layer only when the
 * caller left it 0: --layers wins; n_head_kv for every layer) and sets *entry (unless NULL)
 * to the entry, for the arch to fill the rest.  An unknown name: PT_E_INVALID
 * "unknown preset '<name>' (<choices>)". */
enum pt_status pt_preset_fill(const void *table, size_t n, size_t size, const char *name,
			      const char *choices, struct pt_hparams *hp, const void **entry,
			      struct pt_error *err);
/* pt_preset_fill over a preset array (an array: its size is taken here). */
#define PT_PRESET_FILL(table, name, choices, hp, entry, err)                               \
	pt_preset_fill((table), sizeof(table) / sizeof((table)[0]), sizeof((table)[0]),    \
		       (name), (choices), (hp), (entry), (err))

/* In a function with a local `enum pt_status st`: returns st when x fails, so that the long
 * lists of tensors and keys below read one item a line. */
#define TRY(x)                                                                             \
	do {                                                                               \
		if ((st = (x)) != PT_OK)                                                   \
			return st;                                                         \
	} while (0)
/* Appends a tensor to the function's list `l` (pt_tl_add), returning on failure. */
#define ADD(...) TRY(pt_tl_add(l, __VA_ARGS__))

/* Appends a tensor; name is printf-formatted.  ne2 = 0 means 2-D, ne1 = 0 means 1-D. */
enum pt_status pt_tl_add(struct pt_tensor_list *l, int32_t layer, enum pt_tensor_role role,
			 enum pt_tensor_cat cat, enum pt_tensor_init init, uint64_t ne0,
			 uint64_t ne1, uint64_t ne2, struct pt_error *err, const char *fmt, ...)
	__attribute__((format(printf, 10, 11)));
/* token_embd.weight {E, V}, output_norm.weight {E} and, when output, output.weight {E, V}. */
enum pt_status pt_tl_add_io(struct pt_tensor_list *l, const struct pt_hparams *hp, bool output,
			    struct pt_error *err);
/* Block i's router ffn_gate_inp.weight {E, X} and, when probs_bias, the selection bias
 * exp_probs_b.bias {X}. */
enum pt_status pt_tl_add_router(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
				uint64_t E, uint64_t X, bool probs_bias, struct pt_error *err);
/* Block i's attn_q {E, q}, attn_k {E, k}, attn_v {E, v} (none when v = 0) and attn_output
 * {o, E}. */
enum pt_status pt_tl_add_attn(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
			      uint64_t E, uint64_t q, uint64_t k, uint64_t v, uint64_t o,
			      struct pt_error *err);
/* Block i's ffn_gate<sfx>, ffn_up<sfx> {E, F[, X]} and ffn_down<sfx> {F, E[, X]}: sfx ""
 * (dense FFN, X = 0), "_shexp" (shared expert, X = 0) or "_exps" (X routed experts). */
enum pt_status pt_tl_add_ffn(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
			     const char *sfx, uint64_t E, uint64_t F, uint64_t X,
			     struct pt_error *err);

/* Key helpers: "<arch_name>.<suffix>". */
enum pt_status pt_key_u32(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			  uint32_t v, struct pt_error *err);
enum pt_status pt_key_f32(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			  float v, struct pt_error *err);
enum pt_status pt_key_bool(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			   bool v, struct pt_error *err);
enum pt_status pt_rkey_u32(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			   bool required, uint32_t *v, struct pt_error *err);
enum pt_status pt_rkey_f32(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			   bool required, float *v, struct pt_error *err);
enum pt_status pt_rkey_bool(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			    bool *v, struct pt_error *err);
/* The routing keys (route_keys.c): for a recipe that routes from keys, expert_feed_forward_length
 * and expert_shared_count (required), leading_dense_block_count, expert_gating_func (absent or
 * 0: default_gating; PT_GATING_NONE makes the key required; only softmax and sigmoid are
 * supported), expert_weights_scale / _norm, expert_group_count / _used_count.  A recipe with
 * fixed routing (route_from_keys false) gets softmax with normalised weights, no key read. */
enum pt_status pt_arch_read_route_keys(const pt_gguf *g, struct pt_hparams *hp,
				       enum pt_gating default_gating, struct pt_error *err);
/* A per-layer u32 key stored as a scalar or an array of n_layer values. */
enum pt_status pt_rkey_u32_layers(const pt_gguf *g, const struct pt_hparams *hp,
				  const char *suffix, uint32_t *out, bool *found,
				  struct pt_error *err);

#endif
