/* test_expert_cache.c - slot pool, LFU/LRU replacement, pinning, waves, counters. */
#include "test.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "expert/cache.h"
#include "util/alloc.h"

static pt_expert_cache *mk(uint32_t layers, uint32_t experts, uint32_t slots,
			   enum pt_cache_policy pol)
{
	struct pt_cache_config cfg = { .n_layers = layers, .n_expert = experts,
				       .slots_per_layer = slots, .slot_bytes = 5000,
				       .policy = pol };
	pt_expert_cache *c = NULL;
	if (pt_expert_cache_create(&cfg, &c, NULL) != PT_OK)
		return NULL;
	return c;
}

/* One token: acquire, "read" misses (publish ok), release.  Returns the hit count. */
static int token(pt_expert_cache *c, uint32_t layer, const uint32_t *e, uint32_t n)
{
	struct pt_cache_ref refs[64];
	uint32_t m = 0;
	int hits = 0;
	if (pt_expert_cache_acquire(c, layer, e, n, refs, &m, NULL) != PT_OK)
		return -1;
	for (uint32_t i = 0; i < m; i++) {
		if (refs[i].hit)
			hits++;
		else
			pt_expert_cache_publish(c, layer, refs[i].slot, true);
	}
	pt_expert_cache_release(c, layer, refs, m);
	return hits;
}

PT_TEST(test_expert_cache_pool_aligned)
{
	pt_expert_cache *c = mk(3, 16, 4, PT_CACHE_LFU);
	REQUIRE(c != NULL);
	CHECK_EQ_INT(pt_expert_cache_slot_bytes(c), 8192);
	for (uint32_t l = 0; l < 3; l++)
		for (uint32_t s = 0; s < 4; s++) {
			uint8_t *p = pt_expert_cache_slot_ptr(c, l, s);
			CHECK(((uintptr_t)p & 4095) == 0);
			p[0] = (uint8_t)(l * 4 + s); /* writable, distinct */
			p[8191] = 1;
		}
	CHECK(pt_expert_cache_slot_ptr(c, 2, 3) - pt_expert_cache_slot_ptr(c, 0, 0) == 11 * 8192);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_hits_and_dedup)
{
	pt_expert_cache *c = mk(2, 16, 4, PT_CACHE_LFU);
	struct pt_cache_stats st;
	REQUIRE(c != NULL);
	uint32_t a[] = { 1, 2, 2, 1 };
	CHECK_EQ_INT(token(c, 0, a, 4), 0);
	CHECK_EQ_INT(token(c, 0, a, 4), 2);
	CHECK_EQ_INT(token(c, 1, a, 2), 0); /* layers are independent */
	pt_expert_cache_stats(c, 0, &st);
	CHECK_EQ_INT(st.requests, 4);
	CHECK_EQ_INT(st.hits, 2);
	CHECK_EQ_INT(st.misses, 2);
	CHECK_EQ_INT(st.slots_used, 2);
	pt_expert_cache_stats(c, UINT32_MAX, &st);
	CHECK_EQ_INT(st.misses, 4);
	CHECK_EQ_INT(st.slots_used, 4);
	CHECK(pt_expert_cache_lookup(c, 0, 2) >= 0);
	CHECK(pt_expert_cache_lookup(c, 0, 3) < 0);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_lfu_with_lru_tiebreak)
{
	pt_expert_cache *c = mk(1, 16, 3, PT_CACHE_LFU);
	REQUIRE(c != NULL);
	uint32_t e0[] = { 0 }, e1[] = { 1 }, e2[] = { 2 }, e3[] = { 3 }, e4[] = { 4 };
	token(c, 0, e0, 1);
	token(c, 0, e0, 1);
	token(c, 0, e0, 1); /* 0 used 3 times */
	token(c, 0, e1, 1);
	token(c, 0, e2, 1); /* 1 and 2 once each; 1 older */
	token(c, 0, e3, 1); /* evicts 1 (LFU tie, older) */
	CHECK(pt_expert_cache_lookup(c, 0, 1) < 0);
	CHECK(pt_expert_cache_lookup(c, 0, 0) >= 0);
	CHECK(pt_expert_cache_lookup(c, 0, 2) >= 0);
	token(c, 0, e4, 1); /* 2 and 3 once each; 2 older -> evicted; 0 survives although oldest */
	CHECK(pt_expert_cache_lookup(c, 0, 2) < 0);
	CHECK(pt_expert_cache_lookup(c, 0, 0) >= 0);
	/* counts survive eviction: 1 comes back with count 2 and outranks 3 and 4 */
	token(c, 0, e1, 1); /* evicts 3 (count 1, older than 4) */
	CHECK(pt_expert_cache_lookup(c, 0, 3) < 0);
	token(c, 0, e2, 1); /* 2 now count 2; victims: 4 (count 1) */
	CHECK(pt_expert_cache_lookup(c, 0, 4) < 0);
	CHECK(pt_expert_cache_lookup(c, 0, 1) >= 0);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_lru_policy)
{
	pt_expert_cache *c = mk(1, 16, 2, PT_CACHE_LRU);
	REQUIRE(c != NULL);
	uint32_t e0[] = { 0 }, e1[] = { 1 }, e2[] = { 2 };
	token(c, 0, e0, 1);
	token(c, 0, e0, 1);
	token(c, 0, e1, 1);
	token(c, 0, e2, 1); /* LRU evicts 0 despite its count */
	CHECK(pt_expert_cache_lookup(c, 0, 0) < 0);
	CHECK(pt_expert_cache_lookup(c, 0, 1) >= 0);
	enum pt_cache_policy p;
	CHECK_EQ_INT(pt_cache_policy_parse("lru", &p, NULL), PT_OK);
	CHECK_EQ_INT(p, PT_CACHE_LRU);
	CHECK_EQ_INT(pt_cache_policy_parse("fifo", &p, NULL), PT_E_INVALID);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_pinned_never_evicted)
{
	pt_expert_cache *c = mk(1, 16, 3, PT_CACHE_LFU);
	struct pt_cache_ref held[4], refs[4];
	uint32_t nh = 0, n = 0;
	REQUIRE(c != NULL);
	uint32_t a[] = { 5, 6 }, b[] = { 7, 8 }, d[] = { 7 };
	for (int i = 0; i < 5; i++)
		token(c, 0, b, 2); /* 7, 8 popular */
	REQUIRE(pt_expert_cache_acquire(c, 0, a, 2, held, &nh, NULL) == PT_OK);
	/* 5 takes the empty slot, 6 must evict 7 or 8 (unpinned) */
	for (uint32_t i = 0; i < nh; i++)
		pt_expert_cache_publish(c, 0, held[i].slot, true);
	/* while 5 and 6 are pinned, a request for 2 new experts cannot fit in 1 free slot */
	uint32_t two[] = { 9, 10 };
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_expert_cache_acquire(c, 0, two, 2, refs, &n, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "waves");
	CHECK(pt_expert_cache_lookup(c, 0, 5) >= 0); /* nothing changed */
	CHECK(pt_expert_cache_lookup(c, 0, 6) >= 0);
	/* one new expert still fits in the one unpinned slot */
	REQUIRE(pt_expert_cache_acquire(c, 0, d, 1, refs, &n, NULL) == PT_OK);
	CHECK(refs[0].hit || refs[0].slot != held[0].slot);
	if (!refs[0].hit)
		pt_expert_cache_publish(c, 0, refs[0].slot, true);
	pt_expert_cache_release(c, 0, refs, n);
	pt_expert_cache_release(c, 0, held, nh);
	CHECK_EQ_INT(token(c, 0, two, 2), 0); /* fits after release */
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_failed_read_not_published)
{
	pt_expert_cache *c = mk(1, 8, 2, PT_CACHE_LFU);
	struct pt_cache_ref refs[2];
	struct pt_cache_stats st;
	uint32_t n = 0, e[] = { 3 };
	REQUIRE(c != NULL);
	REQUIRE(pt_expert_cache_acquire(c, 0, e, 1, refs, &n, NULL) == PT_OK);
	CHECK(!refs[0].hit);
	CHECK(pt_expert_cache_lookup(c, 0, 3) < 0); /* loading is not a hit */
	struct pt_cache_ref again[2];
	uint32_t n2 = 0;
	CHECK_EQ_INT(pt_expert_cache_acquire(c, 0, e, 1, again, &n2, NULL), PT_E_BUSY);
	pt_expert_cache_publish(c, 0, refs[0].slot, false);
	pt_expert_cache_release(c, 0, refs, n);
	CHECK(pt_expert_cache_lookup(c, 0, 3) < 0);
	pt_expert_cache_stats(c, 0, &st);
	CHECK_EQ_INT(st.slots_used, 0);
	CHECK_EQ_INT(token(c, 0, e, 1), 0); /* read again, a miss */
	CHECK_EQ_INT(token(c, 0, e, 1), 1);
	uint32_t bad[] = { 8 };
	CHECK_EQ_INT(pt_expert_cache_acquire(c, 0, bad, 1, refs, &n, NULL), PT_E_INVALID);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_waves)
{
	pt_expert_cache *c = mk(1, 32, 4, PT_CACHE_LFU);
	uint32_t ends[16], nw = 0;
	REQUIRE(c != NULL);
	uint32_t warm[] = { 20, 21 };
	token(c, 0, warm, 2);
	uint32_t u[] = { 1, 2, 20, 3, 4, 21, 5, 6, 7, 8 };
	REQUIRE(pt_expert_cache_waves(c, 0, u, 10, false, ends, &nw, NULL) == PT_OK);
	CHECK_EQ_INT(nw, 3);
	CHECK_EQ_INT(ends[0], 4);
	CHECK_EQ_INT(ends[1], 8);
	CHECK_EQ_INT(ends[2], 10);
	CHECK_EQ_INT(u[0], 20); /* resident first, order kept */
	CHECK_EQ_INT(u[1], 21);
	CHECK_EQ_INT(u[2], 1);
	CHECK_EQ_INT(u[9], 8);
	/* every wave fits when run in order */
	uint32_t start = 0;
	for (uint32_t w = 0; w < nw; w++) {
		int h = token(c, 0, u + start, ends[w] - start);
		CHECK(h >= 0);
		if (w == 0)
			CHECK_EQ_INT(h, 2);
		start = ends[w];
	}
	/* exact multiple and empty */
	uint32_t v[] = { 9, 10, 11, 12 };
	REQUIRE(pt_expert_cache_waves(c, 0, v, 4, false, ends, &nw, NULL) == PT_OK);
	CHECK_EQ_INT(nw, 1);
	REQUIRE(pt_expert_cache_waves(c, 0, v, 0, false, ends, &nw, NULL) == PT_OK);
	CHECK_EQ_INT(nw, 0);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_no_alloc_after_create)
{
	pt_expert_cache *c = mk(4, 64, 8, PT_CACHE_LFU);
	REQUIRE(c != NULL);
	uint64_t before = pt_alloc_calls();
	for (uint32_t t = 0; t < 200; t++) {
		uint32_t e[8];
		for (uint32_t i = 0; i < 8; i++)
			e[i] = (t * 7 + i * 13) % 64;
		for (uint32_t l = 0; l < 4; l++)
			CHECK(token(c, l, e, 8) >= 0);
	}
	struct pt_cache_stats st;
	pt_expert_cache_stats(c, UINT32_MAX, &st);
	CHECK_EQ_INT(pt_alloc_calls(), before);
	CHECK_EQ_INT(st.requests, 200 * 4 * 8);
	CHECK_EQ_INT(st.hits + st.misses, st.requests);
	pt_expert_cache_destroy(c);
}

PT_TEST(test_expert_cache_bad_geometry)
{
	struct pt_cache_config cfg = { .n_layers = 1, .n_expert = 4, .slots_per_layer = 5,
				       .slot_bytes = 1 };
	pt_expert_cache *c = (pt_expert_cache *)1;
	CHECK_EQ_INT(pt_expert_cache_create(&cfg, &c, NULL), PT_E_INVALID);
	CHECK(c == NULL);
	cfg.slots_per_layer = 2;
	cfg.n_layers = 1u << 30;
	cfg.slot_bytes = 1ull << 40; /* pool overflows */
	CHECK(pt_expert_cache_create(&cfg, &c, NULL) != PT_OK);
	CHECK(c == NULL);
}

/* Read-ahead: only absent experts, at most max, LOADING without a pin or a request; guessed
 * experts already present are never its victims; a later acquire pins a still-loading
 * read-ahead (no new read) and counts it a miss and ahead_used; one evicted unused counts
 * ahead_wasted. */
PT_TEST(test_expert_cache_read_ahead)
{
	pt_expert_cache *c = mk(1, 16, 4, PT_CACHE_LFU);
	struct pt_cache_ref refs[8];
	struct pt_cache_stats st;
	uint32_t n = 0, slot;
	REQUIRE(c != NULL);
	const uint32_t hot[] = { 1, 2, 3 }, cold[] = { 4 };
	for (int i = 0; i < 3; i++)
		CHECK(token(c, 0, hot, 3) >= 0);
	CHECK_EQ_INT(token(c, 0, cold, 1), 0); /* 4 slots full; expert 4 used once: LFU victim */
	pt_expert_cache_stats(c, 0, &st);
	const uint64_t req0 = st.requests, miss0 = st.misses;
	/* guess {4, 9, 10}: 4 is present (guarded), only one slot may be taken (max 1) */
	const uint32_t guess[] = { 4, 9, 10 };
	CHECK_EQ_INT(pt_expert_cache_acquire_ahead(c, 0, guess, 3, 1, refs), 1);
	CHECK_EQ_INT(refs[0].expert, 9);
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 4, &slot), 2); /* not the victim */
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 9, &slot), 1); /* loading */
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 10, &slot), 0);
	pt_expert_cache_stats(c, 0, &st);
	CHECK(st.requests == req0 && st.misses == miss0 && st.ahead_reads == 1);
	/* a guess of present or loading experts takes nothing */
	CHECK_EQ_INT(pt_expert_cache_acquire_ahead(c, 0, guess, 2, 3, refs + 1), 0);
	/* the real request: 9 is still loading -> pinned as "hit" (no read), counted a miss */
	const uint32_t real[] = { 9, 4 };
	struct pt_cache_ref got[2];
	REQUIRE(pt_expert_cache_acquire(c, 0, real, 2, got, &n, NULL) == PT_OK);
	CHECK(n == 2 && got[0].hit && got[0].slot == refs[0].slot && got[1].hit);
	pt_expert_cache_stats(c, 0, &st);
	CHECK(st.requests == req0 + 2 && st.misses == miss0 + 1 && st.ahead_used == 1);
	pt_expert_cache_publish(c, 0, refs[0].slot, true);
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 9, &slot), 2);
	pt_expert_cache_release(c, 0, got, n);
	/* a read-ahead evicted before any acquire is waste */
	const uint32_t g2[] = { 11 };
	REQUIRE(pt_expert_cache_acquire_ahead(c, 0, g2, 1, 4, refs) == 1);
	pt_expert_cache_publish(c, 0, refs[0].slot, true);
	const uint32_t others[] = { 12, 13, 14, 15 };
	CHECK(token(c, 0, others, 4) >= 0); /* evicts every slot, 11 included */
	pt_expert_cache_stats(c, 0, &st);
	CHECK_EQ_INT(st.ahead_reads, 2);
	CHECK_EQ_INT(st.ahead_used, 1);
	CHECK_EQ_INT(st.ahead_wasted, 1);
	/* a failed read-ahead empties its slot and is not waste or use */
	const uint32_t g3[] = { 5 };
	REQUIRE(pt_expert_cache_acquire_ahead(c, 0, g3, 1, 4, refs) == 1);
	pt_expert_cache_publish(c, 0, refs[0].slot, false);
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 5, &slot), 0);
	CHECK_EQ_INT(token(c, 0, g3, 1), 0);
	pt_expert_cache_stats(c, 0, &st);
	CHECK_EQ_INT(st.ahead_used, 1);
	CHECK_EQ_INT(st.ahead_wasted, 1);
	/* out-of-range guesses are skipped */
	const uint32_t badg[] = { 99 };
	CHECK_EQ_INT(pt_expert_cache_acquire_ahead(c, 0, badg, 1, 4, refs), 0);
	pt_expert_cache_destroy(c);
}

/* Lending slots (issue 21: a long prompt's chunk buffers borrow them): set_active(n) drops
 * the experts of slots >= n on every layer and zeroes their memory (handed back to the
 * kernel), acquire and waves then use n slots only; a pinned or loading slot refuses the
 * loan with nothing changed; raising n gives the slots back empty, faulted in again; n out
 * of range is refused. */
PT_TEST(test_expert_cache_lend_slots)
{
	pt_expert_cache *c = mk(2, 32, 4, PT_CACHE_LFU);
	struct pt_error err = { 0 };
	uint32_t slot = 0;
	REQUIRE(c != NULL);
	const bool small_pages = sysconf(_SC_PAGESIZE) <= (long)pt_expert_cache_slot_bytes(c);
	CHECK_EQ_INT(pt_expert_cache_active(c), 4);
	uint32_t fill[] = { 1, 2, 3, 4 };
	CHECK_EQ_INT(token(c, 0, fill, 4), 0);
	CHECK_EQ_INT(token(c, 1, fill, 4), 0);
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t s = 0; s < 4; s++)
			memset(pt_expert_cache_slot_ptr(c, l, s), 0x5a,
			       pt_expert_cache_slot_bytes(c));
	CHECK_EQ_INT(pt_expert_cache_set_active(c, 0, NULL, &err), PT_E_INVALID);
	CHECK_EQ_INT(pt_expert_cache_set_active(c, 5, NULL, &err), PT_E_INVALID);

	/* a pin on layer 1's slot 3: no loan, nothing dropped */
	struct pt_cache_ref refs[8];
	uint32_t m = 0;
	REQUIRE(pt_expert_cache_find(c, 1, 4, &slot) == 2);
	CHECK_EQ_INT(slot, 3);
	REQUIRE(pt_expert_cache_acquire(c, 1, &fill[3], 1, refs, &m, NULL) == PT_OK);
	CHECK_EQ_INT(pt_expert_cache_set_active(c, 2, NULL, &err), PT_E_BUSY);
	CHECK_EQ_INT(pt_expert_cache_active(c), 4);
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 4, &slot), 2);
	pt_expert_cache_release(c, 1, refs, m);

	bool populated = true;
	REQUIRE(pt_expert_cache_set_active(c, 2, &populated, &err) == PT_OK);
	CHECK(!populated); /* lending faults nothing in */
	CHECK_EQ_INT(pt_expert_cache_active(c), 2);
	for (uint32_t l = 0; l < 2; l++) {
		CHECK_EQ_INT(pt_expert_cache_find(c, l, 1, &slot), 2); /* slots 0, 1 kept */
		CHECK_EQ_INT(pt_expert_cache_find(c, l, 2, &slot), 2);
		CHECK_EQ_INT(pt_expert_cache_find(c, l, 3, &slot), 0); /* lent: dropped */
		CHECK_EQ_INT(pt_expert_cache_find(c, l, 4, &slot), 0);
		CHECK_EQ_INT(pt_expert_cache_slot_ptr(c, l, 0)[0], 0x5a);
		/* the lent memory went back to the kernel: zero when touched again (whole pages
		 * only: with pages larger than the two lent 8 KiB slots, e.g. 64 KiB ones, none) */
		const uint8_t *p = pt_expert_cache_slot_ptr(c, l, 2);
		if (small_pages) {
			CHECK_EQ_INT(p[0], 0);
			CHECK_EQ_INT(p[2 * pt_expert_cache_slot_bytes(c) - 1], 0);
		}
	}
	/* two slots now: three misses do not fit, waves cut by two, victims among 0 and 1 */
	uint32_t three[] = { 7, 8, 9 }, ends[8], nw = 0;
	CHECK_EQ_INT(pt_expert_cache_acquire(c, 0, three, 3, refs, &m, NULL), PT_E_LIMIT);
	REQUIRE(pt_expert_cache_waves(c, 0, three, 3, false, ends, &nw, NULL) == PT_OK);
	CHECK_EQ_INT(nw, 2);
	CHECK_EQ_INT(token(c, 0, three, 2), 0);
	REQUIRE(pt_expert_cache_find(c, 0, 7, &slot) == 2);
	CHECK(slot < 2);

	/* given back: four slots again, the two lent ones empty (taken before any victim) and
	 * faulted in at once (zero pages, present) */
	REQUIRE(pt_expert_cache_set_active(c, 4, &populated, &err) == PT_OK);
	CHECK(populated);
	if (small_pages)
		CHECK_EQ_INT(pt_expert_cache_slot_ptr(c, 1, 3)[0], 0);
	CHECK_EQ_INT(pt_expert_cache_active(c), 4);
	CHECK_EQ_INT(token(c, 0, &three[2], 1), 0);
	REQUIRE(pt_expert_cache_find(c, 0, 9, &slot) == 2);
	CHECK(slot >= 2);
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 7, &slot), 2); /* nothing evicted for it */
	CHECK_EQ_INT(pt_expert_cache_find(c, 0, 8, &slot), 2);
	pt_expert_cache_destroy(c);
}

/* Pages of [p, p + n) resident in memory (mincore), 0..n pages; -1 on error. */
static int resident_pages(const uint8_t *p, size_t n)
{
	const long pg = sysconf(_SC_PAGESIZE);
	const uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	const size_t len = (size_t)((uintptr_t)p + n - a), np = (len + (size_t)pg - 1) / (size_t)pg;
	unsigned char v[64];
	if (np > sizeof v || mincore((void *)a, len, v) != 0)
		return -1;
	int r = 0;
	for (size_t i = 0; i < np; i++)
		r += v[i] & 1;
	return r;
}

/* populate faults in the memory of every active slot and nothing lent (issue 21 round 27:
 * a read into never-touched memory pays the kernel's zeroing in the middle of a prompt);
 * the slots keep their experts; with the kernel unable (before 5.14) it says so. */
PT_TEST(test_expert_cache_populate)
{
	pt_expert_cache *c = mk(3, 16, 4, PT_CACHE_LFU);
	struct pt_error err = { 0 };
	REQUIRE(c != NULL);
	const size_t sb = pt_expert_cache_slot_bytes(c);
	const bool small_pages = sysconf(_SC_PAGESIZE) <= (long)sb;
	/* fresh: nothing resident yet */
	if (small_pages)
		for (uint32_t l = 0; l < 3; l++)
			CHECK_EQ_INT(resident_pages(pt_expert_cache_slot_ptr(c, l, 0), 4 * sb), 0);
	/* two slots of each layer lent: populate touches only the two active ones */
	REQUIRE(pt_expert_cache_set_active(c, 2, NULL, &err) == PT_OK);
	bool populated = false;
	pt_expert_cache_populate(c, &populated);
	if (populated && small_pages) {
		const int per_slot = (int)(sb / (size_t)sysconf(_SC_PAGESIZE));
		for (uint32_t l = 0; l < 3; l++) {
			CHECK_EQ_INT(resident_pages(pt_expert_cache_slot_ptr(c, l, 0), 2 * sb),
				     2 * per_slot);
			CHECK_EQ_INT(resident_pages(pt_expert_cache_slot_ptr(c, l, 2), 2 * sb), 0);
		}
	}
	/* an expert read before a populate keeps its bytes and its slot */
	uint32_t one[] = { 5 }, slot = 0;
	CHECK_EQ_INT(token(c, 1, one, 1), 0);
	REQUIRE(pt_expert_cache_find(c, 1, 5, &slot) == 2);
	memset(pt_expert_cache_slot_ptr(c, 1, slot), 0x77, sb);
	REQUIRE(pt_expert_cache_set_active(c, 4, NULL, &err) == PT_OK);
	pt_expert_cache_populate(c, &populated);
	if (populated && small_pages)
		for (uint32_t l = 0; l < 3; l++)
			CHECK_EQ_INT(resident_pages(pt_expert_cache_slot_ptr(c, l, 0), 4 * sb),
				     (int)(4 * sb / (size_t)sysconf(_SC_PAGESIZE)));
	CHECK_EQ_INT(pt_expert_cache_find(c, 1, 5, &slot), 2);
	CHECK_EQ_INT(pt_expert_cache_slot_ptr(c, 1, slot)[sb - 1], 0x77);
	pt_expert_cache_destroy(c);
}
