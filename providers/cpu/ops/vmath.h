/*
 * vmath: float32 exp, erf, tanh and sigmoid written without branches or
 * libm calls, so that loops calling them vectorize (glibc's expf, erff and
 * tanhf are scalar calls of 3-15 ns each).  Worst errors over every third
 * float32, against double libm: exp 2.7 ulp, erf 2.0, tanh 2.1, sigmoid 3.8.
 * The erf and tanh polynomials are least-squares fits (relative error,
 * Chebyshev nodes) made with numpy; the comments say what each one fits.
 * Used by the Softmax and unary kernels.
 */
#ifndef ORTMK_CPU_VMATH_H
#define ORTMK_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

/* exp(x) for x <= 0: Cody-Waite reduction by ln 2 and a degree-6 Taylor
 * polynomial on |r| <= ln2/2; 0 below -87.3 (no denormals). */
static inline float vm_exp_nonpos(float x)
{
	const float log2e = 1.44269504f, ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
	float c = x < -87.3f ? -87.3f : x, n, r, p, scale;
	uint32_t bits;
	n = (c * log2e + 12582912.0f) - 12582912.0f;   /* round to nearest */
	r = c - n * ln2_hi - n * ln2_lo;
	p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666418f +
		r * (0.00833336729f + r * 0.00138889f)))));
	bits = (uint32_t)((int32_t)n + 127) << 23;
	memcpy(&scale, &bits, sizeof(scale));
	return x < -87.3f ? 0.0f : p * scale;
}

/* erf: |x| <= 1 fits erf(x)/x as a polynomial in z = 2x^2 - 1; 1 < |x| < 4
 * fits erfc(x) exp(x^2) as a polynomial in z = (1/x - 0.625) / 0.375;
 * beyond 4, erf is 1 to float precision. */
static inline float vm_erf(float x)
{
	float a = x < 0.0f ? -x : x, u = 2.0f * a * a - 1.0f, z, small, big, q;
	small = a * (0.96546876f + u * (-0.1405361f + u * (0.019852499f + u * (-0.002285417f +
		u * (0.00021750925f + u * (-1.7671535e-05f + u * 1.2340953e-06f))))));
	z = ((1.0f / (a > 1.0f ? a : 1.0f)) - 0.625f) * 2.6666667f;
	q = 0.305953f + z * (0.14335608f + z * (-0.02424339f + z * (0.0023114004f +
		z * (0.00046303828f + z * (-0.00035773692f + z * (0.00011889869f +
		z * -1.7672846e-05f))))));
	big = 1.0f - vm_exp_nonpos(-a * a) * q;
	big = a >= 4.0f ? 1.0f : big;
	small = a <= 1.0f ? small : big;
	return x < 0.0f ? -small : small;
}

/* tanh: |x| < 0.55 fits tanh(x)/x in z = x^2 / 0.15125 - 1; above,
 * (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.33 has no cancellation. */
static inline float vm_tanh(float x)
{
	float a = x < 0.0f ? -x : x, z = a * a * 6.6115702f - 1.0f, e, r;
	float small = a * (0.9524576f + z * (-0.04483394f + z * (0.0025522371f +
		z * (-0.00014718944f + z * (8.543889e-06f + z * -4.9624373e-07f)))));
	e = vm_exp_nonpos(-2.0f * a);
	r = a < 0.55f ? small : (1.0f - e) / (1.0f + e);
	return x < 0.0f ? -r : r;
}

/* 1 / (1 + exp(-x)), with e = exp(-|x|) so nothing overflows and the
 * negative side keeps its relative precision. */
static inline float vm_sigmoid(float x)
{
	float e = vm_exp_nonpos(x < 0.0f ? x : -x), s = 1.0f / (1.0f + e);
	return x < 0.0f ? e * s : s;
}

#endif
