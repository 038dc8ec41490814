/* arch.c - the arch table, hyper-parameter defaults / validation / GGUF keys, tensor lists
 * in llama.cpp's loader order, and llama-quant's mixture rules (GGUF-AND-QUANTS.md 7.2).
 * Per-arch specifics live in qwen3moe.c, bailingmoe2.c and gemma4.c. */
#include "model/arch_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/types.h"
#include "util/alloc.h"

static const struct pt_arch_ops *const arch_ops[PT_ARCH_COUNT] = {
	[PT_ARCH_QWEN3MOE] = &pt_arch_qwen3moe_ops,
	[PT_ARCH_BAILINGMOE2] = &pt_arch_bailingmoe2_ops,
	[PT_ARCH_GEMMA4] = &pt_arch_gemma4_ops,
	[PT_ARCH_GLM4MOE] = &pt_arch_glm4moe_ops,
	[PT_ARCH_QWEN35MOE] = &pt_arch_qwen35moe_ops,
	[PT_ARCH_DEEPSEEK2] = &pt_arch_deepseek2_ops,
	[PT_ARCH_GPTOSS] = &pt_arch_gptoss_ops,
};

const char *pt_arch_name(enum pt_arch a)
{
	return (unsigned)a < PT_ARCH_COUNT ? arch_ops[a]->name : "?";
}

const struct pt_arch_recipe *pt_arch_recipe(enum pt_arch a)
{
	return &arch_ops[(unsigned)a < PT_ARCH_COUNT ? a : 0]->recipe;
}

enum pt_mix pt_arch_default_mix(enum pt_arch a)
{
	return (unsigned)a < PT_ARCH_COUNT && arch_ops[a]->mix_mxfp4 ? PT_MIX_MXFP4 : PT_MIX_Q4_K_M;
}

int pt_arch_from_name(const char *name, enum pt_arch *out)
{
	if (!name)
		return -1;
	for (int a = 0; a < PT_ARCH_COUNT; a++)
		if (strcmp(name, arch_ops[a]->name) == 0) {
			*out = (enum pt_arch)a;
			return 0;
		}
	/* The PR-branch arch string and, defensively, the pre-tokenizer spelling (1.0). */
	if (strcmp(name, "sarvam_moe") == 0 || strcmp(name, "sarvam-moe") == 0) {
		*out = PT_ARCH_BAILINGMOE2;
		return 0;
	}
	return -1;
}

void pt_hparams_defaults(struct pt_hparams *hp, enum pt_arch arch)
{
	memset(hp, 0, sizeof *hp);
	hp->arch = arch;
	snprintf(hp->arch_name, sizeof hp->arch_name, "%s", pt_arch_name(arch));
	hp->rope_freq_base = 10000.0f;
	hp->rope_freq_base_swa = 10000.0f;
	hp->n_expert_groups = 0;
	hp->n_group_used = 0;
	hp->gating = PT_GATING_NONE;
	hp->expert_weights_scale = 0.0f;
	/* llama-hparams.h default; only gemma4 reads the key. */
	hp->final_logit_softcap = arch == PT_ARCH_GEMMA4 ? 30.0f : 0.0f;
}

enum pt_status pt_arch_preset(enum pt_arch arch, const char *preset, uint32_t n_layer,
			      struct pt_hparams *hp, struct pt_error *err)
{
	if ((unsigned)arch >= PT_ARCH_COUNT)
		return pt_error_set(err, PT_E_INVALID, "unknown architecture %d", (int)arch);
	if (n_layer > PT_ARCH_MAX_LAYERS)
		return pt_error_set(err, PT_E_INVALID, "%u layers exceed the limit of %u", n_layer,
				    PT_ARCH_MAX_LAYERS);
	pt_hparams_defaults(hp, arch);
	hp->n_layer = n_layer;
	enum pt_status st = arch_ops[arch]->preset(preset, hp, err);
	if (st != PT_OK || hp->n_vocab != 0)
		return st != PT_OK ? st : pt_hparams_validate(hp, err);
	/* n_vocab 0 = the compact vocabulary, sized later by its builder. */
	hp->n_vocab = 2;
	st = pt_hparams_validate(hp, err);
	hp->n_vocab = 0;
	return st;
}

uint32_t pt_hparams_head_dim_k(const struct pt_hparams *hp, uint32_t layer)
{
	return hp->is_swa[layer] && hp->head_dim_k_swa ? hp->head_dim_k_swa : hp->head_dim_k;
}

uint32_t pt_hparams_head_dim_v(const struct pt_hparams *hp, uint32_t layer)
{
	return hp->is_swa[layer] && hp->head_dim_v_swa ? hp->head_dim_v_swa : hp->head_dim_v;
}

bool pt_hparams_is_moe_layer(const struct pt_hparams *hp, uint32_t layer)
{
	return hp->n_expert > 0 && layer >= hp->n_layer_dense_lead;
}

bool pt_hparams_has_attn_v(const struct pt_hparams *hp, uint32_t layer)
{
	return !(hp->k_eq_v_full && !hp->is_swa[layer]);
}

bool pt_hparams_is_recurrent(const struct pt_hparams *hp, uint32_t layer)
{
	return layer < hp->n_layer && hp->is_recr[layer];
}

uint64_t pt_hparams_conv_dim(const struct pt_hparams *hp)
{
	return 2ull * hp->ssm_n_group * hp->ssm_d_state + hp->ssm_d_inner;
}

uint64_t pt_hparams_rs_floats(const struct pt_hparams *hp, uint32_t layer)
{
	if (!pt_hparams_is_recurrent(hp, layer))
		return 0;
	const uint64_t dv = hp->ssm_dt_rank ? hp->ssm_d_inner / hp->ssm_dt_rank : 0;
	return (uint64_t)(hp->ssm_d_conv - 1) * pt_hparams_conv_dim(hp) +
	       (uint64_t)hp->ssm_dt_rank * dv * hp->ssm_d_state;
}

uint64_t pt_hparams_rs_bytes(const struct pt_hparams *hp)
{
	uint64_t t = 0;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		t += pt_hparams_rs_floats(hp, l) * sizeof(float);
	return t;
}

bool pt_hparams_v_in_k(const struct pt_hparams *hp)
{
	return hp->kv_lora_rank > 0;
}

uint64_t pt_hparams_kv_values(const struct pt_hparams *hp, uint32_t layer)
{
	const uint64_t v = pt_hparams_v_in_k(hp) ? 0 : pt_hparams_head_dim_v(hp, layer);
	return (uint64_t)hp->n_head_kv[layer] * (pt_hparams_head_dim_k(hp, layer) + v);
}

static enum pt_status check_width(const char *what, uint64_t v, struct pt_error *err)
{
	/* Every quantized format stores rows in blocks of at least 32 (Q8_0, Q4_0, MXFP4). */
	if (v == 0 || v % 32 != 0)
		return pt_error_set(err, PT_E_INVALID, "%s = %llu must be a positive multiple of 32",
				    what, (unsigned long long)v);
	return PT_OK;
}

enum pt_status pt_hparams_validate(const struct pt_hparams *hp, struct pt_error *err)
{
	enum pt_status st;
	if (hp->n_layer == 0 || hp->n_layer > PT_ARCH_MAX_LAYERS)
		return pt_error_set(err, PT_E_INVALID, "block_count = %u outside 1..%u",
				    hp->n_layer, PT_ARCH_MAX_LAYERS);
	if (hp->n_vocab < 2 || hp->n_head == 0)
		return pt_error_set(err, PT_E_INVALID, "vocabulary or head count is zero");
	if ((st = check_width("embedding_length", hp->n_embd, err)) != PT_OK)
		return st;
	if (hp->n_expert == 0 || hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
		return pt_error_set(err, PT_E_INVALID, "expert_used_count %u / expert_count %u",
				    hp->n_expert_used, hp->n_expert);
	if ((st = check_width("expert_feed_forward_length", hp->n_ff_exp, err)) != PT_OK)
		return st;
	if (hp->n_layer_dense_lead >= hp->n_layer)
		return pt_error_set(err, PT_E_INVALID, "leading_dense_block_count %u >= %u layers",
				    hp->n_layer_dense_lead, hp->n_layer);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		uint32_t hk = pt_hparams_head_dim_k(hp, l), kv = hp->n_head_kv[l];
		if (hk == 0 || hk % 2 != 0 || pt_hparams_head_dim_v(hp, l) == 0)
			return pt_error_set(err, PT_E_INVALID, "layer %u: bad head dimension %u", l, hk);
		if (kv == 0 || hp->n_head % kv != 0)
			return pt_error_set(err, PT_E_INVALID,
					    "layer %u: head_count %u not a multiple of head_count_kv %u",
					    l, hp->n_head, kv);
		if ((st = check_width("attention width", (uint64_t)hp->n_head * hk, err)) != PT_OK)
			return st;
	}
	if (hp->n_layer_dense_lead > 0 || hp->arch == PT_ARCH_GEMMA4)
		if ((st = check_width("feed_forward_length", hp->n_ff, err)) != PT_OK)
			return st;
	return PT_OK;
}

/* ---- keys ---------------------------------------------------------------------------- */

static void key_name(char *buf, size_t n, const struct pt_hparams *hp, const char *suffix)
{
	snprintf(buf, n, "%s.%s", hp->arch_name, suffix);
}

enum pt_status pt_key_u32(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			  uint32_t v, struct pt_error *err)
{
	char k[128];
	key_name(k, sizeof k, hp, suffix);
	return pt_gguf_writer_set_u32(w, k, v, err);
}

enum pt_status pt_key_f32(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			  float v, struct pt_error *err)
{
	char k[128];
	key_name(k, sizeof k, hp, suffix);
	return pt_gguf_writer_set_f32(w, k, v, err);
}

enum pt_status pt_key_bool(pt_gguf_writer *w, const struct pt_hparams *hp, const char *suffix,
			   bool v, struct pt_error *err)
{
	char k[128];
	key_name(k, sizeof k, hp, suffix);
	return pt_gguf_writer_set_bool(w, k, v, err);
}

enum pt_status pt_rkey_u32(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			   bool required, uint32_t *v, struct pt_error *err)
{
	char k[128];
	bool found = false;
	key_name(k, sizeof k, hp, suffix);
	enum pt_status st = pt_gguf_get_u32(g, k, *v, v, &found, err);
	if (st == PT_OK && required && !found)
		return pt_error_set(err, PT_E_FORMAT, "required key %s is missing", k);
	return st;
}

enum pt_status pt_rkey_f32(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			   bool required, float *v, struct pt_error *err)
{
	char k[128];
	bool found = false;
	key_name(k, sizeof k, hp, suffix);
	enum pt_status st = pt_gguf_get_f32(g, k, *v, v, &found, err);
	if (st == PT_OK && required && !found)
		return pt_error_set(err, PT_E_FORMAT, "required key %s is missing", k);
	return st;
}

enum pt_status pt_rkey_bool(const pt_gguf *g, const struct pt_hparams *hp, const char *suffix,
			    bool *v, struct pt_error *err)
{
	char k[128];
	key_name(k, sizeof k, hp, suffix);
	return pt_gguf_get_bool(g, k, *v, v, NULL, err);
}

enum pt_status pt_rkey_u32_layers(const pt_gguf *g, const struct pt_hparams *hp,
				  const char *suffix, uint32_t *out, bool *found,
				  struct pt_error *err)
{
	char k[128];
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, (key_name(k, sizeof k, hp, suffix), k));
	*found = kv != NULL;
	if (!kv)
		return PT_OK;
	if (kv->type != PT_GGUF_ARRAY) {
		uint32_t v = 0;
		enum pt_status st = pt_gguf_get_u32(g, k, 0, &v, NULL, err);
		for (uint32_t l = 0; st == PT_OK && l < hp->n_layer; l++)
			out[l] = v;
		return st;
	}
	if (kv->arr_count != hp->n_layer || kv->arr_type == PT_GGUF_STRING ||
	    kv->arr_type == PT_GGUF_F32 || kv->arr_type == PT_GGUF_F64 ||
	    kv->arr_type == PT_GGUF_BOOL)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key %s: expected %u integers", k, hp->n_layer);
	for (uint32_t l = 0; l < hp->n_layer; l++)
		out[l] = pt_gguf_arr_u32(kv, l);
	return PT_OK;
}

static enum pt_status write_head_count_kv(const struct pt_hparams *hp, pt_gguf_writer *w,
					  struct pt_error *err)
{
	bool uniform = true;
	for (uint32_t l = 1; l < hp->n_layer; l++)
		uniform = uniform && hp->n_head_kv[l] == hp->n_head_kv[0];
	if (uniform)
		return pt_key_u32(w, hp, "attention.head_count_kv", hp->n_head_kv[0], err);
	char k[128];
	key_name(k, sizeof k, hp, "attention.head_count_kv");
	return pt_gguf_writer_set_arr(w, k, PT_GGUF_U32, hp->n_head_kv, hp->n_layer, err);
}

enum pt_status pt_arch_write_hparams(const struct pt_hparams *hp, pt_gguf_writer *w,
				     struct pt_error *err)
{
	enum pt_status st = PT_OK;
	TRY(pt_key_u32(w, hp, "context_length", hp->n_ctx_train, err));
	TRY(pt_key_u32(w, hp, "embedding_length", hp->n_embd, err));
	TRY(pt_key_u32(w, hp, "block_count", hp->n_layer + hp->n_layer_nextn, err));
	if (hp->n_ff)
		TRY(pt_key_u32(w, hp, "feed_forward_length", hp->n_ff, err));
	TRY(pt_key_u32(w, hp, "attention.head_count", hp->n_head, err));
	TRY(write_head_count_kv(hp, w, err));
	TRY(pt_key_f32(w, hp, "rope.freq_base", hp->rope_freq_base, err));
	TRY(pt_key_f32(w, hp, "attention.layer_norm_rms_epsilon", hp->rms_eps, err));
	TRY(pt_key_u32(w, hp, "attention.key_length", hp->head_dim_k, err));
	TRY(pt_key_u32(w, hp, "attention.value_length", hp->head_dim_v, err));
	TRY(pt_key_u32(w, hp, "expert_count", hp->n_expert, err));
	TRY(pt_key_u32(w, hp, "expert_used_count", hp->n_expert_used, err));
	TRY(pt_key_u32(w, hp, "expert_feed_forward_length", hp->n_ff_exp, err));
	return arch_ops[hp->arch]->write_keys(hp, w, err);
}

static enum pt_status read_generic(const pt_gguf *g, struct pt_hparams *hp,
				   struct pt_error *err)
{
	enum pt_status st;
	bool found;
	TRY(pt_rkey_u32(g, hp, "context_length", true, &hp->n_ctx_train, err));
	TRY(pt_rkey_u32(g, hp, "embedding_length", true, &hp->n_embd, err));
	TRY(pt_rkey_u32(g, hp, "block_count", true, &hp->n_layer, err));
	if (hp->n_layer == 0 || hp->n_layer > PT_ARCH_MAX_LAYERS)
		return pt_error_set(err, PT_E_LIMIT, "%s.block_count = %u outside 1..%u",
				    hp->arch_name, hp->n_layer, PT_ARCH_MAX_LAYERS);
	TRY(pt_rkey_u32(g, hp, "feed_forward_length", false, &hp->n_ff, err));
	TRY(pt_rkey_u32(g, hp, "attention.head_count", true, &hp->n_head, err));
	TRY(pt_rkey_u32_layers(g, hp, "attention.head_count_kv", hp->n_head_kv, &found, err));
	for (uint32_t l = 0; !found && l < hp->n_layer; l++)
		hp->n_head_kv[l] = hp->n_head;
	TRY(pt_rkey_f32(g, hp, "rope.freq_base", false, &hp->rope_freq_base, err));
	TRY(pt_rkey_f32(g, hp, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps, err));
	hp->head_dim_k = hp->n_head ? hp->n_embd / hp->n_head : 0;
	TRY(pt_rkey_u32(g, hp, "attention.key_length", false, &hp->head_dim_k, err));
	hp->head_dim_v = hp->head_dim_k;
	TRY(pt_rkey_u32(g, hp, "attention.value_length", false, &hp->head_dim_v, err));
	hp->n_rot = hp->head_dim_k;
	TRY(pt_rkey_u32(g, hp, "rope.dimension_count", false, &hp->n_rot, err));
	TRY(pt_rkey_u32(g, hp, "expert_count", false, &hp->n_expert, err));
	TRY(pt_rkey_u32(g, hp, "expert_used_count", false, &hp->n_expert_used, err));
	TRY(pt_rkey_u32(g, hp, "expert_feed_forward_length", false, &hp->n_ff_exp, err));
	return PT_OK;
}

static bool has_tensor(const pt_gguf *g, const char *fmt, uint32_t layer)
{
	char name[PT_ARCH_MAX_NAME];
	snprintf(name, sizeof name, fmt, layer);
	return pt_gguf_find_tensor(g, name) != NULL;
}

/* Optional tensors and alternative layouts are recognised from the tensor table. */
static void detect_layout(const pt_gguf *g, struct pt_hparams *hp)
{
	uint32_t moe = hp->n_layer_dense_lead < hp->n_layer ? hp->n_layer_dense_lead : 0;
	hp->tied_embeddings = !has_tensor(g, "output.weight", 0);
	uint32_t full = 0; /* a full-attention layer (linear-attention ones have attn_qkv too) */
	while (full < hp->n_layer && hp->is_recr[full])
		full++;
	hp->fused_qkv = full < hp->n_layer && has_tensor(g, "blk.%u.attn_qkv.weight", full);
	hp->fused_gate_up_exps = has_tensor(g, "blk.%u.ffn_gate_up_exps.weight", moe);
	hp->has_exp_probs_b = has_tensor(g, "blk.%u.exp_probs_b.bias", moe);
	hp->has_layer_output_scale = has_tensor(g, "blk.%u.layer_output_scale.weight", 0);
	hp->has_attn_bias = has_tensor(g, "blk.%u.attn_q.bias", 0);
	hp->has_qk_norm = has_tensor(g, "blk.%u.attn_q_norm.weight", 0);
	/* gemma4 full-attention layers without attn_v use V = K (attention_k_eq_v). */
	for (uint32_t l = 0; hp->arch == PT_ARCH_GEMMA4 && l < hp->n_layer; l++)
		if (!hp->is_swa[l]) {
			hp->k_eq_v_full = !has_tensor(g, "blk.%u.attn_v.weight", l);
			break;
		}
}

enum pt_status pt_arch_read_hparams(const pt_gguf *g, struct pt_hparams *hp,
				    struct pt_error *err)
{
	struct pt_str s;
	bool found = false;
	char name[sizeof hp->arch_name];
	enum pt_arch arch;
	enum pt_status st = pt_gguf_get_str(g, "general.architecture", &s, &found, err);
	if (st != PT_OK)
		return st;
	if (!found)
		return pt_error_set(err, PT_E_FORMAT, "required key general.architecture is missing");
	if (s.len >= sizeof name)
		return pt_error_set(err, PT_E_UNSUPPORTED, "unsupported architecture (name too long)");
	memcpy(name, s.ptr, s.len);
	name[s.len] = '\0';
	if (pt_arch_from_name(name, &arch) != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED, "unsupported architecture '%s'", name);
	pt_hparams_defaults(hp, arch);
	snprintf(hp->arch_name, sizeof hp->arch_name, "%s", name);
	if ((st = read_generic(g, hp, err)) != PT_OK)
		return st;
	if ((st = arch_ops[arch]->read_keys(g, hp, err)) != PT_OK)
		return st;
	detect_layout(g, hp);
	/* Vocabulary size: the token list is authoritative. */
	const struct pt_gguf_kv *tok = pt_gguf_find_kv(g, "tokenizer.ggml.tokens");
	if (tok && tok->type == PT_GGUF_ARRAY && tok->arr_count <= UINT32_MAX)
		hp->n_vocab = (uint32_t)tok->arr_count;
	return pt_hparams_validate(hp, err);
}

/* ---- tensor lists -------------------------------------------------------------------- */

enum pt_status pt_tl_add(struct pt_tensor_list *l, int32_t layer, enum pt_tensor_role role,
			 enum pt_tensor_cat cat, enum pt_tensor_init init, uint64_t ne0,
			 uint64_t ne1, uint64_t ne2, struct pt_error *err, const char *fmt, ...)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 64;
		struct pt_tensor_desc *t = pt_reallocn(l->t, cap, sizeof *t);
		if (!t)
			return pt_error_set(err, PT_E_NOMEM, "out of memory listing tensors");
		l->t = t;
		l->cap = cap;
	}
	struct pt_tensor_desc *d = &l->t[l->n];
	memset(d, 0, sizeof *d);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(d->name, sizeof d->name, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof d->name)
		return pt_error_set(err, PT_E_LIMIT, "tensor name too long");
	d->n_dims = ne2 ? 3 : ne1 ? 2 : 1;
	d->ne[0] = ne0;
	d->ne[1] = ne1 ? ne1 : 1;
	d->ne[2] = ne2 ? ne2 : 1;
	d->ne[3] = 1;
	d->layer = layer;
	d->role = role;
	/* llama-quant: only >= 2-D tensors named *weight, never norms or the router. */
	d->cat = d->n_dims >= 2 ? cat : PT_CAT_NONE;
	d->init = init;
	d->fan_in = ne0;
	l->n++;
	return PT_OK;
}

/* The runs every arch repeats (the list is sorted afterwards, so only names, shapes, roles,
 * categories and inits matter, not the order they are appended in). */
enum pt_status pt_tl_add_io(struct pt_tensor_list *l, const struct pt_hparams *hp, bool output,
			    struct pt_error *err)
{
	const uint64_t E = hp->n_embd, V = hp->n_vocab;
	enum pt_status st = pt_tl_add(l, -1, PT_ROLE_RESIDENT, PT_CAT_TOKEN_EMBD, PT_INIT_EMBED, E,
				      V, 0, err, "token_embd.weight");
	if (st == PT_OK)
		st = pt_tl_add(l, -1, PT_ROLE_RESIDENT, PT_CAT_NONE, PT_INIT_NORM, E, 0, 0, err,
			       "output_norm.weight");
	if (st == PT_OK && output)
		st = pt_tl_add(l, -1, PT_ROLE_RESIDENT, PT_CAT_OUTPUT, PT_INIT_WEIGHT, E, V, 0, err,
			       "output.weight");
	return st;
}

enum pt_status pt_tl_add_router(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
				uint64_t E, uint64_t X, bool probs_bias, struct pt_error *err)
{
	enum pt_status st = pt_tl_add(l, (int32_t)i, role, PT_CAT_NONE, PT_INIT_ROUTER, E, X, 0,
				      err, "blk.%u.ffn_gate_inp.weight", i);
	if (st == PT_OK && probs_bias)
		st = pt_tl_add(l, (int32_t)i, role, PT_CAT_NONE, PT_INIT_ROUTER_BIAS, X, 0, 0, err,
			       "blk.%u.exp_probs_b.bias", i);
	return st;
}

enum pt_status pt_tl_add_attn(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
			      uint64_t E, uint64_t q, uint64_t k, uint64_t v, uint64_t o,
			      struct pt_error *err)
{
	const int32_t L = (int32_t)i;
	enum pt_status st = pt_tl_add(l, L, role, PT_CAT_ATTN_Q, PT_INIT_WEIGHT, E, q, 0, err,
				      "blk.%u.attn_q.weight", i);
	if (st == PT_OK)
		st = pt_tl_add(l, L, role, PT_CAT_ATTN_K, PT_INIT_WEIGHT, E, k, 0, err,
			       "blk.%u.attn_k.weight", i);
	if (st == PT_OK && v)
		st = pt_tl_add(l, L, role, PT_CAT_ATTN_V, PT_INIT_WEIGHT, E, v, 0, err,
			       "blk.%u.attn_v.weight", i);
	if (st == PT_OK)
		st = pt_tl_add(l, L, role, PT_CAT_ATTN_OUTPUT, PT_INIT_WEIGHT, o, E, 0, err,
			       "blk.%u.attn_output.weight", i);
	return st;
}

enum pt_status pt_tl_add_ffn(struct pt_tensor_list *l, uint32_t i, enum pt_tensor_role role,
			     const char *sfx, uint64_t E, uint64_t F, uint64_t X,
			     struct pt_error *err)
{
	const int32_t L = (int32_t)i;
	enum pt_status st = pt_tl_add(l, L, role, PT_CAT_FFN_GATE, PT_INIT_WEIGHT, E, F, X, err,
				      "blk.%u.ffn_gate%s.weight", i, sfx);
	if (st == PT_OK)
		st = pt_tl_add(l, L, role, PT_CAT_FFN_UP, PT_INIT_WEIGHT, E, F, X, err,
			       "blk.%u.ffn_up%s.weight", i, sfx);
	if (st == PT_OK)
		st = pt_tl_add(l, L, role, PT_CAT_FFN_DOWN, PT_INIT_WEIGHT, F, E, X, err,
			       "blk.%u.ffn_down%s.weight", i, sfx);
	return st;
}

void pt_tensor_list_free(struct pt_tensor_list *l)
{
	if (!l)
		return;
	pt_free(l->t);
	memset(l, 0, sizeof *l);
}

const struct pt_tensor_desc *pt_tensor_list_find(const struct pt_tensor_list *l,
						 const char *name)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (strcmp(l->t[i].name, name) == 0)
			return &l->t[i];
	return NULL;
}

uint64_t pt_tensor_desc_nelems(const struct pt_tensor_desc *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* llama.cpp loader order (GGUF-AND-QUANTS.md 2.10): non-layer tensors first, then by layer,
 * then by byte-wise name. */
static int desc_cmp(const void *a, const void *b)
{
	const struct pt_tensor_desc *x = a, *y = b;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return strcmp(x->name, y->name);
}

enum pt_status pt_arch_tensors(const struct pt_hparams *hp, struct pt_tensor_list *out,
			       struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	if ((unsigned)hp->arch >= PT_ARCH_COUNT)
		return pt_error_set(err, PT_E_INVALID, "unknown architecture");
	enum pt_status st = arch_ops[hp->arch]->tensors(hp, out, err);
	if (st != PT_OK) {
		pt_tensor_list_free(out);
		return st;
	}
	qsort(out->t, out->n, sizeof *out->t, desc_cmp);
	return PT_OK;
}

enum pt_status pt_arch_check_tensors(const struct pt_hparams *hp, const pt_gguf *g,
				     struct pt_error *err)
{
	struct pt_tensor_list l;
	enum pt_status st = pt_arch_tensors(hp, &l, err);
	if (st != PT_OK)
		return st;
	for (uint32_t i = 0; i < l.n && st == PT_OK; i++) {
		const struct pt_tensor_desc *d = &l.t[i];
		const struct pt_gguf_tensor *t = pt_gguf_find_tensor(g, d->name);
		if (!t) {
			st = pt_error_set(err, PT_E_FORMAT, "tensor %s is missing", d->name);
			break;
		}
		for (int k = 0; k < 4; k++)
			if (t->ne[k] != d->ne[k]) {
				st = pt_error_at(err, PT_E_FORMAT, t->file_offset,
						 "tensor %s: ne[%d] = %llu, expected %llu",
						 d->name, k, (unsigned long long)t->ne[k],
						 (unsigned long long)d->ne[k]);
				break;
			}
	}
	if (st == PT_OK && pt_gguf_tensor_count(g) != l.n)
		st = pt_error_set(err, PT_E_FORMAT, "file has %llu tensors, %s expects %u",
				  (unsigned long long)pt_gguf_tensor_count(g), hp->arch_name, l.n);
	pt_tensor_list_free(&l);
	return st;
}
