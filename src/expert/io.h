/* io.h - the expert read engine: batches of positional reads into caller buffers.
 *
 * A job is one expert: up to PT_IO_MAX_RANGES (file offset, length, destination) ranges (3 for
 * gate/up/down slices of a GGUF, 1 from a pack).  All jobs of a layer are submitted at once;
 * completions are reaped as they arrive so the caller can compute each expert as soon as its
 * own bytes landed.  Backends: io_uring (liburing) or a pread thread pool, chosen automatically
 * (ring set-up failure falls back to the pool and says why).  Mode direct opens with O_DIRECT
 * (falls back to buffered where the file system refuses it); ranges must then be 4096-aligned
 * in offset, length and destination.  Short reads are retried, -EAGAIN retried, EOF before a
 * range's `need` bytes, -EIO, or the file shrinking or being replaced -> an error naming the
 * layer, the expert and the offset.  A job's bytes are only valid after wait reports it done.
 *
 * Threads: submit and wait are called from one thread; the pool's workers only touch the
 * destination bytes of the ranges they own and hand completion back under a mutex.
 */
#ifndef PT_EXPERT_IO_H
#define PT_EXPERT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_IO_MAX_RANGES 8
/* O_DIRECT alignment of offsets, lengths and buffers: the largest logical block size of the
 * disks we meet, not the page size (arm64 kernels with 16 / 64 KiB pages still take 4 KiB
 * aligned O_DIRECT I/O; buffers come from page-aligned mmap, so they are aligned anyway).
 * Where the kernel reports a file's own O_DIRECT alignment (statx STATX_DIOALIGN, Linux 6.1+)
 * and it is coarser, the file is read buffered instead (pt_io_direct_fits). */
#define PT_IO_ALIGN 4096u
#define PT_IO_MAX_FILES 258 /* a split model's parts (PT_GGUF_MAX_PARTS) + a pack cache */

enum pt_io_mode { PT_IO_DIRECT = 0, PT_IO_BUFFERED = 1, PT_IO_MMAP = 2 };

/* Whether PT_IO_ALIGN-aligned O_DIRECT reads suit a file whose statx reported these buffer
 * and offset alignments (known); unknown or zero alignments (the O_DIRECT open succeeded) are
 * assumed to suit.  On false, why gets " (reason)" for the engine's description. */
bool pt_io_direct_fits(bool known, uint32_t mem_align, uint32_t offset_align, char *why, size_t n);

/* "direct", "buffered" or "mmap". */
enum pt_status pt_io_mode_parse(const char *text, enum pt_io_mode *out, struct pt_error *err);
const char *pt_io_mode_name(enum pt_io_mode m);

struct pt_io_range {
	uint64_t offset; /* file offset */
	uint64_t len;    /* bytes to read (may extend past EOF when aligned) */
	uint64_t need;   /* bytes that must arrive (<= len); a short read at EOF past it is fine */
	uint8_t *dst;
	uint32_t file; /* 0: the job's file; else this file (a split model's part) */
};

struct pt_io_job {
	uint64_t tag;    /* returned by wait */
	uint32_t layer;  /* for error messages and counters */
	uint32_t expert;
	uint32_t n_ranges;
	uint32_t file; /* 0: the file the engine was opened on; else from pt_io_add_file */
	/* the destination memory was never written: its first-touch page faults (the kernel
	 * zeroing fresh pages, slow on some VMs) are taken by a kernel worker (io_uring
	 * IOSQE_ASYNC) instead of stalling the submitting thread, which computes meanwhile */
	bool cold;
	struct pt_io_range r[PT_IO_MAX_RANGES];
};

/* The file range ri of job j reads. */
static inline uint32_t pt_io_range_file(const struct pt_io_job *j, uint32_t ri)
{
	return j->r[ri].file ? j->r[ri].file : j->file;
}

/* Test hook, called with each read's result (bytes or -errno) before the engine looks at it;
 * returns the result to use (shorter count, -EIO, -EAGAIN ...). */
typedef int64_t (*pt_io_fault_fn)(void *ctx, uint64_t tag, uint32_t range, uint64_t offset,
				  int64_t res);

struct pt_io_config {
	const char *path;
	enum pt_io_mode mode;  /* DIRECT or BUFFERED (MMAP does not use the engine) */
	uint32_t max_jobs;     /* jobs in flight at once (0: 256) */
	uint32_t threads;      /* pread pool size (0: 4) */
	bool force_pread;      /* skip io_uring */
	bool fail_ring_setup;  /* test: act as if io_uring set-up failed */
	pt_io_fault_fn fault;  /* test: NULL normally */
	void *fault_ctx;
};

typedef struct pt_io pt_io;

enum pt_status pt_io_open(const struct pt_io_config *cfg, pt_io **out, struct pt_error *err);
void pt_io_close(pt_io *io); /* NULL-safe; waits for reads in flight */

/* Opens a second file (same mode) whose jobs say job.file = *id; checked like the first. */
enum pt_status pt_io_add_file(pt_io *io, const char *path, uint32_t *id, struct pt_error *err);

/* "io_uring, O_DIRECT" or "pread x4, buffered (io_uring unavailable: ...)" */
const char *pt_io_describe(const pt_io *io);
bool pt_io_is_uring(const pt_io *io);
bool pt_io_is_direct(const pt_io *io);
uint64_t pt_io_file_size(const pt_io *io);

/* Queues every job; checks the file is still the one opened and every range lies in it.
 * PT_E_LIMIT when more than max_jobs would be in flight. */
enum pt_status pt_io_submit(pt_io *io, const struct pt_io_job *jobs, uint32_t n,
			    struct pt_error *err);
/* Reaps one finished job: *got = false when block is false and none is ready yet (or none is
 * pending).  On success *tag names the job, *ns its latency.  A failed job returns its error
 * (with *got = true and *tag set); the other jobs keep going and can still be reaped. */
enum pt_status pt_io_wait(pt_io *io, bool block, bool *got, uint64_t *tag, uint64_t *ns,
			  struct pt_error *err);
uint32_t pt_io_pending(const pt_io *io);
/* The most jobs that can be in flight at once (max_jobs). */
uint32_t pt_io_capacity(const pt_io *io);
/* Wall time with at least one job pending (from its submit to its reap by wait): the time
 * the disk had work from us.  Reaping late (while computing) counts as busy. */
uint64_t pt_io_busy_ns(const pt_io *io);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t pt_io_now_ns(void);

#endif
