/* util.c - error printing and strict flag-value parsing shared by the subcommands. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void pt_cli_error(const char *fmt, ...)
{
	va_list ap;
	fputs("particle: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int pt_cli_fail(const struct pt_error *err)
{
	pt_cli_error("%s", err->msg[0] ? err->msg : pt_status_str(err->code));
	return pt_status_exit_code(err->code);
}

bool pt_cli_parse_u64(const char *flag, const char *text, uint64_t min, uint64_t max,
		      uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;
	if (!text || !*text || *text == '-' || *text == '+' || *text == ' ') {
		pt_cli_error("%s expects a number, got '%s'", flag, text ? text : "");
		return false;
	}
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno == ERANGE || *end != '\0') {
		pt_cli_error("%s expects a number, got '%s'", flag, text);
		return false;
	}
	if (v < min || v > max) {
		pt_cli_error("%s must be between %llu and %llu, got %llu", flag,
			     (unsigned long long)min, (unsigned long long)max, v);
		return false;
	}
	*out = v;
	return true;
}

bool pt_cli_parse_f64(const char *flag, const char *text, double min, double max,
		      double *out)
{
	char *end = NULL;
	double v;
	if (!text || !*text || *text == ' ') {
		pt_cli_error("%s expects a number, got '%s'", flag, text ? text : "");
		return false;
	}
	errno = 0;
	v = strtod(text, &end);
	if (errno == ERANGE || *end != '\0' || !isfinite(v)) {
		pt_cli_error("%s expects a number, got '%s'", flag, text);
		return false;
	}
	if (v < min || v > max) {
		pt_cli_error("%s must be between %g and %g, got %g", flag, min, max, v);
		return false;
	}
	*out = v;
	return true;
}

bool pt_cli_parse_size(const char *flag, const char *text, uint64_t *out)
{
	char *end = NULL;
	double v, mul = 1;
	if (!text || !*text || *text == '-' || *text == ' ') {
		pt_cli_error("%s expects a size such as 6G or 512M, got '%s'", flag,
			     text ? text : "");
		return false;
	}
	errno = 0;
	v = strtod(text, &end);
	if (errno == ERANGE || end == text) {
		pt_cli_error("%s expects a size such as 6G or 512M, got '%s'", flag, text);
		return false;
	}
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1024.0; end++; break;
	case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: end = NULL; break;
	}
	if (end && (*end == 'i' || *end == 'I'))
		end++;
	if (end && (*end == 'b' || *end == 'B'))
		end++;
	if (!end || *end != '\0' || !isfinite(v) || v < 0 || v * mul >= 1.8e19) {
		pt_cli_error("%s expects a size such as 6G or 512M, got '%s'", flag, text);
		return false;
	}
	*out = (uint64_t)(v * mul);
	return true;
}

int pt_cli_list_flag(const char *flag, const char *what, const char *v, const char **list,
		     size_t *n, size_t max)
{
	if (*n == max || !*v) {
		pt_cli_error("%s wants a non-empty %s, at most %zu of them", flag, what, max);
		return -1;
	}
	list[(*n)++] = v;
	return 1;
}
