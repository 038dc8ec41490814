/* pack.h - the expert pack: every expert's tensors contiguous in one 4 KiB-aligned blob, so
 * a miss is one read.  Written beside the model by `particle pack`:
 *
 *   MODEL.gguf.xpack        blobs: for each MoE layer, for each expert e, a blob of
 *                           `stride` bytes at layer offset + e*stride (stride and layer
 *                           offsets 4096-aligned); part p of the blob at part_off[p]
 *                           (64-aligned), in the layout's part order; zero padding.
 *   MODEL.gguf.xpack.json   the manifest (JSON): format, version, source identity
 *                           (size, mtime_ns, sha256 of bytes [0, data_offset): header,
 *                           metadata and tensor infos), n_expert, per layer {layer, offset,
 *                           stride, parts [{name, type, off, bytes}]}, and the pack file's
 *                           size and sha256.
 *
 * The runtime uses a pack only when the manifest matches the model (size, mtime, header
 * hash, identical parts) and the pack file has the recorded size; --verify also hashes it.
 *
 * Interleaved packs (`particle pack --repack`, manifest version 2): every routed expert
 * matrix whose type and shape have kern.h's X16 layout (Q4_K, Q6_K; rows a multiple of 16)
 * is stored interleaved, its part marked "layout": "x16" with the interleaved size; the
 * runtime reads them with --repack only (the same numerics as --repack in RAM), and a build
 * that only knows version 1 refuses the manifest instead of misreading the bytes.
 */
#ifndef PT_EXPERT_PACK_H
#define PT_EXPERT_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "expert/layout.h"
#include "util/status.h"

#define PT_PACK_VERSION 1     /* every part as stored */
#define PT_PACK_VERSION_X16 2 /* interleaved parts */

struct pt_pack_layer {
	uint32_t layer;
	uint64_t offset; /* first blob in the pack file */
	uint64_t stride; /* bytes per blob (4096 multiple) */
	uint64_t part_off[PT_EXPERT_MAX_PARTS];
	bool part_x16[PT_EXPERT_MAX_PARTS]; /* stored interleaved (kern.h X16) */
};

struct pt_pack {
	char *path;          /* pack data file */
	uint64_t size;       /* its recorded size */
	uint32_t n_moe;
	bool x16;            /* written with --repack (version 2): layers' part_x16 say which */
	struct pt_pack_layer *layers; /* [n_moe], same order as the layout */
};

/* Whether an interleaved pack stores part p interleaved: a routed expert matrix (gate, up,
 * fused gate_up, down) whose type and shape have the X16 layout. */
bool pt_pack_part_x16(const struct pt_expert_part *p);
/* Bytes part p takes in a blob (interleaved or as stored). */
uint64_t pt_pack_part_bytes(const struct pt_expert_part *p, bool x16);

/* Default paths: MODEL + ".xpack" and PACK + ".json" (buf must hold strlen + 16). */
void pt_pack_default_path(const char *model, char *buf, size_t n);
void pt_pack_manifest_path(const char *pack, char *buf, size_t n);

/* Computes the blob geometry for a layout (no I/O); x16: an interleaved pack. */
enum pt_status pt_pack_plan(const struct pt_expert_layout *l, bool x16, struct pt_pack *out,
			    struct pt_error *err);
/* Writes the pack and its manifest for the model at model_path (layout from it), through a
 * temporary file renamed into place; progress (may be NULL) is called per layer.  x16: the
 * qualifying matrices interleaved (version 2). */
enum pt_status pt_pack_write(const char *model_path, const struct pt_expert_layout *l, bool x16,
			     const char *pack_path, void (*progress)(uint32_t done, uint32_t n),
			     struct pt_error *err);
/* Writes only the manifest of an already written pack file whose SHA-256 is sha (used when
 * the pack was built elsewhere, e.g. while downloading: pack_stream.h); x16 as it was
 * written. */
enum pt_status pt_pack_write_manifest(const char *model_path, const struct pt_expert_layout *l,
				      bool x16, const char *pack_path, const char sha[65],
				      struct pt_error *err);
/* Loads the manifest of pack_path and checks it against the model (identity and layout) and
 * the pack file's size; full_hash also hashes the pack file.  model_path NULL: check only the
 * pack against its manifest.  PT_E_FORMAT (corrupt or mismatching pack) naming what differs. */
enum pt_status pt_pack_open(const char *pack_path, const char *model_path,
			    const struct pt_expert_layout *l, bool full_hash, struct pt_pack *out,
			    struct pt_error *err);
void pt_pack_free(struct pt_pack *p);
/* Parses manifest text for a pack file of pack_size bytes (format, version, layer geometry
 * bounds-checked; no file access). */
enum pt_status pt_pack_manifest_parse(const char *text, uint64_t pack_size, struct pt_pack *out,
				      struct pt_error *err);

/* Exactly n bytes of fd at off into dst (path names it in errors; a file that ends first is
 * a format error). */
enum pt_status pt_pack_pread_all(int fd, uint8_t *dst, uint64_t n, uint64_t off,
				 const char *path, struct pt_error *err);
/* SHA-256 of [0, len) of path, lowercase hex into hex[65]. */
enum pt_status pt_pack_sha256_file(const char *path, uint64_t len, char hex[65],
				   struct pt_error *err);

#endif
