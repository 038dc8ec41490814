/* webui_assets.h - the web UI's files compiled into the binary (issue 14).
 *
 * The table is generated at build time by tools/embed_assets.c from the files in webui/ (Makefile rule
 * "web UI assets") into $(BUILD)/gen/webui_assets.c: each file as /assets/<name>, index.html
 * also as /.  Both representations are stored: the bytes and `gzip -9n` of them, each with
 * its own strong ETag (a quoted hash of the bytes; the gzip one ends in -gz). */
#ifndef PT_SERVER_WEBUI_ASSETS_H
#define PT_SERVER_WEBUI_ASSETS_H

#include <stddef.h>

struct pt_webui_asset {
	const char *path;         /* URL path: "/" or "/assets/app.js" */
	const char *content_type; /* with charset for text */
	const unsigned char *data;
	size_t len;
	const unsigned char *gz;  /* gzip of data */
	size_t gz_len;
	const char *etag;         /* "\"<hash>\"" */
	const char *gz_etag;      /* "\"<hash>-gz\"" */
};

extern const struct pt_webui_asset pt_webui_assets[];
extern const unsigned pt_webui_n_assets;

#endif
