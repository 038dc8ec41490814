/* qwen3moe.c - Qwen3-MoE (Qwen3-30B-A3B) description: every layer is MoE (softmax gating,
 * normalised top-k, no shared expert), per-head Q/K RMSNorm, NEOX RoPE, untied output
 * (ARCHITECTURES.md 3). */
#include "model/arch_impl.h"

/* tiny: every K-quant rule fires (3 layers -> Q6_K on the last one), 16 experts.
 * small: realistic ratios, ~250 MB at q4_k_m.  full: Qwen3-30B-A3B. */
static const struct pt_preset_base presets[] = {
	{ "tiny", NULL, 0, 4096, 256, 3, 4, 2, 64, 768, 256, 16, 4 },
	{ "small", NULL, 0, 32768, 1024, 8, 16, 4, 64, 3072, 512, 32, 4 },
	{ "full", NULL, 151936, 40960, 2048, 48, 32, 4, 128, 6144, 768, 128, 8 },
};

static enum pt_status qwen_preset(const char *name, struct pt_hparams *hp,
				  struct pt_error *err)
{
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full", hp, NULL, err);
	if (st != PT_OK)
		return st;
	hp->rope_freq_base = 1000000.0f;
	hp->rms_eps = 1e-6f;
	hp->gating = PT_GATING_SOFTMAX;
	hp->expert_weights_norm = true;
	return PT_OK;
}

static enum pt_status qwen_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				   struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	for (uint32_t i = 0; i < hp->n_layer; i++) {
		const int32_t L = (int32_t)i;
		const uint64_t hd = hp->head_dim_k, q = hp->n_head * hd, kv = hp->n_head_kv[i] * hd;
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
		TRY(pt_tl_add_attn(l, i, R, E, q, kv, kv, q, err));
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_q_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_k_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.ffn_norm.weight", i);
		TRY(pt_tl_add_router(l, i, PT_ROLE_ROUTER, E, X, false, err));
		TRY(pt_tl_add_ffn(l, i, PT_ROLE_EXPERT, "_exps", E, F, X, err));
	}
	return PT_OK;
}

static enum pt_status qwen_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				      struct pt_error *err)
{
	(void)hp;
	(void)w;
	(void)err;
	return PT_OK; /* the generic keys are all Qwen3-MoE reads; gating is hard-coded */
}

static enum pt_status qwen_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				     struct pt_error *err)
{
	(void)g;
	(void)err;
	/* Hard-coded in llama.cpp's qwen3moe graph: softmax, normalised, no scale. */
	hp->gating = PT_GATING_SOFTMAX;
	hp->expert_weights_norm = true;
	hp->expert_weights_scale = 0.0f;
	if (hp->n_ff_exp == 0 && hp->n_expert_used)
		hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
	return PT_OK;
}

const struct pt_arch_ops pt_arch_qwen3moe_ops = {
	.name = "qwen3moe",
	/* softmax top-k, normalised weights, no scale: hard-coded in llama.cpp's graph */
	.recipe = { .act = PT_ACT_SWIGLU, .router_in = PT_ROUTER_IN_FFN_NORM, .ffn = PT_FFN_SERIAL },
	.preset = qwen_preset,
	.tensors = qwen_tensors,
	.write_keys = qwen_write_keys,
	.read_keys = qwen_read_keys,
};
