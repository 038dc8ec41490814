/* test_pool.c - the kernels' thread pool: every task runs exactly once per run, runs can be
 * repeated back to back, worker indices stay in range, each thread takes its own share of
 * the tasks in order before the others' from their ends, creation fails cleanly. */
#include "kern/pool.h"

#include <stdatomic.h>
#include <time.h>

#include "test.h"
#include "util/alloc.h"
#include "util/status.h"

struct count_ctx {
	_Atomic uint32_t hits[1000];
	_Atomic uint32_t bad_worker;
	uint32_t threads;
};

static void count_task(void *ctx, uint32_t task, uint32_t worker)
{
	struct count_ctx *c = ctx;
	atomic_fetch_add(&c->hits[task], 1);
	if (worker >= c->threads)
		atomic_fetch_add(&c->bad_worker, 1);
}

PT_TEST(test_pool_runs_every_task_once)
{
	static struct count_ctx c;
	for (uint32_t n = 1; n <= 4; n++) {
		pt_pool *pool = NULL;
		REQUIRE(pt_pool_create(n, &pool, NULL) == PT_OK);
		CHECK_EQ_INT(pt_pool_threads(pool), n);
		c.threads = n;
		for (int run = 0; run < 300; run++) {
			uint32_t tasks = (uint32_t)(run * 7 % 1000);
			for (uint32_t i = 0; i < 1000; i++)
				atomic_store(&c.hits[i], 0);
			pt_pool_run(pool, count_task, &c, tasks);
			for (uint32_t i = 0; i < 1000; i++)
				if (atomic_load(&c.hits[i]) != (i < tasks ? 1u : 0u))
					pt_test_fail(__FILE__, __LINE__, "threads %u run %d task %u: %u hits",
						     n, run, i, atomic_load(&c.hits[i]));
		}
		CHECK_EQ_INT(atomic_load(&c.bad_worker), 0);
		pt_pool_destroy(pool);
	}
	c.threads = 1;
	for (uint32_t i = 0; i < 1000; i++)
		atomic_store(&c.hits[i], 0);
	pt_pool_run(NULL, count_task, &c, 3); /* NULL pool runs inline */
	CHECK_EQ_INT(atomic_load(&c.hits[2]), 1);
	pt_pool_destroy(NULL);
	CHECK_EQ_INT(pt_pool_threads(NULL), 1);
}

struct order_ctx {
	_Atomic uint32_t seq;
	uint32_t worker[256], order[256]; /* per task: who ran it, and when */
};

static void order_task(void *ctx, uint32_t task, uint32_t worker)
{
	struct order_ctx *c = ctx;
	struct timespec t0, t1;
	c->worker[task] = worker;
	c->order[task] = atomic_fetch_add(&c->seq, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do /* ~20 us: long enough for the workers to wake within the run */
		clock_gettime(CLOCK_MONOTONIC, &t1);
	while ((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec) < 20000);
}

/* Thread t's share is tasks [count t / n, count (t + 1) / n) (pool.c): it runs a prefix of
 * its share in ascending order, and whatever of the share others took is the rest of it
 * (stolen from the end), so each thread's rows stay adjacent.  Holds whatever the
 * scheduling; the workers are checked to have run some of their own shares at all. */
PT_TEST(test_pool_threads_take_their_shares_in_order)
{
	static struct order_ctx c;
	for (uint32_t n = 2; n <= 4; n++) {
		pt_pool *pool = NULL;
		REQUIRE(pt_pool_create(n, &pool, NULL) == PT_OK);
		/* rounds until every worker has run some of its share (a busy host may keep a
		 * worker off a core for a while; it fails only if one never runs in 50 rounds) */
		uint32_t own_runs[4] = { 0 }, rounds = 0, idle = n;
		for (; idle && rounds < 50; rounds++) {
			for (uint32_t count = 5; count <= 101; count += 12) {
				atomic_store(&c.seq, 0);
				for (uint32_t i = 0; i < count; i++)
					c.worker[i] = UINT32_MAX;
				pt_pool_run(pool, order_task, &c, count);
				for (uint32_t t = 0; t < n; t++) {
					const uint32_t lo = count * t / n, hi = count * (t + 1) / n;
					uint32_t k = lo;
					while (k < hi && c.worker[k] == t)
						k++;
					own_runs[t] += k > lo;
					int bad = 0;
					for (uint32_t i = lo; i < hi; i++) {
						bad += c.worker[i] >= n;
						bad += i >= k && c.worker[i] == t; /* not a prefix */
						bad += i > lo && i < k && c.order[i] < c.order[i - 1];
					}
					if (bad)
						pt_test_fail(__FILE__, __LINE__,
							     "threads %u tasks %u: share %u out of order", n,
							     count, t);
				}
			}
			idle = 0;
			for (uint32_t t = 0; t < n; t++)
				idle += own_runs[t] == 0;
		}
		if (idle)
			pt_test_fail(__FILE__, __LINE__, "threads %u: %u never ran their share in %u rounds",
				     n, idle, rounds);
		pt_pool_destroy(pool);
	}
}

static void noop_task(void *ctx, uint32_t task, uint32_t worker)
{
	(void)ctx;
	(void)task;
	(void)worker;
}

/* The bench's barrier figures: runs count dispatches to the workers only (a 1-thread pool,
 * a NULL pool and one-task runs go inline), the caller's wait never goes backwards. */
PT_TEST(test_pool_counts_runs_and_waits)
{
	pt_pool *pool = NULL;
	REQUIRE(pt_pool_create(2, &pool, NULL) == PT_OK);
	CHECK(pt_pool_runs(pool) == 0 && pt_pool_wait_ns(pool) == 0);
	uint64_t w = 0;
	for (int i = 0; i < 50; i++) {
		pt_pool_run(pool, noop_task, NULL, 8);
		CHECK(pt_pool_wait_ns(pool) >= w);
		w = pt_pool_wait_ns(pool);
	}
	pt_pool_run(pool, noop_task, NULL, 1);
	CHECK(pt_pool_runs(pool) == 50);
	pt_pool_destroy(pool);
	REQUIRE(pt_pool_create(1, &pool, NULL) == PT_OK);
	pt_pool_run(pool, noop_task, NULL, 8);
	CHECK(pt_pool_runs(pool) == 0 && pt_pool_wait_ns(pool) == 0);
	pt_pool_destroy(pool);
	CHECK(pt_pool_runs(NULL) == 0 && pt_pool_wait_ns(NULL) == 0);
}

PT_TEST(test_pool_create_fails_cleanly)
{
	struct pt_error err = { 0 };
	pt_pool *pool = (pt_pool *)&err;
	CHECK_EQ_INT(pt_pool_create(0, &pool, &err), PT_E_INVALID);
	CHECK(pool == NULL);
	CHECK_CONTAINS(err.msg, "thread count 0");
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_pool_create(PT_POOL_MAX_THREADS + 1, &pool, &err), PT_E_INVALID);
	/* allocation-failure sweep: fail the k-th allocation until creation succeeds */
	for (uint64_t k = 1;; k++) {
		pt_error_clear(&err);
		pt_alloc_fail_at(k);
		enum pt_status st = pt_pool_create(3, &pool, &err);
		pt_alloc_fail_at(0);
		if (st == PT_OK) {
			CHECK(k > 4); /* pool, shares, thread array and two worker args */
			pt_pool_destroy(pool);
			break;
		}
		CHECK_EQ_INT(st, PT_E_NOMEM);
		CHECK(pool == NULL);
		CHECK_CONTAINS(err.msg, "out of memory");
		REQUIRE(k < 20);
	}
}

struct sum_ctx {
	_Atomic uint64_t count;
	_Atomic uint64_t sum;
};

static void sum_task(void *ctx, uint32_t task, uint32_t worker)
{
	struct sum_ctx *c = ctx;
	(void)worker;
	atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->sum, task, memory_order_relaxed);
}

/* More tasks than one published batch holds (2^22 - 1): split into batches, indices continue
 * across them, each task exactly once. */
PT_TEST(test_pool_runs_more_tasks_than_a_batch)
{
	pt_pool *pool = NULL;
	REQUIRE(pt_pool_create(2, &pool, NULL) == PT_OK);
	static struct sum_ctx c;
	const uint64_t n = (1u << 22) + 5;
	pt_pool_run(pool, sum_task, &c, (uint32_t)n);
	CHECK(atomic_load(&c.count) == n);
	CHECK(atomic_load(&c.sum) == n * (n - 1) / 2);
	pt_pool_destroy(pool);
}
