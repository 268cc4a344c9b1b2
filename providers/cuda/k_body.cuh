/*
 * k_body: the per-element arithmetic and index math of the kernels, as
 * __host__ __device__ functions.  The k_*.cu kernels are loops over these;
 * tests/cuda/emu (a host emulation of the CUDA runtime used to test the
 * provider without a GPU) runs the same functions on the CPU, so their
 * index math is exercised by the model tests there.
 */
#ifndef ORTMK_K_BODY_CUH
#define ORTMK_K_BODY_CUH

#include <math.h>
#include <stdint.h>

#include <cuda_fp16.h>

#include "cuda_kernels.h"

#define K_HD __host__ __device__ __forceinline__

K_HD float ld(const float *p, int64_t i) { return p[i]; }
K_HD float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
K_HD void st(float *p, int64_t i, float v) { p[i] = v; }
K_HD void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }

K_HD float unary_op(int op, float x, float alpha)
{
	switch (op) {
	case CUK_U_RELU: return x > 0.0f ? x : 0.0f;
	case CUK_U_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case CUK_U_TANH: return tanhf(x);
	case CUK_U_SQRT: return sqrtf(x);
	case CUK_U_ERF: return erff(x);
	case CUK_U_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
	case CUK_U_GELU_TANH:
		return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
	case CUK_U_ABS: return fabsf(x);
	case CUK_U_NEG: return -x;
	default: return x >= 0.0f ? x : alpha * x;    /* LeakyRelu */
	}
}

K_HD float binary_op(int op, float a, float b)
{
	switch (op) {
	case CUK_B_ADD: return a + b;
	case CUK_B_SUB: return a - b;
	case CUK_B_MUL: return a * b;
	case CUK_B_DIV: return a / b;
	case CUK_B_POW: return powf(a, b);
	default: return a;
	}
}

/* Element i of a broadcast output: its index in a and b from the folded
 * dims, innermost dim last. */
template <typename T>
K_HD void binary_at(int op, const T *a, const T *b, T *y, int64_t i, const cuk_bcast &bc)
{
	int64_t rem = i, ia = 0, ib = 0;

	for (int d = bc.rank - 1; d >= 0; d--) {
		int64_t k = rem % bc.dims[d];

		rem /= bc.dims[d];
		ia += k * bc.sa[d];
		ib += k * bc.sb[d];
	}
	st(y, i, binary_op(op, ld(a, ia), op == CUK_B_FIRST ? 0.0f : ld(b, ib)));
}

/* X [outer, C, inner]: the channel of element i. */
K_HD int64_t channel_of(int64_t i, int64_t C, int64_t inner)
{
	return (i / inner) % C;
}

template <typename T>
K_HD void batchnorm_at(const T *x, const T *scale, const T *bias, const T *mean, const T *var,
		       T *y, int64_t i, int64_t C, int64_t inner, float eps)
{
	int64_t c = channel_of(i, C, inner);
	float v = (ld(x, i) - ld(mean, c)) / sqrtf(ld(var, c) + eps);

	st(y, i, v * ld(scale, c) + ld(bias, c));
}

/* Taps [a, b) of a window starting at s (stride d, k taps) that land in
 * [lo, hi). */
K_HD void taps(int64_t s, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *a, int64_t *b)
{
	int64_t x = s >= lo ? 0 : (lo - s + d - 1) / d;
	int64_t y = s >= hi ? 0 : (hi - s + d - 1) / d;

	x = x < k ? x : k;
	y = y < k ? y : k;
	*a = x;
	*b = y > x ? y : x;
}

/* Output element i of MaxPool (is_max) or AveragePool. */
template <typename T>
K_HD void pool_at(const T *x, T *y, int64_t i, const cuk_window &w, int is_max, int cip)
{
	int64_t o[3], sp[3], a[3], b[3], cnt = 1, rem = i;
	const T *xp;
	float best = -INFINITY, sum = 0.0f;

	for (int j = 2; j >= 0; j--) {
		o[j] = rem % w.out[j];
		rem /= w.out[j];
	}
	xp = x + rem * w.in[0] * w.in[1] * w.in[2];
	for (int j = 0; j < 3; j++) {
		sp[j] = o[j] * w.s[j] - w.pb[j];
		taps(sp[j], w.k[j], w.d[j], 0, w.in[j], &a[j], &b[j]);
		if (cip && !is_max) {
			int64_t pa, pz;

			taps(sp[j], w.k[j], w.d[j], -w.pb[j], w.in[j] + w.pe[j], &pa, &pz);
			cnt *= pz - pa;
		} else {
			cnt *= b[j] - a[j];
		}
	}
	for (int64_t kd = a[0]; kd < b[0]; kd++)
		for (int64_t kh = a[1]; kh < b[1]; kh++)
			for (int64_t kw = a[2]; kw < b[2]; kw++) {
				int64_t id = sp[0] + kd * w.d[0], ih = sp[1] + kh * w.d[1];
				int64_t iw = sp[2] + kw * w.d[2];
				float v = ld(xp, (id * w.in[1] + ih) * w.in[2] + iw);

				sum += v;
				best = fmaxf(best, v);
			}
	st(y, i, is_max ? best : (cnt > 0 ? sum / (float)cnt : 0.0f));
}

/* Convolution geometry of the implicit GEMM (k_nn.cu). */
typedef struct conv_geo {
	int64_t N, G, Cig, Cog, K, O, kvol;
	cuk_window w;
} conv_geo;

/* Element (k, p) of the im2col matrix of one image and group (xg: its
 * first input channel): k = (ci, kd, kh, kw), p an output position; 0 in
 * the padding. */
K_HD float im2col(const float *xg, const conv_geo &g, int64_t k, int64_t p)
{
	const cuk_window &w = g.w;
	int64_t ci = k / g.kvol, r = k % g.kvol;
	int64_t kw = r % w.k[2], kh = (r / w.k[2]) % w.k[1], kd = r / (w.k[2] * w.k[1]);
	int64_t ow = p % w.out[2], oh = (p / w.out[2]) % w.out[1], od = p / (w.out[2] * w.out[1]);
	int64_t id = od * w.s[0] - w.pb[0] + kd * w.d[0];
	int64_t ih = oh * w.s[1] - w.pb[1] + kh * w.d[1];
	int64_t iw = ow * w.s[2] - w.pb[2] + kw * w.d[2];

	if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1] || iw < 0 || iw >= w.in[2])
		return 0.0f;
	return xg[((ci * w.in[0] + id) * w.in[1] + ih) * w.in[2] + iw];
}

/* Where output channel m (of group grp), position p of image n goes. */
K_HD int64_t conv_out_index(const conv_geo &g, int64_t n, int64_t grp, int64_t m, int64_t p)
{
	return ((n * g.G + grp) * g.Cog + m) * g.O + p;
}

/* The tiled implicit GEMM of Conv (k_nn.cu), by phase, for thread tid of
 * a block of CT_THREADS that computes Y[m0 .. m0+63, p0 .. p0+63] of one
 * image and group: each thread owns a 4x4 block of it (rows tm*4.., columns
 * tn*4..).  Between the phases the block synchronises. */
#define CT_M 64
#define CT_N 64
#define CT_K 16
#define CT_THREADS 256

/* Loads the thread's share of the 16-deep slices k0.. of W (As[k][m]) and
 * of the im2col matrix (Bs[k][p]); zeros outside.  W is [m][k], k
 * contiguous, so consecutive threads read consecutive k of a row. */
K_HD void conv_load(int tid, const float *wg, const float *xg, const conv_geo &g, int64_t m0,
		    int64_t p0, int64_t k0, float (*As)[CT_M], float (*Bs)[CT_N])
{
	for (int e = tid; e < CT_K * CT_M; e += CT_THREADS) {
		int kk = e % CT_K, mm = e / CT_K;
		int64_t m = m0 + mm, k = k0 + kk;

		As[kk][mm] = m < g.Cog && k < g.K ? wg[m * g.K + k] : 0.0f;
	}
	for (int e = tid; e < CT_K * CT_N; e += CT_THREADS) {
		int kk = e / CT_N, nn = e % CT_N;
		int64_t p = p0 + nn, k = k0 + kk;

		Bs[kk][nn] = p < g.O && k < g.K ? im2col(xg, g, k, p) : 0.0f;
	}
}

/* Accumulates the slice into the thread's 4x4 block. */
K_HD void conv_fma(int tid, const float (*As)[CT_M], const float (*Bs)[CT_N], float acc[4][4])
{
	int tm = tid / 16, tn = tid % 16;

	for (int kk = 0; kk < CT_K; kk++) {
		float a[4], b[4];

		for (int i = 0; i < 4; i++) {
			a[i] = As[kk][tm * 4 + i];
			b[i] = Bs[kk][tn * 4 + i];
		}
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 4; j++)
				acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
	}
}

/* Writes the thread's 4x4 block (what lies inside Y) plus the bias. */
K_HD void conv_store(int tid, const conv_geo &g, int64_t n, int64_t grp, int64_t m0, int64_t p0,
		     const float acc[4][4], const float *bias, float *y)
{
	int tm = tid / 16, tn = tid % 16;

	for (int i = 0; i < 4; i++) {
		int64_t m = m0 + tm * 4 + i;

		if (m >= g.Cog)
			continue;
		for (int j = 0; j < 4; j++) {
			int64_t p = p0 + tn * 4 + j;

			if (p < g.O)
				y[conv_out_index(g, n, grp, m, p)] =
					acc[i][j] + (bias ? bias[grp * g.Cog + m] : 0.0f);
		}
	}
}

/* Reduction: the input offset of output o's first element, and of its
 * e-th reduced element. */
K_HD int64_t reduce_base(const cuk_reduce &r, int64_t o)
{
	int64_t base = 0;

	for (int d = r.nk - 1; d >= 0; d--) {
		base += (o % r.kdims[d]) * r.kstr[d];
		o /= r.kdims[d];
	}
	return base;
}

K_HD int64_t reduce_off(const cuk_reduce &r, int64_t base, int64_t e)
{
	for (int d = r.nr - 1; d >= 0; d--) {
		base += (e % r.rdims[d]) * r.rstr[d];
		e /= r.rdims[d];
	}
	return base;
}

/* Softmax row r (of outer * inner rows of len): its first element; the
 * row's elements are inner apart. */
K_HD int64_t row_base(int64_t r, int64_t len, int64_t inner)
{
	return (r / inner) * len * inner + r % inner;
}

/* Row kernels (softmax, layernorm): a block of row_threads(len) threads
 * per row; thread tid of nt takes elements tid, tid + nt, ...  The
 * partial results of the threads are combined by the block (a max or a
 * sum), then each thread writes its elements. */
K_HD unsigned row_threads(int64_t len)
{
	int64_t t = (len + 31) / 32 * 32;

	return t > 256 ? 256u : t < 32 ? 32u : (unsigned)t;
}

template <typename T>
K_HD float softmax_part_max(const T *x, int64_t base, int64_t len, int64_t inner, int tid, int nt)
{
	float m = -INFINITY;

	for (int64_t j = tid; j < len; j += nt)
		m = fmaxf(m, ld(x, base + j * inner));
	return m;
}

template <typename T>
K_HD float softmax_part_sum(const T *x, int64_t base, int64_t len, int64_t inner, float m,
			    int tid, int nt)
{
	float sum = 0.0f;

	for (int64_t j = tid; j < len; j += nt)
		sum += expf(ld(x, base + j * inner) - m);
	return sum;
}

template <typename T>
K_HD void softmax_write(const T *x, T *y, int64_t base, int64_t len, int64_t inner, float m,
			float sum, int log_, int tid, int nt)
{
	float lse = logf(sum);

	for (int64_t j = tid; j < len; j += nt) {
		float v = ld(x, base + j * inner) - m;

		st(y, base + j * inner, log_ ? v - lse : expf(v) / sum);
	}
}

template <typename T>
K_HD float ln_part_sum(const T *xr, int64_t n, int tid, int nt)
{
	float sum = 0.0f;

	for (int64_t j = tid; j < n; j += nt)
		sum += ld(xr, j);
	return sum;
}

template <typename T>
K_HD float ln_part_var(const T *xr, int64_t n, float mu, int tid, int nt)
{
	float var = 0.0f;

	for (int64_t j = tid; j < n; j += nt) {
		float d = ld(xr, j) - mu;

		var += d * d;
	}
	return var;
}

template <typename T>
K_HD void ln_write(const T *xr, const T *scale, const T *bias, T *yr, int64_t n, int64_t sn,
		   int64_t bn, float mu, float inv, int tid, int nt)
{
	for (int64_t j = tid; j < n; j += nt) {
		float v = (ld(xr, j) - mu) * inv * ld(scale, j % sn);

		st(yr, j, bias ? v + ld(bias, j % bn) : v);
	}
}

/* Reductions: a warp per output; lane takes reduced elements lane,
 * lane + 32, ...; the warp combines the 32 partials with reduce_combine,
 * and lane 0 stores reduce_final. */
template <typename T>
K_HD float reduce_part(const T *x, const cuk_reduce &r, int64_t base, int op, int lane)
{
	float acc = op == CUK_R_MAX ? -INFINITY : op == CUK_R_MIN ? INFINITY : 0.0f;

	for (int64_t e = lane; e < r.count; e += 32) {
		float v = ld(x, reduce_off(r, base, e));

		acc = op == CUK_R_MAX ? fmaxf(acc, v) : op == CUK_R_MIN ? fminf(acc, v) : acc + v;
	}
	return acc;
}

K_HD float reduce_combine(int op, float a, float b)
{
	return op == CUK_R_MAX ? fmaxf(a, b) : op == CUK_R_MIN ? fminf(a, b) : a + b;
}

K_HD float reduce_final(int op, float acc, int64_t count)
{
	return op == CUK_R_MEAN ? acc / (float)count : acc;
}

template <typename W>
K_HD void transpose_at(const W *x, W *y, int64_t i, const cuk_perm &p)
{
	int64_t rem = i, src = 0;

	for (int d = p.rank - 1; d >= 0; d--) {
		src += (rem % p.dims[d]) * p.istr[d];
		rem /= p.dims[d];
	}
	y[i] = x[src];
}

template <typename W>
K_HD void concat_at(const W *x, W *y, int64_t i, int64_t blk, int64_t dst_blk, int64_t dst_off)
{
	y[(i / blk) * dst_blk + dst_off + i % blk] = x[i];
}

template <typename W>
K_HD void gather_at(const W *x, const int64_t *idx, W *y, int64_t i, int64_t nidx, int64_t inner,
		    int64_t axis_len)
{
	int64_t j = i % inner, t = i / inner;

	y[i] = x[((t / nidx) * axis_len + idx[t % nidx]) * inner + j];
}

#endif
