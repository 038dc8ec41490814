/* quant_lanes.c - the 8-sub-block search entry points: AVX2 (8 lanes) when the CPU has it,
 * else two groups of 4 SSE2 lanes.  Both are bit-identical to the scalar helpers
 * (quant_lanes_impl.h explains how). */
#define PT_LANES 4
#include "quant/quant_lanes_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

void pt_quant_make_qkx2_quants_sse(int n, int nmax, const float *x, const float *w, uint8_t *L,
				   float *scales, float *the_mins, float rmin, float rdelta,
				   int nstep, int use_mad)
{
	for (int g = 0; g < 8; g += LANES)
		qkx2_lanes(n, nmax, x + g * n, w + g * n, L + g * n, scales + g, the_mins + g,
			   rmin, rdelta, nstep, use_mad);
}

void pt_quant_make_qx_quants_sse(int n, int nmax, const float *x, int8_t *L, float *scales)
{
	for (int g = 0; g < 8; g += LANES)
		qx_lanes(n, nmax, x + g * n, L + g * n, scales + g);
}

/* Everything quant_lanes_avx2.c is compiled for (-mavx2 -mfma -mf16c -mbmi2); the builtin
 * checks the OS saves the AVX state, cpuid covers the features clang's builtin cannot name. */
static int detect_avx2(void)
{
#if !defined(__x86_64__)
	return 0; /* quant_lanes_avx2.c is built on x86-64 only (Makefile ARCH) */
#else
	unsigned a, b, c, d;
	const char *force = getenv("PARTICLE_CPU"); /* house-wide override: scalar|avx2|avx512 */
	if (force && strcmp(force, "scalar") == 0)
		return 0;
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		return 0;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) /* F16C */
		return 0;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 8)); /* BMI2 */
#endif
}

/* Cached: cpuid traps to the hypervisor on virtual machines.  Racing first calls store the
 * same answer. */
int pt_quant_have_avx2(void)
{
	static int cached = -1;
	int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (v < 0) {
		v = detect_avx2();
		__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	}
	return v;
}

void pt_quant_make_qkx2_quants_x8(int n, int nmax, const float *x, const float *w, uint8_t *L,
				  float *scales, float *the_mins, float rmin, float rdelta,
				  int nstep, int use_mad)
{
#if defined(__x86_64__)
	if (pt_quant_have_avx2()) {
		pt_quant_make_qkx2_quants_avx2(n, nmax, x, w, L, scales, the_mins, rmin, rdelta,
					       nstep, use_mad);
		return;
	}
#endif
	pt_quant_make_qkx2_quants_sse(n, nmax, x, w, L, scales, the_mins, rmin, rdelta,
					      nstep, use_mad);
}

void pt_quant_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L, float *scales)
{
#if defined(__x86_64__)
	if (pt_quant_have_avx2()) {
		pt_quant_make_qx_quants_avx2(n, nmax, x, L, scales);
		return;
	}
#endif
	pt_quant_make_qx_quants_sse(n, nmax, x, L, scales);
}
