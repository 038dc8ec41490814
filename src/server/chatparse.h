/* chatparse.h - the model's reply text back into content, reasoning_content and tool_calls,
 * per chat-template family, incrementally (any split of the text, one byte at a time too).
 *
 * What a family's model emits is what its chat template renders for an assistant message
 * with tool_calls (the fixtures under tests/fixtures/chatparse/ are those renderings):
 *   HERMES   (Qwen2.5/3, Hermes)  <tool_call>\n{"name": N, "arguments": {..}}\n</tool_call>
 *   QWEN3_XML (Qwen3-Coder, Qwen3.5)  <tool_call>\n<function=N>\n<parameter=K>\nVALUE\n
 *                                </parameter>\n...</function>\n</tool_call>; VALUE is raw
 *                                text typed by the tool's JSON schema (tool_defs): a parameter
 *                                whose type is string stays a string ("123" too); other types
 *                                take VALUE as JSON (numbers, objects, arrays; the template's
 *                                Python spellings True/False/None for boolean/null); unknown
 *                                parameters: JSON when VALUE parses as a non-string JSON value,
 *                                else a string.  HERMES also accepts this form in its tags.
 *   GEMMA4                       <|tool_call>call:N{key:<|"|>str<|"|>,n:1}<tool_call|>
 *                                reasoning <|channel>thought ... <channel|>
 *   LLAMA3   (Llama 3.1/3.2/3.3) {"name": N, "parameters": {..}} as the whole reply, or after
 *                                <|python_tag|> (also the builtin form N.call(k="v", ...))
 *   MISTRAL  (Nemo, Small 3.x)   [TOOL_CALLS][{"name": N, "arguments": {..}, "id": "abcdefghi"}]
 *                                or [TOOL_CALLS]N[CALL_ID]id[ARGS]{..} / [TOOL_CALLS]N[ARGS]{..}
 *   DEEPSEEK_R1                  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
 *                                \n```json\n{..}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *                                (V3.1: ...begin｜>N<｜tool▁sep｜>{..}<｜tool▁call▁end｜>)
 *   PHI4                         <|tool_call|>{"name": N, "arguments": {..}}<|/tool_call|>
 *   HARMONY  (gpt-oss)           <|channel|>analysis<|message|>..<|end|><|start|>assistant
 *                                <|channel|>commentary to=functions.N <|constrain|>json
 *                                <|message|>{..}<|call|>  (also " to=functions.N<|channel|>...")
 *   GENERIC  (anything else)     the Hermes tags, or a bare JSON object as the whole reply:
 *                                {"name","arguments"}, {"tool_call":{..}}, {"tool_calls":[..]}
 * Reasoning is <think>...</think> at the start of the reply (or from the start when the prompt
 * already opened it), except GEMMA4 and HARMONY which use their own channels.
 *
 * Streaming contract: events come out in order and only for what is certain, so the
 * concatenation of the events of any split equals the final result.  Text that could still
 * be the start of a marker is held back only while it is ambiguous; a tool call's text is
 * held until the call is complete (its closing marker, or the end of its JSON value), then
 * TOOL_START (index, id, name) and one TOOL_ARGS with the whole arguments JSON come out.  A
 * call cannot be streamed argument by argument: a call that later turns out malformed must
 * come back as plain content, and events already sent cannot be taken back.
 *
 * Malformed calls (bad JSON, unterminated block, unknown shape, a name not among the offered
 * tools when the names are given) come out as plain content, byte for byte as the model wrote
 * them; well-formed calls in the same reply stay calls.  A reply whose only call is malformed
 * therefore has 0 calls (the server reports finish_reason "stop").  Any byte sequence is
 * accepted; nothing here crashes or reads out of bounds.  Text is passed through as given
 * (the server's text filter hands over whole UTF-8 characters). */
#ifndef PT_SERVER_CHATPARSE_H
#define PT_SERVER_CHATPARSE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

enum pt_chat_format {
	PT_CHAT_GENERIC,
	PT_CHAT_HERMES, /* Qwen3, Hermes: <tool_call>{json}</tool_call> */
	PT_CHAT_GEMMA4,
	PT_CHAT_LLAMA3,
	PT_CHAT_MISTRAL,
	PT_CHAT_DEEPSEEK_R1,
	PT_CHAT_PHI4,
	PT_CHAT_HARMONY,
	PT_CHAT_QWEN3_XML, /* Qwen3-Coder, Qwen3.5: <tool_call><function=N><parameter=K>.. */
	PT_CHAT_FORMAT_COUNT
};

/* From the chat template's source text (and the model's arch name; either may be NULL).
 * Substring checks on the markers the template renders, most specific first. */
enum pt_chat_format pt_chat_format_detect(const char *template_src, const char *arch);
/* "generic", "hermes", "gemma4", "llama3", "mistral", "deepseek-r1", "phi4", "harmony",
 * "qwen3-xml". */
const char *pt_chat_format_name(enum pt_chat_format f);

/* Extra stop strings a family needs when tools are offered (NULL-terminated, static): text
 * the model writes after a call that belongs to the next turn (Gemma 4 "<|tool_response>",
 * Llama 3 "<|eom_id|>").  The parser also accepts a reply cut at these. */
const char *const *pt_chat_format_stops(enum pt_chat_format f);

/* True when the rendered prompt ends inside an open reasoning block of this family (the last
 * reasoning start marker has no end marker after it), e.g. DeepSeek R1's "<think>\n" or
 * Sarvam's "[/INST]<think>\n": set pt_chat_parser_opts.thinking_open from it. */
bool pt_chat_prompt_thinking_open(enum pt_chat_format f, const char *prompt, size_t len);

struct pt_chat_parser_opts {
	enum pt_chat_format format;
	bool tools;         /* tools were offered (and tool_choice is not "none"): parse calls */
	bool reasoning;     /* split reasoning off (--reasoning-format deepseek) */
	bool thinking_open; /* prompt already ended inside the reasoning block */
	/* Optional: the offered tool names; when n_tool_names > 0 a call to any other name is
	 * malformed (plain content). */
	const char *const *tool_names;
	size_t n_tool_names;
	/* Optional: the request's "tools" array (OpenAI shape); the parser keeps a copy and types
	 * XML parameter values by each function's "parameters" schema (QWEN3_XML, HERMES). */
	const cJSON *tool_defs;
};

/* Streaming events, in order. */
enum pt_chat_event_kind {
	PT_CHAT_CONTENT,
	PT_CHAT_REASONING,
	PT_CHAT_TOOL_START, /* index, id, name */
	PT_CHAT_TOOL_ARGS   /* index, arguments delta (JSON text) */
};
/* text/len: the delta (CONTENT, REASONING, TOOL_ARGS); id and name: TOOL_START only.  All
 * pointers are valid only during the callback. */
struct pt_chat_event {
	enum pt_chat_event_kind kind;
	uint32_t index;
	const char *id;
	const char *name;
	const char *text;
	size_t len;
};
typedef void (*pt_chat_event_fn)(void *ctx, const struct pt_chat_event *ev);

typedef struct pt_chat_parser pt_chat_parser;

enum pt_status pt_chat_parser_new(const struct pt_chat_parser_opts *o, pt_chat_parser **out,
				  struct pt_error *err);
void pt_chat_parser_free(pt_chat_parser *p);
/* Feed the reply text as it is generated (any split); events for what is now certain.  fn may
 * be NULL (non-streaming).  Out of memory makes the parser fail at finish. */
void pt_chat_parser_feed(pt_chat_parser *p, const char *text, size_t len, pt_chat_event_fn fn,
			 void *ctx);

/* Tool-call ids: "call_" + 24 random [0-9A-Za-z] (getrandom), except where the model's output
 * carries an id (Mistral), which is kept so that the template accepts it in the next turn;
 * Mistral calls without one get 9 random alphanumerics, the length its templates demand. */
struct pt_chat_tool_call {
	char *id;
	char *name;
	char *arguments; /* JSON object text, compact (insignificant whitespace removed) */
};
/* content and reasoning are always allocated ("" when empty) and NUL-terminated; their
 * lengths count any NUL bytes the model produced inside them. */
struct pt_chat_result {
	char *content;
	char *reasoning;
	struct pt_chat_tool_call *calls;
	size_t n_calls;
	size_t content_len, reasoning_len;
};
/* End of generation: flushes held text (a block still open is malformed: content); *out gets
 * everything (the concatenation of all events).  Only fails on out of memory (PT_E_NOMEM). */
enum pt_status pt_chat_parser_finish(pt_chat_parser *p, pt_chat_event_fn fn, void *ctx,
				     struct pt_chat_result *out, struct pt_error *err);
void pt_chat_result_free(struct pt_chat_result *r);

/* Tool-call forcing (tool_choice "required" / a named function).  One alternative per tool
 * (only the one named when only_name is set): the literal parts and JSON-schema parts that a
 * call in this family's syntax consists of, e.g. HERMES
 *   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " <parameters schema> "}\n</tool_call>".
 * schema points into tools (not copied); NULL schema = any JSON object.  Built by
 * pt_chat_tool_alternatives, which needs no grammar engine (it is what the tests check). */
struct pt_chat_alt_part {
	char *literal;       /* owned; NULL for a value part */
	const cJSON *schema; /* the tool's "parameters" (may be NULL = any object) */
	bool raw_text;       /* QWEN3_XML string parameter: raw text without '<' (no schema) */
};
struct pt_chat_alt {
	struct pt_chat_alt_part *parts;
	size_t n_parts;
};
/* PT_E_INVALID: tools malformed, or only_name not among them.  PT_E_UNSUPPORTED for GEMMA4:
 * its arguments are not JSON, so no JSON schema describes them (answer 400, or fall back to
 * "auto").  HARMONY forces "<|channel|>commentary to=functions.N <|constrain|>json<|message|>"
 * + the arguments (its "<|call|>" ends generation).  QWEN3_XML: one part per required
 * parameter (properties order; optional ones are left out), raw text for string-only ones
 * and the parameter's own schema for the rest, so schema points at a property schema there;
 * a name or key holding '<', '>' or a newline is PT_E_INVALID.  The forced text starts at the
 * reply's first byte: no reasoning block before the call. */
enum pt_status pt_chat_tool_alternatives(enum pt_chat_format f, const cJSON *tools,
					 const char *only_name, struct pt_chat_alt **out,
					 size_t *n_out, struct pt_error *err);
void pt_chat_alternatives_free(struct pt_chat_alt *alts, size_t n);

/* The same alternatives compiled with pt_grammar_from_alternatives (src/gen/grammar.h);
 * tools without "parameters" take any JSON object.  Free with pt_grammar_free. */
struct pt_grammar;
enum pt_status pt_chat_tool_grammar(enum pt_chat_format f, const cJSON *tools,
				    const char *only_name, struct pt_grammar **out,
				    struct pt_error *err);

#endif
