/* kv.c - KV cache storage (F16/F32/Q8_0, linear or sliding ring) and attention over it with
 * ggml's CPU flash-attention rounding points (see kv.h). */
#include "gen/kv.h"

#include <math.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "util/alloc.h"

_Static_assert(PT_KV_BLOCK == PT_KERN_ATTN_BLOCK, "F16 K blocks are the kernels' blocks");

int pt_kv_type_from_name(const char *name, enum pt_kv_type *out)
{
	if (strcmp(name, "f16") == 0 || strcmp(name, "F16") == 0) {
		*out = PT_KV_F16;
		return 0;
	}
	if (strcmp(name, "f32") == 0 || strcmp(name, "F32") == 0) {
		*out = PT_KV_F32;
		return 0;
	}
	if (strcmp(name, "q8_0") == 0 || strcmp(name, "Q8_0") == 0) {
		*out = PT_KV_Q8_0;
		return 0;
	}
	return -1;
}

uint64_t pt_kv_value_bytes(enum pt_kv_type type, uint64_t n)
{
	switch (type) {
	case PT_KV_F32: return n * 4;
	case PT_KV_Q8_0: return n + (n + 31) / 32 * 2; /* a byte a code, an F16 scale per 32 */
	default: return n * 2;
	}
}

/* Head kvh's V at slot in the head-major V array. */
static uint8_t *v_ptr(const struct pt_kv_layer *L, uint32_t kvh, size_t slot)
{
	return (uint8_t *)L->v + ((size_t)kvh * L->cap + slot) * L->v_row_bytes;
}

static enum pt_status layer_alloc(struct pt_kv_layer *L, struct pt_error *err)
{
	uint64_t nk, nv;
	if (pt_mul_overflow(L->cap, L->k_slot_bytes, &nk) ||
	    pt_mul_overflow((uint64_t)L->cap * L->d.n_kv_head, L->row_v ? L->v_row_bytes : 0, &nv) ||
	    nk > SIZE_MAX || nv > SIZE_MAX)
		return pt_error_set(err, PT_E_LIMIT, "KV cache size overflows");
	L->k_bytes = (size_t)nk;
	L->v_bytes = (size_t)nv;
	L->k = pt_alloc_pages(L->k_bytes);
	L->v = pt_alloc_pages(L->v_bytes); /* NULL where there is no V array (nv 0) */
	if (!L->k || (nv && !L->v))
		return pt_error_set(err, PT_E_NOMEM, "KV cache: cannot allocate %llu bytes",
				    (unsigned long long)(nk + nv));
	return PT_OK;
}

uint64_t pt_kv_layer_slots(uint32_t n_ctx, uint32_t n_swa, uint32_t n_batch)
{
	uint64_t cap = n_ctx;
	if (n_swa > 0 && (uint64_t)n_swa + n_batch - 1 < cap)
		cap = (uint64_t)n_swa + n_batch - 1;
	/* whole K blocks: a block of positions never wraps around the ring */
	return (cap + PT_KV_BLOCK - 1) / PT_KV_BLOCK * PT_KV_BLOCK;
}

enum pt_status pt_kv_init(struct pt_kv *kv, enum pt_kv_type type, uint32_t n_layer,
			  const struct pt_kv_layer_desc *descs, uint32_t n_ctx, uint32_t n_batch,
			  struct pt_error *err)
{
	memset(kv, 0, sizeof(*kv));
	if (n_layer == 0 || n_ctx == 0 || n_batch == 0)
		return pt_error_set(err, PT_E_INVALID, "KV cache: zero layers, context or batch");
	kv->type = type;
	kv->n_ctx = n_ctx;
	kv->layers = pt_calloc(n_layer, sizeof(*kv->layers));
	if (!kv->layers)
		return pt_error_set(err, PT_E_NOMEM, "KV cache: cannot allocate layer table");
	kv->n_layer = n_layer;
	for (uint32_t il = 0; il < n_layer; il++) {
		struct pt_kv_layer *L = &kv->layers[il];
		L->d = descs[il];
		if (L->d.n_kv_head == 0 && L->d.head_dim_k == 0 && L->d.head_dim_v == 0)
			continue; /* a layer without a cache (recurrent state instead) */
		if (L->d.n_kv_head == 0 || L->d.head_dim_k == 0 || L->d.head_dim_v == 0) {
			pt_kv_fini(kv);
			return pt_error_set(err, PT_E_INVALID, "KV cache: layer %u has a zero dimension",
					    il);
		}
		const uint64_t cap = pt_kv_layer_slots(n_ctx, L->d.n_swa, n_batch);
		if (cap > UINT32_MAX) {
			pt_kv_fini(kv);
			return pt_error_set(err, PT_E_LIMIT, "KV cache: context too long");
		}
		L->cap = (uint32_t)cap;
		L->row_k = (size_t)L->d.n_kv_head * L->d.head_dim_k;
		L->row_v = L->d.v_in_k ? 0 : (size_t)L->d.n_kv_head * L->d.head_dim_v;
		if (L->d.v_in_k && (L->d.n_kv_head != 1 || L->d.head_dim_v > L->d.head_dim_k)) {
			pt_kv_fini(kv);
			return pt_error_set(err, PT_E_INVALID, "KV cache: layer %u: V inside K "
					    "needs one KV head and head_dim_v <= head_dim_k", il);
		}
		if (type == PT_KV_Q8_0 && (L->d.head_dim_k % 32 || L->d.head_dim_v % 32)) {
			const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
			pt_kv_fini(kv);
			return pt_error_set(err, PT_E_INVALID, "KV cache: layer %u: a q8_0 cache "
					    "needs head dims that are multiples of 32 (%u, %u)", il,
					    dk, dv);
		}
		L->k_slot_bytes = (size_t)pt_kv_value_bytes(type, L->row_k);
		L->v_row_bytes = (size_t)pt_kv_value_bytes(type, L->d.head_dim_v);
		enum pt_status st = layer_alloc(L, err);
		if (st != PT_OK) {
			pt_kv_fini(kv);
			return st;
		}
	}
	return PT_OK;
}

void pt_kv_fini(struct pt_kv *kv)
{
	if (!kv || !kv->layers)
		return;
	for (uint32_t il = 0; il < kv->n_layer; il++) {
		pt_free_pages(kv->layers[il].k, kv->layers[il].k_bytes);
		pt_free_pages(kv->layers[il].v, kv->layers[il].v_bytes);
	}
	pt_free(kv->layers);
	kv->layers = NULL;
	kv->n_layer = 0;
}

/* Slots holding positions [0, pos) of layer L: whole K blocks, at most the ring. */
static uint64_t snap_slots(const struct pt_kv_layer *L, int64_t pos)
{
	const uint64_t p = pos > 0 ? (uint64_t)pos : 0;
	const uint64_t s = (p + PT_KV_BLOCK - 1) / PT_KV_BLOCK * PT_KV_BLOCK;
	return s < L->cap ? s : L->cap;
}

/* Bytes of one slot's V rows (all heads; 0 where V lives in K). */
static size_t v_slot_bytes(const struct pt_kv_layer *L)
{
	return L->row_v ? L->d.n_kv_head * L->v_row_bytes : 0;
}

uint64_t pt_kv_snapshot_bytes(const struct pt_kv *kv, int64_t pos)
{
	uint64_t total = 0;
	for (uint32_t il = 0; il < kv->n_layer; il++) {
		const struct pt_kv_layer *L = &kv->layers[il];
		total += snap_slots(L, pos) * (L->k_slot_bytes + v_slot_bytes(L));
	}
	return total;
}

/* Slots [0, n) of the head-major V array to (out) or from slot-major rows at rows. */
static void v_rows(const struct pt_kv_layer *L, uint64_t n, uint8_t *rows, bool out)
{
	const size_t rb = L->v_row_bytes;
	for (uint64_t i = 0; i < n && L->row_v; i++)
		for (uint32_t h = 0; h < L->d.n_kv_head; h++) {
			uint8_t *r = rows + (i * L->d.n_kv_head + h) * rb;
			uint8_t *v = v_ptr(L, h, i);
			memcpy(out ? r : v, out ? v : r, rb);
		}
}

void pt_kv_save(const struct pt_kv *kv, int64_t pos, void *buf)
{
	uint8_t *d = buf;
	for (uint32_t il = 0; il < kv->n_layer; il++) {
		const struct pt_kv_layer *L = &kv->layers[il];
		const uint64_t n = snap_slots(L, pos);
		if (n == 0)
			continue;
		memcpy(d, L->k, n * L->k_slot_bytes);
		d += n * L->k_slot_bytes;
		v_rows(L, n, d, true);
		d += n * v_slot_bytes(L);
	}
}

void pt_kv_load(struct pt_kv *kv, int64_t pos, const void *buf)
{
	const uint8_t *d = buf;
	for (uint32_t il = 0; il < kv->n_layer; il++) {
		struct pt_kv_layer *L = &kv->layers[il];
		const uint64_t n = snap_slots(L, pos);
		if (n == 0)
			continue;
		memcpy(L->k, d, n * L->k_slot_bytes);
		d += n * L->k_slot_bytes;
		v_rows(L, n, (uint8_t *)d, false);
		d += n * v_slot_bytes(L);
	}
}

void pt_kv_copy(struct pt_kv *dst, const struct pt_kv *src, int64_t pos)
{
	for (uint32_t il = 0; il < src->n_layer && il < dst->n_layer; il++) {
		const struct pt_kv_layer *S = &src->layers[il];
		struct pt_kv_layer *D = &dst->layers[il];
		const uint64_t n = snap_slots(S, pos);
		if (n == 0)
			continue;
		memcpy(D->k, S->k, n * S->k_slot_bytes);
		for (uint32_t h = 0; S->row_v && h < S->d.n_kv_head; h++)
			memcpy(v_ptr(D, h, 0), v_ptr(S, h, 0), n * S->v_row_bytes);
	}
}

static size_t slot_of(const struct pt_kv_layer *L, int64_t pos)
{
	return (size_t)((uint64_t)pos % L->cap);
}

/* F16 K goes to its transposed block: element e of the slot's row at block * BLOCK * row_k
 * + e * BLOCK + lane.  Rounded with the level's F16 conversion (the reference's values). */
static void store_k_f16(const struct pt_kv_layer *L, size_t slot, const float *x,
			const struct pt_kern_attn_ops *ko)
{
	uint16_t *d = (uint16_t *)L->k + slot / PT_KV_BLOCK * PT_KV_BLOCK * L->row_k +
		      slot % PT_KV_BLOCK;
	uint16_t h[256];
	for (size_t e0 = 0; e0 < L->row_k; e0 += 256) {
		const uint32_t n = (uint32_t)(L->row_k - e0 < 256 ? L->row_k - e0 : 256);
		ko->f32_to_f16(x + e0, h, n);
		for (uint32_t e = 0; e < n; e++)
			d[(e0 + e) * PT_KV_BLOCK] = h[e];
	}
}

/* Q8_0 of 32 values (ggml's quantize_row_q8_0_ref): d = max|x| / 127, codes round(x / d)
 * (half away from zero).  Codes are clamped so a NaN or infinity cannot overflow the cast. */
static uint16_t quant_q8_32(const float *x, int8_t q[32])
{
	float amax = 0.0f;
	for (int i = 0; i < 32; i++) {
		const float a = fabsf(x[i]);
		amax = a > amax ? a : amax; /* a NaN never counts, as fmaxf */
	}
	const float d = amax / 127.0f;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int i = 0; i < 32; i++) {
		float c = x[i] * id;
		c = c > 127.0f ? 127.0f : c < -127.0f ? -127.0f : c;
		if (c != c) /* NaN in the values */
			c = 0.0f;
		/* roundf without the libm call: the truncation, then away from zero on a half
		 * (c - t is exact here) */
		int t = (int)c;
		const float f = c - (float)t;
		t += f >= 0.5f ? 1 : f <= -0.5f ? -1 : 0;
		q[i] = (int8_t)t;
	}
	return pt_f32_to_fp16(d);
}

/* Head kvh's Q8_0 K block at slot (block-aligned): codes, then scales (kv.h). */
static int8_t *k_block_q8(const struct pt_kv_layer *L, uint32_t kvh, size_t slot)
{
	return (int8_t *)L->k + slot / PT_KV_BLOCK * PT_KV_BLOCK * L->k_slot_bytes +
	       (size_t)kvh * 17 * L->d.head_dim_k;
}

static void store_q8(struct pt_kv_layer *L, size_t slot, const float *k, const float *v)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const size_t lane = slot % PT_KV_BLOCK;
	int8_t q[32];
	for (uint32_t h = 0; h < L->d.n_kv_head; h++) {
		int8_t *codes = k_block_q8(L, h, slot - lane);
		uint16_t *scales = (uint16_t *)(codes + (size_t)dk * PT_KV_BLOCK);
		for (uint32_t g = 0; g < dk / 32; g++) {
			scales[g * PT_KV_BLOCK + lane] = quant_q8_32(k + (size_t)h * dk + g * 32, q);
			for (uint32_t i = 0; i < 32; i++)
				codes[(size_t)(g * 32 + i) * PT_KV_BLOCK + lane] = q[i];
		}
		if (!L->row_v)
			continue;
		int8_t *row = (int8_t *)v_ptr(L, h, slot);
		uint16_t *vsc = (uint16_t *)(row + dv);
		for (uint32_t g = 0; g < dv / 32; g++)
			vsc[g] = quant_q8_32(v + (size_t)h * dv + g * 32, row + g * 32);
	}
}

void pt_kv_store(struct pt_kv *kv, uint32_t il, int64_t pos, const float *k, const float *v)
{
	struct pt_kv_layer *L = &kv->layers[il];
	const size_t slot = slot_of(L, pos);
	if (kv->type == PT_KV_Q8_0) {
		store_q8(L, slot, k, v);
	} else if (kv->type == PT_KV_F16) {
		const struct pt_kern_attn_ops *ko = pt_kern_attn_ops(0);
		store_k_f16(L, slot, k, ko);
		if (!L->row_v)
			return;
		for (uint32_t h = 0; h < L->d.n_kv_head; h++) /* head_dim_v: 32-bit (desc) */
			ko->f32_to_f16(v + (size_t)h * L->d.head_dim_v,
				       (uint16_t *)v_ptr(L, h, slot), L->d.head_dim_v);
	} else {
		memcpy((float *)L->k + slot * L->row_k, k, L->row_k * sizeof(float));
		if (L->row_v)
			for (uint32_t h = 0; h < L->d.n_kv_head; h++)
				memcpy(v_ptr(L, h, slot), v + (size_t)h * L->d.head_dim_v,
				       L->d.head_dim_v * sizeof(float));
	}
}

void pt_kv_range(const struct pt_kv *kv, uint32_t il, int64_t pos, int64_t *first,
		 int64_t *count)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	int64_t lo = 0;
	/* masked when p_q - p_k >= n_swa: the window holds n_swa keys including self */
	if (L->d.n_swa > 0 && pos - (int64_t)L->d.n_swa + 1 > 0)
		lo = pos - (int64_t)L->d.n_swa + 1;
	*first = lo;
	*count = pos + 1 - lo;
}

static float score_of(float dot, const struct pt_attn_args *a)
{
	if (a->softcap != 0.0f) {
		const float s = dot * (a->scale / a->softcap);
		return a->softcap * tanhf(s);
	}
	return dot * a->scale;
}

/* ---- F32 cache: one query at a time, keys row by row -------------------------------------- */

static float dot_f32(const float *k, const float *q, uint32_t n)
{
	float acc = 0.0f;
	for (uint32_t i = 0; i < n; i++)
		acc = fmaf(k[i], q[i], acc);
	return acc;
}

/* Continues the state (*m_io, *s_io, acc) of one query over keys [p_lo, p_hi). */
static void query_f32(const struct pt_kv_layer *L, uint32_t kvh, const float *q, int64_t p_lo,
		      int64_t p_hi, const struct pt_attn_args *a, float *m_io, float *s_io,
		      float *acc)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const struct pt_kern_attn_ops *ko = pt_kern_attn_ops(dk > dv ? dk : dv);
	float m = *m_io, s = *s_io;
	for (int64_t p = p_lo; p < p_hi; p++) {
		const size_t slot = slot_of(L, p);
		const float *k = (const float *)L->k + slot * L->row_k + (size_t)kvh * dk;
		const float *v = L->row_v ? (const float *)v_ptr(L, kvh, slot)
					  : k; /* V in K: its first dv values */
		const float sc = score_of(dot_f32(k, q, dk), a);
		float ms = 1.0f, vs = 1.0f;
		if (sc > m) {
			const float m_old = m;
			m = sc;
			ms = pt_kern_expf(m_old - m);
			ko->scale_f32(acc, ms, dv);
		} else {
			vs = pt_kern_expf(sc - m);
		}
		ko->axpy_f32(acc, v, vs, dv);
		s = s * ms + vs;
	}
	*m_io = m;
	*s_io = s;
}

/* ---- F16 cache: a group of queries per K block --------------------------------------------- */

/* Keys scored per kernel call: whole K blocks, so the V accumulators stay in registers across
 * this many keys. */
#define CHUNK 64

struct group_scratch {
	float *q;            /* [n_q][dk] queries as the dots read them */
	uint16_t *qh;        /* [dk] F16 rounding of one query */
	float *dots, *ms, *vs; /* [n_q][CHUNK] */
	uint16_t *vt;        /* V in K: [CHUNK][dv] the chunk's V rows out of the K blocks */
	float *kw, *vw;      /* Q8_0: the chunk's K blocks [CHUNK / BLOCK][dk][BLOCK] and V rows
				[CHUNK][dv] widened to F32 */
};

/* Floats of the scratch a group of n_q queries needs beyond the queries, dots, ms, vs. */
static size_t group_extra_floats(const struct pt_kv *kv, const struct pt_kv_layer *L)
{
	const size_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const size_t vt = L->row_v ? 0 : (size_t)CHUNK * dv / 2 + 1;
	const size_t wide = kv->type == PT_KV_Q8_0 ? (size_t)CHUNK * (dk + dv) : 0;
	return (dk + 1) / 2 + vt + wide;
}

static struct group_scratch group_scratch(const struct pt_kv_layer *L, uint32_t n_q, float *s,
					  bool q8)
{
	struct group_scratch g;
	g.q = s;
	g.dots = g.q + (size_t)n_q * L->d.head_dim_k;
	g.ms = g.dots + (size_t)n_q * CHUNK;
	g.vs = g.ms + (size_t)n_q * CHUNK;
	g.qh = (uint16_t *)(g.vs + (size_t)n_q * CHUNK);
	g.vt = (uint16_t *)(g.vs + (size_t)n_q * CHUNK + (L->d.head_dim_k + 1) / 2);
	g.kw = g.vw = NULL;
	if (q8) {
		g.kw = g.vs + (size_t)n_q * CHUNK + (L->d.head_dim_k + 1) / 2 +
		       (L->row_v ? 0 : (size_t)CHUNK * L->d.head_dim_v / 2 + 1);
		g.vw = g.kw + (size_t)CHUNK * L->d.head_dim_k;
	}
	return g;
}

/* Head kvh's first K block at slot (block-aligned). */
static const uint16_t *k_block(const struct pt_kv_layer *L, uint32_t kvh, size_t slot)
{
	return (const uint16_t *)L->k + slot * L->row_k + (size_t)kvh * L->d.head_dim_k * PT_KV_BLOCK;
}

/* Head kvh's F16 V row at slot (a layer with a V array). */
static const uint16_t *v_row(const struct pt_kv_layer *L, uint32_t kvh, size_t slot)
{
	return (const uint16_t *)v_ptr(L, kvh, slot);
}

/* The softmax weights (g->ms, g->vs) of the call's keys [j_lo, j_hi) from its dots (a
 * softcap applied to them first), the states m, s taken on. */
static void weights(struct group_scratch *g, uint32_t n_q, uint32_t j_lo, uint32_t j_hi,
		    const struct pt_attn_args *a, const struct pt_kern_attn_ops *ko, float *m,
		    float *s)
{
	float scale = a->scale;
	if (a->softcap != 0.0f) {
		for (uint32_t i = 0; i < n_q; i++)
			for (uint32_t j = j_lo; j < j_hi; j++)
				g->dots[i * CHUNK + j] = score_of(g->dots[i * CHUNK + j], a);
		scale = 1.0f;
	}
	ko->softmax(g->dots + j_lo, CHUNK, n_q, j_hi - j_lo, scale, m, s, g->ms, g->vs);
}

/* One call's keys [pa + j_lo, pa + j_hi) of the chunk of n_blk K blocks starting at the
 * block-aligned position pa.  next: the next chunk's position (-1: none), whose K blocks
 * and V rows the kernels request while they work on this one: a head's K blocks lie
 * row_k * BLOCK values apart (a page or more), where the hardware prefetchers stop, and
 * decode reads each layer's K/V from memory (PERFORMANCE round 24). */
static void chunk_f16(const struct pt_kv_layer *L, uint32_t kvh, uint32_t n_q, int64_t pa,
		      uint32_t n_blk, uint32_t j_lo, uint32_t j_hi, int64_t next,
		      const struct pt_attn_args *a, bool f32_acc, const struct pt_kern_attn_ops *ko,
		      struct group_scratch *g, float *m, float *s, float *acc)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const size_t slot = slot_of(L, pa);
	const uint16_t *kb = k_block(L, kvh, slot);
	const uint16_t *k_next = next >= 0 ? k_block(L, kvh, slot_of(L, next)) : NULL;
	const uint16_t *v_next = next >= 0 && L->row_v ? v_row(L, kvh, slot_of(L, next)) : NULL;
	ko->dots(kb, PT_KV_BLOCK * L->row_k, n_blk, g->q, dk, n_q, dk, g->dots, CHUNK, k_next);
	weights(g, n_q, j_lo, j_hi, a, ko, m, s);
	const uint16_t *v;
	size_t v_stride = dv;
	if (L->row_v) {
		v = v_row(L, kvh, slot + j_lo);
	} else {
		/* V in K (MLA): key j's first dv values, gathered out of the transposed blocks
		 * into rows, so the accumulation is the same chain as from a V array */
		for (uint32_t j = j_lo; j < j_hi; j++) {
			const uint16_t *kj = kb + (size_t)(j / PT_KV_BLOCK) * PT_KV_BLOCK * L->row_k +
					     j % PT_KV_BLOCK;
			uint16_t *dst = g->vt + (size_t)(j - j_lo) * dv;
			for (uint32_t d = 0; d < dv; d++)
				dst[d] = kj[(size_t)d * PT_KV_BLOCK];
		}
		v = g->vt;
		v_stride = dv;
	}
	(f32_acc ? ko->vacc_f32 : ko->vacc_f16)(acc, dv, n_q, v, v_stride, j_hi - j_lo, g->ms,
						g->vs, CHUNK, dv, v_next);
}

/* The Q8_0 twin of chunk_f16: the chunk's K blocks and V rows widened to F32 once, then the
 * F32 kernels (F32 query and accumulation) on them. */
static void chunk_q8(const struct pt_kv_layer *L, uint32_t kvh, uint32_t n_q, int64_t pa,
		     uint32_t n_blk, uint32_t j_lo, uint32_t j_hi, int64_t next,
		     const struct pt_attn_args *a, const struct pt_kern_attn_ops *ko,
		     struct group_scratch *g, float *m, float *s, float *acc)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const size_t slot = slot_of(L, pa), nslot = next >= 0 ? slot_of(L, next) : 0;
	const size_t wb = (size_t)dk * PT_KV_BLOCK;
	/* few queries (a decode's GQA group) read the codes in place: widening them costs
	 * more than it saves for fewer than a tile's worth of queries (MLA gathers its V out
	 * of the widened keys, so it widens) */
	const bool in_place = n_q <= 8 && L->row_v && ko->dots_q8 && ko->vacc_q8;
	if (in_place) {
		const int8_t *kn = next >= 0 && nslot + (size_t)n_blk * PT_KV_BLOCK <= L->cap
					   ? k_block_q8(L, kvh, nslot)
					   : NULL;
		ko->dots_q8(k_block_q8(L, kvh, slot), PT_KV_BLOCK * L->k_slot_bytes, n_blk, g->q,
			    dk, n_q, dk, g->dots, CHUNK, kn);
	} else {
		for (uint32_t b = 0; b < n_blk; b++) {
			const int8_t *kb = k_block_q8(L, kvh, slot + (size_t)b * PT_KV_BLOCK);
			/* the next chunk's block b, where the ring has it */
			const int8_t *kn = next >= 0 && nslot + (size_t)(b + 1) * PT_KV_BLOCK <= L->cap
						   ? k_block_q8(L, kvh, nslot + (size_t)b * PT_KV_BLOCK)
						   : NULL;
			ko->widen_q8_k(kb, (const uint16_t *)(kb + wb), dk, g->kw + b * wb, kn);
		}
		ko->dots_w(g->kw, wb, n_blk, g->q, dk, n_q, dk, g->dots, CHUNK);
	}
	weights(g, n_q, j_lo, j_hi, a, ko, m, s);
	const int8_t *rn = next >= 0 && L->row_v && nslot + j_hi <= L->cap
				   ? (const int8_t *)v_ptr(L, kvh, nslot + j_lo)
				   : NULL;
	if (in_place) {
		ko->vacc_q8(acc, dv, n_q, (const int8_t *)v_ptr(L, kvh, slot + j_lo),
			    L->v_row_bytes, j_hi - j_lo, g->ms, g->vs, CHUNK, dv, rn);
		return;
	}
	if (L->row_v) { /* the chunk's rows: adjacent slots of one head (a chunk never wraps) */
		ko->widen_q8_v((const int8_t *)v_ptr(L, kvh, slot + j_lo), L->v_row_bytes,
			       j_hi - j_lo, dv, g->vw, rn);
	} else { /* V in K (MLA): key j's first dv values of the widened blocks */
		for (uint32_t j = j_lo; j < j_hi; j++) {
			const float *kj = g->kw + (size_t)(j / PT_KV_BLOCK) * wb + j % PT_KV_BLOCK;
			float *dst = g->vw + (size_t)(j - j_lo) * dv;
			for (uint32_t d = 0; d < dv; d++)
				dst[d] = kj[(size_t)d * PT_KV_BLOCK];
		}
	}
	ko->vacc_w(acc, dv, n_q, g->vw, dv, j_hi - j_lo, g->ms, g->vs, CHUNK, dv);
}

/* F16 and Q8_0 caches.  F16: F16 query, V accumulated in F16 (each step rounded, the values
 * kept in F32 storage); f32_acc: F32 query and accumulation over the widened F16 K/V.  q8:
 * the Q8_0 cache (chunk_q8: F32 query and accumulation whatever f32_acc).  Continues the
 * states of n_row rows of n_q queries (row r's query i at q + r * row_stride + i * q_stride,
 * state r * n_q + i): every query runs the same per-key steps as alone, in key order. */
static void group_blocks(const struct pt_kv_layer *L, uint32_t kvh, const float *q,
			 size_t q_stride, size_t row_stride, uint32_t n_q, uint32_t n_row,
			 int64_t p_lo, int64_t p_hi, const struct pt_attn_args *a, bool q8,
			 float *m, float *s, float *acc, float *scratch)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const struct pt_kern_attn_ops *ko = pt_kern_attn_ops(dk > dv ? dk : dv);
	struct group_scratch g = group_scratch(L, n_q * n_row, scratch, q8);
	for (uint32_t r = 0; r < n_row; r++)
		for (uint32_t i = 0; i < n_q; i++) {
			float *qi = g.q + ((size_t)r * n_q + i) * dk;
			const float *src = q + r * row_stride + i * q_stride;
			if (a->f32_acc || q8) {
				memcpy(qi, src, dk * sizeof(float));
			} else {
				ko->f32_to_f16(src, g.qh, dk);
				ko->f16_to_f32(g.qh, qi, dk);
			}
		}
	n_q *= n_row;
	int64_t pa = p_lo - p_lo % PT_KV_BLOCK;
	while (pa < p_hi) {
		/* whole blocks up to CHUNK keys, not past the ring's end nor past p_hi */
		const uint64_t room = L->cap - slot_of(L, pa);
		uint64_t len = (uint64_t)(p_hi - pa);
		len = len < CHUNK ? len : CHUNK;
		len = len < room ? len : room;
		const uint32_t n_blk = (uint32_t)((len + PT_KV_BLOCK - 1) / PT_KV_BLOCK);
		const uint32_t j_lo = pa < p_lo ? (uint32_t)(p_lo - pa) : 0;
		const uint32_t j_hi = (uint32_t)(p_hi - pa < n_blk * PT_KV_BLOCK
							 ? p_hi - pa : n_blk * PT_KV_BLOCK);
		const int64_t next = pa + (int64_t)n_blk * PT_KV_BLOCK;
		if (q8)
			chunk_q8(L, kvh, n_q, pa, n_blk, j_lo, j_hi, next < p_hi ? next : -1, a, ko,
				 &g, m, s, acc);
		else
			chunk_f16(L, kvh, n_q, pa, n_blk, j_lo, j_hi, next < p_hi ? next : -1, a,
				  a->f32_acc, ko, &g, m, s, acc);
		pa = next;
	}
}

void pt_attn_tile(const struct pt_kv *kv, uint32_t il, uint32_t kvh, const float *q,
		  size_t q_stride, size_t row_stride, uint32_t n_q, uint32_t n_row, int64_t p_lo,
		  int64_t p_hi, const struct pt_attn_args *a, float *m, float *s, float *acc,
		  float *scratch)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	if (p_hi <= p_lo)
		return;
	if (kv->type != PT_KV_F32) {
		group_blocks(L, kvh, q, q_stride, row_stride, n_q, n_row, p_lo, p_hi, a,
			     kv->type == PT_KV_Q8_0, m, s, acc, scratch);
		return;
	}
	for (uint32_t r = 0; r < n_row; r++)
		for (uint32_t i = 0; i < n_q; i++) {
			const size_t x = (size_t)r * n_q + i;
			query_f32(L, kvh, q + r * row_stride + i * q_stride, p_lo, p_hi, a, &m[x],
				  &s[x], acc + x * L->d.head_dim_v);
		}
}

void pt_attn_group(const struct pt_kv *kv, uint32_t il, uint32_t kvh, const float *q,
		   size_t q_stride, uint32_t n_q, int64_t p_lo, int64_t p_hi,
		   const struct pt_attn_args *a, float *m, float *s, float *acc, float *scratch)
{
	for (uint32_t i = 0; i < n_q; i++) {
		m[i] = -INFINITY;
		s[i] = 0.0f;
	}
	memset(acc, 0, (size_t)n_q * kv->layers[il].d.head_dim_v * sizeof(float));
	pt_attn_tile(kv, il, kvh, q, q_stride, 0, n_q, 1, p_lo, p_hi, a, m, s, acc, scratch);
}

void pt_attn_merge(struct pt_attn_part *a, const struct pt_attn_part *b, uint32_t head_dim_v)
{
	if (b->m == -INFINITY)
		return;
	const float m = a->m > b->m ? a->m : b->m;
	const float fa = a->m == -INFINITY ? 0.0f : pt_kern_expf(a->m - m);
	const float fb = pt_kern_expf(b->m - m);
	for (uint32_t i = 0; i < head_dim_v; i++)
		a->acc[i] = a->acc[i] * fa + b->acc[i] * fb;
	a->s = a->s * fa + b->s * fb;
	a->m = m;
}

void pt_attn_sink(struct pt_attn_part *p, float sink, uint32_t head_dim_v)
{
	float ms = 1.0f, vs = 1.0f;
	if (sink > p->m) {
		ms = expf(p->m - sink);
		p->m = sink;
		for (uint32_t i = 0; i < head_dim_v; i++)
			p->acc[i] *= ms;
	} else {
		vs = expf(sink - p->m);
	}
	p->s = p->s * ms + vs;
}

void pt_attn_finish(const struct pt_attn_part *p, uint32_t head_dim_v, float *out)
{
	const float inv = p->s == 0.0f ? 0.0f : 1.0f / p->s;
	for (uint32_t i = 0; i < head_dim_v; i++)
		out[i] = p->acc[i] * inv;
}

size_t pt_attn_scratch_floats(const struct pt_kv *kv, uint32_t il, uint32_t n_q)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	const size_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	/* pt_attn_group: queries, dots/ms/vs, one F16 query; then pt_attn_row's partial and
	 * running states (m, s, acc) */
	return n_q * (dk + 3 * (size_t)CHUNK) + group_extra_floats(kv, L) + 2 * n_q * (2 + dv);
}

void pt_attn_row(const struct pt_kv *kv, uint32_t il, uint32_t n_head, const float *q,
		 int64_t pos, const struct pt_attn_args *a, uint32_t block_len, float *out,
		 float *scratch)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const uint32_t group = n_head / L->d.n_kv_head;
	float *pm = scratch + pt_attn_scratch_floats(kv, il, group) - 2 * (size_t)group * (2 + dv);
	float *ps = pm + group, *pacc = ps + group, *tm = pacc + (size_t)group * dv;
	float *ts = tm + group, *tacc = ts + group;
	int64_t first, count;
	pt_kv_range(kv, il, pos, &first, &count);
	const int64_t blk = block_len ? (int64_t)block_len : count;
	for (uint32_t kvh = 0; kvh < L->d.n_kv_head; kvh++) {
		for (uint32_t i = 0; i < group; i++) {
			tm[i] = -INFINITY;
			ts[i] = 0.0f;
		}
		memset(tacc, 0, (size_t)group * dv * sizeof(float));
		const float *qg = q + (size_t)kvh * group * dk;
		for (int64_t p = first; p < first + count; p += blk) {
			const int64_t hi = p + blk < first + count ? p + blk : first + count;
			pt_attn_group(kv, il, kvh, qg, dk, group, p, hi, a, pm, ps, pacc, scratch);
			for (uint32_t i = 0; i < group; i++) {
				struct pt_attn_part tot = { tm[i], ts[i], tacc + (size_t)i * dv };
				const struct pt_attn_part part = { pm[i], ps[i], pacc + (size_t)i * dv };
				pt_attn_merge(&tot, &part, dv);
				tm[i] = tot.m;
				ts[i] = tot.s;
			}
		}
		for (uint32_t i = 0; i < group; i++) {
			const struct pt_attn_part tot = { tm[i], ts[i], tacc + (size_t)i * dv };
			pt_attn_finish(&tot, dv, out + ((size_t)kvh * group + i) * dv);
		}
	}
}
