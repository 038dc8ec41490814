/* test_kern_x16.c - interleaved rows (PT_KERN_LAYOUT_X16, kern.h; src/kern/x16*.c): the
 * packing and the scalar kernel against the numerics' definition computed here from the
 * rows as stored; every level's kernel bit-identical to the scalar one at every token count;
 * products (matmul, sets, gated sets) over X16 matrices equal to the kernel and independent
 * of thread count and batch size; the stream's prefetch requests every line before the kernel
 * reads it; and malformed X16 matrices refused. */
#include <math.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "kern/kern_internal.h" /* the X16 stream's prefetch ranges */
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test.h"
#include "util/alloc.h"

static uint32_t seed = 11;

static uint32_t rnd(void)
{
	seed = seed * 1664525u + 1013904223u;
	return seed >> 8;
}

static float rndf(void)
{
	return (float)(rnd() & 0xffff) / 32768.0f - 1.0f;
}

/* The 32-column types (Q8_0, Q5_0: Q8_0 activations) against the K-quants (Q8_K). */
static bool is_blk(enum pt_type t)
{
	return t == PT_TYPE_Q8_0 || t == PT_TYPE_Q5_0;
}

/* Bytes of one activation row of cols for weights of type t. */
static size_t act_row(enum pt_type t, uint64_t cols)
{
	return is_blk(t) ? 34 * (cols / 32) : 292 * (cols / 256);
}

/* rows x cols of t (Q4_K, Q6_K, Q8_0, Q5_0): quantized from random floats, or (raw) random bytes in
 * every field with finite scales, which reaches the extreme codes, scales and mins that
 * real weights rarely do. */
static uint8_t *make_w(enum pt_type t, uint64_t rows, uint64_t cols, bool raw, size_t *rb_out)
{
	uint64_t rb;
	if (pt_type_row_bytes(t, cols, &rb) != 0)
		return NULL;
	uint8_t *d = pt_malloc(rows * rb);
	float *x = pt_mallocn(cols, sizeof(float));
	if (!d || !x) {
		pt_free(d);
		pt_free(x);
		return NULL;
	}
	for (uint64_t r = 0; r < rows; r++) {
		uint8_t *row = d + r * rb;
		if (raw) {
			for (uint64_t i = 0; i < rb; i++)
				row[i] = (uint8_t)rnd();
			for (uint64_t b = 0; is_blk(t) && b < cols / 32; b++) {
				const uint16_t dd = pt_f32_to_fp16(0.001f + 0.01f * (float)(rnd() % 100));
				memcpy(row + b * (t == PT_TYPE_Q8_0 ? 34 : 22), &dd, 2);
			}
			for (uint64_t b = 0; !is_blk(t) && b < cols / 256; b++) {
				const uint16_t dd = pt_f32_to_fp16(0.001f + 0.01f * (float)(rnd() % 100));
				const uint16_t dm = pt_f32_to_fp16(0.0005f * (float)(rnd() % 100));
				if (t == PT_TYPE_Q6_K) {
					memcpy(row + b * 210 + 208, &dd, 2);
				} else {
					memcpy(row + b * 144, &dd, 2);
					memcpy(row + b * 144 + 2, &dm, 2);
				}
			}
		} else {
			for (uint64_t i = 0; i < cols; i++)
				x[i] = rndf() * (r % 3 ? 1.0f : 7.0f);
			if (pt_quant_quantize_row(t, x, row, cols, NULL) != PT_OK) {
				pt_free(d);
				pt_free(x);
				return NULL;
			}
		}
	}
	pt_free(x);
	*rb_out = (size_t)rb;
	return d;
}

/* n_tok activation rows of cols for weights of type wt (Q8_K, or Q8_0 for Q8_0 / Q5_0), at
 * stride as (>= the row size); token 0 extreme (the quantizer gives its extreme codes), the
 * others random. */
static uint8_t *make_act_t(enum pt_type wt, uint64_t cols, uint32_t n_tok, size_t as)
{
	uint8_t *q = pt_calloc(n_tok, as);
	float *x = pt_mallocn(cols, sizeof(float));
	if (!q || !x) {
		pt_free(q);
		pt_free(x);
		return NULL;
	}
	for (uint32_t t = 0; t < n_tok; t++) {
		for (uint64_t i = 0; i < cols; i++)
			x[i] = t == 0 ? (i % 2 ? 3.0f : -3.0f) * (i % 7 ? 1.0f : 0.5f) : rndf() * 2.0f;
		pt_kern_quantize_row(is_blk(wt) ? PT_TYPE_Q8_0 : PT_TYPE_Q8_K, x, q + t * as, cols);
	}
	pt_free(x);
	return q;
}

static uint8_t *make_act(uint64_t cols, uint32_t n_tok, size_t as)
{
	return make_act_t(PT_TYPE_Q4_K, cols, n_tok, as);
}

static float fp16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return pt_fp16_to_f32(h);
}

/* Q6_K's definition (kern.h) on one row as stored (element order: GGUF-AND-QUANTS.md, as
 * dequantize_row_q6_K), with the products' summed magnitude. */
static float definition_q6k(const uint8_t *row, uint64_t cols, const uint8_t *q8, double *mag)
{
	float acc = 0.0f;
	*mag = 0;
	for (uint64_t b = 0; b < cols / 256; b++, row += 210, q8 += 292) {
		int code[256];
		for (int h = 0; h < 2; h++)
			for (int l = 0; l < 32; l++) {
				const uint8_t *ql = row + 64 * h, hb = row[128 + 32 * h + l];
				code[128 * h + l] = (ql[l] & 0xF) | (hb & 3) << 4;
				code[128 * h + 32 + l] = (ql[l + 32] & 0xF) | ((hb >> 2) & 3) << 4;
				code[128 * h + 64 + l] = (ql[l] >> 4) | ((hb >> 4) & 3) << 4;
				code[128 * h + 96 + l] = (ql[l + 32] >> 4) | ((hb >> 6) & 3) << 4;
			}
		int32_t isum = 0;
		int64_t iabs = 0;
		for (int j = 0; j < 16; j++) {
			int32_t s = 0;
			for (int k = 0; k < 16; k++) {
				const int v = (code[16 * j + k] - 32) * (int8_t)q8[4 + 16 * j + k];
				s += v;
				iabs += abs(v) * abs((int8_t)row[192 + j]);
			}
			isum += s * (int8_t)row[192 + j];
		}
		float d8;
		memcpy(&d8, q8, 4);
		const float dd = fp16(row + 208) * d8;
		acc = fmaf(dd, (float)isum, acc);
		*mag += fabs((double)dd) * (double)iabs;
	}
	return acc;
}

/* The definition (kern.h) on one row as stored: exact integers per super-block, then the two
 * FMA chains. */
static float definition(const uint8_t *row, uint64_t cols, const uint8_t *q8, double *mag)
{
	float acc = 0.0f, accm = 0.0f;
	*mag = 0;
	for (uint64_t b = 0; b < cols / 256; b++, row += 144, q8 += 292) {
		int32_t isum = 0, msum = 0;
		int64_t iabs = 0, mabs = 0;
		for (int j = 0; j < 8; j++) {
			uint8_t sc, m;
			pt_get_scale_min_k4(j, row + 4, &sc, &m);
			int32_t s = 0;
			for (int k = 0; k < 32; k++) {
				const uint8_t byte = row[16 + 32 * (j / 2) + k];
				const int code = j % 2 ? byte >> 4 : byte & 0xF;
				s += code * (int8_t)q8[4 + 32 * j + k];
				iabs += (int64_t)sc * abs(code * (int8_t)q8[4 + 32 * j + k]);
			}
			int16_t b0, b1;
			memcpy(&b0, q8 + 260 + 4 * j, 2);
			memcpy(&b1, q8 + 262 + 4 * j, 2);
			isum += s * sc;
			msum += (b0 + b1) * m;
			mabs += (int64_t)m * abs(b0 + b1);
		}
		float d8;
		memcpy(&d8, q8, 4);
		const float dd = fp16(row) * d8, dm = fp16(row + 2) * d8;
		acc = fmaf(dd, (float)isum, acc);
		accm = fmaf(dm, (float)msum, accm);
		*mag += fabs((double)dd) * (double)iabs + fabs((double)dm) * (double)mabs;
	}
	return acc - accm;
}

/* Q8_0's and Q5_0's definition (kern.h) on one row as stored: per block the exact integer
 * sum, then one FMA chain. */
static float definition_blk(enum pt_type t, const uint8_t *row, uint64_t cols,
			    const uint8_t *q8, double *mag)
{
	float acc = 0.0f;
	*mag = 0;
	const size_t bb = t == PT_TYPE_Q8_0 ? 34 : 22;
	for (uint64_t b = 0; b < cols / 32; b++, row += bb, q8 += 34) {
		int32_t isum = 0;
		int64_t iabs = 0;
		uint32_t qh;
		memcpy(&qh, row + 2, 4);
		for (int k = 0; k < 32; k++) {
			int w;
			if (t == PT_TYPE_Q8_0)
				w = (int8_t)row[2 + k];
			else
				w = ((k < 16 ? row[6 + k] & 15 : row[6 + k - 16] >> 4) |
				     (int)((qh >> k) & 1) << 4) - 16;
			isum += w * (int8_t)q8[2 + k];
			iabs += abs(w * (int8_t)q8[2 + k]);
		}
		const float dd = fp16(row) * fp16(q8);
		acc = fmaf(dd, (float)isum, acc);
		*mag += fabs((double)dd) * (double)iabs;
	}
	return acc;
}

static bool same_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

static uint8_t *pack_t(enum pt_type t, const uint8_t *w, size_t rb, uint64_t rows, uint64_t cols)
{
	const size_t band = pt_kern_x16_band(t, cols);
	uint8_t *p = pt_malloc(rows / 16 * band);
	if (!p)
		return NULL;
	/* in two calls, as a pool would split it */
	pt_kern_x16_pack(t, w, rb, cols, 0, rows / 32, p);
	pt_kern_x16_pack(t, w, rb, cols, rows / 32, rows / 16, p);
	return p;
}

static uint8_t *pack(const uint8_t *w, size_t rb, uint64_t rows, uint64_t cols)
{
	return pack_t(PT_TYPE_Q4_K, w, rb, rows, cols);
}

static uint8_t *make_q4k(uint64_t rows, uint64_t cols, bool raw, size_t *rb_out)
{
	return make_w(PT_TYPE_Q4_K, rows, cols, raw, rb_out);
}

PT_TEST(test_kern_x16_shape_rules)
{
	CHECK(pt_kern_x16_ok(PT_TYPE_Q4_K, 32, 512));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q4_K, 40, 512));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q4_K, 32, 0));
	CHECK(pt_kern_x16_ok(PT_TYPE_Q6_K, 32, 512));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q6_K, 8, 512));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q5_K, 32, 512));
	CHECK(pt_kern_x16_ok(PT_TYPE_Q8_0, 32, 512));
	CHECK(pt_kern_x16_ok(PT_TYPE_Q8_0, 2816, 704));
	CHECK(pt_kern_x16_ok(PT_TYPE_Q5_0, 16, 32));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q5_0, 16, 48));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q8_0, 24, 64));
	CHECK(!pt_kern_x16_ok(PT_TYPE_Q4_0, 32, 512));
	CHECK_EQ_INT(pt_kern_x16_unit_cols(PT_TYPE_Q4_K), 256);
	CHECK_EQ_INT(pt_kern_x16_unit_cols(PT_TYPE_Q8_0), 32);
	CHECK_EQ_INT(pt_kern_x16_unit_cols(PT_TYPE_Q5_1), 0);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q8_0, 704), 22 * PT_KERN_X16_Q8_0_BLK);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q5_0, 64), 2 * PT_KERN_X16_Q5_0_BLK);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q5_0, 40), 0);
	/* the packed units hold exactly the bytes of 16 rows as stored */
	CHECK_EQ_INT(PT_KERN_X16_Q8_0_BLK, 16 * 34);
	CHECK_EQ_INT(PT_KERN_X16_Q5_0_BLK, 16 * 22);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q4_K, 2048), 8 * PT_KERN_X16_Q4K_SB);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q6_K, 512), 2 * PT_KERN_X16_Q6K_SB);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q4_K, 300), 0);
	CHECK_EQ_INT(pt_kern_x16_band(PT_TYPE_Q5_K, 256), 0);
	const struct pt_kern_ops *o = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_Q4_K);
	REQUIRE(o && o->x16 && o->x16_level == PT_KERN_LEVEL_SCALAR);
	CHECK(pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_Q6_K)->x16 != NULL);
	CHECK(pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_Q8_0)->x16 != NULL);
	CHECK(pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_Q5_0)->x16 != NULL);
	CHECK(pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, PT_TYPE_Q4_0)->x16 == NULL);
}

/* The scalar kernel over the packed bands equals the definition on the rows as stored, bit
 * for bit, and the definition is close to the per-row dot (another float order: within 1e-6
 * of the summed magnitude of the weight-activation products). */
PT_TEST(test_kern_x16_scalar_is_the_definition)
{
	static const uint64_t colss[] = { 256, 768, 2048 }, colss_blk[] = { 32, 704, 2048 };
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
					      PT_TYPE_Q5_0 };
	for (int ti = 0; ti < 4; ti++)
		for (int raw = 0; raw < 2; raw++)
			for (size_t c = 0; c < 3; c++) {
				const enum pt_type t = types[ti];
				const struct pt_kern_ops *o = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
				REQUIRE(o && o->x16);
				const uint64_t rows = 32, cols = is_blk(t) ? colss_blk[c] : colss[c];
				size_t rb;
				uint8_t *w = make_w(t, rows, cols, raw, &rb);
				REQUIRE(w);
				uint8_t *p = pack_t(t, w, rb, rows, cols);
				const size_t as = act_row(t, cols);
				uint8_t *q = make_act_t(t, cols, 3, as);
				REQUIRE(p && q);
				const size_t band = pt_kern_x16_band(t, cols);
				int bad = 0, far = 0;
				for (uint64_t b = 0; b < rows / 16; b++) {
					float y[3 * 16];
					o->x16(cols, p + b * band, q, as, 3, y, 16);
					for (uint32_t k = 0; k < 3; k++)
						for (int r = 0; r < 16; r++) {
							const uint8_t *row = w + (b * 16 + r) * rb;
							const uint8_t *qk = q + k * as;
							double mag;
							const float def = is_blk(t) ? definition_blk(t, row, cols, qk, &mag)
									  : t == PT_TYPE_Q6_K
										  ? definition_q6k(row, cols, qk, &mag)
										  : definition(row, cols, qk, &mag);
							bad += !same_bits(y[k * 16 + r], def);
							const float dot = o->dot(cols, row, qk);
							/* both within a few ulps of the products' summed size */
							far += !(fabs((double)dot - def) <= 1e-6 * (mag + 1e-30));
						}
				}
				CHECK_EQ_INT(bad, 0);
				CHECK_EQ_INT(far, 0);
				pt_free(w);
				pt_free(p);
				pt_free(q);
			}
}

/* The types with the interleaved layout. */
static const enum pt_type x16_types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
					  PT_TYPE_Q5_0 };
#define X16_TYPES ((int)(sizeof x16_types / sizeof x16_types[0]))

/* The per-call kernel tests' inputs: rows x cols of type t from raw bytes (extreme codes,
 * scales and mins), packed into bands, and n_tok activation rows (token 0 extreme) at a
 * padded stride. */
struct x16_fixture {
	uint8_t *w, *p, *q;
	size_t rb, as, band;
};

static bool x16_fixture_make(enum pt_type t, uint64_t rows, uint64_t cols, uint32_t n_tok,
			     struct x16_fixture *f)
{
	f->w = make_w(t, rows, cols, true, &f->rb);
	f->p = f->w ? pack_t(t, f->w, f->rb, rows, cols) : NULL;
	f->as = act_row(t, cols) + 36;
	f->q = make_act_t(t, cols, n_tok, f->as);
	f->band = pt_kern_x16_band(t, cols);
	return f->w && f->p && f->q;
}

static void x16_fixture_free(struct x16_fixture *f)
{
	pt_free(f->w);
	pt_free(f->p);
	pt_free(f->q);
}

/* Every level's kernel equals the scalar one bit for bit, at every token count. */
PT_TEST(test_kern_x16_levels_bit_identical)
{
	int levels = 0;
	for (int ti = 0; ti < X16_TYPES; ti++) {
		const enum pt_type t = x16_types[ti];
		const uint64_t rows = 48, cols = 1024;
		struct x16_fixture f;
		REQUIRE(x16_fixture_make(t, rows, cols, PT_KERN_X16_TOKS, &f));
		const uint8_t *p = f.p, *q = f.q;
		const size_t as = f.as, band = f.band;
		const struct pt_kern_ops *ref = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
		for (int lv = 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, t);
			if (!o || (int)o->x16_level != lv) /* no CPU support, or no kernel of its own */
				continue;
			levels++;
			int bad = 0;
			for (uint32_t nt = 1; nt <= PT_KERN_X16_TOKS; nt++)
				for (uint64_t b = 0; b < rows / 16; b++) {
					float y[PT_KERN_X16_TOKS * 20], z[PT_KERN_X16_TOKS * 20];
					memset(y, 0, sizeof y);
					memset(z, 0, sizeof z);
					o->x16(cols, p + b * band, q, as, nt, y, 20);
					ref->x16(cols, p + b * band, q, as, nt, z, 20);
					/* the outputs, and nothing past each token's 16 */
					bad += memcmp(y, z, sizeof y) != 0;
				}
			CHECK_EQ_INT(bad, 0);
		}
		x16_fixture_free(&f);
	}
	printf("    x16: %d (type, SIMD level) pairs checked against the scalar kernels\n", levels);
}

/* Every two-band kernel equals the scalar kernel on each of its bands bit for bit, at every
 * token count it takes (raw weights: extreme codes, scales and mins; token 0's activation
 * extreme), and writes nothing past each token's 32 outputs. */
PT_TEST(test_kern_x16_pair_is_two_bands)
{
	enum { YS = 40 };
	int checked = 0;
	for (int ti = 0; ti < X16_TYPES; ti++) {
		const enum pt_type t = x16_types[ti];
		const uint64_t rows = 64, cols = 1024;
		struct x16_fixture f;
		REQUIRE(x16_fixture_make(t, rows, cols, PT_KERN_X16_PAIR_TOKS, &f));
		const uint8_t *p = f.p, *q = f.q;
		const size_t as = f.as, band = f.band;
		const struct pt_kern_ops *ref = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
		for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, t);
			if (!o || !o->x16_pair)
				continue;
			CHECK_EQ_INT((int)o->x16_level, lv); /* only beside its level's own x16 */
			int bad = 0;
			for (uint32_t nt = 1; nt <= PT_KERN_X16_PAIR_TOKS; nt++)
				for (uint64_t b = 0; b + 1 < rows / 16; b++) {
					float y[PT_KERN_X16_PAIR_TOKS * YS], z[PT_KERN_X16_PAIR_TOKS * YS];
					memset(y, 0x7f, sizeof y);
					memset(z, 0x7f, sizeof z);
					o->x16_pair(cols, p + b * band, band, q, as, nt, y, YS);
					ref->x16(cols, p + b * band, q, as, nt, z, YS);
					ref->x16(cols, p + (b + 1) * band, q, as, nt, z + 16, YS);
					bad += memcmp(y, z, sizeof y) != 0;
					checked++;
				}
			CHECK_EQ_INT(bad, 0);
		}
		x16_fixture_free(&f);
	}
	printf("    x16 pairs: %d (band pair, token count) calls checked against the scalar "
	       "kernel\n", checked);
}

static struct pt_kern_mat x16_mat_t(enum pt_type t, const uint8_t *p, uint64_t rows,
				    uint64_t cols)
{
	uint64_t rb = 0;
	if (pt_type_row_bytes(t, cols, &rb) != 0)
		rb = 0;
	return (struct pt_kern_mat){ t, rows, cols, (size_t)rb, p, PT_KERN_LAYOUT_X16 };
}

static struct pt_kern_mat x16_mat(const uint8_t *p, uint64_t rows, uint64_t cols)
{
	return x16_mat_t(PT_TYPE_Q4_K, p, rows, cols);
}

/* matmul over an X16 matrix: every (token, row) is the scalar kernel's value, whatever the
 * batch size or thread count (so prefill equals token-by-token decode). */
static void check_matmul(enum pt_type type, uint64_t rows)
{
	const uint64_t cols = is_blk(type) ? 352 : 512;
	const uint32_t ntok = 27; /* from 24 the AVX-512 Q4_K products pair bands */
	size_t rb;
	uint8_t *w = make_w(type, rows, cols, false, &rb);
	REQUIRE(w);
	uint8_t *p = pack_t(type, w, rb, rows, cols);
	const size_t as = act_row(type, cols);
	uint8_t *q = make_act_t(type, cols, ntok, as);
	REQUIRE(p && q);
	const struct pt_kern_mat m = x16_mat_t(type, p, rows, cols);
	const struct pt_kern_ops *ref = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, type);
	float *want = pt_mallocn(ntok * rows, sizeof(float));
	float *got = pt_mallocn(ntok * rows, sizeof(float));
	REQUIRE(want && got);
	for (uint32_t t = 0; t < ntok; t++)
		for (uint64_t b = 0; b < rows / 16; b++)
			ref->x16(cols, p + b * pt_kern_x16_band(type, cols), q + t * as, as, 1,
				 want + t * rows + b * 16, rows);
	static const uint32_t batches[] = { 1, 2, 3, 8, 9, 21, 27 };
	for (uint32_t th = 1; th <= 3; th++) {
		pt_pool *pool = NULL;
		REQUIRE(pt_pool_create(th, &pool, NULL) == PT_OK);
		for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
			memset(got, 0xff, ntok * rows * sizeof(float));
			for (uint32_t t0 = 0; t0 < ntok; t0 += batches[k]) {
				const uint32_t n = ntok - t0 < batches[k] ? ntok - t0 : batches[k];
				CHECK(pt_kern_matmul_q(&m, q + t0 * as, n, got + t0 * rows, pool, NULL) ==
				      PT_OK);
			}
			CHECK(memcmp(got, want, ntok * rows * sizeof(float)) == 0);
		}
		/* from float activations: the same quantized bytes, the same results */
		float *x = pt_mallocn(cols, sizeof(float)), *y = pt_mallocn(rows, sizeof(float)),
		      *z = pt_mallocn(rows, sizeof(float));
		void *scratch = pt_malloc(pt_kern_act_bytes(&m, 1));
		REQUIRE(x && y && z && scratch);
		for (uint64_t i = 0; i < cols; i++)
			x[i] = rndf();
		CHECK(pt_kern_matvec(&m, x, y, scratch, pool, NULL) == PT_OK);
		CHECK(pt_kern_matvec_q(&m, scratch, z, pool, NULL) == PT_OK);
		CHECK(memcmp(y, z, rows * sizeof(float)) == 0);
		pt_free(x);
		pt_free(y);
		pt_free(z);
		pt_free(scratch);
		pt_pool_destroy(pool);
	}
	pt_free(want);
	pt_free(got);
	pt_free(w);
	pt_free(p);
	pt_free(q);
}

PT_TEST(test_kern_x16_matmul_equals_kernel)
{
	check_matmul(PT_TYPE_Q4_K, 80);
	check_matmul(PT_TYPE_Q6_K, 80);
	check_matmul(PT_TYPE_Q8_0, 80);
	check_matmul(PT_TYPE_Q5_0, 80);
	/* 21 bands: one thread's last task takes 3, so a two-band kernel's block ends on an
	 * odd band */
	check_matmul(PT_TYPE_Q4_K, 336);
}

static void glu_act(float *out, const float *g, const float *u, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = g[i] * u[i] + 0.5f * g[i] - u[i] * u[i];
}

/* Sets: X16 products (Q4_K, Q6_K) beside row-layout ones (a 67-row product first, so task
 * boundaries cut bands), plain and gated (separate X16 gate and up, a fused X16 gate_up whose halves are not
 * whole bands, an X16 gate with a row-layout up), equal to the products one by one. */
PT_TEST(test_kern_x16_sets_equal_one_by_one)
{
	const uint64_t cols = 512;
	const size_t as = 292 * 2;
	size_t rb;
	uint8_t *w0 = make_q4k(67, cols, false, &rb), *w1 = make_q4k(48, cols, true, &rb);
	uint8_t *w2 = make_q4k(32, cols, false, &rb), *w3 = make_q4k(48, cols, false, &rb);
	size_t rb6;
	uint8_t *w6 = make_w(PT_TYPE_Q6_K, 32, cols, true, &rb6);
	REQUIRE(w0 && w1 && w2 && w3 && w6);
	uint8_t *p6 = pack_t(PT_TYPE_Q6_K, w6, rb6, 32, cols);
	REQUIRE(p6);
	const struct pt_kern_mat m6 = x16_mat_t(PT_TYPE_Q6_K, p6, 32, cols);
	float r6[32];
	/* Q8_0 and Q5_0 (their own activation format) in the same sets */
	size_t rb8, rb5;
	uint8_t *w8 = make_w(PT_TYPE_Q8_0, 32, cols, true, &rb8);
	uint8_t *w5 = make_w(PT_TYPE_Q5_0, 32, cols, false, &rb5);
	REQUIRE(w8 && w5);
	uint8_t *p8 = pack_t(PT_TYPE_Q8_0, w8, rb8, 32, cols);
	uint8_t *p5 = pack_t(PT_TYPE_Q5_0, w5, rb5, 32, cols);
	uint8_t *qb = make_act_t(PT_TYPE_Q8_0, cols, 1, act_row(PT_TYPE_Q8_0, cols));
	REQUIRE(p8 && p5 && qb);
	const struct pt_kern_mat m8 = x16_mat_t(PT_TYPE_Q8_0, p8, 32, cols);
	const struct pt_kern_mat m5 = x16_mat_t(PT_TYPE_Q5_0, p5, 32, cols);
	float r8[32], r5[32], g85[32];
	REQUIRE(pt_kern_matvec_q(&m8, qb, r8, NULL, NULL) == PT_OK);
	REQUIRE(pt_kern_matvec_q(&m5, qb, r5, NULL, NULL) == PT_OK);
	glu_act(g85, r8, r5, 32);
	uint8_t *p1 = pack(w1, rb, 48, cols), *p2 = pack(w2, rb, 32, cols);
	uint8_t *p3 = pack(w3, rb, 48, cols);
	uint8_t *q = make_act(cols, 1, as);
	REQUIRE(p1 && p2 && p3 && q);
	const struct pt_kern_mat m0 = { PT_TYPE_Q4_K, 67, cols, rb, w0, PT_KERN_LAYOUT_ROWS };
	const struct pt_kern_mat m1 = x16_mat(p1, 48, cols), m2 = x16_mat(p2, 32, cols);
	const struct pt_kern_mat m3 = x16_mat(p3, 48, cols);
	float r0[67], r1[48], r2[32], r3[48];
	REQUIRE(pt_kern_matvec_q(&m0, q, r0, NULL, NULL) == PT_OK);
	REQUIRE(pt_kern_matvec_q(&m1, q, r1, NULL, NULL) == PT_OK);
	REQUIRE(pt_kern_matvec_q(&m2, q, r2, NULL, NULL) == PT_OK);
	REQUIRE(pt_kern_matvec_q(&m3, q, r3, NULL, NULL) == PT_OK);
	REQUIRE(pt_kern_matvec_q(&m6, q, r6, NULL, NULL) == PT_OK);
	/* gated references: gate m1 (first 32 rows are not a matrix of their own: use m2 as
	 * gate and up of 32 rows); fused m3 = 24 gate rows then 24 up rows */
	float g_sep[32], g_fused[24], g_mixed[48];
	glu_act(g_sep, r2, r2, 32);
	glu_act(g_fused, r3, r3 + 24, 24);
	glu_act(g_mixed, r1, r3, 48); /* set below with up = m3 as X16 too */
	float up_rows[48];
	const struct pt_kern_mat m3rows = { PT_TYPE_Q4_K, 48, cols, rb, w3, PT_KERN_LAYOUT_ROWS };
	REQUIRE(pt_kern_matvec_q(&m3rows, q, up_rows, NULL, NULL) == PT_OK);
	float g_rowsup[48];
	glu_act(g_rowsup, r1, up_rows, 48);
	for (uint32_t th = 1; th <= 3; th++) {
		pt_pool *pool = NULL;
		REQUIRE(pt_pool_create(th, &pool, NULL) == PT_OK);
		float y0[67], y1[48], y2[32], y3[48], y6[32], y8[32], y5[32];
		struct pt_kern_mv set[7] = { { m0, q, y0 }, { m1, q, y1 }, { m2, q, y2 }, { m3, q, y3 },
					     { m6, q, y6 }, { m8, qb, y8 }, { m5, qb, y5 } };
		CHECK(pt_kern_matvec_set(set, 7, pool, NULL) == PT_OK);
		CHECK(memcmp(y0, r0, sizeof r0) == 0 && memcmp(y1, r1, sizeof r1) == 0 &&
		      memcmp(y2, r2, sizeof r2) == 0 && memcmp(y3, r3, sizeof r3) == 0 &&
		      memcmp(y6, r6, sizeof r6) == 0 && memcmp(y8, r8, sizeof r8) == 0 &&
		      memcmp(y5, r5, sizeof r5) == 0);
		float h0[67], h1[32], h2[24], h3[48], h4[48], h5[32];
		struct pt_kern_glu gs[6] = {
			{ m0, m0, q, q, h0, NULL, NULL },
			{ m2, m2, q, q, h1, NULL, NULL },
			{ m3, { 0 }, q, NULL, h2, NULL, NULL },
			{ m1, m3, q, q, h3, NULL, NULL },
			{ m1, m3rows, q, q, h4, NULL, NULL },
			{ m8, m5, qb, qb, h5, NULL, NULL },
		};
		float g0[67];
		glu_act(g0, r0, r0, 67);
		CHECK(pt_kern_glu_set(gs, 6, glu_act, pool, NULL) == PT_OK);
		CHECK(memcmp(h5, g85, sizeof h5) == 0);
		CHECK(memcmp(h0, g0, sizeof h0) == 0);
		CHECK(memcmp(h1, g_sep, sizeof h1) == 0);
		CHECK(memcmp(h2, g_fused, sizeof h2) == 0);
		CHECK(memcmp(h3, g_mixed, sizeof h3) == 0);
		CHECK(memcmp(h4, g_rowsup, sizeof h4) == 0);
		pt_pool_destroy(pool);
	}
	pt_free(w0);
	pt_free(w1);
	pt_free(w2);
	pt_free(w3);
	pt_free(p1);
	pt_free(p2);
	pt_free(p3);
	pt_free(w6);
	pt_free(p6);
	pt_free(w8);
	pt_free(p8);
	pt_free(w5);
	pt_free(p5);
	pt_free(qb);
	pt_free(q);
}

/* Where kern.h's layout puts each byte, checked field by field on raw rows (every bit
 * pattern): element e's code, each sub-block's scale and min, d and dmin.  Written from the
 * layout's description, not from the packing code; bands packed in uneven calls. */
static int x16_field_errors(enum pt_type t, const uint8_t *w, size_t rb, const uint8_t *p,
			    uint64_t rows, uint64_t cols)
{
	const size_t band = pt_kern_x16_band(t, cols);
	const size_t sbx = t == PT_TYPE_Q6_K ? PT_KERN_X16_Q6K_SB : PT_KERN_X16_Q4K_SB;
	int bad = 0;
	for (uint64_t row = 0; is_blk(t) && row < rows; row++)
		for (uint64_t i = 0; i < cols / 32; i++) {
			const uint64_t r = row % 16;
			if (t == PT_TYPE_Q8_0) {
				const uint8_t *o = p + row / 16 * band + i * PT_KERN_X16_Q8_0_BLK;
				const uint8_t *x = w + row * rb + i * 34;
				/* code e at bytes 64 (e / 4) + 4 r + e % 4, sign bit flipped */
				for (int e = 0; e < 32; e++)
					bad += o[64 * (e / 4) + 4 * r + e % 4] != (uint8_t)(x[2 + e] ^ 0x80);
				bad += memcmp(o + 512 + 2 * r, x, 2) != 0;
			} else {
				const uint8_t *o = p + row / 16 * band + i * PT_KERN_X16_Q5_0_BLK;
				const uint8_t *x = w + row * rb + i * 22;
				uint32_t qh, hw;
				memcpy(&qh, x + 2, 4);
				memcpy(&hw, o + 256 + 4 * r, 4);
				for (int e = 0; e < 32; e++) {
					const int hi = e >= 16, s = e % 16 / 4, k = e % 4;
					const uint8_t qs = x[6 + e % 16], b = o[64 * s + 4 * r + k];
					bad += (hi ? b >> 4 : b & 15) != (hi ? qs >> 4 : qs & 15);
					/* its fifth bit: bit 2 s + hi of byte k of row r's word */
					bad += ((hw >> (8 * k + 2 * s + hi)) & 1) != ((qh >> e) & 1);
				}
				bad += memcmp(o + 320 + 2 * r, x, 2) != 0;
			}
		}
	for (uint64_t row = 0; !is_blk(t) && row < rows; row++)
		for (uint64_t i = 0; i < cols / 256; i++) {
			const uint64_t r = row % 16;
			const uint8_t *o = p + row / 16 * band + i * sbx;
			if (t == PT_TYPE_Q4_K) {
				const uint8_t *x = w + row * rb + i * 144;
				for (int e = 0; e < 256; e++) {
					const int g = e / 64, hi = e % 64 >= 32, k = e % 32;
					const int want = hi ? x[16 + 32 * g + k] >> 4 : x[16 + 32 * g + k] & 15;
					const uint8_t b = o[64 * (8 * g + k / 4) + 4 * r + k % 4];
					bad += (hi ? b >> 4 : b & 15) != want;
				}
				for (int j = 0; j < 8; j++) {
					uint8_t sc, m;
					pt_get_scale_min_k4(j, x + 4, &sc, &m);
					bad += o[2048 + 16 * j + r] != sc;
					bad += o[2176 + 32 * (j / 2) + 2 * r + j % 2] != m;
				}
				bad += memcmp(o + 2304 + 2 * r, x, 2) != 0;
				bad += memcmp(o + 2336 + 2 * r, x + 2, 2) != 0;
			} else {
				const uint8_t *x = w + row * rb + i * 210;
				for (int e = 0; e < 256; e++) {
					const int h = e / 128, q = e % 128 / 32, l = e % 32, st = l / 4;
					const uint8_t lq = x[64 * h + 32 * (q % 2) + l];
					const int want = (q >= 2 ? lq >> 4 : lq & 15) |
							 (x[128 + 32 * h + l] >> 2 * q & 3) << 4;
					/* group 2 h + st / 4: ql vectors of part 0, of part 1, then qh */
					const uint8_t *gp = o + 768 * (2 * h + st / 4) + 64 * (st % 4) + 4 * r + l % 4;
					const uint8_t lb = gp[256 * (q % 2)], hb = gp[512];
					bad += ((q >= 2 ? lb >> 4 : lb & 15) | (hb >> 2 * q & 3) << 4) != want;
				}
				for (int j = 0; j < 16; j++)
					bad += o[3072 + 16 * j + r] != x[192 + j];
				bad += memcmp(o + 3328 + 2 * r, x + 208, 2) != 0;
			}
		}
	return bad;
}

PT_TEST(test_kern_x16_pack_layout)
{
	const enum pt_type types[4] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0, PT_TYPE_Q5_0 };
	for (int ti = 0; ti < 4; ti++)
		for (uint64_t cols = is_blk(types[ti]) ? 32 : 256; cols <= 768;
		     cols += is_blk(types[ti]) ? 672 : 512) {
			const uint64_t rows = 80;
			size_t rb;
			uint8_t *w = make_w(types[ti], rows, cols, true, &rb);
			const size_t band = pt_kern_x16_band(types[ti], cols);
			uint8_t *p = pt_malloc(rows / 16 * band);
			CHECK(w && p);
			if (!w || !p) {
				pt_free(w);
				pt_free(p);
				continue;
			}
			uint8_t *p2 = pt_malloc(rows / 16 * band);
			CHECK(p2 != NULL);
			memset(p, 0xA5, rows / 16 * band);
			pt_kern_x16_pack(types[ti], w, rb, cols, 0, 1, p);
			pt_kern_x16_pack(types[ti], w, rb, cols, 1, 4, p);
			pt_kern_x16_pack(types[ti], w, rb, cols, 4, 5, p);
			CHECK(x16_field_errors(types[ti], w, rb, p, rows, cols) == 0);
			/* every byte of a band is written: a second pack over another fill pattern
			 * gives the same bytes */
			if (p2) {
				memset(p2, 0x5A, rows / 16 * band);
				pt_kern_x16_pack(types[ti], w, rb, cols, 0, 5, p2);
				CHECK(memcmp(p, p2, rows / 16 * band) == 0);
			}
			/* pt_kern_x16_unpack_row is the exact inverse (a tied head's embedding rows
			 * are read out of its copy): raw bytes, every row back byte for byte */
			uint8_t *row = pt_malloc(rb);
			CHECK(row != NULL);
			int bad = 0;
			for (uint64_t r = 0; row && r < rows; r++) {
				memset(row, 0xA5, rb);
				pt_kern_x16_unpack_row(types[ti], p + r / 16 * band, cols,
						       (uint32_t)(r % 16), row);
				bad += memcmp(row, w + r * rb, rb) != 0;
			}
			CHECK_EQ_INT(bad, 0);
			pt_free(row);
			pt_free(w);
			pt_free(p);
			pt_free(p2);
		}
}

/* The X16 kernels' prefetch (kern_internal.h): the stream's start, then every super-block's
 * four steps, request each line of a stream of super-blocks by the super-block
 * PT_KERN_X16_AHEAD_SB before the first one that reads it (a wrong part split, a gap or a
 * line lost to the rounding fails), whatever the stream's alignment to lines. */
PT_TEST(test_kern_x16_prefetch_covers_the_stream)
{
	const size_t sbs[2] = { PT_KERN_X16_Q4K_SB, PT_KERN_X16_Q6K_SB };
	enum { N_SB = 12 };
	CHECK(PT_KERN_X16_AHEAD_SB >= 1);
	for (int ti = 0; ti < 2; ti++)
		for (size_t base = 0; base < 128; base += 24) {
			const size_t sb = sbs[ti], end = base + N_SB * sb;
			const size_t n_lines = (end + 63) / 64;
			/* when[l]: the super-block whose steps request line l first (-1: the start) */
			int when[(N_SB + PT_KERN_X16_AHEAD_SB + 2) * PT_KERN_X16_Q6K_SB / 64 + 4];
			for (size_t l = 0; l < sizeof when / sizeof when[0]; l++)
				when[l] = N_SB + 1;
			for (size_t a = base & ~(size_t)63; a < base + PT_KERN_X16_AHEAD_SB * sb; a += 64)
				when[a / 64] = -1;
			for (int i = 0; i < N_SB; i++)
				for (int part = 0; part < 4; part++) {
					size_t lo, hi;
					pt_kern_x16_ahead_part(sb, part, &lo, &hi);
					CHECK(hi > lo);
					const size_t a0 = base + (size_t)i * sb + lo, a1 = base + (size_t)i * sb + hi;
					for (size_t a = a0 & ~(size_t)63; a < a1; a += 64)
						if (when[a / 64] > i)
							when[a / 64] = i;
				}
			int late = 0;
			for (size_t l = base / 64; l < n_lines; l++) {
				/* the first super-block that reads line l */
				const size_t first = l * 64 > base ? (l * 64 - base) / sb : 0;
				late += !(when[l] == -1 || when[l] <= (int)first - PT_KERN_X16_AHEAD_SB);
			}
			CHECK_EQ_INT(late, 0);
		}
}

/* The same for the 32-column blocks (Q8_0, Q5_0): the caller's start requests the first
 * pt_kern_x16_ahead bytes, each block the block PT_KERN_X16_AHEAD_BLK after it. */
PT_TEST(test_kern_x16_prefetch_covers_the_blocks)
{
	const enum pt_type types[2] = { PT_TYPE_Q8_0, PT_TYPE_Q5_0 };
	const size_t blks[2] = { PT_KERN_X16_Q8_0_BLK, PT_KERN_X16_Q5_0_BLK };
	enum { N_BLK = 40 };
	CHECK(PT_KERN_X16_AHEAD_BLK >= 1);
	CHECK_EQ_INT(pt_kern_x16_ahead(PT_TYPE_Q4_K), PT_KERN_X16_AHEAD_SB * PT_KERN_X16_Q4K_SB);
	CHECK_EQ_INT(pt_kern_x16_ahead(PT_TYPE_Q4_0), 0);
	for (int ti = 0; ti < 2; ti++)
		for (size_t base = 0; base < 128; base += 24) {
			const size_t blk = blks[ti], end = base + N_BLK * blk;
			const size_t ahead = pt_kern_x16_ahead(types[ti]);
			CHECK_EQ_INT(ahead, PT_KERN_X16_AHEAD_BLK * blk);
			int when[(N_BLK + PT_KERN_X16_AHEAD_BLK + 2) * PT_KERN_X16_Q8_0_BLK / 64 + 4];
			for (size_t l = 0; l < sizeof when / sizeof when[0]; l++)
				when[l] = N_BLK + 1;
			for (size_t a = base & ~(size_t)63; a < base + ahead; a += 64)
				when[a / 64] = -1;
			for (int i = 0; i < N_BLK; i++) {
				/* what pt_kern_x16_prefetch_blk asks for block i */
				const size_t a0 = base + (size_t)i * blk + PT_KERN_X16_AHEAD_BLK * blk;
				for (size_t a = a0 & ~(size_t)63; a < a0 + blk; a += 64)
					if (when[a / 64] > i)
						when[a / 64] = i;
			}
			int late = 0;
			for (size_t l = base / 64; l < (end + 63) / 64; l++) {
				const size_t first = l * 64 > base ? (l * 64 - base) / blk : 0;
				late += !(when[l] == -1 || when[l] <= (int)first - PT_KERN_X16_AHEAD_BLK);
			}
			CHECK_EQ_INT(late, 0);
		}
}

/* The page requests (kern_internal.h): a stream of super-blocks (each asks at its first
 * step) or of 32-column blocks (a block reaching into the next page asks), begun with
 * pt_kern_x16_prefetch_start, asks for every 4 KiB page it reads at least
 * PT_KERN_PAGE_AHEAD - PT_KERN_PAGE bytes (less one step) of the stream before the step that
 * first reads the page (a page skipped, or asked for late, fails), whatever the stream's
 * offset in its page.  pages_asked_late: the pages read fewer than lead bytes after their
 * first request. */
static int pages_asked_late(size_t base, size_t step, size_t n_steps, bool per_block, size_t lead)
{
	enum { MAX_PAGES = 64 };
	const size_t end = base + n_steps * step;
	long asked[MAX_PAGES]; /* stream offset of the first request of each page (-1: at start) */
	if (end / PT_KERN_PAGE + 1 >= MAX_PAGES)
		return 1000;
	for (size_t p = 0; p < MAX_PAGES; p++)
		asked[p] = LONG_MAX;
	/* the start's requests: the first page's own lines, then a line of each later page up
	 * to PT_KERN_PAGE_AHEAD (pt_kern_x16_prefetch_start) */
	asked[base / PT_KERN_PAGE] = -1;
	for (size_t p = base / PT_KERN_PAGE + 1; p * PT_KERN_PAGE < base + PT_KERN_PAGE_AHEAD &&
						 p < MAX_PAGES; p++)
		asked[p] = -1;
	for (size_t i = 0; i < n_steps; i++) {
		const uintptr_t at = base + i * step;
		if (per_block && !pt_kern_blk_asks_page(at, step))
			continue;
		const size_t p = pt_kern_page_ahead_of(at) / PT_KERN_PAGE;
		if (p < MAX_PAGES && asked[p] > (long)(at - base))
			asked[p] = (long)(at - base);
	}
	int late = 0;
	for (size_t p = base / PT_KERN_PAGE; p * PT_KERN_PAGE < end; p++) {
		/* the stream offset of the step that first reads page p */
		const size_t first =
			p * PT_KERN_PAGE > base ? (p * PT_KERN_PAGE - base) / step * step : 0;
		late += !(asked[p] == -1 || asked[p] + (long)lead <= (long)first);
	}
	return late;
}

PT_TEST(test_kern_x16_page_requests_lead_the_stream)
{
	CHECK(PT_KERN_PAGE_AHEAD >= 2 * PT_KERN_PAGE);
	/* the per-super-block request covers every page only while a super-block is shorter
	 * than a page */
	CHECK(PT_KERN_X16_Q4K_SB < PT_KERN_PAGE && PT_KERN_X16_Q6K_SB < PT_KERN_PAGE);
	const size_t sbs[2] = { PT_KERN_X16_Q4K_SB, PT_KERN_X16_Q6K_SB };
	const size_t blks[2] = { PT_KERN_X16_Q8_0_BLK, PT_KERN_X16_Q5_0_BLK };
	for (size_t base = 0; base < 2 * PT_KERN_PAGE; base += 328) {
		for (int t = 0; t < 2; t++) {
			const size_t lead = PT_KERN_PAGE_AHEAD - PT_KERN_PAGE;
			CHECK_EQ_INT(pages_asked_late(base, sbs[t], 48, false, lead - sbs[t]), 0);
			CHECK_EQ_INT(pages_asked_late(base, blks[t], 300, true, lead - blks[t]), 0);
		}
	}
	/* a block wholly inside a page asks nothing; one reaching past its end does */
	CHECK(!pt_kern_blk_asks_page(0, PT_KERN_X16_Q8_0_BLK));
	CHECK(pt_kern_blk_asks_page(PT_KERN_PAGE - 10, PT_KERN_X16_Q8_0_BLK));
	/* no request leads by more than the distance: the count can fail */
	CHECK(pages_asked_late(0, PT_KERN_X16_Q4K_SB, 48, false, PT_KERN_PAGE_AHEAD + 1) > 0);
}

PT_TEST(test_kern_x16_rejects_bad_matrices)
{
	uint8_t buf[2 * PT_KERN_X16_Q4K_SB] = { 0 };
	float y[48];
	uint8_t q[292] = { 0 };
	struct pt_error err = { 0 };
	struct pt_kern_mat m = x16_mat(buf, 40, 256); /* 40 rows: not whole bands */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "x16");
	struct pt_kern_mv mv = { m, q, y };
	CHECK(pt_kern_matvec_set(&mv, 1, NULL, NULL) == PT_E_INVALID);
	m = x16_mat_t(PT_TYPE_Q8_0, buf, 16, 48); /* not whole 32-column blocks */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	m = x16_mat(buf, 16, 256);
	m.type = PT_TYPE_Q5_K; /* no X16 layout */
	m.row_bytes = 176;
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, NULL) == PT_E_INVALID);
	m = x16_mat(buf, 16, 256);
	m.layout = (enum pt_kern_layout)7;
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "layout");
	struct pt_kern_glu g = { x16_mat(buf, 48, 256), { 0 }, q, NULL, y, NULL, NULL };
	g.gate.rows = 40;
	CHECK(pt_kern_glu_set(&g, 1, glu_act, NULL, NULL) == PT_E_INVALID);
	m = x16_mat(buf, 16, 256); /* and a good one runs */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, NULL) == PT_OK);
}

/* ---- rows as stored with the interleaved numerics (PT_KERN_LAYOUT_X16_ROWS) ---------------- */

static struct pt_kern_mat rows_mat(enum pt_type t, const uint8_t *w, size_t rb, uint64_t rows,
				   uint64_t cols)
{
	return (struct pt_kern_mat){ t, rows, cols, rb, w, PT_KERN_LAYOUT_X16_ROWS };
}

/* Every level's row kernel (x16_dot) equals the scalar X16 kernel on the packed band, bit for
 * bit: raw rows (every code, scale and min) and quantized ones, several widths. */
PT_TEST(test_kern_x16_rows_dot_is_the_kernel)
{
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
					      PT_TYPE_Q5_0 };
	static const uint64_t colss[] = { 256, 1024, 2816 }, colss_blk[] = { 32, 704, 2048 };
	int pairs = 0, pairs16 = 0;
	for (int ti = 0; ti < 4; ti++)
		for (int raw = 0; raw < 2; raw++)
			for (size_t c = 0; c < 3; c++) {
				const enum pt_type t = types[ti];
				const uint64_t rows = 32, cols = is_blk(t) ? colss_blk[c] : colss[c];
				size_t rb;
				uint8_t *w = make_w(t, rows, cols, raw, &rb);
				REQUIRE(w);
				uint8_t *p = pack_t(t, w, rb, rows, cols);
				const size_t as = act_row(t, cols) + 8;
				const uint32_t nt = 5;
				uint8_t *q = make_act_t(t, cols, nt, as);
				REQUIRE(p && q);
				float want[5 * 32];
				const struct pt_kern_ops *ref = pt_kern_ops_at(PT_KERN_LEVEL_SCALAR, t);
				for (uint64_t b = 0; b < rows / 16; b++)
					ref->x16(cols, p + b * pt_kern_x16_band(t, cols), q, as, nt,
						 want + b * 16, rows);
				for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
					const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, t);
					/* the sixteen-row twin: each band's outputs, every token */
					for (uint64_t b = 0; o && o->x16_dot16 && b < rows / 16; b++) {
						int bad16 = 0;
						for (uint32_t k = 0; k < nt; k++) {
							float o16[16];
							o->x16_dot16(cols, w + b * 16 * rb, rb, q + k * as, o16);
							for (int r = 0; r < 16; r++)
								bad16 += !same_bits(o16[r], want[k * rows + b * 16 + r]);
						}
						CHECK_EQ_INT(bad16, 0);
						pairs16++;
					}
					if (!o || !o->x16_dot || (int)o->x16_dot_level != lv)
						continue;
					pairs++;
					int bad = 0;
					for (uint32_t k = 0; k < nt; k++)
						for (uint64_t r = 0; r < rows; r++)
							bad += !same_bits(o->x16_dot(cols, w + r * rb, q + k * as),
									  want[k * rows + r]);
					/* the four-token twin: each output the one-token sequence */
					for (uint64_t r = 0; o->x16_dot4 && r < rows; r++) {
						float o4[4];
						o->x16_dot4(cols, w + r * rb, q + as, as, o4);
						for (int k = 0; k < 4; k++)
							bad += !same_bits(o4[k], want[(k + 1) * rows + r]);
					}
					CHECK_EQ_INT(bad, 0);
				}
				pt_free(w);
				pt_free(p);
				pt_free(q);
			}
	CHECK(pairs >= 24); /* the scalar level at least, for every type */
	/* every type at AVX-512 (4 types x 2 kinds x 3 widths x 2 bands), Q4_K, Q8_0 and Q5_0 at
	 * AVX2 (36) */
#if defined(PT_KERN_X86)
	CHECK_EQ_INT(pairs16, (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512 ? 48 : 0) +
				      (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2 ? 36 : 0));
#else
	CHECK_EQ_INT(pairs16, 0);
#endif
	printf("    x16 rows: %d (type, rows, width, level) checks of the row kernels, %d bands of "
	       "the sixteen-row ones\n", pairs, pairs16);
	/* every type with the X16 layout has a row twin at each level (its own or a lower
	 * level's: Q8_0 / Q5_0 the scalar reference only, their levels' twins take sixteen rows a
	 * call, native only where that one exists); a type without the layout has none */
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		for (int ti = 0; ti < 4; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, types[ti]);
			if (o)
				CHECK(o->x16_dot != NULL && o->x16_dot_level <= (enum pt_kern_level)lv);
		}
		const struct pt_kern_ops *q8 = pt_kern_ops_at((enum pt_kern_level)lv, PT_TYPE_Q8_0);
		if (q8)
			CHECK(q8->x16_dot_level == PT_KERN_LEVEL_SCALAR);
		/* the sixteen-row twins: every type with the layout at AVX-512, all but Q6_K at
		 * AVX2 (its row twin takes four tokens a call instead), none elsewhere */
		for (int ti = 0; ti < 4; ti++) {
			const struct pt_kern_ops *o = pt_kern_ops_at((enum pt_kern_level)lv, types[ti]);
#if defined(PT_KERN_X86)
			if (o)
				CHECK((o->x16_dot16 != NULL) ==
				      (lv == PT_KERN_LEVEL_AVX512 ||
				       (lv == PT_KERN_LEVEL_AVX2 && types[ti] != PT_TYPE_Q6_K)));
#else
			if (o)
				CHECK(o->x16_dot16 == NULL);
#endif
		}
		const struct pt_kern_ops *q4 = pt_kern_ops_at((enum pt_kern_level)lv, PT_TYPE_Q4_0);
		if (q4)
			CHECK(q4->x16_dot == NULL);
	}
}

/* Products over X16_ROWS matrices equal those over their X16 copies bit for bit at every
 * level the CPU has: matmul at every batch size (the row kernel below 8 tokens, packed
 * blocks from 8 on) and thread count, single-token products, plain and gated sets; a band
 * too wide for the packing scratch runs the row kernel and still agrees. */
static void check_rows_products(enum pt_type t, uint64_t rows, uint64_t cols, uint32_t ntok)
{
	size_t rb;
	uint8_t *w = make_w(t, rows, cols, true, &rb);
	REQUIRE(w);
	uint8_t *p = pack_t(t, w, rb, rows, cols);
	const size_t as = act_row(t, cols);
	uint8_t *q = make_act_t(t, cols, ntok, as);
	float *want = pt_mallocn((size_t)ntok * rows, sizeof(float));
	float *got = pt_mallocn((size_t)ntok * rows, sizeof(float));
	REQUIRE(p && q && want && got);
	const struct pt_kern_mat mx = x16_mat_t(t, p, rows, cols), mr = rows_mat(t, w, rb, rows, cols);
	REQUIRE(pt_kern_matmul_q(&mx, q, ntok, want, NULL, NULL) == PT_OK);
	static const uint32_t batches[] = { 1, 3, 7, 8, 9, 21, 40 };
	for (uint32_t th = 1; th <= 3; th += 2) {
		pt_pool *pool = NULL;
		REQUIRE(pt_pool_create(th, &pool, NULL) == PT_OK);
		for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
			memset(got, 0xff, (size_t)ntok * rows * sizeof(float));
			for (uint32_t t0 = 0; t0 < ntok; t0 += batches[k]) {
				const uint32_t n = ntok - t0 < batches[k] ? ntok - t0 : batches[k];
				CHECK(pt_kern_matmul_q(&mr, q + t0 * as, n, got + t0 * rows, pool, NULL) ==
				      PT_OK);
			}
			CHECK(memcmp(got, want, (size_t)ntok * rows * sizeof(float)) == 0);
		}
		/* sets: the plain product, a gated pair (X16_ROWS gate, X16 up) and a fused gate_up */
		float *y = pt_mallocn(rows, sizeof(float)), *h = pt_mallocn(rows, sizeof(float));
		float *g = pt_mallocn(rows, sizeof(float)), *hf = pt_mallocn(rows / 2, sizeof(float));
		float *gf = pt_mallocn(rows / 2, sizeof(float));
		REQUIRE(y && h && g && hf && gf);
		struct pt_kern_mv mv = { mr, q, y };
		CHECK(pt_kern_matvec_set(&mv, 1, pool, NULL) == PT_OK);
		CHECK(memcmp(y, want, rows * sizeof(float)) == 0);
		glu_act(g, want, want, (int)rows);
		struct pt_kern_glu gs = { mr, mx, q, q, h, NULL, NULL };
		CHECK(pt_kern_glu_set(&gs, 1, glu_act, pool, NULL) == PT_OK);
		CHECK(memcmp(h, g, rows * sizeof(float)) == 0);
		glu_act(gf, want, want + rows / 2, (int)(rows / 2));
		/* fused: the gate rows, then the up rows */
		struct pt_kern_glu gfu = { mr, { 0 }, q, NULL, hf, NULL, NULL };
		CHECK(pt_kern_glu_set(&gfu, 1, glu_act, pool, NULL) == PT_OK);
		CHECK(memcmp(hf, gf, rows / 2 * sizeof(float)) == 0);
		pt_free(y);
		pt_free(h);
		pt_free(g);
		pt_free(hf);
		pt_free(gf);
		pt_pool_destroy(pool);
	}
	pt_free(want);
	pt_free(got);
	pt_free(w);
	pt_free(p);
	pt_free(q);
}

PT_TEST(test_kern_x16_rows_products_equal_x16)
{
	const enum pt_kern_level keep = pt_kern_level();
	int levels = 0;
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		if (pt_kern_set_level((enum pt_kern_level)lv, NULL) != PT_OK)
			continue;
		levels++;
		check_rows_products(PT_TYPE_Q4_K, 96, 1024, 40);
		check_rows_products(PT_TYPE_Q6_K, 64, 512, 40);
		check_rows_products(PT_TYPE_Q8_0, 64, 704, 40); /* Gemma 4's downs' width */
		check_rows_products(PT_TYPE_Q5_0, 48, 704, 40);
		/* a Q4_K band of 166 super-blocks (393 KB) is wider than the packing scratch */
		check_rows_products(PT_TYPE_Q4_K, 16, 166 * 256, 9);
	}
	REQUIRE(pt_kern_set_level(keep, NULL) == PT_OK);
	CHECK(levels >= 1);
}

PT_TEST(test_kern_x16_rows_rejects_bad_matrices)
{
	uint8_t buf[48 * 210] = { 0 };
	float y[48];
	uint8_t q[292] = { 0 };
	struct pt_error err = { 0 };
	struct pt_kern_mat m = rows_mat(PT_TYPE_Q4_K, buf, 144, 40, 256); /* not whole bands */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "x16");
	struct pt_kern_mv mv = { m, q, y };
	CHECK(pt_kern_matvec_set(&mv, 1, NULL, NULL) == PT_E_INVALID);
	m = rows_mat(PT_TYPE_Q8_0, buf, 34, 16, 48); /* not whole 32-column blocks */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	m = rows_mat(PT_TYPE_Q4_0, buf, 18, 16, 32); /* no X16 layout, no row twin */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, &err) == PT_E_INVALID);
	m = rows_mat(PT_TYPE_Q5_K, buf, 176, 16, 256); /* no X16 layout at all */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, NULL) == PT_E_INVALID);
	m = rows_mat(PT_TYPE_Q6_K, buf, 210, 48, 256); /* and a good one runs */
	CHECK(pt_kern_matvec_q(&m, q, y, NULL, NULL) == PT_OK);
}

/* The packing moves the same bytes at every level (its transposes are per level). */
PT_TEST(test_kern_x16_pack_same_at_every_level)
{
	static const enum pt_type types[] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0,
					      PT_TYPE_Q5_0 };
	const enum pt_kern_level keep = pt_kern_level();
	for (int ti = 0; ti < 4; ti++) {
		const enum pt_type t = types[ti];
		const uint64_t rows = 48, cols = 512;
		size_t rb;
		uint8_t *w = make_w(t, rows, cols, true, &rb);
		REQUIRE(w);
		REQUIRE(pt_kern_set_level(PT_KERN_LEVEL_SCALAR, NULL) == PT_OK);
		uint8_t *want = pack_t(t, w, rb, rows, cols);
		REQUIRE(want);
		for (int lv = 1; lv < PT_KERN_LEVEL_COUNT; lv++) {
			if (pt_kern_set_level((enum pt_kern_level)lv, NULL) != PT_OK)
				continue;
			uint8_t *got = pack_t(t, w, rb, rows, cols);
			REQUIRE(got);
			CHECK(memcmp(got, want, rows / 16 * pt_kern_x16_band(t, cols)) == 0);
			pt_free(got);
		}
		pt_free(want);
		pt_free(w);
	}
	REQUIRE(pt_kern_set_level(keep, NULL) == PT_OK);
}
