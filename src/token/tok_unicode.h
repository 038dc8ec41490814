/* tok_unicode.h - code point classes and UTF-8 handling exactly as llama.cpp's unicode.cpp
 * does them (flags from the generated table tok_unicode_data.c). */
#ifndef PT_TOKEN_TOK_UNICODE_H
#define PT_TOKEN_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
	PT_UF_UNDEFINED = 0x1,
	PT_UF_NUMBER = 0x2,
	PT_UF_LETTER = 0x4,
	PT_UF_SEPARATOR = 0x8,
	PT_UF_MARK = 0x10,
	PT_UF_PUNCT = 0x20,
	PT_UF_SYMBOL = 0x40,
	PT_UF_CONTROL = 0x80,
	PT_UF_WHITESPACE = 0x100,
};

struct pt_tok_urange {
	uint32_t start;
	uint16_t flags;
};
extern const struct pt_tok_urange pt_tok_uranges[];
extern const uint32_t pt_tok_uranges_count;

/* Flags of a code point; code points past U+10FFFF are UNDEFINED. */
uint16_t pt_tok_uflags(uint32_t cp);
/* Decodes one code point at s[*off] the way llama.cpp does: a malformed or truncated
 * sequence yields U+FFFD and advances one byte.  No overlong/surrogate checks. */
uint32_t pt_tok_utf8_next(const uint8_t *s, size_t len, size_t *off);
/* Encodes cp (any value < 2^21) as 1-4 bytes into out; returns the count. */
size_t pt_tok_utf8_put(uint32_t cp, uint8_t out[4]);
/* Byte length of a UTF-8 sequence from its lead byte (1 for continuation bytes). */
size_t pt_tok_utf8_len(uint8_t lead);
/* GPT-2 byte <-> code point map. */
uint32_t pt_tok_byte_to_cp(uint8_t b);
int pt_tok_cp_to_byte(uint32_t cp); /* -1 when cp is not in the map */

#endif
