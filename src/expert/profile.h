/* profile.h - the persisted expert-popularity profile (issue 21): per MoE layer, how often
 * each routed expert was used in earlier runs of the same model.  Written after a run (the
 * engine adds the run's usage counters, expert/usage.h), read at start to warm the expert
 * cache with each layer's most used experts (pt_expert_store_warm).  The cache's contents
 * never change results, so a stale, foreign or missing profile only costs hit rate.
 *
 * File (little-endian), exactly this size:
 *   "PTXPROF1"  u32 version (1)  u32 n_moe  u32 n_expert  u32 0
 *   u64 identity hash (pt_profile_identity of the model)
 *   u32 uses[n_moe][n_expert]
 *   u64 FNV-1a 64 of every byte before it
 * Untrusted input: pt_profile_parse checks size, magic, version, bounds, the checksum and
 * the identity before anything is used. */
#ifndef PT_EXPERT_PROFILE_H
#define PT_EXPERT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_PROFILE_MAX_MOE 1024u
#define PT_PROFILE_MAX_EXPERT 4096u

struct pt_profile {
	uint32_t n_moe, n_expert;
	uint64_t identity;
	uint32_t *uses; /* [n_moe][n_expert], pt_alloc'd */
};

/* FNV-1a 64 (exposed for the identity and tests). */
uint64_t pt_profile_fnv(uint64_t h, const void *p, size_t n);
#define PT_PROFILE_FNV_INIT 0xcbf29ce484222325ull

/* The model's identity: its size, mtime (ns) and a hash of its first 64 KiB (the GGUF
 * header and metadata), from the open descriptor. */
enum pt_status pt_profile_identity(int fd, uint64_t *out, struct pt_error *err);

enum pt_status pt_profile_init(struct pt_profile *p, uint32_t n_moe, uint32_t n_expert,
			       uint64_t identity, struct pt_error *err);
void pt_profile_free(struct pt_profile *p); /* NULL-safe, idempotent */

/* Serializes into a pt_alloc'd buffer (*out, *len). */
enum pt_status pt_profile_serialize(const struct pt_profile *p, uint8_t **out, size_t *len,
				    struct pt_error *err);
/* Parses buf[len]; PT_E_FORMAT for anything malformed, PT_E_INVALID when it is well formed
 * but for another model (identity, n_moe or n_expert differ from the expected ones; an
 * expected 0 accepts any). */
enum pt_status pt_profile_parse(const uint8_t *buf, size_t len, uint64_t identity,
				uint32_t n_moe, uint32_t n_expert, struct pt_profile *out,
				struct pt_error *err);

/* Loads `path` (at most the size the expected shape needs; a missing file is PT_E_IO with
 * errno ENOENT kept in *missing = true). */
enum pt_status pt_profile_load(const char *path, uint64_t identity, uint32_t n_moe,
			       uint32_t n_expert, struct pt_profile *out, bool *missing,
			       struct pt_error *err);
/* Writes `path` 0600 through src/util/safefile.h (temporary name, atomic rename). */
enum pt_status pt_profile_save(const char *path, const struct pt_profile *p,
			       struct pt_error *err);

/* Adds uses[n_expert] of a run to layer moe (saturating; when any count passes 2^30 every
 * count of the profile is halved, so old runs fade). */
void pt_profile_add(struct pt_profile *p, uint32_t moe, const uint32_t *uses);

/* Writes into out[] the experts of layer moe with a non-zero count, most used first (ties:
 * lower id first), at most max; returns how many. */
uint32_t pt_profile_top(const struct pt_profile *p, uint32_t moe, uint32_t *out, uint32_t max);

#endif
