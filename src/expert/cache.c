/* cache.c - the expert slot pool and per-layer LFU/LRU replacement (see cache.h). */
#include "expert/cache.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/alloc.h"

#define ALIGN 4096u

enum slot_state { SLOT_EMPTY = 0, SLOT_LOADING = 1, SLOT_READY = 2 };

#define AHEAD_GUESS 1 /* slot_ahead: read on a guess of this token's routing */
#define AHEAD_WARM 2  /* slot_ahead: read at start from the popularity profile */

struct layer_state {
	int32_t *slot_expert;   /* [slots] expert held or being loaded, -1 = none */
	uint8_t *slot_state;    /* [slots] enum slot_state */
	uint8_t *slot_ahead;    /* [slots] read ahead (speculatively), not yet acquired */
	uint32_t *slot_pins;    /* [slots] */
	uint64_t *slot_last;    /* [slots] clock of last use (LRU) */
	int32_t *expert_slot;   /* [n_expert] slot, -1 = not present */
	uint64_t *use_count;    /* [n_expert] requests over the whole run (LFU) */
	uint64_t clock;
	struct pt_cache_stats st;
};

struct pt_expert_cache {
	struct pt_cache_config cfg;
	uint8_t *pool;
	uint64_t pool_bytes;
	uint32_t slots_on; /* slots [0, slots_on) of each layer are in use; the rest are lent */
	struct layer_state *layers;
	void *meta; /* one block for every per-layer array */
	pthread_mutex_t mu;
};

enum pt_status pt_cache_policy_parse(const char *text, enum pt_cache_policy *out,
				     struct pt_error *err)
{
	if (text && strcmp(text, "lfu") == 0)
		*out = PT_CACHE_LFU;
	else if (text && strcmp(text, "lru") == 0)
		*out = PT_CACHE_LRU;
	else
		return pt_error_set(err, PT_E_INVALID, "--cache-policy expects lfu or lru, got '%s'",
				    text ? text : "");
	return PT_OK;
}

const char *pt_cache_policy_name(enum pt_cache_policy p)
{
	return p == PT_CACHE_LRU ? "lru" : "lfu";
}

/* Bytes of one layer's metadata arrays (all 8-byte multiples kept aligned). */
static uint64_t layer_meta_bytes(uint64_t s, uint64_t e)
{
	uint64_t a = s * (4 + 1 + 1 + 4 + 8) + e * (4 + 8);
	return (a + 7) & ~7ull;
}

static void carve_layer(struct layer_state *l, uint8_t *p, uint32_t s, uint32_t e)
{
	l->slot_last = (uint64_t *)p;
	p += (uint64_t)s * 8;
	l->use_count = (uint64_t *)p;
	p += (uint64_t)e * 8;
	l->slot_expert = (int32_t *)p;
	p += (uint64_t)s * 4;
	l->slot_pins = (uint32_t *)p;
	p += (uint64_t)s * 4;
	l->expert_slot = (int32_t *)p;
	p += (uint64_t)e * 4;
	l->slot_state = p;
	l->slot_ahead = p + s;
	for (uint32_t i = 0; i < s; i++)
		l->slot_expert[i] = -1;
	for (uint32_t i = 0; i < e; i++)
		l->expert_slot[i] = -1;
}

static enum pt_status map_pool(pt_expert_cache *c, struct pt_error *err)
{
	uint64_t per_layer;
	if (pt_mul_overflow(c->cfg.slot_bytes, c->cfg.slots_per_layer, &per_layer) ||
	    pt_mul_overflow(per_layer, c->cfg.n_layers, &c->pool_bytes) ||
	    c->pool_bytes > (uint64_t)SIZE_MAX / 2)
		return pt_error_set(err, PT_E_LIMIT, "expert pool size overflows");
	if (c->pool_bytes == 0)
		return PT_OK;
	/* page aligned for O_DIRECT */
	void *p = pt_alloc_pages(c->pool_bytes);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "cannot map the expert pool of %llu bytes",
				    (unsigned long long)c->pool_bytes);
	c->pool = p;
	return PT_OK;
}

enum pt_status pt_expert_cache_create(const struct pt_cache_config *cfg, pt_expert_cache **out,
				      struct pt_error *err)
{
	pt_expert_cache *c;
	uint64_t lm, meta_bytes, per_layer, pool;
	enum pt_status st;
	*out = NULL;
	if (cfg->slots_per_layer == 0 || cfg->n_expert == 0 || cfg->n_expert > INT32_MAX ||
	    cfg->slots_per_layer > cfg->n_expert || cfg->slot_bytes == 0 ||
	    cfg->slot_bytes > (1ull << 40))
		return pt_error_set(err, PT_E_INVALID, "expert cache: bad geometry (%u slots, %u "
				    "experts)", cfg->slots_per_layer, cfg->n_expert);
	/* before allocating anything: the pool must be addressable */
	if (pt_mul_overflow(cfg->slot_bytes + ALIGN, cfg->slots_per_layer, &per_layer) ||
	    pt_mul_overflow(per_layer, cfg->n_layers, &pool) || pool > (uint64_t)SIZE_MAX / 2 ||
	    cfg->n_layers > (1u << 20))
		return pt_error_set(err, PT_E_LIMIT, "expert pool size overflows");
	c = pt_calloc(1, sizeof *c);
	if (!c)
		return pt_error_set(err, PT_E_NOMEM, "expert cache");
	c->cfg = *cfg;
	c->cfg.slot_bytes = (cfg->slot_bytes + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
	c->slots_on = cfg->slots_per_layer;
	lm = layer_meta_bytes(cfg->slots_per_layer, cfg->n_expert);
	c->layers = pt_calloc(cfg->n_layers ? cfg->n_layers : 1, sizeof *c->layers);
	if (pt_mul_overflow(lm, cfg->n_layers, &meta_bytes) || !c->layers ||
	    !(c->meta = pt_calloc(1, meta_bytes ? meta_bytes : 1))) {
		pt_expert_cache_destroy(c);
		return pt_error_set(err, PT_E_NOMEM, "expert cache metadata");
	}
	for (uint32_t l = 0; l < cfg->n_layers; l++)
		carve_layer(&c->layers[l], (uint8_t *)c->meta + l * lm, cfg->slots_per_layer,
			    cfg->n_expert);
	pthread_mutex_init(&c->mu, NULL);
	st = map_pool(c, err);
	if (st != PT_OK) {
		pt_expert_cache_destroy(c);
		return st;
	}
	*out = c;
	return PT_OK;
}

void pt_expert_cache_destroy(pt_expert_cache *c)
{
	if (!c)
		return;
	pt_free_pages(c->pool, c->pool_bytes);
	if (c->meta)
		pthread_mutex_destroy(&c->mu);
	pt_free(c->meta);
	pt_free(c->layers);
	pt_free(c);
}

uint64_t pt_expert_cache_slot_bytes(const pt_expert_cache *c)
{
	return c->cfg.slot_bytes;
}

uint32_t pt_expert_cache_slots(const pt_expert_cache *c)
{
	return c->cfg.slots_per_layer;
}

uint32_t pt_expert_cache_active(pt_expert_cache *c)
{
	pthread_mutex_lock(&c->mu);
	const uint32_t n = c->slots_on;
	pthread_mutex_unlock(&c->mu);
	return n;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Faults in slots [s0, s1) of every layer (the whole pages they touch: faulting in a
 * neighbour's present page changes nothing), caller holding mu; false when the kernel
 * cannot (the slots then fault in as they are first read). */
static bool fault_in(pt_expert_cache *c, uint32_t s0, uint32_t s1, uintptr_t pg)
{
	bool ok = c->pool != NULL && s1 > s0;
	for (uint32_t li = 0; ok && li < c->cfg.n_layers; li++) {
		const uint8_t *p = c->pool + ((uint64_t)li * c->cfg.slots_per_layer + s0) *
						     c->cfg.slot_bytes;
		const uintptr_t a = (uintptr_t)p & ~(pg - 1);
		const uintptr_t b = ((uintptr_t)p + (uint64_t)(s1 - s0) * c->cfg.slot_bytes + pg - 1) &
				    ~(pg - 1);
		ok = madvise((void *)a, b - a, MADV_POPULATE_WRITE) == 0;
	}
	return ok;
}

static uintptr_t page_size(void)
{
	const long sys_pg = sysconf(_SC_PAGESIZE);
	return sys_pg > 0 ? (uintptr_t)sys_pg : 4096;
}

enum pt_status pt_expert_cache_set_active(pt_expert_cache *c, uint32_t n, bool *populated,
					  struct pt_error *err)
{
	if (populated)
		*populated = false;
	if (n == 0 || n > c->cfg.slots_per_layer)
		return pt_error_set(err, PT_E_INVALID, "expert cache: %u active slots (1..%u)", n,
				    c->cfg.slots_per_layer);
	const uintptr_t pg = page_size();
	pthread_mutex_lock(&c->mu);
	const uint32_t old = c->slots_on;
	for (uint32_t li = 0; li < c->cfg.n_layers; li++) /* all or nothing */
		for (uint32_t s = n; s < old; s++)
			if (c->layers[li].slot_pins[s] ||
			    c->layers[li].slot_state[s] == SLOT_LOADING) {
				pthread_mutex_unlock(&c->mu);
				return pt_error_set(err, PT_E_BUSY, "expert cache: layer %u slot %u "
						    "is in use", li, s);
			}
	for (uint32_t li = 0; li < c->cfg.n_layers && n < old; li++) {
		struct layer_state *l = &c->layers[li];
		for (uint32_t s = n; s < old; s++) {
			if (l->slot_expert[s] >= 0)
				l->expert_slot[l->slot_expert[s]] = -1;
			l->slot_expert[s] = -1;
			l->slot_state[s] = SLOT_EMPTY;
			l->slot_ahead[s] = 0;
		}
		/* the memory goes back to the kernel now (zero pages when touched again): the
		 * whole pages inside the lent slots (a slot is 4 KiB-aligned; pages may be
		 * larger, e.g. 64 KiB on some Arm64 kernels) */
		const uint8_t *p = c->pool + ((uint64_t)li * c->cfg.slots_per_layer + n) *
						     c->cfg.slot_bytes;
		const uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
		const uintptr_t b = ((uintptr_t)p + (uint64_t)(old - n) * c->cfg.slot_bytes) &
				    ~(uintptr_t)(pg - 1);
		if (c->pool && b > a)
			madvise((void *)a, b - a, MADV_DONTNEED);
	}
	/* given back: their pages are faulted in now, in one pass, rather than by each slot's
	 * first read in the middle of a decode (a fresh page is zeroed by the kernel, slowly
	 * on a VM whose host has not backed it lately) */
	const bool pop = fault_in(c, old, n, pg);
	if (populated)
		*populated = pop;
	c->slots_on = n;
	pthread_mutex_unlock(&c->mu);
	return PT_OK;
}

void pt_expert_cache_populate(pt_expert_cache *c, bool *populated)
{
	pthread_mutex_lock(&c->mu);
	*populated = fault_in(c, 0, c->slots_on, page_size()); /* the active slots lead each layer */
	pthread_mutex_unlock(&c->mu);
}

uint8_t *pt_expert_cache_slot_ptr(pt_expert_cache *c, uint32_t layer, uint32_t slot)
{
	uint64_t idx = (uint64_t)layer * c->cfg.slots_per_layer + slot;
	return c->pool + idx * c->cfg.slot_bytes;
}

/* true when slot a is a better victim than slot b. */
static bool better_victim(const pt_expert_cache *c, const struct layer_state *l, uint32_t a,
			  uint32_t b)
{
	bool ea = l->slot_state[a] == SLOT_EMPTY, eb = l->slot_state[b] == SLOT_EMPTY;
	if (ea != eb)
		return ea;
	if (ea)
		return a < b;
	if (c->cfg.policy == PT_CACHE_LFU) {
		uint64_t ua = l->use_count[l->slot_expert[a]], ub = l->use_count[l->slot_expert[b]];
		if (ua != ub)
			return ua < ub;
	}
	return l->slot_last[a] < l->slot_last[b];
}

static int32_t pick_victim(const pt_expert_cache *c, const struct layer_state *l)
{
	int32_t best = -1;
	for (uint32_t s = 0; s < c->slots_on; s++) {
		if (l->slot_pins[s] || l->slot_state[s] == SLOT_LOADING)
			continue;
		if (best < 0 || better_victim(c, l, s, (uint32_t)best))
			best = (int32_t)s;
	}
	return best;
}

static uint32_t unpinned(const pt_expert_cache *c, const struct layer_state *l)
{
	uint32_t n = 0;
	for (uint32_t s = 0; s < c->slots_on; s++)
		n += !l->slot_pins[s] && l->slot_state[s] != SLOT_LOADING;
	return n;
}

/* Dedups experts into refs, validates ids and checks the misses fit. */
static enum pt_status collect(const pt_expert_cache *c, const struct layer_state *l,
		       const uint32_t *experts, uint32_t n, struct pt_cache_ref *refs,
		       uint32_t *n_refs, struct pt_error *err)
{
	uint32_t m = 0;
	int64_t misses = 0, pinned_hits = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t e = experts[i], j;
		if (e >= c->cfg.n_expert) {
			return pt_error_set(err, PT_E_INVALID, "expert %u out of range (%u "
					    "experts)", e, c->cfg.n_expert);
		}
		for (j = 0; j < m && refs[j].expert != e; j++)
			;
		if (j < m)
			continue;
		int32_t s = l->expert_slot[e];
		if (s >= 0 && l->slot_state[s] == SLOT_LOADING && !l->slot_ahead[s]) {
			return pt_error_set(err, PT_E_BUSY, "expert %u is still loading", e);
		}
		refs[m].expert = e;
		refs[m].hit = s >= 0;
		refs[m].slot = s >= 0 ? (uint32_t)s : 0;
		misses += s < 0;
		/* a read-ahead still loading is not a victim candidate anyway */
		pinned_hits += s >= 0 && l->slot_pins[s] == 0 && l->slot_state[s] != SLOT_LOADING;
		m++;
	}
	*n_refs = m;
	/* the hits we are about to pin stop being candidates */
	if ((int64_t)unpinned(c, l) - pinned_hits < misses) {
		return pt_error_set(err, PT_E_LIMIT, "%lld expert misses but only %lld free slots; "
				    "split the request into waves", (long long)misses,
				    (long long)unpinned(c, l) - pinned_hits);
	}
	return PT_OK;
}

/* Empties victim slot s for a new expert (counts the eviction or the newly used slot). */
static void take_slot(struct layer_state *l, int32_t s)
{
	if (l->slot_state[s] == SLOT_READY) {
		l->expert_slot[l->slot_expert[s]] = -1;
		l->st.evictions++;
		l->st.ahead_wasted += l->slot_ahead[s] != 0;
	} else {
		l->st.slots_used++;
	}
	l->slot_ahead[s] = 0;
}

enum pt_status pt_expert_cache_acquire(pt_expert_cache *c, uint32_t layer,
				       const uint32_t *experts, uint32_t n,
				       struct pt_cache_ref *refs, uint32_t *n_refs,
				       struct pt_error *err)
{
	struct layer_state *l = &c->layers[layer];
	enum pt_status st;
	pthread_mutex_lock(&c->mu);
	st = collect(c, l, experts, n, refs, n_refs, err);
	if (st != PT_OK) {
		pthread_mutex_unlock(&c->mu);
		return st;
	}
	l->clock++;
	for (uint32_t i = 0; i < *n_refs; i++) { /* pin hits first: they are never victims */
		l->use_count[refs[i].expert]++;
		if (refs[i].hit) {
			l->slot_pins[refs[i].slot]++;
			l->slot_last[refs[i].slot] = l->clock;
			const uint32_t sl = refs[i].slot;
			/* read for this request, ahead of it: a miss; a profile warm-up read
			 * that landed before the request is a hit (read before anyone asked) */
			if (l->slot_ahead[sl] == AHEAD_GUESS ||
			    (l->slot_ahead[sl] == AHEAD_WARM && l->slot_state[sl] == SLOT_LOADING))
				l->st.misses++;
			if (l->slot_ahead[sl]) {
				l->slot_ahead[sl] = 0;
				l->st.ahead_used++;
			}
		}
	}
	for (uint32_t i = 0; i < *n_refs; i++) {
		if (refs[i].hit)
			continue;
		int32_t s = pick_victim(c, l); /* >= 0: collect counted the room */
		take_slot(l, s);
		l->slot_expert[s] = (int32_t)refs[i].expert;
		l->slot_state[s] = SLOT_LOADING;
		l->slot_pins[s]++;
		l->slot_last[s] = l->clock;
		l->expert_slot[refs[i].expert] = s;
		refs[i].slot = (uint32_t)s;
		l->st.misses++;
	}
	l->st.requests += *n_refs;
	l->st.hits = l->st.requests - l->st.misses;
	pthread_mutex_unlock(&c->mu);
	return PT_OK;
}


static uint32_t take_ahead(pt_expert_cache *c, uint32_t layer, const uint32_t *experts,
			   uint32_t n, uint32_t max, struct pt_cache_ref *refs, uint8_t mark);

uint32_t pt_expert_cache_acquire_ahead(pt_expert_cache *c, uint32_t layer,
				       const uint32_t *experts, uint32_t n, uint32_t max,
				       struct pt_cache_ref *refs)
{
	return take_ahead(c, layer, experts, n, max, refs, AHEAD_GUESS);
}

uint32_t pt_expert_cache_acquire_warm(pt_expert_cache *c, uint32_t layer,
				      const uint32_t *experts, uint32_t n, uint32_t max,
				      struct pt_cache_ref *refs)
{
	return take_ahead(c, layer, experts, n, max, refs, AHEAD_WARM);
}

static uint32_t take_ahead(pt_expert_cache *c, uint32_t layer, const uint32_t *experts,
			   uint32_t n, uint32_t max, struct pt_cache_ref *refs, uint8_t mark)
{
	struct layer_state *l = &c->layers[layer];
	uint32_t m = 0;
	pthread_mutex_lock(&c->mu);
	/* the guessed experts already present are the layer's likely hits: never victims here
	 * (a real acquire pins its hits before choosing victims too) */
	for (uint32_t i = 0; i < n; i++)
		if (experts[i] < c->cfg.n_expert && l->expert_slot[experts[i]] >= 0)
			l->slot_pins[l->expert_slot[experts[i]]]++;
	for (uint32_t i = 0; i < n && m < max; i++) {
		const uint32_t e = experts[i];
		if (e >= c->cfg.n_expert || l->expert_slot[e] >= 0)
			continue; /* present, loading, or a bad id (the real acquire reports it) */
		int32_t s = pick_victim(c, l);
		if (s < 0)
			break;
		take_slot(l, s);
		l->slot_expert[s] = (int32_t)e;
		l->slot_state[s] = SLOT_LOADING;
		l->slot_ahead[s] = mark;
		l->slot_last[s] = l->clock;
		l->expert_slot[e] = s;
		l->st.ahead_reads++;
		refs[m++] = (struct pt_cache_ref){ .expert = e, .slot = (uint32_t)s, .hit = false };
	}
	for (uint32_t i = 0; i < n; i++) { /* drop the guard pins (not the new reads': none) */
		const uint32_t e = experts[i];
		if (e >= c->cfg.n_expert || l->expert_slot[e] < 0)
			continue;
		const int32_t s = l->expert_slot[e];
		bool taken_now = false;
		for (uint32_t j = 0; j < m; j++)
			taken_now |= refs[j].expert == e;
		if (!taken_now && l->slot_pins[s])
			l->slot_pins[s]--;
	}
	pthread_mutex_unlock(&c->mu);
	return m;
}

bool pt_expert_cache_cancel_ahead(pt_expert_cache *c, uint32_t layer, uint32_t slot)
{
	struct layer_state *l = &c->layers[layer];
	bool ok;
	pthread_mutex_lock(&c->mu);
	ok = l->slot_state[slot] == SLOT_LOADING && l->slot_ahead[slot] && !l->slot_pins[slot];
	if (ok) {
		l->expert_slot[l->slot_expert[slot]] = -1;
		l->slot_expert[slot] = -1;
		l->slot_state[slot] = SLOT_EMPTY;
		l->slot_ahead[slot] = 0;
		l->st.slots_used--;
		l->st.ahead_reads--;
		l->st.ahead_dropped++;
	}
	pthread_mutex_unlock(&c->mu);
	return ok;
}

void pt_expert_cache_publish(pt_expert_cache *c, uint32_t layer, uint32_t slot, bool ok)
{
	struct layer_state *l = &c->layers[layer];
	pthread_mutex_lock(&c->mu);
	if (l->slot_state[slot] == SLOT_LOADING) {
		if (ok) {
			l->slot_state[slot] = SLOT_READY;
		} else {
			l->expert_slot[l->slot_expert[slot]] = -1;
			l->slot_expert[slot] = -1;
			l->slot_state[slot] = SLOT_EMPTY;
			l->slot_pins[slot] = 0; /* holders unpin by expert and find nothing */
			l->slot_ahead[slot] = 0;
			l->st.slots_used--;
		}
	}
	pthread_mutex_unlock(&c->mu);
}

void pt_expert_cache_release(pt_expert_cache *c, uint32_t layer, const struct pt_cache_ref *refs,
			     uint32_t n)
{
	struct layer_state *l = &c->layers[layer];
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < n; i++)
		if (l->slot_pins[refs[i].slot])
			l->slot_pins[refs[i].slot]--;
	pthread_mutex_unlock(&c->mu);
}

int pt_expert_cache_find(pt_expert_cache *c, uint32_t layer, uint32_t expert, uint32_t *slot)
{
	struct layer_state *l = &c->layers[layer];
	int state = 0;
	if (expert >= c->cfg.n_expert)
		return 0;
	pthread_mutex_lock(&c->mu);
	int32_t s = l->expert_slot[expert];
	if (s >= 0) {
		*slot = (uint32_t)s;
		state = l->slot_state[s] == SLOT_READY ? 2 : 1;
	}
	pthread_mutex_unlock(&c->mu);
	return state;
}

void pt_expert_cache_unpin(pt_expert_cache *c, uint32_t layer, uint32_t expert)
{
	struct layer_state *l = &c->layers[layer];
	if (expert >= c->cfg.n_expert)
		return;
	pthread_mutex_lock(&c->mu);
	int32_t s = l->expert_slot[expert];
	if (s >= 0 && l->slot_pins[s])
		l->slot_pins[s]--;
	pthread_mutex_unlock(&c->mu);
}

int32_t pt_expert_cache_lookup(pt_expert_cache *c, uint32_t layer, uint32_t expert)
{
	struct layer_state *l = &c->layers[layer];
	int32_t s;
	if (expert >= c->cfg.n_expert)
		return -1;
	pthread_mutex_lock(&c->mu);
	s = l->expert_slot[expert];
	if (s >= 0 && l->slot_state[s] != SLOT_READY)
		s = -1;
	pthread_mutex_unlock(&c->mu);
	return s;
}

enum pt_status pt_expert_cache_waves(pt_expert_cache *c, uint32_t layer, uint32_t *experts,
				     uint32_t n, bool halves, uint32_t *wave_end,
				     uint32_t *n_waves, struct pt_error *err)
{
	struct layer_state *l = &c->layers[layer];
	uint32_t cap, front = 0;
	pthread_mutex_lock(&c->mu);
	cap = unpinned(c, l);
	for (uint32_t i = 0; i < n; i++) { /* stable partition: resident experts first */
		if (experts[i] >= c->cfg.n_expert) {
			pthread_mutex_unlock(&c->mu);
			return pt_error_set(err, PT_E_INVALID, "expert %u out of range", experts[i]);
		}
		int32_t s = l->expert_slot[experts[i]];
		if (s >= 0 && l->slot_state[s] == SLOT_READY) {
			uint32_t e = experts[i];
			memmove(experts + front + 1, experts + front, (i - front) * sizeof *experts);
			experts[front++] = e;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (cap == 0 && n > 0)
		return pt_error_set(err, PT_E_LIMIT, "no unpinned expert slot on layer %u", layer);
	if (halves && n > cap)
		cap = cap > 1 ? cap / 2 : 1;
	*n_waves = 0;
	for (uint32_t done = 0; done < n;) {
		done = n - done > cap ? done + cap : n;
		wave_end[(*n_waves)++] = done;
	}
	return PT_OK;
}

void pt_expert_cache_note_read(pt_expert_cache *c, uint32_t layer, uint64_t bytes, uint64_t ns,
			       bool ok)
{
	pthread_mutex_lock(&c->mu);
	c->layers[layer].st.bytes_read += bytes;
	c->layers[layer].st.read_ns += ns;
	c->layers[layer].st.read_errors += !ok;
	pthread_mutex_unlock(&c->mu);
}

void pt_expert_cache_note_wait(pt_expert_cache *c, uint32_t layer, uint64_t ns)
{
	pthread_mutex_lock(&c->mu);
	c->layers[layer].st.wait_ns += ns;
	pthread_mutex_unlock(&c->mu);
}

void pt_expert_cache_stats(pt_expert_cache *c, uint32_t layer, struct pt_cache_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->cfg.n_layers; i++) {
		const struct pt_cache_stats *s = &c->layers[i].st;
		if (layer != UINT32_MAX && i != layer)
			continue;
		out->requests += s->requests;
		out->hits += s->hits;
		out->misses += s->misses;
		out->evictions += s->evictions;
		out->read_errors += s->read_errors;
		out->bytes_read += s->bytes_read;
		out->read_ns += s->read_ns;
		out->wait_ns += s->wait_ns;
		out->slots_used += s->slots_used;
		out->ahead_reads += s->ahead_reads;
		out->ahead_used += s->ahead_used;
		out->ahead_wasted += s->ahead_wasted;
		out->ahead_dropped += s->ahead_dropped;
	}
	pthread_mutex_unlock(&c->mu);
}

void pt_expert_cache_resident(pt_expert_cache *c, uint32_t layer, uint8_t *resident,
			      uint32_t n_expert)
{
	memset(resident, 0, n_expert);
	if (layer >= c->cfg.n_layers)
		return;
	pthread_mutex_lock(&c->mu);
	const struct layer_state *l = &c->layers[layer];
	for (uint32_t s = 0; s < c->slots_on; s++)
		if (l->slot_state[s] == SLOT_READY && l->slot_expert[s] >= 0 &&
		    (uint32_t)l->slot_expert[s] < n_expert)
			resident[l->slot_expert[s]] = 1;
	pthread_mutex_unlock(&c->mu);
}
