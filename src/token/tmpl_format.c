/* tmpl_format.c - Python's printf-style 'fmt' % args for templates (str.__mod__): the
 * conversions s r a d i u f F e E g G x X o c and %%, flags "-+ 0#", width and precision,
 * a tuple for several arguments, a mapping for %(key)s. */
#include "token/tmpl_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct pct_spec {
	char flags[8];
	int width, prec; /* -1: absent */
	char conv;
};

static void pad_to(struct rctx *c, struct sbuf *b, struct tv s, const struct pct_spec *sp)
{
	size_t len = tv_utf8_len(s.u.s.p, s.u.s.n);
	bool left = strchr(sp->flags, '-') != NULL;
	if (!left)
		for (size_t i = len; (int)i < sp->width; i++)
			tm_buf_putc(c, b, ' ');
	tm_buf_put(c, b, s.u.s.p, s.u.s.n);
	if (left)
		for (size_t i = len; (int)i < sp->width; i++)
			tm_buf_putc(c, b, ' ');
}

static void format_one(struct rctx *c, const struct node *at, struct sbuf *b, struct tv v,
		       const struct pct_spec *sp)
{
	char fmt[32], out[512];
	if (sp->conv == 's' || sp->conv == 'r' || sp->conv == 'a') {
		struct sbuf t = { 0 };
		if (sp->conv == 's')
			tv_str_to(c, &t, v, at);
		else
			tv_repr_to(c, &t, v, at);
		struct tv s = tv_str(t.p, t.n);
		if (sp->prec >= 0) /* precision truncates, in code points */
			s.u.s.n = tv_utf8_offset(s.u.s.p, s.u.s.n, (size_t)sp->prec);
		pad_to(c, b, s, sp);
		return;
	}
	if (sp->conv == 'c') {
		if (v.k != TV_STR || tv_utf8_len(v.u.s.p, v.u.s.n) != 1)
			tm_fail(c, at, PT_E_UNSUPPORTED, "%%c needs a one-character string here");
		pad_to(c, b, v, sp);
		return;
	}
	if (!tv_is_number(v))
		tm_fail(c, at, PT_E_FORMAT, "%%%c format: a real number is required, not %s", sp->conv,
			tv_type_name(v));
	char conv = sp->conv == 'i' || sp->conv == 'u' ? 'd' : sp->conv;
	int n;
	if (conv == 'o' && strchr(sp->flags, '#')) /* Python writes 0o, C writes 0 */
		tm_fail(c, at, PT_E_UNSUPPORTED, "the %%#o format is not supported");
	if (strchr("dxXo", conv)) {
		long long iv = v.k == TV_FLOAT ? (long long)v.u.f : v.k == TV_BOOL ? v.u.b : v.u.i;
		if (v.k == TV_FLOAT && (conv != 'd' || !isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18))
			tm_fail(c, at, PT_E_FORMAT, "%%%c format: an integer is required, not float", conv);
		snprintf(fmt, sizeof fmt, "%%%s%s%s%s", sp->flags, sp->width >= 0 ? "*" : "",
			 sp->prec >= 0 ? ".*" : "", conv == 'd' ? "lld" : conv == 'x' ? "llx" :
			 conv == 'X' ? "llX" : "llo");
		if (sp->width >= 0 && sp->prec >= 0)
			n = snprintf(out, sizeof out, fmt, sp->width, sp->prec, iv);
		else if (sp->width >= 0)
			n = snprintf(out, sizeof out, fmt, sp->width, iv);
		else if (sp->prec >= 0)
			n = snprintf(out, sizeof out, fmt, sp->prec, iv);
		else
			n = snprintf(out, sizeof out, fmt, iv);
	} else {
		double fv = tv_as_double(v);
		snprintf(fmt, sizeof fmt, "%%%s*.*%c", sp->flags, conv);
		n = snprintf(out, sizeof out, fmt, sp->width >= 0 ? sp->width : 0,
			     sp->prec >= 0 ? sp->prec : 6, fv);
	}
	if (n < 0 || (size_t)n >= sizeof out)
		tm_fail(c, at, PT_E_UNSUPPORTED, "formatted number too long");
	tm_buf_put(c, b, out, (size_t)n);
}

/* Parses one %-spec after the '%' at s[*i]; returns the mapping key (or an empty str). */
static struct tv parse_spec(struct rctx *c, const struct node *at, struct tv f, size_t *i,
			    struct pct_spec *sp)
{
	const char *s = f.u.s.p;
	size_t n = f.u.s.n, k = *i;
	struct tv key = tv_str("", 0);
	memset(sp, 0, sizeof *sp);
	sp->width = sp->prec = -1;
	if (k < n && s[k] == '(') {
		size_t st = ++k;
		while (k < n && s[k] != ')')
			k++;
		if (k >= n)
			tm_fail(c, at, PT_E_FORMAT, "incomplete format key");
		key = tv_str(s + st, k - st);
		key.u.s.p = key.u.s.n ? key.u.s.p : "";
		k++;
	}
	size_t nf = 0;
	while (k < n && strchr("-+ 0#", s[k]) && nf < sizeof sp->flags - 1)
		sp->flags[nf++] = s[k++];
	if (k < n && s[k] >= '0' && s[k] <= '9')
		for (sp->width = 0; k < n && s[k] >= '0' && s[k] <= '9' && sp->width < 10000; k++)
			sp->width = sp->width * 10 + (s[k] - '0');
	if (k < n && s[k] == '.')
		for (sp->prec = 0, k++; k < n && s[k] >= '0' && s[k] <= '9' && sp->prec < 10000; k++)
			sp->prec = sp->prec * 10 + (s[k] - '0');
	if (k < n && (s[k] == '*' || (s[k] >= '0' && s[k] <= '9')))
		tm_fail(c, at, PT_E_UNSUPPORTED, "'*' widths are not supported");
	if (k >= n || !strchr("sradiufFeEgGxXoc%", s[k]))
		tm_fail(c, at, PT_E_FORMAT, "unsupported format character at index %zu", k);
	if (sp->width > 500 || sp->prec > 400)
		tm_fail(c, at, PT_E_UNSUPPORTED, "format width or precision too large");
	sp->conv = s[k];
	*i = k + 1;
	return key;
}

struct tv tm_percent_format(struct rctx *c, const struct node *at, struct tv fmt, struct tv args)
{
	bool is_tuple = args.k == TV_LIST && args.tuple;
	bool is_map = args.k == TV_DICT || args.k == TV_UNDEF; /* Undefined has __getitem__ */
	size_t next_arg = 0, nargs = is_tuple ? args.u.l->n : 1;
	struct sbuf b = { 0 };
	for (size_t i = 0; i < fmt.u.s.n;) {
		const char *pc = memchr(fmt.u.s.p + i, '%', fmt.u.s.n - i);
		size_t lit = pc ? (size_t)(pc - fmt.u.s.p) - i : fmt.u.s.n - i;
		tm_buf_put(c, &b, fmt.u.s.p + i, lit);
		i += lit;
		if (!pc)
			break;
		i++;
		struct pct_spec sp;
		struct tv key = parse_spec(c, at, fmt, &i, &sp), v;
		if (sp.conv == '%') {
			tm_buf_putc(c, &b, '%');
			continue;
		}
		if (key.u.s.n) {
			if (args.k != TV_DICT)
				tm_fail(c, at, PT_E_FORMAT, "format requires a mapping");
			if (!tv_dict_get(args.u.d, key, &v))
				tm_fail(c, at, PT_E_FORMAT, "format key '%.*s' not found", (int)key.u.s.n, key.u.s.p);
		} else {
			if (next_arg >= nargs)
				tm_fail(c, at, PT_E_FORMAT, "not enough arguments for format string");
			v = is_tuple ? args.u.l->v[next_arg] : args;
			next_arg++;
		}
		format_one(c, at, &b, v, &sp);
	}
	if (next_arg < nargs && !is_map)
		tm_fail(c, at, PT_E_FORMAT, "not all arguments converted during string formatting");
	return tv_str(b.p, b.n);
}
