/* ops.h - the element-wise and small reduction operators of the forward pass, written to
 * reproduce llama.cpp's CPU numerics (ARCHITECTURES.md A.3/A.5): RMSNorm with a double
 * sum, RoPE angles by repeated float multiplication, softmax with a double sum, the F16
 * GELU lookup table, tanh softcaps, MoE top-k routing with the F16-min weight-sum clamp.
 *
 * None of these allocate or fail; the caller owns every buffer.  Lengths are int because
 * every dimension here is a validated hyper-parameter far below INT_MAX.
 */
#ifndef PT_MODEL_OPS_H
#define PT_MODEL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* y = x * (1/sqrtf(mean(x^2) + eps)) * w; w may be NULL (no weight, e.g. Gemma 4 V norm and
 * router input).  Sum of squares in double, mean rounded to float as ggml does.  y may be x.
 * The reference, and the level's SIMD twin (the same bits at every level). */
void pt_op_rmsnorm_ref(float *y, const float *x, const float *w, int n, float eps);
void pt_op_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
/* The same norm applied to each of n_head consecutive vectors of head_dim, in place. */
void pt_op_rmsnorm_heads(float *x, const float *w, int n_head, int head_dim, float eps);

enum pt_rope_mode {
	PT_ROPE_NORM = 0, /* adjacent pairs (2i, 2i+1) */
	PT_ROPE_NEOX = 2, /* pairs (i, i + n_rot/2), HF rotate_half */
};

/* Rotation table for one position: cs[2i] = cos, cs[2i+1] = sin of pair i < n_rot/2.
 * theta_0 = pos, theta_{i+1} = theta_i * base^(-2/n_rot) in float; theta is divided by
 * freq_factors[i] when freq_factors is non-NULL (Gemma 4 proportional RoPE on global
 * layers: factors 1e30 make the pair an identity). */
void pt_op_rope_cache(float *cs, int n_rot, int64_t pos, float base,
		      const float *freq_factors);
/* YaRN RoPE scaling as ggml computes it (rope_yarn, ggml_rope_yarn_corr_dims): the
 * interpolated angle freq_scale * theta is mixed with the extrapolated theta by
 * ramp(i) * ext_factor, ramp(i) = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) over
 * pair i, and cos/sin are scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)) when
 * ext_factor != 0 (else by attn_factor).  With freq_scale 1, ext_factor 0, attn_factor 1
 * the table equals pt_op_rope_cache's bit for bit.  Building block for the gpt-oss and
 * deepseek2 families (not yet wired into an arch). */
struct pt_yarn {
	float freq_scale;  /* 1 / rope.scaling.factor */
	float ext_factor;  /* 1 for "yarn" scaling, else 0 */
	float attn_factor; /* runtime magnitude factor (see ARCHITECTURES-NEXT.md 0.2) */
	float corr_low, corr_high; /* from pt_op_yarn_corr_dims */
};
/* low = max(0, floor(d(beta_fast))), high = min(n_rot - 1, ceil(d(beta_slow))) with
 * d(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln base), in float as ggml. */
void pt_op_yarn_corr_dims(int n_rot, uint32_t n_ctx_orig, float base, float beta_fast,
			  float beta_slow, float *low, float *high);
void pt_op_rope_cache_yarn(float *cs, int n_rot, int64_t pos, float base,
			   const float *freq_factors, const struct pt_yarn *y);
/* Rotates the first n_rot elements of each of n_head vectors of head_dim with a table from
 * pt_op_rope_cache; elements past n_rot are untouched. */
void pt_op_rope_apply(float *x, int n_head, int head_dim, int n_rot, enum pt_rope_mode mode,
		      const float *cs);

/* In place: subtract the max, expf, sum in double, multiply by (float)(1/sum). */
void pt_op_softmax(float *x, int n);

float pt_op_sigmoid(float x);
/* silu(x) = x / (1 + e^-x) with pt_kern_expf. */
float pt_op_silu(float x);
/* out[i] = silu(gate[i]) * up[i]; out may alias gate.  At the AVX2 level and above through
 * pt_kern_swiglu_avx2 (x86-64), bit-identical to the scalar reference pt_op_swiglu_ref. */
void pt_op_swiglu(float *out, const float *gate, const float *up, int n);
void pt_op_swiglu_ref(float *out, const float *gate, const float *up, int n);
/* gpt-oss's clamped SwiGLU as ggml's swiglu_oai computes it (alpha 1.702, limit 7, both
 * hard-coded by llama.cpp's build_moe_ffn): x = min(gate, 7), y = clamp(up, -7, 7),
 * out = x / (1 + expf(1.702 * -x)) * (y + 1), with libm expf; out may alias gate. */
#define PT_OAI_ALPHA 1.702f
#define PT_OAI_LIMIT 7.0f
void pt_op_swiglu_oai(float *out, const float *gate, const float *up, int n);
/* GELU as ggml's CPU backend computes it: x <= -10 -> 0, x >= 10 -> x, otherwise x is rounded
 * to F16 and looked up in a 65536-entry F16 table of the tanh approximation. */
float pt_op_gelu(float x);
/* out[i] = gelu(gate[i]) * up[i]; out may alias gate.  At the AVX2 level and above through
 * pt_kern_geglu_avx2 (x86-64), at neon and above through pt_kern_geglu_neon (aarch64): the
 * table's formula in lanes, bit-identical to the scalar reference pt_op_geglu_ref. */
void pt_op_geglu(float *out, const float *gate, const float *up, int n);
void pt_op_geglu_ref(float *out, const float *gate, const float *up, int n);
/* The tanh-approximate GELU in float with pt_kern_tanhf (what the table stores before F16
 * rounding). */
float pt_op_gelu_exact(float x);

/* x[i] = tanh(x[i] * (1/cap)) * cap - ggml builds it as scale, tanh, scale - with tanh by
 * pt_kern_tanhf (within 2 ulp of libm's tanhf, which ggml calls): the reference, and the
 * level's SIMD twin (the same bits at every level). */
void pt_op_softcap_ref(float *x, int n, float cap);
void pt_op_softcap(float *x, int n, float cap);

/* Indices of the k largest score[i] in descending order of score.  Ties are broken by the
 * lower index first (llama.cpp's std::sort leaves tie order unspecified; exact ties between
 * router scores do not occur with real weights).  k <= n. */
void pt_op_topk(const float *score, int n, int k, int *idx);

enum pt_op_gating {
	PT_OP_GATING_NONE = 0,
	PT_OP_GATING_SOFTMAX = 1,
	PT_OP_GATING_SIGMOID = 2,
	PT_OP_GATING_SOFTMAX_WEIGHT = 3,
};

#define PT_MOE_WEIGHT_SUM_MIN 6.103515625e-5f /* smallest normal F16; llama.cpp's clamp */

/* MoE routing (ARCHITECTURES.md A.3 steps 2-8).  logits[n_expert] is overwritten with the
 * gating probabilities; bias (may be NULL) shifts the selection scores only; scratch holds
 * n_expert floats.  Writes k expert ids in rank order and their weights: unbiased probs,
 * divided by max(sum, 6.1e-5) when norm, times scale when scale is neither 0 nor 1. */
void pt_op_moe_route(float *logits, int n_expert, enum pt_op_gating gating, const float *bias,
		     int k, bool norm, float scale, float *scratch, int *ids, float *weights);
/* The same with group-limited selection when n_group > 1 (expert_group_count, DeepSeek-V3):
 * n_expert / n_group experts per group, a group scores the sum of its two largest selection
 * values, only the n_group_used best groups' experts can be chosen (at most
 * PT_OP_MAX_GROUPS groups; n_group_used * group size >= k is the caller's invariant). */
#define PT_OP_MAX_GROUPS 256
void pt_op_moe_route_groups(float *logits, int n_expert, enum pt_op_gating gating,
			    const float *bias, int n_group, int n_group_used, int k, bool norm,
			    float scale, float *scratch, int *ids, float *weights);

#endif
