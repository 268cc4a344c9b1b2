/*
 * cuda_ops_pool: MaxPool and AveragePool (1 to 3 spatial dims, pads,
 * strides, dilations, ceil_mode, auto_pad, count_include_pad; k_nn.cu) and
 * GlobalAveragePool / GlobalMaxPool (a reduction over the spatial dims,
 * k_reduce.cu), on float32 and float16.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_window.h"

static int pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)opset;
	return ep_pool_node_ok(p, why, n) && cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int pool_run(cu_ctx *c)
{
	const Onnx__NodeProto *pr = c->node->proto;
	const cu_val *x = cu_in(c, 0), *y;
	const int64_t *ks;
	int nk = proto_attr_ints(pr, "kernel_shape", &ks), nsp, rc;
	int64_t dims[5];
	cuk_window g;

	if (!cu_is_float(x->dtype) || x->rank != nk + 2)
		return cu_fail(c, EP_E_INVALID, "X must be float of rank %d", nk + 2);
	rc = cu_window_geometry(c, x, ks, &g, &nsp);
	if (rc)
		return rc;
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[2 + i] = g.out[3 - nsp + i];
	y = cu_out(c, 0, x->dtype, x->rank, dims);
	if (!y)
		return c->status;
	return cu_check(c, cuk_pool(c->stream, x->dtype, x->dev, y->dev, x->dims[0] * x->dims[1], &g,
				    pr->op_type[0] == 'M',
				    proto_attr_int(pr, "count_include_pad", 0) != 0), "pool kernel");
}

static int global_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	static const char *const none[] = {NULL};

	(void)opset;
	if (p->n_input != 1 || p->n_output != 1)
		return snprintf(why, n, "expects one input and one output"), 0;
	if (proto_attr_unknown(p, none, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int global_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	int64_t dims[EP_MAX_RANK], S = 1;
	cuk_reduce r = {0};

	if (!cu_is_float(x->dtype) || x->rank < 2)
		return cu_fail(c, EP_E_INVALID, "X must be float of rank >= 2");
	for (int i = 0; i < x->rank; i++) {
		dims[i] = i < 2 ? x->dims[i] : 1;
		S *= i < 2 ? 1 : x->dims[i];
	}
	if (!S)
		return cu_fail(c, EP_E_UNSUPPORTED, "empty spatial dims");
	y = cu_out(c, 0, x->dtype, x->rank, dims);
	if (!y)
		return c->status;
	/* Each output (n, c) reduces the S contiguous elements of its plane. */
	r.nk = 1;
	r.kdims[0] = y->numel;
	r.kstr[0] = S;
	r.nr = 1;
	r.rdims[0] = S;
	r.rstr[0] = 1;
	r.nout = y->numel;
	r.count = S;
	return cu_check(c, cuk_reduce_run(c->stream, x->dtype,
					  c->node->proto->op_type[6] == 'M' ? CUK_R_MAX : CUK_R_MEAN,
					  x->dev, y->dev, &r), "reduce kernel");
}

const cu_op cu_ops_pool[] = {
	{"MaxPool", 1, 22, pool_supports, NULL, pool_run, NULL},
	{"AveragePool", 1, 22, pool_supports, NULL, pool_run, NULL},
	{"GlobalAveragePool", 1, 22, global_supports, NULL, global_run, NULL},
	{"GlobalMaxPool", 1, 22, global_supports, NULL, global_run, NULL},
	{0},
};
