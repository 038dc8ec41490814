/* compare.h - agreement between two next-token distribution dumps (the llama.cpp oracle's
 * `oracle.mjs eval` output and particle's): raw little-endian float32 [positions][n_vocab],
 * row i = P(token i+1 | tokens 0..i).  Used by `particle eval --compare`. */
#ifndef PT_MODEL_COMPARE_H
#define PT_MODEL_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "util/status.h"

#define PT_COMPARE_TOPK 10
#define PT_COMPARE_FLOOR 1e-30 /* probabilities below this count as this in logs */

struct pt_compare_stats {
	uint64_t positions;
	uint64_t n_vocab;
	double kl_mean;          /* mean over positions of KL(oracle || particle), nats */
	double kl_max;
	uint64_t kl_max_pos;
	double top1_agree;       /* fraction of positions whose argmax agrees */
	double max_dlogp_top10;  /* max |log p_oracle - log p_particle| over the oracle's top 10 */
	uint64_t dlogp_pos;      /* where that maximum is */
};

/* Compares positions rows of n_vocab probabilities.  PT_E_FORMAT names the first row (and
 * which input) holding a negative, NaN or infinite value; PT_E_INVALID for empty shapes. */
enum pt_status pt_compare_dists(const float *oracle, const float *particle,
				uint64_t positions, uint64_t n_vocab,
				struct pt_compare_stats *out, struct pt_error *err);
/* Same over two dump files, streamed one row at a time.  The file sizes must be equal and a
 * whole number of rows (PT_E_FORMAT otherwise). */
enum pt_status pt_compare_files(const char *oracle_path, const char *particle_path,
				uint64_t n_vocab, struct pt_compare_stats *out,
				struct pt_error *err);
/* One line per statistic, for CLI output. */
void pt_compare_print(FILE *f, const struct pt_compare_stats *s);

#endif
