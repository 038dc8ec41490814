/* test_expert_plan.c - the memory planner and the default budget (fake /proc and /sys). */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "expert/plan.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static struct pt_plan_input base(void)
{
	struct pt_plan_input in = {
		.budget = 8 * GiB, .resident_bytes = 2 * GiB, .kv_bytes = GiB / 2,
		.scratch_bytes = 64 * MiB, .slot_bytes = 3 * MiB, .n_moe_layers = 48,
		.top_k = 8, .n_expert = 128,
	};
	return in;
}

PT_TEST(test_expert_plan_too_small)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	uint64_t need = 2 * GiB + GiB / 2 + 64 * MiB + 8ull * 48 * 3 * MiB;
	in.budget = need - 1;
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "too small");
	char num[32];
	snprintf(num, sizeof num, "%llu bytes", (unsigned long long)need);
	CHECK_CONTAINS(err.msg, num); /* the smallest budget that works */
}

/* Several sequences and a prompt cache: the cache is part of the fixed cost, both are named
 * in the plan line and in a refusal (the KV size already counts every sequence). */
PT_TEST(test_expert_plan_sequences_and_prompt_cache)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	char line[400];
	in.n_seq = 4;
	in.kv_bytes = 4 * (GiB / 2);
	in.cache_bytes = GiB;
	in.budget = 2 * GiB + 2 * GiB + 64 * MiB + GiB + 8ull * 48 * 3 * MiB;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 8);
	CHECK_EQ_INT(p.total_bytes, in.budget);
	pt_plan_format(&in, &p, line, sizeof line);
	CHECK_CONTAINS(line, "KV 2.00 GiB (4 sequences), prompt cache 1.00 GiB, 8 slots/layer");
	in.budget -= 1;
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "KV 2.00 GiB (4 sequences) + scratch 64.0 MiB + prompt cache");
	in.n_seq = 1;
	in.cache_bytes = 0;
	in.budget = 8 * GiB;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	pt_plan_format(&in, &p, line, sizeof line);
	CHECK(strstr(line, "sequences") == NULL && strstr(line, "prompt cache") == NULL);
}

PT_TEST(test_expert_plan_exactly_enough)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	in.budget = 2 * GiB + GiB / 2 + 64 * MiB + 8ull * 48 * 3 * MiB;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 8);
	CHECK_EQ_INT(p.total_bytes, in.budget);
	CHECK_EQ_INT(p.min_budget, in.budget);
	CHECK(!p.all_experts);
	in.budget += 48 * 3 * MiB - 1; /* one byte short of a 9th slot */
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 8);
	in.budget += 1;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 9);
}

PT_TEST(test_expert_plan_everything_fits)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	char line[256];
	in.budget = 64 * GiB;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 128);
	CHECK(p.all_experts);
	CHECK_EQ_INT(p.pool_bytes, 128ull * 48 * 3 * MiB);
	pt_plan_format(&in, &p, line, sizeof line);
	CHECK_CONTAINS(line, "128 slots/layer \u00d7 48 layers \u00d7 3.0 MiB = 18.00 GiB");
	CHECK_CONTAINS(line, "resident 2.00 GiB, KV 512.0 MiB");
	/* a small model reads in MiB / KiB, not "0.00 GiB" */
	in = (struct pt_plan_input){ .budget = 20 * GiB, .resident_bytes = 10 * MiB + MiB / 2,
				     .kv_bytes = 48 * 1024, .scratch_bytes = 3 * MiB,
				     .slot_bytes = 256 * 1024, .n_moe_layers = 2, .top_k = 2,
				     .n_expert = 4 };
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	pt_plan_format(&in, &p, line, sizeof line);
	CHECK_CONTAINS(line, "resident 10.5 MiB, KV 48.0 KiB, 4 slots/layer \u00d7 2 layers "
			     "\u00d7 256.0 KiB = 2.0 MiB, total 15.5 MiB \u2264 budget 20.00 GiB");
}

/* Every expert held by the mapping: planned at the experts' actual bytes (all or none), not
 * as uniform slots of the largest layer's size; the refusal names them and the smallest
 * budget, the plan line says "mapped". */
PT_TEST(test_expert_plan_mapped_counts_actual_bytes)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	char line[256];
	const uint64_t fixed = 2 * GiB + GiB / 2 + 64 * MiB;
	const uint64_t mapped = 128ull * 48 * 3 * MiB - 700 * MiB; /* smaller layers than the slot */
	in.mapped_bytes = mapped;
	in.slots_override = 128; /* as the engine's --io mmap sets it: ignored beside the mapping */
	in.budget = fixed + mapped;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK(p.all_experts);
	CHECK_EQ_INT(p.slots_per_layer, 128);
	CHECK_EQ_INT(p.pool_bytes, mapped);
	CHECK_EQ_INT(p.total_bytes, fixed + mapped);
	CHECK_EQ_INT(p.min_budget, fixed + mapped);
	pt_plan_format(&in, &p, line, sizeof line);
	CHECK_CONTAINS(line, "routed experts 17.32 GiB mapped, total");
	CHECK(strstr(line, "slots/layer") == NULL);
	/* the same budget planned as slots holds fewer than every expert */
	in.mapped_bytes = 0;
	in.slots_override = 0;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK(!p.all_experts && p.slots_per_layer < 128);
	/* one byte short: refused whole (no partial mapping), with the smallest budget */
	in.mapped_bytes = mapped;
	in.budget = fixed + mapped - 1;
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "routed experts 17.32 GiB mapped needs");
	char num[32];
	snprintf(num, sizeof num, "%llu bytes", (unsigned long long)(fixed + mapped));
	CHECK_CONTAINS(err.msg, num);
	in.budget = UINT64_MAX;
	in.mapped_bytes = UINT64_MAX - GiB;
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT); /* overflow refused */
}

PT_TEST(test_expert_plan_size_units)
{
	char b[PT_PLAN_SIZE_LEN];
	CHECK_EQ_STR(pt_plan_size(0, b), "0 B");
	CHECK_EQ_STR(pt_plan_size(1023, b), "1023 B");
	CHECK_EQ_STR(pt_plan_size(1024, b), "1.0 KiB");
	CHECK_EQ_STR(pt_plan_size(MiB - 1, b), "1024.0 KiB");
	CHECK_EQ_STR(pt_plan_size(MiB, b), "1.0 MiB");
	CHECK_EQ_STR(pt_plan_size(GiB, b), "1.00 GiB");
	CHECK_EQ_STR(pt_plan_size(UINT64_MAX, b), "17179869184.00 GiB");
}

PT_TEST(test_expert_plan_override)
{
	struct pt_plan_input in = base();
	struct pt_plan p;
	struct pt_error err = { 0 };
	in.slots_override = 16;
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, 16);
	in.slots_override = 7; /* below top-k */
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "--expert-slots 7");
	pt_error_clear(&err);
	in.slots_override = 129;
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_INVALID);
	pt_error_clear(&err);
	in.slots_override = 100; /* 100*48*3 MiB = 14 GiB > budget */
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "100 slots/layer");
}

PT_TEST(test_expert_plan_odd_sizes)
{
	struct pt_plan_input in = {
		.budget = 1000003, .resident_bytes = 1, .kv_bytes = 7, .scratch_bytes = 13,
		.slot_bytes = 4097, .n_moe_layers = 3, .top_k = 1, .n_expert = 1000,
	};
	struct pt_plan p;
	struct pt_error err = { 0 };
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.slots_per_layer, (1000003 - 21) / (4097 * 3));
	CHECK(p.total_bytes <= in.budget);
	CHECK(p.total_bytes + 4097 * 3 > in.budget);
	in.n_moe_layers = 0; /* dense model: no slots needed */
	REQUIRE(pt_plan_compute(&in, &p, &err) == PT_OK);
	CHECK_EQ_INT(p.pool_bytes, 0);
	in.n_moe_layers = 3;
	in.slot_bytes = UINT64_MAX / 2; /* overflow is an error, not a wrap */
	CHECK_EQ_INT(pt_plan_compute(&in, &p, &err), PT_E_LIMIT);
}

static void put(const char *root, const char *rel, const char *text)
{
	char path[1024], cmd[1200];
	snprintf(path, sizeof path, "%s%s", root, rel);
	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
	CHECK(system(cmd) == 0);
	FILE *f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

PT_TEST(test_expert_plan_budget_cgroup_v2)
{
	char root[512];
	uint64_t lim, use, b;
	const char *src = NULL;
	snprintf(root, sizeof root, "%s/cg2", pt_test_tmpdir());
	put(root, "/proc/self/cgroup", "0::/user.slice/app\n");
	put(root, "/proc/meminfo", "MemTotal: 100 kB\nMemAvailable: 33554432 kB\n");
	put(root, "/sys/fs/cgroup/user.slice/app/memory.max", "max\n");
	put(root, "/sys/fs/cgroup/user.slice/app/memory.current", "1073741824\n");
	put(root, "/sys/fs/cgroup/user.slice/memory.max", "8589934592\n"); /* parent: 8 GiB */
	pt_plan_cgroup_limit(root, &lim, &use);
	CHECK_EQ_INT(lim, 8 * GiB);
	CHECK_EQ_INT(use, 1 * GiB);
	REQUIRE(pt_plan_default_budget(root, &b, &src, NULL) == PT_OK);
	CHECK_EQ_INT(b, 7 * GiB - 7 * GiB / 8); /* 7 GiB free in the cgroup, 1/8 headroom */
	CHECK_EQ_STR(src, "cgroup memory limit");
}

PT_TEST(test_expert_plan_budget_cgroup_v1_and_meminfo)
{
	char root[512];
	uint64_t lim, use, b;
	const char *src = NULL;
	snprintf(root, sizeof root, "%s/cg1", pt_test_tmpdir());
	put(root, "/proc/self/cgroup", "5:cpu:/\n4:memory:/docker/abc\n0::/\n");
	put(root, "/proc/meminfo", "MemAvailable: 1048576 kB\n"); /* 1 GiB */
	put(root, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
	pt_plan_cgroup_limit(root, &lim, &use);
	CHECK_EQ_INT(lim, 4 * GiB);
	REQUIRE(pt_plan_default_budget(root, &b, &src, NULL) == PT_OK);
	CHECK_EQ_INT(b, GiB - 256 * MiB); /* MemAvailable is lower; minimum headroom */
	CHECK_EQ_STR(src, "MemAvailable");
	/* v1 "unlimited" is a huge page-rounded number, not a limit */
	put(root, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
	    "9223372036854771712\n");
	pt_plan_cgroup_limit(root, &lim, &use);
	CHECK(lim == UINT64_MAX);
}

PT_TEST(test_expert_plan_budget_unknown)
{
	char root[512];
	uint64_t b;
	struct pt_error err = { 0 };
	snprintf(root, sizeof root, "%s/none", pt_test_tmpdir());
	CHECK_EQ_INT(pt_plan_default_budget(root, &b, NULL, &err), PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "--memory");
	/* the real system answers something */
	CHECK_EQ_INT(pt_plan_default_budget(NULL, &b, NULL, NULL), PT_OK);
	CHECK(b > 0);
}
