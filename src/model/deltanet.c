/* deltanet.c - Gated DeltaNet: conv step, gates, the per-token delta rule (reference) and
 * its chunked form (deltanet.h). */
#include "model/deltanet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops.h"


size_t pt_dn_state_floats(const struct pt_dn_geom *g)
{
	return (size_t)(g->d_conv - 1) * g->conv_dim + (size_t)g->n_v * g->d_v * g->d_k;
}

uint32_t pt_dn_key_head(const struct pt_dn_geom *g, uint32_t h)
{
	return g->tiled ? h % g->n_k : h / (g->n_v / g->n_k);
}

static const struct pt_kern_dn_ops *ops_of(const struct pt_dn_geom *g)
{
	return g->ops ? g->ops : pt_kern_dn_ops();
}

/* x / max(||x||, eps), the sum of squares in double (ggml_compute_forward_l2_norm_f32) */
static void l2norm(float *x, uint32_t n, float eps)
{
	double sum = 0.0;
	for (uint32_t i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
	for (uint32_t i = 0; i < n; i++)
		x[i] *= scale;
}

void pt_dn_conv_span(const struct pt_dn_geom *g, const float *w, float *conv, const float *x,
		     float *y, uint32_t c0, uint32_t c1)
{
	const uint32_t K = g->d_conv, W = K - 1;
	for (uint32_t c = c0; c < c1; c++) {
		float *s = conv + (size_t)c * W;
		const float *wc = w + (size_t)c * K;
		float sum = 0.0f;
		for (uint32_t t = 0; t < W; t++)
			sum += s[t] * wc[t];
		sum += x[c] * wc[W];
		for (uint32_t t = 0; t + 1 < W; t++)
			s[t] = s[t + 1];
		s[W - 1] = x[c];
		y[c] = sum / (1.0f + expf(-sum)); /* ggml_silu_f32 */
	}
}

void pt_dn_qk_norm(const struct pt_dn_geom *g, float *y)
{
	for (uint32_t h = 0; h < 2 * g->n_k; h++) /* q heads then k heads */
		l2norm(y + (size_t)h * g->d_k, g->d_k, g->eps);
}

void pt_dn_conv_token(const struct pt_dn_geom *g, const float *w, float *conv, const float *x,
		      float *y)
{
	pt_dn_conv_span(g, w, conv, x, y, 0, g->conv_dim);
	pt_dn_qk_norm(g, y);
}

void pt_dn_gates(const struct pt_dn_geom *g, const float *dt, const float *ssm_a, float *b,
		 float *a)
{
	for (uint32_t h = 0; h < g->n_v; h++) {
		b[h] = 1.0f / (1.0f + expf(-b[h]));
		const float x = a[h] + dt[h];
		const float sp = x > 20.0f ? x : logf(1.0f + expf(x));
		a[h] = sp * ssm_a[h];
	}
}

void pt_dn_step(const struct pt_dn_geom *g, float *S, const float *q, const float *k,
		const float *v, float gate, float beta, float *o)
{
	const struct pt_kern_dn_ops *K = ops_of(g);
	const uint32_t dk = g->d_k;
	const float eg = expf(gate), scale = 1.0f / sqrtf((float)g->d_v);
	/* every row j of S is independent: decay, read with k, rank-1 update, read with q */
	for (uint32_t j = 0; j < g->d_v; j++)
		o[j] = K->row_step(S + (size_t)j * dk, k, q, eg, v[j], beta, dk) * scale;
}

uint32_t pt_dn_chunk_env(void)
{
	const char *v = getenv("PARTICLE_DN_CHUNK");
	const long c = v ? strtol(v, NULL, 10) : 0;
	return c > 0 && c <= PT_DN_CHUNK_MAX ? (uint32_t)c : 0;
}

static uint32_t chunk_len(const struct pt_dn_geom *g)
{
	return g->chunk && g->chunk <= PT_DN_CHUNK_MAX ? g->chunk : PT_DN_CHUNK;
}

size_t pt_dn_chunk_scratch_floats(const struct pt_dn_geom *g)
{
	const size_t C = chunk_len(g), dk = g->d_k, dv = g->d_v;
	/* St, Kt, G, eG, KK/A, T, QK/M, then C x (dv + dk + dv + dk) for Vb, Kb|Qe, U, W */
	return dk * dv + dk * C + 2 * C + 3 * C * C + 2 * C * (dv + dk);
}

/* One chunk of C tokens on the transposed state St (d_k x d_v: St[i][j] = S_j[i]),
 * ARCHITECTURES-NEXT.md 4.3 written as matrix products.  With G_t the cumulative log decay
 * inside the chunk and the per-token pseudo-values delta_t = beta_t (v_t - e^{g_t}
 * S_{t-1} k_t), the state is S_t = e^{G_t} S0 + sum_{s<=t} e^{G_t - G_s} delta_s k_s^T, so
 * the deltas solve the unit lower-triangular system (I + A) delta = beta v - beta e^G K S0^T
 * with A[t][s] = beta_t e^{G_t-G_s} (k_t.k_s) for s < t.  T = (I + A)^-1 by forward
 * substitution (C^3/6), then U = T (beta v), W = -T (beta e^G k), delta = U + W St;
 * o_t = e^{G_t} q_t St + sum_{s<=t} e^{G_t-G_s} (q_t.k_s) delta_s, and
 * St <- e^{G_C} St + sum_s e^{G_C-G_s} k_s delta_s^T.  Every product is ops->gemm. */
static void chunk_one(const struct pt_dn_geom *g, float *St, uint32_t C, const float *q,
		      const float *k, size_t sqk, const float *v, size_t sv, const float *gate,
		      const float *beta, size_t sg, float *o, size_t so, float *scr)
{
	const struct pt_kern_dn_ops *K = ops_of(g);
	const uint32_t dk = g->d_k, dv = g->d_v, CM = chunk_len(g);
	const float scale = 1.0f / sqrtf((float)dv);
	float *Kt = scr + (size_t)dk * dv, *G = Kt + (size_t)dk * CM, *eG = G + CM;
	float *A = eG + CM, *T = A + (size_t)CM * CM, *M = T + (size_t)CM * CM;
	float *Vb = M + (size_t)CM * CM, *Kb = Vb + (size_t)CM * dv, *U = Kb + (size_t)CM * dk;
	float *W = U + (size_t)CM * dv;
	for (uint32_t t = 0; t < C; t++) {
		G[t] = (t ? G[t - 1] : 0.0f) + gate[t * sg];
		eG[t] = expf(G[t]);
	}
	for (uint32_t t = 0; t < C; t++) /* K transposed: the right factor of K K^T, Q K^T */
		for (uint32_t i = 0; i < dk; i++)
			Kt[(size_t)i * C + t] = k[t * sqk + i];
	K->gemm(C, C, dk, k, sqk, Kt, C, A, C, 1.0f, PT_DN_GEMM_TRI_C);
	K->gemm(C, C, dk, q, sqk, Kt, C, M, C, 1.0f, PT_DN_GEMM_TRI_C);
	/* A (strict lower, scaled), M (lower with the diagonal), T = (I + A)^-1 row by row:
	 * T_t = e_t - sum_{s<t} A[t][s] T_s (rows hold zeros above the diagonal) */
	for (uint32_t t = 0; t < C; t++) {
		const float bt = beta[t * sg];
		float *at = A + (size_t)t * C, *mt = M + (size_t)t * C, *tt = T + (size_t)t * C;
		for (uint32_t s = 0; s <= t; s++) {
			const float d = expf(G[t] - G[s]);
			at[s] = s < t ? bt * d * at[s] : 0.0f;
			mt[s] *= d * scale;
		}
		for (uint32_t s = t + 1; s < C; s++)
			at[s] = mt[s] = 0.0f;
		memset(tt, 0, C * sizeof *tt);
		tt[t] = 1.0f;
		for (uint32_t s = 0; s < t; s++)
			if (at[s] != 0.0f)
				K->axpy(tt, T + (size_t)s * C, -at[s], s + 1);
	}
	for (uint32_t t = 0; t < C; t++) {
		const float bt = beta[t * sg], nbe = -bt * eG[t];
		const float *kt = k + t * sqk, *vt = v + t * sv;
		float *vb = Vb + (size_t)t * dv, *kb = Kb + (size_t)t * dk;
		for (uint32_t j = 0; j < dv; j++)
			vb[j] = bt * vt[j];
		for (uint32_t i = 0; i < dk; i++)
			kb[i] = nbe * kt[i];
	}
	K->gemm(C, dv, C, T, C, Vb, dv, U, dv, 1.0f, PT_DN_GEMM_TRI_A);
	K->gemm(C, dk, C, T, C, Kb, dk, W, dk, 1.0f, PT_DN_GEMM_TRI_A);
	K->gemm(C, dv, dk, W, dk, St, dv, U, dv, 1.0f, PT_DN_GEMM_ACC); /* U is now delta */
	/* outputs, 1/sqrt(d_v) folded into the factors: (scale e^G Q) St + (scale M) delta,
	 * straight into o (Kb holds the decayed queries) */
	for (uint32_t t = 0; t < C; t++) {
		const float f = eG[t] * scale;
		for (uint32_t i = 0; i < dk; i++)
			Kb[(size_t)t * dk + i] = f * q[t * sqk + i];
	}
	K->gemm(C, dv, dk, Kb, dk, St, dv, o, so, 1.0f, 0);
	K->gemm(C, dv, C, M, C, U, dv, o, so, 1.0f, PT_DN_GEMM_ACC | PT_DN_GEMM_TRI_A);
	/* state: St = e^{G_C} St + (Kt scaled by e^{G_C - G_s} per token) delta */
	const float ec = expf(G[C - 1]);
	for (uint32_t s = 0; s < C; s++)
		eG[s] = expf(G[C - 1] - G[s]);
	for (uint32_t i = 0; i < dk; i++) {
		float *kr = Kt + (size_t)i * C;
		for (uint32_t s = 0; s < C; s++)
			kr[s] *= eG[s];
	}
	K->gemm(dk, dv, C, Kt, C, U, dv, St, dv, ec, PT_DN_GEMM_ACC);
}

void pt_dn_chunk(const struct pt_dn_geom *g, float *S, uint32_t n, const float *q,
		 const float *k, size_t stride_qk, const float *v, size_t stride_v,
		 const float *gate, const float *beta, size_t stride_g, float *o,
		 size_t stride_o, float *scratch)
{
	const uint32_t dk = g->d_k, dv = g->d_v, CM = chunk_len(g);
	float *St = scratch;
	for (uint32_t j = 0; j < dv; j++) /* S (d_v x d_k) -> St (d_k x d_v) */
		for (uint32_t i = 0; i < dk; i++)
			St[(size_t)i * dv + j] = S[(size_t)j * dk + i];
	for (uint32_t c0 = 0; c0 < n; c0 += CM) {
		const uint32_t C = n - c0 < CM ? n - c0 : CM;
		chunk_one(g, St, C, q + c0 * stride_qk, k + c0 * stride_qk, stride_qk,
			  v + c0 * stride_v, stride_v, gate + c0 * stride_g, beta + c0 * stride_g,
			  stride_g, o + c0 * stride_o, stride_o, scratch);
	}
	for (uint32_t j = 0; j < dv; j++)
		for (uint32_t i = 0; i < dk; i++)
			S[(size_t)j * dk + i] = St[(size_t)i * dv + j];
}

void pt_dn_out_norm(const struct pt_dn_geom *g, float *o, const float *w, const float *z,
		    float eps)
{
	for (uint32_t h = 0; h < g->n_v; h++) {
		float *oh = o + (size_t)h * g->d_v;
		const float *zh = z + (size_t)h * g->d_v;
		pt_op_rmsnorm(oh, oh, w, (int)g->d_v, eps);
		for (uint32_t j = 0; j < g->d_v; j++)
			oh[j] *= zh[j] / (1.0f + expf(-zh[j]));
	}
}
