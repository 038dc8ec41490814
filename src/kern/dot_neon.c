/* dot_neon.c - plain NEON dot products (every aarch64 CPU); the body is dot_neon_impl.h. */
#define PT_NEON_DOTPROD 0
#define PT_NEON_TABLE pt_kern_dot_neon
#define PT_NEON_DOT4_TABLE pt_kern_dot4_neon
#include "kern/dot_neon_impl.h"

/* The i8mm level has no kernel of its own yet (SMMLA pays off in multi-row / multi-token
 * tiles, which aarch64 does not have): every type falls back to the dotprod table. */
const pt_kern_dot_fn pt_kern_dot_i8mm[PT_TYPE_COUNT] = { 0 };
