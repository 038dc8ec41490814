/* gpu_ops.cu - the element-wise and small reduction operators of decode on the device:
 * RMSNorm, RoPE, softmax + top-k MoE routing, SwiGLU.  Each follows its CPU reference in
 * src/model/ops.c operation by operation (double sums where the CPU sums in double, the
 * same float theta recurrence for RoPE); only the device's expf/cosf/sinf differ (within
 * 2 ulp).  Reductions use a fixed tree, so results are deterministic. */
#include <math.h>
#include <stdint.h>

#include "cuda/gpu.h"
#include "cuda/gpu_internal.h"

#define PT_MOE_WEIGHT_SUM_MIN 6.103515625e-5f /* src/model/ops.h */

/* Sum of one double per thread over a block of 256 threads, fixed tree order. */
__device__ double block_sum_256(double v, double *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int s = 128; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	const double r = sh[0];
	__syncthreads();
	return r;
}

__global__ void __launch_bounds__(256) rmsnorm_kernel(float *y, const float *x, const float *w,
						      int n, float eps)
{
	__shared__ double sh[256];
	const float *xr = x + (size_t)blockIdx.x * n;
	float *yr = y + (size_t)blockIdx.x * n;
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += 256)
		s += (double)xr[i] * (double)xr[i];
	s = block_sum_256(s, sh);
	const float mean = (float)(s / n);
	const float scale = 1.0f / sqrtf(mean + eps);
	for (int i = threadIdx.x; i < n; i += 256)
		yr[i] = w ? __fmul_rn(__fmul_rn(xr[i], scale), w[i]) : __fmul_rn(xr[i], scale);
}

extern "C" enum pt_status pt_gpu_rmsnorm(float *dy, const float *dx, const float *dw, int n,
					 int n_rows, float eps, struct pt_error *err)
{
	if (n <= 0 || n_rows <= 0)
		return pt_error_set(err, PT_E_INVALID, "CUDA rmsnorm: bad shape %d x %d", n_rows, n);
	rmsnorm_kernel<<<n_rows, 256, 0, pt_gpu_stream>>>(dy, dx, dw, n, eps);
	return pt_gpu_launched(err, "rmsnorm launch");
}

/* One thread per (head, pair).  theta is built by the CPU's repeated float multiplication
 * (pt_op_rope_cache), i multiplications for pair i. */
__global__ void rope_kernel(float *x, int n_head, int head_dim, int n_rot, int neox,
			    float pos, float theta_scale)
{
	const int half = n_rot / 2;
	const int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= n_head * half)
		return;
	const int h = t / half, i = t % half;
	float theta = pos;
	for (int j = 0; j < i; j++)
		theta = __fmul_rn(theta, theta_scale);
	const float c = cosf(theta), s = sinf(theta);
	float *v = x + (size_t)h * head_dim;
	const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
	const float x0 = v[a], x1 = v[b];
	v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
	v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

extern "C" enum pt_status pt_gpu_rope(float *dx, int n_head, int head_dim, int n_rot, int mode,
				      int64_t pos, float base, struct pt_error *err)
{
	if (n_head <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 ||
	    (mode != 0 && mode != 2))
		return pt_error_set(err, PT_E_INVALID, "CUDA rope: bad shape or mode");
	/* The scale is computed on the host with the CPU's powf, as pt_op_rope_cache does. */
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	const int total = n_head * (n_rot / 2);
	rope_kernel<<<(total + 127) / 128, 128, 0, pt_gpu_stream>>>(dx, n_head, head_dim, n_rot, mode == 2,
						  (float)pos, theta_scale);
	return pt_gpu_launched(err, "rope launch");
}

/* One 256-thread block per token: softmax as pt_op_softmax (max, expf, double sum, multiply by
 * (float)(1/sum)), then k rounds of a block arg-max (ties to the lower index, like
 * pt_op_topk), then the weight normalization of pt_op_moe_route. */
__global__ void __launch_bounds__(256) route_kernel(float *logits, int n, int k, int norm,
						    float scale, int32_t *ids, float *weights,
						    int gating, const float *bias, size_t ld)
{
	__shared__ double sh[256];
	__shared__ float bv[256];
	__shared__ int bi[256];
	__shared__ unsigned char taken[1024];
	float *l = logits + (size_t)blockIdx.x * ld; /* ld: row stride (>= 2n with a bias) */
	int32_t *id = ids + (size_t)blockIdx.x * k;
	float *wt = weights + (size_t)blockIdx.x * k;

	for (int i = threadIdx.x; i < n; i += 256)
		taken[i] = 0;
	if (gating == 2) /* sigmoid (pt_op_sigmoid) */
		for (int i = threadIdx.x; i < n; i += 256)
			l[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-l[i])));
	__syncthreads();
	if (gating == 1) {
	float mx = -INFINITY;
	for (int i = threadIdx.x; i < n; i += 256)
		mx = fmaxf(mx, l[i]);
	bv[threadIdx.x] = mx;
	__syncthreads();
	for (int s = 128; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			bv[threadIdx.x] = fmaxf(bv[threadIdx.x], bv[threadIdx.x + s]);
		__syncthreads();
	}
	mx = bv[0];
	__syncthreads();
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += 256) {
		const float e = expf(__fsub_rn(l[i], mx));
		l[i] = e;
		s += (double)e;
	}
	s = block_sum_256(s, sh);
	const float inv = (float)(1.0 / s);
	for (int i = threadIdx.x; i < n; i += 256)
		l[i] = __fmul_rn(l[i], inv);
	}
	__syncthreads();
	/* selection scores: the probabilities plus the selection bias (weights stay l) */
	float *sel = l;
	if (bias) {
		sel = l + n; /* the caller's logits buffer has room for 2n per row */
		for (int i = threadIdx.x; i < n; i += 256)
			sel[i] = __fadd_rn(l[i], bias[i]);
		__syncthreads();
	}

	for (int j = 0; j < k; j++) {
		float best = -INFINITY;
		int bidx = n;
		for (int i = threadIdx.x; i < n; i += 256)
			if (!taken[i] && (sel[i] > best || bidx == n)) {
				best = sel[i];
				bidx = i;
			}
		bv[threadIdx.x] = best;
		bi[threadIdx.x] = bidx;
		__syncthreads();
		for (int st = 128; st > 0; st >>= 1) {
			if ((int)threadIdx.x < st) {
				const float ov = bv[threadIdx.x + st];
				const int oi = bi[threadIdx.x + st];
				const int mi = bi[threadIdx.x];
				if (oi < n && (mi == n || ov > bv[threadIdx.x] ||
					       (ov == bv[threadIdx.x] && oi < mi))) {
					bv[threadIdx.x] = ov;
					bi[threadIdx.x] = oi;
				}
			}
			__syncthreads();
		}
		if (threadIdx.x == 0) {
			id[j] = bi[0];
			wt[j] = l[bi[0]];
			taken[bi[0]] = 1;
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		if (gating == 3) { /* softmax over the k chosen weights (pt_op_softmax) */
			float m = -INFINITY;
			for (int j = 0; j < k; j++)
				m = fmaxf(m, wt[j]);
			double ds = 0.0;
			for (int j = 0; j < k; j++) {
				wt[j] = expf(__fsub_rn(wt[j], m));
				ds += (double)wt[j];
			}
			const float inv = (float)(1.0 / ds);
			for (int j = 0; j < k; j++)
				wt[j] = __fmul_rn(wt[j], inv);
		}
		if (norm) {
			double ds = 0.0;
			for (int j = 0; j < k; j++)
				ds += wt[j];
			float sum = (float)ds;
			if (sum < PT_MOE_WEIGHT_SUM_MIN)
				sum = PT_MOE_WEIGHT_SUM_MIN;
			for (int j = 0; j < k; j++)
				wt[j] = __fdiv_rn(wt[j], sum);
		}
		if (scale != 0.0f && scale != 1.0f)
			for (int j = 0; j < k; j++)
				wt[j] = __fmul_rn(wt[j], scale);
	}
}

extern "C" enum pt_status pt_gpu_moe_route(float *dlogits, int n_expert, int n_tok, int k,
					   int norm, float scale, int32_t *dids,
					   float *dweights, struct pt_error *err)
{
	if (n_expert <= 0 || n_expert > 1024 || n_tok <= 0 || k <= 0 || k > 32 || k > n_expert)
		return pt_error_set(err, PT_E_INVALID, "CUDA moe_route: bad shape (%d experts, "
				    "top %d, %d tokens)", n_expert, k, n_tok);
	route_kernel<<<n_tok, 256, 0, pt_gpu_stream>>>(dlogits, n_expert, k, norm, scale, dids,
							  dweights, 1, NULL, (size_t)n_expert);
	return pt_gpu_launched(err, "moe_route launch");
}

enum pt_status pt_gpu_route_ex(float *dlogits, int n_expert, int k, int gating,
			       const float *dbias, int norm, float scale, int32_t *dids,
			       float *dweights, struct pt_error *err)
{
	if (n_expert <= 0 || n_expert > 1024 || k <= 0 || k > 32 || k > n_expert ||
	    gating < 0 || gating > 3)
		return pt_error_set(err, PT_E_INVALID, "CUDA route: bad shape (%d experts, top %d, "
				    "gating %d)", n_expert, k, gating);
	route_kernel<<<1, 256, 0, pt_gpu_stream>>>(dlogits, n_expert, k, norm, scale, dids,
						   dweights, gating, dbias, 0);
	return pt_gpu_launched(err, "route launch");
}

enum pt_status pt_gpu_route_rows(float *dlogits, size_t ld, int n_tok, int n_expert, int k,
				 int gating, const float *dbias, int norm, float scale,
				 int32_t *dids, float *dweights, struct pt_error *err)
{
	if (n_expert <= 0 || n_expert > 1024 || k <= 0 || k > 32 || k > n_expert ||
	    gating < 0 || gating > 3 || n_tok <= 0 || ld < (size_t)(dbias ? 2 : 1) * n_expert)
		return pt_error_set(err, PT_E_INVALID, "CUDA route: bad shape (%d experts, top %d, "
				    "gating %d, %d rows)", n_expert, k, gating, n_tok);
	route_kernel<<<n_tok, 256, 0, pt_gpu_stream>>>(dlogits, n_expert, k, norm, scale, dids,
						       dweights, gating, dbias, ld);
	return pt_gpu_launched(err, "route rows launch");
}

__global__ void swiglu_kernel(float *out, const float *gate, const float *up, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const float g = gate[i];
	out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
}

extern "C" enum pt_status pt_gpu_swiglu(float *dout, const float *dgate, const float *dup, int n,
					struct pt_error *err)
{
	if (n <= 0)
		return pt_error_set(err, PT_E_INVALID, "CUDA swiglu: bad length %d", n);
	swiglu_kernel<<<(n + 255) / 256, 256, 0, pt_gpu_stream>>>(dout, dgate, dup, n);
	return pt_gpu_launched(err, "swiglu launch");
}
