/* attn_avx512.c - AVX-512 twins of the attention inner loops in src/kern/attn.c, bit-identical
 * to the scalar code as the AVX2 ones are: a transposed K block of 16 keys is one vector, so
 * a key dot is one lane's FMA chain in index order; two blocks x eight queries (or four
 * blocks x four) keep sixteen chains in flight.  V accumulators for four queries x 64 values
 * stay in registers across all keys of a call; a bit per key marks the keys where some
 * query of the tile rescales.  Calls of many queries widen their F16 keys or values to F32
 * once, so the tiles do not convert them again each.  The softmax sums run sixteen queries'
 * chains a vector, over 16 x 16 transposes of their weights. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kern/attn_internal.h"
#include "kern/kern_internal.h"

#define BLK PT_KERN_ATTN_BLOCK
#define INLINE static inline __attribute__((always_inline))
/* Calls of many queries widen their keys (WIDE_DOTS_MIN_Q) or values (WIDE_VACC_MIN_Q) to
 * F32 first, a group of blocks or rows at a time in WIDE_FLOATS of stack (dots_wide); with
 * 16-32 queries the keys measured no faster widened, the values faster. */
#define WIDE_DOTS_MIN_Q 48
#define WIDE_VACC_MIN_Q 16
#define WIDE_FLOATS 16384

INLINE __m512 load_ph(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* Sixteen int8 codes as F32. */
INLINE __m512 codes16(const int8_t *p)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* ---- key dots ------------------------------------------------------------------------------ */

/* pk (NULL: none): the next call's blocks matching these, whose lines are requested one per
 * block every second dimension (a 64-byte line holds two of a block's 32-byte rows). */
/* wide: k holds F32 blocks (widened once for many queries, dots_wide below), not F16. */
INLINE __m512 load_k(const void *k, size_t at, const bool wide)
{
	return wide ? _mm512_loadu_ps((const float *)k + at) : load_ph((const uint16_t *)k + at);
}

INLINE void dots_blk(const void *k, size_t kb_stride, const int nb, const float *q,
		     size_t q_stride, const uint32_t nq, uint32_t n, float *out, size_t ld,
		     const uint16_t *pk, const bool wide)
{
	__m512 a[8][4];
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++)
			a[i][b] = _mm512_setzero_ps();
	for (uint32_t d = 0; d < n; d++) {
		__m512 kk[4];
		if (pk && (d & 1) == 0)
			_Pragma("GCC unroll 4")
			for (int b = 0; b < nb; b++)
				_mm_prefetch((const char *)(pk + b * kb_stride + d * BLK),
					     _MM_HINT_T0);
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++)
			kk[b] = load_k(k, b * kb_stride + d * BLK, wide);
		_Pragma("GCC unroll 8")
		for (uint32_t i = 0; i < nq; i++) {
			const __m512 qb = _mm512_set1_ps(q[i * q_stride + d]);
			_Pragma("GCC unroll 4")
			for (int b = 0; b < nb; b++)
				a[i][b] = _mm512_fmadd_ps(kk[b], qb, a[i][b]);
		}
	}
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++)
			_mm512_storeu_ps(out + i * ld + b * BLK, a[i][b]);
}

/* Tiles of up to 16 accumulators: 4 blocks x <= 4 queries, or 2 blocks x <= 8 queries (a
 * GQA group of 8 converts each K block once; 16 independent chains hide the FMA latency
 * with room to spare where 8 just covered it). */
#define DOTS_H(nb, q) dots_blk(k, kb_stride, nb, qi, q_stride, q, n, o, ld, pk, false)
#define DOTS_Q4(nb)                                                                           \
	switch (n_q - i) {                                                                    \
	case 1: DOTS_H(nb, 1); break;                                                         \
	case 2: DOTS_H(nb, 2); break;                                                         \
	case 3: DOTS_H(nb, 3); break;                                                         \
	default: DOTS_H(nb, 4); break;                                                        \
	}
#define DOTS_Q8(nb)                                                                           \
	switch (n_q - i) {                                                                    \
	case 1: DOTS_H(nb, 1); break;                                                         \
	case 2: DOTS_H(nb, 2); break;                                                         \
	case 3: DOTS_H(nb, 3); break;                                                         \
	case 4: DOTS_H(nb, 4); break;                                                         \
	case 5: DOTS_H(nb, 5); break;                                                         \
	case 6: DOTS_H(nb, 6); break;                                                         \
	case 7: DOTS_H(nb, 7); break;                                                         \
	default: DOTS_H(nb, 8); break;                                                        \
	}

#define DOTS_W(nb, q) dots_blk(k, wb, nb, qi, q_stride, q, n, o, ld, NULL, true)
#define DOTS_Q6W(nb)                                                                          \
	switch (n_q - i) {                                                                    \
	case 1: DOTS_W(nb, 1); break;                                                         \
	case 2: DOTS_W(nb, 2); break;                                                         \
	case 3: DOTS_W(nb, 3); break;                                                         \
	case 4: DOTS_W(nb, 4); break;                                                         \
	case 5: DOTS_W(nb, 5); break;                                                         \
	default: DOTS_W(nb, 6); break;                                                        \
	}

static void dots_wide(const uint16_t *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		      size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld,
		      const uint16_t *kb_next);

/* The first query tile of each block tile requests the next call's matching blocks. */
void pt_kern_attn_dots_avx512(ATTN_DOTS_ARGS)
{
	if (n_q >= WIDE_DOTS_MIN_Q && n > 0 && n <= WIDE_FLOATS / BLK) {
		dots_wide(kb, kb_stride, n_blk, q, q_stride, n_q, n, out, ld, kb_next);
		return;
	}
	uint32_t b = 0;
	if (n_q <= 4) /* few queries: four blocks at once */
		for (; b + 4 <= n_blk; b += 4) {
			const uint16_t *k = kb + b * kb_stride;
			const uint16_t *pk = kb_next ? kb_next + b * kb_stride : NULL;
			for (uint32_t i = 0; i < n_q; i += 4, pk = NULL) {
				const float *qi = q + i * q_stride;
				float *o = out + i * ld + b * BLK;
				DOTS_Q4(4)
			}
		}
	for (; b < n_blk; b += 2) {
		const uint16_t *k = kb + b * kb_stride;
		const uint16_t *pk = kb_next ? kb_next + b * kb_stride : NULL;
		for (uint32_t i = 0; i < n_q; i += 8, pk = NULL) {
			const float *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			if (b + 2 <= n_blk) {
				DOTS_Q8(2)
			} else {
				DOTS_Q8(1)
			}
		}
	}
}

/* ---- exponential and softmax weights ------------------------------------------------------ */

/* pt_kern_expf on 16 lanes, operation for operation. */
INLINE __m512 exp16(__m512 x)
{
	const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
	const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(ATTN_EXP_LO)),
					_mm512_set1_ps(ATTN_EXP_HI));
	const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(ATTN_LOG2E)),
					      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-ATTN_LN2_HI), xc);
	r = _mm512_fmadd_ps(k, _mm512_set1_ps(-ATTN_LN2_LO), r);
	__m512 p = _mm512_set1_ps(ATTN_EXP_C7);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C5));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	const __m512i n = _mm512_cvtps_epi32(k);
	const __m512i n1 = _mm512_srai_epi32(n, 1), n2 = _mm512_sub_epi32(n, n1);
	const __m512i bias = _mm512_set1_epi32(127);
	const __m512 p1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
	const __m512 p2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
	const __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, p1), p2);
	return _mm512_mask_add_ps(y, nan, x, x);
}

/* Where later is not above earlier, take earlier (the scalar loop's running max). */
INLINE __m512 keep_first_max(__m512 earlier, __m512 later)
{
	return _mm512_mask_mov_ps(earlier, _mm512_cmp_ps_mask(later, earlier, _CMP_GT_OQ), later);
}

/* ms/vs of 16 keys (n valid) of one query; returns m after them, *up: whether m rose. */
INLINE float softmax16(const float *dots, uint32_t n, float scale, float m, float *ms,
		       float *vs, bool *up_any)
{
	const __mmask16 valid = (__mmask16)((1u << n) - 1);
	const __m512 sc = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, dots), _mm512_set1_ps(scale));
	const __m512 mv = _mm512_set1_ps(m);
	const __m512 one = _mm512_set1_ps(1.0f);
	if ((_mm512_cmp_ps_mask(sc, mv, _CMP_GT_OQ) & valid) == 0) {
		/* no key above m: m stays, every ms is 1 */
		_mm512_mask_storeu_ps(ms, valid, one);
		_mm512_mask_storeu_ps(vs, valid, exp16(_mm512_sub_ps(sc, mv)));
		return m;
	}
	*up_any = true;
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	__m512 t = _mm512_mask_mov_ps(sc, _mm512_cmp_ps_mask(sc, sc, _CMP_UNORD_Q), ninf);
	for (int s = 1; s < 16; s <<= 1) { /* inclusive running max, log steps */
		const __m512i idx = _mm512_sub_epi32(
			_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
			_mm512_set1_epi32(s));
		const __mmask16 lanes = (__mmask16)(0xffffu << s);
		const __m512 sh = _mm512_mask_permutexvar_ps(ninf, lanes, idx, t);
		t = keep_first_max(sh, t);
	}
	const __m512 incl = keep_first_max(mv, t);
	const __m512i up1 =
		_mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
	const __m512 prev = _mm512_mask_permutexvar_ps(mv, 0xfffe, up1, incl);
	const __mmask16 up = _mm512_cmp_ps_mask(sc, prev, _CMP_GT_OQ);
	const __m512 e = exp16(_mm512_mask_sub_ps(_mm512_sub_ps(sc, prev), up, prev, sc));
	_mm512_mask_storeu_ps(ms, valid, _mm512_mask_mov_ps(one, up, e));
	_mm512_mask_storeu_ps(vs, valid, _mm512_mask_mov_ps(e, up, one));
	float last[16];
	_mm512_storeu_ps(last, incl);
	return last[n - 1];
}

/* r[0..16) rows in, columns out: r[j] lane i = row i's element j (unpack in pairs of rows,
 * then of pairs, then 128-bit lanes across groups of four rows). */
INLINE void transpose16(__m512 r[16])
{
	__m512 t[16];
	_Pragma("GCC unroll 8")
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	_Pragma("GCC unroll 4")
	for (int i = 0; i < 16; i += 4) {
		const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
		const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
		r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	/* r[4g + c], 128-bit lane L: rows 4g .. 4g + 3 of column 4L + c */
	_Pragma("GCC unroll 4")
	for (int c = 0; c < 4; c++) {
		t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
		t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
		t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
		t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
	}
	_Pragma("GCC unroll 8")
	for (int c = 0; c < 8; c++) {
		r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
		r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
	}
}

/* The softmax sums of queries [0, k) (k <= 16), one query a lane: 16 keys at a time, their
 * rows transposed so each key is a vector of the queries' values; then key by key s = s * ms
 * + vs (up: some query's m rose in the call) or s + vs (none did: every ms is 1), the same
 * rounded operations in the same order per query as the scalar chains (sums_k), 16 chains
 * in a vector instead of 8 interleaved scalar ones. */
INLINE void sums16(size_t ld, uint32_t k, uint32_t n, float *s, const float *ms,
		   const float *vs, bool up)
{
	const __mmask16 rows = (__mmask16)((1u << k) - 1);
	__m512 acc = _mm512_maskz_loadu_ps(rows, s);
	for (uint32_t j0 = 0; j0 < n; j0 += 16) {
		const uint32_t nk = n - j0 < 16 ? n - j0 : 16;
		const __mmask16 keys = (__mmask16)((1u << nk) - 1);
		__m512 v[16], w[16];
		_Pragma("GCC unroll 16")
		for (uint32_t i = 0; i < 16; i++)
			v[i] = i < k ? _mm512_maskz_loadu_ps(keys, vs + i * ld + j0)
				     : _mm512_setzero_ps();
		transpose16(v);
		if (up) {
			_Pragma("GCC unroll 16")
			for (uint32_t i = 0; i < 16; i++)
				w[i] = i < k ? _mm512_maskz_loadu_ps(keys, ms + i * ld + j0)
					     : _mm512_setzero_ps();
			transpose16(w);
			for (uint32_t j = 0; j < nk; j++)
				acc = _mm512_add_ps(_mm512_mul_ps(acc, w[j]), v[j]);
		} else {
			for (uint32_t j = 0; j < nk; j++)
				acc = _mm512_add_ps(acc, v[j]);
		}
	}
	_mm512_mask_storeu_ps(s, rows, acc);
}

void pt_kern_attn_softmax_avx512(ATTN_SOFTMAX_ARGS)
{
	for (uint32_t i0 = 0; i0 < n_q; i0 += 16) {
		const uint32_t k = n_q - i0 < 16 ? n_q - i0 : 16;
		bool up = false; /* whether any query of the group rose */
		for (uint32_t i = i0; i < i0 + k; i++)
			for (uint32_t j = 0; j < n; j += 16)
				m[i] = softmax16(dots + i * ld + j, n - j < 16 ? n - j : 16, scale,
						 m[i], ms + i * ld + j, vs + i * ld + j, &up);
		sums16(ld, k, n, s + i0, ms + i0 * ld, vs + i0 * ld, up);
	}
}

/* ---- V accumulation ------------------------------------------------------------------------ */

INLINE __m512 rnd16(__m512 x, const bool f16)
{
	return f16 ? _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)) : x;
}

/* Bit j - j0 set where any of queries [0, nq)'s ms of key j in [j0, j0 + 64) is not 1 (NaN
 * included, as the scalar test); keys past n_k clear. */
INLINE uint64_t keys_scaled(const float *ms, size_t ld, uint32_t nq, uint32_t j0, uint32_t n_k)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	uint64_t any = 0;
	for (uint32_t j = j0; j < n_k && j < j0 + 64; j += 16) {
		const uint32_t r = n_k - j;
		const __mmask16 valid = r >= 16 ? 0xffff : (__mmask16)((1u << r) - 1);
		__mmask16 m = 0;
		for (uint32_t i = 0; i < nq; i++)
			m |= _mm512_mask_cmp_ps_mask(
				valid, _mm512_maskz_loadu_ps(valid, ms + i * ld + j), one,
				_CMP_NEQ_UQ);
		any |= (uint64_t)m << (j - j0);
	}
	return any;
}

/* v: F16 rows, or F32 rows where wide (vacc_wide below; pv is then NULL).  The keys whose
 * ms are all 1 for the tile's queries (once a query's max has settled, nearly all) run the
 * FMAs alone; a bit per key, found 64 keys at a time, marks the others. */
INLINE void vacc_cols(float *acc, size_t acc_ld, const uint32_t nq, const void *v,
		      size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		      const int nv, const bool f16, const uint16_t *pv, const bool wide)
{
	__m512 a[4][4];
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			a[i][c] = _mm512_loadu_ps(acc + i * acc_ld + 16 * c);
	uint64_t scaled = 0;
	for (uint32_t j = 0; j < n_k; j++) {
		__m512 x[4];
		if (j % 64 == 0)
			scaled = keys_scaled(ms, ld, nq, j, n_k);
		if (pv) /* the next call's row j, a line per 32 values */
			_Pragma("GCC unroll 2")
			for (int c = 0; c < nv; c += 2)
				_mm_prefetch((const char *)(pv + j * v_stride + 16 * c), _MM_HINT_T0);
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			x[c] = load_k(v, j * v_stride + 16 * c, wide);
		if (__builtin_expect((scaled >> (j % 64)) & 1, 0)) {
			_Pragma("GCC unroll 4")
			for (uint32_t i = 0; i < nq; i++) {
				const float sm = ms[i * ld + j];
				if (sm != 1.0f)
					_Pragma("GCC unroll 4")
					for (int c = 0; c < nv; c++)
						a[i][c] = rnd16(_mm512_mul_ps(a[i][c],
									      _mm512_set1_ps(sm)),
								f16);
			}
		}
		_Pragma("GCC unroll 4")
		for (uint32_t i = 0; i < nq; i++) {
			const __m512 w = _mm512_set1_ps(vs[i * ld + j]);
			_Pragma("GCC unroll 4")
			for (int c = 0; c < nv; c++)
				a[i][c] = rnd16(_mm512_fmadd_ps(x[c], w, a[i][c]), f16);
		}
	}
	_Pragma("GCC unroll 4")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			_mm512_storeu_ps(acc + i * acc_ld + 16 * c, a[i][c]);
}

#define VACC_CASE(q, nv, f16)                                                                  \
	case q: vacc_cols(a, acc_ld, q, vd, v_stride, n_k, mi, vi, ld, nv, f16, pv, wide); break;
#define VACC_QS4(nv, f16)                                                                     \
	switch (n_q - i) {                                                                    \
	VACC_CASE(1, nv, f16) VACC_CASE(2, nv, f16) VACC_CASE(3, nv, f16)                     \
	default: vacc_cols(a, acc_ld, 4, vd, v_stride, n_k, mi, vi, ld, nv, f16, pv, wide); break; \
	}
#define VACC_TILE(qs, tq, nv, f16)                                                            \
	for (uint32_t i = 0; i < n_q; i += tq) {                                              \
		float *a = acc + i * acc_ld + d;                                              \
		const void *vd = wide ? (const void *)((const float *)v + d)                   \
				      : (const void *)((const uint16_t *)v + d);               \
		const float *mi = ms + i * ld, *vi = vs + i * ld;                             \
		/* the first query tile requests the next call's rows, a line at a time */    \
		const uint16_t *pv = v_next && i == 0 && d % 32 == 0 ? v_next + d : NULL;     \
		qs(nv, f16)                                                                   \
	}

/* Tiles of 16 accumulators, 4 queries x 64 values (8 queries x 32 values, converting each V
 * row once per 8 queries, measured no faster), over columns [0, n16) (a multiple of 16). */
INLINE void vacc_tiles(float *acc, size_t acc_ld, uint32_t n_q, const void *v, size_t v_stride,
		       uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n16,
		       const uint16_t *v_next, const bool f16, const bool wide)
{
	uint32_t d = 0;
	for (; d + 64 <= n16; d += 64)
		VACC_TILE(VACC_QS4, 4, 4, f16)
	for (; d < n16; d += 16)
		VACC_TILE(VACC_QS4, 4, 1, f16)
}

/* ---- many queries over one call: keys and values widened to F32 once ---------------------- */

/* Where more than a few query tiles share a call's keys, each F16 block or row was converted
 * again for every tile (vcvtph2ps takes a slot of the ports the FMAs run on); converting the
 * call's keys or values once into F32 on the stack leaves the tiles plain loads.  F16 to F32
 * is exact: the same values, the same chains, the same results.  The widening requests the
 * next call's lines (kb_next, v_next) as the tiles did. */

/* y[0, n) = x[0, n); px (NULL: none): a line of the next call's matching place per 32 values */
INLINE void widen(const uint16_t *x, float *y, uint32_t n, const uint16_t *px)
{
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16) {
		if (px && i % 32 == 0)
			_mm_prefetch((const char *)(px + i), _MM_HINT_T0);
		_mm512_storeu_ps(y + i, load_ph(x + i));
	}
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		if (px && i % 32 == 0)
			_mm_prefetch((const char *)(px + i), _MM_HINT_T0);
		_mm512_mask_storeu_ps(y + i, m,
				      _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
	}
}

/* The tiles over nb F32 blocks wb floats apart: 4 blocks x 6 queries (24 chains, 10 loads a
 * dimension for 24 FMAs), then pairs and a last single block. */
static void dots_w_tiles(const float *w, size_t wb, uint32_t nb, const float *q,
			 size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld)
{
	uint32_t b = 0;
	for (; b + 4 <= nb; b += 4)
		for (uint32_t i = 0; i < n_q; i += 6) {
			const float *k = w + b * wb, *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			DOTS_Q6W(4)
		}
	for (; b < nb; b += 2)
		for (uint32_t i = 0; i < n_q; i += 6) {
			const float *k = w + b * wb, *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			if (b + 2 <= nb) {
				DOTS_Q6W(2)
			} else {
				DOTS_Q6W(1)
			}
		}
}

static void dots_wide(const uint16_t *kb, size_t kb_stride, uint32_t n_blk, const float *q,
		      size_t q_stride, uint32_t n_q, uint32_t n, float *out, size_t ld,
		      const uint16_t *kb_next)
{
	float w[WIDE_FLOATS];
	const size_t wb = (size_t)n * BLK; /* a widened block */
	const uint32_t per = (uint32_t)(WIDE_FLOATS / wb);
	for (uint32_t b0 = 0; b0 < n_blk; b0 += per) {
		const uint32_t nb = n_blk - b0 < per ? n_blk - b0 : per;
		for (uint32_t b = 0; b < nb; b++)
			widen(kb + (b0 + b) * kb_stride, w + b * wb, (uint32_t)wb,
			      kb_next ? kb_next + (b0 + b) * kb_stride : NULL);
		dots_w_tiles(w, wb, nb, q, q_stride, n_q, n, out + b0 * BLK, ld);
	}
}

void pt_kern_attn_dots_w_avx512(ATTN_DOTS_W_ARGS)
{
	dots_w_tiles(kw, kw_stride, n_blk, q, q_stride, n_q, n, out, ld);
}

/* Columns [0, n - n % 16) with the call's V rows widened a group at a time. */
INLINE void vacc_wide(ATTN_VACC_ARGS, const bool f16)
{
	float w[WIDE_FLOATS];
	const uint32_t n16 = n - n % 16;
	const uint32_t per = WIDE_FLOATS / n16;
	for (uint32_t j0 = 0; j0 < n_k; j0 += per) {
		const uint32_t nk = n_k - j0 < per ? n_k - j0 : per;
		for (uint32_t j = 0; j < nk; j++)
			widen(v + (j0 + j) * v_stride, w + (size_t)j * n16, n16,
			      v_next ? v_next + (j0 + j) * v_stride : NULL);
		vacc_tiles(acc, acc_ld, n_q, w, n16, nk, ms + j0, vs + j0, ld, n16, NULL, f16,
			   true);
	}
}

INLINE void vacc(ATTN_VACC_ARGS, const bool f16)
{
	const uint32_t n16 = n - n % 16;
	if (n_q >= WIDE_VACC_MIN_Q && n >= 16 && n <= WIDE_FLOATS / 16)
		vacc_wide(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, v_next, f16);
	else
		vacc_tiles(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n16, v_next, f16,
			   false);
	if (n16 < n) /* the AVX2 kernel finishes the columns (same arithmetic) */
		(f16 ? pt_kern_attn_vacc_f16_avx2 : pt_kern_attn_vacc_f32_avx2)(
			acc + n16, acc_ld, n_q, v + n16, v_stride, n_k, ms, vs, ld, n - n16,
			v_next ? v_next + n16 : NULL);
}

void pt_kern_attn_vacc_f16_avx512(ATTN_VACC_ARGS)
{
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, v_next, true);
}

void pt_kern_attn_vacc_f32_avx512(ATTN_VACC_ARGS)
{
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, v_next, false);
}

void pt_kern_attn_vacc_w_avx512(ATTN_VACC_W_ARGS)
{
	const uint32_t n16 = n - n % 16;
	vacc_tiles(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n16, NULL, false, true);
	if (n16 < n)
		pt_kern_attn_vacc_w_avx2(acc + n16, acc_ld, n_q, v + n16, v_stride, n_k, ms, vs,
					 ld, n - n16);
}

/* ---- Q8_0 widening (the products are exact: any order is the reference's) ------------------ */

void pt_kern_widen_q8_k_avx512(ATTN_WIDEN_Q8_ARGS)
{
	const size_t sc_at = (size_t)n * BLK; /* the scales follow the codes */
	for (uint32_t d0 = 0; d0 + 32 <= n; d0 += 32) {
		const __m512 sc = load_ph(scales + d0 / 32 * BLK);
		if (next) /* 32 dims: 8 lines of codes, half a line of scales */
			for (uint32_t l = 0; l < 8; l++)
				_mm_prefetch((const char *)(next + (size_t)d0 * BLK + 64 * l),
					     _MM_HINT_T0);
		if (next && d0 % 64 == 0)
			_mm_prefetch((const char *)(next + sc_at) + d0, _MM_HINT_T0);
		for (uint32_t d = d0; d < d0 + 32; d++)
			_mm512_storeu_ps(y + (size_t)d * BLK,
					 _mm512_mul_ps(codes16(codes + (size_t)d * BLK), sc));
	}
}

/* ---- Q8_0 in place, for few queries (a decode's GQA group) ---------------------------------- */

/* nb <= 4 blocks x nq <= 8 queries; each block's 16 keys x 32 dims share a scale vector, the
 * codes of a dimension are widened in registers once for the tile's queries.  pk: the next
 * call's matching blocks, a line of codes per 4 dimensions and the scales' lines. */
INLINE void dots_q8_blk(const int8_t *k, size_t kb_stride, const int nb, const float *q,
			size_t q_stride, const uint32_t nq, uint32_t n, float *out, size_t ld,
			const int8_t *pk)
{
	__m512 a[8][4];
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++)
			a[i][b] = _mm512_setzero_ps();
	const size_t sc_at = (size_t)n * BLK;
	for (uint32_t d0 = 0; d0 < n; d0 += 32) {
		__m512 sc[4];
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++) {
			sc[b] = load_ph((const uint16_t *)(k + b * kb_stride + sc_at) + d0 / 32 * BLK);
			if (pk && d0 % 64 == 0)
				_mm_prefetch((const char *)(pk + b * kb_stride + sc_at) + d0, _MM_HINT_T0);
		}
		for (uint32_t d = d0; d < d0 + 32; d++) {
			__m512 kk[4];
			_Pragma("GCC unroll 4")
			for (int b = 0; b < nb; b++) {
				if (pk && d % 4 == 0)
					_mm_prefetch((const char *)(pk + b * kb_stride + (size_t)d * BLK),
						     _MM_HINT_T0);
				kk[b] = _mm512_mul_ps(codes16(k + b * kb_stride + (size_t)d * BLK), sc[b]);
			}
			_Pragma("GCC unroll 8")
			for (uint32_t i = 0; i < nq; i++) {
				const __m512 qb = _mm512_set1_ps(q[i * q_stride + d]);
				_Pragma("GCC unroll 4")
				for (int b = 0; b < nb; b++)
					a[i][b] = _mm512_fmadd_ps(kk[b], qb, a[i][b]);
			}
		}
	}
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int b = 0; b < nb; b++)
			_mm512_storeu_ps(out + i * ld + b * BLK, a[i][b]);
}

#define DQ8(nb, q) dots_q8_blk(k, kb_stride, nb, qi, q_stride, q, n, o, ld, pk)
#define DQ8_Q(nb, q_max)                                                                      \
	switch (n_q - i < q_max ? n_q - i : q_max) {                                          \
	case 1: DQ8(nb, 1); break;                                                            \
	case 2: DQ8(nb, 2); break;                                                            \
	case 3: DQ8(nb, 3); break;                                                            \
	case 4: DQ8(nb, 4); break;                                                            \
	case 5: DQ8(nb, 5); break;                                                            \
	case 6: DQ8(nb, 6); break;                                                            \
	case 7: DQ8(nb, 7); break;                                                            \
	default: DQ8(nb, 8); break;                                                           \
	}

/* Up to 4 queries: 4 blocks a tile; more: 2 blocks x 8 (16 chains either way). */
void pt_kern_attn_dots_q8_avx512(const int8_t *kb, size_t kb_stride, uint32_t n_blk,
				 const float *q, size_t q_stride, uint32_t n_q, uint32_t n,
				 float *out, size_t ld, const int8_t *kb_next)
{
	const uint32_t step = n_q <= 4 ? 4 : 2;
	for (uint32_t b = 0; b < n_blk; b += step) {
		const int8_t *k = kb + b * kb_stride;
		const int8_t *pk = kb_next ? kb_next + b * kb_stride : NULL;
		const uint32_t nb = n_blk - b < step ? n_blk - b : step;
		for (uint32_t i = 0; i < n_q; i += 8, pk = NULL) {
			const float *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			if (nb == 4) {
				DQ8_Q(4, 4)
			} else if (nb == 3) {
				DQ8_Q(3, 4)
			} else if (nb == 2) {
				DQ8_Q(2, 8)
			} else {
				DQ8_Q(1, 8)
			}
		}
	}
}

/* nq <= 8 queries x 32 values (one scale a row): each row's codes widened in registers
 * once for all the tile's queries.  pv: the next call's rows, requested a row at a time. */
INLINE void vacc_q8_cols(float *acc, size_t acc_ld, const uint32_t nq, const int8_t *v,
			 size_t rb, uint32_t n, uint32_t d, uint32_t n_k, const float *ms,
			 const float *vs, size_t ld, const int8_t *pv)
{
	__m512 a[8][2];
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 2")
		for (int c = 0; c < 2; c++)
			a[i][c] = _mm512_loadu_ps(acc + i * acc_ld + d + 16 * c);
	uint64_t scaled = 0;
	for (uint32_t j = 0; j < n_k; j++) {
		const int8_t *row = v + j * rb;
		if (j % 64 == 0)
			scaled = keys_scaled(ms, ld, nq, j, n_k);
		if (pv && d % 64 == 0)
			_mm_prefetch((const char *)(pv + j * rb + d), _MM_HINT_T0);
		uint16_t h;
		memcpy(&h, row + n + d / 16, sizeof h);
		const __m512 s = _mm512_set1_ps(_cvtsh_ss(h));
		const __m512 x0 = _mm512_mul_ps(codes16(row + d), s);
		const __m512 x1 = _mm512_mul_ps(codes16(row + d + 16), s);
		if (__builtin_expect((scaled >> (j % 64)) & 1, 0)) {
			_Pragma("GCC unroll 8")
			for (uint32_t i = 0; i < nq; i++) {
				const float sm = ms[i * ld + j];
				if (sm != 1.0f) {
					a[i][0] = _mm512_mul_ps(a[i][0], _mm512_set1_ps(sm));
					a[i][1] = _mm512_mul_ps(a[i][1], _mm512_set1_ps(sm));
				}
			}
		}
		_Pragma("GCC unroll 8")
		for (uint32_t i = 0; i < nq; i++) {
			const __m512 w = _mm512_set1_ps(vs[i * ld + j]);
			a[i][0] = _mm512_fmadd_ps(x0, w, a[i][0]);
			a[i][1] = _mm512_fmadd_ps(x1, w, a[i][1]);
		}
	}
	_Pragma("GCC unroll 8")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 2")
		for (int c = 0; c < 2; c++)
			_mm512_storeu_ps(acc + i * acc_ld + d + 16 * c, a[i][c]);
}

#define VQ8(q) vacc_q8_cols(acc + i * acc_ld, acc_ld, q, v, v_stride, n, d, n_k, ms + i * ld, \
			    vs + i * ld, ld, pv)

void pt_kern_attn_vacc_q8_avx512(float *acc, size_t acc_ld, uint32_t n_q, const int8_t *v,
				 size_t v_stride, uint32_t n_k, const float *ms, const float *vs,
				 size_t ld, uint32_t n, const int8_t *v_next)
{
	for (uint32_t d = 0; d + 32 <= n; d += 32)
		for (uint32_t i = 0; i < n_q; i += 8) {
			/* the first query tile requests the next call's rows */
			const int8_t *pv = i == 0 ? v_next : NULL;
			switch (n_q - i < 8 ? n_q - i : 8) {
			case 1: VQ8(1); break;
			case 2: VQ8(2); break;
			case 3: VQ8(3); break;
			case 4: VQ8(4); break;
			case 5: VQ8(5); break;
			case 6: VQ8(6); break;
			case 7: VQ8(7); break;
			default: VQ8(8); break;
			}
		}
}
