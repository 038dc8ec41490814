/* worker.c - the scheduler thread: a bounded FIFO queue of jobs in front of the generation
 * slots (src/gen/slot.h).  The engine has --parallel + --cache-prompts sequences; at most
 * --parallel of them generate at once, and every pt_gen_step evaluates the pending prompt
 * chunks and then ONE batched decode pass for all generating slots (one expert read serves
 * every row routed to it).  A sequence keeps its conversation's KV rows after its job, so the
 * free sequences are the prompt cache: a new job takes the free sequence whose history
 * shares the longest prefix with its prompt (else the least recently used one), and only the
 * rest of the prompt is evaluated.
 *
 * Per-token hooks of the slot API: presence/frequency penalties on a copy of the logits
 * before the sampler's chain, log-probabilities of the raw logits, the reply text appended
 * to the job under the server lock.  Greedy output does not depend on the batching, the
 * sequence a job runs on or what ran before (the engine guarantees byte-identical rows). */
#include "server/srv_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gen/slot.h"
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
	pt_free(j->ckpt_marks);
	for (size_t i = 0; i < j->n_stops; i++)
		pt_free(j->stops[i]);
	pt_free(j->stops);
	pt_free(j->text);
	pt_free(j->lps);
	pt_grammar_state_free(j->gstate);
	pt_grammar_free(j->grammar);
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
	uint32_t free_slots = s->o.parallel > s->n_active ? s->o.parallel - s->n_active : 0;
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

/* At most every 50 ms (pt_engine_stats reads /proc), and always when forced. */
static void publish_engine(pt_server *s, bool force)
{
	double t = now_s();
	if (!force && t - s->last_publish < 0.05)
		return;
	s->last_publish = t;
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

/* Under s->mu. */
static void slot_progress_locked(pt_server *s, uint32_t k)
{
	struct srv_slot *sl = &s->slots[k];
	struct pt_server_slot_info *si = &s->snap.slots[sl->view];
	const struct pt_gen_stats *st = pt_gen_slot_stats(sl->gs);
	double t = now_s();
	si->busy = true;
	si->request_id = sl->j->id;
	si->prefilling = pt_gen_slot_state(sl->gs) == PT_SLOT_PREFILL;
	si->prompt_tokens = (uint32_t)sl->j->n_prompt;
	si->cached_tokens = st->reused_tokens;
	size_t left = pt_gen_slot_prefill_left(sl->gs);
	size_t todo = sl->j->n_prompt - st->reused_tokens;
	si->prefill_done = (uint32_t)(todo > left ? todo - left : 0);
	si->gen_tokens = st->gen_tokens;
	si->ttft_s = st->ttft_s;
	si->age_s = t - sl->t0;
	si->prefill_tps = st->prefill_s > 0 ? st->prefill_tokens / st->prefill_s : 0;
	si->decode_tps = st->gen_tokens > 1 && st->decode_s > 0 ? (st->gen_tokens - 1) / st->decode_s : 0;
}

/* ---- per-token hooks -------------------------------------------------------------------- */

/* The reply text grows (under s->mu, so readers see whole updates). */
static bool on_text(void *ctx, const char *text, size_t len)
{
	struct srv_slot *sl = ctx;
	struct pt_job *j = sl->j;
	bool ok = true;
	pthread_mutex_lock(&sl->s->mu);
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
	pthread_mutex_unlock(&sl->s->mu);
	return ok && !atomic_load(&j->cancel);
}

static void window_push(struct srv_slot *sl, int32_t id)
{
	if (!sl->wcap)
		return;
	if (sl->wlen == sl->wcap) {
		int32_t old = sl->window[sl->wpos];
		if (old >= 0 && (uint32_t)old < sl->n_vocab && sl->counts[old])
			sl->counts[old]--;
	} else {
		sl->wlen++;
	}
	sl->window[sl->wpos] = id;
	sl->wpos = (sl->wpos + 1) % sl->wcap;
	if (id >= 0 && (uint32_t)id < sl->n_vocab && sl->counts[id] < UINT16_MAX)
		sl->counts[id]++;
}

/* OpenAI presence/frequency penalties over the penalty window on a copy of the logits, then
 * the sampler's own chain (repetition penalty, top-k ...). */
static int32_t sample_hook(void *ctx, pt_sampler *smp, const float *logits)
{
	struct srv_slot *sl = ctx;
	const struct pt_job *j = sl->j;
	const float *l = logits;
	if (j->presence_penalty != 0 || j->frequency_penalty != 0) {
		memcpy(sl->work, logits, sl->n_vocab * sizeof *sl->work);
		for (uint32_t i = 0; i < sl->wlen; i++) {
			int32_t id = sl->window[i];
			if (id >= 0 && (uint32_t)id < sl->n_vocab && sl->counts[id])
				sl->work[id] = logits[id] - (float)sl->counts[id] * j->frequency_penalty -
					       j->presence_penalty;
		}
		l = sl->work;
	}
	if (j->gstate) /* response_format / forced tool calls: only tokens that keep it valid */
		return pt_sampler_sample_constrained(smp, l, j->gstate);
	return pt_sampler_sample(smp, l);
}

/* log-softmax of the raw logits for the sampled id and the top n alternatives. */
static void record_logprobs(struct srv_slot *sl, int32_t id, const float *l)
{
	struct pt_job *j = sl->j;
	float mx = -INFINITY;
	for (uint32_t i = 0; i < sl->n_vocab; i++)
		if (l[i] > mx)
			mx = l[i];
	double sum = 0;
	for (uint32_t i = 0; i < sl->n_vocab; i++)
		sum += isfinite(l[i]) ? exp((double)l[i] - mx) : 0;
	float lse = mx + (float)log(sum > 0 ? sum : 1);
	struct pt_job_lp lp = { .id = id, .text_end = SIZE_MAX };
	lp.logprob = isfinite(l[id]) ? l[id] - lse : -9999.0f;
	uint32_t k = j->top_logprobs;
	for (uint32_t i = 0; i < sl->n_vocab && k; i++) { /* insertion into a small sorted list */
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
	pthread_mutex_lock(&sl->s->mu);
	if (j->n_lps)	/* the previous token's text is out by now */
		j->lps[j->n_lps - 1].text_end = j->len;
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
	pthread_mutex_unlock(&sl->s->mu);
}

static bool token_hook(void *ctx, int32_t id, const float *logits)
{
	struct srv_slot *sl = ctx;
	if (sl->j->want_logprobs)
		record_logprobs(sl, id, logits);
	window_push(sl, id);
	if (sl->j->gstate && pt_grammar_state_accept(sl->j->gstate, id, NULL) != PT_OK)
		return false; /* cannot happen: the sampler only picks allowed tokens */
	return !atomic_load(&sl->j->cancel);
}

/* ---- slots ------------------------------------------------------------------------------ */

/* The free sequence for a new prompt: the one whose history shares the longest prefix with
 * it, when that prefix is worth it (at least half the prompt, or the whole history, so
 * nothing cached is lost); else the least recently used one (never-used ones first), so a
 * new conversation does not evict another's cache for a shared template header. */
static uint32_t pick_slot(pt_server *s, const int32_t *prompt, size_t n, bool no_reuse)
{
	uint32_t best = UINT32_MAX, lru = UINT32_MAX;
	size_t best_len = 0, best_pos = 0;
	for (uint32_t k = 0; k < s->n_slots; k++) {
		if (s->slots[k].j)
			continue;
		int64_t pos = pt_engine_seq_pos(s->e, s->slots[k].seq);
		size_t hist = pos > 0 ? (size_t)pos : 0;
		size_t l = pt_gen_common_prefix(prompt, n, pt_engine_seq_tokens(s->e, s->slots[k].seq),
						hist);
		if (best == UINT32_MAX || l > best_len) {
			best = k;
			best_len = l;
			best_pos = hist;
		}
		if (lru == UINT32_MAX || s->slots[k].last_used < s->slots[lru].last_used)
			lru = k;
	}
	if (!no_reuse && best_len > 0 && (2 * best_len >= n || best_len == best_pos))
		return best;
	return lru;
}

/* A view index (0..parallel-1) for the snapshot's slot table. */
static uint32_t free_view(pt_server *s)
{
	for (uint32_t v = 0; v < s->o.parallel && v < PT_SERVER_MAX_SLOTS; v++) {
		bool used = false;
		for (uint32_t k = 0; k < s->n_slots; k++)
			used |= s->slots[k].j && s->slots[k].view == v;
		if (!used)
			return v;
	}
	return 0;
}

/* Starts job j on slot k.  Returns false when the start failed (the job is then done). */
static bool start_job(pt_server *s, uint32_t k, struct pt_job *j)
{
	struct srv_slot *sl = &s->slots[k];
	struct pt_gen_slot_opts o = { 0 };
	struct pt_error err = { 0 };
	sl->j = j;
	sl->t0 = now_s();
	sl->wcap = j->sampler.repeat_last_n;
	sl->wlen = sl->wpos = 0;
	memset(sl->counts, 0, sl->n_vocab * sizeof *sl->counts);
	pt_free(sl->window);
	sl->window = pt_mallocn(sl->wcap ? sl->wcap : 1, sizeof *sl->window);
	enum pt_status rc = sl->window ? PT_OK : pt_error_set(&err, PT_E_NOMEM, "out of memory");
	if (rc == PT_OK) {
		/* the penalty window sees the prompt's tail, as the slot's sampler does */
		for (size_t i = j->n_prompt > sl->wcap ? j->n_prompt - sl->wcap : 0; i < j->n_prompt; i++)
			window_push(sl, j->prompt[i]);
		o.sampler = j->sampler;
		o.max_new = j->max_new;
		o.stops = (const char *const *)j->stops;
		o.n_stops = j->n_stops;
		o.emit = on_text;
		o.emit_ctx = sl;
		o.prefill_chunk = (s->o.n_batch ? s->o.n_batch : 128) * 4;
		o.ckpt_marks = j->ckpt_marks;
		o.n_ckpt_marks = j->n_ckpt_marks;
		o.sample = sample_hook;
		o.sample_ctx = sl;
		o.on_token = token_hook;
		o.token_ctx = sl;
		pthread_mutex_lock(&s->engine_mu);
		if (j->no_reuse) /* cache_prompt false: nothing of the history is kept */
			rc = pt_engine_seq_rewind(s->e, sl->seq, 0, &err);
		if (rc == PT_OK)
			rc = pt_gen_slot_start(sl->gs, &o, j->prompt, j->n_prompt, &err);
		pthread_mutex_unlock(&s->engine_mu);
	}
	if (rc == PT_OK)
		return true;
	pthread_mutex_lock(&s->mu);
	j->rc = rc;
	j->err = err;
	j->state = PT_JOB_DONE;
	pthread_cond_broadcast(&j->cv);
	sl->j = NULL;
	s->n_active--;
	unref_locked(j);
	pthread_mutex_unlock(&s->mu);
	return false;
}

/* A slot that stopped: its job gets the stats and the status; the slot becomes free. */
static void finish_job(pt_server *s, uint32_t k)
{
	struct srv_slot *sl = &s->slots[k];
	struct pt_job *j = sl->j;
	const struct pt_gen_stats *st = pt_gen_slot_stats(sl->gs);
	bool failed = pt_gen_slot_state(sl->gs) == PT_SLOT_FAILED;
	pthread_mutex_lock(&s->mu);
	if (j->n_lps)
		j->lps[j->n_lps - 1].text_end = j->len;
	j->st = *st;
	j->rc = failed ? (pt_gen_slot_error(sl->gs)->code ? pt_gen_slot_error(sl->gs)->code
							  : PT_E_INVALID) : PT_OK;
	if (failed)
		j->err = *pt_gen_slot_error(sl->gs);
	j->state = PT_JOB_DONE;
	pthread_cond_broadcast(&j->cv);
	struct pt_server_snapshot *sn = &s->snap;
	memset(&sn->slots[sl->view], 0, sizeof sn->slots[0]);
	if (!failed && st->stop != PT_STOP_CANCELLED) {
		sn->requests_ok++;
		sn->last_ttft_s = st->ttft_s;
		sn->last_decode_tps = st->decode_s > 0 ? st->gen_tokens / st->decode_s : 0;
		sn->last_prefill_tps = st->prefill_s > 0 ? st->prefill_tokens / st->prefill_s : 0;
	} else if (st->stop == PT_STOP_CANCELLED) {
		sn->requests_cancelled++;
	}
	sn->prompt_tokens_total += st->prompt_tokens;
	sn->cached_tokens_total += st->reused_tokens;
	sn->replayed_tokens_total += st->replayed_tokens;
	sn->gen_tokens_total += st->gen_tokens;
	sn->prefill_s_total += st->prefill_s;
	sn->decode_s_total += st->decode_s;
	sl->j = NULL;
	sl->last_used = ++s->use_clock;
	s->n_active--;
	sn->slots_busy = s->n_active;
	unref_locked(j);
	pthread_mutex_unlock(&s->mu);
}

/* Takes queued jobs into free slots (up to --parallel generating).  Under s->mu on entry
 * and exit; starts them without it. */
static void admit(pt_server *s)
{
	while (s->q_head && s->n_active < s->o.parallel) {
		struct pt_job *j = s->q_head;
		s->q_head = j->next;
		if (!s->q_head)
			s->q_tail = NULL;
		s->q_len--;
		j->next = NULL;
		j->state = PT_JOB_RUNNING;
		s->n_active++;
		s->snap.queue_depth = s->q_len;
		s->snap.slots_busy = s->n_active;
		uint32_t view = free_view(s);
		pthread_mutex_unlock(&s->mu);
		uint32_t k = pick_slot(s, j->prompt, j->n_prompt, j->no_reuse);
		s->slots[k].view = view;
		start_job(s, k, j);
		pthread_mutex_lock(&s->mu);
	}
}

static void *worker_main(void *arg)
{
	pt_server *s = arg;
	pt_gen_slot *busy[PT_ENGINE_MAX_SEQ];
	uint32_t idx[PT_ENGINE_MAX_SEQ];
	pthread_mutex_lock(&s->mu);
	for (;;) {
		admit(s);
		if (s->n_active == 0) {
			if (atomic_load(&s->stopping) && !s->q_head)
				break;
			pthread_cond_wait(&s->queue_cv, &s->mu);
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		size_t n = 0;
		for (uint32_t k = 0; k < s->n_slots; k++) {
			struct srv_slot *sl = &s->slots[k];
			if (!sl->j)
				continue;
			if (atomic_load(&sl->j->cancel))
				pt_gen_slot_cancel(sl->gs);
			busy[n] = sl->gs;
			idx[n++] = k;
		}
		struct pt_error err = { 0 };
		pthread_mutex_lock(&s->engine_mu);
		pt_gen_step(s->e, busy, n, &err); /* a failing slot becomes FAILED; the others go on */
		pthread_mutex_unlock(&s->engine_mu);
		for (size_t i = 0; i < n; i++) {
			struct srv_slot *sl = &s->slots[idx[i]];
			if (pt_gen_slot_busy(sl->gs)) {
				pthread_mutex_lock(&s->mu);
				slot_progress_locked(s, idx[i]);
				pthread_mutex_unlock(&s->mu);
			} else {
				finish_job(s, idx[i]);
			}
		}
		publish_engine(s, false);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	publish_engine(s, true);
	return NULL;
}

enum pt_status pt_srv_start_worker(pt_server *s, struct pt_error *err)
{
	s->n_slots = pt_engine_n_seq(s->e);
	if (s->n_slots > PT_ENGINE_MAX_SEQ)
		s->n_slots = PT_ENGINE_MAX_SEQ;
	if (s->o.parallel > s->n_slots)
		return pt_error_set(err, PT_E_INVALID, "--parallel %u needs the engine opened with "
				    "that many sequences (it has %u)", s->o.parallel, s->n_slots);
	uint32_t n_vocab = pt_engine_n_vocab(s->e);
	struct pt_gen_slot_opts o = { 0 };
	pt_sampler_opts_default(&o.sampler);
	for (uint32_t k = 0; k < s->n_slots; k++) {
		struct srv_slot *sl = &s->slots[k];
		sl->s = s;
		sl->seq = k;
		sl->n_vocab = n_vocab;
		sl->work = pt_mallocn(n_vocab, sizeof *sl->work);
		sl->counts = pt_calloc(n_vocab, sizeof *sl->counts);
		if (!sl->work || !sl->counts)
			return pt_error_set(err, PT_E_NOMEM, "out of memory for the generation slots");
		enum pt_status st = pt_gen_slot_create(s->e, k, &o, &sl->gs, err);
		if (st != PT_OK)
			return st;
	}
	if (pthread_create(&s->worker, NULL, worker_main, s) != 0)
		return pt_error_set(err, PT_E_NOMEM, "cannot start the generation thread");
	s->worker_running = true;
	return PT_OK;
}

/* Cancels whatever is queued or running and joins the scheduler; frees the slots. */
void pt_srv_stop_worker(pt_server *s)
{
	if (s->worker_running) {
		pthread_mutex_lock(&s->mu);
		atomic_store(&s->stopping, true);
		for (struct pt_job *j = s->q_head; j; j = j->next)
			atomic_store(&j->cancel, 1);
		for (uint32_t k = 0; k < s->n_slots; k++)
			if (s->slots[k].j)
				atomic_store(&s->slots[k].j->cancel, 1);
		pthread_cond_broadcast(&s->queue_cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->worker, NULL);
		s->worker_running = false;
	}
	for (uint32_t k = 0; k < s->n_slots; k++) {
		struct srv_slot *sl = &s->slots[k];
		pt_gen_slot_destroy(sl->gs);
		pt_free(sl->work);
		pt_free(sl->counts);
		pt_free(sl->window);
		memset(sl, 0, sizeof *sl);
	}
	s->n_slots = 0;
}
