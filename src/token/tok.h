/* tok.h - the tokenizer: GGUF tokenizer.* metadata -> token ids and back, reproducing
 * llama.cpp's behaviour exactly (shared/reference/TOKENIZERS.md is the specification).
 *
 * Models: "gpt2" (byte-level BPE; pre-tokenizers qwen2, llama3/llama-bpe, gpt-2, default,
 * sarvam-moe), "gemma4" (SentencePiece-style BPE over raw UTF-8 with <0xXX> byte fallback)
 * and "llama" (SentencePiece, score-driven merges, byte fallback, add_space_prefix).
 * Anything else is refused at load with an error naming the value.
 *
 * Invalid UTF-8 (as llama.cpp): BPE models decode the text to code points first and every
 * byte that does not start a well-formed sequence becomes U+FFFD (consuming one byte), so
 * it is tokenized as the three bytes EF BF BD; "llama" (SPM) models keep the raw bytes and
 * emit <0xXX> byte tokens.  Nothing in here aborts on input.
 */
#ifndef PT_TOKEN_TOK_H
#define PT_TOKEN_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "util/status.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum pt_tok_type {
	PT_TOKTYPE_UNDEFINED = 0,
	PT_TOKTYPE_NORMAL = 1,
	PT_TOKTYPE_UNKNOWN = 2,
	PT_TOKTYPE_CONTROL = 3,
	PT_TOKTYPE_USER_DEFINED = 4,
	PT_TOKTYPE_UNUSED = 5,
	PT_TOKTYPE_BYTE = 6,
};

/* Token attributes after load-time fix-ups (llama.cpp's llama_token_attr bits). */
enum pt_tok_attr {
	PT_TOKATTR_UNKNOWN = 1 << 0,
	PT_TOKATTR_UNUSED = 1 << 1,
	PT_TOKATTR_NORMAL = 1 << 2,
	PT_TOKATTR_CONTROL = 1 << 3,
	PT_TOKATTR_USER_DEFINED = 1 << 4,
	PT_TOKATTR_BYTE = 1 << 5,
};

/* The tokenizer.* keys of a GGUF as plain data.  Produced by the GGUF reader view
 * (pt_tok_load), by the Hugging Face importer (hf_import.h) and by tests; consumed by
 * pt_tok_create.  Absent optional ids are -1, absent booleans -1. */
struct pt_vocab_spec {
	const char *model;          /* tokenizer.ggml.model, required */
	const char *pre;            /* tokenizer.ggml.pre, NULL if absent */
	uint32_t n_tokens;
	const struct pt_str *tokens;
	const float *scores;        /* NULL: all 0 */
	const int32_t *types;       /* NULL: all NORMAL */
	uint32_t n_merges;
	const struct pt_str *merges; /* "left right" */
	int64_t bos_id;             /* tokenizer.ggml.bos_token_id */
	int64_t eos_id;             /* tokenizer.ggml.eos_token_id */
	int64_t eot_id;             /* tokenizer.ggml.eot_token_id */
	int64_t eom_id;             /* tokenizer.ggml.eom_token_id */
	int64_t unk_id;             /* tokenizer.ggml.unknown_token_id */
	int64_t sep_id;             /* tokenizer.ggml.seperator_token_id (sic) */
	int64_t pad_id;             /* tokenizer.ggml.padding_token_id */
	int64_t mask_id;            /* tokenizer.ggml.mask_token_id */
	int add_bos;                /* tokenizer.ggml.add_bos_token */
	int add_eos;                /* tokenizer.ggml.add_eos_token */
	int add_sep;                /* tokenizer.ggml.add_sep_token */
	int add_space_prefix;       /* tokenizer.ggml.add_space_prefix */
	int remove_extra_ws;        /* tokenizer.ggml.remove_extra_whitespaces */
	const char *chat_template;  /* tokenizer.chat_template, NULL if absent */
};

/* A spec with every optional field marked absent. */
void pt_vocab_spec_init(struct pt_vocab_spec *s);

/* The scalar tokenizer.ggml.* keys and the spec field each maps to: one table shared by the
 * GGUF reader (ids are int64_t fields, flags int fields) and the importer's writer. */
struct pt_vocab_key {
	const char *key;
	size_t off; /* offsetof(struct pt_vocab_spec, ...) */
};
extern const struct pt_vocab_key pt_vocab_id_keys[];
extern const size_t pt_vocab_n_id_keys;
extern const struct pt_vocab_key pt_vocab_flag_keys[];
extern const size_t pt_vocab_n_flag_keys;

typedef struct pt_tok pt_tok;

/* Builds a tokenizer from spec (copied: spec may be freed after).  On failure *out is NULL.
 * PT_E_UNSUPPORTED names an unknown model or pre-tokenizer; PT_E_FORMAT a malformed merge,
 * duplicate token text or missing BOS; PT_E_LIMIT more than PT_TOK_MAX_VOCAB tokens or
 * PT_TOK_MAX_MERGES merges. */
enum pt_status pt_tok_create(const struct pt_vocab_spec *spec, pt_tok **out,
			     struct pt_error *err);
/* Reads tokenizer.* from g.  The tokenizer copies what it needs: g may be closed after. */
enum pt_status pt_tok_load(const pt_gguf *g, pt_tok **out, struct pt_error *err);
/* The tokenizer.* keys of g as a spec (mkmodel --vocab-gguf), checked as pt_tok_load checks
 * them (a vocabulary particle cannot build a tokenizer from is refused).  Its strings point
 * into g: keep g open while *out is used; free with pt_vocab_spec_gguf_free (NULL-safe). */
enum pt_status pt_vocab_spec_from_gguf(const pt_gguf *g, struct pt_vocab_spec **out,
				       struct pt_error *err);
void pt_vocab_spec_gguf_free(struct pt_vocab_spec *s);
void pt_tok_destroy(pt_tok *t); /* NULL-safe */

/* Text -> ids.  add_special: BOS/EOS per the vocab's add_bos/add_eos.  parse_special: also
 * match CONTROL tokens written as text (USER_DEFINED ones always match).  Writes up to cap
 * ids; *n always receives the full count, and PT_E_LIMIT is returned if it exceeds cap. */
enum pt_status pt_tok_encode(const pt_tok *t, const char *text, size_t len, bool add_special,
			     bool parse_special, int32_t *ids, size_t cap, size_t *n,
			     struct pt_error *err);
/* Same into a pt_malloc'd array the caller frees with pt_free. */
enum pt_status pt_tok_encode_alloc(const pt_tok *t, const char *text, size_t len,
				   bool add_special, bool parse_special, int32_t **ids,
				   size_t *n, struct pt_error *err);

/* One token's text (llama.cpp token_to_piece with lstrip 0): CONTROL/UNKNOWN render as ""
 * unless special.  Writes up to cap bytes (no NUL); *n gets the full length; PT_E_LIMIT if
 * it exceeds cap; PT_E_INVALID for an id out of range. */
enum pt_status pt_tok_piece(const pt_tok *t, int32_t id, bool special, char *buf, size_t cap,
			    size_t *n, struct pt_error *err);
/* Ids -> text (llama.cpp detokenize): remove_special drops a leading BOS / trailing EOS the
 * vocab would add; unparse_special renders CONTROL tokens.  *out is pt_malloc'd and
 * NUL-terminated (the text itself may contain NULs: use *len). */
enum pt_status pt_tok_decode(const pt_tok *t, const int32_t *ids, size_t n_ids,
			     bool remove_special, bool unparse_special, char **out, size_t *len,
			     struct pt_error *err);

uint32_t pt_tok_n_vocab(const pt_tok *t);
int32_t pt_tok_bos(const pt_tok *t); /* -1 when the vocab has none */
int32_t pt_tok_eos(const pt_tok *t);
int32_t pt_tok_eot(const pt_tok *t);
bool pt_tok_add_bos(const pt_tok *t);
bool pt_tok_add_eos(const pt_tok *t);
/* End of generation: eos, eot, eom and the other end markers llama.cpp collects. */
bool pt_tok_is_eog(const pt_tok *t, int32_t id);
/* Raw vocab text and attributes of id (NULL / 0 when out of range). */
const char *pt_tok_text(const pt_tok *t, int32_t id, size_t *len);
uint32_t pt_tok_attr(const pt_tok *t, int32_t id);
/* Text -> id of a whole token, -1 when absent. */
int32_t pt_tok_find(const pt_tok *t, const char *text, size_t len);
const char *pt_tok_chat_template(const pt_tok *t); /* NULL when the vocab has none */

#endif
