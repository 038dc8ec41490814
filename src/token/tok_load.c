/* tok_load.c - builds a pt_tok from tokenizer metadata: token/merge hash tables, the
 * per-model and per-pre settings, and llama.cpp's load-time fix-ups (EOT/FIM/EOG detection
 * by text, the special-token partition cache).  TOKENIZERS.md 1.1-1.2 is the spec. */
#include "token/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token/tok_unicode.h"
#include "util/alloc.h"
#include "util/limits.h"

void pt_vocab_spec_init(struct pt_vocab_spec *s)
{
	memset(s, 0, sizeof *s);
	s->bos_id = s->eos_id = s->eot_id = s->eom_id = -1;
	s->unk_id = s->sep_id = s->pad_id = s->mask_id = -1;
	s->add_bos = s->add_eos = s->add_sep = s->add_space_prefix = s->remove_extra_ws = -1;
}

enum pt_status tok_ids_push(struct tok_ids *ids, int32_t id, struct pt_error *err)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		int32_t *v = pt_reallocn(ids->v, cap, sizeof *v);
		if (!v)
			return pt_error_set(err, PT_E_NOMEM, "out of memory growing token list");
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return PT_OK;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;
	while (p < n * 2)
		p <<= 1;
	return p;
}

int32_t tok_lookup(const struct pt_tok *t, const char *s, size_t n)
{
	uint32_t h = tok_hash_index(tok_hash(s, n, TOK_HASH_SEED), t->hash_mask);
	for (;; h = (h + 1) & t->hash_mask) {
		uint32_t e = t->hash[h];
		if (!e)
			return -1;
		uint32_t id = e - 1;
		if (t->tok_len[id] == n && memcmp(tok_str(t, id), s, n) == 0)
			return (int32_t)id;
	}
}

int32_t pt_tok_find(const pt_tok *t, const char *text, size_t len)
{
	return tok_lookup(t, text, len);
}

static uint64_t merge_hash(const char *l, size_t ln, const char *r, size_t rn)
{
	uint64_t h = tok_hash(l, ln, TOK_HASH_SEED);
	h = tok_hash("\x01", 1, h);
	return tok_hash(r, rn, h);
}

int32_t tok_merge_rank(const struct pt_tok *t, const char *l, size_t ln, const char *r,
		       size_t rn)
{
	if (!t->n_merges)
		return -1;
	uint32_t h = tok_hash_index(merge_hash(l, ln, r, rn), t->mhash_mask);
	for (;; h = (h + 1) & t->mhash_mask) {
		uint32_t e = t->mhash[h];
		if (!e)
			return -1;
		const struct tok_merge *m = &t->merges[e - 1];
		if (m->llen == ln && m->rlen == rn && memcmp(t->marena + m->loff, l, ln) == 0 &&
		    memcmp(t->marena + m->roff, r, rn) == 0)
			return (int32_t)(e - 1);
	}
}

static uint32_t type_to_attr(int32_t type)
{
	switch (type) {
	case PT_TOKTYPE_UNKNOWN: return PT_TOKATTR_UNKNOWN;
	case PT_TOKTYPE_UNUSED: return PT_TOKATTR_UNUSED;
	case PT_TOKTYPE_NORMAL: return PT_TOKATTR_NORMAL;
	case PT_TOKTYPE_CONTROL: return PT_TOKATTR_CONTROL;
	case PT_TOKTYPE_USER_DEFINED: return PT_TOKATTR_USER_DEFINED;
	case PT_TOKTYPE_BYTE: return PT_TOKATTR_BYTE;
	default: return 0;
	}
}

/* Copies token texts into one arena and builds the text -> id table.  Empty texts become
 * "[EMPTY_<i>]" and a duplicate text is refused, both as llama.cpp does. */
static enum pt_status load_tokens(struct pt_tok *t, const struct pt_vocab_spec *s,
				  struct pt_error *err)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < s->n_tokens; i++)
		if (pt_add_overflow(total, (s->tokens[i].len ? s->tokens[i].len : 24) + 1, &total))
			return pt_error_set(err, PT_E_LIMIT, "vocabulary text too large");
	t->arena = pt_malloc(total ? total : 1);
	t->tok_off = pt_mallocn(s->n_tokens, sizeof *t->tok_off);
	t->tok_len = pt_mallocn(s->n_tokens, sizeof *t->tok_len);
	t->score = pt_mallocn(s->n_tokens, sizeof *t->score);
	t->attr = pt_mallocn(s->n_tokens, sizeof *t->attr);
	t->hash_mask = pow2_at_least(s->n_tokens) - 1;
	t->hash = pt_calloc((uint64_t)t->hash_mask + 1, sizeof *t->hash);
	if (!t->arena || !t->tok_off || !t->tok_len || !t->score || !t->attr || !t->hash)
		return pt_error_set(err, PT_E_NOMEM, "out of memory loading %u tokens", s->n_tokens);
	uint64_t off = 0;
	for (uint32_t i = 0; i < s->n_tokens; i++) {
		char *dst = t->arena + off;
		size_t n = s->tokens[i].len;
		if (n)
			memcpy(dst, s->tokens[i].ptr, n);
		else
			n = (size_t)snprintf(dst, 24, "[EMPTY_%u]", i);
		dst[n] = 0;
		t->tok_off[i] = off;
		t->tok_len[i] = (uint32_t)n;
		off += n + 1;
		t->score[i] = s->scores ? s->scores[i] : 0.0f;
		t->attr[i] = type_to_attr(s->types ? s->types[i] : PT_TOKTYPE_NORMAL);
		uint32_t h = tok_hash_index(tok_hash(dst, n, TOK_HASH_SEED), t->hash_mask);
		for (; t->hash[h]; h = (h + 1) & t->hash_mask) {
			uint32_t o = t->hash[h] - 1;
			if (t->tok_len[o] == n && memcmp(tok_str(t, o), dst, n) == 0)
				return pt_error_set(err, PT_E_FORMAT,
						    "tokenizer.ggml.tokens: token %u duplicates token %u",
						    i, o);
		}
		t->hash[h] = i + 1;
	}
	t->n_vocab = s->n_tokens;
	return PT_OK;
}

/* Merges "left right" split at the first space at index >= 1; rank = array index; a
 * repeated pair keeps its first rank. */
static enum pt_status load_merges(struct pt_tok *t, const struct pt_vocab_spec *s,
				  struct pt_error *err)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < s->n_merges; i++)
		if (pt_add_overflow(total, s->merges[i].len, &total))
			return pt_error_set(err, PT_E_LIMIT, "merge text too large");
	t->marena = pt_malloc(total ? total : 1);
	t->merges = pt_mallocn(s->n_merges ? s->n_merges : 1, sizeof *t->merges);
	t->mhash_mask = pow2_at_least(s->n_merges) - 1;
	t->mhash = pt_calloc((uint64_t)t->mhash_mask + 1, sizeof *t->mhash);
	if (!t->marena || !t->merges || !t->mhash)
		return pt_error_set(err, PT_E_NOMEM, "out of memory loading %u merges", s->n_merges);
	uint64_t off = 0;
	for (uint32_t i = 0; i < s->n_merges; i++) {
		const char *m = s->merges[i].ptr;
		size_t n = s->merges[i].len;
		const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
		if (!sp)
			return pt_error_set(err, PT_E_FORMAT,
					    "tokenizer.ggml.merges[%u]: no space separating the pair", i);
		memcpy(t->marena + off, m, n);
		struct tok_merge *e = &t->merges[i];
		e->loff = (uint32_t)off;
		e->llen = (uint32_t)(sp - m);
		e->roff = (uint32_t)(off + e->llen + 1);
		e->rlen = (uint32_t)(n - e->llen - 1);
		off += n;
		const char *l = t->marena + e->loff, *r = t->marena + e->roff;
		uint32_t h = tok_hash_index(merge_hash(l, e->llen, r, e->rlen), t->mhash_mask);
		bool dup = false;
		for (; t->mhash[h]; h = (h + 1) & t->mhash_mask) {
			const struct tok_merge *o = &t->merges[t->mhash[h] - 1];
			if (o->llen == e->llen && o->rlen == e->rlen &&
			    !memcmp(t->marena + o->loff, l, e->llen) &&
			    !memcmp(t->marena + o->roff, r, e->rlen)) {
				dup = true;
				break;
			}
		}
		if (!dup)
			t->mhash[h] = i + 1;
	}
	t->n_merges = s->n_merges;
	return PT_OK;
}

static bool pre_is(const char *pre, const char *const *names)
{
	for (; *names; names++)
		if (strcmp(pre, *names) == 0)
			return true;
	return false;
}

/* Model and pre-tokenizer settings (llama_vocab::impl::load). */
static enum pt_status configure(struct pt_tok *t, const struct pt_vocab_spec *s,
				struct pt_error *err)
{
	static const char *const qwen2[] = { "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2",
					     "megrez", NULL };
	static const char *const llama3[] = { "llama3", "llama-v3", "llama-bpe", NULL };
	static const char *const gpt2[] = { "gpt-2", NULL };
	static const char *const glm4[] = { "glm4", "chatglm-bpe", NULL };
	static const char *const gpt4o[] = { "gpt-4o", "llama4", "kanana2", "talkie", NULL };
	const char *model = s->model ? s->model : "";
	const char *pre = s->pre ? s->pre : "";
	t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = -1;
	t->escape_ws = true;
	if (strcmp(model, "llama") == 0) {
		t->kind = TOK_SPM;
		t->bos = 1, t->eos = 2, t->unk = 0;
		t->add_bos = true, t->add_space_prefix = true;
		snprintf(t->pre, sizeof t->pre, "%s", "default");
	} else if (strcmp(model, "gpt2") == 0 || strcmp(model, "gemma4") == 0) {
		t->kind = TOK_BPE;
		if (strcmp(model, "gpt2") == 0)
			t->bos = 11, t->eos = 11;
		else
			pre = "gemma4";
		t->escape_ws = false, t->clean_spaces = true, t->byte_encode = true;
		if (!*pre || strcmp(pre, "default") == 0) {
			t->split = SPLIT_DEFAULT;
		} else if (pre_is(pre, qwen2)) {
			t->split = SPLIT_QWEN2, t->clean_spaces = false;
		} else if (strcmp(pre, "qwen35") == 0) { /* Qwen3.5 / 3.6 */
			t->split = SPLIT_QWEN35, t->clean_spaces = false;
		} else if (pre_is(pre, llama3)) {
			t->split = SPLIT_LLAMA3, t->ignore_merges = true, t->add_bos = true;
		} else if (pre_is(pre, gpt2)) {
			t->split = SPLIT_GPT2;
		} else if (pre_is(pre, glm4)) {
			/* llama.cpp CHATGLM4: llama3's regex with the merges applied, no default
			 * BOS (GLM's template writes [gMASK]<sop> itself) */
			t->split = SPLIT_LLAMA3, t->bos = -1;
		} else if (strcmp(pre, "gemma4") == 0) {
			t->split = SPLIT_NEWLINES, t->escape_ws = true, t->byte_encode = false;
			t->newline_words = true;
		} else if (pre_is(pre, gpt4o)) {
			t->split = SPLIT_GPT4O, t->clean_spaces = false;
		} else if (strcmp(pre, "deepseek-v3") == 0) { /* DeepSeek-V3 / R1 */
			t->split = SPLIT_DEEPSEEK3, t->clean_spaces = false;
		} else if (strcmp(pre, "deepseek-llm") == 0) { /* DeepSeek-V2(-Lite) */
			t->split = SPLIT_DEEPSEEK_LLM, t->clean_spaces = false;
		} else if (strcmp(pre, "kimi-k2") == 0) {
			t->split = SPLIT_KIMI_K2, t->clean_spaces = false;
		} else if (strcmp(pre, "sarvam-moe") == 0) {
			t->split = SPLIT_NEWLINES, t->escape_ws = true, t->byte_encode = false;
			t->clean_spaces = false;
		} else {
			return pt_error_set(err, PT_E_UNSUPPORTED,
					    "unknown pre-tokenizer type '%s' (tokenizer.ggml.pre)", pre);
		}
		snprintf(t->pre, sizeof t->pre, "%s", *pre ? pre : "default");
	} else {
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "unsupported tokenizer model '%s' (tokenizer.ggml.model)", model);
	}
	snprintf(t->model, sizeof t->model, "%s", model);
	return PT_OK;
}

static void set_id(int32_t *dst, int64_t v, uint32_t n_vocab)
{
	/* llama.cpp keeps the default for an out-of-range id (with a warning). */
	if (v >= 0 && v < (int64_t)n_vocab)
		*dst = (int32_t)v;
}

static void apply_keys(struct pt_tok *t, const struct pt_vocab_spec *s)
{
	set_id(&t->bos, s->bos_id, t->n_vocab);
	set_id(&t->eos, s->eos_id, t->n_vocab);
	set_id(&t->eot, s->eot_id, t->n_vocab);
	set_id(&t->eom, s->eom_id, t->n_vocab);
	set_id(&t->unk, s->unk_id, t->n_vocab);
	set_id(&t->sep, s->sep_id, t->n_vocab);
	set_id(&t->pad, s->pad_id, t->n_vocab);
	if (s->add_space_prefix >= 0)
		t->add_space_prefix = s->add_space_prefix;
	if (s->add_bos >= 0)
		t->add_bos = s->add_bos;
	if (s->add_eos >= 0)
		t->add_eos = s->add_eos;
	if (s->add_sep >= 0)
		t->add_sep = s->add_sep;
	if (strcmp(t->pre, "gemma4") == 0 && !t->add_bos)
		t->add_bos = true; /* llama.cpp PR #21500 */
	/* gpt2-model defaults of 11 can point past a tiny vocab: drop them then. */
	if (t->bos >= (int32_t)t->n_vocab)
		t->bos = -1;
	if (t->eos >= (int32_t)t->n_vocab)
		t->eos = -1;
	if (t->unk >= (int32_t)t->n_vocab)
		t->unk = -1;
}

static int32_t find_cstr(const struct pt_tok *t, const char *s)
{
	return tok_lookup(t, s, strlen(s));
}

static void eog_set(struct pt_tok *t, int32_t id, bool on)
{
	if (id < 0)
		return;
	if (on)
		t->eog[id >> 3] |= (uint8_t)(1u << (id & 7));
	else
		t->eog[id >> 3] &= (uint8_t)~(1u << (id & 7));
}

/* First listed text present in the vocab (llama.cpp iterates a hash map, so with several
 * present its choice is unspecified; list order is ours). */
static int32_t detect(struct pt_tok *t, const char *const *texts)
{
	for (; *texts; texts++) {
		int32_t id = find_cstr(t, *texts);
		if (id >= 0) {
			t->attr[id] |= PT_TOKATTR_CONTROL;
			return id;
		}
	}
	return -1;
}

static const char *const eot_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", /* DeepSeek */
	"<end_of_utterance>", NULL };
static const char *const eog_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
	"[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
	"<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"[e~[", NULL };

static enum pt_status fixups(struct pt_tok *t, struct pt_error *err)
{
	static const char *const fim_pre[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
					       "<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
	static const char *const fim_suf[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
					       "<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
	static const char *const fim_mid[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
					       "<MID>", "<|code_middle|>", "<|middle|>", NULL };
	static const char *const fim_pad[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
					       "[PAD]", NULL };
	static const char *const fim_rep[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
					       "<REPO>", "<reponame>", NULL };
	static const char *const fim_sep[] = { "<|file_sep|>", NULL };
	static const char *const eom[] = { "<|eom_id|>", NULL };
	if (t->eot < 0)
		t->eot = detect(t, eot_texts);
	if (t->eom < 0)
		t->eom = detect(t, eom);
	detect(t, fim_pre);
	detect(t, fim_suf);
	detect(t, fim_mid);
	t->eog = pt_calloc(t->n_vocab / 8 + 1, 1);
	if (!t->eog)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	eog_set(t, detect(t, fim_pad), true);
	eog_set(t, detect(t, fim_rep), true);
	eog_set(t, detect(t, fim_sep), true);
	for (uint32_t i = 0; i < t->n_vocab; i++)
		if ((t->attr[i] & PT_TOKATTR_CONTROL) && strstr(tok_str(t, i), "unused"))
			t->attr[i] |= PT_TOKATTR_UNUSED;
	for (const char *const *p = eog_texts; *p; p++) {
		int32_t id = find_cstr(t, *p);
		if (id >= 0) {
			eog_set(t, id, true);
			t->attr[id] |= PT_TOKATTR_CONTROL;
		}
	}
	eog_set(t, t->eos, true);
	eog_set(t, t->eot, true);
	eog_set(t, t->eom, true);
	static const char *const oss[] = { "<|channel|>", "<|message|>", "<|start|>",
					   "<|constrain|>", NULL };
	for (const char *const *p = oss; *p; p++) {
		int32_t id = find_cstr(t, *p);
		if (id >= 0)
			t->attr[id] = PT_TOKATTR_USER_DEFINED;
	}
	int32_t ret = find_cstr(t, "<|return|>"), call = find_cstr(t, "<|call|>");
	int32_t end = find_cstr(t, "<|end|>");
	if (ret >= 0 && call >= 0 && end >= 0) {
		eog_set(t, end, false);
		t->attr[end] = PT_TOKATTR_USER_DEFINED;
		/* o200k_harmony has both <|end|> and <|endoftext|>: llama.cpp's hash-map walk
		 * picks <|endoftext|> as EOT there (measured on the real vocabulary,
		 * tests/oracle/test_tokenizer.sh), and <|end|> is no end of generation */
		int32_t eot_alt = find_cstr(t, "<|endoftext|>");
		if (t->eot == end && eot_alt >= 0)
			t->eot = eot_alt;
	}
	int32_t tr = find_cstr(t, "<|tool_response>"), s_end = find_cstr(t, "</s>");
	if (tr >= 0 && s_end >= 0 && pt_tok_is_eog(t, tr) && pt_tok_is_eog(t, s_end)) {
		eog_set(t, s_end, false);
		t->attr[s_end] = PT_TOKATTR_NORMAL;
	}
	return PT_OK;
}

static int by_len_desc(const void *a, const void *b, void *ctx)
{
	const struct pt_tok *t = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (t->tok_len[x] != t->tok_len[y])
		return t->tok_len[x] > t->tok_len[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

static enum pt_status build_special(struct pt_tok *t, struct pt_error *err)
{
	const uint32_t want = PT_TOKATTR_CONTROL | PT_TOKATTR_USER_DEFINED | PT_TOKATTR_UNKNOWN;
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->n_vocab; i++)
		n += (t->attr[i] & want) != 0;
	t->special = pt_mallocn(n ? n : 1, sizeof *t->special);
	if (!t->special)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	n = 0;
	for (uint32_t i = 0; i < t->n_vocab; i++)
		if (t->attr[i] & want)
			t->special[n++] = i;
	t->n_special = n;
	/* llama.cpp's std::sort leaves equal lengths unordered; ties go by id here. */
	qsort_r(t->special, n, sizeof *t->special, by_len_desc, t);
	return PT_OK;
}

static enum pt_status byte_maps(struct pt_tok *t)
{
	for (int i = 0; i < 324; i++)
		t->u2b[i] = (int16_t)pt_tok_cp_to_byte((uint32_t)i);
	for (int b = 0; b < 256; b++) {
		uint8_t u[4];
		size_t n = pt_tok_utf8_put(pt_tok_byte_to_cp((uint8_t)b), u);
		memcpy(t->b2u[b], u, 2);
		t->b2u_len[b] = (uint8_t)n;
	}
	return PT_OK;
}

enum pt_status pt_tok_create(const struct pt_vocab_spec *s, pt_tok **out, struct pt_error *err)
{
	*out = NULL;
	if (!s->tokens || !s->n_tokens)
		return pt_error_set(err, PT_E_FORMAT, "tokenizer.ggml.tokens is missing or empty");
	if (s->n_tokens > PT_TOK_MAX_VOCAB || s->n_merges > PT_TOK_MAX_MERGES)
		return pt_error_set(err, PT_E_LIMIT, "vocabulary too large (%u tokens, %u merges)",
				    s->n_tokens, s->n_merges);
	struct pt_tok *t = pt_calloc(1, sizeof *t);
	if (!t)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	enum pt_status st = configure(t, s, err);
	if (!st)
		st = load_tokens(t, s, err);
	if (!st && t->kind == TOK_BPE)
		st = load_merges(t, s, err);
	if (!st) {
		apply_keys(t, s);
		if (t->add_bos && t->bos < 0)
			st = pt_error_set(err, PT_E_FORMAT,
					  "tokenizer adds BOS but has no BOS token (tokenizer.ggml.bos_token_id)");
	}
	if (!st)
		st = fixups(t, err);
	if (!st)
		st = build_special(t, err);
	if (!st)
		st = byte_maps(t);
	if (!st)
		st = tok_split_compile(t, err);
	if (!st && s->chat_template && !(t->chat_template = pt_strdup(s->chat_template)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st) {
		pt_tok_destroy(t);
		return st;
	}
	*out = t;
	return PT_OK;
}

void pt_tok_destroy(pt_tok *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_re; i++) {
		if (t->re[i])
			pcre2_code_free(t->re[i]);
		if (t->wre[i])
			pcre2_code_free_32(t->wre[i]);
	}
	pt_free(t->arena);
	pt_free(t->tok_off);
	pt_free(t->tok_len);
	pt_free(t->score);
	pt_free(t->attr);
	pt_free(t->hash);
	pt_free(t->marena);
	pt_free(t->merges);
	pt_free(t->mhash);
	pt_free(t->special);
	pt_free(t->eog);
	pt_free(t->chat_template);
	pt_free(t);
}

uint32_t pt_tok_n_vocab(const pt_tok *t) { return t->n_vocab; }
int32_t pt_tok_bos(const pt_tok *t) { return t->bos; }
int32_t pt_tok_eos(const pt_tok *t) { return t->eos; }
int32_t pt_tok_eot(const pt_tok *t) { return t->eot; }
bool pt_tok_add_bos(const pt_tok *t) { return t->add_bos; }
bool pt_tok_add_eos(const pt_tok *t) { return t->add_eos; }
const char *pt_tok_chat_template(const pt_tok *t) { return t->chat_template; }

bool pt_tok_is_eog(const pt_tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_vocab && t->eog &&
	       (t->eog[id >> 3] >> (id & 7)) & 1;
}

const char *pt_tok_text(const pt_tok *t, int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n_vocab) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = t->tok_len[id];
	return tok_str(t, (uint32_t)id);
}

uint32_t pt_tok_attr(const pt_tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_vocab ? t->attr[id] : 0;
}
