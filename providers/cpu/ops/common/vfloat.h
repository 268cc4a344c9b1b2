/*
 * vfloat: 8-lane float32 vectors (GCC vector extensions) for the CPU
 * kernels' hot loops (pooling, Softmax, LayerNormalization, the unary and
 * binary element-wise ops, vmath.h's vector functions).
 *
 * Everything here is always_inline, to be used inside a CPU_MULTIVERSION
 * function: gcc lowers the vector operations once per clone, one ymm
 * instruction on AVX2 and AVX-512, two xmm ones on baseline x86-64, so a
 * kernel is written once for every ISA.  Eight lanes rather than sixteen:
 * gcc 12 turns comparisons of 64-byte generic vectors into scalar code
 * (measured 13x slower than the 32-byte ones).  That has a price where the
 * CPU multiplies-adds zmm at twice ymm's rate (the Zen 4 VM of the fifth
 * session: bench-gemm's peak line 240 GFLOP/s on one core, 119 with --isa
 * avx2): a kernel bound by its multiply-adds there runs at half the
 * core's peak (the depthwise convolution is not: a zmm variant measured
 * no faster); the GEMM's own kernels (kern_avx512.c) are zmm.  Loads and stores go through memcpy (no alignment
 * assumed); a partial vector (the tail of a row) through a stack buffer, so
 * the tail is computed by the same code as the rest and gives the same
 * bits.  The vectors never cross a call, so the ABI note gcc prints for
 * 32-byte vectors in the baseline clone does not apply (-Wno-psabi).
 */
#ifndef ORTMK_CPU_VFLOAT_H
#define ORTMK_CPU_VFLOAT_H

#include <stdint.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wpsabi"   /* for includers without -Wno-psabi */

typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef uint32_t vu8 __attribute__((vector_size(32)));

#define VF_INLINE static inline __attribute__((always_inline))

VF_INLINE vf8 vf_load(const float *p)
{
	vf8 v;
	memcpy(&v, p, sizeof(v));
	return v;
}

VF_INLINE void vf_store(float *p, vf8 v)
{
	memcpy(p, &v, sizeof(v));
}

VF_INLINE vf8 vf_splat(float x)
{
	return (vf8){x, x, x, x, x, x, x, x};
}

/* n (< 8) lanes from p, the others `fill`. */
VF_INLINE vf8 vf_load_part(const float *p, int64_t n, float fill)
{
	float b[8] = {fill, fill, fill, fill, fill, fill, fill, fill};
	memcpy(b, p, (size_t)n * sizeof(float));
	return vf_load(b);
}

VF_INLINE void vf_store_part(float *p, vf8 v, int64_t n)
{
	float b[8];
	vf_store(b, v);
	memcpy(p, b, (size_t)n * sizeof(float));
}

/* m ? a : b lane by lane; m is a comparison result (all ones or zero). */
VF_INLINE vf8 vf_sel(vi8 m, vf8 a, vf8 b)
{
	return (vf8)((m & (vi8)a) | (~m & (vi8)b));
}

/* max(m, v) where a NaN on either side wins (numpy's and PyTorch's rule). */
VF_INLINE vf8 vf_max_nan(vf8 m, vf8 v)
{
	m = vf_sel(v > m, v, m);
	return vf_sel(v != v, v, m);
}

/* Plain max and min (one instruction each): the second operand when
 * either is NaN, as maxps does. */
VF_INLINE vf8 vf_max(vf8 a, vf8 b)
{
	return vf_sel(a > b, a, b);
}

VF_INLINE vf8 vf_min(vf8 a, vf8 b)
{
	return vf_sel(a < b, a, b);
}

/* x rounded to float before it takes part in anything else: reassociation
 * cannot move it.  It does not stop -ffp-contract=fast from fusing a
 * product with the addition after it into an FMA in the AVX2/AVX-512
 * clones (gcc 12 did, in the bilinear Resize): a function whose bits must
 * be ONNX Runtime's (multiplies, then adds, as its CPU provider computes
 * them: HardSigmoid, HardSwish, the bilinear Resize) is also marked
 * VF_NO_CONTRACT, which turns contraction off for that function. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_assoc_barrier)
#define VF_ROUNDED(x) __builtin_assoc_barrier(x)
#endif
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define VF_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define VF_NO_CONTRACT
#endif
#ifndef VF_ROUNDED
#define VF_ROUNDED(x) (x)
#endif

/* c < lo ? lo : c, c > hi ? hi : c, as NaN-preserving selects. */
VF_INLINE vf8 vf_clamp(vf8 c, float lo, float hi)
{
	c = vf_sel(c < lo, vf_splat(lo), c);
	return vf_sel(c > hi, vf_splat(hi), c);
}

/* HardSigmoid, clamp(alpha x + beta, 0, 1), with the product rounded
 * before the add as ONNX Runtime computes it; HardSwish is x times it with
 * alpha 1/6, beta 1/2. */
VF_INLINE vf8 vf_hsigmoid(vf8 x, float alpha, float beta)
{
	return vf_clamp(VF_ROUNDED(x * alpha) + beta, 0.0f, 1.0f);
}

VF_INLINE vf8 vf_abs(vf8 v)
{
	return (vf8)((vi8)v & 0x7fffffff);
}

/* sign of s (its top bit) copied onto |v|. */
VF_INLINE vf8 vf_copysign(vf8 v, vf8 s)
{
	return (vf8)(((vi8)v & 0x7fffffff) | ((vi8)s & (int32_t)0x80000000));
}

/* r[i][j] -> r[j][i] of the 8 x 8 block r holds (unpack, shuffle, then
 * 128-bit halves: 24 shuffles). */
VF_INLINE void vf_transpose8(vf8 *r)
{
	const vi8 lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
	const vi8 s10 = {0, 1, 8, 9, 4, 5, 12, 13}, s32 = {2, 3, 10, 11, 6, 7, 14, 15};
	const vi8 h0 = {0, 1, 2, 3, 8, 9, 10, 11}, h1 = {4, 5, 6, 7, 12, 13, 14, 15};
	vf8 t[8], u[8];

	for (int i = 0; i < 8; i += 2) {
		t[i] = __builtin_shuffle(r[i], r[i + 1], lo);
		t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi);
	}
	for (int i = 0; i < 8; i += 4) {
		u[i] = __builtin_shuffle(t[i], t[i + 2], s10);
		u[i + 1] = __builtin_shuffle(t[i], t[i + 2], s32);
		u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], s10);
		u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], s32);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = __builtin_shuffle(u[i], u[i + 4], h0);
		r[i + 4] = __builtin_shuffle(u[i], u[i + 4], h1);
	}
}

VF_INLINE float vf_hsum(vf8 v)
{
	return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

VF_INLINE float vf_hmax(vf8 v)
{
	float m = v[0];
	for (int i = 1; i < 8; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* Row reductions with four independent accumulators: one accumulator
 * would make the loop wait on the add's latency (3-4 cycles per vector,
 * measured 4x slower on LayerNorm rows of 256). */

/* Sum of x[0, n) in float lanes. */
VF_INLINE float vf_row_sum(const float *x, int64_t n)
{
	vf8 a0 = vf_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		a0 += vf_load(x + i);
		a1 += vf_load(x + i + 8);
		a2 += vf_load(x + i + 16);
		a3 += vf_load(x + i + 24);
	}
	for (; i + 8 <= n; i += 8)
		a0 += vf_load(x + i);
	if (i < n)
		a1 += vf_load_part(x + i, n - i, 0.0f);
	return vf_hsum((a0 + a1) + (a2 + a3));
}

/* Sum of (x - m)^2 over x[0, n). */
VF_INLINE float vf_row_sqdev(const float *x, int64_t n, float m)
{
	vf8 a0 = vf_splat(0.0f), a1 = a0, a2 = a0, a3 = a0, d;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		d = vf_load(x + i) - m;
		a0 += d * d;
		d = vf_load(x + i + 8) - m;
		a1 += d * d;
		d = vf_load(x + i + 16) - m;
		a2 += d * d;
		d = vf_load(x + i + 24) - m;
		a3 += d * d;
	}
	for (; i + 8 <= n; i += 8) {
		d = vf_load(x + i) - m;
		a0 += d * d;
	}
	if (i < n) {
		d = vf_load_part(x + i, n - i, m) - m;
		a1 += d * d;
	}
	return vf_hsum((a0 + a1) + (a2 + a3));
}

/* Max of x[0, n) (n >= 1), NaN ignored as maxps does; -inf for an empty
 * tail lane. */
VF_INLINE float vf_row_max(const float *x, int64_t n)
{
	vf8 m0 = vf_splat(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		m0 = vf_max(vf_load(x + i), m0);
		m1 = vf_max(vf_load(x + i + 8), m1);
		m2 = vf_max(vf_load(x + i + 16), m2);
		m3 = vf_max(vf_load(x + i + 24), m3);
	}
	for (; i + 8 <= n; i += 8)
		m0 = vf_max(vf_load(x + i), m0);
	if (i < n)
		m1 = vf_max(vf_load_part(x + i, n - i, -__builtin_inff()), m1);
	return vf_hmax(vf_max(vf_max(m0, m1), vf_max(m2, m3)));
}

#endif
