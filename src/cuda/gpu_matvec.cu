/* gpu_matvec.cu - quantized matrix-vector product for decode: y = W x.
 *
 * One warp per output row, four rows per 128-thread block.  Lane l takes elements
 * l, l + 32, l + 64, ... of the row, dequantizes each exactly as ggml's dequantize_row_*
 * does (same float operations in the same order; the block byte layouts of
 * src/quant/blocks.h, read here as bytes because that header is C11), multiplies by x and
 * accumulates in float; the 32 partial sums are then combined by a fixed butterfly.  The
 * order depends only on the row length, so results are deterministic.
 *
 * F32/F16/Q8_0 take one element per lane per step (coalesced); the K-quants take eight
 * consecutive elements of one sub-block per lane (matvec_kq_kernel).  Nothing is vectorized
 * or tuned for bandwidth yet (docs/BENCHMARKS.md section 7). */
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/gpu.h"
#include "cuda/gpu_internal.h"

/* ggml type ids (src/quant/types.h). */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q5_0 = 6, T_Q8_0 = 8, T_Q4_K = 12, T_Q5_K = 13,
       T_Q6_K = 14 };

__device__ __forceinline__ float h2f(const uint8_t *p)
{
	__half_raw r;
	r.x = (unsigned short)(p[0] | (p[1] << 8));
	return __half2float(__half(r));
}

/* The 6-bit scale and min of sub-block j of Q4_K/Q5_K (pt_get_scale_min_k4). */
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t *s, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/* Element e (0..255) of a Q4_K block: d, dmin at 0, 2; scales at 4; qs at 16. */
__device__ __forceinline__ float deq_q4_K(const uint8_t *b, int e)
{
	const int c = e >> 6, hi = (e >> 5) & 1, l = e & 31;
	int sc, m;
	scale_min_k4(2 * c + hi, b + 4, &sc, &m);
	const float d = h2f(b) * (float)sc, mn = h2f(b + 2) * (float)m;
	const uint8_t q = b[16 + 32 * c + l];
	return d * (float)(hi ? q >> 4 : q & 0xF) - mn;
}

/* Q5_K: d, dmin at 0, 2; scales at 4; qh at 16 (32 bytes); qs at 48. */
__device__ __forceinline__ float deq_q5_K(const uint8_t *b, int e)
{
	const int c = e >> 6, hi = (e >> 5) & 1, l = e & 31;
	int sc, m;
	scale_min_k4(2 * c + hi, b + 4, &sc, &m);
	const float d = h2f(b) * (float)sc, mn = h2f(b + 2) * (float)m;
	const uint8_t q = b[48 + 32 * c + l];
	const int h = (b[16 + l] >> (2 * c + hi)) & 1;
	return d * (float)((hi ? q >> 4 : q & 0xF) + (h << 4)) - mn;
}

/* Q6_K: ql at 0 (128), qh at 128 (64), int8 scales at 192 (16), d at 208. */
__device__ __forceinline__ float deq_q6_K(const uint8_t *b, int e)
{
	const int h = e >> 7, g = (e >> 5) & 3, l = e & 31;
	const uint8_t ql = b[64 * h + l + 32 * (g & 1)];
	const int lo = g >= 2 ? ql >> 4 : ql & 0xF;
	const int hb = (b[128 + 32 * h + l] >> (2 * g)) & 3;
	const int q = (lo | (hb << 4)) - 32;
	const int8_t sc = (int8_t)b[192 + 8 * h + (l >> 4) + 2 * g];
	return h2f(b + 208) * (float)sc * (float)q;
}

template <int T>
__device__ __forceinline__ float deq(const uint8_t *row, uint32_t e)
{
	if (T == T_F32)
		return ((const float *)row)[e];
	if (T == T_F16)
		return h2f(row + 2 * (size_t)e);
	if (T == T_Q8_0) {
		const uint8_t *b = row + 34 * (size_t)(e >> 5);
		return (float)(int8_t)b[2 + (e & 31)] * h2f(b);
	}
	if (T == T_Q4_0) { /* d, then 16 bytes: element j low nibble, j + 16 high (minus 8) */
		const uint8_t *b = row + 18 * (size_t)(e >> 5);
		const int j = e & 31;
		const int q = (j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4) - 8;
		return (float)q * h2f(b);
	}
	if (T == T_Q5_0) { /* d, 32 high bits, 16 bytes of low nibbles (minus 16) */
		const uint8_t *b = row + 22 * (size_t)(e >> 5);
		const int j = e & 31;
		const uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | ((uint32_t)b[5] << 24);
		const int q = ((j < 16 ? b[6 + j] & 0xF : b[6 + j - 16] >> 4) |
			       (int)(((qh >> j) & 1) << 4)) - 16;
		return (float)q * h2f(b);
	}
	if (T == T_Q4_K)
		return deq_q4_K(row + 144 * (size_t)(e >> 8), e & 255);
	if (T == T_Q5_K)
		return deq_q5_K(row + 176 * (size_t)(e >> 8), e & 255);
	return deq_q6_K(row + 210 * (size_t)(e >> 8), e & 255);
}

template <int T>
__global__ void __launch_bounds__(128) matvec_kernel(const uint8_t *__restrict__ w,
						     size_t row_bytes, uint32_t rows, uint32_t cols,
						     const float *__restrict__ x,
						     float *__restrict__ y)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const uint8_t *row = w + (size_t)r * row_bytes;
	float acc = 0.0f;
	for (uint32_t e = lane; e < cols; e += 32)
		acc = fmaf(deq<T>(row, e), x[e], acc);
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[r] = acc;
}

/* K-quant rows (256-element super-blocks): lane l decodes elements 8l..8l+7 of each block,
 * which share one sub-block scale, so the scales are unpacked once per lane and block
 * instead of once per element.  Each value is still ggml's dequantized float; the lane sums
 * its 8 products in order, block after block (cols/32 fused steps per lane, as in the
 * per-element kernel), then the same butterfly. */
template <int T>
__device__ __forceinline__ void deq8(const uint8_t *b, int lane, float v[8])
{
	const int e0 = 8 * lane;
	if (T == T_Q4_K || T == T_Q5_K) {
		const int c = e0 >> 6, hi = (e0 >> 5) & 1, l0 = e0 & 31;
		int sc, m;
		scale_min_k4(2 * c + hi, b + 4, &sc, &m);
		const float d = h2f(b) * (float)sc, mn = h2f(b + 2) * (float)m;
		const uint8_t *q = b + (T == T_Q4_K ? 16 : 48) + 32 * c + l0;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			int n = hi ? q[i] >> 4 : q[i] & 0xF;
			if (T == T_Q5_K)
				n += ((b[16 + l0 + i] >> (2 * c + hi)) & 1) << 4;
			v[i] = d * (float)n - mn;
		}
	} else { /* Q6_K */
		const int h = e0 >> 7, g = (e0 >> 5) & 3, l0 = e0 & 31;
		const uint8_t *ql = b + 64 * h + l0 + 32 * (g & 1), *qh = b + 128 + 32 * h + l0;
		const float d = h2f(b + 208) * (float)(int8_t)b[192 + 8 * h + (l0 >> 4) + 2 * g];
#pragma unroll
		for (int i = 0; i < 8; i++) {
			const int lo = g >= 2 ? ql[i] >> 4 : ql[i] & 0xF;
			const int q = (lo | (((qh[i] >> (2 * g)) & 3) << 4)) - 32;
			v[i] = d * (float)q;
		}
	}
}

/* Q4_K with wide loads (rows 8-byte aligned, x 16-byte aligned: checked at launch): lane l
 * reads its 8 quant bytes as one 8-byte load and its 8 activations as two 16-byte loads, and
 * two super-blocks are decoded before their products are summed so more loads are in
 * flight.  Same values, same per-lane summation order as matvec_kq_kernel<T_Q4_K>. */
__device__ __forceinline__ float q4_K_wide_row(const uint8_t *__restrict__ row, uint32_t cols,
						const float *__restrict__ x, int lane)
{
	const int e0 = 8 * lane, c = e0 >> 6, hi = (e0 >> 5) & 1, l0 = e0 & 31;
	const uint32_t nb = cols / 256;
	float acc = 0.0f;
	for (uint32_t blk = 0; blk < nb; blk += 2) {
		float v[2][8];
		const int nblk = blk + 1 < nb ? 2 : 1;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			if (k >= nblk)
				break;
			const uint8_t *b = row + (size_t)(blk + k) * 144;
			int sc, m;
			scale_min_k4(2 * c + hi, b + 4, &sc, &m);
			const float d = h2f(b) * (float)sc, mn = h2f(b + 2) * (float)m;
			const uint2 qq = *(const uint2 *)(b + 16 + 32 * c + l0);
#pragma unroll
			for (int i = 0; i < 8; i++) {
				const uint32_t word = i < 4 ? qq.x : qq.y;
				const uint32_t byte = (word >> (8 * (i & 3))) & 0xFF;
				v[k][i] = d * (float)(hi ? byte >> 4 : byte & 0xF) - mn;
			}
		}
#pragma unroll
		for (int k = 0; k < 2; k++) {
			if (k >= nblk)
				break;
			const float4 *xb = (const float4 *)(x + (size_t)(blk + k) * 256 + e0);
			const float4 x0 = xb[0], x1 = xb[1];
			acc = fmaf(v[k][0], x0.x, acc);
			acc = fmaf(v[k][1], x0.y, acc);
			acc = fmaf(v[k][2], x0.z, acc);
			acc = fmaf(v[k][3], x0.w, acc);
			acc = fmaf(v[k][4], x1.x, acc);
			acc = fmaf(v[k][5], x1.y, acc);
			acc = fmaf(v[k][6], x1.z, acc);
			acc = fmaf(v[k][7], x1.w, acc);
		}
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	return acc;
}

__global__ void __launch_bounds__(128) matvec_q4_K_wide(const uint8_t *__restrict__ w,
							size_t row_bytes, uint32_t rows,
							uint32_t cols, const float *__restrict__ x,
							float *__restrict__ y)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const float acc = q4_K_wide_row(w + (size_t)r * row_bytes, cols, x, lane);
	if (lane == 0)
		y[r] = acc;
}

/* Q6_K rows with the activations as 16-byte loads and two super-blocks decoded before their
 * products (deq8's values, matvec_kq_kernel's per-lane order); x 16-byte aligned. */
__device__ __forceinline__ float q6_K_wide_row(const uint8_t *__restrict__ row, uint32_t cols,
						const float *__restrict__ x, int lane)
{
	const int e0 = 8 * lane;
	const uint32_t nb = cols / 256;
	float acc = 0.0f;
	for (uint32_t blk = 0; blk < nb; blk += 2) {
		float v[2][8];
		const int nblk = blk + 1 < nb ? 2 : 1;
#pragma unroll
		for (int k = 0; k < 2; k++)
			if (k < nblk)
				deq8<T_Q6_K>(row + (size_t)(blk + k) * 210, lane, v[k]);
#pragma unroll
		for (int k = 0; k < 2; k++) {
			if (k >= nblk)
				break;
			const float4 *xb = (const float4 *)(x + (size_t)(blk + k) * 256 + e0);
			const float4 x0 = xb[0], x1 = xb[1];
			acc = fmaf(v[k][0], x0.x, acc);
			acc = fmaf(v[k][1], x0.y, acc);
			acc = fmaf(v[k][2], x0.z, acc);
			acc = fmaf(v[k][3], x0.w, acc);
			acc = fmaf(v[k][4], x1.x, acc);
			acc = fmaf(v[k][5], x1.y, acc);
			acc = fmaf(v[k][6], x1.z, acc);
			acc = fmaf(v[k][7], x1.w, acc);
		}
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	return acc;
}

__global__ void __launch_bounds__(128) matvec_q6_K_wide(const uint8_t *__restrict__ w,
							size_t row_bytes, uint32_t rows,
							uint32_t cols, const float *__restrict__ x,
							float *__restrict__ y)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const float acc = q6_K_wide_row(w + (size_t)r * row_bytes, cols, x, lane);
	if (lane == 0)
		y[r] = acc;
}

__global__ void __launch_bounds__(128) matvec_batch_q6_K_wide(const struct pt_gpu_xdesc *desc,
							      int which, size_t row_bytes,
							      uint32_t rows, uint32_t cols,
							      const float *__restrict__ x,
							      size_t xs, float *__restrict__ y,
							      size_t ys)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const struct pt_gpu_xdesc d = desc[blockIdx.y];
	const float acc = q6_K_wide_row(d.w[which] + (size_t)r * row_bytes, cols,
					x + (size_t)d.rank * xs, lane);
	if (lane == 0)
		y[(size_t)d.rank * ys + r] = acc;
}

/* The batched form of matvec_q4_K_wide (same values, same order as matvec_batch_kernel's
 * Q4_K rows): expert slots are 256-byte aligned in the pool. */
__global__ void __launch_bounds__(128) matvec_batch_q4_K_wide(const struct pt_gpu_xdesc *desc,
							      int which, size_t row_bytes,
							      uint32_t rows, uint32_t cols,
							      const float *__restrict__ x,
							      size_t xs, float *__restrict__ y,
							      size_t ys)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const struct pt_gpu_xdesc d = desc[blockIdx.y];
	const float acc = q4_K_wide_row(d.w[which] + (size_t)r * row_bytes, cols,
					x + (size_t)d.rank * xs, lane);
	if (lane == 0)
		y[(size_t)d.rank * ys + r] = acc;
}

template <int T>
__global__ void __launch_bounds__(128) matvec_kq_kernel(const uint8_t *__restrict__ w,
							size_t row_bytes, uint32_t rows,
							uint32_t cols, const float *__restrict__ x,
							float *__restrict__ y)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const uint32_t bytes = T == T_Q4_K ? 144 : T == T_Q5_K ? 176 : 210;
	const uint8_t *row = w + (size_t)r * row_bytes;
	float acc = 0.0f;
	for (uint32_t blk = 0; blk < cols / 256; blk++) {
		float v[8];
		deq8<T>(row + (size_t)blk * bytes, lane, v);
		const float *xb = x + (size_t)blk * 256 + 8 * lane;
#pragma unroll
		for (int i = 0; i < 8; i++)
			acc = fmaf(v[i], xb[i], acc);
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[r] = acc;
}

extern "C" enum pt_status pt_gpu_matvec(uint32_t type, uint64_t rows, uint64_t cols,
					size_t row_bytes, const void *dw, const float *dx,
					float *dy, struct pt_error *err)
{
	uint32_t blk, bytes;
	switch (type) {
	case T_F32: blk = 1, bytes = 4; break;
	case T_F16: blk = 1, bytes = 2; break;
	case T_Q8_0: blk = 32, bytes = 34; break;
	case T_Q4_0: blk = 32, bytes = 18; break;
	case T_Q5_0: blk = 32, bytes = 22; break;
	case T_Q4_K: blk = 256, bytes = 144; break;
	case T_Q5_K: blk = 256, bytes = 176; break;
	case T_Q6_K: blk = 256, bytes = 210; break;
	default:
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA matvec: no kernel for type %u",
				    type);
	}
	if (rows == 0 || cols == 0 || rows > (1u << 30) || cols > (1u << 30) || cols % blk ||
	    row_bytes < cols / blk * bytes)
		return pt_error_set(err, PT_E_INVALID,
				    "CUDA matvec: bad shape %llu x %llu (row bytes %zu)",
				    (unsigned long long)rows, (unsigned long long)cols, row_bytes);
	const dim3 grid((unsigned)((rows + 3) / 4)), block(128);
	const uint8_t *w = (const uint8_t *)dw;
	const uint32_t R = (uint32_t)rows, C = (uint32_t)cols;
	switch (type) {
	case T_F32: matvec_kernel<T_F32><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	case T_F16: matvec_kernel<T_F16><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	case T_Q8_0: matvec_kernel<T_Q8_0><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	case T_Q4_0: matvec_kernel<T_Q4_0><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	case T_Q5_0: matvec_kernel<T_Q5_0><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	case T_Q4_K:
		if ((((uintptr_t)w | row_bytes) & 7) == 0 && ((uintptr_t)dx & 15) == 0)
			matvec_q4_K_wide<<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy);
		else
			matvec_kq_kernel<T_Q4_K><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy);
		break;
	case T_Q5_K: matvec_kq_kernel<T_Q5_K><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy); break;
	default:
		if (((uintptr_t)dx & 15) == 0)
			matvec_q6_K_wide<<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy);
		else
			matvec_kq_kernel<T_Q6_K><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, dy);
		break;
	}
	return pt_gpu_launched(err, "matvec launch");
}

/* ---- batched expert products (decode): grid.y = entry, the entry's matrix and rank from a
 * device descriptor; each row's sum is the single-matrix kernel's (matvec_kernel for
 * F32/F16/Q8_0, matvec_kq_kernel for the K-quants), so an expert's output does not depend on
 * how its row's experts were grouped into launches. ---- */
template <int T>
__global__ void __launch_bounds__(128) matvec_batch_kernel(const struct pt_gpu_xdesc *desc,
							   int which, size_t row_bytes,
							   uint32_t rows, uint32_t cols,
							   const float *__restrict__ x, size_t xs,
							   float *__restrict__ y, size_t ys)
{
	const uint32_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (r >= rows)
		return;
	const struct pt_gpu_xdesc d = desc[blockIdx.y];
	const uint8_t *row = d.w[which] + (size_t)r * row_bytes;
	const float *xr = x + (size_t)d.rank * xs;
	float acc = 0.0f;
	if (T == T_Q4_K || T == T_Q5_K || T == T_Q6_K) {
		const uint32_t bytes = T == T_Q4_K ? 144 : T == T_Q5_K ? 176 : 210;
		for (uint32_t blk = 0; blk < cols / 256; blk++) {
			float v[8];
			deq8<T>(row + (size_t)blk * bytes, lane, v);
			const float *xb = xr + (size_t)blk * 256 + 8 * lane;
#pragma unroll
			for (int i = 0; i < 8; i++)
				acc = fmaf(v[i], xb[i], acc);
		}
	} else {
		for (uint32_t e = lane; e < cols; e += 32)
			acc = fmaf(deq<T>(row, e), xr[e], acc);
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[(size_t)d.rank * ys + r] = acc;
}

enum pt_status pt_gpu_matvec_batch(uint32_t type, uint64_t rows, uint64_t cols,
				   size_t row_bytes, const struct pt_gpu_xdesc *ddesc,
				   uint32_t n, int which, const float *dx, size_t xs, float *dy,
				   size_t ys, struct pt_error *err)
{
	if (n == 0)
		return PT_OK;
	uint32_t blk;
	switch (type) {
	case T_F32: case T_F16: blk = 1; break;
	case T_Q8_0: case T_Q4_0: case T_Q5_0: blk = 32; break;
	case T_Q4_K: case T_Q5_K: case T_Q6_K: blk = 256; break;
	default:
		return pt_error_set(err, PT_E_UNSUPPORTED, "CUDA matvec: no kernel for type %u",
				    type);
	}
	if (rows == 0 || cols == 0 || rows > (1u << 30) || cols > (1u << 30) || cols % blk ||
	    n > 65535 || which < 0 || which > 2)
		return pt_error_set(err, PT_E_INVALID, "CUDA batched matvec: bad shape %llu x %llu",
				    (unsigned long long)rows, (unsigned long long)cols);
	const dim3 grid((unsigned)((rows + 3) / 4), n), block(128);
	const uint32_t R = (uint32_t)rows, C = (uint32_t)cols;
#define PT_MVB(T) matvec_batch_kernel<T><<<grid, block, 0, pt_gpu_stream>>>(ddesc, which, \
		row_bytes, R, C, dx, xs, dy, ys)
	switch (type) {
	case T_F32: PT_MVB(T_F32); break;
	case T_F16: PT_MVB(T_F16); break;
	case T_Q8_0: PT_MVB(T_Q8_0); break;
	case T_Q4_0: PT_MVB(T_Q4_0); break;
	case T_Q5_0: PT_MVB(T_Q5_0); break;
	case T_Q4_K:
		if (((row_bytes | (xs * 4)) & 7) == 0 && (xs * 4) % 16 == 0 &&
		    ((uintptr_t)dx & 15) == 0)
			matvec_batch_q4_K_wide<<<grid, block, 0, pt_gpu_stream>>>(ddesc, which, row_bytes,
										  R, C, dx, xs, dy, ys);
		else
			PT_MVB(T_Q4_K);
		break;
	case T_Q5_K: PT_MVB(T_Q5_K); break;
	default:
		if ((xs * 4) % 16 == 0 && ((uintptr_t)dx & 15) == 0)
			matvec_batch_q6_K_wide<<<grid, block, 0, pt_gpu_stream>>>(ddesc, which, row_bytes,
										  R, C, dx, xs, dy, ys);
		else
			PT_MVB(T_Q6_K);
		break;
	}
#undef PT_MVB
	return pt_gpu_launched(err, "batched matvec launch");
}

/* ---- prefill: matrix-matrix products over a chunk of tokens (issue 16).  One warp per
 * MM_R output rows and MM_NT tokens (a register tile: each weight element, or K-quant group
 * of 8, decoded once for the MM_NT tokens, each activation load used for the MM_R rows).
 * Per (row, token), a lane makes exactly the fmaf sequence of the decode kernels
 * (matvec_kernel for F32/F16/Q4_0/Q5_0/Q8_0, matvec_kq_kernel and its wide forms for the
 * K-quants) and the warp the same butterfly, so a token's row of a chunk is bit-identical
 * to its decode step's: prefill and decode, and every VRAM budget, give the same logits. ---- */
#define MM_NT 8
#define MM_R 4

template <int T>
__device__ __forceinline__ void mm_tile(const uint8_t *const wr[MM_R], int nr, uint32_t cols,
					const float *const xt[MM_NT], int nt, int lane,
					float acc[MM_R][MM_NT])
{
#pragma unroll
	for (int r = 0; r < MM_R; r++)
#pragma unroll
		for (int t = 0; t < MM_NT; t++)
			acc[r][t] = 0.0f;
	if (T == T_Q4_K || T == T_Q5_K || T == T_Q6_K) {
		const uint32_t bytes = T == T_Q4_K ? 144 : T == T_Q5_K ? 176 : 210;
		for (uint32_t blk = 0; blk < cols / 256; blk++) {
			float v[MM_R][8];
#pragma unroll
			for (int r = 0; r < MM_R; r++) /* rows past nr repeat a valid one, unused */
				deq8<T>(wr[r] + (size_t)blk * bytes, lane, v[r]);
			const size_t o = (size_t)blk * 256 + 8 * lane;
#pragma unroll
			for (int t = 0; t < MM_NT; t++) {
				if (t >= nt)
					break;
				float xb[8];
#pragma unroll
				for (int i = 0; i < 8; i++)
					xb[i] = xt[t][o + i];
#pragma unroll
				for (int r = 0; r < MM_R; r++) {
					if (r >= nr)
						break;
#pragma unroll
					for (int i = 0; i < 8; i++)
						acc[r][t] = fmaf(v[r][i], xb[i], acc[r][t]);
				}
			}
		}
	} else {
		for (uint32_t e = lane; e < cols; e += 32) {
			float w[MM_R];
#pragma unroll
			for (int r = 0; r < MM_R; r++)
				w[r] = deq<T>(wr[r], e);
#pragma unroll
			for (int t = 0; t < MM_NT; t++) {
				if (t >= nt)
					break;
				const float xv = xt[t][e];
#pragma unroll
				for (int r = 0; r < MM_R; r++)
					acc[r][t] = fmaf(w[r], xv, acc[r][t]);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < MM_R; r++)
#pragma unroll
		for (int t = 0; t < MM_NT; t++)
			for (int o = 16; o > 0; o >>= 1)
				acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], o);
}

/* y[t * ys + r] = W x[t * xs ..] for t < ntok: grid (rows / (4 MM_R), ntok / MM_NT). */
template <int T>
__global__ void __launch_bounds__(128) matmul_kernel(const uint8_t *__restrict__ w,
						     size_t row_bytes, uint32_t rows, uint32_t cols,
						     const float *__restrict__ x, size_t xs,
						     uint32_t ntok, float *__restrict__ y, size_t ys)
{
	const uint32_t r0 = (blockIdx.x * 4 + (threadIdx.x >> 5)) * MM_R;
	const int lane = threadIdx.x & 31;
	const uint32_t t0 = blockIdx.y * MM_NT;
	if (r0 >= rows || t0 >= ntok)
		return;
	const int nt = ntok - t0 < MM_NT ? (int)(ntok - t0) : MM_NT;
	const int nr = rows - r0 < MM_R ? (int)(rows - r0) : MM_R;
	const float *xt[MM_NT];
	const uint8_t *wr[MM_R];
#pragma unroll
	for (int t = 0; t < MM_NT; t++)
		xt[t] = x + (size_t)(t0 + (t < nt ? t : 0)) * xs;
#pragma unroll
	for (int r = 0; r < MM_R; r++)
		wr[r] = w + (size_t)(r0 + (r < nr ? r : 0)) * row_bytes;
	float acc[MM_R][MM_NT];
	mm_tile<T>(wr, nr, cols, xt, nt, lane, acc);
	if (lane == 0) {
#pragma unroll
		for (int r = 0; r < MM_R; r++)
#pragma unroll
			for (int t = 0; t < MM_NT; t++)
				if (r < nr && t < nt)
					y[(size_t)(t0 + t) * ys + r0 + r] = acc[r][t];
	}
}

/* Grouped expert products: tile i (i < *n_tiles) = { expert, first, count (<= MM_NT) } of
 * the pair list plist (pairs sorted by expert); pair p's input row is x + (p / xdiv) * xs,
 * its output row y + p * ys; the weights are table[expert].w[which]. */
template <int T>
__global__ void __launch_bounds__(128) matmul_grouped_kernel(const struct pt_gpu_xdesc *table,
							     int which, size_t row_bytes,
							     uint32_t rows, uint32_t cols,
							     const int4 *tiles,
							     const int32_t *n_tiles,
							     const int32_t *plist,
							     const float *__restrict__ x,
							     size_t xs, int xdiv,
							     float *__restrict__ y, size_t ys)
{
	const uint32_t r0 = (blockIdx.x * 4 + (threadIdx.x >> 5)) * MM_R;
	const int lane = threadIdx.x & 31;
	if (r0 >= rows || (int)blockIdx.y >= *n_tiles)
		return;
	const int4 tl = tiles[blockIdx.y];
	const int nt = tl.z;
	const int nr = rows - r0 < MM_R ? (int)(rows - r0) : MM_R;
	int pr[MM_NT];
	const float *xt[MM_NT];
	const uint8_t *wr[MM_R];
#pragma unroll
	for (int t = 0; t < MM_NT; t++) {
		pr[t] = plist[tl.y + (t < nt ? t : 0)];
		xt[t] = x + (size_t)(pr[t] / xdiv) * xs;
	}
	const uint8_t *w = table[tl.x].w[which];
#pragma unroll
	for (int r = 0; r < MM_R; r++)
		wr[r] = w + (size_t)(r0 + (r < nr ? r : 0)) * row_bytes;
	float acc[MM_R][MM_NT];
	mm_tile<T>(wr, nr, cols, xt, nt, lane, acc);
	if (lane == 0) {
#pragma unroll
		for (int r = 0; r < MM_R; r++)
#pragma unroll
			for (int t = 0; t < MM_NT; t++)
				if (r < nr && t < nt)
					y[(size_t)pr[t] * ys + r0 + r] = acc[r][t];
	}
}

static bool mm_shape(uint32_t type, uint64_t rows, uint64_t cols, uint32_t *blk)
{
	switch (type) {
	case T_F32: case T_F16: *blk = 1; break;
	case T_Q8_0: case T_Q4_0: case T_Q5_0: *blk = 32; break;
	case T_Q4_K: case T_Q5_K: case T_Q6_K: *blk = 256; break;
	default: return false;
	}
	return rows > 0 && cols > 0 && rows <= (1u << 30) && cols <= (1u << 30) && cols % *blk == 0;
}

extern "C" enum pt_status pt_gpu_matmul(uint32_t type, uint64_t rows, uint64_t cols,
					size_t row_bytes, const void *dw, const float *dx,
					size_t xs, uint32_t ntok, float *dy, size_t ys,
					struct pt_error *err)
{
	uint32_t blk;
	if (ntok == 0)
		return PT_OK;
	if (!mm_shape(type, rows, cols, &blk) || xs < cols || ys < rows ||
	    (ntok + MM_NT - 1) / MM_NT > 65535)
		return pt_error_set(err, PT_E_INVALID, "CUDA matmul: bad shape %llu x %llu, type "
				    "%u, %u tokens", (unsigned long long)rows,
				    (unsigned long long)cols, type, ntok);
	const dim3 grid((unsigned)((rows + 4 * MM_R - 1) / (4 * MM_R)), (ntok + MM_NT - 1) / MM_NT),
		block(128);
	const uint8_t *w = (const uint8_t *)dw;
	const uint32_t R = (uint32_t)rows, C = (uint32_t)cols;
#define PT_MM(T) matmul_kernel<T><<<grid, block, 0, pt_gpu_stream>>>(w, row_bytes, R, C, dx, \
		xs, ntok, dy, ys)
	switch (type) {
	case T_F32: PT_MM(T_F32); break;
	case T_F16: PT_MM(T_F16); break;
	case T_Q8_0: PT_MM(T_Q8_0); break;
	case T_Q4_0: PT_MM(T_Q4_0); break;
	case T_Q5_0: PT_MM(T_Q5_0); break;
	case T_Q4_K: PT_MM(T_Q4_K); break;
	case T_Q5_K: PT_MM(T_Q5_K); break;
	default: PT_MM(T_Q6_K); break;
	}
#undef PT_MM
	return pt_gpu_launched(err, "matmul launch");
}

enum pt_status pt_gpu_matmul_grouped(uint32_t type, uint64_t rows, uint64_t cols,
				     size_t row_bytes, const struct pt_gpu_xdesc *dtable,
				     int which, const int32_t *dtiles, const int32_t *dn_tiles,
				     uint32_t max_tiles, const int32_t *dplist, const float *dx,
				     size_t xs, int xdiv, float *dy, size_t ys,
				     struct pt_error *err)
{
	uint32_t blk;
	if (max_tiles == 0)
		return PT_OK;
	if (!mm_shape(type, rows, cols, &blk) || max_tiles > 65535 || which < 0 || which > 2 ||
	    xdiv < 1)
		return pt_error_set(err, PT_E_INVALID, "CUDA grouped matmul: bad shape %llu x %llu",
				    (unsigned long long)rows, (unsigned long long)cols);
	const dim3 grid((unsigned)((rows + 4 * MM_R - 1) / (4 * MM_R)), max_tiles), block(128);
	const uint32_t R = (uint32_t)rows, C = (uint32_t)cols;
	const int4 *tl = (const int4 *)dtiles;
#define PT_MMG(T) matmul_grouped_kernel<T><<<grid, block, 0, pt_gpu_stream>>>(dtable, which, \
		row_bytes, R, C, tl, dn_tiles, dplist, dx, xs, xdiv, dy, ys)
	switch (type) {
	case T_F32: PT_MMG(T_F32); break;
	case T_F16: PT_MMG(T_F16); break;
	case T_Q8_0: PT_MMG(T_Q8_0); break;
	case T_Q4_0: PT_MMG(T_Q4_0); break;
	case T_Q5_0: PT_MMG(T_Q5_0); break;
	case T_Q4_K: PT_MMG(T_Q4_K); break;
	case T_Q5_K: PT_MMG(T_Q5_K); break;
	default: PT_MMG(T_Q6_K); break;
	}
#undef PT_MMG
	return pt_gpu_launched(err, "grouped matmul launch");
}

/* The pairs (token, rank) of a chunk grouped by expert, one block of n_expert threads:
 * thread e lists its pairs in pair order (so the grouping is deterministic), the lists are
 * laid out by expert, and each list is cut into tiles of at most MM_NT pairs. */
__global__ void group_pairs_kernel(const int32_t *ids, int n_pairs, int n_expert,
				   int32_t *plist, int4 *tiles, int32_t *n_tiles)
{
	__shared__ int cnt[1024], off[1024], toff[1024];
	__shared__ int16_t sid[PT_GPU_MAX_PAIRS];
	const int e = threadIdx.x;
	for (int p = e; p < n_pairs; p += blockDim.x)
		sid[p] = (int16_t)ids[p];
	__syncthreads();
	int c = 0;
	if (e < n_expert)
		for (int p = 0; p < n_pairs; p++)
			c += sid[p] == e;
	cnt[e] = c;
	__syncthreads();
	if (e == 0) {
		int a = 0, b = 0;
		for (int i = 0; i < n_expert; i++) {
			off[i] = a;
			toff[i] = b;
			a += cnt[i];
			b += (cnt[i] + MM_NT - 1) / MM_NT;
		}
		*n_tiles = b;
	}
	__syncthreads();
	if (e >= n_expert || c == 0)
		return;
	int at = off[e];
	for (int p = 0; p < n_pairs; p++)
		if (sid[p] == e)
			plist[at++] = p;
	for (int i = 0, t = toff[e]; i < c; i += MM_NT, t++)
		tiles[t] = make_int4(e, off[e] + i, c - i < MM_NT ? c - i : MM_NT, 0);
}

void pt_gpu_group_pairs(const int32_t *dids, int n_pairs, int n_expert, int32_t *dplist,
			int32_t *dtiles, int32_t *dn_tiles)
{
	if (n_pairs <= 0 || n_pairs > PT_GPU_MAX_PAIRS || n_expert <= 0 || n_expert > 1024)
		return; /* the callers' shapes: a chunk of <= 256 tokens, top-k <= 32 */
	group_pairs_kernel<<<1, 1024, 0, pt_gpu_stream>>>(dids, n_pairs, n_expert, dplist,
							   (int4 *)dtiles, dn_tiles);
}

uint32_t pt_gpu_group_max_tiles(uint32_t n_pairs, uint32_t n_expert)
{
	return (n_pairs + MM_NT - 1) / MM_NT + (n_pairs < n_expert ? n_pairs : n_expert);
}
