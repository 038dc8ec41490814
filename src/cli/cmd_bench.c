/* cmd_bench.c - `particle bench`: a fixed synthetic prompt through the engine (so --memory,
 * --io and --expert-slots apply), then greedy decode.  Reports prefill and decode speed,
 * time to first token, peak RSS, expert hit rate, bytes read per token and the I/O floor:
 * missed-expert bytes per token / disk bandwidth, i.e. the fastest the disk allows. */
#include "cli/cli.h"
#include "cli/models.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "expert/probe.h"
#include "gen/decode_bytes.h"
#include "gen/engine.h"
#include "kern/membw.h"
#include "kern/pool.h"
#include "util/alloc.h"

struct bench_args {
	const char *model;
	struct pt_cli_gpu gpu; /* --gpu and friends (issue 16) */
	uint64_t prompt, gen, threads, batch;
	uint64_t probe_mib, probe_depth; /* disk probe: MiB per trial, reads in flight */
	double disk_bw_mbs; /* 0: measure */
	double membw_bps;   /* --membw-bps: memory read bandwidth for the limit (0: none) */
	uint64_t membw_mib; /* --membw: probe buffer */
	bool membw;         /* --membw: run only the memory-bandwidth probe */
	bool json;
	struct pt_engine_opts eo;
};

struct bench_result {
	double prefill_s, decode_s, ttft_s, disk_bw, disk_probe_s;
	double open_s; /* pt_engine_open: load, plan, copies, slots faulted in */
	const char *disk_how;
	uint64_t hits, misses, bytes_read;          /* whole run */
	uint64_t dec_hits, dec_misses, dec_bytes;   /* decode phase only */
	struct pt_engine_stats st;
	double dec_phase_s[5], dec_pool_wait_s; /* decode: forward-pass parts, pool barrier */
	double pre_phase_s[5], pre_wait_s;      /* prefill: forward-pass parts, read waits */
	uint64_t dec_pool_runs;
	/* read-ahead: decode's guesses of the next layer (reads, used, evicted unused,
	 * dropped unread); prefill's next waves (reads, used) */
	uint64_t dec_ahead[4], pre_ahead[2];
	double dec_wait_s, dec_busy_s, dec_head_s;  /* decode phase: blocked on reads, reads
						       in flight, output head */
	struct pt_disk_probe_result probe;
	struct pt_decode_bytes dbytes; /* per decoded token, at the decode's middle position */
	char io_engine[200]; /* st.io_engine copied: the engine is closed before the report */
	uint32_t n_batch;    /* the prefill chunk the engine ran (asked for or chosen) */
	uint32_t first_token, last_token;
	struct pt_cli_gpu_run *gpu;             /* --gpu: the device pass (else NULL) */
	struct pt_cli_gpu_counters gmid, gend;  /* its counters after prefill, at the end */
	double h2d_bw;                          /* --gpu: pinned host-to-device bytes/s */
};

static void help(void)
{
	printf("usage: particle bench -m MODEL [options]\n\n"
	       "Runs a fixed synthetic prompt (the token ids tools/oracle/oracle.mjs bench uses)\n"
	       "through the engine, then greedy decode, and reports prefill and decode tok/s,\n"
	       "time to first token, the open's time (load, plan, copies; where experts\n"
	       "stream, the expert slots faulted in), peak RSS, expert hit rate, expert bytes\n"
	       "read per decoded token and the I/O floor (those bytes / disk bandwidth, seconds\n"
	       "per token).\n\n"
	       "  -m, --model FILE       GGUF model, or a name in the models directory (required)\n"
	       "  --prompt-tokens N      prompt length (default 512)\n"
	       "  --gen N                generated tokens, greedy (default 128)\n"
	       "  --threads N            threads (default: online CPUs)\n"
	       "  --batch N              prefill chunk in tokens (default: as large as the\n"
	       "                         memory plan allows, up to 4096: each routed expert\n"
	       "                         runs once per layer and chunk over all its tokens)\n"
	       "  --memory SIZE          memory budget for the whole process (e.g. 6G; default:\n"
	       "                         cgroup limit / MemAvailable less headroom)\n"
	       "  --expert-slots N       expert cache slots per MoE layer (default: planned)\n"
	       "  --io MODE              direct | buffered | mmap (default: mmap when every\n"
	       "                         expert fits the budget and --expert-slots is not\n"
	       "                         given, else direct)\n"
	       "  --cache-policy P       lfu | lru (default lfu)\n"
	       "  --disk-bw MB/S         disk bandwidth for the I/O floor (default: measured:\n"
	       "                         the best of 4 trials before and 4 after the run,\n"
	       "                         each of 2 MiB O_DIRECT reads at random offsets of\n"
	       "                         the model file, through the expert read engine);\n"
	       "                         the rate the store's decode reads achieved while in\n"
	       "                         flight replaces either when higher (source \"store\")\n"
	       "  --probe-mib N          disk probe: MiB read per trial (default 128)\n"
	       "  --probe-depth N        disk probe: reads in flight (default 16)\n"
	       "  --gpu                  prompt and decode on the CUDA backend (make CUDA=1\n"
	       "                         builds; prompt in chunks of 256 tokens): reports the\n"
	       "                         VRAM expert hit rate, bytes copied to the device per\n"
	       "                         token and the copy floor (those bytes / the measured\n"
	       "                         pinned host-to-device bandwidth) instead of the disk\n"
	       "  --gpu-expert-slots N   expert slots per MoE layer in VRAM (default: planned\n"
	       "                         from --vram; implies --gpu)\n"
	       "  --gpu-layers N|all     layers on the GPU (default all; implies --gpu)\n"
	       "  --vram SIZE            device memory budget (implies --gpu)\n"
	       "  --gpu-device I         CUDA device ordinal (default 0; implies --gpu)\n"
	       "  --membw                only probe memory read bandwidth (no model): a\n"
	       "                         STREAM-like read of a buffer >> caches at 1 and 2\n"
	       "                         threads (and --threads), best of 5 passes\n"
	       "  --membw-mib N          the probe's buffer (default 1024)\n"
	       "  --membw-bps B          memory read bandwidth (bytes/s, e.g. from --membw) for\n"
	       "                         decode_fraction_of_membw: decode tok/s x bytes each\n"
	       "                         token reads (weights, output head, k experts per MoE\n"
	       "                         layer, KV) / B\n"
	       "  --kv-type T            f16|f32|q8_0 KV cache (default f16)\n"
	       "  --no-lock              do not take the single-process model lock\n"
	       "  --no-profile           do not read or write the expert-popularity profile\n"
	       "                         (warms the cache at start: compare cold runs with it)\n"
	       "  --repack               Q4_K, Q6_K, Q8_0 and Q5_0 matrices with rows\n"
	       "                         interleaved 16 at a time: copied at load (routed\n"
	       "                         experts too when mapped in RAM), or read so from an\n"
	       "                         expert pack written by `particle pack --repack`, or\n"
	       "                         streamed as stored and computed in the same numerics;\n"
	       "                         faster prompts and decode, a slower start (~0.6 s/GB\n"
	       "                         copied)\n"
	       "  --no-repack            every matrix as stored (the default here)\n"
	       "  --json                 one JSON object on stdout instead of text\n"
	       "  -h, --help             this help\n\n"
	       "llama-bench spellings are accepted too: -p/--n-prompt (--prompt-tokens),\n"
	       "-n/--n-gen (--gen), -t (--threads), -b/--batch-size (--batch).\n\n"
	       "Environment: PARTICLE_READ_AHEAD=0 turns off read-ahead (decode's guess of the\n"
	       "next layer's experts, a prompt chunk's next wave), PARTICLE_LEND=0 plans the\n"
	       "expert slots with the prompt chunk's buffers held for good instead of lent by\n"
	       "each long prompt (both for A/B runs);\n"
	       "PARTICLE_CPU=scalar|avx2|avx512 caps the kernels; PARTICLE_ATTN=ggml takes\n"
	       "llama.cpp's attention numerics (F16 accumulation in decode; default f32).\n");
}

static int parse_value(struct bench_args *a, const char *f, const char *v)
{
	const int eng = pt_cli_engine_flag(f, v, &a->eo);
	if (eng)
		return eng > 0 ? 0 : PT_EXIT_USAGE;
	if (!strcmp(f, "-m") || !strcmp(f, "--model"))
		a->model = v;
	else if (!strcmp(f, "--prompt-tokens") || !strcmp(f, "-p") || !strcmp(f, "--n-prompt"))
		return pt_cli_parse_u64(f, v, 1, 1u << 20, &a->prompt) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--gen") || !strcmp(f, "-n") || !strcmp(f, "--n-gen"))
		return pt_cli_parse_u64(f, v, 1, 1u << 20, &a->gen) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--threads") || !strcmp(f, "-t"))
		return pt_cli_parse_u64(f, v, 1, PT_POOL_MAX_THREADS, &a->threads) ? 0
										    : PT_EXIT_USAGE;
	else if (!strcmp(f, "--batch") || !strcmp(f, "-b") || !strcmp(f, "--batch-size"))
		return pt_cli_parse_u64(f, v, 1, 4096, &a->batch) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--probe-mib"))
		return pt_cli_parse_u64(f, v, 1, 1u << 20, &a->probe_mib) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--probe-depth"))
		return pt_cli_parse_u64(f, v, 1, 256, &a->probe_depth) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--membw-mib"))
		return pt_cli_parse_u64(f, v, 1, 1u << 20, &a->membw_mib) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--membw-bps"))
		return pt_cli_parse_f64(f, v, 1, 1e15, &a->membw_bps) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--disk-bw"))
		return pt_cli_parse_f64(f, v, 1e-3, 1e9, &a->disk_bw_mbs) ? 0 : PT_EXIT_USAGE;
	else if (!strcmp(f, "--kv-type")) {
		if (pt_kv_type_from_name(v, &a->eo.kv_type) != 0) {
			pt_cli_error("bench: --kv-type wants f16, f32 or q8_0, got '%.40s'", v);
			return PT_EXIT_USAGE;
		}
	} else {
		pt_cli_error("unknown option '%s' (see 'particle bench --help')", f);
		return PT_EXIT_USAGE;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	memset(a, 0, sizeof(*a));
	a->prompt = 512;
	a->eo.use_profile = true; /* --no-profile turns it off */
	a->gen = 128;
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	a->threads = nc > 0 ? (uint64_t)nc : 1;
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i];
		if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			help();
			return -1;
		}
		if (pt_cli_engine_opts_switch(f, false, &a->eo))
			continue;
		if (!strcmp(f, "--membw") || !strcmp(f, "--json")) {
			*(f[2] == 'm' ? &a->membw : &a->json) = true;
			continue;
		}
		const int g = pt_cli_gpu_flag(f, i + 1 < argc ? argv[i + 1] : NULL, &a->gpu);
		if (g < 0)
			return PT_EXIT_USAGE;
		if (g) {
			i += g - 1;
			continue;
		}
		if (f[0] != '-') {
			pt_cli_error("unexpected argument '%s' (see 'particle bench --help')", f);
			return PT_EXIT_USAGE;
		}
		if (i + 1 >= argc) {
			pt_cli_error("%s needs a value", f);
			return PT_EXIT_USAGE;
		}
		int rc = parse_value(a, f, argv[++i]);
		if (rc)
			return rc;
	}
	if (!a->membw_mib)
		a->membw_mib = 1024;
	if (!a->model && !a->membw) {
		pt_cli_error("bench: -m MODEL is required");
		return PT_EXIT_USAGE;
	}
	a->model = pt_cli_model_path(a->model); /* a name in the models directory */
	return pt_cli_gpu_ready(&a->gpu, a->eo.repack);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --disk-bw, or the probe (src/expert/probe.h), once before the run and once after it
 * (again: the disk's bandwidth on a shared host swings within seconds); the best trial of
 * both is the floor's bandwidth, the median and the trials are reported beside it. */
static enum pt_status measure_disk(const struct bench_args *a, struct bench_result *r,
				   bool again, struct pt_error *err)
{
	struct pt_disk_probe_result more;
	if (a->disk_bw_mbs > 0) {
		r->disk_bw = a->disk_bw_mbs * 1e6;
		r->disk_how = "--disk-bw";
		return PT_OK;
	}
	struct pt_disk_probe_config pc = { .path = a->model, .trial_bytes = a->probe_mib << 20,
					   .depth = (uint32_t)a->probe_depth };
	enum pt_status st = pt_disk_probe(&pc, again ? &more : &r->probe, err);
	if (st != PT_OK)
		return st;
	if (again)
		pt_disk_probe_merge(&r->probe, &more);
	r->disk_bw = r->probe.best_bps;
	r->disk_probe_s = r->probe.secs;
	r->disk_how = r->probe.direct ? "O_DIRECT" : "buffered";
	return PT_OK;
}

/* The floor's bandwidth: --disk-bw or the probe's best trial, or the rate the expert store
 * itself sustained while its decode reads were in flight when that was higher (the probe
 * can catch a shared disk in a slow moment, a throttled disk can burst above its nominal
 * rate, and a floor below what the run achieved would flatter time/floor). */
static void best_bandwidth(struct bench_result *r)
{
	const double store = r->dec_busy_s > 0 ? (double)r->dec_bytes / r->dec_busy_s : 0.0;
	if (store <= r->disk_bw)
		return;
	r->disk_bw = store;
	r->disk_how = "store";
}

/* The oracle's prompt: its LCG is evaluated in IEEE doubles by JavaScript (the product
 * exceeds 2^53 and rounds), so the same arithmetic here gives the same ids. */
static void synth_prompt(uint32_t *ids, uint32_t n, uint32_t n_vocab)
{
	double s = 12345.0;
	for (uint32_t i = 0; i < n; i++) {
		double p = s * 1103515245.0;
		p = p + 12345.0;
		s = fmod(p, 2147483648.0);
		ids[i] = (uint32_t)fmod(s, (double)n_vocab);
	}
}

/* The first maximum, as a plain scan finds it; a block of 64 is looked at value by value
 * only when one of its values is above the best so far (one vectorizable pass): the plain
 * scan took ~1.2 ms a token over a 262,144-entry vocabulary, counted in decode's time. */
static uint32_t argmax(const float *l, uint32_t n)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < n; i++) {
		while (i % 64 == 0 && i + 64 <= n) {
			int any = 0;
			for (uint32_t j = 0; j < 64; j++)
				any |= l[i + j] > l[best];
			if (any)
				break;
			i += 64;
		}
		if (i < n && l[i] > l[best])
			best = i;
	}
	return best;
}

static enum pt_status run(pt_engine *e, const struct bench_args *a, struct bench_result *r,
			  struct pt_error *err)
{
	const uint32_t nv = pt_engine_n_vocab(e), np = (uint32_t)a->prompt;
	uint32_t *ids = pt_mallocn(np, sizeof(*ids));
	float *logits = pt_mallocn(nv, sizeof(float));
	enum pt_status st = PT_OK;
	if (!ids || !logits)
		st = pt_error_set(err, PT_E_NOMEM, "cannot allocate the prompt and logits");
	struct pt_engine_stats start;
	pt_engine_stats(e, &start);
	if (st == PT_OK) {
		synth_prompt(ids, np, nv);
		const double t0 = now_s();
		st = pt_engine_eval(e, ids, np, logits, false, err);
		r->prefill_s = now_s() - t0;
		r->first_token = argmax(logits, nv);
		r->ttft_s = now_s() - t0;
	}
	struct pt_engine_stats mid;
	pt_engine_stats(e, &mid);
	for (int p = 0; p < 5; p++)
		r->pre_phase_s[p] = mid.phase_s[p] - start.phase_s[p];
	r->pre_wait_s = mid.wait_s - start.wait_s;
	r->pre_ahead[0] = mid.ahead_reads - start.ahead_reads;
	r->pre_ahead[1] = mid.ahead_used - start.ahead_used;
	pt_cli_gpu_counters(r->gpu, &r->gmid);
	uint32_t tok = r->first_token;
	const double t1 = now_s();
	for (uint64_t i = 0; st == PT_OK && i < a->gen; i++) {
		st = pt_engine_eval(e, &tok, 1, logits, false, err);
		tok = argmax(logits, nv);
	}
	r->decode_s = now_s() - t1;
	r->last_token = tok;
	pt_cli_gpu_counters(r->gpu, &r->gend);
	pt_engine_decode_bytes(e, (int64_t)(a->prompt + a->gen / 2), &r->dbytes);
	pt_engine_stats(e, &r->st);
	r->n_batch = pt_engine_n_batch(e);
	snprintf(r->io_engine, sizeof r->io_engine, "%s", r->st.io_engine ? r->st.io_engine : "");
	r->st.io_engine = r->io_engine;
	r->hits = r->st.hits;
	r->misses = r->st.misses;
	r->bytes_read = r->st.bytes_read;
	r->dec_hits = r->st.hits - mid.hits;
	r->dec_misses = r->st.misses - mid.misses;
	r->dec_bytes = r->st.bytes_read - mid.bytes_read;
	r->dec_wait_s = r->st.wait_s - mid.wait_s;
	r->dec_busy_s = r->st.io_busy_s - mid.io_busy_s;
	r->dec_head_s = r->st.head_s - mid.head_s;
	for (int p = 0; p < 5; p++)
		r->dec_phase_s[p] = r->st.phase_s[p] - mid.phase_s[p];
	r->dec_pool_runs = r->st.pool_runs - mid.pool_runs;
	r->dec_pool_wait_s = r->st.pool_wait_s - mid.pool_wait_s;
	r->dec_ahead[0] = r->st.ahead_reads - mid.ahead_reads;
	r->dec_ahead[1] = r->st.ahead_used - mid.ahead_used;
	r->dec_ahead[2] = r->st.ahead_wasted - mid.ahead_wasted;
	r->dec_ahead[3] = r->st.ahead_dropped - mid.ahead_dropped;
	pt_free(ids);
	pt_free(logits);
	return st;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0.0;
}

/* The decode phase's time split and the probe's details, as JSON members after the
 * standard ones. */
static void json_io(const struct bench_args *a, const struct bench_result *r)
{
	const double gen = (double)a->gen;
	const struct pt_decode_bytes *d = &r->dbytes;
	printf(", \"decode_bytes_per_token\": %llu, \"decode_bytes\": {\"weights\": %llu, "
	       "\"head\": %llu, \"embd_row\": %llu, \"experts\": %llu, \"kv\": %llu}",
	       (unsigned long long)d->total, (unsigned long long)d->weights,
	       (unsigned long long)d->head, (unsigned long long)d->embd_row,
	       (unsigned long long)d->experts, (unsigned long long)d->kv);
	if (a->membw_bps > 0)
		printf(", \"membw_bytes_per_s\": %.0f, \"decode_membw_limit_tps\": %.4f, "
		       "\"decode_fraction_of_membw\": %.4f", a->membw_bps,
		       a->membw_bps / (double)d->total,
		       gen / r->decode_s * (double)d->total / a->membw_bps);
	else
		printf(", \"membw_bytes_per_s\": null, \"decode_fraction_of_membw\": null");
	printf(", \"read_ahead\": %llu, \"read_ahead_used\": %llu, \"read_ahead_wasted\": %llu, "
	       "\"read_ahead_dropped\": %llu, \"prefill_read_ahead\": %llu, "
	       "\"prefill_read_ahead_used\": %llu",
	       (unsigned long long)r->dec_ahead[0], (unsigned long long)r->dec_ahead[1],
	       (unsigned long long)r->dec_ahead[2], (unsigned long long)r->dec_ahead[3],
	       (unsigned long long)r->pre_ahead[0], (unsigned long long)r->pre_ahead[1]);
	printf(", \"decode_read_wait_s_per_token\": %.6f, \"decode_compute_s_per_token\": %.6f, "
	       "\"decode_io_busy_s_per_token\": %.6f, \"decode_head_s_per_token\": %.6f, "
	       "\"decode_read_bw_bytes_per_s\": %.0f, "
	       "\"disk_bw_median_bytes_per_s\": %.0f, \"disk_probe\": \"%s\", "
	       "\"disk_probe_trials_bytes_per_s\": [", r->dec_wait_s / gen,
	       (r->decode_s - r->dec_wait_s) / gen, r->dec_busy_s / gen, r->dec_head_s / gen,
	       ratio((double)r->dec_bytes, r->dec_busy_s), r->probe.median_bps, r->probe.how);
	for (uint32_t i = 0; i < r->probe.n_trials; i++)
		printf("%s%.0f", i ? ", " : "", r->probe.trial_bps[i]);
	printf("], \"decode_phase_s_per_token\": {\"attention\": %.6f, \"router\": %.6f, "
	       "\"experts\": %.6f, \"ffn_rest\": %.6f, \"head\": %.6f}, "
	       "\"decode_pool_runs_per_token\": %.2f, \"decode_pool_wait_s_per_token\": %.6f, "
	       "\"prefill_phase_s\": {\"attention\": %.6f, \"router\": %.6f, \"experts\": %.6f, "
	       "\"ffn_rest\": %.6f, \"head\": %.6f}, \"prefill_read_wait_s\": %.6f}\n",
	       r->dec_phase_s[0] / gen, r->dec_phase_s[1] / gen, r->dec_phase_s[2] / gen,
	       r->dec_phase_s[3] / gen, r->dec_phase_s[4] / gen, (double)r->dec_pool_runs / gen,
	       r->dec_pool_wait_s / gen, r->pre_phase_s[0], r->pre_phase_s[1], r->pre_phase_s[2],
	       r->pre_phase_s[3], r->pre_phase_s[4], r->pre_wait_s);
}

/* --gpu: speeds, the decode's expert hit rate in VRAM, bytes copied to the device per
 * decoded token and the copy floor (those bytes / the measured pinned host-to-device
 * bandwidth), as the CPU report's I/O floor is for the disk; report() derives them. */
static void report_gpu(const struct bench_args *a, const struct bench_result *r, double hit,
		       double bpt, double floor_s, double tpt, double pf, double dc)
{
	if (a->json) {
		printf("{\"model\": \"%s\", \"gpu\": true, \"prompt_tokens\": %llu, "
		       "\"gen_tokens\": %llu, \"prefill_tps\": %.4f, \"decode_tps\": %.4f, "
		       "\"ttft_s\": %.6f, \"s_per_token\": %.6f, \"slots_per_layer\": %u, "
		       "\"all_experts_resident\": %s, \"hit_rate\": %.6f, "
		       "\"h2d_bytes_per_token\": %.1f, \"h2d_bw_bytes_per_s\": %.0f, "
		       "\"copy_floor_s_per_token\": %.6f, \"time_over_floor\": %.4f, "
		       "\"first_token\": %u, \"last_token\": %u}\n", a->model,
		       (unsigned long long)a->prompt, (unsigned long long)a->gen, pf, dc, r->ttft_s,
		       tpt, r->gend.slots_per_layer, r->gend.all_resident ? "true" : "false", hit,
		       bpt, r->h2d_bw, floor_s, ratio(tpt, floor_s), r->first_token,
		       r->last_token);
		return;
	}
	printf("model      %s (GPU, %u expert slots/layer%s)\n", a->model,
	       r->gend.slots_per_layer, r->gend.all_resident ? ", every expert resident" : "");
	if (r->gend.prefill_chunk)
		printf("prefill    %llu tokens in %.3f s: %.2f tok/s (ttft %.3f s, chunks of %u "
		       "tokens)\n", (unsigned long long)a->prompt, r->prefill_s, pf, r->ttft_s,
		       r->gend.prefill_chunk);
	else
		printf("prefill    %llu tokens in %.3f s: %.2f tok/s (ttft %.3f s, one decode step "
		       "per token)\n", (unsigned long long)a->prompt, r->prefill_s, pf, r->ttft_s);
	printf("decode     %llu tokens in %.3f s: %.2f tok/s (%.2f ms/token)\n",
	       (unsigned long long)a->gen, r->decode_s, dc, tpt * 1e3);
	if (r->st.repacked_bytes)
		printf("repack     %.1f MiB of weights interleaved at open in %.2f s\n",
		       (double)r->st.repacked_bytes / (1 << 20), r->st.repack_s);
	printf("experts    decode hit rate %.2f%% in VRAM, %.2f MiB copied to the device/token\n",
	       hit * 100, bpt / 1048576.0);
	printf("pcie       host-to-device %.1f GB/s (pinned, measured); copy floor %.3f ms/token; "
	       "time/floor %.2fx\n", r->h2d_bw / 1e9, floor_s * 1e3, ratio(tpt, floor_s));
}

static void report(const struct bench_args *a, const struct bench_result *r)
{
	/* the decode's expert hits and bytes moved, and the bandwidth that sets their floor:
	 * the VRAM cache and host-to-device copies with --gpu, else the RAM cache and the disk */
	const bool gpu = a->gpu.on;
	const uint64_t h = gpu ? r->gend.hits - r->gmid.hits : r->dec_hits;
	const uint64_t m = gpu ? r->gend.misses - r->gmid.misses : r->dec_misses;
	const uint64_t moved = gpu ? r->gend.bytes_copied - r->gmid.bytes_copied : r->dec_bytes;
	const double gen = (double)a->gen;
	const double hit = ratio((double)h, (double)(h + m));
	const double bpt = (double)moved / gen;
	const double floor_s = ratio(bpt, gpu ? r->h2d_bw : r->disk_bw), tpt = r->decode_s / gen;
	const double pf = (double)a->prompt / r->prefill_s, dc = gen / r->decode_s;
	if (gpu) {
		report_gpu(a, r, hit, bpt, floor_s, tpt, pf, dc);
		return;
	}
	if (a->json) {
		printf("{\"model\": \"%s\", \"threads\": %llu, \"prompt_tokens\": %llu, "
		       "\"gen_tokens\": %llu, \"prefill_tps\": %.4f, \"decode_tps\": %.4f, "
		       "\"ttft_s\": %.6f, \"s_per_token\": %.6f, \"peak_rss_bytes\": %llu, "
		       "\"memory_budget_bytes\": %llu, \"resident_bytes\": %llu, "
		       "\"slots_per_layer\": %u, \"io_engine\": \"%s\", \"hit_rate\": %.6f, "
		       "\"hit_rate_all\": %.6f, \"bytes_read_per_token\": %.1f, "
		       "\"bytes_read_total\": %llu, \"read_wait_s\": %.6f, "
		       "\"disk_bw_bytes_per_s\": %.0f, \"disk_bw_source\": \"%s\", "
		       "\"io_floor_s_per_token\": %.6f, \"time_over_floor\": %.4f, "
		       "\"first_token\": %u, \"last_token\": %u, \"batch\": %u, "
		       "\"repacked_bytes\": %llu, \"repack_s\": %.3f, \"slots_lend_max\": %u, "
		       "\"slots_lent_peak\": %u, \"open_s\": %.6f, \"slots_populate_s\": %.6f, "
		       "\"kv_type\": \"%s\"",
		       a->model,
		       (unsigned long long)a->threads, (unsigned long long)a->prompt,
		       (unsigned long long)a->gen, pf, dc, r->ttft_s, tpt,
		       (unsigned long long)r->st.peak_rss_bytes,
		       (unsigned long long)r->st.memory_budget,
		       (unsigned long long)r->st.resident_bytes, r->st.slots_per_layer,
		       r->st.io_engine ? r->st.io_engine : "", hit,
		       ratio((double)r->hits, (double)(r->hits + r->misses)), bpt,
		       (unsigned long long)r->bytes_read, r->st.wait_s, r->disk_bw, r->disk_how,
		       floor_s, ratio(tpt, floor_s), r->first_token, r->last_token, r->n_batch,
		       (unsigned long long)r->st.repacked_bytes, r->st.repack_s,
		       r->st.slots_lend_max, r->st.slots_lent_peak, r->open_s,
		       r->st.slots_populate_s,
		       a->eo.kv_type == PT_KV_Q8_0 ? "q8_0" : a->eo.kv_type == PT_KV_F32 ? "f32"
										 : "f16");
		json_io(a, r);
		return;
	}
	const double mib = 1.0 / (1 << 20);
	printf("model      %s (%llu threads, io %s, budget %.0f MiB, %u slots/layer)\n",
	       a->model, (unsigned long long)a->threads, r->st.io_engine ? r->st.io_engine : "?",
	       (double)r->st.memory_budget * mib, r->st.slots_per_layer);
	printf("prefill    %llu tokens in %.3f s: %.2f tok/s (ttft %.3f s, chunks of %u",
	       (unsigned long long)a->prompt, r->prefill_s, pf, r->ttft_s, r->n_batch);
	if (r->st.slots_lent_peak)
		printf(", %u slots/layer lent to them", r->st.slots_lent_peak);
	printf(")\n");
	printf("decode     %llu tokens in %.3f s: %.2f tok/s (%.2f ms/token)\n",
	       (unsigned long long)a->gen, r->decode_s, dc, tpt * 1e3);
	printf("open       %.2f s", r->open_s);
	if (r->st.repacked_bytes)
		printf(" (%.1f MiB of weights interleaved in %.2f s)",
		       (double)r->st.repacked_bytes / (1 << 20), r->st.repack_s);
	if (r->st.slots_populate_s > 0)
		printf(" (expert slots faulted in: %.2f s)", r->st.slots_populate_s);
	printf("\n");
	printf("experts    decode hit rate %.2f%%, %.2f MiB read/token, waited %.3f s\n",
	       hit * 100, bpt * mib, r->st.wait_s);
	printf("io         decode per token: %.2f ms blocked on reads, %.2f ms computing (%.2f ms "
	       "of it the output head), reads in flight %.2f ms at %.1f MB/s\n",
	       r->dec_wait_s / gen * 1e3, (r->decode_s - r->dec_wait_s) / gen * 1e3,
	       r->dec_head_s / gen * 1e3, r->dec_busy_s / gen * 1e3,
	       ratio((double)r->dec_bytes, r->dec_busy_s) / 1e6);
	printf("phases     decode ms/token: attention %.2f, router %.2f, experts (+shared) %.2f, "
	       "ffn rest %.2f, head %.2f; %.1f pool runs/token, caller waited %.2f ms/token on "
	       "other threads\n", r->dec_phase_s[0] / gen * 1e3, r->dec_phase_s[1] / gen * 1e3,
	       r->dec_phase_s[2] / gen * 1e3, r->dec_phase_s[3] / gen * 1e3,
	       r->dec_phase_s[4] / gen * 1e3, (double)r->dec_pool_runs / gen,
	       r->dec_pool_wait_s / gen * 1e3);
	printf("phases     prefill s: attention %.2f, router %.2f, experts (+shared) %.2f (%.2f "
	       "of it blocked on reads), ffn rest %.2f, head %.2f\n", r->pre_phase_s[0],
	       r->pre_phase_s[1], r->pre_phase_s[2], r->pre_wait_s, r->pre_phase_s[3],
	       r->pre_phase_s[4]);
	if (r->pre_ahead[0])
		printf("ahead      prefill: %llu expert reads of a chunk's next wave, %llu used\n",
		       (unsigned long long)r->pre_ahead[0], (unsigned long long)r->pre_ahead[1]);
	if (r->dec_ahead[0])
		printf("ahead      decode: %llu expert reads on a guess of the next layer, %llu used, "
		       "%llu evicted unused; %llu wrong guesses dropped unread\n",
		       (unsigned long long)r->dec_ahead[0], (unsigned long long)r->dec_ahead[1],
		       (unsigned long long)r->dec_ahead[2], (unsigned long long)r->dec_ahead[3]);
	printf("disk       %.1f MB/s (%s); I/O floor %.2f ms/token; time/floor %.2fx\n",
	       r->disk_bw / 1e6, r->disk_how, floor_s * 1e3, ratio(tpt, floor_s));
	if (r->probe.n_trials)
		printf("probe      best %.1f MB/s, median %.1f MB/s (%s)\n", r->probe.best_bps / 1e6,
		       r->probe.median_bps / 1e6, r->probe.how);
	printf("memory     peak RSS %.1f MiB\n", (double)r->st.peak_rss_bytes * mib);
	printf("limit      %.1f MiB read per decoded token (weights %.1f, head %.1f, experts "
	       "%.1f, KV %.1f)", (double)r->dbytes.total * mib, (double)r->dbytes.weights * mib,
	       (double)r->dbytes.head * mib, (double)r->dbytes.experts * mib,
	       (double)r->dbytes.kv * mib);
	if (a->membw_bps > 0)
		printf("; at %.2f GB/s: %.2f tok/s at most, decode at %.0f%% of it",
		       a->membw_bps / 1e9, a->membw_bps / (double)r->dbytes.total,
		       100.0 * dc * (double)r->dbytes.total / a->membw_bps);
	printf("\n");
}

/* --membw: the read-bandwidth probe alone at 1, 2 and --threads threads (issue 21's
 * physical limit, measured in the same `make bench` run as the decode it bounds). */
static int membw_only(const struct bench_args *a)
{
	uint32_t ts[3] = { 1, 2, (uint32_t)a->threads }, nt = a->threads > 2 ? 3 : 2;
	struct pt_error err = { 0 };
	if (a->json)
		printf("{\"membw_buffer_bytes\": %llu",
		       (unsigned long long)(a->membw_mib << 20));
	for (uint32_t i = 0; i < nt; i++) {
		struct pt_membw_result m;
		if (pt_membw_probe(a->membw_mib << 20, ts[i], 5, &m, &err) != PT_OK) {
			if (a->json)
				printf("}\n");
			return pt_cli_fail(&err);
		}
		if (a->json)
			printf(", \"membw_%ut_bytes_per_s\": %.0f, \"membw_%ut_median_bytes_per_s\": %.0f",
			       ts[i], m.best_bps, ts[i], m.median_bps);
		else
			printf("membw      %u thread%s: best %.2f GB/s, median %.2f GB/s (%llu MiB, "
			       "%u passes)\n", ts[i], ts[i] > 1 ? "s" : "", m.best_bps / 1e9,
			       m.median_bps / 1e9, (unsigned long long)a->membw_mib, m.passes);
	}
	if (a->json)
		printf("}\n");
	return PT_EXIT_OK;
}

int pt_cmd_bench(int argc, char **argv)
{
	struct bench_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? PT_EXIT_OK : rc;
	if (a.membw)
		return membw_only(&a);
	struct pt_error err = { 0 };
	struct bench_result r = { 0 };
	enum pt_status st = a.gpu.on ? PT_OK : measure_disk(&a, &r, false, &err);
	a.eo.model_path = a.model;
	a.eo.threads = (uint32_t)a.threads;
	a.eo.n_ctx = (uint32_t)(a.prompt + a.gen);
	a.eo.n_batch = a.batch ? (uint32_t)a.batch : PT_ENGINE_BATCH_AUTO;
	pt_engine *e = NULL;
	if (st == PT_OK) {
		const double t0 = now_s();
		st = pt_engine_open(&a.eo, &e, &err);
		r.open_s = now_s() - t0;
	}
	if (st == PT_OK && a.gpu.on) { /* prompt and decode on the device (issue 16) */
		rc = pt_cli_gpu_attach(&a.gpu, e, a.eo.cache_policy, stderr, &r.gpu);
		if (rc) {
			pt_engine_close(e);
			return rc;
		}
		r.h2d_bw = pt_cli_gpu_h2d_bw();
	}
	if (st == PT_OK)
		st = run(e, &a, &r, &err);
	pt_cli_gpu_detach(r.gpu, e);
	r.gpu = NULL;
	pt_engine_close(e);
	if (st == PT_OK && !a.gpu.on)
		st = measure_disk(&a, &r, true, &err);
	if (st == PT_OK) {
		best_bandwidth(&r);
		report(&a, &r);
	}
	return st == PT_OK ? PT_EXIT_OK : pt_cli_fail(&err);
}
