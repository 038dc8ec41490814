/* webui.c - the embedded web UI's replies (webui.h). */
#include "server/webui.h"

#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "server/webui_assets.h"

bool pt_webui_owns(const char *path)
{
	return strcmp(path, "/") == 0 || strncmp(path, "/assets/", 8) == 0;
}

/* q value of one Accept-Encoding element's parameters ("" -> 1). */
static double qvalue(const char *p, const char *end)
{
	while (p < end) {
		while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
			p++;
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			char num[16];
			size_t n = (size_t)(end - p - 2) < sizeof num - 1 ? (size_t)(end - p - 2)
									 : sizeof num - 1;
			memcpy(num, p + 2, n);
			num[n] = 0;
			return strtod(num, NULL);
		}
		while (p < end && *p != ';')
			p++;
	}
	return 1.0;
}

bool pt_webui_accepts_gzip(const char *ae)
{
	int gzip = -1, star = -1; /* -1 unmentioned, 0 refused, 1 accepted */
	if (!ae)
		return false;
	for (const char *p = ae; *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *tok = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
			p++;
		const size_t tl = (size_t)(p - tok);
		const char *params = p;
		while (*p && *p != ',')
			p++;
		const int ok = qvalue(params, p) > 0;
		if ((tl == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
		    (tl == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
			gzip = gzip == 1 ? 1 : ok;
		else if (tl == 1 && *tok == '*')
			star = ok;
	}
	return gzip == 1 || (gzip == -1 && star == 1);
}

bool pt_webui_etag_matches(const char *inm, const char *etag)
{
	if (!inm || !etag)
		return false;
	const size_t el = strlen(etag);
	for (const char *p = inm; *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		const char *tok = p;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if ((size_t)(p - tok) == el && memcmp(tok, etag, el) == 0)
			return true;
	}
	return false;
}

void pt_webui_respond(const char *method, const char *path, const char *inm, const char *ae,
		      struct pt_webui_reply *out)
{
	memset(out, 0, sizeof *out);
	const struct pt_webui_asset *a = NULL;
	for (unsigned i = 0; i < pt_webui_n_assets && !a; i++)
		if (strcmp(pt_webui_assets[i].path, path) == 0)
			a = &pt_webui_assets[i];
	if (!a) {
		out->status = 404;
		return;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		out->status = 405;
		return;
	}
	out->gzip = pt_webui_accepts_gzip(ae);
	out->etag = out->gzip ? a->gz_etag : a->etag;
	out->content_type = a->content_type;
	out->html = strncmp(a->content_type, "text/html", 9) == 0;
	if (pt_webui_etag_matches(inm, out->etag)) {
		out->status = 304;
		return;
	}
	out->status = 200;
	out->body = out->gzip ? a->gz : a->data;
	out->len = out->gzip ? a->gz_len : a->len;
}
