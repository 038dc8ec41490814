/* test_util_lock.c - model ownership lock across processes. */
#include "util/lock.h"
#include "test.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

PT_TEST(test_util_lock_second_process_refused_with_pid)
{
	const char *model = pt_test_tmpfile("lock-model.gguf");
	FILE *f = fopen(model, "w");
	int ready[2], done[2];
	char c;
	REQUIRE(f);
	fputs("x", f);
	fclose(f);
	REQUIRE(pipe(ready) == 0 && pipe(done) == 0);
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		struct pt_model_lock lk;
		struct pt_error e = { 0 };
		char ok = pt_model_lock_acquire(&lk, model, pt_test_tmpdir(), &e) == PT_OK;
		if (write(ready[1], &ok, 1) != 1 || read(done[0], &ok, 1) < 0)
			_exit(1);
		pt_model_lock_release(&lk);
		_exit(0);
	}
	REQUIRE(read(ready[0], &c, 1) == 1);
	CHECK(c == 1);
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	char pidbuf[32];
	snprintf(pidbuf, sizeof pidbuf, "pid %ld", (long)child);
	CHECK_EQ_INT(pt_model_lock_acquire(&lk, model, pt_test_tmpdir(), &e), PT_E_BUSY);
	CHECK_CONTAINS(e.msg, pidbuf);
	CHECK_CONTAINS(e.msg, "--no-lock");
	REQUIRE(write(done[1], &c, 1) == 1);
	waitpid(child, NULL, 0);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_model_lock_acquire(&lk, model, pt_test_tmpdir(), &e), PT_OK);
	pt_model_lock_release(&lk);
	pt_model_lock_release(&lk); /* idempotent */
	close(ready[0]); close(ready[1]); close(done[0]); close(done[1]);
}

PT_TEST(test_util_lock_missing_model_is_io_error)
{
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	CHECK_EQ_INT(pt_model_lock_acquire(&lk, "/nonexistent/m.gguf", NULL, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "/nonexistent/m.gguf");
	pt_model_lock_release(&lk);
}
