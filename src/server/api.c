/* api.c - the small endpoints: /v1/models, /health, and llama-server's /tokenize,
 * /detokenize, /apply-template, plus the helpers every endpoint shares (request decoding
 * into an answer, OpenAI errors from statuses, UTF-8-clean JSON strings, response ids).
 * The generation endpoints are completions.c. */
#include "server/srv_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"

/* ---- small JSON helpers ----------------------------------------------------------------- */

/* s[0..n) as a JSON string literal (quotes included): valid UTF-8 copied, invalid sequences
 * as U+FFFD (JSON must be UTF-8), quotes, backslashes and control bytes escaped, NUL as
 * \u0000 (model output may contain it; a C string would cut the text there). */
static char *json_literal(const char *s, size_t n)
{
	char *o = pt_malloc(n * 6 + 3), *w = o;
	if (!o)
		return NULL;
	*w++ = '"';
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x80) {
			/* one character at most 4 bytes: check only those (linear overall) */
			size_t ok = pt_req_utf8_check((const unsigned char *)s + i, n - i < 4 ? n - i : 4);
			size_t k = 1;
			while (k < ok && k < 4 && ((unsigned char)s[i + k] & 0xC0) == 0x80)
				k++; /* one whole character */
			if (ok > 0) {
				memcpy(w, s + i, k);
				w += k;
				i += k;
				continue;
			}
			memcpy(w, "\xEF\xBF\xBD", 3);
			w += 3;
			i++;
			while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
				i++;
		} else if (c == '"' || c == '\\') {
			*w++ = '\\';
			*w++ = (char)c;
			i++;
		} else if (c < 0x20) {
			static const char hex[] = "0123456789abcdef";
			const char *e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
			if (e) {
				memcpy(w, e, 2);
				w += 2;
			} else {
				memcpy(w, "\\u00", 4);
				w[4] = hex[c >> 4];
				w[5] = hex[c & 15];
				w += 6;
			}
			i++;
		} else {
			*w++ = (char)c;
			i++;
		}
	}
	*w++ = '"';
	*w = 0;
	return o;
}

cJSON *pt_srv_add_clean_string(cJSON *obj, const char *key, const char *s, size_t n)
{
	char *lit = json_literal(s, n);
	cJSON *v = lit ? cJSON_AddRawToObject(obj, key, lit) : NULL;
	pt_free(lit);
	return v;
}

static void req_error(struct pt_http_resp *resp, const struct pt_req_error *e)
{
	pt_http_resp_error(resp, e->status, NULL, e->param[0] ? e->param : NULL,
			   e->code[0] ? e->code : NULL, "%s", e->message);
}

/* An engine/template status -> an HTTP answer: bad input is 400, never 500. */
void pt_srv_status_error(struct pt_http_resp *resp, enum pt_status st,
			 const struct pt_error *err, const char *what)
{
	int code = st == PT_E_NOMEM ? 503 : st == PT_E_IO ? 500 : 400;
	pt_http_resp_error(resp, code, NULL, NULL, NULL, "%s: %s", what,
			   err->msg[0] ? err->msg : pt_status_str(st));
}

bool pt_srv_decode(pt_server *s, enum pt_req_kind kind, const struct pt_http_req *req,
		   struct pt_req *r, struct pt_http_resp *resp)
{
	struct pt_req_error e;
	/* Content-Type is not checked: curl -d sends a form type, and the body decides. */
	if (pt_req_decode(kind, req->body, req->body_len, &s->o.defaults, r, &e))
		return true;
	req_error(resp, &e);
	return false;
}

void pt_srv_random_id(pt_server *s, const char *prefix, char *out, size_t cap)
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
	if (!pt_srv_decode(s, PT_REQ_TOKENIZE, req, &r, resp))
		return;
	enum pt_status st = pt_srv_encode_text(s, r.prompt, r.prompt_len, r.add_special,
					       r.parse_special, &ids, &n, &err);
	bool pieces = r.with_pieces;
	pt_req_free(&r);
	if (st != PT_OK) {
		pt_srv_status_error(resp, st, &err, "tokenize");
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
			pt_srv_add_clean_string(t, "piece", buf, len);
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
	if (!pt_srv_decode(s, PT_REQ_DETOKENIZE, req, &r, resp))
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
		pt_srv_status_error(resp, st, &err, "detokenize");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	pt_srv_add_clean_string(o, "content", text, len);
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
	if (!pt_srv_decode(s, PT_REQ_APPLY_TEMPLATE, req, &r, resp))
		return;
	enum pt_status st = pt_srv_render_chat(s, &r, r.add_generation_prompt, &text, &len, &err);
	pt_req_free(&r);
	if (st != PT_OK) {
		pt_srv_status_error(resp, st, &err, "chat template");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	pt_srv_add_clean_string(o, "prompt", text, len);
	pt_free(text);
	pt_http_resp_json(resp, 200, o);
}

enum pt_status pt_srv_register_api(pt_server *s, struct pt_error *err)
{
	enum pt_status st0 = pt_srv_register_completions(s, err);
	if (st0 != PT_OK)
		return st0;
	const struct pt_route routes[] = {
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
