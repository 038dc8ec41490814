/* lock.h - single-process ownership of a model file.  Two particle processes on one model
 * would each budget the machine's memory for themselves; the second is refused with the PID
 * of the first.  The lock is an flock on a small file keyed by the model's device and inode
 * (so read-only model directories work), holding the owner's PID as text.  The kernel drops
 * it when the process dies, so a crash never leaves a stale lock. */
#ifndef PT_UTIL_LOCK_H
#define PT_UTIL_LOCK_H

#include "util/status.h"

struct pt_model_lock {
	int fd;
	char path[256];
};

/* Takes the lock for model_path.  PT_E_BUSY names the holder's PID when another process has
 * it; PT_E_IO when the model or the lock file cannot be opened.  dir: where lock files live
 * (NULL = $XDG_RUNTIME_DIR, else /tmp). */
enum pt_status pt_model_lock_acquire(struct pt_model_lock *lk, const char *model_path,
				     const char *dir, struct pt_error *err);
void pt_model_lock_release(struct pt_model_lock *lk); /* safe on a never-acquired lock */

#endif
