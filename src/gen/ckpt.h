/* ckpt.h - recurrent-state checkpoints of one sequence (issue 18).
 *
 * A linear-attention layer's state (conv window + delta-rule matrices) summarises the whole
 * prefix, so it cannot be cut back like a KV cache.  The engine keeps copies of it at chosen
 * positions - every N tokens, at message boundaries, at the end of each turn - and a rewind
 * to pos restores the nearest copy at or before pos and replays only the tokens after it.
 * A set holds at most max copies (bounded and counted by the memory plan; the victim is
 * chosen before the new copy is made, so never max + 1).  When full, the newest position
 * stays and of the others the one whose removal leaves the smallest hole between its
 * neighbours goes (the zero state at 0 counts as a neighbour; a periodic copy's hole counts
 * half, so turn and boundary copies outlive periodic ones; ties: the older), which spreads
 * the copies over the history.  A new copy that would itself be that victim is not kept.
 * Copies past a rewind target belong to a history that is gone and are dropped. */
#ifndef PT_GEN_CKPT_H
#define PT_GEN_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

struct pt_ckpt {
	int64_t pos;   /* the state after tokens [0, pos) */
	bool turn;     /* taken at a turn end (kept longer than periodic ones) */
	float *state;  /* floats */
};

struct pt_ckpt_set {
	struct pt_ckpt *c; /* [max], the first n in use, ascending pos */
	uint32_t n, max;
	size_t floats;
	uint64_t saved, restored; /* counters */
};

enum pt_status pt_ckpt_init(struct pt_ckpt_set *s, uint32_t max, size_t floats,
			    struct pt_error *err);
void pt_ckpt_fini(struct pt_ckpt_set *s); /* NULL-safe, idempotent */

/* Copies state as the checkpoint at pos (replacing one at the same pos; evicting when
 * full, see above).  pos 0 is never stored (the zero state). */
enum pt_status pt_ckpt_put(struct pt_ckpt_set *s, int64_t pos, bool turn, const float *state,
			   struct pt_error *err);
/* The checkpoint with the largest position <= pos, or NULL. */
const struct pt_ckpt *pt_ckpt_find(const struct pt_ckpt_set *s, int64_t pos);
/* Drops every checkpoint past pos. */
void pt_ckpt_drop_after(struct pt_ckpt_set *s, int64_t pos);
/* Bytes the live checkpoints hold. */
uint64_t pt_ckpt_bytes(const struct pt_ckpt_set *s);

#endif
