/* quant_internal.h - per-format block functions and the quantizer search helpers, shared by
 * the quant module's files and exposed to its unit tests.  Not for other modules: they use
 * quant.h (pt_quant_ops for block-level access). */
#ifndef PT_QUANT_INTERNAL_H
#define PT_QUANT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#define PT_GROUP_MAX_EPS 1e-15f

/* ggml's nearest_int: round half to even through the 1.5*2^23 trick; valid for |x| <=
 * 4194303 (outside that it returns ggml's garbage, deterministically). */
static inline int pt_quant_nearest_int(float x)
{
	float v = x + 12582912.f;
	int32_t i;
	memcpy(&i, &v, sizeof(i));
	return (i & 0x007fffff) - 0x00400000;
}

/* Index of the entry of the ascending table val[n] nearest to x (exact midpoint -> upper). */
int pt_quant_best_index_int8(int n, const int8_t *val, float x);

/* The search helpers of GGUF-AND-QUANTS.md 5.1, operation order preserved. */
float pt_quant_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
			      const float *qw);
float pt_quant_make_q3_quants(int n, int nmax, const float *x, int8_t *L, int do_rmse);
float pt_quant_make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L,
				float *the_min, uint8_t *Laux, float rmin, float rdelta,
				int nstep, int use_mad);

/* The scale search of quantize_row_iq4_nl_impl for one 32-element block (weights x^2,
 * ntry = 7), shared by IQ4_NL and IQ4_XS: fills L[32] with the first-fit codes and returns
 * the float scale (0 when max |x| < 1e-15). */
float pt_quant_iq4_block_scale(const float *x, uint8_t *L);

/* The same for 8 consecutive sub-blocks of n <= 32 values each (x[b*n + i], results per b),
 * bit-identical to 8 scalar calls (quant_lanes.c).  make_qx_quants_x8 is rmse_type 1 with
 * no quant weights (weights x^2), as Q6_K uses it. */
void pt_quant_make_qkx2_quants_x8(int n, int nmax, const float *x, const float *w, uint8_t *L,
				  float *scales, float *the_mins, float rmin, float rdelta,
				  int nstep, int use_mad);
void pt_quant_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L, float *scales);
/* The two implementations the _x8 entry points choose between (exposed for tests); the
 * _avx2 ones may only run when pt_quant_have_avx2() is true. */
int pt_quant_have_avx2(void);
void pt_quant_make_qkx2_quants_sse(int n, int nmax, const float *x, const float *w, uint8_t *L,
				   float *scales, float *the_mins, float rmin, float rdelta,
				   int nstep, int use_mad);
void pt_quant_make_qx_quants_sse(int n, int nmax, const float *x, int8_t *L, float *scales);
void pt_quant_make_qkx2_quants_avx2(int n, int nmax, const float *x, const float *w,
				    uint8_t *L, float *scales, float *the_mins, float rmin,
				    float rdelta, int nstep, int use_mad);
void pt_quant_make_qx_quants_avx2(int n, int nmax, const float *x, int8_t *L, float *scales);

#define PT_QUANT_DECL(t)                                                                   \
	void pt_quant_dequant_##t(const void *src, float *dst, uint64_t nb);               \
	void pt_quant_quantize_##t(const float *src, void *dst, uint64_t nb)
PT_QUANT_DECL(q4_0);
PT_QUANT_DECL(q4_1);
PT_QUANT_DECL(q5_0);
PT_QUANT_DECL(q5_1);
PT_QUANT_DECL(q8_0);
PT_QUANT_DECL(iq4_nl);
PT_QUANT_DECL(mxfp4);
PT_QUANT_DECL(q2_K);
PT_QUANT_DECL(q3_K);
PT_QUANT_DECL(q4_K);
PT_QUANT_DECL(q5_K);
PT_QUANT_DECL(q6_K);
PT_QUANT_DECL(iq4_xs);
#undef PT_QUANT_DECL

#endif
