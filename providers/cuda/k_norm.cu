/*
 * k_norm: Softmax / LogSoftmax and LayerNormalization, one thread block
 * per row (rows spread over a grid-stride loop), reductions through warp
 * shuffles (k_common.cuh).  LayerNormalization takes two passes over the
 * row (mean, then the centred variance) for accuracy.  BatchNormalization
 * (inference) is elementwise, one thread per element.
 */
#include <math.h>

#include "k_common.cuh"

template <typename T>
__global__ void softmax_kernel(const T *x, T *y, int64_t rows, int64_t len, int64_t inner,
			       int log_)
{
	__shared__ float sh[32];
	int tid = threadIdx.x, nt = blockDim.x;

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t base = row_base(r, len, inner);
		float m = block_reduce(softmax_part_max(x, base, len, inner, tid, nt), sh, true);
		float sum = block_reduce(softmax_part_sum(x, base, len, inner, m, tid, nt), sh, false);

		softmax_write(x, y, base, len, inner, m, sum, log_, tid, nt);
	}
}

template <typename T>
__global__ void layernorm_kernel(const T *x, const T *scale, const T *bias, T *y, float *mean,
				 float *inv_std, int64_t rows, int64_t n, int64_t sn, int64_t bn,
				 float eps)
{
	__shared__ float sh[32];
	int tid = threadIdx.x, nt = blockDim.x;

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const T *xr = x + r * n;
		float mu = block_reduce(ln_part_sum(xr, n, tid, nt), sh, false) / (float)n;
		float var = block_reduce(ln_part_var(xr, n, mu, tid, nt), sh, false) / (float)n;
		float inv = 1.0f / sqrtf(var + eps);

		ln_write(xr, scale, bias, y + r * n, n, sn, bn, mu, inv, tid, nt);
		if (tid == 0) {
			if (mean)
				mean[r] = mu;
			if (inv_std)
				inv_std[r] = inv;
		}
	}
}

template <typename T>
__global__ void batchnorm_kernel(const T *x, const T *scale, const T *bias, const T *mean,
				 const T *var, T *y, int64_t n, int64_t C, int64_t inner, float eps)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		batchnorm_at(x, scale, bias, mean, var, y, i, C, inner, eps);
}

static unsigned row_blocks(int64_t rows)
{
	return rows > (1 << 20) ? 1u << 20 : (unsigned)rows;
}

extern "C" cudaError_t cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y,
				   int64_t outer, int64_t len, int64_t inner, int log_)
{
	int64_t rows = outer * inner;

	if (rows <= 0 || len <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		softmax_kernel<<<row_blocks(rows), row_threads(len), 0, s>>>(
			(const __half *)x, (__half *)y, rows, len, inner, log_);
	else
		softmax_kernel<<<row_blocks(rows), row_threads(len), 0, s>>>(
			(const float *)x, (float *)y, rows, len, inner, log_);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_layernorm(cudaStream_t s, int dtype, const void *x, const void *scale,
				     const void *bias, void *y, float *mean, float *inv_std,
				     int64_t rows, int64_t n, int64_t sn, int64_t bn, float eps)
{
	if (rows <= 0 || n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		layernorm_kernel<<<row_blocks(rows), row_threads(n), 0, s>>>(
			(const __half *)x, (const __half *)scale, (const __half *)bias, (__half *)y,
			mean, inv_std, rows, n, sn, bn, eps);
	else
		layernorm_kernel<<<row_blocks(rows), row_threads(n), 0, s>>>(
			(const float *)x, (const float *)scale, (const float *)bias, (float *)y,
			mean, inv_std, rows, n, sn, bn, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_batchnorm(cudaStream_t s, int dtype, const void *x, const void *scale,
				     const void *bias, const void *mean, const void *var, void *y,
				     int64_t outer, int64_t C, int64_t inner, float eps)
{
	int64_t n = outer * C * inner;

	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		batchnorm_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(
			(const __half *)x, (const __half *)scale, (const __half *)bias,
			(const __half *)mean, (const __half *)var, (__half *)y, n, C, inner, eps);
	else
		batchnorm_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(
			(const float *)x, (const float *)scale, (const float *)bias,
			(const float *)mean, (const float *)var, (float *)y, n, C, inner, eps);
	return cudaGetLastError();
}
