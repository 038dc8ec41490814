/* test_gguf_write.c - GGUF writer: byte-exact output against a hand-built file, round trips
 * through the reader, streamed data in odd pieces, and every misuse error. */
#include "gguf/gguf.h"
#include "gguf_builder.h"
#include "quant/types.h"
#include "test.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long len;
	*n = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = pt_malloc((size_t)len + 1);
	if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
		pt_free(p);
		p = NULL;
	}
	fclose(f);
	*n = p ? (size_t)len : 0;
	return p;
}

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + 7);
}

/* The writer calls for the reference file; returns the writer status of the first failure. */
static enum pt_status write_reference(const char *path, struct pt_error *e)
{
	static const char *const strs[] = { "alpha", "", "γάμμα" };
	const uint8_t u8v = 200, i8v = 0x80, boolv[3] = { 1, 0, 1 };
	const uint8_t u16v[2] = { 0x34, 0x12 }, i16v[2] = { 0xfe, 0xff };
	const uint8_t i64v[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	const uint8_t f64v[8] = { 0, 0, 0, 0, 0, 0, 0xf8, 0x3f }; /* 1.5 */
	const float farr[3] = { 1.0f, -2.0f, 0.5f };
	const uint64_t ne_a[1] = { 5 }, ne_b[2] = { 32, 3 }, ne_c[3] = { 2, 2, 2 };
	pt_gguf_writer *w = NULL;
	uint8_t piece[7];
	uint64_t total = 20 + 102 + 16, done = 0;
	enum pt_status st = pt_gguf_writer_create(path, 64, &w, e);
	if (st != PT_OK)
		return st;
#define TRY(x) do { if (st == PT_OK) st = (x); } while (0)
	TRY(pt_gguf_writer_set_str(w, "general.architecture", "test", e));
	TRY(pt_gguf_writer_set_raw(w, "v.u8", PT_GGUF_U8, &u8v, 1, e));
	TRY(pt_gguf_writer_set_raw(w, "v.i8", PT_GGUF_I8, &i8v, 1, e));
	TRY(pt_gguf_writer_set_raw(w, "v.u16", PT_GGUF_U16, u16v, 2, e));
	TRY(pt_gguf_writer_set_raw(w, "v.i16", PT_GGUF_I16, i16v, 2, e));
	TRY(pt_gguf_writer_set_u32(w, "v.u32", 0xdeadbeef, e));
	TRY(pt_gguf_writer_set_i32(w, "v.i32", -7, e));
	TRY(pt_gguf_writer_set_f32(w, "v.f32", 0.25f, e));
	TRY(pt_gguf_writer_set_bool(w, "v.bool", true, e));
	TRY(pt_gguf_writer_set_u64(w, "v.u64", 1ull << 40, e));
	TRY(pt_gguf_writer_set_raw(w, "v.i64", PT_GGUF_I64, i64v, 8, e));
	TRY(pt_gguf_writer_set_raw(w, "v.f64", PT_GGUF_F64, f64v, 8, e));
	TRY(pt_gguf_writer_set_arr(w, "v.arr_f32", PT_GGUF_F32, farr, 3, e));
	TRY(pt_gguf_writer_set_arr(w, "v.arr_bool", PT_GGUF_BOOL, boolv, 3, e));
	TRY(pt_gguf_writer_set_arr(w, "v.arr_empty", PT_GGUF_U32, NULL, 0, e));
	TRY(pt_gguf_writer_set_arr_str(w, "v.arr_str", strs, NULL, 3, e));
	TRY(pt_gguf_writer_set_u32(w, "v.u32", 42, e)); /* replaced in place */
	TRY(pt_gguf_writer_add_tensor(w, "a", 1, ne_a, PT_TYPE_F32, e));
	TRY(pt_gguf_writer_add_tensor(w, "b", 2, ne_b, PT_TYPE_Q8_0, e));
	TRY(pt_gguf_writer_add_tensor(w, "c", 3, ne_c, PT_TYPE_F16, e));
	TRY(pt_gguf_writer_begin_data(w, e));
	while (st == PT_OK && done < total) {
		size_t k = total - done < sizeof piece ? (size_t)(total - done) : sizeof piece;
		for (size_t j = 0; j < k; j++)
			piece[j] = pattern(done + j);
		TRY(pt_gguf_writer_write_data(w, piece, k, e));
		done += k;
	}
	TRY(pt_gguf_writer_finish(w, e));
#undef TRY
	pt_gguf_writer_destroy(w);
	return st;
}

/* The same file built byte by byte, as llama.cpp's writer lays it out. */
static void build_reference(struct gb *b)
{
	const uint64_t ne_a[1] = { 5 }, ne_b[2] = { 32, 3 }, ne_c[3] = { 2, 2, 2 };
	const uint64_t sizes[3] = { 20, 102, 16 };
	uint64_t k = 0;
	gb_header(b, 3, 3, 17);
	gb_kv_u32(b, "general.alignment", 64);
	gb_kv_str(b, "general.architecture", "test");
	gb_str(b, "v.u8"); gb_u32(b, 0); gb_u8(b, 200);
	gb_str(b, "v.i8"); gb_u32(b, 1); gb_u8(b, 0x80);
	gb_str(b, "v.u16"); gb_u32(b, 2); gb_u8(b, 0x34); gb_u8(b, 0x12);
	gb_str(b, "v.i16"); gb_u32(b, 3); gb_u8(b, 0xfe); gb_u8(b, 0xff);
	gb_kv_u32(b, "v.u32", 42);
	gb_str(b, "v.i32"); gb_u32(b, 5); gb_u32(b, (uint32_t)-7);
	gb_str(b, "v.f32"); gb_u32(b, 6); gb_u32(b, 0x3e800000u);
	gb_str(b, "v.bool"); gb_u32(b, 7); gb_u8(b, 1);
	gb_str(b, "v.u64"); gb_u32(b, 10); gb_u64(b, 1ull << 40);
	gb_str(b, "v.i64"); gb_u32(b, 11); gb_u64(b, UINT64_MAX);
	gb_str(b, "v.f64"); gb_u32(b, 12); gb_u64(b, 0x3ff8000000000000ull);
	gb_str(b, "v.arr_f32"); gb_u32(b, 9); gb_u32(b, 6); gb_u64(b, 3);
	gb_u32(b, 0x3f800000u); gb_u32(b, 0xc0000000u); gb_u32(b, 0x3f000000u);
	gb_str(b, "v.arr_bool"); gb_u32(b, 9); gb_u32(b, 7); gb_u64(b, 3);
	gb_u8(b, 1); gb_u8(b, 0); gb_u8(b, 1);
	gb_str(b, "v.arr_empty"); gb_u32(b, 9); gb_u32(b, 4); gb_u64(b, 0);
	gb_str(b, "v.arr_str"); gb_u32(b, 9); gb_u32(b, 8); gb_u64(b, 3);
	gb_str(b, "alpha"); gb_str(b, ""); gb_str(b, "γάμμα");
	gb_tensor(b, "a", 1, ne_a, PT_TYPE_F32, 0);
	gb_tensor(b, "b", 2, ne_b, PT_TYPE_Q8_0, 64);
	gb_tensor(b, "c", 3, ne_c, PT_TYPE_F16, 192);
	gb_pad(b, 64);
	for (int t = 0; t < 3; t++) {
		for (uint64_t i = 0; i < sizes[t]; i++)
			gb_u8(b, pattern(k++));
		gb_pad(b, 64);
	}
}

PT_TEST(test_gguf_write_matches_reference_bytes)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("ref.gguf");
	struct gb b = { 0 };
	uint8_t *got;
	size_t n;
	CHECK_EQ_INT(write_reference(path, &e), PT_OK);
	CHECK_EQ_STR(e.msg, "");
	build_reference(&b);
	got = slurp(path, &n);
	REQUIRE(got);
	CHECK_EQ_INT(n, b.n);
	if (n == b.n)
		for (size_t i = 0; i < n; i++)
			if (got[i] != b.p[i]) {
				pt_test_fail(__FILE__, __LINE__, "byte %zu: %u != %u", i, got[i],
					     b.p[i]);
				break;
			}
	pt_free(got);
	gb_free(&b);
}

PT_TEST(test_gguf_write_round_trip)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("rt.gguf");
	pt_gguf *g = NULL;
	const struct pt_gguf_kv *kv;
	const struct pt_gguf_tensor *t;
	uint32_t u = 0;
	int32_t i = 0;
	uint64_t u64 = 0;
	float f = 0;
	bool bv = false;
	struct pt_str s, strs[3];
	REQUIRE(write_reference(path, &e) == PT_OK);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	CHECK_EQ_INT(pt_gguf_version(g), 3);
	CHECK_EQ_INT(pt_gguf_alignment(g), 64);
	CHECK_EQ_INT(pt_gguf_kv_count(g), 17);
	CHECK(pt_gguf_fd(g) >= 0);
	CHECK_EQ_STR(pt_gguf_path(g), path);
	CHECK(pt_gguf_get_str(g, "general.architecture", &s, NULL, &e) == PT_OK &&
	      pt_str_eq(s, "test"));
	CHECK(pt_gguf_get_u32(g, "v.u8", 0, &u, NULL, &e) == PT_OK && u == 200);
	CHECK(pt_gguf_get_i32(g, "v.i8", 0, &i, NULL, &e) == PT_OK && i == -128);
	CHECK(pt_gguf_get_u32(g, "v.u16", 0, &u, NULL, &e) == PT_OK && u == 0x1234);
	CHECK(pt_gguf_get_i32(g, "v.i16", 0, &i, NULL, &e) == PT_OK && i == -2);
	CHECK(pt_gguf_get_u32(g, "v.u32", 0, &u, NULL, &e) == PT_OK && u == 42);
	CHECK(pt_gguf_kv_at(g, 6) == pt_gguf_find_kv(g, "v.u32")); /* kept its place */
	CHECK(pt_gguf_get_i32(g, "v.i32", 0, &i, NULL, &e) == PT_OK && i == -7);
	CHECK(pt_gguf_get_f32(g, "v.f32", 0, &f, NULL, &e) == PT_OK && f == 0.25f);
	CHECK(pt_gguf_get_bool(g, "v.bool", false, &bv, NULL, &e) == PT_OK && bv);
	CHECK(pt_gguf_get_u64(g, "v.u64", 0, &u64, NULL, &e) == PT_OK && u64 == 1ull << 40);
	CHECK(pt_gguf_get_i32(g, "v.i64", 0, &i, NULL, &e) == PT_OK && i == -1);
	CHECK(pt_gguf_get_f32(g, "v.f64", 0, &f, NULL, &e) == PT_OK && f == 1.5f);
	CHECK(pt_gguf_get_arr(g, "v.arr_f32", PT_GGUF_F32, &kv, NULL, &e) == PT_OK && kv &&
	      kv->arr_count == 3 && pt_gguf_arr_f32(kv, 1) == -2.0f);
	CHECK(pt_gguf_get_arr(g, "v.arr_bool", PT_GGUF_BOOL, &kv, NULL, &e) == PT_OK && kv &&
	      pt_gguf_arr_u32(kv, 0) == 1 && pt_gguf_arr_u32(kv, 1) == 0);
	CHECK(pt_gguf_get_arr(g, "v.arr_empty", PT_GGUF_U32, &kv, NULL, &e) == PT_OK && kv &&
	      kv->arr_count == 0);
	CHECK(pt_gguf_get_arr(g, "v.arr_str", PT_GGUF_STRING, &kv, NULL, &e) == PT_OK && kv);
	if (kv && kv->arr_count == 3) {
		pt_gguf_arr_strs(kv, strs);
		CHECK(pt_str_eq(strs[0], "alpha") && pt_str_eq(strs[1], "") &&
		      pt_str_eq(strs[2], "γάμμα"));
	}
	CHECK_EQ_STR(e.msg, "");
	t = pt_gguf_find_tensor(g, "c");
	REQUIRE(t);
	CHECK_EQ_INT(t->offset, 192);
	CHECK_EQ_INT(t->nbytes, 16);
	CHECK_EQ_INT(t->n_dims, 3);
	CHECK_EQ_INT(t->data[0], pattern(122));
	CHECK_EQ_INT(pt_gguf_find_tensor(g, "b")->data[101], pattern(121));
	pt_gguf_close(g);
}

/* One F32 [4] tensor; returns the writer ready for data. */
static pt_gguf_writer *small_writer(const char *path, struct pt_error *e)
{
	const uint64_t ne[1] = { 4 };
	pt_gguf_writer *w = NULL;
	if (pt_gguf_writer_create(path, 32, &w, e) != PT_OK)
		return NULL;
	if (pt_gguf_writer_add_tensor(w, "t", 1, ne, PT_TYPE_F32, e) != PT_OK ||
	    pt_gguf_writer_begin_data(w, e) != PT_OK) {
		pt_gguf_writer_destroy(w);
		return NULL;
	}
	return w;
}

PT_TEST(test_gguf_write_rejects_too_many_bytes)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("many.gguf");
	uint8_t bytes[17] = { 0 };
	struct stat st;
	pt_gguf_writer *w = small_writer(path, &e);
	REQUIRE(w);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, bytes, 17, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "17 bytes given, only 16 tensor bytes remain");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, bytes, 16, &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, bytes, 1, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_finish(w, &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, bytes, 1, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "after finish");
	pt_gguf_writer_destroy(w);
	CHECK(stat(path, &st) == 0 && st.st_size == 96);
}

PT_TEST(test_gguf_write_finish_with_missing_bytes)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("short.gguf");
	uint8_t bytes[5] = { 0 };
	struct stat st;
	pt_gguf_writer *w = small_writer(path, &e);
	REQUIRE(w);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, bytes, 5, &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_finish(w, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "tensor 't' got 5 of 16 bytes");
	pt_gguf_writer_destroy(w);
	CHECK(stat(path, &st) != 0); /* unfinished file removed */
}

PT_TEST(test_gguf_write_rejects_misuse)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("misuse.gguf");
	const uint64_t ne[2] = { 32, 2 }, ne0[2] = { 0, 2 }, ne33[1] = { 33 };
	const uint8_t two = 2;
	pt_gguf_writer *w = NULL;
	CHECK_EQ_INT(pt_gguf_writer_create(path, 48, &w, &e), PT_E_INVALID);
	CHECK(w == NULL);
	CHECK_CONTAINS(e.msg, "alignment 48");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_create("/nonexistent/dir/x.gguf", 32, &w, &e), PT_E_IO);
	pt_error_clear(&e);
	REQUIRE(pt_gguf_writer_create(path, 32, &w, &e) == PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "w", 2, ne, PT_TYPE_Q8_0, &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "w", 2, ne, PT_TYPE_F32, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "duplicate tensor name 'w'");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "z", 2, ne0, PT_TYPE_F32, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "z", 1, ne33, PT_TYPE_Q8_0, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "not a multiple");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "z", 1, ne, 4, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "unknown tensor type 4");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "z", 5, ne, PT_TYPE_F32, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789"
						  "012345678901234567890123", 1, ne,
					       PT_TYPE_F32, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_u32(w, "", 1, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "b", PT_GGUF_BOOL, &two, 1, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "b", PT_GGUF_U32, &two, 1, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_u32(w, "general.alignment", 64, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_str(w, "general.alignment", "32", &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_set_arr(w, "a", PT_GGUF_STRING, NULL, 0, &e), PT_E_INVALID);
	pt_error_clear(&e);
	{
		/* raw STRING payload must be a u64 length plus exactly that many bytes */
		const uint8_t good[10] = { 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i' };
		const uint8_t bad[10] = { 3, 0, 0, 0, 0, 0, 0, 0, 'h', 'i' };
		CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "s", PT_GGUF_STRING, good, 10, &e), PT_OK);
		CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "s", PT_GGUF_STRING, bad, 10, &e),
			     PT_E_INVALID);
		CHECK_CONTAINS(e.msg, "raw string payload");
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "s", PT_GGUF_STRING, good, 4, &e),
			     PT_E_INVALID);
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_gguf_writer_set_raw(w, "s", PT_GGUF_ARRAY, good, 10, &e),
			     PT_E_INVALID);
	}
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_write_data(w, &two, 1, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "before begin_data");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_begin_data(w, &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_set_u32(w, "late", 1, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "after begin_data");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, "late", 2, ne, PT_TYPE_F32, &e), PT_E_INVALID);
	pt_gguf_writer_destroy(w);
	pt_gguf_writer_destroy(NULL);
}

PT_TEST(test_gguf_write_empty_file_opens)
{
	struct pt_error e = { 0 };
	const char *path = pt_test_tmpfile("empty_w.gguf");
	pt_gguf_writer *w = NULL;
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_writer_create(path, 0, &w, &e) == PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_set_str(w, "general.architecture", "x", &e), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_finish(w, &e), PT_OK);
	pt_gguf_writer_destroy(w);
	REQUIRE(pt_gguf_open(path, &g, &e) == PT_OK);
	CHECK_EQ_INT(pt_gguf_tensor_count(g), 0);
	CHECK_EQ_INT(pt_gguf_kv_count(g), 1);
	pt_gguf_close(g);
}

PT_TEST(test_gguf_write_alloc_failure_sweep)
{
	const char *path = pt_test_tmpfile("sweep_w.gguf");
	uint64_t k;
	for (k = 1; k < 200; k++) {
		struct pt_error e = { 0 };
		enum pt_status st;
		pt_alloc_fail_at(k);
		st = write_reference(path, &e);
		pt_alloc_fail_at(0);
		if (st == PT_OK)
			break;
		CHECK_EQ_INT(st, PT_E_NOMEM);
		CHECK_CONTAINS(e.msg, "out of memory");
	}
	CHECK(k > 5 && k < 200);
}
