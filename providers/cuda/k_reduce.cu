/*
 * k_reduce: ReduceSum/Mean/Max/Min (and GlobalAveragePool/GlobalMaxPool)
 * over folded dims: one warp per output element, its 32 lanes striding over
 * the reduced elements, combined with shuffles.
 */
#include <math.h>

#include "k_common.cuh"

template <typename T>
__global__ void reduce_kernel(int op, const T *x, T *y, cuk_reduce r)
{
	int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
	int lane = threadIdx.x & 31;

	for (int64_t o = k_first() >> 5; o < r.nout; o += warps) {
		float acc = reduce_part(x, r, reduce_base(r, o), op, lane);

		/* Negating turns min into max for the shuffle. */
		if (op == CUK_R_MAX)
			acc = warp_max(acc);
		else if (op == CUK_R_MIN)
			acc = -warp_max(-acc);
		else
			acc = warp_sum(acc);
		if (lane == 0)
			st(y, o, reduce_final(op, acc, r.count));
	}
}

extern "C" cudaError_t cuk_reduce_run(cudaStream_t s, int dtype, int op, const void *x, void *y,
				      const cuk_reduce *r)
{
	if (r->nout <= 0)
		return cudaSuccess;
	if (dtype == CUK_F16)
		reduce_kernel<<<k_blocks(r->nout * 32), K_THREADS, 0, s>>>(op, (const __half *)x,
									   (__half *)y, *r);
	else
		reduce_kernel<<<k_blocks(r->nout * 32), K_THREADS, 0, s>>>(op, (const float *)x,
									   (float *)y, *r);
	return cudaGetLastError();
}
