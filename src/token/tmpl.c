/* tmpl.c - pt_tmpl_parse / pt_tmpl_destroy and the BOS/EOS helper (see tmpl.h). */
#include "token/tmpl_int.h"

#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

/* jinja2 before lexing: CRLF and CR become LF; one trailing newline is dropped. */
static size_t normalize(const char *src, size_t len, char *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			out[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			out[n++] = src[i];
		}
	}
	if (n > 0 && out[n - 1] == '\n')
		n--;
	out[n] = 0;
	return n;
}

enum pt_status pt_tmpl_parse(const char *src, size_t len, pt_tmpl **out, struct pt_error *err)
{
	*out = NULL;
	if (len > PT_TMPL_MAX_SOURCE)
		return pt_error_set(err, PT_E_LIMIT, "template: %zu bytes exceeds the limit of %u",
				    len, PT_TMPL_MAX_SOURCE);
	if (memchr(src, 0, len))
		return pt_error_at(err, PT_E_FORMAT, (uint64_t)((const char *)memchr(src, 0, len) - src),
				   "template: NUL byte in template");
	pt_tmpl *t = pt_calloc(1, sizeof *t);
	if (!t)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	t->src = pt_malloc(len + 1);
	if (!t->src) {
		pt_free(t);
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	}
	t->len = normalize(src, len, t->src);
	enum pt_status st = tm_parse(t, err);
	if (st != PT_OK) {
		pt_tmpl_destroy(t);
		return st;
	}
	*out = t;
	return PT_OK;
}

void pt_tmpl_destroy(pt_tmpl *t)
{
	if (!t)
		return;
	tm_arena_free(&t->arena);
	pt_free(t->src);
	pt_free(t);
}

void pt_tmpl_strip_special(const char *text, size_t len, const char *bos, int add_bos,
			   const char *eos, int add_eos, size_t *start, size_t *out_len)
{
	size_t s = 0, n = len;
	size_t bl = bos ? strlen(bos) : 0, el = eos ? strlen(eos) : 0;
	if (add_bos && bl && n >= bl && memcmp(text, bos, bl) == 0) {
		s = bl;
		n -= bl;
	}
	if (add_eos && el && n >= el && memcmp(text + s + n - el, eos, el) == 0)
		n -= el;
	*start = s;
	*out_len = n;
}
