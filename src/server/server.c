/* server.c - the server object: chat template and special-token text from the engine's
 * tokenizer, the route table, the scheduler and the HTTP core, the snapshot API. */
#include "server/srv_int.h"
#include "server/stats.h"
#include "server/webui.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "token/tok.h"
#include "util/alloc.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A special token's text as a C string (the template's bos_token / eos_token). */
static const char *token_text(const struct pt_tok *tok, int32_t id, char *buf, size_t cap)
{
	size_t len = 0;
	const char *t = id >= 0 ? pt_tok_text(tok, id, &len) : NULL;
	if (!t || len >= cap)
		return NULL;
	memcpy(buf, t, len);
	buf[len] = 0;
	return buf;
}

static enum pt_status load_template(pt_server *s, struct pt_error *err)
{
	const char *src = s->o.template_src ? s->o.template_src : pt_tok_chat_template(s->tok);
	s->bos_text = token_text(s->tok, pt_tok_bos(s->tok), s->bos_buf, sizeof s->bos_buf);
	s->eos_text = token_text(s->tok, pt_tok_eos(s->tok), s->eos_buf, sizeof s->eos_buf);
	s->template_src = src;
	s->chat_format = pt_chat_format_detect(src, pt_engine_model(s->e)->hp.arch_name);
	if (!src)
		return PT_OK; /* chat requests then answer 400; completions work */
	size_t len = strlen(src);
	if (pt_req_utf8_check((const unsigned char *)src, len) != len)
		return pt_error_set(err, PT_E_FORMAT, "the chat template is not valid UTF-8");
	return pt_tmpl_parse(src, len, &s->tmpl, err);
}

/* Routes of other modules are registered here, once, before listening. */
static enum pt_status register_routes(pt_server *s, struct pt_error *err)
{
	enum pt_status st = pt_srv_register_api(s, err);
	if (st == PT_OK && s->o.metrics)
		st = pt_srv_register_metrics(s, err);
	/* web UI (issue 14): the page unless --no-webui; the stats stream is API, always on */
	if (st == PT_OK && !s->o.no_webui)
		st = pt_webui_register(s, err);
	if (st == PT_OK)
		st = pt_stats_register(s, err);
	return st;
}

enum pt_status pt_server_create(pt_engine *e, const struct pt_server_opts *o, pt_server **out,
				struct pt_error *err)
{
	*out = NULL;
	pt_server *s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory for the server");
	s->e = e;
	s->tok = pt_engine_tok(e);
	s->o = *o;
	if (s->o.parallel == 0)
		s->o.parallel = 1;
	snprintf(s->model_id, sizeof s->model_id, "%s", o->model_id ? o->model_id : "particle");
	s->t_start = now_s();
	s->t_start_wall = (double)time(NULL);
	s->seed_state = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)s << 16);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->engine_mu, NULL);
	pthread_mutex_init(&s->gvocab_mu, NULL);
	pthread_cond_init(&s->queue_cv, NULL);
	s->snap.n_slots = s->o.parallel;
	s->snap.max_queue = s->o.max_queue;
	s->snap.ready = true;
	struct pt_engine_stats es;
	pt_engine_stats(e, &es);
	s->snap.engine = es;
	s->n_layers = es.n_moe_layers;
	s->layer = pt_calloc(s->n_layers ? s->n_layers : 1, sizeof *s->layer);
	enum pt_status st = s->layer ? PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st == PT_OK)
		st = load_template(s, err);
	if (st == PT_OK)
		st = register_routes(s, err);
	if (st != PT_OK) {
		pt_server_destroy(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

struct pt_routes *pt_server_routes(pt_server *s)
{
	return &s->routes;
}

enum pt_status pt_server_listen(pt_server *s, struct pt_error *err)
{
	enum pt_status st = pt_srv_start_worker(s, err);
	if (st != PT_OK)
		return st;
	return pt_http_start(&s->o.http, &s->routes, &s->http, err);
}

uint16_t pt_server_port(const pt_server *s)
{
	return s->http ? pt_http_port(s->http) : 0;
}

void pt_server_stop(pt_server *s, double grace_s)
{
	if (!s)
		return;
	if (s->http) {
		pt_http_stop(s->http, grace_s); /* returns once every connection is closed */
		s->http = NULL;
	}
	pt_srv_stop_worker(s);
}

void pt_server_destroy(pt_server *s)
{
	if (!s)
		return;
	pt_server_stop(s, 0);
	pt_tmpl_destroy(s->tmpl);
	pt_grammar_vocab_free(s->gvocab);
	pthread_mutex_destroy(&s->gvocab_mu);
	pt_free(s->layer);
	pthread_cond_destroy(&s->queue_cv);
	pthread_mutex_destroy(&s->engine_mu);
	pthread_mutex_destroy(&s->mu);
	pt_free(s);
}

/* ---- the read-only view (state.h) ------------------------------------------------------- */

static uint64_t rss_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long pages = 0, rss = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	/* statm counts pages: 4 KiB on x86-64, 16 / 64 KiB on some arm64 kernels */
	long page = sysconf(_SC_PAGESIZE);
	return rss * (unsigned long long)(page > 0 ? page : 4096);
}

void pt_server_snapshot(pt_server *s, struct pt_server_snapshot *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->snap;
	pthread_mutex_unlock(&s->mu);
	out->uptime_s = now_s() - s->t_start;
	out->rss_bytes = rss_now();
}

void pt_server_with_engine(pt_server *s, void (*fn)(void *ctx, const pt_engine *e), void *ctx)
{
	pthread_mutex_lock(&s->engine_mu);
	fn(ctx, s->e);
	pthread_mutex_unlock(&s->engine_mu);
}

void pt_server_layer_stats(pt_server *s, uint32_t i, uint64_t *hits, uint64_t *misses,
			   uint64_t *bytes_read)
{
	pthread_mutex_lock(&s->mu);
	bool ok = i < s->n_layers;
	*hits = ok ? s->layer[i][0] : 0;
	*misses = ok ? s->layer[i][1] : 0;
	*bytes_read = ok ? s->layer[i][2] : 0;
	pthread_mutex_unlock(&s->mu);
}
