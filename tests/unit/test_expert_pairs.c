/* test_expert_pairs.c - grouping a prefill chunk's (token, rank) pairs by expert
 * (expert/pairs.h), the host half of the CUDA backend's chunked expert products. */
#include "test.h"

#include "expert/pairs.h"

/* Every pair in exactly one tile of its own expert, tiles in plist order, each group's
 * experts the next k distinct ones in order of first use, tile counts within the bound. */
static void check_groups(const int32_t *ids, uint32_t n, uint32_t n_expert, uint32_t k,
			 uint32_t tmax)
{
	int32_t uniq[64], plist[512], tiles[4 * 600];
	uint32_t tile_at[65];
	int seen[512] = { 0 };
	struct pt_pair_groups pg;
	struct pt_error err = { 0 };
	REQUIRE(n <= 512 && n_expert <= 64);
	REQUIRE(pt_pairs_group(ids, n, n_expert, k, tmax, uniq, plist, tiles, tile_at, &pg, &err) ==
		PT_OK);
	CHECK(pg.n_tiles <= pt_pairs_max_tiles(n, n_expert, tmax));
	CHECK(pg.n_groups == (pg.n_uniq + k - 1) / k);
	CHECK(tile_at[0] == 0 && tile_at[pg.n_groups] == pg.n_tiles);
	/* uniq: distinct, in order of first use */
	for (uint32_t u = 0, p = 0; u < pg.n_uniq; u++) {
		while (p < n && ids[p] != uniq[u]) {
			int earlier = 0;
			for (uint32_t v = 0; v < u; v++)
				earlier |= ids[p] == uniq[v];
			CHECK(earlier);
			p++;
		}
		CHECK(p < n);
	}
	uint32_t next = 0;
	for (uint32_t gi = 0; gi < pg.n_groups; gi++) {
		CHECK(tile_at[gi] <= tile_at[gi + 1]);
		for (uint32_t t = tile_at[gi]; t < tile_at[gi + 1]; t++) {
			const int32_t *tl = tiles + 4 * t;
			CHECK(tl[0] >= 0 && (uint32_t)tl[0] < k);
			CHECK(tl[2] >= 1 && (uint32_t)tl[2] <= tmax);
			CHECK((uint32_t)tl[1] == next);
			next += (uint32_t)tl[2];
			const int32_t e = uniq[gi * k + (uint32_t)tl[0]];
			for (int32_t j = 0; j < tl[2] && (uint32_t)(tl[1] + j) < n; j++) {
				const int32_t p = plist[tl[1] + j];
				CHECK(p >= 0 && (uint32_t)p < n && ids[p] == e);
				if (j > 0)
					CHECK(p > plist[tl[1] + j - 1]); /* pair order within an expert */
				seen[p]++;
			}
		}
	}
	CHECK(next == n);
	for (uint32_t p = 0; p < n; p++)
		CHECK(seen[p] == 1);
}

PT_TEST(test_expert_pairs_groups)
{
	static const int32_t a[] = { 3, 1, 3, 0, 1, 3, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 4 };
	check_groups(a, sizeof a / sizeof a[0], 5, 2, 8);
	check_groups(a, sizeof a / sizeof a[0], 5, 3, 4);
	check_groups(a, 1, 5, 1, 8);
	int32_t r[512];
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < 20; round++) {
		const uint32_t n_expert = 1 + (uint32_t)(x % 64), k = 1 + (uint32_t)(x % 7);
		for (int i = 0; i < 512; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			r[i] = (int32_t)(x % (i % 3 ? n_expert : (n_expert + 3) / 4)); /* skewed */
		}
		check_groups(r, 1 + (uint32_t)(x % 512), n_expert, k, 1 + (uint32_t)(x % 9));
	}
}

PT_TEST(test_expert_pairs_groups_exact_layout)
{
	/* experts in order of first use 2, 0, 1: group 0 = {2, 0}, group 1 = {1} */
	static const int32_t ids[] = { 2, 0, 2, 1, 2, 2 };
	int32_t uniq[3], plist[6], tiles[4 * 8];
	uint32_t tile_at[4];
	struct pt_pair_groups pg;
	struct pt_error err = { 0 };
	REQUIRE(pt_pairs_group(ids, 6, 3, 2, 3, uniq, plist, tiles, tile_at, &pg, &err) == PT_OK);
	CHECK(pg.n_uniq == 3 && pg.n_groups == 2 && pg.n_tiles == 4);
	CHECK(uniq[0] == 2 && uniq[1] == 0 && uniq[2] == 1);
	static const int32_t want_plist[] = { 0, 2, 4, 5, 1, 3 };
	CHECK(memcmp(plist, want_plist, sizeof want_plist) == 0);
	static const int32_t want_tiles[] = { 0, 0, 3, 0, 0, 3, 1, 0, 1, 4, 1, 0, 0, 5, 1, 0 };
	CHECK(memcmp(tiles, want_tiles, sizeof want_tiles) == 0);
	CHECK(tile_at[0] == 0 && tile_at[1] == 3 && tile_at[2] == 4);
}

PT_TEST(test_expert_pairs_rejects_bad_ids)
{
	static const int32_t bad[] = { 0, 5 }, neg[] = { -1 };
	int32_t uniq[8], plist[8], tiles[64];
	uint32_t tile_at[9];
	struct pt_pair_groups pg;
	struct pt_error err = { 0 };
	CHECK(pt_pairs_group(bad, 2, 5, 2, 8, uniq, plist, tiles, tile_at, &pg, &err) ==
	      PT_E_INVALID);
	CHECK(strstr(err.msg, "expert id 5") != NULL);
	CHECK(pt_pairs_group(neg, 1, 5, 2, 8, uniq, plist, tiles, tile_at, &pg, &err) ==
	      PT_E_INVALID);
	CHECK(pt_pairs_group(bad, 1, 5, 0, 8, uniq, plist, tiles, tile_at, &pg, &err) ==
	      PT_E_INVALID);
}
