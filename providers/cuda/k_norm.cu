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

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t base = row_base(r, len, inner);
		float m = -INFINITY, sum = 0.0f, lse;

		for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
			m = fmaxf(m, ld(x, base + j * inner));
		m = block_reduce(m, sh, true);
		for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
			sum += expf(ld(x, base + j * inner) - m);
		sum = block_reduce(sum, sh, false);
		lse = logf(sum);
		for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
			float v = ld(x, base + j * inner) - m;

			st(y, base + j * inner, log_ ? v - lse : expf(v) / sum);
		}
	}
}

template <typename T>
__global__ void layernorm_kernel(const T *x, const T *scale, const T *bias, T *y, float *mean,
				 float *inv_std, int64_t rows, int64_t n, int64_t sn, int64_t bn,
				 float eps)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const T *xr = x + r * n;
		T *yr = y + r * n;
		float sum = 0.0f, var = 0.0f, mu, inv;

		for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
			sum += ld(xr, j);
		mu = block_reduce(sum, sh, false) / (float)n;
		for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
			float d = ld(xr, j) - mu;

			var += d * d;
		}
		inv = 1.0f / sqrtf(block_reduce(var, sh, false) / (float)n + eps);
		for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
			float v = (ld(xr, j) - mu) * inv * ld(scale, j % sn);

			st(yr, j, bias ? v + ld(bias, j % bn) : v);
		}
		if (threadIdx.x == 0) {
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

/* Threads per row: a multiple of 32 covering short rows, 256 at most. */
static unsigned row_threads(int64_t len)
{
	int64_t t = (len + 31) / 32 * 32;

	return t > 256 ? 256u : t < 32 ? 32u : (unsigned)t;
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
