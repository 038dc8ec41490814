/* metrics.c - GET /metrics in the Prometheus text format (version 0.0.4): requests by
 * status, tokens, prefill and decode speed, expert-cache counters (total and per MoE layer),
 * memory, queue and slots.  Names are prefixed particle_. */
#include "server/srv_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
	for (int tries = 0; tries < 2 && !b->oom; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 8192;
		while (cap <= b->len + (size_t)n)
			cap *= 2;
		char *p = pt_realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static void metric(struct buf *b, const char *name, const char *type, const char *help,
		   double v)
{
	put(b, "# HELP particle_%s %s\n# TYPE particle_%s %s\nparticle_%s %.17g\n", name, help,
	    name, type, name, v);
}

static void on_metrics(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	pt_server *s = ctx;
	(void)req;
	struct pt_server_snapshot sn;
	struct pt_http_counters hc = { 0 };
	struct buf b = { 0 };
	pt_server_snapshot(s, &sn);
	if (s->http)
		pt_http_counters(s->http, &hc);
	put(&b, "# HELP particle_http_responses_total HTTP responses by status\n"
		"# TYPE particle_http_responses_total counter\n");
	static const int codes[] = { 400, 401, 404, 413, 429, 503 };
	const uint64_t vals[] = { hc.s400, hc.s401, hc.s404, hc.s413, hc.s429, hc.s503 };
	for (int c = 1; c <= 5; c++)
		put(&b, "particle_http_responses_total{class=\"%dxx\"} %llu\n", c,
		    (unsigned long long)hc.by_status[c]);
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
		put(&b, "particle_http_responses_total{status=\"%d\"} %llu\n", codes[i],
		    (unsigned long long)vals[i]);
	metric(&b, "http_connections", "gauge", "open HTTP connections", hc.connections);
	metric(&b, "requests_total", "counter", "generation requests accepted", (double)sn.requests_total);
	metric(&b, "requests_ok_total", "counter", "generation requests completed", (double)sn.requests_ok);
	metric(&b, "requests_cancelled_total", "counter", "generation requests cancelled (client gone)",
	       (double)sn.requests_cancelled);
	metric(&b, "requests_rejected_total", "counter", "generation requests refused: queue full",
	       (double)sn.requests_rejected);
	metric(&b, "prompt_tokens_total", "counter", "prompt tokens of generation requests",
	       (double)sn.prompt_tokens_total);
	metric(&b, "prompt_cached_tokens_total", "counter", "prompt tokens reused from the KV cache",
	       (double)sn.cached_tokens_total);
	metric(&b, "prompt_replayed_tokens_total", "counter", "reused prompt tokens evaluated again "
	       "after a recurrent-state checkpoint", (double)sn.replayed_tokens_total);
	metric(&b, "generated_tokens_total", "counter", "tokens generated",
	       (double)sn.gen_tokens_total);
	metric(&b, "prefill_seconds_total", "counter", "time spent evaluating prompts", sn.prefill_s_total);
	metric(&b, "decode_seconds_total", "counter", "time spent generating", sn.decode_s_total);
	metric(&b, "prefill_tokens_per_second", "gauge", "prefill speed of the last request",
	       sn.last_prefill_tps);
	metric(&b, "decode_tokens_per_second", "gauge", "decode speed of the last request",
	       sn.last_decode_tps);
	metric(&b, "time_to_first_token_seconds", "gauge", "TTFT of the last request", sn.last_ttft_s);
	metric(&b, "queue_depth", "gauge", "requests waiting for a slot", sn.queue_depth);
	metric(&b, "queue_max", "gauge", "--max-queue", sn.max_queue);
	metric(&b, "slots", "gauge", "generation slots (--parallel)", sn.n_slots);
	metric(&b, "slots_busy", "gauge", "slots generating now", sn.slots_busy);
	metric(&b, "rss_bytes", "gauge", "resident set size now", (double)sn.rss_bytes);
	metric(&b, "peak_rss_bytes", "gauge", "peak resident set size", (double)sn.engine.peak_rss_bytes);
	metric(&b, "memory_budget_bytes", "gauge", "the memory plan's budget",
	       (double)sn.engine.memory_budget);
	metric(&b, "expert_cache_hits_total", "counter", "expert cache hits, all layers",
	       (double)sn.engine.hits);
	metric(&b, "expert_cache_misses_total", "counter", "expert cache misses, all layers",
	       (double)sn.engine.misses);
	metric(&b, "expert_bytes_read_total", "counter", "expert bytes read from storage",
	       (double)sn.engine.bytes_read);
	metric(&b, "decode_tokens_total", "counter", "tokens decoded (rows of decode passes)",
	       (double)sn.engine.decode_tokens);
	metric(&b, "decode_steps_total", "counter", "decode passes (a batch of --parallel rows is one)",
	       (double)sn.engine.decode_steps);
	metric(&b, "expert_gets_total", "counter",
	       "routed-expert fetches (one per expert per layer per pass, however many rows use it)",
	       (double)sn.engine.expert_gets);
	metric(&b, "engine_sequences", "gauge", "KV sequences (--parallel + --cache-prompts)",
	       sn.engine.n_seq);
	metric(&b, "uptime_seconds", "gauge", "seconds since the server started", sn.uptime_s);
	static const char *const names[3] = { "expert_layer_hits_total", "expert_layer_misses_total",
					      "expert_layer_bytes_read_total" };
	for (int k = 0; k < 3; k++) {
		put(&b, "# HELP particle_%s per MoE layer\n# TYPE particle_%s counter\n", names[k],
		    names[k]);
		for (uint32_t i = 0; i < sn.engine.n_moe_layers; i++) {
			uint64_t v[3];
			pt_server_layer_stats(s, i, &v[0], &v[1], &v[2]);
			put(&b, "particle_%s{layer=\"%u\"} %llu\n", names[k], i,
			    (unsigned long long)v[k]);
		}
	}
	if (b.oom) {
		pt_free(b.p);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		return;
	}
	pt_http_resp_bytes(resp, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
	pt_free(b.p);
}

enum pt_status pt_srv_register_metrics(pt_server *s, struct pt_error *err)
{
	const struct pt_route r = { "GET", "/metrics", false, false, on_metrics, s };
	return pt_routes_add(&s->routes, &r, err);
}
