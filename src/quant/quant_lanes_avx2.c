/* quant_lanes_avx2.c - the K-quant search helpers with 8 AVX2 lanes (one per sub-block);
 * called only when pt_quant_have_avx2() (quant_lanes.c).  Body: quant_lanes_impl.h. */
#define PT_LANES 8
#include "quant/quant_lanes_impl.h"

void pt_quant_make_qkx2_quants_avx2(int n, int nmax, const float *x, const float *w,
				    uint8_t *L, float *scales, float *the_mins, float rmin,
				    float rdelta, int nstep, int use_mad)
{
	qkx2_lanes(n, nmax, x, w, L, scales, the_mins, rmin, rdelta, nstep, use_mad);
}

void pt_quant_make_qx_quants_avx2(int n, int nmax, const float *x, int8_t *L, float *scales)
{
	qx_lanes(n, nmax, x, L, scales);
}
