/* gguf_internal.h - test hooks and helpers shared by the GGUF reader, writer and describer.
 *
 * The limits struct lets tests probe every bound at exactly N and N+1 without building
 * 16 MiB fixtures; production opens use pt_gguf_default_limits().  The name index is an
 * open-addressing hash over (ptr, len) views, used for metadata keys and tensor names.
 */
#ifndef PT_GGUF_INTERNAL_H
#define PT_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

struct pt_gguf_limits {
	uint64_t max_string;  /* bytes in one string (keys, values, names) */
	uint64_t max_array;   /* elements in one array */
	uint64_t max_kv;      /* metadata pairs */
	uint64_t max_tensors; /* tensor infos */
};

/* The limits.h values. */
struct pt_gguf_limits pt_gguf_default_limits(void);

/* pt_gguf_open_memory with explicit limits (lim may be NULL for the defaults). */
enum pt_status pt_gguf_open_memory_limits(const void *data, size_t size,
					  const struct pt_gguf_limits *lim, pt_gguf **out,
					  struct pt_error *err);

/* Name index: slots hold entry index + 1 (0 = empty).  cap is a power of two >= 2 * count.
 * key_at returns the name of entry i from the caller's table. */
typedef struct pt_str (*pt_gguf_key_fn)(const void *ctx, uint32_t i);

struct pt_gguf_index {
	uint32_t *slots;
	uint64_t cap;
};

/* Sizes the table for up to n entries; PT_E_NOMEM on failure (idx left empty). */
enum pt_status pt_gguf_index_init(struct pt_gguf_index *idx, uint64_t n, struct pt_error *err);
void pt_gguf_index_fini(struct pt_gguf_index *idx);
/* Doubles the table and rehashes (for the writer, which grows as entries are added). */
enum pt_status pt_gguf_index_grow(struct pt_gguf_index *idx, uint64_t n, pt_gguf_key_fn key_at,
				  const void *ctx, struct pt_error *err);
/* Entry index of name, or -1. */
int64_t pt_gguf_index_find(const struct pt_gguf_index *idx, const char *name, uint64_t len,
			   pt_gguf_key_fn key_at, const void *ctx);
/* Inserts entry i unless its name is present; returns the existing index or -1 if inserted.
 * The table must have room (count < cap / 2). */
int64_t pt_gguf_index_insert(struct pt_gguf_index *idx, uint32_t i, pt_gguf_key_fn key_at,
			     const void *ctx);

/* ---- split models (gguf_split.c) ---- */

/* One file, no split handling (what pt_gguf_open was before split models). */
enum pt_status pt_gguf_open_file(const char *path, pt_gguf **out, struct pt_error *err);

/* What a part's split.* keys say.  is_split is false without split.count or with count 1. */
struct pt_gguf_split_info {
	bool is_split;
	uint32_t no;            /* split.no, 0-based */
	uint32_t count;         /* split.count */
	bool has_tensors_count;
	int64_t tensors_count;  /* split.tensors.count */
};
enum pt_status pt_gguf_split_info(const pt_gguf *g, struct pt_gguf_split_info *out,
				  struct pt_error *err);

/* Parses the gguf-split name PREFIX-NNNNN-of-MMMMM.gguf: *no1 = NNNNN (1-based), *count =
 * MMMMM, *prefix_len = strlen(PREFIX).  False when path does not end that way. */
bool pt_gguf_split_name(const char *path, uint32_t *no1, uint32_t *count, size_t *prefix_len);

/* Checks n opened parts (parts[i] must say split.no i, split.count n, and agree on
 * split.tensors.count, which must equal the total) and joins them into parts[0] (ownership of
 * all parts passes to the result).  names[i] names part i in messages.  On failure every part
 * is closed. */
enum pt_status pt_gguf_join(pt_gguf **parts, uint32_t n, const char *const *names,
			    pt_gguf **out, struct pt_error *err);
/* The merge itself (gguf_read.c): duplicate names across parts -> PT_E_FORMAT. */
enum pt_status pt_gguf_merge_parts(pt_gguf **parts, uint32_t n, const char *const *names,
				   struct pt_error *err);

/* Payload bytes of a scalar value type; 0 for STRING, ARRAY and unknown ids. */
uint64_t pt_gguf_scalar_size(uint32_t vtype);

/* Numeric scalar (kv->type numeric or bool) / numeric array element i as double. */
double pt_gguf_kv_num(const struct pt_gguf_kv *kv);
double pt_gguf_arr_num(const struct pt_gguf_kv *kv, uint64_t i);
/* Integer scalar that fits int64: true and *out set; false for other types. */
bool pt_gguf_kv_int(const struct pt_gguf_kv *kv, int64_t *out);

#endif
