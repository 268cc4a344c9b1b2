/*
 * k_common: what every k_*.cu kernel file shares: the per-element bodies
 * (k_body.cuh: float32/float16 loads and stores, float16 computed in
 * float32, index math), grid sizing for grid-stride loops, and warp/block
 * reductions.
 */
#ifndef ORTMK_K_COMMON_CUH
#define ORTMK_K_COMMON_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_kernels.h"
#include "k_body.cuh"

#define K_THREADS 256

/* Blocks for a grid-stride loop over n items, K_THREADS per block; capped
 * (the loop covers the rest) and never 0. */
static inline unsigned k_blocks(int64_t n)
{
	int64_t b = (n + K_THREADS - 1) / K_THREADS;

	if (b > (1 << 20))
		b = 1 << 20;
	return b < 1 ? 1u : (unsigned)b;
}

/* Grid-stride index: first item of this thread, and the stride. */
__device__ __forceinline__ int64_t k_first(void)
{
	return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t k_stride(void)
{
	return (int64_t)gridDim.x * blockDim.x;
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum (or max) over the block; every thread gets the result.  blockDim.x
 * is a multiple of 32, at most 1024; `sh` holds 32 floats.  Ends with a
 * barrier so `sh` can be reused. */
__device__ __forceinline__ float block_reduce(float v, float *sh, bool is_max)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	v = is_max ? warp_max(v) : warp_sum(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : (is_max ? -INFINITY : 0.0f);
	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads();
	return v;
}

#endif
