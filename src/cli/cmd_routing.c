/* cmd_routing.c - `particle routing`: how a model routes a fixed text.  Evaluates a
 * deterministic text (the first N tokens of it) through the engine and reports per MoE
 * layer the distinct experts used, the entropy of expert popularity (and normalised by
 * log n_expert) and the mean overlap of consecutive tokens' expert sets.  A run whose
 * routing is degenerate (few experts, heavy overlap) proves nothing about streaming, so
 * every benchmark prints this beside its numbers. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/engine.h"
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

struct route_acc {
	uint32_t n_layer, n_expert, k;
	uint64_t *count;   /* [n_layer][n_expert] */
	int32_t *prev;     /* [n_layer][k] previous token's experts (-1: none) */
	double *overlap;   /* [n_layer] sum of |A n B| / k over consecutive pairs */
	uint64_t *pairs;   /* [n_layer] */
	uint64_t *tokens;  /* [n_layer] */
};

static void observe(void *ctx, uint32_t layer, int64_t pos0, uint32_t n, uint32_t k,
		    const int *ids)
{
	struct route_acc *a = ctx;
	(void)pos0;
	if (layer >= a->n_layer || k != a->k)
		return;
	uint64_t *cnt = a->count + (size_t)layer * a->n_expert;
	int32_t *prev = a->prev + (size_t)layer * k;
	for (uint32_t r = 0; r < n; r++) {
		const int *row = ids + (size_t)r * k;
		uint32_t same = 0;
		for (uint32_t j = 0; j < k; j++) {
			if (row[j] >= 0 && (uint32_t)row[j] < a->n_expert)
				cnt[row[j]]++;
			for (uint32_t i = 0; i < k; i++)
				same += prev[i] == row[j];
		}
		if (prev[0] >= 0) {
			a->overlap[layer] += (double)same / k;
			a->pairs[layer]++;
		}
		for (uint32_t j = 0; j < k; j++)
			prev[j] = row[j];
		a->tokens[layer]++;
	}
}

struct layer_report {
	uint32_t distinct;
	double entropy, entropy_norm, overlap;
};

static void summarize(const struct route_acc *a, uint32_t il, struct layer_report *r)
{
	const uint64_t *cnt = a->count + (size_t)il * a->n_expert;
	uint64_t total = 0;
	memset(r, 0, sizeof *r);
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
	r->overlap = a->pairs[il] ? a->overlap[il] / (double)a->pairs[il] : 0;
}

static void print_report(const struct route_acc *a, const char *model, uint32_t n_tok,
			 bool json, FILE *fp)
{
	struct layer_report r;
	double sd = 0, se = 0, so = 0;
	uint32_t nm = 0;
	if (json)
		fprintf(fp, "{\"model\": \"%s\", \"tokens\": %u, \"n_expert\": %u, \"top_k\": %u, "
			"\"layers\": [", model, n_tok, a->n_expert, a->k);
	else
		fprintf(fp, "routing: %s, %u tokens, top-%u of %u experts\n"
			"layer  distinct   used%%  entropy  entropy/ln(E)  overlap\n", model, n_tok,
			a->k, a->n_expert);
	for (uint32_t il = 0; il < a->n_layer; il++) {
		if (!a->tokens[il])
			continue;
		summarize(a, il, &r);
		if (json)
			fprintf(fp, "%s{\"layer\": %u, \"distinct\": %u, \"entropy\": %.4f, "
				"\"entropy_norm\": %.4f, \"overlap\": %.4f}", nm ? ", " : "", il,
				r.distinct, r.entropy, r.entropy_norm, r.overlap);
		else
			fprintf(fp, "%5u  %4u/%-4u  %5.1f  %7.3f  %13.3f  %7.3f\n", il, r.distinct,
				a->n_expert, 100.0 * r.distinct / a->n_expert, r.entropy,
				r.entropy_norm, r.overlap);
		sd += r.distinct;
		se += r.entropy_norm;
		so += r.overlap;
		nm++;
	}
	nm = nm ? nm : 1;
	if (json)
		fprintf(fp, "], \"mean_distinct\": %.2f, \"mean_entropy_norm\": %.4f, "
			"\"mean_overlap\": %.4f}\n", sd / nm, se / nm, so / nm);
	else
		fprintf(fp, " mean  %9.1f  %5.1f           %13.3f  %7.3f\n"
			"(overlap = mean |A n B| / k of consecutive tokens' expert sets; uniform "
			"random routing gives k/E = %.3f)\n", sd / nm, 100.0 * sd / nm / a->n_expert,
			se / nm, so / nm, (double)a->k / a->n_expert);
}

/* The first n tokens of the fixed text (repeated as needed); *out pt_malloc'd. */
static enum pt_status text_tokens(const pt_tok *tok, uint32_t n, uint32_t **out,
				  struct pt_error *err)
{
	int32_t *raw = NULL;
	size_t cnt = 0;
	enum pt_status st = pt_tok_encode_alloc(tok, routing_text, strlen(routing_text), true,
						false, &raw, &cnt, err);
	uint32_t *ids = st == PT_OK ? pt_mallocn(n, sizeof *ids) : NULL;
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

static enum pt_status acc_init(struct route_acc *a, const struct pt_hparams *hp,
			       struct pt_error *err)
{
	a->n_layer = hp->n_layer;
	a->n_expert = hp->n_expert;
	a->k = hp->n_expert_used;
	a->count = pt_calloc((size_t)a->n_layer * (a->n_expert ? a->n_expert : 1), 8);
	a->prev = pt_mallocn((size_t)a->n_layer * (a->k ? a->k : 1), sizeof *a->prev);
	a->overlap = pt_calloc(a->n_layer, sizeof *a->overlap);
	a->pairs = pt_calloc(a->n_layer, sizeof *a->pairs);
	a->tokens = pt_calloc(a->n_layer, sizeof *a->tokens);
	if (!a->count || !a->prev || !a->overlap || !a->pairs || !a->tokens)
		return pt_error_set(err, PT_E_NOMEM, "routing: counters");
	for (size_t i = 0; i < (size_t)a->n_layer * a->k; i++)
		a->prev[i] = -1;
	return hp->n_expert ? PT_OK
			    : pt_error_set(err, PT_E_INVALID, "routing: the model has no experts");
}

static void acc_free(struct route_acc *a)
{
	pt_free(a->count);
	pt_free(a->prev);
	pt_free(a->overlap);
	pt_free(a->pairs);
	pt_free(a->tokens);
}

int pt_cli_routing_report(const char *model, uint32_t n_tok, bool json, FILE *fp)
{
	struct pt_error err = { 0 };
	struct route_acc acc = { 0 };
	struct pt_engine_opts o = { .model_path = model, .n_ctx = n_tok, .io_mode = "mmap",
				    .memory_budget = 1ull << 50, .no_lock = true,
				    .on_route = observe, .route_ctx = &acc };
	pt_engine *e = NULL;
	uint32_t *ids = NULL;
	float *logits = NULL;
	enum pt_status st = pt_engine_open(&o, &e, &err);
	if (st == PT_OK)
		st = acc_init(&acc, &pt_engine_model(e)->hp, &err);
	if (st == PT_OK)
		st = text_tokens(pt_engine_tok(e), n_tok, &ids, &err);
	if (st == PT_OK && !(logits = pt_mallocn(pt_engine_n_vocab(e), sizeof(float))))
		st = pt_error_set(&err, PT_E_NOMEM, "routing: logits");
	if (st == PT_OK)
		st = pt_engine_eval(e, ids, n_tok, logits, false, &err);
	if (st == PT_OK)
		print_report(&acc, model, n_tok, json, fp);
	pt_free(logits);
	pt_free(ids);
	acc_free(&acc);
	pt_engine_close(e);
	return st == PT_OK ? PT_EXIT_OK : pt_cli_fail(&err);
}

static void help(void)
{
	printf("usage: particle routing -m MODEL [--tokens N] [--json]\n\n"
	       "Evaluates the first N tokens of a fixed deterministic text and prints, per MoE\n"
	       "layer: distinct experts used, the entropy of expert popularity (nats, and\n"
	       "normalised by ln n_expert: 1 = uniform), and the mean overlap of consecutive\n"
	       "tokens' expert sets, |A n B| / k (uniform random routing gives k / n_expert).\n\n"
	       "  -m, --model FILE   GGUF model (required)\n"
	       "  --tokens N         tokens evaluated (default 256, 2-65536)\n"
	       "  --json             one JSON object instead of the table\n"
	       "  -h, --help         this help\n");
}

int pt_cmd_routing(int argc, char **argv)
{
	const char *model = NULL;
	uint64_t n = 256;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			help();
			return PT_EXIT_OK;
		} else if (!strcmp(f, "--json")) {
			json = true;
		} else if (!strcmp(f, "-m") || !strcmp(f, "--model") || !strcmp(f, "--tokens")) {
			if (!v) {
				pt_cli_error("%s needs a value", f);
				return PT_EXIT_USAGE;
			}
			i++;
			if (f[1] == 'm' || f[2] == 'm')
				model = v;
			else if (!pt_cli_parse_u64(f, v, 2, 65536, &n))
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
	return pt_cli_routing_report(model, (uint32_t)n, json, stdout);
}
