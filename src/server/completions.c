/* completions.c - POST /v1/chat/completions and /v1/completions: request -> prompt ids ->
 * job (with its grammar for response_format / forced tool calls) -> the answer as one JSON
 * object or as SSE chunks.  Chat replies go through the template family's parser
 * (chatparse.h): content, reasoning_content and tool_calls, streamed as OpenAI deltas. */
#include "server/srv_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"

struct gen {
	pt_server *s;
	struct pt_job *j;
	enum pt_req_kind kind;
	bool include_usage, logprobs;
	char id[48];
	long created;
	pt_chat_parser *parser;      /* chat replies (NULL: completions) */
	/* streaming state */
	int phase;                   /* 0 role chunk, 1 deltas, 2 final, 3 usage, 4 [DONE], 5 end */
	size_t sent_text, sent_lps;
	uint32_t n_calls;            /* tool calls streamed */
	char *pend;                  /* formatted bytes not yet handed to the core */
	size_t pend_len, pend_off, pend_cap;
	bool oom;
};

static const char *finish_reason(enum pt_stop_reason r, size_t n_calls)
{
	if (r == PT_STOP_MAX_NEW || r == PT_STOP_CONTEXT)
		return "length";
	return n_calls ? "tool_calls" : "stop";
}

static cJSON *usage_json(const struct pt_gen_stats *st)
{
	cJSON *u = cJSON_CreateObject(), *d = cJSON_CreateObject();
	if (!u || !d) {
		cJSON_Delete(u);
		cJSON_Delete(d);
		return NULL;
	}
	cJSON_AddNumberToObject(u, "prompt_tokens", st->prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", st->gen_tokens);
	cJSON_AddNumberToObject(u, "total_tokens", st->prompt_tokens + st->gen_tokens);
	cJSON_AddNumberToObject(d, "cached_tokens", st->reused_tokens);
	cJSON_AddItemToObject(u, "prompt_tokens_details", d);
	return u;
}

static cJSON *timings_json(const struct pt_gen_stats *st)
{
	cJSON *t = cJSON_CreateObject();
	if (!t)
		return NULL;
	cJSON_AddNumberToObject(t, "cache_n", st->reused_tokens);
	/* of those, evaluated again after a recurrent-state checkpoint (issue 18) */
	cJSON_AddNumberToObject(t, "cache_replayed_n", st->replayed_tokens);
	cJSON_AddNumberToObject(t, "prompt_n", st->prefill_tokens);
	cJSON_AddNumberToObject(t, "prompt_ms", st->prefill_s * 1e3);
	cJSON_AddNumberToObject(t, "prompt_per_second",
				st->prefill_s > 0 ? st->prefill_tokens / st->prefill_s : 0);
	cJSON_AddNumberToObject(t, "predicted_n", st->gen_tokens);
	cJSON_AddNumberToObject(t, "predicted_ms", st->decode_s * 1e3);
	cJSON_AddNumberToObject(t, "predicted_per_second",
				st->decode_s > 0 && st->gen_tokens > 1 ?
				(st->gen_tokens - 1) / st->decode_s : 0);
	cJSON_AddNumberToObject(t, "ttft_ms", st->ttft_s * 1e3);
	return t;
}

static cJSON *token_json(pt_server *s, int32_t id, float lp)
{
	char buf[256];
	size_t n = 0;
	struct pt_error err = { 0 };
	cJSON *o = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
	if (!o || !bytes) {
		cJSON_Delete(o);
		cJSON_Delete(bytes);
		return NULL;
	}
	if (pt_tok_piece(s->tok, id, false, buf, sizeof buf, &n, &err) != PT_OK)
		n = 0;
	pt_srv_add_clean_string(o, "token", buf, n);
	cJSON_AddNumberToObject(o, "logprob", lp);
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
	cJSON_AddItemToObject(o, "bytes", bytes);
	cJSON_AddNumberToObject(o, "id", id);
	return o;
}

/* {"content": [...]} for lps[from..to). */
static cJSON *logprobs_json(pt_server *s, const struct pt_job_lp *lps, size_t from, size_t to)
{
	cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
	if (!o || !a) {
		cJSON_Delete(o);
		cJSON_Delete(a);
		return NULL;
	}
	for (size_t i = from; i < to; i++) {
		cJSON *t = token_json(s, lps[i].id, lps[i].logprob), *top = cJSON_CreateArray();
		for (uint32_t k = 0; top && k < lps[i].n_top; k++)
			cJSON_AddItemToArray(top, token_json(s, lps[i].top_id[k], lps[i].top_lp[k]));
		if (t)
			cJSON_AddItemToObject(t, "top_logprobs", top);
		else
			cJSON_Delete(top);
		cJSON_AddItemToArray(a, t);
	}
	cJSON_AddItemToObject(o, "content", a);
	return o;
}

static cJSON *envelope(const struct gen *g, bool chunk)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", g->id);
	cJSON_AddStringToObject(o, "object", g->kind == PT_REQ_CHAT ?
				(chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
	cJSON_AddNumberToObject(o, "created", (double)g->created);
	cJSON_AddStringToObject(o, "model", g->s->model_id);
	cJSON_AddStringToObject(o, "system_fingerprint", "particle-" PT_VERSION_STRING);
	return o;
}

static cJSON *tool_call_json(const struct pt_chat_tool_call *c)
{
	cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
	if (!o || !f) {
		cJSON_Delete(o);
		cJSON_Delete(f);
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", c->id ? c->id : "");
	cJSON_AddStringToObject(o, "type", "function");
	pt_srv_add_clean_string(f, "name", c->name ? c->name : "", c->name ? strlen(c->name) : 0);
	pt_srv_add_clean_string(f, "arguments", c->arguments ? c->arguments : "{}",
				c->arguments ? strlen(c->arguments) : 2);
	cJSON_AddItemToObject(o, "function", f);
	return o;
}

/* The whole answer of a finished job (non-streaming).  Under s->mu. */
static cJSON *final_json(struct gen *g, struct pt_error *err, enum pt_status *rc)
{
	const struct pt_job *j = g->j;
	cJSON *o = envelope(g, false), *choices = cJSON_CreateArray(), *c = cJSON_CreateObject();
	if (!o || !choices || !c) {
		cJSON_Delete(o);
		cJSON_Delete(choices);
		cJSON_Delete(c);
		return NULL;
	}
	size_t n_calls = 0;
	cJSON_AddNumberToObject(c, "index", 0);
	if (g->kind == PT_REQ_CHAT) {
		cJSON *m = cJSON_CreateObject();
		struct pt_chat_result res = { 0 };
		cJSON_AddStringToObject(m, "role", "assistant");
		pt_chat_parser_feed(g->parser, j->text ? j->text : "", j->len, NULL, NULL);
		*rc = pt_chat_parser_finish(g->parser, NULL, NULL, &res, err);
		if (*rc == PT_OK) {
			n_calls = res.n_calls;
			if (n_calls && !res.content_len)
				cJSON_AddNullToObject(m, "content");
			else
				pt_srv_add_clean_string(m, "content", res.content, res.content_len);
			if (res.reasoning_len)
				pt_srv_add_clean_string(m, "reasoning_content", res.reasoning,
							res.reasoning_len);
			if (n_calls) {
				cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
				for (size_t i = 0; calls && i < n_calls; i++)
					cJSON_AddItemToArray(calls, tool_call_json(&res.calls[i]));
			}
		}
		pt_chat_result_free(&res);
		cJSON_AddItemToObject(c, "message", m);
	} else {
		pt_srv_add_clean_string(c, "text", j->text ? j->text : "", j->len);
	}
	if (g->logprobs)
		cJSON_AddItemToObject(c, "logprobs", logprobs_json(g->s, j->lps, 0, j->n_lps));
	else
		cJSON_AddNullToObject(c, "logprobs");
	cJSON_AddStringToObject(c, "finish_reason", finish_reason(j->st.stop, n_calls));
	cJSON_AddItemToArray(choices, c);
	cJSON_AddItemToObject(o, "choices", choices);
	cJSON_AddItemToObject(o, "usage", usage_json(&j->st));
	cJSON_AddItemToObject(o, "timings", timings_json(&j->st));
	return o;
}

static void gen_free(struct gen *g)
{
	if (!g)
		return;
	pt_srv_release(g->s, g->j);
	pt_chat_parser_free(g->parser);
	pt_free(g->pend);
	pt_free(g);
}

static void deadline_100ms(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += 100 * 1000 * 1000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Waits for a job to finish, cancelling it when the client goes away or the server stops
 * for good.  Returns false when the client is gone. */
static bool wait_done(struct gen *g, const struct pt_http_req *req)
{
	pt_server *s = g->s;
	bool alive = true;
	pthread_mutex_lock(&s->mu);
	while (g->j->state != PT_JOB_DONE) {
		struct timespec ts;
		deadline_100ms(&ts);
		pthread_cond_timedwait(&g->j->cv, &s->mu, &ts);
		if (g->j->state == PT_JOB_DONE)
			break;
		pthread_mutex_unlock(&s->mu);
		alive = pt_http_alive(req);
		if (!alive || pt_http_stopping(req))
			atomic_store(&g->j->cancel, 1);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return alive;
}

static void answer_done(struct gen *g, struct pt_http_resp *resp)
{
	pt_server *s = g->s;
	struct pt_job *j = g->j;
	struct pt_error err = { 0 };
	enum pt_status rc = PT_OK;
	pthread_mutex_lock(&s->mu);
	if (j->rc != PT_OK) {
		err = j->err;
		rc = j->rc;
		pthread_mutex_unlock(&s->mu);
		pt_srv_status_error(resp, rc, &err, "generation failed");
		return;
	}
	if (j->st.stop == PT_STOP_CANCELLED) {
		pthread_mutex_unlock(&s->mu);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL,
				   "the request was cancelled (the server is shutting down)");
		return;
	}
	cJSON *o = final_json(g, &err, &rc);
	pthread_mutex_unlock(&s->mu);
	if (rc != PT_OK) {
		cJSON_Delete(o);
		pt_srv_status_error(resp, rc, &err, "parsing the reply");
		return;
	}
	pt_http_resp_json(resp, 200, o);
}

/* ---- SSE -------------------------------------------------------------------------------- */

static void pend_bytes(struct gen *g, const char *a, size_t na, const char *b, size_t nb,
		       const char *c, size_t nc)
{
	if (g->pend_off == g->pend_len)
		g->pend_off = g->pend_len = 0;
	size_t need = g->pend_len + na + nb + nc;
	if (need > g->pend_cap) {
		size_t cap = g->pend_cap ? g->pend_cap : 1024;
		while (cap < need)
			cap *= 2;
		char *p = pt_realloc(g->pend, cap);
		if (!p) {
			g->oom = true;
			return;
		}
		g->pend = p;
		g->pend_cap = cap;
	}
	memcpy(g->pend + g->pend_len, a, na);
	memcpy(g->pend + g->pend_len + na, b, nb);
	memcpy(g->pend + g->pend_len + na + nb, c, nc);
	g->pend_len = need;
}

static void pend_event(struct gen *g, cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!s) {
		g->oom = true;
		return;
	}
	pend_bytes(g, "data: ", 6, s, strlen(s), "\n\n", 2);
	cJSON_free(s);
}

/* The logprobs of the tokens whose text is out up to text_end (chat: attached to the next
 * chunk of any kind). */
static cJSON *take_lps(struct gen *g, size_t text_end)
{
	const struct pt_job *j = g->j;
	if (!g->logprobs)
		return NULL;
	size_t to = g->sent_lps;
	while (to < j->n_lps && j->lps[to].text_end <= text_end)
		to++;
	if (to == g->sent_lps)
		return NULL;
	cJSON *lp = logprobs_json(g->s, j->lps, g->sent_lps, to);
	g->sent_lps = to;
	return lp;
}

/* A chunk with one choice: delta (chat) or text (completion); takes delta and lp. */
static void pend_chunk(struct gen *g, cJSON *delta, const char *text, size_t n, cJSON *lp,
		       const char *finish)
{
	cJSON *o = envelope(g, true), *choices = cJSON_CreateArray(), *c = cJSON_CreateObject();
	if (!o || !choices || !c) {
		cJSON_Delete(o);
		cJSON_Delete(choices);
		cJSON_Delete(c);
		cJSON_Delete(delta);
		cJSON_Delete(lp);
		g->oom = true;
		return;
	}
	cJSON_AddNumberToObject(c, "index", 0);
	if (g->kind == PT_REQ_CHAT)
		cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
	else
		pt_srv_add_clean_string(c, "text", text ? text : "", text ? n : 0);
	if (lp)
		cJSON_AddItemToObject(c, "logprobs", lp);
	else
		cJSON_AddNullToObject(c, "logprobs");
	if (finish)
		cJSON_AddStringToObject(c, "finish_reason", finish);
	else
		cJSON_AddNullToObject(c, "finish_reason");
	cJSON_AddItemToArray(choices, c);
	cJSON_AddItemToObject(o, "choices", choices);
	pend_event(g, o);
}

/* Parser events -> chat deltas (one kind per chunk, as llama-server and OpenAI send them). */
static void on_chat_event(void *ctx, const struct pt_chat_event *ev)
{
	struct gen *g = ctx;
	cJSON *d = cJSON_CreateObject();
	if (!d) {
		g->oom = true;
		return;
	}
	if (ev->kind == PT_CHAT_CONTENT || ev->kind == PT_CHAT_REASONING) {
		pt_srv_add_clean_string(d, ev->kind == PT_CHAT_CONTENT ? "content" : "reasoning_content",
					ev->text, ev->len);
	} else {
		cJSON *calls = cJSON_AddArrayToObject(d, "tool_calls"), *c = cJSON_CreateObject();
		cJSON *f = cJSON_CreateObject();
		cJSON_AddNumberToObject(c, "index", ev->index);
		if (ev->kind == PT_CHAT_TOOL_START) {
			cJSON_AddStringToObject(c, "id", ev->id ? ev->id : "");
			cJSON_AddStringToObject(c, "type", "function");
			pt_srv_add_clean_string(f, "name", ev->name ? ev->name : "",
						ev->name ? strlen(ev->name) : 0);
			cJSON_AddStringToObject(f, "arguments", "");
			if (ev->index + 1 > g->n_calls)
				g->n_calls = ev->index + 1;
		} else {
			pt_srv_add_clean_string(f, "arguments", ev->text, ev->len);
		}
		cJSON_AddItemToObject(c, "function", f);
		cJSON_AddItemToArray(calls, c);
	}
	pend_chunk(g, d, NULL, 0, take_lps(g, g->sent_text), NULL);
}

static void pend_error(struct gen *g, const char *msg)
{
	cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
	if (o && e) {
		cJSON_AddStringToObject(e, "message", msg);
		cJSON_AddStringToObject(e, "type", "server_error");
		cJSON_AddNullToObject(e, "param");
		cJSON_AddNullToObject(e, "code");
		cJSON_AddItemToObject(o, "error", e);
	} else {
		cJSON_Delete(e);
	}
	pend_event(g, o);
}

/* Makes the next events (under s->mu).  Returns false when there is nothing yet. */
static bool next_events(struct gen *g)
{
	struct pt_job *j = g->j;
	size_t before = g->pend_len - g->pend_off;
	switch (g->phase) {
	case 0:
		g->phase = 1;
		if (g->kind == PT_REQ_CHAT) {
			cJSON *d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "role", "assistant");
			cJSON_AddStringToObject(d, "content", "");
			pend_chunk(g, d, NULL, 0, NULL, NULL);
			return true;
		}
		/* fall through */
	case 1:
		if (j->len > g->sent_text) {
			size_t from = g->sent_text;
			g->sent_text = j->len;
			if (g->parser)
				pt_chat_parser_feed(g->parser, j->text + from, j->len - from,
						    on_chat_event, g);
			else
				pend_chunk(g, NULL, j->text + from, j->len - from,
					   take_lps(g, j->len), NULL);
			if (g->pend_len - g->pend_off > before)
				return true;
		}
		if (j->state != PT_JOB_DONE)
			return false;
		if (j->rc != PT_OK || j->st.stop == PT_STOP_CANCELLED) {
			/* after the stream began an error is an event, and no [DONE] follows */
			pend_error(g, j->rc != PT_OK ? j->err.msg : "the request was cancelled");
			g->phase = 5;
			return true;
		}
		if (g->parser) {
			struct pt_chat_result res = { 0 };
			struct pt_error err = { 0 };
			enum pt_status rc = pt_chat_parser_finish(g->parser, on_chat_event, g, &res, &err);
			if (rc == PT_OK && res.n_calls > g->n_calls)
				g->n_calls = (uint32_t)res.n_calls;
			pt_chat_result_free(&res);
			if (rc != PT_OK) {
				pend_error(g, err.msg);
				g->phase = 5;
				return true;
			}
		}
		g->phase = 2;
		/* fall through */
	case 2: {
		cJSON *lp = take_lps(g, SIZE_MAX);
		if (lp) /* logprobs of tokens whose text never came out (end of generation) */
			pend_chunk(g, g->kind == PT_REQ_CHAT ? cJSON_CreateObject() : NULL, NULL, 0, lp, NULL);
		pend_chunk(g, NULL, NULL, 0, NULL, finish_reason(j->st.stop, g->n_calls));
		g->phase = g->include_usage ? 3 : 4;
		return true;
	}
	case 3: {
		cJSON *o = envelope(g, true);
		if (o) {
			cJSON_AddItemToObject(o, "choices", cJSON_CreateArray());
			cJSON_AddItemToObject(o, "usage", usage_json(&j->st));
			cJSON_AddItemToObject(o, "timings", timings_json(&j->st));
		}
		pend_event(g, o);
		g->phase = 4;
		return true;
	}
	case 4:
		g->phase = 5;
		pend_bytes(g, "data: [DONE]\n\n", 14, "", 0, "", 0);
		return true;
	default:
		return false;
	}
}

static ssize_t sse_read(void *ctx, char *buf, size_t cap)
{
	struct gen *g = ctx;
	pt_server *s = g->s;
	if (g->oom)
		return PT_HTTP_ABORT;
	if (g->pend_off == g->pend_len) {
		pthread_mutex_lock(&s->mu);
		bool have = next_events(g);
		if (!have && g->phase < 5) {
			struct timespec ts;
			deadline_100ms(&ts);
			pthread_cond_timedwait(&g->j->cv, &s->mu, &ts);
			have = next_events(g);
		}
		pthread_mutex_unlock(&s->mu);
		if (g->oom)
			return PT_HTTP_ABORT;
		if (g->pend_off == g->pend_len)
			return g->phase >= 5 ? PT_HTTP_END : 0;
	}
	size_t n = g->pend_len - g->pend_off;
	if (n > cap)
		n = cap;
	memcpy(buf, g->pend + g->pend_off, n);
	g->pend_off += n;
	return (ssize_t)n;
}

static void sse_free(void *ctx)
{
	gen_free(ctx);
}

/* ---- building the job ------------------------------------------------------------------- */

static bool prompt_ids(pt_server *s, struct pt_req *r, struct pt_job *j, char **text,
		       size_t *text_len, struct pt_http_resp *resp)
{
	struct pt_error err = { 0 };
	enum pt_status st;
	uint32_t n_vocab = pt_engine_n_vocab(s->e), n_ctx = pt_engine_n_ctx(s->e);
	size_t n = 0;
	if (r->kind == PT_REQ_CHAT) {
		st = pt_srv_encode_chat(s, r, &j->prompt, &n, text, text_len, &err);
		if (st == PT_OK)
			st = pt_srv_chat_marks(s, r, j->prompt, n, &j->ckpt_marks, &j->n_ckpt_marks,
					       &err);
		if (st != PT_OK) {
			pt_srv_status_error(resp, st, &err, "chat template");
			return false;
		}
	} else if (r->prompt) {
		st = pt_srv_encode_text(s, r->prompt, r->prompt_len, true, false, &j->prompt, &n, &err);
		if (st != PT_OK) {
			pt_srv_status_error(resp, st, &err, "prompt");
			return false;
		}
	} else {
		for (size_t i = 0; i < r->n_ids; i++)
			if ((uint32_t)r->ids[i] >= n_vocab) {
				pt_http_resp_error(resp, 400, NULL, "prompt", "invalid_value",
						   "prompt token %d is out of the vocabulary (%u)",
						   r->ids[i], n_vocab);
				return false;
			}
		j->prompt = r->ids;
		n = r->n_ids;
		r->ids = NULL;
		r->n_ids = 0;
	}
	j->n_prompt = n;
	if (n == 0) {
		pt_http_resp_error(resp, 400, NULL, "prompt", "invalid_value", "the prompt is empty");
		return false;
	}
	if (n >= n_ctx) {
		pt_http_resp_error(resp, 400, "exceed_context_size_error", "messages",
				   "context_length_exceeded",
				   "the prompt is %zu tokens, %zu more than the context of %u tokens "
				   "allows (at least one token must be left to generate; start the "
				   "server with a larger -c)", n, n - n_ctx + 1, n_ctx);
		return false;
	}
	return true;
}

static bool add_stop(struct pt_job *j, const char *s)
{
	char **p = pt_reallocn(j->stops, j->n_stops + 1, sizeof *p);
	if (!p)
		return false;
	j->stops = p;
	if (!(p[j->n_stops] = pt_strdup(s)))
		return false;
	j->n_stops++;
	return true;
}

static bool fill_job(pt_server *s, struct pt_req *r, struct pt_job *j, bool tools)
{
	j->sampler = r->sampler;
	if (j->sampler.seed == UINT64_MAX)
		j->sampler.seed = pt_srv_random_seed(s);
	j->presence_penalty = r->presence_penalty;
	j->frequency_penalty = r->frequency_penalty;
	j->max_new = r->max_tokens < 0 ? 0 : (uint32_t)r->max_tokens;
	j->want_logprobs = r->logprobs;
	j->top_logprobs = r->top_logprobs;
	j->no_reuse = !r->cache_prompt;
	for (size_t i = 0; i < r->n_stops; i++)
		if (!add_stop(j, r->stops[i]))
			return false;
	/* text a family writes after a call that belongs to the next turn */
	const char *const *extra = tools ? pt_chat_format_stops(s->chat_format) : NULL;
	for (size_t i = 0; extra && extra[i]; i++)
		if (!add_stop(j, extra[i]))
			return false;
	return true;
}

static pt_grammar_vocab *grammar_vocab(pt_server *s, struct pt_error *err)
{
	pthread_mutex_lock(&s->gvocab_mu);
	if (!s->gvocab)
		pt_grammar_vocab_build(s->tok, &s->gvocab, err);
	pthread_mutex_unlock(&s->gvocab_mu);
	return s->gvocab;
}

/* response_format json_object / json_schema, or tool_choice required / named: the job's
 * grammar and its state.  False after answering 400 (unsupported schema) or 503. */
static bool constrain(pt_server *s, const struct pt_req *r, struct pt_job *j,
		      struct pt_http_resp *resp)
{
	struct pt_error err = { 0 };
	enum pt_status st = PT_OK;
	bool forced = r->tools && (r->tool_choice == PT_TOOLS_REQUIRED ||
				   r->tool_choice == PT_TOOLS_NAMED);
	if (r->format == PT_FORMAT_TEXT && !forced)
		return true;
	if (forced && r->format != PT_FORMAT_TEXT) {
		pt_http_resp_error(resp, 400, NULL, "response_format", "invalid_value",
				   "response_format cannot be combined with a forced tool_choice");
		return false;
	}
	const char *param = forced ? "tool_choice" : "response_format";
	if (forced)
		st = pt_chat_tool_grammar(s->chat_format, r->tools,
					  r->tool_choice == PT_TOOLS_NAMED ? r->tool_name : NULL,
					  &j->grammar, &err);
	else if (r->format == PT_FORMAT_JSON_OBJECT)
		st = pt_grammar_json_object(&j->grammar, &err);
	else
		st = pt_grammar_from_schema(r->schema, &j->grammar, &err);
	if (st != PT_OK) {
		if (st == PT_E_NOMEM)
			pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		else
			pt_http_resp_error(resp, 400, NULL, param, "unsupported_schema", "%s: %s", param,
					   err.msg);
		return false;
	}
	pt_grammar_vocab *v = grammar_vocab(s, &err);
	if (!v || pt_grammar_state_new(j->grammar, v, &j->gstate, &err) != PT_OK) {
		pt_http_resp_error(resp, 503, NULL, NULL, NULL, "constrained decoding: %s", err.msg);
		return false;
	}
	return true;
}

static bool make_parser(pt_server *s, const struct pt_req *r, const char *prompt,
			size_t prompt_len, struct gen *g, struct pt_http_resp *resp)
{
	struct pt_chat_parser_opts po = { 0 };
	struct pt_error err = { 0 };
	const char *names[PT_REQ_MAX_TOOLS];
	size_t n = 0;
	for (const cJSON *t = r->tools ? r->tools->child : NULL; t && n < PT_REQ_MAX_TOOLS; t = t->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		names[n++] = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
	}
	po.format = s->chat_format;
	po.tools = r->tools && r->tool_choice != PT_TOOLS_NONE;
	po.reasoning = (r->reasoning_format >= 0 ? r->reasoning_format : s->o.reasoning_format) == 1;
	/* a forced call starts at the reply's first byte (chatgrammar.c): even after a prompt
	 * that opened the reasoning block (Qwen3.5's "<think>\n"), the reply is the call */
	bool forced = r->tools && (r->tool_choice == PT_TOOLS_REQUIRED ||
				   r->tool_choice == PT_TOOLS_NAMED);
	po.thinking_open = !forced && prompt &&
			   pt_chat_prompt_thinking_open(s->chat_format, prompt, prompt_len);
	po.tool_names = n ? names : NULL;
	po.n_tool_names = n;
	po.tool_defs = r->tools; /* XML parameter values are typed by the schemas */
	if (pt_chat_parser_new(&po, &g->parser, &err) == PT_OK)
		return true;
	pt_srv_status_error(resp, PT_E_NOMEM, &err, "reply parser");
	return false;
}

static void generation(pt_server *s, enum pt_req_kind kind, const struct pt_http_req *req,
		       struct pt_http_resp *resp)
{
	struct pt_req r;
	if (!pt_srv_decode(s, kind, req, &r, resp))
		return;
	struct gen *g = pt_calloc(1, sizeof *g);
	struct pt_job *j = pt_srv_job_new();
	if (!g || !j) {
		pt_free(g);
		pt_free(j);
		pt_req_free(&r);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		return;
	}
	g->s = s;
	g->kind = kind;
	g->include_usage = r.include_usage;
	g->logprobs = r.logprobs;
	g->created = (long)time(NULL);
	pt_srv_random_id(s, kind == PT_REQ_CHAT ? "chatcmpl-" : "cmpl-", g->id, sizeof g->id);
	bool stream = r.stream;
	char *text = NULL;
	size_t text_len = 0;
	bool tools = kind == PT_REQ_CHAT && r.tools && r.tool_choice != PT_TOOLS_NONE;
	bool ok = prompt_ids(s, &r, j, &text, &text_len, resp) && fill_job(s, &r, j, tools) &&
		  constrain(s, &r, j, resp) &&
		  (kind != PT_REQ_CHAT || make_parser(s, &r, text, text_len, g, resp));
	pt_free(text);
	pt_req_free(&r);
	if (!ok) {
		if (!resp->status)
			pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		j->refs = 1;
		pt_srv_release(s, j);
		pt_chat_parser_free(g->parser);
		pt_free(g);
		return;
	}
	struct pt_error err = { 0 };
	enum pt_status st = pt_srv_submit(s, j, &err);
	if (st != PT_OK) {
		pt_http_resp_error(resp, 503, NULL, NULL,
				   st == PT_E_BUSY ? "queue_full" : "shutting_down", "%s", err.msg);
		if (st == PT_E_BUSY)
			pt_http_resp_header(resp, "Retry-After", "1");
		j->refs = 1;
		pt_srv_release(s, j);
		pt_chat_parser_free(g->parser);
		pt_free(g);
		return;
	}
	g->j = j;
	if (stream) {
		resp->status = 200;
		snprintf(resp->content_type, sizeof resp->content_type, "text/event-stream");
		pt_http_resp_header(resp, "Cache-Control", "no-cache");
		pt_http_resp_header(resp, "X-Accel-Buffering", "no");
		resp->read = sse_read;
		resp->read_ctx = g;
		resp->read_free = sse_free;
		return;
	}
	if (wait_done(g, req))
		answer_done(g, resp);
	else
		pt_http_resp_error(resp, 499, NULL, NULL, NULL, "client closed the connection");
	gen_free(g);
}

static void on_chat(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	generation(ctx, PT_REQ_CHAT, req, resp);
}

static void on_completion(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	generation(ctx, PT_REQ_COMPLETION, req, resp);
}

enum pt_status pt_srv_register_completions(pt_server *s, struct pt_error *err)
{
	const struct pt_route routes[] = {
		{ "POST", "/v1/chat/completions", false, false, on_chat, s },
		{ "POST", "/chat/completions", false, false, on_chat, s },
		{ "POST", "/v1/completions", false, false, on_completion, s },
		{ "POST", "/completions", false, false, on_completion, s },
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		enum pt_status st = pt_routes_add(&s->routes, &routes[i], err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}
