/* pairs.c - grouping a chunk's (token, rank) pairs by expert (pairs.h). */
#include "expert/pairs.h"

#include <stddef.h>

uint32_t pt_pairs_max_tiles(uint32_t n_pairs, uint32_t n_expert, uint32_t tile_max)
{
	if (!tile_max)
		return 0;
	return (n_pairs + tile_max - 1) / tile_max + (n_pairs < n_expert ? n_pairs : n_expert) + 1;
}

enum pt_status pt_pairs_group(const int32_t *ids, uint32_t n_pairs, uint32_t n_expert,
			      uint32_t k, uint32_t tile_max, int32_t *uniq, int32_t *plist,
			      int32_t *tiles, uint32_t *tile_at, struct pt_pair_groups *out,
			      struct pt_error *err)
{
	out->n_uniq = out->n_groups = out->n_tiles = 0;
	if (!k || !tile_max)
		return pt_error_set(err, PT_E_INVALID, "pair groups: k %u, tiles of %u", k, tile_max);
	uint32_t nu = 0;
	for (uint32_t p = 0; p < n_pairs; p++) {
		if (ids[p] < 0 || (uint32_t)ids[p] >= n_expert)
			return pt_error_set(err, PT_E_INVALID, "pair groups: expert id %d of %u", ids[p],
					    n_expert);
		uint32_t j = 0;
		while (j < nu && uniq[j] != ids[p])
			j++;
		if (j == nu)
			uniq[nu++] = ids[p];
	}
	uint32_t at = 0, nt = 0;
	for (uint32_t u = 0; u < nu; u++) {
		if (u % k == 0)
			tile_at[u / k] = nt;
		const uint32_t first = at;
		for (uint32_t p = 0; p < n_pairs; p++)
			if (ids[p] == uniq[u])
				plist[at++] = (int32_t)p;
		for (uint32_t f = first; f < at; f += tile_max, nt++) {
			int32_t *t = tiles + 4 * (size_t)nt;
			t[0] = (int32_t)(u % k);
			t[1] = (int32_t)f;
			t[2] = (int32_t)(at - f < tile_max ? at - f : tile_max);
			t[3] = 0;
		}
	}
	out->n_uniq = nu;
	out->n_groups = (nu + k - 1) / k;
	out->n_tiles = nt;
	tile_at[out->n_groups] = nt;
	return PT_OK;
}
