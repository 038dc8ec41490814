/* engine.c - one loaded model ready to run (engine.h): model, tokenizer, memory plan, model
 * lock, thread pool, expert store and forward pass, plus the token history that rewind
 * replays from. */
#include "gen/engine.h"

#include "gen/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expert/plan.h"
#include "expert/profile.h"
#include "expert/store.h"
#include "expert/trace.h"
#include "expert/usage.h"
#include "gen/decode_bytes.h"
#include "kern/kern.h"
#include "kern/pool.h"
#include "model/deltanet.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/repack.h"
#include "token/tok.h"
#include "util/alloc.h"
#include "util/lock.h"
#include "util/safefile.h"

/* Process overhead the planner adds to the scratch estimate: code, libc, stacks, the
 * tokenizer's tables and allocator slack. */
#define RUNTIME_OVERHEAD (24ull << 20)

struct pt_engine {
	struct pt_engine_opts o;
	char *model_path; /* o.model_path after open: a split model's first part */
	struct pt_model *m;
	pt_tok *tok;
	struct pt_model_lock lock;
	bool locked;
	pt_pool *pool;
	struct pt_expert_layout lay;
	struct pt_pack pack;
	bool have_pack;
	pt_expert_store *store;
	struct pt_expert_provider prov;
	pt_trace_writer *trace;
	pt_expert_usage *usage; /* routing counts for the heat map (pt_engine_layer_experts) */
	struct pt_error trace_err;
	bool trace_failed;
	pt_fwd *f;
	struct pt_engine_device dev; /* sequence 0 on a device when dev.eval (issue 16) */
	uint32_t **toks; /* [n_seq][n_ctx] each sequence's history */
	uint32_t n_seq;
	float *batch_logits; /* [n_seq][n_vocab] for decode batches (n_seq > 1) */
	uint64_t snap_used;  /* bytes of live snapshots */
	uint64_t decode_steps;
	uint32_t n_ctx, n_batch;
	bool auto_batch; /* n_batch chosen from the memory plan (PT_ENGINE_BATCH_AUTO) */
	/* Slots lent to the chunk buffers (issue 21): the plan sizes the slots for plan_rows
	 * rows of buffers (a decode's), and a prompt of more rows lends up to lend_max slots a
	 * layer to its chunk for as long as it runs (0: the plan holds n_batch rows). */
	uint32_t plan_rows, plan_slots, lend_max, lent_peak;
	struct pt_plan_input pin;
	struct pt_plan plan;
	char plan_line[512];
	char io_engine[160];
	uint64_t repacked_bytes; /* --repack (pt_engine_stats) */
	double repack_s;
	bool mapped_fits;        /* experts mapped and the model fits the budget */
	bool plan_map;           /* make_plan: every expert in the mapping (its actual bytes) */
	bool map_random;         /* the mapping advised MADV_RANDOM (pt_gguf_advise_random) */
	uint64_t mapped_whole;   /* resident bytes left mapped, read ahead (pt_model_advise_mapped) */
	enum pt_cache_policy policy;
	uint64_t prefill_tokens, decode_tokens, prefill_ns, decode_ns;
	struct pt_profile prof; /* expert popularity: loaded at open, saved at close */
	char prof_path[4096];   /* "" when no profile is kept */
	uint32_t prof_warmed;   /* warm-up reads started at open */
	/* recurrent-state checkpoints (NULL without recurrent layers), one set per sequence,
	 * a copy buffer, and each sequence's last rewind's replayed tokens */
	struct pt_ckpt_set *ck;
	float *ck_buf;
	uint32_t *last_replay;
	uint32_t ck_every;
	uint64_t replayed;
	int64_t (*marks)[PT_ENGINE_MAX_MARKS]; /* [n_seq]: pt_engine_seq_set_marks */
	uint32_t *n_marks;
};

/* --- provider over the store --- */

static enum pt_status sp_get(void *ctx, uint32_t layer, uint32_t expert,
			     struct pt_expert_ptrs *out, struct pt_error *err)
{
	const float *b[3];
	enum pt_status st = pt_expert_store_get_mats_b(ctx, layer, expert, &out->gate, &out->up,
						       &out->down, b, err);
	out->gate_b = b[0];
	out->up_b = b[1];
	out->down_b = b[2];
	return st;
}

static void sp_release(void *ctx, uint32_t layer, uint32_t expert)
{
	pt_expert_store_release(ctx, layer, expert);
}

static enum pt_status sp_waves(void *ctx, uint32_t layer, uint32_t *experts, uint32_t n,
			       uint32_t *wave_end, uint32_t *n_waves, struct pt_error *err)
{
	return pt_expert_store_waves(ctx, layer, experts, n, wave_end, n_waves, err);
}

static enum pt_status sp_ready(void *ctx, uint32_t *expert, bool *got, struct pt_error *err)
{
	return pt_expert_store_ready(ctx, expert, got, err);
}

static enum pt_status sp_prefetch(void *ctx, uint32_t layer, const uint32_t *experts,
				  uint32_t n, struct pt_error *err)
{
	return pt_expert_store_prefetch(ctx, layer, experts, n, err);
}

static enum pt_status sp_next(void *ctx, uint32_t *expert, bool *got, struct pt_error *err)
{
	return pt_expert_store_next(ctx, expert, got, err);
}

static void sp_poll(void *ctx)
{
	pt_expert_store_poll(ctx);
}

static void sp_end_layer(void *ctx, uint32_t layer)
{
	pt_expert_store_end_layer(ctx, layer);
}

static void sp_ahead(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t n)
{
	pt_expert_store_ahead(ctx, layer, experts, n);
}

/* Routing observer: the --trace-experts file (first write error kept, reported by eval). */
static void on_route(void *ctx, uint32_t layer, int64_t pos0, uint32_t n, uint32_t k,
		     const int *ids)
{
	pt_engine *e = ctx;
	uint32_t ex[PT_TRACE_MAX_K];
	pt_expert_usage_note(e->usage, layer, n, k, ids);
	if (e->o.on_route)
		e->o.on_route(e->o.route_ctx, layer, pos0, n, k, ids);
	for (uint32_t r = 0; r < n && e->trace && !e->trace_failed; r++) {
		for (uint32_t j = 0; j < k && j < PT_TRACE_MAX_K; j++)
			ex[j] = (uint32_t)ids[(size_t)r * k + j];
		if (pt_trace_writer_add(e->trace, (uint32_t)(pos0 + r), layer, ex,
					k < PT_TRACE_MAX_K ? k : PT_TRACE_MAX_K,
					&e->trace_err) != PT_OK)
			e->trace_failed = true;
	}
}

/* --- planning --- */

static uint64_t kv_bytes(const struct pt_hparams *hp, uint32_t n_ctx, uint32_t n_batch,
			 enum pt_kv_type t)
{
	uint64_t total = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		if (pt_hparams_is_recurrent(hp, il))
			continue; /* a recurrent state instead (below) */
		const uint64_t cap = pt_kv_layer_slots(n_ctx, hp->is_swa[il] ? hp->n_swa : 0,
						       pt_fwd_swa_rows(n_batch));
		/* MLA layers cache only the latent + RoPE key (V lives in K) */
		total += cap * pt_kv_value_bytes(t, pt_hparams_kv_values(hp, il));
	}
	return total + pt_hparams_rs_bytes(hp);
}

/* Compute threads: opts.threads, 0 = the online cores, at most PT_POOL_MAX_THREADS. */
static uint32_t engine_threads(const struct pt_engine_opts *o)
{
	uint32_t threads = o->threads;
	if (!threads) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		threads = nc > 0 ? (uint32_t)nc : 1;
	}
	return threads > PT_POOL_MAX_THREADS ? PT_POOL_MAX_THREADS : threads;
}

/* Linear-attention buffers (forward.c, engine.c): per row the raw and convolved q|k|v, z,
 * the head outputs, beta and alpha; per thread the chunked delta rule's scratch; one
 * checkpoint copy buffer.  0 without recurrent layers. */
static uint64_t linear_bytes(const struct pt_hparams *hp, uint32_t n_rows, uint32_t threads)
{
	const uint64_t rs = pt_hparams_rs_bytes(hp);
	if (rs == 0 || hp->ssm_dt_rank == 0)
		return 0;
	const uint64_t conv = pt_hparams_conv_dim(hp), V = hp->ssm_d_inner, H = hp->ssm_dt_rank;
	const struct pt_dn_geom g = { hp->ssm_n_group, hp->ssm_dt_rank, hp->ssm_d_state,
				      hp->ssm_d_inner / hp->ssm_dt_rank, hp->ssm_d_conv,
				      (uint32_t)conv, true, hp->rms_eps, NULL, pt_dn_chunk_env() };
	return (uint64_t)n_rows * (2 * conv + 2 * V + 2 * H) * 4 +
	       (uint64_t)threads * pt_dn_chunk_scratch_floats(&g) * 4 + rs;
}

/* Forward-pass buffers for n_batch rows: the row buffers as forward.c sizes them
 * (pt_fwd_rows_bytes), MLA's rows, the attention blocks' partial states and per-thread scratch, the logits row and
 * the process overhead; n_seq > 1 adds a decode batch's logits. */
static uint64_t scratch_bytes(const struct pt_model *m, uint32_t n_batch, uint32_t n_ctx,
			      uint32_t n_seq, uint32_t threads)
{
	const struct pt_hparams *hp = &m->hp;
	const uint64_t batch_logits = n_seq > 1 ? (uint64_t)n_seq * hp->n_vocab * 4 : 0;
	if (n_seq > n_batch)
		n_batch = n_seq; /* the forward pass's buffers hold max(n_batch, n_seq) rows */
	uint64_t hd = hp->head_dim_k > hp->head_dim_v ? hp->head_dim_k : hp->head_dim_v;
	if (hp->head_dim_k_swa > hd)
		hd = hp->head_dim_k_swa;
	if (hp->head_dim_v_swa > hd)
		hd = hp->head_dim_v_swa;
	if (hp->head_dim_k_mla > hd)
		hd = hp->head_dim_k_mla;
	/* MLA: the full Q, the q_a rows and the per-head gather buffers */
	const uint64_t mla = hp->kv_lora_rank ? (uint64_t)hp->n_head * hp->head_dim_k_mla +
						hp->q_lora_rank + 2 * (hp->kv_lora_rank + hd)
					      : 0;
	const uint64_t floats = (uint64_t)n_batch * mla +
				(uint64_t)hp->n_head * ((n_ctx + 1023) / 1024) * (2 + hd) +
				/* per-thread attention scratch: a tile's queries, scores, states */
				(uint64_t)threads * 64 * (3 * hd + 1024) + 2 * (uint64_t)hp->n_vocab;
	return pt_fwd_rows_bytes(m, n_batch, n_seq) + floats * 4 + batch_logits +
	       linear_bytes(hp, n_batch, threads) + RUNTIME_OVERHEAD;
}

static uint64_t expert_bytes_total(const struct pt_expert_layout *l)
{
	uint64_t t = 0;
	for (uint32_t i = 0; i < l->n_moe; i++)
		t += l->moe[i].expert_bytes * l->n_expert;
	return t;
}

struct pt_engine_snap {
	int64_t pos;
	uint32_t *toks;  /* [pos] */
	void *kv;        /* pt_fwd_snapshot_bytes(pos) */
	uint64_t kv_bytes;
	uint64_t bytes;  /* everything the snapshot holds */
};

/* opts.prompt_cache_seqs: room for that many snapshots of a whole context (each the KV
 * bytes of one sequence plus its tokens), unless prompt_cache_bytes says otherwise. */
static void size_prompt_cache(pt_engine *e)
{
	if (e->o.prompt_cache_bytes || !e->o.prompt_cache_seqs)
		return;
	const uint64_t one = kv_bytes(&e->m->hp, e->n_ctx, e->n_batch, e->o.kv_type) +
			     (uint64_t)e->n_ctx * sizeof(uint32_t) + sizeof(struct pt_engine_snap);
	e->o.prompt_cache_bytes = one * e->o.prompt_cache_seqs;
}

/* The plan line names what the file holds but the plan leaves out: blocks never computed. */
static void note_skipped(pt_engine *e, int n)
{
	char b[PT_PLAN_SIZE_LEN];
	const uint32_t nn = e->m->hp.n_layer_nextn;
	if (!e->m->skipped_bytes || n <= 0 || (size_t)n >= sizeof e->plan_line)
		return;
	if (nn)
		snprintf(e->plan_line + n, sizeof e->plan_line - (size_t)n,
			 "; %u NextN block%s (%s) not computed, not resident, no slots", nn,
			 nn == 1 ? "" : "s", pt_plan_size(e->m->skipped_bytes, b));
	else
		snprintf(e->plan_line + n, sizeof e->plan_line - (size_t)n,
			 "; tensors never computed (%s): not resident, no slots",
			 pt_plan_size(e->m->skipped_bytes, b));
}

#define CKPT_EVERY_DEFAULT 512
#define CKPT_MAX_DEFAULT 4

/* Checkpoints per sequence (0 without recurrent layers) and their planned bytes. */
static uint32_t ckpt_max(const pt_engine *e)
{
	if (pt_hparams_rs_bytes(&e->m->hp) == 0)
		return 0;
	return e->o.ckpt_max ? e->o.ckpt_max : CKPT_MAX_DEFAULT;
}

static uint64_t ckpt_plan_bytes(const pt_engine *e)
{
	return (uint64_t)ckpt_max(e) * e->n_seq * pt_hparams_rs_bytes(&e->m->hp);
}

/* The routed experts' bytes where the mapping holds them all: as stored, or as --repack /
 * repack_auto would copy them (a Q4_K matrix interleaved is 2368 bytes a 16-row super-block
 * against 2304 as stored; the copy replaces the mapped pages, so the larger counts). */
static uint64_t mapped_expert_bytes(const pt_engine *e)
{
	const bool copies = e->o.repack || e->o.repack_auto;
	uint64_t total = 0;
	for (uint32_t i = 0; i < e->lay.n_moe; i++) {
		const struct pt_expert_layer *EL = &e->lay.moe[i];
		uint64_t per = EL->expert_bytes;
		for (uint32_t j = 0; copies && j < EL->n_parts; j++) {
			const struct pt_expert_part *q = &EL->part[j];
			const enum pt_type t = (enum pt_type)q->type;
			if (!q->rows || !pt_kern_x16_native(t) || !pt_kern_x16_ok(t, q->rows, q->cols))
				continue;
			const uint64_t x16 = q->rows / PT_KERN_X16_ROWS * pt_kern_x16_band(t, q->cols);
			per += x16 > q->stride ? x16 - q->stride : 0;
		}
		total += per * e->lay.n_expert;
	}
	return total;
}

static enum pt_status make_plan(pt_engine *e, uint64_t slot_bytes, struct pt_error *err)
{
	size_prompt_cache(e);
	const struct pt_hparams *hp = &e->m->hp;
	const uint64_t fsize = pt_gguf_file_size(e->m->g);
	const char *src = "--memory";
	enum pt_status st = PT_OK;
	e->pin = (struct pt_plan_input){
		.budget = e->o.memory_budget,
		/* blocks never computed (GLM's NextN) are neither resident nor cached */
		.resident_bytes = fsize - expert_bytes_total(&e->lay) - e->m->skipped_bytes,
		.kv_bytes = kv_bytes(hp, e->n_ctx, e->n_batch, e->o.kv_type) * e->n_seq,
		.scratch_bytes = scratch_bytes(e->m, e->plan_rows ? e->plan_rows : e->n_batch,
					       e->n_ctx, e->n_seq, engine_threads(&e->o)),
		.slot_bytes = slot_bytes ? slot_bytes : 1,
		.n_moe_layers = e->lay.n_moe ? e->lay.n_moe : 1,
		.top_k = hp->n_expert_used ? hp->n_expert_used : 1,
		.n_expert = e->lay.n_expert ? e->lay.n_expert : 1,
		.slots_override = e->o.expert_slots ? e->o.expert_slots : e->plan_slots,
		.n_seq = e->n_seq,
		.cache_bytes = e->o.prompt_cache_bytes,
		.ckpt_bytes = ckpt_plan_bytes(e),
		.mapped_bytes = e->plan_map && e->lay.n_moe ? mapped_expert_bytes(e) : 0,
	};
	if (!e->pin.budget)
		st = pt_plan_default_budget(NULL, &e->pin.budget, &src, err);
	if (st == PT_OK)
		st = pt_plan_compute(&e->pin, &e->plan, err);
	if (st != PT_OK)
		return st;
	int n = pt_plan_format(&e->pin, &e->plan, e->plan_line, sizeof e->plan_line);
	if (n > 0 && (size_t)n < sizeof e->plan_line)
		n += snprintf(e->plan_line + n, sizeof e->plan_line - (size_t)n,
			      " (budget from %s)", src);
	note_skipped(e, n);
	return PT_OK;
}

/* --- opening --- */

static void say(const pt_engine *e, const char *fmt, const char *a, const char *b)
{
	if (e->o.log) {
		fprintf(e->o.log, fmt, a, b);
		fflush(e->o.log);
	}
}

/* An interleaved pack (particle pack --repack) is read only by --repack runs, and only where
 * this CPU level has the interleaved kernels of its types (else each product would run the
 * scalar reference). */
static bool pack_x16_usable(const pt_engine *e, struct pt_error *err)
{
	if (!e->o.repack && !e->o.repack_auto) {
		pt_error_set(err, PT_E_INVALID, "its experts are interleaved (particle pack "
			     "--repack): run with --repack to use it");
		return false;
	}
	for (uint32_t m = 0; m < e->lay.n_moe; m++)
		for (uint32_t i = 0; i < e->lay.moe[m].n_parts; i++) {
			const enum pt_type t = (enum pt_type)e->lay.moe[m].part[i].type;
			if (e->pack.layers[m].part_x16[i] && !pt_kern_x16_native(t)) {
				pt_error_set(err, PT_E_UNSUPPORTED, "its %s experts are interleaved "
					     "and CPU level %s has no interleaved %s kernel",
					     pt_type_name(t), pt_kern_level_name(pt_kern_level()),
					     pt_type_name(t));
				return false;
			}
		}
	return true;
}

/* The pack: the one named, or MODEL.xpack when present and matching (else the GGUF). */
static enum pt_status open_pack(pt_engine *e, struct pt_error *err)
{
	char def[4096];
	const char *path = e->o.pack_path;
	if (!path) {
		pt_pack_default_path(e->o.model_path, def, sizeof def);
		if (access(def, R_OK) != 0)
			return PT_OK;
		path = def;
	}
	struct pt_error pe = { 0 };
	enum pt_status st = pt_pack_open(path, e->o.model_path, &e->lay, false, &e->pack, &pe);
	if (st == PT_OK && e->pack.x16 && !pack_x16_usable(e, &pe)) {
		pt_pack_free(&e->pack);
		st = PT_E_INVALID;
	}
	if (st == PT_OK) {
		e->have_pack = true;
		return PT_OK;
	}
	if (e->o.pack_path) {
		*err = pe;
		return st;
	}
	say(e, "particle: ignoring expert pack %s: %s\n", path, pe.msg);
	return PT_OK;
}

static enum pt_status open_store(pt_engine *e, enum pt_io_mode mode, struct pt_error *err)
{
	struct stat sb;
	char ident[128] = "";
	if (stat(e->o.model_path, &sb) == 0)
		snprintf(ident, sizeof ident, "%llu:%lld.%09ld", (unsigned long long)sb.st_size,
			 (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
	struct pt_expert_store_config c = {
		.model_path = e->o.model_path, .layout = &e->lay,
		.pack = e->have_pack ? &e->pack : NULL, .mode = mode,
		.slots_per_layer = e->plan.slots_per_layer, .policy = e->policy,
		.map_base = pt_gguf_base(e->m->g), .map_size = pt_gguf_file_size(e->m->g),
		.map_bases = pt_gguf_part_bases(e->m->g),
		.io_threads = 4, .pack_cache_dir = e->o.pack_cache_dir,
		/* PARTICLE_IO=pread: the pread pool instead of io_uring (tests, comparisons) */
		.force_pread = getenv("PARTICLE_IO") && !strcmp(getenv("PARTICLE_IO"), "pread"),
		.pack_cache_size = e->o.pack_cache_size ? e->o.pack_cache_size : 4ull << 30,
		.identity = ident,
		/* PARTICLE_READ_AHEAD=0: no decode read-ahead (A/B comparisons) */
		.no_read_ahead = getenv("PARTICLE_READ_AHEAD") &&
				 !strcmp(getenv("PARTICLE_READ_AHEAD"), "0"),
		/* the slots' pages zeroed now, not by each slot's first read in the middle of
		 * a prompt (through a kernel worker beside the compute threads: ~4.5 GiB of a
		 * capped Qwen3 prompt's slots cost it ~6 s; docs/PERFORMANCE.md round 27).
		 * PARTICLE_POPULATE=0 skips it, as it skips the mapping's (A/B measurements) */
		.populate = mode != PT_IO_MMAP && !(getenv("PARTICLE_POPULATE") &&
						    !strcmp(getenv("PARTICLE_POPULATE"), "0")),
	};
	enum pt_status st = pt_expert_store_open(&c, &e->store, err);
	if (st != PT_OK)
		return st;
	snprintf(e->io_engine, sizeof e->io_engine, "%s", pt_expert_store_describe(e->store));
	e->prov = (struct pt_expert_provider){ .ctx = e->store, .get = sp_get,
					       .release = sp_release, .waves = sp_waves,
					       .prefetch = sp_prefetch, .next = sp_next,
					       .ready = sp_ready, .end_layer = sp_end_layer, .poll = sp_poll,
					       .ahead = sp_ahead };
	if (mode == PT_IO_MMAP || c.no_read_ahead)
		e->prov.ahead = NULL; /* nothing is read early: skip the guess's router product */
	return PT_OK;
}

static enum pt_status parse_modes(pt_engine *e, enum pt_io_mode *mode, struct pt_error *err)
{
	*mode = PT_IO_DIRECT;
	e->policy = PT_CACHE_LFU;
	enum pt_status st = PT_OK;
	if (e->o.io_mode)
		st = pt_io_mode_parse(e->o.io_mode, mode, err);
	if (st == PT_OK && e->o.cache_policy)
		st = pt_cache_policy_parse(e->o.cache_policy, &e->policy, err);
	return st;
}

/* Whether the default store would cache every expert under the budget: then the mapping is
 * used instead (auto mode), since reading every expert once with O_DIRECT into fresh slots
 * costs the first prefill 5-30 % against the page cache the mapping shares (measured,
 * docs/PERFORMANCE.md), and nothing is ever evicted that a cache would have to manage. */
static bool every_expert_fits(pt_engine *e, uint64_t slot)
{
	struct pt_error ignore = { 0 };
	e->plan_map = true; /* the question is whether the mapping fits */
	const bool fits = make_plan(e, slot, &ignore) == PT_OK && e->plan.all_experts;
	e->plan_map = false;
	return fits;
}

/* Experts paged in by the kernel: planned as if every expert were resident; the budget
 * cannot be enforced, so a model larger than it still runs (the llama.cpp-like baseline),
 * with a note.  auto_mmap: chosen because every expert fits (said in the plan line). */
static enum pt_status open_mapped(pt_engine *e, uint64_t slot, bool auto_mmap,
				  struct pt_error *err)
{
	struct pt_error pe = { 0 };
	char b[4][PT_PLAN_SIZE_LEN];
	e->o.expert_slots = e->lay.n_moe ? e->lay.n_expert : 0;
	e->plan_map = true;
	enum pt_status st = make_plan(e, slot, &pe);
	const bool fits = st == PT_OK;
	e->mapped_fits = fits;
	if (st == PT_E_LIMIT) {
		say(e, "particle: --io mmap: %s (not enforced%s)\n", pe.msg,
		    ": the kernel pages experts in and out");
		const uint64_t budget = e->pin.budget;
		e->o.memory_budget = UINT64_MAX / 4;
		st = make_plan(e, slot, err);
		e->pin.budget = budget;
		snprintf(e->plan_line, sizeof e->plan_line,
			 "resident %s + routed experts %s mapped (--io mmap: paged by the kernel), "
			 "KV %s; budget %s not enforced", pt_plan_size(e->pin.resident_bytes, b[0]),
			 pt_plan_size(expert_bytes_total(&e->lay), b[1]),
			 pt_plan_size(e->pin.kv_bytes, b[2]), pt_plan_size(budget, b[3]));
		note_skipped(e, (int)strlen(e->plan_line));
	} else if (st != PT_OK) {
		*err = pe;
	} else if (auto_mmap) {
		size_t n = strlen(e->plan_line);
		snprintf(e->plan_line + n, sizeof e->plan_line - n,
			 "; every expert fits: mapped (--io direct to stream instead)");
	}
	/* a file (nearly) all in the page cache already: map every page now rather than take
	 * a first-touch fault per fault-around window or folio whenever an expert is first
	 * routed to (costs no I/O; a file larger than RAM is never 90 % resident).
	 * PARTICLE_POPULATE=0 skips it (A/B measurements; docs/PERFORMANCE.md, issue 21). */
	const char *pop = getenv("PARTICLE_POPULATE");
	if (st == PT_OK && !(pop && !strcmp(pop, "0"))) {
		/* the model fits the budget: pages read from disk from here on come in 2 MiB
		 * folios (not when it does not: there a fault should read what it needs) */
		if (fits)
			(void)pt_gguf_advise_huge(e->m->g);
		(void)pt_gguf_populate(e->m->g, 90);
	}
	e->prov = e->m->mmap_provider;
	snprintf(e->io_engine, sizeof e->io_engine, "%s",
		 !e->lay.n_moe ? "no routed experts"
		 : auto_mmap   ? "mmap (every expert fits the budget; pages on demand)"
			       : "mmap (pages on demand, no expert cache)");
	return st;
}

/* The candidate after c: the largest power of two below it (not below lo). */
static uint32_t next_chunk(uint32_t c, uint32_t lo)
{
	uint32_t p = lo;
	while (p * 2 < c)
		p *= 2;
	return p;
}

/* PT_ENGINE_BATCH_AUTO: the largest prefill chunk (min(n_ctx, 4096, and unless the experts
 * stream, the rows that give ~128 tokens per routed expert), then 2048, 1024, ... rows) whose forward-pass buffers take at most an eighth of the budget and with which the
 * plan still holds where it held at 128 rows: every expert still fits where it did (the
 * mapping stays; planned at its actual bytes where the mapping may hold the experts, and
 * kept within the budget so --repack still copies them), else at least 3/4 of the expert
 * slots remain.  An eighth: under a 6 GiB
 * cap the Sarvam-30B shape (~0.4 MB of buffers a row) gets 1024 rows and keeps most of the
 * budget for expert slots.  The buffers are touched only as far as a prompt fills them. */
static void choose_batch(pt_engine *e, uint64_t slot, bool mapped, bool may_map)
{
	struct pt_error ignore = { 0 };
	const uint64_t cache_bytes = e->o.prompt_cache_bytes; /* make_plan sizes it per chunk */
	const uint32_t lo = e->n_ctx < 128 ? e->n_ctx : 128;
	e->n_batch = lo;
	/* where the mapping may hold the experts and holds them all at 128 rows, the chunks are
	 * planned against the mapping's bytes (else the slots') */
	e->plan_map = may_map;
	const bool map_lo = may_map && make_plan(e, slot, &ignore) == PT_OK;
	e->plan_map = map_lo;
	const bool fits_lo = map_lo || make_plan(e, slot, &ignore) == PT_OK;
	const bool all_lo = fits_lo && e->plan.all_experts;
	const uint32_t slots_lo = fits_lo ? e->plan.slots_per_layer : 0;
	const uint64_t budget = e->pin.budget;
	uint32_t c = e->n_ctx < PT_ENGINE_BATCH_MAX ? e->n_ctx : PT_ENGINE_BATCH_MAX;
	/* rows enough for ~128 tokens per routed expert on average: wider products gain
	 * little past that (bench_kern experts: the Sarvam expert shapes at 96 vs 192 tokens),
	 * while larger chunks stream more buffers (rank slots, norms) through DRAM instead of
	 * the caches and fault in more pages (docs/PERFORMANCE.md, issue 21) */
	const struct pt_hparams *hp = &e->m->hp;
	/* streaming experts (they do not all fit): a prompt longer than a chunk reads every
	 * expert again for each chunk, so there the largest chunk the plan allows wins */
	const bool streaming = fits_lo && !all_lo && !mapped;
	if (hp->n_expert && hp->n_expert_used && !streaming) {
		uint64_t want = 512;
		while (want * 2 * hp->n_expert_used <= 128ull * hp->n_expert &&
		       want < PT_ENGINE_BATCH_MAX)
			want *= 2;
		if (c > want)
			c = (uint32_t)want;
	}
	/* --io mmap of a model whose experts do not all fit (the mapping takes memory the plan
	 * cannot see), or a plan that fails even at 128 rows: the buffers get a sixteenth */
	const uint64_t room = fits_lo && (all_lo || !mapped) ? budget / 8 : budget / 16;
	for (; c > lo; c = next_chunk(c, lo)) {
		if (scratch_bytes(e->m, c, e->n_ctx, e->n_seq, engine_threads(&e->o)) > room)
			continue;
		e->n_batch = c;
		e->o.prompt_cache_bytes = cache_bytes;
		/* --io mmap over the budget: the mapping stays whatever the plan says; within it,
		 * the chunk must leave it within (--repack copies the experts only then) */
		if (!fits_lo || (mapped && !all_lo))
			break;
		if (make_plan(e, slot, &ignore) == PT_OK &&
		    (all_lo ? e->plan.all_experts
			    : (uint64_t)e->plan.slots_per_layer * 4 >= (uint64_t)slots_lo * 3))
			break;
	}
	if (c <= lo)
		e->n_batch = lo;
	e->o.prompt_cache_bytes = cache_bytes;
	e->plan_map = false;
}

/* Rows of chunk buffers the slot plan leaves room for when prompts lend slots: a decode's
 * (the smallest chunk choose_batch considers, or one row a sequence). */
static uint32_t small_rows(const pt_engine *e)
{
	const uint32_t lo = e->n_ctx < 128 ? e->n_ctx : 128;
	return lo > e->n_seq ? lo : e->n_seq;
}

/* Bytes of chunk buffers for rows beyond the plan's small_rows. */
static uint64_t rows_beyond_small(const pt_engine *e, uint32_t rows)
{
	const uint32_t th = engine_threads(&e->o);
	return scratch_bytes(e->m, rows, e->n_ctx, e->n_seq, th) -
	       scratch_bytes(e->m, small_rows(e), e->n_ctx, e->n_seq, th);
}

/* After the plan for n_batch-row chunks (the prefill's slots): where the store streams
 * experts and the slots are planned (no --expert-slots), decode gets the slots the chunk
 * buffers' bytes beyond a decode's (small_rows rows) would hold, in whole slots across the
 * MoE layers, and each prompt of more rows lends them back to its chunk for as long as it
 * runs (lend_for, eval_lent).  The chunk buffers are only touched by a prompt and handed
 * back after it (pt_fwd_trim), so the process never holds more than the prefill's plan: a
 * prompt runs with the slots of the n_batch-row plan, a decode with those plus the loan. */
static void lend_plan(pt_engine *e, uint64_t slot)
{
	struct pt_error ignore = { 0 };
	const uint32_t prefill_slots = e->plan.slots_per_layer;
	const struct pt_plan keep = e->plan;
	const struct pt_plan_input keep_in = e->pin;
	char line[sizeof e->plan_line];
	memcpy(line, e->plan_line, sizeof line);
	/* PARTICLE_LEND=0: the plan holds n_batch rows of buffers as before (A/B comparisons) */
	const char *env = getenv("PARTICLE_LEND");
	if (e->o.expert_slots || e->plan.all_experts || e->n_batch <= small_rows(e) ||
	    (env && !strcmp(env, "0")))
		return;
	const uint64_t k = rows_beyond_small(e, e->n_batch) /
			   (e->pin.slot_bytes * e->pin.n_moe_layers);
	if (k == 0 || prefill_slots + k >= e->pin.n_expert)
		return; /* nothing to lend, or decode would hold every expert: plan as is */
	e->plan_rows = small_rows(e);
	e->plan_slots = prefill_slots + (uint32_t)k;
	if (make_plan(e, slot, &ignore) == PT_OK) {
		e->lend_max = (uint32_t)k;
		const size_t n = strlen(e->plan_line);
		snprintf(e->plan_line + n, sizeof e->plan_line - n,
			 "; a prompt of more than %u tokens lends up to %u slots/layer to its "
			 "%u-row chunk", e->plan_rows, e->lend_max, e->n_batch);
		return;
	}
	e->plan_rows = 0; /* the plan for n_batch rows stands */
	e->plan_slots = 0;
	e->plan = keep;
	e->pin = keep_in;
	memcpy(e->plan_line, line, sizeof line);
}

/* Slots a layer lends to an evaluation of n tokens: what its chunk's rows need beyond the
 * plan's rows, in whole slots across the MoE layers (at most lend_max). */
static uint32_t lend_for(const pt_engine *e, uint32_t n)
{
	const uint32_t rows = n < e->n_batch ? n : e->n_batch;
	if (!e->lend_max || !e->store || rows <= e->plan_rows)
		return 0;
	const uint64_t need = rows_beyond_small(e, rows); /* plan_rows == small_rows */
	const uint64_t per = e->pin.slot_bytes * e->pin.n_moe_layers;
	const uint64_t k = (need + per - 1) / per;
	return k < e->lend_max ? (uint32_t)k : e->lend_max;
}

/* Plan, then the expert source: the mapping (--io mmap, or no routed experts) or the
 * store. */
static enum pt_status open_experts(pt_engine *e, struct pt_error *err)
{
	enum pt_io_mode mode;
	enum pt_status st = parse_modes(e, &mode, err);
	if (st == PT_OK)
		st = pt_expert_layout_from_gguf_layers(e->m->g, e->m->hp.n_layer, &e->lay, err);
	if (st == PT_OK && mode != PT_IO_MMAP && e->lay.n_moe)
		st = open_pack(e, err);
	if (st != PT_OK)
		return st;
	const uint64_t slot = e->lay.n_moe ? pt_expert_store_slot_bytes(&e->lay,
						e->have_pack ? &e->pack : NULL) : 0;
	const bool may_auto_map = !e->o.io_mode && !e->o.expert_slots && e->lay.n_moe;
	if (e->auto_batch)
		choose_batch(e, slot, mode == PT_IO_MMAP, mode == PT_IO_MMAP || may_auto_map);
	const bool auto_mmap = may_auto_map && every_expert_fits(e, slot);
	if (auto_mmap)
		mode = PT_IO_MMAP;
	if (mode == PT_IO_MMAP || !e->lay.n_moe)
		return open_mapped(e, slot, auto_mmap, err);
	st = make_plan(e, slot, err);
	if (st == PT_OK)
		lend_plan(e, slot);
	return st == PT_OK ? open_store(e, mode, err) : st;
}

static enum pt_status open_ckpt(pt_engine *e, struct pt_error *err)
{
	const uint64_t rs = pt_fwd_rs_bytes(e->f);
	e->last_replay = pt_calloc(e->n_seq, sizeof *e->last_replay);
	if (!e->last_replay)
		return pt_error_set(err, PT_E_NOMEM, "engine: replay counters");
	if (rs == 0)
		return PT_OK;
	e->ck_every = e->o.ckpt_every ? e->o.ckpt_every : CKPT_EVERY_DEFAULT;
	e->ck = pt_calloc(e->n_seq, sizeof *e->ck);
	e->ck_buf = pt_malloc(rs);
	e->marks = pt_calloc(e->n_seq, sizeof *e->marks);
	e->n_marks = pt_calloc(e->n_seq, sizeof *e->n_marks);
	if (!e->ck || !e->ck_buf || !e->marks || !e->n_marks)
		return pt_error_set(err, PT_E_NOMEM, "engine: checkpoint tables");
	enum pt_status st = PT_OK;
	for (uint32_t s = 0; st == PT_OK && s < e->n_seq; s++)
		st = pt_ckpt_init(&e->ck[s], ckpt_max(e), rs / sizeof(float), err);
	return st;
}

/* A checkpoint of seq's state at its position. */
static enum pt_status ckpt_take(pt_engine *e, uint32_t seq, bool turn, struct pt_error *err)
{
	if (!e->ck)
		return PT_OK;
	enum pt_status st = pt_fwd_seq_rs_save(e->f, seq, e->ck_buf, err);
	return st == PT_OK ? pt_ckpt_put(&e->ck[seq], pt_fwd_seq_pos(e->f, seq), turn, e->ck_buf,
					 err)
			   : st;
}

/* Periodic checkpoints: the next position after pos that is a multiple of the period
 * (INT64_MAX without checkpoints). */
static int64_t ckpt_next(const pt_engine *e, int64_t pos)
{
	if (!e->ck || e->ck_every == UINT32_MAX)
		return INT64_MAX;
	return (pos / e->ck_every + 1) * (int64_t)e->ck_every;
}

static enum pt_status open_fwd(pt_engine *e, struct pt_error *err)
{
	struct pt_fwd_opts fo = { .n_ctx = e->n_ctx, .n_batch = e->n_batch,
				  .kv_type = e->o.kv_type, .pool = e->pool, .experts = &e->prov,
				  .on_route = on_route, .route_ctx = e, .n_seq = e->n_seq,
				  .dn_chunk_min = e->o.dn_chunk_min };
	enum pt_status st = pt_expert_usage_create(&e->lay, &e->usage, err);
	if (st == PT_OK && e->o.trace_path)
		st = pt_trace_writer_open(e->o.trace_path, false, &e->trace, err);
	if (st == PT_OK)
		st = pt_fwd_create(e->m, &fo, &e->f, err);
	if (st == PT_OK) {
		e->toks = pt_calloc(e->n_seq, sizeof *e->toks);
		for (uint32_t s = 0; e->toks && s < e->n_seq; s++)
			if (!(e->toks[s] = pt_mallocn(e->n_ctx, sizeof **e->toks)))
				break;
		if (!e->toks || !e->toks[e->n_seq - 1])
			st = pt_error_set(err, PT_E_NOMEM, "engine: token history");
	}
	if (st == PT_OK && e->n_seq > 1) {
		e->batch_logits = pt_mallocn((size_t)e->n_seq * pt_engine_n_vocab(e), sizeof(float));
		if (!e->batch_logits)
			st = pt_error_set(err, PT_E_NOMEM, "engine: batch logits");
	}
	if (st == PT_OK)
		st = open_ckpt(e, err);
	return st;
}

/* The store reads an interleaved pack: its X16 parts are the experts' layout from now on
 * (the mapping's copies of these tensors are then not read: the store is the provider). */
static enum pt_status streamed_x16(pt_engine *e, struct pt_error *err)
{
	for (uint32_t m = 0; m < e->lay.n_moe; m++) {
		const struct pt_expert_layer *EL = &e->lay.moe[m];
		if (EL->layer >= e->m->hp.n_layer)
			return pt_error_set(err, PT_E_INVALID, "pack layer %u out of range", EL->layer);
		struct pt_layer_weights *L = &e->m->layers[EL->layer];
		for (uint32_t i = 0; i < EL->n_parts; i++) {
			if (!e->pack.layers[m].part_x16[i])
				continue;
			const struct pt_expert_part *q = &EL->part[i];
			struct pt_expert_mat *x = q->kind == PT_PART_GATE ? &L->gate_exps
						  : q->kind == PT_PART_UP ? &L->up_exps
						  : q->kind == PT_PART_GATE_UP ? &L->gate_up_exps
						  : q->kind == PT_PART_DOWN ? &L->down_exps : NULL;
			if (!x || x->type != (enum pt_type)q->type || x->rows != q->rows ||
			    x->cols != q->cols)
				return pt_error_set(err, PT_E_INVALID, "interleaved pack: %s does not "
						    "match the model's expert tensor", q->name);
			x->layout = PT_KERN_LAYOUT_X16;
		}
	}
	say(e, "particle: repack: routed experts read interleaved from the expert pack%s%s\n", "", "");
	return PT_OK;
}

/* --repack: the Q4_K / Q6_K / Q8_0 / Q5_0 matrices into the interleaved layout, experts too
 * when mapped; repack_auto alone: the same wherever the resident weights stay in memory for
 * good: a model that runs from memory, and one whose experts stream (its resident weights
 * copied; the experts as read: interleaved from a particle pack / pull --repack pack).  Not
 * where --io mmap maps a model over its budget: the kernel pages that mapping, and a copy it
 * could not page. */
static enum pt_status repack(pt_engine *e, struct pt_error *err)
{
	const bool on_map = e->prov.get == e->m->mmap_provider.get;
	const bool mapped = on_map && e->mapped_fits, paged = on_map && !e->mapped_fits;
	const bool x16_pack = !on_map && e->have_pack && e->pack.x16;
	if (!e->o.repack && paged) {
		say(e, "particle: repack: off (%s%s; --repack copies the resident weights)\n",
		    "the model does not fit the budget: --io mmap pages it", "");
		return PT_OK;
	}
	if (!pt_kern_x16_native(PT_TYPE_Q4_K)) {
		say(e, "particle: repack: skipped (no interleaved kernel at CPU level %s)%s\n",
		    pt_kern_level_name(pt_kern_level()), "");
		return PT_OK;
	}
	struct pt_repack_stats s;
	enum pt_status st = pt_model_repack(e->m, mapped, e->pool, &s, err);
	e->repacked_bytes = s.bytes_in;
	e->repack_s = s.seconds;
	if (st == PT_OK && x16_pack)
		st = streamed_x16(e, err);
	/* experts left as stored compute in the copies' numerics all the same (X16_ROWS): the
	 * run gives the same bits however its experts are stored */
	const uint32_t as_rows = st == PT_OK && !mapped ? pt_model_x16_rows(e->m) : 0;
	const char *numerics = as_rows ? ", computed in the interleaved numerics" : "";
	/* experts streaming and the large matrices copied: the mapping is read a few pages at
	 * a time from now on (norms, scales, embedding rows), without read-ahead windows */
	if (st == PT_OK && !on_map && s.matrices) {
		e->map_random = pt_gguf_advise_random(e->m->g);
		/* ...but for the resident matrices the copy left there (read whole every token) */
		e->mapped_whole = pt_model_advise_mapped(e->m);
	}
	/* mapped experts are copied only when the model fits: a copy of a model larger than
	 * memory cannot be paged back from the file as the mapping can */
	if (paged && e->lay.n_moe)
		say(e, "particle: repack: routed experts left as stored (%s)%s\n",
		    "the model does not fit the budget; --io mmap pages them", numerics);
	else if (!on_map && !x16_pack && e->lay.n_moe)
		say(e, "particle: repack: routed experts stream as stored%s (%s)\n", numerics,
		    "`particle pack MODEL --repack` stores them interleaved: no packing per prompt");
	if (st == PT_OK && e->o.log) {
		char b[2][PT_PLAN_SIZE_LEN];
		char w[PT_PLAN_SIZE_LEN];
		fprintf(e->o.log, "particle: repack: %u matrices (%s as stored, %s "
			"interleaved%s) in %.1f s%s%s%s%s\n", s.matrices, pt_plan_size(s.bytes_in, b[0]),
			pt_plan_size(s.bytes_out, b[1]), mapped ? ", experts included" : "",
			s.seconds, e->map_random ? "; the rest of the file read without read-ahead"
						 : "",
			e->mapped_whole ? ", except the " : "",
			e->mapped_whole ? pt_plan_size(e->mapped_whole, w) : "",
			e->mapped_whole ? " of resident matrices left in it" : "");
	}
	return st;
}

static enum pt_status open_all(pt_engine *e, struct pt_error *err)
{
	const struct pt_engine_opts *o = &e->o;
	enum pt_status st = pt_kern_init(err);
	if (st == PT_OK)
		st = pt_model_open(o->model_path, &e->m, err);
	/* a split model opened by any part: its first part names it from here on (the lock,
	 * the default pack name, the pack cache identity and the store's reads) */
	if (st == PT_OK && pt_gguf_part_count(e->m->g) > 1) {
		if (!(e->model_path = pt_strdup(pt_gguf_part_path(e->m->g, 0))))
			st = pt_error_set(err, PT_E_NOMEM, "engine: model path");
		else
			e->o.model_path = e->model_path;
	}
	if (st == PT_OK && !pt_gguf_find_kv(e->m->g, "tokenizer.ggml.model"))
		st = pt_error_set(err, PT_E_FORMAT, "%s has no tokenizer (tokenizer.ggml.model)",
				  o->model_path);
	if (st == PT_OK)
		st = pt_tok_load(e->m->g, &e->tok, err);
	if (st != PT_OK)
		return st;
	const uint32_t train = e->m->hp.n_ctx_train ? e->m->hp.n_ctx_train : 4096;
	e->n_ctx = o->n_ctx ? o->n_ctx : (train < 4096 ? train : 4096);
	e->auto_batch = o->n_batch == PT_ENGINE_BATCH_AUTO;
	e->n_batch = !o->n_batch || e->auto_batch ? 128 : o->n_batch;
	if (e->n_batch > e->n_ctx)
		e->n_batch = e->n_ctx;
	e->n_seq = o->n_seq ? o->n_seq : 1;
	if (e->n_seq > PT_ENGINE_MAX_SEQ)
		return pt_error_set(err, PT_E_INVALID, "%u sequences: at most %u", e->n_seq,
				    PT_ENGINE_MAX_SEQ);
	if (!o->no_lock) {
		st = pt_model_lock_acquire(&e->lock, o->model_path, NULL, err);
		e->locked = st == PT_OK;
		if (e->locked && e->lock.warning[0])
			say(e, "particle: warning: %s%s\n", e->lock.warning, "");
	}
	if (st == PT_OK)
		st = open_experts(e, err);
	if (st != PT_OK)
		return st;
	say(e, "particle: plan: %s%s\n", e->plan_line, "");
	say(e, "particle: experts: %s%s\n", e->io_engine, "");
	if (e->store && pt_expert_store_populate_s(e->store) > 0) {
		char b[PT_PLAN_SIZE_LEN], t[32];
		snprintf(t, sizeof t, "%.2f s", pt_expert_store_populate_s(e->store));
		say(e, "particle: experts: %s of slots faulted in at open in %s\n",
		    pt_plan_size((uint64_t)e->plan.slots_per_layer * e->lay.n_moe * e->pin.slot_bytes,
				 b), t);
	}
	if (o->verbose && o->log)
		fprintf(o->log, "particle: model %s: %s, %u layers, %u experts (top-%u), cpu %s\n",
			o->model_path, e->m->hp.arch_name, e->m->hp.n_layer, e->m->hp.n_expert,
			e->m->hp.n_expert_used, pt_kern_cpu_name());
	const uint32_t threads = engine_threads(o);
	if (threads > 1)
		st = pt_pool_create(threads, &e->pool, err);
	if (st == PT_OK && (o->repack || o->repack_auto))
		st = repack(e, err);
	return st == PT_OK ? open_fwd(e, err) : st;
}

/* --- expert-popularity profile (expert/profile.h) --- */

/* Where this model's profile lives: o.profile_dir (or the per-user cache dir) / identity
 * hash .prof.  Failure only means no profile (said in verbose mode). */
static bool profile_path(pt_engine *e, uint64_t *id)
{
	struct pt_error err = { 0 };
	char dir[3800];
	const int fd = open(e->o.model_path, O_RDONLY | O_CLOEXEC);
	enum pt_status st = fd >= 0 ? pt_profile_identity(fd, id, &err)
				    : pt_error_set(&err, PT_E_IO, "cannot open the model");
	if (fd >= 0)
		close(fd);
	if (st == PT_OK && e->o.profile_dir)
		snprintf(dir, sizeof dir, "%s", e->o.profile_dir);
	else if (st == PT_OK)
		st = pt_user_dir("profiles", dir, sizeof dir, &err);
	if (st != PT_OK) {
		say(e, "particle: expert profile off: %s%s\n", err.msg, "");
		return false;
	}
	snprintf(e->prof_path, sizeof e->prof_path, "%s/%016llx.prof", dir,
		 (unsigned long long)*id);
	return true;
}

/* Loads the profile and starts the warm-up: per MoE layer its most used experts, as many
 * as the slots hold beside one token's k (the reads run at read-ahead priority while the
 * caller tokenizes and starts the prompt). */
static void profile_start(pt_engine *e)
{
	uint64_t id = 0;
	if (!e->o.use_profile || !e->lay.n_moe || !profile_path(e, &id))
		return;
	struct pt_error err = { 0 };
	bool missing = false;
	if (pt_profile_load(e->prof_path, id, e->lay.n_moe, e->lay.n_expert, &e->prof, &missing,
			    &err) != PT_OK) {
		if (!missing)
			say(e, "particle: expert profile ignored: %s%s\n", err.msg, "");
		if (pt_profile_init(&e->prof, e->lay.n_moe, e->lay.n_expert, id, &err) != PT_OK)
			e->prof_path[0] = 0;
		return;
	}
	const uint32_t k = e->m->hp.n_expert_used, slots = e->plan.slots_per_layer;
	uint32_t *top = pt_mallocn(e->lay.n_expert, sizeof *top);
	for (uint32_t i = 0; top && e->store && slots > k && i < e->lay.n_moe; i++) {
		const uint32_t n = pt_profile_top(&e->prof, i, top, slots - k);
		e->prof_warmed += pt_expert_store_warm(e->store, e->lay.moe[i].layer, top, n, k);
	}
	pt_free(top);
	char n[16];
	snprintf(n, sizeof n, "%u", e->prof_warmed);
	if (e->prof_warmed)
		say(e, "particle: expert profile: warming %s experts%s\n", n, "");
}

/* Adds this run's routing counts to the profile and writes it (0600, atomic). */
static void profile_save(pt_engine *e)
{
	if (!e->prof_path[0] || !e->prof.uses || !e->usage)
		return;
	uint32_t *uses = pt_mallocn(e->lay.n_expert, sizeof *uses);
	uint64_t any = 0;
	for (uint32_t i = 0; uses && i < e->lay.n_moe; i++) {
		pt_expert_usage_read(e->usage, i, uses, e->lay.n_expert);
		for (uint32_t x = 0; x < e->lay.n_expert; x++)
			any += uses[x];
		pt_profile_add(&e->prof, i, uses);
	}
	pt_free(uses);
	struct pt_error err = { 0 };
	if (any && pt_profile_save(e->prof_path, &e->prof, &err) != PT_OK)
		say(e, "particle: expert profile not saved: %s%s\n", err.msg, "");
}

uint32_t pt_engine_profile_warmed(const pt_engine *e)
{
	return e->prof_warmed;
}

enum pt_status pt_engine_open(const struct pt_engine_opts *o, pt_engine **out,
			      struct pt_error *err)
{
	*out = NULL;
	if (!o->model_path)
		return pt_error_set(err, PT_E_INVALID, "engine: no model path");
	pt_engine *e = pt_calloc(1, sizeof *e);
	if (!e)
		return pt_error_set(err, PT_E_NOMEM, "engine: cannot allocate");
	e->o = *o;
	e->lock.fd = -1;
	enum pt_status st = open_all(e, err);
	if (st != PT_OK) {
		pt_engine_close(e);
		return st;
	}
	profile_start(e);
	*out = e;
	return PT_OK;
}

void pt_engine_close(pt_engine *e)
{
	if (!e)
		return;
	struct pt_error ignore = { 0 };
	profile_save(e);
	pt_profile_free(&e->prof);
	pt_fwd_destroy(e->f);
	pt_trace_writer_close(e->trace, &ignore);
	pt_expert_usage_destroy(e->usage);
	pt_expert_store_close(e->store);
	if (e->have_pack)
		pt_pack_free(&e->pack);
	pt_expert_layout_free(&e->lay);
	pt_pool_destroy(e->pool);
	pt_tok_destroy(e->tok);
	pt_model_close(e->m);
	if (e->locked)
		pt_model_lock_release(&e->lock);
	for (uint32_t s = 0; e->toks && s < e->n_seq; s++)
		pt_free(e->toks[s]);
	pt_free(e->toks);
	for (uint32_t s = 0; e->ck && s < e->n_seq; s++)
		pt_ckpt_fini(&e->ck[s]);
	pt_free(e->ck);
	pt_free(e->ck_buf);
	pt_free(e->last_replay);
	pt_free(e->marks);
	pt_free(e->n_marks);
	pt_free(e->model_path);
	pt_free(e->batch_logits);
	pt_free(e);
}

/* --- use --- */

const struct pt_model *pt_engine_model(const pt_engine *e)
{
	return e->m;
}

const struct pt_tok *pt_engine_tok(const pt_engine *e)
{
	return e->tok;
}

uint32_t pt_engine_n_vocab(const pt_engine *e)
{
	return (uint32_t)e->m->output.rows;
}

uint32_t pt_engine_n_ctx(const pt_engine *e)
{
	return e->n_ctx;
}

uint32_t pt_engine_n_batch(const pt_engine *e)
{
	return e->n_batch;
}

const char *pt_engine_plan_line(const pt_engine *e)
{
	return e->plan_line;
}

/* Sequence seq's position: the device pass's for sequence 0 when one is installed. */
static int64_t seq_pos(const pt_engine *e, uint32_t seq)
{
	return seq == 0 && e->dev.eval ? e->dev.pos(e->dev.ctx) : pt_fwd_seq_pos(e->f, seq);
}

void pt_engine_set_device(pt_engine *e, const struct pt_engine_device *dev)
{
	memset(&e->dev, 0, sizeof e->dev);
	if (dev)
		e->dev = *dev;
}

int64_t pt_engine_pos(const pt_engine *e)
{
	return seq_pos(e, 0);
}

const uint32_t *pt_engine_tokens(const pt_engine *e)
{
	return e->toks[0];
}

uint32_t pt_engine_n_seq(const pt_engine *e)
{
	return e->n_seq;
}

int64_t pt_engine_seq_pos(const pt_engine *e, uint32_t seq)
{
	return seq_pos(e, seq);
}

const uint32_t *pt_engine_seq_tokens(const pt_engine *e, uint32_t seq)
{
	return seq < e->n_seq ? e->toks[seq] : NULL;
}

static enum pt_status bad_seq(const pt_engine *e, uint32_t seq, struct pt_error *err)
{
	return pt_error_set(err, PT_E_INVALID, "engine: sequence %u out of range (%u sequences)",
			    seq, e->n_seq);
}

static void count_time(pt_engine *e, uint32_t n, bool decode, uint64_t dt)
{
	if (decode) {
		e->decode_tokens += n;
		e->decode_ns += dt;
		e->decode_steps++;
	} else {
		e->prefill_tokens += n;
		e->prefill_ns += dt;
	}
}

/* The first mark of seq past pos (INT64_MAX: none). */
static int64_t mark_next(const pt_engine *e, uint32_t seq, int64_t pos)
{
	for (uint32_t i = 0; e->marks && i < e->n_marks[seq]; i++)
		if (e->marks[seq][i] > pos)
			return e->marks[seq][i];
	return INT64_MAX;
}

/* pt_fwd_seq_eval, cut with recurrent layers at the periodic checkpoint positions and the
 * sequence's marks (a checkpoint is taken at each: turn-end kind at a mark). */
static enum pt_status eval_cut(pt_engine *e, uint32_t seq, const uint32_t *tokens, uint32_t n,
			       float *logits, bool all_logits, struct pt_error *err)
{
	if (seq == 0 && e->dev.eval)
		return e->dev.eval(e->dev.ctx, tokens, n, logits, all_logits, err);
	const int64_t pos = pt_fwd_seq_pos(e->f, seq);
	const size_t nv = pt_engine_n_vocab(e);
	enum pt_status st = PT_OK;
	for (uint32_t i = 0; st == PT_OK && i < n;) {
		const int64_t at = pos + i, per = ckpt_next(e, at), mark = mark_next(e, seq, at);
		const int64_t next = per < mark ? per : mark;
		const uint32_t c = next - at < (int64_t)(n - i) ? (uint32_t)(next - at) : n - i;
		float *l = NULL;
		if (logits && all_logits)
			l = logits + (size_t)i * nv;
		else if (logits && i + c == n)
			l = logits;
		st = pt_fwd_seq_eval(e->f, seq, tokens + i, c, l, all_logits, err);
		i += c;
		if (st == PT_OK && at + c == next)
			st = ckpt_take(e, seq, at + c == mark, err);
	}
	return st;
}

/* eval_cut with the slots a long prompt lends to its chunk buffers lent for its duration,
 * and the buffers' memory handed back after it (lend_plan). */
static enum pt_status eval_lent(pt_engine *e, uint32_t seq, const uint32_t *tokens, uint32_t n,
				float *logits, bool all_logits, struct pt_error *err)
{
	uint32_t lend = seq == 0 && e->dev.eval ? 0 : lend_for(e, n);
	const uint32_t slots = e->plan.slots_per_layer;
	struct pt_error e1 = { 0 };
	if (lend && pt_expert_store_set_slots(e->store, slots - lend, &e1) != PT_OK)
		lend = 0; /* a slot still in use (never between evaluations): run unlent */
	e->lent_peak = lend > e->lent_peak ? lend : e->lent_peak;
	enum pt_status st = eval_cut(e, seq, tokens, n, logits, all_logits, err);
	if (!lend)
		return st;
	pt_fwd_trim(e->f);
	struct pt_error e2 = { 0 };
	const enum pt_status back = pt_expert_store_set_slots(e->store, slots, &e2);
	if (st == PT_OK && back != PT_OK)
		*err = e2;
	return st == PT_OK ? back : st;
}

enum pt_status pt_engine_seq_eval(pt_engine *e, uint32_t seq, const uint32_t *tokens,
				  uint32_t n, float *logits, bool all_logits, struct pt_error *err)
{
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	const int64_t pos = seq_pos(e, seq);
	if (n == 0)
		return pt_error_set(err, PT_E_INVALID, "engine: no tokens to evaluate");
	if ((uint64_t)pos + n > e->n_ctx)
		return pt_error_set(err, PT_E_LIMIT, "context full: %lld + %u tokens > %u",
				    (long long)pos, n, e->n_ctx);
	const uint64_t t0 = pt_io_now_ns();
	enum pt_status st = eval_lent(e, seq, tokens, n, logits, all_logits, err);
	count_time(e, n, n == 1, pt_io_now_ns() - t0);
	if (st == PT_OK && e->trace_failed)
		st = pt_error_set(err, e->trace_err.code, "--trace-experts: %s", e->trace_err.msg);
	if (st != PT_OK) {
		/* a chunk may have failed mid-way: keep what completed, history in step */
		const int64_t done = seq_pos(e, seq);
		memcpy(e->toks[seq] + pos, tokens, (size_t)(done - pos) * sizeof *tokens);
		return st;
	}
	memcpy(e->toks[seq] + pos, tokens, (size_t)n * sizeof *tokens);
	return PT_OK;
}

enum pt_status pt_engine_eval(pt_engine *e, const uint32_t *tokens, uint32_t n, float *logits,
			      bool all_logits, struct pt_error *err)
{
	return pt_engine_seq_eval(e, 0, tokens, n, logits, all_logits, err);
}

enum pt_status pt_engine_decode_batch(pt_engine *e, const uint32_t *seqs,
				      const uint32_t *tokens, uint32_t n, float *logits,
				      struct pt_error *err)
{
	if (!logits)
		logits = e->batch_logits;
	if (!logits || n == 0 || n > e->n_seq)
		return pt_error_set(err, PT_E_INVALID, "engine: decode batch of %u rows (%u "
				    "sequences)", n, e->n_seq);
	const uint64_t t0 = pt_io_now_ns();
	enum pt_status st = pt_fwd_decode_batch(e->f, seqs, tokens, n, logits, err);
	count_time(e, n, true, pt_io_now_ns() - t0);
	if (st == PT_OK && e->trace_failed)
		st = pt_error_set(err, e->trace_err.code, "--trace-experts: %s", e->trace_err.msg);
	/* a failed pass moves no position */
	for (uint32_t i = 0; st == PT_OK && i < n; i++) {
		const int64_t p = pt_fwd_seq_pos(e->f, seqs[i]);
		e->toks[seqs[i]][p - 1] = tokens[i];
		if (ckpt_next(e, p - 1) == p)
			st = ckpt_take(e, seqs[i], false, err);
	}
	return st;
}

float *pt_engine_batch_logits(pt_engine *e)
{
	return e->batch_logits;
}

/* pt_engine_seq_rewind; lazy (a reuse rewind): a restored checkpoint is not replayed up to
 * pos, *at says where the sequence stands. */
static enum pt_status rewind_to(pt_engine *e, uint32_t seq, int64_t pos, bool lazy, int64_t *at,
				struct pt_error *err)
{
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	struct pt_error e2 = { 0 };
	*at = pos;
	e->last_replay[seq] = 0;
	if (seq == 0 && e->dev.eval) { /* the device pass: truncate, else replay from 0 */
		if (pos < 0 || pos > seq_pos(e, 0))
			return pt_error_set(err, PT_E_INVALID, "engine: rewind to %lld of %lld",
					    (long long)pos, (long long)seq_pos(e, 0));
		enum pt_status st = e->dev.truncate(e->dev.ctx, pos, &e2);
		if (st != PT_E_LIMIT) {
			if (st != PT_OK)
				*err = e2;
			return st;
		}
		st = e->dev.truncate(e->dev.ctx, 0, err);
		if (st == PT_OK && pos > 0)
			st = e->dev.eval(e->dev.ctx, e->toks[0], (uint32_t)pos, NULL, false, err);
		e->last_replay[0] = (uint32_t)pos;
		e->replayed += (uint64_t)pos;
		return st;
	}
	if (e->ck && pos >= 0 && pos <= pt_fwd_seq_pos(e->f, seq))
		pt_ckpt_drop_after(&e->ck[seq], pos); /* states of a history that is gone */
	enum pt_status st = pt_fwd_seq_truncate(e->f, seq, pos, &e2);
	if (st != PT_E_LIMIT) {
		if (st != PT_OK)
			*err = e2;
		return st;
	}
	/* a sliding ring lost part of the window, or a recurrent state cannot go back: start
	 * over from the nearest checkpoint (or from 0) and replay the kept tokens after it */
	int64_t from = 0;
	const struct pt_ckpt *c = e->ck ? pt_ckpt_find(&e->ck[seq], pos) : NULL;
	if (c) {
		st = pt_fwd_seq_rs_restore(e->f, seq, c->pos, c->state, err);
		from = c->pos;
		e->ck[seq].restored++;
	} else {
		st = pt_fwd_seq_truncate(e->f, seq, 0, err);
	}
	if (st == PT_OK && lazy && e->ck)
		*at = from; /* the caller's prefill evaluates [from, pos) with the rest */
	else if (st == PT_OK && pos > from) /* the history already holds these tokens */
		st = eval_lent(e, seq, e->toks[seq] + from, (uint32_t)(pos - from), NULL, false,
			       err);
	e->last_replay[seq] = (uint32_t)(pos - from);
	e->replayed += (uint64_t)(pos - from);
	return st;
}

enum pt_status pt_engine_seq_rewind(pt_engine *e, uint32_t seq, int64_t pos,
				    struct pt_error *err)
{
	int64_t at;
	return rewind_to(e, seq, pos, false, &at, err);
}

enum pt_status pt_engine_seq_rewind_reuse(pt_engine *e, uint32_t seq, int64_t pos, int64_t *at,
					  struct pt_error *err)
{
	return rewind_to(e, seq, pos, true, at, err);
}

uint32_t pt_engine_ckpt_max(const pt_engine *e)
{
	return e->ck ? ckpt_max(e) : 0;
}

enum pt_status pt_engine_seq_set_marks(pt_engine *e, uint32_t seq, const int64_t *pos,
				       uint32_t n, struct pt_error *err)
{
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	if (!e->marks)
		return PT_OK;
	const uint32_t skip = n > PT_ENGINE_MAX_MARKS ? n - PT_ENGINE_MAX_MARKS : 0;
	uint32_t k = 0;
	for (uint32_t i = skip; i < n; i++) /* ascending, positive, no repeats */
		if (pos[i] > 0 && (k == 0 || pos[i] > e->marks[seq][k - 1]))
			e->marks[seq][k++] = pos[i];
	e->n_marks[seq] = k;
	return PT_OK;
}

enum pt_status pt_engine_seq_checkpoint(pt_engine *e, uint32_t seq, struct pt_error *err)
{
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	return ckpt_take(e, seq, true, err);
}

uint32_t pt_engine_seq_last_replay(const pt_engine *e, uint32_t seq)
{
	return seq < e->n_seq ? e->last_replay[seq] : 0;
}

enum pt_status pt_engine_rewind(pt_engine *e, int64_t pos, struct pt_error *err)
{
	return pt_engine_seq_rewind(e, 0, pos, err);
}

/* --- prompt cache: snapshots of a sequence --- */

uint64_t pt_engine_snap_size(const pt_engine *e, int64_t n_tokens)
{
	if (n_tokens < 0)
		n_tokens = 0;
	return pt_fwd_snapshot_bytes(e->f, n_tokens) + (uint64_t)n_tokens * sizeof(uint32_t) +
	       sizeof(struct pt_engine_snap);
}

uint64_t pt_engine_snap_budget(const pt_engine *e)
{
	return e->o.prompt_cache_bytes;
}

uint64_t pt_engine_snap_used(const pt_engine *e)
{
	return e->snap_used;
}

enum pt_status pt_engine_seq_snapshot(pt_engine *e, uint32_t seq, pt_engine_snap **out,
				      struct pt_error *err)
{
	*out = NULL;
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	const int64_t pos = pt_fwd_seq_pos(e->f, seq);
	const uint64_t bytes = pt_engine_snap_size(e, pos);
	if (e->snap_used + bytes > e->o.prompt_cache_bytes)
		return pt_error_set(err, PT_E_LIMIT, "prompt cache: a snapshot of %lld tokens needs "
				    "%llu bytes, %llu of %llu are in use", (long long)pos,
				    (unsigned long long)bytes, (unsigned long long)e->snap_used,
				    (unsigned long long)e->o.prompt_cache_bytes);
	pt_engine_snap *s = pt_calloc(1, sizeof *s);
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "prompt cache: cannot allocate a snapshot");
	s->pos = pos;
	s->kv_bytes = pt_fwd_snapshot_bytes(e->f, pos);
	s->bytes = bytes;
	s->toks = pt_mallocn(pos ? (size_t)pos : 1, sizeof *s->toks);
	s->kv = pt_malloc(s->kv_bytes ? s->kv_bytes : 1);
	enum pt_status st = s->toks && s->kv ? PT_OK
		: pt_error_set(err, PT_E_NOMEM, "prompt cache: cannot allocate %llu bytes",
			       (unsigned long long)bytes);
	if (st == PT_OK)
		st = pt_fwd_seq_save(e->f, seq, s->kv, s->kv_bytes, err);
	if (st != PT_OK) {
		pt_free(s->toks);
		pt_free(s->kv);
		pt_free(s);
		return st;
	}
	memcpy(s->toks, e->toks[seq], (size_t)pos * sizeof *s->toks);
	e->snap_used += bytes;
	*out = s;
	return PT_OK;
}

enum pt_status pt_engine_seq_restore(pt_engine *e, uint32_t seq, const pt_engine_snap *s,
				     struct pt_error *err)
{
	if (seq >= e->n_seq)
		return bad_seq(e, seq, err);
	enum pt_status st = pt_fwd_seq_load(e->f, seq, s->pos, s->kv, s->kv_bytes, err);
	if (st == PT_OK)
		memcpy(e->toks[seq], s->toks, (size_t)s->pos * sizeof *s->toks);
	if (st == PT_OK && e->ck) { /* another history: its checkpoints start with this one */
		pt_ckpt_drop_after(&e->ck[seq], -1);
		st = ckpt_take(e, seq, true, err);
	}
	return st;
}

void pt_engine_snap_free(pt_engine *e, pt_engine_snap *s)
{
	if (!s)
		return;
	e->snap_used -= s->bytes < e->snap_used ? s->bytes : e->snap_used;
	pt_free(s->toks);
	pt_free(s->kv);
	pt_free(s);
}

int64_t pt_engine_snap_pos(const pt_engine_snap *s)
{
	return s->pos;
}

const uint32_t *pt_engine_snap_tokens(const pt_engine_snap *s)
{
	return s->toks;
}

uint64_t pt_engine_snap_bytes(const pt_engine_snap *s)
{
	return s->bytes;
}

enum pt_status pt_engine_seq_copy(pt_engine *e, uint32_t dst, uint32_t src, int64_t n_tokens,
				  struct pt_error *err)
{
	if (dst >= e->n_seq || src >= e->n_seq)
		return bad_seq(e, dst >= e->n_seq ? dst : src, err);
	const int64_t pos = pt_fwd_seq_pos(e->f, src);
	if (n_tokens < 0 || n_tokens > pos)
		return pt_error_set(err, PT_E_INVALID, "engine: copy of %lld tokens: sequence %u "
				    "holds %lld", (long long)n_tokens, src, (long long)pos);
	enum pt_status st = pt_fwd_seq_copy(e->f, dst, src, err);
	if (st == PT_OK && dst != src)
		memcpy(e->toks[dst], e->toks[src], (size_t)pos * sizeof **e->toks);
	if (st == PT_OK && dst != src && e->ck) { /* src's checkpoints serve dst's rewind */
		pt_ckpt_drop_after(&e->ck[dst], -1);
		for (uint32_t i = 0; st == PT_OK && i < e->ck[src].n; i++)
			st = pt_ckpt_put(&e->ck[dst], e->ck[src].c[i].pos, e->ck[src].c[i].turn,
					 e->ck[src].c[i].state, err);
	}
	return st == PT_OK ? pt_engine_seq_rewind(e, dst, n_tokens, err) : st;
}

static uint64_t peak_rss(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;
	if (!fp)
		return 0;
	while (fgets(line, sizeof line, fp))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(fp);
	return (uint64_t)kb * 1024;
}

void pt_engine_stats(const pt_engine *e, struct pt_engine_stats *out)
{
	struct pt_cache_stats cs = { 0 };
	if (e->store)
		pt_expert_store_stats(e->store, UINT32_MAX, &cs);
	*out = (struct pt_engine_stats){
		.memory_budget = e->pin.budget, .resident_bytes = e->pin.resident_bytes,
		.kv_bytes = e->pin.kv_bytes, .slot_bytes = e->pin.slot_bytes,
		.slots_per_layer = e->plan.slots_per_layer, .n_moe_layers = e->lay.n_moe,
		.slots_lend_max = e->lend_max, .slots_lent_peak = e->lent_peak,
		.slots_active = e->store ? pt_expert_store_active_slots(e->store)
					 : e->plan.slots_per_layer,
		.hits = cs.hits, .misses = cs.misses, .bytes_read = cs.bytes_read,
		.read_s = (double)cs.read_ns * 1e-9, .wait_s = (double)cs.wait_ns * 1e-9,
		.peak_rss_bytes = peak_rss(), .io_engine = e->io_engine,
		.cache_policy = pt_cache_policy_name(e->policy),
		.prefill_tokens = e->prefill_tokens, .prefill_s = (double)e->prefill_ns * 1e-9,
		.decode_tokens = e->decode_tokens, .decode_s = (double)e->decode_ns * 1e-9,
		.expert_slots_used = cs.slots_used,
		.io_busy_s = e->store ? pt_expert_store_io_busy_s(e->store) : 0.0,
		.head_s = (double)pt_fwd_head_ns(e->f) * 1e-9,
		.repacked_bytes = e->repacked_bytes, .repack_s = e->repack_s,
		.slots_populate_s = e->store ? pt_expert_store_populate_s(e->store) : 0,
		.plan_bytes = e->plan.total_bytes, .plan_expert_bytes = e->plan.pool_bytes,
		.decode_steps = e->decode_steps, .expert_gets = pt_fwd_expert_gets(e->f),
		.n_seq = e->n_seq, .snap_bytes = e->snap_used,
		.ahead_reads = cs.ahead_reads, .ahead_used = cs.ahead_used,
		.ahead_wasted = cs.ahead_wasted, .ahead_dropped = cs.ahead_dropped,
		.replayed_tokens = e->replayed,
		.pool_runs = pt_pool_runs(e->pool),
		.pool_wait_s = (double)pt_pool_wait_ns(e->pool) * 1e-9,
	};
	for (int p = 0; p < PT_FWD_PH_COUNT && p < 5; p++)
		out->phase_s[p] = (double)pt_fwd_phase_ns(e->f, (enum pt_fwd_phase)p) * 1e-9;
	for (uint32_t s = 0; e->ck && s < e->n_seq; s++) {
		out->ckpt_bytes += pt_ckpt_bytes(&e->ck[s]);
		out->ckpt_saved += e->ck[s].saved;
		out->ckpt_restored += e->ck[s].restored;
	}
}

void pt_engine_layer_stats(const pt_engine *e, uint32_t i, uint64_t *hits, uint64_t *misses,
			   uint64_t *bytes_read)
{
	struct pt_cache_stats cs = { 0 };
	if (e->store && i < e->lay.n_moe)
		pt_expert_store_stats(e->store, i, &cs);
	*hits = cs.hits;
	*misses = cs.misses;
	*bytes_read = cs.bytes_read;
}

uint32_t pt_engine_n_moe_layers(const pt_engine *e, uint32_t *n_expert, uint32_t *layers)
{
	if (n_expert)
		*n_expert = e->lay.n_moe ? e->lay.n_expert : 0;
	for (uint32_t i = 0; layers && i < e->lay.n_moe; i++)
		layers[i] = e->lay.moe[i].layer;
	return e->lay.n_moe;
}

bool pt_engine_layer_experts(const pt_engine *e, uint32_t moe_layer, uint8_t *resident,
			     uint32_t *uses, uint32_t n_expert)
{
	if (moe_layer >= e->lay.n_moe || n_expert != e->lay.n_expert)
		return false;
	if (e->store)
		pt_expert_store_resident(e->store, moe_layer, resident, n_expert);
	else
		memset(resident, 1, n_expert); /* mapped: the mapping holds every expert */
	pt_expert_usage_read(e->usage, moe_layer, uses, n_expert);
	return true;
}

static double rate(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0.0;
}

void pt_engine_print_stats(const pt_engine *e, FILE *fp)
{
	struct pt_engine_stats st;
	pt_engine_stats(e, &st);
	const uint64_t req = st.hits + st.misses;
	const double mib = 1.0 / (1 << 20);
	fprintf(fp, "particle: experts: %s; %llu hits, %llu misses (hit rate %.1f%%), "
		"%.1f MiB read, read %.3f s, waited %.3f s\n", st.io_engine,
		(unsigned long long)st.hits, (unsigned long long)st.misses,
		req ? 100.0 * (double)st.hits / (double)req : 0.0, (double)st.bytes_read * mib,
		st.read_s, st.wait_s);
	fprintf(fp, "particle: prefill %llu tokens %.2f tok/s, decode %llu tokens %.2f tok/s, "
		"peak RSS %.1f MiB (budget %.1f MiB)\n", (unsigned long long)st.prefill_tokens,
		rate(st.prefill_tokens, st.prefill_s), (unsigned long long)st.decode_tokens,
		rate(st.decode_tokens, st.decode_s), (double)st.peak_rss_bytes * mib,
		(double)st.memory_budget * mib);
}

static void json_layers(const pt_engine *e, FILE *fp)
{
	for (uint32_t i = 0; i < e->lay.n_moe; i++) {
		struct pt_cache_stats cs = { 0 };
		if (e->store)
			pt_expert_store_stats(e->store, i, &cs);
		fprintf(fp, "%s\n    {\"layer\": %u, \"hits\": %llu, \"misses\": %llu, "
			"\"bytes_read\": %llu, \"read_s\": %.6f, \"wait_s\": %.6f, "
			"\"slots_used\": %u}", i ? "," : "", e->lay.moe[i].layer,
			(unsigned long long)cs.hits, (unsigned long long)cs.misses,
			(unsigned long long)cs.bytes_read, (double)cs.read_ns * 1e-9,
			(double)cs.wait_ns * 1e-9, cs.slots_used);
	}
}

enum pt_status pt_engine_write_stats_json(const pt_engine *e, const char *path,
					  struct pt_error *err)
{
	struct pt_engine_stats st;
	struct pt_safe_file out;
	/* --stats-json names an output: replaced by rename, never written through a link */
	enum pt_status s = pt_safe_output(&out, path, err);
	FILE *fp = s == PT_OK ? pt_safe_stdio(&out, err) : NULL;
	if (!fp) {
		pt_safe_abort(&out);
		return s != PT_OK ? s : PT_E_IO;
	}
	pt_engine_stats(e, &st);
	fprintf(fp, "{\n  \"memory_budget\": %llu, \"resident_bytes\": %llu, "
		"\"kv_bytes\": %llu, \"slot_bytes\": %llu,\n  \"slots_per_layer\": %u, "
		"\"n_moe_layers\": %u, \"io_engine\": \"%s\", \"cache_policy\": \"%s\",\n",
		(unsigned long long)st.memory_budget, (unsigned long long)st.resident_bytes,
		(unsigned long long)st.kv_bytes, (unsigned long long)st.slot_bytes,
		st.slots_per_layer, st.n_moe_layers, st.io_engine, st.cache_policy);
	fprintf(fp, "  \"hits\": %llu, \"misses\": %llu, \"bytes_read\": %llu, "
		"\"read_s\": %.6f, \"wait_s\": %.6f, \"slots_used\": %u,\n"
		"  \"read_ahead\": %llu, \"read_ahead_used\": %llu,\n"
		"  \"prefill_tokens\": %llu, \"prefill_tok_s\": %.3f, \"decode_tokens\": %llu, "
		"\"decode_tok_s\": %.3f, \"peak_rss_bytes\": %llu,\n  \"layers\": [",
		(unsigned long long)st.hits, (unsigned long long)st.misses,
		(unsigned long long)st.bytes_read, st.read_s, st.wait_s, st.expert_slots_used,
		(unsigned long long)st.ahead_reads, (unsigned long long)st.ahead_used,
		(unsigned long long)st.prefill_tokens, rate(st.prefill_tokens, st.prefill_s),
		(unsigned long long)st.decode_tokens, rate(st.decode_tokens, st.decode_s),
		(unsigned long long)st.peak_rss_bytes);
	json_layers(e, fp);
	fprintf(fp, "\n  ]\n}\n");
	if (pt_safe_commit(&out, err) != PT_OK)
		return PT_E_IO;
	return PT_OK;
}

void pt_engine_decode_bytes(const pt_engine *e, int64_t n_past, struct pt_decode_bytes *out)
{
	pt_decode_bytes(e->m, &e->lay, e->o.kv_type, n_past, out);
}
