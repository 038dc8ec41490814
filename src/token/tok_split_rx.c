/* tok_split_rx.c - the regex lists of the list-driven pre-tokenizers (llama.cpp's
 * llm_tokenizer_bpe regex_exprs per pre type) and their compilation to PCRE2.
 *
 * llama.cpp runs a regex that names a \p{..} class with std::regex on the "collapsed" text
 * (ASCII as is, other code points one class byte, see tok_split.c) after rewriting each
 * \p{X} as [\xDn<its ASCII members>]; those patterns are written here already rewritten and
 * run through 8-bit PCRE2 on the same bytes.  A regex without a class runs with std::wregex
 * on the code points themselves (non-ASCII whitespace read as 0x0B); those run through
 * 32-bit PCRE2 on the same code points, their non-ASCII characters written as \x{..}.
 * std::regex's ECMAScript grammar and PCRE2 agree on everything these patterns use
 * (leftmost-first alternation, greedy classes, (?!..), \s = [\t\n\v\f\r ] on ASCII); '$',
 * which PCRE2 also matches before a final newline, is compiled PCRE2_DOLLAR_ENDONLY as
 * ECMAScript reads it, and deepseek-llm's one use of it (\s+$) is scanned directly
 * (RX_WS_END, tok_split.c). */
#include "token/tok_internal.h"

#include <string.h>

#include "util/alloc.h"

struct rx_def {
	enum tok_rx_kind kind;
	const char *pat;
};

/* \p{P} and \p{S} collapsed: the class bytes plus their ASCII members, inside a class. */
#define CP_PUNCT "\\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"
#define CP_SYMBOL "\\xD5\\$\\+<->^`\\|"
#define CP_LETTER "\\xD2A-Za-z"
#define CP_NUMBER "\\xD10-9"

/* The "default" list: [\p{P}\$\+<=>\^~\|]+, the GPT-2 regex (custom scanner), \p{N}+,
 * [0-9][0-9][0-9]. */
static const struct rx_def rx_default[] = {
	{ RX_COLLAPSED, "[" CP_PUNCT "\\$\\+<=>\\^~\\|]+" },
	{ RX_GPT2, NULL },
	{ RX_COLLAPSED, "[" CP_NUMBER "]+" },
	{ RX_COLLAPSED, "[0-9][0-9][0-9]" },
};

/* LLAMA_VOCAB_PRE_TYPE_GPT4O: llama.cpp's rewrite of the o200k regex (the case-insensitive
 * contractions spelled out, "upper" letters = letters not a-z, "lower" = letters not A-Z,
 * \p{M} dropped). */
static const struct rx_def rx_gpt4o[] = {
	{ RX_COLLAPSED,
	  "[^\\r\\n" CP_LETTER CP_NUMBER "]?((?=[" CP_LETTER "])([^a-z]))*((?=[" CP_LETTER
	  "])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
	  "|[^\\r\\n" CP_LETTER CP_NUMBER "]?((?=[" CP_LETTER "])([^a-z]))+((?=[" CP_LETTER
	  "])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
	  "|[" CP_NUMBER "]{1,3}| ?[^\\s" CP_LETTER CP_NUMBER "]+[\\r\\n/]*|\\s*[\\r\\n]+"
	  "|\\s+(?!\\S)|\\s+" },
};

/* LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM (pre "deepseek-v3"): \p{N}{1,3}; runs of CJK
 * ideographs U+4E00-9FA5, hiragana and katakana; then
 * [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 * | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const struct rx_def rx_deepseek3[] = {
	{ RX_COLLAPSED, "[" CP_NUMBER "]{1,3}" },
	{ RX_WIDE, "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+" },
	{ RX_COLLAPSED,
	  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
	  "|[^\\r\\n" CP_LETTER CP_PUNCT CP_SYMBOL "]?[" CP_LETTER "\\xD4]+"
	  "| ?[" CP_PUNCT CP_SYMBOL "]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
};

/* LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM (pre "deepseek-llm", DeepSeek-V2): [\r\n]; an optional
 * space and a run of cased letters (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee,
 * ... as listed in DeepSeek's tokenizer.json); an optional space and ASCII / full-width
 * punctuation, curly quotes, U+3000-3002; \s+$; CJK and Hangul runs; \p{N}+. */
static const struct rx_def rx_deepseek_llm[] = {
	{ RX_WIDE, "[\\r\\n]" },
	{ RX_WIDE,
	  "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
	  "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
	  "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
	  "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
	  "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
	  "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
	  "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
	  "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
	  "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
	  "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
	  "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
	  "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
	  "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
	  "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
	  "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
	  "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
	  "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
	  "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+" },
	{ RX_WIDE, "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
		   "\\x{3000}-\\x{3002}]+" },
	{ RX_WS_END, NULL }, /* \s+$ */
	{ RX_WIDE, "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+" },
	{ RX_COLLAPSED, "[" CP_NUMBER "]+" },
};

static enum pt_status compile_wide(const char *pat, pcre2_code_32 **out, int i,
				   struct pt_error *err)
{
	/* the pattern is ASCII (\x{..} escapes): widen it unit by unit */
	size_t n = strlen(pat);
	uint32_t *w = pt_mallocn(n + 1, sizeof *w);
	if (!w)
		return pt_error_set(err, PT_E_NOMEM, "out of memory compiling the pre-tokenizer");
	for (size_t k = 0; k < n; k++)
		w[k] = (unsigned char)pat[k];
	int ec;
	PCRE2_SIZE eo;
	*out = pcre2_compile_32(w, n, PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
	pt_free(w);
	if (!*out)
		return pt_error_set(err, PT_E_NOMEM, "pre-tokenizer regex %d failed (%d at %zu)", i,
				    ec, (size_t)eo);
	return PT_OK;
}

enum pt_status tok_split_compile(struct pt_tok *t, struct pt_error *err)
{
	const struct rx_def *list;
	int n;
#define LIST(a) (list = (a), n = (int)(sizeof(a) / sizeof((a)[0])))
	switch (t->split) {
	case SPLIT_DEFAULT: LIST(rx_default); break;
	case SPLIT_GPT4O: LIST(rx_gpt4o); break;
	case SPLIT_DEEPSEEK3: LIST(rx_deepseek3); break;
	case SPLIT_DEEPSEEK_LLM: LIST(rx_deepseek_llm); break;
	default: return PT_OK; /* a custom scanner */
	}
#undef LIST
	for (int i = 0; i < n; i++) {
		t->n_re = i + 1;
		t->re_kind[i] = (uint8_t)list[i].kind;
		if (list[i].kind == RX_WIDE) {
			enum pt_status st = compile_wide(list[i].pat, &t->wre[i], i, err);
			if (st)
				return st;
		} else if (list[i].kind == RX_COLLAPSED) {
			int ec;
			PCRE2_SIZE eo;
			t->re[i] = pcre2_compile((PCRE2_SPTR)list[i].pat, PCRE2_ZERO_TERMINATED,
						 PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
			if (!t->re[i])
				return pt_error_set(err, PT_E_NOMEM,
						    "pre-tokenizer regex %d failed (%d at %zu)", i, ec,
						    (size_t)eo);
		}
	}
	return PT_OK;
}
