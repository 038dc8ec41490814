/* pairs.h - a prefill chunk's (token, rank) pairs grouped by routed expert (issue 16): the
 * device backend computes a chunk's expert products per expert over that expert's pairs,
 * and with an expert cache it brings the chunk's distinct experts in through the store in
 * groups of top-k (what one pt_vstore_acquire pins).  Plain C, tested without a GPU
 * (tests/unit/test_expert_pairs.c).
 *
 * Pair p (0 <= p < n_pairs) chose expert ids[p].  The distinct experts are listed in order
 * of first use (uniq); group g holds uniq[g k .. min(g k + k, n_uniq)).  Each expert's pairs
 * go to plist in pair order, experts in uniq order, cut into tiles of at most tile_max
 * pairs: tile t = { index of its expert within its group, first plist index, count, 0 }.
 * Group g's tiles are tiles[tile_at[g] .. tile_at[g + 1]). */
#ifndef PT_EXPERT_PAIRS_H
#define PT_EXPERT_PAIRS_H

#include <stdint.h>

#include "util/status.h"

struct pt_pair_groups {
	uint32_t n_uniq, n_groups, n_tiles;
};

/* At most n_pairs / tile_max + min(n_pairs, n_expert) + 1 tiles (pt_pairs_max_tiles);
 * uniq holds n_expert, tile_at n_expert + 1.  PT_E_INVALID for an id outside
 * [0, n_expert), k or tile_max of 0. */
uint32_t pt_pairs_max_tiles(uint32_t n_pairs, uint32_t n_expert, uint32_t tile_max);
enum pt_status pt_pairs_group(const int32_t *ids, uint32_t n_pairs, uint32_t n_expert,
			      uint32_t k, uint32_t tile_max, int32_t *uniq, int32_t *plist,
			      int32_t *tiles, uint32_t *tile_at, struct pt_pair_groups *out,
			      struct pt_error *err);

#endif
