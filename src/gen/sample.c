/* sample.c - the sampler chain (see sample.h). */
#include "gen/sample.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gen/grammar.h"
#include "util/alloc.h"

struct cand {
	int32_t id;
	float logit;
};

struct pt_sampler {
	struct pt_sampler_opts o;
	uint32_t n_vocab;
	uint32_t cap;            /* candidate capacity: top_k, or n_vocab when top_k is 0 */
	struct cand *cands;      /* [cap] */
	double *probs;           /* [cap] */
	int32_t *history;        /* ring of the last repeat_last_n accepted tokens */
	uint32_t hist_len;
	uint32_t hist_pos;
	uint8_t *penalized;      /* bitmap [n_vocab]: token appears in the history window */
	struct pt_rng rng;
	uint8_t *allowed;        /* [n_vocab] grammar mask, allocated on first constrained use */
	const uint8_t *mask;     /* while sampling constrained: allowed, else NULL */
};

void pt_sampler_opts_default(struct pt_sampler_opts *o)
{
	memset(o, 0, sizeof *o);
	o->temperature = 0.2f;
	o->top_k = 64;
	o->top_p = 0.95f;
	o->min_p = 0.0f;
	o->repeat_penalty = 1.0f;
	o->repeat_last_n = 64;
	o->seed = 0;
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void pt_rng_seed(struct pt_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t pt_rng_next(struct pt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double pt_rng_uniform(struct pt_rng *r)
{
	return (double)(pt_rng_next(r) >> 11) * 0x1.0p-53;
}

static enum pt_status check_opts(const struct pt_sampler_opts *o, uint32_t n_vocab,
				 struct pt_error *err)
{
	if (n_vocab == 0)
		return pt_error_set(err, PT_E_INVALID, "sampler: empty vocabulary");
	if (!isfinite(o->temperature) || o->temperature < 0)
		return pt_error_set(err, PT_E_INVALID, "temperature must be >= 0, got %g",
				    (double)o->temperature);
	if (!isfinite(o->top_p) || o->top_p <= 0 || o->top_p > 1)
		return pt_error_set(err, PT_E_INVALID, "top-p must be in (0, 1], got %g",
				    (double)o->top_p);
	if (!isfinite(o->min_p) || o->min_p < 0 || o->min_p > 1)
		return pt_error_set(err, PT_E_INVALID, "min-p must be in [0, 1], got %g",
				    (double)o->min_p);
	if (!isfinite(o->repeat_penalty) || o->repeat_penalty <= 0)
		return pt_error_set(err, PT_E_INVALID, "repetition penalty must be > 0, got %g",
				    (double)o->repeat_penalty);
	return PT_OK;
}

enum pt_status pt_sampler_create(const struct pt_sampler_opts *o, uint32_t n_vocab,
				 pt_sampler **out, struct pt_error *err)
{
	pt_sampler *s = NULL;
	enum pt_status st = check_opts(o, n_vocab, err);
	*out = NULL;
	if (st != PT_OK)
		return st;
	s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "sampler: out of memory");
	s->o = *o;
	s->n_vocab = n_vocab;
	s->cap = (o->top_k == 0 || o->top_k > n_vocab) ? n_vocab : o->top_k;
	s->cands = pt_mallocn(s->cap, sizeof *s->cands);
	s->probs = pt_mallocn(s->cap, sizeof *s->probs);
	s->penalized = pt_calloc((size_t)n_vocab / 8 + 1, 1);
	if (o->repeat_last_n)
		s->history = pt_mallocn(o->repeat_last_n, sizeof *s->history);
	if (!s->cands || !s->probs || !s->penalized || (o->repeat_last_n && !s->history)) {
		pt_sampler_destroy(s);
		return pt_error_set(err, PT_E_NOMEM, "sampler: out of memory");
	}
	pt_rng_seed(&s->rng, o->seed);
	*out = s;
	return PT_OK;
}

void pt_sampler_destroy(pt_sampler *s)
{
	if (!s)
		return;
	pt_free(s->cands);
	pt_free(s->probs);
	pt_free(s->penalized);
	pt_free(s->history);
	pt_free(s->allowed);
	pt_free(s);
}

static void rebuild_penalized(pt_sampler *s)
{
	memset(s->penalized, 0, (size_t)s->n_vocab / 8 + 1);
	for (uint32_t i = 0; i < s->hist_len; i++) {
		uint32_t t = (uint32_t)s->history[i];
		s->penalized[t >> 3] |= (uint8_t)(1u << (t & 7));
	}
}

void pt_sampler_accept(pt_sampler *s, int32_t token)
{
	if (!s->o.repeat_last_n || token < 0 || (uint32_t)token >= s->n_vocab)
		return;
	s->history[s->hist_pos] = token;
	s->hist_pos = (s->hist_pos + 1) % s->o.repeat_last_n;
	if (s->hist_len < s->o.repeat_last_n)
		s->hist_len++;
	rebuild_penalized(s);
}

void pt_sampler_reset(pt_sampler *s)
{
	s->hist_len = 0;
	s->hist_pos = 0;
	memset(s->penalized, 0, (size_t)s->n_vocab / 8 + 1);
}

/* The logit the chain sees: llama.cpp's penalty divides positive logits and multiplies
 * negative ones, once per distinct token in the window. */
static inline float view_logit(const pt_sampler *s, const float *logits, uint32_t t)
{
	float l = logits[t];
	if (s->mask && !s->mask[t])
		return -INFINITY; /* exactly what masking the logit to -inf first would give */
	if (s->o.repeat_penalty != 1.0f && (s->penalized[t >> 3] >> (t & 7)) & 1)
		l = l > 0 ? l / s->o.repeat_penalty : l * s->o.repeat_penalty;
	return l;
}

/* Ordering for candidates: higher logit first, lower id first on ties (deterministic). */
static inline int better(struct cand a, struct cand b)
{
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static void sift_down(struct cand *h, uint32_t n, uint32_t i)
{
	/* min-heap by `better`: the root is the worst kept candidate */
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && better(h[m], h[l]))
			m = l;
		if (r < n && better(h[m], h[r]))
			m = r;
		if (m == i)
			return;
		struct cand t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* The scans below look at a block of SCAN_BLOCK logits token by token only when one of its
 * raw logits is above the bar a token must pass: with a penalty of at least 1 the chain's
 * view of a logit is never above the logit (a positive one is divided, a negative one
 * multiplied) and a mask only lowers it, so a block without such a logit holds no candidate.
 * The test is one vectorizable pass; a 262,144-entry vocabulary took 0.25-0.5 ms a token
 * token by token (docs/PERFORMANCE.md, issue 21). */
#define SCAN_BLOCK 64

static bool block_above(const float *l, float bar)
{
	int any = 0;
	for (uint32_t i = 0; i < SCAN_BLOCK; i++)
		any |= l[i] > bar; /* NaN: false, as it is never a candidate */
	return any != 0;
}

/* First token of the block holding t at which a scan with bar `bar` must look again: t
 * itself unless the block from t (whole, SCAN_BLOCK-aligned) can be skipped. */
static uint32_t scan_skip(const pt_sampler *s, const float *logits, uint32_t t, bool barred,
			  float bar)
{
	while (barred && s->o.repeat_penalty >= 1.0f && t % SCAN_BLOCK == 0 &&
	       t + SCAN_BLOCK <= s->n_vocab && !block_above(logits + t, bar))
		t += SCAN_BLOCK;
	return t;
}

/* Keeps the best `cap` finite candidates; returns how many.  Tokens come in id order, so a
 * later token equal to the worst kept one is never better: the bar is strict. */
static uint32_t select_top(pt_sampler *s, const float *logits)
{
	uint32_t n = 0;
	for (uint32_t t = 0; t < s->n_vocab; t++) {
		t = scan_skip(s, logits, t, n == s->cap, n ? s->cands[0].logit : 0.0f);
		if (t >= s->n_vocab)
			break;
		struct cand c = { (int32_t)t, view_logit(s, logits, t) };
		if (isnan(c.logit) || c.logit == -INFINITY)
			continue;
		if (n < s->cap) {
			s->cands[n++] = c;
			if (n == s->cap)
				for (uint32_t i = n / 2; i-- > 0;)
					sift_down(s->cands, n, i);
		} else if (better(c, s->cands[0])) {
			s->cands[0] = c;
			sift_down(s->cands, n, 0);
		}
	}
	return n;
}

static int cmp_cand(const void *a, const void *b)
{
	struct cand x = *(const struct cand *)a, y = *(const struct cand *)b;
	return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

/* Softmax of the candidates at temperature t into s->probs (sum in double). */
static void softmax(pt_sampler *s, uint32_t n, double t)
{
	double max = s->cands[0].logit, sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		s->probs[i] = exp(((double)s->cands[i].logit - max) / t);
		sum += s->probs[i];
	}
	for (uint32_t i = 0; i < n; i++)
		s->probs[i] /= sum;
}

static uint32_t apply_top_p_min_p(pt_sampler *s, uint32_t n)
{
	double cum = 0;
	softmax(s, n, 1.0);
	if (s->o.top_p < 1.0f) {
		for (uint32_t i = 0; i < n; i++) {
			cum += s->probs[i];
			if (cum >= s->o.top_p) {
				n = i + 1;
				break;
			}
		}
	}
	if (s->o.min_p > 0.0f) {
		double floor_p = s->probs[0] * s->o.min_p;
		uint32_t keep = 1;
		while (keep < n && s->probs[keep] >= floor_p)
			keep++;
		n = keep;
	}
	return n;
}

static int32_t greedy(const pt_sampler *s, const float *logits)
{
	int32_t best = -1;
	float best_l = -INFINITY;
	for (uint32_t t = 0; t < s->n_vocab; t++) {
		t = scan_skip(s, logits, t, best >= 0, best_l); /* ties keep the lower id */
		if (t >= s->n_vocab)
			break;
		float l = view_logit(s, logits, t);
		if (!isnan(l) && (best < 0 || l > best_l)) {
			best = (int32_t)t;
			best_l = l;
		}
	}
	return best_l == -INFINITY ? -1 : best;
}

/* The chain after top-k selection of n candidates: sort, top-p, min-p, draw. */
static int32_t draw(pt_sampler *s, uint32_t n)
{
	qsort(s->cands, n, sizeof *s->cands, cmp_cand);
	n = apply_top_p_min_p(s, n);
	softmax(s, n, s->o.temperature);
	double u = pt_rng_uniform(&s->rng), cum = 0;
	for (uint32_t i = 0; i < n; i++) {
		cum += s->probs[i];
		if (u < cum)
			return s->cands[i].id;
	}
	return s->cands[n - 1].id;
}

int32_t pt_sampler_sample(pt_sampler *s, const float *logits)
{
	uint32_t n;
	s->mask = NULL;
	if (s->o.temperature <= 0.0f)
		return greedy(s, logits);
	n = select_top(s, logits);
	if (n == 0)
		return -1;
	return draw(s, n);
}

/* Exact fast paths only: greedy keeps the unconstrained argmax when the grammar allows it
 * (masking removes tokens, so a surviving maximum stays the maximum, ties included); the
 * sampling chain keeps the unconstrained top-k when every one of them is allowed (then the
 * masked top-k is the same set in the same order, and everything after it, including the
 * one random draw, is identical).  Otherwise the full mask is computed. */
int32_t pt_sampler_sample_constrained(pt_sampler *s, const float *logits, pt_grammar_state *g)
{
	uint32_t n;
	int32_t tok;
	if (!g)
		return pt_sampler_sample(s, logits);
	s->mask = NULL;
	if (s->o.temperature <= 0.0f) {
		tok = greedy(s, logits);
		if (tok < 0 || pt_grammar_state_allows(g, tok))
			return tok;
	} else if (s->cap <= 256) {
		n = select_top(s, logits);
		bool all = true;
		for (uint32_t i = 0; i < n && all; i++)
			all = pt_grammar_state_allows(g, s->cands[i].id);
		if (n == 0)
			return -1;
		if (all)
			return draw(s, n);
	}
	if (!s->allowed && !(s->allowed = pt_malloc(s->n_vocab)))
		return -1;
	pt_grammar_state_mask(g, s->allowed);
	s->mask = s->allowed;
	if (s->o.temperature <= 0.0f) {
		tok = greedy(s, logits);
	} else {
		n = select_top(s, logits);
		tok = n ? draw(s, n) : -1;
	}
	s->mask = NULL;
	return tok;
}
