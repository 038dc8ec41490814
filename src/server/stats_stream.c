/* stats_stream.c - GET /v1/stats/stream (stats.h): samples the server's published state and
 * the engine's per-layer expert heat map every interval and streams pt_stats_json as SSE.
 * Runs on the connection's thread; the read callback returns "nothing yet" at least every
 * 50 ms so the HTTP core notices a client that left or a server that stops. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "server/routes.h"
#include "server/server.h"
#include "server/state.h"
#include "server/stats.h"
#include "util/alloc.h"

#define MAX_LAYERS 1024 /* heat map bound (real models have < 100 MoE layers) */
#define MAX_EXPERTS 4096

/* What a stream knows of the model (taken once, when it starts). */
struct stats_route {
	pt_server *s;
	const pt_engine *e;
	struct pt_stats_model m;
	uint32_t layers[MAX_LAYERS];
};

struct stream {
	struct stats_route rt[1];
	double interval_s, next_s;
	bool have_prev;
	struct pt_stats_sample prev;
	uint8_t *resident;  /* [n_moe][n_expert] */
	uint32_t *uses;
	char *event;        /* pending bytes of the current event */
	size_t len, off;
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void take_sample(struct stream *st, struct pt_stats_sample *c)
{
	struct pt_server_snapshot snap;
	struct timespec ts;
	pt_server_snapshot(st->rt->s, &snap);
	clock_gettime(CLOCK_REALTIME, &ts);
	memset(c, 0, sizeof *c);
	c->t_s = mono_s();
	c->wall_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	c->uptime_s = snap.uptime_s;
	c->eng = snap.engine;
	pt_stats_proc(&c->rss_bytes, &c->proc_read_bytes);
	if (snap.rss_bytes)
		c->rss_bytes = snap.rss_bytes;
	c->slots_total = snap.n_slots;
	c->slots_busy = snap.slots_busy;
	c->queue_depth = snap.queue_depth;
	c->max_queue = snap.max_queue;
	c->requests_total = snap.requests_total;
	c->requests_ok = snap.requests_ok;
	c->requests_cancelled = snap.requests_cancelled;
	c->requests_rejected = snap.requests_rejected;
	c->prompt_tokens = snap.prompt_tokens_total;
	c->cached_tokens = snap.cached_tokens_total;
	c->generated_tokens = snap.gen_tokens_total;
	c->ttft_s = snap.requests_ok || snap.requests_cancelled ? snap.last_ttft_s : -1;
	for (uint32_t i = 0; i < snap.n_slots && i < PT_SERVER_MAX_SLOTS; i++) {
		const struct pt_server_slot_info *sl = &snap.slots[i];
		if (!sl->busy)
			continue;
		if (!sl->prefilling)
			c->slots_generating++;
		if (sl->gen_tokens > 0)
			c->ttft_s = sl->ttft_s;
		/* the prompt bar follows the request still prefilling, else the newest one */
		if (sl->prefilling || c->prefill_total == 0) {
			c->prefill_total = sl->prompt_tokens > sl->cached_tokens
						   ? sl->prompt_tokens - sl->cached_tokens : 0;
			c->prefill_done = sl->prefilling ? sl->prefill_done : c->prefill_total;
		}
	}
}

/* Builds the next event into st->event. */
static bool next_event(struct stream *st)
{
	struct pt_stats_sample c;
	const struct pt_stats_model *m = &st->rt->m;
	take_sample(st, &c);
	for (uint32_t l = 0; l < m->n_moe; l++)
		pt_engine_layer_experts(st->rt->e, l, st->resident + (size_t)l * m->n_expert,
					st->uses + (size_t)l * m->n_expert, m->n_expert);
	char *json = pt_stats_json(m, st->have_prev ? &st->prev : NULL, &c,
				   m->n_moe ? st->resident : NULL, m->n_moe ? st->uses : NULL);
	st->prev = c;
	st->have_prev = true;
	if (!json)
		return false;
	const size_t n = strlen(json);
	pt_free(st->event);
	st->event = pt_malloc(n + 8);
	if (st->event) {
		memcpy(st->event, "data: ", 6);
		memcpy(st->event + 6, json, n);
		memcpy(st->event + 6 + n, "\n\n", 2);
		st->len = n + 8;
		st->off = 0;
	}
	pt_free(json);
	return st->event != NULL;
}

static ssize_t stream_read(void *ctx, char *buf, size_t cap)
{
	struct stream *st = ctx;
	if (st->off < st->len) {
		size_t n = st->len - st->off < cap ? st->len - st->off : cap;
		memcpy(buf, st->event + st->off, n);
		st->off += n;
		return (ssize_t)n;
	}
	const double now = mono_s();
	if (now < st->next_s) {
		double wait = st->next_s - now;
		if (wait > 0.05)
			wait = 0.05;
		struct timespec ts = { 0, (long)(wait * 1e9) };
		nanosleep(&ts, NULL);
		return 0;
	}
	st->next_s = now + st->interval_s;
	if (!next_event(st))
		return PT_HTTP_ABORT; /* out of memory: drop this client, keep serving */
	return stream_read(ctx, buf, cap);
}

static void stream_free(void *ctx)
{
	struct stream *st = ctx;
	pt_free(st->resident);
	pt_free(st->uses);
	pt_free(st->event);
	pt_free(st);
}

static void grab_engine(void *ctx, const pt_engine *e);

static void stats_get(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	const char *iv = pt_http_query(req, "interval_ms");
	long ms = 500;
	if (iv) {
		char *end = NULL;
		ms = strtol(iv, &end, 10);
		if (!*iv || *end || ms < 100 || ms > 10000) {
			pt_http_resp_error(resp, 400, NULL, "interval_ms", NULL,
					   "interval_ms must be an integer from 100 to 10000");
			return;
		}
	}
	struct stream *st = pt_calloc(1, sizeof *st);
	if (st) {
		st->rt->s = ctx;
		/* the engine's identity and shape; the engine outlives every stream (the server
		 * stops its HTTP side before it lets go of the engine) */
		pt_server_with_engine(ctx, grab_engine, st->rt);
		const size_t cells = (size_t)st->rt->m.n_moe * st->rt->m.n_expert;
		st->interval_s = (double)ms / 1000.0;
		st->resident = pt_calloc(cells + 1, 1);
		st->uses = pt_calloc(cells + 1, sizeof *st->uses);
	}
	if (!st || !st->resident || !st->uses) {
		if (st)
			stream_free(st);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		return;
	}
	resp->status = 200;
	snprintf(resp->content_type, sizeof resp->content_type, "text/event-stream");
	pt_http_resp_header(resp, "Cache-Control", "no-cache");
	pt_http_resp_header(resp, "X-Accel-Buffering", "no");
	resp->read = stream_read;
	resp->read_ctx = st;
	resp->read_free = stream_free;
	resp->endless = true; /* SIGINT/SIGTERM end it at once */
}

static void grab_engine(void *ctx, const pt_engine *e)
{
	struct stats_route *rt = ctx;
	uint32_t n_expert = 0;
	const uint32_t n_moe = pt_engine_n_moe_layers(e, &n_expert, NULL);
	rt->e = e;
	rt->m.arch = pt_engine_model(e)->hp.arch_name;
	rt->m.n_ctx = pt_engine_n_ctx(e);
	rt->m.n_expert_used = pt_engine_model(e)->hp.n_expert_used;
	if (n_moe <= MAX_LAYERS && n_expert <= MAX_EXPERTS) { /* else: no heat map */
		rt->m.n_moe = n_moe;
		rt->m.n_expert = n_expert;
		pt_engine_n_moe_layers(e, NULL, rt->layers);
		rt->m.layers = rt->layers;
	}
}

enum pt_status pt_stats_register(struct pt_server *s, struct pt_error *err)
{
	const struct pt_route r = { .method = "GET", .path = "/v1/stats/stream", .fn = stats_get,
				    .ctx = s };
	return pt_routes_add(pt_server_routes(s), &r, err);
}
