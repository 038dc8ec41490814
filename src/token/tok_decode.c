/* tok_decode.c - ids -> text as llama.cpp's token_to_piece and detokenize do: GPT-2 byte
 * decoding or U+2581 -> space, <0xXX> byte tokens, CONTROL/UNKNOWN suppressed unless asked
 * for, the SPM leading-space strip and the clean_spaces passes (TOKENIZERS.md 1.6). */
#include "token/tok_internal.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "token/tok_unicode.h"
#include "util/alloc.h"

struct out {
	char *v;
	size_t n, cap;
};

static enum pt_status out_put(struct out *o, const void *p, size_t n, struct pt_error *err)
{
	if (o->n + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 64;
		while (cap < o->n + n + 1)
			cap *= 2;
		char *v = pt_realloc(o->v, cap);
		if (!v)
			return pt_error_set(err, PT_E_NOMEM, "out of memory detokenizing");
		o->v = v;
		o->cap = cap;
	}
	memcpy(o->v + o->n, p, n);
	o->n += n;
	o->v[o->n] = 0;
	return PT_OK;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Appends s with every U+2581 replaced by a space. */
static enum pt_status unescape(struct out *o, const char *s, size_t n, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	size_t run = 0;
	for (size_t i = 0; i < n && !st;) {
		if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
			st = out_put(o, s + run, i - run, err);
			if (!st)
				st = out_put(o, " ", 1, err);
			i += 3;
			run = i;
		} else {
			i++;
		}
	}
	if (!st)
		st = out_put(o, s + run, n - run, err);
	return st;
}

/* GPT-2 byte-level decode; a code point outside the map is written as [UNK_BYTE_0x..]. */
static enum pt_status byte_decode(const struct pt_tok *t, struct out *o, const char *s,
				  size_t n, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	for (size_t off = 0; off < n && !st;) {
		size_t at = off;
		uint32_t cp = pt_tok_utf8_next((const uint8_t *)s, n, &off);
		int b = cp < 324 ? t->u2b[cp] : -1;
		if (b >= 0) {
			uint8_t c = (uint8_t)b;
			st = out_put(o, &c, 1, err);
			continue;
		}
		char hex[8];
		st = out_put(o, "[UNK_BYTE_0x", 12, err);
		for (size_t i = at; i < off && !st; i++) {
			snprintf(hex, sizeof hex, "%02x", (uint8_t)s[i]);
			st = out_put(o, hex, 2, err);
		}
		if (!st)
			st = out_put(o, s + at, off - at, err);
		if (!st)
			st = out_put(o, "]", 1, err);
	}
	return st;
}

/* token_to_piece(id, lstrip = 0, special). */
static enum pt_status piece(const struct pt_tok *t, int32_t id, bool special, struct out *o,
			    struct pt_error *err)
{
	uint32_t a = t->attr[id];
	const char *s = tok_str(t, (uint32_t)id);
	size_t n = t->tok_len[id];
	if (!special && (a & (PT_TOKATTR_CONTROL | PT_TOKATTR_UNKNOWN)))
		return PT_OK;
	if (a & (PT_TOKATTR_CONTROL | PT_TOKATTR_UNKNOWN | PT_TOKATTR_USER_DEFINED))
		return out_put(o, s, n, err);
	if (a & PT_TOKATTR_NORMAL) {
		if (t->kind == TOK_SPM || t->escape_ws)
			return unescape(o, s, n, err);
		return byte_decode(t, o, s, n, err);
	}
	if (a & PT_TOKATTR_BYTE) {
		/* strtol(text + 3, 16) of "<0xXX>" */
		int hi = n > 3 ? hexval(s[3]) : -1, lo = n > 4 ? hexval(s[4]) : -1;
		uint8_t b = (uint8_t)(hi < 0 ? 0 : lo < 0 ? hi : hi * 16 + lo);
		return out_put(o, &b, 1, err);
	}
	return PT_OK; /* UNDEFINED / UNUSED render as nothing */
}

enum pt_status pt_tok_piece(const pt_tok *t, int32_t id, bool special, char *buf, size_t cap,
			    size_t *n, struct pt_error *err)
{
	*n = 0;
	if (id < 0 || (uint32_t)id >= t->n_vocab)
		return pt_error_set(err, PT_E_INVALID, "token id %d out of range (vocab %u)", id,
				    t->n_vocab);
	struct out o = { 0 };
	enum pt_status st = piece(t, id, special, &o, err);
	if (st) {
		pt_free(o.v);
		return st;
	}
	*n = o.n;
	if (o.n && buf && cap)
		memcpy(buf, o.v, o.n < cap ? o.n : cap);
	pt_free(o.v);
	if (*n > cap)
		return pt_error_set(err, PT_E_LIMIT, "piece of %zu bytes does not fit in %zu", *n,
				    cap);
	return PT_OK;
}

/* The three clean_spaces passes of llama.cpp's detokenize, in place. */
static size_t clean_spaces(char *x, size_t total)
{
	size_t w = total ? 1 : 0;
	for (size_t i = 1; i < total; i++) { /* " ?", " !", " .", " ," */
		char c = x[i];
		if (x[i - 1] == ' ' && (c == '?' || c == '!' || c == '.' || c == ','))
			w--;
		x[w++] = c;
	}
	total = w;
	w = total ? 1 : 0;
	for (size_t i = 1; i < total; i++) { /* " ' " */
		char c = x[i];
		if (c == '\'' && i + 1 < total && x[i - 1] == ' ' && x[i + 1] == ' ') {
			w--;
			x[++i] = 0;
		}
		x[w++] = c;
	}
	total = w;
	w = total ? 1 : 0;
	for (size_t i = 1; i < total; i++) { /* " 's", " 'm", " 're", " 've" */
		char c = x[i];
		if (x[i - 1] == ' ' && c == '\'' && i + 1 < total) {
			char c1 = x[i + 1], c2 = i + 2 < total ? x[i + 2] : 0;
			if (c1 == 's' || c1 == 'm')
				w--;
			else if (c1 != 't' && c1 != 'd' && i + 2 < total &&
				 ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e')))
				w--;
		}
		x[w++] = c;
	}
	return w;
}

enum pt_status pt_tok_decode(const pt_tok *t, const int32_t *ids, size_t n_ids,
			     bool remove_special, bool unparse_special, char **out, size_t *len,
			     struct pt_error *err)
{
	struct out o = { 0 };
	enum pt_status st = out_put(&o, "", 0, err);
	bool remove_space = t->add_space_prefix;
	*out = NULL;
	*len = 0;
	for (size_t i = 0; i < n_ids && !st; i++)
		if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab)
			st = pt_error_set(err, PT_E_INVALID, "token id %d out of range (vocab %u)",
					  ids[i], t->n_vocab);
	if (!st && remove_special && t->add_bos && n_ids && ids[0] == t->bos) {
		remove_space = false;
		ids++;
		n_ids--;
	}
	if (!st && remove_special && t->add_eos && n_ids && ids[n_ids - 1] == t->eos)
		n_ids--;
	for (size_t i = 0; i < n_ids && !st; i++) {
		size_t before = o.n;
		st = piece(t, ids[i], unparse_special, &o, err);
		if (!st && remove_space && o.n > before && o.v[before] == ' ') {
			memmove(o.v + before, o.v + before + 1, o.n - before - 1);
			o.v[--o.n] = 0;
		}
		remove_space = false;
	}
	if (st) {
		pt_free(o.v);
		return st;
	}
	if (t->clean_spaces) {
		o.n = clean_spaces(o.v, o.n);
		o.v[o.n] = 0;
	}
	*out = o.v;
	*len = o.n;
	return PT_OK;
}
