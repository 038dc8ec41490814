/* tmpl_gguf.c - what `particle template -m` needs from a GGUF: tokenizer.chat_template and
 * the BOS/EOS token text (tokenizer.ggml.tokens[bos_token_id / eos_token_id]), as llama.cpp
 * passes bos_token / eos_token to the template (token_to_piece with special=true, which for
 * control tokens is the token text itself). */
#include "token/tmpl.h"

#include <string.h>

#include "gguf/gguf.h"
#include "util/alloc.h"

static enum pt_status token_text(const pt_gguf *g, const char *id_key, char **out,
				 struct pt_error *err)
{
	uint32_t id;
	bool found;
	const struct pt_gguf_kv *toks;
	bool have_toks;
	*out = NULL;
	enum pt_status st = pt_gguf_get_u32(g, id_key, 0, &id, &found, err);
	if (st != PT_OK || !found)
		return st;
	st = pt_gguf_get_arr(g, "tokenizer.ggml.tokens", PT_GGUF_STRING, &toks, &have_toks, err);
	if (st != PT_OK)
		return st;
	if (!have_toks)
		return pt_error_set(err, PT_E_FORMAT, "%s is set but tokenizer.ggml.tokens is missing",
				    id_key);
	if (id >= toks->arr_count)
		return pt_error_set(err, PT_E_FORMAT, "%s = %u is outside the %llu-token vocabulary",
				    id_key, id, (unsigned long long)toks->arr_count);
	struct pt_str *all = pt_mallocn(toks->arr_count, sizeof *all);
	if (!all)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	pt_gguf_arr_strs(toks, all);
	*out = pt_strndup(all[id].ptr, all[id].len);
	pt_free(all);
	return *out ? PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
}

enum pt_status pt_tmpl_gguf_info(const pt_gguf *g, struct pt_tmpl_gguf_info *info,
				 struct pt_error *err)
{
	struct pt_str tmpl;
	bool found;
	memset(info, 0, sizeof *info);
	enum pt_status st = pt_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &found, err);
	if (st != PT_OK)
		return st;
	if (found) {
		info->chat_template = pt_strndup(tmpl.ptr, tmpl.len);
		info->chat_template_len = tmpl.len;
		if (!info->chat_template)
			return pt_error_set(err, PT_E_NOMEM, "out of memory");
	}
	if ((st = token_text(g, "tokenizer.ggml.bos_token_id", &info->bos, err)) != PT_OK ||
	    (st = token_text(g, "tokenizer.ggml.eos_token_id", &info->eos, err)) != PT_OK)
		goto fail;
	if ((st = pt_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", false, &info->add_bos, NULL,
				   err)) != PT_OK ||
	    (st = pt_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", false, &info->add_eos, NULL,
				   err)) != PT_OK)
		goto fail;
	return PT_OK;
fail:
	pt_tmpl_gguf_info_free(info);
	return st;
}

void pt_tmpl_gguf_info_free(struct pt_tmpl_gguf_info *info)
{
	pt_free(info->chat_template);
	pt_free(info->bos);
	pt_free(info->eos);
	memset(info, 0, sizeof *info);
}
