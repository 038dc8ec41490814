/* fuzz_expert.c - libFuzzer target for the expert module's parsers: the first byte picks the
 * routing-trace reader (then the cache simulator runs on what parsed) or the pack-manifest
 * parser (geometry bounds against a pack size taken from the input). */
#include <stdint.h>
#include <string.h>

#include "expert/cachesim.h"
#include "expert/pack.h"
#include "expert/trace.h"
#include "util/alloc.h"

static void trace_case(const uint8_t *data, size_t n)
{
	struct pt_trace t;
	struct pt_sim_result r;
	if (pt_trace_parse(data, n, "fuzz", &t, NULL) != PT_OK)
		return;
	if (t.n_rec <= 4096 && pt_cachesim_run(&t, 1 + (data[0] & 15), &r, NULL) == PT_OK) {
		if (r.hits[PT_SIM_BELADY] > r.requests || r.hits[PT_SIM_LRU] > r.requests)
			__builtin_trap(); /* hits can never exceed requests */
		pt_cachesim_free(&r);
	}
	pt_trace_free(&t);
}

static void manifest_case(const uint8_t *data, size_t n)
{
	uint64_t size = 0;
	struct pt_pack p;
	if (n < 8)
		return;
	memcpy(&size, data, 8);
	char *text = pt_malloc(n - 8 + 1);
	if (!text)
		return;
	memcpy(text, data + 8, n - 8);
	text[n - 8] = '\0';
	if (pt_pack_manifest_parse(text, size, &p, NULL) == PT_OK) {
		for (uint32_t m = 0; m < p.n_moe; m++)
			if (p.layers[m].offset > size || p.layers[m].stride > size)
				__builtin_trap(); /* geometry must lie inside the pack */
		pt_pack_free(&p);
	}
	pt_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	if (n < 1)
		return 0;
	if (data[0] & 0x80)
		manifest_case(data + 1, n - 1);
	else
		trace_case(data + 1, n - 1);
	return 0;
}
