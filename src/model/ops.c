/* ops.c - forward-pass operators with llama.cpp's CPU rounding points (see ops.h).
 *
 * exp: ggml's SIMD paths use a polynomial expf approximation (ggml_v_expf, ~1 ulp); we call
 * libm expf, which differs from it by at most a couple of ulp per element - far below the
 * tolerance of any comparison against llama.cpp. */
#include "model/ops.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"

/* Sum of squares in double (ggml's ggml_float accumulator), in eight interleaved partial
 * sums so the adds do not wait on one another (the squares are exact in double; the order
 * only moves the double sum's last bits, far below the float mean's rounding). */
static double sum_squares(const float *x, int n)
{
	double s[8] = { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 };
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += (double)x[i + j] * (double)x[i + j];
	for (; i < n; i++)
		s[i % 8] += (double)x[i] * (double)x[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* y = (x * scale) * w and y = x * scale in blocks of 8 loaded before any store: y may be x,
 * and with the loads first -O2's cheap vectorizer needs no alias check (the same products as
 * a plain loop). */
static void scale_rows_w(float *y, const float *x, const float *w, int n, float scale)
{
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		float t[8];
		for (int j = 0; j < 8; j++)
			t[j] = (x[i + j] * scale) * w[i + j];
		for (int j = 0; j < 8; j++)
			y[i + j] = t[j];
	}
	for (; i < n; i++)
		y[i] = (x[i] * scale) * w[i];
}

static void scale_rows(float *y, const float *x, int n, float scale)
{
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		float t[8];
		for (int j = 0; j < 8; j++)
			t[j] = x[i + j] * scale;
		for (int j = 0; j < 8; j++)
			y[i + j] = t[j];
	}
	for (; i < n; i++)
		y[i] = x[i] * scale;
}

void pt_op_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() >= PT_KERN_LEVEL_AVX2) {
		pt_kern_rmsnorm_avx2(y, x, w, n, eps);
		return;
	}
#elif defined(PT_KERN_ARM64)
	if (pt_kern_level() >= PT_KERN_LEVEL_NEON) {
		pt_kern_rmsnorm_neon(y, x, w, n, eps);
		return;
	}
#endif
	pt_op_rmsnorm_ref(y, x, w, n, eps);
}

void pt_op_rmsnorm_ref(float *y, const float *x, const float *w, int n, float eps)
{
	const double sum = sum_squares(x, n);
	const float mean = (float)(sum / n);
	const float scale = 1.0f / sqrtf(mean + eps);
	if (w)
		scale_rows_w(y, x, w, n, scale);
	else
		scale_rows(y, x, n, scale);
}

void pt_op_rmsnorm_heads(float *x, const float *w, int n_head, int head_dim, float eps)
{
	for (int h = 0; h < n_head; h++)
		pt_op_rmsnorm(x + (size_t)h * head_dim, x + (size_t)h * head_dim, w, head_dim, eps);
}

void pt_op_rope_cache(float *cs, int n_rot, int64_t pos, float base,
		      const float *freq_factors)
{
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	float theta = (float)pos;
	for (int i = 0; i < n_rot / 2; i++) {
		const float ff = freq_factors ? freq_factors[i] : 1.0f;
		const float t = theta / ff;
		cs[2 * i] = cosf(t);
		cs[2 * i + 1] = sinf(t);
		theta *= theta_scale;
	}
}

static float yarn_corr_dim(int n_rot, uint32_t n_ctx_orig, float beta, float base)
{
	return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) /
	       (2.0f * logf(base));
}

void pt_op_yarn_corr_dims(int n_rot, uint32_t n_ctx_orig, float base, float beta_fast,
			  float beta_slow, float *low, float *high)
{
	const float lo = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, base));
	const float hi = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, base));
	*low = lo > 0.0f ? lo : 0.0f;
	*high = hi < (float)(n_rot - 1) ? hi : (float)(n_rot - 1);
}

void pt_op_rope_cache_yarn(float *cs, int n_rot, int64_t pos, float base,
			   const float *freq_factors, const struct pt_yarn *y)
{
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	float mscale = y->attn_factor;
	if (y->ext_factor != 0.0f)
		mscale *= 1.0f + 0.1f * logf(1.0f / y->freq_scale);
	float theta = (float)pos;
	for (int i = 0; i < n_rot / 2; i++) {
		const float ff = freq_factors ? freq_factors[i] : 1.0f;
		const float extrap = theta / ff;
		float t = y->freq_scale * extrap;
		if (y->ext_factor != 0.0f) {
			const float r = ((float)i - y->corr_low) /
					fmaxf(0.001f, y->corr_high - y->corr_low);
			const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, r))) * y->ext_factor;
			t = t * (1.0f - mix) + extrap * mix;
		}
		cs[2 * i] = cosf(t) * mscale;
		cs[2 * i + 1] = sinf(t) * mscale;
		theta *= theta_scale;
	}
}

void pt_op_rope_apply(float *x, int n_head, int head_dim, int n_rot, enum pt_rope_mode mode,
		      const float *cs)
{
	const int half = n_rot / 2;
	for (int h = 0; h < n_head; h++) {
		float *v = x + (size_t)h * head_dim;
		for (int i = 0; i < half; i++) {
			const float c = cs[2 * i], s = cs[2 * i + 1];
			const int a = mode == PT_ROPE_NEOX ? i : 2 * i;
			const int b = mode == PT_ROPE_NEOX ? i + half : 2 * i + 1;
			const float x0 = v[a], x1 = v[b];
			v[a] = x0 * c - x1 * s;
			v[b] = x0 * s + x1 * c;
		}
	}
}

void pt_op_softmax(float *x, int n)
{
	float max = -INFINITY;
	for (int i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	double sum = 0.0;
	for (int i = 0; i < n; i++) {
		const float e = expf(x[i] - max);
		x[i] = e;
		sum += (double)e;
	}
	const float inv = (float)(1.0 / sum);
	for (int i = 0; i < n; i++)
		x[i] *= inv;
}

float pt_op_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* The exponential is the attention kernels' pt_kern_expf (within 1 ulp of expf), which has
 * an exact AVX2 twin: the SIMD SwiGLU (kern/ops_avx2.c) gives the scalar loop's bits. */
float pt_op_silu(float x)
{
	return x / (1.0f + pt_kern_expf(-x));
}

void pt_op_swiglu_ref(float *out, const float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = pt_op_silu(gate[i]) * up[i];
}

void pt_op_swiglu(float *out, const float *gate, const float *up, int n)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() >= PT_KERN_LEVEL_AVX2) {
		pt_kern_swiglu_avx2(out, gate, up, n);
		return;
	}
#elif defined(PT_KERN_ARM64)
	if (pt_kern_level() >= PT_KERN_LEVEL_NEON) {
		pt_kern_swiglu_neon(out, gate, up, n);
		return;
	}
#endif
	pt_op_swiglu_ref(out, gate, up, n);
}

void pt_op_swiglu_oai(float *out, const float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++) {
		/* std::min(g, limit) and std::clamp(u, -limit, limit), NaN behaviour included */
		const float x = PT_OAI_LIMIT < gate[i] ? PT_OAI_LIMIT : gate[i];
		const float u = up[i];
		const float y = u < -PT_OAI_LIMIT ? -PT_OAI_LIMIT : PT_OAI_LIMIT < u ? PT_OAI_LIMIT : u;
		const float glu = x / (1.0f + expf(PT_OAI_ALPHA * (-x)));
		out[i] = glu * (y + 1.0f);
	}
}

/* gelu of every F16 value (ggml's GELU table, F16 entries) stored as the floats those
 * entries convert to: constant data derived from the formula, built once per process (not
 * model state). */
static float gelu_table[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

/* With pt_kern_tanhf rather than libm's tanhf: rounded to F16, the two agree for every F16
 * input (test_ops_gelu_f16_table_semantics tries all 65,536), so the table is ggml's; and
 * the SIMD twins compute the same operations in lanes (pt_kern_geglu_avx2 / _neon). */
float pt_op_gelu_exact(float x)
{
	return 0.5f * x *
	       (1.0f + pt_kern_tanhf(PT_GELU_SQRT_2_OVER_PI * x * (1.0f + PT_GELU_COEF_A * x * x)));
}

static void gelu_table_build(void)
{
	for (uint32_t i = 0; i < 65536; i++)
		gelu_table[i] = pt_fp16_to_f32(
			pt_f32_to_fp16(pt_op_gelu_exact(pt_fp16_to_f32((uint16_t)i))));
}

float pt_op_gelu(float x)
{
	if (x <= -10.0f)
		return 0.0f;
	if (x >= 10.0f)
		return x;
	pthread_once(&gelu_once, gelu_table_build);
	return gelu_table[pt_f32_to_fp16(x)];
}

/* Gate values per F16 conversion batch (a stack buffer of table indices). */
#define GEGLU_CHUNK 256

/* pt_op_gelu(gate[i]) * up[i], the table indices converted a batch at a time by the
 * attention kernels' F32 -> F16 converter (round to nearest even like pt_f32_to_fp16 at
 * every level; only NaN payloads may differ, and every NaN index holds the same NaN). */
void pt_op_geglu_ref(float *out, const float *gate, const float *up, int n)
{
	const struct pt_kern_attn_ops *ops = pt_kern_attn_ops(1);
	uint16_t h[GEGLU_CHUNK];
	pthread_once(&gelu_once, gelu_table_build);
	for (int i0 = 0; i0 < n; i0 += GEGLU_CHUNK) {
		const int m = n - i0 < GEGLU_CHUNK ? n - i0 : GEGLU_CHUNK;
		ops->f32_to_f16(gate + i0, h, (uint32_t)m);
		for (int i = 0; i < m; i++) {
			const float x = gate[i0 + i];
			const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : gelu_table[h[i]];
			out[i0 + i] = g * up[i0 + i];
		}
	}
}

void pt_op_geglu(float *out, const float *gate, const float *up, int n)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() >= PT_KERN_LEVEL_AVX2) {
		pt_kern_geglu_avx2(out, gate, up, n);
		return;
	}
#elif defined(PT_KERN_ARM64)
	if (pt_kern_level() >= PT_KERN_LEVEL_NEON) {
		pt_kern_geglu_neon(out, gate, up, n);
		return;
	}
#endif
	pt_op_geglu_ref(out, gate, up, n);
}

void pt_op_softcap_ref(float *x, int n, float cap)
{
	const float inv = 1.0f / cap;
	for (int i = 0; i < n; i++)
		x[i] = pt_kern_tanhf(x[i] * inv) * cap;
}

void pt_op_softcap(float *x, int n, float cap)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level() >= PT_KERN_LEVEL_AVX2) {
		pt_kern_softcap_avx2(x, n, cap);
		return;
	}
#elif defined(PT_KERN_ARM64)
	if (pt_kern_level() >= PT_KERN_LEVEL_NEON) {
		pt_kern_softcap_neon(x, n, cap);
		return;
	}
#endif
	pt_op_softcap_ref(x, n, cap);
}

void pt_op_topk(const float *score, int n, int k, int *idx)
{
	/* Insertion into a sorted prefix of length k: O(n k), k <= 8..16 in practice. */
	int len = 0;
	for (int i = 0; i < n; i++) {
		const float s = score[i];
		if (len == k && !(s > score[idx[k - 1]]))
			continue;
		int j = len < k ? len++ : k - 1;
		while (j > 0 && s > score[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
}

void pt_op_moe_route(float *logits, int n_expert, enum pt_op_gating gating, const float *bias,
		     int k, bool norm, float scale, float *scratch, int *ids, float *weights)
{
	pt_op_moe_route_groups(logits, n_expert, gating, bias, 0, 0, k, norm, scale, scratch, ids,
			       weights);
}

/* Group-limited selection (build_moe_ffn): each group of n_expert / n_group scores is worth
 * the sum of its two largest (in double, as ggml_sum_rows), the n_used best groups stay, the
 * others' scores become -inf. */
static void keep_groups(float *sel, int n_expert, int n_group, int n_used)
{
	float gs[PT_OP_MAX_GROUPS] = { 0 };
	int top[PT_OP_MAX_GROUPS], two[2];
	const int per = n_expert / n_group;
	for (int g = 0; g < n_group; g++) {
		pt_op_topk(sel + (size_t)g * per, per, 2, two);
		gs[g] = (float)((double)sel[g * per + two[0]] + (double)sel[g * per + two[1]]);
	}
	pt_op_topk(gs, n_group, n_used, top);
	for (int g = 0; g < n_group; g++) {
		bool kept = false;
		for (int j = 0; j < n_used; j++)
			kept = kept || top[j] == g;
		for (int i = 0; !kept && i < per; i++)
			sel[g * per + i] = -INFINITY;
	}
}

void pt_op_moe_route_groups(float *logits, int n_expert, enum pt_op_gating gating,
			    const float *bias, int n_group, int n_group_used, int k, bool norm,
			    float scale, float *scratch, int *ids, float *weights)
{
	const bool grouped = n_group > 1 && n_group <= PT_OP_MAX_GROUPS;
	if (gating == PT_OP_GATING_SOFTMAX) {
		pt_op_softmax(logits, n_expert);
	} else if (gating == PT_OP_GATING_SIGMOID) {
		for (int i = 0; i < n_expert; i++)
			logits[i] = pt_op_sigmoid(logits[i]);
	}
	const float *sel = logits;
	if (bias) {
		for (int i = 0; i < n_expert; i++)
			scratch[i] = logits[i] + bias[i];
		sel = scratch;
	} else if (grouped) {
		memcpy(scratch, logits, (size_t)n_expert * sizeof(float));
		sel = scratch;
	}
	if (grouped)
		keep_groups(scratch, n_expert, n_group, n_group_used);
	pt_op_topk(sel, n_expert, k, ids);
	for (int j = 0; j < k; j++)
		weights[j] = logits[ids[j]];
	if (gating == PT_OP_GATING_SOFTMAX_WEIGHT)
		pt_op_softmax(weights, k);
	if (norm) {
		double dsum = 0.0; /* ggml_sum_rows accumulates in double */
		for (int j = 0; j < k; j++)
			dsum += weights[j];
		float sum = (float)dsum;
		if (sum < PT_MOE_WEIGHT_SUM_MIN)
			sum = PT_MOE_WEIGHT_SUM_MIN;
		for (int j = 0; j < k; j++)
			weights[j] /= sum;
	}
	if (scale != 0.0f && scale != 1.0f) {
		for (int j = 0; j < k; j++)
			weights[j] *= scale;
	}
}
