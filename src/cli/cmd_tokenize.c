/* cmd_tokenize.c - `particle tokenize` and `particle detokenize`: a model's tokenizer from
 * the command line, with a line-per-item batch mode (base64 text) for the oracle tests. */
#include "cli/cli.h"
#include "cli/input.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "token/tok.h"
#include "util/alloc.h"

struct opts {
	const char *model, *file, *batch, *text;
	bool parse_special, add_special, pieces, ids_only, info;
};

static const char b64chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_put(FILE *f, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		fputc(b64chars[v >> 18 & 63], f);
		fputc(b64chars[v >> 12 & 63], f);
		fputc(i + 1 < n ? b64chars[v >> 6 & 63] : '=', f);
		fputc(i + 2 < n ? b64chars[v & 63] : '=', f);
	}
}

/* Decodes base64 in place; returns the length or -1. */
static long b64_decode(char *s)
{
	size_t o = 0, bits = 0;
	unsigned acc = 0;
	for (char *p = s; *p && *p != '\n' && *p != '\r'; p++) {
		if (*p == '=')
			break;
		const char *c = strchr(b64chars, *p);
		if (!c || !*p)
			return -1;
		acc = acc << 6 | (unsigned)(c - b64chars);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[o++] = (char)(acc >> bits & 0xFF);
		}
	}
	return (long)o;
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7F)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int open_tok(const char *path, pt_gguf **g, pt_tok **t)
{
	struct pt_error err = { 0 };
	enum pt_status st = pt_gguf_open(path, g, &err);
	if (!st)
		st = pt_tok_load(*g, t, &err);
	if (st) {
		pt_gguf_close(*g);
		*g = NULL;
		return pt_cli_fail(&err);
	}
	return PT_EXIT_OK;
}

static int print_ids(const pt_tok *t, const struct opts *o, const char *text, size_t len)
{
	struct pt_error err = { 0 };
	int32_t *ids;
	size_t n;
	if (pt_tok_encode_alloc(t, text, len, o->add_special, o->parse_special, &ids, &n, &err))
		return pt_cli_fail(&err);
	if (!o->ids_only)
		fputc('[', stdout);
	for (size_t i = 0; i < n; i++) {
		if (o->ids_only)
			printf(i ? " %d" : "%d", ids[i]);
		else if (o->pieces) {
			size_t tl;
			const char *s = pt_tok_text(t, ids[i], &tl);
			printf("%s{\"id\":%d,\"piece\":", i ? "," : "", ids[i]);
			json_str(stdout, s, tl);
			fputc('}', stdout);
		} else {
			printf(i ? ",%d" : "%d", ids[i]);
		}
	}
	puts(o->ids_only ? "" : "]");
	pt_free(ids);
	return PT_EXIT_OK;
}

static int batch_lines(const char *path, const pt_tok *t, const struct opts *o,
		       int (*one)(const pt_tok *, const struct opts *, char *))
{
	char *buf = NULL;
	size_t len = 0;
	int rc = pt_cli_read_input(path, &buf, &len);
	for (char *line = buf, *nl; !rc && line < buf + len; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			nl = buf + len;
		*nl = 0;
		rc = one(t, o, line);
	}
	if (buf)
		pt_free(buf);
	return rc;
}

static int tokenize_b64(const pt_tok *t, const struct opts *o, char *line)
{
	long n = b64_decode(line);
	if (n < 0) {
		pt_cli_error("tokenize: bad base64 line in %s", o->batch);
		return PT_EXIT_USAGE;
	}
	return print_ids(t, o, line, (size_t)n);
}

static void print_info(const pt_tok *t)
{
	printf("{\"n_vocab\":%u,\"bos\":%d,\"eos\":%d,\"eot\":%d,\"add_bos\":%s,"
	       "\"add_eos\":%s,\"eog\":[", pt_tok_n_vocab(t), pt_tok_bos(t), pt_tok_eos(t),
	       pt_tok_eot(t), pt_tok_add_bos(t) ? "true" : "false",
	       pt_tok_add_eos(t) ? "true" : "false");
	const char *sep = "";
	for (uint32_t i = 0; i < pt_tok_n_vocab(t); i++) {
		if (pt_tok_is_eog(t, (int32_t)i)) {
			printf("%s%u", sep, i);
			sep = ",";
		}
	}
	puts("]}");
}

static void tok_usage(FILE *f)
{
	fprintf(f,
		"usage: particle tokenize -m MODEL [options] (TEXT | --file F | --batch F)\n\n"
		"Prints the token ids of TEXT as a JSON array.\n\n"
		"options:\n"
		"  -m, --model FILE  GGUF whose tokenizer to use (required)\n"
		"  --file F          tokenize the bytes of file F instead of TEXT\n"
		"  --batch F         one base64-encoded text per line of F; one result per line\n"
		"  --no-special      do not match control tokens written as text (default: match)\n"
		"  --no-bos          do not add BOS/EOS even if the vocab wants them (default: add)\n"
		"  --pieces          print [{\"id\":N,\"piece\":\"vocab text\"},...] instead\n"
		"  --ids-only        print the ids separated by spaces instead of JSON\n"
		"  --vocab-info      print the vocab's special ids, add_bos/add_eos and the\n"
		"                    end-of-generation ids as JSON instead of tokenizing\n"
		"  --help            this text\n");
}

static int parse_common(int argc, char **argv, struct opts *o, bool tok)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool v = i + 1 < argc;
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return -1;
		if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v)
			o->model = argv[++i];
		else if (!strcmp(a, "--file") && v && tok)
			o->file = argv[++i];
		else if (!strcmp(a, "--batch") && v)
			o->batch = argv[++i];
		else if (!strcmp(a, "--no-special"))
			o->parse_special = false;
		else if (!strcmp(a, "--no-bos") && tok)
			o->add_special = false;
		else if (!strcmp(a, "--remove-special") && !tok)
			o->add_special = false;
		else if (!strcmp(a, "--pieces") && tok)
			o->pieces = true;
		else if (!strcmp(a, "--ids-only") && tok)
			o->ids_only = true;
		else if (!strcmp(a, "--vocab-info") && tok)
			o->info = true;
		else if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
			pt_cli_error("%s: unknown or incomplete option '%s'", argv[0], a);
			return PT_EXIT_USAGE;
		} else if (!o->text)
			o->text = a;
		else {
			pt_cli_error("%s: unexpected argument '%s'", argv[0], a);
			return PT_EXIT_USAGE;
		}
	}
	if (!o->model) {
		pt_cli_error("%s: -m MODEL is required", argv[0]);
		return PT_EXIT_USAGE;
	}
	if (!!o->text + !!o->file + !!o->batch + o->info != 1) {
		pt_cli_error("%s: give exactly one input (%s)", argv[0],
			     tok ? "TEXT, --file, --batch or --vocab-info" : "IDS or --batch");
		return PT_EXIT_USAGE;
	}
	return PT_EXIT_OK;
}

int pt_cmd_tokenize(int argc, char **argv)
{
	struct opts o = { .parse_special = true, .add_special = true };
	int rc = parse_common(argc, argv, &o, true);
	if (rc) {
		if (rc < 0)
			tok_usage(stdout);
		return rc < 0 ? PT_EXIT_OK : rc;
	}
	pt_gguf *g = NULL;
	pt_tok *t = NULL;
	if ((rc = open_tok(o.model, &g, &t)))
		return rc;
	if (o.info) {
		print_info(t);
	} else if (o.batch) {
		rc = batch_lines(o.batch, t, &o, tokenize_b64);
	} else if (o.file) {
		char *buf;
		size_t len;
		if (!(rc = pt_cli_read_input(o.file, &buf, &len))) {
			rc = print_ids(t, &o, buf, len);
			pt_free(buf);
		}
	} else {
		rc = print_ids(t, &o, o.text, strlen(o.text));
	}
	pt_tok_destroy(t);
	pt_gguf_close(g);
	return rc;
}

/* "1,2 3" or "[1, 2, 3]" -> ids; out-of-range or malformed -> exit 2. */
static int parse_ids(const pt_tok *t, const char *s, int32_t **ids, size_t *n)
{
	size_t cap = 16;
	*n = 0;
	*ids = pt_mallocn(cap, sizeof **ids);
	const char *p = s;
	while (*ids && *p) {
		while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno) {
			pt_cli_error("detokenize: bad token id at '%.20s'", p);
			pt_free(*ids);
			return PT_EXIT_USAGE;
		}
		if (v < 0 || v >= (long long)pt_tok_n_vocab(t)) {
			pt_cli_error("detokenize: token id %lld out of range (vocab %u)", v,
				     pt_tok_n_vocab(t));
			pt_free(*ids);
			return PT_EXIT_USAGE;
		}
		if (*n == cap) {
			int32_t *nv = pt_reallocn(*ids, cap *= 2, sizeof *nv);
			if (!nv)
				pt_free(*ids);
			*ids = nv;
			if (!nv)
				break;
		}
		(*ids)[(*n)++] = (int32_t)v;
		p = end;
	}
	if (!*ids) {
		pt_cli_error("detokenize: out of memory");
		return PT_EXIT_FAIL;
	}
	return PT_EXIT_OK;
}

static int detok_one(const pt_tok *t, const struct opts *o, char *line, bool b64)
{
	int32_t *ids;
	size_t n, len;
	char *text;
	struct pt_error err = { 0 };
	int rc = parse_ids(t, line, &ids, &n);
	if (rc)
		return rc;
	enum pt_status st = pt_tok_decode(t, ids, n, !o->add_special, o->parse_special, &text,
					  &len, &err);
	pt_free(ids);
	if (st)
		return pt_cli_fail(&err);
	if (b64) {
		b64_put(stdout, (const unsigned char *)text, len);
		fputc('\n', stdout);
	} else {
		fwrite(text, 1, len, stdout);
	}
	pt_free(text);
	return PT_EXIT_OK;
}

static int detok_line(const pt_tok *t, const struct opts *o, char *line)
{
	return detok_one(t, o, line, true);
}

int pt_cmd_detokenize(int argc, char **argv)
{
	struct opts o = { .parse_special = true, .add_special = true };
	int rc = parse_common(argc, argv, &o, false);
	if (rc) {
		if (rc < 0)
			printf("usage: particle detokenize -m MODEL [options] (IDS | --batch F)\n\n"
			       "Prints the text of IDS (\"1,2,3\", \"1 2 3\" or \"[1,2,3]\").\n\n"
			       "options:\n"
			       "  -m, --model FILE   GGUF whose tokenizer to use (required)\n"
			       "  --batch F          one id list per line of F; prints base64 text lines\n"
			       "  --no-special       render control tokens as nothing (default: render)\n"
			       "  --remove-special   drop a leading BOS / trailing EOS the vocab adds\n"
			       "                     (default: keep)\n"
			       "  --help             this text\n"
			       "exit 2 for a malformed or out-of-range id.\n");
		return rc < 0 ? PT_EXIT_OK : rc;
	}
	pt_gguf *g = NULL;
	pt_tok *t = NULL;
	if ((rc = open_tok(o.model, &g, &t)))
		return rc;
	rc = o.batch ? batch_lines(o.batch, t, &o, detok_line)
		     : detok_one(t, &o, (char *)o.text, false);
	pt_tok_destroy(t);
	pt_gguf_close(g);
	return rc;
}
