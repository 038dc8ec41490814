/* deltanet.c - Gated DeltaNet: conv step, gates, the per-token delta rule (reference) and
 * its chunked form (deltanet.h). */
#include "model/deltanet.h"

#include <math.h>
#include <string.h>

#include "model/ops.h"

#define DN_CHUNK 64 /* tokens per chunk of the chunked form (llama.cpp's fallback uses 64) */

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

void pt_dn_conv_token(const struct pt_dn_geom *g, const float *w, float *conv, const float *x,
		      float *y)
{
	const uint32_t K = g->d_conv, W = K - 1;
	for (uint32_t c = 0; c < g->conv_dim; c++) {
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
	for (uint32_t h = 0; h < 2 * g->n_k; h++) /* q heads then k heads */
		l2norm(y + (size_t)h * g->d_k, g->d_k, g->eps);
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

size_t pt_dn_chunk_scratch_floats(const struct pt_dn_geom *g)
{
	return DN_CHUNK + (size_t)DN_CHUNK * DN_CHUNK + (size_t)DN_CHUNK * (g->d_v + g->d_k);
}

/* One chunk of C tokens from state S0 (ARCHITECTURES-NEXT.md 4.3, written out):
 * with G_t the cumulative log decay inside the chunk and the per-token pseudo-values
 * delta_t = beta_t (v_t - e^{g_t} S_{t-1} k_t), the state is
 * S_t = e^{G_t} S0 + sum_{s<=t} e^{G_t - G_s} delta_s k_s^T, so the deltas solve the unit
 * lower-triangular system delta_t + sum_{s<t} beta_t e^{G_t-G_s} (k_t.k_s) delta_s =
 * beta_t v_t - beta_t e^{G_t} S0 k_t: U = T (beta v), W = T (beta e^G k) by forward
 * substitution, delta = U - W S0^T.  Then o_t = e^{G_t} S0 q_t + sum_{s<=t} e^{G_t-G_s}
 * (q_t.k_s) delta_s and S_C = e^{G_C} S0 + sum_s e^{G_C-G_s} delta_s k_s^T. */
static void chunk_one(const struct pt_dn_geom *g, float *S, uint32_t C, const float *q,
		      const float *k, size_t sqk, const float *v, size_t sv, const float *gate,
		      const float *beta, size_t sg, float *o, size_t so, float *scr)
{
	const struct pt_kern_dn_ops *K = ops_of(g);
	const uint32_t dk = g->d_k, dv = g->d_v;
	const float scale = 1.0f / sqrtf((float)dv);
	float *G = scr, *A = G + DN_CHUNK, *U = A + (size_t)DN_CHUNK * DN_CHUNK;
	float *Wm = U + (size_t)DN_CHUNK * dv;
	for (uint32_t t = 0; t < C; t++)
		G[t] = (t ? G[t - 1] : 0.0f) + gate[t * sg];
	for (uint32_t t = 0; t < C; t++) {
		const float bt = beta[t * sg], eg = expf(G[t]);
		const float *kt = k + t * sqk, *vt = v + t * sv;
		float *ut = U + (size_t)t * dv, *wt = Wm + (size_t)t * dk;
		for (uint32_t j = 0; j < dv; j++)
			ut[j] = bt * vt[j];
		for (uint32_t i = 0; i < dk; i++)
			wt[i] = (bt * eg) * kt[i];
		for (uint32_t s = 0; s < t; s++) {
			const float a = bt * expf(G[t] - G[s]) * K->dot(kt, k + s * sqk, dk);
			K->axpy(ut, U + (size_t)s * dv, -a, dv);
			K->axpy(wt, Wm + (size_t)s * dk, -a, dk);
		}
	}
	/* delta = U - W S0^T, and the S0 part of the outputs, before S changes */
	for (uint32_t t = 0; t < C; t++) {
		float *ut = U + (size_t)t * dv, *ot = o + t * so;
		const float *wt = Wm + (size_t)t * dk, *qt = q + t * sqk;
		const float eg = expf(G[t]);
		for (uint32_t j = 0; j < dv; j++) {
			const float *r = S + (size_t)j * dk;
			ut[j] -= K->dot(r, wt, dk);
			ot[j] = eg * K->dot(r, qt, dk);
		}
	}
	for (uint32_t t = 0; t < C; t++) {
		const float *qt = q + t * sqk;
		float *ot = o + t * so;
		for (uint32_t s = 0; s <= t; s++) {
			const float m = expf(G[t] - G[s]) * K->dot(qt, k + s * sqk, dk);
			K->axpy(ot, U + (size_t)s * dv, m, dv);
		}
		for (uint32_t j = 0; j < dv; j++)
			ot[j] *= scale;
	}
	const float ec = expf(G[C - 1]);
	for (uint32_t s = 0; s < C; s++)
		A[s] = expf(G[C - 1] - G[s]);
	for (uint32_t j = 0; j < dv; j++) {
		float *r = S + (size_t)j * dk;
		for (uint32_t i = 0; i < dk; i++)
			r[i] *= ec;
		for (uint32_t s = 0; s < C; s++)
			K->axpy(r, k + s * sqk, A[s] * U[(size_t)s * dv + j], dk);
	}
}

void pt_dn_chunk(const struct pt_dn_geom *g, float *S, uint32_t n, const float *q,
		 const float *k, size_t stride_qk, const float *v, size_t stride_v,
		 const float *gate, const float *beta, size_t stride_g, float *o,
		 size_t stride_o, float *scratch)
{
	for (uint32_t c0 = 0; c0 < n; c0 += DN_CHUNK) {
		const uint32_t C = n - c0 < DN_CHUNK ? n - c0 : DN_CHUNK;
		chunk_one(g, S, C, q + c0 * stride_qk, k + c0 * stride_qk, stride_qk,
			  v + c0 * stride_v, stride_v, gate + c0 * stride_g, beta + c0 * stride_g,
			  stride_g, o + c0 * stride_o, stride_o, scratch);
	}
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
