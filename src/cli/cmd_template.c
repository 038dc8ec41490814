/* cmd_template.c - `particle template`: renders a chat template (the model's
 * tokenizer.chat_template or --template FILE) over OpenAI-style messages, the way llama.cpp
 * passes variables: messages, tools (only when non-empty), add_generation_prompt (always
 * set, true or false: Hugging Face's apply_chat_template semantics, since some templates
 * default it to true when undefined), bos_token, eos_token, plus --var NAME=JSON extras
 * (which override). */
#include "cli/cli.h"
#include "cli/input.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "token/tmpl.h"
#include "util/alloc.h"
#include "util/limits.h"

#define MAX_VARS 64

struct opts {
	const char *model, *messages, *tools, *tmpl, *bos, *eos;
	const char *vars[MAX_VARS];
	size_t nvars;
	bool no_gen;
	bool object_args;
};

static void help(void)
{
	printf("usage: particle template [-m MODEL] --messages FILE.json [options]\n\n"
	       "Renders a chat template over a conversation and prints the prompt on stdout.\n\n"
	       "  -m, --model FILE       GGUF whose tokenizer.chat_template and BOS/EOS text to use\n"
	       "  --messages FILE        conversation: a JSON array of messages, or an object with\n"
	       "                         \"messages\" (and optionally \"tools\")  (required)\n"
	       "  --tools FILE           JSON array of tool definitions (overrides \"tools\")\n"
	       "  --template FILE        Jinja template to use instead of the model's (then -m is\n"
	       "                         optional)\n"
	       "  --bos-token S          bos_token text (default: the model's, else empty)\n"
	       "  --eos-token S          eos_token text (default: the model's, else empty)\n"
	       "  --no-generation-prompt add_generation_prompt = false, passed explicitly\n"
	       "                         (default: true)\n"
	       "  --object-arguments     parse tool_calls[].function.arguments JSON strings into\n"
	       "                         objects (llama.cpp does so for templates such as Llama 3.1\n"
	       "                         that expect objects; default: passed as given, like HF)\n"
	       "  --var NAME=JSON        extra template variable, e.g. enable_thinking=false\n"
	       "                         (repeatable, at most %d; overrides the above)\n"
	       "  -h, --help             this text\n",
	       MAX_VARS);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			help();
			return -1;
		}
		if (strcmp(a, "--no-generation-prompt") == 0) {
			o->no_gen = true;
			continue;
		}
		if (strcmp(a, "--object-arguments") == 0) {
			o->object_args = true;
			continue;
		}
		if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0)
			slot = &o->model;
		else if (strcmp(a, "--messages") == 0)
			slot = &o->messages;
		else if (strcmp(a, "--tools") == 0)
			slot = &o->tools;
		else if (strcmp(a, "--template") == 0)
			slot = &o->tmpl;
		else if (strcmp(a, "--bos-token") == 0)
			slot = &o->bos;
		else if (strcmp(a, "--eos-token") == 0)
			slot = &o->eos;
		else if (strcmp(a, "--var") == 0) {
			if (o->nvars == MAX_VARS) {
				pt_cli_error("template: more than %d --var flags", MAX_VARS);
				return PT_EXIT_USAGE;
			}
			slot = &o->vars[o->nvars++];
		} else {
			pt_cli_error("template: unknown option '%s' (see 'particle template --help')", a);
			return PT_EXIT_USAGE;
		}
		if (i + 1 >= argc) {
			pt_cli_error("template: %s needs a value", a);
			return PT_EXIT_USAGE;
		}
		*slot = argv[++i];
	}
	if (!o->messages) {
		pt_cli_error("template: --messages FILE is required");
		return PT_EXIT_USAGE;
	}
	if (!o->model && !o->tmpl) {
		pt_cli_error("template: give -m MODEL or --template FILE");
		return PT_EXIT_USAGE;
	}
	return 0;
}

/* --object-arguments: a string that parses as a JSON object replaces itself by the object. */
static void objectify_arguments(cJSON *msgs)
{
	for (cJSON *m = msgs->child; m; m = m->next) {
		cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		for (cJSON *c = cJSON_IsArray(tc) ? tc->child : NULL; c; c = c->next) {
			cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
			cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
			if (!cJSON_IsString(args))
				continue;
			cJSON *obj = cJSON_Parse(args->valuestring);
			if (cJSON_IsObject(obj))
				cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
			else
				cJSON_Delete(obj);
		}
	}
}

static int add_var(cJSON *vars, const char *spec)
{
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec) {
		pt_cli_error("template: --var wants NAME=JSON, got '%.60s'", spec);
		return PT_EXIT_USAGE;
	}
	cJSON *v = cJSON_Parse(eq + 1);
	if (v)
		pt_cli_json_keep_number_text(eq + 1, strlen(eq + 1), v);
	if (!v) {
		pt_cli_error("template: --var %.*s: malformed JSON value", (int)(eq - spec), spec);
		return PT_EXIT_USAGE;
	}
	char name[128];
	snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
	cJSON_DeleteItemFromObjectCaseSensitive(vars, name);
	cJSON_AddItemToObject(vars, name, v);
	return 0;
}

static int build_vars(const struct opts *o, cJSON *conv, cJSON *vars)
{
	cJSON *msgs, *tools, *tools_doc = NULL;
	int rc = pt_cli_split_conversation(o->messages, conv, &msgs, &tools);
	if (rc)
		return rc;
	cJSON_AddItemToObject(vars, "messages", msgs);
	if ((rc = pt_cli_check_messages(o->messages, msgs, false)) != 0) {
		cJSON_Delete(tools);
		return rc;
	}
	if (o->object_args)
		objectify_arguments(msgs);
	if (o->tools) {
		cJSON_Delete(tools);
		tools = NULL;
		if ((rc = pt_cli_load_json(o->tools, &tools_doc)) != 0)
			return rc;
		tools = tools_doc;
	}
	if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools)) {
		cJSON_Delete(tools);
		pt_cli_error("%s: \"tools\" must be an array", o->tools ? o->tools : o->messages);
		return PT_EXIT_USAGE;
	}
	if (tools && cJSON_GetArraySize(tools) > 0) /* llama.cpp sets tools only when non-empty */
		cJSON_AddItemToObject(vars, "tools", tools);
	else
		cJSON_Delete(tools);
	cJSON_AddBoolToObject(vars, "add_generation_prompt", !o->no_gen);
	cJSON_AddStringToObject(vars, "bos_token", o->bos ? o->bos : "");
	cJSON_AddStringToObject(vars, "eos_token", o->eos ? o->eos : "");
	for (size_t i = 0; i < o->nvars; i++)
		if ((rc = add_var(vars, o->vars[i])) != 0)
			return rc;
	return 0;
}

static int render(const char *src, size_t len, const cJSON *vars)
{
	struct pt_error err = { 0 };
	pt_tmpl *t = NULL;
	char *out = NULL;
	size_t out_len = 0;
	if (pt_tmpl_parse(src, len, &t, &err) != PT_OK)
		return pt_cli_fail(&err);
	enum pt_status st = pt_tmpl_render(t, vars, NULL, 0, &out, &out_len, &err);
	pt_tmpl_destroy(t);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	size_t w = fwrite(out, 1, out_len, stdout);
	pt_free(out);
	if (w != out_len || fflush(stdout) != 0) {
		pt_cli_error("template: cannot write the output");
		return PT_EXIT_FAIL;
	}
	return PT_EXIT_OK;
}

/* -m: the model's template (unless --template) and BOS/EOS text (unless the flags). */
static int load_model(struct opts *o, struct pt_tmpl_gguf_info *info)
{
	struct pt_error err = { 0 };
	pt_gguf *g = NULL;
	if (pt_gguf_open(o->model, &g, &err) != PT_OK)
		return pt_cli_fail(&err);
	enum pt_status st = pt_tmpl_gguf_info(g, info, &err);
	pt_gguf_close(g);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	if (!info->chat_template && !o->tmpl) {
		pt_cli_error("template: %s has no tokenizer.chat_template; pass --template FILE",
			     o->model);
		return PT_EXIT_USAGE;
	}
	if (!o->bos)
		o->bos = info->bos;
	if (!o->eos)
		o->eos = info->eos;
	return 0;
}

static int run_template(struct opts *o, const struct pt_tmpl_gguf_info *info)
{
	cJSON *conv = NULL, *vars = cJSON_CreateObject();
	char *src = NULL;
	size_t len = 0;
	int rc;
	if (!vars) {
		pt_cli_error("template: out of memory");
		return PT_EXIT_FAIL;
	}
	if ((rc = pt_cli_load_json(o->messages, &conv)) == 0 && (rc = build_vars(o, conv, vars)) == 0) {
		const char *text = info->chat_template, *name = o->model;
		if (o->tmpl) {
			rc = pt_cli_read_input(o->tmpl, &src, &len);
			text = src;
			name = o->tmpl;
		} else {
			len = info->chat_template_len;
		}
		size_t bad = rc ? len : pt_cli_utf8_check((const unsigned char *)text, len);
		if (rc == 0 && bad != len) {
			pt_cli_error("invalid UTF-8 in the template of %s at offset %zu", name, bad);
			rc = PT_EXIT_USAGE;
		} else if (rc == 0) {
			rc = render(text, len, vars);
		}
	}
	pt_free(src);
	cJSON_Delete(conv);
	cJSON_Delete(vars);
	return rc;
}

int pt_cmd_template(int argc, char **argv)
{
	struct opts o = { 0 };
	struct pt_tmpl_gguf_info info = { 0 };
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? PT_EXIT_OK : rc;
	if (o.model && (rc = load_model(&o, &info)) != 0)
		return rc;
	rc = run_template(&o, &info);
	pt_tmpl_gguf_info_free(&info);
	return rc;
}
