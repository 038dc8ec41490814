/* gguf_read.c - GGUF v2/v3 reader: maps the file read-only and validates every field before
 * anything is used (GGUF-AND-QUANTS.md 2.8), then serves metadata and tensors by index or by
 * name through hash indexes.  Owns the mapping, the fd and the kv/tensor tables.
 *
 * Policy decisions beyond ggml: BOOL values must be 0 or 1 (strict, per the spec); every
 * dimension must be >= 1 and n_dims 1..4 (ggml accepts 0); tensor names must be non-empty;
 * offsets must follow ggml's exact sequential layout.  Byte-swapped files are detected and
 * rejected, not converted.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/limits.h"

#define GGUF_MAGIC "GGUF"
#define DEFAULT_ALIGNMENT 32u
#define MIN_KV_BYTES 14     /* key len + 1 key byte + type + 1 payload byte */
#define MIN_TENSOR_BYTES 33 /* name len + 1 byte + n_dims + one dim + type + offset */

struct pt_gguf {
	const uint8_t *base;
	uint64_t size;
	int fd;         /* -1 for memory opens */
	char *path;     /* NULL for memory opens */
	bool mapped;    /* base is our mmap */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	uint64_t n_kv;
	uint64_t n_tensors;
	uint64_t avail;  /* bytes present at base: size, or less for a prefix open */
	struct pt_gguf_kv *kvs;
	struct pt_gguf_tensor *tensors;
	struct pt_gguf_index kv_index;
	struct pt_gguf_index tensor_index;
	/* A split model (gguf_split.c): this handle is part 0 (metadata, the merged tensor
	 * table); parts[0] == this handle, the others are owned and closed with it. */
	uint32_t n_parts;
	pt_gguf **parts;
	const uint8_t **part_bases;
	uint64_t total_size;
};

/* Bounded cursor: every test is written `n > size - pos`. */
struct cursor {
	const uint8_t *base;
	uint64_t size;  /* bytes present */
	uint64_t pos;
	const struct pt_gguf_limits *lim;
	uint64_t full;  /* the file's size (> size only for a prefix open) */
	bool hit_end;   /* a read needed bytes past size that the full file would have */
};

/* n bytes at pos are missing from the buffer; in a prefix open, notes whether the full
 * file would hold them (so the caller fetches more instead of refusing the file). */
static bool short_of(struct cursor *c, uint64_t n)
{
	if (n <= c->size - c->pos)
		return false;
	if (c->full > c->size && n <= c->full - c->pos)
		c->hit_end = true;
	return true;
}

struct pt_gguf_limits pt_gguf_default_limits(void)
{
	struct pt_gguf_limits l = { PT_GGUF_MAX_STRING, PT_GGUF_MAX_ARRAY, PT_GGUF_MAX_KV,
				    PT_GGUF_MAX_TENSORS };
	return l;
}

uint64_t pt_gguf_scalar_size(uint32_t vtype)
{
	static const uint8_t sizes[PT_GGUF_VTYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	return vtype < PT_GGUF_VTYPE_COUNT ? sizes[vtype] : 0;
}

const char *pt_gguf_vtype_name(enum pt_gguf_vtype t)
{
	static const char *const names[PT_GGUF_VTYPE_COUNT] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
		"u64", "i64", "f64",
	};
	return (unsigned)t < PT_GGUF_VTYPE_COUNT ? names[t] : "invalid";
}

static uint64_t rd_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t rd_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static enum pt_status need(struct cursor *c, uint64_t n, const char *what, struct pt_error *err)
{
	if (short_of(c, n))
		return pt_error_at(err, PT_E_FORMAT, c->pos,
				   "truncated file: %s needs %llu bytes, %llu left", what,
				   (unsigned long long)n, (unsigned long long)(c->size - c->pos));
	return PT_OK;
}

static enum pt_status get_u32(struct cursor *c, uint32_t *v, const char *what,
			      struct pt_error *err)
{
	enum pt_status st = need(c, 4, what, err);
	if (st != PT_OK)
		return st;
	*v = rd_u32(c->base + c->pos);
	c->pos += 4;
	return PT_OK;
}

static enum pt_status get_u64(struct cursor *c, uint64_t *v, const char *what,
			      struct pt_error *err)
{
	enum pt_status st = need(c, 8, what, err);
	if (st != PT_OK)
		return st;
	*v = rd_u64(c->base + c->pos);
	c->pos += 8;
	return PT_OK;
}

/* A gguf string: u64 length then bytes, bounded by the limit and by the file. */
static enum pt_status get_str(struct cursor *c, struct pt_str *s, const char *what,
			      struct pt_error *err)
{
	uint64_t at = c->pos, len;
	enum pt_status st = get_u64(c, &len, what, err);
	if (st != PT_OK)
		return st;
	if (len > c->lim->max_string)
		return pt_error_at(err, PT_E_LIMIT, at, "%s length %llu exceeds the limit %llu",
				   what, (unsigned long long)len,
				   (unsigned long long)c->lim->max_string);
	if (short_of(c, len))
		return pt_error_at(err, PT_E_FORMAT, at,
				   "%s length %llu runs past the end of the file", what,
				   (unsigned long long)len);
	s->ptr = (const char *)c->base + c->pos;
	s->len = len;
	c->pos += len;
	return PT_OK;
}

static struct pt_str kv_key_at(const void *ctx, uint32_t i)
{
	return ((const struct pt_gguf *)ctx)->kvs[i].key;
}

static struct pt_str tensor_key_at(const void *ctx, uint32_t i)
{
	return ((const struct pt_gguf *)ctx)->tensors[i].name;
}

static int key_len(const struct pt_str s)
{
	return s.len > 200 ? 200 : (int)s.len;
}

static enum pt_status check_header(struct cursor *c, pt_gguf *g, struct pt_error *err)
{
	uint32_t v;
	if (c->size < 4 && c->full >= 4) {
		c->hit_end = true;
		return pt_error_at(err, PT_E_FORMAT, 0, "truncated file: no magic yet");
	}
	if (c->size < 4 || memcmp(c->base, GGUF_MAGIC, 4) != 0)
		return pt_error_at(err, PT_E_FORMAT, 0, "bad magic: not a GGUF file");
	c->pos = 4;
	if (get_u32(c, &v, "header version", err) != PT_OK)
		return PT_E_FORMAT;
	if (v == 1)
		return pt_error_at(err, PT_E_UNSUPPORTED, 4,
				   "GGUF version 1 is obsolete (32-bit counts); convert the file");
	if (v != 0 && (v & 0xffffu) == 0)
		return pt_error_at(err, PT_E_UNSUPPORTED, 4,
				   "byte-swapped GGUF (version 0x%08x): big-endian files are not "
				   "supported", v);
	if (v != 2 && v != 3)
		return pt_error_at(err, PT_E_UNSUPPORTED, 4,
				   "GGUF version %u not supported (2 and 3 are)", v);
	g->version = v;
	if (get_u64(c, &g->n_tensors, "header tensor count", err) != PT_OK ||
	    get_u64(c, &g->n_kv, "header metadata count", err) != PT_OK)
		return PT_E_FORMAT;
	return PT_OK;
}

static enum pt_status check_counts(struct cursor *c, const pt_gguf *g, struct pt_error *err)
{
	uint64_t left = c->full - c->pos;
	if (g->n_tensors > c->lim->max_tensors)
		return pt_error_at(err, PT_E_LIMIT, 8, "tensor count %llu exceeds the limit %llu",
				   (unsigned long long)g->n_tensors,
				   (unsigned long long)c->lim->max_tensors);
	if (g->n_kv > c->lim->max_kv)
		return pt_error_at(err, PT_E_LIMIT, 16,
				   "metadata count %llu exceeds the limit %llu",
				   (unsigned long long)g->n_kv, (unsigned long long)c->lim->max_kv);
	if (g->n_tensors > left / MIN_TENSOR_BYTES)
		return pt_error_at(err, PT_E_FORMAT, 8,
				   "tensor count %llu too large for a %llu-byte file",
				   (unsigned long long)g->n_tensors, (unsigned long long)c->full);
	if (g->n_kv > left / MIN_KV_BYTES ||
	    g->n_kv * MIN_KV_BYTES > left - g->n_tensors * MIN_TENSOR_BYTES)
		return pt_error_at(err, PT_E_FORMAT, 16,
				   "metadata count %llu too large for a %llu-byte file",
				   (unsigned long long)g->n_kv, (unsigned long long)c->full);
	return PT_OK;
}

/* Array header and elements: nested arrays are rejected like ggml; BOOL elements strict. */
static enum pt_status parse_array(struct cursor *c, struct pt_gguf_kv *kv, struct pt_error *err)
{
	uint64_t at = c->pos, esize, count, bytes;
	uint32_t et;
	if (get_u32(c, &et, "array element type", err) != PT_OK)
		return PT_E_FORMAT;
	if (et == PT_GGUF_ARRAY)
		return pt_error_at(err, PT_E_UNSUPPORTED, at, "key '%.*s': nested arrays are not "
				   "supported", key_len(kv->key), kv->key.ptr);
	if (et >= PT_GGUF_VTYPE_COUNT)
		return pt_error_at(err, PT_E_FORMAT, at,
				   "key '%.*s': bad array element type %u", key_len(kv->key),
				   kv->key.ptr, et);
	at = c->pos;
	if (get_u64(c, &count, "array count", err) != PT_OK)
		return PT_E_FORMAT;
	if (count > c->lim->max_array)
		return pt_error_at(err, PT_E_LIMIT, at,
				   "key '%.*s': array count %llu exceeds the limit %llu",
				   key_len(kv->key), kv->key.ptr, (unsigned long long)count,
				   (unsigned long long)c->lim->max_array);
	esize = et == PT_GGUF_STRING ? 8 : pt_gguf_scalar_size(et);
	if (count > (c->size - c->pos) / esize) {
		if (c->full > c->size && count <= (c->full - c->pos) / esize)
			c->hit_end = true;
		return pt_error_at(err, PT_E_FORMAT, at,
				   "key '%.*s': array of %llu elements runs past the end of the file",
				   key_len(kv->key), kv->key.ptr, (unsigned long long)count);
	}
	kv->arr_type = (enum pt_gguf_vtype)et;
	kv->arr_count = count;
	kv->value = c->base + c->pos;
	kv->value_offset = c->pos;
	if (et == PT_GGUF_STRING) {
		for (uint64_t i = 0; i < count; i++) {
			struct pt_str s;
			enum pt_status st = get_str(c, &s, "array string", err);
			if (st != PT_OK)
				return st;
		}
		return PT_OK;
	}
	bytes = count * esize;
	if (et == PT_GGUF_BOOL)
		for (uint64_t i = 0; i < count; i++)
			if (c->base[c->pos + i] > 1)
				return pt_error_at(err, PT_E_FORMAT, c->pos + i,
						   "key '%.*s': bool element %llu is %u, not 0 or 1",
						   key_len(kv->key), kv->key.ptr,
						   (unsigned long long)i, c->base[c->pos + i]);
	c->pos += bytes;
	return PT_OK;
}

static enum pt_status parse_value(struct cursor *c, struct pt_gguf_kv *kv, struct pt_error *err)
{
	uint64_t at = c->pos;
	uint32_t t;
	struct pt_str s;
	if (get_u32(c, &t, "value type", err) != PT_OK)
		return PT_E_FORMAT;
	if (t >= PT_GGUF_VTYPE_COUNT)
		return pt_error_at(err, PT_E_FORMAT, at, "key '%.*s': bad value type %u",
				   key_len(kv->key), kv->key.ptr, t);
	kv->type = (enum pt_gguf_vtype)t;
	if (t == PT_GGUF_ARRAY)
		return parse_array(c, kv, err);
	kv->value = c->base + c->pos;
	kv->value_offset = c->pos;
	if (t == PT_GGUF_STRING)
		return get_str(c, &s, "string value", err);
	if (need(c, pt_gguf_scalar_size(t), "value", err) != PT_OK)
		return PT_E_FORMAT;
	if (t == PT_GGUF_BOOL && c->base[c->pos] > 1)
		return pt_error_at(err, PT_E_FORMAT, c->pos, "key '%.*s': bool value %u is not 0 "
				   "or 1", key_len(kv->key), kv->key.ptr, c->base[c->pos]);
	c->pos += pt_gguf_scalar_size(t);
	return PT_OK;
}

static enum pt_status parse_kvs(struct cursor *c, pt_gguf *g, struct pt_error *err)
{
	enum pt_status st;
	g->kvs = pt_calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kvs);
	if (!g->kvs)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for %llu metadata entries",
				    (unsigned long long)g->n_kv);
	st = pt_gguf_index_init(&g->kv_index, g->n_kv, err);
	if (st != PT_OK)
		return st;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct pt_gguf_kv *kv = &g->kvs[i];
		uint64_t at = c->pos;
		int64_t dup;
		st = get_str(c, &kv->key, "metadata key", err);
		if (st != PT_OK)
			return st;
		if (kv->key.len == 0)
			return pt_error_at(err, PT_E_FORMAT, at, "empty metadata key (entry %llu)",
					   (unsigned long long)i);
		dup = pt_gguf_index_insert(&g->kv_index, (uint32_t)i, kv_key_at, g);
		if (dup >= 0)
			return pt_error_at(err, PT_E_FORMAT, at, "duplicate metadata key '%.*s'",
					   key_len(kv->key), kv->key.ptr);
		st = parse_value(c, kv, err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

static enum pt_status check_alignment(pt_gguf *g, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, "general.alignment");
	uint32_t a;
	g->alignment = DEFAULT_ALIGNMENT;
	if (!kv)
		return PT_OK;
	if (kv->type != PT_GGUF_U32)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key 'general.alignment' has type %s, expected u32",
				   pt_gguf_vtype_name(kv->type));
	a = rd_u32(kv->value);
	if (a == 0 || (a & (a - 1)) != 0)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key 'general.alignment' is %u, not a power of two", a);
	g->alignment = a;
	return PT_OK;
}

/* Dims, type, block divisibility and byte size of one tensor (offset checked later). */
static enum pt_status check_shape(struct pt_gguf_tensor *t, uint64_t at, struct pt_error *err)
{
	const struct pt_type_traits *tr = pt_type_traits(t->type);
	int nl = key_len(t->name);
	uint64_t nel = 1, row, nbytes;
	if (!tr)
		return pt_error_at(err, PT_E_UNSUPPORTED, at,
				   "tensor '%.*s': unknown tensor type %u", nl, t->name.ptr,
				   t->type);
	for (uint32_t d = 0; d < PT_GGUF_MAX_DIMS; d++)
		if (pt_mul_overflow(nel, t->ne[d], &nel) || nel > (uint64_t)INT64_MAX)
			return pt_error_at(err, PT_E_FORMAT, at,
					   "tensor '%.*s': element count overflows", nl,
					   t->name.ptr);
	if (t->ne[0] % tr->block_elems != 0)
		return pt_error_at(err, PT_E_FORMAT, at,
				   "tensor '%.*s': row length %llu is not a multiple of the %s "
				   "block size %u", nl, t->name.ptr, (unsigned long long)t->ne[0],
				   tr->name, tr->block_elems);
	if (pt_type_row_bytes(t->type, t->ne[0], &row) != 0 ||
	    pt_mul_overflow(row, nel / t->ne[0], &nbytes))
		return pt_error_at(err, PT_E_FORMAT, at, "tensor '%.*s': byte size overflows",
				   nl, t->name.ptr);
	t->nbytes = nbytes;
	return PT_OK;
}

static enum pt_status parse_tensor(struct cursor *c, struct pt_gguf_tensor *t,
				   struct pt_error *err)
{
	uint64_t at = c->pos;
	enum pt_status st = get_str(c, &t->name, "tensor name", err);
	if (st != PT_OK)
		return st;
	if (t->name.len == 0)
		return pt_error_at(err, PT_E_FORMAT, at, "empty tensor name");
	if (t->name.len > PT_GGUF_MAX_NAME)
		return pt_error_at(err, PT_E_FORMAT, at,
				   "tensor name '%.*s' is %llu bytes, longer than %u",
				   key_len(t->name), t->name.ptr, (unsigned long long)t->name.len,
				   PT_GGUF_MAX_NAME);
	at = c->pos;
	if (get_u32(c, &t->n_dims, "tensor n_dims", err) != PT_OK)
		return PT_E_FORMAT;
	if (t->n_dims < 1 || t->n_dims > PT_GGUF_MAX_DIMS)
		return pt_error_at(err, PT_E_FORMAT, at, "tensor '%.*s': n_dims %u not in 1..%u",
				   key_len(t->name), t->name.ptr, t->n_dims, PT_GGUF_MAX_DIMS);
	for (uint32_t d = 0; d < PT_GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		at = c->pos;
		if (get_u64(c, &t->ne[d], "tensor dimension", err) != PT_OK)
			return PT_E_FORMAT;
		if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
			return pt_error_at(err, PT_E_FORMAT, at,
					   "tensor '%.*s': dimension %u is %llu, not in 1..2^63-1",
					   key_len(t->name), t->name.ptr, d,
					   (unsigned long long)t->ne[d]);
	}
	at = c->pos;
	if (get_u32(c, &t->type, "tensor type", err) != PT_OK)
		return PT_E_FORMAT;
	st = check_shape(t, at, err);
	if (st != PT_OK)
		return st;
	return get_u64(c, &t->offset, "tensor offset", err);
}

static enum pt_status parse_tensors(struct cursor *c, pt_gguf *g, struct pt_error *err)
{
	enum pt_status st;
	g->tensors = pt_calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
	if (!g->tensors)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for %llu tensor infos",
				    (unsigned long long)g->n_tensors);
	st = pt_gguf_index_init(&g->tensor_index, g->n_tensors, err);
	if (st != PT_OK)
		return st;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct pt_gguf_tensor *t = &g->tensors[i];
		uint64_t at = c->pos;
		st = parse_tensor(c, t, err);
		if (st != PT_OK)
			return st;
		if (pt_gguf_index_insert(&g->tensor_index, (uint32_t)i, tensor_key_at, g) >= 0)
			return pt_error_at(err, PT_E_FORMAT, at, "duplicate tensor name '%.*s'",
					   key_len(t->name), t->name.ptr);
	}
	return PT_OK;
}

static uint64_t pad_to(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Offsets must be ggml's exact sequential layout and every range inside the file. */
static enum pt_status check_layout(pt_gguf *g, uint64_t infos_end, struct pt_error *err)
{
	uint64_t expect = 0;
	g->data_offset = pad_to(infos_end, g->alignment);
	if (g->n_tensors == 0) {
		if (g->data_offset > g->size)
			g->data_offset = g->size;
		return PT_OK;
	}
	if (g->data_offset > g->size)
		return pt_error_at(err, PT_E_FORMAT, infos_end,
				   "data section starts at %llu, past the end of the %llu-byte file",
				   (unsigned long long)g->data_offset, (unsigned long long)g->size);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct pt_gguf_tensor *t = &g->tensors[i];
		int nl = key_len(t->name);
		uint64_t room = g->size - g->data_offset;
		if (t->offset % g->alignment != 0)
			return pt_error_at(err, PT_E_FORMAT, g->data_offset,
					   "tensor '%.*s': offset %llu is not a multiple of the "
					   "alignment %u", nl, t->name.ptr,
					   (unsigned long long)t->offset, g->alignment);
		if (t->offset != expect)
			return pt_error_at(err, PT_E_FORMAT, g->data_offset,
					   "tensor '%.*s': offset %llu, expected %llu (tensors must "
					   "be packed in info order)", nl, t->name.ptr,
					   (unsigned long long)t->offset, (unsigned long long)expect);
		if (t->offset > room || t->nbytes > room - t->offset)
			return pt_error_at(err, PT_E_FORMAT, g->data_offset + t->offset,
					   "tensor '%.*s': data (%llu bytes) runs past the end of "
					   "the file", nl, t->name.ptr, (unsigned long long)t->nbytes);
		t->file_offset = g->data_offset + t->offset;
		/* a prefix open has no data bytes yet past avail */
		t->data = t->file_offset + t->nbytes <= g->avail ? g->base + t->file_offset : NULL;
		/* cannot overflow: nbytes <= room < 2^64 - alignment */
		expect = pad_to(t->offset + t->nbytes, g->alignment);
	}
	return PT_OK;
}

static enum pt_status parse_cursor(struct cursor *cp, pt_gguf *g, struct pt_error *err)
{
	enum pt_status st = check_header(cp, g, err);
	if (st == PT_OK)
		st = check_counts(cp, g, err);
	if (st == PT_OK)
		st = parse_kvs(cp, g, err);
	if (st == PT_OK)
		st = check_alignment(g, err);
	if (st == PT_OK)
		st = parse_tensors(cp, g, err);
	if (st == PT_OK)
		st = check_layout(g, cp->pos, err);
	return st;
}

static enum pt_status parse(pt_gguf *g, const struct pt_gguf_limits *lim, bool *hit_end,
			    struct pt_error *err)
{
	struct cursor c = { g->base, g->avail, 0, lim, g->size, false };
	enum pt_status st = parse_cursor(&c, g, err);
	if (hit_end)
		*hit_end = c.hit_end;
	return st;
}

void pt_gguf_close(pt_gguf *g)
{
	if (!g)
		return;
	for (uint32_t i = 1; i < g->n_parts; i++)
		pt_gguf_close(g->parts[i]);
	pt_free(g->parts);
	pt_free(g->part_bases);
	pt_gguf_index_fini(&g->kv_index);
	pt_gguf_index_fini(&g->tensor_index);
	pt_free(g->kvs);
	pt_free(g->tensors);
	if (g->mapped)
		munmap((void *)g->base, g->size);
	if (g->fd >= 0)
		close(g->fd);
	pt_free(g->path);
	pt_free(g);
}

enum pt_status pt_gguf_open_memory_limits(const void *data, size_t size,
					  const struct pt_gguf_limits *lim, pt_gguf **out,
					  struct pt_error *err)
{
	struct pt_gguf_limits def = pt_gguf_default_limits();
	pt_gguf *g;
	enum pt_status st;
	*out = NULL;
	g = pt_calloc(1, sizeof *g);
	if (!g)
		return pt_error_set(err, PT_E_NOMEM, "out of memory opening GGUF");
	g->fd = -1;
	g->base = data;
	g->size = size;
	g->avail = size;
	st = parse(g, lim ? lim : &def, NULL, err);
	if (st != PT_OK) {
		pt_gguf_close(g);
		return st;
	}
	*out = g;
	return PT_OK;
}

enum pt_status pt_gguf_open_memory(const void *data, size_t size, pt_gguf **out,
				   struct pt_error *err)
{
	return pt_gguf_open_memory_limits(data, size, NULL, out, err);
}

static enum pt_status map_file(pt_gguf *g, const char *path, struct pt_error *err)
{
	struct stat st;
	void *p;
	g->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
	if (g->fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open %s", path);
	if (fstat(g->fd, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot stat %s", path);
	if (!S_ISREG(st.st_mode))
		return pt_error_set(err, PT_E_IO, "%s is not a regular file", path);
	g->size = (uint64_t)st.st_size;
	g->avail = g->size;
	if (g->size == 0) {
		g->base = (const uint8_t *)"";
		return PT_OK;
	}
	p = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, g->fd, 0);
	if (p == MAP_FAILED)
		return pt_error_sys(err, PT_E_IO, errno, "cannot map %s", path);
	g->base = p;
	g->mapped = true;
	return PT_OK;
}

enum pt_status pt_gguf_open_file(const char *path, pt_gguf **out, struct pt_error *err)
{
	struct pt_gguf_limits lim = pt_gguf_default_limits();
	pt_gguf *g;
	enum pt_status st;
	*out = NULL;
	g = pt_calloc(1, sizeof *g);
	if (!g)
		return pt_error_set(err, PT_E_NOMEM, "out of memory opening %s", path);
	g->fd = -1;
	g->path = pt_strdup(path);
	st = g->path ? map_file(g, path, err)
		     : pt_error_set(err, PT_E_NOMEM, "out of memory opening %s", path);
	if (st == PT_OK)
		st = parse(g, &lim, NULL, err);
	if (st != PT_OK) {
		pt_gguf_close(g);
		return st;
	}
	*out = g;
	return PT_OK;
}

uint32_t pt_gguf_version(const pt_gguf *g) { return g->version; }
uint64_t pt_gguf_file_size(const pt_gguf *g) { return g->n_parts > 1 ? g->total_size : g->size; }
uint32_t pt_gguf_alignment(const pt_gguf *g) { return g->alignment; }
uint64_t pt_gguf_data_offset(const pt_gguf *g) { return g->data_offset; }
const uint8_t *pt_gguf_base(const pt_gguf *g) { return g->base; }
int pt_gguf_fd(const pt_gguf *g) { return g->fd; }
const char *pt_gguf_path(const pt_gguf *g) { return g->path; }
uint64_t pt_gguf_kv_count(const pt_gguf *g) { return g->n_kv; }
uint64_t pt_gguf_tensor_count(const pt_gguf *g) { return g->n_tensors; }

const struct pt_gguf_kv *pt_gguf_kv_at(const pt_gguf *g, uint64_t i)
{
	return i < g->n_kv ? &g->kvs[i] : NULL;
}

const struct pt_gguf_tensor *pt_gguf_tensor_at(const pt_gguf *g, uint64_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct pt_gguf_kv *pt_gguf_find_kv(const pt_gguf *g, const char *key)
{
	int64_t i = pt_gguf_index_find(&g->kv_index, key, strlen(key), kv_key_at, g);
	return i < 0 ? NULL : &g->kvs[i];
}

const struct pt_gguf_tensor *pt_gguf_find_tensor(const pt_gguf *g, const char *name)
{
	int64_t i = pt_gguf_index_find(&g->tensor_index, name, strlen(name), tensor_key_at, g);
	return i < 0 ? NULL : &g->tensors[i];
}

/* ---- split models: the parts' own fields, and the merge ---------------------------- */

uint32_t pt_gguf_part_count(const pt_gguf *g) { return g->n_parts > 1 ? g->n_parts : 1; }

static const pt_gguf *part_of(const pt_gguf *g, uint32_t i)
{
	return g->n_parts > 1 && i < g->n_parts ? g->parts[i] : g;
}

const char *pt_gguf_part_path(const pt_gguf *g, uint32_t i) { return part_of(g, i)->path; }
int pt_gguf_part_fd(const pt_gguf *g, uint32_t i) { return part_of(g, i)->fd; }
uint64_t pt_gguf_part_size(const pt_gguf *g, uint32_t i) { return part_of(g, i)->size; }
const uint8_t *pt_gguf_part_base(const pt_gguf *g, uint32_t i) { return part_of(g, i)->base; }
uint64_t pt_gguf_part_data_offset(const pt_gguf *g, uint32_t i)
{
	return part_of(g, i)->data_offset;
}
uint64_t pt_gguf_part_tensor_count(const pt_gguf *g, uint32_t i)
{
	if (g->n_parts <= 1)
		return i == 0 ? g->n_tensors : 0;
	uint64_t n = 0; /* part 0's own table was replaced by the merged one */
	for (uint64_t t = 0; t < g->n_tensors; t++)
		n += g->tensors[t].part == i;
	return n;
}
const uint8_t *const *pt_gguf_part_bases(const pt_gguf *g)
{
	return g->n_parts > 1 ? g->part_bases : &g->base;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* Pages of [p, p + len) in the page cache, counted by mincore in windows of WIN pages. */
#define POP_WIN 65536u
static uint64_t resident_pages(const uint8_t *p, size_t len, unsigned char *vec, size_t page)
{
	uint64_t n = 0;
	for (size_t off = 0; off < len; off += (size_t)POP_WIN * page) {
		const size_t w = len - off < (size_t)POP_WIN * page ? len - off : (size_t)POP_WIN * page;
		const size_t np = (w + page - 1) / page;
		if (mincore((void *)(p + off), w, vec) != 0)
			return 0;
		for (size_t i = 0; i < np; i++)
			n += vec[i] & 1;
	}
	return n;
}

bool pt_gguf_populate(const pt_gguf *g, unsigned min_resident_pct)
{
	const long pg = sysconf(_SC_PAGESIZE);
	unsigned char *vec = pt_malloc(POP_WIN);
	bool ok = vec != NULL && pg > 0;
	for (uint32_t i = 0; ok && i < pt_gguf_part_count(g); i++) {
		const pt_gguf *p = part_of(g, i);
		if (!p->mapped || !p->size)
			continue;
		const uint64_t pages = (p->size + (uint64_t)pg - 1) / (uint64_t)pg;
		if (resident_pages(p->base, (size_t)p->size, vec, (size_t)pg) * 100 <
		    pages * min_resident_pct)
			ok = false;
		else if (madvise((void *)p->base, (size_t)p->size, MADV_POPULATE_READ) != 0)
			ok = false;
	}
	pt_free(vec);
	return ok;
}

/* madvise(advice) over every mapped part; false when the kernel refused any. */
static bool advise_parts(const pt_gguf *g, int advice)
{
	bool ok = true;
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++) {
		const pt_gguf *p = part_of(g, i);
		if (p->mapped && p->size && madvise((void *)p->base, (size_t)p->size, advice))
			ok = false;
	}
	return ok;
}

bool pt_gguf_advise_huge(const pt_gguf *g)
{
	return advise_parts(g, MADV_HUGEPAGE);
}

bool pt_gguf_advise_random(const pt_gguf *g)
{
	return advise_parts(g, MADV_RANDOM);
}

/* The mapped part holding [ptr, ptr + len), or NULL. */
static const pt_gguf *part_holding(const pt_gguf *g, uintptr_t a, size_t len)
{
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++) {
		const pt_gguf *p = part_of(g, i);
		const uintptr_t base = (uintptr_t)p->base;
		if (p->mapped && a >= base && a - base < p->size && len <= p->size - (a - base))
			return p;
	}
	return NULL;
}

bool pt_gguf_advise_read_whole(const pt_gguf *g, const void *ptr, size_t len)
{
	const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)ptr;
	if (!part_holding(g, a, len))
		return false;
	/* the pages the range touches, partial ones included: its reads fault them all */
	const uintptr_t lo = a & ~(pg - 1), hi = (a + len + pg - 1) & ~(pg - 1);
	return madvise((void *)lo, hi - lo, MADV_NORMAL) == 0 &&
	       madvise((void *)lo, hi - lo, MADV_WILLNEED) == 0;
}

bool pt_gguf_release(const pt_gguf *g, const void *ptr, size_t len)
{
	const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)ptr;
	const pt_gguf *p = part_holding(g, a, len);
	if (!p)
		return false;
	const uintptr_t base = (uintptr_t)p->base;
	const uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = (a + len) & ~(pg - 1);
	if (hi <= lo)
		return true;
	bool ok = madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0;
	if (p->fd >= 0)
		ok = posix_fadvise(p->fd, (off_t)(lo - base), (off_t)(hi - lo),
				   POSIX_FADV_DONTNEED) == 0 && ok;
	return ok;
}

enum pt_status pt_gguf_merge_parts(pt_gguf **parts, uint32_t n, const char *const *names,
				   struct pt_error *err)
{
	pt_gguf *g = parts[0];
	uint64_t total = 0, size = 0;
	for (uint32_t i = 0; i < n; i++) {
		total += parts[i]->n_tensors; /* each <= PT_GGUF_MAX_TENSORS: no overflow */
		size += parts[i]->size;
	}
	if (total > PT_GGUF_MAX_TENSORS)
		return pt_error_set(err, PT_E_LIMIT, "split model: %llu tensors exceed the limit %u",
				    (unsigned long long)total, PT_GGUF_MAX_TENSORS);
	struct pt_gguf_tensor *all = pt_calloc(total ? total : 1, sizeof *all);
	pt_gguf **own = pt_calloc(n, sizeof *own);
	const uint8_t **bases = pt_calloc(n, sizeof *bases);
	struct pt_gguf_index idx = { 0 };
	enum pt_status st = (all && own && bases)
				    ? pt_gguf_index_init(&idx, total, err)
				    : pt_error_set(err, PT_E_NOMEM, "out of memory joining a split model");
	uint64_t k = 0;
	/* the index's key function reads g->tensors: point it at the merged table while filling */
	struct pt_gguf_tensor *mine = g->tensors;
	g->tensors = all;
	for (uint32_t i = 0; st == PT_OK && i < n; i++) {
		for (uint64_t t = 0; st == PT_OK && t < parts[i]->n_tensors; t++, k++) {
			all[k] = (i == 0 ? mine : parts[i]->tensors)[t];
			all[k].part = i;
			int64_t dup = pt_gguf_index_insert(&idx, (uint32_t)k, tensor_key_at, g);
			if (dup >= 0)
				st = pt_error_set(err, PT_E_FORMAT,
						  "split model: tensor '%.*s' is in %s and again in %s",
						  key_len(all[k].name), all[k].name.ptr,
						  names[all[dup].part], names[i]);
		}
	}
	if (st != PT_OK) {
		g->tensors = mine;
		pt_gguf_index_fini(&idx);
		pt_free(all);
		pt_free(own);
		pt_free(bases);
		return st;
	}
	pt_free(mine);
	pt_gguf_index_fini(&g->tensor_index);
	g->tensor_index = idx;
	g->n_tensors = total;
	for (uint32_t i = 0; i < n; i++) {
		own[i] = parts[i];
		bases[i] = parts[i]->base;
	}
	g->parts = own;
	g->part_bases = bases;
	g->n_parts = n;
	g->total_size = size;
	return PT_OK;
}

bool pt_str_eq(struct pt_str s, const char *cstr)
{
	size_t n = strlen(cstr);
	return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

enum pt_status pt_gguf_open_prefix(const void *data, size_t avail, uint64_t file_size,
				   pt_gguf **out, bool *need_more, struct pt_error *err)
{
	struct pt_gguf_limits lim = pt_gguf_default_limits();
	pt_gguf *g;
	enum pt_status st;
	*out = NULL;
	*need_more = false;
	if (avail > file_size)
		return pt_error_set(err, PT_E_INVALID, "gguf prefix longer than the file");
	g = pt_calloc(1, sizeof *g);
	if (!g)
		return pt_error_set(err, PT_E_NOMEM, "out of memory opening GGUF");
	g->fd = -1;
	g->base = data;
	g->size = file_size;
	g->avail = avail;
	st = parse(g, &lim, need_more, err);
	if (st != PT_OK) {
		pt_gguf_close(g);
		return st;
	}
	*out = g;
	return PT_OK;
}
