/* chatgrammar.c - tool_choice "required" / a named function: the text a call must take in
 * the family's syntax, as alternatives of literal and JSON-schema parts (one per tool), for
 * the grammar engine (src/gen/grammar.h) to force.  The literals are what the family's
 * template renders around a call, so the forced output parses back with chatparse.c.
 *
 * Gemma 4's arguments are not JSON (unquoted keys, <|"|> strings): a JSON schema cannot
 * describe them, so forcing is PT_E_UNSUPPORTED there (the server falls back to "auto"). */
#include <string.h>

#include "gen/grammar.h"
#include "server/chatparse.h"
#include "server/chatparse_int.h"
#include "util/alloc.h"

#define MAX_TOOLS 1024
#define MAX_XML_REQUIRED 500

#define DS_CALLS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"

/* The literal before and after the arguments; %s is the name (JSON-escaped, with quotes,
 * where the family writes it as a JSON string; raw otherwise). */
struct shape {
	const char *pre, *post;
	bool json_name;
};

static bool shape_of(enum pt_chat_format f, struct shape *s)
{
	switch (f) {
	case PT_CHAT_GENERIC:
	case PT_CHAT_HERMES:
		*s = (struct shape){ "<tool_call>\n{\"name\": %s, \"arguments\": ", "}\n</tool_call>",
				     true };
		return true;
	case PT_CHAT_PHI4:
		*s = (struct shape){ "<|tool_call|>{\"name\": %s, \"arguments\": ",
				     "}<|/tool_call|>", true };
		return true;
	case PT_CHAT_LLAMA3:
		*s = (struct shape){ "{\"name\": %s, \"parameters\": ", "}", true };
		return true;
	case PT_CHAT_MISTRAL:
		*s = (struct shape){ "[TOOL_CALLS][{\"name\": %s, \"arguments\": ", "}]", true };
		return true;
	case PT_CHAT_DEEPSEEK_R1:
		*s = (struct shape){ DS_CALLS_BEGIN DS_BEGIN "function" DS_SEP "%s\n```json\n",
				     "\n```" DS_END DS_CALLS_END, false };
		return true;
	case PT_CHAT_HARMONY:
		/* <|call|> ends generation (a stop token), so the grammar ends with the JSON. */
		*s = (struct shape){ "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>",
				     "", false };
		return true;
	default:
		return false;
	}
}

static char *subst(const char *fmt, const char *name)
{
	const char *pct = strstr(fmt, "%s");
	size_t a = (size_t)(pct - fmt), b = strlen(name), c = strlen(pct + 2);
	char *o = pt_malloc(a + b + c + 1);
	if (!o)
		return NULL;
	memcpy(o, fmt, a);
	memcpy(o + a, name, b);
	memcpy(o + a + b, pct + 2, c + 1);
	return o;
}

void pt_chat_alternatives_free(struct pt_chat_alt *alts, size_t n)
{
	if (!alts)
		return;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < alts[i].n_parts; j++)
			pt_free(alts[i].parts[j].literal);
		pt_free(alts[i].parts);
	}
	pt_free(alts);
}

/* ---- Qwen3-Coder / Qwen3.5 XML: one part per required parameter ------------------------- */

/* A name the XML form can carry: the parser ends a name at '>' and refuses '<'. */
static bool xml_name_ok(const char *s)
{
	return s[0] && !strpbrk(s, "<>\n");
}


struct xml_builder {
	struct pt_chat_alt_part *parts;
	size_t n, cap;
	char *lit; /* the literal being built (flushed before a value part) */
	size_t lit_n;
	bool bad;
};

static void xb_text(struct xml_builder *b, const char *s)
{
	size_t m = strlen(s);
	char *np = b->bad ? NULL : pt_realloc(b->lit, b->lit_n + m + 1);
	if (!np) {
		b->bad = true;
		return;
	}
	memcpy(np + b->lit_n, s, m + 1);
	b->lit = np;
	b->lit_n += m;
}

static struct pt_chat_alt_part *xb_part(struct xml_builder *b)
{
	if (b->bad)
		return NULL;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8;
		struct pt_chat_alt_part *np = pt_reallocn(b->parts, cap, sizeof(*np));
		if (!np) {
			b->bad = true;
			return NULL;
		}
		b->parts = np;
		b->cap = cap;
	}
	memset(&b->parts[b->n], 0, sizeof(b->parts[0]));
	return &b->parts[b->n++];
}

static void xb_free(struct xml_builder *b)
{
	pt_free(b->lit);
	for (size_t i = 0; i < b->n; i++)
		pt_free(b->parts[i].literal);
	pt_free(b->parts);
}

static void xb_flush(struct xml_builder *b)
{
	if (!b->lit)
		return;
	struct pt_chat_alt_part *p = xb_part(b);
	if (p)
		p->literal = b->lit;
	else
		pt_free(b->lit);
	b->lit = NULL;
	b->lit_n = 0;
}

/* "<tool_call>\n<function=N>\n", then per required parameter (in properties order)
 * "<parameter=K>\n" + value + "\n</parameter>\n" (raw text for parameters that may be strings,
 * which then end with "</parameter>\n" since the text may hold the newline itself; the
 * parameter's JSON schema otherwise), then "</function>\n</tool_call>".  Optional parameters
 * are left out: a sequence cannot make them optional without one alternative per subset. */
static enum pt_status xml_alternative(const char *name, const cJSON *params,
				      struct pt_chat_alt *a, struct pt_error *err)
{
	struct xml_builder b = { 0 };
	if (!xml_name_ok(name))
		return pt_error_set(err, PT_E_INVALID, "tool_choice: tool name \"%s\" cannot be "
				    "written in the XML call form", name);
	xb_text(&b, "<tool_call>\n<function=");
	xb_text(&b, name);
	xb_text(&b, ">\n");
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
	const cJSON *p;
	/* two parts a parameter; the grammar takes 1024 parts an alternative (and the scan
	 * below is properties x required) */
	if (cJSON_IsArray(req) && cJSON_GetArraySize(req) > MAX_XML_REQUIRED) {
		xb_free(&b);
		return pt_error_set(err, PT_E_LIMIT, "tool_choice: \"%s\" has more than %d "
				    "required parameters", name, MAX_XML_REQUIRED);
	}
	cJSON_ArrayForEach(p, (cJSON_IsObject(props) ? props : NULL))
	{
		bool required = false;
		const cJSON *r;
		cJSON_ArrayForEach(r, (cJSON_IsArray(req) ? req : NULL))
			required |= cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0;
		if (!required)
			continue;
		if (!xml_name_ok(p->string)) {
			xb_free(&b);
			return pt_error_set(err, PT_E_INVALID, "tool_choice: parameter \"%s\" of "
					    "\"%s\" cannot be written in the XML call form",
					    p->string, name);
		}
		xb_text(&b, "<parameter=");
		xb_text(&b, p->string);
		xb_text(&b, ">\n");
		xb_flush(&b);
		struct pt_chat_alt_part *v = xb_part(&b);
		/* a parameter that may be a string is raw text, as the parser reads it back
		 * (its enum, format or length are not enforced then) */
		bool raw = (chat_param_types(p) & CHAT_T_STR) != 0;
		if (v) {
			v->raw_text = raw;
			v->schema = raw ? NULL : p;
		}
		xb_text(&b, raw ? "</parameter>\n" : "\n</parameter>\n");
	}
	xb_text(&b, "</function>\n</tool_call>");
	xb_flush(&b);
	if (b.bad) {
		xb_free(&b);
		return pt_error_set(err, PT_E_NOMEM, "tool_choice: out of memory");
	}
	a->parts = b.parts;
	a->n_parts = b.n;
	return PT_OK;
}

enum pt_status pt_chat_tool_alternatives(enum pt_chat_format f, const cJSON *tools,
					 const char *only_name, struct pt_chat_alt **out,
					 size_t *n_out, struct pt_error *err)
{
	*out = NULL;
	*n_out = 0;
	struct shape sh = { 0 };
	if (f == PT_CHAT_GEMMA4)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "tool_choice: forcing a call is not supported for the gemma4 "
				    "format (its arguments are not JSON)");
	if (f != PT_CHAT_QWEN3_XML && !shape_of(f, &sh))
		return pt_error_set(err, PT_E_INVALID, "tool_choice: unknown chat format");
	if (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) == 0)
		return pt_error_set(err, PT_E_INVALID, "tool_choice: no tools given");
	int nt = cJSON_GetArraySize(tools);
	if (nt > MAX_TOOLS)
		return pt_error_set(err, PT_E_LIMIT, "tool_choice: more than %d tools", MAX_TOOLS);
	struct pt_chat_alt *alts = pt_calloc((size_t)nt, sizeof(*alts));
	if (!alts)
		return pt_error_set(err, PT_E_NOMEM, "tool_choice: out of memory");
	size_t n = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, tools)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (!cJSON_IsString(name) || !name->valuestring[0]) {
			pt_chat_alternatives_free(alts, n);
			return pt_error_set(err, PT_E_INVALID,
					    "tool_choice: tools[%zu] has no function name", n);
		}
		if (only_name && strcmp(only_name, name->valuestring) != 0)
			continue;
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		if (params && !cJSON_IsObject(params)) {
			pt_chat_alternatives_free(alts, n);
			return pt_error_set(err, PT_E_INVALID,
					    "tool_choice: parameters of tool \"%s\" is not an object",
					    name->valuestring);
		}
		struct pt_chat_alt *a = &alts[n];
		if (f == PT_CHAT_QWEN3_XML) {
			enum pt_status st = xml_alternative(name->valuestring, params, a, err);
			if (st != PT_OK) {
				pt_chat_alternatives_free(alts, n);
				return st;
			}
			n++;
			continue;
		}
		char *nm = sh.json_name ? cJSON_PrintUnformatted(name) : pt_strdup(name->valuestring);
		a->parts = pt_calloc(3, sizeof(*a->parts));
		char *pre = nm ? subst(sh.pre, nm) : NULL;
		if (sh.json_name)
			cJSON_free(nm);
		else
			pt_free(nm);
		char *post = sh.post[0] ? pt_strdup(sh.post) : NULL;
		if (!a->parts || !pre || (sh.post[0] && !post)) {
			pt_free(pre);
			pt_free(post);
			pt_free(a->parts);
			a->parts = NULL;
			pt_chat_alternatives_free(alts, n);
			return pt_error_set(err, PT_E_NOMEM, "tool_choice: out of memory");
		}
		a->parts[0].literal = pre;
		a->parts[1].schema = params; /* NULL: any JSON object */
		a->n_parts = 2;
		if (post) {
			a->parts[2].literal = post;
			a->n_parts = 3;
		}
		n++;
	}
	if (n == 0) {
		pt_chat_alternatives_free(alts, n);
		return pt_error_set(err, PT_E_INVALID, "tool_choice: no tool named \"%s\"",
				    only_name ? only_name : "");
	}
	*out = alts;
	*n_out = n;
	return PT_OK;
}

enum pt_status pt_chat_tool_grammar(enum pt_chat_format f, const cJSON *tools,
				    const char *only_name, struct pt_grammar **out,
				    struct pt_error *err)
{
	*out = NULL;
	struct pt_chat_alt *alts = NULL;
	size_t n = 0;
	enum pt_status st = pt_chat_tool_alternatives(f, tools, only_name, &alts, &n, err);
	if (st != PT_OK)
		return st;
	/* Parameters-less tools take any object: {"type":"object"}. */
	cJSON *any_obj = cJSON_Parse("{\"type\":\"object\"}");
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += alts[i].n_parts;
	struct pt_grammar_part *parts = pt_calloc(total ? total : 1, sizeof(*parts));
	const struct pt_grammar_part **seqs = pt_calloc(n, sizeof(*seqs));
	size_t *counts = pt_calloc(n, sizeof(*counts));
	if (!any_obj || !parts || !seqs || !counts) {
		st = pt_error_set(err, PT_E_NOMEM, "tool_choice: out of memory");
		goto done;
	}
	for (size_t i = 0, k = 0; i < n; i++) {
		seqs[i] = &parts[k];
		counts[i] = alts[i].n_parts;
		for (size_t j = 0; j < alts[i].n_parts; j++, k++) {
			struct pt_grammar_part *g = &parts[k];
			g->literal = alts[i].parts[j].literal;
			g->raw_text = alts[i].parts[j].raw_text;
			if (!g->literal && !g->raw_text)
				g->schema = alts[i].parts[j].schema ? alts[i].parts[j].schema
								   : any_obj;
		}
	}
	st = pt_grammar_from_alternatives(seqs, counts, n, (pt_grammar **)out, err);
done:
	cJSON_Delete(any_obj);
	pt_free(parts);
	pt_free(seqs);
	pt_free(counts);
	pt_chat_alternatives_free(alts, n);
	return st;
}
