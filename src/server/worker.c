/* worker.c - the scheduler thread: takes jobs from the bounded FIFO queue and runs them on
 * the engine.  The generation loop mirrors pt_session_generate (src/gen/session.c) step for
 * step (prefix reuse, prefill, sampler primed with the prompt tail, the stop/UTF-8 filter),
 * so greedy output equals `particle run`; it is written out here because the server needs
 * each step's logits (logprobs, presence/frequency penalties, constrained decoding) and a
 * cancel check between prefill chunks.  When the step-wise multi-sequence slot API lands
 * (multiseq), run_job is the one place that changes. */
#include "server/srv_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gen/textout.h"
#include "token/tok.h"
#include "util/alloc.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct pt_job *pt_srv_job_new(void)
{
	struct pt_job *j = pt_calloc(1, sizeof *j);
	if (j)
		pthread_cond_init(&j->cv, NULL);
	return j;
}

static void job_free(struct pt_job *j)
{
	pt_free(j->prompt);
	for (size_t i = 0; i < j->n_stops; i++)
		pt_free(j->stops[i]);
	pt_free(j->stops);
	pt_free(j->text);
	pt_free(j->lps);
	pthread_cond_destroy(&j->cv);
	pt_free(j);
}

/* Under s->mu. */
static void unref_locked(struct pt_job *j)
{
	if (--j->refs == 0)
		job_free(j);
}

uint64_t pt_srv_random_seed(pt_server *s)
{
	pthread_mutex_lock(&s->mu);
	uint64_t x = (s->seed_state += 0x9E3779B97F4A7C15ull);
	pthread_mutex_unlock(&s->mu);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return (x ^ (x >> 31)) & ((1ull << 53) - 1);
}

enum pt_status pt_srv_submit(pt_server *s, struct pt_job *j, struct pt_error *err)
{
	pthread_mutex_lock(&s->mu);
	if (atomic_load(&s->stopping)) {
		pthread_mutex_unlock(&s->mu);
		return pt_error_set(err, PT_E_CANCELLED, "the server is shutting down");
	}
	uint32_t free_slots = s->running ? 0 : 1;
	if (s->q_len >= s->o.max_queue + free_slots) {
		s->snap.requests_rejected++;
		pthread_mutex_unlock(&s->mu);
		return pt_error_set(err, PT_E_BUSY, "the server is busy: %u requests are waiting "
				    "(--max-queue %u)", s->q_len, s->o.max_queue);
	}
	j->id = ++s->next_id;
	j->refs = 2;
	j->state = PT_JOB_QUEUED;
	j->t_queued = now_s();
	if (s->q_tail)
		s->q_tail->next = j;
	else
		s->q_head = j;
	s->q_tail = j;
	s->q_len++;
	s->snap.queue_depth = s->q_len;
	s->snap.requests_total++;
	pthread_cond_signal(&s->queue_cv);
	pthread_mutex_unlock(&s->mu);
	return PT_OK;
}

void pt_srv_release(pt_server *s, struct pt_job *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&s->mu);
	if (j->state != PT_JOB_DONE)
		atomic_store(&j->cancel, 1);
	if (j->state == PT_JOB_QUEUED) { /* never started: take it out of the queue */
		struct pt_job **p = &s->q_head, *prev = NULL;
		while (*p && *p != j) {
			prev = *p;
			p = &(*p)->next;
		}
		if (*p) {
			*p = j->next;
			if (s->q_tail == j)
				s->q_tail = prev;
			s->q_len--;
			s->snap.queue_depth = s->q_len;
			s->snap.requests_cancelled++;
			j->state = PT_JOB_DONE;
			unref_locked(j); /* the scheduler's reference */
		}
	}
	unref_locked(j);
	pthread_mutex_unlock(&s->mu);
}

/* ---- publishing state ------------------------------------------------------------------- */

static void publish_engine(pt_server *s)
{
	struct pt_engine_stats es;
	pt_engine_stats(s->e, &es);
	uint32_t n = es.n_moe_layers < s->n_layers ? es.n_moe_layers : s->n_layers;
	uint64_t tmp[3];
	pthread_mutex_lock(&s->mu);
	s->snap.engine = es;
	pthread_mutex_unlock(&s->mu);
	for (uint32_t i = 0; i < n; i++) {
		pt_engine_layer_stats(s->e, i, &tmp[0], &tmp[1], &tmp[2]);
		pthread_mutex_lock(&s->mu);
		memcpy(s->layer[i], tmp, sizeof tmp);
		pthread_mutex_unlock(&s->mu);
	}
}

static void slot_progress(pt_server *s, const struct pt_job *j, const struct pt_gen_stats *st,
			  uint32_t prefill_done, bool prefilling, double t_start, double t_dec)
{
	struct pt_server_slot_info *si = &s->snap.slots[0];
	pthread_mutex_lock(&s->mu);
	si->busy = true;
	si->request_id = j->id;
	si->prefilling = prefilling;
	si->prompt_tokens = (uint32_t)j->n_prompt;
	si->cached_tokens = st->reused_tokens;
	si->prefill_done = prefill_done;
	si->gen_tokens = st->gen_tokens;
	si->ttft_s = st->ttft_s;
	double t = now_s();
	si->age_s = t - t_start;
	si->prefill_tps = st->prefill_s > 0 ? st->prefill_tokens / st->prefill_s : 0;
	si->decode_tps = st->gen_tokens > 1 && t > t_dec ? (st->gen_tokens - 1) / (t - t_dec) : 0;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the generation loop ---------------------------------------------------------------- */

struct run {
	pt_server *s;
	struct pt_job *j;
	pt_sampler *sampler;
	pt_textout *out;
	float *logits, *work;        /* raw logits, penalised copy */
	uint32_t n_vocab;
	uint16_t *counts;            /* presence/frequency: occurrences in the penalty window */
	int32_t *window;             /* ring of the last repeat_last_n ids */
	uint32_t wlen, wpos, wcap;
	char piece[256];
};

/* textout callback: the reply text grows (under s->mu, so readers see whole updates). */
static bool on_text(void *ctx, const char *text, size_t len)
{
	struct run *r = ctx;
	struct pt_job *j = r->j;
	bool ok = true;
	pthread_mutex_lock(&r->s->mu);
	if (j->len + len + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 256;
		while (cap < j->len + len + 1)
			cap *= 2;
		char *p = pt_realloc(j->text, cap);
		if (p) {
			j->text = p;
			j->cap = cap;
		} else {
			ok = false;
		}
	}
	if (ok) {
		memcpy(j->text + j->len, text, len);
		j->len += len;
		j->text[j->len] = 0;
		pthread_cond_broadcast(&j->cv);
	}
	pthread_mutex_unlock(&r->s->mu);
	return ok;
}

static void window_push(struct run *r, int32_t id)
{
	if (!r->wcap)
		return;
	if (r->wlen == r->wcap) {
		int32_t old = r->window[r->wpos];
		if (old >= 0 && (uint32_t)old < r->n_vocab && r->counts[old])
			r->counts[old]--;
	} else {
		r->wlen++;
	}
	r->window[r->wpos] = id;
	r->wpos = (r->wpos + 1) % r->wcap;
	if (id >= 0 && (uint32_t)id < r->n_vocab && r->counts[id] < UINT16_MAX)
		r->counts[id]++;
}

/* OpenAI presence/frequency penalties over the penalty window, on a copy of the logits; the
 * sampler's own chain (repetition penalty, top-k ...) then runs on the copy. */
static const float *penalised(struct run *r)
{
	const struct pt_job *j = r->j;
	if (j->presence_penalty == 0 && j->frequency_penalty == 0)
		return r->logits;
	memcpy(r->work, r->logits, r->n_vocab * sizeof *r->work);
	for (uint32_t i = 0; i < r->wlen; i++) {
		int32_t id = r->window[i];
		if (id < 0 || (uint32_t)id >= r->n_vocab || r->counts[id] == 0)
			continue;
		/* each distinct id once: recompute from the counts */
		r->work[id] = r->logits[id] - (float)r->counts[id] * j->frequency_penalty -
			      j->presence_penalty;
	}
	return r->work;
}

/* log-softmax of the raw logits for the sampled id and the top n alternatives. */
static void record_logprobs(struct run *r, int32_t id)
{
	struct pt_job *j = r->j;
	const float *l = r->logits;
	float mx = -INFINITY;
	for (uint32_t i = 0; i < r->n_vocab; i++)
		if (l[i] > mx)
			mx = l[i];
	double sum = 0;
	for (uint32_t i = 0; i < r->n_vocab; i++)
		sum += isfinite(l[i]) ? exp((double)l[i] - mx) : 0;
	float lse = mx + (float)log(sum > 0 ? sum : 1);
	struct pt_job_lp lp = { .id = id };
	lp.logprob = isfinite(l[id]) ? l[id] - lse : -9999.0f;
	uint32_t k = j->top_logprobs;
	for (uint32_t i = 0; i < r->n_vocab && k; i++) { /* insertion into a small sorted list */
		if (!isfinite(l[i]))
			continue;
		float v = l[i] - lse;
		if (lp.n_top == k && v <= lp.top_lp[k - 1])
			continue;
		uint32_t p = lp.n_top < k ? lp.n_top++ : k - 1;
		while (p > 0 && lp.top_lp[p - 1] < v) {
			lp.top_lp[p] = lp.top_lp[p - 1];
			lp.top_id[p] = lp.top_id[p - 1];
			p--;
		}
		lp.top_lp[p] = v;
		lp.top_id[p] = (int32_t)i;
	}
	pthread_mutex_lock(&r->s->mu);
	if (j->n_lps == j->cap_lps) {
		size_t cap = j->cap_lps ? j->cap_lps * 2 : 64;
		struct pt_job_lp *p = pt_reallocn(j->lps, cap, sizeof *p);
		if (p) {
			j->lps = p;
			j->cap_lps = cap;
		}
	}
	if (j->n_lps < j->cap_lps)
		j->lps[j->n_lps++] = lp;
	pthread_mutex_unlock(&r->s->mu);
}

static void lp_text_end(struct run *r)
{
	struct pt_job *j = r->j;
	pthread_mutex_lock(&r->s->mu);
	if (j->n_lps)
		j->lps[j->n_lps - 1].text_end = j->len;
	pthread_mutex_unlock(&r->s->mu);
}

/* One sampled id: history, penalty window, text.  Returns the stop it causes. */
static enum pt_stop_reason take(struct run *r, int32_t id, enum pt_status *rc,
				struct pt_error *err)
{
	const struct pt_tok *tok = r->s->tok;
	pt_sampler_accept(r->sampler, id);
	window_push(r, id);
	if (pt_tok_is_eog(tok, id))
		return PT_STOP_EOS;
	size_t len = 0;
	*rc = pt_tok_piece(tok, id, false, r->piece, sizeof r->piece, &len, err);
	if (*rc == PT_E_LIMIT) { /* a very long piece: render it whole */
		pt_error_clear(err);
		char *big = pt_malloc(len);
		*rc = big ? pt_tok_piece(tok, id, false, big, len, &len, err)
			  : pt_error_set(err, PT_E_NOMEM, "out of memory for a token piece");
		bool stop = *rc == PT_OK && pt_textout_feed(r->out, big, len, NULL);
		pt_free(big);
		return stop ? PT_STOP_STRING : PT_STOP_NONE;
	}
	if (*rc == PT_OK && pt_textout_feed(r->out, r->piece, len, NULL))
		return PT_STOP_STRING;
	return PT_STOP_NONE;
}

static enum pt_status eval_locked(pt_server *s, const int32_t *ids, uint32_t n, float *logits,
				  struct pt_error *err)
{
	pthread_mutex_lock(&s->engine_mu);
	enum pt_status rc = pt_engine_eval(s->e, (const uint32_t *)ids, n, logits, false, err);
	pthread_mutex_unlock(&s->engine_mu);
	return rc;
}

/* Prefix reuse and prefill in chunks of a multiple of the engine's n_batch (so the engine
 * splits the prompt exactly as one call would), checking for a cancel between chunks. */
static enum pt_status prefill(struct run *r, struct pt_gen_stats *st, double t_start,
			      struct pt_error *err)
{
	pt_server *s = r->s;
	struct pt_job *j = r->j;
	size_t n = j->n_prompt;
	uint32_t n_ctx = pt_engine_n_ctx(s->e);
	if (n == 0)
		return pt_error_set(err, PT_E_INVALID, "the prompt is empty");
	if (n > n_ctx)
		return pt_error_set(err, PT_E_LIMIT, "prompt of %zu tokens does not fit the context "
				    "of %u tokens", n, n_ctx);
	pthread_mutex_lock(&s->engine_mu);
	int64_t pos = pt_engine_pos(s->e);
	size_t keep = pt_session_common_prefix(j->prompt, n, pt_engine_tokens(s->e),
					       pos > 0 ? (size_t)pos : 0);
	if (keep == n)
		keep = n - 1;
	enum pt_status rc = PT_OK;
	if ((int64_t)keep != pos)
		rc = pt_engine_rewind(s->e, (int64_t)keep, err);
	pthread_mutex_unlock(&s->engine_mu);
	st->prompt_tokens = (uint32_t)n;
	st->reused_tokens = (uint32_t)keep;
	st->prefill_tokens = (uint32_t)(n - keep);
	st->reply_pos = (int64_t)n;
	size_t chunk = (size_t)(s->o.n_batch ? s->o.n_batch : 128) * 4;
	double t0 = now_s();
	for (size_t at = keep; rc == PT_OK && at < n; at += chunk) {
		if (atomic_load(&j->cancel)) {
			st->stop = PT_STOP_CANCELLED;
			break;
		}
		size_t m = n - at < chunk ? n - at : chunk;
		slot_progress(s, j, st, (uint32_t)(at - keep), true, t_start, t0);
		rc = eval_locked(s, j->prompt + at, (uint32_t)m, r->logits, err);
		st->prefill_s = now_s() - t0;
		publish_engine(s);
	}
	return rc;
}

static enum pt_status run_setup(struct run *r, struct pt_error *err)
{
	struct pt_job *j = r->j;
	r->n_vocab = pt_engine_n_vocab(r->s->e);
	r->logits = pt_mallocn(r->n_vocab, sizeof *r->logits);
	r->work = pt_mallocn(r->n_vocab, sizeof *r->work);
	r->counts = pt_calloc(r->n_vocab, sizeof *r->counts);
	r->wcap = j->sampler.repeat_last_n;
	r->window = pt_mallocn(r->wcap ? r->wcap : 1, sizeof *r->window);
	if (!r->logits || !r->work || !r->counts || !r->window)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for a generation");
	enum pt_status rc = pt_sampler_create(&j->sampler, r->n_vocab, &r->sampler, err);
	if (rc == PT_OK)
		rc = pt_textout_create((const char *const *)j->stops, j->n_stops, on_text, r,
				       &r->out, err);
	return rc;
}

static void run_teardown(struct run *r)
{
	pt_sampler_destroy(r->sampler);
	pt_textout_destroy(r->out);
	pt_free(r->logits);
	pt_free(r->work);
	pt_free(r->counts);
	pt_free(r->window);
}

static enum pt_status generate(struct run *r, struct pt_gen_stats *st, double t0,
			       struct pt_error *err)
{
	pt_server *s = r->s;
	struct pt_job *j = r->j;
	enum pt_status rc = prefill(r, st, t0, err);
	if (rc != PT_OK || st->stop == PT_STOP_CANCELLED)
		return rc;
	/* The penalty window sees the prompt's tail, as in pt_session. */
	pt_sampler_reset(r->sampler);
	uint32_t w = j->sampler.repeat_last_n;
	for (size_t i = j->n_prompt > w ? j->n_prompt - w : 0; i < j->n_prompt; i++) {
		pt_sampler_accept(r->sampler, j->prompt[i]);
		window_push(r, j->prompt[i]);
	}
	uint32_t n_ctx = pt_engine_n_ctx(s->e);
	double t1 = now_s();
	while (rc == PT_OK && st->stop == PT_STOP_NONE) {
		if (atomic_load(&j->cancel)) {
			st->stop = PT_STOP_CANCELLED;
			break;
		}
		int32_t id = pt_sampler_sample(r->sampler, penalised(r));
		if (id < 0)
			return pt_error_set(err, PT_E_INVALID, "every logit is NaN or -inf");
		if (j->want_logprobs)
			record_logprobs(r, id);
		st->stop = take(r, id, &rc, err);
		if (j->want_logprobs)
			lp_text_end(r);
		st->gen_tokens++;
		if (st->gen_tokens == 1)
			st->ttft_s = now_s() - t0;
		slot_progress(s, j, st, st->prefill_tokens, false, t0, t1);
		if (rc != PT_OK || st->stop != PT_STOP_NONE)
			break;
		if (j->max_new && st->gen_tokens >= j->max_new)
			st->stop = PT_STOP_MAX_NEW;
		else if (pt_engine_pos(s->e) >= (int64_t)n_ctx)
			st->stop = PT_STOP_CONTEXT;
		else if (atomic_load(&j->cancel))
			st->stop = PT_STOP_CANCELLED;
		else
			rc = eval_locked(s, &id, 1, r->logits, err);
		publish_engine(s);
	}
	st->decode_s = now_s() - t1;
	if (rc == PT_OK && st->stop != PT_STOP_CANCELLED)
		pt_textout_finish(r->out);
	return rc;
}

static void run_job(pt_server *s, struct pt_job *j)
{
	struct run r = { .s = s, .j = j };
	struct pt_gen_stats st = { 0 };
	struct pt_error err = { 0 };
	double t0 = now_s();
	enum pt_status rc = run_setup(&r, &err);
	if (rc == PT_OK)
		rc = generate(&r, &st, t0, &err);
	run_teardown(&r);
	pthread_mutex_lock(&s->mu);
	j->st = st;
	j->rc = rc;
	j->err = err;
	j->state = PT_JOB_DONE;
	pthread_cond_broadcast(&j->cv);
	struct pt_server_snapshot *sn = &s->snap;
	memset(&sn->slots[0], 0, sizeof sn->slots[0]);
	sn->slots_busy = 0;
	if (rc == PT_OK && st.stop != PT_STOP_CANCELLED) {
		sn->requests_ok++;
		sn->last_ttft_s = st.ttft_s;
		sn->last_decode_tps = st.decode_s > 0 ? st.gen_tokens / st.decode_s : 0;
		sn->last_prefill_tps = st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0;
	} else if (st.stop == PT_STOP_CANCELLED) {
		sn->requests_cancelled++;
	}
	sn->prompt_tokens_total += st.prompt_tokens;
	sn->cached_tokens_total += st.reused_tokens;
	sn->gen_tokens_total += st.gen_tokens;
	sn->prefill_s_total += st.prefill_s;
	sn->decode_s_total += st.decode_s;
	pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
	pt_server *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->q_head && !atomic_load(&s->stopping))
			pthread_cond_wait(&s->queue_cv, &s->mu);
		if (!s->q_head)
			break; /* stopping and nothing left */
		struct pt_job *j = s->q_head;
		s->q_head = j->next;
		if (!s->q_head)
			s->q_tail = NULL;
		s->q_len--;
		j->next = NULL;
		j->state = PT_JOB_RUNNING;
		s->running = j;
		s->snap.queue_depth = s->q_len;
		s->snap.slots_busy = 1;
		pthread_mutex_unlock(&s->mu);
		run_job(s, j);
		pthread_mutex_lock(&s->mu);
		s->running = NULL;
		unref_locked(j);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

enum pt_status pt_srv_start_worker(pt_server *s, struct pt_error *err)
{
	if (pthread_create(&s->worker, NULL, worker_main, s) != 0)
		return pt_error_set(err, PT_E_NOMEM, "cannot start the generation thread");
	s->worker_running = true;
	return PT_OK;
}

/* Cancels whatever is queued or running and joins the scheduler. */
void pt_srv_stop_worker(pt_server *s)
{
	if (!s->worker_running)
		return;
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->stopping, true);
	for (struct pt_job *j = s->q_head; j; j = j->next)
		atomic_store(&j->cancel, 1);
	if (s->running)
		atomic_store(&s->running->cancel, 1);
	pthread_cond_broadcast(&s->queue_cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->worker, NULL);
	s->worker_running = false;
}
