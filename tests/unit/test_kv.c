/* test_kv.c - KV cache (F16/F32, linear/ring) and attention against a double reference. */
#include "gen/kv.h"
#include "test.h"

#include "kern/kern.h"
#include "quant/types.h"
#include "util/alloc.h"

#include <math.h>
#include <string.h>

static uint64_t rs = 0x1234567887654321ull;
static float frnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

enum { NKV = 2, NH = 4, DK = 32, DV = 32, NPOS = 300 };
static float K[NPOS][NKV * DK], V[NPOS][NKV * DV];

/* Reference: causal/windowed GQA softmax attention in double over the stored (possibly
 * F16-rounded) K/V, with the query rounded the same way. */
static void ref_attn(const float *q, int64_t pos, uint32_t swa, float scale, int f16,
		     int f16_q, double *out)
{
	for (int h = 0; h < NH; h++) {
		const int kvh = h / (NH / NKV);
		int64_t lo = swa && pos - (int64_t)swa + 1 > 0 ? pos - swa + 1 : 0;
		double m = -1e300, sc[NPOS];
		for (int64_t p = lo; p <= pos; p++) {
			double d = 0;
			for (int i = 0; i < DK; i++) {
				float kq = q[h * DK + i], kk = K[p][kvh * DK + i];
				if (f16_q)
					kq = pt_fp16_to_f32(pt_f32_to_fp16(kq));
				if (f16)
					kk = pt_fp16_to_f32(pt_f32_to_fp16(kk));
				d += (double)kq * kk;
			}
			sc[p] = d * scale;
			m = sc[p] > m ? sc[p] : m;
		}
		double s = 0;
		for (int i = 0; i < DV; i++)
			out[h * DV + i] = 0;
		for (int64_t p = lo; p <= pos; p++) {
			const double e = exp(sc[p] - m);
			s += e;
			for (int i = 0; i < DV; i++) {
				float vv = V[p][kvh * DV + i];
				if (f16)
					vv = pt_fp16_to_f32(pt_f32_to_fp16(vv));
				out[h * DV + i] += e * vv;
			}
		}
		for (int i = 0; i < DV; i++)
			out[h * DV + i] /= s;
	}
}

static void run_case_acc(enum pt_kv_type t, uint32_t swa, uint32_t n_batch, double tol,
			 bool f32_acc)
{
	struct pt_kv kv;
	struct pt_kv_layer_desc d = { NKV, DK, DV, swa, false };
	struct pt_error err = { 0 };
	REQUIRE(pt_kv_init(&kv, t, 1, &d, NPOS, n_batch, &err) == PT_OK);
	if (swa)
		CHECK_EQ_INT(kv.layers[0].cap, (swa + n_batch - 1 + PT_KV_BLOCK - 1) / PT_KV_BLOCK *
							PT_KV_BLOCK);
	float *scratch = pt_mallocn(pt_attn_scratch_floats(&kv, 0, NH / NKV), sizeof(float));
	float q[NH * DK], out[NH * DV], out_split[NH * DV];
	double ref[NH * DV];
	struct pt_attn_args a = { 1.0f / sqrtf((float)DK), 0.0f, f32_acc };
	double max_err = 0, max_split = 0;
	for (int64_t p = 0; p < NPOS; p++) {
		for (int i = 0; i < NKV * DK; i++)
			K[p][i] = 3.0f * frnd();
		for (int i = 0; i < NKV * DV; i++)
			V[p][i] = frnd();
		pt_kv_store(&kv, 0, p, K[p], V[p]);
		for (int i = 0; i < NH * DK; i++)
			q[i] = 3.0f * frnd();
		pt_attn_row(&kv, 0, NH, q, p, &a, 0, out, scratch);
		pt_attn_row(&kv, 0, NH, q, p, &a, 64, out_split, scratch);
		/* Q is rounded to F16 only on the one-row F16 path */
		ref_attn(q, p, swa, a.scale, t == PT_KV_F16, t == PT_KV_F16 && !f32_acc, ref);
		for (int i = 0; i < NH * DV; i++) {
			max_err = fmax(max_err, fabs(out[i] - ref[i]));
			max_split = fmax(max_split, fabs(out_split[i] - ref[i]));
		}
	}
	if (!(max_err < tol)) fprintf(stderr, "max_err %g split %g\n", max_err, max_split);
	CHECK(max_err < tol);
	CHECK(max_split < tol);
	pt_free(scratch);
	pt_kv_fini(&kv);
	pt_kv_fini(&kv);
}

static void run_case(enum pt_kv_type t, uint32_t swa, uint32_t n_batch, double tol)
{
	run_case_acc(t, swa, n_batch, tol, false);
}

PT_TEST(test_kv_attention_f16_cache_f32_accumulation_matches_double)
{
	/* ggml's tiled path: F32 query and accumulator over the F16 cache */
	run_case_acc(PT_KV_F16, 0, 1, 2e-6, true);
	run_case_acc(PT_KV_F16, 21, 64, 2e-6, true);
}

PT_TEST(test_kv_attention_f32_matches_double)
{
	run_case(PT_KV_F32, 0, 1, 2e-6);
}

PT_TEST(test_kv_attention_f16_matches_double_within_f16_accumulation)
{
	/* V is accumulated in F16 as ggml does: the running sum reaches ~300 over 300 keys, where
	 * an F16 ulp is 0.25, so the normalised result carries errors of a few 1e-3 */
	run_case(PT_KV_F16, 0, 1, 8e-3);
}

PT_TEST(test_kv_sliding_ring_wraps)
{
	run_case(PT_KV_F32, 17, 1, 2e-6);
	run_case(PT_KV_F32, 40, 8, 2e-6);
	run_case(PT_KV_F16, 33, 4, 4e-3);
}

PT_TEST(test_kv_single_key_is_v_and_merge_exact)
{
	struct pt_kv kv;
	struct pt_kv_layer_desc d = { 1, 4, 4, 0, false };
	REQUIRE(pt_kv_init(&kv, PT_KV_F32, 1, &d, 8, 1, NULL) == PT_OK);
	const float k[4] = { 1, 2, 3, 4 }, v[4] = { 0.5f, -1, 2, 8 }, q[4] = { 1, 0, 0, 0 };
	pt_kv_store(&kv, 0, 0, k, v);
	float out[4];
	/* sized by the contract (210 floats here: transposed K blocks), not a guess */
	float *scratch = pt_mallocn(pt_attn_scratch_floats(&kv, 0, 1), sizeof(float));
	REQUIRE(scratch != NULL);
	struct pt_attn_args a = { 1.0f, 0.0f, false };
	pt_attn_row(&kv, 0, 1, q, 0, &a, 0, out, scratch);
	pt_free(scratch);
	for (int i = 0; i < 4; i++)
		CHECK(out[i] == v[i]);
	/* merge of two halves equals the closed form */
	float a0[1] = { 2.0f }, b0[1] = { 4.0f };
	struct pt_attn_part pa = { 1.0f, 1.0f, a0 }, pb = { 3.0f, 2.0f, b0 };
	pt_attn_merge(&pa, &pb, 1);
	CHECK_NEAR(pa.m, 3.0f, 0);
	CHECK_NEAR(pa.s, expf(-2.0f) + 2.0f, 1e-6);
	CHECK_NEAR(pa.acc[0], 2.0f * expf(-2.0f) + 4.0f, 1e-6);
	pt_kv_fini(&kv);
}

PT_TEST(test_kv_init_rejects_zero_dims)
{
	struct pt_kv kv;
	struct pt_kv_layer_desc d = { 0, 4, 4, 0, false };
	struct pt_error err = { 0 };
	CHECK_EQ_INT(pt_kv_init(&kv, PT_KV_F16, 1, &d, 8, 1, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "layer 0");
	enum pt_kv_type t;
	CHECK(pt_kv_type_from_name("f32", &t) == 0 && t == PT_KV_F32);
	CHECK(pt_kv_type_from_name("q4_0", &t) == -1);
}

/* The one-row F16 path or the tiled path, key by key as ggml defines it: the sequential
 * reference pt_attn_group (transposed K blocks, groups, chunks) must reproduce bit for bit. */
static void seq_ref(const float *q, int64_t lo, int64_t hi, bool f32_acc, float scale,
		    const float (*kk)[DK], const float (*vv)[DV], float *m_out, float *s_out,
		    float *acc)
{
	float qq[DK], m = -INFINITY, s = 0.0f;
	for (int d = 0; d < DK; d++)
		qq[d] = f32_acc ? q[d] : pt_fp16_to_f32(pt_f32_to_fp16(q[d]));
	for (int d = 0; d < DV; d++)
		acc[d] = 0.0f;
	for (int64_t p = lo; p < hi; p++) {
		float dot = 0.0f;
		for (int d = 0; d < DK; d++)
			dot = fmaf(pt_fp16_to_f32(pt_f32_to_fp16(kk[p][d])), qq[d], dot);
		const float sc = dot * scale;
		float ms = 1.0f, vs = 1.0f;
		if (sc > m) {
			ms = pt_kern_expf(m - sc);
			m = sc;
		} else {
			vs = pt_kern_expf(sc - m);
		}
		for (int d = 0; d < DV; d++) {
			float x = acc[d];
			if (ms != 1.0f)
				x = x * ms;
			if (!f32_acc)
				x = pt_fp16_to_f32(pt_f32_to_fp16(x));
			x = fmaf(pt_fp16_to_f32(pt_f32_to_fp16(vv[p][d])), vs, x);
			acc[d] = f32_acc ? x : pt_fp16_to_f32(pt_f32_to_fp16(x));
		}
		const float t = s * ms;
		s = t + vs;
	}
	*m_out = m;
	*s_out = s;
}

enum { RPOS = 200, RCAP = 70 };

PT_TEST(test_kv_group_attention_bit_identical_to_sequential_reference)
{
	/* one KV head, 4 query heads; a ring of 80 slots (5 blocks) so ranges wrap; every range
	 * length 1..70 from several starts across block edges; positions rewritten after a
	 * truncation must be the ones attended */
	static float kk[RPOS][DK], vv[RPOS][DV];
	struct pt_kv kv;
	struct pt_kv_layer_desc d = { 1, DK, DV, 64, false };
	struct pt_error err = { 0 };
	REQUIRE(pt_kv_init(&kv, PT_KV_F16, 1, &d, RPOS, RCAP - 63, &err) == PT_OK);
	CHECK_EQ_INT(kv.layers[0].cap, 80);
	float *scratch = pt_mallocn(pt_attn_scratch_floats(&kv, 0, 4), sizeof(float));
	float q[4 * DK], m[4], s[4], acc[4 * DV], rm, rs_, racc[DV];
	uint32_t bad = 0, runs = 0;
	for (int64_t p = 0; p < RPOS; p++) {
		for (int i = 0; i < DK; i++)
			kk[p][i] = 2.0f * frnd();
		for (int i = 0; i < DV; i++)
			vv[p][i] = frnd();
		pt_kv_store(&kv, 0, p, kk[p], vv[p]);
		if (p == 150) { /* truncate to 120 and write 120..150 again with new values */
			for (int64_t r = 120; r <= 150; r++) {
				for (int i = 0; i < DK; i++)
					kk[r][i] = 2.0f * frnd();
				pt_kv_store(&kv, 0, r, kk[r], vv[r]);
			}
		}
		if (p % 7 != 3 && p < 150)
			continue;
		for (int i = 0; i < 4 * DK; i++)
			q[i] = 2.0f * frnd();
		for (int64_t len = 1; len <= RCAP && len <= p + 1; len += (len < 20 ? 1 : 7)) {
			for (int f32_acc = 0; f32_acc < 2; f32_acc++) {
				struct pt_attn_args a = { 0.125f, 0.0f, f32_acc != 0 };
				pt_attn_group(&kv, 0, 0, q, DK, 4, p + 1 - len, p + 1, &a, m, s, acc,
					      scratch);
				for (int h = 0; h < 4; h++) {
					seq_ref(q + h * DK, p + 1 - len, p + 1, f32_acc, 0.125f,
						(const float (*)[DK])kk, (const float (*)[DV])vv, &rm,
						&rs_, racc);
					bad += memcmp(&rm, &m[h], 4) != 0 || memcmp(&rs_, &s[h], 4) != 0 ||
					       memcmp(racc, acc + h * DV, sizeof racc) != 0;
					runs++;
				}
			}
		}
	}
	CHECK(runs > 1000);
	CHECK_EQ_INT(bad, 0);
	pt_free(scratch);
	pt_kv_fini(&kv);
}

/* pt_attn_tile: rows of queries taken on together over a shared key range, then row by row
 * over the rest (as the forward pass's prefill tiles run), give each query the bits
 * pt_attn_group gives it alone over its whole range: F16 cache (one-row and tiled
 * numerics) and F32 cache, ranges and split points across K-block and chunk edges. */
PT_TEST(test_kv_tile_rows_bit_identical_to_group)
{
	enum { TR = 3, TH = 4, TPOS = 160 };
	for (int type = 0; type < 2; type++) {
		struct pt_kv kv;
		struct pt_kv_layer_desc d = { 2, DK, DV, 0, false };
		struct pt_error err = { 0 };
		REQUIRE(pt_kv_init(&kv, type ? PT_KV_F32 : PT_KV_F16, 1, &d, TPOS, 8, &err) ==
			PT_OK);
		float *scratch = pt_mallocn(pt_attn_scratch_floats(&kv, 0, TR * TH), sizeof(float));
		REQUIRE(scratch != NULL);
		float kx[2 * DK], vx[2 * DV];
		for (int64_t p = 0; p < TPOS; p++) {
			for (int i = 0; i < 2 * DK; i++)
				kx[i] = 2.0f * frnd();
			for (int i = 0; i < 2 * DV; i++)
				vx[i] = frnd();
			pt_kv_store(&kv, 0, p, kx, vx);
		}
		/* rows of 2 KV heads x TH query heads; the tile takes KV head 1's heads */
		static float q[TR][2 * TH * DK];
		float m[TR * TH], s[TR * TH], acc[TR * TH * DV];
		float gm[TH], gs[TH], gacc[TH * DV];
		uint32_t bad = 0, runs = 0;
		for (int64_t lo = 0; lo < 40; lo += 13)
			for (int64_t hi0 = lo; hi0 < TPOS - TR; hi0 += 11) {
				for (int r = 0; r < TR; r++)
					for (int i = 0; i < 2 * TH * DK; i++)
						q[r][i] = 2.0f * frnd();
				const int64_t mid = lo + (hi0 - lo) * (hi0 % 3) / 2; /* lo, middle, hi0 */
				for (int f32_acc = 0; f32_acc < 2; f32_acc++) {
					struct pt_attn_args a = { 0.125f, 0.0f, f32_acc != 0 };
					for (int i = 0; i < TR * TH; i++) {
						m[i] = -INFINITY;
						s[i] = 0.0f;
					}
					memset(acc, 0, sizeof acc);
					const float *q1 = q[0] + TH * DK;
					pt_attn_tile(&kv, 0, 1, q1, DK, 2 * TH * DK, TH, TR, lo, mid, &a,
						     m, s, acc, scratch);
					pt_attn_tile(&kv, 0, 1, q1, DK, 2 * TH * DK, TH, TR, mid, hi0 + 1,
						     &a, m, s, acc, scratch);
					for (int r = 1; r < TR; r++)
						pt_attn_tile(&kv, 0, 1, q1 + r * 2 * TH * DK, DK, 0, TH, 1,
							     hi0 + 1, hi0 + 1 + r, &a, m + r * TH,
							     s + r * TH, acc + r * TH * DV, scratch);
					for (int r = 0; r < TR; r++) {
						pt_attn_group(&kv, 0, 1, q[r] + TH * DK, DK, TH, lo,
							      hi0 + 1 + r, &a, gm, gs, gacc, scratch);
						bad += memcmp(gm, m + r * TH, sizeof gm) != 0 ||
						       memcmp(gs, s + r * TH, sizeof gs) != 0 ||
						       memcmp(gacc, acc + r * TH * DV, sizeof gacc) != 0;
						runs++;
					}
				}
			}
		CHECK(runs > 100);
		CHECK_EQ_INT(bad, 0);
		pt_free(scratch);
		pt_kv_fini(&kv);
	}
}

/* MLA: a cache whose V lives in K (v_in_k, no V array) attends bit-identically to one that
 * stores the same values (K's first dv) as a separate V, for F16 and F32 caches, one-row and
 * tiled numerics, across K-block and chunk boundaries; and it takes only the K bytes. */
PT_TEST(test_kv_v_in_k_bit_identical_to_separate_v)
{
	enum { MDK = 48, MDV = 32, MH = 3, MPOS = 150 };
	static float kr[MPOS][MDK], q[MH * MDK];
	for (int p = 0; p < MPOS; p++)
		for (int i = 0; i < MDK; i++)
			kr[p][i] = frnd();
	for (int i = 0; i < MH * MDK; i++)
		q[i] = frnd();
	for (int t = 0; t < 2; t++) {
		const enum pt_kv_type type = t ? PT_KV_F32 : PT_KV_F16;
		struct pt_kv a, b;
		struct pt_kv_layer_desc da = { 1, MDK, MDV, 0, true }, db = { 1, MDK, MDV, 0, false };
		struct pt_error err = { 0 };
		REQUIRE(pt_kv_init(&a, type, 1, &da, MPOS, 8, &err) == PT_OK);
		REQUIRE(pt_kv_init(&b, type, 1, &db, MPOS, 8, &err) == PT_OK);
		CHECK(a.layers[0].v == NULL && a.layers[0].row_v == 0);
		CHECK(pt_kv_snapshot_bytes(&a, MPOS) * 2 < pt_kv_snapshot_bytes(&b, MPOS) * 2 &&
		      pt_kv_snapshot_bytes(&b, MPOS) - pt_kv_snapshot_bytes(&a, MPOS) ==
			      (uint64_t)160 * MDV * (t ? 4 : 2));
		for (int p = 0; p < MPOS; p++) {
			pt_kv_store(&a, 0, p, kr[p], NULL);
			pt_kv_store(&b, 0, p, kr[p], kr[p]);
		}
		for (int acc = 0; acc < 2; acc++) {
			struct pt_attn_args args = { 0.1f, 0.0f, acc == 1 };
			float *sa = pt_mallocn(pt_attn_scratch_floats(&a, 0, MH), sizeof(float));
			float *sb = pt_mallocn(pt_attn_scratch_floats(&b, 0, MH), sizeof(float));
			float oa[MH * MDV], ob[MH * MDV];
			REQUIRE(sa && sb);
			for (int64_t pos = 0; pos < MPOS; pos += 37) {
				pt_attn_row(&a, 0, MH, q, pos, &args, 0, oa, sa);
				pt_attn_row(&b, 0, MH, q, pos, &args, 0, ob, sb);
				CHECK(memcmp(oa, ob, sizeof oa) == 0);
			}
			pt_attn_row(&a, 0, MH, q, MPOS - 1, &args, 40, oa, sa);
			pt_attn_row(&b, 0, MH, q, MPOS - 1, &args, 40, ob, sb);
			CHECK(memcmp(oa, ob, sizeof oa) == 0);
			pt_free(sa);
			pt_free(sb);
		}
		pt_kv_fini(&a);
		pt_kv_fini(&b);
	}
}

/* Attention sinks (gpt-oss): folding sink sigma into a head's (m, s, acc) equals a softmax
 * whose denominator has e^sigma added - both when sigma is below the max and above it. */
PT_TEST(test_kv_attention_sink_fold)
{
	const float sc[3] = { 0.3f, -0.2f, 0.9f }, v[3][2] = { { 1, 2 }, { -1, 0.5f }, { 3, -2 } };
	const float sinks[2] = { 0.1f, 4.0f };
	for (int t = 0; t < 2; t++) {
		float acc[2] = { 0, 0 }, m = 0.9f, s = 0;
		for (int j = 0; j < 3; j++) {
			const float e = expf(sc[j] - m);
			s += e;
			acc[0] += e * v[j][0];
			acc[1] += e * v[j][1];
		}
		struct pt_attn_part p = { m, s, acc };
		pt_attn_sink(&p, sinks[t], 2);
		float out[2];
		pt_attn_finish(&p, 2, out);
		double den = exp(sinks[t]), num[2] = { 0, 0 };
		for (int j = 0; j < 3; j++) {
			den += exp(sc[j]);
			num[0] += exp(sc[j]) * v[j][0];
			num[1] += exp(sc[j]) * v[j][1];
		}
		CHECK(fabs(out[0] - num[0] / den) < 1e-6);
		CHECK(fabs(out[1] - num[1] / den) < 1e-6);
		CHECK(p.m == (t ? 4.0f : 0.9f));
	}
}

/* V is stored head-major (one head's keys adjacent: the attention's reads stream instead of
 * jumping a whole row - every head - per key); a snapshot keeps slot-major rows (its size and
 * bytes are those rows'), a cache loaded from it attends bit-identically to the one saved,
 * and a copy of the cache too. */
PT_TEST(test_kv_v_head_major_snapshot_slot_major)
{
	enum { SPOS = 70 };
	struct pt_kv_layer_desc d[2] = { { NKV, DK, DV, 0, false }, { 1, 48, 48, 0, false } };
	for (int t = 0; t < 2; t++) {
		const enum pt_kv_type type = t ? PT_KV_F32 : PT_KV_F16;
		const size_t esz = t ? 4 : 2;
		struct pt_kv a, b;
		struct pt_error err = { 0 };
		REQUIRE(pt_kv_init(&a, type, 2, d, 128, 8, &err) == PT_OK);
		REQUIRE(pt_kv_init(&b, type, 2, d, 128, 8, &err) == PT_OK);
		const uint32_t cap = a.layers[0].cap;
		CHECK(a.layers[0].row_v == NKV * DV && a.layers[1].row_v == 48);
		static float sk[SPOS][NKV * DK], sv[SPOS][NKV * DV];
		for (int p = 0; p < SPOS; p++) {
			for (int i = 0; i < NKV * DK; i++)
				sk[p][i] = frnd();
			for (int i = 0; i < NKV * DV; i++)
				sv[p][i] = frnd();
			for (uint32_t il = 0; il < 2; il++)
				pt_kv_store(&a, il, p, sk[p], sv[p]);
		}
		const uint64_t bytes = pt_kv_snapshot_bytes(&a, SPOS);
		/* 80 slots (whole K blocks) of K and V rows, no padding */
		CHECK_EQ_INT((long long)bytes,
			     (long long)(80 * (NKV * DK + NKV * DV + 48 + 48) * esz));
		uint8_t *buf = pt_malloc(bytes);
		REQUIRE(buf);
		memset(buf, 0xA5, bytes);
		pt_kv_save(&a, SPOS, buf);
		/* layer 0's V part: slot 5's row (head 0, then head 1) right after slot 4's; in the
		 * cache head 1's values of slot 5 follow its values of slot 4 */
		const uint8_t *v0 = buf + 80 * NKV * DK * esz, *va = a.layers[0].v;
		for (uint32_t h = 0; h < NKV; h++)
			CHECK(memcmp(v0 + (5 * NKV + h) * DV * esz, va + ((size_t)h * cap + 5) * DV * esz,
				     DV * esz) == 0);
		if (t) /* F32: the values as stored */
			CHECK(memcmp(va + ((size_t)cap + 5) * DV * esz, sv[5] + DV, DV * esz) == 0);
		pt_kv_load(&b, SPOS, buf);
		struct pt_kv c;
		REQUIRE(pt_kv_init(&c, type, 2, d, 128, 8, &err) == PT_OK);
		pt_kv_copy(&c, &a, SPOS);
		for (int acc = 0; acc < 2; acc++) {
			struct pt_attn_args args = { 0.2f, 0.0f, acc == 1 };
			float *sa = pt_mallocn(pt_attn_scratch_floats(&a, 0, NH), sizeof(float));
			float *sb = pt_mallocn(pt_attn_scratch_floats(&b, 0, NH), sizeof(float));
			float q[NH * DK], oa[NH * DV], ob[NH * DV], oc[NH * DV];
			REQUIRE(sa && sb);
			for (int i = 0; i < NH * DK; i++)
				q[i] = frnd();
			pt_attn_row(&a, 0, NH, q, SPOS - 1, &args, 0, oa, sa);
			pt_attn_row(&b, 0, NH, q, SPOS - 1, &args, 0, ob, sb);
			pt_attn_row(&c, 0, NH, q, SPOS - 1, &args, 0, oc, sb);
			CHECK(memcmp(oa, ob, sizeof oa) == 0);
			CHECK(memcmp(oa, oc, sizeof oa) == 0);
			pt_free(sa);
			pt_free(sb);
		}
		pt_free(buf);
		pt_kv_fini(&a);
		pt_kv_fini(&b);
		pt_kv_fini(&c);
	}
}

/* ---- Q8_0 cache ----------------------------------------------------------------------------- */

/* ggml's quantize_row_q8_0_ref then its dequantization, written out here as the spec: per 32
 * values d = max|x| / 127 stored as F16, codes roundf(x / d) (x * (1 / d)), value code * d. */
static void q8_dequant(const float *x, float *y, uint32_t n)
{
	for (uint32_t g = 0; g < n; g += 32) {
		float amax = 0.0f;
		for (uint32_t i = 0; i < 32; i++)
			amax = fmaxf(amax, fabsf(x[g + i]));
		const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		const float d16 = pt_fp16_to_f32(pt_f32_to_fp16(d));
		for (uint32_t i = 0; i < 32; i++)
			y[g + i] = (float)(int8_t)roundf(x[g + i] * id) * d16;
	}
}

enum { QPOS = 200, QL = 3 };
static const struct pt_kv_layer_desc q8_desc[QL] = {
	{ NKV, 64, 32, 0, false }, /* GQA, dk != dv */
	{ 1, 64, 64, 40, false },  /* a sliding ring that wraps */
	{ 1, 96, 64, 0, true },    /* MLA: V is K's first 64 values */
};

/* A Q8_0 cache attends exactly as an F32 cache holding the dequantized keys and values (the
 * widening is exact and the chains are the F32 ones): every layer shape, whole ranges and
 * split-K blocks, rows of queries tiled together, a softcap, groups of zeros (d = 0) and
 * outliers; its snapshot and copy attend the same; sizes are 17/16 bytes a value. */
PT_TEST(test_kv_q8_0_bit_identical_to_f32_of_dequantized_values)
{
	struct pt_kv q8, f32, snap, cp;
	struct pt_error err = { 0 };
	REQUIRE(pt_kv_init(&q8, PT_KV_Q8_0, QL, q8_desc, QPOS, 8, &err) == PT_OK);
	REQUIRE(pt_kv_init(&f32, PT_KV_F32, QL, q8_desc, QPOS, 8, &err) == PT_OK);
	REQUIRE(pt_kv_init(&snap, PT_KV_Q8_0, QL, q8_desc, QPOS, 8, &err) == PT_OK);
	REQUIRE(pt_kv_init(&cp, PT_KV_Q8_0, QL, q8_desc, QPOS, 8, &err) == PT_OK);
	CHECK_EQ_INT(q8.layers[1].cap, 48);
	static float k[NKV * 96], v[NKV * 64], kd[NKV * 96], vd[NKV * 64];
	for (int64_t p = 0; p < QPOS; p++)
		for (uint32_t il = 0; il < QL; il++) {
			const struct pt_kv_layer *L = &q8.layers[il];
			const float sc = p % 5 == 0 ? 40.0f : 1.5f;
			for (size_t i = 0; i < L->row_k; i++)
				k[i] = p % 11 == 4 && i < 32 ? 0.0f : sc * frnd();
			for (size_t i = 0; i < L->row_v; i++)
				v[i] = p % 13 == 6 && i >= 32 ? 0.0f : frnd();
			k[p % L->row_k] *= p % 3 == 0 ? 30.0f : 1.0f; /* an outlier in its group */
			q8_dequant(k, kd, (uint32_t)L->row_k);
			q8_dequant(v, vd, (uint32_t)L->row_v);
			pt_kv_store(&q8, il, p, k, L->row_v ? v : NULL);
			pt_kv_store(&f32, il, p, kd, L->row_v ? vd : NULL);
		}
	const uint64_t bytes = pt_kv_snapshot_bytes(&q8, QPOS);
	CHECK_EQ_INT((long long)bytes,
		     (long long)((208 * (NKV * 64 + NKV * 32 + 96) + 48 * (64 + 64)) * 17 / 16));
	uint8_t *buf = pt_malloc(bytes);
	REQUIRE(buf);
	pt_kv_save(&q8, QPOS, buf);
	pt_kv_load(&snap, QPOS, buf);
	pt_kv_copy(&cp, &q8, QPOS);
	pt_free(buf);
	uint32_t bad = 0, runs = 0;
	for (uint32_t il = 0; il < QL; il++) {
		const struct pt_kv_layer *L = &q8.layers[il];
		const uint32_t nh = L->d.n_kv_head * 4, dk = L->d.head_dim_k, dv = L->d.head_dim_v;
		float *sa = pt_mallocn(pt_attn_scratch_floats(&q8, il, 3 * 4), sizeof(float));
		float *sb = pt_mallocn(pt_attn_scratch_floats(&f32, il, 3 * 4), sizeof(float));
		static float q[3 * 8 * 96], oa[8 * 64], ob[8 * 64];
		REQUIRE(sa && sb);
		for (int64_t pos = 3; pos < QPOS; pos += 17) {
			for (uint32_t i = 0; i < 3 * nh * dk; i++)
				q[i] = 2.0f * frnd();
			for (int cap = 0; cap < 2; cap++) {
				struct pt_attn_args a = { 0.125f, cap ? 3.0f : 0.0f, false };
				for (uint32_t blk = 0; blk <= 40; blk += 40) {
					pt_attn_row(&q8, il, nh, q, pos, &a, blk, oa, sa);
					pt_attn_row(&f32, il, nh, q, pos, &a, blk, ob, sb);
					bad += memcmp(oa, ob, (size_t)nh * dv * 4) != 0;
					pt_attn_row(&snap, il, nh, q, pos, &a, blk, ob, sa);
					bad += memcmp(oa, ob, (size_t)nh * dv * 4) != 0;
					pt_attn_row(&cp, il, nh, q, pos, &a, blk, ob, sa);
					bad += memcmp(oa, ob, (size_t)nh * dv * 4) != 0;
					runs += 3;
				}
				/* three rows x 4 query heads of KV head 0 over one shared range */
				int64_t first, count;
				pt_kv_range(&q8, il, pos - 2, &first, &count);
				float m[2][12], s[2][12];
				static float acc[2][12 * 64];
				for (int t = 0; t < 2; t++) {
					for (int i = 0; i < 12; i++) {
						m[t][i] = -INFINITY;
						s[t][i] = 0.0f;
					}
					memset(acc[t], 0, sizeof acc[t]);
					pt_attn_tile(t ? &f32 : &q8, il, 0, q, dk, (size_t)nh * dk, 4, 3,
						     first, pos - 2 + 1, &a, m[t], s[t], acc[t],
						     t ? sb : sa);
				}
				bad += memcmp(m[0], m[1], sizeof m[0]) != 0 ||
				       memcmp(s[0], s[1], sizeof s[0]) != 0 ||
				       memcmp(acc[0], acc[1], 12 * (size_t)dv * 4) != 0;
				runs++;
			}
		}
		pt_free(sa);
		pt_free(sb);
	}
	CHECK(runs > 200);
	CHECK_EQ_INT(bad, 0);
	pt_kv_fini(&q8);
	pt_kv_fini(&f32);
	pt_kv_fini(&snap);
	pt_kv_fini(&cp);
}

/* Q8_0 needs whole groups of 32 per head; the byte unit the planner uses. */
PT_TEST(test_kv_q8_0_dims_and_value_bytes)
{
	struct pt_kv kv;
	struct pt_error err = { 0 };
	const struct pt_kv_layer_desc bad_k = { 1, 48, 32, 0, false }, bad_v = { 1, 32, 40, 0, false };
	CHECK(pt_kv_init(&kv, PT_KV_Q8_0, 1, &bad_k, 64, 8, &err) == PT_E_INVALID);
	CHECK(strstr(err.msg, "multiples of 32") != NULL);
	CHECK(pt_kv_init(&kv, PT_KV_Q8_0, 1, &bad_v, 64, 8, &err) == PT_E_INVALID);
	CHECK(pt_kv_init(&kv, PT_KV_F16, 1, &bad_k, 64, 8, &err) == PT_OK);
	pt_kv_fini(&kv);
	CHECK_EQ_INT((long long)pt_kv_value_bytes(PT_KV_Q8_0, 128), 136);
	CHECK_EQ_INT((long long)pt_kv_value_bytes(PT_KV_F16, 128), 256);
	CHECK_EQ_INT((long long)pt_kv_value_bytes(PT_KV_F32, 128), 512);
	enum pt_kv_type t = PT_KV_F16;
	CHECK(pt_kv_type_from_name("q8_0", &t) == 0 && t == PT_KV_Q8_0);
	CHECK(pt_kv_type_from_name("q8", &t) == -1);
}
