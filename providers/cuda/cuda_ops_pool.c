/*
 * cuda_ops_pool: MaxPool and AveragePool (1 to 3 spatial dims, pads,
 * strides, dilations, ceil_mode, auto_pad, count_include_pad; k_nn.cu) and
 * GlobalAveragePool / GlobalMaxPool (a reduction over the spatial dims,
 * k_reduce.cu), on float32 and float16.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_window.h"

static int pool_run(dk_ctx *c)
{
	const Onnx__NodeProto *pr = c->node->proto;
	const dk_val *x = dk_in(c, 0), *y;
	dk_window w;
	cuk_window g;

	if (dk_pool_out(c, &w, &y))
		return c->status;
	cu_window_of(&w, &g);
	return cu_check(c, cuk_pool(c->stream, x->dtype, x->dev.ptr, y->dev.ptr, x->dims[0] * x->dims[1],
				    &g, pr->op_type[0] == 'M',
				    proto_attr_int(pr, "count_include_pad", 0) != 0), "pool kernel");
}

static int global_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	int64_t S = dk_global_pool_out(c, &y);
	cuk_reduce r = {0};

	if (S < 0)
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
					  x->dev.ptr, y->dev.ptr, &r), "reduce kernel");
}

const dk_op cu_ops_pool[] = {
	{"MaxPool", 1, 22, dk_pool_supports, NULL, pool_run, NULL, 0, NULL, NULL},
	{"AveragePool", 1, 22, dk_pool_supports, NULL, pool_run, NULL, 0, NULL, NULL},
	{"GlobalAveragePool", 1, 22, dk_global_pool_supports, NULL, global_run, NULL,
	 0, NULL, NULL},
	{"GlobalMaxPool", 1, 22, dk_global_pool_supports, NULL, global_run, NULL, 0, NULL, NULL},
	{0},
};
