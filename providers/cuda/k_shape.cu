/*
 * k_shape: kernels that move elements without arithmetic (Transpose,
 * Concat, Gather).  They copy raw 2- or 4-byte words, so float16 and
 * float32 share one instantiation per width.
 */
#include "k_common.cuh"

template <typename W>
__global__ void transpose_kernel(const W *x, W *y, int64_t n, cuk_perm p)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		transpose_at(x, y, i, p);
}

template <typename W>
__global__ void concat_kernel(const W *x, W *y, int64_t n, int64_t blk, int64_t dst_blk,
			      int64_t dst_off)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		concat_at(x, y, i, blk, dst_blk, dst_off);
}

template <typename W>
__global__ void gather_kernel(const W *x, const int64_t *idx, W *y, int64_t n, int64_t nidx,
			      int64_t inner, int64_t axis_len)
{
	for (int64_t i = k_first(); i < n; i += k_stride())
		gather_at(x, idx, y, i, nidx, inner, axis_len);
}

extern "C" cudaError_t cuk_transpose(cudaStream_t s, int dtype, const void *x, void *y, int64_t n,
				     const cuk_perm *p)
{
	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		transpose_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint16_t *)x,
								   (uint16_t *)y, n, *p);
	else
		transpose_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint32_t *)x,
								   (uint32_t *)y, n, *p);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_concat_copy(cudaStream_t s, int dtype, const void *x, void *y,
				       int64_t outer, int64_t blk, int64_t dst_blk, int64_t dst_off)
{
	int64_t n = outer * blk;

	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		concat_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint16_t *)x, (uint16_t *)y,
								n, blk, dst_blk, dst_off);
	else
		concat_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint32_t *)x, (uint32_t *)y,
								n, blk, dst_blk, dst_off);
	return cudaGetLastError();
}

extern "C" cudaError_t cuk_gather(cudaStream_t s, int dtype, const void *x, const int64_t *idx,
				  void *y, int64_t outer, int64_t nidx, int64_t inner,
				  int64_t axis_len)
{
	int64_t n = outer * nidx * inner;

	if (n <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		gather_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint16_t *)x, idx,
								(uint16_t *)y, n, nidx, inner, axis_len);
	else
		gather_kernel<<<k_blocks(n), K_THREADS, 0, s>>>((const uint32_t *)x, idx,
								(uint32_t *)y, n, nidx, inner, axis_len);
	return cudaGetLastError();
}
