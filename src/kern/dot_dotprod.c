/* dot_dotprod.c - the NEON dot products with SDOT (vdotq_s32), compiled with the Makefile's
 * ISA_DOTPROD flags and reached only when dispatch.c found HWCAP_ASIMDDP. */
#define PT_NEON_DOTPROD 1
#define PT_NEON_TABLE pt_kern_dot_dotprod
#define PT_NEON_DOT4_TABLE pt_kern_dot4_dotprod
#define PT_NEON_TILE_TABLE pt_kern_tile_dotprod
#include "kern/dot_neon_impl.h"
