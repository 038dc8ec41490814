/* bailingmoe2.c - BailingMoeV2 / Sarvam 30B description: fused attn_qkv, per-head Q/K
 * RMSNorm, NEOX RoPE, leading dense layer(s), sigmoid-gated routed experts with a selection
 * bias (exp_probs_b), normalised and scaled weights, one shared expert (ARCHITECTURES.md 1).
 * The arch name may be "bailingmoe2" (upstream) or "sarvam_moe" (PR branch, same keys). */
#include "model/arch_impl.h"

struct preset {
	struct pt_preset_base b;
	uint32_t n_ff_shexp;
};

/* tiny: dense layer 0 + 2 MoE layers; small: realistic ratios; full: sarvam-30b. */
static const struct preset presets[] = {
	{ { "tiny", NULL, 0, 4096, 256, 3, 4, 2, 64, 512, 256, 16, 4 }, 256 },
	{ { "small", NULL, 0, 32768, 1024, 6, 16, 2, 64, 2048, 256, 64, 6 }, 256 },
	{ { "full", NULL, 262144, 131072, 4096, 19, 64, 4, 64, 8192, 1024, 128, 6 }, 1024 },
};

static enum pt_status bailing_preset(const char *name, struct pt_hparams *hp,
				     struct pt_error *err)
{
	const void *entry;
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full", hp, &entry, err);
	if (st != PT_OK)
		return st;
	const struct preset *p = entry;
	hp->n_ff_shexp = p->n_ff_shexp;
	hp->n_expert_shared = 1;
	hp->n_expert_groups = 1;
	hp->n_group_used = 1;
	hp->n_layer_dense_lead = 1;
	hp->rope_freq_base = 8000000.0f;
	hp->rms_eps = 1e-6f;
	hp->gating = PT_GATING_SIGMOID;
	hp->expert_weights_norm = true;
	hp->expert_weights_scale = 2.5f;
	hp->fused_qkv = true;
	hp->has_exp_probs_b = true;
	return PT_OK;
}

static enum pt_status moe_tensors(const struct pt_hparams *hp, uint32_t i,
				  struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	const uint64_t S = (uint64_t)hp->n_ff_shexp * (hp->n_expert_shared ? hp->n_expert_shared : 1);
	TRY(pt_tl_add_router(l, i, PT_ROLE_ROUTER, E, X, hp->has_exp_probs_b, err));
	TRY(pt_tl_add_ffn(l, i, PT_ROLE_EXPERT, "_exps", E, F, X, err));
	if (hp->n_expert_shared == 0)
		return PT_OK;
	return pt_tl_add_ffn(l, i, PT_ROLE_RESIDENT, "_shexp", E, S, 0, err);
}

static enum pt_status bailing_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				      struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const uint64_t E = hp->n_embd;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	for (uint32_t i = 0; i < hp->n_layer; i++) {
		const int32_t L = (int32_t)i;
		const uint64_t hd = hp->head_dim_k, q = hp->n_head * hd, kv = hp->n_head_kv[i] * hd;
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
		ADD(L, R, PT_CAT_ATTN_QKV, PT_INIT_WEIGHT, E, q + 2 * kv, 0, err,
		    "blk.%u.attn_qkv.weight", i);
		ADD(L, R, PT_CAT_ATTN_OUTPUT, PT_INIT_WEIGHT, q, E, 0, err,
		    "blk.%u.attn_output.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_q_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_k_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.ffn_norm.weight", i);
		if (pt_hparams_is_moe_layer(hp, i))
			TRY(moe_tensors(hp, i, l, err));
		else
			TRY(pt_tl_add_ffn(l, i, R, "", E, hp->n_ff, 0, err));
	}
	return PT_OK;
}

static enum pt_status bailing_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
					 struct pt_error *err)
{
	enum pt_status st;
	TRY(pt_key_u32(w, hp, "rope.dimension_count", hp->n_rot, err));
	TRY(pt_key_u32(w, hp, "vocab_size", hp->n_vocab, err));
	TRY(pt_key_u32(w, hp, "expert_group_count", hp->n_expert_groups, err));
	TRY(pt_key_u32(w, hp, "expert_group_used_count", hp->n_group_used, err));
	TRY(pt_key_u32(w, hp, "expert_gating_func", (uint32_t)hp->gating, err));
	TRY(pt_key_u32(w, hp, "leading_dense_block_count", hp->n_layer_dense_lead, err));
	TRY(pt_key_u32(w, hp, "expert_shared_feed_forward_length", hp->n_ff_shexp, err));
	TRY(pt_key_u32(w, hp, "expert_shared_count", hp->n_expert_shared, err));
	TRY(pt_key_f32(w, hp, "expert_weights_scale", hp->expert_weights_scale, err));
	TRY(pt_key_bool(w, hp, "expert_weights_norm", hp->expert_weights_norm, err));
	return PT_OK;
}

static enum pt_status bailing_read_keys(const pt_gguf *g, struct pt_hparams *hp,
					struct pt_error *err)
{
	/* expert_gating_func is required here (no llama.cpp default) */
	enum pt_status st = pt_arch_read_route_keys(g, hp, PT_GATING_NONE, err);
	if (st != PT_OK)
		return st;
	return pt_rkey_u32(g, hp, "expert_shared_feed_forward_length", false, &hp->n_ff_shexp,
			   err);
}

const struct pt_arch_ops pt_arch_bailingmoe2_ops = {
	.name = "bailingmoe2",
	.recipe = { .act = PT_ACT_SWIGLU, .route_from_keys = true,
		    .router_in = PT_ROUTER_IN_FFN_NORM, .ffn = PT_FFN_SERIAL },
	.preset = bailing_preset,
	.tensors = bailing_tensors,
	.write_keys = bailing_write_keys,
	.read_keys = bailing_read_keys,
};
