/* qwen35moe.c - Qwen3.5 MoE (Qwen3.5-35B-A3B ... 397B-A17B) description
 * (ARCHITECTURES-NEXT.md 4): a hybrid of Gated DeltaNet linear-attention layers (a short
 * causal conv1d, L2-normalised q/k, the gated delta rule on a per-head state matrix, a gated
 * RMSNorm of the output) and every full_attention_interval-th layer a full-attention layer
 * whose Q projection also carries a per-head output gate (sigmoid), per-head Q/K RMSNorm and
 * IMROPE sections (for text identical to partial NEOX RoPE).  Every layer is MoE: softmax
 * routing with normalised top-k weights (hard-coded in llama.cpp's graph) plus a shared
 * expert scaled by sigmoid(ffn_gate_inp_shexp . h).  The pre-FFN norm is stored as
 * post_attention_norm.  NextN/MTP blocks (nextn_predict_layers) are described so a file
 * with them checks; they are never bound or computed. */
#include "model/arch_impl.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

/* n_rot: partial RoPE, below the head dim; no dense FFN (the base's n_ff 0). */
struct preset {
	struct pt_preset_base b;
	uint32_t n_rot;
	uint32_t sections[4];
	uint32_t d_state, n_group, dt_rank; /* linear attention: head dim, key heads, value heads */
	uint32_t n_ff_shexp;
	float rope_base;
};

/* tiny: 3 linear + 1 full layer, key heads != value heads (the tiled head mapping matters),
 * every K-quant rule fires.  small: realistic ratios.  full: Qwen3.5-35B-A3B (transformers'
 * Qwen3_5MoeTextConfig defaults; rope base 1e7 as Qwen3-Next, not confirmed for 3.5).
 * 397b: Qwen3.5-397B-A17B as far as published metadata shows (60 layers, 4096 wide, 32/2
 * heads, 512 experts; the linear-attention geometry, expert width and top-k are assumptions);
 * only `make bench` writes it, after a disk check. */
static const struct preset presets[] = {
	{ { "tiny", NULL, 0, 4096, 256, 4, 4, 2, 64, 0, 256, 16, 4 }, 16, { 3, 3, 2, 0 }, 64, 2, 4,
	  256, 1e7f },
	{ { "small", NULL, 0, 32768, 1024, 8, 8, 2, 128, 0, 512, 32, 4 }, 32, { 6, 5, 5, 0 }, 128,
	  4, 8, 512, 1e7f },
	{ { "full", NULL, 248320, 262144, 2048, 40, 16, 2, 256, 0, 512, 256, 8 }, 64,
	  { 11, 11, 10, 0 }, 128, 16, 32, 512, 1e7f },
	{ { "397b", NULL, 248320, 262144, 4096, 60, 32, 2, 256, 0, 1024, 512, 10 }, 64,
	  { 11, 11, 10, 0 }, 128, 16, 64, 1024, 1e7f },
};

static enum pt_status q35_preset(const char *name, struct pt_hparams *hp,
				 struct pt_error *err)
{
	const void *entry;
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full, 397b", hp, &entry,
					   err);
	if (st != PT_OK)
		return st;
	const struct preset *p = entry;
	hp->n_rot = p->n_rot;
	memcpy(hp->rope_sections, p->sections, sizeof hp->rope_sections);
	hp->ssm_d_conv = 4;
	hp->ssm_d_state = p->d_state;
	hp->ssm_n_group = p->n_group;
	hp->ssm_dt_rank = p->dt_rank;
	hp->ssm_d_inner = p->d_state * p->dt_rank;
	hp->full_attn_interval = 4;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		hp->is_recr[l] = (l + 1) % hp->full_attn_interval != 0;
	hp->n_ff_shexp = p->n_ff_shexp;
	hp->n_expert_shared = 1;
	hp->rope_freq_base = p->rope_base;
	hp->rms_eps = 1e-6f;
	hp->gating = PT_GATING_SOFTMAX;
	hp->expert_weights_norm = true;
	return PT_OK;
}

static enum pt_status full_attn_tensors(const struct pt_hparams *hp, uint32_t i,
					enum pt_tensor_role R, struct pt_tensor_list *l,
					struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, hd = hp->head_dim_k, q = hp->n_head * hd;
	const uint64_t kv = (uint64_t)hp->n_head_kv[i < hp->n_layer ? i : 0] * hd;
	/* attn_q holds the query and its output gate */
	TRY(pt_tl_add_attn(l, i, R, E, 2 * q, kv, kv, q, err));
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_q_norm.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, hd, 0, 0, err, "blk.%u.attn_k_norm.weight", i);
	return PT_OK;
}

static enum pt_status linear_attn_tensors(const struct pt_hparams *hp, uint32_t i,
					  struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	const uint64_t E = hp->n_embd, Hv = hp->ssm_dt_rank, V = hp->ssm_d_inner;
	const uint64_t dv = Hv ? V / Hv : 0, conv = pt_hparams_conv_dim(hp);
	ADD(L, R, PT_CAT_ATTN_QKV, PT_INIT_WEIGHT, E, conv, 0, err, "blk.%u.attn_qkv.weight", i);
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, E, V, 0, err, "blk.%u.attn_gate.weight", i);
	/* never quantized (llama.cpp's ssm_conv asserts F32) */
	ADD(L, R, PT_CAT_NONE, PT_INIT_WEIGHT, hp->ssm_d_conv, conv, 0, err,
	    "blk.%u.ssm_conv1d.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, Hv, 0, 0, err, "blk.%u.ssm_dt.bias", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_SSM_A, Hv, 0, 0, err, "blk.%u.ssm_a", i);
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, E, Hv, 0, err, "blk.%u.ssm_beta.weight", i);
	ADD(L, R, PT_CAT_OTHER, PT_INIT_WEIGHT, E, Hv, 0, err, "blk.%u.ssm_alpha.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, dv, 0, 0, err, "blk.%u.ssm_norm.weight", i);
	ADD(L, R, PT_CAT_ATTN_OUTPUT, PT_INIT_WEIGHT, V, E, 0, err, "blk.%u.ssm_out.weight", i);
	return PT_OK;
}

static enum pt_status ffn_tensors(const struct pt_hparams *hp, uint32_t i, bool nextn,
				  struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp, S = hp->n_ff_shexp;
	const enum pt_tensor_role R = nextn ? PT_ROLE_SKIP : PT_ROLE_RESIDENT;
	TRY(pt_tl_add_router(l, i, nextn ? R : PT_ROLE_ROUTER, E, X, false, err));
	TRY(pt_tl_add_ffn(l, i, nextn ? R : PT_ROLE_EXPERT, "_exps", E, F, X, err));
	ADD(L, R, PT_CAT_NONE, PT_INIT_WEIGHT, E, 0, 0, err, "blk.%u.ffn_gate_inp_shexp.weight",
	    i);
	return pt_tl_add_ffn(l, i, R, "_shexp", E, S, 0, err);
}

static enum pt_status q35_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				  struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const uint64_t E = hp->n_embd;
	TRY(pt_tl_add_io(l, hp, !hp->tied_embeddings, err));
	for (uint32_t i = 0; i < hp->n_layer + hp->n_layer_nextn; i++) {
		const bool nextn = i >= hp->n_layer;
		const enum pt_tensor_role R = nextn ? PT_ROLE_SKIP : PT_ROLE_RESIDENT;
		const int32_t L = (int32_t)i;
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
		    "blk.%u.post_attention_norm.weight", i);
		if (!nextn && hp->is_recr[i])
			st = linear_attn_tensors(hp, i, l, err);
		else
			st = full_attn_tensors(hp, i, R, l, err);
		if (st == PT_OK)
			st = ffn_tensors(hp, i, nextn, l, err);
		if (st != PT_OK)
			return st;
		if (!nextn)
			continue;
		ADD(L, R, PT_CAT_NONE, PT_INIT_WEIGHT, 2 * E, E, 0, err, "blk.%u.nextn.eh_proj.weight",
		    i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.nextn.enorm.weight", i);
		ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.nextn.hnorm.weight", i);
	}
	return PT_OK;
}

static enum pt_status q35_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err)
{
	enum pt_status st;
	char k[96];
	TRY(pt_key_u32(w, hp, "rope.dimension_count", hp->n_rot, err));
	TRY(pt_key_u32(w, hp, "expert_shared_feed_forward_length", hp->n_ff_shexp, err));
	TRY(pt_key_u32(w, hp, "ssm.conv_kernel", hp->ssm_d_conv, err));
	TRY(pt_key_u32(w, hp, "ssm.inner_size", hp->ssm_d_inner, err));
	TRY(pt_key_u32(w, hp, "ssm.state_size", hp->ssm_d_state, err));
	TRY(pt_key_u32(w, hp, "ssm.time_step_rank", hp->ssm_dt_rank, err));
	TRY(pt_key_u32(w, hp, "ssm.group_count", hp->ssm_n_group, err));
	TRY(pt_key_u32(w, hp, "full_attention_interval", hp->full_attn_interval, err));
	if (hp->n_layer_nextn)
		TRY(pt_key_u32(w, hp, "nextn_predict_layers", hp->n_layer_nextn, err));
	int32_t sec[4];
	for (int i = 0; i < 4; i++)
		sec[i] = (int32_t)hp->rope_sections[i];
	snprintf(k, sizeof k, "%s.rope.dimension_sections", hp->arch_name);
	TRY(pt_gguf_writer_set_arr(w, k, PT_GGUF_I32, sec, 4, err));
	return PT_OK;
}

/* recurrent_layers array (bools or integers) when present, else the interval rule. */
static enum pt_status read_schedule(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	char k[96];
	snprintf(k, sizeof k, "%s.attention.recurrent_layers", hp->arch_name);
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, k);
	if (kv) {
		if (kv->type != PT_GGUF_ARRAY || kv->arr_count != hp->n_layer ||
		    kv->arr_type == PT_GGUF_STRING || kv->arr_type == PT_GGUF_F32 ||
		    kv->arr_type == PT_GGUF_F64)
			return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
					   "key %s: expected %u flags", k, hp->n_layer);
		for (uint32_t l = 0; l < hp->n_layer; l++)
			hp->is_recr[l] = pt_gguf_arr_u32(kv, l) != 0;
		return PT_OK;
	}
	hp->full_attn_interval = 4;
	enum pt_status st = pt_rkey_u32(g, hp, "full_attention_interval", false,
					&hp->full_attn_interval, err);
	if (st != PT_OK)
		return st;
	if (hp->full_attn_interval == 0)
		return pt_error_set(err, PT_E_FORMAT, "key %s.full_attention_interval is 0",
				    hp->arch_name);
	for (uint32_t l = 0; l < hp->n_layer; l++)
		hp->is_recr[l] = (l + 1) % hp->full_attn_interval != 0;
	return PT_OK;
}

static enum pt_status read_sections(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	char k[96];
	snprintf(k, sizeof k, "%s.rope.dimension_sections", hp->arch_name);
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, k);
	if (!kv)
		return pt_error_set(err, PT_E_FORMAT, "required key %s is missing", k);
	if (kv->type != PT_GGUF_ARRAY || kv->arr_count < 4 || kv->arr_count > 16 ||
	    kv->arr_type == PT_GGUF_STRING || kv->arr_type == PT_GGUF_F32 ||
	    kv->arr_type == PT_GGUF_F64)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key %s: expected 4 integers", k);
	for (uint32_t i = 0; i < 4; i++) {
		hp->rope_sections[i] = pt_gguf_arr_u32(kv, i);
		if (hp->rope_sections[i] > 4096)
			return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
					   "key %s: section %u too large", k, i);
	}
	return PT_OK;
}

static enum pt_status q35_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	enum pt_status st;
	TRY(pt_rkey_u32(g, hp, "expert_shared_feed_forward_length", false, &hp->n_ff_shexp, err));
	TRY(pt_rkey_u32(g, hp, "ssm.conv_kernel", true, &hp->ssm_d_conv, err));
	TRY(pt_rkey_u32(g, hp, "ssm.inner_size", true, &hp->ssm_d_inner, err));
	TRY(pt_rkey_u32(g, hp, "ssm.state_size", true, &hp->ssm_d_state, err));
	TRY(pt_rkey_u32(g, hp, "ssm.time_step_rank", true, &hp->ssm_dt_rank, err));
	TRY(pt_rkey_u32(g, hp, "ssm.group_count", true, &hp->ssm_n_group, err));
	TRY(pt_rkey_u32(g, hp, "nextn_predict_layers", false, &hp->n_layer_nextn, err));
	TRY(read_sections(g, hp, err));
	if (hp->n_layer_nextn >= hp->n_layer)
		return pt_error_set(err, PT_E_FORMAT, "key %s.nextn_predict_layers = %u, block_count "
				    "%u", hp->arch_name, hp->n_layer_nextn, hp->n_layer);
	hp->n_layer -= hp->n_layer_nextn; /* the trunk; block_count counts the MTP blocks */
	if ((st = read_schedule(g, hp, err)) != PT_OK)
		return st;
	/* hard-coded in llama.cpp's graph: softmax, normalised, no scale; one shared expert */
	hp->gating = PT_GATING_SOFTMAX;
	hp->expert_weights_norm = true;
	hp->expert_weights_scale = 0.0f;
	hp->n_expert_shared = 1;
	if (hp->n_ff_exp == 0 && hp->n_expert_used)
		hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
	if (hp->n_ff_shexp == 0)
		hp->n_ff_shexp = hp->n_ff;
	/* bounds of the linear-attention geometry: the state is d_state x d_state per value
	 * head (llama.cpp reshapes it so), key heads divide value heads */
	const uint32_t lim = 1u << 16;
	if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > 16 || hp->ssm_d_state == 0 ||
	    hp->ssm_d_state > 1024 || hp->ssm_n_group == 0 || hp->ssm_dt_rank == 0 ||
	    hp->ssm_dt_rank > lim || hp->ssm_n_group > lim ||
	    hp->ssm_dt_rank % hp->ssm_n_group != 0 ||
	    (uint64_t)hp->ssm_dt_rank * hp->ssm_d_state != hp->ssm_d_inner)
		return pt_error_set(err, PT_E_FORMAT,
				    "%s.ssm.*: conv_kernel %u, state_size %u, group_count %u, "
				    "time_step_rank %u, inner_size %u are not a supported geometry",
				    hp->arch_name, hp->ssm_d_conv, hp->ssm_d_state, hp->ssm_n_group,
				    hp->ssm_dt_rank, hp->ssm_d_inner);
	if (hp->n_ff_shexp == 0 || hp->n_ff_shexp > lim * 4)
		return pt_error_set(err, PT_E_FORMAT, "%s.expert_shared_feed_forward_length = %u",
				    hp->arch_name, hp->n_ff_shexp);
	return PT_OK;
}

const struct pt_arch_ops pt_arch_qwen35moe_ops = {
	.name = "qwen35moe",
	.recipe = { .act = PT_ACT_SWIGLU, .router_in = PT_ROUTER_IN_FFN_NORM,
		    .ffn = PT_FFN_SERIAL, .ffn_norm_post_attention = true,
		    .attn_out_gate = true, .ssm_heads_tiled = true },
	.preset = q35_preset,
	.tensors = q35_tensors,
	.write_keys = q35_write_keys,
	.read_keys = q35_read_keys,
};
