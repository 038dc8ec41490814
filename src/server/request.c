/* request.c - request body -> struct pt_req (see request.h).  Checks run from the cheapest
 * (bytes) to the most specific (one field), and the first failure is the answer. */
#include "server/request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

static bool fail(struct pt_req_error *e, int status, const char *param, const char *code,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static bool fail(struct pt_req_error *e, int status, const char *param, const char *code,
		 const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	snprintf(e->param, sizeof e->param, "%s", param ? param : "");
	snprintf(e->code, sizeof e->code, "%s", code ? code : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	return false;
}

size_t pt_req_utf8_check(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char b = s[i];
		if (b < 0x80) {
			i++;
			continue;
		}
		size_t need = (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : 0;
		if (need == 0 || (need == 1 && b < 0xC2) || need >= len - i)
			return i;
		uint32_t cp = b & (need == 1 ? 0x1Fu : need == 2 ? 0x0Fu : 0x07u);
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3Fu);
		}
		if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
		    (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
			return i;
		i += need + 1;
	}
	return len;
}

/* Bytes-level checks before the parser sees anything: UTF-8, raw NULs, the escape \u0000
 * (C strings cannot hold it) and the nesting depth. */
static bool check_bytes(const char *b, size_t len, struct pt_req_error *e)
{
	size_t bad = pt_req_utf8_check((const unsigned char *)b, len);
	if (bad != len)
		return fail(e, 400, NULL, "invalid_utf8", "the body is not valid UTF-8 (byte %zu)", bad);
	if (memchr(b, 0, len))
		return fail(e, 400, NULL, "invalid_json", "the body contains a NUL byte");
	size_t depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char c = b[i];
		if (in_str) {
			if (c == '\\' && i + 1 < len) {
				if (b[i + 1] == 'u' && i + 5 < len && memcmp(b + i + 2, "0000", 4) == 0)
					return fail(e, 400, NULL, "invalid_value",
						    "strings may not contain NUL (\\u0000)");
				i++;
			} else if (c == '"') {
				in_str = false;
			}
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > PT_REQ_MAX_DEPTH)
				return fail(e, 400, NULL, "too_deep",
					    "JSON nested deeper than %d levels", PT_REQ_MAX_DEPTH);
		} else if ((c == ']' || c == '}') && depth) {
			depth--;
		}
	}
	return true;
}

/* ---- typed field readers: absent and null mean "keep the default" ----------------------- */

static const cJSON *field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_bool(const cJSON *o, const char *name, bool *out, struct pt_req_error *e)
{
	const cJSON *v = field(o, name);
	if (!v)
		return true;
	if (!cJSON_IsBool(v))
		return fail(e, 400, name, "invalid_type", "'%s' must be a boolean", name);
	*out = cJSON_IsTrue(v);
	return true;
}

static bool get_num(const cJSON *o, const char *name, double lo, double hi, bool integer,
		    double *out, bool *given, struct pt_req_error *e)
{
	const cJSON *v = field(o, name);
	if (given)
		*given = v != NULL;
	if (!v)
		return true;
	if (!cJSON_IsNumber(v))
		return fail(e, 400, name, "invalid_type", "'%s' must be a number", name);
	double d = v->valuedouble;
	if (!isfinite(d) || d < lo || d > hi)
		return fail(e, 400, name, "invalid_value", "'%s' must be between %g and %g, got %g",
			    name, lo, hi, d);
	if (integer && d != floor(d))
		return fail(e, 400, name, "invalid_type", "'%s' must be an integer, got %g", name, d);
	*out = d;
	return true;
}

static bool get_float(const cJSON *o, const char *name, double lo, double hi, float *out,
		      struct pt_req_error *e)
{
	double d = *out;
	if (!get_num(o, name, lo, hi, false, &d, NULL, e))
		return false;
	*out = (float)d;
	return true;
}

static bool get_str(const cJSON *o, const char *name, const char **out, struct pt_req_error *e)
{
	const cJSON *v = field(o, name);
	if (!v)
		return true;
	if (!cJSON_IsString(v))
		return fail(e, 400, name, "invalid_type", "'%s' must be a string", name);
	*out = v->valuestring;
	return true;
}

/* ---- sampling and output options shared by chat and completions ------------------------- */

static bool add_stop(struct pt_req *r, const char *s, struct pt_req_error *e)
{
	size_t n = strlen(s);
	if (n == 0)
		return true; /* llama.cpp drops empty stop strings */
	if (n > PT_REQ_MAX_STOP_LEN)
		return fail(e, 400, "stop", "invalid_value", "a stop string is longer than %d bytes",
			    PT_REQ_MAX_STOP_LEN);
	if (r->n_stops == PT_REQ_MAX_STOPS)
		return fail(e, 400, "stop", "invalid_value", "more than %d stop strings",
			    PT_REQ_MAX_STOPS);
	r->stops[r->n_stops] = pt_strdup(s);
	if (!r->stops[r->n_stops])
		return fail(e, 503, NULL, NULL, "out of memory");
	r->n_stops++;
	return true;
}

static bool get_stops(const cJSON *o, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *v = field(o, "stop");
	if (!v)
		return true;
	if (cJSON_IsString(v))
		return add_stop(r, v->valuestring, e);
	if (!cJSON_IsArray(v))
		return fail(e, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
	for (const cJSON *s = v->child; s; s = s->next) {
		if (!cJSON_IsString(s))
			return fail(e, 400, "stop", "invalid_type", "'stop' must contain strings only");
		if (!add_stop(r, s->valuestring, e))
			return false;
	}
	return true;
}

static bool get_max_tokens(const cJSON *o, struct pt_req *r, struct pt_req_error *e)
{
	static const char *const names[] = { "max_completion_tokens", "max_tokens", "n_predict" };
	for (size_t i = 0; i < 3; i++) {
		double d = 0;
		bool given = false;
		if (!get_num(o, names[i], -1, 2147483647.0, true, &d, &given, e))
			return false;
		if (!given)
			continue;
		if (d == 0)
			return fail(e, 400, names[i], "invalid_value",
				    "'%s' must be at least 1 (or -1: until the end)", names[i]);
		r->max_tokens = (int64_t)d;
		return true;
	}
	return true;
}

static bool get_sampling(const cJSON *o, struct pt_req *r, struct pt_req_error *e)
{
	struct pt_sampler_opts *s = &r->sampler;
	double d = 0;
	bool given = false;
	if (!get_float(o, "temperature", 0, 100, &s->temperature, e) ||
	    !get_float(o, "top_p", 0, 1, &s->top_p, e) ||
	    !get_float(o, "min_p", 0, 1, &s->min_p, e) ||
	    !get_float(o, "repeat_penalty", 0.01, 100, &s->repeat_penalty, e) ||
	    !get_float(o, "presence_penalty", -2, 2, &r->presence_penalty, e) ||
	    !get_float(o, "frequency_penalty", -2, 2, &r->frequency_penalty, e))
		return false;
	if (!get_num(o, "top_k", -1, 2147483647.0, true, &d, &given, e))
		return false;
	if (given)
		s->top_k = d <= 0 ? 0 : (uint32_t)d;
	if (!get_num(o, "repeat_last_n", 0, 1 << 20, true, &d, &given, e))
		return false;
	if (given)
		s->repeat_last_n = (uint32_t)d;
	if (!get_num(o, "seed", -1, 9007199254740992.0, true, &d, &given, e))
		return false;
	if (given && d >= 0)
		s->seed = (uint64_t)d;
	else if (given)
		s->seed = UINT64_MAX; /* -1: random, like no seed */
	if (!get_num(o, "n", 1, 1e9, true, &d, &given, e))
		return false;
	if (given && d != 1)
		return fail(e, 400, "n", "invalid_value", "only n=1 is supported");
	const cJSON *lb = field(o, "logit_bias");
	if (lb && !(cJSON_IsObject(lb) && !lb->child))
		return fail(e, 400, "logit_bias", "unsupported", "'logit_bias' is not supported");
	return get_max_tokens(o, r, e) && get_stops(o, r, e);
}

static bool get_stream(const cJSON *o, struct pt_req *r, struct pt_req_error *e)
{
	if (!get_bool(o, "stream", &r->stream, e) || !get_bool(o, "cache_prompt", &r->cache_prompt, e))
		return false;
	const cJSON *so = field(o, "stream_options");
	if (!so)
		return true;
	if (!cJSON_IsObject(so))
		return fail(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
	return get_bool(so, "include_usage", &r->include_usage, e);
}

static bool get_logprobs(const cJSON *o, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *lp = field(o, "logprobs");
	double d = 0;
	bool given = false;
	if (r->kind == PT_REQ_COMPLETION && lp && cJSON_IsNumber(lp)) {
		/* legacy completions: logprobs is the number of alternatives */
		if (!get_num(o, "logprobs", 0, PT_REQ_MAX_TOP_LOGPROBS, true, &d, NULL, e))
			return false;
		r->logprobs = true;
		r->top_logprobs = (uint32_t)d;
		return true;
	}
	if (!get_bool(o, "logprobs", &r->logprobs, e) ||
	    !get_num(o, "top_logprobs", 0, PT_REQ_MAX_TOP_LOGPROBS, true, &d, &given, e))
		return false;
	if (given && !r->logprobs)
		return fail(e, 400, "top_logprobs", "invalid_value",
			    "'top_logprobs' needs 'logprobs': true");
	r->top_logprobs = (uint32_t)d;
	return true;
}

/* ---- chat: messages, tools, formats ----------------------------------------------------- */

static bool valid_role(const char *r)
{
	static const char *const roles[] = { "system", "developer", "user", "assistant", "tool" };
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (strcmp(r, roles[i]) == 0)
			return true;
	return false;
}

/* content parts -> one string: text parts joined by "\n"; anything else is refused. */
static bool flatten_parts(cJSON *msg, cJSON *content, size_t i, struct pt_req_error *e)
{
	size_t total = 0;
	for (const cJSON *p = content->child; p; p = p->next) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
		if (!cJSON_IsObject(p) || !cJSON_IsString(type))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].content: each part must be an object with a string "
				    "\"type\"", i);
		if (strcmp(type->valuestring, "text") != 0)
			return fail(e, 400, "messages", "unsupported_content",
				    "messages[%zu].content: unsupported content part type '%.40s' "
				    "(this server takes text parts only)", i, type->valuestring);
		if (!cJSON_IsString(text))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].content: a text part needs a string \"text\"", i);
		total += strlen(text->valuestring) + 1;
	}
	char *s = pt_malloc(total + 1), *w = s;
	if (!s)
		return fail(e, 503, NULL, NULL, "out of memory");
	for (const cJSON *p = content->child; p; p = p->next) {
		const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
		if (w != s)
			*w++ = '\n';
		size_t n = strlen(t);
		memcpy(w, t, n);
		w += n;
	}
	*w = 0;
	cJSON *str = cJSON_CreateString(s);
	pt_free(s);
	if (!str || !cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", str)) {
		cJSON_Delete(str);
		return fail(e, 503, NULL, NULL, "out of memory");
	}
	return true;
}

static bool check_tool_calls(const cJSON *tc, size_t i, struct pt_req_error *e)
{
	if (!cJSON_IsArray(tc))
		return fail(e, 400, "messages", "invalid_type", "messages[%zu].tool_calls must be an array", i);
	for (const cJSON *c = tc->child; c; c = c->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
		if (!cJSON_IsObject(c) || !cJSON_IsObject(fn) || !cJSON_IsString(name))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].tool_calls: each needs function.name (a string)", i);
		if (args && !cJSON_IsString(args) && !cJSON_IsObject(args))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].tool_calls: function.arguments must be a string or "
				    "an object", i);
		if (id && !cJSON_IsString(id) && !cJSON_IsNull(id))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].tool_calls: id must be a string", i);
	}
	return true;
}

static bool check_message(cJSON *m, size_t i, struct pt_req_error *e)
{
	if (!cJSON_IsObject(m))
		return fail(e, 400, "messages", "invalid_type", "messages[%zu] must be an object", i);
	cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
	if (!cJSON_IsString(role))
		return fail(e, 400, "messages", "invalid_type", "messages[%zu].role must be a string", i);
	if (!valid_role(role->valuestring))
		return fail(e, 400, "messages", "invalid_value", "messages[%zu]: unknown role '%.40s'",
			    i, role->valuestring);
	if (strcmp(role->valuestring, "developer") == 0 && !cJSON_SetValuestring(role, "system"))
		return fail(e, 503, NULL, NULL, "out of memory");
	bool assistant = strcmp(role->valuestring, "assistant") == 0;
	cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
	bool has_tc = tc && !cJSON_IsNull(tc);
	if (has_tc && !check_tool_calls(tc, i, e))
		return false;
	if (has_tc && !assistant)
		return fail(e, 400, "messages", "invalid_value",
			    "messages[%zu]: only assistant messages carry tool_calls", i);
	if (!content || cJSON_IsNull(content)) {
		if (!assistant)
			return fail(e, 400, "messages", "missing_field",
				    "messages[%zu]: 'content' is required for role '%s'", i,
				    role->valuestring);
	} else if (cJSON_IsArray(content)) {
		if (!flatten_parts(m, content, i, e))
			return false;
	} else if (!cJSON_IsString(content)) {
		return fail(e, 400, "messages", "invalid_type",
			    "messages[%zu].content must be a string, null or an array of parts", i);
	}
	static const char *const strs[] = { "name", "tool_call_id", "reasoning_content" };
	for (size_t k = 0; k < 3; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, strs[k]);
		if (v && !cJSON_IsString(v) && !cJSON_IsNull(v))
			return fail(e, 400, "messages", "invalid_type",
				    "messages[%zu].%s must be a string", i, strs[k]);
	}
	return true;
}

static bool get_messages(cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
	if (!msgs || cJSON_IsNull(msgs))
		return fail(e, 400, "messages", "missing_field", "'messages' is required");
	if (!cJSON_IsArray(msgs))
		return fail(e, 400, "messages", "invalid_type", "'messages' must be an array");
	size_t i = 0;
	for (cJSON *m = msgs->child; m; m = m->next, i++) {
		if (i == PT_REQ_MAX_MESSAGES)
			return fail(e, 400, "messages", "too_many", "more than %d messages",
				    PT_REQ_MAX_MESSAGES);
		if (!check_message(m, i, e))
			return false;
	}
	if (i == 0)
		return fail(e, 400, "messages", "invalid_value", "'messages' is empty");
	r->messages = msgs;
	return true;
}

static bool get_tools(const cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *tools = field(root, "tools");
	size_t n = 0;
	if (tools && !cJSON_IsArray(tools))
		return fail(e, 400, "tools", "invalid_type", "'tools' must be an array");
	for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next, n++) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		if (n == PT_REQ_MAX_TOOLS)
			return fail(e, 400, "tools", "too_many", "more than %d tools", PT_REQ_MAX_TOOLS);
		if (!cJSON_IsObject(t) || !cJSON_IsString(type) ||
		    strcmp(type->valuestring, "function") != 0)
			return fail(e, 400, "tools", "invalid_value",
				    "tools[%zu]: only {\"type\": \"function\", ...} tools are supported", n);
		if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !name->valuestring[0] ||
		    strlen(name->valuestring) > 128)
			return fail(e, 400, "tools", "invalid_value",
				    "tools[%zu].function.name must be a non-empty string (at most 128 "
				    "bytes)", n);
		if (params && !cJSON_IsObject(params) && !cJSON_IsNull(params))
			return fail(e, 400, "tools", "invalid_type",
				    "tools[%zu].function.parameters must be an object", n);
	}
	r->tools = n ? tools : NULL;
	const cJSON *tc = field(root, "tool_choice");
	if (!tc)
		return get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e);
	if (cJSON_IsString(tc)) {
		const char *s = tc->valuestring;
		r->tool_choice = strcmp(s, "auto") == 0 ? PT_TOOLS_AUTO : strcmp(s, "none") == 0
				 ? PT_TOOLS_NONE : strcmp(s, "required") == 0 ? PT_TOOLS_REQUIRED : -1;
		if ((int)r->tool_choice < 0)
			return fail(e, 400, "tool_choice", "invalid_value",
				    "'tool_choice' must be auto, none, required or a named function");
	} else {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (!cJSON_IsObject(tc) || !cJSON_IsString(name))
			return fail(e, 400, "tool_choice", "invalid_type",
				    "'tool_choice' must be a string or {\"type\": \"function\", "
				    "\"function\": {\"name\": ...}}");
		r->tool_choice = PT_TOOLS_NAMED;
		r->tool_name = name->valuestring;
	}
	if (r->tool_choice == PT_TOOLS_REQUIRED && !r->tools)
		return fail(e, 400, "tool_choice", "invalid_value",
			    "'tool_choice' is 'required' but no tools were given");
	if (r->tool_choice == PT_TOOLS_NAMED) {
		bool found = false;
		for (const cJSON *t = r->tools ? r->tools->child : NULL; t; t = t->next) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
			found |= strcmp(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring,
					r->tool_name) == 0;
		}
		if (!found)
			return fail(e, 400, "tool_choice", "invalid_value",
				    "'tool_choice' names '%.100s', which is not among the tools",
				    r->tool_name);
	}
	return get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e);
}

static bool get_format(const cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *rf = field(root, "response_format");
	if (!rf)
		return true;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
	if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
		return fail(e, 400, "response_format", "invalid_type",
			    "'response_format' must be an object with a string \"type\"");
	const char *t = type->valuestring;
	if (strcmp(t, "text") == 0)
		return true;
	if (strcmp(t, "json_object") == 0) {
		const cJSON *s = field(rf, "schema");
		if (s && !cJSON_IsObject(s) && !cJSON_IsBool(s))
			return fail(e, 400, "response_format", "invalid_type",
				    "response_format.schema must be an object");
		r->format = s ? PT_FORMAT_JSON_SCHEMA : PT_FORMAT_JSON_OBJECT;
		r->schema = s;
		return true;
	}
	if (strcmp(t, "json_schema") != 0)
		return fail(e, 400, "response_format", "invalid_value",
			    "response_format.type must be text, json_object or json_schema");
	const cJSON *js = field(rf, "json_schema");
	const cJSON *s = js ? field(js, "schema") : NULL;
	if (!cJSON_IsObject(js) || (s && !cJSON_IsObject(s) && !cJSON_IsBool(s)))
		return fail(e, 400, "response_format", "invalid_type",
			    "response_format.json_schema must be an object with an object \"schema\"");
	r->format = s ? PT_FORMAT_JSON_SCHEMA : PT_FORMAT_JSON_OBJECT;
	r->schema = s;
	return true;
}

static bool get_template_opts(const cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *kw = field(root, "chat_template_kwargs");
	const char *rf = NULL;
	if (kw) {
		size_t n = 0;
		if (!cJSON_IsObject(kw))
			return fail(e, 400, "chat_template_kwargs", "invalid_type",
				    "'chat_template_kwargs' must be an object");
		for (const cJSON *k = kw->child; k; k = k->next)
			if (++n > PT_REQ_MAX_KWARGS)
				return fail(e, 400, "chat_template_kwargs", "too_many",
					    "more than %d chat_template_kwargs", PT_REQ_MAX_KWARGS);
		const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
		if (et && !cJSON_IsBool(et))
			return fail(e, 400, "chat_template_kwargs", "invalid_type",
				    "chat_template_kwargs.enable_thinking must be a boolean");
		r->template_kwargs = kw;
	}
	if (!get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) ||
	    !get_str(root, "reasoning_format", &rf, e))
		return false;
	if (rf) {
		if (strcmp(rf, "none") == 0)
			r->reasoning_format = 0;
		else if (strcmp(rf, "deepseek") == 0 || strcmp(rf, "auto") == 0)
			r->reasoning_format = 1;
		else
			return fail(e, 400, "reasoning_format", "invalid_value",
				    "'reasoning_format' must be none, auto or deepseek");
	}
	return true;
}

/* ---- prompts and token lists ------------------------------------------------------------ */

static bool get_ids(const cJSON *a, const char *name, struct pt_req *r, struct pt_req_error *e)
{
	size_t n = 0;
	for (const cJSON *t = a->child; t; t = t->next)
		n++;
	if (n > PT_REQ_MAX_PROMPT_IDS)
		return fail(e, 400, name, "too_many", "more than %u token ids", PT_REQ_MAX_PROMPT_IDS);
	r->ids = pt_mallocn(n ? n : 1, sizeof *r->ids);
	if (!r->ids)
		return fail(e, 503, NULL, NULL, "out of memory");
	for (const cJSON *t = a->child; t; t = t->next) {
		double d = t->valuedouble;
		if (!cJSON_IsNumber(t) || !isfinite(d) || d != floor(d) || d < 0 || d > 2147483647.0)
			return fail(e, 400, name, "invalid_value",
				    "'%s' must hold token ids (integers >= 0)", name);
		r->ids[r->n_ids++] = (int32_t)d;
	}
	return true;
}

static bool get_prompt(const cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	const cJSON *p = field(root, "prompt");
	const cJSON *echo = field(root, "echo"), *suffix = field(root, "suffix");
	if ((echo && !cJSON_IsFalse(echo)) ||
	    (suffix && !(cJSON_IsString(suffix) && !suffix->valuestring[0])))
		return fail(e, 400, echo ? "echo" : "suffix", "unsupported",
			    "'echo' and 'suffix' are not supported");
	if (!p)
		return fail(e, 400, "prompt", "missing_field", "'prompt' is required");
	if (cJSON_IsArray(p) && p->child && cJSON_IsString(p->child)) {
		if (p->child->next)
			return fail(e, 400, "prompt", "invalid_value",
				    "several prompts in one request are not supported (n=1 only)");
		p = p->child;
	}
	if (cJSON_IsString(p)) {
		r->prompt = p->valuestring;
		r->prompt_len = strlen(p->valuestring);
		if (!r->prompt_len)
			return fail(e, 400, "prompt", "invalid_value", "'prompt' is empty");
		return true;
	}
	if (!cJSON_IsArray(p))
		return fail(e, 400, "prompt", "invalid_type",
			    "'prompt' must be a string or an array of token ids");
	if (!get_ids(p, "prompt", r, e))
		return false;
	if (!r->n_ids)
		return fail(e, 400, "prompt", "invalid_value", "'prompt' is empty");
	return true;
}

static bool decode_kind(cJSON *root, struct pt_req *r, struct pt_req_error *e)
{
	switch (r->kind) {
	case PT_REQ_CHAT:
		return get_messages(root, r, e) && get_tools(root, r, e) && get_format(root, r, e) &&
		       get_template_opts(root, r, e) && get_sampling(root, r, e) &&
		       get_stream(root, r, e) && get_logprobs(root, r, e);
	case PT_REQ_COMPLETION:
		return get_prompt(root, r, e) && get_sampling(root, r, e) &&
		       get_stream(root, r, e) && get_logprobs(root, r, e);
	case PT_REQ_APPLY_TEMPLATE:
		return get_messages(root, r, e) && get_tools(root, r, e) &&
		       get_template_opts(root, r, e);
	case PT_REQ_TOKENIZE: {
		const cJSON *c = field(root, "content");
		r->parse_special = true;
		if (!cJSON_IsString(c))
			return fail(e, 400, "content", c ? "invalid_type" : "missing_field",
				    "'content' must be a string");
		r->prompt = c->valuestring;
		r->prompt_len = strlen(c->valuestring);
		return get_bool(root, "add_special", &r->add_special, e) &&
		       get_bool(root, "parse_special", &r->parse_special, e) &&
		       get_bool(root, "with_pieces", &r->with_pieces, e);
	}
	case PT_REQ_DETOKENIZE: {
		const cJSON *t = field(root, "tokens");
		if (!cJSON_IsArray(t))
			return fail(e, 400, "tokens", t ? "invalid_type" : "missing_field",
				    "'tokens' must be an array of token ids");
		return get_ids(t, "tokens", r, e);
	}
	}
	return fail(e, 400, NULL, NULL, "unknown request kind");
}

bool pt_req_decode(enum pt_req_kind kind, const char *body, size_t len,
		   const struct pt_req_defaults *d, struct pt_req *out, struct pt_req_error *e)
{
	memset(out, 0, sizeof *out);
	memset(e, 0, sizeof *e);
	out->kind = kind;
	out->sampler = d->sampler;
	out->max_tokens = d->max_tokens;
	out->add_generation_prompt = true;
	out->reasoning_format = -1;
	out->parallel_tool_calls = true;
	out->cache_prompt = true;
	if (!d->seed_given)
		out->sampler.seed = UINT64_MAX; /* the server draws one */
	if (len > d->max_body)
		return fail(e, 413, NULL, "too_large", "request body larger than %zu bytes", d->max_body);
	if (len == 0)
		return fail(e, 400, NULL, "invalid_json", "the request body is empty (JSON expected)");
	if (!check_bytes(body, len, e))
		return false;
	/* cJSON wants the text NUL-terminated to reject trailing garbage. */
	char *copy = pt_malloc(len + 1);
	if (!copy)
		return fail(e, 503, NULL, NULL, "out of memory");
	memcpy(copy, body, len);
	copy[len] = 0;
	const char *end = NULL;
	out->root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, true);
	size_t off = end && end >= copy ? (size_t)(end - copy) : 0;
	pt_free(copy);
	if (!out->root)
		return fail(e, 400, NULL, "invalid_json", "malformed JSON at byte %zu", off);
	if (!cJSON_IsObject(out->root)) {
		pt_req_free(out);
		return fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
	}
	const char *model = NULL;
	bool ok = get_str(out->root, "model", &model, e) && decode_kind(out->root, out, e);
	out->model = model;
	if (!ok) {
		pt_req_free(out);
		out->kind = kind;
	}
	return ok;
}

void pt_req_free(struct pt_req *r)
{
	if (!r)
		return;
	cJSON_Delete(r->root);
	for (size_t i = 0; i < r->n_stops; i++)
		pt_free(r->stops[i]);
	pt_free(r->ids);
	memset(r, 0, sizeof *r);
}
