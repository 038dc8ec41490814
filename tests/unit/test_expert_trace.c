/* test_expert_trace.c - trace formats and cache simulation on hand-made traces whose hit
 * counts are worked out in the comments. */
#include "test.h"

#include <stdio.h>

#include "expert/cachesim.h"
#include "expert/trace.h"

static const char *write_text(const char *name, const char *text)
{
	const char *p = pt_test_tmpfile(name);
	FILE *f = fopen(p, "w");
	if (!f)
		return NULL;
	fputs(text, f);
	fclose(f);
	return p;
}

static void sim(const char *text, uint32_t slots, uint64_t want_req, uint64_t lru, uint64_t lfu,
		uint64_t opt)
{
	struct pt_trace t;
	struct pt_sim_result r;
	const char *p = write_text("sim.txt", text);
	REQUIRE(p && pt_trace_read(p, &t, NULL) == PT_OK);
	REQUIRE(pt_cachesim_run(&t, slots, &r, NULL) == PT_OK);
	CHECK_EQ_INT(r.requests, want_req);
	CHECK_EQ_INT(r.hits[PT_SIM_LRU], lru);
	CHECK_EQ_INT(r.hits[PT_SIM_LFU], lfu);
	CHECK_EQ_INT(r.hits[PT_SIM_BELADY], opt);
	pt_cachesim_free(&r);
	pt_trace_free(&t);
}

PT_TEST(test_expert_trace_cyclic_defeats_lru)
{
	/* 2 slots, cycle 0 1 2 0 1 2: LRU and LFU (all counts tie -> LRU) always miss; Belady
	 * keeps 0 at t2 (next use t3 < 1's t4) -> hit at t3, keeps 2 at t4 -> hit at t5. */
	sim("0 0 0\n1 0 1\n2 0 2\n3 0 0\n4 0 1\n5 0 2\n", 2, 6, 0, 0, 2);
}

PT_TEST(test_expert_trace_lfu_keeps_popular)
{
	/* 2 slots: 0 0 0 1 2 0.  LRU: m h h m m(evicts 0) m -> 2 hits.  LFU evicts 1 (count 1
	 * vs 3) at t4 -> 0 hits at t5 -> 3.  Belady: 3. */
	sim("0 0 0\n1 0 0\n2 0 0\n3 0 1\n4 0 2\n5 0 0\n", 2, 6, 2, 3, 3);
}

PT_TEST(test_expert_trace_layers_independent_and_dedup)
{
	/* top-2 on two layers, 2 slots: layer 3 repeats {1,2} -> 2 hits on t1 (the duplicate 2
	 * in t1 is one request); layer 5 sees {1,2} then {3,4}: no hits. */
	sim("# comment\n0 3 1 2\n0 5 1 2\n\n1 3 2 1 2\n1 5 3 4\n", 2, 8, 2, 2, 2);
}

PT_TEST(test_expert_trace_binary_round_trip)
{
	const char *p = pt_test_tmpfile("t.bin");
	pt_trace_writer *w = NULL;
	struct pt_trace t;
	uint32_t a[] = { 5, 9, 300 }, b[] = { 1 };
	REQUIRE(pt_trace_writer_open(p, true, &w, NULL) == PT_OK);
	REQUIRE(pt_trace_writer_add(w, 0, 7, a, 3, NULL) == PT_OK);
	REQUIRE(pt_trace_writer_add(w, 1, 7, b, 1, NULL) == PT_OK);
	uint32_t big[] = { 70000 };
	CHECK_EQ_INT(pt_trace_writer_add(w, 2, 7, big, 1, NULL), PT_E_LIMIT);
	REQUIRE(pt_trace_writer_close(w, NULL) == PT_OK);
	REQUIRE(pt_trace_read(p, &t, NULL) == PT_OK);
	REQUIRE(t.n_rec == 2);
	CHECK_EQ_INT(t.rec[0].layer, 7);
	CHECK_EQ_INT(t.rec[0].k, 3);
	CHECK_EQ_INT(t.experts[t.rec[0].first + 2], 300);
	CHECK_EQ_INT(t.rec[1].token, 1);
	CHECK_EQ_INT(t.max_expert, 300);
	pt_trace_free(&t);
	/* text writer gives the same records */
	REQUIRE(pt_trace_writer_open(p, false, &w, NULL) == PT_OK);
	REQUIRE(pt_trace_writer_add(w, 4, 2, a, 3, NULL) == PT_OK);
	REQUIRE(pt_trace_writer_close(w, NULL) == PT_OK);
	REQUIRE(pt_trace_read(p, &t, NULL) == PT_OK);
	CHECK_EQ_INT(t.n_rec, 1);
	CHECK_EQ_INT(t.rec[0].token, 4);
	pt_trace_free(&t);
}

PT_TEST(test_expert_trace_bad_input)
{
	struct pt_trace t;
	struct pt_sim_result r;
	struct pt_error err = { 0 };
	const char *p = write_text("bad.txt", "0 1 2\n0 x 3\n");
	CHECK_EQ_INT(pt_trace_read(p, &t, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "line 2");
	p = write_text("empty.txt", "# nothing\n");
	CHECK_EQ_INT(pt_trace_read(p, &t, NULL), PT_E_FORMAT);
	p = write_text("trunc.bin", "PTXTRC01\x01\x00\x00\x00\x02\x00\x03\x00\x01");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_trace_read(p, &t, &err), PT_E_FORMAT);
	p = write_text("wide.txt", "0 0 1 2 3\n");
	REQUIRE(pt_trace_read(p, &t, NULL) == PT_OK);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_cachesim_run(&t, 2, &r, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "3 distinct experts");
	pt_trace_free(&t);
}

PT_TEST(test_expert_trace_belady_bounds_online)
{
	/* a pseudo-random trace: Belady >= LRU, LFU and all <= requests */
	const char *p = pt_test_tmpfile("rand.txt");
	FILE *f = fopen(p, "w");
	REQUIRE(f != NULL);
	uint32_t x = 12345;
	for (int tok = 0; tok < 400; tok++)
		for (int layer = 0; layer < 3; layer++) {
			fprintf(f, "%d %d", tok, layer);
			for (int k = 0; k < 4; k++) {
				x = x * 1103515245u + 12345u;
				fprintf(f, " %u", (x >> 16) % (k < 2 ? 8 : 40));
			}
			fputc('\n', f);
		}
	fclose(f);
	struct pt_trace t;
	struct pt_sim_result r;
	REQUIRE(pt_trace_read(p, &t, NULL) == PT_OK);
	REQUIRE(pt_cachesim_run(&t, 8, &r, NULL) == PT_OK);
	CHECK(r.hits[PT_SIM_BELADY] >= r.hits[PT_SIM_LRU]);
	CHECK(r.hits[PT_SIM_BELADY] >= r.hits[PT_SIM_LFU]);
	CHECK(r.hits[PT_SIM_BELADY] <= r.requests);
	CHECK(r.hits[PT_SIM_LRU] > 0);
	CHECK_EQ_INT(r.n_layers, 3);
	pt_cachesim_free(&r);
	pt_trace_free(&t);
}
