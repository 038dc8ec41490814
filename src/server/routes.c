/* routes.c - the route table and the response helpers of routes.h. */
#include "server/routes.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

enum pt_status pt_routes_add(struct pt_routes *t, const struct pt_route *r,
			     struct pt_error *err)
{
	if (!r->method || !r->path || !r->fn || r->path[0] != '/')
		return pt_error_set(err, PT_E_INVALID, "a route needs a method, a /path and a handler");
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->r[i].method, r->method) == 0 && strcmp(t->r[i].path, r->path) == 0 &&
		    t->r[i].prefix == r->prefix)
			return pt_error_set(err, PT_E_INVALID, "route %s %s is already taken",
					    r->method, r->path);
	if (t->n == PT_ROUTES_MAX)
		return pt_error_set(err, PT_E_LIMIT, "more than %d routes", PT_ROUTES_MAX);
	t->r[t->n++] = *r;
	return PT_OK;
}

static bool prefix_match(const char *prefix, const char *path)
{
	size_t n = strlen(prefix);
	if (strncmp(prefix, path, n) != 0)
		return false;
	/* "/assets" matches "/assets" and "/assets/x", not "/assetsx"; "/" matches all. */
	return n == 0 || prefix[n - 1] == '/' || path[n] == 0 || path[n] == '/';
}

const struct pt_route *pt_routes_find(const struct pt_routes *t, const char *method,
				      const char *path, bool *path_known)
{
	const struct pt_route *best = NULL;
	size_t best_len = 0;
	bool known = false;
	/* An exact route for the path (any method) hides every prefix route: GET on a POST-only
	 * API path is 405, not the web UI's catch-all. */
	for (size_t i = 0; i < t->n; i++) {
		const struct pt_route *r = &t->r[i];
		if (r->prefix || strcmp(r->path, path) != 0)
			continue;
		if (strcmp(r->method, method) == 0)
			best = r;
		else
			known = true;
	}
	if (best || known) {
		if (path_known)
			*path_known = !best && known;
		return best;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct pt_route *r = &t->r[i];
		if (!r->prefix || !prefix_match(r->path, path))
			continue;
		size_t len = strlen(r->path);
		if (strcmp(r->method, method) != 0) {
			known = true;
			continue;
		}
		if (!best || len > best_len) {
			best = r;
			best_len = len;
		}
	}
	if (path_known)
		*path_known = !best && known;
	return best;
}

void pt_http_resp_header(struct pt_http_resp *r, const char *name, const char *value)
{
	if (r->n_headers == PT_HTTP_MAX_RESP_HEADERS)
		return;
	snprintf(r->headers[r->n_headers].name, sizeof r->headers[0].name, "%s", name);
	char *v = r->headers[r->n_headers].value;
	snprintf(v, sizeof r->headers[0].value, "%s", value);
	for (; *v; v++)
		if (*v == '\r' || *v == '\n')
			*v = ' ';
	r->n_headers++;
}

void pt_http_resp_bytes(struct pt_http_resp *r, int status, const char *content_type,
			const void *data, size_t len)
{
	pt_free(r->body);
	r->body = pt_malloc(len + 1);
	if (!r->body) {
		r->status = 503;
		r->body_len = 0;
		return;
	}
	memcpy(r->body, data, len);
	r->body[len] = 0;
	r->body_len = len;
	r->status = status;
	snprintf(r->content_type, sizeof r->content_type, "%s", content_type);
}

void pt_http_resp_json(struct pt_http_resp *r, int status, cJSON *j)
{
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!s) {
		/* Out of memory: a fixed answer that needs no allocation beyond the copy. */
		static const char oom[] = "{\"error\":{\"message\":\"out of memory\","
					  "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
		pt_http_resp_bytes(r, 503, "application/json", oom, sizeof oom - 1);
		return;
	}
	pt_http_resp_bytes(r, status, "application/json", s, strlen(s));
	cJSON_free(s);
}

const char *pt_http_error_type(int status)
{
	switch (status) {
	case 400: case 404: case 405: case 413: case 415: case 431:
		return status == 404 ? "not_found_error" : "invalid_request_error";
	case 401: return "authentication_error";
	case 403: return "permission_error";
	case 408: return "timeout_error";
	case 429: return "rate_limit_error";
	case 501: return "not_supported_error";
	case 503: return "unavailable_error";
	default: return "server_error";
	}
}

void pt_http_resp_error(struct pt_http_resp *r, int status, const char *type,
			const char *param, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_CreateObject(), *e = cJSON_CreateObject();
	if (j && e && cJSON_AddItemToObject(j, "error", e)) {
		cJSON_AddStringToObject(e, "message", msg);
		cJSON_AddStringToObject(e, "type", type ? type : pt_http_error_type(status));
		if (param)
			cJSON_AddStringToObject(e, "param", param);
		else
			cJSON_AddNullToObject(e, "param");
		if (code)
			cJSON_AddStringToObject(e, "code", code);
		else
			cJSON_AddNullToObject(e, "code");
	} else {
		cJSON_Delete(e);
		cJSON_Delete(j);
		j = NULL;
	}
	pt_http_resp_json(r, status, j);
	if (j)
		r->status = status;
}
