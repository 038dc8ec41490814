/* usage.c - per-layer expert use counters from the routing (usage.h). */
#include "expert/usage.h"

#include <stdatomic.h>
#include <string.h>

#include "util/alloc.h"

struct pt_expert_usage {
	uint32_t n_moe, n_expert;
	uint32_t n_layer_map;   /* entries of moe_of */
	int32_t *moe_of;        /* [n_layer_map] model layer -> MoE index, -1 */
	_Atomic uint64_t *uses; /* [n_moe][n_expert] */
};

enum pt_status pt_expert_usage_create(const struct pt_expert_layout *l, pt_expert_usage **out,
				      struct pt_error *err)
{
	*out = NULL;
	pt_expert_usage *u = pt_calloc(1, sizeof *u);
	uint32_t max_layer = 0;
	for (uint32_t i = 0; i < l->n_moe; i++)
		if (l->moe[i].layer + 1 > max_layer)
			max_layer = l->moe[i].layer + 1;
	if (u) {
		u->n_moe = l->n_moe;
		u->n_expert = l->n_moe ? l->n_expert : 0;
		u->n_layer_map = max_layer;
		u->moe_of = pt_mallocn(max_layer ? max_layer : 1, sizeof *u->moe_of);
		u->uses = pt_calloc((size_t)u->n_moe * u->n_expert + 1, sizeof *u->uses);
	}
	if (!u || !u->moe_of || !u->uses) {
		pt_expert_usage_destroy(u);
		return pt_error_set(err, PT_E_NOMEM, "expert use counters");
	}
	for (uint32_t i = 0; i < max_layer; i++)
		u->moe_of[i] = -1;
	for (uint32_t i = 0; i < l->n_moe; i++)
		u->moe_of[l->moe[i].layer] = (int32_t)i;
	for (size_t i = 0; i < (size_t)u->n_moe * u->n_expert; i++)
		atomic_init(&u->uses[i], 0);
	*out = u;
	return PT_OK;
}

void pt_expert_usage_destroy(pt_expert_usage *u)
{
	if (!u)
		return;
	pt_free(u->moe_of);
	pt_free((void *)u->uses);
	pt_free(u);
}

void pt_expert_usage_note(pt_expert_usage *u, uint32_t layer, uint32_t n, uint32_t k,
			  const int *ids)
{
	if (!u || layer >= u->n_layer_map || u->moe_of[layer] < 0)
		return;
	_Atomic uint64_t *row = u->uses + (size_t)u->moe_of[layer] * u->n_expert;
	for (size_t i = 0; i < (size_t)n * k; i++)
		if (ids[i] >= 0 && (uint32_t)ids[i] < u->n_expert)
			atomic_fetch_add_explicit(&row[ids[i]], 1, memory_order_relaxed);
}

void pt_expert_usage_read(const pt_expert_usage *u, uint32_t moe_index, uint32_t *uses,
			  uint32_t n_expert)
{
	memset(uses, 0, (size_t)n_expert * sizeof *uses);
	if (!u || moe_index >= u->n_moe)
		return;
	_Atomic uint64_t *row = u->uses + (size_t)moe_index * u->n_expert;
	for (uint32_t e = 0; e < n_expert && e < u->n_expert; e++) {
		const uint64_t v = atomic_load_explicit(&row[e], memory_order_relaxed);
		uses[e] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	}
}
