/* test_tok_split.c - word boundaries of the deepseek-v3, deepseek-llm and kimi-k2
 * pre-tokenizers (llama.cpp's regex lists and Kimi scanner; the ids they lead to are
 * compared with llama.cpp itself in tests/oracle/test_tokenizer.sh). */
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "token/tok_internal.h"
#include "token/tok_unicode.h"
#include "util/alloc.h"

/* A vocabulary of the 256 GPT-2 byte symbols: enough for pt_tok_create. */
static pt_tok *byte_vocab(const char *pre)
{
	static char text[256][4];
	static struct pt_str tok[256];
	static int32_t type[256];
	struct pt_vocab_spec s;
	pt_vocab_spec_init(&s);
	for (int b = 0; b < 256; b++) {
		size_t k = pt_tok_utf8_put(pt_tok_byte_to_cp((uint8_t)b), (uint8_t *)text[b]);
		tok[b] = (struct pt_str){ text[b], k };
		type[b] = PT_TOKTYPE_NORMAL;
	}
	s.tokens = tok;
	s.types = type;
	s.n_tokens = 256;
	s.model = "gpt2";
	s.pre = pre;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	if (pt_tok_create(&s, &t, &e) != PT_OK)
		fprintf(stderr, "byte_vocab %s: %s\n", pre, e.msg);
	return t;
}

/* The words of text joined by '|' into out. */
static void split(const pt_tok *t, const char *text, char *out, size_t cap)
{
	uint32_t cps[256], *lens = NULL;
	size_t n = 0, off = 0, len = strlen(text), nw = 0, o = 0, at = 0;
	struct pt_error e = { 0 };
	while (off < len && n < 256)
		cps[n++] = pt_tok_utf8_next((const uint8_t *)text, len, &off);
	out[0] = 0;
	if (tok_split_words(t, cps, n, &lens, &nw, &e) != PT_OK)
		return;
	for (size_t w = 0; w < nw; w++) {
		if (w && o + 1 < cap)
			out[o++] = '|';
		for (uint32_t i = 0; i < lens[w]; i++, at++) {
			uint8_t u[4];
			size_t k = pt_tok_utf8_put(cps[at], u);
			if (o + k < cap)
				memcpy(out + o, u, k), o += k;
		}
	}
	out[o] = 0;
	pt_free(lens);
}

#define SPLIT(t, text, want)                                                                 \
	do {                                                                                 \
		char got_[1024];                                                             \
		split(t, text, got_, sizeof got_);                                           \
		CHECK_EQ_STR(got_, want);                                                    \
	} while (0)

PT_TEST(test_tok_split_deepseek3)
{
	pt_tok *t = byte_vocab("deepseek-v3");
	REQUIRE(t);
	/* digits in threes first, then CJK / kana runs, then words */
	SPLIT(t, "中文English混合123456文本。", "中文|English|混合|123|456|文本|。");
	SPLIT(t, "日本語のテキスト", "日本語のテキスト");
	/* an ASCII punctuation mark takes the letters after it */
	SPLIT(t, "a.b,c!d (x)", "a|.b|,c|!d| (|x|)");
	SPLIT(t, "Hello world\n\n  ok  ", "Hello| world|\n\n| | ok|  ");
	/* Hangul is letters, not in the CJK run */
	SPLIT(t, "한국어 12345", "한국어| |123|45");
	pt_tok_destroy(t);
}

PT_TEST(test_tok_split_deepseek_llm)
{
	pt_tok *t = byte_vocab("deepseek-llm");
	REQUIRE(t);
	/* every \r or \n alone; a space joins the letters after it; \s+$ at the end */
	SPLIT(t, "Hello World\n\n  end  ", "Hello| World|\n|\n| | end|  ");
	/* CJK and Hangul runs (U+0800-9FA5 includes kana), digits as one run */
	SPLIT(t, "中文abc한국어12345", "中文|abc|한국어|12345");
	/* ASCII and full-width punctuation runs, with an optional space before them */
	SPLIT(t, "ok!! ？？x", "ok|!!| ？？|x");
	SPLIT(t, "x 5  ", "x| |5|  ");
	/* \s+$ after thousands of spaces and a digit: linear, and still exact */
	static uint32_t cps[5004];
	uint32_t *lens = NULL;
	size_t nw = 0;
	struct pt_error e = { 0 };
	cps[0] = 'a';
	for (int i = 1; i <= 5000; i++)
		cps[i] = ' ';
	cps[5001] = '5', cps[5002] = ' ', cps[5003] = 0x3000; /* U+3000 counts as \s */
	REQUIRE(tok_split_words(t, cps, 5004, &lens, &nw, &e) == PT_OK);
	CHECK_EQ_INT(nw, 4);
	if (nw == 4)
		CHECK(lens[0] == 1 && lens[1] == 5000 && lens[2] == 1 && lens[3] == 2);
	pt_free(lens);
	pt_tok_destroy(t);
}

PT_TEST(test_tok_split_kimi_k2)
{
	pt_tok *t = byte_vocab("kimi-k2");
	REQUIRE(t);
	/* Han runs stand apart from other letters and from the space before them */
	SPLIT(t, "你好 世界can't", "你好| |世界|can't");
	SPLIT(t, "日本のテキスト", "日本|のテキスト");
	/* contractions only as a suffix of letters; digits in threes */
	SPLIT(t, "I'M 1234567", "I'M| |123|456|7");
	SPLIT(t, "x  \n\n y", "x|  \n\n| y");
	pt_tok_destroy(t);
}
