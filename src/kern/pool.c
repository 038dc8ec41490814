/* pool.c - the kernels' thread pool (see pool.h).
 *
 * A run publishes its parameters, then one 64-bit claim word per thread (run tag | end |
 * next index: that thread's share, a contiguous range of the tasks) and bumps a 32-bit
 * generation that sleeping workers wait on.  Every thread, the caller included, claims its
 * own share's tasks in ascending order, then takes what is left of the others' from their
 * ends, each with a compare-and-swap that succeeds only while the word still carries the tag
 * it saw, so a worker waking late can never take a task of a later run.  Shares keep each
 * thread's tasks adjacent: a product's rows stream through a core in one run instead of
 * alternating with the other threads' (the kernels' prefetch runs on into the next task's
 * rows; docs/PERFORMANCE.md round 18).  The caller waits for the count of finished tasks,
 * not for every worker to check in: a worker that is descheduled (more threads than free
 * cores) just misses the run and its share is taken by the others.  Waits spin with `pause`,
 * then yield, then sleep on a futex; wakes are skipped when nobody sleeps.
 */
#include "kern/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/status.h"

/* Waiting: SPIN_PAUSE iterations of `pause` (tens of ns each), then SPIN_YIELD iterations of
 * sched_yield (lets a descheduled peer run when threads outnumber free cores), then a futex
 * sleep. */
#define SPIN_PAUSE 4000
#define SPIN_YIELD 100

/* Claim word: tag (20 bits) | end (22 bits) | next index (22 bits): the share's tasks not yet
 * claimed are [next, end). */
#define IDX_BITS 22
#define IDX_MASK ((1ull << IDX_BITS) - 1)
#define TAG_MASK ((1ull << 20) - 1)
#define BATCH_MAX ((uint32_t)IDX_MASK) /* tasks per published batch */

struct pt_pool {
	uint32_t n_threads;
	uint32_t n_started;          /* workers successfully created */
	pthread_t *threads;          /* [n_threads - 1] */
	_Atomic uint32_t generation; /* bumped once per batch; futex word for idle workers */
	struct share *shares;        /* [n_threads]: thread t's claim word */
	uint32_t count;              /* tasks of the current batch */
	_Atomic uint32_t done;       /* tasks of the current batch finished; futex word */
	_Atomic uint32_t sleepers;   /* threads inside a futex wait */
	_Atomic int stop;
	/* Batch parameters: written before the claim words are published, read only by a thread
	 * holding a claimed task of that batch (the caller cannot move on before it finishes). */
	pt_pool_fn fn;
	void *ctx;
	uint32_t base;
	uint64_t runs, wait_ns; /* diagnostics, written by the caller only */
};

/* A thread's claim word, alone in its cache lines (128 bytes apart whatever the alignment). */
struct share {
	_Atomic uint64_t claim;
	char pad[120];
};

struct worker_arg {
	pt_pool *pool;
	uint32_t index;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield"); /* the spin-wait hint, as pause */
#endif
}

/* Waits until *word != val (or stop is set).  The sleepers count is raised before the last
 * check (both seq_cst), so a waker that read sleepers == 0 changed the word before that
 * check could see it. */
static void wait_change(pt_pool *pool, _Atomic uint32_t *word, uint32_t val)
{
	for (int i = 0; i < SPIN_PAUSE + SPIN_YIELD; i++) {
		if (atomic_load_explicit(word, memory_order_acquire) != val ||
		    atomic_load_explicit(&pool->stop, memory_order_relaxed))
			return;
		if (i < SPIN_PAUSE)
			cpu_relax();
		else
			sched_yield();
	}
	atomic_fetch_add(&pool->sleepers, 1);
	while (atomic_load(word) == val && !atomic_load(&pool->stop))
		futex_wait(word, val);
	atomic_fetch_sub(&pool->sleepers, 1);
}

static void wake(pt_pool *pool, _Atomic uint32_t *word)
{
	if (atomic_load(&pool->sleepers) != 0)
		futex_wake(word);
}

/* Claims a task of the batch tagged tag from share sh: its next one (own share), or its last
 * (another thread's); false when the share has none left. */
static bool claim(struct share *sh, uint64_t tag, bool own, uint32_t *task)
{
	uint64_t v = atomic_load_explicit(&sh->claim, memory_order_acquire);
	for (;;) {
		const uint64_t next = v & IDX_MASK, end = (v >> IDX_BITS) & IDX_MASK;
		if ((v >> (2 * IDX_BITS)) != tag || next >= end)
			return false;
		const uint64_t nv = own ? v + 1 : v - (1ull << IDX_BITS);
		if (atomic_compare_exchange_weak_explicit(&sh->claim, &v, nv, memory_order_acq_rel,
							  memory_order_acquire)) {
			*task = (uint32_t)(own ? next : end - 1);
			return true;
		}
	}
}

/* Runs tasks of the batch tagged tag until none is left: this thread's share first, then
 * the others' from their ends. */
static void drain(pt_pool *pool, uint64_t tag, uint32_t worker)
{
	const uint32_t n = pool->n_threads;
	for (uint32_t k = 0; k < n; k++) {
		struct share *sh = &pool->shares[(worker + k) % n];
		uint32_t task;
		while (claim(sh, tag, k == 0, &task)) {
			/* count and the batch's parameters were written before the claim word */
			const uint32_t count = pool->count;
			pool->fn(pool->ctx, pool->base + task, worker);
			if (atomic_fetch_add(&pool->done, 1) + 1 == count)
				wake(pool, &pool->done);
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	pt_pool *pool = wa->pool;
	uint32_t index = wa->index, seen = 0;
	pt_free(wa);
	for (;;) {
		wait_change(pool, &pool->generation, seen);
		if (atomic_load_explicit(&pool->stop, memory_order_acquire))
			return NULL;
		seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
		drain(pool, seen & TAG_MASK, index);
	}
}

void pt_pool_destroy(pt_pool *pool)
{
	if (!pool)
		return;
	atomic_store(&pool->stop, 1);
	atomic_fetch_add(&pool->generation, 1);
	futex_wake(&pool->generation);
	for (uint32_t i = 0; i < pool->n_started; i++)
		pthread_join(pool->threads[i], NULL);
	pt_free(pool->threads);
	pt_free(pool->shares);
	pt_free(pool);
}

enum pt_status pt_pool_create(uint32_t n_threads, pt_pool **out, struct pt_error *err)
{
	*out = NULL;
	if (n_threads < 1 || n_threads > PT_POOL_MAX_THREADS)
		return pt_error_set(err, PT_E_INVALID, "thread count %u outside 1..%u", n_threads,
				    PT_POOL_MAX_THREADS);
	pt_pool *pool = pt_calloc(1, sizeof *pool);
	if (!pool)
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating thread pool");
	pool->n_threads = n_threads;
	pool->shares = pt_calloc(n_threads, sizeof *pool->shares);
	if (!pool->shares) {
		pt_pool_destroy(pool);
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating thread pool");
	}
	if (n_threads > 1) {
		pool->threads = pt_calloc(n_threads - 1, sizeof *pool->threads);
		if (!pool->threads) {
			pt_pool_destroy(pool);
			return pt_error_set(err, PT_E_NOMEM, "out of memory creating thread pool");
		}
	}
	for (uint32_t i = 1; i < n_threads; i++) {
		struct worker_arg *wa = pt_malloc(sizeof *wa);
		if (!wa) {
			pt_pool_destroy(pool);
			return pt_error_set(err, PT_E_NOMEM, "out of memory creating thread pool");
		}
		wa->pool = pool;
		wa->index = i;
		int rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, wa);
		if (rc != 0) {
			pt_free(wa);
			pt_pool_destroy(pool);
			return pt_error_sys(err, PT_E_NOMEM, rc, "cannot start worker thread %u", i);
		}
		pool->n_started++;
	}
	*out = pool;
	return PT_OK;
}

uint32_t pt_pool_threads(const pt_pool *pool)
{
	return pool ? pool->n_threads : 1;
}

static void run_batch(pt_pool *pool, uint32_t base, uint32_t count)
{
	pool->base = base;
	pool->count = count;
	atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
	uint32_t gen = atomic_load_explicit(&pool->generation, memory_order_relaxed) + 1;
	uint64_t tag = gen & TAG_MASK;
	/* release: fn, ctx, base, count and done = 0 are visible to whoever claims from these
	 * words; thread t's share is tasks [count t / n, count (t + 1) / n) */
	const uint64_t n = pool->n_threads;
	for (uint64_t t = 0; t < n; t++) {
		const uint64_t lo = count * t / n, hi = count * (t + 1) / n;
		atomic_store_explicit(&pool->shares[t].claim,
				      (tag << (2 * IDX_BITS)) | (hi << IDX_BITS) | lo,
				      memory_order_release);
	}
	atomic_store(&pool->generation, gen);
	wake(pool, &pool->generation);
	drain(pool, tag, 0);
	uint32_t d = atomic_load_explicit(&pool->done, memory_order_acquire);
	pool->runs++;
	if (d == count)
		return;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((d = atomic_load_explicit(&pool->done, memory_order_acquire)) != count)
		wait_change(pool, &pool->done, d);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pool->wait_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll +
				    (t1.tv_nsec - t0.tv_nsec));
}

uint64_t pt_pool_runs(const pt_pool *pool)
{
	return pool ? pool->runs : 0;
}

uint64_t pt_pool_wait_ns(const pt_pool *pool)
{
	return pool ? pool->wait_ns : 0;
}

void pt_pool_run(pt_pool *pool, pt_pool_fn fn, void *ctx, uint32_t n_tasks)
{
	if (!pool || pool->n_threads == 1 || n_tasks == 1) {
		for (uint32_t t = 0; t < n_tasks; t++)
			fn(ctx, t, 0);
		return;
	}
	pool->fn = fn;
	pool->ctx = ctx;
	for (uint32_t base = 0; base < n_tasks; base += BATCH_MAX) {
		uint32_t count = n_tasks - base < BATCH_MAX ? n_tasks - base : BATCH_MAX;
		run_batch(pool, base, count);
	}
}
