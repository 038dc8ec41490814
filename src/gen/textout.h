/* textout.h - turns the bytes of generated token pieces into text that is safe to show:
 * whole UTF-8 characters only, and never a fragment that later turns out to be part of a
 * stop string.  Stop strings are matched on the raw byte stream, so one split across tokens
 * is found; the stop string itself is never emitted.
 *
 * Bytes that can never form valid UTF-8 are emitted as U+FFFD, one per maximal invalid
 * subpart (the Unicode "substitution of maximal subparts" practice). */
#ifndef PT_GEN_TEXTOUT_H
#define PT_GEN_TEXTOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/status.h"

typedef struct pt_textout pt_textout;

/* Called with ready text (never NULL-terminated); returns false to ask for cancellation. */
typedef bool (*pt_textout_emit)(void *ctx, const char *text, size_t len);

/* stops: n_stops strings (copied; empty strings are rejected). */
enum pt_status pt_textout_create(const char *const *stops, size_t n_stops, pt_textout_emit emit,
				 void *ctx, pt_textout **out, struct pt_error *err);
void pt_textout_destroy(pt_textout *t);
/* Feeds bytes; emits what is safe.  Returns true once a stop string has matched (everything
 * before it has been emitted; further input is ignored).  *stop_index (may be NULL) gets the
 * matching stop string's index. */
bool pt_textout_feed(pt_textout *t, const char *bytes, size_t len, size_t *stop_index);
/* End of generation: emits whatever is held (an incomplete UTF-8 tail becomes U+FFFD). */
void pt_textout_finish(pt_textout *t);
/* Forgets held bytes and the stopped state (a new reply). */
void pt_textout_reset(pt_textout *t);
bool pt_textout_stopped(const pt_textout *t);

/* Length of the longest prefix of s[0..len) that ends on a character boundary, given that a
 * trailing incomplete-but-valid sequence is held back.  Exposed for tests. */
size_t pt_utf8_complete_prefix(const unsigned char *s, size_t len);

#endif
