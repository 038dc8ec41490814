/* test_arch.c - architecture descriptions: presets, tensor shapes/counts, loader order and
 * the Q4_K_M mixture tables of GGUF-AND-QUANTS.md 7. */
#include "test.h"

#include "model/arch.h"
#include "quant/types.h"
#include "util/alloc.h"

static uint32_t type_of(const struct pt_tensor_list *l, const uint32_t *types, const char *name)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (strcmp(l->t[i].name, name) == 0)
			return types[i];
	return 9999;
}

static void histogram(const struct pt_tensor_list *l, const uint32_t *types, uint32_t *h)
{
	memset(h, 0, sizeof(uint32_t) * PT_TYPE_COUNT);
	for (uint32_t i = 0; i < l->n; i++)
		h[types[i]]++;
}

PT_TEST(test_arch_names_and_aliases)
{
	enum pt_arch a;
	CHECK(pt_arch_from_name("qwen3moe", &a) == 0 && a == PT_ARCH_QWEN3MOE);
	CHECK(pt_arch_from_name("bailingmoe2", &a) == 0 && a == PT_ARCH_BAILINGMOE2);
	CHECK(pt_arch_from_name("sarvam_moe", &a) == 0 && a == PT_ARCH_BAILINGMOE2);
	CHECK(pt_arch_from_name("gemma4", &a) == 0 && a == PT_ARCH_GEMMA4);
	CHECK(pt_arch_from_name("gemma3", &a) != 0);
	CHECK(pt_arch_from_name(NULL, &a) != 0);
}

PT_TEST(test_arch_presets_validate)
{
	const char *presets[] = { "tiny", "small", "full" };
	for (int a = 0; a < PT_ARCH_COUNT; a++)
		for (int p = 0; p < 3; p++) {
			struct pt_hparams hp;
			struct pt_error err = { 0 };
			CHECK(pt_arch_preset((enum pt_arch)a, presets[p], 0, &hp, &err) == PT_OK);
		}
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	CHECK(pt_arch_preset(PT_ARCH_QWEN3MOE, "huge", 0, &hp, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "huge");
	pt_error_clear(&err);
	REQUIRE(pt_arch_preset(PT_ARCH_QWEN3MOE, "tiny", 0, &hp, &err) == PT_OK);
	hp.n_vocab = 300;
	hp.n_ff_exp = 100; /* not a multiple of 32 */
	CHECK(pt_hparams_validate(&hp, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "expert_feed_forward_length");
}

PT_TEST(test_arch_qwen3moe_full_matches_real_file)
{
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	uint32_t h[PT_TYPE_COUNT];
	REQUIRE(pt_arch_preset(PT_ARCH_QWEN3MOE, "full", 0, &hp, &err) == PT_OK);
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	CHECK_EQ_INT(l.n, 579); /* 3 + 48 * 12 */
	/* loader order: output, output_norm, token_embd, then blk.0 ... blk.47 numerically */
	CHECK_EQ_STR(l.t[0].name, "output.weight");
	CHECK_EQ_STR(l.t[1].name, "output_norm.weight");
	CHECK_EQ_STR(l.t[2].name, "token_embd.weight");
	CHECK_EQ_STR(l.t[3].name, "blk.0.attn_k.weight");
	CHECK_EQ_STR(l.t[l.n - 1].name, "blk.47.ffn_up_exps.weight");
	const struct pt_tensor_desc *d = pt_tensor_list_find(&l, "blk.7.ffn_down_exps.weight");
	REQUIRE(d != NULL);
	CHECK(d->n_dims == 3 && d->ne[0] == 768 && d->ne[1] == 2048 && d->ne[2] == 128);
	CHECK(d->role == PT_ROLE_EXPERT && d->cat == PT_CAT_FFN_DOWN);
	d = pt_tensor_list_find(&l, "blk.0.attn_q.weight");
	CHECK(d && d->ne[0] == 2048 && d->ne[1] == 4096);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	pt_mix_assign(PT_MIX_Q4_K_M, &hp, &l, types);
	histogram(&l, types, h);
	/* GGUF-AND-QUANTS.md 7.3: the real Q4_K_M file has f32 241, q4_K 289, q6_K 49 */
	CHECK_EQ_INT(h[PT_TYPE_F32], 241);
	CHECK_EQ_INT(h[PT_TYPE_Q4_K], 289);
	CHECK_EQ_INT(h[PT_TYPE_Q6_K], 49);
	CHECK_EQ_INT(type_of(&l, types, "output.weight"), PT_TYPE_Q6_K);
	CHECK_EQ_INT(type_of(&l, types, "token_embd.weight"), PT_TYPE_Q4_K);
	CHECK_EQ_INT(type_of(&l, types, "blk.5.attn_v.weight"), PT_TYPE_Q6_K);
	CHECK_EQ_INT(type_of(&l, types, "blk.6.attn_v.weight"), PT_TYPE_Q4_K);
	CHECK_EQ_INT(type_of(&l, types, "blk.8.ffn_down_exps.weight"), PT_TYPE_Q6_K);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_down_exps.weight"), PT_TYPE_Q4_K);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_gate_inp.weight"), PT_TYPE_F32);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.attn_k_norm.weight"), PT_TYPE_F32);
	pt_mix_assign(PT_MIX_Q8_0, &hp, &l, types);
	CHECK_EQ_INT(type_of(&l, types, "output.weight"), PT_TYPE_Q8_0);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_gate_inp.weight"), PT_TYPE_F32);
	pt_mix_assign(PT_MIX_MXFP4, &hp, &l, types);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_up_exps.weight"), PT_TYPE_MXFP4);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.attn_q.weight"), PT_TYPE_Q8_0);
	CHECK_EQ_INT(type_of(&l, types, "output.weight"), PT_TYPE_Q8_0);
	pt_mix_assign(PT_MIX_F16, &hp, &l, types);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_up_exps.weight"), PT_TYPE_F16);
	CHECK_EQ_INT(type_of(&l, types, "blk.9.ffn_gate_inp.weight"), PT_TYPE_F32);
	pt_free(types);
	pt_tensor_list_free(&l);
}

PT_TEST(test_arch_bailingmoe2_full_q4_k_m)
{
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_preset(PT_ARCH_BAILINGMOE2, "full", 0, &hp, &err) == PT_OK);
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	CHECK_EQ_INT(l.n, 264); /* PR description: "bf16, 264 tensors" */
	const struct pt_tensor_desc *d = pt_tensor_list_find(&l, "blk.0.attn_qkv.weight");
	CHECK(d && d->ne[0] == 4096 && d->ne[1] == 4608);
	CHECK(pt_tensor_list_find(&l, "blk.0.ffn_gate_exps.weight") == NULL);
	CHECK(pt_tensor_list_find(&l, "blk.0.ffn_down.weight") != NULL);
	d = pt_tensor_list_find(&l, "blk.1.exp_probs_b.bias");
	CHECK(d && d->n_dims == 1 && d->ne[0] == 128 && d->role == PT_ROLE_ROUTER);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	pt_mix_assign(PT_MIX_Q4_K_M, &hp, &l, types);
	/* use_more_bits(i, 19) = {0,1,4,7,10,13,16,17,18} */
	static const struct { const char *name; uint32_t type; } want[] = {
		{ "output.weight", PT_TYPE_Q6_K },
		{ "token_embd.weight", PT_TYPE_Q4_K },
		{ "blk.0.attn_qkv.weight", PT_TYPE_Q6_K },
		{ "blk.2.attn_qkv.weight", PT_TYPE_Q4_K },
		{ "blk.4.attn_qkv.weight", PT_TYPE_Q6_K },
		{ "blk.0.ffn_down.weight", PT_TYPE_Q6_K },
		{ "blk.0.ffn_gate.weight", PT_TYPE_Q4_K },
		{ "blk.1.ffn_down_exps.weight", PT_TYPE_Q6_K },
		{ "blk.1.ffn_down_shexp.weight", PT_TYPE_Q6_K },
		{ "blk.3.ffn_down_exps.weight", PT_TYPE_Q4_K },
		{ "blk.16.ffn_down_exps.weight", PT_TYPE_Q6_K },
		{ "blk.15.ffn_down_shexp.weight", PT_TYPE_Q4_K },
		{ "blk.3.ffn_up_shexp.weight", PT_TYPE_Q4_K },
		{ "blk.3.attn_output.weight", PT_TYPE_Q4_K },
		{ "blk.3.exp_probs_b.bias", PT_TYPE_F32 },
		{ "blk.3.ffn_gate_inp.weight", PT_TYPE_F32 },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (type_of(&l, types, want[i].name) != want[i].type)
			pt_test_fail(__FILE__, __LINE__, "%s: %s, want %s", want[i].name,
				     pt_type_name(type_of(&l, types, want[i].name)),
				     pt_type_name(want[i].type));
	pt_free(types);
	pt_tensor_list_free(&l);
}

PT_TEST(test_arch_gemma4_full_q4_k_m)
{
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_preset(PT_ARCH_GEMMA4, "full", 0, &hp, &err) == PT_OK);
	CHECK(hp.is_swa[0] && hp.is_swa[4] && !hp.is_swa[5] && !hp.is_swa[29]);
	CHECK_EQ_INT(hp.n_head_kv[5], 2);
	CHECK_EQ_INT(hp.n_head_kv[6], 8);
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	CHECK(pt_tensor_list_find(&l, "output.weight") == NULL);
	CHECK(pt_tensor_list_find(&l, "blk.5.attn_v.weight") == NULL);
	const struct pt_tensor_desc *d = pt_tensor_list_find(&l, "blk.5.attn_q.weight");
	CHECK(d && d->ne[0] == 2816 && d->ne[1] == 8192);
	d = pt_tensor_list_find(&l, "blk.4.attn_k.weight");
	CHECK(d && d->ne[1] == 2048);
	d = pt_tensor_list_find(&l, "blk.5.attn_k_norm.weight");
	CHECK(d && d->ne[0] == 512);
	d = pt_tensor_list_find(&l, "blk.0.ffn_gate_up_exps.weight");
	CHECK(d && d->ne[0] == 2816 && d->ne[1] == 1408 && d->ne[2] == 128);
	d = pt_tensor_list_find(&l, "blk.0.ffn_down_exps.scale");
	CHECK(d && d->role == PT_ROLE_EXPERT_SCALE && d->ne[0] == 128);
	d = pt_tensor_list_find(&l, "rope_freqs.weight");
	CHECK(d && d->ne[0] == 256);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	pt_mix_assign(PT_MIX_Q4_K_M, &hp, &l, types);
	/* 25 attn_v (sliding layers only); use_more_bits(i_wv, 25) = {0,1,2,5,8,...,20,21..24}.
	 * Layer 6 holds the 6th attn_v (i_wv 5), layer 7 the 7th. */
	static const struct { const char *name; uint32_t type; } want[] = {
		{ "token_embd.weight", PT_TYPE_Q6_K },   /* tied: treated as output */
		{ "blk.0.attn_v.weight", PT_TYPE_Q6_K },
		{ "blk.4.attn_v.weight", PT_TYPE_Q4_K },
		{ "blk.6.attn_v.weight", PT_TYPE_Q6_K },
		{ "blk.7.attn_v.weight", PT_TYPE_Q4_K },
		{ "blk.5.attn_k.weight", PT_TYPE_Q4_K },
		{ "blk.0.ffn_down.weight", PT_TYPE_Q8_0 },      /* 2112: Q6_K -> Q8_0 */
		{ "blk.4.ffn_down.weight", PT_TYPE_Q5_0 },      /* Q4_K -> Q5_0 */
		{ "blk.0.ffn_down_exps.weight", PT_TYPE_Q8_0 }, /* 704 */
		{ "blk.4.ffn_down_exps.weight", PT_TYPE_Q5_0 },
		{ "blk.4.ffn_gate_up_exps.weight", PT_TYPE_Q4_K },
		{ "blk.4.ffn_gate_inp.scale", PT_TYPE_F32 },
		{ "blk.4.layer_output_scale.weight", PT_TYPE_F32 },
		{ "rope_freqs.weight", PT_TYPE_F32 },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (type_of(&l, types, want[i].name) != want[i].type)
			pt_test_fail(__FILE__, __LINE__, "%s: %s, want %s", want[i].name,
				     pt_type_name(type_of(&l, types, want[i].name)),
				     pt_type_name(want[i].type));
	pt_free(types);
	pt_tensor_list_free(&l);
}

PT_TEST(test_arch_tiny_presets_exercise_features)
{
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_preset(PT_ARCH_GEMMA4, "tiny", 0, &hp, &err) == PT_OK);
	hp.n_vocab = 512;
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	bool swa = false, full = false;
	for (uint32_t i = 0; i < hp.n_layer; i++)
		*(hp.is_swa[i] ? &swa : &full) = true;
	CHECK(swa && full);
	CHECK(hp.n_swa > 0 && hp.n_swa < 16);
	CHECK(hp.final_logit_softcap > 0);
	pt_tensor_list_free(&l);
	REQUIRE(pt_arch_preset(PT_ARCH_BAILINGMOE2, "tiny", 0, &hp, &err) == PT_OK);
	CHECK(hp.n_layer_dense_lead == 1 && hp.n_expert_shared == 1 && hp.has_exp_probs_b);
	CHECK(hp.n_expert != 8); /* 8 experts would trigger the Mixtral bumps */
	REQUIRE(pt_arch_preset(PT_ARCH_GEMMA4, "small", 13, &hp, &err) == PT_OK);
	CHECK_EQ_INT(hp.n_layer, 13);
	CHECK(!hp.is_swa[11] && hp.is_swa[12] && hp.n_head_kv[12] == hp.n_head_kv[0]);
	CHECK(pt_arch_preset(PT_ARCH_BAILINGMOE2, "tiny", 1, &hp, &err) == PT_E_INVALID);
}

/* ---- Q3_K_M / Q3_K_L / Q2_K (llama_tensor_get_type_impl, non-Falcon, no imatrix) ---- */

struct want_type {
	enum pt_mix mix;
	const char *name;
	uint32_t type;
};

/* Assigns each listed mixture on the arch's full preset and checks the listed tensors. */
static void check_mix_types(enum pt_arch arch, const struct want_type *want, size_t n)
{
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_preset(arch, "full", 0, &hp, &err) == PT_OK);
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	for (size_t i = 0; i < n; i++) {
		pt_mix_assign(want[i].mix, &hp, &l, types);
		uint32_t got = type_of(&l, types, want[i].name);
		if (got != want[i].type)
			pt_test_fail(__FILE__, __LINE__, "%s %s: %s, want %s",
				     pt_mix_name(want[i].mix), want[i].name,
				     got < PT_TYPE_COUNT ? pt_type_name(got) : "missing",
				     pt_type_name(want[i].type));
	}
	pt_free(types);
	pt_tensor_list_free(&l);
}

PT_TEST(test_arch_low_bit_mix_names)
{
	static const struct { const char *name; enum pt_mix mix; uint32_t ftype; } t[] = {
		{ "q3_k_m", PT_MIX_Q3_K_M, 12 },
		{ "Q3_K_L", PT_MIX_Q3_K_L, 13 },
		{ "q2_k", PT_MIX_Q2_K, 10 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		enum pt_mix m = PT_MIX_F32;
		CHECK(pt_mix_from_name(t[i].name, &m) == 0);
		CHECK_EQ_INT(m, t[i].mix);
		CHECK_EQ_INT(pt_mix_file_type(m), t[i].ftype);
	}
	enum pt_mix m;
	CHECK(pt_mix_from_name("q3_k", &m) != 0); /* Q3_K_S is not written */
	CHECK_EQ_STR(pt_mix_name(PT_MIX_Q2_K), "q2_k");
}

PT_TEST(test_arch_qwen3moe_low_bit_mixes)
{
	/* 48 layers, GQA 32/4 = 8; Q3_K_M: attn_v Q5_K for the first two, ffn_down Q5_K for
	 * layers < 48/16 = 3. */
	static const struct want_type want[] = {
		{ PT_MIX_Q3_K_M, "output.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q3_K_M, "token_embd.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.0.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.1.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.2.attn_v.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.47.attn_v.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.2.ffn_down_exps.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.3.ffn_down_exps.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.47.ffn_down_exps.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.5.attn_output.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.5.attn_q.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.attn_k.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.ffn_gate_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.ffn_up_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.ffn_gate_inp.weight", PT_TYPE_F32 },
		{ PT_MIX_Q3_K_L, "output.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q3_K_L, "token_embd.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_L, "blk.9.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.9.ffn_down_exps.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.9.attn_output.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.9.attn_q.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_L, "blk.9.ffn_up_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "output.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q2_K, "token_embd.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.9.attn_v.weight", PT_TYPE_Q4_K }, /* n_gqa 8 >= 4 */
		{ PT_MIX_Q2_K, "blk.9.ffn_down_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.9.attn_output.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.9.attn_q.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.9.attn_k.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.9.ffn_gate_exps.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.9.attn_q_norm.weight", PT_TYPE_F32 },
	};
	check_mix_types(PT_ARCH_QWEN3MOE, want, sizeof want / sizeof want[0]);

	/* Whole-file counts for Q3_K_M: 241 F32, output Q6_K, 2 attn_v + 3 ffn_down Q5_K,
	 * 46 attn_v + 45 ffn_down + 48 attn_output Q4_K, token_embd + 4 per layer Q3_K. */
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	uint32_t h[PT_TYPE_COUNT];
	REQUIRE(pt_arch_preset(PT_ARCH_QWEN3MOE, "full", 0, &hp, &err) == PT_OK);
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	pt_mix_assign(PT_MIX_Q3_K_M, &hp, &l, types);
	histogram(&l, types, h);
	CHECK_EQ_INT(h[PT_TYPE_F32], 241);
	CHECK_EQ_INT(h[PT_TYPE_Q6_K], 1);
	CHECK_EQ_INT(h[PT_TYPE_Q5_K], 5);
	CHECK_EQ_INT(h[PT_TYPE_Q4_K], 139);
	CHECK_EQ_INT(h[PT_TYPE_Q3_K], 193);
	pt_free(types);
	pt_tensor_list_free(&l);
}

PT_TEST(test_arch_bailingmoe2_low_bit_mixes)
{
	/* 19 layers (layer 0 dense), fused attn_qkv counts as attn_v; GQA 32/2 = 16;
	 * Q3_K_M ffn_down Q5_K only for layer < 19/16 = 1. */
	static const struct want_type want[] = {
		{ PT_MIX_Q3_K_M, "output.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q3_K_M, "token_embd.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.0.attn_qkv.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.1.attn_qkv.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.2.attn_qkv.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.0.ffn_down.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.0.ffn_gate.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.1.ffn_down_exps.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.1.ffn_down_shexp.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.1.ffn_up_shexp.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.1.ffn_gate_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.3.attn_output.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.3.exp_probs_b.bias", PT_TYPE_F32 },
		{ PT_MIX_Q3_K_L, "blk.7.attn_qkv.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_down_exps.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_down_shexp.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.attn_output.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_up_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "output.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q2_K, "token_embd.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.7.attn_qkv.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q2_K, "blk.7.ffn_down_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.0.ffn_down.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.7.attn_output.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.7.ffn_gate_exps.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.7.ffn_gate_inp.weight", PT_TYPE_F32 },
	};
	check_mix_types(PT_ARCH_BAILINGMOE2, want, sizeof want / sizeof want[0]);
}

PT_TEST(test_arch_gemma4_low_bit_mixes)
{
	/* Tied embeddings (treated as output), 25 attn_v (sliding layers), GQA 16/8 = 2 < 4,
	 * ffn_down rows of 2112 and ffn_down_exps rows of 704 (not multiples of 256):
	 * Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1. */
	static const struct want_type want[] = {
		{ PT_MIX_Q3_K_M, "token_embd.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q3_K_M, "blk.0.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.1.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, "blk.2.attn_v.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.0.ffn_down.weight", PT_TYPE_Q5_1 },
		{ PT_MIX_Q3_K_M, "blk.0.ffn_down_exps.weight", PT_TYPE_Q5_1 },
		{ PT_MIX_Q3_K_M, "blk.4.ffn_down.weight", PT_TYPE_Q5_0 },
		{ PT_MIX_Q3_K_M, "blk.4.ffn_down_exps.weight", PT_TYPE_Q5_0 },
		{ PT_MIX_Q3_K_M, "blk.4.ffn_gate_up_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.attn_q.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q3_K_M, "blk.5.attn_output.weight", PT_TYPE_Q4_K },
		{ PT_MIX_Q3_K_M, "blk.4.ffn_gate_inp.scale", PT_TYPE_F32 },
		{ PT_MIX_Q3_K_L, "token_embd.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q3_K_L, "blk.7.attn_v.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_down.weight", PT_TYPE_Q5_1 },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_down_exps.weight", PT_TYPE_Q5_1 },
		{ PT_MIX_Q3_K_L, "blk.7.attn_output.weight", PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, "blk.7.ffn_gate_up_exps.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "token_embd.weight", PT_TYPE_Q6_K },
		{ PT_MIX_Q2_K, "blk.7.attn_v.weight", PT_TYPE_Q3_K }, /* n_gqa 2 < 4 */
		{ PT_MIX_Q2_K, "blk.7.ffn_down.weight", PT_TYPE_Q4_0 },
		{ PT_MIX_Q2_K, "blk.7.ffn_down_exps.weight", PT_TYPE_Q4_0 },
		{ PT_MIX_Q2_K, "blk.7.attn_output.weight", PT_TYPE_Q3_K },
		{ PT_MIX_Q2_K, "blk.7.attn_q.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.7.attn_k.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "blk.7.ffn_gate_up_exps.weight", PT_TYPE_Q2_K },
		{ PT_MIX_Q2_K, "rope_freqs.weight", PT_TYPE_F32 },
	};
	check_mix_types(PT_ARCH_GEMMA4, want, sizeof want / sizeof want[0]);
}

PT_TEST(test_arch_low_bit_mixes_eight_experts)
{
	/* n_expert == 8 (Mixtral-style): attn_v and attn_k Q8_0 in every mixture; attn_output
	 * Q5_K for Q2_K and Q3_K_M but unchanged (default Q3_K) for Q3_K_L. */
	struct pt_hparams hp;
	struct pt_tensor_list l;
	struct pt_error err = { 0 };
	REQUIRE(pt_arch_preset(PT_ARCH_QWEN3MOE, "tiny", 0, &hp, &err) == PT_OK);
	hp.n_expert = 8;
	hp.n_expert_used = 2;
	REQUIRE(pt_arch_tensors(&hp, &l, &err) == PT_OK);
	uint32_t *types = pt_mallocn(l.n, sizeof *types);
	REQUIRE(types != NULL);
	static const struct { enum pt_mix mix; uint32_t attn_output; } t[] = {
		{ PT_MIX_Q2_K, PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_M, PT_TYPE_Q5_K },
		{ PT_MIX_Q3_K_L, PT_TYPE_Q3_K },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		pt_mix_assign(t[i].mix, &hp, &l, types);
		CHECK_EQ_INT(type_of(&l, types, "blk.0.attn_v.weight"), PT_TYPE_Q8_0);
		CHECK_EQ_INT(type_of(&l, types, "blk.1.attn_k.weight"), PT_TYPE_Q8_0);
		CHECK_EQ_INT(type_of(&l, types, "blk.1.attn_output.weight"), t[i].attn_output);
	}
	pt_free(types);
	pt_tensor_list_free(&l);
}
