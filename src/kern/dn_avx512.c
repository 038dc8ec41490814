/* dn_avx512.c - Gated DeltaNet inner loops at the avx512 level (16 lanes, two vector partial
 * sums, the tail in index order; kern.h, struct pt_kern_dn_ops). */
#include <immintrin.h>
#include <stdint.h>

float pt_kern_dn_dot_avx512(const float *a, const float *b, uint32_t n);
void pt_kern_dn_axpy_avx512(float *y, const float *x, float a, uint32_t n);
float pt_kern_dn_row_step_avx512(float *r, const float *k, const float *q, float eg, float v,
			      float beta, uint32_t n);

float pt_kern_dn_dot_avx512(const float *a, const float *b, uint32_t n)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
	uint32_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
		s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
	}
	for (; i + 16 <= n; i += 16)
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
	float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void pt_kern_dn_axpy_avx512(float *y, const float *x, float a, uint32_t n)
{
	const __m512 va = _mm512_set1_ps(a);
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), va,
							_mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += x[i] * a;
}

float pt_kern_dn_row_step_avx512(float *r, const float *k, const float *q, float eg, float v,
				 float beta, uint32_t n)
{
	const __m512 ve = _mm512_set1_ps(eg);
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
	uint32_t i = 0;
	for (; i + 16 <= n; i += 16) { /* decay and r . k in one pass */
		const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(r + i), ve);
		_mm512_storeu_ps(r + i, x);
		s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + i), s0);
	}
	float sk = _mm512_reduce_add_ps(s0);
	for (uint32_t j = i; j < n; j++) {
		r[j] *= eg;
		sk += r[j] * k[j];
	}
	const float d = (v - sk) * beta;
	const __m512 vd = _mm512_set1_ps(d);
	for (i = 0; i + 16 <= n; i += 16) { /* update and r . q in one pass */
		const __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vd, _mm512_loadu_ps(r + i));
		_mm512_storeu_ps(r + i, x);
		s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + i), s1);
	}
	float sq = _mm512_reduce_add_ps(s1);
	for (uint32_t j = i; j < n; j++) {
		r[j] += k[j] * d;
		sq += r[j] * q[j];
	}
	return sq;
}
