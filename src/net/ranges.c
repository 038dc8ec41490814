/* ranges.c - range bookkeeping and the pull state file (format in ranges.h). */
#include "net/ranges.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

#define MAGIC "particle-pull-state 1"
#define LINE_MAX_LEN 200u

void pt_ranges_free(struct pt_ranges *s)
{
	pt_free(s->r);
	memset(s, 0, sizeof *s);
}

enum pt_status pt_ranges_add(struct pt_ranges *s, uint64_t start, uint64_t end,
			     struct pt_error *err)
{
	uint32_t i = 0, j;
	if (start >= end)
		return PT_OK;
	while (i < s->n && s->r[i].end < start) /* first range touching or after start */
		i++;
	j = i;
	while (j < s->n && s->r[j].start <= end) { /* absorb every range it touches */
		if (s->r[j].start < start)
			start = s->r[j].start;
		if (s->r[j].end > end)
			end = s->r[j].end;
		j++;
	}
	if (j == i) { /* insert at i */
		if (s->n >= PT_PULL_MAX_RANGES)
			return pt_error_set(err, PT_E_LIMIT, "too many separate byte ranges");
		if (s->n == s->cap) {
			uint32_t cap = s->cap ? s->cap * 2 : 8;
			struct pt_range *r = pt_reallocn(s->r, cap, sizeof *r);
			if (!r)
				return pt_error_set(err, PT_E_NOMEM, "out of memory (ranges)");
			s->r = r;
			s->cap = cap;
		}
		memmove(s->r + i + 1, s->r + i, (s->n - i) * sizeof *s->r);
		s->n++;
	} else if (j > i + 1) { /* ranges i..j-1 become one */
		memmove(s->r + i + 1, s->r + j, (s->n - j) * sizeof *s->r);
		s->n -= j - i - 1;
	}
	s->r[i].start = start;
	s->r[i].end = end;
	return PT_OK;
}

uint64_t pt_ranges_total(const struct pt_ranges *s)
{
	uint64_t t = 0;
	for (uint32_t i = 0; i < s->n; i++)
		t += s->r[i].end - s->r[i].start;
	return t;
}

uint64_t pt_ranges_covered_to(const struct pt_ranges *s, uint64_t from)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->r[i].start <= from && from < s->r[i].end)
			return s->r[i].end;
	return from;
}

bool pt_ranges_next_gap(const struct pt_ranges *s, uint64_t from, uint64_t limit,
			uint64_t *gap_start, uint64_t *gap_end)
{
	uint64_t at = from;
	for (uint32_t i = 0; i < s->n && at < limit; i++) {
		if (s->r[i].end <= at)
			continue;
		if (s->r[i].start > at) {
			*gap_start = at;
			*gap_end = s->r[i].start < limit ? s->r[i].start : limit;
			return true;
		}
		at = s->r[i].end;
	}
	if (at >= limit)
		return false;
	*gap_start = at;
	*gap_end = limit;
	return true;
}

/* ---- state file ---------------------------------------------------------------------- */

/* A decimal u64 without sign, leading zeros (except "0") or overflow. */
static bool parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

static bool printable_token(const char *s, size_t n)
{
	if (n == 0 || n > PT_PULL_VALIDATOR_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

static enum pt_status bad(struct pt_error *err, unsigned line, const char *what)
{
	return pt_error_set(err, PT_E_FORMAT, "pull state line %u: %s", line, what);
}

static enum pt_status parse_lines(const char *text, size_t n, struct pt_pull_state *out,
				  struct pt_error *err)
{
	size_t at = 0;
	unsigned line = 0;
	bool have_size = false, have_val = false, ended = false;
	while (at < n) {
		const char *l = text + at, *nl = memchr(l, '\n', n - at);
		size_t len;
		if (!nl)
			return bad(err, line + 1, "missing newline");
		len = (size_t)(nl - l);
		at += len + 1;
		line++;
		if (len > LINE_MAX_LEN)
			return bad(err, line, "line too long");
		if (ended)
			return bad(err, line, "text after 'end'");
		if (line == 1) {
			if (len != strlen(MAGIC) || memcmp(l, MAGIC, len) != 0)
				return bad(err, line, "not a particle pull state (version 1)");
		} else if (len > 5 && memcmp(l, "size ", 5) == 0 && !have_size) {
			if (!parse_u64(l + 5, len - 5, &out->size))
				return bad(err, line, "bad size");
			have_size = true;
		} else if (len > 10 && memcmp(l, "validator ", 10) == 0 && have_size && !have_val) {
			if (!printable_token(l + 10, len - 10))
				return bad(err, line, "bad validator");
			memcpy(out->validator, l + 10, len - 10);
			out->validator[len - 10] = '\0';
			have_val = true;
		} else if (len > 5 && memcmp(l, "done ", 5) == 0 && have_val) {
			const char *sp = memchr(l + 5, ' ', len - 5);
			uint64_t a, b;
			if (!sp || !parse_u64(l + 5, (size_t)(sp - l - 5), &a) ||
			    !parse_u64(sp + 1, (size_t)(l + len - sp - 1), &b) || a >= b ||
			    b > out->size)
				return bad(err, line, "bad range");
			enum pt_status st = pt_ranges_add(&out->done, a, b, err);
			if (st != PT_OK)
				return st;
		} else if (len == 3 && memcmp(l, "end", 3) == 0 && have_val) {
			ended = true;
		} else {
			return bad(err, line, "unexpected line");
		}
	}
	return ended ? PT_OK : bad(err, line, "missing 'end'");
}

enum pt_status pt_pull_state_parse(const char *text, size_t n, struct pt_pull_state *out,
				   struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	if (n > PT_PULL_STATE_MAX)
		return pt_error_set(err, PT_E_LIMIT, "pull state larger than %u bytes",
				    PT_PULL_STATE_MAX);
	enum pt_status st = parse_lines(text, n, out, err);
	if (st != PT_OK)
		pt_ranges_free(&out->done);
	return st;
}

enum pt_status pt_pull_state_format(const struct pt_pull_state *s, char **out,
				    struct pt_error *err)
{
	size_t cap = 128 + PT_PULL_VALIDATOR_MAX + (size_t)s->done.n * 48, len;
	char *buf = pt_malloc(cap);
	*out = NULL;
	if (!buf)
		return pt_error_set(err, PT_E_NOMEM, "out of memory (pull state)");
	len = (size_t)snprintf(buf, cap, MAGIC "\nsize %" PRIu64 "\nvalidator %s\n", s->size,
			       s->validator[0] ? s->validator : "-");
	for (uint32_t i = 0; i < s->done.n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "done %" PRIu64 " %" PRIu64 "\n",
					s->done.r[i].start, s->done.r[i].end);
	snprintf(buf + len, cap - len, "end\n");
	*out = buf;
	return PT_OK;
}
