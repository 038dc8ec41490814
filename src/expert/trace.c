/* trace.c - routing trace writer and reader (format in trace.h). */
#include "expert/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/safefile.h"

struct pt_trace_writer {
	FILE *f;                 /* out's stream */
	bool binary;
	char *path;
	struct pt_safe_file out; /* temp name until close renames it (safefile.h) */
};

enum pt_status pt_trace_writer_open(const char *path, bool binary, pt_trace_writer **out,
				    struct pt_error *err)
{
	pt_trace_writer *w = pt_calloc(1, sizeof *w);
	*out = NULL;
	if (!w || !(w->path = pt_strdup(path))) {
		pt_free(w);
		return pt_error_set(err, PT_E_NOMEM, "trace writer");
	}
	w->binary = binary;
	/* --trace-experts names an output: replaced on close, never written through a link */
	enum pt_status ost = pt_safe_output(&w->out, path, err);
	if (ost == PT_OK && !(w->f = pt_safe_stdio(&w->out, err)))
		ost = PT_E_IO;
	if (ost != PT_OK) {
		pt_safe_abort(&w->out);
		pt_free(w->path);
		pt_free(w);
		return ost;
	}
	if (binary)
		fwrite(PT_TRACE_MAGIC, 1, 8, w->f);
	else
		fputs("# particle expert trace v1: token layer experts...\n", w->f);
	*out = w;
	return PT_OK;
}

static void put_le(FILE *f, uint32_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		fputc((int)((v >> (8 * i)) & 0xff), f);
}

enum pt_status pt_trace_writer_add(pt_trace_writer *w, uint32_t token, uint32_t layer,
				   const uint32_t *experts, uint32_t k, struct pt_error *err)
{
	if (k > PT_TRACE_MAX_K)
		return pt_error_set(err, PT_E_LIMIT, "trace record of %u experts", k);
	if (w->binary) {
		if (layer > UINT16_MAX)
			return pt_error_set(err, PT_E_LIMIT, "layer %u does not fit the binary trace",
					    layer);
		for (uint32_t i = 0; i < k; i++) /* check before writing: records stay whole */
			if (experts[i] > UINT16_MAX)
				return pt_error_set(err, PT_E_LIMIT, "expert %u does not fit the binary "
						    "trace", experts[i]);
		put_le(w->f, token, 4);
		put_le(w->f, layer, 2);
		put_le(w->f, k, 2);
		for (uint32_t i = 0; i < k; i++)
			put_le(w->f, experts[i], 2);
	} else {
		fprintf(w->f, "%u %u", token, layer);
		for (uint32_t i = 0; i < k; i++)
			fprintf(w->f, " %u", experts[i]);
		fputc('\n', w->f);
	}
	if (ferror(w->f))
		return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", w->path);
	return PT_OK;
}

enum pt_status pt_trace_writer_close(pt_trace_writer *w, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	if (!w)
		return PT_OK;
	st = pt_safe_commit(&w->out, err); /* flushes and closes w->f */
	pt_free(w->path);
	pt_free(w);
	return st;
}

/* ---- reading -------------------------------------------------------------------------- */

static enum pt_status push(struct pt_trace *t, uint32_t *cap_rec, uint64_t *cap_ex,
			   uint32_t token, uint32_t layer, const uint32_t *ex, uint32_t k,
			   struct pt_error *err)
{
	if (t->n_rec == PT_TRACE_MAX_RECORDS)
		return pt_error_set(err, PT_E_LIMIT, "trace has more than %u records",
				    PT_TRACE_MAX_RECORDS);
	if (t->n_rec == *cap_rec) {
		uint32_t nc = *cap_rec ? *cap_rec * 2 : 1024;
		void *p = pt_reallocn(t->rec, nc, sizeof *t->rec);
		if (!p)
			return pt_error_set(err, PT_E_NOMEM, "trace");
		t->rec = p;
		*cap_rec = nc;
	}
	if (t->n_experts_total + k > *cap_ex) {
		uint64_t nc = (*cap_ex ? *cap_ex * 2 : 8192) + k;
		void *p = pt_reallocn(t->experts, nc, sizeof *t->experts);
		if (!p)
			return pt_error_set(err, PT_E_NOMEM, "trace");
		t->experts = p;
		*cap_ex = nc;
	}
	t->rec[t->n_rec++] = (struct pt_trace_rec){ .token = token, .layer = layer,
						    .first = (uint32_t)t->n_experts_total, .k = k };
	for (uint32_t i = 0; i < k; i++) {
		t->experts[t->n_experts_total++] = ex[i];
		if (ex[i] > t->max_expert)
			t->max_expert = ex[i];
	}
	if (t->n_experts_total > UINT32_MAX)
		return pt_error_set(err, PT_E_LIMIT, "trace too large");
	return PT_OK;
}

/* Parses one text line into v[]; returns the count, -1 on a bad token. */
static int parse_line(char *line, uint32_t *v, int max)
{
	int n = 0;
	for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
		char *end;
		if (n == max || *tok < '0' || *tok > '9')
			return -1;
		errno = 0;
		unsigned long x = strtoul(tok, &end, 10);
		if (errno || *end || x > UINT32_MAX)
			return -1;
		v[n++] = (uint32_t)x;
	}
	return n;
}

static enum pt_status read_text(FILE *f, const char *path, struct pt_trace *t,
				struct pt_error *err)
{
	char line[8192];
	uint32_t v[PT_TRACE_MAX_K + 2], cap_rec = 0;
	uint64_t cap_ex = 0, lineno = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		int n = parse_line(line, v, PT_TRACE_MAX_K + 2);
		if (n < 3)
			return pt_error_set(err, PT_E_FORMAT, "%s line %llu: expected TOKEN LAYER "
					    "EXPERT..., at most %u experts", path,
					    (unsigned long long)lineno, PT_TRACE_MAX_K);
		enum pt_status st = push(t, &cap_rec, &cap_ex, v[0], v[1], v + 2, (uint32_t)n - 2,
					 err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

static int get_le(FILE *f, int bytes, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < bytes; i++) {
		int c = fgetc(f);
		if (c == EOF)
			return i == 0 ? 0 : -1;
		v |= (uint32_t)c << (8 * i);
	}
	*out = v;
	return 1;
}

static enum pt_status read_binary(FILE *f, const char *path, struct pt_trace *t,
				  struct pt_error *err)
{
	uint32_t token, layer, k, ex[PT_TRACE_MAX_K], cap_rec = 0;
	uint64_t cap_ex = 0;
	for (;;) {
		long at = ftell(f);
		int r = get_le(f, 4, &token);
		if (r == 0)
			return PT_OK;
		if (r < 0 || get_le(f, 2, &layer) != 1 || get_le(f, 2, &k) != 1 || k == 0 ||
		    k > PT_TRACE_MAX_K)
			return pt_error_at(err, PT_E_FORMAT, (uint64_t)at, "%s: bad trace record",
					   path);
		for (uint32_t i = 0; i < k; i++)
			if (get_le(f, 2, &ex[i]) != 1)
				return pt_error_at(err, PT_E_FORMAT, (uint64_t)at,
						   "%s: truncated trace record", path);
		enum pt_status st = push(t, &cap_rec, &cap_ex, token, layer, ex, k, err);
		if (st != PT_OK)
			return st;
	}
}

static enum pt_status read_stream(FILE *f, const char *name, struct pt_trace *out,
				  struct pt_error *err)
{
	char magic[8];
	enum pt_status st;
	memset(out, 0, sizeof *out);
	if (fread(magic, 1, 8, f) == 8 && memcmp(magic, PT_TRACE_MAGIC, 8) == 0) {
		st = read_binary(f, name, out, err);
	} else {
		rewind(f);
		st = read_text(f, name, out, err);
	}
	if (st == PT_OK && out->n_rec == 0)
		st = pt_error_set(err, PT_E_FORMAT, "%s holds no trace records", name);
	if (st != PT_OK)
		pt_trace_free(out);
	return st;
}

enum pt_status pt_trace_read(const char *path, struct pt_trace *out, struct pt_error *err)
{
	FILE *f = fopen(path, "rbe");
	enum pt_status st;
	memset(out, 0, sizeof *out);
	if (!f)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open %s", path);
	st = read_stream(f, path, out, err);
	fclose(f);
	return st;
}

enum pt_status pt_trace_parse(const void *data, size_t n, const char *name, struct pt_trace *out,
			      struct pt_error *err)
{
	FILE *f;
	enum pt_status st;
	memset(out, 0, sizeof *out);
	if (n == 0)
		return pt_error_set(err, PT_E_FORMAT, "%s holds no trace records", name);
	f = fmemopen((void *)data, n, "rb");
	if (!f)
		return pt_error_sys(err, PT_E_NOMEM, errno, "trace buffer");
	st = read_stream(f, name, out, err);
	fclose(f);
	return st;
}

void pt_trace_free(struct pt_trace *t)
{
	pt_free(t->rec);
	pt_free(t->experts);
	memset(t, 0, sizeof *t);
}
