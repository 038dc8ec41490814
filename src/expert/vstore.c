/* vstore.c - the device expert store's bookkeeping over the CPU store's cache (vstore.h). */
#include "expert/vstore.h"

#include <string.h>

#include "util/alloc.h"

#define VALIGN 256u

struct pt_vstore {
	struct pt_vstore_cfg cfg;
	pt_expert_cache *cache;
	uint32_t n_moe, spl, k_max;
	int32_t *moe_of;   /* [n_layer] MoE index, -1 for dense layers */
	uint64_t slot_bytes;
	struct pt_cache_ref *refs;
	uint32_t *req;
	struct pt_cache_ref *held; /* [n_moe][k_max] what the last acquire pinned */
	uint32_t *n_held;          /* [n_moe] */
};

static uint64_t up256(uint64_t x)
{
	return (x + VALIGN - 1) / VALIGN * VALIGN;
}

/* Offsets of an expert's matrices inside a slot (UINT64_MAX for an absent up). */
static void mat_offsets(const struct pt_layer_weights *L, uint64_t off[3], uint64_t *end)
{
	const bool fused = L->gate_up_exps.data != NULL;
	const struct pt_expert_mat *g = fused ? &L->gate_up_exps : &L->gate_exps;
	off[0] = 0;
	uint64_t p = up256(g->expert_bytes);
	off[1] = UINT64_MAX;
	if (!fused) {
		off[1] = p;
		p += up256(L->up_exps.expert_bytes);
	}
	off[2] = p;
	p += up256(L->down_exps.expert_bytes);
	*end = p;
}

uint64_t pt_vstore_slot_bytes(const struct pt_model *m)
{
	uint64_t best = 0;
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		if (!m->layers[il].is_moe)
			continue;
		uint64_t off[3], end;
		mat_offsets(&m->layers[il], off, &end);
		best = end > best ? end : best;
	}
	return best;
}

uint32_t pt_vstore_moe_layers(const struct pt_model *m)
{
	uint32_t n = 0;
	for (uint32_t il = 0; il < m->hp.n_layer; il++)
		n += m->layers[il].is_moe;
	return n;
}

uint64_t pt_vstore_pool_bytes(const pt_vstore *v)
{
	return (uint64_t)v->n_moe * v->spl * v->slot_bytes;
}

bool pt_vstore_all_resident(const pt_vstore *v)
{
	return v->spl == v->cfg.m->hp.n_expert;
}

static void entry_offsets(const pt_vstore *v, uint32_t il, uint32_t slot, uint64_t off[3])
{
	uint64_t end, base = ((uint64_t)v->moe_of[il] * v->spl + slot) * v->slot_bytes;
	mat_offsets(&v->cfg.m->layers[il], off, &end);
	for (int i = 0; i < 3; i++)
		if (off[i] != UINT64_MAX)
			off[i] += base;
}

/* Copies expert e of layer il into the slot at off[]. */
static enum pt_status copy_expert(pt_vstore *v, uint32_t il, uint32_t e, const uint64_t off[3],
				  uint64_t *bytes, struct pt_error *err)
{
	const struct pt_layer_weights *L = &v->cfg.m->layers[il];
	const struct pt_expert_mat *mats[3] = {
		L->gate_up_exps.data ? &L->gate_up_exps : &L->gate_exps,
		L->gate_up_exps.data ? NULL : &L->up_exps, &L->down_exps
	};
	enum pt_status st = PT_OK;
	*bytes = 0;
	for (int i = 0; st == PT_OK && i < 3; i++) {
		if (!mats[i])
			continue;
		st = v->cfg.dev.copy(v->cfg.dev.ctx, off[i],
				     mats[i]->data + (uint64_t)e * mats[i]->expert_bytes,
				     mats[i]->expert_bytes, err);
		*bytes += mats[i]->expert_bytes;
	}
	return st;
}

static enum pt_status fill_all(pt_vstore *v, struct pt_error *err)
{
	const uint32_t E = v->cfg.m->hp.n_expert;
	for (uint32_t il = 0; il < v->cfg.m->hp.n_layer; il++) {
		if (v->moe_of[il] < 0)
			continue;
		const uint32_t ml = (uint32_t)v->moe_of[il];
		uint32_t n_refs = 0;
		for (uint32_t e = 0; e < E; e++)
			v->req[e] = e;
		enum pt_status st = pt_expert_cache_acquire(v->cache, ml, v->req, E, v->refs,
							    &n_refs, err);
		for (uint32_t i = 0; st == PT_OK && i < n_refs; i++) {
			uint64_t off[3], bytes;
			entry_offsets(v, il, v->refs[i].slot, off);
			st = copy_expert(v, il, v->refs[i].expert, off, &bytes, err);
			pt_expert_cache_note_read(v->cache, ml, bytes, 0, st == PT_OK);
			pt_expert_cache_publish(v->cache, ml, v->refs[i].slot, st == PT_OK);
		}
		if (st != PT_OK)
			return st;
		pt_expert_cache_release(v->cache, ml, v->refs, n_refs);
	}
	return PT_OK;
}

enum pt_status pt_vstore_create(const struct pt_vstore_cfg *cfg, pt_vstore **out,
				struct pt_error *err)
{
	*out = NULL;
	const struct pt_model *m = cfg->m;
	const uint32_t E = m->hp.n_expert, k = m->hp.n_expert_used;
	if (!cfg->dev.copy || E == 0 || k == 0 || k > E || cfg->slots_per_layer < k ||
	    cfg->slots_per_layer > E)
		return pt_error_set(err, PT_E_INVALID, "device expert store: %u slots per layer "
				    "(top-%u of %u experts)", cfg->slots_per_layer, k, E);
	pt_vstore *v = pt_calloc(1, sizeof *v);
	if (!v)
		return pt_error_set(err, PT_E_NOMEM, "device expert store: out of memory");
	v->cfg = *cfg;
	v->spl = cfg->slots_per_layer;
	v->k_max = k;
	v->n_moe = pt_vstore_moe_layers(m);
	v->slot_bytes = pt_vstore_slot_bytes(m);
	v->moe_of = pt_mallocn(m->hp.n_layer, sizeof *v->moe_of);
	v->refs = pt_mallocn(E, sizeof *v->refs);
	v->req = pt_mallocn(E, sizeof *v->req);
	v->held = pt_mallocn((size_t)(v->n_moe ? v->n_moe : 1) * k, sizeof *v->held);
	v->n_held = pt_calloc(v->n_moe ? v->n_moe : 1, sizeof *v->n_held);
	enum pt_status st = PT_OK;
	if (!v->moe_of || !v->refs || !v->req || !v->held || !v->n_held)
		st = pt_error_set(err, PT_E_NOMEM, "device expert store: out of memory");
	for (uint32_t il = 0, n = 0; st == PT_OK && il < m->hp.n_layer; il++)
		v->moe_of[il] = m->layers[il].is_moe ? (int32_t)n++ : -1;
	/* the host-side slot pool of the cache is never touched (slots are device memory): an
	 * untouched anonymous mapping costs address space only */
	struct pt_cache_config cc = { v->n_moe ? v->n_moe : 1, E, v->spl, 1, cfg->policy };
	if (st == PT_OK)
		st = pt_expert_cache_create(&cc, &v->cache, err);
	if (st == PT_OK && v->spl == E)
		st = fill_all(v, err);
	if (st != PT_OK) {
		pt_vstore_destroy(v);
		return st;
	}
	*out = v;
	return PT_OK;
}

void pt_vstore_destroy(pt_vstore *v)
{
	if (!v)
		return;
	pt_expert_cache_destroy(v->cache);
	pt_free(v->moe_of);
	pt_free(v->refs);
	pt_free(v->req);
	pt_free(v->held);
	pt_free(v->n_held);
	pt_free(v);
}

enum pt_status pt_vstore_acquire(pt_vstore *v, uint32_t il, const int32_t *ids, uint32_t k,
				 struct pt_vstore_entry *entries, uint32_t *n_hit,
				 struct pt_error *err)
{
	const struct pt_model *m = v->cfg.m;
	*n_hit = 0;
	if (il >= m->hp.n_layer || v->moe_of[il] < 0 || k == 0 || k > v->k_max)
		return pt_error_set(err, PT_E_INVALID, "device expert store: layer %u, %u experts",
				    il, k);
	const uint32_t ml = (uint32_t)v->moe_of[il];
	for (uint32_t j = 0; j < k; j++) {
		if (ids[j] < 0 || (uint32_t)ids[j] >= m->hp.n_expert)
			return pt_error_set(err, PT_E_INVALID, "device expert store: expert id %d of "
					    "%u", ids[j], m->hp.n_expert);
		for (uint32_t i = 0; i < j; i++)
			if (ids[i] == ids[j])
				return pt_error_set(err, PT_E_INVALID, "device expert store: expert %d "
						    "twice in one row", ids[j]);
		v->req[j] = (uint32_t)ids[j];
	}
	uint32_t n_refs = 0;
	struct pt_cache_ref *held = v->held + (size_t)ml * v->k_max;
	enum pt_status st = pt_expert_cache_acquire(v->cache, ml, v->req, k, held, &n_refs, err);
	if (st != PT_OK)
		return st;
	v->n_held[ml] = n_refs;
	/* refs come in request (rank) order, distinct: rank j is held[j] */
	uint32_t nh = 0, w = 0;
	for (uint32_t j = 0; j < n_refs; j++)
		nh += held[j].hit;
	for (uint32_t pass = 0; pass < 2; pass++) {
		for (uint32_t j = 0; j < n_refs; j++) {
			if ((pass == 0) != held[j].hit)
				continue;
			struct pt_vstore_entry *e = &entries[w++];
			e->expert = held[j].expert;
			e->rank = j;
			e->hit = held[j].hit;
			entry_offsets(v, il, held[j].slot, e->off);
			if (e->hit)
				continue;
			uint64_t bytes = 0;
			if (st == PT_OK)
				st = copy_expert(v, il, e->expert, e->off, &bytes, err);
			pt_expert_cache_note_read(v->cache, ml, bytes, 0, st == PT_OK);
			pt_expert_cache_publish(v->cache, ml, held[j].slot, st == PT_OK);
		}
	}
	if (st != PT_OK) {
		pt_vstore_release(v, il);
		return st;
	}
	*n_hit = nh;
	return PT_OK;
}

void pt_vstore_release(pt_vstore *v, uint32_t il)
{
	if (il >= v->cfg.m->hp.n_layer || v->moe_of[il] < 0)
		return;
	const uint32_t ml = (uint32_t)v->moe_of[il];
	pt_expert_cache_release(v->cache, ml, v->held + (size_t)ml * v->k_max, v->n_held[ml]);
	v->n_held[ml] = 0;
}

bool pt_vstore_find(pt_vstore *v, uint32_t il, uint32_t e, uint64_t off[3])
{
	if (il >= v->cfg.m->hp.n_layer || v->moe_of[il] < 0 || e >= v->cfg.m->hp.n_expert)
		return false;
	const int32_t s = pt_expert_cache_lookup(v->cache, (uint32_t)v->moe_of[il], e);
	if (s < 0)
		return false;
	entry_offsets(v, il, (uint32_t)s, off);
	return true;
}

void pt_vstore_stats(pt_vstore *v, struct pt_cache_stats *out)
{
	pt_expert_cache_stats(v->cache, UINT32_MAX, out);
}
