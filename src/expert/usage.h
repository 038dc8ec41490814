/* usage.h - how often each routed expert was used, per MoE layer, counted from the routing
 * (every token at a MoE layer uses its k experts; prefill rows included).  Feeds the web UI's
 * expert heat map in every mode, the mapped one included, where no cache counts anything.
 *
 * Threads: note() is called by the forward pass; read() may be called from any other thread
 * at the same time (counters are relaxed atomics: a copy taken mid-token may hold part of
 * that token's counts, never a torn value). */
#ifndef PT_EXPERT_USAGE_H
#define PT_EXPERT_USAGE_H

#include <stdint.h>

#include "expert/layout.h"
#include "util/status.h"

typedef struct pt_expert_usage pt_expert_usage;

/* Counters for every MoE layer of the layout (which must outlive nothing: what is needed is
 * copied). */
enum pt_status pt_expert_usage_create(const struct pt_expert_layout *l, pt_expert_usage **out,
				      struct pt_error *err);
void pt_expert_usage_destroy(pt_expert_usage *u); /* NULL-safe */

/* ids[n][k] routed at model layer `layer` (the routing observer's arguments); layers that
 * are not MoE and ids out of range are ignored. */
void pt_expert_usage_note(pt_expert_usage *u, uint32_t layer, uint32_t n, uint32_t k,
			  const int *ids);
/* uses[e] for e < n_expert of MoE layer moe_index (saturating at UINT32_MAX); zeros for a
 * bad index or beyond the model's experts. */
void pt_expert_usage_read(const pt_expert_usage *u, uint32_t moe_index, uint32_t *uses,
			  uint32_t n_expert);

#endif
