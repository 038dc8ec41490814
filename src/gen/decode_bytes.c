/* decode_bytes.c - bytes read per decoded token (decode_bytes.h). */
#include "gen/decode_bytes.h"

#include <string.h>

static bool is_name(const struct pt_str *s, const char *name)
{
	const size_t n = strlen(name);
	return s->len == n && memcmp(s->ptr, name, n) == 0;
}

/* A tensor the expert layout owns (a routed expert part), by name. */
static bool is_expert_part(const struct pt_expert_layout *l, const struct pt_str *s)
{
	for (uint32_t i = 0; i < l->n_moe; i++)
		for (uint32_t p = 0; p < l->moe[i].n_parts; p++)
			if (is_name(s, l->moe[i].part[p].name))
				return true;
	return false;
}

/* A tensor of a block the forward pass never computes (blk.N, N >= n_layer: GLM's NextN). */
static bool is_skipped_block(const struct pt_hparams *hp, const struct pt_str *s)
{
	uint64_t n = 0;
	size_t i = 4;
	if (s->len < 6 || memcmp(s->ptr, "blk.", 4) != 0)
		return false;
	for (; i < s->len && s->ptr[i] >= '0' && s->ptr[i] <= '9' && n <= UINT32_MAX; i++)
		n = n * 10 + (uint64_t)(s->ptr[i] - '0');
	return i > 4 && i < s->len && s->ptr[i] == '.' && n >= hp->n_layer;
}

void pt_decode_bytes(const struct pt_model *m, const struct pt_expert_layout *l,
		     enum pt_kv_type kv_type, int64_t n_past, struct pt_decode_bytes *out)
{
	memset(out, 0, sizeof *out);
	const struct pt_hparams *hp = &m->hp;
	const uint64_t n_t = pt_gguf_tensor_count(m->g);
	for (uint64_t i = 0; i < n_t; i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(m->g, i);
		if (is_name(&t->name, "token_embd.weight")) {
			const uint64_t rows = t->n_dims >= 2 && t->ne[1] ? t->ne[1] : 1;
			out->embd_row = t->nbytes / rows;
			if (hp->tied_embeddings)
				out->head = t->nbytes;
		} else if (is_name(&t->name, "output.weight")) {
			out->head = t->nbytes;
		} else if (!is_expert_part(l, &t->name) && !is_skipped_block(hp, &t->name)) {
			out->weights += t->nbytes;
		}
	}
	for (uint32_t i = 0; i < l->n_moe; i++)
		out->experts += (uint64_t)hp->n_expert_used * l->moe[i].expert_bytes;
	const uint64_t attended = n_past < 0 ? 1 : (uint64_t)n_past + 1;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		uint64_t n = attended;
		if (hp->is_swa[il] && hp->n_swa && n > hp->n_swa)
			n = hp->n_swa;
		/* an MLA layer reads its latent rows once (V lives in K) */
		out->kv += n * pt_kv_value_bytes(kv_type, pt_hparams_kv_values(hp, il));
	}
	out->total = out->weights + out->head + out->embd_row + out->experts + out->kv;
}
