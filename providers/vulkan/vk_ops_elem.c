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

_Static_assert(sizeof(binary_push) <= VK_PUSH_BYTES, "binary push constants");

static int unary_code(const char *op)
{
	static const char *const names[] = {"Relu", "Sigmoid", "Tanh", "Sqrt", "Erf", "Gelu", "",
					    "Abs", "Neg", "LeakyRelu"};

	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(names[i], op) == 0)
			return i;
	return -1;
}

static int binary_code(const char *op)
{
	static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};

	for (int i = 0; i < 5; i++)
		if (strcmp(names[i], op) == 0)
			return i;
	return -1;
}

static int unary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	static const char *const leaky[] = {"alpha", NULL}, *const gelu[] = {"approximate", NULL};
	static const char *const none[] = {NULL};
	const char *const *known = none;

	(void)opset;
	if (!strcmp(p->op_type, "LeakyRelu"))
		known = leaky;
	if (!strcmp(p->op_type, "Gelu")) {
		known = gelu;
		if (ep_attr(p, "approximate") && !ep_attr_is(p, "approximate", "none") &&
		    !ep_attr_is(p, "approximate", "tanh"))
			return snprintf(why, n, "unknown Gelu approximation"), 0;
	}
	if (p->n_input != 1 || p->n_output != 1)
		return snprintf(why, n, "expects one input and one output"), 0;
	if (ep_attr_unknown(p, known, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int unary_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	unary_push push = {.op = (uint32_t)unary_code(p->op_type)};

	if (!x || x->dtype != vk_node_dtype(c))
		return vk_fail(c, EP_E_INVALID, "input is not float32");
	if (push.op == VK_U_GELU && ep_attr_is(p, "approximate", "tanh"))
		push.op = VK_U_GELU_TANH;
	push.alpha = ep_attr_float(p, "alpha", 0.01f);
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
	static const char *const none[] = {NULL};

	(void)opset;
	if (p->n_input != 2 || p->n_output != 1)
		return snprintf(why, n, "expects two inputs and one output"), 0;
	if (ep_attr_unknown(p, none, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

/* Row-major strides of x aligned to the last `r` dims of the output
 * (0 where x has no dim or a dim of 1). */
static void bcast_strides(const vk_val *x, int r, int64_t *st)
{
	int64_t s = 1;

	for (int i = r - 1; i >= 0; i--) {
		int xi = i - (r - x->rank);
		int64_t d = xi >= 0 ? x->dims[xi] : 1;

		st[i] = d == 1 ? 0 : s;
		s *= d;
	}
}

/* Drops unit dims and merges neighbours; returns the folded rank. */
static int fold(int r, const int64_t *dims, int64_t *sa, int64_t *sb, int64_t *od)
{
	int k = 0;

	for (int i = 0; i < r; i++) {
		if (dims[i] == 1)
			continue;
		if (k > 0 && sa[k - 1] == sa[i] * dims[i] && sb[k - 1] == sb[i] * dims[i]) {
			od[k - 1] *= dims[i];
			sa[k - 1] = sa[i];
			sb[k - 1] = sb[i];
			continue;
		}
		od[k] = dims[i];
		sa[k] = sa[i];
		sb[k] = sb[i];
		k++;
	}
	return k;
}

static int binary_plan(vk_ctx *c)
{
	const vk_val *a = vk_in(c, 0), *b = vk_in(c, 1), *y;
	int64_t dims[EP_MAX_RANK], sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	binary_push push = {.op = (uint32_t)binary_code(c->node->proto->op_type)};
	char s1[128], s2[128];
	int r, k;

	if (!a || !b || a->dtype != vk_node_dtype(c) || b->dtype != vk_node_dtype(c))
		return vk_fail(c, EP_E_INVALID, "inputs are not float32");
	if (ep_broadcast(a->rank, a->dims, b->rank, b->dims, &r, dims))
		return vk_fail(c, EP_E_INVALID, "%s and %s do not broadcast",
			       ep_shape_str(a->rank, a->dims, s1, sizeof(s1)),
			       ep_shape_str(b->rank, b->dims, s2, sizeof(s2)));
	y = vk_out(c, 0, r, dims);
	if (!y)
		return c->status;
	bcast_strides(a, r, sa);
	bcast_strides(b, r, sb);
	k = fold(r, dims, sa, sb, fd);
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

#define UNARY(name, lo) {name, lo, 22, unary_supports, NULL, unary_plan, VK_PIPE(VKP_UNARY), NULL}
#define BINARY(name) {name, 7, 22, binary_supports, NULL, binary_plan, VK_PIPE(VKP_BINARY), NULL}

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
