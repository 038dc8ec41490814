/* prompt.c - request -> prompt ids: the chat template rendered the way `particle run
 * --messages` and llama.cpp render it (messages, tools only when non-empty,
 * add_generation_prompt, bos_token, eos_token, then chat_template_kwargs), the rendered
 * BOS/EOS the tokenizer adds itself dropped, then tokenized with special tokens parsed.
 *
 * add_generation_prompt is always set explicitly, true or false (Hugging Face's
 * apply_chat_template semantics): some templates default it to true when undefined. */
#include "server/srv_int.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "gen/engine.h"
#include "token/tok.h"
#include "util/alloc.h"

static bool reserved(const char *k)
{
	static const char *const names[] = { "messages", "tools", "add_generation_prompt",
					     "bos_token", "eos_token" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(k, names[i]) == 0)
			return true;
	return false;
}

static cJSON *build_vars(pt_server *s, const struct pt_req *r, bool add_gen)
{
	cJSON *vars = cJSON_CreateObject();
	cJSON *msgs = cJSON_Duplicate(r->messages, true);
	if (!vars || !msgs || !cJSON_AddItemToObject(vars, "messages", msgs)) {
		cJSON_Delete(msgs);
		cJSON_Delete(vars);
		return NULL;
	}
	if (r->tools) {
		cJSON *t = cJSON_Duplicate(r->tools, true);
		if (!t || !cJSON_AddItemToObject(vars, "tools", t)) {
			cJSON_Delete(t);
			cJSON_Delete(vars);
			return NULL;
		}
	}
	if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", add_gen) ||
	    !cJSON_AddStringToObject(vars, "bos_token", s->bos_text ? s->bos_text : "") ||
	    !cJSON_AddStringToObject(vars, "eos_token", s->eos_text ? s->eos_text : "")) {
		cJSON_Delete(vars);
		return NULL;
	}
	for (const cJSON *k = r->template_kwargs ? r->template_kwargs->child : NULL; k; k = k->next) {
		if (!k->string || reserved(k->string))
			continue;
		cJSON *v = cJSON_Duplicate(k, true);
		cJSON_DeleteItemFromObjectCaseSensitive(vars, k->string);
		if (!v || !cJSON_AddItemToObject(vars, k->string, v)) {
			cJSON_Delete(v);
			cJSON_Delete(vars);
			return NULL;
		}
	}
	return vars;
}

enum pt_status pt_srv_render_chat(pt_server *s, const struct pt_req *r, bool add_gen,
				  char **text, size_t *len, struct pt_error *err)
{
	*text = NULL;
	*len = 0;
	if (!s->tmpl)
		return pt_error_set(err, PT_E_UNSUPPORTED, "the model has no chat template (start "
				    "the server with --chat-template-file FILE, or use /v1/completions)");
	cJSON *vars = build_vars(s, r, add_gen);
	if (!vars)
		return pt_error_set(err, PT_E_NOMEM, "out of memory building the template variables");
	enum pt_status st = pt_tmpl_render(s->tmpl, vars, NULL, 0, text, len, err);
	cJSON_Delete(vars);
	return st;
}

/* The rendered text's ids: a rendered BOS/EOS the tokenizer adds itself is dropped from the
 * text first (llama.cpp), special tokens parsed. */
static enum pt_status encode_rendered(pt_server *s, const char *text, size_t len, int32_t **ids,
				      size_t *n, struct pt_error *err)
{
	size_t start = 0, keep = 0;
	pt_tmpl_strip_special(text, len, s->bos_text, pt_tok_add_bos(s->tok), s->eos_text,
			      pt_tok_add_eos(s->tok), &start, &keep);
	return pt_tok_encode_alloc(s->tok, text + start, keep, true, true, ids, n, err);
}

enum pt_status pt_srv_encode_chat(pt_server *s, const struct pt_req *r, int32_t **ids,
				  size_t *n, char **out_text, size_t *out_len, struct pt_error *err)
{
	char *text = NULL;
	size_t len = 0;
	*ids = NULL;
	*n = 0;
	enum pt_status st = pt_srv_render_chat(s, r, r->add_generation_prompt, &text, &len, err);
	if (st != PT_OK)
		return st;
	st = encode_rendered(s, text, len, ids, n, err);
	if (st == PT_OK && out_text) {
		*out_text = text;
		*out_len = len;
	} else {
		pt_free(text);
	}
	return st;
}

/* The conversation's first k messages rendered without a generation prompt and encoded: the
 * boundary is how many of the full prompt's ids they share.  A template that renders an
 * earlier turn differently once later turns follow (Qwen3 drops old reasoning, say) only
 * moves a boundary earlier: any position is a valid checkpoint, and one the next request
 * shares is what makes it useful. */
static enum pt_status boundary(pt_server *s, const struct pt_req *r, cJSON *msgs, const int32_t *ids,
			       size_t n_ids, int64_t *out, struct pt_error *err)
{
	struct pt_req rr = *r;
	rr.messages = msgs;
	char *text = NULL;
	size_t len = 0, n = 0;
	int32_t *pre = NULL;
	enum pt_status st = pt_srv_render_chat(s, &rr, false, &text, &len, err);
	if (st == PT_OK)
		st = encode_rendered(s, text, len, &pre, &n, err);
	size_t k = 0;
	while (st == PT_OK && k < n && k < n_ids && pre[k] == ids[k])
		k++;
	*out = (int64_t)k;
	pt_free(text);
	pt_free(pre);
	return st;
}

enum pt_status pt_srv_chat_marks(pt_server *s, const struct pt_req *r, const int32_t *ids,
				 size_t n_ids, int64_t **marks, uint32_t *n, struct pt_error *err)
{
	*marks = NULL;
	*n = 0;
	const int m = cJSON_GetArraySize(r->messages);
	if (pt_engine_ckpt_max(s->e) == 0 || m <= 0)
		return PT_OK;
	/* the last PT_SRV_CHAT_MARKS prefixes, the whole conversation (before the generation
	 * prompt) included: a regenerated reply restores just before its prompt's end */
	const int k0 = m > PT_SRV_CHAT_MARKS ? m - PT_SRV_CHAT_MARKS + 1 : 1;
	cJSON *msgs = cJSON_Duplicate(r->messages, true);
	int64_t *out = pt_mallocn((size_t)(m - k0 + 1), sizeof *out);
	if (!msgs || !out) {
		cJSON_Delete(msgs);
		pt_free(out);
		return pt_error_set(err, PT_E_NOMEM, "out of memory for the message boundaries");
	}
	enum pt_status st = PT_OK;
	uint32_t c = 0;
	for (int k = m; st == PT_OK && k >= k0; k--) { /* longest first: trim one at a time */
		while (cJSON_GetArraySize(msgs) > k)
			cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
		struct pt_error e2 = { 0 };
		const enum pt_status b = boundary(s, r, msgs, ids, n_ids, &out[c], &e2);
		if (b == PT_OK)
			c++;
		else if (b == PT_E_NOMEM)
			st = pt_error_set(err, b, "%s", e2.msg);
		/* else a template that refuses a cut conversation (one that must end with a user
		 * message, say): no mark there */
	}
	cJSON_Delete(msgs);
	if (st != PT_OK) {
		pt_free(out);
		return st;
	}
	for (uint32_t i = 0; i < c / 2; i++) { /* ascending */
		const int64_t t = out[i];
		out[i] = out[c - 1 - i];
		out[c - 1 - i] = t;
	}
	*marks = out;
	*n = c;
	return PT_OK;
}

enum pt_status pt_srv_encode_text(pt_server *s, const char *text, size_t len, bool add_special,
				  bool parse_special, int32_t **ids, size_t *n,
				  struct pt_error *err)
{
	return pt_tok_encode_alloc(s->tok, text, len, add_special, parse_special, ids, n, err);
}
