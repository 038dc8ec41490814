/* tmpl_parse.c - Jinja2 lexer and parser: template source -> AST (struct node).
 *
 * Whitespace handling follows jinja2 with trim_blocks and lstrip_blocks on: '-' strips all
 * whitespace on that side, '+' disables lstrip/trim, lstrip_blocks removes spaces and tabs
 * between the line start and a {% or {# tag, trim_blocks drops the newline after %} / #}.
 * One trailing newline of the source is removed and CRLF/CR become LF before lexing
 * (jinja2 keep_trailing_newline=False, newline_sequence='\n').
 */
#include "token/tmpl_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

enum tok { K_EOF, K_TEXT, K_BBEGIN, K_BEND, K_VBEGIN, K_VEND, K_NAME, K_STRING, K_INT,
	   K_FLOAT, K_OP };

struct token {
	enum tok k;
	uint32_t off;
	const char *p; /* name/op/text/decoded string */
	size_t n;
	int64_t i;
	double f;
};

struct parser {
	jmp_buf jb;
	struct pt_tmpl *t;
	struct pt_error *err;
	enum pt_status status;
	struct token *toks;
	size_t ntok, cap, pos;
	unsigned depth;
	int loops;      /* enclosing for loops (break/continue validity) */
	int name_flags; /* MF_* names seen since the enclosing macro began */
};

_Noreturn static void fail(struct parser *ps, size_t off, enum pt_status code, const char *fmt,
			   ...) __attribute__((format(printf, 4, 5)));
_Noreturn static void fail(struct parser *ps, size_t off, enum pt_status code, const char *fmt,
			   ...)
{
	char msg[200];
	unsigned line, col;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tm_line_col(ps->t->src, ps->t->len, off, &line, &col);
	pt_error_set(ps->err, code, "template: %s at line %u, column %u", msg, line, col);
	if (ps->err && ps->err->code == code)
		ps->err->offset = off;
	ps->status = code;
	longjmp(ps->jb, 1);
}

static void *palloc(struct parser *ps, size_t n)
{
	void *p = tm_arena_alloc(&ps->t->arena, n);
	if (!p)
		fail(ps, 0, PT_E_NOMEM, "out of memory");
	return p;
}

/* ---- lexer ----------------------------------------------------------------------------- */
static struct token *emit(struct parser *ps, enum tok k, size_t off, const char *p, size_t n)
{
	if (ps->ntok == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 256;
		struct token *nt = palloc(ps, cap * sizeof *nt);
		if (ps->ntok)
			memcpy(nt, ps->toks, ps->ntok * sizeof *nt);
		ps->toks = nt;
		ps->cap = cap;
	}
	struct token *t = &ps->toks[ps->ntok++];
	memset(t, 0, sizeof *t);
	t->k = k;
	t->off = (uint32_t)off;
	t->p = p;
	t->n = n;
	return t;
}

static bool is_ws(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}
static bool is_alpha(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Decodes a string literal body with Python's unicode-escape rules (what jinja2 applies). */
static size_t lex_string(struct parser *ps, size_t i)
{
	const char *s = ps->t->src;
	size_t len = ps->t->len, start = i;
	char q = s[i++];
	char *o = palloc(ps, len - start + 1);
	size_t n = 0;
	for (;;) {
		if (i >= len)
			fail(ps, start, PT_E_FORMAT, "unexpected end of string literal");
		char ch = s[i];
		if (ch == q) {
			i++;
			break;
		}
		if (ch != '\\') {
			o[n++] = ch;
			i++;
			continue;
		}
		if (i + 1 >= len)
			fail(ps, start, PT_E_FORMAT, "unexpected end of string literal");
		char e = s[i + 1];
		i += 2;
		switch (e) {
		case '\n': break;
		case '\\': o[n++] = '\\'; break;
		case '\'': o[n++] = '\''; break;
		case '"': o[n++] = '"'; break;
		case 'a': o[n++] = '\a'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'v': o[n++] = '\v'; break;
		case 'x': case 'u': case 'U': {
			int want = e == 'x' ? 2 : e == 'u' ? 4 : 8;
			uint32_t cp = 0;
			for (int k = 0; k < want; k++) {
				int h = i < len ? hexval(s[i]) : -1;
				if (h < 0)
					fail(ps, i - 2 - (size_t)k, PT_E_FORMAT,
					     "truncated \\%c escape in string literal", e);
				cp = cp * 16 + (uint32_t)h;
				i++;
			}
			if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
				fail(ps, i, PT_E_FORMAT, "escape outside the Unicode range");
			n += put_utf8(o + n, cp);
			break;
		}
		default:
			if (e >= '0' && e <= '7') {
				uint32_t cp = (uint32_t)(e - '0');
				for (int k = 0; k < 2 && i < len && s[i] >= '0' && s[i] <= '7'; k++)
					cp = cp * 8 + (uint32_t)(s[i++] - '0');
				n += put_utf8(o + n, cp);
			} else if (e == 'N') {
				fail(ps, i - 2, PT_E_UNSUPPORTED, "\\N{...} escapes are not supported");
			} else {
				o[n++] = '\\';
				i--; /* the character after the backslash is kept as is */
			}
		}
	}
	emit(ps, K_STRING, start, o, n);
	return i;
}

static size_t lex_number(struct parser *ps, size_t i)
{
	const char *s = ps->t->src;
	size_t len = ps->t->len, start = i;
	char buf[80];
	size_t bn = 0;
	bool isf = false;
#define TAKE_DIGITS()                                                                      \
	while (i < len && (is_digit(s[i]) || (s[i] == '_' && i + 1 < len && is_digit(s[i + 1])))) { \
		if (s[i] != '_' && bn < sizeof buf - 1)                                    \
			buf[bn++] = s[i];                                                  \
		i++;                                                                       \
	}
	TAKE_DIGITS();
	if (i + 1 < len && s[i] == '.' && is_digit(s[i + 1])) {
		isf = true;
		buf[bn++] = s[i++];
		TAKE_DIGITS();
	}
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t j = i + 1;
		if (j < len && (s[j] == '+' || s[j] == '-'))
			j++;
		if (j < len && is_digit(s[j])) {
			isf = true;
			while (i < j && bn < sizeof buf - 1)
				buf[bn++] = s[i++];
			TAKE_DIGITS();
		}
	}
#undef TAKE_DIGITS
	if (bn >= sizeof buf - 1)
		fail(ps, start, PT_E_UNSUPPORTED, "number literal too long");
	buf[bn] = 0;
	struct token *t = emit(ps, isf ? K_FLOAT : K_INT, start, s + start, i - start);
	errno = 0;
	if (isf) {
		t->f = strtod(buf, NULL);
	} else {
		t->i = strtoll(buf, NULL, 10);
		if (errno == ERANGE)
			fail(ps, start, PT_E_UNSUPPORTED, "integer literal out of 64-bit range");
	}
	return i;
}

static const char *const ops[] = { "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/",
				   "%", "~", "(", ")", "[", "]", "{", "}", ",", ".", ":",
				   "|", "=", "<", ">", ";" };

/* Lexes the inside of a {% %} or {{ }} tag from i; returns the index after the end tag. */
static size_t lex_tag(struct parser *ps, size_t i, bool block, bool *line_start)
{
	const char *s = ps->t->src;
	size_t len = ps->t->len;
	int depth = 0;
	char closer = block ? '%' : '}';
	for (;;) {
		while (i < len && is_ws(s[i]))
			i++;
		if (i >= len)
			fail(ps, len, PT_E_FORMAT, "unexpected end of template inside a tag");
		if (depth == 0) {
			size_t j = i;
			char mod = 0;
			if ((s[j] == '-' || s[j] == '+') && j + 2 < len + 0 && s[j + 1] == closer &&
			    s[j + 2] == '}')
				mod = s[j++];
			if (j + 1 < len && s[j] == closer && s[j + 1] == '}') {
				emit(ps, block ? K_BEND : K_VEND, i, s + i, 2);
				j += 2;
				if (mod == '-') {
					while (j < len && is_ws(s[j]))
						j++;
				} else if (block && mod != '+' && j < len && s[j] == '\n') {
					j++;
				}
				*line_start = j > 0 && s[j - 1] == '\n';
				return j;
			}
		}
		if (is_alpha(s[i])) {
			size_t st = i;
			while (i < len && (is_alpha(s[i]) || is_digit(s[i])))
				i++;
			emit(ps, K_NAME, st, s + st, i - st);
		} else if (is_digit(s[i])) {
			i = lex_number(ps, i);
		} else if (s[i] == '\'' || s[i] == '"') {
			i = lex_string(ps, i);
		} else {
			size_t k;
			for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
				size_t ol = strlen(ops[k]);
				if (i + ol <= len && memcmp(s + i, ops[k], ol) == 0)
					break;
			}
			if (k == sizeof ops / sizeof ops[0])
				fail(ps, i, PT_E_FORMAT, "unexpected char '%c'", s[i]);
			size_t ol = strlen(ops[k]);
			char o0 = ops[k][0];
			if (ol == 1 && (o0 == '(' || o0 == '[' || o0 == '{'))
				depth++;
			if (ol == 1 && (o0 == ')' || o0 == ']' || o0 == '}')) {
				if (depth == 0)
					fail(ps, i, PT_E_FORMAT, "unexpected '%c'", o0);
				depth--;
			}
			emit(ps, K_OP, i, ops[k], ol);
			i += ol;
		}
	}
}

/* Strips text per the tag modifier and lstrip_blocks; returns the kept length. */
static size_t strip_before(const char *text, size_t n, char mod, bool lstrip, bool line_start)
{
	if (mod == '-') {
		while (n > 0 && is_ws(text[n - 1]))
			n--;
		return n;
	}
	if (mod == '+' || !lstrip)
		return n;
	size_t l = n;
	while (l > 0 && text[l - 1] != '\n')
		l--;
	if (l == 0 && !line_start)
		return n;
	for (size_t k = l; k < n; k++)
		if (!is_ws(text[k]))
			return n;
	return l;
}

static bool match_word(const char *s, size_t len, size_t *i, const char *w)
{
	size_t j = *i, wl = strlen(w);
	while (j < len && is_ws(s[j]))
		j++;
	if (j + wl > len || memcmp(s + j, w, wl) != 0 || (j + wl < len && (is_alpha(s[j + wl]) || is_digit(s[j + wl]))))
		return false;
	j += wl;
	while (j < len && is_ws(s[j]))
		j++;
	*i = j;
	return true;
}

/* {% raw %}...{% endraw %}: i is just after "{%" (+ modifier).  Returns the index after
 * the end tag, or 0 when this is not a raw tag. */
static size_t lex_raw(struct parser *ps, size_t i, bool *line_start)
{
	const char *s = ps->t->src;
	size_t len = ps->t->len, j = i;
	if (!match_word(s, len, &j, "raw"))
		return 0;
	if (j < len && s[j] == '-') {
		j++;
		if (j + 1 < len && s[j] == '%' && s[j + 1] == '}') {
			j += 2;
			while (j < len && is_ws(s[j]))
				j++;
		} else {
			return 0;
		}
	} else if (j + 1 < len && s[j] == '%' && s[j + 1] == '}') {
		j += 2;
	} else {
		return 0;
	}
	for (size_t k = j; k + 1 < len; k++) {
		if (s[k] != '{' || s[k + 1] != '%')
			continue;
		size_t e = k + 2;
		char mod = 0;
		if (e < len && (s[e] == '-' || s[e] == '+'))
			mod = s[e++];
		if (!match_word(s, len, &e, "endraw"))
			continue;
		char emod = 0;
		if (e < len && (s[e] == '-' || s[e] == '+'))
			emod = s[e++];
		if (e + 1 >= len || s[e] != '%' || s[e + 1] != '}')
			continue;
		e += 2;
		size_t keep = strip_before(s + j, k - j, mod, true, false);
		if (keep)
			emit(ps, K_TEXT, j, s + j, keep);
		if (emod == '-')
			while (e < len && is_ws(s[e]))
				e++;
		else if (emod != '+' && e < len && s[e] == '\n')
			e++;
		*line_start = s[e - 1] == '\n';
		return e;
	}
	fail(ps, i, PT_E_FORMAT, "missing end of raw directive");
}

static void lex(struct parser *ps)
{
	const char *s = ps->t->src;
	size_t len = ps->t->len, i = 0;
	bool line_start = true;
	while (i < len) {
		size_t k = i;
		while (k + 1 < len && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' ||
							 s[k + 1] == '#')))
			k++;
		if (k + 1 >= len) {
			emit(ps, K_TEXT, i, s + i, len - i);
			break;
		}
		char kind = s[k + 1];
		char mod = (k + 2 < len && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
		size_t keep = strip_before(s + i, k - i, mod, kind != '{', line_start);
		if (keep)
			emit(ps, K_TEXT, i, s + i, keep);
		size_t body = k + 2 + (mod ? 1 : 0);
		if (kind == '#') {
			size_t e = body;
			while (e + 1 < len && !(s[e] == '#' && s[e + 1] == '}'))
				e++;
			if (e + 1 >= len)
				fail(ps, k, PT_E_FORMAT, "missing end of comment tag");
			char emod = (e > body && (s[e - 1] == '-' || s[e - 1] == '+')) ? s[e - 1] : 0;
			e += 2;
			if (emod == '-')
				while (e < len && is_ws(s[e]))
					e++;
			else if (emod != '+' && e < len && s[e] == '\n')
				e++;
			line_start = s[e - 1] == '\n';
			i = e;
		} else if (kind == '%') {
			size_t r = lex_raw(ps, body, &line_start);
			if (r) {
				i = r;
				continue;
			}
			emit(ps, K_BBEGIN, k, s + k, 2);
			i = lex_tag(ps, body, true, &line_start);
		} else {
			emit(ps, K_VBEGIN, k, s + k, 2);
			i = lex_tag(ps, body, false, &line_start);
		}
	}
	emit(ps, K_EOF, len, s + len, 0);
}

/* ---- parser helpers -------------------------------------------------------------------- */
static struct token *cur(struct parser *ps) { return &ps->toks[ps->pos]; }
static struct token *peek(struct parser *ps, size_t k)
{
	size_t p = ps->pos + k;
	return &ps->toks[p < ps->ntok ? p : ps->ntok - 1];
}
static void next(struct parser *ps)
{
	if (ps->pos + 1 < ps->ntok)
		ps->pos++;
}
static bool tok_is(const struct token *t, enum tok k, const char *s)
{
	return t->k == k && (!s || (t->n == strlen(s) && memcmp(t->p, s, t->n) == 0));
}
static bool is_op(struct parser *ps, const char *o) { return tok_is(cur(ps), K_OP, o); }
static bool is_name(struct parser *ps, const char *n) { return tok_is(cur(ps), K_NAME, n); }
static bool skip_op(struct parser *ps, const char *o)
{
	if (!is_op(ps, o))
		return false;
	next(ps);
	return true;
}
static bool skip_name(struct parser *ps, const char *n)
{
	if (!is_name(ps, n))
		return false;
	next(ps);
	return true;
}

static const char *describe(const struct token *t)
{
	switch (t->k) {
	case K_EOF: return "end of template";
	case K_TEXT: return "template data";
	case K_BBEGIN: return "begin of statement block";
	case K_BEND: return "end of statement block";
	case K_VBEGIN: return "begin of print statement";
	case K_VEND: return "end of print statement";
	case K_NAME: return "name";
	case K_STRING: return "string";
	case K_INT: return "integer";
	case K_FLOAT: return "float";
	case K_OP: return "operator";
	}
	return "token";
}

static void expect_op(struct parser *ps, const char *o)
{
	if (!skip_op(ps, o))
		fail(ps, cur(ps)->off, PT_E_FORMAT, "expected '%s', got %s '%.*s'", o,
		     describe(cur(ps)), (int)(cur(ps)->n > 20 ? 20 : cur(ps)->n), cur(ps)->p);
}
static struct token *expect_name(struct parser *ps)
{
	struct token *t = cur(ps);
	if (t->k != K_NAME)
		fail(ps, t->off, PT_E_FORMAT, "expected a name, got %s", describe(t));
	next(ps);
	return t;
}
static void expect_bend(struct parser *ps)
{
	if (cur(ps)->k != K_BEND)
		fail(ps, cur(ps)->off, PT_E_FORMAT, "expected end of statement block, got %s",
		     describe(cur(ps)));
	next(ps);
}

static struct node *mk(struct parser *ps, enum node_kind k, size_t off)
{
	struct node *n = palloc(ps, sizeof *n);
	n->kind = k;
	n->off = (uint32_t)off;
	return n;
}

struct nlist {
	struct node **v;
	size_t n, cap;
};
static void nl_push(struct parser *ps, struct nlist *l, struct node *x)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct node **nv = palloc(ps, cap * sizeof *nv);
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof *nv);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = x;
}

static void enter(struct parser *ps, size_t off)
{
	if (++ps->depth > PT_TMPL_MAX_DEPTH)
		fail(ps, off, PT_E_LIMIT, "template nested deeper than %d levels",
		     PT_TMPL_MAX_DEPTH);
}

/* ---- expressions (precedence as jinja2's parser) --------------------------------------- */
static struct node *parse_expr(struct parser *ps, bool with_cond);
static struct node *parse_unary(struct parser *ps, bool with_filter);
static struct node *parse_or(struct parser *ps);

/* Call arguments after '(': positional and name=value (E_KW); '*x' is not supported. */
static void parse_args(struct parser *ps, struct node *call)
{
	struct nlist args = { 0 };
	bool kw_seen = false;
	while (!skip_op(ps, ")")) {
		if (args.n)
			expect_op(ps, ",");
		if (skip_op(ps, ")"))
			break;
		if (is_op(ps, "*") || is_op(ps, "**"))
			fail(ps, cur(ps)->off, PT_E_UNSUPPORTED, "*args / **kwargs calls are not supported");
		if (cur(ps)->k == K_NAME && tok_is(peek(ps, 1), K_OP, "=")) {
			struct token *nm = cur(ps);
			next(ps);
			next(ps);
			struct node *kw = mk(ps, E_KW, nm->off);
			kw->name = nm->p;
			kw->name_len = nm->n;
			kw->a = parse_expr(ps, true);
			nl_push(ps, &args, kw);
			kw_seen = true;
		} else {
			if (kw_seen)
				fail(ps, cur(ps)->off, PT_E_FORMAT, "positional argument follows keyword argument");
			nl_push(ps, &args, parse_expr(ps, true));
		}
	}
	call->list = args.v;
	call->n = args.n;
}

static struct node *parse_filter_one(struct parser *ps, struct node *subject, bool test)
{
	struct token *nm = expect_name(ps);
	struct node *f = mk(ps, test ? E_TEST : E_FILTER, nm->off);
	size_t nlen = nm->n;
	while (is_op(ps, ".") && peek(ps, 1)->k == K_NAME) { /* dotted names: treated as one */
		next(ps);
		nlen = (size_t)(cur(ps)->p + cur(ps)->n - nm->p);
		next(ps);
	}
	f->name = nm->p;
	f->name_len = nlen;
	f->a = subject;
	bool known = test ? tm_test_known(f->name, nlen) : tm_filter_known(f->name, nlen);
	f->soft = !known; /* checked after parsing, see check_names */
	if (skip_op(ps, "(")) {
		parse_args(ps, f);
	} else if (test) {
		struct token *t = cur(ps);
		bool arg = t->k == K_NAME || t->k == K_STRING || t->k == K_INT || t->k == K_FLOAT ||
			   tok_is(t, K_OP, "(") || tok_is(t, K_OP, "[") || tok_is(t, K_OP, "{");
		if (tok_is(t, K_NAME, "else") || tok_is(t, K_NAME, "or") || tok_is(t, K_NAME, "and"))
			arg = false;
		if (arg) {
			if (tok_is(t, K_NAME, "is"))
				fail(ps, t->off, PT_E_FORMAT, "you cannot chain multiple tests with is");
			struct node *a = parse_unary(ps, false);
			f->list = palloc(ps, sizeof *f->list);
			f->list[0] = a;
			f->n = 1;
		}
	}
	return f;
}

static struct node *parse_postfix(struct parser *ps, struct node *x);

static struct node *parse_filter_expr(struct parser *ps, struct node *x)
{
	unsigned saved = ps->depth;
	for (;;) {
		if (is_op(ps, "|") || is_name(ps, "is") || is_op(ps, "("))
			enter(ps, cur(ps)->off); /* each link nests the AST one level */
		if (skip_op(ps, "|")) {
			x = parse_filter_one(ps, x, false);
		} else if (is_name(ps, "is")) {
			next(ps);
			bool neg = skip_name(ps, "not");
			x = parse_filter_one(ps, x, true);
			x->op = neg;
		} else if (is_op(ps, "(")) {
			x = parse_postfix(ps, x);
		} else {
			ps->depth = saved;
			return x;
		}
	}
}

static struct node *parse_slice_part(struct parser *ps)
{
	if (is_op(ps, ":") || is_op(ps, "]"))
		return NULL;
	return parse_expr(ps, true);
}

static struct node *parse_subscript(struct parser *ps, struct node *x)
{
	struct token *t = cur(ps);
	next(ps);
	if (t->p[0] == '.') {
		struct token *nm = cur(ps);
		if (nm->k == K_INT) { /* x.0 means x[0] */
			next(ps);
			struct node *n = mk(ps, E_ITEM, nm->off);
			n->a = x;
			n->b = mk(ps, E_LIT, nm->off);
			n->b->val = tv_int(nm->i);
			return n;
		}
		nm = expect_name(ps);
		struct node *n = mk(ps, E_ATTR, nm->off);
		n->a = x;
		n->name = nm->p;
		n->name_len = nm->n;
		return n;
	}
	struct node *start = parse_slice_part(ps);
	if (!is_op(ps, ":")) {
		if (!start)
			fail(ps, cur(ps)->off, PT_E_FORMAT, "expected an index expression");
		if (is_op(ps, ",")) { /* x[a, b] is a tuple key */
			struct node *tup = mk(ps, E_TUPLE, start->off);
			struct nlist items = { 0 };
			nl_push(ps, &items, start);
			while (skip_op(ps, ",") && !is_op(ps, "]"))
				nl_push(ps, &items, parse_expr(ps, true));
			tup->list = items.v;
			tup->n = items.n;
			start = tup;
		}
		expect_op(ps, "]");
		struct node *n = mk(ps, E_ITEM, t->off);
		n->a = x;
		n->b = start;
		return n;
	}
	next(ps);
	struct node *n = mk(ps, E_SLICE, t->off);
	n->a = x;
	n->b = start;
	n->c = parse_slice_part(ps);
	if (skip_op(ps, ":"))
		n->d = parse_slice_part(ps);
	expect_op(ps, "]");
	return n;
}

static struct node *parse_postfix(struct parser *ps, struct node *x)
{
	unsigned saved = ps->depth;
	for (;;) {
		if (is_op(ps, ".") || is_op(ps, "[") || is_op(ps, "("))
			enter(ps, cur(ps)->off); /* each link nests the AST one level */
		if (is_op(ps, ".") || is_op(ps, "[")) {
			x = parse_subscript(ps, x);
		} else if (is_op(ps, "(")) {
			struct node *call = mk(ps, E_CALL, x->off); /* errors point at the callee */
			next(ps);
			call->a = x;
			parse_args(ps, call);
			x = call;
		} else {
			ps->depth = saved;
			return x;
		}
	}
}

static struct node *lit(struct parser *ps, size_t off, struct tv v)
{
	struct node *n = mk(ps, E_LIT, off);
	n->val = v;
	return n;
}

static struct node *parse_list_like(struct parser *ps, const char *close, enum node_kind k,
				    size_t off)
{
	struct nlist items = { 0 };
	while (!skip_op(ps, close)) {
		if (items.n)
			expect_op(ps, ",");
		if (skip_op(ps, close))
			break;
		nl_push(ps, &items, parse_expr(ps, true));
	}
	struct node *n = mk(ps, k, off);
	n->list = items.v;
	n->n = items.n;
	return n;
}

static struct node *parse_dict(struct parser *ps, size_t off)
{
	struct nlist keys = { 0 }, vals = { 0 };
	while (!skip_op(ps, "}")) {
		if (keys.n)
			expect_op(ps, ",");
		if (skip_op(ps, "}"))
			break;
		nl_push(ps, &keys, parse_expr(ps, true));
		expect_op(ps, ":");
		nl_push(ps, &vals, parse_expr(ps, true));
	}
	struct node *n = mk(ps, E_DICT, off);
	n->list = keys.v;
	n->n = keys.n;
	n->list2 = vals.v;
	n->n2 = vals.n;
	return n;
}

static struct node *parse_paren(struct parser *ps, size_t off)
{
	if (skip_op(ps, ")"))
		return mk(ps, E_TUPLE, off);
	struct node *first = parse_expr(ps, true);
	if (skip_op(ps, ")"))
		return first;
	struct nlist items = { 0 };
	nl_push(ps, &items, first);
	while (skip_op(ps, ",")) {
		if (is_op(ps, ")"))
			break;
		nl_push(ps, &items, parse_expr(ps, true));
	}
	expect_op(ps, ")");
	struct node *n = mk(ps, E_TUPLE, off);
	n->list = items.v;
	n->n = items.n;
	return n;
}

static struct node *parse_primary(struct parser *ps)
{
	struct token *t = cur(ps);
	switch (t->k) {
	case K_NAME:
		next(ps);
		if (tok_is(t, K_NAME, "true") || tok_is(t, K_NAME, "True"))
			return lit(ps, t->off, tv_bool(true));
		if (tok_is(t, K_NAME, "false") || tok_is(t, K_NAME, "False"))
			return lit(ps, t->off, tv_bool(false));
		if (tok_is(t, K_NAME, "none") || tok_is(t, K_NAME, "None"))
			return lit(ps, t->off, tv_none());
		{
			if (tok_is(t, K_NAME, "caller"))
				ps->name_flags |= MF_CALLER;
			if (tok_is(t, K_NAME, "varargs"))
				ps->name_flags |= MF_VARARGS;
			if (tok_is(t, K_NAME, "kwargs"))
				ps->name_flags |= MF_KWARGS;
			struct node *n = mk(ps, E_NAME, t->off);
			n->name = t->p;
			n->name_len = t->n;
			return n;
		}
	case K_STRING: {
		size_t total = 0;
		for (size_t k = 0; peek(ps, k)->k == K_STRING; k++)
			total += peek(ps, k)->n;
		char *buf = palloc(ps, total + 1);
		size_t o = 0;
		while (cur(ps)->k == K_STRING) {
			memcpy(buf + o, cur(ps)->p, cur(ps)->n);
			o += cur(ps)->n;
			next(ps);
		}
		return lit(ps, t->off, tv_str(buf, o));
	}
	case K_INT: next(ps); return lit(ps, t->off, tv_int(t->i));
	case K_FLOAT: next(ps); return lit(ps, t->off, tv_float(t->f));
	case K_OP:
		if (skip_op(ps, "("))
			return parse_paren(ps, t->off);
		if (skip_op(ps, "["))
			return parse_list_like(ps, "]", E_LIST, t->off);
		if (skip_op(ps, "{"))
			return parse_dict(ps, t->off);
		break;
	default:
		break;
	}
	fail(ps, t->off, PT_E_FORMAT, "unexpected %s '%.*s'", describe(t),
	     (int)(t->n > 20 ? 20 : t->n), t->p);
}

static struct node *parse_unary(struct parser *ps, bool with_filter)
{
	struct token *t = cur(ps);
	struct node *x;
	if (skip_op(ps, "-") || skip_op(ps, "+")) {
		x = mk(ps, t->p[0] == '-' ? E_NEG : E_POS, t->off);
		enter(ps, t->off);
		x->a = parse_unary(ps, false);
		ps->depth--;
	} else {
		x = parse_primary(ps);
	}
	x = parse_postfix(ps, x);
	if (with_filter)
		x = parse_filter_expr(ps, x);
	return x;
}

static struct node *bin(struct parser *ps, enum node_kind k, int op, size_t off, struct node *a,
			struct node *b)
{
	struct node *n = mk(ps, k, off);
	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

static struct node *parse_pow(struct parser *ps)
{
	struct node *x = parse_unary(ps, true);
	unsigned saved = ps->depth;
	while (is_op(ps, "**")) {
		size_t off = cur(ps)->off;
		enter(ps, off);
		next(ps);
		x = bin(ps, E_BIN, OP_POW, off, x, parse_unary(ps, true));
	}
	ps->depth = saved;
	return x;
}

static struct node *parse_math2(struct parser *ps)
{
	struct node *x = parse_pow(ps);
	unsigned saved = ps->depth;
	for (;;) {
		int op = is_op(ps, "*") ? OP_MUL : is_op(ps, "/") ? OP_DIV :
			 is_op(ps, "//") ? OP_FDIV : is_op(ps, "%") ? OP_MOD : OP_NONE;
		if (op == OP_NONE) {
			ps->depth = saved;
			return x;
		}
		size_t off = cur(ps)->off;
		enter(ps, off);
		next(ps);
		x = bin(ps, E_BIN, op, off, x, parse_pow(ps));
	}
}

static struct node *parse_concat(struct parser *ps)
{
	struct node *x = parse_math2(ps);
	if (!is_op(ps, "~"))
		return x;
	struct nlist parts = { 0 };
	nl_push(ps, &parts, x);
	size_t off = cur(ps)->off;
	while (skip_op(ps, "~"))
		nl_push(ps, &parts, parse_math2(ps));
	struct node *n = mk(ps, E_CONCAT, off);
	n->list = parts.v;
	n->n = parts.n;
	return n;
}

static struct node *parse_math1(struct parser *ps)
{
	struct node *x = parse_concat(ps);
	unsigned saved = ps->depth;
	for (;;) {
		int op = is_op(ps, "+") ? OP_ADD : is_op(ps, "-") ? OP_SUB : OP_NONE;
		if (op == OP_NONE) {
			ps->depth = saved;
			return x;
		}
		size_t off = cur(ps)->off;
		enter(ps, off);
		next(ps);
		x = bin(ps, E_BIN, op, off, x, parse_concat(ps));
	}
}

static int compare_op(struct parser *ps)
{
	static const struct { const char *s; int op; } tbl[] = {
		{ "==", OP_EQ }, { "!=", OP_NE }, { "<", OP_LT }, { "<=", OP_LE },
		{ ">", OP_GT }, { ">=", OP_GE },
	};
	for (size_t i = 0; i < sizeof tbl / sizeof tbl[0]; i++)
		if (is_op(ps, tbl[i].s))
			return tbl[i].op;
	if (is_name(ps, "in"))
		return OP_IN;
	if (is_name(ps, "not") && tok_is(peek(ps, 1), K_NAME, "in"))
		return OP_NOTIN;
	return OP_NONE;
}

static struct node *parse_compare(struct parser *ps)
{
	struct node *x = parse_math1(ps);
	int op = compare_op(ps);
	if (op == OP_NONE)
		return x;
	struct node *n = mk(ps, E_COMPARE, cur(ps)->off);
	struct nlist opnodes = { 0 }, operands = { 0 };
	n->a = x;
	while ((op = compare_op(ps)) != OP_NONE) {
		struct node *o = mk(ps, E_LIT, cur(ps)->off);
		o->op = op;
		next(ps);
		if (op == OP_NOTIN)
			next(ps);
		nl_push(ps, &opnodes, o);
		nl_push(ps, &operands, parse_math1(ps));
	}
	n->list = opnodes.v;
	n->n = opnodes.n;
	n->list2 = operands.v;
	n->n2 = operands.n;
	return n;
}

static struct node *parse_not(struct parser *ps)
{
	if (is_name(ps, "not")) {
		struct node *n = mk(ps, E_NOT, cur(ps)->off);
		next(ps);
		enter(ps, n->off);
		n->a = parse_not(ps);
		ps->depth--;
		return n;
	}
	return parse_compare(ps);
}

static struct node *parse_and(struct parser *ps)
{
	struct node *x = parse_not(ps);
	unsigned saved = ps->depth;
	while (is_name(ps, "and")) {
		size_t off = cur(ps)->off;
		enter(ps, off);
		next(ps);
		x = bin(ps, E_AND, 0, off, x, parse_not(ps));
	}
	ps->depth = saved;
	return x;
}

static struct node *parse_or(struct parser *ps)
{
	struct node *x = parse_and(ps);
	unsigned saved = ps->depth;
	while (is_name(ps, "or")) {
		size_t off = cur(ps)->off;
		enter(ps, off);
		next(ps);
		x = bin(ps, E_OR, 0, off, x, parse_and(ps));
	}
	ps->depth = saved;
	return x;
}

static struct node *parse_expr(struct parser *ps, bool with_cond)
{
	enter(ps, cur(ps)->off);
	struct node *x = parse_or(ps);
	if (with_cond) {
		while (is_name(ps, "if")) {
			struct node *n = mk(ps, E_COND, cur(ps)->off);
			next(ps);
			n->a = parse_or(ps); /* condition */
			n->b = x;
			if (skip_name(ps, "else"))
				n->c = parse_expr(ps, true);
			x = n;
		}
	}
	ps->depth--;
	return x;
}

/* ---- statements ------------------------------------------------------------------------ */
static struct node *parse_body(struct parser *ps, const char *const *ends, size_t nends);

static struct node *name_node(struct parser *ps, struct token *t)
{
	struct node *n = mk(ps, E_NAME, t->off);
	n->name = t->p;
	n->name_len = t->n;
	return n;
}

/* Assignment target: name, ns.attr (with_attr), or a tuple of names (optionally in parens). */
static struct node *parse_target(struct parser *ps, bool with_attr)
{
	size_t off = cur(ps)->off;
	bool paren = skip_op(ps, "(");
	struct nlist items = { 0 };
	for (;;) {
		struct node *n = name_node(ps, expect_name(ps));
		if (with_attr && !paren && items.n == 0 && is_op(ps, ".")) {
			next(ps);
			struct token *attr = expect_name(ps);
			struct node *a = mk(ps, E_ATTR, attr->off);
			a->a = n;
			a->name = attr->p;
			a->name_len = attr->n;
			return a;
		}
		nl_push(ps, &items, n);
		if (!skip_op(ps, ","))
			break;
		if (paren && is_op(ps, ")"))
			break;
	}
	if (paren)
		expect_op(ps, ")");
	if (items.n == 1 && !paren)
		return items.v[0];
	struct node *t = mk(ps, E_TUPLE, off);
	t->list = items.v;
	t->n = items.n;
	return t;
}

/* Expression that may be an unparenthesized tuple: `a, b`. */
static struct node *parse_tuple_expr(struct parser *ps, bool with_cond)
{
	size_t off = cur(ps)->off;
	struct node *x = parse_expr(ps, with_cond);
	if (!is_op(ps, ","))
		return x;
	struct nlist items = { 0 };
	nl_push(ps, &items, x);
	while (skip_op(ps, ",")) {
		if (cur(ps)->k == K_BEND || cur(ps)->k == K_VEND || is_name(ps, "if"))
			break;
		nl_push(ps, &items, parse_expr(ps, with_cond));
	}
	struct node *t = mk(ps, E_TUPLE, off);
	t->list = items.v;
	t->n = items.n;
	return t;
}

static const char *const END_FOR[] = { "endfor", "else" };
static const char *const END_FOR2[] = { "endfor" };
static const char *const END_IF[] = { "elif", "else", "endif" };
static const char *const END_IF2[] = { "endif" };

static void end_tag(struct parser *ps, const char *name)
{
	(void)name;
	next(ps); /* the end tag name, already matched by parse_body */
	expect_bend(ps);
}

static struct node *parse_for(struct parser *ps, size_t off)
{
	struct node *n = mk(ps, S_FOR, off);
	n->a = parse_target(ps, false);
	if (!skip_name(ps, "in"))
		fail(ps, cur(ps)->off, PT_E_FORMAT, "expected 'in' in for loop");
	n->b = parse_tuple_expr(ps, false);
	if (skip_name(ps, "if"))
		n->c = parse_expr(ps, true);
	if (is_name(ps, "recursive"))
		fail(ps, cur(ps)->off, PT_E_UNSUPPORTED, "recursive for loops are not supported");
	expect_bend(ps);
	ps->loops++;
	n->d = parse_body(ps, END_FOR, 2);
	ps->loops--;
	if (is_name(ps, "else")) {
		next(ps);
		expect_bend(ps);
		n->list2 = palloc(ps, sizeof *n->list2);
		n->list2[0] = parse_body(ps, END_FOR2, 1);
		n->n2 = 1;
	}
	end_tag(ps, "endfor");
	return n;
}

static struct node *parse_if(struct parser *ps, size_t off)
{
	struct node *n = mk(ps, S_IF, off);
	n->a = parse_tuple_expr(ps, true);
	expect_bend(ps);
	n->b = parse_body(ps, END_IF, 3);
	if (is_name(ps, "elif")) {
		size_t eoff = cur(ps)->off;
		next(ps);
		enter(ps, eoff); /* elif chains nest in the AST */
		n->c = parse_if(ps, eoff); /* consumes the shared endif */
		ps->depth--;
		return n;
	}
	if (is_name(ps, "else")) {
		next(ps);
		expect_bend(ps);
		n->c = parse_body(ps, END_IF2, 1);
	}
	end_tag(ps, "endif");
	return n;
}

static struct node **parse_filter_chain(struct parser *ps, size_t *count, bool first_bar)
{
	struct nlist fl = { 0 };
	if (!first_bar || skip_op(ps, "|")) {
		do {
			nl_push(ps, &fl, parse_filter_one(ps, NULL, false));
		} while (skip_op(ps, "|"));
	}
	*count = fl.n;
	return fl.v;
}

static struct node *parse_set(struct parser *ps, size_t off)
{
	struct node *target = parse_target(ps, true);
	if (skip_op(ps, "=")) {
		struct node *n = mk(ps, S_SET, off);
		n->a = target;
		n->b = parse_tuple_expr(ps, true);
		expect_bend(ps);
		return n;
	}
	static const char *const END_SET[] = { "endset" };
	struct node *n = mk(ps, S_SETBLOCK, off);
	n->a = target;
	n->list = parse_filter_chain(ps, &n->n, true);
	expect_bend(ps);
	n->b = parse_body(ps, END_SET, 1);
	end_tag(ps, "endset");
	return n;
}

static void parse_params(struct parser *ps, struct node *m)
{
	struct nlist params = { 0 };
	expect_op(ps, "(");
	while (!skip_op(ps, ")")) {
		if (params.n)
			expect_op(ps, ",");
		if (skip_op(ps, ")"))
			break;
		struct token *nm = expect_name(ps);
		struct node *p = name_node(ps, nm);
		if (skip_op(ps, "=")) {
			p->kind = E_KW;
			p->a = parse_expr(ps, true);
		} else if (params.n && params.v[params.n - 1]->kind == E_KW) {
			fail(ps, nm->off, PT_E_FORMAT, "non-default argument follows default argument");
		}
		nl_push(ps, &params, p);
	}
	m->list = params.v;
	m->n = params.n;
}

static struct node *parse_macro(struct parser *ps, size_t off)
{
	static const char *const END_MACRO[] = { "endmacro" };
	struct node *n = mk(ps, S_MACRO, off);
	struct token *nm = expect_name(ps);
	n->name = nm->p;
	n->name_len = nm->n;
	int flags = ps->name_flags, loops = ps->loops;
	ps->name_flags = 0;
	ps->loops = 0;
	parse_params(ps, n);
	expect_bend(ps);
	n->b = parse_body(ps, END_MACRO, 1);
	n->op = ps->name_flags;
	ps->name_flags = flags | ps->name_flags;
	ps->loops = loops;
	end_tag(ps, "endmacro");
	return n;
}

static struct node *parse_callblock(struct parser *ps, size_t off)
{
	static const char *const END_CALL[] = { "endcall" };
	struct node *n = mk(ps, S_CALLBLOCK, off);
	if (is_op(ps, "("))
		parse_params(ps, n);
	n->a = parse_expr(ps, true);
	if (n->a->kind != E_CALL)
		fail(ps, n->a->off, PT_E_FORMAT, "expected a call in the call block");
	expect_bend(ps);
	struct node *body = mk(ps, S_MACRO, off); /* caller() is a macro over the body */
	body->name = "caller";
	body->name_len = 6;
	body->list = n->list;
	body->n = n->n;
	int loops = ps->loops;
	ps->loops = 0;
	body->b = parse_body(ps, END_CALL, 1);
	ps->loops = loops;
	n->b = body;
	end_tag(ps, "endcall");
	return n;
}

static struct node *parse_statement(struct parser *ps)
{
	struct token *t = cur(ps);
	if (t->k != K_NAME)
		fail(ps, t->off, PT_E_FORMAT, "tag name expected");
	next(ps);
	if (tok_is(t, K_NAME, "for"))
		return parse_for(ps, t->off);
	if (tok_is(t, K_NAME, "if"))
		return parse_if(ps, t->off);
	if (tok_is(t, K_NAME, "set"))
		return parse_set(ps, t->off);
	if (tok_is(t, K_NAME, "macro"))
		return parse_macro(ps, t->off);
	if (tok_is(t, K_NAME, "call"))
		return parse_callblock(ps, t->off);
	if (tok_is(t, K_NAME, "break") || tok_is(t, K_NAME, "continue")) {
		if (!ps->loops)
			fail(ps, t->off, PT_E_FORMAT, "'%.*s' outside of a loop", (int)t->n, t->p);
		expect_bend(ps);
		return mk(ps, t->p[0] == 'b' ? S_BREAK : S_CONTINUE, t->off);
	}
	if (tok_is(t, K_NAME, "filter")) {
		static const char *const END_FILTER[] = { "endfilter" };
		struct node *n = mk(ps, S_FILTERBLOCK, t->off);
		n->list = parse_filter_chain(ps, &n->n, false);
		expect_bend(ps);
		n->b = parse_body(ps, END_FILTER, 1);
		end_tag(ps, "endfilter");
		return n;
	}
	if (tok_is(t, K_NAME, "generation")) { /* transformers' AssistantTracker: body as is */
		static const char *const END_GEN[] = { "endgeneration" };
		expect_bend(ps);
		struct node *n = parse_body(ps, END_GEN, 1);
		end_tag(ps, "endgeneration");
		return n;
	}
	fail(ps, t->off, PT_E_UNSUPPORTED, "encountered unknown tag '%.*s'",
	     (int)(t->n > 40 ? 40 : t->n), t->p);
}

static struct node *parse_body(struct parser *ps, const char *const *ends, size_t nends)
{
	struct nlist stmts = { 0 };
	size_t off = cur(ps)->off;
	enter(ps, off);
	for (;;) {
		struct token *t = cur(ps);
		if (t->k == K_EOF) {
			if (nends)
				fail(ps, t->off, PT_E_FORMAT,
				     "unexpected end of template, expected '%s'", ends[nends - 1]);
			break;
		}
		if (t->k == K_TEXT) {
			struct node *n = mk(ps, S_TEXT, t->off);
			n->val = tv_str(t->p, t->n);
			nl_push(ps, &stmts, n);
			next(ps);
		} else if (t->k == K_VBEGIN) {
			next(ps);
			struct node *n = mk(ps, S_OUT, t->off);
			n->a = parse_tuple_expr(ps, true);
			if (cur(ps)->k != K_VEND)
				fail(ps, cur(ps)->off, PT_E_FORMAT, "expected end of print statement, got %s",
				     describe(cur(ps)));
			next(ps);
			nl_push(ps, &stmts, n);
		} else if (t->k == K_BBEGIN) {
			next(ps);
			for (size_t i = 0; i < nends; i++)
				if (is_name(ps, ends[i]))
					goto done;
			nl_push(ps, &stmts, parse_statement(ps));
		} else {
			fail(ps, t->off, PT_E_FORMAT, "unexpected %s", describe(t));
		}
	}
done:
	ps->depth--;
	struct node *b = mk(ps, S_BODY, off);
	b->list = stmts.v;
	b->n = stmts.n;
	return b;
}

/* jinja2 resolves filter and test names at compile time, except inside if statements and
 * inline if expressions ("soft" frames), where an unknown name fails only when evaluated. */
static void check_names(struct parser *ps, const struct node *n, bool soft)
{
	if (!n)
		return;
	if ((n->kind == E_FILTER || n->kind == E_TEST) && n->soft && !soft)
		fail(ps, n->off, PT_E_UNSUPPORTED, "no %s named '%.*s'",
		     n->kind == E_TEST ? "test" : "filter",
		     (int)(n->name_len > 40 ? 40 : n->name_len), n->name);
	bool inner = soft;
	if (n->kind == S_IF || n->kind == E_COND)
		inner = true;
	if (n->kind == S_FOR) {
		check_names(ps, n->b, soft);
		check_names(ps, n->c, false);
		check_names(ps, n->d, false);
		for (size_t i = 0; i < n->n2; i++)
			check_names(ps, n->list2[i], false);
		return;
	}
	if (n->kind == S_MACRO || n->kind == S_FILTERBLOCK || n->kind == S_SETBLOCK)
		inner = n->kind == S_SETBLOCK ? soft : false;
	check_names(ps, n->a, inner);
	check_names(ps, n->b, inner);
	check_names(ps, n->c, inner);
	check_names(ps, n->d, inner);
	for (size_t i = 0; i < n->n; i++)
		check_names(ps, n->list[i], inner);
	if (n->kind == E_DICT || n->kind == E_COMPARE)
		for (size_t i = 0; i < n->n2; i++)
			check_names(ps, n->list2[i], inner);
}

enum pt_status tm_parse(struct pt_tmpl *t, struct pt_error *err)
{
	struct parser *ps = tm_arena_alloc(&t->arena, sizeof *ps);
	if (!ps)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	ps->t = t;
	ps->err = err;
	if (setjmp(ps->jb))
		return ps->status;
	lex(ps);
	t->root = parse_body(ps, NULL, 0);
	check_names(ps, t->root, false);
	return PT_OK;
}
