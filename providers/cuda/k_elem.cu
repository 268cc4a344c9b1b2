/*
 * k_elem: elementwise kernels of the CUDA provider (cuda_kernels.h):
 * unary activations, binary arithmetic with numpy broadcasting over folded
 * shapes, and the per-channel bias add that follows a cuDNN convolution.
 */
#include <math.h>

#include "k_common.cuh"

template <typename T>
__global__ void unary_kernel(int op, float alpha, const T *x, T *y, int64_t n)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		st(y, i, unary_op(op, ld(x, i), alpha));
}

template <typename T>
__global__ void binary_kernel(int op, const T *a, const T *b, T *y, int64_t n, cuk_bcast bc)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		binary_at(op, a, b, y, i, bc);
}

__global__ void bias_kernel(float *y, const float *bias, int64_t n, int64_t C, int64_t inner)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		y[i] += bias[channel_of(i, C, inner)];
}

extern "C" cudaError_t cuk_unary(cudaStream_t s, int dtype, int op, float alpha, const void *x,
				 void *y, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		unary_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(op, alpha, (const __half *)x,
							       (__half *)y, n);
	else
		unary_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(op, alpha, (const float *)x,
							       (float *)y, n);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b,
				  void *y, int64_t n, const cuk_bcast *bc)
{
	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		binary_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(op, (const __half *)a,
								(const __half *)b, (__half *)y, n, *bc);
	else
		binary_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(op, (const float *)a,
								(const float *)b, (float *)y, n, *bc);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_bias_add(cudaStream_t s, float *y, const float *bias, int64_t outer,
				    int64_t C, int64_t inner)
{
	int64_t n = outer * C * inner;

	if (n <= 0)
		return cudaSuccess;
	bias_kernel<<<k_blocks(n), K_THREADS, 0, s>>>(y, bias, n, C, inner);
	return cudaGetLastError();
}
