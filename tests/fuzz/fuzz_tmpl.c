/* fuzz_tmpl.c - libFuzzer target: the input is a chat template, parsed and rendered over a
 * fixed small conversation with tight limits.  Any outcome but a crash, leak, sanitizer
 * report or timeout is fine; errors must come back as a status with a message. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "token/tmpl.h"
#include "util/alloc.h"

static const char CONTEXT[] =
	"{\"messages\": [{\"role\": \"system\", \"content\": \"You are helpful.\"},"
	" {\"role\": \"user\", \"content\": \"Hi \xe0\xa4\xa8\xe0\xa4\xae \xf0\x9f\x8c\x8d\"},"
	" {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\","
	"  \"tool_calls\": [{\"id\": \"abcdefghi\", \"type\": \"function\", \"function\":"
	"  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": 1.5}}}]},"
	" {\"role\": \"tool\", \"content\": \"21 C\"},"
	" {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"part\"}]}],"
	" \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
	"  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
	"  \"required\": [\"city\"]}}}],"
	" \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
	" \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static cJSON *vars;
	if (!vars)
		vars = cJSON_Parse(CONTEXT);
	struct pt_error err = { 0 };
	pt_tmpl *t = NULL;
	if (pt_tmpl_parse((const char *)data, size, &t, &err) != PT_OK) {
		if (err.code == PT_OK || err.msg[0] == 0)
			__builtin_trap(); /* a failure must say why */
		return 0;
	}
	struct pt_tmpl_limits lim = pt_tmpl_default_limits();
	lim.max_output = 1 << 16;
	lim.max_iterations = 5000;
	lim.max_memory = 32u << 20;
	char *out = NULL;
	size_t len = 0;
	enum pt_status st = pt_tmpl_render(t, vars, &lim, 1700000000, &out, &len, &err);
	if (st == PT_OK) {
		if (!out || out[len] != 0)
			__builtin_trap(); /* output is NUL-terminated ('\0' escapes may put NULs inside) */
		pt_free(out);
	} else if (out || err.msg[0] == 0) {
		__builtin_trap();
	}
	pt_tmpl_destroy(t);
	return 0;
}
