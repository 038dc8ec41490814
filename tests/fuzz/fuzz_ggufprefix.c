/* fuzz_ggufprefix.c - libFuzzer target for the GGUF reader's prefix mode (pt_gguf_open_prefix,
 * used by `particle pull` to refuse a wrong file from its first bytes).  Properties: a prefix
 * of a file the full reader accepts is never refused (only "need more"); a prefix the
 * reader refuses belongs to a file the full reader refuses too; a longer prefix of an
 * accepted one is accepted.  The first two input bytes pick the prefix length. */
#include <stdint.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pt_gguf *full = NULL, *pre = NULL;
	bool more = false, more2 = false;
	if (size < 2)
		return 0;
	size_t cut = ((size_t)data[0] | (size_t)data[1] << 8) % (size + 1);
	bool full_ok = pt_gguf_open_memory(data, size, &full, NULL) == PT_OK;
	bool pre_ok = pt_gguf_open_prefix(data, cut, size, &pre, &more, NULL) == PT_OK;
	if (full_ok && !pre_ok && !more)
		__builtin_trap(); /* a valid file refused from its prefix */
	if (!full_ok && pre_ok && cut == size)
		__builtin_trap(); /* the whole file accepted by one mode only */
	if (pre_ok) {
		size_t longer = cut + (size - cut) / 2;
		pt_gguf *p2 = NULL;
		if (pt_gguf_open_prefix(data, longer, size, &p2, &more2, NULL) != PT_OK)
			__builtin_trap(); /* accepted, then refused with more bytes */
		if (pt_gguf_data_offset(p2) != pt_gguf_data_offset(pre))
			__builtin_trap();
		pt_gguf_close(p2);
	}
	/* a declared size beyond the bytes: never reads past them */
	pt_gguf *p3 = NULL;
	if (pt_gguf_open_prefix(data, size, (uint64_t)size + cut * 4096, &p3, &more2, NULL) == PT_OK)
		pt_gguf_close(p3);
	pt_gguf_close(pre);
	pt_gguf_close(full);
	return 0;
}
