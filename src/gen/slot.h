/* slot.h - step-wise generation: a slot is one engine sequence plus everything one reply
 * needs (sampler, stop-string/UTF-8 filter, max-new, an optional constraint hook, cancel),
 * and pt_gen_step advances any number of slots together: their pending prompt tokens, then
 * ONE decode pass for every slot that is generating (pt_engine_decode_batch), after which
 * each slot samples, emits its text and checks its stops.  `particle serve` drives its
 * --parallel slots this way; pt_session (`particle run`) is a single slot.
 *
 * Same options, seed and prompt -> same tokens whether a slot runs alone or batched with
 * others (a batch row is byte-identical to that token evaluated alone), on any thread count
 * or budget.  An engine and its slots are driven from one thread; only pt_gen_slot_cancel
 * may be called from another. */
#ifndef PT_GEN_SLOT_H
#define PT_GEN_SLOT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen/engine.h"
#include "gen/sample.h"
#include "gen/textout.h"
#include "util/status.h"

enum pt_stop_reason {
	PT_STOP_NONE = 0,
	PT_STOP_EOS,       /* the model's end-of-generation token */
	PT_STOP_STRING,    /* a --stop string matched */
	PT_STOP_MAX_NEW,   /* max_new tokens generated */
	PT_STOP_CONTEXT,   /* the KV cache is full */
	PT_STOP_CANCELLED, /* *cancel became non-zero, pt_gen_slot_cancel, or a callback said so */
};

/* "eos", "stop", "max-new", "context", "cancelled" ("none" before any generation). */
const char *pt_stop_reason_name(enum pt_stop_reason r);

/* What one reply did.  Times in seconds. */
struct pt_gen_stats {
	uint32_t prompt_tokens;   /* ids of the prompt */
	uint32_t reused_tokens;   /* KV rows kept from the sequence's history */
	uint32_t replayed_tokens; /* of those, evaluated again (a recurrent state restored from a
				     checkpoint before them, or a sliding ring replayed) */
	uint32_t prefill_tokens;  /* prompt ids evaluated now */
	double prefill_s;         /* evaluating them */
	double ttft_s;            /* start -> first token's text handed on */
	uint32_t gen_tokens;      /* sampled ids, the end-of-generation token included */
	double decode_s;          /* first sample -> last sample */
	enum pt_stop_reason stop;
	int64_t reply_pos;        /* sequence position where the reply started */
};

struct pt_gen_slot_opts {
	struct pt_sampler_opts sampler;
	uint32_t max_new;            /* 0: until another stop condition */
	const char *const *stops;    /* n_stops stop strings (copied) */
	size_t n_stops;
	pt_textout_emit emit;        /* receives the reply text as it becomes safe to show; false
					cancels */
	void *emit_ctx;
	volatile sig_atomic_t *cancel; /* polled before each token; NULL: never */
	uint32_t prefill_chunk;      /* prompt ids evaluated per pt_gen_step (the other slots
					wait that long for their next token), cut at multiples
					of it; 0: all at once */
	/* Recurrent state (pt_engine_seq_set_marks): prompt positions worth a checkpoint, e.g.
	 * its message boundaries (ascending, read at pt_gen_slot_start only).  When given, the
	 * prompt is evaluated from the restored checkpoint on (a fresh run's pieces) and no
	 * extra checkpoint is taken at the reuse point. */
	const int64_t *ckpt_marks;
	uint32_t n_ckpt_marks;
	/* Optional token choice (constrained decoding): picks the id from the raw logits
	 * [n_vocab] with the slot's sampler, e.g. pt_sampler_sample_constrained(s, logits,
	 * grammar_state).  NULL: pt_sampler_sample.  A result outside the vocabulary fails the
	 * slot (PT_E_INVALID). */
	int32_t (*sample)(void *ctx, pt_sampler *s, const float *logits);
	void *sample_ctx;
	/* Optional constraint (gen/grammar.h; used when sample is NULL): ids are chosen by
	 * pt_sampler_sample_constrained and accepted into the state as they are taken; no
	 * allowed id with a finite logit fails the slot.  The state belongs to the caller (one
	 * per reply, fresh at start). */
	struct pt_grammar_state *grammar;
	/* Optional: told every sampled id with its raw logits before the id's text is emitted
	 * (logprobs, a grammar's accept); false cancels (the id is not taken). */
	bool (*on_token)(void *ctx, int32_t id, const float *logits);
	void *token_ctx;
};

enum pt_gen_slot_state {
	PT_SLOT_IDLE = 0, /* never started */
	PT_SLOT_PREFILL,  /* prompt ids left to evaluate */
	PT_SLOT_DECODE,   /* generating: the next step evaluates its last id */
	PT_SLOT_DONE,     /* stopped: stats.stop says why */
	PT_SLOT_FAILED,   /* an engine or sampler error: pt_gen_slot_error */
};

typedef struct pt_gen_slot pt_gen_slot;

/* A slot on engine sequence seq (< pt_engine_n_seq) with default options o (copied). */
enum pt_status pt_gen_slot_create(pt_engine *e, uint32_t seq, const struct pt_gen_slot_opts *o,
				  pt_gen_slot **out, struct pt_error *err);
void pt_gen_slot_destroy(pt_gen_slot *s); /* NULL-safe */

/* Starts a reply to the whole prompt (n >= 1 ids): o replaces the options (a fresh sampler
 * seeded from o->sampler.seed, new stops), NULL keeps them and the sampler's random stream
 * (a conversation's next turn).  Keeps the longest common prefix of the prompt and the
 * sequence's history (at most n - 1 ids: the last one's logits start the reply), rewinding
 * the sequence to it, and leaves the rest to pt_gen_step.  PT_E_LIMIT when the prompt does
 * not fit the context, PT_E_INVALID for an empty prompt or an id outside the vocabulary
 * (the slot is then unchanged). */
enum pt_status pt_gen_slot_start(pt_gen_slot *s, const struct pt_gen_slot_opts *o,
				 const int32_t *prompt, size_t n, struct pt_error *err);

/* One scheduler step over slots[0..n) (distinct sequences of e; slots in any state): each
 * PREFILL slot evaluates up to prefill_chunk prompt ids (when its prompt is done it samples
 * its first id), then every DECODE slot's last id is evaluated in ONE pass
 * (pt_engine_decode_batch; a lone slot uses pt_engine_seq_eval) and each samples its next
 * id, emits text and checks stops.  A failing slot becomes FAILED (the others go on); the
 * first failure is also returned. */
enum pt_status pt_gen_step(pt_engine *e, pt_gen_slot *const *slots, size_t n,
			   struct pt_error *err);

/* Asks the slot to stop before its next token (any thread). */
void pt_gen_slot_cancel(pt_gen_slot *s);

enum pt_gen_slot_state pt_gen_slot_state(const pt_gen_slot *s);
bool pt_gen_slot_busy(const pt_gen_slot *s); /* PREFILL or DECODE */
uint32_t pt_gen_slot_seq(const pt_gen_slot *s);
pt_engine *pt_gen_slot_engine(const pt_gen_slot *s);
const struct pt_gen_stats *pt_gen_slot_stats(const pt_gen_slot *s);
/* Prompt ids still to evaluate (prefill progress). */
size_t pt_gen_slot_prefill_left(const pt_gen_slot *s);
/* The reply's ids so far (n = stats.gen_tokens) and its emitted text (without a stop
 * string; NUL-terminated, length in *len); valid until the next start. */
const int32_t *pt_gen_slot_ids(const pt_gen_slot *s);
const char *pt_gen_slot_text(const pt_gen_slot *s, size_t *len);
/* The failure of a FAILED slot. */
const struct pt_error *pt_gen_slot_error(const pt_gen_slot *s);
pt_sampler *pt_gen_slot_sampler(pt_gen_slot *s);

/* Length of the longest common prefix of a[0..na) and b[0..nb) (negative a[i] never match). */
size_t pt_gen_common_prefix(const int32_t *a, size_t na, const uint32_t *b, size_t nb);

#endif
