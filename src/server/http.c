/* http.c - the HTTP core on libmicrohttpd (see http.h): request intake and its bounds, the
 * API key, CORS, route dispatch, streaming bodies, a watchdog for slow clients and the
 * graceful stop.  No HTTP parsing of our own: the library parses, we only bound. */
#include "server/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/limits.h"

/* One open connection, for the watchdog: the socket and since when it has been waiting for
 * a request to arrive (READING) or is being answered (BUSY). */
struct tracked {
	int fd;
	int phase;           /* 0 reading a request, 1 answering it */
	double since;
	bool cut;            /* the watchdog already shut it down */
	struct tracked *prev, *next;
};

struct pt_http_conn {
	pt_http *h;
	struct MHD_Connection *mc;
	struct tracked *t;
	char *body;
	size_t len, cap;
	bool too_big;        /* the body passed max_body: answered 413 at its end */
	bool answered;       /* a response was queued in the first call */
	bool counted;        /* counted in h->busy until completed */
	double start;
	int status;
	char method[16];
	char path[256];
};

struct pt_http {
	struct pt_http_opts o;
	const struct pt_routes *routes;
	struct MHD_Daemon *d;
	uint16_t port;
	pthread_mutex_t mu;
	struct tracked *conns;    /* open connections (under mu) */
	pthread_t watchdog;
	bool watchdog_running;
	atomic_bool stop_soft;    /* no new work, finishing */
	atomic_bool stop_hard;    /* handlers must return now */
	atomic_uint busy;
	struct pt_http_counters c; /* under mu */
	bool loopback;            /* bound to a loopback address: Host names checked */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what handlers may ask about their request ------------------------------------------ */

const char *pt_http_header(const struct pt_http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn->mc, MHD_HEADER_KIND, name);
}

const char *pt_http_query(const struct pt_http_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn->mc, MHD_GET_ARGUMENT_KIND, key);
}

static bool fd_alive(int fd)
{
	if (fd < 0)
		return true;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return true;
	if (n == 0)
		return false; /* orderly shutdown by the peer */
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool pt_http_alive(const struct pt_http_req *r)
{
	return fd_alive(r->conn->t ? r->conn->t->fd : -1);
}

bool pt_http_stopping(const struct pt_http_req *r)
{
	return atomic_load(&r->conn->h->stop_hard);
}

/* ---- connection tracking and the watchdog ----------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	pt_http *h = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct tracked *t = pt_calloc(1, sizeof *t);
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!t)
			return;
		t->fd = ci ? ci->connect_fd : -1;
		t->since = now_s();
		pthread_mutex_lock(&h->mu);
		t->next = h->conns;
		if (h->conns)
			h->conns->prev = t;
		h->conns = t;
		h->c.connections++;
		pthread_mutex_unlock(&h->mu);
		*socket_ctx = t;
		return;
	}
	struct tracked *t = *socket_ctx;
	if (!t)
		return;
	pthread_mutex_lock(&h->mu);
	if (t->prev)
		t->prev->next = t->next;
	else
		h->conns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	h->c.connections--;
	pthread_mutex_unlock(&h->mu);
	pt_free(t);
	*socket_ctx = NULL;
}

static void set_phase(pt_http *h, struct tracked *t, int phase)
{
	if (!t)
		return;
	pthread_mutex_lock(&h->mu);
	t->phase = phase;
	t->since = now_s();
	pthread_mutex_unlock(&h->mu);
}

/* A connection that has not delivered a whole request within timeout_s of its first byte
 * (or of the previous answer, on keep-alive) is shut down: its thread then sees EOF and
 * the library closes it.  Connections being answered are left alone. */
static void *watchdog_main(void *arg)
{
	pt_http *h = arg;
	while (!atomic_load(&h->stop_hard)) {
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		double t = now_s();
		pthread_mutex_lock(&h->mu);
		for (struct tracked *c = h->conns; c; c = c->next)
			if (c->phase == 0 && !c->cut && c->fd >= 0 &&
			    t - c->since > (double)h->o.timeout_s) {
				shutdown(c->fd, SHUT_RDWR);
				c->cut = true;
			}
		pthread_mutex_unlock(&h->mu);
	}
	return NULL;
}

/* ---- responses -------------------------------------------------------------------------- */

struct stream {
	pt_http *h;
	int fd;
	pt_http_read_fn read;
	void *ctx;
	void (*free_fn)(void *ctx);
	bool endless;        /* ends when the server starts stopping (resp->endless) */
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	for (;;) {
		double t0 = now_s();
		ssize_t n = s->read(s->ctx, buf, max);
		if (n != 0)
			return n == PT_HTTP_END ? MHD_CONTENT_READER_END_OF_STREAM
			       : n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
		if (!fd_alive(s->fd) || atomic_load(&s->h->stop_hard))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (s->endless && atomic_load(&s->h->stop_soft))
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (now_s() - t0 < 0.001) { /* a reader that does not block: do not spin */
			struct timespec ts = { 0, 10 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	if (s->free_fn)
		s->free_fn(s->ctx);
	pt_free(s);
}

static bool origin_allowed(const pt_http *h, const char *origin)
{
	for (size_t i = 0; origin && i < h->o.n_cors; i++)
		if (strcmp(h->o.cors[i], "*") == 0 || strcmp(h->o.cors[i], origin) == 0)
			return true;
	return false;
}

static void add_cors(pt_http *h, struct MHD_Connection *mc, struct MHD_Response *r)
{
	const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
	if (!origin_allowed(h, origin))
		return;
	MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
	MHD_add_response_header(r, "Vary", "Origin");
}

static void count_status(pt_http *h, int status)
{
	pthread_mutex_lock(&h->mu);
	if (status >= 100 && status < 600)
		h->c.by_status[status / 100]++;
	h->c.s400 += status == 400;
	h->c.s401 += status == 401;
	h->c.s404 += status == 404;
	h->c.s413 += status == 413;
	h->c.s429 += status == 429;
	h->c.s503 += status == 503;
	pthread_mutex_unlock(&h->mu);
}

/* Queues resp on the connection; frees what resp owns. */
static enum MHD_Result send_resp(struct pt_http_conn *cn, struct pt_http_resp *resp)
{
	pt_http *h = cn->h;
	struct MHD_Response *r = NULL;
	if (resp->status == 0) {
		pt_free(resp->body);
		resp->body = NULL;
		pt_http_resp_error(resp, 500, NULL, NULL, NULL, "the handler gave no answer");
	}
	if (resp->read) {
		struct stream *s = pt_calloc(1, sizeof *s);
		if (s) {
			s->h = h;
			s->fd = cn->t ? cn->t->fd : -1;
			s->read = resp->read;
			s->ctx = resp->read_ctx;
			s->free_fn = resp->read_free;
			s->endless = resp->endless;
			r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s,
							      stream_free);
			if (!r)
				stream_free(s);
		} else if (resp->read_free) {
			resp->read_free(resp->read_ctx);
		}
	} else {
		r = MHD_create_response_from_buffer(resp->body_len, resp->body ? resp->body : "",
						    MHD_RESPMEM_MUST_COPY);
	}
	pt_free(resp->body);
	resp->body = NULL;
	if (!r)
		return MHD_NO;
	if (resp->content_type[0])
		MHD_add_response_header(r, "Content-Type", resp->content_type);
	for (size_t i = 0; i < resp->n_headers; i++)
		MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
	add_cors(h, cn->mc, r);
	if (atomic_load(&h->stop_soft)) {
		MHD_add_response_header(r, "Connection", "close");
	} else {
		/* the idle cut (watchdog_main), advertised: clients that reuse idle connections
		 * (Node's fetch keeps them 4 s) then drop them before the server does instead of
		 * sending a request into a connection being closed */
		char ka[32];
		snprintf(ka, sizeof ka, "timeout=%u", (unsigned)h->o.timeout_s);
		MHD_add_response_header(r, "Keep-Alive", ka);
	}
	cn->status = resp->status;
	count_status(h, resp->status);
	enum MHD_Result ok = MHD_queue_response(cn->mc, (unsigned)resp->status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_error(struct pt_http_conn *cn, int status, const char *fmt,
				  const char *arg)
{
	struct pt_http_resp resp = { 0 };
	pt_http_resp_error(&resp, status, NULL, NULL, NULL, fmt, arg);
	if (status == 401)
		pt_http_resp_header(&resp, "WWW-Authenticate", "Bearer");
	return send_resp(cn, &resp);
}

/* ---- request intake --------------------------------------------------------------------- */

static bool key_ok(const pt_http *h, struct MHD_Connection *mc)
{
	if (!h->o.api_key)
		return true;
	const char *a = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
	if (!a || strncasecmp(a, "Bearer ", 7) != 0)
		return false;
	a += 7;
	while (*a == ' ')
		a++;
	/* Compare in time independent of where the first difference is. */
	size_t n = strlen(a), k = strlen(h->o.api_key);
	unsigned diff = (unsigned)(n ^ k);
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)h->o.api_key[i % (k ? k : 1)];
	return diff == 0;
}

/* DNS rebinding: a web page on another site can make the browser resolve its own name to
 * 127.0.0.1 and reach a loopback server as "same origin".  A server bound to loopback only
 * answers requests addressed to a loopback name (the Host header the browser sends names
 * the attacker's domain), as Ollama does.  No Host (HTTP/1.0 tools): allowed. */
static bool host_is_loopback(const char *host)
{
	char name[256];
	size_t n;
	if (!host)
		return true;
	if (host[0] == '[') { /* [v6]:port */
		const char *end = strchr(host, ']');
		return end && (size_t)(end - host - 1) == 3 && strncmp(host + 1, "::1", 3) == 0;
	}
	n = strcspn(host, ":");
	if (n == 0 || n >= sizeof name)
		return false;
	memcpy(name, host, n);
	name[n] = '\0';
	if (strcasecmp(name, "localhost") == 0)
		return true;
	unsigned a, b, c, d;
	char tail;
	return sscanf(name, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
	       c < 256 && d < 256;
}

static enum MHD_Result preflight(struct pt_http_conn *cn)
{
	struct pt_http_resp resp = { 0 };
	const char *origin = MHD_lookup_connection_value(cn->mc, MHD_HEADER_KIND, "Origin");
	if (!origin_allowed(cn->h, origin)) {
		pt_http_resp_error(&resp, 403, NULL, NULL, NULL,
				   "origin not allowed (start the server with --cors ORIGIN)");
		return send_resp(cn, &resp);
	}
	pt_http_resp_bytes(&resp, 204, "", "", 0);
	pt_http_resp_header(&resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
	pt_http_resp_header(&resp, "Access-Control-Allow-Headers",
			    "Authorization, Content-Type, Accept");
	pt_http_resp_header(&resp, "Access-Control-Max-Age", "600");
	return send_resp(cn, &resp);
}

/* First call for a request (head complete, body not yet read): everything that can be
 * refused before reading the body is refused here. */
static enum MHD_Result first_call(struct pt_http_conn *cn, const char *url, const char *method)
{
	pt_http *h = cn->h;
	bool known = false;
	const char *lookup = strcmp(method, "HEAD") == 0 ? "GET" : method;
	if (atomic_load(&h->stop_soft)) {
		cn->answered = true;
		return send_error(cn, 503, "the server is shutting down%s", "");
	}
	if (h->loopback &&
	    !host_is_loopback(MHD_lookup_connection_value(cn->mc, MHD_HEADER_KIND, "Host"))) {
		cn->answered = true;
		return send_error(cn, 403, "Host header names no loopback address: this server is "
				  "bound to loopback and answers only requests for localhost / 127.0.0.1 / "
				  "[::1] (DNS rebinding protection)%s", "");
	}
	if (strcmp(method, "OPTIONS") == 0) {
		cn->answered = true;
		return preflight(cn);
	}
	if (strlen(url) >= sizeof cn->path) {
		cn->answered = true;
		return send_error(cn, 404, "path too long%s", "");
	}
	const struct pt_route *rt = pt_routes_find(h->routes, lookup, url, &known);
	if (!rt) {
		cn->answered = true;
		if (known) {
			struct pt_http_resp resp = { 0 };
			pt_http_resp_error(&resp, 405, NULL, NULL, NULL,
					   "method %.16s not allowed on %.200s", method, url);
			pt_http_resp_header(&resp, "Allow", "GET, POST, OPTIONS");
			return send_resp(cn, &resp);
		}
		return send_error(cn, 404, "no such endpoint: %.200s", url);
	}
	if (!rt->public_ && !key_ok(h, cn->mc)) {
		cn->answered = true;
		return send_error(cn, 401, "invalid or missing API key (send 'Authorization: "
				  "Bearer KEY')%s", "");
	}
	const char *cl = MHD_lookup_connection_value(cn->mc, MHD_HEADER_KIND, "Content-Length");
	if (cl) {
		char *end = NULL;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (errno || end == cl || n > h->o.max_body) {
			cn->answered = true;
			char lim[32];
			snprintf(lim, sizeof lim, "%zu", h->o.max_body);
			return send_error(cn, 413, "request body larger than --max-body (%s bytes)",
					  lim);
		}
	}
	return MHD_YES;
}

static bool append_body(struct pt_http_conn *cn, const char *data, size_t n)
{
	if (cn->too_big || cn->len + n > cn->h->o.max_body) {
		cn->too_big = true;
		return true; /* keep reading (and dropping) so the 413 can be sent */
	}
	if (cn->len + n + 1 > cn->cap) {
		size_t cap = cn->cap ? cn->cap : 4096;
		while (cap < cn->len + n + 1)
			cap *= 2;
		char *p = pt_realloc(cn->body, cap);
		if (!p)
			return false;
		cn->body = p;
		cn->cap = cap;
	}
	memcpy(cn->body + cn->len, data, n);
	cn->len += n;
	cn->body[cn->len] = 0;
	return true;
}

static enum MHD_Result dispatch(struct pt_http_conn *cn, const char *url, const char *method)
{
	pt_http *h = cn->h;
	if (cn->too_big) {
		char lim[32];
		snprintf(lim, sizeof lim, "%zu", h->o.max_body);
		return send_error(cn, 413, "request body larger than --max-body (%s bytes)", lim);
	}
	const char *lookup = strcmp(method, "HEAD") == 0 ? "GET" : method;
	const struct pt_route *rt = pt_routes_find(h->routes, lookup, url, NULL);
	if (!rt)
		return send_error(cn, 404, "no such endpoint: %.200s", url);
	struct pt_http_req req = { .method = method, .path = url,
				   .body = cn->body ? cn->body : "", .body_len = cn->len,
				   .conn = cn };
	struct pt_http_resp resp = { 0 };
	set_phase(h, cn->t, 1);
	atomic_fetch_add(&h->busy, 1); /* until the answer is sent in full (on_completed) */
	cn->counted = true;
	rt->fn(rt->ctx, &req, &resp);
	return send_resp(cn, &resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **req_cls)
{
	(void)version;
	pt_http *h = cls;
	struct pt_http_conn *cn = *req_cls;
	if (!cn) {
		cn = pt_calloc(1, sizeof *cn);
		if (!cn)
			return MHD_NO;
		cn->h = h;
		cn->mc = mc;
		cn->start = now_s();
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		cn->t = ci ? ci->socket_context : NULL;
		snprintf(cn->method, sizeof cn->method, "%s", method);
		snprintf(cn->path, sizeof cn->path, "%s", url);
		*req_cls = cn;
		return first_call(cn, url, method);
	}
	if (cn->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!append_body(cn, upload, *upload_size))
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	cn->answered = true;
	return dispatch(cn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)mc;
	pt_http *h = cls;
	struct pt_http_conn *cn = *req_cls;
	if (!cn)
		return;
	if (h->o.log)
		fprintf(h->o.log, "particle: %s %s -> %d (%.0f ms)%s\n", cn->method, cn->path,
			cn->status, (now_s() - cn->start) * 1e3,
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " [connection ended early]");
	set_phase(h, cn->t, 0);
	if (cn->counted)
		atomic_fetch_sub(&h->busy, 1);
	pt_free(cn->body);
	pt_free(cn);
	*req_cls = NULL;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of the URL and query arguments, except %00: a NUL would cut the path
 * short ("/v1/models%00x" must not be "/v1/models"), so it stays as the three characters. */
static size_t unescape(void *cls, struct MHD_Connection *mc, char *s)
{
	(void)cls;
	(void)mc;
	char *r = s, *w = s;
	while (*r) {
		int hi, lo;
		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 &&
		    (hi | lo) != 0) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return (size_t)(w - s);
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	(void)fmt;
	(void)ap; /* the library's own messages (bad requests, closed sockets) are noise here */
}

/* ---- start and stop --------------------------------------------------------------------- */

static enum pt_status resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
			      struct pt_error *err)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char ps[8];
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(ps, sizeof ps, "%u", port);
	int rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc != 0 || !ai)
		return pt_error_set(err, PT_E_INVALID, "cannot resolve --host '%.100s': %s", host,
				    gai_strerror(rc));
	memset(ss, 0, sizeof *ss);
	memcpy(ss, ai->ai_addr, ai->ai_addrlen < sizeof *ss ? ai->ai_addrlen : sizeof *ss);
	freeaddrinfo(ai);
	return PT_OK;
}

enum pt_status pt_http_start(const struct pt_http_opts *o, const struct pt_routes *routes,
			     pt_http **out, struct pt_error *err)
{
	*out = NULL;
	struct sockaddr_storage ss;
	enum pt_status st = resolve(o->host, o->port, &ss, err);
	if (st != PT_OK)
		return st;
	pt_http *h = pt_calloc(1, sizeof *h);
	if (!h)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for the HTTP server");
	h->o = *o;
	h->routes = routes;
	if (ss.ss_family == AF_INET)
		h->loopback = (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
	else if (ss.ss_family == AF_INET6)
		h->loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	pthread_mutex_init(&h->mu, NULL);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, o->port, NULL, NULL, on_request, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				(size_t)PT_HTTP_MAX_HEADER + 16 * 1024,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_EXTERNAL_LOGGER, log_mhd, h,
				MHD_OPTION_LISTEN_BACKLOG_SIZE, 128u,
				MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
				/* 1: HTTP/1.1 requests need Host, framing errors are refused */
				MHD_OPTION_STRICT_FOR_CLIENT, 1,
				MHD_OPTION_END);
	if (!h->d) {
		int e = errno;
		pthread_mutex_destroy(&h->mu);
		pt_free(h);
		return pt_error_sys(err, PT_E_IO, e, "cannot listen on %.100s port %u", o->host,
				    o->port);
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di ? di->port : o->port;
	if (pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0)
		h->watchdog_running = true;
	*out = h;
	return PT_OK;
}

uint16_t pt_http_port(const pt_http *h)
{
	return h->port;
}

void pt_http_counters(pt_http *h, struct pt_http_counters *out)
{
	pthread_mutex_lock(&h->mu);
	*out = h->c;
	pthread_mutex_unlock(&h->mu);
	out->busy = atomic_load(&h->busy);
}

void pt_http_stop(pt_http *h, double grace_s)
{
	if (!h)
		return;
	atomic_store(&h->stop_soft, true);
	MHD_socket ls = MHD_quiesce_daemon(h->d);
	if (ls != MHD_INVALID_SOCKET)
		close(ls);
	double t0 = now_s();
	while (atomic_load(&h->busy) > 0 && now_s() - t0 < grace_s) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	atomic_store(&h->stop_hard, true);
	if (h->watchdog_running)
		pthread_join(h->watchdog, NULL);
	MHD_stop_daemon(h->d);
	pthread_mutex_destroy(&h->mu);
	pt_free(h);
}
