/* http.h - HTTP(S) transfers through libcurl: HEAD for a file's size and validators, and
 * ranged GETs that resume after transient failures.  One client = one connection reused
 * across requests; use one client per thread.
 *
 * Retry policy: connection failures, resets, short bodies, stalls (no byte for stall_s),
 * HTTP 5xx and 429 are transient: the request is repeated after backoff_ms, doubling up to
 * 30 s, from the first byte not yet delivered, at most `retries` times in a row (a request
 * that delivered bytes resets the count).  Other HTTP errors are permanent: 404 and 410
 * (PT_E_INVALID, "not found"), 401/403 (PT_E_INVALID with a hint about HF_TOKEN), 416
 * (PT_E_FORMAT: the remote file is not what was expected). */
#ifndef PT_NET_HTTP_H
#define PT_NET_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

struct pt_http_opts {
	const char *bearer;         /* Authorization: Bearer token, or NULL */
	uint64_t max_recv_bps;      /* per client; 0 = unlimited */
	uint32_t stall_s;           /* abort a transfer that received nothing this long */
	uint32_t retries;           /* consecutive transient failures tolerated */
	uint32_t backoff_ms;        /* first retry delay */
	volatile sig_atomic_t *cancel; /* when it becomes non-zero: PT_E_CANCELLED */
};

/* Defaults: no token, unlimited, stall 30 s, 8 retries, 500 ms. */
struct pt_http_opts pt_http_default_opts(void);

struct pt_http_info {
	long code;             /* final HTTP status */
	bool size_known;
	uint64_t size;         /* Content-Length of the final response */
	bool ranges;           /* Accept-Ranges: bytes was announced */
	char etag[96];         /* final response's ETag, quotes and W/ removed ("" if none) */
	char linked_etag[96];  /* X-Linked-Etag of any hop (Hugging Face: LFS SHA-256) */
	uint64_t linked_size;  /* X-Linked-Size, 0 if none */
};

typedef struct pt_http_client pt_http_client;

/* Once per process, before any thread uses a client. */
enum pt_status pt_http_global_init(struct pt_error *err);

enum pt_status pt_http_client_new(const struct pt_http_opts *o, pt_http_client **out,
				  struct pt_error *err);
void pt_http_client_free(pt_http_client *c); /* NULL-safe */

/* HEAD url following redirects (with retries).  HTTP errors as described above. */
enum pt_status pt_http_head(pt_http_client *c, const char *url, struct pt_http_info *out,
			    struct pt_error *err);

/* Receives bytes at absolute file offsets, in increasing order without gaps. */
typedef enum pt_status (*pt_http_sink)(void *ctx, uint64_t off, const void *buf, size_t n,
				       struct pt_error *err);

/* Fetches bytes [start, end) of url into sink.  A server that ignores Range and answers
 * 200 is read from the start of its body, the bytes before start skipped; *ranged (may be
 * NULL) tells which happened.  *net (may be NULL) accumulates bytes received over the
 * network, skipped ones included. */
enum pt_status pt_http_get(pt_http_client *c, const char *url, uint64_t start, uint64_t end,
			   pt_http_sink sink, void *ctx, bool *ranged, uint64_t *net,
			   struct pt_error *err);

#endif
