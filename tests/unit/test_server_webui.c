/* test_server_webui.c - the embedded web UI: asset table, gzip choice, ETag revalidation. */
#include <string.h>

#include "server/webui.h"
#include "server/webui_assets.h"
#include "test.h"

PT_TEST(test_webui_assets_table)
{
	bool root = false, app = false, md = false, css = false;
	for (unsigned i = 0; i < pt_webui_n_assets; i++) {
		const struct pt_webui_asset *a = &pt_webui_assets[i];
		CHECK(a->len > 0 && a->gz_len > 18);
		CHECK(a->gz[0] == 0x1f && a->gz[1] == 0x8b); /* gzip magic */
		CHECK(strcmp(a->etag, a->gz_etag) != 0);
		CHECK(a->etag[0] == '"' && a->etag[strlen(a->etag) - 1] == '"');
		CHECK(pt_webui_owns(a->path));
		root |= strcmp(a->path, "/") == 0;
		app |= strcmp(a->path, "/assets/app.js") == 0;
		md |= strcmp(a->path, "/assets/md.js") == 0;
		css |= strcmp(a->path, "/assets/app.css") == 0;
	}
	CHECK(root && app && md && css);
}

PT_TEST(test_webui_respond_page_and_assets)
{
	struct pt_webui_reply r;
	pt_webui_respond("GET", "/", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK(r.html && !r.gzip);
	CHECK(r.len > 100 && memmem(r.body, r.len, "<!doctype html>", 15));
	CHECK_EQ_STR(r.content_type, "text/html; charset=utf-8");
	pt_webui_respond("GET", "/assets/app.js", NULL, "gzip, deflate, br", &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK(r.gzip && !r.html);
	CHECK(r.body[0] == 0x1f && r.body[1] == 0x8b);
	CHECK_EQ_STR(r.content_type, "text/javascript; charset=utf-8");
	pt_webui_respond("HEAD", "/assets/app.css", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK_EQ_STR(r.content_type, "text/css; charset=utf-8");
	pt_webui_respond("GET", "/assets/nope.js", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 404);
	pt_webui_respond("GET", "/assets/../Makefile", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 404);
	pt_webui_respond("GET", "/index.html", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 404);
	pt_webui_respond("POST", "/", NULL, NULL, &r);
	CHECK_EQ_INT(r.status, 405);
	CHECK(!pt_webui_owns("/v1/models") && !pt_webui_owns("/assets") && pt_webui_owns("/assets/x"));
}

PT_TEST(test_webui_etag_revalidation)
{
	struct pt_webui_reply r, r2;
	pt_webui_respond("GET", "/assets/md.js", NULL, NULL, &r);
	REQUIRE(r.status == 200 && r.etag);
	pt_webui_respond("GET", "/assets/md.js", r.etag, NULL, &r2);
	CHECK_EQ_INT(r2.status, 304);
	CHECK(r2.body == NULL && r2.len == 0);
	CHECK_EQ_STR(r2.etag, r.etag);
	/* the identity ETag does not validate the gzip representation, and the reverse */
	pt_webui_respond("GET", "/assets/md.js", r.etag, "gzip", &r2);
	CHECK_EQ_INT(r2.status, 200);
	char list[256];
	snprintf(list, sizeof list, "\"zzz\", W/%s", r2.etag);
	pt_webui_respond("GET", "/assets/md.js", list, "gzip", &r2);
	CHECK_EQ_INT(r2.status, 304);
	pt_webui_respond("GET", "/assets/md.js", "*", NULL, &r2);
	CHECK_EQ_INT(r2.status, 304);
	pt_webui_respond("GET", "/assets/md.js", "\"other\"", NULL, &r2);
	CHECK_EQ_INT(r2.status, 200);
	CHECK(!pt_webui_etag_matches("", r.etag) && !pt_webui_etag_matches(NULL, r.etag));
}

PT_TEST(test_webui_accept_encoding)
{
	CHECK(pt_webui_accepts_gzip("gzip"));
	CHECK(pt_webui_accepts_gzip("deflate, gzip;q=0.5"));
	CHECK(pt_webui_accepts_gzip("GZIP"));
	CHECK(pt_webui_accepts_gzip("x-gzip"));
	CHECK(pt_webui_accepts_gzip("*"));
	CHECK(pt_webui_accepts_gzip("br;q=1.0, gzip ; q=0.8"));
	CHECK(!pt_webui_accepts_gzip(NULL));
	CHECK(!pt_webui_accepts_gzip(""));
	CHECK(!pt_webui_accepts_gzip("identity"));
	CHECK(!pt_webui_accepts_gzip("gzip;q=0"));
	CHECK(!pt_webui_accepts_gzip("gzip;q=0.000"));
	CHECK(!pt_webui_accepts_gzip("*, gzip;q=0"));
	CHECK(!pt_webui_accepts_gzip("gzipx, br"));
	CHECK(!pt_webui_accepts_gzip("*;q=0"));
}
