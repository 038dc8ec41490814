/* test_gguf_describe.c - inspect's summary: routed-expert classification and bytes per
 * expert, tokenizer and hyper-parameter extraction, display sanitising, JSON rendering. */
#include "gguf/gguf_describe.h"
#include "gguf/gguf.h"
#include "quant/types.h"
#include "test.h"
#include "util/alloc.h"

#include <cjson/cJSON.h>

struct tspec {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[4];
	uint32_t type;
};

static const struct tspec moe_tensors[] = {
	{ "token_embd.weight", 2, { 32, 4 }, PT_TYPE_F32 },                /* 512 */
	{ "blk.0.ffn_gate_exps.weight", 3, { 32, 2, 4 }, PT_TYPE_Q8_0 },   /* 272 */
	{ "blk.0.ffn_up_exps.weight", 3, { 32, 2, 4 }, PT_TYPE_Q8_0 },     /* 272 */
	{ "blk.0.ffn_down_exps.weight", 3, { 2, 32, 4 }, PT_TYPE_F16 },    /* 512 */
	{ "blk.0.ffn_down_exps.scale", 1, { 4 }, PT_TYPE_F32 },            /* 16 */
	{ "blk.0.ffn_gate_inp.weight", 2, { 32, 4 }, PT_TYPE_F32 },        /* 512, resident */
	{ "blk.1.ffn_gate_up_exps.weight", 3, { 32, 4, 4 }, PT_TYPE_Q8_0 },/* 544 */
	{ "blk.1.ffn_down_exps.weight", 3, { 2, 32, 4 }, PT_TYPE_F32 },    /* 1024 */
	{ "blk.1.ffn_up_exps.weight", 3, { 32, 2, 3 }, PT_TYPE_Q8_0 },     /* 204, ne[2] != 4 */
	{ "blk.x.ffn_up_exps.weight", 3, { 32, 2, 4 }, PT_TYPE_Q8_0 },     /* 272, no layer */
	{ "blk.2.ffn_up_exps_b.weight", 3, { 32, 2, 4 }, PT_TYPE_Q8_0 },   /* 272, other stem */
	{ "blk.2.ffn_up_shexp.weight", 2, { 32, 4 }, PT_TYPE_Q8_0 },       /* 136, shared */
};

/* Writes path with arch keys and the tensors above (zero data). */
static enum pt_status write_moe(const char *path, bool bad_block_count, struct pt_error *e)
{
	static const char *const toks[] = { "<s>", "</s>", "a\x01\xff" };
	const int32_t kv_heads[3] = { 2, 2, 1 };
	pt_gguf_writer *w = NULL;
	uint8_t zero[100] = { 0 };
	enum pt_status st = pt_gguf_writer_create(path, 32, &w, e);
	uint64_t left = 0;
	if (st != PT_OK)
		return st;
#define TRY(x) do { if (st == PT_OK) st = (x); } while (0)
	TRY(pt_gguf_writer_set_str(w, "general.architecture", "qwen3moe", e));
	TRY(pt_gguf_writer_set_str(w, "general.name", "bad\x1b[31mname", e));
	if (bad_block_count)
		TRY(pt_gguf_writer_set_str(w, "qwen3moe.block_count", "two", e));
	else
		TRY(pt_gguf_writer_set_u32(w, "qwen3moe.block_count", 3, e));
	TRY(pt_gguf_writer_set_u32(w, "qwen3moe.expert_count", 4, e));
	TRY(pt_gguf_writer_set_i32(w, "qwen3moe.expert_used_count", 2, e));
	TRY(pt_gguf_writer_set_f32(w, "qwen3moe.rope.freq_base", 10000.0f, e));
	TRY(pt_gguf_writer_set_arr(w, "qwen3moe.attention.head_count_kv", PT_GGUF_I32, kv_heads,
				   3, e));
	TRY(pt_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", e));
	TRY(pt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3, e));
	TRY(pt_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1, e));
	TRY(pt_gguf_writer_set_str(w, "tokenizer.chat_template", "{{ x }}", e));
	for (size_t i = 0; i < sizeof moe_tensors / sizeof moe_tensors[0]; i++)
		TRY(pt_gguf_writer_add_tensor(w, moe_tensors[i].name, moe_tensors[i].n_dims,
					      moe_tensors[i].ne, moe_tensors[i].type, e));
	TRY(pt_gguf_writer_begin_data(w, e));
	left = 512 + 272 + 272 + 512 + 16 + 512 + 544 + 1024 + 204 + 272 + 272 + 136;
	while (st == PT_OK && left > 0) {
		size_t k = left < sizeof zero ? (size_t)left : sizeof zero;
		TRY(pt_gguf_writer_write_data(w, zero, k, e));
		left -= k;
	}
	TRY(pt_gguf_writer_finish(w, e));
#undef TRY
	pt_gguf_writer_destroy(w);
	return st;
}

PT_TEST(test_gguf_describe_splits_expert_bytes)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("desc.gguf");
	struct pt_gguf_desc d;
	pt_gguf *g = NULL;
	REQUIRE(write_moe(path, false, &e) == PT_OK);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	REQUIRE(pt_gguf_describe(g, &d, &e) == PT_OK);
	CHECK(pt_str_eq(d.arch, "qwen3moe"));
	CHECK_EQ_INT(d.n_layers, 3);
	CHECK_EQ_INT(d.n_experts, 4);
	CHECK_EQ_INT(d.n_experts_used, 2);
	CHECK_EQ_INT(d.tensor_count, 12);
	CHECK_EQ_INT(d.expert_tensors, 6);
	CHECK_EQ_INT(d.expert_layers, 2);
	CHECK_EQ_INT(d.expert_bytes, 272 + 272 + 512 + 16 + 544 + 1024);
	CHECK_EQ_INT(d.resident_bytes, 512 + 512 + 204 + 272 + 272 + 136);
	CHECK_EQ_INT(d.resident_bytes + d.expert_bytes, d.tensor_bytes);
	CHECK_EQ_INT(d.bytes_per_expert, (544 + 1024) / 4);
	CHECK_EQ_INT(d.bytes_per_expert_min, (272 + 272 + 512 + 16) / 4);
	CHECK_EQ_INT(d.types[PT_TYPE_Q8_0].count, 7);
	CHECK_EQ_INT(d.types[PT_TYPE_F16].bytes, 512);
	CHECK(pt_str_eq(d.tok_model, "llama") && d.tok_pre.ptr == NULL);
	CHECK_EQ_INT(d.vocab_size, 3);
	CHECK_EQ_INT(d.bos_id, -1);
	CHECK_EQ_INT(d.eos_id, 1);
	CHECK(d.has_template && d.template_len == 7);
	CHECK(d.hparams[0] != NULL && d.hparams[7] != NULL && d.hparams[2] == NULL);
	CHECK_EQ_STR(pt_gguf_desc_hparam_name(7), "attention.head_count_kv");
	CHECK(pt_gguf_desc_hparam_name(PT_GGUF_DESC_N_HPARAMS) == NULL);
	pt_gguf_close(g);
}

PT_TEST(test_gguf_describe_json_and_text)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("desc_json.gguf");
	const char *txt = pt_test_tmpfile("desc.txt");
	struct pt_gguf_desc d;
	pt_gguf *g = NULL;
	char *json = NULL, line[4096], all[16384] = "";
	cJSON *root, *tok, *ts;
	FILE *f;
	REQUIRE(write_moe(path, false, &e) == PT_OK);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	REQUIRE(pt_gguf_describe(g, &d, &e) == PT_OK);
	REQUIRE(pt_gguf_desc_json(g, &d, true, &json, &e) == PT_OK);
	root = cJSON_Parse(json);
	REQUIRE(root);
	CHECK_EQ_STR(cJSON_GetObjectItem(root, "architecture")->valuestring, "qwen3moe");
	CHECK_EQ_STR(cJSON_GetObjectItem(root, "name")->valuestring, "bad?[31mname");
	CHECK_EQ_INT(cJSON_GetObjectItem(root, "expert_bytes")->valuedouble, d.expert_bytes);
	CHECK_EQ_INT(cJSON_GetObjectItem(root, "bytes_per_expert")->valuedouble, 392);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "types"), "Q8_0")->valuedouble,
		     7);
	tok = cJSON_GetObjectItem(root, "tokenizer");
	CHECK(tok && cJSON_IsNull(cJSON_GetObjectItem(tok, "pre")));
	CHECK_EQ_INT(cJSON_GetObjectItem(tok, "eos_id")->valuedouble, 1);
	ts = cJSON_GetObjectItem(root, "tensors");
	CHECK_EQ_INT(cJSON_GetArraySize(ts), 12);
	CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(ts, 4), "name")->valuestring,
		     "blk.0.ffn_down_exps.scale");
	CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "metadata"),
				  "qwen3moe.attention.head_count_kv") != NULL);
	cJSON_Delete(root);
	pt_free(json);
	f = fopen(txt, "w+");
	REQUIRE(f);
	CHECK_EQ_INT(pt_gguf_desc_print(g, &d, true, f, &e), PT_OK);
	rewind(f);
	while (fgets(line, sizeof line, f))
		strncat(all, line, sizeof all - strlen(all) - 1);
	fclose(f);
	CHECK_CONTAINS(all, "bytes per expert: 392 B");
	CHECK_CONTAINS(all, "(smallest layer 268 B)");
	CHECK_CONTAINS(all, "attention.head_count_kv              array of 3 i32, min 1 max 2");
	CHECK_CONTAINS(all, "rope.freq_base                       10000\n");
	CHECK_CONTAINS(all, "blk.1.ffn_gate_up_exps.weight");
	CHECK(strchr(all, 0x1b) == NULL);
	pt_gguf_close(g);
}

PT_TEST(test_gguf_describe_rejects_wrong_key_type)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("desc_bad.gguf");
	struct pt_gguf_desc d;
	pt_gguf *g = NULL;
	REQUIRE(write_moe(path, true, &e) == PT_OK);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	CHECK_EQ_INT(pt_gguf_describe(g, &d, &e), PT_E_FORMAT);
	CHECK_CONTAINS(e.msg, "key 'qwen3moe.block_count' has type string, expected u64");
	pt_gguf_close(g);
}

PT_TEST(test_gguf_describe_alloc_failure_sweep)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("desc_sweep.gguf");
	pt_gguf *g = NULL;
	uint64_t k;
	REQUIRE(write_moe(path, false, &e) == PT_OK);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	for (k = 1; k < 50; k++) {
		struct pt_gguf_desc d;
		char *json = NULL;
		enum pt_status st;
		pt_error_clear(&e);
		pt_alloc_fail_at(k);
		st = pt_gguf_describe(g, &d, &e);
		if (st == PT_OK)
			st = pt_gguf_desc_json(g, &d, false, &json, &e);
		pt_alloc_fail_at(0);
		pt_free(json);
		if (st == PT_OK)
			break;
		CHECK_EQ_INT(st, PT_E_NOMEM);
	}
	CHECK(k > 1 && k < 50);
	pt_gguf_close(g);
}

PT_TEST(test_gguf_display_str_sanitises)
{
	char out[32];
	struct pt_str s = { "a\nb\x7f" "\xc3\xa9" "\xff" "\xe2\x82", 9 };
	pt_gguf_display_str(s, out, 20);
	CHECK_EQ_STR(out, "a?b?\xc3\xa9???");
	s.ptr = "abcdef";
	s.len = 6;
	pt_gguf_display_str(s, out, 4);
	CHECK_EQ_STR(out, "abcd...");
	s.ptr = "ab\xc3\xa9";
	s.len = 4;
	pt_gguf_display_str(s, out, 3); /* never splits a sequence */
	CHECK_EQ_STR(out, "ab...");
	s.ptr = "\xed\xa0\x80" "\xc0\xaf";
	s.len = 5; /* surrogate and overlong */
	pt_gguf_display_str(s, out, 20);
	CHECK_EQ_STR(out, "?????");
	s.ptr = NULL;
	s.len = 0;
	pt_gguf_display_str(s, out, 20);
	CHECK_EQ_STR(out, "");
}
