/* test_kern_set.c - pt_kern_matvec_set / pt_kern_glu_set (src/kern/matvec_set.c): a set of
 * products in one dispatch is bit-identical to the products run one by one with
 * pt_kern_matvec_q (and the activation applied over whole rows), at every level and at 1, 2
 * and 3 threads; bad sets are refused before any work. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/quant.h"
#include "test.h"
#include "util/alloc.h"

static uint32_t seed = 7;

static float rndf(void)
{
	seed = seed * 1664525u + 1013904223u;
	return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A rows x cols matrix of type t quantized from random floats (rows padded by pad bytes). */
static int make_mat(struct pt_kern_mat *w, enum pt_type t, uint64_t rows, uint64_t cols,
		    size_t pad)
{
	uint64_t rb;
	float *x = pt_mallocn(cols, sizeof(float));
	if (!x || pt_type_row_bytes(t, cols, &rb) != 0)
		return -1;
	uint8_t *d = pt_malloc(rows * (rb + pad));
	if (!d) {
		pt_free(x);
		return -1;
	}
	for (uint64_t r = 0; r < rows; r++) {
		for (uint64_t i = 0; i < cols; i++)
			x[i] = rndf();
		if (pt_quant_quantize_row(t, x, d + r * (rb + pad), cols, NULL) != PT_OK)
			return -1;
	}
	pt_free(x);
	*w = (struct pt_kern_mat){ t, rows, cols, (size_t)(rb + pad), d, PT_KERN_LAYOUT_ROWS };
	return 0;
}

static void *quantized(const struct pt_kern_mat *w, const float *x)
{
	void *q = pt_malloc(pt_kern_act_bytes(w, 1));
	if (q)
		pt_kern_quantize_row(pt_kern_ops(w->type)->act_type, x, q, w->cols);
	return q;
}

/* Element-wise and not symmetric in its arguments, so a swapped gate/up shows. */
static void test_act(float *out, const float *g, const float *u, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = g[i] * u[i] + 0.5f * g[i] - u[i] * u[i];
}

enum { NP = 5, COLS = 512 };

static const enum pt_type types[NP] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0, PT_TYPE_F32,
					PT_TYPE_Q5_0 };
static const uint64_t rows[NP] = { 67, 300, 5, 16, 129 };

PT_TEST(test_kern_set_matvec_equals_one_by_one)
{
	pt_pool *pools[3] = { NULL, NULL, NULL };
	struct pt_kern_mv set[NP];
	float x[COLS], *ref[NP];
	void *xq[NP];
	for (int i = 0; i < COLS; i++)
		x[i] = rndf();
	for (int p = 0; p < 3; p++)
		REQUIRE(pt_pool_create((uint32_t)p + 1, &pools[p], NULL) == PT_OK);
	for (int i = 0; i < NP; i++) {
		REQUIRE(make_mat(&set[i].w, types[i], rows[i], COLS, i == 1 ? 6 : 0) == 0);
		xq[i] = types[i] == PT_TYPE_F32 ? NULL : quantized(&set[i].w, x);
		set[i].xq = xq[i] ? xq[i] : (const void *)x;
		ref[i] = pt_mallocn(rows[i], sizeof(float));
		set[i].y = pt_mallocn(rows[i], sizeof(float));
		REQUIRE(ref[i] && set[i].y);
	}
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, NULL) == PT_OK);
		for (int i = 0; i < NP; i++)
			REQUIRE(pt_kern_matvec_q(&set[i].w, set[i].xq, ref[i], NULL, NULL) == PT_OK);
		for (int p = 0; p < 3; p++) {
			for (int i = 0; i < NP; i++)
				memset(set[i].y, 0xff, rows[i] * sizeof(float));
			REQUIRE(pt_kern_matvec_set(set, NP, pools[p], NULL) == PT_OK);
			for (int i = 0; i < NP; i++)
				CHECK(memcmp(set[i].y, ref[i], rows[i] * sizeof(float)) == 0);
		}
	}
	pt_kern_set_level(pt_kern_level_max(), NULL);
	for (int i = 0; i < NP; i++) {
		pt_free((void *)set[i].w.data);
		pt_free(xq[i]);
		pt_free(ref[i]);
		pt_free(set[i].y);
	}
	for (int p = 0; p < 3; p++)
		pt_pool_destroy(pools[p]);
}

/* Entry 0: gate Q4_K / up Q6_K (one partner format); entry 1: gate Q8_0 / up Q4_K (two
 * formats); entry 2: a fused Q4_K gate_up of 2 x 37 rows; entry 3: F32 / Q5_0. */
PT_TEST(test_kern_set_glu_equals_two_matvecs_and_act)
{
	enum { NG = 4 };
	static const enum pt_type gt[NG] = { PT_TYPE_Q4_K, PT_TYPE_Q8_0, PT_TYPE_Q4_K, PT_TYPE_F32 };
	static const enum pt_type ut[NG] = { PT_TYPE_Q6_K, PT_TYPE_Q4_K, PT_TYPE_Q4_K, PT_TYPE_Q5_0 };
	static const uint64_t nf[NG] = { 200, 67, 37, 96 };
	pt_pool *pools[3] = { NULL, NULL, NULL };
	struct pt_kern_glu set[NG] = { 0 };
	float x[COLS], *ref[NG], *tmp = pt_mallocn(2 * 200, sizeof(float));
	void *xg[NG], *xu[NG];
	REQUIRE(tmp);
	for (int i = 0; i < COLS; i++)
		x[i] = rndf();
	for (int p = 0; p < 3; p++)
		REQUIRE(pt_pool_create((uint32_t)p + 1, &pools[p], NULL) == PT_OK);
	for (int i = 0; i < NG; i++) {
		const bool fused = i == 2;
		REQUIRE(make_mat(&set[i].gate, gt[i], fused ? 2 * nf[i] : nf[i], COLS, 0) == 0);
		set[i].up = (struct pt_kern_mat){ 0 };
		if (!fused)
			REQUIRE(make_mat(&set[i].up, ut[i], nf[i], COLS, 2) == 0);
		xg[i] = gt[i] == PT_TYPE_F32 ? NULL : quantized(&set[i].gate, x);
		xu[i] = fused ? NULL : quantized(&set[i].up, x);
		set[i].xq = xg[i] ? xg[i] : (const void *)x;
		set[i].xq_up = xu[i];
		ref[i] = pt_mallocn(nf[i], sizeof(float));
		set[i].y = pt_mallocn(nf[i], sizeof(float));
		REQUIRE(ref[i] && set[i].y);
	}
	for (int lv = 0; lv <= (int)pt_kern_level_max(); lv++) {
		REQUIRE(pt_kern_set_level((enum pt_kern_level)lv, NULL) == PT_OK);
		for (int i = 0; i < NG; i++) {
			REQUIRE(pt_kern_matvec_q(&set[i].gate, set[i].xq, tmp, NULL, NULL) == PT_OK);
			if (i != 2)
				REQUIRE(pt_kern_matvec_q(&set[i].up, set[i].xq_up, tmp + nf[i], NULL,
							 NULL) == PT_OK);
			test_act(ref[i], tmp, tmp + nf[i], (int)nf[i]);
		}
		for (int p = 0; p < 3; p++) {
			for (int i = 0; i < NG; i++)
				memset(set[i].y, 0xff, nf[i] * sizeof(float));
			REQUIRE(pt_kern_glu_set(set, NG, test_act, pools[p], NULL) == PT_OK);
			for (int i = 0; i < NG; i++)
				CHECK(memcmp(set[i].y, ref[i], nf[i] * sizeof(float)) == 0);
		}
	}
	pt_kern_set_level(pt_kern_level_max(), NULL);
	for (int i = 0; i < NG; i++) {
		pt_free((void *)set[i].gate.data);
		pt_free((void *)set[i].up.data);
		pt_free(xg[i]);
		pt_free(xu[i]);
		pt_free(ref[i]);
		pt_free(set[i].y);
	}
	pt_free(tmp);
	for (int p = 0; p < 3; p++)
		pt_pool_destroy(pools[p]);
}

PT_TEST(test_kern_set_rejects_bad_sets)
{
	struct pt_kern_mv mv[PT_KERN_SET_MAX + 1];
	struct pt_kern_glu g;
	struct pt_error err = { 0 };
	float y[64] = { 0 }, x[256] = { 0 };
	uint8_t w[64 * 144] = { 0 };
	for (int i = 0; i <= PT_KERN_SET_MAX; i++)
		mv[i] = (struct pt_kern_mv){ { PT_TYPE_Q4_K, 1, 256, 144, w, PT_KERN_LAYOUT_ROWS }, x, y };
	y[0] = 42.0f; /* a product that ran would write 0 here */
	CHECK_EQ_INT(pt_kern_matvec_set(mv, PT_KERN_SET_MAX + 1, NULL, &err), PT_E_INVALID);
	mv[1].w.type = PT_TYPE_IQ2_XXS; /* no kernel */
	CHECK_EQ_INT(pt_kern_matvec_set(mv, 2, NULL, &err), PT_E_UNSUPPORTED);
	mv[1].w = (struct pt_kern_mat){ PT_TYPE_Q4_K, 1, 256, 100, w, PT_KERN_LAYOUT_ROWS }; /* stride < row */
	CHECK_EQ_INT(pt_kern_matvec_set(mv, 2, NULL, &err), PT_E_INVALID);
	CHECK(y[0] == 42.0f); /* nothing ran: the checks come first */
	g = (struct pt_kern_glu){ { PT_TYPE_Q4_K, 4, 256, 144, w, PT_KERN_LAYOUT_ROWS },
				  { PT_TYPE_Q4_K, 3, 256, 144, w, PT_KERN_LAYOUT_ROWS },
				  x, x, y, NULL, NULL };
	CHECK_EQ_INT(pt_kern_glu_set(&g, 1, test_act, NULL, &err), PT_E_INVALID);
	g.up.data = NULL;
	g.gate.rows = 5; /* fused gate_up needs an even row count */
	CHECK_EQ_INT(pt_kern_glu_set(&g, 1, test_act, NULL, &err), PT_E_INVALID);
	CHECK(y[0] == 42.0f);
}
