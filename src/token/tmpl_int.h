/* tmpl_int.h - internals shared by the tmpl_*.c files (not a public header).
 *
 * Memory: a template's AST and every render-time value live in arenas, so errors unwind
 * with longjmp (one jmp_buf per parse/render) and nothing is freed piecemeal.  Values are
 * immutable after construction except namespace objects, mirroring the immutable sandbox.
 */
#ifndef PT_TOKEN_TMPL_INT_H
#define PT_TOKEN_TMPL_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "token/tmpl.h"

/* ---- arena ---------------------------------------------------------------------------- */
struct arena_chunk;
struct arena {
	struct arena_chunk *head;
	uint64_t used, limit;
	bool over_limit; /* the last failure was the limit, not the system */
};
void *tm_arena_alloc(struct arena *a, size_t n); /* zeroed; NULL when over limit or OOM */
void tm_arena_free(struct arena *a);

/* ---- values --------------------------------------------------------------------------- */
enum tv_kind {
	TV_UNDEF, TV_NONE, TV_BOOL, TV_INT, TV_FLOAT, TV_STR, TV_LIST, TV_DICT, TV_NS,
	TV_MACRO, TV_FUNC, TV_METHOD, TV_LOOP,
};
struct scope;
struct tv_macro {
	const struct node *m; /* S_MACRO */
	struct scope *closure;
};
struct tv_loop {
	const struct tv_list *items;
	size_t i;
};
/* Python objects a TV_LIST stands in for, where they behave differently from a list. */
enum tv_lazy { LZ_NONE, LZ_GEN, LZ_ITEMS, LZ_KEYS, LZ_VALUES };
struct tv_list;
struct tv_dict;
struct tv_method;
struct node;
struct tv {
	enum tv_kind k;
	bool tuple;   /* TV_LIST built as a tuple (affects repr only) */
	uint8_t lazy; /* TV_LIST standing for a Python generator or dict view: enum tv_lazy */
	union {
		bool b;
		int64_t i;
		double f;
		struct { const char *p; size_t n; } s; /* TV_STR; TV_UNDEF: the name hint */
		struct tv_list *l;
		struct tv_dict *d;                     /* TV_DICT, TV_NS */
		struct tv_macro *mc;                   /* TV_MACRO */
		struct tv_loop *lp;                    /* TV_LOOP */
		int fn;                                /* TV_FUNC */
		struct tv_method *bm;                  /* TV_METHOD */
	} u;
};
struct tv_list {
	size_t n, cap;
	struct tv *v;
	const char *poison;       /* generator whose evaluation failed: the error, raised */
	enum pt_status poison_st; /* when it is consumed (jinja2 generators are lazy) */
};
struct tv_dict {
	size_t n, cap;
	struct tv *keys, *vals;
	uint32_t *index; /* open addressing over hashable keys (entry + 1), once n > 16 */
	size_t icap;
};
struct tv_method {
	struct tv self;
	const char *name;
};

/* ---- AST ------------------------------------------------------------------------------ */
enum node_kind {
	/* expressions */
	E_LIT, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_KW,
	E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_COND, E_COMPARE,
	E_CONCAT,
	/* statements */
	S_BODY, S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK,
	S_FILTERBLOCK, S_BREAK, S_CONTINUE,
};
/* S_MACRO op bits: special names its body uses. */
enum { MF_CALLER = 1, MF_VARARGS = 2, MF_KWARGS = 4 };
enum op {
	OP_NONE, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW,
	OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};
struct node {
	enum node_kind kind;
	int op;               /* enum op; E_TEST: negated */
	uint32_t off;         /* source offset, for errors */
	struct node *a, *b, *c, *d;
	struct node **list;   /* items, args, body statements, params */
	size_t n;
	struct node **list2;  /* E_DICT values, E_COMPARE operands */
	size_t n2;
	const char *name;     /* E_NAME, E_ATTR, E_KW, E_FILTER/E_TEST name, S_MACRO name */
	size_t name_len;
	struct tv val;        /* E_LIT; S_TEXT uses val.u.s */
	bool soft;            /* E_FILTER/E_TEST: unknown name, fail only when evaluated */
	bool uses_caller;     /* S_MACRO */
};

/* ---- template ------------------------------------------------------------------------- */
struct pt_tmpl {
	struct arena arena;
	char *src;            /* normalized source (own copy) */
	size_t len;
	struct node *root;
};

/* Line and column (1-based, columns in bytes) of an offset of the normalized source. */
void tm_line_col(const char *src, size_t len, size_t off, unsigned *line, unsigned *col);

/* Parser entry (tmpl_parse.c). */
enum pt_status tm_parse(struct pt_tmpl *t, struct pt_error *err);

/* Name tables (tmpl_builtin.c). */
bool tm_filter_known(const char *name, size_t n);
bool tm_test_known(const char *name, size_t n);

/* ---- render context (tmpl_eval.c / tmpl_builtin.c / tmpl_value.c) --------------------- */
struct scope {
	struct scope *parent;
	struct tv_dict *vars;
};
struct sbuf {
	char *p;
	size_t n, cap;
};
struct rctx {
	jmp_buf jb;
	struct arena arena;
	const struct pt_tmpl *t;
	struct pt_tmpl_limits lim;
	struct pt_error *err;
	enum pt_status status;
	struct scope *root;
	struct scope *scope; /* innermost */
	struct sbuf *out;
	uint64_t iterations;
	uint32_t depth;      /* macro calls */
	uint32_t body_depth; /* nested blocks, across macro calls */
	time_t now;
};

/* Failure: records "<msg> at line L, column C" (node may be NULL) and longjmps. */
_Noreturn void tm_fail(struct rctx *c, const struct node *at, enum pt_status code,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Raises a previously recorded error message again (a poisoned generator). */
_Noreturn void tm_fail_raw(struct rctx *c, enum pt_status code, const char *msg);
void *tm_alloc(struct rctx *c, size_t n);
void tm_buf_put(struct rctx *c, struct sbuf *b, const char *p, size_t n);
void tm_buf_putc(struct rctx *c, struct sbuf *b, char ch);

/* Value helpers (tmpl_value.c). */
struct tv tv_undef(const char *hint, size_t n);
struct tv tv_none(void);
struct tv tv_bool(bool b);
struct tv tv_int(int64_t i);
struct tv tv_float(double f);
struct tv tv_str(const char *p, size_t n);        /* no copy: p must outlive the render */
struct tv tv_strdup(struct rctx *c, const char *p, size_t n);
struct tv tv_cstr(const char *s);                  /* static string */
struct tv tv_list_new(struct rctx *c, size_t cap);
void tv_list_push(struct rctx *c, struct tv *list, struct tv v);
struct tv tv_dict_new(struct rctx *c, size_t cap);
void tv_dict_set(struct rctx *c, struct tv_dict *d, struct tv key, struct tv v);
bool tv_dict_get(const struct tv_dict *d, struct tv key, struct tv *out);
bool tv_dict_gets(const struct tv_dict *d, const char *key, size_t n, struct tv *out);
bool tv_truthy(struct tv v);
bool tv_equal(struct tv a, struct tv b);
int tv_compare(struct rctx *c, const struct node *at, struct tv a, struct tv b); /* <0,0,>0 */
const char *tv_type_name(struct tv v);
bool tv_is_number(struct tv v);                   /* int, float or bool */
double tv_as_double(struct tv v);
/* str(v) and repr(v) as Python prints them, appended to b. */
void tv_str_to(struct rctx *c, struct sbuf *b, struct tv v, const struct node *at);
void tv_repr_to(struct rctx *c, struct sbuf *b, struct tv v, const struct node *at);
struct tv tv_to_string(struct rctx *c, struct tv v, const struct node *at);
void tv_float_repr(double f, char *buf, size_t n);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: None), separators=(item, key)). */
void tv_json_to(struct rctx *c, struct sbuf *b, struct tv v, int indent, const char *item_sep,
		const char *key_sep, bool sort_keys, int level, const struct node *at);
struct tv tv_from_cjson(struct rctx *c, const struct cJSON *j, int depth);
/* UTF-8 helpers: code-point count and byte offset of code point i (clamped). */
size_t tv_utf8_len(const char *p, size_t n);
size_t tv_utf8_offset(const char *p, size_t n, size_t i);
/* Materialize an iterable (list, tuple, dict keys, string chars, undefined=empty). */
struct tv tv_iterate(struct rctx *c, struct tv v, const struct node *at);

/* Evaluation (tmpl_eval.c) used by builtins. */
struct tv tm_eval(struct rctx *c, const struct node *e);
struct tv tm_getattr(struct rctx *c, struct tv obj, const char *name, size_t n);
struct tv tm_getitem(struct rctx *c, struct tv obj, struct tv key, const struct node *at);
struct tv tm_call_value(struct rctx *c, const struct node *at, struct tv fn, struct tv *args,
			size_t nargs, const char **kwn, struct tv *kwv, size_t nkw);

/* Python binary arithmetic (enum op OP_ADD..OP_POW). */
struct tv tm_binop(struct rctx *c, const struct node *at, int op, struct tv a, struct tv b);

/* Python's 'fmt' % args (tmpl_format.c): s r a d i u f F e E g G x X o c and %%, with
 * flags, width and precision; a tuple gives several arguments, a mapping %(key)s. */
struct tv tm_percent_format(struct rctx *c, const struct node *at, struct tv fmt, struct tv args);

/* Builtins (tmpl_builtin.c). args/kw are evaluated. */
struct tv tm_filter(struct rctx *c, const struct node *at, const char *name, struct tv x,
		    struct tv *args, size_t nargs, const char **kwn, struct tv *kwv, size_t nkw);
bool tm_test(struct rctx *c, const struct node *at, const char *name, struct tv x,
	     struct tv *args, size_t nargs);
struct tv tm_call_method(struct rctx *c, const struct node *at, struct tv self,
			 const char *name, struct tv *args, size_t nargs, const char **kwn,
			 struct tv *kwv, size_t nkw);
bool tm_has_method(struct tv self, const char *name, size_t n);
enum tm_func { FN_RANGE, FN_NAMESPACE, FN_RAISE, FN_STRFTIME, FN_DICT, FN_CALLER, FN_COUNT };
bool tm_global_func(const char *name, size_t n, struct tv *out);
struct tv tm_call_func(struct rctx *c, const struct node *at, int fn, struct tv *args,
		       size_t nargs, const char **kwn, struct tv *kwv, size_t nkw);

#endif
