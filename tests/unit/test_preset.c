/* test_preset.c - pt_preset_fill (src/model/preset.c): the preset fields every arch's table
 * shares, found by name or alias in a table of a larger entry type and applied to hp. */
#include "test.h"

#include "model/arch_impl.h"

struct wide_preset {
	struct pt_preset_base b;
	uint32_t extra;
};

static const struct wide_preset table[] = {
	{ { "tiny", NULL, 0, 4096, 256, 3, 4, 2, 64, 512, 256, 16, 4 }, 11 },
	{ { "full", "real-name", 1000, 8192, 512, 5, 8, 4, 128, 0, 384, 32, 8 }, 22 },
};

PT_TEST(test_preset_fill_by_name_and_alias)
{
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	const void *entry = NULL;
	pt_hparams_defaults(&hp, PT_ARCH_QWEN3MOE);
	REQUIRE(PT_PRESET_FILL(table, "real-name", "tiny, full", &hp, &entry, &err) == PT_OK);
	REQUIRE(entry == &table[1]);
	CHECK(((const struct wide_preset *)entry)->extra == 22);
	CHECK(hp.n_vocab == 1000 && hp.n_ctx_train == 8192 && hp.n_embd == 512);
	CHECK(hp.n_layer == 5 && hp.n_head == 8);
	CHECK(hp.head_dim_k == 128 && hp.head_dim_v == 128 && hp.n_rot == 128);
	CHECK(hp.n_ff == 0 && hp.n_ff_exp == 384 && hp.n_expert == 32 && hp.n_expert_used == 8);
	for (uint32_t l = 0; l < 5; l++)
		CHECK(hp.n_head_kv[l] == 4);
	CHECK(hp.n_head_kv[5] == 0); /* only the model's layers */
	pt_hparams_defaults(&hp, PT_ARCH_QWEN3MOE);
	REQUIRE(PT_PRESET_FILL(table, "full", "tiny, full", &hp, NULL, &err) == PT_OK);
	CHECK(hp.n_vocab == 1000);
}

PT_TEST(test_preset_fill_keeps_layers_and_refuses_unknown)
{
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	const void *entry = NULL;
	pt_hparams_defaults(&hp, PT_ARCH_QWEN3MOE);
	hp.n_layer = 7; /* --layers */
	REQUIRE(PT_PRESET_FILL(table, "tiny", "tiny, full", &hp, &entry, &err) == PT_OK);
	CHECK(entry == &table[0] && hp.n_layer == 7 && hp.n_head_kv[6] == 2);
	entry = NULL;
	CHECK(PT_PRESET_FILL(table, "Tiny", "tiny, full", &hp, &entry, &err) == PT_E_INVALID);
	CHECK(entry == NULL);
	CHECK(strcmp(err.msg, "unknown preset 'Tiny' (tiny, full)") == 0);
	pt_error_clear(&err);
	/* an alias-less entry never matches a NULL alias */
	CHECK(PT_PRESET_FILL(table, "", "tiny, full", &hp, &entry, &err) == PT_E_INVALID);
}
