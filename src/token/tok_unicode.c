/* tok_unicode.c - code point flags, llama.cpp-compatible UTF-8 decoding and the GPT-2
 * byte-to-unicode map used by byte-level BPE. */
#include "token/tok_unicode.h"

uint16_t pt_tok_uflags(uint32_t cp)
{
	if (cp >= 0x110000)
		return PT_UF_UNDEFINED;
	uint32_t lo = 0, hi = pt_tok_uranges_count; /* last entry with start <= cp */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (pt_tok_uranges[mid].start <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return pt_tok_uranges[lo].flags;
}

size_t pt_tok_utf8_len(uint8_t lead)
{
	static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
	return lookup[lead >> 4];
}

static int is_cont(const uint8_t *s, size_t len, size_t i)
{
	return i < len && (s[i] & 0xC0) == 0x80;
}

uint32_t pt_tok_utf8_next(const uint8_t *s, size_t len, size_t *off)
{
	size_t i = *off;
	uint8_t c = s[i];
	if (!(c & 0x80)) {
		*off = i + 1;
		return c;
	}
	if ((c & 0x40) && !(c & 0x20) && is_cont(s, len, i + 1)) {
		*off = i + 2;
		return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
	}
	if ((c & 0x60) == 0x60 && !(c & 0x10) && is_cont(s, len, i + 1) &&
	    is_cont(s, len, i + 2)) {
		*off = i + 3;
		return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
		       (s[i + 2] & 0x3F);
	}
	if ((c & 0x70) == 0x70 && !(c & 0x08) && is_cont(s, len, i + 1) &&
	    is_cont(s, len, i + 2) && is_cont(s, len, i + 3)) {
		uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
			      ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
		/* llama.cpp throws while re-encoding code points past U+10FFFF; we map them to
		 * U+FFFD (one byte consumed) like any other malformed sequence instead. */
		if (cp <= 0x10FFFF) {
			*off = i + 4;
			return cp;
		}
	}
	*off = i + 1;
	return 0xFFFD;
}

size_t pt_tok_utf8_put(uint32_t cp, uint8_t out[4])
{
	if (cp <= 0x7F) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp <= 0x7FF) {
		out[0] = (uint8_t)(0xC0 | ((cp >> 6) & 0x1F));
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp <= 0xFFFF) {
		out[0] = (uint8_t)(0xE0 | ((cp >> 12) & 0x0F));
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

/* Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves; the other 68, in increasing
 * order, to U+0100, U+0101, ... */
static int byte_is_direct(unsigned b)
{
	return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t pt_tok_byte_to_cp(uint8_t b)
{
	if (byte_is_direct(b))
		return b;
	uint32_t n = 0;
	for (unsigned i = 0; i < b; i++)
		n += !byte_is_direct(i);
	return 256 + n;
}

int pt_tok_cp_to_byte(uint32_t cp)
{
	if (cp < 256)
		return byte_is_direct(cp) ? (int)cp : -1;
	if (cp >= 256 + 68)
		return -1;
	uint32_t n = 0;
	for (unsigned b = 0; b < 256; b++) {
		if (byte_is_direct(b))
			continue;
		if (n++ == cp - 256)
			return (int)b;
	}
	return -1;
}
