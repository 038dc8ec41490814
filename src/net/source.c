/* source.c - pull sources: URLs, hf: names, split part names (see source.h). */
#include "net/source.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

void pt_source_free(struct pt_source *s)
{
	pt_free(s->prefix);
	pt_free(s->name);
	pt_free(s->suffix);
	pt_free(s->stem);
	memset(s, 0, sizeof *s);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || c == '+';
}

/* A path segment that is safe as a local file name: not empty, ".", "..", or hidden. */
static bool plain_segment(const char *s, size_t n)
{
	if (n == 0 || n > 255 || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]))
			return false;
	return true;
}

static bool digits5(const char *s, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 5; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		*v = *v * 10 + (uint32_t)(s[i] - '0');
	}
	return true;
}

bool pt_source_split_name(const char *name, size_t *stem_len, uint32_t *no, uint32_t *count)
{
	/* "-00001-of-00003.gguf" is 20 characters */
	size_t n = strlen(name);
	if (n <= 20)
		return false;
	const char *t = name + n - 20;
	if (t[0] != '-' || memcmp(t + 6, "-of-", 4) != 0 || memcmp(t + 15, ".gguf", 5) != 0 ||
	    !digits5(t + 1, no) || !digits5(t + 10, count) || *count == 0 || *no == 0 ||
	    *no > *count || *count > PT_SPLIT_MAX_PARTS)
		return false;
	*stem_len = n - 20;
	return true;
}

static enum pt_status bad(struct pt_error *err, const char *why, const char *src)
{
	return pt_error_set(err, PT_E_INVALID, "bad source '%.200s': %s", src, why);
}

/* hf:OWNER/REPO/PATH[@REV] -> prefix ".../resolve/REV/DIRS/" and name. */
static enum pt_status parse_hf(const char *src, const char *endpoint, struct pt_source *out,
			       char *name, struct pt_error *err)
{
	const char *p = src + 3, *at = strrchr(p, '@'), *end = at ? at : p + strlen(p);
	const char *seg[64];
	size_t len[64], nseg = 0;
	char rev[256] = "main", path[PT_SOURCE_MAX] = "";
	size_t ep = strlen(endpoint), pl = 0;
	if (at) {
		size_t rl = strlen(at + 1), w = 0;
		if (rl == 0 || rl > 100)
			return bad(err, "empty or overlong revision after '@'", src);
		for (size_t i = 0; i < rl; i++) {
			char c = at[1 + i];
			if (c == '/') {
				memcpy(rev + w, "%2F", 3);
				w += 3;
			} else if (name_char(c)) {
				rev[w++] = c;
			} else {
				return bad(err, "revision has characters other than letters, digits, "
					   "'.', '_', '-', '/'", src);
			}
		}
		rev[w] = '\0';
	}
	for (const char *s = p; s < end && nseg < 64;) {
		const char *sl = memchr(s, '/', (size_t)(end - s));
		size_t n = sl ? (size_t)(sl - s) : (size_t)(end - s);
		if (!plain_segment(s, n))
			return bad(err, "expected hf:OWNER/REPO/PATH.gguf[@REVISION] with plain "
				   "names (letters, digits, '.', '_', '-', '+')", src);
		seg[nseg] = s;
		len[nseg++] = n;
		s += n + (sl ? 1 : 0);
		if (sl && s == end)
			return bad(err, "path ends with '/'", src);
	}
	if (nseg < 3)
		return bad(err, "expected hf:OWNER/REPO/PATH.gguf[@REVISION]", src);
	while (ep && endpoint[ep - 1] == '/')
		ep--;
	for (size_t i = 2; i + 1 < nseg; i++) {
		pl += (size_t)snprintf(path + pl, sizeof path - pl, "%.*s/", (int)len[i], seg[i]);
		if (pl >= sizeof path)
			return bad(err, "path too long", src);
	}
	size_t cap = ep + len[0] + len[1] + strlen(rev) + pl + 32;
	out->prefix = pt_malloc(cap);
	if (!out->prefix)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	snprintf(out->prefix, cap, "%.*s/%.*s/%.*s/resolve/%s/%s", (int)ep, endpoint,
		 (int)len[0], seg[0], (int)len[1], seg[1], rev, path);
	snprintf(name, 256, "%.*s", (int)len[nseg - 1], seg[nseg - 1]);
	return PT_OK;
}

static enum pt_status parse_url(const char *src, struct pt_source *out, char *name,
				const char **suffix, struct pt_error *err)
{
	const char *q = strpbrk(src, "?#"), *end = q ? q : src + strlen(src), *sl = end;
	const char *host = strstr(src, "://") + 3;
	while (sl > host && sl[-1] != '/')
		sl--;
	if (sl == host)
		return bad(err, "the URL has no file name", src);
	for (const char *c = src; *c; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 127)
			return bad(err, "the URL has spaces or control characters", src);
	if (!plain_segment(sl, (size_t)(end - sl)))
		return bad(err, "the file name must be plain (letters, digits, '.', '_', '-', '+')",
			   src);
	out->prefix = pt_strndup(src, (size_t)(sl - src));
	snprintf(name, 256, "%.*s", (int)(end - sl), sl);
	*suffix = q && *q == '?' ? q : "";
	if (q && *q == '#')
		*suffix = "";
	return out->prefix ? PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
}

enum pt_status pt_source_parse(const char *src, const char *hf_endpoint, struct pt_source *out,
			       struct pt_error *err)
{
	char name[256];
	const char *suffix = "";
	enum pt_status st;
	size_t stem;
	memset(out, 0, sizeof *out);
	if (strlen(src) > PT_SOURCE_MAX)
		return bad(err, "too long", src);
	if (strncmp(src, "hf:", 3) == 0)
		st = parse_hf(src, hf_endpoint, out, name, err);
	else if (strncmp(src, "http://", 7) == 0 || strncmp(src, "https://", 8) == 0)
		st = parse_url(src, out, name, &suffix, err);
	else
		st = bad(err, "expected an http:// or https:// URL or hf:OWNER/REPO/PATH.gguf"
			 "[@REVISION]", src);
	if (st == PT_OK && (strlen(name) < 6 || strcmp(name + strlen(name) - 5, ".gguf") != 0))
		st = bad(err, "the file name must end in .gguf", src);
	if (st == PT_OK) {
		out->name = pt_strdup(name);
		out->suffix = pt_strdup(suffix);
		if (!out->name || !out->suffix)
			st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	}
	if (st == PT_OK && pt_source_split_name(name, &stem, &out->split_no, &out->split_count) &&
	    !(out->stem = pt_strndup(name, stem)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st != PT_OK)
		pt_source_free(out);
	return st;
}

uint32_t pt_source_files(const struct pt_source *s)
{
	return s->split_count ? s->split_count : 1;
}

enum pt_status pt_source_file(const struct pt_source *s, uint32_t k, char *url, char *name,
			      size_t cap, struct pt_error *err)
{
	int n;
	if (s->split_count)
		n = snprintf(name, cap, "%s-%05u-of-%05u.gguf", s->stem, k + 1, s->split_count);
	else
		n = snprintf(name, cap, "%s", s->name);
	if (n < 0 || (size_t)n >= cap)
		return pt_error_set(err, PT_E_LIMIT, "file name too long");
	n = snprintf(url, cap, "%s%s%s", s->prefix, name, s->suffix);
	if (n < 0 || (size_t)n >= cap)
		return pt_error_set(err, PT_E_LIMIT, "URL too long");
	return PT_OK;
}
