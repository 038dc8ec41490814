/* cache.h - the routed-expert slot pool and its per-layer replacement state.
 *
 * One pool, mapped once at start (4 KiB aligned, so O_DIRECT can read straight into a slot),
 * holds slots_per_layer fixed slots for each MoE layer.  Per layer the cache maps expert ->
 * slot and evicts by LFU over the whole run (use counts of every request, hits included,
 * never decayed) with an LRU tie-break, or plain LRU.  Experts the current token or prefill
 * wave uses are pinned between acquire and release and are never victims.  A slot becomes a
 * hit only after publish(ok) -- a failed read leaves it empty.  No allocation after create.
 *
 * Threads: acquire/release/waves are called by one orchestrating thread; publish and the
 * counters may be called from I/O completion threads; slot memory is written only by the read
 * that owns a LOADING slot and read by compute only after publish.  One mutex guards the
 * metadata (PRIOR-ART-TURBOFIELDFARE.md 2.2 semantics).
 */
#ifndef PT_EXPERT_CACHE_H
#define PT_EXPERT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/status.h"

enum pt_cache_policy { PT_CACHE_LFU = 0, PT_CACHE_LRU = 1 };

/* "lfu" or "lru"; PT_E_INVALID otherwise. */
enum pt_status pt_cache_policy_parse(const char *text, enum pt_cache_policy *out,
				     struct pt_error *err);
const char *pt_cache_policy_name(enum pt_cache_policy p);

struct pt_cache_config {
	uint32_t n_layers;        /* MoE layers (cache-local numbering 0..n_layers-1) */
	uint32_t n_expert;
	uint32_t slots_per_layer; /* >= 1 */
	uint64_t slot_bytes;      /* rounded up to 4096 by create */
	enum pt_cache_policy policy;
};

struct pt_cache_stats {
	uint64_t requests; /* hits + misses */
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint64_t read_errors;
	uint64_t bytes_read;
	uint64_t read_ns; /* sum of per-read latencies (submit -> completion) */
	uint64_t wait_ns; /* time the caller blocked waiting for reads */
	uint32_t slots_used;
	uint64_t ahead_reads;  /* reads started by acquire_ahead */
	uint64_t ahead_used;   /* ... later acquired (counted as misses: read for them) */
	uint64_t ahead_wasted; /* ... evicted before any acquire */
	uint64_t ahead_dropped; /* guesses dropped unread (their layer came, they were wrong) */
};

/* One requested expert after acquire. */
struct pt_cache_ref {
	uint32_t expert;
	uint32_t slot;
	bool hit; /* false: the caller must read the expert into the slot, then publish */
};

typedef struct pt_expert_cache pt_expert_cache;

enum pt_status pt_expert_cache_create(const struct pt_cache_config *cfg, pt_expert_cache **out,
				      struct pt_error *err);
void pt_expert_cache_destroy(pt_expert_cache *c); /* NULL-safe */

uint64_t pt_expert_cache_slot_bytes(const pt_expert_cache *c);
uint32_t pt_expert_cache_slots(const pt_expert_cache *c);
/* Slots each layer uses now (pt_expert_cache_set_active; at first every slot). */
uint32_t pt_expert_cache_active(pt_expert_cache *c);
/* Each layer uses slots [0, n) from now on, 1 <= n <= slots_per_layer.  Lowering n drops the
 * experts of slots [n, old n) and returns their memory to the kernel (MADV_DONTNEED): the
 * slots are lent, e.g. to a long prompt's chunk buffers; raising n gives them back empty,
 * their memory faulted in again at once (MADV_POPULATE_WRITE; *populated, which may be NULL,
 * says whether the kernel did).  PT_E_BUSY (nothing changed) when a slot to lend is pinned
 * or loading; PT_E_INVALID for n out of range. */
enum pt_status pt_expert_cache_set_active(pt_expert_cache *c, uint32_t n, bool *populated,
					  struct pt_error *err);
/* Faults in the memory of every active slot now (MADV_POPULATE_WRITE), so that no read
 * lands in untouched memory later: a fresh page is zeroed by the kernel on first touch, and
 * a read into one goes through a kernel worker competing with the compute threads.
 * *populated false when the kernel cannot (before Linux 5.14; the slots then fault in as
 * they are first read).  Touches nothing the plan did not count: the pool is the plan's. */
void pt_expert_cache_populate(pt_expert_cache *c, bool *populated);
/* First byte of a slot (4096-aligned). */
uint8_t *pt_expert_cache_slot_ptr(pt_expert_cache *c, uint32_t layer, uint32_t slot);

/* Pins every distinct expert of experts[0..n) on layer: hits get their slot, misses a victim
 * slot (empty first, then by policy; pinned slots never) now LOADING.  refs receives the
 * distinct experts in first-seen order, *n_refs their count.  PT_E_LIMIT, changing nothing,
 * when the misses exceed the unpinned slots (split into waves); PT_E_INVALID on an expert id
 * out of range.  Counts one request per distinct expert. */
enum pt_status pt_expert_cache_acquire(pt_expert_cache *c, uint32_t layer,
				       const uint32_t *experts, uint32_t n,
				       struct pt_cache_ref *refs, uint32_t *n_refs,
				       struct pt_error *err);
/* Read-ahead (speculation on the next layer's routing): for each expert of experts[0..n)
 * not present on layer, at most max of them, takes a victim slot (never pinned or loading)
 * and marks it LOADING without pinning it or counting a request; the caller reads it and
 * publishes as for a miss.  A later acquire of such an expert pins it even while it is
 * still loading (hit = true, no read; wait for publish) and counts it a miss, since its
 * bytes were read for that request.  Writes the experts taken to refs; returns how many. */
uint32_t pt_expert_cache_acquire_ahead(pt_expert_cache *c, uint32_t layer,
				       const uint32_t *experts, uint32_t n, uint32_t max,
				       struct pt_cache_ref *refs);
/* As acquire_ahead, for the popularity profile's warm-up at start (expert/profile.h): the
 * same slots and counters, except that a later acquire finding the read landed (READY)
 * counts a hit - the bytes were read before the request, as a warm cache holds them. */
uint32_t pt_expert_cache_acquire_warm(pt_expert_cache *c, uint32_t layer,
				      const uint32_t *experts, uint32_t n, uint32_t max,
				      struct pt_cache_ref *refs);
/* Drops a read-ahead whose read was never submitted (slot LOADING, unpinned): the slot is
 * empty again.  Returns false (and changes nothing) for any other slot. */
bool pt_expert_cache_cancel_ahead(pt_expert_cache *c, uint32_t layer, uint32_t slot);
/* The read into a LOADING slot finished: ok publishes the expert, !ok empties the slot. */
void pt_expert_cache_publish(pt_expert_cache *c, uint32_t layer, uint32_t slot, bool ok);
/* Unpins what acquire pinned. */
void pt_expert_cache_release(pt_expert_cache *c, uint32_t layer, const struct pt_cache_ref *refs,
			     uint32_t n);
/* Where expert is: 0 absent, 1 loading, 2 ready; *slot set when present. */
int pt_expert_cache_find(pt_expert_cache *c, uint32_t layer, uint32_t expert, uint32_t *slot);
/* Drops one pin of a present expert (the pin acquire took for it). */
void pt_expert_cache_unpin(pt_expert_cache *c, uint32_t layer, uint32_t expert);
/* Slot holding expert (READY), or -1. */
int32_t pt_expert_cache_lookup(pt_expert_cache *c, uint32_t layer, uint32_t expert);

/* Prefill waves: reorders the n distinct experts (the union a chunk needs on layer) so those
 * already resident come first, then cuts them into waves of at most the cache's unpinned slot
 * count, or with halves, when they do not fit in one, of half of it (the next wave is read
 * into the other half while one computes); wave w is experts[wave_end[w-1] .. wave_end[w])
 * (wave_end has room for n entries).  Acquire/compute/release each wave in order.
 * PT_E_LIMIT when no slot is unpinned. */
enum pt_status pt_expert_cache_waves(pt_expert_cache *c, uint32_t layer, uint32_t *experts,
				     uint32_t n, bool halves, uint32_t *wave_end,
				     uint32_t *n_waves, struct pt_error *err);

/* Counters (thread-safe). */
void pt_expert_cache_note_read(pt_expert_cache *c, uint32_t layer, uint64_t bytes, uint64_t ns,
			       bool ok);
void pt_expert_cache_note_wait(pt_expert_cache *c, uint32_t layer, uint64_t ns);
/* layer < n_layers: that layer; UINT32_MAX: the total over layers. */
void pt_expert_cache_stats(pt_expert_cache *c, uint32_t layer, struct pt_cache_stats *out);
/* resident[e] = 1 for each expert < n_expert whose bytes are READY in a slot of layer, else
 * 0 (loading counts as absent); all 0 for a bad layer.  Thread-safe (copied under the lock),
 * for views such as the web UI's heat map. */
void pt_expert_cache_resident(pt_expert_cache *c, uint32_t layer, uint8_t *resident,
			      uint32_t n_expert);

#endif
