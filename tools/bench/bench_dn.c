/* bench_dn.c - the Gated DeltaNet delta rule alone: thread CPU time per token and value
 * head of the per-token step (pt_dn_step, what decode runs) against the chunked form
 * (pt_dn_chunk) at several chunk sizes, at every SIMD level the CPU has; the minimum of 7
 * trials (the machine may be shared).  Not part of the build:
 *
 *   make -j2 && cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tools/bench/bench_dn.c \
 *      build/libparticle.a -luring -lcrypto -lcjson -lpcre2-8 -lpthread -lm -o build/bench_dn
 *   build/bench_dn [D] [TOKENS] [REPS]      (head dims D x D, default 128 1024 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kern/kern.h"
#include "model/deltanet.h"

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct pt_error err = { 0 };
	const uint32_t d = argc > 1 ? (uint32_t)atoi(argv[1]) : 128;
	const uint32_t n = argc > 2 ? (uint32_t)atoi(argv[2]) : 1024;
	const int reps = argc > 3 ? atoi(argv[3]) : 1;
	if (pt_kern_init(&err) != PT_OK || d == 0 || d > 1024 || n == 0 || n > 65536 || reps < 1) {
		fprintf(stderr, "usage: bench_dn [D] [TOKENS] [REPS]\n");
		return 2;
	}
	const size_t nd = (size_t)n * d;
	float *q = malloc(nd * 4), *k = malloc(nd * 4), *v = malloc(nd * 4), *o = malloc(nd * 4);
	float *g = malloc(n * 4), *b = malloc(n * 4), *S = calloc((size_t)d * d, 4);
	if (!q || !k || !v || !o || !g || !b || !S)
		return 1;
	srand(1);
	for (size_t i = 0; i < nd; i++) {
		q[i] = (float)(rand() % 1000) * 1e-4f;
		k[i] = (float)(rand() % 1000) * 1e-4f;
		v[i] = (float)(rand() % 1000) * 1e-3f;
	}
	for (uint32_t t = 0; t < n; t++) {
		g[t] = -0.1f;
		b[t] = 0.5f;
	}
	static const uint32_t chunks[] = { 0, 16, 24, 32, 48, 64, 128 }; /* 0: per token */
	printf("delta rule, d_k = d_v = %u, %u tokens: us per token and value head (min of 7)\n",
	       d, n);
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_dn_ops *ops = pt_kern_dn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		printf("%-8s", pt_kern_level_name((enum pt_kern_level)lv));
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
			const struct pt_dn_geom G = { 1, 1, d, d, 4, 3 * d, true, 1e-6f, ops,
						      chunks[c] };
			float *scr = malloc(pt_dn_chunk_scratch_floats(&G) * 4);
			if (!scr)
				return 1;
			double best = 1e30;
			for (int tr = 0; tr < 7; tr++) {
				const double t0 = cpu_s();
				for (int r = 0; r < reps; r++) {
					if (chunks[c])
						pt_dn_chunk(&G, S, n, q, k, d, v, d, g, b, 1, o, d, scr);
					for (uint32_t t = 0; !chunks[c] && t < n; t++)
						pt_dn_step(&G, S, q + t * d, k + t * d, v + t * d, g[t],
							   b[t], o + t * d);
				}
				const double x = cpu_s() - t0;
				best = x < best ? x : best;
			}
			if (chunks[c])
				printf("  chunk %u: %.3f", chunks[c], best / reps / n * 1e6);
			else
				printf("  per token: %.3f", best / reps / n * 1e6);
			fflush(stdout);
			free(scr);
		}
		printf("\n");
	}
	return 0;
}
