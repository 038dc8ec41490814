/* main.c - unit-test runner: `pt_test [--list] [FILTER...]` runs every registered test whose
 * name contains one of the filters (all when none), prints one line per failing check and a
 * closing `N passed, N failed` line; exit 0 when all pass, 1 otherwise. */
#include "test.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	const char *name;
	pt_test_fn fn;
	const char *file;
};

#define MAX_TESTS 8192
static struct entry tests[MAX_TESTS];
static int n_tests;
static int current_failed;
static char tmpdir[256];

void pt_test_register(const char *name, pt_test_fn fn, const char *file)
{
	if (n_tests >= MAX_TESTS) {
		fprintf(stderr, "pt_test: too many tests\n");
		exit(2);
	}
	tests[n_tests++] = (struct entry){ name, fn, file };
}

void pt_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	current_failed++;
	if (current_failed > 20)
		return; /* one broken loop should not flood the log */
	fprintf(stderr, "    %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *pt_test_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof tmpdir, "%s/pt_test.XXXXXX", base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("pt_test: mkdtemp");
			exit(2);
		}
	}
	return tmpdir;
}

const char *pt_test_tmpfile(const char *name)
{
	static char slots[4][512];
	static int next;
	char *p = slots[next++ & 3];
	snprintf(p, 512, "%s/%s", pt_test_tmpdir(), name);
	return p;
}

const char *pt_test_shared_dir(void)
{
	/* CI and the main checkout have shared/ beside the repo; helper worktrees one more up. */
	static const char *const guesses[] = { "../shared", "../../shared" };
	struct stat st;
	const char *s = getenv("PT_SHARED");
	if (s)
		return s;
	for (size_t i = 0; i < sizeof guesses / sizeof guesses[0]; i++)
		if (stat(guesses[i], &st) == 0 && S_ISDIR(st.st_mode))
			return guesses[i];
	return guesses[0];
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static int selected(const char *name, int argc, char **argv)
{
	int any = 0;
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		any = 1;
		if (strstr(name, argv[i]))
			return 1;
	}
	return !any;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, list = 0, verbose = getenv("PT_TEST_VERBOSE") != NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0)
			list = 1;
		else if (strcmp(argv[i], "-v") == 0)
			verbose = 1;
	}
	qsort(tests, (size_t)n_tests, sizeof tests[0], cmp_entry);
	for (int i = 0; i < n_tests; i++) {
		if (!selected(tests[i].name, argc, argv))
			continue;
		if (list) {
			printf("%s\n", tests[i].name);
			continue;
		}
		current_failed = 0;
		if (verbose)
			fprintf(stderr, "  %s ...\n", tests[i].name);
		tests[i].fn();
		if (current_failed) {
			failed++;
			fprintf(stderr, "FAIL %s (%s)\n", tests[i].name, tests[i].file);
		} else {
			passed++;
		}
	}
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	if (!list)
		printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
