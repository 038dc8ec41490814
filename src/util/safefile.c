/* safefile.c - the one way particle creates and updates files (see safefile.h, SECURITY.md).
 *
 * Why each rule: a predictable name in a directory someone else can write is a place where
 * they plant a symlink, a hard link or their own file before we open it; O_EXCL on a random
 * name, O_NOFOLLOW and fstat checks take every one of those away, and rename() replaces
 * whatever stands at the final name instead of writing through it. */
#include "util/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"

#define TMP_ATTEMPTS 16

/* ---- small helpers ----------------------------------------------------------------------- */

/* The directory part of path ("." when there is none); caller frees. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return pt_strdup(".");
	if (slash == path)
		return pt_strdup("/");
	return pt_strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static enum pt_status random_hex(char *out, size_t nbytes, struct pt_error *err)
{
	unsigned char raw[16];
	size_t got = 0;
	if (nbytes > sizeof raw)
		nbytes = sizeof raw;
	while (got < nbytes) {
		ssize_t n = getrandom(raw + got, nbytes - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return pt_error_sys(err, PT_E_IO, errno, "getrandom failed");
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < nbytes; i++) {
		static const char hex[] = "0123456789abcdef";
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * nbytes] = '\0';
	return PT_OK;
}

/* fsync of a directory makes a rename durable; some file systems refuse it (EINVAL), which
 * is not an error worth failing a write for. */
static enum pt_status fsync_dir(const char *dir, struct pt_error *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open directory %s", dir);
	if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
		int e = errno;
		close(fd);
		return pt_error_sys(err, PT_E_IO, e, "cannot sync directory %s", dir);
	}
	close(fd);
	return PT_OK;
}

/* ---- temporary files in flight ------------------------------------------------------------
 * An interrupted command (Ctrl-C in mkmodel, a kill of pack) must not leave a hidden
 * temporary of gigabytes behind: every open temporary is listed here, and the handler of
 * pt_safe_unlink_on_signals unlinks them (unlink is async-signal-safe) before the process
 * dies of the signal.  Lock-free slots: the handler may run on any thread at any time. */
#define LIVE_MAX 16
static _Atomic(char *) live_tmp[LIVE_MAX];

static void live_add(char *tmp)
{
	for (int i = 0; i < LIVE_MAX; i++) {
		char *expected = NULL;
		if (atomic_compare_exchange_strong(&live_tmp[i], &expected, tmp))
			return;
	}
	/* more than LIVE_MAX at once: this one is cleaned up by abort only */
}

static void live_remove(char *tmp)
{
	for (int i = 0; i < LIVE_MAX && tmp; i++) {
		char *expected = tmp;
		if (atomic_compare_exchange_strong(&live_tmp[i], &expected, NULL))
			return;
	}
}

static void unlink_live_and_die(int sig)
{
	for (int i = 0; i < LIVE_MAX; i++) {
		char *tmp = atomic_load(&live_tmp[i]);
		if (tmp)
			unlink(tmp);
	}
	/* SA_RESETHAND restored the default action; the signal is delivered again when the
	 * handler returns, so the exit status says which signal ended the process (130 for
	 * SIGINT in a shell). */
	raise(sig);
}

void pt_safe_unlink_on_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = unlink_live_and_die;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old;
		/* a signal the parent set to be ignored (nohup) stays ignored */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

static void release(struct pt_safe_file *f)
{
	live_remove(f->tmp_path);
	pt_free(f->path);
	pt_free(f->tmp_path);
	f->path = NULL;
	f->tmp_path = NULL;
	f->fp = NULL;
	f->fd = -1;
}

/* ---- new files: temp + rename ------------------------------------------------------------ */

enum pt_status pt_safe_create(struct pt_safe_file *f, const char *path, mode_t mode,
			      struct pt_error *err)
{
	char *dir;
	size_t cap;
	f->fd = -1;
	f->fp = NULL;
	f->path = NULL;
	f->tmp_path = NULL;
	f->drop_cache = false;
	if (!path || !*path)
		return pt_error_set(err, PT_E_INVALID, "empty output path");
	if (!*base_of(path) || strcmp(base_of(path), ".") == 0 || strcmp(base_of(path), "..") == 0)
		return pt_error_set(err, PT_E_INVALID, "output path '%s' names a directory", path);
	dir = dir_of(path);
	f->path = pt_strdup(path);
	/* dir + "/." + base + ".tmp-" + 32 hex + NUL */
	cap = (dir ? strlen(dir) : 0) + strlen(base_of(path)) + 48;
	f->tmp_path = pt_malloc(cap);
	if (!dir || !f->path || !f->tmp_path) {
		pt_free(dir);
		release(f);
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating %s", path);
	}
	for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
		char rnd[33];
		enum pt_status st = random_hex(rnd, 12, err);
		if (st != PT_OK) {
			pt_free(dir);
			release(f);
			return st;
		}
		/* at most 200 bytes of the name, so the temp still fits NAME_MAX (255) */
		snprintf(f->tmp_path, cap, "%s/.%.200s.tmp-%s", dir, base_of(path), rnd);
		f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     mode);
		if (f->fd >= 0) {
			pt_free(dir);
			live_add(f->tmp_path);
			return PT_OK;
		}
		if (errno != EEXIST)
			break;
	}
	{
		int e = errno;
		enum pt_status st = pt_error_sys(err, PT_E_IO, e,
						 "cannot create a file in %s for '%s'", dir, path);
		pt_free(dir);
		release(f);
		return st;
	}
}

FILE *pt_safe_stdio(struct pt_safe_file *f, struct pt_error *err)
{
	if (!f || f->fd < 0) {
		pt_error_set(err, PT_E_INVALID, "pt_safe_stdio on a file that is not open");
		return NULL;
	}
	if (f->fp)
		return f->fp;
	f->fp = fdopen(f->fd, "w");
	if (!f->fp)
		pt_error_sys(err, PT_E_IO, errno, "cannot open a stream for %s", f->path);
	return f->fp;
}

enum pt_status pt_safe_write(struct pt_safe_file *f, const void *buf, size_t len,
			     struct pt_error *err)
{
	const char *p = buf;
	if (f->fp) {
		if (len && fwrite(buf, 1, len, f->fp) != len)
			return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->path);
		return PT_OK;
	}
	while (len > 0) {
		ssize_t n = write(f->fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->path);
		}
		p += n;
		len -= (size_t)n;
	}
	return PT_OK;
}

/* A stream output (pt_safe_output on /dev/stdout, a FIFO ...): flush and close, no rename. */
static enum pt_status commit_stream(struct pt_safe_file *f, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	if (f->fp) {
		if (fflush(f->fp) != 0 || ferror(f->fp))
			st = pt_error_sys(err, PT_E_IO, errno ? errno : EIO, "cannot write %s",
					  f->path);
		if (fclose(f->fp) != 0 && st == PT_OK)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->path);
	} else if (close(f->fd) != 0) {
		st = pt_error_sys(err, PT_E_IO, errno, "cannot write %s", f->path);
	}
	release(f);
	return st;
}

void pt_drop_page_cache(int fd)
{
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

enum pt_status pt_safe_commit(struct pt_safe_file *f, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	char *dir;
	if (!f || !f->path)
		return pt_error_set(err, PT_E_INVALID, "commit of a file that is not open");
	if (!f->tmp_path)
		return commit_stream(f, err);
	if (f->fp) {
		if (fflush(f->fp) != 0 || ferror(f->fp))
			st = pt_error_sys(err, PT_E_IO, errno ? errno : EIO, "cannot write %s",
					  f->path);
		if (st == PT_OK && fsync(fileno(f->fp)) != 0)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", f->path);
		if (st == PT_OK && f->drop_cache)
			pt_drop_page_cache(fileno(f->fp));
		if (fclose(f->fp) != 0 && st == PT_OK)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot close %s", f->path);
	} else {
		if (fsync(f->fd) != 0)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", f->path);
		if (st == PT_OK && f->drop_cache)
			pt_drop_page_cache(f->fd);
		if (close(f->fd) != 0 && st == PT_OK)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot close %s", f->path);
	}
	f->fp = NULL;
	f->fd = -1;
	if (st == PT_OK && rename(f->tmp_path, f->path) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot replace %s", f->path);
	if (st != PT_OK) {
		unlink(f->tmp_path);
		release(f);
		return st;
	}
	dir = dir_of(f->path);
	st = dir ? fsync_dir(dir, err) : PT_OK;
	pt_free(dir);
	release(f);
	return st;
}

void pt_safe_abort(struct pt_safe_file *f)
{
	/* Live only while path is set: a zeroed or committed struct holds nothing (and its
	 * fd 0 must not be closed). */
	if (!f || !f->path) {
		if (f)
			release(f);
		return;
	}
	if (f->fp)
		fclose(f->fp);
	else if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	release(f);
}

enum pt_status pt_safe_write_file(const char *path, const void *data, size_t len, mode_t mode,
				  struct pt_error *err)
{
	struct pt_safe_file f;
	enum pt_status st = pt_safe_create(&f, path, mode, err);
	if (st != PT_OK)
		return st;
	st = pt_safe_write(&f, data, len, err);
	if (st != PT_OK) {
		pt_safe_abort(&f);
		return st;
	}
	return pt_safe_commit(&f, err);
}

/* The descriptor number a /dev/stdout-like name stands for, or -1. */
static int stream_fd_name(const char *path)
{
	static const char *const prefixes[] = { "/dev/fd/", "/proc/self/fd/" };
	if (strcmp(path, "/dev/stdout") == 0)
		return 1;
	if (strcmp(path, "/dev/stderr") == 0)
		return 2;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
		size_t n = strlen(prefixes[i]);
		char *end = NULL;
		long v;
		if (strncmp(path, prefixes[i], n) != 0 || path[n] < '0' || path[n] > '9')
			continue;
		v = strtol(path + n, &end, 10);
		if (*end == '\0' && v >= 0 && v < INT_MAX)
			return (int)v;
	}
	return -1;
}

enum pt_status pt_safe_output(struct pt_safe_file *f, const char *path, struct pt_error *err)
{
	struct stat st;
	int sfd = path ? stream_fd_name(path) : -1;
	f->fd = -1;
	f->fp = NULL;
	f->path = NULL;
	f->tmp_path = NULL;
	f->drop_cache = false;
	if (sfd >= 0 || (path && lstat(path, &st) == 0 &&
			 (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))) {
		/* A stream the user named: written as it is, nothing to truncate or replace.
		 * /dev/stdout and friends share the descriptor (and its offset) we already have;
		 * a FIFO without a reader fails at once instead of hanging (O_NONBLOCK). */
		int fd;
		if (sfd >= 0)
			fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
		else
			fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", path);
		if (sfd < 0) {
			int fl = fcntl(fd, F_GETFL);
			if (fl >= 0)
				(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		}
		f->path = pt_strdup(path);
		if (!f->path) {
			close(fd);
			return pt_error_set(err, PT_E_NOMEM, "out of memory opening %s", path);
		}
		f->fd = fd;
		return PT_OK;
	}
	return pt_safe_create(f, path, 0644, err);
}

/* ---- files updated in place -------------------------------------------------------------- */

enum pt_status pt_safe_check_fd(int fd, const char *path, struct pt_error *err)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot stat %s", path);
	if (!S_ISREG(st.st_mode))
		return pt_error_set(err, PT_E_IO, "refusing %s: not a regular file", path);
	if (st.st_uid != geteuid())
		return pt_error_set(err, PT_E_IO,
				    "refusing %s: owned by uid %ld, not by us (uid %ld)", path,
				    (long)st.st_uid, (long)geteuid());
	if (st.st_nlink != 1)
		return pt_error_set(err, PT_E_IO,
				    "refusing %s: it has %ld hard links (expected 1)", path,
				    (long)st.st_nlink);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return pt_error_set(err, PT_E_IO,
				    "refusing %s: writable by group or others (mode %03o)", path,
				    (unsigned)(st.st_mode & 0777));
	return PT_OK;
}

enum pt_status pt_safe_open_rw(const char *path, mode_t mode, int *fd_out, bool *created,
			       struct pt_error *err)
{
	*fd_out = -1;
	if (created)
		*created = false;
	if (!path || !*path)
		return pt_error_set(err, PT_E_INVALID, "empty path");
	for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
		/* O_NONBLOCK: opening a FIFO or a device must neither hang nor act on it. */
		int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		bool made = false;
		if (fd < 0 && errno == ENOENT) {
			fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
			if (fd < 0 && errno == EEXIST)
				continue; /* someone created it between our two opens: look again */
			made = fd >= 0;
		}
		if (fd < 0) {
			int e = errno;
			if (e == ELOOP)
				return pt_error_set(err, PT_E_IO,
						    "refusing %s: it is a symbolic link", path);
			return pt_error_sys(err, PT_E_IO, e, "cannot open %s", path);
		}
		if (made) {
			/* our own new file: drop group/other write a permissive umask left */
			struct stat st;
			if (fstat(fd, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)))
				(void)fchmod(fd, st.st_mode & 0755);
		} else {
			int fl = fcntl(fd, F_GETFL);
			if (fl >= 0)
				(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		}
		enum pt_status st = pt_safe_check_fd(fd, path, err);
		if (st != PT_OK) {
			close(fd);
			return st;
		}
		*fd_out = fd;
		if (created)
			*created = made;
		return PT_OK;
	}
	return pt_error_set(err, PT_E_IO, "cannot open %s: it keeps appearing and vanishing",
			    path);
}

enum pt_status pt_safe_open_named_rw(const char *path, int *fd_out, struct pt_error *err)
{
	struct stat st;
	int fd;
	*fd_out = -1;
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return pt_error_set(err, PT_E_IO, "refusing to edit %s in place: it is "
					    "a symbolic link (name the file itself)", path);
		return pt_error_sys(err, PT_E_IO, e, "cannot open %s for writing", path);
	}
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return pt_error_sys(err, PT_E_IO, e, "cannot stat %s", path);
	}
	const char *why = !S_ISREG(st.st_mode)      ? "not a regular file"
			  : st.st_uid != geteuid() ? "owned by another user"
			  : st.st_nlink != 1       ? "it has other hard links"
						   : NULL;
	if (why) {
		close(fd);
		return pt_error_set(err, PT_E_IO, "refusing to edit %s in place: %s", path,
				    why);
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	*fd_out = fd;
	return PT_OK;
}

/* ---- directories ------------------------------------------------------------------------- */

/* The final directory must be ours alone. */
static enum pt_status check_own_dir(const char *path, struct pt_error *err)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot use directory %s", path);
	if (S_ISLNK(st.st_mode))
		return pt_error_set(err, PT_E_IO, "refusing directory %s: it is a symbolic link",
				    path);
	if (!S_ISDIR(st.st_mode))
		return pt_error_set(err, PT_E_IO, "refusing %s: not a directory", path);
	if (st.st_uid != geteuid())
		return pt_error_set(err, PT_E_IO,
				    "refusing directory %s: owned by uid %ld, not by us (uid %ld)",
				    path, (long)st.st_uid, (long)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return pt_error_set(err, PT_E_IO,
				    "refusing directory %s: writable by group or others (mode %03o)",
				    path, (unsigned)(st.st_mode & 0777));
	return PT_OK;
}

/* Every ancestor must be owned by us or root, and writable by others only when sticky (like
 * /tmp): otherwise someone else could rename our directory away and put theirs in its place. */
static enum pt_status check_ancestors(const char *path, struct pt_error *err)
{
	char *p = pt_strdup(path);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory checking %s", path);
	for (;;) {
		char *slash = strrchr(p, '/');
		struct stat st;
		if (!slash)
			break; /* relative path: the cwd is the user's choice */
		if (slash == p)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(p, &st) != 0) {
			int e = errno;
			enum pt_status s = pt_error_sys(err, PT_E_IO, e, "cannot use directory %s", p);
			pt_free(p);
			return s;
		}
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			enum pt_status s = pt_error_set(
				err, PT_E_IO,
				"refusing %s: its parent %s is owned by uid %ld, not by us or root",
				path, p, (long)st.st_uid);
			pt_free(p);
			return s;
		}
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
			enum pt_status s = pt_error_set(
				err, PT_E_IO,
				"refusing %s: its parent %s is writable by others (mode %03o)", path,
				p, (unsigned)(st.st_mode & 0777));
			pt_free(p);
			return s;
		}
		if (strcmp(p, "/") == 0)
			break;
	}
	pt_free(p);
	return PT_OK;
}

/* mkdir -p with 0700 for every component that is missing. */
static enum pt_status make_dirs(const char *path, struct pt_error *err)
{
	char *p = pt_strdup(path);
	if (!p)
		return pt_error_set(err, PT_E_NOMEM, "out of memory creating %s", path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST) {
			int e = errno;
			enum pt_status st = pt_error_sys(err, PT_E_IO, e, "cannot create directory %s", p);
			pt_free(p);
			return st;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	pt_free(p);
	return PT_OK;
}

enum pt_status pt_safe_dir(const char *path, bool create, struct pt_error *err)
{
	struct stat st;
	enum pt_status s;
	if (!path || !*path)
		return pt_error_set(err, PT_E_INVALID, "empty directory path");
	if (create && lstat(path, &st) != 0 && errno == ENOENT) {
		s = make_dirs(path, err);
		if (s != PT_OK)
			return s;
	}
	s = check_own_dir(path, err);
	if (s != PT_OK)
		return s;
	return check_ancestors(path, err);
}

static enum pt_status join(char *out, size_t cap, struct pt_error *err, const char *a,
			   const char *b, const char *c)
{
	int n = snprintf(out, cap, "%s%s%s%s%s", a, b ? "/" : "", b ? b : "", c ? "/" : "",
			 c ? c : "");
	if (n < 0 || (size_t)n >= cap)
		return pt_error_set(err, PT_E_INVALID, "directory path too long under %s", a);
	return PT_OK;
}

/* A sub-path of our state directory: relative, no "." or ".." components. */
static bool sub_ok(const char *sub)
{
	const char *p = sub;
	if (!*sub || *sub == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return p[-1] != '/';
}

static const char *home_dir(void)
{
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return home;
	struct passwd *pw = getpwuid(geteuid());
	return (pw && pw->pw_dir && pw->pw_dir[0] == '/') ? pw->pw_dir : NULL;
}

enum pt_status pt_user_dir(const char *sub, char *out, size_t cap, struct pt_error *err)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	enum pt_status s;
	if (sub && !sub_ok(sub))
		return pt_error_set(err, PT_E_INVALID, "bad state directory name '%s'", sub);
	if (xdg && xdg[0] == '/') { /* the spec says relative values are to be ignored */
		s = join(out, cap, err, xdg, "particle", sub);
	} else {
		const char *home = home_dir();
		char base[PATH_MAX];
		if (!home)
			return pt_error_set(err, PT_E_INVALID,
					    "no home directory for per-user state (set HOME or "
					    "XDG_CACHE_HOME)");
		s = join(base, sizeof base, err, home, ".cache", NULL);
		if (s == PT_OK)
			s = join(out, cap, err, base, "particle", sub);
	}
	if (s != PT_OK)
		return s;
	return pt_safe_dir(out, true, err);
}

enum pt_status pt_user_runtime_dir(char *out, size_t cap, struct pt_error *err)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	if (rt && rt[0] == '/') {
		struct pt_error e2 = { 0 };
		/* the runtime dir itself must be ours and private (pam_systemd makes it 0700) */
		if (join(out, cap, &e2, rt, "particle", NULL) == PT_OK &&
		    check_own_dir(rt, &e2) == PT_OK && pt_safe_dir(out, true, &e2) == PT_OK)
			return PT_OK;
	}
	return pt_user_dir("locks", out, cap, err);
}
