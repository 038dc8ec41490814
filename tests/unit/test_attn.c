/* test_attn.c - the attention inner loops give bit-identical results at every CPU level
 * (the AVX2/AVX-512 twins must reproduce the scalar FMA chains, softmax weights, exponential
 * and F16 rounding exactly), and the attention exponential is accurate. */
#include <math.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "test.h"

#define BLK PT_KERN_ATTN_BLOCK
#define LD 64
#define MAX_Q 70 /* past 16 queries the x86 kernels widen keys and values to F32 once a call */

/* the query counts tried: 1-9 (single tiles and their remainders), then calls of many
 * queries (a prompt's tile of rows x a GQA group) with every remainder of 6 and 4 */
static uint32_t q_count(uint32_t t)
{
	static const uint32_t many[] = { 16, 23, 64, 70 };
	return t < 9 ? t + 1 : many[(t - 9) % 4];
}

static uint32_t rng_next(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static float rnd(uint32_t *s, float scale)
{
	return ((float)rng_next(s) / 16777216.0f * 2.0f - 1.0f) * scale;
}

static int same_bits(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i])))
			return 0;
	return 1;
}

/* head dims of the three archs (64 qwen3moe/bailingmoe2, 128/256/512 gemma4) plus odd ones */
static const uint32_t dims[] = { 1, 3, 8, 17, 64, 128, 203, 256, 512 };

PT_TEST(test_attn_dots_levels_bit_identical)
{
	const struct pt_kern_attn_ops *ref = pt_kern_attn_ops_at(PT_KERN_LEVEL_SCALAR);
	REQUIRE(ref != NULL);
	static uint16_t kb[4][512 * BLK];
	static float q[MAX_Q][512], a[MAX_Q * LD], b[MAX_Q * LD];
	uint32_t seed = 7;
	for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue; /* the CPU lacks the level */
		for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
			const uint32_t n = dims[di];
			for (int trial = 0; trial < 52; trial++) { /* every n_q x n_blk */
				const float scale = trial % 5 ? 4.0f : 3000.0f; /* large: F16 inf */
				for (int bb = 0; bb < 4; bb++)
					for (uint32_t i = 0; i < n * BLK; i++)
						kb[bb][i] = pt_f32_to_fp16(rnd(&seed, scale));
				const uint32_t n_q = q_count((uint32_t)trial % 13),
					       n_blk = 1 + trial / 13;
				for (uint32_t i = 0; i < n_q; i++)
					for (uint32_t d = 0; d < n; d++)
						q[i][d] = rnd(&seed, 2.0f);
				memset(a, 0, sizeof a);
				memset(b, 0, sizeof b);
				ref->dots(kb[0], 512 * BLK, n_blk, q[0], 512, n_q, n, a, LD, NULL);
				/* the prefetch hint (the next call's blocks) never changes a result */
				ops->dots(kb[0], 512 * BLK, n_blk, q[0], 512, n_q, n, b, LD,
					  trial % 2 ? kb[1] : NULL);
				CHECK(same_bits(a, b, MAX_Q * LD));
			}
		}
	}
}

/* Scores with ties, -inf, NaN and large jumps so the running max changes often. */
static void score_fill(uint32_t *seed, float *d, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		const uint32_t r = rng_next(seed) % 16;
		d[j] = r == 0 ? -INFINITY : r == 1 ? NAN : r == 2 ? 0.0f : r == 3 ? -0.0f
			: r < 6 ? rnd(seed, 80.0f) : rnd(seed, 4.0f);
		if (r == 6 && j > 0)
			d[j] = d[j - 1]; /* a tie */
	}
}

PT_TEST(test_attn_softmax_levels_bit_identical)
{
	const struct pt_kern_attn_ops *ref = pt_kern_attn_ops_at(PT_KERN_LEVEL_SCALAR);
	static float dots[MAX_Q * LD], ms_a[MAX_Q * LD], vs_a[MAX_Q * LD], ms_b[MAX_Q * LD],
		vs_b[MAX_Q * LD];
	uint32_t seed = 11;
	for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		for (uint32_t n = 1; n <= 2 * LD; n++) {
			/* first pass: 1-5 queries, most maxima rising; second: the prompt's calls of
			 * many queries (q_count), each query either still rising (-inf), settled (its
			 * max above every score: no key rises, every ms 1) or in between */
			const bool many = n > LD;
			const uint32_t nk = many ? n - LD : n;
			const uint32_t n_q = many ? q_count(9 + nk % 4) : 1 + n % 5;
			float ma[MAX_Q], sa[MAX_Q], mb[MAX_Q], sb[MAX_Q];
			for (uint32_t i = 0; i < n_q; i++) {
				const uint32_t kind = many ? (i + nk) % 7 : i == 0 ? 0 : 1;
				ma[i] = mb[i] = kind == 0 ? -INFINITY
						: kind < 4 ? rnd(&seed, 3.0f) : 1000.0f + (float)i;
				sa[i] = sb[i] = kind == 0 ? 0.0f : 1.5f;
			}
			if (many && nk % 3 == 0) /* every query settled: no rise in the whole call */
				for (uint32_t i = 0; i < n_q; i++)
					ma[i] = mb[i] = 1000.0f;
			for (int call = 0; call < 3; call++) { /* state carried between calls */
				for (uint32_t i = 0; i < n_q; i++)
					score_fill(&seed, dots + i * LD, nk);
				const float scale = call == 2 ? 1.0f : 0.125f;
				ref->softmax(dots, LD, n_q, nk, scale, ma, sa, ms_a, vs_a);
				ops->softmax(dots, LD, n_q, nk, scale, mb, sb, ms_b, vs_b);
				for (uint32_t i = 0; i < n_q; i++) {
					CHECK(same_bits(ms_a + i * LD, ms_b + i * LD, nk));
					CHECK(same_bits(vs_a + i * LD, vs_b + i * LD, nk));
				}
				CHECK(same_bits(ma, mb, n_q));
				CHECK(same_bits(sa, sb, n_q));
			}
		}
	}
}

PT_TEST(test_attn_vacc_levels_bit_identical)
{
	const struct pt_kern_attn_ops *ref = pt_kern_attn_ops_at(PT_KERN_LEVEL_SCALAR);
	static uint16_t v[LD][512];
	static float acc_a[MAX_Q * 512], acc_b[MAX_Q * 512], ms[MAX_Q * LD], vs[MAX_Q * LD];
	uint32_t seed = 5;
	for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
			const uint32_t n = dims[di];
			for (int trial = 0; trial < 16; trial++) {
				const float scale = trial % 8 < 6 ? 2.0f : 30000.0f; /* F16 overflow */
				const uint32_t n_q = trial < 8 ? q_count((uint32_t)(trial * 3 + di) % 9)
							       : q_count(9 + (uint32_t)(trial + di) % 4);
				/* all 64 keys in some calls: the widened rows come in groups */
				const uint32_t n_k = trial % 4 == 3 ? LD
								    : 1 + (uint32_t)(trial * 17 + di * 5) % LD;
				for (uint32_t j = 0; j < n_k; j++)
					for (uint32_t d = 0; d < n; d++)
						v[j][d] = pt_f32_to_fp16(rnd(&seed, scale));
				/* ms: random rescales; none (the kernels' no-rescale path); or one
				 * rescale (or a NaN) at one key of one query, so a tile of queries
				 * with none sits beside one that has it */
				const int mode = trial % 3;
				for (uint32_t i = 0; i < n_q * LD; i++) {
					const uint32_t r = mode == 0 ? rng_next(&seed) % 4 : 1;
					ms[i] = r == 0 ? fabsf(rnd(&seed, 1.0f)) : 1.0f;
					vs[i] = r == 0 ? 1.0f : fabsf(rnd(&seed, 1.0f));
				}
				if (mode == 2) {
					const uint32_t i = (uint32_t)trial % n_q, j = (uint32_t)di % n_k;
					ms[i * LD + j] = trial % 8 == 5 ? NAN : 0.25f;
				}
				for (uint32_t i = 0; i < n_q * 512; i++)
					acc_a[i] = pt_fp16_to_f32(pt_f32_to_fp16(rnd(&seed, 4.0f)));
				memcpy(acc_b, acc_a, sizeof acc_a);
				/* with and without the prefetch hint (the next call's rows) */
				const uint16_t *nx = trial % 2 ? v[n_k / 2] : NULL;
				ref->vacc_f16(acc_a, 512, n_q, v[0], 512, n_k, ms, vs, LD, n, NULL);
				ops->vacc_f16(acc_b, 512, n_q, v[0], 512, n_k, ms, vs, LD, n, nx);
				CHECK(same_bits(acc_a, acc_b, n_q * 512));
				ref->vacc_f32(acc_a, 512, n_q, v[0], 512, n_k, ms, vs, LD, n, NULL);
				ops->vacc_f32(acc_b, 512, n_q, v[0], 512, n_k, ms, vs, LD, n, nx);
				CHECK(same_bits(acc_a, acc_b, n_q * 512));
			}
		}
	}
}

/* The Q8_0 cache's kernels: widening (K blocks and V rows, with and without the prefetch
 * hint), the key dots over widened F32 blocks and the V accumulation over F32 rows give the
 * scalar reference's bits at every level, for every query count the forward pass makes. */
PT_TEST(test_attn_q8_widened_kernels_levels_bit_identical)
{
	const struct pt_kern_attn_ops *ref = pt_kern_attn_ops_at(PT_KERN_LEVEL_SCALAR);
	static int8_t codes[2][4][512 * BLK];
	static uint16_t scales[2][4][512 / 32 * BLK];
	static float kw[2][4 * 512 * BLK], vw[2][LD * 512], q[MAX_Q][512];
	static int8_t vrows[LD * (512 + 512 / 16)], kq8[4 * 17 * 512];
	static float a[MAX_Q * LD], b[MAX_Q * LD], acc_a[MAX_Q * 512], acc_b[MAX_Q * 512];
	static float ms[MAX_Q * LD], vs[MAX_Q * LD];
	static const uint32_t qdims[] = { 32, 64, 96, 128, 256, 512 };
	uint32_t seed = 11;
	for (int lv = PT_KERN_LEVEL_SCALAR + 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		for (size_t di = 0; di < sizeof qdims / sizeof qdims[0]; di++) {
			const uint32_t n = qdims[di];
			for (int trial = 0; trial < 13; trial++) {
				const uint32_t n_q = q_count((uint32_t)trial), n_blk = 1 + trial % 4;
				for (int c = 0; c < 2; c++)
					for (int bb = 0; bb < 4; bb++) {
						for (uint32_t i = 0; i < n * BLK; i++)
							codes[c][bb][i] = (int8_t)(rng_next(&seed) % 255 - 127);
						for (uint32_t i = 0; i < n / 32 * BLK; i++)
							scales[c][bb][i] = pt_f32_to_fp16(
								i % 7 == 3 ? 0.0f : rnd(&seed, trial % 3 ? 0.05f : 300.0f));
					}
				for (int bb = 0; bb < 4; bb++) {
					ref->widen_q8_k(codes[0][bb], scales[0][bb], n, kw[0] + bb * n * BLK, NULL);
					ops->widen_q8_k(codes[0][bb], scales[0][bb], n, kw[1] + bb * n * BLK,
							trial % 2 ? codes[1][bb] : NULL);
				}
				CHECK(same_bits(kw[0], kw[1], (size_t)n_blk * n * BLK));
				/* V: 1-16 rows of n codes then n / 32 scales each, as the cache lays them */
				const size_t rb = n + n / 16;
				const uint32_t n_rows = 1 + (uint32_t)(trial * 7 + di) % BLK;
				for (uint32_t j = 0; j < n_rows; j++) {
					int8_t *row = vrows + j * rb;
					memcpy(row, codes[0][0] + j * n, n);
					memcpy(row + n, scales[0][1] + j * (n / 32), n / 16);
				}
				memset(vw, 0, sizeof vw);
				ref->widen_q8_v(vrows, rb, n_rows, n, vw[0], NULL);
				ops->widen_q8_v(vrows, rb, n_rows, n, vw[1], trial % 2 ? codes[1][0] : NULL);
				CHECK(same_bits(vw[0], vw[1], (size_t)BLK * n));
				for (uint32_t i = 0; i < n_q; i++)
					for (uint32_t d = 0; d < n; d++)
						q[i][d] = rnd(&seed, 2.0f);
				memset(a, 0, sizeof a);
				memset(b, 0, sizeof b);
				ref->dots_w(kw[0], (size_t)n * BLK, n_blk, q[0], 512, n_q, n, a, LD);
				ops->dots_w(kw[0], (size_t)n * BLK, n_blk, q[0], 512, n_q, n, b, LD);
				CHECK(same_bits(a, b, MAX_Q * LD));
				/* rescales at random keys, or none */
				for (uint32_t i = 0; i < n_q * LD; i++) {
					const uint32_t r = trial % 3 ? rng_next(&seed) % 5 : 1;
					ms[i] = r == 0 ? fabsf(rnd(&seed, 1.0f)) : 1.0f;
					vs[i] = r == 0 ? 1.0f : fabsf(rnd(&seed, 1.0f));
				}
				for (uint32_t i = 0; i < n_q * 512; i++)
					acc_a[i] = rnd(&seed, 4.0f);
				memcpy(acc_b, acc_a, sizeof acc_a);
				const uint32_t n_k = 1 + (uint32_t)(trial * 5) % BLK;
				ref->vacc_w(acc_a, 512, n_q, vw[0], n, n_k, ms, vs, LD, n);
				ops->vacc_w(acc_b, 512, n_q, vw[0], n, n_k, ms, vs, LD, n);
				CHECK(same_bits(acc_a, acc_b, n_q * 512));
				if (!ops->dots_q8 || n_q > 8)
					continue;
				/* in place (few queries): the same bits as widening first.  K: the
				 * blocks as the cache lays them, codes then scales, 17 n bytes apart */
				for (int bb = 0; bb < 4; bb++) {
					memcpy(kq8 + bb * 17 * n, codes[0][bb], (size_t)n * BLK);
					memcpy(kq8 + bb * 17 * n + n * BLK, scales[0][bb], (size_t)n);
				}
				memset(b, 0, sizeof b);
				ops->dots_q8(kq8, 17 * (size_t)n, n_blk, q[0], 512, n_q, n, b, LD,
					     trial % 2 ? kq8 + 17 * n : NULL);
				ref->dots_w(kw[0], (size_t)n * BLK, n_blk, q[0], 512, n_q, n, a, LD);
				CHECK(same_bits(a, b, MAX_Q * LD));
				/* V: up to 64 rows of n codes then their scales */
				const uint32_t nk8 = trial % 3 == 1 ? LD : 1 + (uint32_t)(trial * 11 + di) % LD;
				for (uint32_t j = 0; j < nk8; j++) {
					int8_t *row = vrows + j * rb;
					for (uint32_t d = 0; d < n; d++)
						row[d] = (int8_t)(rng_next(&seed) % 255 - 127);
					for (uint32_t g = 0; g < n / 32; g++) {
						const uint16_t h = pt_f32_to_fp16(rnd(&seed, 0.05f));
						memcpy(row + n + 2 * g, &h, 2);
					}
				}
				ref->widen_q8_v(vrows, rb, nk8, n, vw[0], NULL);
				for (uint32_t i = 0; i < n_q * 512; i++)
					acc_a[i] = rnd(&seed, 4.0f);
				memcpy(acc_b, acc_a, sizeof acc_a);
				ref->vacc_w(acc_a, 512, n_q, vw[0], n, nk8, ms, vs, LD, n);
				ops->vacc_q8(acc_b, 512, n_q, vrows, rb, nk8, ms, vs, LD, n,
					     trial % 2 ? vrows + rb : NULL);
				CHECK(same_bits(acc_a, acc_b, n_q * 512));
			}
		}
		/* the odd widths the op allows (the cache never passes them) */
		for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
			const uint32_t n = dims[di];
			for (uint32_t i = 0; i < LD * n; i++)
				vw[0][i] = rnd(&seed, 3.0f);
			for (uint32_t i = 0; i < 4 * LD; i++) {
				ms[i] = i % 9 == 2 ? 0.5f : 1.0f;
				vs[i] = fabsf(rnd(&seed, 1.0f));
			}
			for (uint32_t i = 0; i < 4 * 512; i++)
				acc_a[i] = acc_b[i] = rnd(&seed, 1.0f);
			ref->vacc_w(acc_a, 512, 4, vw[0], n, LD, ms, vs, LD, n);
			ops->vacc_w(acc_b, 512, 4, vw[0], n, LD, ms, vs, LD, n);
			CHECK(same_bits(acc_a, acc_b, 4 * 512));
			ref->dots_w(vw[0], (size_t)n * BLK, 1, acc_a, 512, 3, n, a, LD);
			ops->dots_w(vw[0], (size_t)n * BLK, 1, acc_a, 512, 3, n, b, LD);
			CHECK(same_bits(a, b, 3 * LD));
		}
	}
}

/* ulps between a float and a double reference (subnormal results: units of 2^-149) */
static double ulp_err(float got, double want)
{
	if (want < 0x1p-126)
		return fabs((double)got - want) / 0x1p-149;
	int e;
	frexp(want, &e);
	return fabs((double)got - want) / ldexp(1.0, e - 24);
}

PT_TEST(test_attn_expf_accurate_and_levels_bit_identical)
{
	/* every float of [-104.5, -80] (subnormal and underflowing results), a dense stride
	 * over [-80, 0] and the positive side up to overflow */
	double worst = 0;
	uint32_t n_bad_libm = 0, n = 0;
	static float xs[1u << 16], want[1u << 16];
	uint32_t nx = 0;
	const struct pt_kern_attn_ops *ops[PT_KERN_LEVEL_COUNT];
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++)
		ops[lv] = pt_kern_attn_ops_at((enum pt_kern_level)lv);
	float lo = -104.5f;
	uint32_t bits;
	memcpy(&bits, &lo, 4);
	for (;; bits -= bits > 0xc2a00000u ? 1 : 61) { /* negative floats: descending bits */
		float x;
		memcpy(&x, &bits, 4);
		if (bits < 0x80000000u)
			break;
		const float y = pt_kern_expf(x);
		const double e = exp((double)x);
		const double u = ulp_err(y, e);
		worst = u > worst ? u : worst;
		const float l = expf(x);
		uint32_t yb, lb;
		memcpy(&yb, &y, 4);
		memcpy(&lb, &l, 4);
		n_bad_libm += (yb > lb ? yb - lb : lb - yb) > 1;
		n++;
		xs[nx] = x;
		want[nx++] = y;
		if (nx == (1u << 16) || bits == 0x80000000u) {
			/* the SIMD exps through softmax: m = 0, scale 1, x <= 0: vs = exp(x - 0) */
			static float ms_b[1u << 16], vs_b[1u << 16];
			for (int lv = 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
				if (!ops[lv])
					continue;
				float m = 0.0f, s = 0.0f;
				ops[lv]->softmax(xs, 0, 1, nx, 1.0f, &m, &s, ms_b, vs_b);
				CHECK(same_bits(want, vs_b, nx));
			}
			nx = 0;
		}
		if (bits == 0x80000000u)
			break;
	}
	for (float x = 0.0f; x < 88.72f; x += 0.000977f) {
		const double u = ulp_err(pt_kern_expf(x), exp((double)x));
		worst = u > worst ? u : worst;
	}
	fprintf(stderr, "expf: %u points, worst %.3f ulp vs exact, %u > 1 ulp from libm\n", n,
		worst, n_bad_libm);
	CHECK(n > 10000000);
	CHECK(worst < 1.0);
	CHECK_EQ_INT(n_bad_libm, 0);
	CHECK(pt_kern_expf(-INFINITY) == 0.0f);
	CHECK(pt_kern_expf(-200.0f) == 0.0f);
	CHECK(pt_kern_expf(0.0f) == 1.0f);
	CHECK(pt_kern_expf(-0.0f) == 1.0f);
	CHECK(isinf(pt_kern_expf(89.0f)) && isinf(pt_kern_expf(INFINITY)));
	CHECK(isnan(pt_kern_expf(NAN)));
	CHECK(pt_kern_expf(-103.9f) > 0.0f); /* the smallest subnormals are reached */
}

PT_TEST(test_attn_f16_conversions_match_reference_on_all_codes)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		const struct pt_kern_attn_ops *ops = pt_kern_attn_ops_at((enum pt_kern_level)lv);
		if (!ops)
			continue;
		static uint16_t h[65536], back[65536];
		static float f[65536];
		for (uint32_t i = 0; i < 65536; i++)
			h[i] = (uint16_t)i;
		ops->f16_to_f32(h, f, 65536);
		uint32_t bad = 0;
		for (uint32_t i = 0; i < 65536; i++) {
			const float r = pt_fp16_to_f32((uint16_t)i);
			if (!isnan(r) && memcmp(&r, &f[i], 4) != 0)
				bad++;
		}
		CHECK_EQ_INT(bad, 0);
		/* non-NaN codes round-trip; halfway values round to even like the reference */
		ops->f32_to_f16(f, back, 65536);
		bad = 0;
		for (uint32_t i = 0; i < 65536; i++)
			if (!isnan(f[i]) && back[i] != h[i])
				bad++;
		CHECK_EQ_INT(bad, 0);
		float mid[3] = { 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f };
		uint16_t got[3];
		ops->f32_to_f16(mid, got, 3);
		for (int i = 0; i < 3; i++)
			CHECK_EQ_INT(got[i], pt_f32_to_fp16(mid[i]));
	}
}
