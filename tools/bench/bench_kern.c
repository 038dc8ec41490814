/* bench_kern.c - throughput of the matvec kernels and dispatch latency of the thread pool.
 * Not a test: prints figures for docs/PERFORMANCE.md.  `make bench-kern` builds build/bench_kern.
 *
 *   build/bench_kern [seconds_per_case [prefill|cold|dot|decode|sets|token|moe|dense|attn|attn-decode|il|layouts|layouts-few|dense16|iotax FILE]]   (default 0.5;
 *   "prefill": table 5 only; "cold": the in-situ expert products only; "dot": the
 *   L1-resident dot and dot4 table only; "decode": the Sarvam-30B decode products from DRAM,
 *   and Qwen3-30B-A3B decode products from DRAM, best level only; "sets": one Sarvam and one
 *   Qwen3 decode layer's experts as decode dispatches them; "token": one Qwen3 decode
 *   token's whole weight stream (48 layers' products and the head) as decode dispatches it,
 *   without the non-product work; "moe": the Qwen3 / Sarvam
 *   full-shape expert products at 16-64 tokens, cold, best level; "dense": Gemma 4's dense
 *   products at 128-2048 tokens and Sarvam-30B's at 512, best level; "attn": one Qwen3-30B-A3B
 *   layer's prefill attention at 1k / 4k context, one thread; "attn-decode": a Qwen3 decode
 *   token's attention core at 512 / 4,096 positions, cold and hot, one and two threads;
 *   "il" / "il6": the X16 layout,
 *   16 Q4_K / Q6_K rows interleaved, against the per-row dot on Qwen3's routed gates, one
 *   thread; "il8" / "il5": the same for Q8_0 / Q5_0 on Gemma 4's routed downs, 2816 x 704;
 *   "layouts": the Qwen3 / Sarvam expert products (and Gemma 4's Q5_0 / Q8_0 downs) at 1-256
 *   tokens, cold, one thread, as
 *   stored, interleaved (X16) and as stored with the interleaved numerics (X16_ROWS);
 *   "layouts-few": the same at 1-8 tokens;
 *   "iotax FILE": what reading FILE with O_DIRECT costs the compute threads, see bench_iotax)
 *
 * Weight GB/s = bytes of weight rows streamed per second.  Shapes: a 4096 x 4096 matrix
 * (one dense projection, L2/L3-resident after the first pass) and a slab of 128 experts of
 * 768 x 2048 (Qwen3-30B-A3B ffn_up_exps-like, far larger than the caches), walked expert by
 * expert so every pass streams from DRAM. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include <liburing.h>

#include "gen/kv.h"
#include "gguf/gguf.h"
#include "kern/kern.h"
#include "kern/kern_internal.h" /* pt_kern_x16_prefetch_start: il measures decode's stream start */
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/alloc.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread: the one-thread prefill table is timed by it, so other
 * processes on a busy host do not count (wall time swung by 2-3x there). */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (every pool thread) */
static double proc_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)rng;
}

/* Random bytes with small finite fp16 scales in the usual fields of Q4_K and Q6_K blocks. */
static void fill(enum pt_type t, uint8_t *p, size_t bytes)
{
	const struct pt_type_traits *tr = pt_type_traits(t);
	for (size_t i = 0; i < bytes; i++)
		p[i] = rnd8();
	for (size_t b = 0; b + tr->block_bytes <= bytes; b += tr->block_bytes) {
		uint16_t h = pt_f32_to_fp16(0.001f);
		if (t == PT_TYPE_Q4_K) {
			memcpy(p + b, &h, 2);
			memcpy(p + b + 2, &h, 2);
		} else if (t == PT_TYPE_Q6_K) {
			memcpy(p + b + 208, &h, 2);
		} else if (t == PT_TYPE_Q8_0 || t == PT_TYPE_Q5_0) {
			memcpy(p + b, &h, 2);
		}
	}
}

static int max_level_only; /* "decode" mode: the best level alone */

static void bench_case(enum pt_type t, uint64_t rows, uint64_t cols, uint64_t experts,
		       double secs)
{
	uint64_t rb;
	pt_type_row_bytes(t, cols, &rb);
	size_t expert_bytes = (size_t)(rb * rows), total = expert_bytes * experts;
	uint8_t *w = pt_malloc(total);
	float *x = pt_mallocn(cols, sizeof(float)), *y = pt_mallocn(rows, sizeof(float));
	if (!w || !x || !y) {
		fprintf(stderr, "bench: out of memory\n");
		exit(1);
	}
	fill(t, w, total);
	for (uint64_t i = 0; i < cols; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	struct pt_kern_mat m = { t, rows, cols, (size_t)rb, w, PT_KERN_LAYOUT_ROWS };
	void *xq = pt_malloc(pt_kern_act_bytes(&m, 1));
	pt_kern_quantize_row(pt_kern_ops(t)->act_type, x, xq, cols);
	printf("%-5s %5llux%-5llu x%-3llu", pt_type_name(t), (unsigned long long)rows,
	       (unsigned long long)cols, (unsigned long long)experts);
	for (int lv = max_level_only ? (int)pt_kern_level_max() : 0;
	     lv <= (int)pt_kern_level_max(); lv++) {
		pt_kern_set_level((enum pt_kern_level)lv, NULL);
		for (uint32_t th = 1; th <= 2; th++) {
			pt_pool *pool = NULL;
			pt_pool_create(th, &pool, NULL);
			const int nvar = 1;
			double best[1] = { 0 }, best_cpu[1] = { 0 };
			uint64_t e = 0;
			for (int win = 0; win < 3; win++) /* best of 3: the host is shared */
				for (int v = 0; v < nvar; v++) {
					double t0 = now(), c0 = proc_cpu_now(), t1;
					uint64_t bytes = 0;
					do {
						m.data = w + (e++ % experts) * expert_bytes;
						pt_kern_matvec_q(&m, xq, y, pool, NULL);
						bytes += expert_bytes;
						t1 = now();
					} while (t1 - t0 < secs / 3 / nvar);
					double r = (double)bytes / (t1 - t0) / 1e9;
					double rc = (double)bytes / (proc_cpu_now() - c0) / 1e9;
					best[v] = r > best[v] ? r : best[v];
					best_cpu[v] = rc > best_cpu[v] ? rc : best_cpu[v];
				}
			if (max_level_only) /* wall, and per CPU second of all threads (spinning
					       waits included): the host is shared */
				printf("  %ut %6.2f (%5.2f/cpu-s)", th, best[0], best_cpu[0]);
			else
				printf("  %s/%ut %6.2f", pt_kern_level_name(lv), th, best[0]);
			fflush(stdout);
			pt_pool_destroy(pool);
		}
	}
	printf("   GB/s\n");
	pt_free(w);
	pt_free(x);
	pt_free(y);
	pt_free(xq);
}


static int cmp_double(const void *a, const void *b);

/* Issue 21 rounds 9-10 (`il` mode): the interleaved-rows layout (kern.h, PT_KERN_LAYOUT_X16)
 * against the per-row dot on Qwen3's routed gate matrices (768 x 2048 Q4_K, or Q6_K with
 * `il6`, 128 experts, one
 * random expert after another), one thread (run two processes at once for two cores): the
 * decode dot row by row (prefetch 4 rows ahead, as decode does), the X16 kernel of the best
 * level and of the AVX2 level, and the best level with each expert's first
 * lines requested before it runs (pt_kern_x16_prefetch_start, as decode does at the start of
 * a task), alternating in 9 windows; the L1 cost of each; X16 against the dot's values. */
static void bench_il(double secs, enum pt_type type)
{
	/* Q8_0 / Q5_0: Gemma 4's routed downs, 2816 x 704 */
	const bool blk = type == PT_TYPE_Q8_0 || type == PT_TYPE_Q5_0;
	const uint64_t rows = blk ? 2816 : 768, cols = blk ? 704 : 2048, ne = 128;
	uint64_t rb;
	pt_type_row_bytes(type, cols, &rb);
	const size_t eb = (size_t)(rb * rows), band = pt_kern_x16_band(type, cols);
	const size_t eb16 = rows / 16 * band;
	uint8_t *w = pt_malloc(eb * ne), *w16 = pt_malloc(eb16 * ne);
	float *x = pt_mallocn(cols, sizeof(float)), y[2816], y2[2816];
	if (!w || !w16 || !x) {
		fprintf(stderr, "bench: out of memory\n");
		exit(1);
	}
	fill(type, w, eb * ne);
	pt_kern_x16_pack(type, w, (size_t)rb, cols, 0, rows / 16 * ne, w16);
	for (uint64_t i = 0; i < cols; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	struct pt_kern_mat m = { type, rows, cols, (size_t)rb, w, PT_KERN_LAYOUT_ROWS };
	void *xq = pt_malloc(pt_kern_act_bytes(&m, 1));
	pt_kern_quantize_row(pt_kern_ops(type)->act_type, x, xq, cols);
	const enum pt_kern_level top = pt_kern_level_max();
	const struct pt_kern_ops *best = pt_kern_ops_at(top, type);
	const struct pt_kern_ops *lo = pt_kern_ops_at(top > 0 ? (enum pt_kern_level)1 : top, type);
	const pt_kern_dot_fn dot = best->dot;
	double maxrel = 0;
	for (uint64_t r = 0; r < rows; r++)
		y[r] = dot(cols, w + r * rb, xq);
	for (uint64_t k = 0; k < rows / 16; k++)
		best->x16(cols, w16 + k * band, xq, 0, 1, y2 + 16 * k, 0);
	for (uint64_t r = 0; r < rows; r++) {
		const double e = fabs((double)y2[r] - y[r]) / (fabs((double)y[r]) + 1e-3);
		maxrel = e > maxrel ? e : maxrel;
	}
	printf("il: %s X16 (%s) against the dot: max relative difference %.2e\n",
	       pt_type_name(type), pt_kern_level_name(best->x16_level), maxrel);
	for (int rep = 0; rep < 3; rep++) {
		const int iters = 20000;
		double t[3];
		t[0] = now();
		for (int it = 0; it < iters; it++)
			for (uint64_t r = 0; r < 16; r++)
				y[r] = dot(cols, w + r * rb, xq);
		t[1] = now();
		for (int it = 0; it < iters; it++)
			best->x16(cols, w16, xq, 0, 1, y2, 0);
		t[2] = now();
		for (int it = 0; it < iters; it++)
			lo->x16(cols, w16, xq, 0, 1, y2, 0);
		const double t3 = now();
		printf("il: L1, ns per 256 weights and row: dot %.2f, X16 %s %.2f, X16 %s %.2f\n",
		       (t[1] - t[0]) * 1e9 / iters / 16 / ((double)cols / 256), pt_kern_level_name(best->x16_level),
		       (t[2] - t[1]) * 1e9 / iters / 16 / ((double)cols / 256), pt_kern_level_name(lo->x16_level),
		       (t3 - t[2]) * 1e9 / iters / 16 / ((double)cols / 256));
	}
	enum { NWIN = 9, NVAR = 4 };
	double res[NVAR][NWIN];
	for (int win = 0; win < NWIN; win++)
		for (int v = 0; v < NVAR; v++) {
			const double t0 = now();
			double t1;
			uint64_t bytes = 0;
			do {
				const uint64_t e = rnd8() % ne;
				if (v == 0) {
					const uint8_t *d = w + e * eb;
					for (uint64_t r = 0; r < rows; r++) {
						if (r + 4 < rows)
							for (size_t o = 0; o < rb; o += 64)
								__builtin_prefetch(d + (r + 4) * rb + o, 0, 0);
						y[r] = dot(cols, d + r * rb, xq);
					}
				} else {
					const struct pt_kern_ops *o = v == 2 ? lo : best;
					const uint8_t *d = w16 + e * eb16;
					if (v == 3) /* as decode runs it (matvec_set.c) */
						pt_kern_x16_prefetch_start(d, pt_kern_x16_ahead(type));
					for (uint64_t k = 0; k < rows / 16; k++) {
						o->x16(cols, d + k * band, xq, 0, 1, y + 16 * k, 0);
					}
				}
				bytes += eb;
				t1 = now();
			} while (t1 - t0 < secs);
			res[v][win] = (double)bytes / (t1 - t0) / 1e9;
		}
	char names[NVAR][40];
	snprintf(names[0], sizeof names[0], "row by row (dot)");
	snprintf(names[1], sizeof names[1], "X16 %s", pt_kern_level_name(best->x16_level));
	snprintf(names[2], sizeof names[2], "X16 %s", pt_kern_level_name(lo->x16_level));
	snprintf(names[3], sizeof names[3], "X16 %s, stream start requested", pt_kern_level_name(best->x16_level));
	for (int v = 0; v < NVAR; v++) {
		qsort(res[v], NWIN, sizeof(double), cmp_double);
		printf("il: %-30s best %6.2f median %6.2f GB/s (%s bytes as stored)\n", names[v],
		       res[v][NWIN - 1], res[v][NWIN / 2], pt_type_name(type));
	}
	pt_free(w);
	pt_free(w16);
	pt_free(x);
	pt_free(xq);
}

/* A plain activation for the GLU set (the bench measures streaming, not the activation). */
static void act_mul(float *out, const float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = gate[i] * up[i];
}

/* Issue 21: one decode layer's routed experts as decode runs them (a GLU set of gate/up nf x
 * d Q4_K, then a set of downs d x nf Q6_K: two dispatches) against the same bytes as 3k
 * separate matvecs, from slabs of ne experts laid out like the GGUF tensors (~390 MB, far
 * beyond the caches), k different experts per layer.  Sarvam-30B: 7 experts (top-6 + the
 * shared one) of 1024 x 4096; Qwen3-30B-A3B: 8 of 128 experts of 768 x 2048.  Each window
 * runs the two variants back to back, so a busy host loads them alike.  Weight GB/s, wall
 * and per CPU second of all threads, best of 5 windows. */
static void bench_sets(double secs, const char *name, uint32_t ne_, uint32_t k_, uint32_t nf_,
		       uint32_t d_)
{
	enum { KMAX = 8, WINDOWS = 5, VARIANTS = 2 };
	const uint64_t NE = ne_, NF = nf_, D = d_;
	const uint32_t K = k_ < KMAX ? k_ : KMAX;
	uint64_t grb, drb;
	pt_type_row_bytes(PT_TYPE_Q4_K, D, &grb);
	pt_type_row_bytes(PT_TYPE_Q6_K, NF, &drb);
	const size_t ge = (size_t)grb * NF, de = (size_t)drb * D;
	uint8_t *gs = pt_malloc(ge * NE), *us = pt_malloc(ge * NE), *ds = pt_malloc(de * NE);
	float *x = pt_mallocn(D, sizeof(float)), *h = pt_mallocn((size_t)K * NF, sizeof(float));
	float *y = pt_mallocn((size_t)K * D, sizeof(float)), *y2 = pt_mallocn(NF, sizeof(float));
	struct pt_kern_mat gm = { PT_TYPE_Q4_K, NF, D, (size_t)grb, NULL, PT_KERN_LAYOUT_ROWS };
	struct pt_kern_mat dm = { PT_TYPE_Q6_K, D, NF, (size_t)drb, NULL, PT_KERN_LAYOUT_ROWS };
	void *xq = pt_malloc(pt_kern_act_bytes(&gm, 1));
	uint8_t *hq = pt_malloc(pt_kern_act_bytes(&dm, 1) * K);
	const size_t hrow = pt_kern_act_bytes(&dm, 1);
	if (!gs || !us || !ds || !x || !h || !y || !y2 || !xq || !hq) {
		fprintf(stderr, "bench: out of memory\n");
		exit(1);
	}
	fill(PT_TYPE_Q4_K, gs, ge * NE);
	fill(PT_TYPE_Q4_K, us, ge * NE);
	fill(PT_TYPE_Q6_K, ds, de * NE);
	for (uint64_t i = 0; i < D; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	pt_kern_set_level(pt_kern_level_max(), NULL);
	pt_kern_quantize_row(pt_kern_ops(PT_TYPE_Q4_K)->act_type, x, xq, D);
	static const char *const vname[VARIANTS] = { "GLU set + down set", "matvecs" };
	double best[2][VARIANTS] = { { 0 } }, best_cpu[2][VARIANTS] = { { 0 } };
	for (uint32_t th = 1; th <= 2; th++) {
		pt_pool *pool = NULL;
		pt_pool_create(th, &pool, NULL);
		uint64_t layer = 0;
		for (int win = 0; win < WINDOWS; win++)
			for (int v = 0; v < VARIANTS; v++) {
				double t0 = now(), c0 = proc_cpu_now(), t1;
				uint64_t bytes = 0;
				do {
					struct pt_kern_glu g[KMAX];
					struct pt_kern_mv d[KMAX];
					for (uint32_t j = 0; j < K; j++) {
						const uint64_t e = (layer * 11 + j * 7) % NE;
						gm.data = gs + e * ge;
						g[j] = (struct pt_kern_glu){ gm, gm, xq, xq, h + j * NF,
									     NULL, NULL };
						g[j].up.data = us + e * ge;
						dm.data = ds + e * de;
						d[j] = (struct pt_kern_mv){ dm, hq + j * hrow, y + j * D };
					}
					layer++;
					if (v == 0) {
						pt_kern_glu_set(g, K, act_mul, pool, NULL);
						for (uint32_t j = 0; j < K; j++)
							pt_kern_quantize_row(PT_TYPE_Q8_K, h + j * NF,
									     hq + j * hrow, NF);
						pt_kern_matvec_set(d, K, pool, NULL);
					} else {
						for (uint32_t j = 0; j < K; j++) {
							pt_kern_matvec_q(&g[j].gate, xq, h + j * NF, pool,
									 NULL);
							pt_kern_matvec_q(&g[j].up, xq, y2, pool, NULL);
							act_mul(h + j * NF, h + j * NF, y2, (int)NF);
							pt_kern_quantize_row(PT_TYPE_Q8_K, h + j * NF,
									     hq + j * hrow, NF);
							pt_kern_matvec_q(&d[j].w, d[j].xq, d[j].y, pool,
									 NULL);
						}
					}
					bytes += K * (2 * ge + de);
					t1 = now();
				} while (t1 - t0 < secs / WINDOWS);
				double r = (double)bytes / (t1 - t0) / 1e9;
				double rc = (double)bytes / (proc_cpu_now() - c0) / 1e9;
				best[th - 1][v] = r > best[th - 1][v] ? r : best[th - 1][v];
				best_cpu[th - 1][v] = rc > best_cpu[th - 1][v] ? rc : best_cpu[th - 1][v];
			}
		pt_pool_destroy(pool);
	}
	for (int v = 0; v < VARIANTS; v++) {
		printf("%-8s %u experts as %-20s", name, K, vname[v]);
		for (uint32_t th = 1; th <= 2; th++)
			printf("  %ut %6.2f (%5.2f/cpu-s)", th, best[th - 1][v], best_cpu[th - 1][v]);
		printf("   GB/s\n");
	}
	pt_free(gs);
	pt_free(us);
	pt_free(ds);
	pt_free(x);
	pt_free(h);
	pt_free(y);
	pt_free(y2);
	pt_free(xq);
	pt_free(hq);
}

/* One decode layer's weights for bench_token: the attention products, the router, and the
 * gate / up / down slabs of its ne experts (V and the downs are Q6_K or Q4_K). */
struct token_layer {
	const uint8_t *q, *k, *v, *o, *r, *gate, *up, *down;
	uint32_t ne;
	enum pt_type tv, td;
};

/* The Qwen3-30B-A3B-shape tensors of a GGUF for bench_token: 0, or -1 with a message when a
 * tensor is missing or of another type.  The mapping is marked MADV_HUGEPAGE and populated,
 * as the engine does for a model that fits. */
static int token_gguf(const char *path, pt_gguf **g, uint32_t layers, struct token_layer *lp,
		      const uint8_t **head)
{
	struct pt_error err = { 0 };
	if (pt_gguf_open(path, g, &err) != PT_OK) {
		fprintf(stderr, "bench: %s: %s\n", path, err.msg);
		return -1;
	}
	static const char *const names[8] = { "attn_q", "attn_k", "attn_v", "attn_output",
					       "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
					       "ffn_down_exps" };
	static const enum pt_type types[8] = { PT_TYPE_Q4_K, PT_TYPE_Q4_K, PT_TYPE_Q6_K,
					       PT_TYPE_Q4_K, PT_TYPE_F32,  PT_TYPE_Q4_K,
					       PT_TYPE_Q4_K, PT_TYPE_Q6_K };
	for (uint32_t l = 0; l < layers; l++) {
		const struct pt_gguf_tensor *t[8];
		for (int i = 0; i < 8; i++) {
			char name[64];
			snprintf(name, sizeof name, "blk.%u.%s.weight", l, names[i]);
			t[i] = pt_gguf_find_tensor(*g, name);
			/* V and the downs: Q6_K or Q4_K (Q4_K_M gives some layers more bits) */
			const bool alt = (i == 2 || i == 7) && t[i] && t[i]->type == PT_TYPE_Q4_K;
			if (!t[i] || (t[i]->type != (uint32_t)types[i] && !alt) || !t[i]->data) {
				fprintf(stderr, "bench: %s: %s missing or not %s\n", path, name,
					pt_type_name(types[i]));
				return -1;
			}
		}
		lp[l] = (struct token_layer){ t[0]->data, t[1]->data, t[2]->data, t[3]->data,
					      t[4]->data, t[5]->data, t[6]->data, t[7]->data, 128,
					      (enum pt_type)t[2]->type, (enum pt_type)t[7]->type };
	}
	const struct pt_gguf_tensor *t = pt_gguf_find_tensor(*g, "output.weight");
	if (!t || t->type != PT_TYPE_Q6_K || t->ne[1] != 151936) {
		fprintf(stderr, "bench: %s: output.weight is not Q6_K x 151936\n", path);
		return -1;
	}
	*head = t->data;
	(void)pt_gguf_advise_huge(*g);
	(void)pt_gguf_populate(*g, 90);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Issue 21: one Qwen3-30B-A3B decode token's weight stream as decode dispatches it, without
 * the non-product work (norms, attention over the context, rope, top-k): per layer the Q/K/V
 * set (4096/512/512 x 2048, Q4_K/Q4_K/Q6_K), the output projection (2048 x 4096 Q4_K), the F32
 * router (128 x 2048), a GLU set of 8 of the layer's experts (768 x 2048 Q4_K) and their
 * downs (2048 x 768 Q6_K); 48 layers, then the output head (151936 x 2048 Q6_K).  Synthetic
 * buffers: every layer its own, NE = 16 experts a layer (the whole ~3 GB beyond any cache),
 * one mapping marked MADV_HUGEPAGE like the engine's model mapping.  BENCH_TOKEN_GGUF=F: the
 * Qwen3-shape model F's own tensors at their offsets in its mapping instead (experts picked
 * among all 128; BENCH_TOKEN_NE=N: among the first N); BENCH_TOKEN_X16=1: the products on
 * interleaved copies (--repack's layout; copies not freed: a one-shot bench).  Prints tokens/s and weight GB/s of the
 * token and the time in each kind of dispatch, best / median of 5 windows: the real decode's
 * `decode_phase_s_per_token` without its compute, to tell the products' streaming from the
 * rest. */
/* count consecutive rows x cols matrices of type t into one X16 copy (anonymous, 2 MiB
 * pages), or NULL. */
static uint8_t *x16_copy(enum pt_type t, const uint8_t *src, uint64_t rows, uint64_t cols,
			 uint64_t count)
{
	uint64_t rb;
	pt_type_row_bytes(t, cols, &rb);
	const size_t bytes = (size_t)(rows / 16 * count) * pt_kern_x16_band(t, cols);
	uint8_t *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	pt_kern_x16_pack(t, src, (size_t)rb, cols, 0, rows / 16 * count, p);
	return p;
}

static void bench_token(double secs, uint32_t threads)
{
	enum { LAYERS = 48, NE = 16, K = 8, D = 2048, NF = 768, NQ = 4096, NKV = 512, NEXP = 128 };
	const uint64_t VOCAB = 151936;
	uint64_t q4_d, q6_d, q4_q, q6_nf, q4_nf;
	pt_type_row_bytes(PT_TYPE_Q4_K, D, &q4_d);
	pt_type_row_bytes(PT_TYPE_Q6_K, D, &q6_d);
	pt_type_row_bytes(PT_TYPE_Q4_K, NQ, &q4_q);
	pt_type_row_bytes(PT_TYPE_Q6_K, NF, &q6_nf);
	pt_type_row_bytes(PT_TYPE_Q4_K, NF, &q4_nf);
	const size_t sq = q4_d * NQ, sk = q4_d * NKV, sv = q6_d * NKV, so = q4_q * D,
		     sr = (size_t)D * 4 * NEXP, sg = q4_d * NF, sd = q6_nf * D;
	const size_t layer = sq + sk + sv + so + sr + NE * (2 * sg + sd), head = q6_d * VOCAB;
	const size_t total = layer * LAYERS + head + (2u << 20);
	struct token_layer lp[LAYERS];
	const uint8_t *headp = NULL;
	pt_gguf *gg = NULL;
	uint8_t *base = NULL;
	const char *fp = getenv("BENCH_TOKEN_GGUF"), *ne_env = getenv("BENCH_TOKEN_NE");
	if (fp) {
		if (token_gguf(fp, &gg, LAYERS, lp, &headp) != 0)
			exit(1);
		const int ne = ne_env ? atoi(ne_env) : NEXP;
		if (ne < K || ne > NEXP) {
			fprintf(stderr, "bench: BENCH_TOKEN_NE=%s: expected %d..%d\n", ne_env, K, NEXP);
			exit(2);
		}
		for (uint32_t l = 0; l < LAYERS; l++)
			lp[l].ne = (uint32_t)ne;
	} else {
		base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED) {
			fprintf(stderr, "bench: cannot map %zu bytes\n", total);
			exit(1);
		}
		uint8_t *w = (uint8_t *)(((uintptr_t)base + (2u << 20) - 1) &
					 ~(uintptr_t)((2u << 20) - 1));
		madvise(w, total - (2u << 20), MADV_HUGEPAGE);
		for (uint32_t l = 0; l < LAYERS; l++) {
			uint8_t *p = w + l * layer, *e = p + sq + sk + sv + so + sr;
			fill(PT_TYPE_Q4_K, p, sq + sk);
			fill(PT_TYPE_Q6_K, p + sq + sk, sv);
			fill(PT_TYPE_Q4_K, p + sq + sk + sv, so);
			float *r = (float *)(p + sq + sk + sv + so);
			for (size_t i = 0; i < sr / 4; i++)
				r[i] = (float)(rnd8() - 128) / 512.0f;
			fill(PT_TYPE_Q4_K, e, NE * 2 * sg);
			fill(PT_TYPE_Q6_K, e + NE * 2 * sg, NE * sd);
			lp[l] = (struct token_layer){ p, p + sq, p + sq + sk, p + sq + sk + sv,
						      p + sq + sk + sv + so, e, e + NE * sg,
						      e + 2 * NE * sg, NE, PT_TYPE_Q6_K, PT_TYPE_Q6_K };
		}
		headp = w + layer * LAYERS;
		fill(PT_TYPE_Q6_K, (uint8_t *)headp, head);
	}
	/* BENCH_TOKEN_X16=1: every Q4_K / Q6_K matrix copied into the interleaved layout
	 * (--repack's), the products run on the copies */
	const bool x16 = getenv("BENCH_TOKEN_X16") && !strcmp(getenv("BENCH_TOKEN_X16"), "1");
	struct token_layer lx[LAYERS];
	const uint8_t *headx = NULL;
	size_t sgx = 0, sdx[2] = { 0, 0 }; /* expert strides of the copies (downs: Q6_K, Q4_K) */
	if (x16) {
		sgx = NF / 16 * pt_kern_x16_band(PT_TYPE_Q4_K, D);
		sdx[0] = D / 16 * pt_kern_x16_band(PT_TYPE_Q6_K, NF);
		sdx[1] = D / 16 * pt_kern_x16_band(PT_TYPE_Q4_K, NF);
		for (uint32_t l = 0; l < LAYERS; l++) {
			const struct token_layer *L = &lp[l];
			lx[l] = *L;
			lx[l].q = x16_copy(PT_TYPE_Q4_K, L->q, NQ, D, 1);
			lx[l].k = x16_copy(PT_TYPE_Q4_K, L->k, NKV, D, 1);
			lx[l].v = x16_copy(L->tv, L->v, NKV, D, 1);
			lx[l].o = x16_copy(PT_TYPE_Q4_K, L->o, D, NQ, 1);
			lx[l].gate = x16_copy(PT_TYPE_Q4_K, L->gate, NF, D, L->ne);
			lx[l].up = x16_copy(PT_TYPE_Q4_K, L->up, NF, D, L->ne);
			lx[l].down = x16_copy(L->td, L->down, D, NF, L->ne);
			if (!lx[l].q || !lx[l].k || !lx[l].v || !lx[l].o || !lx[l].gate || !lx[l].up ||
			    !lx[l].down) {
				fprintf(stderr, "bench: cannot map the X16 copies\n");
				exit(1);
			}
		}
		headx = x16_copy(PT_TYPE_Q6_K, headp, VOCAB, D, 1);
		if (!headx) {
			fprintf(stderr, "bench: cannot map the X16 head\n");
			exit(1);
		}
	}
	const enum pt_kern_layout lay = x16 ? PT_KERN_LAYOUT_X16 : PT_KERN_LAYOUT_ROWS;
	/* weight bytes a token reads (V and the downs by each layer's type) */
	double bytes = (double)head, expert_bytes = 0;
	for (uint32_t l = 0; l < LAYERS; l++) {
		const size_t drb = lp[l].td == PT_TYPE_Q6_K ? q6_nf : q4_nf;
		const size_t vb = (lp[l].tv == PT_TYPE_Q6_K ? q6_d : q4_d) * NKV;
		expert_bytes += (double)(K * (2 * sg + drb * D));
		bytes += (double)(sq + sk + vb + so + sr);
	}
	bytes += expert_bytes;
	float *x = pt_mallocn(NQ, sizeof(float)), *y = pt_mallocn(VOCAB, sizeof(float));
	float *h = pt_mallocn((size_t)K * NF, sizeof(float)), *yk = pt_mallocn((size_t)K * D, sizeof(float));
	uint8_t *xq = pt_malloc(65536), *xq2 = pt_malloc(65536), *hq = pt_malloc((size_t)K * 4096);
	for (uint64_t i = 0; i < NQ; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	pt_kern_set_level(pt_kern_level_max(), NULL);
	pt_kern_quantize_row(PT_TYPE_Q8_K, x, xq, D);
	pt_kern_quantize_row(PT_TYPE_Q8_K, x, xq2, NQ);
	const size_t hrow = 4096;
	pt_pool *pool = NULL;
	pt_pool_create(threads, &pool, NULL);
	double best = 1e30, best_part[4] = { 0 }, per_win[5];
	uint64_t tok = 0;
	for (int win = 0; win < 5; win++) {
		double t0 = now(), t1;
		uint64_t n = 0;
		double acc[4] = { 0 };
		do {
			for (uint32_t l = 0; l < LAYERS; l++) {
				const struct token_layer *L = x16 ? &lx[l] : &lp[l];
				double a = now();
				struct pt_kern_mv qkv[3] = {
					{ { PT_TYPE_Q4_K, NQ, D, q4_d, L->q, lay }, xq, y },
					{ { PT_TYPE_Q4_K, NKV, D, q4_d, L->k, lay }, xq, y + NQ },
					{ { L->tv, NKV, D, L->tv == PT_TYPE_Q6_K ? q6_d : q4_d, L->v, lay }, xq,
					  y + NQ + NKV },
				};
				pt_kern_matvec_set(qkv, 3, pool, NULL);
				struct pt_kern_mat o = { PT_TYPE_Q4_K, D, NQ, q4_q, L->o, lay };
				pt_kern_matvec_q(&o, xq2, y, pool, NULL);
				double b = now();
				struct pt_kern_mat r = { PT_TYPE_F32, NEXP, D, (size_t)D * 4, L->r, PT_KERN_LAYOUT_ROWS };
				pt_kern_matvec_q(&r, x, y, pool, NULL);
				double c = now();
				struct pt_kern_glu g[K];
				struct pt_kern_mv dn[K];
				for (uint32_t j = 0; j < K; j++) {
					const uint64_t ex = (tok * 5 + j * 3 + l) % L->ne;
					const size_t es = x16 ? sgx : sg;
					g[j] = (struct pt_kern_glu){ { PT_TYPE_Q4_K, NF, D, q4_d, L->gate + ex * es, lay },
								     { PT_TYPE_Q4_K, NF, D, q4_d, L->up + ex * es, lay },
								     xq, xq, h + j * NF, NULL, NULL };
					const size_t drb = L->td == PT_TYPE_Q6_K ? q6_nf : q4_nf;
					const size_t ds = x16 ? sdx[L->td == PT_TYPE_Q6_K ? 0 : 1] : drb * D;
					dn[j] = (struct pt_kern_mv){ { L->td, D, NF, drb, L->down + ex * ds, lay },
								     hq + j * hrow, yk + j * D };
				}
				pt_kern_glu_set(g, K, act_mul, pool, NULL);
				for (uint32_t j = 0; j < K; j++)
					pt_kern_quantize_row(PT_TYPE_Q8_K, h + j * NF, hq + j * hrow, NF);
				pt_kern_matvec_set(dn, K, pool, NULL);
				double d = now();
				acc[0] += b - a;
				acc[1] += c - b;
				acc[2] += d - c;
			}
			double a = now();
			struct pt_kern_mat hm = { PT_TYPE_Q6_K, VOCAB, D, q6_d, x16 ? headx : headp, lay };
			pt_kern_matvec_q(&hm, xq, y, pool, NULL);
			acc[3] += now() - a;
			tok++;
			n++;
			t1 = now();
		} while (t1 - t0 < secs / 5);
		const double per = (t1 - t0) / (double)n;
		per_win[win] = per;
		if (per < best) {
			best = per;
			for (int i = 0; i < 4; i++)
				best_part[i] = acc[i] / (double)n;
		}
	}
	qsort(per_win, 5, sizeof(double), cmp_double);
	printf("qwen3 token%s %ut: best %.2f tok/s (median %.2f), %.3f GB/token, %.2f GB/s; best window ms: "
	       "attn-proj %.2f router %.2f experts %.2f head %.2f (experts %.2f GB/s, head %.2f GB/s)\n",
	       x16 ? " x16" : "", threads, 1.0 / best, 1.0 / per_win[2], bytes / 1e9, bytes / best / 1e9, best_part[0] * 1e3,
	       best_part[1] * 1e3, best_part[2] * 1e3, best_part[3] * 1e3,
	       expert_bytes / best_part[2] / 1e9, (double)head / best_part[3] / 1e9);
	pt_pool_destroy(pool);
	if (base)
		munmap(base, total);
	pt_gguf_close(gg);
	pt_free(x);
	pt_free(y);
	pt_free(h);
	pt_free(yk);
	pt_free(xq);
	pt_free(xq2);
	pt_free(hq);
}

/* Prefill: n_tok activation rows against one matrix, pt_kern_matmul_q (4 tokens per weight
 * decode where a dot4 kernel exists) versus n_tok separate matvecs; GMAC/s per CPU second, one thread. */
static void bench_matmul_levels(enum pt_type t, uint64_t rows, uint64_t cols, uint64_t n_tok,
				double secs, int lv_lo);

static void bench_matmul(enum pt_type t, uint64_t rows, uint64_t cols, uint64_t n_tok, double secs)
{
	bench_matmul_levels(t, rows, cols, n_tok, secs, 0);
}

/* Issue 21: Gemma 4 26B-A4B's dense prefill products (attn_q / attn_output of a sliding
 * layer, the dense FFN's gate and down) at the rows of a prefill chunk (128 - 2048), best
 * level only: with many rows the activations no longer fit the caches, and how the product
 * walks them decides its speed. */
static void bench_dense(double secs)
{
	static const uint64_t toks[] = { 128, 512, 2048 };
	const int top = (int)pt_kern_level_max();
	for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
		bench_matmul_levels(PT_TYPE_Q4_K, 4096, 2816, toks[i], secs, top);
		bench_matmul_levels(PT_TYPE_Q4_K, 2816, 4096, toks[i], secs, top);
		bench_matmul_levels(PT_TYPE_Q4_K, 2112, 2816, toks[i], secs, top);
		bench_matmul_levels(PT_TYPE_Q8_0, 2816, 2112, toks[i], secs, top);
	}
	/* Sarvam-30B's at a 512-token prompt: attn_qkv, attn_output, the shared expert's
	 * gate/up and down */
	bench_matmul_levels(PT_TYPE_Q4_K, 4608, 4096, 512, secs, top);
	bench_matmul_levels(PT_TYPE_Q4_K, 4096, 4096, 512, secs, top);
	bench_matmul_levels(PT_TYPE_Q4_K, 1024, 4096, 512, secs, top);
	bench_matmul_levels(PT_TYPE_Q6_K, 4096, 1024, 512, secs, top);
}

static void bench_matmul_levels(enum pt_type t, uint64_t rows, uint64_t cols, uint64_t n_tok,
				double secs, int lv_lo)
{
	uint64_t rb;
	pt_type_row_bytes(t, cols, &rb);
	uint8_t *w = pt_malloc((size_t)(rb * rows));
	float *x = pt_mallocn(cols * n_tok, sizeof(float)), *y = pt_mallocn(rows * n_tok, sizeof(float));
	fill(t, w, (size_t)(rb * rows));
	for (uint64_t i = 0; i < cols * n_tok; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	struct pt_kern_mat m = { t, rows, cols, (size_t)rb, w, PT_KERN_LAYOUT_ROWS };
	size_t ab = pt_kern_act_bytes(&m, 1);
	uint8_t *xq = pt_malloc(ab * n_tok);
	for (uint64_t k = 0; k < n_tok; k++)
		pt_kern_quantize_row(pt_kern_ops(t)->act_type, x + k * cols, xq + k * ab, cols);
	printf("%-5s %5llux%-5llu %llu tok", pt_type_name(t), (unsigned long long)rows,
	       (unsigned long long)cols, (unsigned long long)n_tok);
	for (int lv = lv_lo; lv <= (int)pt_kern_level_max(); lv++) {
		pt_kern_set_level((enum pt_kern_level)lv, NULL);
		for (int batched = lv_lo ? 1 : 0; batched < 2; batched++) {
			double best = 0;
			for (int win = 0; win < 3; win++) {
				double t0 = cpu_now(), t1;
				uint64_t macs = 0;
				do {
					if (batched)
						pt_kern_matmul_q(&m, xq, n_tok, y, NULL, NULL);
					else
						for (uint64_t k = 0; k < n_tok; k++)
							pt_kern_matvec_q(&m, xq + k * ab, y + k * rows, NULL, NULL);
					macs += rows * cols * n_tok;
					t1 = cpu_now();
				} while (t1 - t0 < secs / 3);
				double r = (double)macs / (t1 - t0) / 1e9;
				best = r > best ? r : best;
			}
			printf("  %s/%s %6.1f", pt_kern_level_name(lv), batched ? "matmul" : "matvecs", best);
			fflush(stdout);
		}
	}
	printf("   GMAC/s\n");
	pt_free(w);
	pt_free(x);
	pt_free(y);
	pt_free(xq);
}

/* In-situ prefill of routed experts: n_exp distinct matrices (together larger than L3, as
 * the layers' expert slabs are) each taking n_tok gathered tokens once per pass, so every
 * product starts with its weights out of cache, as in the forward pass.  GMAC/s per CPU
 * second, one thread, current level. */
static enum pt_kern_layout cold_layout; /* "layouts" mode: the experts' layout */

static void bench_matmul_cold(enum pt_type t, uint64_t rows, uint64_t cols, uint64_t n_exp,
			      uint64_t n_tok, double secs)
{
	uint64_t rb;
	pt_type_row_bytes(t, cols, &rb);
	size_t eb = (size_t)(rb * rows);
	uint8_t *w = pt_malloc(eb * n_exp);
	float *x = pt_mallocn(cols * n_tok, sizeof(float)), *y = pt_mallocn(rows * n_tok, sizeof(float));
	fill(t, w, eb * n_exp);
	if (cold_layout == PT_KERN_LAYOUT_X16) { /* the experts' interleaved copies instead */
		const size_t xb = rows / 16 * pt_kern_x16_band(t, cols);
		uint8_t *p = pt_malloc(xb * n_exp);
		for (uint64_t e = 0; p && e < n_exp; e++)
			pt_kern_x16_pack(t, w + e * eb, (size_t)rb, cols, 0, rows / 16, p + e * xb);
		pt_free(w);
		w = p;
		eb = xb;
	}
	for (uint64_t i = 0; i < cols * n_tok; i++)
		x[i] = (float)(rnd8() - 128) / 64.0f;
	struct pt_kern_mat m = { t, rows, cols, (size_t)rb, w, cold_layout };
	size_t ab = pt_kern_act_bytes(&m, 1);
	uint8_t *xq = pt_malloc(ab * n_tok);
	for (uint64_t k = 0; k < n_tok; k++)
		pt_kern_quantize_row(pt_kern_ops(t)->act_type, x + k * cols, xq + k * ab, cols);
	double best = 0;
	for (int win = 0; win < 3; win++) {
		double t0 = cpu_now(), t1;
		uint64_t macs = 0;
		do {
			for (uint64_t e = 0; e < n_exp; e++) {
				m.data = w + e * eb;
				pt_kern_matmul_q(&m, xq, n_tok, y, NULL, NULL);
			}
			macs += rows * cols * n_tok * n_exp;
			t1 = cpu_now();
		} while (t1 - t0 < secs / 3);
		double r = (double)macs / (t1 - t0) / 1e9;
		best = r > best ? r : best;
	}
	static const char *const lname[] = { "rows", "x16", "x16-rows" };
	printf("%-5s %5llux%-5llu %llu tok x %llu cold experts  %s/matmul %-8s %6.1f GMAC/s\n",
	       pt_type_name(t), (unsigned long long)rows, (unsigned long long)cols,
	       (unsigned long long)n_tok, (unsigned long long)n_exp,
	       pt_kern_level_name(pt_kern_level()), lname[cold_layout], best);
	pt_free(w);
	pt_free(x);
	pt_free(y);
	pt_free(xq);
}

struct share {
	uint64_t by_worker[4]; /* each slot written only by its own thread */
	uint32_t spin;         /* work per task: iterations of a dependent multiply chain */
	volatile uint32_t sink;
};

static void work_task(void *ctx, uint32_t task, uint32_t worker)
{
	struct share *sh = ctx;
	uint32_t v = task + 1;
	for (uint32_t i = 0; i < sh->spin; i++)
		v = v * 1664525u + 1013904223u;
	sh->sink = v;
	if (worker < 4)
		sh->by_worker[worker]++;
}

/* Back-to-back runs of `threads` tasks of about 2 us each.  With perfect parallelism a run
 * takes one task's time; the excess is the dispatch overhead (wake-up, claim, completion
 * wait).  Also the share of tasks the workers (not the caller) ran. */
static void bench_pool(uint32_t threads)
{
	pt_pool *pool = NULL;
	struct share sh = { { 0 }, 0, 0 };
	pt_pool_create(threads, &pool, NULL);
	double t_empty = now();
	for (int i = 0; i < 100000; i++)
		pt_pool_run(pool, work_task, &sh, threads); /* spin = 0: empty tasks */
	t_empty = (now() - t_empty) / 100000;
	uint64_t empty_caller = sh.by_worker[0];
	printf("pool %u threads: %.3f us per run of %u empty tasks (%.0f%% run by workers)\n", threads,
	       t_empty * 1e6, threads, 100.0 - 100.0 * (double)empty_caller / (100000.0 * threads));
	sh.spin = 1000;
	double t0 = now();
	for (int i = 0; i < 2000; i++)
		work_task(&sh, 0, 9);
	double per_spin = (now() - t0) / 2000 / sh.spin;
	sh.spin = (uint32_t)(2e-6 / per_spin);
	t0 = now();
	for (int i = 0; i < 2000; i++)
		work_task(&sh, 0, 9);
	double task = (now() - t0) / 2000;
	const int runs = 20000;
	memset(sh.by_worker, 0, sizeof sh.by_worker);
	double best = 1e9;
	for (int win = 0; win < 3; win++) {
		t0 = now();
		for (int i = 0; i < runs; i++)
			pt_pool_run(pool, work_task, &sh, threads);
		double dt = (now() - t0) / runs;
		best = dt < best ? dt : best;
	}
	uint64_t total = 3ull * runs * threads;
	printf("pool %u threads: run of %u x %.2f us tasks takes %.2f us -> %.2f us dispatch "
	       "overhead; %.0f%% of tasks run by workers\n", threads, threads, task * 1e6, best * 1e6,
	       (best - task) * 1e6, 100.0 * (double)(total - sh.by_worker[0]) / (double)total);
	pt_pool_destroy(pool);
}

/* Kernel speed without memory effects: one 4096-element row (weights made by the quant
 * module's quantizer from Gaussian-ish data) and its activation, both L1-resident, dotted
 * 2000 times; best of 5.  ns per 256 elements. */
static void bench_dot_l1(void)
{
	static const enum pt_type types[] = {
		PT_TYPE_F32,  PT_TYPE_F16,  PT_TYPE_BF16, PT_TYPE_Q8_0,   PT_TYPE_Q4_0, PT_TYPE_Q4_1,
		PT_TYPE_Q5_0, PT_TYPE_Q5_1, PT_TYPE_IQ4_NL, PT_TYPE_MXFP4, PT_TYPE_Q2_K, PT_TYPE_Q3_K,
		PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K, PT_TYPE_IQ4_XS,
	};
	enum { N = 4096 };
	static float x[N], xa[N];
	static uint8_t w[N * 4], a[N * 4];
	for (int i = 0; i < N; i++) {
		x[i] = (float)(rnd8() + rnd8() - 255) / 128.0f;
		xa[i] = (float)(rnd8() + rnd8() - 255) / 128.0f;
	}
	printf("dot, L1-resident 4096-element row, ns per 256 elements:\n");
	for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
		printf("  %-6s", pt_type_name(types[k]));
		pt_quant_quantize_row(types[k], x, w, N, NULL);
		for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, types[k]);
			pt_kern_quantize_row(o->act_type, xa, a, N);
			double best = 1e9;
			volatile float sink = 0;
			for (int r = 0; r < 5; r++) {
				double t0 = now();
				for (int i = 0; i < 2000; i++)
					sink += o->dot(N, w, a);
				double dt = (now() - t0) / 2000;
				best = dt < best ? dt : best;
			}
			(void)sink;
			printf("  %s %7.2f%s", pt_kern_level_name(lv), best * 1e9 / (N / 256),
			       (int)o->level < lv ? "*" : " ");
		}
		printf("\n");
	}
	printf("  (* = no kernel of its own at that level; runs the next lower level's)\n");
	printf("dot4 (one weight row, 4 activation rows) vs 4 x dot, L1-resident, ns per 256 "
	       "elements of weight:\n");
	for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
		pt_quant_quantize_row(types[k], x, w, N, NULL);
		for (int lv = 1; lv <= (int)pt_kern_level_max(); lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, types[k]);
			if (!o->dot4)
				continue;
			pt_kern_quantize_row(o->act_type, xa, a, N);
			double b1 = 1e9, b4 = 1e9;
			volatile float sink = 0;
			float out[4];
			for (int r = 0; r < 5; r++) {
				double t0 = now();
				for (int i = 0; i < 1000; i++)
					for (int j = 0; j < 4; j++)
						sink += o->dot(N, w, a);
				double dt = (now() - t0) / 1000;
				b1 = dt < b1 ? dt : b1;
				t0 = now();
				for (int i = 0; i < 1000; i++) {
					o->dot4(N, w, a, 0, out); /* stride 0: same row 4 times */
					sink += out[0];
				}
				dt = (now() - t0) / 1000;
				b4 = dt < b4 ? dt : b4;
			}
			(void)sink;
			printf("  %-6s %-6s 4 x dot %7.2f   dot4 %7.2f\n", pt_type_name(types[k]),
			       pt_kern_level_name(lv), b1 * 1e9 / (N / 256), b4 * 1e9 / (N / 256));
		}
	}
}

/* Register tile vs dot, L1-resident: a 2048-element row block (tile rows x tile tokens, or
 * 1 x 4 for dot4, 1 x 1 for dot), ns per 256 weight elements per output (row, token). */
static void bench_tile_l1(void)
{
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
					      PT_TYPE_Q5_0 };
	enum { N = 2048, R = 4, T = 8 };
	static float x[N];
	static uint8_t w[R][N * 2], a[T][N * 2];
	float y[T * R];
	printf("tile vs dot4 vs dot, L1-resident %d-element rows, ns per 256 elements per output:\n", N);
	for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
		for (int lv = 1; lv <= (int)pt_kern_level_max(); lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, types[k]);
			for (int r = 0; r < R; r++) {
				for (int i = 0; i < N; i++)
					x[i] = (float)(rnd8() + rnd8() - 255) / 128.0f;
				pt_quant_quantize_row(types[k], x, w[r], N, NULL);
			}
			for (int t = 0; t < T; t++) {
				for (int i = 0; i < N; i++)
					x[i] = (float)(rnd8() + rnd8() - 255) / 128.0f;
				pt_kern_quantize_row(o->act_type, x, a[t], N);
			}
			static uint8_t prepared[N * 8] __attribute__((aligned(64)));
			if (o->tile.prep) /* the prepared tile over rows prepared once (prefill) */
				o->tile.prep(N, w[0], sizeof w[0], prepared);
			double best[4] = { 1e9, 1e9, 1e9, 1e9 };
			volatile float sink = 0;
			for (int rep = 0; rep < 5; rep++) {
				for (int kind = 0; kind < 4; kind++) {
					if ((kind == 1 && !o->dot4) || (kind == 2 && !o->tile.fn) ||
					    (kind == 3 && !o->tile.prep))
						continue;
					uint32_t nr = kind >= 2 ? o->tile.rows : 1;
					uint32_t nt = kind >= 2 ? o->tile.toks : kind == 1 ? 4 : 1;
					double t0 = now();
					for (int i = 0; i < 1000; i++) {
						if (kind == 0)
							y[0] = o->dot(N, w[0], a[0]);
						else if (kind == 1)
							o->dot4(N, w[0], a[0], sizeof a[0], y);
						else if (kind == 2)
							o->tile.fn(N, w[0], sizeof w[0], nr, a[0], sizeof a[0], nt, y, R);
						else
							o->tile.prepped(N, prepared, a[0], sizeof a[0], nt, y, R);
						sink += y[0];
					}
					double dt = (now() - t0) / 1000 / (nr * nt);
					best[kind] = dt < best[kind] ? dt : best[kind];
				}
			}
			(void)sink;
			printf("  %-6s %-6s dot %7.2f   dot4 %7.2f   tile %ux%u %7.2f   prepared %7.2f\n",
			       pt_type_name(types[k]), pt_kern_level_name(lv), best[0] * 1e9 / (N / 256),
			       o->dot4 ? best[1] * 1e9 / (N / 256) : 0.0, o->tile.rows, o->tile.toks,
			       o->tile.fn ? best[2] * 1e9 / (N / 256) : 0.0,
			       o->tile.prep ? best[3] * 1e9 / (N / 256) : 0.0);
		}
	}
}

/* Issue 21, round 5: the routed experts of the full shapes at the tokens per expert of a
 * 512-token chunk (16-64), cold (32 experts per pass), best level: Qwen3-30B-A3B gate/up
 * 768 x 2048 Q4_K and down 2048 x 768 Q6_K / Q4_K, Sarvam-30B gate/up 1024 x 4096 Q4_K and
 * down 4096 x 1024 Q6_K. */
static void bench_moe(double secs)
{
	static const uint64_t toks[] = { 16, 24, 32, 64 };
	pt_kern_set_level(pt_kern_level_max(), NULL);
	for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
		bench_matmul_cold(PT_TYPE_Q4_K, 768, 2048, 32, toks[i], secs);
		bench_matmul_cold(PT_TYPE_Q6_K, 2048, 768, 32, toks[i], secs);
		bench_matmul_cold(PT_TYPE_Q4_K, 2048, 768, 32, toks[i], secs);
		bench_matmul_cold(PT_TYPE_Q4_K, 1024, 4096, 32, toks[i], secs);
		bench_matmul_cold(PT_TYPE_Q6_K, 4096, 1024, 32, toks[i], secs);
	}
}

/* qwen3moe small: 8 layers x 32 experts of gate/up 512 x 1024 (Q4_K), down 1024 x 512
 * (Q6_K), ~64 tokens each (61: a partial token group) */
static void bench_cold(double secs)
{
	pt_kern_set_level(pt_kern_level_max(), NULL);
	bench_matmul_cold(PT_TYPE_Q4_K, 512, 1024, 256, 64, secs);
	bench_matmul_cold(PT_TYPE_Q4_K, 512, 1024, 256, 61, secs);
	bench_matmul_cold(PT_TYPE_Q6_K, 1024, 512, 256, 64, secs);
	bench_matmul(PT_TYPE_Q4_K, 512, 1024, 64, secs);
}

/* Issue 21: a Qwen3-30B-A3B decode token's attention core at n_ctx positions (48 layers x 4
 * KV heads of 8 queries, head dim 128, F16 cache, split-K blocks of 1024 keys as the forward
 * pass runs them, F32 numerics): "cold" over 48 layers' caches (the token reads them from
 * memory), "hot" over one layer's, 48 times (in the caches: the arithmetic alone); one
 * thread, then two splitting the (layer, head, block) calls (no per-layer barrier).  GB/s:
 * the K and V bytes a cold token reads. */
struct attn_dec {
	struct pt_kv *kv;
	uint32_t n_layer_kv, n_ctx, first, step;
	const float *q;
	double secs, ms;
};

static void *attn_dec_run(void *arg)
{
	enum { N_KV = 4, HD = 128, NQ = 8, BLK = 1024 };
	struct attn_dec *d = arg;
	float *scratch = malloc(pt_attn_scratch_floats(d->kv, 0, NQ) * sizeof(float));
	float m[NQ], s[NQ], *acc = malloc(NQ * HD * sizeof(float));
	const struct pt_attn_args a = { 0.08838835f, 0.0f, true };
	uint32_t tokens = 0;
	const double t0 = now();
	double t;
	do {
		uint32_t task = 0;
		for (uint32_t il = 0; il < 48; il++)
			for (uint32_t h = 0; h < N_KV; h++)
				for (uint32_t b = 0; b * BLK < d->n_ctx; b++, task++) {
					if (task % d->step != d->first)
						continue;
					for (int i = 0; i < NQ; i++) {
						m[i] = -INFINITY;
						s[i] = 0.0f;
					}
					memset(acc, 0, NQ * HD * sizeof(float));
					const int64_t hi = (int64_t)(b + 1) * BLK < d->n_ctx
								   ? (int64_t)(b + 1) * BLK : d->n_ctx;
					pt_attn_group(d->kv, il % d->n_layer_kv, h, d->q + (size_t)h * NQ * HD,
						      HD, NQ, (int64_t)b * BLK, hi, &a, m, s, acc,
						      scratch);
				}
		tokens++;
		t = now() - t0;
	} while (t < d->secs);
	d->ms = t / tokens * 1e3;
	free(scratch);
	free(acc);
	return NULL;
}

static void bench_attn_decode(uint32_t n_ctx, double secs)
{
	enum { N_KV = 4, HD = 128, NQ = 8 };
	struct pt_kv_layer_desc desc[48];
	for (int i = 0; i < 48; i++)
		desc[i] = (struct pt_kv_layer_desc){ N_KV, HD, HD, 0, false };
	struct pt_kv kv;
	struct pt_error err;
	if (pt_kv_init(&kv, PT_KV_F16, 48, desc, n_ctx, 1, &err) != PT_OK) {
		printf("attn-decode: %s\n", err.msg);
		return;
	}
	float k[N_KV * HD], v[N_KV * HD], *q = malloc(N_KV * NQ * HD * sizeof(float));
	for (uint32_t il = 0; il < 48; il++)
		for (uint32_t p = 0; p < n_ctx; p++) {
			for (uint32_t i = 0; i < N_KV * HD; i++) {
				k[i] = (float)rnd8() / 128.0f - 1.0f;
				v[i] = (float)rnd8() / 128.0f - 1.0f;
			}
			pt_kv_store(&kv, il, p, k, v);
		}
	for (size_t i = 0; i < N_KV * NQ * HD; i++)
		q[i] = (float)rnd8() / 64.0f - 2.0f;
	pt_kern_set_level(pt_kern_level_max(), NULL);
	const double bytes = 48.0 * N_KV * n_ctx * HD * 2 * 2;
	for (int cold = 1; cold >= 0; cold--)
		for (uint32_t th = 1; th <= 2; th++) {
			struct attn_dec d[2];
			pthread_t tid[2];
			for (uint32_t i = 0; i < th; i++) {
				d[i] = (struct attn_dec){ &kv, cold ? 48 : 1, n_ctx, i, th, q, secs, 0 };
				pthread_create(&tid[i], NULL, attn_dec_run, &d[i]);
			}
			double ms = 0.0;
			for (uint32_t i = 0; i < th; i++) {
				pthread_join(tid[i], NULL);
				ms = d[i].ms > ms ? d[i].ms : ms;
			}
			printf("attn-decode qwen3 %5u ctx %s %u thread%s %7.2f ms/token  %6.1f GB/s of K/V\n",
			       n_ctx, cold ? "cold" : "hot ", th, th > 1 ? "s" : " ", ms,
			       bytes / (ms * 1e-3) * 1e-9);
		}
	free(q);
	pt_kv_fini(&kv);
}

/* Issue 21: one Qwen3-30B-A3B layer's prefill attention (32 query heads over 4 KV heads,
 * head dim 128, F16 cache, F32 accumulation as prefill chunks run it, split-K blocks of
 * 1024 keys) for a whole prompt of n_ctx tokens, one thread: 32 rows spread evenly over the
 * prompt are timed (thread CPU) through pt_attn_row, the per-row mean times n_ctx estimates
 * the layer.  GMAC/s counts the q.k and p.v products the causal triangle needs. */
static void bench_attn(uint32_t n_ctx, double secs)
{
	enum { N_HEAD = 32, N_KV = 4, HD = 128, N_ROWS = 32 };
	const struct pt_kv_layer_desc desc = { N_KV, HD, HD, 0, false };
	struct pt_kv kv;
	struct pt_error err;
	if (pt_kv_init(&kv, PT_KV_F16, 1, &desc, n_ctx, 512, &err) != PT_OK) {
		printf("attn: %s\n", err.msg);
		return;
	}
	float *k = malloc(N_KV * HD * sizeof(float)), *v = malloc(N_KV * HD * sizeof(float));
	float *q = malloc((size_t)N_ROWS * N_HEAD * HD * sizeof(float));
	float *out = malloc(N_HEAD * HD * sizeof(float));
	float *scratch = malloc(pt_attn_scratch_floats(&kv, 0, N_HEAD / N_KV) * sizeof(float));
	if (!k || !v || !q || !out || !scratch) {
		printf("attn: out of memory\n");
		goto done;
	}
	for (uint32_t p = 0; p < n_ctx; p++) {
		for (uint32_t i = 0; i < N_KV * HD; i++) {
			k[i] = (float)rnd8() / 128.0f - 1.0f;
			v[i] = (float)rnd8() / 128.0f - 1.0f;
		}
		pt_kv_store(&kv, 0, p, k, v);
	}
	for (size_t i = 0; i < (size_t)N_ROWS * N_HEAD * HD; i++)
		q[i] = (float)rnd8() / 64.0f - 2.0f;
	const struct pt_attn_args a = { 0.08838835f, 0.0f, true };
	double macs = 0.0; /* per pass over the sampled rows */
	for (uint32_t r = 0; r < N_ROWS; r++)
		macs += 2.0 * (double)((uint64_t)n_ctx * (2 * r + 1) / (2 * N_ROWS) + 1) * N_HEAD * HD;
	uint32_t passes = 0;
	const double t0 = cpu_now();
	double t = 0.0;
	do {
		for (uint32_t r = 0; r < N_ROWS; r++) {
			const int64_t pos = (int64_t)((uint64_t)n_ctx * (2 * r + 1) / (2 * N_ROWS));
			pt_attn_row(&kv, 0, N_HEAD, q + (size_t)r * N_HEAD * HD, pos, &a, 1024, out,
				    scratch);
		}
		passes++;
		t = cpu_now() - t0;
	} while (t < secs);
	const double per_row = t / passes / N_ROWS;
	printf("attn qwen3 layer %5u ctx  %-8s rows/task 1 %8.1f ms/layer (1 thread CPU)  "
	       "%6.2f GMAC/s\n", n_ctx, pt_kern_level_name(pt_kern_level()),
	       per_row * n_ctx * 1e3, macs * passes / t * 1e-9);
	/* the forward pass's prefill tiles: TILE rows of consecutive positions per task, keys
	 * all rows see taken on together, the rest row by row (no split-K here) */
	enum { TILE = 8, NQ = N_HEAD / N_KV };
	float *st = malloc(pt_attn_scratch_floats(&kv, 0, NQ * TILE) * sizeof(float));
	float *tm = malloc(TILE * NQ * sizeof(float)), *ts = malloc(TILE * NQ * sizeof(float));
	float *tacc = malloc((size_t)TILE * NQ * HD * sizeof(float));
	for (uint32_t tile = 1; st && tm && ts && tacc && tile <= TILE; tile *= 2) {
		passes = 0;
		const double t1 = cpu_now();
		do {
			for (uint32_t r = 0; r + tile <= N_ROWS; r += tile) {
				const int64_t pos0 = (int64_t)((uint64_t)n_ctx * (2 * r + 1) / (2 * N_ROWS));
				for (uint32_t h = 0; h < N_KV; h++) {
					for (uint32_t i = 0; i < tile * NQ; i++) {
						tm[i] = -INFINITY;
						ts[i] = 0.0f;
					}
					memset(tacc, 0, (size_t)tile * NQ * HD * sizeof(float));
					const float *qt = q + (size_t)r * N_HEAD * HD + (size_t)h * NQ * HD;
					pt_attn_tile(&kv, 0, h, qt, HD, N_HEAD * HD, NQ, tile, 0, pos0 + 1,
						     &a, tm, ts, tacc, st);
					for (uint32_t i = 1; i < tile; i++)
						pt_attn_tile(&kv, 0, h, qt + (size_t)i * N_HEAD * HD, HD, 0,
							     NQ, 1, pos0 + 1, pos0 + 1 + i, &a,
							     tm + i * NQ, ts + i * NQ,
							     tacc + (size_t)i * NQ * HD, st);
				}
			}
			passes++;
			t = cpu_now() - t1;
		} while (t < secs);
		printf("attn qwen3 layer %5u ctx  %-8s rows/task %u %8.1f ms/layer (no split-K)\n",
		       n_ctx, pt_kern_level_name(pt_kern_level()), tile,
		       t / passes / N_ROWS * n_ctx * 1e3);
	}
	free(st);
	free(tm);
	free(ts);
	free(tacc);
done:
	free(k);
	free(v);
	free(q);
	free(out);
	free(scratch);
	pt_kv_fini(&kv);
}


/* ---- iotax: the compute a host takes while the disk reads ---------------------------------
 * On the development VM a capped decode computes slower than the same decode with every
 * expert already in its slot, and the loss follows the reads, not the kernels.  This mode
 * measures it without the engine: one or two compute threads run for `secs` alone, then
 * while FILE is read with O_DIRECT in 4 MiB reads, two ways: by a reader thread that sleeps
 * in pread (as `dd iflag=direct` does: a wake-up a read), and as the engine reads, by
 * io_uring with four reads in flight, submitted and reaped without blocking by the first
 * compute thread between pieces of its work (no thread wakes for a completion).  Two
 * rounds, alternating.  Workloads: "core", eight multiply-add chains in registers (the
 * core's own speed, no memory), and "stream", the X16 Q4_K kernel over 128 MiB of bands a
 * thread (decode's memory-bound products).  On bare metal neither moves much; a hypervisor
 * that charges the guest's cores for its disk shows the loss here. */
#define IOTAX_CHUNK (4u << 20)
#define IOTAX_DEPTH 4

struct iotax_io {
	int fd;
	off_t size, next;
	struct io_uring ring;
	uint8_t *buf; /* IOTAX_DEPTH chunks */
	uint32_t inflight;
	double bytes;
};

static void iotax_submit(struct iotax_io *io, uint32_t slot)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
	if (!sqe)
		return;
	if (io->next + (off_t)IOTAX_CHUNK > io->size)
		io->next = 0;
	io_uring_prep_read(sqe, io->fd, io->buf + (size_t)slot * IOTAX_CHUNK, IOTAX_CHUNK, io->next);
	io_uring_sqe_set_data64(sqe, slot);
	io->next += IOTAX_CHUNK;
	io->inflight++;
}

/* Reap what has landed and read on into the freed buffers; never blocks. */
static void iotax_poll(struct iotax_io *io)
{
	struct io_uring_cqe *cqe;
	uint32_t again[IOTAX_DEPTH], n = 0;
	while (n < IOTAX_DEPTH && io_uring_peek_cqe(&io->ring, &cqe) == 0) {
		if (cqe->res > 0)
			io->bytes += cqe->res;
		again[n++] = (uint32_t)io_uring_cqe_get_data64(cqe);
		io_uring_cqe_seen(&io->ring, cqe);
		io->inflight--;
	}
	for (uint32_t i = 0; i < n; i++)
		iotax_submit(io, again[i]);
	if (n)
		io_uring_submit(&io->ring);
}

struct iotax_ctx {
	_Atomic int stop;
	int mode; /* 0 core, 1 stream */
	const uint8_t *bands;
	size_t band_count, band_bytes;
	const uint8_t *act;
	struct iotax_io *io; /* this thread keeps the reads going, or NULL */
	double work; /* out: multiply-adds (core) or bytes (stream) per second */
};

static void *iotax_compute(void *arg)
{
	struct iotax_ctx *c = arg;
	const struct pt_kern_ops *ops = pt_kern_ops(PT_TYPE_Q4_K);
	float x[8] = { 1, 1.1f, 1.2f, 1.3f, 1.4f, 1.5f, 1.6f, 1.7f }, y[16], sink = 0;
	size_t b = 0;
	double done = 0;
	const double t0 = now();
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (c->mode == 0) { /* ~0.2 ms a piece */
			for (int i = 0; i < 1 << 17; i++)
				for (int k = 0; k < 8; k++)
					x[k] = x[k] * 0.9999999f + 1e-7f;
			done += 8.0 * (1 << 17);
		} else { /* 16 bands, ~0.3 MB */
			for (int i = 0; i < 16; i++, b = (b + 1) % c->band_count) {
				ops->x16(2048, c->bands + b * c->band_bytes, c->act, 0, 1, y, 0);
				sink += y[0];
			}
			done += 16.0 * (double)c->band_bytes;
		}
		if (c->io)
			iotax_poll(c->io);
	}
	c->work = done / (now() - t0) + (x[0] + x[7] + sink == 12345.0f);
	return NULL;
}

struct iotax_reader {
	_Atomic int stop;
	int fd;
	off_t size;
	double bytes;
};

static void *iotax_read(void *arg)
{
	struct iotax_reader *r = arg;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, IOTAX_CHUNK))
		return NULL;
	off_t off = 0;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		if (off + (off_t)IOTAX_CHUNK > r->size)
			off = 0;
		const ssize_t n = pread(r->fd, buf, IOTAX_CHUNK, off);
		if (n <= 0)
			break;
		r->bytes += (double)n;
		off += n;
	}
	free(buf);
	return NULL;
}

static void bench_iotax(double secs, const char *path)
{
	const int fd = open(path, O_RDONLY | O_DIRECT);
	const off_t size = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
	if (fd < 0 || size < (off_t)(IOTAX_DEPTH * IOTAX_CHUNK)) {
		fprintf(stderr, "bench_kern: iotax needs a file of 16 MiB or more readable with O_DIRECT\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	pt_kern_set_level(pt_kern_level_max(), NULL);
	const size_t band = pt_kern_x16_band(PT_TYPE_Q4_K, 2048), per = (128u << 20) / band;
	uint8_t *rows = malloc(2 * per * band), *bands[2] = { NULL, NULL };
	uint8_t act[8 * 292];
	struct iotax_io io = { .fd = fd, .size = size };
	/* the engine's slots: 2 MiB pages, so a 4 MiB read is a request or two, not one a page */
	io.buf = mmap(NULL, IOTAX_DEPTH * IOTAX_CHUNK, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (io.buf != MAP_FAILED) {
		madvise(io.buf, IOTAX_DEPTH * IOTAX_CHUNK, MADV_HUGEPAGE);
		memset(io.buf, 0, IOTAX_DEPTH * IOTAX_CHUNK);
	}
	if (!rows || io.buf == MAP_FAILED || io_uring_queue_init(2 * IOTAX_DEPTH, &io.ring, 0) < 0) {
		fprintf(stderr, "bench_kern: iotax: out of memory or no io_uring\n");
		if (io.buf != MAP_FAILED)
			munmap(io.buf, IOTAX_DEPTH * IOTAX_CHUNK);
		free(rows);
		close(fd);
		return;
	}
	for (size_t i = 0; i < sizeof act; i++)
		act[i] = rnd8() & 0x3F;
	for (size_t b = 0; b < sizeof act; b += 292) { /* each Q8_K block's float scale */
		const float d8 = 0.01f;
		memcpy(act + b, &d8, sizeof d8);
	}
	fill(PT_TYPE_Q4_K, rows, 2 * per * band);
	for (int t = 0; t < 2; t++)
		bands[t] = x16_copy(PT_TYPE_Q4_K, rows + t * per * band, per * 16, 2048, 1);
	free(rows);
	static const char *const how[] = { "alone", "pread thread", "io_uring" };
	printf("iotax: %s (%.1f GB), 4 MiB O_DIRECT reads, %.1f s a run, 2 rounds\n", path,
	       (double)size / 1e9, secs);
	for (int mode = 0; mode < 2 && bands[0] && bands[1]; mode++)
		for (uint32_t nt = 1; nt <= 2; nt++) {
			double base = 0;
			for (int round = 0; round < 2; round++)
				for (int k = 0; k < 3; k++) {
					struct iotax_ctx c[2];
					struct iotax_reader rd = { .fd = fd, .size = size };
					pthread_t th[2], rt;
					io.bytes = 0;
					if (k == 2) { /* the reads go before the clock starts */
						for (uint32_t s = 0; s < IOTAX_DEPTH; s++)
							iotax_submit(&io, s);
						io_uring_submit(&io.ring);
					}
					const double t0 = now();
					for (uint32_t t = 0; t < nt; t++) {
						c[t] = (struct iotax_ctx){ .mode = mode, .bands = bands[t],
									   .band_count = per, .band_bytes = band,
									   .act = act, .io = k == 2 && t == 0 ? &io : NULL };
						pthread_create(&th[t], NULL, iotax_compute, &c[t]);
					}
					const bool reader = k == 1 && pthread_create(&rt, NULL, iotax_read, &rd) == 0;
					struct timespec ts = { (time_t)secs,
							       (long)((secs - (double)(time_t)secs) * 1e9) };
					nanosleep(&ts, NULL);
					double work = 0;
					for (uint32_t t = 0; t < nt; t++) {
						atomic_store(&c[t].stop, 1);
						pthread_join(th[t], NULL);
						work += c[t].work;
					}
					const double el = now() - t0;
					if (reader) {
						atomic_store(&rd.stop, 1);
						pthread_join(rt, NULL);
					}
					while (io.inflight) { /* drain before the next run */
						struct io_uring_cqe *cqe;
						if (io_uring_wait_cqe(&io.ring, &cqe) < 0)
							break;
						io_uring_cqe_seen(&io.ring, cqe);
						io.inflight--;
					}
					if (k == 0 && round == 0)
						base = work;
					printf("  %-6s %u thread%s %-13s %8.2f %s %6.1f %% of alone   reads %.2f GB/s\n",
					       mode ? "stream" : "core", nt, nt > 1 ? "s" : " ", how[k], work / 1e9,
					       mode ? "GB/s   " : "Gmadd/s", 100.0 * work / base,
					       (k == 1 ? rd.bytes : io.bytes) / el / 1e9);
				}
		}
	for (int t = 0; t < 2; t++)
		if (bands[t])
			munmap(bands[t], per * band);
	io_uring_queue_exit(&io.ring);
	munmap(io.buf, IOTAX_DEPTH * IOTAX_CHUNK);
	close(fd);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0.5;
	int prefill_only = argc > 2 && strcmp(argv[2], "prefill") == 0;
	int cold_only = argc > 2 && strcmp(argv[2], "cold") == 0;
	printf("cpu: %s\n", pt_kern_cpu_name());
	if (argc > 3 && strcmp(argv[2], "iotax") == 0) {
		bench_iotax(secs, argv[3]);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "dot") == 0) {
		bench_dot_l1();
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "attn-decode") == 0) {
		bench_attn_decode(512, secs);
		bench_attn_decode(4096, secs);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "attn") == 0) {
		bench_attn(1024, secs);
		bench_attn(4096, secs);
		return 0;
	}
	if (cold_only) {
		bench_cold(secs);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "decode") == 0) {
		/* issue 21: the Sarvam-30B decode products streamed from DRAM, weight GB/s (wall,
		 * best of 3) with 1 and 2 threads: a quarter of the output head (65536 x 4096 Q6_K,
		 * 220 MB, walked as 4 matrices of the full 262144-row head would be), 128 routed
		 * experts' gate/up (1024 x 4096 Q4_K, 302 MB) and down (4096 x 1024 Q6_K) */
		max_level_only = 1;
		bench_case(PT_TYPE_Q6_K, 16384, 4096, 4, secs);
		bench_case(PT_TYPE_Q4_K, 1024, 4096, 128, secs);
		bench_case(PT_TYPE_Q6_K, 4096, 1024, 128, secs);
		/* Qwen3-30B-A3B: routed gate/up 768 x 2048 Q4_K, down 2048 x 768 Q6_K, 128 experts */
		bench_case(PT_TYPE_Q4_K, 768, 2048, 128, secs);
		bench_case(PT_TYPE_Q6_K, 2048, 768, 128, secs);
		return 0;
	}
	if (argc > 2 && (strcmp(argv[2], "il") == 0 || strcmp(argv[2], "il6") == 0)) {
		bench_il(secs, argv[2][2] == '6' ? PT_TYPE_Q6_K : PT_TYPE_Q4_K);
		return 0;
	}
	if (argc > 2 && (strcmp(argv[2], "il8") == 0 || strcmp(argv[2], "il5") == 0)) {
		bench_il(secs, argv[2][2] == '8' ? PT_TYPE_Q8_0 : PT_TYPE_Q5_0);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "dense") == 0) {
		bench_dense(secs);
		return 0;
	}
	if (argc > 2 && (strcmp(argv[2], "layouts") == 0 || strcmp(argv[2], "layouts-few") == 0)) {
		/* the expert layouts, one thread; "layouts-few": 1-8 tokens (the sixteen-row
		 * twins against packing) */
		static const uint64_t toks[] = { 1, 2, 4, 8, 16, 32, 96, 256 }, few[] = { 1, 2, 3, 4, 6, 8 };
		const bool is_few = strcmp(argv[2], "layouts-few") == 0;
		const uint64_t *tk = is_few ? few : toks;
		const size_t nt = is_few ? sizeof few / sizeof few[0] : sizeof toks / sizeof toks[0];
		static const struct { enum pt_type t; uint64_t rows, cols; } mats[] = {
			{ PT_TYPE_Q4_K, 768, 2048 }, { PT_TYPE_Q6_K, 2048, 768 },
			{ PT_TYPE_Q4_K, 1024, 4096 }, { PT_TYPE_Q6_K, 4096, 1024 },
			{ PT_TYPE_Q5_0, 2816, 704 }, { PT_TYPE_Q8_0, 2816, 704 },
		};
		/* the best level, or PARTICLE_CPU's (the AVX2 level: the reference user's CPU) */
		if (!getenv("PARTICLE_CPU") || pt_kern_init(NULL) != PT_OK)
			pt_kern_set_level(pt_kern_level_max(), NULL);
		for (size_t i = 0; i < nt; i++)
			for (int l = 0; l < 3; l++)
				for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
					/* a level without the type's interleaved kernel would time the
					 * scalar reference */
					if (l != PT_KERN_LAYOUT_ROWS && !pt_kern_x16_native(mats[k].t))
						continue;
					cold_layout = (enum pt_kern_layout)l;
					bench_matmul_cold(mats[k].t, mats[k].rows, mats[k].cols, 32, tk[i], secs);
				}
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "dense16") == 0) { /* interleaved dense, one thread */
		static const uint64_t toks[] = { 512, 2048, 4096 };
		pt_kern_set_level(pt_kern_level_max(), NULL);
		cold_layout = PT_KERN_LAYOUT_X16;
		for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
			bench_matmul_cold(PT_TYPE_Q4_K, 4096, 4096, 1, toks[i], secs);
			bench_matmul_cold(PT_TYPE_Q6_K, 1024, 4096, 1, toks[i], secs);
		}
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "moe") == 0) {
		bench_moe(secs);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "token") == 0) {
		bench_token(secs, 1);
		bench_token(secs, 2);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "sets") == 0) {
		bench_sets(secs, "sarvam", 48, 7, 1024, 4096);
		bench_sets(secs, "qwen3", 128, 8, 768, 2048);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "experts") == 0) {
		/* Sarvam-30B routed expert (gate/up 1024 x 4096 Q4_K, down 4096 x 1024 Q6_K), 32
		 * cold experts per pass, at the tokens per expert of a 128-expert top-6 layer for
		 * prompt chunks of 128 .. 4096 tokens (issue 21: expert-major prefill) */
		pt_kern_set_level(pt_kern_level_max(), NULL);
		const uint64_t toks[] = { 6, 12, 24, 48, 96, 192 };
		for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
			bench_matmul_cold(PT_TYPE_Q4_K, 1024, 4096, 32, toks[i], secs);
			bench_matmul_cold(PT_TYPE_Q6_K, 4096, 1024, 32, toks[i], secs);
		}
		return 0;
	}
	bench_tile_l1();
	if (!prefill_only) {
		bench_dot_l1();
		bench_pool(2);
		bench_pool(3);
		bench_case(PT_TYPE_Q4_K, 4096, 4096, 1, secs);
		bench_case(PT_TYPE_Q6_K, 4096, 4096, 1, secs);
		bench_case(PT_TYPE_Q4_K, 768, 2048, 128, secs);
		bench_case(PT_TYPE_Q6_K, 768, 2048, 128, secs);
	}
	bench_matmul(PT_TYPE_Q4_K, 2048, 2048, 32, secs);
	bench_matmul(PT_TYPE_Q6_K, 2048, 2048, 32, secs);
	bench_matmul(PT_TYPE_Q8_0, 2048, 2048, 32, secs);
	/* one routed expert's share of a 512-token prompt: ~64 tokens (32 experts top-4) through
	 * gate/up (768 x 2048) and down (2048 x 768), ~32 at 128 experts top-8 */
	bench_matmul(PT_TYPE_Q4_K, 768, 2048, 64, secs);
	bench_matmul(PT_TYPE_Q4_K, 768, 2048, 32, secs);
	bench_matmul(PT_TYPE_Q6_K, 2048, 768, 32, secs);
	bench_matmul(PT_TYPE_Q5_0, 1024, 288, 64, secs); /* gemma4 small expert down */
	bench_matmul(PT_TYPE_Q4_K, 512, 1024, 64, secs);  /* qwen3moe small expert gate / up */
	bench_matmul(PT_TYPE_Q6_K, 1024, 512, 64, secs);  /* ... and down */
	bench_matmul(PT_TYPE_Q4_K, 2048, 2048, 512, secs);
	bench_cold(secs);
	bench_moe(secs);
	return 0;
}
