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
#include "ep_ops.h"

static int unary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)opset;
	if (!ep_unary_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int unary_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	int op = ep_unary_code(p->op_type);

	if (!cu_is_float(x->dtype))
		return cu_fail(c, EP_E_INVALID, "input is not float");
	if (op == CUK_U_GELU && proto_attr_is(p, "approximate", "tanh"))
		op = CUK_U_GELU_TANH;
	y = cu_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	return cu_check(c, cuk_unary(c->stream, x->dtype, op, proto_attr_float(p, "alpha", 0.01f),
				     x->dev, y->dev, x->numel), "unary kernel");
}

static int binary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_binary_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int binary_run(cu_ctx *c)
{
	const cu_val *a = cu_in(c, 0), *b = cu_in(c, 1), *y;
	int64_t dims[EP_MAX_RANK], sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	cuk_bcast bc = {0};
	char s1[128], s2[128];
	int r, k;

	if (!a || !b || !cu_is_float(a->dtype) || b->dtype != a->dtype)
		return cu_fail(c, EP_E_INVALID, "inputs are not float of one dtype");
	if ((r = onnx_broadcast(a->rank, a->dims, b->rank, b->dims, dims)) < 0)
		return cu_fail(c, EP_E_INVALID, "%s and %s do not broadcast",
			       ep_shape_str(a->rank, a->dims, s1, sizeof(s1)),
			       ep_shape_str(b->rank, b->dims, s2, sizeof(s2)));
	y = cu_out(c, 0, a->dtype, r, dims);
	if (!y)
		return c->status;
	ep_bcast_strides(a->rank, a->dims, r, sa);
	ep_bcast_strides(b->rank, b->dims, r, sb);
	k = ep_fold_strides(r, dims, sa, sb, fd);
	if (k > CUK_MAX_DIMS)
		return cu_fail(c, EP_E_UNSUPPORTED, "broadcast folds to %d dims (at most %d)", k,
			       CUK_MAX_DIMS);
	bc.rank = k;
	for (int i = 0; i < k; i++) {
		bc.dims[i] = fd[i];
		bc.sa[i] = sa[i];
		bc.sb[i] = sb[i];
	}
	return cu_check(c, cuk_binary(c->stream, a->dtype, ep_binary_code(c->node->proto->op_type),
				      a->dev, b->dev, y->dev, y->numel, &bc), "binary kernel");
}

#define UNARY(name, lo) {name, lo, 22, unary_supports, NULL, unary_run, NULL}
#define BINARY(name) {name, 7, 22, binary_supports, NULL, binary_run, NULL}

const cu_op cu_ops_elem[] = {
	UNARY("Relu", 6),
	UNARY("Sigmoid", 6),
	UNARY("Tanh", 6),
	UNARY("Sqrt", 6),
	UNARY("Erf", 9),
	UNARY("Gelu", 20),
	UNARY("Abs", 6),
	UNARY("Neg", 6),
	UNARY("LeakyRelu", 6),
	BINARY("Add"),
	BINARY("Sub"),
	BINARY("Mul"),
	BINARY("Div"),
	BINARY("Pow"),
	{0},
};
