/* gguf_builder.h - test-side byte builder for hand-made (usually corrupt) GGUF files.  It
 * writes exactly the bytes asked for, with no validation, so each test can break one rule. */
#ifndef PT_TEST_GGUF_BUILDER_H
#define PT_TEST_GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

struct gb {
	uint8_t *p;
	size_t n;
	size_t cap;
};

void gb_free(struct gb *b);
void gb_bytes(struct gb *b, const void *src, size_t n);
void gb_u8(struct gb *b, uint8_t v);
void gb_u32(struct gb *b, uint32_t v);
void gb_u64(struct gb *b, uint64_t v);
void gb_zeros(struct gb *b, size_t n);
void gb_str(struct gb *b, const char *s);               /* u64 length + bytes */
void gb_pad(struct gb *b, size_t align);                /* zeros to a multiple of align */
void gb_header(struct gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
void gb_kv_u32(struct gb *b, const char *key, uint32_t v);
void gb_kv_str(struct gb *b, const char *key, const char *v);
/* Tensor info with n_dims dims from ne. */
void gb_tensor(struct gb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
	       uint32_t type, uint64_t offset);
/* Overwrites 4/8 bytes at pos (for patching a valid file). */
void gb_put_u32(struct gb *b, size_t pos, uint32_t v);
void gb_put_u64(struct gb *b, size_t pos, uint64_t v);

#endif
