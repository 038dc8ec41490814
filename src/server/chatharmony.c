/* chatharmony.c - gpt-oss's Harmony replies: a sequence of messages
 *     [<|start|>assistant][ to=functions.NAME]<|channel|>CHANNEL[ to=functions.NAME]
 *     [ <|constrain|>json]<|message|>BODY (<|end|> | <|call|> | <|return|> | end of reply)
 * (the prompt ends with "<|start|>assistant", so the first message starts at its header).
 * Channel "analysis" is reasoning (content when reasoning is not split off); a message to a
 * recipient is a tool call whose body is the JSON arguments; everything else is content.
 * Headers are not shown.  Text that does not start like a header is plain content. */
#include <string.h>

#include "server/chatparse_int.h"
#include "util/alloc.h"

#define MAX_HEADER 1024
#define MAX_BODY (4u << 20)

static const char *const TERMS[] = { "<|end|>", "<|call|>", "<|return|>", "<|start|>" };
static const char *const STARTS[] = { "<|start|>", "<|channel|>", " to=", "to=" };

/* The earliest terminator in s[0..n): its offset, and which (index into TERMS). */
static const char *find_term(const char *s, size_t n, size_t *which)
{
	const char *best = NULL;
	for (size_t i = 0; i < sizeof(TERMS) / sizeof(TERMS[0]); i++) {
		const char *q = chat_find(s, n, TERMS[i]);
		if (q && (!best || q < best)) {
			best = q;
			*which = i;
		}
	}
	return best;
}

/* The word after key in the header (up to whitespace or '<'). */
static void header_word(const char *h, size_t n, const char *key, const char **w, size_t *wl)
{
	*w = NULL;
	*wl = 0;
	const char *k = chat_find(h, n, key);
	if (!k)
		return;
	const char *s = k + strlen(key), *e = h + n;
	const char *q = s;
	while (q < e && !chat_is_ws(*q) && *q != '<')
		q++;
	*w = s;
	*wl = (size_t)(q - s);
}

static void header_done(struct pt_chat_parser *p, const char *h, size_t n)
{
	const char *to, *ch;
	size_t tol, chl;
	header_word(h, n, "to=", &to, &tol);
	header_word(h, n, "<|channel|>", &ch, &chl);
	p->hname.n = 0;
	if (to && tol && p->o.tools) {
		if (tol > 10 && memcmp(to, "functions.", 10) == 0) {
			to += 10;
			tol -= 10;
		}
		chat_buf_add(&p->hname, to, tol);
		p->hk = HK_TOOL;
	} else if (ch && chl == 8 && memcmp(ch, "analysis", 8) == 0 && p->o.reasoning) {
		p->hk = HK_REASON;
	} else {
		p->hk = HK_CONTENT;
	}
}

static void tool_done(struct pt_chat_parser *p, const char *body, size_t len, size_t raw_len)
{
	bool nomem = false;
	char *args = chat_name_ok(p->hname.p, p->hname.n) ? chat_args_compact(body, len, &nomem)
							    : NULL;
	if (nomem)
		p->nomem = true;
	if (args) {
		struct chat_calls c = { 0 };
		c.v = pt_calloc(1, sizeof(*c.v));
		char *name = pt_strndup(p->hname.p, p->hname.n);
		if (!c.v || !name) {
			pt_free(c.v);
			pt_free(name);
			pt_free(args);
			p->nomem = true;
			return;
		}
		c.v[0].name = name;
		c.v[0].arguments = args;
		c.n = c.cap = 1;
		if (chat_emit_calls(p, &c))
			return;
	}
	chat_emit_text(p, PT_CHAT_CONTENT, p->hraw.p, p->hraw.n);
	chat_emit_text(p, PT_CHAT_CONTENT, body, raw_len);
}

void chat_harmony_process(struct pt_chat_parser *p, bool eof)
{
	for (;;) {
		const char *s = p->in.p ? p->in.p + p->off : "";
		size_t n = p->in.n - p->off;
		switch (p->hs) {
		case H_MSG: {
			p->hraw.n = 0;
			if (n == 0) {
				if (eof)
					p->st = S_DONE;
				return;
			}
			bool header = false, maybe = false;
			for (size_t i = 0; i < sizeof(STARTS) / sizeof(STARTS[0]); i++) {
				size_t m = strlen(STARTS[i]), have = n < m ? n : m;
				if (memcmp(s, STARTS[i], have) == 0) {
					if (have == m)
						header = true;
					else
						maybe = true;
				}
			}
			if (!header && maybe && !eof)
				return;
			if (header) {
				if (n >= 9 && memcmp(s, "<|start|>", 9) == 0) {
					chat_buf_add(&p->hraw, s, 9);
					p->off += 9;
				}
				p->hs = H_HEADER;
			} else {
				p->hk = HK_CONTENT;
				p->hs = H_BODY;
			}
			break;
		}
		case H_HEADER: {
			size_t lim = n < MAX_HEADER ? n : MAX_HEADER;
			const char *m = chat_find(s, lim, "<|message|>");
			if (m) {
				size_t hl = (size_t)(m - s) + 11;
				header_done(p, s, (size_t)(m - s));
				chat_buf_add(&p->hraw, s, hl);
				p->off += hl;
				p->scan = 0;
				p->hs = H_BODY;
				break;
			}
			if (n < MAX_HEADER && !eof)
				return;
			/* Not a header after all: its text is content. */
			chat_emit_text(p, PT_CHAT_CONTENT, p->hraw.p, p->hraw.n);
			chat_emit_text(p, PT_CHAT_CONTENT, s, lim);
			p->off += lim;
			p->hk = HK_CONTENT;
			p->hs = H_BODY;
			break;
		}
		case H_BODY: {
			size_t which = 0;
			size_t lim = p->hk == HK_TOOL && n > MAX_BODY ? MAX_BODY : n;
			/* A held tool body is searched only where it grew (terminators < 11 bytes). */
			size_t from = p->hk == HK_TOOL && p->scan > 10 ? p->scan - 10 : 0;
			const char *t = find_term(s + from, lim - from, &which);
			if (p->hk == HK_TOOL)
				p->scan = lim;
			enum pt_chat_event_kind k =
				p->hk == HK_REASON ? PT_CHAT_REASONING : PT_CHAT_CONTENT;
			if (t) {
				size_t len = (size_t)(t - s);
				size_t tl = which == 3 ? 0 : strlen(TERMS[which]);
				if (p->hk == HK_TOOL)
					tool_done(p, s, len, len + tl);
				else
					chat_emit_text(p, k, s, len);
				p->off += len + tl;
				p->hs = H_MSG;
				break;
			}
			if (p->hk == HK_TOOL) {
				if (eof) {
					tool_done(p, s, n, n);
				} else if (n >= MAX_BODY) {
					chat_emit_text(p, PT_CHAT_CONTENT, p->hraw.p, p->hraw.n);
					p->hk = HK_CONTENT;
					break;
				} else {
					return;
				}
				p->off += n;
				p->st = S_DONE;
				return;
			}
			size_t hold = 0;
			if (!eof)
				for (size_t i = 0; i < sizeof(TERMS) / sizeof(TERMS[0]); i++) {
					size_t h = chat_partial_suffix(s, n, TERMS[i]);
					if (h > hold)
						hold = h;
				}
			chat_emit_text(p, k, s, n - hold);
			p->off += n - hold;
			if (eof)
				p->st = S_DONE;
			return;
		}
		}
	}
}
