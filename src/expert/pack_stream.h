/* pack_stream.h - builds an expert pack (pack.h) from a model's bytes as they arrive, in
 * any order and from several threads, so a download needs no second pass over the model.
 *
 * Every byte of an expert tensor has one place in the pack: byte x of part i of MoE layer
 * m lies in expert e = (x - part.file_offset) / part.stride and goes to
 * layer.offset + e * layer.stride + part_off[i] + (x - part.file_offset) % part.stride.
 * The pack file is sized up front (zero padding stays as holes); feed scatters each piece
 * with pwrite.  An interleaved pack (x16, `particle pack --repack`): a part stored
 * interleaved gathers an expert's rows at the start of its own place (the interleaved
 * bytes are as many or more) and a per-expert count of the bytes in says when the last
 * one came; that piece's thread reads the rows back, interleaves them and writes them over
 * (one expert's part at a time: no second pass, no buffer of the model).  finish checks
 * every such part complete, hashes the pack file once (it was just written: page cache), renames
 * it into place and writes the manifest against the finished model file, giving exactly
 * the bytes `particle pack` writes for that model. */
#ifndef PT_EXPERT_PACK_STREAM_H
#define PT_EXPERT_PACK_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expert/layout.h"
#include "util/status.h"

typedef struct pt_pack_stream pt_pack_stream;

/* The pack size a layout needs (0 when it has no experts); x16: interleaved. */
uint64_t pt_pack_stream_bytes(const struct pt_expert_layout *l, bool x16);
/* Starts a pack for layout l (copied) at pack_path (created under a temporary name); x16:
 * the interleaved pack `particle pack --repack` writes. */
enum pt_status pt_pack_stream_begin(const struct pt_expert_layout *l, const char *pack_path,
				    bool x16, pt_pack_stream **out, struct pt_error *err);
/* Model bytes [off, off+n); thread-safe for disjoint pieces, each byte once (a byte of an
 * interleaved part seen twice is an error). */
enum pt_status pt_pack_stream_feed(pt_pack_stream *s, uint64_t off, const void *buf, size_t n,
				   struct pt_error *err);
/* Hashes, commits the pack and writes its manifest for the complete model at model_path;
 * always releases s. */
enum pt_status pt_pack_stream_finish(pt_pack_stream *s, const char *model_path,
				     struct pt_error *err);
/* Discards the temporary pack; NULL-safe. */
void pt_pack_stream_abort(pt_pack_stream *s);

#endif
