/* io_impl.h - internals shared by the read engine (io.c) and its backends (io_uring.c,
 * io_pread.c).  Not part of the module API. */
#ifndef PT_EXPERT_IO_IMPL_H
#define PT_EXPERT_IO_IMPL_H

#include <pthread.h>
#include <sys/types.h>

#include "expert/io.h"

#define IO_MAX_RETRIES 1000

struct io_slot { /* one job in flight */
	struct pt_io_job job;
	uint64_t done[PT_IO_MAX_RANGES]; /* bytes landed per range */
	uint32_t retries[PT_IO_MAX_RANGES]; /* -EAGAIN and short-read retries per range */
	uint32_t left;                   /* ranges not finished */
	bool busy;
	bool failed;
	struct pt_error err;
	uint64_t t0;
	uint64_t ns;
};

enum step { STEP_DONE, STEP_AGAIN, STEP_FAIL };

struct io_backend {
	const char *name;
	enum pt_status (*submit_range)(pt_io *io, uint32_t slot, uint32_t range,
				       struct pt_error *err);
	/* blocks (block) or polls for completions, finishing ranges via io_range_result */
	enum pt_status (*reap)(pt_io *io, bool block, struct pt_error *err);
	enum pt_status (*kick)(pt_io *io, struct pt_error *err); /* after a batch; may be NULL */
	void (*destroy)(pt_io *io);
};

struct io_file {
	char *path;
	int fd;
	bool direct;
	dev_t dev;
	ino_t ino;
	uint64_t size;
};

struct pt_io {
	struct pt_io_config cfg;
	struct io_file files[PT_IO_MAX_FILES];
	uint32_t n_files;
	bool direct; /* the first file's mode */
	const struct io_backend *be;
	void *be_state;
	struct io_slot *slots;
	uint32_t n_slots;
	uint32_t pending; /* jobs submitted, not yet reaped by wait */
	uint64_t busy_since, busy_ns; /* wall time with a job pending (submit to reap) */
	/* finished jobs, FIFO ring of slot indices; guarded by mu */
	uint32_t *done_q;
	uint32_t done_head, done_n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char desc[640];
};

/* Applies one read result to slot/range; returns what the backend must do next. */
enum step pt_io_range_result(pt_io *io, uint32_t slot, uint32_t range, int64_t res);
/* Called by a backend when a range finished (ok or failed); thread-safe. */
void pt_io_range_finished(pt_io *io, uint32_t slot);

enum pt_status pt_io_uring_init(pt_io *io, struct pt_error *err);
enum pt_status pt_io_pread_init(pt_io *io, struct pt_error *err);

#endif
