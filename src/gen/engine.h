/* engine.h - one loaded model ready to run: the GGUF, its tokenizer, the memory plan, the
 * expert store (streaming cache or mmap), the thread pool and the forward pass with its KV
 * cache.  `eval`, `run` and `bench` all drive a model through this object, so `--memory`,
 * `--expert-slots`, `--io`, `--cache-policy` and the counters mean the same in each.
 *
 * CONTRACT written by the lead before the implementation: the `stream` work implements it
 * (src/gen/engine.c); `run` and `bench` code against it.  Extend, do not break. */
#ifndef PT_GEN_ENGINE_H
#define PT_GEN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/kv.h"
#include "util/status.h"

struct pt_model;
struct pt_tok;

/* n_batch: prefill chunks as large as the memory plan allows, up to PT_ENGINE_BATCH_MAX rows
 * (issue 21: a chunk's tokens are grouped by routed expert, each expert's weights read once
 * per layer and chunk and run as one matrix product over its tokens, so larger chunks mean
 * fewer expert reads under a cap and wider products). */
#define PT_ENGINE_BATCH_AUTO 0xffffffffu
#define PT_ENGINE_BATCH_MAX 4096u

struct pt_engine_opts {
	const char *model_path;
	uint32_t threads;          /* 0: number of online cores */
	uint32_t n_ctx;            /* 0: min(model context_length, 4096) */
	uint32_t n_batch;          /* 0: 128 (prefill chunk); PT_ENGINE_BATCH_AUTO: the
				      largest chunk the memory plan allows (up to 4096) */
	enum pt_kv_type kv_type;   /* 0 = F16 */
	uint64_t memory_budget;    /* bytes; 0: derived from cgroup limit / MemAvailable */
	uint32_t expert_slots;     /* per MoE layer; 0: the planner decides */
	const char *io_mode;       /* NULL = auto; "direct" | "buffered" | "mmap" */
	const char *cache_policy;  /* NULL = "lfu"; "lfu" | "lru" */
	const char *pack_path;     /* NULL: MODEL.gguf.xpack if present and matching */
	const char *pack_cache_dir;
	uint64_t pack_cache_size;
	const char *trace_path;    /* --trace-experts: routing trace output (NULL: none) */
	bool no_lock;              /* skip the single-process model lock */
	FILE *log;                 /* where the plan / verbose lines go (NULL: silent) */
	bool verbose;              /* model card, plan, I/O engine, CPU features */
	/* added by the implementation: routing observer (routing reports), called per MoE
	 * layer and chunk with ids[n][k] of positions pos0.. (may be NULL) */
	void (*on_route)(void *ctx, uint32_t layer, int64_t pos0, uint32_t n, uint32_t k,
			 const int *ids);
	void *route_ctx;
	/* added by multiseq (the server's --parallel and prompt cache): */
	uint32_t n_seq;              /* sequences, each with its own KV cache and history (0: 1);
					the plan counts n_seq KV caches */
	uint64_t prompt_cache_bytes; /* set aside in the plan for KV snapshots (0: none, or
					prompt_cache_seqs whole-context snapshots) */
	uint32_t prompt_cache_seqs;  /* with prompt_cache_bytes 0: room for this many snapshots
					of a full context (--cache-prompts N) */
	/* added by perf (issue 21): the persisted expert-popularity profile (expert/profile.h):
	 * read at open to warm the expert cache, this run's counts added and written at close.
	 * Off unless asked (the CLI asks unless --no-profile); never changes results. */
	bool use_profile;
	const char *profile_dir;     /* NULL: pt_user_dir("profiles") */
	/* added by qwen35 (issue 18), models with recurrent (linear-attention) layers only:
	 * state checkpoints every ckpt_every tokens (0: 512; UINT32_MAX: none), at marks
	 * (pt_engine_seq_set_marks) and at turn ends (pt_engine_seq_checkpoint), at most
	 * ckpt_max per sequence (0: 4), counted in the plan; dn_chunk_min as struct
	 * pt_fwd_opts (0: the chunked prefill from 16 rows) */
	uint32_t ckpt_every;
	uint32_t ckpt_max;
	uint32_t dn_chunk_min;
	/* added by issue 21 round 10: Q4_K matrices copied at open into the interleaved X16
	 * layout (model/repack.h) where the CPU level has a kernel for it: the resident ones
	 * always, the routed experts when they are mapped (not streamed).  Results change in the
	 * last bits (the same for prefill and decode); costs load time, not memory (the
	 * mapping's pages are released). */
	bool repack;
	/* added by issue 21 round 16: as repack, but only where the resident weights stay in
	 * memory for good: the whole model runs from memory (its experts mapped within the
	 * budget: copied too), or its experts stream (round 25: the resident weights copied, the
	 * experts as read, interleaved from an interleaved pack); not where --io mmap maps a
	 * model over its budget (the kernel pages it).  The CLI's default for serve and
	 * interactive run; repack wins when both are set. */
	bool repack_auto;
};

#define PT_ENGINE_MAX_SEQ 256

struct pt_engine_stats {
	uint64_t memory_budget;     /* bytes the plan was made for */
	uint64_t resident_bytes;    /* mapped non-expert weights */
	uint64_t kv_bytes;
	uint64_t slot_bytes;        /* one expert slot */
	uint32_t slots_per_layer;
	uint32_t n_moe_layers;
	uint64_t hits, misses;      /* expert cache, all layers */
	uint64_t bytes_read;        /* expert bytes read from storage */
	double read_s;              /* summed read latency */
	double wait_s;              /* compute time spent waiting on reads */
	uint64_t peak_rss_bytes;    /* VmHWM */
	const char *io_engine;      /* "io_uring+O_DIRECT", "pread pool", "mmap" ... */
	const char *cache_policy;
	/* added by the implementation: time spent in pt_engine_eval, split by call size */
	uint64_t prefill_tokens;    /* tokens of eval calls with n > 1 */
	double prefill_s;
	uint64_t decode_tokens;     /* tokens of eval calls with n == 1 */
	double decode_s;
	uint32_t expert_slots_used; /* slots holding an expert, all layers */
	double io_busy_s;           /* wall time with expert reads in flight */
	double head_s;              /* wall time in the output head */
	uint64_t ahead_reads;       /* reads started early: decode's guesses of the next layer,
				       a chunk's next wave, the profile's warm-up */
	uint64_t ahead_used;        /* ... whose expert was then routed to (counted as misses) */
	uint64_t ahead_wasted;      /* ... evicted unused */
	uint64_t ahead_dropped;     /* guesses dropped unread (wrong by the time they could go) */
	/* added by multiseq */
	uint64_t decode_steps;      /* decode passes (a decode batch is one; decode_tokens counts
				       its rows) */
	uint64_t expert_gets;       /* routed-expert fetches: one per expert per MoE layer per
				       pass, however many rows it serves */
	uint32_t n_seq;
	uint64_t snap_bytes;        /* live prompt-cache snapshots */
	/* added by qwen35: recurrent-state checkpoints (all sequences) */
	uint64_t ckpt_bytes;        /* live checkpoints */
	uint64_t ckpt_saved, ckpt_restored;
	uint64_t replayed_tokens;   /* kept tokens evaluated again by rewinds */
	/* added by issue 21 round 10: --repack's interleaved copies (0: none) */
	uint64_t repacked_bytes;    /* weight bytes as stored that now run interleaved */
	double repack_s;            /* open time spent copying them */
	/* added by perf2: where the forward pass's wall time goes (pt_fwd_phase_ns order:
	 * attention, router, experts, ffn rest, head) and the pool's barrier cost */
	double phase_s[5];
	uint64_t pool_runs;         /* dispatches to the worker threads */
	double pool_wait_s;         /* caller's wall time waiting on other threads' tasks */
	/* added by issue 21 round 14: slots a long prompt lends to its chunk buffers (the
	 * plan's slots_per_layer is what decode keeps) */
	uint32_t slots_lend_max;    /* at most, per layer (0: prompts never lend) */
	uint32_t slots_lent_peak;   /* the most any evaluation so far lent, per layer */
	uint32_t slots_active;      /* slots a layer uses now (slots_per_layer between prompts) */
	/* added by issue 21 round 27: the open faulted the slot pool in (0: it did not) */
	double slots_populate_s;
	/* added by issue 21 round 40: the plan's total (resident + KV + scratch + the experts'
	 * slots, or every expert's bytes where the mapping holds them; over memory_budget when
	 * --io mmap maps a model over its budget) */
	uint64_t plan_bytes;
	uint64_t plan_expert_bytes; /* the routed experts' part of it */
};

typedef struct pt_engine pt_engine;
struct pt_decode_bytes;

/* Loads and validates the model, plans memory (refusing with numbers when the budget cannot
 * hold resident + KV + top-k slots per layer), takes the model lock, opens the expert store. */
enum pt_status pt_engine_open(const struct pt_engine_opts *o, pt_engine **out,
			      struct pt_error *err);
void pt_engine_close(pt_engine *e); /* NULL-safe */

const struct pt_model *pt_engine_model(const pt_engine *e);
const struct pt_tok *pt_engine_tok(const pt_engine *e);
uint32_t pt_engine_n_vocab(const pt_engine *e);
uint32_t pt_engine_n_ctx(const pt_engine *e);
/* The prefill chunk in tokens (the one asked for, or the one PT_ENGINE_BATCH_AUTO chose). */
uint32_t pt_engine_n_batch(const pt_engine *e);
/* The planner's one-line summary (valid until close). */
const char *pt_engine_plan_line(const pt_engine *e);

/* Tokens currently in the KV cache, in order (n = pt_engine_pos). */
int64_t pt_engine_pos(const pt_engine *e);
const uint32_t *pt_engine_tokens(const pt_engine *e);

/* Appends n tokens.  logits: [n][n_vocab] when all_logits, else [n_vocab] for the last token
 * only (the output head is then computed for that row alone).  PT_E_LIMIT past n_ctx. */
enum pt_status pt_engine_eval(pt_engine *e, const uint32_t *tokens, uint32_t n, float *logits,
			      bool all_logits, struct pt_error *err);
/* Keeps the first pos tokens of the KV cache and forgets the rest (prefix reuse, a cancelled
 * reply).  Where a sliding-window ring no longer holds what pos needs, the engine replays
 * the kept tokens itself; results are identical to a fresh evaluation either way. */
enum pt_status pt_engine_rewind(pt_engine *e, int64_t pos, struct pt_error *err);

/* --- a device forward pass (issue 16: the CUDA backend, installed by the CLI) ---
 * Sequence 0's tokens are evaluated by dev instead of the CPU forward pass: eval appends n
 * tokens (logits as pt_engine_eval), pos is its position, truncate keeps the first pos
 * tokens (PT_E_LIMIT when its sliding rings no longer hold them: the engine then truncates
 * to 0 and replays the kept history, as for the CPU pass).  Installed on a fresh engine
 * (position 0); the engine does not own ctx.  Only sequence 0 and the calls above use it
 * (no snapshots, checkpoints or decode batches on a device). */
struct pt_engine_device {
	void *ctx;
	enum pt_status (*eval)(void *ctx, const uint32_t *tokens, uint32_t n, float *logits,
			       bool all_logits, struct pt_error *err);
	int64_t (*pos)(void *ctx);
	enum pt_status (*truncate)(void *ctx, int64_t pos, struct pt_error *err);
};
void pt_engine_set_device(pt_engine *e, const struct pt_engine_device *dev);

/* --- several sequences (opts.n_seq; added by multiseq) ---
 * Each sequence has its own KV cache (sliding rings included), position and token history;
 * they share the model, plan, expert store, pool and scratch.  The calls above act on
 * sequence 0.  An engine is not thread-safe: one thread drives all its sequences.  Every
 * call below answers PT_E_INVALID for a sequence out of range. */
uint32_t pt_engine_n_seq(const pt_engine *e);
int64_t pt_engine_seq_pos(const pt_engine *e, uint32_t seq);               /* -1: no such */
const uint32_t *pt_engine_seq_tokens(const pt_engine *e, uint32_t seq);    /* NULL: no such */
enum pt_status pt_engine_seq_eval(pt_engine *e, uint32_t seq, const uint32_t *tokens,
				  uint32_t n, float *logits, bool all_logits,
				  struct pt_error *err);
enum pt_status pt_engine_seq_rewind(pt_engine *e, uint32_t seq, int64_t pos,
				    struct pt_error *err);

/* One new token for each of n distinct sequences seqs[i] (n <= n_seq) in ONE forward pass:
 * every row attends to its own sequence's KV at its own position, the projections run over
 * the n rows at once and routed experts are grouped across rows (one expert fetch serves
 * every row routed to it: stats.expert_gets, and the store's misses).  logits [n][n_vocab]
 * (NULL: into pt_engine_batch_logits); row i is byte-identical to pt_engine_seq_eval of
 * tokens[i] alone on seqs[i].  PT_E_LIMIT when one of them is full (nothing is evaluated),
 * PT_E_INVALID for a repeated sequence.  Counted as n decode tokens, one decode step. */
enum pt_status pt_engine_decode_batch(pt_engine *e, const uint32_t *seqs,
				      const uint32_t *tokens, uint32_t n, float *logits,
				      struct pt_error *err);
/* The engine's [n_seq][n_vocab] logits buffer for decode batches (planned as scratch; NULL
 * when n_seq == 1); overwritten by each pt_engine_decode_batch(..., NULL, ...). */
float *pt_engine_batch_logits(pt_engine *e);

/* Recurrent-state checkpoints (models with linear-attention layers; no-ops otherwise).
 * pt_engine_seq_checkpoint keeps the state at the sequence's position as a turn-end
 * checkpoint (the session calls it when a prompt is in and when a reply ends); a rewind
 * restores the nearest checkpoint at or before its target and replays the rest, and
 * pt_engine_seq_last_replay says how many kept tokens the sequence's last rewind evaluated
 * again (0 when none: a KV cache only moves its position). */
enum pt_status pt_engine_seq_checkpoint(pt_engine *e, uint32_t seq, struct pt_error *err);
uint32_t pt_engine_seq_last_replay(const pt_engine *e, uint32_t seq);
/* Checkpoints a sequence may hold (0: the model has no recurrent state). */
uint32_t pt_engine_ckpt_max(const pt_engine *e);

/* Positions worth a checkpoint in what seq evaluates next, e.g. the message boundaries of a
 * rendered conversation (ascending; at most PT_ENGINE_MAX_MARKS, the last ones kept; n 0
 * clears).  Evaluations are cut at each mark past the sequence's position and checkpoint
 * there as turn-end copies.  Cuts depend only on absolute positions (marks, the periodic
 * ckpt_every), so a prefill that starts at a restored checkpoint evaluates the same pieces
 * as a fresh run of the whole prompt with the same marks: the same bytes, chunked delta
 * rule included.  No-op without recurrent state. */
#define PT_ENGINE_MAX_MARKS 64
enum pt_status pt_engine_seq_set_marks(pt_engine *e, uint32_t seq, const int64_t *pos,
				       uint32_t n, struct pt_error *err);
/* Rewind for prefix reuse: pt_engine_seq_rewind to pos, except that where a recurrent state
 * cannot go back, the nearest checkpoint at or before pos (or 0) is restored and the
 * sequence stays there: *at receives its position (<= pos), and the caller evaluates its
 * tokens from *at on (the history's tokens [*at, pos) are the shared prefix, evaluated
 * again as part of the caller's prefill instead of a separate replay).
 * pt_engine_seq_last_replay then reports pos - *at. */
enum pt_status pt_engine_seq_rewind_reuse(pt_engine *e, uint32_t seq, int64_t pos, int64_t *at,
					  struct pt_error *err);

/* Prompt cache.  A snapshot holds a sequence's whole state at its position: its tokens and
 * the KV slots they occupy (sliding rings as they are).  Restoring it into any sequence
 * gives exactly that state, so rewinding the restored sequence to the longest common prefix
 * of the next prompt (pt_engine_seq_rewind, which replays where a ring no longer holds the
 * window) and evaluating the rest gives the same logits as a fresh evaluation.  Snapshots
 * live within opts.prompt_cache_bytes (set aside in the plan): a snapshot that would pass
 * it is refused with PT_E_LIMIT (the caller's LRU frees one and retries).  Snapshots belong
 * to the engine that made them (free them before closing it). */
typedef struct pt_engine_snap pt_engine_snap;
enum pt_status pt_engine_seq_snapshot(pt_engine *e, uint32_t seq, pt_engine_snap **out,
				      struct pt_error *err);
enum pt_status pt_engine_seq_restore(pt_engine *e, uint32_t seq, const pt_engine_snap *s,
				     struct pt_error *err);
void pt_engine_snap_free(pt_engine *e, pt_engine_snap *s); /* NULL-safe */
int64_t pt_engine_snap_pos(const pt_engine_snap *s);               /* tokens it holds */
const uint32_t *pt_engine_snap_tokens(const pt_engine_snap *s);
uint64_t pt_engine_snap_bytes(const pt_engine_snap *s);            /* what it takes */
uint64_t pt_engine_snap_size(const pt_engine *e, int64_t n_tokens); /* ... for n tokens */
uint64_t pt_engine_snap_budget(const pt_engine *e);                /* prompt_cache_bytes */
uint64_t pt_engine_snap_used(const pt_engine *e);                  /* live snapshots */
/* dst becomes a copy of src's first n_tokens (KV and history; no snapshot memory). */
enum pt_status pt_engine_seq_copy(pt_engine *e, uint32_t dst, uint32_t src, int64_t n_tokens,
				  struct pt_error *err);

void pt_engine_stats(const pt_engine *e, struct pt_engine_stats *out);
/* Per-MoE-layer cache counters (i < n_moe_layers), for --stats-json. */
void pt_engine_layer_stats(const pt_engine *e, uint32_t i, uint64_t *hits, uint64_t *misses,
			   uint64_t *bytes_read);

/* MoE layers of the model (0 for a dense one); *n_expert (may be NULL) = routed experts per
 * MoE layer; layers (may be NULL, else [n_moe]) receives each MoE layer's model layer index. */
uint32_t pt_engine_n_moe_layers(const pt_engine *e, uint32_t *n_expert, uint32_t *layers);
/* The expert heat map of MoE layer moe_layer (< pt_engine_n_moe_layers): resident[e] = 1
 * when expert e's bytes are in memory the engine holds (a READY cache slot; in mapped mode
 * every expert, as the mapping holds them all), uses[e] = tokens routed to it since open
 * (each token at the layer counts its k experts, prefill included; saturating).  false, with
 * the outputs untouched, for a bad layer or n_expert other than the model's.
 * Thread-safe: may be called from another thread (the HTTP server's) while this engine
 * evaluates: residency is copied under the cache's lock and the counts are relaxed atomics,
 * so a copy taken mid-token can hold part of that token.  Unlike pt_engine_stats. */
bool pt_engine_layer_experts(const pt_engine *e, uint32_t moe_layer, uint8_t *resident,
			     uint32_t *uses, uint32_t n_expert);

/* The counters as text lines (each prefixed "particle: ") and as one JSON object with a
 * per-layer array, for --verbose and --stats-json. */
void pt_engine_print_stats(const pt_engine *e, FILE *fp);
enum pt_status pt_engine_write_stats_json(const pt_engine *e, const char *path,
					  struct pt_error *err);

/* added by perf (issue 21): the bytes one token decoded at position n_past must read from
 * memory - weights, output head, routed experts, KV (gen/decode_bytes.h). */
void pt_engine_decode_bytes(const pt_engine *e, int64_t n_past, struct pt_decode_bytes *out);

/* Warm-up reads the profile started at open (0: none, mmap mode, or no profile). */
uint32_t pt_engine_profile_warmed(const pt_engine *e);

#endif
