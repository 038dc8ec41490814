/* fuzz_profile.c - libFuzzer target for the expert-popularity profile parser
 * (src/expert/profile.h): any bytes are parsed; what parses must serialize back to exactly
 * the same bytes and rank without reading out of bounds.  Any difference traps. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "expert/profile.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_profile p;
	struct pt_error err = { 0 };
	if (pt_profile_parse(data, size, 0, 0, 0, &p, &err) != PT_OK)
		return 0;
	uint8_t *b = NULL;
	size_t n = 0;
	if (pt_profile_serialize(&p, &b, &n, &err) != PT_OK || n != size || memcmp(b, data, n))
		__builtin_trap();
	uint32_t top[PT_PROFILE_MAX_EXPERT];
	for (uint32_t i = 0; i < p.n_moe; i++) {
		const uint32_t k = pt_profile_top(&p, i, top, 8);
		for (uint32_t j = 0; j < k; j++)
			if (top[j] >= p.n_expert ||
			    (j && p.uses[(size_t)i * p.n_expert + top[j]] >
					  p.uses[(size_t)i * p.n_expert + top[j - 1]]))
				__builtin_trap();
	}
	pt_free(b);
	pt_profile_free(&p);
	return 0;
}
