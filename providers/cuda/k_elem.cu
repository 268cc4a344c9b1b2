/*
 * k_elem: elementwise kernels of the CUDA provider (cuda_kernels.h):
 * unary activations, binary arithmetic with numpy broadcasting over folded
 * shapes, and the per-channel bias add that follows a cuDNN convolution.
 */
#include <math.h>

#include "k_common.cuh"

__device__ __forceinline__ float unary_op(int op, float x, float alpha)
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

template <typename T>
__global__ void unary_kernel(int op, float alpha, const T *x, T *y, int64_t n)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		st(y, i, unary_op(op, ld(x, i), alpha));
}

__device__ __forceinline__ float binary_op(int op, float a, float b)
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

/* Element i of the output: its index in a and b from the folded dims,
 * innermost dim last. */
template <typename T>
__global__ void binary_kernel(int op, const T *a, const T *b, T *y, int64_t n, cuk_bcast bc)
{
	for (int64_t i = k_first(); i < n; i += k_stride()) {
		int64_t rem = i, ia = 0, ib = 0;

		for (int d = bc.rank - 1; d >= 0; d--) {
			int64_t k = rem % bc.dims[d];

			rem /= bc.dims[d];
			ia += k * bc.sa[d];
			ib += k * bc.sb[d];
		}
		st(y, i, binary_op(op, ld(a, ia), op == CUK_B_FIRST ? 0.0f : ld(b, ib)));
	}
}

__global__ void bias_kernel(float *y, const float *bias, int64_t n, int64_t C, int64_t inner)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		y[i] += bias[(i / inner) % C];
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
