/* gguf_write.c - streaming GGUF v3 writer (see gguf.h for the call order).
 *
 * Owns the output fd, a 1 MiB write buffer and the metadata/tensor-info tables; tensor data
 * is never held: it passes through the buffer in whatever pieces the caller supplies, so
 * memory use is independent of model size.  Output matches ggml's writer: version 3,
 * metadata in insertion order (a re-set key keeps its place), tensor infos in add order,
 * offsets packed sequentially, zero padding to the alignment after the infos and after every
 * tensor including the last.  Anything the reader would reject is refused at the call that
 * introduces it (PT_E_INVALID), so a finished file always opens.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/limits.h"
#include "util/safefile.h"

#define WBUF_SIZE (1u << 20)

struct wkv {
	struct pt_str key;       /* owned copy (ptr from pt_strndup) */
	uint32_t type;
	uint8_t *payload;        /* serialized value after the type field */
	size_t n;
};

struct wtensor {
	struct pt_str name;      /* owned copy */
	uint32_t n_dims;
	uint64_t ne[4];
	uint32_t type;
	uint64_t nbytes;
	uint64_t offset;
};

enum wstate { W_META, W_DATA, W_DONE, W_FAILED };

struct pt_gguf_writer {
	int fd;                  /* out.fd while writing */
	char *path;
	struct pt_safe_file out; /* temp name until finish renames it over path (safefile.h) */
	uint32_t alignment;
	enum wstate state;
	struct wkv *kvs;
	uint64_t n_kv;
	uint64_t cap_kv;
	struct pt_gguf_index kv_index;
	struct wtensor *ts;
	uint64_t n_t;
	uint64_t cap_t;
	struct pt_gguf_index t_index;
	uint64_t data_size;      /* padded data-section size so far */
	uint64_t data_left;      /* tensor bytes still expected by write_data */
	uint64_t cur;            /* tensor receiving data */
	uint64_t cur_done;       /* bytes of it received */
	uint8_t *buf;
	size_t buf_len;
};

static const uint8_t zeros[256];

static struct pt_str wkv_key(const void *ctx, uint32_t i)
{
	return ((const pt_gguf_writer *)ctx)->kvs[i].key;
}

static struct pt_str wt_key(const void *ctx, uint32_t i)
{
	return ((const pt_gguf_writer *)ctx)->ts[i].name;
}

static enum pt_status fail(pt_gguf_writer *w, enum pt_status st)
{
	if (st != PT_OK && st != PT_E_INVALID)
		w->state = W_FAILED;
	return st;
}

static enum pt_status flush(pt_gguf_writer *w, struct pt_error *err)
{
	size_t done = 0;
	while (done < w->buf_len) {
		ssize_t r = write(w->fd, w->buf + done, w->buf_len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->state = W_FAILED;
			return pt_error_sys(err, PT_E_IO, r < 0 ? errno : EIO, "cannot write %s",
					    w->path);
		}
		done += (size_t)r;
	}
	w->buf_len = 0;
	return PT_OK;
}

static enum pt_status emit(pt_gguf_writer *w, const void *p, size_t n, struct pt_error *err)
{
	const uint8_t *b = p;
	while (n > 0) {
		size_t take = WBUF_SIZE - w->buf_len;
		if (take > n)
			take = n;
		memcpy(w->buf + w->buf_len, b, take);
		w->buf_len += take;
		b += take;
		n -= take;
		if (w->buf_len == WBUF_SIZE && flush(w, err) != PT_OK)
			return PT_E_IO;
	}
	return PT_OK;
}

static enum pt_status emit_zeros(pt_gguf_writer *w, uint64_t n, struct pt_error *err)
{
	while (n > 0) {
		size_t take = n > sizeof zeros ? sizeof zeros : (size_t)n;
		if (emit(w, zeros, take, err) != PT_OK)
			return PT_E_IO;
		n -= take;
	}
	return PT_OK;
}

static enum pt_status emit_u32(pt_gguf_writer *w, uint32_t v, struct pt_error *err)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	return emit(w, b, 4, err);
}

static void put_u64(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static enum pt_status emit_u64(pt_gguf_writer *w, uint64_t v, struct pt_error *err)
{
	uint8_t b[8];
	put_u64(b, v);
	return emit(w, b, 8, err);
}

static enum pt_status emit_str(pt_gguf_writer *w, struct pt_str s, struct pt_error *err)
{
	if (emit_u64(w, s.len, err) != PT_OK)
		return PT_E_IO;
	return emit(w, s.ptr, (size_t)s.len, err);
}

static uint64_t pad_to(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static enum pt_status check_meta_phase(pt_gguf_writer *w, const char *what,
				       struct pt_error *err)
{
	if (w->state == W_FAILED)
		return pt_error_set(err, PT_E_INVALID, "%s: the writer failed earlier", what);
	if (w->state != W_META)
		return pt_error_set(err, PT_E_INVALID, "%s after begin_data", what);
	return PT_OK;
}

/* Adds or replaces key with a serialized payload; takes ownership of payload. */
static enum pt_status put_kv(pt_gguf_writer *w, const char *key, uint32_t type,
			     uint8_t *payload, size_t n, struct pt_error *err)
{
	size_t klen = strlen(key);
	int64_t at;
	struct wkv *kv;
	enum pt_status st = check_meta_phase(w, "set metadata", err);
	if (st == PT_OK && (klen == 0 || klen > PT_GGUF_MAX_STRING))
		st = pt_error_set(err, PT_E_INVALID, "metadata key length %zu not in 1..%u", klen,
				  PT_GGUF_MAX_STRING);
	at = st == PT_OK ? pt_gguf_index_find(&w->kv_index, key, klen, wkv_key, w) : -1;
	if (st == PT_OK && at >= 0) {
		kv = &w->kvs[at];
		pt_free(kv->payload);
		kv->type = type;
		kv->payload = payload;
		kv->n = n;
		return PT_OK;
	}
	if (st == PT_OK && w->n_kv >= PT_GGUF_MAX_KV)
		st = pt_error_set(err, PT_E_INVALID, "more than %u metadata keys", PT_GGUF_MAX_KV);
	if (st == PT_OK && w->n_kv == w->cap_kv) {
		uint64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
		struct wkv *bigger = pt_reallocn(w->kvs, cap, sizeof *bigger);
		if (!bigger)
			st = pt_error_set(err, PT_E_NOMEM, "out of memory for metadata");
		else {
			w->kvs = bigger;
			w->cap_kv = cap;
		}
	}
	if (st == PT_OK)
		st = pt_gguf_index_grow(&w->kv_index, w->n_kv + 1, wkv_key, w, err);
	if (st == PT_OK && !(w->kvs[w->n_kv].key.ptr = pt_strndup(key, klen)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory for metadata");
	if (st != PT_OK) {
		pt_free(payload);
		return st;
	}
	kv = &w->kvs[w->n_kv];
	kv->key.len = klen;
	kv->type = type;
	kv->payload = payload;
	kv->n = n;
	pt_gguf_index_insert(&w->kv_index, (uint32_t)w->n_kv, wkv_key, w);
	w->n_kv++;
	return PT_OK;
}

static enum pt_status put_bytes(pt_gguf_writer *w, const char *key, uint32_t type,
				const void *bytes, size_t n, struct pt_error *err)
{
	uint8_t *p = pt_malloc(n);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for key '%s'", key);
	memcpy(p, bytes, n);
	return put_kv(w, key, type, p, n, err);
}

enum pt_status pt_gguf_writer_set_raw(pt_gguf_writer *w, const char *key,
				      enum pt_gguf_vtype type, const void *payload, size_t n,
				      struct pt_error *err)
{
	const uint8_t *b = payload;
	if ((unsigned)type >= PT_GGUF_VTYPE_COUNT || type == PT_GGUF_ARRAY)
		return pt_error_set(err, PT_E_INVALID, "key '%s': set_raw takes a scalar or string "
				    "type, not %u", key, (unsigned)type);
	if (type == PT_GGUF_STRING) {
		uint64_t len = 0;
		for (int i = 7; n >= 8 && i >= 0; i--)
			len = (len << 8) | b[i];
		if (n < 8 || len != n - 8 || len > PT_GGUF_MAX_STRING)
			return pt_error_set(err, PT_E_INVALID, "key '%s': raw string payload is "
					    "not a u64 length and that many bytes", key);
	} else if (n != pt_gguf_scalar_size(type)) {
		return pt_error_set(err, PT_E_INVALID, "key '%s': %zu payload bytes for type %s",
				    key, n, pt_gguf_vtype_name(type));
	}
	if (type == PT_GGUF_BOOL && b[0] > 1)
		return pt_error_set(err, PT_E_INVALID, "key '%s': bool payload %u", key, b[0]);
	if (strcmp(key, "general.alignment") == 0 &&
	    (type != PT_GGUF_U32 ||
	     (uint32_t)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24) != w->alignment))
		return pt_error_set(err, PT_E_INVALID, "general.alignment must be the u32 %u given "
				    "to pt_gguf_writer_create", w->alignment);
	return put_bytes(w, key, type, payload, n, err);
}

enum pt_status pt_gguf_writer_set_u32(pt_gguf_writer *w, const char *key, uint32_t v,
				      struct pt_error *err)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_U32, b, 4, err);
}

enum pt_status pt_gguf_writer_set_i32(pt_gguf_writer *w, const char *key, int32_t v,
				      struct pt_error *err)
{
	uint32_t u = (uint32_t)v;
	uint8_t b[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24) };
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_I32, b, 4, err);
}

enum pt_status pt_gguf_writer_set_u64(pt_gguf_writer *w, const char *key, uint64_t v,
				      struct pt_error *err)
{
	uint8_t b[8];
	put_u64(b, v);
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_U64, b, 8, err);
}

enum pt_status pt_gguf_writer_set_f32(pt_gguf_writer *w, const char *key, float v,
				      struct pt_error *err)
{
	uint32_t u;
	uint8_t b[4];
	memcpy(&u, &v, 4);
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(u >> (8 * i));
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_F32, b, 4, err);
}

enum pt_status pt_gguf_writer_set_bool(pt_gguf_writer *w, const char *key, bool v,
				       struct pt_error *err)
{
	uint8_t b = v ? 1 : 0;
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_BOOL, &b, 1, err);
}

enum pt_status pt_gguf_writer_set_str(pt_gguf_writer *w, const char *key, const char *v,
				      struct pt_error *err)
{
	size_t len = strlen(v);
	uint8_t *p;
	if (len > PT_GGUF_MAX_STRING)
		return pt_error_set(err, PT_E_INVALID, "key '%s': string of %zu bytes exceeds the "
				    "limit", key, len);
	p = pt_malloc(8 + len);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for key '%s'", key);
	put_u64(p, len);
	memcpy(p + 8, v, len);
	if (strcmp(key, "general.alignment") == 0) {
		pt_free(p);
		return pt_error_set(err, PT_E_INVALID, "general.alignment must be a u32");
	}
	return put_kv(w, key, PT_GGUF_STRING, p, 8 + len, err);
}

enum pt_status pt_gguf_writer_set_arr(pt_gguf_writer *w, const char *key,
				      enum pt_gguf_vtype elem, const void *data, uint64_t count,
				      struct pt_error *err)
{
	uint64_t esize = pt_gguf_scalar_size((uint32_t)elem), bytes;
	uint8_t *p;
	if (esize == 0)
		return pt_error_set(err, PT_E_INVALID, "key '%s': set_arr takes a numeric or bool "
				    "element type, not %s", key, pt_gguf_vtype_name(elem));
	if (count > PT_GGUF_MAX_ARRAY || strcmp(key, "general.alignment") == 0)
		return pt_error_set(err, PT_E_INVALID, "key '%s': array of %llu elements not "
				    "allowed", key, (unsigned long long)count);
	bytes = count * esize;
	if (elem == PT_GGUF_BOOL)
		for (uint64_t i = 0; i < count; i++)
			if (((const uint8_t *)data)[i] > 1)
				return pt_error_set(err, PT_E_INVALID, "key '%s': bool element "
						    "%llu is not 0 or 1", key,
						    (unsigned long long)i);
	p = pt_malloc((size_t)(12 + bytes));
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for key '%s'", key);
	p[0] = (uint8_t)elem;
	p[1] = p[2] = p[3] = 0;
	put_u64(p + 4, count);
	if (bytes)
		memcpy(p + 12, data, (size_t)bytes);
	return put_kv(w, key, PT_GGUF_ARRAY, p, (size_t)(12 + bytes), err);
}

enum pt_status pt_gguf_writer_set_arr_str(pt_gguf_writer *w, const char *key,
					  const char *const *strs, const uint64_t *lens,
					  uint64_t count, struct pt_error *err)
{
	uint64_t total = 12;
	uint8_t *p, *q;
	if (count > PT_GGUF_MAX_ARRAY || strcmp(key, "general.alignment") == 0)
		return pt_error_set(err, PT_E_INVALID, "key '%s': array of %llu elements not "
				    "allowed", key, (unsigned long long)count);
	for (uint64_t i = 0; i < count; i++) {
		uint64_t len = lens ? lens[i] : strlen(strs[i]);
		if (len > PT_GGUF_MAX_STRING || pt_add_overflow(total, 8 + len, &total) ||
		    total > SIZE_MAX)
			return pt_error_set(err, PT_E_INVALID, "key '%s': string %llu too long",
					    key, (unsigned long long)i);
	}
	p = pt_malloc((size_t)total);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for key '%s'", key);
	p[0] = PT_GGUF_STRING;
	p[1] = p[2] = p[3] = 0;
	put_u64(p + 4, count);
	q = p + 12;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t len = lens ? lens[i] : strlen(strs[i]);
		put_u64(q, len);
		if (len)
			memcpy(q + 8, strs[i], (size_t)len);
		q += 8 + len;
	}
	return put_kv(w, key, PT_GGUF_ARRAY, p, (size_t)total, err);
}

/* Name, dims, type and byte size, checked exactly as the reader will check them. */
static enum pt_status check_tensor(const char *name, uint32_t n_dims, const uint64_t *ne,
				   uint32_t type, uint64_t *nbytes, struct pt_error *err)
{
	const struct pt_type_traits *tr = pt_type_traits(type);
	size_t nlen = strlen(name);
	uint64_t nel = 1, row;
	if (nlen == 0 || nlen > PT_GGUF_MAX_NAME)
		return pt_error_set(err, PT_E_INVALID, "tensor name '%s' length %zu not in 1..%u",
				    name, nlen, PT_GGUF_MAX_NAME);
	if (n_dims < 1 || n_dims > PT_GGUF_MAX_DIMS)
		return pt_error_set(err, PT_E_INVALID, "tensor '%s': n_dims %u not in 1..4", name,
				    n_dims);
	if (!tr)
		return pt_error_set(err, PT_E_INVALID, "tensor '%s': unknown tensor type %u", name,
				    type);
	for (uint32_t d = 0; d < n_dims; d++)
		if (ne[d] == 0 || pt_mul_overflow(nel, ne[d], &nel) || nel > (uint64_t)INT64_MAX)
			return pt_error_set(err, PT_E_INVALID, "tensor '%s': dimension %u is 0 "
					    "or the element count overflows", name, d);
	if (pt_type_row_bytes(type, ne[0], &row) != 0 || pt_mul_overflow(row, nel / ne[0], nbytes))
		return pt_error_set(err, PT_E_INVALID, "tensor '%s': row length %llu is not a "
				    "multiple of the %s block size %u, or the size overflows",
				    name, (unsigned long long)ne[0], tr->name, tr->block_elems);
	return PT_OK;
}

enum pt_status pt_gguf_writer_add_tensor(pt_gguf_writer *w, const char *name, uint32_t n_dims,
					 const uint64_t *ne, uint32_t type,
					 struct pt_error *err)
{
	uint64_t nbytes = 0, end;
	struct wtensor *t;
	enum pt_status st = check_meta_phase(w, "add_tensor", err);
	if (st == PT_OK)
		st = check_tensor(name, n_dims, ne, type, &nbytes, err);
	if (st != PT_OK)
		return st;
	if (pt_gguf_index_find(&w->t_index, name, strlen(name), wt_key, w) >= 0)
		return pt_error_set(err, PT_E_INVALID, "duplicate tensor name '%s'", name);
	if (w->n_t >= PT_GGUF_MAX_TENSORS || pt_add_overflow(w->data_size, nbytes, &end) ||
	    end > UINT64_MAX - w->alignment)
		return pt_error_set(err, PT_E_INVALID, "tensor '%s': too many tensors or bytes",
				    name);
	if (w->n_t == w->cap_t) {
		uint64_t cap = w->cap_t ? 2 * w->cap_t : 64;
		struct wtensor *bigger = pt_reallocn(w->ts, cap, sizeof *bigger);
		if (!bigger)
			return pt_error_set(err, PT_E_NOMEM, "out of memory for tensor infos");
		w->ts = bigger;
		w->cap_t = cap;
	}
	st = pt_gguf_index_grow(&w->t_index, w->n_t + 1, wt_key, w, err);
	if (st != PT_OK)
		return st;
	t = &w->ts[w->n_t];
	memset(t, 0, sizeof *t);
	t->name.ptr = pt_strdup(name);
	if (!t->name.ptr)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for tensor infos");
	t->name.len = strlen(name);
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->type = type;
	t->nbytes = nbytes;
	t->offset = w->data_size;
	w->data_size = pad_to(end, w->alignment);
	w->data_left += nbytes;
	pt_gguf_index_insert(&w->t_index, (uint32_t)w->n_t, wt_key, w);
	w->n_t++;
	return PT_OK;
}

enum pt_status pt_gguf_writer_create(const char *path, uint32_t alignment,
				     pt_gguf_writer **out, struct pt_error *err)
{
	pt_gguf_writer *w;
	enum pt_status st = PT_OK;
	*out = NULL;
	if (alignment == 0)
		alignment = 32;
	if ((alignment & (alignment - 1)) != 0)
		return pt_error_set(err, PT_E_INVALID, "alignment %u is not a power of two",
				    alignment);
	w = pt_calloc(1, sizeof *w);
	if (!w)
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating %s", path);
	w->fd = -1;
	w->alignment = alignment;
	w->path = pt_strdup(path);
	w->buf = pt_malloc(WBUF_SIZE);
	if (!w->path || !w->buf)
		st = pt_error_set(err, PT_E_NOMEM, "out of memory creating %s", path);
	/* -o names an output: a link standing there is replaced on finish, never written
	 * through, and a failed write leaves no partial file (only the temp, removed) */
	if (st == PT_OK) {
		st = pt_safe_output(&w->out, path, err);
		w->fd = st == PT_OK ? w->out.fd : -1;
		w->out.drop_cache = true; /* a model file: mapped later, best read back */
	}
	if (st == PT_OK && alignment != 32)
		st = pt_gguf_writer_set_u32(w, "general.alignment", alignment, err);
	if (st != PT_OK) {
		pt_gguf_writer_destroy(w);
		return st;
	}
	*out = w;
	return PT_OK;
}

enum pt_status pt_gguf_writer_begin_data(pt_gguf_writer *w, struct pt_error *err)
{
	uint64_t pos = 24;
	enum pt_status st = check_meta_phase(w, "begin_data", err);
	if (st != PT_OK)
		return st;
	st = emit(w, "GGUF", 4, err);
	if (st == PT_OK)
		st = emit_u32(w, 3, err);
	if (st == PT_OK)
		st = emit_u64(w, w->n_t, err);
	if (st == PT_OK)
		st = emit_u64(w, w->n_kv, err);
	for (uint64_t i = 0; st == PT_OK && i < w->n_kv; i++) {
		st = emit_str(w, w->kvs[i].key, err);
		if (st == PT_OK)
			st = emit_u32(w, w->kvs[i].type, err);
		if (st == PT_OK)
			st = emit(w, w->kvs[i].payload, w->kvs[i].n, err);
		pos += 8 + w->kvs[i].key.len + 4 + w->kvs[i].n;
	}
	for (uint64_t i = 0; st == PT_OK && i < w->n_t; i++) {
		const struct wtensor *t = &w->ts[i];
		st = emit_str(w, t->name, err);
		if (st == PT_OK)
			st = emit_u32(w, t->n_dims, err);
		for (uint32_t d = 0; st == PT_OK && d < t->n_dims; d++)
			st = emit_u64(w, t->ne[d], err);
		if (st == PT_OK)
			st = emit_u32(w, t->type, err);
		if (st == PT_OK)
			st = emit_u64(w, t->offset, err);
		pos += 8 + t->name.len + 4 + 8ull * t->n_dims + 4 + 8;
	}
	if (st == PT_OK)
		st = emit_zeros(w, pad_to(pos, w->alignment) - pos, err);
	if (st != PT_OK)
		return fail(w, st);
	w->state = W_DATA;
	return PT_OK;
}

enum pt_status pt_gguf_writer_write_data(pt_gguf_writer *w, const void *bytes, size_t n,
					 struct pt_error *err)
{
	const uint8_t *b = bytes;
	if (w->state != W_DATA)
		return pt_error_set(err, PT_E_INVALID, "write_data %s", w->state == W_META
				    ? "before begin_data" : "after finish or a failure");
	if (n > w->data_left)
		return pt_error_set(err, PT_E_INVALID, "write_data: %zu bytes given, only %llu "
				    "tensor bytes remain", n, (unsigned long long)w->data_left);
	while (n > 0) {
		const struct wtensor *t = &w->ts[w->cur];
		uint64_t take = t->nbytes - w->cur_done;
		if (take > n)
			take = n;
		if (emit(w, b, (size_t)take, err) != PT_OK)
			return fail(w, PT_E_IO);
		b += take;
		n -= (size_t)take;
		w->data_left -= take;
		w->cur_done += take;
		if (w->cur_done == t->nbytes) {
			if (emit_zeros(w, pad_to(t->nbytes, w->alignment) - t->nbytes, err) != PT_OK)
				return fail(w, PT_E_IO);
			w->cur++;
			w->cur_done = 0;
		}
	}
	return PT_OK;
}

enum pt_status pt_gguf_writer_finish(pt_gguf_writer *w, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	if (w->state == W_META)
		st = pt_gguf_writer_begin_data(w, err);
	if (st != PT_OK)
		return st;
	if (w->state != W_DATA)
		return pt_error_set(err, PT_E_INVALID, "finish after finish or a failure");
	if (w->cur < w->n_t)
		return pt_error_set(err, PT_E_INVALID, "tensor '%s' got %llu of %llu bytes before "
				    "finish", w->ts[w->cur].name.ptr,
				    (unsigned long long)w->cur_done,
				    (unsigned long long)w->ts[w->cur].nbytes);
	if (flush(w, err) != PT_OK)
		return PT_E_IO;
	w->fd = -1;
	if (pt_safe_commit(&w->out, err) != PT_OK) { /* fsync, rename, fsync the directory */
		w->state = W_FAILED;
		return PT_E_IO;
	}
	w->state = W_DONE;
	return PT_OK;
}

void pt_gguf_writer_destroy(pt_gguf_writer *w)
{
	if (!w)
		return;
	pt_safe_abort(&w->out); /* closes and removes the temp unless finished */
	for (uint64_t i = 0; i < w->n_kv; i++) {
		pt_free((void *)w->kvs[i].key.ptr);
		pt_free(w->kvs[i].payload);
	}
	for (uint64_t i = 0; i < w->n_t; i++)
		pt_free((void *)w->ts[i].name.ptr);
	pt_free(w->kvs);
	pt_free(w->ts);
	pt_gguf_index_fini(&w->kv_index);
	pt_gguf_index_fini(&w->t_index);
	pt_free(w->buf);
	pt_free(w->path);
	pt_free(w);
}
