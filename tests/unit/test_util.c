/* test_util.c - status/error records and the allocator. */
#include "util/status.h"
#include "util/alloc.h"
#include "test.h"

#include <errno.h>
#include <stdint.h>

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
