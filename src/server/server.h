/* server.h - `particle serve` as a library object: an engine (already loaded and planned),
 * its chat template, the HTTP core with the OpenAI-style routes, and the generation
 * scheduler (bounded FIFO queue in front of the generation slots).
 *
 * Life cycle: pt_server_create (routes registered, nothing listening) -> pt_server_listen
 * -> ... -> pt_server_stop (graceful) -> pt_server_destroy.  The engine stays the caller's. */
#ifndef PT_SERVER_SERVER_H
#define PT_SERVER_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/engine.h"
#include "server/http.h"
#include "server/request.h"
#include "server/state.h"
#include "util/status.h"

struct pt_server_opts {
	struct pt_http_opts http;
	struct pt_req_defaults defaults;   /* sampling defaults, -n, --max-body */
	const char *model_id;              /* id in /v1/models and responses */
	const char *template_src;          /* --chat-template-file text (NULL: the model's) */
	uint32_t parallel;                 /* generation slots (1 until multiseq lands) */
	uint32_t max_queue;                /* waiting requests beyond the slots */
	uint32_t n_batch;                  /* the engine's prefill chunk (progress steps) */
	int reasoning_format;              /* 0 none, 1 deepseek */
	bool metrics;                      /* GET /metrics on (default on) */
	bool no_webui;
	FILE *log;                         /* request log (NULL: quiet) */
};

typedef struct pt_server pt_server;

enum pt_status pt_server_create(pt_engine *e, const struct pt_server_opts *o, pt_server **out,
				struct pt_error *err);
enum pt_status pt_server_listen(pt_server *s, struct pt_error *err);
uint16_t pt_server_port(const pt_server *s);
/* Stops taking requests, lets running ones finish for up to grace_s, then cancels them. */
void pt_server_stop(pt_server *s, double grace_s);
void pt_server_destroy(pt_server *s); /* NULL-safe; stops first if needed */

/* The route table, for modules that add routes (web UI) before pt_server_listen. */
struct pt_routes *pt_server_routes(pt_server *s);

#endif
