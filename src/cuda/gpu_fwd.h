/* gpu_fwd.h - the forward pass on a CUDA device (issue 16): the resident core (attention,
 * norms, routers, shared experts, dense MLPs, output head) and the KV cache in device
 * memory, the routed experts in a device expert store (expert/vstore.h: every expert when
 * they fit the budget, else a per-layer LFU/LRU slot cache whose misses are copied from the
 * host mapping through pinned staging on a copy stream), sampling left to the host.
 *
 * The layer is composed from the arch recipe and the loaded tensors exactly as
 * model/forward.c composes it (no arch tests).  Several tokens in one call (a prompt) go
 * through the layers in chunks of up to 256 (gpu_prefill.cu), each token's values
 * bit-identical to its decode step's (PARTICLE_GPU_PREFILL=0: one decode step each;
 * =resident: chunks only when every expert is resident).  Numerics: F32 activations and an F32 KV
 * cache (the CPU path rounds activations to the weights' partner formats), every reduction
 * in a fixed order, so logits are identical from run to run and for every VRAM budget; they
 * match the CPU path within the eval limits, not bit for bit.
 *
 * Built only with make CUDA=1. */
#ifndef PT_CUDA_GPU_FWD_H
#define PT_CUDA_GPU_FWD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "util/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pt_gpu_fwd_opts {
	int device;            /* CUDA ordinal */
	uint64_t vram;         /* budget in bytes; 0: free memory less headroom */
	uint32_t n_ctx;        /* positions (0: min(context_length, 4096)) */
	uint32_t expert_slots; /* per MoE layer; 0: planned from the budget */
	int cache_policy;      /* enum pt_cache_policy */
	FILE *log;             /* plan line (may be NULL) */
};

struct pt_gpu_fwd_stats {
	uint64_t vram_budget, resident_bytes, kv_bytes, scratch_bytes, pool_bytes;
	uint32_t slots_per_layer, n_moe_layers;
	bool all_resident;
	uint64_t hits, misses, bytes_copied; /* expert store (copies host -> device) */
	uint64_t tokens;
	double seconds;        /* in pt_gpu_fwd_eval */
	uint32_t prefill_chunk; /* tokens per prefill chunk (several tokens in one call); 0:
				 * token by token (PARTICLE_GPU_PREFILL) */
};

typedef struct pt_gpu_fwd pt_gpu_fwd;

/* Plans the device memory (refusing with the numbers when the budget cannot hold the
 * resident core, the KV cache and top-k slots per MoE layer), uploads the resident core and
 * fills the expert store.  PT_E_UNSUPPORTED for a tensor type without a device kernel. */
enum pt_status pt_gpu_fwd_create(const struct pt_model *m, const struct pt_gpu_fwd_opts *o,
				 pt_gpu_fwd **out, struct pt_error *err);
void pt_gpu_fwd_destroy(pt_gpu_fwd *g); /* NULL-safe */

/* Appends n tokens; logits [n][n_vocab] when all, else the last token's [n_vocab] (NULL: no
 * output head).  PT_E_LIMIT past n_ctx, PT_E_INVALID for a token outside the vocabulary. */
enum pt_status pt_gpu_fwd_eval(pt_gpu_fwd *g, const uint32_t *tokens, uint32_t n,
			       float *logits, bool all, struct pt_error *err);
int64_t pt_gpu_fwd_pos(const pt_gpu_fwd *g);
/* Keeps the first pos positions (pos <= the current one).  PT_E_LIMIT when a sliding layer's
 * ring has already overwritten keys that position pos still needs (the caller replays). */
enum pt_status pt_gpu_fwd_truncate(pt_gpu_fwd *g, int64_t pos, struct pt_error *err);
void pt_gpu_fwd_stats(pt_gpu_fwd *g, struct pt_gpu_fwd_stats *out);
/* "GPU NAME: resident X, KV Y, N slots/layer x L layers x B = Z, budget W" */
const char *pt_gpu_fwd_plan_line(const pt_gpu_fwd *g);

#ifdef __cplusplus
}
#endif

#endif
