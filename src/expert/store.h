/* store.h - the expert provider: pointers to a routed expert's bytes for (layer, expert).
 *
 * Modes: mmap (the llama.cpp-like baseline: pointers into the model mapping, the kernel pages
 * on demand), or the slot cache fed by the read engine (direct / buffered), reading from the
 * GGUF (one aligned read per part) or from a matching pack (one read per expert).
 *
 * Use per layer: prefetch(layer, the token's or wave's experts) pins them and submits every
 * miss at once; then get(layer, e) for each (hits return at once, misses wait only for their
 * own read; ready() reports experts as their reads land, for compute in completion order);
 * release(layer, e) after each get; end_layer(layer) drops pins of prefetched experts never
 * fetched with get.  get without prefetch works too (one expert, one read).  A read failure
 * is sticky: every later get returns it (never wrong bytes).  Calls are serialized by a mutex;
 * returned pointers stay valid until the matching release.
 */
#ifndef PT_EXPERT_STORE_H
#define PT_EXPERT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "expert/cache.h"
#include "expert/io.h"
#include "expert/layout.h"
#include "expert/pack.h"
#include "expert/pcache.h"
#include "util/status.h"

struct pt_expert_store_config {
	const char *model_path;
	const struct pt_expert_layout *layout; /* must outlive the store */
	const struct pt_pack *pack;            /* NULL: read the GGUF slices */
	enum pt_io_mode mode;
	uint32_t slots_per_layer; /* cache modes */
	enum pt_cache_policy policy;
	const uint8_t *map_base;  /* mmap mode: the model mapping */
	uint64_t map_size;
	const uint8_t *const *map_bases; /* mmap mode, split model: each part's mapping (by
					    layout file); NULL: map_base for every file */
	uint32_t io_threads;      /* pread fallback pool */
	bool force_pread;
	const char *pack_cache_dir; /* lazy pack cache on fast disk (NULL: none) */
	uint64_t pack_cache_size;
	const char *identity;       /* model identity for the pack cache (size, mtime, ...) */
	bool pack_cache_test_crash; /* tests: crash before each commit record */
	bool no_read_ahead;       /* ignore pt_expert_store_ahead hints */
	uint32_t demand_depth;    /* a wave's demand reads in flight at most (0: as many as
				     PT_STORE_PACE_BYTES of slots, at least PT_STORE_PACE_MIN) */
	bool populate;            /* fault the slots' memory in at open (pt_expert_cache_populate)
				     rather than at each slot's first read */
	pt_io_fault_fn fault;     /* tests; read tags: moe << 32 | expert, plus
				     PT_STORE_TAG_PCACHE for reads from the pack cache */
	void *fault_ctx;
};

#define PT_STORE_PACE_BYTES (24ull << 20)
#define PT_STORE_PACE_MIN 8
#define PT_STORE_TAG_PCACHE (1ull << 62)
#define PT_STORE_TAG_AHEAD (1ull << 63) /* a read-ahead (not a read a layer waits for) */

/* One expert's parts in the layout's order (gate, up, gate_up, down, others). */
struct pt_expert_view {
	uint32_t n_parts;
	const uint8_t *part[PT_EXPERT_MAX_PARTS];
};

typedef struct pt_expert_store pt_expert_store;

enum pt_status pt_expert_store_open(const struct pt_expert_store_config *cfg,
				    pt_expert_store **out, struct pt_error *err);
void pt_expert_store_close(pt_expert_store *s); /* NULL-safe */
/* "mmap" or "12 slots/layer lfu, io_uring, O_DIRECT, pack" */
const char *pt_expert_store_describe(const pt_expert_store *s);
/* Slot size the store needs per expert for this layout/pack (for the planner). */
uint64_t pt_expert_store_slot_bytes(const struct pt_expert_layout *l, const struct pt_pack *p);

enum pt_status pt_expert_store_prefetch(pt_expert_store *s, uint32_t layer,
					const uint32_t *experts, uint32_t n, struct pt_error *err);
/* Non-blocking: an expert of the current prefetch whose bytes are ready and which ready()
 * has not reported yet (hits first).  *got false when none is ready right now. */
enum pt_status pt_expert_store_ready(pt_expert_store *s, uint32_t *expert, bool *got,
				     struct pt_error *err);
/* Blocking ready(): waits (counted as wait time) until an expert of the current prefetch is
 * ready; *got false only when every one was already reported. */
enum pt_status pt_expert_store_next(pt_expert_store *s, uint32_t *expert, bool *got,
				    struct pt_error *err);
enum pt_status pt_expert_store_get(pt_expert_store *s, uint32_t layer, uint32_t expert,
				   struct pt_expert_view *out, struct pt_error *err);
/* get, mapped to the forward pass's three matrices: gate (or the fused gate_up, then up is
 * NULL), up, down.  Parts of other kinds are not returned.  Pair with release. */
enum pt_status pt_expert_store_get_mats(pt_expert_store *s, uint32_t layer, uint32_t expert,
					const void **gate, const void **up, const void **down,
					struct pt_error *err);
/* get_mats plus the expert's bias slices (parts named blk.L.ffn_{gate,up,down}_exps.bias,
 * gpt-oss; F32), bias[0..2] = gate, up, down, NULL where the layer has none.  A slice that
 * is not 4-byte aligned in slot memory (a corrupt pack manifest) is PT_E_FORMAT. */
enum pt_status pt_expert_store_get_mats_b(pt_expert_store *s, uint32_t layer, uint32_t expert,
					  const void **gate, const void **up, const void **down,
					  const float **bias, struct pt_error *err);
void pt_expert_store_release(pt_expert_store *s, uint32_t layer, uint32_t expert);
void pt_expert_store_end_layer(pt_expert_store *s, uint32_t layer);

/* Read-ahead hint (decode's next layer, a chunk's next wave): starts reads of layer's
 * experts that are absent, into victim slots, leaving room for the layer's own acquire of n
 * experts; counted in the cache's ahead_* counters, and as misses when later used.  Ignored
 * in mmap mode, after a failure or with no_read_ahead.  A read failure is sticky like any
 * other. */
void pt_expert_store_ahead(pt_expert_store *s, uint32_t layer, const uint32_t *experts,
			   uint32_t n);

/* Never blocks: reaps the reads that have landed and sends to the disk what waited behind
 * them (read-ahead and warm-up deferred behind demand reads, a wave's paced misses).  Those
 * otherwise start only at the next prefetch / next / ready / get, which decode reaches after
 * a whole group's products: the disk sat idle in between.  A no-op when nothing waits. */
void pt_expert_store_poll(pt_expert_store *s);

/* Profile warm-up at start (expert/profile.h): reads layer's experts[0..n) (most wanted
 * first) that are absent, at most slots_per_layer - reserve of them, as read-ahead does
 * (victim slots, deferred while demand reads are in flight, so they never delay one); an
 * expert whose warm read has landed by the time it is routed to counts as a hit.  Returns
 * the reads started; 0 in mmap mode or after a failure. */
uint32_t pt_expert_store_warm(pt_expert_store *s, uint32_t layer, const uint32_t *experts,
			      uint32_t n, uint32_t reserve);

/* Prefill: reorders the union of experts a chunk needs on layer (distinct ids) into waves
 * that fit the free slots, resident experts first (pt_expert_cache_waves); prefetch, get,
 * release and end_layer each wave experts[wave_end[w-1] .. wave_end[w]) in turn.  With
 * read-ahead on and more experts than free slots, the waves take half the free slots each,
 * so that the next wave, handed to pt_expert_store_ahead while one computes, is read into
 * the other half.  mmap mode: one wave. */
enum pt_status pt_expert_store_waves(pt_expert_store *s, uint32_t layer, uint32_t *experts,
				     uint32_t n, uint32_t *wave_end, uint32_t *n_waves,
				     struct pt_error *err);

/* Slots each layer uses from now on (1 <= n <= slots_per_layer; cache modes only, else a
 * no-op): lowering n lends slots [n, ...) - their experts dropped, their memory returned to
 * the kernel - to a long prompt's chunk buffers (issue 21: the plan sizes the slots for
 * decode, and a prompt borrows what its chunk needs); raising n gives them back, empty
 * and faulted in again (pt_expert_cache_set_active).
 * Between evaluations only: every read in flight lands first and deferred read-ahead is
 * dropped.  The number in use: pt_expert_store_active_slots. */
enum pt_status pt_expert_store_set_slots(pt_expert_store *s, uint32_t n, struct pt_error *err);
uint32_t pt_expert_store_active_slots(pt_expert_store *s);

/* Reads into a slot's never-touched memory (at most one per slot; pt_io_job.cold). */
uint64_t pt_expert_store_cold_reads(const pt_expert_store *s);
/* Seconds the open spent faulting the slots in (config .populate; 0 when it did not). */
double pt_expert_store_populate_s(const pt_expert_store *s);
/* Pack-cache counters: misses served from it, entries that failed their check (read from
 * the source instead), entries written. */
void pt_expert_store_pcache_stats(const pt_expert_store *s, uint64_t *hits, uint64_t *bad,
				  uint64_t *written);

/* Wall seconds with expert reads in flight (pt_io_busy_ns); 0 in mmap mode. */
double pt_expert_store_io_busy_s(pt_expert_store *s);

/* Cache counters by MoE index (UINT32_MAX: total); zeros in mmap mode. */
void pt_expert_store_stats(pt_expert_store *s, uint32_t moe_index, struct pt_cache_stats *out);
/* Which experts of MoE layer moe_index are in memory: a READY cache slot (cache modes) or,
 * in mmap mode, every one (the mapping holds them all).  Thread-safe, like the counters. */
void pt_expert_store_resident(pt_expert_store *s, uint32_t moe_index, uint8_t *resident,
			      uint32_t n_expert);

#endif
