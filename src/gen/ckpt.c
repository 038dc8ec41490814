/* ckpt.c - recurrent-state checkpoints (ckpt.h). */
#include "gen/ckpt.h"

#include <string.h>

#include "util/alloc.h"

enum pt_status pt_ckpt_init(struct pt_ckpt_set *s, uint32_t max, size_t floats,
			    struct pt_error *err)
{
	memset(s, 0, sizeof *s);
	s->max = max;
	s->floats = floats;
	if (max == 0)
		return PT_OK;
	s->c = pt_calloc(max, sizeof *s->c);
	if (!s->c)
		return pt_error_set(err, PT_E_NOMEM, "checkpoints: cannot allocate the table");
	return PT_OK;
}

void pt_ckpt_fini(struct pt_ckpt_set *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n; i++)
		pt_free(s->c[i].state);
	pt_free(s->c);
	memset(s, 0, sizeof *s);
}

static void drop(struct pt_ckpt_set *s, uint32_t i)
{
	pt_free(s->c[i].state);
	memmove(&s->c[i], &s->c[i + 1], (s->n - i - 1) * sizeof *s->c);
	s->n--;
}

/* Eviction when a set is full: the newest position always stays; among the others the one
 * whose removal leaves the smallest hole goes (hole = distance between its neighbours, the
 * zero state at 0 counting as one), a periodic copy's hole counted half so turn and
 * message-boundary copies outlive periodic ones; ties go to the older.  So the copies
 * spread over the history, denser towards the newest.  Index i is over the set with pos
 * inserted at ins (n + 1 entries); returns the index to drop in that combined order. */
static int64_t pos_at(const struct pt_ckpt_set *s, uint32_t i, uint32_t ins, int64_t pos)
{
	return i == ins ? pos : s->c[i < ins ? i : i - 1].pos;
}

static uint32_t victim(const struct pt_ckpt_set *s, uint32_t ins, int64_t pos, bool turn)
{
	const uint32_t n = s->n + 1;
	uint32_t best = 0;
	int64_t best_cost = INT64_MAX;
	for (uint32_t i = 0; i + 1 < n; i++) {
		const int64_t prev = i ? pos_at(s, i - 1, ins, pos) : 0;
		const bool t = i == ins ? turn : s->c[i < ins ? i : i - 1].turn;
		int64_t cost = pos_at(s, i + 1, ins, pos) - prev;
		cost = t ? cost * 2 : cost;
		if (cost < best_cost) {
			best_cost = cost;
			best = i;
		}
	}
	return best;
}

enum pt_status pt_ckpt_put(struct pt_ckpt_set *s, int64_t pos, bool turn, const float *state,
			   struct pt_error *err)
{
	if (pos <= 0 || s->max == 0 || s->floats == 0)
		return PT_OK;
	uint32_t i = 0;
	while (i < s->n && s->c[i].pos < pos)
		i++;
	if (i < s->n && s->c[i].pos == pos) {
		memcpy(s->c[i].state, state, s->floats * sizeof(float));
		s->c[i].turn = s->c[i].turn || turn;
		s->saved++;
		return PT_OK;
	}
	float *buf = NULL;
	if (s->n == s->max) { /* evict first and reuse its buffer: never max + 1 states */
		const uint32_t v = victim(s, i, pos, turn);
		if (v == i)
			return PT_OK; /* the new one would be the first to go */
		const uint32_t vi = v < i ? v : v - 1;
		buf = s->c[vi].state;
		memmove(&s->c[vi], &s->c[vi + 1], (s->n - vi - 1) * sizeof *s->c);
		s->n--;
		if (vi < i)
			i--;
	} else if (!(buf = pt_mallocn(s->floats, sizeof(float)))) {
		return pt_error_set(err, PT_E_NOMEM, "checkpoints: cannot allocate %zu floats",
				    s->floats);
	}
	memcpy(buf, state, s->floats * sizeof(float));
	memmove(&s->c[i + 1], &s->c[i], (s->n - i) * sizeof *s->c);
	s->c[i] = (struct pt_ckpt){ pos, turn, buf };
	s->n++;
	s->saved++;
	return PT_OK;
}

const struct pt_ckpt *pt_ckpt_find(const struct pt_ckpt_set *s, int64_t pos)
{
	const struct pt_ckpt *best = NULL;
	for (uint32_t i = 0; i < s->n && s->c[i].pos <= pos; i++)
		best = &s->c[i];
	return best;
}

void pt_ckpt_drop_after(struct pt_ckpt_set *s, int64_t pos)
{
	while (s->n > 0 && s->c[s->n - 1].pos > pos)
		drop(s, s->n - 1);
}

uint64_t pt_ckpt_bytes(const struct pt_ckpt_set *s)
{
	return (uint64_t)s->n * s->floats * sizeof(float);
}
