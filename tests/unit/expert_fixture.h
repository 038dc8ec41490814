/* expert_fixture.h - writes a small MoE-shaped GGUF through the real writer: blk.0 dense,
 * blk.1 and blk.2 with gate/up/down expert tensors of odd sizes (slices not 4 KiB aligned),
 * a 2-D per-expert scale tensor on blk.1 and a 1-D one (which stays resident).  Every data
 * byte is a function of its file offset, so any read can be checked against the file. */
#ifndef PT_TEST_EXPERT_FIXTURE_H
#define PT_TEST_EXPERT_FIXTURE_H

#include <stdint.h>

#define FX_EXPERTS 8

/* Writes the model to path; returns 0 on success. */
int fx_write_model(const char *path);
/* The same with n_experts experts per MoE layer. */
int fx_write_model_n(const char *path, uint32_t n_experts);
/* The byte the fixture put at file offset off. */
uint8_t fx_byte(uint64_t off);
/* Reads the whole file (pt_malloc'd), *n its size. */
uint8_t *fx_slurp(const char *path, uint64_t *n);

#endif
