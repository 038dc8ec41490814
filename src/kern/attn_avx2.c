/* attn_avx2.c - AVX2/FMA/F16C twins of the attention inner loops in src/kern/attn.c.  Each
 * output is computed exactly as the scalar code does it (one correctly rounded FMA per step,
 * in the same order; F16 rounding to nearest even; the same exponential), so results are
 * bit-identical at every level.  The key dots run one lane per key over the transposed K
 * blocks (a key's FMA chain stays in index order); several queries share each K load. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kern/attn_internal.h"
#include "kern/exp_avx2.h"
#include "kern/kern_internal.h"

#define BLK PT_KERN_ATTN_BLOCK
#define INLINE static inline __attribute__((always_inline))

/* ---- key dots: 16 keys = 2 vectors; 8 independent FMA chains: 4 queries x 1 block, or
 * (a GQA group of 2, Gemma 4's sliding layers) 2 queries x 2 blocks ------------------------ */

/* pk (NULL: none): the next call's blocks matching these, whose lines are requested one per
 * block every second dimension (a 64-byte line holds two of a block's 32-byte rows).
 * wide: k holds F32 blocks (widened once for many queries, dots_wide below), not F16. */
INLINE __m256 load_k(const void *k, size_t at, const bool wide)
{
	return wide ? _mm256_loadu_ps((const float *)k + at)
		    : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)k + at)));
}

INLINE void dots_blk(const void *k, size_t kb_stride, const int nb, const float *q,
		     size_t q_stride, const uint32_t nq, uint32_t n, float *out, size_t ld,
		     const uint16_t *pk, const bool wide)
{
	__m256 a[6][4];
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 2 * nb; c++)
			a[i][c] = _mm256_setzero_ps();
	for (uint32_t d = 0; d < n; d++) {
		__m256 kk[4];
		if (pk && (d & 1) == 0)
			_Pragma("GCC unroll 2")
			for (int b = 0; b < nb; b++)
				_mm_prefetch((const char *)(pk + b * kb_stride + d * BLK),
					     _MM_HINT_T0);
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 2 * nb; c++)
			kk[c] = load_k(k, (c / 2) * kb_stride + d * BLK + (c % 2) * 8, wide);
		_Pragma("GCC unroll 6")
		for (uint32_t i = 0; i < nq; i++) {
			const __m256 qb = _mm256_broadcast_ss(q + i * q_stride + d);
			_Pragma("GCC unroll 4")
			for (int c = 0; c < 2 * nb; c++)
				a[i][c] = _mm256_fmadd_ps(kk[c], qb, a[i][c]);
		}
	}
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < 2 * nb; c++)
			_mm256_storeu_ps(out + i * ld + c * 8, a[i][c]);
}

/* ---- many queries over one call: keys and values widened to F32 once ---------------------- */

/* Where several query tiles share a call's keys, each F16 block or row was converted again
 * for every tile; converting the call's keys or values once into F32 on the stack leaves
 * the tiles plain loads (and registers for 6 queries).  F16 to F32 is exact: the same
 * values, the same chains, the same results.  The widening requests the next call's lines
 * (kb_next, v_next) as the tiles did.  A group of blocks or rows at a time in WIDE_FLOATS. */
#define WIDE_DOTS_MIN_Q 48 /* 16-32 queries: the keys measured no faster widened */
#define WIDE_VACC_MIN_Q 16
#define WIDE_FLOATS 16384

/* y[0, n) = x[0, n); px (NULL: none): a line of the next call's matching place per 32 values */
INLINE void widen(const uint16_t *x, float *y, uint32_t n, const uint16_t *px)
{
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8) {
		if (px && i % 32 == 0)
			_mm_prefetch((const char *)(px + i), _MM_HINT_T0);
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	}
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

#define DOTS_W(q) dots_blk(k, wb, 1, qi, q_stride, q, n, o, ld, NULL, true)

/* 6 queries x 1 block: 12 chains, 8 loads a dimension for 12 FMAs */
void pt_kern_attn_dots_w_avx2(ATTN_DOTS_W_ARGS)
{
	const size_t wb = kw_stride;
	for (uint32_t b = 0; b < n_blk; b++)
		for (uint32_t i = 0; i < n_q; i += 6) {
			const float *k = kw + b * wb, *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			switch (n_q - i) {
			case 1: DOTS_W(1); break;
			case 2: DOTS_W(2); break;
			case 3: DOTS_W(3); break;
			case 4: DOTS_W(4); break;
			case 5: DOTS_W(5); break;
			default: DOTS_W(6); break;
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
		pt_kern_attn_dots_w_avx2(w, wb, nb, q, q_stride, n_q, n, out + b0 * BLK, ld);
	}
}

/* The first query tile of each block pair requests the next call's matching blocks. */
void pt_kern_attn_dots_avx2(ATTN_DOTS_ARGS)
{
	if (n_q >= WIDE_DOTS_MIN_Q && n > 0 && n <= WIDE_FLOATS / BLK) {
		dots_wide(kb, kb_stride, n_blk, q, q_stride, n_q, n, out, ld, kb_next);
		return;
	}
	for (uint32_t b = 0; b < n_blk; b += 2) {
		const uint16_t *k = kb + b * kb_stride;
		const bool two = b + 2 <= n_blk;
		const uint16_t *pk = kb_next ? kb_next + b * kb_stride : NULL;
		for (uint32_t i = 0; i < n_q; i += 4, pk = NULL) {
			const float *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			switch (n_q - i) {
			case 1:
				if (two)
					dots_blk(k, kb_stride, 2, qi, q_stride, 1, n, o, ld, pk, false);
				else
					dots_blk(k, kb_stride, 1, qi, q_stride, 1, n, o, ld, pk, false);
				break;
			case 2:
				if (two)
					dots_blk(k, kb_stride, 2, qi, q_stride, 2, n, o, ld, pk, false);
				else
					dots_blk(k, kb_stride, 1, qi, q_stride, 2, n, o, ld, pk, false);
				break;
			case 3:
				dots_blk(k, kb_stride, 1, qi, q_stride, 3, n, o, ld, pk, false);
				if (two)
					dots_blk(k + kb_stride, kb_stride, 1, qi, q_stride, 3, n,
						 o + BLK, ld, pk ? pk + kb_stride : NULL, false);
				break;
			default:
				dots_blk(k, kb_stride, 1, qi, q_stride, 4, n, o, ld, pk, false);
				if (two)
					dots_blk(k + kb_stride, kb_stride, 1, qi, q_stride, 4, n,
						 o + BLK, ld, pk ? pk + kb_stride : NULL, false);
				break;
			}
		}
	}
}

/* ---- exponential and softmax weights ------------------------------------------------------ */


/* Where later is not above earlier, take earlier: the running max as the scalar loop keeps
 * it (the first of equal maxima; NaN lanes were replaced by -inf, which never wins). */
INLINE __m256 keep_first_max(__m256 earlier, __m256 later)
{
	return _mm256_blendv_ps(earlier, later, _mm256_cmp_ps(later, earlier, _CMP_GT_OQ));
}

/* Inclusive running max of 8 lanes, seeded with m. */
INLINE __m256 scan8(__m256 t, float m)
{
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	static const int32_t idx[3][8] = { { 0, 0, 1, 2, 3, 4, 5, 6 },
					   { 0, 0, 0, 1, 2, 3, 4, 5 },
					   { 0, 0, 0, 0, 0, 1, 2, 3 } };
	static const int32_t keep[3][8] = { { -1, 0, 0, 0, 0, 0, 0, 0 },
					    { -1, -1, 0, 0, 0, 0, 0, 0 },
					    { -1, -1, -1, -1, 0, 0, 0, 0 } };
	for (int s = 0; s < 3; s++) {
		__m256 sh = _mm256_permutevar8x32_ps(
			t, _mm256_loadu_si256((const __m256i *)idx[s]));
		sh = _mm256_blendv_ps(sh, ninf,
				      _mm256_castsi256_ps(
					      _mm256_loadu_si256((const __m256i *)keep[s])));
		t = keep_first_max(sh, t);
	}
	return keep_first_max(_mm256_set1_ps(m), t);
}

/* n (<= 8) floats from p (zeros after them) and to p: whole vectors directly (the common
 * case; a memcpy of a run-time length is a library call, which made this kernel 4-6x the
 * AVX-512 one's time). */
INLINE __m256 load_n(const float *p, uint32_t n)
{
	if (n == 8)
		return _mm256_loadu_ps(p);
	float b[8] = { 0 };
	memcpy(b, p, n * sizeof(float));
	return _mm256_loadu_ps(b);
}

INLINE void store_n(float *p, __m256 v, uint32_t n)
{
	if (n == 8) {
		_mm256_storeu_ps(p, v);
	} else {
		float b[8];
		_mm256_storeu_ps(b, v);
		memcpy(p, b, n * sizeof(float));
	}
}

/* ms/vs of 8 keys (n valid) of one query; returns m after them, *up: whether m rose. */
INLINE float softmax8(const float *dots, uint32_t n, float scale, float m, float *ms,
		      float *vs, bool *up_any)
{
	const __m256 sc = _mm256_mul_ps(load_n(dots, n), _mm256_set1_ps(scale));
	const __m256 mv = _mm256_set1_ps(m), one = _mm256_set1_ps(1.0f);
	const int above = _mm256_movemask_ps(_mm256_cmp_ps(sc, mv, _CMP_GT_OQ));
	if ((above & ((1 << n) - 1)) == 0) { /* no key above m: m stays, every ms is 1 */
		store_n(vs, pt_kern_exp8_avx2(_mm256_sub_ps(sc, mv)), n);
		store_n(ms, one, n);
		return m;
	}
	*up_any = true;
	const __m256 clean = _mm256_blendv_ps(sc, _mm256_set1_ps(-INFINITY),
					      _mm256_cmp_ps(sc, sc, _CMP_UNORD_Q));
	const __m256 incl = scan8(clean, m);
	/* the max before each key: incl shifted up one lane, m in lane 0 */
	__m256 prev = _mm256_permutevar8x32_ps(incl, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
	prev = _mm256_blend_ps(prev, mv, 1);
	const __m256 up = _mm256_cmp_ps(sc, prev, _CMP_GT_OQ);
	const __m256 d = _mm256_blendv_ps(_mm256_sub_ps(sc, prev), _mm256_sub_ps(prev, sc), up);
	const __m256 e = pt_kern_exp8_avx2(d);
	store_n(ms, _mm256_blendv_ps(one, e, up), n);
	store_n(vs, _mm256_blendv_ps(e, one, up), n);
	float last[8];
	_mm256_storeu_ps(last, incl);
	return last[n - 1];
}

/* r[0..8) rows in, columns out: r[j] lane i = row i's element j. */
INLINE void transpose8(__m256 r[8])
{
	__m256 t[8], u[8];
	_Pragma("GCC unroll 4")
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	_Pragma("GCC unroll 2")
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	/* u[4g + c], 128-bit half H: rows 4g .. 4g + 3 of column 4H + c */
	_Pragma("GCC unroll 4")
	for (int c = 0; c < 4; c++) {
		r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
		r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
	}
}

/* The softmax sums of queries [0, k) (k <= 8), one query a lane, 8 keys at a time
 * transposed: attn_avx512.c's sums16 in 8 lanes (the scalar chains' operations, per query in
 * key order). */
INLINE void sums8(size_t ld, uint32_t k, uint32_t n, float *s, const float *ms,
		  const float *vs, bool up)
{
	__m256 acc = load_n(s, k);
	for (uint32_t j0 = 0; j0 < n; j0 += 8) {
		const uint32_t nk = n - j0 < 8 ? n - j0 : 8;
		__m256 v[8], w[8];
		_Pragma("GCC unroll 8")
		for (uint32_t i = 0; i < 8; i++)
			v[i] = i < k ? load_n(vs + i * ld + j0, nk) : _mm256_setzero_ps();
		transpose8(v);
		if (up) {
			_Pragma("GCC unroll 8")
			for (uint32_t i = 0; i < 8; i++)
				w[i] = i < k ? load_n(ms + i * ld + j0, nk) : _mm256_setzero_ps();
			transpose8(w);
			for (uint32_t j = 0; j < nk; j++)
				acc = _mm256_add_ps(_mm256_mul_ps(acc, w[j]), v[j]);
		} else {
			for (uint32_t j = 0; j < nk; j++)
				acc = _mm256_add_ps(acc, v[j]);
		}
	}
	store_n(s, acc, k);
}

void pt_kern_attn_softmax_avx2(ATTN_SOFTMAX_ARGS)
{
	for (uint32_t i0 = 0; i0 < n_q; i0 += 8) {
		const uint32_t k = n_q - i0 < 8 ? n_q - i0 : 8;
		bool up = false;
		for (uint32_t i = i0; i < i0 + k; i++)
			for (uint32_t j = 0; j < n; j += 8)
				m[i] = softmax8(dots + i * ld + j, n - j < 8 ? n - j : 8, scale,
						m[i], ms + i * ld + j, vs + i * ld + j, &up);
		sums8(ld, k, n, s + i0, ms + i0 * ld, vs + i0 * ld, up);
	}
}

/* ---- V accumulation: up to 8 accumulators in registers: 4 queries x 16 values, or (a GQA
 * group of 2) 2 queries x 32 values; the F16 rounding pair is ~15 cycles of latency, so
 * fewer chains leave the converters idle ------------------------------------------------- */

INLINE __m256 rnd16(__m256 x, const bool f16)
{
	return f16 ? _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)) : x;
}

/* Bit j set where any of queries [0, nq)'s ms of key j < n_k (<= 64) is not 1 (NaN
 * included, as the scalar test). */
INLINE uint64_t keys_scaled(const float *ms, size_t ld, uint32_t nq, uint32_t n_k)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	uint64_t any = 0;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t j = 0;
		for (; j + 8 <= n_k; j += 8)
			any |= (uint64_t)_mm256_movemask_ps(_mm256_cmp_ps(
				       _mm256_loadu_ps(ms + i * ld + j), one, _CMP_NEQ_UQ))
			       << j;
		for (; j < n_k; j++)
			any |= (uint64_t)(ms[i * ld + j] != 1.0f) << j;
	}
	return any;
}

/* v: F16 rows, or F32 rows where wide (pv is then NULL).  n_k <= 64 keys; scaled: a bit per
 * key where some query of the tile rescales (once a query's max has settled, nearly none:
 * the others run the FMAs alone). */
INLINE void vacc_cols(float *acc, size_t acc_ld, const uint32_t nq, const void *v,
		      size_t v_stride, uint32_t n_k, const float *ms, const float *vs, size_t ld,
		      const int nv, const bool f16, uint64_t scaled, const uint16_t *pv,
		      const bool wide)
{
	__m256 a[6][4];
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			a[i][c] = _mm256_loadu_ps(acc + i * acc_ld + 8 * c);
	for (uint32_t j = 0; j < n_k; j++) {
		__m256 x[4];
		if (pv) /* the next call's row j: the line at the tile's first column */
			_mm_prefetch((const char *)(pv + j * v_stride), _MM_HINT_T0);
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			x[c] = load_k(v, j * v_stride + 8 * c, wide);
		if (__builtin_expect((scaled >> j) & 1, 0)) {
			_Pragma("GCC unroll 6")
			for (uint32_t i = 0; i < nq; i++) {
				const float sm = ms[i * ld + j];
				if (sm != 1.0f)
					_Pragma("GCC unroll 4")
					for (int c = 0; c < nv; c++)
						a[i][c] = rnd16(_mm256_mul_ps(a[i][c],
									      _mm256_set1_ps(sm)),
								f16);
			}
		}
		_Pragma("GCC unroll 6")
		for (uint32_t i = 0; i < nq; i++) {
			const __m256 w = _mm256_set1_ps(vs[i * ld + j]);
			_Pragma("GCC unroll 4")
			for (int c = 0; c < nv; c++)
				a[i][c] = rnd16(_mm256_fmadd_ps(x[c], w, a[i][c]), f16);
		}
	}
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++)
		_Pragma("GCC unroll 4")
		for (int c = 0; c < nv; c++)
			_mm256_storeu_ps(acc + i * acc_ld + 8 * c, a[i][c]);
}

INLINE float v_at(const void *v, size_t at, const bool wide)
{
	return wide ? ((const float *)v)[at] : _cvtsh_ss(((const uint16_t *)v)[at]);
}

INLINE void vacc_tail(float *acc, size_t acc_ld, uint32_t n_q, const void *v, size_t v_stride,
		      uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t d0,
		      uint32_t n, const bool f16, const bool wide)
{
	for (uint32_t i = 0; i < n_q; i++)
		for (uint32_t j = 0; j < n_k; j++) {
			const float sm = ms[i * ld + j], sv = vs[i * ld + j];
			for (uint32_t d = d0; d < n; d++) {
				float x = acc[i * acc_ld + d];
				if (sm != 1.0f) {
					x = x * sm;
					if (f16)
						x = _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
				}
				x = fmaf(v_at(v, j * v_stride + d, wide), sv, x);
				if (f16)
					x = _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
				acc[i * acc_ld + d] = x;
			}
		}
}

#define VACC_Q(nq, nv)                                                                        \
	vacc_cols(a, acc_ld, nq, vd, v_stride, n_k, mi, vi, ld, nv, f16, sc,                 \
		  pv && d % 32 == 0 ? pv + d : NULL, wide)

/* Columns [0, n) of queries [i, i + nq) (nq <= 4, or 6 where wide) over keys [0, n_k <= 64):
 * 8-wide column groups of nv vectors, then the scalar tail. */
INLINE void vacc_rows(float *acc, size_t acc_ld, const void *v, size_t v_stride, uint32_t n_k,
		      const float *ms, const float *vs, size_t ld, uint32_t n, uint32_t i,
		      const uint32_t nq, const bool f16, uint64_t sc, const uint16_t *pv,
		      const bool wide)
{
	const float *mi = ms + i * ld, *vi = vs + i * ld;
	const size_t es = wide ? sizeof(float) : sizeof(uint16_t);
	uint32_t d = 0;
	if (nq <= 2)
		for (; d + 32 <= n; d += 32) {
			float *a = acc + i * acc_ld + d;
			const void *vd = (const char *)v + d * es;
			VACC_Q(nq, 4);
		}
	for (; d + 16 <= n; d += 16) {
		float *a = acc + i * acc_ld + d;
		const void *vd = (const char *)v + d * es;
		VACC_Q(nq, 2);
	}
	for (; d + 8 <= n; d += 8) {
		float *a = acc + i * acc_ld + d;
		const void *vd = (const char *)v + d * es;
		VACC_Q(nq, 1);
	}
	if (d < n)
		vacc_tail(acc + i * acc_ld, acc_ld, nq, v, v_stride, n_k, mi, vi, ld, d, n, f16,
			  wide);
}

#define VACC_ROWS(q)                                                                          \
	vacc_rows(acc, acc_ld, v, v_stride, n_k, ms, vs, ld, n, i, q, f16, sc, pv, wide)

/* Query tiles of tq (4, or 6 where wide) over keys [0, n_k <= 64). */
INLINE void vacc_keys(float *acc, size_t acc_ld, uint32_t n_q, const void *v, size_t v_stride,
		      uint32_t n_k, const float *ms, const float *vs, size_t ld, uint32_t n,
		      const uint16_t *v_next, const bool f16, const bool wide)
{
	const uint32_t tq = wide ? 6 : 4;
	for (uint32_t i = 0; i < n_q; i += tq) {
		const uint32_t nq = n_q - i < tq ? n_q - i : tq;
		const uint64_t sc = keys_scaled(ms + i * ld, ld, nq, n_k);
		/* the first query tile requests the next call's rows, a line at a time */
		const uint16_t *pv = i == 0 ? v_next : NULL;
		switch (nq) {
		case 1: VACC_ROWS(1); break;
		case 2: VACC_ROWS(2); break;
		case 3: VACC_ROWS(3); break;
		case 4: VACC_ROWS(4); break;
		case 5: VACC_ROWS(5); break;
		default: VACC_ROWS(6); break;
		}
	}
}

/* Keys 64 at a time (a bit each for the rescaling test); with many queries, their V rows
 * widened once per group (WIDE_FLOATS). */
INLINE void vacc(ATTN_VACC_ARGS, const bool f16)
{
	if (n_q >= WIDE_VACC_MIN_Q && n > 0 && n <= WIDE_FLOATS / 16) {
		float w[WIDE_FLOATS];
		const uint32_t per = WIDE_FLOATS / n < 64 ? WIDE_FLOATS / n : 64;
		for (uint32_t j0 = 0; j0 < n_k; j0 += per) {
			const uint32_t nk = n_k - j0 < per ? n_k - j0 : per;
			for (uint32_t j = 0; j < nk; j++)
				widen(v + (j0 + j) * v_stride, w + (size_t)j * n, n,
				      v_next ? v_next + (j0 + j) * v_stride : NULL);
			vacc_keys(acc, acc_ld, n_q, w, n, nk, ms + j0, vs + j0, ld, n, NULL, f16,
				  true);
		}
		return;
	}
	for (uint32_t j0 = 0; j0 < n_k; j0 += 64) {
		const uint32_t nk = n_k - j0 < 64 ? n_k - j0 : 64;
		vacc_keys(acc, acc_ld, n_q, v + j0 * v_stride, v_stride, nk, ms + j0, vs + j0, ld,
			  n, v_next ? v_next + j0 * v_stride : NULL, f16, false);
	}
}

void pt_kern_attn_vacc_f16_avx2(ATTN_VACC_ARGS)
{
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, v_next, true);
}

void pt_kern_attn_vacc_f32_avx2(ATTN_VACC_ARGS)
{
	vacc(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, v_next, false);
}

void pt_kern_attn_vacc_w_avx2(ATTN_VACC_W_ARGS)
{
	vacc_keys(acc, acc_ld, n_q, v, v_stride, n_k, ms, vs, ld, n, NULL, false, true);
}

/* ---- Q8_0 widening (the products are exact: any order is the reference's) ------------------ */

INLINE __m256 codes8(const int8_t *p)
{
	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

INLINE __m256 scales8(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

void pt_kern_widen_q8_k_avx2(ATTN_WIDEN_Q8_ARGS)
{
	const size_t sc_at = (size_t)n * BLK; /* the scales follow the codes */
	for (uint32_t d0 = 0; d0 + 32 <= n; d0 += 32) {
		const __m256 s0 = scales8(scales + d0 / 32 * BLK);
		const __m256 s1 = scales8(scales + d0 / 32 * BLK + 8);
		if (next) /* 32 dims: 8 lines of codes, half a line of scales */
			for (uint32_t l = 0; l < 8; l++)
				_mm_prefetch((const char *)(next + (size_t)d0 * BLK + 64 * l),
					     _MM_HINT_T0);
		if (next && d0 % 64 == 0)
			_mm_prefetch((const char *)(next + sc_at) + d0, _MM_HINT_T0);
		for (uint32_t d = d0; d < d0 + 32; d++) {
			_mm256_storeu_ps(y + (size_t)d * BLK,
					 _mm256_mul_ps(codes8(codes + (size_t)d * BLK), s0));
			_mm256_storeu_ps(y + (size_t)d * BLK + 8,
					 _mm256_mul_ps(codes8(codes + (size_t)d * BLK + 8), s1));
		}
	}
}

void pt_kern_widen_q8_v_avx2(ATTN_WIDEN_Q8V_ARGS)
{
	const uint32_t lines = (uint32_t)((row_bytes + 63) / 64);
	for (uint32_t r = 0; r < n_rows; r++) {
		const int8_t *codes = rows + r * row_bytes;
		const uint16_t *scales = (const uint16_t *)(codes + n);
		float *yr = y + (size_t)r * n;
		if (next)
			for (uint32_t l = 0; l < lines; l++)
				_mm_prefetch((const char *)(next + r * row_bytes + 64 * l), _MM_HINT_T0);
		for (uint32_t d = 0; d + 32 <= n; d += 32) {
			uint16_t h;
			memcpy(&h, scales + d / 32, sizeof h);
			const __m256 sc = _mm256_set1_ps(_cvtsh_ss(h));
			for (uint32_t c = 0; c < 32; c += 8)
				_mm256_storeu_ps(yr + d + c, _mm256_mul_ps(codes8(codes + d + c), sc));
		}
	}
}

/* ---- element-wise helpers ------------------------------------------------------------------ */

void pt_kern_attn_axpy_f32_avx2(float *acc, const float *v, float vs, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(vs);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_loadu_ps(v + i), s,
							  _mm256_loadu_ps(acc + i)));
	for (; i < n; i++)
		acc[i] = fmaf(v[i], vs, acc[i]);
}

void pt_kern_attn_scale_f32_avx2(float *acc, float ms, uint32_t n)
{
	const __m256 s = _mm256_set1_ps(ms);
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), s));
	for (; i < n; i++)
		acc[i] *= ms;
}

void pt_kern_f16_to_f32_avx2(const uint16_t *x, float *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

void pt_kern_f32_to_f16_avx2(const float *x, uint16_t *y, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

/* ---- Q8_0 in place, for few queries (a decode's GQA group) ---------------------------------- */

/* One block (16 keys: two vectors) x nq <= 6 queries; the block's scale vectors change every
 * 32 dimensions.  pk: the next call's matching block, a line of codes per 4 dimensions. */
INLINE void dots_q8_blk(const int8_t *k, const float *q, size_t q_stride, const uint32_t nq,
			uint32_t n, float *out, size_t ld, const int8_t *pk)
{
	__m256 a[6][2];
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++)
		a[i][0] = a[i][1] = _mm256_setzero_ps();
	const size_t sc_at = (size_t)n * BLK;
	for (uint32_t d0 = 0; d0 < n; d0 += 32) {
		const uint16_t *sp = (const uint16_t *)(k + sc_at) + d0 / 32 * BLK;
		const __m256 s0 = scales8(sp), s1 = scales8(sp + 8);
		if (pk && d0 % 64 == 0)
			_mm_prefetch((const char *)(pk + sc_at) + d0, _MM_HINT_T0);
		for (uint32_t d = d0; d < d0 + 32; d++) {
			if (pk && d % 4 == 0)
				_mm_prefetch((const char *)(pk + (size_t)d * BLK), _MM_HINT_T0);
			const __m256 k0 = _mm256_mul_ps(codes8(k + (size_t)d * BLK), s0);
			const __m256 k1 = _mm256_mul_ps(codes8(k + (size_t)d * BLK + 8), s1);
			_Pragma("GCC unroll 6")
			for (uint32_t i = 0; i < nq; i++) {
				const __m256 qb = _mm256_set1_ps(q[i * q_stride + d]);
				a[i][0] = _mm256_fmadd_ps(k0, qb, a[i][0]);
				a[i][1] = _mm256_fmadd_ps(k1, qb, a[i][1]);
			}
		}
	}
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++) {
		_mm256_storeu_ps(out + i * ld, a[i][0]);
		_mm256_storeu_ps(out + i * ld + 8, a[i][1]);
	}
}

#define DQ8(q) dots_q8_blk(k, qi, q_stride, q, n, o, ld, pk)

void pt_kern_attn_dots_q8_avx2(const int8_t *kb, size_t kb_stride, uint32_t n_blk,
			       const float *q, size_t q_stride, uint32_t n_q, uint32_t n,
			       float *out, size_t ld, const int8_t *kb_next)
{
	for (uint32_t b = 0; b < n_blk; b++) {
		const int8_t *k = kb + b * kb_stride;
		const int8_t *pk = kb_next ? kb_next + b * kb_stride : NULL;
		for (uint32_t i = 0; i < n_q; i += 6, pk = NULL) {
			const float *qi = q + i * q_stride;
			float *o = out + i * ld + b * BLK;
			switch (n_q - i < 6 ? n_q - i : 6) {
			case 1: DQ8(1); break;
			case 2: DQ8(2); break;
			case 3: DQ8(3); break;
			case 4: DQ8(4); break;
			case 5: DQ8(5); break;
			default: DQ8(6); break;
			}
		}
	}
}

/* nq <= 6 queries x 16 values of rows rb bytes apart (codes, then a scale per 32). */
INLINE void vacc_q8_cols(float *acc, size_t acc_ld, const uint32_t nq, const int8_t *v,
			 size_t rb, uint32_t n, uint32_t d, uint32_t n_k, const float *ms,
			 const float *vs, size_t ld, const int8_t *pv)
{
	__m256 a[6][2];
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++) {
		a[i][0] = _mm256_loadu_ps(acc + i * acc_ld + d);
		a[i][1] = _mm256_loadu_ps(acc + i * acc_ld + d + 8);
	}
	const uint64_t scaled = keys_scaled(ms, ld, nq, n_k);
	for (uint32_t j = 0; j < n_k; j++) {
		const int8_t *row = v + j * rb;
		if (pv && d % 64 == 0)
			_mm_prefetch((const char *)(pv + j * rb + d), _MM_HINT_T0);
		uint16_t h;
		memcpy(&h, row + n + d / 32 * 2, sizeof h);
		const __m256 s = _mm256_set1_ps(_cvtsh_ss(h));
		const __m256 x0 = _mm256_mul_ps(codes8(row + d), s);
		const __m256 x1 = _mm256_mul_ps(codes8(row + d + 8), s);
		if (__builtin_expect((scaled >> j) & 1, 0)) {
			_Pragma("GCC unroll 6")
			for (uint32_t i = 0; i < nq; i++) {
				const float sm = ms[i * ld + j];
				if (sm != 1.0f) {
					a[i][0] = _mm256_mul_ps(a[i][0], _mm256_set1_ps(sm));
					a[i][1] = _mm256_mul_ps(a[i][1], _mm256_set1_ps(sm));
				}
			}
		}
		_Pragma("GCC unroll 6")
		for (uint32_t i = 0; i < nq; i++) {
			const __m256 w = _mm256_set1_ps(vs[i * ld + j]);
			a[i][0] = _mm256_fmadd_ps(x0, w, a[i][0]);
			a[i][1] = _mm256_fmadd_ps(x1, w, a[i][1]);
		}
	}
	_Pragma("GCC unroll 6")
	for (uint32_t i = 0; i < nq; i++) {
		_mm256_storeu_ps(acc + i * acc_ld + d, a[i][0]);
		_mm256_storeu_ps(acc + i * acc_ld + d + 8, a[i][1]);
	}
}

#define VQ8(q) vacc_q8_cols(acc + i * acc_ld, acc_ld, q, v, v_stride, n, d, n_k, ms + i * ld, \
			    vs + i * ld, ld, pv)

void pt_kern_attn_vacc_q8_avx2(float *acc, size_t acc_ld, uint32_t n_q, const int8_t *v,
			       size_t v_stride, uint32_t n_k, const float *ms, const float *vs,
			       size_t ld, uint32_t n, const int8_t *v_next)
{
	for (uint32_t d = 0; d + 16 <= n; d += 16)
		for (uint32_t i = 0; i < n_q; i += 6) {
			/* the first query tile requests the next call's rows */
			const int8_t *pv = i == 0 ? v_next : NULL;
			switch (n_q - i < 6 ? n_q - i : 6) {
			case 1: VQ8(1); break;
			case 2: VQ8(2); break;
			case 3: VQ8(3); break;
			case 4: VQ8(4); break;
			case 5: VQ8(5); break;
			default: VQ8(6); break;
			}
		}
}
