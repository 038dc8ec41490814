/* status.c - result codes and error records (see status.h). */
#include "util/status.h"

#include <stdio.h>
#include <string.h>

const char *pt_status_str(enum pt_status code)
{
	switch (code) {
	case PT_OK: return "ok";
	case PT_E_NOMEM: return "out of memory";
	case PT_E_IO: return "I/O error";
	case PT_E_FORMAT: return "malformed input";
	case PT_E_UNSUPPORTED: return "unsupported";
	case PT_E_LIMIT: return "limit exceeded";
	case PT_E_INVALID: return "invalid argument";
	case PT_E_BUSY: return "busy";
	case PT_E_CANCELLED: return "cancelled";
	}
	return "unknown status";
}

enum pt_status pt_error_setv(struct pt_error *err, enum pt_status code, const char *fmt,
			     va_list ap)
{
	if (!err || err->code != PT_OK)
		return code;
	err->code = code;
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	return code;
}

enum pt_status pt_error_set(struct pt_error *err, enum pt_status code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pt_error_setv(err, code, fmt, ap);
	va_end(ap);
	return code;
}

static void append(struct pt_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void append(struct pt_error *err, const char *fmt, ...)
{
	size_t used = strlen(err->msg);
	va_list ap;
	if (used + 1 >= sizeof err->msg)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
	va_end(ap);
}

enum pt_status pt_error_at(struct pt_error *err, enum pt_status code, uint64_t offset,
			   const char *fmt, ...)
{
	va_list ap;
	if (!err || err->code != PT_OK)
		return code;
	va_start(ap, fmt);
	pt_error_setv(err, code, fmt, ap);
	va_end(ap);
	err->offset = offset;
	append(err, " at offset %llu", (unsigned long long)offset);
	return code;
}

enum pt_status pt_error_sys(struct pt_error *err, enum pt_status code, int sys_errno,
			    const char *fmt, ...)
{
	va_list ap;
	if (!err || err->code != PT_OK)
		return code;
	va_start(ap, fmt);
	pt_error_setv(err, code, fmt, ap);
	va_end(ap);
	err->sys_errno = sys_errno;
	append(err, ": %s", strerror(sys_errno));
	return code;
}

void pt_error_clear(struct pt_error *err)
{
	if (err)
		memset(err, 0, sizeof *err);
}

int pt_status_exit_code(enum pt_status code)
{
	switch (code) {
	case PT_OK: return 0;
	case PT_E_FORMAT:
	case PT_E_UNSUPPORTED:
	case PT_E_LIMIT:
	case PT_E_INVALID: return 2;
	case PT_E_CANCELLED: return 130;
	default: return 1;
	}
}
