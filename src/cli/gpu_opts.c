/* gpu_opts.c - the GPU flags shared by run, eval and bench (issue 16): --gpu,
 * --gpu-layers N|all, --vram SIZE, --gpu-device I.  Any of them asks for the CUDA backend.
 *
 * A CPU-only build (the default `make`) refuses them with how to get a CUDA build.  A
 * `make CUDA=1` build opens the device and reports a missing driver, a missing device or an
 * out-of-range --gpu-device as one line with the numbers.  `eval` then runs on the GPU
 * (src/cuda/gpu_fwd.h, all layers: --gpu-layers N < all is refused); `run` and `bench`
 * install the same forward pass as the engine's (pt_cli_gpu_attach), so prompt and decode
 * run on the device (prompts in chunks of 256 tokens, decode one step per token) while
 * the engine keeps the history,
 * sampling and templates. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gen/engine.h"
#include "model/model.h"
#include "util/alloc.h"
#ifdef PT_CUDA
#include "cuda/gpu.h"
#include "cuda/gpu_fwd.h"
#include "expert/cache.h"
#endif

int pt_cli_gpu_flag(const char *f, const char *v, struct pt_cli_gpu *g)
{
	if (!strcmp(f, "--gpu")) {
		g->on = true;
		return 1;
	}
	if (strcmp(f, "--gpu-layers") && strcmp(f, "--vram") && strcmp(f, "--gpu-device") &&
	    strcmp(f, "--gpu-expert-slots"))
		return 0;
	if (!v) {
		pt_cli_error("%s needs a value", f);
		return -1;
	}
	g->on = true;
	uint64_t x;
	if (!strcmp(f, "--gpu-layers")) {
		g->layers_set = true;
		if (!strcmp(v, "all")) {
			g->layers = -1;
			return 2;
		}
		if (!pt_cli_parse_u64(f, v, 0, 65535, &x))
			return -1;
		g->layers = (int64_t)x;
		return 2;
	}
	if (!strcmp(f, "--vram")) {
		if (!pt_cli_parse_size(f, v, &g->vram))
			return -1;
		if (g->vram == 0) {
			pt_cli_error("--vram must be above 0");
			return -1;
		}
		return 2;
	}
	if (!strcmp(f, "--gpu-expert-slots")) {
		if (!pt_cli_parse_u64(f, v, 1, 1u << 20, &x))
			return -1;
		g->slots = (uint32_t)x;
		return 2;
	}
	if (!pt_cli_parse_u64(f, v, 0, 255, &x))
		return -1;
	g->device = (int)x;
	return 2;
}

#ifdef PT_CUDA
/* The device opened and the budget checked against its free memory. */
static int device_usable(const struct pt_cli_gpu *g, struct pt_gpu_info *info)
{
	struct pt_error err = { 0 };
	enum pt_status st = pt_gpu_open(g->device, info, &err);
	if (st != PT_OK) {
		pt_cli_error("--gpu: %s", err.msg);
		return PT_EXIT_FAIL;
	}
	const double gib = 1073741824.0;
	if (g->vram > info->free_bytes) {
		pt_cli_error("--vram %.2f GiB exceeds the %.2f GiB free on CUDA device %d (%s)",
			     g->vram / gib, info->free_bytes / gib, info->device, info->name);
		return PT_EXIT_FAIL;
	}
	return 0;
}
#endif

int pt_cli_gpu_ready(const struct pt_cli_gpu *g, bool repack)
{
	if (!g->on)
		return PT_EXIT_OK;
	if (repack) { /* the device uploads the weights as stored */
		pt_cli_error("--repack and --gpu cannot be combined");
		return PT_EXIT_USAGE;
	}
#ifndef PT_CUDA
	pt_cli_error("this build has no CUDA backend; rebuild with make CUDA=1");
	return PT_EXIT_USAGE;
#else
	struct pt_gpu_info info;
	const int rc = device_usable(g, &info);
	if (rc == 0 && g->layers_set && g->layers >= 0) {
		pt_cli_error("--gpu-layers %lld: only all layers on the GPU are supported yet "
			     "(--gpu-layers all)", (long long)g->layers);
		return PT_EXIT_USAGE;
	}
	return rc;
#endif
}

int pt_cli_gpu_eval(const struct pt_cli_gpu *g, const struct pt_model *m, uint32_t n_ctx,
		    const char *policy, FILE *log, const uint32_t *ids, uint32_t n, float *logits)
{
#ifndef PT_CUDA
	(void)g, (void)m, (void)n_ctx, (void)policy, (void)log, (void)ids, (void)n, (void)logits;
	pt_cli_error("this build has no CUDA backend; rebuild with make CUDA=1");
	return PT_EXIT_USAGE;
#else
	struct pt_error err = { 0 };
	enum pt_cache_policy pol = PT_CACHE_LFU;
	if (m->n_repack) { /* the device uploads the weights as stored */
		pt_cli_error("--repack and --gpu cannot be combined");
		return PT_EXIT_USAGE;
	}
	if (policy && pt_cache_policy_parse(policy, &pol, &err) != PT_OK)
		return pt_cli_fail(&err);
	struct pt_gpu_fwd_opts o = { g->device, g->vram, n_ctx, g->slots, (int)pol, log };
	pt_gpu_fwd *gf = NULL;
	enum pt_status st = pt_gpu_fwd_create(m, &o, &gf, &err);
	if (st == PT_OK)
		st = pt_gpu_fwd_eval(gf, ids, n, logits, true, &err);
	if (st == PT_OK && log) {
		struct pt_gpu_fwd_stats s;
		pt_gpu_fwd_stats(gf, &s);
		const uint64_t req = s.hits + s.misses;
		char how[64] = "one decode step each";
		if (s.prefill_chunk)
			snprintf(how, sizeof how, "in chunks of %u", s.prefill_chunk);
		fprintf(log, "particle: gpu: %llu tokens in %.3f s (%.1f tok/s, %s), expert hits "
			"%llu misses %llu (hit rate %.3f), %.1f MiB copied to the device (%.3f "
			"MiB/token), %u slots/layer%s\n",
			(unsigned long long)s.tokens, s.seconds, s.seconds > 0 ? s.tokens / s.seconds
									       : 0.0, how,
			(unsigned long long)s.hits, (unsigned long long)s.misses,
			req ? (double)s.hits / (double)req : 1.0, s.bytes_copied / 1048576.0,
			s.tokens ? s.bytes_copied / 1048576.0 / (double)s.tokens : 0.0,
			s.slots_per_layer, s.all_resident ? " (every expert resident)" : "");
	}
	pt_gpu_fwd_destroy(gf);
	return st == PT_OK ? 0 : pt_cli_fail(&err);
#endif
}

struct pt_cli_gpu_run {
#ifdef PT_CUDA
	pt_gpu_fwd *gf;
#endif
	int unused;
};

#ifdef PT_CUDA
static enum pt_status dev_eval(void *ctx, const uint32_t *tokens, uint32_t n, float *logits,
			       bool all, struct pt_error *err)
{
	return pt_gpu_fwd_eval((pt_gpu_fwd *)ctx, tokens, n, logits, all, err);
}

static int64_t dev_pos(void *ctx)
{
	return pt_gpu_fwd_pos((pt_gpu_fwd *)ctx);
}

static enum pt_status dev_truncate(void *ctx, int64_t pos, struct pt_error *err)
{
	return pt_gpu_fwd_truncate((pt_gpu_fwd *)ctx, pos, err);
}
#endif

int pt_cli_gpu_attach(const struct pt_cli_gpu *g, struct pt_engine *e, const char *policy,
		      FILE *log, struct pt_cli_gpu_run **out)
{
	*out = NULL;
#ifndef PT_CUDA
	(void)g, (void)e, (void)policy, (void)log;
	pt_cli_error("this build has no CUDA backend; rebuild with make CUDA=1");
	return PT_EXIT_USAGE;
#else
	struct pt_error err = { 0 };
	enum pt_cache_policy pol = PT_CACHE_LFU;
	if (pt_engine_model(e)->n_repack) { /* the device uploads the weights as stored */
		pt_cli_error("--repack and --gpu cannot be combined");
		return PT_EXIT_USAGE;
	}
	if (policy && pt_cache_policy_parse(policy, &pol, &err) != PT_OK)
		return pt_cli_fail(&err);
	struct pt_cli_gpu_run *r = pt_calloc(1, sizeof *r);
	if (!r) {
		pt_cli_error("out of memory");
		return PT_EXIT_FAIL;
	}
	struct pt_gpu_fwd_opts o = { g->device, g->vram, pt_engine_n_ctx(e), g->slots, (int)pol,
				     log };
	enum pt_status st = pt_gpu_fwd_create(pt_engine_model(e), &o, &r->gf, &err);
	if (st != PT_OK) {
		pt_free(r);
		return pt_cli_fail(&err);
	}
	const struct pt_engine_device dev = { r->gf, dev_eval, dev_pos, dev_truncate };
	pt_engine_set_device(e, &dev);
	*out = r;
	return 0;
#endif
}

void pt_cli_gpu_detach(struct pt_cli_gpu_run *r, struct pt_engine *e)
{
	if (!r)
		return;
	if (e)
		pt_engine_set_device(e, NULL);
#ifdef PT_CUDA
	pt_gpu_fwd_destroy(r->gf);
#endif
	pt_free(r);
}

void pt_cli_gpu_counters(struct pt_cli_gpu_run *r, struct pt_cli_gpu_counters *c)
{
	memset(c, 0, sizeof *c);
#ifdef PT_CUDA
	if (!r)
		return;
	struct pt_gpu_fwd_stats s;
	pt_gpu_fwd_stats(r->gf, &s);
	c->hits = s.hits;
	c->misses = s.misses;
	c->bytes_copied = s.bytes_copied;
	c->tokens = s.tokens;
	c->seconds = s.seconds;
	c->slots_per_layer = s.slots_per_layer;
	c->all_resident = s.all_resident;
	c->prefill_chunk = s.prefill_chunk;
#else
	(void)r;
#endif
}

double pt_cli_gpu_h2d_bw(void)
{
#ifdef PT_CUDA
	struct pt_error err = { 0 };
	double bps = 0.0;
	return pt_gpu_h2d_bandwidth(&bps, &err) == PT_OK ? bps : 0.0;
#else
	return 0.0;
#endif
}
