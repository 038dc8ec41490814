/* webui.h - serving the embedded web UI (issue 14): GET / and GET /assets/<name>.
 *
 * Pure decisions, no HTTP library here: the server's route handler passes the method, the
 * path and two request headers, and sends what pt_webui_respond says.  Every reply carries
 * Cache-Control: no-cache (assets have fixed names, so the browser revalidates with
 * If-None-Match and gets a 304 until the binary changes), Vary: Accept-Encoding and
 * X-Content-Type-Options: nosniff; the page also gets PT_WEBUI_CSP, which allows scripts,
 * styles and fetches from the same origin only (defence in depth: the page never turns model
 * text into HTML).  The gzip representation is sent when Accept-Encoding allows gzip. */
#ifndef PT_SERVER_WEBUI_H
#define PT_SERVER_WEBUI_H

#include <stdbool.h>
#include <stddef.h>

#include "util/status.h"

struct pt_server;

#define PT_WEBUI_CACHE_CONTROL "no-cache"
#define PT_WEBUI_CSP                                                                       \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "  \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

struct pt_webui_reply {
	unsigned status;          /* 200, 304, 404 (not a UI path), 405 (not GET/HEAD) */
	const unsigned char *body; /* 200: the representation's bytes (HEAD: send none) */
	size_t len;
	const char *content_type; /* 200 and 304 */
	const char *etag;         /* 200 and 304: the representation's ETag */
	bool gzip;                /* Content-Encoding: gzip */
	bool html;                /* the page: add Content-Security-Policy: PT_WEBUI_CSP */
};

/* True for the paths the web UI owns: "/" and "/assets/..." (query strings excluded). */
bool pt_webui_owns(const char *path);
/* What to answer.  if_none_match and accept_encoding may be NULL (header absent). */
void pt_webui_respond(const char *method, const char *path, const char *if_none_match,
		      const char *accept_encoding, struct pt_webui_reply *out);

/* Adds GET / and GET /assets/ (answered without the API key: the page holds no secret and
 * asks for the key itself) to the server's routes; `--no-webui` skips this call. */
enum pt_status pt_webui_register(struct pt_server *s, struct pt_error *err);

/* Header parsing, exposed for the unit tests: gzip acceptable (a gzip, x-gzip or * coding
 * with q > 0, gzip;q=0 refusing), and an If-None-Match list (or *) matching etag under the
 * weak comparison RFC 9110 prescribes for If-None-Match. */
bool pt_webui_accepts_gzip(const char *accept_encoding);
bool pt_webui_etag_matches(const char *if_none_match, const char *etag);

#endif
