/* tmpl_eval.c - the render loop: scopes, statements, expressions, operators, macros.
 *
 * Semantics follow Python jinja2 3.1 with jinja2.Undefined: an unknown name or missing
 * attribute is undefined; printing or iterating it is empty; arithmetic, attribute access
 * and comparisons on it fail.  Each for-loop iteration and each macro call gets its own
 * scope, so `set` inside them does not leak out (namespace() objects are the way out).
 */
#include "token/tmpl_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static enum flow exec_node(struct rctx *c, const struct node *n);

_Noreturn static void fail_undef(struct rctx *c, const struct node *at, struct tv u)
{
	tm_fail(c, at, PT_E_FORMAT, "%.*s", (int)u.u.s.n, u.u.s.p ? u.u.s.p : "value is undefined");
}

static struct tv undef_msg(struct rctx *c, const char *fmt, const char *a, size_t an,
			   const char *b)
{
	char tmp[160];
	int n = snprintf(tmp, sizeof tmp, fmt, (int)(an > 60 ? 60 : an), a, b);
	struct tv s = tv_strdup(c, tmp, n < 0 ? 0 : (size_t)n >= sizeof tmp ? sizeof tmp - 1 : (size_t)n);
	return tv_undef(s.u.s.p, s.u.s.n);
}

/* ---- scopes ---------------------------------------------------------------------------- */
static struct scope *scope_new(struct rctx *c, struct scope *parent)
{
	struct scope *s = tm_alloc(c, sizeof *s);
	s->parent = parent;
	s->vars = tv_dict_new(c, 0).u.d;
	return s;
}

static bool lookup(struct scope *s, const char *name, size_t n, struct tv *out)
{
	for (; s; s = s->parent)
		if (tv_dict_gets(s->vars, name, n, out))
			return true;
	return false;
}

static struct tv eval_name(struct rctx *c, struct scope *s, const struct node *e)
{
	struct tv v;
	if (lookup(s, e->name, e->name_len, &v))
		return v;
	if (tm_global_func(e->name, e->name_len, &v))
		return v;
	return undef_msg(c, "'%.*s' is undefined", e->name, e->name_len, "");
}

/* ---- attribute / item access ----------------------------------------------------------- */
static const char *obj_desc(struct tv v)
{
	switch (v.k) {
	case TV_DICT: return "dict object";
	case TV_LIST: return v.tuple ? "tuple object" : "list object";
	case TV_STR: return "str object";
	case TV_NONE: return "None";
	case TV_INT: return "int object";
	case TV_FLOAT: return "float object";
	case TV_BOOL: return "bool object";
	default: return "object";
	}
}

static struct tv method_value(struct rctx *c, struct tv self, const char *name, size_t n)
{
	struct tv m = { .k = TV_METHOD };
	m.u.bm = tm_alloc(c, sizeof *m.u.bm);
	m.u.bm->self = self;
	m.u.bm->name = tv_strdup(c, name, n).u.s.p;
	return m;
}

static struct tv loop_attr(struct rctx *c, struct tv_loop *lp, const char *name, size_t n)
{
	size_t len = lp->items->n, i = lp->i;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
	if (IS("index")) return tv_int((int64_t)i + 1);
	if (IS("index0")) return tv_int((int64_t)i);
	if (IS("revindex")) return tv_int((int64_t)(len - i));
	if (IS("revindex0")) return tv_int((int64_t)(len - i - 1));
	if (IS("first")) return tv_bool(i == 0);
	if (IS("last")) return tv_bool(i + 1 == len);
	if (IS("length")) return tv_int((int64_t)len);
	if (IS("depth")) return tv_int(1);
	if (IS("depth0")) return tv_int(0);
	if (IS("previtem"))
		return i > 0 ? lp->items->v[i - 1] : undef_msg(c, "there is no previous item%.*s%s", "", 0, "");
	if (IS("nextitem"))
		return i + 1 < len ? lp->items->v[i + 1] : undef_msg(c, "there is no next item%.*s%s", "", 0, "");
	if (IS("cycle"))
		return method_value(c, (struct tv){ .k = TV_LOOP, .u.lp = lp }, name, n);
#undef IS
	return undef_msg(c, "'LoopContext object' has no attribute '%.*s'%s", name, n, "");
}

struct tv tm_getattr(struct rctx *c, struct tv obj, const char *name, size_t n)
{
	struct tv v;
	switch (obj.k) {
	case TV_UNDEF: fail_undef(c, NULL, obj);
	case TV_NS:
		if (tv_dict_gets(obj.u.d, name, n, &v))
			return v;
		break;
	case TV_LOOP: return loop_attr(c, obj.u.lp, name, n);
	case TV_DICT:
		if (tm_has_method(obj, name, n))
			return method_value(c, obj, name, n);
		if (tv_dict_gets(obj.u.d, name, n, &v))
			return v;
		break;
	default:
		if (tm_has_method(obj, name, n))
			return method_value(c, obj, name, n);
		break;
	}
	return undef_msg(c, "'%.*s' has no attribute '%s'", obj_desc(obj), strlen(obj_desc(obj)),
			 tv_strdup(c, name, n > 60 ? 60 : n).u.s.p);
}

static bool as_index(struct tv k, int64_t *out)
{
	if (k.k == TV_INT) {
		*out = k.u.i;
		return true;
	}
	if (k.k == TV_BOOL) {
		*out = k.u.b;
		return true;
	}
	return false;
}

struct tv tm_getitem(struct rctx *c, struct tv obj, struct tv key, const struct node *at)
{
	struct tv v;
	int64_t idx;
	switch (obj.k) {
	case TV_UNDEF: fail_undef(c, at, obj);
	case TV_DICT:
		if (tv_dict_get(obj.u.d, key, &v))
			return v;
		break;
	case TV_LIST:
		if (obj.lazy) /* generators and views are not subscriptable: TypeError -> undefined */
			return undef_msg(c, "'%.*s' object is not subscriptable%s", tv_type_name(obj),
					 strlen(tv_type_name(obj)), "");
		if (as_index(key, &idx)) {
			int64_t len = (int64_t)obj.u.l->n;
			if (idx < 0)
				idx += len;
			if (idx >= 0 && idx < len)
				return obj.u.l->v[idx];
			return undef_msg(c, "%.*s%s", "list index out of range", 23, "");
		}
		break;
	case TV_STR:
		if (as_index(key, &idx)) {
			int64_t len = (int64_t)tv_utf8_len(obj.u.s.p, obj.u.s.n);
			if (idx < 0)
				idx += len;
			if (idx >= 0 && idx < len) {
				size_t b = tv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)idx);
				size_t e = tv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)idx + 1);
				return tv_str(obj.u.s.p + b, e - b);
			}
			return undef_msg(c, "%.*s%s", "string index out of range", 25, "");
		}
		break;
	default:
		break;
	}
	if (key.k == TV_STR)
		return tm_getattr(c, obj, key.u.s.p, key.u.s.n);
	return undef_msg(c, "'%.*s' has no such item%s", obj_desc(obj), strlen(obj_desc(obj)), "");
}

/* Python slice.indices for a sequence of length len. */
static void slice_indices(struct rctx *c, const struct node *at, struct tv vs, struct tv ve,
			  struct tv vst, int64_t len, int64_t *start, int64_t *stop, int64_t *step)
{
	int64_t st = 1;
	if (vst.k != TV_NONE && vst.k != TV_UNDEF && !as_index(vst, &st))
		tm_fail(c, at, PT_E_FORMAT, "slice indices must be integers or None");
	if (st == 0)
		tm_fail(c, at, PT_E_FORMAT, "slice step cannot be zero");
	int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? len - 1 : len;
	int64_t s = st < 0 ? hi : lo, e = st < 0 ? lo : hi;
	int64_t x;
	if (vs.k != TV_NONE && vs.k != TV_UNDEF) {
		if (!as_index(vs, &x))
			tm_fail(c, at, PT_E_FORMAT, "slice indices must be integers or None");
		s = x < 0 ? (x + len < lo ? lo : x + len) : (x > hi ? hi : x);
	}
	if (ve.k != TV_NONE && ve.k != TV_UNDEF) {
		if (!as_index(ve, &x))
			tm_fail(c, at, PT_E_FORMAT, "slice indices must be integers or None");
		e = x < 0 ? (x + len < lo ? lo : x + len) : (x > hi ? hi : x);
	}
	*start = s;
	*stop = e;
	*step = st;
}

static struct tv eval_slice(struct rctx *c, const struct node *e)
{
	struct tv obj = tm_eval(c, e->a);
	struct tv vs = e->b ? tm_eval(c, e->b) : tv_none();
	struct tv ve = e->c ? tm_eval(c, e->c) : tv_none();
	struct tv vst = e->d ? tm_eval(c, e->d) : tv_none();
	if (obj.k == TV_UNDEF)
		fail_undef(c, e, obj);
	if (obj.k == TV_LIST && obj.lazy)
		tm_fail(c, e, PT_E_FORMAT, "'%s' object is not subscriptable", tv_type_name(obj));
	struct tv items;
	if (obj.k == TV_STR)
		items = tv_iterate(c, obj, e);
	else if (obj.k == TV_LIST)
		items = obj;
	else /* unlike a failed item lookup, a failed slice raises in jinja2 */
		tm_fail(c, e, PT_E_FORMAT, "'%s' object cannot be sliced", tv_type_name(obj));
	int64_t len = (int64_t)items.u.l->n, s, st, step;
	slice_indices(c, e, vs, ve, vst, len, &s, &st, &step);
	struct tv out = tv_list_new(c, 0);
	out.tuple = obj.tuple;
	for (int64_t i = s; step > 0 ? i < st : i > st; i += step)
		tv_list_push(c, &out, items.u.l->v[i]);
	if (obj.k != TV_STR)
		return out;
	struct sbuf b = { 0 };
	for (size_t i = 0; i < out.u.l->n; i++)
		tm_buf_put(c, &b, out.u.l->v[i].u.s.p, out.u.l->v[i].u.s.n);
	return tv_str(b.p, b.n);
}

/* ---- operators ------------------------------------------------------------------------- */
_Noreturn static void bad_operands(struct rctx *c, const struct node *at, const char *op,
				   struct tv a, struct tv b)
{
	if (a.k == TV_UNDEF)
		fail_undef(c, at, a);
	if (b.k == TV_UNDEF)
		fail_undef(c, at, b);
	tm_fail(c, at, PT_E_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'", op,
		tv_type_name(a), tv_type_name(b));
}

static int64_t ival(struct tv v) { return v.k == TV_BOOL ? v.u.b : v.u.i; }

static struct tv repeat(struct rctx *c, const struct node *at, struct tv seq, int64_t times)
{
	if (times < 0 || (seq.k == TV_STR ? seq.u.s.n == 0 : seq.u.l->n == 0))
		times = 0;
	if (seq.k == TV_STR) {
		struct sbuf b = { 0 };
		if (seq.u.s.n && (uint64_t)times > c->lim.max_output / seq.u.s.n)
			tm_fail(c, at, PT_E_LIMIT, "string repetition longer than %llu bytes",
				(unsigned long long)c->lim.max_output);
		for (int64_t i = 0; i < times; i++)
			tm_buf_put(c, &b, seq.u.s.p, seq.u.s.n);
		return tv_str(b.p, b.n);
	}
	if (seq.u.l->n && (uint64_t)times > c->lim.max_iterations / seq.u.l->n)
		tm_fail(c, at, PT_E_LIMIT, "list repetition too long");
	struct tv out = tv_list_new(c, 0);
	out.tuple = seq.tuple;
	for (int64_t i = 0; i < times; i++)
		for (size_t k = 0; k < seq.u.l->n; k++)
			tv_list_push(c, &out, seq.u.l->v[k]);
	return out;
}

static struct tv int_result(struct rctx *c, const struct node *at, bool overflow, int64_t r)
{
	if (overflow)
		tm_fail(c, at, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
	return tv_int(r);
}

static struct tv arith_num(struct rctx *c, const struct node *at, int op, struct tv a,
			   struct tv b)
{
	bool ints = a.k != TV_FLOAT && b.k != TV_FLOAT;
	int64_t x = ival(a), y = ival(b), r = 0;
	bool ovf;
	double fx = tv_as_double(a), fy = tv_as_double(b);
	switch (op) {
	case OP_ADD:
		if (!ints)
			return tv_float(fx + fy);
		ovf = __builtin_add_overflow(x, y, &r);
		return int_result(c, at, ovf, r);
	case OP_SUB:
		if (!ints)
			return tv_float(fx - fy);
		ovf = __builtin_sub_overflow(x, y, &r);
		return int_result(c, at, ovf, r);
	case OP_MUL:
		if (!ints)
			return tv_float(fx * fy);
		ovf = __builtin_mul_overflow(x, y, &r);
		return int_result(c, at, ovf, r);
	case OP_DIV:
		if (fy == 0)
			tm_fail(c, at, PT_E_FORMAT, "division by zero");
		return tv_float(fx / fy);
	case OP_FDIV:
	case OP_MOD:
		if (ints) {
			if (y == 0)
				tm_fail(c, at, PT_E_FORMAT, "integer division or modulo by zero");
			if (x == INT64_MIN && y == -1)
				tm_fail(c, at, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
			int64_t q = x / y, m = x % y;
			if (m != 0 && ((m < 0) != (y < 0))) {
				q--;
				m += y;
			}
			return tv_int(op == OP_FDIV ? q : m);
		}
		if (fy == 0)
			tm_fail(c, at, PT_E_FORMAT, "float division by zero");
		if (op == OP_FDIV)
			return tv_float(floor(fx / fy));
		{
			double m = fmod(fx, fy);
			if (m != 0 && ((m < 0) != (fy < 0)))
				m += fy;
			else if (m == 0)
				m = copysign(0.0, fy);
			return tv_float(m);
		}
	case OP_POW:
		if (ints && y >= 0) {
			int64_t acc = 1;
			for (int64_t i = 0; i < y; i++) {
				if (__builtin_mul_overflow(acc, x, &acc))
					tm_fail(c, at, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
				if (acc == 0 || acc == 1)
					break;
			}
			if (acc == 1 && x == -1 && (y % 2))
				acc = -1;
			return tv_int(acc);
		}
		if (fx == 0 && fy < 0)
			tm_fail(c, at, PT_E_FORMAT, "0.0 cannot be raised to a negative power");
		if (fx < 0 && fy != floor(fy) && isfinite(fy))
			tm_fail(c, at, PT_E_UNSUPPORTED, "complex results of ** are not supported");
		{
			double p = pow(fx, fy);
			if (isinf(p) && isfinite(fx) && isfinite(fy)) /* Python raises OverflowError */
				tm_fail(c, at, PT_E_FORMAT, "numerical result out of range");
			return tv_float(p);
		}
	}
	return tv_none();
}

struct tv tm_binop(struct rctx *c, const struct node *at, int op, struct tv a, struct tv b)
{
	static const char *const names[] = { "", "+", "-", "*", "/", "//", "%", "**" };
	if (tv_is_number(a) && tv_is_number(b))
		return arith_num(c, at, op, a, b);
	if (op == OP_ADD && a.k == TV_STR && b.k == TV_STR) {
		struct sbuf s = { 0 };
		tm_buf_put(c, &s, a.u.s.p, a.u.s.n);
		tm_buf_put(c, &s, b.u.s.p, b.u.s.n);
		return s.n ? tv_str(s.p, s.n) : tv_str("", 0);
	}
	if (op == OP_ADD && a.k == TV_LIST && b.k == TV_LIST && a.tuple == b.tuple && !a.lazy &&
	    !b.lazy) {
		struct tv out = tv_list_new(c, a.u.l->n + b.u.l->n);
		out.tuple = a.tuple;
		for (size_t i = 0; i < a.u.l->n; i++)
			tv_list_push(c, &out, a.u.l->v[i]);
		for (size_t i = 0; i < b.u.l->n; i++)
			tv_list_push(c, &out, b.u.l->v[i]);
		return out;
	}
	if ((a.k == TV_LIST && a.lazy) || (b.k == TV_LIST && b.lazy))
		bad_operands(c, at, names[op], a, b);
	if (op == OP_MUL && (a.k == TV_STR || a.k == TV_LIST) && (b.k == TV_INT || b.k == TV_BOOL))
		return repeat(c, at, a, ival(b));
	if (op == OP_MUL && (b.k == TV_STR || b.k == TV_LIST) && (a.k == TV_INT || a.k == TV_BOOL))
		return repeat(c, at, b, ival(a));
	if (op == OP_MOD && a.k == TV_STR)
		return tm_percent_format(c, at, a, b);
	bad_operands(c, at, names[op], a, b);
}

static bool contains(struct rctx *c, const struct node *at, struct tv hay, struct tv x)
{
	switch (hay.k) {
	case TV_STR:
		if (x.k != TV_STR) {
			if (x.k == TV_UNDEF)
				fail_undef(c, at, x);
			tm_fail(c, at, PT_E_FORMAT, "'in <string>' requires string as left operand, not %s",
				tv_type_name(x));
		}
		if (x.u.s.n == 0)
			return true;
		return memmem(hay.u.s.p, hay.u.s.n, x.u.s.p, x.u.s.n) != NULL;
	case TV_LIST:
		hay = tv_iterate(c, hay, at);
		for (size_t i = 0; i < hay.u.l->n; i++)
			if (tv_equal(hay.u.l->v[i], x))
				return true;
		return false;
	case TV_DICT: {
		struct tv v;
		return tv_dict_get(hay.u.d, x, &v);
	}
	case TV_UNDEF: return false;
	default:
		tm_fail(c, at, PT_E_FORMAT, "argument of type '%s' is not iterable", tv_type_name(hay));
	}
}

static bool compare(struct rctx *c, const struct node *at, int op, struct tv a, struct tv b)
{
	switch (op) {
	case OP_EQ: return tv_equal(a, b);
	case OP_NE: return !tv_equal(a, b);
	case OP_IN: return contains(c, at, b, a);
	case OP_NOTIN: return !contains(c, at, b, a);
	default: break;
	}
	int r = tv_compare(c, at, a, b);
	switch (op) {
	case OP_LT: return r < 0;
	case OP_LE: return r <= 0;
	case OP_GT: return r > 0;
	default: return r >= 0;
	}
}

/* ---- calls ----------------------------------------------------------------------------- */
struct args {
	struct tv *pos;
	size_t npos;
	const char **kwn;
	size_t *kwl;
	struct tv *kwv;
	size_t nkw;
};

static void eval_args(struct rctx *c, struct node *const *list, size_t n, struct args *a)
{
	a->pos = tm_alloc(c, (n + 1) * sizeof *a->pos);
	a->kwv = tm_alloc(c, (n + 1) * sizeof *a->kwv);
	a->kwn = tm_alloc(c, (n + 1) * sizeof *a->kwn);
	a->npos = a->nkw = 0;
	for (size_t i = 0; i < n; i++) {
		if (list[i]->kind == E_KW) {
			a->kwn[a->nkw] = tv_strdup(c, list[i]->name, list[i]->name_len).u.s.p;
			a->kwv[a->nkw++] = tm_eval(c, list[i]->a);
		} else {
			a->pos[a->npos++] = tm_eval(c, list[i]);
		}
	}
}

static struct tv render_body_to_string(struct rctx *c, const struct node *body)
{
	struct sbuf *saved = c->out, b = { 0 };
	c->out = &b;
	exec_node(c, body);
	c->out = saved;
	return tv_str(b.p, b.n);
}

static struct tv call_macro(struct rctx *c, const struct node *at, struct tv_macro *mc,
			    struct tv *args, size_t nargs, const char **kwn, struct tv *kwv,
			    size_t nkw)
{
	const struct node *m = mc->m;
	int name_len = (int)(m->name_len > 40 ? 40 : m->name_len);
	if (++c->depth > c->lim.max_depth)
		tm_fail(c, at, PT_E_LIMIT, "macro calls nested deeper than %u levels", c->lim.max_depth);
	struct scope *s = scope_new(c, mc->closure), *saved = c->scope;
	struct tv varargs = tv_list_new(c, 0), kwargs = tv_dict_new(c, 0);
	varargs.tuple = true;
	for (size_t i = 0; i < nargs; i++) {
		if (i < m->n)
			tv_dict_set(c, s->vars, tv_str(m->list[i]->name, m->list[i]->name_len), args[i]);
		else if (m->op & MF_VARARGS)
			tv_list_push(c, &varargs, args[i]);
		else
			tm_fail(c, at, PT_E_FORMAT, "macro '%.*s' takes not more than %zu argument(s)",
				name_len, m->name, m->n);
	}
	for (size_t k = 0; k < nkw; k++) {
		size_t i;
		for (i = 0; i < m->n; i++)
			if (strlen(kwn[k]) == m->list[i]->name_len &&
			    memcmp(kwn[k], m->list[i]->name, m->list[i]->name_len) == 0)
				break;
		if (i < m->n) {
			if (i < nargs)
				tm_fail(c, at, PT_E_FORMAT, "macro '%.*s' got multiple values for argument '%s'",
					name_len, m->name, kwn[k]);
			tv_dict_set(c, s->vars, tv_cstr(kwn[k]), kwv[k]);
		} else if (strcmp(kwn[k], "caller") == 0) {
			tv_dict_set(c, s->vars, tv_cstr("caller"), kwv[k]);
		} else if (m->op & MF_KWARGS) {
			tv_dict_set(c, kwargs.u.d, tv_cstr(kwn[k]), kwv[k]);
		} else {
			tm_fail(c, at, PT_E_FORMAT, "macro '%.*s' takes no keyword argument '%s'",
				name_len, m->name, kwn[k]);
		}
	}
	c->scope = s;
	for (size_t i = 0; i < m->n; i++) {
		struct tv v;
		const struct node *p = m->list[i];
		if (tv_dict_gets(s->vars, p->name, p->name_len, &v))
			continue;
		v = p->kind == E_KW ? tm_eval(c, p->a)
				    : undef_msg(c, "parameter '%.*s' was not provided%s", p->name, p->name_len, "");
		tv_dict_set(c, s->vars, tv_str(p->name, p->name_len), v);
	}
	if (m->op & MF_VARARGS)
		tv_dict_set(c, s->vars, tv_cstr("varargs"), varargs);
	if (m->op & MF_KWARGS)
		tv_dict_set(c, s->vars, tv_cstr("kwargs"), kwargs);
	struct tv out = render_body_to_string(c, m->b);
	c->scope = saved;
	c->depth--;
	return out;
}

struct tv tm_call_value(struct rctx *c, const struct node *at, struct tv fn, struct tv *args,
			size_t nargs, const char **kwn, struct tv *kwv, size_t nkw)
{
	switch (fn.k) {
	case TV_MACRO: return call_macro(c, at, fn.u.mc, args, nargs, kwn, kwv, nkw);
	case TV_FUNC: return tm_call_func(c, at, fn.u.fn, args, nargs, kwn, kwv, nkw);
	case TV_METHOD:
		return tm_call_method(c, at, fn.u.bm->self, fn.u.bm->name, args, nargs, kwn, kwv, nkw);
	case TV_UNDEF: fail_undef(c, at, fn);
	default:
		tm_fail(c, at, PT_E_FORMAT, "'%s' object is not callable", tv_type_name(fn));
	}
}

static struct tv eval_call(struct rctx *c, const struct node *e)
{
	struct args a;
	struct tv fn;
	if (e->a->kind == E_ATTR) { /* obj.method(...) without materializing a bound method */
		struct tv obj = tm_eval(c, e->a->a);
		if (obj.k != TV_UNDEF && obj.k != TV_NS && obj.k != TV_LOOP &&
		    tm_has_method(obj, e->a->name, e->a->name_len)) {
			eval_args(c, e->list, e->n, &a);
			char *name = (char *)tv_strdup(c, e->a->name, e->a->name_len).u.s.p;
			return tm_call_method(c, e, obj, name, a.pos, a.npos, a.kwn, a.kwv, a.nkw);
		}
		if (obj.k == TV_UNDEF)
			fail_undef(c, e->a, obj);
		fn = tm_getattr(c, obj, e->a->name, e->a->name_len);
	} else {
		fn = tm_eval(c, e->a);
	}
	eval_args(c, e->list, e->n, &a);
	return tm_call_value(c, e, fn, a.pos, a.npos, a.kwn, a.kwv, a.nkw);
}

static struct tv apply_filter(struct rctx *c, const struct node *f, struct tv x)
{
	struct args a;
	if (f->soft)
		tm_fail(c, f, PT_E_UNSUPPORTED, "no filter named '%.*s'",
			(int)(f->name_len > 40 ? 40 : f->name_len), f->name);
	eval_args(c, f->list, f->n, &a);
	char *name = (char *)tv_strdup(c, f->name, f->name_len).u.s.p;
	return tm_filter(c, f, name, x, a.pos, a.npos, a.kwn, a.kwv, a.nkw);
}

static struct tv eval_test(struct rctx *c, const struct node *e)
{
	struct args a;
	if (e->soft)
		tm_fail(c, e, PT_E_UNSUPPORTED, "no test named '%.*s'",
			(int)(e->name_len > 40 ? 40 : e->name_len), e->name);
	struct tv x = tm_eval(c, e->a);
	eval_args(c, e->list, e->n, &a);
	if (a.nkw)
		tm_fail(c, e, PT_E_UNSUPPORTED, "keyword arguments to tests are not supported");
	char *name = (char *)tv_strdup(c, e->name, e->name_len).u.s.p;
	bool r = tm_test(c, e, name, x, a.pos, a.npos);
	return tv_bool(e->op ? !r : r);
}

/* ---- expressions ----------------------------------------------------------------------- */
static struct tv eval_seq(struct rctx *c, const struct node *e)
{
	struct tv l = tv_list_new(c, e->n);
	l.tuple = e->kind == E_TUPLE;
	for (size_t i = 0; i < e->n; i++)
		tv_list_push(c, &l, tm_eval(c, e->list[i]));
	return l;
}

static struct tv eval_compare(struct rctx *c, const struct node *e)
{
	struct tv left = tm_eval(c, e->a);
	for (size_t i = 0; i < e->n; i++) {
		struct tv right = tm_eval(c, e->list2[i]);
		if (!compare(c, e->list[i], e->list[i]->op, left, right))
			return tv_bool(false);
		left = right;
	}
	return tv_bool(true);
}

static struct tv eval_concat(struct rctx *c, const struct node *e)
{
	struct sbuf b = { 0 };
	for (size_t i = 0; i < e->n; i++)
		tv_str_to(c, &b, tm_eval(c, e->list[i]), e);
	return tv_str(b.p, b.n);
}

struct tv tm_eval(struct rctx *c, const struct node *e)
{
	struct tv x, y;
	switch (e->kind) {
	case E_LIT: return e->val;
	case E_NAME: return eval_name(c, c->scope, e);
	case E_LIST: case E_TUPLE: return eval_seq(c, e);
	case E_DICT:
		x = tv_dict_new(c, e->n);
		for (size_t i = 0; i < e->n; i++) {
			struct tv k = tm_eval(c, e->list[i]);
			tv_dict_set(c, x.u.d, k, tm_eval(c, e->list2[i]));
		}
		return x;
	case E_ATTR:
		x = tm_eval(c, e->a);
		if (x.k == TV_UNDEF)
			fail_undef(c, e, x);
		return tm_getattr(c, x, e->name, e->name_len);
	case E_ITEM:
		x = tm_eval(c, e->a);
		return tm_getitem(c, x, tm_eval(c, e->b), e);
	case E_SLICE: return eval_slice(c, e);
	case E_CALL: return eval_call(c, e);
	case E_FILTER: return apply_filter(c, e, tm_eval(c, e->a));
	case E_TEST: return eval_test(c, e);
	case E_NEG: case E_POS:
		x = tm_eval(c, e->a);
		if (!tv_is_number(x)) {
			if (x.k == TV_UNDEF)
				fail_undef(c, e, x);
			tm_fail(c, e, PT_E_FORMAT, "bad operand type for unary %c: '%s'",
				e->kind == E_NEG ? '-' : '+', tv_type_name(x));
		}
		if (e->kind == E_POS)
			return x.k == TV_BOOL ? tv_int(x.u.b) : x;
		if (x.k == TV_FLOAT)
			return tv_float(-x.u.f);
		if (ival(x) == INT64_MIN)
			tm_fail(c, e, PT_E_UNSUPPORTED, "integer result outside the 64-bit range");
		return tv_int(-ival(x));
	case E_NOT: return tv_bool(!tv_truthy(tm_eval(c, e->a)));
	case E_AND:
		x = tm_eval(c, e->a);
		return tv_truthy(x) ? tm_eval(c, e->b) : x;
	case E_OR:
		x = tm_eval(c, e->a);
		return tv_truthy(x) ? x : tm_eval(c, e->b);
	case E_BIN:
		x = tm_eval(c, e->a);
		y = tm_eval(c, e->b);
		return tm_binop(c, e, e->op, x, y);
	case E_COND:
		if (tv_truthy(tm_eval(c, e->a)))
			return tm_eval(c, e->b);
		if (e->c)
			return tm_eval(c, e->c);
		return undef_msg(c, "the inline if-expression evaluated to false and no else section was defined%.*s%s", "", 0, "");
	case E_COMPARE: return eval_compare(c, e);
	case E_CONCAT: return eval_concat(c, e);
	default:
		tm_fail(c, e, PT_E_UNSUPPORTED, "unexpected expression node");
	}
}

/* ---- statements ------------------------------------------------------------------------ */
static void assign(struct rctx *c, const struct node *target, struct tv v)
{
	if (target->kind == E_NAME) {
		tv_dict_set(c, c->scope->vars, tv_str(target->name, target->name_len), v);
		return;
	}
	if (target->kind == E_ATTR) {
		struct tv ns = eval_name(c, c->scope, target->a);
		if (ns.k != TV_NS)
			tm_fail(c, target, PT_E_FORMAT, "cannot assign attribute on non-namespace object");
		tv_dict_set(c, ns.u.d, tv_strdup(c, target->name, target->name_len), v);
		return;
	}
	/* tuple unpacking */
	struct tv items = tv_iterate(c, v, target);
	if (items.u.l->n != target->n)
		tm_fail(c, target, PT_E_FORMAT, "%s values to unpack (expected %zu, got %zu)",
			items.u.l->n > target->n ? "too many" : "not enough", target->n, items.u.l->n);
	for (size_t i = 0; i < target->n; i++)
		assign(c, target->list[i], items.u.l->v[i]);
}

static void count_iteration(struct rctx *c, const struct node *at)
{
	if (++c->iterations > c->lim.max_iterations)
		tm_fail(c, at, PT_E_LIMIT, "more than %llu loop iterations",
			(unsigned long long)c->lim.max_iterations);
}

static enum flow exec_for(struct rctx *c, const struct node *n)
{
	struct tv all = tv_iterate(c, tm_eval(c, n->b), n->b);
	struct scope *saved = c->scope;
	struct tv items = all;
	if (n->c) { /* loop filter: applied before loop.* is computed */
		items = tv_list_new(c, 0);
		for (size_t i = 0; i < all.u.l->n; i++) {
			count_iteration(c, n);
			c->scope = scope_new(c, saved);
			assign(c, n->a, all.u.l->v[i]);
			if (tv_truthy(tm_eval(c, n->c)))
				tv_list_push(c, &items, all.u.l->v[i]);
			c->scope = saved;
		}
	}
	struct tv_loop *lp = tm_alloc(c, sizeof *lp);
	lp->items = items.u.l;
	for (size_t i = 0; i < items.u.l->n; i++) {
		count_iteration(c, n);
		c->scope = scope_new(c, saved);
		lp->i = i;
		assign(c, n->a, items.u.l->v[i]);
		tv_dict_set(c, c->scope->vars, tv_cstr("loop"), (struct tv){ .k = TV_LOOP, .u.lp = lp });
		enum flow f = exec_node(c, n->d);
		c->scope = saved;
		if (f == FLOW_BREAK)
			break;
	}
	if (items.u.l->n == 0 && n->n2)
		return exec_node(c, n->list2[0]);
	return FLOW_NORMAL;
}

static struct tv apply_filter_chain(struct rctx *c, struct node *const *fl, size_t n, struct tv x)
{
	for (size_t i = 0; i < n; i++)
		x = apply_filter(c, fl[i], x);
	return x;
}

static enum flow exec_callblock(struct rctx *c, const struct node *n)
{
	const struct node *call = n->a;
	struct tv_macro *caller = tm_alloc(c, sizeof *caller);
	caller->m = n->b;
	caller->closure = c->scope;
	struct tv fn = tm_eval(c, call->a);
	if (fn.k != TV_MACRO)
		tm_fail(c, call, PT_E_FORMAT, "call blocks need a macro, got '%s'", tv_type_name(fn));
	struct args a;
	eval_args(c, call->list, call->n, &a);
	a.kwn[a.nkw] = "caller";
	a.kwv[a.nkw++] = (struct tv){ .k = TV_MACRO, .u.mc = caller };
	struct tv out = call_macro(c, call, fn.u.mc, a.pos, a.npos, a.kwn, a.kwv, a.nkw);
	tm_buf_put(c, c->out, out.u.s.p, out.u.s.n);
	return FLOW_NORMAL;
}

static enum flow exec_node(struct rctx *c, const struct node *n)
{
	switch (n->kind) {
	case S_BODY:
		/* The parser bounds nesting inside one template; macro recursion multiplies it,
		 * so the total is bounded too (stack use stays far below 8 MiB). */
		if (++c->body_depth > 4 * PT_TMPL_MAX_DEPTH)
			tm_fail(c, n, PT_E_LIMIT, "rendering nested deeper than %d blocks",
				4 * PT_TMPL_MAX_DEPTH);
		for (size_t i = 0; i < n->n; i++) {
			enum flow f = exec_node(c, n->list[i]);
			if (f != FLOW_NORMAL) {
				c->body_depth--;
				return f;
			}
		}
		c->body_depth--;
		return FLOW_NORMAL;
	case S_TEXT:
		tm_buf_put(c, c->out, n->val.u.s.p, n->val.u.s.n);
		return FLOW_NORMAL;
	case S_OUT:
		tv_str_to(c, c->out, tm_eval(c, n->a), n);
		return FLOW_NORMAL;
	case S_IF:
		if (tv_truthy(tm_eval(c, n->a)))
			return exec_node(c, n->b);
		return n->c ? exec_node(c, n->c) : FLOW_NORMAL;
	case S_FOR: return exec_for(c, n);
	case S_SET: assign(c, n->a, tm_eval(c, n->b)); return FLOW_NORMAL;
	case S_SETBLOCK:
		assign(c, n->a, apply_filter_chain(c, n->list, n->n, render_body_to_string(c, n->b)));
		return FLOW_NORMAL;
	case S_FILTERBLOCK: {
		struct tv v = apply_filter_chain(c, n->list, n->n, render_body_to_string(c, n->b));
		tv_str_to(c, c->out, v, n);
		return FLOW_NORMAL;
	}
	case S_MACRO: {
		struct tv_macro *mc = tm_alloc(c, sizeof *mc);
		mc->m = n;
		mc->closure = c->scope;
		tv_dict_set(c, c->scope->vars, tv_str(n->name, n->name_len),
			    (struct tv){ .k = TV_MACRO, .u.mc = mc });
		return FLOW_NORMAL;
	}
	case S_CALLBLOCK: return exec_callblock(c, n);
	case S_BREAK: return FLOW_BREAK;
	case S_CONTINUE: return FLOW_CONTINUE;
	default:
		tm_fail(c, n, PT_E_UNSUPPORTED, "unexpected statement node");
	}
}

/* ---- entry points ---------------------------------------------------------------------- */
struct pt_tmpl_limits pt_tmpl_default_limits(void)
{
	return (struct pt_tmpl_limits){ .max_output = PT_TMPL_MAX_OUTPUT,
					.max_iterations = PT_TMPL_MAX_ITERATIONS,
					.max_memory = PT_TMPL_MAX_MEMORY,
					.max_depth = PT_TMPL_MAX_DEPTH };
}

static void bind_vars(struct rctx *c, const cJSON *vars)
{
	if (!vars)
		return;
	if (!cJSON_IsObject(vars))
		tm_fail(c, NULL, PT_E_INVALID, "variables must be a JSON object");
	for (const cJSON *e = vars->child; e; e = e->next)
		tv_dict_set(c, c->root->vars, tv_strdup(c, e->string, strlen(e->string)),
			    tv_from_cjson(c, e, 0));
}

static enum pt_status render(const pt_tmpl *t, const cJSON *vars,
			     const struct pt_tmpl_limits *limits, time_t now, char **out,
			     size_t *out_len, struct pt_error *rec)
{
	*out = NULL;
	*out_len = 0;
	struct rctx *c = pt_calloc(1, sizeof *c);
	if (!c)
		return pt_error_set(rec, PT_E_NOMEM, "out of memory");
	c->t = t;
	c->err = rec;
	c->lim = limits ? *limits : pt_tmpl_default_limits();
	c->arena.limit = c->lim.max_memory;
	c->now = now ? now : time(NULL);
	enum pt_status st = PT_OK;
	if (setjmp(c->jb)) {
		st = c->status;
	} else {
		struct sbuf *b = tm_alloc(c, sizeof *b);
		c->out = b;
		c->root = scope_new(c, NULL);
		c->scope = c->root;
		bind_vars(c, vars);
		exec_node(c, t->root);
		char *res = pt_malloc(b->n + 1);
		if (!res) {
			st = pt_error_set(rec, PT_E_NOMEM, "out of memory");
		} else {
			if (b->n)
				memcpy(res, b->p, b->n);
			res[b->n] = 0;
			*out = res;
			*out_len = b->n;
		}
	}
	tm_arena_free(&c->arena);
	pt_free(c);
	return st;
}

enum pt_status pt_tmpl_render(const pt_tmpl *t, const cJSON *vars,
			      const struct pt_tmpl_limits *limits, time_t now, char **out,
			      size_t *out_len, struct pt_error *err)
{
	struct pt_error local = { 0 }; /* deferred generator errors need a record */
	return render(t, vars, limits, now, out, out_len, err ? err : &local);
}
