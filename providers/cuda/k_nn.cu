/*
 * k_nn: windowed kernels.  MaxPool/AveragePool: one thread per output
 * element over 1 to 3 spatial dims (slots D, H, W), the window clipped to
 * the input once.  Conv: an implicit GEMM (the im2col matrix gathered into
 * shared memory tile by tile), the fallback when cuDNN is absent or
 * refuses (asymmetric pads).
 */
#include <math.h>

#include "k_common.cuh"

template <typename T>
__global__ void pool_kernel(const T *x, T *y, int64_t n, cuk_window w, int is_max, int cip)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		pool_at(x, y, i, w, is_max, cip);
}

/* ---- Conv as an implicit GEMM ------------------------------------------
 * Per (batch n, group g): Y[m, p] = sum_k W[m, k] * X'[k, p] with m an
 * output channel of the group, p an output position, k = (ci, kd, kh, kw)
 * and X' the im2col matrix (0 in the padding).  A block computes a 64x64
 * tile of Y with 256 threads, 4x4 each, from 16-deep slices of W and X'
 * staged in shared memory.  grid: x = position tiles, y = channel tiles,
 * z = n * G (strided when more than 65535). */
__global__ void __launch_bounds__(CT_THREADS) conv_kernel(const float *x, const float *wt,
							  const float *bias, float *y, conv_geo g)
{
	__shared__ float As[CT_K][CT_M];
	__shared__ float Bs[CT_K][CT_N];
	int tid = threadIdx.x;
	int64_t m0 = (int64_t)blockIdx.y * CT_M, p0 = (int64_t)blockIdx.x * CT_N;
	int64_t plane = g.w.in[0] * g.w.in[1] * g.w.in[2];

	for (int64_t z = blockIdx.z; z < g.N * g.G; z += gridDim.z) {
		int64_t n = z / g.G, grp = z % g.G;
		const float *xg = x + (n * g.G + grp) * g.Cig * plane;
		const float *wg = wt + grp * g.Cog * g.K;
		float acc[4][4] = {{0.0f}};

		for (int64_t k0 = 0; k0 < g.K; k0 += CT_K) {
			conv_load(tid, wg, xg, g, m0, p0, k0, As, Bs);
			__syncthreads();
			conv_fma(tid, As, Bs, acc);
			__syncthreads();
		}
		conv_store(tid, g, n, grp, m0, p0, acc, bias, y);
	}
}

extern "C" cudaError_t cuk_pool(cudaStream_t s, int dtype, const void *x, void *y, int64_t planes,
				const cuk_window *w, int is_max, int count_include_pad)
{
	int64_t n = planes * w->out[0] * w->out[1] * w->out[2];

	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		pool_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const __half *)x, (__half *)y, n, *w,
							      is_max, count_include_pad);
	else
		pool_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const float *)x, (float *)y, n, *w,
							      is_max, count_include_pad);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_conv(cudaStream_t s, const float *x, const float *w, const float *bias,
				float *y, int64_t N, int64_t G, int64_t Cig, int64_t Cog,
				const cuk_window *win)
{
	conv_geo g = {N, G, Cig, Cog, 0, 0, 0, *win};
	int64_t tiles_p, tiles_m, z;

	g.kvol = win->k[0] * win->k[1] * win->k[2];
	g.K = Cig * g.kvol;
	g.O = win->out[0] * win->out[1] * win->out[2];
	tiles_p = (g.O + CT_N - 1) / CT_N;
	tiles_m = (Cog + CT_M - 1) / CT_M;
	z = N * G < 65535 ? N * G : 65535;
	if (g.O <= 0 || Cog <= 0 || z <= 0)
		return cudaSuccess;
	if (tiles_p > 0x7fffffff || tiles_m > 65535)
		return cudaErrorInvalidConfiguration;
	conv_kernel<<<dim3((unsigned)tiles_p, (unsigned)tiles_m, (unsigned)z), CT_THREADS, 0, s>>>(
		x, w, bias, y, g);
	return cudaGetLastError();
}
