/* hf_import.c - Hugging Face tokenizer.json / tokenizer_config.json -> pt_vocab_spec and
 * the tokenizer.* GGUF keys (see hf_import.h for the conversion rules). */
#include "token/hf_import.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"


struct hf_vocab {
	struct pt_vocab_spec spec; /* first: the public handle points here */
	char model[32], pre[64];
	char *arena;
	size_t narena, caparena;
	uint64_t *tok_off, *merge_off;
	uint32_t *tok_len, *merge_len;
	struct pt_str *tokens, *merges;
	int32_t *types;
	uint32_t n_merges;
	char *tmpl;
};

static enum pt_status read_file(const char *path, char **buf, size_t *len, bool *missing,
				struct pt_error *err)
{
	*buf = NULL;
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f) {
		if (missing && errno == ENOENT) {
			*missing = true;
			return PT_OK;
		}
		return pt_error_sys(err, PT_E_IO, errno, "cannot open %s", path);
	}
	enum pt_status st = PT_OK;
	size_t cap = 1 << 16, n = 0;
	char *b = pt_malloc(cap);
	while (b && !st) {
		if (n + 1 >= cap) {
			if (cap >= PT_HF_MAX_FILE) {
				st = pt_error_set(err, PT_E_LIMIT, "%s is over %u bytes",
						  path, PT_HF_MAX_FILE);
				break;
			}
			char *nb = pt_realloc(b, cap * 2);
			if (!nb)
				break;
			b = nb;
			cap *= 2;
		}
		size_t r = fread(b + n, 1, cap - 1 - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f))
				st = pt_error_sys(err, PT_E_IO, errno, "cannot read %s", path);
			break;
		}
	}
	fclose(f);
	if (!b && !st)
		st = pt_error_set(err, PT_E_NOMEM, "out of memory reading %s", path);
	if (st) {
		pt_free(b);
		return st;
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	if (missing)
		*missing = false;
	return PT_OK;
}

static enum pt_status load_json(const char *dir, const char *name, cJSON **out, bool optional,
				struct pt_error *err)
{
	char path[4096];
	char *buf;
	size_t len;
	bool missing = false;
	*out = NULL;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		return pt_error_set(err, PT_E_INVALID, "path too long: %s/%s", dir, name);
	enum pt_status st = read_file(path, &buf, &len, optional ? &missing : NULL, err);
	if (st || missing)
		return st;
	*out = cJSON_ParseWithLength(buf, len);
	if (!*out) {
		const char *at = cJSON_GetErrorPtr();
		uint64_t off = at && at >= buf && at <= buf + len ? (uint64_t)(at - buf) : 0;
		pt_free(buf);
		return pt_error_at(err, PT_E_FORMAT, off, "%s: invalid JSON", path);
	}
	pt_free(buf);
	return PT_OK;
}

static enum pt_status arena_put(struct hf_vocab *v, const char *s, size_t n, uint64_t *off,
				struct pt_error *err)
{
	if (v->narena + n + 1 > v->caparena) {
		size_t cap = v->caparena ? v->caparena : (1u << 20);
		while (cap < v->narena + n + 1)
			cap *= 2;
		char *a = pt_realloc(v->arena, cap);
		if (!a)
			return pt_error_set(err, PT_E_NOMEM, "out of memory importing vocabulary");
		v->arena = a;
		v->caparena = cap;
	}
	memcpy(v->arena + v->narena, s, n);
	v->arena[v->narena + n] = 0;
	*off = v->narena;
	v->narena += n + 1;
	return PT_OK;
}

static const cJSON *obj(const cJSON *o, const char *key)
{
	return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A token given as "text" or {"content": "text"}. */
static const char *token_content(const cJSON *t)
{
	if (cJSON_IsString(t))
		return t->valuestring;
	const cJSON *c = obj(t, "content");
	return cJSON_IsString(c) ? c->valuestring : NULL;
}

static bool looks_special(const char *s)
{
	size_t n = strlen(s);
	if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") ||
	    !strcmp(s, "[@BOS@]"))
		return true;
	if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>"))
		return true;
	if (n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>"))
		return true;
	return n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>';
}

static bool has_bytelevel(const cJSON *pre)
{
	const cJSON *type = obj(pre, "type");
	if (cJSON_IsString(type) && !strcmp(type->valuestring, "ByteLevel"))
		return true;
	const cJSON *seq = obj(pre, "pretokenizers"), *it;
	cJSON_ArrayForEach(it, seq)
		if (has_bytelevel(it))
			return true;
	return false;
}

static const char *split_regex(const cJSON *pre)
{
	const cJSON *type = obj(pre, "type");
	if (cJSON_IsString(type) && !strcmp(type->valuestring, "Split")) {
		const cJSON *re = obj(obj(pre, "pattern"), "Regex");
		if (cJSON_IsString(re))
			return re->valuestring;
	}
	const cJSON *seq = obj(pre, "pretokenizers"), *it;
	cJSON_ArrayForEach(it, seq) {
		const char *r = split_regex(it);
		if (r)
			return r;
	}
	return NULL;
}

/* Model and pre for the family (hf_import.h). */
static enum pt_status detect_family(struct hf_vocab *v, const cJSON *tj,
				    const struct pt_vocab_import_opts *o, struct pt_error *err)
{
	const cJSON *m = obj(tj, "model"), *type = obj(m, "type");
	const char *arch = o && o->arch ? o->arch : "";
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "tokenizer.json: model type '%s' is not supported (only BPE)",
				    cJSON_IsString(type) ? type->valuestring : "?");
	const cJSON *pre = obj(tj, "pre_tokenizer");
	const char *model = NULL, *pre_name = NULL;
	if (has_bytelevel(pre)) {
		const char *re = split_regex(pre);
		model = "gpt2";
		if (!re)
			pre_name = "gpt-2";
		else if (!strcmp(re, "\\p{N}{1,3}")) /* then kana/CJK runs, then words */
			pre_name = "deepseek-v3";
		else if (!strcmp(re, "[\r\n]")) /* DeepSeek-V2's first of six splits */
			pre_name = "deepseek-llm";
		else if (strstr(re, "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"))
			pre_name = "gpt-4o"; /* o200k (gpt-4o, gpt-oss; llama.cpp's chkhsh name) */
		else if (strstr(re, "\\p{N}{1,3}") && strstr(re, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"))
			pre_name = "llama-bpe";
		else if (strstr(re, "\\p{N}|") && strstr(re, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"))
			pre_name = "qwen2";
	} else if (cJSON_IsTrue(obj(m, "byte_fallback"))) {
		if (!strcmp(arch, "gemma4"))
			model = "gemma4";
		else if (!strcmp(arch, "bailingmoe2") || !strcmp(arch, "sarvam_moe") ||
			 !strcmp(arch, "sarvam-moe"))
			model = "gpt2", pre_name = "sarvam-moe";
	}
	if (o && o->model)
		model = o->model;
	if (o && o->pre)
		pre_name = o->pre;
	if (!model)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "tokenizer.json: no GGUF tokenizer model for arch '%s'", arch);
	if (!strcmp(model, "gpt2") && !pre_name)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "tokenizer.json: unknown pre-tokenizer regex (give --pre)");
	snprintf(v->model, sizeof v->model, "%s", model);
	snprintf(v->pre, sizeof v->pre, "%s", pre_name ? pre_name : "");
	v->spec.model = v->model;
	v->spec.pre = pre_name ? v->pre : NULL;
	return PT_OK;
}

static bool is_byte_token(const char *s)
{
	static const char hex[] = "0123456789ABCDEFabcdef";
	return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[3] && strchr(hex, s[3]) && s[4] &&
	       strchr(hex, s[4]) && s[5] == '>';
}

static bool forced_user_defined(const char *s)
{
	static const char *const names[] = { "<|channel>", "<channel|>", "<|tool_call>",
					     "<tool_call|>", "<|tool_response>", "<tool_response|>",
					     "<|\"|>", NULL };
	for (const char *const *p = names; *p; p++)
		if (!strcmp(s, *p))
			return true;
	return false;
}

/* Stores token id's text, turning U+2581 into spaces when respace. */
static enum pt_status set_text(struct hf_vocab *v, uint32_t id, const char *s, bool respace,
			       struct pt_error *err)
{
	size_t n = strlen(s);
	if (!respace) {
		v->tok_len[id] = (uint32_t)n;
		return arena_put(v, s, n, &v->tok_off[id], err);
	}
	char *tmp = pt_malloc(n + 1);
	if (!tmp)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
			tmp[k++] = ' ';
			i += 3;
		} else {
			tmp[k++] = s[i++];
		}
	}
	enum pt_status st = arena_put(v, tmp, k, &v->tok_off[id], err);
	v->tok_len[id] = (uint32_t)k;
	pt_free(tmp);
	return st;
}

static enum pt_status count_tokens(const cJSON *vocab, const cJSON *added,
				   const struct pt_vocab_import_opts *o, uint32_t *n,
				   struct pt_error *err)
{
	double max = -1;
	const cJSON *it;
	cJSON_ArrayForEach(it, vocab) {
		double id = cJSON_IsNumber(it) ? it->valuedouble : -1;
		if (id < 0 || id >= PT_TOK_MAX_VOCAB)
			return pt_error_set(err, PT_E_FORMAT, "tokenizer.json: bad id for '%s'",
					    it->string ? it->string : "?");
		if (id > max)
			max = id;
	}
	cJSON_ArrayForEach(it, added) {
		const cJSON *id = obj(it, "id");
		double v = cJSON_IsNumber(id) ? id->valuedouble : -1;
		if (v < 0 || v >= PT_TOK_MAX_VOCAB || !token_content(it))
			return pt_error_set(err, PT_E_FORMAT, "tokenizer.json: bad added token");
		if (v > max)
			max = v;
	}
	*n = (uint32_t)(max + 1);
	if (o && o->vocab_size > *n)
		*n = o->vocab_size;
	if (!*n)
		return pt_error_set(err, PT_E_FORMAT, "tokenizer.json: empty vocabulary");
	return PT_OK;
}

static enum pt_status import_tokens(struct hf_vocab *v, const cJSON *tj,
				    const struct pt_vocab_import_opts *o, struct pt_error *err)
{
	const cJSON *vocab = obj(obj(tj, "model"), "vocab"), *added = obj(tj, "added_tokens");
	const cJSON *it;
	uint32_t n;
	bool gemma = !strcmp(v->model, "gemma4"), respace = !gemma;
	enum pt_status st = count_tokens(vocab, added, o, &n, err);
	if (st)
		return st;
	v->tok_off = pt_mallocn(n, sizeof *v->tok_off);
	v->tok_len = pt_calloc(n, sizeof *v->tok_len);
	v->types = pt_mallocn(n, sizeof *v->types);
	v->tokens = pt_mallocn(n, sizeof *v->tokens);
	if (!v->tok_off || !v->tok_len || !v->types || !v->tokens)
		return pt_error_set(err, PT_E_NOMEM, "out of memory importing %u tokens", n);
	for (uint32_t i = 0; i < n; i++)
		v->tok_off[i] = UINT64_MAX, v->types[i] = PT_TOKTYPE_UNUSED;
	cJSON_ArrayForEach(it, vocab) {
		uint32_t id = (uint32_t)it->valuedouble;
		if ((st = set_text(v, id, it->string, false, err)))
			return st;
		v->types[id] = gemma && is_byte_token(it->string) ? PT_TOKTYPE_BYTE
								  : PT_TOKTYPE_NORMAL;
	}
	cJSON_ArrayForEach(it, added) {
		uint32_t id = (uint32_t)obj(it, "id")->valuedouble;
		const char *s = token_content(it);
		bool ctl = cJSON_IsTrue(obj(it, "special")) || looks_special(s);
		if (gemma && forced_user_defined(s))
			ctl = false;
		if ((st = set_text(v, id, s, respace && !ctl, err)))
			return st;
		v->types[id] = ctl ? PT_TOKTYPE_CONTROL : PT_TOKTYPE_USER_DEFINED;
		if (gemma && is_byte_token(s))
			v->types[id] = PT_TOKTYPE_BYTE;
	}
	for (uint32_t i = 0; i < n && !st; i++) {
		if (v->tok_off[i] != UINT64_MAX)
			continue;
		char pad[32];
		int k = snprintf(pad, sizeof pad, "[PAD%u]", i);
		st = arena_put(v, pad, (size_t)k, &v->tok_off[i], err);
		v->tok_len[i] = (uint32_t)k;
	}
	v->spec.n_tokens = n;
	return st;
}

static enum pt_status import_merges(struct hf_vocab *v, const cJSON *tj, struct pt_error *err)
{
	const cJSON *merges = obj(obj(tj, "model"), "merges"), *it;
	uint32_t n = (uint32_t)cJSON_GetArraySize(merges), i = 0;
	if (!n)
		return PT_OK;
	v->merge_off = pt_mallocn(n, sizeof *v->merge_off);
	v->merge_len = pt_mallocn(n, sizeof *v->merge_len);
	v->merges = pt_mallocn(n, sizeof *v->merges);
	if (!v->merge_off || !v->merge_len || !v->merges)
		return pt_error_set(err, PT_E_NOMEM, "out of memory importing %u merges", n);
	cJSON_ArrayForEach(it, merges) {
		enum pt_status st;
		if (cJSON_IsString(it)) {
			size_t len = strlen(it->valuestring);
			st = arena_put(v, it->valuestring, len, &v->merge_off[i], err);
			v->merge_len[i] = (uint32_t)len;
		} else if (cJSON_GetArraySize(it) == 2 &&
			   cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
			   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
			/* gguf-py joins pairs with ' ' after turning inner spaces into U+0120 */
			const char *parts[2] = { cJSON_GetArrayItem(it, 0)->valuestring,
						 cJSON_GetArrayItem(it, 1)->valuestring };
			size_t cap = 2 * (strlen(parts[0]) + strlen(parts[1])) + 2, k = 0;
			char *tmp = pt_malloc(cap);
			if (!tmp)
				return pt_error_set(err, PT_E_NOMEM, "out of memory");
			for (int p = 0; p < 2; p++) {
				if (p)
					tmp[k++] = ' ';
				for (const char *c = parts[p]; *c; c++) {
					if (*c == ' ')
						tmp[k++] = (char)0xC4, tmp[k++] = (char)0xA0;
					else
						tmp[k++] = *c;
				}
			}
			st = arena_put(v, tmp, k, &v->merge_off[i], err);
			v->merge_len[i] = (uint32_t)k;
			pt_free(tmp);
		} else {
			return pt_error_set(err, PT_E_FORMAT, "tokenizer.json: merges[%u] malformed",
					    i);
		}
		if (st)
			return st;
		i++;
	}
	v->n_merges = n;
	return PT_OK;
}

static int64_t find_id(const cJSON *tj, const char *text)
{
	const cJSON *it;
	if (!text)
		return -1;
	cJSON_ArrayForEach(it, obj(tj, "added_tokens")) {
		const char *s = token_content(it);
		if (s && !strcmp(s, text))
			return (int64_t)obj(it, "id")->valuedouble;
	}
	const cJSON *id = obj(obj(obj(tj, "model"), "vocab"), text);
	return cJSON_IsNumber(id) ? (int64_t)id->valuedouble : -1;
}

static int64_t config_id(const cJSON *cfg, const char *key)
{
	const cJSON *v = obj(cfg, key);
	if (cJSON_IsArray(v))
		v = cJSON_GetArrayItem(v, 0);
	return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (int64_t)v->valuedouble : -1;
}

static void import_specials(struct hf_vocab *v, const cJSON *tj, const cJSON *tc,
			    const cJSON *cfg)
{
	struct pt_vocab_spec *s = &v->spec;
	s->bos_id = find_id(tj, token_content(obj(tc, "bos_token")));
	s->eos_id = find_id(tj, token_content(obj(tc, "eos_token")));
	s->unk_id = find_id(tj, token_content(obj(tc, "unk_token")));
	s->sep_id = find_id(tj, token_content(obj(tc, "sep_token")));
	s->pad_id = find_id(tj, token_content(obj(tc, "pad_token")));
	s->mask_id = find_id(tj, token_content(obj(tc, "mask_token")));
	if (s->bos_id < 0)
		s->bos_id = config_id(cfg, "bos_token_id");
	if (s->eos_id < 0)
		s->eos_id = config_id(cfg, "eos_token_id");
	if (s->pad_id < 0)
		s->pad_id = config_id(cfg, "pad_token_id");
	int64_t *ids[] = { &s->bos_id, &s->eos_id, &s->unk_id, &s->sep_id, &s->pad_id,
			   &s->mask_id };
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		if (*ids[i] >= (int64_t)s->n_tokens)
			*ids[i] = -1;
	const cJSON *b = obj(tc, "add_bos_token"), *e = obj(tc, "add_eos_token");
	if (cJSON_IsBool(b))
		s->add_bos = cJSON_IsTrue(b);
	if (cJSON_IsBool(e))
		s->add_eos = cJSON_IsTrue(e);
	if (!strcmp(v->model, "gemma4")) {
		s->add_bos = 1;
		s->add_space_prefix = 0;
	}
}

static enum pt_status import_template(struct hf_vocab *v, const char *dir, const cJSON *tc,
				      struct pt_error *err)
{
	char path[4096];
	size_t len;
	bool missing = false;
	if ((size_t)snprintf(path, sizeof path, "%s/chat_template.jinja", dir) >= sizeof path)
		return pt_error_set(err, PT_E_INVALID, "path too long: %s", dir);
	enum pt_status st = read_file(path, &v->tmpl, &len, &missing, err);
	if (st || !missing) {
		v->spec.chat_template = v->tmpl;
		return st;
	}
	const cJSON *t = obj(tc, "chat_template"), *it;
	if (cJSON_IsArray(t)) { /* [{name, template}]: the "default" one */
		const cJSON *pick = NULL;
		cJSON_ArrayForEach(it, t)
			if (cJSON_IsString(obj(it, "name")) && !strcmp(obj(it, "name")->valuestring,
									 "default"))
				pick = obj(it, "template");
		t = pick;
	}
	if (!cJSON_IsString(t))
		return PT_OK;
	if (!(v->tmpl = pt_strdup(t->valuestring)))
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	v->spec.chat_template = v->tmpl;
	return PT_OK;
}

/* Offsets became stable once the arena stopped growing: point the views at it. */
static void finish_views(struct hf_vocab *v)
{
	for (uint32_t i = 0; i < v->spec.n_tokens; i++)
		v->tokens[i] = (struct pt_str){ v->arena + v->tok_off[i], v->tok_len[i] };
	for (uint32_t i = 0; i < v->n_merges; i++)
		v->merges[i] = (struct pt_str){ v->arena + v->merge_off[i], v->merge_len[i] };
	v->spec.tokens = v->tokens;
	v->spec.types = v->types;
	v->spec.n_merges = v->n_merges;
	v->spec.merges = v->n_merges ? v->merges : NULL;
}

enum pt_status pt_vocab_import_hf(const char *dir, const struct pt_vocab_import_opts *opts,
				  struct pt_vocab_spec **out, struct pt_error *err)
{
	cJSON *tj = NULL, *tc = NULL, *cfg = NULL;
	*out = NULL;
	struct hf_vocab *v = pt_calloc(1, sizeof *v);
	if (!v)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	pt_vocab_spec_init(&v->spec);
	enum pt_status st = load_json(dir, "tokenizer.json", &tj, false, err);
	if (!st)
		st = load_json(dir, "tokenizer_config.json", &tc, true, err);
	if (!st)
		st = load_json(dir, "config.json", &cfg, true, err);
	if (!st)
		st = detect_family(v, tj, opts, err);
	if (!st)
		st = import_tokens(v, tj, opts, err);
	if (!st)
		st = import_merges(v, tj, err);
	if (!st) {
		import_specials(v, tj, tc, cfg);
		st = import_template(v, dir, tc, err);
	}
	cJSON_Delete(tj);
	cJSON_Delete(tc);
	cJSON_Delete(cfg);
	if (st) {
		pt_vocab_spec_destroy(&v->spec);
		return st;
	}
	finish_views(v);
	*out = &v->spec;
	return PT_OK;
}

void pt_vocab_spec_destroy(struct pt_vocab_spec *s)
{
	if (!s)
		return;
	struct hf_vocab *v = (struct hf_vocab *)s;
	pt_free(v->arena);
	pt_free(v->tok_off);
	pt_free(v->tok_len);
	pt_free(v->merge_off);
	pt_free(v->merge_len);
	pt_free(v->tokens);
	pt_free(v->merges);
	pt_free(v->types);
	pt_free(v->tmpl);
	pt_free(v);
}

static enum pt_status write_strs(pt_gguf_writer *w, const char *key, const struct pt_str *s,
				 uint32_t n, struct pt_error *err)
{
	const char **p = pt_mallocn(n, sizeof *p);
	uint64_t *l = pt_mallocn(n, sizeof *l);
	enum pt_status st = PT_OK;
	if (!p || !l)
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < n && !st; i++)
		p[i] = s[i].ptr, l[i] = s[i].len;
	if (!st)
		st = pt_gguf_writer_set_arr_str(w, key, p, l, n, err);
	pt_free(p);
	pt_free(l);
	return st;
}

enum pt_status pt_vocab_write_gguf(pt_gguf_writer *w, const struct pt_vocab_spec *v,
				   struct pt_error *err)
{
	enum pt_status st = pt_gguf_writer_set_str(w, "tokenizer.ggml.model", v->model, err);
	if (!st && v->pre)
		st = pt_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre, err);
	if (!st)
		st = write_strs(w, "tokenizer.ggml.tokens", v->tokens, v->n_tokens, err);
	if (!st && v->scores)
		st = pt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", PT_GGUF_F32, v->scores,
					    v->n_tokens, err);
	if (!st && v->types)
		st = pt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", PT_GGUF_I32, v->types,
					    v->n_tokens, err);
	if (!st && v->n_merges)
		st = write_strs(w, "tokenizer.ggml.merges", v->merges, v->n_merges, err);
	for (size_t i = 0; i < pt_vocab_n_id_keys && !st; i++) {
		const struct pt_vocab_key *k = &pt_vocab_id_keys[i];
		int64_t id = *(const int64_t *)((const char *)v + k->off);
		if (id >= 0)
			st = pt_gguf_writer_set_u32(w, k->key, (uint32_t)id, err);
	}
	for (size_t i = 0; i < pt_vocab_n_flag_keys && !st; i++) {
		const struct pt_vocab_key *k = &pt_vocab_flag_keys[i];
		int f = *(const int *)((const char *)v + k->off);
		if (f >= 0)
			st = pt_gguf_writer_set_bool(w, k->key, f != 0, err);
	}
	if (!st && v->chat_template)
		st = pt_gguf_writer_set_str(w, "tokenizer.chat_template", v->chat_template, err);
	return st;
}
