/*
 * vk_ops_elem: elementwise ops on float32 — the unary ones (Relu, Sigmoid,
 * Tanh, Sqrt, Erf, Gelu, Abs, Neg, LeakyRelu; shaders/unary.comp) and
 * the binary ones with numpy broadcasting (Add, Sub, Mul, Div, Pow;
 * shaders/binary.comp).  Broadcast shapes are folded on the host: dims of
 * size 1 vanish and neighbours that step alike in both inputs merge, so
 * the shader walks at most 8 dims.
 */
#include <stdio.h>
#include <string.h>

#include "ep_ops.h"
#include "vk_ops.h"

#define BIN_MAX_RANK 8

typedef struct unary_push {
	uint32_t n, op;
	float alpha;
} unary_push;

typedef struct binary_push {
	uint32_t n, op, rank, pad;
	uint32_t dims[BIN_MAX_RANK], sa[BIN_MAX_RANK], sb[BIN_MAX_RANK];
} binary_push;

_Static_assert(sizeof(binary_push) <= VKX_PUSH_BYTES, "binary push constants");

static int unary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)opset;
	if (!ep_unary_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int unary_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	unary_push push = {.op = (uint32_t)ep_unary_code(p->op_type)};

	if (!x || x->dtype != vk_node_dtype(c))
		return vk_fail(c, EP_E_INVALID, "input is not float32");
	if (push.op == VKX_U_GELU && proto_attr_is(p, "approximate", "tanh"))
		push.op = VKX_U_GELU_TANH;
	push.alpha = proto_attr_float(p, "alpha", 0.01f);
	y = vk_out(c, 0, x->rank, x->dims);
	if (!y)
		return c->status;
	push.n = (uint32_t)x->numel;
	return vk_emit_1d(c, VKP_UNARY, (vk_buf[]){x->dev, y->dev}, 2, 2u, &push, sizeof(push),
			  (uint64_t)x->numel);
}

static int binary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_binary_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int binary_plan(vk_ctx *c)
{
	const vk_val *a = vk_in(c, 0), *b = vk_in(c, 1), *y;
	int64_t dims[EP_MAX_RANK], sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	binary_push push = {.op = (uint32_t)ep_binary_code(c->node->proto->op_type)};
	char s1[128], s2[128];
	int r, k;

	if (!a || !b || a->dtype != vk_node_dtype(c) || b->dtype != vk_node_dtype(c))
		return vk_fail(c, EP_E_INVALID, "inputs are not float32");
	if ((r = onnx_broadcast(a->rank, a->dims, b->rank, b->dims, dims)) < 0)
		return vk_fail(c, EP_E_INVALID, "%s and %s do not broadcast",
			       ep_shape_str(a->rank, a->dims, s1, sizeof(s1)),
			       ep_shape_str(b->rank, b->dims, s2, sizeof(s2)));
	y = vk_out(c, 0, r, dims);
	if (!y)
		return c->status;
	ep_bcast_strides(a->rank, a->dims, r, sa);
	ep_bcast_strides(b->rank, b->dims, r, sb);
	k = ep_fold_strides(r, dims, sa, sb, fd);
	if (k > BIN_MAX_RANK)
		return vk_fail(c, EP_E_UNSUPPORTED, "broadcast folds to %d dims (at most %d)", k,
			       BIN_MAX_RANK);
	push.n = (uint32_t)y->numel;
	push.rank = (uint32_t)k;
	for (int i = 0; i < k; i++) {
		push.dims[i] = (uint32_t)fd[i];
		push.sa[i] = (uint32_t)sa[i];
		push.sb[i] = (uint32_t)sb[i];
	}
	return vk_emit_1d(c, VKP_BINARY, (vk_buf[]){a->dev, b->dev, y->dev}, 3, 4u, &push,
			  sizeof(push), (uint64_t)y->numel);
}

#define UNARY(name, lo) {name, lo, 22, unary_supports, NULL, unary_plan, VKX_PIPE(VKP_UNARY), NULL}
#define BINARY(name) {name, 7, 22, binary_supports, NULL, binary_plan, VKX_PIPE(VKP_BINARY), NULL}

const vk_op vk_ops_elem[] = {
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
