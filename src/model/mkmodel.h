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
	double router_skew;     /* routing locality level; 0 = memoryless, uniform */
	bool skew_real;         /* router_skew = pt_mkmodel_real_skew(arch) */
	const char *vocab_dir;  /* NULL = compact vocabulary */
	/* tokenizer.* keys from this GGUF (e.g. a vocab-only file, or a real model) instead;
	 * its chat template unless it has none (then the arch's own); exclusive with vocab_dir */
	const char *vocab_gguf;
	const char *out_path;
	unsigned threads;       /* quantization threads, 1..PT_MKMODEL_MAX_THREADS */
	bool progress;          /* progress bar on stderr */
	/* Split output (llama.cpp's gguf-split rules): a new part starts before a tensor whose
	 * 32-padded bytes would take the part's tensor bytes over split_max_size, or every
	 * split_max_tensors tensors; at least one tensor per part.  Parts are written as
	 * PREFIX-00001-of-0000N.gguf ..., PREFIX = out_path without ".gguf"; part 1 holds the
	 * metadata; every part split.no / split.count / split.tensors.count.  0 = one file. */
	uint64_t split_max_size;
	uint32_t split_max_tensors;
};

/* Writes opts->out_path.  On failure the partial file is removed. */
enum pt_status pt_mkmodel_write(const struct pt_mkmodel_opts *o, struct pt_error *err);

/* The tensor data bytes pt_mkmodel_write would write for o (out_path unused, nothing
 * written): the file is that plus its metadata (the vocabulary: at most a few MiB).  What a
 * caller checks against free disk space before writing a full-size file. */
enum pt_status pt_mkmodel_size(const struct pt_mkmodel_opts *o, uint64_t *bytes,
				struct pt_error *err);

/* Rewrites, in place, the tensors and the particle.mkmodel.router_skew value that
 * --router-skew changes in o->out_path, for o->router_skew (o->threads, o->progress; the
 * other fields come from the file).  Refuses a file whose general.name / particle.mkmodel.*
 * keys do not say mkmodel wrote it, or whose tensors (names, order, shapes, types) differ
 * from what mkmodel writes for its arch, preset, layers and mixture, and takes the model
 * lock (util/lock.h: refused while a particle process runs the file).  The result is
 * byte-identical to a fresh pt_mkmodel_write at that skew.  Crash safety: router_skew is
 * set to NaN (synced) before any tensor is touched and the new value written (synced)
 * after all are; a file left with NaN is recognised and a new reroute completes it. */
enum pt_status pt_mkmodel_reroute(const struct pt_mkmodel_opts *o, struct pt_error *err);

/* Deterministic generator used for the weights (splitmix64), exposed for tests. */
uint64_t pt_mkmodel_splitmix64(uint64_t *state);
/* The float32 values of rows [row0, row0+nrows) of a tensor (init kind of d) for seed;
 * independent of chunking and thread count.  skew is --router-skew. */
void pt_mkmodel_gen_rows(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			 uint64_t seed, double skew, uint64_t row0, uint64_t nrows, float *out);

/* The --router-skew level whose routing matches published measurements of real models
 * (docs/MODELS.md "Routing locality"), per arch. */
double pt_mkmodel_real_skew(enum pt_arch arch);

/* Whether a tensor's values depend on --router-skew (the tensors `--reroute` rewrites). */
bool pt_mkmodel_skew_dependent(const struct pt_tensor_desc *d);

#endif
