/* request.h - decoding and validating the body of an OpenAI-style request into C structs.
 *
 * A pure function of the bytes (no model, no I/O): fuzzed by tests/fuzz/fuzz_server_request.c.
 * Every failure is a client error with an HTTP status (400 or 413), a message that names the
 * field, and the field's name in `param` as OpenAI reports it.  Bounds: body bytes (checked
 * by the HTTP core too), JSON nesting depth, messages, tools, stop strings and their length,
 * numbers (finite, in range, integers where integers are meant).
 *
 * Messages are normalised for the chat template: content-part arrays of text parts become
 * one string (parts joined by "\n", as llama.cpp does for templates that take strings), the
 * role "developer" becomes "system", tool_calls[].function.arguments stays as given. */
#ifndef PT_SERVER_REQUEST_H
#define PT_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen/sample.h"

struct cJSON;

#define PT_REQ_MAX_DEPTH 64          /* JSON nesting */
#define PT_REQ_MAX_MESSAGES 4096
#define PT_REQ_MAX_TOOLS 128
#define PT_REQ_MAX_STOPS 16
#define PT_REQ_MAX_STOP_LEN 256      /* bytes of one stop string */
#define PT_REQ_MAX_TOP_LOGPROBS 20
#define PT_REQ_MAX_PROMPT_IDS (1u << 20)
#define PT_REQ_MAX_KWARGS 64         /* chat_template_kwargs keys */

enum pt_req_kind { PT_REQ_CHAT, PT_REQ_COMPLETION, PT_REQ_TOKENIZE, PT_REQ_DETOKENIZE,
		   PT_REQ_APPLY_TEMPLATE };

enum pt_req_format { PT_FORMAT_TEXT = 0, PT_FORMAT_JSON_OBJECT, PT_FORMAT_JSON_SCHEMA };
enum pt_req_tool_choice { PT_TOOLS_AUTO = 0, PT_TOOLS_NONE, PT_TOOLS_REQUIRED, PT_TOOLS_NAMED };

/* Defaults a request starts from (the server's flags). */
struct pt_req_defaults {
	struct pt_sampler_opts sampler;
	int64_t max_tokens;          /* -1: until end of generation or the context end */
	bool seed_given;             /* else each request without a seed draws a random one */
	size_t max_body;
};

struct pt_req {
	enum pt_req_kind kind;
	struct cJSON *root;          /* the parsed body; everything below points into it */
	const char *model;           /* NULL when absent */
	/* chat */
	struct cJSON *messages;      /* normalised array */
	const struct cJSON *tools;   /* NULL when absent or empty */
	enum pt_req_tool_choice tool_choice;
	const char *tool_name;       /* PT_TOOLS_NAMED */
	bool parallel_tool_calls;
	enum pt_req_format format;
	const struct cJSON *schema;  /* PT_FORMAT_JSON_SCHEMA (or json_object's "schema") */
	const struct cJSON *template_kwargs; /* object or NULL */
	bool add_generation_prompt;  /* default true */
	int reasoning_format;        /* -1 server default, 0 none, 1 deepseek */
	/* completion / tokenize / detokenize */
	const char *prompt;          /* text prompt (NUL-free), or NULL when ids are given */
	size_t prompt_len;
	int32_t *ids;                /* prompt or detokenize ids (pt_malloc'd), n_ids */
	size_t n_ids;
	bool add_special, parse_special, with_pieces; /* tokenize */
	/* generation */
	struct pt_sampler_opts sampler;
	float presence_penalty, frequency_penalty;
	int64_t max_tokens;          /* -1: unbounded */
	char *stops[PT_REQ_MAX_STOPS];
	size_t n_stops;
	bool stream, include_usage;
	bool cache_prompt;           /* llama.cpp's cache_prompt (default true): false evaluates
					the whole prompt, reusing no cached prefix */
	bool logprobs;
	uint32_t top_logprobs;
};

struct pt_req_error {
	int status;                  /* 400, 413 */
	char param[64];              /* field name ("" when none) */
	char code[40];               /* short machine code ("" when none) */
	char message[320];
};

/* Decodes body[0..len) (need not be NUL-terminated) for kind.  On success *out owns its
 * allocations (pt_req_free); on failure *out is empty and *e describes the error.  Returns
 * true on success. */
bool pt_req_decode(enum pt_req_kind kind, const char *body, size_t len,
		   const struct pt_req_defaults *d, struct pt_req *out, struct pt_req_error *e);
void pt_req_free(struct pt_req *r); /* NULL-safe, idempotent */

/* Offset of the first invalid UTF-8 byte of s[0..len), or len. */
size_t pt_req_utf8_check(const unsigned char *s, size_t len);

#endif
