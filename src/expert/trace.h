/* trace.h - routing traces: which experts each token chose on each layer
 * (`--trace-experts FILE`), replayed by `particle cachesim`.
 *
 * Text form (default): one record per line, `TOKEN LAYER E1 E2 ... EK`, decimal, separated
 * by spaces or tabs; blank lines and lines starting with '#' are ignored.  TOKEN is the
 * position of the token in the run (a prefill chunk may record each of its tokens), LAYER the
 * model layer index, E* the chosen expert ids (order kept, duplicates allowed).
 * Binary form (file name ending in ".bin"): the 8 bytes "PTXTRC01", then records of
 * u32 token, u16 layer, u16 k, then k x u16 experts, all little-endian.  Readers detect the
 * form by the magic.
 */
#ifndef PT_EXPERT_TRACE_H
#define PT_EXPERT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_TRACE_MAGIC "PTXTRC01"
#define PT_TRACE_MAX_K 256u          /* experts in one record */
#define PT_TRACE_MAX_RECORDS (1u << 26)
#define PT_TRACE_MAX_EXPERT 65535u    /* largest expert id the simulator accepts */

struct pt_trace_rec {
	uint32_t token;
	uint32_t layer;
	uint32_t first; /* index into experts */
	uint32_t k;
};

struct pt_trace {
	struct pt_trace_rec *rec;
	uint32_t n_rec;
	uint32_t *experts;
	uint64_t n_experts_total;
	uint32_t max_expert; /* largest id seen */
};

typedef struct pt_trace_writer pt_trace_writer;

/* binary: the compact form; otherwise text. */
enum pt_status pt_trace_writer_open(const char *path, bool binary, pt_trace_writer **out,
				    struct pt_error *err);
enum pt_status pt_trace_writer_add(pt_trace_writer *w, uint32_t token, uint32_t layer,
				   const uint32_t *experts, uint32_t k, struct pt_error *err);
/* Flushes and closes; NULL-safe. */
enum pt_status pt_trace_writer_close(pt_trace_writer *w, struct pt_error *err);

/* Reads either form.  PT_E_FORMAT naming the line (text) or byte offset (binary). */
enum pt_status pt_trace_read(const char *path, struct pt_trace *out, struct pt_error *err);
/* Same over bytes in memory (name is used in messages). */
enum pt_status pt_trace_parse(const void *data, size_t n, const char *name, struct pt_trace *out,
			      struct pt_error *err);
void pt_trace_free(struct pt_trace *t);

#endif
