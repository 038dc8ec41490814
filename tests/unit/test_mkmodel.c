/* test_mkmodel.c - synthetic checkpoint generator: PRNG, value statistics, chunk
 * independence, vocabularies, and a full write / read-back round trip through the GGUF
 * reader and the arch descriptions. */
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/mkmodel.h"
#include "model/vocab.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/lock.h"

PT_TEST(test_mkmodel_splitmix64_reference)
{
	/* Reference sequence of splitmix64 seeded with 0 (Vigna's splitmix64.c). */
	uint64_t s = 0;
	CHECK(pt_mkmodel_splitmix64(&s) == 0xe220a8397b1dcdafull);
	CHECK(pt_mkmodel_splitmix64(&s) == 0x6e789e6aa1b965f4ull);
	CHECK(pt_mkmodel_splitmix64(&s) == 0x06c45d188009454full);
}

static struct pt_hparams tiny(enum pt_arch a)
{
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	pt_arch_preset(a, "tiny", 0, &hp, &err);
	hp.n_vocab = 512;
	return hp;
}

PT_TEST(test_mkmodel_rows_independent_of_chunking)
{
	struct pt_hparams hp = tiny(PT_ARCH_QWEN3MOE);
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	const struct pt_tensor_desc *d = pt_tensor_list_find(&l, "blk.1.ffn_up_exps.weight");
	REQUIRE(d != NULL);
	const uint64_t n0 = d->ne[0];
	float *all = pt_mallocn(8 * n0, sizeof(float)), *part = pt_mallocn(3 * n0, sizeof(float));
	REQUIRE(all && part);
	pt_mkmodel_gen_rows(&hp, d, 42, 0, 1000, 8, all);
	pt_mkmodel_gen_rows(&hp, d, 42, 0, 1003, 3, part);
	CHECK(memcmp(all + 3 * n0, part, 3 * n0 * sizeof(float)) == 0);
	pt_mkmodel_gen_rows(&hp, d, 43, 0, 1003, 3, part);
	CHECK(memcmp(all + 3 * n0, part, 3 * n0 * sizeof(float)) != 0);
	/* zero-mean rows, standard deviation ~ 1/sqrt(fan_in) */
	double sum = 0, sq = 0;
	for (uint64_t i = 0; i < n0; i++) {
		sum += all[i];
		sq += (double)all[i] * all[i];
	}
	CHECK_NEAR(sum / (double)n0, 0, 1e-6);
	CHECK_NEAR(sqrt(sq / (double)n0), 1.0 / sqrt((double)n0), 0.15 / sqrt((double)n0));
	pt_free(all);
	pt_free(part);
	pt_tensor_list_free(&l);
}

PT_TEST(test_mkmodel_router_centred_and_skewed)
{
	struct pt_hparams hp = tiny(PT_ARCH_BAILINGMOE2);
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	const struct pt_tensor_desc *r = pt_tensor_list_find(&l, "blk.1.ffn_gate_inp.weight");
	const struct pt_tensor_desc *b = pt_tensor_list_find(&l, "blk.1.exp_probs_b.bias");
	REQUIRE(r && b);
	const uint64_t n0 = r->ne[0], ne = r->ne[1];
	float *w = pt_mallocn(n0 * ne, sizeof(float)), bias[64];
	REQUIRE(w && ne <= 64);
	pt_mkmodel_gen_rows(&hp, r, 5, 0, 0, ne, w);
	double col = 0, row = 0;
	for (uint64_t e = 0; e < ne; e++)
		row += w[e * n0 + 7];
	for (uint64_t i = 0; i < n0; i++)
		col += w[3 * n0 + i];
	CHECK_NEAR(row, 0, 1e-4);
	CHECK_NEAR(col, 0, 1e-4);
	pt_mkmodel_gen_rows(&hp, b, 5, 0, 0, 1, bias);
	for (uint64_t e = 0; e < ne; e++)
		CHECK(bias[e] == 0.0f);
	pt_mkmodel_gen_rows(&hp, b, 5, 2.0, 0, 1, bias);
	double s = 0, mx = -1e9, mn = 1e9;
	for (uint64_t e = 0; e < ne; e++) {
		s += bias[e];
		mx = bias[e] > mx ? bias[e] : mx;
		mn = bias[e] < mn ? bias[e] : mn;
	}
	CHECK_NEAR(s, 0, 1e-4);                 /* zero-mean like the Sarvam converter's */
	CHECK_NEAR(mx - mn, 0.02 * 2.0, 1e-6);  /* skew S spans 0.02 S */
	pt_free(w);
	pt_tensor_list_free(&l);
}

/* Rows of tensor name at skew s (whole tensor; tiny). */
static float *rows_at(const struct pt_hparams *hp, const struct pt_tensor_list *l,
		      const char *name, double s, uint64_t *n0, uint64_t *nr)
{
	const struct pt_tensor_desc *d = pt_tensor_list_find(l, name);
	if (!d)
		return NULL;
	*n0 = d->ne[0];
	*nr = d->ne[1] * d->ne[2];
	float *v = pt_mallocn(*n0 * *nr, sizeof(float));
	if (v)
		pt_mkmodel_gen_rows(hp, d, 9, s, 0, *nr, v);
	return v;
}

/* Ratio of the mean |value| of a new matrix to an old one over rows/columns [lo, hi). */
static double ratio(const float *a, const float *b, uint64_t n0, uint64_t nr, bool cols,
		    uint64_t lo, uint64_t hi)
{
	double sa = 0, sb = 0;
	for (uint64_t r = 0; r < nr; r++)
		for (uint64_t i = 0; i < n0; i++) {
			uint64_t k = cols ? i : r;
			if (k >= lo && k < hi) {
				sa += fabs(a[r * n0 + i]);
				sb += fabs(b[r * n0 + i]);
			}
		}
	return sa / sb;
}

PT_TEST(test_mkmodel_locality_reserved_dims)
{
	struct pt_hparams hp = tiny(PT_ARCH_QWEN3MOE);
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	const uint64_t R = hp.n_embd / 8;
	const double S = 4;
	uint64_t n0, nr;
	const char *names[] = { "token_embd.weight", "blk.1.attn_output.weight",
				"blk.1.ffn_gate_inp.weight" };
	/* embedding columns / attention-output rows / router columns in [0, R) scaled by
	 * 1/(1+S), 1 + 2.4 S / sqrt(2), 1 + 0.375 S; everything else unchanged */
	const double want[] = { 1 / (1 + S), 1 + 2.4 * S / sqrt(2.0), 1 + 0.375 * S };
	for (int t = 0; t < 3; t++) {
		float *a = rows_at(&hp, &l, names[t], S, &n0, &nr);
		float *b = rows_at(&hp, &l, names[t], 0, &n0, &nr);
		REQUIRE(a && b);
		const bool cols = t != 1;
		const uint64_t end = cols ? n0 : nr;
		CHECK_NEAR(ratio(a, b, n0, nr, cols, 0, R), want[t], 1e-4 * want[t]);
		CHECK_NEAR(ratio(a, b, n0, nr, cols, R, end), 1.0, 1e-6);
		pt_free(a);
		pt_free(b);
	}
	/* which tensors --reroute rewrites */
	for (uint32_t i = 0; i < l.n; i++) {
		const char *n = l.t[i].name;
		bool want_dep = strstr(n, "token_embd") || strstr(n, "attn_output") ||
				strstr(n, "ffn_gate_inp");
		CHECK(pt_mkmodel_skew_dependent(&l.t[i]) == want_dep);
	}
	CHECK(pt_mkmodel_real_skew(PT_ARCH_QWEN3MOE) > 0);
	pt_tensor_list_free(&l);
}

PT_TEST(test_mkmodel_vocab_merges_consistent)
{
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		struct pt_vocab v;
		struct pt_error err = { 0 };
		REQUIRE(pt_vocab_compact((enum pt_arch)a, 0, &v, &err) == PT_OK);
		CHECK(v.n > 256 + 500 && v.n < 4096);
		CHECK(v.chat_template && strlen(v.chat_template) > 1000);
		for (uint32_t i = 0; i < v.n_merges; i++) {
			char left[64], right[64], both[128];
			const char *sp = strchr(v.merges[i], ' ');
			REQUIRE(sp && sp != v.merges[i]);
			snprintf(left, sizeof left, "%.*s", (int)(sp - v.merges[i]), v.merges[i]);
			snprintf(right, sizeof right, "%s", sp + 1);
			snprintf(both, sizeof both, "%s%s", left, right);
			if (pt_vocab_find(&v, left) < 0 || pt_vocab_find(&v, right) < 0 ||
			    pt_vocab_find(&v, both) < 0)
				pt_test_fail(__FILE__, __LINE__, "arch %d merge '%s' not closed", a,
					     v.merges[i]);
		}
		pt_vocab_free(&v);
	}
	struct pt_vocab v;
	struct pt_error err = { 0 };
	REQUIRE(pt_vocab_compact(PT_ARCH_QWEN3MOE, 0, &v, &err) == PT_OK);
	CHECK(v.eos == pt_vocab_find(&v, "<|im_end|>") && v.eos > 0);
	CHECK(v.types[pt_vocab_find(&v, "<think>")] == PT_TOKTYPE_USER_DEFINED);
	CHECK(v.types[pt_vocab_find(&v, "<|im_start|>")] == PT_TOKTYPE_CONTROL);
	CHECK(pt_vocab_find(&v, "\xc4\xa0the") > 0); /* "Ġthe" */
	CHECK_EQ_STR(v.pre, "qwen2");
	pt_vocab_free(&v);
	REQUIRE(pt_vocab_compact(PT_ARCH_GEMMA4, 2000, &v, &err) == PT_OK);
	CHECK_EQ_INT(v.n, 2000);
	CHECK_EQ_STR(v.tokens[2], "<bos>");
	CHECK(v.bos == 2 && v.eos == 1 && v.eot == pt_vocab_find(&v, "<turn|>"));
	CHECK(v.types[pt_vocab_find(&v, "<0x41>")] == PT_TOKTYPE_BYTE);
	CHECK(v.types[1999] == PT_TOKTYPE_UNUSED);
	pt_vocab_free(&v);
}

static void write_tiny(const char *path, enum pt_arch arch, const char *name, enum pt_mix mix,
		       uint64_t seed)
{
	struct pt_mkmodel_opts o = { .arch = arch, .arch_name = name, .preset = "tiny",
				     .n_layer = 2, .mix = mix, .seed = seed, .out_path = path,
				     .threads = 2 };
	struct pt_error err = { 0 };
	if (pt_mkmodel_write(&o, &err) != PT_OK)
		pt_test_fail(__FILE__, __LINE__, "mkmodel: %s", err.msg);
}

PT_TEST(test_mkmodel_roundtrip_through_reader)
{
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		char path[512];
		snprintf(path, sizeof path, "%s", pt_test_tmpfile("rt.gguf"));
		write_tiny(path, (enum pt_arch)a, NULL, PT_MIX_Q4_K_M, 3);
		pt_gguf *g = NULL;
		struct pt_error err = { 0 };
		REQUIRE(pt_gguf_open(path, &g, &err) == PT_OK);
		struct pt_hparams hp, want;
		REQUIRE(pt_arch_read_hparams(g, &hp, &err) == PT_OK);
		REQUIRE(pt_arch_preset((enum pt_arch)a, "tiny", 2, &want, &err) == PT_OK);
		CHECK_EQ_INT(hp.arch, a);
		CHECK_EQ_INT(hp.n_layer, 2);
		CHECK_EQ_INT(hp.n_embd, want.n_embd);
		CHECK_EQ_INT(hp.n_expert, want.n_expert);
		CHECK_EQ_INT(hp.n_ff_exp, want.n_ff_exp);
		CHECK_EQ_INT(hp.head_dim_k, want.head_dim_k);
		CHECK_EQ_INT(hp.gating, want.gating);
		CHECK(hp.tied_embeddings == want.tied_embeddings);
		CHECK(hp.fused_qkv == want.fused_qkv && hp.has_exp_probs_b == want.has_exp_probs_b);
		CHECK(hp.k_eq_v_full == want.k_eq_v_full);
		for (uint32_t l = 0; l < 2; l++)
			CHECK(hp.is_swa[l] == want.is_swa[l] && hp.n_head_kv[l] == want.n_head_kv[l]);
		CHECK(pt_arch_check_tensors(&hp, g, &err) == PT_OK);
		/* types in the file are the mixture's */
		struct pt_tensor_list l;
		REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
		uint32_t *types = pt_mallocn(l.n, sizeof *types);
		REQUIRE(types);
		pt_mix_assign(PT_MIX_Q4_K_M, &hp, &l, types);
		for (uint32_t i = 0; i < l.n; i++) {
			const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
			CHECK(pt_str_eq(t->name, l.t[i].name)); /* loader order */
			CHECK_EQ_INT(t->type, types[i]);
		}
		uint32_t ft = 0;
		CHECK(pt_gguf_get_u32(g, "general.file_type", 0, &ft, NULL, &err) == PT_OK && ft == 15);
		pt_free(types);
		pt_tensor_list_free(&l);
		pt_gguf_close(g);
	}
}

PT_TEST(test_mkmodel_sarvam_moe_alias_and_errors)
{
	char path[512];
	snprintf(path, sizeof path, "%s", pt_test_tmpfile("sv.gguf"));
	write_tiny(path, PT_ARCH_BAILINGMOE2, "sarvam_moe", PT_MIX_Q8_0, 1);
	pt_gguf *g = NULL;
	struct pt_error err = { 0 };
	REQUIRE(pt_gguf_open(path, &g, &err) == PT_OK);
	struct pt_str s;
	CHECK(pt_gguf_get_str(g, "general.architecture", &s, NULL, &err) == PT_OK &&
	      pt_str_eq(s, "sarvam_moe"));
	CHECK(pt_gguf_find_kv(g, "sarvam_moe.expert_gating_func") != NULL);
	CHECK(pt_gguf_find_kv(g, "bailingmoe2.expert_gating_func") == NULL);
	struct pt_hparams hp;
	CHECK(pt_arch_read_hparams(g, &hp, &err) == PT_OK && hp.arch == PT_ARCH_BAILINGMOE2);
	CHECK_EQ_STR(hp.arch_name, "sarvam_moe");
	pt_gguf_close(g);
	struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN3MOE, .arch_name = "sarvam_moe",
				     .preset = "tiny", .out_path = path, .threads = 1 };
	CHECK(pt_mkmodel_write(&o, &err) == PT_E_INVALID);
	pt_error_clear(&err);
	o.arch_name = NULL;
	o.vocab_dir = "/nonexistent-tokenizer-dir";
	CHECK(pt_mkmodel_write(&o, &err) != PT_OK);
	pt_error_clear(&err);
	o.vocab_dir = NULL;
	o.out_path = "/nonexistent-dir/x.gguf";
	CHECK(pt_mkmodel_write(&o, &err) == PT_E_IO);
}

PT_TEST(test_mkmodel_deterministic_bytes)
{
	char a[512], b[512];
	snprintf(a, sizeof a, "%s", pt_test_tmpfile("d1.gguf"));
	snprintf(b, sizeof b, "%s", pt_test_tmpfile("d2.gguf"));
	write_tiny(a, PT_ARCH_GEMMA4, NULL, PT_MIX_Q5_K_M, 11);
	struct pt_mkmodel_opts o = { .arch = PT_ARCH_GEMMA4, .preset = "tiny", .n_layer = 2,
				     .mix = PT_MIX_Q5_K_M, .seed = 11, .out_path = b,
				     .threads = 3 };
	struct pt_error err = { 0 };
	REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	REQUIRE(fa && fb);
	int ca, cb;
	uint64_t n = 0, diff = 0;
	do {
		ca = fgetc(fa);
		cb = fgetc(fb);
		diff += ca != cb;
		n++;
	} while (ca != EOF && cb != EOF);
	CHECK(n > 100000);
	CHECK_EQ_INT(diff, 0);
	fclose(fa);
	fclose(fb);
}

static bool same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = fa && fb;
	int ca = 0, cb = 0;
	while (same && ca != EOF) {
		ca = fgetc(fa);
		cb = fgetc(fb);
		same = ca == cb;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

static enum pt_status reroute(const char *path, double skew, struct pt_error *err)
{
	struct pt_mkmodel_opts o = { .out_path = path, .router_skew = skew, .threads = 2 };
	return pt_mkmodel_reroute(&o, err);
}

PT_TEST(test_mkmodel_reroute_matches_fresh)
{
	for (int a = 0; a < PT_ARCH_COUNT; a++) {
		char f0[512], f[512], fs[512];
		snprintf(f0, sizeof f0, "%s", pt_test_tmpfile("rr0.gguf"));
		snprintf(f, sizeof f, "%s", pt_test_tmpfile("rr.gguf"));
		snprintf(fs, sizeof fs, "%s", pt_test_tmpfile("rrs.gguf"));
		write_tiny(f0, (enum pt_arch)a, NULL, PT_MIX_Q4_K_M, 5);
		write_tiny(f, (enum pt_arch)a, NULL, PT_MIX_Q4_K_M, 5);
		struct pt_mkmodel_opts o = { .arch = (enum pt_arch)a, .preset = "tiny",
					     .n_layer = 2, .mix = PT_MIX_Q4_K_M, .seed = 5,
					     .router_skew = 3.5, .out_path = fs, .threads = 1 };
		struct pt_error err = { 0 };
		REQUIRE(pt_mkmodel_write(&o, &err) == PT_OK);
		CHECK(!same_file(f, fs));
		CHECK(reroute(f, 3.5, &err) == PT_OK);
		CHECK(same_file(f, fs));
		CHECK(reroute(f, 0, &err) == PT_OK);
		CHECK(same_file(f, f0));
	}
}

PT_TEST(test_mkmodel_reroute_refuses_and_recovers)
{
	char f[512], g[512];
	struct pt_error err = { 0 };
	snprintf(f, sizeof f, "%s", pt_test_tmpfile("rf.gguf"));
	snprintf(g, sizeof g, "%s", pt_test_tmpfile("rg.gguf"));
	/* not written by mkmodel: a GGUF without the particle.mkmodel keys */
	pt_gguf_writer *w = NULL;
	REQUIRE(pt_gguf_writer_create(g, 32, &w, &err) == PT_OK);
	REQUIRE(pt_gguf_writer_set_str(w, "general.name", "particle synthetic qwen3moe tiny "
				       "q4_k_m", &err) == PT_OK);
	REQUIRE(pt_gguf_writer_begin_data(w, &err) == PT_OK);
	REQUIRE(pt_gguf_writer_finish(w, &err) == PT_OK);
	pt_gguf_writer_destroy(w);
	CHECK(reroute(g, 1, &err) == PT_E_INVALID);
	CHECK(strstr(err.msg, "not a file written by particle mkmodel") != NULL);
	pt_error_clear(&err);
	CHECK(reroute("/nonexistent-dir/x.gguf", 1, &err) == PT_E_IO);
	pt_error_clear(&err);
	/* a layout that differs: the name says q5_k_m, the tensors are q4_k_m */
	write_tiny(f, PT_ARCH_QWEN3MOE, NULL, PT_MIX_Q4_K_M, 2);
	FILE *fp = fopen(f, "r+b");
	REQUIRE(fp);
	char head[4096];
	size_t got = fread(head, 1, sizeof head, fp);
	const char *hit = NULL;
	for (size_t i = 0; i + 11 <= got && !hit; i++)
		if (memcmp(head + i, "tiny q4_k_m", 11) == 0)
			hit = head + i + 5;
	REQUIRE(hit != NULL);
	fseek(fp, (long)(hit - head), SEEK_SET);
	fwrite("q5", 1, 2, fp);
	fclose(fp);
	CHECK(reroute(f, 1, &err) == PT_E_INVALID);
	CHECK(strstr(err.msg, "layout differs") != NULL);
	pt_error_clear(&err);
	/* an interrupted reroute (router_skew NaN, tensors half rewritten) is completed */
	write_tiny(f, PT_ARCH_BAILINGMOE2, NULL, PT_MIX_Q8_0, 2);
	struct pt_model_lock lk = { .fd = -1 };
	REQUIRE(pt_model_lock_acquire(&lk, f, NULL, &err) == PT_OK); /* a running particle */
	CHECK(reroute(f, 1, &err) == PT_E_BUSY);
	pt_error_clear(&err);
	pt_model_lock_release(&lk);
	write_tiny(g, PT_ARCH_BAILINGMOE2, NULL, PT_MIX_Q8_0, 2);
	pt_gguf *gg = NULL;
	REQUIRE(pt_gguf_open(f, &gg, &err) == PT_OK);
	const uint64_t off = pt_gguf_find_kv(gg, "particle.mkmodel.router_skew")->value_offset;
	const struct pt_gguf_tensor *t = pt_gguf_find_tensor(gg, "blk.1.ffn_gate_inp.weight");
	REQUIRE(t != NULL);
	const uint64_t toff = t->file_offset;
	pt_gguf_close(gg);
	fp = fopen(f, "r+b");
	REQUIRE(fp);
	const float nan_mark = NAN, junk[4] = { 1, 2, 3, 4 };
	fseek(fp, (long)off, SEEK_SET);
	fwrite(&nan_mark, sizeof nan_mark, 1, fp);
	fseek(fp, (long)toff, SEEK_SET);
	fwrite(junk, sizeof junk, 1, fp);
	fclose(fp);
	CHECK(!same_file(f, g));
	CHECK(reroute(f, 0, &err) == PT_OK);
	CHECK(same_file(f, g));
}

/* deepseek2's presets named after real models carry that model's tokenizer pre (written
 * over the compact vocabulary); the test presets keep the compact vocabulary's qwen2 so
 * their files stay byte-identical. */
PT_TEST(test_mkmodel_deepseek2_preset_pre)
{
	static const char *const cases[][2] = {
		{ "deepseek-v3", "deepseek-v3" }, { "deepseek-r1", "deepseek-v3" },
		{ "kimi-k2", "kimi-k2" }, { "full", "deepseek-llm" },
		{ "deepseek-v2-lite", "deepseek-llm" },
	};
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		REQUIRE(pt_arch_preset(PT_ARCH_DEEPSEEK2, cases[i][0], 0, &hp, &err) == PT_OK);
		REQUIRE(hp.preset_tok_pre != NULL);
		CHECK_EQ_STR(hp.preset_tok_pre, cases[i][1]);
	}
	const char *const plain[] = { "tiny", "small", "tiny-lite" };
	for (size_t i = 0; i < 3; i++) {
		REQUIRE(pt_arch_preset(PT_ARCH_DEEPSEEK2, plain[i], 0, &hp, &err) == PT_OK);
		CHECK(hp.preset_tok_pre == NULL);
	}
	REQUIRE(pt_arch_preset(PT_ARCH_QWEN3MOE, "tiny", 0, &hp, &err) == PT_OK);
	CHECK(hp.preset_tok_pre == NULL);
}
