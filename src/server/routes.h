/* routes.h - the server's route table: what an endpoint sees of a request and how it answers.
 *
 * The HTTP core (http.c, on libmicrohttpd) owns sockets, limits, the API key, CORS, 404/405
 * and the body; a route handler gets a fully received, size-checked request and fills a
 * response.  Handlers run on the connection's own thread (one per connection, bounded by
 * --max-connections), so a handler may block, e.g. waiting for a generation; it must poll
 * pt_http_alive() while it waits so a client that hangs up cancels its work.
 *
 * Other parts of the server (the web UI: `GET /`, its assets, `GET /v1/stats/stream`) add
 * their routes with pt_routes_add() from their own register function, called once from
 * server.c (register_routes) before the server starts listening; nothing else needs editing.
 *
 * A streaming answer (SSE) sets resp->read: the core calls it from the connection's thread
 * for the next bytes until it returns PT_HTTP_END; read may block, but should return 0
 * ("nothing yet") at least every ~100 ms so the core can notice a hung-up client and a
 * server stop; resp->read_free(ctx) runs once when the response is done, for any reason
 * (client gone included). */
#ifndef PT_SERVER_ROUTES_H
#define PT_SERVER_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/status.h"

struct cJSON;
struct pt_http_conn; /* the core's per-request state (opaque) */

struct pt_http_req {
	const char *method;        /* "GET", "POST", ... */
	const char *path;          /* URL path, no query string */
	const char *body;          /* NUL-terminated copy of the body ("" when none) */
	size_t body_len;           /* may contain NULs: use body_len */
	struct pt_http_conn *conn;
};

/* A request header's value (case-insensitive name), NULL when absent. */
const char *pt_http_header(const struct pt_http_req *r, const char *name);
/* A query-string argument's value, NULL when absent. */
const char *pt_http_query(const struct pt_http_req *r, const char *key);
/* False once the client has closed or reset its connection (checked now, without
 * blocking).  A client that only shut down its sending side counts as gone. */
bool pt_http_alive(const struct pt_http_req *r);
/* True once the server is stopping (SIGINT/SIGTERM): finish quickly. */
bool pt_http_stopping(const struct pt_http_req *r);

#define PT_HTTP_END ((ssize_t)-1)   /* read: the stream is complete */
#define PT_HTTP_ABORT ((ssize_t)-2) /* read: give up, close the connection */
#define PT_HTTP_MAX_RESP_HEADERS 8

typedef ssize_t (*pt_http_read_fn)(void *ctx, char *buf, size_t cap);

struct pt_http_resp {
	int status;                 /* 0 = not answered (the core answers 500) */
	char content_type[64];
	char *body;                 /* pt_malloc'd, freed by the core */
	size_t body_len;
	struct { char name[48]; char value[208]; } headers[PT_HTTP_MAX_RESP_HEADERS];
	size_t n_headers;
	pt_http_read_fn read;       /* streaming body instead of body (status must be set) */
	void *read_ctx;
	void (*read_free)(void *ctx);
	bool endless;               /* a stream with no natural end (GET /v1/stats/stream): the
				       core ends it as soon as the server starts stopping, instead
				       of waiting for it through the grace period */
};

/* Adds a response header (dropped silently past PT_HTTP_MAX_RESP_HEADERS; values are
 * truncated to fit and must not contain CR/LF, which are replaced by spaces). */
void pt_http_resp_header(struct pt_http_resp *r, const char *name, const char *value);
/* Body from bytes (copied). */
void pt_http_resp_bytes(struct pt_http_resp *r, int status, const char *content_type,
			const void *data, size_t len);
/* Body from a cJSON value, which is deleted. */
void pt_http_resp_json(struct pt_http_resp *r, int status, struct cJSON *j);
/* OpenAI's error shape {"error":{"message","type","param","code"}}; type NULL derives it
 * from the status; param and code may be NULL (null in the JSON). */
void pt_http_resp_error(struct pt_http_resp *r, int status, const char *type,
			const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* The OpenAI error type for an HTTP status (invalid_request_error, authentication_error ...). */
const char *pt_http_error_type(int status);

typedef void (*pt_route_fn)(void *ctx, const struct pt_http_req *req,
			    struct pt_http_resp *resp);

struct pt_route {
	const char *method;   /* "GET", "POST" */
	const char *path;     /* exact path, or a prefix when prefix is set */
	bool prefix;          /* matches path and everything below it (assets) */
	bool public_;         /* answered without the API key (health, web UI page) */
	pt_route_fn fn;
	void *ctx;
};

#define PT_ROUTES_MAX 64

struct pt_routes {
	struct pt_route r[PT_ROUTES_MAX];
	size_t n;
};

/* Adds a route (strings must outlive the server).  PT_E_LIMIT when the table is full,
 * PT_E_INVALID for a duplicate method+path. */
enum pt_status pt_routes_add(struct pt_routes *t, const struct pt_route *r,
			     struct pt_error *err);
/* Finds the route for method+path: exact paths win over prefixes, longer prefixes over
 * shorter.  *path_known is set when some route has the path with another method (405). */
const struct pt_route *pt_routes_find(const struct pt_routes *t, const char *method,
				      const char *path, bool *path_known);

#endif
