/* forward.h - the forward pass: token ids in, logits out, for qwen3moe, bailingmoe2 and
 * gemma4, in chunks of up to n_batch tokens.
 *
 * Every projection goes through pt_kern_matmul (activations converted to the weight type's
 * partner format, as llama.cpp does), so a row of a chunk is bit-identical to the same token
 * run alone, and results do not depend on the thread count.  Routed experts are reached
 * through a struct pt_expert_provider; within a chunk rows are grouped by expert so each
 * selected expert's matrices are read once per chunk, and each row's expert outputs are
 * summed in top-k rank order. */
#ifndef PT_MODEL_FORWARD_H
#define PT_MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "gen/kv.h"
#include "kern/pool.h"
#include "model/model.h"
#include "util/status.h"

/* Attention numerics over an F16 KV cache (src/gen/kv.h).  F32: every chunk and decode
 * takes ggml's tiled path (F32 query, F32 V accumulator), so results do not depend on how
 * a prompt is cut into chunks, and decode skips the per-step F16 rounding that made its V
 * accumulation 3.5x slower (docs/PERFORMANCE.md, issue 21 round 23).  GGML: llama.cpp's CPU
 * flash attention exactly, its one-row path (F16 query and V accumulator) below
 * PT_ATTN_TILED_ROWS rows and for decode, the tiled path from there: greedy output
 * identical to llama.cpp's (tests/oracle/test_run.sh). */
enum pt_attn_numerics {
	PT_ATTN_NUMERICS_ENV = 0, /* PARTICLE_ATTN=f32|ggml, unset: F32 */
	PT_ATTN_NUMERICS_F32,
	PT_ATTN_NUMERICS_GGML,
};

/* PARTICLE_ATTN's value (NULL or empty: F32) into *out; PT_E_INVALID for another value. */
enum pt_status pt_attn_numerics_parse(const char *s, enum pt_attn_numerics *out,
				      struct pt_error *err);

struct pt_fwd_opts {
	uint32_t n_ctx;        /* 0: min(context_length, 4096) */
	uint32_t n_batch;      /* 0: 128 */
	enum pt_kv_type kv_type; /* default (0) F16 */
	pt_pool *pool;         /* may be NULL (single thread) */
	const struct pt_expert_provider *experts; /* NULL: the model's mmap provider */
	uint32_t attn_block;   /* keys per split-K attention block; 0: 1024 */
	/* Routing observer (traces, routing reports; may be NULL): called once per MoE layer
	 * and chunk with the chosen experts ids[n][k] of rows at positions pos0 .. pos0+n-1
	 * (a decode batch: once per row, n = 1, that row's sequence position). */
	void (*on_route)(void *ctx, uint32_t layer, int64_t pos0, uint32_t n, uint32_t k,
			 const int *ids);
	void *route_ctx;
	/* Sequences, each with its own KV cache and position (0: 1).  The calls without a
	 * sequence act on sequence 0. */
	uint32_t n_seq;
	/* Linear-attention layers: prefill chunks of at least this many rows of one sequence
	 * use the chunked delta rule (0: the default 16; UINT32_MAX: never, token by token
	 * as a decode does). */
	uint32_t dn_chunk_min;
	/* Sliding-window layers: rows of a chunk stored and attended per pass (0: the default
	 * pt_fwd_swa_rows(n_batch)); their rings hold n_swa + this - 1 keys, not n_swa + n_batch
	 * - 1, so a long chunk costs no more sliding cache than one of this many rows.  Results
	 * do not depend on it. */
	uint32_t swa_rows;
	enum pt_attn_numerics attn_numerics; /* 0: from PARTICLE_ATTN */
};

#define PT_FWD_MAX_SEQ 256

/* Sliding layers attend a chunk in passes of at most this many rows (forward.c attention):
 * a 4,096-row chunk under a memory cap (each expert read once per prompt) then keeps the
 * sliding ring of a 2,048-row one, and a rewind of up to this many tokens keeps the ring. */
#define PT_FWD_SWA_ROWS 2048u

/* The sliding-ring rows of a forward pass with n_batch-row chunks (the engine's KV
 * estimate): min(n_batch, PT_FWD_SWA_ROWS). */
static inline uint32_t pt_fwd_swa_rows(uint32_t n_batch)
{
	return n_batch < PT_FWD_SWA_ROWS ? n_batch : PT_FWD_SWA_ROWS;
}

typedef struct pt_fwd pt_fwd;

enum pt_status pt_fwd_create(const struct pt_model *m, const struct pt_fwd_opts *opts,
			     pt_fwd **out, struct pt_error *err);
void pt_fwd_destroy(pt_fwd *f); /* NULL-safe */

/* Hands the memory of the chunk-sized buffers back to the kernel (MADV_DONTNEED on their
 * whole pages; they hold nothing between evaluations, and pages touched again come back
 * zeroed): after a long prompt, the rows a decode never touches stop counting against the
 * memory budget, so the expert cache can take them back (engine.c, issue 21).  The bytes
 * those buffers span: pt_fwd_trim_bytes. */
void pt_fwd_trim(pt_fwd *f);
uint64_t pt_fwd_trim_bytes(const pt_fwd *f);

/* Positions already in the KV cache (the next token's position). */
int64_t pt_fwd_pos(const pt_fwd *f);
/* Wall time spent in the output head so far (final norm, lm head, softcap), in ns. */
uint64_t pt_fwd_head_ns(const pt_fwd *f);
/* Wall time so far per part of the pass, in ns (the bench's decode split): attention (norm,
 * QKV, attend, output projection; linear attention too), router (product and top-k),
 * experts (routed experts with what is folded into their sets: Bailing's shared expert,
 * Gemma 4's dense MLP), ffn_rest (the FFN's norms, dense MLPs, residual adds), head. */
enum pt_fwd_phase {
	PT_FWD_PH_ATTN,
	PT_FWD_PH_ROUTER,
	PT_FWD_PH_EXPERTS,
	PT_FWD_PH_FFN_REST,
	PT_FWD_PH_HEAD,
	PT_FWD_PH_COUNT
};
uint64_t pt_fwd_phase_ns(const pt_fwd *f, enum pt_fwd_phase ph);
/* Forgets positions pos.. (0 <= pos <= pt_fwd_pos).  Linear layers only move the position; a
 * sliding-window ring must still hold the window of pos, and a recurrent state can only go
 * back to 0, else PT_E_LIMIT and nothing changes (the caller restores a checkpoint or
 * resets to 0, and replays the tokens it keeps). */
enum pt_status pt_fwd_truncate(pt_fwd *f, int64_t pos, struct pt_error *err);
uint32_t pt_fwd_n_ctx(const pt_fwd *f);

/* Appends n tokens at positions pt_fwd_pos().. and writes their logits to
 * logits[n][n_vocab].  PT_E_LIMIT if the context would overflow, PT_E_INVALID for a token id
 * outside the vocabulary. */
enum pt_status pt_fwd_eval(pt_fwd *f, const uint32_t *tokens, uint32_t n, float *logits,
			   struct pt_error *err);
/* Same; all_logits false: only the last token's logits[n_vocab] (the output head runs for
 * that row alone, bit-identical to its row of a full run).  logits may then be NULL to skip
 * the output head entirely (replaying kept tokens). */
enum pt_status pt_fwd_eval_rows(pt_fwd *f, const uint32_t *tokens, uint32_t n, float *logits,
				bool all_logits, struct pt_error *err);

/* --- several sequences (opts.n_seq) ---
 * Sequences share the weights, the expert provider and the buffers; calls are serialized by
 * the caller.  PT_E_INVALID for a sequence out of range. */
uint32_t pt_fwd_n_seq(const pt_fwd *f);
int64_t pt_fwd_seq_pos(const pt_fwd *f, uint32_t seq); /* -1 out of range */
/* pt_fwd_eval_rows on sequence seq. */
enum pt_status pt_fwd_seq_eval(pt_fwd *f, uint32_t seq, const uint32_t *tokens, uint32_t n,
			       float *logits, bool all_logits, struct pt_error *err);
/* pt_fwd_truncate on sequence seq. */
enum pt_status pt_fwd_seq_truncate(pt_fwd *f, uint32_t seq, int64_t pos, struct pt_error *err);
/* One token for each of n distinct sequences seqs[i] in one pass: projections over the n
 * rows at once, each row's RoPE position and attention over its own sequence's KV (with
 * the one-row numerics however many rows), routed experts grouped across rows (each expert
 * fetched once for every row routed to it).  logits [n][n_vocab]; row i is bit-identical
 * to pt_fwd_seq_eval of tokens[i] alone on seqs[i].  PT_E_LIMIT when a sequence is full. */
enum pt_status pt_fwd_decode_batch(pt_fwd *f, const uint32_t *seqs, const uint32_t *tokens,
				   uint32_t n, float *logits, struct pt_error *err);
/* Expert fetches so far: provider get calls, one per expert per MoE layer per pass however
 * many rows use it. */
uint64_t pt_fwd_expert_gets(const pt_fwd *f);
/* KV snapshots of a sequence's positions [0, pos) (see pt_kv_save): their size, a copy of
 * sequence seq at its position (size must be pt_fwd_snapshot_bytes(f, pos)), and loading one
 * into seq (which then is at pos). */
uint64_t pt_fwd_snapshot_bytes(const pt_fwd *f, int64_t pos);
enum pt_status pt_fwd_seq_save(const pt_fwd *f, uint32_t seq, void *buf, uint64_t size,
			       struct pt_error *err);
enum pt_status pt_fwd_seq_load(pt_fwd *f, uint32_t seq, int64_t pos, const void *buf,
			       uint64_t size, struct pt_error *err);
/* Recurrent state (linear-attention layers; 0 bytes for other models): its size per
 * sequence, a copy of sequence seq's, and putting one back: seq is then at pos (< its
 * position; the KV rows below pos are kept), which must be the position the state was
 * saved at - the caller's bookkeeping (the engine's checkpoints). */
uint64_t pt_fwd_rs_bytes(const pt_fwd *f);
/* The widest FFN intermediate a row holds (dense, shared or routed experts; a fused gate_up
 * counted whole): the width of the forward pass's gate / up buffers, from the tensors (a
 * model's feed_forward_length can name a dense width no layer has). */
uint32_t pt_fwd_ff_width(const struct pt_model *m);
/* Bytes of the buffers pt_fwd_create allocates in proportion to its rows (n_rows =
 * max(n_batch, n_seq), some of them one per sequence), for the memory plan: the layer's
 * rows, attention's and the routed experts' (one shared allocation), the quantized inputs,
 * routing.  Not counted: the KV cache, MLA and linear-attention rows, per-thread scratch. */
uint64_t pt_fwd_rows_bytes(const struct pt_model *m, uint32_t n_rows, uint32_t n_seq);
enum pt_status pt_fwd_seq_rs_save(const pt_fwd *f, uint32_t seq, float *buf,
				  struct pt_error *err);
enum pt_status pt_fwd_seq_rs_restore(pt_fwd *f, uint32_t seq, int64_t pos, const float *buf,
				     struct pt_error *err);
/* dst becomes a copy of src (its KV rows, recurrent state and position). */
enum pt_status pt_fwd_seq_copy(pt_fwd *f, uint32_t dst, uint32_t src, struct pt_error *err);

#endif
