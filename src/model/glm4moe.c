/* glm4moe.c - GLM-4.5 / 4.5-Air / 4.6 description (ARCHITECTURES-NEXT.md 2): Q/K/V biases,
 * optional per-head Q/K norms, partial NEOX RoPE (rope.dimension_count < head dim), the
 * pre-FFN norm stored as post_attention_norm, leading dense layers, sigmoid routing with a
 * selection-only bias (exp_probs_b, required), normalised and scaled top-k weights, shared
 * expert(s).  The NextN / MTP blocks appended after the n_layer trunk blocks
 * (nextn_predict_layers) are described so the file checks, and never bound or computed. */
#include "model/arch_impl.h"

/* n_rot: partial RoPE, below the head dim. */
struct preset {
	struct pt_preset_base b;
	uint32_t n_rot, n_nextn;
};

/* tiny: dense layer 0 + 2 MoE layers and one NextN block; small: realistic ratios;
 * full: GLM-4.5-Air (46 trunk layers + 1 NextN block, as the published GGUFs keep it). */
static const struct preset presets[] = {
	{ { "tiny", NULL, 0, 4096, 256, 3, 4, 2, 64, 512, 256, 16, 4 }, 32, 1 },
	{ { "small", NULL, 0, 32768, 1024, 6, 16, 4, 64, 2048, 256, 64, 8 }, 32, 1 },
	{ { "full", "glm-4.5-air", 151552, 131072, 4096, 46, 96, 8, 128, 10944, 1408, 128, 8 },
	  64, 1 },
};

static enum pt_status glm_preset(const char *name, struct pt_hparams *hp, struct pt_error *err)
{
	const void *entry;
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full", hp, &entry, err);
	if (st != PT_OK)
		return st;
	const struct preset *p = entry;
	hp->n_layer_nextn = p->n_nextn;
	hp->n_rot = p->n_rot;
	hp->n_expert_shared = 1;
	hp->n_layer_dense_lead = 1;
	hp->rope_freq_base = 1000000.0f;
	hp->rms_eps = 1e-5f;
	hp->gating = PT_GATING_SIGMOID;
	hp->expert_weights_norm = true;
	hp->expert_weights_scale = 1.0f;
	hp->has_exp_probs_b = true;
	hp->has_attn_bias = true;
	return PT_OK;
}

/* One block's tensors; role is PT_ROLE_SKIP for NextN blocks (never bound). */
static enum pt_status block_tensors(const struct pt_hparams *hp, uint32_t i, bool nextn,
				    struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	const uint64_t hd = hp->head_dim_k, q = hp->n_head * hd;
	const uint64_t kv = (uint64_t)hp->n_head_kv[nextn ? 0 : i] * hd;
	const uint64_t S = F * hp->n_expert_shared;
	const enum pt_tensor_role R = nextn ? PT_ROLE_SKIP : PT_ROLE_RESIDENT;
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
	TRY(pt_tl_add_attn(l, i, R, E, q, kv, kv, q, err));
	if (hp->has_attn_bias) {
		ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, q, 0, 0, err, "blk.%u.attn_q.bias", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, kv, 0, 0, err, "blk.%u.attn_k.bias", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, kv, 0, 0, err, "blk.%u.attn_v.bias", i);
	}
	if (hp->has_qk_norm) {
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_q_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_k_norm.weight", i);
	}
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.post_attention_norm.weight",
	    i);
	if (!nextn && !pt_hparams_is_moe_layer(hp, i))
		return pt_tl_add_ffn(l, i, R, "", E, hp->n_ff, 0, err);
	TRY(pt_tl_add_router(l, i, nextn ? R : PT_ROLE_ROUTER, E, X, true, err));
	TRY(pt_tl_add_ffn(l, i, nextn ? R : PT_ROLE_EXPERT, "_exps", E, F, X, err));
	if (hp->n_expert_shared)
		TRY(pt_tl_add_ffn(l, i, R, "_shexp", E, S, 0, err));
	if (!nextn)
		return PT_OK;
	/* the NextN head (llama.cpp: TENSOR_SKIP; no optional embed_tokens written) */
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, 2 * E, E, 0, err, "blk.%u.nextn.eh_proj.weight",
	    i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.nextn.enorm.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.nextn.hnorm.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
	    "blk.%u.nextn.shared_head_norm.weight", i);
	return PT_OK;
}

static enum pt_status glm_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				  struct pt_error *err)
{
	enum pt_status st = PT_OK;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	for (uint32_t i = 0; i < hp->n_layer + hp->n_layer_nextn; i++)
		TRY(block_tensors(hp, i, i >= hp->n_layer, l, err));
	return PT_OK;
}

static enum pt_status glm_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err)
{
	enum pt_status st;
	TRY(pt_key_u32(w, hp, "rope.dimension_count", hp->n_rot, err));
	TRY(pt_key_u32(w, hp, "vocab_size", hp->n_vocab, err));
	TRY(pt_key_u32(w, hp, "expert_shared_count", hp->n_expert_shared, err));
	TRY(pt_key_u32(w, hp, "leading_dense_block_count", hp->n_layer_dense_lead, err));
	TRY(pt_key_u32(w, hp, "expert_gating_func", (uint32_t)hp->gating, err));
	TRY(pt_key_f32(w, hp, "expert_weights_scale", hp->expert_weights_scale, err));
	TRY(pt_key_bool(w, hp, "expert_weights_norm", hp->expert_weights_norm, err));
	TRY(pt_key_u32(w, hp, "nextn_predict_layers", hp->n_layer_nextn, err));
	return PT_OK;
}

static enum pt_status glm_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	enum pt_status st;
	/* llama.cpp's default for this arch when expert_gating_func is absent: sigmoid */
	TRY(pt_arch_read_route_keys(g, hp, PT_GATING_SIGMOID, err));
	TRY(pt_rkey_u32(g, hp, "nextn_predict_layers", false, &hp->n_layer_nextn, err));
	/* block_count counts the NextN blocks; the trunk is the rest */
	if (hp->n_layer_nextn >= hp->n_layer)
		return pt_error_set(err, PT_E_FORMAT, "%s.nextn_predict_layers = %u of %u blocks",
				    hp->arch_name, hp->n_layer_nextn, hp->n_layer);
	hp->n_layer -= hp->n_layer_nextn;
	return PT_OK;
}

const struct pt_arch_ops pt_arch_glm4moe_ops = {
	.name = "glm4moe",
	.recipe = { .act = PT_ACT_SWIGLU, .route_from_keys = true,
		    .router_in = PT_ROUTER_IN_FFN_NORM, .ffn = PT_FFN_SERIAL,
		    .ffn_norm_post_attention = true },
	.preset = glm_preset,
	.tensors = glm_tensors,
	.write_keys = glm_write_keys,
	.read_keys = glm_read_keys,
};
