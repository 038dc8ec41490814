/* cmd_mkvocab.c - `particle mkvocab DIR OUT.gguf`: a vocab-only GGUF (tokenizer.* keys from
 * a Hugging Face tokenizer directory, plus the minimal llama.* hyper-parameters llama.cpp
 * needs to open it with vocab_only).  Used by the tokenizer oracle tests. */
#include "cli/cli.h"

#include <string.h>

#include "token/hf_import.h"
#include "util/alloc.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: particle mkvocab [options] DIR OUT.gguf\n\n"
		"Writes a vocab-only GGUF from DIR/tokenizer.json (+ tokenizer_config.json,\n"
		"config.json, chat_template.jinja) for tokenizer tests.\n\n"
		"options:\n"
		"  --arch NAME      architecture the vocab is converted for (qwen3moe, gemma4,\n"
		"                   bailingmoe2, llama ...): picks the converter rules (default: none)\n"
		"  --model NAME     force tokenizer.ggml.model (gpt2, gemma4, llama; default: detect)\n"
		"  --pre NAME       force tokenizer.ggml.pre (default: detect)\n"
		"  --vocab-size N   pad the token list to N entries (default: as needed)\n"
		"  --spm-scores     write scores = -id (for a \"llama\" SPM test vocab; default: off)\n"
		"  --help           this text\n");
}

static enum pt_status write_hparams(pt_gguf_writer *w, uint32_t n_vocab, struct pt_error *err)
{
	static const struct { const char *k; uint32_t v; } u[] = {
		{ "llama.context_length", 4096 }, { "llama.embedding_length", 64 },
		{ "llama.block_count", 1 }, { "llama.feed_forward_length", 128 },
		{ "llama.attention.head_count", 2 }, { "llama.attention.head_count_kv", 2 },
		{ "llama.rope.dimension_count", 32 },
	};
	enum pt_status st = pt_gguf_writer_set_str(w, "general.architecture", "llama", err);
	if (!st)
		st = pt_gguf_writer_set_str(w, "general.name", "particle vocab", err);
	for (size_t i = 0; i < sizeof u / sizeof u[0] && !st; i++)
		st = pt_gguf_writer_set_u32(w, u[i].k, u[i].v, err);
	if (!st)
		st = pt_gguf_writer_set_u32(w, "llama.vocab_size", n_vocab, err);
	if (!st)
		st = pt_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, err);
	return st;
}

static int run(const char *dir, const char *path, const struct pt_vocab_import_opts *o,
	       bool spm_scores)
{
	struct pt_error err = { 0 };
	struct pt_vocab_spec *v = NULL;
	pt_gguf_writer *w = NULL;
	float *scores = NULL;
	enum pt_status st = pt_vocab_import_hf(dir, o, &v, &err);
	if (!st && spm_scores) {
		if (!(scores = pt_mallocn(v->n_tokens, sizeof *scores)))
			st = pt_error_set(&err, PT_E_NOMEM, "out of memory");
		for (uint32_t i = 0; scores && i < v->n_tokens; i++)
			scores[i] = -(float)i;
		v->scores = scores;
	}
	if (!st)
		st = pt_gguf_writer_create(path, 32, &w, &err);
	if (!st)
		st = write_hparams(w, v->n_tokens, &err);
	if (!st)
		st = pt_vocab_write_gguf(w, v, &err);
	if (!st)
		st = pt_gguf_writer_begin_data(w, &err);
	if (!st)
		st = pt_gguf_writer_finish(w, &err);
	pt_gguf_writer_destroy(w);
	pt_vocab_spec_destroy(v);
	pt_free(scores);
	return st ? pt_cli_fail(&err) : PT_EXIT_OK;
}

int pt_cmd_mkvocab(int argc, char **argv)
{
	struct pt_vocab_import_opts o = { 0 };
	const char *pos[2];
	int npos = 0;
	bool spm_scores = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return PT_EXIT_OK;
		} else if (!strcmp(a, "--arch") && has_val) {
			o.arch = argv[++i];
		} else if (!strcmp(a, "--model") && has_val) {
			o.model = argv[++i];
		} else if (!strcmp(a, "--pre") && has_val) {
			o.pre = argv[++i];
		} else if (!strcmp(a, "--vocab-size") && has_val) {
			uint64_t n;
			if (!pt_cli_parse_u64("--vocab-size", argv[++i], 1, 1u << 24, &n))
				return PT_EXIT_USAGE;
			o.vocab_size = (uint32_t)n;
		} else if (!strcmp(a, "--spm-scores")) {
			spm_scores = true;
		} else if (a[0] == '-' && a[1]) {
			pt_cli_error("mkvocab: unknown or incomplete option '%s'", a);
			return PT_EXIT_USAGE;
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			pt_cli_error("mkvocab: unexpected argument '%s'", a);
			return PT_EXIT_USAGE;
		}
	}
	if (npos != 2) {
		usage(stderr);
		return PT_EXIT_USAGE;
	}
	return run(pos[0], pos[1], &o, spm_scores);
}
