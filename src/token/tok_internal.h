/* tok_internal.h - the tokenizer's state, shared by tok_load.c, tok_split.c, tok_encode.c
 * and tok_decode.c.  Not part of the public API. */
#ifndef PT_TOKEN_TOK_INTERNAL_H
#define PT_TOKEN_TOK_INTERNAL_H

#include "token/tok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

enum tok_kind { TOK_BPE, TOK_SPM };

/* How raw text is cut into words before BPE (llama.cpp's regex_exprs per pre type). */
enum tok_split {
	SPLIT_GPT2,     /* unicode_regex_split_custom_gpt2 */
	SPLIT_LLAMA3,   /* custom llama3: contractions, letters, \p{N}{1,3}, ... */
	SPLIT_QWEN2,    /* same scanner with single digits */
	SPLIT_QWEN35,   /* Qwen2's with combining marks joining letters (pre "qwen35") */
	SPLIT_NEWLINES, /* [^\n]+|[\n]+ (gemma4, sarvam-moe) */
	SPLIT_DEFAULT,  /* the four-regex "default" list: PCRE2 for the std::regex ones */
	SPLIT_GPT4O,    /* gpt-4o / o200k (llama.cpp's rewritten regex, std::regex on the
			   collapsed text): PCRE2 on the same collapsed text */
	SPLIT_DEEPSEEK3, /* deepseek-v3: \p{N}{1,3}, kana/CJK runs, then the word regex */
	SPLIT_DEEPSEEK_LLM, /* deepseek-llm (V2): six regexes, four of them code-point classes */
	SPLIT_KIMI_K2,  /* kimi-k2: llama.cpp's custom Han-aware scanner */
};

#define TOK_MAX_REGEX 6

/* How one regex of a list runs (llama.cpp's unicode_regex_split): its custom GPT-2 scanner,
 * std::regex on the collapsed bytes (a \p{..} class in the pattern), or std::wregex on the
 * code points (no class; non-ASCII whitespace read as 0x0B).  RX_WS_END is deepseek-llm's
 * \s+$ on the code points, scanned directly: its leftmost match is the segment's trailing
 * whitespace, which a backtracking engine finds in time quadratic in the whitespace runs
 * before it (a few thousand spaces then a digit would exhaust PCRE2's match limit). */
enum tok_rx_kind { RX_GPT2, RX_COLLAPSED, RX_WIDE, RX_WS_END };

struct tok_merge {
	uint32_t loff, llen, roff, rlen; /* into the merge text arena */
};

struct pt_tok {
	enum tok_kind kind;
	enum tok_split split;
	char model[16];
	char pre[48];
	uint32_t n_vocab;
	char *arena;         /* all token texts, NUL-separated */
	uint64_t *tok_off;   /* offset of token i in arena */
	uint32_t *tok_len;
	float *score;
	uint32_t *attr;
	uint32_t *hash;      /* open addressing: id + 1, 0 empty */
	uint32_t hash_mask;
	/* merges: (left, right) -> rank */
	uint32_t n_merges;
	char *marena;
	struct tok_merge *merges;
	uint32_t *mhash;     /* rank + 1, 0 empty */
	uint32_t mhash_mask;
	/* partition candidates, longest text first */
	uint32_t *special;
	uint32_t n_special;
	uint8_t *eog;        /* bitmap over ids */
	int32_t bos, eos, eot, eom, unk, sep, pad;
	bool add_bos, add_eos, add_sep, add_space_prefix;
	bool escape_ws, byte_encode, ignore_merges, clean_spaces, newline_words;
	/* GPT-2 byte map: byte -> UTF-8 of its code point, and code point -> byte. */
	uint8_t b2u[256][2];
	uint8_t b2u_len[256];
	int16_t u2b[324];
	/* The regex list of the list-driven splits (default, gpt-4o, deepseek-*): 8-bit PCRE2
	 * for collapsed-byte patterns, 32-bit PCRE2 for code-point patterns. */
	pcre2_code *re[TOK_MAX_REGEX];
	pcre2_code_32 *wre[TOK_MAX_REGEX];
	uint8_t re_kind[TOK_MAX_REGEX];
	int n_re;
	char *chat_template;
};

/* FNV-1a over bytes; seed chains several pieces. */
static inline uint64_t tok_hash(const void *p, size_t n, uint64_t h)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
#define TOK_HASH_SEED 0xcbf29ce484222325ull
/* Final avalanche so the low bits used as a table index depend on every input byte. */
static inline uint32_t tok_hash_index(uint64_t h, uint32_t mask)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h & mask;
}

static inline const char *tok_str(const struct pt_tok *t, uint32_t id)
{
	return t->arena + t->tok_off[id];
}

/* Growable id vector used while encoding. */
struct tok_ids {
	int32_t *v;
	size_t n, cap;
};
enum pt_status tok_ids_push(struct tok_ids *ids, int32_t id, struct pt_error *err);

/* -1 when absent. */
int32_t tok_lookup(const struct pt_tok *t, const char *s, size_t n);
/* Merge rank of (l, r) or -1. */
int32_t tok_merge_rank(const struct pt_tok *t, const char *l, size_t ln, const char *r,
		       size_t rn);

/* Splits cps[0..n) into words; writes word lengths (in code points) to *lens. */
enum pt_status tok_split_words(const struct pt_tok *t, const uint32_t *cps, size_t n,
			       uint32_t **lens, size_t *n_words, struct pt_error *err);
enum pt_status tok_split_compile(struct pt_tok *t, struct pt_error *err);

#endif
