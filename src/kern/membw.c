/* membw.c - memory read-bandwidth probe (membw.h).  Each thread sums the 64-bit words of its
 * contiguous share with the widest loads the CPU has (membw_avx512.c / membw_avx2.c on
 * x86-64, 16-byte vectors elsewhere), several independent accumulators, so a pass is bound by
 * the memory alone; every thread starts a pass at a barrier and the pass lasts until the
 * slowest finishes.  (Until session 9 the loop summed 64-byte GCC vectors, which the baseline
 * x86-64 build lowered to SSE2 with a stack round trip per 16 bytes: it read 17-19 GB/s a
 * thread where the memory gives 27-33, so the "limit" it reported was ~half the real one;
 * docs/PERFORMANCE.md, issue 21 round 6.) */
#include "kern/membw.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern/kern_internal.h"
#include "util/alloc.h"

typedef uint64_t lane8 __attribute__((vector_size(64)));
typedef uint64_t lane2 __attribute__((vector_size(16)));
typedef uint64_t (*reader_fn)(const void *buf, size_t bytes);

/* Threads wait at this gate until every one was created (go) or one could not be (abort):
 * the barriers count every thread, so none may reach them unless all exist. */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 wait, 1 go, -1 abort */
};

struct worker {
	struct gate *g;
	const lane8 *p;
	size_t n; /* 64-byte lines */
	uint64_t sum;
	pthread_barrier_t *start, *end;
	uint32_t passes;
	reader_fn read;
};

/* The portable loop: four 16-byte accumulators per 64-byte line (native on SSE2 and NEON). */
uint64_t pt_membw_sum_generic(const void *buf, size_t bytes)
{
	const lane2 *q = buf;
	lane2 a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	for (size_t i = 0; i + 4 <= bytes / 16; i += 4) {
		a += q[i];
		b += q[i + 1];
		c += q[i + 2];
		d += q[i + 3];
	}
	a += b + c + d;
	return a[0] + a[1];
}

static reader_fn pick_reader(void)
{
#if defined(PT_KERN_X86)
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512)
		return pt_membw_sum_avx512;
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2)
		return pt_membw_sum_avx2;
#endif
	return pt_membw_sum_generic;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&w->g->mu);
	while (w->g->state == 0)
		pthread_cond_wait(&w->g->cv, &w->g->mu);
	const int state = w->g->state;
	pthread_mutex_unlock(&w->g->mu);
	if (state < 0)
		return NULL;
	for (uint32_t k = 0; k <= w->passes; k++) { /* pass 0: warm-up */
		pthread_barrier_wait(w->start);
		w->sum += w->read(w->p, w->n * sizeof(lane8));
		pthread_barrier_wait(w->end);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

enum pt_status pt_membw_probe(uint64_t bytes, uint32_t threads, uint32_t passes,
			      struct pt_membw_result *out, struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	if (threads < 1 || threads > 64 || passes < 1 || passes > 64)
		return pt_error_set(err, PT_E_INVALID, "membw: threads 1..64 and passes 1..64");
	bytes &= ~(uint64_t)4095;
	if (bytes < (1u << 20))
		bytes = 1u << 20;
	/* 64-byte aligned by hand: the allocator has no aligned variant */
	void *raw = pt_malloc(bytes + 64);
	lane8 *buf = raw ? (lane8 *)(((uintptr_t)raw + 63) & ~(uintptr_t)63) : NULL;
	if (!buf)
		return pt_error_set(err, PT_E_NOMEM, "membw: cannot allocate %llu bytes",
				    (unsigned long long)bytes);
	/* distinct non-zero contents: zero pages could be one shared page */
	uint64_t *q = (uint64_t *)buf;
	for (size_t i = 0; i < bytes / 8; i++)
		q[i] = i * 0x9E3779B97F4A7C15ull;
	const size_t lanes = bytes / sizeof(lane8), per = lanes / threads;
	const reader_fn reader = pick_reader();
	struct worker w[64];
	pthread_t th[64];
	pthread_barrier_t start, end;
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	pthread_barrier_init(&start, NULL, threads + 1);
	pthread_barrier_init(&end, NULL, threads + 1);
	uint32_t started = 0;
	enum pt_status st = PT_OK;
	for (uint32_t t = 0; t < threads; t++) {
		w[t] = (struct worker){ .p = buf + per * t,
					.n = t + 1 == threads ? lanes - per * t : per,
					.start = &start, .end = &end, .passes = passes,
					.read = reader,
					.g = &g };
		if (pthread_create(&th[t], NULL, work, &w[t]) != 0) {
			st = pt_error_set(err, PT_E_IO, "membw: cannot start a thread");
			break;
		}
		started++;
	}
	pthread_mutex_lock(&g.mu);
	g.state = st == PT_OK ? 1 : -1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	double secs[65];
	if (st == PT_OK) {
		for (uint32_t k = 0; k <= passes; k++) {
			const double t0 = now_s();
			pthread_barrier_wait(&start);
			pthread_barrier_wait(&end);
			secs[k] = now_s() - t0;
		}
		for (uint32_t t = 0; t < threads; t++) {
			pthread_join(th[t], NULL);
			out->checksum += w[t].sum;
		}
		qsort(secs + 1, passes, sizeof(double), cmp_d);
		out->best_bps = (double)bytes / secs[1];
		out->median_bps = (double)bytes / secs[1 + passes / 2];
		out->passes = passes;
		out->bytes = bytes;
	} else {
		for (uint32_t t = 0; t < started; t++)
			pthread_join(th[t], NULL);
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&end);
	pt_free(raw);
	return st;
}
