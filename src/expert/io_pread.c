/* io_pread.c - the fallback read backend: a small pool of threads doing positional reads.
 * Used when io_uring cannot be set up (old kernel, seccomp) or is switched off.  Workers take
 * (job, range) items from a queue, read until the range is done or failed, and hand the
 * range back through pt_io_range_finished. */
#include "expert/io_impl.h"

#include <errno.h>
#include <unistd.h>

#include "util/alloc.h"

struct pool {
	pthread_t *threads;
	uint32_t n_threads;
	uint64_t *q; /* (slot << 8 | range) ring */
	uint32_t q_cap, q_head, q_n;
	bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void read_range(pt_io *io, uint32_t si, uint32_t ri)
{
	struct io_slot *s = &io->slots[si];
	const struct pt_io_range *r = &s->job.r[ri];
	enum step step;
	do {
		uint64_t at = s->done[ri];
		const int fd = io->files[pt_io_range_file(&s->job, ri)].fd;
		ssize_t got = pread(fd, r->dst + at, r->len - at, (off_t)(r->offset + at));
		step = pt_io_range_result(io, si, ri, got < 0 ? -(int64_t)errno : (int64_t)got);
	} while (step == STEP_AGAIN);
	pt_io_range_finished(io, si);
}

static void *worker(void *arg)
{
	pt_io *io = arg;
	struct pool *p = io->be_state;
	for (;;) {
		uint64_t item;
		pthread_mutex_lock(&p->mu);
		while (p->q_n == 0 && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->q_n == 0) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		item = p->q[p->q_head];
		p->q_head = (p->q_head + 1) % p->q_cap;
		p->q_n--;
		pthread_mutex_unlock(&p->mu);
		read_range(io, (uint32_t)(item >> 8), (uint32_t)(item & 0xff));
	}
}

static enum pt_status submit_range(pt_io *io, uint32_t si, uint32_t ri, struct pt_error *err)
{
	struct pool *p = io->be_state;
	pthread_mutex_lock(&p->mu);
	p->q[(p->q_head + p->q_n) % p->q_cap] = (uint64_t)si << 8 | ri; /* cap = all ranges */
	p->q_n++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return PT_OK;
}

static enum pt_status reap(pt_io *io, bool block, struct pt_error *err)
{
	pthread_mutex_lock(&io->mu);
	while (block && io->done_n == 0)
		pthread_cond_wait(&io->cv, &io->mu);
	pthread_mutex_unlock(&io->mu);
	return PT_OK;
}

static void destroy(pt_io *io)
{
	struct pool *p = io->be_state;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	pt_free(p->threads);
	pt_free(p->q);
	pt_free(p);
	io->be_state = NULL;
}

static const struct io_backend pread_backend = {
	.name = "pread pool",
	.submit_range = submit_range,
	.reap = reap,
	.kick = NULL,
	.destroy = destroy,
};

enum pt_status pt_io_pread_init(pt_io *io, struct pt_error *err)
{
	struct pool *p = pt_calloc(1, sizeof *p);
	uint32_t want = io->cfg.threads ? io->cfg.threads : 4;
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "read pool");
	p->q_cap = io->n_slots * PT_IO_MAX_RANGES;
	p->q = pt_calloc(p->q_cap, sizeof *p->q);
	p->threads = pt_calloc(want, sizeof *p->threads);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	io->be_state = p;
	io->be = &pread_backend;
	if (!p->q || !p->threads) {
		destroy(io);
		io->be = NULL;
		return pt_error_set(err, PT_E_NOMEM, "read pool");
	}
	for (; p->n_threads < want; p->n_threads++)
		if (pthread_create(&p->threads[p->n_threads], NULL, worker, io) != 0)
			break;
	if (p->n_threads == 0) {
		destroy(io);
		io->be = NULL;
		return pt_error_set(err, PT_E_IO, "cannot start read threads");
	}
	return PT_OK;
}
