/* bench_batch.c - aggregate decode throughput of N sequences decoded together
 * (pt_engine_decode_batch) against the same engine options: a quick measurement for the
 * server's --parallel, not part of `make test`.
 *
 *   build/bench_batch MODEL.gguf [--memory BYTES] [--seqs N] [--tokens T] [--threads N]
 *                     [--prompt P] [--io MODE]
 *
 * Each sequence gets its own P-token prompt, then T greedy decode steps run with all N
 * sequences in every pass.  Prints decode tok/s summed over the sequences, expert fetches
 * and bytes read per generated token. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/engine.h"
#include "util/alloc.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t argmax(const float *l, uint32_t n)
{
	uint32_t b = 0;
	for (uint32_t i = 1; i < n; i++)
		if (l[i] > l[b])
			b = i;
	return b;
}

int main(int argc, char **argv)
{
	struct pt_engine_opts o = { .n_ctx = 1024, .no_lock = true, .log = stderr };
	uint32_t n = 4, steps = 64, prompt = 32;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
		if (!strcmp(a, "--memory")) o.memory_budget = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--seqs")) n = (uint32_t)atoi(v);
		else if (!strcmp(a, "--tokens")) steps = (uint32_t)atoi(v);
		else if (!strcmp(a, "--threads")) o.threads = (uint32_t)atoi(v);
		else if (!strcmp(a, "--prompt")) prompt = (uint32_t)atoi(v);
		else if (!strcmp(a, "--io")) o.io_mode = v;
		else {
			fprintf(stderr, "bench_batch: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	if (argc < 2 || n == 0 || n > 64 || prompt == 0 || prompt + steps > o.n_ctx) {
		fprintf(stderr, "usage: bench_batch MODEL [--memory B] [--seqs N<=64] [--tokens T] "
				"[--threads N] [--prompt P] [--io MODE]\n");
		return 2;
	}
	o.model_path = argv[1];
	o.n_seq = n;
	pt_engine *e = NULL;
	struct pt_error err = { 0 };
	if (pt_engine_open(&o, &e, &err) != PT_OK) {
		fprintf(stderr, "bench_batch: %s\n", err.msg);
		return 1;
	}
	const uint32_t nv = pt_engine_n_vocab(e);
	float *l = pt_mallocn((size_t)n * nv, sizeof(float));
	uint32_t *toks = pt_mallocn(prompt, sizeof(uint32_t)), seqs[64], next[64];
	enum pt_status st = l && toks ? PT_OK : PT_E_NOMEM;
	for (uint32_t s = 0; st == PT_OK && s < n; s++) {
		for (uint32_t i = 0; i < prompt; i++)
			toks[i] = (i * 131 + s * 977 + 17) % (nv - 300) + 256;
		st = pt_engine_seq_eval(e, s, toks, prompt, l, false, &err);
		seqs[s] = s;
		next[s] = argmax(l, nv);
	}
	struct pt_engine_stats a, b;
	pt_engine_stats(e, &a);
	const double t0 = now_s();
	for (uint32_t t = 0; st == PT_OK && t < steps; t++) {
		st = pt_engine_decode_batch(e, seqs, next, n, l, &err);
		for (uint32_t s = 0; st == PT_OK && s < n; s++)
			next[s] = argmax(l + (size_t)s * nv, nv);
	}
	const double dt = now_s() - t0;
	pt_engine_stats(e, &b);
	if (st != PT_OK) {
		fprintf(stderr, "bench_batch: %s\n", err.msg);
		return 1;
	}
	const double gen = (double)n * steps;
	printf("seqs %u: %.2f tok/s aggregate (%.2f per sequence), %.1f expert fetches and "
	       "%.2f MiB read per token, hit rate %.1f%%\n", n, gen / dt, steps / dt,
	       (double)(b.expert_gets - a.expert_gets) / gen,
	       (double)(b.bytes_read - a.bytes_read) / gen / (1 << 20),
	       100.0 * (double)(b.hits - a.hits) /
		       (double)(b.hits - a.hits + b.misses - a.misses + 1e-9));
	pt_free(l);
	pt_free(toks);
	pt_engine_close(e);
	return 0;
}
