/* gpu.h - the CUDA backend's C interface (issue 16, first slice): device discovery, device
 * memory, and the decode kernels with a CPU scalar reference (tests/cuda/test_cuda_kern.c).
 *
 * Built only with `make CUDA=1` (the .cu files of src/cuda through nvcc, sm_90 machine code
 * plus compute_90 PTX); the default build has no src/cuda objects and includes this header
 * only under #ifdef PT_CUDA.  Every pointer named d* is device memory from pt_gpu_alloc.  Kernels run on the
 * default stream; pt_gpu_sync waits for them and reports a launch or execution error.
 *
 * Numerics.  Every kernel fixes its summation order (one warp per output row, lanes strided
 * over the elements, then a butterfly reduction), so results are bit-identical from run to
 * run and independent of the device's load.  They are NOT bit-identical to the CPU path:
 * - matvec multiplies the dequantized weight (ggml's dequantize_row_* arithmetic, exact) by
 *   the F32 activation, where the CPU first rounds the activation to its partner format
 *   (Q8_K, Q8_0, F16); the difference is that rounding, bounded by sum|w_i| * max|x| / 254
 *   per output (the test's tolerance, plus float summation slack);
 * - RMSNorm sums squares in double like the CPU; RoPE builds the same theta sequence in
 *   float but with the device's cosf/sinf (within 2 ulp); softmax sums in double; SwiGLU
 *   uses the device's expf.  The test bounds each (tests/cuda/test_cuda_kern.c). */
#ifndef PT_CUDA_GPU_H
#define PT_CUDA_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "util/status.h"

struct pt_gpu_info {
	int device;          /* ordinal */
	int n_devices;       /* devices visible to the process */
	char name[256];
	int cc_major, cc_minor;
	int n_sm;
	uint64_t total_bytes;
	uint64_t free_bytes;
	int driver_version;  /* e.g. 13000 */
	int runtime_version;
};

/* Selects device `device` and fills info.  PT_E_UNSUPPORTED with a one-line reason when no
 * driver is loaded, no device is visible, or `device` is out of range (the message names the
 * count); PT_E_IO for any other runtime failure. */
enum pt_status pt_gpu_open(int device, struct pt_gpu_info *info, struct pt_error *err);

enum pt_status pt_gpu_alloc(void **dptr, size_t bytes, struct pt_error *err);
void pt_gpu_free(void *dptr);
enum pt_status pt_gpu_upload(void *dst, const void *src, size_t bytes, struct pt_error *err);
enum pt_status pt_gpu_download(void *dst, const void *src, size_t bytes, struct pt_error *err);
/* Host-to-device copy bandwidth from pinned memory in bytes/s: the best of 4 copies of 256
 * MiB (the copy floor of an expert cache's misses). */
enum pt_status pt_gpu_h2d_bandwidth(double *bps, struct pt_error *err);
/* Waits for every queued kernel; reports the first launch or execution error. */
enum pt_status pt_gpu_sync(struct pt_error *err);

/* y[rows] = W x for W of `type` (F32 F16 Q8_0 Q4_K Q5_K Q6_K), rows of row_bytes in dw, x of
 * cols floats (a multiple of the type's block size).  PT_E_UNSUPPORTED for another type,
 * PT_E_INVALID for inconsistent shapes (checked before launch). */
enum pt_status pt_gpu_matvec(uint32_t type, uint64_t rows, uint64_t cols, size_t row_bytes,
			     const void *dw, const float *dx, float *dy, struct pt_error *err);

/* Prefill: y[t * ys + r] = W x[t * xs ..] for ntok tokens (types and shapes as
 * pt_gpu_matvec; xs >= cols, ys >= rows).  Each token's row is bit-identical to
 * pt_gpu_matvec on that token (the same per-lane order and butterfly). */
enum pt_status pt_gpu_matmul(uint32_t type, uint64_t rows, uint64_t cols, size_t row_bytes,
			     const void *dw, const float *dx, size_t xs, uint32_t ntok, float *dy,
			     size_t ys, struct pt_error *err);

/* One routed expert of a row for the batched products: its three matrices in the device
 * pool (w[1] unused when gate_up is fused) and the top-k rank whose buffers it uses. */
struct pt_gpu_xdesc {
	const uint8_t *w[3];
	int32_t rank;
	int32_t pad;
};

/* Prefill's grouped expert products (gpu_matvec.cu): for each tile i < *dn_tiles (int4
 * {expert, first, count <= 8} in dtiles, from pt_gpu_group_pairs) and each pair p of the
 * tile (dplist[first ..]): y[p * ys ..] = W_expert x[(p / xdiv) * xs ..], W_expert =
 * dtable[expert].w[which].  Each pair's row is bit-identical to pt_gpu_matvec_batch's. */
enum pt_status pt_gpu_matmul_grouped(uint32_t type, uint64_t rows, uint64_t cols,
				     size_t row_bytes, const struct pt_gpu_xdesc *dtable,
				     int which, const int32_t *dtiles, const int32_t *dn_tiles,
				     uint32_t max_tiles, const int32_t *dplist, const float *dx,
				     size_t xs, int xdiv, float *dy, size_t ys,
				     struct pt_error *err);
/* Pairs 0..n_pairs-1 (pair p chose expert dids[p]) grouped by expert into dplist and tiles
 * (at most pt_gpu_group_max_tiles of them, 4 ints each); *dn_tiles = their count.
 * n_expert <= 1024. */
#define PT_GPU_MAX_PAIRS 8192 /* a chunk's (token, rank) pairs: 256 tokens x top-32 */
void pt_gpu_group_pairs(const int32_t *dids, int n_pairs, int n_expert, int32_t *dplist,
			int32_t *dtiles, int32_t *dn_tiles);
uint32_t pt_gpu_group_max_tiles(uint32_t n_pairs, uint32_t n_expert);

/* pt_op_rmsnorm on n_rows rows of n: y = x * (1/sqrtf(mean(x^2) + eps)) * w (dw may be
 * NULL).  y may be x. */
enum pt_status pt_gpu_rmsnorm(float *dy, const float *dx, const float *dw, int n, int n_rows,
			      float eps, struct pt_error *err);

/* pt_op_rope_cache + pt_op_rope_apply in place on n_head vectors of head_dim at position
 * pos; mode 0 = adjacent pairs, 2 = NEOX (src/model/ops.h).  No frequency factors yet. */
enum pt_status pt_gpu_rope(float *dx, int n_head, int head_dim, int n_rot, int mode,
			   int64_t pos, float base, struct pt_error *err);

/* pt_op_moe_route with softmax gating and no bias, for n_tok rows of n_expert logits
 * (overwritten with the probabilities): ids[n_tok][k], weights[n_tok][k]; weights divided
 * by max(sum, PT_MOE_WEIGHT_SUM_MIN) when norm, times scale when scale is not 0 or 1.
 * n_expert <= 1024, k <= 32 and k <= n_expert. */
enum pt_status pt_gpu_moe_route(float *dlogits, int n_expert, int n_tok, int k, int norm,
				float scale, int32_t *dids, float *dweights, struct pt_error *err);

/* out[i] = silu(gate[i]) * up[i]; out may alias gate. */
enum pt_status pt_gpu_swiglu(float *dout, const float *dgate, const float *dup, int n,
			     struct pt_error *err);

#ifdef __cplusplus
}
#endif

#endif
