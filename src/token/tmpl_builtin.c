/* tmpl_builtin.c - jinja2 filters, tests, global functions and the Python str/dict/list
 * methods the immutable sandbox allows.  Case mapping (upper/lower/title/capitalize) is
 * ASCII-only; whitespace (strip/split/trim) uses Python's full str.isspace set. */
#include "token/tmpl_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"

#define STREQ(a, b) (strcmp((a), (b)) == 0)

static bool name_in(const char *name, size_t n, const char *const *tbl)
{
	for (; *tbl; tbl++)
		if (strlen(*tbl) == n && memcmp(*tbl, name, n) == 0)
			return true;
	return false;
}

static const char *const FILTERS[] = {
	"abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape",
	"first", "float", "forceescape", "indent", "int", "items", "join", "last", "length",
	"list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse",
	"round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson",
	"trim", "unique", "upper", "wordcount", NULL,
};
static const char *const TESTS[] = {
	"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped",
	"even", "false", "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer",
	"iterable", "le", "<=", "lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none",
	"number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper", NULL,
};

bool tm_filter_known(const char *name, size_t n) { return name_in(name, n, FILTERS); }
bool tm_test_known(const char *name, size_t n) { return name_in(name, n, TESTS); }

/* ---- UTF-8 and whitespace -------------------------------------------------------------- */
static uint32_t decode(const char *p, size_t n, size_t *len)
{
	const unsigned char *s = (const unsigned char *)p;
	if (s[0] < 0x80 || n < 2) {
		*len = 1;
		return s[0];
	}
	if ((s[0] & 0xE0) == 0xC0) {
		*len = 2;
		return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
	}
	if ((s[0] & 0xF0) == 0xE0 && n >= 3) {
		*len = 3;
		return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
	}
	if ((s[0] & 0xF8) == 0xF0 && n >= 4) {
		*len = 4;
		return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
		       ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
	}
	*len = 1;
	return s[0];
}

static bool py_space(uint32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
	       cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
	       cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Length of the last code point of p[0..n). */
static size_t last_cp(const char *p, size_t n)
{
	size_t k = n - 1;
	while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80 && n - k < 4)
		k--;
	return n - k;
}

static bool in_set(uint32_t cp, struct tv chars)
{
	if (chars.k != TV_STR)
		return py_space(cp);
	for (size_t i = 0; i < chars.u.s.n;) {
		size_t l;
		if (decode(chars.u.s.p + i, chars.u.s.n - i, &l) == cp)
			return true;
		i += l;
	}
	return false;
}

static struct tv do_strip(struct tv s, struct tv chars, bool left, bool right)
{
	const char *p = s.u.s.p;
	size_t n = s.u.s.n;
	while (left && n > 0) {
		size_t l;
		if (!in_set(decode(p, n, &l), chars))
			break;
		p += l;
		n -= l;
	}
	while (right && n > 0) {
		size_t l = last_cp(p, n), l2;
		if (!in_set(decode(p + n - l, l, &l2), chars))
			break;
		n -= l;
	}
	return tv_str(p, n);
}

/* Simple (one code point) case mappings for ASCII, Latin-1, Latin Extended-A, Greek and
 * Cyrillic; other scripts are unchanged.  Multi-character results (ß -> SS, ŉ, İ) are in
 * case_special. */
static uint32_t cp_upper(uint32_t c)
{
	if (c >= 'a' && c <= 'z') return c - 32;
	if (c < 0xB5) return c;
	if (c == 0xB5) return 0x39C;
	if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
	if (c == 0xFF) return 0x178;
	if (c >= 0x100 && c <= 0x17F) {
		if (c == 0x131) return 'I';
		if (c == 0x17F) return 'S';
		if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178) return c;
		bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
		return (c & 1) == (odd_upper ? 0u : 1u) ? c - 1 : c;
	}
	if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
	if (c == 0x3C2) return 0x3A3;
	if (c == 0x3AC) return 0x386;
	if (c >= 0x3AD && c <= 0x3AF) return c - 37;
	if (c == 0x3CC) return 0x38C;
	if (c == 0x3D7) return 0x3CF;
	if (c == 0x3CD || c == 0x3CE) return c - 63;
	if (c >= 0x430 && c <= 0x44F) return c - 32;
	if (c >= 0x450 && c <= 0x45F) return c - 80;
	return c;
}

static uint32_t cp_lower(uint32_t c)
{
	if (c >= 'A' && c <= 'Z') return c + 32;
	if (c < 0xC0) return c;
	if (c <= 0xDE && c != 0xD7) return c + 32;
	if (c >= 0x100 && c <= 0x17F) {
		if (c == 0x178) return 0xFF;
		if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
		bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
		return (c & 1) == (odd_upper ? 1u : 0u) ? c + 1 : c;
	}
	if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
	if (c == 0x386) return 0x3AC;
	if (c >= 0x388 && c <= 0x38A) return c + 37;
	if (c == 0x38C) return 0x3CC;
	if (c == 0x3CF) return 0x3D7;
	if (c == 0x38E || c == 0x38F) return c + 63;
	if (c >= 0x410 && c <= 0x42F) return c + 32;
	if (c >= 0x400 && c <= 0x40F) return c + 80;
	return c;
}

/* Python's full mappings that expand to several code points. */
static const char *case_special(uint32_t c, bool upper)
{
	if (upper && c == 0xDF) return "SS";
	if (upper && c == 0x149) return "\xca\xbcN";
	if (!upper && c == 0x130) return "i\xcc\x87";
	return NULL;
}

static bool cp_cased(uint32_t c)
{
	return cp_upper(c) != c || cp_lower(c) != c || c == 0xDF || c == 0x138 || c == 0x149 ||
	       c == 0x130 || c == 0xAA || c == 0xBA;
}

static void put_cp(struct rctx *c, struct sbuf *b, uint32_t cp, bool upper)
{
	const char *sp = case_special(cp, upper);
	char tmp[4];
	if (sp) {
		tm_buf_put(c, b, sp, strlen(sp));
		return;
	}
	cp = upper ? cp_upper(cp) : cp_lower(cp);
	size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
	if (n == 1) {
		tmp[0] = (char)cp;
	} else if (n == 2) {
		tmp[0] = (char)(0xC0 | (cp >> 6));
		tmp[1] = (char)(0x80 | (cp & 0x3F));
	} else {
		tmp[0] = (char)(0xE0 | (cp >> 12));
		tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		tmp[2] = (char)(0x80 | (cp & 0x3F));
	}
	tm_buf_put(c, b, tmp, n);
}

static bool alpha(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

/* mode 0 upper, 1 lower, 2 str.capitalize, 3 str.title (cased after uncased starts a word),
 * 4 jinja2's title filter (words start after whitespace - ( { [ <). */
static struct tv map_case(struct rctx *c, struct tv s, int mode)
{
	struct sbuf b = { 0 };
	bool prev_cased = false, start = true, last_cased = false;
	for (size_t i = 0; i < s.u.s.n;) {
		size_t l;
		uint32_t cp = decode(s.u.s.p + i, s.u.s.n - i, &l);
		bool up_ = false;
		if (l > 1 && cp < 0x80) { /* not UTF-8: copy the byte */
			tm_buf_put(c, &b, s.u.s.p + i, 1);
			i++;
			continue;
		}
		switch (mode) {
		case 0: up_ = true; break;
		case 1: up_ = false; break;
		case 2: up_ = i == 0; break;
		case 3: up_ = !prev_cased; prev_cased = cp_cased(cp); break;
		default: {
			bool sep = py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
				   cp == '<';
			up_ = start;
			start = sep;
			if (sep) {
				tm_buf_put(c, &b, s.u.s.p + i, l);
				last_cased = false;
				i += l;
				continue;
			}
		}
		}
		bool next_cased = false;
		if (cp == 0x3A3 && !up_ && i + l < s.u.s.n) {
			size_t l2;
			next_cased = cp_cased(decode(s.u.s.p + i + l, s.u.s.n - i - l, &l2));
		}
		if (up_ && cp == 0xDF && (mode == 2 || mode == 3)) /* titlecase of sharp s */
			tm_buf_put(c, &b, "Ss", 2);
		else if (cp == 0x3A3 && !up_ && last_cased && !next_cased) /* final sigma */
			tm_buf_put(c, &b, "\xcf\x82", 2);
		else if (cp >= 0x10000 || (cp_upper(cp) == cp && cp_lower(cp) == cp &&
					   !case_special(cp, up_)))
			tm_buf_put(c, &b, s.u.s.p + i, l);
		else
			put_cp(c, &b, cp, up_);
		/* jinja2's title lowers item[1:] on its own: no cased context from item[0] */
		last_cased = mode == 4 && up_ ? false : cp_cased(cp);
		i += l;
	}
	return tv_str(b.p, b.n);
}

static struct tv jinja_title(struct rctx *c, struct tv s)
{
	return map_case(c, s, 4);
}

static bool find_sub(struct tv hay, struct tv nd, size_t from, size_t *at)
{
	if (from > hay.u.s.n || nd.u.s.n > hay.u.s.n - from)
		return false;
	const char *p = memmem(hay.u.s.p + from, hay.u.s.n - from, nd.u.s.p, nd.u.s.n);
	if (!p)
		return false;
	*at = (size_t)(p - hay.u.s.p);
	return true;
}

static struct tv do_replace(struct rctx *c, const struct node *at, struct tv s, struct tv old,
			    struct tv new_, int64_t count)
{
	struct sbuf b = { 0 };
	size_t i = 0, pos;
	int64_t done = 0;
	if (old.u.s.n == 0) { /* Python inserts between every character */
		struct tv chars = tv_iterate(c, s, at);
		for (size_t k = 0; k <= chars.u.l->n; k++) {
			if (count < 0 || done < count) {
				tm_buf_put(c, &b, new_.u.s.p, new_.u.s.n);
				done++;
			}
			if (k < chars.u.l->n)
				tm_buf_put(c, &b, chars.u.l->v[k].u.s.p, chars.u.l->v[k].u.s.n);
		}
		return tv_str(b.p, b.n);
	}
	while ((count < 0 || done < count) && find_sub(s, old, i, &pos)) {
		tm_buf_put(c, &b, s.u.s.p + i, pos - i);
		tm_buf_put(c, &b, new_.u.s.p, new_.u.s.n);
		i = pos + old.u.s.n;
		done++;
	}
	tm_buf_put(c, &b, s.u.s.p + i, s.u.s.n - i);
	return tv_str(b.p, b.n);
}

static struct tv do_split(struct rctx *c, const struct node *at, struct tv s, struct tv sep,
			  int64_t maxsplit, bool right)
{
	struct tv out = tv_list_new(c, 0);
	if (sep.k == TV_STR) {
		if (sep.u.s.n == 0)
			tm_fail(c, at, PT_E_FORMAT, "empty separator");
		if (right && maxsplit >= 0) { /* rsplit with a limit: split from the end */
			struct tv parts = tv_list_new(c, 0);
			size_t end = s.u.s.n;
			int64_t done = 0;
			while (done < maxsplit && end >= sep.u.s.n) {
				size_t k = end - sep.u.s.n + 1, found = SIZE_MAX;
				while (k-- > 0)
					if (memcmp(s.u.s.p + k, sep.u.s.p, sep.u.s.n) == 0) {
						found = k;
						break;
					}
				if (found == SIZE_MAX)
					break;
				tv_list_push(c, &parts, tv_str(s.u.s.p + found + sep.u.s.n, end - found - sep.u.s.n));
				end = found;
				done++;
			}
			tv_list_push(c, &out, tv_str(s.u.s.p, end));
			for (size_t k = parts.u.l->n; k-- > 0;)
				tv_list_push(c, &out, parts.u.l->v[k]);
			return out;
		}
		size_t i = 0, pos;
		int64_t done = 0;
		while ((maxsplit < 0 || done < maxsplit) && find_sub(s, sep, i, &pos)) {
			tv_list_push(c, &out, tv_str(s.u.s.p + i, pos - i));
			i = pos + sep.u.s.n;
			done++;
		}
		tv_list_push(c, &out, tv_str(s.u.s.p + i, s.u.s.n - i));
		return out;
	}
	/* whitespace split: runs of whitespace, no empty strings */
	const char *p = s.u.s.p;
	size_t n = s.u.s.n, i = 0;
	int64_t done = 0;
	if (right && maxsplit >= 0)
		tm_fail(c, at, PT_E_UNSUPPORTED, "rsplit() without a separator and with maxsplit");
	while (i < n) {
		size_t l;
		while (i < n && py_space(decode(p + i, n - i, &l)))
			i += l;
		if (i >= n)
			break;
		if (maxsplit >= 0 && done == maxsplit) {
			struct tv rest = do_strip(tv_str(p + i, n - i), tv_none(), false, true);
			tv_list_push(c, &out, rest);
			break;
		}
		size_t st = i;
		while (i < n && !py_space(decode(p + i, n - i, &l)))
			i += l;
		tv_list_push(c, &out, tv_str(p + st, i - st));
		done++;
	}
	return out;
}

/* ---- argument access ------------------------------------------------------------------- */
struct cargs {
	struct tv *a;
	size_t n;
	const char **kwn;
	struct tv *kwv;
	size_t nkw;
};

static bool arg(const struct cargs *ca, size_t i, const char *name, struct tv *out)
{
	if (i < ca->n) {
		*out = ca->a[i];
		return true;
	}
	for (size_t k = 0; k < ca->nkw; k++)
		if (name && STREQ(ca->kwn[k], name)) {
			*out = ca->kwv[k];
			return true;
		}
	return false;
}

static struct tv argd(const struct cargs *ca, size_t i, const char *name, struct tv def)
{
	struct tv v;
	return arg(ca, i, name, &v) ? v : def;
}

static void check_args(struct rctx *c, const struct node *at, const char *what,
		       const struct cargs *ca, size_t maxpos, const char *const *kwnames)
{
	if (ca->n > maxpos)
		tm_fail(c, at, PT_E_FORMAT, "%s takes at most %zu positional argument(s), got %zu", what,
			maxpos, ca->n);
	for (size_t k = 0; k < ca->nkw; k++) {
		bool ok = false;
		for (size_t j = 0; kwnames && kwnames[j]; j++)
			ok |= STREQ(kwnames[j], ca->kwn[k]);
		if (!ok)
			tm_fail(c, at, PT_E_FORMAT, "%s got an unexpected keyword argument '%s'", what,
				ca->kwn[k]);
	}
}

static struct tv need_str(struct rctx *c, const struct node *at, struct tv v, const char *what)
{
	if (v.k == TV_STR)
		return v;
	if (v.k == TV_UNDEF)
		tm_fail(c, at, PT_E_FORMAT, "%.*s", (int)v.u.s.n, v.u.s.p ? v.u.s.p : "undefined");
	tm_fail(c, at, PT_E_FORMAT, "%s expects a string, got %s", what, tv_type_name(v));
}

static int64_t need_int(struct rctx *c, const struct node *at, struct tv v, const char *what)
{
	if (v.k == TV_INT)
		return v.u.i;
	if (v.k == TV_BOOL)
		return v.u.b;
	tm_fail(c, at, PT_E_FORMAT, "%s expects an integer, got %s", what, tv_type_name(v));
}

/* ---- tests ----------------------------------------------------------------------------- */
static bool is_seq_like(struct tv x)
{
	return x.k == TV_STR || (x.k == TV_LIST && !x.lazy) || x.k == TV_DICT || x.k == TV_UNDEF;
}

static bool is_lower_or_upper(struct tv x, bool upper)
{
	bool cased = false;
	for (size_t i = 0; i < x.u.s.n;) {
		size_t l;
		uint32_t cp = decode(x.u.s.p + i, x.u.s.n - i, &l);
		bool is_up = cp_lower(cp) != cp || cp == 0x130, is_lo = cp_cased(cp) && !is_up;
		if ((upper && is_lo) || (!upper && is_up))
			return false;
		cased |= is_up || is_lo;
		i += l;
	}
	return cased;
}

bool tm_test(struct rctx *c, const struct node *at, const char *name, struct tv x,
	     struct tv *args, size_t nargs)
{
	struct tv a = nargs ? args[0] : tv_undef("test argument missing", 21);
	static const char *const unary[] = { "defined", "undefined", "none", "boolean", "true",
					     "false", "string", "number", "integer", "float",
					     "mapping", "iterable", "sequence", "callable", "escaped",
					     "lower", "upper", "odd", "even", NULL };
	if (nargs && name_in(name, strlen(name), unary))
		tm_fail(c, at, PT_E_FORMAT, "test_%s() takes 1 positional argument but %zu were given",
			name, nargs + 1);
	if (STREQ(name, "defined")) return x.k != TV_UNDEF;
	if (STREQ(name, "undefined")) return x.k == TV_UNDEF;
	if (STREQ(name, "none")) return x.k == TV_NONE;
	if (STREQ(name, "boolean")) return x.k == TV_BOOL;
	if (STREQ(name, "true")) return x.k == TV_BOOL && x.u.b;
	if (STREQ(name, "false")) return x.k == TV_BOOL && !x.u.b;
	if (STREQ(name, "string")) return x.k == TV_STR;
	if (STREQ(name, "number")) return tv_is_number(x);
	if (STREQ(name, "integer")) return x.k == TV_INT;
	if (STREQ(name, "float")) return x.k == TV_FLOAT;
	if (STREQ(name, "mapping")) return x.k == TV_DICT;
	if (STREQ(name, "iterable")) return is_seq_like(x) || x.k == TV_LIST;
	if (STREQ(name, "sequence")) return is_seq_like(x);
	if (STREQ(name, "callable"))
		return x.k == TV_MACRO || x.k == TV_FUNC || x.k == TV_METHOD;
	if (STREQ(name, "escaped")) return false;
	if (STREQ(name, "lower") || STREQ(name, "upper")) /* str(value).islower() */
		return is_lower_or_upper(x.k == TV_UNDEF ? tv_str("", 0) : tv_to_string(c, x, at),
					 name[0] == 'u');
	if (STREQ(name, "odd") || STREQ(name, "even") || STREQ(name, "divisibleby")) {
		/* value % 2 == 1, value % 2 == 0, value % num == 0 with Python's % */
		struct tv m = name[0] == 'd' ? a : tv_int(2);
		struct tv r = tm_binop(c, at, OP_MOD, x, m);
		return tv_equal(r, tv_int(name[0] == 'o' ? 1 : 0));
	}
	if (nargs != 1)
		tm_fail(c, at, PT_E_FORMAT, "test '%s' takes exactly one argument", name);
	if (STREQ(name, "eq") || STREQ(name, "equalto") || STREQ(name, "==")) return tv_equal(x, a);
	if (STREQ(name, "ne") || STREQ(name, "!=")) return !tv_equal(x, a);
	if (STREQ(name, "sameas"))
		return tv_equal(x, a) && x.k == a.k &&
		       (x.k == TV_NONE || x.k == TV_BOOL || x.k == TV_UNDEF ||
			((x.k == TV_LIST || x.k == TV_DICT || x.k == TV_NS) && x.u.l == a.u.l));
	if (STREQ(name, "in")) {
		struct tv l = tv_iterate(c, a, at);
		if (a.k == TV_STR) {
			struct tv s = need_str(c, at, x, "in");
			size_t pos;
			return s.u.s.n == 0 || find_sub(a, s, 0, &pos);
		}
		for (size_t i = 0; i < l.u.l->n; i++)
			if (tv_equal(l.u.l->v[i], x))
				return true;
		return false;
	}
	int r = tv_compare(c, at, x, a);
	if (STREQ(name, "lt") || STREQ(name, "lessthan") || STREQ(name, "<")) return r < 0;
	if (STREQ(name, "le") || STREQ(name, "<=")) return r <= 0;
	if (STREQ(name, "gt") || STREQ(name, "greaterthan") || STREQ(name, ">")) return r > 0;
	return r >= 0;
}

/* ---- helpers for list filters ---------------------------------------------------------- */
/* jinja2 make_attrgetter: "a.b.0" walks attributes/items; integers index. */
static struct tv attr_path(struct rctx *c, const struct node *at, struct tv x, struct tv path)
{
	if (path.k == TV_INT)
		return tm_getitem(c, x, path, at);
	path = need_str(c, at, path, "attribute");
	size_t i = 0;
	while (i <= path.u.s.n) {
		size_t j = i;
		while (j < path.u.s.n && path.u.s.p[j] != '.')
			j++;
		struct tv key = tv_str(path.u.s.p + i, j - i);
		bool digits = j > i;
		for (size_t k = i; k < j; k++)
			digits &= path.u.s.p[k] >= '0' && path.u.s.p[k] <= '9';
		if (digits && j - i < 18)
			key = tv_int(strtoll(path.u.s.p + i, NULL, 10));
		if (x.k == TV_UNDEF)
			return x;
		x = tm_getitem(c, x, key, at);
		i = j + 1;
	}
	return x;
}

static struct tv fold_case(struct rctx *c, struct tv v, bool case_sensitive)
{
	return (v.k == TV_STR && !case_sensitive) ? map_case(c, v, 1) : v;
}

struct sort_ctx {
	struct rctx *c;
	const struct node *at;
};
struct sort_item {
	struct tv key, val;
	size_t idx;
	struct sort_ctx *sc;
};

static int sort_cmp(const void *x, const void *y)
{
	const struct sort_item *a = x, *b = y;
	int r = tv_compare(a->sc->c, a->sc->at, a->key, b->key);
	return r ? r : (a->idx > b->idx) - (a->idx < b->idx); /* stable like Python's sort */
}

static struct tv sorted(struct rctx *c, const struct node *at, struct sort_item *items, size_t n,
			bool reverse)
{
	struct sort_ctx sc = { c, at };
	for (size_t i = 0; i < n; i++) {
		items[i].sc = &sc;
		items[i].idx = reverse ? n - i : i;
	}
	qsort(items, n, sizeof *items, sort_cmp);
	struct tv out = tv_list_new(c, n);
	for (size_t i = 0; i < n; i++)
		tv_list_push(c, &out, items[reverse ? n - 1 - i : i].val);
	return out;
}

static struct tv filter_sort(struct rctx *c, const struct node *at, struct tv x,
			     const struct cargs *ca)
{
	static const char *const kw[] = { "reverse", "case_sensitive", "attribute", NULL };
	check_args(c, at, "sort", ca, 3, kw);
	bool rev = tv_truthy(argd(ca, 0, "reverse", tv_bool(false)));
	bool cs = tv_truthy(argd(ca, 1, "case_sensitive", tv_bool(false)));
	struct tv attr = argd(ca, 2, "attribute", tv_none());
	struct tv l = tv_iterate(c, x, at);
	struct sort_item *items = tm_alloc(c, (l.u.l->n + 1) * sizeof *items);
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct tv v = l.u.l->v[i];
		items[i].val = v;
		items[i].key = fold_case(c, attr.k == TV_NONE ? v : attr_path(c, at, v, attr), cs);
	}
	return sorted(c, at, items, l.u.l->n, rev);
}

static struct tv filter_dictsort(struct rctx *c, const struct node *at, struct tv x,
				 const struct cargs *ca)
{
	static const char *const kw[] = { "case_sensitive", "by", "reverse", NULL };
	check_args(c, at, "dictsort", ca, 3, kw);
	if (x.k != TV_DICT) {
		if (x.k == TV_UNDEF)
			need_str(c, at, x, "dictsort");
		tm_fail(c, at, PT_E_FORMAT, "'%s' object has no attribute 'items'", tv_type_name(x));
	}
	bool cs = tv_truthy(argd(ca, 0, "case_sensitive", tv_bool(false)));
	struct tv by = argd(ca, 1, "by", tv_cstr("key"));
	bool rev = tv_truthy(argd(ca, 2, "reverse", tv_bool(false)));
	bool by_value = by.k == TV_STR && by.u.s.n == 5 && memcmp(by.u.s.p, "value", 5) == 0;
	if (!by_value && !(by.k == TV_STR && by.u.s.n == 3 && memcmp(by.u.s.p, "key", 3) == 0))
		tm_fail(c, at, PT_E_FORMAT, "You can only sort by either \"key\" or \"value\"");
	size_t n = x.u.d->n;
	struct sort_item *items = tm_alloc(c, (n + 1) * sizeof *items);
	for (size_t i = 0; i < n; i++) {
		struct tv pair = tv_list_new(c, 2);
		pair.tuple = true;
		tv_list_push(c, &pair, x.u.d->keys[i]);
		tv_list_push(c, &pair, x.u.d->vals[i]);
		items[i].val = pair;
		items[i].key = fold_case(c, by_value ? x.u.d->vals[i] : x.u.d->keys[i], cs);
	}
	return sorted(c, at, items, n, rev);
}

/* select/reject/selectattr/rejectattr. */
static struct tv filter_select(struct rctx *c, const struct node *at, struct tv x,
			       const struct cargs *ca, bool attr, bool keep)
{
	/* jinja2: `if value: for item in value: ...` in a generator */
	struct tv l = tv_truthy(x) ? tv_iterate(c, x, at) : tv_list_new(c, 0), out = tv_list_new(c, 0);
	size_t first = attr ? 1 : 0;
	struct tv path = tv_none(), test;
	if (attr && !arg(ca, 0, NULL, &path))
		tm_fail(c, at, PT_E_FORMAT, "missing attribute argument");
	bool has_test = arg(ca, first, NULL, &test);
	if (has_test) {
		test = need_str(c, at, test, "test name");
		char *tn = (char *)tv_strdup(c, test.u.s.p, test.u.s.n).u.s.p;
		if (!tm_test_known(tn, test.u.s.n))
			tm_fail(c, at, PT_E_UNSUPPORTED, "no test named '%s'", tn);
		test.u.s.p = tn;
	}
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct tv v = attr ? attr_path(c, at, l.u.l->v[i], path) : l.u.l->v[i];
		bool r = has_test ? tm_test(c, at, test.u.s.p, v, ca->a + first + 1,
					    ca->n > first + 1 ? ca->n - first - 1 : 0)
				  : tv_truthy(v);
		if (r == keep)
			tv_list_push(c, &out, l.u.l->v[i]);
	}
	out.lazy = LZ_GEN;
	return out;
}

static struct tv filter_map(struct rctx *c, const struct node *at, struct tv x,
			    const struct cargs *ca)
{
	struct tv l = tv_truthy(x) ? tv_iterate(c, x, at) : tv_list_new(c, 0), out = tv_list_new(c, 0);
	struct tv attr, fname;
	if (arg(ca, SIZE_MAX, "attribute", &attr)) {
		struct tv def;
		bool has_def = arg(ca, SIZE_MAX, "default", &def);
		for (size_t i = 0; i < l.u.l->n; i++) {
			struct tv v = attr_path(c, at, l.u.l->v[i], attr);
			tv_list_push(c, &out, (v.k == TV_UNDEF && has_def) ? def : v);
		}
		out.lazy = LZ_GEN;
		return out;
	}
	if (!arg(ca, 0, NULL, &fname))
		tm_fail(c, at, PT_E_FORMAT, "map requires a filter name or attribute=");
	fname = need_str(c, at, fname, "filter name");
	char *fn = (char *)tv_strdup(c, fname.u.s.p, fname.u.s.n).u.s.p;
	if (!tm_filter_known(fn, fname.u.s.n))
		tm_fail(c, at, PT_E_UNSUPPORTED, "no filter named '%s'", fn);
	for (size_t i = 0; i < l.u.l->n; i++)
		tv_list_push(c, &out, tm_filter(c, at, fn, l.u.l->v[i], ca->a + 1, ca->n - 1, ca->kwn,
						ca->kwv, ca->nkw));
	out.lazy = LZ_GEN;
	return out;
}

/* ---- filters --------------------------------------------------------------------------- */
static struct tv soft_str(struct rctx *c, struct tv x, const struct node *at)
{
	return x.k == TV_UNDEF ? tv_str("", 0) : tv_to_string(c, x, at);
}

static size_t py_len(struct rctx *c, const struct node *at, struct tv x)
{
	switch (x.k) {
	case TV_UNDEF: return 0;
	case TV_STR: return tv_utf8_len(x.u.s.p, x.u.s.n);
	case TV_LIST:
		if (x.lazy == LZ_GEN)
			tm_fail(c, at, PT_E_FORMAT, "object of type 'generator' has no len()");
		return x.u.l->n;
	case TV_DICT: return x.u.d->n;
	default:
		tm_fail(c, at, PT_E_FORMAT, "object of type '%s' has no len()", tv_type_name(x));
	}
}

static struct tv html_escape(struct rctx *c, struct tv s)
{
	struct sbuf b = { 0 };
	for (size_t i = 0; i < s.u.s.n; i++) {
		const char *r = NULL;
		switch (s.u.s.p[i]) {
		case '&': r = "&amp;"; break;
		case '<': r = "&lt;"; break;
		case '>': r = "&gt;"; break;
		case '"': r = "&#34;"; break;
		case '\'': r = "&#39;"; break;
		}
		if (r)
			tm_buf_put(c, &b, r, strlen(r));
		else
			tm_buf_putc(c, &b, s.u.s.p[i]);
	}
	return tv_str(b.p, b.n);
}

static bool parse_py_int(struct tv s, int64_t *out)
{
	char buf[64];
	struct tv t = do_strip(s, tv_none(), true, true);
	size_t n = 0;
	for (size_t i = 0; i < t.u.s.n; i++) {
		char ch = t.u.s.p[i];
		if (ch == '_' && i > 0 && i + 1 < t.u.s.n)
			continue;
		if (n >= sizeof buf - 1)
			return false;
		buf[n++] = ch;
	}
	buf[n] = 0;
	if (n == 0)
		return false;
	char *end;
	long long v = strtoll(buf, &end, 10);
	if (*end || (buf[0] != '-' && buf[0] != '+' && (buf[0] < '0' || buf[0] > '9')))
		return false;
	*out = v;
	return true;
}

static bool parse_py_float(struct tv s, double *out)
{
	char buf[64];
	struct tv t = do_strip(s, tv_none(), true, true);
	if (t.u.s.n == 0 || t.u.s.n >= sizeof buf)
		return false;
	memcpy(buf, t.u.s.p, t.u.s.n);
	buf[t.u.s.n] = 0;
	char *end;
	double v = strtod(buf, &end);
	if (*end || strchr(buf, 'x') || strchr(buf, 'X'))
		return false;
	*out = v;
	return true;
}

static struct tv filter_int(struct rctx *c, const struct node *at, struct tv x, const struct cargs *ca)
{
	struct tv def = argd(ca, 0, "default", tv_int(0));
	int64_t i;
	double f;
	switch (x.k) {
	case TV_INT: return x;
	case TV_BOOL: return tv_int(x.u.b);
	case TV_FLOAT:
		if (!isfinite(x.u.f) || fabs(x.u.f) >= 9.2e18)
			return def;
		return tv_int((int64_t)x.u.f);
	case TV_STR:
		if (parse_py_int(x, &i))
			return tv_int(i);
		if (parse_py_float(x, &f) && isfinite(f) && fabs(f) < 9.2e18)
			return tv_int((int64_t)f);
		return def;
	default:
		(void)at;
		return def;
	}
}

static struct tv filter_float(struct rctx *c, struct tv x, const struct cargs *ca)
{
	struct tv def = argd(ca, 0, "default", tv_float(0.0));
	double f;
	(void)c;
	if (tv_is_number(x))
		return tv_float(tv_as_double(x));
	if (x.k == TV_STR && parse_py_float(x, &f))
		return tv_float(f);
	return def;
}

static struct tv filter_indent(struct rctx *c, const struct node *at, struct tv x,
			       const struct cargs *ca)
{
	static const char *const kw[] = { "width", "first", "blank", NULL };
	check_args(c, at, "indent", ca, 3, kw);
	struct tv w = argd(ca, 0, "width", tv_int(4));
	bool first = tv_truthy(argd(ca, 1, "first", tv_bool(false)));
	bool blank = tv_truthy(argd(ca, 2, "blank", tv_bool(false)));
	struct tv ind = w;
	if (w.k != TV_STR) {
		int64_t n = need_int(c, at, w, "indent width");
		struct sbuf sp = { 0 };
		for (int64_t i = 0; i < n && i < 1024; i++)
			tm_buf_putc(c, &sp, ' ');
		ind = tv_str(sp.p, sp.n);
	}
	struct tv s = need_str(c, at, x, "indent"); /* jinja2 does s += "\n" */
	/* jinja2: (s + "\n").splitlines(), lines after the first get the indent unless blank */
	struct sbuf b = { 0 };
	size_t i = 0;
	if (first)
		tm_buf_put(c, &b, ind.u.s.p, ind.u.s.n);
	for (size_t line = 0;; line++) {
		size_t j = i;
		while (j < s.u.s.n && s.u.s.p[j] != '\n' && s.u.s.p[j] != '\r')
			j++;
		if (line > 0) {
			tm_buf_putc(c, &b, '\n');
			if (blank || j > i)
				tm_buf_put(c, &b, ind.u.s.p, ind.u.s.n);
		}
		tm_buf_put(c, &b, s.u.s.p + i, j - i);
		if (j >= s.u.s.n)
			break;
		if (s.u.s.p[j] == '\r' && j + 1 < s.u.s.n && s.u.s.p[j + 1] == '\n')
			j++;
		i = j + 1;
	}
	return tv_str(b.p, b.n);
}

static struct tv filter_tojson(struct rctx *c, const struct node *at, struct tv x,
			       const struct cargs *ca)
{
	/* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
	static const char *const kw[] = { "ensure_ascii", "indent", "separators", "sort_keys", NULL };
	check_args(c, at, "tojson", ca, 4, kw);
	if (tv_truthy(argd(ca, 0, "ensure_ascii", tv_bool(false))))
		tm_fail(c, at, PT_E_UNSUPPORTED, "tojson(ensure_ascii=True) is not supported");
	struct tv ind = argd(ca, 1, "indent", tv_none());
	struct tv seps = argd(ca, 2, "separators", tv_none());
	bool sort_keys = tv_truthy(argd(ca, 3, "sort_keys", tv_bool(false)));
	int indent = -1;
	if (ind.k != TV_NONE) {
		int64_t v = need_int(c, at, ind, "tojson indent");
		indent = v < 0 ? 0 : v > 64 ? 64 : (int)v;
	}
	const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
	if (seps.k != TV_NONE) {
		if (seps.k != TV_LIST || seps.u.l->n != 2)
			tm_fail(c, at, PT_E_FORMAT, "separators must be a (item, key) pair");
		struct tv a = need_str(c, at, seps.u.l->v[0], "separator");
		struct tv b = need_str(c, at, seps.u.l->v[1], "separator");
		isep = tv_strdup(c, a.u.s.p, a.u.s.n).u.s.p;
		ksep = tv_strdup(c, b.u.s.p, b.u.s.n).u.s.p;
	}
	struct sbuf b = { 0 };
	tv_json_to(c, &b, x, indent, isep, ksep, sort_keys, 0, at);
	return tv_str(b.p, b.n);
}

static struct tv filter_join(struct rctx *c, const struct node *at, struct tv x,
			     const struct cargs *ca)
{
	static const char *const kw[] = { "d", "attribute", NULL };
	check_args(c, at, "join", ca, 2, kw);
	struct tv d = soft_str(c, argd(ca, 0, "d", tv_str("", 0)), at);
	struct tv attr = argd(ca, 1, "attribute", tv_none());
	struct tv l = tv_iterate(c, x, at);
	struct sbuf b = { 0 };
	for (size_t i = 0; i < l.u.l->n; i++) {
		if (i)
			tm_buf_put(c, &b, d.u.s.p, d.u.s.n);
		struct tv v = attr.k == TV_NONE ? l.u.l->v[i] : attr_path(c, at, l.u.l->v[i], attr);
		tv_str_to(c, &b, v, at);
	}
	return tv_str(b.p, b.n);
}

static struct tv filter_unique(struct rctx *c, const struct node *at, struct tv x,
			       const struct cargs *ca)
{
	bool cs = tv_truthy(argd(ca, 0, "case_sensitive", tv_bool(false)));
	struct tv attr = argd(ca, 1, "attribute", tv_none());
	struct tv l = tv_iterate(c, x, at), out = tv_list_new(c, 0), seen = tv_dict_new(c, 0), dummy;
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct tv v = l.u.l->v[i];
		struct tv k = fold_case(c, attr.k == TV_NONE ? v : attr_path(c, at, v, attr), cs);
		if ((k.k == TV_LIST && !k.tuple) || k.k == TV_DICT || k.k == TV_NS)
			tm_fail(c, at, PT_E_FORMAT, "unhashable type: '%s'", tv_type_name(k));
		if (!tv_dict_get(seen.u.d, k, &dummy)) { /* hashed: linear overall for str/numbers */
			tv_dict_set(c, seen.u.d, k, tv_none());
			tv_list_push(c, &out, v);
		}
	}
	out.lazy = LZ_GEN;
	return out;
}

static struct tv filter_minmax(struct rctx *c, const struct node *at, struct tv x,
			       const struct cargs *ca, bool want_max)
{
	bool cs = tv_truthy(argd(ca, 0, "case_sensitive", tv_bool(false)));
	struct tv attr = argd(ca, 1, "attribute", tv_none());
	struct tv l = tv_iterate(c, x, at), best = tv_undef("no first item, sequence was empty", 33);
	struct tv bestk = best;
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct tv v = l.u.l->v[i];
		struct tv k = fold_case(c, attr.k == TV_NONE ? v : attr_path(c, at, v, attr), cs);
		if (i == 0 || (want_max ? tv_compare(c, at, k, bestk) > 0 : tv_compare(c, at, k, bestk) < 0)) {
			best = v;
			bestk = k;
		}
	}
	return best;
}

static struct tv filter_sum(struct rctx *c, const struct node *at, struct tv x, const struct cargs *ca)
{
	struct tv attr = argd(ca, 0, "attribute", tv_none());
	struct tv acc = argd(ca, 1, "start", tv_int(0));
	struct tv l = tv_iterate(c, x, at);
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct tv v = attr.k == TV_NONE ? l.u.l->v[i] : attr_path(c, at, l.u.l->v[i], attr);
		if (!tv_is_number(v) || !tv_is_number(acc))
			tm_fail(c, at, PT_E_FORMAT, "unsupported operand type(s) for +: '%s' and '%s'",
				tv_type_name(acc), tv_type_name(v));
		if (acc.k == TV_FLOAT || v.k == TV_FLOAT)
			acc = tv_float(tv_as_double(acc) + tv_as_double(v));
		else if (__builtin_add_overflow(acc.k == TV_BOOL ? acc.u.b : acc.u.i,
						v.k == TV_BOOL ? v.u.b : v.u.i, &acc.u.i))
			tm_fail(c, at, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
		else
			acc.k = TV_INT;
	}
	return acc;
}

static struct tv filter_round(struct rctx *c, const struct node *at, struct tv x,
			      const struct cargs *ca)
{
	int64_t prec = need_int(c, at, argd(ca, 0, "precision", tv_int(0)), "round precision");
	struct tv method = argd(ca, 1, "method", tv_cstr("common"));
	if (!tv_is_number(x))
		tm_fail(c, at, PT_E_FORMAT, "round expects a number, got %s", tv_type_name(x));
	double v = tv_as_double(x), m = pow(10.0, (double)(prec > 15 ? 15 : prec < -15 ? -15 : prec));
	method = need_str(c, at, method, "round method");
	if (method.u.s.n == 4 && memcmp(method.u.s.p, "ceil", 4) == 0)
		return tv_float(ceil(v * m) / m);
	if (method.u.s.n == 5 && memcmp(method.u.s.p, "floor", 5) == 0)
		return tv_float(floor(v * m) / m);
	if (!(method.u.s.n == 6 && memcmp(method.u.s.p, "common", 6) == 0))
		tm_fail(c, at, PT_E_FORMAT, "method must be common, ceil or floor");
	if (x.k != TV_FLOAT && prec >= 0) /* Python round(int, n) stays an int */
		return tv_int(x.k == TV_BOOL ? x.u.b : x.u.i);
	return tv_float(nearbyint(v * m) / m); /* Python round(): half to even */
}

static struct tv first_last(struct rctx *c, const struct node *at, struct tv x, bool last)
{
	if (x.k == TV_DICT) {
		if (x.u.d->n == 0)
			return tv_undef("No first item, sequence was empty.", 34);
		return x.u.d->keys[last ? x.u.d->n - 1 : 0];
	}
	if (last && x.k == TV_LIST && x.lazy == LZ_GEN)
		tm_fail(c, at, PT_E_FORMAT, "'generator' object is not reversible");
	struct tv l = tv_iterate(c, x, at);
	if (l.u.l->n == 0)
		return tv_undef("No first item, sequence was empty.", 34);
	return l.u.l->v[last ? l.u.l->n - 1 : 0];
}

static struct tv list_reverse(struct rctx *c, const struct node *at, struct tv x)
{
	struct tv l = tv_iterate(c, x, at), out = tv_list_new(c, l.u.l->n);
	for (size_t i = l.u.l->n; i-- > 0;)
		tv_list_push(c, &out, l.u.l->v[i]);
	if (x.k != TV_STR) {
		out.lazy = LZ_GEN; /* reversed(): an iterator */
		return out;
	}
	struct sbuf b = { 0 };
	for (size_t i = 0; i < out.u.l->n; i++)
		tm_buf_put(c, &b, out.u.l->v[i].u.s.p, out.u.l->v[i].u.s.n);
	return tv_str(b.p, b.n);
}

static struct tv dict_items(struct rctx *c, struct tv x)
{
	struct tv out = tv_list_new(c, x.u.d->n);
	for (size_t i = 0; i < x.u.d->n; i++) {
		struct tv pair = tv_list_new(c, 2);
		pair.tuple = true;
		tv_list_push(c, &pair, x.u.d->keys[i]);
		tv_list_push(c, &pair, x.u.d->vals[i]);
		tv_list_push(c, &out, pair);
	}
	return out;
}

static size_t word_count(struct tv s)
{
	size_t n = 0;
	bool in = false;
	for (size_t i = 0; i < s.u.s.n; i++) {
		unsigned char ch = (unsigned char)s.u.s.p[i];
		bool w = alpha((char)ch) || (ch >= '0' && ch <= '9') || ch == '_' || ch >= 0x80;
		if (w && !in)
			n++;
		in = w;
	}
	return n;
}

static struct tv filter_str(struct rctx *c, const struct node *at, const char *name,
			    struct tv s, const struct cargs *ca)
{
	if (STREQ(name, "upper")) return map_case(c, s, 0);
	if (STREQ(name, "lower")) return map_case(c, s, 1);
	if (STREQ(name, "capitalize")) return map_case(c, s, 2);
	if (STREQ(name, "title")) return jinja_title(c, s);
	if (STREQ(name, "trim")) return do_strip(s, argd(ca, 0, "chars", tv_none()), true, true);
	if (STREQ(name, "wordcount")) return tv_int((int64_t)word_count(s));
	if (STREQ(name, "escape") || STREQ(name, "e") || STREQ(name, "forceescape"))
		return html_escape(c, s);
	/* replace */
	struct tv old = soft_str(c, argd(ca, 0, "old", tv_str("", 0)), at);
	struct tv new_ = soft_str(c, argd(ca, 1, "new", tv_str("", 0)), at);
	struct tv cnt = argd(ca, 2, "count", tv_none());
	return do_replace(c, at, s, old, new_, cnt.k == TV_NONE ? -1 : need_int(c, at, cnt, "count"));
}

static struct tv filter_now(struct rctx *c, const struct node *at, const char *name, struct tv x,
			   struct tv *args, size_t nargs, const char **kwn, struct tv *kwv,
			   size_t nkw);

static bool makes_generator(const char *name)
{
	static const char *const gens[] = { "select", "reject", "selectattr", "rejectattr", "map",
					    "unique", "items", NULL };
	return name_in(name, strlen(name), gens);
}

/* jinja2's select/reject/map/unique/items are generators: nothing runs until they are
 * consumed.  They are computed now; an error is kept in the result and raised when (if)
 * it is iterated, so `{% if x|select %}` is true like in Python whatever x holds. */
struct tv tm_filter(struct rctx *c, const struct node *at, const char *name, struct tv x,
		    struct tv *args, size_t nargs, const char **kwn, struct tv *kwv, size_t nkw)
{
	if (!makes_generator(name))
		return filter_now(c, at, name, x, args, nargs, kwn, kwv, nkw);
	jmp_buf saved;
	struct tv r;
	memcpy(&saved, &c->jb, sizeof saved);
	if (setjmp(c->jb) == 0) {
		r = filter_now(c, at, name, x, args, nargs, kwn, kwv, nkw);
		memcpy(&c->jb, &saved, sizeof saved);
		r.lazy = LZ_GEN;
		return r;
	}
	memcpy(&c->jb, &saved, sizeof saved);
	if (c->status == PT_E_LIMIT || c->status == PT_E_NOMEM || !c->err)
		longjmp(c->jb, 1); /* resource limits are not Python errors: no deferral */
	r = tv_list_new(c, 0);
	r.lazy = LZ_GEN;
	r.u.l->poison = tv_strdup(c, c->err->msg, strlen(c->err->msg)).u.s.p;
	r.u.l->poison_st = c->status;
	pt_error_clear(c->err);
	c->status = PT_OK;
	return r;
}

static struct tv filter_now(struct rctx *c, const struct node *at, const char *name, struct tv x,
			    struct tv *args, size_t nargs, const char **kwn, struct tv *kwv,
			    size_t nkw)
{
	struct cargs ca = { args, nargs, kwn, kwv, nkw };
	if (STREQ(name, "default") || STREQ(name, "d")) {
		struct tv def = argd(&ca, 0, "default_value", tv_str("", 0));
		bool boolean = tv_truthy(argd(&ca, 1, "boolean", tv_bool(false)));
		return (x.k == TV_UNDEF || (boolean && !tv_truthy(x))) ? def : x;
	}
	if (STREQ(name, "length") || STREQ(name, "count"))
		return tv_int((int64_t)py_len(c, at, x));
	if (STREQ(name, "tojson")) return filter_tojson(c, at, x, &ca);
	if (STREQ(name, "safe") || STREQ(name, "string")) return soft_str(c, x, at);
	if (STREQ(name, "upper") || STREQ(name, "lower") || STREQ(name, "capitalize") ||
	    STREQ(name, "title") || STREQ(name, "trim") || STREQ(name, "replace") ||
	    STREQ(name, "wordcount") || STREQ(name, "escape") || STREQ(name, "e") ||
	    STREQ(name, "forceescape"))
		return filter_str(c, at, name, soft_str(c, x, at), &ca);
	if (STREQ(name, "join")) return filter_join(c, at, x, &ca);
	if (STREQ(name, "first") || STREQ(name, "last"))
		return first_last(c, at, x, name[0] == 'l' && name[1] == 'a');
	if (STREQ(name, "list")) {
		struct tv l = tv_iterate(c, x, at), out = tv_list_new(c, l.u.l->n);
		for (size_t i = 0; i < l.u.l->n; i++)
			tv_list_push(c, &out, l.u.l->v[i]);
		return out;
	}
	if (STREQ(name, "items")) {
		if (x.k == TV_UNDEF)
			return tv_list_new(c, 0);
		if (x.k != TV_DICT)
			tm_fail(c, at, PT_E_FORMAT, "Can only get item pairs from a mapping.");
		struct tv it = dict_items(c, x);
		it.lazy = LZ_GEN;
		return it;
	}
	if (STREQ(name, "map")) return filter_map(c, at, x, &ca);
	if (STREQ(name, "select") || STREQ(name, "reject"))
		return filter_select(c, at, x, &ca, false, name[0] == 's');
	if (STREQ(name, "selectattr") || STREQ(name, "rejectattr"))
		return filter_select(c, at, x, &ca, true, name[0] == 's');
	if (STREQ(name, "dictsort")) return filter_dictsort(c, at, x, &ca);
	if (STREQ(name, "sort")) return filter_sort(c, at, x, &ca);
	if (STREQ(name, "unique")) return filter_unique(c, at, x, &ca);
	if (STREQ(name, "reverse")) return list_reverse(c, at, x);
	if ((STREQ(name, "int") || STREQ(name, "float")) && x.k == TV_UNDEF)
		need_str(c, at, x, name); /* int(Undefined) raises UndefinedError */
	if (STREQ(name, "int")) return filter_int(c, at, x, &ca);
	if (STREQ(name, "float")) return filter_float(c, x, &ca);
	if (STREQ(name, "abs")) {
		if (!tv_is_number(x))
			tm_fail(c, at, PT_E_FORMAT, "bad operand type for abs(): '%s'", tv_type_name(x));
		if (x.k == TV_FLOAT)
			return tv_float(fabs(x.u.f));
		int64_t v = x.k == TV_BOOL ? x.u.b : x.u.i;
		if (v == INT64_MIN)
			tm_fail(c, at, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
		return tv_int(v < 0 ? -v : v);
	}
	if (STREQ(name, "round")) return filter_round(c, at, x, &ca);
	if (STREQ(name, "indent")) return filter_indent(c, at, x, &ca);
	if (STREQ(name, "sum")) return filter_sum(c, at, x, &ca);
	if (STREQ(name, "min") || STREQ(name, "max"))
		return filter_minmax(c, at, x, &ca, name[1] == 'a');
	if (STREQ(name, "attr")) {
		struct tv a = need_str(c, at, argd(&ca, 0, "name", tv_none()), "attr name");
		if (x.k == TV_UNDEF)
			return x;
		if (x.k == TV_DICT) /* getattr only: dict keys are not attributes */
			return tm_has_method(x, a.u.s.p, a.u.s.n) ? tm_getattr(c, x, a.u.s.p, a.u.s.n)
								  : tv_undef("no such attribute", 17);
		return tm_getattr(c, x, a.u.s.p, a.u.s.n);
	}
	tm_fail(c, at, PT_E_UNSUPPORTED, "no filter named '%s'", name);
}

/* ---- methods --------------------------------------------------------------------------- */
static const char *const STR_METHODS[] = {
	"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper",
	"lower", "replace", "title", "capitalize", "find", "rfind", "count", "join",
	"splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", NULL,
};
static const char *const DICT_METHODS[] = { "items", "keys", "values", "get", "copy",
					    "pop", "popitem", "update", "setdefault", "clear",
					    NULL };
static const char *const LIST_METHODS[] = { "index", "count", "copy", "append", "extend",
					    "insert", "pop", "remove", "clear", "sort", "reverse",
					    NULL };

bool tm_has_method(struct tv self, const char *name, size_t n)
{
	switch (self.k) {
	case TV_STR: return name_in(name, n, STR_METHODS);
	case TV_DICT: return name_in(name, n, DICT_METHODS);
	case TV_LIST:
		if (self.tuple)
			return (n == 5 && memcmp(name, "index", 5) == 0) ||
			       (n == 5 && memcmp(name, "count", 5) == 0);
		return name_in(name, n, LIST_METHODS);
	default: return false;
	}
}

static bool str_affix(struct rctx *c, const struct node *at, struct tv s, struct tv a, bool end)
{
	if (a.k == TV_LIST && a.tuple) {
		for (size_t i = 0; i < a.u.l->n; i++)
			if (str_affix(c, at, s, a.u.l->v[i], end))
				return true;
		return false;
	}
	a = need_str(c, at, a, end ? "endswith" : "startswith");
	if (a.u.s.n > s.u.s.n)
		return false;
	return memcmp(s.u.s.p + (end ? s.u.s.n - a.u.s.n : 0), a.u.s.p, a.u.s.n) == 0;
}

static bool str_class(struct tv s, int kind)
{
	if (s.u.s.n == 0)
		return false;
	if (kind == 3) { /* isspace */
		for (size_t i = 0; i < s.u.s.n;) {
			size_t l;
			if (!py_space(decode(s.u.s.p + i, s.u.s.n - i, &l)))
				return false;
			i += l;
		}
		return true;
	}
	for (size_t i = 0; i < s.u.s.n; i++) {
		char ch = s.u.s.p[i];
		bool d = ch >= '0' && ch <= '9', a = alpha(ch);
		if ((kind == 0 && !d) || (kind == 1 && !a) || (kind == 2 && !a && !d))
			return false;
	}
	return true;
}

static struct tv str_method(struct rctx *c, const struct node *at, struct tv s, const char *name,
			    const struct cargs *ca)
{
	if (STREQ(name, "strip") || STREQ(name, "lstrip") || STREQ(name, "rstrip")) {
		struct tv chars = argd(ca, 0, "chars", tv_none());
		if (chars.k != TV_NONE)
			need_str(c, at, chars, name);
		return do_strip(s, chars, name[0] != 'r', name[0] != 'l');
	}
	if (STREQ(name, "split") || STREQ(name, "rsplit")) {
		struct tv sep = argd(ca, 0, "sep", tv_none());
		if (sep.k != TV_NONE)
			need_str(c, at, sep, name);
		int64_t max = need_int(c, at, argd(ca, 1, "maxsplit", tv_int(-1)), "maxsplit");
		return do_split(c, at, s, sep, max, name[0] == 'r');
	}
	if (STREQ(name, "startswith") || STREQ(name, "endswith")) {
		struct tv a;
		if (!arg(ca, 0, NULL, &a))
			tm_fail(c, at, PT_E_FORMAT, "%s() takes at least 1 argument", name);
		return tv_bool(str_affix(c, at, s, a, name[0] == 'e'));
	}
	if (STREQ(name, "upper")) return map_case(c, s, 0);
	if (STREQ(name, "lower")) return map_case(c, s, 1);
	if (STREQ(name, "capitalize")) return map_case(c, s, 2);
	if (STREQ(name, "title")) return map_case(c, s, 3);
	if (STREQ(name, "replace")) {
		struct tv o = need_str(c, at, argd(ca, 0, NULL, tv_none()), "replace");
		struct tv n = need_str(c, at, argd(ca, 1, NULL, tv_none()), "replace");
		struct tv cnt = argd(ca, 2, "count", tv_int(-1));
		return do_replace(c, at, s, o, n, need_int(c, at, cnt, "count"));
	}
	if (STREQ(name, "find") || STREQ(name, "rfind") || STREQ(name, "count")) {
		struct tv sub = need_str(c, at, argd(ca, 0, NULL, tv_none()), name);
		size_t pos = 0, found = SIZE_MAX, at_i;
		int64_t cnt = 0;
		if (sub.u.s.n == 0)
			return tv_int(name[0] == 'c' ? (int64_t)tv_utf8_len(s.u.s.p, s.u.s.n) + 1 :
				      name[0] == 'f' ? 0 : (int64_t)tv_utf8_len(s.u.s.p, s.u.s.n));
		while (find_sub(s, sub, pos, &at_i)) {
			if (found == SIZE_MAX || name[0] == 'r')
				found = at_i;
			cnt++;
			if (name[0] == 'f')
				break;
			pos = at_i + (name[0] == 'c' ? sub.u.s.n : 1);
		}
		if (name[0] == 'c')
			return tv_int(cnt);
		return tv_int(found == SIZE_MAX ? -1 : (int64_t)tv_utf8_len(s.u.s.p, found));
	}
	if (STREQ(name, "join")) {
		struct tv l = tv_iterate(c, argd(ca, 0, NULL, tv_undef("join() takes exactly one argument", 33)), at);
		struct sbuf b = { 0 };
		for (size_t i = 0; i < l.u.l->n; i++) {
			if (i)
				tm_buf_put(c, &b, s.u.s.p, s.u.s.n);
			struct tv v = need_str(c, at, l.u.l->v[i], "join");
			tm_buf_put(c, &b, v.u.s.p, v.u.s.n);
		}
		return tv_str(b.p, b.n);
	}
	if (STREQ(name, "splitlines")) {
		struct tv out = tv_list_new(c, 0);
		size_t i = 0;
		while (i < s.u.s.n) {
			size_t j = i;
			while (j < s.u.s.n && s.u.s.p[j] != '\n' && s.u.s.p[j] != '\r')
				j++;
			tv_list_push(c, &out, tv_str(s.u.s.p + i, j - i));
			if (j + 1 < s.u.s.n && s.u.s.p[j] == '\r' && s.u.s.p[j + 1] == '\n')
				j++;
			i = j + 1;
		}
		return out;
	}
	if (STREQ(name, "isupper") || STREQ(name, "islower"))
		return tv_bool(is_lower_or_upper(s, name[2] == 'u'));
	return tv_bool(str_class(s, STREQ(name, "isdigit") ? 0 : STREQ(name, "isalpha") ? 1 :
				    STREQ(name, "isalnum") ? 2 : 3));
}

static struct tv dict_method(struct rctx *c, const struct node *at, struct tv d, const char *name,
			     const struct cargs *ca)
{
	if (STREQ(name, "items")) {
		struct tv it = dict_items(c, d);
		it.lazy = LZ_ITEMS;
		return it;
	}
	if (STREQ(name, "keys") || STREQ(name, "values")) {
		struct tv out = tv_list_new(c, d.u.d->n);
		for (size_t i = 0; i < d.u.d->n; i++)
			tv_list_push(c, &out, name[0] == 'k' ? d.u.d->keys[i] : d.u.d->vals[i]);
		out.lazy = name[0] == 'k' ? LZ_KEYS : LZ_VALUES;
		return out;
	}
	if (STREQ(name, "get")) {
		struct tv k, v;
		if (!arg(ca, 0, NULL, &k))
			tm_fail(c, at, PT_E_FORMAT, "get expected at least 1 argument, got 0");
		return tv_dict_get(d.u.d, k, &v) ? v : argd(ca, 1, NULL, tv_none());
	}
	if (STREQ(name, "copy")) {
		struct tv out = tv_dict_new(c, d.u.d->n);
		for (size_t i = 0; i < d.u.d->n; i++)
			tv_dict_set(c, out.u.d, d.u.d->keys[i], d.u.d->vals[i]);
		return out;
	}
	tm_fail(c, at, PT_E_FORMAT, "access to attribute '%s' of 'dict' object is unsafe", name);
}

static struct tv list_method(struct rctx *c, const struct node *at, struct tv l, const char *name,
			     const struct cargs *ca)
{
	if (STREQ(name, "index") || STREQ(name, "count")) {
		struct tv x;
		int64_t cnt = 0;
		if (!arg(ca, 0, NULL, &x))
			tm_fail(c, at, PT_E_FORMAT, "%s() takes exactly one argument", name);
		for (size_t i = 0; i < l.u.l->n; i++)
			if (tv_equal(l.u.l->v[i], x)) {
				if (name[0] == 'i')
					return tv_int((int64_t)i);
				cnt++;
			}
		if (name[0] == 'i')
			tm_fail(c, at, PT_E_FORMAT, "value is not in list");
		return tv_int(cnt);
	}
	if (STREQ(name, "copy")) {
		struct tv out = tv_list_new(c, l.u.l->n);
		for (size_t i = 0; i < l.u.l->n; i++)
			tv_list_push(c, &out, l.u.l->v[i]);
		return out;
	}
	tm_fail(c, at, PT_E_FORMAT, "access to attribute '%s' of 'list' object is unsafe", name);
}

struct tv tm_call_method(struct rctx *c, const struct node *at, struct tv self,
			 const char *name, struct tv *args, size_t nargs, const char **kwn,
			 struct tv *kwv, size_t nkw)
{
	struct cargs ca = { args, nargs, kwn, kwv, nkw };
	switch (self.k) {
	case TV_STR: return str_method(c, at, self, name, &ca);
	case TV_DICT: return dict_method(c, at, self, name, &ca);
	case TV_LIST: return list_method(c, at, self, name, &ca);
	case TV_LOOP:
		if (nargs == 0)
			tm_fail(c, at, PT_E_FORMAT, "no items for cycling given");
		return args[self.u.lp->i % nargs];
	default:
		tm_fail(c, at, PT_E_FORMAT, "'%s' object has no attribute '%s'", tv_type_name(self), name);
	}
}

/* ---- global functions ------------------------------------------------------------------ */
static const char *const FUNCS[] = { "range", "namespace", "raise_exception", "strftime_now",
				     "dict", NULL };

bool tm_global_func(const char *name, size_t n, struct tv *out)
{
	for (int i = 0; FUNCS[i]; i++)
		if (strlen(FUNCS[i]) == n && memcmp(FUNCS[i], name, n) == 0) {
			*out = (struct tv){ .k = TV_FUNC, .u.fn = i };
			return true;
		}
	return false;
}

static struct tv fn_range(struct rctx *c, const struct node *at, const struct cargs *ca)
{
	int64_t start = 0, stop, step = 1;
	if (ca->n == 0 || ca->n > 3 || ca->nkw)
		tm_fail(c, at, PT_E_FORMAT, "range expected 1 to 3 positional arguments");
	if (ca->n == 1) {
		stop = need_int(c, at, ca->a[0], "range");
	} else {
		start = need_int(c, at, ca->a[0], "range");
		stop = need_int(c, at, ca->a[1], "range");
		if (ca->n == 3)
			step = need_int(c, at, ca->a[2], "range");
	}
	if (step == 0)
		tm_fail(c, at, PT_E_FORMAT, "range() arg 3 must not be zero");
	struct tv out = tv_list_new(c, 0);
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
		if (out.u.l->n >= c->lim.max_iterations)
			tm_fail(c, at, PT_E_LIMIT, "range() longer than %llu items",
				(unsigned long long)c->lim.max_iterations);
		tv_list_push(c, &out, tv_int(i));
		if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
			break;
	}
	return out;
}

static struct tv fn_strftime(struct rctx *c, const struct node *at, const struct cargs *ca)
{
	struct tv f = need_str(c, at, argd(ca, 0, "format", tv_none()), "strftime_now");
	char *fmt = (char *)tv_strdup(c, f.u.s.p, f.u.s.n).u.s.p;
	struct tm tm;
	time_t now = c->now;
	if (!localtime_r(&now, &tm))
		tm_fail(c, at, PT_E_FORMAT, "cannot convert the current time");
	char buf[512];
	size_t n = strftime(buf, sizeof buf, fmt, &tm);
	if (n == 0 && f.u.s.n)
		tm_fail(c, at, PT_E_UNSUPPORTED, "strftime_now format too long or empty result");
	return tv_strdup(c, buf, n);
}

struct tv tm_call_func(struct rctx *c, const struct node *at, int fn, struct tv *args,
		       size_t nargs, const char **kwn, struct tv *kwv, size_t nkw)
{
	struct cargs ca = { args, nargs, kwn, kwv, nkw };
	struct tv d;
	switch (fn) {
	case 0: return fn_range(c, at, &ca);
	case 1: case 4: /* namespace(...), dict(...): a positional mapping then keywords */
		d = tv_dict_new(c, 0);
		if (fn == 1)
			d.k = TV_NS;
		if (nargs > 1 || (nargs == 1 && args[0].k != TV_DICT))
			tm_fail(c, at, PT_E_FORMAT, "%s() takes an optional mapping and keywords",
				fn == 1 ? "namespace" : "dict");
		if (nargs == 1)
			for (size_t i = 0; i < args[0].u.d->n; i++)
				tv_dict_set(c, d.u.d, args[0].u.d->keys[i], args[0].u.d->vals[i]);
		for (size_t k = 0; k < nkw; k++)
			tv_dict_set(c, d.u.d, tv_cstr(kwn[k]), kwv[k]);
		return d;
	case 2: {
		struct tv m = tv_to_string(c, argd(&ca, 0, "message", tv_str("", 0)), at);
		tm_fail(c, at, PT_E_INVALID, "raise_exception: %.*s", (int)(m.u.s.n > 150 ? 150 : m.u.s.n),
			m.u.s.p);
	}
	case 3: return fn_strftime(c, at, &ca);
	default: tm_fail(c, at, PT_E_UNSUPPORTED, "unknown function");
	}
}
