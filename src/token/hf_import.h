/* hf_import.h - Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json,
 * optional config.json / chat_template.jinja) -> the tokenizer.* GGUF keys, the way
 * llama.cpp's convert_hf_to_gguf.py writes them for the model family:
 *   byte-level BPE (Qwen2/3, Llama 3, GPT-2): model "gpt2", pre from the Split regex,
 *     added tokens CONTROL when special or special-looking (<|..|>, <unused..>, <pad>,
 *     <mask>), else USER_DEFINED; missing ids "[PAD<i>]" UNUSED  (get_vocab_base);
 *   SentencePiece-style BPE with byte fallback (Gemma 3/4 vocab): arch "gemma4" -> model
 *     "gemma4", <0xXX> BYTE, Gemma 4's chat-parser tokens forced USER_DEFINED, add_bos;
 *     arch "bailingmoe2"/"sarvam_moe" -> model "gpt2" + pre "sarvam-moe" with USER_DEFINED
 *     texts' U+2581 turned into spaces (_set_vocab_gpt2).
 * Not reproduced: the converter's decode(encode()) round trip of non-normalized added
 * tokens (a no-op for the vocabularies above) and its chkhsh pre detection (we read the
 * regex instead). */
#ifndef PT_TOKEN_HF_IMPORT_H
#define PT_TOKEN_HF_IMPORT_H

#include "gguf/gguf.h"
#include "token/tok.h"

struct pt_vocab_import_opts {
	const char *arch;    /* GGUF general.architecture the vocab is for; may be NULL */
	const char *model;   /* override tokenizer.ggml.model; NULL = detect */
	const char *pre;     /* override tokenizer.ggml.pre; NULL = detect */
	uint32_t vocab_size; /* pad the token list to this many ("[PAD<i>]"); 0 = as needed */
};

/* *out is owned by the caller: pt_vocab_spec_destroy.  opts may be NULL. */
enum pt_status pt_vocab_import_hf(const char *dir, const struct pt_vocab_import_opts *opts,
				  struct pt_vocab_spec **out, struct pt_error *err);
void pt_vocab_spec_destroy(struct pt_vocab_spec *v); /* NULL-safe; only for imported specs */

/* Writes every tokenizer.* key present in v (model, pre, tokens, token_type, scores,
 * merges, special ids, add_* flags, chat_template). */
enum pt_status pt_vocab_write_gguf(pt_gguf_writer *w, const struct pt_vocab_spec *v,
				   struct pt_error *err);

#endif
