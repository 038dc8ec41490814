/* cmd_inspect.c - `particle inspect FILE [--json] [--tensors]` (placeholder until the GGUF
 * reader lands: validates arguments only). */
#include "cli/cli.h"

#include <string.h>

int pt_cmd_inspect(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	pt_cli_error("inspect: not implemented yet");
	return PT_EXIT_FAIL;
}
