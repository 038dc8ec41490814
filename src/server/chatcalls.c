/* chatcalls.c - a completed tool-call block's text into calls, per family syntax.
 *
 * JSON is validated with cJSON first; the arguments object is then cut out of the original
 * text and only its insignificant whitespace is removed, so numbers and string escapes reach
 * the client exactly as the model wrote them (a cJSON round trip would turn 1.0 into 1 and
 * round integers past 2^53).  Everything here is iterative and bounded by the input length. */
#include <cjson/cJSON.h>
#include <string.h>

#include "server/chatparse_int.h"
#include "util/alloc.h"

#define MAX_NAME 256
#define MAX_ID 64
#define MAX_PREFIX 512 /* Mistral "NAME[CALL_ID]ID[ARGS]" before the JSON */

bool chat_is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void chat_buf_add(struct chat_buf *b, const char *s, size_t n)
{
	if (b->bad || n == 0)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->n + n + 1) {
			if (cap > ((size_t)-1) / 2) {
				b->bad = true;
				return;
			}
			cap *= 2;
		}
		char *np = pt_realloc(b->p, cap);
		if (!np) {
			b->bad = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void chat_buf_free(struct chat_buf *b)
{
	pt_free(b->p);
	memset(b, 0, sizeof(*b));
}

void chat_calls_clear(struct chat_calls *c)
{
	for (size_t i = 0; i < c->n; i++) {
		pt_free(c->v[i].id);
		pt_free(c->v[i].name);
		pt_free(c->v[i].arguments);
	}
	pt_free(c->v);
	memset(c, 0, sizeof(*c));
}

/* ---- small text helpers ------------------------------------------------------------------ */

static void trim(const char **s, size_t *n)
{
	while (*n && chat_is_ws(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && chat_is_ws((*s)[*n - 1]))
		(*n)--;
}

static const char *find(const char *s, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	if (m == 0 || m > n)
		return NULL;
	for (size_t i = 0; i + m <= n; i++)
		if (s[i] == needle[0] && memcmp(s + i, needle, m) == 0)
			return s + i;
	return NULL;
}

static bool starts(const char *s, size_t n, const char *lit)
{
	size_t m = strlen(lit);
	return n >= m && memcmp(s, lit, m) == 0;
}

/* Parses exactly s[0..n) (surrounding whitespace allowed) as one JSON value; NULL if not. */
static cJSON *parse_exact(const char *s, size_t n)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(s, n, &end, false);
	if (!j)
		return NULL;
	size_t used = (size_t)(end - s);
	while (used < n && chat_is_ws(s[used]))
		used++;
	if (used != n) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* End (exclusive) of the JSON value starting at s[i] in text already known to be valid. */
static size_t value_end(const char *s, size_t n, size_t i)
{
	if (i >= n)
		return n;
	if (s[i] == '"') {
		for (i++; i < n; i++) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				return i + 1;
		}
		return n;
	}
	if (s[i] == '{' || s[i] == '[') {
		size_t depth = 0;
		bool str = false;
		for (; i < n; i++) {
			char c = s[i];
			if (str) {
				if (c == '\\')
					i++;
				else if (c == '"')
					str = false;
			} else if (c == '"') {
				str = true;
			} else if (c == '{' || c == '[') {
				depth++;
			} else if (c == '}' || c == ']') {
				if (--depth == 0)
					return i + 1;
			}
		}
		return n;
	}
	while (i < n && !chat_is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']')
		i++;
	return i;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	while (i < n && chat_is_ws(s[i]))
		i++;
	return i;
}

/* Removes whitespace outside strings from valid JSON text. */
static char *compact(const char *s, size_t n)
{
	char *o = pt_malloc(n + 1);
	if (!o)
		return NULL;
	size_t k = 0;
	bool str = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (str) {
			o[k++] = c;
			if (c == '\\' && i + 1 < n)
				o[k++] = s[++i];
			else if (c == '"')
				str = false;
		} else if (c == '"') {
			str = true;
			o[k++] = c;
		} else if (!chat_is_ws(c)) {
			o[k++] = c;
		}
	}
	o[k] = 0;
	return o;
}

char *chat_args_compact(const char *s, size_t n, bool *nomem)
{
	trim(&s, &n);
	cJSON *j = parse_exact(s, n);
	if (!j)
		return NULL;
	char *out = NULL;
	if (cJSON_IsObject(j)) {
		out = compact(s, n);
		if (!out)
			*nomem = true;
	} else if (cJSON_IsString(j)) {
		/* A string holding the object (templates that tojson a string arguments field). */
		const char *in = j->valuestring;
		size_t m = strlen(in);
		trim(&in, &m);
		cJSON *k = parse_exact(in, m);
		if (k && cJSON_IsObject(k)) {
			out = compact(in, m);
			if (!out)
				*nomem = true;
		}
		cJSON_Delete(k);
	}
	cJSON_Delete(j);
	return out;
}

/* ---- call objects ---------------------------------------------------------------------- */

bool chat_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20)
			return false;
	return true;
}

static bool good_id(const char *s, size_t n)
{
	if (n == 0 || n > MAX_ID)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Appends one call; takes nothing over (copies).  -1 out of memory. */
static int push_call(struct chat_calls *out, const char *name, size_t name_len,
		     const char *id, size_t id_len, char *args /* owned */)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 4;
		struct pt_chat_tool_call *v = pt_reallocn(out->v, cap, sizeof(*v));
		if (!v) {
			pt_free(args);
			return -1;
		}
		out->v = v;
		out->cap = cap;
	}
	if (!chat_name_ok(name, name_len)) {
		pt_free(args);
		return 1;
	}
	struct pt_chat_tool_call *c = &out->v[out->n];
	c->name = pt_strndup(name, name_len);
	c->id = id ? pt_strndup(id, id_len) : NULL;
	c->arguments = args;
	if (!c->name || (id && !c->id) || !args) {
		pt_free(c->name);
		pt_free(c->id);
		pt_free(args);
		return -1;
	}
	out->n++;
	return 0;
}

static void drop_from(struct chat_calls *out, size_t keep)
{
	while (out->n > keep) {
		out->n--;
		pt_free(out->v[out->n].name);
		pt_free(out->v[out->n].id);
		pt_free(out->v[out->n].arguments);
	}
}

/* One call object, from its text s[0..n) (valid JSON, an object):
 *   {"name": N, "arguments"|"parameters": {..}|"{..}", "id"?: S, "type"?: "function"}
 *   {"type"?: "function", "function": {"name": N, "arguments": ..}, "id"?: S}
 * Any other key makes it malformed (so ordinary JSON content is not taken for a call). */
static int call_object(const char *s, size_t n, struct chat_calls *out, int nesting)
{
	size_t i = skip_ws(s, n, 0);
	if (i >= n || s[i] != '{')
		return 1;
	i++;
	const char *args = NULL, *func = NULL;
	size_t args_len = 0, func_len = 0;
	cJSON *name_j = NULL, *id_j = NULL;
	int rc = 1;
	for (;;) {
		i = skip_ws(s, n, i);
		if (i < n && s[i] == '}')
			break;
		if (i >= n || s[i] != '"')
			goto done;
		size_t ke = value_end(s, n, i);
		if (ke < i + 2)
			goto done;
		const char *key = s + i + 1;
		size_t klen = ke - i - 2;
		i = skip_ws(s, n, ke);
		if (i >= n || s[i] != ':')
			goto done;
		i = skip_ws(s, n, i + 1);
		size_t ve = value_end(s, n, i);
		const char *val = s + i;
		size_t vlen = ve - i;
#define KEY(lit) (klen == sizeof(lit) - 1 && memcmp(key, lit, klen) == 0)
		if (KEY("name") && !name_j) {
			name_j = parse_exact(val, vlen);
			if (!cJSON_IsString(name_j) || !chat_name_ok(name_j->valuestring, strlen(name_j->valuestring)))
				goto done;
		} else if ((KEY("arguments") || KEY("parameters")) && !args) {
			args = val;
			args_len = vlen;
		} else if (KEY("id") && !id_j) {
			id_j = parse_exact(val, vlen);
			if (!cJSON_IsString(id_j) ||
			    !good_id(id_j->valuestring, strlen(id_j->valuestring)))
				goto done;
		} else if (KEY("type")) {
			if (!(vlen == 10 && memcmp(val, "\"function\"", 10) == 0))
				goto done;
		} else if (KEY("function") && nesting == 0 && !func) {
			func = val;
			func_len = vlen;
		} else {
			goto done;
		}
#undef KEY
		i = skip_ws(s, n, ve);
		if (i < n && s[i] == ',') {
			i++;
			continue;
		}
		if (i < n && s[i] == '}')
			break;
		goto done;
	}
	const char *id = id_j ? id_j->valuestring : NULL;
	size_t id_len = id ? strlen(id) : 0;
	if (func) {
		/* OpenAI's own shape: the inner object carries name and arguments. */
		if (name_j || args)
			goto done;
		size_t keep = out->n;
		rc = call_object(func, func_len, out, 1);
		if (rc == 0 && id && !out->v[keep].id) {
			out->v[keep].id = pt_strndup(id, id_len);
			if (!out->v[keep].id) {
				drop_from(out, keep);
				rc = -1;
			}
		}
		goto done;
	}
	if (!name_j)
		goto done;
	{
		bool nomem = false;
		char *a = args ? chat_args_compact(args, args_len, &nomem) : pt_strdup("{}");
		if (!a) {
			rc = (nomem || !args) ? -1 : 1;
			goto done;
		}
		const char *name = name_j->valuestring;
		rc = push_call(out, name, strlen(name), id, id_len, a);
	}
done:
	cJSON_Delete(name_j);
	cJSON_Delete(id_j);
	return rc;
}

/* A call object, or an array of them (parallel calls); generic also takes the legacy
 * {"tool_call": {..}} / {"tool_calls": [..]} wrappers. */
static int json_calls(const char *s, size_t n, bool wrappers, struct chat_calls *out)
{
	trim(&s, &n);
	cJSON *j = parse_exact(s, n);
	if (!j)
		return 1;
	bool arr = cJSON_IsArray(j), obj = cJSON_IsObject(j);
	bool wrapped = obj && wrappers && cJSON_GetArraySize(j) == 1 &&
		       (cJSON_GetObjectItemCaseSensitive(j, "tool_call") ||
			cJSON_GetObjectItemCaseSensitive(j, "tool_calls"));
	cJSON_Delete(j);
	if (wrapped) {
		size_t i = skip_ws(s, n, 1);
		i = skip_ws(s, n, value_end(s, n, i)); /* the key */
		i = skip_ws(s, n, i + 1);              /* past ':' */
		size_t ve = value_end(s, n, i);
		if (i < n && (s[i] == '[' || s[i] == '{'))
			return json_calls(s + i, ve - i, false, out);
		return 1;
	}
	if (obj)
		return call_object(s, n, out, 0);
	if (!arr)
		return 1;
	size_t before = out->n;
	size_t i = skip_ws(s, n, 1);
	if (i < n && s[i] == ']')
		return 1; /* no calls */
	int rc;
	for (;;) {
		size_t ve = value_end(s, n, i);
		rc = call_object(s + i, ve - i, out, 0);
		if (rc != 0)
			break;
		i = skip_ws(s, n, ve);
		if (i < n && s[i] == ',') {
			i = skip_ws(s, n, i + 1);
			continue;
		}
		break;
	}
	if (rc != 0)
		drop_from(out, before);
	return rc;
}

/* ---- Qwen3-Coder / Qwen3.5 inside <tool_call>: <function=NAME>
 *      <parameter=city>\nParis\n</parameter>...</function> ------------------------------- */

/* s[0..n) as a JSON string literal. */
static void json_str(struct chat_buf *o, const char *v, size_t n)
{
	chat_buf_add(o, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char u = (unsigned char)v[i];
		if (u == '"' || u == '\\') {
			char e[2] = { '\\', (char)u };
			chat_buf_add(o, e, 2);
		} else if (u == '\n' || u == '\t' || u == '\r' || u == '\b' || u == '\f') {
			/* the short escapes, as cJSON prints them */
			char e[2] = { '\\', u == '\n' ? 'n' : u == '\t' ? 't' : u == '\r' ? 'r'
							: u == '\b' ? 'b' : 'f' };
			chat_buf_add(o, e, 2);
		} else if (u < 0x20) {
			static const char hex[] = "0123456789abcdef";
			char e[6] = { '\\', 'u', '0', '0', hex[u >> 4], hex[u & 15] };
			chat_buf_add(o, e, 6);
		} else {
			chat_buf_add(o, v + i, 1);
		}
	}
	chat_buf_add(o, "\"", 1);
}

enum {
	T_STR = CHAT_T_STR, T_NUM = CHAT_T_NUM, T_BOOL = CHAT_T_BOOL, T_NULL = CHAT_T_NULL,
	T_OBJ = CHAT_T_OBJ, T_ARR = CHAT_T_ARR, T_ANY = CHAT_T_ANY
};

static unsigned type_bit(const char *t)
{
	static const struct {
		const char *name;
		unsigned bit;
	} M[] = { { "string", T_STR },  { "number", T_NUM }, { "integer", T_NUM },
		  { "boolean", T_BOOL }, { "null", T_NULL },  { "object", T_OBJ },
		  { "array", T_ARR } };
	for (size_t i = 0; i < sizeof(M) / sizeof(M[0]); i++)
		if (strcmp(t, M[i].name) == 0)
			return M[i].bit;
	return 0;
}

/* "type" (a name or an array of names), "nullable", and one level of anyOf/oneOf; 0 when
 * none of them says. */
static unsigned schema_types(const cJSON *s, int depth)
{
	unsigned bits = 0;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *e;
	if (cJSON_IsString(t))
		bits |= type_bit(t->valuestring);
	cJSON_ArrayForEach(e, (cJSON_IsArray(t) ? t : NULL))
		if (cJSON_IsString(e))
			bits |= type_bit(e->valuestring);
	if (bits && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable")))
		bits |= T_NULL;
	if (depth == 0 && !bits) {
		const char *const keys[] = { "anyOf", "oneOf" };
		for (size_t k = 0; k < 2; k++) {
			const cJSON *u = cJSON_GetObjectItemCaseSensitive(s, keys[k]);
			cJSON_ArrayForEach(e, (cJSON_IsArray(u) ? u : NULL))
			{
				unsigned b = schema_types(e, 1);
				if (!b)
					return 0; /* a branch of unknown type: unknown */
				bits |= b;
			}
		}
	}
	return bits;
}

unsigned chat_param_types(const cJSON *schema)
{
	unsigned t = schema_types(schema, 0);
	return t ? t : T_ANY;
}

/* The "properties" object of function name in tool_defs, or NULL. */
static const cJSON *tool_props(const cJSON *tool_defs, const char *name, size_t name_len)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, (cJSON_IsArray(tool_defs) ? tool_defs : NULL))
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (!cJSON_IsString(nm) || strlen(nm->valuestring) != name_len ||
		    memcmp(nm->valuestring, name, name_len) != 0)
			continue;
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
		return cJSON_IsObject(props) ? props : NULL;
	}
	return NULL;
}

/* Bytes of property-name comparison per call block: many parameters against a tool of
 * many (or long) property names stay bounded; past the budget parameters count as
 * undeclared (the result still depends only on the text, never on how it was split). */
#define TYPE_BUDGET ((size_t)1 << 24)

/* The types props allow for parameter key; 0 when not declared (or out of budget). */
static unsigned param_types(const cJSON *props, const char *key, size_t klen, size_t *budget)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, props)
	{
		if (*budget <= klen)
			return 0;
		*budget -= klen + 1;
		if (p->string && strnlen(p->string, klen + 1) == klen &&
		    memcmp(p->string, key, klen) == 0)
			return chat_param_types(p);
	}
	return 0;
}

static bool is_lit(const char *v, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(v, lit, n) == 0;
}

/* A parameter value, typed by the schema's types (0 = an undeclared parameter):
 *   string allowed: the raw text (only "null"/"None" become null when null is allowed too);
 *   other types, or a declared parameter of no known type (CHAT_T_ANY): the text as JSON
 *     when it parses (the template writes objects and arrays with tojson, other values with
 *     Python's str: True/False/None are read as JSON's when boolean/null is allowed), else
 *     the raw text as a string;
 *   undeclared: JSON when it parses as a non-string JSON value, else the raw text. */
static void xml_value(struct chat_buf *o, const char *v, size_t n, unsigned types)
{
	if (n && v[0] == '\n') {
		v++;
		n--;
	}
	if (n && v[n - 1] == '\n')
		n--;
	if ((types & T_NULL) && (is_lit(v, n, "null") || is_lit(v, n, "None"))) {
		chat_buf_add(o, "null", 4);
		return;
	}
	if (types & T_STR) {
		json_str(o, v, n);
		return;
	}
	if ((types & T_BOOL) && (is_lit(v, n, "True") || is_lit(v, n, "False"))) {
		chat_buf_add(o, v[0] == 'T' ? "true" : "false", v[0] == 'T' ? 4 : 5);
		return;
	}
	cJSON *j = parse_exact(v, n);
	bool raw = j && (types ? true : !cJSON_IsString(j));
	cJSON_Delete(j);
	if (raw)
		chat_buf_add(o, v, n);
	else
		json_str(o, v, n);
}

static int xml_call(const char *s, size_t n, const cJSON *tool_defs, struct chat_calls *out)
{
	trim(&s, &n);
	if (!starts(s, n, "<function="))
		return 1;
	const char *gt = memchr(s, '>', n);
	if (!gt || n < 11 || memcmp(s + n - 11, "</function>", 11) != 0 || gt > s + n - 11)
		return 1;
	const char *name = s + 10;
	size_t name_len = (size_t)(gt - name);
	if (name_len == 0 || name_len > MAX_NAME || memchr(name, '<', name_len))
		return 1;
	const char *p = gt + 1, *e = s + n - 11;
	const cJSON *props = tool_props(tool_defs, name, name_len);
	size_t budget = TYPE_BUDGET;
	struct chat_buf o = { 0 };
	chat_buf_add(&o, "{", 1);
	int rc = 0;
	bool first = true;
	for (;;) {
		while (p < e && chat_is_ws(*p))
			p++;
		if (p >= e)
			break;
		size_t left = (size_t)(e - p);
		const char *kgt = memchr(p, '>', left);
		if (!starts(p, left, "<parameter=") || !kgt) {
			rc = 1;
			break;
		}
		const char *key = p + 11;
		size_t klen = (size_t)(kgt - key);
		const char *vend = find(kgt + 1, (size_t)(e - kgt - 1), "</parameter>");
		if (!vend || klen == 0 || memchr(key, '<', klen)) {
			rc = 1;
			break;
		}
		if (!first)
			chat_buf_add(&o, ",", 1);
		first = false;
		json_str(&o, key, klen);
		chat_buf_add(&o, ":", 1);
		xml_value(&o, kgt + 1, (size_t)(vend - kgt - 1),
			  props ? param_types(props, key, klen, &budget) : 0);
		p = vend + 12;
	}
	chat_buf_add(&o, "}", 1);
	if (rc == 0 && o.bad)
		rc = -1;
	if (rc == 0) {
		bool nomem = false;
		char *a = chat_args_compact(o.p, o.n, &nomem);
		rc = a ? push_call(out, name, name_len, NULL, 0, a) : (nomem ? -1 : 1);
	}
	chat_buf_free(&o);
	return rc;
}

/* ---- Gemma 4: call:NAME{key:<|"|>text<|"|>,n:1,flag:true,obj:{k:[1,2]}} ------------------ */

#define GQ "<|\"|>"

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.' || c == '$';
}

/* Gemma's argument syntax into JSON text (validated by the caller). */
static int gemma_to_json(const char *s, size_t n, struct chat_buf *o)
{
	size_t i = 0;
	while (i < n) {
		char c = s[i];
		if (starts(s + i, n - i, GQ)) {
			const char *e = find(s + i + 5, n - i - 5, GQ);
			if (!e)
				return 1;
			json_str(o, s + i + 5, (size_t)(e - s - i - 5));
			i = (size_t)(e - s) + 5;
		} else if (c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':') {
			chat_buf_add(o, &c, 1);
			i++;
		} else if (chat_is_ws(c)) {
			i++;
		} else if (c == '"') { /* a plain JSON string: copied through */
			size_t e = value_end(s, n, i);
			chat_buf_add(o, s + i, e - i);
			i = e;
		} else if (ident_char(c) || c == '+') {
			size_t e = i;
			while (e < n && (ident_char(s[e]) || s[e] == '+'))
				e++;
			size_t k = skip_ws(s, n, e);
			const char *w = s + i;
			size_t wl = e - i;
			if (k < n && s[k] == ':') { /* a bare key */
				chat_buf_add(o, "\"", 1);
				chat_buf_add(o, w, wl);
				chat_buf_add(o, "\"", 1);
			} else if ((wl == 4 && (!memcmp(w, "None", 4) || !memcmp(w, "null", 4) ||
						!memcmp(w, "none", 4)))) {
				chat_buf_add(o, "null", 4);
			} else if (wl == 4 && !memcmp(w, "True", 4)) {
				chat_buf_add(o, "true", 4);
			} else if (wl == 5 && !memcmp(w, "False", 5)) {
				chat_buf_add(o, "false", 5);
			} else {
				chat_buf_add(o, w, wl); /* number, true, false: cJSON judges */
			}
			i = e;
		} else {
			return 1;
		}
	}
	return o->bad ? -1 : 0;
}

static int gemma_call(const char *s, size_t n, struct chat_calls *out)
{
	trim(&s, &n);
	if (!starts(s, n, "call:"))
		return 1;
	s += 5;
	n -= 5;
	const char *brace = memchr(s, '{', n);
	if (!brace)
		return 1;
	const char *name = s;
	size_t name_len = (size_t)(brace - s);
	trim(&name, &name_len);
	if (name_len == 0 || name_len > MAX_NAME || memchr(name, 0, name_len))
		return 1;
	struct chat_buf o = { 0 };
	int rc = gemma_to_json(brace, n - (size_t)(brace - s), &o);
	if (rc == 0) {
		bool nomem = false;
		char *a = o.n ? chat_args_compact(o.p, o.n, &nomem) : NULL;
		if (a)
			rc = push_call(out, name, name_len, NULL, 0, a);
		else
			rc = nomem ? -1 : 1;
	}
	chat_buf_free(&o);
	return rc;
}

/* ---- Mistral: [{..},..] | {..} | NAME[CALL_ID]ID[ARGS]{..} | NAME[ARGS]{..} ------------- */

static int mistral_calls(const char *s, size_t n, struct chat_calls *out)
{
	trim(&s, &n);
	if (n && (s[0] == '[' || s[0] == '{'))
		return json_calls(s, n, false, out);
	const char *a = find(s, n < MAX_PREFIX ? n : MAX_PREFIX, "[ARGS]");
	if (!a)
		return 1;
	const char *name = s, *id = NULL;
	size_t name_len = (size_t)(a - s), id_len = 0;
	const char *ci = find(s, (size_t)(a - s), "[CALL_ID]");
	if (ci) {
		name_len = (size_t)(ci - s);
		id = ci + 9;
		id_len = (size_t)(a - id);
		trim(&id, &id_len);
		if (!good_id(id, id_len))
			return 1;
	}
	trim(&name, &name_len);
	if (name_len == 0 || name_len > MAX_NAME)
		return 1;
	for (size_t i = 0; i < name_len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == '[' || name[i] == ']')
			return 1;
	bool nomem = false;
	const char *args = a + 6;
	char *j = chat_args_compact(args, n - (size_t)(args - s), &nomem);
	if (!j)
		return nomem ? -1 : 1;
	return push_call(out, name, name_len, id, id_len, j);
}

/* ---- DeepSeek R1 / V3.1 ------------------------------------------------------------------- */

#define DS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"

static int deepseek_calls(const char *s, size_t n, struct chat_calls *out)
{
	size_t before = out->n;
	int rc = 1;
	const size_t lb = strlen(DS_BEGIN), ls = strlen(DS_SEP), le = strlen(DS_END);
	for (;;) {
		trim(&s, &n);
		if (n == 0)
			break;
		rc = 1;
		if (!starts(s, n, DS_BEGIN))
			break;
		const char *body = s + lb;
		const char *end = find(body, n - lb, DS_END);
		if (!end)
			break;
		size_t blen = (size_t)(end - body);
		const char *sep = find(body, blen, DS_SEP);
		if (!sep)
			break;
		const char *name = body, *json = sep + ls;
		size_t name_len = (size_t)(sep - body);
		size_t json_len = (size_t)(end - json);
		const char *fence = find(json, json_len, "```");
		if (fence) {
			/* R1: TYPE<sep>NAME\n```json\n{..}\n``` */
			const char *nl = memchr(json, '\n', json_len);
			if (!nl || nl > fence)
				break;
			name = json;
			name_len = (size_t)(nl - json);
			const char *after = fence + 3;
			const char *nl2 = memchr(after, '\n', (size_t)(end - after));
			if (!nl2)
				break;
			json = nl2 + 1;
			const char *close = NULL;
			for (const char *q = json; (q = find(q, (size_t)(end - q), "```")); q += 3)
				close = q;
			if (!close)
				break;
			json_len = (size_t)(close - json);
		}
		trim(&name, &name_len);
		if (name_len == 0 || name_len > MAX_NAME)
			break;
		bool nomem = false;
		char *a = chat_args_compact(json, json_len, &nomem);
		if (!a) {
			rc = nomem ? -1 : 1;
			break;
		}
		rc = push_call(out, name, name_len, NULL, 0, a);
		if (rc != 0)
			break;
		n -= (size_t)(end + le - s);
		s = end + le;
	}
	if (rc != 0 || out->n == before) {
		drop_from(out, before);
		return rc < 0 ? -1 : 1;
	}
	return 0;
}

/* ---- Llama 3 <|python_tag|>: {"name",..} or NAME.call(k="v", n=1) ------------------------ */

static int python_tag_call(const char *s, size_t n, struct chat_calls *out)
{
	trim(&s, &n);
	if (n && s[0] == '{')
		return json_calls(s, n, false, out);
	const char *dot = find(s, n, ".call(");
	if (!dot || n == 0 || s[n - 1] != ')')
		return 1;
	const char *name = s;
	size_t name_len = (size_t)(dot - s);
	if (name_len == 0 || name_len > MAX_NAME)
		return 1;
	for (size_t i = 0; i < name_len; i++)
		if (!ident_char(name[i]))
			return 1;
	const char *p = dot + 6, *e = s + n - 1;
	struct chat_buf o = { 0 };
	chat_buf_add(&o, "{", 1);
	bool first = true;
	int rc = 0;
	for (;;) {
		while (p < e && chat_is_ws(*p))
			p++;
		if (p >= e)
			break;
		if (!first) {
			if (*p != ',') {
				rc = 1;
				break;
			}
			p++;
			while (p < e && chat_is_ws(*p))
				p++;
		}
		const char *k = p;
		while (p < e && ident_char(*p))
			p++;
		size_t klen = (size_t)(p - k);
		while (p < e && chat_is_ws(*p))
			p++;
		if (klen == 0 || p >= e || *p != '=') {
			rc = 1;
			break;
		}
		p++;
		while (p < e && chat_is_ws(*p))
			p++;
		size_t ve = value_end(p, (size_t)(e - p), 0);
		if (ve == 0) {
			rc = 1;
			break;
		}
		chat_buf_add(&o, first ? "\"" : ",\"", first ? 1 : 2);
		chat_buf_add(&o, k, klen);
		chat_buf_add(&o, "\":", 2);
		chat_buf_add(&o, p, ve);
		p += ve;
		first = false;
	}
	chat_buf_add(&o, "}", 1);
	if (rc == 0 && o.bad)
		rc = -1;
	if (rc == 0) {
		bool nomem = false;
		char *a = chat_args_compact(o.p, o.n, &nomem);
		rc = a ? push_call(out, name, name_len, NULL, 0, a) : (nomem ? -1 : 1);
	}
	chat_buf_free(&o);
	return rc;
}

int chat_block_parse(enum chat_block k, const char *body, size_t len, const cJSON *tool_defs,
		     struct chat_calls *out)
{
	switch (k) {
	case BK_JSON_TAGGED: {
		const char *b = body;
		size_t n = len;
		trim(&b, &n);
		if (starts(b, n, "<function="))
			return xml_call(b, n, tool_defs, out);
		return json_calls(body, len, false, out);
	}
	case BK_JSON_BARE:
		return json_calls(body, len, true, out);
	case BK_PYTHON_TAG:
		return python_tag_call(body, len, out);
	case BK_GEMMA:
		return gemma_call(body, len, out);
	case BK_MISTRAL:
		return mistral_calls(body, len, out);
	case BK_DEEPSEEK:
		return deepseek_calls(body, len, out);
	}
	return 1;
}
