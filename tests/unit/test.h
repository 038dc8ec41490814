/* test.h - the unit-test harness.  A test is
 *     PT_TEST(test_gguf_rejects_bad_magic) { ... CHECK(x == 1); ... }
 * Tests register themselves at start-up, so a new tests/unit/test_<module>.c needs no table
 * edit.  CHECK* record a failure and continue; REQUIRE* record and return from the test. */
#ifndef PT_TEST_H
#define PT_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*pt_test_fn)(void);
void pt_test_register(const char *name, pt_test_fn fn, const char *file);
void pt_test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A fresh temporary directory for this test run (created once, removed at exit). */
const char *pt_test_tmpdir(void);
/* Path of a file in the temporary directory; the result is a static buffer per call slot
 * (4 slots rotate), so copy it if more than four must live at once. */
const char *pt_test_tmpfile(const char *name);
/* Directory of shared/ (../shared from the repo root, or $PT_SHARED). */
const char *pt_test_shared_dir(void);

#define PT_TEST(name)                                                                      \
	static void name(void);                                                            \
	__attribute__((constructor)) static void name##_register(void)                      \
	{                                                                                  \
		pt_test_register(#name, name, __FILE__);                                   \
	}                                                                                  \
	static void name(void)

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond))                                                               \
			pt_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);              \
	} while (0)
#define REQUIRE(cond)                                                                      \
	do {                                                                               \
		if (!(cond)) {                                                             \
			pt_test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);            \
			return;                                                            \
		}                                                                          \
	} while (0)
#define CHECK_EQ_INT(a, b)                                                                 \
	do {                                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);                        \
		if (a_ != b_)                                                              \
			pt_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, \
				     a_, b_);                                              \
	} while (0)
#define CHECK_EQ_STR(a, b)                                                                 \
	do {                                                                               \
		const char *a_ = (a), *b_ = (b);                                           \
		if (!a_ || !b_ || strcmp(a_, b_) != 0)                                     \
			pt_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,  \
				     a_ ? a_ : "(null)", b_ ? b_ : "(null)");              \
	} while (0)
/* Substring check, for error messages. */
#define CHECK_CONTAINS(hay, needle)                                                        \
	do {                                                                               \
		const char *h_ = (hay), *n_ = (needle);                                    \
		if (!h_ || !strstr(h_, n_))                                                \
			pt_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"",   \
				     h_ ? h_ : "(null)", n_);                              \
	} while (0)
#define CHECK_NEAR(a, b, tol)                                                              \
	do {                                                                               \
		double a_ = (double)(a), b_ = (double)(b);                                 \
		if (!(fabs(a_ - b_) <= (tol)))                                             \
			pt_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, \
				     #b, a_, b_, (double)(tol));                           \
	} while (0)

#endif
