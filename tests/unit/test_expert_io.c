/* test_expert_io.c - the read engine on a real file: io_uring and pread backends, O_DIRECT
 * alignment, completion order, and fault injection (short reads, -EIO, -EAGAIN, ring set-up
 * failure, truncated or replaced file). */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "expert/io.h"

#define FILE_BYTES (3u * 1024 * 1024 + 1234) /* odd tail: the last aligned range passes EOF */
#define NJOB 12

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

static const char *make_file(const char *name)
{
	const char *path = pt_test_tmpfile(name);
	FILE *f = fopen(path, "wb");
	if (!f)
		return NULL;
	for (uint64_t i = 0; i < FILE_BYTES; i++)
		fputc(pattern(i), f);
	fclose(f);
	return path;
}

struct fault {
	int mode; /* 0 none, 1 short once per range, 2 EIO on tag 5, 3 EAGAIN twice per range */
	uint8_t seen[NJOB * PT_IO_MAX_RANGES]; /* per range: touched by one thread at a time */
	atomic_int calls;
};

static int64_t fault_fn(void *ctx, uint64_t tag, uint32_t range, uint64_t offset, int64_t res)
{
	struct fault *f = ctx;
	uint8_t *seen = &f->seen[tag * PT_IO_MAX_RANGES + range];
	atomic_fetch_add(&f->calls, 1);
	if (f->mode == 1 && !*seen && res > 8192) {
		*seen = 1;
		return res / 3; /* unaligned on purpose */
	}
	if (f->mode == 2 && tag == 5)
		return -EIO;
	if (f->mode == 3 && *seen < 2) {
		(*seen)++;
		return -EAGAIN;
	}
	(void)offset;
	return res;
}

/* Jobs mark their (freshly mapped, never touched) destinations cold. */
static bool jobs_cold;

/* Jobs of 3 aligned ranges each (like gate/up/down), into an aligned buffer. */
static void make_jobs(struct pt_io_job *jobs, uint8_t *buf, uint64_t per_job)
{
	for (uint32_t j = 0; j < NJOB; j++) {
		jobs[j] = (struct pt_io_job){ .tag = j, .layer = 3, .expert = j, .n_ranges = 3,
					      .cold = jobs_cold };
		for (uint32_t r = 0; r < 3; r++) {
			uint64_t off = ((uint64_t)(r * NJOB + j) * 65536) % (FILE_BYTES - 70000);
			off &= ~4095ull;
			jobs[j].r[r] = (struct pt_io_range){ .offset = off, .len = 65536,
							     .need = 65536,
							     .dst = buf + j * per_job + r * 65536 };
		}
	}
	/* the last job's last range ends past EOF: needs only the bytes that exist */
	struct pt_io_range *t = &jobs[NJOB - 1].r[2];
	t->offset = (FILE_BYTES - 5000) & ~4095ull;
	t->need = FILE_BYTES - t->offset;
}

static int check_bytes(const struct pt_io_job *jobs, uint32_t j)
{
	for (uint32_t r = 0; r < jobs[j].n_ranges; r++)
		for (uint64_t i = 0; i < jobs[j].r[r].need; i++)
			if (jobs[j].r[r].dst[i] != pattern(jobs[j].r[r].offset + i))
				return 0;
	return 1;
}

/* Submits all jobs, reaps them all; returns the failed count, first error in *err. */
static int run(pt_io *io, struct pt_io_job *jobs, int *bad_bytes, struct pt_error *err)
{
	int failed = 0, seen = 0;
	*bad_bytes = 0;
	if (pt_io_submit(io, jobs, NJOB, err) != PT_OK)
		return -1;
	while (pt_io_pending(io)) {
		bool got;
		uint64_t tag, ns;
		enum pt_status st = pt_io_wait(io, true, &got, &tag, &ns, err);
		if (!got)
			return -1;
		seen++;
		if (st != PT_OK)
			failed++;
		else if (!check_bytes(jobs, (uint32_t)tag))
			(*bad_bytes)++;
	}
	return seen == NJOB ? failed : -1;
}

static void one_config(const char *file, enum pt_io_mode mode, bool pread_only, int fault_mode,
		       int want_failed)
{
	const char *path = make_file(file);
	struct fault f = { .mode = fault_mode };
	struct pt_io_config cfg = { .path = path, .mode = mode, .force_pread = pread_only,
				    .fault = fault_mode ? fault_fn : NULL, .fault_ctx = &f };
	struct pt_io_job jobs[NJOB];
	struct pt_error err = { 0 };
	pt_io *io = NULL;
	int bad;
	REQUIRE(path != NULL);
	size_t bytes = NJOB * 3 * 65536;
	uint8_t *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(buf != MAP_FAILED);
	REQUIRE(pt_io_open(&cfg, &io, &err) == PT_OK);
	CHECK(pt_io_is_uring(io) == !pread_only);
	if (mode == PT_IO_DIRECT)
		CHECK_CONTAINS(pt_io_describe(io), "O_DIRECT");
	make_jobs(jobs, buf, 3 * 65536);
	CHECK(pt_io_busy_ns(io) == 0);
	const uint64_t t0 = pt_io_now_ns();
	CHECK_EQ_INT(run(io, jobs, &bad, &err), want_failed);
	const uint64_t t1 = pt_io_now_ns(), busy = pt_io_busy_ns(io);
	CHECK_EQ_INT(bad, 0);
	/* busy from the submit to the last reap: inside the run, and frozen once idle */
	CHECK(busy > 0 && busy <= t1 - t0);
	CHECK(pt_io_busy_ns(io) == busy);
	if (want_failed) {
		CHECK_CONTAINS(err.msg, "expert 5 of layer 3");
		CHECK_CONTAINS(err.msg, "at offset");
		CHECK_EQ_INT(err.sys_errno, EIO);
	}
	if (fault_mode == 2)
		CHECK_EQ_INT(atomic_load(&f.calls), NJOB * 3); /* EIO is not retried */
	else if (fault_mode)
		CHECK(atomic_load(&f.calls) > NJOB * 3);
	/* reusable after a failure; nothing pending -> got == false */
	bool got = true;
	uint64_t tag, ns;
	CHECK_EQ_INT(pt_io_wait(io, false, &got, &tag, &ns, NULL), PT_OK);
	CHECK(!got);
	pt_io_close(io);
	munmap(buf, bytes);
}

PT_TEST(test_expert_io_uring_direct)
{
	one_config("io1.bin", PT_IO_DIRECT, false, 0, 0);
}

/* Cold destinations (io_uring hands their first-touch faults to a kernel worker): the same
 * bytes, the same retries of short reads, the same error naming the expert. */
PT_TEST(test_expert_io_uring_cold_destination)
{
	jobs_cold = true;
	one_config("io1c.bin", PT_IO_DIRECT, false, 0, 0);
	one_config("io2c.bin", PT_IO_DIRECT, false, 1, 0);
	one_config("io3c.bin", PT_IO_DIRECT, false, 2, 1);
	one_config("io4c.bin", PT_IO_BUFFERED, true, 0, 0);
	jobs_cold = false;
}

PT_TEST(test_expert_io_pread_buffered)
{
	one_config("io2.bin", PT_IO_BUFFERED, true, 0, 0);
}

PT_TEST(test_expert_io_pread_direct)
{
	one_config("io3.bin", PT_IO_DIRECT, true, 0, 0);
}

PT_TEST(test_expert_io_short_reads_retried)
{
	one_config("io4.bin", PT_IO_DIRECT, false, 1, 0);
	one_config("io4.bin", PT_IO_DIRECT, true, 1, 0);
	one_config("io4.bin", PT_IO_BUFFERED, false, 1, 0);
}

PT_TEST(test_expert_io_eio_names_expert)
{
	one_config("io5.bin", PT_IO_DIRECT, false, 2, 1);
	one_config("io5.bin", PT_IO_BUFFERED, true, 2, 1);
}

PT_TEST(test_expert_io_eagain_retried)
{
	one_config("io6.bin", PT_IO_DIRECT, false, 3, 0);
	one_config("io6.bin", PT_IO_BUFFERED, true, 3, 0);
}

PT_TEST(test_expert_io_ring_failure_falls_back)
{
	const char *path = make_file("io7.bin");
	struct pt_io_config cfg = { .path = path, .mode = PT_IO_BUFFERED, .fail_ring_setup = true };
	pt_io *io = NULL;
	REQUIRE(pt_io_open(&cfg, &io, NULL) == PT_OK);
	CHECK(!pt_io_is_uring(io));
	CHECK_CONTAINS(pt_io_describe(io), "pread pool");
	CHECK_CONTAINS(pt_io_describe(io), "io_uring unavailable");
	uint8_t buf[100];
	struct pt_io_job j = { .tag = 9, .n_ranges = 1,
			       .r = { { .offset = 77, .len = 100, .need = 100, .dst = buf } } };
	REQUIRE(pt_io_submit(io, &j, 1, NULL) == PT_OK);
	bool got;
	uint64_t tag, ns;
	CHECK_EQ_INT(pt_io_wait(io, true, &got, &tag, &ns, NULL), PT_OK);
	CHECK(got && tag == 9);
	CHECK(buf[0] == pattern(77) && buf[99] == pattern(176));
	pt_io_close(io);
}

PT_TEST(test_expert_io_rejects_bad_ranges)
{
	const char *path = make_file("io8.bin");
	struct pt_io_config cfg = { .path = path, .mode = PT_IO_DIRECT };
	struct pt_error err = { 0 };
	pt_io *io = NULL;
	static uint8_t buf[8192] __attribute__((aligned(4096)));
	REQUIRE(pt_io_open(&cfg, &io, NULL) == PT_OK);
	struct pt_io_job j = { .tag = 1, .layer = 2, .expert = 7, .n_ranges = 1,
			       .r = { { .offset = 100, .len = 4096, .need = 4096, .dst = buf } } };
	CHECK_EQ_INT(pt_io_submit(io, &j, 1, &err), PT_E_INVALID); /* unaligned O_DIRECT */
	CHECK_CONTAINS(err.msg, "unaligned");
	pt_error_clear(&err);
	j.r[0].offset = (FILE_BYTES & ~4095ull);
	j.r[0].need = 4096; /* past EOF */
	CHECK_EQ_INT(pt_io_submit(io, &j, 1, &err), PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "expert 7 of layer 2 lies outside");
	CHECK_EQ_INT(pt_io_pending(io), 0);
	pt_io_close(io);
}

PT_TEST(test_expert_io_truncated_or_replaced)
{
	const char *p = make_file("io9.bin");
	char path[512];
	snprintf(path, sizeof path, "%s", p);
	struct pt_io_config cfg = { .path = path, .mode = PT_IO_BUFFERED };
	struct pt_error err = { 0 };
	pt_io *io = NULL;
	uint8_t buf[64];
	struct pt_io_job j = { .tag = 1, .layer = 4, .expert = 2, .n_ranges = 1,
			       .r = { { .offset = 1000, .len = 64, .need = 64, .dst = buf } } };
	REQUIRE(pt_io_open(&cfg, &io, NULL) == PT_OK);
	REQUIRE(truncate(path, 500) == 0);
	CHECK_EQ_INT(pt_io_submit(io, &j, 1, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "changed size");
	pt_io_close(io);

	make_file("io9.bin");
	REQUIRE(pt_io_open(&cfg, &io, NULL) == PT_OK);
	char other[512];
	snprintf(other, sizeof other, "%s", make_file("io9b.bin"));
	REQUIRE(rename(other, path) == 0); /* same size, new inode */
	pt_error_clear(&err);
	CHECK_EQ_INT(pt_io_submit(io, &j, 1, &err), PT_E_IO);
	CHECK_CONTAINS(err.msg, "replaced");
	pt_io_close(io);
}

static char trunc_path[512];

static int64_t truncate_fault(void *ctx, uint64_t tag, uint32_t range, uint64_t offset,
			      int64_t res)
{
	(void)ctx, (void)tag, (void)range, (void)offset;
	if (truncate(trunc_path, 4096) != 0) /* the model shrinks while the read is in flight */
		return -EIO;
	return res > 0 ? 0 : res; /* ... and the read sees end of file */
}

PT_TEST(test_expert_io_truncated_mid_read)
{
	const char *p = make_file("io10.bin");
	const char *path = trunc_path;
	snprintf(trunc_path, sizeof trunc_path, "%s", p);
	for (int backend = 0; backend < 2; backend++) {
		make_file("io10.bin");
		struct pt_io_config cfg = { .path = path, .mode = PT_IO_BUFFERED,
					    .force_pread = backend, .fault = truncate_fault };
		struct pt_error err = { 0 };
		pt_io *io = NULL;
		static uint8_t buf[65536];
		bool got = false;
		uint64_t tag, ns;
		REQUIRE(pt_io_open(&cfg, &io, NULL) == PT_OK);
		struct pt_io_job j = { .tag = 1, .layer = 1, .expert = 3, .n_ranges = 1,
				       .r = { { .offset = 3 * 65536, .len = 65536, .need = 65536,
						.dst = buf } } };
		REQUIRE(pt_io_submit(io, &j, 1, &err) == PT_OK);
		CHECK_EQ_INT(pt_io_wait(io, true, &got, &tag, &ns, &err), PT_E_IO);
		CHECK(got);
		CHECK_CONTAINS(err.msg, "cannot read expert 3 of layer 1");
		CHECK_CONTAINS(err.msg, "unexpected end of file");
		CHECK_CONTAINS(err.msg, "changed size from");
		CHECK_EQ_INT(err.offset, 3 * 65536);
		pt_io_close(io);
	}
}

/* O_DIRECT alignment reported by statx (STATX_DIOALIGN): the engine's 4096-aligned reads suit
 * any power-of-two alignment up to 4096 (512-byte and 4 KiB logical blocks, whatever the page
 * size: 16 / 64 KiB arm64 kernels still report the disk's), not a coarser one, which is read
 * buffered; unknown (older kernels) and 0 (qemu-user 7.2 zeroes the fields) suit. */
PT_TEST(test_expert_io_direct_alignment_fits)
{
	char why[160] = "";
	CHECK(pt_io_direct_fits(false, 0, 0, why, sizeof why) && why[0] == 0);
	CHECK(pt_io_direct_fits(true, 512, 512, why, sizeof why));
	CHECK(pt_io_direct_fits(true, 4, 512, why, sizeof why));
	CHECK(pt_io_direct_fits(true, 4096, 4096, why, sizeof why) && why[0] == 0);
	CHECK(pt_io_direct_fits(true, 0, 0, why, sizeof why) && why[0] == 0);
	CHECK(!pt_io_direct_fits(true, 512, 8192, why, sizeof why) && strstr(why, "8192-byte"));
	CHECK(!pt_io_direct_fits(true, 65536, 512, why, sizeof why) && strstr(why, "65536-byte"));
	CHECK(!pt_io_direct_fits(true, 512, 3000, why, sizeof why));
}

/* The page size the process runs with: a power of two >= 4 KiB, and the one PT_TEST_PAGESIZE
 * names where it is set (tools/test-arm64.sh runs this under qemu-user -p 65536, so the
 * 64 KiB-page runs are known to have had 64 KiB pages).  Anonymous mappings (the expert
 * pool) are page-aligned, hence PT_IO_ALIGN-aligned for O_DIRECT, whatever the page size. */
PT_TEST(test_expert_io_page_size)
{
	const long page = sysconf(_SC_PAGESIZE);
	const char *want = getenv("PT_TEST_PAGESIZE");
	CHECK(page >= 4096 && (page & (page - 1)) == 0);
	if (want && *want)
		CHECK(page == atol(want));
	void *p = mmap(NULL, 5000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED);
	CHECK((uintptr_t)p % (uintptr_t)page == 0 && (uintptr_t)p % PT_IO_ALIGN == 0);
	munmap(p, 5000);
}
