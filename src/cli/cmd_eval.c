/* cmd_eval.c - `particle eval`: teacher-forced evaluation of a token sequence.  Prints one
 * JSON line per position with the top-K next-token log-probabilities, optionally writes the
 * raw logits and compares against an oracle dump (mean/max KL, top-1 agreement). */
#include "cli/cli.h"
#include "cli/models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen/engine.h"
#include "gen/kv.h"
#include "kern/pool.h"
#include "model/compare.h"
#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"
#include "util/safefile.h"

struct eval_args {
	const char *model, *prompt, *tokens, *tokens_file, *logits_out, *probs_out, *compare;
	struct pt_cli_gpu gpu; /* --gpu and friends (issue 16) */
	uint64_t top, threads, batch, n_ctx;
	enum pt_kv_type kv_type;
	double max_mean_kl, min_top1;
	struct pt_engine_opts eo; /* --memory, --expert-slots, --io, ... */
	const char *stats_json;
};

static void help(void)
{
	printf("usage: particle eval -m MODEL (--prompt TEXT | --tokens 1,2,3 | --tokens-file F)\n"
	       "                     [options]\n\n"
	       "Runs the model teacher-forced over the tokens and prints one JSON line per\n"
	       "position: {\"pos\":P,\"token\":T,\"top\":[[id,logprob],...]} (the distribution of the\n"
	       "token after position P).\n\n"
	       "  -m, --model FILE       GGUF model, or a name in the models directory (required)\n"
	       "  --prompt TEXT          text, tokenized with the model's tokenizer (BOS/EOS as the\n"
	       "                         vocabulary asks, special-token text parsed)\n"
	       "  --tokens LIST          token ids separated by commas or spaces\n"
	       "  --tokens-file FILE     token ids separated by commas or whitespace\n"
	       "  --top K                log-probabilities printed per position (default 5, 0-100)\n"
	       "  --logits-out FILE      write raw float32 logits [positions][n_vocab]\n"
	       "  --probs-out FILE       write float32 probabilities [positions][n_vocab] (the\n"
	       "                         oracle's layout, usable as a --compare reference)\n"
	       "  --compare FILE         float32 probabilities [positions][n_vocab] from\n"
	       "                         tools/oracle/oracle.mjs eval (or --probs-out) to compare\n"
	       "                         with; prints mean/max KL(reference||particle) and top-1\n"
	       "                         agreement on stderr\n"
	       "  --max-mean-kl X        with --compare: fail (exit 1) if mean KL > X (default 1e-3)\n"
	       "  --min-top1 X           with --compare: fail if top-1 agreement < X (default 0.98)\n"
	       "  --threads N            threads (default: online CPUs)\n"
	       "  --kv-type f16|f32|q8_0 KV cache type (default f16, as llama.cpp)\n"
	       "  --batch N              prefill chunk size in tokens (default 128, 1-4096)\n"
	       "  --ctx N                context size (default: number of tokens)\n"
	       "  --memory SIZE          memory budget for the whole process (e.g. 6G; default:\n"
	       "                         cgroup limit / MemAvailable less headroom)\n"
	       "  --expert-slots N       expert cache slots per MoE layer (default: planned from\n"
	       "                         the budget; at least top-k)\n"
	       "  --io MODE              direct | buffered | mmap (default: mmap when every expert\n"
	       "                         fits the budget and --expert-slots is not given, else\n"
	       "                         direct: io_uring or a pread pool, O_DIRECT; mmap = the\n"
	       "                         llama.cpp-like baseline)\n"
	       "  --cache-policy P       lfu | lru (default lfu)\n"
	       "  --pack FILE            expert pack (default MODEL.xpack when present and\n"
	       "                         matching the model)\n"
	       "  --pack-cache DIR       lazy pack cache on fast disk for slow media\n"
	       "  --pack-cache-size SIZE cap of the pack cache (default 4G)\n"
	       "  --trace-experts FILE   write the routing trace (for particle cachesim)\n"
	       "  --stats-json FILE      write the counters (per layer and total) as JSON\n"
	       "  --gpu                  run on the CUDA backend (make CUDA=1 builds): resident\n"
	       "                         core and KV cache in VRAM, experts all resident or in\n"
	       "                         a VRAM cache (--cache-policy); chunks of 256 tokens\n"
	       "  --gpu-layers N|all     layers on the GPU (only all for now; implies --gpu)\n"
	       "  --vram SIZE            device memory budget (implies --gpu)\n"
	       "  --gpu-device I         CUDA device ordinal (default 0; implies --gpu)\n"
	       "  --gpu-expert-slots N   expert slots per MoE layer in VRAM (default: planned\n"
	       "                         from --vram; top-k to n_expert; implies --gpu)\n"
	       "  --no-lock              do not take the single-process model lock\n"
	       "  --no-profile           do not read or write the expert-popularity profile\n"
	       "  --repack               Q4_K, Q6_K, Q8_0 and Q5_0 matrices with rows\n"
	       "                         interleaved 16 at a time: copied at load (routed\n"
	       "                         experts too when mapped in RAM), or read so from an\n"
	       "                         expert pack written by `particle pack --repack`, or\n"
	       "                         streamed as stored and computed in the same numerics\n"
	       "  --no-repack            every matrix as stored (the default here)\n"
	       "  --verbose              plan line, I/O engine and model card at start, the\n"
	       "                         counters at the end (stderr)\n"
	       "  -h, --help             this help\n");
}

static int parse_args(int argc, char **argv, struct eval_args *a)
{
	memset(a, 0, sizeof(*a));
	a->eo.use_profile = true; /* --no-profile turns it off */
	a->top = 5;
	a->batch = 128;
	a->max_mean_kl = 1e-3;
	a->min_top1 = 0.98;
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	a->threads = nc > 0 ? (uint64_t)nc : 1;
	for (int i = 1; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			help();
			return -1;
		}
		if (pt_cli_engine_opts_switch(f, true, &a->eo)) {
			i--; /* no value */
			continue;
		}
		const int g = pt_cli_gpu_flag(f, v, &a->gpu);
		if (g < 0)
			return PT_EXIT_USAGE;
		if (g) {
			i += g - 2; /* the loop steps by 2 */
			continue;
		}
		if (f[0] != '-') {
			pt_cli_error("unexpected argument '%s' (see 'particle eval --help')", f);
			return PT_EXIT_USAGE;
		}
		if (!v) {
			pt_cli_error("%s needs a value", f);
			return PT_EXIT_USAGE;
		}
		const int eng = pt_cli_engine_flag(f, v, &a->eo);
		if (eng < 0)
			return PT_EXIT_USAGE;
		if (eng > 0) {
			continue;
		} else if (!strcmp(f, "-m") || !strcmp(f, "--model")) {
			a->model = v;
		} else if (!strcmp(f, "--prompt")) {
			a->prompt = v;
		} else if (!strcmp(f, "--tokens")) {
			a->tokens = v;
		} else if (!strcmp(f, "--tokens-file")) {
			a->tokens_file = v;
		} else if (!strcmp(f, "--logits-out")) {
			a->logits_out = v;
		} else if (!strcmp(f, "--probs-out")) {
			a->probs_out = v;
		} else if (!strcmp(f, "--compare")) {
			a->compare = v;
		} else if (!strcmp(f, "--top")) {
			if (!pt_cli_parse_u64(f, v, 0, 100, &a->top))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--threads")) {
			if (!pt_cli_parse_u64(f, v, 1, PT_POOL_MAX_THREADS, &a->threads))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--batch")) {
			if (!pt_cli_parse_u64(f, v, 1, 4096, &a->batch))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--ctx")) {
			if (!pt_cli_parse_u64(f, v, 1, 1u << 24, &a->n_ctx))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--max-mean-kl")) {
			if (!pt_cli_parse_f64(f, v, 0, 1e9, &a->max_mean_kl))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--min-top1")) {
			if (!pt_cli_parse_f64(f, v, 0, 1, &a->min_top1))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--pack")) {
			a->eo.pack_path = v;
		} else if (!strcmp(f, "--pack-cache")) {
			a->eo.pack_cache_dir = v;
		} else if (!strcmp(f, "--pack-cache-size")) {
			if (!pt_cli_parse_size(f, v, &a->eo.pack_cache_size))
				return PT_EXIT_USAGE;
		} else if (!strcmp(f, "--trace-experts")) {
			a->eo.trace_path = v;
		} else if (!strcmp(f, "--stats-json")) {
			a->stats_json = v;
		} else if (!strcmp(f, "--kv-type")) {
			if (pt_kv_type_from_name(v, &a->kv_type) != 0) {
				pt_cli_error("--kv-type must be f16, f32 or q8_0, got '%s'", v);
				return PT_EXIT_USAGE;
			}
		} else {
			pt_cli_error("unknown option '%s' (see 'particle eval --help')", f);
			return PT_EXIT_USAGE;
		}
	}
	if (!a->model) {
		pt_cli_error("eval: -m MODEL is required");
		return PT_EXIT_USAGE;
	}
	a->model = pt_cli_model_path(a->model); /* a name in the models directory */
	if (!!a->prompt + !!a->tokens + !!a->tokens_file != 1) {
		pt_cli_error("eval: give exactly one of --prompt, --tokens, --tokens-file");
		return PT_EXIT_USAGE;
	}
	return pt_cli_gpu_ready(&a->gpu, a->eo.repack);
}

/* Parses ids separated by commas/whitespace; *out is pt_malloc'd. */
static int parse_ids(const char *what, const char *s, uint32_t **out, uint32_t *n)
{
	size_t cap = 64, len = 0;
	uint32_t *ids = pt_mallocn(cap, sizeof(*ids));
	if (!ids)
		return PT_EXIT_FAIL;
	while (*s) {
		while (*s == ',' || *s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
			s++;
		if (!*s)
			break;
		char *end;
		unsigned long long v = strtoull(s, &end, 10);
		if (end == s || v > UINT32_MAX || *s == '-') {
			pt_cli_error("%s: bad token id at '%.20s'", what, s);
			pt_free(ids);
			return PT_EXIT_USAGE;
		}
		if (len == cap) {
			uint32_t *g = pt_reallocn(ids, cap * 2, sizeof(*ids));
			if (!g) {
				pt_free(ids);
				return PT_EXIT_FAIL;
			}
			ids = g;
			cap *= 2;
		}
		ids[len++] = (uint32_t)v;
		s = end;
	}
	if (len == 0) {
		pt_cli_error("%s: no token ids", what);
		pt_free(ids);
		return PT_EXIT_USAGE;
	}
	*out = ids;
	*n = (uint32_t)len;
	return 0;
}

static int read_file_text(const char *path, char **out)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		pt_cli_error("cannot open %s", path);
		return PT_EXIT_USAGE;
	}
	size_t cap = 4096, len = 0;
	char *buf = pt_malloc(cap);
	while (buf) {
		size_t r = fread(buf + len, 1, cap - len - 1, fp);
		len += r;
		if (r == 0)
			break;
		if (len + 1 == cap) {
			char *g = pt_realloc(buf, cap * 2);
			if (!g) {
				pt_free(buf);
				buf = NULL;
				break;
			}
			buf = g;
			cap *= 2;
		}
	}
	fclose(fp);
	if (!buf)
		return PT_EXIT_FAIL;
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* Prints the top-k log-probabilities of one logit row (log-softmax in double). */
static void print_row(uint32_t pos, uint32_t tok, const float *l, uint32_t nv, uint32_t k,
		      int *idx)
{
	double mx = -INFINITY, sum = 0;
	for (uint32_t i = 0; i < nv; i++)
		mx = l[i] > mx ? l[i] : mx;
	for (uint32_t i = 0; i < nv; i++)
		sum += exp((double)l[i] - mx);
	const double lse = mx + log(sum);
	uint32_t kk = k < nv ? k : nv;
	printf("{\"pos\":%u,\"token\":%u,\"top\":[", pos, tok);
	if (kk) {
		/* partial selection: k is small */
		for (uint32_t j = 0; j < kk; j++) {
			int best = -1;
			for (uint32_t i = 0; i < nv; i++) {
				bool used = false;
				for (uint32_t u = 0; u < j && !used; u++)
					used = idx[u] == (int)i;
				if (!used && (best < 0 || l[i] > l[best]))
					best = (int)i;
			}
			idx[j] = best;
			printf("%s[%d,%.6f]", j ? "," : "", best, (double)l[best] - lse);
		}
	}
	printf("]}\n");
}

/* log-softmax of one row in double into out. */
static void log_softmax(const float *l, uint32_t nv, double *out)
{
	double mx = -INFINITY, sum = 0;
	for (uint32_t i = 0; i < nv; i++)
		mx = l[i] > mx ? l[i] : mx;
	for (uint32_t i = 0; i < nv; i++)
		sum += exp((double)l[i] - mx);
	const double lse = mx + log(sum);
	for (uint32_t i = 0; i < nv; i++)
		out[i] = (double)l[i] - lse;
}

/* Softmax of every row (double sum) as float32: the oracle's layout.  out[n][nv]. */
static enum pt_status to_probs(const float *l, uint32_t n, uint32_t nv, float *out,
			       struct pt_error *err)
{
	double *lq = pt_mallocn(nv, sizeof(double));
	if (!lq)
		return pt_error_set(err, PT_E_NOMEM, "cannot allocate %u doubles", nv);
	for (uint32_t r = 0; r < n; r++) {
		log_softmax(l + (size_t)r * nv, nv, lq);
		for (uint32_t i = 0; i < nv; i++)
			out[(size_t)r * nv + i] = (float)exp(lq[i]);
	}
	pt_free(lq);
	return PT_OK;
}

/* --logits-out / --probs-out name outputs: replaced by rename (safefile.h), never written
 * through a symlink or hard link standing at the name. */
static int write_floats(const char *path, const float *l, size_t count)
{
	struct pt_safe_file out;
	struct pt_error err = { 0 };
	enum pt_status st = pt_safe_output(&out, path, &err);
	if (st == PT_OK)
		st = pt_safe_write(&out, l, count * sizeof(float), &err);
	if (st == PT_OK)
		st = pt_safe_commit(&out, &err);
	else
		pt_safe_abort(&out);
	if (st != PT_OK) {
		pt_cli_error("%s", err.msg);
		return PT_EXIT_FAIL;
	}
	return 0;
}

/* --prompt: the model's own tokenizer, BOS/EOS as the vocabulary asks, special-token
 * text parsed (llama.cpp's common_tokenize(add_special, parse_special)). */
static enum pt_status prompt_ids(const pt_tok *tok, const char *prompt, uint32_t **ids,
				 uint32_t *n, struct pt_error *err)
{
	int32_t *raw = NULL;
	size_t cnt = 0;
	enum pt_status st = pt_tok_encode_alloc(tok, prompt, strlen(prompt), true, true, &raw,
						&cnt, err);
	if (st == PT_OK && (cnt == 0 || cnt > UINT32_MAX))
		st = pt_error_set(err, PT_E_INVALID, "--prompt gives %zu tokens", cnt);
	if (st != PT_OK) {
		pt_free(raw);
		return st;
	}
	/* ids are checked against the vocabulary by the forward pass */
	*ids = (uint32_t *)raw;
	*n = (uint32_t)cnt;
	return PT_OK;
}

static int get_tokens(const struct eval_args *a, uint32_t **ids, uint32_t *n)
{
	if (a->prompt)
		return 0; /* after the model is open */
	if (a->tokens)
		return parse_ids("--tokens", a->tokens, ids, n);
	char *text = NULL;
	int rc = read_file_text(a->tokens_file, &text);
	if (rc)
		return rc;
	rc = parse_ids(a->tokens_file, text, ids, n);
	pt_free(text);
	return rc;
}

/* The reference (tools/oracle/oracle.mjs eval, or --probs-out): float32 probabilities
 * [positions][n_vocab]; *out is pt_malloc'd. */
static int read_ref(const char *path, uint32_t n, uint32_t nv, float **out)
{
	const size_t cnt = (size_t)n * nv;
	float *ref = pt_mallocn(cnt, sizeof(float));
	FILE *fp = fopen(path, "rb");
	int rc = 0;
	if (!ref) {
		pt_cli_error("--compare: out of memory");
		rc = PT_EXIT_FAIL;
	} else if (!fp || fread(ref, sizeof(float), cnt, fp) != cnt || fgetc(fp) != EOF) {
		pt_cli_error("--compare: %s is not %u x %u float32 probabilities", path, n, nv);
		rc = PT_EXIT_USAGE;
	}
	if (fp)
		fclose(fp);
	if (rc) {
		pt_free(ref);
		return rc;
	}
	*out = ref;
	return 0;
}

static int compare(const struct eval_args *a, const float *probs, uint32_t n, uint32_t nv)
{
	float *ref = NULL;
	int rc = read_ref(a->compare, n, nv, &ref);
	if (rc)
		return rc;
	struct pt_compare_stats r;
	struct pt_error err = { 0 };
	enum pt_status st = pt_compare_dists(ref, probs, n, nv, &r, &err);
	pt_free(ref);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	const bool pass = r.kl_mean <= a->max_mean_kl && r.top1_agree >= a->min_top1;
	fprintf(stderr,
		"compare: positions %llu mean_kl %.3e max_kl %.3e top1 %.4f max_dlogp_top10 %.3e "
		"(%s; limits mean_kl <= %g, top1 >= %g)\n", (unsigned long long)r.positions,
		r.kl_mean, r.kl_max, r.top1_agree, r.max_dlogp_top10, pass ? "pass" : "FAIL",
		a->max_mean_kl, a->min_top1);
	return pass ? 0 : PT_EXIT_FAIL;
}

static int report(const struct eval_args *a, const uint32_t *ids, uint32_t n, const float *l,
		  uint32_t nv)
{
	int idx[100];
	for (uint32_t p = 0; p < n; p++)
		print_row(p, ids[p], l + (size_t)p * nv, nv, (uint32_t)a->top, idx);
	int rc = a->logits_out ? write_floats(a->logits_out, l, (size_t)n * nv) : 0;
	if (rc || (!a->probs_out && !a->compare))
		return rc;
	float *probs = pt_mallocn((size_t)n * nv, sizeof(float));
	struct pt_error err = { 0 };
	if (!probs) {
		pt_cli_error("cannot allocate %u x %u probabilities", n, nv);
		return PT_EXIT_FAIL;
	}
	if (to_probs(l, n, nv, probs, &err) != PT_OK)
		rc = pt_cli_fail(&err);
	if (!rc && a->probs_out)
		rc = write_floats(a->probs_out, probs, (size_t)n * nv);
	if (!rc && a->compare)
		rc = compare(a, probs, n, nv);
	pt_free(probs);
	return rc;
}

/* Opens the engine.  With --prompt the context size is only known after tokenizing, so the
 * engine is opened for the tokenizer, then reopened at that size when it differs. */
static enum pt_status open_engine(struct eval_args *a, uint32_t **ids, uint32_t *n,
				  pt_engine **e, struct pt_error *err)
{
	a->eo.model_path = a->model;
	a->eo.threads = (uint32_t)a->threads;
	a->eo.n_batch = (uint32_t)a->batch;
	a->eo.kv_type = a->kv_type;
	a->eo.log = a->eo.verbose ? stderr : NULL; /* errors stay one line otherwise */
	a->eo.n_ctx = (uint32_t)(a->n_ctx ? a->n_ctx : *n);
	if (!a->prompt)
		return pt_engine_open(&a->eo, e, err);
	struct pt_engine_opts quiet = a->eo;
	quiet.log = NULL;
	quiet.n_ctx = a->n_ctx ? (uint32_t)a->n_ctx : 0;
	enum pt_status st = pt_engine_open(&quiet, e, err);
	if (st == PT_OK)
		st = prompt_ids(pt_engine_tok(*e), a->prompt, ids, n, err);
	if (st != PT_OK || a->n_ctx) {
		if (st == PT_OK && a->eo.log)
			fprintf(a->eo.log, "particle: plan: %s\n", pt_engine_plan_line(*e));
		return st;
	}
	pt_engine_close(*e);
	*e = NULL;
	a->eo.n_ctx = *n;
	return pt_engine_open(&a->eo, e, err);
}

int pt_cmd_eval(int argc, char **argv)
{
	struct eval_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? PT_EXIT_OK : rc;
	uint32_t *ids = NULL, n = 0;
	rc = get_tokens(&a, &ids, &n);
	if (rc)
		return rc;
	struct pt_error err = { 0 };
	pt_engine *e = NULL;
	float *logits = NULL;
	enum pt_status st = open_engine(&a, &ids, &n, &e, &err);
	const uint32_t nv = e ? pt_engine_n_vocab(e) : 0;
	if (st == PT_OK) {
		logits = pt_mallocn((size_t)n * nv, sizeof(float));
		if (!logits)
			st = pt_error_set(&err, PT_E_NOMEM, "cannot allocate %u x %u logits", n, nv);
	}
	if (st == PT_OK && a.gpu.on) { /* the CUDA backend on the engine's model */
		rc = pt_cli_gpu_eval(&a.gpu, pt_engine_model(e), a.eo.n_ctx, a.eo.cache_policy,
				     a.eo.verbose ? stderr : NULL, ids, n, logits);
		if (rc == 0)
			rc = report(&a, ids, n, logits, nv);
		pt_free(logits);
		pt_engine_close(e);
		pt_free(ids);
		return rc;
	}
	if (st == PT_OK)
		st = pt_engine_eval(e, ids, n, logits, true, &err);
	if (st == PT_OK && a.stats_json)
		st = pt_engine_write_stats_json(e, a.stats_json, &err);
	if (st == PT_OK && a.eo.verbose)
		pt_engine_print_stats(e, stderr);
	rc = st == PT_OK ? report(&a, ids, n, logits, nv) : pt_cli_fail(&err);
	pt_free(logits);
	pt_engine_close(e);
	pt_free(ids);
	return rc;
}
