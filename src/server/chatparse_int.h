/* chatparse_int.h - internals shared by chatparse.c (the streaming state machine),
 * chatcalls.c (a completed tool-call block's text -> calls) and chatharmony.c. */
#ifndef PT_SERVER_CHATPARSE_INT_H
#define PT_SERVER_CHATPARSE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/chatparse.h"
#include <stdint.h>

/* A growable byte string; on allocation failure `bad` is set and appends are dropped. */
struct chat_buf {
	char *p;
	size_t n, cap;
	bool bad;
};
void chat_buf_add(struct chat_buf *b, const char *s, size_t n);
void chat_buf_free(struct chat_buf *b);

struct chat_calls {
	struct pt_chat_tool_call *v; /* id NULL unless the model's text carried one */
	size_t n, cap;
};
void chat_calls_clear(struct chat_calls *c);

/* What a tool-call block's body looks like (the text between its markers). */
enum chat_block {
	BK_JSON_TAGGED, /* Hermes/Phi/generic tags: a call object or an array of them */
	BK_JSON_BARE,   /* the reply is a JSON value: Llama 3 {"name","parameters"}, generic */
	BK_PYTHON_TAG,  /* Llama 3 after <|python_tag|>: JSON call or NAME.call(k="v", ...) */
	BK_GEMMA,       /* call:NAME{key:<|"|>v<|"|>,...} */
	BK_MISTRAL,     /* [{"name","arguments","id"},...] or NAME[CALL_ID]ID[ARGS]{...} */
	BK_DEEPSEEK     /* <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> repeated */
};

/* Parses a complete block body into calls appended to out.  Returns 0 on success (at least
 * one call), 1 when malformed (out unchanged), -1 on out of memory. */
int chat_block_parse(enum chat_block k, const char *body, size_t len, const cJSON *tool_defs,
		     struct chat_calls *out);
/* Arguments text -> compact JSON object text (insignificant whitespace removed; a JSON string
 * holding an object is unwrapped).  NULL when not an object or out of memory (*nomem). */
char *chat_args_compact(const char *s, size_t n, bool *nomem);

/* JSON types an XML tool-call parameter's schema allows (chat_param_types): "type" (a name
 * or an array), "nullable", one level of anyOf/oneOf; CHAT_T_ANY when none of them says.
 * The parser and the forcing grammar share it, so a forced value parses back as forced:
 * with CHAT_T_STR the value is raw text, otherwise JSON. */
enum {
	CHAT_T_STR = 1, CHAT_T_NUM = 2, CHAT_T_BOOL = 4, CHAT_T_NULL = 8, CHAT_T_OBJ = 16,
	CHAT_T_ARR = 32, CHAT_T_ANY = 64
};
unsigned chat_param_types(const cJSON *schema);

bool chat_is_ws(char c);
/* A tool name: 1..256 bytes, none of them a control character (NUL included). */
bool chat_name_ok(const char *s, size_t n);

/* A tool-call marker of a family: the block runs from start to end (or to the end of the
 * JSON value after start when end is NULL and !to_eof, or to the end of the reply). */
struct chat_marker {
	const char *start;
	const char *end;
	enum chat_block kind;
	bool to_eof;
};

struct chat_family {
	const char *think_start, *think_end;
	struct chat_marker markers[2];
	size_t n_markers;
	bool bare_json; /* a reply starting with '{' is a JSON call block */
	bool short_ids; /* Mistral: generated ids are 9 alphanumerics (the template checks) */
};

enum chat_state { S_START, S_REASON, S_CONTENT, S_BLOCK, S_DONE };
enum harmony_state { H_MSG, H_HEADER, H_BODY };
enum harmony_kind { HK_CONTENT, HK_REASON, HK_TOOL };

struct pt_chat_parser {
	struct pt_chat_parser_opts o;
	char **names; /* copies of o.tool_names */
	cJSON *tool_defs; /* copy of o.tool_defs (XML parameter types), or NULL */
	const struct chat_family *fam;
	struct chat_buf in; /* held text: in.p[off..in.n) is not processed yet */
	size_t off;
	enum chat_state st;
	struct chat_buf ws;  /* trailing whitespace held back (content or reasoning) */
	bool reason_started; /* non-whitespace reasoning emitted */
	bool after_break;    /* just after </think> or a call: leading whitespace is dropped */
	bool content_seen;   /* non-whitespace content or a call came out */
	/* the open block (S_BLOCK); its text starts at in.p[off] */
	const struct chat_marker *bm;
	size_t scan;     /* bytes of the block scanned so far */
	bool json_on;    /* END_JSON: inside the value */
	size_t depth;
	bool jstr, jesc;
	/* Harmony */
	enum harmony_state hs;
	enum harmony_kind hk;
	struct chat_buf hraw;  /* the tool message's header text, for a malformed fallback */
	struct chat_buf hname;
	/* results */
	struct chat_buf content, reasoning;
	struct chat_calls calls;
	bool nomem;
	pt_chat_event_fn fn;
	void *ctx;
};

void chat_emit_text(struct pt_chat_parser *p, enum pt_chat_event_kind k, const char *s,
		    size_t n);
/* Moves the parsed calls (ids assigned where missing) into p and emits their events; a name
 * not among the offered tools makes the whole list malformed (returns false, list freed). */
bool chat_emit_calls(struct pt_chat_parser *p, struct chat_calls *calls);
/* Length of the longest proper prefix of marker that s[0..n) ends with. */
size_t chat_partial_suffix(const char *s, size_t n, const char *marker);
const char *chat_find(const char *s, size_t n, const char *needle);

/* gpt-oss Harmony (chatharmony.c): processes p->in from p->off. */
void chat_harmony_process(struct pt_chat_parser *p, bool eof);

#endif
