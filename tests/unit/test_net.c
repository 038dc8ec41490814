/* test_net.c - range bookkeeping, the pull state file, pull sources (hf:, URLs, split part
 * names) and the GGUF prefix check a download uses to refuse a wrong file early. */
#include "test.h"

#include "gguf/gguf.h"
#include "gguf_builder.h"
#include "net/ranges.h"
#include "net/source.h"
#include "util/alloc.h"

static int add(struct pt_ranges *s, uint64_t a, uint64_t b)
{
	return pt_ranges_add(s, a, b, NULL) == PT_OK;
}

PT_TEST(test_net_ranges_merge_and_gaps)
{
	struct pt_ranges s = { 0 };
	uint64_t a, b;
	CHECK(add(&s, 100, 200));
	CHECK(add(&s, 300, 400));
	CHECK(add(&s, 0, 50));
	CHECK_EQ_INT(s.n, 3);
	CHECK_EQ_INT(pt_ranges_total(&s), 250);
	CHECK_EQ_INT(pt_ranges_covered_to(&s, 0), 50);
	CHECK_EQ_INT(pt_ranges_covered_to(&s, 60), 60);
	REQUIRE(pt_ranges_next_gap(&s, 0, 500, &a, &b));
	CHECK_EQ_INT(a, 50);
	CHECK_EQ_INT(b, 100);
	REQUIRE(pt_ranges_next_gap(&s, 150, 500, &a, &b));
	CHECK_EQ_INT(a, 200);
	CHECK_EQ_INT(b, 300);
	REQUIRE(pt_ranges_next_gap(&s, 350, 500, &a, &b));
	CHECK_EQ_INT(a, 400);
	CHECK_EQ_INT(b, 500);
	CHECK(!pt_ranges_next_gap(&s, 120, 180, &a, &b));
	CHECK(add(&s, 50, 100)); /* adjacent on both sides: one range */
	CHECK_EQ_INT(s.n, 2);
	CHECK_EQ_INT(pt_ranges_covered_to(&s, 0), 200);
	CHECK(add(&s, 150, 350)); /* overlaps two */
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_INT(s.r[0].start, 0);
	CHECK_EQ_INT(s.r[0].end, 400);
	CHECK(add(&s, 10, 10)); /* empty: nothing */
	CHECK_EQ_INT(s.n, 1);
	CHECK(add(&s, 1000, 2000));
	CHECK(add(&s, 500, 3000)); /* swallows the later one */
	CHECK_EQ_INT(s.n, 2);
	CHECK_EQ_INT(pt_ranges_total(&s), 400 + 2500);
	pt_ranges_free(&s);
}

PT_TEST(test_net_ranges_random_against_bitmap)
{
	struct pt_ranges s = { 0 };
	uint8_t bits[512] = { 0 };
	uint32_t x = 12345;
	for (int it = 0; it < 400; it++) {
		x = x * 1103515245u + 12345u;
		uint32_t a = (x >> 8) % 512, n = (x >> 20) % 40;
		uint32_t b = a + n > 512 ? 512 : a + n;
		REQUIRE(add(&s, a, b));
		for (uint32_t i = a; i < b; i++)
			bits[i] = 1;
		uint64_t total = 0;
		for (int i = 0; i < 512; i++)
			total += bits[i];
		CHECK_EQ_INT(pt_ranges_total(&s), total);
		for (uint32_t i = 1; i < s.n; i++)
			CHECK(s.r[i - 1].end < s.r[i].start); /* sorted, disjoint, not adjacent */
	}
	pt_ranges_free(&s);
}

PT_TEST(test_net_state_roundtrip)
{
	struct pt_pull_state s = { .size = 1000 }, t;
	char *text = NULL;
	snprintf(s.validator, sizeof s.validator, "abc123");
	REQUIRE(add(&s.done, 0, 100));
	REQUIRE(add(&s.done, 500, 1000));
	REQUIRE(pt_pull_state_format(&s, &text, NULL) == PT_OK);
	CHECK_EQ_STR(text, "particle-pull-state 1\nsize 1000\nvalidator abc123\n"
			   "done 0 100\ndone 500 1000\nend\n");
	REQUIRE(pt_pull_state_parse(text, strlen(text), &t, NULL) == PT_OK);
	CHECK_EQ_INT(t.size, 1000);
	CHECK_EQ_STR(t.validator, "abc123");
	CHECK_EQ_INT(t.done.n, 2);
	CHECK_EQ_INT(pt_ranges_total(&t.done), 600);
	pt_ranges_free(&t.done);
	pt_ranges_free(&s.done);
	pt_free(text);
}

PT_TEST(test_net_state_rejects_malformed)
{
	static const char *bad[] = {
		"",
		"particle-pull-state 2\nsize 10\nvalidator -\nend\n",
		"particle-pull-state 1\nsize 10\nvalidator -\n",              /* no end */
		"particle-pull-state 1\nsize 10\nvalidator -\nend",           /* no newline */
		"particle-pull-state 1\nsize 10\nvalidator -\ndone 5 20\nend\n", /* past size */
		"particle-pull-state 1\nsize 10\nvalidator -\ndone 5 5\nend\n",  /* empty */
		"particle-pull-state 1\nsize 10\nvalidator -\ndone 6 5\nend\n",
		"particle-pull-state 1\nsize 010\nvalidator -\nend\n",        /* leading zero */
		"particle-pull-state 1\nsize 99999999999999999999\nvalidator -\nend\n",
		"particle-pull-state 1\nsize -1\nvalidator -\nend\n",
		"particle-pull-state 1\nvalidator -\nsize 10\nend\n",         /* order */
		"particle-pull-state 1\nsize 10\nsize 10\nvalidator -\nend\n",
		"particle-pull-state 1\nsize 10\nvalidator a b\nend\n",
		"particle-pull-state 1\nsize 10\nvalidator -\nend\nend\n",
		"particle-pull-state 1\nsize 10\nvalidator -\ndone 1\nend\n",
		"particle-pull-state 1\nsize 10\nvalidator -\nextra\nend\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pt_pull_state t;
		struct pt_error err = { 0 };
		CHECK(pt_pull_state_parse(bad[i], strlen(bad[i]), &t, &err) != PT_OK);
		CHECK(t.done.n == 0 && t.done.r == NULL);
		CHECK_CONTAINS(err.msg, "pull state");
	}
}

PT_TEST(test_net_source_hf_and_url)
{
	struct pt_source s;
	char url[8192], name[8192];
	REQUIRE(pt_source_parse("hf:unsloth/Qwen3-30B-A3B-GGUF/Qwen3-30B-A3B-Q4_K_M.gguf",
				"https://huggingface.co/", &s, NULL) == PT_OK);
	REQUIRE(pt_source_file(&s, 0, url, name, sizeof url, NULL) == PT_OK);
	CHECK_EQ_STR(url, "https://huggingface.co/unsloth/Qwen3-30B-A3B-GGUF/resolve/main/"
			  "Qwen3-30B-A3B-Q4_K_M.gguf");
	CHECK_EQ_STR(name, "Qwen3-30B-A3B-Q4_K_M.gguf");
	CHECK_EQ_INT(pt_source_files(&s), 1);
	pt_source_free(&s);
	REQUIRE(pt_source_parse("hf:o/r/Q8_0/m-00002-of-00003.gguf@refs/pr/1", "http://h:1", &s,
				NULL) == PT_OK);
	CHECK_EQ_INT(pt_source_files(&s), 3);
	CHECK_EQ_INT(s.split_no, 2);
	REQUIRE(pt_source_file(&s, 0, url, name, sizeof url, NULL) == PT_OK);
	CHECK_EQ_STR(url, "http://h:1/o/r/resolve/refs%2Fpr%2F1/Q8_0/m-00001-of-00003.gguf");
	CHECK_EQ_STR(name, "m-00001-of-00003.gguf");
	REQUIRE(pt_source_file(&s, 2, url, name, sizeof url, NULL) == PT_OK);
	CHECK_EQ_STR(name, "m-00003-of-00003.gguf");
	pt_source_free(&s);
	REQUIRE(pt_source_parse("http://127.0.0.1:8/a/b/x.gguf?download=1", "", &s, NULL) == PT_OK);
	REQUIRE(pt_source_file(&s, 0, url, name, sizeof url, NULL) == PT_OK);
	CHECK_EQ_STR(url, "http://127.0.0.1:8/a/b/x.gguf?download=1");
	CHECK_EQ_STR(name, "x.gguf");
	pt_source_free(&s);
	static const char *bad[] = { "ftp://h/x.gguf", "hf:o/r", "hf:o/r/x.bin", "hf:o/../x.gguf",
				     "hf:o/r/.x.gguf", "hf:o/r/x.gguf@", "http://h/", "http://h",
				     "http://h/a b.gguf", "hf:o/r/dir/", "x.gguf", "hf:o/r/x.gguf@a b" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pt_error err = { 0 };
		CHECK(pt_source_parse(bad[i], "http://h", &s, &err) == PT_E_INVALID);
		CHECK_CONTAINS(err.msg, "bad source");
	}
}

PT_TEST(test_net_split_names)
{
	size_t stem;
	uint32_t no, count;
	CHECK(pt_source_split_name("a-00001-of-00003.gguf", &stem, &no, &count));
	CHECK_EQ_INT(stem, 1);
	CHECK_EQ_INT(no, 1);
	CHECK_EQ_INT(count, 3);
	CHECK(!pt_source_split_name("a-00004-of-00003.gguf", &stem, &no, &count));
	CHECK(!pt_source_split_name("a-00000-of-00003.gguf", &stem, &no, &count));
	CHECK(!pt_source_split_name("a-0001-of-00003.gguf", &stem, &no, &count));
	CHECK(!pt_source_split_name("-00001-of-00003.gguf", &stem, &no, &count));
	CHECK(!pt_source_split_name("a.gguf", &stem, &no, &count));
}

/* A header with one kv and one tensor; the data section follows. */
static void small_gguf(struct gb *b, uint64_t *data_off, uint64_t *size)
{
	const uint64_t ne[2] = { 32, 4 };
	gb_header(b, 3, 1, 1);
	gb_kv_str(b, "general.architecture", "qwen3moe");
	gb_tensor(b, "w", 2, ne, 0, 0);
	gb_pad(b, 32);
	*data_off = b->n;
	gb_zeros(b, 32 * 4 * 4);
	*size = b->n;
}

PT_TEST(test_net_gguf_prefix_needs_more_then_accepts)
{
	struct gb b = { 0 };
	uint64_t doff, size;
	bool more;
	pt_gguf *g = NULL;
	small_gguf(&b, &doff, &size);
	uint64_t first_ok = 0;
	for (uint64_t n = 0; n <= doff; n++) { /* fails wanting more until the infos end */
		enum pt_status st = pt_gguf_open_prefix(b.p, n, size, &g, &more, NULL);
		pt_gguf_close(g);
		if (st == PT_OK && !first_ok)
			first_ok = n;
		if (first_ok)
			CHECK(st == PT_OK);
		else
			CHECK(more);
	}
	CHECK(first_ok > doff - 32 && first_ok <= doff); /* the padding is not needed */
	REQUIRE(pt_gguf_open_prefix(b.p, doff, size, &g, &more, NULL) == PT_OK);
	CHECK_EQ_INT(pt_gguf_data_offset(g), doff);
	CHECK(pt_gguf_tensor_at(g, 0)->data == NULL); /* not arrived yet */
	pt_gguf_close(g);
	REQUIRE(pt_gguf_open_prefix(b.p, size, size, &g, &more, NULL) == PT_OK);
	CHECK(pt_gguf_tensor_at(g, 0)->data != NULL);
	pt_gguf_close(g);
	/* the declared file is too short for the tensor: refused, not "need more" */
	CHECK(pt_gguf_open_prefix(b.p, doff, size - 1, &g, &more, NULL) == PT_E_FORMAT);
	CHECK(!more);
	/* bad magic in the first bytes: refused at once */
	b.p[0] = 'X';
	CHECK(pt_gguf_open_prefix(b.p, 16, size, &g, &more, NULL) == PT_E_FORMAT);
	CHECK(!more);
	gb_free(&b);
}

PT_TEST(test_net_gguf_prefix_huge_string_refused_early)
{
	struct gb b = { 0 };
	bool more;
	pt_gguf *g = NULL;
	gb_header(&b, 3, 0, 1);
	gb_str(&b, "general.name");
	gb_u32(&b, 8);
	gb_u64(&b, 1ull << 40); /* a string longer than any limit */
	CHECK(pt_gguf_open_prefix(b.p, b.n, 1ull << 41, &g, &more, NULL) == PT_E_LIMIT);
	CHECK(!more);
	/* a string longer than the whole file */
	gb_put_u64(&b, b.n - 8, 5000);
	CHECK(pt_gguf_open_prefix(b.p, b.n, 4000, &g, &more, NULL) == PT_E_FORMAT);
	CHECK(!more);
	gb_free(&b);
}
