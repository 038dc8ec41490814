/* fuzz_chatparse.c - libFuzzer target for the reply parser (src/server/chatparse.h).  Byte 0
 * picks the format (low 5 bits) and options, byte 1 the chunking; the rest is the model's
 * reply.  A fixed tools array types XML parameter values (Qwen3-Coder / Qwen3.5).  The
 * reply is parsed in one feed and in chunks: both must give the same content, reasoning and
 * calls, and the streamed events must add up to the result.  Any difference traps. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "server/chatparse.h"
#include "util/alloc.h"

struct acc {
	char *content, *reasoning, *args;
	size_t nc, nr, na, calls;
	int bad;
};

static size_t pow2_cap(size_t x)
{
	size_t c = 64;
	while (c < x)
		c *= 2;
	return c;
}

/* Holds pow2_cap(n + 1) bytes: one realloc per byte would be quadratic under ASan. */
static void add(char **s, size_t *n, const char *t, size_t len)
{
	char *p = *s;
	if (!p || pow2_cap(*n + len + 1) > pow2_cap(*n + 1))
		p = pt_realloc(*s, pow2_cap(*n + len + 1));
	if (!p)
		__builtin_trap();
	memcpy(p + *n, t, len);
	*n += len;
	p[*n] = 0;
	*s = p;
}

static void on_event(void *ctx, const struct pt_chat_event *ev)
{
	struct acc *a = ctx;
	switch (ev->kind) {
	case PT_CHAT_CONTENT:
		add(&a->content, &a->nc, ev->text, ev->len);
		break;
	case PT_CHAT_REASONING:
		add(&a->reasoning, &a->nr, ev->text, ev->len);
		break;
	case PT_CHAT_TOOL_START:
		if (ev->index != a->calls || !ev->id || !ev->name || !ev->name[0])
			a->bad = 1;
		a->calls++;
		break;
	case PT_CHAT_TOOL_ARGS:
		if (ev->index + 1 != a->calls)
			a->bad = 1;
		add(&a->args, &a->na, ev->text, ev->len);
		break;
	}
}

static void run(const struct pt_chat_parser_opts *o, const uint8_t *d, size_t n, size_t chunk,
		struct pt_chat_result *r)
{
	pt_chat_parser *p = NULL;
	if (pt_chat_parser_new(o, &p, NULL) != PT_OK)
		__builtin_trap();
	struct acc a = { 0 };
	for (size_t i = 0; i < n; i += chunk)
		pt_chat_parser_feed(p, (const char *)d + i, n - i < chunk ? n - i : chunk, on_event,
				    &a);
	if (pt_chat_parser_finish(p, on_event, &a, r, NULL) != PT_OK)
		__builtin_trap();
	pt_chat_parser_free(p);
	/* events == result */
	if (a.bad || a.calls != r->n_calls || a.nc != r->content_len ||
	    a.nr != r->reasoning_len || (a.nc && memcmp(a.content, r->content, a.nc)) ||
	    (a.nr && memcmp(a.reasoning, r->reasoning, a.nr)) || r->content[a.nc] ||
	    r->reasoning[a.nr])
		__builtin_trap();
	size_t at = 0;
	for (size_t i = 0; i < r->n_calls; i++) {
		size_t l = strlen(r->calls[i].arguments);
		if (at + l > a.na || memcmp(a.args + at, r->calls[i].arguments, l) != 0)
			__builtin_trap();
		at += l;
	}
	pt_free(a.content);
	pt_free(a.reasoning);
	pt_free(a.args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static cJSON *tools;
	if (!tools)
		tools = cJSON_Parse(
			"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
			"\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"},"
			"\"i\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},"
			"\"o\":{\"type\":\"object\"},\"ns\":{\"type\":[\"string\",\"null\"]},"
			"\"u\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}}}}}]");
	if (size < 2 || !tools)
		return 0;
	struct pt_chat_parser_opts o = {
		.format = (enum pt_chat_format)((data[0] & 0x1f) % PT_CHAT_FORMAT_COUNT),
		.tools = !(data[0] & 0x80),
		.reasoning = !(data[0] & 0x40),
		.thinking_open = (data[0] & 0x20) != 0,
		.tool_defs = tools,
	};
	size_t chunk = 1 + data[1] % 13;
	struct pt_chat_result a, b;
	run(&o, data + 2, size - 2, size, &a);
	run(&o, data + 2, size - 2, chunk, &b);
	if (a.content_len != b.content_len || a.reasoning_len != b.reasoning_len ||
	    memcmp(a.content, b.content, a.content_len) ||
	    memcmp(a.reasoning, b.reasoning, a.reasoning_len) || a.n_calls != b.n_calls)
		__builtin_trap();
	for (size_t i = 0; i < a.n_calls; i++)
		if (strcmp(a.calls[i].name, b.calls[i].name) ||
		    strcmp(a.calls[i].arguments, b.calls[i].arguments) || !a.calls[i].id[0])
			__builtin_trap();
	pt_chat_result_free(&a);
	pt_chat_result_free(&b);
	return 0;
}
