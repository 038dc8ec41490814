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

/* ---- issue 22: the lock is on the model itself, the PID file lives in a private dir ---- */

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

struct holder {
	pid_t pid;
	int done_w;
};

/* A child process that takes the lock on `model` and holds it until told to stop. */
static int start_holder(struct holder *h, const char *model, const char *dir)
{
	int ready[2], done[2];
	char ok = 0;
	if (pipe(ready) != 0 || pipe(done) != 0)
		return 0;
	h->pid = fork();
	if (h->pid < 0)
		return 0;
	if (h->pid == 0) {
		struct pt_model_lock lk;
		struct pt_error e = { 0 };
		ok = pt_model_lock_acquire(&lk, model, dir, &e) == PT_OK;
		if (write(ready[1], &ok, 1) != 1 || read(done[0], &ok, 1) < 0)
			_exit(1);
		pt_model_lock_release(&lk);
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	h->done_w = done[1];
	if (read(ready[0], &ok, 1) != 1)
		ok = 0;
	close(ready[0]);
	return ok;
}

static void stop_holder(struct holder *h)
{
	char c = 0;
	if (write(h->done_w, &c, 1) != 1)
		kill(h->pid, SIGKILL);
	close(h->done_w);
	waitpid(h->pid, NULL, 0);
}

static void lock_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int same_text(const char *path, const char *text)
{
	char buf[128] = { 0 };
	FILE *f = fopen(path, "r");
	size_t n;
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	return n == strlen(text) && memcmp(buf, text, n) == 0;
}

PT_TEST(test_util_lock_refuses_via_symlink_hardlink_and_other_path)
{
	char dir[600], model[700], sym[700], hard[700], other[700], pids[700];
	struct holder h;
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	char want[32];
	snprintf(dir, sizeof dir, "%s/lock-paths", pt_test_tmpdir());
	REQUIRE(mkdir(dir, 0700) == 0);
	snprintf(model, sizeof model, "%s/m.gguf", dir);
	snprintf(sym, sizeof sym, "%s/sym.gguf", dir);
	snprintf(hard, sizeof hard, "%s/hard.gguf", dir);
	snprintf(other, sizeof other, "%s/../lock-paths/./m.gguf", dir);
	snprintf(pids, sizeof pids, "%s/pids", dir);
	lock_write(model, "model");
	chmod(model, 0444); /* the lock needs no write access to the model */
	REQUIRE(symlink(model, sym) == 0);
	REQUIRE(link(model, hard) == 0);
	REQUIRE(start_holder(&h, model, pids));
	snprintf(want, sizeof want, "pid %ld", (long)h.pid);
	const char *paths[] = { model, sym, hard, other };
	for (int i = 0; i < 4; i++) {
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_model_lock_acquire(&lk, paths[i], pids, &e), PT_E_BUSY);
		CHECK_CONTAINS(e.msg, want);
		CHECK_CONTAINS(e.msg, paths[i]);
	}
	/* per open file description: this process's own second open is refused too */
	stop_holder(&h);
	pt_error_clear(&e);
	REQUIRE(pt_model_lock_acquire(&lk, sym, pids, &e) == PT_OK);
	{
		struct pt_model_lock lk2;
		CHECK_EQ_INT(pt_model_lock_acquire(&lk2, hard, pids, &e), PT_E_BUSY);
		snprintf(want, sizeof want, "pid %ld", (long)getpid());
		CHECK_CONTAINS(e.msg, want);
	}
	pt_model_lock_release(&lk);
	CHECK(same_text(model, "model"));
}

PT_TEST(test_util_lock_pid_file_private_and_removed)
{
	char dir[600], model[700];
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	struct stat st;
	char want[32];
	snprintf(dir, sizeof dir, "%s/lock-pidfile", pt_test_tmpdir());
	snprintf(model, sizeof model, "%s/lock-pidfile.gguf", pt_test_tmpdir());
	lock_write(model, "m");
	REQUIRE(pt_model_lock_acquire(&lk, model, dir, &e) == PT_OK);
	CHECK_EQ_STR(lk.warning, "");
	REQUIRE(lk.path[0] != '\0');
	CHECK(strncmp(lk.path, dir, strlen(dir)) == 0);
	REQUIRE(lstat(lk.path, &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	snprintf(want, sizeof want, "%ld\n", (long)getpid());
	CHECK(same_text(lk.path, want));
	REQUIRE(stat(dir, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0700); /* created private */
	char path[sizeof lk.path];
	memcpy(path, lk.path, sizeof path);
	pt_model_lock_release(&lk);
	CHECK(access(path, F_OK) != 0);
}

PT_TEST(test_util_lock_planted_pid_file_link_is_replaced_not_followed)
{
	char dir[600], model[700], victim[700], pidpath[800];
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	struct stat st;
	snprintf(dir, sizeof dir, "%s/lock-planted", pt_test_tmpdir());
	REQUIRE(mkdir(dir, 0700) == 0);
	snprintf(model, sizeof model, "%s/m.gguf", dir);
	snprintf(victim, sizeof victim, "%s/victim", dir);
	lock_write(model, "m");
	lock_write(victim, "precious");
	REQUIRE(stat(model, &st) == 0);
	snprintf(pidpath, sizeof pidpath, "%s/%llx-%llx.pid", dir, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	for (int kind = 0; kind < 2; kind++) {
		REQUIRE((kind == 0 ? symlink(victim, pidpath) : link(victim, pidpath)) == 0);
		pt_error_clear(&e);
		REQUIRE(pt_model_lock_acquire(&lk, model, dir, &e) == PT_OK);
		CHECK_EQ_STR(lk.path, pidpath);
		CHECK(same_text(victim, "precious"));
		pt_model_lock_release(&lk);
		CHECK(same_text(victim, "precious"));
		CHECK(lstat(pidpath, &st) != 0); /* our PID file is gone ... */
		CHECK(access(victim, F_OK) == 0); /* ... the victim is not */
	}
}

PT_TEST(test_util_lock_unsafe_pid_dir_still_locks_without_pid_file)
{
	char dir[600], model[700];
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	snprintf(dir, sizeof dir, "%s/lock-open", pt_test_tmpdir());
	REQUIRE(mkdir(dir, 0700) == 0);
	chmod(dir, 0777);
	snprintf(model, sizeof model, "%s/m.gguf", dir);
	lock_write(model, "m");
	REQUIRE(pt_model_lock_acquire(&lk, model, dir, &e) == PT_OK);
	CHECK_EQ_STR(lk.path, "");
	CHECK_CONTAINS(lk.warning, "writable by group or others");
	{ /* nothing was created in the shared directory */
		char probe[800];
		struct stat st;
		REQUIRE(stat(model, &st) == 0);
		snprintf(probe, sizeof probe, "%s/%llx-%llx.pid", dir,
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
		CHECK(access(probe, F_OK) != 0);
	}
	/* and the lock still refuses a second holder, naming us (from /proc/locks) */
	{
		struct pt_model_lock lk2;
		char want[32];
		snprintf(want, sizeof want, "pid %ld", (long)getpid());
		CHECK_EQ_INT(pt_model_lock_acquire(&lk2, model, dir, &e), PT_E_BUSY);
		CHECK_CONTAINS(e.msg, want);
	}
	pt_model_lock_release(&lk);
}

PT_TEST(test_util_lock_default_dir_is_per_user)
{
	const char *old_rt = getenv("XDG_RUNTIME_DIR"), *old_cache = getenv("XDG_CACHE_HOME");
	char *save_rt = old_rt ? strdup(old_rt) : NULL, *save_cache = old_cache ? strdup(old_cache) : NULL;
	char cache[600], model[700];
	struct pt_model_lock lk;
	struct pt_error e = { 0 };
	snprintf(cache, sizeof cache, "%s/lock-cache", pt_test_tmpdir());
	snprintf(model, sizeof model, "%s/lock-default.gguf", pt_test_tmpdir());
	lock_write(model, "m");
	unsetenv("XDG_RUNTIME_DIR");
	setenv("XDG_CACHE_HOME", cache, 1);
	REQUIRE(pt_model_lock_acquire(&lk, model, NULL, &e) == PT_OK);
	CHECK_CONTAINS(lk.path, "/lock-cache/particle/locks/");
	CHECK(strncmp(lk.path, "/tmp/particle-", 14) != 0);
	pt_model_lock_release(&lk);
	if (save_rt)
		setenv("XDG_RUNTIME_DIR", save_rt, 1);
	if (save_cache)
		setenv("XDG_CACHE_HOME", save_cache, 1);
	else
		unsetenv("XDG_CACHE_HOME");
	free(save_rt);
	free(save_cache);
}
