/* http.h - the HTTP core of `particle serve` on libmicrohttpd: one thread per connection
 * (bounded by max_connections), the bounds every request meets before a handler sees it,
 * and a graceful stop.
 *
 * Bounds, in the order a request meets them:
 *  - connections: past max_connections new ones are refused by the library;
 *  - header bytes: the whole request head must fit PT_HTTP_MAX_HEADER (else 431);
 *  - time: a request must arrive complete (head and body) within timeout_s of its first
 *    byte, and an idle keep-alive connection is closed after timeout_s (slowloris);
 *  - API key (401, unless the route is public), route (404 / 405), CORS preflight;
 *  - body: Content-Length or the received bytes above max_body answer 413.
 * Handlers never see a request that failed one of these. */
#ifndef PT_SERVER_HTTP_H
#define PT_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "server/routes.h"
#include "util/status.h"

#define PT_HTTP_MAX_CORS 16

struct pt_http_opts {
	const char *host;            /* address to bind: "127.0.0.1", "::1", "0.0.0.0", a name */
	uint16_t port;               /* 0: an ephemeral port (see pt_http_port) */
	const char *api_key;         /* NULL: no key needed */
	const char *cors[PT_HTTP_MAX_CORS]; /* allowed browser origins ("*": any) */
	size_t n_cors;
	size_t max_body;             /* bytes */
	uint32_t max_connections;
	uint32_t timeout_s;          /* request arrival / idle limit */
	FILE *log;                   /* one line per request (NULL: quiet) */
};

typedef struct pt_http pt_http;

/* Binds and starts serving the routes (which must outlive the server). */
enum pt_status pt_http_start(const struct pt_http_opts *o, const struct pt_routes *routes,
			     pt_http **out, struct pt_error *err);
uint16_t pt_http_port(const pt_http *h);
/* Graceful stop: no new connections; requests being answered get grace_s seconds to
 * finish, then handlers are told to stop (pt_http_stopping) and the server closes. */
void pt_http_stop(pt_http *h, double grace_s);

/* Counters for /metrics: answers by status class and in flight now. */
struct pt_http_counters {
	uint64_t by_status[6];       /* index status / 100 (1xx..5xx), 0 unused */
	uint64_t s400, s401, s404, s413, s429, s503; /* a few statuses on their own */
	uint32_t connections;        /* open now */
	uint32_t busy;               /* requests being answered now */
};
void pt_http_counters(pt_http *h, struct pt_http_counters *out);

#endif
