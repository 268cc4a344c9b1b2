/*
 * cuda_kernels: the launchers of the CUDA provider's own kernels (the
 * k_*.cu files, compiled by nvcc), callable from its C11 host code
 * (cuda_ops_*.c).  Each launcher checks nothing the op has not already
 * checked: it computes a grid, enqueues on `s` and returns
 * cudaGetLastError() (a launch error, not an execution error: those show
 * at the run's synchronisation).
 *
 * Tensors are dense and row-major; `dtype` is the ONNX code of the element
 * type, CUK_F32 or CUK_F16 (float16 is computed in float32 and rounded to
 * nearest even on store).  Element counts and indices are 64-bit.
 */
#ifndef ORTMK_CUDA_KERNELS_H
#define ORTMK_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CUK_F32 = 1, CUK_F16 = 10 };

/* Folded rank limits (shapes are folded on the host first). */
#define CUK_MAX_DIMS 8

/* ---- elementwise (k_elem.cu) ---------------------------------------- */

enum cuk_unary {
	CUK_U_RELU, CUK_U_SIGMOID, CUK_U_TANH, CUK_U_SQRT, CUK_U_ERF, CUK_U_GELU,
	CUK_U_GELU_TANH, CUK_U_ABS, CUK_U_NEG, CUK_U_LEAKY_RELU,
};
enum cuk_binary { CUK_B_ADD, CUK_B_SUB, CUK_B_MUL, CUK_B_DIV, CUK_B_POW, CUK_B_FIRST };

/* Output dims (folded) and the element strides of a and b per dim (0
 * where that input broadcasts). */
typedef struct cuk_bcast {
	int rank;
	int64_t dims[CUK_MAX_DIMS], sa[CUK_MAX_DIMS], sb[CUK_MAX_DIMS];
} cuk_bcast;

cudaError_t cuk_unary(cudaStream_t s, int dtype, int op, float alpha, const void *x, void *y,
		      int64_t n);
/* y[i] = a[..] op b[..] over the n elements of the broadcast; CUK_B_FIRST
 * copies a broadcast (b is not read). */
cudaError_t cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b, void *y,
		       int64_t n, const cuk_bcast *bc);
/* Float32 y[(o * C + c) * inner + i] += bias[c] (Conv's B after cuDNN). */
cudaError_t cuk_bias_add(cudaStream_t s, float *y, const float *bias, int64_t outer, int64_t C,
			 int64_t inner);

/* ---- normalisation (k_norm.cu) ------------------------------------- */

/* rows = outer * inner rows of `len` elements each, element j of row
 * (o, i) at (o * len + j) * inner + i. */
cudaError_t cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer,
			int64_t len, int64_t inner, int log_);
/* Rows of n elements; scale/bias element j % sn (bias NULL: none); mean
 * and inv_std (float32, may be NULL) get one value per row. */
cudaError_t cuk_layernorm(cudaStream_t s, int dtype, const void *x, const void *scale,
			  const void *bias, void *y, float *mean, float *inv_std, int64_t rows,
			  int64_t n, int64_t sn, int64_t bn, float eps);

/* BatchNormalization (inference): X [outer, C, inner]; the four parameter
 * vectors have C elements of X's dtype. */
cudaError_t cuk_batchnorm(cudaStream_t s, int dtype, const void *x, const void *scale,
			  const void *bias, const void *mean, const void *var, void *y,
			  int64_t outer, int64_t C, int64_t inner, float eps);

/* ---- windows (k_nn.cu) ---------------------------------------------- */

/* Slots 0..2 are D, H, W; unused leading slots have size 1. */
typedef struct cuk_window {
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} cuk_window;

/* MaxPool (is_max) or AveragePool over planes = N * C planes. */
cudaError_t cuk_pool(cudaStream_t s, int dtype, const void *x, void *y, int64_t planes,
		     const cuk_window *w, int is_max, int count_include_pad);
/* Float32 convolution as an implicit GEMM: X [N, G*Cig, in...],
 * W [G*Cog, Cig, k...], bias [G*Cog] or NULL, Y [N, G*Cog, out...]. */
cudaError_t cuk_conv(cudaStream_t s, const float *x, const float *w, const float *bias, float *y,
		     int64_t N, int64_t G, int64_t Cig, int64_t Cog, const cuk_window *win);

/* ---- reductions (k_reduce.cu) --------------------------------------- */

enum { CUK_R_SUM, CUK_R_MEAN, CUK_R_MAX, CUK_R_MIN };

/* Output element o: kept dims kdims (outermost first) with input strides
 * kstr; reduced dims rdims with strides rstr, count elements in all. */
typedef struct cuk_reduce {
	int nk, nr;
	int64_t kdims[CUK_MAX_DIMS], kstr[CUK_MAX_DIMS];
	int64_t rdims[CUK_MAX_DIMS], rstr[CUK_MAX_DIMS];
	int64_t nout, count;
} cuk_reduce;

cudaError_t cuk_reduce_run(cudaStream_t s, int dtype, int op, const void *x, void *y,
			   const cuk_reduce *r);

/* ---- data movement (k_shape.cu) ------------------------------------- */

/* Output (folded) dims and the input stride each output dim walks. */
typedef struct cuk_perm {
	int rank;
	int64_t dims[CUK_MAX_DIMS], istr[CUK_MAX_DIMS];
} cuk_perm;

cudaError_t cuk_transpose(cudaStream_t s, int dtype, const void *x, void *y, int64_t n,
			  const cuk_perm *p);
/* Concat's copy of one input: `outer` blocks of blk elements land at
 * dst_off within blocks of dst_blk elements. */
cudaError_t cuk_concat_copy(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer,
			    int64_t blk, int64_t dst_blk, int64_t dst_off);
/* y[o, i, j] = x[o, idx[i], j], idx already in [0, axis_len). */
cudaError_t cuk_gather(cudaStream_t s, int dtype, const void *x, const int64_t *idx, void *y,
		       int64_t outer, int64_t nidx, int64_t inner, int64_t axis_len);

#ifdef __cplusplus
}
#endif

#endif
