/* gguf_describe.h - what `particle inspect` reports about a validated GGUF: architecture,
 * hyper-parameters, tokenizer summary, bytes by tensor type, and the figure particle lives
 * by: resident bytes (everything but routed experts) versus routed-expert bytes.
 *
 * Routed-expert tensors are blk.N.ffn_{gate,up,down,gate_up}_exps.* tensors whose last
 * dimension equals {arch}.expert_count: the 3-D weights (ne[2] = experts) and their 2-D bias /
 * 1-D scale companions.  Everything else is resident.  The fuzz target runs the same
 * describe + render path as the CLI.
 */
#ifndef PT_GGUF_DESCRIBE_H
#define PT_GGUF_DESCRIBE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf/gguf.h"
#include "quant/types.h"

#define PT_GGUF_DESC_N_HPARAMS 22

/* Suffix of the i-th reported hyper-parameter key ("block_count" -> {arch}.block_count). */
const char *pt_gguf_desc_hparam_name(unsigned i);

struct pt_gguf_type_stat {
	uint64_t count;
	uint64_t bytes;
};

/* All views point into the GGUF mapping: valid while the pt_gguf is open. */
struct pt_gguf_desc {
	struct pt_str arch;            /* general.architecture; {NULL,0} if absent */
	struct pt_str name;            /* general.name */
	uint32_t version;
	uint32_t alignment;
	uint64_t file_bytes;
	uint64_t data_offset;
	uint64_t kv_count;
	uint64_t tensor_count;
	uint64_t tensor_bytes;         /* sum of tensor nbytes (no padding) */
	uint64_t n_layers;             /* {arch}.block_count, 0 if absent */
	uint64_t n_experts;            /* {arch}.expert_count, 0 if absent */
	uint64_t n_experts_used;       /* {arch}.expert_used_count */
	const struct pt_gguf_kv *hparams[PT_GGUF_DESC_N_HPARAMS]; /* NULL where absent */
	struct pt_str tok_model;       /* tokenizer.ggml.model */
	struct pt_str tok_pre;         /* tokenizer.ggml.pre */
	uint64_t vocab_size;           /* elements of tokenizer.ggml.tokens */
	uint64_t merges_count;         /* elements of tokenizer.ggml.merges */
	int64_t bos_id;                /* -1 where absent */
	int64_t eos_id;
	int64_t eot_id;
	bool has_template;             /* tokenizer.chat_template present */
	uint64_t template_len;
	struct pt_gguf_type_stat types[PT_TYPE_COUNT];
	uint64_t resident_bytes;
	uint64_t expert_bytes;
	/* GLM's next-token-prediction blocks ({arch}.nextn_predict_layers, the last blocks of
	 * block_count): never loaded, so neither resident nor routed-expert bytes */
	uint64_t n_nextn;
	uint64_t nextn_bytes;
	uint64_t expert_tensors;
	uint64_t expert_layers;        /* layers holding routed-expert tensors */
	uint64_t bytes_per_expert;     /* largest per-layer (gate+up+down+scale) of one expert */
	uint64_t bytes_per_expert_min; /* smallest, when layers use different quant types */
};

/* Fills *d.  Fails (PT_E_FORMAT) when a key inspect relies on has the wrong type, e.g. a
 * string block_count; PT_E_NOMEM for the temporary per-layer table.  Nothing to free. */
enum pt_status pt_gguf_describe(const pt_gguf *g, struct pt_gguf_desc *d, struct pt_error *err);

/* One JSON object (see docs and README for fields); with_tensors adds a "tensors" array.
 * *out is a NUL-terminated pt_malloc'd string the caller frees with pt_free. */
enum pt_status pt_gguf_desc_json(const pt_gguf *g, const struct pt_gguf_desc *d,
				 bool with_tensors, char **out, struct pt_error *err);

/* Human-readable report; with_tensors lists every tensor.  PT_E_IO if writing fails. */
enum pt_status pt_gguf_desc_print(const pt_gguf *g, const struct pt_gguf_desc *d,
				  bool with_tensors, FILE *f, struct pt_error *err);

/* Copies a file string for display: valid UTF-8 kept, control bytes and invalid sequences
 * become '?', cut at max bytes (with "..." appended when cut).  out needs max + 4 bytes. */
void pt_gguf_display_str(struct pt_str s, char *out, uint64_t max);

#endif
