/* plan.h - memory planner: how many expert slots per layer fit the memory budget.
 *
 * Total = resident + KV + scratch + slots * moe_layers * slot_bytes <= budget.  The planner
 * keeps every expert when they all fit, never plans fewer than top-k slots (one token's
 * experts must be resident at once) and refuses with the smallest working budget otherwise.
 * The default budget comes from the cgroup memory limit (v1 or v2) and MemAvailable.
 */
#ifndef PT_EXPERT_PLAN_H
#define PT_EXPERT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

struct pt_plan_input {
	uint64_t budget;         /* bytes the whole process may use */
	uint64_t resident_bytes; /* shared core (non-expert weights) */
	uint64_t kv_bytes;       /* KV cache at --max-context */
	uint64_t scratch_bytes;  /* activations, buffers */
	uint64_t slot_bytes;     /* one expert slot (largest layer's, aligned) */
	uint32_t n_moe_layers;
	uint32_t top_k;
	uint32_t n_expert;
	uint32_t slots_override; /* --expert-slots N; 0 = plan from the budget */
	uint32_t n_seq;          /* sequences kv_bytes covers (0, 1: one; shown when > 1) */
	uint64_t cache_bytes;    /* set aside for prompt-cache KV snapshots (shown when > 0) */
	uint64_t ckpt_bytes;     /* recurrent-state checkpoints (shown when > 0) */
	/* Every routed expert held by the model's mapping (or --repack's copies of it) rather
	 * than by uniform slots: their actual bytes (0: planned as slots).  A plan with it holds
	 * every expert or none; slot_bytes x n_expert x layers would count each layer's experts
	 * at the largest layer's size (Q4_K_M gives some layers Q6_K downs: Sarvam-30B's 16.2
	 * GiB of experts as 17.5). */
	uint64_t mapped_bytes;
};

struct pt_plan {
	uint32_t slots_per_layer;
	bool all_experts; /* slots_per_layer == n_expert */
	uint64_t pool_bytes;  /* slots * layers * slot_bytes */
	uint64_t total_bytes; /* resident + kv + scratch + pool */
	uint64_t min_budget;  /* smallest budget with top_k slots */
};

/* Plans slots.  PT_E_LIMIT (message with every number and the smallest budget that works)
 * when the budget cannot hold top-k slots or the override; PT_E_INVALID on a bad override
 * or zero sizes. */
enum pt_status pt_plan_compute(const struct pt_plan_input *in, struct pt_plan *out,
			       struct pt_error *err);

/* "resident X GiB, KV Y GiB, N slots/layer × L layers × B MiB = Z GiB, total ≤ budget"
 * (with the numbers of total and budget).  Returns snprintf's result. */
int pt_plan_format(const struct pt_plan_input *in, const struct pt_plan *p, char *buf,
		   size_t n);

/* bytes as "2.00 GiB", "300.0 MiB", "12.0 KiB" or "512 B" (the largest unit that gives at
 * least 1) into buf; returns buf.  Planner lines use it so small models read sensibly. */
#define PT_PLAN_SIZE_LEN 24
const char *pt_plan_size(uint64_t bytes, char buf[PT_PLAN_SIZE_LEN]);

/* Default budget: min(cgroup limit - cgroup usage, MemAvailable) less headroom (1/8, at least
 * 256 MiB).  root prefixes /proc and /sys (NULL or "" = the real system; tests pass a fake
 * tree).  *source receives a short description ("cgroup v2 limit", "MemAvailable"). */
enum pt_status pt_plan_default_budget(const char *root, uint64_t *out, const char **source,
				      struct pt_error *err);

/* The cgroup memory limit of this process (min over the hierarchy), or UINT64_MAX when
 * none; *usage the cgroup's current usage (0 when unknown). */
void pt_plan_cgroup_limit(const char *root, uint64_t *limit, uint64_t *usage);

#endif
