/* fuzz_grammar.c - compiles arbitrary JSON Schema text into a grammar and feeds it arbitrary
 * bytes and tokens.  Input: byte 0 picks the grammar (json_object, the schema, or the schema
 * between two literals as alternatives); then the schema text up to the first NUL; then the
 * bytes to feed.  Must not crash, leak or trip the sanitizers, and must keep the grammar's
 * promises: a complete output parses as JSON, the token mask agrees with the single-token
 * check, and some token is always allowed until the output is complete (no dead ends). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "gen/grammar.h"
#include "model/arch.h"
#include "model/vocab.h"
#include "util/alloc.h"

static pt_grammar_vocab *vocab;
static uint32_t n_vocab;
static uint8_t *mask;

static void init(void)
{
	struct pt_vocab v;
	struct pt_vocab_spec s;
	pt_tok *t = NULL;
	if (pt_vocab_compact(PT_ARCH_QWEN3MOE, 0, &v, NULL) != PT_OK)
		abort();
	struct pt_str *toks = pt_calloc(v.n, sizeof *toks);
	struct pt_str *mg = pt_calloc(v.n_merges + 1, sizeof *mg);
	for (uint32_t i = 0; i < v.n; i++)
		toks[i].ptr = v.tokens[i], toks[i].len = strlen(v.tokens[i]);
	for (uint32_t i = 0; i < v.n_merges; i++)
		mg[i].ptr = v.merges[i], mg[i].len = strlen(v.merges[i]);
	pt_vocab_spec_init(&s);
	s.model = v.model;
	s.pre = v.pre;
	s.n_tokens = v.n;
	s.tokens = toks;
	s.types = v.types;
	s.n_merges = v.n_merges;
	s.merges = mg;
	s.bos_id = v.bos;
	s.eos_id = v.eos;
	s.eot_id = v.eot;
	if (pt_tok_create(&s, &t, NULL) != PT_OK || pt_grammar_vocab_build(t, &vocab, NULL) != PT_OK)
		abort();
	n_vocab = pt_grammar_vocab_n(vocab);
	mask = pt_malloc(n_vocab);
	pt_tok_destroy(t);
	pt_free(toks);
	pt_free(mg);
	pt_vocab_free(&v);
}

static void check_complete_parses(const char *text, size_t len)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!j || end != text + len)
		__builtin_trap();
	cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!vocab)
		init();
	if (size < 1 || size > 8192)
		return 0;
	int mode = data[0] % 3;
	const char *rest = (const char *)data + 1;
	size_t n = size - 1;
	const char *z = memchr(rest, 0, n);
	size_t schema_len = z ? (size_t)(z - rest) : n;
	const char *feed = z ? z + 1 : rest + n;
	size_t feed_len = z ? n - schema_len - 1 : 0;
	pt_grammar *g = NULL;
	cJSON *schema = NULL;
	if (mode == 0) {
		if (pt_grammar_json_object(&g, NULL) != PT_OK)
			return 0;
	} else {
		schema = cJSON_ParseWithLength(rest, schema_len);
		if (!schema)
			return 0;
		if (mode == 1) {
			pt_grammar_from_schema(schema, &g, NULL);
		} else {
			/* the tag, the schema, raw text (XML parameter values), the end tag */
			struct pt_grammar_part a0[] = { { "<t>", NULL, false, false },
							{ NULL, schema, false, false },
							{ "<p>", NULL, false, false },
							{ NULL, NULL, false, true },
							{ "</t>", NULL, false, false } };
			struct pt_grammar_part a1[] = { { NULL, NULL, true, false } };
			const struct pt_grammar_part *alts[] = { a0, a1 };
			size_t np[] = { 5, 1 };
			pt_grammar_from_alternatives(alts, np, 2, &g, NULL);
		}
	}
	if (!g) {
		cJSON_Delete(schema);
		return 0;
	}
	/* bytes */
	bool complete = false;
	if (pt_grammar_match_bytes(g, feed, feed_len, &complete) && complete && mode != 2)
		check_complete_parses(feed, feed_len);
	/* tokens: two feed bytes pick each token; the mask must agree and never dead-end */
	pt_grammar_state *st = NULL;
	char *out = pt_malloc(16 * PT_GRAMMAR_MAX_TOKEN_BYTES + 1);
	size_t out_len = 0;
	if (out && pt_grammar_state_new(g, vocab, &st, NULL) == PT_OK) {
		for (size_t i = 0; i + 1 < feed_len && i < 32; i += 2) {
			int32_t tok = (int32_t)((feed[i] | (uint8_t)feed[i + 1] << 8) % n_vocab);
			pt_grammar_state_mask(st, mask);
			size_t allowed = 0;
			for (uint32_t k = 0; k < n_vocab; k++)
				allowed += mask[k];
			if (!allowed && !pt_grammar_state_finished(st))
				__builtin_trap();
			if (pt_grammar_state_allows(st, tok) != (mask[tok] != 0))
				__builtin_trap();
			if (!mask[tok])
				continue;
			if (pt_grammar_state_accept(st, tok, NULL) != PT_OK)
				__builtin_trap();
			if (pt_grammar_vocab_is_eog(vocab, tok)) {
				if (mode != 2)
					check_complete_parses(out, out_len);
				break;
			}
			size_t bl;
			const char *b = pt_grammar_vocab_bytes(vocab, tok, &bl);
			memcpy(out + out_len, b, bl);
			out_len += bl;
		}
	}
	pt_grammar_state_free(st);
	pt_free(out);
	pt_grammar_free(g);
	cJSON_Delete(schema);
	return 0;
}
