/* test_gguf.c - GGUF reader validation (one corrupt file per rule), typed getters, limits at
 * N and N+1, allocation-failure sweeps, and writer round trips. */
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"
#include "gguf_builder.h"
#include "quant/types.h"
#include "test.h"
#include "util/alloc.h"
#include "util/limits.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens b's bytes and checks the failure code and a message substring. */
static void expect_fail_lim(const struct gb *b, const struct pt_gguf_limits *lim,
			    enum pt_status code, const char *substr, int line)
{
	struct pt_error e = { 0 };
	pt_gguf *g = (pt_gguf *)1;
	enum pt_status st = pt_gguf_open_memory_limits(b->p, b->n, lim, &g, &e);
	if (st != code || !strstr(e.msg, substr) || g != NULL)
		pt_test_fail(__FILE__, line, "want %d '%s', got %d '%s'", code, substr, st, e.msg);
	if (st == PT_OK)
		pt_gguf_close(g);
}
#define EXPECT_FAIL(b, code, substr) expect_fail_lim((b), NULL, (code), (substr), __LINE__)
#define EXPECT_FAIL_LIM(b, lim, code, substr)                                              \
	expect_fail_lim((b), (lim), (code), (substr), __LINE__)

static pt_gguf *open_ok(const struct gb *b, const struct pt_gguf_limits *lim, int line)
{
	struct pt_error e = { 0 };
	pt_gguf *g = NULL;
	if (pt_gguf_open_memory_limits(b->p, b->n, lim, &g, &e) != PT_OK)
		pt_test_fail(__FILE__, line, "open failed: %s", e.msg);
	return g;
}
#define OPEN_OK(b) open_ok((b), NULL, __LINE__)

/* A small valid v3 file: 2 KVs, tensors a (F32 [8], 32 B) and b (Q8_0 [32,2], 68 B). */
static void valid_file(struct gb *b, uint32_t version)
{
	uint64_t ne_a[1] = { 8 }, ne_b[2] = { 32, 2 };
	gb_header(b, version, 2, 2);
	gb_kv_str(b, "general.architecture", "test");
	gb_kv_u32(b, "test.block_count", 2);
	gb_tensor(b, "a", 1, ne_a, PT_TYPE_F32, 0);
	gb_tensor(b, "b", 2, ne_b, PT_TYPE_Q8_0, 32);
	gb_pad(b, 32);
	for (int i = 0; i < 32 + 68; i++)
		gb_u8(b, (uint8_t)i);
	gb_pad(b, 32);
}

/* Header + one KV whose value bytes the caller appends (type first). */
static void one_kv(struct gb *b, const char *key)
{
	gb_header(b, 3, 0, 1);
	gb_str(b, key);
}

/* One tensor with the given shape/type at offset, data of nbytes zeros. */
static void one_tensor(struct gb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
		       uint32_t type, uint64_t offset, size_t nbytes)
{
	gb_header(b, 3, 1, 0);
	gb_tensor(b, name, n_dims, ne, type, offset);
	gb_pad(b, 32);
	gb_zeros(b, nbytes);
}

PT_TEST(test_gguf_opens_valid_file)
{
	struct gb b = { 0 };
	pt_gguf *g;
	const struct pt_gguf_tensor *t;
	valid_file(&b, 3);
	g = OPEN_OK(&b);
	REQUIRE(g);
	CHECK_EQ_INT(pt_gguf_version(g), 3);
	CHECK_EQ_INT(pt_gguf_alignment(g), 32);
	CHECK_EQ_INT(pt_gguf_kv_count(g), 2);
	CHECK_EQ_INT(pt_gguf_tensor_count(g), 2);
	CHECK_EQ_INT(pt_gguf_file_size(g), b.n);
	CHECK_EQ_INT(pt_gguf_data_offset(g) % 32, 0);
	CHECK(pt_gguf_fd(g) == -1 && pt_gguf_path(g) == NULL);
	t = pt_gguf_find_tensor(g, "b");
	REQUIRE(t);
	CHECK_EQ_INT(t->nbytes, 68);
	CHECK_EQ_INT(t->offset, 32);
	CHECK_EQ_INT(t->ne[0], 32);
	CHECK_EQ_INT(t->ne[1], 2);
	CHECK_EQ_INT(t->ne[2], 1);
	CHECK_EQ_INT(t->file_offset, pt_gguf_data_offset(g) + 32);
	CHECK(t->data == pt_gguf_base(g) + t->file_offset);
	CHECK_EQ_INT(t->data[0], 32);
	CHECK(pt_gguf_tensor_at(g, 0) == pt_gguf_find_tensor(g, "a"));
	CHECK(pt_gguf_find_tensor(g, "c") == NULL);
	CHECK(pt_gguf_find_tensor(g, "") == NULL);
	CHECK(pt_gguf_find_kv(g, "test.block_count") == pt_gguf_kv_at(g, 1));
	CHECK(pt_gguf_find_kv(g, "test.block_coun") == NULL);
	CHECK(pt_gguf_kv_at(g, 2) == NULL && pt_gguf_tensor_at(g, 2) == NULL);
	pt_gguf_close(g);
	pt_gguf_close(NULL);
	gb_free(&b);
}

PT_TEST(test_gguf_accepts_version_2)
{
	struct gb b = { 0 };
	pt_gguf *g;
	valid_file(&b, 2);
	g = OPEN_OK(&b);
	CHECK(g && pt_gguf_version(g) == 2);
	pt_gguf_close(g);
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_bad_magic_and_tiny_files)
{
	struct gb b = { 0 };
	valid_file(&b, 3);
	b.p[0] = 'g';
	EXPECT_FAIL(&b, PT_E_FORMAT, "bad magic");
	b.p[0] = 'G';
	b.n = 3;
	EXPECT_FAIL(&b, PT_E_FORMAT, "bad magic");
	b.n = 0;
	EXPECT_FAIL(&b, PT_E_FORMAT, "bad magic");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_versions)
{
	struct gb b = { 0 };
	valid_file(&b, 1);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "version 1 is obsolete");
	gb_put_u32(&b, 4, 0x03000000u);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "byte-swapped");
	gb_put_u32(&b, 4, 0x00020000u);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "byte-swapped");
	gb_put_u32(&b, 4, 4);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "version 4 not supported");
	gb_put_u32(&b, 4, 0);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "version 0 not supported");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_truncated_header)
{
	struct gb b = { 0 };
	valid_file(&b, 3);
	for (size_t n = 4; n < 24; n++) {
		b.n = n;
		EXPECT_FAIL(&b, PT_E_FORMAT, "truncated file");
	}
	b.n = 12;
	EXPECT_FAIL(&b, PT_E_FORMAT, "header tensor count needs 8 bytes, 4 left at offset 8");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_counts_too_large_for_file)
{
	struct gb b = { 0 };
	gb_header(&b, 3, 3, 0);
	gb_zeros(&b, 3 * 33 - 1);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor count 3 too large");
	gb_free(&b);
	gb_header(&b, 3, 0, 5);
	gb_zeros(&b, 5 * 14 - 1);
	EXPECT_FAIL(&b, PT_E_FORMAT, "metadata count 5 too large");
	gb_free(&b);
	gb_header(&b, 3, UINT64_MAX, UINT64_MAX);
	EXPECT_FAIL(&b, PT_E_LIMIT, "tensor count 18446744073709551615 exceeds");
	gb_free(&b);
	gb_header(&b, 3, 0, UINT64_MAX);
	EXPECT_FAIL(&b, PT_E_LIMIT, "metadata count 18446744073709551615 exceeds");
	gb_free(&b);
}

PT_TEST(test_gguf_count_limits_at_n_and_n_plus_1)
{
	struct gb b = { 0 };
	struct pt_gguf_limits lim = pt_gguf_default_limits();
	pt_gguf *g;
	lim.max_kv = 2;
	lim.max_tensors = 2;
	valid_file(&b, 3);
	g = open_ok(&b, &lim, __LINE__);
	pt_gguf_close(g);
	lim.max_kv = 1;
	EXPECT_FAIL_LIM(&b, &lim, PT_E_LIMIT, "metadata count 2 exceeds the limit 1");
	lim.max_kv = 2;
	lim.max_tensors = 1;
	EXPECT_FAIL_LIM(&b, &lim, PT_E_LIMIT, "tensor count 2 exceeds the limit 1");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_string_past_eof)
{
	struct gb b = { 0 };
	gb_header(&b, 3, 0, 1);
	gb_u64(&b, 100);
	gb_bytes(&b, "general.name", 12);
	gb_zeros(&b, 10);
	EXPECT_FAIL(&b, PT_E_FORMAT, "metadata key length 100 runs past the end of the file at "
				     "offset 24");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_STRING);
	gb_u64(&b, 5);
	gb_bytes(&b, "abcd", 4);
	EXPECT_FAIL(&b, PT_E_FORMAT, "string value length 5 runs past the end");
	gb_free(&b);
}

PT_TEST(test_gguf_string_limit_at_n_and_n_plus_1)
{
	struct gb b = { 0 };
	struct pt_gguf_limits lim = pt_gguf_default_limits();
	pt_gguf *g;
	lim.max_string = 5;
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_STRING);
	gb_str(&b, "12345");
	g = open_ok(&b, &lim, __LINE__);
	pt_gguf_close(g);
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_STRING);
	gb_str(&b, "123456");
	EXPECT_FAIL_LIM(&b, &lim, PT_E_LIMIT, "string value length 6 exceeds the limit 5");
	gb_free(&b);
	CHECK_EQ_INT(pt_gguf_default_limits().max_string, PT_GGUF_MAX_STRING);
}

PT_TEST(test_gguf_array_limit_at_n_and_n_plus_1)
{
	struct gb b = { 0 };
	struct pt_gguf_limits lim = pt_gguf_default_limits();
	pt_gguf *g;
	lim.max_array = 3;
	for (uint64_t n = 3; n <= 4; n++) {
		one_kv(&b, "arr");
		gb_u32(&b, PT_GGUF_ARRAY);
		gb_u32(&b, PT_GGUF_U8);
		gb_u64(&b, n);
		gb_zeros(&b, n);
		if (n == 3) {
			g = open_ok(&b, &lim, __LINE__);
			pt_gguf_close(g);
		} else {
			EXPECT_FAIL_LIM(&b, &lim, PT_E_LIMIT, "key 'arr': array count 4 exceeds the "
							      "limit 3");
		}
		gb_free(&b);
	}
	CHECK_EQ_INT(pt_gguf_default_limits().max_array, PT_GGUF_MAX_ARRAY);
}

PT_TEST(test_gguf_rejects_bad_keys)
{
	struct gb b = { 0 };
	one_kv(&b, "");
	gb_u32(&b, PT_GGUF_U8);
	gb_u8(&b, 1);
	gb_u8(&b, 0); /* a valid entry is at least 14 bytes */
	EXPECT_FAIL(&b, PT_E_FORMAT, "empty metadata key");
	gb_free(&b);
	gb_header(&b, 3, 0, 2);
	gb_kv_u32(&b, "dup.key", 1);
	gb_kv_u32(&b, "dup.key", 2);
	EXPECT_FAIL(&b, PT_E_FORMAT, "duplicate metadata key 'dup.key' at offset 47");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_bad_value_types)
{
	struct gb b = { 0 };
	one_kv(&b, "k");
	gb_u32(&b, 13);
	gb_u32(&b, 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "key 'k': bad value type 13 at offset 33");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u64(&b, 0);
	EXPECT_FAIL(&b, PT_E_UNSUPPORTED, "key 'k': nested arrays");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, 99);
	gb_u64(&b, 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "bad array element type 99");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_U32);
	gb_u64(&b, 1000);
	gb_zeros(&b, 3996);
	EXPECT_FAIL(&b, PT_E_FORMAT, "array of 1000 elements runs past the end");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_STRING);
	gb_u64(&b, 2);
	gb_str(&b, "ok");
	gb_u64(&b, 50);
	gb_zeros(&b, 10);
	EXPECT_FAIL(&b, PT_E_FORMAT, "array string length 50 runs past the end");
	gb_free(&b);
	one_kv(&b, "k");
	gb_u32(&b, PT_GGUF_U64);
	gb_u32(&b, 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "value needs 8 bytes, 4 left");
	gb_free(&b);
}

PT_TEST(test_gguf_bool_is_strict)
{
	/* Decision: the spec's 0/1 rule is enforced (ggml reads any non-zero as true). */
	struct gb b = { 0 };
	pt_gguf *g;
	bool v = false;
	one_kv(&b, "flag");
	gb_u32(&b, PT_GGUF_BOOL);
	gb_u8(&b, 1);
	g = OPEN_OK(&b);
	CHECK(g && pt_gguf_get_bool(g, "flag", false, &v, NULL, NULL) == PT_OK && v);
	pt_gguf_close(g);
	b.p[b.n - 1] = 2;
	EXPECT_FAIL(&b, PT_E_FORMAT, "key 'flag': bool value 2 is not 0 or 1");
	gb_free(&b);
	one_kv(&b, "flags");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_BOOL);
	gb_u64(&b, 3);
	gb_u8(&b, 0);
	gb_u8(&b, 1);
	gb_u8(&b, 2);
	EXPECT_FAIL(&b, PT_E_FORMAT, "bool element 2 is 2");
	gb_free(&b);
}

static void alignment_file(struct gb *b, uint32_t vtype, uint64_t value)
{
	uint64_t ne[1] = { 8 };
	gb_header(b, 3, 1, 1);
	gb_str(b, "general.alignment");
	gb_u32(b, vtype);
	if (vtype == PT_GGUF_U64)
		gb_u64(b, value);
	else
		gb_u32(b, (uint32_t)value);
	gb_tensor(b, "t", 1, ne, PT_TYPE_F32, 0);
	gb_pad(b, value && vtype == PT_GGUF_U32 && !(value & (value - 1)) ? value : 32);
	gb_zeros(b, 32);
}

PT_TEST(test_gguf_alignment_rules)
{
	struct gb b = { 0 };
	pt_gguf *g;
	alignment_file(&b, PT_GGUF_U32, 64);
	g = OPEN_OK(&b);
	CHECK(g && pt_gguf_alignment(g) == 64 && pt_gguf_data_offset(g) % 64 == 0);
	pt_gguf_close(g);
	gb_free(&b);
	alignment_file(&b, PT_GGUF_U64, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "'general.alignment' has type u64, expected u32");
	gb_free(&b);
	alignment_file(&b, PT_GGUF_I32, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "'general.alignment' has type i32, expected u32");
	gb_free(&b);
	alignment_file(&b, PT_GGUF_U32, 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "'general.alignment' is 0, not a power of two");
	gb_free(&b);
	alignment_file(&b, PT_GGUF_U32, 48);
	EXPECT_FAIL(&b, PT_E_FORMAT, "'general.alignment' is 48, not a power of two");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_bad_dims)
{
	struct gb b = { 0 };
	uint64_t ne[5] = { 8, 1, 1, 1, 1 };
	one_tensor(&b, "t", 0, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 't': n_dims 0 not in 1..4");
	gb_free(&b);
	one_tensor(&b, "t", 5, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 't': n_dims 5 not in 1..4");
	gb_free(&b);
	ne[1] = 0;
	one_tensor(&b, "t", 2, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 't': dimension 1 is 0");
	gb_free(&b);
	ne[1] = 1ull << 63;
	one_tensor(&b, "t", 2, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 't': dimension 1 is 9223372036854775808");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_element_count_overflow)
{
	struct gb b = { 0 };
	uint64_t ne[4] = { 1ull << 32, 1ull << 32, 1, 1 };
	one_tensor(&b, "big", 2, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'big': element count overflows");
	gb_free(&b);
	ne[0] = 1ull << 62;
	ne[1] = 2; /* 2^63 elements: past INT64_MAX like ggml's check */
	one_tensor(&b, "big", 2, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'big': element count overflows");
	gb_free(&b);
	ne[0] = 1ull << 62;
	ne[1] = 1; /* elements fit, bytes (2^64) do not */
	one_tensor(&b, "big", 2, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'big': byte size overflows");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_unknown_and_removed_types)
{
	static const uint32_t bad[] = { 4, 5, 31, 32, 33, 36, 37, 38, PT_TYPE_COUNT, 1000 };
	uint64_t ne[1] = { 256 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct gb b = { 0 };
		char want[64];
		one_tensor(&b, "blk.0.w", 1, ne, bad[i], 0, 1024);
		snprintf(want, sizeof want, "tensor 'blk.0.w': unknown tensor type %u", bad[i]);
		EXPECT_FAIL(&b, PT_E_UNSUPPORTED, want);
		gb_free(&b);
	}
}

PT_TEST(test_gguf_rejects_row_not_multiple_of_block)
{
	struct gb b = { 0 };
	uint64_t ne[2] = { 33, 1 };
	one_tensor(&b, "q", 2, ne, PT_TYPE_Q8_0, 0, 64);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'q': row length 33 is not a multiple of the Q8_0 "
				     "block size 32");
	gb_free(&b);
	ne[0] = 128;
	one_tensor(&b, "k", 2, ne, PT_TYPE_Q4_K, 0, 256);
	EXPECT_FAIL(&b, PT_E_FORMAT, "Q4_K block size 256");
	gb_free(&b);
}

PT_TEST(test_gguf_tensor_name_length)
{
	struct gb b = { 0 };
	uint64_t ne[1] = { 8 };
	char name[70];
	pt_gguf *g;
	memset(name, 'n', sizeof name);
	name[PT_GGUF_MAX_NAME] = '\0';
	one_tensor(&b, name, 1, ne, PT_TYPE_F32, 0, 32);
	g = OPEN_OK(&b);
	CHECK(g && pt_gguf_find_tensor(g, name) != NULL);
	pt_gguf_close(g);
	gb_free(&b);
	name[PT_GGUF_MAX_NAME] = 'n';
	name[PT_GGUF_MAX_NAME + 1] = '\0';
	one_tensor(&b, name, 1, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "is 64 bytes, longer than 63");
	gb_free(&b);
	one_tensor(&b, "", 1, ne, PT_TYPE_F32, 0, 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "empty tensor name");
	gb_free(&b);
}

/* Two F32 [8] tensors with the given names and offsets, 96 data bytes. */
static void two_tensors(struct gb *b, const char *n0, uint64_t o0, const char *n1, uint64_t o1)
{
	uint64_t ne[1] = { 8 };
	gb_header(b, 3, 2, 0);
	gb_tensor(b, n0, 1, ne, PT_TYPE_F32, o0);
	gb_tensor(b, n1, 1, ne, PT_TYPE_F32, o1);
	gb_pad(b, 32);
	gb_zeros(b, 96);
}

PT_TEST(test_gguf_rejects_duplicate_tensor_name)
{
	struct gb b = { 0 };
	two_tensors(&b, "w", 0, "w", 32);
	EXPECT_FAIL(&b, PT_E_FORMAT, "duplicate tensor name 'w' at offset 57");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_bad_offsets)
{
	struct gb b = { 0 };
	pt_gguf *g;
	two_tensors(&b, "x", 0, "y", 32);
	g = OPEN_OK(&b);
	pt_gguf_close(g);
	gb_free(&b);
	two_tensors(&b, "x", 0, "y", 33);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'y': offset 33 is not a multiple of the alignment 32");
	gb_free(&b);
	two_tensors(&b, "x", 0, "y", 64);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'y': offset 64, expected 32");
	gb_free(&b);
	two_tensors(&b, "x", 0, "y", 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'y': offset 0, expected 32");
	gb_free(&b);
	two_tensors(&b, "x", 32, "y", 0);
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'x': offset 32, expected 0");
	gb_free(&b);
}

PT_TEST(test_gguf_rejects_data_past_eof)
{
	struct gb b = { 0 };
	size_t data_start;
	pt_gguf *g;
	valid_file(&b, 3);
	g = OPEN_OK(&b);
	REQUIRE(g);
	data_start = (size_t)pt_gguf_data_offset(g);
	pt_gguf_close(g);
	b.n = data_start + 32 + 68; /* no trailing padding: still valid (llama.cpp mmap rule) */
	g = OPEN_OK(&b);
	pt_gguf_close(g);
	b.n = data_start + 32 + 67;
	EXPECT_FAIL(&b, PT_E_FORMAT, "tensor 'b': data (68 bytes) runs past the end of the file");
	b.n = data_start - 1;
	EXPECT_FAIL(&b, PT_E_FORMAT, "data section starts at");
	gb_free(&b);
}

PT_TEST(test_gguf_getters)
{
	struct gb b = { 0 };
	pt_gguf *g;
	struct pt_error e = { 0 };
	uint32_t u = 0;
	int32_t i = 0;
	uint64_t u64 = 0;
	float f = 0;
	bool found = true, bv = false;
	struct pt_str s;
	const struct pt_gguf_kv *arr;
	gb_header(&b, 3, 0, 6);
	gb_kv_u32(&b, "u", 7);
	gb_str(&b, "neg");
	gb_u32(&b, PT_GGUF_I32);
	gb_u32(&b, (uint32_t)-5);
	gb_str(&b, "f");
	gb_u32(&b, PT_GGUF_F32);
	gb_u32(&b, 0x3fc00000u); /* 1.5 */
	gb_kv_str(&b, "s", "hello");
	gb_str(&b, "ai");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_I16);
	gb_u64(&b, 2);
	gb_u8(&b, 0xff);
	gb_u8(&b, 0xff); /* -1 */
	gb_u8(&b, 3);
	gb_u8(&b, 0);
	gb_str(&b, "as");
	gb_u32(&b, PT_GGUF_ARRAY);
	gb_u32(&b, PT_GGUF_STRING);
	gb_u64(&b, 2);
	gb_str(&b, "x");
	gb_str(&b, "yz");
	g = OPEN_OK(&b);
	REQUIRE(g);
	CHECK(pt_gguf_get_u32(g, "u", 0, &u, &found, &e) == PT_OK && u == 7 && found);
	CHECK(pt_gguf_get_u32(g, "missing", 9, &u, &found, &e) == PT_OK && u == 9 && !found);
	CHECK(pt_gguf_get_u64(g, "u", 0, &u64, NULL, &e) == PT_OK && u64 == 7);
	CHECK(pt_gguf_get_i32(g, "neg", 0, &i, NULL, &e) == PT_OK && i == -5);
	CHECK(pt_gguf_get_i32(g, "u", 0, &i, NULL, &e) == PT_OK && i == 7);
	CHECK_EQ_INT(pt_gguf_get_u32(g, "neg", 0, &u, NULL, &e), PT_E_FORMAT);
	CHECK_CONTAINS(e.msg, "key 'neg' value does not fit u32");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_get_u32(g, "s", 0, &u, NULL, &e), PT_E_FORMAT);
	CHECK_CONTAINS(e.msg, "key 's' has type string, expected u32");
	pt_error_clear(&e);
	CHECK(pt_gguf_get_f32(g, "f", 0, &f, NULL, &e) == PT_OK && f == 1.5f);
	CHECK(pt_gguf_get_f32(g, "nof", 2.5f, &f, NULL, &e) == PT_OK && f == 2.5f);
	CHECK_EQ_INT(pt_gguf_get_f32(g, "u", 0, &f, NULL, &e), PT_E_FORMAT);
	pt_error_clear(&e);
	CHECK(pt_gguf_get_bool(g, "nob", true, &bv, NULL, &e) == PT_OK && bv);
	CHECK_EQ_INT(pt_gguf_get_bool(g, "u", false, &bv, NULL, &e), PT_E_FORMAT);
	pt_error_clear(&e);
	CHECK(pt_gguf_get_str(g, "s", &s, &found, &e) == PT_OK && found && pt_str_eq(s, "hello"));
	CHECK(pt_gguf_get_str(g, "nos", &s, &found, &e) == PT_OK && !found && s.ptr == NULL);
	CHECK(pt_gguf_get_arr(g, "ai", PT_GGUF_I16, &arr, &found, &e) == PT_OK && arr);
	if (arr) {
		CHECK_EQ_INT(arr->arr_count, 2);
		CHECK_EQ_INT(pt_gguf_arr_i32(arr, 0), -1);
		CHECK_EQ_INT(pt_gguf_arr_i32(arr, 1), 3);
		CHECK_EQ_INT(pt_gguf_arr_u32(arr, 1), 3);
		CHECK(pt_gguf_arr_f32(arr, 0) == -1.0f);
	}
	CHECK_EQ_INT(pt_gguf_get_arr(g, "ai", PT_GGUF_I32, &arr, NULL, &e), PT_E_FORMAT);
	CHECK_CONTAINS(e.msg, "has type array of i16, expected array of i32");
	pt_error_clear(&e);
	CHECK(pt_gguf_get_arr(g, "as", PT_GGUF_STRING, &arr, NULL, &e) == PT_OK && arr);
	if (arr) {
		struct pt_str v[2];
		pt_gguf_arr_strs(arr, v);
		CHECK(pt_str_eq(v[0], "x") && pt_str_eq(v[1], "yz"));
	}
	CHECK(pt_gguf_get_arr(g, "nope", PT_GGUF_STRING, &arr, &found, &e) == PT_OK && !arr &&
	      !found);
	CHECK_EQ_STR(pt_gguf_vtype_name(PT_GGUF_F64), "f64");
	CHECK_EQ_STR(pt_gguf_vtype_name((enum pt_gguf_vtype)77), "invalid");
	pt_gguf_close(g);
	gb_free(&b);
}

PT_TEST(test_gguf_many_tensors_by_name)
{
	struct gb b = { 0 };
	uint64_t ne[1] = { 8 };
	enum { N = 3000 };
	char name[32];
	pt_gguf *g;
	gb_header(&b, 3, N, 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "blk.%d.w", i);
		gb_tensor(&b, name, 1, ne, PT_TYPE_F32, 32ull * (uint64_t)i);
	}
	gb_pad(&b, 32);
	gb_zeros(&b, 32 * N);
	g = OPEN_OK(&b);
	REQUIRE(g);
	for (int i = 0; i < N; i++) {
		const struct pt_gguf_tensor *t;
		snprintf(name, sizeof name, "blk.%d.w", i);
		t = pt_gguf_find_tensor(g, name);
		if (t != pt_gguf_tensor_at(g, (uint64_t)i)) {
			CHECK(t == pt_gguf_tensor_at(g, (uint64_t)i));
			break;
		}
	}
	CHECK(pt_gguf_find_tensor(g, "blk.3000.w") == NULL);
	pt_gguf_close(g);
	gb_free(&b);
}

PT_TEST(test_gguf_open_alloc_failure_sweep)
{
	struct gb b = { 0 };
	const char *path = pt_test_tmpfile("sweep.gguf");
	FILE *f;
	valid_file(&b, 3);
	f = fopen(path, "wb");
	REQUIRE(f);
	fwrite(b.p, 1, b.n, f);
	fclose(f);
	for (int mode = 0; mode < 2; mode++) {
		uint64_t k;
		for (k = 1; k < 100; k++) {
			struct pt_error e = { 0 };
			pt_gguf *g = NULL;
			enum pt_status st;
			pt_alloc_fail_at(k);
			st = mode ? pt_gguf_open(path, &g, &e) : pt_gguf_open_memory(b.p, b.n, &g, &e);
			pt_alloc_fail_at(0);
			if (st == PT_OK) {
				CHECK(g != NULL);
				pt_gguf_close(g);
				break;
			}
			CHECK_EQ_INT(st, PT_E_NOMEM);
			CHECK(g == NULL);
			CHECK_CONTAINS(e.msg, "out of memory");
		}
		CHECK(k > 2 && k < 100);
	}
	gb_free(&b);
}

PT_TEST(test_gguf_open_file_errors)
{
	struct pt_error e = { 0 };
	pt_gguf *g = (pt_gguf *)1;
	const char *path = pt_test_tmpfile("empty.gguf");
	FILE *f;
	CHECK_EQ_INT(pt_gguf_open("/nonexistent/x.gguf", &g, &e), PT_E_IO);
	CHECK(g == NULL);
	CHECK_CONTAINS(e.msg, "cannot open /nonexistent/x.gguf");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_open(pt_test_tmpdir(), &g, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "not a regular file");
	pt_error_clear(&e);
	f = fopen(path, "wb");
	REQUIRE(f);
	fclose(f);
	CHECK_EQ_INT(pt_gguf_open(path, &g, &e), PT_E_FORMAT);
	CHECK_CONTAINS(e.msg, "bad magic");
}
