/* probe.h - the disk probe: what the expert read engine gets from the disk holding a model.
 *
 * It reads through the same engine the store uses (io_uring or the pread pool, O_DIRECT where
 * the file system allows it), with the store's kind of requests: blocks at random aligned
 * offsets spread over the whole file (never the same block twice in a trial, so neither the
 * page cache nor a cache below it serves a repeat), several in flight at once.  One sequential
 * stream or a fixed region at the start of the file understates a virtual disk (measured:
 * 0.9 GB/s for 4 streams over the first 512 MiB while the store read 1.5 GB/s).  Several
 * short trials; the best is the bandwidth quoted for the I/O floor (the fastest the disk
 * allowed), the median shows the spread.  Measured on the shared VM: the same 256 MiB of
 * random reads took 0.10-0.29 s in consecutive trials (the host's other writers), so a
 * single trial is not a bandwidth. */
#ifndef PT_EXPERT_PROBE_H
#define PT_EXPERT_PROBE_H

#include <stdint.h>

#include "util/status.h"

#define PT_PROBE_MAX_TRIALS 16

struct pt_disk_probe_config {
	const char *path;
	uint64_t trial_bytes; /* per trial (0: 128 MiB); capped at the file's size */
	uint32_t trials;      /* 0: 4; at most PT_PROBE_MAX_TRIALS */
	uint32_t block;       /* bytes per read, a multiple of 4096 (0: 2 MiB) */
	uint32_t depth;       /* reads in flight (0: 16) */
	uint64_t seed;        /* offsets; 0: from the clock */
	int force_pread;      /* the pread pool instead of io_uring */
};

struct pt_disk_probe_result {
	uint32_t n_trials;
	double trial_bps[PT_PROBE_MAX_TRIALS];
	double best_bps, median_bps;
	uint64_t bytes;  /* all trials */
	double secs;     /* all trials */
	uint32_t block, depth;
	char how[200];   /* "io_uring, O_DIRECT, 16 x 2048 KiB random reads, 3 x 256 MiB" */
	int direct;      /* O_DIRECT was used (else the page cache may have helped) */
};

enum pt_status pt_disk_probe(const struct pt_disk_probe_config *cfg,
			     struct pt_disk_probe_result *out, struct pt_error *err);

/* Appends b's trials to a (as many as fit PT_PROBE_MAX_TRIALS) and recomputes best and
 * median: a shared disk's bandwidth swings within seconds, so `bench` probes before and
 * after its run and quotes the best of both. */
void pt_disk_probe_merge(struct pt_disk_probe_result *a, const struct pt_disk_probe_result *b);

#endif
