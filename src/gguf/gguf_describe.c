/* gguf_describe.c - summary of a validated GGUF for `particle inspect` and its JSON/text
 * renderings (see gguf_describe.h).  Every string from the file passes through
 * pt_gguf_display_str before it reaches a terminal or a JSON document, so hostile names
 * cannot inject control sequences or invalid UTF-8. */
#include "gguf/gguf_describe.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/alloc.h"
#include "util/limits.h"

static const char *const hparam_names[PT_GGUF_DESC_N_HPARAMS] = {
	"block_count",
	"context_length",
	"embedding_length",
	"feed_forward_length",
	"expert_feed_forward_length",
	"expert_shared_feed_forward_length",
	"attention.head_count",
	"attention.head_count_kv",
	"attention.key_length",
	"attention.value_length",
	"attention.layer_norm_rms_epsilon",
	"attention.sliding_window",
	"expert_count",
	"expert_used_count",
	"expert_shared_count",
	"leading_dense_block_count",
	"expert_weights_scale",
	"expert_gating_func",
	"rope.freq_base",
	"rope.dimension_count",
	"final_logit_softcapping",
	"vocab_size",
};

static const char *const expert_stems[] = {
	"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps",
};

#define ARCH_MAX 64 /* longer architecture names are not used to build keys */

const char *pt_gguf_desc_hparam_name(unsigned i)
{
	return i < PT_GGUF_DESC_N_HPARAMS ? hparam_names[i] : NULL;
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static unsigned utf8_len(const uint8_t *p, uint64_t n)
{
	unsigned len = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	if (p[0] >= 0xf5 || len == 0 || len > n)
		return 0;
	for (unsigned i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, > U+10FFFF */
	return len;
}

void pt_gguf_display_str(struct pt_str s, char *out, uint64_t max)
{
	const uint8_t *p = (const uint8_t *)s.ptr;
	uint64_t i = 0, o = 0;
	while (i < s.len && o < max) {
		unsigned len = p[i] < 0x80 ? 1 : utf8_len(p + i, s.len - i);
		if (len > 1 && o + len <= max) {
			memcpy(out + o, p + i, len);
			o += len;
			i += len;
			continue;
		}
		if (len > 1)
			break;
		out[o++] = (len == 1 && p[i] >= 0x20 && p[i] != 0x7f) ? (char)p[i] : '?';
		i++;
	}
	if (i < s.len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

static const struct pt_gguf_kv *arch_kv(const pt_gguf *g, struct pt_str arch, const char *sfx)
{
	char key[ARCH_MAX + 64];
	if (!arch.ptr || arch.len > ARCH_MAX || memchr(arch.ptr, 0, arch.len))
		return NULL;
	snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.ptr, sfx);
	return pt_gguf_find_kv(g, key);
}

/* An integer key under {arch}. that must be a scalar integer when present. */
static enum pt_status arch_u64(const pt_gguf *g, struct pt_str arch, const char *sfx,
			       uint64_t *out, struct pt_error *err)
{
	char key[ARCH_MAX + 64];
	*out = 0;
	if (!arch.ptr || arch.len > ARCH_MAX || memchr(arch.ptr, 0, arch.len))
		return PT_OK;
	snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.ptr, sfx);
	return pt_gguf_get_u64(g, key, 0, out, NULL, err);
}

static int64_t token_id(const pt_gguf *g, const char *key)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	int64_t v;
	return kv && pt_gguf_kv_int(kv, &v) ? v : -1;
}

static void describe_tokenizer(const pt_gguf *g, struct pt_gguf_desc *d)
{
	const struct pt_gguf_kv *kv;
	if ((kv = pt_gguf_find_kv(g, "tokenizer.ggml.model")) && kv->type == PT_GGUF_STRING)
		pt_gguf_get_str(g, "tokenizer.ggml.model", &d->tok_model, NULL, NULL);
	if ((kv = pt_gguf_find_kv(g, "tokenizer.ggml.pre")) && kv->type == PT_GGUF_STRING)
		pt_gguf_get_str(g, "tokenizer.ggml.pre", &d->tok_pre, NULL, NULL);
	if ((kv = pt_gguf_find_kv(g, "tokenizer.ggml.tokens")) && kv->type == PT_GGUF_ARRAY)
		d->vocab_size = kv->arr_count;
	if ((kv = pt_gguf_find_kv(g, "tokenizer.ggml.merges")) && kv->type == PT_GGUF_ARRAY)
		d->merges_count = kv->arr_count;
	d->bos_id = token_id(g, "tokenizer.ggml.bos_token_id");
	d->eos_id = token_id(g, "tokenizer.ggml.eos_token_id");
	d->eot_id = token_id(g, "tokenizer.ggml.eot_token_id");
	if ((kv = pt_gguf_find_kv(g, "tokenizer.chat_template")) && kv->type == PT_GGUF_STRING) {
		struct pt_str s;
		pt_gguf_get_str(g, "tokenizer.chat_template", &s, NULL, NULL);
		d->has_template = true;
		d->template_len = s.len;
	}
}

/* Layer index when name is blk.N.<rest>, else -1; *rest points past "blk.N.". */
static int64_t block_layer(struct pt_str name, const char **rest)
{
	const char *p = name.ptr, *end = name.ptr + name.len;
	int64_t layer = 0;
	int digits = 0;
	if (name.len < 5 || memcmp(p, "blk.", 4) != 0)
		return -1;
	for (p += 4; p < end && *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
		layer = layer * 10 + (*p - '0');
	if (digits == 0 || p >= end || *p != '.')
		return -1;
	*rest = p + 1;
	return layer;
}

/* Layer index when name is blk.N.<expert stem>[.suffix], else -1. */
static int64_t expert_layer(struct pt_str name)
{
	const char *p, *end = name.ptr + name.len;
	int64_t layer = block_layer(name, &p);
	if (layer < 0)
		return -1;
	for (size_t i = 0; i < sizeof expert_stems / sizeof expert_stems[0]; i++) {
		size_t n = strlen(expert_stems[i]);
		if ((size_t)(end - p) >= n && memcmp(p, expert_stems[i], n) == 0 &&
		    ((size_t)(end - p) == n || p[n] == '.'))
			return layer;
	}
	return -1;
}

struct layer_bytes {
	int64_t layer;
	uint64_t bytes;
};

static int cmp_layer(const void *a, const void *b)
{
	const struct layer_bytes *x = a, *y = b;
	return (x->layer > y->layer) - (x->layer < y->layer);
}

/* Splits bytes into resident and routed-expert, and derives bytes per expert per layer. */
static enum pt_status describe_experts(const pt_gguf *g, struct pt_gguf_desc *d,
				       struct pt_error *err)
{
	struct layer_bytes *lb = pt_mallocn(d->tensor_count ? d->tensor_count : 1, sizeof *lb);
	uint64_t n = 0;
	if (!lb)
		return pt_error_set(err, PT_E_NOMEM, "out of memory describing %llu tensors",
				    (unsigned long long)d->tensor_count);
	/* the NextN blocks are the last n_nextn of block_count */
	const uint64_t first_nextn = d->n_nextn && d->n_nextn <= d->n_layers ?
		d->n_layers - d->n_nextn : UINT64_MAX;
	for (uint64_t i = 0; i < d->tensor_count; i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		const char *rest;
		int64_t blk = block_layer(t->name, &rest);
		int64_t layer = expert_layer(t->name);
		if (blk >= 0 && (uint64_t)blk >= first_nextn) {
			d->nextn_bytes += t->nbytes;
		} else if (layer >= 0 && d->n_experts > 0 && t->ne[t->n_dims - 1] == d->n_experts) {
			d->expert_bytes += t->nbytes;
			d->expert_tensors++;
			lb[n].layer = layer;
			lb[n++].bytes = t->nbytes;
		} else {
			d->resident_bytes += t->nbytes;
		}
	}
	qsort(lb, n, sizeof *lb, cmp_layer);
	for (uint64_t i = 0; i < n;) {
		uint64_t sum = 0, j = i, per;
		for (; j < n && lb[j].layer == lb[i].layer; j++)
			sum += lb[j].bytes;
		per = sum / d->n_experts;
		if (d->expert_layers == 0 || per < d->bytes_per_expert_min)
			d->bytes_per_expert_min = per;
		if (per > d->bytes_per_expert)
			d->bytes_per_expert = per;
		d->expert_layers++;
		i = j;
	}
	pt_free(lb);
	return PT_OK;
}

enum pt_status pt_gguf_describe(const pt_gguf *g, struct pt_gguf_desc *d, struct pt_error *err)
{
	enum pt_status st;
	memset(d, 0, sizeof *d);
	d->version = pt_gguf_version(g);
	d->alignment = pt_gguf_alignment(g);
	d->file_bytes = pt_gguf_file_size(g);
	d->data_offset = pt_gguf_data_offset(g);
	d->kv_count = pt_gguf_kv_count(g);
	d->tensor_count = pt_gguf_tensor_count(g);
	st = pt_gguf_get_str(g, "general.architecture", &d->arch, NULL, err);
	if (st == PT_OK)
		st = pt_gguf_get_str(g, "general.name", &d->name, NULL, err);
	if (st == PT_OK)
		st = arch_u64(g, d->arch, "block_count", &d->n_layers, err);
	if (st == PT_OK)
		st = arch_u64(g, d->arch, "expert_count", &d->n_experts, err);
	if (st == PT_OK)
		st = arch_u64(g, d->arch, "expert_used_count", &d->n_experts_used, err);
	if (st == PT_OK)
		st = arch_u64(g, d->arch, "nextn_predict_layers", &d->n_nextn, err);
	if (st != PT_OK)
		return st;
	for (unsigned i = 0; i < PT_GGUF_DESC_N_HPARAMS; i++)
		d->hparams[i] = arch_kv(g, d->arch, hparam_names[i]);
	describe_tokenizer(g, d);
	for (uint64_t i = 0; i < d->tensor_count; i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		d->types[t->type].count++;
		d->types[t->type].bytes += t->nbytes;
		d->tensor_bytes += t->nbytes;
	}
	return describe_experts(g, d, err);
}

/* ---- rendering ---------------------------------------------------------------------- */

#define SHOW_MAX 200 /* display bytes of one string value */

static bool is_num(enum pt_gguf_vtype t)
{
	return t != PT_GGUF_STRING && t != PT_GGUF_ARRAY;
}

/* min/max of a numeric array (count > 0). */
static void arr_range(const struct pt_gguf_kv *kv, double *lo, double *hi)
{
	*lo = *hi = pt_gguf_arr_num(kv, 0);
	for (uint64_t i = 1; i < kv->arr_count; i++) {
		double v = pt_gguf_arr_num(kv, i);
		if (v < *lo)
			*lo = v;
		if (v > *hi)
			*hi = v;
	}
}

static void fmt_value(const struct pt_gguf_kv *kv, char *buf, size_t n)
{
	char s[SHOW_MAX + 4];
	int64_t iv;
	if (kv->type == PT_GGUF_STRING) {
		struct pt_str v = { (const char *)kv->value + 8, 0 };
		for (int i = 7; i >= 0; i--)
			v.len = (v.len << 8) | kv->value[i];
		pt_gguf_display_str(v, s, SHOW_MAX);
		snprintf(buf, n, "\"%s\"", s);
	} else if (kv->type == PT_GGUF_ARRAY) {
		int k = snprintf(buf, n, "array of %" PRIu64 " %s", kv->arr_count,
				 pt_gguf_vtype_name(kv->arr_type));
		if (is_num(kv->arr_type) && kv->arr_count > 0 && k > 0 && (size_t)k < n) {
			double lo, hi;
			arr_range(kv, &lo, &hi);
			if (lo == hi)
				snprintf(buf + k, n - (size_t)k, ", all %.9g", lo);
			else
				snprintf(buf + k, n - (size_t)k, ", min %.9g max %.9g", lo, hi);
		}
	} else if (kv->type == PT_GGUF_BOOL) {
		snprintf(buf, n, "%s", kv->value[0] ? "true" : "false");
	} else if (pt_gguf_kv_int(kv, &iv)) {
		snprintf(buf, n, "%" PRId64, iv);
	} else if (kv->type == PT_GGUF_U64) {
		snprintf(buf, n, "%.0f", pt_gguf_kv_num(kv));
	} else {
		snprintf(buf, n, "%.9g", pt_gguf_kv_num(kv));
	}
}

static void fmt_bytes(uint64_t b, char *buf, size_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	unsigned u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%" PRIu64 " B", b);
	else
		snprintf(buf, n, "%" PRIu64 " B (%.2f %s)", b, v, units[u]);
}

static void fmt_shape(const struct pt_gguf_tensor *t, char *buf, size_t n)
{
	size_t o = 0;
	for (uint32_t d = 0; d < t->n_dims && o < n; d++) {
		int k = snprintf(buf + o, n - o, d ? ", %" PRIu64 : "%" PRIu64, t->ne[d]);
		if (k < 0)
			break;
		o += (size_t)k;
	}
}

static void print_tokenizer(const struct pt_gguf_desc *d, FILE *f)
{
	char m[SHOW_MAX + 4], p[SHOW_MAX + 4];
	pt_gguf_display_str(d->tok_model, m, SHOW_MAX);
	pt_gguf_display_str(d->tok_pre, p, SHOW_MAX);
	fprintf(f, "tokenizer: model %s, pre %s, vocab %" PRIu64 ", merges %" PRIu64,
		d->tok_model.ptr ? m : "-", d->tok_pre.ptr ? p : "-", d->vocab_size,
		d->merges_count);
	fprintf(f, ", bos %" PRId64 ", eos %" PRId64 ", eot %" PRId64, d->bos_id, d->eos_id,
		d->eot_id);
	if (d->has_template)
		fprintf(f, ", chat template %" PRIu64 " bytes\n", d->template_len);
	else
		fprintf(f, ", no chat template\n");
}

static void print_tensors(const pt_gguf *g, FILE *f)
{
	for (uint64_t i = 0; i < pt_gguf_tensor_count(g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		char name[PT_GGUF_MAX_NAME * 4 + 8], shape[128];
		pt_gguf_display_str(t->name, name, sizeof name - 4);
		fmt_shape(t, shape, sizeof shape);
		fprintf(f, "  %-40s %-7s [%s] offset %" PRIu64 " bytes %" PRIu64, name,
			pt_type_name(t->type), shape, t->offset, t->nbytes);
		if (pt_gguf_part_count(g) > 1)
			fprintf(f, " part %u", t->part + 1);
		fputc('\n', f);
	}
}

enum pt_status pt_gguf_desc_print(const pt_gguf *g, const struct pt_gguf_desc *d,
				  bool with_tensors, FILE *f, struct pt_error *err)
{
	char s[SHOW_MAX + 4], v[SHOW_MAX + 128], b1[64];
	pt_gguf_display_str(d->arch, s, SHOW_MAX);
	fmt_bytes(d->file_bytes, b1, sizeof b1);
	fprintf(f, "file: %s, GGUF v%u, alignment %u, %" PRIu64 " metadata keys\n", b1,
		d->version, d->alignment, d->kv_count);
	for (uint32_t i = 0; pt_gguf_part_count(g) > 1 && i < pt_gguf_part_count(g); i++) {
		fmt_bytes(pt_gguf_part_size(g, i), b1, sizeof b1);
		fprintf(f, "split part %u of %u: %s, %s, %" PRIu64 " tensors\n", i + 1,
			pt_gguf_part_count(g),
			pt_gguf_part_path(g, i) ? pt_gguf_part_path(g, i) : "(memory)", b1,
			pt_gguf_part_tensor_count(g, i));
	}
	fprintf(f, "architecture: %s\n", d->arch.ptr ? s : "-");
	pt_gguf_display_str(d->name, s, SHOW_MAX);
	fprintf(f, "name: %s\n", d->name.ptr ? s : "-");
	fprintf(f, "hyper-parameters:\n");
	for (unsigned i = 0; i < PT_GGUF_DESC_N_HPARAMS; i++) {
		if (!d->hparams[i])
			continue;
		fmt_value(d->hparams[i], v, sizeof v);
		fprintf(f, "  %-36s %s\n", hparam_names[i], v);
	}
	print_tokenizer(d, f);
	fmt_bytes(d->tensor_bytes, b1, sizeof b1);
	fprintf(f, "tensors: %" PRIu64 ", %s\n", d->tensor_count, b1);
	for (uint32_t t = 0; t < PT_TYPE_COUNT; t++) {
		if (!d->types[t].count)
			continue;
		fmt_bytes(d->types[t].bytes, b1, sizeof b1);
		fprintf(f, "  %-8s %6" PRIu64 " tensors  %s\n", pt_type_name(t), d->types[t].count,
			b1);
	}
	fmt_bytes(d->resident_bytes, b1, sizeof b1);
	fprintf(f, "resident bytes: %s\n", b1);
	fmt_bytes(d->expert_bytes, b1, sizeof b1);
	fprintf(f, "routed-expert bytes: %s in %" PRIu64 " tensors over %" PRIu64 " layers\n", b1,
		d->expert_tensors, d->expert_layers);
	if (d->n_nextn) {
		fmt_bytes(d->nextn_bytes, b1, sizeof b1);
		fprintf(f, "next-token-prediction blocks: %" PRIu64 ", %s (never loaded)\n",
			d->n_nextn, b1);
	}
	fmt_bytes(d->bytes_per_expert, b1, sizeof b1);
	fprintf(f, "experts: %" PRIu64 " per layer, %" PRIu64 " used; bytes per expert: %s",
		d->n_experts, d->n_experts_used, b1);
	if (d->bytes_per_expert_min != d->bytes_per_expert)
		fprintf(f, " (smallest layer %" PRIu64 " B)", d->bytes_per_expert_min);
	fputc('\n', f);
	if (with_tensors)
		print_tensors(g, f);
	if (fflush(f) != 0 || ferror(f))
		return pt_error_set(err, PT_E_IO, "cannot write the report");
	return PT_OK;
}

/* ---- JSON --------------------------------------------------------------------------- */

/* Exact integers (cJSON numbers are doubles). */
static bool add_u64(cJSON *o, const char *k, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRIu64, v);
	return cJSON_AddRawToObject(o, k, b) != NULL;
}

static bool add_i64(cJSON *o, const char *k, int64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRId64, v);
	return cJSON_AddRawToObject(o, k, b) != NULL;
}

static bool add_str(cJSON *o, const char *k, struct pt_str s, uint64_t max)
{
	char *b;
	bool ok;
	if (!s.ptr)
		return cJSON_AddNullToObject(o, k) != NULL;
	b = pt_malloc((size_t)max + 4);
	if (!b)
		return false;
	pt_gguf_display_str(s, b, max);
	ok = cJSON_AddStringToObject(o, k, b) != NULL;
	pt_free(b);
	return ok;
}

static bool add_num(cJSON *o, const char *k, double v)
{
	if (v != v || v > 1e308 || v < -1e308)
		return cJSON_AddNullToObject(o, k) != NULL;
	return cJSON_AddNumberToObject(o, k, v) != NULL;
}

/* A value: scalars as JSON scalars, strings (cut), arrays as {type, count[, min, max]}. */
static bool add_value(cJSON *o, const char *k, const struct pt_gguf_kv *kv)
{
	int64_t iv;
	if (kv->type == PT_GGUF_STRING) {
		struct pt_str s = { (const char *)kv->value + 8, 0 };
		for (int i = 7; i >= 0; i--)
			s.len = (s.len << 8) | kv->value[i];
		return add_str(o, k, s, SHOW_MAX);
	}
	if (kv->type == PT_GGUF_ARRAY) {
		cJSON *a = cJSON_AddObjectToObject(o, k);
		bool ok = a && cJSON_AddStringToObject(a, "type", pt_gguf_vtype_name(kv->arr_type)) &&
			  add_u64(a, "count", kv->arr_count);
		if (ok && is_num(kv->arr_type) && kv->arr_count > 0) {
			double lo, hi;
			arr_range(kv, &lo, &hi);
			ok = add_num(a, "min", lo) && add_num(a, "max", hi);
		}
		return ok;
	}
	if (kv->type == PT_GGUF_BOOL)
		return cJSON_AddBoolToObject(o, k, kv->value[0] != 0) != NULL;
	if (pt_gguf_kv_int(kv, &iv))
		return add_i64(o, k, iv);
	if (kv->type == PT_GGUF_U64) {
		uint64_t u = 0;
		for (int i = 7; i >= 0; i--)
			u = (u << 8) | kv->value[i];
		return add_u64(o, k, u);
	}
	return add_num(o, k, pt_gguf_kv_num(kv));
}

static bool json_metadata(const pt_gguf *g, cJSON *root)
{
	cJSON *m = cJSON_AddObjectToObject(root, "metadata");
	char key[SHOW_MAX + 4];
	if (!m)
		return false;
	for (uint64_t i = 0; i < pt_gguf_kv_count(g); i++) {
		const struct pt_gguf_kv *kv = pt_gguf_kv_at(g, i);
		pt_gguf_display_str(kv->key, key, SHOW_MAX);
		if (!add_value(m, key, kv))
			return false;
	}
	return true;
}

static bool json_tokenizer(const struct pt_gguf_desc *d, cJSON *root)
{
	cJSON *t = cJSON_AddObjectToObject(root, "tokenizer");
	return t && add_str(t, "model", d->tok_model, SHOW_MAX) &&
	       add_str(t, "pre", d->tok_pre, SHOW_MAX) && add_u64(t, "vocab_size", d->vocab_size) &&
	       add_u64(t, "merges", d->merges_count) && add_i64(t, "bos_id", d->bos_id) &&
	       add_i64(t, "eos_id", d->eos_id) && add_i64(t, "eot_id", d->eot_id) &&
	       cJSON_AddBoolToObject(t, "chat_template", d->has_template) &&
	       add_u64(t, "chat_template_bytes", d->template_len);
}

static bool json_types(const struct pt_gguf_desc *d, cJSON *root)
{
	cJSON *c = cJSON_AddObjectToObject(root, "types");
	cJSON *b = cJSON_AddObjectToObject(root, "type_bytes");
	if (!c || !b)
		return false;
	for (uint32_t t = 0; t < PT_TYPE_COUNT; t++)
		if (d->types[t].count && (!add_u64(c, pt_type_name(t), d->types[t].count) ||
					  !add_u64(b, pt_type_name(t), d->types[t].bytes)))
			return false;
	return true;
}

static bool json_hparams(const struct pt_gguf_desc *d, cJSON *root)
{
	cJSON *h = cJSON_AddObjectToObject(root, "hparams");
	if (!h)
		return false;
	for (unsigned i = 0; i < PT_GGUF_DESC_N_HPARAMS; i++)
		if (d->hparams[i] && !add_value(h, hparam_names[i], d->hparams[i]))
			return false;
	return true;
}

static bool json_tensors(const pt_gguf *g, cJSON *root)
{
	cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
	char name[PT_GGUF_MAX_NAME * 4 + 8];
	if (!arr)
		return false;
	for (uint64_t i = 0; i < pt_gguf_tensor_count(g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		cJSON *o = cJSON_CreateObject(), *shape;
		if (!o)
			return false;
		cJSON_AddItemToArray(arr, o);
		pt_gguf_display_str(t->name, name, sizeof name - 4);
		if (!cJSON_AddStringToObject(o, "name", name) ||
		    !cJSON_AddStringToObject(o, "type", pt_type_name(t->type)))
			return false;
		shape = cJSON_AddArrayToObject(o, "shape");
		for (uint32_t k = 0; shape && k < t->n_dims; k++) {
			char b[24];
			cJSON *n;
			snprintf(b, sizeof b, "%" PRIu64, t->ne[k]);
			n = cJSON_CreateRaw(b);
			if (!n)
				return false;
			cJSON_AddItemToArray(shape, n);
		}
		if (!shape || !add_u64(o, "offset", t->offset) || !add_u64(o, "bytes", t->nbytes))
			return false;
		if (pt_gguf_part_count(g) > 1 && !add_u64(o, "part", t->part + 1))
			return false;
	}
	return true;
}

/* A split model's parts (1-based, as in the file names); nothing for a single file. */
static bool json_parts(const pt_gguf *g, cJSON *root)
{
	if (pt_gguf_part_count(g) <= 1)
		return true;
	cJSON *arr = cJSON_AddArrayToObject(root, "parts");
	for (uint32_t i = 0; arr && i < pt_gguf_part_count(g); i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			return false;
		cJSON_AddItemToArray(arr, o);
		const char *path = pt_gguf_part_path(g, i);
		if (!add_u64(o, "part", i + 1) ||
		    (path && !cJSON_AddStringToObject(o, "path", path)) ||
		    !add_u64(o, "bytes", pt_gguf_part_size(g, i)) ||
		    !add_u64(o, "tensors", pt_gguf_part_tensor_count(g, i)))
			return false;
	}
	return arr != NULL;
}

static bool json_fill(const pt_gguf *g, const struct pt_gguf_desc *d, bool with_tensors,
		      cJSON *r)
{
	return add_str(r, "architecture", d->arch, SHOW_MAX) &&
	       add_str(r, "name", d->name, SHOW_MAX) && add_u64(r, "version", d->version) &&
	       add_u64(r, "alignment", d->alignment) && add_u64(r, "file_bytes", d->file_bytes) &&
	       add_u64(r, "data_offset", d->data_offset) && add_u64(r, "kv_count", d->kv_count) &&
	       add_u64(r, "tensor_count", d->tensor_count) &&
	       add_u64(r, "tensor_bytes", d->tensor_bytes) && add_u64(r, "n_layers", d->n_layers) &&
	       add_u64(r, "n_experts", d->n_experts) &&
	       add_u64(r, "n_experts_used", d->n_experts_used) &&
	       add_u64(r, "resident_bytes", d->resident_bytes) &&
	       add_u64(r, "expert_bytes", d->expert_bytes) &&
	       add_u64(r, "nextn_layers", d->n_nextn) && add_u64(r, "nextn_bytes", d->nextn_bytes) &&
	       add_u64(r, "expert_tensors", d->expert_tensors) &&
	       add_u64(r, "expert_layers", d->expert_layers) &&
	       add_u64(r, "bytes_per_expert", d->bytes_per_expert) &&
	       add_u64(r, "bytes_per_expert_min", d->bytes_per_expert_min) &&
	       json_types(d, r) && json_hparams(d, r) && json_tokenizer(d, r) &&
	       json_metadata(g, r) && json_parts(g, r) && (!with_tensors || json_tensors(g, r));
}

enum pt_status pt_gguf_desc_json(const pt_gguf *g, const struct pt_gguf_desc *d,
				 bool with_tensors, char **out, struct pt_error *err)
{
	cJSON *root = cJSON_CreateObject();
	char *text = NULL;
	*out = NULL;
	if (root && json_fill(g, d, with_tensors, root))
		text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (text) {
		*out = pt_strdup(text);
		cJSON_free(text);
	}
	if (!*out)
		return pt_error_set(err, PT_E_NOMEM, "out of memory rendering JSON");
	return PT_OK;
}
