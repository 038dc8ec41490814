/* test_gen_decode_bytes.c - the bytes one decoded token reads (gen/decode_bytes.h), checked
 * against sums taken straight from the tiny models' tensor table and hyper-parameters, and
 * the memory-bandwidth probe (kern/membw.h). */
#include <string.h>

#include "expert/layout.h"
#include "gen/decode_bytes.h"
#include "kern/kern_internal.h"
#include "kern/membw.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

static struct pt_model *tiny(enum pt_arch arch, const char *file)
{
	const char *path = pt_test_tmpfile(file);
	struct pt_mkmodel_opts o = { .arch = arch, .preset = "tiny", .mix = PT_MIX_Q4_K_M,
				     .seed = 5, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	struct pt_model *m = NULL;
	if (pt_mkmodel_write(&o, &err) != PT_OK || pt_model_open(path, &m, &err) != PT_OK)
		return NULL;
	return m;
}

static bool is(const struct pt_gguf_tensor *t, const char *s)
{
	return t->name.len == strlen(s) && !memcmp(t->name.ptr, s, t->name.len);
}

static bool has(const struct pt_gguf_tensor *t, const char *s)
{
	char name[128];
	const size_t n = t->name.len < sizeof name - 1 ? t->name.len : sizeof name - 1;
	memcpy(name, t->name.ptr, n);
	name[n] = 0;
	return strstr(name, s) != NULL;
}

/* Independent sums: every tensor's bytes split by name; experts = k / n_expert of each
 * *_exps* tensor; KV from the hyper-parameters by hand. */
static void check_model(struct pt_model *m, int64_t n_past)
{
	struct pt_expert_layout l;
	struct pt_error err = { 0 };
	REQUIRE(pt_expert_layout_from_gguf(m->g, &l, &err) == PT_OK);
	const struct pt_hparams *hp = &m->hp;
	uint64_t all = 0, exps = 0, embd = 0, out = 0, embd_rows = 0;
	for (uint64_t i = 0; i < pt_gguf_tensor_count(m->g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(m->g, i);
		all += t->nbytes;
		if (has(t, "_exps") && t->n_dims == 3) {
			CHECK_EQ_INT(t->ne[2], hp->n_expert);
			exps += t->nbytes / hp->n_expert * hp->n_expert_used;
		} else if (is(t, "token_embd.weight")) {
			embd = t->nbytes;
			embd_rows = t->ne[1];
		} else if (is(t, "output.weight")) {
			out = t->nbytes;
		}
	}
	uint64_t exps_all = 0; /* the whole expert tensors, to take them out of `all` */
	for (uint64_t i = 0; i < pt_gguf_tensor_count(m->g); i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(m->g, i);
		if (has(t, "_exps") && t->n_dims == 3)
			exps_all += t->nbytes;
	}
	uint64_t kv = 0;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		uint64_t n = (uint64_t)n_past + 1;
		if (hp->is_swa[il] && n > hp->n_swa)
			n = hp->n_swa;
		kv += n * hp->n_head_kv[il] *
		      (pt_hparams_head_dim_k(hp, il) + pt_hparams_head_dim_v(hp, il)) * 2;
	}
	struct pt_decode_bytes d;
	pt_decode_bytes(m, &l, PT_KV_F16, n_past, &d);
	CHECK_EQ_INT(d.experts, exps);
	CHECK_EQ_INT(d.embd_row, embd / embd_rows);
	CHECK_EQ_INT(d.head, (hp->tied_embeddings ? embd : out));
	CHECK_EQ_INT(d.weights, all - exps_all - embd - out);
	CHECK_EQ_INT(d.kv, kv);
	CHECK_EQ_INT(d.total, d.weights + d.head + d.embd_row + d.experts + d.kv);
	CHECK(d.experts > 0 && d.weights > 0 && d.head > 0 && d.kv > 0);
	/* an F32 cache reads twice the KV bytes; one more position adds one row per layer */
	struct pt_decode_bytes d32, d1;
	pt_decode_bytes(m, &l, PT_KV_F32, n_past, &d32);
	CHECK_EQ_INT(d32.kv, 2 * d.kv);
	CHECK_EQ_INT(d32.total - d32.kv, d.total - d.kv);
	pt_decode_bytes(m, &l, PT_KV_F16, n_past + 1, &d1);
	CHECK(d1.kv > d.kv);
	pt_expert_layout_free(&l);
}

PT_TEST(test_gen_decode_bytes_qwen3moe)
{
	struct pt_model *m = tiny(PT_ARCH_QWEN3MOE, "db-qwen3moe.gguf");
	REQUIRE(m);
	check_model(m, 0);
	check_model(m, 100);
	/* hand check of the KV term: qwen3moe has no sliding layers, so (n_past + 1) rows */
	struct pt_expert_layout l;
	struct pt_error err = { 0 };
	REQUIRE(pt_expert_layout_from_gguf(m->g, &l, &err) == PT_OK);
	struct pt_decode_bytes a, b;
	pt_decode_bytes(m, &l, PT_KV_F16, 9, &a);
	pt_decode_bytes(m, &l, PT_KV_F16, 19, &b);
	CHECK_EQ_INT(b.kv, 2 * a.kv);
	pt_expert_layout_free(&l);
	pt_model_close(m);
}

/* gemma4: sliding layers attend to at most the window, so far past it only the full layers
 * grow. */
PT_TEST(test_gen_decode_bytes_gemma4_window)
{
	struct pt_model *m = tiny(PT_ARCH_GEMMA4, "db-gemma4.gguf");
	REQUIRE(m);
	REQUIRE(m->hp.n_swa > 0);
	const int64_t far = (int64_t)m->hp.n_swa * 4;
	check_model(m, far);
	check_model(m, 3);
	pt_model_close(m);
}

PT_TEST(test_gen_decode_bytes_bailingmoe2)
{
	struct pt_model *m = tiny(PT_ARCH_BAILINGMOE2, "db-bailing.gguf");
	REQUIRE(m);
	check_model(m, 31);
	pt_model_close(m);
}

/* The probe reads what it says and refuses bad arguments. */
PT_TEST(test_kern_membw_probe)
{
	struct pt_membw_result r;
	struct pt_error err = { 0 };
	REQUIRE(pt_membw_probe(8u << 20, 2, 3, &r, &err) == PT_OK);
	CHECK_EQ_INT(r.bytes, 8u << 20);
	CHECK_EQ_INT(r.passes, 3);
	CHECK(r.best_bps > 0 && r.median_bps > 0 && r.best_bps >= r.median_bps);
	/* every pass sums the same buffer: the checksum is (passes + 1) x one pass's sum */
	uint64_t one = 0;
	for (uint64_t i = 0; i < (8u << 20) / 8; i++)
		one += i * 0x9E3779B97F4A7C15ull;
	CHECK(r.checksum == one * 4);
	CHECK(pt_membw_probe(1u << 20, 0, 3, &r, &err) == PT_E_INVALID);
	CHECK(pt_membw_probe(1u << 20, 1, 0, &r, &err) == PT_E_INVALID);
}

/* Every read loop of the probe sums every word: lengths of 1..40 lines, so the unrolled
 * bodies and their tails are all exercised, at an odd line offset. */
PT_TEST(test_kern_membw_readers_sum_every_word)
{
	enum { LINES = 41 };
	uint64_t *buf = pt_mallocn(LINES * 8 + 8, sizeof(uint64_t));
	REQUIRE(buf);
	uint64_t *p = (uint64_t *)(((uintptr_t)buf + 63) & ~(uintptr_t)63) + 8;
	for (size_t i = 0; i < (LINES - 1) * 8; i++)
		p[i] = i * 0x9E3779B97F4A7C15ull + 1;
	for (size_t lines = 1; lines < LINES; lines++) {
		uint64_t want = 0;
		for (size_t i = 0; i < lines * 8; i++)
			want += p[i];
		CHECK(pt_membw_sum_generic(p, lines * 64) == want);
#if defined(PT_KERN_X86)
		if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX2)
			CHECK(pt_membw_sum_avx2(p, lines * 64) == want);
		if (pt_kern_level_max() >= PT_KERN_LEVEL_AVX512)
			CHECK(pt_membw_sum_avx512(p, lines * 64) == want);
#endif
	}
	pt_free(buf);
}
