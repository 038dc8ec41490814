/* route_keys.c - the routing hyper-parameters every MoE arch states the same way (llama.cpp's
 * LLM_KV_EXPERT_* keys), read once for all arch files according to their recipe. */
#include "model/arch_impl.h"

enum pt_status pt_arch_read_route_keys(const pt_gguf *g, struct pt_hparams *hp,
				       enum pt_gating default_gating, struct pt_error *err)
{
	enum pt_status st;
	uint32_t gating = PT_GATING_NONE;
	if (!pt_arch_recipe(hp->arch)->route_from_keys) {
		/* hard-coded in llama.cpp's graph for this arch: softmax, normalised, no scale */
		hp->gating = PT_GATING_SOFTMAX;
		hp->expert_weights_norm = true;
		return PT_OK;
	}
	TRY(pt_rkey_u32(g, hp, "expert_feed_forward_length", true, &hp->n_ff_exp, err));
	TRY(pt_rkey_u32(g, hp, "expert_shared_count", true, &hp->n_expert_shared, err));
	TRY(pt_rkey_u32(g, hp, "leading_dense_block_count", false, &hp->n_layer_dense_lead, err));
	TRY(pt_rkey_u32(g, hp, "expert_gating_func", default_gating == PT_GATING_NONE, &gating,
			err));
	TRY(pt_rkey_f32(g, hp, "expert_weights_scale", false, &hp->expert_weights_scale, err));
	TRY(pt_rkey_bool(g, hp, "expert_weights_norm", &hp->expert_weights_norm, err));
	TRY(pt_rkey_u32(g, hp, "expert_group_count", false, &hp->n_expert_groups, err));
	TRY(pt_rkey_u32(g, hp, "expert_group_used_count", false, &hp->n_group_used, err));
	if (gating == PT_GATING_NONE)
		gating = default_gating; /* absent or 0: the arch's llama.cpp default */
	if (gating != PT_GATING_SOFTMAX && gating != PT_GATING_SIGMOID)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s.expert_gating_func = %u unsupported",
				    hp->arch_name, gating);
	hp->gating = (enum pt_gating)gating;
	return PT_OK;
}
