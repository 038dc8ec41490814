/* test_chatparse.c - the reply parser (src/server/chatparse.h).
 *
 * The tool-call replies under tests/fixtures/chatparse/ are what each real chat template
 * renders for an assistant message with tool_calls (gen.py cuts them out of
 * `particle template` output), so parsing them back must give the calls of CASE.json.  Every
 * reply is also fed in every 2-way split, byte by byte and in random chunks: the result must
 * not change and must equal the concatenation of the streamed events. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/grammar.h"
#include "server/chatparse.h"
#include "test.h"
#include "util/alloc.h"

#define FX "tests/fixtures/chatparse/"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	fclose(f);
	if (s) {
		s[n] = 0;
		if (len)
			*len = (size_t)n;
	}
	return s;
}

/* ---- event collector ----------------------------------------------------------------------- */

struct call_acc {
	char id[80], name[300];
	char *args;
	size_t args_len;
};
struct collect {
	char *content, *reasoning;
	size_t content_len, reasoning_len;
	struct call_acc calls[16];
	size_t n_calls;
	bool bad; /* an event out of order */
};

static size_t pow2_cap(size_t x)
{
	size_t c = 64;
	while (c < x)
		c *= 2;
	return c;
}

/* The buffer always holds pow2_cap(n + 1) bytes: events come a byte at a time, and a
 * realloc per byte is quadratic under ASan. */
static void append(char **s, size_t *n, const char *t, size_t len)
{
	size_t need = pow2_cap(*n + len + 1);
	if (!*s || need > pow2_cap(*n + 1))
		*s = realloc(*s, need);
	memcpy(*s + *n, t, len);
	*n += len;
	(*s)[*n] = 0;
}

static void on_event(void *ctx, const struct pt_chat_event *ev)
{
	struct collect *c = ctx;
	switch (ev->kind) {
	case PT_CHAT_CONTENT:
		if (ev->len == 0)
			c->bad = true;
		append(&c->content, &c->content_len, ev->text, ev->len);
		break;
	case PT_CHAT_REASONING:
		if (ev->len == 0)
			c->bad = true;
		append(&c->reasoning, &c->reasoning_len, ev->text, ev->len);
		break;
	case PT_CHAT_TOOL_START:
		if (ev->index != c->n_calls || c->n_calls >= 16 || !ev->id || !ev->name) {
			c->bad = true;
			return;
		}
		snprintf(c->calls[c->n_calls].id, sizeof(c->calls[0].id), "%s", ev->id);
		snprintf(c->calls[c->n_calls].name, sizeof(c->calls[0].name), "%s", ev->name);
		c->n_calls++;
		break;
	case PT_CHAT_TOOL_ARGS:
		if (ev->index + 1 != c->n_calls) {
			c->bad = true;
			return;
		}
		append(&c->calls[ev->index].args, &c->calls[ev->index].args_len, ev->text, ev->len);
		break;
	}
}

static void collect_free(struct collect *c)
{
	free(c->content);
	free(c->reasoning);
	for (size_t i = 0; i < c->n_calls; i++)
		free(c->calls[i].args);
	memset(c, 0, sizeof(*c));
}

/* Parses text fed in chunks whose sizes come from next_chunk (0 = all the rest); checks that
 * the events add up to the result.  Returns false (after recording a failure) if not. */
typedef size_t (*chunker)(void *st, size_t left);

static bool parse_chunks(const struct pt_chat_parser_opts *o, const char *text, size_t len,
			 chunker next, void *st, struct pt_chat_result *r)
{
	pt_chat_parser *p = NULL;
	struct pt_error err = { 0 };
	if (pt_chat_parser_new(o, &p, &err) != PT_OK) {
		pt_test_fail(__FILE__, __LINE__, "parser_new: %s", err.msg);
		return false;
	}
	struct collect c = { 0 };
	size_t at = 0;
	while (at < len) {
		size_t k = next ? next(st, len - at) : len - at;
		if (k == 0 || k > len - at)
			k = len - at;
		pt_chat_parser_feed(p, text + at, k, on_event, &c);
		at += k;
	}
	enum pt_status s = pt_chat_parser_finish(p, on_event, &c, r, &err);
	pt_chat_parser_free(p);
	bool ok = s == PT_OK;
	if (!ok)
		pt_test_fail(__FILE__, __LINE__, "finish: %s", err.msg);
	if (ok && (c.bad || c.content_len != r->content_len ||
		   c.reasoning_len != r->reasoning_len ||
		   (c.content_len && memcmp(c.content, r->content, c.content_len)) ||
		   (c.reasoning_len && memcmp(c.reasoning, r->reasoning, c.reasoning_len)) ||
		   c.n_calls != r->n_calls)) {
		pt_test_fail(__FILE__, __LINE__, "events != result (content \"%s\" vs \"%s\")",
			     c.content ? c.content : "", r->content);
		ok = false;
	}
	for (size_t i = 0; ok && i < r->n_calls; i++) {
		if (strcmp(c.calls[i].id, r->calls[i].id) || strcmp(c.calls[i].name, r->calls[i].name) ||
		    strcmp(c.calls[i].args ? c.calls[i].args : "", r->calls[i].arguments)) {
			pt_test_fail(__FILE__, __LINE__, "call %zu events != result", i);
			ok = false;
		}
	}
	collect_free(&c);
	if (!ok)
		pt_chat_result_free(r);
	return ok;
}

/* Same result, ids aside (generated ids differ between runs). */
static bool same_result(const struct pt_chat_result *a, const struct pt_chat_result *b)
{
	if (a->content_len != b->content_len || a->reasoning_len != b->reasoning_len ||
	    memcmp(a->content, b->content, a->content_len) ||
	    memcmp(a->reasoning, b->reasoning, a->reasoning_len) || a->n_calls != b->n_calls)
		return false;
	for (size_t i = 0; i < a->n_calls; i++)
		if (strcmp(a->calls[i].name, b->calls[i].name) ||
		    strcmp(a->calls[i].arguments, b->calls[i].arguments))
			return false;
	return true;
}

static size_t chunk_one(void *st, size_t left)
{
	(void)st;
	(void)left;
	return 1;
}
static size_t chunk_split(void *st, size_t left)
{
	size_t *at = st; /* first chunk *at bytes, then the rest */
	size_t k = *at ? *at : left;
	*at = 0;
	return k;
}
static size_t chunk_random(void *st, size_t left)
{
	unsigned *seed = st;
	*seed = *seed * 1103515245u + 12345u;
	size_t k = 1 + (*seed >> 16) % 7;
	return k < left ? k : left;
}

/* Every split gives the reference result (one feed). */
static void check_splits(const struct pt_chat_parser_opts *o, const char *text, size_t len,
			 const struct pt_chat_result *ref, const char *what)
{
	struct pt_chat_result r;
	if (parse_chunks(o, text, len, chunk_one, NULL, &r)) {
		if (!same_result(ref, &r))
			pt_test_fail(__FILE__, __LINE__, "%s: byte-by-byte differs", what);
		pt_chat_result_free(&r);
	}
	for (size_t at = 1; at < len; at++) {
		size_t st = at;
		if (!parse_chunks(o, text, len, chunk_split, &st, &r))
			return;
		bool same = same_result(ref, &r);
		pt_chat_result_free(&r);
		if (!same) {
			pt_test_fail(__FILE__, __LINE__, "%s: split at %zu differs", what, at);
			return;
		}
	}
	for (unsigned seed = 1; seed <= 8; seed++) {
		unsigned st = seed;
		if (!parse_chunks(o, text, len, chunk_random, &st, &r))
			return;
		bool same = same_result(ref, &r);
		pt_chat_result_free(&r);
		if (!same) {
			pt_test_fail(__FILE__, __LINE__, "%s: random chunks (seed %u) differ", what, seed);
			return;
		}
	}
}

static bool good_generated_id(const char *id, bool short_id)
{
	size_t n = strlen(id), skip = short_id ? 0 : 5;
	if (n != (short_id ? 9u : 29u) || (!short_id && strncmp(id, "call_", 5) != 0))
		return false;
	for (size_t i = skip; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
		      (id[i] >= 'A' && id[i] <= 'Z')))
			return false;
	return true;
}

/* ---- the template fixtures ------------------------------------------------------------------ */

struct fixture {
	const char *tmpl, *kase;
	enum pt_chat_format fmt;
	const char *content, *reasoning;
	bool model_ids; /* the reply carries the tool_call ids (Mistral) */
};

static const struct fixture FIXTURES[] = {
	{ "qwen3", "one", PT_CHAT_HERMES, "", "", false },
	{ "qwen3", "content", PT_CHAT_HERMES, "Let me check.", "", false },
	{ "qwen3", "two", PT_CHAT_HERMES, "", "", false },
	{ "qwen3", "nested", PT_CHAT_HERMES, "", "", false },
	{ "qwen3", "reasoning", PT_CHAT_HERMES, "",
	  "The user wants the weather.\nI should call get_weather.", false },
	{ "llama-3.1", "one", PT_CHAT_LLAMA3, "", "", false },
	{ "llama-3.1", "nested", PT_CHAT_LLAMA3, "", "", false },
	{ "gemma4", "one", PT_CHAT_GEMMA4, "", "", false },
	{ "gemma4", "content", PT_CHAT_GEMMA4, "Let me check.", "", false },
	{ "gemma4", "two", PT_CHAT_GEMMA4, "", "", false },
	{ "gemma4", "nested", PT_CHAT_GEMMA4, "", "", false },
	{ "gemma-4-31B-it-interleaved", "one", PT_CHAT_GEMMA4, "", "", false },
	{ "gemma-4-31B-it-interleaved", "two", PT_CHAT_GEMMA4, "", "", false },
	{ "gemma-4-31B-it-interleaved", "reasoning", PT_CHAT_GEMMA4, "",
	  "The user wants the weather.\nI should call get_weather.", false },
	{ "mistral-nemo", "one", PT_CHAT_MISTRAL, "", "", true },
	{ "mistral-nemo", "two", PT_CHAT_MISTRAL, "", "", true },
	{ "mistral-nemo", "nested", PT_CHAT_MISTRAL, "", "", true },
	{ "mistral-small-3.1", "one", PT_CHAT_MISTRAL, "", "", true },
	{ "mistral-small-3.1", "two", PT_CHAT_MISTRAL, "", "", true },
	{ "phi-4-mini", "one", PT_CHAT_PHI4, "", "", false },
	{ "phi-4-mini", "content", PT_CHAT_PHI4, "Let me check.", "", false },
	{ "phi-4-mini", "two", PT_CHAT_PHI4, "", "", false },
	{ "phi-4-mini", "nested", PT_CHAT_PHI4, "", "", false },
	{ "deepseek-r1-distill-qwen", "one", PT_CHAT_DEEPSEEK_R1, "", "", false },
	{ "deepseek-r1-distill-qwen", "two", PT_CHAT_DEEPSEEK_R1, "", "", false },
	{ "deepseek-r1-distill-qwen", "nested", PT_CHAT_DEEPSEEK_R1, "", "", false },
	{ "gpt-oss", "one", PT_CHAT_HARMONY, "", "", false },
	{ "gpt-oss", "content", PT_CHAT_HARMONY, "", "Let me check.", false },
	{ "gpt-oss", "nested", PT_CHAT_HARMONY, "", "", false },
	/* Qwen3.5's template (tests/fixtures/templates): XML calls typed by tools.json */
	{ "qwen3.5", "one", PT_CHAT_QWEN3_XML, "", "", false },
	{ "qwen3.5", "content", PT_CHAT_QWEN3_XML, "Let me check.", "", false },
	{ "qwen3.5", "two", PT_CHAT_QWEN3_XML, "", "", false },
	{ "qwen3.5", "nested", PT_CHAT_QWEN3_XML, "", "", false },
	{ "qwen3.5", "reasoning", PT_CHAT_QWEN3_XML, "",
	  "The user wants the weather.\nI should call get_weather.", false },
};

/* The expected calls: CASE.json's assistant tool_calls, arguments in compact form. */
static void check_calls(const struct fixture *fx, const struct pt_chat_result *r)
{
	char path[256];
	snprintf(path, sizeof(path), FX "%s.json", fx->kase);
	char *js = slurp(path, NULL);
	cJSON *msgs = js ? cJSON_Parse(js) : NULL;
	free(js);
	cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "tool_calls");
	if (!calls) {
		pt_test_fail(__FILE__, __LINE__, "%s: cannot read", path);
		cJSON_Delete(msgs);
		return;
	}
	if ((int)r->n_calls != cJSON_GetArraySize(calls))
		pt_test_fail(__FILE__, __LINE__, "%s/%s: %zu calls, want %d", fx->tmpl, fx->kase,
			     r->n_calls, cJSON_GetArraySize(calls));
	for (size_t i = 0; i < r->n_calls && (int)i < cJSON_GetArraySize(calls); i++) {
		cJSON *c = cJSON_GetArrayItem(calls, (int)i);
		cJSON *f = cJSON_GetObjectItem(c, "function");
		const char *name = cJSON_GetObjectItem(f, "name")->valuestring;
		cJSON *args = cJSON_Parse(cJSON_GetObjectItem(f, "arguments")->valuestring);
		char *want = cJSON_PrintUnformatted(args);
		cJSON *got = cJSON_Parse(r->calls[i].arguments);
		if (strcmp(name, r->calls[i].name) != 0)
			pt_test_fail(__FILE__, __LINE__, "%s/%s call %zu: name %s, want %s", fx->tmpl,
				     fx->kase, i, r->calls[i].name, name);
		/* Same value; and exactly cJSON's compact text, except where the template
		 * reorders keys (Gemma sorts them). */
		if (!got || !cJSON_Compare(got, args, true))
			pt_test_fail(__FILE__, __LINE__, "%s/%s call %zu: arguments %s, want %s",
				     fx->tmpl, fx->kase, i, r->calls[i].arguments, want);
		else if (fx->fmt != PT_CHAT_GEMMA4 && strcmp(want, r->calls[i].arguments) != 0)
			pt_test_fail(__FILE__, __LINE__, "%s/%s call %zu: not compact: %s", fx->tmpl,
				     fx->kase, i, r->calls[i].arguments);
		if (fx->model_ids) {
			const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
			if (strcmp(id, r->calls[i].id) != 0)
				pt_test_fail(__FILE__, __LINE__, "%s/%s: id %s, want %s", fx->tmpl,
					     fx->kase, r->calls[i].id, id);
		} else if (!good_generated_id(r->calls[i].id, false)) {
			pt_test_fail(__FILE__, __LINE__, "bad id %s", r->calls[i].id);
		}
		cJSON_free(want);
		cJSON_Delete(args);
		cJSON_Delete(got);
	}
	cJSON_Delete(msgs);
}

PT_TEST(test_chatparse_template_replies_parse_back)
{
	char *tj = slurp(FX "tools.json", NULL);
	cJSON *tools = tj ? cJSON_Parse(tj) : NULL;
	free(tj);
	REQUIRE(tools);
	for (size_t i = 0; i < sizeof(FIXTURES) / sizeof(FIXTURES[0]); i++) {
		const struct fixture *fx = &FIXTURES[i];
		char path[256];
		snprintf(path, sizeof(path), FX "%s__%s.txt", fx->tmpl, fx->kase);
		size_t len = 0;
		char *text = slurp(path, &len);
		if (!text) {
			pt_test_fail(__FILE__, __LINE__, "missing fixture %s", path);
			continue;
		}
		struct pt_chat_parser_opts o = { .format = fx->fmt, .tools = true, .reasoning = true,
						 .tool_defs = tools };
		struct pt_chat_result r;
		if (parse_chunks(&o, text, len, NULL, NULL, &r)) {
			if (strcmp(r.content, fx->content) != 0)
				pt_test_fail(__FILE__, __LINE__, "%s: content \"%s\", want \"%s\"", path,
					     r.content, fx->content);
			if (strcmp(r.reasoning, fx->reasoning) != 0)
				pt_test_fail(__FILE__, __LINE__, "%s: reasoning \"%s\", want \"%s\"",
					     path, r.reasoning, fx->reasoning);
			check_calls(fx, &r);
			check_splits(&o, text, len, &r, path);
			pt_chat_result_free(&r);
		}
		free(text);
	}
	cJSON_Delete(tools);
}

PT_TEST(test_chatparse_detects_fixture_templates)
{
	static const struct {
		const char *tmpl;
		enum pt_chat_format fmt;
	} T[] = {
		{ "qwen3", PT_CHAT_HERMES },
		{ "llama-3.1", PT_CHAT_LLAMA3 },
		{ "gemma4", PT_CHAT_GEMMA4 },
		{ "gemma-4-31B-it-interleaved", PT_CHAT_GEMMA4 },
		{ "gemma-3", PT_CHAT_GENERIC },
		{ "mistral-nemo", PT_CHAT_MISTRAL },
		{ "mistral-small-3.1", PT_CHAT_MISTRAL },
		{ "phi-4-mini", PT_CHAT_PHI4 },
		{ "deepseek-r1-distill-qwen", PT_CHAT_DEEPSEEK_R1 },
		{ "gpt-oss", PT_CHAT_HARMONY },
		{ "sarvam", PT_CHAT_GENERIC },
	};
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/fixtures/templates/%s.jinja", pt_test_shared_dir(),
			 T[i].tmpl);
		char *src = slurp(path, NULL);
		if (!src) {
			pt_test_fail(__FILE__, __LINE__, "missing %s", path);
			continue;
		}
		enum pt_chat_format f = pt_chat_format_detect(src, NULL);
		if (f != T[i].fmt)
			pt_test_fail(__FILE__, __LINE__, "%s: detected %s, want %s", T[i].tmpl,
				     pt_chat_format_name(f), pt_chat_format_name(T[i].fmt));
		free(src);
	}
	/* Qwen3.5's template is in the repository's fixtures */
	char *q35 = slurp("tests/fixtures/templates/qwen3.5.jinja", NULL);
	CHECK(q35 != NULL);
	if (q35)
		CHECK_EQ_STR(pt_chat_format_name(pt_chat_format_detect(q35, NULL)), "qwen3-xml");
	free(q35);
	CHECK_EQ_INT(pt_chat_format_detect(NULL, NULL), PT_CHAT_GENERIC);
	CHECK_EQ_INT(pt_chat_format_detect("{{ messages }}", "gemma4"), PT_CHAT_GEMMA4);
	CHECK_EQ_INT(pt_chat_format_detect("", "qwen3moe"), PT_CHAT_GENERIC);
	CHECK_EQ_STR(pt_chat_format_name(PT_CHAT_HERMES), "hermes");
	CHECK_EQ_STR(pt_chat_format_name((enum pt_chat_format)99), "generic");
	CHECK_EQ_STR(pt_chat_format_stops(PT_CHAT_GEMMA4)[0], "<|tool_response>");
	CHECK(pt_chat_format_stops(PT_CHAT_HERMES)[0] == NULL);
}

/* ---- hand-written cases --------------------------------------------------------------------- */

struct expect {
	enum pt_chat_format fmt;
	bool tools, reasoning, thinking_open;
	const char *text;
	const char *content, *reasoning_text;
	size_t n_calls;
	const char *name0, *args0; /* first call */
};

static void check_expect(const struct expect *e, const char *const *names, size_t n_names)
{
	struct pt_chat_parser_opts o = { .format = e->fmt, .tools = e->tools,
					 .reasoning = e->reasoning,
					 .thinking_open = e->thinking_open, .tool_names = names,
					 .n_tool_names = n_names };
	struct pt_chat_result r;
	size_t len = strlen(e->text);
	if (!parse_chunks(&o, e->text, len, NULL, NULL, &r))
		return;
	if (strcmp(r.content, e->content) != 0)
		pt_test_fail(__FILE__, __LINE__, "[%s] %s: content \"%s\", want \"%s\"",
			     pt_chat_format_name(e->fmt), e->text, r.content, e->content);
	if (strcmp(r.reasoning, e->reasoning_text) != 0)
		pt_test_fail(__FILE__, __LINE__, "[%s] %s: reasoning \"%s\", want \"%s\"",
			     pt_chat_format_name(e->fmt), e->text, r.reasoning, e->reasoning_text);
	if (r.n_calls != e->n_calls)
		pt_test_fail(__FILE__, __LINE__, "[%s] %s: %zu calls, want %zu",
			     pt_chat_format_name(e->fmt), e->text, r.n_calls, e->n_calls);
	else if (e->n_calls && (strcmp(r.calls[0].name, e->name0) ||
				strcmp(r.calls[0].arguments, e->args0)))
		pt_test_fail(__FILE__, __LINE__, "[%s] %s: call %s %s, want %s %s",
			     pt_chat_format_name(e->fmt), e->text, r.calls[0].name,
			     r.calls[0].arguments, e->name0, e->args0);
	check_splits(&o, e->text, len, &r, e->text);
	pt_chat_result_free(&r);
}

#define MAL(f, t) { f, true, true, false, t, t, "", 0, NULL, NULL }

PT_TEST(test_chatparse_malformed_calls_are_content)
{
	static const struct expect E[] = {
		MAL(PT_CHAT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}"),
		MAL(PT_CHAT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}}\n"),
		MAL(PT_CHAT_HERMES, "<tool_call>not json</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"foo\": 1}</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"name\": \"x\", \"arguments\": \"not json\"}</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"name\": \"x\", \"arguments\": {}} trailing</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>[]</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call>{\"name\": \"x\", \"name\": \"y\"}</tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call></tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call><function=f><parameter=a>1</function></tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call><function=f>junk</function></tool_call>"),
		MAL(PT_CHAT_HERMES, "<tool_call><function=>\n</function></tool_call>"),
		MAL(PT_CHAT_LLAMA3, "{\"name\": \"Bob\", \"age\": 3}"),
		MAL(PT_CHAT_LLAMA3, "{\"names\": [1, 2]} and {\"name\": \"f\"}"),
		MAL(PT_CHAT_LLAMA3, "{}"),
		MAL(PT_CHAT_GENERIC, "{\"na\\u006de\": \"f\"}"),
		MAL(PT_CHAT_LLAMA3, "{\"name\": \"x\", \"parameters\": {\"a\": 1}"),
		MAL(PT_CHAT_LLAMA3, "{\"name\": \"x\", \"parameters\": {\"a\": 1}]"),
		MAL(PT_CHAT_LLAMA3, "Here is JSON: {\"name\": \"x\", \"parameters\": {}}"),
		MAL(PT_CHAT_LLAMA3, "<|python_tag|>not_a_call"),
		MAL(PT_CHAT_LLAMA3, "<|python_tag|>brave_search.call(query=)"),
		MAL(PT_CHAT_GEMMA4, "<|tool_call>call:x{a:<|\"|>unterminated}<tool_call|>"),
		MAL(PT_CHAT_GEMMA4, "<|tool_call>get_weather{}<tool_call|>"),
		MAL(PT_CHAT_GEMMA4, "<|tool_call>call:x{a:@}<tool_call|>"),
		MAL(PT_CHAT_GEMMA4, "<|tool_call>call:x{a:1"),
		MAL(PT_CHAT_MISTRAL, "[TOOL_CALLS]garbage without args"),
		MAL(PT_CHAT_MISTRAL, "[TOOL_CALLS][{\"name\": 1}]"),
		MAL(PT_CHAT_MISTRAL, "[TOOL_CALLS]x[ARGS]nope"),
		MAL(PT_CHAT_MISTRAL, "[TOOL_CALLS][{\"name\": \"x\", \"arguments\": {}, \"id\": \"bad id!\"}]"),
		MAL(PT_CHAT_DEEPSEEK_R1, "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>x"),
		MAL(PT_CHAT_PHI4, "<|tool_call|>{\"name\": \"x\"<|/tool_call|>"),
		MAL(PT_CHAT_GENERIC, "<tool_call>{\"name\":\"x\"}"),
		MAL(PT_CHAT_GENERIC, "{\"answer\": 42}"),
		MAL(PT_CHAT_HARMONY, " to=functions.x<|channel|>commentary json<|message|>{bad json<|call|>"),
		MAL(PT_CHAT_HARMONY, "<|channel|>commentary to=functions.x<|message|>[1]"),
		MAL(PT_CHAT_HARMONY, "plain text, no header"),
	};
	for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++)
		check_expect(&E[i], NULL, 0);
}

PT_TEST(test_chatparse_cases)
{
	static const struct expect E[] = {
		/* content around calls; layout whitespace next to calls is dropped */
		{ PT_CHAT_HERMES, true, true, false,
		  "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\nDone.",
		  "Sure.Done.", "", 1, "f", "{\"a\":1}" },
		{ PT_CHAT_HERMES, true, true, false, "  Hello  world  ", "  Hello  world  ", "", 0,
		  NULL, NULL },
		{ PT_CHAT_HERMES, true, true, false, "a <b>tag</b> and <tool_ca", "a <b>tag</b> and <tool_ca",
		  "", 0, NULL, NULL },
		/* a valid call followed by a malformed one: the call stays, the rest is content */
		{ PT_CHAT_HERMES, true, true, false,
		  "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>",
		  "<tool_call>oops</tool_call>", "", 1, "f", "{}" },
		/* arguments given as a JSON string holding the object; missing arguments */
		{ PT_CHAT_HERMES, true, true, false,
		  "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2.50]}\"}</tool_call>", "", "",
		  1, "f", "{\"a\":[1,2.50]}" },
		{ PT_CHAT_HERMES, true, true, false, "<tool_call>{\"name\": \"f\"}</tool_call>", "", "", 1,
		  "f", "{}" },
		/* OpenAI's own object shape */
		{ PT_CHAT_HERMES, true, true, false,
		  "<tool_call>{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": null}}}</tool_call>",
		  "", "", 1, "f", "{\"x\":null}" },
		/* numbers are kept as written (no double round trip) */
		{ PT_CHAT_HERMES, true, true, false,
		  "<tool_call>{\"name\": \"f\", \"arguments\": {\"big\": 12345678901234567890, \"f\": 1.0e2}}</tool_call>",
		  "", "", 1, "f", "{\"big\":12345678901234567890,\"f\":1.0e2}" },
		/* tools not offered: nothing is a call */
		{ PT_CHAT_HERMES, false, true, false,
		  "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
		  "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", "", 0, NULL, NULL },
		/* Qwen3-Coder's XML form inside the Hermes tags */
		{ PT_CHAT_HERMES, true, true, false,
		  "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew \"York\"\n</parameter>\n"
		  "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"a\": [true]}\n</parameter>\n"
		  "</function>\n</tool_call>",
		  "", "", 1, "get_weather", "{\"city\":\"New \\\"York\\\"\",\"days\":3,\"opts\":{\"a\":[true]}}" },
		/* reasoning */
		{ PT_CHAT_HERMES, true, true, false, "<think>\nhmm\n</think>\n\nAnswer.", "Answer.", "hmm", 0,
		  NULL, NULL },
		{ PT_CHAT_HERMES, true, false, false, "<think>\nhmm\n</think>\n\nAnswer.",
		  "<think>\nhmm\n</think>\n\nAnswer.", "", 0, NULL, NULL },
		{ PT_CHAT_HERMES, true, true, false, "<think>unclosed  ", "", "unclosed  ", 0, NULL, NULL },
		{ PT_CHAT_HERMES, true, true, false, "\n<thinking> is not a tag", "\n<thinking> is not a tag", "",
		  0, NULL, NULL },
		{ PT_CHAT_HERMES, true, true, false, "Text <think>late</think>", "Text <think>late</think>", "",
		  0, NULL, NULL },
		{ PT_CHAT_DEEPSEEK_R1, true, true, true, "I think.\n</think>\n\nAnswer.", "Answer.", "I think.",
		  0, NULL, NULL },
		{ PT_CHAT_GENERIC, false, true, true, "deep thought</think>ok", "ok", "deep thought", 0, NULL,
		  NULL },
		{ PT_CHAT_HERMES, true, true, false,
		  "<think>\nplan: <tool_call> later\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
		  "", "plan: <tool_call> later", 1, "f", "{}" },
		{ PT_CHAT_GEMMA4, true, true, false, "<|channel>thought\nPlan.<channel|>Hi.", "Hi.", "Plan.", 0,
		  NULL, NULL },
		/* Gemma 4 values: None, booleans, nested, numbers as keys */
		{ PT_CHAT_GEMMA4, true, true, false,
		  "<|tool_call>call:f{a:None,b:True,c:{d:[1,-2.5e3]},e:<|\"|>x:y{z}<|\"|>}<tool_call|>", "", "",
		  1, "f", "{\"a\":null,\"b\":true,\"c\":{\"d\":[1,-2.5e3]},\"e\":\"x:y{z}\"}" },
		/* Llama 3: leading whitespace, the builtin python_tag form, JSON after python_tag */
		{ PT_CHAT_LLAMA3, true, true, false,
		  "\n\n{\"name\": \"f\", \"parameters\": {\"q\": \"}{\"}}", "", "", 1, "f", "{\"q\":\"}{\"}" },
		{ PT_CHAT_LLAMA3, true, true, false,
		  "<|python_tag|>brave_search.call(query=\"weather \\\"now\\\"\", n=3)", "", "", 1,
		  "brave_search", "{\"query\":\"weather \\\"now\\\"\",\"n\":3}" },
		{ PT_CHAT_LLAMA3, true, true, false,
		  "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", "", 1, "f", "{}" },
		{ PT_CHAT_LLAMA3, true, true, false, "Plain answer {not json", "Plain answer {not json", "", 0,
		  NULL, NULL },
		/* Mistral Small 3.2 / Devstral forms; ids */
		{ PT_CHAT_MISTRAL, true, true, false,
		  "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\"}", "", "", 1,
		  "get_weather", "{\"city\":\"Paris\"}" },
		{ PT_CHAT_MISTRAL, true, true, false, "[TOOL_CALLS]f[ARGS]{}[TOOL_CALLS]g[ARGS]{\"x\":[]}", "",
		  "", 2, "f", "{}" },
		{ PT_CHAT_MISTRAL, true, true, false, "[THINK]hmm[/THINK]ok", "ok", "hmm", 0, NULL, NULL },
		/* DeepSeek V3.1 form */
		{ PT_CHAT_DEEPSEEK_R1, true, true, false,
		  "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81"
		  "call\xe2\x96\x81" "begin\xef\xbd\x9c>f<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>{\"a\": 1}"
		  "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81"
		  "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
		  "", "", 1, "f", "{\"a\":1}" },
		/* generic: bare JSON shapes and the Hermes tags */
		{ PT_CHAT_GENERIC, true, true, false, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "", "", 1,
		  "f", "{\"a\":1}" },
		{ PT_CHAT_GENERIC, true, true, false, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\"}]}",
		  "", "", 2, "f", "{}" },
		{ PT_CHAT_GENERIC, true, true, false, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}}", "",
		  "", 1, "f", "{}" },
		{ PT_CHAT_GENERIC, true, true, false, "x<tool_call>{\"name\": \"f\"}</tool_call>", "x", "", 1, "f",
		  "{}" },
		/* Harmony: analysis, final, a call in the other header order, end of reply as end */
		{ PT_CHAT_HARMONY, true, true, false,
		  "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.",
		  "Answer.", "Think.", 0, NULL, NULL },
		{ PT_CHAT_HARMONY, true, true, false,
		  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
		  "", "", 1, "get_weather", "{\"city\":\"Paris\"}" },
		{ PT_CHAT_HARMONY, true, false, false,
		  "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
		  "Think.Answer.", "", 0, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++)
		check_expect(&E[i], NULL, 0);
}

PT_TEST(test_chatparse_unknown_tool_name_is_content)
{
	static const char *const names[] = { "get_weather", "search" };
	struct expect ok = { PT_CHAT_HERMES, true, true, false,
			     "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>", "", "", 1,
			     "search", "{}" };
	check_expect(&ok, names, 2);
	struct expect bad = MAL(PT_CHAT_HERMES,
				"<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>");
	check_expect(&bad, names, 2);
}

/* Text is released as soon as it cannot be a marker any more. */
static void fed_so_far(enum pt_chat_format f, const char *text, const char *want_content)
{
	struct pt_chat_parser_opts o = { .format = f, .tools = true, .reasoning = true };
	pt_chat_parser *p = NULL;
	REQUIRE(pt_chat_parser_new(&o, &p, NULL) == PT_OK);
	struct collect c = { 0 };
	pt_chat_parser_feed(p, text, strlen(text), on_event, &c);
	CHECK_EQ_STR(c.content ? c.content : "", want_content);
	struct pt_chat_result r;
	CHECK(pt_chat_parser_finish(p, on_event, &c, &r, NULL) == PT_OK);
	pt_chat_result_free(&r);
	pt_chat_parser_free(p);
	collect_free(&c);
}

PT_TEST(test_chatparse_holds_back_only_while_ambiguous)
{
	fed_so_far(PT_CHAT_HERMES, "Hello <b>x</b> there", "Hello <b>x</b> there");
	fed_so_far(PT_CHAT_HERMES, "Hello <tool", "Hello");
	fed_so_far(PT_CHAT_HERMES, "Hello <tool_call>{\"na", "Hello");
	fed_so_far(PT_CHAT_HERMES, "Hi <tool_cal!", "Hi <tool_cal!");
	fed_so_far(PT_CHAT_GEMMA4, "Hi <|tool_", "Hi");
	fed_so_far(PT_CHAT_MISTRAL, "Hi [TOOL", "Hi");
	fed_so_far(PT_CHAT_LLAMA3, "Not JSON {", "Not JSON {");
	fed_so_far(PT_CHAT_LLAMA3, "{\"answer\": 4", "{\"answer\": 4");
	fed_so_far(PT_CHAT_LLAMA3, "{ x", "{ x");
	fed_so_far(PT_CHAT_LLAMA3, "{\"nam", "");
	fed_so_far(PT_CHAT_GENERIC, "{\"name\": \"f\", \"x", "");
	fed_so_far(PT_CHAT_HERMES, "<thi", "");
	fed_so_far(PT_CHAT_HERMES, "<thx", "<thx");
}

PT_TEST(test_chatparse_prompt_thinking_open)
{
	const char *r1 = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\n";
	CHECK(pt_chat_prompt_thinking_open(PT_CHAT_DEEPSEEK_R1, r1, strlen(r1)));
	const char *r1c = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\n</think>";
	CHECK(!pt_chat_prompt_thinking_open(PT_CHAT_DEEPSEEK_R1, r1c, strlen(r1c)));
	const char *sarvam = "Think inside <think>...</think> tags.[INST]Hi[/INST]<think>\n";
	CHECK(pt_chat_prompt_thinking_open(PT_CHAT_GENERIC, sarvam, strlen(sarvam)));
	const char *q = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
	CHECK(!pt_chat_prompt_thinking_open(PT_CHAT_HERMES, q, strlen(q)));
	CHECK(!pt_chat_prompt_thinking_open(PT_CHAT_HERMES, "", 0));
	CHECK(!pt_chat_prompt_thinking_open(PT_CHAT_HARMONY, r1, strlen(r1)));
}

/* Random text built from marker fragments: no crash, and every split agrees. */
PT_TEST(test_chatparse_random_text_is_stable)
{
	static const char *const frags[] = {
		"<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", "[", "]", "\"", "\\",
		":", ",", " ", "\n", "name", "\"name\": \"f\"", "\"arguments\": ", "{}", "call:",
		"<|tool_call>", "<tool_call|>", "<|\"|>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>",
		"<|channel|>", "<|message|>", "<|end|>", " to=functions.f", "<|start|>", "<|call|>",
		"<|channel>thought", "<channel|>", "x", "\xc3\xa9", "\xff", "\0",
		"<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>",
	};
	const size_t nf = sizeof(frags) / sizeof(frags[0]);
	unsigned seed = 12345;
	char text[512];
	for (int iter = 0; iter < 300; iter++) {
		size_t len = 0;
		int parts = 1 + iter % 24;
		for (int k = 0; k < parts; k++) {
			seed = seed * 1103515245u + 12345u;
			const char *f = frags[(seed >> 16) % nf];
			size_t fl = f[0] ? strlen(f) : 1;
			if (len + fl >= sizeof(text))
				break;
			memcpy(text + len, f, fl);
			len += fl;
		}
		enum pt_chat_format fmt = (enum pt_chat_format)(iter % PT_CHAT_FORMAT_COUNT);
		struct pt_chat_parser_opts o = { .format = fmt, .tools = iter % 5 != 0,
						 .reasoning = iter % 3 != 0,
						 .thinking_open = iter % 7 == 0 };
		struct pt_chat_result ref;
		if (!parse_chunks(&o, text, len, NULL, NULL, &ref))
			return;
		struct pt_chat_result r;
		if (parse_chunks(&o, text, len, chunk_one, NULL, &r)) {
			if (!same_result(&ref, &r))
				pt_test_fail(__FILE__, __LINE__, "iter %d (%s): byte-by-byte differs",
					     iter, pt_chat_format_name(fmt));
			pt_chat_result_free(&r);
		}
		unsigned st = (unsigned)iter;
		if (parse_chunks(&o, text, len, chunk_random, &st, &r)) {
			if (!same_result(&ref, &r))
				pt_test_fail(__FILE__, __LINE__, "iter %d (%s): chunks differ", iter,
					     pt_chat_format_name(fmt));
			pt_chat_result_free(&r);
		}
		/* Nothing is lost: with no calls, content + reasoning hold at least every
		 * non-whitespace byte that is not part of a reasoning/header marker. */
		pt_chat_result_free(&ref);
	}
}

PT_TEST(test_chatparse_survives_allocation_failures)
{
	const char *text = "<think>r</think>Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
	struct pt_chat_parser_opts o = { .format = PT_CHAT_HERMES, .tools = true, .reasoning = true };
	for (uint64_t k = 1; k < 200; k++) {
		pt_alloc_fail_at(k);
		pt_chat_parser *p = NULL;
		enum pt_status s = pt_chat_parser_new(&o, &p, NULL);
		struct pt_chat_result r = { 0 };
		if (s == PT_OK) {
			for (size_t i = 0; text[i]; i += 3)
				pt_chat_parser_feed(p, text + i, strlen(text + i) < 3 ? strlen(text + i) : 3,
						    NULL, NULL);
			s = pt_chat_parser_finish(p, NULL, NULL, &r, NULL);
			pt_chat_parser_free(p);
		}
		pt_alloc_fail_at(0);
		if (s == PT_OK) {
			CHECK_EQ_STR(r.content, "Hi");
			CHECK_EQ_STR(r.reasoning, "r");
			CHECK_EQ_INT(r.n_calls, 1);
			pt_chat_result_free(&r);
		} else {
			CHECK_EQ_INT(s, PT_E_NOMEM);
		}
	}
}

/* ---- forcing alternatives ------------------------------------------------------------------- */

PT_TEST(test_chatparse_tool_alternatives_parse_back)
{
	size_t tl = 0;
	char *tj = slurp(FX "tools.json", &tl);
	cJSON *tools = tj ? cJSON_Parse(tj) : NULL;
	free(tj);
	REQUIRE(tools);
	static const enum pt_chat_format F[] = { PT_CHAT_GENERIC, PT_CHAT_HERMES, PT_CHAT_LLAMA3,
						 PT_CHAT_MISTRAL, PT_CHAT_DEEPSEEK_R1, PT_CHAT_PHI4,
						 PT_CHAT_HARMONY };
	for (size_t fi = 0; fi < sizeof(F) / sizeof(F[0]); fi++) {
		struct pt_chat_alt *alts = NULL;
		size_t n = 0;
		struct pt_error err = { 0 };
		if (pt_chat_tool_alternatives(F[fi], tools, NULL, &alts, &n, &err) != PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "%s: %s", pt_chat_format_name(F[fi]), err.msg);
			continue;
		}
		CHECK_EQ_INT(n, 2);
		for (size_t a = 0; a < n; a++) {
			/* An instance of the alternative: literals, and a value for the schema. */
			char text[1024] = "";
			bool saw_schema = false;
			for (size_t j = 0; j < alts[a].n_parts; j++) {
				if (alts[a].parts[j].literal) {
					strncat(text, alts[a].parts[j].literal, sizeof(text) - strlen(text) - 1);
				} else {
					saw_schema = true;
					CHECK(cJSON_IsObject(alts[a].parts[j].schema));
					strncat(text, "{\"q\": 1}", sizeof(text) - strlen(text) - 1);
				}
			}
			CHECK(saw_schema);
			struct pt_chat_parser_opts o = { .format = F[fi], .tools = true, .reasoning = true };
			struct pt_chat_result r;
			if (!parse_chunks(&o, text, strlen(text), NULL, NULL, &r))
				continue;
			const char *want = a == 0 ? "get_weather" : "search";
			if (r.n_calls != 1 || strcmp(r.calls[0].name, want) ||
			    strcmp(r.calls[0].arguments, "{\"q\":1}") || r.content[0])
				pt_test_fail(__FILE__, __LINE__, "%s alt %zu: \"%s\" did not parse back",
					     pt_chat_format_name(F[fi]), a, text);
			pt_chat_result_free(&r);
		}
		pt_chat_alternatives_free(alts, n);
	}
	struct pt_chat_alt *alts = NULL;
	size_t n = 0;
	CHECK(pt_chat_tool_alternatives(PT_CHAT_HERMES, tools, "search", &alts, &n, NULL) == PT_OK);
	CHECK_EQ_INT(n, 1);
	pt_chat_alternatives_free(alts, n);
	CHECK(pt_chat_tool_alternatives(PT_CHAT_HERMES, tools, "nope", &alts, &n, NULL) ==
	      PT_E_INVALID);
	CHECK(pt_chat_tool_alternatives(PT_CHAT_GEMMA4, tools, NULL, &alts, &n, NULL) ==
	      PT_E_UNSUPPORTED);
	cJSON *bad = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": 3}}]");
	CHECK(pt_chat_tool_alternatives(PT_CHAT_HERMES, bad, NULL, &alts, &n, NULL) == PT_E_INVALID);
	cJSON_Delete(bad);
	cJSON_Delete(tools);
}

/* Long runs fed one byte at a time stay linear: blanks before a reasoning marker, a huge
 * call block, a huge Harmony tool body. */
PT_TEST(test_chatparse_long_inputs_fed_bytewise)
{
	enum { N = 200000 };
	static char text[N + 256];
	static const struct {
		enum pt_chat_format fmt;
		const char *pre, *fill, *post;
		size_t n_calls;
	} T[] = {
		{ PT_CHAT_HERMES, "", " ", "<think>x</think>y", 0 },
		{ PT_CHAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"", "z",
		  "\"}}</tool_call>", 1 },
		{ PT_CHAT_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"a\": [", "1,", "1]}}", 1 },
		{ PT_CHAT_HARMONY, " to=functions.f<|channel|>commentary json<|message|>{\"a\": \"", "q",
		  "\"}<|call|>", 1 },
		{ PT_CHAT_MISTRAL, "[TOOL_CALLS]", "x", "", 0 },
	};
	for (size_t t = 0; t < sizeof(T) / sizeof(T[0]); t++) {
		size_t len = 0, fl = strlen(T[t].fill);
		memcpy(text, T[t].pre, strlen(T[t].pre));
		len = strlen(T[t].pre);
		while (len + fl < N) {
			memcpy(text + len, T[t].fill, fl);
			len += fl;
		}
		memcpy(text + len, T[t].post, strlen(T[t].post));
		len += strlen(T[t].post);
		struct pt_chat_parser_opts o = { .format = T[t].fmt, .tools = true, .reasoning = true };
		struct pt_chat_result r;
		if (!parse_chunks(&o, text, len, chunk_one, NULL, &r))
			continue;
		CHECK_EQ_INT(r.n_calls, T[t].n_calls);
		if (T[t].n_calls == 0)
			CHECK_EQ_INT(r.content_len, len);
		pt_chat_result_free(&r);
	}
}

PT_TEST(test_chatparse_ids)
{
	static const struct {
		enum pt_chat_format fmt;
		const char *text, *id; /* NULL id: generated */
		bool short_id;
	} T[] = {
		{ PT_CHAT_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", NULL, true },
		{ PT_CHAT_MISTRAL, "[TOOL_CALLS]f[CALL_ID]Zz9Zz9Zz9[ARGS]{}", "Zz9Zz9Zz9", false },
		{ PT_CHAT_HERMES, "<tool_call>{\"name\": \"f\", \"id\": \"call_1\"}</tool_call>", "call_1",
		  false },
		{ PT_CHAT_GEMMA4, "<|tool_call>call:f{}<tool_call|>", NULL, false },
	};
	char seen[4][32] = { "" };
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++) {
		struct pt_chat_parser_opts o = { .format = T[i].fmt, .tools = true };
		struct pt_chat_result r;
		if (!parse_chunks(&o, T[i].text, strlen(T[i].text), NULL, NULL, &r))
			continue;
		CHECK_EQ_INT(r.n_calls, 1);
		if (r.n_calls == 1) {
			if (T[i].id)
				CHECK_EQ_STR(r.calls[0].id, T[i].id);
			else
				CHECK(good_generated_id(r.calls[0].id, T[i].short_id));
		}
		pt_chat_result_free(&r);
	}
	/* generated ids differ */
	for (int k = 0; k < 4; k++) {
		struct pt_chat_parser_opts o = { .format = PT_CHAT_HERMES, .tools = true };
		struct pt_chat_result r;
		const char *t = "<tool_call>{\"name\": \"f\"}</tool_call>";
		if (!parse_chunks(&o, t, strlen(t), NULL, NULL, &r))
			continue;
		snprintf(seen[k], sizeof(seen[k]), "%s", r.calls[0].id);
		for (int j = 0; j < k; j++)
			CHECK(strcmp(seen[j], seen[k]) != 0);
		pt_chat_result_free(&r);
	}
}

/* The compiled forcing grammar accepts exactly the family's call text for the offered tools,
 * and what it accepts parses back into that call. */
PT_TEST(test_chatparse_tool_grammar_forces_parsable_calls)
{
	char *tj = slurp(FX "tools.json", NULL);
	cJSON *tools = tj ? cJSON_Parse(tj) : NULL;
	free(tj);
	REQUIRE(tools);
	static const enum pt_chat_format F[] = { PT_CHAT_GENERIC, PT_CHAT_HERMES, PT_CHAT_LLAMA3,
						 PT_CHAT_MISTRAL, PT_CHAT_DEEPSEEK_R1, PT_CHAT_PHI4,
						 PT_CHAT_HARMONY };
	for (size_t fi = 0; fi < sizeof(F) / sizeof(F[0]); fi++) {
		for (int named = 0; named < 2; named++) {
			struct pt_grammar *g = NULL;
			struct pt_error err = { 0 };
			if (pt_chat_tool_grammar(F[fi], tools, named ? "search" : NULL, &g, &err) !=
			    PT_OK) {
				pt_test_fail(__FILE__, __LINE__, "%s: %s", pt_chat_format_name(F[fi]),
					     err.msg);
				continue;
			}
			struct pt_chat_alt *alts = NULL;
			size_t n = 0;
			REQUIRE(pt_chat_tool_alternatives(F[fi], tools, NULL, &alts, &n, NULL) == PT_OK);
			static const char *const args[2][2] = {
				{ "{\"city\": \"Paris\", \"days\": 3}", "{\"days\": 3}" }, /* get_weather */
				{ "{\"query\": \"x\"}", "{\"query\": 1}" },                 /* search */
			};
			for (size_t a = 0; a < n && a < 2; a++) {
				for (int wrong = 0; wrong < 2; wrong++) {
					char text[1024] = "";
					for (size_t j = 0; j < alts[a].n_parts; j++)
						strncat(text, alts[a].parts[j].literal ? alts[a].parts[j].literal
										      : args[a][wrong],
							sizeof(text) - strlen(text) - 1);
					bool complete = false;
					bool ok = pt_grammar_match_bytes((const pt_grammar *)g, text,
									 strlen(text), &complete) &&
						  complete;
					bool want = !wrong && (!named || a == 1);
					if (ok != want)
						pt_test_fail(__FILE__, __LINE__, "%s named=%d: \"%s\" %s",
							     pt_chat_format_name(F[fi]), named, text,
							     ok ? "accepted" : "rejected");
					if (!ok || wrong)
						continue;
					struct pt_chat_parser_opts o = { .format = F[fi], .tools = true };
					struct pt_chat_result r;
					if (!parse_chunks(&o, text, strlen(text), NULL, NULL, &r))
						continue;
					if (r.n_calls != 1 || r.content[0])
						pt_test_fail(__FILE__, __LINE__, "%s: \"%s\" did not parse back",
							     pt_chat_format_name(F[fi]), text);
					pt_chat_result_free(&r);
				}
			}
			pt_chat_alternatives_free(alts, n);
			pt_grammar_free((pt_grammar *)g);
		}
	}
	struct pt_grammar *g = NULL;
	CHECK(pt_chat_tool_grammar(PT_CHAT_GEMMA4, tools, NULL, &g, NULL) == PT_E_UNSUPPORTED);
	CHECK(pt_chat_tool_grammar(PT_CHAT_HERMES, tools, "nope", &g, NULL) == PT_E_INVALID);
	CHECK(g == NULL);
	cJSON_Delete(tools);
}

/* ---- Qwen3-Coder / Qwen3.5 XML calls ------------------------------------------------------- */

static const char XML_TOOLS[] =
	"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
	"\"object\", \"properties\": {\"s\": {\"type\": \"string\"}, \"i\": {\"type\": \"integer\"}, "
	"\"n\": {\"type\": \"number\"}, \"b\": {\"type\": \"boolean\"}, \"o\": {\"type\": "
	"\"object\"}, \"a\": {\"type\": \"array\"}, \"ns\": {\"type\": [\"string\", \"null\"]}, "
	"\"u\": {\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"null\"}]}}, \"required\": "
	"[\"s\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"g\", \"parameters\": "
	"{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, \"s\": {\"type\": "
	"\"string\"}, \"opt\": {\"type\": \"string\"}}, \"required\": [\"n\", \"s\"]}}}]";

#define XCALL(fn, params) "<tool_call>\n<function=" fn ">\n" params "</function>\n</tool_call>"
#define XP(k, v) "<parameter=" k ">\n" v "\n</parameter>\n"

/* Values typed by the schema, as the template renders them (Python str() for scalars). */
PT_TEST(test_chatparse_qwen3_xml_typed_values)
{
	cJSON *tools = cJSON_Parse(XML_TOOLS);
	REQUIRE(tools);
	static const struct {
		const char *text, *content, *reasoning, *args;
		size_t n_calls;
	} T[] = {
		{ XCALL("f", XP("s", "123")), "", "", "{\"s\":\"123\"}", 1 },
		{ XCALL("f", XP("s", "true") XP("i", "42") XP("n", "1.50")), "", "",
		  "{\"s\":\"true\",\"i\":42,\"n\":1.50}", 1 },
		{ XCALL("f", XP("b", "True") XP("o", "{\"k\": [1, \"x\"]}") XP("a", "[1, \"y\"]")), "", "",
		  "{\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":[1,\"y\"]}", 1 },
		{ XCALL("f", XP("b", "false") XP("ns", "None") XP("u", "None")), "", "",
		  "{\"b\":false,\"ns\":null,\"u\":null}", 1 },
		{ XCALL("f", XP("ns", "hello") XP("u", "7")), "", "", "{\"ns\":\"hello\",\"u\":7}", 1 },
		/* a value that does not fit its type stays text; unknown parameters are guessed */
		{ XCALL("f", XP("i", "abc") XP("z", "3") XP("y", "hi")), "", "",
		  "{\"i\":\"abc\",\"z\":3,\"y\":\"hi\"}", 1 },
		/* multi-line text with quotes, backslashes and a '<' */
		{ XCALL("f", XP("s", "line 1\n\"q\" \\ a < b\n")), "", "",
		  "{\"s\":\"line 1\\n\\\"q\\\" \\\\ a < b\\n\"}", 1 },
		/* an empty value; no newline around a value */
		{ "<tool_call>\n<function=f>\n<parameter=s>\n</parameter>\n<parameter=i>5</parameter>\n"
		  "</function>\n</tool_call>", "", "", "{\"s\":\"\",\"i\":5}", 1 },
		/* no parameters */
		{ XCALL("f", ""), "", "", "{}", 1 },
		/* reasoning, content before the call, two calls */
		{ "<think>\nplan: <tool_call>\n</think>\n\nLet me check.\n\n" XCALL("f", XP("s", "x"))
		  "\n" XCALL("g", XP("n", "1") XP("s", "y")), "Let me check.", "plan: <tool_call>",
		  "{\"s\":\"x\"}", 2 },
		/* JSON inside the tags is still a call */
		{ "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"j\"}}\n</tool_call>", "", "",
		  "{\"s\":\"j\"}", 1 },
	};
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++) {
		struct pt_chat_parser_opts o = { .format = PT_CHAT_QWEN3_XML, .tools = true,
						 .reasoning = true, .tool_defs = tools };
		struct pt_chat_result r;
		size_t len = strlen(T[i].text);
		if (!parse_chunks(&o, T[i].text, len, NULL, NULL, &r))
			continue;
		if (strcmp(r.content, T[i].content) || strcmp(r.reasoning, T[i].reasoning) ||
		    r.n_calls != T[i].n_calls ||
		    (r.n_calls && (strcmp(r.calls[0].name, T[i].n_calls == 2 ? "f" : r.calls[0].name) ||
				   strcmp(r.calls[0].arguments, T[i].args))))
			pt_test_fail(__FILE__, __LINE__, "case %zu: content \"%s\" reasoning \"%s\" "
				     "%zu calls, first %s", i, r.content, r.reasoning, r.n_calls,
				     r.n_calls ? r.calls[0].arguments : "-");
		if (T[i].n_calls == 2 && r.n_calls == 2)
			CHECK_EQ_STR(r.calls[1].arguments, "{\"n\":1,\"s\":\"y\"}");
		check_splits(&o, T[i].text, len, &r, T[i].text);
		pt_chat_result_free(&r);
	}
	/* without the schemas a numeric-looking string parameter reads as a number */
	struct pt_chat_parser_opts o = { .format = PT_CHAT_QWEN3_XML, .tools = true };
	struct pt_chat_result r;
	const char *t = XCALL("f", XP("s", "123"));
	if (parse_chunks(&o, t, strlen(t), NULL, NULL, &r)) {
		CHECK_EQ_INT(r.n_calls, 1);
		if (r.n_calls == 1)
			CHECK_EQ_STR(r.calls[0].arguments, "{\"s\":123}");
		pt_chat_result_free(&r);
	}
	cJSON_Delete(tools);
}

PT_TEST(test_chatparse_qwen3_xml_malformed_is_content)
{
	static const struct expect E[] = {
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=f>\n<parameter=s>\nx\n</parameter>\n"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=f>\n<parameter=s>\nx\n</function>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=>\n</function>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=a<b>\n</function>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\n<function=f>\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<tool_call>\nnot a call\n</tool_call>"),
		MAL(PT_CHAT_QWEN3_XML, "<function=f>\n</function>"),
	};
	for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++)
		check_expect(&E[i], NULL, 0);
	/* a call to a tool that was not offered is content; one that was stays a call */
	static const char *const names[] = { "f" };
	static const struct expect U[] = {
		MAL(PT_CHAT_QWEN3_XML, XCALL("nope", XP("s", "x"))),
		{ PT_CHAT_QWEN3_XML, true, true, false, XCALL("f", XP("s", "x")), "", "", 1, "f",
		  "{\"s\":\"x\"}" },
		/* tools not offered: nothing is a call */
		{ PT_CHAT_QWEN3_XML, false, true, false, XCALL("f", ""), XCALL("f", ""), "", 0, NULL,
		  NULL },
	};
	for (size_t i = 0; i < sizeof(U) / sizeof(U[0]); i++)
		check_expect(&U[i], names, 1);
}

/* The forcing grammar of the XML form: required parameters in order, string ones as raw
 * text, the others by their schema; what it accepts parses back to the typed call. */
PT_TEST(test_chatparse_qwen3_xml_grammar)
{
	cJSON *tools = cJSON_Parse(XML_TOOLS);
	REQUIRE(tools);
	static const struct {
		const char *only, *text, *args; /* args NULL: rejected */
	} T[] = {
		{ NULL, XCALL("f", "<parameter=s>\nParis, \"FR\"\n</parameter>\n"), "{\"s\":\"Paris, \\\"FR\\\"\"}" },
		{ NULL, XCALL("f", "<parameter=s>\n</parameter>\n"), "{\"s\":\"\"}" },
		{ NULL, XCALL("f", "<parameter=s>\nmulti\nline\n</parameter>\n"), "{\"s\":\"multi\\nline\"}" },
		{ NULL, XCALL("g", XP("n", "12") "<parameter=s>\nhi there\n</parameter>\n"),
		  "{\"n\":12,\"s\":\"hi there\"}" },
		{ "g", XCALL("g", XP("n", "-3") "<parameter=s>\nx\n</parameter>\n"), "{\"n\":-3,\"s\":\"x\"}" },
		/* rejected: '<' in raw text, a wrong type, a missing or optional parameter, another
		 * tool than the named one, reordered parameters */
		{ NULL, XCALL("f", "<parameter=s>\na < b\n</parameter>\n"), NULL },
		{ NULL, XCALL("g", XP("n", "1.5") "<parameter=s>\nx\n</parameter>\n"), NULL },
		{ NULL, XCALL("g", XP("n", "1")), NULL },
		{ NULL, XCALL("g", XP("n", "1") "<parameter=s>\nx\n</parameter>\n" XP("opt", "o")), NULL },
		{ "g", XCALL("f", "<parameter=s>\nx\n</parameter>\n"), NULL },
		{ NULL, XCALL("g", "<parameter=s>\nx\n</parameter>\n" XP("n", "1")), NULL },
	};
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++) {
		struct pt_grammar *g = NULL;
		struct pt_error err = { 0 };
		if (pt_chat_tool_grammar(PT_CHAT_QWEN3_XML, tools, T[i].only, &g, &err) != PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "case %zu: %s", i, err.msg);
			continue;
		}
		bool complete = false;
		bool ok = pt_grammar_match_bytes((const pt_grammar *)g, T[i].text, strlen(T[i].text),
						 &complete) && complete;
		pt_grammar_free((pt_grammar *)g);
		if (ok != (T[i].args != NULL)) {
			pt_test_fail(__FILE__, __LINE__, "case %zu: %s %s", i, T[i].text,
				     ok ? "accepted" : "rejected");
			continue;
		}
		if (!ok)
			continue;
		struct pt_chat_parser_opts o = { .format = PT_CHAT_QWEN3_XML, .tools = true,
						 .tool_defs = tools };
		struct pt_chat_result r;
		if (!parse_chunks(&o, T[i].text, strlen(T[i].text), NULL, NULL, &r))
			continue;
		if (r.n_calls != 1 || strcmp(r.calls[0].arguments, T[i].args) || r.content[0])
			pt_test_fail(__FILE__, __LINE__, "case %zu: parsed back as %s", i,
				     r.n_calls ? r.calls[0].arguments : r.content);
		pt_chat_result_free(&r);
	}
	/* the alternatives: literal, value, literal, ... with raw text for string parameters */
	struct pt_chat_alt *alts = NULL;
	size_t n = 0;
	REQUIRE(pt_chat_tool_alternatives(PT_CHAT_QWEN3_XML, tools, "g", &alts, &n, NULL) == PT_OK);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(alts[0].n_parts, 5);
	if (alts[0].n_parts == 5) {
		CHECK_EQ_STR(alts[0].parts[0].literal, "<tool_call>\n<function=g>\n<parameter=n>\n");
		CHECK(cJSON_IsObject(alts[0].parts[1].schema) && !alts[0].parts[1].raw_text);
		CHECK_EQ_STR(alts[0].parts[2].literal, "\n</parameter>\n<parameter=s>\n");
		CHECK(alts[0].parts[3].raw_text && !alts[0].parts[3].schema);
		CHECK_EQ_STR(alts[0].parts[4].literal, "</parameter>\n</function>\n</tool_call>");
	}
	pt_chat_alternatives_free(alts, n);
	/* names the XML form cannot carry */
	cJSON *bad = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"a>b\"}}]");
	CHECK(pt_chat_tool_alternatives(PT_CHAT_QWEN3_XML, bad, NULL, &alts, &n, NULL) == PT_E_INVALID);
	cJSON_Delete(bad);
	bad = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"h\", \"parameters\": "
			  "{\"properties\": {\"k<\": {}}, \"required\": [\"k<\"]}}}]");
	CHECK(pt_chat_tool_alternatives(PT_CHAT_QWEN3_XML, bad, NULL, &alts, &n, NULL) == PT_E_INVALID);
	cJSON_Delete(bad);
	cJSON_Delete(tools);
}

/* The XML path under allocation failures: the call or PT_E_NOMEM at finish, never a wrong
 * result. */
PT_TEST(test_chatparse_qwen3_xml_allocation_failures)
{
	cJSON *tools = cJSON_Parse(XML_TOOLS);
	REQUIRE(tools);
	const char *text = "<think>r</think>Hi " XCALL("f", XP("s", "1") XP("i", "2"));
	struct pt_chat_parser_opts o = { .format = PT_CHAT_QWEN3_XML, .tools = true,
					 .reasoning = true, .tool_defs = tools };
	int ok_runs = 0;
	for (uint64_t k = 1; k < 200; k++) {
		pt_alloc_fail_at(k);
		pt_chat_parser *p = NULL;
		enum pt_status s = pt_chat_parser_new(&o, &p, NULL);
		struct pt_chat_result r = { 0 };
		if (s == PT_OK) {
			const size_t len = strlen(text);
			for (size_t i = 0; i < len; i += 5)
				pt_chat_parser_feed(p, text + i, len - i < 5 ? len - i : 5, NULL, NULL);
			s = pt_chat_parser_finish(p, NULL, NULL, &r, NULL);
			pt_chat_parser_free(p);
		}
		pt_alloc_fail_at(0);
		if (s == PT_OK) {
			ok_runs++;
			CHECK_EQ_STR(r.content, "Hi");
			CHECK_EQ_INT(r.n_calls, 1);
			if (r.n_calls == 1)
				CHECK_EQ_STR(r.calls[0].arguments, "{\"s\":\"1\",\"i\":2}");
			pt_chat_result_free(&r);
		} else {
			CHECK_EQ_INT(s, PT_E_NOMEM);
		}
	}
	CHECK(ok_runs > 0);
	cJSON_Delete(tools);
}
