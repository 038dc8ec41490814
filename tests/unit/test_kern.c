/* test_kern.c - kernels: activation quantizers against hand-computed blocks, every level's
 * dot products against the scalar reference and against an independent double-precision
 * dequantize-and-multiply reference written here from GGUF-AND-QUANTS.md, matvec/matmul,
 * thread-count independence and PARTICLE_CPU forcing. */
#include "kern/kern.h"

#include <stdlib.h>

#include "kern/kern_internal.h"
#include "quant/quant.h"

#include "test.h"
#include "util/alloc.h"
#include "util/status.h"

/* ---- deterministic random data -------------------------------------------------------- */

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

static float rndf(void) /* roughly N(0,1)-shaped: sum of uniforms */
{
	float s = 0;
	for (int i = 0; i < 4; i++)
		s += (float)(rnd() & 0xffff) / 65536.0f - 0.5f;
	return s * 1.7f;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static double h2d(const uint8_t *p)
{
	return pt_fp16_to_f32(get16(p));
}

/* Offsets of fp16 scale fields per type (-1 terminated); they get finite random scales. */
static const int *fp16_fields(enum pt_type t)
{
	static const int f0[] = { 0, -1 }, f02[] = { 0, 2, -1 }, q2k[] = { 80, 82, -1 },
			 q3k[] = { 108, -1 }, q6k[] = { 208, -1 }, none[] = { -1 };
	switch (t) {
	case PT_TYPE_Q4_0: case PT_TYPE_Q5_0: case PT_TYPE_Q8_0: case PT_TYPE_IQ4_NL:
	case PT_TYPE_IQ4_XS: return f0;
	case PT_TYPE_Q4_1: case PT_TYPE_Q5_1: case PT_TYPE_Q4_K: case PT_TYPE_Q5_K: return f02;
	case PT_TYPE_Q2_K: return q2k;
	case PT_TYPE_Q3_K: return q3k;
	case PT_TYPE_Q6_K: return q6k;
	default: return none;
	}
}

/* A random row of n elements of type t: random bytes with valid scale fields. */
static void random_row(enum pt_type t, uint8_t *row, size_t n)
{
	const struct pt_type_traits *tr = pt_type_traits(t);
	size_t nb = n / tr->block_elems, bb = tr->block_bytes;
	for (size_t i = 0; i < nb * bb; i++)
		row[i] = (uint8_t)rnd();
	for (size_t b = 0; b < nb; b++) {
		uint8_t *blk = row + b * bb;
		for (const int *f = fp16_fields(t); *f >= 0; f++)
			put16(blk + *f, pt_f32_to_fp16(rndf() * 0.01f));
		if (t == PT_TYPE_MXFP4)
			blk[0] = (uint8_t)(120 + rnd() % 12);
	}
	if (t == PT_TYPE_F32)
		for (size_t i = 0; i < n; i++) {
			float v = rndf();
			memcpy(row + 4 * i, &v, 4);
		}
	if (t == PT_TYPE_F16 || t == PT_TYPE_BF16)
		for (size_t i = 0; i < n; i++)
			put16(row + 2 * i, t == PT_TYPE_F16 ? pt_f32_to_fp16(rndf())
							   : pt_f32_to_bf16(rndf()));
}

/* ---- independent reference dequantization (double), from the spec tables -------------- */

static const int kv_nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
			       1, 13, 25, 38, 53, 69, 89, 113 };
static const int kv_mx[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

static int nib(const uint8_t *qs, int e) /* 32-block nibble layout: e<16 low, else high */
{
	return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
}

static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

static double deq_k(enum pt_type t, const uint8_t *x, int e)
{
	int h = e / 128, j = (e % 128) / 32, l = e % 32, b = e / 16, sc, m;
	switch (t) {
	case PT_TYPE_Q2_K: {
		int q = (x[16 + 32 * h + l] >> (2 * j)) & 3;
		return h2d(x + 80) * (x[b] & 0xF) * q - h2d(x + 82) * (x[b] >> 4);
	}
	case PT_TYPE_Q3_K: {
		const uint8_t *s = x + 96;
		int low4 = b < 8 ? s[b] & 0xF : s[b - 8] >> 4;
		int scv = (low4 | (((s[8 + b % 4] >> (2 * (b / 4))) & 3) << 4)) - 32;
		int q = ((x[32 + 32 * h + l] >> (2 * j)) & 3) - (((x[e % 32] >> (e / 32)) & 1) ? 0 : 4);
		return h2d(x + 108) * scv * q;
	}
	case PT_TYPE_Q4_K: case PT_TYPE_Q5_K: {
		int c = e / 64, hi = (e % 64) >= 32, ll = e % 32;
		const uint8_t *qs = x + (t == PT_TYPE_Q5_K ? 48 : 16);
		int q = hi ? qs[32 * c + ll] >> 4 : qs[32 * c + ll] & 0xF;
		if (t == PT_TYPE_Q5_K)
			q += 16 * ((x[16 + ll] >> (2 * c + hi)) & 1);
		k4_scale_min(x + 4, e / 32, &sc, &m);
		return h2d(x) * sc * q - h2d(x + 2) * m;
	}
	case PT_TYPE_Q6_K: {
		int k = (e % 128) / 32; /* quarter within the half */
		int ql = x[64 * h + l + 32 * (k & 1)];
		int low = k < 2 ? ql & 0xF : ql >> 4;
		int high = (x[128 + 32 * h + l] >> (2 * k)) & 3;
		return h2d(x + 208) * (int8_t)x[192 + b] * ((low | high << 4) - 32);
	}
	case PT_TYPE_IQ4_XS: {
		int ib = e / 32, el = e % 32;
		int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((get16(x + 2) >> (2 * ib)) & 3) << 4);
		return h2d(x) * (ls - 32) * kv_nl[nib(x + 8 + 16 * ib, el)];
	}
	default: return NAN;
	}
}

static double deq_32(enum pt_type t, const uint8_t *x, int e)
{
	switch (t) {
	case PT_TYPE_Q4_0: return (nib(x + 2, e) - 8) * h2d(x);
	case PT_TYPE_Q4_1: return nib(x + 4, e) * h2d(x) + h2d(x + 2);
	case PT_TYPE_Q5_0: case PT_TYPE_Q5_1: {
		int off = t == PT_TYPE_Q5_0 ? 2 : 4;
		uint32_t qh;
		memcpy(&qh, x + off, 4);
		int q = nib(x + off + 4, e) | (int)(((qh >> e) & 1) << 4);
		return t == PT_TYPE_Q5_0 ? (q - 16) * h2d(x) : q * h2d(x) + h2d(x + 2);
	}
	case PT_TYPE_Q8_0: return (int8_t)x[2 + e] * h2d(x);
	case PT_TYPE_IQ4_NL: return kv_nl[nib(x + 2, e)] * h2d(x);
	case PT_TYPE_MXFP4: return kv_mx[nib(x + 1, e)] * ldexp(1.0, x[0] - 128);
	default: return NAN;
	}
}

static double deq(enum pt_type t, const uint8_t *row, size_t i)
{
	const struct pt_type_traits *tr = pt_type_traits(t);
	const uint8_t *blk = row + (i / tr->block_elems) * tr->block_bytes;
	int e = (int)(i % tr->block_elems);
	float f;
	switch (t) {
	case PT_TYPE_F32: memcpy(&f, row + 4 * i, 4); return f;
	case PT_TYPE_F16: return h2d(row + 2 * i);
	case PT_TYPE_BF16: return pt_bf16_to_f32(get16(row + 2 * i));
	case PT_TYPE_Q8_1: return (int8_t)blk[4 + e] * h2d(blk);
	case PT_TYPE_Q8_K: memcpy(&f, blk, 4); return f * (int8_t)blk[4 + e];
	default: return tr->block_elems == 32 ? deq_32(t, blk, e) : deq_k(t, blk, e);
	}
}

/* Reference dot: sum of dequantized products in double; *mag gets sum |products|.  For the
 * Q8_1 partners the min term uses the stored fp16 s (what ggml and we compute). */
static double ref_dot(enum pt_type t, enum pt_type at, const uint8_t *w, const uint8_t *a,
		      size_t n, double *mag)
{
	double sum = 0, m = 0;
	int q81 = at == PT_TYPE_Q8_1;
	for (size_t i = 0; i < n; i++) {
		double wv = deq(t, w, i);
		if (q81) { /* weight = q*d + min: the min part is applied via s below */
			const uint8_t *blk = w + (i / 32) * pt_type_traits(t)->block_bytes;
			wv -= h2d(blk + 2);
		}
		double p = wv * deq(at, a, i);
		sum += p;
		m += fabs(p);
	}
	for (size_t b = 0; q81 && b < n / 32; b++) {
		double p = h2d(w + b * pt_type_traits(t)->block_bytes + 2) * h2d(a + b * 36 + 2);
		sum += p;
		m += fabs(p);
	}
	*mag = m;
	return sum;
}

/* ---- activation quantizers against hand-computed blocks ------------------------------- */

PT_TEST(test_kern_quantize_q8_0_rounds_half_even)
{
	float x[32] = { 0 };
	x[0] = 127.0f;  /* amax = 127: d = 1, id = 1 */
	x[1] = 2.5f;    /* tie -> 2 (half to even; the scalar ggml ref would give 3) */
	x[2] = -3.5f;   /* tie -> -4 */
	x[3] = 0.5f;    /* tie -> 0 */
	x[4] = 1.5f;    /* tie -> 2 */
	x[5] = -126.6f; /* -> -127 */
	x[31] = 7.25f;  /* -> 7 */
	uint8_t b[34];
	pt_kern_quantize_row(PT_TYPE_Q8_0, x, b, 32);
	CHECK_EQ_INT(get16(b), 0x3C00); /* fp16(1.0) */
	const int8_t *q = (const int8_t *)(b + 2);
	CHECK_EQ_INT(q[0], 127);
	CHECK_EQ_INT(q[1], 2);
	CHECK_EQ_INT(q[2], -4);
	CHECK_EQ_INT(q[3], 0);
	CHECK_EQ_INT(q[4], 2);
	CHECK_EQ_INT(q[5], -127);
	CHECK_EQ_INT(q[6], 0);
	CHECK_EQ_INT(q[31], 7);

	/* Q8_1: same quants, s = fp16(d * sum q) = 127+2-4+2-127+7 = 7 */
	uint8_t c[36];
	pt_kern_quantize_row(PT_TYPE_Q8_1, x, c, 32);
	CHECK_EQ_INT(get16(c), 0x3C00);
	CHECK_EQ_INT(get16(c + 2), pt_f32_to_fp16(7.0f));
	CHECK(memcmp(c + 4, b + 2, 32) == 0);

	/* amax 10: d = 10/127 stored as fp16, id = 127/10 = 12.7 */
	for (int i = 0; i < 32; i++)
		x[i] = (float)(i - 16) * 0.625f; /* -10 .. 9.375 */
	pt_kern_quantize_row(PT_TYPE_Q8_0, x, b, 32);
	CHECK_EQ_INT(get16(b), pt_f32_to_fp16(10.0f / 127.0f));
	CHECK_EQ_INT(q[0], -127);
	CHECK_EQ_INT(q[16], 0);
	CHECK_EQ_INT(q[17], 8);   /* 0.625 * 12.7 = 7.9375 */
	CHECK_EQ_INT(q[31], 119); /* 9.375 * 12.7 = 119.0625 */

	float z[32] = { 0 };
	pt_kern_quantize_row(PT_TYPE_Q8_0, z, b, 32);
	CHECK_EQ_INT(get16(b), 0);
	for (int i = 0; i < 32; i++)
		CHECK_EQ_INT(q[i], 0);
}

/* Non-finite activations (a broken model) must not hit undefined float-to-int casts (UBSan
 * build) and must leave the finite blocks of the row exact. */
PT_TEST(test_kern_quantize_nonfinite_is_defined)
{
	float x[512];
	for (int i = 0; i < 512; i++)
		x[i] = (float)(i % 7) - 3.0f;
	x[3] = INFINITY;
	x[40] = NAN;
	x[300] = -INFINITY;
	uint8_t b[16 * 36], k[2 * 292], ref[36];
	pt_kern_quantize_row(PT_TYPE_Q8_0, x, b, 512);
	pt_kern_quantize_row(PT_TYPE_Q8_1, x, b, 512);
	pt_kern_quantize_row(PT_TYPE_Q8_K, x, k, 512);
	pt_kern_quantize_row(PT_TYPE_Q8_1, x + 64, ref, 32);
	CHECK(memcmp(b + 2 * 36, ref, 36) == 0); /* block 2 is finite */
	for (int i = 0; i < 32; i++)
		CHECK((int8_t)b[2 * 36 + 4 + i] >= -127);
}

PT_TEST(test_kern_quantize_q8_k_block)
{
	float x[512] = { 0 };
	x[0] = -127.0f; /* signed max: iscale = -127/-127 = 1, d = 1 */
	x[1] = 2.5f;    /* nearest_int: half to even -> 2 */
	x[2] = 3.5f;    /* -> 4 */
	x[17] = -5.0f;
	x[255] = 100.2f;
	/* second block: positive max 127 -> iscale -1, d = -1, quants negated */
	x[256] = 127.0f;
	x[257] = 1.0f;
	uint8_t b[2 * 292];
	pt_kern_quantize_row(PT_TYPE_Q8_K, x, b, 512);
	float d;
	memcpy(&d, b, 4);
	CHECK(d == 1.0f);
	const int8_t *q = (const int8_t *)(b + 4);
	CHECK_EQ_INT(q[0], -127);
	CHECK_EQ_INT(q[1], 2);
	CHECK_EQ_INT(q[2], 4);
	CHECK_EQ_INT(q[17], -5);
	CHECK_EQ_INT(q[255], 100);
	int16_t bs[16];
	memcpy(bs, b + 260, 32);
	CHECK_EQ_INT(bs[0], -127 + 2 + 4);
	CHECK_EQ_INT(bs[1], -5);
	CHECK_EQ_INT(bs[15], 100);
	memcpy(&d, b + 292, 4);
	CHECK(d == -1.0f);
	CHECK_EQ_INT((int8_t)b[292 + 4], -127);
	CHECK_EQ_INT((int8_t)b[292 + 5], -1);
	memcpy(bs, b + 292 + 260, 32);
	CHECK_EQ_INT(bs[0], -128);

	/* all-zero block: d = 0, quants and bsums 0 */
	float z[256] = { 0 };
	memset(b, 0x55, sizeof b);
	pt_kern_quantize_row(PT_TYPE_Q8_K, z, b, 256);
	memcpy(&d, b, 4);
	CHECK(d == 0.0f);
	for (int i = 4; i < 292; i++)
		CHECK_EQ_INT(b[i], 0);
}

PT_TEST(test_kern_quantize_f16_bf16_rows)
{
	float x[5] = { 1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159f };
	uint8_t h[10], g[10];
	pt_kern_quantize_row(PT_TYPE_F16, x, h, 5);
	pt_kern_quantize_row(PT_TYPE_BF16, x, g, 5);
	CHECK_EQ_INT(get16(h), 0x3C00);
	CHECK_EQ_INT(get16(h + 2), 0xC100);
	CHECK_EQ_INT(get16(h + 4), 0x7BFF);
	CHECK_EQ_INT(get16(h + 8), 0x4248); /* 3.14159 -> 3.140625 */
	CHECK_EQ_INT(get16(g), 0x3F80);
	CHECK_EQ_INT(get16(g + 2), 0xC020);
	CHECK_EQ_INT(get16(g + 8), 0x4049); /* 3.14159 = 0x40490FD0 -> 0x4049 */
	float f[5];
	pt_kern_quantize_row(PT_TYPE_F32, x, f, 5);
	CHECK(memcmp(f, x, sizeof x) == 0);
}

/* ---- dot products: every level against the scalar twin and the double reference ------ */

static const enum pt_type all_types[] = {
	PT_TYPE_F32,  PT_TYPE_F16,  PT_TYPE_BF16, PT_TYPE_Q4_0,   PT_TYPE_Q4_1, PT_TYPE_Q5_0,
	PT_TYPE_Q5_1, PT_TYPE_Q8_0, PT_TYPE_IQ4_NL, PT_TYPE_MXFP4, PT_TYPE_Q2_K, PT_TYPE_Q3_K,
	PT_TYPE_Q4_K, PT_TYPE_Q5_K, PT_TYPE_Q6_K, PT_TYPE_IQ4_XS,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* Tolerance: relative to sum |w_i a_i| (the scale of the float rounding), 1e-5 for SIMD
 * versus scalar (float lanes in a different order), 2e-6 + the float accumulation bound for
 * scalar versus the exact double reference. */
static void check_dot_type(enum pt_type t, size_t n)
{
	const struct pt_kern_ops *ref = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
	REQUIRE(ref != NULL);
	uint64_t wb, ab;
	REQUIRE(pt_type_row_bytes(t, n, &wb) == 0 && pt_type_row_bytes(ref->act_type, n, &ab) == 0);
	uint8_t *w = pt_malloc(wb), *a = pt_malloc(ab);
	float *x = pt_mallocn(n, sizeof *x);
	REQUIRE(w && a && x);
	for (int rep = 0; rep < 3; rep++) {
		random_row(t, w, n);
		for (size_t i = 0; i < n; i++)
			x[i] = rndf() * (rep == 2 ? 1e3f : 1.0f);
		pt_kern_quantize_row(ref->act_type, x, a, n);
		double mag, exact = ref_dot(t, ref->act_type, w, a, n, &mag);
		float s = ref->dot(n, w, a);
		double tol = 2e-6 * mag * (1.0 + (double)n / 256.0) + 1e-30;
		if (fabs(s - exact) > tol)
			pt_test_fail(__FILE__, __LINE__, "%s n=%zu scalar %.9g vs exact %.9g (mag %g)",
				     pt_type_name(t), n, s, exact, mag);
		for (int lv = 1; lv <= (int)pt_kern_level_max(); lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, t);
			REQUIRE(o && o->act_type == ref->act_type);
			float v = o->dot(n, w, a);
			if (!(fabs(v - s) <= 1e-5 * mag + 1e-30))
				pt_test_fail(__FILE__, __LINE__, "%s n=%zu %s %.9g vs scalar %.9g (mag %g)",
					     pt_type_name(t), n, pt_kern_level_name(lv), v, s, mag);
		}
	}
	pt_free(w);
	pt_free(a);
	pt_free(x);
}

PT_TEST(test_kern_dot_all_levels_match_reference)
{
	static const size_t lens[] = { 256, 512, 768, 2304, 4096 };
	rng_state = 12345;
	for (size_t ti = 0; ti < N_TYPES; ti++)
		for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
			check_dot_type(all_types[ti], lens[li]);
	/* 32-blocks and plain types also at lengths that are not multiples of 256 */
	static const enum pt_type small[] = { PT_TYPE_F32, PT_TYPE_F16, PT_TYPE_BF16, PT_TYPE_Q4_0,
					      PT_TYPE_Q4_1, PT_TYPE_Q5_0, PT_TYPE_Q5_1,
					      PT_TYPE_Q8_0, PT_TYPE_IQ4_NL, PT_TYPE_MXFP4 };
	for (size_t ti = 0; ti < sizeof small / sizeof small[0]; ti++) {
		check_dot_type(small[ti], 32);
		check_dot_type(small[ti], 96);
		check_dot_type(small[ti], 160);
	}
	check_dot_type(PT_TYPE_F32, 7);
	check_dot_type(PT_TYPE_F16, 13);
	check_dot_type(PT_TYPE_BF16, 33);
}

/* The integer part of the SIMD kernels is exact: with one block and scale 1, every level
 * returns exactly the integer dot product. */
PT_TEST(test_kern_dot_integer_sums_exact)
{
	rng_state = 777;
	uint8_t w[34], a[34];
	for (int rep = 0; rep < 50; rep++) {
		random_row(PT_TYPE_Q8_0, w, 32);
		random_row(PT_TYPE_Q8_0, a, 32);
		put16(w, 0x3C00);
		put16(a, 0x3C00);
		for (int i = 2; i < 34; i++)
			if (a[i] == 0x80)
				a[i] = 0x81; /* activations never hold -128 */
		long exact = 0;
		for (int i = 0; i < 32; i++)
			exact += (long)(int8_t)w[2 + i] * (int8_t)a[2 + i];
		for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++)
			CHECK(pt_kern_ops_at((enum pt_kern_level)lv, PT_TYPE_Q8_0)->dot(32, w, a) ==
			      (float)exact);
	}
}

/* Q6_K's integer part is exact too, over raw random blocks (every qh bit pattern, scales
 * down to -128, codes 0 and 63) and an odd block count: with unit scales every level and
 * the dot4 return sum_i scale * (code - 32) * a exactly (activations in [-3, 3] keep the
 * sums below 2^24). */
PT_TEST(test_kern_dot_q6_k_integer_sums_exact)
{
	enum { NB = 3 };
	uint8_t w[NB * Q6K_B], a[NB * Q8K_B];
	rng_state = 4242;
	for (int rep = 0; rep < 40; rep++) {
		long exact = 0;
		for (int b = 0; b < NB; b++) {
			uint8_t *x = w + b * Q6K_B, *y = a + b * Q8K_B;
			for (int i = 0; i < 208; i++)
				x[i] = (uint8_t)rnd();
			if (rep == 0)
				x[192 + b] = 0x80;
			put16(x + 208, 0x3C00);
			const float one = 1.0f;
			memcpy(y, &one, 4);
			for (int g = 0; g < 16; g++) {
				int16_t bs = 0;
				for (int k = 0; k < 16; k++) {
					int8_t v = (int8_t)((int)(rnd() % 7) - 3);
					y[Q8K_QS + 16 * g + k] = (uint8_t)v;
					bs = (int16_t)(bs + v);
				}
				memcpy(y + Q8K_BSUMS + 2 * g, &bs, 2);
			}
			for (int e = 0; e < QKK; e++) {
				int h = e / 128, l = e % 32, k = (e % 128) / 32;
				int ql = x[64 * h + l + 32 * (k & 1)];
				int q = (k < 2 ? ql & 0xF : ql >> 4) | ((x[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
				exact += (long)(int8_t)x[192 + e / 16] * (q - 32) * (int8_t)y[Q8K_QS + e];
			}
		}
		for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, PT_TYPE_Q6_K);
			CHECK(o->dot(NB * QKK, w, a) == (float)exact);
			if (o->dot4) {
				float out[4];
				o->dot4(NB * QKK, w, a, 0, out);
				for (int t = 0; t < 4; t++)
					CHECK(out[t] == (float)exact);
			}
		}
	}
}

/* Low-bit rows whose dot is an exact integer: unit scales d (and dmin), integer mins, so every
 * level's dot and dot4 must return the independent reference exactly (sums stay below 2^24).
 * Odd block counts; rep 0 and 1 put the scale fields and codes at their extremes (Q3_K:
 * code -4 times scale -32 times 127, the one product of magnitude 128 * 127). */
static void exact_row(enum pt_type t, uint8_t *w, size_t nb, int rep)
{
	const struct pt_type_traits *tr = pt_type_traits(t);
	for (size_t b = 0; b < nb; b++) {
		uint8_t *x = w + b * tr->block_bytes;
		for (size_t i = 0; i < tr->block_bytes; i++)
			x[i] = rep == 0 ? (t == PT_TYPE_Q3_K ? 0x00 : 0xFF)
			       : rep == 1 ? (t == PT_TYPE_Q3_K ? 0xFF : 0x00) : (uint8_t)rnd();
		switch (t) {
		case PT_TYPE_Q2_K:
			put16(x + 80, 0x3C00);
			put16(x + 82, 0x3C00);
			break;
		case PT_TYPE_Q3_K: put16(x + 108, 0x3C00); break;
		default: /* Q4_1 / Q5_1: d = 1, integer min in [-64, 64] */
			put16(x, 0x3C00);
			put16(x + 2, pt_f32_to_fp16(rep == 0 ? 64.0f : rep == 1 ? -64.0f
						    : (float)((int)(rnd() % 129) - 64)));
			break;
		}
	}
}

static void exact_act(enum pt_type at, uint8_t *a, size_t n, int rep)
{
	const float one = 1.0f;
	for (size_t i = 0; i < n; i++) {
		int8_t v = rep < 2 ? (int8_t)((i % 3 == 0 && rep == 1) ? -127 : 127)
				   : (int8_t)((int)(rnd() % 255) - 127);
		if (at == PT_TYPE_Q8_K)
			a[(i / QKK) * Q8K_B + Q8K_QS + i % QKK] = (uint8_t)v;
		else
			a[(i / QK) * Q8_1_B + 4 + i % QK] = (uint8_t)v;
	}
	if (at == PT_TYPE_Q8_K) {
		for (size_t b = 0; b < n / QKK; b++) {
			uint8_t *y = a + b * Q8K_B;
			memcpy(y, &one, 4);
			for (int g = 0; g < 16; g++) {
				int16_t bs = 0;
				for (int k = 0; k < 16; k++)
					bs = (int16_t)(bs + (int8_t)y[Q8K_QS + 16 * g + k]);
				memcpy(y + Q8K_BSUMS + 2 * g, &bs, 2);
			}
		}
	} else {
		for (size_t b = 0; b < n / QK; b++) { /* d = 1, s an integer fp16 holds exactly */
			put16(a + b * Q8_1_B, 0x3C00);
			put16(a + b * Q8_1_B + 2, pt_f32_to_fp16((float)((int)(rnd() % 2049) - 1024)));
		}
	}
}

PT_TEST(test_kern_dot_low_bit_integer_sums_exact)
{
	static const enum pt_type types[] = { PT_TYPE_Q2_K, PT_TYPE_Q3_K, PT_TYPE_Q4_1, PT_TYPE_Q5_1 };
	enum { MAXB = 3 * 292 };
	static uint8_t w[MAXB], a[4][MAXB];
	rng_state = 2024;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		const enum pt_type t = types[ti], at = pt_type_traits(t)->vec_dot;
		const size_t n = pt_type_traits(t)->block_elems == QKK ? 3 * QKK : 9 * QK;
		for (int rep = 0; rep < 30; rep++) {
			exact_row(t, w, n / pt_type_traits(t)->block_elems, rep);
			double exact[4], mag;
			for (int k = 0; k < 4; k++) {
				exact_act(at, a[k], n, rep);
				exact[k] = ref_dot(t, at, w, a[k], n, &mag);
				REQUIRE(fabs(exact[k]) < 16777216.0 && exact[k] == floor(exact[k]));
			}
			for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
				const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, t);
				for (int k = 0; k < 4; k++)
					if (o->dot(n, w, a[k]) != (float)exact[k])
						pt_test_fail(__FILE__, __LINE__, "%s %s rep %d: %.9g vs %.9g",
							     pt_type_name(t), pt_kern_level_name(lv), rep,
							     o->dot(n, w, a[k]), exact[k]);
				if (o->dot4) {
					float out[4];
					o->dot4(n, w, a[0], sizeof a[0], out);
					for (int k = 0; k < 4; k++)
						CHECK(out[k] == (float)exact[k]);
				}
			}
		}
	}
#if defined(PT_KERN_X86)
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512)
		for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
			CHECK(pt_kern_ops_at(PT_KERN_LEVEL_AVX512, types[ti])->level == PT_KERN_LEVEL_AVX512);
#elif defined(PT_KERN_ARM64)
	/* every type has its own neon and dotprod kernel; i8mm runs dotprod's */
	for (int lv = PT_KERN_LEVEL_NEON; lv <= (int)pt_kern_level_max(); lv++)
		for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
			CHECK((int)pt_kern_ops_at((enum pt_kern_level)lv, types[ti])->level ==
			      (lv == PT_KERN_LEVEL_I8MM ? PT_KERN_LEVEL_DOTPROD : lv));
#endif
}

/* ---- matvec / matmul -------------------------------------------------------------------- */

struct mat_fixture {
	struct pt_kern_mat w;
	uint8_t *data;
	float *x;      /* [n_tok][cols] */
	uint8_t *scratch;
};

static int make_fixture(struct mat_fixture *f, enum pt_type t, uint64_t rows, uint64_t cols,
			uint64_t n_tok, size_t pad)
{
	uint64_t rb;
	if (pt_type_row_bytes(t, cols, &rb) != 0)
		return -1;
	f->w = (struct pt_kern_mat){ t, rows, cols, (size_t)rb + pad, NULL, PT_KERN_LAYOUT_ROWS };
	f->data = pt_malloc(rows * f->w.row_bytes);
	f->x = pt_mallocn(n_tok * cols, sizeof(float));
	f->scratch = pt_malloc(pt_kern_act_bytes(&f->w, n_tok));
	if (!f->data || !f->x || !f->scratch)
		return -1;
	for (uint64_t r = 0; r < rows; r++)
		random_row(t, f->data + r * f->w.row_bytes, cols);
	for (uint64_t i = 0; i < n_tok * cols; i++)
		f->x[i] = rndf();
	f->w.data = f->data;
	return 0;
}

static void free_fixture(struct mat_fixture *f)
{
	pt_free(f->data);
	pt_free(f->x);
	pt_free(f->scratch);
}

/* matvec equals the double reference; matmul row t equals matvec(X[t]) bit for bit; 1, 2 and
 * 3 threads give bit-identical results; at every level. */
static void check_products(enum pt_type t, uint64_t rows, uint64_t cols, pt_pool **pools)
{
	enum { NTOK = 9 }; /* >= 8: parallel activation quantization; 2 x dot4 + 1 */
	struct mat_fixture f;
	REQUIRE(make_fixture(&f, t, rows, cols, NTOK, t == PT_TYPE_F32 ? 0 : 3) == 0);
	float *y = pt_mallocn(rows, sizeof(float)), *ym = pt_mallocn(rows * NTOK, sizeof(float));
	float *y1 = pt_mallocn(rows * NTOK, sizeof(float));
	REQUIRE(y && ym && y1);
	const struct pt_kern_ops *ops = pt_kern_ops(t);
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, NULL) == PT_OK);
		for (int p = 0; p < 3; p++) {
			REQUIRE(pt_kern_matmul(&f.w, f.x, NTOK, ym, f.scratch, pools[p], NULL) == PT_OK);
			if (p == 0)
				memcpy(y1, ym, rows * NTOK * sizeof(float));
			else
				CHECK(memcmp(y1, ym, rows * NTOK * sizeof(float)) == 0);
		}
		for (int tok = 0; tok < NTOK; tok++) {
			REQUIRE(pt_kern_matvec(&f.w, f.x + tok * cols, y, f.scratch, pools[tok % 3],
					       NULL) == PT_OK);
			CHECK(memcmp(y, ym + tok * rows, rows * sizeof(float)) == 0);
		}
		/* last matvec was token 4: compare every row with the reference */
		pt_kern_quantize_row(ops->act_type, f.x + (NTOK - 1) * cols, f.scratch, cols);
		for (uint64_t r = 0; r < rows; r++) {
			double mag, e = ref_dot(t, ops->act_type, f.data + r * f.w.row_bytes,
						f.scratch, cols, &mag);
			if (!(fabs(y[r] - e) <= 2e-5 * mag + 1e-30))
				pt_test_fail(__FILE__, __LINE__, "%s %s row %llu: %.9g vs %.9g",
					     pt_type_name(t), pt_kern_level_name(lv),
					     (unsigned long long)r, y[r], e);
		}
	}
	pt_kern_set_level(pt_kern_level_max(), NULL);
	pt_free(y);
	pt_free(ym);
	pt_free(y1);
	free_fixture(&f);
}

PT_TEST(test_kern_matvec_matmul_thread_independent)
{
	pt_pool *pools[3] = { NULL, NULL, NULL };
	REQUIRE(pt_pool_create(1, &pools[0], NULL) == PT_OK);
	REQUIRE(pt_pool_create(2, &pools[1], NULL) == PT_OK);
	REQUIRE(pt_pool_create(3, &pools[2], NULL) == PT_OK);
	rng_state = 99;
	for (size_t ti = 0; ti < N_TYPES; ti++)
		check_products(all_types[ti], 67, 512, pools);
	check_products(PT_TYPE_Q4_K, 300, 768, pools);
	check_products(PT_TYPE_Q8_0, 1, 64, pools);
	/* 4-row tiles with a partial last tile and an odd block count; several weight blocks
	 * (and next-block prefetches) per task */
	check_products(PT_TYPE_Q5_0, 203, 288, pools);
	check_products(PT_TYPE_Q8_0, 70, 2048, pools);
	for (int p = 0; p < 3; p++)
		pt_pool_destroy(pools[p]);
}

PT_TEST(test_kern_matvec_rejects_bad_shapes)
{
	struct pt_error err = { 0 };
	float x[300] = { 0 }, y[4];
	uint8_t buf[4096] = { 0 };
	struct pt_kern_mat w = { PT_TYPE_Q4_K, 2, 300, 2000, buf, PT_KERN_LAYOUT_ROWS };
	CHECK_EQ_INT(pt_kern_matvec(&w, x, y, buf, NULL, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "multiple of the block size");
	pt_error_clear(&err);
	w.cols = 256;
	w.row_bytes = 143;
	CHECK_EQ_INT(pt_kern_matvec(&w, x, y, buf, NULL, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "row stride");
	pt_error_clear(&err);
	w.type = PT_TYPE_IQ2_XXS;
	CHECK_EQ_INT(pt_kern_matvec(&w, x, y, buf, NULL, &err), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "IQ2_XXS");
	CHECK_EQ_INT(pt_kern_act_bytes(&w, 1), 0);
	w.type = PT_TYPE_Q4_K;
	CHECK_EQ_INT(pt_kern_act_bytes(&w, 3), 3 * 292);
	w.type = PT_TYPE_Q4_1;
	CHECK_EQ_INT(pt_kern_act_bytes(&w, 1), 8 * 36);
}

/* ---- CPU levels ------------------------------------------------------------------------- */

PT_TEST(test_kern_particle_cpu_forces_level)
{
	struct pt_error err = { 0 };
	const char *old = getenv("PARTICLE_CPU");
	char saved[32] = "";
	if (old)
		snprintf(saved, sizeof saved, "%s", old);
	setenv("PARTICLE_CPU", "scalar", 1);
	CHECK_EQ_INT(pt_kern_init(&err), PT_OK);
	CHECK_EQ_INT(pt_kern_level(), PT_KERN_LEVEL_SCALAR);
	CHECK(pt_kern_ops(PT_TYPE_Q4_K)->level == PT_KERN_LEVEL_SCALAR);
	CHECK_CONTAINS(pt_kern_cpu_name(), "scalar (");
#if defined(PT_KERN_X86)
#define FIRST_SIMD "avx2"
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2) {
		setenv("PARTICLE_CPU", "avx2", 1);
		CHECK_EQ_INT(pt_kern_init(&err), PT_OK);
		CHECK_EQ_INT(pt_kern_level(), PT_KERN_LEVEL_AVX2);
		CHECK(pt_kern_ops(PT_TYPE_Q4_K)->level == PT_KERN_LEVEL_AVX2);
	}
#elif defined(PT_KERN_ARM64)
#define FIRST_SIMD "neon"
	static const char *const arm_names[] = { "neon", "dotprod", "i8mm" };
	for (int lv = PT_KERN_LEVEL_NEON; lv <= (int)pt_kern_level_max(); lv++) {
		setenv("PARTICLE_CPU", arm_names[lv - 1], 1);
		CHECK_EQ_INT(pt_kern_init(&err), PT_OK);
		CHECK_EQ_INT(pt_kern_level(), lv);
		CHECK_EQ_STR(pt_kern_level_name(pt_kern_level()), arm_names[lv - 1]);
		CHECK((int)pt_kern_ops(PT_TYPE_Q4_K)->level ==
		      (lv == PT_KERN_LEVEL_I8MM ? PT_KERN_LEVEL_DOTPROD : lv));
	}
#endif
	setenv("PARTICLE_CPU", "avx9", 1);
	CHECK_EQ_INT(pt_kern_init(&err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "PARTICLE_CPU=avx9");
	pt_error_clear(&err);
	/* a level above what the CPU offers is refused, whatever this machine has: cap it */
	enum pt_kern_level before = pt_kern_level();
	pt_kern_test_cap_level(PT_KERN_LEVEL_SCALAR);
#ifdef FIRST_SIMD
	setenv("PARTICLE_CPU", FIRST_SIMD, 1);
	CHECK_EQ_INT(pt_kern_init(&err), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "PARTICLE_CPU=" FIRST_SIMD ": this CPU supports at most scalar");
	CHECK_EQ_INT(pt_kern_level(), PT_KERN_LEVEL_SCALAR);
	CHECK(pt_kern_ops_at((enum pt_kern_level)1, PT_TYPE_Q4_K) == NULL);
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_kern_set_level((enum pt_kern_level)(PT_KERN_LEVEL_COUNT - 1), &err),
		     PT_E_UNSUPPORTED);
#endif
	CHECK_CONTAINS(err.msg, "not supported by this CPU");
	pt_error_clear(&err);
	pt_kern_test_cap_level(PT_KERN_LEVEL_COUNT);
	CHECK_EQ_INT(pt_kern_set_level(before, NULL), PT_OK);
	CHECK_EQ_INT(pt_kern_set_level(PT_KERN_LEVEL_COUNT, &err), PT_E_INVALID);
	if (old)
		setenv("PARTICLE_CPU", saved, 1);
	else
		unsetenv("PARTICLE_CPU");
	CHECK_EQ_INT(pt_kern_set_level(pt_kern_level_max(), NULL), PT_OK);
	/* every supported type has a dot at every level, and its partner is the type table's */
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++)
		for (size_t ti = 0; ti < N_TYPES; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv,
								     all_types[ti]);
			REQUIRE(o != NULL);
			CHECK(o->act_type == pt_type_traits(all_types[ti])->vec_dot);
			CHECK((int)o->level <= lv);
		}
	/* the detected level, where the runner knows the CPU (tools/test-arm64.sh: qemu -cpu max
	 * i8mm, neoverse-n1 dotprod, cortex-a53 neon) */
	const char *want_max = getenv("PT_TEST_KERN_MAX");
	if (want_max && *want_max)
		CHECK_EQ_STR(pt_kern_level_name(pt_kern_level_max()), want_max);
}

/* dot4 (one weight row, four activation rows) equals four dot calls bit for bit: random
 * scales, then the fp16 scale fields at the largest finite and the smallest subnormal value;
 * 1024 elements, 768 (an odd count of K-blocks) and 288 (an odd count of 32-blocks). */
static void extreme_scales(enum pt_type t, uint8_t *row, size_t n, uint16_t h)
{
	const struct pt_type_traits *tr = pt_type_traits(t);
	for (size_t b = 0; b < n / tr->block_elems; b++)
		for (const int *f = fp16_fields(t); *f >= 0; f++)
			put16(row + b * tr->block_bytes + *f, h);
}

PT_TEST(test_kern_dot4_matches_dot)
{
	rng_state = 4242;
	enum { N = 1024 };
	static const size_t lens[] = { N, 768, 288 };
	static const uint16_t ext[] = { 0, 0x7BFF, 0x0001 };
	static uint8_t w[N * 4], a[4][N * 4]; /* F32 rows are the largest */
	static float x[N];
	int seen = 0;
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		for (size_t ti = 0; ti < N_TYPES; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, all_types[ti]);
			if (!o->dot4)
				continue;
			seen++;
			for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
			for (size_t e = 0; e < sizeof ext / sizeof ext[0]; e++) {
				const size_t n = lens[li];
				if (n % pt_type_traits(o->type)->block_elems != 0)
					continue;
				random_row(o->type, w, n);
				if (ext[e])
					extreme_scales(o->type, w, n, ext[e]);
				for (int k = 0; k < 4; k++) {
					for (size_t i = 0; i < n; i++)
						x[i] = rndf();
					pt_kern_quantize_row(o->act_type, x, a[k], n);
				}
				float out[4];
				o->dot4(n, w, a[0], sizeof a[0], out);
				for (int k = 0; k < 4; k++)
					if (memcmp(&out[k], &(float){ o->dot(n, w, a[k]) }, 4) != 0)
						pt_test_fail(__FILE__, __LINE__, "%s %s n %zu scale %04x dot4[%d] differs",
							     pt_type_name(o->type), pt_kern_level_name(lv), n,
							     ext[e], k);
			}
		}
	}
#if defined(PT_KERN_X86)
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2)
		CHECK(seen >= 3);
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512)
		for (size_t ti = 0; ti < N_TYPES; ti++) /* every quantized type has an AVX-512 dot4 */
			CHECK(all_types[ti] == PT_TYPE_IQ4_XS ||
			      pt_kern_ops_at(PT_KERN_LEVEL_AVX512, all_types[ti])->dot4 != NULL);
#elif defined(PT_KERN_ARM64)
	/* every type has a NEON and an SDOT dot4 (the i8mm level runs the SDOT one), so the loop
	 * above covered them at every level the CPU has */
	for (int lv = PT_KERN_LEVEL_NEON; lv <= (int)pt_kern_level_max(); lv++)
		for (size_t ti = 0; ti < N_TYPES; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, all_types[ti]);
			CHECK(o->dot4 != NULL && o->level == (lv == PT_KERN_LEVEL_I8MM ? PT_KERN_LEVEL_DOTPROD
											  : (enum pt_kern_level)lv));
		}
	if (pt_kern_level_max() >= PT_KERN_LEVEL_NEON)
		CHECK(seen >= (int)N_TYPES);
#else
	(void)seen;
#endif
}

/* The register tile equals dot bit for bit for every shape it takes (1..rows weight rows x
 * 1..toks tokens, with row and token strides), at every level that has one. */
PT_TEST(test_kern_tile_matches_dot)
{
	rng_state = 5151;
	enum { N = 768, MAXR = 8, MAXT = 8, WB = N / 256 * 292 + 16 };
	static const size_t lens[] = { N, 288 }; /* 288: an odd count of 32-blocks */
	static uint8_t w[MAXR][WB], a[MAXT][WB];
	static float x[N];
	int seen = 0;
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		for (size_t ti = 0; ti < N_TYPES; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, all_types[ti]);
			if (!o->tile.fn)
				continue;
			seen++;
			REQUIRE(o->tile.rows >= 1 && o->tile.rows <= MAXR);
			REQUIRE(o->tile.toks >= 1 && o->tile.toks <= MAXT);
			for (int r = 0; r < MAXR; r++)
				random_row(o->type, w[r], N);
			for (int t = 0; t < MAXT; t++) {
				for (int i = 0; i < N; i++)
					x[i] = rndf();
				pt_kern_quantize_row(o->act_type, x, a[t], N);
			}
			for (size_t li = 0; li < 2; li++)
			for (uint32_t nr = 1; nr <= o->tile.rows; nr++)
				for (uint32_t nt = 1; nt <= o->tile.toks; nt++) {
					const size_t n = lens[li];
					float y[MAXT * MAXR];
					if (n % pt_type_traits(o->type)->block_elems != 0)
						continue;
					memset(y, 0xff, sizeof y);
					o->tile.fn(n, w[0], WB, nr, a[0], WB, nt, y, MAXR);
					for (uint32_t t = 0; t < MAXT; t++)
						for (uint32_t r = 0; r < MAXR; r++) {
							uint32_t bits;
							memcpy(&bits, &y[t * MAXR + r], 4);
							if (t >= nt || r >= nr) { /* outside the tile: untouched */
								CHECK(bits == 0xffffffffu);
								continue;
							}
							float d = o->dot(n, w[r], a[t]);
							if (memcmp(&d, &y[t * MAXR + r], 4) != 0)
								pt_test_fail(__FILE__, __LINE__,
									     "%s %s n %zu tile %ux%u [%u][%u] differs",
									     pt_type_name(o->type),
									     pt_kern_level_name(lv), n, nr, nt, r, t);
						}
				}
			/* the prepared tile (full row tiles, prepared once): equal to dot as well */
			for (size_t li = 0; o->tile.prep && li < 2; li++) {
				const size_t n = lens[li];
				static uint8_t prepared[N / 64 * 4096] __attribute__((aligned(64)));
				const size_t bytes = (n + o->tile.prep_cols - 1) / o->tile.prep_cols * o->tile.prep_unit;
				if (n % pt_type_traits(o->type)->block_elems != 0)
					continue;
				REQUIRE(o->tile.prepped != NULL && bytes <= sizeof prepared);
				memset(prepared, 0xA5, sizeof prepared);
				o->tile.prep(n, w[0], WB, prepared);
				for (size_t i = bytes; i < sizeof prepared; i++) /* writes only its bytes */
					if (prepared[i] != 0xA5) {
						pt_test_fail(__FILE__, __LINE__, "%s prep wrote past %zu bytes",
							     pt_type_name(o->type), bytes);
						break;
					}
				for (uint32_t nt = 1; nt <= o->tile.toks; nt++) {
					float y[MAXT * MAXR];
					memset(y, 0xff, sizeof y);
					o->tile.prepped(n, prepared, a[0], WB, nt, y, MAXR);
					for (uint32_t t = 0; t < MAXT; t++)
						for (uint32_t r = 0; r < MAXR; r++) {
							uint32_t bits;
							memcpy(&bits, &y[t * MAXR + r], 4);
							if (t >= nt || r >= o->tile.rows) {
								CHECK(bits == 0xffffffffu);
								continue;
							}
							float d = o->dot(n, w[r], a[t]);
							if (memcmp(&d, &y[t * MAXR + r], 4) != 0)
								pt_test_fail(__FILE__, __LINE__,
									     "%s %s n %zu prepared tile x%u [%u][%u] differs",
									     pt_type_name(o->type),
									     pt_kern_level_name(lv), n, nt, r, t);
						}
				}
			}
		}
	}
#if defined(PT_KERN_X86)
	/* AVX-512 prefill tiles prepare their rows once per weight block */
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512) {
		static const enum pt_type prepared_types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q5_0,
							       PT_TYPE_Q8_0 };
		for (size_t k = 0; k < sizeof prepared_types / sizeof prepared_types[0]; k++)
			CHECK(pt_kern_ops_at(PT_KERN_LEVEL_AVX512, prepared_types[k])->tile.prep != NULL);
	}
#endif
#if defined(PT_KERN_ARM64)
	/* the prefill types have a NEON and an SDOT tile and an SMMLA one at the i8mm level (qemu
	 * -cpu max; -cpu cortex-a53 runs the NEON ones), so the loop above covered them */
	{
		static const enum pt_type tiled[] = { PT_TYPE_Q8_0, PT_TYPE_Q4_0, PT_TYPE_Q5_0,
						      PT_TYPE_Q4_K, PT_TYPE_Q6_K };
		for (int lv = PT_KERN_LEVEL_NEON; lv <= (int)pt_kern_level_max(); lv++)
			for (size_t k = 0; k < sizeof tiled / sizeof tiled[0]; k++) {
				const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, tiled[k]);
				CHECK(o->tile.fn != NULL && o->tile.rows == 2 && o->tile.toks == 4);
				if (lv == PT_KERN_LEVEL_I8MM) /* the SMMLA tile, not the SDOT one */
					CHECK(o->tile.fn == pt_kern_tile_i8mm[tiled[k]].fn);
			}
		if (pt_kern_level_max() >= PT_KERN_LEVEL_NEON)
			CHECK(seen >= 5 * (int)pt_kern_level_max());
	}
#endif
#if defined(PT_KERN_X86)
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512)
		CHECK(seen >= 3);
	/* the prefill types have an AVX2 tile (AVX2-only CPUs), so the loop above covered them */
	if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2) {
		static const enum pt_type tiled[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
						      PT_TYPE_Q5_0 };
		for (size_t k = 0; k < sizeof tiled / sizeof tiled[0]; k++) {
			const struct pt_kern_ops *o = pt_kern_ops_at(PT_KERN_LEVEL_AVX2, tiled[k]);
			CHECK(o->level == PT_KERN_LEVEL_AVX2 && o->tile.fn != NULL);
		}
	}
#elif !defined(PT_KERN_ARM64)
	(void)seen; /* no register tiles outside x86-64 and aarch64 */
#endif
}

/* Tiled matmul at every tile edge: odd and even row counts, 1..17 tokens (partial token
 * groups, partial row tiles at task ends), 1/2/3 threads: every row t equals matvec(X[t]). */
PT_TEST(test_kern_matmul_tile_edges)
{
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q5_K, PT_TYPE_Q8_0,
					      PT_TYPE_Q5_0 };
	static const uint64_t rows_list[] = { 1, 2, 3, 37, 50 };
	enum { MAXTOK = 17 };
	pt_pool *pools[3] = { NULL, NULL, NULL };
	for (int p = 0; p < 3; p++)
		REQUIRE(pt_pool_create((uint32_t)p + 1, &pools[p], NULL) == PT_OK);
	rng_state = 6262;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
		for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
			const uint64_t rows = rows_list[ri];
			/* 32-blocks: an odd block count (9) as in gemma4's 288-wide expert down */
			const uint64_t COLS = pt_type_traits(types[ti])->block_elems == 32 ? 288 : 512;
			struct mat_fixture f;
			REQUIRE(make_fixture(&f, types[ti], rows, COLS, MAXTOK, 5) == 0);
			float *ym = pt_mallocn(rows * MAXTOK, sizeof(float));
			float *yv = pt_mallocn(rows, sizeof(float));
			REQUIRE(ym && yv);
			for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
				REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, NULL) == PT_OK);
				for (uint64_t nt = 1; nt <= MAXTOK; nt++) {
					pt_pool *pool = pools[nt % 3];
					REQUIRE(pt_kern_matmul(&f.w, f.x, nt, ym, f.scratch, pool, NULL) == PT_OK);
					for (uint64_t t = 0; t < nt; t++) {
						REQUIRE(pt_kern_matvec(&f.w, f.x + t * COLS, yv, f.scratch,
								       pools[(nt + t) % 3], NULL) == PT_OK);
						if (memcmp(yv, ym + t * rows, rows * sizeof(float)) != 0)
							pt_test_fail(__FILE__, __LINE__,
								     "%s %s rows %llu tokens %llu: row %llu differs",
								     pt_type_name(types[ti]), pt_kern_level_name(lv),
								     (unsigned long long)rows, (unsigned long long)nt,
								     (unsigned long long)t);
					}
				}
			}
			pt_kern_set_level(pt_kern_level_max(), NULL);
			pt_free(ym);
			pt_free(yv);
			free_fixture(&f);
		}
	for (int p = 0; p < 3; p++)
		pt_pool_destroy(pools[p]);
}

/* Matmul where the prepared tiles start and stop: 7 tokens (below the threshold: rows read as
 * stored), 8 and 13 (prepared), rows leaving a partial last tile, one row tile per block
 * (Q4_K 17,920 columns: 49 KB prepared a row pair; 46,592: 128,128 bytes, past even the
 * wide blocks' 120 KiB; Q5_0 16,352: exactly the 128 KiB buffer) and rows too wide for the
 * preparation buffer (Q4_K 48,384 columns: 133,056 bytes; Q5_0 16,416: 131,584): every row
 * equals matvec. */
PT_TEST(test_kern_matmul_prepared_edges)
{
	static const struct { enum pt_type type; uint64_t cols; } cases[] = {
		{ PT_TYPE_Q4_K, 512 }, { PT_TYPE_Q4_K, 17920 }, { PT_TYPE_Q4_K, 24064 },
		{ PT_TYPE_Q4_K, 46592 }, { PT_TYPE_Q4_K, 48384 }, { PT_TYPE_Q8_0, 704 },
		{ PT_TYPE_Q5_0, 288 }, { PT_TYPE_Q5_0, 16384 - 32 }, { PT_TYPE_Q5_0, 16384 + 32 },
	};
	static const uint64_t toks[] = { 7, 8, 13 };
	enum { ROWS = 43, MAXTOK = 13 };
	pt_pool *pool = NULL;
	REQUIRE(pt_pool_create(2, &pool, NULL) == PT_OK);
	rng_state = 8484;
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const uint64_t cols = cases[c].cols;
		struct mat_fixture f;
		REQUIRE(make_fixture(&f, cases[c].type, ROWS, cols, MAXTOK, 5) == 0);
		float *ym = pt_mallocn((size_t)ROWS * MAXTOK, sizeof(float));
		float *yv = pt_mallocn(ROWS, sizeof(float));
		REQUIRE(ym && yv);
		for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
			REQUIRE(pt_kern_matmul(&f.w, f.x, toks[k], ym, f.scratch, pool, NULL) == PT_OK);
			for (uint64_t t = 0; t < toks[k]; t++) {
				REQUIRE(pt_kern_matvec(&f.w, f.x + t * cols, yv, f.scratch, pool, NULL) == PT_OK);
				if (memcmp(yv, ym + t * ROWS, ROWS * sizeof(float)) != 0)
					pt_test_fail(__FILE__, __LINE__, "%s cols %llu tokens %llu: row %llu differs",
						     pt_type_name(cases[c].type), (unsigned long long)cols,
						     (unsigned long long)toks[k], (unsigned long long)t);
			}
		}
		pt_free(ym);
		pt_free(yv);
		free_fixture(&f);
	}
	pt_pool_destroy(pool);
}

/* Products over more tokens than the caches keep beside a block of prepared rows (activation
 * rows past 512 KiB: matvec.c's wide blocks of ~120 KiB, several a task and a partial one,
 * and a partial last token group): every matmul row equals matvec bit for bit. */
PT_TEST(test_kern_matmul_wide_blocks)
{
	static const struct { enum pt_type type; uint64_t cols, toks; } cases[] = {
		{ PT_TYPE_Q4_K, 4096, 118 }, { PT_TYPE_Q4_K, 2816, 171 }, { PT_TYPE_Q6_K, 2048, 250 },
		{ PT_TYPE_Q8_0, 2112, 245 }, { PT_TYPE_Q5_0, 2048, 263 },
	};
	enum { ROWS = 203 };
	pt_pool *pool = NULL;
	REQUIRE(pt_pool_create(2, &pool, NULL) == PT_OK);
	rng_state = 9191;
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const uint64_t cols = cases[c].cols, nt = cases[c].toks;
		/* the case must reach the wide blocks */
		const struct pt_kern_mat probe = { cases[c].type, ROWS, cols, 0, NULL, PT_KERN_LAYOUT_ROWS };
		CHECK(pt_kern_act_bytes(&probe, nt) > (512u << 10));
		struct mat_fixture f;
		REQUIRE(make_fixture(&f, cases[c].type, ROWS, cols, (uint32_t)nt, 5) == 0);
		float *ym = pt_mallocn((size_t)ROWS * nt, sizeof(float));
		float *yv = pt_mallocn(ROWS, sizeof(float));
		REQUIRE(ym && yv);
		REQUIRE(pt_kern_matmul(&f.w, f.x, nt, ym, f.scratch, pool, NULL) == PT_OK);
		size_t bad = 0;
		for (uint64_t t = 0; t < nt; t++) {
			REQUIRE(pt_kern_matvec(&f.w, f.x + t * cols, yv, f.scratch, pool, NULL) == PT_OK);
			bad += memcmp(yv, ym + t * ROWS, ROWS * sizeof(float)) != 0;
		}
		if (bad)
			pt_test_fail(__FILE__, __LINE__, "%s cols %llu: %zu of %llu token rows differ",
				     pt_type_name(cases[c].type), (unsigned long long)cols, bad,
				     (unsigned long long)nt);
		pt_free(ym);
		pt_free(yv);
		free_fixture(&f);
	}
	pt_pool_destroy(pool);
}

/* Q4_K / Q6_K products at the token counts a routed expert sees in a 512-token prefill of the
 * full shapes (16-64, and partial token groups), 2048 columns (several weight blocks per
 * task), rows not a multiple of the tile, 1 and 2 threads, every level: every matmul row
 * equals matvec bit for bit. */
PT_TEST(test_kern_matmul_moe_token_counts)
{
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K };
	static const uint64_t toks[] = { 5, 16, 21, 24, 33, 64 };
	enum { ROWS = 45, COLS = 2048, MAXTOK = 64 };
	pt_pool *pools[2] = { NULL, NULL };
	for (int p = 0; p < 2; p++)
		REQUIRE(pt_pool_create((uint32_t)p + 1, &pools[p], NULL) == PT_OK);
	rng_state = 7373;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		struct mat_fixture f;
		REQUIRE(make_fixture(&f, types[ti], ROWS, COLS, MAXTOK, 5) == 0);
		float *ym = pt_mallocn((size_t)ROWS * MAXTOK, sizeof(float));
		float *yv = pt_mallocn(ROWS, sizeof(float));
		REQUIRE(ym && yv);
		for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
			REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, NULL) == PT_OK);
			for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
				const uint64_t nt = toks[k];
				REQUIRE(pt_kern_matmul(&f.w, f.x, nt, ym, f.scratch, pools[k % 2], NULL) == PT_OK);
				for (uint64_t t = 0; t < nt; t++) {
					REQUIRE(pt_kern_matvec(&f.w, f.x + t * COLS, yv, f.scratch, pools[0],
							       NULL) == PT_OK);
					if (memcmp(yv, ym + t * ROWS, ROWS * sizeof(float)) != 0)
						pt_test_fail(__FILE__, __LINE__,
							     "%s %s tokens %llu: row %llu differs",
							     pt_type_name(types[ti]), pt_kern_level_name(lv),
							     (unsigned long long)nt, (unsigned long long)t);
				}
			}
		}
		pt_kern_set_level(pt_kern_level_max(), NULL);
		pt_free(ym);
		pt_free(yv);
		free_fixture(&f);
	}
	for (int p = 0; p < 2; p++)
		pt_pool_destroy(pools[p]);
}

/* Against the quant module as the plain reference: weights made by its quantizers from
 * float rows, kernel(w, quant(x)) == sum dequant(w) * dequant(quant(x)) up to float rounding
 * (1e-5 of sum |w a|).  For the Q8_1 partners the kernels use the stored fp16 block sum s for
 * the min term, as ggml does; the reference adds that exact difference m * (s - dy * sum q). */
static double act_value(enum pt_type at, const uint8_t *a, size_t i)
{
	return deq(at, a, i); /* F32/F16/BF16/Q8_1/Q8_K decoders above; Q8_0 via deq_32 */
}

PT_TEST(test_kern_dot_matches_quant_dequant)
{
	enum { N = 1024 };
	static float xw[N], xa[N], wf[N];
	static uint8_t w[N * 4], a[N * 4];
	rng_state = 31337;
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum pt_type t = all_types[ti];
		struct pt_error err = { 0 };
		for (int i = 0; i < N; i++) {
			xw[i] = rndf() * (i % 97 == 0 ? 8.0f : 1.0f);
			xa[i] = rndf();
		}
		REQUIRE(pt_quant_quantize_row(t, xw, w, N, &err) == PT_OK);
		REQUIRE(pt_quant_dequant_row(t, w, wf, N, &err) == PT_OK);
		const struct pt_kern_ops *o = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
		pt_kern_quantize_row(o->act_type, xa, a, N);
		double sum = 0, mag = 0;
		for (int i = 0; i < N; i++) {
			double p = (double)wf[i] * act_value(o->act_type, a, (size_t)i);
			sum += p;
			mag += fabs(p);
		}
		if (o->act_type == PT_TYPE_Q8_1) {
			/* kernel: (d*dy)*sumq + m*s with s = fp16(dy * sum qy): add m*(s - dy*sum qy) */
			for (int b = 0; b < N / 32; b++) {
				const uint8_t *wb = w + b * pt_type_traits(t)->block_bytes, *ab = a + b * 36;
				int qs = 0;
				for (int j = 0; j < 32; j++)
					qs += (int8_t)ab[4 + j];
				double m = h2d(wb + 2), sv = h2d(ab + 2);
				sum += m * (sv - h2d(ab) * qs);
			}
		}
		for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
			float v = pt_kern_ops_at((enum pt_kern_level)lv, t)->dot(N, w, a);
			if (!(fabs(v - sum) <= 1e-5 * mag + 1e-30))
				pt_test_fail(__FILE__, __LINE__, "%s %s: %.9g vs dequant %.9g (mag %g)",
					     pt_type_name(t), pt_kern_level_name(lv), v, sum, mag);
		}
	}
}

PT_TEST(test_kern_inline_conversions_match_types)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float a = kern_fp16_to_f32((uint16_t)h), b = pt_fp16_to_f32((uint16_t)h);
		if (memcmp(&a, &b, 4) != 0)
			pt_test_fail(__FILE__, __LINE__, "fp16 0x%04x: %a vs %a", h, a, b);
	}
	for (int e = 0; e < 256; e++) {
		float a = kern_e8m0_half((uint8_t)e), b = pt_e8m0_to_f32_half((uint8_t)e);
		CHECK(memcmp(&a, &b, 4) == 0);
	}
	CHECK(kern_e8m0_half(128) == 1.0f);
	CHECK(kern_e8m0_half(0) == 0x1p-128f);
}
