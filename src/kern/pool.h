/* pool.h - a small fixed-size thread pool for parallel-for over independent tasks.
 *
 * The caller thread takes part in every run, so a pool of N threads starts N - 1 workers.
 * Workers spin briefly after a run (decode dispatches hundreds of runs per token), then
 * yield, then sleep on a futex.  Each thread claims the tasks of its own share (thread t of
 * n: tasks [count t / n, count (t + 1) / n)) one index at a time in ascending order, then
 * takes what is left of the other shares from their ends: a thread's tasks are adjacent
 * (tasks are rows of a product: the kernels stream them), but which thread runs a task still
 * varies between runs (a busy or descheduled worker simply takes none), so task functions
 * must make each task's output independent of the thread that computes it (the kernels do:
 * every output element belongs to exactly one task).
 */
#ifndef PT_KERN_POOL_H
#define PT_KERN_POOL_H

#include <stdint.h>

#include "particle.h"

typedef struct pt_pool pt_pool;

/* One task: task is in 0 .. n_tasks-1; worker is the index (0 .. threads-1) of the thread
 * running it, usable to pick per-thread scratch. */
typedef void (*pt_pool_fn)(void *ctx, uint32_t task, uint32_t worker);

#define PT_POOL_MAX_THREADS 256

/* Creates a pool of n_threads threads (1 .. PT_POOL_MAX_THREADS, caller included).  On
 * failure *out is NULL and no thread is left running. */
enum pt_status pt_pool_create(uint32_t n_threads, pt_pool **out, struct pt_error *err);
/* Stops and joins the workers and frees the pool; NULL is accepted. */
void pt_pool_destroy(pt_pool *pool);
/* Threads of the pool, caller included (1 for NULL). */
uint32_t pt_pool_threads(const pt_pool *pool);
/* Runs fn(ctx, t, worker) for every t in 0 .. n_tasks-1 and returns when all have finished.
 * pool may be NULL (runs inline).  Not reentrant: one run at a time per pool, and a task
 * must not call pt_pool_run on the same pool. */
void pt_pool_run(pt_pool *pool, pt_pool_fn fn, void *ctx, uint32_t n_tasks);
/* Diagnostics (bench's decode split): runs dispatched to the workers so far, and the caller's
 * wall time spent waiting for other threads' tasks after it ran out of tasks to claim (the
 * barrier's cost: a late or descheduled worker, or uneven tasks), in ns.  0 for NULL. */
uint64_t pt_pool_runs(const pt_pool *pool);
uint64_t pt_pool_wait_ns(const pt_pool *pool);

#endif
