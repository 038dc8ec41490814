/* deepseek2.c - DeepSeek-V2-Lite / V3 / R1 and Kimi K2 (ARCHITECTURES-NEXT.md 3): multi-head
 * latent attention with the up-projections absorbed (attn_k_b / attn_v_b, the cache holds
 * the kv_lora_rank latent and the shared RoPE key), Q through a low-rank q_a / q_a_norm / q_b
 * path (or attn_q directly on V2-Lite), adjacent-pair RoPE with YaRN and its mscale on the
 * score scale, leading dense layers, grouped top-k routing with softmax or sigmoid gating,
 * an optional selection bias (exp_probs_b), normalised and scaled weights, shared experts.
 * Only the MLA layout is described: legacy files with an unsplit attn_kv_b are refused. */
#include "model/arch_impl.h"

#include <stdio.h>
#include <string.h>

/* The base holds the cache's view, as the converter writes the generic keys: one KV head
 * (n_head_kv 1); its head_dim is unused (0): the K/V widths come from the ranks below. */
struct preset {
	struct pt_preset_base b;
	const char *tok_pre;
	uint32_t q_lora, kv_lora, nope, rope, hv;
	uint32_t n_shared, n_dense, n_group, n_group_used;
	enum pt_gating gating;
	bool norm, bias;
	float scale, rope_base, yarn_factor, yarn_log_mul, eps;
};

/* tiny / small: V3-style (q LoRA, sigmoid + bias, 4-of-8 style groups) at test sizes;
 * tiny-lite: V2-Lite's layout (attn_q, softmax, mscale_all_dim 0.707) at test widths, with
 * its 27 layers (llama.cpp reads a file without q_lora_rank only at that depth);
 * full: DeepSeek-V2-Lite (no q LoRA, softmax, no groups); deepseek-v3 and kimi-k2 are the
 * true shapes (hundreds of GB: written only by make bench after its disk-space check).
 * tok_pre is the real model's tokenizer.ggml.pre, written over the compact vocabulary
 * (tiny, small, tiny-lite keep the compact vocabulary's qwen2). */
static const struct preset presets[] = {
	{ { "tiny", NULL, 0, 163840, 256, 3, 4, 1, 0, 512, 256, 16, 4 }, NULL, 128, 128, 64, 32,
	  64, 1, 1, 4, 2, PT_GATING_SIGMOID, true, true, 2.5f, 10000.0f, 40.0f, 0.1f, 1e-6f },
	{ { "small", NULL, 0, 163840, 1024, 6, 16, 1, 0, 2048, 256, 64, 6 }, NULL, 384, 256, 64,
	  32, 64, 2, 1, 8, 3, PT_GATING_SIGMOID, true, true, 2.5f, 10000.0f, 40.0f, 0.1f, 1e-6f },
	{ { "tiny-lite", NULL, 0, 163840, 256, 27, 4, 1, 0, 256, 128, 8, 2 }, NULL, 0, 128, 64,
	  32, 64, 2, 1, 1, 1, PT_GATING_SOFTMAX, false, false, 1.0f, 10000.0f, 40.0f, 0.0707f,
	  1e-6f },
	{ { "full", "deepseek-v2-lite", 102400, 163840, 2048, 27, 16, 1, 0, 10944, 1408, 64, 6 },
	  "deepseek-llm", 0, 512, 128, 64, 128, 2, 1, 1, 1, PT_GATING_SOFTMAX, false, false, 1.0f,
	  10000.0f, 40.0f, 0.0707f, 1e-6f },
	{ { "deepseek-v3", "deepseek-r1", 129280, 163840, 7168, 61, 128, 1, 0, 18432, 2048, 256,
	    8 }, "deepseek-v3", 1536, 512, 128, 64, 128, 1, 3, 8, 4, PT_GATING_SIGMOID, true, true,
	  2.5f, 10000.0f, 40.0f, 0.1f, 1e-6f },
	{ { "kimi-k2", NULL, 163840, 131072, 7168, 61, 64, 1, 0, 18432, 2048, 384, 8 }, "kimi-k2",
	  1536, 512, 128, 64, 128, 1, 1, 1, 1, PT_GATING_SIGMOID, true, true, 2.827f, 50000.0f,
	  32.0f, 0.1f, 1e-6f },
};

static enum pt_status ds_preset(const char *name, struct pt_hparams *hp, struct pt_error *err)
{
	const void *entry;
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, tiny-lite, small, full = "
					   "deepseek-v2-lite, deepseek-v3, kimi-k2", hp, &entry,
					   err);
	if (st != PT_OK)
		return st;
	const struct preset *p = entry;
	hp->preset_tok_pre = p->tok_pre;
	hp->q_lora_rank = p->q_lora;
	hp->kv_lora_rank = p->kv_lora;
	hp->head_dim_k_mla = p->nope + p->rope;
	hp->head_dim_v_mla = p->hv;
	hp->head_dim_k = p->kv_lora + p->rope;
	hp->head_dim_v = p->kv_lora;
	hp->n_rot = p->rope;
	hp->n_expert_shared = p->n_shared;
	hp->n_layer_dense_lead = p->n_dense;
	hp->n_expert_groups = p->n_group;
	hp->n_group_used = p->n_group_used;
	hp->gating = p->gating;
	hp->expert_weights_norm = p->norm;
	hp->expert_weights_scale = p->scale;
	hp->has_exp_probs_b = p->bias;
	hp->rope_freq_base = p->rope_base;
	hp->rope_yarn = true;
	hp->rope_scaling_factor = p->yarn_factor;
	hp->rope_orig_ctx = 4096;
	hp->rope_yarn_log_mul = p->yarn_log_mul;
	hp->rms_eps = p->eps;
	return PT_OK;
}

static enum pt_status attn_tensors(const struct pt_hparams *hp, uint32_t i,
				   struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	const uint64_t E = hp->n_embd, H = hp->n_head, C = hp->kv_lora_rank, r = hp->n_rot;
	const uint64_t hk = hp->head_dim_k_mla, hv = hp->head_dim_v_mla, nope = hk - r;
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
	if (hp->q_lora_rank) {
		const uint64_t Q = hp->q_lora_rank;
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, Q, 0, 0, err, "blk.%u.attn_q_a_norm.weight", i);
		ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, E, Q, 0, err, "blk.%u.attn_q_a.weight", i);
		ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, Q, H * hk, 0, err, "blk.%u.attn_q_b.weight",
		    i);
	} else {
		ADD(L, R, PT_CAT_ATTN_Q, PT_INIT_WEIGHT, E, H * hk, 0, err, "blk.%u.attn_q.weight",
		    i);
	}
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, C, 0, 0, err, "blk.%u.attn_kv_a_norm.weight", i);
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, E, C + r, 0, err, "blk.%u.attn_kv_a_mqa.weight", i);
	/* per head: k_b (nope -> latent), v_b (latent -> hv) */
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, nope, C, H, err, "blk.%u.attn_k_b.weight", i);
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, C, hv, H, err, "blk.%u.attn_v_b.weight", i);
	ADD(L, R, PT_CAT_ATTN_OUTPUT, PT_INIT_WEIGHT, H * hv, E, 0, err,
	    "blk.%u.attn_output.weight", i);
	return PT_OK;
}

static enum pt_status ffn_tensors(const struct pt_hparams *hp, uint32_t i,
				  struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	const uint64_t S = F * hp->n_expert_shared;
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.ffn_norm.weight", i);
	if (!pt_hparams_is_moe_layer(hp, i))
		return pt_tl_add_ffn(l, i, R, "", E, hp->n_ff, 0, err);
	TRY(pt_tl_add_router(l, i, PT_ROLE_ROUTER, E, X, hp->has_exp_probs_b, err));
	TRY(pt_tl_add_ffn(l, i, PT_ROLE_EXPERT, "_exps", E, F, X, err));
	return pt_tl_add_ffn(l, i, R, "_shexp", E, S, 0, err);
}

static enum pt_status ds_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				 struct pt_error *err)
{
	enum pt_status st = PT_OK;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	for (uint32_t i = 0; i < hp->n_layer; i++) {
		TRY(attn_tensors(hp, i, l, err));
		TRY(ffn_tensors(hp, i, l, err));
	}
	return PT_OK;
}

static enum pt_status key_str(pt_gguf_writer *w, const struct pt_hparams *hp,
			      const char *suffix, const char *v, struct pt_error *err)
{
	char k[128];
	snprintf(k, sizeof k, "%s.%s", hp->arch_name, suffix);
	return pt_gguf_writer_set_str(w, k, v, err);
}

static enum pt_status ds_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				    struct pt_error *err)
{
	enum pt_status st;
	TRY(pt_key_u32(w, hp, "rope.dimension_count", hp->n_rot, err));
	TRY(pt_key_u32(w, hp, "vocab_size", hp->n_vocab, err));
	TRY(pt_key_u32(w, hp, "leading_dense_block_count", hp->n_layer_dense_lead, err));
	if (hp->q_lora_rank)
		TRY(pt_key_u32(w, hp, "attention.q_lora_rank", hp->q_lora_rank, err));
	TRY(pt_key_u32(w, hp, "attention.kv_lora_rank", hp->kv_lora_rank, err));
	TRY(pt_key_u32(w, hp, "attention.key_length_mla", hp->head_dim_k_mla, err));
	TRY(pt_key_u32(w, hp, "attention.value_length_mla", hp->head_dim_v_mla, err));
	TRY(pt_key_u32(w, hp, "expert_shared_count", hp->n_expert_shared, err));
	TRY(pt_key_f32(w, hp, "expert_weights_scale", hp->expert_weights_scale, err));
	TRY(pt_key_bool(w, hp, "expert_weights_norm", hp->expert_weights_norm, err));
	TRY(pt_key_u32(w, hp, "expert_gating_func", (uint32_t)hp->gating, err));
	TRY(pt_key_u32(w, hp, "expert_group_count", hp->n_expert_groups, err));
	TRY(pt_key_u32(w, hp, "expert_group_used_count", hp->n_group_used, err));
	if (hp->rope_yarn) {
		TRY(key_str(w, hp, "rope.scaling.type", "yarn", err));
		TRY(pt_key_f32(w, hp, "rope.scaling.factor", hp->rope_scaling_factor, err));
		TRY(pt_key_u32(w, hp, "rope.scaling.original_context_length", hp->rope_orig_ctx,
			       err));
		TRY(pt_key_f32(w, hp, "rope.scaling.yarn_log_multiplier", hp->rope_yarn_log_mul,
			       err));
	}
	return PT_OK;
}

static enum pt_status ds_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				   struct pt_error *err)
{
	enum pt_status st;
	uint32_t gating = 0;
	char k[128];
	struct pt_str type = { 0 };
	bool found = false;
	TRY(pt_rkey_u32(g, hp, "expert_feed_forward_length", true, &hp->n_ff_exp, err));
	TRY(pt_rkey_u32(g, hp, "expert_shared_count", true, &hp->n_expert_shared, err));
	TRY(pt_rkey_u32(g, hp, "leading_dense_block_count", false, &hp->n_layer_dense_lead, err));
	TRY(pt_rkey_u32(g, hp, "attention.q_lora_rank", false, &hp->q_lora_rank, err));
	TRY(pt_rkey_u32(g, hp, "attention.kv_lora_rank", true, &hp->kv_lora_rank, err));
	TRY(pt_rkey_u32(g, hp, "attention.key_length_mla", false, &hp->head_dim_k_mla, err));
	TRY(pt_rkey_u32(g, hp, "attention.value_length_mla", false, &hp->head_dim_v_mla, err));
	TRY(pt_rkey_u32(g, hp, "expert_gating_func", false, &gating, err));
	TRY(pt_rkey_f32(g, hp, "expert_weights_scale", false, &hp->expert_weights_scale, err));
	TRY(pt_rkey_bool(g, hp, "expert_weights_norm", &hp->expert_weights_norm, err));
	TRY(pt_rkey_u32(g, hp, "expert_group_count", false, &hp->n_expert_groups, err));
	TRY(pt_rkey_u32(g, hp, "expert_group_used_count", false, &hp->n_group_used, err));
	TRY(pt_rkey_u32(g, hp, "nextn_predict_layers", false, &hp->n_layer_nextn, err));
	if (hp->head_dim_k_mla == 0 || hp->head_dim_v_mla == 0)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s: a legacy file without "
				    "attention.key_length_mla (unsplit attn_kv_b); reconvert it",
				    hp->arch_name);
	if (hp->n_layer_nextn != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s.nextn_predict_layers = %u: MTP "
				    "blocks are not supported", hp->arch_name, hp->n_layer_nextn);
	if (gating == PT_GATING_NONE)
		gating = PT_GATING_SOFTMAX; /* llama.cpp: old V2 / V2.5 files */
	if (gating != PT_GATING_SOFTMAX && gating != PT_GATING_SIGMOID)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s.expert_gating_func = %u unsupported",
				    hp->arch_name, gating);
	hp->gating = (enum pt_gating)gating;
	snprintf(k, sizeof k, "%s.rope.scaling.type", hp->arch_name);
	TRY(pt_gguf_get_str(g, k, &type, &found, err));
	hp->rope_yarn = found && type.len == 4 && memcmp(type.ptr, "yarn", 4) == 0;
	TRY(pt_rkey_f32(g, hp, "rope.scaling.factor", false, &hp->rope_scaling_factor, err));
	TRY(pt_rkey_u32(g, hp, "rope.scaling.original_context_length", false, &hp->rope_orig_ctx,
			err));
	TRY(pt_rkey_f32(g, hp, "rope.scaling.yarn_log_multiplier", false, &hp->rope_yarn_log_mul,
			err));
	/* the forward pass's own bounds of the MLA shapes */
	if (hp->kv_lora_rank == 0 || hp->kv_lora_rank > 8192 || hp->q_lora_rank > 65536 ||
	    hp->head_dim_k_mla <= hp->n_rot || hp->head_dim_k_mla > 1024 ||
	    hp->head_dim_v_mla > 1024 || hp->head_dim_k != hp->kv_lora_rank + hp->n_rot ||
	    hp->head_dim_v != hp->kv_lora_rank)
		return pt_error_set(err, PT_E_FORMAT, "%s: inconsistent MLA shapes (kv_lora_rank %u, "
				    "key_length %u, value_length %u, key_length_mla %u, rope %u)",
				    hp->arch_name, hp->kv_lora_rank, hp->head_dim_k, hp->head_dim_v,
				    hp->head_dim_k_mla, hp->n_rot);
	for (uint32_t l = 0; l < hp->n_layer; l++)
		if (hp->n_head_kv[l] != 1)
			return pt_error_set(err, PT_E_FORMAT, "%s.attention.head_count_kv = %u, MLA "
					    "files have 1", hp->arch_name, hp->n_head_kv[l]);
	if (hp->rope_yarn && !(hp->rope_scaling_factor >= 1.0f && hp->rope_scaling_factor < 1e6f))
		return pt_error_set(err, PT_E_FORMAT, "%s.rope.scaling.factor = %g out of range",
				    hp->arch_name, (double)hp->rope_scaling_factor);
	if (!(hp->rope_yarn_log_mul >= 0.0f && hp->rope_yarn_log_mul < 100.0f))
		return pt_error_set(err, PT_E_FORMAT, "%s.rope.scaling.yarn_log_multiplier = %g out "
				    "of range", hp->arch_name, (double)hp->rope_yarn_log_mul);
	return PT_OK;
}

const struct pt_arch_ops pt_arch_deepseek2_ops = {
	.name = "deepseek2",
	.recipe = { .act = PT_ACT_SWIGLU, .route_from_keys = true,
		    .router_in = PT_ROUTER_IN_FFN_NORM, .ffn = PT_FFN_SERIAL,
		    .attn = PT_ATTN_MLA, .rope_adjacent = true },
	.preset = ds_preset,
	.tensors = ds_tensors,
	.write_keys = ds_write_keys,
	.read_keys = ds_read_keys,
};
