/* test_gguf_split.c - split models (gguf_split.c): opening from any part, the merged tensor
 * table and each part's own fields, the name parser, and every refusal (missing part, wrong
 * split.no / split.count / split.tensors.count, a part of another model, duplicate tensors
 * across parts, a corrupt part, a name that does not follow the convention), plus an
 * allocation-failure sweep over a split open. */
#include "gguf/gguf.h"
#include "gguf_builder.h"
#include "gguf/gguf_internal.h"
#include "quant/types.h"
#include "test.h"
#include "util/alloc.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* Part file `stem-0000{no+1}-of-0000{count}.gguf` with the given split keys and F32 tensors
 * of 4 floats each (tensor k holds k, k+1, k+2, k+3 with k = its first letter). */
struct part_spec {
	int no;            /* split.no written (-1: none) */
	int count;         /* split.count written (-1: none) */
	int tensors_count; /* split.tensors.count written (-1: none) */
	const char *names; /* comma-free list of one-letter tensor names, e.g. "ab" */
	bool meta;         /* general.architecture (part 1 only, like gguf-split) */
};

static const char *part_path(const char *stem, int no1, int count)
{
	static char buf[4][512];
	static int slot;
	char *p = buf[slot++ % 4];
	snprintf(p, 512, "%s/%s-%05d-of-%05d.gguf", pt_test_tmpdir(), stem, no1, count);
	return p;
}

static void put_u16(pt_gguf_writer *w, const char *key, int v)
{
	uint8_t le[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	CHECK_EQ_INT(pt_gguf_writer_set_raw(w, key, PT_GGUF_U16, le, 2, NULL), PT_OK);
}

static void write_part(const char *path, const struct part_spec *s)
{
	pt_gguf_writer *w = NULL;
	REQUIRE(pt_gguf_writer_create(path, 0, &w, NULL) == PT_OK);
	if (s->meta)
		CHECK_EQ_INT(pt_gguf_writer_set_str(w, "general.architecture", "test", NULL), PT_OK);
	if (s->no >= 0)
		put_u16(w, "split.no", s->no);
	if (s->count >= 0)
		put_u16(w, "split.count", s->count);
	if (s->tensors_count >= 0)
		CHECK_EQ_INT(pt_gguf_writer_set_i32(w, "split.tensors.count", s->tensors_count,
						    NULL), PT_OK);
	const uint64_t ne[1] = { 4 };
	for (const char *n = s->names; *n; n++) {
		char name[8] = { *n, 0 };
		CHECK_EQ_INT(pt_gguf_writer_add_tensor(w, name, 1, ne, PT_TYPE_F32, NULL), PT_OK);
	}
	CHECK_EQ_INT(pt_gguf_writer_begin_data(w, NULL), PT_OK);
	for (const char *n = s->names; *n; n++) {
		float v[4] = { (float)*n, (float)*n + 1, (float)*n + 2, (float)*n + 3 };
		CHECK_EQ_INT(pt_gguf_writer_write_data(w, v, sizeof v, NULL), PT_OK);
	}
	CHECK_EQ_INT(pt_gguf_writer_finish(w, NULL), PT_OK);
	pt_gguf_writer_destroy(w);
}

/* The good 3-part model "stem": a,b in part 1; c in part 2; d,e in part 3. */
static void write_good(const char *stem)
{
	const struct part_spec p[3] = { { 0, 3, 5, "ab", true }, { 1, 3, 5, "c", false },
					{ 2, 3, 5, "de", false } };
	for (int i = 0; i < 3; i++)
		write_part(part_path(stem, i + 1, 3), &p[i]);
}

static void expect_open_fail(const char *path, enum pt_status code, const char *a,
			     const char *b, int line)
{
	struct pt_error e = { 0 };
	pt_gguf *g = (pt_gguf *)1;
	enum pt_status st = pt_gguf_open(path, &g, &e);
	if (st != code || g != NULL || !strstr(e.msg, a) || (b && !strstr(e.msg, b)))
		pt_test_fail(__FILE__, line, "want %d '%s' '%s', got %d '%s'", code, a,
			     b ? b : "", st, e.msg);
	if (st == PT_OK && g)
		pt_gguf_close(g);
}
#define EXPECT_OPEN_FAIL(path, code, a, b) expect_open_fail((path), (code), (a), (b), __LINE__)

PT_TEST(test_gguf_split_opens_from_any_part)
{
	write_good("good");
	for (int from = 1; from <= 3; from++) {
		struct pt_error e = { 0 };
		pt_gguf *g = NULL;
		REQUIRE(pt_gguf_open(part_path("good", from, 3), &g, &e) == PT_OK);
		CHECK_EQ_INT(pt_gguf_part_count(g), 3);
		CHECK_EQ_INT(pt_gguf_tensor_count(g), 5);
		CHECK(strcmp(pt_gguf_path(g), part_path("good", 1, 3)) == 0);
		CHECK(pt_gguf_find_kv(g, "general.architecture") != NULL);
		uint64_t total = 0;
		for (uint32_t i = 0; i < 3; i++) {
			CHECK(strcmp(pt_gguf_part_path(g, i), part_path("good", (int)i + 1, 3)) == 0);
			CHECK(pt_gguf_part_fd(g, i) >= 0);
			CHECK(pt_gguf_part_base(g, i) == pt_gguf_part_bases(g)[i]);
			total += pt_gguf_part_size(g, i);
		}
		CHECK_EQ_INT(pt_gguf_file_size(g), total);
		CHECK_EQ_INT(pt_gguf_part_tensor_count(g, 0), 2);
		CHECK_EQ_INT(pt_gguf_part_tensor_count(g, 1), 1);
		CHECK_EQ_INT(pt_gguf_part_tensor_count(g, 2), 2);
		const char *names = "abcde";
		const uint32_t parts[5] = { 0, 0, 1, 2, 2 };
		for (int k = 0; k < 5; k++) {
			char n[2] = { names[k], 0 };
			const struct pt_gguf_tensor *t = pt_gguf_find_tensor(g, n);
			REQUIRE(t != NULL);
			CHECK(t == pt_gguf_tensor_at(g, (uint64_t)k));
			CHECK_EQ_INT(t->part, parts[k]);
			float v;
			memcpy(&v, t->data, 4);
			CHECK(v == (float)names[k]);
			/* the data is where file_offset says, in the tensor's own part */
			CHECK(t->data == pt_gguf_part_base(g, t->part) + t->file_offset);
			CHECK(t->file_offset >= pt_gguf_part_data_offset(g, t->part));
		}
		pt_gguf_close(g);
	}
}

PT_TEST(test_gguf_split_single_file_unchanged)
{
	const char *path = pt_test_tmpfile("single.gguf");
	const struct part_spec s = { -1, -1, -1, "ab", true };
	write_part(path, &s);
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_open(path, &g, NULL) == PT_OK);
	CHECK_EQ_INT(pt_gguf_part_count(g), 1);
	CHECK(strcmp(pt_gguf_part_path(g, 0), path) == 0);
	CHECK(pt_gguf_part_bases(g)[0] == pt_gguf_base(g));
	CHECK_EQ_INT(pt_gguf_part_size(g, 0), pt_gguf_file_size(g));
	CHECK_EQ_INT(pt_gguf_part_tensor_count(g, 0), 2);
	CHECK_EQ_INT(pt_gguf_tensor_at(g, 1)->part, 0);
	pt_gguf_close(g);
	/* split.count 1 (gguf-split's output for a model that fits one part) is one file */
	const char *one = part_path("one", 1, 1);
	const struct part_spec o = { 0, 1, 2, "ab", true };
	write_part(one, &o);
	REQUIRE(pt_gguf_open(one, &g, NULL) == PT_OK);
	CHECK_EQ_INT(pt_gguf_part_count(g), 1);
	pt_gguf_close(g);
}

PT_TEST(test_gguf_split_missing_part)
{
	write_good("miss");
	unlink(part_path("miss", 2, 3));
	for (int from = 1; from <= 3; from += 2)
		EXPECT_OPEN_FAIL(part_path("miss", from, 3), PT_E_IO,
				 "split part 2 of 3 is missing", "miss-00002-of-00003.gguf");
	write_good("miss1");
	unlink(part_path("miss1", 1, 3));
	EXPECT_OPEN_FAIL(part_path("miss1", 2, 3), PT_E_IO, "split part 1 of 3 is missing", NULL);
}

PT_TEST(test_gguf_split_refuses_disagreeing_parts)
{
	/* part 3 says it is part 3 of 4 */
	write_good("count");
	const struct part_spec c = { 2, 4, 5, "de", false };
	write_part(part_path("count", 3, 3), &c);
	EXPECT_OPEN_FAIL(part_path("count", 1, 3), PT_E_FORMAT, "split part 3 of 3",
			 "it says it is part 3 of 4");
	/* opened by that part itself: its name says 3 parts, its key 4 */
	EXPECT_OPEN_FAIL(part_path("count", 3, 3), PT_E_FORMAT, "is not named", NULL);

	/* part 2's file holds split.no 2 */
	write_good("no");
	const struct part_spec n = { 2, 3, 5, "c", false };
	write_part(part_path("no", 2, 3), &n);
	EXPECT_OPEN_FAIL(part_path("no", 1, 3), PT_E_FORMAT, "split part 2 of 3",
			 "it says it is part 3 of 3");

	/* part 2 from another model: another tensor total */
	write_good("other");
	const struct part_spec o = { 1, 3, 7, "cfg", false };
	write_part(part_path("other", 2, 3), &o);
	EXPECT_OPEN_FAIL(part_path("other", 1, 3), PT_E_FORMAT, "split part 2 of 3",
			 "not a part of this model");

	/* every part agrees on a total the parts do not hold */
	const struct part_spec t[3] = { { 0, 3, 6, "ab", true }, { 1, 3, 6, "c", false },
					{ 2, 3, 6, "de", false } };
	for (int i = 0; i < 3; i++)
		write_part(part_path("total", i + 1, 3), &t[i]);
	EXPECT_OPEN_FAIL(part_path("total", 2, 3), PT_E_FORMAT, "split.tensors.count is 6",
			 "hold 5 tensors");

	/* the same tensor in parts 1 and 3 */
	write_good("dup");
	const struct part_spec d = { 2, 3, 5, "da", false };
	write_part(part_path("dup", 3, 3), &d);
	EXPECT_OPEN_FAIL(part_path("dup", 1, 3), PT_E_FORMAT, "tensor 'a' is in split part 1",
			 "again in split part 3");

	/* a part without split keys */
	write_good("nokeys");
	const struct part_spec k = { -1, -1, -1, "c", false };
	write_part(part_path("nokeys", 2, 3), &k);
	EXPECT_OPEN_FAIL(part_path("nokeys", 1, 3), PT_E_FORMAT, "split part 2 of 3", NULL);
}

PT_TEST(test_gguf_split_corrupt_part)
{
	write_good("corrupt");
	FILE *f = fopen(part_path("corrupt", 3, 3), "r+b");
	REQUIRE(f);
	fwrite("XXXX", 1, 4, f); /* the magic */
	fclose(f);
	EXPECT_OPEN_FAIL(part_path("corrupt", 1, 3), PT_E_FORMAT, "split part 3 of 3",
			 "corrupt-00003-of-00003.gguf");
	/* truncated: the tensor data of part 2 runs past its end */
	write_good("trunc");
	REQUIRE(truncate(part_path("trunc", 2, 3), 100) == 0);
	EXPECT_OPEN_FAIL(part_path("trunc", 3, 3), PT_E_FORMAT, "split part 2 of 3", NULL);
}

PT_TEST(test_gguf_split_bad_keys_and_names)
{
	char path[512];
	/* a part renamed so its name no longer says which part it is */
	write_good("renamed");
	snprintf(path, sizeof path, "%s/renamed.gguf", pt_test_tmpdir());
	REQUIRE(rename(part_path("renamed", 1, 3), path) == 0);
	EXPECT_OPEN_FAIL(path, PT_E_FORMAT, "is split part 1 of 3", "is not named");
	/* the name says part 2, the keys part 1 */
	write_good("swap");
	REQUIRE(rename(part_path("swap", 1, 3), part_path("swap", 2, 3)) == 0);
	EXPECT_OPEN_FAIL(part_path("swap", 2, 3), PT_E_FORMAT, "is not named", NULL);
	/* out-of-range keys */
	const struct part_spec bad[3] = { { 3, 3, 5, "a", true }, { 0, 0, 5, "a", true },
					  { 0, 300, 5, "a", true } };
	const char *want[3] = { "split.no 3 but split.count 3", "split.count 0",
				"split.count 300" };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/badkey%d.gguf", pt_test_tmpdir(), i);
		write_part(path, &bad[i]);
		EXPECT_OPEN_FAIL(path, PT_E_FORMAT, want[i], NULL);
	}
	/* a split key of the wrong type */
	snprintf(path, sizeof path, "%s/strkey.gguf", pt_test_tmpdir());
	pt_gguf_writer *w = NULL;
	REQUIRE(pt_gguf_writer_create(path, 0, &w, NULL) == PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_set_str(w, "split.count", "3", NULL), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_begin_data(w, NULL), PT_OK);
	CHECK_EQ_INT(pt_gguf_writer_finish(w, NULL), PT_OK);
	pt_gguf_writer_destroy(w);
	EXPECT_OPEN_FAIL(path, PT_E_FORMAT, "split.count has type string", NULL);
}

PT_TEST(test_gguf_split_name_parser)
{
	uint32_t no1, count;
	size_t pl;
	CHECK(pt_gguf_split_name("m-00002-of-00003.gguf", &no1, &count, &pl));
	CHECK_EQ_INT(no1, 2);
	CHECK_EQ_INT(count, 3);
	CHECK_EQ_INT(pl, 1);
	CHECK(pt_gguf_split_name("/a/b/Qwen3-235B-00001-of-00005.gguf", &no1, &count, &pl));
	CHECK_EQ_INT(count, 5);
	CHECK(pt_gguf_split_name("-00001-of-00002.gguf", &no1, &count, &pl) && pl == 0);
	const char *bad[] = { "m.gguf", "m-0001-of-00003.gguf", "m-00001-of-0003.gguf",
			      "m-00001_of-00003.gguf", "m-00001-of-00003.GGUF", "m-0000a-of-00003.gguf",
			      "m-00001-of-00003.gguf.part", "" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECK(!pt_gguf_split_name(bad[i], &no1, &count, &pl));
	char out[64];
	CHECK(pt_gguf_split_first_path("x/m-00003-of-00003.gguf", out, sizeof out));
	CHECK(strcmp(out, "x/m-00001-of-00003.gguf") == 0);
	CHECK(pt_gguf_split_first_path("x/m.gguf", out, sizeof out));
	CHECK(strcmp(out, "x/m.gguf") == 0);
	CHECK(pt_gguf_split_first_path("m-00004-of-00003.gguf", out, sizeof out));
	CHECK(strcmp(out, "m-00004-of-00003.gguf") == 0); /* not a valid part number: as is */
	CHECK(!pt_gguf_split_first_path("x/m-00002-of-00003.gguf", out, 8));
	CHECK(out[0] == '\0');
}

PT_TEST(test_gguf_split_alloc_failure_sweep)
{
	write_good("sweep");
	uint64_t k;
	for (k = 1; k < 400; k++) {
		struct pt_error e = { 0 };
		pt_gguf *g = NULL;
		pt_alloc_fail_at(k);
		enum pt_status st = pt_gguf_open(part_path("sweep", 2, 3), &g, &e);
		pt_alloc_fail_at(0);
		if (st == PT_OK) {
			CHECK_EQ_INT(pt_gguf_tensor_count(g), 5);
			pt_gguf_close(g);
			break;
		}
		CHECK_EQ_INT(st, PT_E_NOMEM);
		CHECK(g == NULL);
		CHECK_CONTAINS(e.msg, "out of memory");
	}
	CHECK(k > 10 && k < 400);
}

/* Minor faults of reading one byte of every page of every part. */
static long touch_faults(const pt_gguf *g)
{
	struct rusage a, b;
	volatile uint8_t sink = 0;
	const long pg = sysconf(_SC_PAGESIZE);
	getrusage(RUSAGE_SELF, &a);
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
		for (uint64_t off = 0; off < pt_gguf_part_size(g, i); off += (uint64_t)pg)
			sink ^= pt_gguf_part_base(g, i)[off];
	getrusage(RUSAGE_SELF, &b);
	(void)sink;
	return b.ru_minflt - a.ru_minflt;
}

PT_TEST(test_gguf_populate_maps_every_part)
{
	write_good("pop");
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_open(part_path("pop", 2, 3), &g, NULL) == PT_OK);
	/* a fresh mapping faults on first touch - unless the kernel mapped the small file's
	 * pages with the header read (fault-around over large folios): then the zero below
	 * proves less, but populate's answers are still checked */
	if (touch_faults(g) == 0)
		fprintf(stderr, "  note: a fresh mapping took no faults here\n");
	pt_gguf_close(g);
	REQUIRE(pt_gguf_open(part_path("pop", 1, 3), &g, NULL) == PT_OK);
	CHECK(!pt_gguf_populate(g, 101)); /* never that resident: skipped, nothing mapped */
	CHECK(pt_gguf_populate(g, 90));   /* just written: in the page cache */
	CHECK_EQ_INT(touch_faults(g), 0);
	pt_gguf_close(g);
}

/* Whether the mapping holding addr has the VmFlags flag fl (0: no mapping holds it). */
static int vma_flag_at(const void *addr, const char *fl)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;
	int has = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			char want[8];
			snprintf(want, sizeof want, " %s", fl);
			has = strstr(line, want) ? 1 : -1;
			break;
		}
	}
	fclose(f);
	return has;
}

/* Whether the mapping that holds base (a part's first byte) has the VmFlags flag fl. */
static bool mapping_has_flag(const void *base, const char *fl)
{
	return vma_flag_at(base, fl) == 1;
}

PT_TEST(test_gguf_advise_huge_marks_every_part)
{
	write_good("huge");
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_open(part_path("huge", 1, 3), &g, NULL) == PT_OK);
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
		CHECK(!mapping_has_flag(pt_gguf_part_base(g, i), "hg"));
	if (!pt_gguf_advise_huge(g)) { /* a kernel without transparent huge pages: EINVAL */
		fprintf(stderr, "  note: MADV_HUGEPAGE refused here\n");
	} else {
		CHECK_EQ_INT(pt_gguf_part_count(g), 3);
		for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
			CHECK(mapping_has_flag(pt_gguf_part_base(g, i), "hg"));
	}
	CHECK_EQ_INT(touch_faults(g) >= 0, 1); /* still readable */
	pt_gguf_close(g);
}

/* pt_gguf_advise_random: every part's mapping reads without read-ahead ("rr" in VmFlags),
 * and stays readable. */
PT_TEST(test_gguf_advise_random_marks_every_part)
{
	write_good("rnd");
	pt_gguf *g = NULL;
	REQUIRE(pt_gguf_open(part_path("rnd", 1, 3), &g, NULL) == PT_OK);
	CHECK_EQ_INT(pt_gguf_part_count(g), 3);
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
		CHECK(!mapping_has_flag(pt_gguf_part_base(g, i), "rr"));
	CHECK(pt_gguf_advise_random(g));
	for (uint32_t i = 0; i < pt_gguf_part_count(g); i++)
		CHECK(mapping_has_flag(pt_gguf_part_base(g, i), "rr"));
	CHECK_EQ_INT(touch_faults(g) >= 0, 1); /* still readable */
	pt_gguf_close(g);
}

/* pt_gguf_advise_read_whole: after pt_gguf_advise_random, the pages of one large tensor (a
 * resident matrix left in the mapping) read ahead again, the rest of the file still without
 * read-ahead; its pages are read (resident afterwards); a range outside the mapping is
 * refused. */
PT_TEST(test_gguf_advise_read_whole_undoes_random_for_a_range)
{
	const long pg = sysconf(_SC_PAGESIZE);
	const uint64_t ne_small[1] = { 64 }, ne_big[1] = { (uint64_t)pg * 16 / 4 };
	const size_t small = 64 * 4, big = (size_t)pg * 16;
	struct gb b = { 0 };
	/* page alignment: a, big and c on pages of their own */
	gb_header(&b, 3, 3, 2);
	gb_kv_str(&b, "general.architecture", "llama");
	gb_kv_u32(&b, "general.alignment", (uint32_t)pg);
	gb_tensor(&b, "a", 1, ne_small, PT_TYPE_F32, 0);
	gb_tensor(&b, "big", 1, ne_big, PT_TYPE_F32, (uint64_t)pg);
	gb_tensor(&b, "c", 1, ne_small, PT_TYPE_F32, (uint64_t)pg * 17);
	gb_pad(&b, (size_t)pg);
	const size_t data = b.n;
	gb_zeros(&b, (size_t)pg * 17 + small);
	for (size_t i = 0; i < big; i++) /* bytes the reads below can check */
		b.p[data + (size_t)pg + i] = (uint8_t)(i * 7);
	const char *path = pt_test_tmpfile("whole.gguf");
	FILE *f = fopen(path, "wb");
	REQUIRE(f && fwrite(b.p, 1, b.n, f) == b.n);
	fclose(f);
	gb_free(&b);
	pt_gguf *g = NULL;
	struct pt_error err = { 0 };
	if (pt_gguf_open(path, &g, &err) != PT_OK)
		fprintf(stderr, "  open: %s\n", err.msg);
	REQUIRE(g != NULL);
	const struct pt_gguf_tensor *tb = pt_gguf_find_tensor(g, "big");
	const struct pt_gguf_tensor *ta = pt_gguf_find_tensor(g, "a");
	const struct pt_gguf_tensor *tc = pt_gguf_find_tensor(g, "c");
	REQUIRE(tb && ta && tc && tb->nbytes == big);
	CHECK(pt_gguf_advise_random(g));
	CHECK_EQ_INT(vma_flag_at(tb->data + big / 2, "rr"), 1);
	CHECK(pt_gguf_advise_read_whole(g, tb->data, big));
	/* every page of the tensor, first and last included, left the random mapping */
	CHECK_EQ_INT(vma_flag_at(tb->data, "rr"), -1);
	CHECK_EQ_INT(vma_flag_at(tb->data + big / 2, "rr"), -1);
	CHECK_EQ_INT(vma_flag_at(tb->data + big - 1, "rr"), -1);
	/* the small tensors around it (their own pages) stay random */
	CHECK_EQ_INT(vma_flag_at(ta->data, "rr"), 1);
	CHECK_EQ_INT(vma_flag_at(tc->data, "rr"), 1);
	int bad = 0;
	for (size_t i = 0; i < big; i++)
		bad += tb->data[i] != (uint8_t)(i * 7);
	CHECK_EQ_INT(bad, 0);
	/* a range past the mapping, or not in it at all */
	CHECK(!pt_gguf_advise_read_whole(g, tc->data, (size_t)pg * 64));
	static const uint8_t elsewhere[64];
	CHECK(!pt_gguf_advise_read_whole(g, elsewhere, sizeof elsewhere));
	pt_gguf_close(g);
}
