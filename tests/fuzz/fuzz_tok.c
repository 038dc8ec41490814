/* fuzz_tok.c - encodes arbitrary bytes with small built-in vocabularies (byte-level BPE
 * under every supported pre-tokenizer, gemma4-style BPE, SentencePiece), then decodes the
 * ids.  Byte 0 picks the vocabulary and the flags; the rest is the text.  Must not crash,
 * leak or trip the sanitizers; byte-level encodings must also round-trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token/tok.h"
#include "token/tok_unicode.h"
#include "util/alloc.h"

/* 0-3 byte-level BPE (pres[]), 4 sarvam-moe, 5 gemma4, 6 SentencePiece, 7.. byte-level
 * BPE under the list-driven and Kimi pres (pres_bl2[]) */
#define NCFG 12
static pt_tok *toks[NCFG];
static char texts[600][16];

static const char *const extra[] = { "ab", "abc", "he", "hel", "hello", "\xe2\x96\x81h",
				     "\xe2\x96\x81he", "12", "123", "<|im_end|>", "<ud>",
				     "<ctl><ud>", "<ctl>", "\n\n", "\xc4\xa0h", "'s" };
static const char *const merges_bl[] = { "a b", "ab c", "h e", "he l", "hel l", "1 2",
					  "12 3", "\xc4\xa0 h", "' s" };
static const char *const merges_sp[] = { "a b", "ab c", "h e", "he l", "\xe2\x96\x81 h",
					 "\xe2\x96\x81h e", "1 2", "12 3", "\n \n" };

static void build(int cfg)
{
	static const char *const pres[] = { "qwen2", "llama-bpe", "gpt-2", "default",
					    "sarvam-moe" };
	static const char *const pres_bl2[] = { "deepseek-v3", "deepseek-llm", "kimi-k2",
						"gpt-4o", "qwen35" };
	struct pt_vocab_spec s;
	struct pt_str tok[600], mg[16];
	int32_t type[600];
	uint32_t n = 0, nm = 0;
	bool byte_level = cfg < 4 || cfg >= 7;
	pt_vocab_spec_init(&s);
	for (int b = 0; b < 256; b++) {
		if (byte_level) {
			uint8_t u[4];
			size_t k = pt_tok_utf8_put(pt_tok_byte_to_cp((uint8_t)b), u);
			memcpy(texts[n], u, k);
			texts[n][k] = 0;
		} else {
			snprintf(texts[n], sizeof texts[n], "<0x%02X>", b);
		}
		tok[n] = (struct pt_str){ texts[n], strlen(texts[n]) };
		type[n++] = byte_level ? PT_TOKTYPE_NORMAL : PT_TOKTYPE_BYTE;
	}
	for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
		tok[n] = (struct pt_str){ extra[i], strlen(extra[i]) };
		type[n++] = extra[i][0] == '<' ? (strstr(extra[i], "ud>") && !strstr(extra[i], "ctl")
						   ? PT_TOKTYPE_USER_DEFINED : PT_TOKTYPE_CONTROL)
					       : PT_TOKTYPE_NORMAL;
	}
	const char *a = "\xe2\x96\x81", *hb = "h", *eb = "e";
	if (!byte_level) { /* pieces the merges reach that the byte list lacks */
		const char *more[] = { a, hb, eb, "a", "b", "c", "l", "1", "2", "3", "\n", "'", "s" };
		for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
			tok[n] = (struct pt_str){ more[i], strlen(more[i]) };
			type[n++] = PT_TOKTYPE_NORMAL;
		}
	}
	const char *const *m = byte_level ? merges_bl : merges_sp;
	for (size_t i = 0; i < 9; i++, nm++)
		mg[nm] = (struct pt_str){ m[i], strlen(m[i]) };
	s.tokens = tok;
	s.types = type;
	s.n_tokens = n;
	s.merges = mg;
	s.n_merges = nm;
	s.bos_id = 256 + 9; /* <|im_end|> */
	s.eos_id = 256 + 9;
	s.model = cfg < 5 || cfg >= 7 ? "gpt2" : cfg == 5 ? "gemma4" : "llama";
	s.pre = cfg < 5 ? pres[cfg] : cfg >= 7 ? pres_bl2[cfg - 7] : NULL;
	struct pt_error e = { 0 };
	if (pt_tok_create(&s, &toks[cfg], &e) != PT_OK) {
		fprintf(stderr, "fuzz_tok: vocab %d: %s\n", cfg, e.msg);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int cfg = data[0] % NCFG;
	bool parse = data[0] & 0x10, add = data[0] & 0x20;
	if (!toks[cfg])
		build(cfg);
	const pt_tok *t = toks[cfg];
	int32_t *ids = NULL;
	size_t n = 0;
	struct pt_error e = { 0 };
	if (pt_tok_encode_alloc(t, (const char *)data + 1, size - 1, add, parse, &ids, &n, &e))
		return 0; /* SPM: a byte with no piece is a clean error */
	char *text = NULL;
	size_t len;
	if (pt_tok_decode(t, ids, n, false, true, &text, &len, &e) != PT_OK)
		abort();
	/* byte-level without special parsing or BOS: every byte survives (invalid UTF-8
	 * becomes U+FFFD first, so compare only valid-looking ASCII input) */
	bool ascii = true;
	for (size_t i = 1; i < size; i++)
		ascii &= data[i] >= 0x20 && data[i] < 0x7F;
	bool rt = cfg == 0 || cfg >= 7;
	if (rt && ascii && !parse && !add && (len != size - 1 || memcmp(text, data + 1, len)))
		abort();
	pt_free(text);
	pt_free(ids);
	return 0;
}
