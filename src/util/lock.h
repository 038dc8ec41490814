/* lock.h - single-process ownership of a model file.  Two particle processes on one model
 * would each budget the machine's memory for themselves; the second is refused with the PID
 * of the first.
 *
 * The lock is an flock (an open file description lock) on a read-only descriptor of the
 * model itself: no lock file exists anywhere, so nothing in a shared directory can be
 * planted or truncated (issue 22), read-only model directories work, and every path to the
 * model (another name, a symlink, a hard link) reaches the same inode and the same lock.  The
 * kernel drops it when the process dies, so a crash never leaves a stale lock.
 *
 * The holder's PID is found from /proc/locks and, where that does not tell, from a PID file
 * `<dev>-<ino>.pid` in the per-user runtime directory (pt_user_runtime_dir), written by
 * safefile rules (temp + rename in a directory checked to be ours, 0600).  The PID file is a
 * courtesy: when it cannot be written the lock still holds and `warning` says why. */
#ifndef PT_UTIL_LOCK_H
#define PT_UTIL_LOCK_H

#include "util/status.h"

struct pt_model_lock {
	int fd;              /* read-only descriptor of the model holding the flock; -1 */
	char path[1024];     /* the PID file we wrote ("" when none) */
	char warning[320];   /* why no PID file was written ("" when it was) */
};

/* Takes the lock for model_path.  PT_E_BUSY names the holder's PID when another process has
 * it; PT_E_IO when the model cannot be opened or locked.  dir: where the PID file goes
 * (NULL = pt_user_runtime_dir: $XDG_RUNTIME_DIR/particle when private, else
 * ~/.cache/particle/locks); it must pass pt_safe_dir. */
enum pt_status pt_model_lock_acquire(struct pt_model_lock *lk, const char *model_path,
				     const char *dir, struct pt_error *err);
void pt_model_lock_release(struct pt_model_lock *lk); /* safe on a never-acquired lock */

#endif
