/* preset.c - the part of mkmodel's presets every arch shares: finding an entry of an arch's
 * preset table by name or alias and applying the fields every arch has (struct
 * pt_preset_base, arch_impl.h).  What an arch has beyond them stays in its own file. */
#include "model/arch_impl.h"

#include <string.h>

static void apply(const struct pt_preset_base *b, struct pt_hparams *hp)
{
	hp->n_vocab = b->n_vocab;
	hp->n_ctx_train = b->n_ctx;
	hp->n_embd = b->n_embd;
	hp->n_layer = hp->n_layer ? hp->n_layer : b->n_layer;
	hp->n_head = b->n_head;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		hp->n_head_kv[l] = b->n_head_kv;
	hp->head_dim_k = hp->head_dim_v = hp->n_rot = b->head_dim;
	hp->n_ff = b->n_ff;
	hp->n_ff_exp = b->n_ff_exp;
	hp->n_expert = b->n_expert;
	hp->n_expert_used = b->n_used;
}

enum pt_status pt_preset_fill(const void *table, size_t n, size_t size, const char *name,
			      const char *choices, struct pt_hparams *hp, const void **entry,
			      struct pt_error *err)
{
	for (size_t i = 0; i < n; i++) {
		/* the base is each entry's first member, so the entry's address is the base's */
		const struct pt_preset_base *b =
			(const struct pt_preset_base *)((const char *)table + i * size);
		if (strcmp(name, b->name) != 0 && !(b->alias && strcmp(name, b->alias) == 0))
			continue;
		apply(b, hp);
		if (entry)
			*entry = b;
		return PT_OK;
	}
	return pt_error_set(err, PT_E_INVALID, "unknown preset '%s' (%s)", name, choices);
}
