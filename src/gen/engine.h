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

struct pt_engine_opts {
	const char *model_path;
	uint32_t threads;          /* 0: number of online cores */
	uint32_t n_ctx;            /* 0: min(model context_length, 4096) */
	uint32_t n_batch;          /* 0: 128 (prefill chunk) */
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
};

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
	uint64_t ahead_reads;       /* decode read-ahead: reads started on a guess */
	uint64_t ahead_used;        /* ... whose expert was then routed to (counted as misses) */
	uint64_t ahead_wasted;      /* ... evicted unused */
	uint64_t ahead_dropped;     /* guesses dropped unread (wrong by the time they could go) */
};

typedef struct pt_engine pt_engine;

/* Loads and validates the model, plans memory (refusing with numbers when the budget cannot
 * hold resident + KV + top-k slots per layer), takes the model lock, opens the expert store. */
enum pt_status pt_engine_open(const struct pt_engine_opts *o, pt_engine **out,
			      struct pt_error *err);
void pt_engine_close(pt_engine *e); /* NULL-safe */

const struct pt_model *pt_engine_model(const pt_engine *e);
const struct pt_tok *pt_engine_tok(const pt_engine *e);
uint32_t pt_engine_n_vocab(const pt_engine *e);
uint32_t pt_engine_n_ctx(const pt_engine *e);
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

#endif
