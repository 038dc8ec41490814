/* vocab.h - the compact synthetic vocabularies particle mkmodel embeds: per family a small
 * BPE vocabulary (256 byte symbols + merges of common English words) with the family's real
 * special tokens, token types, special ids and real chat template (TOKENIZERS.md 2).
 *   qwen3moe:    tokenizer.ggml.model gpt2, pre qwen2, GPT-2 byte-level strings (Ġ = space)
 *   bailingmoe2: model gpt2, pre sarvam-moe, SentencePiece-style strings (▁ = space)
 *   gemma4:      model gemma4 (pre implied), ▁ strings, <0xNN> byte-fallback tokens
 *   glm4moe:     model gpt2, pre glm4, GPT-2 byte-level strings, GLM-4.5's 36 added tokens
 *                ([gMASK] <sop> <|user|> ... in their real order) after the ordinary ones
 *   gpt-oss:     model gpt2, pre gpt-4o (o200k), GPT-2 byte-level strings, harmony specials
 *   qwen35moe:   qwen3moe's, pre qwen35, Qwen3.5's real chat template (its 248k vocabulary is
 *                in no package here: mkmodel --vocab-gguf takes one from a GGUF) */
#ifndef PT_MODEL_VOCAB_H
#define PT_MODEL_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "token/tok.h" /* enum pt_tok_type */
#include "util/status.h"

struct pt_vocab {
	const char *model;     /* tokenizer.ggml.model */
	const char *pre;       /* tokenizer.ggml.pre, NULL = not written */
	char **tokens;         /* n owned strings */
	int32_t *types;
	uint32_t n;
	uint32_t cap;
	char **merges;         /* "left right", rank = index */
	uint32_t n_merges;
	uint32_t cap_merges;
	int32_t bos, eos, eot, pad, unk; /* -1 = key not written */
	int32_t eom;                     /* -1 = key not written (GLM: <|observation|>) */
	bool add_bos;
	bool add_space_prefix_key;       /* write tokenizer.ggml.add_space_prefix = false */
	const char *chat_template;       /* static */
};

extern const char pt_template_qwen3[];
extern const char pt_template_gemma4[];
extern const char pt_template_sarvam[];
extern const char pt_template_glm45[];
extern const char pt_template_gptoss[];
extern const char pt_template_qwen35[];

/* Builds the family's compact vocabulary; pad_to > n appends "[PADi]" UNUSED tokens up to
 * pad_to entries (full presets keep the real vocabulary size). */
enum pt_status pt_vocab_compact(enum pt_arch arch, uint32_t pad_to, struct pt_vocab *v,
				struct pt_error *err);
void pt_vocab_free(struct pt_vocab *v);
/* Id of a token string, or -1. */
int32_t pt_vocab_find(const struct pt_vocab *v, const char *tok);
/* Writes every tokenizer.* key. */
enum pt_status pt_vocab_write(const struct pt_vocab *v, pt_gguf_writer *w,
			      struct pt_error *err);

#endif
