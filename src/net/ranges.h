/* ranges.h - which byte ranges of a download are on disk, and the sidecar state file that
 * records them so an interrupted download resumes where its verified bytes end.
 *
 * State file (text, one item per line, at most PT_PULL_STATE_MAX bytes):
 *   particle-pull-state 1
 *   size <decimal bytes of the whole file>
 *   validator <remote ETag or SHA-256 the bytes came with, or ->
 *   done <start> <end>          (zero or more: half-open [start, end), start < end <= size)
 *   end
 * Unknown lines, missing lines, bad numbers, overlong lines and anything after `end` are
 * errors: a state file that does not parse is ignored and the download starts over. */
#ifndef PT_NET_RANGES_H
#define PT_NET_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_PULL_STATE_MAX (1u << 20)
#define PT_PULL_MAX_RANGES 4096u
#define PT_PULL_VALIDATOR_MAX 95u

struct pt_range {
	uint64_t start, end; /* [start, end) */
};

/* Sorted, disjoint, non-adjacent ranges (adjacent ones are merged). */
struct pt_ranges {
	struct pt_range *r;
	uint32_t n, cap;
};

void pt_ranges_free(struct pt_ranges *s);
/* Adds [start, end) (merging); PT_E_LIMIT past PT_PULL_MAX_RANGES pieces. */
enum pt_status pt_ranges_add(struct pt_ranges *s, uint64_t start, uint64_t end,
			     struct pt_error *err);
/* Bytes covered. */
uint64_t pt_ranges_total(const struct pt_ranges *s);
/* End of the range covering `from` (== from when from is not covered). */
uint64_t pt_ranges_covered_to(const struct pt_ranges *s, uint64_t from);
/* First uncovered byte at or after from, and the end of that gap (limit bounds it).
 * Returns false when [from, limit) is fully covered. */
bool pt_ranges_next_gap(const struct pt_ranges *s, uint64_t from, uint64_t limit,
			uint64_t *gap_start, uint64_t *gap_end);

struct pt_pull_state {
	uint64_t size;
	char validator[PT_PULL_VALIDATOR_MAX + 1];
	struct pt_ranges done;
};

/* Parses state text of n bytes (need not be NUL-terminated).  PT_E_FORMAT on anything
 * malformed; out->done is empty (and needs no free) on failure. */
enum pt_status pt_pull_state_parse(const char *text, size_t n, struct pt_pull_state *out,
				   struct pt_error *err);
/* Formats into a new NUL-terminated pt_malloc'd string. */
enum pt_status pt_pull_state_format(const struct pt_pull_state *s, char **out,
				    struct pt_error *err);

#endif
