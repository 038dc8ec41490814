/* gguf.h - GGUF v2/v3 reader (read-only mmap, fully validated before use) and streaming writer.
 *
 * Reader invariants: after pt_gguf_open* succeeds every key, value, string, array and tensor
 * range has been bounds-checked against the file (GGUF-AND-QUANTS.md 2.8), so accessors never
 * re-check offsets.  All strings are (ptr, len) views into the mapping, valid until
 * pt_gguf_close; they are NOT NUL-terminated.
 */
#ifndef PT_GGUF_H
#define PT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

enum pt_gguf_vtype {
	PT_GGUF_U8 = 0,
	PT_GGUF_I8 = 1,
	PT_GGUF_U16 = 2,
	PT_GGUF_I16 = 3,
	PT_GGUF_U32 = 4,
	PT_GGUF_I32 = 5,
	PT_GGUF_F32 = 6,
	PT_GGUF_BOOL = 7,
	PT_GGUF_STRING = 8,
	PT_GGUF_ARRAY = 9,
	PT_GGUF_U64 = 10,
	PT_GGUF_I64 = 11,
	PT_GGUF_F64 = 12,
	PT_GGUF_VTYPE_COUNT = 13,
};

struct pt_str {
	const char *ptr;
	uint64_t len;
};

struct pt_gguf_kv {
	struct pt_str key;
	enum pt_gguf_vtype type;
	enum pt_gguf_vtype arr_type; /* element type when type == ARRAY */
	uint64_t arr_count;          /* element count when type == ARRAY */
	const uint8_t *value;        /* first payload byte (after type/count headers) */
	uint64_t value_offset;       /* file offset of value, for error messages */
};

struct pt_gguf_tensor {
	struct pt_str name;
	uint32_t n_dims;
	uint64_t ne[4];          /* ne[0] = row length; dims past n_dims are 1 */
	uint32_t type;           /* enum pt_type */
	uint64_t offset;         /* relative to the data section */
	uint64_t file_offset;    /* absolute offset of the first data byte */
	uint64_t nbytes;
	const uint8_t *data;     /* in the mapping */
	uint32_t part;           /* split models: the part (0-based) holding the data; else 0 */
};

typedef struct pt_gguf pt_gguf;

/* Opens and validates path.  A split model (llama.cpp's gguf-split: NAME-00002-of-00003.gguf
 * with split.no / split.count / split.tensors.count) is opened from any of its parts: every
 * part is opened and validated, and the handle is part 1's metadata with every part's tensors
 * (file_offset is within the tensor's own part; data points into that part's mapping).  A
 * missing part is PT_E_IO, a part that disagrees (name, split.no, split.count, tensor count,
 * duplicate tensor) PT_E_FORMAT, both naming the part.  On failure *out is NULL and err names what, where (key or tensor)
 * and the byte offset.  Codes: PT_E_IO (open/mmap), PT_E_FORMAT, PT_E_UNSUPPORTED (valid GGUF
 * but e.g. an unknown tensor type), PT_E_LIMIT, PT_E_NOMEM. */
enum pt_status pt_gguf_open(const char *path, pt_gguf **out, struct pt_error *err);
/* One file on its own, validated like any GGUF: a single-file model, or ONE part of a split
 * model whose split keys are read but not followed to the other parts (`particle pull`
 * checks each part as it lands, under its .partial name). */
enum pt_status pt_gguf_open_one(const char *path, pt_gguf **out, struct pt_error *err);
/* Same over a caller buffer that must outlive the handle (fuzzing, tests). */
enum pt_status pt_gguf_open_memory(const void *data, size_t size, pt_gguf **out,
				   struct pt_error *err);
/* Validates the first avail bytes of a file of file_size bytes (a download in progress):
 * header, metadata and tensor infos fully, every tensor range against file_size.  Tensor
 * data pointers are NULL for tensors not wholly inside the prefix.  When the prefix ends
 * inside the header/metadata/infos, fails with *need_more = true (fetch more and retry);
 * any other failure is the file's fault.  data must outlive the handle. */
enum pt_status pt_gguf_open_prefix(const void *data, size_t avail, uint64_t file_size,
				   pt_gguf **out, bool *need_more, struct pt_error *err);
void pt_gguf_close(pt_gguf *g); /* NULL-safe */

uint32_t pt_gguf_version(const pt_gguf *g);
uint64_t pt_gguf_file_size(const pt_gguf *g);
uint32_t pt_gguf_alignment(const pt_gguf *g);
uint64_t pt_gguf_data_offset(const pt_gguf *g); /* absolute offset of the data section */
const uint8_t *pt_gguf_base(const pt_gguf *g);  /* first byte of the file mapping */
int pt_gguf_fd(const pt_gguf *g);                /* -1 for memory opens */
const char *pt_gguf_path(const pt_gguf *g);      /* NULL for memory opens */
/* pt_gguf_file_size is the sum over the parts; base/fd/path/data_offset/alignment are part
 * 1's.  The parts (i < pt_gguf_part_count; a single file is one part): */
#define PT_GGUF_MAX_PARTS 256
uint32_t pt_gguf_part_count(const pt_gguf *g);
const char *pt_gguf_part_path(const pt_gguf *g, uint32_t i);
int pt_gguf_part_fd(const pt_gguf *g, uint32_t i);
uint64_t pt_gguf_part_size(const pt_gguf *g, uint32_t i);
const uint8_t *pt_gguf_part_base(const pt_gguf *g, uint32_t i);
const uint8_t *const *pt_gguf_part_bases(const pt_gguf *g); /* [pt_gguf_part_count] */
uint64_t pt_gguf_part_data_offset(const pt_gguf *g, uint32_t i);
uint64_t pt_gguf_part_tensor_count(const pt_gguf *g, uint32_t i);
/* Maps every page of every part's file mapping into the page tables now (Linux
 * MADV_POPULATE_READ, like llama.cpp's MAP_POPULATE), so that no later access takes a
 * first-touch page fault - but only for a part whose pages are at least min_resident_pct %
 * in the page cache already (mincore): populating a cold file would read all of it before
 * the first token.  A hint: false when a part was skipped or the kernel refused. */
bool pt_gguf_populate(const pt_gguf *g, unsigned min_resident_pct);
/* Asks the kernel (MADV_HUGEPAGE) to read the parts' pages that are not in the page cache in
 * 2 MiB folios when a fault reads them: a file whose pages came in one fault-around window at
 * a time stays in small folios, mapped 4 KiB at a time, for as long as it is cached, and
 * decode over such a mapping ran 20-45 % slower (docs/PERFORMANCE.md, issue 21 round 5).
 * Pages already cached keep their folios.  A hint: false when the kernel refused. */
bool pt_gguf_advise_huge(const pt_gguf *g);
/* Asks the kernel (MADV_RANDOM) to read only the pages a fault needs, without read-ahead:
 * for a mapping whose large matrices were copied out (pt_model_repack) while the experts
 * stream, what is still read from it is small tensors (norms, scales) spread over the file
 * and single rows of the token embedding; with read-ahead each of them held a window of
 * page cache, and under a memory cap with little room beside the plan those windows evicted
 * each other on every token (docs/PERFORMANCE.md, issue 21 round 28).  A hint: false when
 * the kernel refused. */
bool pt_gguf_advise_random(const pt_gguf *g);
/* [p, p + len) of a part's mapping is read whole on every token (a resident matrix the repack
 * could not copy: a type without an interleaved kernel at this CPU level, such as Q6_K at
 * AVX2 or Q5_K anywhere): its whole pages get the kernel's read-ahead back (MADV_NORMAL,
 * undoing pt_gguf_advise_random for them) and are read now (MADV_WILLNEED).  Left under
 * MADV_RANDOM such a matrix came in 4 KiB a fault at its first use: Gemma 4's 605 MB head at
 * AVX2 took 5.7 s of a capped run's first token (docs/PERFORMANCE.md, issue 21 round 32).
 * A hint: false when p is outside every mapped part or the kernel refused. */
bool pt_gguf_advise_read_whole(const pt_gguf *g, const void *p, size_t len);
/* [p, p + len) of a part's mapping will not be read again (pt_model_repack copied it): its
 * whole pages are unmapped from the page tables (MADV_DONTNEED) and dropped from the page
 * cache (POSIX_FADV_DONTNEED), so the memory is free at once - for the copy's 2 MiB pages,
 * which a nearly full machine would otherwise give out as 4 KiB ones.  Reading the range
 * again faults it back in from the file.  A hint: false when p is outside every mapped part
 * or the kernel refused. */
bool pt_gguf_release(const pt_gguf *g, const void *p, size_t len);
/* By name alone: when path is NAME-0000K-of-0000N.gguf with 1 <= K <= N, N > 1, writes
 * NAME-00001-of-0000N.gguf (the name a split model goes by: its pack, its lock); else copies
 * path.  False (and out "") when out is too small. */
bool pt_gguf_split_first_path(const char *path, char *out, size_t n);

/* Metadata. */
uint64_t pt_gguf_kv_count(const pt_gguf *g);
const struct pt_gguf_kv *pt_gguf_kv_at(const pt_gguf *g, uint64_t i);
const struct pt_gguf_kv *pt_gguf_find_kv(const pt_gguf *g, const char *key);
const char *pt_gguf_vtype_name(enum pt_gguf_vtype t);

/* Typed getters.  Return PT_OK and store the value; if the key is absent return PT_OK with
 * *out = def and *found (may be NULL) = false; if present with another type return
 * PT_E_FORMAT naming the key, the stored type and the expected one.  Integer getters accept
 * any integer type whose value fits the destination (the converter writes u32, others i32). */
enum pt_status pt_gguf_get_u32(const pt_gguf *g, const char *key, uint32_t def, uint32_t *out,
			       bool *found, struct pt_error *err);
enum pt_status pt_gguf_get_u64(const pt_gguf *g, const char *key, uint64_t def, uint64_t *out,
			       bool *found, struct pt_error *err);
enum pt_status pt_gguf_get_i32(const pt_gguf *g, const char *key, int32_t def, int32_t *out,
			       bool *found, struct pt_error *err);
enum pt_status pt_gguf_get_f32(const pt_gguf *g, const char *key, float def, float *out,
			       bool *found, struct pt_error *err);
enum pt_status pt_gguf_get_bool(const pt_gguf *g, const char *key, bool def, bool *out,
				bool *found, struct pt_error *err);
enum pt_status pt_gguf_get_str(const pt_gguf *g, const char *key, struct pt_str *out,
			       bool *found, struct pt_error *err); /* absent: {NULL,0} */

/* Arrays.  pt_gguf_get_arr finds an array key and checks its element type (PT_GGUF_ARRAY
 * elements are never present: nested arrays are rejected at open). */
enum pt_status pt_gguf_get_arr(const pt_gguf *g, const char *key, enum pt_gguf_vtype elem,
			       const struct pt_gguf_kv **out, bool *found, struct pt_error *err);
/* Element i of a numeric array converted to the requested C type; the caller guarantees
 * i < kv->arr_count and a numeric arr_type.  Values are read unaligned, little-endian. */
uint32_t pt_gguf_arr_u32(const struct pt_gguf_kv *kv, uint64_t i);
int32_t pt_gguf_arr_i32(const struct pt_gguf_kv *kv, uint64_t i);
float pt_gguf_arr_f32(const struct pt_gguf_kv *kv, uint64_t i);
/* String arrays: fills out[0..kv->arr_count-1] with views (caller allocates arr_count). */
void pt_gguf_arr_strs(const struct pt_gguf_kv *kv, struct pt_str *out);

/* Tensors, in file order. */
uint64_t pt_gguf_tensor_count(const pt_gguf *g);
const struct pt_gguf_tensor *pt_gguf_tensor_at(const pt_gguf *g, uint64_t i);
const struct pt_gguf_tensor *pt_gguf_find_tensor(const pt_gguf *g, const char *name);

bool pt_str_eq(struct pt_str s, const char *cstr);

/* ---- writer ---------------------------------------------------------------------------
 * Usage: create; set_* metadata in the order wanted; add_tensor for every tensor (fixes the
 * layout); begin_data (writes header, metadata, infos, padding); then write each tensor's bytes
 * in add order through write_data, in pieces of any size (the writer pads between tensors);
 * finish; destroy.  Memory use is independent of tensor sizes.  Setting an existing key
 * replaces its value in place. */
typedef struct pt_gguf_writer pt_gguf_writer;

/* alignment 0 means 32; any other value must be a power of two and is also written as
 * general.alignment (first key).  Misuse (bad shapes/types, duplicate names, calls out of
 * order, too many or too few data bytes) returns PT_E_INVALID and leaves the writer usable;
 * I/O failures return PT_E_IO and poison it.  destroy without a successful finish removes
 * the file. */

enum pt_status pt_gguf_writer_create(const char *path, uint32_t alignment,
				     pt_gguf_writer **out, struct pt_error *err);
enum pt_status pt_gguf_writer_set_u32(pt_gguf_writer *w, const char *key, uint32_t v,
				      struct pt_error *err);
enum pt_status pt_gguf_writer_set_i32(pt_gguf_writer *w, const char *key, int32_t v,
				      struct pt_error *err);
enum pt_status pt_gguf_writer_set_u64(pt_gguf_writer *w, const char *key, uint64_t v,
				      struct pt_error *err);
enum pt_status pt_gguf_writer_set_f32(pt_gguf_writer *w, const char *key, float v,
				      struct pt_error *err);
enum pt_status pt_gguf_writer_set_bool(pt_gguf_writer *w, const char *key, bool v,
				       struct pt_error *err);
enum pt_status pt_gguf_writer_set_str(pt_gguf_writer *w, const char *key, const char *v,
				      struct pt_error *err);
/* Any scalar or string value given as raw little-endian payload bytes (for copying keys):
 * exactly the bytes a reader kv->value points at, i.e. for STRING the u64 length followed by
 * that many bytes.  Numeric arrays copy with set_arr(kv->arr_type, kv->value, kv->arr_count);
 * string arrays via pt_gguf_arr_strs + set_arr_str with lens. */
enum pt_status pt_gguf_writer_set_raw(pt_gguf_writer *w, const char *key,
				      enum pt_gguf_vtype type, const void *payload, size_t n,
				      struct pt_error *err);
/* Numeric array: count packed elements of elem type. */
enum pt_status pt_gguf_writer_set_arr(pt_gguf_writer *w, const char *key,
				      enum pt_gguf_vtype elem, const void *data, uint64_t count,
				      struct pt_error *err);
/* String array: lens may be NULL (then strlen). */
enum pt_status pt_gguf_writer_set_arr_str(pt_gguf_writer *w, const char *key,
					  const char *const *strs, const uint64_t *lens,
					  uint64_t count, struct pt_error *err);
enum pt_status pt_gguf_writer_add_tensor(pt_gguf_writer *w, const char *name, uint32_t n_dims,
					 const uint64_t *ne, uint32_t type,
					 struct pt_error *err);
enum pt_status pt_gguf_writer_begin_data(pt_gguf_writer *w, struct pt_error *err);
enum pt_status pt_gguf_writer_write_data(pt_gguf_writer *w, const void *bytes, size_t n,
					 struct pt_error *err);
/* Checks every tensor got exactly its bytes, writes the final padding, fsyncs, closes. */
enum pt_status pt_gguf_writer_finish(pt_gguf_writer *w, struct pt_error *err);
void pt_gguf_writer_destroy(pt_gguf_writer *w); /* NULL-safe; removes an unfinished file */

#endif
