/* vstore.h - the routed-expert store of a device backend (issue 16): the same per-layer slot
 * cache as the CPU store (expert/cache.h: LFU or LRU, pinning, counters), but its slots
 * live in device memory, and a miss is a copy of the expert's bytes from host memory (the
 * model's mapping) into its slot through a device interface.
 *
 * The device is two callbacks, so the bookkeeping runs and is tested without a GPU
 * (tests/unit/test_vstore.c drives it with a fake device in host memory); the CUDA backend
 * implements copy with pinned staging and cudaMemcpyAsync on a copy stream
 * (src/cuda/gpu_fwd.cu).
 *
 * Layout: one slot per (MoE layer, slot) of slot_bytes, at offset
 * (moe_index * slots_per_layer + slot) * slot_bytes of the device pool; inside a slot the
 * gate (or fused gate_up), up and down matrices at 256-byte aligned offsets.  With
 * slots_per_layer == n_expert every expert is copied in at create and stays. */
#ifndef PT_EXPERT_VSTORE_H
#define PT_EXPERT_VSTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "expert/cache.h"
#include "model/model.h"
#include "util/status.h"

struct pt_vstore_dev {
	void *ctx;
	/* Queues a copy of bytes from host src into the device pool at offset dst_off.  src
	 * stays valid (the model's mapping); the copy may finish later, but before any
	 * compute queued after pt_vstore_acquire returns reads the slot. */
	enum pt_status (*copy)(void *ctx, uint64_t dst_off, const void *src, uint64_t bytes,
			       struct pt_error *err);
};

struct pt_vstore_cfg {
	const struct pt_model *m;
	uint32_t slots_per_layer; /* top-k .. n_expert (n_expert: all resident) */
	enum pt_cache_policy policy;
	struct pt_vstore_dev dev;
};

/* One routed expert of a row: where its matrices are in the device pool. */
struct pt_vstore_entry {
	uint32_t expert;
	uint32_t rank;    /* its top-k rank in the row */
	uint64_t off[3];  /* gate (or fused gate_up), up (UINT64_MAX when fused), down */
	bool hit;
};

typedef struct pt_vstore pt_vstore;

/* Bytes of one slot for model m (the largest MoE layer's expert, matrices 256-aligned). */
uint64_t pt_vstore_slot_bytes(const struct pt_model *m);
/* MoE layers of m. */
uint32_t pt_vstore_moe_layers(const struct pt_model *m);

enum pt_status pt_vstore_create(const struct pt_vstore_cfg *cfg, pt_vstore **out,
				struct pt_error *err);
void pt_vstore_destroy(pt_vstore *v); /* NULL-safe */

/* Device pool bytes (slots * MoE layers * slot bytes). */
uint64_t pt_vstore_pool_bytes(const pt_vstore *v);
bool pt_vstore_all_resident(const pt_vstore *v);

/* The k experts ids[0..k) (distinct, one row's top-k) of model layer il: pins them, copies
 * the misses in, and writes one entry per expert, hits first (rank order), then misses
 * (rank order); *n_hit = hits.  PT_E_INVALID for a layer without experts or a bad id. */
enum pt_status pt_vstore_acquire(pt_vstore *v, uint32_t il, const int32_t *ids, uint32_t k,
				 struct pt_vstore_entry *entries, uint32_t *n_hit,
				 struct pt_error *err);
/* Unpins what the last acquire of il pinned (the compute that reads them is queued). */
void pt_vstore_release(pt_vstore *v, uint32_t il);
/* Where expert e of layer il is when present (all-resident stores: always); false when
 * absent. */
bool pt_vstore_find(pt_vstore *v, uint32_t il, uint32_t e, uint64_t off[3]);

/* Counters over all MoE layers (cache.h's, bytes_read = bytes copied to the device). */
void pt_vstore_stats(pt_vstore *v, struct pt_cache_stats *out);

#endif
