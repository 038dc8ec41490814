/* textout.c - stop-string matching and UTF-8-safe streaming (see textout.h). */
#include "gen/textout.h"

#include <string.h>

#include "util/alloc.h"

struct pt_textout {
	char **stops;
	size_t *stop_len;
	size_t n_stops;
	size_t max_stop;
	char *held;        /* bytes fed but not yet emitted */
	size_t held_len;
	size_t held_cap;
	bool stopped;
	pt_textout_emit emit;
	void *ctx;
};

enum pt_status pt_textout_create(const char *const *stops, size_t n_stops, pt_textout_emit emit,
				 void *ctx, pt_textout **out, struct pt_error *err)
{
	pt_textout *t = pt_calloc(1, sizeof *t);
	*out = NULL;
	if (!t)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	t->emit = emit;
	t->ctx = ctx;
	if (n_stops) {
		t->stops = pt_calloc(n_stops, sizeof *t->stops);
		t->stop_len = pt_calloc(n_stops, sizeof *t->stop_len);
		if (!t->stops || !t->stop_len)
			goto nomem;
	}
	for (size_t i = 0; i < n_stops; i++) {
		size_t n = strlen(stops[i]);
		if (n == 0) {
			pt_textout_destroy(t);
			return pt_error_set(err, PT_E_INVALID, "stop string %zu is empty", i + 1);
		}
		t->stops[i] = pt_strndup(stops[i], n);
		if (!t->stops[i])
			goto nomem;
		t->n_stops = i + 1;
		t->stop_len[i] = n;
		if (n > t->max_stop)
			t->max_stop = n;
	}
	*out = t;
	return PT_OK;
nomem:
	pt_textout_destroy(t);
	return pt_error_set(err, PT_E_NOMEM, "out of memory");
}

void pt_textout_destroy(pt_textout *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_stops; i++)
		pt_free(t->stops[i]);
	pt_free(t->stops);
	pt_free(t->stop_len);
	pt_free(t->held);
	pt_free(t);
}

/* Expected length of a UTF-8 sequence from its lead byte; 0 = not a lead byte. */
static size_t seq_len(unsigned char c)
{
	if (c < 0x80) return 1;
	if (c >= 0xc2 && c <= 0xdf) return 2;
	if (c >= 0xe0 && c <= 0xef) return 3;
	if (c >= 0xf0 && c <= 0xf4) return 4;
	return 0;
}

/* Valid second-byte range per lead byte (excludes overlongs and surrogates). */
static int second_ok(unsigned char lead, unsigned char c)
{
	unsigned char lo = 0x80, hi = 0xbf;
	if (lead == 0xe0) lo = 0xa0;
	else if (lead == 0xed) hi = 0x9f;
	else if (lead == 0xf0) lo = 0x90;
	else if (lead == 0xf4) hi = 0x8f;
	return c >= lo && c <= hi;
}

/* Bytes of a valid sequence at s (<= avail), 0 if invalid, or (size_t)-1 if the available
 * bytes are a valid but incomplete prefix. */
static size_t valid_seq(const unsigned char *s, size_t avail)
{
	size_t need = seq_len(s[0]);
	if (need == 0)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if (i >= avail)
			return (size_t)-1;
		if (i == 1 ? !second_ok(s[0], s[1]) : (s[i] & 0xc0) != 0x80)
			return 0;
	}
	return need;
}

size_t pt_utf8_complete_prefix(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		size_t n = valid_seq(s + i, len - i);
		if (n == (size_t)-1)
			return i;
		i += n ? n : 1; /* an invalid byte is complete: it will print as U+FFFD */
	}
	return len;
}

/* Emits s[0..len) with invalid bytes replaced; len must end on a boundary. */
static bool emit_clean(pt_textout *t, const char *s, size_t len)
{
	static const char repl[] = "\xef\xbf\xbd";
	const unsigned char *u = (const unsigned char *)s;
	size_t start = 0, i = 0;
	bool go = true;
	while (i < len && go) {
		size_t n = valid_seq(u + i, len - i);
		if (n != 0 && n != (size_t)-1) {
			i += n;
			continue;
		}
		if (i > start)
			go = t->emit(t->ctx, s + start, i - start);
		if (go)
			go = t->emit(t->ctx, repl, 3);
		/* skip the maximal invalid subpart: lead plus valid continuation prefix */
		size_t skip = 1;
		if (seq_len(u[i]) > 1 && i + 1 < len && second_ok(u[i], u[i + 1])) {
			skip = 2;
			while (skip < seq_len(u[i]) && i + skip < len && (u[i + skip] & 0xc0) == 0x80)
				skip++;
		}
		i += skip;
		start = i;
	}
	if (go && len > start)
		go = t->emit(t->ctx, s + start, len - start);
	return go;
}

/* Longest suffix of held that is a proper prefix of some stop string. */
static size_t partial_stop_suffix(const pt_textout *t)
{
	size_t best = 0;
	for (size_t k = 0; k < t->n_stops; k++) {
		size_t max = t->stop_len[k] - 1;
		if (max > t->held_len)
			max = t->held_len;
		for (size_t n = max; n > best; n--) {
			if (memcmp(t->held + t->held_len - n, t->stops[k], n) == 0) {
				best = n;
				break;
			}
		}
	}
	return best;
}

static void drop_front(pt_textout *t, size_t n)
{
	memmove(t->held, t->held + n, t->held_len - n);
	t->held_len -= n;
}

bool pt_textout_feed(pt_textout *t, const char *bytes, size_t len, size_t *stop_index)
{
	if (t->stopped)
		return true;
	if (len > t->held_cap - t->held_len) {
		size_t cap = t->held_cap ? t->held_cap : 64;
		while (cap - t->held_len < len)
			cap *= 2;
		char *p = pt_realloc(t->held, cap);
		if (!p) { /* cannot hold: emit what we have rather than lose text */
			emit_clean(t, t->held, t->held_len);
			t->held_len = 0;
			emit_clean(t, bytes, pt_utf8_complete_prefix((const unsigned char *)bytes, len));
			return false;
		}
		t->held = p;
		t->held_cap = cap;
	}
	memcpy(t->held + t->held_len, bytes, len);
	t->held_len += len;

	/* earliest match over all stop strings */
	size_t best_pos = (size_t)-1, best_k = 0;
	for (size_t k = 0; k < t->n_stops; k++) {
		char *p = memmem(t->held, t->held_len, t->stops[k], t->stop_len[k]);
		if (p && (size_t)(p - t->held) < best_pos) {
			best_pos = (size_t)(p - t->held);
			best_k = k;
		}
	}
	if (best_pos != (size_t)-1) {
		emit_clean(t, t->held, best_pos);
		t->held_len = 0;
		t->stopped = true;
		if (stop_index)
			*stop_index = best_k;
		return true;
	}
	size_t safe = t->held_len - partial_stop_suffix(t);
	safe = pt_utf8_complete_prefix((const unsigned char *)t->held, safe);
	if (safe) {
		emit_clean(t, t->held, safe);
		drop_front(t, safe);
	}
	return false;
}

void pt_textout_finish(pt_textout *t)
{
	if (!t->stopped && t->held_len)
		emit_clean(t, t->held, t->held_len);
	t->held_len = 0;
}

void pt_textout_reset(pt_textout *t)
{
	t->held_len = 0;
	t->stopped = false;
}

bool pt_textout_stopped(const pt_textout *t)
{
	return t->stopped;
}
