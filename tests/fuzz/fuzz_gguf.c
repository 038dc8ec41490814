/* fuzz_gguf.c - libFuzzer target for the GGUF reader and the inspect path: open the bytes,
 * and when they validate, describe them, render text and JSON (with tensors), and walk every
 * accessor so the reader's "checked once, trusted after" invariant is exercised. */
#include <stdint.h>
#include <stdio.h>

#include "gguf/gguf.h"
#include "gguf/gguf_describe.h"
#include "util/alloc.h"

static void touch_values(const pt_gguf *g)
{
	volatile uint32_t sink = 0;
	for (uint64_t i = 0; i < pt_gguf_kv_count(g); i++) {
		const struct pt_gguf_kv *kv = pt_gguf_kv_at(g, i);
		if (kv->type != PT_GGUF_ARRAY || kv->arr_count == 0)
			continue;
		if (kv->arr_type == PT_GGUF_STRING) {
			struct pt_str *s = pt_mallocn(kv->arr_count, sizeof *s);
			if (s) {
				pt_gguf_arr_strs(kv, s);
				sink += (uint32_t)s[kv->arr_count - 1].len;
				pt_free(s);
			}
		} else {
			sink += pt_gguf_arr_u32(kv, kv->arr_count - 1);
			sink += (uint32_t)pt_gguf_arr_i32(kv, 0);
			sink += pt_gguf_arr_f32(kv, 0) > 0;
		}
	}
	for (uint64_t i = 0; i < pt_gguf_tensor_count(g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		char name[80];
		snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
		sink += pt_gguf_find_tensor(g, name) != NULL;
		sink += t->data[0] + t->data[t->nbytes - 1];
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_error err = { 0 };
	struct pt_gguf_desc d;
	pt_gguf *g = NULL;
	char *json = NULL;
	FILE *devnull;
	if (pt_gguf_open_memory(data, size, &g, &err) != PT_OK)
		return 0;
	touch_values(g);
	if (pt_gguf_describe(g, &d, &err) == PT_OK) {
		if (pt_gguf_desc_json(g, &d, true, &json, &err) == PT_OK)
			pt_free(json);
		devnull = fopen("/dev/null", "w");
		if (devnull) {
			pt_gguf_desc_print(g, &d, true, devnull, &err);
			fclose(devnull);
		}
	}
	pt_gguf_close(g);
	return 0;
}
