/* particle.h - public API of libparticle.
 *
 * particle runs Mixture-of-Experts LLMs larger than RAM from GGUF files: the shared core of
 * the model stays resident (read-only mmap), routed experts stream from storage into a
 * bounded per-layer cache.  This header holds the opaque handles, option structs and result
 * types; module internals live under src/.
 *
 * Conventions: every fallible function returns enum pt_status (0 = PT_OK, failures < 0) and
 * takes a caller-owned struct pt_error * last (may be NULL; the first error recorded wins).
 */
#ifndef PARTICLE_H
#define PARTICLE_H

#include <stdint.h>

#define PT_VERSION_STRING "0.1.0-dev"

enum pt_status {
	PT_OK = 0,
	PT_E_NOMEM = -1,       /* allocation failed */
	PT_E_IO = -2,          /* read/write/open failed; sys_errno holds errno */
	PT_E_FORMAT = -3,      /* input is malformed (file, JSON, template ...) */
	PT_E_UNSUPPORTED = -4, /* well-formed but not something we implement */
	PT_E_LIMIT = -5,       /* a documented limit was exceeded */
	PT_E_INVALID = -6,     /* bad argument or usage */
	PT_E_BUSY = -7,        /* resource held by someone else (lock) */
	PT_E_CANCELLED = -8,   /* the user interrupted */
};

struct pt_error {
	enum pt_status code;
	int sys_errno;
	uint64_t offset; /* byte offset in the input the error refers to, when known */
	char msg[256];
};

#endif
