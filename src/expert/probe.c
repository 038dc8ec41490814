/* probe.c - the disk probe (probe.h): random aligned block reads through the read engine. */
#include "expert/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expert/io.h"
#include "util/alloc.h"

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Visits every block index once before any repeats: start + i * stride (mod nb) with the
 * stride coprime to nb. */
struct walk {
	uint64_t nb, at, stride;
};

static void walk_init(struct walk *w, uint64_t nb, uint64_t seed)
{
	uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
	w->nb = nb;
	w->at = (x >> 17) % nb;
	w->stride = nb > 2 ? ((x >> 29) % (nb - 1)) + 1 : 1;
	while (gcd(w->stride, nb) != 1)
		w->stride++;
}

static uint64_t walk_next(struct walk *w)
{
	uint64_t b = w->at;
	w->at = (w->at + w->stride) % w->nb;
	return b;
}

struct trial {
	pt_io *io;
	struct walk *w;
	uint8_t *buf;
	uint32_t block, depth;
	uint64_t file_size;
};

static void make_read(const struct trial *t, uint32_t lane, struct pt_io_job *j)
{
	const uint64_t off = walk_next(t->w) * t->block;
	*j = (struct pt_io_job){ .tag = lane, .n_ranges = 1 };
	j->r[0] = (struct pt_io_range){ .offset = off, .len = t->block, .need = t->block,
					.dst = t->buf + (size_t)lane * t->block };
}

/* One trial: keeps depth reads in flight until bytes have landed; seconds in *secs. */
static enum pt_status run_trial(const struct trial *t, uint64_t bytes, double *secs,
				struct pt_error *err)
{
	const uint64_t n = (bytes + t->block - 1) / t->block;
	uint64_t sent = 0, done = 0;
	struct pt_io_job j;
	enum pt_status st = PT_OK;
	const uint64_t t0 = pt_io_now_ns();
	for (uint32_t l = 0; l < t->depth && sent < n && st == PT_OK; l++, sent++) {
		make_read(t, l, &j);
		st = pt_io_submit(t->io, &j, 1, err);
	}
	while (st == PT_OK && done < n) {
		bool got = false;
		uint64_t tag = 0, ns;
		st = pt_io_wait(t->io, true, &got, &tag, &ns, err);
		if (st != PT_OK || !got)
			break;
		done++;
		if (sent < n) {
			make_read(t, (uint32_t)tag, &j);
			st = pt_io_submit(t->io, &j, 1, err);
			sent++;
		}
	}
	*secs = (double)(pt_io_now_ns() - t0) * 1e-9;
	if (st == PT_OK && done < n)
		st = pt_error_set(err, PT_E_IO, "disk probe: %llu of %llu reads never finished",
				  (unsigned long long)(n - done), (unsigned long long)n);
	return st;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void summarize(struct pt_disk_probe_result *r)
{
	double s[PT_PROBE_MAX_TRIALS];
	memcpy(s, r->trial_bps, r->n_trials * sizeof *s);
	qsort(s, r->n_trials, sizeof *s, cmp_double);
	r->best_bps = s[r->n_trials - 1];
	r->median_bps = r->n_trials % 2 ? s[r->n_trials / 2]
					 : 0.5 * (s[r->n_trials / 2 - 1] + s[r->n_trials / 2]);
}

void pt_disk_probe_merge(struct pt_disk_probe_result *a, const struct pt_disk_probe_result *b)
{
	for (uint32_t i = 0; i < b->n_trials && a->n_trials < PT_PROBE_MAX_TRIALS; i++)
		a->trial_bps[a->n_trials++] = b->trial_bps[i];
	a->bytes += b->bytes;
	a->secs += b->secs;
	if (a->n_trials)
		summarize(a);
}

static enum pt_status trials(const struct pt_disk_probe_config *c, struct trial *t,
			     struct pt_disk_probe_result *r, struct pt_error *err)
{
	const uint32_t nt = c->trials ? c->trials : 4;
	uint64_t per = c->trial_bytes ? c->trial_bytes : 128ull << 20;
	if (nt > PT_PROBE_MAX_TRIALS)
		return pt_error_set(err, PT_E_INVALID, "disk probe: at most %u trials",
				    PT_PROBE_MAX_TRIALS);
	per = (per + t->block - 1) / t->block * t->block; /* whole blocks, at least one */
	if (per > t->file_size)
		per = t->file_size / t->block * t->block;
	for (uint32_t i = 0; i < nt; i++) {
		double secs = 0;
		enum pt_status st = run_trial(t, per, &secs, err);
		if (st != PT_OK)
			return st;
		r->trial_bps[r->n_trials++] = secs > 0 ? (double)per / secs : 0;
		r->bytes += per;
		r->secs += secs;
	}
	summarize(r);
	snprintf(r->how, sizeof r->how, "%s, %u x %u KiB random reads, %u x %.1f MiB",
		 pt_io_describe(t->io), t->depth, t->block >> 10, nt, (double)per / (1 << 20));
	return PT_OK;
}

enum pt_status pt_disk_probe(const struct pt_disk_probe_config *c,
			     struct pt_disk_probe_result *r, struct pt_error *err)
{
	struct trial t = { .block = c->block ? c->block : 2u << 20,
			   .depth = c->depth ? c->depth : 16 };
	memset(r, 0, sizeof *r);
	if (t.block % PT_IO_ALIGN || t.depth > 256)
		return pt_error_set(err, PT_E_INVALID, "disk probe: block %u not 4 KiB-aligned or "
				    "depth %u over 256", t.block, t.depth);
	struct pt_io_config ic = { .path = c->path, .mode = PT_IO_DIRECT, .max_jobs = t.depth,
				   .threads = t.depth, .force_pread = c->force_pread != 0 };
	enum pt_status st = pt_io_open(&ic, &t.io, err);
	if (st != PT_OK)
		return st;
	t.file_size = pt_io_file_size(t.io);
	if (t.file_size < t.block) /* small files: one aligned block covering most of it */
		t.block = (uint32_t)(t.file_size & ~(uint64_t)(PT_IO_ALIGN - 1));
	/* the buffers as the store's slots are (cache.c): a mapping with huge pages where the
	 * kernel gives them.  Into 4 KiB pages a virtual disk moved the same 2 MiB reads 3-4x
	 * slower on the development VM (a request per few pages), so the probe understated
	 * the disk the store reads (PERFORMANCE round 32) */
	const size_t bytes = (size_t)t.depth * t.block;
	void *raw = NULL;
	if (t.block == 0)
		st = pt_error_set(err, PT_E_INVALID, "disk probe: %s is smaller than %u bytes",
				  c->path, PT_IO_ALIGN);
	else if (!(raw = pt_alloc_pages(bytes)))
		st = pt_error_set(err, PT_E_NOMEM, "disk probe buffers");
	if (st == PT_OK) {
		struct walk w;
		memset(raw, 0, bytes); /* faulted in before the clock, as the store's slots are */
		walk_init(&w, t.file_size / t.block, c->seed ? c->seed : pt_io_now_ns());
		t.w = &w;
		t.buf = raw;
		r->block = t.block;
		r->depth = t.depth;
		r->direct = pt_io_is_direct(t.io);
		st = trials(c, &t, r, err);
	}
	pt_io_close(t.io);
	pt_free_pages(raw, bytes);
	return st;
}
