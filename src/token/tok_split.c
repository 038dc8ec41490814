/* tok_split.c - pre-tokenization: cuts a fragment's code points into words the way
 * llama.cpp's unicode_regex_split does for each pre type.  The GPT-2, Llama-3, Qwen2 and
 * Kimi-K2 regexes are llama.cpp hand-written scanners, reproduced here step by step (not a
 * regex engine: they differ from PCRE on control characters and past-the-end lookahead).
 * The regex lists (tok_split_rx.c) run through PCRE2 on what llama.cpp's std::regex
 * fallback matches against: its "collapsed" text (every non-ASCII code point replaced by
 * one class byte) or, for a pattern without a \p{..} class, the code points themselves. */
#include "token/tok_internal.h"

#include <string.h>

#include "token/tok_unicode.h"
#include "util/alloc.h"

#define OOR 0xFFFFFFFFu

struct seg {
	const uint32_t *cps;
	const uint16_t *fl;
	size_t ini, end, prev;
	uint32_t **out;
	size_t *n_out, *cap;
	struct pt_error *err;
	enum pt_status st;
};

static uint32_t cpt_at(const struct seg *s, size_t p)
{
	return p >= s->ini && p < s->end ? s->cps[p] : OOR;
}

static uint16_t fl_at(const struct seg *s, size_t p)
{
	return p >= s->ini && p < s->end ? s->fl[p] : 0;
}

#define IS_L(f) ((f) & PT_UF_LETTER)
#define IS_N(f) ((f) & PT_UF_NUMBER)
#define IS_WS(f) ((f) & PT_UF_WHITESPACE)

static void emit_len(struct seg *s, size_t len)
{
	if (!len || s->st)
		return;
	if (*s->n_out == *s->cap) {
		size_t cap = *s->cap ? *s->cap * 2 : 64;
		uint32_t *v = pt_reallocn(*s->out, cap, sizeof *v);
		if (!v) {
			s->st = pt_error_set(s->err, PT_E_NOMEM, "out of memory splitting text");
			return;
		}
		*s->out = v;
		*s->cap = cap;
	}
	(*s->out)[(*s->n_out)++] = (uint32_t)len;
}

/* Emits [prev, end) as a word; returns its length. */
static size_t add(struct seg *s, size_t end)
{
	size_t len = end - s->prev;
	emit_len(s, len);
	s->prev = end;
	return len;
}

static uint32_t lower_ascii(uint32_t c)
{
	/* unicode_tolower: no non-ASCII code point lowercases to s/t/m/d/r/e/v/l. */
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's|'t|'re|'ve|'m|'ll|'d (case-folded when fold); returns the match length or 0. */
static size_t contraction(const struct seg *s, size_t pos, bool fold)
{
	if (cpt_at(s, pos) != '\'' || pos + 1 >= s->end)
		return 0;
	uint32_t a = cpt_at(s, pos + 1);
	if (fold)
		a = lower_ascii(a);
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if (pos + 2 >= s->end)
		return 0;
	uint32_t b = cpt_at(s, pos + 2);
	if (fold)
		b = lower_ascii(b);
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return 3;
	return 0;
}

/* Trailing whitespace rules shared by the scanners: \s*[\r\n]+ (when rn), \s+(?!\S), \s+;
 * otherwise one code point. */
static size_t whitespace_tail(struct seg *s, size_t pos, bool rn)
{
	size_t n = 0, last_rn = 0;
	while (IS_WS(fl_at(s, pos + n))) {
		uint32_t c = cpt_at(s, pos + n);
		if (rn && (c == '\r' || c == '\n'))
			last_rn = pos + n + 1;
		n++;
	}
	if (last_rn > 0)
		return add(s, last_rn), last_rn;
	if (n > 1 && cpt_at(s, pos + n) != OOR)
		return add(s, pos + n - 1), pos + n - 1;
	if (n > 0)
		return add(s, pos + n), pos + n;
	return add(s, pos + 1), pos + 1;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void scan_gpt2(struct seg *s)
{
	for (size_t pos = s->ini; pos < s->end && !s->st;) {
		uint32_t c = cpt_at(s, pos);
		size_t k = contraction(s, pos, false);
		if (k) {
			pos += add(s, pos + k);
			continue;
		}
		uint16_t f2 = c == ' ' ? fl_at(s, pos + 1) : fl_at(s, pos);
		if (IS_L(f2) || IS_N(f2) || (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2)) {
			uint16_t cls = IS_L(f2) ? PT_UF_LETTER : IS_N(f2) ? PT_UF_NUMBER : 0;
			pos += (c == ' ');
			if (cls)
				while (fl_at(s, pos) & cls)
					pos++;
			else
				while (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2)
					f2 = fl_at(s, ++pos);
			add(s, pos);
			continue;
		}
		pos = whitespace_tail(s, pos, false);
	}
}

/* Llama-3 (maxdig 3) and Qwen2 (maxdig 1), lm = PT_UF_LETTER:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxdig}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen3.5 (maxdig 1, lm = letters and marks): letter runs and the punctuation class take
 * \p{M} with \p{L} ([\p{L}\p{M}]+, [^\s\p{L}\p{M}\p{N}]), as llama.cpp's
 * unicode_regex_split_custom_qwen35. */
static void scan_llama3(struct seg *s, size_t maxdig, uint16_t lm)
{
	for (size_t pos = s->ini; pos < s->end && !s->st;) {
		uint32_t c = cpt_at(s, pos);
		uint16_t f = fl_at(s, pos);
		size_t k = contraction(s, pos, true);
		if (k) {
			pos += add(s, pos + k);
			continue;
		}
		if (!(c == '\r' || c == '\n' || IS_N(f)) && ((f | fl_at(s, pos + 1)) & lm)) {
			pos++;
			while (fl_at(s, pos) & lm)
				pos++;
			add(s, pos);
			continue;
		}
		if (IS_N(f)) {
			size_t ini = pos;
			while (IS_N(fl_at(s, pos))) {
				if (++pos - ini >= maxdig) {
					add(s, pos);
					ini = pos;
				}
			}
			add(s, pos);
			continue;
		}
		uint16_t f2 = c == ' ' ? fl_at(s, pos + 1) : f;
		if (!(IS_WS(f2) | (f2 & lm) | IS_N(f2)) && f) {
			pos += (c == ' ');
			while (!(IS_WS(f2) | (f2 & lm) | IS_N(f2)) && f2)
				f2 = fl_at(s, ++pos);
			for (uint32_t c2 = cpt_at(s, pos); c2 == '\r' || c2 == '\n';)
				c2 = cpt_at(s, ++pos);
			add(s, pos);
			continue;
		}
		pos = whitespace_tail(s, pos, true);
	}
}

/* llama.cpp's unicode_cpt_is_han: the CJK ideograph blocks (not Unicode's Han script). */
static bool is_han(uint32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
	       (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2EBEF) ||
	       (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* A letter that is not Han (OOR is neither). */
static bool kimi_letter(const struct seg *s, size_t p)
{
	return IS_L(fl_at(s, p)) && !is_han(cpt_at(s, p));
}

/* Kimi K2 (tokenization_kimi.py's regex, llama.cpp's unicode_regex_split_custom_kimi_k2):
 * [\p{Han}]+ | [^\r\n\p{L}\p{N}]? non-Han letters+ (?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * (the upper/lower letter alternatives of the regex both reduce to one letter run in
 * llama.cpp's scanner, which is what this follows) */
static void scan_kimi_k2(struct seg *s)
{
	for (size_t pos = s->ini; pos < s->end && !s->st;) {
		uint32_t c = cpt_at(s, pos);
		uint16_t f = fl_at(s, pos);
		if (is_han(c)) {
			while (is_han(cpt_at(s, pos)))
				pos++;
			add(s, pos);
			continue;
		}
		bool lead = !(c == '\r' || c == '\n' || IS_L(f) || IS_N(f));
		if (kimi_letter(s, pos) || (lead && kimi_letter(s, pos + 1))) {
			pos += lead;
			while (kimi_letter(s, pos))
				pos++;
			pos += contraction(s, pos, true);
			add(s, pos);
			continue;
		}
		if (IS_N(f)) {
			size_t ini = pos;
			while (IS_N(fl_at(s, pos))) {
				if (++pos - ini >= 3) {
					add(s, pos);
					ini = pos;
				}
			}
			add(s, pos);
			continue;
		}
		uint16_t f2 = c == ' ' ? fl_at(s, pos + 1) : f;
		if (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2) {
			pos += (c == ' ');
			while (!(IS_WS(f2) | IS_L(f2) | IS_N(f2)) && f2)
				f2 = fl_at(s, ++pos);
			for (uint32_t c2 = cpt_at(s, pos); c2 == '\r' || c2 == '\n';)
				c2 = cpt_at(s, ++pos);
			add(s, pos);
			continue;
		}
		pos = whitespace_tail(s, pos, true);
	}
}

/* [^\n]+|[\n]+ */
static void scan_newlines(struct seg *s)
{
	for (size_t pos = s->ini; pos < s->end && !s->st;) {
		bool nl = s->cps[pos] == '\n';
		while (pos < s->end && (s->cps[pos] == '\n') == nl)
			pos++;
		add(s, pos);
	}
}

/* One regex of a list over a segment: its compiled form and the subject it reads. */
struct rx_run {
	const pcre2_code *re;       /* collapsed bytes, or */
	const pcre2_code_32 *wre;   /* code points */
	const uint8_t *collapsed;
	const uint32_t *wide;
	pcre2_match_data *md;
	pcre2_match_data_32 *wmd;
};

/* Next match in [at, end) of the segment; false when none. */
static bool rx_next(const struct rx_run *r, const struct seg *s, size_t at, size_t *b,
		    size_t *e)
{
	PCRE2_SIZE *ov;
	int rc;
	if (r->re) {
		rc = pcre2_match(r->re, r->collapsed + s->ini, s->end - s->ini, at - s->ini, 0,
				 r->md, NULL);
		ov = rc < 0 ? NULL : pcre2_get_ovector_pointer(r->md);
	} else {
		rc = pcre2_match_32(r->wre, r->wide + s->ini, s->end - s->ini, at - s->ini, 0,
				    r->wmd, NULL);
		ov = rc < 0 ? NULL : pcre2_get_ovector_pointer_32(r->wmd);
	}
	if (!ov)
		return false;
	*b = s->ini + ov[0];
	*e = s->ini + ov[1];
	return true;
}

/* A PCRE2 pattern over the segment; unmatched gaps are kept as their own words (llama.cpp's
 * unicode_regex_split_stl, which searches each segment as a whole subject). */
static void scan_regex(struct seg *s, const struct rx_run *r)
{
	size_t at = s->ini, b, e;
	while (at < s->end && !s->st && rx_next(r, s, at, &b, &e)) {
		if (e == b) { /* cannot happen with our patterns; never loop */
			at = b + 1;
			continue;
		}
		if (b > s->prev)
			add(s, b);
		add(s, e);
		at = e;
	}
	add(s, s->end);
}

/* llama.cpp's collapsed form: ASCII as is, other whitespace 0x0B, else one class byte. */
static uint8_t collapse(uint32_t cp, uint16_t f)
{
	if (cp < 128)
		return (uint8_t)cp;
	if (IS_WS(f))
		return 0x0B;
	switch (f & 0xFF & ~PT_UF_WHITESPACE) {
	case PT_UF_NUMBER: return 0xD1;
	case PT_UF_LETTER: return 0xD2;
	case PT_UF_PUNCT: return 0xD3;
	case PT_UF_MARK: return 0xD4;
	case PT_UF_SYMBOL: return 0xD5;
	default: return 0xD0;
	}
}

struct lens {
	uint32_t *v;
	size_t n, cap;
};

/* \s+$ over the segment (RX_WS_END): its trailing run of what std::wregex's \s matches in
 * llama.cpp's wide text (ASCII whitespace, and every other whitespace as 0x0B). */
static void scan_ws_end(struct seg *s, const uint32_t *wide)
{
	size_t b = s->end;
	while (b > s->ini && (wide[b - 1] == ' ' || (wide[b - 1] >= 0x09 && wide[b - 1] <= 0x0D)))
		b--;
	if (b < s->end)
		add(s, b);
	add(s, s->end);
}

/* The regex list: each regex refines the words the previous ones left. */
static enum pt_status split_list(const struct pt_tok *t, const uint32_t *cps,
				 const uint16_t *fl, size_t n, struct lens *cur,
				 struct pt_error *err)
{
	struct rx_run r = { 0 };
	uint8_t *col = pt_malloc(n);
	uint32_t *wide = pt_mallocn(n, sizeof *wide);
	r.md = pcre2_match_data_create(1, NULL);
	r.wmd = pcre2_match_data_create_32(1, NULL);
	enum pt_status st = (col && wide && r.md && r.wmd) ?
		PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n && !st; i++) {
		col[i] = collapse(cps[i], fl[i]);
		/* std::wregex's \s knows only ASCII whitespace: llama.cpp passes the rest as 0x0B */
		wide[i] = cps[i] > 0x7F && IS_WS(fl[i]) ? 0x0B : cps[i];
	}
	r.collapsed = col;
	r.wide = wide;
	for (int k = 0; k < t->n_re && !st; k++) {
		struct lens nx = { 0 };
		size_t start = 0;
		r.re = t->re[k];
		r.wre = t->wre[k];
		for (size_t w = 0; w < cur->n && !st; w++) {
			struct seg s = { cps, fl, start, start + cur->v[w], start, &nx.v, &nx.n,
					 &nx.cap, err, PT_OK };
			if (t->re_kind[k] == RX_GPT2)
				scan_gpt2(&s);
			else if (t->re_kind[k] == RX_WS_END)
				scan_ws_end(&s, wide);
			else
				scan_regex(&s, &r);
			st = s.st;
			start += cur->v[w];
		}
		pt_free(cur->v);
		*cur = nx;
	}
	pcre2_match_data_free(r.md);
	pcre2_match_data_free_32(r.wmd);
	pt_free(wide);
	pt_free(col);
	return st;
}

enum pt_status tok_split_words(const struct pt_tok *t, const uint32_t *cps, size_t n,
			       uint32_t **lens, size_t *n_words, struct pt_error *err)
{
	struct lens cur = { 0 };
	*lens = NULL;
	*n_words = 0;
	if (!n)
		return PT_OK;
	uint16_t *fl = pt_mallocn(n, sizeof *fl);
	if (!fl)
		return pt_error_set(err, PT_E_NOMEM, "out of memory splitting text");
	for (size_t i = 0; i < n; i++)
		fl[i] = pt_tok_uflags(cps[i]);
	enum pt_status st = PT_OK;
	if (t->n_re > 0) { /* a regex list */
		cur.v = pt_malloc(sizeof *cur.v);
		if (!cur.v)
			st = pt_error_set(err, PT_E_NOMEM, "out of memory");
		else
			cur.v[0] = (uint32_t)n, cur.n = cur.cap = 1;
		if (!st)
			st = split_list(t, cps, fl, n, &cur, err);
	} else {
		struct seg s = { cps, fl, 0, n, 0, &cur.v, &cur.n, &cur.cap, err, PT_OK };
		if (t->split == SPLIT_GPT2)
			scan_gpt2(&s);
		else if (t->split == SPLIT_LLAMA3)
			scan_llama3(&s, 3, PT_UF_LETTER);
		else if (t->split == SPLIT_QWEN2)
			scan_llama3(&s, 1, PT_UF_LETTER);
		else if (t->split == SPLIT_QWEN35)
			scan_llama3(&s, 1, PT_UF_LETTER | PT_UF_MARK);
		else if (t->split == SPLIT_KIMI_K2)
			scan_kimi_k2(&s);
		else
			scan_newlines(&s);
		st = s.st;
	}
	pt_free(fl);
	if (st) {
		pt_free(cur.v);
		return st;
	}
	*lens = cur.v;
	*n_words = cur.n;
	return PT_OK;
}
