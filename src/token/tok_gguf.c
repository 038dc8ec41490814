/* tok_gguf.c - pt_tok_load: reads the tokenizer.* keys of a GGUF into a pt_vocab_spec view
 * (strings stay in the mapping) and hands it to pt_tok_create. */
#include "token/tok_internal.h"

#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

struct gguf_view {
	char model[64], pre[64];
	struct pt_str *tokens, *merges;
	float *scores;
	int32_t *types;
	char *tmpl;
};

static enum pt_status get_cstr(const pt_gguf *g, const char *key, char *buf, size_t cap,
			       bool *found, struct pt_error *err)
{
	struct pt_str s;
	enum pt_status st = pt_gguf_get_str(g, key, &s, found, err);
	if (st)
		return st;
	if (!*found)
		return PT_OK;
	if (s.len >= cap || memchr(s.ptr, 0, s.len))
		return pt_error_set(err, PT_E_FORMAT, "%s: value too long or contains NUL", key);
	memcpy(buf, s.ptr, s.len);
	buf[s.len] = 0;
	return PT_OK;
}

static enum pt_status get_id(const pt_gguf *g, const char *key, int64_t *out,
			     struct pt_error *err)
{
	uint32_t v;
	bool found;
	enum pt_status st = pt_gguf_get_u32(g, key, 0, &v, &found, err);
	*out = found ? (int64_t)v : -1;
	return st;
}

static enum pt_status get_flag(const pt_gguf *g, const char *key, int *out,
			       struct pt_error *err)
{
	bool v, found;
	enum pt_status st = pt_gguf_get_bool(g, key, false, &v, &found, err);
	*out = found ? (int)v : -1;
	return st;
}

static enum pt_status numeric_arr(const pt_gguf *g, const char *key, uint32_t n,
				  const struct pt_gguf_kv **out, struct pt_error *err)
{
	*out = pt_gguf_find_kv(g, key);
	if (!*out)
		return PT_OK;
	const struct pt_gguf_kv *kv = *out;
	if (kv->type != PT_GGUF_ARRAY || (kv->arr_type != PT_GGUF_F32 &&
					  kv->arr_type != PT_GGUF_I32 &&
					  kv->arr_type != PT_GGUF_U32))
		return pt_error_set(err, PT_E_FORMAT, "%s: expected a numeric array", key);
	if (kv->arr_count < n) /* llama.cpp also accepts a longer array */
		return pt_error_set(err, PT_E_FORMAT, "%s: %llu entries for %u tokens", key,
				    (unsigned long long)kv->arr_count, n);
	return PT_OK;
}

static enum pt_status read_arrays(const pt_gguf *g, struct pt_vocab_spec *s,
				  struct gguf_view *v, struct pt_error *err)
{
	const struct pt_gguf_kv *kv;
	bool found;
	enum pt_status st = pt_gguf_get_arr(g, "tokenizer.ggml.tokens", PT_GGUF_STRING, &kv,
					    &found, err);
	if (st)
		return st;
	if (!found || !kv->arr_count)
		return pt_error_set(err, PT_E_FORMAT, "tokenizer.ggml.tokens is missing or empty");
	if (kv->arr_count > PT_TOK_MAX_VOCAB)
		return pt_error_set(err, PT_E_LIMIT, "tokenizer.ggml.tokens: more than %u tokens",
				    PT_TOK_MAX_VOCAB);
	s->n_tokens = (uint32_t)kv->arr_count;
	if (!(v->tokens = pt_mallocn(s->n_tokens, sizeof *v->tokens)))
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	pt_gguf_arr_strs(kv, v->tokens);
	s->tokens = v->tokens;
	if ((st = pt_gguf_get_arr(g, "tokenizer.ggml.merges", PT_GGUF_STRING, &kv, &found, err)))
		return st;
	if (found && kv->arr_count) {
		if (kv->arr_count > PT_TOK_MAX_MERGES)
			return pt_error_set(err, PT_E_LIMIT, "tokenizer.ggml.merges: more than %u",
					    PT_TOK_MAX_MERGES);
		s->n_merges = (uint32_t)kv->arr_count;
		if (!(v->merges = pt_mallocn(s->n_merges, sizeof *v->merges)))
			return pt_error_set(err, PT_E_NOMEM, "out of memory");
		pt_gguf_arr_strs(kv, v->merges);
		s->merges = v->merges;
	}
	if ((st = numeric_arr(g, "tokenizer.ggml.scores", s->n_tokens, &kv, err)))
		return st;
	if (kv) {
		if (!(v->scores = pt_mallocn(s->n_tokens, sizeof *v->scores)))
			return pt_error_set(err, PT_E_NOMEM, "out of memory");
		for (uint32_t i = 0; i < s->n_tokens; i++)
			v->scores[i] = pt_gguf_arr_f32(kv, i);
		s->scores = v->scores;
	}
	if ((st = numeric_arr(g, "tokenizer.ggml.token_type", s->n_tokens, &kv, err)))
		return st;
	if (kv) {
		if (!(v->types = pt_mallocn(s->n_tokens, sizeof *v->types)))
			return pt_error_set(err, PT_E_NOMEM, "out of memory");
		for (uint32_t i = 0; i < s->n_tokens; i++)
			v->types[i] = pt_gguf_arr_i32(kv, i);
		s->types = v->types;
	}
	return PT_OK;
}

const struct pt_vocab_key pt_vocab_id_keys[] = {
	{ "tokenizer.ggml.bos_token_id", offsetof(struct pt_vocab_spec, bos_id) },
	{ "tokenizer.ggml.eos_token_id", offsetof(struct pt_vocab_spec, eos_id) },
	{ "tokenizer.ggml.eot_token_id", offsetof(struct pt_vocab_spec, eot_id) },
	{ "tokenizer.ggml.eom_token_id", offsetof(struct pt_vocab_spec, eom_id) },
	{ "tokenizer.ggml.unknown_token_id", offsetof(struct pt_vocab_spec, unk_id) },
	{ "tokenizer.ggml.seperator_token_id", offsetof(struct pt_vocab_spec, sep_id) },
	{ "tokenizer.ggml.padding_token_id", offsetof(struct pt_vocab_spec, pad_id) },
	{ "tokenizer.ggml.mask_token_id", offsetof(struct pt_vocab_spec, mask_id) },
};
const size_t pt_vocab_n_id_keys = sizeof pt_vocab_id_keys / sizeof pt_vocab_id_keys[0];

const struct pt_vocab_key pt_vocab_flag_keys[] = {
	{ "tokenizer.ggml.add_bos_token", offsetof(struct pt_vocab_spec, add_bos) },
	{ "tokenizer.ggml.add_eos_token", offsetof(struct pt_vocab_spec, add_eos) },
	{ "tokenizer.ggml.add_sep_token", offsetof(struct pt_vocab_spec, add_sep) },
	{ "tokenizer.ggml.add_space_prefix", offsetof(struct pt_vocab_spec, add_space_prefix) },
	{ "tokenizer.ggml.remove_extra_whitespaces",
	  offsetof(struct pt_vocab_spec, remove_extra_ws) },
};
const size_t pt_vocab_n_flag_keys = sizeof pt_vocab_flag_keys / sizeof pt_vocab_flag_keys[0];

static enum pt_status read_scalars(const pt_gguf *g, struct pt_vocab_spec *s,
				   struct gguf_view *v, struct pt_error *err)
{
	enum pt_status st;
	for (size_t i = 0; i < pt_vocab_n_id_keys; i++) {
		const struct pt_vocab_key *k = &pt_vocab_id_keys[i];
		if ((st = get_id(g, k->key, (int64_t *)((char *)s + k->off), err)))
			return st;
	}
	for (size_t i = 0; i < pt_vocab_n_flag_keys; i++) {
		const struct pt_vocab_key *k = &pt_vocab_flag_keys[i];
		if ((st = get_flag(g, k->key, (int *)((char *)s + k->off), err)))
			return st;
	}
	bool found;
	if ((st = get_cstr(g, "tokenizer.ggml.model", v->model, sizeof v->model, &found, err)))
		return st;
	if (!found)
		return pt_error_set(err, PT_E_FORMAT, "tokenizer.ggml.model is missing");
	s->model = v->model;
	if ((st = get_cstr(g, "tokenizer.ggml.pre", v->pre, sizeof v->pre, &found, err)))
		return st;
	s->pre = found ? v->pre : NULL;
	struct pt_str tmpl;
	if ((st = pt_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &found, err)))
		return st;
	if (found) {
		if (!(v->tmpl = pt_strndup(tmpl.ptr, tmpl.len)))
			return pt_error_set(err, PT_E_NOMEM, "out of memory");
		s->chat_template = v->tmpl;
	}
	return PT_OK;
}

/* A spec over g's mapping and the arrays that view it (freed together). */
struct gguf_spec {
	struct pt_vocab_spec spec; /* first: the caller's pointer */
	struct gguf_view v;
};

static void view_free(struct gguf_view *v)
{
	pt_free(v->tokens);
	pt_free(v->merges);
	pt_free(v->scores);
	pt_free(v->types);
	pt_free(v->tmpl);
}

enum pt_status pt_vocab_spec_from_gguf(const pt_gguf *g, struct pt_vocab_spec **out,
				       struct pt_error *err)
{
	*out = NULL;
	struct gguf_spec *gs = pt_calloc(1, sizeof *gs);
	if (!gs)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	pt_vocab_spec_init(&gs->spec);
	pt_tok *t = NULL;
	enum pt_status st = read_scalars(g, &gs->spec, &gs->v, err);
	if (!st)
		st = read_arrays(g, &gs->spec, &gs->v, err);
	if (!st) /* the same checks as loading a model: what particle cannot tokenize is refused */
		st = pt_tok_create(&gs->spec, &t, err);
	pt_tok_destroy(t);
	if (st) {
		pt_vocab_spec_gguf_free(&gs->spec);
		return st;
	}
	*out = &gs->spec;
	return PT_OK;
}

void pt_vocab_spec_gguf_free(struct pt_vocab_spec *s)
{
	if (!s)
		return;
	struct gguf_spec *gs = (struct gguf_spec *)s;
	view_free(&gs->v);
	pt_free(gs);
}

enum pt_status pt_tok_load(const pt_gguf *g, pt_tok **out, struct pt_error *err)
{
	struct pt_vocab_spec s;
	struct gguf_view v;
	memset(&v, 0, sizeof v);
	pt_vocab_spec_init(&s);
	*out = NULL;
	enum pt_status st = read_scalars(g, &s, &v, err);
	if (!st)
		st = read_arrays(g, &s, &v, err);
	if (!st)
		st = pt_tok_create(&s, out, err);
	pt_free(v.tokens);
	pt_free(v.merges);
	pt_free(v.scores);
	pt_free(v.types);
	pt_free(v.tmpl);
	return st;
}
