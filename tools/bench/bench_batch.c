/* bench_batch.c - aggregate decode throughput of N sequences decoded together
 * (pt_engine_decode_batch) against the same engine options: a quick measurement for the
 * server's --parallel, not part of `make test`.
 *
 *   build/bench_batch MODEL.gguf [--memory BYTES] [--seqs N] [--tokens T] [--threads N]
 *                     [--prompt P] [--io MODE]
 *
 * Each sequence gets its own P-token prompt, then T greedy decode steps, each run twice:
 * the N tokens as one batch (pt_engine_decode_batch), then - after rewinding every
 * sequence by one - the same N tokens one sequence at a time (what N independent streams
 * cost).  Prints aggregate tok/s of each (wall and per CPU second), expert fetches and bytes
 * read per generated token, and the ratios. */
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

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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
	if (o.io_mode && !strcmp(o.io_mode, "auto"))
		o.io_mode = NULL;
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
	/* A/B in one process, step by step (a busy machine disturbs both alike): the n tokens
	 * as one batch, then the same n tokens one sequence at a time after rewinding each
	 * sequence by one (its logits are the same bytes). */
	struct pt_engine_stats a, b;
	double tb = 0, cb = 0, ts = 0, cs = 0;
	uint64_t gets_b = 0, gets_s = 0, read_b = 0, read_s = 0;
	for (uint32_t t = 0; st == PT_OK && t < steps; t++) {
		pt_engine_stats(e, &a);
		double t0 = now_s(), c0 = cpu_s();
		st = pt_engine_decode_batch(e, seqs, next, n, l, &err);
		tb += now_s() - t0;
		cb += cpu_s() - c0;
		pt_engine_stats(e, &b);
		gets_b += b.expert_gets - a.expert_gets;
		read_b += b.bytes_read - a.bytes_read;
		for (uint32_t s = 0; st == PT_OK && s < n; s++)
			st = pt_engine_seq_rewind(e, s, pt_engine_seq_pos(e, s) - 1, &err);
		t0 = now_s();
		c0 = cpu_s();
		for (uint32_t s = 0; st == PT_OK && s < n; s++)
			st = pt_engine_seq_eval(e, s, &next[s], 1, l + (size_t)s * nv, false, &err);
		ts += now_s() - t0;
		cs += cpu_s() - c0;
		pt_engine_stats(e, &a);
		gets_s += a.expert_gets - b.expert_gets;
		read_s += a.bytes_read - b.bytes_read;
		for (uint32_t s = 0; st == PT_OK && s < n; s++)
			next[s] = argmax(l + (size_t)s * nv, nv);
	}
	if (st != PT_OK) {
		fprintf(stderr, "bench_batch: %s\n", err.msg);
		return 1;
	}
	const double gen = (double)n * steps;
	printf("%u sequences, %u steps: batched %.2f tok/s (%.2f per CPU s), %.1f fetches and "
	       "%.2f MiB read per token; one at a time %.2f tok/s (%.2f per CPU s), %.1f fetches "
	       "and %.2f MiB read per token; batched/one-at-a-time %.2fx wall, %.2fx CPU\n", n,
	       steps, gen / tb, gen / cb, gets_b / gen, read_b / gen / (1 << 20), gen / ts, gen / cs,
	       gets_s / gen, read_s / gen / (1 << 20), ts / tb, cs / cb);
	pt_engine_stats(e, &b);
	printf("read-ahead: %llu reads started on a guess, %llu used, %llu wasted\n",
	       (unsigned long long)b.ahead_reads, (unsigned long long)b.ahead_used,
	       (unsigned long long)b.ahead_wasted);
	pt_free(l);
	pt_free(toks);
	pt_engine_close(e);
	return 0;
}
