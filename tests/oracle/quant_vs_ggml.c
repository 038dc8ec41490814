/* quant_vs_ggml.c - bit-exactness oracle for the quant module: loads the libggml-base.so
 * that node-llama-cpp ships (path in argv[1]) and compares, per type, our quantized bytes
 * with ggml_quantize_chunk's (no imatrix), our dequantized floats with dequantize_row_*,
 * on Gaussian data, adversarial blocks and random bytes, and our fp16/bf16 conversions with
 * ggml's.  Prints one line per check and the closing `N passed, N failed`. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/quant.h"
#include "quant/types.h"

typedef size_t (*quantize_chunk_fn)(int, const float *, void *, int64_t, int64_t, int64_t,
				    const float *);
typedef void (*dequant_fn)(const void *, float *, int64_t);
typedef uint16_t (*to_half_fn)(float);
typedef float (*from_half_fn)(uint16_t);

static int n_pass, n_fail;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static float unif(void)
{
	return (float)((next() >> 11) * (1.0 / 9007199254740992.0));
}

static float gauss(void)
{
	float u = unif(), v = unif();
	if (u < 1e-12f)
		u = 1e-12f;
	return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void report(int ok, const char *what, const char *type, const char *detail)
{
	if (ok)
		n_pass++;
	else
		n_fail++;
	printf("%s %s %s%s%s\n", ok ? "ok  " : "FAIL", what, type, detail ? ": " : "",
	       detail ? detail : "");
}

/* 12 rows of 4096: Gaussian at several scales, and blocks of special shapes. */
#define NPR 4096
#define NROWS 12
static void make_data(float *x)
{
	for (int r = 0; r < NROWS; r++) {
		float *row = x + (size_t)r * NPR;
		float scale = r == 1 ? 1e-6f : r == 2 ? 1e4f : r == 3 ? 0.02f : 1.f;
		for (int i = 0; i < NPR; i++)
			row[i] = gauss() * scale;
		if (r < 4)
			continue;
		for (int i = 0; i < NPR; i++) {
			int blk = i / 256, k = blk % 8;
			float g = row[i];
			switch ((r * 3 + k) % 10) {
			case 0: row[i] = 0; break;                        /* zero block */
			case 1: row[i] = 0.375f; break;                   /* constant */
			case 2: row[i] = -fabsf(g); break;                /* negative only */
			case 3: row[i] = fabsf(g) + 0.5f; break;          /* positive, min > 0 */
			case 4: row[i] = (i % 97 == 0) ? 300.f : g * 0.01f; break; /* outlier */
			case 5: row[i] = (float)((int)(g * 8)) * 0.5f; break; /* ties, integers */
			case 6: row[i] = g * 1e-30f; break;               /* tiny, fp16 scale 0 */
			case 7: row[i] = (float)(i % 16) - 8.f; break;    /* exact grid */
			case 8: row[i] = g * 1e-39f; break;               /* float subnormals */
			default: break;
			}
		}
	}
}

static int same_bits(const float *a, const float *b, size_t n, size_t *where)
{
	for (size_t i = 0; i < n; i++) {
		if (isnan(a[i]) && isnan(b[i]))
			continue;
		if (memcmp(&a[i], &b[i], 4) != 0) {
			*where = i;
			return 0;
		}
	}
	return 1;
}

static void check_type(void *lib, quantize_chunk_fn qchunk, uint32_t type, const float *x)
{
	const char *name = pt_type_name(type);
	char sym[64], lname[32], msg[512];
	size_t k;
	for (k = 0; name[k] && k < sizeof(lname) - 1; k++)
		lname[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' && !(name[k] == 'K' && k > 0 &&
			name[k - 1] == '_') ? name[k] + 32 : name[k]);
	lname[k] = 0;
	snprintf(sym, sizeof(sym), "dequantize_row_%s", lname);
	dequant_fn deq = (dequant_fn)dlsym(lib, sym);
	uint64_t rb;
	pt_type_row_bytes(type, NPR, &rb);
	size_t total = rb * NROWS, n = (size_t)NPR * NROWS;
	uint8_t *ours = calloc(1, total), *theirs = calloc(1, total);
	float *y1 = malloc(n * 4), *y2 = malloc(n * 4);
	if (qchunk(type, x, theirs, 0, NROWS, NPR, NULL) != total) {
		report(0, "quantize", name, "ggml_quantize_chunk size");
		goto out;
	}
	struct pt_error err = { 0 };
	int ok = 1;
	for (int r = 0; r < NROWS && ok; r++)
		ok = pt_quant_quantize_row(type, x + (size_t)r * NPR, ours + r * rb, NPR, &err) == PT_OK;
	size_t diff = 0, first = total;
	for (size_t i = 0; i < total; i++)
		if (ours[i] != theirs[i]) {
			diff++;
			if (first == total)
				first = i;
		}
	snprintf(msg, sizeof(msg), "%zu of %zu bytes differ (first at row %zu byte %zu)%s", diff,
		 total, first / rb, first % rb, ok ? "" : err.msg);
	report(ok && diff == 0, "quantize", name, diff || !ok ? msg : NULL);
	if (!deq) {
		report(0, "dequantize", name, "no ggml symbol");
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) /* random bytes */
			for (size_t i = 0; i < total; i++)
				theirs[i] = (uint8_t)next();
		deq(theirs, y1, (int64_t)n);
		pt_quant_dequant_row(type, theirs, y2, n, &err);
		size_t where = 0;
		int same = same_bits(y1, y2, n, &where);
		snprintf(msg, sizeof(msg), "element %zu: ggml %.9g ours %.9g", where, y1[where],
			 y2[where]);
		report(same, pass ? "dequantize(random bytes)" : "dequantize", name,
		       same ? NULL : msg);
	}
out:
	free(ours);
	free(theirs);
	free(y1);
	free(y2);
}

static void check_halves(void *lib)
{
	to_half_fn f2h = (to_half_fn)dlsym(lib, "ggml_fp32_to_fp16");
	from_half_fn h2f = (from_half_fn)dlsym(lib, "ggml_fp16_to_fp32");
	to_half_fn f2b = (to_half_fn)dlsym(lib, "ggml_fp32_to_bf16");
	if (!f2h || !h2f || !f2b) {
		report(0, "fp16/bf16", "symbols", "missing");
		return;
	}
	int bad_h2f = 0, bad_f2h = 0, bad_f2b = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float a = h2f((uint16_t)h), b = pt_fp16_to_f32((uint16_t)h);
		if (memcmp(&a, &b, 4) != 0 && !(isnan(a) && isnan(b)))
			bad_h2f++;
	}
	for (uint32_t i = 0; i < (1u << 22); i++) {
		uint32_t u = i < 65536 ? (i << 16) | 0x8000u /* midpoints */ : (uint32_t)next();
		if (i >= 65536 && i < 131072)
			u = ((i - 65536) << 13) | 0x1000u; /* fp16 ties */
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f))
			continue;
		bad_f2h += f2h(f) != pt_f32_to_fp16(f);
		bad_f2b += f2b(f) != pt_f32_to_bf16(f);
	}
	report(!bad_h2f, "fp16->f32 all 65536", "", NULL);
	report(!bad_f2h, "f32->fp16 4M values incl. ties", "", NULL);
	report(!bad_f2b, "f32->bf16 4M values incl. ties", "", NULL);
}

/* gpt-oss expert rows (2880 = 90 MXFP4 blocks) against ggml-cpu itself (argv[2], a
 * libggml-cpu-*.so): the MXFP4 x Q8_0 dot of ggml's generic reference equals particle's
 * scalar dot bit for bit, and every SIMD level particle has stays within 1e-5 of
 * sum |w a| of it; particle's Q8_0 activation rows equal ggml's quantize_row_q8_0 bytes. */
typedef void (*vec_dot_fn)(int, float *, size_t, const void *, size_t, const void *, size_t,
			   int);
typedef void (*quant_row_fn)(const float *, void *, int64_t);
static void check_mxfp4_dot(const char *cpu_path)
{
	void *cpu = dlopen(cpu_path, RTLD_NOW | RTLD_LOCAL);
	vec_dot_fn gdot = cpu ? (vec_dot_fn)dlsym(cpu, "ggml_vec_dot_mxfp4_q8_0_generic") : NULL;
	quant_row_fn gq8 = cpu ? (quant_row_fn)dlsym(cpu, "quantize_row_q8_0") : NULL;
	void (*cpu_init)(void) = cpu ? (void (*)(void))dlsym(cpu, "ggml_cpu_init") : NULL;
	if (!gdot || !gq8 || !cpu_init) {
		report(0, "mxfp4 dot", cpu_path, dlerror());
		return;
	}
	cpu_init(); /* ggml-cpu's fp16 table */
	struct pt_error err = { 0 };
	if (pt_kern_init(&err) != PT_OK) {
		report(0, "mxfp4 dot", "kernels", err.msg);
		return;
	}
	enum { N = 2880, ROWS = 64 };
	uint8_t w[ROWS][N / 32 * 17], a[N / 32 * 34], ga[N / 32 * 34];
	float x[N];
	int bad_ref = 0, bad_simd = 0, bad_q8 = 0;
	for (int r = 0; r < ROWS; r++) {
		for (size_t i = 0; i < sizeof w[r]; i++)
			w[r][i] = (uint8_t)next();
		for (int b = 0; b < N / 32; b++) /* real exponents: weights of magnitude ~2^-6 */
			w[r][b * 17] = (uint8_t)(112 + next() % 20);
	}
	for (int t = 0; t < 16; t++) {
		for (int i = 0; i < N; i++)
			x[i] = gauss() * (t + 1);
		pt_kern_quantize_row(PT_TYPE_Q8_0, x, a, N);
		gq8(x, ga, N);
		bad_q8 += memcmp(a, ga, sizeof a) != 0;
		for (int r = 0; r < ROWS; r++) {
			float ref = 0, sa = 0, tmp[N];
			gdot(N, &ref, 0, w[r], 0, ga, 0, 1);
			const struct pt_kern_ops *sc = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_MXFP4);
			float ours = sc->dot(N, w[r], ga);
			bad_ref += memcmp(&ours, &ref, 4) != 0;
			pt_quant_dequant_row(PT_TYPE_MXFP4, w[r], tmp, N, &err);
			for (int i = 0; i < N; i++)
				sa += fabsf(tmp[i] * x[i]);
			for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv <= (int)pt_kern_level_max(); lv++) {
				const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv,
									     PT_TYPE_MXFP4);
				if (o && fabsf(o->dot(N, w[r], ga) - ref) > 1e-5f * (sa + 1e-30f))
					bad_simd++;
			}
		}
	}
	report(!bad_ref, "mxfp4 dot (2880) scalar == ggml generic", "", NULL);
	report(!bad_simd, "mxfp4 dot (2880) every SIMD level within 1e-5", "", NULL);
	report(!bad_q8, "q8_0 activation rows == ggml quantize_row_q8_0", "", NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: quant_vs_ggml LIBGGML_BASE.so\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	quantize_chunk_fn qchunk = lib ? (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk") : 0;
	if (!qchunk) {
		fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
		printf("0 passed, 1 failed\n");
		return 1;
	}
	float *x = malloc(sizeof(float) * NPR * NROWS);
	make_data(x);
	static const uint32_t types[] = {
		PT_TYPE_Q4_0, PT_TYPE_Q4_1, PT_TYPE_Q5_0, PT_TYPE_Q5_1, PT_TYPE_Q8_0,
		PT_TYPE_Q2_K, PT_TYPE_Q3_K, PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K,
		PT_TYPE_IQ4_NL, PT_TYPE_IQ4_XS, PT_TYPE_MXFP4,
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		check_type(lib, qchunk, types[i], x);
	check_halves(lib);
	if (argc > 2)
		check_mxfp4_dot(argv[2]);
	free(x);
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
