/* cachesim.c - trace replay under LRU, LFU and Belady (see cachesim.h). */
#include "expert/cachesim.h"

#include <stdlib.h>
#include <string.h>

#include "expert/cache.h"
#include "util/alloc.h"

#define NEVER UINT32_MAX

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Distinct layer ids, sorted. */
static enum pt_status collect_layers(const struct pt_trace *t, struct pt_sim_result *r,
				     struct pt_error *err)
{
	uint32_t *ids = pt_mallocn(t->n_rec, sizeof *ids), n = 0;
	if (!ids)
		return pt_error_set(err, PT_E_NOMEM, "cachesim");
	for (uint32_t i = 0; i < t->n_rec; i++)
		ids[i] = t->rec[i].layer;
	qsort(ids, t->n_rec, sizeof *ids, cmp_u32);
	for (uint32_t i = 0; i < t->n_rec; i++)
		if (i == 0 || ids[i] != ids[i - 1])
			ids[n++] = ids[i];
	r->layers = pt_calloc(n, sizeof *r->layers);
	if (!r->layers) {
		pt_free(ids);
		return pt_error_set(err, PT_E_NOMEM, "cachesim");
	}
	r->n_layers = n;
	for (uint32_t i = 0; i < n; i++)
		r->layers[i].layer = ids[i];
	pt_free(ids);
	return PT_OK;
}

static uint32_t layer_index(const struct pt_sim_result *r, uint32_t layer)
{
	uint32_t lo = 0, hi = r->n_layers;
	while (lo + 1 < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (r->layers[mid].layer <= layer)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* LRU or LFU through the runtime cache. */
static enum pt_status run_cache(const struct pt_trace *t, struct pt_sim_result *r,
				uint32_t slots, enum pt_cache_policy pol, int which,
				struct pt_error *err)
{
	struct pt_cache_config cfg = { .n_layers = r->n_layers, .n_expert = t->max_expert + 1,
				       .slots_per_layer = slots, .slot_bytes = 1, .policy = pol };
	pt_expert_cache *c = NULL;
	struct pt_cache_ref refs[PT_TRACE_MAX_K];
	enum pt_status st;
	if (slots > cfg.n_expert)
		cfg.slots_per_layer = cfg.n_expert; /* more slots than experts: all fit */
	st = pt_expert_cache_create(&cfg, &c, err);
	for (uint32_t i = 0; st == PT_OK && i < t->n_rec; i++) {
		const struct pt_trace_rec *rc = &t->rec[i];
		uint32_t li = layer_index(r, rc->layer), n = 0;
		st = pt_expert_cache_acquire(c, li, t->experts + rc->first, rc->k, refs, &n, err);
		if (st != PT_OK)
			break;
		for (uint32_t j = 0; j < n; j++) {
			if (refs[j].hit)
				r->layers[li].hits[which]++;
			else
				pt_expert_cache_publish(c, li, refs[j].slot, true);
		}
		if (which == PT_SIM_LRU)
			r->layers[li].requests += n;
		pt_expert_cache_release(c, li, refs, n);
	}
	pt_expert_cache_destroy(c);
	return st;
}

/* Distinct experts of record i into buf; returns the count. */
static uint32_t distinct(const struct pt_trace *t, uint32_t i, uint32_t *buf)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < t->rec[i].k; j++) {
		uint32_t e = t->experts[t->rec[i].first + j], q;
		for (q = 0; q < n && buf[q] != e; q++)
			;
		if (q == n)
			buf[n++] = e;
	}
	return n;
}

struct belady {
	uint32_t *next;     /* [n_experts_total] next record (same layer) using this access's
			       expert, NEVER if none; stored at the access's index */
	uint32_t *last;     /* [layers * n_expert] scratch */
	uint32_t *nxt;      /* [layers * n_expert] next use of a resident expert */
	uint8_t *resident;  /* [layers * n_expert] */
	uint32_t *count;    /* [layers] residents */
};

static void belady_next(const struct pt_trace *t, const struct pt_sim_result *r,
			struct belady *b, uint32_t ne)
{
	for (uint64_t i = 0; i < (uint64_t)r->n_layers * ne; i++)
		b->last[i] = NEVER;
	for (uint32_t i = t->n_rec; i-- > 0;) {
		uint32_t li = layer_index(r, t->rec[i].layer);
		for (uint32_t j = 0; j < t->rec[i].k; j++) {
			uint32_t e = t->experts[t->rec[i].first + j];
			b->next[t->rec[i].first + j] = b->last[(uint64_t)li * ne + e];
		}
		for (uint32_t j = 0; j < t->rec[i].k; j++)
			b->last[(uint64_t)li * ne + t->experts[t->rec[i].first + j]] = i;
	}
}

static void belady_step(const struct pt_trace *t, struct pt_sim_result *r, struct belady *b,
			uint32_t i, uint32_t slots, uint32_t ne)
{
	const struct pt_trace_rec *rc = &t->rec[i];
	const uint32_t *ex = t->experts + rc->first;
	uint32_t li = layer_index(r, rc->layer);
	uint8_t *res = b->resident + (uint64_t)li * ne; /* 0 out, 1 resident, 2 used now */
	uint32_t *nxt = b->nxt + (uint64_t)li * ne;
	for (uint32_t j = 0; j < rc->k; j++) /* hits first: they are pinned for this record */
		if (res[ex[j]] == 1) {
			r->layers[li].hits[PT_SIM_BELADY]++;
			res[ex[j]] = 2;
		}
	for (uint32_t j = 0; j < rc->k; j++) {
		if (res[ex[j]] != 0)
			continue;
		if (b->count[li] >= slots) { /* evict the resident used furthest in the future */
			uint32_t victim = NEVER;
			for (uint32_t x = 0; x < ne; x++)
				if (res[x] == 1 && (victim == NEVER || nxt[x] > nxt[victim]))
					victim = x;
			res[victim] = 0; /* exists: the record needs at most `slots` experts */
			b->count[li]--;
		}
		res[ex[j]] = 2;
		b->count[li]++;
	}
	for (uint32_t j = 0; j < rc->k; j++) {
		nxt[ex[j]] = b->next[rc->first + j];
		res[ex[j]] = 1;
	}
}

static enum pt_status run_belady(const struct pt_trace *t, struct pt_sim_result *r,
				 uint32_t slots, struct pt_error *err)
{
	uint32_t ne = t->max_expert + 1;
	uint64_t cells = (uint64_t)r->n_layers * ne;
	struct belady b = {
		.next = pt_mallocn(t->n_experts_total ? t->n_experts_total : 1, sizeof(uint32_t)),
		.last = pt_mallocn(cells, sizeof(uint32_t)),
		.nxt = pt_mallocn(cells, sizeof(uint32_t)),
		.resident = pt_calloc(cells, 1),
		.count = pt_calloc(r->n_layers, sizeof(uint32_t)),
	};
	enum pt_status st = PT_OK;
	if (!b.next || !b.last || !b.nxt || !b.resident || !b.count)
		st = pt_error_set(err, PT_E_NOMEM, "cachesim");
	if (st == PT_OK) {
		belady_next(t, r, &b, ne);
		for (uint32_t i = 0; i < t->n_rec; i++)
			belady_step(t, r, &b, i, slots, ne);
	}
	pt_free(b.next);
	pt_free(b.last);
	pt_free(b.nxt);
	pt_free(b.resident);
	pt_free(b.count);
	return st;
}

enum pt_status pt_cachesim_run(const struct pt_trace *t, uint32_t slots,
			       struct pt_sim_result *out, struct pt_error *err)
{
	uint32_t buf[PT_TRACE_MAX_K];
	enum pt_status st;
	memset(out, 0, sizeof *out);
	if (t->max_expert > PT_TRACE_MAX_EXPERT)
		return pt_error_set(err, PT_E_LIMIT, "expert id %u in the trace exceeds %u",
				    t->max_expert, PT_TRACE_MAX_EXPERT);
	for (uint32_t i = 0; i < t->n_rec; i++) {
		uint32_t n = distinct(t, i, buf);
		if (n > slots)
			return pt_error_set(err, PT_E_LIMIT, "token %u layer %u uses %u distinct "
					    "experts, more than %u slots", t->rec[i].token,
					    t->rec[i].layer, n, slots);
	}
	st = collect_layers(t, out, err);
	if (st == PT_OK && (uint64_t)out->n_layers * (t->max_expert + 1) > (1u << 26))
		st = pt_error_set(err, PT_E_LIMIT, "trace has %u layers x %u experts, too many to "
				  "simulate", out->n_layers, t->max_expert + 1);
	if (st == PT_OK)
		st = run_cache(t, out, slots, PT_CACHE_LRU, PT_SIM_LRU, err);
	if (st == PT_OK)
		st = run_cache(t, out, slots, PT_CACHE_LFU, PT_SIM_LFU, err);
	if (st == PT_OK)
		st = run_belady(t, out, slots, err);
	for (uint32_t l = 0; st == PT_OK && l < out->n_layers; l++) {
		out->requests += out->layers[l].requests;
		for (int p = 0; p < PT_SIM_COUNT; p++)
			out->hits[p] += out->layers[l].hits[p];
	}
	if (st != PT_OK)
		pt_cachesim_free(out);
	return st;
}

void pt_cachesim_free(struct pt_sim_result *r)
{
	pt_free(r->layers);
	memset(r, 0, sizeof *r);
}
