/* cmd_routing.c - `particle routing`: how a model routes a fixed text and, with --gen, text
 * it generates itself.  Records every token's expert set per MoE layer and reports per
 * layer: distinct experts used, the entropy of expert popularity (also normalised by
 * log n_expert), the temporal-locality measures published for real models
 * (PRIOR-ART-PEERS.md section 4): the share of selections repeated at the next token
 * ("overlap", |A n B| / k of consecutive sets) and within the next 8 tokens, and the hit
 * rate of a per-layer LRU expert cache holding 10, 25 and 40 % of the layer's experts.  A
 * run whose routing is degenerate (few experts, heavy overlap) proves nothing about
 * streaming, so every benchmark prints this beside its numbers. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/engine.h"
#include "gen/sample.h"
#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"

/* The fixed text: varied English prose, repeated until long enough. */
static const char routing_text[] =
	"The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting "
	"the one hundred and twelve steps as his father had done before him. Below, the harbour "
	"filled with fishing boats returning from the grey Atlantic, their holds heavy with cod "
	"and mackerel. In the village square, children chased pigeons between market stalls "
	"selling apples, bread, copper pots and hand-knitted wool. A schoolteacher explained "
	"photosynthesis with a potted geranium: light, water and carbon dioxide become sugar "
	"and oxygen. Meanwhile the radio reported that interest rates would rise by half a "
	"percent, train drivers planned a strike on Thursday, and a comet would be visible "
	"after midnight. def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2) # 1, 1, 2, "
	"3, 5, 8, 13. Quelle heure est-il? Es ist schon spät. 今日は良い天気ですね。 ";

#define N_LRU 3
static const double lru_share[N_LRU] = { 0.10, 0.25, 0.40 };
#define WINDOW 8        /* "repeated within 8 tokens" */
#define WARM_TOKENS 64  /* LRU hit rate also reported after the first 64 tokens */

/* Every token's expert set per layer: ids[layer][token][k] (-1: none). */
struct route_acc {
	uint32_t n_layer, n_expert, k, cap;
	int32_t *ids;
	uint32_t *n;        /* [n_layer] tokens recorded */
};

static void observe(void *ctx, uint32_t layer, int64_t pos0, uint32_t n, uint32_t k,
		    const int *ids)
{
	struct route_acc *a = ctx;
	(void)pos0;
	if (layer >= a->n_layer || k != a->k)
		return;
	for (uint32_t r = 0; r < n && a->n[layer] < a->cap; r++) {
		int32_t *dst = a->ids + ((size_t)layer * a->cap + a->n[layer]++) * k;
		for (uint32_t j = 0; j < k; j++) {
			int v = ids[(size_t)r * k + j];
			dst[j] = v >= 0 && (uint32_t)v < a->n_expert ? v : -1;
		}
	}
}

struct layer_report {
	uint32_t distinct;
	double entropy, entropy_norm, overlap, within8;
	double lru[N_LRU], lru_warm[N_LRU];
};

static const int32_t *token_set(const struct route_acc *a, uint32_t il, uint32_t t)
{
	return a->ids + ((size_t)il * a->cap + t) * a->k;
}

static bool in_set(const int32_t *s, uint32_t k, int32_t e)
{
	for (uint32_t i = 0; i < k; i++)
		if (s[i] == e)
			return true;
	return false;
}

/* Share of selections of tokens [t0, t1) repeated at the next token (w = 1) or at one of
 * the next w tokens; tokens without w successors in the range are not counted. */
static double repeat_share(const struct route_acc *a, uint32_t il, uint32_t t0, uint32_t t1,
			   uint32_t w)
{
	uint64_t hit = 0, tot = 0;
	for (uint32_t t = t0; t + w < t1; t++) {
		const int32_t *s = token_set(a, il, t);
		for (uint32_t j = 0; j < a->k; j++) {
			bool found = false;
			for (uint32_t d = 1; d <= w && !found; d++)
				found = in_set(token_set(a, il, t + d), a->k, s[j]);
			hit += found;
			tot++;
		}
	}
	return tot ? (double)hit / (double)tot : 0;
}

/* Per-layer LRU cache of cap experts replayed over tokens [0, t1) from cold; hit rate of
 * the selections of [t0, t1) and of those at or after token warm. */
static void lru_hits(const struct route_acc *a, uint32_t il, uint32_t cap, uint32_t t0,
		     uint32_t t1, uint32_t warm, uint64_t *stamp, double *hit, double *hit_warm)
{
	uint64_t clock = 0, h = 0, n = 0, hw = 0, nw = 0;
	uint32_t held = 0;
	memset(stamp, 0, a->n_expert * sizeof *stamp); /* 0 = not cached */
	for (uint32_t t = 0; t < t1; t++) {
		const int32_t *s = token_set(a, il, t);
		for (uint32_t j = 0; j < a->k; j++) {
			if (s[j] < 0)
				continue;
			bool in = stamp[s[j]] != 0;
			if (!in && held == cap) { /* evict the least recently used */
				uint32_t v = 0;
				for (uint32_t e = 0; e < a->n_expert; e++)
					if (stamp[e] && (!stamp[v] || stamp[e] < stamp[v]))
						v = e;
				stamp[v] = 0;
				held--;
			}
			held += !in;
			stamp[s[j]] = ++clock;
			if (t >= t0) {
				h += in;
				n++;
			}
			if (t >= t0 && t >= warm) {
				hw += in;
				nw++;
			}
		}
	}
	*hit = n ? (double)h / (double)n : 0;
	*hit_warm = nw ? (double)hw / (double)nw : NAN; /* NaN: no token after warm-up */
}

static uint32_t lru_cap(const struct route_acc *a, int i)
{
	uint32_t c = (uint32_t)lround(lru_share[i] * a->n_expert);
	return c < a->k ? a->k : c;
}

static void summarize(const struct route_acc *a, uint32_t il, uint32_t t0, uint32_t t1,
		      uint64_t *scratch, struct layer_report *r)
{
	uint64_t *cnt = scratch, total = 0;
	memset(r, 0, sizeof *r);
	memset(cnt, 0, a->n_expert * sizeof *cnt);
	for (uint32_t t = t0; t < t1; t++)
		for (uint32_t j = 0; j < a->k; j++)
			if (token_set(a, il, t)[j] >= 0)
				cnt[token_set(a, il, t)[j]]++;
	for (uint32_t e = 0; e < a->n_expert; e++) {
		total += cnt[e];
		r->distinct += cnt[e] > 0;
	}
	for (uint32_t e = 0; e < a->n_expert && total; e++) {
		const double p = (double)cnt[e] / (double)total;
		if (p > 0)
			r->entropy -= p * log(p);
	}
	r->entropy_norm = a->n_expert > 1 ? r->entropy / log((double)a->n_expert) : 0;
	r->overlap = repeat_share(a, il, t0, t1, 1);
	r->within8 = repeat_share(a, il, t0, t1, WINDOW);
	for (int i = 0; i < N_LRU; i++)
		lru_hits(a, il, lru_cap(a, i), t0, t1, t0 + WARM_TOKENS, scratch, &r->lru[i],
			 &r->lru_warm[i]);
}

struct sums {
	double distinct, entropy_norm, overlap, within8, lru[N_LRU], lru_warm[N_LRU];
	uint32_t n;
};

static void add_sums(struct sums *s, const struct layer_report *r)
{
	s->distinct += r->distinct;
	s->entropy_norm += r->entropy_norm;
	s->overlap += r->overlap;
	s->within8 += r->within8;
	for (int i = 0; i < N_LRU; i++) {
		s->lru[i] += r->lru[i];
		s->lru_warm[i] += r->lru_warm[i];
	}
	s->n++;
}

static void print_row_json(const struct layer_report *r, uint32_t il, bool first, FILE *fp)
{
	fprintf(fp, "%s{\"layer\": %u, \"distinct\": %u, \"entropy\": %.4f, "
		"\"entropy_norm\": %.4f, \"overlap\": %.4f, \"within8\": %.4f, \"lru\": [",
		first ? "" : ", ", il, r->distinct, r->entropy, r->entropy_norm, r->overlap,
		r->within8);
	for (int i = 0; i < N_LRU; i++)
		fprintf(fp, "%s%.4f", i ? ", " : "", r->lru[i]);
	fprintf(fp, "]}");
}

static void print_means(const struct route_acc *a, const struct sums *s, bool json, FILE *fp)
{
	const double n = s->n ? s->n : 1;
	if (json) {
		fprintf(fp, "], \"mean_distinct\": %.2f, \"mean_entropy_norm\": %.4f, "
			"\"mean_overlap\": %.4f, \"mean_within8\": %.4f, \"lru\": [",
			s->distinct / n, s->entropy_norm / n, s->overlap / n, s->within8 / n);
		for (int i = 0; i < N_LRU; i++) {
			fprintf(fp, "%s{\"residency\": %.2f, \"slots\": %u, \"hit\": %.4f, "
				"\"hit_warm\": ", i ? ", " : "", lru_share[i], lru_cap(a, i),
				s->lru[i] / n);
			if (isnan(s->lru_warm[i]))
				fprintf(fp, "null}");
			else
				fprintf(fp, "%.4f}", s->lru_warm[i] / n);
		}
		fprintf(fp, "]");
		return;
	}
	fprintf(fp, " mean  %9.1f  %5.1f           %13.3f  %7.3f  %7.3f", s->distinct / n,
		100.0 * s->distinct / n / a->n_expert, s->entropy_norm / n, s->overlap / n,
		s->within8 / n);
	for (int i = 0; i < N_LRU; i++)
		fprintf(fp, "  %5.3f", s->lru[i] / n);
	fprintf(fp, "\n LRU hit after the first %d tokens:", WARM_TOKENS);
	for (int i = 0; i < N_LRU && !isnan(s->lru_warm[0]); i++)
		fprintf(fp, " %.0f%% %.3f", 100 * lru_share[i], s->lru_warm[i] / n);
	fprintf(fp, "%s\n", isnan(s->lru_warm[0]) ? " - (no such token)" : "");
}

/* One table (or JSON object) for tokens [t0, t1) of every layer. */
static void print_phase(const struct route_acc *a, const char *what, uint32_t t0, uint32_t t1,
			uint64_t *scratch, bool json, FILE *fp)
{
	struct layer_report r;
	struct sums s = { 0 };
	if (json)
		fprintf(fp, "{\"tokens\": %u, \"layers\": [", t1 - t0);
	else
		fprintf(fp, "%s (%u tokens):\nlayer  distinct   used%%  entropy  entropy/ln(E)  "
			"overlap  within8  lru%.0f%%  lru%.0f%%  lru%.0f%%\n", what, t1 - t0,
			100 * lru_share[0], 100 * lru_share[1], 100 * lru_share[2]);
	for (uint32_t il = 0; il < a->n_layer; il++) {
		if (a->n[il] < t1)
			continue;
		summarize(a, il, t0, t1, scratch, &r);
		if (json) {
			print_row_json(&r, il, s.n == 0, fp);
		} else {
			fprintf(fp, "%5u  %4u/%-4u  %5.1f  %7.3f  %13.3f  %7.3f  %7.3f", il,
				r.distinct, a->n_expert, 100.0 * r.distinct / a->n_expert,
				r.entropy, r.entropy_norm, r.overlap, r.within8);
			for (int i = 0; i < N_LRU; i++)
				fprintf(fp, "  %5.3f", r.lru[i]);
			fputc('\n', fp);
		}
		add_sums(&s, &r);
	}
	print_means(a, &s, json, fp);
	if (json)
		fputc('}', fp);
}

static void print_report(const struct route_acc *a, const char *model, uint32_t n_tok,
			 uint32_t n_gen, uint64_t *scratch, bool json, FILE *fp)
{
	if (json) {
		fprintf(fp, "{\"model\": \"%s\", \"tokens\": %u, \"n_expert\": %u, \"top_k\": %u, "
			"\"layers\": [", model, n_tok, a->n_expert, a->k);
		/* the text's table at top level (compatible with older readers) */
		struct layer_report r;
		struct sums s = { 0 };
		for (uint32_t il = 0; il < a->n_layer; il++) {
			if (a->n[il] < n_tok)
				continue;
			summarize(a, il, 0, n_tok, scratch, &r);
			print_row_json(&r, il, s.n == 0, fp);
			add_sums(&s, &r);
		}
		print_means(a, &s, true, fp);
		if (n_gen) {
			fprintf(fp, ", \"generated\": ");
			print_phase(a, "generated", n_tok, n_tok + n_gen, scratch, true, fp);
		}
		fprintf(fp, "}\n");
		return;
	}
	fprintf(fp, "routing: %s, %u tokens, top-%u of %u experts\n", model, n_tok, a->k,
		a->n_expert);
	print_phase(a, "text", 0, n_tok, scratch, false, fp);
	if (n_gen)
		print_phase(a, "generated (sampled, temperature 0.7, after the text)", n_tok,
			    n_tok + n_gen, scratch, false, fp);
	fprintf(fp, "(overlap = share of a token's k experts chosen again by the next token, "
		"within8 = by one of the next 8; uniform random routing gives overlap k/E = %.3f;"
		" lruP = hit rate of a per-layer LRU cache of P %% of the experts, from cold)\n",
		(double)a->k / a->n_expert);
}

/* The first n tokens of the fixed text (repeated as needed); *out pt_malloc'd with room for
 * extra more. */
static enum pt_status text_tokens(const pt_tok *tok, uint32_t n, uint32_t extra,
				  uint32_t **out, struct pt_error *err)
{
	int32_t *raw = NULL;
	size_t cnt = 0;
	enum pt_status st = pt_tok_encode_alloc(tok, routing_text, strlen(routing_text), true,
						false, &raw, &cnt, err);
	uint32_t *ids = st == PT_OK ? pt_mallocn((size_t)n + extra, sizeof *ids) : NULL;
	if (st == PT_OK && (!ids || cnt == 0))
		st = pt_error_set(err, PT_E_NOMEM, "routing: cannot tokenize the text");
	for (uint32_t i = 0; st == PT_OK && i < n; i++)
		ids[i] = (uint32_t)raw[i % cnt];
	pt_free(raw);
	if (st != PT_OK) {
		pt_free(ids);
		return st;
	}
	*out = ids;
	return PT_OK;
}

static enum pt_status acc_init(struct route_acc *a, const struct pt_hparams *hp, uint32_t cap,
			       struct pt_error *err)
{
	size_t n;
	a->n_layer = hp->n_layer;
	a->n_expert = hp->n_expert;
	a->k = hp->n_expert_used;
	a->cap = cap;
	if (!hp->n_expert || !a->k)
		return pt_error_set(err, PT_E_INVALID, "routing: the model has no experts");
	if (pt_mul_overflow((size_t)a->n_layer * cap, a->k, &n))
		return pt_error_set(err, PT_E_LIMIT, "routing: too many tokens");
	a->ids = pt_mallocn(n, sizeof *a->ids);
	a->n = pt_calloc(a->n_layer, sizeof *a->n);
	if (!a->ids || !a->n)
		return pt_error_set(err, PT_E_NOMEM, "routing: counters");
	return PT_OK;
}

static void acc_free(struct route_acc *a)
{
	pt_free(a->ids);
	pt_free(a->n);
}

/* Samples n_gen tokens after the text (temperature 0.7, top-k 64, top-p 0.95, seed 1:
 * sampled as in chat use; greedy decoding of a synthetic model can lock into a loop that
 * repeats its routing trivially), evaluating them one at a time as decode does. */
static enum pt_status generate(pt_engine *e, uint32_t *ids, uint32_t n_tok, uint32_t n_gen,
			       float *logits, struct pt_error *err)
{
	struct pt_sampler_opts so;
	pt_sampler *s = NULL;
	pt_sampler_opts_default(&so);
	so.temperature = 0.7f;
	so.seed = 1;
	enum pt_status st = pt_sampler_create(&so, pt_engine_n_vocab(e), &s, err);
	for (uint32_t i = 0; st == PT_OK && i < n_gen; i++) {
		int32_t t = pt_sampler_sample(s, logits);
		pt_sampler_accept(s, t);
		ids[n_tok + i] = (uint32_t)t;
		st = pt_engine_eval(e, ids + n_tok + i, 1, logits, false, err);
	}
	pt_sampler_destroy(s);
	return st;
}

int pt_cli_routing_report(const char *model, uint32_t n_tok, uint32_t n_gen, bool json,
			  FILE *fp)
{
	struct pt_error err = { 0 };
	struct route_acc acc = { 0 };
	struct pt_engine_opts o = { .model_path = model, .n_ctx = n_tok + n_gen,
				    .io_mode = "mmap", .memory_budget = 1ull << 50,
				    .no_lock = true, .on_route = observe, .route_ctx = &acc };
	pt_engine *e = NULL;
	uint32_t *ids = NULL;
	float *logits = NULL;
	uint64_t *scratch = NULL;
	enum pt_status st = pt_engine_open(&o, &e, &err);
	if (st == PT_OK)
		st = acc_init(&acc, &pt_engine_model(e)->hp, n_tok + n_gen, &err);
	if (st == PT_OK)
		st = text_tokens(pt_engine_tok(e), n_tok, n_gen, &ids, &err);
	if (st == PT_OK && (!(logits = pt_mallocn(pt_engine_n_vocab(e), sizeof(float))) ||
			    !(scratch = pt_mallocn(acc.n_expert, sizeof *scratch))))
		st = pt_error_set(&err, PT_E_NOMEM, "routing: logits");
	if (st == PT_OK)
		st = pt_engine_eval(e, ids, n_tok, logits, false, &err);
	if (st == PT_OK && n_gen)
		st = generate(e, ids, n_tok, n_gen, logits, &err);
	if (st == PT_OK)
		print_report(&acc, model, n_tok, n_gen, scratch, json, fp);
	pt_free(scratch);
	pt_free(logits);
	pt_free(ids);
	acc_free(&acc);
	pt_engine_close(e);
	return st == PT_OK ? PT_EXIT_OK : pt_cli_fail(&err);
}

static void help(void)
{
	printf("usage: particle routing -m MODEL [--tokens N] [--gen N] [--json]\n\n"
	       "Evaluates the first N tokens of a fixed deterministic text (varied prose, code,\n"
	       "French, German, Japanese) and, with --gen, samples N more tokens from the model\n"
	       "(temperature 0.7, top-k 64, top-p 0.95, seed 1) one at a time.  Prints, for the\n"
	       "text and for the generated tokens, per MoE layer:\n"
	       "  distinct       experts used\n"
	       "  entropy        of expert popularity (nats, and / ln n_expert: 1 = uniform)\n"
	       "  overlap        share of a token's k experts chosen again by the next token\n"
	       "                 (uniform random routing gives k / n_expert)\n"
	       "  within8        share chosen again by one of the next 8 tokens\n"
	       "  lru10/25/40%%   hit rate of a per-layer LRU cache holding 10, 25, 40 %% of the\n"
	       "                 experts (at least k), replayed from cold; also after the first\n"
	       "                 64 tokens (warm).  Published for Qwen3-30B-A3B: overlap ~0.45,\n"
	       "                 within8 ~0.80, LRU 40 %% 0.90-0.95 (docs/MODELS.md)\n\n"
	       "  -m, --model FILE   GGUF model (required)\n"
	       "  --tokens N         text tokens evaluated (default 256, 2-65536)\n"
	       "  --gen N            tokens generated after the text (default 0, 0-65536)\n"
	       "  --json             one JSON object instead of the tables\n"
	       "  -h, --help         this help\n");
}

int pt_cmd_routing(int argc, char **argv)
{
	const char *model = NULL;
	uint64_t n = 256, gen = 0;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			help();
			return PT_EXIT_OK;
		} else if (!strcmp(f, "--json")) {
			json = true;
		} else if (!strcmp(f, "-m") || !strcmp(f, "--model") || !strcmp(f, "--tokens") ||
			   !strcmp(f, "--gen")) {
			if (!v) {
				pt_cli_error("%s needs a value", f);
				return PT_EXIT_USAGE;
			}
			i++;
			if (f[1] == 'm' || f[2] == 'm')
				model = v;
			else if (f[2] == 'g' && !pt_cli_parse_u64(f, v, 0, 65536, &gen))
				return PT_EXIT_USAGE;
			else if (f[2] == 't' && !pt_cli_parse_u64(f, v, 2, 65536, &n))
				return PT_EXIT_USAGE;
		} else {
			pt_cli_error("unknown option '%s' (see 'particle routing --help')", f);
			return PT_EXIT_USAGE;
		}
	}
	if (!model) {
		pt_cli_error("routing: -m MODEL is required");
		return PT_EXIT_USAGE;
	}
	return pt_cli_routing_report(model, (uint32_t)n, (uint32_t)gen, json, stdout);
}
