/* session.c - the generation loop: prefix reuse, prefill of the changed suffix, sampling,
 * stop conditions and the reply text.  See session.h. */
#include "gen/session.h"

#include <string.h>
#include <time.h>

#include "token/tok.h"
#include "util/alloc.h"

struct pt_session {
	pt_engine *e;
	const pt_tok *tok;
	pt_sampler *sampler;
	pt_textout *out;
	struct pt_session_opts o;
	uint32_t n_vocab;
	float *logits;
	int32_t *ids;       /* the last reply's ids */
	size_t n_ids, cap_ids;
	char *text;         /* the last reply's emitted text */
	size_t n_text, cap_text;
	bool emit_failed;   /* the caller's emit asked to stop (e.g. stdout closed) */
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

/* textout callback: keeps the reply text, then hands it to the caller. */
static bool on_text(void *ctx, const char *text, size_t len)
{
	pt_session *s = ctx;
	if (grow((void **)&s->text, &s->cap_text, s->n_text + len + 1, 1)) {
		memcpy(s->text + s->n_text, text, len);
		s->n_text += len;
		s->text[s->n_text] = 0;
	}
	if (s->o.emit && !s->o.emit(s->o.emit_ctx, text, len))
		s->emit_failed = true;
	return !s->emit_failed;
}

enum pt_status pt_session_create(pt_engine *e, const struct pt_session_opts *o,
				 pt_session **out, struct pt_error *err)
{
	*out = NULL;
	pt_session *s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for the session");
	s->e = e;
	s->tok = pt_engine_tok(e);
	s->o = *o;
	s->o.stops = NULL;
	s->n_vocab = pt_engine_n_vocab(e);
	s->logits = pt_mallocn(s->n_vocab, sizeof *s->logits);
	enum pt_status st = s->logits ? PT_OK
				      : pt_error_set(err, PT_E_NOMEM, "out of memory for logits");
	if (st == PT_OK)
		st = pt_sampler_create(&o->sampler, s->n_vocab, &s->sampler, err);
	if (st == PT_OK)
		st = pt_textout_create(o->stops, o->n_stops, on_text, s, &s->out, err);
	if (st != PT_OK) {
		pt_session_destroy(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

void pt_session_destroy(pt_session *s)
{
	if (!s)
		return;
	pt_sampler_destroy(s->sampler);
	pt_textout_destroy(s->out);
	pt_free(s->logits);
	pt_free(s->ids);
	pt_free(s->text);
	pt_free(s);
}

size_t pt_session_common_prefix(const int32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	size_t i = 0;
	while (i < na && i < nb && a[i] >= 0 && (uint32_t)a[i] == b[i])
		i++;
	return i;
}

/* Keeps the common prefix of the engine's history and evaluates the rest of the prompt;
 * at least the last prompt id is evaluated, since its logits start the reply. */
static enum pt_status prefill(pt_session *s, const int32_t *prompt, size_t n,
			      struct pt_gen_stats *st, struct pt_error *err)
{
	uint32_t n_ctx = pt_engine_n_ctx(s->e);
	if (n == 0)
		return pt_error_set(err, PT_E_INVALID, "the prompt is empty");
	if (n > n_ctx)
		return pt_error_set(err, PT_E_LIMIT,
				    "prompt of %zu tokens does not fit the context of %u tokens "
				    "(raise --max-context)", n, n_ctx);
	for (size_t i = 0; i < n; i++)
		if (prompt[i] < 0 || (uint32_t)prompt[i] >= s->n_vocab)
			return pt_error_set(err, PT_E_INVALID, "prompt token %d out of range",
					    prompt[i]);
	int64_t pos = pt_engine_pos(s->e);
	size_t keep = pt_session_common_prefix(prompt, n, pt_engine_tokens(s->e),
					       pos > 0 ? (size_t)pos : 0);
	if (keep == n)
		keep = n - 1;
	enum pt_status rc = PT_OK;
	if ((int64_t)keep != pos)
		rc = pt_engine_rewind(s->e, (int64_t)keep, err);
	double t0 = now_s();
	if (rc == PT_OK)
		rc = pt_engine_eval(s->e, (const uint32_t *)prompt + keep, (uint32_t)(n - keep),
				    s->logits, false, err);
	st->prefill_s = now_s() - t0;
	st->prompt_tokens = (uint32_t)n;
	st->reused_tokens = (uint32_t)keep;
	st->prefill_tokens = (uint32_t)(n - keep);
	st->reply_pos = (int64_t)n;
	return rc;
}

/* The penalty window sees the prompt's tail, as llama.cpp's CLI accepts prompt tokens. */
static void prime_sampler(pt_session *s, const int32_t *prompt, size_t n)
{
	size_t w = s->o.sampler.repeat_last_n;
	pt_sampler_reset(s->sampler);
	for (size_t i = n > w ? n - w : 0; i < n; i++)
		pt_sampler_accept(s->sampler, prompt[i]);
}

/* One sampled id: record it, show its text.  Returns the stop reason it causes, if any. */
static enum pt_stop_reason take(pt_session *s, int32_t id, struct pt_error *err,
				enum pt_status *rc)
{
	if (!grow((void **)&s->ids, &s->cap_ids, s->n_ids + 1, sizeof *s->ids)) {
		*rc = pt_error_set(err, PT_E_NOMEM, "out of memory for generated ids");
		return PT_STOP_NONE;
	}
	s->ids[s->n_ids++] = id;
	pt_sampler_accept(s->sampler, id);
	if (pt_tok_is_eog(s->tok, id))
		return PT_STOP_EOS;
	size_t len = 0;
	char *buf = s->piece;
	*rc = pt_tok_piece(s->tok, id, false, buf, sizeof s->piece, &len, err);
	if (*rc == PT_E_LIMIT) { /* a very long piece: render it whole */
		pt_error_clear(err);
		char *big = pt_malloc(len);
		*rc = big ? pt_tok_piece(s->tok, id, false, big, len, &len, err)
			  : pt_error_set(err, PT_E_NOMEM, "out of memory for a token piece");
		bool stop = *rc == PT_OK && pt_textout_feed(s->out, big, len, NULL);
		pt_free(big);
		return stop ? PT_STOP_STRING : PT_STOP_NONE;
	}
	if (*rc == PT_OK && pt_textout_feed(s->out, buf, len, NULL))
		return PT_STOP_STRING;
	return PT_STOP_NONE;
}

static bool cancelled(const pt_session *s)
{
	return s->emit_failed || (s->o.cancel && *s->o.cancel);
}

enum pt_status pt_session_generate(pt_session *s, const int32_t *prompt, size_t n,
				   struct pt_gen_stats *st, struct pt_error *err)
{
	memset(st, 0, sizeof *st);
	double t0 = now_s();
	s->n_ids = 0;
	s->n_text = 0;
	s->emit_failed = false;
	pt_textout_reset(s->out);
	enum pt_status rc = prefill(s, prompt, n, st, err);
	if (rc != PT_OK)
		return rc;
	prime_sampler(s, prompt, n);
	uint32_t n_ctx = pt_engine_n_ctx(s->e);
	double t1 = now_s();
	while (rc == PT_OK && st->stop == PT_STOP_NONE) {
		if (cancelled(s)) {
			st->stop = PT_STOP_CANCELLED;
			break;
		}
		int32_t id = pt_sampler_sample(s->sampler, s->logits);
		if (id < 0)
			return pt_error_set(err, PT_E_INVALID, "every logit is NaN or -inf");
		st->stop = take(s, id, err, &rc);
		st->gen_tokens = (uint32_t)s->n_ids;
		if (st->gen_tokens == 1)
			st->ttft_s = now_s() - t0;
		if (rc != PT_OK || st->stop != PT_STOP_NONE)
			break;
		if (s->o.max_new && st->gen_tokens >= s->o.max_new)
			st->stop = PT_STOP_MAX_NEW;
		else if (pt_engine_pos(s->e) >= (int64_t)n_ctx)
			st->stop = PT_STOP_CONTEXT;
		else if (cancelled(s))
			st->stop = PT_STOP_CANCELLED;
		else
			rc = pt_engine_eval(s->e, (const uint32_t *)&id, 1, s->logits, false, err);
	}
	st->decode_s = now_s() - t1;
	if (rc == PT_OK && st->stop != PT_STOP_CANCELLED)
		pt_textout_finish(s->out);
	return rc;
}

const int32_t *pt_session_ids(const pt_session *s)
{
	return s->ids;
}

const char *pt_session_text(const pt_session *s, size_t *len)
{
	*len = s->n_text;
	return s->n_text ? s->text : "";
}

enum pt_status pt_session_drop_reply(pt_session *s, const struct pt_gen_stats *stats,
				     struct pt_error *err)
{
	int64_t pos = pt_engine_pos(s->e);
	if (stats->reply_pos <= 0 || pos <= stats->reply_pos)
		return PT_OK;
	return pt_engine_rewind(s->e, stats->reply_pos, err);
}
