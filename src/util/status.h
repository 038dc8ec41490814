/* status.h - result codes and the caller-owned error record.
 *
 * Every fallible function returns enum pt_status (PT_OK = 0, failures < 0) and takes a
 * struct pt_error * last.  The error pointer may be NULL; the first error recorded wins so
 * the innermost, most specific message survives the unwinding.
 */
#ifndef PT_STATUS_H
#define PT_STATUS_H

#include <stdarg.h>
#include <stdint.h>

#include "particle.h"

const char *pt_status_str(enum pt_status code);

/* Records the error if none is recorded yet; returns code so callers can write
 * `return pt_error_set(err, PT_E_FORMAT, "...", ...);`.  err may be NULL. */
enum pt_status pt_error_set(struct pt_error *err, enum pt_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
enum pt_status pt_error_setv(struct pt_error *err, enum pt_status code, const char *fmt,
			     va_list ap);
/* Same, also recording a byte offset and appending " at offset N" to the message. */
enum pt_status pt_error_at(struct pt_error *err, enum pt_status code, uint64_t offset,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Same, recording errno (appends ": strerror(errno)"). */
enum pt_status pt_error_sys(struct pt_error *err, enum pt_status code, int sys_errno,
			    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void pt_error_clear(struct pt_error *err);

/* The process exit code documented for a status: 0 ok, 1 runtime failure, 2 bad input or
 * usage, 130 cancelled. */
int pt_status_exit_code(enum pt_status code);

#endif
