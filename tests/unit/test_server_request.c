/* test_server_request.c - the server's request decoder (each bound at N and N+1, defaults,
 * normalisation of messages) and the route table's matching rules. */
#include "test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "server/request.h"
#include "server/routes.h"
#include "util/alloc.h"

static struct pt_req_defaults defaults(void)
{
	struct pt_req_defaults d;
	memset(&d, 0, sizeof d);
	pt_sampler_opts_default(&d.sampler);
	d.max_tokens = -1;
	d.max_body = 8u << 20;
	return d;
}

static bool decode(enum pt_req_kind k, const char *body, struct pt_req *r, struct pt_req_error *e)
{
	struct pt_req_defaults d = defaults();
	return pt_req_decode(k, body, strlen(body), &d, r, e);
}

/* A chat body whose messages array has n entries. */
static char *chat_with_messages(size_t n)
{
	static const char m[] = "{\"role\":\"user\",\"content\":\"x\"},";
	char *s = pt_malloc(32 + n * (sizeof m - 1));
	strcpy(s, "{\"messages\":[");
	char *w = s + strlen(s);
	for (size_t i = 0; i < n; i++) {
		memcpy(w, m, sizeof m - 1);
		w += sizeof m - 1;
	}
	strcpy(w - (n ? 1 : 0), "]}");
	return s;
}

PT_TEST(test_server_request_chat_defaults_and_fields)
{
	struct pt_req r;
	struct pt_req_error e;
	REQUIRE(decode(PT_REQ_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":"
		       "\"s\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		       "{\"type\":\"text\",\"text\":\"b\"}]}],\"temperature\":0,\"top_k\":-1,"
		       "\"stop\":\"END\",\"max_completion_tokens\":7,\"seed\":42,\"stream\":true,"
		       "\"stream_options\":{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":3}",
		       &r, &e));
	CHECK_EQ_STR(r.model, "m");
	CHECK(r.sampler.temperature == 0);
	CHECK_EQ_INT(r.sampler.top_k, 0);
	CHECK_EQ_INT(r.n_stops, 1);
	CHECK_EQ_STR(r.stops[0], "END");
	CHECK_EQ_INT(r.max_tokens, 7);
	CHECK_EQ_INT(r.sampler.seed, 42);
	CHECK(r.stream && r.include_usage && r.logprobs);
	CHECK_EQ_INT(r.top_logprobs, 3);
	CHECK(r.add_generation_prompt);
	const cJSON *m0 = cJSON_GetArrayItem(r.messages, 0), *m1 = cJSON_GetArrayItem(r.messages, 1);
	CHECK_EQ_STR(cJSON_GetObjectItem(m0, "role")->valuestring, "system");
	CHECK_EQ_STR(cJSON_GetObjectItem(m1, "content")->valuestring, "a\nb");
	pt_req_free(&r);
	/* no seed: the server draws one (UINT64_MAX marks it) unless --seed was given */
	REQUIRE(decode(PT_REQ_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r, &e));
	CHECK(r.sampler.seed == UINT64_MAX);
	CHECK_EQ_INT(r.max_tokens, -1);
	pt_req_free(&r);
	pt_req_free(&r); /* idempotent */
}

PT_TEST(test_server_request_bounds_at_n_and_n_plus_one)
{
	struct pt_req r;
	struct pt_req_error e;
	char *ok = chat_with_messages(PT_REQ_MAX_MESSAGES), *over = chat_with_messages(PT_REQ_MAX_MESSAGES + 1);
	CHECK(decode(PT_REQ_CHAT, ok, &r, &e));
	pt_req_free(&r);
	CHECK(!decode(PT_REQ_CHAT, over, &r, &e));
	CHECK_EQ_INT(e.status, 400);
	CHECK_CONTAINS(e.message, "more than 4096 messages");
	pt_free(ok);
	pt_free(over);
	/* nesting: 64 levels pass the byte check, 65 do not */
	char deep[512];
	for (int depth = 64; depth <= 65; depth++) {
		int w = snprintf(deep, sizeof deep, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
				 "\"chat_template_kwargs\":{\"a\":");
		for (int i = 0; i < depth - 2; i++)
			deep[w++] = '[';
		for (int i = 0; i < depth - 2; i++)
			deep[w++] = ']';
		strcpy(deep + w, "}}");
		bool got = decode(PT_REQ_CHAT, deep, &r, &e);
		CHECK(got == (depth == 64));
		if (!got)
			CHECK_CONTAINS(e.message, "nested deeper than 64");
		pt_req_free(&r);
	}
	/* stop strings: 16 ok, 17 not; 256 bytes ok, 257 not */
	char body[8192];
	strcpy(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[");
	for (int i = 0; i < 17; i++)
		sprintf(body + strlen(body), "%s\"s%d\"", i ? "," : "", i);
	strcat(body, "]}");
	CHECK(!decode(PT_REQ_CHAT, body, &r, &e));
	CHECK_EQ_STR(e.param, "stop");
	char *p = strstr(body, ",\"s16\"");
	strcpy(p, "]}");
	CHECK(decode(PT_REQ_CHAT, body, &r, &e));
	CHECK_EQ_INT(r.n_stops, 16);
	pt_req_free(&r);
	for (int len = 256; len <= 257; len++) {
		int w = sprintf(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"");
		memset(body + w, 'a', (size_t)len);
		strcpy(body + w + len, "\"}");
		CHECK(decode(PT_REQ_CHAT, body, &r, &e) == (len == 256));
		pt_req_free(&r);
	}
	/* body size against max_body: exactly the limit passes the size check */
	struct pt_req_defaults d = defaults();
	const char *b = "{\"prompt\":\"x\"}";
	d.max_body = strlen(b);
	CHECK(pt_req_decode(PT_REQ_COMPLETION, b, strlen(b), &d, &r, &e));
	pt_req_free(&r);
	d.max_body = strlen(b) - 1;
	CHECK(!pt_req_decode(PT_REQ_COMPLETION, b, strlen(b), &d, &r, &e));
	CHECK_EQ_INT(e.status, 413);
}

PT_TEST(test_server_request_errors_name_the_field)
{
	static const struct { const char *body, *param; } t[] = {
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":1.5}", "top_p" },
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", "max_tokens" },
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}", "n" },
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", "seed" },
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice" },
		{ "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", "messages" },
		{ "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"yaml\"}}", "response_format" },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct pt_req r;
		struct pt_req_error e;
		CHECK(!decode(PT_REQ_CHAT, t[i].body, &r, &e));
		CHECK_EQ_INT(e.status, 400);
		CHECK_EQ_STR(e.param, t[i].param);
		CHECK(e.message[0] != 0);
	}
}

PT_TEST(test_server_request_completion_prompts)
{
	struct pt_req r;
	struct pt_req_error e;
	REQUIRE(decode(PT_REQ_COMPLETION, "{\"prompt\":[\"only one\"]}", &r, &e));
	CHECK_EQ_STR(r.prompt, "only one");
	pt_req_free(&r);
	REQUIRE(decode(PT_REQ_COMPLETION, "{\"prompt\":[1,2,3],\"logprobs\":2}", &r, &e));
	CHECK_EQ_INT(r.n_ids, 3);
	CHECK_EQ_INT(r.ids[2], 3);
	CHECK(r.logprobs);
	CHECK_EQ_INT(r.top_logprobs, 2);
	pt_req_free(&r);
	CHECK(!decode(PT_REQ_COMPLETION, "{\"prompt\":[1,2.5]}", &r, &e));
	CHECK(!decode(PT_REQ_COMPLETION, "{\"prompt\":\"a\",\"suffix\":\"b\"}", &r, &e));
	CHECK(decode(PT_REQ_DETOKENIZE, "{\"tokens\":[]}", &r, &e));
	pt_req_free(&r);
}

static void dummy(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	(void)ctx;
	(void)req;
	(void)resp;
}

PT_TEST(test_server_routes_exact_beats_prefix_and_405_is_known)
{
	struct pt_routes t;
	memset(&t, 0, sizeof t);
	int a, b, c;
	const struct pt_route r1 = { "GET", "/", true, true, dummy, &a };
	const struct pt_route r2 = { "GET", "/v1/models", false, false, dummy, &b };
	const struct pt_route r3 = { "POST", "/v1/chat/completions", false, false, dummy, &c };
	REQUIRE(pt_routes_add(&t, &r1, NULL) == PT_OK);
	REQUIRE(pt_routes_add(&t, &r2, NULL) == PT_OK);
	REQUIRE(pt_routes_add(&t, &r3, NULL) == PT_OK);
	CHECK(pt_routes_add(&t, &r2, NULL) == PT_E_INVALID);
	bool known = false;
	CHECK(pt_routes_find(&t, "GET", "/v1/models", &known)->ctx == &b);
	CHECK(pt_routes_find(&t, "GET", "/assets/app.js", &known)->ctx == &a);
	CHECK(pt_routes_find(&t, "POST", "/v1/chat/completions", &known)->ctx == &c);
	/* GET on the chat path: an exact route with another method hides the "/" prefix: 405 */
	CHECK(pt_routes_find(&t, "GET", "/v1/chat/completions", &known) == NULL);
	CHECK(known);
	CHECK(pt_routes_find(&t, "DELETE", "/v1/models", &known) == NULL);
	CHECK(known);
	CHECK(pt_routes_find(&t, "GET", "/nothing", &known)->ctx == &a);
	CHECK(!known);
	struct pt_routes u;
	memset(&u, 0, sizeof u);
	const struct pt_route p = { "GET", "/assets", true, false, dummy, &a };
	REQUIRE(pt_routes_add(&u, &p, NULL) == PT_OK);
	CHECK(pt_routes_find(&u, "GET", "/assets/x", NULL) != NULL);
	CHECK(pt_routes_find(&u, "GET", "/assets", NULL) != NULL);
	CHECK(pt_routes_find(&u, "GET", "/assetsx", NULL) == NULL);
}

PT_TEST(test_server_resp_error_shape)
{
	struct pt_http_resp r;
	memset(&r, 0, sizeof r);
	pt_http_resp_error(&r, 413, NULL, "body", "too_large", "too big: %d", 5);
	CHECK_EQ_INT(r.status, 413);
	cJSON *j = cJSON_Parse(r.body);
	REQUIRE(j);
	const cJSON *e = cJSON_GetObjectItem(j, "error");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "message")->valuestring, "too big: 5");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "param")->valuestring, "body");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "code")->valuestring, "too_large");
	cJSON_Delete(j);
	pt_free(r.body);
	memset(&r, 0, sizeof r);
	pt_http_resp_header(&r, "X-A", "a\r\nInjected: 1");
	CHECK(strchr(r.headers[0].value, '\n') == NULL);
}
