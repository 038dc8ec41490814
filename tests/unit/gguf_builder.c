/* gguf_builder.c - see gguf_builder.h. */
#include "gguf_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

void gb_free(struct gb *b)
{
	pt_free(b->p);
	memset(b, 0, sizeof *b);
}

void gb_bytes(struct gb *b, const void *src, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		b->p = pt_realloc(b->p, cap);
		if (!b->p) {
			fprintf(stderr, "gguf_builder: out of memory\n");
			exit(2);
		}
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, src, n);
	b->n += n;
}

void gb_u8(struct gb *b, uint8_t v)
{
	gb_bytes(b, &v, 1);
}

void gb_put_u32(struct gb *b, size_t pos, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b->p[pos + i] = (uint8_t)(v >> (8 * i));
}

void gb_put_u64(struct gb *b, size_t pos, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b->p[pos + i] = (uint8_t)(v >> (8 * i));
}

void gb_u32(struct gb *b, uint32_t v)
{
	gb_zeros(b, 4);
	gb_put_u32(b, b->n - 4, v);
}

void gb_u64(struct gb *b, uint64_t v)
{
	gb_zeros(b, 8);
	gb_put_u64(b, b->n - 8, v);
}

void gb_zeros(struct gb *b, size_t n)
{
	static const uint8_t z[64];
	while (n > 0) {
		size_t k = n > sizeof z ? sizeof z : n;
		gb_bytes(b, z, k);
		n -= k;
	}
}

void gb_str(struct gb *b, const char *s)
{
	gb_u64(b, strlen(s));
	gb_bytes(b, s, strlen(s));
}

void gb_pad(struct gb *b, size_t align)
{
	gb_zeros(b, (align - b->n % align) % align);
}

void gb_header(struct gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	gb_bytes(b, "GGUF", 4);
	gb_u32(b, version);
	gb_u64(b, n_tensors);
	gb_u64(b, n_kv);
}

void gb_kv_u32(struct gb *b, const char *key, uint32_t v)
{
	gb_str(b, key);
	gb_u32(b, 4);
	gb_u32(b, v);
}

void gb_kv_str(struct gb *b, const char *key, const char *v)
{
	gb_str(b, key);
	gb_u32(b, 8);
	gb_str(b, v);
}

void gb_tensor(struct gb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
	       uint32_t type, uint64_t offset)
{
	gb_str(b, name);
	gb_u32(b, n_dims);
	for (uint32_t d = 0; d < n_dims; d++)
		gb_u64(b, ne[d]);
	gb_u32(b, type);
	gb_u64(b, offset);
}
