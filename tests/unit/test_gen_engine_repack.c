/* test_gen_engine_repack.c - pt_engine_opts.repack (model/repack.h): Q4_K matrices copied into
 * the interleaved X16 layout at open.  On a small-preset model (256-multiple widths, so its
 * Q4_K matrices qualify): the resident matrices and, with the experts mapped, the expert
 * tensors are X16, streamed experts stay as stored but compute in the X16 numerics
 * (X16_ROWS: the same logits as the copies, bit for bit); prefill in chunks equals token-by-token
 * decode bit for bit; logits stay as close to the unrepacked model's as another CPU level's
 * are (only the float order of the Q4_K products changed).  An interleaved expert pack
 * (particle pack --repack) gives the streamed experts the mapped copy's layout and bits;
 * repack_auto (the CLI's default for serve) copies a model that runs from memory, and the
 * resident weights of one whose experts stream, as --repack does; not a mapped model over its
 * budget. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "expert/layout.h"
#include "expert/pack.h"
#include "gen/engine.h"
#include "gguf/gguf.h"
#include "kern/kern.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

#define N_TOK 24

static const char *model_path(enum pt_arch arch, uint32_t n_layer, const char *name)
{
	const char *path = pt_test_tmpfile(name);
	struct pt_mkmodel_opts o = { .arch = arch, .preset = "small", .n_layer = n_layer,
				     .mix = PT_MIX_Q4_K_M, .seed = 5, .out_path = path,
				     .threads = 2 };
	struct pt_error err = { 0 };
	return pt_mkmodel_write(&o, &err) == PT_OK ? path : NULL;
}

static pt_engine *open_mode(const char *path, const char *io, bool repack, bool repack_auto,
			    uint64_t budget)
{
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 64, .n_batch = 16,
				    .memory_budget = budget, .io_mode = io,
				    .expert_slots = strcmp(io, "mmap") ? 8 : 0, .no_lock = true,
				    .repack = repack, .repack_auto = repack_auto };
	struct pt_error err = { 0 };
	pt_engine *e = NULL;
	if (pt_engine_open(&o, &e, &err) != PT_OK) {
		printf("    open: %s\n", err.msg);
		return NULL;
	}
	return e;
}

static pt_engine *open_budget(const char *path, const char *io, bool repack, uint64_t budget)
{
	return open_mode(path, io, repack, false, budget);
}

static pt_engine *open_with(const char *path, const char *io, bool repack)
{
	return open_budget(path, io, repack, 1ull << 30);
}

/* repack_auto, the CLI's default for serve and interactive run */
static pt_engine *open_auto(const char *path, const char *io, uint64_t budget)
{
	return open_mode(path, io, false, true, budget);
}

/* All N_TOK rows' logits: in chunks of 16 (prefill), or one token at a time (decode). */
static float *eval_all(pt_engine *e, bool one_by_one)
{
	const uint32_t nv = pt_engine_n_vocab(e);
	uint32_t toks[N_TOK];
	for (uint32_t i = 0; i < N_TOK; i++)
		toks[i] = (i * 41 + 7) % 300 + 3;
	float *l = pt_mallocn((size_t)N_TOK * nv, sizeof(float));
	struct pt_error err = { 0 };
	if (!l || pt_engine_rewind(e, 0, &err) != PT_OK)
		goto fail;
	if (!one_by_one) {
		if (pt_engine_eval(e, toks, N_TOK, l, true, &err) != PT_OK)
			goto fail;
		return l;
	}
	for (uint32_t i = 0; i < N_TOK; i++)
		if (pt_engine_eval(e, toks + i, 1, l + (size_t)i * nv, false, &err) != PT_OK)
			goto fail;
	return l;
fail:
	printf("    eval: %s\n", err.msg);
	pt_free(l);
	return NULL;
}

/* KL(softmax(p) || softmax(q)) in nats. */
static double row_kl(const float *p, const float *q, size_t n)
{
	double mp = -INFINITY, mq = -INFINITY, sp = 0, sq = 0, kl = 0;
	for (size_t i = 0; i < n; i++) {
		mp = fmax(mp, p[i]);
		mq = fmax(mq, q[i]);
	}
	for (size_t i = 0; i < n; i++) {
		sp += exp(p[i] - mp);
		sq += exp(q[i] - mq);
	}
	for (size_t i = 0; i < n; i++) {
		const double lp = p[i] - mp - log(sp), lq = q[i] - mq - log(sq);
		kl += exp(lp) * (lp - lq);
	}
	return kl;
}

/* The layout of a routed-expert tensor left as stored under --repack: the interleaved
 * numerics from the rows as stored (X16_ROWS) where this level has the row kernels. */
static enum pt_kern_layout as_stored(const struct pt_expert_mat *x)
{
	return pt_kern_x16_rows_native(x->type) && pt_kern_x16_ok(x->type, x->rows, x->cols)
		       ? PT_KERN_LAYOUT_X16_ROWS
		       : PT_KERN_LAYOUT_ROWS;
}

/* Whether every routed-expert tensor of m left as stored computes as its copy would: the
 * type has the row kernels exactly where it has the copies' kernel (then a --repack run
 * gives the same bits from the file, a pack or a copy). */
static bool experts_same_numerics(const struct pt_model *m)
{
	for (uint32_t il = 0; il < m->hp.n_layer; il++) {
		const struct pt_layer_weights *L = &m->layers[il];
		const struct pt_expert_mat *xs[] = { &L->gate_exps, &L->up_exps, &L->gate_up_exps,
						     &L->down_exps };
		for (int k = 0; k < 4; k++)
			if (xs[k]->rows && pt_kern_x16_ok(xs[k]->type, xs[k]->rows, xs[k]->cols) &&
			    pt_kern_x16_native(xs[k]->type) != pt_kern_x16_rows_native(xs[k]->type))
				return false;
	}
	return true;
}

/* At a level without the interleaved Q4_K kernel (scalar) --repack leaves every matrix as
 * stored: true if so (the caller then has nothing else to check). */
static bool repack_skipped(const char *path)
{
	CHECK(pt_kern_init(NULL) == PT_OK);
	if (pt_kern_x16_native(PT_TYPE_Q4_K))
		return false;
	pt_engine *e = open_with(path, "mmap", true);
	CHECK(e && pt_engine_model(e)->n_repack == 0);
	printf("    repack: no interleaved kernel at this level: nothing repacked\n");
	pt_engine_close(e);
	return true;
}

static void check_arch(enum pt_arch arch, uint32_t n_layer, const char *file)
{
	const char *path = model_path(arch, n_layer, file);
	REQUIRE(path);
	if (repack_skipped(path))
		return;
	pt_engine *plain = open_with(path, "mmap", false);
	pt_engine *mapped = open_with(path, "mmap", true);
	pt_engine *streamed = open_with(path, "direct", true);
	REQUIRE(plain && mapped && streamed);
	const struct pt_model *mp = pt_engine_model(mapped), *ms = pt_engine_model(streamed);
	const struct pt_layer_weights *L = &mp->layers[0], *S = &ms->layers[0];
	CHECK(mp->n_repack > 0 && ms->n_repack > 0 && pt_engine_model(plain)->n_repack == 0);
	CHECK(L->wq.data == NULL || L->wq.type != PT_TYPE_Q4_K ||
	      L->wq.layout == PT_KERN_LAYOUT_X16);
	CHECK(L->wo.layout == PT_KERN_LAYOUT_X16 || L->wo.type != PT_TYPE_Q4_K);
	const struct pt_expert_mat *xg = L->gate_up_exps.data ? &L->gate_up_exps : &L->gate_exps;
	const struct pt_expert_mat *sg = S->gate_up_exps.data ? &S->gate_up_exps : &S->gate_exps;
	CHECK(xg->type == PT_TYPE_Q4_K && xg->layout == PT_KERN_LAYOUT_X16);
	/* streamed experts are read as stored, computed in the interleaved numerics */
	CHECK(sg->layout == as_stored(sg) && S->down_exps.layout == as_stored(&S->down_exps));
	CHECK(sg->layout == PT_KERN_LAYOUT_X16_ROWS || !pt_kern_x16_rows_native(PT_TYPE_Q4_K));
	/* Q6_K too (the Q4_K_M mixture's downs; attn_v where it is Q6_K) */
	const bool q6 = pt_kern_x16_native(PT_TYPE_Q6_K); /* false at a level without X16 kernels */
	CHECK(L->down_exps.type != PT_TYPE_Q6_K || L->down_exps.layout == (q6 ? PT_KERN_LAYOUT_X16
										: PT_KERN_LAYOUT_ROWS));
	CHECK(L->wv.type != PT_TYPE_Q6_K ||
	      L->wv.layout == (q6 ? PT_KERN_LAYOUT_X16 : PT_KERN_LAYOUT_ROWS));
	printf("    %s: down_exps %s %s, attn_v %s %s\n", file, pt_type_name(L->down_exps.type),
	       L->down_exps.layout ? "x16" : "rows", L->wv.data ? pt_type_name(L->wv.type) : "-",
	       L->wv.layout ? "x16" : "rows");
	CHECK(S->wo.layout == L->wo.layout);
	/* the head, tied to the token embedding or not, is repacked where its type has the
	 * layout; a tied one's embedding rows come back out of the copy bit for bit */
	const struct pt_model *pp = pt_engine_model(plain);
	const bool head_x16 = pt_kern_x16_native(pp->output.type) &&
			      pt_kern_x16_ok(pp->output.type, pp->output.rows, pp->output.cols);
	CHECK(mp->output.layout == (head_x16 ? PT_KERN_LAYOUT_X16 : PT_KERN_LAYOUT_ROWS));
	CHECK(mp->embd_in_output == (head_x16 && pp->hp.tied_embeddings));
	CHECK(ms->embd_in_output == mp->embd_in_output && !pp->embd_in_output);
	{
		const uint32_t D = pp->hp.n_embd, nvocab = (uint32_t)pp->output.rows;
		const uint32_t toks[4] = { 0, 1, 17, nvocab - 1 };
		float *a = pt_mallocn(D, sizeof(float)), *b = pt_mallocn(D, sizeof(float));
		REQUIRE(a && b);
		for (int i = 0; i < 4; i++) {
			CHECK(pt_model_embed_row(pp, toks[i], a, NULL) == PT_OK);
			CHECK(pt_model_embed_row(mp, toks[i], b, NULL) == PT_OK);
			CHECK(memcmp(a, b, D * sizeof(float)) == 0);
			CHECK(pt_model_embed_row(ms, toks[i], b, NULL) == PT_OK);
			CHECK(memcmp(a, b, D * sizeof(float)) == 0);
		}
		CHECK(pt_model_embed_row(mp, nvocab, b, NULL) == PT_E_INVALID);
		pt_free(a);
		pt_free(b);
	}
	printf("    %s: head %s %s%s\n", file, pt_type_name(pp->output.type),
	       mp->output.layout ? "x16" : "rows",
	       pp->hp.tied_embeddings ? " (tied: embedding rows read from the copy)" : "");
	const size_t nv = pt_engine_n_vocab(plain), n = (size_t)N_TOK * nv;
	float *ref = eval_all(plain, false);
	float *pre = eval_all(mapped, false), *dec = eval_all(mapped, true);
	float *spre = eval_all(streamed, false), *sdec = eval_all(streamed, true);
	REQUIRE(ref && pre && dec && spre && sdec);
	CHECK(memcmp(pre, dec, n * sizeof(float)) == 0);
	CHECK(memcmp(spre, sdec, n * sizeof(float)) == 0);
	/* the same bits whether the experts were copied or stream as stored (where every
	 * expert type computes as its copy: at AVX2 Gemma 4's Q5_0 / Q8_0 downs have no row
	 * kernels; at AVX-512 every type of these files has them) */
	const bool same = experts_same_numerics(ms);
	CHECK(!same || memcmp(pre, spre, n * sizeof(float)) == 0);
#if defined(PT_KERN_X86)
	CHECK(same || pt_kern_level() != PT_KERN_LEVEL_AVX512);
#endif
	printf("    %s: streamed experts as stored %s the copies' logits\n", file,
	       same ? "give exactly" : "differ in the last bits from");
	double worst = 0, kl = 0;
	for (size_t r = 0; r < N_TOK; r++) {
		kl = fmax(kl, row_kl(ref + r * nv, pre + r * nv, nv));
		kl = fmax(kl, row_kl(ref + r * nv, spre + r * nv, nv));
		for (size_t i = r * nv; i < (r + 1) * nv; i++)
			worst = fmax(worst, fmax(fabs((double)pre[i] - ref[i]),
						 fabs((double)spre[i] - ref[i])));
	}
	CHECK(worst > 0); /* the order did change: the X16 products ran */
	/* as close as another CPU level: on the gemma4 model AVX2 against AVX-512 logits (no
	 * repack) differ by 0.197 and KL 1.6e-3, the scalar level by 0.229 and 1.9e-3 */
	CHECK(kl < 5e-3);
	printf("    %s: repacked vs plain: max |logit diff| %.3g, max KL %.3g\n", file, worst, kl);
	pt_free(ref);
	pt_free(pre);
	pt_free(dec);
	pt_free(spre);
	pt_free(sdec);
	pt_engine_close(plain);
	pt_engine_close(mapped);
	pt_engine_close(streamed);
}

/* A tied head repacked: pt_model_embed_row reads each token's row back out of the X16 copy
 * and dequantizes it exactly as the mapped row (the small models' compact vocabularies
 * are not a multiple of 16 rows, so no engine above repacks a tied head: a model of just
 * the two tensors does here).  Raw random rows, finite scales: every field's bits count;
 * Q8_0 and Q5_0 heads (Q8_0 files) unpack 32 columns at a time. */
PT_TEST(test_gen_engine_repack_tied_embedding_rows)
{
	const enum pt_type types[4] = { PT_TYPE_Q4_K, PT_TYPE_Q6_K, PT_TYPE_Q8_0, PT_TYPE_Q5_0 };
	const uint64_t rows = 48, cols = 512;
	for (int ti = 0; ti < 4; ti++) {
		const enum pt_type t = types[ti];
		uint64_t rb;
		REQUIRE(pt_type_row_bytes(t, cols, &rb) == 0);
		const size_t band = pt_kern_x16_band(t, cols);
		uint8_t *w = pt_malloc(rows * rb), *x = pt_malloc(rows / 16 * band);
		float *a = pt_mallocn(cols, sizeof(float)), *b = pt_mallocn(cols, sizeof(float));
		REQUIRE(w && x && a && b);
		uint32_t seed = 7u + (uint32_t)ti;
		for (uint64_t i = 0; i < rows * rb; i++) {
			seed = seed * 1664525u + 1013904223u;
			w[i] = (uint8_t)(seed >> 24);
		}
		/* finite f16 scales (d, dmin): exponent not all ones */
		const uint64_t unit = t == PT_TYPE_Q8_0 || t == PT_TYPE_Q5_0 ? 32 : 256;
		for (uint64_t r = 0; r < rows; r++)
			for (uint64_t sb = 0; sb < cols / unit; sb++) {
				uint8_t *blk = w + r * rb + sb * (rb / (cols / unit));
				uint8_t *d = t == PT_TYPE_Q6_K ? blk + 208 : blk;
				d[1] &= 0x3b;
				if (t == PT_TYPE_Q4_K)
					d[3] &= 0x3b;
			}
		pt_kern_x16_pack(t, w, (size_t)rb, cols, 0, rows / 16, x);
		struct pt_gguf_tensor te = { .n_dims = 2, .ne = { cols, rows, 1, 1 }, .type = t,
					     .nbytes = rows * rb, .data = w };
		struct pt_model plain = { .tok_embd = &te }, packed = plain;
		plain.output = (struct pt_kern_mat){ t, rows, cols, (size_t)rb, w,
						     PT_KERN_LAYOUT_ROWS };
		packed.output = (struct pt_kern_mat){ t, rows, cols, (size_t)rb, x,
						      PT_KERN_LAYOUT_X16 };
		packed.embd_in_output = true;
		int bad = 0;
		for (uint32_t tok = 0; tok < rows; tok++) {
			CHECK(pt_model_embed_row(&plain, tok, a, NULL) == PT_OK);
			CHECK(pt_model_embed_row(&packed, tok, b, NULL) == PT_OK);
			bad += memcmp(a, b, cols * sizeof(float)) != 0;
		}
		CHECK_EQ_INT(bad, 0);
		CHECK(pt_model_embed_row(&packed, (uint32_t)rows, b, NULL) == PT_E_INVALID);
		pt_free(w);
		pt_free(x);
		pt_free(a);
		pt_free(b);
	}
}

PT_TEST(test_gen_engine_repack_qwen3moe)
{
	check_arch(PT_ARCH_QWEN3MOE, 1, "repack_qwen3.gguf");
}

/* --io mmap with a budget below the model: the experts stay as stored (a copy could not be
 * paged back from the file), the resident matrices are repacked. */
PT_TEST(test_gen_engine_repack_mapped_over_budget)
{
	const char *path = model_path(PT_ARCH_QWEN3MOE, 1, "repack_budget.gguf");
	REQUIRE(path);
	if (repack_skipped(path))
		return;
	pt_engine *e = open_budget(path, "mmap", true, 8u << 20);
	REQUIRE(e);
	const struct pt_layer_weights *L = &pt_engine_model(e)->layers[0];
	CHECK(L->gate_exps.layout == as_stored(&L->gate_exps));
	CHECK(L->down_exps.layout == as_stored(&L->down_exps));
	CHECK(L->wo.type != PT_TYPE_Q4_K || L->wo.layout == PT_KERN_LAYOUT_X16);
	float *l = eval_all(e, false);
	CHECK(l != NULL);
	pt_free(l);
	pt_engine_close(e);
}

/* --io mmap plans the mapped experts at their actual bytes (as --repack copies them), not as
 * uniform slots of the largest layer's expert: a budget of exactly the plan copies the
 * experts, one byte less leaves them as stored.  Q4_K_M gives some layers' downs Q6_K, so
 * that budget is below what uniform slots alone would need (the 24 GiB host's Sarvam-30B
 * read 1.3 GiB over, and its experts stayed uncopied: decode 15-20 % slower, a 512-token
 * prompt 2x). */
PT_TEST(test_gen_engine_repack_mapped_plan_counts_actual_bytes)
{
	const char *path = model_path(PT_ARCH_QWEN3MOE, 4, "repack_mapped_plan.gguf");
	REQUIRE(path);
	if (repack_skipped(path))
		return;
	pt_engine *big = open_budget(path, "mmap", true, 1ull << 30);
	REQUIRE(big);
	struct pt_engine_stats st;
	pt_engine_stats(big, &st);
	const struct pt_model *mb = pt_engine_model(big);
	CHECK(mb->layers[0].gate_exps.layout == PT_KERN_LAYOUT_X16);
	const uint64_t plan = st.plan_bytes;
	/* what the mapping's copies take: each part interleaved where it is (X16), else as
	 * stored, for every expert of every MoE layer */
	struct pt_expert_layout lay;
	struct pt_error err = { 0 };
	REQUIRE(pt_expert_layout_from_gguf_layers(mb->g, mb->hp.n_layer, &lay, &err) == PT_OK);
	uint64_t copies = 0;
	for (uint32_t i = 0; i < lay.n_moe; i++)
		for (uint32_t j = 0; j < lay.moe[i].n_parts; j++) {
			const struct pt_expert_part *q = &lay.moe[i].part[j];
			const enum pt_type t = (enum pt_type)q->type;
			const bool x16 = pt_kern_x16_native(t) && pt_kern_x16_ok(t, q->rows, q->cols);
			copies += lay.n_expert * (x16 ? q->rows / PT_KERN_X16_ROWS *
							    pt_kern_x16_band(t, q->cols)
						      : q->stride);
		}
	const uint64_t uniform = st.slot_bytes * lay.n_expert * lay.n_moe;
	pt_expert_layout_free(&lay);
	printf("    plan %llu bytes, experts %llu (as copied %llu), as uniform slots %llu\n",
	       (unsigned long long)plan, (unsigned long long)st.plan_expert_bytes,
	       (unsigned long long)copies, (unsigned long long)uniform);
	CHECK_EQ_INT(st.plan_expert_bytes, copies);
	CHECK(copies < uniform); /* so uniform slots would have refused this budget */
	pt_engine_close(big);
	pt_engine *exact = open_budget(path, "mmap", true, plan);
	pt_engine *short1 = open_budget(path, "mmap", true, plan - 1);
	REQUIRE(exact && short1);
	const struct pt_layer_weights *Le = &pt_engine_model(exact)->layers[0];
	const struct pt_layer_weights *Ls = &pt_engine_model(short1)->layers[0];
	CHECK(Le->gate_exps.layout == PT_KERN_LAYOUT_X16);
	CHECK(Le->down_exps.layout == PT_KERN_LAYOUT_X16);
	CHECK(Ls->gate_exps.layout == as_stored(&Ls->gate_exps));
	CHECK(Ls->down_exps.layout == as_stored(&Ls->down_exps));
	CHECK_CONTAINS(pt_engine_plan_line(exact), "mapped, total");
	pt_engine_stats(short1, &st);
	CHECK_EQ_INT(st.plan_bytes, plan); /* planned as if unlimited: over the budget */
	float *a = eval_all(exact, false), *b = eval_all(short1, false);
	REQUIRE(a && b);
	/* the experts as stored compute in the copies' numerics: the same bits */
	CHECK(!experts_same_numerics(pt_engine_model(short1)) ||
	      memcmp(a, b, (size_t)N_TOK * pt_engine_n_vocab(exact) * sizeof(float)) == 0);
	pt_free(a);
	pt_free(b);
	pt_engine_close(exact);
	pt_engine_close(short1);
}

/* repack_auto (the CLI's default): the model running from memory is repacked exactly as
 * --repack does it (same layout, same logits bit for bit); where the experts stream, the
 * resident weights are copied as --repack copies them (the experts stay as stored: same bits
 * as --repack there); where the mapped model exceeds the budget (the kernel pages it),
 * nothing is copied (the prompt's logits then equal the unrepacked model's bit for bit). */
PT_TEST(test_gen_engine_repack_auto)
{
	const char *path = model_path(PT_ARCH_QWEN3MOE, 1, "repack_auto.gguf");
	REQUIRE(path);
	if (repack_skipped(path))
		return;
	pt_engine *forced = open_with(path, "mmap", true), *plain = open_with(path, "mmap", false);
	pt_engine *in_ram = open_auto(path, "mmap", 1ull << 30);
	pt_engine *streamed = open_auto(path, "direct", 1ull << 30);
	pt_engine *streamed_forced = open_with(path, "direct", true);
	pt_engine *over = open_auto(path, "mmap", 8u << 20);
	REQUIRE(forced && plain && in_ram && streamed && streamed_forced && over);
	const struct pt_model *mf = pt_engine_model(forced), *ma = pt_engine_model(in_ram);
	CHECK(ma->n_repack == mf->n_repack && ma->n_repack > 0);
	CHECK(ma->layers[0].gate_exps.layout == PT_KERN_LAYOUT_X16);
	CHECK(ma->layers[0].wo.layout == mf->layers[0].wo.layout);
	const struct pt_model *ms = pt_engine_model(streamed);
	CHECK(ms->n_repack == pt_engine_model(streamed_forced)->n_repack && ms->n_repack > 0);
	CHECK(ms->layers[0].wo.layout == PT_KERN_LAYOUT_X16);
	CHECK(ms->layers[0].gate_exps.layout == as_stored(&ms->layers[0].gate_exps));
	CHECK(pt_engine_model(over)->n_repack == 0);
	CHECK(pt_engine_model(over)->layers[0].wo.layout == PT_KERN_LAYOUT_ROWS);
	struct pt_engine_stats st;
	pt_engine_stats(in_ram, &st);
	CHECK(st.repacked_bytes > 0);
	pt_engine_stats(streamed, &st);
	CHECK(st.repacked_bytes > 0);
	const size_t n = (size_t)N_TOK * pt_engine_n_vocab(plain);
	float *f = eval_all(forced, false), *a = eval_all(in_ram, false);
	float *p = eval_all(plain, false), *s = eval_all(streamed, false), *o = eval_all(over, false);
	float *sf = eval_all(streamed_forced, false), *sd = eval_all(streamed, true);
	REQUIRE(f && a && p && s && o && sf && sd);
	CHECK(memcmp(a, f, n * sizeof(float)) == 0);
	CHECK(memcmp(s, sf, n * sizeof(float)) == 0);
	CHECK(memcmp(s, sd, n * sizeof(float)) == 0); /* prefill = decode with mixed layouts */
	/* the experts as stored compute as the in-RAM copies: the same bits as in RAM */
	CHECK(!experts_same_numerics(ms) || memcmp(s, f, n * sizeof(float)) == 0);
	CHECK(memcmp(s, p, n * sizeof(float)) != 0);  /* the resident copies did run */
	CHECK(memcmp(o, p, n * sizeof(float)) == 0);
	CHECK(memcmp(a, p, n * sizeof(float)) != 0); /* the interleaved products did run */
	pt_free(f);
	pt_free(a);
	pt_free(p);
	pt_free(s);
	pt_free(o);
	pt_free(sf);
	pt_free(sd);
	pt_engine_close(forced);
	pt_engine_close(plain);
	pt_engine_close(in_ram);
	pt_engine_close(streamed);
	pt_engine_close(streamed_forced);
	pt_engine_close(over);
}

PT_TEST(test_gen_engine_repack_gemma4)
{
	check_arch(PT_ARCH_GEMMA4, 2, "repack_gemma4.gguf");
}

/* particle pack --repack: streamed experts read interleaved from the pack compute what the
 * in-RAM --repack copy computes, bit for bit; without --repack the pack is not used (the
 * experts come from the model file as stored), and naming it then is refused. */
PT_TEST(test_gen_engine_repack_x16_pack)
{
	const char *path = model_path(PT_ARCH_QWEN3MOE, 1, "repack_xpack.gguf");
	REQUIRE(path);
	REQUIRE(pt_kern_init(NULL) == PT_OK); /* the level (PARTICLE_CPU) the engines will use */
	char pack[4200];
	pt_pack_default_path(path, pack, sizeof pack);
	struct pt_expert_layout lay;
	struct pt_error err = { 0 };
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_open(path, &g, &err) == PT_OK);
	REQUIRE(pt_expert_layout_from_gguf(g, &lay, &err) == PT_OK);
	pt_gguf_close(g);
	REQUIRE(pt_pack_write(path, &lay, true, pack, NULL, &err) == PT_OK);
	struct pt_pack p;
	REQUIRE(pt_pack_open(pack, path, &lay, true, &p, &err) == PT_OK);
	uint32_t n_x16 = 0;
	for (uint32_t i = 0; i < lay.moe[0].n_parts; i++)
		n_x16 += p.layers[0].part_x16[i];
	CHECK(p.x16 && n_x16 == 3); /* gate, up (Q4_K) and down (Q4_K_M: Q6_K or Q4_K) */
	/* the engine reads it only where this level has every such type's interleaved kernel */
	bool usable = true;
	for (uint32_t i = 0; i < lay.moe[0].n_parts; i++)
		usable &= !p.layers[0].part_x16[i] ||
			  pt_kern_x16_native((enum pt_type)lay.moe[0].part[i].type);
	if (!usable)
		printf("    x16 pack: this CPU level lacks an interleaved kernel: pack not used\n");
	/* a blob's part is the rows of the model file packed as --repack packs them */
	const struct pt_expert_part *gp = &lay.moe[0].part[0];
	uint64_t got_bytes = 0;
	uint8_t *file = pt_malloc(gp->stride), *blob = pt_malloc(p.layers[0].stride);
	uint8_t *want = pt_malloc(pt_pack_part_bytes(gp, true));
	FILE *fm = fopen(path, "rb"), *fp = fopen(pack, "rb");
	REQUIRE(file && blob && want && fm && fp);
	CHECK(fseek(fm, (long)(gp->file_offset + 3 * gp->stride), SEEK_SET) == 0 &&
	      fread(file, 1, gp->stride, fm) == gp->stride);
	CHECK(fseek(fp, (long)(p.layers[0].offset + 3 * p.layers[0].stride), SEEK_SET) == 0 &&
	      (got_bytes = fread(blob, 1, p.layers[0].stride, fp)) == p.layers[0].stride);
	pt_kern_x16_pack((enum pt_type)gp->type, file, gp->stride / gp->rows, gp->cols, 0,
			 gp->rows / 16, want);
	CHECK(memcmp(blob + p.layers[0].part_off[0], want, pt_pack_part_bytes(gp, true)) == 0);
	fclose(fm);
	fclose(fp);
	pt_free(file);
	pt_free(blob);
	pt_free(want);
	pt_pack_free(&p);
	pt_expert_layout_free(&lay);

	pt_engine *mapped = open_with(path, "mmap", true);
	pt_engine *streamed = open_with(path, "direct", true);
	pt_engine *plain = open_with(path, "mmap", false);
	pt_engine *rows = open_with(path, "direct", false);
	pt_engine *auto_s = open_auto(path, "direct", 1ull << 30); /* the CLI's default */
	REQUIRE(mapped && streamed && plain && rows && auto_s);
	const struct pt_layer_weights *S = &pt_engine_model(streamed)->layers[0];
	const struct pt_layer_weights *R = &pt_engine_model(rows)->layers[0];
	const enum pt_kern_layout want_lay = usable ? PT_KERN_LAYOUT_X16 : PT_KERN_LAYOUT_ROWS;
	/* without a usable pack, --repack computes the experts as stored in its numerics */
	CHECK(S->gate_exps.layout == (usable ? want_lay : as_stored(&S->gate_exps)) &&
	      S->up_exps.layout == (usable ? want_lay : as_stored(&S->up_exps)) &&
	      S->down_exps.layout == (usable ? want_lay : as_stored(&S->down_exps)));
	CHECK(R->gate_exps.layout == PT_KERN_LAYOUT_ROWS);
	CHECK(pt_engine_model(auto_s)->layers[0].down_exps.layout == S->down_exps.layout);
	const size_t n = (size_t)N_TOK * pt_engine_n_vocab(mapped);
	float *a = eval_all(mapped, false), *b = eval_all(streamed, false);
	float *bd = eval_all(streamed, true), *c = eval_all(plain, false), *d = eval_all(rows, false);
	float *as = eval_all(auto_s, false);
	REQUIRE(a && b && bd && c && d && as);
	CHECK(memcmp(as, b, n * sizeof(float)) == 0); /* repack_auto uses the pack as --repack */
	/* the pack's = the copy's (and, where the pack is unusable, the file's as stored) */
	CHECK(!(usable || experts_same_numerics(pt_engine_model(streamed))) ||
	      memcmp(a, b, n * sizeof(float)) == 0);
	CHECK(memcmp(b, bd, n * sizeof(float)) == 0); /* prefill = decode */
	CHECK(memcmp(c, d, n * sizeof(float)) == 0);  /* no --repack: the pack unused */
	CHECK(!pt_kern_x16_native(PT_TYPE_Q4_K) || memcmp(a, c, n * sizeof(float)) != 0);
	pt_free(a);
	pt_free(b);
	pt_free(bd);
	pt_free(c);
	pt_free(d);
	pt_free(as);
	pt_engine_close(auto_s);
	pt_engine_close(mapped);
	pt_engine_close(streamed);
	pt_engine_close(plain);
	pt_engine_close(rows);

	/* named with --pack but no --repack: refused (bad input) */
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 64, .n_batch = 16,
				    .memory_budget = 1ull << 30, .io_mode = "direct",
				    .expert_slots = 8, .no_lock = true, .pack_path = pack };
	pt_engine *e = NULL;
	CHECK_EQ_INT(pt_engine_open(&o, &e, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "--repack");
	pt_engine_close(e);
}
