/* webui_route.c - GET / and GET /assets/... of `particle serve` (HEAD too: the HTTP core
 * answers HEAD through the GET route without the body).  The decisions are webui.c's. */
#include "server/routes.h"
#include "server/server.h"
#include "server/webui.h"

static void webui_get(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	struct pt_webui_reply r;
	pt_webui_respond(req->method, req->path, pt_http_header(req, "If-None-Match"),
			 pt_http_header(req, "Accept-Encoding"), &r);
	if (r.status == 404) {
		pt_http_resp_error(resp, 404, NULL, NULL, NULL, "no such page");
		return;
	}
	pt_http_resp_header(resp, "ETag", r.etag);
	pt_http_resp_header(resp, "Cache-Control", PT_WEBUI_CACHE_CONTROL);
	pt_http_resp_header(resp, "Vary", "Accept-Encoding");
	pt_http_resp_header(resp, "X-Content-Type-Options", "nosniff");
	if (r.html) {
		pt_http_resp_header(resp, "Content-Security-Policy", PT_WEBUI_CSP);
		pt_http_resp_header(resp, "Referrer-Policy", "no-referrer");
		pt_http_resp_header(resp, "X-Frame-Options", "DENY");
	}
	if (r.status == 304) {
		pt_http_resp_bytes(resp, 304, r.content_type, "", 0);
		return;
	}
	if (r.gzip)
		pt_http_resp_header(resp, "Content-Encoding", "gzip");
	pt_http_resp_bytes(resp, 200, r.content_type, r.body, r.len);
}

enum pt_status pt_webui_register(struct pt_server *s, struct pt_error *err)
{
	const struct pt_route page = { .method = "GET", .path = "/", .public_ = true,
				       .fn = webui_get };
	const struct pt_route assets = { .method = "GET", .path = "/assets/", .prefix = true,
					 .public_ = true, .fn = webui_get };
	enum pt_status st = pt_routes_add(pt_server_routes(s), &page, err);
	return st == PT_OK ? pt_routes_add(pt_server_routes(s), &assets, err) : st;
}
