/* expert_fixture.c - see expert_fixture.h. */
#include "expert_fixture.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/alloc.h"

uint8_t fx_byte(uint64_t off)
{
	return (uint8_t)((off * 2654435761u) >> 11 ^ off);
}

struct fx_tensor {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[3];
};

/* 0 in ne: the expert count */
static const struct fx_tensor fx_tensors[] = {
	{ "token_embd.weight", 2, { 40, 11, 1 } },
	{ "blk.0.ffn_up.weight", 2, { 40, 9, 1 } },
	{ "blk.1.ffn_down_exps.weight", 3, { 9, 40, 0 } },
	{ "blk.1.ffn_gate_exps.weight", 3, { 40, 9, 0 } },
	{ "blk.1.ffn_up_exps.weight", 3, { 40, 9, 0 } },
	{ "blk.1.ffn_gate_exps.scale", 2, { 3, 0, 1 } },
	{ "blk.1.ffn_down_exps.scale_1d", 1, { 0, 1, 1 } },
	{ "blk.2.ffn_gate_exps.weight", 3, { 40, 9, 0 } },
	{ "blk.2.ffn_up_exps.weight", 3, { 40, 9, 0 } },
	{ "blk.2.ffn_down_exps.weight", 3, { 9, 40, 0 } },
	{ "output_norm.weight", 1, { 40, 1, 1 } },
};
#define FX_N (sizeof fx_tensors / sizeof fx_tensors[0])

int fx_write_model(const char *path)
{
	return fx_write_model_n(path, FX_EXPERTS);
}

int fx_write_model_n(const char *path, uint32_t n_experts)
{
	uint64_t ne[FX_N][3];
	pt_gguf_writer *w = NULL;
	pt_gguf *g = NULL;
	int rc = -1;
	for (size_t i = 0; i < FX_N; i++)
		for (int d = 0; d < 3; d++)
			ne[i][d] = fx_tensors[i].ne[d] ? fx_tensors[i].ne[d] : n_experts;
	if (pt_gguf_writer_create(path, 32, &w, NULL) != PT_OK)
		return -1;
	if (pt_gguf_writer_set_str(w, "general.architecture", "qwen3moe", NULL) != PT_OK ||
	    pt_gguf_writer_set_u32(w, "qwen3moe.expert_count", n_experts, NULL) != PT_OK)
		goto out;
	for (size_t i = 0; i < FX_N; i++)
		if (pt_gguf_writer_add_tensor(w, fx_tensors[i].name, fx_tensors[i].n_dims,
					      ne[i], 0, NULL) != PT_OK)
			goto out;
	if (pt_gguf_writer_begin_data(w, NULL) != PT_OK)
		goto out;
	/* data bytes are fx_byte(file offset): write placeholders, patch after reopening */
	for (size_t i = 0; i < FX_N; i++) {
		uint64_t n = ne[i][0] * ne[i][1] * ne[i][2] * 4;
		uint8_t zero[256] = { 0 };
		for (uint64_t done = 0; done < n; done += 256)
			if (pt_gguf_writer_write_data(w, zero, n - done < 256 ? n - done : 256,
						      NULL) != PT_OK)
				goto out;
	}
	if (pt_gguf_writer_finish(w, NULL) != PT_OK)
		goto out;
	pt_gguf_writer_destroy(w);
	w = NULL;
	if (pt_gguf_open(path, &g, NULL) != PT_OK)
		return -1;
	uint64_t start = pt_gguf_data_offset(g), end = pt_gguf_file_size(g);
	pt_gguf_close(g);
	FILE *f = fopen(path, "r+b");
	if (!f || fseek(f, (long)start, SEEK_SET) != 0)
		goto out;
	for (uint64_t off = start; off < end; off++)
		fputc(fx_byte(off), f);
	rc = fclose(f) == 0 ? 0 : -1;
out:
	pt_gguf_writer_destroy(w);
	return rc;
}

uint8_t *fx_slurp(const char *path, uint64_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = pt_malloc((size_t)len)) && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		pt_free(buf);
		buf = NULL;
	}
	fclose(f);
	*n = buf ? (uint64_t)len : 0;
	return buf;
}
