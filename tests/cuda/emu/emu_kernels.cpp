/*
 * emu_kernels: the launchers of cuda_kernels.h run on the host, for the
 * emulated provider (tests/cuda/emu).  The per-element arithmetic and index
 * math are the kernels' own (providers/cuda/k_body.cuh); what differs is
 * only the loop around them: sequential here, grid-stride / tiled /
 * warp-cooperative on the GPU.  So the emulation checks the indexing,
 * broadcasting, window and reduction geometry of the kernels and
 * everything on the host side, not the GPU-specific parts (tiling, shared
 * memory, shuffles).
 */
#include <math.h>
#include <string.h>

#include "emu.h"
#include "k_body.cuh"

template <typename T>
static void unary(int op, float alpha, const T *x, T *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		st(y, i, unary_op(op, ld(x, i), alpha));
}

template <typename T>
static void binary(int op, const T *a, const T *b, T *y, int64_t n, const cuk_bcast &bc)
{
	for (int64_t i = 0; i < n; i++)
		binary_at(op, a, b, y, i, bc);
}

/* The row kernels: every thread's partial result, combined as the block
 * does, then every thread's writes. */
template <typename T>
static void softmax(const T *x, T *y, int64_t rows, int64_t len, int64_t inner, int log_)
{
	int nt = (int)row_threads(len);

	for (int64_t r = 0; r < rows; r++) {
		int64_t base = row_base(r, len, inner);
		float m = -INFINITY, sum = 0.0f;

		for (int t = 0; t < nt; t++)
			m = fmaxf(m, softmax_part_max(x, base, len, inner, t, nt));
		for (int t = 0; t < nt; t++)
			sum += softmax_part_sum(x, base, len, inner, m, t, nt);
		for (int t = 0; t < nt; t++)
			softmax_write(x, y, base, len, inner, m, sum, log_, t, nt);
	}
}

template <typename T>
static void layernorm(const T *x, const T *scale, const T *bias, T *y, float *mean, float *inv_std,
		      int64_t rows, int64_t n, int64_t sn, int64_t bn, float eps)
{
	int nt = (int)row_threads(n);

	for (int64_t r = 0; r < rows; r++) {
		const T *xr = x + r * n;
		float sum = 0.0f, var = 0.0f, mu, inv;

		for (int t = 0; t < nt; t++)
			sum += ln_part_sum(xr, n, t, nt);
		mu = sum / (float)n;
		for (int t = 0; t < nt; t++)
			var += ln_part_var(xr, n, mu, t, nt);
		inv = 1.0f / sqrtf(var / (float)n + eps);
		for (int t = 0; t < nt; t++)
			ln_write(xr, scale, bias, y + r * n, n, sn, bn, mu, inv, t, nt);
		if (mean)
			mean[r] = mu;
		if (inv_std)
			inv_std[r] = inv;
	}
}

/* A warp per output: the 32 lanes' partials, combined. */
template <typename T>
static void reduce(int op, const T *x, T *y, const cuk_reduce &r)
{
	for (int64_t o = 0; o < r.nout; o++) {
		int64_t base = reduce_base(r, o);
		float acc = reduce_part(x, r, base, op, 0);

		for (int lane = 1; lane < 32; lane++)
			acc = reduce_combine(op, acc, reduce_part(x, r, base, op, lane));
		st(y, o, reduce_final(op, acc, r.count));
	}
}

extern "C" {

cudaError_t cuk_unary(cudaStream_t s, int dtype, int op, float alpha, const void *x, void *y,
		      int64_t n)
{
	emu_enqueue(s, [=] {
		if (dtype == CUK_F16)
			unary(op, alpha, (const __half *)x, (__half *)y, n);
		else
			unary(op, alpha, (const float *)x, (float *)y, n);
	});
	return cudaSuccess;
}

cudaError_t cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b, void *y,
		       int64_t n, const cuk_bcast *bcp)
{
	cuk_bcast bc = *bcp;

	emu_enqueue(s, [=] {
		if (dtype == CUK_F16)
			binary(op, (const __half *)a, (const __half *)b, (__half *)y, n, bc);
		else
			binary(op, (const float *)a, (const float *)b, (float *)y, n, bc);
	});
	return cudaSuccess;
}

cudaError_t cuk_bias_add(cudaStream_t s, float *y, const float *bias, int64_t outer, int64_t C,
			 int64_t inner)
{
	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < outer * C * inner; i++)
			y[i] += bias[channel_of(i, C, inner)];
	});
	return cudaSuccess;
}

cudaError_t cuk_batchnorm(cudaStream_t s, int dtype, const void *x, const void *scale,
			  const void *bias, const void *mean, const void *var, void *y,
			  int64_t outer, int64_t C, int64_t inner, float eps)
{
	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < outer * C * inner; i++) {
			if (dtype == CUK_F16)
				batchnorm_at((const __half *)x, (const __half *)scale,
					     (const __half *)bias, (const __half *)mean,
					     (const __half *)var, (__half *)y, i, C, inner, eps);
			else
				batchnorm_at((const float *)x, (const float *)scale,
					     (const float *)bias, (const float *)mean,
					     (const float *)var, (float *)y, i, C, inner, eps);
		}
	});
	return cudaSuccess;
}

cudaError_t cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer,
			int64_t len, int64_t inner, int log_)
{
	emu_enqueue(s, [=] {
		if (dtype == CUK_F16)
			softmax((const __half *)x, (__half *)y, outer * inner, len, inner, log_);
		else
			softmax((const float *)x, (float *)y, outer * inner, len, inner, log_);
	});
	return cudaSuccess;
}

cudaError_t cuk_layernorm(cudaStream_t s, int dtype, const void *x, const void *scale,
			  const void *bias, void *y, float *mean, float *inv_std, int64_t rows,
			  int64_t n, int64_t sn, int64_t bn, float eps)
{
	if (rows <= 0 || n <= 0)
		return cudaSuccess;
	emu_enqueue(s, [=] {
		if (dtype == CUK_F16)
			layernorm((const __half *)x, (const __half *)scale, (const __half *)bias,
				  (__half *)y, mean, inv_std, rows, n, sn, bn, eps);
		else
			layernorm((const float *)x, (const float *)scale, (const float *)bias,
				  (float *)y, mean, inv_std, rows, n, sn, bn, eps);
	});
	return cudaSuccess;
}

cudaError_t cuk_pool(cudaStream_t s, int dtype, const void *x, void *y, int64_t planes,
		     const cuk_window *wp, int is_max, int cip)
{
	cuk_window w = *wp;
	int64_t n = planes * w.out[0] * w.out[1] * w.out[2];

	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < n; i++) {
			if (dtype == CUK_F16)
				pool_at((const __half *)x, (__half *)y, i, w, is_max, cip);
			else
				pool_at((const float *)x, (float *)y, i, w, is_max, cip);
		}
	});
	return cudaSuccess;
}

/* The tiled kernel's phases (k_body.cuh) for every block and thread of its
 * grid, one phase for all threads before the next (the barriers). */
static void conv(const float *x, const float *w, const float *bias, float *y, conv_geo g)
{
	static thread_local float acc[CT_THREADS][4][4];
	float As[CT_K][CT_M], Bs[CT_K][CT_N];
	int64_t plane = g.w.in[0] * g.w.in[1] * g.w.in[2];
	int64_t tiles_p = (g.O + CT_N - 1) / CT_N, tiles_m = (g.Cog + CT_M - 1) / CT_M;

	for (int64_t z = 0; z < g.N * g.G; z++) {
		int64_t n = z / g.G, grp = z % g.G;
		const float *xg = x + (n * g.G + grp) * g.Cig * plane;
		const float *wg = w + grp * g.Cog * g.K;

		for (int64_t by = 0; by < tiles_m; by++)
			for (int64_t bx = 0; bx < tiles_p; bx++) {
				int64_t m0 = by * CT_M, p0 = bx * CT_N;

				memset(acc, 0, sizeof(acc));
				for (int64_t k0 = 0; k0 < g.K; k0 += CT_K) {
					for (int t = 0; t < CT_THREADS; t++)
						conv_load(t, wg, xg, g, m0, p0, k0, As, Bs);
					for (int t = 0; t < CT_THREADS; t++)
						conv_fma(t, As, Bs, acc[t]);
				}
				for (int t = 0; t < CT_THREADS; t++)
					conv_store(t, g, n, grp, m0, p0, acc[t], bias, y);
			}
	}
}

cudaError_t cuk_conv(cudaStream_t s, const float *x, const float *w, const float *bias, float *y,
		     int64_t N, int64_t G, int64_t Cig, int64_t Cog, const cuk_window *win)
{
	conv_geo g = {N, G, Cig, Cog, 0, 0, 0, *win};

	g.kvol = win->k[0] * win->k[1] * win->k[2];
	g.K = Cig * g.kvol;
	g.O = win->out[0] * win->out[1] * win->out[2];
	emu_enqueue(s, [=] { conv(x, w, bias, y, g); });
	return cudaSuccess;
}

cudaError_t cuk_reduce_run(cudaStream_t s, int dtype, int op, const void *x, void *y,
			   const cuk_reduce *rp)
{
	cuk_reduce r = *rp;

	emu_enqueue(s, [=] {
		if (dtype == CUK_F16)
			reduce(op, (const __half *)x, (__half *)y, r);
		else
			reduce(op, (const float *)x, (float *)y, r);
	});
	return cudaSuccess;
}

cudaError_t cuk_transpose(cudaStream_t s, int dtype, const void *x, void *y, int64_t n,
			  const cuk_perm *pp)
{
	cuk_perm p = *pp;

	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < n; i++) {
			if (dtype == CUK_F16)
				transpose_at((const uint16_t *)x, (uint16_t *)y, i, p);
			else
				transpose_at((const uint32_t *)x, (uint32_t *)y, i, p);
		}
	});
	return cudaSuccess;
}

cudaError_t cuk_concat_copy(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer,
			    int64_t blk, int64_t dst_blk, int64_t dst_off)
{
	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < outer * blk; i++) {
			if (dtype == CUK_F16)
				concat_at((const uint16_t *)x, (uint16_t *)y, i, blk, dst_blk, dst_off);
			else
				concat_at((const uint32_t *)x, (uint32_t *)y, i, blk, dst_blk, dst_off);
		}
	});
	return cudaSuccess;
}

cudaError_t cuk_gather(cudaStream_t s, int dtype, const void *x, const int64_t *idx, void *y,
		       int64_t outer, int64_t nidx, int64_t inner, int64_t axis_len)
{
	emu_enqueue(s, [=] {
		for (int64_t i = 0; i < outer * nidx * inner; i++) {
			if (dtype == CUK_F16)
				gather_at((const uint16_t *)x, idx, (uint16_t *)y, i, nidx, inner,
					  axis_len);
			else
				gather_at((const uint32_t *)x, idx, (uint32_t *)y, i, nidx, inner,
					  axis_len);
		}
	});
	return cudaSuccess;
}

} /* extern "C" */
