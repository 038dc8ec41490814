/* lock.c - model ownership lock (see lock.h). */
#include "util/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/safefile.h"

/* The PID /proc/locks shows holding an flock on (dev, ino); 0 when it does not say (no
 * /proc, hidepid, a holder outside our PID namespace, a file system whose lock device
 * differs from st_dev). */
static long pid_from_proc_locks(dev_t dev, ino_t ino)
{
	char line[256], want[64];
	long found = 0;
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	snprintf(want, sizeof want, "%02x:%02x:%llu", major(dev), minor(dev),
		 (unsigned long long)ino);
	while (!found && fgets(line, sizeof line, f)) {
		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; "1: -> ..." is a waiter */
		char *save = NULL, *tok[8];
		int n = 0;
		for (char *t = strtok_r(line, " \t\n", &save); t && n < 8;
		     t = strtok_r(NULL, " \t\n", &save))
			tok[n++] = t;
		if (n < 6 || strcmp(tok[1], "->") == 0 || strcmp(tok[1], "FLOCK") != 0)
			continue;
		if (strcmp(tok[5], want) == 0)
			found = strtol(tok[4], NULL, 10);
	}
	fclose(f);
	return found > 0 ? found : 0;
}

/* The PID in our PID file, read without following links and only from a regular file of
 * ours (anything else is not trusted to tell us anything). */
static long pid_from_file(const char *path)
{
	char buf[32] = { 0 };
	char *end = NULL;
	long pid;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return 0;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	pid = strtol(buf, &end, 10);
	return (end != buf && pid > 0) ? pid : 0;
}

/* "<dir>/<dev>-<ino>.pid" in dir (NULL = the per-user runtime dir), checked to be ours. */
static enum pt_status pid_file_path(const char *dir, const struct stat *st, char *out,
				    size_t cap, struct pt_error *err)
{
	char rt[1024];
	enum pt_status s;
	int n;
	if (dir)
		s = pt_safe_dir(dir, true, err);
	else
		s = pt_user_runtime_dir(rt, sizeof rt, err);
	if (s != PT_OK)
		return s;
	n = snprintf(out, cap, "%s/%llx-%llx.pid", dir ? dir : rt,
		     (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
	if (n < 0 || (size_t)n >= cap)
		return pt_error_set(err, PT_E_INVALID, "lock directory path too long: %s",
				    dir ? dir : rt);
	return PT_OK;
}

enum pt_status pt_model_lock_acquire(struct pt_model_lock *lk, const char *model_path,
				     const char *dir, struct pt_error *err)
{
	struct stat st;
	char pid_text[32], pid_path[sizeof lk->path];
	struct pt_error perr = { 0 };
	bool have_pid_path;
	int fd, n;
	lk->fd = -1;
	lk->path[0] = '\0';
	lk->warning[0] = '\0';
	/* Read-only: locking must not need (or take) write access to the model. */
	fd = open(model_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open model '%s'", model_path);
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return pt_error_sys(err, PT_E_IO, e, "cannot stat model '%s'", model_path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return pt_error_set(err, PT_E_IO, "model '%s' is not a regular file", model_path);
	}
	have_pid_path = pid_file_path(dir, &st, pid_path, sizeof pid_path, &perr) == PT_OK;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK) {
			long pid = pid_from_proc_locks(st.st_dev, st.st_ino);
			if (!pid && have_pid_path)
				pid = pid_from_file(pid_path);
			if (pid)
				return pt_error_set(err, PT_E_BUSY,
						    "model '%s' is in use by another particle "
						    "process (pid %ld); use --no-lock to override",
						    model_path, pid);
			return pt_error_set(err, PT_E_BUSY,
					    "model '%s' is in use by another process (pid "
					    "unknown, perhaps another user's); use --no-lock to "
					    "override",
					    model_path);
		}
		return pt_error_sys(err, PT_E_IO, e,
				    "cannot lock model '%s' (use --no-lock on file systems without "
				    "flock)",
				    model_path);
	}
	lk->fd = fd;
	/* The PID file is replaced by rename, never opened by its name for writing: a link
	 * planted there is replaced, not followed. */
	n = snprintf(pid_text, sizeof pid_text, "%ld\n", (long)getpid());
	if (have_pid_path &&
	    pt_safe_write_file(pid_path, pid_text, (size_t)n, 0600, &perr) == PT_OK) {
		memcpy(lk->path, pid_path, strlen(pid_path) + 1);
	} else {
		snprintf(lk->warning, sizeof lk->warning, "the model lock holds, but its PID file "
			 "was not written: %s", perr.msg);
	}
	return PT_OK;
}

void pt_model_lock_release(struct pt_model_lock *lk)
{
	if (!lk || lk->fd < 0)
		return;
	/* Remove the PID file while we still hold the lock, so nobody reads our PID after we
	 * let go (a newer holder's file is written only after it has the lock). */
	if (lk->path[0])
		unlink(lk->path);
	lk->path[0] = '\0';
	close(lk->fd);
	lk->fd = -1;
}
