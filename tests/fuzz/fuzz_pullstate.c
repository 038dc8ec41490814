/* fuzz_pullstate.c - libFuzzer target for the pull state file parser (net/ranges.h): whatever
 * parses must describe sorted, disjoint ranges inside the declared size, and format back to
 * text that parses to the same state. */
#include <stdint.h>
#include <string.h>

#include "net/ranges.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct pt_pull_state s, t;
	char *text = NULL;
	if (pt_pull_state_parse((const char *)data, n, &s, NULL) != PT_OK)
		return 0;
	for (uint32_t i = 0; i < s.done.n; i++) {
		if (s.done.r[i].start >= s.done.r[i].end || s.done.r[i].end > s.size)
			__builtin_trap();
		if (i && s.done.r[i - 1].end >= s.done.r[i].start)
			__builtin_trap();
	}
	if (pt_pull_state_format(&s, &text, NULL) == PT_OK) {
		if (pt_pull_state_parse(text, strlen(text), &t, NULL) != PT_OK)
			__builtin_trap();
		if (t.size != s.size || t.done.n != s.done.n || strcmp(t.validator, s.validator) ||
		    (s.done.n && memcmp(t.done.r, s.done.r, s.done.n * sizeof *s.done.r)))
			__builtin_trap();
		pt_ranges_free(&t.done);
	}
	pt_free(text);
	pt_ranges_free(&s.done);
	return 0;
}
