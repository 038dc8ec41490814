/* test_model.c - model loading checks on deliberately broken tiny files, and forward-pass
 * invariants: chunked prefill equals token-by-token decode, 1 thread equals 2 threads. */
#include "model/model.h"
#include "test.h"

#include "model/forward.h"
#include "model/mkmodel.h"
#include "util/alloc.h"

#include <malloc.h>
#include <math.h>
#include <string.h>

#define N_VOCAB 320

static uint64_t rs = 0x243f6a8885a308d3ull;
static float frnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float init_value(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			uint64_t i)
{
	switch (d->init) {
	case PT_INIT_NORM:
	case PT_INIT_ONES:
		return 1.0f + 0.2f * frnd();
	case PT_INIT_ROPE_FREQS:
		return (float)i < hp->n_rot * hp->rope_partial_full / 2 ? 1.0f : 1e30f;
	case PT_INIT_LAYER_SCALE:
		return 0.9f;
	case PT_INIT_ROUTER_BIAS:
		return 0.01f * frnd();
	case PT_INIT_EMBED:
		return frnd();
	default:
		return 2.0f * frnd() / sqrtf((float)(d->fan_in ? d->fan_in : 1));
	}
}

/* Writes a tiny F32 model of arch; skip: tensor left out; bad_shape: tensor whose ne0 is
 * doubled; arch_name: general.architecture override; f16_name: tensor stored as F16. */
struct tiny_opts {
	const char *skip, *bad_shape, *arch_name, *f16_name;
	uint32_t n_used; /* expert_used_count override (0: the preset's) */
	uint32_t n_swa;  /* sliding window override (0: the preset's) */
};

static enum pt_status write_tiny(const char *path, enum pt_arch arch,
				 const struct tiny_opts *o, struct pt_error *err)
{
	struct pt_hparams hp;
	struct pt_tensor_list l = { 0 };
	pt_gguf_writer *w = NULL;
	enum pt_status st = pt_arch_preset(arch, "tiny", 0, &hp, err);
	hp.n_vocab = N_VOCAB;
	if (st == PT_OK)
		st = pt_arch_tensors(&hp, &l, err);
	if (o->n_used)
		hp.n_expert_used = o->n_used; /* after the tensor list: only the key changes */
	if (o->n_swa)
		hp.n_swa = o->n_swa;
	if (st == PT_OK)
		st = pt_gguf_writer_create(path, 32, &w, err);
	if (st == PT_OK)
		st = pt_gguf_writer_set_str(w, "general.architecture",
					    o->arch_name ? o->arch_name : pt_arch_name(arch), err);
	if (st == PT_OK)
		st = pt_arch_write_hparams(&hp, w, err);
	static char names[N_VOCAB][8];
	const char *strs[N_VOCAB];
	for (int i = 0; i < N_VOCAB; i++) {
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		strs[i] = names[i];
	}
	if (st == PT_OK)
		st = pt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, NULL, N_VOCAB,
						err);
	for (uint32_t i = 0; st == PT_OK && i < l.n; i++) {
		const struct pt_tensor_desc *d = &l.t[i];
		uint64_t ne[4] = { d->ne[0], d->ne[1], d->ne[2], d->ne[3] };
		if (o->skip && !strcmp(o->skip, d->name))
			continue;
		if (o->bad_shape && !strcmp(o->bad_shape, d->name))
			ne[0] *= 2;
		const uint32_t t = o->f16_name && !strcmp(o->f16_name, d->name) ? PT_TYPE_F16 :
										   PT_TYPE_F32;
		st = pt_gguf_writer_add_tensor(w, d->name, d->n_dims, ne, t, err);
	}
	if (st == PT_OK)
		st = pt_gguf_writer_begin_data(w, err);
	for (uint32_t i = 0; st == PT_OK && i < l.n; i++) {
		const struct pt_tensor_desc *d = &l.t[i];
		if (o->skip && !strcmp(o->skip, d->name))
			continue;
		uint64_t n = pt_tensor_desc_nelems(d);
		if (o->bad_shape && !strcmp(o->bad_shape, d->name))
			n *= 2;
		const bool f16 = o->f16_name && !strcmp(o->f16_name, d->name);
		for (uint64_t j = 0; st == PT_OK && j < n; j++) {
			const float v = init_value(&hp, d, j % d->ne[0]);
			const uint16_t h = pt_f32_to_fp16(v);
			st = pt_gguf_writer_write_data(w, f16 ? (const void *)&h : (const void *)&v,
						       f16 ? 2 : 4, err);
		}
	}
	if (st == PT_OK)
		st = pt_gguf_writer_finish(w, err);
	pt_gguf_writer_destroy(w);
	pt_tensor_list_free(&l);
	return st;
}

static const struct tiny_opts plain = { NULL, NULL, NULL, NULL, 0, 0 };

PT_TEST(test_model_loads_every_arch)
{
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		struct pt_error err = { 0 };
		const char *path = pt_test_tmpfile("ok.gguf");
		REQUIRE(write_tiny(path, (enum pt_arch)a, &plain, &err) == PT_OK);
		struct pt_model *m = NULL;
		CHECK_EQ_INT(pt_model_open(path, &m, &err), PT_OK);
		if (!m) {
			fprintf(stderr, "arch %d: %s\n", a, err.msg);
			continue;
		}
		CHECK_EQ_INT(m->output.rows, N_VOCAB);
		float row[4096];
		CHECK(m->hp.n_embd <= 4096);
		CHECK_EQ_INT(pt_model_embed_row(m, 5, row, &err), PT_OK);
		CHECK(row[0] == ((const float *)m->tok_embd->data)[5 * m->hp.n_embd]);
		CHECK_EQ_INT(pt_model_embed_row(m, N_VOCAB, row, &err), PT_E_INVALID);
		pt_model_close(m);
	}
}

static void expect_refused(enum pt_arch a, const struct tiny_opts *o, enum pt_status code,
			   const char *needle)
{
	struct pt_error err = { 0 };
	const char *path = pt_test_tmpfile("bad.gguf");
	REQUIRE(write_tiny(path, a, o, &err) == PT_OK);
	struct pt_model *m = (struct pt_model *)1;
	CHECK_EQ_INT(pt_model_open(path, &m, &err), code);
	CHECK(m == NULL);
	CHECK_CONTAINS(err.msg, needle);
}

PT_TEST(test_model_refuses_broken_files)
{
	const struct tiny_opts missing = { "blk.1.ffn_down_exps.weight", NULL, NULL, NULL, 0, 0 };
	expect_refused(PT_ARCH_QWEN3MOE, &missing, PT_E_FORMAT, "blk.1.ffn_down_exps.weight");
	const struct tiny_opts shape = { NULL, "blk.0.attn_k.weight", NULL, NULL, 0, 0 };
	expect_refused(PT_ARCH_QWEN3MOE, &shape, PT_E_FORMAT, "blk.0.attn_k.weight");
	const struct tiny_opts arch = { NULL, NULL, "llama", NULL, 0, 0 };
	struct pt_error err = { 0 };
	const char *path = pt_test_tmpfile("arch.gguf");
	REQUIRE(write_tiny(path, PT_ARCH_QWEN3MOE, &arch, &err) == PT_OK);
	struct pt_model *m = NULL;
	CHECK(pt_model_open(path, &m, &err) != PT_OK);
	CHECK(m == NULL);
	CHECK_CONTAINS(err.msg, "llama");
	const struct tiny_opts f16norm = { NULL, NULL, NULL, "blk.0.ffn_norm.weight", 0, 0 };
	expect_refused(PT_ARCH_BAILINGMOE2, &f16norm, PT_E_UNSUPPORTED, "blk.0.ffn_norm.weight");
	/* a key out of range is refused naming it (whichever check sees it first) */
	const struct tiny_opts used = { NULL, NULL, NULL, NULL, 999, 0 };
	struct pt_error e2 = { 0 };
	const char *p2 = pt_test_tmpfile("used.gguf");
	REQUIRE(write_tiny(p2, PT_ARCH_GEMMA4, &used, &e2) == PT_OK);
	m = NULL;
	CHECK(pt_model_open(p2, &m, &e2) != PT_OK);
	CHECK(m == NULL);
	CHECK_CONTAINS(e2.msg, "expert_used_count");
}

/* Logits of a token sequence: one eval call with batch b and t threads, or token by token. */
/* Sliding layers' rows per pass in run() (0: the forward pass's default). */
static uint32_t run_swa_rows;

static float *run(const char *path, const uint32_t *toks, uint32_t n, uint32_t batch,
		  uint32_t threads, bool one_by_one, enum pt_kv_type kvt, uint32_t attn_block)
{
	struct pt_error err = { 0 };
	struct pt_model *m = NULL;
	pt_pool *pool = NULL;
	pt_fwd *f = NULL;
	float *l = NULL;
	if (pt_model_open(path, &m, &err) != PT_OK)
		goto out;
	if (threads > 1 && pt_pool_create(threads, &pool, &err) != PT_OK)
		goto out;
	/* recurrent layers (qwen35moe) token by token: the chunked delta rule rounds otherwise
	 * (tests/unit/test_qwen35.c compares the two) */
	struct pt_fwd_opts o = { n > 64 ? n : 64, batch, kvt, pool, NULL, attn_block, NULL, NULL, 1,
				   UINT32_MAX, run_swa_rows, PT_ATTN_NUMERICS_ENV };
	if (pt_fwd_create(m, &o, &f, &err) != PT_OK)
		goto out;
	l = pt_mallocn((size_t)n * m->output.rows, sizeof(float));
	for (uint32_t i = 0; l && i < n; i += one_by_one ? 1 : n) {
		if (pt_fwd_eval(f, toks + i, one_by_one ? 1 : n, l + (size_t)i * m->output.rows,
				&err) != PT_OK) {
			pt_free(l);
			l = NULL;
		}
	}
out:
	if (!l)
		fprintf(stderr, "run failed: %s\n", err.msg);
	pt_fwd_destroy(f);
	pt_pool_destroy(pool);
	pt_model_close(m);
	return l;
}

PT_TEST(test_model_prefill_equals_decode_and_threads_agree)
{
	enum { N = 40 };
	uint32_t toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = (uint32_t)(i * 37 + 11) % N_VOCAB;
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		struct pt_error err = { 0 };
		const char *path = pt_test_tmpfile("fw.gguf");
		REQUIRE(write_tiny(path, (enum pt_arch)a, &plain, &err) == PT_OK);
		for (int kv = 0; kv < 2; kv++) {
			const enum pt_kv_type kvt = kv ? PT_KV_F32 : PT_KV_F16;
			/* key blocks of 7: decode splits attention into per-block tasks, prefill
			 * walks the same blocks inside one task */
			float *chunked = run(path, toks, N, 16, 1, false, kvt, 7);
			float *single = run(path, toks, N, 16, 2, true, kvt, 7);
			float *threaded = run(path, toks, N, 32, 2, false, kvt, 7);
			float *one_block = run(path, toks, N, 32, 1, false, kvt, 0);
			REQUIRE(chunked && single && threaded && one_block);
			const size_t cnt = (size_t)N * N_VOCAB;
			size_t diff_single = 0, diff_thr = 0, nonfinite = 0;
			for (size_t i = 0; i < cnt; i++) {
				diff_single += chunked[i] != single[i];
				diff_thr += chunked[i] != threaded[i];
				nonfinite += !isfinite(chunked[i]);
			}
			CHECK_EQ_INT(diff_single, 0);
			CHECK_EQ_INT(diff_thr, 0);
			CHECK_EQ_INT(nonfinite, 0);
			/* splitting keys into merged blocks changes only F32 rounding (with the F16
			 * cache the per-block F16 accumulators can flip a near-tied expert choice of
			 * these random models, so only F32 is compared) */
			double max_d = 0;
			for (size_t i = 0; kv && i < cnt; i++)
				max_d = fmax(max_d, fabs(chunked[i] - one_block[i]));
			CHECK(max_d < 1e-4);
			pt_free(one_block);
			pt_free(chunked);
			pt_free(single);
			pt_free(threaded);
		}
	}
}

static size_t count_diff(const float *a, const float *b, size_t n)
{
	size_t d = 0;
	for (size_t i = 0; i < n; i++)
		d += a[i] != b[i];
	return d;
}

/* Sliding-window layers: a prefill tile's rows share the keys all of them see while each
 * row's window starts one key later than the row before (attn_rows).  Windows narrower than,
 * as wide as and wider than the tile's 8 rows, one split-K block or several: prefill equals
 * token-by-token decode bit for bit (below PT_ATTN_TILED_ROWS rows both take the same
 * per-key steps), and two prefills whose tiles fall on different rows agree bit for bit. */
PT_TEST(test_model_sliding_window_tiles_exact)
{
	enum { N = 40, NL = 136 };
	uint32_t toks[NL];
	for (int i = 0; i < NL; i++)
		toks[i] = (uint32_t)(i * 37 + 11) % N_VOCAB;
	const enum pt_arch archs[] = { PT_ARCH_GEMMA4, PT_ARCH_GPTOSS };
	/* narrower than a tile of rows (8 to 32, by the GQA group), between, and wider */
	const uint32_t windows[] = { 3, 8, 13, 45 };
	for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
		for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
			struct pt_error err = { 0 };
			const char *path = pt_test_tmpfile("swa.gguf");
			const struct tiny_opts o = { NULL, NULL, NULL, NULL, 0, windows[wi] };
			REQUIRE(write_tiny(path, archs[a], &o, &err) == PT_OK);
			for (int kv = 0; kv < 2; kv++) {
				const enum pt_kv_type kvt = kv ? PT_KV_F32 : PT_KV_F16;
				for (uint32_t blk = 0; blk <= 5; blk += 5) { /* 1024; 5 */
					float *single = run(path, toks, N, 16, 1, true, kvt, blk);
					float *chunked = run(path, toks, N, 16, 1, false, kvt, blk);
					float *threaded = run(path, toks, N, 40, 2, false, kvt, blk);
					REQUIRE(single && chunked && threaded);
					CHECK_EQ_INT(count_diff(single, chunked, (size_t)N * N_VOCAB), 0);
					CHECK_EQ_INT(count_diff(single, threaded, (size_t)N * N_VOCAB), 0);
					pt_free(single);
					pt_free(chunked);
					pt_free(threaded);
				}
			}
			/* the tiled F32-accumulating path (chunks of >= 64 rows): one chunk of 136
			 * rows against two of 68, whose tiles start 4 rows apart */
			float *one = run(path, toks, NL, NL, 2, false, PT_KV_F16, 0);
			float *two = run(path, toks, NL, 68, 1, false, PT_KV_F16, 0);
			REQUIRE(one && two);
			CHECK_EQ_INT(count_diff(one, two, (size_t)NL * N_VOCAB), 0);
			pt_free(one);
			pt_free(two);
		}
}

/* A sliding layer stores and attends a long chunk in passes of swa_rows rows, its ring sized
 * for a pass, not the chunk: the logits of one 136-row chunk are bit-identical whether the
 * sliding layers take it in one pass or in passes of 5, 16 or 64 rows (pass boundaries off
 * the 8-row tiles, windows narrower and wider than a pass, F16 and F32 caches, 1 and 2
 * threads), and the rings shrink with the pass. */
PT_TEST(test_model_sliding_passes_exact)
{
	enum { NL = 136 };
	uint32_t toks[NL];
	for (int i = 0; i < NL; i++)
		toks[i] = (uint32_t)(i * 29 + 7) % N_VOCAB;
	const enum pt_arch archs[] = { PT_ARCH_GEMMA4, PT_ARCH_GPTOSS };
	const uint32_t windows[] = { 3, 13, 40 };
	const uint32_t passes[] = { 5, 16, 64 };
	for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
		for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
			struct pt_error err = { 0 };
			const char *path = pt_test_tmpfile("swapass.gguf");
			const struct tiny_opts o = { NULL, NULL, NULL, NULL, 0, windows[wi] };
			REQUIRE(write_tiny(path, archs[a], &o, &err) == PT_OK);
			for (int kv = 0; kv < 2; kv++) {
				const enum pt_kv_type kvt = kv ? PT_KV_F32 : PT_KV_F16;
				run_swa_rows = 0;
				float *one = run(path, toks, NL, NL, 2, false, kvt, 0);
				REQUIRE(one);
				for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
					run_swa_rows = passes[p];
					float *split = run(path, toks, NL, NL, 1 + (uint32_t)(p & 1),
							   false, kvt, 0);
					REQUIRE(split);
					CHECK_EQ_INT(count_diff(one, split, (size_t)NL * N_VOCAB), 0);
					pt_free(split);
				}
				run_swa_rows = 0;
				pt_free(one);
			}
			/* the rings: n_swa + pass - 1 slots (whole blocks), not n_swa + chunk - 1 */
			struct pt_model *m = NULL;
			REQUIRE(pt_model_open(path, &m, &err) == PT_OK);
			uint64_t snap[2];
			for (int i = 0; i < 2; i++) {
				struct pt_fwd_opts fo = { .n_ctx = 1024, .n_batch = 512,
							  .swa_rows = i ? 16 : 0 };
				pt_fwd *f = NULL;
				REQUIRE(pt_fwd_create(m, &fo, &f, &err) == PT_OK);
				snap[i] = pt_fwd_snapshot_bytes(f, fo.n_ctx);
				pt_fwd_destroy(f);
			}
			uint64_t want = 0;
			const struct pt_hparams *hp = &m->hp;
			for (uint32_t il = 0; il < hp->n_layer; il++)
				if (hp->is_swa[il])
					want += (pt_kv_layer_slots(1024, hp->n_swa, 512) -
						 pt_kv_layer_slots(1024, hp->n_swa, 16)) *
						pt_hparams_kv_values(hp, il) * 2;
			CHECK(want > 0);
			CHECK(snap[0] - snap[1] == want);
			pt_model_close(m);
		}
}

/* Quantized mixtures (partner formats Q8_K and Q8_0): one-chunk prefill (the layer's MoE input
 * quantized once and gathered per expert as quantized rows) equals token-by-token decode bit
 * for bit with an F32 KV cache, at 1 and 2 threads and two batch splits. */
PT_TEST(test_model_quantized_prefill_equals_decode)
{
	enum { N = 24 };
	uint32_t toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = (uint32_t)(i * 37 + 11) % 256;
	const enum pt_mix mixes[] = { PT_MIX_Q4_K_M, PT_MIX_Q8_0 };
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		for (size_t x = 0; x < sizeof(mixes) / sizeof(mixes[0]); x++) {
			struct pt_error err = { 0 };
			const char *path = pt_test_tmpfile("fwq.gguf");
			struct pt_mkmodel_opts o = { 0 };
			o.arch = (enum pt_arch)a;
			o.preset = "tiny";
			o.mix = mixes[x];
			o.seed = 7;
			o.out_path = path;
			o.threads = 1;
			REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
			float *chunked = run(path, toks, N, N, 1, false, PT_KV_F32, 0);
			float *single = run(path, toks, N, N, 1, true, PT_KV_F32, 0);
			float *threaded = run(path, toks, N, 16, 2, false, PT_KV_F32, 0);
			REQUIRE(chunked && single && threaded);
			struct pt_model *m = NULL;
			REQUIRE(pt_model_open(path, &m, &err) == PT_OK);
			const size_t cnt = (size_t)N * m->output.rows;
			pt_model_close(m);
			size_t diff_single = 0, diff_thr = 0;
			for (size_t i = 0; i < cnt; i++) {
				diff_single += chunked[i] != single[i];
				diff_thr += chunked[i] != threaded[i];
			}
			CHECK_EQ_INT(diff_single, 0);
			CHECK_EQ_INT(diff_thr, 0);
			pt_free(chunked);
			pt_free(single);
			pt_free(threaded);
		}
	}
}

/* The forward pass's FFN width comes from the tensors: a qwen3moe file names a dense
 * feed_forward_length no layer has (every layer routed), and the engine's memory plan sized
 * buffers by it (one expert slot a layer lost under a 6 GiB cap at the full shape). */
PT_TEST(test_model_ff_width_from_tensors)
{
	const struct {
		enum pt_arch arch;
		bool dense_layer;
	} cases[] = { { PT_ARCH_QWEN3MOE, false }, { PT_ARCH_BAILINGMOE2, true } };
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const char *path = pt_test_tmpfile("ffw.gguf");
		struct pt_mkmodel_opts o = { .arch = cases[c].arch, .preset = "small", .n_layer = 2,
					     .mix = PT_MIX_Q4_K_M, .seed = 3, .out_path = path,
					     .threads = 2 };
		struct pt_error err = { 0 };
		REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
		struct pt_model *m = NULL;
		REQUIRE(pt_model_open(path, &m, &err) == PT_OK);
		const uint32_t w = pt_fwd_ff_width(m);
		const uint32_t exp_w = m->layers[1].gate_exps.rows ? m->layers[1].gate_exps.rows
								   : m->layers[1].gate_up_exps.rows;
		if (cases[c].dense_layer) {
			CHECK_EQ_INT(w, m->hp.n_ff); /* layer 0 is dense */
		} else {
			CHECK(m->hp.n_ff > exp_w); /* the metadata's dense width, unused */
			CHECK_EQ_INT(w, exp_w);
		}
		pt_model_close(m);
	}
}

/* Bytes the process has allocated (glibc; 0 where a sanitizer's allocator answers). */
static uint64_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return 0;
#else
	const struct mallinfo2 mi = mallinfo2();
	return (uint64_t)mi.uordblks + mi.hblkhd;
#endif
}

/* The memory plan's row-buffer figure is what pt_fwd_create allocates: growing the chunk
 * by 512 rows allocates what pt_fwd_rows_bytes grows by (within 1 %).  An estimate above
 * the allocation costs expert slots under a cap; below it, the plan overcommits.  Three
 * layer recipes: routed only (qwen3moe: attention's rows share one block with the experts'
 * rank slots), a shared expert and a dense layer (bailingmoe2), the parallel FFN (gemma4). */
PT_TEST(test_model_rows_bytes_track_allocation)
{
	const enum pt_arch archs[] = { PT_ARCH_QWEN3MOE, PT_ARCH_BAILINGMOE2, PT_ARCH_GEMMA4 };
	if (heap_in_use() == 0) {
		printf("    (sanitizer build: allocation figures unavailable, checked in the plain run)\n");
		return;
	}
	for (size_t c = 0; c < sizeof archs / sizeof archs[0]; c++) {
		const char *path = pt_test_tmpfile("rows.gguf");
		struct pt_mkmodel_opts o = { .arch = archs[c], .preset = "small", .n_layer = 2,
					     .mix = PT_MIX_Q4_K_M, .seed = 5, .out_path = path,
					     .threads = 2 };
		struct pt_error err = { 0 };
		REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
		struct pt_model *m = NULL;
		REQUIRE(pt_model_open(path, &m, &err) == PT_OK);
		uint64_t used[2];
		const uint32_t rows[2] = { 512, 1024 };
		for (int i = 0; i < 2; i++) {
			/* no sliding window in the KV cache's size: a context of the largest chunk */
			struct pt_fwd_opts fo = { .n_ctx = 1024, .n_batch = rows[i] };
			pt_fwd *f = NULL;
			const uint64_t before = heap_in_use();
			REQUIRE(pt_fwd_create(m, &fo, &f, &err) == PT_OK);
			/* the KV cache (whose sliding rings grow with the chunk) is mapped pages
			 * (pt_alloc_pages), not the heap: only the row buffers count here */
			used[i] = heap_in_use() - before;
			pt_fwd_destroy(f);
		}
		const double got = (double)(used[1] - used[0]);
		const double want = (double)(pt_fwd_rows_bytes(m, rows[1], 1) -
					     pt_fwd_rows_bytes(m, rows[0], 1));
		printf("    %s: 512 more rows: %.0f bytes allocated, %.0f planned\n",
		       pt_arch_name(m->hp.arch), got, want);
		CHECK(got <= want * 1.01 && got >= want * 0.99);
		pt_model_close(m);
	}
}

/* pt_fwd_trim hands the chunk buffers' pages back between evaluations (a long prompt's rows
 * stop counting once it is done, issue 21): they hold nothing a later evaluation reads, so
 * prompt, trim, more tokens gives the logits of the same calls without the trim, bit for
 * bit, for every architecture; with 4,096-row buffers there is something to trim. */
PT_TEST(test_model_trim_between_evals_exact)
{
	enum { N = 48 };
	uint32_t toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = (uint32_t)(i * 37 + 11) % N_VOCAB;
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		struct pt_error err = { 0 };
		const char *path = pt_test_tmpfile("trim.gguf");
		REQUIRE(write_tiny(path, (enum pt_arch)a, &plain, &err) == PT_OK);
		struct pt_model *m = NULL;
		REQUIRE(pt_model_open(path, &m, &err) == PT_OK);
		float *l[2];
		for (int t = 0; t < 2; t++) {
			struct pt_fwd_opts fo = { .n_ctx = 4096, .n_batch = 4096, .kv_type = PT_KV_F32,
						  .dn_chunk_min = UINT32_MAX };
			pt_fwd *f = NULL;
			REQUIRE(pt_fwd_create(m, &fo, &f, &err) == PT_OK);
			CHECK(pt_fwd_trim_bytes(f) >= (1u << 20));
			l[t] = pt_mallocn((size_t)N * m->output.rows, sizeof(float));
			REQUIRE(l[t]);
			CHECK_EQ_INT(pt_fwd_eval(f, toks, 30, l[t], &err), PT_OK);
			if (t)
				pt_fwd_trim(f);
			CHECK_EQ_INT(pt_fwd_eval(f, toks + 30, 17, l[t] + (size_t)30 * m->output.rows,
					       &err), PT_OK);
			if (t)
				pt_fwd_trim(f);
			CHECK_EQ_INT(pt_fwd_eval(f, toks + 47, 1, l[t] + (size_t)47 * m->output.rows,
					       &err), PT_OK);
			pt_fwd_destroy(f);
		}
		CHECK_EQ_INT(count_diff(l[0], l[1], (size_t)N * m->output.rows), 0);
		pt_free(l[0]);
		pt_free(l[1]);
		pt_model_close(m);
	}
}
