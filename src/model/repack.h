/* repack.h - the model's Q4_K and Q6_K matrices copied once into the interleaved X16 layout
 * (kern.h, "interleaved rows") for faster decode in RAM: llama.cpp's CPU repacking, in our
 * layout. */
#ifndef PT_MODEL_REPACK_H
#define PT_MODEL_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "kern/pool.h"
#include "model/model.h"
#include "util/status.h"

struct pt_repack_stats {
	uint64_t bytes_in;  /* weight bytes as stored that were repacked */
	uint64_t bytes_out; /* their interleaved copies (+2.8 % for Q4_K, = for Q6_K) */
	uint32_t matrices;  /* resident matrices and expert tensors repacked */
	double seconds;
};

/* Copies every matrix of m whose type has an X16 kernel of its own at the current CPU level
 * (pt_kern_x16_native: Q4_K, Q6_K) and whose shape allows it (pt_kern_x16_ok) into anonymous
 * memory in the X16 layout and points the matrix there: the resident projections and
 * feed-forward matrices (attention, dense and shared-expert FFN, linear-attention
 * projections, an untied output head), and with experts, the routed-expert tensors too (only
 * for the mapping's expert provider when the model fits memory: a streaming cache reads
 * experts as stored, and a copy of a model larger than memory could not be paged).  The source
 * pages of the mapping are released as each matrix is done.  Results change in the last bits
 * (the X16 numerics), identically for prefill and decode.  pool may be NULL.  PT_E_NOMEM
 * when a copy cannot be allocated (matrices done so far stay repacked: still consistent). */
enum pt_status pt_model_repack(struct pt_model *m, bool experts, pt_pool *pool,
			       struct pt_repack_stats *stats, struct pt_error *err);

/* The routed-expert tensors that stay as stored (streamed from the file or a plain pack,
 * or paged by --io mmap) and have the interleaved layout's row kernels at this CPU level
 * (pt_kern_x16_rows_native: Q4_K, Q6_K; Q8_0, Q5_0 at AVX-512 and AVX2) are marked
 * PT_KERN_LAYOUT_X16_ROWS: computed with
 * the X16 numerics from the bytes as stored (prefill packs each product's bands in scratch:
 * the interleaved kernels' speed without a copy), so a --repack run gives the same bits
 * whether its experts stream as stored, arrive interleaved or were copied.  Returns how
 * many tensors were marked. */
uint32_t pt_model_x16_rows(struct pt_model *m);

/* After pt_gguf_advise_random (experts streaming, resident matrices copied): every resident
 * matrix the copy left in the file mapping (a type without an interleaved kernel at this CPU
 * level, the F32 routers, an MLA model's per-head slices) is read whole on each token, so
 * its range gets the kernel's read-ahead back and is read now (pt_gguf_advise_read_whole).
 * Returns the bytes so advised. */
uint64_t pt_model_advise_mapped(struct pt_model *m);

#endif
