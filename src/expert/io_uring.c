/* io_uring.c - the primary read backend: one ring, every read of a layer queued as one SQE
 * per range and submitted with one system call; completions are reaped on the calling thread
 * (no extra threads, so both cores stay on compute; a read into never-touched memory goes
 * through a kernel worker, see pt_io_job.cold).  Short reads and -EAGAIN resubmit the
 * remainder. */
#include "expert/io_impl.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

#include "util/alloc.h"

struct ring {
	struct io_uring ring;
	uint32_t unsubmitted;
};

static enum pt_status queue_read(pt_io *io, uint32_t si, uint32_t ri, struct pt_error *err)
{
	struct ring *r = io->be_state;
	struct io_slot *s = &io->slots[si];
	const struct pt_io_range *rg = &s->job.r[ri];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	if (!sqe) { /* SQ full: push what we have and retry */
		int rc = io_uring_submit(&r->ring);
		if (rc < 0)
			return pt_error_sys(err, PT_E_IO, -rc, "io_uring submit");
		r->unsubmitted = 0;
		sqe = io_uring_get_sqe(&r->ring);
		if (!sqe)
			return pt_error_set(err, PT_E_IO, "io_uring queue full");
	}
	io_uring_prep_read(sqe, io->files[pt_io_range_file(&s->job, ri)].fd, rg->dst + s->done[ri],
			   (unsigned)(rg->len - s->done[ri]), rg->offset + s->done[ri]);
	io_uring_sqe_set_data64(sqe, (uint64_t)si << 8 | ri);
	if (s->job.cold && s->done[ri] == 0)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	r->unsubmitted++;
	return PT_OK;
}

static enum pt_status kick(pt_io *io, struct pt_error *err)
{
	struct ring *r = io->be_state;
	if (r->unsubmitted) {
		int rc = io_uring_submit(&r->ring);
		if (rc < 0)
			return pt_error_sys(err, PT_E_IO, -rc, "io_uring submit");
		r->unsubmitted = 0;
	}
	return PT_OK;
}

static enum pt_status handle(pt_io *io, struct io_uring_cqe *cqe, struct pt_error *err)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	uint32_t si = (uint32_t)(data >> 8), ri = (uint32_t)(data & 0xff);
	enum step step = pt_io_range_result(io, si, ri, cqe->res);
	if (step == STEP_AGAIN)
		return queue_read(io, si, ri, err);
	pt_io_range_finished(io, si);
	return PT_OK;
}

static enum pt_status reap(pt_io *io, bool block, struct pt_error *err)
{
	struct ring *r = io->be_state;
	struct io_uring_cqe *cqe;
	enum pt_status st = PT_OK;
	int rc;
	if (block) {
		do
			rc = io_uring_wait_cqe(&r->ring, &cqe);
		while (rc == -EINTR);
		if (rc < 0)
			return pt_error_sys(err, PT_E_IO, -rc, "io_uring wait");
	}
	while (st == PT_OK && io_uring_peek_cqe(&r->ring, &cqe) == 0) {
		st = handle(io, cqe, err);
		io_uring_cqe_seen(&r->ring, cqe);
	}
	if (st == PT_OK)
		st = kick(io, err);
	return st;
}

static void destroy(pt_io *io)
{
	struct ring *r = io->be_state;
	if (!r)
		return;
	io_uring_queue_exit(&r->ring);
	pt_free(r);
	io->be_state = NULL;
}

static const struct io_backend uring_backend = {
	.name = "io_uring",
	.submit_range = queue_read,
	.reap = reap,
	.kick = kick,
	.destroy = destroy,
};

enum pt_status pt_io_uring_init(pt_io *io, struct pt_error *err)
{
	struct ring *r = pt_calloc(1, sizeof *r);
	unsigned depth = 64;
	int rc;
	if (!r)
		return pt_error_set(err, PT_E_NOMEM, "io_uring state");
	rc = io_uring_queue_init(depth, &r->ring, 0);
	if (rc < 0) {
		pt_free(r);
		return pt_error_sys(err, PT_E_UNSUPPORTED, -rc, "io_uring_queue_init");
	}
	io->be_state = r;
	io->be = &uring_backend;
	return PT_OK;
}
