/* deltanet.h - Gated DeltaNet linear attention (qwen35moe's recurrent layers,
 * ARCHITECTURES-NEXT.md 4.3), the per-token reference the forward pass runs and the chunked
 * prefill form checked against it.
 *
 * One layer's recurrent state for one sequence is pt_dn_state_floats() floats: the conv
 * window [conv_dim][d_conv - 1] (the previous inputs, oldest first), then the delta-rule
 * states [n_v][d_v][d_k] (value head h's matrix S_h with row j = value dim, column i = key
 * dim, the layout llama.cpp keeps).  Everything is F32.
 *
 * Numerics follow llama.cpp's fused CPU ops (ggml_compute_forward_ssm_conv_f32, l2_norm,
 * gated_delta_net_one_chunk): conv sums in F32 in tap order, L2 norm 1/max(sqrt(sum x^2 in
 * double), eps), S <- e^g S, delta_j = (v_j - S_j . k) beta, S_j += delta_j k,
 * o_j = (S_j . q) / sqrt(d_v). */
#ifndef PT_MODEL_DELTANET_H
#define PT_MODEL_DELTANET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kern/kern.h"

struct pt_dn_geom {
	uint32_t n_k, n_v;    /* key (and query) heads, value heads */
	uint32_t d_k, d_v;    /* head dims (equal in every known file) */
	uint32_t d_conv;      /* conv taps */
	uint32_t conv_dim;    /* 2 n_k d_k + n_v d_v: the q | k | v channels */
	bool tiled;           /* value head h reads key head h mod n_k, else h / (n_v / n_k) */
	float eps;            /* L2-norm epsilon (the model's RMS eps) */
	const struct pt_kern_dn_ops *ops; /* inner loops (kern.h); NULL: the current level */
	uint32_t chunk;       /* tokens per chunk of the chunked form (0: PT_DN_CHUNK) */
};

/* Tokens per chunk of the chunked form by default (measured: docs/PERFORMANCE.md, issue 18
 * round 2) and the largest allowed. */
#define PT_DN_CHUNK 32
#define PT_DN_CHUNK_MAX 256
/* PARTICLE_DN_CHUNK=N (1 .. PT_DN_CHUNK_MAX) from the environment, for measuring; 0 when
 * unset or out of range (the forward pass and the memory plan both read it). */
uint32_t pt_dn_chunk_env(void);

size_t pt_dn_state_floats(const struct pt_dn_geom *g);
/* The key head value head h reads. */
uint32_t pt_dn_key_head(const struct pt_dn_geom *g, uint32_t h);

/* One token through the causal depthwise conv: y[c] = silu(sum_t w[c][t] * X[t]) over the
 * window X = (conv[c][0 .. d_conv-2], x[c]); the window then shifts in x.  w is
 * [conv_dim][d_conv].  Then q and k heads of y are L2-normalised in place. */
void pt_dn_conv_token(const struct pt_dn_geom *g, const float *w, float *conv, const float *x,
		      float *y);
/* Its two parts: the conv of channels [c0, c1) (channels are independent, so a prefill can
 * split them between threads), then the q/k heads' L2 norms of the finished row. */
void pt_dn_conv_span(const struct pt_dn_geom *g, const float *w, float *conv, const float *x,
		     float *y, uint32_t c0, uint32_t c1);
void pt_dn_qk_norm(const struct pt_dn_geom *g, float *y);

/* beta = sigmoid(b), g = softplus(a + dt) * ssm_a (the log decay, <= 0) for every value
 * head of one token, in place over b and a. */
void pt_dn_gates(const struct pt_dn_geom *g, const float *dt, const float *ssm_a, float *b,
		 float *a);

/* One token of value head h: S (d_v x d_k) updated in place, o[d_v] written. */
void pt_dn_step(const struct pt_dn_geom *g, float *S, const float *q, const float *k,
		const float *v, float gate, float beta, float *o);

/* The same for n consecutive tokens of one sequence in the chunked (WY/UT) form: per chunk
 * of up to g->chunk tokens the intra-chunk interactions, the triangular solve's products
 * and the state update as small matrix products (pt_kern_dn_ops.gemm, on the state
 * transposed once per call), instead of n rank-1 updates.  q/k/v of token t at q + t*stride_qk ... (already
 * convolved and normalised, this head's slices), gate[t*stride_g], beta[t*stride_g],
 * o[t*stride_o].  scratch: pt_dn_chunk_scratch_floats(g) floats.  Agrees with n calls of
 * pt_dn_step to rounding. */
size_t pt_dn_chunk_scratch_floats(const struct pt_dn_geom *g);
void pt_dn_chunk(const struct pt_dn_geom *g, float *S, uint32_t n, const float *q,
		 const float *k, size_t stride_qk, const float *v, size_t stride_v,
		 const float *gate, const float *beta, size_t stride_g, float *o,
		 size_t stride_o, float *scratch);

/* Gated output norm of one token: o_h = RMSNorm(o_h) * w * silu(z_h) for every value head. */
void pt_dn_out_norm(const struct pt_dn_geom *g, float *o, const float *w, const float *z,
		    float eps);

#endif
