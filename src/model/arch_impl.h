/* arch_impl.h - private interface between arch.c (shared tables, keys, mixtures) and the
 * per-arch description files (qwen3moe.c, bailingmoe2.c, gemma4.c). */
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

/* Appends a tensor; name is printf-formatted.  ne2 = 0 means 2-D, ne1 = 0 means 1-D. */
enum pt_status pt_tl_add(struct pt_tensor_list *l, int32_t layer, enum pt_tensor_role role,
			 enum pt_tensor_cat cat, enum pt_tensor_init init, uint64_t ne0,
			 uint64_t ne1, uint64_t ne2, struct pt_error *err, const char *fmt, ...)
	__attribute__((format(printf, 10, 11)));

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
