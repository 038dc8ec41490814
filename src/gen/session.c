/* session.c - the generation loop of `particle run`: one slot (gen/slot.h) on the engine's
 * sequence 0, stepped until it stops.  See session.h. */
#include "gen/session.h"

#include <string.h>

#include "util/alloc.h"

struct pt_session {
	pt_gen_slot *slot;
};

enum pt_status pt_session_create(pt_engine *e, const struct pt_session_opts *o,
				 pt_session **out, struct pt_error *err)
{
	*out = NULL;
	pt_session *s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for the session");
	const struct pt_gen_slot_opts so = { .sampler = o->sampler, .max_new = o->max_new,
					     .stops = o->stops, .n_stops = o->n_stops,
					     .emit = o->emit, .emit_ctx = o->emit_ctx,
					     .cancel = o->cancel };
	enum pt_status st = pt_gen_slot_create(e, 0, &so, &s->slot, err);
	if (st != PT_OK) {
		pt_free(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

void pt_session_destroy(pt_session *s)
{
	if (!s)
		return;
	pt_gen_slot_destroy(s->slot);
	pt_free(s);
}

size_t pt_session_common_prefix(const int32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	return pt_gen_common_prefix(a, na, b, nb);
}

enum pt_status pt_session_generate(pt_session *s, const int32_t *prompt, size_t n,
				   struct pt_gen_stats *st, struct pt_error *err)
{
	memset(st, 0, sizeof *st);
	enum pt_status rc = pt_gen_slot_start(s->slot, NULL, prompt, n, err);
	if (rc != PT_OK)
		return rc;
	while (rc == PT_OK && pt_gen_slot_busy(s->slot))
		rc = pt_gen_step(pt_gen_slot_engine(s->slot), &s->slot, 1, err);
	*st = *pt_gen_slot_stats(s->slot);
	return rc;
}

const int32_t *pt_session_ids(const pt_session *s)
{
	return pt_gen_slot_ids(s->slot);
}

const char *pt_session_text(const pt_session *s, size_t *len)
{
	return pt_gen_slot_text(s->slot, len);
}

enum pt_status pt_session_drop_reply(pt_session *s, const struct pt_gen_stats *stats,
				     struct pt_error *err)
{
	pt_engine *e = pt_gen_slot_engine(s->slot);
	int64_t pos = pt_engine_pos(e);
	if (stats->reply_pos <= 0 || pos <= stats->reply_pos)
		return PT_OK;
	return pt_engine_rewind(e, stats->reply_pos, err);
}
