/* chatparse.c - family detection and the streaming split of a reply into content, reasoning
 * and tool calls (the contract is in chatparse.h).
 *
 * The parser keeps the text it cannot decide on yet in p->in and a state:
 *   S_START   the reply's first bytes: is it opening a reasoning block?
 *   S_REASON  inside reasoning, until the family's end marker
 *   S_CONTENT plain content, watching for a tool-call start marker
 *   S_BLOCK   inside a tool-call block, held until it is complete, then parsed as a whole
 * Every decision depends only on bytes already seen (and at the end on the end), never on
 * how the text was split, which is what makes the streamed events equal the final result.
 * Whitespace next to reasoning and call blocks is held back too, and dropped where the
 * templates put it only as layout ("\n</think>\n\n", "\n<tool_call>"). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/chatparse_int.h"
#include "util/alloc.h"

/* A block longer than this is not a tool call: it comes out as content. */
#define MAX_BLOCK (4u << 20)
/* Mistral's "NAME[CALL_ID]ID[ARGS]" before the JSON value. */
#define MAX_MISTRAL_PREFIX 512
#define MAX_TOOL_NAMES 4096
/* Whitespace allowed before the reasoning start marker at the start of the reply. */
#define MAX_LEAD_WS 256
/* Bytes of a reply starting with '{' that may rule out a call (see bare_ruled_out). */
#define BARE_CHECK 64

#define DS_CALLS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"

static const struct chat_family FAMILIES[PT_CHAT_FORMAT_COUNT] = {
	[PT_CHAT_GENERIC] = { "<think>", "</think>",
			      { { "<tool_call>", "</tool_call>", BK_JSON_TAGGED, false } }, 1,
			      true, false },
	[PT_CHAT_HERMES] = { "<think>", "</think>",
			     { { "<tool_call>", "</tool_call>", BK_JSON_TAGGED, false } }, 1,
			     false, false },
	[PT_CHAT_GEMMA4] = { "<|channel>thought", "<channel|>",
			     { { "<|tool_call>", "<tool_call|>", BK_GEMMA, false } }, 1, false,
			     false },
	[PT_CHAT_LLAMA3] = { "<think>", "</think>",
			     { { "<|python_tag|>", NULL, BK_PYTHON_TAG, true } }, 1, true,
			     false },
	[PT_CHAT_MISTRAL] = { "[THINK]", "[/THINK]",
			      { { "[TOOL_CALLS]", NULL, BK_MISTRAL, false } }, 1, false, true },
	[PT_CHAT_DEEPSEEK_R1] = { "<think>", "</think>",
				  { { DS_CALLS_BEGIN, DS_CALLS_END, BK_DEEPSEEK, false } }, 1,
				  false, false },
	[PT_CHAT_PHI4] = { "<think>", "</think>",
			   { { "<|tool_call|>", "<|/tool_call|>", BK_JSON_TAGGED, false } }, 1,
			   false, false },
	[PT_CHAT_HARMONY] = { NULL, NULL, { { NULL, NULL, BK_JSON_TAGGED, false } }, 0, false,
			      false },
	/* the same tags as Hermes; the block body is XML (JSON accepted too) */
	[PT_CHAT_QWEN3_XML] = { "<think>", "</think>",
				{ { "<tool_call>", "</tool_call>", BK_JSON_TAGGED, false } }, 1,
				false, false },
};

static const struct chat_marker BARE = { "", NULL, BK_JSON_BARE, false };

static const char *const NAMES[PT_CHAT_FORMAT_COUNT] = {
	[PT_CHAT_GENERIC] = "generic", [PT_CHAT_HERMES] = "hermes",
	[PT_CHAT_GEMMA4] = "gemma4",   [PT_CHAT_LLAMA3] = "llama3",
	[PT_CHAT_MISTRAL] = "mistral", [PT_CHAT_DEEPSEEK_R1] = "deepseek-r1",
	[PT_CHAT_PHI4] = "phi4",       [PT_CHAT_HARMONY] = "harmony",
	[PT_CHAT_QWEN3_XML] = "qwen3-xml",
};

const char *pt_chat_format_name(enum pt_chat_format f)
{
	return (unsigned)f < PT_CHAT_FORMAT_COUNT ? NAMES[f] : "generic";
}

const char *const *pt_chat_format_stops(enum pt_chat_format f)
{
	static const char *const none[] = { NULL };
	static const char *const gemma4[] = { "<|tool_response>", NULL };
	static const char *const llama3[] = { "<|eom_id|>", NULL };
	if (f == PT_CHAT_GEMMA4)
		return gemma4;
	if (f == PT_CHAT_LLAMA3)
		return llama3;
	return none;
}

/* ---- detection -------------------------------------------------------------------------- */

enum pt_chat_format pt_chat_format_detect(const char *t, const char *arch)
{
	if (t) {
		/* Most specific markers first: several families' markers contain others'. */
		if (strstr(t, "<|channel|>") && strstr(t, "<|message|>"))
			return PT_CHAT_HARMONY;
		if (strstr(t, "<|tool_call>") && strstr(t, "<tool_call|>"))
			return PT_CHAT_GEMMA4;
		if (strstr(t, DS_CALLS_BEGIN) || strstr(t, "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin"))
			return PT_CHAT_DEEPSEEK_R1;
		if (strstr(t, "[TOOL_CALLS]"))
			return PT_CHAT_MISTRAL;
		if (strstr(t, "<|tool_call|>"))
			return PT_CHAT_PHI4;
		/* Qwen3-Coder / Qwen3.5 render calls as <function=N> inside the Hermes tags */
		if (strstr(t, "<tool_call>") && strstr(t, "<function="))
			return PT_CHAT_QWEN3_XML;
		if (strstr(t, "<tool_call>"))
			return PT_CHAT_HERMES;
		if (strstr(t, "<|python_tag|>") ||
		    (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
			return PT_CHAT_LLAMA3;
	}
	if (arch) {
		if (strncmp(arch, "gemma4", 6) == 0)
			return PT_CHAT_GEMMA4;
		if (strcmp(arch, "gpt-oss") == 0)
			return PT_CHAT_HARMONY;
	}
	return PT_CHAT_GENERIC;
}

const char *chat_find(const char *s, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	if (m == 0 || m > n)
		return NULL;
	const char *end = s + n - m;
	for (const char *q = s; q <= end;) {
		q = memchr(q, needle[0], (size_t)(end - q) + 1);
		if (!q)
			return NULL;
		if (memcmp(q, needle, m) == 0)
			return q;
		q++;
	}
	return NULL;
}

static const char *find_last(const char *s, size_t n, const char *needle)
{
	const char *last = NULL;
	for (const char *q = s; (q = chat_find(q, n - (size_t)(q - s), needle)); q++)
		last = q;
	return last;
}

bool pt_chat_prompt_thinking_open(enum pt_chat_format f, const char *prompt, size_t len)
{
	if ((unsigned)f >= PT_CHAT_FORMAT_COUNT || !prompt)
		return false;
	const struct chat_family *fam = &FAMILIES[f];
	if (!fam->think_start)
		return false;
	const char *a = find_last(prompt, len, fam->think_start);
	if (!a)
		return false;
	const char *b = find_last(prompt, len, fam->think_end);
	return !b || b < a;
}

size_t chat_partial_suffix(const char *s, size_t n, const char *marker)
{
	size_t m = strlen(marker);
	size_t l = n < m ? n : m - 1;
	for (; l > 0; l--)
		if (memcmp(s + n - l, marker, l) == 0)
			return l;
	return 0;
}

/* ---- events ----------------------------------------------------------------------------- */

void chat_emit_text(struct pt_chat_parser *p, enum pt_chat_event_kind k, const char *s, size_t n)
{
	if (n == 0)
		return;
	chat_buf_add(k == PT_CHAT_REASONING ? &p->reasoning : &p->content, s, n);
	if (p->fn) {
		struct pt_chat_event ev = { .kind = k, .text = s, .len = n };
		p->fn(p->ctx, &ev);
	}
}

static const char ALNUM[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* n random alphanumerics (uniform: bytes >= 248 are redrawn). */
static void random_alnum(char *out, size_t n)
{
	static unsigned long fallback;
	size_t k = 0;
	while (k < n) {
		unsigned char b[64];
		ssize_t got = getrandom(b, sizeof(b), 0);
		if (got <= 0) {
			/* No kernel entropy (should not happen): still unique within a process. */
			fallback = fallback * 6364136223846793005ul + 1442695040888963407ul +
				   (unsigned long)time(NULL);
			for (size_t i = 0; i < sizeof(b); i++)
				b[i] = (unsigned char)(fallback >> ((i % 8) * 8));
			got = (ssize_t)sizeof(b);
		}
		for (ssize_t i = 0; i < got && k < n; i++)
			if (b[i] < 248)
				out[k++] = ALNUM[b[i] % 62];
	}
}

static bool name_offered(const struct pt_chat_parser *p, const char *name)
{
	if (p->o.n_tool_names == 0)
		return true;
	for (size_t i = 0; i < p->o.n_tool_names; i++)
		if (strcmp(p->names[i], name) == 0)
			return true;
	return false;
}

bool chat_emit_calls(struct pt_chat_parser *p, struct chat_calls *c)
{
	for (size_t i = 0; i < c->n; i++) {
		if (!name_offered(p, c->v[i].name)) {
			chat_calls_clear(c);
			return false;
		}
	}
	for (size_t i = 0; i < c->n; i++) {
		struct pt_chat_tool_call *t = &c->v[i];
		if (!t->id) {
			bool short_id = p->fam->short_ids;
			size_t n = short_id ? 9 : 29;
			t->id = pt_malloc(n + 1);
			if (!t->id) {
				p->nomem = true;
				continue;
			}
			if (!short_id)
				memcpy(t->id, "call_", 5);
			random_alnum(t->id + (short_id ? 0 : 5), short_id ? 9 : 24);
			t->id[n] = 0;
		}
		if (p->calls.n == p->calls.cap) {
			size_t cap = p->calls.cap ? p->calls.cap * 2 : 4;
			struct pt_chat_tool_call *v = pt_reallocn(p->calls.v, cap, sizeof(*v));
			if (!v) {
				p->nomem = true;
				continue;
			}
			p->calls.v = v;
			p->calls.cap = cap;
		}
		uint32_t index = (uint32_t)p->calls.n;
		p->calls.v[p->calls.n++] = *t;
		memset(t, 0, sizeof(*t));
		const struct pt_chat_tool_call *k = &p->calls.v[index];
		if (p->fn) {
			struct pt_chat_event ev = { .kind = PT_CHAT_TOOL_START, .index = index,
						    .id = k->id, .name = k->name };
			p->fn(p->ctx, &ev);
			struct pt_chat_event ea = { .kind = PT_CHAT_TOOL_ARGS, .index = index,
						    .text = k->arguments,
						    .len = strlen(k->arguments) };
			p->fn(p->ctx, &ea);
		}
	}
	chat_calls_clear(c); /* what was moved out is zeroed; the rest failed on memory */
	return true;
}

/* Text of the current mode, with whitespace held: leading whitespace is dropped right after a
 * break (or before the first reasoning byte), trailing whitespace waits in p->ws. */
static void mode_text(struct pt_chat_parser *p, enum pt_chat_event_kind k, const char *s, size_t n)
{
	size_t last = n;
	while (last > 0 && chat_is_ws(s[last - 1]))
		last--;
	if (last == 0) {
		chat_buf_add(&p->ws, s, n);
		return;
	}
	bool drop_lead = k == PT_CHAT_REASONING ? !p->reason_started : p->after_break;
	if (drop_lead) {
		while (chat_is_ws(*s)) {
			s++;
			n--;
			last--;
		}
	} else if (p->ws.n) {
		chat_emit_text(p, k, p->ws.p, p->ws.n);
	}
	p->ws.n = 0;
	chat_emit_text(p, k, s, last);
	chat_buf_add(&p->ws, s + last, n - last);
	if (k == PT_CHAT_REASONING) {
		p->reason_started = true;
	} else {
		p->after_break = false;
		p->content_seen = true;
	}
}

/* A block that is not a call: its text (and the whitespace before it) is content. */
static void block_as_content(struct pt_chat_parser *p, size_t len)
{
	p->after_break = false;
	mode_text(p, PT_CHAT_CONTENT, p->in.p + p->off, len);
	p->content_seen = true;
	p->off += len;
	p->st = S_CONTENT;
}

/* A reply that starts with '{' is held as a possible call only while its first key can still
 * be one of a call object's keys: plain JSON content is released at the first byte that
 * rules a call out.  Returns that byte's offset + 1, or 0 while the prefix is plausible. */
static size_t bare_ruled_out(const char *s, size_t n)
{
	static const char *const keys[] = { "name",      "type",       "function", "tool_call",
					    "tool_calls", "arguments", "parameters", "id" };
	size_t i = 1;
	while (i < n && chat_is_ws(s[i]))
		i++;
	if (i >= n)
		return 0;
	if (s[i] != '"')
		return i + 1;
	size_t k0 = ++i;
	for (; i < n; i++) {
		if (s[i] == '"')
			break;
		bool any = false;
		for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]) && !any; j++)
			any = strlen(keys[j]) > i - k0 && keys[j][i - k0] == s[i] &&
			      memcmp(keys[j], s + k0, i - k0) == 0;
		if (!any)
			return i + 1;
	}
	if (i >= n)
		return 0;
	for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
		if (strlen(keys[j]) == i - k0 && memcmp(keys[j], s + k0, i - k0) == 0)
			return 0;
	return i + 1;
}

/* Scans the open block.  Returns its length once complete, 0 while it is not, and sets
 * *bad (with the length to give back as content) when it cannot be a call. */
static size_t block_scan(struct pt_chat_parser *p, bool eof, bool *bad)
{
	const char *s = p->in.p + p->off;
	size_t n = p->in.n - p->off;
	const struct chat_marker *m = p->bm;
	size_t ms = strlen(m->start);
	size_t lim = n < MAX_BLOCK ? n : MAX_BLOCK;
	*bad = false;
	if (m->to_eof) {
		if (eof)
			return n;
		if (n >= MAX_BLOCK) {
			*bad = true;
			return MAX_BLOCK;
		}
		return 0;
	}
	if (m->end) {
		size_t me = strlen(m->end);
		size_t from = p->scan > ms + me ? p->scan - me : ms;
		const char *e = chat_find(s + from, lim - from, m->end);
		if (e)
			return (size_t)(e - s) + me;
		p->scan = lim;
	} else {
		if (!p->json_on) {
			/* Mistral: the value starts right away, or after "NAME...[ARGS]". */
			size_t i = ms;
			while (i < lim && chat_is_ws(s[i]))
				i++;
			if (i < lim && (s[i] == '[' || s[i] == '{')) {
				p->scan = i;
				p->json_on = true;
			} else if (i < lim) {
				size_t span = lim - ms < MAX_MISTRAL_PREFIX + 6 ? lim - ms
									: MAX_MISTRAL_PREFIX + 6;
				const char *a = chat_find(s + ms, span, "[ARGS]");
				if (a) {
					size_t j = (size_t)(a - s) + 6;
					while (j < lim && chat_is_ws(s[j]))
						j++;
					if (j < lim) {
						if (s[j] != '{') {
							*bad = true;
							return j + 1;
						}
						p->scan = j;
						p->json_on = true;
					}
				} else if (lim - ms >= MAX_MISTRAL_PREFIX + 6) {
					*bad = true;
					return ms + MAX_MISTRAL_PREFIX + 6;
				}
			}
		}
		if (m == &BARE && p->scan < BARE_CHECK) {
			/* only the first BARE_CHECK bytes decide: the same for every split */
			size_t bad_at = bare_ruled_out(s, lim < BARE_CHECK ? lim : BARE_CHECK);
			if (bad_at) {
				*bad = true;
				return bad_at;
			}
		}
		if (p->json_on) {
			for (size_t i = p->scan; i < lim; i++) {
				char c = s[i];
				if (p->jesc) {
					p->jesc = false;
				} else if (p->jstr) {
					if (c == '\\')
						p->jesc = true;
					else if (c == '"')
						p->jstr = false;
				} else if (c == '"') {
					p->jstr = true;
				} else if (c == '{' || c == '[') {
					p->depth++;
				} else if (c == '}' || c == ']') {
					if (p->depth == 0 || --p->depth == 0)
						return i + 1;
				}
			}
			p->scan = lim;
		}
	}
	if (n >= MAX_BLOCK) {
		*bad = true;
		return MAX_BLOCK;
	}
	if (eof) {
		*bad = true;
		return n;
	}
	return 0;
}

static void start_block(struct pt_chat_parser *p, const struct chat_marker *m)
{
	p->bm = m;
	p->scan = 0;
	p->json_on = m == &BARE;
	p->depth = 0;
	p->jstr = p->jesc = false;
	p->st = S_BLOCK;
}

/* Finds the first tool-call start in s[0..n): *at and the marker, or NULL. */
static const struct chat_marker *find_marker(const struct pt_chat_parser *p, const char *s,
					     size_t n, size_t *at)
{
	const struct chat_marker *best = NULL;
	for (size_t i = 0; i < p->fam->n_markers; i++) {
		const char *q = chat_find(s, n, p->fam->markers[i].start);
		if (q && (!best || (size_t)(q - s) < *at)) {
			best = &p->fam->markers[i];
			*at = (size_t)(q - s);
		}
	}
	if (p->fam->bare_json && !p->content_seen) {
		size_t i = 0;
		while (i < n && chat_is_ws(s[i]))
			i++;
		if (i < n && s[i] == '{' && (!best || i < *at)) {
			best = &BARE;
			*at = i;
		}
	}
	return best;
}

static void process(struct pt_chat_parser *p, bool eof)
{
	const struct chat_family *fam = p->fam;
	for (;;) {
		const char *s = p->in.p ? p->in.p + p->off : "";
		size_t n = p->in.n - p->off;
		switch (p->st) {
		case S_START: {
			if (!p->o.reasoning || !fam->think_start) {
				p->st = S_CONTENT;
				break;
			}
			if (p->o.thinking_open) {
				p->st = S_REASON;
				break;
			}
			/* Whitespace before the start marker is bounded, so that a reply of
			 * blanks is not rescanned on every feed. */
			size_t i = 0;
			while (i < n && i < MAX_LEAD_WS && chat_is_ws(s[i]))
				i++;
			if (i == MAX_LEAD_WS) {
				p->st = S_CONTENT;
				break;
			}
			size_t m = strlen(fam->think_start);
			size_t have = n - i < m ? n - i : m;
			if (memcmp(s + i, fam->think_start, have) != 0) {
				p->st = S_CONTENT;
				break;
			}
			if (have < m) {
				if (!eof)
					return;
				p->st = S_CONTENT;
				break;
			}
			p->off += i + m;
			p->st = S_REASON;
			break;
		}
		case S_REASON: {
			const char *e = chat_find(s, n, fam->think_end);
			if (e) {
				mode_text(p, PT_CHAT_REASONING, s, (size_t)(e - s));
				p->ws.n = 0;
				p->off += (size_t)(e - s) + strlen(fam->think_end);
				p->st = S_CONTENT;
				p->after_break = true;
				break;
			}
			size_t hold = eof ? 0 : chat_partial_suffix(s, n, fam->think_end);
			mode_text(p, PT_CHAT_REASONING, s, n - hold);
			p->off += n - hold;
			if (eof) {
				chat_emit_text(p, PT_CHAT_REASONING, p->ws.p, p->ws.n);
				p->ws.n = 0;
				p->st = S_DONE;
			}
			return;
		}
		case S_CONTENT: {
			size_t at = 0;
			const struct chat_marker *m = p->o.tools ? find_marker(p, s, n, &at) : NULL;
			if (m) {
				mode_text(p, PT_CHAT_CONTENT, s, at);
				p->off += at;
				start_block(p, m);
				break;
			}
			size_t hold = 0;
			if (!eof && p->o.tools)
				for (size_t i = 0; i < fam->n_markers; i++) {
					size_t h = chat_partial_suffix(s, n, fam->markers[i].start);
					if (h > hold)
						hold = h;
				}
			mode_text(p, PT_CHAT_CONTENT, s, n - hold);
			p->off += n - hold;
			if (eof) {
				if (!p->after_break)
					chat_emit_text(p, PT_CHAT_CONTENT, p->ws.p, p->ws.n);
				p->ws.n = 0;
				p->st = S_DONE;
			}
			return;
		}
		case S_BLOCK: {
			bool bad = false;
			size_t len = block_scan(p, eof, &bad);
			if (len == 0)
				return;
			if (bad) {
				block_as_content(p, len);
				break;
			}
			size_t ms = strlen(p->bm->start);
			size_t me = p->bm->end ? strlen(p->bm->end) : 0;
			struct chat_calls calls = { 0 };
			int rc = chat_block_parse(p->bm->kind, s + ms, len - ms - me, p->tool_defs,
						  &calls);
			if (rc < 0)
				p->nomem = true;
			if (rc == 0 && chat_emit_calls(p, &calls)) {
				p->ws.n = 0;
				p->after_break = true;
				p->content_seen = true;
				p->off += len;
				p->st = S_CONTENT;
			} else {
				chat_calls_clear(&calls);
				block_as_content(p, len);
			}
			break;
		}
		case S_DONE:
			return;
		}
	}
}

/* ---- public ------------------------------------------------------------------------------ */

enum pt_status pt_chat_parser_new(const struct pt_chat_parser_opts *o, pt_chat_parser **out,
				  struct pt_error *err)
{
	*out = NULL;
	if (!o || (unsigned)o->format >= PT_CHAT_FORMAT_COUNT)
		return pt_error_set(err, PT_E_INVALID, "chat parser: unknown format");
	if (o->n_tool_names > MAX_TOOL_NAMES || (o->n_tool_names && !o->tool_names))
		return pt_error_set(err, PT_E_INVALID, "chat parser: too many tool names");
	pt_chat_parser *p = pt_calloc(1, sizeof(*p));
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "chat parser: out of memory");
	p->o = *o;
	p->fam = &FAMILIES[o->format];
	if (o->n_tool_names) {
		p->names = pt_calloc(o->n_tool_names, sizeof(char *));
		if (!p->names)
			goto nomem;
		for (size_t i = 0; i < o->n_tool_names; i++) {
			p->names[i] = pt_strdup(o->tool_names[i] ? o->tool_names[i] : "");
			if (!p->names[i]) {
				p->o.n_tool_names = i;
				goto nomem;
			}
		}
	}
	p->o.tool_names = NULL;
	if (o->tool_defs && !(p->tool_defs = cJSON_Duplicate(o->tool_defs, true)))
		goto nomem;
	p->o.tool_defs = NULL;
	p->st = S_START;
	p->hs = H_MSG;
	*out = p;
	return PT_OK;
nomem:
	pt_chat_parser_free(p);
	return pt_error_set(err, PT_E_NOMEM, "chat parser: out of memory");
}

void pt_chat_parser_free(pt_chat_parser *p)
{
	if (!p)
		return;
	if (p->names)
		for (size_t i = 0; i < p->o.n_tool_names; i++)
			pt_free(p->names[i]);
	pt_free(p->names);
	cJSON_Delete(p->tool_defs);
	chat_buf_free(&p->in);
	chat_buf_free(&p->ws);
	chat_buf_free(&p->hraw);
	chat_buf_free(&p->hname);
	chat_buf_free(&p->content);
	chat_buf_free(&p->reasoning);
	chat_calls_clear(&p->calls);
	pt_free(p);
}

static void run(pt_chat_parser *p, bool eof)
{
	if (p->o.format == PT_CHAT_HARMONY)
		chat_harmony_process(p, eof);
	else
		process(p, eof);
	/* Drop what was consumed; a block in progress stays at the front, so this moves bytes
	 * only once per decision, not once per feed. */
	if (p->off) {
		memmove(p->in.p, p->in.p + p->off, p->in.n - p->off);
		p->in.n -= p->off;
		p->off = 0;
	}
}

void pt_chat_parser_feed(pt_chat_parser *p, const char *text, size_t len, pt_chat_event_fn fn,
			 void *ctx)
{
	if (!p || p->st == S_DONE || len == 0)
		return;
	chat_buf_add(&p->in, text, len);
	if (p->in.bad) {
		p->nomem = true;
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	run(p, false);
	p->fn = NULL;
}

static char *take(struct chat_buf *b)
{
	char *s = b->p ? b->p : pt_strdup("");
	memset(b, 0, sizeof(*b));
	return s;
}

enum pt_status pt_chat_parser_finish(pt_chat_parser *p, pt_chat_event_fn fn, void *ctx,
				     struct pt_chat_result *out, struct pt_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!p)
		return pt_error_set(err, PT_E_INVALID, "chat parser: no parser");
	p->fn = fn;
	p->ctx = ctx;
	if (p->st != S_DONE && !p->in.bad)
		run(p, true);
	p->st = S_DONE;
	p->fn = NULL;
	if (p->nomem || p->in.bad || p->content.bad || p->reasoning.bad || p->ws.bad ||
	    p->hraw.bad || p->hname.bad)
		return pt_error_set(err, PT_E_NOMEM, "chat parser: out of memory");
	out->content_len = p->content.n;
	out->reasoning_len = p->reasoning.n;
	out->content = take(&p->content);
	out->reasoning = take(&p->reasoning);
	out->calls = p->calls.v;
	out->n_calls = p->calls.n;
	memset(&p->calls, 0, sizeof(p->calls));
	if (!out->content || !out->reasoning) {
		pt_chat_result_free(out);
		return pt_error_set(err, PT_E_NOMEM, "chat parser: out of memory");
	}
	return PT_OK;
}

void pt_chat_result_free(struct pt_chat_result *r)
{
	if (!r)
		return;
	pt_free(r->content);
	pt_free(r->reasoning);
	struct chat_calls c = { r->calls, r->n_calls, r->n_calls };
	chat_calls_clear(&c);
	memset(r, 0, sizeof(*r));
}
