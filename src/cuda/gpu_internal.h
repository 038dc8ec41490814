/* gpu_internal.h - shared by the .cu files of src/cuda only (C++, nvcc). */
#ifndef PT_CUDA_GPU_INTERNAL_H
#define PT_CUDA_GPU_INTERNAL_H

#include <cuda_runtime.h>

#include "cuda/gpu.h"

/* One line "CUDA <what> failed: <message> (<name>)", PT_E_IO. */
enum pt_status pt_gpu_fail(struct pt_error *err, cudaError_t e, const char *what);
/* PT_OK, or the launch error of the kernel just queued. */
enum pt_status pt_gpu_launched(struct pt_error *err, const char *what);

/* The stream every pt_gpu_* launch goes to (0: the legacy default stream, as the kernel
 * test uses; the forward pass sets its compute stream).  One thread drives the device. */
extern cudaStream_t pt_gpu_stream;

/* ---- the decode layer's operators (gpu_layer.cu, gpu_matvec.cu, gpu_ops.cu) ---- */


/* y[rank][rows] = W_e x[rank] for each of n entries of ddesc (device memory), matrix
 * `which` (0 gate, 1 up, 2 down) of each; x rows xs floats apart (0: one shared x), y rows
 * ys floats apart.  Each row's sum is the single matvec's order for the type. */
enum pt_status pt_gpu_matvec_batch(uint32_t type, uint64_t rows, uint64_t cols,
				   size_t row_bytes, const struct pt_gpu_xdesc *ddesc,
				   uint32_t n, int which, const float *dx, size_t xs, float *dy,
				   size_t ys, struct pt_error *err);
/* route_kernel over n_tok rows of logits ld floats apart (ld >= 2 n_expert with a bias):
 * ids[n_tok][k], weights[n_tok][k]; each row as pt_gpu_route_ex computes it. */
enum pt_status pt_gpu_route_rows(float *dlogits, size_t ld, int n_tok, int n_expert, int k,
				 int gating, const float *dbias, int norm, float scale,
				 int32_t *dids, float *dweights, struct pt_error *err);
/* y[r * n + i] += b[i] for r < rows (biases over a chunk). */
void pt_gpu_add_rows(float *y, const float *b, int n, int rows);
/* pt_gpu_mul_scaled over rows rows of n (w broadcast). */
void pt_gpu_mul_scaled_rows(float *y, const float *x, float c, const float *w, int n, int rows);
/* The chunk forms of RoPE, KV store, attention and combine: n_tok tokens at positions
 * *dpos + t, token t's vectors tok_stride (RoPE) / n_head*hd (attention) floats apart; each
 * token's result is bit-identical to the one-token call at its position.  scores holds
 * n_tok times the one-token scratch. */
void pt_gpu_rope_neox_rows(float *x, int n_tok, size_t tok_stride, int n_head, int head_dim,
			   int n_rot, const int64_t *dpos, float base, const float *dff);
void pt_gpu_kv_store_rows(float *kc, float *vc, const float *k, const float *v, int nk, int nv,
			  int n_tok, const int64_t *dpos, int64_t cap);
void pt_gpu_attention_rows(const float *q, const float *kc, const float *vc, float *out,
			   float *scores, int n_tok, int n_head, int n_kv, int hd_k, int hd_v,
			   const int64_t *dpos, int64_t window, int64_t max_count, int64_t cap,
			   float scale);
void pt_gpu_combine_rows(float *out, const float *y, int n, int k, int n_tok,
			 const int32_t *ids, const float *w, const float *s);
/* pt_op_moe_route on one row: gating 0 none, 1 softmax, 2 sigmoid, 3 softmax over the
 * chosen weights; dbias (may be NULL) is added for the selection only, which then uses
 * dlogits[n_expert .. 2 n_expert) as scratch. */
enum pt_status pt_gpu_route_ex(float *dlogits, int n_expert, int k, int gating,
			       const float *dbias, int norm, float scale, int32_t *dids,
			       float *dweights, struct pt_error *err);

void pt_gpu_add(float *y, const float *x, int n);                  /* y += x */
void pt_gpu_scale_by(float *y, const float *s, int n);             /* y *= s[0] */
void pt_gpu_mul_scaled(float *y, const float *x, float c, const float *w, int n); /* (x c) w */
void pt_gpu_softcap(float *y, int n, float cap);
/* GLU over n_rows rows: out[r][i] = act(gate[r*in_stride + i]) * up[r*in_stride + i], out
 * rows nf apart; geglu: ggml's F16-table GELU, else SiLU. */
void pt_gpu_glu(float *out, const float *gate, const float *up, int nf, int n_rows,
		size_t in_stride, bool geglu);
/* pt_gpu_glu on the ranks of n entries of desc (row r = the entry's rank). */
void pt_gpu_glu_batch(float *out, const float *gate, const float *up, int nf, size_t in_stride,
		      const struct pt_gpu_xdesc *desc, int n, bool geglu);
/* y = x rounded through activation format act_type (enum pt_type: F32, F16, Q8_0, Q8_1,
 * Q8_K) as the CPU path quantizes a product's input; false for another format or a length
 * that is not a multiple of its block.  y may be x. */
bool pt_gpu_act_round(float *y, const float *x, int n, uint32_t act_type);
/* NEOX RoPE of n_head vectors at position *dpos (device memory, so one captured graph
 * serves every step) with optional frequency factors (device, n_rot/2). */
void pt_gpu_rope_neox(float *x, int n_head, int head_dim, int n_rot, const int64_t *dpos,
		      float base, const float *dff);
/* K (nk floats) and V (nv) rounded to F16 into row *dpos % cap of a layer's cache. */
void pt_gpu_kv_store(float *kc, float *vc, const float *k, const float *v, int nk, int nv,
		     const int64_t *dpos, int64_t cap);
/* One-row attention of n_head query heads at position *dpos over its keys (the last
 * `window` positions when window > 0, else all) in a layer's cache (rows cap apart in a
 * ring: position p at row p % cap; K rows n_kv*hd_k floats, V rows n_kv*hd_v); max_count:
 * the most keys any step sees (sizes the grid); scores is scratch of
 * n_head * ceil(max_count / 256) * (2 + hd_v) floats. */
void pt_gpu_attention(const float *q, const float *kc, const float *vc, float *out,
		      float *scores, int n_head, int n_kv, int hd_k, int hd_v, const int64_t *dpos,
		      int64_t window, int64_t max_count, int64_t cap, float scale);
/* Routed outputs summed in rank order: out[i] = sum_j (y[j][i] * s[ids[j]]) * w[j] (no s:
 * y * w), as forward.c's scale_row + rank-order sum. */
void pt_gpu_combine(float *out, const float *y, int n, int k, const int32_t *ids,
		    const float *w, const float *s);
/* desc[j] = table[ids[j]] with rank j, for j < k (all experts resident). */
void pt_gpu_resolve(struct pt_gpu_xdesc *desc, const struct pt_gpu_xdesc *table,
		    const int32_t *ids, int k);

#endif
