/* mix.c - llama.cpp's quantization mixtures (src/llama-quant.cpp, GGUF-AND-QUANTS.md 7):
 * which storage type each tensor gets for f32/f16/bf16/q8_0/q6_k/q4_k_m/q5_k_m/q4_0/iq4_xs/
 * mxfp4, including the attn_v counters, use_more_bits layers, the n_expert == 8 bumps and
 * the row-length fallback. */
#include "model/arch.h"

#include <string.h>
#include <strings.h>

#include "quant/types.h"

static const struct {
	const char *name;
	uint32_t ftype;     /* llama_ftype */
	enum pt_type deflt; /* llama_ftype_get_default_type */
} mixes[PT_MIX_COUNT] = {
	[PT_MIX_F32] = { "f32", 0, PT_TYPE_F32 },
	[PT_MIX_F16] = { "f16", 1, PT_TYPE_F16 },
	[PT_MIX_BF16] = { "bf16", 32, PT_TYPE_BF16 },
	[PT_MIX_Q8_0] = { "q8_0", 7, PT_TYPE_Q8_0 },
	[PT_MIX_Q6_K] = { "q6_k", 18, PT_TYPE_Q6_K },
	[PT_MIX_Q4_K_M] = { "q4_k_m", 15, PT_TYPE_Q4_K },
	[PT_MIX_Q5_K_M] = { "q5_k_m", 17, PT_TYPE_Q5_K },
	[PT_MIX_Q4_0] = { "q4_0", 2, PT_TYPE_Q4_0 },
	[PT_MIX_IQ4_XS] = { "iq4_xs", 30, PT_TYPE_IQ4_XS },
	[PT_MIX_MXFP4] = { "mxfp4", 38, PT_TYPE_MXFP4 },
};

int pt_mix_from_name(const char *name, enum pt_mix *out)
{
	for (int m = 0; name && m < PT_MIX_COUNT; m++)
		if (strcasecmp(name, mixes[m].name) == 0) {
			*out = (enum pt_mix)m;
			return 0;
		}
	return -1;
}

const char *pt_mix_name(enum pt_mix m)
{
	return (unsigned)m < PT_MIX_COUNT ? mixes[m].name : "?";
}

uint32_t pt_mix_file_type(enum pt_mix m)
{
	return (unsigned)m < PT_MIX_COUNT ? mixes[m].ftype : 0;
}

static bool use_more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool is_attn_v_like(enum pt_tensor_cat c)
{
	return c == PT_CAT_ATTN_V || c == PT_CAT_ATTN_QKV;
}

struct mix_state {
	enum pt_mix mix;
	const struct pt_hparams *hp;
	int n_attention_wv;
	int i_attention_wv;
	bool tied;
};

static uint32_t output_type(const struct mix_state *s, const struct pt_tensor_desc *t)
{
	uint32_t def = mixes[s->mix].deflt;
	const struct pt_type_traits *tr = pt_type_traits(def);
	if (s->mix == PT_MIX_MXFP4)
		return PT_TYPE_Q8_0;
	if (t->ne[0] % tr->block_elems != 0)
		return PT_TYPE_Q8_0;
	return def == PT_TYPE_Q8_0 ? PT_TYPE_Q8_0 : PT_TYPE_Q6_K;
}

/* llama_tensor_get_type_impl for the mixtures we write (non-Falcon). */
static uint32_t rule_type(struct mix_state *s, const struct pt_tensor_desc *t)
{
	const struct pt_hparams *hp = s->hp;
	enum pt_mix m = s->mix;
	uint32_t type = mixes[m].deflt;
	int n_layer = (int)hp->n_layer, il = t->layer;
	bool eight = hp->n_expert == 8;
	if (t->cat == PT_CAT_OUTPUT || (s->tied && t->cat == PT_CAT_TOKEN_EMBD))
		return output_type(s, t);
	if (m == PT_MIX_MXFP4)
		return t->n_dims >= 3 && t->ne[2] > 1 ? PT_TYPE_MXFP4 : PT_TYPE_Q8_0;
	if (t->cat == PT_CAT_TOKEN_EMBD)
		return type;
	if (is_attn_v_like(t->cat)) {
		uint32_t gqa = hp->n_head_kv[0] ? hp->n_head / hp->n_head_kv[0] : 0;
		if (m == PT_MIX_IQ4_XS && gqa >= 4)
			type = PT_TYPE_Q5_K;
		else if ((m == PT_MIX_Q4_K_M || m == PT_MIX_Q5_K_M) &&
			 use_more_bits(s->i_attention_wv, s->n_attention_wv))
			type = PT_TYPE_Q6_K;
		if (eight)
			type = PT_TYPE_Q8_0;
		s->i_attention_wv++;
		return type;
	}
	if (t->cat == PT_CAT_ATTN_K)
		return eight ? PT_TYPE_Q8_0 : type;
	if (t->cat == PT_CAT_FFN_DOWN) {
		if (m == PT_MIX_Q4_K_M && use_more_bits(il, n_layer))
			type = PT_TYPE_Q6_K;
		else if (m == PT_MIX_IQ4_XS && il < n_layer / 8)
			type = PT_TYPE_Q5_K; /* no imatrix */
		else if (m == PT_MIX_Q5_K_M && use_more_bits(il, n_layer))
			type = PT_TYPE_Q6_K;
		return type;
	}
	if (t->cat == PT_CAT_ATTN_OUTPUT && eight &&
	    (m == PT_MIX_Q4_K_M || m == PT_MIX_IQ4_XS))
		return PT_TYPE_Q5_K;
	return type;
}

/* tensor_type_fallback: rows that do not fill the type's blocks. */
static uint32_t fallback(uint32_t type, uint64_t ne0)
{
	const struct pt_type_traits *tr = pt_type_traits(type);
	if (!tr || ne0 % tr->block_elems == 0)
		return type;
	switch (type) {
	case PT_TYPE_IQ4_XS: type = PT_TYPE_IQ4_NL; break;
	case PT_TYPE_Q2_K:
	case PT_TYPE_Q3_K: type = PT_TYPE_Q4_0; break;
	case PT_TYPE_Q4_K: type = PT_TYPE_Q5_0; break;
	case PT_TYPE_Q5_K: type = PT_TYPE_Q5_1; break;
	case PT_TYPE_Q6_K: type = PT_TYPE_Q8_0; break;
	default: return PT_TYPE_F16;
	}
	tr = pt_type_traits(type);
	return ne0 % tr->block_elems == 0 ? type : PT_TYPE_F16;
}

void pt_mix_assign(enum pt_mix m, const struct pt_hparams *hp, const struct pt_tensor_list *l,
		   uint32_t *types)
{
	struct mix_state s = { .mix = m, .hp = hp, .tied = true };
	for (uint32_t i = 0; i < l->n; i++) {
		s.n_attention_wv += is_attn_v_like(l->t[i].cat);
		if (l->t[i].cat == PT_CAT_OUTPUT)
			s.tied = false;
	}
	for (uint32_t i = 0; i < l->n; i++) {
		const struct pt_tensor_desc *t = &l->t[i];
		if (t->cat == PT_CAT_NONE || m == PT_MIX_F32) {
			types[i] = PT_TYPE_F32;
			continue;
		}
		if (m == PT_MIX_F16 || m == PT_MIX_BF16) {
			types[i] = mixes[m].deflt;
			continue;
		}
		types[i] = fallback(rule_type(&s, t), t->ne[0]);
	}
}
