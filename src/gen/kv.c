/* kv.c - KV cache storage (F16/F32, linear or sliding ring) and attention over it with
 * ggml's CPU flash-attention rounding points (see kv.h). */
#include "gen/kv.h"

#include <math.h>
#include <string.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "util/alloc.h"

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
	return -1;
}

static enum pt_status layer_alloc(struct pt_kv_layer *L, size_t esz, struct pt_error *err)
{
	uint64_t nk, nv;
	if (pt_mul_overflow(L->cap, L->row_k, &nk) || pt_mul_overflow(L->cap, L->row_v, &nv) ||
	    nk > SIZE_MAX / esz || nv > SIZE_MAX / esz)
		return pt_error_set(err, PT_E_LIMIT, "KV cache size overflows");
	L->k = pt_calloc(nk, esz);
	L->v = pt_calloc(nv, esz);
	if (!L->k || !L->v)
		return pt_error_set(err, PT_E_NOMEM, "KV cache: cannot allocate %llu values",
				    (unsigned long long)(nk + nv));
	return PT_OK;
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
	const size_t esz = type == PT_KV_F16 ? sizeof(uint16_t) : sizeof(float);
	for (uint32_t il = 0; il < n_layer; il++) {
		struct pt_kv_layer *L = &kv->layers[il];
		L->d = descs[il];
		if (L->d.n_kv_head == 0 || L->d.head_dim_k == 0 || L->d.head_dim_v == 0) {
			pt_kv_fini(kv);
			return pt_error_set(err, PT_E_INVALID, "KV cache: layer %u has a zero dimension",
					    il);
		}
		uint64_t cap = n_ctx;
		if (L->d.n_swa > 0 && (uint64_t)L->d.n_swa + n_batch - 1 < cap)
			cap = (uint64_t)L->d.n_swa + n_batch - 1;
		L->cap = (uint32_t)cap;
		L->row_k = (size_t)L->d.n_kv_head * L->d.head_dim_k;
		L->row_v = (size_t)L->d.n_kv_head * L->d.head_dim_v;
		enum pt_status st = layer_alloc(L, esz, err);
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
		pt_free(kv->layers[il].k);
		pt_free(kv->layers[il].v);
	}
	pt_free(kv->layers);
	kv->layers = NULL;
	kv->n_layer = 0;
}

static size_t slot_of(const struct pt_kv_layer *L, int64_t pos)
{
	return (size_t)((uint64_t)pos % L->cap);
}

static void store_row(enum pt_kv_type t, void *base, size_t row, size_t slot, const float *x)
{
	if (t == PT_KV_F16) {
		uint16_t *d = (uint16_t *)base + slot * row;
		for (size_t i = 0; i < row; i++)
			d[i] = pt_f32_to_fp16(x[i]);
	} else {
		memcpy((float *)base + slot * row, x, row * sizeof(float));
	}
}

void pt_kv_store(struct pt_kv *kv, uint32_t il, int64_t pos, const float *k, const float *v)
{
	struct pt_kv_layer *L = &kv->layers[il];
	const size_t slot = slot_of(L, pos);
	store_row(kv->type, L->k, L->row_k, slot, k);
	store_row(kv->type, L->v, L->row_v, slot, v);
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

/* F16 -> F32 through a table: exact (built from pt_fp16_to_f32), and the conversion is the
 * inner loop of attention over an F16 cache.  Constant data, built once per process. */
static float score_of(float dot, const struct pt_attn_args *a)
{
	if (a->softcap != 0.0f) {
		const float s = dot * (a->scale / a->softcap);
		return a->softcap * tanhf(s);
	}
	return dot * a->scale;
}

/* Key rows [p, p + n) of KV head kvh (n <= PT_KERN_ATTN_ROWS) for the batched dots. */
static void key_rows(const struct pt_kv_layer *L, uint32_t kvh, int64_t p, uint32_t n,
		     const uint16_t **rows)
{
	const uint32_t dk = L->d.head_dim_k;
	for (uint32_t j = 0; j < n; j++)
		rows[j] = (const uint16_t *)L->k + slot_of(L, p + j) * L->row_k + (size_t)kvh * dk;
}

/* F16 path: the V accumulator is an F16 buffer; every scale and multiply-add is computed in
 * F32 (with FMA, as ggml's F16C/FMA vector path) and rounded back to F16.  Scores are
 * computed 16 keys ahead (each dot is independent of the softmax state: exact). */
static void block_f16(const struct pt_kv_layer *L, uint32_t kvh, const float *q, int64_t p_lo,
		      int64_t p_hi, const struct pt_attn_args *a, struct pt_attn_part *part,
		      uint16_t *qh, uint16_t *acc)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const struct pt_kern_attn_ops *ko = pt_kern_attn_ops(dk > dv ? dk : dv);
	ko->f32_to_f16(q, qh, dk);
	memset(acc, 0, dv * sizeof(uint16_t));
	float m = -INFINITY, s = 0.0f, dots[PT_KERN_ATTN_ROWS];
	const uint16_t *rows[PT_KERN_ATTN_ROWS];
	for (int64_t p0 = p_lo; p0 < p_hi; p0 += PT_KERN_ATTN_ROWS) {
		const uint32_t nb = p_hi - p0 < PT_KERN_ATTN_ROWS ? (uint32_t)(p_hi - p0)
								 : PT_KERN_ATTN_ROWS;
		key_rows(L, kvh, p0, nb, rows);
		ko->dots_f16q(rows, nb, qh, dk, dots);
		for (uint32_t j = 0; j < nb; j++) {
			const uint16_t *v = (const uint16_t *)L->v + slot_of(L, p0 + j) * L->row_v +
					    (size_t)kvh * dv;
			const float sc = score_of(dots[j], a);
			float ms = 1.0f, vs = 1.0f;
			if (sc > m) {
				const float m_old = m;
				m = sc;
				ms = expf(m_old - m);
				ko->scale_f16(acc, ms, dv);
			} else {
				vs = expf(sc - m);
			}
			ko->axpy_f16(acc, v, vs, dv);
			s = s * ms + vs;
		}
	}
	part->m = m;
	part->s = s;
	ko->f16_to_f32(acc, part->acc, dv);
}

static float dot_f32(const float *k, const float *q, uint32_t n)
{
	float acc = 0.0f;
	for (uint32_t i = 0; i < n; i++)
		acc = fmaf(k[i], q[i], acc);
	return acc;
}

/* Scores of keys [p0, p0 + nb) (nb <= PT_KERN_ATTN_ROWS) for an F32 query. */
static void scores_f32(const struct pt_kv_layer *L, bool f16, uint32_t kvh, const float *q,
		       int64_t p0, uint32_t nb, const struct pt_kern_attn_ops *ko, float *dots)
{
	const uint32_t dk = L->d.head_dim_k;
	if (f16) {
		const uint16_t *rows[PT_KERN_ATTN_ROWS];
		key_rows(L, kvh, p0, nb, rows);
		ko->dots_f32q(rows, nb, q, dk, dots);
		return;
	}
	for (uint32_t j = 0; j < nb; j++)
		dots[j] = dot_f32((const float *)L->k + slot_of(L, p0 + j) * L->row_k +
					  (size_t)kvh * dk, q, dk);
}

/* F32 query and accumulator over an F32 cache, or over an F16 cache whose K/V values are
 * widened to F32 (ggml's tiled multi-row path). */
static void block_f32(const struct pt_kv_layer *L, bool f16, uint32_t kvh, const float *q,
		      int64_t p_lo, int64_t p_hi, const struct pt_attn_args *a,
		      struct pt_attn_part *part, float *vbuf)
{
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const struct pt_kern_attn_ops *ko = pt_kern_attn_ops(dk > dv ? dk : dv);
	float *acc = part->acc;
	memset(acc, 0, dv * sizeof(float));
	float m = -INFINITY, s = 0.0f, dots[PT_KERN_ATTN_ROWS];
	for (int64_t p0 = p_lo; p0 < p_hi; p0 += PT_KERN_ATTN_ROWS) {
		const uint32_t nb = p_hi - p0 < PT_KERN_ATTN_ROWS ? (uint32_t)(p_hi - p0)
								 : PT_KERN_ATTN_ROWS;
		scores_f32(L, f16, kvh, q, p0, nb, ko, dots);
		for (uint32_t j = 0; j < nb; j++) {
			const size_t slot = slot_of(L, p0 + j);
			const float *v;
			if (f16) {
				ko->f16_to_f32((const uint16_t *)L->v + slot * L->row_v +
						       (size_t)kvh * dv, vbuf, dv);
				v = vbuf;
			} else {
				v = (const float *)L->v + slot * L->row_v + (size_t)kvh * dv;
			}
			const float sc = score_of(dots[j], a);
			float ms = 1.0f, vs = 1.0f;
			if (sc > m) {
				const float m_old = m;
				m = sc;
				ms = expf(m_old - m);
				ko->scale_f32(acc, ms, dv);
			} else {
				vs = expf(sc - m);
			}
			ko->axpy_f32(acc, v, vs, dv);
			s = s * ms + vs;
		}
	}
	part->m = m;
	part->s = s;
}

void pt_attn_block(const struct pt_kv *kv, uint32_t il, uint32_t kvh, const float *q,
		   int64_t p_lo, int64_t p_hi, const struct pt_attn_args *a,
		   struct pt_attn_part *part, float *scratch)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	if (kv->type == PT_KV_F16 && !a->f32_acc) {
		uint16_t *qh = (uint16_t *)scratch;
		uint16_t *acc = qh + L->d.head_dim_k;
		block_f16(L, kvh, q, p_lo, p_hi, a, part, qh, acc);
	} else {
		block_f32(L, kv->type == PT_KV_F16, kvh, q, p_lo, p_hi, a, part, scratch);
	}
}

void pt_attn_merge(struct pt_attn_part *a, const struct pt_attn_part *b, uint32_t head_dim_v)
{
	if (b->m == -INFINITY)
		return;
	const float m = a->m > b->m ? a->m : b->m;
	const float fa = a->m == -INFINITY ? 0.0f : expf(a->m - m);
	const float fb = expf(b->m - m);
	for (uint32_t i = 0; i < head_dim_v; i++)
		a->acc[i] = a->acc[i] * fa + b->acc[i] * fb;
	a->s = a->s * fa + b->s * fb;
	a->m = m;
}

void pt_attn_finish(const struct pt_attn_part *p, uint32_t head_dim_v, float *out)
{
	const float inv = p->s == 0.0f ? 0.0f : 1.0f / p->s;
	for (uint32_t i = 0; i < head_dim_v; i++)
		out[i] = p->acc[i] * inv;
}

size_t pt_attn_scratch_floats(const struct pt_kv *kv, uint32_t il)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	/* F16 query + F16 accumulator, then two F32 partial accumulators */
	return L->d.head_dim_k + L->d.head_dim_v + 2 * (size_t)L->d.head_dim_v;
}

void pt_attn_row(const struct pt_kv *kv, uint32_t il, uint32_t n_head, const float *q,
		 int64_t pos, const struct pt_attn_args *a, uint32_t block_len, float *out,
		 float *scratch)
{
	const struct pt_kv_layer *L = &kv->layers[il];
	const uint32_t dk = L->d.head_dim_k, dv = L->d.head_dim_v;
	const uint32_t group = n_head / L->d.n_kv_head;
	float *acc0 = scratch + dk + dv, *acc1 = acc0 + dv;
	int64_t first, count;
	pt_kv_range(kv, il, pos, &first, &count);
	const int64_t blk = block_len ? (int64_t)block_len : count;
	for (uint32_t h = 0; h < n_head; h++) {
		struct pt_attn_part tot = { -INFINITY, 0.0f, acc0 }, part = { 0, 0, acc1 };
		memset(acc0, 0, dv * sizeof(float));
		for (int64_t p = first; p < first + count; p += blk) {
			const int64_t hi = p + blk < first + count ? p + blk : first + count;
			pt_attn_block(kv, il, h / group, q + (size_t)h * dk, p, hi, a, &part,
				      scratch);
			pt_attn_merge(&tot, &part, dv);
		}
		pt_attn_finish(&tot, dv, out + (size_t)h * dv);
	}
}
