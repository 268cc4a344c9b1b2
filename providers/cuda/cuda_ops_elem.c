/*
 * cuda_ops_elem: elementwise ops on float32 and float16 — the unary ones
 * (Relu, Sigmoid, Tanh, Sqrt, Erf, Gelu, Abs, Neg, LeakyRelu) and the
 * binary ones with numpy broadcasting (Add, Sub, Mul, Div, Pow; k_elem.cu).
 * Broadcast shapes are folded on the host (unit dims vanish, neighbours
 * that step alike in both inputs merge) to at most CUK_MAX_DIMS dims.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"
#include "dk_ops.h"

static int unary_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	int op = dk_unary_code(p->op_type);

	if (!dk_dev_dtype(x->dtype))
		return dk_fail(c, EP_E_INVALID, "input is not float");
	if (op == CUK_U_GELU && proto_attr_is(p, "approximate", "tanh"))
		op = CUK_U_GELU_TANH;
	y = dk_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	return cu_check(c, cuk_unary(c->stream, x->dtype, op, proto_attr_float(p, "alpha", 0.01f),
				     x->dev.ptr, y->dev.ptr, x->numel), "unary kernel");
}

static int binary_run(dk_ctx *c)
{
	const dk_val *a = dk_in(c, 0), *b = dk_in(c, 1), *y;
	int64_t sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	cuk_bcast bc = {0};
	int k = dk_binary_out(c, CUK_MAX_DIMS, fd, sa, sb, &y);

	if (k < 0)
		return c->status;
	bc.rank = k;
	for (int i = 0; i < k; i++) {
		bc.dims[i] = fd[i];
		bc.sa[i] = sa[i];
		bc.sb[i] = sb[i];
	}
	return cu_check(c, cuk_binary(c->stream, a->dtype, dk_binary_code(c->node->proto->op_type),
				      a->dev.ptr, b->dev.ptr, y->dev.ptr, y->numel, &bc), "binary kernel");
}

const dk_op cu_ops_elem[] = {
	{.names = dk_unary_ops, .supports = dk_unary_supports, .run = unary_run},
	{.names = dk_binary_ops, .supports = dk_binary_supports, .run = binary_run},
	{0},
};
