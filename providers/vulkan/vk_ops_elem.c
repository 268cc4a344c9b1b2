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

#include "dk_ops.h"
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

static int unary_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	unary_push push = {.op = (uint32_t)dk_unary_code(p->op_type)};

	if (!x || x->dtype != vk_node_dtype(c))
		return dk_fail(c, EP_E_INVALID, "input is not float32");
	if (push.op == VKX_U_GELU && proto_attr_is(p, "approximate", "tanh"))
		push.op = VKX_U_GELU_TANH;
	push.alpha = proto_attr_float(p, "alpha", 0.01f);
	y = dk_out(c, 0, vk_node_dtype(c), x->rank, x->dims);
	if (!y)
		return c->status;
	push.n = (uint32_t)x->numel;
	return vk_emit_1d(c, VKP_UNARY, (vk_buf[]){x->dev, y->dev}, 2, 2u, &push, sizeof(push),
			  (uint64_t)x->numel);
}

static int binary_plan(dk_ctx *c)
{
	const dk_val *a = dk_in(c, 0), *b = dk_in(c, 1), *y;
	int64_t sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	binary_push push = {.op = (uint32_t)dk_binary_code(c->node->proto->op_type)};
	int k = dk_binary_out(c, BIN_MAX_RANK, fd, sa, sb, &y);

	if (k < 0)
		return c->status;
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

const dk_op vk_ops_elem[] = {
	{.names = dk_unary_ops, .supports = dk_unary_supports, .run = unary_plan,
	 .needs = VKX_PIPE(VKP_UNARY)},
	{.names = dk_binary_ops, .supports = dk_binary_supports, .run = binary_plan,
	 .needs = VKX_PIPE(VKP_BINARY)},
	{0},
};
