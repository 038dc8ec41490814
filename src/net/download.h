/* download.h - one remote file into a local `.partial` file: the header first, then the
 * rest in ranges with several in flight, a sidecar state file recording the ranges on disk
 * (fdatasync'd before they are recorded), SHA-256 computed in file order as the contiguous
 * prefix grows.
 *
 * Order of work:
 *   1. the first `head_bytes` alone (one request, doubled while `check_head` asks for
 *      more), so a wrong file is refused after a few hundred KiB;
 *   2. the rest in `chunk` pieces by `jobs` threads, each with its own connection; a
 *      server that ignores Range gets one sequential stream instead;
 *   3. the SHA-256 of the whole file.
 * Hashing: the main thread reads back (pread, from the page cache in practice) the bytes
 * of the contiguous prefix as it grows and feeds them to one EVP context, so with parallel
 * ranges nothing is hashed twice and nothing waits for the end except the last ranges.  On
 * resume the prefix already on disk is hashed once from disk before new bytes arrive.
 * Cancellation (opts.cancel) records every byte already written and returns
 * PT_E_CANCELLED. */
#ifndef PT_NET_DOWNLOAD_H
#define PT_NET_DOWNLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "net/http.h"
#include "util/status.h"

/* What the caller gets told while bytes arrive (called from the main thread). */
struct pt_dl_progress {
	uint64_t size;       /* the file */
	uint64_t have;       /* bytes on disk */
	uint64_t net;        /* bytes received over the network in this run */
	uint64_t resumed;    /* bytes already on disk when this run started */
	double seconds;      /* since this run started */
	bool done;
};

struct pt_dl_hooks {
	void *ctx;
	/* The first avail bytes (contiguous, on disk in fd) are there; return PT_OK when the
	 * header is fine, set *more to get a longer prefix, or fail to refuse the file. */
	enum pt_status (*check_head)(void *ctx, int fd, uint64_t avail, uint64_t size,
				     bool *more, struct pt_error *err);
	/* Every byte of the file exactly once, from any thread, in any order (may be NULL):
	 * once check_head accepts the header, the bytes already on disk are replayed from
	 * disk, then new bytes are passed as they are written. */
	enum pt_status (*on_bytes)(void *ctx, uint64_t off, const void *buf, size_t n,
				   struct pt_error *err);
	/* Called every ~200 ms and once at the end (may be NULL). */
	void (*progress)(void *ctx, const struct pt_dl_progress *p);
};

struct pt_dl_opts {
	const char *url;
	const char *partial_path;   /* NAME.partial */
	const char *state_path;     /* NAME.partial.state */
	uint64_t size;              /* from HEAD */
	const char *validator;      /* ETag/SHA-256 tying the state file to this remote */
	uint32_t jobs;              /* ranges in flight (1..64) */
	uint64_t chunk;             /* range size */
	uint64_t head_bytes;        /* first request's size */
	uint64_t head_max;          /* check_head may ask for at most this many */
	uint64_t extra_space;       /* more bytes needed beside the file (an expert pack) */
	struct pt_http_opts http;
};

struct pt_dl_result {
	unsigned char sha256[32];
	uint64_t net;               /* bytes received over the network */
	uint64_t resumed;           /* bytes that were already on disk */
	bool ranged;                /* the server honoured Range */
	double seconds;
};

/* Checks free space first (statvfs: the missing bytes plus extra_space; the error says how
 * much is needed and where), reserves the file's blocks (fallocate where supported).
 * Downloads into opts->partial_path (created 0644 or resumed per the state file), fsyncs
 * it.  On success the file is complete and res holds its SHA-256; the state file is
 * removed.  On failure both stay for a later resume. */
enum pt_status pt_download(const struct pt_dl_opts *o, const struct pt_dl_hooks *h,
			   struct pt_dl_result *res, struct pt_error *err);

#endif
