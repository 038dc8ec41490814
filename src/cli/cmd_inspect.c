/* cmd_inspect.c - `particle inspect FILE [--json] [--tensors]`: validates a GGUF file and
 * describes it (the describe logic lives in src/gguf/gguf_describe.c so the fuzz target runs
 * the same path).  Exit 0 valid, 2 invalid file or usage, 1 I/O failure. */
#include "cli/cli.h"

#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_describe.h"
#include "util/alloc.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: particle inspect FILE [--json] [--tensors]\n\n"
		"Validates a GGUF file (header, metadata, tensor infos, layout) and describes it:\n"
		"architecture, hyper-parameters, tokenizer, tensor bytes by type, and resident\n"
		"bytes versus routed-expert bytes (experts per layer, bytes per expert).\n"
		"FILE may be any part of a split model (NAME-00002-of-00003.gguf): every part is\n"
		"opened and validated and the parts are listed (with --tensors, each tensor's part).\n\n"
		"options:\n"
		"  --json      print one JSON object instead of text (default: text)\n"
		"  --tensors   also list every tensor: name, type, shape, offset, bytes\n"
		"              (default: off)\n"
		"  -h, --help  show this help\n\n"
		"exit codes: 0 valid file, 1 I/O error (missing file or split part, permission),\n"
		"2 invalid file (or a split part that disagrees) or bad usage\n");
}

static int run(const char *path, bool json, bool tensors)
{
	struct pt_error err = { 0 };
	struct pt_gguf_desc d;
	pt_gguf *g = NULL;
	char *text = NULL;
	enum pt_status st = pt_gguf_open(path, &g, &err);
	if (st == PT_OK)
		st = pt_gguf_describe(g, &d, &err);
	if (st == PT_OK && json) {
		st = pt_gguf_desc_json(g, &d, tensors, &text, &err);
		if (st == PT_OK && (puts(text) == EOF || fflush(stdout) != 0))
			st = pt_error_set(&err, PT_E_IO, "cannot write to stdout");
	} else if (st == PT_OK) {
		printf("%s\n", path);
		st = pt_gguf_desc_print(g, &d, tensors, stdout, &err);
	}
	pt_free(text);
	pt_gguf_close(g);
	if (st != PT_OK) {
		pt_cli_error("%s: %s", path, err.msg[0] ? err.msg : pt_status_str(st));
		return pt_status_exit_code(st);
	}
	return PT_EXIT_OK;
}

int pt_cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	bool json = false, tensors = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return PT_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "--tensors") == 0) {
			tensors = true;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			pt_cli_error("inspect: unknown option '%s' (see 'particle inspect --help')",
				     argv[i]);
			return PT_EXIT_USAGE;
		} else if (path) {
			pt_cli_error("inspect: more than one FILE given ('%s' and '%s')", path,
				     argv[i]);
			return PT_EXIT_USAGE;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		pt_cli_error("inspect: missing FILE (see 'particle inspect --help')");
		return PT_EXIT_USAGE;
	}
	return run(path, json, tensors);
}
