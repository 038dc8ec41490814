/* membw.h - a STREAM-like memory read-bandwidth probe (issue 21's physical limit for decode
 * in RAM): n threads each sum their share of a buffer much larger than the caches, best of
 * several passes.  Decode in RAM reads every weight once per token, so bytes per token /
 * this bandwidth is the fastest decode the memory allows. */
#ifndef PT_KERN_MEMBW_H
#define PT_KERN_MEMBW_H

#include <stdint.h>

#include "util/status.h"

struct pt_membw_result {
	double best_bps;   /* bytes/s of the fastest pass */
	double median_bps;
	uint32_t passes;
	uint64_t bytes;    /* buffer size read per pass */
	uint64_t checksum; /* sum of the buffer (keeps the reads from being optimised away) */
};

/* Reads a bytes-sized buffer (rounded down to 4 KiB, at least 1 MiB) with threads threads
 * (1..64), passes times (1..64) after one warm-up pass that also faults the pages in. */
enum pt_status pt_membw_probe(uint64_t bytes, uint32_t threads, uint32_t passes,
			      struct pt_membw_result *out, struct pt_error *err);

#endif
