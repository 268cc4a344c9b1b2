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
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int unary_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	const Onnx__NodeProto *p = c->node->proto;
	int op = unary_code(p->op_type);

	if (!cu_is_float(x->dtype))
		return cu_fail(c, EP_E_INVALID, "input is not float");
	if (op == CUK_U_GELU && ep_attr_is(p, "approximate", "tanh"))
		op = CUK_U_GELU_TANH;
	y = cu_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	return cu_check(c, cuk_unary(c->stream, x->dtype, op, ep_attr_float(p, "alpha", 0.01f),
				     x->dev, y->dev, x->numel), "unary kernel");
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
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

/* Drops unit dims and merges neighbours that step alike in a and b;
 * returns the folded rank. */
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

static int binary_run(cu_ctx *c)
{
	const cu_val *a = cu_in(c, 0), *b = cu_in(c, 1), *y;
	int64_t dims[EP_MAX_RANK], sa[EP_MAX_RANK], sb[EP_MAX_RANK], fd[EP_MAX_RANK];
	cuk_bcast bc = {0};
	char s1[128], s2[128];
	int r, k;

	if (!a || !b || !cu_is_float(a->dtype) || b->dtype != a->dtype)
		return cu_fail(c, EP_E_INVALID, "inputs are not float of one dtype");
	if (ep_broadcast(a->rank, a->dims, b->rank, b->dims, &r, dims))
		return cu_fail(c, EP_E_INVALID, "%s and %s do not broadcast",
			       ep_shape_str(a->rank, a->dims, s1, sizeof(s1)),
			       ep_shape_str(b->rank, b->dims, s2, sizeof(s2)));
	y = cu_out(c, 0, a->dtype, r, dims);
	if (!y)
		return c->status;
	cu_bcast_strides(a, r, sa);
	cu_bcast_strides(b, r, sb);
	k = fold(r, dims, sa, sb, fd);
	if (k > CUK_MAX_DIMS)
		return cu_fail(c, EP_E_UNSUPPORTED, "broadcast folds to %d dims (at most %d)", k,
			       CUK_MAX_DIMS);
	bc.rank = k;
	for (int i = 0; i < k; i++) {
		bc.dims[i] = fd[i];
		bc.sa[i] = sa[i];
		bc.sb[i] = sb[i];
	}
	return cu_check(c, cuk_binary(c->stream, a->dtype, binary_code(c->node->proto->op_type),
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
