/* kv.h - the KV cache and attention over it.
 *
 * Storage is F16 by default (llama.cpp's default type_k/type_v) or F32.  Each layer owns a
 * K and a V array of `cap` slots of n_kv_head*head_dim values; a linear layer has cap = n_ctx
 * and slot = pos, a sliding-window layer is a ring with cap = min(n_ctx, n_swa + n_batch - 1)
 * and slot = pos % cap - enough that every query of a prefill pass of up to n_batch rows
 * still finds all keys of its window after the whole pass was written (the forward pass
 * stores and attends a longer chunk in passes of that many rows).  cap is rounded up to whole blocks of
 * PT_KV_BLOCK slots.  F16 K is transposed within
 * each block - [slot / BLOCK][kv head][dim][slot % BLOCK] - so the key dots run one vector
 * lane per key with no transposes (src/kern/kern.h); F32 K is row-major.  V is head-major
 * ([kv head][slot][dim]): attention reads one head's values key after key, and in
 * slot-major rows those lie a row apart (Gemma 4: 4 KiB, a new page and the same L1 sets
 * every key), so the accumulation waited on memory at every key.  Snapshots keep
 * slot-major rows ([slot][kv head][dim]) whatever the layout.  Both arrays are 2 MiB pages
 * where the kernel gives them (pt_alloc_pages): decode reads every layer's K/V from memory,
 * and beside a full-size model's copies their 4 KiB pages' translations missed (PERFORMANCE
 * round 42: 15-20 % less attention time in one session's engine timer, no difference told
 * apart end to end in the next; head-major K, measured again there, gained nothing).
 *
 * Q8_0 (llama.cpp's -ctk q8_0 -ctv q8_0; 1.0625 bytes a value, about half of F16): every 32
 * values of a head's key or value share one F16 scale d = max|x| / 127 with int8 codes
 * round(x / d) (ggml's quantize_row_q8_0_ref).  A K block holds, per KV head, the codes
 * transposed as F16 K's ([dim][slot % BLOCK] bytes) then the scales ([dim / 32][slot %
 * BLOCK] F16): 17 x head_dim bytes a head.  A V row is its head_dim_v codes then the
 * head_dim_v / 32 scales.  Attention widens each call's keys and values to F32 (d x code is
 * exact) and runs F32 queries and F32 accumulation on them, the F32 cache's numerics on the
 * dequantized values (llama.cpp also quantizes the query to Q8_0 for its K.Q dots); calls
 * of up to 8 queries (a decode) widen in registers instead (the same values).
 *
 * Attention numerics (the caller picks, pt_attn_args.f32_acc; the forward pass's choice:
 * src/model/forward.h, pt_attn_numerics): ggml's CPU flash-attention one-row path
 * (ARCHITECTURES.md A.5): with an F16 cache, Q is rounded to F16, K.Q is an F16 x F16 dot
 * with F32 accumulation, online softmax with expf in F32, V*p accumulated in an F16 buffer
 * (each update rounded to F16), final division by the softmax sum in F32; or its tiled path
 * (ggml's for chunks of >= PT_ATTN_TILED_ROWS rows, particle's default for every chunk and
 * decode): Q stays F32, K/V are widened to F32, F32 accumulation
 * (measured on tiny qwen3moe Q8_0, 200-token prefill against llama.cpp's batched logits:
 * mean KL 2e-5 with these numerics, 2.5e-4 with the one-row numerics; token-by-token
 * decode with the one-row numerics against llama.cpp's token-by-token decode: KL ~1e-14).
 * With an F32 cache everything is F32.
 * Long key ranges are split into blocks whose partial (max, sum, acc) states are merged
 * exactly (rescaled by exp of the max difference), so several threads can share one head.
 * The query heads of one KV head (GQA) are scored together, each with its own chain of
 * operations: grouping never changes a head's result.  exp is pt_kern_expf throughout.
 */
#ifndef PT_GEN_KV_H
#define PT_GEN_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_KV_BLOCK 16 /* K block of the F16 cache (= PT_KERN_ATTN_BLOCK) */

enum pt_kv_type {
	PT_KV_F16 = 0,
	PT_KV_F32 = 1,
	PT_KV_Q8_0 = 2, /* 8.5 bits a value: head dims must be multiples of 32 */
};

struct pt_kv_layer_desc {
	uint32_t n_kv_head;
	uint32_t head_dim_k;
	uint32_t head_dim_v;
	uint32_t n_swa; /* 0: full causal attention */
	bool v_in_k;    /* MLA: V is the first head_dim_v values of K (one KV head); no V
			   array, so a slot costs only the latent + RoPE key */
};

struct pt_kv_layer {
	struct pt_kv_layer_desc d;
	uint32_t cap;     /* slots */
	size_t row_k;     /* values per slot: n_kv_head * head_dim_k */
	size_t row_v;     /* 0 when V lives in K */
	size_t k_slot_bytes; /* K bytes a slot (whole blocks: a Q8_0 block is 17 x row_k bytes) */
	size_t v_row_bytes;  /* V bytes of one head at one slot */
	void *k;          /* [cap][row_k] of uint16_t (F16) or float; Q8_0 blocks (above) */
	void *v;          /* [n_kv_head][cap][head_dim_v]: one head's keys adjacent */
	size_t k_bytes, v_bytes; /* the arrays' sizes (pt_alloc_pages) */
};

struct pt_kv {
	enum pt_kv_type type;
	uint32_t n_layer;
	uint32_t n_ctx;
	struct pt_kv_layer *layers;
};

/* Allocates the cache for n_layer layers (a layer whose three dimensions are all 0 has no
 * cache: a recurrent layer; it must never be stored to or attended).  n_batch is the most
 * rows of one sequence stored before their queries attend (sizes the sliding rings).
 * PT_E_INVALID on zero dimensions (or, for Q8_0, head dims that are not multiples of 32),
 * PT_E_LIMIT/NOMEM on size overflow. */
enum pt_status pt_kv_init(struct pt_kv *kv, enum pt_kv_type type, uint32_t n_layer,
			  const struct pt_kv_layer_desc *descs, uint32_t n_ctx, uint32_t n_batch,
			  struct pt_error *err);
void pt_kv_fini(struct pt_kv *kv); /* NULL-safe, idempotent */

/* Slots of one layer's cache: n_ctx, or the sliding ring's n_swa + n_batch - 1 where that
 * is smaller (n_swa 0: full attention), rounded up to whole K blocks.  The planner's KV
 * estimate uses it too. */
uint64_t pt_kv_layer_slots(uint32_t n_ctx, uint32_t n_swa, uint32_t n_batch);

/* Snapshots of a cache holding positions [0, pos) (the prompt cache): per layer the slots
 * those positions occupy - the first ceil(pos / PT_KV_BLOCK) blocks, or the whole ring of a
 * sliding layer that has wrapped - K then V, layer after layer.  Loading them into a cache of
 * the same shape gives back exactly the state at pos (slots past it are never read). */
uint64_t pt_kv_snapshot_bytes(const struct pt_kv *kv, int64_t pos);
void pt_kv_save(const struct pt_kv *kv, int64_t pos, void *buf);
void pt_kv_load(struct pt_kv *kv, int64_t pos, const void *buf);
/* dst's slots for positions [0, pos) become src's (same shape). */
void pt_kv_copy(struct pt_kv *dst, const struct pt_kv *src, int64_t pos);

/* Parses "f16" / "f32" / "q8_0"; returns 0 or -1. */
int pt_kv_type_from_name(const char *name, enum pt_kv_type *out);
/* Bytes the cache spends on n values of a head (n a multiple of 32 for Q8_0): the planner's
 * and the decode byte count's unit. */
uint64_t pt_kv_value_bytes(enum pt_kv_type type, uint64_t n);

/* Stores K and V (F32, [n_kv_head][head_dim]) of position pos into layer il (rounding to
 * F16 for an F16 cache, quantizing for Q8_0; v is ignored, may be NULL, where V lives in K).  pos < n_ctx is the
 * caller's invariant. */
void pt_kv_store(struct pt_kv *kv, uint32_t il, int64_t pos, const float *k, const float *v);

/* Partial attention state of one query head over a block of keys. */
struct pt_attn_part {
	float m;   /* running max (-INFINITY: no key seen) */
	float s;   /* sum of exp(score - m) */
	float *acc; /* head_dim_v values: sum of exp(score - m) * v (already in F32) */
};

struct pt_attn_args {
	float scale;   /* kq_scale */
	float softcap; /* 0: off; else s = softcap * tanh(s * scale / softcap) */
	bool f32_acc;  /* F16 cache only: F32 query and F32 V accumulation (ggml's tiled
			  path for >= PT_ATTN_TILED_ROWS query rows) instead of the one-row path */
};

/* ggml's CPU flash attention switches from the one-row path (F16 query, F16 accumulator)
 * to the tiled path (F32 query and accumulator) when a micro-batch has this many rows. */
#define PT_ATTN_TILED_ROWS 64

/* Number of key positions attended by a query at pos in layer il, and the first of them. */
void pt_kv_range(const struct pt_kv *kv, uint32_t il, int64_t pos, int64_t *first,
		 int64_t *count);

/* Attention state of n_q query heads that share KV head kvh (query i: q + i * q_stride, F32,
 * head_dim_k; rounded to F16 internally on the one-row F16 path) over keys [p_lo, p_hi):
 * m[i], s[i] and acc[i * head_dim_v ...] as in struct pt_attn_part.  scratch:
 * pt_attn_scratch_floats(kv, il, n_q) floats, of which pt_attn_group uses all but the last
 * 2 * n_q * (2 + head_dim_v): room for a caller's block and running (m, s, acc) states
 * when it merges blocks (pt_attn_row and the forward pass keep them there). */
void pt_attn_group(const struct pt_kv *kv, uint32_t il, uint32_t kvh, const float *q,
		   size_t q_stride, uint32_t n_q, int64_t p_lo, int64_t p_hi,
		   const struct pt_attn_args *a, float *m, float *s, float *acc, float *scratch);
/* pt_attn_group continued: the states m, s, acc (as the caller left them, e.g. -INFINITY, 0,
 * zeros) of n_row x n_q queries - row r's query i at q + r * row_stride + i * q_stride, its
 * state at r * n_q + i - taken on over keys [p_lo, p_hi) (none if p_hi <= p_lo).  Each
 * query gets the very values it would get alone, over the same keys in the same order, so a
 * range may be split anywhere; the rows of a prefill chunk share each K/V chunk while it is
 * in cache.  scratch: pt_attn_scratch_floats(kv, il, n_row * n_q) floats. */
void pt_attn_tile(const struct pt_kv *kv, uint32_t il, uint32_t kvh, const float *q,
		  size_t q_stride, size_t row_stride, uint32_t n_q, uint32_t n_row, int64_t p_lo,
		  int64_t p_hi, const struct pt_attn_args *a, float *m, float *s, float *acc,
		  float *scratch);
/* Merges b into a exactly: both rescaled to the larger max. */
void pt_attn_merge(struct pt_attn_part *a, const struct pt_attn_part *b, uint32_t head_dim_v);
/* Folds a per-head attention sink (gpt-oss attn_sinks: a learned logit, not scaled, that
 * only adds e^sink to the softmax denominator) into a head's finished key range, as ggml's
 * flash attention does after its key loop: sink > m: acc and s scaled by expf(m - sink),
 * m = sink, s += 1; else s += expf(sink - m). */
void pt_attn_sink(struct pt_attn_part *p, float sink, uint32_t head_dim_v);
/* out = acc / s (zeros if no key was seen). */
void pt_attn_finish(const struct pt_attn_part *p, uint32_t head_dim_v, float *out);

/* Whole attention for one query position: n_head query heads (GQA: head h uses KV head
 * h / (n_head / n_kv_head)), q [n_head][head_dim_k], out [n_head][head_dim_v].  Keys are
 * processed in blocks of block_len positions (0: one block), merged in block order.
 * scratch: pt_attn_scratch_floats(kv, il, n_head / n_kv_head) floats. */
void pt_attn_row(const struct pt_kv *kv, uint32_t il, uint32_t n_head, const float *q,
		 int64_t pos, const struct pt_attn_args *a, uint32_t block_len, float *out,
		 float *scratch);
size_t pt_attn_scratch_floats(const struct pt_kv *kv, uint32_t il, uint32_t n_q);

#endif
