/* cmd_template.c - `particle template`: renders a chat template (the model's
 * tokenizer.chat_template or --template FILE) over OpenAI-style messages, the way llama.cpp
 * passes variables: messages, tools (only when non-empty), add_generation_prompt (only when
 * true), bos_token, eos_token, plus --var NAME=JSON extras (which override). */
#include "cli/cli.h"

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

#define MAX_INPUT (64u * 1024 * 1024)
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
	       "  --no-generation-prompt leave add_generation_prompt undefined (default: true)\n"
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

static int read_file(const char *path, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		pt_cli_error("cannot open %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return PT_EXIT_USAGE;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_INPUT) {
		pt_cli_error("%s: not a regular file of at most %u bytes", path, MAX_INPUT);
		close(fd);
		return PT_EXIT_USAGE;
	}
	char *buf = pt_malloc((size_t)st.st_size + 1);
	size_t n = 0;
	if (!buf) {
		close(fd);
		pt_cli_error("out of memory reading %s", path);
		return PT_EXIT_FAIL;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			pt_cli_error("cannot read %s: %s", path, r < 0 ? strerror(errno) : "short read");
			pt_free(buf);
			close(fd);
			return PT_EXIT_FAIL;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/* Offset of the first invalid UTF-8 byte, or len. */
static size_t utf8_check(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char b = s[i];
		size_t need = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 :
			      (b & 0xF8) == 0xF0 ? 3 : 9;
		if (need == 9 || (need == 1 && b < 0xC2) || i + need >= len + (need ? 0 : 1))
			return i;
		uint32_t cp = need == 0 ? b : need == 1 ? (b & 0x1Fu) : need == 2 ? (b & 0x0Fu) : (b & 0x07u);
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3Fu);
		}
		if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
		    (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
			return i;
		i += need + 1;
	}
	return len;
}

/* cJSON keeps numbers as doubles, but Python tells 1 from 1.0 and keeps big integers exact.
 * Number nodes get their source spelling in valuestring (the template engine reads it);
 * the k-th number token of the text is the k-th number node in document order. */
static void keep_number_text(const char *text, size_t len, cJSON *root)
{
	cJSON *stack[PT_JSON_MAX_DEPTH + 2];
	size_t depth = 0, i = 0;
	cJSON *node = root;
	while (node) {
		if (cJSON_IsNumber(node)) {
			while (i < len && !(text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) {
				if (text[i] == '"') /* skip strings, escapes included */
					for (i++; i < len && text[i] != '"'; i++)
						if (text[i] == '\\')
							i++;
				i++;
			}
			size_t st = i;
			while (i < len && strchr("+-0123456789.eE", text[i]))
				i++;
			if (i > st && !node->valuestring) {
				node->valuestring = cJSON_malloc(i - st + 1);
				if (node->valuestring) {
					memcpy(node->valuestring, text + st, i - st);
					node->valuestring[i - st] = 0;
				}
			}
		}
		if (node->child) {
			if (depth == PT_JSON_MAX_DEPTH)
				return; /* too deep to render anyway; the rest keeps cJSON's doubles */
			stack[depth++] = node;
			node = node->child;
			continue;
		}
		while (node && !node->next && depth)
			node = stack[--depth];
		node = node && node != root ? node->next : NULL;
	}
}

static int load_json(const char *path, cJSON **out)
{
	char *buf;
	size_t len;
	int rc = read_file(path, &buf, &len);
	if (rc)
		return rc;
	size_t bad = utf8_check((const unsigned char *)buf, len);
	if (bad != len) {
		pt_cli_error("invalid UTF-8 in %s at offset %zu", path, bad);
		pt_free(buf);
		return PT_EXIT_USAGE;
	}
	const char *end = NULL;
	cJSON *j = memchr(buf, 0, len) ? NULL : cJSON_ParseWithLengthOpts(buf, len + 1, &end, true);
	if (!j) {
		size_t off = end && end >= buf ? (size_t)(end - buf) : 0;
		pt_cli_error("malformed JSON in %s at offset %zu", path, off);
		pt_free(buf);
		return PT_EXIT_USAGE;
	}
	keep_number_text(buf, len, j);
	pt_free(buf);
	*out = j;
	return 0;
}

static bool valid_role(const char *r)
{
	static const char *const roles[] = { "system", "developer", "user", "assistant", "tool" };
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (strcmp(r, roles[i]) == 0)
			return true;
	return false;
}

static int bad_shape(const char *path, size_t i, const char *what)
{
	pt_cli_error("%s: messages[%zu]: %s", path, i, what);
	return PT_EXIT_USAGE;
}

static int check_tool_calls(const char *path, size_t i, const cJSON *tc)
{
	if (!cJSON_IsArray(tc))
		return bad_shape(path, i, "tool_calls must be an array");
	for (const cJSON *c = tc->child; c; c = c->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		if (!cJSON_IsObject(c) || !cJSON_IsObject(fn))
			return bad_shape(path, i, "each tool call needs a \"function\" object");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (!cJSON_IsString(name))
			return bad_shape(path, i, "tool call function.name must be a string");
		if (args && !cJSON_IsString(args) && !cJSON_IsObject(args))
			return bad_shape(path, i, "tool call function.arguments must be a string or object");
	}
	return 0;
}

/* OpenAI chat format: role, content (string, null or a list of typed parts), tool_calls. */
static int check_messages(const char *path, const cJSON *msgs)
{
	size_t i = 0;
	if (!cJSON_IsArray(msgs)) {
		pt_cli_error("%s: \"messages\" must be an array", path);
		return PT_EXIT_USAGE;
	}
	for (const cJSON *m = msgs->child; m; m = m->next, i++) {
		if (!cJSON_IsObject(m))
			return bad_shape(path, i, "must be an object");
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		if (!cJSON_IsString(role))
			return bad_shape(path, i, "\"role\" must be a string");
		if (!valid_role(role->valuestring)) {
			pt_cli_error("%s: messages[%zu]: unknown role '%.40s'", path, i, role->valuestring);
			return PT_EXIT_USAGE;
		}
		if (content && !cJSON_IsString(content) && !cJSON_IsNull(content)) {
			if (!cJSON_IsArray(content))
				return bad_shape(path, i, "\"content\" must be a string, null or an array");
			for (const cJSON *p = content->child; p; p = p->next)
				if (!cJSON_IsObject(p) ||
				    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "type")))
					return bad_shape(path, i, "content parts must be objects with a \"type\"");
		}
		if (tc && !cJSON_IsNull(tc)) {
			int rc = check_tool_calls(path, i, tc);
			if (rc)
				return rc;
		}
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
		keep_number_text(eq + 1, strlen(eq + 1), v);
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
	cJSON *msgs = conv, *tools = NULL, *tools_doc = NULL;
	int rc;
	if (cJSON_IsObject(conv)) {
		msgs = cJSON_DetachItemFromObjectCaseSensitive(conv, "messages");
		tools = cJSON_DetachItemFromObjectCaseSensitive(conv, "tools");
		if (!msgs) {
			cJSON_Delete(tools);
			pt_cli_error("%s: object has no \"messages\" array", o->messages);
			return PT_EXIT_USAGE;
		}
	} else {
		msgs = cJSON_Duplicate(conv, true);
	}
	cJSON_AddItemToObject(vars, "messages", msgs);
	if ((rc = check_messages(o->messages, msgs)) != 0) {
		cJSON_Delete(tools);
		return rc;
	}
	if (o->object_args)
		objectify_arguments(msgs);
	if (o->tools) {
		cJSON_Delete(tools);
		tools = NULL;
		if ((rc = load_json(o->tools, &tools_doc)) != 0)
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
	if (!o->no_gen)
		cJSON_AddTrueToObject(vars, "add_generation_prompt");
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
	if ((rc = load_json(o->messages, &conv)) == 0 && (rc = build_vars(o, conv, vars)) == 0) {
		const char *text = info->chat_template, *name = o->model;
		if (o->tmpl) {
			rc = read_file(o->tmpl, &src, &len);
			text = src;
			name = o->tmpl;
		} else {
			len = info->chat_template_len;
		}
		size_t bad = rc ? len : utf8_check((const unsigned char *)text, len);
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
