/* tok_split.c - pre-tokenization: cuts a fragment's code points into words the way
 * llama.cpp's unicode_regex_split does for each pre type.  The GPT-2, Llama-3 and Qwen2
 * regexes are llama.cpp hand-written scanners, reproduced here step by step (not a regex
 * engine: they differ from PCRE on control characters and past-the-end lookahead).  The
 * "default" list's other regexes run through PCRE2 on llama.cpp's "collapsed" text (every
 * non-ASCII code point replaced by one class byte), which is exactly what llama.cpp's
 * std::regex fallback matches against. */
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

/* A PCRE2 pattern over the collapsed text; unmatched gaps are kept as their own words. */
static void scan_regex(struct seg *s, const pcre2_code *re, const uint8_t *collapsed,
		       pcre2_match_data *md)
{
	size_t at = s->ini;
	while (at < s->end && !s->st) {
		int rc = pcre2_match(re, collapsed + s->ini, s->end - s->ini, at - s->ini, 0, md,
				     NULL);
		if (rc < 0)
			break;
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		size_t b = s->ini + ov[0], e = s->ini + ov[1];
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

enum pt_status tok_split_compile(struct pt_tok *t, struct pt_error *err)
{
	/* The "default" list: [\p{P}\$\+<=>\^~\|]+, the GPT-2 regex (custom scanner),
	 * \p{N}+, [0-9][0-9][0-9] -- with \p{..} rewritten as llama.cpp's collapse does. */
	static const char *const pats[] = {
		"[\\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}\\$\\+<=>\\^~\\|]+",
		NULL,
		"[\\xD10-9]+",
		"[0-9][0-9][0-9]",
	};
	if (t->split != SPLIT_DEFAULT)
		return PT_OK;
	for (int i = 0; i < 4; i++) {
		t->n_re = i + 1;
		if (!pats[i])
			continue;
		int ec;
		PCRE2_SIZE eo;
		t->re[i] = pcre2_compile((PCRE2_SPTR)pats[i], PCRE2_ZERO_TERMINATED, 0, &ec, &eo,
					 NULL);
		if (!t->re[i])
			return pt_error_set(err, PT_E_NOMEM, "pre-tokenizer regex %d failed (%d)", i, ec);
	}
	return PT_OK;
}

struct lens {
	uint32_t *v;
	size_t n, cap;
};

static enum pt_status split_default(const struct pt_tok *t, const uint32_t *cps,
				    const uint16_t *fl, size_t n, struct lens *cur,
				    struct pt_error *err)
{
	uint8_t *col = pt_malloc(n ? n : 1);
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	enum pt_status st = (col && md) ? PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n && col; i++)
		col[i] = collapse(cps[i], fl[i]);
	for (int r = 0; r < t->n_re && !st; r++) {
		struct lens nx = { 0 };
		size_t start = 0;
		for (size_t w = 0; w < cur->n && !st; w++) {
			struct seg s = { cps, fl, start, start + cur->v[w], start, &nx.v, &nx.n,
					 &nx.cap, err, PT_OK };
			if (t->re[r])
				scan_regex(&s, t->re[r], col, md);
			else
				scan_gpt2(&s);
			st = s.st;
			start += cur->v[w];
		}
		pt_free(cur->v);
		*cur = nx;
	}
	pcre2_match_data_free(md);
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
	if (t->split == SPLIT_DEFAULT) {
		cur.v = pt_malloc(sizeof *cur.v);
		if (!cur.v)
			st = pt_error_set(err, PT_E_NOMEM, "out of memory");
		else
			cur.v[0] = (uint32_t)n, cur.n = cur.cap = 1;
		if (!st)
			st = split_default(t, cps, fl, n, &cur, err);
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
