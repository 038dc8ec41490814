/* store.c - the expert provider over the slot cache and the read engine, or the mapping. */
#include "expert/store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "quant/types.h"
#include "util/alloc.h"

struct pt_expert_store;
static void flush_pcache(struct pt_expert_store *s);

#define A4K(x) (((x) + PT_IO_ALIGN - 1) & ~(uint64_t)(PT_IO_ALIGN - 1))

/* A read-ahead waiting for the demand reads in flight to finish (its slot is LOADING). */
struct deferred_read {
	uint32_t m, expert, slot;
};

struct batch_ent {
	uint32_t expert;
	bool handed;   /* its prefetch pin went to a get */
	bool reported; /* ready() told the caller */
};

struct pt_expert_store {
	struct pt_expert_store_config cfg;
	const struct pt_expert_layout *lay;
	const struct pt_pack *pack;
	pt_expert_cache *cache;
	pt_io *io;
	pthread_mutex_t mu;
	struct batch_ent *batch;
	uint32_t batch_n, batch_moe;
	struct pt_cache_ref *refs;
	struct pt_io_job *jobs;
	bool failed;
	bool ahead_on; /* read-ahead hints are acted on */
	bool warming;  /* profile warm-up reads may be in flight (reaped before an acquire) */
	/* Read-ahead is submitted only while no demand read is in flight: submitted together,
	 * the guesses share the disk with the reads a layer blocks on and all finish at about
	 * the same time (docs/PERFORMANCE.md, "Demand reads first"). */
	struct deferred_read *deferred;
	uint32_t n_deferred, max_deferred;
	uint32_t n_demand; /* demand reads submitted, not yet completed */
	/* A wave's misses past the first `pace` wait here, slots LOADING, and go to the disk as
	 * earlier ones land: submitted together, the reads share the disk and the first lands
	 * when nearly all have (a 4,096-row prefill of 28-expert waves waited ~35 ms at every
	 * wave); paced, the first lands after `pace` reads' time and the rest stream behind
	 * the compute.  A decode's misses (at most its top-k) fit in the pace. */
	struct deferred_read *paced;
	uint32_t n_paced, pace;
	uint8_t *touched;    /* [n_moe][slots_per_layer]: the slot has been read into */
	uint64_t cold_reads; /* reads into a slot's never-touched memory */
	double populate_s;   /* the open's pt_expert_cache_populate */
	struct pt_error sticky;
	char desc[1200];
	/* lazy pack cache */
	pt_pcache *pc;
	uint32_t pc_file;
	bool pc_off; /* a write failed: stop writing, keep running */
	struct pt_pcache_item *pend; /* read from the source, to copy into the pack cache */
	uint32_t *pend_slot;
	uint32_t n_pend;
	uint64_t pc_hits, pc_bad, pc_written;
};

uint64_t pt_expert_store_slot_bytes(const struct pt_expert_layout *l, const struct pt_pack *p)
{
	uint64_t best = 0;
	for (uint32_t m = 0; m < l->n_moe; m++) {
		uint64_t need = 0;
		if (p) {
			need = p->layers[m].stride;
		} else {
			for (uint32_t i = 0; i < l->moe[m].n_parts; i++) /* aligned cover of a slice */
				need += A4K(l->moe[m].part[i].stride + PT_IO_ALIGN - 1);
		}
		if (need > best)
			best = need;
	}
	return best;
}

/* The reads that bring expert e of MoE layer m into slot memory, and where its parts land. */
static void geometry(const pt_expert_store *s, uint32_t m, uint32_t e, uint8_t *slot,
		     struct pt_io_job *job, struct pt_expert_view *view)
{
	const struct pt_expert_layer *L = &s->lay->moe[m];
	uint64_t cursor = 0;
	view->n_parts = L->n_parts;
	job->file = 0; /* the source; make_job may redirect to the pack cache */
	job->tag = (uint64_t)m << 32 | e;
	job->layer = L->layer;
	job->expert = e;
	if (s->pack) {
		const struct pt_pack_layer *P = &s->pack->layers[m];
		job->n_ranges = 1;
		job->r[0] = (struct pt_io_range){ .offset = P->offset + (uint64_t)e * P->stride,
						  .len = P->stride, .need = P->stride, .dst = slot };
		for (uint32_t i = 0; i < L->n_parts; i++)
			view->part[i] = slot + P->part_off[i];
		return;
	}
	job->n_ranges = L->n_parts;
	for (uint32_t i = 0; i < L->n_parts; i++) {
		uint64_t off = L->part[i].file_offset + (uint64_t)e * L->part[i].stride;
		uint64_t aoff = off & ~(uint64_t)(PT_IO_ALIGN - 1);
		uint64_t len = A4K(off + L->part[i].stride) - aoff;
		job->r[i] = (struct pt_io_range){ .offset = aoff, .len = len,
						  .need = off + L->part[i].stride - aoff,
						  .dst = slot + cursor, .file = L->part[i].file };
		view->part[i] = slot + cursor + (off - aoff);
		cursor += len;
	}
}

static int32_t moe_of(const pt_expert_store *s, uint32_t layer)
{
	return pt_expert_layout_find(s->lay, layer);
}

static enum pt_status open_pcache(pt_expert_store *s, uint64_t slot_bytes,
				  struct pt_error *err)
{
	const struct pt_expert_store_config *c = &s->cfg;
	char id[1024];
	snprintf(id, sizeof id, "%s|%s|%s", c->model_path, c->identity ? c->identity : "",
		 s->pack ? (s->pack->x16 ? "pack-x16" : "pack") : "gguf");
	struct pt_pcache_config pcc = { .dir = c->pack_cache_dir, .size_bytes = c->pack_cache_size,
					.entry_bytes = (slot_bytes + 4095) & ~4095ull,
					.n_moe = s->lay->n_moe, .n_expert = s->lay->n_expert,
					.identity = id,
					.test_crash_before_commit = c->pack_cache_test_crash };
	enum pt_status st = pt_pcache_open(&pcc, &s->pc, err);
	if (st == PT_OK)
		st = pt_io_add_file(s->io, pt_pcache_data_path(s->pc), &s->pc_file, err);
	s->pend = pt_calloc(s->lay->n_expert, sizeof *s->pend);
	s->pend_slot = pt_calloc(s->lay->n_expert, sizeof *s->pend_slot);
	if (st == PT_OK && (!s->pend || !s->pend_slot))
		st = pt_error_set(err, PT_E_NOMEM, "pack cache");
	return st;
}

static enum pt_status open_cache(pt_expert_store *s, struct pt_error *err)
{
	const struct pt_expert_store_config *c = &s->cfg;
	const uint32_t n_jobs = s->lay->n_expert ? s->lay->n_expert : 1; /* s->jobs' size */
	struct pt_cache_config cc = { .n_layers = s->lay->n_moe, .n_expert = s->lay->n_expert,
				      .slots_per_layer = c->slots_per_layer,
				      .slot_bytes = pt_expert_store_slot_bytes(s->lay, s->pack),
				      .policy = c->policy };
	struct pt_io_config ic = { .path = s->pack ? s->pack->path : c->model_path,
				   .mode = c->mode, .max_jobs = c->slots_per_layer + 8,
				   .threads = c->io_threads, .force_pread = c->force_pread,
				   .fault = c->fault, .fault_ctx = c->fault_ctx };
	enum pt_status st = pt_expert_cache_create(&cc, &s->cache, err);
	/* the read queue's size, and never more than s->jobs holds */
	s->max_deferred = ic.max_jobs < n_jobs ? ic.max_jobs : n_jobs;
	s->deferred = pt_calloc(s->max_deferred, sizeof *s->deferred);
	s->paced = pt_calloc(n_jobs, sizeof *s->paced);
	s->touched = pt_calloc((size_t)s->lay->n_moe * c->slots_per_layer + 1, 1);
	s->pace = c->demand_depth ? c->demand_depth
				  : (uint32_t)(PT_STORE_PACE_BYTES / (cc.slot_bytes ? cc.slot_bytes : 1));
	if (s->pace < PT_STORE_PACE_MIN)
		s->pace = c->demand_depth ? c->demand_depth : PT_STORE_PACE_MIN;
	if (st == PT_OK && (!s->deferred || !s->paced || !s->touched))
		st = pt_error_set(err, PT_E_NOMEM, "expert store read-ahead queue");
	if (st == PT_OK && c->populate) {
		bool populated;
		const uint64_t t0 = pt_io_now_ns();
		pt_expert_cache_populate(s->cache, &populated);
		s->populate_s = (double)(pt_io_now_ns() - t0) * 1e-9;
		if (populated) /* no read lands in untouched memory: none needs a kernel worker */
			memset(s->touched, 1, (size_t)s->lay->n_moe * c->slots_per_layer);
	}
	if (st == PT_OK)
		st = pt_io_open(&ic, &s->io, err);
	/* a split model's other parts: io file i is the layout's file i (geometry's .file) */
	for (uint32_t i = 1; st == PT_OK && !s->pack && i < s->lay->n_files; i++) {
		uint32_t id = 0;
		st = pt_io_add_file(s->io, s->lay->files[i], &id, err);
		if (st == PT_OK && id != i)
			st = pt_error_set(err, PT_E_INVALID, "expert store: file %u opened as %u", i,
					  id);
	}
	if (st == PT_OK && c->pack_cache_dir)
		st = open_pcache(s, cc.slot_bytes, err);
	if (st != PT_OK)
		return st;
	snprintf(s->desc, sizeof s->desc, "%u slots/layer %s, %s, %s", c->slots_per_layer,
		 pt_cache_policy_name(c->policy), pt_io_describe(s->io),
		 s->pack ? "expert pack (1 read/expert)" : "GGUF slices");
	if (s->pc) {
		size_t len = strlen(s->desc);
		snprintf(s->desc + len, sizeof s->desc - len, ", pack cache %s (%u of %u entries)",
			 pt_pcache_data_path(s->pc), pt_pcache_used(s->pc),
			 pt_pcache_entries(s->pc));
	}
	return PT_OK;
}

enum pt_status pt_expert_store_open(const struct pt_expert_store_config *cfg,
				    pt_expert_store **out, struct pt_error *err)
{
	pt_expert_store *s;
	uint32_t n = cfg->layout->n_expert ? cfg->layout->n_expert : 1;
	enum pt_status st = PT_OK;
	*out = NULL;
	if (cfg->mode == PT_IO_MMAP && !cfg->map_base)
		return pt_error_set(err, PT_E_INVALID, "mmap expert mode without a mapping");
	s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "expert store");
	s->cfg = *cfg;
	s->lay = cfg->layout;
	s->pack = cfg->mode == PT_IO_MMAP ? NULL : cfg->pack;
	s->ahead_on = !cfg->no_read_ahead;
	pthread_mutex_init(&s->mu, NULL);
	s->batch = pt_calloc(n, sizeof *s->batch);
	s->refs = pt_calloc(n, sizeof *s->refs);
	s->jobs = pt_calloc(n, sizeof *s->jobs);
	if (!s->batch || !s->refs || !s->jobs)
		st = pt_error_set(err, PT_E_NOMEM, "expert store");
	else if (cfg->mode == PT_IO_MMAP)
		snprintf(s->desc, sizeof s->desc, "mmap (pages on demand, no expert cache)");
	else
		st = open_cache(s, err);
	if (st != PT_OK) {
		pt_expert_store_close(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

void pt_expert_store_close(pt_expert_store *s)
{
	if (!s)
		return;
	pt_io_close(s->io); /* first: reads may still target slot memory */
	if (s->pc && s->n_pend && !s->failed)
		flush_pcache(s);
	pt_pcache_close(s->pc);
	pt_free(s->pend);
	pt_free(s->pend_slot);
	pt_expert_cache_destroy(s->cache);
	pthread_mutex_destroy(&s->mu);
	pt_free(s->deferred);
	pt_free(s->paced);
	pt_free(s->touched);
	pt_free(s->batch);
	pt_free(s->refs);
	pt_free(s->jobs);
	pt_free(s);
}

const char *pt_expert_store_describe(const pt_expert_store *s)
{
	return s->desc;
}

static uint64_t job_bytes(const struct pt_io_job *j)
{
	uint64_t b = 0;
	for (uint32_t i = 0; i < j->n_ranges; i++)
		b += j->r[i].len;
	return b;
}

static void fail_sticky(pt_expert_store *s, const struct pt_error *e)
{
	if (!s->failed) {
		s->failed = true;
		s->sticky = *e;
	}
}

/* The source read for expert x of MoE layer m into slot, or the pack-cache read when the
 * pack cache holds it. */
static void make_job(pt_expert_store *s, uint32_t m, uint32_t x, uint32_t slot, bool use_pc,
		     struct pt_io_job *job)
{
	struct pt_expert_view v;
	uint64_t len;
	uint8_t *p = pt_expert_cache_slot_ptr(s->cache, m, slot);
	geometry(s, m, x, p, job, &v);
	uint8_t *t = &s->touched[(size_t)m * s->cfg.slots_per_layer + slot];
	job->cold = !*t;
	s->cold_reads += job->cold;
	*t = 1;
	int32_t entry = use_pc && s->pc ? pt_pcache_lookup(s->pc, m, x, &len) : -1;
	if (entry >= 0 && len == job_bytes(job)) { /* the slot image, in one read */
		job->tag |= PT_STORE_TAG_PCACHE;
		job->file = s->pc_file;
		job->n_ranges = 1;
		job->r[0] = (struct pt_io_range){ .offset = pt_pcache_entry_offset(s->pc,
										 (uint32_t)entry),
						  .len = len, .need = len, .dst = p };
	}
}

/* A pack-cache read finished: use it if its bytes check out, else read the source. */
static void complete_pc(pt_expert_store *s, uint64_t tag, uint32_t m, uint32_t x,
			uint32_t slot, enum pt_status st, uint64_t ns)
{
	uint64_t len;
	struct pt_io_job job;
	struct pt_error e = { 0 };
	int32_t entry = pt_pcache_lookup(s->pc, m, x, &len);
	uint8_t *p = pt_expert_cache_slot_ptr(s->cache, m, slot);
	if (st == PT_OK && entry >= 0 && pt_pcache_check(s->pc, (uint32_t)entry, p)) {
		pt_expert_cache_publish(s->cache, m, slot, true);
		pt_expert_cache_note_read(s->cache, m, len, ns, true);
		s->pc_hits++;
		return;
	}
	s->pc_bad++;
	if (entry >= 0)
		pt_pcache_drop(s->pc, (uint32_t)entry); /* torn or stale: never used */
	make_job(s, m, x, slot, false, &job);
	job.tag |= tag & PT_STORE_TAG_AHEAD;
	if (pt_io_submit(s->io, &job, 1, &e) != PT_OK) {
		pt_expert_cache_publish(s->cache, m, slot, false);
		fail_sticky(s, &e);
	} else if (!(tag & PT_STORE_TAG_AHEAD)) {
		s->n_demand++;
	}
}

/* A read finished: publish or empty its slot, count it, remember a failure. */
static void complete(pt_expert_store *s, uint64_t tag, enum pt_status st, uint64_t ns,
		     const struct pt_error *e)
{
	uint32_t m = (uint32_t)(tag >> 32) & 0x3fffffffu, x = (uint32_t)tag, slot;
	struct pt_io_job job;
	if (!(tag & PT_STORE_TAG_AHEAD) && s->n_demand)
		s->n_demand--;
	if (pt_expert_cache_find(s->cache, m, x, &slot) != 1)
		return;
	if (tag & PT_STORE_TAG_PCACHE) {
		complete_pc(s, tag, m, x, slot, st, ns);
		return;
	}
	make_job(s, m, x, slot, false, &job);
	pt_expert_cache_publish(s->cache, m, slot, st == PT_OK);
	pt_expert_cache_note_read(s->cache, m, st == PT_OK ? job_bytes(&job) : 0, ns,
				  st == PT_OK);
	if (st != PT_OK)
		fail_sticky(s, e);
	else if (s->pc && !s->pc_off && s->n_pend < s->lay->n_expert) {
		s->pend[s->n_pend] = (struct pt_pcache_item){ .moe = m, .expert = x,
							      .len = job_bytes(&job) };
		s->pend_slot[s->n_pend++] = slot;
	}
}

/* Copies experts read from the source into the pack cache while their slots still hold
 * them (eviction happens only in acquire, under the same mutex). */
static void flush_pcache(pt_expert_store *s)
{
	uint32_t n = 0, slot;
	for (uint32_t i = 0; i < s->n_pend; i++) {
		struct pt_pcache_item it = s->pend[i];
		if (pt_expert_cache_find(s->cache, it.moe, it.expert, &slot) != 2 ||
		    slot != s->pend_slot[i])
			continue;
		it.data = pt_expert_cache_slot_ptr(s->cache, it.moe, slot);
		s->pend[n++] = it;
	}
	for (uint32_t i = 0; i < n && !s->pc_off; i += 64) {
		struct pt_error e = { 0 };
		uint32_t k = n - i < 64 ? n - i : 64;
		if (pt_pcache_put(s->pc, s->pend + i, k, &e) != PT_OK)
			s->pc_off = true; /* e.g. disk full: keep running from the source */
		else
			s->pc_written += k;
	}
	s->n_pend = 0;
}

uint64_t pt_expert_store_cold_reads(const pt_expert_store *s)
{
	return s->cold_reads;
}

double pt_expert_store_populate_s(const pt_expert_store *s)
{
	return s->populate_s;
}

void pt_expert_store_pcache_stats(const pt_expert_store *s, uint64_t *hits, uint64_t *bad,
				  uint64_t *written)
{
	*hits = s->pc_hits;
	*bad = s->pc_bad;
	*written = s->pc_written;
}

static void flush_deferred(pt_expert_store *s);
static bool demand_in_flight(pt_expert_store *s);

/* Empties the slots of the paced reads (a failure, or a batch given up). */
static void drop_paced(pt_expert_store *s)
{
	for (uint32_t i = 0; i < s->n_paced; i++)
		pt_expert_cache_publish(s->cache, s->paced[i].m, s->paced[i].slot, false);
	s->n_paced = 0;
}

static uint32_t io_room(const pt_expert_store *s);

/* Sends paced demand reads to the disk, in order, while fewer than the pace are in flight. */
static void top_up_paced(pt_expert_store *s)
{
	uint32_t done = 0;
	while (done < s->n_paced && s->n_demand < s->pace && io_room(s) && !s->failed) {
		const struct deferred_read d = s->paced[done++];
		struct pt_io_job job;
		struct pt_error e = { 0 };
		make_job(s, d.m, d.expert, d.slot, true, &job);
		if (pt_io_submit(s->io, &job, 1, &e) != PT_OK) {
			pt_expert_cache_publish(s->cache, d.m, d.slot, false);
			fail_sticky(s, &e);
			break;
		}
		s->n_demand++;
	}
	memmove(s->paced, s->paced + done, (s->n_paced - done) * sizeof *s->paced);
	s->n_paced -= done;
	if (s->failed)
		drop_paced(s);
}

/* Reaps completions; blocks for at most one when block.  With flush, the deferred
 * read-ahead goes to the disk as soon as no demand read is in flight (and before blocking
 * on an empty queue). */
static enum pt_status reap_some(pt_expert_store *s, bool block, bool flush,
				struct pt_error *err)
{
	for (;;) {
		struct pt_error e = { 0 };
		bool got;
		uint64_t tag, ns;
		if (flush && s->n_paced)
			top_up_paced(s);
		if (flush && s->n_deferred && (!demand_in_flight(s) || !pt_io_pending(s->io)))
			flush_deferred(s);
		enum pt_status st = pt_io_wait(s->io, block, &got, &tag, &ns, &e);
		if (!got) {
			if (st != PT_OK && !s->failed) {
				s->failed = true;
				s->sticky = e;
			}
			return s->failed ? pt_error_set(err, s->sticky.code, "%s", s->sticky.msg)
					 : PT_OK;
		}
		complete(s, tag, st, ns, &e);
		block = false; /* then drain whatever else is ready */
	}
}

static enum pt_status reap(pt_expert_store *s, bool block, struct pt_error *err)
{
	return reap_some(s, block, true, err);
}

static uint32_t io_room(const pt_expert_store *s)
{
	const uint32_t cap = pt_io_capacity(s->io), pending = pt_io_pending(s->io);
	return cap > pending ? cap - pending : 0;
}

/* Submits s->jobs[0..nj): demand reads are counted in n_demand, read-ahead is tagged.  On
 * failure nothing was queued: the jobs' slots are emptied and the store fails. */
static enum pt_status submit_jobs(pt_expert_store *s, uint32_t nj, bool ahead,
				  struct pt_error *err)
{
	enum pt_status st = PT_OK;
	for (uint32_t i = 0; ahead && i < nj; i++)
		s->jobs[i].tag |= PT_STORE_TAG_AHEAD;
	/* Demand reads wait for room: warm-up and read-ahead reads already in flight may fill
	 * the queue (a slow disk).  Reaping here never flushes the deferred reads: they would
	 * reuse s->jobs, which holds these jobs. */
	while (!ahead && st == PT_OK && nj > io_room(s) && pt_io_pending(s->io))
		st = reap_some(s, true, false, err);
	if (st == PT_OK && nj)
		st = pt_io_submit(s->io, s->jobs, nj, err);
	if (st == PT_OK) {
		s->n_demand += ahead ? 0 : nj;
		return st;
	}
	for (uint32_t i = 0; i < nj; i++) {
		uint32_t slot;
		const uint32_t m = (uint32_t)(s->jobs[i].tag >> 32) & 0x3fffffffu;
		if (pt_expert_cache_find(s->cache, m, s->jobs[i].expert, &slot) == 1)
			pt_expert_cache_publish(s->cache, m, slot, false);
	}
	struct pt_error e = err ? *err : (struct pt_error){ .code = st };
	fail_sticky(s, &e);
	return st;
}

/* Submits the reads of refs' misses. */
static enum pt_status submit(pt_expert_store *s, uint32_t m, const struct pt_cache_ref *refs,
			     uint32_t n, bool ahead, struct pt_error *err)
{
	uint32_t nj = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!refs[i].hit)
			make_job(s, m, refs[i].expert, refs[i].slot, true, &s->jobs[nj++]);
	return submit_jobs(s, nj, ahead, err);
}

/* Submits the reads of refs' misses a layer waits for: up to the pace now, the rest paced
 * (after any paced before them). */
static enum pt_status submit_demand(pt_expert_store *s, uint32_t m,
				    const struct pt_cache_ref *refs, uint32_t n,
				    struct pt_error *err)
{
	uint32_t nj = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (refs[i].hit)
			continue;
		if (!s->n_paced && s->n_demand + nj < s->pace)
			make_job(s, m, refs[i].expert, refs[i].slot, true, &s->jobs[nj++]);
		else
			s->paced[s->n_paced++] = (struct deferred_read){ m, refs[i].expert,
									 refs[i].slot };
	}
	enum pt_status st = submit_jobs(s, nj, false, err);
	if (st != PT_OK)
		drop_paced(s);
	return st;
}

/* Submits the deferred read-ahead that fits in the read queue; the rest stays deferred. */
static void flush_deferred(pt_expert_store *s)
{
	struct pt_error e = { 0 };
	const uint32_t room = io_room(s);
	const uint32_t n = s->n_deferred < room ? s->n_deferred : room;
	for (uint32_t i = 0; i < n; i++)
		make_job(s, s->deferred[i].m, s->deferred[i].expert, s->deferred[i].slot, true,
			 &s->jobs[i]);
	memmove(s->deferred, s->deferred + n, (s->n_deferred - n) * sizeof *s->deferred);
	s->n_deferred -= n;
	if (submit_jobs(s, n, true, &e) != PT_OK)
		pt_error_clear(&e); /* sticky: the next get reports it */
}

/* Layer m's experts[0..n) are wanted now: their deferred guesses become demand reads; with
 * drop, the layer's other deferred guesses (wrong ones) are dropped unread. */
static enum pt_status settle_deferred(pt_expert_store *s, uint32_t m, const uint32_t *experts,
				      uint32_t n, bool drop, struct pt_error *err)
{
	uint32_t keep = 0, nj = 0;
	for (uint32_t i = 0; i < s->n_deferred; i++) {
		const struct deferred_read d = s->deferred[i];
		bool wanted = false;
		for (uint32_t j = 0; d.m == m && j < n && !wanted; j++)
			wanted = experts[j] == d.expert;
		if (wanted)
			make_job(s, m, d.expert, d.slot, true, &s->jobs[nj++]);
		else if (d.m == m && drop && pt_expert_cache_cancel_ahead(s->cache, m, d.slot))
			continue;
		else
			s->deferred[keep++] = d;
	}
	s->n_deferred = keep;
	return submit_jobs(s, nj, false, err);
}

static void end_batch(pt_expert_store *s)
{
	drop_paced(s); /* a batch given up before all its reads went out */
	for (uint32_t i = 0; i < s->batch_n; i++)
		if (!s->batch[i].handed)
			pt_expert_cache_unpin(s->cache, s->batch_moe, s->batch[i].expert);
	s->batch_n = 0;
}

static enum pt_status bad_layer(uint32_t layer, struct pt_error *err)
{
	return pt_error_set(err, PT_E_INVALID, "layer %u has no routed experts", layer);
}

enum pt_status pt_expert_store_prefetch(pt_expert_store *s, uint32_t layer,
					const uint32_t *experts, uint32_t n, struct pt_error *err)
{
	int32_t m = moe_of(s, layer);
	uint32_t nr = 0;
	enum pt_status st = PT_OK;
	if (m < 0)
		return bad_layer(layer, err);
	pthread_mutex_lock(&s->mu);
	if (s->failed) {
		st = pt_error_set(err, s->sticky.code, "%s", s->sticky.msg);
		goto out;
	}
	if (s->cache)
		end_batch(s);
	if (s->n_pend)
		flush_pcache(s);
	if (s->warming) { /* warm-up reads that landed count as hits: publish them first */
		struct pt_error e = { 0 };
		if (reap(s, false, &e) != PT_OK)
			pt_error_clear(&e); /* sticky: reported below */
		s->warming = pt_io_pending(s->io) > 0;
	}
	s->batch_moe = (uint32_t)m;
	if (!s->cache) { /* mmap: everything is "ready" */
		for (uint32_t i = 0; i < n && i < s->lay->n_expert; i++)
			s->batch[s->batch_n++] = (struct batch_ent){ .expert = experts[i],
								     .handed = true };
		goto out;
	}
	st = pt_expert_cache_acquire(s->cache, (uint32_t)m, experts, n, s->refs, &nr, err);
	if (st != PT_OK)
		goto out;
	for (uint32_t i = 0; i < nr; i++)
		s->batch[i] = (struct batch_ent){ .expert = s->refs[i].expert };
	s->batch_n = nr;
	st = submit_demand(s, (uint32_t)m, s->refs, nr, err);
	if (st == PT_OK && s->n_deferred)
		st = settle_deferred(s, (uint32_t)m, experts, n, true, err);
out:
	pthread_mutex_unlock(&s->mu);
	return st;
}

enum pt_status pt_expert_store_ready(pt_expert_store *s, uint32_t *expert, bool *got,
				     struct pt_error *err)
{
	enum pt_status st = PT_OK;
	uint32_t slot;
	*got = false;
	pthread_mutex_lock(&s->mu);
	for (int pass = 0; pass < 2 && !*got && st == PT_OK; pass++) {
		if (pass == 1 && s->cache)
			st = reap(s, false, err);
		for (uint32_t i = 0; i < s->batch_n && !*got; i++) {
			struct batch_ent *b = &s->batch[i];
			if (b->reported || (s->cache && pt_expert_cache_find(s->cache, s->batch_moe,
									    b->expert, &slot) != 2))
				continue;
			b->reported = true;
			*expert = b->expert;
			*got = true;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return st;
}

enum pt_status pt_expert_store_next(pt_expert_store *s, uint32_t *expert, bool *got,
				    struct pt_error *err)
{
	for (;;) {
		enum pt_status st = pt_expert_store_ready(s, expert, got, err);
		if (st != PT_OK || *got || !s->cache)
			return st;
		pthread_mutex_lock(&s->mu);
		uint32_t left = 0, m = s->batch_moe;
		for (uint32_t i = 0; i < s->batch_n; i++)
			left += !s->batch[i].reported;
		if (left && s->n_paced)
			top_up_paced(s);
		if (left && s->n_deferred && !pt_io_pending(s->io))
			flush_deferred(s);
		if (left && !pt_io_pending(s->io)) /* not ready and nothing in flight */
			st = s->failed ? pt_error_set(err, s->sticky.code, "%s", s->sticky.msg)
				       : pt_error_set(err, PT_E_IO, "layer %u: %u experts not loaded",
						      s->lay->moe[m].layer, left);
		else if (left) {
			uint64_t t0 = pt_io_now_ns();
			st = reap(s, true, err);
			pt_expert_cache_note_wait(s->cache, m, pt_io_now_ns() - t0);
		}
		pthread_mutex_unlock(&s->mu);
		if (st != PT_OK || !left)
			return st;
	}
}

/* Pins expert for a get: takes over its prefetch pin or acquires (and reads) it alone. */
static enum pt_status pin_for_get(pt_expert_store *s, uint32_t m, uint32_t e,
				  struct pt_error *err)
{
	struct pt_cache_ref ref;
	uint32_t n = 0;
	if (m == s->batch_moe)
		for (uint32_t i = 0; i < s->batch_n; i++)
			if (s->batch[i].expert == e && !s->batch[i].handed) {
				s->batch[i].handed = true;
				return PT_OK;
			}
	enum pt_status st = pt_expert_cache_acquire(s->cache, m, &e, 1, &ref, &n, err);
	if (st == PT_OK && s->n_deferred)
		st = settle_deferred(s, m, &e, 1, false, err);
	return st == PT_OK ? submit(s, m, &ref, 1, false, err) : st;
}

static enum pt_status get_cached(pt_expert_store *s, uint32_t m, uint32_t e,
				 struct pt_expert_view *out, struct pt_error *err)
{
	struct pt_io_job job;
	uint32_t slot = 0;
	int state;
	enum pt_status st;
	if (s->n_pend && pt_expert_cache_find(s->cache, m, e, &slot) == 0)
		flush_pcache(s); /* this get may evict */
	st = pin_for_get(s, m, e, err);
	if (st != PT_OK)
		return st;
	while ((state = pt_expert_cache_find(s->cache, m, e, &slot)) == 1) {
		uint64_t t0 = pt_io_now_ns();
		st = reap(s, true, err);
		pt_expert_cache_note_wait(s->cache, m, pt_io_now_ns() - t0);
		if (st != PT_OK)
			break;
	}
	if (st == PT_OK && state != 2)
		st = s->failed ? pt_error_set(err, s->sticky.code, "%s", s->sticky.msg)
			       : pt_error_set(err, PT_E_IO, "expert %u of layer %u was not loaded",
					      e, s->lay->moe[m].layer);
	if (st != PT_OK) {
		pt_expert_cache_unpin(s->cache, m, e);
		return st;
	}
	geometry(s, m, e, pt_expert_cache_slot_ptr(s->cache, m, slot), &job, out);
	return PT_OK;
}

enum pt_status pt_expert_store_get(pt_expert_store *s, uint32_t layer, uint32_t expert,
				   struct pt_expert_view *out, struct pt_error *err)
{
	int32_t m = moe_of(s, layer);
	enum pt_status st;
	if (m < 0)
		return bad_layer(layer, err);
	if (expert >= s->lay->n_expert)
		return pt_error_set(err, PT_E_INVALID, "expert %u out of range", expert);
	if (!s->cache) {
		const struct pt_expert_layer *L = &s->lay->moe[m];
		out->n_parts = L->n_parts;
		for (uint32_t i = 0; i < L->n_parts; i++)
			out->part[i] = (s->cfg.map_bases ? s->cfg.map_bases[L->part[i].file]
							  : s->cfg.map_base) +
				       L->part[i].file_offset + (uint64_t)expert * L->part[i].stride;
		return PT_OK;
	}
	pthread_mutex_lock(&s->mu);
	if (s->failed)
		st = pt_error_set(err, s->sticky.code, "%s", s->sticky.msg);
	else
		st = get_cached(s, (uint32_t)m, expert, out, err);
	pthread_mutex_unlock(&s->mu);
	return st;
}

/* Which bias a part is (0 gate, 1 up, 2 down), or -1: "blk.N.ffn_<x>_exps.bias". */
static int bias_index(const char *name)
{
	static const char *const suffix[3] = { ".ffn_gate_exps.bias", ".ffn_up_exps.bias",
						".ffn_down_exps.bias" };
	const size_t n = strlen(name);
	for (int i = 0; i < 3; i++) {
		const size_t k = strlen(suffix[i]);
		if (n > k && strcmp(name + n - k, suffix[i]) == 0)
			return i;
	}
	return -1;
}

enum pt_status pt_expert_store_get_mats_b(pt_expert_store *s, uint32_t layer, uint32_t expert,
					  const void **gate, const void **up, const void **down,
					  const float **bias, struct pt_error *err)
{
	struct pt_expert_view v;
	int32_t m = moe_of(s, layer);
	enum pt_status st = pt_expert_store_get(s, layer, expert, &v, err);
	*gate = *up = *down = NULL;
	if (bias)
		bias[0] = bias[1] = bias[2] = NULL;
	if (st != PT_OK)
		return st;
	for (uint32_t i = 0; i < v.n_parts; i++) {
		const struct pt_expert_part *P = &s->lay->moe[m].part[i];
		const int b = P->kind == PT_PART_OTHER && bias ? bias_index(P->name) : -1;
		if (P->kind == PT_PART_GATE || P->kind == PT_PART_GATE_UP)
			*gate = v.part[i];
		else if (P->kind == PT_PART_UP)
			*up = v.part[i];
		else if (P->kind == PT_PART_DOWN)
			*down = v.part[i];
		else if (b >= 0 && (P->type != PT_TYPE_F32 || ((uintptr_t)v.part[i] & 3u))) {
			pt_expert_store_release(s, layer, expert);
			return pt_error_set(err, PT_E_FORMAT, "expert %u of layer %u: %s slice not F32 "
					    "or misaligned", expert, layer, P->name);
		} else if (b >= 0) {
			bias[b] = (const float *)v.part[i];
		}
	}
	return PT_OK;
}

enum pt_status pt_expert_store_get_mats(pt_expert_store *s, uint32_t layer, uint32_t expert,
					const void **gate, const void **up, const void **down,
					struct pt_error *err)
{
	return pt_expert_store_get_mats_b(s, layer, expert, gate, up, down, NULL, err);
}

void pt_expert_store_release(pt_expert_store *s, uint32_t layer, uint32_t expert)
{
	int32_t m = moe_of(s, layer);
	if (m < 0 || !s->cache)
		return;
	pthread_mutex_lock(&s->mu);
	pt_expert_cache_unpin(s->cache, (uint32_t)m, expert);
	pthread_mutex_unlock(&s->mu);
}

/* Whether a read of the current batch is still in flight. */
static bool batch_loading(pt_expert_store *s)
{
	uint32_t slot;
	for (uint32_t i = 0; i < s->batch_n; i++)
		if (pt_expert_cache_find(s->cache, s->batch_moe, s->batch[i].expert, &slot) == 1)
			return true;
	return false;
}

/* Whether a read that a layer waits for is in flight: a miss of the current batch (its
 * own read, or a read-ahead it took over) or a single get's read. */
static bool demand_in_flight(pt_expert_store *s)
{
	return s->n_demand || s->n_paced || (s->cache && batch_loading(s));
}

void pt_expert_store_ahead(pt_expert_store *s, uint32_t layer, const uint32_t *experts,
			   uint32_t n)
{
	int32_t m = moe_of(s, layer);
	struct pt_error e = { 0 };
	if (m < 0 || !s->cache || !s->ahead_on)
		return;
	pthread_mutex_lock(&s->mu);
	/* leave the next acquire of n experts its room: read-ahead slots stay LOADING (not
	 * victims) until their reads land */
	const uint32_t slots = pt_expert_cache_active(s->cache);
	/* and room in the read queue for what is deferred plus the next demand acquire */
	const uint32_t busy = pt_io_pending(s->io) + s->n_deferred + n;
	const uint32_t qfree = s->max_deferred > busy ? s->max_deferred - busy : 0;
	const uint32_t room = slots > n ? (slots - n < qfree ? slots - n : qfree) : 0;
	const uint32_t nr = s->failed ? 0 : pt_expert_cache_acquire_ahead(s->cache, (uint32_t)m,
									  experts, n, room,
									  s->refs);
	const bool defer = demand_in_flight(s); /* demand reads first */
	for (uint32_t i = 0; defer && i < nr; i++)
		s->deferred[s->n_deferred++] = (struct deferred_read){ (uint32_t)m,
								       s->refs[i].expert,
								       s->refs[i].slot };
	if (nr && !defer && submit(s, (uint32_t)m, s->refs, nr, true, &e) != PT_OK)
		pt_error_clear(&e); /* submit made the failure sticky: the next get reports it */
	pthread_mutex_unlock(&s->mu);
}

uint32_t pt_expert_store_warm(pt_expert_store *s, uint32_t layer, const uint32_t *experts,
			      uint32_t n, uint32_t reserve)
{
	int32_t m = moe_of(s, layer);
	struct pt_error e = { 0 };
	if (m < 0 || !s->cache)
		return 0;
	pthread_mutex_lock(&s->mu);
	const uint32_t slots = pt_expert_cache_active(s->cache);
	const uint32_t busy = pt_io_pending(s->io) + s->n_deferred;
	const uint32_t qfree = s->max_deferred > busy ? s->max_deferred - busy : 0;
	uint32_t room = slots > reserve ? slots - reserve : 0;
	room = room < qfree ? room : qfree;
	const uint32_t nr = s->failed ? 0 : pt_expert_cache_acquire_warm(s->cache, (uint32_t)m,
									 experts, n, room, s->refs);
	const bool defer = demand_in_flight(s); /* demand reads first */
	for (uint32_t i = 0; defer && i < nr; i++)
		s->deferred[s->n_deferred++] = (struct deferred_read){ (uint32_t)m,
								       s->refs[i].expert,
								       s->refs[i].slot };
	if (nr && !defer && submit(s, (uint32_t)m, s->refs, nr, true, &e) != PT_OK)
		pt_error_clear(&e); /* sticky: the next get reports it */
	s->warming |= nr > 0;
	pthread_mutex_unlock(&s->mu);
	return nr;
}

void pt_expert_store_poll(pt_expert_store *s)
{
	if (!s->cache)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->n_deferred || s->n_paced) {
		struct pt_error e = { 0 };
		if (reap_some(s, false, true, &e) != PT_OK)
			pt_error_clear(&e); /* sticky: the next get reports it */
	}
	pthread_mutex_unlock(&s->mu);
}

void pt_expert_store_end_layer(pt_expert_store *s, uint32_t layer)
{
	int32_t m = moe_of(s, layer);
	pthread_mutex_lock(&s->mu);
	if (m >= 0 && (uint32_t)m == s->batch_moe) {
		if (s->cache) {
			/* this layer's reads still in flight must land before their slots can be
			 * reused (read-ahead of the next layer may stay in flight) */
			struct pt_error e = { 0 };
			while (batch_loading(s) && reap(s, true, &e) == PT_OK)
				;
			end_batch(s);
			if (s->n_pend)
				flush_pcache(s);
		}
		s->batch_n = 0;
	}
	pthread_mutex_unlock(&s->mu);
}

enum pt_status pt_expert_store_set_slots(pt_expert_store *s, uint32_t n, struct pt_error *err)
{
	if (!s->cache)
		return PT_OK;
	pthread_mutex_lock(&s->mu);
	enum pt_status st = PT_OK;
	struct pt_error e = { 0 };
	end_batch(s);
	for (uint32_t i = 0; i < s->n_deferred; i++) /* guesses not yet read: dropped */
		pt_expert_cache_cancel_ahead(s->cache, s->deferred[i].m, s->deferred[i].slot);
	s->n_deferred = 0;
	while (pt_io_pending(s->io) && reap(s, true, &e) == PT_OK)
		;
	pt_error_clear(&e); /* a failed read is sticky: the next get reports it */
	if (s->n_pend)
		flush_pcache(s);
	s->warming = false;
	const uint32_t old = pt_expert_cache_active(s->cache);
	bool populated = false;
	st = pt_expert_cache_set_active(s->cache, n, &populated, err);
	/* lent memory comes back untouched (its first read cold again) unless the cache
	 * faulted it in as it gave it back */
	for (uint32_t m = 0; st == PT_OK && m < s->lay->n_moe && n != old; m++) {
		const uint32_t lo = n < old ? n : old, hi = n < old ? old : n;
		memset(&s->touched[(size_t)m * s->cfg.slots_per_layer + lo], n > old && populated,
		       hi - lo);
	}
	pthread_mutex_unlock(&s->mu);
	return st;
}

uint32_t pt_expert_store_active_slots(pt_expert_store *s)
{
	return s->cache ? pt_expert_cache_active(s->cache) : s->cfg.slots_per_layer;
}

enum pt_status pt_expert_store_waves(pt_expert_store *s, uint32_t layer, uint32_t *experts,
				     uint32_t n, uint32_t *wave_end, uint32_t *n_waves,
				     struct pt_error *err)
{
	int32_t m = moe_of(s, layer);
	enum pt_status st;
	if (m < 0)
		return bad_layer(layer, err);
	if (!s->cache) {
		*n_waves = n ? 1 : 0;
		wave_end[0] = n;
		return PT_OK;
	}
	pthread_mutex_lock(&s->mu);
	if (s->batch_moe == (uint32_t)m)
		end_batch(s); /* the previous wave's unfetched pins would shrink this plan */
	/* with read-ahead, waves of half the free slots: the forward pass hands the next wave to
	 * pt_expert_store_ahead while one computes, and its reads land in the other half (ahead's
	 * room, the free slots less the hint's size, takes all of it).  Full-size waves could
	 * start the next wave's reads only once the last expert of this one was done: each wave
	 * began by waiting for its first read (docs/PERFORMANCE.md round 28). */
	st = pt_expert_cache_waves(s->cache, (uint32_t)m, experts, n, s->ahead_on, wave_end,
				   n_waves, err);
	pthread_mutex_unlock(&s->mu);
	return st;
}

double pt_expert_store_io_busy_s(pt_expert_store *s)
{
	if (!s->io)
		return 0;
	pthread_mutex_lock(&s->mu);
	const uint64_t ns = pt_io_busy_ns(s->io);
	pthread_mutex_unlock(&s->mu);
	return (double)ns * 1e-9;
}

void pt_expert_store_stats(pt_expert_store *s, uint32_t moe_index, struct pt_cache_stats *out)
{
	if (!s->cache) {
		memset(out, 0, sizeof *out);
		return;
	}
	pt_expert_cache_stats(s->cache, moe_index, out);
}

void pt_expert_store_resident(pt_expert_store *s, uint32_t moe_index, uint8_t *resident,
			      uint32_t n_expert)
{
	if (s->cache)
		pt_expert_cache_resident(s->cache, moe_index, resident, n_expert);
	else
		memset(resident, moe_index < s->lay->n_moe ? 1 : 0, n_expert);
}
