/* session.h - the generation loop over an engine: prompt ids in, streamed text out.
 *
 * A session is one generation slot (gen/slot.h) on the engine's sequence 0 - the sampler
 * and the stop-string/UTF-8 filter (textout) - and keeps nothing else between turns: the
 * engine's token history is the conversation state.
 * Each generate call reuses the KV rows of the longest common prefix of the new prompt and
 * the engine's history (pt_engine_rewind), evaluates only the changed suffix, then samples
 * until an end-of-generation token, a stop string, max-new, the context end or a cancel.
 *
 * Same options, same seed, same model -> same tokens on any thread count or budget: the
 * sampler is single-threaded and the engine's results do not depend on either. */
#ifndef PT_GEN_SESSION_H
#define PT_GEN_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen/engine.h"
#include "gen/sample.h"
#include "gen/slot.h"
#include "gen/textout.h"
#include "util/status.h"

struct pt_session_opts {
	struct pt_sampler_opts sampler;
	uint32_t max_new;            /* 0: until another stop condition */
	const char *const *stops;    /* n_stops stop strings (copied) */
	size_t n_stops;
	pt_textout_emit emit;        /* receives the reply text as it becomes safe to show */
	void *emit_ctx;
	volatile sig_atomic_t *cancel; /* polled once per token; NULL: never cancelled */
};

/* struct pt_gen_stats and enum pt_stop_reason: gen/slot.h. */

typedef struct pt_session pt_session;

enum pt_status pt_session_create(pt_engine *e, const struct pt_session_opts *o,
				 pt_session **out, struct pt_error *err);
void pt_session_destroy(pt_session *s); /* NULL-safe */

/* Generates a reply to the whole prompt (n >= 1 ids).  The reply's text goes to the emit
 * callback; its ids are available from pt_session_ids until the next call.  A stop for any
 * reason is PT_OK (see stats->stop); an engine failure is returned as is.  PT_E_LIMIT when
 * the prompt does not fit the context. */
enum pt_status pt_session_generate(pt_session *s, const int32_t *prompt, size_t n,
				   struct pt_gen_stats *stats, struct pt_error *err);

/* The ids sampled by the last generate call (n = stats.gen_tokens) and the reply text that
 * was emitted (without the stop string; NUL-terminated; len in *len). */
const int32_t *pt_session_ids(const pt_session *s);
const char *pt_session_text(const pt_session *s, size_t *len);

/* Drops the KV rows of the last reply (a cancelled turn): the engine goes back to where the
 * reply started. */
enum pt_status pt_session_drop_reply(pt_session *s, const struct pt_gen_stats *stats,
				     struct pt_error *err);

/* Length of the longest common prefix of a[0..na) and b[0..nb). */
size_t pt_session_common_prefix(const int32_t *a, size_t na, const uint32_t *b, size_t nb);

#endif
