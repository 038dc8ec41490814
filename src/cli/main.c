/* main.c - ./build/particle: dispatches to one subcommand per file in src/cli/. */
#include "cli/cli.h"

#include <string.h>
#include "util/safefile.h"


struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "inspect", pt_cmd_inspect, "validate a GGUF file and describe it" },
	{ "pack", pt_cmd_pack, "write or verify an expert pack (one read per expert)" },
	{ "cachesim", pt_cmd_cachesim, "replay a routing trace under LRU, LFU and Belady" },
	{ "run", pt_cmd_run, "generate text: raw completion, chat, interactive chat" },
	{ "eval", pt_cmd_eval, "teacher-forced evaluation: per-position log-probabilities" },
	{ "bench", pt_cmd_bench, "prefill/decode speed, hit rate and I/O floor on a synthetic prompt" },
	{ "routing", pt_cmd_routing, "per-layer expert routing statistics of a fixed text" },
	{ "mkmodel", pt_cmd_mkmodel, "write a synthetic real-shape MoE checkpoint" },
	{ "tokenize", pt_cmd_tokenize, "text -> token ids with a model's tokenizer" },
	{ "detokenize", pt_cmd_detokenize, "token ids -> text with a model's tokenizer" },
	{ "mkvocab", pt_cmd_mkvocab, "write a vocab-only GGUF from a Hugging Face tokenizer dir" },
	{ "template", pt_cmd_template, "render a chat template over a conversation" },
	{ "pull", pt_cmd_pull, "download a model (URL or hf:OWNER/REPO/FILE.gguf), resumable, verified" },
	{ "list", pt_cmd_list, "models in the models directory: size, arch, quant, pack" },
	{ "serve", pt_cmd_serve, "OpenAI-compatible HTTP server (chat, completions, SSE)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: particle <command> [options]\n\n"
		   "Runs Mixture-of-Experts LLMs larger than RAM from GGUF files.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'particle <command> --help' describes a command's options.\n"
		   "exit codes: 0 ok, 1 runtime failure, 2 bad input or usage, 130 cancelled\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return PT_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return PT_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("particle %s\n", PT_VERSION_STRING);
		return PT_EXIT_OK;
	}
	/* an interrupted mkmodel / pack / eval leaves no half-written temporary behind */
	pt_safe_unlink_on_signals();
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	pt_cli_error("unknown command '%s' (see 'particle --help')", argv[1]);
	return PT_EXIT_USAGE;
}
