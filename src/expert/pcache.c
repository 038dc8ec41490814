/* pcache.c - the crash-safe lazy pack cache (see pcache.h). */
#include "expert/pcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/safefile.h"

#define LOG_MAGIC "PTPCLOG1"
#define REC_MAGIC 0x43524350u /* "PCRC" */
#define REC_BYTES 64
#define KIND_COMMIT 1u
#define KIND_INVALIDATE 2u
#define PC_VERSION 1u
#define MAX_ENTRIES (1u << 24)

struct entry {
	int32_t moe; /* -1 = free */
	uint32_t expert;
	uint64_t len, hash, seq;
};

struct pt_pcache {
	struct pt_pcache_config cfg;
	char *data_path, *log_path;
	int data_fd, log_fd;
	uint32_t n_entries, used;
	uint64_t seq;
	struct entry *ent;
	int32_t *where; /* [n_moe * n_expert] entry or -1 */
};

uint64_t pt_pcache_hash(const uint8_t *p, uint64_t n)
{
	/* 64-bit multiply-xor over 8-byte words: ~GB/s on one core, enough to catch torn or
	 * stale entries (not an adversarial check: the cache dir is the user's own) */
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
	uint64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h ^ (h >> 32);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8); /* x86-64 only: little-endian */
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void make_rec(uint8_t r[REC_BYTES], uint32_t kind, uint64_t seq, uint32_t entry,
		     const struct entry *e)
{
	memset(r, 0, REC_BYTES);
	put64(r, (uint64_t)REC_MAGIC | (uint64_t)kind << 32);
	put64(r + 8, seq);
	put64(r + 16, (uint64_t)entry | (uint64_t)(uint32_t)e->moe << 32);
	put64(r + 24, e->expert);
	put64(r + 32, e->len);
	put64(r + 40, e->hash);
	put64(r + 56, pt_pcache_hash(r, 56));
}

static enum pt_status append(pt_pcache *pc, const uint8_t *buf, size_t n, bool sync,
			     struct pt_error *err)
{
	if (write(pc->log_fd, buf, n) != (ssize_t)n)
		return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", pc->log_path);
	if (sync && fdatasync(pc->log_fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", pc->log_path);
	return PT_OK;
}

static uint64_t identity_hash(const struct pt_pcache_config *c, uint32_t n_entries)
{
	char buf[1200];
	int len = snprintf(buf, sizeof buf, "%s|%llu|%u|%u|%u", c->identity ? c->identity : "",
			   (unsigned long long)c->entry_bytes, n_entries, c->n_moe, c->n_expert);
	return pt_pcache_hash((const uint8_t *)buf, (uint64_t)(len < 0 ? 0 : len));
}

static void forget(pt_pcache *pc, uint32_t i)
{
	if (pc->ent[i].moe >= 0) {
		pc->where[(uint64_t)pc->ent[i].moe * pc->cfg.n_expert + pc->ent[i].expert] = -1;
		pc->used--;
	}
	pc->ent[i].moe = -1;
}

static void apply(pt_pcache *pc, const uint8_t *r)
{
	uint32_t kind = (uint32_t)(get64(r) >> 32), i = (uint32_t)get64(r + 16);
	uint32_t moe = (uint32_t)(get64(r + 16) >> 32), ex = (uint32_t)get64(r + 24);
	uint64_t len = get64(r + 32);
	if (i >= pc->n_entries)
		return;
	forget(pc, i);
	if (kind != KIND_COMMIT || moe >= pc->cfg.n_moe || ex >= pc->cfg.n_expert ||
	    len > pc->cfg.entry_bytes)
		return;
	int32_t *w = &pc->where[(uint64_t)moe * pc->cfg.n_expert + ex];
	if (*w >= 0)
		forget(pc, (uint32_t)*w);
	pc->ent[i] = (struct entry){ .moe = (int32_t)moe, .expert = ex, .len = len,
				     .hash = get64(r + 40), .seq = get64(r + 8) };
	*w = (int32_t)i;
	pc->used++;
}

/* Replays the log; a missing or foreign header starts a fresh one. */
static enum pt_status replay(pt_pcache *pc, struct pt_error *err)
{
	uint8_t hdr[REC_BYTES], want[REC_BYTES] = { 0 }, r[REC_BYTES];
	off_t at = REC_BYTES;
	memcpy(want, LOG_MAGIC, 8);
	put64(want + 8, PC_VERSION);
	put64(want + 16, pc->cfg.entry_bytes);
	put64(want + 24, pc->n_entries);
	put64(want + 32, identity_hash(&pc->cfg, pc->n_entries));
	if (pread(pc->log_fd, hdr, REC_BYTES, 0) != REC_BYTES || memcmp(hdr, want, REC_BYTES)) {
		if (ftruncate(pc->log_fd, 0) != 0 || pwrite(pc->log_fd, want, REC_BYTES, 0) !=
		    REC_BYTES || fdatasync(pc->log_fd) != 0)
			return pt_error_sys(err, PT_E_IO, errno, "cannot reset %s", pc->log_path);
	} else {
		while (pread(pc->log_fd, r, REC_BYTES, at) == REC_BYTES &&
		       (uint32_t)get64(r) == REC_MAGIC && get64(r + 56) == pt_pcache_hash(r, 56)) {
			apply(pc, r);
			if (get64(r + 8) >= pc->seq)
				pc->seq = get64(r + 8) + 1;
			at += REC_BYTES;
		}
		if (ftruncate(pc->log_fd, at) != 0) /* cut a torn tail */
			return pt_error_sys(err, PT_E_IO, errno, "cannot truncate %s", pc->log_path);
	}
	if (lseek(pc->log_fd, 0, SEEK_END) < 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot seek %s", pc->log_path);
	return PT_OK;
}

static enum pt_status open_files(pt_pcache *pc, const char *dir, struct pt_error *err)
{
	uint64_t bytes = (uint64_t)pc->n_entries * pc->cfg.entry_bytes;
	struct stat st;
	/* Per-user state updated in place (safefile.h): the directory must be ours (created
	 * 0700), and a link, a FIFO or another user's file planted at either name is refused
	 * rather than truncated, sized or written. */
	enum pt_status s = pt_safe_dir(dir, true, err);
	if (s == PT_OK)
		s = pt_safe_open_rw(pc->data_path, 0600, &pc->data_fd, NULL, err);
	if (s == PT_OK)
		s = pt_safe_open_rw(pc->log_path, 0600, &pc->log_fd, NULL, err);
	if (s != PT_OK)
		return s;
	if (fstat(pc->data_fd, &st) != 0 || ((uint64_t)st.st_size != bytes &&
					     ftruncate(pc->data_fd, (off_t)bytes) != 0))
		return pt_error_sys(err, PT_E_IO, errno, "cannot size %s", pc->data_path);
	return PT_OK;
}

enum pt_status pt_pcache_open(const struct pt_pcache_config *cfg, pt_pcache **out,
			      struct pt_error *err)
{
	pt_pcache *pc;
	uint64_t n = cfg->entry_bytes ? cfg->size_bytes / cfg->entry_bytes : 0, cells;
	enum pt_status st;
	char path[4200];
	*out = NULL;
	if (n == 0 || cfg->entry_bytes % 4096)
		return pt_error_set(err, PT_E_INVALID, "--pack-cache-size %llu holds no expert of "
				    "%llu bytes", (unsigned long long)cfg->size_bytes,
				    (unsigned long long)cfg->entry_bytes);
	if (pt_mul_overflow(cfg->n_moe, cfg->n_expert, &cells) || cells > MAX_ENTRIES * 16ull)
		return pt_error_set(err, PT_E_LIMIT, "pack cache geometry");
	pc = pt_calloc(1, sizeof *pc);
	if (!pc)
		return pt_error_set(err, PT_E_NOMEM, "pack cache");
	pc->cfg = *cfg;
	pc->n_entries = n > MAX_ENTRIES ? MAX_ENTRIES : (uint32_t)n;
	pc->data_fd = pc->log_fd = -1;
	snprintf(path, sizeof path, "%.4000s/particle-pcache.data", cfg->dir);
	pc->data_path = pt_strdup(path);
	snprintf(path, sizeof path, "%.4000s/particle-pcache.log", cfg->dir);
	pc->log_path = pt_strdup(path);
	pc->ent = pt_calloc(pc->n_entries, sizeof *pc->ent);
	pc->where = pt_mallocn(cells ? cells : 1, sizeof *pc->where);
	if (!pc->data_path || !pc->log_path || !pc->ent || !pc->where) {
		pt_pcache_close(pc);
		return pt_error_set(err, PT_E_NOMEM, "pack cache");
	}
	for (uint32_t i = 0; i < pc->n_entries; i++)
		pc->ent[i].moe = -1;
	memset(pc->where, 0xff, cells * sizeof *pc->where);
	st = open_files(pc, cfg->dir, err);
	if (st == PT_OK)
		st = replay(pc, err); /* uses cfg.identity */
	pc->cfg.dir = NULL; /* the caller's strings are not kept */
	pc->cfg.identity = NULL;
	if (st != PT_OK) {
		pt_pcache_close(pc);
		return st;
	}
	*out = pc;
	return PT_OK;
}

void pt_pcache_close(pt_pcache *pc)
{
	if (!pc)
		return;
	if (pc->data_fd >= 0)
		close(pc->data_fd);
	if (pc->log_fd >= 0)
		close(pc->log_fd);
	pt_free(pc->data_path);
	pt_free(pc->log_path);
	pt_free(pc->ent);
	pt_free(pc->where);
	pt_free(pc);
}

const char *pt_pcache_data_path(const pt_pcache *pc)
{
	return pc->data_path;
}

uint32_t pt_pcache_entries(const pt_pcache *pc)
{
	return pc->n_entries;
}

uint32_t pt_pcache_used(const pt_pcache *pc)
{
	return pc->used;
}

uint64_t pt_pcache_entry_offset(const pt_pcache *pc, uint32_t entry)
{
	return (uint64_t)entry * pc->cfg.entry_bytes;
}

int32_t pt_pcache_lookup(const pt_pcache *pc, uint32_t moe, uint32_t expert, uint64_t *len)
{
	int32_t i;
	if (moe >= pc->cfg.n_moe || expert >= pc->cfg.n_expert)
		return -1;
	i = pc->where[(uint64_t)moe * pc->cfg.n_expert + expert];
	if (i >= 0)
		*len = pc->ent[i].len;
	return i;
}

bool pt_pcache_check(const pt_pcache *pc, uint32_t entry, const uint8_t *data)
{
	return entry < pc->n_entries && pc->ent[entry].moe >= 0 &&
	       pt_pcache_hash(data, pc->ent[entry].len) == pc->ent[entry].hash;
}

void pt_pcache_drop(pt_pcache *pc, uint32_t entry)
{
	uint8_t r[REC_BYTES];
	if (entry >= pc->n_entries || pc->ent[entry].moe < 0)
		return;
	make_rec(r, KIND_INVALIDATE, pc->seq++, entry, &pc->ent[entry]);
	append(pc, r, REC_BYTES, false, NULL); /* best effort: the hash check guards reads */
	forget(pc, entry);
}

/* Free entry, else the oldest one not chosen in this batch (seq below start). */
static uint32_t victim(const pt_pcache *pc, uint64_t batch_seq)
{
	uint32_t best = UINT32_MAX;
	for (uint32_t i = 0; i < pc->n_entries; i++) {
		if (pc->ent[i].moe == -1)
			return i;
		if (pc->ent[i].moe >= 0 && pc->ent[i].seq < batch_seq && (best == UINT32_MAX ||
						   pc->ent[i].seq < pc->ent[best].seq))
			best = i;
	}
	return best;
}

enum pt_status pt_pcache_put(pt_pcache *pc, const struct pt_pcache_item *items, uint32_t n,
			     struct pt_error *err)
{
	uint8_t r[REC_BYTES];
	uint64_t batch_seq = pc->seq;
	enum pt_status st = PT_OK;
	uint32_t slots[64];
	if (n > 64)
		n = 64; /* the caller flushes in pieces */
	/* 1. choose entries; invalidate the ones being overwritten (durably, before the data) */
	for (uint32_t k = 0; k < n; k++) {
		uint64_t len;
		if (pt_pcache_lookup(pc, items[k].moe, items[k].expert, &len) >= 0 ||
		    items[k].len > pc->cfg.entry_bytes || (slots[k] = victim(pc, batch_seq)) ==
							       UINT32_MAX) {
			slots[k] = UINT32_MAX;
			continue;
		}
		if (pc->ent[slots[k]].moe >= 0) {
			make_rec(r, KIND_INVALIDATE, pc->seq++, slots[k], &pc->ent[slots[k]]);
			if ((st = append(pc, r, REC_BYTES, false, err)) != PT_OK)
				return st;
			forget(pc, slots[k]);
		}
		pc->ent[slots[k]].seq = pc->seq++; /* reserved: later items skip it */
		pc->ent[slots[k]].moe = -2;
	}
	if (fdatasync(pc->log_fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", pc->log_path);
	/* 2. data, durably */
	for (uint32_t k = 0; k < n; k++)
		if (slots[k] != UINT32_MAX &&
		    pwrite(pc->data_fd, items[k].data, items[k].len,
			   (off_t)pt_pcache_entry_offset(pc, slots[k])) != (ssize_t)items[k].len)
			return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", pc->data_path);
	if (fdatasync(pc->data_fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", pc->data_path);
	/* 3. commit records */
	for (uint32_t k = 0; k < n && !pc->cfg.test_crash_before_commit; k++) {
		if (slots[k] == UINT32_MAX)
			continue;
		struct entry e = { .moe = (int32_t)items[k].moe, .expert = items[k].expert,
				   .len = items[k].len,
				   .hash = pt_pcache_hash(items[k].data, items[k].len) };
		make_rec(r, KIND_COMMIT, pc->seq++, slots[k], &e);
		if ((st = append(pc, r, REC_BYTES, false, err)) != PT_OK)
			return st;
		pc->ent[slots[k]].moe = -1;
		apply(pc, r);
	}
	for (uint32_t k = 0; k < n; k++) /* reserved but never committed (test crash) */
		if (slots[k] != UINT32_MAX && pc->ent[slots[k]].moe == -2)
			pc->ent[slots[k]].moe = -1;
	if (fdatasync(pc->log_fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", pc->log_path);
	return PT_OK;
}
