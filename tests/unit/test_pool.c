/* test_pool.c - the kernels' thread pool: every task runs exactly once per run, runs can be
 * repeated back to back, worker indices stay in range, creation fails cleanly. */
#include "kern/pool.h"

#include <stdatomic.h>

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
			CHECK(k > 3); /* pool, thread array and two worker args */
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
