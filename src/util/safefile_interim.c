/* safefile_interim.c - a minimal stand-in for the safefile.h contract until the `security`
 * branch (issue 22) lands its implementation.  Every definition is weak so the real one
 * replaces it at link time; the lead deletes this file when merging `security`.
 * It follows the contract's rules (O_EXCL | O_NOFOLLOW temporary names, fsync + rename +
 * directory fsync, fstat checks on in-place files, 0700 per-user directories). */
#include "util/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"

#define WEAK __attribute__((weak))

static enum pt_status sync_dir_of(const char *path, struct pt_error *err)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd;
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open directory %s", dir);
	if (fsync(fd) != 0 && errno != EINVAL) {
		close(fd);
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync directory %s", dir);
	}
	close(fd);
	return PT_OK;
}

WEAK enum pt_status pt_safe_create(struct pt_safe_file *f, const char *path, mode_t mode,
				   struct pt_error *err)
{
	size_t n = strlen(path);
	memset(f, 0, sizeof *f);
	f->fd = -1;
	f->path = pt_strdup(path);
	f->tmp_path = pt_malloc(n + 32);
	if (!f->path || !f->tmp_path) {
		pt_safe_abort(f);
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating %s", path);
	}
	for (int tries = 0; tries < 16; tries++) {
		uint64_t r = 0;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
			r = (uint64_t)getpid() * 2654435761u + (uint64_t)tries;
		snprintf(f->tmp_path, n + 32, "%s.tmp%016llx", path, (unsigned long long)r);
		f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     mode);
		if (f->fd >= 0 || errno != EEXIST)
			break;
	}
	if (f->fd < 0) {
		int e = errno;
		pt_free(f->tmp_path);
		f->tmp_path = NULL;
		pt_safe_abort(f);
		return pt_error_sys(err, PT_E_IO, e, "cannot create %s", path);
	}
	return PT_OK;
}

WEAK FILE *pt_safe_stdio(struct pt_safe_file *f, struct pt_error *err)
{
	if (!f->fp)
		f->fp = fdopen(f->fd, "w");
	if (!f->fp)
		pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->tmp_path);
	return f->fp;
}

WEAK enum pt_status pt_safe_commit(struct pt_safe_file *f, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	if (f->fp && fflush(f->fp) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->tmp_path);
	if (st == PT_OK && fsync(f->fd) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", f->tmp_path);
	if (f->fp)
		fclose(f->fp);
	else if (f->fd >= 0)
		close(f->fd);
	f->fp = NULL;
	f->fd = -1;
	if (st == PT_OK && rename(f->tmp_path, f->path) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot rename %s to %s", f->tmp_path,
				  f->path);
	if (st == PT_OK)
		st = sync_dir_of(f->path, err);
	else
		unlink(f->tmp_path);
	pt_free(f->path);
	pt_free(f->tmp_path);
	f->path = f->tmp_path = NULL;
	return st;
}

WEAK void pt_safe_abort(struct pt_safe_file *f)
{
	if (!f)
		return;
	if (f->fp)
		fclose(f->fp);
	else if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	pt_free(f->path);
	pt_free(f->tmp_path);
	f->fp = NULL;
	f->fd = -1;
	f->path = f->tmp_path = NULL;
}

WEAK enum pt_status pt_safe_open_rw(const char *path, mode_t mode, int *fd_out, bool *created,
				    struct pt_error *err)
{
	struct stat st;
	bool made = false;
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		made = fd >= 0;
	}
	if (fd < 0)
		return pt_error_sys(err, errno == ELOOP ? PT_E_INVALID : PT_E_IO, errno,
				    "cannot open %s", path);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1 || (st.st_mode & 022)) {
		close(fd);
		return pt_error_set(err, PT_E_INVALID, "refusing to write %s: not a regular file "
				    "of yours with one link and no group/other write permission",
				    path);
	}
	*fd_out = fd;
	if (created)
		*created = made;
	return PT_OK;
}

static enum pt_status check_dir(const char *path, struct pt_error *err)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot use directory %s", path);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return pt_error_set(err, PT_E_INVALID, "refusing directory %s: not a directory of "
				    "yours without group/other write permission", path);
	return PT_OK;
}

WEAK enum pt_status pt_safe_dir(const char *path, bool create, struct pt_error *err)
{
	char buf[4096];
	if (create) {
		size_t n = strlen(path);
		if (n >= sizeof buf)
			return pt_error_set(err, PT_E_INVALID, "path too long: %.100s", path);
		memcpy(buf, path, n + 1);
		for (char *p = buf + 1; *p; p++) {
			if (*p != '/')
				continue;
			*p = '\0';
			if (mkdir(buf, 0700) != 0 && errno != EEXIST)
				return pt_error_sys(err, PT_E_IO, errno, "cannot create %s", buf);
			*p = '/';
		}
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return pt_error_sys(err, PT_E_IO, errno, "cannot create %s", buf);
	}
	return check_dir(path, err);
}

WEAK enum pt_status pt_user_dir(const char *sub, char *out, size_t cap, struct pt_error *err)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (xdg && xdg[0] == '/')
		n = snprintf(out, cap, "%s/particle%s%s", xdg, sub ? "/" : "", sub ? sub : "");
	else if (home && home[0] == '/')
		n = snprintf(out, cap, "%s/.cache/particle%s%s", home, sub ? "/" : "",
			     sub ? sub : "");
	else
		return pt_error_set(err, PT_E_INVALID, "neither XDG_CACHE_HOME nor HOME is set");
	if (n < 0 || (size_t)n >= cap)
		return pt_error_set(err, PT_E_INVALID, "cache path too long");
	return pt_safe_dir(out, true, err);
}
