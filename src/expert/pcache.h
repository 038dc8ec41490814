/* pcache.h - the lazy pack cache for slow media (`--pack-cache DIR --pack-cache-size 4G`):
 * experts read from a slow source are copied, slot image and all, into a capped file on fast
 * disk and later misses read them from there.
 *
 * DIR/particle-pcache.data   n_entries x entry_bytes (4 KiB multiples), preallocated.
 * DIR/particle-pcache.log    a 64-byte header (magic "PTPCLOG1", version, entry_bytes,
 *                            n_entries, identity hash) then 64-byte records {magic "PCRC",
 *                            kind (1 commit, 2 invalidate), seq, entry, layer, expert, len,
 *                            data hash, record hash}.
 *
 * Crash safety: replacing an entry appends and syncs its invalidate record, then writes and
 * syncs the data, then appends and syncs the commit record holding the data's hash.  Replay
 * stops at the first record whose hash is wrong (a torn append) and cuts the log there; an
 * entry is used only with a commit record, and every read is checked against that record's
 * data hash, so a torn or corrupt entry is dropped and read from the source instead.
 * A different model or geometry (identity) resets the cache.  Not thread-safe: the store
 * calls it under its mutex.
 */
#ifndef PT_EXPERT_PCACHE_H
#define PT_EXPERT_PCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/status.h"

struct pt_pcache_config {
	const char *dir;
	uint64_t size_bytes;  /* cap; n_entries = size_bytes / entry_bytes (>= 1) */
	uint64_t entry_bytes; /* one slot image, 4096 multiple */
	uint32_t n_moe;
	uint32_t n_expert;
	const char *identity; /* model identity + geometry; a change resets the cache */
	bool test_crash_before_commit; /* tests: put writes data, then "crashes" */
};

struct pt_pcache_item {
	uint32_t moe;
	uint32_t expert;
	const uint8_t *data;
	uint64_t len; /* <= entry_bytes, 4096 multiple */
};

typedef struct pt_pcache pt_pcache;

enum pt_status pt_pcache_open(const struct pt_pcache_config *cfg, pt_pcache **out,
			      struct pt_error *err);
void pt_pcache_close(pt_pcache *pc); /* NULL-safe */

const char *pt_pcache_data_path(const pt_pcache *pc);
uint32_t pt_pcache_entries(const pt_pcache *pc);
uint32_t pt_pcache_used(const pt_pcache *pc);
uint64_t pt_pcache_entry_offset(const pt_pcache *pc, uint32_t entry);

/* Entry holding (moe, expert), or -1; *len the committed length. */
int32_t pt_pcache_lookup(const pt_pcache *pc, uint32_t moe, uint32_t expert, uint64_t *len);
/* true when data (read back from entry) matches the committed hash. */
bool pt_pcache_check(const pt_pcache *pc, uint32_t entry, const uint8_t *data);
/* Forgets an entry (bad data): in memory and with an invalidate record. */
void pt_pcache_drop(pt_pcache *pc, uint32_t entry);
/* Stores items (free entries first, then the oldest) with the crash-safe protocol. */
enum pt_status pt_pcache_put(pt_pcache *pc, const struct pt_pcache_item *items, uint32_t n,
			     struct pt_error *err);

uint64_t pt_pcache_hash(const uint8_t *p, uint64_t n);

#endif
