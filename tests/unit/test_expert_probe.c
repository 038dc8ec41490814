/* test_expert_probe.c - the disk probe: trials, figures and errors on real files, through
 * both read backends. */
#include "test.h"

#include <stdio.h>
#include <string.h>

#include "expert/probe.h"

static const char *make_file(const char *name, uint64_t bytes)
{
	const char *path = pt_test_tmpfile(name);
	FILE *f = fopen(path, "wb");
	if (!f)
		return NULL;
	for (uint64_t i = 0; i < bytes; i++)
		fputc((int)(i * 131 >> 7) & 0xff, f);
	fclose(f);
	return path;
}

static void probe_file(const char *name, int force_pread)
{
	const char *path = make_file(name, (8u << 20) + 4096 + 17);
	struct pt_disk_probe_config c = { .path = path, .trial_bytes = 3u << 20, .trials = 4,
					  .block = 1u << 20, .depth = 3, .seed = 7,
					  .force_pread = force_pread };
	struct pt_disk_probe_result r;
	struct pt_error err = { 0 };
	REQUIRE(path != NULL);
	REQUIRE(pt_disk_probe(&c, &r, &err) == PT_OK);
	CHECK_EQ_INT(r.n_trials, 4);
	CHECK_EQ_INT(r.block, 1u << 20);
	CHECK_EQ_INT(r.depth, 3);
	CHECK(r.bytes == 4ull * (3u << 20));
	CHECK(r.secs > 0);
	CHECK(r.best_bps > 0 && r.median_bps > 0 && r.median_bps <= r.best_bps);
	for (uint32_t i = 0; i < r.n_trials; i++)
		CHECK(r.trial_bps[i] > 0 && r.trial_bps[i] <= r.best_bps);
	CHECK_CONTAINS(r.how, "3 x 1024 KiB random reads, 4 x 3.0 MiB");
	CHECK_CONTAINS(r.how, force_pread ? "pread" : "io_uring");
}

PT_TEST(test_expert_probe_uring)
{
	probe_file("probe1.bin", 0);
}

PT_TEST(test_expert_probe_pread)
{
	probe_file("probe2.bin", 1);
}

/* A file smaller than a block is probed in one block of its aligned size; a trial larger
 * than the file reads the file's size. */
PT_TEST(test_expert_probe_small_file)
{
	const char *path = make_file("probe3.bin", 3 * 4096 + 100);
	struct pt_disk_probe_config c = { .path = path, .trial_bytes = 1u << 30, .trials = 2 };
	struct pt_disk_probe_result r;
	struct pt_error err = { 0 };
	REQUIRE(path != NULL);
	REQUIRE(pt_disk_probe(&c, &r, &err) == PT_OK);
	CHECK_EQ_INT(r.block, 3 * 4096);
	CHECK_EQ_INT(r.depth, 16);
	CHECK_EQ_INT(r.n_trials, 2);
	CHECK(r.bytes == 2ull * 3 * 4096);
}

/* merge: trials appended up to the maximum, best and median over all of them */
PT_TEST(test_expert_probe_merge)
{
	struct pt_disk_probe_result a = { .n_trials = 3, .trial_bps = { 5, 1, 3 }, .bytes = 30,
					  .secs = 1 };
	struct pt_disk_probe_result b = { .n_trials = 2, .trial_bps = { 9, 2 }, .bytes = 20,
					  .secs = 2 };
	pt_disk_probe_merge(&a, &b);
	CHECK_EQ_INT(a.n_trials, 5);
	CHECK(a.best_bps == 9 && a.median_bps == 3);
	CHECK(a.bytes == 50 && a.secs == 3);
	b.n_trials = PT_PROBE_MAX_TRIALS;
	for (uint32_t i = 0; i < b.n_trials; i++)
		b.trial_bps[i] = 4;
	pt_disk_probe_merge(&a, &b);
	CHECK_EQ_INT(a.n_trials, PT_PROBE_MAX_TRIALS);
	CHECK(a.best_bps == 9 && a.median_bps == 4);
}

PT_TEST(test_expert_probe_errors)
{
	struct pt_disk_probe_result r;
	struct pt_error err = { 0 };
	const char *tiny = make_file("probe4.bin", 100);
	const char *ok = make_file("probe5.bin", 1u << 20);
	REQUIRE(tiny && ok);
	struct pt_disk_probe_config c = { .path = tiny };
	CHECK_EQ_INT(pt_disk_probe(&c, &r, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "smaller than 4096");
	c = (struct pt_disk_probe_config){ .path = ok, .block = 5000 };
	CHECK_EQ_INT(pt_disk_probe(&c, &r, &err), PT_E_INVALID);
	c = (struct pt_disk_probe_config){ .path = ok, .trials = PT_PROBE_MAX_TRIALS + 1 };
	CHECK_EQ_INT(pt_disk_probe(&c, &r, &err), PT_E_INVALID);
	c = (struct pt_disk_probe_config){ .path = pt_test_tmpfile("probe-none.bin") };
	remove(c.path);
	CHECK_EQ_INT(pt_disk_probe(&c, &r, &err), PT_E_IO);
}
