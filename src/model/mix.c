/* mix.c - llama.cpp's quantization mixtures (src/llama-quant.cpp, GGUF-AND-QUANTS.md 7):
 * which storage type each tensor gets for f32/f16/bf16/q8_0/q6_k/q4_k_m/q5_k_m/q4_0/iq4_xs/
 * mxfp4/q3_k_m/q3_k_l/q2_k, including the attn_v counters, use_more_bits layers, the n_expert == 8 bumps and
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
	[PT_MIX_Q3_K_M] = { "q3_k_m", 12, PT_TYPE_Q3_K },
	[PT_MIX_Q3_K_L] = { "q3_k_l", 13, PT_TYPE_Q3_K },
	[PT_MIX_Q2_K] = { "q2_k", 10, PT_TYPE_Q2_K },
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

/* attn_v-like tensors (attn_v, fused attn_qkv), before the n_expert == 8 bump. */
static uint32_t attn_v_type(const struct mix_state *s, uint32_t type)
{
	const struct pt_hparams *hp = s->hp;
	uint32_t gqa = hp->n_head_kv[0] ? hp->n_head / hp->n_head_kv[0] : 0;
	switch (s->mix) {
	case PT_MIX_Q2_K: return gqa >= 4 ? PT_TYPE_Q4_K : PT_TYPE_Q3_K;
	case PT_MIX_Q3_K_M: return s->i_attention_wv < 2 ? PT_TYPE_Q5_K : PT_TYPE_Q4_K;
	case PT_MIX_Q3_K_L: return PT_TYPE_Q5_K;
	case PT_MIX_IQ4_XS: return gqa >= 4 ? PT_TYPE_Q5_K : type;
	case PT_MIX_Q4_K_M:
	case PT_MIX_Q5_K_M:
		return use_more_bits(s->i_attention_wv, s->n_attention_wv) ? PT_TYPE_Q6_K : type;
	default: return type;
	}
}

/* ffn_down (dense, _exps, _shexp) at layer il of n (non-Falcon rules). */
static uint32_t ffn_down_type(enum pt_mix m, int il, int n, uint32_t type)
{
	switch (m) {
	case PT_MIX_Q2_K: return PT_TYPE_Q3_K;
	case PT_MIX_Q3_K_M: return il < n / 16 ? PT_TYPE_Q5_K : PT_TYPE_Q4_K;
	case PT_MIX_Q3_K_L: return PT_TYPE_Q5_K;
	case PT_MIX_Q4_K_M:
	case PT_MIX_Q5_K_M: return use_more_bits(il, n) ? PT_TYPE_Q6_K : type;
	case PT_MIX_IQ4_XS: return il < n / 8 ? PT_TYPE_Q5_K : type; /* no imatrix */
	default: return type;
	}
}

/* attn_output: the n_expert == 8 list bumps to Q5_K (Q3_K_L is not on it). */
static uint32_t attn_output_type(enum pt_mix m, bool eight, uint32_t type)
{
	if (eight) {
		bool bump = m == PT_MIX_Q4_K_M || m == PT_MIX_IQ4_XS || m == PT_MIX_Q2_K ||
			    m == PT_MIX_Q3_K_M;
		return bump ? PT_TYPE_Q5_K : type;
	}
	switch (m) {
	case PT_MIX_Q2_K: return PT_TYPE_Q3_K;
	case PT_MIX_Q3_K_M: return PT_TYPE_Q4_K;
	case PT_MIX_Q3_K_L: return PT_TYPE_Q5_K;
	default: return type;
	}
}

/* llama_tensor_get_type_impl for the mixtures we write (non-Falcon). */
static uint32_t rule_type(struct mix_state *s, const struct pt_tensor_desc *t)
{
	const struct pt_hparams *hp = s->hp;
	enum pt_mix m = s->mix;
	uint32_t type = mixes[m].deflt;
	bool eight = hp->n_expert == 8;
	if (t->cat == PT_CAT_OUTPUT || (s->tied && t->cat == PT_CAT_TOKEN_EMBD))
		return output_type(s, t);
	if (m == PT_MIX_MXFP4)
		return t->n_dims >= 3 && t->ne[2] > 1 ? PT_TYPE_MXFP4 : PT_TYPE_Q8_0;
	if (t->cat == PT_CAT_TOKEN_EMBD)
		return type;
	if (is_attn_v_like(t->cat)) {
		type = eight ? PT_TYPE_Q8_0 : attn_v_type(s, type);
		s->i_attention_wv++;
		return type;
	}
	if (t->cat == PT_CAT_ATTN_K)
		return eight ? PT_TYPE_Q8_0 : type;
	if (t->cat == PT_CAT_FFN_DOWN)
		return ffn_down_type(m, t->layer, (int)hp->n_layer, type);
	if (t->cat == PT_CAT_ATTN_OUTPUT)
		return attn_output_type(m, eight, type);
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
