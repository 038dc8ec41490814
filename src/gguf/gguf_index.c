/* gguf_index.c - open-addressing name index for GGUF keys and tensor names (see
 * gguf_internal.h).  Files hold up to ~20000 tensors that the forward pass looks up by name at
 * load, and duplicate detection at open must not be quadratic. */
#include "gguf/gguf_internal.h"

#include <string.h>

#include "util/alloc.h"

static uint64_t hash_bytes(const char *p, uint64_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (uint64_t i = 0; i < len; i++) {
		h ^= (uint8_t)p[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t cap_for(uint64_t n)
{
	uint64_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

enum pt_status pt_gguf_index_init(struct pt_gguf_index *idx, uint64_t n, struct pt_error *err)
{
	uint64_t cap = cap_for(n);
	idx->slots = pt_calloc(cap, sizeof *idx->slots);
	idx->cap = idx->slots ? cap : 0;
	if (!idx->slots)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for a name index of %llu",
				    (unsigned long long)n);
	return PT_OK;
}

void pt_gguf_index_fini(struct pt_gguf_index *idx)
{
	pt_free(idx->slots);
	idx->slots = NULL;
	idx->cap = 0;
}

int64_t pt_gguf_index_find(const struct pt_gguf_index *idx, const char *name, uint64_t len,
			   pt_gguf_key_fn key_at, const void *ctx)
{
	uint64_t mask, pos;
	if (!idx->slots)
		return -1;
	mask = idx->cap - 1;
	pos = hash_bytes(name, len) & mask;
	for (;;) {
		uint32_t s = idx->slots[pos];
		struct pt_str k;
		if (s == 0)
			return -1;
		k = key_at(ctx, s - 1);
		if (k.len == len && memcmp(k.ptr, name, len) == 0)
			return (int64_t)(s - 1);
		pos = (pos + 1) & mask;
	}
}

int64_t pt_gguf_index_insert(struct pt_gguf_index *idx, uint32_t i, pt_gguf_key_fn key_at,
			     const void *ctx)
{
	struct pt_str name = key_at(ctx, i);
	uint64_t mask = idx->cap - 1;
	uint64_t pos = hash_bytes(name.ptr, name.len) & mask;
	for (;;) {
		uint32_t s = idx->slots[pos];
		struct pt_str k;
		if (s == 0) {
			idx->slots[pos] = i + 1;
			return -1;
		}
		k = key_at(ctx, s - 1);
		if (k.len == name.len && memcmp(k.ptr, name.ptr, name.len) == 0)
			return (int64_t)(s - 1);
		pos = (pos + 1) & mask;
	}
}

enum pt_status pt_gguf_index_grow(struct pt_gguf_index *idx, uint64_t n, pt_gguf_key_fn key_at,
				  const void *ctx, struct pt_error *err)
{
	struct pt_gguf_index bigger;
	enum pt_status st;
	if (idx->slots && 2 * n <= idx->cap)
		return PT_OK;
	st = pt_gguf_index_init(&bigger, n, err);
	if (st != PT_OK)
		return st;
	for (uint64_t p = 0; p < idx->cap; p++)
		if (idx->slots[p])
			pt_gguf_index_insert(&bigger, idx->slots[p] - 1, key_at, ctx);
	pt_gguf_index_fini(idx);
	*idx = bigger;
	return PT_OK;
}
