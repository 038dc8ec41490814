/* download.c - ranged, resumable, hashed download of one file (see download.h). */
#include "net/download.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "net/ranges.h"
#include "util/alloc.h"
#include "util/safefile.h"

#define MAX_JOBS 64u
#define HASH_PIECE (4u << 20)
#define TICK_MS 200
#define SAVE_EVERY_S 1.0

struct dl;

struct worker {
	struct dl *d;
	pthread_t th;
	pt_http_client *c;
	uint64_t net, net_seen; /* this worker's network bytes; the part already summed */
	struct pt_error err;
};

struct dl {
	const struct pt_dl_opts *o;
	const struct pt_dl_hooks *h;
	int fd;
	pthread_mutex_t mu;
	struct pt_ranges have;    /* bytes written (under mu) */
	uint64_t next_off;        /* assignment cursor (under mu) */
	uint64_t net;             /* network bytes summed (under mu) */
	uint32_t active;          /* workers still running (under mu) */
	bool failed;              /* a worker failed (under mu); its error is in fail_err */
	struct pt_error fail_err;
	volatile sig_atomic_t stop; /* workers stop: user cancel or another worker failed */
	bool ranged;
	bool feeding;             /* on_bytes sees new bytes (set once the header is accepted) */
	EVP_MD_CTX *md;
	uint64_t hashed;
	double t0;
	uint64_t resumed;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool user_cancelled(const struct dl *d)
{
	return d->o->http.cancel && __atomic_load_n(d->o->http.cancel, __ATOMIC_RELAXED);
}

/* ---- state file ------------------------------------------------------------------------ */

static void load_state(struct dl *d)
{
	struct pt_pull_state s;
	struct stat st;
	char *text = NULL;
	int fd = open(d->o->state_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = -1;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_size <= (off_t)PT_PULL_STATE_MAX && (text = pt_malloc((size_t)st.st_size + 1)))
		n = pread(fd, text, (size_t)st.st_size, 0);
	close(fd);
	if (n >= 0 && pt_pull_state_parse(text, (size_t)n, &s, NULL) == PT_OK) {
		if (s.size == d->o->size &&
		    strcmp(s.validator, d->o->validator && d->o->validator[0] ? d->o->validator
										 : "-") == 0) {
			pt_ranges_free(&d->have);
			d->have = s.done;
		} else {
			pt_ranges_free(&s.done); /* another version of the file: start over */
		}
	}
	pt_free(text);
}

/* Makes the written bytes durable, then records them. */
static enum pt_status save_state(struct dl *d, struct pt_error *err)
{
	struct pt_pull_state s = { .size = d->o->size };
	char *text = NULL;
	enum pt_status st = PT_OK;
	if (fdatasync(d->fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", d->o->partial_path);
	snprintf(s.validator, sizeof s.validator, "%s",
		 d->o->validator && d->o->validator[0] ? d->o->validator : "-");
	pthread_mutex_lock(&d->mu);
	s.done.n = d->have.n;
	s.done.r = d->have.r;
	st = pt_pull_state_format(&s, &text, err); /* borrows have's array under the lock */
	pthread_mutex_unlock(&d->mu);
	if (st != PT_OK)
		return st;
	st = pt_safe_write_file(d->o->state_path, text, strlen(text), 0600, err);
	pt_free(text);
	return st;
}

/* ---- receiving ------------------------------------------------------------------------- */

static enum pt_status write_at(int fd, const void *buf, size_t n, uint64_t off,
			       const char *path, struct pt_error *err)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return pt_error_sys(err, PT_E_IO, w < 0 ? errno : ENOSPC, "cannot write %s",
					    path);
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return PT_OK;
}

struct sink_ctx {
	struct dl *d;
	uint64_t *net, *net_seen;
};

static enum pt_status sink(void *p, uint64_t off, const void *buf, size_t n,
			   struct pt_error *err)
{
	struct sink_ctx *s = p;
	struct dl *d = s->d;
	enum pt_status st = write_at(d->fd, buf, n, off, d->o->partial_path, err);
	if (st == PT_OK && d->feeding && d->h->on_bytes)
		st = d->h->on_bytes(d->h->ctx, off, buf, n, err);
	if (st != PT_OK)
		return st;
	pthread_mutex_lock(&d->mu);
	st = pt_ranges_add(&d->have, off, off + n, err);
	d->net += *s->net - *s->net_seen;
	*s->net_seen = *s->net;
	pthread_mutex_unlock(&d->mu);
	return st;
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	struct dl *d = w->d;
	struct sink_ctx sc = { d, &w->net, &w->net_seen };
	enum pt_status st = PT_OK;
	for (;;) {
		uint64_t a, b;
		pthread_mutex_lock(&d->mu);
		bool got = !__atomic_load_n(&d->stop, __ATOMIC_RELAXED) &&
			   pt_ranges_next_gap(&d->have, d->next_off, d->o->size, &a, &b);
		if (got) {
			if (d->ranged && b - a > d->o->chunk)
				b = a + d->o->chunk;
			d->next_off = b;
		}
		pthread_mutex_unlock(&d->mu);
		if (!got)
			break;
		st = pt_http_get(w->c, d->o->url, a, b, sink, &sc, NULL, &w->net, &w->err);
		if (st != PT_OK)
			break;
	}
	pthread_mutex_lock(&d->mu);
	d->net += w->net - w->net_seen;
	w->net_seen = w->net;
	if (st != PT_OK && !d->failed) {
		d->failed = true;
		d->fail_err = w->err;
		__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
	}
	d->active--;
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* ---- hashing and progress ------------------------------------------------------------ */

static enum pt_status hash_to(struct dl *d, uint64_t to, uint8_t *buf, struct pt_error *err)
{
	while (d->hashed < to) {
		size_t want = to - d->hashed < HASH_PIECE ? (size_t)(to - d->hashed) : HASH_PIECE;
		ssize_t got = pread(d->fd, buf, want, (off_t)d->hashed);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return pt_error_sys(err, PT_E_IO, got < 0 ? errno : EIO, "cannot read %s",
					    d->o->partial_path);
		if (!EVP_DigestUpdate(d->md, buf, (size_t)got))
			return pt_error_set(err, PT_E_NOMEM, "sha256");
		d->hashed += (uint64_t)got;
	}
	return PT_OK;
}

static void report(struct dl *d, bool done)
{
	struct pt_dl_progress p = { .size = d->o->size, .resumed = d->resumed, .done = done };
	if (!d->h->progress)
		return;
	pthread_mutex_lock(&d->mu);
	p.have = pt_ranges_total(&d->have);
	p.net = d->net;
	pthread_mutex_unlock(&d->mu);
	p.seconds = now_s() - d->t0;
	d->h->progress(d->h->ctx, &p);
}

static uint64_t prefix_end(struct dl *d)
{
	pthread_mutex_lock(&d->mu);
	uint64_t p = pt_ranges_covered_to(&d->have, 0);
	pthread_mutex_unlock(&d->mu);
	return p;
}

/* ---- phases ------------------------------------------------------------------------------ */

static enum pt_status check_space(struct dl *d, struct pt_error *err)
{
	char dir[4096];
	const char *slash = strrchr(d->o->partial_path, '/');
	struct statvfs vfs;
	struct stat st;
	uint64_t need = d->o->extra_space, allocated = 0, avail;
	if (slash)
		snprintf(dir, sizeof dir, "%.*s", (int)(slash == d->o->partial_path ? 1 :
			 slash - d->o->partial_path), d->o->partial_path);
	else
		snprintf(dir, sizeof dir, ".");
	if (fstat(d->fd, &st) == 0)
		allocated = (uint64_t)st.st_blocks * 512;
	need += d->o->size > allocated ? d->o->size - allocated : 0;
	if (statvfs(dir, &vfs) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot check free space in %s", dir);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (need > avail)
		return pt_error_set(err, PT_E_IO, "not enough free space in %s: need %.1f MiB "
				    "more, %.1f MiB available", dir, need / 1048576.0,
				    avail / 1048576.0);
	if (fallocate(d->fd, 0, 0, (off_t)d->o->size) != 0) {
		if (errno == ENOSPC)
			return pt_error_sys(err, PT_E_IO, errno, "cannot reserve %.1f MiB in %s",
					    d->o->size / 1048576.0, dir);
		if (ftruncate(d->fd, (off_t)d->o->size) != 0)
			return pt_error_sys(err, PT_E_IO, errno, "cannot size %s",
					    d->o->partial_path);
	}
	return PT_OK;
}

/* The first bytes alone, until check_head is satisfied. */
static enum pt_status head_phase(struct dl *d, pt_http_client *c, struct pt_error *err)
{
	uint64_t want = d->o->head_bytes < d->o->size ? d->o->head_bytes : d->o->size, net = 0,
		 net_seen = 0;
	struct sink_ctx sc = { d, &net, &net_seen };
	enum pt_status st = PT_OK;
	for (;;) {
		uint64_t have = prefix_end(d);
		if (have < want) {
			bool ranged = true;
			st = pt_http_get(c, d->o->url, have, want, sink, &sc, &ranged, &net, err);
			pthread_mutex_lock(&d->mu);
			d->net += net - net_seen;
			net_seen = net;
			pthread_mutex_unlock(&d->mu);
			if (st != PT_OK)
				return st;
			d->ranged = d->ranged && ranged;
		}
		if (!d->h->check_head)
			return PT_OK;
		bool more = false;
		st = d->h->check_head(d->h->ctx, d->fd, want, d->o->size, &more, err);
		if (st == PT_OK || !more)
			return st;
		if (want >= d->o->size || want >= d->o->head_max)
			return st; /* its error says what is missing */
		pt_error_clear(err);
		want = want * 4 < d->o->head_max ? want * 4 : d->o->head_max;
		want = want < d->o->size ? want : d->o->size;
	}
}

/* Once the header is accepted, on_bytes is shown every byte already on disk (the header
 * phase's and a resumed run's), then each new one as it arrives: all bytes exactly once. */
static enum pt_status replay(struct dl *d, struct pt_error *err)
{
	struct pt_ranges snap = { 0 };
	enum pt_status st = PT_OK;
	uint8_t *buf = d->h->on_bytes ? pt_malloc(HASH_PIECE) : NULL;
	if (d->h->on_bytes && !buf)
		return pt_error_set(err, PT_E_NOMEM, "out of memory (download)");
	for (uint32_t i = 0; d->h->on_bytes && st == PT_OK && i < d->have.n; i++)
		st = pt_ranges_add(&snap, d->have.r[i].start, d->have.r[i].end, err);
	for (uint32_t i = 0; st == PT_OK && i < snap.n; i++) {
		for (uint64_t at = snap.r[i].start; st == PT_OK && at < snap.r[i].end;) {
			uint64_t left = snap.r[i].end - at;
			size_t want = left < HASH_PIECE ? (size_t)left : HASH_PIECE;
			ssize_t got = pread(d->fd, buf, want, (off_t)at);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				st = pt_error_sys(err, PT_E_IO, got < 0 ? errno : EIO,
						  "cannot read %s", d->o->partial_path);
			else
				st = d->h->on_bytes(d->h->ctx, at, buf, (size_t)got, err);
			at += got > 0 ? (uint64_t)got : 0;
		}
	}
	pt_ranges_free(&snap);
	pt_free(buf);
	d->feeding = true;
	return st;
}

static enum pt_status body_phase(struct dl *d, struct pt_error *err)
{
	uint32_t jobs = d->ranged ? d->o->jobs : 1, started = 0;
	struct worker *w = pt_calloc(jobs, sizeof *w);
	enum pt_status st = PT_OK;
	uint8_t *buf = pt_malloc(HASH_PIECE);
	double last_save = now_s();
	if (!w || !buf) {
		pt_free(w);
		pt_free(buf);
		return pt_error_set(err, PT_E_NOMEM, "out of memory (download)");
	}
	d->next_off = 0;
	struct pt_http_opts ho = d->o->http;
	ho.cancel = &d->stop;
	for (uint32_t i = 0; i < jobs && st == PT_OK; i++) {
		w[i].d = d;
		st = pt_http_client_new(&ho, &w[i].c, err);
		if (st != PT_OK)
			break;
		pthread_mutex_lock(&d->mu);
		d->active++;
		pthread_mutex_unlock(&d->mu);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
			pthread_mutex_lock(&d->mu);
			d->active--;
			pthread_mutex_unlock(&d->mu);
			pt_http_client_free(w[i].c);
			st = pt_error_set(err, PT_E_IO, "cannot start a download thread");
			__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
			break;
		}
		started++;
	}
	for (;;) {
		struct timespec ts = { 0, TICK_MS * 1000000L };
		pthread_mutex_lock(&d->mu);
		uint32_t active = d->active;
		pthread_mutex_unlock(&d->mu);
		if (active == 0)
			break;
		nanosleep(&ts, NULL);
		if (user_cancelled(d))
			__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
		enum pt_status hs = hash_to(d, prefix_end(d), buf, err);
		if (hs != PT_OK && st == PT_OK) {
			st = hs;
			__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
		}
		if (now_s() - last_save >= SAVE_EVERY_S) {
			last_save = now_s();
			hs = save_state(d, err);
			if (hs != PT_OK && st == PT_OK) {
				st = hs;
				__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
			}
		}
		report(d, false);
	}
	for (uint32_t i = 0; i < started; i++) {
		pthread_join(w[i].th, NULL);
		pt_http_client_free(w[i].c);
	}
	pt_free(w);
	if (st == PT_OK && d->failed) {
		if (err)
			*err = d->fail_err;
		st = d->fail_err.code ? d->fail_err.code : PT_E_IO;
	}
	if (st == PT_OK && user_cancelled(d))
		st = pt_error_set(err, PT_E_CANCELLED, "interrupted");
	if (st == PT_OK)
		st = hash_to(d, prefix_end(d), buf, err);
	pt_free(buf);
	return st;
}

enum pt_status pt_download(const struct pt_dl_opts *o, const struct pt_dl_hooks *h,
			   struct pt_dl_result *res, struct pt_error *err)
{
	struct dl d = { .o = o, .h = h, .fd = -1, .ranged = true };
	pt_http_client *c = NULL;
	bool created = false;
	enum pt_status st;
	memset(res, 0, sizeof *res);
	if (o->jobs < 1 || o->jobs > MAX_JOBS || o->chunk == 0 || o->head_bytes == 0)
		return pt_error_set(err, PT_E_INVALID, "bad download options");
	pthread_mutex_init(&d.mu, NULL);
	d.t0 = now_s();
	load_state(&d);
	st = pt_safe_open_rw(o->partial_path, 0644, &d.fd, &created, err);
	if (st == PT_OK && flock(d.fd, LOCK_EX | LOCK_NB) != 0) { /* released by close */
		st = pt_error_set(err, PT_E_BUSY, "another particle pull is writing %s",
				  o->partial_path);
		close(d.fd);
		d.fd = -1;
	}
	if (st == PT_OK && created)
		pt_ranges_free(&d.have); /* a state without its data: nothing is on disk */
	d.resumed = pt_ranges_total(&d.have);
	if (st == PT_OK)
		st = check_space(&d, err);
	if (st == PT_OK && !(d.md = EVP_MD_CTX_new()))
		st = pt_error_set(err, PT_E_NOMEM, "sha256");
	if (st == PT_OK && !EVP_DigestInit_ex(d.md, EVP_sha256(), NULL))
		st = pt_error_set(err, PT_E_NOMEM, "sha256");
	if (st == PT_OK) /* the header phase runs alone and watches the user's flag */
		st = pt_http_client_new(&o->http, &c, err);
	if (st == PT_OK && o->size > 0) {
		st = head_phase(&d, c, err);
		if (st == PT_OK)
			st = replay(&d, err);
		if (st == PT_OK && user_cancelled(&d))
			st = pt_error_set(err, PT_E_CANCELLED, "interrupted");
		if (st == PT_OK)
			st = body_phase(&d, err);
	}
	if (st == PT_OK && d.hashed != o->size)
		st = pt_error_set(err, PT_E_IO, "%s: %" PRIu64 " of %" PRIu64 " bytes after the "
				  "download", o->partial_path, d.hashed, o->size);
	if (st == PT_OK && fsync(d.fd) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", o->partial_path);
	if (st == PT_OK) {
		unsigned int len = 0;
		EVP_DigestFinal_ex(d.md, res->sha256, &len);
		unlink(o->state_path);
	} else if (d.fd >= 0 && created && pt_ranges_total(&d.have) == 0) {
		unlink(o->partial_path); /* nothing arrived: leave nothing behind */
		unlink(o->state_path);
	} else if (d.fd >= 0) {
		save_state(&d, NULL); /* everything written so far survives for a resume */
	}
	report(&d, st == PT_OK);
	res->net = d.net;
	res->resumed = d.resumed;
	res->ranged = d.ranged;
	res->seconds = now_s() - d.t0;
	pt_http_client_free(c);
	EVP_MD_CTX_free(d.md);
	if (d.fd >= 0)
		close(d.fd);
	pt_ranges_free(&d.have);
	pthread_mutex_destroy(&d.mu);
	return st;
}
