/* dot_neon.c - plain NEON dot products (every aarch64 CPU); the body is dot_neon_impl.h. */
#define PT_NEON_DOTPROD 0
#define PT_NEON_TABLE pt_kern_dot_neon
#define PT_NEON_DOT4_TABLE pt_kern_dot4_neon
#define PT_NEON_TILE_TABLE pt_kern_tile_neon
#include "kern/dot_neon_impl.h"

/* The i8mm level has no dot of its own (SMMLA pays off only in multi-row x multi-token tiles,
 * tile_i8mm.c): every type runs the dotprod dot and dot4. */
const pt_kern_dot_fn pt_kern_dot_i8mm[PT_TYPE_COUNT] = { 0 };
