/* gptoss.c - gpt-oss-20b / gpt-oss-120b description (ARCHITECTURES-NEXT.md 1; llama.cpp
 * src/models/openai-moe.cpp): biases on Q/K/V/O, a learned per-head attention sink
 * (attn_sinks), sliding-window (even layers) and full (odd layers) attention, the pre-FFN
 * norm stored as post_attention_norm, a biased router whose top-k raw logits are
 * softmaxed over the k (SOFTMAX_WEIGHT, no normalisation), experts with per-expert gate /
 * up / down biases (streamed with the expert), the clamped SwiGLU (swiglu_oai: alpha 1.702,
 * limit 7), YaRN RoPE (rope.scaling.*, as llama.cpp's generic loader reads them) and MXFP4 experts in
 * the published files (the "mxfp4" mixture: experts MXFP4, other matrices Q8_0). */
#include "model/arch_impl.h"

#include <stdio.h>

#define OSS_N_SWA 128
#define OSS_SWA_PERIOD 2
#define OSS_CTX 131072
#define OSS_CTX_ORIG 4096
#define OSS_YARN_FACTOR 32.0f
#define OSS_ROPE_BASE 150000.0f

/* tiny: 2 sliding + 2 full layers, a window (128) shorter than the oracle's 200 tokens;
 * small: realistic ratios; full: gpt-oss-120b (also "gpt-oss-120b"); gpt-oss-20b.  All
 * with the published RoPE: base 150000, YaRN factor 32 over an original context of 4096.
 * No dense FFN (n_ff 0). */
static const struct pt_preset_base presets[] = {
	{ "tiny", NULL, 0, OSS_CTX, 256, 4, 8, 2, 64, 0, 256, 16, 4 },
	{ "small", NULL, 0, OSS_CTX, 1024, 6, 16, 4, 64, 0, 1024, 32, 4 },
	{ "full", "gpt-oss-120b", 201088, OSS_CTX, 2880, 36, 64, 8, 64, 0, 2880, 128, 4 },
	{ "gpt-oss-20b", NULL, 201088, OSS_CTX, 2880, 24, 64, 8, 64, 0, 2880, 32, 4 },
};

/* llama_hparams::set_swa_pattern(period, dense_first = false): layer il slides iff
 * period == 0 or il % period < period - 1. */
static void swa_pattern(struct pt_hparams *hp, uint32_t period)
{
	for (uint32_t l = 0; l < hp->n_layer; l++)
		hp->is_swa[l] = period == 0 || l % period < period - 1;
}

static enum pt_status oss_preset(const char *name, struct pt_hparams *hp, struct pt_error *err)
{
	enum pt_status st = PT_PRESET_FILL(presets, name, "tiny, small, full = gpt-oss-120b, "
					   "gpt-oss-20b", hp, NULL, err);
	if (st != PT_OK)
		return st;
	hp->n_rot_swa = hp->n_rot; /* sliding layers rotate the whole head as well */
	hp->n_swa = OSS_N_SWA;
	swa_pattern(hp, OSS_SWA_PERIOD);
	hp->rope_freq_base = hp->rope_freq_base_swa = OSS_ROPE_BASE;
	hp->rope_yarn = true;
	hp->rope_scaling_factor = OSS_YARN_FACTOR;
	hp->rope_orig_ctx = OSS_CTX_ORIG;
	hp->rms_eps = 1e-5f;
	hp->gating = PT_GATING_SOFTMAX_WEIGHT;
	hp->has_attn_bias = true;
	return PT_OK;
}

static enum pt_status block_tensors(const struct pt_hparams *hp, uint32_t i,
				    struct pt_tensor_list *l, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	const int32_t L = (int32_t)i;
	const uint64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
	const uint64_t hd = hp->head_dim_k, q = hp->n_head * hd, kv = hp->n_head_kv[i] * hd;
	const enum pt_tensor_role R = PT_ROLE_RESIDENT;
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.attn_norm.weight", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err, "blk.%u.post_attention_norm.weight",
	    i);
	TRY(pt_tl_add_attn(l, i, R, E, q, kv, kv, q, err));
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, q, 0, 0, err, "blk.%u.attn_q.bias", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, kv, 0, 0, err, "blk.%u.attn_k.bias", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, kv, 0, 0, err, "blk.%u.attn_v.bias", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, E, 0, 0, err, "blk.%u.attn_output.bias", i);
	ADD(L, R, PT_CAT_NONE, PT_INIT_BIAS, hp->n_head, 0, 0, err, "blk.%u.attn_sinks.weight",
	    i);
	TRY(pt_tl_add_router(l, i, PT_ROLE_ROUTER, E, X, false, err));
	ADD(L, PT_ROLE_ROUTER, PT_CAT_NONE, PT_INIT_BIAS, X, 0, 0, err, "blk.%u.ffn_gate_inp.bias",
	    i);
	TRY(pt_tl_add_ffn(l, i, PT_ROLE_EXPERT, "_exps", E, F, X, err));
	/* per-expert biases: {width, n_expert} F32, sliced and streamed with the expert */
	ADD(L, PT_ROLE_EXPERT, PT_CAT_NONE, PT_INIT_BIAS, F, X, 0, err,
	    "blk.%u.ffn_gate_exps.bias", i);
	ADD(L, PT_ROLE_EXPERT, PT_CAT_NONE, PT_INIT_BIAS, F, X, 0, err, "blk.%u.ffn_up_exps.bias",
	    i);
	ADD(L, PT_ROLE_EXPERT, PT_CAT_NONE, PT_INIT_BIAS, E, X, 0, err,
	    "blk.%u.ffn_down_exps.bias", i);
	return PT_OK;
}

static enum pt_status oss_tensors(const struct pt_hparams *hp, struct pt_tensor_list *l,
				  struct pt_error *err)
{
	enum pt_status st = PT_OK;
	TRY(pt_tl_add_io(l, hp, true, err)); /* never tied */
	for (uint32_t i = 0; i < hp->n_layer; i++)
		TRY(block_tensors(hp, i, l, err));
	return PT_OK;
}

/* What the converter writes beyond the generic keys (no sliding_window_pattern: the loader's
 * default period 2). */
static enum pt_status oss_write_keys(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err)
{
	enum pt_status st;
	char k[128];
	TRY(pt_key_u32(w, hp, "attention.sliding_window", hp->n_swa, err));
	if (hp->rope_freq_base_swa != hp->rope_freq_base)
		TRY(pt_key_f32(w, hp, "rope.freq_base_swa", hp->rope_freq_base_swa, err));
	if (!hp->rope_yarn)
		return PT_OK;
	snprintf(k, sizeof k, "%s.rope.scaling.type", hp->arch_name);
	TRY(pt_gguf_writer_set_str(w, k, "yarn", err));
	TRY(pt_key_f32(w, hp, "rope.scaling.factor", hp->rope_scaling_factor, err));
	TRY(pt_key_u32(w, hp, "rope.scaling.original_context_length", hp->rope_orig_ctx, err));
	return PT_OK;
}

/* rope.scaling.* (llama_model_base::load_hparams): type "yarn" scales with the factor over the
 * original context; "none" / "linear" without a factor (or factor 1) are plain RoPE; linear
 * scaling and other types are refused rather than computed wrongly. */
static enum pt_status read_rope_scaling(const pt_gguf *g, struct pt_hparams *hp,
					struct pt_error *err)
{
	char k[128];
	struct pt_str type = { 0 };
	bool found = false;
	enum pt_status st;
	snprintf(k, sizeof k, "%s.rope.scaling.type", hp->arch_name);
	TRY(pt_gguf_get_str(g, k, &type, &found, err));
	TRY(pt_rkey_f32(g, hp, "rope.scaling.factor", false, &hp->rope_scaling_factor, err));
	TRY(pt_rkey_u32(g, hp, "rope.scaling.original_context_length", false, &hp->rope_orig_ctx,
			err));
	TRY(pt_rkey_f32(g, hp, "rope.scaling.yarn_log_multiplier", false, &hp->rope_yarn_log_mul,
			err));
	hp->rope_yarn = found && pt_str_eq(type, "yarn");
	const bool plain = hp->rope_scaling_factor == 0.0f || hp->rope_scaling_factor == 1.0f;
	if (found && !hp->rope_yarn && !pt_str_eq(type, "none") &&
	    !(pt_str_eq(type, "linear") && plain))
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s = '%.*s' (factor %g) unsupported", k,
				    (int)(type.len > 32 ? 32 : type.len), type.ptr,
				    (double)hp->rope_scaling_factor);
	if (!found && !plain)
		return pt_error_set(err, PT_E_UNSUPPORTED, "%s.rope.scaling.factor %g without a "
				    "type (linear scaling) unsupported", hp->arch_name,
				    (double)hp->rope_scaling_factor);
	if (hp->rope_yarn && !(hp->rope_scaling_factor >= 1.0f && hp->rope_scaling_factor < 1e6f))
		return pt_error_set(err, PT_E_FORMAT, "%s.rope.scaling.factor = %g out of range",
				    hp->arch_name, (double)hp->rope_scaling_factor);
	if (!(hp->rope_yarn_log_mul >= 0.0f && hp->rope_yarn_log_mul < 100.0f))
		return pt_error_set(err, PT_E_FORMAT, "%s.rope.scaling.yarn_log_multiplier = %g out "
				    "of range", hp->arch_name, (double)hp->rope_yarn_log_mul);
	return PT_OK;
}

static enum pt_status oss_read_keys(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	enum pt_status st;
	uint32_t period = OSS_SWA_PERIOD;
	TRY(pt_rkey_u32(g, hp, "expert_feed_forward_length", true, &hp->n_ff_exp, err));
	TRY(pt_rkey_u32(g, hp, "attention.sliding_window", true, &hp->n_swa, err));
	TRY(pt_rkey_u32(g, hp, "attention.sliding_window_pattern", false, &period, err));
	hp->rope_freq_base_swa = hp->rope_freq_base;
	TRY(pt_rkey_f32(g, hp, "rope.freq_base_swa", false, &hp->rope_freq_base_swa, err));
	TRY(read_rope_scaling(g, hp, err));
	if (hp->n_swa == 0)
		return pt_error_set(err, PT_E_FORMAT, "%s.attention.sliding_window = 0",
				    hp->arch_name);
	swa_pattern(hp, period);
	/* sliding layers rotate like full ones (same dims, same YaRN scaling) */
	hp->n_rot_swa = hp->n_rot;
	hp->gating = PT_GATING_SOFTMAX_WEIGHT; /* hard-coded by the graph; no key is read */
	return PT_OK;
}

const struct pt_arch_ops pt_arch_gptoss_ops = {
	.name = "gpt-oss",
	.mix_mxfp4 = true,
	.recipe = { .act = PT_ACT_SWIGLU_OAI, .route_from_keys = false,
		    .route_softmax_weight = true, .router_in = PT_ROUTER_IN_FFN_NORM,
		    .ffn = PT_FFN_SERIAL, .ffn_norm_post_attention = true },
	.preset = oss_preset,
	.tensors = oss_tensors,
	.write_keys = oss_write_keys,
	.read_keys = oss_read_keys,
};
