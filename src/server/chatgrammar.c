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
#include "util/alloc.h"

#define MAX_TOOLS 1024

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

enum pt_status pt_chat_tool_alternatives(enum pt_chat_format f, const cJSON *tools,
					 const char *only_name, struct pt_chat_alt **out,
					 size_t *n_out, struct pt_error *err)
{
	*out = NULL;
	*n_out = 0;
	struct shape sh;
	if (f == PT_CHAT_GEMMA4)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "tool_choice: forcing a call is not supported for the gemma4 "
				    "format (its arguments are not JSON)");
	if (!shape_of(f, &sh))
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
		char *nm = sh.json_name ? cJSON_PrintUnformatted(name) : pt_strdup(name->valuestring);
		struct pt_chat_alt *a = &alts[n];
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
	struct pt_grammar_part *parts = pt_calloc(n * 3, sizeof(*parts));
	const struct pt_grammar_part **seqs = pt_calloc(n, sizeof(*seqs));
	size_t *counts = pt_calloc(n, sizeof(*counts));
	if (!any_obj || !parts || !seqs || !counts) {
		st = pt_error_set(err, PT_E_NOMEM, "tool_choice: out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < alts[i].n_parts; j++) {
			struct pt_grammar_part *g = &parts[i * 3 + j];
			g->literal = alts[i].parts[j].literal;
			if (!g->literal)
				g->schema = alts[i].parts[j].schema ? alts[i].parts[j].schema
								   : any_obj;
		}
		seqs[i] = &parts[i * 3];
		counts[i] = alts[i].n_parts;
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
