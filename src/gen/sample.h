/* sample.h - token sampling: repetition penalty, top-k, top-p, min-p, temperature, seeded
 * draw.  The chain and its order follow llama.cpp's default sampler (penalties -> top-k ->
 * top-p -> min-p -> temperature -> draw), so the same flags mean the same thing in both.
 *
 * Candidate sets are bounded: top-k runs as a bounded heap over the vocabulary before anything
 * is sorted, so a 262k vocabulary costs one linear pass per token.  Same seed, same options,
 * same logits -> same token, on any thread count (sampling is single-threaded). */
#ifndef PT_GEN_SAMPLE_H
#define PT_GEN_SAMPLE_H

#include <stdint.h>

#include "util/status.h"

struct pt_sampler_opts {
	float temperature;       /* 0 = greedy (argmax after penalties) */
	uint32_t top_k;          /* 0 = whole vocabulary */
	float top_p;             /* 1 = off */
	float min_p;             /* 0 = off */
	float repeat_penalty;    /* 1 = off */
	uint32_t repeat_last_n;  /* history window for the penalty; 0 = off */
	uint64_t seed;
};

/* The CLI defaults: temperature 0.2, top-k 64, top-p 0.95, min-p 0, penalty 1.0 over 64. */
void pt_sampler_opts_default(struct pt_sampler_opts *o);

typedef struct pt_sampler pt_sampler;

/* Validates the options (finite, in range) and sizes every buffer from n_vocab once. */
enum pt_status pt_sampler_create(const struct pt_sampler_opts *o, uint32_t n_vocab,
				 pt_sampler **out, struct pt_error *err);
void pt_sampler_destroy(pt_sampler *s);
/* Records a token in the penalty history (prompt tokens and generated ones). */
void pt_sampler_accept(pt_sampler *s, int32_t token);
/* Forgets the history (a new conversation); the random stream continues. */
void pt_sampler_reset(pt_sampler *s);
/* Picks the next token from raw logits [n_vocab]; logits are not modified.  Returns -1 only
 * if every logit is NaN or -inf. */
int32_t pt_sampler_sample(pt_sampler *s, const float *logits);

/* Constrained decoding (grammar.h): the same chain over only the tokens the grammar state
 * allows, giving exactly the token pt_sampler_sample would give on logits with every other
 * token set to -inf (the random stream advances identically).  g NULL: unconstrained.
 * Returns -1 when no allowed token has a finite logit (or the mask buffer cannot be
 * allocated); the caller then stops with an error.  The token is not accepted into g. */
struct pt_grammar_state;
int32_t pt_sampler_sample_constrained(pt_sampler *s, const float *logits,
				      struct pt_grammar_state *g);

/* Deterministic PRNG used by the sampler (xoshiro256** seeded through splitmix64). */
struct pt_rng {
	uint64_t s[4];
};
void pt_rng_seed(struct pt_rng *r, uint64_t seed);
uint64_t pt_rng_next(struct pt_rng *r);
double pt_rng_uniform(struct pt_rng *r); /* [0, 1) with 53 random bits */

#endif
