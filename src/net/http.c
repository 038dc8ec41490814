/* http.c - libcurl transfers: HEAD and ranged GET with resume-on-retry (policy in http.h). */
#include "net/http.h"

#include <curl/curl.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"

#define MAX_BACKOFF_MS 30000u

struct pt_http_client {
	CURL *h;
	struct curl_slist *hdrs;
	struct pt_http_opts o;
	char errbuf[CURL_ERROR_SIZE];
};

/* One request's state, shared by the header, write and progress callbacks. */
struct xfer {
	pt_http_client *c;
	uint64_t pos, end;      /* next byte owed to the sink; end of the wanted range */
	uint64_t cur;           /* absolute offset of the next body byte received */
	bool started, ranged, stop_ok;
	pt_http_sink sink;
	void *ctx;
	enum pt_status sink_st;
	struct pt_error *err;
	uint64_t *net;
	char content_range[128];
	struct pt_http_info *info; /* HEAD only */
};

struct pt_http_opts pt_http_default_opts(void)
{
	struct pt_http_opts o = { NULL, 0, 30, 8, 500, NULL };
	return o;
}

enum pt_status pt_http_global_init(struct pt_error *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return pt_error_set(err, PT_E_IO, "cannot initialise libcurl");
	return PT_OK;
}

enum pt_status pt_http_client_new(const struct pt_http_opts *o, pt_http_client **out,
				  struct pt_error *err)
{
	pt_http_client *c = pt_calloc(1, sizeof *c);
	*out = NULL;
	if (!c || !(c->h = curl_easy_init())) {
		pt_free(c);
		return pt_error_set(err, PT_E_NOMEM, "cannot create an HTTP client");
	}
	c->o = *o;
	if (o->bearer && o->bearer[0]) {
		char line[4200];
		snprintf(line, sizeof line, "Authorization: Bearer %.4096s", o->bearer);
		/* curl drops custom Authorization headers when a redirect changes host */
		c->hdrs = curl_slist_append(NULL, line);
		if (!c->hdrs) {
			pt_http_client_free(c);
			return pt_error_set(err, PT_E_NOMEM, "cannot create an HTTP client");
		}
	}
	*out = c;
	return PT_OK;
}

void pt_http_client_free(pt_http_client *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	curl_slist_free_all(c->hdrs);
	pt_free(c);
}

/* "Name: value" (case-insensitive name) -> value without surrounding blanks, or NULL. */
static const char *header_value(const char *line, size_t n, const char *name, size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return NULL;
	const char *v = line + k + 1, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*vlen = (size_t)(e - v);
	return v;
}

/* Copies an ETag without W/ and quotes. */
static void copy_etag(char *dst, size_t cap, const char *v, size_t n)
{
	if (n >= 2 && v[0] == 'W' && v[1] == '/') {
		v += 2;
		n -= 2;
	}
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	snprintf(dst, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
}

static size_t on_header(char *line, size_t size, size_t nitems, void *p)
{
	struct xfer *x = p;
	size_t n = size * nitems, vl;
	const char *v;
	if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) { /* a new response (redirect hop) */
		x->content_range[0] = '\0';
		if (x->info) {
			x->info->etag[0] = '\0';
			x->info->ranges = false;
		}
	} else if ((v = header_value(line, n, "content-range", &vl))) {
		snprintf(x->content_range, sizeof x->content_range, "%.*s",
			 (int)(vl < 127 ? vl : 127), v);
	} else if (x->info && (v = header_value(line, n, "etag", &vl))) {
		copy_etag(x->info->etag, sizeof x->info->etag, v, vl);
	} else if (x->info && (v = header_value(line, n, "x-linked-etag", &vl))) {
		copy_etag(x->info->linked_etag, sizeof x->info->linked_etag, v, vl);
	} else if (x->info && (v = header_value(line, n, "x-linked-size", &vl))) {
		char num[32];
		snprintf(num, sizeof num, "%.*s", (int)(vl < 31 ? vl : 31), v);
		x->info->linked_size = strtoull(num, NULL, 10);
	} else if (x->info && (v = header_value(line, n, "accept-ranges", &vl))) {
		x->info->ranges = vl == 5 && strncasecmp(v, "bytes", 5) == 0;
	}
	return n;
}

/* The start offset of a 206 answer ("bytes A-B/T"), or false when unparseable. */
static bool range_start(const char *cr, uint64_t *start)
{
	char *end;
	if (strncasecmp(cr, "bytes ", 6) != 0 || !isdigit((unsigned char)cr[6]))
		return false;
	*start = strtoull(cr + 6, &end, 10);
	return *end == '-';
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *p)
{
	struct xfer *x = p;
	size_t n = size * nitems;
	if (x->net)
		*x->net += n;
	if (!x->started) {
		long code = 0;
		uint64_t first;
		curl_easy_getinfo(x->c->h, CURLINFO_RESPONSE_CODE, &code);
		x->started = true;
		if (code == 206) {
			if (!range_start(x->content_range, &first) || first != x->pos) {
				x->sink_st = pt_error_set(x->err, PT_E_FORMAT, "server answered a "
							  "request for byte %" PRIu64 " with '%s'",
							  x->pos, x->content_range);
				return 0;
			}
			x->ranged = true;
			x->cur = first;
		} else { /* 200: the whole body; skip to pos */
			x->ranged = false;
			x->cur = 0;
		}
	}
	uint64_t lo = x->cur, hi = x->cur + n;
	x->cur = hi;
	if (hi > x->pos && lo < x->end) {
		uint64_t a = lo > x->pos ? lo : x->pos, b = hi < x->end ? hi : x->end;
		if (a != x->pos) {
			x->sink_st = pt_error_set(x->err, PT_E_FORMAT, "HTTP body out of order");
			return 0;
		}
		x->sink_st = x->sink(x->ctx, a, buf + (a - lo), (size_t)(b - a), x->err);
		if (x->sink_st != PT_OK)
			return 0;
		x->pos = b;
	}
	if (x->pos >= x->end) {
		x->stop_ok = true; /* everything wanted arrived; a 200 body may go on */
		return hi > x->end || lo >= x->end ? 0 : n;
	}
	return n;
}

/* The flag is set by a signal handler or another thread: read it atomically. */
static bool cancel_set(const pt_http_client *c)
{
	return c->o.cancel && __atomic_load_n(c->o.cancel, __ATOMIC_RELAXED);
}

static int on_progress(void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct xfer *x = p;
	(void)dt, (void)dn, (void)ut, (void)un;
	return cancel_set(x->c) ? 1 : 0;
}

static void setup(pt_http_client *c, const char *url, struct xfer *x)
{
	CURL *h = c->h;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(c->o.stall_s ? c->o.stall_s : 30));
	curl_easy_setopt(h, CURLOPT_USERAGENT, "particle/" PT_VERSION_STRING);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
	if (c->hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
	if (c->o.max_recv_bps)
		curl_easy_setopt(h, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)c->o.max_recv_bps);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	c->errbuf[0] = '\0';
}

static bool transient_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* Classifies a failed perform: PT_OK = transient (retry), else the permanent error. */
static enum pt_status classify(pt_http_client *c, CURLcode rc, const char *url, char *why,
			       size_t cap, struct pt_error *err)
{
	long code = 0;
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_HTTP_RETURNED_ERROR) {
		snprintf(why, cap, "HTTP %ld", code);
		if (code >= 500 || code == 429 || code == 408)
			return PT_OK;
		if (code == 404 || code == 410)
			return pt_error_set(err, PT_E_INVALID, "not found (HTTP %ld): %s", code, url);
		if (code == 401 || code == 403)
			return pt_error_set(err, PT_E_INVALID, "access denied (HTTP %ld): %s; %s",
					    code, url, c->o.bearer && c->o.bearer[0]
					    ? "the token in HF_TOKEN was refused (no access to "
					      "this repository? gated models need the license "
					      "accepted on the hub)"
					    : "set HF_TOKEN to a Hugging Face access token for "
					      "private or gated repositories");
		if (code == 416)
			return pt_error_set(err, PT_E_FORMAT, "HTTP 416 (range not satisfiable): "
					    "%s is shorter than expected; the remote file changed?",
					    url);
		return pt_error_set(err, PT_E_IO, "HTTP %ld from %s", code, url);
	}
	snprintf(why, cap, "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
	if (transient_curl(rc))
		return PT_OK;
	return pt_error_set(err, PT_E_IO, "%s: %s", url, why);
}

/* Sleeps ms in small steps; false when cancelled meanwhile. */
static bool backoff(const pt_http_client *c, uint32_t ms)
{
	while (ms) {
		uint32_t step = ms < 50 ? ms : 50;
		struct timespec ts = { 0, (long)step * 1000000L };
		if (cancel_set(c))
			return false;
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return !cancel_set(c);
}

static enum pt_status cancelled(struct pt_error *err)
{
	return pt_error_set(err, PT_E_CANCELLED, "interrupted");
}

enum pt_status pt_http_head(pt_http_client *c, const char *url, struct pt_http_info *out,
			    struct pt_error *err)
{
	uint32_t fails = 0, delay = c->o.backoff_ms;
	char why[CURL_ERROR_SIZE + 32];
	for (;;) {
		struct xfer x = { .c = c, .err = err, .info = out };
		memset(out, 0, sizeof *out);
		setup(c, url, &x);
		curl_easy_setopt(c->h, CURLOPT_NOBODY, 1L);
		CURLcode rc = curl_easy_perform(c->h);
		if (cancel_set(c))
			return cancelled(err);
		if (rc == CURLE_OK) {
			curl_off_t len = -1;
			curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &out->code);
			curl_easy_getinfo(c->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
			out->size_known = len >= 0;
			out->size = len >= 0 ? (uint64_t)len : 0;
			return PT_OK;
		}
		enum pt_status st = classify(c, rc, url, why, sizeof why, err);
		if (st != PT_OK)
			return st;
		if (++fails > c->o.retries)
			return pt_error_set(err, PT_E_IO, "%s: giving up after %u retries: %s", url,
					    c->o.retries, why);
		if (!backoff(c, delay))
			return cancelled(err);
		delay = delay * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : delay * 2;
	}
}

enum pt_status pt_http_get(pt_http_client *c, const char *url, uint64_t start, uint64_t end,
			   pt_http_sink sink, void *ctx, bool *ranged, uint64_t *net,
			   struct pt_error *err)
{
	uint32_t fails = 0, delay = c->o.backoff_ms;
	uint64_t pos = start;
	char why[CURL_ERROR_SIZE + 32], range[64];
	while (pos < end) {
		struct xfer x = { .c = c, .pos = pos, .end = end, .sink = sink, .ctx = ctx,
				  .err = err, .net = net };
		uint64_t before = pos;
		setup(c, url, &x);
		curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
		snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, pos, end - 1);
		curl_easy_setopt(c->h, CURLOPT_RANGE, range);
		CURLcode rc = curl_easy_perform(c->h);
		pos = x.pos;
		if (x.started && ranged)
			*ranged = x.ranged;
		if (x.sink_st != PT_OK)
			return x.sink_st;
		if (cancel_set(c))
			return cancelled(err);
		if (pos >= end)
			return PT_OK;
		enum pt_status st = PT_OK;
		if (rc == CURLE_OK) /* the body ended early */
			snprintf(why, sizeof why, "body ended at byte %" PRIu64 " of %" PRIu64,
				 pos, end);
		else
			st = classify(c, rc, url, why, sizeof why, err);
		if (st != PT_OK)
			return st;
		if (pos > before) { /* progress: the failure count starts over */
			fails = 0;
			delay = c->o.backoff_ms;
		}
		if (++fails > c->o.retries)
			return pt_error_set(err, PT_E_IO, "%s: giving up after %u retries: %s", url,
					    c->o.retries, why);
		if (!backoff(c, delay))
			return cancelled(err);
		delay = delay * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : delay * 2;
	}
	return PT_OK;
}
