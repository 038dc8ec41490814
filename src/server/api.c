/* api.c - the OpenAI-style endpoints: /v1/chat/completions, /v1/completions (JSON or SSE),
 * /v1/models, /health, and llama-server's /tokenize, /detokenize, /apply-template.
 * Requests are decoded by request.c; prompts built by prompt.c; generation runs in
 * worker.c; this file turns a job's progress into the wire format. */
#include "server/srv_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"

/* ---- small JSON helpers ----------------------------------------------------------------- */

/* Valid UTF-8 copy of s[0..n): invalid sequences become U+FFFD (JSON must be UTF-8). */
static char *utf8_clean(const char *s, size_t n)
{
	char *o = pt_malloc(n * 3 + 1), *w = o;
	if (!o)
		return NULL;
	size_t i = 0;
	while (i < n) {
		size_t ok = pt_req_utf8_check((const unsigned char *)s + i, n - i);
		memcpy(w, s + i, ok);
		w += ok;
		i += ok;
		if (i < n) {
			memcpy(w, "\xEF\xBF\xBD", 3);
			w += 3;
			i++;
			while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
				i++;
		}
	}
	*w = 0;
	return o;
}

static cJSON *add_clean_string(cJSON *obj, const char *key, const char *s, size_t n)
{
	char *c = utf8_clean(s, n);
	cJSON *v = c ? cJSON_AddStringToObject(obj, key, c) : NULL;
	pt_free(c);
	return v;
}

static void req_error(struct pt_http_resp *resp, const struct pt_req_error *e)
{
	pt_http_resp_error(resp, e->status, NULL, e->param[0] ? e->param : NULL,
			   e->code[0] ? e->code : NULL, "%s", e->message);
}

/* An engine/template status -> an HTTP answer: bad input is 400, never 500. */
static void status_error(struct pt_http_resp *resp, enum pt_status st,
			 const struct pt_error *err, const char *what)
{
	int code = st == PT_E_NOMEM ? 503 : st == PT_E_IO ? 500 : 400;
	pt_http_resp_error(resp, code, NULL, NULL, NULL, "%s: %s", what,
			   err->msg[0] ? err->msg : pt_status_str(st));
}

static bool decode(pt_server *s, enum pt_req_kind kind, const struct pt_http_req *req,
		   struct pt_req *r, struct pt_http_resp *resp)
{
	struct pt_req_error e;
	/* Content-Type is not checked: curl -d sends a form type, and the body decides. */
	if (pt_req_decode(kind, req->body, req->body_len, &s->o.defaults, r, &e))
		return true;
	req_error(resp, &e);
	return false;
}

static void random_id(pt_server *s, const char *prefix, char *out, size_t cap)
{
	static const char al[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	size_t n = strlen(prefix);
	snprintf(out, cap, "%s", prefix);
	uint64_t x = 0;
	for (size_t i = 0; i < 24 && n + i + 1 < cap; i++) {
		if (i % 6 == 0) /* 6 letters use 36 of the seed's 53 random bits */
			x = pt_srv_random_seed(s);
		out[n + i] = al[x % 62];
		x /= 62;
		out[n + i + 1] = 0;
	}
}

/* ---- generation requests ---------------------------------------------------------------- */

struct gen {
	pt_server *s;
	struct pt_job *j;
	enum pt_req_kind kind;
	bool include_usage, logprobs;
	char id[48];
	long created;
	/* streaming state */
	int phase;                  /* 0 role chunk, 1 deltas, 2 final, 3 usage, 4 [DONE], 5 end */
	size_t sent_text, sent_lps;
	char *pend;                 /* formatted bytes not yet handed to the core */
	size_t pend_len, pend_off;
};

static const char *finish_reason(enum pt_stop_reason r)
{
	return r == PT_STOP_MAX_NEW || r == PT_STOP_CONTEXT ? "length" : "stop";
}

static cJSON *usage_json(const struct pt_gen_stats *st)
{
	cJSON *u = cJSON_CreateObject(), *d = cJSON_CreateObject(), *t = NULL;
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
	(void)t;
	return u;
}

static cJSON *timings_json(const struct pt_gen_stats *st)
{
	cJSON *t = cJSON_CreateObject();
	if (!t)
		return NULL;
	cJSON_AddNumberToObject(t, "cache_n", st->reused_tokens);
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
	add_clean_string(o, "token", buf, n);
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

/* The whole answer of a finished job (non-streaming).  Under s->mu. */
static cJSON *final_json(const struct gen *g)
{
	const struct pt_job *j = g->j;
	cJSON *o = envelope(g, false), *choices = cJSON_CreateArray(), *c = cJSON_CreateObject();
	if (!o || !choices || !c) {
		cJSON_Delete(o);
		cJSON_Delete(choices);
		cJSON_Delete(c);
		return NULL;
	}
	cJSON_AddNumberToObject(c, "index", 0);
	if (g->kind == PT_REQ_CHAT) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "role", "assistant");
		add_clean_string(m, "content", j->text ? j->text : "", j->len);
		cJSON_AddItemToObject(c, "message", m);
	} else {
		add_clean_string(c, "text", j->text ? j->text : "", j->len);
	}
	if (g->logprobs)
		cJSON_AddItemToObject(c, "logprobs", logprobs_json(g->s, j->lps, 0, j->n_lps));
	else
		cJSON_AddNullToObject(c, "logprobs");
	cJSON_AddStringToObject(c, "finish_reason", finish_reason(j->st.stop));
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
	pt_free(g->pend);
	pt_free(g);
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
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
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
	pthread_mutex_lock(&s->mu);
	if (j->rc != PT_OK) {
		struct pt_error err = j->err;
		enum pt_status rc = j->rc;
		pthread_mutex_unlock(&s->mu);
		status_error(resp, rc, &err, "generation failed");
		return;
	}
	if (j->st.stop == PT_STOP_CANCELLED) {
		pthread_mutex_unlock(&s->mu);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL,
				   "the request was cancelled (the server is shutting down)");
		return;
	}
	cJSON *o = final_json(g);
	pthread_mutex_unlock(&s->mu);
	pt_http_resp_json(resp, 200, o);
}

/* ---- SSE -------------------------------------------------------------------------------- */

static bool pend_event(struct gen *g, cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!s)
		return false;
	size_t n = strlen(s);
	char *p = pt_malloc(n + 9);
	if (p) {
		memcpy(p, "data: ", 6);
		memcpy(p + 6, s, n);
		memcpy(p + 6 + n, "\n\n", 3);
		pt_free(g->pend);
		g->pend = p;
		g->pend_len = n + 8;
		g->pend_off = 0;
	}
	cJSON_free(s);
	return p != NULL;
}

static void pend_raw(struct gen *g, const char *text)
{
	size_t n = strlen(text);
	pt_free(g->pend);
	g->pend = pt_strdup(text);
	g->pend_len = g->pend ? n : 0;
	g->pend_off = 0;
}

/* A chunk with one choice; delta text[0..n) (chat: content, completion: text). */
static cJSON *chunk(struct gen *g, const char *text, size_t n, bool role, const char *finish)
{
	cJSON *o = envelope(g, true), *choices = cJSON_CreateArray(), *c = cJSON_CreateObject();
	if (!o || !choices || !c) {
		cJSON_Delete(o);
		cJSON_Delete(choices);
		cJSON_Delete(c);
		return NULL;
	}
	cJSON_AddNumberToObject(c, "index", 0);
	if (g->kind == PT_REQ_CHAT) {
		cJSON *d = cJSON_CreateObject();
		if (role) {
			cJSON_AddStringToObject(d, "role", "assistant");
			cJSON_AddStringToObject(d, "content", "");
		} else if (text) {
			add_clean_string(d, "content", text, n);
		}
		cJSON_AddItemToObject(c, "delta", d);
	} else {
		add_clean_string(c, "text", text ? text : "", text ? n : 0);
	}
	if (g->logprobs && !role && !finish && g->j->n_lps > g->sent_lps) {
		/* the tokens whose text is now out */
		size_t to = g->sent_lps;
		while (to < g->j->n_lps && g->j->lps[to].text_end <= g->sent_text + n)
			to++;
		cJSON_AddItemToObject(c, "logprobs", logprobs_json(g->s, g->j->lps, g->sent_lps, to));
		g->sent_lps = to;
	} else {
		cJSON_AddNullToObject(c, "logprobs");
	}
	if (finish)
		cJSON_AddStringToObject(c, "finish_reason", finish);
	else
		cJSON_AddNullToObject(c, "finish_reason");
	cJSON_AddItemToArray(choices, c);
	cJSON_AddItemToObject(o, "choices", choices);
	return o;
}

/* Makes the next event (under s->mu).  Returns false when there is none yet. */
static bool next_event(struct gen *g)
{
	struct pt_job *j = g->j;
	switch (g->phase) {
	case 0:
		g->phase = 1;
		if (g->kind == PT_REQ_CHAT)
			return pend_event(g, chunk(g, NULL, 0, true, NULL));
		/* fall through */
	case 1:
		if (j->len > g->sent_text || (g->logprobs && j->n_lps > g->sent_lps &&
					      j->state == PT_JOB_DONE)) {
			size_t n = j->len - g->sent_text;
			bool ok = pend_event(g, chunk(g, j->text + g->sent_text, n, false, NULL));
			g->sent_text = j->len;
			return ok;
		}
		if (j->state != PT_JOB_DONE)
			return false;
		if (j->rc != PT_OK || j->st.stop == PT_STOP_CANCELLED) {
			/* after the stream began an error is an event, and no [DONE] follows */
			cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "message", j->rc != PT_OK ? j->err.msg :
						"the request was cancelled");
			cJSON_AddStringToObject(e, "type", "server_error");
			cJSON_AddNullToObject(e, "param");
			cJSON_AddNullToObject(e, "code");
			cJSON_AddItemToObject(o, "error", e);
			g->phase = 5;
			return pend_event(g, o);
		}
		g->phase = 2;
		/* fall through */
	case 2: {
		cJSON *o = chunk(g, NULL, 0, false, finish_reason(j->st.stop));
		if (o)
			cJSON_AddItemToObject(o, "timings", timings_json(&j->st));
		g->phase = g->include_usage ? 3 : 4;
		return pend_event(g, o);
	}
	case 3: {
		cJSON *o = envelope(g, true);
		if (o) {
			cJSON_AddItemToObject(o, "choices", cJSON_CreateArray());
			cJSON_AddItemToObject(o, "usage", usage_json(&j->st));
		}
		g->phase = 4;
		return pend_event(g, o);
	}
	case 4:
		g->phase = 5;
		pend_raw(g, "data: [DONE]\n\n");
		return true;
	default:
		return false;
	}
}

static ssize_t sse_read(void *ctx, char *buf, size_t cap)
{
	struct gen *g = ctx;
	pt_server *s = g->s;
	if (g->pend_off == g->pend_len) {
		pthread_mutex_lock(&s->mu);
		bool have = next_event(g);
		if (!have && g->phase < 5) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&g->j->cv, &s->mu, &ts);
			have = next_event(g);
		}
		pthread_mutex_unlock(&s->mu);
		if (!have)
			return g->phase >= 5 && g->pend_off == g->pend_len ? PT_HTTP_END : 0;
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

static bool prompt_ids(pt_server *s, struct pt_req *r, struct pt_job *j,
		       struct pt_http_resp *resp)
{
	struct pt_error err = { 0 };
	enum pt_status st;
	uint32_t n_vocab = pt_engine_n_vocab(s->e), n_ctx = pt_engine_n_ctx(s->e);
	size_t n = 0;
	if (r->kind == PT_REQ_CHAT) {
		st = pt_srv_encode_chat(s, r, &j->prompt, &n, &err);
		if (st != PT_OK) {
			status_error(resp, st, &err, "chat template");
			return false;
		}
	} else if (r->prompt) {
		st = pt_srv_encode_text(s, r->prompt, r->prompt_len, true, false, &j->prompt, &n, &err);
		if (st != PT_OK) {
			status_error(resp, st, &err, "prompt");
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

static bool fill_job(pt_server *s, struct pt_req *r, struct pt_job *j)
{
	j->sampler = r->sampler;
	if (j->sampler.seed == UINT64_MAX)
		j->sampler.seed = pt_srv_random_seed(s);
	j->presence_penalty = r->presence_penalty;
	j->frequency_penalty = r->frequency_penalty;
	j->max_new = r->max_tokens < 0 ? 0 : (uint32_t)r->max_tokens;
	j->want_logprobs = r->logprobs;
	j->top_logprobs = r->top_logprobs;
	if (r->n_stops) {
		j->stops = pt_calloc(r->n_stops, sizeof *j->stops);
		if (!j->stops)
			return false;
		for (size_t i = 0; i < r->n_stops; i++) {
			j->stops[i] = r->stops[i];
			r->stops[i] = NULL;
		}
		j->n_stops = r->n_stops;
		r->n_stops = 0;
	}
	return true;
}

static void generation(pt_server *s, enum pt_req_kind kind, const struct pt_http_req *req,
		       struct pt_http_resp *resp)
{
	struct pt_req r;
	if (!decode(s, kind, req, &r, resp))
		return;
	if (kind == PT_REQ_CHAT && (r.format != PT_FORMAT_TEXT ||
				    (r.tools && r.tool_choice != PT_TOOLS_AUTO &&
				     r.tool_choice != PT_TOOLS_NONE))) {
		/* constrained decoding arrives with the grammar branch */
		pt_http_resp_error(resp, 400, NULL, r.format != PT_FORMAT_TEXT ? "response_format"
				   : "tool_choice", "unsupported",
				   "constrained decoding (response_format json, tool_choice "
				   "required/named) is not available in this build");
		pt_req_free(&r);
		return;
	}
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
	random_id(s, kind == PT_REQ_CHAT ? "chatcmpl-" : "cmpl-", g->id, sizeof g->id);
	bool stream = r.stream;
	bool ok = prompt_ids(s, &r, j, resp) && fill_job(s, &r, j);
	pt_req_free(&r);
	if (!ok) {
		if (!resp->status)
			pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		j->refs = 1;
		pt_srv_release(s, j);
		pt_free(g);
		return;
	}
	struct pt_error err = { 0 };
	enum pt_status st = pt_srv_submit(s, j, &err);
	if (st != PT_OK) {
		pt_http_resp_error(resp, st == PT_E_BUSY ? 503 : 503, NULL, NULL,
				   st == PT_E_BUSY ? "queue_full" : "shutting_down", "%s", err.msg);
		if (st == PT_E_BUSY)
			pt_http_resp_header(resp, "Retry-After", "1");
		j->refs = 1;
		pt_srv_release(s, j);
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

/* ---- the other endpoints ---------------------------------------------------------------- */

static void on_health(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	(void)ctx;
	(void)req;
	static const char ok[] = "{\"status\":\"ok\"}";
	pt_http_resp_bytes(resp, 200, "application/json", ok, sizeof ok - 1);
}

static void on_models(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	pt_server *s = ctx;
	(void)req;
	const struct pt_model *m = pt_engine_model(s->e);
	cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray(), *e = cJSON_CreateObject();
	cJSON *meta = cJSON_CreateObject();
	if (!o || !data || !e || !meta) {
		cJSON_Delete(o);
		cJSON_Delete(data);
		cJSON_Delete(e);
		cJSON_Delete(meta);
		pt_http_resp_error(resp, 503, NULL, NULL, NULL, "out of memory");
		return;
	}
	cJSON_AddStringToObject(o, "object", "list");
	cJSON_AddStringToObject(e, "id", s->model_id);
	cJSON_AddStringToObject(e, "object", "model");
	cJSON_AddNumberToObject(e, "created", (double)(long)s->t_start_wall);
	cJSON_AddStringToObject(e, "owned_by", "particle");
	cJSON_AddStringToObject(meta, "architecture", m->hp.arch_name);
	cJSON_AddNumberToObject(meta, "n_ctx", pt_engine_n_ctx(s->e));
	cJSON_AddNumberToObject(meta, "n_ctx_train", m->hp.n_ctx_train);
	cJSON_AddNumberToObject(meta, "n_vocab", pt_engine_n_vocab(s->e));
	cJSON_AddNumberToObject(meta, "n_embd", m->hp.n_embd);
	cJSON_AddNumberToObject(meta, "n_layer", m->hp.n_layer);
	cJSON_AddNumberToObject(meta, "n_expert", m->hp.n_expert);
	cJSON_AddNumberToObject(meta, "n_expert_used", m->hp.n_expert_used);
	cJSON_AddBoolToObject(meta, "chat_template", s->tmpl != NULL);
	cJSON_AddItemToObject(e, "meta", meta);
	cJSON_AddItemToArray(data, e);
	cJSON_AddItemToObject(o, "data", data);
	pt_http_resp_json(resp, 200, o);
}

static void on_tokenize(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	pt_server *s = ctx;
	struct pt_req r;
	struct pt_error err = { 0 };
	int32_t *ids = NULL;
	size_t n = 0;
	if (!decode(s, PT_REQ_TOKENIZE, req, &r, resp))
		return;
	enum pt_status st = pt_srv_encode_text(s, r.prompt, r.prompt_len, r.add_special,
					       r.parse_special, &ids, &n, &err);
	bool pieces = r.with_pieces;
	pt_req_free(&r);
	if (st != PT_OK) {
		status_error(resp, st, &err, "tokenize");
		return;
	}
	cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
	cJSON_AddItemToObject(o, "tokens", a);
	for (size_t i = 0; a && i < n; i++) {
		if (!pieces) {
			cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
			continue;
		}
		char buf[256];
		size_t len = 0;
		cJSON *t = cJSON_CreateObject();
		cJSON_AddNumberToObject(t, "id", ids[i]);
		if (pt_tok_piece(s->tok, ids[i], true, buf, sizeof buf, &len, &err) != PT_OK)
			len = 0;
		if (pt_req_utf8_check((const unsigned char *)buf, len) == len) {
			add_clean_string(t, "piece", buf, len);
		} else {
			cJSON *b = cJSON_CreateArray();
			for (size_t k = 0; k < len; k++)
				cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)buf[k]));
			cJSON_AddItemToObject(t, "piece", b);
		}
		cJSON_AddItemToArray(a, t);
	}
	pt_free(ids);
	pt_http_resp_json(resp, 200, o);
}

static void on_detokenize(void *ctx, const struct pt_http_req *req, struct pt_http_resp *resp)
{
	pt_server *s = ctx;
	struct pt_req r;
	struct pt_error err = { 0 };
	if (!decode(s, PT_REQ_DETOKENIZE, req, &r, resp))
		return;
	uint32_t n_vocab = pt_engine_n_vocab(s->e);
	for (size_t i = 0; i < r.n_ids; i++)
		if ((uint32_t)r.ids[i] >= n_vocab) {
			pt_http_resp_error(resp, 400, NULL, "tokens", "invalid_value",
					   "token %d is out of the vocabulary (%u)", r.ids[i], n_vocab);
			pt_req_free(&r);
			return;
		}
	char *text = NULL;
	size_t len = 0;
	enum pt_status st = pt_tok_decode(s->tok, r.ids, r.n_ids, false, true, &text, &len, &err);
	pt_req_free(&r);
	if (st != PT_OK) {
		status_error(resp, st, &err, "detokenize");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	add_clean_string(o, "content", text, len);
	pt_free(text);
	pt_http_resp_json(resp, 200, o);
}

static void on_apply_template(void *ctx, const struct pt_http_req *req,
			      struct pt_http_resp *resp)
{
	pt_server *s = ctx;
	struct pt_req r;
	struct pt_error err = { 0 };
	char *text = NULL;
	size_t len = 0;
	if (!decode(s, PT_REQ_APPLY_TEMPLATE, req, &r, resp))
		return;
	enum pt_status st = pt_srv_render_chat(s, &r, r.add_generation_prompt, &text, &len, &err);
	pt_req_free(&r);
	if (st != PT_OK) {
		status_error(resp, st, &err, "chat template");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	add_clean_string(o, "prompt", text, len);
	pt_free(text);
	pt_http_resp_json(resp, 200, o);
}

enum pt_status pt_srv_register_api(pt_server *s, struct pt_error *err)
{
	const struct pt_route routes[] = {
		{ "POST", "/v1/chat/completions", false, false, on_chat, s },
		{ "POST", "/chat/completions", false, false, on_chat, s },
		{ "POST", "/v1/completions", false, false, on_completion, s },
		{ "POST", "/completions", false, false, on_completion, s },
		{ "GET", "/v1/models", false, false, on_models, s },
		{ "GET", "/models", false, false, on_models, s },
		{ "GET", "/health", false, true, on_health, s },
		{ "GET", "/v1/health", false, true, on_health, s },
		{ "POST", "/tokenize", false, false, on_tokenize, s },
		{ "POST", "/detokenize", false, false, on_detokenize, s },
		{ "POST", "/apply-template", false, false, on_apply_template, s },
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		enum pt_status st = pt_routes_add(&s->routes, &routes[i], err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}
