/* safefile.h - the one way particle creates and updates files (see SECURITY.md).
 *
 * CONTRACT written by the lead before the implementation (branch `security`, issue 22);
 * every new writer (server, pull, packs, caches, traces, stats) codes against it.  Extend,
 * do not break.
 *
 * Rules it enforces:
 * - New files are never opened by their final name: a random temporary name in the final
 *   directory, O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, then fsync and an atomic rename.
 *   rename() replaces a symlink or hard link standing at the final name; it never writes
 *   through it.  An interrupted write never leaves a file that looks complete.
 * - Files updated in place (a download's .partial and its state file, the lazy pack cache)
 *   are opened O_NOFOLLOW and checked with fstat before the first write: a regular file,
 *   owned by the effective uid, one link, not writable by group or others.
 * - Per-user state lives in directories checked (or created 0700) to be directories, not
 *   symlinks, owned by the effective uid and not writable by group or others.  Nothing
 *   particle writes lives in a shared world-writable directory under a predictable name.
 * - Failures are clear one-line errors naming the path and what is wrong with it.  A
 *   hostile or unsafe object (link, foreign owner, shared-writable file or directory) is
 *   PT_E_IO - a runtime failure, exit 1, as issue 22 asks; PT_E_INVALID only for a malformed
 *   argument (empty path, a name that is a directory, a state sub-directory with "..").
 *   (The first draft of this contract said PT_E_INVALID for an unsafe path; changed so the
 *   CLI exits 1, not 2 = usage error, when it meets one.) */
#ifndef PT_UTIL_SAFEFILE_H
#define PT_UTIL_SAFEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/status.h"

/* A file being written under a temporary name until pt_safe_commit. */
struct pt_safe_file {
	int fd;            /* open for writing; -1 when not open */
	FILE *fp;          /* set by pt_safe_stdio (then use only fp; commit flushes it) */
	char *path;        /* final path (owned) */
	char *tmp_path;    /* temporary path in the same directory (owned) */
	/* commit drops the written pages from the page cache (pt_drop_page_cache): set for
	 * model files, which are mapped later */
	bool drop_cache;
};

/* After an fsync: the file's pages out of the page cache (a hint; clean pages only).  A
 * file's written pages stay cached in small folios, and a model mapped from them decodes
 * up to 2.5x slower through 4 KiB mappings until they turn over; read back from disk they
 * come in large folios (docs/PERFORMANCE.md, issue 21 round 17). */
void pt_drop_page_cache(int fd);

/* Starts a new file that will appear at `path` on commit.  mode: 0600 for per-user state,
 * 0644 for outputs the user asked for (umask still applies). */
enum pt_status pt_safe_create(struct pt_safe_file *f, const char *path, mode_t mode,
			      struct pt_error *err);
/* An output the user named explicitly (-o, --logits-out, --stats-json, --trace-experts).
 * The rule (SECURITY.md): the path is replaced, never written through -
 *   - /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N write to that descriptor (a dup),
 *     and a FIFO or character device standing at exactly that path (e.g. /dev/null, not
 *     through a symlink) is written as a stream: nothing there can be truncated;
 *   - anything else is pt_safe_create(path, 0644): a symlink or hard link at the name is
 *     replaced by the new file on commit, its target (or other name) left byte-identical.
 * Commit and abort as for pt_safe_create (a stream has no temporary name: f->tmp_path is
 * NULL, abort just closes). */
enum pt_status pt_safe_output(struct pt_safe_file *f, const char *path, struct pt_error *err);

/* A stdio stream over f->fd (for writers that use fprintf); owned by f. */
FILE *pt_safe_stdio(struct pt_safe_file *f, struct pt_error *err);
/* Flushes, fsyncs, renames over the final path, fsyncs the directory; always releases f. */
enum pt_status pt_safe_commit(struct pt_safe_file *f, struct pt_error *err);
/* Closes and unlinks the temporary file; NULL-safe and safe after commit (a struct is live
 * while f->path is set). */
void pt_safe_abort(struct pt_safe_file *f);

/* Installs SIGINT / SIGTERM / SIGHUP handlers that unlink every temporary file still being
 * written (pt_safe_create's, not yet committed or aborted), then let the signal end the
 * process as it would have (exit status 130 for Ctrl-C).  Called once by main(); commands
 * with their own handlers (run, serve, pull) replace it and commit or abort themselves.
 * Signals the parent set to SIG_IGN (nohup) stay ignored. */
void pt_safe_unlink_on_signals(void);

/* Writes len bytes (through f->fp when pt_safe_stdio was called, else the fd). */
enum pt_status pt_safe_write(struct pt_safe_file *f, const void *buf, size_t len,
			     struct pt_error *err);
/* create + write + commit of a whole small file. */
enum pt_status pt_safe_write_file(const char *path, const void *data, size_t len, mode_t mode,
				  struct pt_error *err);

/* Opens `path` for reading and writing in place, creating it (O_EXCL, `mode`) when absent;
 * refuses a symlink, a non-regular file, another owner, a hard-linked file or one writable
 * by group/others.  *created tells which happened (may be NULL). */
enum pt_status pt_safe_open_rw(const char *path, mode_t mode, int *fd_out, bool *created,
			       struct pt_error *err);

/* Opens an existing file the user named for editing in place (mkmodel --reroute): never
 * creates; refuses a symlink (O_NOFOLLOW), a non-regular file, another owner's file and a
 * file with other hard links (the edit would change a name the user did not give).  Group
 * write is allowed: the user's own umask chose it. */
enum pt_status pt_safe_open_named_rw(const char *path, int *fd_out, struct pt_error *err);

/* The fstat checks pt_safe_open_rw applies to an already open descriptor (path for errors):
 * regular file, owned by the effective uid, one link, not writable by group or others. */
enum pt_status pt_safe_check_fd(int fd, const char *path, struct pt_error *err);

/* Checks a directory particle keeps state in; with create, makes it (and missing parents
 * under the user's home or cache root) 0700 first.  Refuses a symlink, another owner, or a
 * directory writable by group or others. */
enum pt_status pt_safe_dir(const char *path, bool create, struct pt_error *err);

/* The per-user state directory `$XDG_CACHE_HOME/particle/<sub>` (else
 * `~/.cache/particle/<sub>`), created and checked as pt_safe_dir does; sub may be NULL.
 * Writes the path into out[cap]. */
enum pt_status pt_user_dir(const char *sub, char *out, size_t cap, struct pt_error *err);

/* The per-user runtime directory for small per-boot state (lock PID files):
 * `$XDG_RUNTIME_DIR/particle` when XDG_RUNTIME_DIR is ours and private, else
 * pt_user_dir("locks").  Created and checked as pt_safe_dir does. */
enum pt_status pt_user_runtime_dir(char *out, size_t cap, struct pt_error *err);

#endif
