/* input.h - user input files shared by the commands (see input.c).  Every function prints
 * its own one-line error and returns a process exit code (0 ok, 1 failure, 2 bad input). */
#ifndef PT_CLI_INPUT_H
#define PT_CLI_INPUT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"

/* Largest input file or stdin, in bytes. */
#define PT_CLI_MAX_INPUT ((size_t)64 * 1024 * 1024)

/* Whole file (or stdin for "-"), NUL-terminated, at most PT_CLI_MAX_INPUT bytes. */
int pt_cli_read_input(const char *path, char **out, size_t *len);
/* Offset of the first invalid UTF-8 byte in s, or len when all of it is valid. */
size_t pt_cli_utf8_check(const unsigned char *s, size_t len);
/* Parses a JSON file (UTF-8 checked; errors name the file and byte offset); number nodes
 * keep their source spelling in valuestring. */
int pt_cli_load_json(const char *path, cJSON **out);
void pt_cli_json_keep_number_text(const char *text, size_t len, cJSON *root);
/* A conversation document is a messages array or an object {"messages": [...], "tools":
 * [...]}: *msgs gets the array (detached from conv, or a copy when conv is the array) and
 * *tools (when tools is not NULL) the tools member or NULL.  The caller owns both. */
int pt_cli_split_conversation(const char *path, cJSON *conv, cJSON **msgs, cJSON **tools);
/* OpenAI chat shape: role among system/developer/user/assistant/tool, content a string,
 * null or an array of typed parts, tool_calls with function.name (and arguments a string or
 * object).  need_one: an empty array is an error. */
int pt_cli_check_messages(const char *path, const cJSON *msgs, bool need_one);

#endif
