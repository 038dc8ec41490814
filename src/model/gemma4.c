/* gemma4.c - Gemma 4 MoE (26B-A4B) description: interleaved sliding-window / full
 * attention with per-layer head dims and KV-head counts, K=V on full layers, proportional
 * RoPE through rope_freqs, an always-on dense GeGLU MLP beside the routed experts, router
 * input/expert scales, sandwich norms, tied embeddings and a final logit softcap
 * (ARCHITECTURES.md 2). */
#include "model/arch_impl.h"

#include <stdio.h>

/* The base's n_head_kv is unused (0): the per-kind counts below; head_dim is the full
 * layers'. */
struct preset {
	struct pt_preset_base b;
	uint32_t period, hd_swa, kv_swa, kv_full, n_swa;
};

/* period p: layers p-1, 2p-1, ... are full attention (5 sliding + 1 full in 26B-A4B).
 * tiny/small keep the real model's row lengths that are not multiples of 256 (2112, 704)
 * so the Q4_K_M shape fallback is exercised the same way. */
static const struct preset presets[] = {
	{ { "tiny", NULL, 0, 4096, 256, 4, 4, 0, 128, 320, 96, 16, 4 }, 4, 64, 2, 1, 8 },
	{ { "small", NULL, 0, 32768, 1024, 6, 8, 0, 256, 832, 288, 64, 8 }, 6, 128, 4, 1, 128 },
	{ { "full", NULL, 262144, 262144, 2816, 30, 16, 0, 512, 2112, 704, 128, 8 }, 6, 256, 8, 2,
	  1024 },
};

static bool any_full_layer(const struct pt_hparams *hp)
{
	for (uint32_t l = 0; l < hp->n_layer; l++)
		if (!hp->is_swa[l])
			return true;
	return false;
}

static enum pt_status gemma_preset(const char *name, struct pt_hparams *hp,
				   struct pt_error *err)
{
	const void *entry;
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full", hp, &entry, err);
	if (st != PT_OK)
		return st;
	const struct preset *p = entry;
	if (hp->n_layer < 2) /* llama.cpp's gemma4 loader asserts n_layer_kv >= 2 */
		return pt_error_set(err, PT_E_INVALID, "gemma4 needs at least 2 layers, got %u",
				    hp->n_layer);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		/* --layers below one period keeps both kinds where it can: the last layer is
		 * full (llama.cpp needs at least one sliding layer) */
		hp->is_swa[l] = (l + 1) % p->period != 0 &&
				!(hp->n_layer < p->period && l + 1 == hp->n_layer);
		hp->n_head_kv[l] = hp->is_swa[l] ? p->kv_swa : p->kv_full;
	}
	hp->head_dim_k_swa = hp->head_dim_v_swa = hp->n_rot_swa = p->hd_swa;
	hp->n_swa = p->n_swa;
	hp->rope_freq_base = 1000000.0f;
	hp->rope_freq_base_swa = 10000.0f;
	hp->rope_partial_full = 0.25f;
	hp->rms_eps = 1e-6f;
	hp->gating = PT_GATING_SOFTMAX;
	hp->expert_weights_norm = true;
	hp->final_logit_softcap = 30.0f;
	hp->tied_embeddings = true;
	hp->fused_gate_up_exps = true;
	hp->has_layer_output_scale = true;
	hp->k_eq_v_full = true;
	return PT_OK;
}

static enum pt_status moe_tensors(const struct pt_hparams *hp, uint32_t i,
				  struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	TRY(pt_tl_add_router(l, i, PT_ROLE_ROUTER, E, X, false, err));
	ADD(L, PT_ROLE_ROUTER, PT_CAT_NONE, PT_INIT_ONES, E, 0, 0, err,
	    "blk.%u.ffn_gate_inp.scale", i);
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
	    "blk.%u.pre_ffw_norm_2.weight", i);
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
	    "blk.%u.post_ffw_norm_1.weight", i);
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
	    "blk.%u.post_ffw_norm_2.weight", i);
	if (hp->fused_gate_up_exps) {
		ADD(L, PT_ROLE_EXPERT, PT_CAT_FFN_GATE, PT_INIT_WEIGHT, E, 2 * F, X, err,
		    "blk.%u.ffn_gate_up_exps.weight", i);
		ADD(L, PT_ROLE_EXPERT, PT_CAT_FFN_DOWN, PT_INIT_WEIGHT, F, E, X, err,
		    "blk.%u.ffn_down_exps.weight", i);
	} else {
		TRY(pt_tl_add_ffn(l, i, PT_ROLE_EXPERT, "_exps", E, F, X, err));
	}
	ADD(L, PT_ROLE_EXPERT_SCALE, PT_CAT_NONE, PT_INIT_ONES, X, 0, 0, err,
	    "blk.%u.ffn_down_exps.scale", i);
	return PT_OK;
}

static enum pt_status attn_tensors(const struct pt_hparams *hp, uint32_t i,
				   struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, hd = pt_hparams_head_dim_k(hp, i);
	const uint64_t q = hp->n_head * hd, kv = hp->n_head_kv[i] * hd;
	const uint64_t o = hp->n_head * (uint64_t)pt_hparams_head_dim_v(hp, i);
	/* no attn_v where V is K (k_eq_v_full: the full-attention layers) */
	const uint64_t v = pt_hparams_has_attn_v(hp, i)
		? hp->n_head_kv[i] * (uint64_t)pt_hparams_head_dim_v(hp, i) : 0;
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
	    "blk.%u.attn_norm.weight", i);
	TRY(pt_tl_add_attn(l, i, PT_ROLE_RESIDENT, E, q, kv, v, o, err));
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err,
	    "blk.%u.attn_q_norm.weight", i);
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err,
	    "blk.%u.attn_k_norm.weight", i);
	ADD(L, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_POST_NORM, E, 0, 0, err,
	    "blk.%u.post_attention_norm.weight", i);
	return PT_OK;
}

static enum pt_status gemma_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				    struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const uint64_t E = hp->n_embd;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	/* only full layers read rope_freqs; llama.cpp refuses a file with an unused tensor */
	if (any_full_layer(hp))
		ADD(-1, R, PT_CAT_NONE, PT_INIT_ROPE_FREQS, hp->n_rot / 2, 0, 0, err,
		    "rope_freqs.weight");
	for (uint32_t i = 0; i < hp->n_layer; i++) {
		const int32_t L = (int32_t)i;
		TRY(attn_tensors(hp, i, l, err));
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.ffn_norm.weight", i);
		TRY(pt_tl_add_ffn(l, i, R, "", E, hp->n_ff, 0, err));
		ADD(L, R, PT_CAT_NONE, PT_INIT_POST_NORM, E, 0, 0, err, "blk.%u.post_ffw_norm.weight",
		    i);
		if (hp->has_layer_output_scale)
			ADD(L, R, PT_CAT_NONE, PT_INIT_LAYER_SCALE, 1, 0, 0, err,
			    "blk.%u.layer_output_scale.weight", i);
		if (pt_hparams_is_moe_layer(hp, i))
			TRY(moe_tensors(hp, i, l, err));
	}
	return PT_OK;
}

static enum pt_status gemma_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				       struct pt_error *err)
{
	enum pt_status st;
	uint8_t pattern[PT_ARCH_MAX_LAYERS];
	char k[128];
	for (uint32_t l = 0; l < hp->n_layer; l++)
		pattern[l] = hp->is_swa[l] ? 1 : 0;
	TRY(pt_key_u32(w, hp, "attention.key_length_swa", hp->head_dim_k_swa, err));
	TRY(pt_key_u32(w, hp, "attention.value_length_swa", hp->head_dim_v_swa, err));
	TRY(pt_key_u32(w, hp, "rope.dimension_count", hp->n_rot, err));
	TRY(pt_key_u32(w, hp, "rope.dimension_count_swa", hp->n_rot_swa, err));
	TRY(pt_key_f32(w, hp, "rope.freq_base_swa", hp->rope_freq_base_swa, err));
	TRY(pt_key_u32(w, hp, "attention.sliding_window", hp->n_swa, err));
	snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", hp->arch_name);
	TRY(pt_gguf_writer_set_arr(w, k, PT_GGUF_BOOL, pattern, hp->n_layer, err));
	TRY(pt_key_u32(w, hp, "attention.shared_kv_layers", hp->n_shared_kv_layers, err));
	TRY(pt_key_u32(w, hp, "embedding_length_per_layer_input", hp->n_embd_per_layer, err));
	TRY(pt_key_f32(w, hp, "final_logit_softcapping", hp->final_logit_softcap, err));
	return PT_OK;
}

static enum pt_status read_pattern(const pt_gguf *g, struct pt_hparams *hp,
				   struct pt_error *err)
{
	char k[128];
	const struct pt_gguf_kv *kv = NULL;
	bool found = false;
	snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", hp->arch_name);
	enum pt_status st = pt_gguf_get_arr(g, k, PT_GGUF_BOOL, &kv, &found, err);
	if (st != PT_OK)
		return st;
	if (!found)
		return pt_error_set(err, PT_E_FORMAT, "required key %s is missing", k);
	if (kv->arr_count != hp->n_layer)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key %s has %llu entries, expected %u", k,
				   (unsigned long long)kv->arr_count, hp->n_layer);
	for (uint32_t l = 0; l < hp->n_layer; l++)
		hp->is_swa[l] = kv->value[l] != 0;
	return PT_OK;
}

static enum pt_status gemma_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				      struct pt_error *err)
{
	enum pt_status st;
	TRY(pt_rkey_u32(g, hp, "attention.key_length_swa", true, &hp->head_dim_k_swa, err));
	TRY(pt_rkey_u32(g, hp, "attention.value_length_swa", true, &hp->head_dim_v_swa, err));
	hp->n_rot_swa = hp->head_dim_k_swa;
	TRY(pt_rkey_u32(g, hp, "rope.dimension_count_swa", false, &hp->n_rot_swa, err));
	TRY(pt_rkey_f32(g, hp, "rope.freq_base_swa", false, &hp->rope_freq_base_swa, err));
	TRY(pt_rkey_u32(g, hp, "attention.sliding_window", true, &hp->n_swa, err));
	TRY(read_pattern(g, hp, err));
	TRY(pt_rkey_u32(g, hp, "attention.shared_kv_layers", false, &hp->n_shared_kv_layers,
			err));
	TRY(pt_rkey_u32(g, hp, "embedding_length_per_layer_input", true, &hp->n_embd_per_layer,
			err));
	TRY(pt_rkey_f32(g, hp, "final_logit_softcapping", false, &hp->final_logit_softcap, err));
	if (hp->n_embd_per_layer != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "%s.embedding_length_per_layer_input = %u (per-layer "
				    "embeddings are not supported)",
				    hp->arch_name, hp->n_embd_per_layer);
	if (hp->n_shared_kv_layers >= hp->n_layer)
		return pt_error_set(err, PT_E_FORMAT, "%s.attention.shared_kv_layers = %u >= %u",
				    hp->arch_name, hp->n_shared_kv_layers, hp->n_layer);
	/* the recipe fixes the routing (softmax, normalised, no scale): no key is read */
	enum pt_status rst = pt_arch_read_route_keys(g, hp, PT_GATING_SOFTMAX, err);
	if (rst != PT_OK)
		return rst;
	hp->rope_partial_full = 0.25f;
	hp->k_eq_v_full = true; /* refined from the tensor table */
	return PT_OK;
}

const struct pt_arch_ops pt_arch_gemma4_ops = {
	.name = "gemma4",
	/* Q/K norms carry the score scale; softmax top-k, normalised, no scale */
	.recipe = { .embd_scale_sqrt = true, .v_norm = true, .attn_scale = 1.0f,
		    .rope_freqs_full = true, .act = PT_ACT_GEGLU,
		    .router_in = PT_ROUTER_IN_SCALED_RESIDUAL, .ffn = PT_FFN_PARALLEL,
		    .final_softcap = true },
	.preset = gemma_preset,
	.tensors = gemma_tensors,
	.write_keys = gemma_write_keys,
	.read_keys = gemma_read_keys,
};
