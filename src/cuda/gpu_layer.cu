/* gpu_layer.cu - the element-wise operators, attention and expert bookkeeping kernels of the
 * decode layer (gpu_internal.h).  Each follows its CPU counterpart (src/model/ops.c,
 * src/model/forward.c) operation by operation with rounding-exact intrinsics where the CPU
 * has no FMA; reductions use fixed trees, so results depend only on the inputs. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "cuda/gpu.h"
#include "cuda/gpu_internal.h"

static __device__ double sum_256(double v, double *sh)
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

static unsigned blocks(long n, int t)
{
	return (unsigned)((n + t - 1) / t);
}

__global__ void add_kernel(float *y, const float *x, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __fadd_rn(y[i], x[i]);
}

void pt_gpu_add(float *y, const float *x, int n)
{
	add_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(y, x, n);
}

__global__ void scale_by_kernel(float *y, const float *s, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __fmul_rn(y[i], s[0]);
}

void pt_gpu_scale_by(float *y, const float *s, int n)
{
	scale_by_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(y, s, n);
}

__global__ void mul_scaled_kernel(float *y, const float *x, float c, const float *w, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __fmul_rn(__fmul_rn(x[i], c), w[i]);
}

void pt_gpu_mul_scaled(float *y, const float *x, float c, const float *w, int n)
{
	mul_scaled_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(y, x, c, w, n);
}

__global__ void add_rows_kernel(float *y, const float *b, int n, long total)
{
	const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < total)
		y[i] = __fadd_rn(y[i], b[i % n]);
}

void pt_gpu_add_rows(float *y, const float *b, int n, int rows)
{
	add_rows_kernel<<<blocks((long)n * rows, 256), 256, 0, pt_gpu_stream>>>(y, b, n,
									     (long)n * rows);
}

__global__ void mul_scaled_rows_kernel(float *y, const float *x, float c, const float *w, int n,
				       long total)
{
	const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < total)
		y[i] = __fmul_rn(__fmul_rn(x[i], c), w[i % n]);
}

void pt_gpu_mul_scaled_rows(float *y, const float *x, float c, const float *w, int n, int rows)
{
	mul_scaled_rows_kernel<<<blocks((long)n * rows, 256), 256, 0, pt_gpu_stream>>>(
		y, x, c, w, n, (long)n * rows);
}

__global__ void softcap_kernel(float *y, int n, float cap, float inv)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __fmul_rn(tanhf(__fmul_rn(y[i], inv)), cap);
}

void pt_gpu_softcap(float *y, int n, float cap)
{
	softcap_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(y, n, cap, 1.0f / cap);
}

/* pt_op_gelu: ggml's table of F16 GELU values, indexed by the F16 rounding of x. */
static __device__ float gelu_f16(float x)
{
	if (x <= -10.0f)
		return 0.0f;
	if (x >= 10.0f)
		return x;
	const float xh = __half2float(__float2half_rn(x));
	const float a = 0.79788456080286535587989211986876f, b = 0.044715f;
	const float in = __fmul_rn(__fmul_rn(a, xh), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(b, xh), xh)));
	const float g = __fmul_rn(__fmul_rn(0.5f, xh), __fadd_rn(1.0f, tanhf(in)));
	return __half2float(__float2half_rn(g));
}

__global__ void glu_kernel(float *out, const float *gate, const float *up, int nf, int n_rows,
			   size_t in_stride, bool geglu)
{
	const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= (long)nf * n_rows)
		return;
	const long r = t / nf, i = t % nf;
	const float g = gate[r * in_stride + i], u = up[r * in_stride + i];
	const float a = geglu ? gelu_f16(g) : __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
	out[r * nf + i] = __fmul_rn(a, u);
}

void pt_gpu_glu(float *out, const float *gate, const float *up, int nf, int n_rows,
		size_t in_stride, bool geglu)
{
	glu_kernel<<<blocks((long)nf * n_rows, 256), 256, 0, pt_gpu_stream>>>(out, gate, up, nf,
									       n_rows, in_stride,
									       geglu);
}

/* pt_op_rope_cache (theta by repeated float multiplication, divided by the factor) +
 * pt_op_rope_apply in NEOX mode; one thread per (head, pair).  The position is read from
 * device memory (*dpos) so one captured graph serves every decode step. */
__global__ void rope_neox_kernel(float *x, int n_head, int head_dim, int n_rot,
				 const int64_t *dpos, float theta_scale, const float *ff,
				 size_t tok_stride)
{
	x += (size_t)blockIdx.y * tok_stride; /* grid.y: the chunk's tokens (1 in decode) */
	const int half = n_rot / 2;
	const int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= n_head * half)
		return;
	const int h = t / half, i = t % half;
	float theta = (float)(*dpos + (int64_t)blockIdx.y);
	for (int j = 0; j < i; j++)
		theta = __fmul_rn(theta, theta_scale);
	const float th = ff ? __fdiv_rn(theta, ff[i]) : theta;
	const float c = cosf(th), s = sinf(th);
	float *v = x + (size_t)h * head_dim;
	const float x0 = v[i], x1 = v[i + half];
	v[i] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
	v[i + half] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

void pt_gpu_rope_neox(float *x, int n_head, int head_dim, int n_rot, const int64_t *dpos,
		      float base, const float *dff)
{
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	const int total = n_head * (n_rot / 2);
	rope_neox_kernel<<<blocks(total, 128), 128, 0, pt_gpu_stream>>>(x, n_head, head_dim, n_rot,
									 dpos, theta_scale, dff, 0);
}

void pt_gpu_rope_neox_rows(float *x, int n_tok, size_t tok_stride, int n_head, int head_dim,
			   int n_rot, const int64_t *dpos, float base, const float *dff)
{
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	const int total = n_head * (n_rot / 2);
	const dim3 grid(blocks(total, 128), (unsigned)n_tok);
	rope_neox_kernel<<<grid, 128, 0, pt_gpu_stream>>>(x, n_head, head_dim, n_rot, dpos,
							  theta_scale, dff, tok_stride);
}

/* K and V rounded to F16 (the CPU path's default cache type) into row *dpos % cap. */
__global__ void kv_store_kernel(float *kc, float *vc, const float *k, const float *v, int nk,
				int nv, const int64_t *dpos, long cap)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	const long row = (long)((*dpos + (int64_t)blockIdx.y) % cap); /* grid.y: tokens */
	k += (size_t)blockIdx.y * nk;
	v += (size_t)blockIdx.y * nv;
	if (i < nk)
		kc[(size_t)row * nk + i] = __half2float(__float2half_rn(k[i]));
	else if (i < nk + nv)
		vc[(size_t)row * nv + i - nk] = __half2float(__float2half_rn(v[i - nk]));
}

void pt_gpu_kv_store(float *kc, float *vc, const float *k, const float *v, int nk, int nv,
		     const int64_t *dpos, int64_t cap)
{
	kv_store_kernel<<<blocks(nk + nv, 256), 256, 0, pt_gpu_stream>>>(kc, vc, k, v, nk, nv, dpos,
									  (long)cap);
}

void pt_gpu_kv_store_rows(float *kc, float *vc, const float *k, const float *v, int nk, int nv,
			  int n_tok, const int64_t *dpos, int64_t cap)
{
	const dim3 grid(blocks(nk + nv, 256), (unsigned)n_tok);
	kv_store_kernel<<<grid, 256, 0, pt_gpu_stream>>>(kc, vc, k, v, nk, nv, dpos, (long)cap);
}

/* Split-K attention: grid (head, chunk of ATT_CHUNK positions); each block scores its chunk
 * (warps over positions, lanes over the head dimension, butterfly), takes the chunk's max
 * and double sum of exponentials by fixed trees and its weighted V sum (warps over the
 * positions, lanes over the dimensions, the 8 warps' sums added in order), and writes the partial (m, s, acc[hd_v]); a second kernel
 * merges a head's chunks in order.  Chunk boundaries depend only on the query's position,
 * so the result does not depend on anything else. */
#define ATT_CHUNK 256
#define ATT_MAX_HDV 512 /* V head width of the warp-parallel weighted sum */
__global__ void __launch_bounds__(256) attn_chunk_kernel(const float *q, const float *kc,
							 const float *vc, float *parts, int group,
							 int n_kv, int hd_k, int hd_v,
							 const int64_t *dpos, long window, long cap,
							 float scale, int n_chunks)
{
	__shared__ double sh[256];
	__shared__ float fm[256];
	__shared__ float sc[ATT_CHUNK];
	__shared__ float red[8][ATT_MAX_HDV];
	const int h = blockIdx.x, c = blockIdx.y, kvh = h / group;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int n_head = gridDim.x;
	/* grid.z: the chunk's tokens (1 in decode), token z at position *dpos + z */
	q += (size_t)blockIdx.z * n_head * hd_k;
	parts += (size_t)blockIdx.z * n_head * n_chunks * (2 + hd_v);
	const long pos = (long)(*dpos + (int64_t)blockIdx.z);
	const long first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
	const long count = pos + 1 - first;
	const long p0 = (long)c * ATT_CHUNK;
	if (p0 >= count) /* a chunk past this step's keys (the grid covers the longest) */
		return;
	const int n = (int)(count - p0 < ATT_CHUNK ? count - p0 : ATT_CHUNK);
	const float *qh = q + (size_t)h * hd_k;
	for (int p = warp; p < n; p += 8) {
		const float *kr = kc + (size_t)((first + p0 + p) % cap) * n_kv * hd_k +
				  (size_t)kvh * hd_k;
		float acc = 0.0f;
		for (int d = lane; d < hd_k; d += 32)
			acc = fmaf(qh[d], kr[d], acc);
		for (int o = 16; o > 0; o >>= 1)
			acc += __shfl_xor_sync(0xffffffffu, acc, o);
		if (lane == 0)
			sc[p] = __fmul_rn(acc, scale);
	}
	__syncthreads();
	fm[threadIdx.x] = (int)threadIdx.x < n ? sc[threadIdx.x] : -INFINITY;
	__syncthreads();
	for (int st = 128; st > 0; st >>= 1) {
		if ((int)threadIdx.x < st)
			fm[threadIdx.x] = fmaxf(fm[threadIdx.x], fm[threadIdx.x + st]);
		__syncthreads();
	}
	const float mx = fm[0];
	double s = 0.0;
	if ((int)threadIdx.x < n) {
		const float e = expf(__fsub_rn(sc[threadIdx.x], mx));
		sc[threadIdx.x] = e;
		s = (double)e;
	}
	s = sum_256(s, sh); /* its barriers publish sc[] */
	float *part = parts + ((size_t)h * n_chunks + c) * (2 + hd_v);
	if (threadIdx.x == 0) {
		part[0] = mx;
		part[1] = (float)s;
	}
	if (hd_v > ATT_MAX_HDV) { /* threads over the dimensions, positions in order */
		for (int d = threadIdx.x; d < hd_v; d += 256) {
			float acc = 0.0f;
			for (int p = 0; p < n; p++)
				acc = fmaf(sc[p], vc[(size_t)((first + p0 + p) % cap) * n_kv * hd_v +
						     (size_t)kvh * hd_v + d], acc);
			part[2 + d] = acc;
		}
		return;
	}
	/* warp w sums positions w, w + 8, ... (lanes over the dimensions: coalesced rows of
	 * V), then the 8 warps' sums are added in warp order */
	float acc[ATT_MAX_HDV / 32];
#pragma unroll
	for (int j = 0; j < ATT_MAX_HDV / 32; j++)
		acc[j] = 0.0f;
	for (int p = warp; p < n; p += 8) {
		const float *vr = vc + (size_t)((first + p0 + p) % cap) * n_kv * hd_v +
				  (size_t)kvh * hd_v;
		const float w = sc[p];
#pragma unroll
		for (int j = 0; j < ATT_MAX_HDV / 32; j++)
			if (lane + 32 * j < hd_v)
				acc[j] = fmaf(w, vr[lane + 32 * j], acc[j]);
	}
#pragma unroll
	for (int j = 0; j < ATT_MAX_HDV / 32; j++)
		if (lane + 32 * j < hd_v)
			red[warp][lane + 32 * j] = acc[j];
	__syncthreads();
	for (int d = threadIdx.x; d < hd_v; d += 256) {
		float t = red[0][d];
		for (int w = 1; w < 8; w++)
			t = __fadd_rn(t, red[w][d]);
		part[2 + d] = t;
	}
}

/* One block per head: the chunks' partials merged in order (online softmax), then
 * out = acc / sum. */
__global__ void attn_merge_kernel(const float *parts, float *out, int hd_v, int n_chunks,
				  const int64_t *dpos, long window)
{
	const int h = blockIdx.x;
	parts += (size_t)blockIdx.y * gridDim.x * n_chunks * (2 + hd_v); /* grid.y: tokens */
	out += (size_t)blockIdx.y * gridDim.x * hd_v;
	const long pos = (long)(*dpos + (int64_t)blockIdx.y);
	const long first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
	const int n_used = (int)((pos + 1 - first + ATT_CHUNK - 1) / ATT_CHUNK);
	const float *ph = parts + (size_t)h * n_chunks * (2 + hd_v);
	for (int d = threadIdx.x; d < hd_v; d += blockDim.x) {
		float m = ph[0], s = ph[1], acc = ph[2 + d];
		for (int c = 1; c < n_used; c++) {
			const float *pc = ph + (size_t)c * (2 + hd_v);
			const float m2 = fmaxf(m, pc[0]);
			const float a = expf(__fsub_rn(m, m2)), b = expf(__fsub_rn(pc[0], m2));
			s = __fadd_rn(__fmul_rn(s, a), __fmul_rn(pc[1], b));
			acc = __fadd_rn(__fmul_rn(acc, a), __fmul_rn(pc[2 + d], b));
			m = m2;
		}
		out[(size_t)h * hd_v + d] = __fdiv_rn(acc, s);
	}
}

void pt_gpu_attention(const float *q, const float *kc, const float *vc, float *out,
		      float *scores, int n_head, int n_kv, int hd_k, int hd_v, const int64_t *dpos,
		      int64_t window, int64_t max_count, int64_t cap, float scale)
{
	/* scores holds the partials: n_head * n_chunks * (2 + hd_v) floats; the grid covers
	 * the most keys a step can see, the chunks past this step's return at once */
	const int n_chunks = (int)((max_count + ATT_CHUNK - 1) / ATT_CHUNK);
	const dim3 grid((unsigned)n_head, (unsigned)n_chunks);
	attn_chunk_kernel<<<grid, 256, 0, pt_gpu_stream>>>(q, kc, vc, scores, n_head / n_kv, n_kv,
							   hd_k, hd_v, dpos, (long)window, (long)cap,
							   scale, n_chunks);
	attn_merge_kernel<<<n_head, 128, 0, pt_gpu_stream>>>(scores, out, hd_v, n_chunks, dpos,
							     (long)window);
}

void pt_gpu_attention_rows(const float *q, const float *kc, const float *vc, float *out,
			   float *scores, int n_tok, int n_head, int n_kv, int hd_k, int hd_v,
			   const int64_t *dpos, int64_t window, int64_t max_count, int64_t cap,
			   float scale)
{
	const int n_chunks = (int)((max_count + ATT_CHUNK - 1) / ATT_CHUNK);
	const dim3 grid((unsigned)n_head, (unsigned)n_chunks, (unsigned)n_tok);
	attn_chunk_kernel<<<grid, 256, 0, pt_gpu_stream>>>(q, kc, vc, scores, n_head / n_kv, n_kv,
							   hd_k, hd_v, dpos, (long)window, (long)cap,
							   scale, n_chunks);
	const dim3 mgrid((unsigned)n_head, (unsigned)n_tok);
	attn_merge_kernel<<<mgrid, 128, 0, pt_gpu_stream>>>(scores, out, hd_v, n_chunks, dpos,
							    (long)window);
}

__global__ void combine_kernel(float *out, const float *y, int n, int k, const int32_t *ids,
			       const float *w, const float *s)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	out += (size_t)blockIdx.y * n; /* grid.y: the chunk's tokens (1 in decode) */
	y += (size_t)blockIdx.y * k * n;
	ids += (size_t)blockIdx.y * k;
	w += (size_t)blockIdx.y * k;
	float acc = 0.0f;
	for (int j = 0; j < k; j++) {
		const float yi = y[(size_t)j * n + i];
		const float v = s ? __fmul_rn(__fmul_rn(yi, s[ids[j]]), w[j]) : __fmul_rn(yi, w[j]);
		acc = j ? __fadd_rn(acc, v) : v;
	}
	out[i] = acc;
}

void pt_gpu_combine(float *out, const float *y, int n, int k, const int32_t *ids,
		    const float *w, const float *s)
{
	combine_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(out, y, n, k, ids, w, s);
}

void pt_gpu_combine_rows(float *out, const float *y, int n, int k, int n_tok,
			 const int32_t *ids, const float *w, const float *s)
{
	const dim3 grid(blocks(n, 256), (unsigned)n_tok);
	combine_kernel<<<grid, 256, 0, pt_gpu_stream>>>(out, y, n, k, ids, w, s);
}

__global__ void resolve_kernel(struct pt_gpu_xdesc *desc, const struct pt_gpu_xdesc *table,
			       const int32_t *ids, int k)
{
	const int j = threadIdx.x;
	if (j >= k)
		return;
	struct pt_gpu_xdesc d = table[ids[j]];
	d.rank = j;
	desc[j] = d;
}

void pt_gpu_resolve(struct pt_gpu_xdesc *desc, const struct pt_gpu_xdesc *table,
		    const int32_t *ids, int k)
{
	resolve_kernel<<<1, 32, 0, pt_gpu_stream>>>(desc, table, ids, k);
}

__global__ void glu_batch_kernel(float *out, const float *gate, const float *up, int nf,
				 size_t in_stride, const struct pt_gpu_xdesc *desc, bool geglu)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= nf)
		return;
	const size_t r = (size_t)desc[blockIdx.y].rank;
	const float g = gate[r * in_stride + i], u = up[r * in_stride + i];
	const float a = geglu ? gelu_f16(g) : __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
	out[r * nf + i] = __fmul_rn(a, u);
}

void pt_gpu_glu_batch(float *out, const float *gate, const float *up, int nf, size_t in_stride,
		      const struct pt_gpu_xdesc *desc, int n, bool geglu)
{
	if (n <= 0)
		return;
	const dim3 grid(blocks(nf, 256), (unsigned)n);
	glu_batch_kernel<<<grid, 256, 0, pt_gpu_stream>>>(out, gate, up, nf, in_stride, desc, geglu);
}

/* ---- activations rounded through the weights' partner format (kern.h act_type), as the
 * CPU path quantizes them before its dot products: y = the float value each quantized
 * element stands for.  Q8_0/Q8_1: per 32, d = amax/127 stored as F16, q = rint(x * 127/amax)
 * (pt_kern_quantize_row's q8_block); Q8_K: per 256, iscale = -127/max (max = the first
 * element of largest magnitude), q = min(nearest(iscale x), 127), d = 1/iscale; F16: the F16
 * rounding.  Only the summation order then separates a device product from the CPU's. ---- */
__global__ void round_f16_kernel(float *y, const float *x, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __half2float(__float2half_rn(x[i]));
}

/* One warp per 32-element block. */
__global__ void round_q8_0_kernel(float *y, const float *x, int n)
{
	const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (b * 32 >= n)
		return;
	const float v = x[b * 32 + lane];
	float amax = fabsf(v);
	for (int o = 16; o > 0; o >>= 1)
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
	const float d = __fdiv_rn(amax, 127.0f);
	const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
	const float q = rintf(fminf(fmaxf(__fmul_rn(v, id), -127.0f), 127.0f));
	y[b * 32 + lane] = __fmul_rn(__half2float(__float2half_rn(d)), q);
}

/* One 256-thread block per 256-element block. */
__global__ void __launch_bounds__(256) round_q8_K_kernel(float *y, const float *x, int n)
{
	__shared__ float sa[256];
	__shared__ int si[256];
	const int i = blockIdx.x * 256 + threadIdx.x;
	const float v = x[i];
	sa[threadIdx.x] = fabsf(v);
	si[threadIdx.x] = threadIdx.x;
	__syncthreads();
	for (int s = 128; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s) {
			const float o = sa[threadIdx.x + s];
			const int oi = si[threadIdx.x + s];
			if (o > sa[threadIdx.x] || (o == sa[threadIdx.x] && oi < si[threadIdx.x])) {
				sa[threadIdx.x] = o;
				si[threadIdx.x] = oi;
			}
		}
		__syncthreads();
	}
	const float amax = sa[0], mx = x[blockIdx.x * 256 + si[0]];
	if (amax == 0.0f) {
		y[i] = 0.0f;
		return;
	}
	const float iscale = __fdiv_rn(-127.0f, mx);
	const float q = fminf(rintf(__fmul_rn(iscale, v)), 127.0f);
	y[i] = __fmul_rn(__fdiv_rn(1.0f, iscale), q);
}

bool pt_gpu_act_round(float *y, const float *x, int n, uint32_t act_type)
{
	switch (act_type) {
	case 0: /* F32: as it is */
		if (y != x)
			cudaMemcpyAsync(y, x, (size_t)n * 4, cudaMemcpyDeviceToDevice, pt_gpu_stream);
		return true;
	case 1: /* F16 */
		round_f16_kernel<<<blocks(n, 256), 256, 0, pt_gpu_stream>>>(y, x, n);
		return true;
	case 8: /* Q8_0 */
	case 9: /* Q8_1: the same quants and F16 d */
		if (n % 32)
			return false;
		round_q8_0_kernel<<<blocks(n / 32, 8), 256, 0, pt_gpu_stream>>>(y, x, n);
		return true;
	case 15: /* Q8_K */
		if (n % 256)
			return false;
		round_q8_K_kernel<<<n / 256, 256, 0, pt_gpu_stream>>>(y, x, n);
		return true;
	default:
		return false;
	}
}
