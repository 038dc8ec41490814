/* test_util_safefile.c - safefile.h: temp + rename creation, in-place opens that refuse
 * hostile objects, and per-user state directories. */
#include "util/safefile.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static char g_path[8][1200];

/* A fresh directory per test so leftovers are attributable. */
static const char *fresh_dir(const char *name)
{
	static char buf[400];
	snprintf(buf, sizeof buf, "%s/%s", pt_test_tmpdir(), name);
	mkdir(buf, 0700);
	return buf;
}

static const char *in_dir(int slot, const char *dir, const char *name)
{
	int n = snprintf(g_path[slot], sizeof g_path[slot], "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof g_path[slot])
		pt_test_fail(__FILE__, __LINE__, "test path too long");
	return g_path[slot];
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int file_is(const char *path, const char *text)
{
	char buf[256] = { 0 };
	FILE *f = fopen(path, "r");
	size_t n;
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	return n == strlen(text) && memcmp(buf, text, n) == 0;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

PT_TEST(test_util_safefile_create_commit_writes_and_leaves_no_temp)
{
	const char *dir = fresh_dir("sf-create");
	const char *path = in_dir(0, dir, "out.bin");
	struct pt_safe_file f;
	struct pt_error e = { 0 };
	struct stat st;
	REQUIRE(pt_safe_create(&f, path, 0600, &e) == PT_OK);
	CHECK(f.fd >= 0);
	CHECK(f.tmp_path && strncmp(f.tmp_path, dir, strlen(dir)) == 0); /* same directory */
	CHECK(access(path, F_OK) != 0);      /* nothing at the final name before commit */
	CHECK_EQ_INT(count_entries(dir), 1); /* just the temp */
	REQUIRE(pt_safe_write(&f, "hello", 5, &e) == PT_OK);
	CHECK_EQ_INT(pt_safe_commit(&f, &e), PT_OK);
	CHECK(file_is(path, "hello"));
	REQUIRE(stat(path, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	CHECK_EQ_INT(count_entries(dir), 1);
	CHECK(f.tmp_path == NULL && f.path == NULL && f.fd == -1);
	pt_safe_abort(&f); /* safe after commit */
	CHECK(file_is(path, "hello"));
}

/* Pages of path in the page cache (mincore over a fresh mapping), -1 on error. */
static long cached_pages(const char *path, size_t bytes)
{
	const long pg = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	void *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	const size_t n = (bytes + (size_t)pg - 1) / (size_t)pg;
	unsigned char *v = malloc(n);
	long c = -1;
	if (v && mincore(p, bytes, v) == 0)
		for (size_t i = c = 0; i < n; i++)
			c += v[i] & 1;
	free(v);
	munmap(p, bytes);
	return c;
}

/* drop_cache: the committed file's pages leave the page cache (a model file is mapped
 * later, and written pages sit there in small folios: safefile.h); without it they stay. */
PT_TEST(test_util_safefile_commit_drops_the_page_cache)
{
	const char *dir = fresh_dir("sf-drop");
	const size_t bytes = 4u << 20;
	char *buf = malloc(bytes);
	struct statfs fs;
	REQUIRE(buf && statfs(dir, &fs) == 0);
	if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
		printf("    page cache: %s is in memory (tmpfs): nothing to drop, skipped\n", dir);
		free(buf);
		return;
	}
	memset(buf, 0x5A, bytes);
	long kept = -1, dropped = -1;
	for (int drop = 0; drop < 2; drop++) {
		const char *path = in_dir(drop, dir, drop ? "dropped.bin" : "kept.bin");
		struct pt_safe_file f;
		struct pt_error e = { 0 };
		REQUIRE(pt_safe_create(&f, path, 0600, &e) == PT_OK);
		CHECK(!f.drop_cache); /* off unless asked */
		f.drop_cache = drop;
		REQUIRE(pt_safe_write(&f, buf, bytes, &e) == PT_OK);
		REQUIRE(pt_safe_commit(&f, &e) == PT_OK);
		*(drop ? &dropped : &kept) = cached_pages(path, bytes);
	}
	printf("    page cache after commit: %ld pages kept, %ld with drop_cache\n", kept,
	       dropped);
	CHECK_EQ_INT(dropped, 0);
	CHECK(kept > 0);
	free(buf);
}

PT_TEST(test_util_safefile_temp_names_are_random_and_exclusive)
{
	const char *dir = fresh_dir("sf-random");
	const char *path = in_dir(0, dir, "x");
	struct pt_safe_file a, b;
	struct pt_error e = { 0 };
	struct stat st;
	REQUIRE(pt_safe_create(&a, path, 0600, &e) == PT_OK);
	REQUIRE(pt_safe_create(&b, path, 0600, &e) == PT_OK);
	CHECK(strcmp(a.tmp_path, b.tmp_path) != 0);
	CHECK(strstr(a.tmp_path, ".x.tmp-") != NULL);
	CHECK(strlen(strstr(a.tmp_path, ".tmp-") + 5) >= 24); /* >= 96 random bits */
	/* the temp is a fresh regular file of ours, not a followed link */
	REQUIRE(lstat(a.tmp_path, &st) == 0);
	CHECK(S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == geteuid());
	pt_safe_abort(&a);
	pt_safe_abort(&b);
	CHECK_EQ_INT(count_entries(dir), 0);
}

PT_TEST(test_util_safefile_commit_replaces_symlink_not_its_target)
{
	const char *dir = fresh_dir("sf-symlink");
	const char *victim = in_dir(0, dir, "victim");
	const char *path = in_dir(1, dir, "out");
	struct pt_error e = { 0 };
	struct stat st;
	put(victim, "precious");
	REQUIRE(symlink(victim, path) == 0);
	CHECK_EQ_INT(pt_safe_write_file(path, "new", 3, 0644, &e), PT_OK);
	CHECK(file_is(victim, "precious"));
	REQUIRE(lstat(path, &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK(file_is(path, "new"));
}

PT_TEST(test_util_safefile_commit_replaces_hard_link_not_the_other_name)
{
	const char *dir = fresh_dir("sf-hardlink");
	const char *victim = in_dir(0, dir, "victim");
	const char *path = in_dir(1, dir, "out");
	struct pt_error e = { 0 };
	struct stat st;
	put(victim, "precious");
	REQUIRE(link(victim, path) == 0);
	CHECK_EQ_INT(pt_safe_write_file(path, "new", 3, 0644, &e), PT_OK);
	CHECK(file_is(victim, "precious"));
	REQUIRE(stat(victim, &st) == 0);
	CHECK_EQ_INT(st.st_nlink, 1);
	CHECK(file_is(path, "new"));
}

PT_TEST(test_util_safefile_stdio_and_abort)
{
	const char *dir = fresh_dir("sf-stdio");
	const char *path = in_dir(0, dir, "s.json");
	struct pt_safe_file f;
	struct pt_error e = { 0 };
	FILE *fp;
	put(path, "old");
	REQUIRE(pt_safe_create(&f, path, 0644, &e) == PT_OK);
	REQUIRE((fp = pt_safe_stdio(&f, &e)) != NULL);
	CHECK(pt_safe_stdio(&f, &e) == fp);
	fprintf(fp, "{\"n\": %d}", 42);
	pt_safe_abort(&f); /* abandoned: the old file stays, the temp goes */
	CHECK(file_is(path, "old"));
	CHECK_EQ_INT(count_entries(dir), 1);
	REQUIRE(pt_safe_create(&f, path, 0644, &e) == PT_OK);
	REQUIRE((fp = pt_safe_stdio(&f, &e)) != NULL);
	fprintf(fp, "{\"n\": %d}", 42);
	CHECK_EQ_INT(pt_safe_commit(&f, &e), PT_OK);
	CHECK(file_is(path, "{\"n\": 42}"));
	CHECK_EQ_INT(count_entries(dir), 1);
}

PT_TEST(test_util_safefile_long_name_fits)
{
	const char *dir = fresh_dir("sf-long");
	char name[256];
	struct pt_error e = { 0 };
	memset(name, 'n', 250);
	name[250] = '\0';
	CHECK_EQ_INT(pt_safe_write_file(in_dir(0, dir, name), "x", 1, 0600, &e), PT_OK);
	CHECK(file_is(g_path[0], "x"));
}

PT_TEST(test_util_safefile_abort_on_zeroed_struct_keeps_fd0)
{
	struct pt_safe_file f;
	memset(&f, 0, sizeof f);
	pt_safe_abort(&f);
	pt_safe_abort(NULL);
	CHECK(fcntl(0, F_GETFD) != -1 || errno != EBADF);
}

PT_TEST(test_util_safefile_create_errors_name_the_path)
{
	struct pt_safe_file f;
	struct pt_error e = { 0 };
	CHECK_EQ_INT(pt_safe_create(&f, "/nonexistent-dir/out.txt", 0644, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "/nonexistent-dir/out.txt");
	CHECK(f.fd == -1 && f.tmp_path == NULL);
	pt_safe_abort(&f);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_create(&f, "", 0644, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_create(&f, "somedir/", 0644, &e), PT_E_INVALID);
	/* the final name is a directory: rename fails, nothing is left behind */
	{
		const char *dir = fresh_dir("sf-isdir");
		const char *sub = in_dir(0, dir, "sub");
		REQUIRE(mkdir(sub, 0700) == 0);
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_safe_write_file(sub, "x", 1, 0644, &e), PT_E_IO);
		CHECK_CONTAINS(e.msg, sub);
		CHECK_EQ_INT(count_entries(dir), 1);
	}
}

PT_TEST(test_util_safefile_open_rw_creates_then_reopens)
{
	const char *dir = fresh_dir("sf-rw");
	const char *path = in_dir(0, dir, "cache.bin");
	struct pt_error e = { 0 };
	struct stat st;
	bool created = false;
	int fd;
	REQUIRE(pt_safe_open_rw(path, 0600, &fd, &created, &e) == PT_OK);
	CHECK(created);
	CHECK(write(fd, "abc", 3) == 3);
	REQUIRE(fstat(fd, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	close(fd);
	REQUIRE(pt_safe_open_rw(path, 0600, &fd, &created, &e) == PT_OK);
	CHECK(!created);
	{
		char buf[4] = { 0 };
		CHECK(read(fd, buf, 3) == 3 && memcmp(buf, "abc", 3) == 0);
	}
	close(fd);
	/* a permissive mode loses group/other write on a file we create */
	mode_t old = umask(0);
	REQUIRE(pt_safe_open_rw(in_dir(1, dir, "loose"), 0666, &fd, &created, &e) == PT_OK);
	umask(old);
	REQUIRE(fstat(fd, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 022, 0);
	close(fd);
}

PT_TEST(test_util_safefile_open_rw_refuses_hostile_objects)
{
	const char *dir = fresh_dir("sf-rw-hostile");
	const char *victim = in_dir(0, dir, "victim");
	const char *path = in_dir(1, dir, "state");
	struct pt_error e = { 0 };
	struct stat st;
	int fd = -1;
	put(victim, "precious");
	chmod(victim, 0600);

	REQUIRE(symlink(victim, path) == 0);
	CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "symbolic link");
	CHECK_CONTAINS(e.msg, path);
	CHECK(fd == -1);
	unlink(path);

	REQUIRE(link(victim, path) == 0);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "hard links");
	unlink(path);

	REQUIRE(mkfifo(path, 0600) == 0); /* must not hang */
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "not a regular file");
	unlink(path);

	put(path, "x");
	chmod(path, 0620);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "writable by group or others");
	chmod(path, 0606);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);

	if (geteuid() == 0) { /* a file another user planted */
		chmod(path, 0600);
		REQUIRE(chown(path, 65534, 65534) == 0);
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_safe_open_rw(path, 0600, &fd, NULL, &e), PT_E_IO);
		CHECK_CONTAINS(e.msg, "owned by uid 65534");
	} else {
		fprintf(stderr, "    (not root: foreign-owner case of open_rw skipped)\n");
	}
	unlink(path);
	CHECK(file_is(victim, "precious"));
	REQUIRE(stat(victim, &st) == 0);
	CHECK_EQ_INT(st.st_nlink, 1);
}

PT_TEST(test_util_safefile_dir_creates_0700_and_refuses_unsafe)
{
	const char *base = fresh_dir("sf-dir");
	const char *nested = in_dir(0, base, "a/b/c");
	struct pt_error e = { 0 };
	struct stat st;
	REQUIRE(pt_safe_dir(nested, true, &e) == PT_OK);
	REQUIRE(stat(nested, &st) == 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ_INT(st.st_mode & 0777, 0700);
	REQUIRE(stat(in_dir(1, base, "a"), &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0700);
	CHECK_EQ_INT(pt_safe_dir(nested, false, &e), PT_OK);

	/* missing without create */
	CHECK_EQ_INT(pt_safe_dir(in_dir(2, base, "missing"), false, &e), PT_E_IO);

	/* a symlink to a good directory is still refused */
	REQUIRE(symlink(nested, in_dir(2, base, "link")) == 0);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_dir(g_path[2], true, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "symbolic link");

	/* world-writable */
	REQUIRE(mkdir(in_dir(3, base, "open"), 0700) == 0);
	chmod(g_path[3], 0777);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_dir(g_path[3], true, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "writable by group or others");

	/* a plain file */
	put(in_dir(4, base, "file"), "x");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_dir(g_path[4], true, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "not a directory");

	/* our directory inside someone else's writable one (not sticky) */
	REQUIRE(mkdir(in_dir(5, g_path[3], "mine"), 0700) == 0);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_dir(g_path[5], false, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "parent");
	/* ... which is fine when the parent is sticky, like /tmp */
	chmod(g_path[3], 01777);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_dir(g_path[5], false, &e), PT_OK);

	if (geteuid() == 0) {
		REQUIRE(mkdir(in_dir(6, base, "theirs"), 0700) == 0);
		REQUIRE(chown(g_path[6], 65534, 65534) == 0);
		pt_error_clear(&e);
		CHECK_EQ_INT(pt_safe_dir(g_path[6], true, &e), PT_E_IO);
		CHECK_CONTAINS(e.msg, "owned by uid 65534");
	} else {
		fprintf(stderr, "    (not root: foreign-owner case of pt_safe_dir skipped)\n");
	}
}

/* setenv/unsetenv and put back what was there. */
struct saved_env {
	const char *name;
	char *value;
};
static struct saved_env save_env(const char *name)
{
	const char *v = getenv(name);
	struct saved_env s = { name, v ? strdup(v) : NULL };
	return s;
}
static void restore_env(struct saved_env *s)
{
	if (s->value)
		setenv(s->name, s->value, 1);
	else
		unsetenv(s->name);
	free(s->value);
}

PT_TEST(test_util_safefile_user_dir_xdg_and_home)
{
	struct saved_env xdg = save_env("XDG_CACHE_HOME"), home = save_env("HOME");
	const char *base = fresh_dir("sf-user");
	char out[512], want[1300];
	struct pt_error e = { 0 };
	struct stat st;

	setenv("XDG_CACHE_HOME", in_dir(0, base, "xdg"), 1);
	CHECK_EQ_INT(pt_user_dir("packs", out, sizeof out, &e), PT_OK);
	snprintf(want, sizeof want, "%s/xdg/particle/packs", base);
	CHECK_EQ_STR(out, want);
	CHECK(stat(out, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);

	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", in_dir(1, base, "home"), 1);
	mkdir(g_path[1], 0700);
	CHECK_EQ_INT(pt_user_dir(NULL, out, sizeof out, &e), PT_OK);
	snprintf(want, sizeof want, "%s/home/.cache/particle", base);
	CHECK_EQ_STR(out, want);

	setenv("XDG_CACHE_HOME", "relative/ignored", 1);
	CHECK_EQ_INT(pt_user_dir("x", out, sizeof out, &e), PT_OK);
	snprintf(want, sizeof want, "%s/home/.cache/particle/x", base);
	CHECK_EQ_STR(out, want);

	CHECK_EQ_INT(pt_user_dir("../escape", out, sizeof out, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_user_dir("/abs", out, sizeof out, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_user_dir("a/./b", out, sizeof out, &e), PT_E_INVALID);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_user_dir("x", out, 8, &e), PT_E_INVALID); /* does not fit */
	pt_error_clear(&e);

	/* a world-writable cache directory someone prepared is refused, not used */
	chmod(want, 0777);
	CHECK_EQ_INT(pt_user_dir("x", out, sizeof out, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "writable by group or others");
	restore_env(&xdg);
	restore_env(&home);
}

PT_TEST(test_util_safefile_runtime_dir_only_when_private)
{
	struct saved_env rt = save_env("XDG_RUNTIME_DIR"), xdg = save_env("XDG_CACHE_HOME");
	const char *base = fresh_dir("sf-runtime");
	char out[512], want[1300];
	struct pt_error e = { 0 };

	setenv("XDG_CACHE_HOME", in_dir(0, base, "cache"), 1);
	REQUIRE(mkdir(in_dir(1, base, "run"), 0700) == 0);
	setenv("XDG_RUNTIME_DIR", g_path[1], 1);
	CHECK_EQ_INT(pt_user_runtime_dir(out, sizeof out, &e), PT_OK);
	snprintf(want, sizeof want, "%s/run/particle", base);
	CHECK_EQ_STR(out, want);

	/* a shared runtime dir (e.g. XDG_RUNTIME_DIR=/tmp) is not used */
	chmod(g_path[1], 01777);
	CHECK_EQ_INT(pt_user_runtime_dir(out, sizeof out, &e), PT_OK);
	snprintf(want, sizeof want, "%s/cache/particle/locks", base);
	CHECK_EQ_STR(out, want);

	unsetenv("XDG_RUNTIME_DIR");
	CHECK_EQ_INT(pt_user_runtime_dir(out, sizeof out, &e), PT_OK);
	CHECK_EQ_STR(out, want);
	restore_env(&rt);
	restore_env(&xdg);
}

PT_TEST(test_util_safefile_output_streams_and_files)
{
	const char *dir = fresh_dir("sf-output");
	struct pt_safe_file f;
	struct pt_error e = { 0 };
	struct stat st;
	int p[2];
	char buf[16] = { 0 };
	/* /dev/fd/N is the descriptor itself (a dup), not a file to replace */
	REQUIRE(pipe(p) == 0);
	snprintf(buf, sizeof buf, "/dev/fd/%d", p[1]);
	REQUIRE(pt_safe_output(&f, buf, &e) == PT_OK);
	CHECK(f.tmp_path == NULL);
	REQUIRE(pt_safe_write(&f, "via-fd", 6, &e) == PT_OK);
	CHECK_EQ_INT(pt_safe_commit(&f, &e), PT_OK);
	memset(buf, 0, sizeof buf);
	CHECK(read(p[0], buf, 6) == 6 && memcmp(buf, "via-fd", 6) == 0);
	close(p[0]);
	close(p[1]);
	/* /dev/null is a character device at that exact path: written, never replaced */
	REQUIRE(pt_safe_output(&f, "/dev/null", &e) == PT_OK);
	REQUIRE(pt_safe_write(&f, "x", 1, &e) == PT_OK);
	CHECK_EQ_INT(pt_safe_commit(&f, &e), PT_OK);
	REQUIRE(lstat("/dev/null", &st) == 0);
	CHECK(S_ISCHR(st.st_mode));
	/* a FIFO nobody reads fails at once instead of hanging */
	REQUIRE(mkfifo(in_dir(0, dir, "fifo"), 0600) == 0);
	CHECK_EQ_INT(pt_safe_output(&f, g_path[0], &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "fifo");
	pt_safe_abort(&f);
	/* a symlink to /dev/null is a link, so the rule is "replace", not "write through" */
	REQUIRE(symlink("/dev/null", in_dir(1, dir, "null-link")) == 0);
	pt_error_clear(&e);
	REQUIRE(pt_safe_output(&f, g_path[1], &e) == PT_OK);
	CHECK(f.tmp_path != NULL);
	CHECK_EQ_INT(pt_safe_commit(&f, &e), PT_OK);
	REQUIRE(lstat(g_path[1], &st) == 0);
	CHECK(S_ISREG(st.st_mode));
}

PT_TEST(test_util_safefile_named_rw_refuses_links_keeps_group_write)
{
	const char *dir = fresh_dir("sf-named");
	const char *file = in_dir(0, dir, "model.gguf");
	const char *sym = in_dir(1, dir, "sym.gguf");
	const char *hard = in_dir(2, dir, "hard.gguf");
	struct pt_error e = { 0 };
	int fd = -1;
	put(file, "weights");
	chmod(file, 0664);
	REQUIRE(pt_safe_open_named_rw(file, &fd, &e) == PT_OK); /* group write is the user's */
	close(fd);
	REQUIRE(symlink(file, sym) == 0);
	CHECK_EQ_INT(pt_safe_open_named_rw(sym, &fd, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "symbolic link");
	REQUIRE(link(file, hard) == 0);
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_named_rw(hard, &fd, &e), PT_E_IO);
	CHECK_CONTAINS(e.msg, "hard links");
	pt_error_clear(&e);
	CHECK_EQ_INT(pt_safe_open_named_rw(in_dir(3, dir, "absent"), &fd, &e), PT_E_IO);
	CHECK(access(g_path[3], F_OK) != 0); /* never creates */
	CHECK(file_is(file, "weights"));
}
