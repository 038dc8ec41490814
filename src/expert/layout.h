/* layout.h - where each routed expert's bytes live.
 *
 * For every MoE layer: the expert tensors (gate, up, fused gate_up, down, and any other
 * blk.L.*_exps* tensor of >= 2 dims whose last dimension is n_expert, e.g. per-expert scales)
 * as (file offset, bytes per expert).  Expert e of a part is the slice [offset + e*stride,
 * offset + (e+1)*stride).  A pack replaces the parts' sources with one blob per expert
 * (pack.h).  The layout copies what it needs; it does not keep the GGUF open.  A split model's
 * slices name their part (file) as well: the readers open layout->files[part].
 */
#ifndef PT_EXPERT_LAYOUT_H
#define PT_EXPERT_LAYOUT_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "util/status.h"

#define PT_EXPERT_MAX_PARTS 6

enum pt_expert_part_kind {
	PT_PART_GATE = 0,
	PT_PART_UP = 1,
	PT_PART_GATE_UP = 2,
	PT_PART_DOWN = 3,
	PT_PART_OTHER = 4,
};

struct pt_expert_part {
	enum pt_expert_part_kind kind;
	char name[64];        /* tensor name */
	uint32_t type;        /* enum pt_type */
	uint32_t file;        /* which file of the layout (split part; 0 for a single file) */
	uint64_t file_offset; /* first byte of expert 0, within that file */
	uint64_t stride;      /* bytes per expert */
	uint64_t rows, cols;  /* each expert's matrix (ne1 x ne0) of a 3-D tensor, else 0 */
};

struct pt_expert_layer {
	uint32_t layer; /* model layer index (blk.N) */
	uint32_t n_parts;
	struct pt_expert_part part[PT_EXPERT_MAX_PARTS]; /* gate, up, gate_up, down, others */
	uint64_t expert_bytes; /* sum of strides */
};

struct pt_expert_layout {
	uint32_t n_expert;
	uint32_t n_moe;             /* MoE layers, in model order */
	struct pt_expert_layer *moe; /* [n_moe] */
	uint64_t data_offset;       /* GGUF data section (end of the header/metadata/infos) */
	uint64_t file_size;         /* all files together */
	uint32_t n_files;           /* 1, or the parts of a split model */
	char **files;               /* [n_files] paths (NULL entries for memory opens) */
};

/* Builds the layout from every blk.N.*_exps* tensor.  n_expert comes from the tensors (all
 * must agree, and each tensor's bytes must divide evenly).  PT_E_FORMAT naming the tensor on
 * any inconsistency; a model without expert tensors gives n_moe = 0. */
enum pt_status pt_expert_layout_from_gguf(const pt_gguf *g, struct pt_expert_layout *out,
					  struct pt_error *err);
/* The same over the computed layers only: blk.N with N < n_layer.  Blocks past them (GLM's
 * NextN / multi-token-prediction block, loaded and never computed) get no slots, no budget
 * and no pack entry.  n_layer UINT32_MAX = every block (pt_expert_layout_from_gguf). */
enum pt_status pt_expert_layout_from_gguf_layers(const pt_gguf *g, uint32_t n_layer,
						 struct pt_expert_layout *out,
						 struct pt_error *err);
void pt_expert_layout_free(struct pt_expert_layout *l);

/* MoE index of model layer, or -1. */
int32_t pt_expert_layout_find(const struct pt_expert_layout *l, uint32_t layer);
/* Largest expert_bytes over layers. */
uint64_t pt_expert_layout_max_bytes(const struct pt_expert_layout *l);

#endif
