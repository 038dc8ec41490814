/* input.c - user input files shared by the commands: bounded reads of a file or stdin, JSON
 * documents (UTF-8 checked, number spelling kept for the template engine) and the
 * OpenAI-style messages array that `run` and `template` both accept. */
#include "cli/input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/limits.h"

int pt_cli_read_input(const char *path, char **out, size_t *len)
{
	int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pt_cli_error("cannot open %s: %s", path, strerror(errno));
		return PT_EXIT_USAGE;
	}
	/* Room for one byte past the limit, so "exactly the limit" and "more" differ. */
	const size_t limit = PT_CLI_MAX_INPUT, full = PT_CLI_MAX_INPUT + 2;
	size_t n = 0, cap = 4096;
	char *buf = pt_malloc(cap);
	int rc = buf ? 0 : PT_EXIT_FAIL;
	while (rc == 0) {
		if (n + 1 >= cap) {
			size_t ncap = cap * 2 < full ? cap * 2 : full;
			char *p = pt_realloc(buf, ncap);
			if (!p) {
				rc = PT_EXIT_FAIL;
				break;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			/* EISDIR and friends are the user's mistake; say which file. */
			pt_cli_error("cannot read %s: %s", path, strerror(errno));
			rc = PT_EXIT_USAGE;
		}
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n > limit) {
			pt_cli_error("%s: larger than %zu bytes", path, limit);
			rc = PT_EXIT_USAGE;
		}
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (rc) {
		if (rc == PT_EXIT_FAIL)
			pt_cli_error("out of memory reading %s", path);
		pt_free(buf);
		return rc;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

size_t pt_cli_utf8_check(const unsigned char *s, size_t len)
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
void pt_cli_json_keep_number_text(const char *text, size_t len, cJSON *root)
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

int pt_cli_load_json(const char *path, cJSON **out)
{
	char *buf;
	size_t len;
	int rc = pt_cli_read_input(path, &buf, &len);
	if (rc)
		return rc;
	size_t bad = pt_cli_utf8_check((const unsigned char *)buf, len);
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
	pt_cli_json_keep_number_text(buf, len, j);
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

static int check_content(const char *path, size_t i, const cJSON *content)
{
	if (!content || cJSON_IsString(content) || cJSON_IsNull(content))
		return 0;
	if (!cJSON_IsArray(content))
		return bad_shape(path, i, "\"content\" must be a string, null or an array");
	for (const cJSON *p = content->child; p; p = p->next)
		if (!cJSON_IsObject(p) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "type")))
			return bad_shape(path, i, "content parts must be objects with a \"type\"");
	return 0;
}

int pt_cli_check_messages(const char *path, const cJSON *msgs, bool need_one)
{
	size_t i = 0;
	int rc;
	if (!cJSON_IsArray(msgs)) {
		pt_cli_error("%s: \"messages\" must be an array", path);
		return PT_EXIT_USAGE;
	}
	for (const cJSON *m = msgs->child; m; m = m->next, i++) {
		if (!cJSON_IsObject(m))
			return bad_shape(path, i, "must be an object");
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		if (!cJSON_IsString(role))
			return bad_shape(path, i, "\"role\" must be a string");
		if (!valid_role(role->valuestring)) {
			pt_cli_error("%s: messages[%zu]: unknown role '%.40s'", path, i, role->valuestring);
			return PT_EXIT_USAGE;
		}
		if ((rc = check_content(path, i, cJSON_GetObjectItemCaseSensitive(m, "content"))))
			return rc;
		if (tc && !cJSON_IsNull(tc) && (rc = check_tool_calls(path, i, tc)))
			return rc;
	}
	if (need_one && i == 0) {
		pt_cli_error("%s: no messages", path);
		return PT_EXIT_USAGE;
	}
	return 0;
}

int pt_cli_split_conversation(const char *path, cJSON *conv, cJSON **msgs, cJSON **tools)
{
	*msgs = NULL;
	if (tools)
		*tools = NULL;
	if (!cJSON_IsObject(conv)) {
		*msgs = cJSON_Duplicate(conv, true);
		if (!*msgs) {
			pt_cli_error("out of memory copying %s", path);
			return PT_EXIT_FAIL;
		}
		return 0;
	}
	*msgs = cJSON_DetachItemFromObjectCaseSensitive(conv, "messages");
	if (tools)
		*tools = cJSON_DetachItemFromObjectCaseSensitive(conv, "tools");
	if (!*msgs) {
		if (tools) {
			cJSON_Delete(*tools);
			*tools = NULL;
		}
		pt_cli_error("%s: object has no \"messages\" array", path);
		return PT_EXIT_USAGE;
	}
	return 0;
}
