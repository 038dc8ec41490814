/* tmpl_value.c - template values: arena, constructors, Python-compatible truthiness,
 * equality, ordering, str()/repr() and json.dumps formatting, JSON input conversion. */
#include "token/tmpl_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	max_align_t data[];
};

void *tm_arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *ch = a->head;
	size_t need = (n + 15) & ~(size_t)15;
	if (need < n)
		return NULL;
	if (!ch || ch->size - ch->used < need) {
		size_t size = need > 64 * 1024 ? need : 64 * 1024;
		uint64_t total;
		if (pt_add_overflow(a->used, size, &total) || (a->limit && total > a->limit)) {
			a->over_limit = true;
			return NULL;
		}
		ch = pt_malloc(sizeof *ch + size);
		if (!ch)
			return NULL;
		ch->next = a->head;
		ch->size = size;
		ch->used = 0;
		a->head = ch;
		a->used = total;
	}
	void *p = (char *)ch->data + ch->used;
	ch->used += need;
	memset(p, 0, n);
	return p;
}

void tm_arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *next = a->head->next;
		pt_free(a->head);
		a->head = next;
	}
	a->used = 0;
}

void tm_line_col(const char *src, size_t len, size_t off, unsigned *line, unsigned *col)
{
	unsigned l = 1, c = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (src[i] == '\n') {
			l++;
			c = 1;
		} else {
			c++;
		}
	}
	*line = l;
	*col = c;
}

_Noreturn void tm_fail(struct rctx *c, const struct node *at, enum pt_status code,
		       const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (at) {
		unsigned line, col;
		tm_line_col(c->t->src, c->t->len, at->off, &line, &col);
		pt_error_set(c->err, code, "template: %s at line %u, column %u", msg, line, col);
		if (c->err && c->err->code == code)
			c->err->offset = at->off;
	} else {
		pt_error_set(c->err, code, "template: %s", msg);
	}
	c->status = code;
	longjmp(c->jb, 1);
}

_Noreturn void tm_fail_raw(struct rctx *c, enum pt_status code, const char *msg)
{
	pt_error_set(c->err, code, "%s", msg);
	c->status = code;
	longjmp(c->jb, 1);
}

void *tm_alloc(struct rctx *c, size_t n)
{
	void *p = tm_arena_alloc(&c->arena, n);
	if (!p) {
		if (c->arena.over_limit)
			tm_fail(c, NULL, PT_E_LIMIT, "render memory limit of %llu bytes exceeded",
				(unsigned long long)c->lim.max_memory);
		tm_fail(c, NULL, PT_E_NOMEM, "out of memory");
	}
	return p;
}

void tm_buf_put(struct rctx *c, struct sbuf *b, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (n > c->lim.max_output || b->n > c->lim.max_output - n)
		tm_fail(c, NULL, PT_E_LIMIT, "output or string longer than %llu bytes",
			(unsigned long long)c->lim.max_output);
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->n + n)
			cap *= 2;
		char *np = tm_alloc(c, cap);
		if (b->n)
			memcpy(np, b->p, b->n);
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

void tm_buf_putc(struct rctx *c, struct sbuf *b, char ch)
{
	tm_buf_put(c, b, &ch, 1);
}

/* ---- constructors ---------------------------------------------------------------------- */
struct tv tv_undef(const char *hint, size_t n)
{
	struct tv v = { .k = TV_UNDEF };
	v.u.s.p = hint;
	v.u.s.n = n;
	return v;
}
struct tv tv_none(void) { return (struct tv){ .k = TV_NONE }; }
struct tv tv_bool(bool b) { struct tv v = { .k = TV_BOOL }; v.u.b = b; return v; }
struct tv tv_int(int64_t i) { struct tv v = { .k = TV_INT }; v.u.i = i; return v; }
struct tv tv_float(double f) { struct tv v = { .k = TV_FLOAT }; v.u.f = f; return v; }
struct tv tv_str(const char *p, size_t n)
{
	struct tv v = { .k = TV_STR };
	v.u.s.p = n ? p : "";
	v.u.s.n = n;
	return v;
}
struct tv tv_cstr(const char *s) { return tv_str(s, strlen(s)); }
struct tv tv_strdup(struct rctx *c, const char *p, size_t n)
{
	if (n > c->lim.max_output)
		tm_fail(c, NULL, PT_E_LIMIT, "string longer than %llu bytes",
			(unsigned long long)c->lim.max_output);
	char *q = tm_alloc(c, n + 1);
	if (n)
		memcpy(q, p, n);
	return tv_str(q, n);
}

struct tv tv_list_new(struct rctx *c, size_t cap)
{
	struct tv v = { .k = TV_LIST };
	v.u.l = tm_alloc(c, sizeof *v.u.l);
	if (cap) {
		if (cap > SIZE_MAX / sizeof(struct tv) / 2)
			tm_fail(c, NULL, PT_E_LIMIT, "list too long");
		v.u.l->v = tm_alloc(c, cap * sizeof(struct tv));
		v.u.l->cap = cap;
	}
	return v;
}

void tv_list_push(struct rctx *c, struct tv *list, struct tv x)
{
	struct tv_list *l = list->u.l;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		if (cap > SIZE_MAX / sizeof(struct tv) / 2)
			tm_fail(c, NULL, PT_E_LIMIT, "list too long");
		struct tv *nv = tm_alloc(c, cap * sizeof *nv);
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof *nv);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = x;
}

struct tv tv_dict_new(struct rctx *c, size_t cap)
{
	struct tv v = { .k = TV_DICT };
	v.u.d = tm_alloc(c, sizeof *v.u.d);
	(void)cap;
	return v;
}

static bool key_eq(struct tv a, struct tv b)
{
	if (a.k == TV_STR && b.k == TV_STR)
		return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
	return tv_equal(a, b);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* Hash consistent with key_eq for str, None and numbers (1 == 1.0 == True hash alike);
 * false for other keys, which are then found by a linear scan. */
static bool key_hash(struct tv k, uint64_t *h)
{
	switch (k.k) {
	case TV_STR: {
		uint64_t x = 0xcbf29ce484222325ull;
		for (size_t i = 0; i < k.u.s.n; i++)
			x = (x ^ (unsigned char)k.u.s.p[i]) * 0x100000001b3ull;
		*h = x;
		return true;
	}
	case TV_NONE: *h = 0x5bd1e995u; return true;
	case TV_BOOL: *h = mix64((uint64_t)k.u.b); return true;
	case TV_INT: *h = mix64((uint64_t)k.u.i); return true;
	case TV_FLOAT:
		if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18) {
			*h = mix64((uint64_t)(int64_t)k.u.f);
		} else {
			uint64_t bits;
			memcpy(&bits, &k.u.f, sizeof bits);
			*h = mix64(bits);
		}
		return true;
	default: return false;
	}
}

static void index_put(struct tv_dict *d, size_t entry)
{
	uint64_t h;
	if (!key_hash(d->keys[entry], &h))
		return;
	size_t mask = d->icap - 1, i = (size_t)h & mask;
	while (d->index[i])
		i = (i + 1) & mask;
	d->index[i] = (uint32_t)entry + 1;
}

static void index_rebuild(struct rctx *c, struct tv_dict *d)
{
	size_t icap = 64;
	while (icap < d->n * 2 + 2)
		icap *= 2;
	d->index = tm_alloc(c, icap * sizeof *d->index);
	d->icap = icap;
	for (size_t i = 0; i < d->n; i++)
		index_put(d, i);
}

/* Entry of key, or SIZE_MAX. */
static size_t dict_find(const struct tv_dict *d, struct tv key)
{
	uint64_t h;
	if (d->index && key_hash(key, &h)) {
		size_t mask = d->icap - 1, i = (size_t)h & mask;
		for (; d->index[i]; i = (i + 1) & mask)
			if (key_eq(d->keys[d->index[i] - 1], key))
				return d->index[i] - 1;
		return SIZE_MAX;
	}
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->keys[i], key))
			return i;
	return SIZE_MAX;
}

void tv_dict_set(struct rctx *c, struct tv_dict *d, struct tv key, struct tv v)
{
	size_t at = dict_find(d, key);
	if (at != SIZE_MAX) {
		d->vals[at] = v;
		return;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		if (cap > UINT32_MAX / 4)
			tm_fail(c, NULL, PT_E_LIMIT, "dict too large");
		struct tv *nk = tm_alloc(c, cap * sizeof *nk), *nv = tm_alloc(c, cap * sizeof *nv);
		if (d->n) {
			memcpy(nk, d->keys, d->n * sizeof *nk);
			memcpy(nv, d->vals, d->n * sizeof *nv);
		}
		d->keys = nk;
		d->vals = nv;
		d->cap = cap;
	}
	d->keys[d->n] = key;
	d->vals[d->n] = v;
	d->n++;
	if (d->n > 16 && (!d->index || d->n * 2 > d->icap))
		index_rebuild(c, d);
	else if (d->index)
		index_put(d, d->n - 1);
}

bool tv_dict_get(const struct tv_dict *d, struct tv key, struct tv *out)
{
	size_t at = dict_find(d, key);
	if (at == SIZE_MAX)
		return false;
	*out = d->vals[at];
	return true;
}

bool tv_dict_gets(const struct tv_dict *d, const char *key, size_t n, struct tv *out)
{
	return tv_dict_get(d, tv_str(key, n), out);
}

/* ---- Python semantics ------------------------------------------------------------------ */
bool tv_truthy(struct tv v)
{
	switch (v.k) {
	case TV_UNDEF: case TV_NONE: return false;
	case TV_BOOL: return v.u.b;
	case TV_INT: return v.u.i != 0;
	case TV_FLOAT: return v.u.f != 0.0;
	case TV_STR: return v.u.s.n != 0;
	case TV_LIST: return v.lazy == LZ_GEN || v.u.l->n != 0; /* a generator is always true */
	case TV_DICT: return v.u.d->n != 0;
	default: return true;
	}
}

bool tv_is_number(struct tv v)
{
	return v.k == TV_INT || v.k == TV_FLOAT || v.k == TV_BOOL;
}

double tv_as_double(struct tv v)
{
	if (v.k == TV_FLOAT)
		return v.u.f;
	if (v.k == TV_BOOL)
		return v.u.b;
	return (double)v.u.i;
}

static int64_t as_int(struct tv v)
{
	return v.k == TV_BOOL ? (int64_t)v.u.b : v.u.i;
}

bool tv_equal(struct tv a, struct tv b)
{
	if (tv_is_number(a) && tv_is_number(b)) {
		if (a.k != TV_FLOAT && b.k != TV_FLOAT)
			return as_int(a) == as_int(b);
		return tv_as_double(a) == tv_as_double(b);
	}
	if (a.k != b.k)
		return false;
	switch (a.k) {
	case TV_UNDEF: case TV_NONE: return true;
	case TV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
	case TV_LIST:
		if (a.lazy || b.lazy) /* generators and views: identity (views compare loosely in Python) */
			return a.u.l == b.u.l && a.lazy == b.lazy;
		if (a.u.l->n != b.u.l->n || a.tuple != b.tuple)
			return false;
		for (size_t i = 0; i < a.u.l->n; i++)
			if (!tv_equal(a.u.l->v[i], b.u.l->v[i]))
				return false;
		return true;
	case TV_DICT:
		if (a.u.d->n != b.u.d->n)
			return false;
		for (size_t i = 0; i < a.u.d->n; i++) {
			struct tv o;
			if (!tv_dict_get(b.u.d, a.u.d->keys[i], &o) || !tv_equal(a.u.d->vals[i], o))
				return false;
		}
		return true;
	case TV_NS: return a.u.d == b.u.d;
	case TV_MACRO: return a.u.mc == b.u.mc;
	case TV_LOOP: return a.u.lp == b.u.lp;
	case TV_FUNC: return a.u.fn == b.u.fn;
	default: return false;
	}
}

const char *tv_type_name(struct tv v)
{
	static const char *const names[] = { "Undefined", "NoneType", "bool", "int", "float",
					     "str", "list", "dict", "Namespace", "Macro",
					     "function", "builtin_function_or_method",
					     "LoopContext" };
	static const char *const lazy[] = { "list", "generator", "dict_items", "dict_keys", "dict_values" };
	if (v.k == TV_LIST && v.tuple)
		return "tuple";
	if (v.k == TV_LIST && v.lazy)
		return lazy[v.lazy];
	return names[v.k];
}

int tv_compare(struct rctx *c, const struct node *at, struct tv a, struct tv b)
{
	if (tv_is_number(a) && tv_is_number(b)) {
		if (a.k != TV_FLOAT && b.k != TV_FLOAT)
			return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
		double x = tv_as_double(a), y = tv_as_double(b);
		return (x > y) - (x < y);
	}
	if (a.k == TV_STR && b.k == TV_STR) {
		size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
		int r = memcmp(a.u.s.p, b.u.s.p, n);
		if (r)
			return r;
		return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
	}
	if (a.k == TV_LIST && b.k == TV_LIST && a.tuple == b.tuple && !a.lazy && !b.lazy) {
		for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
			if (!tv_equal(a.u.l->v[i], b.u.l->v[i]))
				return tv_compare(c, at, a.u.l->v[i], b.u.l->v[i]);
		}
		return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
	}
	if (a.k == TV_UNDEF || b.k == TV_UNDEF) {
		struct tv u = a.k == TV_UNDEF ? a : b;
		tm_fail(c, at, PT_E_FORMAT, "'%.*s' is undefined", (int)u.u.s.n,
			u.u.s.p ? u.u.s.p : "");
	}
	tm_fail(c, at, PT_E_FORMAT, "'<' not supported between instances of '%s' and '%s'",
		tv_type_name(a), tv_type_name(b));
}

/* ---- formatting ------------------------------------------------------------------------ */
/* Python float repr: shortest round-trip digits; fixed notation for 1e-4 <= |x| < 1e16. */
void tv_float_repr(double f, char *buf, size_t n)
{
	if (isnan(f)) {
		snprintf(buf, n, "nan");
		return;
	}
	if (isinf(f)) {
		snprintf(buf, n, f < 0 ? "-inf" : "inf");
		return;
	}
	char e[40];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	/* e = [-]d[.ddd]e[+-]XX */
	char digits[24];
	size_t nd = 0;
	const char *p = e;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	int exp = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	char out[64];
	size_t o = 0;
	if (neg)
		out[o++] = '-';
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			out[o++] = '0';
			out[o++] = '.';
			for (int i = 0; i < -exp - 1; i++)
				out[o++] = '0';
			memcpy(out + o, digits, nd);
			o += nd;
		} else {
			for (int i = 0; i <= exp; i++)
				out[o++] = (size_t)i < nd ? digits[i] : '0';
			out[o++] = '.';
			if ((size_t)exp + 1 < nd) {
				memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1);
				o += nd - (size_t)exp - 1;
			} else {
				out[o++] = '0';
			}
		}
		out[o] = 0;
	} else {
		out[o++] = digits[0];
		if (nd > 1) {
			out[o++] = '.';
			memcpy(out + o, digits + 1, nd - 1);
			o += nd - 1;
		}
		snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	}
	snprintf(buf, n, "%s", out);
}

static void put_s(struct rctx *c, struct sbuf *b, const char *s)
{
	tm_buf_put(c, b, s, strlen(s));
}

/* Code points Python's str.isprintable() rejects among the ones chat text may carry:
 * C1 controls, no-break/other spaces, soft hyphen, zero-width and bidi formatting marks,
 * line/paragraph separators, BOM.  repr() writes them escaped. */
static bool py_unprintable(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
	       (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF;
}

static size_t utf8_decode(const char *p, size_t n, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)p;
	if ((s[0] & 0xE0) == 0xC0 && n >= 2) {
		*cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
		return 2;
	}
	if ((s[0] & 0xF0) == 0xE0 && n >= 3) {
		*cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		return 3;
	}
	*cp = s[0];
	return 1;
}

static void repr_str(struct rctx *c, struct sbuf *b, const char *p, size_t n)
{
	bool sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
	char q = (sq && !dq) ? '"' : '\'';
	tm_buf_putc(c, b, q);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		char tmp[8];
		if (ch == (unsigned char)q || ch == '\\') {
			tm_buf_putc(c, b, '\\');
			tm_buf_putc(c, b, (char)ch);
		} else if (ch == '\n') {
			put_s(c, b, "\\n");
		} else if (ch == '\r') {
			put_s(c, b, "\\r");
		} else if (ch == '\t') {
			put_s(c, b, "\\t");
		} else if (ch < 0x20 || ch == 0x7f) {
			snprintf(tmp, sizeof tmp, "\\x%02x", ch);
			put_s(c, b, tmp);
		} else if (ch >= 0xC2 && ch <= 0xEF) {
			uint32_t cp;
			size_t l = utf8_decode(p + i, n - i, &cp);
			if (l > 1 && py_unprintable(cp)) {
				snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02x" : "\\u%04x", cp);
				put_s(c, b, tmp);
			} else {
				tm_buf_put(c, b, p + i, l);
			}
			i += l - 1;
		} else {
			tm_buf_putc(c, b, (char)ch);
		}
	}
	tm_buf_putc(c, b, q);
}

static void check_depth(struct rctx *c, int level, const struct node *at)
{
	if (level > PT_JSON_MAX_DEPTH)
		tm_fail(c, at, PT_E_LIMIT, "value nested deeper than %d levels", PT_JSON_MAX_DEPTH);
}

/* Containers being printed, innermost first: a namespace can contain itself, and Python
 * prints such a cycle as {...}. */
struct repr_guard {
	const void *p;
	const struct repr_guard *up;
};

static bool on_stack(const struct repr_guard *g, const void *p)
{
	for (; g; g = g->up)
		if (g->p == p)
			return true;
	return false;
}

static void repr_level(struct rctx *c, struct sbuf *b, struct tv v, const struct node *at,
		       int level, const struct repr_guard *g)
{
	check_depth(c, level, at);
	if (v.k == TV_STR) {
		repr_str(c, b, v.u.s.p, v.u.s.n);
	} else if (v.k == TV_LIST && v.lazy == LZ_GEN) {
		tm_fail(c, at, PT_E_UNSUPPORTED, "cannot print a generator (jinja2 prints its address); add |list");
	} else if (v.k == TV_LIST && v.lazy) {
		put_s(c, b, tv_type_name(v));
		tm_buf_putc(c, b, '(');
		struct tv plain = v;
		plain.lazy = LZ_NONE;
		repr_level(c, b, plain, at, level, g);
		tm_buf_putc(c, b, ')');
	} else if (v.k == TV_LIST) {
		struct repr_guard me = { v.u.l, g };
		if (on_stack(g, v.u.l)) {
			put_s(c, b, v.tuple ? "(...)" : "[...]");
			return;
		}
		tm_buf_putc(c, b, v.tuple ? '(' : '[');
		for (size_t i = 0; i < v.u.l->n; i++) {
			if (i)
				put_s(c, b, ", ");
			repr_level(c, b, v.u.l->v[i], at, level + 1, &me);
		}
		if (v.tuple && v.u.l->n == 1)
			tm_buf_putc(c, b, ',');
		tm_buf_putc(c, b, v.tuple ? ')' : ']');
	} else if (v.k == TV_DICT || v.k == TV_NS) {
		struct repr_guard me = { v.u.d, g };
		if (v.k == TV_NS)
			put_s(c, b, "<Namespace ");
		if (on_stack(g, v.u.d)) {
			put_s(c, b, "{...}");
		} else {
			tm_buf_putc(c, b, '{');
			for (size_t i = 0; i < v.u.d->n; i++) {
				if (i)
					put_s(c, b, ", ");
				repr_level(c, b, v.u.d->keys[i], at, level + 1, &me);
				put_s(c, b, ": ");
				repr_level(c, b, v.u.d->vals[i], at, level + 1, &me);
			}
			tm_buf_putc(c, b, '}');
		}
		if (v.k == TV_NS)
			tm_buf_putc(c, b, '>');
	} else {
		tv_str_to(c, b, v, at);
	}
}

void tv_repr_to(struct rctx *c, struct sbuf *b, struct tv v, const struct node *at)
{
	repr_level(c, b, v, at, 0, NULL);
}

void tv_str_to(struct rctx *c, struct sbuf *b, struct tv v, const struct node *at)
{
	char tmp[64];
	switch (v.k) {
	case TV_UNDEF: return;
	case TV_NONE: put_s(c, b, "None"); return;
	case TV_BOOL: put_s(c, b, v.u.b ? "True" : "False"); return;
	case TV_INT:
		snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
		put_s(c, b, tmp);
		return;
	case TV_FLOAT:
		tv_float_repr(v.u.f, tmp, sizeof tmp);
		put_s(c, b, tmp);
		return;
	case TV_STR: tm_buf_put(c, b, v.u.s.p, v.u.s.n); return;
	case TV_LIST: case TV_DICT: case TV_NS: repr_level(c, b, v, at, 0, NULL); return;
	case TV_MACRO:
		snprintf(tmp, sizeof tmp, "<Macro '%.*s'>",
			 (int)(v.u.mc->m->name_len > 40 ? 40 : v.u.mc->m->name_len), v.u.mc->m->name);
		put_s(c, b, tmp);
		return;
	default: put_s(c, b, "<function>"); return;
	}
}

struct tv tv_to_string(struct rctx *c, struct tv v, const struct node *at)
{
	if (v.k == TV_STR)
		return v;
	struct sbuf b = { 0 };
	tv_str_to(c, &b, v, at);
	return tv_str(b.p, b.n);
}

static void json_str(struct rctx *c, struct sbuf *b, const char *p, size_t n)
{
	tm_buf_putc(c, b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		char tmp[8];
		switch (ch) {
		case '"': put_s(c, b, "\\\""); break;
		case '\\': put_s(c, b, "\\\\"); break;
		case '\n': put_s(c, b, "\\n"); break;
		case '\r': put_s(c, b, "\\r"); break;
		case '\t': put_s(c, b, "\\t"); break;
		case '\b': put_s(c, b, "\\b"); break;
		case '\f': put_s(c, b, "\\f"); break;
		default:
			if (ch < 0x20) {
				snprintf(tmp, sizeof tmp, "\\u%04x", ch);
				put_s(c, b, tmp);
			} else {
				tm_buf_putc(c, b, (char)ch);
			}
		}
	}
	tm_buf_putc(c, b, '"');
}

static void json_newline(struct rctx *c, struct sbuf *b, int indent, int level)
{
	tm_buf_putc(c, b, '\n');
	for (int i = 0; i < indent * level; i++)
		tm_buf_putc(c, b, ' ');
}

static void json_key(struct rctx *c, struct sbuf *b, struct tv k, const struct node *at)
{
	char tmp[64];
	switch (k.k) {
	case TV_STR: json_str(c, b, k.u.s.p, k.u.s.n); return;
	case TV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); break;
	case TV_BOOL: snprintf(tmp, sizeof tmp, "\"%s\"", k.u.b ? "true" : "false"); break;
	case TV_NONE: snprintf(tmp, sizeof tmp, "\"null\""); break;
	case TV_FLOAT: {
		char f[40];
		tv_float_repr(k.u.f, f, sizeof f);
		snprintf(tmp, sizeof tmp, "\"%s\"", f);
		break;
	}
	default:
		tm_fail(c, at, PT_E_FORMAT, "keys must be str, int, float, bool or None, not %s",
			tv_type_name(k));
	}
	put_s(c, b, tmp);
}

static int cmp_keys(const void *x, const void *y)
{
	const struct tv *a = *(const struct tv *const *)x, *b = *(const struct tv *const *)y;
	size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
	int r = memcmp(a->u.s.p, b->u.s.p, n);
	return r ? r : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
}

static void json_dict(struct rctx *c, struct sbuf *b, struct tv_dict *d, int indent,
		      const char *isep, const char *ksep, bool sort_keys, int level,
		      const struct node *at)
{
	if (d->n == 0) {
		put_s(c, b, "{}");
		return;
	}
	size_t *order = tm_alloc(c, d->n * sizeof *order);
	for (size_t i = 0; i < d->n; i++)
		order[i] = i;
	if (sort_keys) {
		const struct tv **ks = tm_alloc(c, d->n * sizeof *ks);
		for (size_t i = 0; i < d->n; i++) {
			if (d->keys[i].k != TV_STR)
				tm_fail(c, at, PT_E_FORMAT, "sort_keys needs string keys");
			ks[i] = &d->keys[i];
		}
		qsort(ks, d->n, sizeof *ks, cmp_keys);
		for (size_t i = 0; i < d->n; i++)
			order[i] = (size_t)(ks[i] - d->keys);
	}
	tm_buf_putc(c, b, '{');
	for (size_t i = 0; i < d->n; i++) {
		if (i)
			put_s(c, b, isep);
		if (indent >= 0)
			json_newline(c, b, indent, level + 1);
		json_key(c, b, d->keys[order[i]], at);
		put_s(c, b, ksep);
		tv_json_to(c, b, d->vals[order[i]], indent, isep, ksep, sort_keys, level + 1, at);
	}
	if (indent >= 0)
		json_newline(c, b, indent, level);
	tm_buf_putc(c, b, '}');
}

void tv_json_to(struct rctx *c, struct sbuf *b, struct tv v, int indent, const char *isep,
		const char *ksep, bool sort_keys, int level, const struct node *at)
{
	char tmp[64];
	check_depth(c, level, at);
	switch (v.k) {
	case TV_NONE: put_s(c, b, "null"); return;
	case TV_BOOL: put_s(c, b, v.u.b ? "true" : "false"); return;
	case TV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); put_s(c, b, tmp); return;
	case TV_FLOAT:
		if (isnan(v.u.f))
			put_s(c, b, "NaN");
		else if (isinf(v.u.f))
			put_s(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
		else {
			tv_float_repr(v.u.f, tmp, sizeof tmp);
			put_s(c, b, tmp);
		}
		return;
	case TV_STR: json_str(c, b, v.u.s.p, v.u.s.n); return;
	case TV_LIST:
		if (v.lazy)
			tm_fail(c, at, PT_E_FORMAT, "Object of type %s is not JSON serializable",
				tv_type_name(v));
		if (v.u.l->n == 0) {
			put_s(c, b, "[]");
			return;
		}
		tm_buf_putc(c, b, '[');
		for (size_t i = 0; i < v.u.l->n; i++) {
			if (i)
				put_s(c, b, isep);
			if (indent >= 0)
				json_newline(c, b, indent, level + 1);
			tv_json_to(c, b, v.u.l->v[i], indent, isep, ksep, sort_keys, level + 1, at);
		}
		if (indent >= 0)
			json_newline(c, b, indent, level);
		tm_buf_putc(c, b, ']');
		return;
	case TV_DICT:
		json_dict(c, b, v.u.d, indent, isep, ksep, sort_keys, level, at);
		return;
	default:
		tm_fail(c, at, PT_E_FORMAT, "Object of type %s is not JSON serializable",
			tv_type_name(v));
	}
}

struct tv tv_from_cjson(struct rctx *c, const cJSON *j, int depth)
{
	if (depth > PT_JSON_MAX_DEPTH)
		tm_fail(c, NULL, PT_E_LIMIT, "variables nested deeper than %d levels",
			PT_JSON_MAX_DEPTH);
	if (!j || cJSON_IsNull(j))
		return tv_none();
	if (cJSON_IsBool(j))
		return tv_bool(cJSON_IsTrue(j));
	if (cJSON_IsNumber(j)) {
		double d = j->valuedouble;
		const char *txt = j->valuestring; /* source spelling, when the caller kept it */
		if (txt && !strpbrk(txt, ".eE")) {
			errno = 0;
			long long v = strtoll(txt, NULL, 10);
			if (errno == ERANGE)
				tm_fail(c, NULL, PT_E_UNSUPPORTED,
					"integer %.40s in the variables is outside the 64-bit range", txt);
			return tv_int(v);
		}
		if (txt)
			return tv_float(d);
		if (d == floor(d) && fabs(d) < 9007199254740992.0)
			return tv_int((int64_t)d);
		return tv_float(d);
	}
	if (cJSON_IsString(j))
		return tv_strdup(c, j->valuestring, strlen(j->valuestring));
	if (cJSON_IsArray(j)) {
		struct tv l = tv_list_new(c, 0);
		for (const cJSON *e = j->child; e; e = e->next)
			tv_list_push(c, &l, tv_from_cjson(c, e, depth + 1));
		return l;
	}
	if (cJSON_IsObject(j)) {
		struct tv d = tv_dict_new(c, 0);
		for (const cJSON *e = j->child; e; e = e->next)
			tv_dict_set(c, d.u.d, tv_strdup(c, e->string, strlen(e->string)),
				    tv_from_cjson(c, e, depth + 1));
		return d;
	}
	return tv_none();
}

/* ---- UTF-8 ----------------------------------------------------------------------------- */
size_t tv_utf8_len(const char *p, size_t n)
{
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)p[i] & 0xC0) != 0x80)
			cnt++;
	return cnt;
}

size_t tv_utf8_offset(const char *p, size_t n, size_t idx)
{
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++) {
		if (((unsigned char)p[i] & 0xC0) != 0x80) {
			if (cnt == idx)
				return i;
			cnt++;
		}
	}
	return n;
}

struct tv tv_iterate(struct rctx *c, struct tv v, const struct node *at)
{
	switch (v.k) {
	case TV_UNDEF: return tv_list_new(c, 0);
	case TV_LIST:
		if (v.u.l->poison)
			tm_fail_raw(c, v.u.l->poison_st, v.u.l->poison);
		return v;
	case TV_DICT: {
		struct tv l = tv_list_new(c, v.u.d->n);
		for (size_t i = 0; i < v.u.d->n; i++)
			tv_list_push(c, &l, v.u.d->keys[i]);
		return l;
	}
	case TV_STR: {
		struct tv l = tv_list_new(c, v.u.s.n);
		size_t i = 0;
		while (i < v.u.s.n) {
			size_t j = i + 1;
			while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80)
				j++;
			tv_list_push(c, &l, tv_str(v.u.s.p + i, j - i));
			i = j;
		}
		return l;
	}
	default:
		tm_fail(c, at, PT_E_FORMAT, "'%s' object is not iterable", tv_type_name(v));
	}
}
