/* grammar.c - compiles JSON Schema (and json_object, and literal+schema alternatives) into
 * the node graph the matcher runs (grammar_int.h); the supported subset is in grammar.h. */
#include "gen/grammar.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/grammar_int.h"
#include "util/alloc.h"

#define COMPILE_MAX_NEST 128   /* nested subschemas while compiling */
#define MAX_PROPS 1024         /* properties of one object */
#define MAX_LIT_BYTES (1u << 20)
#define MAX_LEN_BOUND 10000000 /* minLength / maxLength */
#define MAX_MIN_ITEMS 65536

struct memo {
	const cJSON *s;
	uint32_t node;
};

struct comp {
	pt_grammar *g;
	struct pt_error *err;
	const cJSON *doc;      /* what "#" refers to */
	struct memo *memo;
	uint32_t n_memo, cap_memo;
	uint32_t *oneofs;      /* union nodes compiled from oneOf, checked after analysis */
	char **oneof_paths;
	uint32_t n_oneofs, cap_oneofs;
	uint32_t nest;
	uint64_t lit_bytes;
	char path[512];
	size_t plen;
};

/* ---- growable arrays ------------------------------------------------------------------ */

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	uint32_t c = *cap ? *cap : 16;
	while (c < need) {
		if (c > UINT32_MAX / 2)
			return false;
		c *= 2;
	}
	void *q = pt_reallocn(*p, c, elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static enum pt_status nomem(struct comp *c)
{
	return pt_error_set(c->err, PT_E_NOMEM, "grammar: out of memory");
}

/* ---- paths and errors ----------------------------------------------------------------- */

/* Appends "/seg" (JSON-pointer escaped); returns the old length for path_pop. */
static size_t path_push(struct comp *c, const char *seg)
{
	size_t old = c->plen;
	size_t cap = sizeof c->path - 4;
	if (c->plen < cap)
		c->path[c->plen++] = '/';
	for (const char *p = seg; *p && c->plen < cap; p++) {
		if (*p == '~' || *p == '/') {
			c->path[c->plen++] = '~';
			if (c->plen < cap)
				c->path[c->plen++] = *p == '~' ? '0' : '1';
		} else {
			c->path[c->plen++] = *p;
		}
	}
	c->path[c->plen] = 0;
	return old;
}

static size_t path_push_index(struct comp *c, size_t i)
{
	char b[24];
	snprintf(b, sizeof b, "%zu", i);
	return path_push(c, b);
}

static void path_pop(struct comp *c, size_t old)
{
	c->plen = old;
	c->path[old] = 0;
}

/* An error about keyword kw (NULL: the schema itself) at the current path. */
__attribute__((format(printf, 3, 4))) static enum pt_status bad(struct comp *c, const char *kw,
								 const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	size_t old = kw ? path_push(c, kw) : c->plen;
	enum pt_status st = pt_error_set(c->err, PT_E_INVALID, "JSON schema at %s: %s",
					 c->plen ? c->path : "/", msg);
	path_pop(c, old);
	return st;
}

/* ---- nodes and literals --------------------------------------------------------------- */

static enum pt_status new_node(struct comp *c, uint8_t kind, uint32_t *out)
{
	pt_grammar *g = c->g;
	if (g->n_nodes >= PT_GRAMMAR_MAX_NODES)
		return pt_error_set(c->err, PT_E_LIMIT, "JSON schema: more than %d nodes",
				    PT_GRAMMAR_MAX_NODES);
	if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
		return nomem(c);
	struct gr_node *nd = &g->nodes[g->n_nodes];
	memset(nd, 0, sizeof *nd);
	nd->kind = kind;
	nd->min_depth = GR_INF;
	nd->max = GR_NONE;
	nd->addl = GR_NONE;
	nd->keystr = GR_NONE;
	nd->items = GR_NONE;
	*out = g->n_nodes++;
	return PT_OK;
}

static enum pt_status add_lit(struct comp *c, const char *p, size_t n, uint32_t *out)
{
	pt_grammar *g = c->g;
	c->lit_bytes += n;
	if (n > MAX_LIT_BYTES || c->lit_bytes > MAX_LIT_BYTES)
		return pt_error_set(c->err, PT_E_LIMIT, "JSON schema: literals over %u bytes",
				    MAX_LIT_BYTES);
	if (!grow((void **)&g->lits, &g->cap_lits, g->n_lits + 1, sizeof *g->lits))
		return nomem(c);
	char *q = pt_malloc(n ? n : 1);
	if (!q)
		return nomem(c);
	memcpy(q, p, n);
	g->lits[g->n_lits].p = q;
	g->lits[g->n_lits].n = (uint32_t)n;
	*out = g->n_lits++;
	return PT_OK;
}

static int cmp_lit(const void *a, const void *b, void *ctx)
{
	const pt_grammar *g = ctx;
	const struct gr_bytes *x = &g->lits[*(const uint32_t *)a];
	const struct gr_bytes *y = &g->lits[*(const uint32_t *)b];
	uint32_t n = x->n < y->n ? x->n : y->n;
	int r = n ? memcmp(x->p, y->p, n) : 0;
	if (r)
		return r;
	return x->n < y->n ? -1 : x->n > y->n;
}

/* Sorts and dedupes lit indexes ids[0..n) and appends them to lsorted: *lo, *cnt. */
static enum pt_status add_sorted(struct comp *c, uint32_t *ids, uint32_t n, uint32_t *lo,
				 uint32_t *cnt)
{
	pt_grammar *g = c->g;
	if (n > 1) /* glibc qsort_r: no global state, grammars compile on any thread */
		qsort_r(ids, n, sizeof *ids, cmp_lit, g);
	if (!grow((void **)&g->lsorted, &g->cap_lsorted, g->n_lsorted + n, sizeof *g->lsorted))
		return nomem(c);
	*lo = g->n_lsorted;
	for (uint32_t i = 0; i < n; i++)
		if (i == 0 || cmp_lit(&ids[i - 1], &ids[i], g) != 0)
			g->lsorted[g->n_lsorted++] = ids[i];
	*cnt = g->n_lsorted - *lo;
	return PT_OK;
}

static enum pt_status add_kids(struct comp *c, const uint32_t *k, uint32_t n, uint32_t *lo)
{
	pt_grammar *g = c->g;
	if (!grow((void **)&g->kids, &g->cap_kids, g->n_kids + n, sizeof *g->kids))
		return nomem(c);
	*lo = g->n_kids;
	if (n)
		memcpy(g->kids + g->n_kids, k, n * sizeof *k);
	g->n_kids += n;
	return PT_OK;
}

static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		unsigned char lo = 0x80, hi = 0xbf;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			lo = c == 0xe0 ? 0xa0 : 0x80;
			hi = c == 0xed ? 0x9f : 0xbf;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			lo = c == 0xf0 ? 0x90 : 0x80;
			hi = c == 0xf4 ? 0x8f : 0xbf;
		} else {
			return false;
		}
		if (i + k >= n)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t j = 2; j <= k; j++)
			if (s[i + j] < 0x80 || s[i + j] > 0xbf)
				return false;
		i += k + 1;
	}
	return true;
}

/* The JSON string literal for name (quotes included) into a pt_malloc'd buffer. */
static char *json_quote(const char *name, size_t *len)
{
	size_t n = strlen(name), k = 2;
	for (size_t i = 0; i < n; i++)
		k += (unsigned char)name[i] < 0x20 ? 6 : (name[i] == '"' || name[i] == '\\') ? 2 : 1;
	char *o = pt_malloc(k + 1), *w = o;
	if (!o)
		return NULL;
	*w++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (ch < 0x20) {
			snprintf(w, 7, "\\u%04x", ch);
			w += 6;
		} else {
			if (ch == '"' || ch == '\\')
				*w++ = '\\';
			*w++ = (char)ch;
		}
	}
	*w++ = '"';
	*w = 0;
	*len = k;
	return o;
}

/* ---- the any-value node ---------------------------------------------------------------- */

static enum pt_status lit_node(struct comp *c, const char *const *words, uint32_t n,
			       uint32_t *out)
{
	uint32_t ids[4], node;
	enum pt_status st = new_node(c, GR_LIT, &node);
	for (uint32_t i = 0; st == PT_OK && i < n; i++)
		st = add_lit(c, words[i], strlen(words[i]), &ids[i]);
	if (st == PT_OK)
		st = add_sorted(c, ids, n, &c->g->nodes[node].lo, &c->g->nodes[node].n);
	*out = node;
	return st;
}

static enum pt_status keystr_node(struct comp *c, uint32_t *names, uint32_t n, uint32_t *out)
{
	enum pt_status st = new_node(c, GR_STR, out);
	if (st == PT_OK && n)
		st = add_sorted(c, names, n, &c->g->nodes[*out].excl_lo,
				&c->g->nodes[*out].excl_n);
	return st;
}

static enum pt_status any_node(struct comp *c, uint32_t *out)
{
	pt_grammar *g = c->g;
	static const char *const nul[] = { "null" }, *const bools[] = { "false", "true" };
	uint32_t k[6], u, obj, arr;
	enum pt_status st;
	if (g->any != GR_NONE) {
		*out = g->any;
		return PT_OK;
	}
	if ((st = new_node(c, GR_UNION, &u)) || (st = lit_node(c, nul, 1, &k[0])) ||
	    (st = lit_node(c, bools, 2, &k[1])) || (st = new_node(c, GR_NUM, &k[2])) ||
	    (st = new_node(c, GR_STR, &k[3])) || (st = new_node(c, GR_OBJ, &obj)) ||
	    (st = new_node(c, GR_ARR, &arr)))
		return st;
	k[4] = obj;
	k[5] = arr;
	g->any = u;
	if ((st = add_kids(c, k, 6, &g->nodes[u].lo)))
		return st;
	g->nodes[u].n = 6;
	g->nodes[obj].addl = u;
	/* into a local: new_node may move g->nodes */
	uint32_t ks;
	if ((st = keystr_node(c, NULL, 0, &ks)))
		return st;
	g->nodes[obj].keystr = ks;
	g->nodes[arr].items = u;
	*out = u;
	return PT_OK;
}

/* ---- keyword tables -------------------------------------------------------------------- */

static const char *const annotations[] = {
	"title", "description", "default", "examples", "$comment", "$schema", "$id",
	"deprecated", "readOnly", "writeOnly", "$defs", "definitions", "discriminator",
	"contentMediaType", "contentEncoding", NULL,
};
static const char *const assertions[] = {
	"type", "properties", "required", "additionalProperties", "items", "prefixItems",
	"additionalItems", "minItems", "maxItems", "minLength", "maxLength", "format", "enum",
	"const", "anyOf", "oneOf", "allOf", "$ref", "nullable", "uniqueItems", "minimum",
	"maximum", "exclusiveMinimum", "exclusiveMaximum", NULL,
};

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

/* Counts assertion keywords other than those in `except` (NULL-terminated). */
static const char *other_assertion(const cJSON *s, const char *const *except)
{
	for (const cJSON *k = s->child; k; k = k->next)
		if (in_list(assertions, k->string) && !in_list(except, k->string))
			return k->string;
	return NULL;
}

/* A non-negative integer keyword value (absent: dflt). */
static enum pt_status get_count(struct comp *c, const cJSON *s, const char *kw, uint32_t dflt,
				uint32_t limit, uint32_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
	*out = dflt;
	if (!v)
		return PT_OK;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble != floor(v->valuedouble))
		return bad(c, kw, "must be a non-negative integer");
	if (v->valuedouble > limit)
		return bad(c, kw, "over the supported limit %u", limit);
	*out = (uint32_t)v->valuedouble;
	return PT_OK;
}

static enum pt_status compile(struct comp *c, const cJSON *s, bool memo, uint32_t *out);

/* Compiles the schema at a child path (kw, then an optional index or key). */
static enum pt_status compile_at(struct comp *c, const cJSON *s, const char *kw,
				 const char *key, long idx, uint32_t *out)
{
	size_t old = path_push(c, kw);
	if (key)
		path_push(c, key);
	else if (idx >= 0)
		path_push_index(c, (size_t)idx);
	enum pt_status st = compile(c, s, false, out);
	path_pop(c, old);
	return st;
}

/* ---- $ref ------------------------------------------------------------------------------- */

static enum pt_status resolve_ref(struct comp *c, const char *ref, const cJSON **out)
{
	const cJSON *cur = c->doc;
	if (ref[0] != '#')
		return bad(c, "$ref", "only local references (\"#...\") are supported, got \"%.80s\"",
			   ref);
	const char *p = ref + 1;
	if (*p && *p != '/')
		return bad(c, "$ref", "anchors are not supported, got \"%.80s\"", ref);
	while (*p == '/') {
		char seg[256];
		size_t n = 0;
		p++;
		while (*p && *p != '/') {
			char ch = *p++;
			if (ch == '~' && (*p == '0' || *p == '1'))
				ch = *p++ == '0' ? '~' : '/';
			else if (ch == '%')
				return bad(c, "$ref", "percent-encoded references are not supported");
			if (n + 1 >= sizeof seg)
				return bad(c, "$ref", "reference segment too long");
			seg[n++] = ch;
		}
		seg[n] = 0;
		if (cJSON_IsArray(cur)) {
			char *end;
			long i = strtol(seg, &end, 10);
			cur = (*seg && !*end && i >= 0) ? cJSON_GetArrayItem(cur, (int)i) : NULL;
		} else if (cJSON_IsObject(cur)) {
			cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
		} else {
			cur = NULL;
		}
		if (!cur)
			return bad(c, "$ref", "\"%.80s\" does not resolve", ref);
	}
	*out = cur;
	return PT_OK;
}

/* ---- types ------------------------------------------------------------------------------ */

static const char *const type_names[] = { "null", "boolean", "integer", "number", "string",
					  "object", "array", NULL };
enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_OBJ = 32, T_ARR = 64 };

static enum pt_status get_types(struct comp *c, const cJSON *s, unsigned *mask)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
	*mask = 0;
	if (!t)
		return PT_OK;
	if (cJSON_IsString(t) || cJSON_IsArray(t)) {
		const cJSON *e = cJSON_IsString(t) ? t : t->child;
		for (; e; e = cJSON_IsString(t) ? NULL : e->next) {
			int i = 0;
			if (!cJSON_IsString(e))
				return bad(c, "type", "must be a string or an array of strings");
			while (type_names[i] && strcmp(type_names[i], e->valuestring) != 0)
				i++;
			if (!type_names[i])
				return bad(c, "type", "unknown type \"%.40s\"", e->valuestring);
			*mask |= 1u << i;
		}
		if (!*mask)
			return bad(c, "type", "empty type list");
		return PT_OK;
	}
	return bad(c, "type", "must be a string or an array of strings");
}

static bool value_has_type(const cJSON *v, unsigned mask)
{
	if (cJSON_IsNull(v))
		return mask & T_NULL;
	if (cJSON_IsBool(v))
		return mask & T_BOOL;
	if (cJSON_IsNumber(v))
		return (mask & T_NUM) ||
		       ((mask & T_INT) && v->valuedouble == floor(v->valuedouble));
	if (cJSON_IsString(v))
		return mask & T_STR;
	if (cJSON_IsObject(v))
		return mask & T_OBJ;
	if (cJSON_IsArray(v))
		return mask & T_ARR;
	return false;
}

static enum pt_status compile_enum(struct comp *c, const cJSON *s, unsigned types,
				   uint32_t node)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "const");
	const char *kw = e ? "enum" : "const";
	uint32_t n = 0, *ids;
	enum pt_status st = PT_OK;
	if (e && k)
		return bad(c, "const", "enum and const together are not supported");
	if (e && !cJSON_IsArray(e))
		return bad(c, "enum", "must be an array");
	int count = e ? cJSON_GetArraySize(e) : 1;
	if (count > PT_GRAMMAR_MAX_ENUM)
		return bad(c, kw, "more than %d values", PT_GRAMMAR_MAX_ENUM);
	ids = pt_mallocn((size_t)count + 1, sizeof *ids);
	if (!ids)
		return nomem(c);
	for (const cJSON *v = e ? e->child : k; v && st == PT_OK; v = e ? v->next : NULL) {
		if (types && !value_has_type(v, types))
			continue;
		char *txt = cJSON_PrintUnformatted(v);
		cJSON *back = txt ? cJSON_Parse(txt) : NULL;
		if (!txt)
			st = nomem(c);
		else if (!back || !cJSON_Compare(v, back, true) ||
			 !utf8_valid((const unsigned char *)txt, strlen(txt)))
			st = bad(c, kw, "a value cannot be written as JSON exactly "
				 "(non-finite number or invalid UTF-8)");
		else
			st = add_lit(c, txt, strlen(txt), &ids[n++]);
		cJSON_Delete(back);
		free(txt); /* cJSON's allocator */
	}
	if (st == PT_OK)
		st = add_sorted(c, ids, n, &c->g->nodes[node].lo, &c->g->nodes[node].n);
	pt_free(ids);
	return st;
}

static enum pt_status compile_string(struct comp *c, const cJSON *s, uint32_t node)
{
	uint32_t mn, mx;
	enum pt_status st;
	if ((st = get_count(c, s, "minLength", 0, MAX_LEN_BOUND, &mn)) ||
	    (st = get_count(c, s, "maxLength", GR_NONE, GR_NONE, &mx)))
		return st;
	if (mx != GR_NONE && mn > mx)
		return bad(c, "minLength", "minLength %u is over maxLength %u", mn, mx);
	struct gr_node *nd = &c->g->nodes[node];
	nd->min = mn;
	nd->max = mx;
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
	if (!f)
		return PT_OK;
	if (!cJSON_IsString(f))
		return bad(c, "format", "must be a string");
	if (strcmp(f->valuestring, "date") == 0)
		nd->format = GR_FMT_DATE;
	else if (strcmp(f->valuestring, "time") == 0)
		nd->format = GR_FMT_TIME;
	else if (strcmp(f->valuestring, "date-time") == 0)
		nd->format = GR_FMT_DATETIME;
	else if (strcmp(f->valuestring, "uuid") == 0)
		nd->format = GR_FMT_UUID;
	else
		return bad(c, "format", "format \"%.40s\" is not supported (date, time, "
			   "date-time, uuid are)", f->valuestring);
	if (mn || mx != GR_NONE)
		return bad(c, "format", "format together with minLength/maxLength is not "
			   "supported");
	return PT_OK;
}

static enum pt_status bool_or_schema(struct comp *c, const cJSON *v, const char *kw,
				     uint32_t *out)
{
	if (cJSON_IsFalse(v)) {
		*out = GR_NONE;
		return PT_OK;
	}
	if (cJSON_IsTrue(v))
		return any_node(c, out);
	if (!cJSON_IsObject(v))
		return bad(c, kw, "must be a boolean or a schema");
	return compile_at(c, v, kw, NULL, -1, out);
}

struct kctx {
	const pt_grammar *g;
	const struct gr_prop *props;
};

static int cmp_key(const void *a, const void *b, void *ctx)
{
	const struct kctx *k = ctx;
	uint32_t x = k->props[*(const uint32_t *)a].key, y = k->props[*(const uint32_t *)b].key;
	return cmp_lit(&x, &y, (void *)k->g);
}

static enum pt_status compile_object(struct comp *c, const cJSON *s, uint32_t node)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
	struct gr_prop *tmp = NULL;
	uint32_t *names = NULL, n = 0, addl = GR_NONE;
	enum pt_status st = PT_OK;
	int n_props = props ? cJSON_GetArraySize(props) : 0;
	int n_req = req ? cJSON_GetArraySize(req) : 0;

	if (props && !cJSON_IsObject(props))
		return bad(c, "properties", "must be an object");
	if (req && !cJSON_IsArray(req))
		return bad(c, "required", "must be an array of strings");
	if (n_props + n_req > MAX_PROPS)
		return bad(c, "properties", "more than %d properties", MAX_PROPS);
	for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
		if (!cJSON_IsString(r))
			return bad(c, "required", "must be an array of strings");
	if (ap)
		st = bool_or_schema(c, ap, "additionalProperties", &addl);
	else if (!props)
		st = any_node(c, &addl);
	if (st)
		return st;
	tmp = pt_mallocn((size_t)(n_props + n_req) + 1, sizeof *tmp);
	names = pt_mallocn((size_t)(n_props + n_req) + 1, sizeof *names);
	if (!tmp || !names) {
		st = nomem(c);
		goto out;
	}
	for (const cJSON *p = props ? props->child : NULL; p && st == PT_OK; p = p->next) {
		for (uint32_t i = 0; i < n; i++)
			if (strcmp(c->g->lits[tmp[i].name].p, p->string) == 0) {
				st = bad(c, "properties", "duplicate property \"%.80s\"", p->string);
				goto out;
			}
		memset(&tmp[n], 0, sizeof tmp[n]);
		for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
			if (strcmp(r->valuestring, p->string) == 0)
				tmp[n].required = true;
		st = compile_at(c, p, "properties", p->string, -1, &tmp[n].node);
		if (st == PT_OK)
			st = add_lit(c, p->string, strlen(p->string) + 1, &tmp[n].name);
		if (st == PT_OK)
			c->g->lits[tmp[n].name].n--; /* stored NUL-terminated, matched without */
		n++;
	}
	/* required names without a declared schema take the additionalProperties one */
	for (const cJSON *r = req ? req->child : NULL; r && st == PT_OK; r = r->next) {
		bool found = false;
		for (uint32_t i = 0; i < n; i++)
			found |= strcmp(c->g->lits[tmp[i].name].p, r->valuestring) == 0;
		if (found)
			continue;
		if (addl == GR_NONE) {
			st = bad(c, "required", "\"%.80s\" is required but not in properties and "
				 "additionalProperties is false", r->valuestring);
			goto out;
		}
		memset(&tmp[n], 0, sizeof tmp[n]);
		tmp[n].required = true;
		tmp[n].node = addl;
		st = add_lit(c, r->valuestring, strlen(r->valuestring) + 1, &tmp[n].name);
		if (st == PT_OK)
			c->g->lits[tmp[n].name].n--;
		n++;
	}
	for (uint32_t i = 0; i < n && st == PT_OK; i++) {
		const struct gr_bytes *nm = &c->g->lits[tmp[i].name];
		size_t kl;
		char *k;
		if (!utf8_valid((const unsigned char *)nm->p, nm->n)) {
			st = bad(c, "properties", "a property name is not valid UTF-8");
			goto out;
		}
		k = json_quote(nm->p, &kl);
		if (!k) {
			st = nomem(c);
			goto out;
		}
		st = add_lit(c, k, kl, &tmp[i].key);
		pt_free(k);
		names[i] = tmp[i].name;
	}
	if (st)
		goto out;
	pt_grammar *g = c->g;
	if (!grow((void **)&g->props, &g->cap_props, g->n_props + n, sizeof *g->props)) {
		st = nomem(c);
		goto out;
	}
	g->nodes[node].lo = g->n_props;
	g->nodes[node].n = n;
	if (n)
		memcpy(g->props + g->n_props, tmp, n * sizeof *tmp);
	g->n_props += n;
	g->nodes[node].addl = addl;
	/* the keys in byte order, so one stack matches every candidate key at once */
	if (!grow((void **)&g->korder, &g->cap_korder, g->n_korder + n + 1, sizeof *g->korder)) {
		st = nomem(c);
		goto out;
	}
	g->nodes[node].korder = g->n_korder;
	for (uint32_t i = 0; i < n; i++)
		g->korder[g->n_korder + i] = i;
	if (n > 1) {
		struct kctx k = { g, g->props + g->nodes[node].lo };
		qsort_r(g->korder + g->n_korder, n, sizeof *g->korder, cmp_key, &k);
	}
	g->n_korder += n;
	if (addl != GR_NONE) {
		uint32_t ks; /* into a local: new_node may move g->nodes */
		st = keystr_node(c, names, n, &ks);
		if (st == PT_OK)
			g->nodes[node].keystr = ks;
	}
out:
	pt_free(tmp);
	pt_free(names);
	return st;
}

static enum pt_status compile_array(struct comp *c, const cJSON *s, uint32_t node)
{
	const cJSON *pfx = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
	const cJSON *more = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
	const cJSON *uniq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
	const char *pfx_kw = "prefixItems";
	uint32_t mn, mx, rest = GR_NONE, *k = NULL, n = 0;
	enum pt_status st;
	if ((st = get_count(c, s, "minItems", 0, MAX_MIN_ITEMS, &mn)) ||
	    (st = get_count(c, s, "maxItems", GR_NONE, GR_NONE, &mx)))
		return st;
	if (mx != GR_NONE && mn > mx)
		return bad(c, "minItems", "minItems %u is over maxItems %u", mn, mx);
	if (uniq && !cJSON_IsFalse(uniq))
		return bad(c, "uniqueItems", "uniqueItems is not supported");
	if (cJSON_IsArray(items)) { /* draft 4 tuple form */
		if (pfx)
			return bad(c, "items", "items as an array together with prefixItems");
		pfx = items;
		pfx_kw = "items";
		items = more;
	} else if (more) {
		return bad(c, "additionalItems", "additionalItems only goes with items as an "
			   "array");
	}
	if (pfx && !cJSON_IsArray(pfx))
		return bad(c, pfx_kw, "must be an array of schemas");
	if (items)
		st = bool_or_schema(c, items, items == more ? "additionalItems" : "items", &rest);
	else
		st = any_node(c, &rest);
	if (st)
		return st;
	int np = pfx ? cJSON_GetArraySize(pfx) : 0;
	if (np > MAX_PROPS)
		return bad(c, pfx_kw, "more than %d items", MAX_PROPS);
	k = pt_mallocn((size_t)np + 1, sizeof *k);
	if (!k)
		return nomem(c);
	for (const cJSON *e = pfx ? pfx->child : NULL; e && st == PT_OK; e = e->next, n++)
		st = compile_at(c, e, pfx_kw, NULL, (long)n, &k[n]);
	if (st == PT_OK)
		st = add_kids(c, k, n, &c->g->nodes[node].pfx_lo);
	pt_free(k);
	if (st)
		return st;
	struct gr_node *nd = &c->g->nodes[node];
	nd->pfx_n = n;
	nd->items = rest;
	nd->min = mn;
	nd->max = mx;
	if (rest == GR_NONE && mx > n)
		nd->max = n;
	if (mn > nd->max)
		return bad(c, "minItems", "minItems %u is more than the %u items allowed", mn,
			   nd->max);
	return PT_OK;
}

#define INT_LIMIT 9999999999999999.0 /* 16 digits: what the matcher generates */

/* minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers, as inclusive bounds
 * (draft 4's boolean exclusive* modify minimum / maximum). */
static enum pt_status compile_bounds(struct comp *c, const cJSON *s, uint32_t node)
{
	static const char *const kws[] = { "minimum", "maximum", "exclusiveMinimum",
					   "exclusiveMaximum" };
	double lo = -INT_LIMIT, hi = INT_LIMIT;
	bool any = false, excl_lo = false, excl_hi = false;
	struct gr_node *nd = &c->g->nodes[node];
	for (int i = 0; i < 4; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kws[i]);
		if (!v)
			continue;
		if (i >= 2 && cJSON_IsBool(v)) {
			*(i == 2 ? &excl_lo : &excl_hi) = cJSON_IsTrue(v);
			continue;
		}
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
			return bad(c, kws[i], "must be a number");
		double b = v->valuedouble;
		/* numbers: value = integer part + fraction, compared exactly against integral
		 * inclusive bounds; the parsed double keeps the comparison (rounding is
		 * monotonic), which an exclusive bound would not survive */
		if (!nd->is_int && (i >= 2 || b != floor(b)))
			return bad(c, kws[i], "on \"number\" only integral minimum/maximum are "
				   "supported");
		any = true;
		switch (i) {
		case 0: b = ceil(b); lo = b > lo ? b : lo; break;
		case 1: b = floor(b); hi = b < hi ? b : hi; break;
		case 2: b = floor(b) + 1; lo = b > lo ? b : lo; break;
		default: b = ceil(b) - 1; hi = b < hi ? b : hi; break;
		}
	}
	if ((excl_lo || excl_hi) && !nd->is_int)
		return bad(c, excl_lo ? "exclusiveMinimum" : "exclusiveMaximum",
			   "on \"number\" only integral minimum/maximum are supported");
	if (excl_lo || excl_hi) {
		const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum");
		const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
		if (excl_lo && mn && mn->valuedouble == floor(mn->valuedouble) && lo == mn->valuedouble)
			lo += 1;
		if (excl_hi && mx && mx->valuedouble == floor(mx->valuedouble) && hi == mx->valuedouble)
			hi -= 1;
	}
	if (!any)
		return PT_OK;
	if (lo < -INT_LIMIT)
		lo = -INT_LIMIT;
	if (hi > INT_LIMIT)
		hi = INT_LIMIT;
	if (lo > hi)
		return bad(c, "minimum", "no integer of at most 16 digits lies in the bounds");
	nd->bounded = 1;
	nd->ilo = (int64_t)lo;
	nd->ihi = (int64_t)hi;
	return PT_OK;
}

/* The node for one JSON type under schema s. */
static enum pt_status type_node(struct comp *c, const cJSON *s, unsigned t, uint32_t *out)
{
	static const char *const nul[] = { "null" }, *const bools[] = { "false", "true" };
	enum pt_status st;
	switch (t) {
	case T_NULL:
		return lit_node(c, nul, 1, out);
	case T_BOOL:
		return lit_node(c, bools, 2, out);
	case T_INT:
	case T_NUM:
		if ((st = new_node(c, GR_NUM, out)))
			return st;
		c->g->nodes[*out].is_int = t == T_INT;
		return compile_bounds(c, s, *out);
	case T_STR:
		if ((st = new_node(c, GR_STR, out)))
			return st;
		return compile_string(c, s, *out);
	case T_OBJ:
		if ((st = new_node(c, GR_OBJ, out)))
			return st;
		return compile_object(c, s, *out);
	default:
		if ((st = new_node(c, GR_ARR, out)))
			return st;
		return compile_array(c, s, *out);
	}
}

static bool has_any(const cJSON *s, const char *const *kws)
{
	for (; *kws; kws++)
		if (cJSON_GetObjectItemCaseSensitive(s, *kws))
			return true;
	return false;
}

static enum pt_status set_kids(struct comp *c, uint32_t node, const uint32_t *k, uint32_t n)
{
	enum pt_status st = add_kids(c, k, n, &c->g->nodes[node].lo);
	if (st == PT_OK)
		c->g->nodes[node].n = n;
	return st;
}

static enum pt_status note_oneof(struct comp *c, uint32_t node)
{
	uint32_t cap = c->cap_oneofs;
	if (!grow((void **)&c->oneofs, &cap, c->n_oneofs + 1, sizeof *c->oneofs))
		return nomem(c);
	cap = c->cap_oneofs;
	if (!grow((void **)&c->oneof_paths, &cap, c->n_oneofs + 1, sizeof *c->oneof_paths))
		return nomem(c);
	c->cap_oneofs = cap;
	if (
	    !(c->oneof_paths[c->n_oneofs] = pt_strdup(c->path)))
		return nomem(c);
	c->oneofs[c->n_oneofs++] = node;
	return PT_OK;
}

/* The body of an object schema into the UNION node `node`. */
static enum pt_status compile_body(struct comp *c, const cJSON *s, uint32_t node)
{
	static const char *const obj_kw[] = { "properties", "required", "additionalProperties",
					      NULL };
	static const char *const arr_kw[] = { "items", "prefixItems", "additionalItems",
					      "minItems", "maxItems", "uniqueItems", NULL };
	static const char *const str_kw[] = { "minLength", "maxLength", "format", NULL };
	static const char *const num_kw[] = { "minimum", "maximum", "exclusiveMinimum",
					      "exclusiveMaximum", NULL };
	static const char *const ann_type[] = { "nullable", "type", "enum", "const", NULL };
	uint32_t k[10], n = 0;
	unsigned types;
	enum pt_status st;
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(s, "nullable");
	const cJSON *v;
	const char *other;

	for (const cJSON *kw = s->child; kw; kw = kw->next)
		if (!in_list(annotations, kw->string) && !in_list(assertions, kw->string))
			return bad(c, kw->string, "unsupported JSON Schema keyword \"%.60s\"",
				   kw->string);
	if (nb && !cJSON_IsBool(nb))
		return bad(c, "nullable", "must be a boolean");
	bool nullable = cJSON_IsTrue(nb);
	if ((st = get_types(c, s, &types)))
		return st;

	if ((v = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
		static const char *const ex[] = { "$ref", NULL };
		const cJSON *target = NULL;
		if ((other = other_assertion(s, ex)))
			return bad(c, other, "\"%s\" next to $ref is not supported", other);
		if (!cJSON_IsString(v))
			return bad(c, "$ref", "must be a string");
		if ((st = resolve_ref(c, v->valuestring, &target)))
			return st;
		/* errors inside the target name the target's own path */
		char saved[sizeof c->path];
		size_t saved_len = c->plen, len = strlen(v->valuestring + 1);
		memcpy(saved, c->path, sizeof saved);
		if (len > sizeof c->path - 8)
			len = sizeof c->path - 8;
		memcpy(c->path, v->valuestring + 1, len);
		c->path[len] = 0;
		c->plen = len;
		st = compile(c, target, true, &k[0]);
		memcpy(c->path, saved, sizeof saved);
		c->plen = saved_len;
		return st ? st : set_kids(c, node, k, 1);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
		static const char *const ex[] = { "allOf", NULL };
		if ((other = other_assertion(s, ex)))
			return bad(c, other, "\"%s\" next to allOf is not supported", other);
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 1)
			return bad(c, "allOf", "only allOf with exactly one schema is supported");
		if ((st = compile_at(c, v->child, "allOf", NULL, 0, &k[0])))
			return st;
		return set_kids(c, node, k, 1);
	}
	const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
	const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
	if (any || one) {
		static const char *const ex[] = { "anyOf", "oneOf", "nullable", NULL };
		const char *kw = any ? "anyOf" : "oneOf";
		if (any && one)
			return bad(c, "oneOf", "anyOf and oneOf together are not supported");
		if ((other = other_assertion(s, ex)))
			return bad(c, other, "\"%s\" next to %s is not supported", other, kw);
		v = any ? any : one;
		int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
		if (m < 1)
			return bad(c, kw, "must be a non-empty array of schemas");
		if (m > 1024)
			return bad(c, kw, "more than 1024 alternatives");
		uint32_t *kk = pt_mallocn((size_t)m + 1, sizeof *kk), i = 0;
		if (!kk)
			return nomem(c);
		for (const cJSON *e = v->child; e && st == PT_OK; e = e->next, i++)
			st = compile_at(c, e, kw, NULL, (long)i, &kk[i]);
		if (st == PT_OK && nullable) {
			static const char *const nul[] = { "null" };
			st = lit_node(c, nul, 1, &kk[i++]);
		}
		if (st == PT_OK)
			st = set_kids(c, node, kk, i);
		pt_free(kk);
		if (st == PT_OK && one) {
			size_t old = path_push(c, "oneOf");
			st = note_oneof(c, node);
			path_pop(c, old);
		}
		return st;
	}
	if (cJSON_GetObjectItemCaseSensitive(s, "enum") ||
	    cJSON_GetObjectItemCaseSensitive(s, "const")) {
		if ((other = other_assertion(s, ann_type)))
			return bad(c, other, "\"%s\" next to enum/const is not supported", other);
		if (types && nullable)
			types |= T_NULL;
		if ((st = new_node(c, GR_LIT, &k[0])) ||
		    (st = compile_enum(c, s, types, k[0])))
			return st;
		return set_kids(c, node, k, 1);
	}
	if (!types) {
		if (has_any(s, obj_kw))
			types |= T_OBJ;
		if (has_any(s, arr_kw))
			types |= T_ARR;
		if (has_any(s, str_kw))
			types |= T_STR;
		if (has_any(s, num_kw))
			types |= T_NUM;
	}
	if (!types) {
		if ((st = any_node(c, &k[0]))) /* any value: null included */
			return st;
		return set_kids(c, node, k, 1);
	}
	if (nullable)
		types |= T_NULL;
	/* integer and number together: number covers it */
	if ((types & T_NUM) && (types & T_INT))
		types &= ~(unsigned)T_INT;
	for (unsigned t = 1; t <= T_ARR; t <<= 1)
		if ((types & t) && (st = type_node(c, s, t, &k[n++])))
			return st;
	return set_kids(c, node, k, n);
}

/* memo: s is a $ref target; compiled once, so recursive references close into a cycle.
 * Everything else is reached once by walking the schema tree. */
static enum pt_status compile(struct comp *c, const cJSON *s, bool memo, uint32_t *out)
{
	uint32_t node;
	enum pt_status st;
	for (uint32_t i = 0; memo && i < c->n_memo; i++)
		if (c->memo[i].s == s) {
			*out = c->memo[i].node;
			return PT_OK;
		}
	if (c->nest >= COMPILE_MAX_NEST)
		return bad(c, NULL, "schema nested deeper than %d", COMPILE_MAX_NEST);
	if ((st = new_node(c, GR_UNION, &node)))
		return st;
	if (memo) {
		if (!grow((void **)&c->memo, &c->cap_memo, c->n_memo + 1, sizeof *c->memo))
			return nomem(c);
		c->memo[c->n_memo].s = s;
		c->memo[c->n_memo].node = node;
		c->n_memo++;
	}
	*out = node;
	if (cJSON_IsBool(s)) {
		uint32_t k;
		if (cJSON_IsFalse(s))
			return PT_OK; /* a union of nothing: unsatisfiable */
		if ((st = any_node(c, &k)))
			return st;
		return set_kids(c, node, &k, 1);
	}
	if (!cJSON_IsObject(s))
		return bad(c, NULL, "a schema must be an object or a boolean");
	c->nest++;
	st = compile_body(c, s, node);
	c->nest--;
	return st;
}

/* ---- analysis -------------------------------------------------------------------------- */

static uint32_t add_depth(uint32_t a)
{
	return a >= GR_INF ? GR_INF : a + 1;
}

void gr_analyze(pt_grammar *g)
{
	bool changed = true;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		g->nodes[i].min_depth = GR_INF;
	for (int pass = 0; changed && pass < 100000; pass++) {
		changed = false;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			struct gr_node *nd = &g->nodes[i];
			uint32_t md = 1;
			switch (nd->kind) {
			case GR_LIT:
				md = nd->n ? 1 : GR_INF;
				break;
			case GR_STR:
			case GR_NUM:
			case GR_TEXT:
				md = 1;
				break;
			case GR_OBJ:
				for (uint32_t j = 0; j < nd->n; j++) {
					const struct gr_prop *p = &g->props[nd->lo + j];
					if (p->required && add_depth(g->nodes[p->node].min_depth) > md)
						md = add_depth(g->nodes[p->node].min_depth);
				}
				break;
			case GR_ARR:
				for (uint32_t j = 0; j < nd->min && md < GR_INF; j++) {
					uint32_t it = j < nd->pfx_n ? g->kids[nd->pfx_lo + j] : nd->items;
					uint32_t d = it == GR_NONE ? GR_INF
						     : add_depth(g->nodes[it].min_depth);
					if (d > md)
						md = d;
					if (j >= nd->pfx_n)
						break; /* the remaining items are the same node */
				}
				break;
			case GR_UNION:
				md = GR_INF;
				for (uint32_t j = 0; j < nd->n; j++)
					if (g->nodes[g->kids[nd->lo + j]].min_depth < md)
						md = g->nodes[g->kids[nd->lo + j]].min_depth;
				break;
			case GR_SEQ:
				for (uint32_t j = 0; j < nd->n; j++) {
					const struct gr_part *p = &g->parts[nd->lo + j];
					if (p->node != GR_NONE &&
					    add_depth(g->nodes[p->node].min_depth) > md)
						md = add_depth(g->nodes[p->node].min_depth);
				}
				break;
			}
			if (md > PT_GRAMMAR_MAX_DEPTH + 1)
				md = GR_INF;
			if (md < nd->min_depth) {
				nd->min_depth = md;
				changed = true;
			}
		}
	}
}

/* ---- oneOf: only when no value can match two branches ----------------------------------- */

/* Follows single-kid unions (aliases from $ref, allOf, type). */
static uint32_t unalias(const pt_grammar *g, uint32_t n)
{
	for (int i = 0; i < 64 && g->nodes[n].kind == GR_UNION && g->nodes[n].n == 1; i++)
		n = g->kids[g->nodes[n].lo];
	return n;
}

/* Bytes a value of node n can start with (bits of 256). */
static void first_bytes(const pt_grammar *g, uint32_t n, uint64_t set[4], int depth)
{
	const struct gr_node *nd = &g->nodes[n];
	if (nd->min_depth >= GR_INF)
		return;
	switch (nd->kind) {
	case GR_LIT:
		for (uint32_t i = 0; i < nd->n; i++) {
			uint8_t b = (uint8_t)g->lits[g->lsorted[nd->lo + i]].p[0];
			set[b >> 6] |= 1ull << (b & 63);
		}
		break;
	case GR_STR:
		set['"' >> 6] |= 1ull << ('"' & 63);
		break;
	case GR_NUM:
		set[0] |= (1ull << '-') | (0x3ffull << '0');
		break;
	case GR_OBJ:
		set['{' >> 6] |= 1ull << ('{' & 63);
		break;
	case GR_ARR:
		set['[' >> 6] |= 1ull << ('[' & 63);
		break;
	case GR_TEXT: /* only in tool-call sequences, never a oneOf branch; be conservative */
		set[0] = set[1] = set[2] = set[3] = ~0ull;
		break;
	default:
		if (depth > 64) {
			set[0] = set[1] = set[2] = set[3] = ~0ull;
			break;
		}
		for (uint32_t i = 0; i < nd->n; i++)
			first_bytes(g, g->kids[nd->lo + i], set, depth + 1);
	}
}

static const struct gr_prop *find_prop(const pt_grammar *g, const struct gr_node *o,
				       const struct gr_bytes *name)
{
	for (uint32_t j = 0; j < o->n; j++) {
		const struct gr_bytes *b = &g->lits[g->props[o->lo + j].name];
		if (b->n == name->n && memcmp(b->p, name->p, b->n) == 0)
			return &g->props[o->lo + j];
	}
	return NULL;
}

static bool lits_disjoint(const pt_grammar *g, uint32_t a, uint32_t b)
{
	const struct gr_node *x = &g->nodes[a], *y = &g->nodes[b];
	for (uint32_t i = 0; i < x->n; i++)
		for (uint32_t j = 0; j < y->n; j++) {
			const struct gr_bytes *p = &g->lits[g->lsorted[x->lo + i]];
			const struct gr_bytes *q = &g->lits[g->lsorted[y->lo + j]];
			if (p->n == q->n && memcmp(p->p, q->p, p->n) == 0)
				return false;
		}
	return true;
}

/* Every output of object a has a required property whose value b's schema rejects. */
static bool obj_excludes(const pt_grammar *g, uint32_t a, uint32_t b)
{
	const struct gr_node *x = &g->nodes[a], *y = &g->nodes[b];
	for (uint32_t j = 0; j < x->n; j++) {
		const struct gr_prop *p = &g->props[x->lo + j];
		if (!p->required)
			continue;
		const struct gr_prop *q = find_prop(g, y, &g->lits[p->name]);
		if (!q)
			continue;
		uint32_t pn = unalias(g, p->node), qn = unalias(g, q->node);
		if (g->nodes[pn].kind == GR_LIT && g->nodes[qn].kind == GR_LIT &&
		    lits_disjoint(g, pn, qn))
			return true;
	}
	return false;
}

static bool branches_disjoint(const pt_grammar *g, uint32_t a, uint32_t b)
{
	uint64_t sa[4] = { 0 }, sb[4] = { 0 };
	first_bytes(g, a, sa, 0);
	first_bytes(g, b, sb, 0);
	if (!((sa[0] & sb[0]) | (sa[1] & sb[1]) | (sa[2] & sb[2]) | (sa[3] & sb[3])))
		return true;
	a = unalias(g, a);
	b = unalias(g, b);
	if (g->nodes[a].kind == GR_OBJ && g->nodes[b].kind == GR_OBJ)
		return obj_excludes(g, a, b) || obj_excludes(g, b, a);
	return false;
}

static enum pt_status check_oneofs(struct comp *c)
{
	const pt_grammar *g = c->g;
	for (uint32_t i = 0; i < c->n_oneofs; i++) {
		const struct gr_node *nd = &g->nodes[c->oneofs[i]];
		for (uint32_t x = 0; x < nd->n; x++)
			for (uint32_t y = x + 1; y < nd->n; y++)
				if (!branches_disjoint(g, g->kids[nd->lo + x], g->kids[nd->lo + y]))
					return pt_error_set(
						c->err, PT_E_INVALID,
						"JSON schema at %s: branches %u and %u may both match "
						"a value, which oneOf forbids; use anyOf, or give each "
						"object branch a required property with distinct "
						"const/enum values", c->oneof_paths[i], x, y);
	}
	return PT_OK;
}

/* ---- entry points ------------------------------------------------------------------------ */

static enum pt_status comp_begin(struct comp *c, pt_grammar **out, struct pt_error *err)
{
	memset(c, 0, sizeof *c);
	*out = NULL;
	c->err = err;
	c->g = pt_calloc(1, sizeof *c->g);
	if (!c->g)
		return pt_error_set(err, PT_E_NOMEM, "grammar: out of memory");
	c->g->any = GR_NONE;
	c->g->root = GR_NONE;
	return PT_OK;
}

static enum pt_status comp_end(struct comp *c, enum pt_status st, pt_grammar **out)
{
	if (st == PT_OK) {
		gr_analyze(c->g);
		st = check_oneofs(c);
	}
	if (st == PT_OK) {
		uint32_t md = c->g->nodes[c->g->root].min_depth;
		if (md >= GR_INF)
			st = pt_error_set(c->err, PT_E_INVALID,
					  "JSON schema: no value can satisfy it (or every value "
					  "nests deeper than %d levels)", PT_GRAMMAR_MAX_DEPTH);
	}
	for (uint32_t i = 0; i < c->n_oneofs; i++)
		pt_free(c->oneof_paths[i]);
	pt_free(c->oneof_paths);
	pt_free(c->oneofs);
	pt_free(c->memo);
	if (st != PT_OK) {
		pt_grammar_free(c->g);
		return st;
	}
	*out = c->g;
	return PT_OK;
}

enum pt_status pt_grammar_json_object(pt_grammar **out, struct pt_error *err)
{
	struct comp c;
	uint32_t any;
	enum pt_status st = comp_begin(&c, out, err);
	if (st)
		return st;
	st = any_node(&c, &any);
	if (st == PT_OK) /* the any node's object kid: any object */
		c.g->root = c.g->kids[c.g->nodes[any].lo + 4];
	return comp_end(&c, st, out);
}

enum pt_status pt_grammar_from_schema(const cJSON *schema, pt_grammar **out,
				      struct pt_error *err)
{
	struct comp c;
	enum pt_status st = comp_begin(&c, out, err);
	if (st)
		return st;
	if (!schema)
		st = pt_error_set(err, PT_E_INVALID, "JSON schema: missing");
	else {
		c.doc = schema;
		st = compile(&c, schema, false, &c.g->root);
	}
	return comp_end(&c, st, out);
}

enum pt_status pt_grammar_from_alternatives(const struct pt_grammar_part *const *alts,
					    const size_t *n_parts, size_t n_alts,
					    pt_grammar **out, struct pt_error *err)
{
	struct comp c;
	uint32_t *seqs = NULL;
	enum pt_status st = comp_begin(&c, out, err);
	if (st)
		return st;
	if (n_alts == 0 || n_alts > 4096) {
		st = pt_error_set(err, PT_E_INVALID, "grammar: %zu alternatives (1..4096)", n_alts);
		return comp_end(&c, st, out);
	}
	seqs = pt_mallocn(n_alts, sizeof *seqs);
	if (!seqs || (st = new_node(&c, GR_UNION, &c.g->root)))
		st = st ? st : nomem(&c);
	for (size_t i = 0; st == PT_OK && i < n_alts; i++) {
		uint32_t np = 0;
		if (n_parts[i] == 0 || n_parts[i] > 1024) {
			st = pt_error_set(err, PT_E_INVALID, "grammar: alternative %zu has %zu parts "
					  "(1..1024)", i, n_parts[i]);
			break;
		}
		struct gr_part *tmp = pt_mallocn(n_parts[i], sizeof *tmp);
		if (!tmp || (st = new_node(&c, GR_SEQ, &seqs[i]))) {
			pt_free(tmp);
			st = st ? st : nomem(&c);
			break;
		}
		for (size_t j = 0; st == PT_OK && j < n_parts[i]; j++) {
			const struct pt_grammar_part *p = &alts[i][j];
			c.plen = 0;
			c.path[0] = 0;
			path_push(&c, "alternatives");
			path_push_index(&c, i);
			path_push(&c, "parts");
			path_push_index(&c, j);
			if (p->literal) {
				size_t len = strlen(p->literal);
				if (!len)
					continue;
				if (!utf8_valid((const unsigned char *)p->literal, len)) {
					st = bad(&c, NULL, "literal text is not valid UTF-8");
					break;
				}
				tmp[np].node = GR_NONE;
				st = add_lit(&c, p->literal, len, &tmp[np].lit);
			} else if (p->raw_text) {
				tmp[np].lit = 0;
				st = new_node(&c, GR_TEXT, &tmp[np].node);
			} else if (p->schema) {
				tmp[np].lit = 0;
				c.doc = p->schema;
				st = compile(&c, p->schema, false, &tmp[np].node);
			} else {
				tmp[np].lit = 0;
				st = any_node(&c, &tmp[np].node);
			}
			np++;
		}
		if (st == PT_OK && np == 0)
			st = pt_error_set(err, PT_E_INVALID, "grammar: alternative %zu is empty", i);
		if (st == PT_OK) {
			pt_grammar *g = c.g;
			if (!grow((void **)&g->parts, &g->cap_parts, g->n_parts + np,
				  sizeof *g->parts)) {
				st = nomem(&c);
			} else {
				g->nodes[seqs[i]].lo = g->n_parts;
				g->nodes[seqs[i]].n = np;
				memcpy(g->parts + g->n_parts, tmp, np * sizeof *tmp);
				g->n_parts += np;
			}
		}
		pt_free(tmp);
	}
	if (st == PT_OK)
		st = set_kids(&c, c.g->root, seqs, (uint32_t)n_alts);
	pt_free(seqs);
	return comp_end(&c, st, out);
}

void pt_grammar_free(pt_grammar *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->n_lits; i++)
		pt_free(g->lits[i].p);
	pt_free(g->lits);
	pt_free(g->nodes);
	pt_free(g->lsorted);
	pt_free(g->props);
	pt_free(g->kids);
	pt_free(g->parts);
	pt_free(g->korder);
	pt_free(g);
}
