/*
 * vmath: float32 exp, erf, tanh and sigmoid without branches or libm
 * calls, so that loops calling them vectorize (glibc's expf, erff and tanhf
 * are scalar calls of 3-15 ns each); exp also on vfloat.h's 8 lanes (vf_),
 * the same formula.  Used by Softmax, the unary ops and the fused Gelu
 * tail.
 *
 * exp: x = n ln2 + r (Cody-Waite, |r| <= ln2/2), a degree-6 minimax
 * polynomial for exp(r), times 2^n built in the exponent bits.  erf and
 * tanh: x P(x^2) / Q(x^2) with P, Q of degree 5 (erf) and 4 (tanh), fitted
 * with numpy to the relative error on [0, 3.92] and [0, 9] (beyond them
 * both are 1 to float precision, so x is clamped there, and the result
 * kept within [-1, 1]).  Worst relative errors over every 7th float32 in
 * [-20, 20] ([-87, 0] for exp), against double libm, compiled without FMA
 * (with FMA): exp 1.1e-7 (0.9e-7), erf 4.6e-7 (3.7e-7), tanh 3.6e-7
 * (3.2e-7), sigmoid 2.1e-7 (2.0e-7); vf_exp over [-87, 88.7] 0.9e-7.
 * tests/unit/test_cpu_fast.c checks them on ~1M points.  NaN in gives NaN
 * out.
 */
#ifndef ORTMK_CPU_VMATH_H
#define ORTMK_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vfloat.h"

/* exp(r), |r| <= ln2/2: minimax, relative error 1.9e-9 in exact arithmetic. */
static inline float vm_exp_poly(float r)
{
	return 1.0f + r * (1.0f + r * (0.49999991f + r * (0.16666420f + r * (0.041668225f +
		r * (0.0083748158f + r * 0.0013836850f)))));
}

/* exp(x) for x <= 0.  x is clamped at -88, where n = round(x log2 e)
 * reaches -127 and 2^n's bit pattern is exactly 0: results below 2^-126
 * are 0 (no denormals) with no select.  The clamp is written so NaN passes. */
static inline float vm_exp_nonpos(float x)
{
	const float ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
	float c = x < -88.0f ? -88.0f : x, t, n, r, scale;
	uint32_t bits;
	/* t = 1.5 * 2^23 + round(c log2 e): n sits in t's low mantissa bits, so
	 * 2^n comes from integer arithmetic on t (no float-to-int conversion,
	 * which would be undefined for NaN) */
	t = c * 1.44269504f + 12582912.0f;
	n = t - 12582912.0f;
	r = c - n * ln2_hi - n * ln2_lo;
	memcpy(&bits, &t, sizeof(bits));
	bits = (bits - 0x4b400000u + 127u) << 23;
	memcpy(&scale, &bits, sizeof(scale));
	return vm_exp_poly(r) * scale;
}

/* erf = x P(x^2) / Q(x^2) on |x| <= 3.92, odd by construction; the result
 * is kept within [-1, 1] so that 1 + erf (Gelu) never goes negative. */
static inline float vm_erf(float x)
{
	float c = x > 3.92f ? 3.92f : x < -3.92f ? -3.92f : x, t = c * c, p, q, r;
	p = 1.1283791f + t * (0.19040564f + t * (0.052748609f + t * (0.0037655786f +
		t * (0.00028488139f + t * 2.0500886e-06f))));
	q = 1.0f + t * (0.50207537f + t * (0.11410876f + t * (0.014969142f +
		t * (0.0011625251f + t * 3.8091657e-05f))));
	r = c * p / q;
	r = r > 1.0f ? 1.0f : r;
	return r < -1.0f ? -1.0f : r;
}

/* tanh = x P(x^2) / Q(x^2) on |x| <= 9, kept within [-1, 1]. */
static inline float vm_tanh(float x)
{
	float c = x > 9.0f ? 9.0f : x < -9.0f ? -9.0f : x, t = c * c, p, q, r;
	p = 1.0f + t * (0.13381022f + t * (0.0034955847f + t * (2.0609024e-05f +
		t * 1.3354582e-08f)));
	q = 1.0f + t * (0.46714339f + t * (0.025876969f + t * (0.00032856289f +
		t * 7.7765253e-07f)));
	r = c * p / q;
	r = r > 1.0f ? 1.0f : r;
	return r < -1.0f ? -1.0f : r;
}

/* 1 / (1 + exp(-x)), with e = exp(-|x|) so nothing overflows and the
 * negative side keeps its relative precision. */
static inline float vm_sigmoid(float x)
{
	float e = vm_exp_nonpos(x < 0.0f ? x : -x), s = 1.0f / (1.0f + e);
	return x < 0.0f ? e * s : s;
}

/* Sigmoid as ONNX Runtime's CPU provider computes it (MLAS's logistic,
 * the coefficients Eigen uses): x clamped to [-18, 18], x P(x^2) / Q(x^2)
 * + 0.5 with P of degree 4 and Q of degree 5 in x^2 evaluated by fused
 * multiply-adds in this order, a negative result made 0.  It gives ONNX
 * Runtime's bits for every input (checked on 1.1M inputs against
 * onnxruntime-node 1.30), so a threshold or a quantizer after a Sigmoid
 * decides as ONNX Runtime does: RetinaNet's scores before Greater,
 * EfficientNet's SiLU before DynamicQuantizeLinear.  Its absolute error is
 * at most 1.6e-7; its relative error is large where sigmoid < 1e-6 (the
 * + 0.5 cancels), which vm_sigmoid does not have: the RNN gates keep that
 * one.  Under a target with FMA (CPU_MULTIVERSION's clones) fmaf is one
 * instruction and the loops vectorize; elsewhere it is libm's, exact too. */
static inline float vm_logistic(float x)
{
	float c = x < -18.0f ? -18.0f : x > 18.0f ? 18.0f : x, t = c * c, p, q, r;
	p = fmaf(t, 4.37031012579801e-11f, 1.15627324459942e-07f);
	p = fmaf(p, t, 6.08574864600143e-05f);
	p = fmaf(p, t, 8.51377133304701e-03f);
	p = fmaf(p, t, 2.48287947061529e-01f);
	p = p * c;
	q = fmaf(t, 6.10247389755681e-13f, 5.76102136993427e-09f);
	q = fmaf(q, t, 6.29106785017040e-06f);
	q = fmaf(q, t, 1.70198817374094e-03f);
	q = fmaf(q, t, 1.16817656904453e-01f);
	q = fmaf(q, t, 9.93151921023180e-01f);
	r = p / q + 0.5f;
	return r < 0.0f ? 0.0f : r;
}

/* exp as ONNX Runtime's CPU provider computes it (MLAS's exp kernels on
 * AVX-512, also inside its Softmax): x clamped below at -150 ln2, m =
 * round(x / ln2) by the 1.5 * 2^23 trick, r = x - m ln2 in two FMA steps
 * (ln2 split high and low), a degree-6 polynomial in r by FMAs, times 2^m
 * with one rounding (two exact power-of-two factors here).  The same bits
 * for every input (checked on 1M inputs against onnxruntime-node 1.30 on
 * an AVX-512 machine), so a box decoded through Exp, or a Softmax score
 * compared with a threshold, comes out as in ONNX Runtime.  +inf gives
 * +inf, NaN gives NaN, below -103.97 gives 0.  Vectorizes where FMA is
 * available (CPU_MULTIVERSION's clones). */
static inline float vm_pow2i(int32_t n)
{
	uint32_t b = (uint32_t)(n + 127) << 23;
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static inline float vm_exp_mlas(float x)
{
	float c = x < -103.972084f ? -103.972084f : x, m, r, p, mc;
	int32_t n, h;

	m = fmaf(c, 1.44269504f, 12582912.0f) - 12582912.0f;
	r = fmaf(m, -0.693145752f, c);
	r = fmaf(m, -1.42860677e-6f, r);
	p = fmaf(0x1.694000p-10f, r, 0x1.125edcp-7f);
	p = fmaf(p, r, 0x1.555b5ap-5f);
	p = fmaf(p, r, 0x1.555450p-3f);
	p = fmaf(p, r, 0x1.fffff6p-2f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	/* m is in [-150, inf] or NaN; 2^m as two factors within the normal
	 * range (m past 200 overflows either way; NaN's p is NaN already) */
	mc = m < 200.0f ? m : 200.0f;
	n = (int32_t)mc;
	h = n >> 1;
	p = p * vm_pow2i(h) * vm_pow2i(n - h);
	return x == INFINITY ? x : p;
}

/* ---- 8 lanes ---- */

/* Reduction and polynomial of vm_exp_nonpos (vm_exp_poly's coefficients);
 * c already clamped; *ni = n as an integer, from t's bits. */
VF_INLINE vf8 vf_exp_core(vf8 c, vi8 *ni)
{
	const float ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
	vf8 t = c * 1.44269504f + 12582912.0f, n = t - 12582912.0f, r;
	*ni = (vi8)t - 0x4b400000;
	r = c - n * ln2_hi - n * ln2_lo;
	return 1.0f + r * (1.0f + r * (0.49999991f + r * (0.16666420f + r * (0.041668225f +
		r * (0.0083748158f + r * 0.0013836850f)))));
}

/* 2^n for n in [-127, 127] (-127 gives 0). */
VF_INLINE vf8 vf_pow2i(vi8 n)
{
	return (vf8)((vu8)(n + 127) << 23);
}

VF_INLINE vf8 vf_exp_nonpos(vf8 x)
{
	vi8 n;
	vf8 p;
	x = vf_sel(x < -88.0f, vf_splat(-88.0f), x);
	p = vf_exp_core(x, &n);
	return p * vf_pow2i(n);
}

/* exp(x) over the whole range: inf above 88.72, denormals down to -103.9
 * and 0 below.  2^n is applied as two factors so n from -150 to 128 needs
 * no special case. */
VF_INLINE vf8 vf_exp(vf8 x)
{
	vi8 n, h;
	vf8 p = vf_exp_core(vf_clamp(x, -104.0f, 89.0f), &n);
	h = n >> 1;
	return p * vf_pow2i(h) * vf_pow2i(n - h);
}

/* vm_sigmoid on 8 lanes (the same formula): e = exp(-|x|), s = 1 / (1 +
 * e), e s for negative x.  NaN stays NaN. */
VF_INLINE vf8 vf_sigmoid(vf8 x)
{
	vf8 e = vf_exp_nonpos(-vf_abs(x)), s = 1.0f / (1.0f + e);

	return vf_sel(x < 0.0f, e * s, s);
}

/* vm_erf on 8 lanes (the same rational function and clamps). */
VF_INLINE vf8 vf_erf(vf8 x)
{
	vf8 c = vf_clamp(x, -3.92f, 3.92f), t = c * c, p, q;

	p = 1.1283791f + t * (0.19040564f + t * (0.052748609f + t * (0.0037655786f +
		t * (0.00028488139f + t * 2.0500886e-06f))));
	q = 1.0f + t * (0.50207537f + t * (0.11410876f + t * (0.014969142f +
		t * (0.0011625251f + t * 3.8091657e-05f))));
	return vf_clamp(c * p / q, -1.0f, 1.0f);
}

/* vm_tanh on 8 lanes (the same rational function and clamps). */
VF_INLINE vf8 vf_tanh(vf8 x)
{
	vf8 c = vf_clamp(x, -9.0f, 9.0f), t = c * c, p, q;

	p = 1.0f + t * (0.13381022f + t * (0.0034955847f + t * (2.0609024e-05f +
		t * 1.3354582e-08f)));
	q = 1.0f + t * (0.46714339f + t * (0.025876969f + t * (0.00032856289f +
		t * 7.7765253e-07f)));
	return vf_clamp(c * p / q, -1.0f, 1.0f);
}

#endif
