/*
 * cuda_ops_conv: Conv on float32, 1 to 3 spatial dims, groups, pads,
 * strides, dilations, auto_pad.  With cuDNN (ORTMK_HAVE_CUDNN) and
 * symmetric pads it runs cudnnConvolutionForward, the algorithm chosen once
 * per input shape by cuDNN's heuristics (FMA math only, so no TF32, unless
 * ORTMK_CUDA_TF32=1), then adds the bias; otherwise (no cuDNN, asymmetric
 * pads such as SAME with an odd total, or no algorithm) the implicit-GEMM
 * kernel of k_nn.cu.  ORTMK_CUDA_CONV=gemm forces the latter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_dev.h"
#include "cuda_window.h"
#include "log.h"

typedef struct conv_state {
	int64_t key[2 * EP_MAX_RANK + 1];       /* x and w dims of the setup */
	int keyed, tried, use_dnn;      /* tried: cuDNN was set up for key */
#ifdef ORTMK_HAVE_CUDNN
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnConvolutionFwdAlgo_t algo;
	size_t ws;
#endif
} conv_state;

static int conv_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)opset;
	return dk_conv_node_ok(p, why, n) && dk_need_float(p, dt, n_in, 0, -1, 0, why, n);
}

static int conv_prepare(dk_node *nd, char *err, size_t n)
{
	nd->state = calloc(1, sizeof(conv_state));
	return nd->state ? 0 : (snprintf(err, n, "out of memory"), EP_E_NOMEM);
}

#ifdef ORTMK_HAVE_CUDNN
static void conv_fini(dk_node *nd)
{
	conv_state *s = nd->state;

	if (!s || !s->xd)
		return;
	cudnnDestroyTensorDescriptor(s->xd);
	cudnnDestroyTensorDescriptor(s->yd);
	cudnnDestroyFilterDescriptor(s->wd);
	cudnnDestroyConvolutionDescriptor(s->cd);
	s->xd = NULL;
}

static int dnn_fail(dk_ctx *c, cudnnStatus_t st, const char *what)
{
	return dk_fail(c, EP_E_INTERNAL, "%s: %s", what, cudnnGetErrorString(st));
}

/* Descriptors for this shape: tensors as 4-D (1-D convolutions get H = 1)
 * or 5-D, packed NCHW. */
static cudnnStatus_t describe(conv_state *s, const dk_val *x, const dk_val *w, const dk_val *y,
			      const cuk_window *g, int64_t G, int tf32, int nsp)
{
	int nd = nsp == 3 ? 5 : 4, first = 5 - nd;
	int xdim[5], xstr[5], ydim[5], ystr[5], wdim[5], pad[3], str[3], dil[3];
	cudnnStatus_t st;

	xdim[0] = (int)x->dims[0];
	xdim[1] = (int)x->dims[1];
	ydim[0] = (int)y->dims[0];
	ydim[1] = (int)y->dims[1];
	wdim[0] = (int)w->dims[0];
	wdim[1] = (int)w->dims[1];
	for (int j = first; j < 3; j++) {
		int k = j - first;      /* spatial dim k of the descriptor */

		xdim[2 + k] = (int)g->in[j];
		ydim[2 + k] = (int)g->out[j];
		wdim[2 + k] = (int)g->k[j];
		pad[k] = (int)g->pb[j];
		str[k] = (int)g->s[j];
		dil[k] = (int)g->d[j];
	}
	xstr[nd - 1] = ystr[nd - 1] = 1;
	for (int i = nd - 2; i >= 0; i--) {
		xstr[i] = xstr[i + 1] * xdim[i + 1];
		ystr[i] = ystr[i + 1] * ydim[i + 1];
	}
	st = cudnnSetTensorNdDescriptor(s->xd, CUDNN_DATA_FLOAT, nd, xdim, xstr);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetTensorNdDescriptor(s->yd, CUDNN_DATA_FLOAT, nd, ydim, ystr);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetFilterNdDescriptor(s->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, wdim);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetConvolutionNdDescriptor(s->cd, nd - 2, pad, str, dil,
						     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetConvolutionGroupCount(s->cd, (int)G);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetConvolutionMathType(s->cd, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
	return st;
}

/* Picks the first algorithm the heuristics rank that needs no TF32. */
static int choose_algo(dk_ctx *c, conv_state *s)
{
	cudnnHandle_t h = cu_dev(c)->dnn;
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	int got = 0, tf32 = cu_dev(c)->tf32;
	cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(
		h, s->xd, s->wd, s->cd, s->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);

	if (st != CUDNN_STATUS_SUCCESS)
		return -1;
	for (int i = 0; i < got; i++) {
		if (perf[i].status != CUDNN_STATUS_SUCCESS)
			continue;
		if (!tf32 && perf[i].mathType != CUDNN_FMA_MATH)
			continue;
		s->algo = perf[i].algo;
		if (cudnnGetConvolutionForwardWorkspaceSize(h, s->xd, s->wd, s->cd, s->yd, s->algo,
							    &s->ws) != CUDNN_STATUS_SUCCESS)
			continue;
		return 0;
	}
	return -1;
}

static int dnn_prepare_shape(dk_ctx *c, conv_state *s, const dk_val *x, const dk_val *w,
			     const dk_val *y, const cuk_window *g, int64_t G, int nsp)
{
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;

	if (!s->xd) {
		st = cudnnCreateTensorDescriptor(&s->xd);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnCreateTensorDescriptor(&s->yd);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnCreateFilterDescriptor(&s->wd);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnCreateConvolutionDescriptor(&s->cd);
		if (st != CUDNN_STATUS_SUCCESS)
			return dnn_fail(c, st, "cuDNN descriptors");
	}
	st = describe(s, x, w, y, g, G, cu_dev(c)->tf32, nsp);
	/* A shape cuDNN cannot describe or run goes to the implicit GEMM. */
	s->use_dnn = st == CUDNN_STATUS_SUCCESS && choose_algo(c, s) == 0;
	if (s->use_dnn)
		ipc_log(IPC_LOG_DEBUG, "Conv '%s': cuDNN algorithm %d, workspace %zu bytes",
			c->node->proto->name ? c->node->proto->name : "", (int)s->algo, s->ws);
	else
		ipc_log(IPC_LOG_DEBUG, "Conv '%s': implicit GEMM (cuDNN: %s)",
			c->node->proto->name ? c->node->proto->name : "",
			st == CUDNN_STATUS_SUCCESS ? "no FMA algorithm" : cudnnGetErrorString(st));
	return 0;
}

static int dnn_run(dk_ctx *c, conv_state *s, const dk_val *x, const dk_val *w, const dk_val *y)
{
	cudnnHandle_t h = cu_dev(c)->dnn;
	const float one = 1.0f, zero = 0.0f;
	dk_buf wsb = {0};
	void *ws;
	cudnnStatus_t st;

	if (s->ws && dk_temp(c, s->ws, &wsb))
		return c->status;
	ws = wsb.ptr;
	cudnnSetStream(h, c->stream);
	st = cudnnConvolutionForward(h, &one, s->xd, x->dev.ptr, s->wd, w->dev.ptr, s->cd, s->algo, ws,
				     s->ws, &zero, s->yd, y->dev.ptr);
	return st == CUDNN_STATUS_SUCCESS ? 0 : dnn_fail(c, st, "cudnnConvolutionForward");
}
#endif

/* cuDNN takes one pad per dim: symmetric pads only. */
static int symmetric(const cuk_window *g)
{
	for (int j = 0; j < 3; j++)
		if (g->pb[j] != g->pe[j])
			return 0;
	return 1;
}

static int want_dnn(const cuk_window *g)
{
	const char *e = getenv("ORTMK_CUDA_CONV");

#ifdef ORTMK_HAVE_CUDNN
	return !(e && !strcmp(e, "gemm")) && symmetric(g);
#else
	(void)e;
	(void)g;
	return 0;
#endif
}

static int shape_changed(conv_state *s, const dk_val *x, const dk_val *w)
{
	size_t r = (size_t)x->rank;
	int changed = !s->keyed || s->key[0] != x->rank ||
		      memcmp(s->key + 1, x->dims, sizeof(int64_t) * r) ||
		      memcmp(s->key + 1 + r, w->dims, sizeof(int64_t) * r);

	s->key[0] = x->rank;
	memcpy(s->key + 1, x->dims, sizeof(int64_t) * r);
	memcpy(s->key + 1 + r, w->dims, sizeof(int64_t) * r);
	s->keyed = 1;
	return changed;
}

static int conv_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *w = dk_in(c, 1), *b = dk_in(c, 2), *y;
	int64_t G = proto_attr_int(c->node->proto, "group", 1), dims[5];
	conv_state *s = c->node->state;
	cuk_window g;
	int nsp, rc;

	if (!x || !w || x->rank < 3 || w->rank != x->rank || x->dtype != CU_FLOAT ||
	    w->dtype != CU_FLOAT)
		return dk_fail(c, EP_E_INVALID, "X and W must be float32 of the same rank >= 3");
	if (x->dims[1] != w->dims[1] * G || w->dims[0] % G)
		return dk_fail(c, EP_E_INVALID, "channels: X has %lld, W is [%lld,%lld,...], group %lld",
			       (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1],
			       (long long)G);
	if (b && (b->dtype != CU_FLOAT || b->numel != w->dims[0]))
		return dk_fail(c, EP_E_INVALID, "B must hold %lld floats", (long long)w->dims[0]);
	rc = cu_window_geometry(c, x, w->dims + 2, &g, &nsp);
	if (rc)
		return rc;
	dims[0] = x->dims[0];
	dims[1] = w->dims[0];
	for (int i = 0; i < nsp; i++)
		dims[2 + i] = g.out[3 - nsp + i];
	y = dk_out(c, 0, CU_FLOAT, x->rank, dims);
	if (!y)
		return c->status;
	if (!y->numel)
		return 0;
	if (shape_changed(s, x, w))
		s->use_dnn = s->tried = 0;
#ifdef ORTMK_HAVE_CUDNN
	if (want_dnn(&g) && !s->tried && x->numel < INT32_MAX && y->numel < INT32_MAX) {
		s->tried = 1;
		rc = dnn_prepare_shape(c, s, x, w, y, &g, G, nsp);
		if (rc)
			return rc;
	}
	if (s->use_dnn && want_dnn(&g)) {
		rc = dnn_run(c, s, x, w, y);
		if (rc == 0 && b)
			rc = cu_check(c, cuk_bias_add(c->stream, y->dev.ptr, b->dev.ptr, dims[0], dims[1],
						      g.out[0] * g.out[1] * g.out[2]), "bias kernel");
		return rc;
	}
#else
	(void)want_dnn;
#endif
	return cu_check(c, cuk_conv(c->stream, x->dev.ptr, w->dev.ptr, b ? b->dev.ptr : NULL, y->dev.ptr, x->dims[0],
				    G, w->dims[1], w->dims[0] / G, &g), "convolution kernel");
}

const dk_op cu_ops_conv[] = {
#ifdef ORTMK_HAVE_CUDNN
	{"Conv", 1, 22, conv_supports, conv_prepare, conv_run, conv_fini, 0, NULL, NULL},
#else
	{"Conv", 1, 22, conv_supports, conv_prepare, conv_run, NULL, 0, NULL, NULL},
#endif
	{0},
};
