/* cmd_serve.c - `particle serve`: an OpenAI-compatible HTTP server over one model.  Owns
 * the flags (llama.cpp's spellings accepted as aliases), loading and planning the model
 * BEFORE listening, the one "listening" line, the loopback/API-key warning and the
 * SIGINT/SIGTERM graceful stop (SIGINT while the model loads: exit 130 at once).  The server itself is src/server. */
#include "cli/cli.h"
#include "cli/models.h"
#include "cli/input.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "server/server.h"
#include "util/alloc.h"

struct opts {
	const char *model, *host, *api_key, *api_key_file, *alias, *tmpl_file;
	const char *reasoning;
	struct pt_cli_engine eng; /* -c, -t, --memory, --io, ..., --no-lock, --verbose */
	uint64_t port, parallel, max_queue, timeout;
	uint64_t max_body, max_conns, cache_prompts;
	uint64_t checkpoints; /* recurrent-state checkpoints per sequence (0: the engine's 4) */
	int64_t max_new;
	struct pt_sampler_opts so;
	bool seed_given, quiet, no_webui, no_metrics, log_requests;
	const char *cors[PT_HTTP_MAX_CORS];
	size_t n_cors;
};

static void help(void)
{
	printf("usage: particle serve [-m MODEL] [options]\n\n"
	       "Serves the model over an OpenAI-compatible HTTP API: POST /v1/chat/completions,\n"
	       "POST /v1/completions (JSON or SSE streaming), GET /v1/models, GET /health,\n"
	       "GET /metrics (Prometheus), POST /tokenize, /detokenize, /apply-template.  The\n"
	       "model is loaded and planned before the server listens; then one line on stdout\n"
	       "gives the URL.  SIGINT/SIGTERM let running requests finish (up to 5 s) and exit 0.\n"
	       "Point any OpenAI client at http://HOST:PORT/v1 (see README).\n\n"
	       "server:\n"
	       "  --host ADDR               address to bind (default 127.0.0.1; binding anything\n"
	       "                            but loopback without --api-key prints a warning)\n"
	       "  --port N                  TCP port, 0 = any free one (default 8080)\n"
	       "  --api-key KEY             require 'Authorization: Bearer KEY' (401 otherwise;\n"
	       "                            /health stays open)\n"
	       "  --api-key-file FILE       the key from the first line of FILE\n"
	       "  -a, --alias NAME          model id in /v1/models and responses (default: the\n"
	       "                            file name without .gguf)\n"
	       "  -np, --parallel N         requests generated at once, their decode steps\n"
	       "                            batched in one forward pass (default 1, at most %d)\n"
	       "  --cache-prompts N         extra KV sequences kept as a prompt cache: a request\n"
	       "                            continues the cached conversation sharing the longest\n"
	       "                            prefix with it, LRU (default 0: each slot keeps only\n"
	       "                            its last conversation); counted in the memory plan\n"
	       "  --max-queue N             requests waiting for a slot; more get 503 with\n"
	       "                            Retry-After (default 16)\n"
	       "  --timeout S               a request must arrive whole within S seconds, and an\n"
	       "                            idle connection is closed after S (default 30)\n"
	       "  --max-body SIZE           largest request body, e.g. 8M (default 8M; 413 above)\n"
	       "  --max-connections N       open connections at once (default 64)\n"
	       "  --cors ORIGIN             allow browser requests from ORIGIN ('*': any;\n"
	       "                            repeatable, up to %d)\n"
	       "  --chat-template-file FILE Jinja chat template instead of the model's\n"
	       "  --reasoning-format F      none|deepseek (default deepseek): split <think> into\n"
	       "                            reasoning_content\n"
	       "  --no-metrics              no GET /metrics\n"
	       "  --no-webui                no web UI at / (the chat page with a live status\n"
	       "                            panel; GET /v1/stats/stream stays)\n"
	       "  --log-requests            one line per request on stderr\n"
	       "  --quiet                   no notices on stderr (the stop notice)\n\n"
	       "model and memory (as `particle run`):\n"
	       "  -m, --model PATH          GGUF model, or a name in the models directory\n"
	       "                            (particle list; default: $PARTICLE_MODEL)\n"
	       "  -c, --ctx-size, --max-context N  KV cache positions, bounded by the model's\n"
	       "                            (default 4096)\n"
	       "  -t, --threads N           compute threads, 0 = online cores (default 0)\n"
	       "  --memory SIZE             memory budget, e.g. 6G (default: cgroup/MemAvailable)\n"
	       "  --expert-slots N          expert cache slots per MoE layer (default: planned)\n"
	       "  --io MODE                 auto|direct|buffered|mmap (default auto)\n"
	       "  --cache-policy P          lfu|lru (default lfu)\n"
	       "  --kv-type T               f16|f32|q8_0 (default f16; q8_0 halves the KV memory)\n"
	       "  -b, --batch N             prefill chunk in tokens (default 128)\n"
	       "  --checkpoints N           recurrent-state checkpoints per sequence (models\n"
	       "                            with linear attention: qwen35moe; placed at message\n"
	       "                            boundaries, counted in the plan; default 4)\n"
	       "  --no-lock                 do not take the single-process model lock\n"
	       "  --no-profile              do not read or write the expert-popularity profile\n"
	       "  --repack                  Q4_K, Q6_K, Q8_0 and Q5_0 matrices with rows\n"
	       "                            interleaved 16 at a time, copied at load (~0.6 s/GB;\n"
	       "                            the file leaves the page cache): faster prompts and\n"
	       "                            decode.\n"
	       "                            Where experts stream they are not copied: read\n"
	       "                            interleaved from a `particle pack --repack` pack, or\n"
	       "                            computed from the rows as stored in the same numerics.\n"
	       "                            Default: on (not --io mmap over the budget)\n"
	       "  --no-repack               every matrix as stored (the quickest start)\n"
	       "  --verbose                 print the load plan\n\n"
	       "request defaults (each request may override them):\n"
	       "  -n, --n-predict, --max-new N  tokens to generate, -1 = until EOS or the\n"
	       "                            context end (default -1)\n"
	       "  --temp, --temperature F   (default 0.2)\n"
	       "  --top-k N                 (default 64)\n"
	       "  --top-p F                 (default 0.95)\n"
	       "  --min-p F                 (default 0)\n"
	       "  --repeat-penalty, --repetition-penalty F  (default 1.0)\n"
	       "  --repeat-last-n N         (default 64)\n"
	       "  -s, --seed N              seed for requests without one (default: random)\n"
	       "  -h, --help                this text\n\n"
	       "exit codes: 0 stopped by SIGINT/SIGTERM, 1 runtime failure (model, port in use),\n"
	       "130 interrupted while the model was loading, "
	       "2 bad usage\n", PT_SERVER_MAX_SLOTS, PT_HTTP_MAX_CORS);
}

/* SIGINT/SIGTERM may land on any thread (the engine's pool, the HTTP threads): the handler
 * only records it and wakes the main thread through a pipe.  Before the server listens (the
 * model is loading) it exits at once. */
static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_signal, serving;

static void on_signal(int sig)
{
	if (!serving)
		_exit(PT_EXIT_CANCELLED);
	got_signal = sig;
	ssize_t w = write(sig_pipe[1], "x", 1);
	(void)w;
}

static int install_signals(void)
{
	struct sigaction sa;
	if (pipe2(sig_pipe, O_CLOEXEC) != 0) {
		pt_cli_error("serve: cannot create a pipe: %s", strerror(errno));
		return PT_EXIT_FAIL;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return 0;
}

static bool is(const char *a, const char *s, const char *l, const char *l2)
{
	return (s && strcmp(a, s) == 0) || strcmp(a, l) == 0 || (l2 && strcmp(a, l2) == 0);
}

static int int_flag(struct opts *o, const char *a, const char *v)
{
	static const struct { const char *s, *l, *l2; uint64_t lo, hi; size_t off; } t[] = {
		{ NULL, "--port", NULL, 0, 65535, offsetof(struct opts, port) },
		{ "-np", "--parallel", NULL, 1, PT_SERVER_MAX_SLOTS, offsetof(struct opts, parallel) },
		{ NULL, "--max-queue", NULL, 0, 100000, offsetof(struct opts, max_queue) },
		{ NULL, "--timeout", NULL, 1, 86400, offsetof(struct opts, timeout) },
		{ NULL, "--max-connections", NULL, 2, 10000, offsetof(struct opts, max_conns) },
		{ NULL, "--cache-prompts", NULL, 0, 64, offsetof(struct opts, cache_prompts) },
		{ NULL, "--checkpoints", NULL, 1, 64, offsetof(struct opts, checkpoints) },
	};
	uint64_t x;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (is(a, t[i].s, t[i].l, t[i].l2)) {
			if (!pt_cli_parse_u64(a, v, t[i].lo, t[i].hi, &x))
				return -1;
			*(uint64_t *)((char *)o + t[i].off) = x;
			return 1;
		}
	if (is(a, NULL, "--max-body", NULL)) {
		if (!pt_cli_parse_size(a, v, &o->max_body))
			return -1;
		if (o->max_body < 1024 || o->max_body > (1ull << 30)) {
			pt_cli_error("serve: --max-body must be between 1K and 1G");
			return -1;
		}
		return 1;
	}
	if (is(a, "-s", "--seed", NULL)) {
		o->seed_given = true;
		return pt_cli_parse_u64(a, v, 0, (1ull << 53), &o->so.seed) ? 1 : -1;
	}
	if (is(a, "-n", "--n-predict", "--max-new")) {
		if (strcmp(v, "-1") == 0) {
			o->max_new = -1;
			return 1;
		}
		if (!pt_cli_parse_u64(a, v, 1, INT32_MAX, &x))
			return -1;
		o->max_new = (int64_t)x;
		return 1;
	}
	return pt_cli_sampler_flag(a, v, &o->so);
}

static int str_flag(void *opts, const char *a, const char *v)
{
	struct opts *o = opts;
	static const struct { const char *s, *l; size_t off; } t[] = {
		{ "-m", "--model", offsetof(struct opts, model) },
		{ NULL, "--host", offsetof(struct opts, host) },
		{ NULL, "--api-key", offsetof(struct opts, api_key) },
		{ NULL, "--api-key-file", offsetof(struct opts, api_key_file) },
		{ "-a", "--alias", offsetof(struct opts, alias) },
		{ NULL, "--chat-template-file", offsetof(struct opts, tmpl_file) },
		{ NULL, "--reasoning-format", offsetof(struct opts, reasoning) },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (is(a, t[i].s, t[i].l, NULL)) {
			*(const char **)((char *)o + t[i].off) = v;
			return 1;
		}
	if (strcmp(a, "--cors") == 0)
		return pt_cli_list_flag("serve: --cors", "origin", v, o->cors, &o->n_cors,
					PT_HTTP_MAX_CORS);
	const int r = pt_cli_engine_value_flag(a, v, &o->eng);
	return r ? r : int_flag(o, a, v);
}

static bool bool_flag(void *opts, const char *a)
{
	struct opts *o = opts;
	if (pt_cli_engine_switch(a, &o->eng))
		return 1;
	bool *b = !strcmp(a, "--quiet") ? &o->quiet : !strcmp(a, "--no-webui") ? &o->no_webui
		: !strcmp(a, "--no-metrics") ? &o->no_metrics
		: !strcmp(a, "--log-requests") ? &o->log_requests : NULL;
	if (b)
		*b = true;
	return b != NULL;
}

static void set_defaults(struct opts *o)
{
	memset(o, 0, sizeof *o);
	pt_sampler_opts_default(&o->so);
	o->so.seed = 0;
	o->host = "127.0.0.1";
	o->port = 8080;
	o->eng.max_ctx = 4096;
	o->eng.batch = 128;
	o->parallel = 1;
	o->max_queue = 16;
	o->timeout = 30;
	o->max_body = 8u << 20;
	o->max_conns = 64;
	o->max_new = -1;
	o->model = getenv("PARTICLE_MODEL");
	if (o->model && !*o->model)
		o->model = NULL;
}

static int check_opts(const struct opts *o)
{
	if (!o->model) {
		pt_cli_error("serve: no model: give -m MODEL or set PARTICLE_MODEL");
		return PT_EXIT_USAGE;
	}
	const int rc = pt_cli_engine_check("serve", &o->eng);
	if (rc)
		return rc;
	if (o->reasoning && strcmp(o->reasoning, "none") && strcmp(o->reasoning, "deepseek")) {
		pt_cli_error("serve: --reasoning-format wants none or deepseek, got '%.40s'",
			     o->reasoning);
		return PT_EXIT_USAGE;
	}
	if (o->api_key && o->api_key_file) {
		pt_cli_error("serve: give --api-key or --api-key-file, not both");
		return PT_EXIT_USAGE;
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct pt_cli_flags f = { "serve", help, o, bool_flag, NULL, str_flag };
	set_defaults(o);
	const int rc = pt_cli_parse_flags(&f, argc, argv);
	if (rc)
		return rc;
	if (o->model) /* a name in the models directory */
		o->model = pt_cli_model_path(o->model);
	return check_opts(o);
}

static int open_engine(const struct opts *o, pt_engine **e)
{
	struct pt_engine_opts eo;
	struct pt_error err = { 0 };
	pt_cli_engine_opts(&o->eng, o->model, NULL, &eo);
	eo.n_seq = (uint32_t)(o->parallel + o->cache_prompts);
	eo.ckpt_max = (uint32_t)o->checkpoints;
	if (pt_engine_open(&eo, e, &err) != PT_OK)
		return pt_cli_fail(&err);
	return 0;
}

/* --api-key-file: the first line, surrounding white space removed. */
static int read_key_file(const char *path, char **key)
{
	char *text = NULL;
	size_t len = 0;
	int rc = pt_cli_read_input(path, &text, &len);
	if (rc)
		return rc;
	char *s = text, *e;
	while (*s && isspace((unsigned char)*s))
		s++;
	for (e = s; *e && *e != '\n' && *e != '\r'; e++)
		;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	if (e == s) {
		pt_free(text);
		pt_cli_error("serve: %s holds no API key", path);
		return PT_EXIT_USAGE;
	}
	*key = pt_strndup(s, (size_t)(e - s));
	pt_free(text);
	return *key ? 0 : PT_EXIT_FAIL;
}

static bool loopback(const char *host)
{
	return !strcmp(host, "127.0.0.1") || !strcmp(host, "::1") || !strcmp(host, "localhost") ||
	       !strncmp(host, "127.", 4);
}

/* The model id: --alias, else the file name without its directory and .gguf (a split
 * model's without -0000K-of-0000N.gguf, whichever part was named). */
static void model_id(const struct opts *o, char *out, size_t cap)
{
	char first[4096];
	if (o->alias) {
		snprintf(out, cap, "%s", o->alias);
		return;
	}
	const char *m = pt_gguf_split_first_path(o->model, first, sizeof first) ? first : o->model;
	const char *b = strrchr(m, '/');
	b = b ? b + 1 : m;
	size_t n = strlen(b);
	if (n > 20 && strcmp(b + n - 5, ".gguf") == 0 && memcmp(b + n - 20, "-00001-of-", 10) == 0)
		n -= 20; /* "-00001-of-0000N.gguf" */
	else if (n > 5 && strcmp(b + n - 5, ".gguf") == 0)
		n -= 5;
	snprintf(out, cap, "%.*s", (int)n, b);
}

static void fill_server_opts(const struct opts *o, const char *key, const char *tmpl,
			     const char *id, struct pt_server_opts *so)
{
	memset(so, 0, sizeof *so);
	so->http.host = o->host;
	so->http.port = (uint16_t)o->port;
	so->http.api_key = key;
	for (size_t i = 0; i < o->n_cors; i++)
		so->http.cors[i] = o->cors[i];
	so->http.n_cors = o->n_cors;
	so->http.max_body = (size_t)o->max_body;
	so->http.max_connections = (uint32_t)o->max_conns;
	so->http.timeout_s = (uint32_t)o->timeout;
	so->http.log = o->log_requests ? stderr : NULL;
	so->defaults.sampler = o->so;
	so->defaults.max_tokens = o->max_new;
	so->defaults.seed_given = o->seed_given;
	so->defaults.max_body = (size_t)o->max_body;
	so->model_id = id;
	so->template_src = tmpl;
	so->parallel = (uint32_t)o->parallel;
	so->max_queue = (uint32_t)o->max_queue;
	so->n_batch = (uint32_t)o->eng.batch;
	so->reasoning_format = o->reasoning && !strcmp(o->reasoning, "none") ? 0 : 1;
	so->metrics = !o->no_metrics;
	so->no_webui = o->no_webui;
}

static int serve(const struct opts *o, pt_engine *e, const char *key, const char *tmpl)
{
	struct pt_server_opts so;
	struct pt_error err = { 0 };
	pt_server *s = NULL;
	char id[256];
	model_id(o, id, sizeof id);
	fill_server_opts(o, key, tmpl, id, &so);
	if (pt_server_create(e, &so, &s, &err) != PT_OK)
		return pt_cli_fail(&err);
	if (pt_server_listen(s, &err) != PT_OK) {
		pt_server_destroy(s);
		return pt_cli_fail(&err);
	}
	serving = 1; /* from here a signal stops the server gracefully (before the URL line) */
	if (!key && !loopback(o->host))
		fprintf(stderr, "particle: warning: listening on %s without --api-key: anyone who "
				"can reach this address can use the model\n", o->host);
	bool v6 = strchr(o->host, ':') != NULL;
	printf("particle: serving %s at http://%s%s%s:%u (OpenAI API under /v1; Ctrl-C stops)\n",
	       id, v6 ? "[" : "", o->host, v6 ? "]" : "", pt_server_port(s));
	fflush(stdout);
	char c;
	while (read(sig_pipe[0], &c, 1) < 0 && errno == EINTR)
		; /* until SIGINT/SIGTERM (the handler writes one byte) */
	int sig = got_signal;
	if (!o->quiet)
		fprintf(stderr, "particle: %s: finishing running requests, then stopping\n",
			sig == SIGTERM ? "SIGTERM" : "SIGINT");
	pt_server_stop(s, 5.0);
	pt_server_destroy(s);
	return PT_EXIT_OK;
}

int pt_cmd_serve(int argc, char **argv)
{
	struct opts o;
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? PT_EXIT_OK : rc;
	char *key = NULL, *tmpl = NULL;
	size_t tlen = 0;
	if (o.api_key_file && (rc = read_key_file(o.api_key_file, &key)) != 0)
		return rc;
	if (o.api_key && !*o.api_key) {
		pt_cli_error("serve: --api-key is empty");
		return PT_EXIT_USAGE;
	}
	if (o.tmpl_file && (rc = pt_cli_read_input(o.tmpl_file, &tmpl, &tlen)) != 0) {
		pt_free(key);
		return rc;
	}
	signal(SIGPIPE, SIG_IGN);
	pt_engine *e = NULL;
	if ((rc = install_signals()) == 0 && (rc = open_engine(&o, &e)) == 0)
		rc = serve(&o, e, key ? key : o.api_key, tmpl);
	pt_engine_close(e);
	pt_free(key);
	pt_free(tmpl);
	return rc;
}
