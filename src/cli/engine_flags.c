/* engine_flags.c - the flags that set up the engine (src/gen/engine.h), parsed, checked and
 * turned into struct pt_engine_opts in one place: run and serve share every one of them
 * (struct pt_cli_engine); bench and eval share the expert-store flags (pt_cli_engine_flag). */
#include "cli/cli.h"

#include <stddef.h>
#include <string.h>

#include "gen/engine.h"
#include "gguf/gguf.h"

static bool is(const char *a, const char *s, const char *l, const char *l2)
{
	return (s && strcmp(a, s) == 0) || strcmp(a, l) == 0 || (l2 && strcmp(a, l2) == 0);
}

int pt_cli_engine_value_flag(const char *a, const char *v, struct pt_cli_engine *f)
{
	static const struct { const char *s, *l, *l2; uint64_t lo, hi; size_t off; } num[] = {
		{ "-c", "--max-context", "--ctx-size", 1, UINT32_MAX,
		  offsetof(struct pt_cli_engine, max_ctx) },
		{ "-t", "--threads", NULL, 0, 1024, offsetof(struct pt_cli_engine, threads) },
		{ NULL, "--expert-slots", NULL, 1, 1u << 16, offsetof(struct pt_cli_engine, slots) },
		{ "-b", "--batch", "--batch-size", 1, 1u << 16,
		  offsetof(struct pt_cli_engine, batch) },
	};
	static const struct { const char *l; size_t off; } str[] = {
		{ "--io", offsetof(struct pt_cli_engine, io) },
		{ "--cache-policy", offsetof(struct pt_cli_engine, policy) },
		{ "--kv-type", offsetof(struct pt_cli_engine, kv) },
	};
	for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
		if (is(a, num[i].s, num[i].l, num[i].l2))
			return pt_cli_parse_u64(a, v, num[i].lo, num[i].hi,
						(uint64_t *)((char *)f + num[i].off)) ? 1 : -1;
	if (strcmp(a, "--memory") == 0)
		return pt_cli_parse_size(a, v, &f->memory) ? 1 : -1;
	/* the words are checked after parsing (pt_cli_engine_check), as run and serve did */
	for (size_t i = 0; i < sizeof str / sizeof str[0]; i++)
		if (strcmp(a, str[i].l) == 0) {
			*(const char **)((char *)f + str[i].off) = v;
			return 1;
		}
	return 0;
}

bool pt_cli_engine_switch(const char *a, struct pt_cli_engine *f)
{
	if (strcmp(a, "--repack") == 0 || strcmp(a, "--no-repack") == 0) {
		f->repack = a[2] == 'r';
		f->no_repack = !f->repack;
		return true;
	}
	bool *b = strcmp(a, "--no-lock") == 0 ? &f->no_lock
		: strcmp(a, "--no-profile") == 0 ? &f->no_profile
		: strcmp(a, "--verbose") == 0 ? &f->verbose : NULL;
	if (b)
		*b = true;
	return b != NULL;
}

int pt_cli_engine_check(const char *cmd, const struct pt_cli_engine *f)
{
	enum pt_kv_type kt;
	if (f->io && strcmp(f->io, "auto") && strcmp(f->io, "direct") &&
	    strcmp(f->io, "buffered") && strcmp(f->io, "mmap")) {
		pt_cli_error("%s: --io wants auto, direct, buffered or mmap, got '%.40s'", cmd, f->io);
		return PT_EXIT_USAGE;
	}
	if (f->policy && strcmp(f->policy, "lfu") && strcmp(f->policy, "lru")) {
		pt_cli_error("%s: --cache-policy wants lfu or lru, got '%.40s'", cmd, f->policy);
		return PT_EXIT_USAGE;
	}
	if (f->kv && pt_kv_type_from_name(f->kv, &kt) != 0) {
		pt_cli_error("%s: --kv-type wants f16, f32 or q8_0, got '%.40s'", cmd, f->kv);
		return PT_EXIT_USAGE;
	}
	return 0;
}

/* The model's trained context (its <arch>.context_length key) bounds --max-context. */
static uint32_t bounded_ctx(const char *model, uint64_t n, FILE *log)
{
	pt_gguf *g = NULL;
	struct pt_error err = { 0 };
	struct pt_str arch = { 0 };
	uint32_t train = 0;
	char key[96];
	if (pt_gguf_open(model, &g, &err) == PT_OK &&
	    pt_gguf_get_str(g, "general.architecture", &arch, NULL, &err) == PT_OK &&
	    arch.len < 64) {
		snprintf(key, sizeof key, "%.*s.context_length", (int)arch.len, arch.ptr);
		if (pt_gguf_get_u32(g, key, 0, &train, NULL, &err) != PT_OK)
			train = 0;
	}
	pt_gguf_close(g);
	if (train && n > train) {
		if (log)
			fprintf(log, "particle: --max-context %llu bounded by the model's %u\n",
				(unsigned long long)n, train);
		n = train;
	}
	return (uint32_t)n;
}

void pt_cli_engine_opts(const struct pt_cli_engine *f, const char *model, FILE *ctx_log,
			struct pt_engine_opts *eo)
{
	enum pt_kv_type kt = PT_KV_F16;
	if (f->kv)
		pt_kv_type_from_name(f->kv, &kt);
	memset(eo, 0, sizeof *eo);
	eo->model_path = model;
	eo->threads = (uint32_t)f->threads;
	eo->n_ctx = bounded_ctx(model, f->max_ctx, ctx_log);
	eo->n_batch = f->batch ? (uint32_t)f->batch : PT_ENGINE_BATCH_AUTO;
	eo->kv_type = kt;
	eo->memory_budget = f->memory;
	eo->expert_slots = (uint32_t)f->slots;
	eo->io_mode = f->io && strcmp(f->io, "auto") ? f->io : NULL;
	eo->cache_policy = f->policy;
	eo->no_lock = f->no_lock;
	eo->use_profile = !f->no_profile;
	eo->log = f->verbose ? stderr : NULL;
	eo->verbose = f->verbose;
	eo->repack = f->repack;
	eo->repack_auto = !f->repack && !f->no_repack;
}

int pt_cli_engine_flag(const char *f, const char *v, struct pt_engine_opts *eo)
{
	uint64_t x;
	if (!strcmp(f, "--memory"))
		return pt_cli_parse_size(f, v, &eo->memory_budget) ? 1 : -1;
	if (!strcmp(f, "--expert-slots")) {
		if (!pt_cli_parse_u64(f, v, 1, 1u << 16, &x))
			return -1;
		eo->expert_slots = (uint32_t)x;
		return 1;
	}
	if (!strcmp(f, "--io")) {
		if (strcmp(v, "direct") && strcmp(v, "buffered") && strcmp(v, "mmap")) {
			pt_cli_error("--io must be direct, buffered or mmap, got '%s'", v);
			return -1;
		}
		eo->io_mode = v;
		return 1;
	}
	if (!strcmp(f, "--cache-policy")) {
		if (strcmp(v, "lfu") && strcmp(v, "lru")) {
			pt_cli_error("--cache-policy must be lfu or lru, got '%s'", v);
			return -1;
		}
		eo->cache_policy = v;
		return 1;
	}
	return 0;
}

bool pt_cli_engine_opts_switch(const char *f, bool with_verbose, struct pt_engine_opts *eo)
{
	if (!strcmp(f, "--no-profile"))
		eo->use_profile = false;
	else if (!strcmp(f, "--no-lock"))
		eo->no_lock = true;
	else if (!strcmp(f, "--repack") || !strcmp(f, "--no-repack")) {
		eo->repack = f[2] == 'r';
		eo->repack_auto = false;
	}
	else if (with_verbose && !strcmp(f, "--verbose"))
		eo->verbose = true;
	else
		return false;
	return true;
}
