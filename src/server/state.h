/* state.h - a read-only view of a running server for status pages and /metrics: slots,
 * queue, per-request progress and speed, totals, and the engine's counters.
 *
 * pt_server_snapshot copies everything under the server's lock (cheap: no engine call; the
 * engine counters are the copy the generation thread published after its last step), so
 * it may be called from any thread at any rate.  pt_server_with_engine runs fn with the
 * engine while no generation step is running (it waits at most one step), for readers that
 * need more than the published counters (the web UI's per-layer expert residency). */
#ifndef PT_SERVER_STATE_H
#define PT_SERVER_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "gen/engine.h"

#define PT_SERVER_MAX_SLOTS 16

struct pt_server_slot_info {
	bool busy;
	uint64_t request_id;       /* 0 when idle */
	bool prefilling;           /* still evaluating the prompt */
	uint32_t prompt_tokens;    /* whole prompt */
	uint32_t cached_tokens;    /* reused from the KV cache */
	uint32_t prefill_done;     /* prompt tokens evaluated so far (of prompt - cached) */
	uint32_t gen_tokens;       /* generated so far */
	double ttft_s;             /* time to first token (0 until then) */
	double decode_tps;         /* generated tokens / decode time so far */
	double prefill_tps;
	double age_s;              /* since the request started generating */
};

struct pt_server_snapshot {
	double uptime_s;
	bool ready;                /* the model is loaded (always, once listening) */
	uint32_t n_slots, slots_busy;
	uint32_t queue_depth, max_queue;
	struct pt_server_slot_info slots[PT_SERVER_MAX_SLOTS];
	/* totals since start */
	uint64_t requests_total, requests_ok, requests_cancelled, requests_rejected;
	uint64_t prompt_tokens_total, cached_tokens_total, gen_tokens_total;
	uint64_t replayed_tokens_total; /* cached tokens evaluated again (recurrent checkpoints) */
	double prefill_s_total, decode_s_total;
	/* the last finished request */
	double last_ttft_s, last_decode_tps, last_prefill_tps;
	/* engine counters as of the last generation step */
	struct pt_engine_stats engine;
	uint64_t rss_bytes;        /* VmRSS now */
};

struct pt_server;
void pt_server_snapshot(struct pt_server *s, struct pt_server_snapshot *out);
void pt_server_with_engine(struct pt_server *s, void (*fn)(void *ctx, const pt_engine *e),
			   void *ctx);
/* Per-MoE-layer expert cache counters as of the last step (i < engine.n_moe_layers). */
void pt_server_layer_stats(struct pt_server *s, uint32_t i, uint64_t *hits, uint64_t *misses,
			   uint64_t *bytes_read);

#endif
