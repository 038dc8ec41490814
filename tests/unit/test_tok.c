/* test_tok.c - the tokenizer on small hand-built vocabularies: BPE merge order, byte
 * fallback, special-token partition, SPM space prefix, pre-tokenizer digit rules, refusal of
 * unknown models/pre-tokenizers, detokenization, EOG detection, and an allocation sweep.
 * (Agreement with llama.cpp on real vocabularies: tests/oracle/test_tokenizer.sh.) */
#include "token/tok.h"
#include "token/hf_import.h"
#include "util/alloc.h"
#include "test.h"

#include <stdlib.h>

#define MAXV 64

struct vb {
	struct pt_vocab_spec s;
	struct pt_str tok[MAXV];
	int32_t type[MAXV];
	float score[MAXV];
	struct pt_str merge[MAXV];
};

static void vb_init(struct vb *v, const char *model, const char *pre)
{
	memset(v, 0, sizeof *v);
	pt_vocab_spec_init(&v->s);
	v->s.model = model;
	v->s.pre = pre;
	v->s.tokens = v->tok;
	v->s.types = v->type;
	v->s.scores = v->score;
	v->s.merges = v->merge;
}

static int32_t vb_add(struct vb *v, const char *text, int32_t type)
{
	uint32_t i = v->s.n_tokens++;
	v->tok[i] = (struct pt_str){ text, strlen(text) };
	v->type[i] = type;
	v->score[i] = -(float)i;
	return (int32_t)i;
}

static void vb_merge(struct vb *v, const char *m)
{
	v->merge[v->s.n_merges++] = (struct pt_str){ m, strlen(m) };
}

/* Encodes text and compares with want[0..n). */
static int enc_eq(const pt_tok *t, const char *text, bool add, bool parse, const int32_t *want,
		  size_t n)
{
	int32_t ids[64];
	size_t got = 0;
	struct pt_error e = { 0 };
	if (pt_tok_encode(t, text, strlen(text), add, parse, ids, 64, &got, &e) != PT_OK) {
		fprintf(stderr, "encode failed: %s\n", e.msg);
		return 0;
	}
	if (got != n || memcmp(ids, want, n * sizeof *ids)) {
		fprintf(stderr, "\"%s\": got", text);
		for (size_t i = 0; i < got; i++)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, "\n");
		return 0;
	}
	return 1;
}
#define ENC(t, text, add, parse, ...)                                                        \
	do {                                                                                 \
		const int32_t w_[] = { __VA_ARGS__ };                                        \
		CHECK(enc_eq(t, text, add, parse, w_, sizeof w_ / sizeof w_[0]));            \
	} while (0)

/* gemma4-style vocab: raw UTF-8 pieces, U+2581 for space, <0xXX> bytes. */
static void sp_vocab(struct vb *v, bool b_c_first)
{
	vb_init(v, "gemma4", NULL);
	vb_add(v, "<pad>", PT_TOKTYPE_CONTROL);                        /* 0 */
	vb_add(v, "<eos>", PT_TOKTYPE_CONTROL);                        /* 1 */
	vb_add(v, "<bos>", PT_TOKTYPE_CONTROL);                        /* 2 */
	vb_add(v, "a", 1), vb_add(v, "b", 1), vb_add(v, "c", 1);       /* 3 4 5 */
	vb_add(v, "ab", 1), vb_add(v, "bc", 1);                        /* 6 7 */
	vb_add(v, "\xe2\x96\x81", 1);                                  /* 8 ▁ */
	vb_add(v, "<0xC3>", PT_TOKTYPE_BYTE);                          /* 9 */
	vb_add(v, "<0xA9>", PT_TOKTYPE_BYTE);                          /* 10 */
	vb_add(v, "<ctl>", PT_TOKTYPE_CONTROL);                        /* 11 */
	vb_add(v, "<ud>", PT_TOKTYPE_USER_DEFINED);                    /* 12 */
	vb_add(v, "<ctl><ud>", PT_TOKTYPE_CONTROL);                    /* 13 */
	vb_add(v, "\xef\xbf\xbd", 1);                                  /* 14 U+FFFD */
	vb_add(v, "\n", 1), vb_add(v, "\n\n", 1);                      /* 15 16 */
	vb_add(v, "<end_of_turn>", PT_TOKTYPE_CONTROL);                /* 17 */
	vb_add(v, "\xe2\x96\x81" "a", 1);                              /* 18 ▁a */
	if (b_c_first) {
		vb_merge(v, "b c");
		vb_merge(v, "a b");
	} else {
		vb_merge(v, "a b");
		vb_merge(v, "b c");
	}
	vb_merge(v, "\xe2\x96\x81 a");
	v->s.bos_id = 2;
	v->s.eos_id = 1;
}

PT_TEST(test_tok_bpe_merge_order_by_rank)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	sp_vocab(&v, false);
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "abc", false, false, 6, 5);
	ENC(t, "abab", false, false, 6, 6);
	pt_tok_destroy(t);
	sp_vocab(&v, true);
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "abc", false, false, 3, 7);
	/* gemma4 forces add_bos: BOS first with add_special */
	ENC(t, "abc", true, false, 2, 3, 7);
	/* spaces become U+2581 and merge */
	ENC(t, "a a", false, false, 3, 18);
	pt_tok_destroy(t);
}

PT_TEST(test_tok_byte_fallback_and_invalid_utf8)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	sp_vocab(&v, false);
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "\xc3\xa9", false, false, 9, 10); /* é: not a piece -> <0xC3><0xA9> */
	ENC(t, "a\xff", false, false, 3, 14);    /* invalid byte -> U+FFFD (llama.cpp) */
	ENC(t, "\n\n", false, false, 16);        /* newline run kept whole (gemma4) */
	char *s;
	size_t n;
	const int32_t ids[] = { 3, 9, 10, 18 };
	REQUIRE(pt_tok_decode(t, ids, 4, false, false, &s, &n, &e) == PT_OK);
	CHECK_EQ_STR(s, "a\xc3\xa9 a");
	pt_free(s);
	pt_tok_destroy(t);
}

PT_TEST(test_tok_special_partition)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	sp_vocab(&v, false);
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	/* parse_special: CONTROL and USER_DEFINED, longest first */
	ENC(t, "a<ctl>b", false, true, 3, 11, 4);
	ENC(t, "<ctl><ud>", false, true, 13);
	ENC(t, "<ud><ctl>", false, true, 12, 11);
	/* without: USER_DEFINED still matched, CONTROL text goes through BPE */
	ENC(t, "<ud>a", false, false, 12, 3);
	int32_t ids[64];
	size_t n = 0;
	REQUIRE(pt_tok_encode(t, "<ctl>", 5, false, false, ids, 64, &n, &e) == PT_OK);
	/* only "c" has a piece; the other bytes have no <0xXX> token and are dropped, as
	 * llama.cpp does */
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(ids[0], 5);
	/* too small a buffer: PT_E_LIMIT with the full count */
	CHECK_EQ_INT(pt_tok_encode(t, "abab", 4, true, false, ids, 1, &n, &e), PT_E_LIMIT);
	CHECK_EQ_INT(n, 3);
	/* rendering: control hidden unless asked */
	char *s;
	size_t len;
	const int32_t x[] = { 11, 3, 12 };
	REQUIRE(pt_tok_decode(t, x, 3, false, false, &s, &len, &e) == PT_OK);
	CHECK_EQ_STR(s, "a<ud>");
	pt_free(s);
	REQUIRE(pt_tok_decode(t, x, 3, false, true, &s, &len, &e) == PT_OK);
	CHECK_EQ_STR(s, "<ctl>a<ud>");
	pt_free(s);
	/* end of generation: eos and the detected <end_of_turn> */
	CHECK(pt_tok_is_eog(t, 1));
	CHECK(pt_tok_is_eog(t, 17));
	CHECK_EQ_INT(pt_tok_eot(t), 17);
	CHECK(!pt_tok_is_eog(t, 3));
	CHECK(!pt_tok_is_eog(t, -1));
	pt_tok_destroy(t);
}

PT_TEST(test_tok_spm_space_prefix_and_bytes)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	vb_init(&v, "llama", NULL);
	vb_add(&v, "<unk>", PT_TOKTYPE_UNKNOWN);            /* 0 */
	vb_add(&v, "<s>", PT_TOKTYPE_CONTROL);              /* 1 */
	vb_add(&v, "</s>", PT_TOKTYPE_CONTROL);             /* 2 */
	vb_add(&v, "\xe2\x96\x81", 1);                      /* 3 ▁ */
	vb_add(&v, "h", 1), vb_add(&v, "i", 1);             /* 4 5 */
	vb_add(&v, "\xe2\x96\x81h", 1);                     /* 6 */
	vb_add(&v, "\xe2\x96\x81hi", 1);                    /* 7 */
	vb_add(&v, "hi", 1);                                /* 8 */
	vb_add(&v, "<0x21>", PT_TOKTYPE_BYTE);              /* 9 ! */
	vb_add(&v, "<sep>", PT_TOKTYPE_CONTROL);            /* 10 */
	v.score[7] = 10.0f; /* prefer ▁hi over ▁h + i */
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "hi", true, false, 1, 7);
	ENC(t, "hi hi!", false, false, 7, 7, 9);
	/* after a special token the next fragment gets the prefix again */
	ENC(t, "hi<sep>hi", false, true, 7, 10, 7);
	char *s;
	size_t n;
	const int32_t ids[] = { 1, 7, 7, 9 };
	REQUIRE(pt_tok_decode(t, ids + 1, 3, true, false, &s, &n, &e) == PT_OK);
	CHECK_EQ_STR(s, "hi hi!"); /* the prefix space of the first piece is stripped */
	pt_free(s);
	/* llama.cpp quirk: removing a leading BOS also cancels that strip */
	REQUIRE(pt_tok_decode(t, ids, 4, true, false, &s, &n, &e) == PT_OK);
	CHECK_EQ_STR(s, " hi hi!");
	pt_free(s);
	/* a byte with neither <0xXX> nor a raw piece is an error, not a crash */
	int32_t out[8];
	CHECK_EQ_INT(pt_tok_encode(t, "~", 1, false, false, out, 8, &n, &e), PT_E_UNSUPPORTED);
	pt_tok_destroy(t);
}

/* Byte-level: ASCII maps to itself, space to U+0120. */
static void bl_vocab(struct vb *v, const char *pre)
{
	vb_init(v, "gpt2", pre);
	v->s.scores = NULL;
	vb_add(v, "a", 1), vb_add(v, "\xc4\xa0", 1);                  /* 0 1 */
	vb_add(v, "1", 1), vb_add(v, "2", 1), vb_add(v, "3", 1);       /* 2 3 4 */
	vb_add(v, "12", 1), vb_add(v, "123", 1);                       /* 5 6 */
	vb_add(v, "\xc4\xa0" "a", 1);                                  /* 7 */
	vb_add(v, "'", 1), vb_add(v, "s", 1), vb_add(v, "'s", 1);      /* 8 9 10 */
	vb_add(v, "<|im_end|>", PT_TOKTYPE_CONTROL);                   /* 11 */
	vb_merge(v, "1 2");
	vb_merge(v, "\xc4\xa0 a");
	v->s.eos_id = 11;
	v->s.bos_id = 11;
}

PT_TEST(test_tok_pretokenizer_digits)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	bl_vocab(&v, "qwen2");
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "a 123", false, false, 0, 1, 2, 3, 4); /* \p{N}: one digit per word */
	ENC(t, "a a", false, false, 0, 7);
	ENC(t, "a's", false, false, 0, 8, 9); /* "'s" is a word; no merge for it */
	CHECK(pt_tok_is_eog(t, 11));
	pt_tok_destroy(t);
	bl_vocab(&v, "llama-bpe");
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	ENC(t, "a 123", false, false, 0, 1, 6); /* \p{N}{1,3}, ignore_merges: whole word */
	ENC(t, "a 123", true, false, 11, 0, 1, 6); /* llama3 pre adds BOS by default */
	pt_tok_destroy(t);
}

PT_TEST(test_tok_refuses_unknown_model_and_pre)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	bl_vocab(&v, "no-such-pre");
	CHECK_EQ_INT(pt_tok_create(&v.s, &t, &e), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(e.msg, "no-such-pre");
	CHECK(t == NULL);
	pt_error_clear(&e);
	bl_vocab(&v, "gpt2"); /* llama.cpp knows "gpt-2", not "gpt2" */
	CHECK_EQ_INT(pt_tok_create(&v.s, &t, &e), PT_E_UNSUPPORTED);
	pt_error_clear(&e);
	bl_vocab(&v, "qwen2");
	v.s.model = "bert";
	CHECK_EQ_INT(pt_tok_create(&v.s, &t, &e), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(e.msg, "bert");
	pt_error_clear(&e);
	bl_vocab(&v, "qwen2");
	v.merge[0] = (struct pt_str){ "12", 2 }; /* no separating space */
	CHECK_EQ_INT(pt_tok_create(&v.s, &t, &e), PT_E_FORMAT);
	pt_error_clear(&e);
	bl_vocab(&v, "qwen2");
	v.tok[1] = (struct pt_str){ "a", 1 }; /* duplicate text */
	CHECK_EQ_INT(pt_tok_create(&v.s, &t, &e), PT_E_FORMAT);
	CHECK(t == NULL);
}

PT_TEST(test_tok_decode_byte_level_and_range)
{
	struct vb v;
	pt_tok *t = NULL;
	struct pt_error e = { 0 };
	bl_vocab(&v, "qwen2");
	REQUIRE(pt_tok_create(&v.s, &t, &e) == PT_OK);
	char *s;
	size_t n;
	const int32_t ids[] = { 0, 7, 1, 6 };
	REQUIRE(pt_tok_decode(t, ids, 4, false, false, &s, &n, &e) == PT_OK);
	CHECK_EQ_STR(s, "a a 123");
	pt_free(s);
	const int32_t bad[] = { 0, 99 };
	CHECK_EQ_INT(pt_tok_decode(t, bad, 2, false, false, &s, &n, &e), PT_E_INVALID);
	char buf[4];
	CHECK_EQ_INT(pt_tok_piece(t, 7, false, buf, sizeof buf, &n, &e), PT_OK);
	CHECK_EQ_INT(n, 2);
	CHECK(buf[0] == ' ' && buf[1] == 'a');
	CHECK_EQ_INT(pt_tok_piece(t, 12, false, buf, sizeof buf, &n, &e), PT_E_INVALID);
	CHECK_EQ_INT(pt_tok_find(t, "123", 3), 6);
	CHECK_EQ_INT(pt_tok_find(t, "1234", 4), -1);
	pt_tok_destroy(t);
}

PT_TEST(test_tok_alloc_failure_sweep)
{
	struct vb v;
	sp_vocab(&v, false);
	for (uint64_t k = 1; k < 400; k++) {
		pt_tok *t = NULL;
		struct pt_error e = { 0 };
		int32_t *ids = NULL;
		size_t n;
		pt_alloc_fail_at(k);
		enum pt_status st = pt_tok_create(&v.s, &t, &e);
		if (st == PT_OK)
			st = pt_tok_encode_alloc(t, "ab<ctl>c a\xff\n\n", 14, true, true, &ids, &n, &e);
		pt_alloc_fail_at(0);
		CHECK(st == PT_OK || st == PT_E_NOMEM);
		pt_free(ids);
		pt_tok_destroy(t);
		if (st == PT_OK)
			break;
	}
}

PT_TEST(test_tok_hf_import_missing_dir)
{
	struct pt_vocab_spec *s = NULL;
	struct pt_error e = { 0 };
	CHECK_EQ_INT(pt_vocab_import_hf("/nonexistent/dir", NULL, &s, &e), PT_E_IO);
	CHECK(s == NULL);
	CHECK_CONTAINS(e.msg, "tokenizer.json");
}
