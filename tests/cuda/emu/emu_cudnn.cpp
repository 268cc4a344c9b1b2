/*
 * emu_cudnn: a host emulation of the cuDNN calls ort-ep-cuda's Conv makes
 * (descriptors, algorithm choice, cudnnConvolutionForward), for testing the
 * provider without a GPU (tests/cuda/emu).  The convolution is computed
 * from the descriptors alone, as cuDNN documents them: tensors with their
 * own strides, filters packed KCRS, symmetric pads, strides, dilations,
 * groups; the output descriptor must have the size cuDNN computes, else
 * CUDNN_STATUS_BAD_PARAM.  So it checks how the provider describes
 * convolutions (1-D as 2-D with H = 1, 3-D as 5-D tensors), independently
 * of the implicit-GEMM kernel.
 *
 * The heuristics offer two algorithms: first a tensor-op one
 * (CUDNN_DEFAULT_MATH, i.e. TF32 on recent GPUs), which this emulation
 * refuses to run (CUDNN_STATUS_NOT_SUPPORTED), then an FMA one, so a
 * provider that does not skip TF32 algorithms fails the tests.  The FMA
 * one asks for a workspace, which must be passed.
 */
#include <string.h>

#include <cudnn.h>

#include "emu.h"

#define MAXD 8
#define EMU_WORKSPACE 1024

struct cudnnContext {
	cudaStream_t stream = nullptr;
};

struct cudnnTensorStruct {
	int nd, dim[MAXD], stride[MAXD];
};

struct cudnnFilterStruct {
	int nd, dim[MAXD];
};

struct cudnnConvolutionStruct {
	int n, pad[MAXD], stride[MAXD], dil[MAXD], groups;
	cudnnMathType_t math;
};

extern "C" {

const char *cudnnGetErrorString(cudnnStatus_t s)
{
	return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_EMULATED_ERROR";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
	*h = new cudnnContext();
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
	delete h;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
	h->stream = s;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
	*d = new cudnnTensorStruct();
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
	delete d;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nd,
					 const int dim[], const int stride[])
{
	if (t != CUDNN_DATA_FLOAT || nd < 3 || nd > MAXD)
		return CUDNN_STATUS_BAD_PARAM;
	d->nd = nd;
	for (int i = 0; i < nd; i++) {
		if (dim[i] < 1 || stride[i] < 1)
			return CUDNN_STATUS_BAD_PARAM;
		d->dim[i] = dim[i];
		d->stride[i] = stride[i];
	}
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
	*d = new cudnnFilterStruct();
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
	delete d;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
					 cudnnTensorFormat_t f, int nd, const int dim[])
{
	if (t != CUDNN_DATA_FLOAT || f != CUDNN_TENSOR_NCHW || nd < 3 || nd > MAXD)
		return CUDNN_STATUS_BAD_PARAM;
	d->nd = nd;
	memcpy(d->dim, dim, sizeof(int) * (size_t)nd);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
	*d = new cudnnConvolutionStruct();
	(*d)->groups = 1;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
	delete d;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int n,
					      const int pad[], const int stride[],
					      const int dil[], cudnnConvolutionMode_t mode,
					      cudnnDataType_t t)
{
	if (mode != CUDNN_CROSS_CORRELATION || t != CUDNN_DATA_FLOAT || n < 1 || n > MAXD - 2)
		return CUDNN_STATUS_BAD_PARAM;
	d->n = n;
	for (int i = 0; i < n; i++) {
		if (pad[i] < 0 || stride[i] < 1 || dil[i] < 1)
			return CUDNN_STATUS_BAD_PARAM;
		d->pad[i] = pad[i];
		d->stride[i] = stride[i];
		d->dil[i] = dil[i];
	}
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
	if (g < 1)
		return CUDNN_STATUS_BAD_PARAM;
	d->groups = g;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
	d->math = m;
	return CUDNN_STATUS_SUCCESS;
}

} /* extern "C" */

/* The shapes must agree as cuDNN requires. */
static cudnnStatus_t check(const cudnnTensorStruct *x, const cudnnFilterStruct *w,
			   const cudnnConvolutionStruct *c, const cudnnTensorStruct *y)
{
	int nd = x->nd;

	if (w->nd != nd || y->nd != nd || c->n != nd - 2 || x->dim[1] != w->dim[1] * c->groups ||
	    w->dim[0] % c->groups || y->dim[0] != x->dim[0] || y->dim[1] != w->dim[0])
		return CUDNN_STATUS_BAD_PARAM;
	for (int i = 0; i < nd - 2; i++) {
		int eff = (w->dim[2 + i] - 1) * c->dil[i] + 1;
		int span = x->dim[2 + i] + 2 * c->pad[i] - eff;

		if (span < 0 || span / c->stride[i] + 1 != y->dim[2 + i])
			return CUDNN_STATUS_BAD_PARAM;
	}
	return CUDNN_STATUS_SUCCESS;
}

extern "C" {

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
						     const cudnnFilterDescriptor_t w,
						     const cudnnConvolutionDescriptor_t c,
						     const cudnnTensorDescriptor_t y, const int want,
						     int *got, cudnnConvolutionFwdAlgoPerf_t *perf)
{
	cudnnStatus_t st = check(x, w, c, y);

	(void)h;
	if (st != CUDNN_STATUS_SUCCESS)
		return st;
	*got = want < 2 ? want : 2;
	memset(perf, 0, sizeof(*perf) * (size_t)*got);
	if (*got > 0)
		perf[0] = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, 0.1f, 0,
			   CUDNN_NON_DETERMINISTIC, CUDNN_DEFAULT_MATH, {0, 0, 0}};
	if (*got > 1)
		perf[1] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, 0.2f,
			   EMU_WORKSPACE, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH, {0, 0, 0}};
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h,
						      const cudnnTensorDescriptor_t x,
						      const cudnnFilterDescriptor_t w,
						      const cudnnConvolutionDescriptor_t c,
						      const cudnnTensorDescriptor_t y,
						      cudnnConvolutionFwdAlgo_t algo, size_t *size)
{
	(void)h;
	*size = algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ? EMU_WORKSPACE : 0;
	return check(x, w, c, y);
}

/* The convolution itself, from copies of the descriptors (the caller may
 * change them once the call returned, as with cuDNN). */
static void forward(float a, cudnnTensorStruct xd, const float *x, cudnnFilterStruct wd,
		    const float *w, cudnnConvolutionStruct cd, float b, cudnnTensorStruct yd,
		    float *y)
{
	int nsp = xd.nd - 2, K = wd.dim[0], Cg = wd.dim[1], G = cd.groups, Kg = K / G;
	long long outs = 1, taps = 1;

	for (int i = 0; i < nsp; i++) {
		outs *= yd.dim[2 + i];
		taps *= wd.dim[2 + i];
	}
	for (int n = 0; n < xd.dim[0]; n++)
		for (int k = 0; k < K; k++)
			for (long long o = 0; o < outs; o++) {
				int op[MAXD];
				long long rem = o, yi = (long long)n * yd.stride[0] +
							 (long long)k * yd.stride[1];
				double acc = 0;

				for (int i = nsp - 1; i >= 0; i--) {
					op[i] = (int)(rem % yd.dim[2 + i]);
					rem /= yd.dim[2 + i];
					yi += (long long)op[i] * yd.stride[2 + i];
				}
				for (int c = 0; c < Cg; c++)
					for (long long t = 0; t < taps; t++) {
						long long trem = t, xi = (long long)n * xd.stride[0] +
							(long long)((k / Kg) * Cg + c) * xd.stride[1];
						long long wi = ((long long)k * Cg + c) * taps + t;
						int inside = 1;

						for (int i = nsp - 1; i >= 0; i--) {
							int kk = (int)(trem % wd.dim[2 + i]);
							int pos = op[i] * cd.stride[i] - cd.pad[i] +
								  kk * cd.dil[i];

							trem /= wd.dim[2 + i];
							inside &= pos >= 0 && pos < xd.dim[2 + i];
							xi += (long long)pos * xd.stride[2 + i];
						}
						if (inside)
							acc += (double)x[xi] * w[wi];
					}
				y[yi] = (float)(a * acc + (b != 0.0f ? b * y[yi] : 0.0));
			}
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
				      const cudnnTensorDescriptor_t xd, const void *xv,
				      const cudnnFilterDescriptor_t wd, const void *wv,
				      const cudnnConvolutionDescriptor_t cd,
				      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
				      const void *beta, const cudnnTensorDescriptor_t yd, void *yv)
{
	float a = *(const float *)alpha, b = *(const float *)beta;
	cudnnTensorStruct x = *xd, y = *yd;
	cudnnFilterStruct w = *wd;
	cudnnConvolutionStruct c = *cd;
	cudnnStatus_t st = check(xd, wd, cd, yd);

	if (st != CUDNN_STATUS_SUCCESS)
		return st;
	if (algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || cd->math != CUDNN_FMA_MATH)
		return CUDNN_STATUS_NOT_SUPPORTED;      /* the TF32 algorithm */
	if (!ws || ws_bytes < EMU_WORKSPACE)
		return CUDNN_STATUS_BAD_PARAM;
	emu_enqueue(h->stream, [=] {
		forward(a, x, (const float *)xv, w, (const float *)wv, c, b, y, (float *)yv);
	});
	return CUDNN_STATUS_SUCCESS;
}

} /* extern "C" */
