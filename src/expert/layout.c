/* layout.c - finds the routed-expert tensors of a GGUF and records each layer's parts. */
#include "expert/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/limits.h"

static enum pt_expert_part_kind kind_of(const char *rest)
{
	if (strcmp(rest, "ffn_gate_exps.weight") == 0)
		return PT_PART_GATE;
	if (strcmp(rest, "ffn_up_exps.weight") == 0)
		return PT_PART_UP;
	if (strcmp(rest, "ffn_gate_up_exps.weight") == 0)
		return PT_PART_GATE_UP;
	if (strcmp(rest, "ffn_down_exps.weight") == 0)
		return PT_PART_DOWN;
	return PT_PART_OTHER;
}

/* blk.N.<rest> with <rest> containing "_exps": returns N and rest, else -1. */
static int64_t parse_name(const struct pt_str *name, char *rest, size_t n)
{
	char buf[PT_GGUF_MAX_NAME + 2];
	char *end;
	unsigned long v;
	if (name->len >= sizeof buf)
		return -1;
	memcpy(buf, name->ptr, name->len);
	buf[name->len] = '\0';
	if (strncmp(buf, "blk.", 4) != 0 || buf[4] < '0' || buf[4] > '9')
		return -1;
	v = strtoul(buf + 4, &end, 10);
	if (*end != '.' || v > UINT32_MAX || !strstr(end + 1, "_exps"))
		return -1;
	snprintf(rest, n, "%s", end + 1);
	return (int64_t)v;
}

static struct pt_expert_layer *layer_for(struct pt_expert_layout *l, uint32_t layer,
					 struct pt_error *err)
{
	for (uint32_t i = 0; i < l->n_moe; i++)
		if (l->moe[i].layer == layer)
			return &l->moe[i];
	struct pt_expert_layer *m = pt_reallocn(l->moe, l->n_moe + 1, sizeof *m);
	if (!m) {
		pt_error_set(err, PT_E_NOMEM, "expert layout");
		return NULL;
	}
	l->moe = m;
	memset(&m[l->n_moe], 0, sizeof *m);
	m[l->n_moe].layer = layer;
	return &m[l->n_moe++];
}

static enum pt_status add_tensor(struct pt_expert_layout *l, const struct pt_gguf_tensor *t,
				 uint32_t layer, const char *rest, struct pt_error *err)
{
	uint64_t ne_last = t->ne[t->n_dims - 1];
	struct pt_expert_layer *m;
	if (t->n_dims < 2)
		return PT_OK; /* {n_expert} scalars stay resident */
	if (l->n_expert == 0)
		l->n_expert = (uint32_t)ne_last;
	if (ne_last != l->n_expert || ne_last == 0 || ne_last > UINT32_MAX ||
	    t->nbytes % ne_last != 0)
		return pt_error_at(err, PT_E_FORMAT, t->file_offset,
				   "expert tensor %.*s: last dimension %llu does not match %u experts",
				   (int)t->name.len, t->name.ptr, (unsigned long long)ne_last,
				   l->n_expert);
	if (!(m = layer_for(l, layer, err)))
		return PT_E_NOMEM;
	if (m->n_parts == PT_EXPERT_MAX_PARTS)
		return pt_error_set(err, PT_E_UNSUPPORTED, "layer %u has more than %d expert tensors",
				    layer, PT_EXPERT_MAX_PARTS);
	struct pt_expert_part *p = &m->part[m->n_parts++];
	p->kind = kind_of(rest);
	snprintf(p->name, sizeof p->name, "%.*s", (int)t->name.len, t->name.ptr);
	p->type = t->type;
	p->file = t->part;
	p->file_offset = t->file_offset;
	p->stride = t->nbytes / ne_last;
	if (t->n_dims == 3) { /* one matrix per expert: cols (ne0) x rows (ne1) */
		p->cols = t->ne[0];
		p->rows = t->ne[1];
	}
	m->expert_bytes += p->stride;
	return PT_OK;
}

static int cmp_part(const void *a, const void *b)
{
	const struct pt_expert_part *x = a, *y = b;
	if (x->kind != y->kind)
		return (int)x->kind - (int)y->kind;
	return strcmp(x->name, y->name);
}

static int cmp_layer(const void *a, const void *b)
{
	const struct pt_expert_layer *x = a, *y = b;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

enum pt_status pt_expert_layout_from_gguf(const pt_gguf *g, struct pt_expert_layout *out,
					  struct pt_error *err)
{
	return pt_expert_layout_from_gguf_layers(g, UINT32_MAX, out, err);
}

enum pt_status pt_expert_layout_from_gguf_layers(const pt_gguf *g, uint32_t n_layer,
						 struct pt_expert_layout *out,
						 struct pt_error *err)
{
	char rest[80];
	memset(out, 0, sizeof *out);
	out->data_offset = pt_gguf_data_offset(g);
	out->file_size = pt_gguf_file_size(g);
	out->n_files = pt_gguf_part_count(g);
	out->files = pt_calloc(out->n_files, sizeof *out->files);
	if (!out->files)
		return pt_error_set(err, PT_E_NOMEM, "expert layout: file list");
	for (uint32_t i = 0; i < out->n_files; i++) {
		const char *path = pt_gguf_part_path(g, i);
		if (path && !(out->files[i] = pt_strdup(path))) {
			pt_expert_layout_free(out);
			return pt_error_set(err, PT_E_NOMEM, "expert layout: file list");
		}
	}
	for (uint64_t i = 0; i < pt_gguf_tensor_count(g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		int64_t layer = parse_name(&t->name, rest, sizeof rest);
		if (layer < 0 || (uint64_t)layer >= n_layer)
			continue;
		enum pt_status st = add_tensor(out, t, (uint32_t)layer, rest, err);
		if (st != PT_OK) {
			pt_expert_layout_free(out);
			return st;
		}
	}
	if (out->n_moe)
		qsort(out->moe, out->n_moe, sizeof *out->moe, cmp_layer);
	for (uint32_t i = 0; i < out->n_moe; i++)
		qsort(out->moe[i].part, out->moe[i].n_parts, sizeof out->moe[i].part[0], cmp_part);
	return PT_OK;
}

void pt_expert_layout_free(struct pt_expert_layout *l)
{
	if (!l)
		return;
	pt_free(l->moe);
	l->moe = NULL;
	l->n_moe = 0;
	for (uint32_t i = 0; l->files && i < l->n_files; i++)
		pt_free(l->files[i]);
	pt_free(l->files);
	l->files = NULL;
	l->n_files = 0;
}

int32_t pt_expert_layout_find(const struct pt_expert_layout *l, uint32_t layer)
{
	for (uint32_t i = 0; i < l->n_moe; i++)
		if (l->moe[i].layer == layer)
			return (int32_t)i;
	return -1;
}

uint64_t pt_expert_layout_max_bytes(const struct pt_expert_layout *l)
{
	uint64_t m = 0;
	for (uint32_t i = 0; i < l->n_moe; i++)
		if (l->moe[i].expert_bytes > m)
			m = l->moe[i].expert_bytes;
	return m;
}
