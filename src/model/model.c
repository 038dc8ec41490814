/* model.c - model loading: hyper-parameters and tensor table checked against the arch
 * description, every tensor type checked against what the kernels support, weights bound in
 * place in the mapping, and the mmap expert provider. */
#include "model/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model/ops.h"
#include "quant/quant.h"
#include "util/alloc.h"

static const struct pt_gguf_tensor *tensor(const struct pt_model *m, const char *fmt, int layer)
{
	char name[PT_ARCH_MAX_NAME];
	if (layer >= 0)
		snprintf(name, sizeof(name), fmt, layer);
	else
		snprintf(name, sizeof(name), "%s", fmt);
	return pt_gguf_find_tensor(m->g, name);
}

/* The layout flags describe what the file contains; set them from the tensor table before
 * the description-based shape check so either accepted layout passes. */
static void detect_layout(struct pt_model *m)
{
	struct pt_hparams *hp = &m->hp;
	hp->tied_embeddings = !pt_gguf_find_tensor(m->g, "output.weight");
	uint32_t full = 0; /* a full-attention layer (linear-attention ones have attn_qkv too) */
	while (full < hp->n_layer && hp->is_recr[full])
		full++;
	hp->fused_qkv = full < hp->n_layer && tensor(m, "blk.%d.attn_qkv.weight", (int)full);
	hp->has_layer_output_scale = tensor(m, "blk.%d.layer_output_scale.weight", 0) != NULL;
	hp->has_exp_probs_b = false;
	hp->fused_gate_up_exps = false;
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		if (tensor(m, "blk.%d.exp_probs_b.bias", (int)il))
			hp->has_exp_probs_b = true;
		if (tensor(m, "blk.%d.ffn_gate_up_exps.weight", (int)il))
			hp->fused_gate_up_exps = true;
	}
}

static enum pt_status check_types(struct pt_model *m, struct pt_error *err)
{
	struct pt_tensor_list l = { 0 };
	enum pt_status st = pt_arch_tensors(&m->hp, &l, err);
	for (uint32_t i = 0; st == PT_OK && i < l.n; i++) {
		const struct pt_tensor_desc *d = &l.t[i];
		const struct pt_gguf_tensor *t = pt_gguf_find_tensor(m->g, d->name);
		if (!t)
			continue; /* optional tensors absent: the shape check already ruled */
		const char *tn = pt_type_name(t->type);
		const size_t nl = strlen(d->name);
		const bool bias = nl > 5 && strcmp(d->name + nl - 5, ".bias") == 0;
		if (d->role == PT_ROLE_SKIP) {
			m->skipped_bytes += t->nbytes; /* never bound: any type will do */
		} else if ((d->n_dims == 1 || bias) && t->type != PT_TYPE_F32) {
			st = pt_error_set(err, PT_E_UNSUPPORTED,
					  "tensor %s: type %s, expected F32 for a 1-D tensor or a bias",
					  d->name, tn);
		} else if (strcmp(d->name, "token_embd.weight") == 0) {
			const struct pt_type_traits *tr = pt_type_traits(t->type);
			if (!tr || !tr->can_dequant)
				st = pt_error_set(err, PT_E_UNSUPPORTED,
						  "tensor %s: type %s cannot be dequantized", d->name, tn);
			else if (m->hp.tied_embeddings && !pt_kern_ops(t->type))
				st = pt_error_set(err, PT_E_UNSUPPORTED,
						  "tensor %s: type %s has no matmul kernel", d->name, tn);
		} else if (d->n_dims > 1 && !pt_kern_ops(t->type)) {
			st = pt_error_set(err, PT_E_UNSUPPORTED,
					  "tensor %s: type %s has no matmul kernel", d->name, tn);
		}
	}
	pt_tensor_list_free(&l);
	return st;
}

/* Checks the forward pass's own assumptions beyond pt_hparams_validate. */
static enum pt_status check_hparams(const struct pt_hparams *hp, struct pt_error *err)
{
	if (hp->n_embd_per_layer != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "key %s.embedding_length_per_layer_input: %u, only 0 is supported",
				    hp->arch_name, hp->n_embd_per_layer);
	if (hp->n_shared_kv_layers != 0)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "key %s.attention.shared_kv_layers: %u, only 0 is supported",
				    hp->arch_name, hp->n_shared_kv_layers);
	/* group-limited routing: whole groups, enough experts in the kept groups */
	if (hp->n_expert_groups > 1 &&
	    (hp->n_expert_groups > PT_OP_MAX_GROUPS ||
	     hp->n_expert % hp->n_expert_groups != 0 || hp->n_group_used == 0 ||
	     hp->n_group_used > hp->n_expert_groups ||
	     hp->n_expert / hp->n_expert_groups < 2 ||
	     (uint64_t)hp->n_group_used * (hp->n_expert / hp->n_expert_groups) <
		     hp->n_expert_used))
		return pt_error_set(err, PT_E_FORMAT,
				    "key %s.expert_group_count: %u groups (%u used) of %u experts "
				    "cannot give %u experts", hp->arch_name, hp->n_expert_groups,
				    hp->n_group_used, hp->n_expert, hp->n_expert_used);
	if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert || hp->n_expert > 4096)
		return pt_error_set(err, PT_E_FORMAT,
				    "key %s.expert_used_count: %u, expected 1..expert_count (%u)",
				    hp->arch_name, hp->n_expert_used, hp->n_expert);
	for (uint32_t il = 0; il < hp->n_layer; il++) {
		const uint32_t hk = pt_hparams_head_dim_k(hp, il);
		const uint32_t nr = hp->is_swa[il] ? hp->n_rot_swa : hp->n_rot;
		if (hp->n_head_kv[il] == 0 || hp->n_head % hp->n_head_kv[il] != 0)
			return pt_error_set(err, PT_E_FORMAT,
					    "key %s.attention.head_count_kv: layer %u has %u, expected a "
					    "divisor of head_count %u", hp->arch_name, il,
					    hp->n_head_kv[il], hp->n_head);
		if (nr == 0 || nr % 2 || nr > hk)
			return pt_error_set(err, PT_E_FORMAT,
					    "key %s.rope.dimension_count: %u for layer %u, expected an "
					    "even value <= head dim %u", hp->arch_name, nr, il, hk);
	}
	return PT_OK;
}

static enum pt_status bind_mat(const struct pt_model *m, const char *fmt, int layer,
			       struct pt_kern_mat *out, struct pt_error *err)
{
	memset(out, 0, sizeof(*out));
	const struct pt_gguf_tensor *t = tensor(m, fmt, layer);
	if (!t)
		return PT_OK;
	uint64_t rb;
	if (pt_type_row_bytes(t->type, t->ne[0], &rb) != 0)
		return pt_error_set(err, PT_E_FORMAT, "tensor %.*s: bad row length %llu",
				    (int)t->name.len, t->name.ptr, (unsigned long long)t->ne[0]);
	out->type = (enum pt_type)t->type;
	out->cols = t->ne[0];
	out->rows = t->ne[1];
	out->row_bytes = (size_t)rb;
	out->data = t->data;
	return PT_OK;
}

static enum pt_status bind_exps(const struct pt_model *m, const char *fmt, int layer,
				struct pt_expert_mat *out, struct pt_error *err)
{
	struct pt_kern_mat k;
	enum pt_status st = bind_mat(m, fmt, layer, &k, err);
	memset(out, 0, sizeof(*out));
	if (st != PT_OK || !k.data)
		return st;
	out->type = k.type;
	out->rows = k.rows;
	out->cols = k.cols;
	out->row_bytes = k.row_bytes;
	out->expert_bytes = k.row_bytes * (size_t)k.rows; /* fits: the tensor is in the file */
	out->data = k.data;
	return PT_OK;
}

static const float *vec(const struct pt_model *m, const char *fmt, int layer)
{
	const struct pt_gguf_tensor *t = tensor(m, fmt, layer);
	return t ? (const float *)t->data : NULL;
}

static enum pt_status bind_layer(const struct pt_model *m, int il, struct pt_layer_weights *L,
				 struct pt_error *err)
{
	static const struct {
		const char *fmt;
		size_t off;
	} mats[] = {
		{ "blk.%d.attn_q.weight", offsetof(struct pt_layer_weights, wq) },
		{ "blk.%d.attn_k.weight", offsetof(struct pt_layer_weights, wk) },
		{ "blk.%d.attn_v.weight", offsetof(struct pt_layer_weights, wv) },
		{ "blk.%d.attn_qkv.weight", offsetof(struct pt_layer_weights, wqkv) },
		{ "blk.%d.attn_output.weight", offsetof(struct pt_layer_weights, wo) },
		{ "blk.%d.ffn_gate.weight", offsetof(struct pt_layer_weights, ffn_gate) },
		{ "blk.%d.ffn_up.weight", offsetof(struct pt_layer_weights, ffn_up) },
		{ "blk.%d.ffn_down.weight", offsetof(struct pt_layer_weights, ffn_down) },
		{ "blk.%d.ffn_gate_shexp.weight", offsetof(struct pt_layer_weights, sh_gate) },
		{ "blk.%d.ffn_up_shexp.weight", offsetof(struct pt_layer_weights, sh_up) },
		{ "blk.%d.ffn_down_shexp.weight", offsetof(struct pt_layer_weights, sh_down) },
		{ "blk.%d.ffn_gate_inp.weight", offsetof(struct pt_layer_weights, router) },
		{ "blk.%d.attn_q_a.weight", offsetof(struct pt_layer_weights, wq_a) },
		{ "blk.%d.attn_q_b.weight", offsetof(struct pt_layer_weights, wq_b) },
		{ "blk.%d.attn_kv_a_mqa.weight", offsetof(struct pt_layer_weights, wkv_a) },
		{ "blk.%d.attn_k_b.weight", offsetof(struct pt_layer_weights, wk_b) },
		{ "blk.%d.attn_v_b.weight", offsetof(struct pt_layer_weights, wv_b) },
	};
	enum pt_status st = PT_OK;
	for (size_t i = 0; st == PT_OK && i < sizeof(mats) / sizeof(mats[0]); i++)
		st = bind_mat(m, mats[i].fmt, il, (struct pt_kern_mat *)((char *)L + mats[i].off),
			      err);
	if (st == PT_OK)
		st = bind_exps(m, "blk.%d.ffn_gate_exps.weight", il, &L->gate_exps, err);
	if (st == PT_OK)
		st = bind_exps(m, "blk.%d.ffn_up_exps.weight", il, &L->up_exps, err);
	if (st == PT_OK)
		st = bind_exps(m, "blk.%d.ffn_gate_up_exps.weight", il, &L->gate_up_exps, err);
	if (st == PT_OK)
		st = bind_exps(m, "blk.%d.ffn_down_exps.weight", il, &L->down_exps, err);
	L->attn_norm = vec(m, "blk.%d.attn_norm.weight", il);
	L->q_norm = vec(m, "blk.%d.attn_q_norm.weight", il);
	L->k_norm = vec(m, "blk.%d.attn_k_norm.weight", il);
	L->post_attn_norm = vec(m, "blk.%d.post_attention_norm.weight", il);
	L->ffn_norm = vec(m, "blk.%d.ffn_norm.weight", il);
	if (pt_arch_recipe(m->hp.arch)->ffn_norm_post_attention) {
		L->ffn_norm = L->post_attn_norm;
		L->post_attn_norm = NULL;
	}
	L->bq = vec(m, "blk.%d.attn_q.bias", il);
	L->bk = vec(m, "blk.%d.attn_k.bias", il);
	L->bv = vec(m, "blk.%d.attn_v.bias", il);
	L->bo = vec(m, "blk.%d.attn_output.bias", il);
	L->post_ffw_norm = vec(m, "blk.%d.post_ffw_norm.weight", il);
	L->pre_ffw_norm_2 = vec(m, "blk.%d.pre_ffw_norm_2.weight", il);
	L->post_ffw_norm_1 = vec(m, "blk.%d.post_ffw_norm_1.weight", il);
	L->post_ffw_norm_2 = vec(m, "blk.%d.post_ffw_norm_2.weight", il);
	L->router_scale = vec(m, "blk.%d.ffn_gate_inp.scale", il);
	L->exp_probs_b = vec(m, "blk.%d.exp_probs_b.bias", il);
	L->down_exps_scale = vec(m, "blk.%d.ffn_down_exps.scale", il);
	L->layer_out_scale = vec(m, "blk.%d.layer_output_scale.weight", il);
	L->q_a_norm = vec(m, "blk.%d.attn_q_a_norm.weight", il);
	L->kv_a_norm = vec(m, "blk.%d.attn_kv_a_norm.weight", il);
	L->attn_sinks = vec(m, "blk.%d.attn_sinks.weight", il);
	L->router_b = vec(m, "blk.%d.ffn_gate_inp.bias", il);
	L->gate_exps_b = vec(m, "blk.%d.ffn_gate_exps.bias", il);
	L->up_exps_b = vec(m, "blk.%d.ffn_up_exps.bias", il);
	L->down_exps_b = vec(m, "blk.%d.ffn_down_exps.bias", il);
	L->is_moe = L->router.data != NULL;
	L->sh_gate_inp = vec(m, "blk.%d.ffn_gate_inp_shexp.weight", il);
	const struct pt_gguf_tensor *conv = tensor(m, "blk.%d.ssm_conv1d.weight", il);
	if (st == PT_OK && conv) {
		/* a linear-attention layer: attn_qkv is the conv input, not Q/K/V */
		L->is_recr = true;
		L->ssm_qkv = L->wqkv;
		memset(&L->wqkv, 0, sizeof L->wqkv);
		if (conv->type != PT_TYPE_F32)
			return pt_error_set(err, PT_E_UNSUPPORTED, "tensor blk.%d.ssm_conv1d.weight: "
					    "type %s, expected F32", il, pt_type_name(conv->type));
		L->ssm_conv1d = (const float *)conv->data;
		st = bind_mat(m, "blk.%d.attn_gate.weight", il, &L->ssm_z, err);
		if (st == PT_OK)
			st = bind_mat(m, "blk.%d.ssm_beta.weight", il, &L->ssm_beta, err);
		if (st == PT_OK)
			st = bind_mat(m, "blk.%d.ssm_alpha.weight", il, &L->ssm_alpha, err);
		if (st == PT_OK)
			st = bind_mat(m, "blk.%d.ssm_out.weight", il, &L->ssm_out, err);
		L->ssm_dt = vec(m, "blk.%d.ssm_dt.bias", il);
		L->ssm_a = vec(m, "blk.%d.ssm_a", il);
		L->ssm_norm = vec(m, "blk.%d.ssm_norm.weight", il);
	}
	return st;
}

/* IMROPE (ggml_mrope_cache_init, interleaved): pair i of the rotated dims takes its angle
 * from section (i mod sum) by i mod 3 while i < 3 * section, else from the 4th ("extra")
 * position, which is 0 for text.  Pairs on the extra position do not rotate. */
static enum pt_status rope_sections(struct pt_model *m, struct pt_error *err)
{
	const struct pt_hparams *hp = &m->hp;
	const uint32_t *sec = hp->rope_sections;
	const uint32_t dims = sec[0] + sec[1] + sec[2] + sec[3];
	if (dims == 0)
		return PT_OK;
	if (dims > hp->n_rot)
		return pt_error_set(err, PT_E_FORMAT, "key %s.rope.dimension_sections: %u pairs > "
				    "rope.dimension_count %u", hp->arch_name, dims, hp->n_rot);
	bool any = false;
	float *ff = pt_mallocn(hp->n_rot / 2, sizeof(float));
	if (!ff)
		return pt_error_set(err, PT_E_NOMEM, "cannot allocate rope factors");
	for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
		const uint32_t s = i % dims;
		const bool rot = (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
				 (s % 3 == 2 && s < 3 * sec[2]);
		ff[i] = rot ? 1.0f : INFINITY;
		any = any || !rot;
	}
	if (!any)
		pt_free(ff);
	else
		m->rope_sect_ff = ff;
	return PT_OK;
}

static enum pt_status mmap_get(void *ctx, uint32_t layer, uint32_t expert,
			       struct pt_expert_ptrs *out, struct pt_error *err)
{
	const struct pt_model *m = ctx;
	const struct pt_layer_weights *L = &m->layers[layer];
	if (layer >= m->hp.n_layer || expert >= m->hp.n_expert || !L->is_moe)
		return pt_error_set(err, PT_E_INVALID, "expert %u of layer %u does not exist",
				    expert, layer);
	if (L->gate_up_exps.data) {
		out->gate = L->gate_up_exps.data + (size_t)expert * L->gate_up_exps.expert_bytes;
		out->up = NULL;
	} else {
		out->gate = L->gate_exps.data + (size_t)expert * L->gate_exps.expert_bytes;
		out->up = L->up_exps.data + (size_t)expert * L->up_exps.expert_bytes;
	}
	out->down = L->down_exps.data + (size_t)expert * L->down_exps.expert_bytes;
	/* bias rows match the weights' output widths (pt_arch_check_tensors) */
	out->gate_b = L->gate_exps_b ? L->gate_exps_b + (size_t)expert * L->gate_exps.rows : NULL;
	out->up_b = L->up_exps_b ? L->up_exps_b + (size_t)expert * L->up_exps.rows : NULL;
	out->down_b = L->down_exps_b ? L->down_exps_b + (size_t)expert * L->down_exps.rows
				     : NULL;
	return PT_OK;
}

static enum pt_status bind_all(struct pt_model *m, struct pt_error *err)
{
	m->tok_embd = pt_gguf_find_tensor(m->g, "token_embd.weight");
	m->output_norm = vec(m, "output_norm.weight", -1);
	m->rope_freqs = vec(m, "rope_freqs.weight", -1);
	enum pt_status st = bind_mat(m, m->hp.tied_embeddings ? "token_embd.weight" :
				     "output.weight", -1, &m->output, err);
	if (st != PT_OK)
		return st;
	m->layers = pt_calloc(m->hp.n_layer, sizeof(*m->layers));
	if (!m->layers)
		return pt_error_set(err, PT_E_NOMEM, "cannot allocate the layer table");
	for (uint32_t il = 0; st == PT_OK && il < m->hp.n_layer; il++)
		st = bind_layer(m, (int)il, &m->layers[il], err);
	if (st == PT_OK)
		st = rope_sections(m, err);
	m->mmap_provider.ctx = m;
	m->mmap_provider.get = mmap_get;
	m->mmap_provider.release = NULL;
	return st;
}

enum pt_status pt_model_from_gguf(pt_gguf *g, struct pt_model **out, struct pt_error *err)
{
	*out = NULL;
	struct pt_model *m = pt_calloc(1, sizeof(*m));
	if (!m) {
		pt_gguf_close(g);
		return pt_error_set(err, PT_E_NOMEM, "cannot allocate the model");
	}
	m->g = g;
	enum pt_status st = pt_arch_read_hparams(g, &m->hp, err);
	if (st == PT_OK) {
		detect_layout(m);
		st = pt_hparams_validate(&m->hp, err);
	}
	if (st == PT_OK)
		st = check_hparams(&m->hp, err);
	if (st == PT_OK)
		st = pt_arch_check_tensors(&m->hp, g, err);
	if (st == PT_OK)
		st = check_types(m, err);
	if (st == PT_OK)
		st = bind_all(m, err);
	if (st != PT_OK) {
		pt_model_close(m);
		return st;
	}
	*out = m;
	return PT_OK;
}

enum pt_status pt_model_open(const char *path, struct pt_model **out, struct pt_error *err)
{
	pt_gguf *g = NULL;
	*out = NULL;
	enum pt_status st = pt_gguf_open(path, &g, err);
	if (st != PT_OK)
		return st;
	return pt_model_from_gguf(g, out, err);
}

void pt_model_close(struct pt_model *m)
{
	if (!m)
		return;
	pt_free(m->layers);
	pt_free(m->rope_sect_ff);
	for (uint32_t i = 0; i < m->n_repack; i++)
		pt_free_pages(m->repack[i].p, m->repack[i].bytes);
	pt_free(m->repack);
	pt_gguf_close(m->g);
	pt_free(m);
}

/* Row tok of an X16 head (the tied embedding repacked): each packed unit's bytes of the row
 * back as stored, then dequantized as the mapped row would be. */
static enum pt_status embed_row_x16(const struct pt_kern_mat *w, uint32_t tok, float *out,
				    struct pt_error *err)
{
	const uint32_t uc = pt_kern_x16_unit_cols(w->type); /* 256, or 32 for Q8_0 / Q5_0 */
	const size_t band = pt_kern_x16_band(w->type, w->cols);
	const size_t ux = pt_kern_x16_band(w->type, uc); /* one unit of 16 rows */
	const uint8_t *b = (const uint8_t *)w->data + (size_t)(tok / PT_KERN_X16_ROWS) * band;
	uint8_t row[256]; /* one unit of the row as stored: 144 (Q4_K), 210 (Q6_K), 34, 22 */
	if (!uc || !ux)
		return pt_error_set(err, PT_E_INVALID, "embedding: no interleaved layout for %s",
				    pt_type_name(w->type));
	for (uint64_t i = 0; i < w->cols / uc; i++) {
		pt_kern_x16_unpack_row(w->type, b + i * ux, uc, tok % PT_KERN_X16_ROWS, row);
		enum pt_status st = pt_quant_dequant_row(w->type, row, out + i * uc, uc, err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

enum pt_status pt_model_embed_row(const struct pt_model *m, uint32_t tok, float *out,
				  struct pt_error *err)
{
	const struct pt_gguf_tensor *t = m->tok_embd;
	if (tok >= t->ne[1])
		return pt_error_set(err, PT_E_INVALID, "token id %u out of range (vocabulary %llu)",
				    tok, (unsigned long long)t->ne[1]);
	uint64_t rb;
	if (pt_type_row_bytes(t->type, t->ne[0], &rb) != 0)
		return pt_error_set(err, PT_E_FORMAT, "token_embd.weight: bad row length");
	if (m->embd_in_output)
		return embed_row_x16(&m->output, tok, out, err);
	return pt_quant_dequant_row((enum pt_type)t->type, t->data + (size_t)tok * rb, out,
				    t->ne[0], err);
}

uint32_t pt_model_computed_layers(const pt_gguf *g)
{
	struct pt_hparams hp;
	struct pt_error err = { 0 };
	return pt_arch_read_hparams(g, &hp, &err) == PT_OK ? hp.n_layer : UINT32_MAX;
}
