/* vocab.c - compact synthetic BPE vocabularies for mkmodel (see vocab.h).  Ordinary tokens
 * are the 256 byte symbols plus the prefixes of a fixed list of common English words, each
 * prefix reachable by one merge "prefix char" whose rank grows with the prefix length, so
 * llama.cpp's BPE always ends in in-vocabulary tokens. */
#include "model/vocab.h"

#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

static const char *const words[] = {
	"the", "of", "and", "to", "in", "is", "that", "it", "for", "was", "on", "are", "as",
	"with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had",
	"not", "but", "what", "all", "were", "when", "we", "there", "can", "an", "your",
	"which", "their", "said", "if", "do", "will", "each", "about", "how", "up", "out",
	"them", "then", "she", "many", "some", "so", "these", "would", "other", "into", "has",
	"more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than",
	"first", "been", "its", "who", "now", "people", "my", "made", "over", "did", "down",
	"only", "way", "find", "use", "may", "water", "long", "little", "very", "after",
	"words", "called", "just", "where", "most", "know", "get", "through", "back", "much",
	"go", "good", "new", "write", "our", "me", "man", "too", "any", "day", "same", "right",
	"look", "think", "also", "around", "another", "came", "come", "work", "three", "word",
	"must", "because", "does", "part", "even", "place", "well", "such", "here", "take",
	"why", "things", "help", "put", "years", "different", "away", "again", "off", "went",
	"old", "number", "great", "tell", "men", "say", "small", "every", "found", "still",
	"between", "name", "should", "home", "big", "give", "air", "line", "set", "own",
	"under", "read", "last", "never", "us", "left", "end", "along", "while", "might",
	"next", "sound", "below", "saw", "something", "thought", "both", "few", "those",
	"always", "looked", "show", "large", "often", "together", "asked", "house", "world",
	"going", "want", "school", "important", "until", "form", "food", "keep", "children",
	"land", "side", "without", "once", "life", "enough", "took", "four", "head", "above",
	"kind", "began", "almost", "live", "page", "earth", "need", "hand", "high", "year",
	"mother", "light", "country", "father", "night", "picture", "being", "study", "second",
	"soon", "story", "since", "white", "days", "paper", "hard", "near", "better", "best",
	"during", "today", "sure", "knew", "try", "told", "young", "sun", "thing", "whole",
	"hear", "example", "heard", "change", "answer", "room", "sea", "against", "top",
	"learn", "point", "city", "play", "five", "hello", "model", "token", "quick", "brown",
	"fox", "jumps", "lazy", "dog", "capital", "France", "Paris", "The", "What", "Hello",
	"user", "assistant", "system", "doing",
};

static enum pt_status nomem(struct pt_error *err)
{
	return pt_error_set(err, PT_E_NOMEM, "out of memory building the vocabulary");
}

int32_t pt_vocab_find(const struct pt_vocab *v, const char *tok)
{
	for (uint32_t i = 0; i < v->n; i++)
		if (strcmp(v->tokens[i], tok) == 0)
			return (int32_t)i;
	return -1;
}

/* Appends tok unless present; returns its id or -1 on allocation failure. */
static int32_t add_token(struct pt_vocab *v, const char *tok, int32_t type, bool dedupe)
{
	int32_t id = dedupe ? pt_vocab_find(v, tok) : -1;
	if (id >= 0)
		return id;
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? v->cap * 2 : 1024;
		char **t = pt_reallocn(v->tokens, cap, sizeof *t);
		if (!t)
			return -1;
		v->tokens = t;
		int32_t *ty = pt_reallocn(v->types, cap, sizeof *ty);
		if (!ty)
			return -1;
		v->types = ty;
		v->cap = cap;
	}
	if (!(v->tokens[v->n] = pt_strdup(tok)))
		return -1;
	v->types[v->n] = type;
	return (int32_t)v->n++;
}

static int add_merge(struct pt_vocab *v, const char *left, const char *right)
{
	if (v->n_merges == v->cap_merges) {
		uint32_t cap = v->cap_merges ? v->cap_merges * 2 : 1024;
		char **m = pt_reallocn(v->merges, cap, sizeof *m);
		if (!m)
			return -1;
		v->merges = m;
		v->cap_merges = cap;
	}
	size_t a = strlen(left), b = strlen(right);
	char *s = pt_malloc(a + b + 2);
	if (!s)
		return -1;
	memcpy(s, left, a);
	s[a] = ' ';
	memcpy(s + a + 1, right, b + 1);
	v->merges[v->n_merges++] = s;
	return 0;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the rest to
 * U+0100 + k in byte order.  Writes UTF-8 to out (3 bytes max + NUL). */
static void gpt2_byte(unsigned b, char *out)
{
	unsigned cp = b;
	bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
	if (!printable) {
		unsigned k = 0;
		for (unsigned x = 0; x < b; x++)
			k += !((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae);
		cp = 0x100 + k;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

/* Merges for every word with a leading space marker and (for the first 60 words) without:
 * all 2-symbol prefixes first, then 3-symbol ones, ... so each merge's left side exists
 * when it is applied. */
static enum pt_status add_word_merges(struct pt_vocab *v, const char *space,
				      struct pt_error *err)
{
	const size_t n_words = sizeof words / sizeof words[0];
	char buf[64], left[64], right[8], merged[80];
	for (size_t len = 2; len <= 16; len++)
		for (size_t w = 0; w < 2 * n_words; w++) {
			bool spaced = w < n_words;
			const char *word = words[spaced ? w : w - n_words];
			if (!spaced && w - n_words >= 60)
				continue;
			snprintf(buf, sizeof buf, "%s%s", spaced ? space : "", word);
			/* symbols: the space marker counts as one symbol */
			size_t lead = spaced ? strlen(space) : 0, nsym = strlen(word) + spaced;
			if (nsym < len)
				continue;
			size_t cut = lead + (len - 1) - spaced; /* bytes of the first len-1 symbols */
			memcpy(left, buf, cut);
			left[cut] = 0;
			right[0] = buf[cut];
			right[1] = 0;
			snprintf(merged, sizeof merged, "%s%s", left, right);
			if (pt_vocab_find(v, merged) >= 0)
				continue;
			if (add_merge(v, left, right) != 0 ||
			    add_token(v, merged, PT_TOKTYPE_NORMAL, false) < 0)
				return nomem(err);
		}
	return PT_OK;
}

struct special {
	const char *text;
	int32_t type;
};

static enum pt_status add_specials(struct pt_vocab *v, const struct special *s, size_t n,
				   struct pt_error *err)
{
	for (size_t i = 0; i < n; i++)
		if (add_token(v, s[i].text, s[i].type, true) < 0)
			return nomem(err);
	return PT_OK;
}

static enum pt_status byte_symbols(struct pt_vocab *v, bool spm, struct pt_error *err)
{
	char sym[8];
	for (unsigned b = 0; b < 256; b++) {
		gpt2_byte(b, sym);
		if (add_token(v, sym, PT_TOKTYPE_NORMAL, true) < 0)
			return nomem(err);
	}
	if (spm && add_token(v, "\xe2\x96\x81", PT_TOKTYPE_NORMAL, true) < 0)
		return nomem(err);
	return PT_OK;
}

static enum pt_status qwen_vocab(struct pt_vocab *v, struct pt_error *err)
{
	static const struct special sp[] = {
		{ "<|endoftext|>", PT_TOKTYPE_CONTROL }, { "<|im_start|>", PT_TOKTYPE_CONTROL },
		{ "<|im_end|>", PT_TOKTYPE_CONTROL }, { "<tool_call>", PT_TOKTYPE_USER_DEFINED },
		{ "</tool_call>", PT_TOKTYPE_USER_DEFINED }, { "<tool_response>", PT_TOKTYPE_USER_DEFINED },
		{ "</tool_response>", PT_TOKTYPE_USER_DEFINED }, { "<think>", PT_TOKTYPE_USER_DEFINED },
		{ "</think>", PT_TOKTYPE_USER_DEFINED },
	};
	enum pt_status st;
	v->model = "gpt2";
	v->pre = "qwen2";
	v->chat_template = pt_template_qwen3;
	if ((st = byte_symbols(v, false, err)) != PT_OK ||
	    (st = add_word_merges(v, "\xc4\xa0", err)) != PT_OK)
		return st;
	if (add_merge(v, "\xc4\x8a", "\xc4\x8a") != 0 ||
	    add_token(v, "\xc4\x8a\xc4\x8a", PT_TOKTYPE_NORMAL, true) < 0)
		return nomem(err);
	/* Qwen keeps its added tokens after the ordinary vocabulary. */
	if ((st = add_specials(v, sp, sizeof sp / sizeof sp[0], err)) != PT_OK)
		return st;
	v->bos = v->pad = pt_vocab_find(v, "<|endoftext|>");
	v->eos = pt_vocab_find(v, "<|im_end|>");
	v->add_bos = false;
	return PT_OK;
}

static enum pt_status glm_vocab(struct pt_vocab *v, struct pt_error *err)
{
	/* GLM-4.5's added tokens, ids 151329..151364 in the real vocabulary (same order here,
	 * after the ordinary tokens); all CONTROL, as the published GGUFs type them. */
	static const char *const sp[] = {
		"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
		"<|user|>", "<|assistant|>", "<|observation|>", "<|begin_of_image|>",
		"<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>",
		"<|end_of_audio|>", "<|begin_of_transcription|>", "<|end_of_transcription|>",
		"<|code_prefix|>", "<|code_middle|>", "<|code_suffix|>", "<think>", "</think>",
		"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<arg_key>",
		"</arg_key>", "<arg_value>", "</arg_value>", "/nothink", "<|begin_of_box|>",
		"<|end_of_box|>", "<|image|>", "<|video|>",
	};
	enum pt_status st;
	v->model = "gpt2";
	v->pre = "glm4";
	v->chat_template = pt_template_glm45;
	if ((st = byte_symbols(v, false, err)) != PT_OK ||
	    (st = add_word_merges(v, "\xc4\xa0", err)) != PT_OK)
		return st;
	for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
		if (add_token(v, sp[i], PT_TOKTYPE_CONTROL, true) < 0)
			return nomem(err);
	/* convert_hf_to_gguf.py (Glm4MoeModel.set_vocab): bos [gMASK], eos/unk/pad
	 * <|endoftext|>, eot <|user|>, eom <|observation|>; the template writes [gMASK]<sop>
	 * itself, so no BOS is added */
	v->bos = pt_vocab_find(v, "[gMASK]");
	v->eos = v->unk = v->pad = pt_vocab_find(v, "<|endoftext|>");
	v->eot = pt_vocab_find(v, "<|user|>");
	v->eom = pt_vocab_find(v, "<|observation|>");
	v->add_bos = false;
	return PT_OK;
}

static enum pt_status gemma_vocab(struct pt_vocab *v, struct pt_error *err)
{
	/* Gemma order: <pad> <eos> <bos> <unk> <mask> first (ids 0-4 as in the real vocab). */
	static const struct special sp[] = {
		{ "<pad>", PT_TOKTYPE_CONTROL }, { "<eos>", PT_TOKTYPE_CONTROL }, { "<bos>", PT_TOKTYPE_CONTROL },
		{ "<unk>", PT_TOKTYPE_UNKNOWN }, { "<mask>", PT_TOKTYPE_CONTROL },
		{ "<|tool>", PT_TOKTYPE_CONTROL }, { "<tool|>", PT_TOKTYPE_CONTROL },
		{ "<|tool_call>", PT_TOKTYPE_USER_DEFINED }, { "<tool_call|>", PT_TOKTYPE_USER_DEFINED },
		{ "<|tool_response>", PT_TOKTYPE_USER_DEFINED },
		{ "<tool_response|>", PT_TOKTYPE_USER_DEFINED }, { "<|think|>", PT_TOKTYPE_CONTROL },
		{ "<|channel>", PT_TOKTYPE_USER_DEFINED }, { "<channel|>", PT_TOKTYPE_USER_DEFINED },
		{ "<|turn>", PT_TOKTYPE_CONTROL }, { "<turn|>", PT_TOKTYPE_CONTROL },
		{ "<|\"|>", PT_TOKTYPE_USER_DEFINED }, { "<|image|>", PT_TOKTYPE_CONTROL },
		{ "<|audio|>", PT_TOKTYPE_CONTROL }, { "<|video|>", PT_TOKTYPE_CONTROL },
		{ "\n", PT_TOKTYPE_USER_DEFINED }, { "\n\n", PT_TOKTYPE_USER_DEFINED },
		{ "\xe2\x96\x81\xe2\x96\x81", PT_TOKTYPE_USER_DEFINED },
	};
	enum pt_status st;
	char name[16];
	v->model = "gemma4";
	v->pre = NULL; /* the gemma4 model type implies pre "gemma4" */
	v->chat_template = pt_template_gemma4;
	v->add_space_prefix_key = true;
	if ((st = add_specials(v, sp, sizeof sp / sizeof sp[0], err)) != PT_OK)
		return st;
	for (unsigned b = 0; b < 256; b++) {
		snprintf(name, sizeof name, "<0x%02X>", b);
		if (add_token(v, name, PT_TOKTYPE_BYTE, true) < 0)
			return nomem(err);
	}
	if ((st = byte_symbols(v, true, err)) != PT_OK ||
	    (st = add_word_merges(v, "\xe2\x96\x81", err)) != PT_OK)
		return st;
	v->pad = 0;
	v->eos = 1;
	v->bos = 2;
	v->unk = 3;
	v->eot = pt_vocab_find(v, "<turn|>");
	v->add_bos = true;
	return PT_OK;
}

static enum pt_status sarvam_vocab(struct pt_vocab *v, struct pt_error *err)
{
	/* config.json: pad 0, eos 1; the rest of Sarvam's added tokens are not established
	 * (TOKENIZERS.md 2.3): these are the ones its chat template uses. */
	static const struct special sp[] = {
		{ "<pad>", PT_TOKTYPE_CONTROL }, { "</s>", PT_TOKTYPE_CONTROL }, { "<s>", PT_TOKTYPE_CONTROL },
		{ "<unk>", PT_TOKTYPE_UNKNOWN }, { "[SYSTEM_PROMPT]", PT_TOKTYPE_CONTROL },
		{ "[/SYSTEM_PROMPT]", PT_TOKTYPE_CONTROL }, { "[INST]", PT_TOKTYPE_CONTROL },
		{ "[/INST]", PT_TOKTYPE_CONTROL }, { "<think>", PT_TOKTYPE_USER_DEFINED },
		{ "</think>", PT_TOKTYPE_USER_DEFINED },
		{ "  ", PT_TOKTYPE_USER_DEFINED }, { "\n", PT_TOKTYPE_USER_DEFINED },
		{ "\n\n", PT_TOKTYPE_USER_DEFINED },
	};
	enum pt_status st;
	v->model = "gpt2";
	v->pre = "sarvam-moe";
	v->chat_template = pt_template_sarvam;
	if ((st = add_specials(v, sp, sizeof sp / sizeof sp[0], err)) != PT_OK)
		return st;
	if ((st = byte_symbols(v, true, err)) != PT_OK ||
	    (st = add_word_merges(v, "\xe2\x96\x81", err)) != PT_OK)
		return st;
	v->pad = 0;
	v->eos = 1;
	v->bos = 2;
	v->unk = 3;
	v->add_bos = false;
	return PT_OK;
}

/* o200k_harmony's added tokens (tokenizer_config.json of openai/gpt-oss: ids 199998 ...
 * 200018 in the real vocabulary; reserved slots left out), after the ordinary vocabulary
 * as there.  bos <|startoftext|>, eos <|return|>, pad <|endoftext|>; no BOS added. */
static enum pt_status oss_vocab(struct pt_vocab *v, struct pt_error *err)
{
	static const struct special sp[] = {
		{ "<|startoftext|>", PT_TOKTYPE_CONTROL }, { "<|endoftext|>", PT_TOKTYPE_CONTROL },
		{ "<|return|>", PT_TOKTYPE_CONTROL }, { "<|constrain|>", PT_TOKTYPE_CONTROL },
		{ "<|channel|>", PT_TOKTYPE_CONTROL }, { "<|start|>", PT_TOKTYPE_CONTROL },
		{ "<|end|>", PT_TOKTYPE_CONTROL }, { "<|message|>", PT_TOKTYPE_CONTROL },
		{ "<|call|>", PT_TOKTYPE_CONTROL }, { "<|endofprompt|>", PT_TOKTYPE_CONTROL },
	};
	enum pt_status st;
	v->model = "gpt2";
	v->pre = "gpt-4o";
	v->chat_template = pt_template_gptoss;
	if ((st = byte_symbols(v, false, err)) != PT_OK ||
	    (st = add_word_merges(v, "\xc4\xa0", err)) != PT_OK)
		return st;
	if (add_merge(v, "\xc4\x8a", "\xc4\x8a") != 0 ||
	    add_token(v, "\xc4\x8a\xc4\x8a", PT_TOKTYPE_NORMAL, true) < 0)
		return nomem(err);
	if ((st = add_specials(v, sp, sizeof sp / sizeof sp[0], err)) != PT_OK)
		return st;
	v->bos = pt_vocab_find(v, "<|startoftext|>");
	v->eos = pt_vocab_find(v, "<|return|>");
	v->pad = pt_vocab_find(v, "<|endoftext|>");
	v->add_bos = false;
	return PT_OK;
}

enum pt_status pt_vocab_compact(enum pt_arch arch, uint32_t pad_to, struct pt_vocab *v,
				struct pt_error *err)
{
	enum pt_status st;
	char name[32];
	memset(v, 0, sizeof *v);
	v->bos = v->eos = v->eot = v->pad = v->unk = v->eom = -1;
	switch (arch) {
	case PT_ARCH_QWEN3MOE: st = qwen_vocab(v, err); break;
	case PT_ARCH_GEMMA4: st = gemma_vocab(v, err); break;
	case PT_ARCH_BAILINGMOE2: st = sarvam_vocab(v, err); break;
	case PT_ARCH_GLM4MOE: st = glm_vocab(v, err); break;
	/* Qwen3.5's own vocabulary (248320 tokens) is in no package here (llama.cpp's
	 * ggml-vocab-qwen35.gguf is Qwen2's vocabulary relabelled pre "qwen35", without the
	 * <think>/<tool_call> tokens the template needs): the compact Qwen one stands in, with
	 * Qwen3.5's pre-tokenizer and its real chat template; --vocab-gguf imports a real one */
	case PT_ARCH_QWEN35MOE:
		st = qwen_vocab(v, err);
		v->pre = "qwen35"; /* Qwen3.5's splitter: combining marks join letters */
		v->chat_template = pt_template_qwen35;
		break;
	/* DeepSeek's own vocabularies are large (128K-160K): the Qwen2 family's byte-level
	 * BPE stands in; the deepseek-v3, kimi-k2 and full (V2-Lite) presets write their real
	 * model's pre-tokenizer over it (docs/MODELS.md), --vocab imports the real one */
	case PT_ARCH_DEEPSEEK2: st = qwen_vocab(v, err); break;
	case PT_ARCH_GPTOSS: st = oss_vocab(v, err); break;
	default: st = pt_error_set(err, PT_E_INVALID, "no vocabulary for this architecture");
	}
	while (st == PT_OK && v->n < pad_to) {
		snprintf(name, sizeof name, "[PAD%u]", v->n);
		if (add_token(v, name, PT_TOKTYPE_UNUSED, false) < 0)
			st = nomem(err);
	}
	if (st != PT_OK)
		pt_vocab_free(v);
	return st;
}

void pt_vocab_free(struct pt_vocab *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->n; i++)
		pt_free(v->tokens[i]);
	for (uint32_t i = 0; i < v->n_merges; i++)
		pt_free(v->merges[i]);
	pt_free(v->tokens);
	pt_free(v->types);
	pt_free(v->merges);
	memset(v, 0, sizeof *v);
}

static enum pt_status set_id(pt_gguf_writer *w, const char *key, int32_t id,
			     struct pt_error *err)
{
	return id < 0 ? PT_OK : pt_gguf_writer_set_u32(w, key, (uint32_t)id, err);
}

enum pt_status pt_vocab_write(const struct pt_vocab *v, pt_gguf_writer *w,
			      struct pt_error *err)
{
	enum pt_status st;
#define TRY(x)                                                                             \
	do {                                                                               \
		if ((st = (x)) != PT_OK)                                                   \
			return st;                                                         \
	} while (0)
	TRY(pt_gguf_writer_set_str(w, "tokenizer.ggml.model", v->model, err));
	if (v->pre)
		TRY(pt_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre, err));
	TRY(pt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens,
				       NULL, v->n, err));
	TRY(pt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", PT_GGUF_I32, v->types, v->n,
				   err));
	TRY(pt_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges,
				       NULL, v->n_merges, err));
	TRY(set_id(w, "tokenizer.ggml.bos_token_id", v->bos, err));
	TRY(set_id(w, "tokenizer.ggml.eos_token_id", v->eos, err));
	TRY(set_id(w, "tokenizer.ggml.eot_token_id", v->eot, err));
	TRY(set_id(w, "tokenizer.ggml.unknown_token_id", v->unk, err));
	TRY(set_id(w, "tokenizer.ggml.padding_token_id", v->pad, err));
	TRY(set_id(w, "tokenizer.ggml.eom_token_id", v->eom, err));
	TRY(pt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos, err));
	if (v->add_space_prefix_key)
		TRY(pt_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false, err));
	TRY(pt_gguf_writer_set_str(w, "tokenizer.chat_template", v->chat_template, err));
#undef TRY
	return PT_OK;
}
