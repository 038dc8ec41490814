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

/* The one to evict: the oldest periodic checkpoint, else the oldest. */
static uint32_t victim(const struct pt_ckpt_set *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (!s->c[i].turn)
			return i;
	return 0;
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
	float *buf = pt_mallocn(s->floats, sizeof(float));
	if (!buf)
		return pt_error_set(err, PT_E_NOMEM, "checkpoints: cannot allocate %zu floats",
				    s->floats);
	memcpy(buf, state, s->floats * sizeof(float));
	if (s->n == s->max) {
		const uint32_t v = victim(s);
		drop(s, v);
		if (v < i)
			i--;
	}
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
