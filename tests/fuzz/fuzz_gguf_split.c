/* fuzz_gguf_split.c - libFuzzer target for the split-model surface (gguf_split.c): the
 * gguf-split name parser, the split.* keys of a part, and the join of up to 4 parts (their
 * agreement checks and the merged tensor table).
 *
 * Input: a name line (up to the first '\n', at most 300 bytes), then parts, each a u32
 * little-endian length and that many bytes of GGUF.  Each part is opened from memory (fully
 * validated, as a file part would be), then the parts are joined and the merged table
 * walked: every tensor found by name, its bytes read through its own part. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

#define MAX_PARTS 4

static void walk(const pt_gguf *g)
{
	volatile uint32_t sink = 0;
	for (uint64_t i = 0; i < pt_gguf_tensor_count(g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		char name[80];
		snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
		sink += pt_gguf_find_tensor(g, name) == t;
		if (t->part >= pt_gguf_part_count(g))
			__builtin_trap();
		const uint8_t *base = pt_gguf_part_bases(g)[t->part];
		if (t->data != base + t->file_offset ||
		    t->file_offset + t->nbytes > pt_gguf_part_size(g, t->part))
			__builtin_trap();
		sink += t->data[0] + t->data[t->nbytes - 1];
	}
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
		sink += (uint32_t)pt_gguf_part_tensor_count(g, i);
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[301], first[400];
	size_t nl = 0;
	while (nl < size && nl < 300 && data[nl] != '\n')
		nl++;
	memcpy(name, data, nl);
	name[nl] = '\0';
	uint32_t no1, count;
	size_t pl;
	if (pt_gguf_split_name(name, &no1, &count, &pl) && pl > nl)
		__builtin_trap();
	pt_gguf_split_first_path(name, first, sizeof first);
	size_t pos = nl < size ? nl + 1 : nl;

	pt_gguf *parts[MAX_PARTS];
	const char *names[MAX_PARTS] = { "part 1", "part 2", "part 3", "part 4" };
	uint32_t n = 0;
	while (n < MAX_PARTS && size - pos >= 4) {
		uint32_t len = (uint32_t)data[pos] | (uint32_t)data[pos + 1] << 8 |
			       (uint32_t)data[pos + 2] << 16 | (uint32_t)data[pos + 3] << 24;
		pos += 4;
		if (len > size - pos)
			len = (uint32_t)(size - pos);
		struct pt_error e = { 0 };
		if (pt_gguf_open_memory(data + pos, len, &parts[n], &e) != PT_OK)
			break;
		struct pt_gguf_split_info in;
		pt_gguf_split_info(parts[n], &in, &e);
		n++;
		pos += len;
	}
	if (n == 0)
		return 0;
	pt_gguf *g = NULL;
	struct pt_error e = { 0 };
	if (pt_gguf_join(parts, n, names, &g, &e) == PT_OK) { /* closes every part on failure */
		walk(g);
		pt_gguf_close(g);
	}
	return 0;
}
