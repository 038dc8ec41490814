/* test_route_keys.c - pt_arch_read_route_keys (src/model/route_keys.c): the routing keys the
 * glm4moe, bailingmoe2 and gemma4 descriptions read through one helper, with each arch's
 * default or requirement for expert_gating_func. */
#include "test.h"

#include "gguf_builder.h"
#include "model/arch_impl.h"

/* A metadata-only GGUF with the keys PREFIX.expert_feed_forward_length / expert_shared_count
 * and, when gating >= 0, expert_gating_func. */
static pt_gguf *keys_file(struct gb *b, const char *prefix, int gating)
{
	char k[96];
	memset(b, 0, sizeof *b);
	gb_header(b, 3, 0, gating >= 0 ? 3 : 2);
	snprintf(k, sizeof k, "%s.expert_feed_forward_length", prefix);
	gb_kv_u32(b, k, 256);
	snprintf(k, sizeof k, "%s.expert_shared_count", prefix);
	gb_kv_u32(b, k, 1);
	if (gating >= 0) {
		snprintf(k, sizeof k, "%s.expert_gating_func", prefix);
		gb_kv_u32(b, k, (uint32_t)gating);
	}
	gb_pad(b, 32);
	pt_gguf *g = NULL;
	struct pt_error err = { 0 };
	if (pt_gguf_open_memory(b->p, b->n, &g, &err) != PT_OK)
		return NULL;
	return g;
}

static enum pt_status read_keys(enum pt_arch arch, int gating, enum pt_gating def,
				struct pt_hparams *hp, struct pt_error *err)
{
	struct gb b;
	pt_hparams_defaults(hp, arch);
	pt_gguf *g = keys_file(&b, pt_arch_name(arch), gating);
	enum pt_status st = g ? pt_arch_read_route_keys(g, hp, def, err) : PT_E_FORMAT;
	pt_gguf_close(g);
	gb_free(&b);
	return st;
}

PT_TEST(test_route_keys_defaults_and_requirements)
{
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	/* glm4moe: absent expert_gating_func means sigmoid (llama.cpp's default for the arch) */
	REQUIRE(read_keys(PT_ARCH_GLM4MOE, -1, PT_GATING_SIGMOID, &hp, &err) == PT_OK);
	CHECK(hp.gating == PT_GATING_SIGMOID);
	CHECK(hp.n_ff_exp == 256 && hp.n_expert_shared == 1);
	/* ... and 0 too; softmax stays softmax */
	CHECK(read_keys(PT_ARCH_GLM4MOE, 0, PT_GATING_SIGMOID, &hp, &err) == PT_OK &&
	      hp.gating == PT_GATING_SIGMOID);
	CHECK(read_keys(PT_ARCH_GLM4MOE, 1, PT_GATING_SIGMOID, &hp, &err) == PT_OK &&
	      hp.gating == PT_GATING_SOFTMAX);
	/* bailingmoe2: the key is required, 0 is refused */
	CHECK(read_keys(PT_ARCH_BAILINGMOE2, -1, PT_GATING_NONE, &hp, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "bailingmoe2.expert_gating_func");
	pt_error_clear(&err);
	CHECK(read_keys(PT_ARCH_BAILINGMOE2, 0, PT_GATING_NONE, &hp, &err) == PT_E_UNSUPPORTED);
	pt_error_clear(&err);
	CHECK(read_keys(PT_ARCH_BAILINGMOE2, 2, PT_GATING_NONE, &hp, &err) == PT_OK &&
	      hp.gating == PT_GATING_SIGMOID);
	/* a gating function the forward pass lacks (softmax_weight) is refused by name */
	CHECK(read_keys(PT_ARCH_GLM4MOE, 3, PT_GATING_SIGMOID, &hp, &err) == PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "glm4moe.expert_gating_func = 3");
	pt_error_clear(&err);
	/* gemma4's recipe fixes the routing: no key is read, even the required ones */
	REQUIRE(read_keys(PT_ARCH_GEMMA4, -1, PT_GATING_SOFTMAX, &hp, &err) == PT_OK);
	CHECK(hp.gating == PT_GATING_SOFTMAX && hp.expert_weights_norm);
	CHECK(hp.n_ff_exp == 0);
}
