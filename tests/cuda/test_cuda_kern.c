/* test_cuda_kern.c - every CUDA kernel of src/cuda against the CPU reference on random data.
 *
 * Built by `make CUDA=1 cuda-test` (build/cuda/cuda_test_kern); needs a CUDA device, so CI
 * (no GPU) builds it and the device runs it.  Usage: cuda_test_kern [--device I] [--bench].
 * Ends with the line "N passed, N failed"; exit status 0 only when nothing failed.  --bench
 * then also times the matvec kernels on one large matrix per type (weight bytes read per
 * second: the decode kernels are bandwidth-bound; figures in docs/BENCHMARKS.md) and the
 * prefill matmul (tokens per second through a 4096 x 4096 matrix).
 *
 * Tolerances (src/cuda/gpu.h explains why the GPU is not bit-identical to the CPU):
 * - matvec against the exact product (dequantized weights, ggml's arithmetic, summed in
 *   double): |gpu - exact| <= g * sum|w_i x_i| with g = (cols/32 + 6) * 2^-24, the rounding
 *   bound of the kernel's float summation (cols/32 fused steps per lane, 5 butterfly adds);
 * - matvec against the CPU scalar kernel (activation rounded to Q8_K / Q8_0 / F16 first):
 *   |gpu - cpu| <= sum|w_i| * max|x| / 254 (half a Q8 step, which also covers F16's 2^-11
 *   relative rounding) + 2 g sum|w_i x_i|;
 * - RMSNorm, softmax, routing weights, SwiGLU: relative 1e-6 (a few ulp: double sums in
 *   another order, the device's expf within 2 ulp);
 * - RoPE: |gpu - cpu| <= 2e-6 (|x_a| + |x_b|) per rotated element (cosf/sinf within 2 ulp on
 *   the same float theta), elements past n_rot bit-identical;
 * - routing ids and every kernel's second run: exact. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/gpu.h"
#include "kern/kern.h"
#include "model/ops.h"
#include "quant/quant.h"
#include "quant/types.h"

static int n_pass, n_fail;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
	if (ok) {
		n_pass++;
		return;
	}
	n_fail++;
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

static void *dev_copy(const void *h, size_t bytes)
{
	void *d;
	struct pt_error err = { 0 };
	if (pt_gpu_alloc(&d, bytes, &err) != PT_OK ||
	    (h && pt_gpu_upload(d, h, bytes, &err) != PT_OK)) {
		printf("FAIL: device memory: %s\n", err.msg);
		exit(1);
	}
	return d;
}

static void get(void *h, const void *d, size_t bytes)
{
	struct pt_error err = { 0 };
	if (pt_gpu_sync(&err) != PT_OK || pt_gpu_download(h, d, bytes, &err) != PT_OK) {
		printf("FAIL: device: %s\n", err.msg);
		exit(1);
	}
}

/* ---- matvec --------------------------------------------------------------------------- */

static double worst_exact, worst_cpu; /* largest error / bound seen, for the log */

static void test_matvec(enum pt_type type, uint32_t rows, uint32_t cols, float w_spread)
{
	struct pt_error err = { 0 };
	uint64_t rb = 0;
	if (pt_type_row_bytes(type, cols, &rb) != 0) {
		check(0, "%s: row bytes for %u", pt_type_name(type), cols);
		return;
	}
	uint8_t *w = xmalloc(rb * rows);
	float *wf = xmalloc(sizeof(float) * cols), *x = xmalloc(sizeof(float) * cols);
	float *deq = xmalloc(sizeof(float) * (size_t)rows * cols);
	float *y_cpu = xmalloc(sizeof(float) * rows), *y_gpu = xmalloc(sizeof(float) * rows);
	float *y_gpu2 = xmalloc(sizeof(float) * rows);
	for (uint32_t r = 0; r < rows; r++) {
		for (uint32_t c = 0; c < cols; c++)
			wf[c] = frand() * (1.0f + w_spread * (float)((r * 7 + c / 32) % 5));
		if (pt_quant_quantize_row(type, wf, w + rb * r, cols, &err) != PT_OK ||
		    pt_quant_dequant_row(type, w + rb * r, deq + (size_t)r * cols, cols, &err) !=
			    PT_OK) {
			check(0, "%s: quantize: %s", pt_type_name(type), err.msg);
			goto out;
		}
	}
	float amax = 0;
	for (uint32_t c = 0; c < cols; c++) {
		x[c] = frand() * (c % 97 == 3 ? 8.0f : 1.0f); /* a few outliers */
		amax = fmaxf(amax, fabsf(x[c]));
	}
	const struct pt_kern_mat m = { .type = type, .rows = rows, .cols = cols, .row_bytes = rb,
				       .data = w };
	void *scratch = xmalloc(pt_kern_act_bytes(&m, 1) + 64);
	if (pt_kern_matvec(&m, x, y_cpu, scratch, NULL, &err) != PT_OK) {
		check(0, "%s: cpu matvec: %s", pt_type_name(type), err.msg);
		free(scratch);
		goto out;
	}
	free(scratch);
	void *dw = dev_copy(w, rb * rows), *dx = dev_copy(x, sizeof(float) * cols);
	void *dy = dev_copy(NULL, sizeof(float) * rows);
	enum pt_status st = pt_gpu_matvec(type, rows, cols, rb, dw, dx, dy, &err);
	check(st == PT_OK, "%s %ux%u: launch: %s", pt_type_name(type), rows, cols, err.msg);
	get(y_gpu, dy, sizeof(float) * rows);
	pt_gpu_matvec(type, rows, cols, rb, dw, dx, dy, &err);
	get(y_gpu2, dy, sizeof(float) * rows);
	check(memcmp(y_gpu, y_gpu2, sizeof(float) * rows) == 0, "%s %ux%u: second run differs",
	      pt_type_name(type), rows, cols);
	/* x at an address off 16-byte alignment takes the narrow-load kernel where there is a
	 * wide one (Q4_K): the two must agree bit for bit (same values, same order). */
	float *dx_odd = dev_copy(NULL, sizeof(float) * (cols + 1));
	pt_gpu_upload(dx_odd + 1, x, sizeof(float) * cols, &err);
	pt_gpu_matvec(type, rows, cols, rb, dw, dx_odd + 1, dy, &err);
	get(y_gpu2, dy, sizeof(float) * rows);
	check(memcmp(y_gpu, y_gpu2, sizeof(float) * rows) == 0,
	      "%s %ux%u: unaligned activation differs", pt_type_name(type), rows, cols);
	pt_gpu_free(dx_odd);
	const double g = (cols / 32.0 + 6.0) * ldexp(1.0, -24);
	int bad_exact = 0, bad_cpu = 0;
	for (uint32_t r = 0; r < rows; r++) {
		double exact = 0, sabs = 0, wabs = 0;
		for (uint32_t c = 0; c < cols; c++) {
			const double p = (double)deq[(size_t)r * cols + c] * x[c];
			exact += p;
			sabs += fabs(p);
			wabs += fabs(deq[(size_t)r * cols + c]);
		}
		const double b_exact = g * sabs + 1e-30;
		const double b_cpu = wabs * amax / 254.0 + 2 * g * sabs + 1e-30;
		const double e_exact = fabs(y_gpu[r] - exact), e_cpu = fabs(y_gpu[r] - y_cpu[r]);
		worst_exact = fmax(worst_exact, e_exact / b_exact);
		worst_cpu = fmax(worst_cpu, e_cpu / b_cpu);
		if (!(e_exact <= b_exact) && bad_exact++ < 3)
			printf("  %s %ux%u row %u: gpu %.9g exact %.9g (bound %.3g)\n",
			       pt_type_name(type), rows, cols, r, y_gpu[r], exact, b_exact);
		if (!(e_cpu <= b_cpu) && bad_cpu++ < 3)
			printf("  %s %ux%u row %u: gpu %.9g cpu %.9g (bound %.3g)\n",
			       pt_type_name(type), rows, cols, r, y_gpu[r], y_cpu[r], b_cpu);
	}
	check(!bad_exact, "%s %ux%u: %d rows off the exact product", pt_type_name(type), rows,
	      cols, bad_exact);
	check(!bad_cpu, "%s %ux%u: %d rows off the CPU scalar kernel", pt_type_name(type), rows,
	      cols, bad_cpu);
	pt_gpu_free(dw);
	pt_gpu_free(dx);
	pt_gpu_free(dy);
out:
	free(w), free(wf), free(x), free(deq), free(y_cpu), free(y_gpu), free(y_gpu2);
}

static void test_matvec_errors(void)
{
	struct pt_error err = { 0 };
	float *d = dev_copy(NULL, 4096);
	check(pt_gpu_matvec(PT_TYPE_Q4_1, 1, 32, 20, d, d, d, &err) == PT_E_UNSUPPORTED,
	      "matvec: Q4_1 must be unsupported");
	memset(&err, 0, sizeof err);
	check(pt_gpu_matvec(PT_TYPE_Q4_K, 1, 100, 144, d, d, d, &err) == PT_E_INVALID,
	      "matvec: 100 columns of Q4_K must be invalid");
	memset(&err, 0, sizeof err);
	check(pt_gpu_matvec(PT_TYPE_Q8_0, 1, 64, 34, d, d, d, &err) == PT_E_INVALID,
	      "matvec: a short row stride must be invalid");
	pt_gpu_free(d);
}

/* ---- prefill matmul: each token's row bit-identical to the decode matvec on that token
 * (so prefill and decode steps give the same logits), and within the matvec's bound of the
 * CPU scalar kernel; rows ys apart with a gap the kernel must not write. ---- */
static void test_matmul(enum pt_type type, uint32_t rows, uint32_t cols, uint32_t ntok)
{
	struct pt_error err = { 0 };
	uint64_t rb = 0;
	if (pt_type_row_bytes(type, cols, &rb) != 0) {
		check(0, "%s: row bytes for %u", pt_type_name(type), cols);
		return;
	}
	const size_t ys = rows + 3;
	uint8_t *w = xmalloc(rb * rows);
	float *wf = xmalloc(sizeof(float) * cols), *x = xmalloc(sizeof(float) * cols * ntok);
	float *y_mm = xmalloc(sizeof(float) * ys * ntok), *y_mv = xmalloc(sizeof(float) * rows);
	float *y_cpu = xmalloc(sizeof(float) * rows);
	for (uint32_t r = 0; r < rows; r++) {
		for (uint32_t c = 0; c < cols; c++)
			wf[c] = frand();
		if (pt_quant_quantize_row(type, wf, w + rb * r, cols, &err) != PT_OK) {
			check(0, "%s: quantize: %s", pt_type_name(type), err.msg);
			goto out;
		}
	}
	for (size_t i = 0; i < (size_t)cols * ntok; i++)
		x[i] = frand() * (i % 89 == 5 ? 6.0f : 1.0f);
	for (size_t i = 0; i < ys * ntok; i++)
		y_mm[i] = 12345.0f;
	void *dw = dev_copy(w, rb * rows), *dx = dev_copy(x, sizeof(float) * cols * ntok);
	float *dy = dev_copy(y_mm, sizeof(float) * ys * ntok);
	float *dv = dev_copy(NULL, sizeof(float) * rows);
	check(pt_gpu_matmul(type, rows, cols, rb, dw, dx, cols, ntok, dy, ys, &err) == PT_OK,
	      "%s matmul %ux%u x %u: launch: %s", pt_type_name(type), rows, cols, ntok, err.msg);
	get(y_mm, dy, sizeof(float) * ys * ntok);
	const struct pt_kern_mat m = { .type = type, .rows = rows, .cols = cols, .row_bytes = rb,
				       .data = w };
	void *scratch = xmalloc(pt_kern_act_bytes(&m, 1) + 64);
	int differ = 0, gap = 0, bad_cpu = 0;
	for (uint32_t t = 0; t < ntok; t++) {
		const float *xt = x + (size_t)t * cols;
		pt_gpu_matvec(type, rows, cols, rb, dw, (const float *)dx + (size_t)t * cols, dv, &err);
		get(y_mv, dv, sizeof(float) * rows);
		differ += memcmp(y_mv, y_mm + t * ys, sizeof(float) * rows) != 0;
		for (size_t i = rows; i < ys; i++)
			gap += y_mm[t * ys + i] != 12345.0f;
		if (pt_kern_matvec(&m, xt, y_cpu, scratch, NULL, &err) != PT_OK) {
			check(0, "%s: cpu matvec: %s", pt_type_name(type), err.msg);
			break;
		}
		float amax = 0;
		for (uint32_t c = 0; c < cols; c++)
			amax = fmaxf(amax, fabsf(xt[c]));
		const double g = (cols / 32.0 + 6.0) * ldexp(1.0, -24);
		for (uint32_t r = 0; r < rows; r++) {
			double sabs = 0, wabs = 0;
			float *deq = wf;
			pt_quant_dequant_row(type, w + rb * r, deq, cols, &err);
			for (uint32_t c = 0; c < cols; c++) {
				sabs += fabs((double)deq[c] * xt[c]);
				wabs += fabs(deq[c]);
			}
			const double b = wabs * amax / 254.0 + 2 * g * sabs + 1e-30;
			bad_cpu += !(fabs(y_mm[t * ys + r] - y_cpu[r]) <= b);
		}
	}
	free(scratch);
	check(!differ, "%s matmul %ux%u x %u: %d tokens differ from the decode matvec",
	      pt_type_name(type), rows, cols, ntok, differ);
	check(!gap, "%s matmul %ux%u x %u: %d writes past the rows", pt_type_name(type), rows,
	      cols, ntok, gap);
	check(!bad_cpu, "%s matmul %ux%u x %u: %d outputs off the CPU scalar kernel",
	      pt_type_name(type), rows, cols, ntok, bad_cpu);
	pt_gpu_free(dw);
	pt_gpu_free(dx);
	pt_gpu_free(dy);
	pt_gpu_free(dv);
out:
	free(w), free(wf), free(x), free(y_mm), free(y_mv), free(y_cpu);
}

/* ---- prefill grouped expert products: n_tok tokens x top-k of n_exp experts, the pairs
 * grouped on the device; every pair's row bit-identical to the decode matvec of its expert
 * on its token; the tile count within pt_gpu_group_max_tiles and every pair in one tile. */
static void test_grouped(enum pt_type type, uint32_t rows, uint32_t cols, int n_exp, int k,
			 int n_tok)
{
	struct pt_error err = { 0 };
	uint64_t rb = 0;
	if (pt_type_row_bytes(type, cols, &rb) != 0) {
		check(0, "%s: row bytes for %u", pt_type_name(type), cols);
		return;
	}
	const int n_pairs = n_tok * k;
	const size_t mat = rb * rows, ys = rows + 1;
	uint8_t *w = xmalloc(mat * n_exp);
	float *wf = xmalloc(sizeof(float) * cols), *x = xmalloc(sizeof(float) * cols * n_tok);
	float *y = xmalloc(sizeof(float) * ys * n_pairs), *yv = xmalloc(sizeof(float) * rows);
	int32_t *ids = xmalloc(sizeof(int32_t) * n_pairs);
	for (size_t r = 0; r < (size_t)rows * n_exp; r++) {
		for (uint32_t c = 0; c < cols; c++)
			wf[c] = frand();
		pt_quant_quantize_row(type, wf, w + rb * r, cols, &err);
	}
	for (size_t i = 0; i < (size_t)cols * n_tok; i++)
		x[i] = frand();
	for (int t = 0; t < n_tok; t++) /* k distinct experts per token, skewed to expert 0..2 */
		for (int j = 0; j < k; j++) {
			int e = (int)((frand() + 1.0f) * 0.5f * (float)(j == 0 ? 3 : n_exp)) % n_exp;
			for (int i = 0; i < j; i++)
				if (ids[t * k + i] == e) {
					e = (e + 1) % n_exp;
					i = -1;
				}
			ids[t * k + j] = e;
		}
	uint8_t *dw = dev_copy(w, mat * n_exp);
	struct pt_gpu_xdesc *table = xmalloc(sizeof *table * n_exp);
	for (int e = 0; e < n_exp; e++) {
		table[e].w[0] = table[e].w[1] = table[e].w[2] = dw + mat * e;
		table[e].rank = table[e].pad = 0;
	}
	const uint32_t max_tiles = pt_gpu_group_max_tiles((uint32_t)n_pairs, (uint32_t)n_exp);
	void *dtable = dev_copy(table, sizeof *table * n_exp);
	int32_t *dids = dev_copy(ids, sizeof(int32_t) * n_pairs);
	int32_t *dplist = dev_copy(NULL, sizeof(int32_t) * n_pairs);
	int32_t *dtiles = dev_copy(NULL, sizeof(int32_t) * 4 * max_tiles);
	int32_t *dnt = dev_copy(NULL, sizeof(int32_t));
	float *dx = dev_copy(x, sizeof(float) * cols * n_tok);
	float *dy = dev_copy(NULL, sizeof(float) * ys * n_pairs), *dv = dev_copy(NULL, sizeof(float) * rows);
	pt_gpu_group_pairs(dids, n_pairs, n_exp, dplist, dtiles, dnt);
	check(pt_gpu_matmul_grouped(type, rows, cols, rb, dtable, 1, dtiles, dnt, max_tiles, dplist,
				    dx, cols, k, dy, ys, &err) == PT_OK,
	      "%s grouped: launch: %s", pt_type_name(type), err.msg);
	get(y, dy, sizeof(float) * ys * n_pairs);
	int32_t nt = 0, *tiles = xmalloc(sizeof(int32_t) * 4 * max_tiles);
	int32_t *plist = xmalloc(sizeof(int32_t) * n_pairs);
	get(&nt, dnt, sizeof nt);
	get(tiles, dtiles, sizeof(int32_t) * 4 * max_tiles);
	get(plist, dplist, sizeof(int32_t) * n_pairs);
	int seen_bad = nt < 1 || (uint32_t)nt > max_tiles, covered = 0;
	for (int i = 0; !seen_bad && i < nt; i++) {
		const int32_t *tl = tiles + 4 * i;
		seen_bad |= tl[2] < 1 || tl[2] > 8 || tl[1] < 0 || tl[1] + tl[2] > n_pairs;
		for (int j = 0; !seen_bad && j < tl[2]; j++)
			seen_bad |= ids[plist[tl[1] + j]] != tl[0];
		covered += seen_bad ? 0 : tl[2];
	}
	check(!seen_bad && covered == n_pairs, "%s grouped %d pairs: %d tiles (max %u) do not "
	      "cover the pairs by expert", pt_type_name(type), n_pairs, nt, max_tiles);
	int differ = 0;
	for (int p = 0; p < n_pairs; p++) {
		pt_gpu_matvec(type, rows, cols, rb, dw + mat * ids[p], dx + (size_t)(p / k) * cols, dv,
			      &err);
		get(yv, dv, sizeof(float) * rows);
		differ += memcmp(yv, y + (size_t)p * ys, sizeof(float) * rows) != 0;
	}
	check(!differ, "%s grouped %ux%u, %d experts, top-%d, %d tokens: %d pairs differ from "
	      "the decode matvec", pt_type_name(type), rows, cols, n_exp, k, n_tok, differ);
	pt_gpu_free(dw), pt_gpu_free(dtable), pt_gpu_free(dids), pt_gpu_free(dplist);
	pt_gpu_free(dtiles), pt_gpu_free(dnt), pt_gpu_free(dx), pt_gpu_free(dy), pt_gpu_free(dv);
	free(w), free(wf), free(x), free(y), free(yv), free(ids), free(table), free(tiles);
	free(plist);
}

/* ---- element-wise and small reductions -------------------------------------------------- */

static int close_rel(float a, float b, double rel)
{
	return fabs((double)a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-37;
}

static void test_rmsnorm(int n, int n_rows, int with_w)
{
	struct pt_error err = { 0 };
	float *x = xmalloc(sizeof(float) * n * n_rows), *w = xmalloc(sizeof(float) * n);
	float *yc = xmalloc(sizeof(float) * n * n_rows), *yg = xmalloc(sizeof(float) * n * n_rows);
	for (int i = 0; i < n * n_rows; i++)
		x[i] = frand() * 3.0f;
	for (int i = 0; i < n; i++)
		w[i] = 1.0f + frand() * 0.5f;
	for (int r = 0; r < n_rows; r++)
		pt_op_rmsnorm(yc + (size_t)r * n, x + (size_t)r * n, with_w ? w : NULL, n, 1e-6f);
	float *dx = dev_copy(x, sizeof(float) * n * n_rows), *dw = dev_copy(w, sizeof(float) * n);
	check(pt_gpu_rmsnorm(dx, dx, with_w ? dw : NULL, n, n_rows, 1e-6f, &err) == PT_OK,
	      "rmsnorm launch: %s", err.msg);
	get(yg, dx, sizeof(float) * n * n_rows);
	int bad = 0;
	for (int i = 0; i < n * n_rows; i++)
		bad += !close_rel(yg[i], yc[i], 1e-6);
	check(!bad, "rmsnorm n=%d rows=%d w=%d: %d elements off", n, n_rows, with_w, bad);
	pt_gpu_free(dx), pt_gpu_free(dw);
	free(x), free(w), free(yc), free(yg);
}

static void test_rope(int n_head, int head_dim, int n_rot, int mode, int64_t pos, float base)
{
	struct pt_error err = { 0 };
	const int n = n_head * head_dim;
	float *x = xmalloc(sizeof(float) * n), *yc = xmalloc(sizeof(float) * n);
	float *yg = xmalloc(sizeof(float) * n), *cs = xmalloc(sizeof(float) * n_rot);
	for (int i = 0; i < n; i++)
		x[i] = yc[i] = frand() * 4.0f;
	pt_op_rope_cache(cs, n_rot, pos, base, NULL);
	pt_op_rope_apply(yc, n_head, head_dim, n_rot, (enum pt_rope_mode)mode, cs);
	float *dx = dev_copy(x, sizeof(float) * n);
	check(pt_gpu_rope(dx, n_head, head_dim, n_rot, mode, pos, base, &err) == PT_OK,
	      "rope launch: %s", err.msg);
	get(yg, dx, sizeof(float) * n);
	int bad = 0;
	const int half = n_rot / 2;
	for (int h = 0; h < n_head; h++) {
		const float *v = x + (size_t)h * head_dim;
		for (int i = 0; i < half; i++) {
			const int a = mode == 2 ? i : 2 * i, b = mode == 2 ? i + half : 2 * i + 1;
			const double tol = 2e-6 * (fabs(v[a]) + fabs(v[b]));
			bad += fabs(yg[h * head_dim + a] - yc[h * head_dim + a]) > tol;
			bad += fabs(yg[h * head_dim + b] - yc[h * head_dim + b]) > tol;
		}
		for (int i = n_rot; i < head_dim; i++)
			bad += yg[h * head_dim + i] != v[i];
	}
	check(!bad, "rope %s heads=%d dim=%d rot=%d pos=%lld base=%g: %d elements off",
	      mode == 2 ? "neox" : "norm", n_head, head_dim, n_rot, (long long)pos, base, bad);
	pt_gpu_free(dx);
	free(x), free(yc), free(yg), free(cs);
}

static void test_route(int n_expert, int k, int n_tok, int norm, float scale)
{
	struct pt_error err = { 0 };
	const size_t nl = (size_t)n_expert * n_tok;
	float *l = xmalloc(sizeof(float) * nl), *pc = xmalloc(sizeof(float) * nl);
	float *pg = xmalloc(sizeof(float) * nl), *scratch = xmalloc(sizeof(float) * n_expert);
	int *ic = xmalloc(sizeof(int) * k * n_tok);
	int32_t *ig = xmalloc(sizeof(int32_t) * k * n_tok);
	float *wc = xmalloc(sizeof(float) * k * n_tok), *wg = xmalloc(sizeof(float) * k * n_tok);
	for (size_t i = 0; i < nl; i++)
		l[i] = pc[i] = frand() * 6.0f;
	for (int t = 0; t < n_tok; t++)
		pt_op_moe_route(pc + (size_t)t * n_expert, n_expert, PT_OP_GATING_SOFTMAX, NULL, k,
				norm, scale, scratch, ic + t * k, wc + t * k);
	float *dl = dev_copy(l, sizeof(float) * nl), *dw = dev_copy(NULL, sizeof(float) * k * n_tok);
	int32_t *di = dev_copy(NULL, sizeof(int32_t) * k * n_tok);
	check(pt_gpu_moe_route(dl, n_expert, n_tok, k, norm, scale, di, dw, &err) == PT_OK,
	      "route launch: %s", err.msg);
	get(pg, dl, sizeof(float) * nl);
	get(ig, di, sizeof(int32_t) * k * n_tok);
	get(wg, dw, sizeof(float) * k * n_tok);
	int bad_p = 0, bad_i = 0, bad_w = 0;
	for (size_t i = 0; i < nl; i++)
		bad_p += !close_rel(pg[i], pc[i], 1e-6);
	for (int i = 0; i < k * n_tok; i++) {
		bad_i += ig[i] != ic[i];
		bad_w += !close_rel(wg[i], wc[i], 1e-6);
	}
	check(!bad_p && !bad_i && !bad_w,
	      "route experts=%d k=%d tok=%d norm=%d scale=%g: %d probs, %d ids, %d weights off",
	      n_expert, k, n_tok, norm, scale, bad_p, bad_i, bad_w);
	pt_gpu_free(dl), pt_gpu_free(dw), pt_gpu_free(di);
	free(l), free(pc), free(pg), free(scratch), free(ic), free(ig), free(wc), free(wg);
}

static void test_swiglu(int n)
{
	struct pt_error err = { 0 };
	float *g = xmalloc(sizeof(float) * n), *u = xmalloc(sizeof(float) * n);
	float *yc = xmalloc(sizeof(float) * n), *yg = xmalloc(sizeof(float) * n);
	for (int i = 0; i < n; i++) {
		g[i] = frand() * 20.0f;
		u[i] = frand() * 3.0f;
	}
	pt_op_swiglu_ref(yc, g, u, n);
	float *dg = dev_copy(g, sizeof(float) * n), *du = dev_copy(u, sizeof(float) * n);
	check(pt_gpu_swiglu(dg, dg, du, n, &err) == PT_OK, "swiglu launch: %s", err.msg);
	get(yg, dg, sizeof(float) * n);
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += !close_rel(yg[i], yc[i], 1e-6);
	check(!bad, "swiglu n=%d: %d elements off", n, bad);
	pt_gpu_free(dg), pt_gpu_free(du);
	free(g), free(u), free(yc), free(yg);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Weight GB/s of y = W x for a rows x cols matrix (well above the 60 MB L2), the median of 5
 * timings of 50 queued launches each (host clock around the queue and one sync). */
static void bench_matvec(enum pt_type type, uint32_t rows, uint32_t cols)
{
	struct pt_error err = { 0 };
	uint64_t rb = 0;
	pt_type_row_bytes(type, cols, &rb);
	const size_t bytes = rb * rows;
	uint8_t *w = xmalloc(bytes);
	float *wf = xmalloc(sizeof(float) * cols), *x = xmalloc(sizeof(float) * cols);
	for (uint32_t c = 0; c < cols; c++)
		wf[c] = frand(), x[c] = frand();
	pt_quant_quantize_row(type, wf, w, cols, &err);
	for (uint32_t r = 1; r < rows; r++)
		memcpy(w + rb * r, w, rb);
	void *dw = dev_copy(w, bytes), *dx = dev_copy(x, sizeof(float) * cols);
	void *dy = dev_copy(NULL, sizeof(float) * rows);
	double t[5];
	pt_gpu_matvec(type, rows, cols, rb, dw, dx, dy, &err);
	pt_gpu_sync(&err);
	for (int k = 0; k < 5; k++) {
		const double t0 = now_s();
		for (int i = 0; i < 50; i++)
			pt_gpu_matvec(type, rows, cols, rb, dw, dx, dy, &err);
		pt_gpu_sync(&err);
		t[k] = (now_s() - t0) / 50;
	}
	for (int i = 0; i < 5; i++) /* sort for the median */
		for (int j = i + 1; j < 5; j++)
			if (t[j] < t[i]) {
				const double u = t[i];
				t[i] = t[j], t[j] = u;
			}
	printf("bench matvec %-4s %u x %u: %.1f MB, %.1f us, %.0f GB/s\n", pt_type_name(type),
	       rows, cols, bytes / 1e6, t[2] * 1e6, bytes / t[2] / 1e9);
	pt_gpu_free(dw), pt_gpu_free(dx), pt_gpu_free(dy);
	free(w), free(wf), free(x);
}

/* Prefill product: ntok tokens through one rows x cols matrix (the weights decoded once per
 * 8 tokens): tokens per second and the float multiply-add rate. */
static void bench_matmul(enum pt_type type, uint32_t rows, uint32_t cols, uint32_t ntok)
{
	struct pt_error err = { 0 };
	uint64_t rb = 0;
	pt_type_row_bytes(type, cols, &rb);
	uint8_t *w = xmalloc(rb * rows);
	float *wf = xmalloc(sizeof(float) * cols), *x = xmalloc(sizeof(float) * cols * ntok);
	for (uint32_t c = 0; c < cols; c++)
		wf[c] = frand();
	for (size_t i = 0; i < (size_t)cols * ntok; i++)
		x[i] = frand();
	pt_quant_quantize_row(type, wf, w, cols, &err);
	for (uint32_t r = 1; r < rows; r++)
		memcpy(w + rb * r, w, rb);
	void *dw = dev_copy(w, rb * rows), *dx = dev_copy(x, sizeof(float) * cols * ntok);
	float *dy = dev_copy(NULL, sizeof(float) * rows * ntok);
	double t[5];
	pt_gpu_matmul(type, rows, cols, rb, dw, dx, cols, ntok, dy, rows, &err);
	pt_gpu_sync(&err);
	for (int k = 0; k < 5; k++) {
		const double t0 = now_s();
		for (int i = 0; i < 10; i++)
			pt_gpu_matmul(type, rows, cols, rb, dw, dx, cols, ntok, dy, rows, &err);
		pt_gpu_sync(&err);
		t[k] = (now_s() - t0) / 10;
	}
	for (int i = 0; i < 5; i++)
		for (int j = i + 1; j < 5; j++)
			if (t[j] < t[i]) {
				const double u = t[i];
				t[i] = t[j], t[j] = u;
			}
	printf("bench matmul %-4s %u x %u, %u tokens: %.1f us, %.0f tok/s, %.2f TFLOP/s\n",
	       pt_type_name(type), rows, cols, ntok, t[2] * 1e6, ntok / t[2],
	       2.0 * rows * cols * ntok / t[2] / 1e12);
	pt_gpu_free(dw), pt_gpu_free(dx), pt_gpu_free(dy);
	free(w), free(wf), free(x);
}

int main(int argc, char **argv)
{
	int device = 0, bench = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
			device = atoi(argv[++i]);
		else if (strcmp(argv[i], "--bench") == 0)
			bench = 1;
	}
	struct pt_error err = { 0 };
	struct pt_gpu_info info;
	if (pt_gpu_open(device, &info, &err) != PT_OK) {
		printf("cuda_test_kern: %s\n0 passed, 1 failed\n", err.msg);
		return 1;
	}
	printf("device %d of %d: %s, sm_%d%d, %d SMs, %.1f GiB (%.1f free), driver %d, runtime %d\n",
	       info.device, info.n_devices, info.name, info.cc_major, info.cc_minor, info.n_sm,
	       info.total_bytes / 1073741824.0, info.free_bytes / 1073741824.0,
	       info.driver_version, info.runtime_version);
	if (pt_kern_set_level(PT_KERN_LEVEL_SCALAR, &err) != PT_OK) {
		printf("cuda_test_kern: %s\n0 passed, 1 failed\n", err.msg);
		return 1;
	}
	struct pt_gpu_info bad;
	memset(&err, 0, sizeof err);
	check(pt_gpu_open(info.n_devices, &bad, &err) == PT_E_UNSUPPORTED &&
		      strstr(err.msg, "visible"),
	      "open(device %d) must fail naming the device count: %s", info.n_devices, err.msg);
	pt_gpu_open(device, &info, &err);

	static const enum pt_type types[] = { PT_TYPE_F32, PT_TYPE_F16, PT_TYPE_Q8_0,
					      PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K,
					      PT_TYPE_Q4_0, PT_TYPE_Q5_0 };
	static const uint32_t shapes[][2] = { { 1, 256 }, { 7, 512 }, { 33, 2816 },
					      { 257, 1024 }, { 1023, 4096 }, { 4097, 2048 } };
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
			test_matvec(types[t], shapes[s][0], shapes[s][1], 0.0f);
		test_matvec(types[t], 65, 1536, 3.0f); /* rows with uneven block magnitudes */
	}
	printf("matvec: worst error / bound %.3f against the exact product, %.3f against the "
	       "CPU scalar kernel\n", worst_exact, worst_cpu);
	test_matvec_errors();
	static const uint32_t mshapes[][3] = { { 1, 256, 1 }, { 7, 512, 9 }, { 33, 2816, 16 },
					       { 257, 1024, 23 }, { 130, 4096, 64 } };
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
		for (size_t s = 0; s < sizeof mshapes / sizeof mshapes[0]; s++)
			test_matmul(types[t], mshapes[s][0], mshapes[s][1], mshapes[s][2]);
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		test_grouped(types[t], 40, 512, 7, 3, 45);
		test_grouped(types[t], 9, 256, 128, 6, 256); /* 1,536 pairs, most experts in one tile */
	}

	test_rmsnorm(1, 1, 1);
	test_rmsnorm(255, 3, 1);
	test_rmsnorm(4096, 5, 1);
	test_rmsnorm(5121, 2, 0);
	static const int64_t pos[] = { 0, 1, 17, 4095, 100000 };
	for (size_t p = 0; p < sizeof pos / sizeof pos[0]; p++) {
		test_rope(5, 128, 128, 2, pos[p], 10000.0f);
		test_rope(3, 256, 64, 2, pos[p], 1000000.0f);
		test_rope(7, 64, 64, 0, pos[p], 10000.0f);
	}
	test_route(8, 2, 3, 1, 1.0f);
	test_route(60, 4, 5, 0, 1.0f);
	test_route(128, 8, 7, 1, 2.5f);
	test_route(256, 8, 1, 1, 1.0f);
	test_route(1024, 32, 2, 1, 1.0f);
	test_swiglu(1);
	test_swiglu(10007);
	test_swiglu(1 << 20);

	if (bench) {
		static const enum pt_type bt[] = { PT_TYPE_F32, PT_TYPE_F16, PT_TYPE_Q8_0,
						   PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K };
		for (size_t t = 0; t < sizeof bt / sizeof bt[0]; t++)
			bench_matvec(bt[t], 32768, 4096);
		for (size_t t = 0; t < sizeof bt / sizeof bt[0]; t++)
			bench_matmul(bt[t], 4096, 4096, 256);
	}
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
