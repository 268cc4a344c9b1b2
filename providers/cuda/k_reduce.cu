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
	bool is_max = op == CUK_R_MAX, is_min = op == CUK_R_MIN;

	for (int64_t o = k_first() >> 5; o < r.nout; o += warps) {
		int64_t base = reduce_base(r, o);
		float acc = is_max ? -INFINITY : is_min ? INFINITY : 0.0f;

		for (int64_t e = lane; e < r.count; e += 32) {
			float v = ld(x, reduce_off(r, base, e));

			acc = is_max ? fmaxf(acc, v) : is_min ? fminf(acc, v) : acc + v;
		}
		/* Negating turns min into max for the shuffle. */
		if (is_max)
			acc = warp_max(acc);
		else if (is_min)
			acc = -warp_max(-acc);
		else
			acc = warp_sum(acc);
		if (lane == 0)
			st(y, o, op == CUK_R_MEAN ? acc / (float)r.count : acc);
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
