/* stats.c - the status snapshot as JSON for GET /v1/stats/stream (stats.h).  Pure: the
 * stream handler (stats_stream.c) samples, this only formats and derives interval rates. */
#include "server/stats.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

static void num(cJSON *o, const char *k, double v)
{
	cJSON_AddNumberToObject(o, k, v);
}

/* v, or null when the quotient is undefined. */
static void ratio(cJSON *o, const char *k, double a, double b)
{
	if (b > 0)
		num(o, k, a / b);
	else
		cJSON_AddNullToObject(o, k);
}

static const char *mode_of(const struct pt_stats_model *m, const struct pt_engine_stats *e)
{
	if (!m->n_moe)
		return "none";
	return e->io_engine && strncmp(e->io_engine, "mmap", 4) == 0 ? "mapped" : "cache";
}

static double d64(uint64_t a, uint64_t b)
{
	return a > b ? (double)(a - b) : 0.0; /* counters never go back; guard anyway */
}

static void add_gen(cJSON *g, const struct pt_stats_sample *p, const struct pt_stats_sample *c)
{
	const struct pt_engine_stats *e = &c->eng;
	if (p) {
		const double dt = c->eng.decode_s - p->eng.decode_s;
		num(g, "decode_tok_s", dt > 0 ? d64(e->decode_tokens, p->eng.decode_tokens) / dt : 0);
		ratio(g, "prefill_tok_s", d64(e->prefill_tokens, p->eng.prefill_tokens),
		      c->eng.prefill_s - p->eng.prefill_s);
	} else {
		num(g, "decode_tok_s", 0);
		cJSON_AddNullToObject(g, "prefill_tok_s");
	}
	ratio(g, "decode_tok_s_avg", (double)e->decode_tokens, e->decode_s);
	ratio(g, "prefill_tok_s_avg", (double)e->prefill_tokens, e->prefill_s);
	if (c->ttft_s >= 0)
		num(g, "ttft_s", c->ttft_s);
	else
		cJSON_AddNullToObject(g, "ttft_s");
	num(g, "prefill_done", c->prefill_done);
	num(g, "prefill_total", c->prefill_total);
	num(g, "generating", c->slots_generating);
	num(g, "prompt_tokens", (double)c->prompt_tokens);
	num(g, "cached_tokens", (double)c->cached_tokens);
	num(g, "generated_tokens", (double)c->generated_tokens);
}

static void add_experts(cJSON *x, const char *mode, const struct pt_stats_sample *p,
			const struct pt_stats_sample *c)
{
	const struct pt_engine_stats *e = &c->eng;
	cJSON_AddStringToObject(x, "mode", mode);
	cJSON_AddStringToObject(x, "io_engine", e->io_engine ? e->io_engine : "");
	cJSON_AddStringToObject(x, "policy", e->cache_policy ? e->cache_policy : "");
	num(x, "slots_per_layer", e->slots_per_layer);
	num(x, "hits", (double)e->hits);
	num(x, "misses", (double)e->misses);
	num(x, "bytes_read", (double)e->bytes_read);
	ratio(x, "hit_rate", (double)e->hits, (double)(e->hits + e->misses));
	if (!p) {
		cJSON_AddNullToObject(x, "hit_rate_now");
		cJSON_AddNullToObject(x, "read_bytes");
		cJSON_AddNullToObject(x, "mib_per_token");
		cJSON_AddNullToObject(x, "disk_mb_s");
		return;
	}
	const double dh = d64(e->hits, p->eng.hits), dm = d64(e->misses, p->eng.misses);
	ratio(x, "hit_rate_now", dh, dh + dm);
	const double rd = strcmp(mode, "mapped") == 0 ? d64(c->proc_read_bytes, p->proc_read_bytes)
						      : d64(e->bytes_read, p->eng.bytes_read);
	num(x, "read_bytes", rd);
	ratio(x, "mib_per_token", rd / (1024.0 * 1024.0),
	      d64(e->decode_tokens, p->eng.decode_tokens));
	ratio(x, "disk_mb_s", rd / 1e6, c->t_s - p->t_s);
}

/* heat.resident: one '0'/'1' string per layer; heat.uses: one array per layer. */
static bool add_heat(cJSON *h, const char *mode, const struct pt_stats_model *m,
		     const uint8_t *resident, const uint32_t *uses)
{
	cJSON_AddStringToObject(h, "mode", mode);
	num(h, "n_expert", m->n_expert);
	cJSON *layers = cJSON_AddArrayToObject(h, "layers");
	cJSON *res = cJSON_AddArrayToObject(h, "resident");
	cJSON *use = cJSON_AddArrayToObject(h, "uses");
	char *row = pt_malloc((size_t)m->n_expert + 1);
	if (!layers || !res || !use || !row) {
		pt_free(row);
		return false;
	}
	bool ok = true;
	for (uint32_t l = 0; l < m->n_moe && ok; l++) {
		const size_t base = (size_t)l * m->n_expert;
		for (uint32_t x = 0; x < m->n_expert; x++)
			row[x] = resident[base + x] ? '1' : '0';
		row[m->n_expert] = 0;
		cJSON *u = cJSON_CreateArray();
		for (uint32_t x = 0; u && x < m->n_expert && ok; x++)
			ok = cJSON_AddItemToArray(u, cJSON_CreateNumber(uses[base + x]));
		ok = ok && u && cJSON_AddItemToArray(use, u) &&
		     cJSON_AddItemToArray(res, cJSON_CreateString(row)) &&
		     cJSON_AddItemToArray(layers, cJSON_CreateNumber(m->layers ? m->layers[l] : l));
	}
	pt_free(row);
	return ok;
}

char *pt_stats_json(const struct pt_stats_model *m, const struct pt_stats_sample *p,
		    const struct pt_stats_sample *c, const uint8_t *resident, const uint32_t *uses)
{
	const struct pt_engine_stats *e = &c->eng;
	const char *mode = mode_of(m, e);
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	num(o, "t_ms", (double)c->wall_ms);
	num(o, "uptime_s", c->uptime_s);
	if (p)
		num(o, "interval_s", c->t_s - p->t_s);
	else
		cJSON_AddNullToObject(o, "interval_s");
	cJSON *mo = cJSON_AddObjectToObject(o, "model");
	cJSON *sv = cJSON_AddObjectToObject(o, "server");
	cJSON *g = cJSON_AddObjectToObject(o, "gen");
	cJSON *me = cJSON_AddObjectToObject(o, "memory");
	cJSON *x = cJSON_AddObjectToObject(o, "experts");
	bool ok = mo && sv && g && me && x;
	if (ok) {
		cJSON_AddStringToObject(mo, "id", m->id ? m->id : "");
		cJSON_AddStringToObject(mo, "arch", m->arch ? m->arch : "");
		num(mo, "n_ctx", m->n_ctx);
		num(mo, "n_moe_layers", m->n_moe);
		num(mo, "n_expert", m->n_expert);
		num(mo, "n_expert_used", m->n_expert_used);
		num(sv, "slots_total", c->slots_total);
		num(sv, "slots_busy", c->slots_busy);
		num(sv, "queue_depth", c->queue_depth);
		num(sv, "max_queue", c->max_queue);
		num(sv, "requests_total", (double)c->requests_total);
		num(sv, "requests_ok", (double)c->requests_ok);
		num(sv, "requests_cancelled", (double)c->requests_cancelled);
		num(sv, "requests_rejected", (double)c->requests_rejected);
		add_gen(g, p, c);
		num(me, "budget_bytes", (double)e->memory_budget);
		num(me, "rss_bytes", (double)c->rss_bytes);
		num(me, "peak_rss_bytes", (double)e->peak_rss_bytes);
		num(me, "resident_bytes", (double)e->resident_bytes);
		num(me, "kv_bytes", (double)e->kv_bytes);
		num(me, "expert_cache_bytes", strcmp(mode, "cache") == 0
			? (double)e->slot_bytes * e->slots_per_layer * e->n_moe_layers : 0.0);
		add_experts(x, mode, p, c);
	}
	if (ok && resident && uses) {
		cJSON *h = cJSON_AddObjectToObject(o, "heat");
		ok = h && add_heat(h, mode, m, resident, uses);
	}
	char *txt = ok ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!txt)
		return NULL;
	/* cJSON's buffer comes from malloc: hand back one from the project's allocator */
	char *out = pt_strdup(txt);
	cJSON_free(txt);
	return out;
}

static uint64_t proc_field(const char *path, const char *key, uint64_t mult)
{
	FILE *fp = fopen(path, "r");
	char line[256];
	unsigned long long v = 0;
	const size_t kl = strlen(key);
	if (!fp)
		return 0;
	while (fgets(line, sizeof line, fp))
		if (strncmp(line, key, kl) == 0 && sscanf(line + kl, " %llu", &v) == 1)
			break;
	fclose(fp);
	return (uint64_t)v * mult;
}

void pt_stats_proc(uint64_t *rss_bytes, uint64_t *read_bytes)
{
	if (rss_bytes)
		*rss_bytes = proc_field("/proc/self/status", "VmRSS:", 1024);
	if (read_bytes)
		*read_bytes = proc_field("/proc/self/io", "read_bytes:", 1);
}
