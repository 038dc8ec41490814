/* tmpl.h - Jinja2 chat-template engine.
 *
 * Renders a GGUF's tokenizer.chat_template the way Python jinja2 does with Hugging Face
 * transformers' settings: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[loopcontrols]) plus the globals raise_exception(msg) and strftime_now(fmt) and
 * the filter tojson = json.dumps(x, ensure_ascii=False, indent=, separators=, sort_keys=).
 * The {% generation %} block of transformers' AssistantTracker renders its body.
 *
 * Variables come from a cJSON object (key -> value).  cJSON keeps numbers as doubles; when a
 * number node's valuestring holds its source spelling (the CLI stores it), "1" is an int and
 * "1.0" a float as in Python, and integers are exact to 64 bits (beyond: PT_E_UNSUPPORTED).
 * Without it, integral values below 2^53 are ints and the rest floats.
 *
 * Limits (src/util/limits.h): template size, nesting depth (parse and macro recursion), total
 * loop iterations, output bytes and render memory are bounded; exceeding one is PT_E_LIMIT.
 * Errors carry "line L, column C" of the template position involved.
 *
 * Known differences from jinja2 (none affects the fixture templates; tools/tmpl_difftest.py
 * finds them): integers are 64-bit (overflow is an error, Python has bigints); upper/lower/
 * title/capitalize map ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (other cased
 * scripts pass unchanged); select/reject/map/unique/items results behave as
 * generators (always true, no len(), not subscriptable, printing one is an error since
 * jinja2 prints an address) but are computed eagerly, so an error jinja2 would defer until
 * iteration happens at once ('fmt' % args supports s r a d i u f F e E g G x X o c and %%,
 * without '*' widths); recursive for loops,
 * {% include/extends/import/with %} and *args calls are unsupported (clear errors).
 */
#ifndef PT_TOKEN_TMPL_H
#define PT_TOKEN_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/status.h"

struct cJSON;
struct pt_gguf;
typedef struct pt_tmpl pt_tmpl;

struct pt_tmpl_limits {
	uint64_t max_output;     /* bytes of rendered text (and of any one string value) */
	uint64_t max_iterations; /* loop iterations over the whole render */
	uint64_t max_memory;     /* bytes of render-time allocations */
	uint32_t max_depth;      /* macro / call nesting */
};

/* The limits.h defaults. */
struct pt_tmpl_limits pt_tmpl_default_limits(void);

/* Parses src[0..len) (UTF-8).  Syntax errors, unknown tags and unknown filters/tests outside
 * conditional blocks fail here with PT_E_FORMAT / PT_E_UNSUPPORTED and a line/column. */
enum pt_status pt_tmpl_parse(const char *src, size_t len, pt_tmpl **out, struct pt_error *err);
void pt_tmpl_destroy(pt_tmpl *t); /* NULL-safe */

/* Renders with the variables of the JSON object vars (may be NULL).  *out is NUL-terminated,
 * pt_malloc'd, owned by the caller; *out_len excludes the NUL.  limits may be NULL (defaults).
 * now is the time strftime_now formats (local time); 0 means time(NULL).
 * raise_exception(msg) fails with PT_E_INVALID and the message. */
enum pt_status pt_tmpl_render(const pt_tmpl *t, const struct cJSON *vars,
			      const struct pt_tmpl_limits *limits, time_t now, char **out,
			      size_t *out_len, struct pt_error *err);

/* llama.cpp's post-render BOS/EOS handling (common/chat.cpp): when the vocabulary adds BOS
 * itself (add_bos) and the rendered text starts with the bos_token text, that prefix is
 * dropped, because the prompt is then tokenized with add_special=true and parse_special=true
 * and would otherwise carry two BOS tokens.  Likewise a trailing eos_token text is dropped
 * when add_eos.  Returns the new [*start, *start + *len) window inside text. */
void pt_tmpl_strip_special(const char *text, size_t len, const char *bos, int add_bos,
			   const char *eos, int add_eos, size_t *start, size_t *out_len);

/* From a GGUF: tokenizer.chat_template (NULL when absent), the BOS/EOS token text
 * (tokenizer.ggml.tokens[tokenizer.ggml.{bos,eos}_token_id]; NULL when the id key is absent)
 * and tokenizer.ggml.add_{bos,eos}_token (false when absent; llama.cpp's per-architecture
 * defaults, e.g. forced add_bos for gemma4, are the tokenizer's business).  Strings are
 * pt_malloc'd copies; free with pt_tmpl_gguf_info_free. */
struct pt_tmpl_gguf_info {
	char *chat_template;
	size_t chat_template_len;
	char *bos, *eos;
	bool add_bos, add_eos;
};
enum pt_status pt_tmpl_gguf_info(const struct pt_gguf *g, struct pt_tmpl_gguf_info *info,
				 struct pt_error *err);
void pt_tmpl_gguf_info_free(struct pt_tmpl_gguf_info *info);

#endif
