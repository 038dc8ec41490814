/* decode_bytes.h - the bytes one decoded token must read from memory (issue 21's physical
 * limit): every non-expert weight once (attention, norms, routers, shared experts, dense
 * layers), the output head, one row of the token embedding, the k routed experts of every
 * MoE layer, and the K and V the new token attends to.  Divided into the machine's read
 * bandwidth it gives the fastest decode memory allows (`particle bench`'s
 * decode_bytes_per_token and decode_fraction_of_membw).
 *
 * Counted from the tensors as stored (quantized sizes), so the figure is exact for the
 * file; activations, scratch and the router's top-k are not counted (they stay in cache). */
#ifndef PT_GEN_DECODE_BYTES_H
#define PT_GEN_DECODE_BYTES_H

#include <stdint.h>

#include "expert/layout.h"
#include "gen/kv.h"
#include "model/model.h"

struct pt_decode_bytes {
	uint64_t weights;  /* non-expert tensors except token_embd and output.weight */
	uint64_t head;     /* output.weight, or the whole token_embd when tied */
	uint64_t embd_row; /* one row of token_embd (the new token's embedding) */
	uint64_t experts;  /* n_expert_used experts' bytes in every MoE layer */
	uint64_t kv;       /* K and V of the attended positions, every layer */
	uint64_t total;
};

/* For a token decoded at position n_past (it attends to n_past + 1 positions, at most the
 * window on sliding layers).  l: the model's expert layout (its parts are the routed
 * tensors). */
void pt_decode_bytes(const struct pt_model *m, const struct pt_expert_layout *l,
		     enum pt_kv_type kv_type, int64_t n_past, struct pt_decode_bytes *out);

#endif
