/* io.c - the expert read engine: file identity checks, job table, completion queue, the
 * read-result rules shared by both backends, and the automatic backend choice. */
#include "expert/io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"

enum pt_status pt_io_mode_parse(const char *text, enum pt_io_mode *out, struct pt_error *err)
{
	static const char *const names[] = { "direct", "buffered", "mmap" };
	for (int i = 0; i < 3; i++)
		if (text && strcmp(text, names[i]) == 0) {
			*out = (enum pt_io_mode)i;
			return PT_OK;
		}
	return pt_error_set(err, PT_E_INVALID, "--io expects direct, buffered or mmap, got '%s'",
			    text ? text : "");
}

const char *pt_io_mode_name(enum pt_io_mode m)
{
	return m == PT_IO_DIRECT ? "direct" : m == PT_IO_BUFFERED ? "buffered" : "mmap";
}

uint64_t pt_io_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Why a read may have failed beyond errno: the file changed under us.  Writes the reason
 * into buf ("" when the file looks unchanged). */
static void file_change(const struct io_file *f, char *buf, size_t n)
{
	struct stat a, b;
	buf[0] = '\0';
	if (fstat(f->fd, &a) == 0 && (uint64_t)a.st_size != f->size)
		snprintf(buf, n, "; %s changed size from %llu to %llu bytes while running",
			 f->path, (unsigned long long)f->size, (unsigned long long)a.st_size);
	else if (stat(f->path, &b) != 0 || b.st_ino != f->ino || b.st_dev != f->dev)
		snprintf(buf, n, "; %s was replaced or removed while running", f->path);
}

static enum step fail(pt_io *io, struct io_slot *s, uint32_t ri, int sys, const char *what)
{
	char why[512];
	const struct io_file *f = &io->files[pt_io_range_file(&s->job, ri)];
	file_change(f, why, sizeof why);
	pthread_mutex_lock(&io->mu);
	if (!s->failed) {
		s->failed = true;
		pt_error_clear(&s->err);
		pt_error_at(&s->err, PT_E_IO, s->job.r[ri].offset + s->done[ri],
			    "cannot read expert %u of layer %u from %s: %s%s%s", s->job.expert,
			    s->job.layer, f->path, what, sys ? ": " : "", sys ? strerror(sys) : "");
		if (why[0]) {
			size_t len = strlen(s->err.msg);
			snprintf(s->err.msg + len, sizeof s->err.msg - len, "%s", why);
		}
		s->err.sys_errno = sys;
	}
	pthread_mutex_unlock(&io->mu);
	return STEP_FAIL;
}

enum step pt_io_range_result(pt_io *io, uint32_t si, uint32_t ri, int64_t res)
{
	struct io_slot *s = &io->slots[si];
	const struct pt_io_range *r = &s->job.r[ri];
	const struct io_file *f = &io->files[pt_io_range_file(&s->job, ri)];
	if (io->cfg.fault)
		res = io->cfg.fault(io->cfg.fault_ctx, s->job.tag, ri, r->offset + s->done[ri], res);
	if (res == -EAGAIN || res == -EINTR) {
		if (++s->retries[ri] > IO_MAX_RETRIES)
			return fail(io, s, ri, (int)-res, "read kept failing");
		return STEP_AGAIN;
	}
	if (res < 0)
		return fail(io, s, ri, (int)-res, "read failed");
	if (res == 0 || (uint64_t)res > r->len - s->done[ri]) {
		if (res == 0 && s->done[ri] >= r->need)
			return STEP_DONE; /* aligned tail past EOF */
		return fail(io, s, ri, 0, res == 0 ? "unexpected end of file" : "bad read size");
	}
	s->done[ri] += (uint64_t)res;
	if (s->done[ri] >= r->len ||
	    (r->offset + s->done[ri] >= f->size && s->done[ri] >= r->need))
		return STEP_DONE;
	if (r->offset + s->done[ri] >= f->size)
		return fail(io, s, ri, 0, "unexpected end of file");
	if (++s->retries[ri] > IO_MAX_RETRIES)
		return fail(io, s, ri, 0, "reads keep coming back short");
	if (f->direct) /* resume at an aligned point; re-reading a few bytes is harmless */
		s->done[ri] &= ~(uint64_t)(PT_IO_ALIGN - 1);
	return STEP_AGAIN;
}

void pt_io_range_finished(pt_io *io, uint32_t si)
{
	struct io_slot *s = &io->slots[si];
	pthread_mutex_lock(&io->mu);
	if (--s->left == 0) {
		s->ns = pt_io_now_ns() - s->t0;
		io->done_q[(io->done_head + io->done_n) % io->n_slots] = si;
		io->done_n++;
		pthread_cond_broadcast(&io->cv);
	}
	pthread_mutex_unlock(&io->mu);
}

bool pt_io_direct_fits(bool known, uint32_t mem_align, uint32_t offset_align, char *why, size_t n)
{
	/* 0 should mean "no direct I/O on this file", but the open with O_DIRECT succeeded and
	 * qemu-user 7.2 passes STATX_DIOALIGN through with the fields zeroed: unknown, as before */
	if (!known || mem_align == 0 || offset_align == 0)
		return true;
	const uint32_t most = mem_align > offset_align ? mem_align : offset_align;
	if (most > PT_IO_ALIGN || PT_IO_ALIGN % mem_align || PT_IO_ALIGN % offset_align) {
		snprintf(why, n, " (O_DIRECT needs %u-byte aligned buffers and %u-byte aligned "
			 "offsets, reads are %u-aligned)", mem_align, offset_align, PT_IO_ALIGN);
		return false;
	}
	return true;
}

/* The file's own O_DIRECT alignment (statx STATX_DIOALIGN, Linux 6.1+), checked against the
 * engine's: older kernels and headers report nothing and the PT_IO_ALIGN assumption stands. */
static bool direct_fits(int fd, char *why, size_t n)
{
#if defined(STATX_DIOALIGN)
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN))
		return pt_io_direct_fits(true, sx.stx_dio_mem_align, sx.stx_dio_offset_align, why, n);
#else
	(void)fd;
#endif
	return pt_io_direct_fits(false, 0, 0, why, n);
}

static enum pt_status open_file(struct io_file *f, enum pt_io_mode mode, char *why, size_t n,
				struct pt_error *err)
{
	struct stat st;
	f->fd = -1;
	if (mode == PT_IO_DIRECT) {
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
		if (f->fd >= 0 && direct_fits(f->fd, why, n)) {
			f->direct = true;
		} else if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
		} else {
			snprintf(why, n, " (O_DIRECT refused: %s)", strerror(errno));
		}
	}
	if (f->fd < 0)
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open %s", f->path);
	if (fstat(f->fd, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot stat %s", f->path);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = (uint64_t)st.st_size;
	if (!f->direct) /* experts are read once per miss in no useful order */
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
	return PT_OK;
}

enum pt_status pt_io_add_file(pt_io *io, const char *path, uint32_t *id, struct pt_error *err)
{
	char why[160];
	struct io_file *f = &io->files[io->n_files];
	if (io->n_files == PT_IO_MAX_FILES)
		return pt_error_set(err, PT_E_LIMIT, "read engine: too many files");
	memset(f, 0, sizeof *f);
	f->fd = -1;
	if (!(f->path = pt_strdup(path)))
		return pt_error_set(err, PT_E_NOMEM, "read engine");
	io->n_files++; /* close() cleans up even if the open fails */
	*id = io->n_files - 1;
	return open_file(f, io->cfg.mode, why, sizeof why, err);
}

static enum pt_status alloc_tables(pt_io *io, struct pt_error *err)
{
	io->n_slots = io->cfg.max_jobs ? io->cfg.max_jobs : 256;
	io->slots = pt_calloc(io->n_slots, sizeof *io->slots);
	io->done_q = pt_calloc(io->n_slots, sizeof *io->done_q);
	if (!io->slots || !io->done_q)
		return pt_error_set(err, PT_E_NOMEM, "read engine tables");
	return PT_OK;
}

enum pt_status pt_io_open(const struct pt_io_config *cfg, pt_io **out, struct pt_error *err)
{
	pt_io *io;
	char why_direct[160] = "", why_ring[320] = "";
	enum pt_status st;
	struct pt_error ring_err = { 0 };
	*out = NULL;
	if (cfg->mode == PT_IO_MMAP)
		return pt_error_set(err, PT_E_INVALID, "read engine: mmap mode reads nothing");
	io = pt_calloc(1, sizeof *io);
	if (!io || !(io->files[0].path = pt_strdup(cfg->path))) {
		pt_free(io);
		return pt_error_set(err, PT_E_NOMEM, "read engine");
	}
	io->cfg = *cfg;
	io->cfg.path = io->files[0].path;
	io->files[0].fd = -1;
	io->n_files = 1;
	pthread_mutex_init(&io->mu, NULL);
	pthread_cond_init(&io->cv, NULL);
	st = open_file(&io->files[0], cfg->mode, why_direct, sizeof why_direct, err);
	io->direct = io->files[0].direct;
	if (st == PT_OK)
		st = alloc_tables(io, err);
	if (st == PT_OK && !cfg->force_pread) {
		if (cfg->fail_ring_setup)
			pt_error_set(&ring_err, PT_E_UNSUPPORTED, "set-up failed (test)");
		else
			pt_io_uring_init(io, &ring_err);
		if (!io->be)
			snprintf(why_ring, sizeof why_ring, " (io_uring unavailable: %s)",
				 ring_err.msg);
	}
	if (st == PT_OK && !io->be)
		st = pt_io_pread_init(io, err);
	if (st != PT_OK) {
		pt_io_close(io);
		return st;
	}
	snprintf(io->desc, sizeof io->desc, "%s, %s%s%s", io->be->name,
		 io->direct ? "O_DIRECT" : "buffered", why_direct, why_ring);
	*out = io;
	return PT_OK;
}

void pt_io_close(pt_io *io)
{
	if (!io)
		return;
	while (io->pending) { /* the kernel or a worker may still write into caller memory */
		bool got;
		uint64_t tag, ns;
		pt_io_wait(io, true, &got, &tag, &ns, NULL);
		if (!got)
			break;
	}
	if (io->be)
		io->be->destroy(io);
	for (uint32_t i = 0; i < io->n_files; i++) {
		if (io->files[i].fd >= 0)
			close(io->files[i].fd);
		pt_free(io->files[i].path);
	}
	pthread_cond_destroy(&io->cv);
	pthread_mutex_destroy(&io->mu);
	pt_free(io->slots);
	pt_free(io->done_q);
	pt_free(io);
}

const char *pt_io_describe(const pt_io *io)
{
	return io->desc;
}

bool pt_io_is_uring(const pt_io *io)
{
	return strcmp(io->be->name, "io_uring") == 0;
}

bool pt_io_is_direct(const pt_io *io)
{
	return io->direct;
}

uint64_t pt_io_file_size(const pt_io *io)
{
	return io->files[0].size;
}

uint32_t pt_io_pending(const pt_io *io)
{
	return io->pending;
}

uint32_t pt_io_capacity(const pt_io *io)
{
	return io->n_slots;
}

uint64_t pt_io_busy_ns(const pt_io *io)
{
	return io->busy_ns + (io->pending ? pt_io_now_ns() - io->busy_since : 0);
}

static enum pt_status check_job(const pt_io *io, const struct pt_io_job *j, struct pt_error *err)
{
	if (j->n_ranges == 0 || j->n_ranges > PT_IO_MAX_RANGES)
		return pt_error_set(err, PT_E_INVALID, "expert %u of layer %u: %u read ranges",
				    j->expert, j->layer, j->n_ranges);
	for (uint32_t i = 0; i < j->n_ranges; i++) {
		const struct pt_io_range *r = &j->r[i];
		const uint32_t fi = pt_io_range_file(j, i);
		uint64_t end;
		if (fi >= io->n_files)
			return pt_error_set(err, PT_E_INVALID, "expert %u of layer %u: no file %u",
					    j->expert, j->layer, fi);
		const struct io_file *f = &io->files[fi];
		if (r->need > r->len || r->len == 0 || r->len > (1u << 30) ||
		    pt_add_overflow(r->offset, r->need, &end) || end > f->size)
			return pt_error_at(err, PT_E_FORMAT, r->offset,
					   "expert %u of layer %u lies outside %s (%llu bytes)",
					   j->expert, j->layer, f->path,
					   (unsigned long long)f->size);
		if (f->direct && ((r->offset | r->len | (uintptr_t)r->dst) & (PT_IO_ALIGN - 1)))
			return pt_error_at(err, PT_E_INVALID, r->offset,
					   "expert %u of layer %u: unaligned O_DIRECT range",
					   j->expert, j->layer);
	}
	return PT_OK;
}

/* The file must still be the one opened, at its size: a replaced or truncated model would
 * otherwise give wrong bytes, hence wrong tokens. */
static enum pt_status check_file(const pt_io *io, struct pt_error *err)
{
	char why[512];
	for (uint32_t i = 0; i < io->n_files; i++) {
		file_change(&io->files[i], why, sizeof why);
		if (why[0])
			return pt_error_set(err, PT_E_IO, "expert file changed%s", why);
	}
	return PT_OK;
}

static uint32_t free_slot(pt_io *io, uint32_t from)
{
	for (uint32_t i = from; i < io->n_slots; i++)
		if (!io->slots[i].busy)
			return i;
	return UINT32_MAX;
}

enum pt_status pt_io_submit(pt_io *io, const struct pt_io_job *jobs, uint32_t n,
			    struct pt_error *err)
{
	enum pt_status st = check_file(io, err);
	uint32_t si = 0;
	if (st != PT_OK)
		return st;
	if (n > io->n_slots - io->pending)
		return pt_error_set(err, PT_E_LIMIT, "%u expert reads in flight, at most %u",
				    io->pending + n, io->n_slots);
	for (uint32_t j = 0; j < n; j++)
		if ((st = check_job(io, &jobs[j], err)) != PT_OK)
			return st;
	if (io->pending == 0 && n)
		io->busy_since = pt_io_now_ns();
	for (uint32_t j = 0; j < n; j++) {
		struct io_slot *s;
		si = free_slot(io, si);
		s = &io->slots[si];
		memset(s, 0, sizeof *s);
		s->job = jobs[j];
		s->busy = true;
		s->left = jobs[j].n_ranges;
		s->t0 = pt_io_now_ns();
		io->pending++;
		for (uint32_t r = 0; r < jobs[j].n_ranges; r++)
			if ((st = io->be->submit_range(io, si, r, err)) != PT_OK)
				return st;
	}
	return io->be->kick ? io->be->kick(io, err) : PT_OK;
}

/* Pops a finished job if one is queued. */
static bool pop_done(pt_io *io, uint32_t *si)
{
	bool got = false;
	pthread_mutex_lock(&io->mu);
	if (io->done_n) {
		*si = io->done_q[io->done_head];
		io->done_head = (io->done_head + 1) % io->n_slots;
		io->done_n--;
		got = true;
	}
	pthread_mutex_unlock(&io->mu);
	return got;
}

enum pt_status pt_io_wait(pt_io *io, bool block, bool *got, uint64_t *tag, uint64_t *ns,
			  struct pt_error *err)
{
	uint32_t si;
	bool reaped = false;
	*got = false;
	for (;;) {
		if (pop_done(io, &si)) {
			struct io_slot *s = &io->slots[si];
			enum pt_status st = PT_OK;
			*got = true;
			*tag = s->job.tag;
			*ns = s->ns;
			if (s->failed) {
				st = s->err.code;
				if (err && err->code == PT_OK)
					*err = s->err;
			}
			s->busy = false;
			if (--io->pending == 0)
				io->busy_ns += pt_io_now_ns() - io->busy_since;
			return st;
		}
		if (io->pending == 0 || (!block && reaped))
			return PT_OK;
		enum pt_status st = io->be->reap(io, block, err);
		if (st != PT_OK)
			return st;
		reaped = true;
	}
}
