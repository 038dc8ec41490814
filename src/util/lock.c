/* lock.c - model ownership lock (see lock.h). */
#include "util/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static long read_pid(int fd)
{
	char buf[32] = { 0 };
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	char *end = NULL;
	long pid;
	if (n <= 0)
		return 0;
	pid = strtol(buf, &end, 10);
	return (end != buf && pid > 0) ? pid : 0;
}

enum pt_status pt_model_lock_acquire(struct pt_model_lock *lk, const char *model_path,
				     const char *dir, struct pt_error *err)
{
	struct stat st;
	char pid_text[32];
	int fd, n;
	lk->fd = -1;
	lk->path[0] = '\0';
	if (stat(model_path, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open model '%s'", model_path);
	if (!dir)
		dir = getenv("XDG_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = "/tmp";
	n = snprintf(lk->path, sizeof lk->path, "%s/particle-%llx-%llx.lock", dir,
		     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	if (n < 0 || (size_t)n >= sizeof lk->path)
		return pt_error_set(err, PT_E_INVALID, "lock directory path too long: %s", dir);
	fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot create lock file %s", lk->path);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		long pid = read_pid(fd);
		close(fd);
		if (e == EWOULDBLOCK)
			return pt_error_set(err, PT_E_BUSY,
					    "model '%s' is in use by another particle process "
					    "(pid %ld); use --no-lock to override",
					    model_path, pid);
		return pt_error_sys(err, PT_E_IO, e, "cannot lock %s", lk->path);
	}
	n = snprintf(pid_text, sizeof pid_text, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid_text, (size_t)n, 0) != n) {
		int e = errno;
		close(fd);
		return pt_error_sys(err, PT_E_IO, e, "cannot write lock file %s", lk->path);
	}
	lk->fd = fd;
	return PT_OK;
}

void pt_model_lock_release(struct pt_model_lock *lk)
{
	if (!lk || lk->fd < 0)
		return;
	/* Truncate first so a reader never sees our PID after we let go. */
	if (ftruncate(lk->fd, 0) != 0) {
		/* nothing useful to do: the flock is released on close regardless */
	}
	close(lk->fd);
	lk->fd = -1;
}
