/* stats.h - `GET /v1/stats/stream`: the live numbers behind the web UI's status panel, as
 * server-sent events (issue 14).
 *
 * The stream sends one `data: {JSON}\n\n` event right away and then one every interval
 * (default 500 ms; `?interval_ms=N` picks 100..10000); every event is a full snapshot, so a
 * client that joins late needs nothing else.  Needs the API key when the server has one (it
 * is under /v1), like the other endpoints.  Event fields (rates are over the interval since
 * the previous event: `null` where nothing happened that they could measure):
 *
 *   t_ms          server wall clock (ms since the epoch); uptime_s, interval_s
 *   model         {id ("" when unknown), arch, n_ctx, n_moe_layers, n_expert, n_expert_used}
 *   server        {slots_total, slots_busy, queue_depth, max_queue, requests_total,
 *                  requests_ok, requests_cancelled, requests_rejected}
 *   gen           {decode_tok_s   aggregate decode rate over the interval (0 when idle),
 *                  decode_tok_s_avg  since start,
 *                  prefill_tok_s  prompt tokens/s over the interval (null: no prefill ran),
 *                  prefill_tok_s_avg, ttft_s  the running request's time to first token, else
 *                  the last finished one's (null: none yet), prefill_done / prefill_total
 *                  prompt tokens evaluated / to evaluate for the request now prefilling
 *                  (0 / 0 when none), generating  slots producing tokens now,
 *                  prompt_tokens, cached_tokens, generated_tokens  totals since start}
 *   memory        {budget_bytes  the plan's budget, rss_bytes  VmRSS now, peak_rss_bytes
 *                  VmHWM, resident_bytes  mapped non-expert weights, kv_bytes,
 *                  expert_cache_bytes  slot pool (cache mode)}
 *   experts       {mode  "cache" | "mapped" | "none", io_engine, policy, slots_per_layer,
 *                  hits, misses, bytes_read  totals (cache mode), hit_rate  since start,
 *                  hit_rate_now  over the interval (null: no expert requests), read_bytes
 *                  bytes read from storage over the interval (cache mode: the store's reads;
 *                  mapped: the process's storage reads, /proc/self/io), mib_per_token
 *                  that / decoded tokens (null: nothing decoded), disk_mb_s  that / interval}
 *   heat          {mode, n_expert, layers  model layer index of each MoE layer,
 *                  resident  one string per MoE layer, '1' = expert resident, '0' not,
 *                  uses  one array per MoE layer: tokens routed to each expert since start}
 */
#ifndef PT_SERVER_STATS_H
#define PT_SERVER_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "gen/engine.h"
#include "util/status.h"

struct pt_server;

/* Adds GET /v1/stats/stream to the server's routes (needs the API key when one is set). */
enum pt_status pt_stats_register(struct pt_server *s, struct pt_error *err);

/* What the server knows at one moment (filled from its snapshot by the stream handler). */
struct pt_stats_sample {
	double t_s;                  /* monotonic seconds */
	int64_t wall_ms;
	double uptime_s;
	struct pt_engine_stats eng;  /* io_engine / cache_policy strings must stay valid */
	uint64_t rss_bytes;
	uint64_t proc_read_bytes;    /* /proc/self/io read_bytes (0: unavailable) */
	uint32_t slots_total, slots_busy, slots_generating, queue_depth, max_queue;
	uint64_t requests_total, requests_ok, requests_cancelled, requests_rejected;
	uint64_t prompt_tokens, cached_tokens, generated_tokens;
	uint32_t prefill_done, prefill_total;
	double ttft_s;               /* < 0: none yet */
};

struct pt_stats_model {
	const char *id, *arch;
	uint32_t n_ctx, n_expert_used;
	uint32_t n_moe, n_expert;    /* heat map geometry */
	const uint32_t *layers;      /* [n_moe] model layer index */
};

/* The event's JSON text (pt_free it), or NULL when out of memory.  prev: the previous
 * sample (NULL for the first event: interval rates are null).  resident / uses:
 * [n_moe][n_expert] or NULL to leave the heat map out. */
char *pt_stats_json(const struct pt_stats_model *m, const struct pt_stats_sample *prev,
		    const struct pt_stats_sample *cur, const uint8_t *resident,
		    const uint32_t *uses);

/* VmRSS and /proc/self/io read_bytes of this process (0 where unreadable). */
void pt_stats_proc(uint64_t *rss_bytes, uint64_t *read_bytes);

#endif
