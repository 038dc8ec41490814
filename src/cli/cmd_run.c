/* cmd_run.c - `particle run`: raw completion (--prompt), chat over a messages file
 * (--messages) and, on a terminal, the interactive chat (chat.c).  Owns the flags, the
 * budget check before loading, prompt building (raw or through the chat template), the
 * SIGINT handling, the stats footer and --stats-json. */
#include "cli/cli.h"
#include "cli/models.h"
#include "cli/input.h"
#include "cli/run.h"
#include "server/chatparse.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "expert/plan.h"
#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"
#include "util/limits.h"
#include "util/safefile.h"

#define MAX_STOPS 16

struct opts {
	const char *model, *prompt, *messages, *tmpl, *stats_json;
	struct pt_cli_gpu gpu; /* --gpu and friends (issue 16) */
	struct pt_cli_engine eng; /* -c, -t, --memory, --io, ..., --no-lock, --verbose */
	const char *stops[MAX_STOPS];
	size_t n_stops;
	struct pt_sampler_opts so;
	uint64_t max_new;
	bool raw, quiet;
};

/* SIGINT: the first one during generation asks the loop to stop after the current token; a
 * second one within a second, or one while nothing is generating, exits at once. */
static volatile sig_atomic_t cancel_flag, generating_flag;
static volatile double last_sigint;

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_sigint(int sig)
{
	(void)sig;
	double t = mono_s();
	if (!generating_flag || cancel_flag || t - last_sigint < 1.0) {
		ssize_t w = write(STDERR_FILENO, "\n", 1);
		(void)w;
		_exit(PT_EXIT_CANCELLED);
	}
	last_sigint = t;
	cancel_flag = 1;
}

static void help(void)
{
	printf("usage: particle run [-m MODEL] [--prompt TEXT | --messages FILE.json|-] [options]\n\n"
	       "Generates text.  --prompt: raw completion of TEXT as given ('-' reads stdin; BOS per\n"
	       "the tokenizer).  --messages: an OpenAI-style messages array (or {\"messages\": [...]})\n"
	       "rendered through the model's chat template with the generation prompt.  Neither, on\n"
	       "a terminal: interactive chat (/new fresh chat, /stats, /quit; Ctrl-C stops a reply,\n"
	       "Ctrl-C at the prompt or twice within a second exits; when the context is full the\n"
	       "oldest turns are dropped, with a notice).\n\n"
	       "  -m, --model PATH          GGUF model, or a name in the models directory\n"
	       "                            (particle list; default: $PARTICLE_MODEL)\n"
	       "  -p, --prompt TEXT         raw completion of TEXT\n"
	       "  --messages FILE|-         chat: messages JSON file, '-' = stdin\n"
	       "  --template FILE           Jinja chat template instead of the model's\n"
	       "  --raw                     interactive raw completion: each line on its own\n"
	       "  -n, --max-new N           tokens to generate, 0 = until EOS/context (default 1024)\n"
	       "  -c, --max-context N       KV cache positions, bounded by the model's (default 4096)\n"
	       "  --temperature F           0 = greedy (default 0.2)\n"
	       "  --top-k N                 0 = whole vocabulary (default 64)\n"
	       "  --top-p F                 1 = off (default 0.95)\n"
	       "  --min-p F                 0 = off (default 0)\n"
	       "  --repetition-penalty F    1 = off (default 1.0)\n"
	       "  --repeat-last-n N         penalty window in tokens (default 64)\n"
	       "  --seed N                  sampling seed (default 0)\n"
	       "  --stop STR                stop before STR (repeatable, up to %d; default none)\n"
	       "  -t, --threads N           compute threads, 0 = online cores (default 0)\n"
	       "  --memory SIZE             memory budget, e.g. 6G (default: cgroup/MemAvailable)\n"
	       "  --expert-slots N          expert cache slots per MoE layer (default: planned)\n"
	       "  --io MODE                 auto|direct|buffered|mmap (default auto: mmap when\n"
	       "                            every expert fits the budget, else direct)\n"
	       "  --cache-policy P          lfu|lru (default lfu)\n"
	       "  --kv-type T               f16|f32|q8_0 (default f16; q8_0 halves the KV memory)\n"
	       "  --batch N                 prefill chunk in tokens (default: as large as the\n"
	       "                            memory plan allows, up to 4096)\n"
	       "  --gpu                     prompt and decode on the CUDA backend (make CUDA=1\n"
	       "                            builds; prompt in chunks of 256 tokens, F16 KV in\n"
	       "                            VRAM)\n"
	       "  --gpu-expert-slots N      expert slots per MoE layer in VRAM (default: planned\n"
	       "                            from --vram; implies --gpu)\n"
	       "  --gpu-layers N|all        layers on the GPU (default all; implies --gpu)\n"
	       "  --vram SIZE               device memory budget (implies --gpu)\n"
	       "  --gpu-device I            CUDA device ordinal (default 0; implies --gpu)\n"
	       "  --no-lock                 do not take the single-process model lock\n"
	       "  --no-profile              do not read or write the expert-popularity profile\n"
	       "                            (warms the expert cache at start; results unchanged)\n"
	       "  --repack                  Q4_K, Q6_K, Q8_0 and Q5_0 matrices with rows\n"
	       "                            interleaved 16 at a time, copied at load (~0.6 s/GB;\n"
	       "                            the file leaves the page cache): faster prompts and\n"
	       "                            decode.\n"
	       "                            Where experts stream they are not copied: read\n"
	       "                            interleaved from a `particle pack --repack` pack, or\n"
	       "                            computed from the rows as stored in the same numerics.\n"
	       "                            Default: on in interactive chat (not --io mmap over\n"
	       "                            the budget), off for --prompt / --messages (the quick\n"
	       "                            start)\n"
	       "  --no-repack               every matrix as stored (the quickest start)\n"
	       "  --quiet                   no stats footer (and no harmony reasoning on stderr)\n"
	       "  --verbose                 print the load plan (model, budget, I/O, CPU)\n"
	       "  --stats-json FILE         write the stats, per-layer counters and ids as JSON\n"
	       "                            (interactive: rewritten after every reply)\n"
	       "  -h, --help                this text\n\n"
	       "Chat with a harmony template (gpt-oss): the final channel (or plain text) is the\n"
	       "reply on stdout, the analysis channel goes to stderr as reasoning; headers are\n"
	       "not shown (the history keeps the raw reply).\n\n"
	       "llama.cpp spellings are accepted too: -p (--prompt), -n/--n-predict (--max-new),\n"
	       "-c/--ctx-size (--max-context), -t/--threads, --temp (--temperature),\n"
	       "--repeat-penalty (--repetition-penalty), -s (--seed), -b/--batch-size (--batch).\n\n"
	       "exit codes: 0 ok, 1 runtime failure (also: model locked by another process, the\n"
	       "message names its PID), 2 bad input or usage, 130 cancelled (Ctrl-C)\n",
	       MAX_STOPS);
}

static void set_defaults(struct opts *o)
{
	memset(o, 0, sizeof *o);
	pt_sampler_opts_default(&o->so);
	o->so.seed = 0;
	o->max_new = 1024;
	o->eng.max_ctx = 4096;
	o->eng.batch = 0; /* 0: the largest chunk the memory plan allows */
	o->model = getenv("PARTICLE_MODEL");
	if (o->model && !*o->model)
		o->model = NULL;
}

static bool is(const char *a, const char *s, const char *l)
{
	return (s && strcmp(a, s) == 0) || strcmp(a, l) == 0;
}

/* Flags with an integer value, then the sampling flags. */
static int int_flag(struct opts *o, const char *a, const char *v)
{
	if (is(a, "-n", "--max-new") || strcmp(a, "--n-predict") == 0)
		return pt_cli_parse_u64(a, v, 0, UINT32_MAX, &o->max_new) ? 1 : -1;
	if (is(a, "-s", "--seed"))
		return pt_cli_parse_u64(a, v, 0, UINT64_MAX, &o->so.seed) ? 1 : -1;
	return pt_cli_sampler_flag(a, v, &o->so);
}

/* Flags with a string value, then the engine's and the numeric ones. */
static int str_flag(void *opts, const char *a, const char *v)
{
	struct opts *o = opts;
	static const struct { const char *s, *l; size_t off; } t[] = {
		{ "-m", "--model", offsetof(struct opts, model) },
		{ "-p", "--prompt", offsetof(struct opts, prompt) },
		{ NULL, "--messages", offsetof(struct opts, messages) },
		{ NULL, "--template", offsetof(struct opts, tmpl) },
		{ NULL, "--stats-json", offsetof(struct opts, stats_json) },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (is(a, t[i].s, t[i].l)) {
			*(const char **)((char *)o + t[i].off) = v;
			return 1;
		}
	if (strcmp(a, "--stop") == 0)
		return pt_cli_list_flag("run: --stop", "string", v, o->stops, &o->n_stops, MAX_STOPS);
	const int r = pt_cli_engine_value_flag(a, v, &o->eng);
	return r ? r : int_flag(o, a, v);
}

static bool bool_flag(void *opts, const char *a)
{
	struct opts *o = opts;
	if (pt_cli_engine_switch(a, &o->eng))
		return 1;
	bool *b = strcmp(a, "--raw") == 0 ? &o->raw : strcmp(a, "--quiet") == 0 ? &o->quiet
		: NULL;
	if (b)
		*b = true;
	return b != NULL;
}

static int check_opts(const struct opts *o)
{
	if (o->prompt && o->messages) {
		pt_cli_error("run: give --prompt or --messages, not both");
		return PT_EXIT_USAGE;
	}
	const int rc = pt_cli_engine_check("run", &o->eng);
	if (rc)
		return rc;
	if (!o->model) {
		pt_cli_error("run: no model: give -m MODEL or set PARTICLE_MODEL");
		return PT_EXIT_USAGE;
	}
	return pt_cli_gpu_ready(&o->gpu, o->eng.repack);
}

static int gpu_flag(void *opts, const char *a, const char *next)
{
	return pt_cli_gpu_flag(a, next, &((struct opts *)opts)->gpu);
}

/* Returns 0 to go on, -1 after --help, or an exit code. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct pt_cli_flags f = { "run", help, o, bool_flag, gpu_flag, str_flag };
	set_defaults(o);
	const int rc = pt_cli_parse_flags(&f, argc, argv);
	if (rc)
		return rc;
	if (o->model) /* a name in the models directory */
		o->model = pt_cli_model_path(o->model);
	return check_opts(o);
}

/* ---- input files ------------------------------------------------------------------------ */

/* --messages: an array, or an object with a "messages" array; returns the array. */
static int load_messages(const char *path, cJSON **out)
{
	cJSON *conv, *msgs;
	int rc = pt_cli_load_json(path, &conv);
	if (rc)
		return rc;
	rc = pt_cli_split_conversation(path, conv, &msgs, NULL);
	cJSON_Delete(conv);
	if (!rc && (rc = pt_cli_check_messages(path, msgs, true)) != 0)
		cJSON_Delete(msgs);
	if (!rc)
		*out = msgs;
	return rc;
}

/* ---- prompts ---------------------------------------------------------------------------- */

enum pt_status pt_run_encode_raw(struct pt_run *r, const char *text, size_t len, int32_t **ids,
				 size_t *n, struct pt_error *err)
{
	return pt_tok_encode_alloc(pt_engine_tok(r->engine), text, len, true, false, ids, n, err);
}

enum pt_status pt_run_encode_chat(struct pt_run *r, const cJSON *messages, int32_t **ids,
				  size_t *n, struct pt_error *err)
{
	const pt_tok *tok = pt_engine_tok(r->engine);
	cJSON *vars = cJSON_CreateObject();
	cJSON *copy = cJSON_Duplicate(messages, true);
	if (!vars || !copy || !cJSON_AddItemToObject(vars, "messages", copy) ||
	    !cJSON_AddTrueToObject(vars, "add_generation_prompt") ||
	    !cJSON_AddStringToObject(vars, "bos_token", r->bos_text ? r->bos_text : "") ||
	    !cJSON_AddStringToObject(vars, "eos_token", r->eos_text ? r->eos_text : "")) {
		if (vars && copy && !cJSON_GetObjectItemCaseSensitive(vars, "messages"))
			cJSON_Delete(copy);
		cJSON_Delete(vars);
		return pt_error_set(err, PT_E_NOMEM, "out of memory building the template variables");
	}
	char *text = NULL;
	size_t len = 0, start = 0, keep = 0;
	enum pt_status st = pt_tmpl_render(r->tmpl, vars, NULL, 0, &text, &len, err);
	cJSON_Delete(vars);
	if (st != PT_OK)
		return st;
	/* llama.cpp: a rendered BOS/EOS the tokenizer adds itself is dropped from the text. */
	pt_tmpl_strip_special(text, len, r->bos_text, pt_tok_add_bos(tok), r->eos_text,
			      pt_tok_add_eos(tok), &start, &keep);
	st = pt_tok_encode_alloc(tok, text + start, keep, true, true, ids, n, err);
	pt_free(text);
	return st;
}

/* ---- output and stats ------------------------------------------------------------------- */

/* Harmony reply events: content to stdout; reasoning (the analysis channel) to stderr unless
 * --quiet, ended by a newline before the content resumes. */
static void on_chat_event(void *ctx, const struct pt_chat_event *ev)
{
	struct pt_run *r = ctx;
	if (ev->kind == PT_CHAT_REASONING) {
		if (!r->quiet && ev->len) {
			fwrite(ev->text, 1, ev->len, stderr);
			r->reasoning_open = true;
		}
		return;
	}
	if (ev->kind != PT_CHAT_CONTENT || !ev->len)
		return;
	if (r->reasoning_open) {
		fputc('\n', stderr);
		r->reasoning_open = false;
	}
	fwrite(ev->text, 1, ev->len, stdout);
	fflush(stdout);
}

static bool emit_stdout(void *ctx, const char *text, size_t len)
{
	struct pt_run *r = ctx;
	if (r && r->chat) {
		pt_chat_parser_feed(r->chat, text, len, on_chat_event, r);
		return !ferror(stdout);
	}
	return fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
}

static double mib(uint64_t b)
{
	return (double)b / (1024.0 * 1024.0);
}

static double rate(double n, double s)
{
	return s > 0 ? n / s : 0;
}

static bool mapped(const struct pt_engine_stats *es)
{
	return es->io_engine && strncmp(es->io_engine, "mmap", 4) == 0;
}

void pt_run_print_stats(struct pt_run *r, const struct pt_gen_stats *st, FILE *f)
{
	struct pt_engine_stats es;
	pt_engine_stats(r->engine, &es);
	uint64_t uses = es.hits + es.misses;
	char replay[48] = "";
	if (st->replayed_tokens) /* recurrent state: the kept tokens after its checkpoint */
		snprintf(replay, sizeof replay, ", %u replayed", st->replayed_tokens);
	fprintf(f, "[prompt %u tokens (%u reused%s), prefill %.1f tok/s, first token %.3f s | "
		   "generated %u tokens, decode %.1f tok/s, stop: %s]\n",
		st->prompt_tokens, st->reused_tokens, replay,
		rate(st->prefill_tokens, st->prefill_s), st->ttft_s, st->gen_tokens,
		rate(st->gen_tokens, st->decode_s), pt_stop_reason_name(st->stop));
	if (mapped(&es)) { /* no expert cache: hits and reads would read 100 % and 0 */
		fprintf(f, "[peak RSS %.1f MiB, budget %.1f MiB, experts mapped (page cache)]\n",
			mib(es.peak_rss_bytes), mib(es.memory_budget));
		return;
	}
	fprintf(f, "[peak RSS %.1f MiB, budget %.1f MiB, expert hit rate %.1f%%, read %.1f MiB "
		   "at %.1f MiB/s]\n",
		mib(es.peak_rss_bytes), mib(es.memory_budget),
		uses ? 100.0 * (double)es.hits / (double)uses : 100.0, mib(es.bytes_read),
		rate(mib(es.bytes_read), es.io_busy_s));
}

void pt_run_print_totals(struct pt_run *r, FILE *f)
{
	struct pt_engine_stats es;
	pt_engine_stats(r->engine, &es);
	uint64_t uses = es.hits + es.misses;
	fprintf(f, "[%u turns: prompt %llu tokens (%llu reused), prefill %.1f tok/s, generated "
		   "%llu tokens, decode %.1f tok/s; KV %lld/%u rows]\n",
		r->turns, (unsigned long long)r->prompt_tokens, (unsigned long long)r->reused_tokens,
		rate((double)(r->prompt_tokens - r->reused_tokens), r->prefill_s),
		(unsigned long long)r->gen_tokens, rate((double)r->gen_tokens, r->decode_s),
		(long long)pt_engine_pos(r->engine), pt_engine_n_ctx(r->engine));
	if (mapped(&es)) {
		fprintf(f, "[peak RSS %.1f MiB, budget %.1f MiB, experts mapped: %s]\n",
			mib(es.peak_rss_bytes), mib(es.memory_budget), es.io_engine);
		return;
	}
	fprintf(f, "[peak RSS %.1f MiB, budget %.1f MiB, %u slots/layer, expert hit rate %.1f%%, "
		   "read %.1f MiB at %.1f MiB/s; %s]\n",
		mib(es.peak_rss_bytes), mib(es.memory_budget), es.slots_per_layer,
		uses ? 100.0 * (double)es.hits / (double)uses : 100.0, mib(es.bytes_read),
		rate(mib(es.bytes_read), es.io_busy_s), es.io_engine ? es.io_engine : "-");
}

static cJSON *ids_json(const int32_t *ids, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
	return a;
}

static cJSON *stats_json(struct pt_run *r, const struct pt_gen_stats *st, const int32_t *prompt,
			 size_t n_prompt)
{
	struct pt_engine_stats es;
	pt_engine_stats(r->engine, &es);
	cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray();
	size_t len;
	const char *text = pt_session_text(r->session, &len);
	cJSON_AddNumberToObject(j, "prompt_tokens", st->prompt_tokens);
	cJSON_AddNumberToObject(j, "reused_tokens", st->reused_tokens);
	cJSON_AddNumberToObject(j, "replayed_tokens", st->replayed_tokens);
	cJSON_AddNumberToObject(j, "checkpoint_bytes", (double)es.ckpt_bytes);
	cJSON_AddNumberToObject(j, "checkpoints_restored", (double)es.ckpt_restored);
	cJSON_AddNumberToObject(j, "prefill_tokens", st->prefill_tokens);
	cJSON_AddNumberToObject(j, "prefill_tps", rate(st->prefill_tokens, st->prefill_s));
	cJSON_AddNumberToObject(j, "ttft_s", st->ttft_s);
	cJSON_AddNumberToObject(j, "generated_tokens", st->gen_tokens);
	cJSON_AddNumberToObject(j, "decode_tps", rate(st->gen_tokens, st->decode_s));
	cJSON_AddStringToObject(j, "stop_reason", pt_stop_reason_name(st->stop));
	cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)es.peak_rss_bytes);
	cJSON_AddNumberToObject(j, "budget_bytes", (double)es.memory_budget);
	cJSON_AddNumberToObject(j, "slots_per_layer", es.slots_per_layer);
	cJSON_AddNumberToObject(j, "expert_hits", (double)es.hits);
	cJSON_AddNumberToObject(j, "expert_misses", (double)es.misses);
	cJSON_AddNumberToObject(j, "expert_hit_rate", es.hits + es.misses ?
				(double)es.hits / (double)(es.hits + es.misses) : 1.0);
	cJSON_AddNumberToObject(j, "read_bytes", (double)es.bytes_read);
	cJSON_AddNumberToObject(j, "read_mib_s", rate(mib(es.bytes_read), es.io_busy_s));
	cJSON_AddStringToObject(j, "io_engine", es.io_engine ? es.io_engine : "");
	for (uint32_t i = 0; i < es.n_moe_layers; i++) {
		uint64_t h, m, b;
		pt_engine_layer_stats(r->engine, i, &h, &m, &b);
		cJSON *l = cJSON_CreateObject();
		cJSON_AddNumberToObject(l, "hits", (double)h);
		cJSON_AddNumberToObject(l, "misses", (double)m);
		cJSON_AddNumberToObject(l, "read_bytes", (double)b);
		cJSON_AddItemToArray(layers, l);
	}
	cJSON_AddItemToObject(j, "layers", layers);
	cJSON_AddItemToObject(j, "prompt_ids", ids_json(prompt, n_prompt));
	cJSON_AddItemToObject(j, "ids", ids_json(pt_session_ids(r->session), st->gen_tokens));
	cJSON_AddItemToObject(j, "text", cJSON_CreateString(text));
	return j;
}

static enum pt_status write_stats_json(struct pt_run *r, const struct pt_gen_stats *st,
				       const int32_t *prompt, size_t n, struct pt_error *err)
{
	cJSON *j = stats_json(r, st, prompt, n);
	char *s = j ? cJSON_Print(j) : NULL;
	cJSON_Delete(j);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for --stats-json");
	/* --stats-json names an output: replaced by rename, never written through a link */
	struct pt_safe_file out;
	enum pt_status rc = pt_safe_output(&out, r->stats_json, err);
	if (rc == PT_OK)
		rc = pt_safe_write(&out, s, strlen(s), err);
	if (rc == PT_OK)
		rc = pt_safe_write(&out, "\n", 1, err);
	if (rc == PT_OK)
		rc = pt_safe_commit(&out, err);
	else
		pt_safe_abort(&out);
	cJSON_free(s);
	return rc;
}

enum pt_status pt_run_generate(struct pt_run *r, const int32_t *ids, size_t n,
			       struct pt_gen_stats *st, struct pt_error *err)
{
	*r->cancel = 0;
	if (r->harmony && !r->raw && r->tmpl) {
		const struct pt_chat_parser_opts co = { .format = PT_CHAT_HARMONY, .reasoning = true };
		enum pt_status pst = pt_chat_parser_new(&co, &r->chat, err);
		if (pst != PT_OK)
			return pst;
		r->reasoning_open = false;
	}
	*r->generating = 1;
	enum pt_status rc = pt_session_generate(r->session, ids, n, st, err);
	*r->generating = 0;
	if (r->chat) {
		struct pt_chat_result res = { 0 };
		enum pt_status fst = pt_chat_parser_finish(r->chat, on_chat_event, r, &res, err);
		pt_chat_result_free(&res);
		pt_chat_parser_free(r->chat);
		r->chat = NULL;
		if (r->reasoning_open)
			fputc('\n', stderr);
		if (rc == PT_OK)
			rc = fst;
	}
	if (rc != PT_OK)
		return rc;
	r->turns++;
	r->prompt_tokens += st->prompt_tokens;
	r->reused_tokens += st->reused_tokens;
	r->gen_tokens += st->gen_tokens;
	r->prefill_s += st->prefill_s;
	r->decode_s += st->decode_s;
	if (r->interactive)
		fputc('\n', stdout); /* the prompt comes back on a line of its own */
	fflush(stdout);
	if (!r->quiet) {
		if (!r->interactive)
			fputc('\n', stderr);
		pt_run_print_stats(r, st, stderr);
	}
	if (r->stats_json)
		rc = write_stats_json(r, st, ids, n, err);
	return rc;
}

/* ---- loading ---------------------------------------------------------------------------- */

static double gib(uint64_t b)
{
	return (double)b / (1024.0 * 1024.0 * 1024.0);
}

/* --memory against what the machine can give: above the cgroup limit is refused (the kernel
 * would kill us), above MemAvailable is a warning (the page cache and other processes pay). */
static int check_budget(const struct opts *o)
{
	uint64_t limit = UINT64_MAX, usage = 0, avail = 0;
	const char *src = NULL;
	struct pt_error err = { 0 };
	pt_plan_cgroup_limit(NULL, &limit, &usage);
	if (o->eng.memory && limit != UINT64_MAX && o->eng.memory > limit) {
		pt_cli_error("run: --memory %.2f GiB exceeds this process's cgroup memory limit of "
			     "%.2f GiB at --memory", gib(o->eng.memory), gib(limit));
		return PT_EXIT_USAGE;
	}
	if (pt_plan_default_budget(NULL, &avail, &src, &err) != PT_OK)
		return o->eng.memory ? 0 : pt_cli_fail(&err);
	if (o->eng.memory && o->eng.memory > avail && !o->quiet)
		fprintf(stderr, "particle: warning: --memory %.2f GiB is more than the machine can "
				"give now (%.2f GiB, %s less headroom); expect paging\n",
			gib(o->eng.memory), gib(avail), src ? src : "MemAvailable");
	if (o->eng.verbose)
		fprintf(stderr, "particle: machine budget %.2f GiB (%s), requested %s\n", gib(avail),
			src ? src : "?", o->eng.memory ? "--memory" : "the machine budget");
	return 0;
}

/* The copy --repack makes is paid back over a session, not by a one-shot answer (and the
 * file leaves the page cache as it is copied), so only interactive chat repacks by default;
 * never on the GPU (the device uploads the weights as stored). */
static int open_engine(const struct opts *o, bool interactive, pt_engine **e)
{
	struct pt_engine_opts eo;
	struct pt_error err = { 0 };
	pt_cli_engine_opts(&o->eng, o->model, o->eng.verbose ? stderr : NULL, &eo);
	if (!interactive || o->gpu.on)
		eo.repack_auto = false;
	if (pt_engine_open(&eo, e, &err) != PT_OK)
		return pt_cli_fail(&err);
	return 0;
}

/* A special token's text as a C string (the template's bos_token / eos_token). */
static const char *token_text(const pt_tok *tok, int32_t id, char *buf, size_t cap)
{
	size_t len = 0;
	const char *t = id >= 0 ? pt_tok_text(tok, id, &len) : NULL;
	if (!t || len >= cap)
		return NULL;
	memcpy(buf, t, len);
	buf[len] = 0;
	return buf;
}

/* The chat template: --template FILE, else the model's own. */
static int load_template(const struct opts *o, struct pt_run *r)
{
	const pt_tok *tok = pt_engine_tok(r->engine);
	struct pt_error err = { 0 };
	char *src = NULL;
	size_t len = 0;
	int rc = 0;
	if (o->tmpl) {
		if ((rc = pt_cli_read_input(o->tmpl, &src, &len)) != 0)
			return rc;
	} else if (pt_tok_chat_template(tok)) {
		const char *t = pt_tok_chat_template(tok);
		len = strlen(t);
		src = pt_malloc(len + 1);
		if (src)
			memcpy(src, t, len + 1);
	} else {
		pt_cli_error("run: %s has no chat template; pass --template FILE (or use --prompt)",
			     o->model);
		return PT_EXIT_USAGE;
	}
	if (!src) {
		pt_cli_error("out of memory loading the chat template");
		return PT_EXIT_FAIL;
	}
	if (pt_tmpl_parse(src, len, &r->tmpl, &err) != PT_OK)
		rc = pt_cli_fail(&err);
	r->harmony = pt_chat_format_detect(src, pt_engine_model(r->engine)->hp.arch_name) ==
		     PT_CHAT_HARMONY;
	pt_free(src);
	r->bos_text = token_text(tok, pt_tok_bos(tok), r->bos_buf, sizeof r->bos_buf);
	r->eos_text = token_text(tok, pt_tok_eos(tok), r->eos_buf, sizeof r->eos_buf);
	return rc;
}

static int create_session(const struct opts *o, struct pt_run *r)
{
	struct pt_session_opts so = { 0 };
	struct pt_error err = { 0 };
	so.sampler = o->so;
	so.max_new = (uint32_t)o->max_new;
	so.stops = o->stops;
	so.n_stops = o->n_stops;
	so.emit = emit_stdout;
	so.emit_ctx = r;
	so.cancel = r->cancel;
	if (pt_session_create(r->engine, &so, &r->session, &err) != PT_OK)
		return pt_cli_fail(&err);
	return 0;
}

/* ---- one-shot runs ---------------------------------------------------------------------- */

static int one_shot(const struct opts *o, struct pt_run *r)
{
	struct pt_error err = { 0 };
	int32_t *ids = NULL;
	size_t n = 0;
	enum pt_status st;
	int rc = 0;
	if (o->messages) {
		cJSON *msgs = NULL;
		if ((rc = load_messages(o->messages, &msgs)) != 0)
			return rc;
		st = pt_run_encode_chat(r, msgs, &ids, &n, &err);
		cJSON_Delete(msgs);
	} else {
		char *text = (char *)o->prompt;
		size_t len = strlen(text);
		if (strcmp(o->prompt, "-") == 0 && (rc = pt_cli_read_input("-", &text, &len)) != 0)
			return rc;
		st = pt_run_encode_raw(r, text, len, &ids, &n, &err);
		if (text != o->prompt)
			pt_free(text);
	}
	struct pt_gen_stats gs = { 0 };
	if (st == PT_OK && n == 0)
		st = pt_error_set(&err, PT_E_INVALID, "the prompt is empty at --prompt");
	if (st == PT_OK)
		st = pt_run_generate(r, ids, n, &gs, &err);
	pt_free(ids);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	return gs.stop == PT_STOP_CANCELLED ? PT_EXIT_CANCELLED : PT_EXIT_OK;
}

static void install_sigint(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

int pt_cmd_run(int argc, char **argv)
{
	struct opts o;
	struct pt_run r;
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? PT_EXIT_OK : rc;
	bool interactive = !o.prompt && !o.messages;
	if (interactive && !isatty(STDIN_FILENO)) {
		pt_cli_error("run: stdin is not a terminal: give --prompt TEXT (or '-') or "
			     "--messages FILE (or '-')");
		return PT_EXIT_USAGE;
	}
	if (o.raw && !interactive) {
		pt_cli_error("run: --raw is the interactive raw mode; --prompt is already raw");
		return PT_EXIT_USAGE;
	}
	if ((rc = check_budget(&o)) != 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.quiet = o.quiet;
	r.verbose = o.eng.verbose;
	r.raw = o.raw;
	r.interactive = interactive;
	r.stats_json = o.stats_json;
	r.cancel = &cancel_flag;
	r.generating = &generating_flag;
	install_sigint();
	if ((rc = open_engine(&o, interactive, &r.engine)) != 0)
		return rc;
	struct pt_cli_gpu_run *gpu = NULL; /* --gpu: the engine's pass on the device */
	if (o.gpu.on)
		rc = pt_cli_gpu_attach(&o.gpu, r.engine, o.eng.policy,
				       o.eng.verbose ? stderr : NULL, &gpu);
	if (rc == 0 && !o.prompt && !o.raw)
		rc = load_template(&o, &r);
	if (rc == 0)
		rc = create_session(&o, &r);
	if (rc == 0)
		rc = interactive ? pt_run_interactive(&r) : one_shot(&o, &r);
	pt_session_destroy(r.session);
	pt_tmpl_destroy(r.tmpl);
	pt_cli_gpu_detach(gpu, r.engine);
	pt_engine_close(r.engine);
	return rc;
}
