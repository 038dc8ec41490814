/* mkmodel.h - synthetic real-shape checkpoints: writes a GGUF file for an architecture
 * description (arch.h), a preset and a quantization mixture, deterministically from a seed
 * (same bytes on every machine), streaming with bounded memory (one row chunk of at most
 * PT_MKMODEL_CHUNK_ELEMS floats per thread, never a whole expert tensor). */
#ifndef PT_MODEL_MKMODEL_H
#define PT_MODEL_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/arch.h"
#include "util/status.h"

#define PT_MKMODEL_CHUNK_ELEMS (1u << 22)
#define PT_MKMODEL_MAX_THREADS 16

struct pt_mkmodel_opts {
	enum pt_arch arch;
	const char *arch_name;  /* NULL = canonical; "sarvam_moe" for the PR-branch spelling */
	const char *preset;     /* tiny | small | full */
	uint32_t n_layer;       /* 0 = preset */
	enum pt_mix mix;
	uint64_t seed;
	double router_skew;     /* 0 = uniform expert popularity */
	const char *vocab_dir;  /* NULL = compact vocabulary */
	const char *out_path;
	unsigned threads;       /* quantization threads, 1..PT_MKMODEL_MAX_THREADS */
	bool progress;          /* progress bar on stderr */
};

/* Writes opts->out_path.  On failure the partial file is removed. */
enum pt_status pt_mkmodel_write(const struct pt_mkmodel_opts *o, struct pt_error *err);

/* Deterministic generator used for the weights (splitmix64), exposed for tests. */
uint64_t pt_mkmodel_splitmix64(uint64_t *state);
/* The float32 values of rows [row0, row0+nrows) of a tensor (init kind of d) for seed;
 * independent of chunking and thread count.  skew is --router-skew. */
void pt_mkmodel_gen_rows(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			 uint64_t seed, double skew, uint64_t row0, uint64_t nrows, float *out);

/* Whether a tensor's values depend on --router-skew (the tensors `--reroute` rewrites). */
bool pt_mkmodel_skew_dependent(const struct pt_tensor_desc *d);

#endif
