/* cachesim.h - replays a routing trace against a per-layer cache of N slots under LRU, LFU
 * (the runtime's own cache code, so the simulation is the runtime's behaviour) and the
 * offline optimum (Belady: evict the resident expert whose next use is furthest away, never
 * one the current record needs).  Each record is one token's (deduplicated) request on one
 * layer; layers are independent. */
#ifndef PT_EXPERT_CACHESIM_H
#define PT_EXPERT_CACHESIM_H

#include <stdint.h>

#include "expert/trace.h"
#include "util/status.h"

enum pt_sim_policy { PT_SIM_LRU = 0, PT_SIM_LFU = 1, PT_SIM_BELADY = 2, PT_SIM_COUNT = 3 };

struct pt_sim_layer {
	uint32_t layer;
	uint64_t requests;
	uint64_t hits[PT_SIM_COUNT];
};

struct pt_sim_result {
	uint32_t n_layers;
	struct pt_sim_layer *layers; /* by layer id, ascending */
	uint64_t requests;
	uint64_t hits[PT_SIM_COUNT];
};

/* PT_E_LIMIT when a record needs more distinct experts than slots. */
enum pt_status pt_cachesim_run(const struct pt_trace *t, uint32_t slots,
			       struct pt_sim_result *out, struct pt_error *err);
void pt_cachesim_free(struct pt_sim_result *r);

#endif
