/* test_util.c - status/error records and the allocator. */
#include "util/status.h"
#include "util/alloc.h"
#include "gen/kv.h"
#include "test.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

PT_TEST(test_util_first_error_wins)
{
	struct pt_error e = { 0 };
	CHECK_EQ_INT(pt_error_set(&e, PT_E_FORMAT, "inner %d", 1), PT_E_FORMAT);
	CHECK_EQ_INT(pt_error_set(&e, PT_E_IO, "outer"), PT_E_IO);
	CHECK_EQ_INT(e.code, PT_E_FORMAT);
	CHECK_EQ_STR(e.msg, "inner 1");
	CHECK_EQ_INT(pt_error_set(NULL, PT_E_NOMEM, "x"), PT_E_NOMEM);
}

PT_TEST(test_util_error_at_and_sys)
{
	struct pt_error e = { 0 };
	pt_error_at(&e, PT_E_FORMAT, 24, "bad key");
	CHECK_EQ_STR(e.msg, "bad key at offset 24");
	CHECK_EQ_INT(e.offset, 24);
	pt_error_clear(&e);
	pt_error_sys(&e, PT_E_IO, ENOENT, "open %s", "x.gguf");
	CHECK_CONTAINS(e.msg, "open x.gguf: ");
	CHECK_EQ_INT(e.sys_errno, ENOENT);
}

PT_TEST(test_util_exit_codes)
{
	CHECK_EQ_INT(pt_status_exit_code(PT_OK), 0);
	CHECK_EQ_INT(pt_status_exit_code(PT_E_FORMAT), 2);
	CHECK_EQ_INT(pt_status_exit_code(PT_E_INVALID), 2);
	CHECK_EQ_INT(pt_status_exit_code(PT_E_IO), 1);
	CHECK_EQ_INT(pt_status_exit_code(PT_E_NOMEM), 1);
	CHECK_EQ_INT(pt_status_exit_code(PT_E_CANCELLED), 130);
	CHECK(pt_status_str(PT_E_LIMIT)[0] != '\0');
}

PT_TEST(test_util_alloc_overflow_and_fault_injection)
{
	CHECK(pt_mallocn(SIZE_MAX / 2, 3) == NULL);
	CHECK(pt_calloc(SIZE_MAX / 2, 3) == NULL);
	pt_alloc_fail_at(2);
	void *a = pt_malloc(8);
	void *b = pt_malloc(8);
	void *c = pt_malloc(8);
	CHECK(a != NULL);
	CHECK(b == NULL);
	CHECK(c != NULL);
	pt_free(a);
	pt_free(c);
	pt_alloc_fail_at(0);
	char *s = pt_strndup("hello", 3);
	CHECK_EQ_STR(s, "hel");
	pt_free(s);
}

/* THPeligible of the mapping holding p in /proc/self/smaps (-1: not found or not reported). */
static int thp_eligible(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	int in = 0, v = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
			if (in)
				break;
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		} else if (in && sscanf(line, "THPeligible: %d", &v) == 1) {
			break;
		}
	}
	fclose(f);
	return v;
}

/* Whether the kernel hands advised regions huge pages (THP "always" or "madvise"). */
static bool thp_advisable(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	char s[128] = "";
	if (f) {
		if (!fgets(s, sizeof s, f))
			s[0] = '\0';
		fclose(f);
	}
	return strstr(s, "[always]") || strstr(s, "[madvise]");
}

/* pt_alloc_pages: zeroed, page-aligned, writable, advised for 2 MiB pages (eligible where the
 * kernel gives them on advice), counted by the fail-at hook; 0 bytes and NULL frees are
 * harmless.  The KV cache takes its arrays from it (a calloc'd array is not eligible). */
PT_TEST(test_util_alloc_pages)
{
	enum { BYTES = 8 << 20 };
	CHECK(pt_alloc_pages(0) == NULL);
	pt_free_pages(NULL, BYTES);
	unsigned char *p = pt_alloc_pages(BYTES);
	REQUIRE(p);
	CHECK((uintptr_t)p % 4096 == 0);
	size_t nonzero = 0;
	for (size_t i = 0; i < BYTES; i += 4096)
		nonzero += p[i] != 0 || p[i + 4095] != 0;
	CHECK_EQ_INT(nonzero, 0);
	memset(p, 0x5a, BYTES);
	CHECK(p[BYTES - 1] == 0x5a);
	const int elig = thp_eligible(p + (4 << 20));
	if (thp_advisable() && elig >= 0)
		CHECK_EQ_INT(elig, 1);
	else
		printf("    (transparent huge pages off or not reported: eligibility not checked)\n");
	pt_free_pages(p, BYTES);
	pt_alloc_fail_at(1);
	CHECK(pt_alloc_pages(BYTES) == NULL);
	p = pt_alloc_pages(BYTES);
	CHECK(p != NULL);
	pt_free_pages(p, BYTES);
	pt_alloc_fail_at(0);
	/* the KV cache's arrays: 2 layers x 4 KV heads x 128 x 8,192 slots of F16, 8 MiB each */
	struct pt_kv kv;
	struct pt_error err = { 0 };
	const struct pt_kv_layer_desc d[2] = { { 4, 128, 128, 0, false }, { 4, 128, 128, 0, false } };
	REQUIRE(pt_kv_init(&kv, PT_KV_F16, 2, d, 8192, 512, &err) == PT_OK);
	CHECK((uintptr_t)kv.layers[1].k % 4096 == 0 && (uintptr_t)kv.layers[1].v % 4096 == 0);
	CHECK(kv.layers[1].k_bytes == (size_t)8 << 20 && kv.layers[1].v_bytes == (size_t)8 << 20);
	if (thp_advisable() && thp_eligible(kv.layers[1].k) >= 0) {
		CHECK_EQ_INT(thp_eligible((char *)kv.layers[1].k + (4 << 20)), 1);
		CHECK_EQ_INT(thp_eligible((char *)kv.layers[1].v + (4 << 20)), 1);
	}
	pt_kv_fini(&kv);
}
