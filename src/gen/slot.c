/* slot.c - step-wise generation over engine sequences: prefix reuse, chunked prefill,
 * batched decode steps, sampling, stop conditions and the reply text.  See slot.h. */
#include "gen/slot.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "gen/grammar.h"
#include "token/tok.h"
#include "util/alloc.h"

struct pt_gen_slot {
	pt_engine *e;
	uint32_t seq;
	const pt_tok *tok;
	uint32_t n_vocab, n_ctx;
	struct pt_gen_slot_opts o; /* stops not kept (textout holds its copies) */
	pt_sampler *sampler;
	pt_textout *out;
	float *logits;             /* [n_vocab]: the prefill's last row */
	enum pt_gen_slot_state state;
	struct pt_gen_stats st;
	struct pt_error err;
	atomic_bool cancel_req;
	double t0, t1;             /* start, first sample */
	int32_t *prompt;           /* the prompt being prefilled */
	size_t n_prompt, cap_prompt, done;
	int32_t pending;           /* DECODE: the id the next step evaluates */
	int32_t *ids;              /* the reply's ids */
	size_t n_ids, cap_ids;
	char *text;                /* the reply's emitted text */
	size_t n_text, cap_text;
	bool emit_failed;          /* the caller's emit asked to stop */
	char piece[256];
};

const char *pt_stop_reason_name(enum pt_stop_reason r)
{
	switch (r) {
	case PT_STOP_EOS: return "eos";
	case PT_STOP_STRING: return "stop";
	case PT_STOP_MAX_NEW: return "max-new";
	case PT_STOP_CONTEXT: return "context";
	case PT_STOP_CANCELLED: return "cancelled";
	case PT_STOP_NONE: break;
	}
	return "none";
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Grows *buf (elem bytes each) to hold need elements. */
static bool grow(void **buf, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *p = pt_realloc(*buf, n * elem);
	if (!p)
		return false;
	*buf = p;
	*cap = n;
	return true;
}

size_t pt_gen_common_prefix(const int32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	size_t i = 0;
	while (i < na && i < nb && a[i] >= 0 && (uint32_t)a[i] == b[i])
		i++;
	return i;
}

/* textout callback: keeps the reply text, then hands it to the caller. */
static bool on_text(void *ctx, const char *text, size_t len)
{
	pt_gen_slot *s = ctx;
	if (grow((void **)&s->text, &s->cap_text, s->n_text + len + 1, 1)) {
		memcpy(s->text + s->n_text, text, len);
		s->n_text += len;
		s->text[s->n_text] = 0;
	}
	if (s->o.emit && !s->o.emit(s->o.emit_ctx, text, len))
		s->emit_failed = true;
	return !s->emit_failed;
}

/* A new sampler and stop filter for o (the old ones are kept on failure). */
static enum pt_status apply_opts(pt_gen_slot *s, const struct pt_gen_slot_opts *o,
				 struct pt_error *err)
{
	pt_sampler *sm = NULL;
	pt_textout *out = NULL;
	enum pt_status st = pt_sampler_create(&o->sampler, s->n_vocab, &sm, err);
	if (st == PT_OK)
		st = pt_textout_create(o->stops, o->n_stops, on_text, s, &out, err);
	if (st != PT_OK) {
		pt_sampler_destroy(sm);
		return st;
	}
	pt_sampler_destroy(s->sampler);
	pt_textout_destroy(s->out);
	s->sampler = sm;
	s->out = out;
	s->o = *o;
	s->o.stops = NULL;
	s->o.n_stops = 0;
	s->o.ckpt_marks = NULL; /* the caller's: read at start only */
	s->o.n_ckpt_marks = 0;
	return PT_OK;
}

enum pt_status pt_gen_slot_create(pt_engine *e, uint32_t seq, const struct pt_gen_slot_opts *o,
				  pt_gen_slot **out, struct pt_error *err)
{
	*out = NULL;
	if (seq >= pt_engine_n_seq(e))
		return pt_error_set(err, PT_E_INVALID, "slot: sequence %u of %u", seq,
				    pt_engine_n_seq(e));
	pt_gen_slot *s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for a generation slot");
	s->e = e;
	s->seq = seq;
	s->tok = pt_engine_tok(e);
	s->n_vocab = pt_engine_n_vocab(e);
	s->n_ctx = pt_engine_n_ctx(e);
	atomic_init(&s->cancel_req, false);
	s->logits = pt_mallocn(s->n_vocab, sizeof *s->logits);
	enum pt_status st = s->logits ? PT_OK
				      : pt_error_set(err, PT_E_NOMEM, "out of memory for logits");
	if (st == PT_OK)
		st = apply_opts(s, o, err);
	if (st != PT_OK) {
		pt_gen_slot_destroy(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

void pt_gen_slot_destroy(pt_gen_slot *s)
{
	if (!s)
		return;
	pt_sampler_destroy(s->sampler);
	pt_textout_destroy(s->out);
	pt_free(s->logits);
	pt_free(s->prompt);
	pt_free(s->ids);
	pt_free(s->text);
	pt_free(s);
}

static enum pt_status check_prompt(const pt_gen_slot *s, const int32_t *prompt, size_t n,
				   struct pt_error *err)
{
	if (n == 0)
		return pt_error_set(err, PT_E_INVALID, "the prompt is empty");
	if (n > s->n_ctx)
		return pt_error_set(err, PT_E_LIMIT,
				    "prompt of %zu tokens does not fit the context of %u tokens "
				    "(raise --max-context)", n, s->n_ctx);
	for (size_t i = 0; i < n; i++)
		if (prompt[i] < 0 || (uint32_t)prompt[i] >= s->n_vocab)
			return pt_error_set(err, PT_E_INVALID, "prompt token %d out of range",
					    prompt[i]);
	return PT_OK;
}

/* The penalty window sees the prompt's tail, as llama.cpp's CLI accepts prompt tokens. */
static void prime_sampler(pt_gen_slot *s, const int32_t *prompt, size_t n)
{
	size_t w = s->o.sampler.repeat_last_n;
	pt_sampler_reset(s->sampler);
	for (size_t i = n > w ? n - w : 0; i < n; i++)
		pt_sampler_accept(s->sampler, prompt[i]);
}

enum pt_status pt_gen_slot_start(pt_gen_slot *s, const struct pt_gen_slot_opts *o,
				 const int32_t *prompt, size_t n, struct pt_error *err)
{
	const double t0 = now_s();
	enum pt_status rc = check_prompt(s, prompt, n, err);
	if (rc == PT_OK && !grow((void **)&s->prompt, &s->cap_prompt, n, sizeof *s->prompt))
		rc = pt_error_set(err, PT_E_NOMEM, "out of memory for the prompt");
	if (rc == PT_OK && o)
		rc = apply_opts(s, o, err);
	if (rc != PT_OK)
		return rc;
	const int64_t pos = pt_engine_seq_pos(s->e, s->seq);
	size_t keep = pt_gen_common_prefix(prompt, n, pt_engine_seq_tokens(s->e, s->seq),
					   pos > 0 ? (size_t)pos : 0);
	if (keep == n)
		keep = n - 1;
	/* recurrent state: checkpoints at the caller's marks as the prompt goes in */
	const uint32_t n_marks = o ? o->n_ckpt_marks : 0;
	rc = pt_engine_seq_set_marks(s->e, s->seq, o ? o->ckpt_marks : NULL, n_marks, err);
	int64_t from = (int64_t)keep;
	uint32_t replayed = 0;
	if (rc == PT_OK && (int64_t)keep != pos) {
		rc = pt_engine_seq_rewind_reuse(s->e, s->seq, (int64_t)keep, &from, err);
		replayed = pt_engine_seq_last_replay(s->e, s->seq);
	}
	/* without marks keep the reuse point too - the next prompt that edits this one's new
	 * part (a regenerated or edited last message) restores it instead of replaying (only
	 * when the state is there: a restored checkpoint short of it is already one) */
	if (rc == PT_OK && keep > 0 && n_marks == 0 && from == (int64_t)keep)
		rc = pt_engine_seq_checkpoint(s->e, s->seq, err);
	if (rc != PT_OK)
		return rc;
	memcpy(s->prompt, prompt, n * sizeof *prompt);
	s->n_prompt = n;
	s->done = (size_t)from; /* a restored checkpoint's shared tokens go in with the rest */
	s->n_ids = 0;
	s->n_text = 0;
	s->emit_failed = false;
	atomic_store(&s->cancel_req, false);
	pt_error_clear(&s->err);
	pt_textout_reset(s->out);
	prime_sampler(s, prompt, n);
	memset(&s->st, 0, sizeof s->st);
	s->st.prompt_tokens = (uint32_t)n;
	s->st.reused_tokens = (uint32_t)keep;
	s->st.replayed_tokens = replayed;
	s->st.prefill_tokens = (uint32_t)(n - (size_t)from);
	s->st.reply_pos = (int64_t)n;
	s->t0 = t0;
	s->t1 = 0;
	s->state = PT_SLOT_PREFILL;
	return PT_OK;
}

static bool cancelled(const pt_gen_slot *s)
{
	return s->emit_failed || (s->o.cancel && *s->o.cancel) || atomic_load(&s->cancel_req);
}

static void finish(pt_gen_slot *s, enum pt_stop_reason why)
{
	s->st.stop = why;
	s->st.decode_s = s->t1 > 0 ? now_s() - s->t1 : 0.0;
	if (why != PT_STOP_CANCELLED)
		pt_textout_finish(s->out);
	s->state = PT_SLOT_DONE;
	/* the end of a turn: a recurrent-state checkpoint for the next prompt's prefix (a cache:
	 * when it cannot be kept, the next rewind replays more) */
	struct pt_error ignore = { 0 };
	if (why != PT_STOP_CANCELLED)
		(void)pt_engine_seq_checkpoint(s->e, s->seq, &ignore);
}

static enum pt_status fail(pt_gen_slot *s, enum pt_status st, const struct pt_error *e)
{
	if (e != &s->err)
		s->err = *e;
	s->st.decode_s = s->t1 > 0 ? now_s() - s->t1 : 0.0;
	s->state = PT_SLOT_FAILED;
	return st;
}

/* One sampled id: record it, show its text.  Returns the stop reason it causes, if any. */
static enum pt_stop_reason take(pt_gen_slot *s, int32_t id, enum pt_status *rc)
{
	if (!grow((void **)&s->ids, &s->cap_ids, s->n_ids + 1, sizeof *s->ids)) {
		*rc = pt_error_set(&s->err, PT_E_NOMEM, "out of memory for generated ids");
		return PT_STOP_NONE;
	}
	s->ids[s->n_ids++] = id;
	pt_sampler_accept(s->sampler, id);
	if (pt_tok_is_eog(s->tok, id))
		return PT_STOP_EOS;
	size_t len = 0;
	char *buf = s->piece;
	*rc = pt_tok_piece(s->tok, id, false, buf, sizeof s->piece, &len, &s->err);
	if (*rc == PT_E_LIMIT) { /* a very long piece: render it whole */
		pt_error_clear(&s->err);
		char *big = pt_malloc(len);
		*rc = big ? pt_tok_piece(s->tok, id, false, big, len, &len, &s->err)
			  : pt_error_set(&s->err, PT_E_NOMEM, "out of memory for a token piece");
		bool stop = *rc == PT_OK && pt_textout_feed(s->out, big, len, NULL);
		pt_free(big);
		return stop ? PT_STOP_STRING : PT_STOP_NONE;
	}
	if (*rc == PT_OK && pt_textout_feed(s->out, buf, len, NULL))
		return PT_STOP_STRING;
	return PT_STOP_NONE;
}

/* The slot's logits are ready: sample, take, stop or wait for the next step. */
static enum pt_status sample_next(pt_gen_slot *s, const float *logits)
{
	if (s->t1 == 0)
		s->t1 = now_s();
	if (cancelled(s)) {
		finish(s, PT_STOP_CANCELLED);
		return PT_OK;
	}
	const int32_t id = s->o.sample  ? s->o.sample(s->o.sample_ctx, s->sampler, logits)
			   : s->o.grammar ? pt_sampler_sample_constrained(s->sampler, logits,
									  s->o.grammar)
					  : pt_sampler_sample(s->sampler, logits);
	if (id < 0 || (uint32_t)id >= s->n_vocab) {
		if (s->o.sample)
			pt_error_set(&s->err, PT_E_INVALID, "the token choice gave id %d", id);
		else if (s->o.grammar)
			pt_error_set(&s->err, PT_E_INVALID, "no token the grammar allows has a "
				     "finite logit");
		else
			pt_error_set(&s->err, PT_E_INVALID, "every logit is NaN or -inf");
		return fail(s, PT_E_INVALID, &s->err);
	}
	if (s->o.on_token && !s->o.on_token(s->o.token_ctx, id, logits)) {
		finish(s, PT_STOP_CANCELLED);
		return PT_OK;
	}
	enum pt_status rc = PT_OK;
	if (s->o.grammar && !s->o.sample &&
	    (rc = pt_grammar_state_accept(s->o.grammar, id, &s->err)) != PT_OK)
		return fail(s, rc, &s->err);
	const enum pt_stop_reason stop = take(s, id, &rc);
	s->st.gen_tokens = (uint32_t)s->n_ids;
	if (s->st.gen_tokens == 1)
		s->st.ttft_s = now_s() - s->t0;
	if (rc != PT_OK)
		return fail(s, rc, &s->err);
	if (stop != PT_STOP_NONE)
		finish(s, stop);
	else if (s->o.max_new && s->st.gen_tokens >= s->o.max_new)
		finish(s, PT_STOP_MAX_NEW);
	else if (pt_engine_seq_pos(s->e, s->seq) >= (int64_t)s->n_ctx)
		finish(s, PT_STOP_CONTEXT);
	else if (cancelled(s))
		finish(s, PT_STOP_CANCELLED);
	else {
		s->pending = id;
		s->state = PT_SLOT_DECODE;
	}
	return PT_OK;
}

/* Evaluates the next prompt chunk; the last one's logits give the first id. */
static enum pt_status prefill_step(pt_gen_slot *s)
{
	if (cancelled(s)) {
		finish(s, PT_STOP_CANCELLED);
		return PT_OK;
	}
	size_t c = s->n_prompt - s->done;
	/* pieces end at multiples of prefill_chunk: where they fall does not depend on where
	 * this prompt's evaluation started (a restored checkpoint or 0) */
	const size_t pc = s->o.prefill_chunk;
	if (pc && c > pc - s->done % pc)
		c = pc - s->done % pc;
	const double t = now_s();
	enum pt_status rc = pt_engine_seq_eval(s->e, s->seq, (const uint32_t *)s->prompt + s->done,
					       (uint32_t)c, s->logits, false, &s->err);
	s->st.prefill_s += now_s() - t;
	if (rc != PT_OK)
		return fail(s, rc, &s->err);
	s->done += c;
	if (s->done < s->n_prompt)
		return PT_OK;
	/* the prompt is in: checkpoint there too (a dropped or re-rendered reply rewinds to
	 * about here) */
	if ((rc = pt_engine_seq_checkpoint(s->e, s->seq, &s->err)) != PT_OK)
		return fail(s, rc, &s->err);
	return sample_next(s, s->logits);
}

static enum pt_status first_failure(enum pt_status rc, enum pt_status st, struct pt_error *err,
				    const struct pt_error *e)
{
	if (rc == PT_OK && st != PT_OK)
		*err = *e;
	return rc != PT_OK ? rc : st;
}

enum pt_status pt_gen_step(pt_engine *e, pt_gen_slot *const *slots, size_t n,
			   struct pt_error *err)
{
	uint32_t seqs[PT_ENGINE_MAX_SEQ], toks[PT_ENGINE_MAX_SEQ];
	pt_gen_slot *run[PT_ENGINE_MAX_SEQ];
	uint32_t nr = 0;
	enum pt_status rc = PT_OK;
	for (size_t i = 0; i < n; i++)
		if (slots[i]->state == PT_SLOT_PREFILL)
			rc = first_failure(rc, prefill_step(slots[i]), err, &slots[i]->err);
	for (size_t i = 0; i < n; i++) {
		pt_gen_slot *s = slots[i];
		if (s->state != PT_SLOT_DECODE)
			continue;
		if (cancelled(s)) {
			finish(s, PT_STOP_CANCELLED);
			continue;
		}
		if (nr == PT_ENGINE_MAX_SEQ || s->e != e) {
			pt_error_set(&s->err, PT_E_INVALID, "step: a slot of another engine, or more "
				     "than %u slots", PT_ENGINE_MAX_SEQ);
			rc = first_failure(rc, fail(s, PT_E_INVALID, &s->err), err, &s->err);
			continue;
		}
		seqs[nr] = s->seq;
		toks[nr] = (uint32_t)s->pending;
		run[nr++] = s;
	}
	if (nr == 0)
		return rc;
	float *bl = NULL;
	struct pt_error be = { 0 };
	enum pt_status st;
	if (nr == 1) { /* the one-sequence call: what pt_session always did */
		bl = run[0]->logits;
		st = pt_engine_seq_eval(e, seqs[0], toks, 1, bl, false, &be);
	} else {
		st = pt_engine_decode_batch(e, seqs, toks, nr, NULL, &be);
		bl = pt_engine_batch_logits(e);
	}
	if (st != PT_OK) {
		for (uint32_t i = 0; i < nr; i++)
			fail(run[i], st, &be);
		return first_failure(rc, st, err, &be);
	}
	const size_t nv = pt_engine_n_vocab(e);
	for (uint32_t i = 0; i < nr; i++)
		rc = first_failure(rc, sample_next(run[i], bl + i * nv), err, &run[i]->err);
	return rc;
}

void pt_gen_slot_cancel(pt_gen_slot *s)
{
	atomic_store(&s->cancel_req, true);
}

enum pt_gen_slot_state pt_gen_slot_state(const pt_gen_slot *s)
{
	return s->state;
}

bool pt_gen_slot_busy(const pt_gen_slot *s)
{
	return s->state == PT_SLOT_PREFILL || s->state == PT_SLOT_DECODE;
}

uint32_t pt_gen_slot_seq(const pt_gen_slot *s)
{
	return s->seq;
}

pt_engine *pt_gen_slot_engine(const pt_gen_slot *s)
{
	return s->e;
}

const struct pt_gen_stats *pt_gen_slot_stats(const pt_gen_slot *s)
{
	return &s->st;
}

size_t pt_gen_slot_prefill_left(const pt_gen_slot *s)
{
	return s->state == PT_SLOT_PREFILL ? s->n_prompt - s->done : 0;
}

const int32_t *pt_gen_slot_ids(const pt_gen_slot *s)
{
	return s->ids;
}

const char *pt_gen_slot_text(const pt_gen_slot *s, size_t *len)
{
	*len = s->n_text;
	return s->n_text ? s->text : "";
}

const struct pt_error *pt_gen_slot_error(const pt_gen_slot *s)
{
	return &s->err;
}

pt_sampler *pt_gen_slot_sampler(pt_gen_slot *s)
{
	return s->sampler;
}
