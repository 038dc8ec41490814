/* cli.h - subcommands of ./build/particle and the helpers they share.
 * Every command returns a process exit code: 0 ok, 1 runtime failure, 2 bad input/usage,
 * 130 cancelled (pt_status_exit_code maps library results). */
#ifndef PT_CLI_H
#define PT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/status.h"

#define PT_EXIT_OK 0
#define PT_EXIT_FAIL 1
#define PT_EXIT_USAGE 2
#define PT_EXIT_CANCELLED 130

int pt_cmd_inspect(int argc, char **argv);
int pt_cmd_pack(int argc, char **argv);
int pt_cmd_cachesim(int argc, char **argv);
int pt_cmd_run(int argc, char **argv);
int pt_cmd_eval(int argc, char **argv);
int pt_cmd_bench(int argc, char **argv);
int pt_cmd_routing(int argc, char **argv);
int pt_cmd_mkmodel(int argc, char **argv);
int pt_cmd_mkvocab(int argc, char **argv);
int pt_cmd_tokenize(int argc, char **argv);
int pt_cmd_detokenize(int argc, char **argv);
int pt_cmd_template(int argc, char **argv);
int pt_cmd_pull(int argc, char **argv);
int pt_cmd_list(int argc, char **argv);
int pt_cmd_serve(int argc, char **argv);

/* Prints "particle: error: <msg>" on stderr (one line). */
void pt_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error record as one line and returns the matching exit code. */
int pt_cli_fail(const struct pt_error *err);
/* Strict number parsing for flag values; on failure prints an error naming the flag and
 * returns false. */
bool pt_cli_parse_u64(const char *flag, const char *text, uint64_t min, uint64_t max,
		      uint64_t *out);
bool pt_cli_parse_f64(const char *flag, const char *text, double min, double max,
		      double *out);
/* "6G", "512M", "1.5G", "123456" (bytes); K/M/G/T are powers of 1024. */
bool pt_cli_parse_size(const char *flag, const char *text, uint64_t *out);
/* A repeatable flag (run --stop, serve --cors): appends v to list[*n]; 1, or -1 after the
 * error "<flag> wants a non-empty <what>, at most <max> of them" (an empty v, a full list). */
int pt_cli_list_flag(const char *flag, const char *what, const char *v, const char **list,
		     size_t *n, size_t max);

/* Engine set-up flags (src/cli/engine_flags.c).  The store flags shared by bench and eval
 * (--memory, --expert-slots, --io, --cache-policy): returns 1 when f is one of them and v was
 * stored in eo, 0 when f is not one of them, -1 after printing the error for a bad value. */
struct pt_engine_opts;
int pt_cli_engine_flag(const char *f, const char *v, struct pt_engine_opts *eo);
/* bench and eval: --no-lock, --no-profile, --repack, --no-repack and (with_verbose) --verbose
 * into eo; true when f is one of them.  Both repack only when asked (repack_auto stays off);
 * the last of --repack / --no-repack counts. */
bool pt_cli_engine_opts_switch(const char *f, bool with_verbose, struct pt_engine_opts *eo);
/* The engine flags of run and serve, as given (defaults are the command's). */
struct pt_cli_engine {
	const char *io, *policy, *kv;           /* --io, --cache-policy, --kv-type */
	uint64_t max_ctx, threads, memory, slots; /* -c, -t, --memory, --expert-slots */
	uint64_t batch;                         /* -b; 0: the largest the memory plan allows */
	bool no_lock, no_profile, verbose;
	bool repack, no_repack; /* neither: repack where the model runs from memory */
};
/* -c/--max-context/--ctx-size, -t/--threads, --expert-slots, -b/--batch/--batch-size,
 * --memory, --io, --cache-policy, --kv-type with the value v: returns 1 when stored, 0 when a
 * is not one of them, -1 after the one-line error for a bad number. */
int pt_cli_engine_value_flag(const char *a, const char *v, struct pt_cli_engine *f);
/* --no-lock, --no-profile, --verbose, --repack, --no-repack (the last of those two counts):
 * true when a is one of them (stored). */
bool pt_cli_engine_switch(const char *a, struct pt_cli_engine *f);
/* After parsing: the --io / --cache-policy / --kv-type words; 0, or PT_EXIT_USAGE after one
 * error line that starts with "<cmd>: ". */
int pt_cli_engine_check(const char *cmd, const struct pt_cli_engine *f);
/* The engine options for model (the path as given to pt_engine_open); --max-context is bounded
 * by the model's trained context, noted on ctx_log (NULL: silently). */
void pt_cli_engine_opts(const struct pt_cli_engine *f, const char *model, FILE *ctx_log,
			struct pt_engine_opts *eo);

/* The argument loop run and serve share (src/cli/flags.c). */
struct pt_cli_flags {
	const char *cmd;   /* "run": the prefix of its errors, 'particle run --help' */
	void (*help)(void);
	void *opts;        /* the command's options, handed to the callbacks */
	/* a flag without a value: true when a is one (stored) */
	bool (*switch_flag)(void *opts, const char *a);
	/* NULL, or flags that take what follows them themselves (run's GPU flags): how many
	 * arguments a took, 0 when it is not one, -1 after the error */
	int (*own_flag)(void *opts, const char *a, const char *next);
	/* a with the value v: 1 stored, 0 when a is not a flag of the command, -1 after the
	 * one-line error */
	int (*value_flag)(void *opts, const char *a, const char *v);
};
/* Parses argv[1..]: 0 when every argument was taken, -1 after printing --help, or
 * PT_EXIT_USAGE after the one-line error ("<cmd>: X needs a value", an unexpected argument,
 * an unknown option). */
int pt_cli_parse_flags(const struct pt_cli_flags *f, int argc, char **argv);
/* The sampling flags of run and serve: --temperature/--temp, --top-p, --min-p,
 * --repetition-penalty/--repeat-penalty, --top-k, --repeat-last-n with the value v; 1 when
 * stored, 0 when a is not one of them, -1 after the error for a bad number. */
struct pt_sampler_opts;
int pt_cli_sampler_flag(const char *a, const char *v, struct pt_sampler_opts *so);

/* The GPU flags shared by run, eval and bench (src/cli/gpu_opts.c): --gpu, --gpu-layers
 * N|all, --vram SIZE, --gpu-device I; any of them turns the GPU on. */
struct pt_cli_gpu {
	bool on;
	bool layers_set; /* --gpu-layers given; otherwise all layers */
	int64_t layers;  /* --gpu-layers: -1 = all */
	uint64_t vram;   /* bytes; 0 = free memory less headroom */
	int device;
	uint32_t slots;  /* --gpu-expert-slots: expert slots per MoE layer in VRAM (0: plan) */
};
/* f is one of the GPU flags: returns 1 when it took no value (--gpu), 2 when it took v, 0
 * when f is not a GPU flag, -1 after printing the error for a bad or missing value. */
int pt_cli_gpu_flag(const char *f, const char *v, struct pt_cli_gpu *g);
/* After parsing: 0 when no GPU flag was given or the device is usable, else the exit code
 * after the one-line error (--gpu with --repack: exit 2; a CPU-only build: how to build with
 * CUDA, exit 2; a CUDA build:
 * no driver / no device / --vram above free memory, exit 1; --gpu-layers N < all, exit 2). */
int pt_cli_gpu_ready(const struct pt_cli_gpu *g, bool repack);
struct pt_model;
/* Evaluates n tokens on the GPU (src/cuda/gpu_fwd.h) into logits [n][n_vocab]; policy is
 * --cache-policy (NULL: lfu); log: plan and counters (NULL: quiet).  Exit code. */
int pt_cli_gpu_eval(const struct pt_cli_gpu *g, const struct pt_model *m, uint32_t n_ctx,
		    const char *policy, FILE *log, const uint32_t *ids, uint32_t n, float *logits);

/* run and bench on the GPU: the CUDA forward pass installed as the engine's sequence-0 pass
 * (gen/engine.h pt_engine_set_device).  pt_cli_gpu_attach: 0, or the exit code after the
 * one-line error (a CPU-only build: exit 2 with how to build with CUDA).  policy as for
 * pt_cli_gpu_eval; log: the plan line (NULL: quiet). */
struct pt_engine;
struct pt_cli_gpu_run;
struct pt_cli_gpu_counters {
	uint64_t hits, misses, bytes_copied, tokens;
	double seconds;
	uint32_t slots_per_layer;
	bool all_resident;
	uint32_t prefill_chunk; /* tokens per device prefill chunk; 0: token by token */
};
int pt_cli_gpu_attach(const struct pt_cli_gpu *g, struct pt_engine *e, const char *policy,
		      FILE *log, struct pt_cli_gpu_run **out);
void pt_cli_gpu_detach(struct pt_cli_gpu_run *r, struct pt_engine *e); /* NULL-safe */
void pt_cli_gpu_counters(struct pt_cli_gpu_run *r, struct pt_cli_gpu_counters *c);
/* Pinned host-to-device bandwidth in bytes/s (0 when the probe failed). */
double pt_cli_gpu_h2d_bw(void);

/* The routing report of `particle routing` (also `mkmodel --routing-report`): returns an
 * exit code. */
int pt_cli_routing_report(const char *model, uint32_t n_tokens, uint32_t n_gen, bool json,
			  FILE *fp);

#endif
