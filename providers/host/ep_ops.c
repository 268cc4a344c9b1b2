/*
 * ep_ops: node checks, op codes, broadcast strides and view dims shared by
 * the vulkan and cuda elementwise, linalg, norm and shape ops (see ep_ops.h).
 */
#include "ep_ops.h"

#include <stdio.h>
#include <string.h>

#include "ep_shape.h"

static int code_of(const char *const *names, int cnt, const char *op)
{
	for (int i = 0; i < cnt; i++)
		if (strcmp(names[i], op) == 0)
			return i;
	return -1;
}

int ep_unary_code(const char *op_type)
{
	static const char *const names[] = {"Relu", "Sigmoid", "Tanh", "Sqrt", "Erf", "Gelu", "",
					    "Abs", "Neg", "LeakyRelu"};

	return code_of(names, (int)(sizeof(names) / sizeof(names[0])), op_type);
}

int ep_binary_code(const char *op_type)
{
	static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};

	return code_of(names, (int)(sizeof(names) / sizeof(names[0])), op_type);
}

int ep_unary_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const leaky[] = {"alpha", NULL}, *const gelu[] = {"approximate", NULL};
	static const char *const none[] = {NULL};
	const char *const *known = none;

	if (!strcmp(p->op_type, "LeakyRelu"))
		known = leaky;
	if (!strcmp(p->op_type, "Gelu")) {
		known = gelu;
		if (proto_attr(p, "approximate") && !proto_attr_is(p, "approximate", "none") &&
		    !proto_attr_is(p, "approximate", "tanh"))
			return snprintf(why, n, "unknown Gelu approximation"), 0;
	}
	if (p->n_input != 1 || p->n_output != 1)
		return snprintf(why, n, "expects one input and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int ep_binary_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const none[] = {NULL};

	if (p->n_input != 2 || p->n_output != 1)
		return snprintf(why, n, "expects two inputs and one output"), 0;
	return !proto_attr_unknown(p, none, why, n);
}

int ep_gemm_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output != 1)
		return snprintf(why, n, "expects 2 or 3 inputs and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int ep_batchnorm_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", NULL};

	if (p->n_input != 5 || ep_n_outputs(p) != 1 || !p->output[0][0])
		return snprintf(why, n, "only inference mode (five inputs, the Y output)"), 0;
	if (proto_attr_unknown(p, known, why, n))
		return 0;
	if (proto_attr_int(p, "training_mode", 0) != 0 || proto_attr_int(p, "spatial", 1) != 1)
		return snprintf(why, n, "training_mode or spatial=0 is not supported"), 0;
	return 1;
}

/* One input, one output, no attribute but `known`. */
static int one_in_one_out(const Onnx__NodeProto *p, const char *const *known, char *why, size_t n)
{
	if (p->n_input != 1 || p->n_output != 1)
		return snprintf(why, n, "expects one input and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int ep_softmax_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	return one_in_one_out(p, known, why, n);
}

int ep_transpose_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"perm", NULL};

	return one_in_one_out(p, known, why, n);
}

int ep_concat_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	if (p->n_input < 1 || p->n_output != 1 || !proto_attr(p, "axis"))
		return snprintf(why, n, "expects inputs, one output and an axis"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int ep_gather_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	if (p->n_input != 2 || p->n_output != 1)
		return snprintf(why, n, "expects two inputs and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

void ep_bcast_strides(int xr, const int64_t *xd, int r, int64_t *st)
{
	int64_t s = 1;

	for (int i = r - 1; i >= 0; i--) {
		int xi = i - (r - xr);
		int64_t d = xi >= 0 ? xd[xi] : 1;

		st[i] = d == 1 ? 0 : s;
		s *= d;
	}
}

void ep_batch_strides(const int64_t *xd, int xr, int nb, const int64_t *bd, int64_t *st)
{
	int64_t s = xd[xr - 1] * xd[xr - 2];

	for (int i = nb - 1; i >= 0; i--) {
		int xi = i - (nb - (xr - 2));
		int64_t d = xi >= 0 ? xd[xi] : 1;

		st[i] = d == 1 && bd[i] != 1 ? 0 : s;
		s *= d;
	}
}

/* In place is safe: slot k is written only after dims[i >= k] was read. */
int ep_fold_strides(int r, const int64_t *dims, int64_t *sa, int64_t *sb, int64_t *od)
{
	int k = 0;

	for (int i = 0; i < r; i++) {
		int64_t d = dims[i];

		if (d == 1)
			continue;
		if (k > 0 && sa[k - 1] == sa[i] * d && sb[k - 1] == sb[i] * d) {
			od[k - 1] *= d;
			sa[k - 1] = sa[i];
			sb[k - 1] = sb[i];
			continue;
		}
		od[k] = d;
		sa[k] = sa[i];
		sb[k] = sb[i];
		k++;
	}
	return k;
}

int ep_view_dims(const Onnx__NodeProto *p, int64_t opset, int rank, const int64_t *dims,
		 int64_t numel, const int64_t *list, int cnt, int64_t *od, int *ro, char *err,
		 size_t n)
{
	const char *t = p->op_type;
	int64_t ax[EP_MAX_RANK];
	const int64_t *v;

	if (!strcmp(t, "Reshape")) {
		*ro = cnt;
		return onnx_reshape_dims(rank, dims, numel, list, cnt,
				       proto_attr_int(p, "allowzero", 0) != 0, od, err, n);
	}
	if (!strcmp(t, "Flatten")) {
		*ro = 2;
		return onnx_flatten_dims(rank, dims, proto_attr_int(p, "axis", 1), od, err, n);
	}
	if (strcmp(t, "Squeeze") && strcmp(t, "Unsqueeze")) {
		*ro = rank;
		memcpy(od, dims, sizeof(int64_t) * (size_t)rank);
		return 0;
	}
	if (opset < 13) {
		cnt = proto_attr_ints(p, "axes", &v);
		if (cnt > EP_MAX_RANK)
			return snprintf(err, n, "too many axes"), EP_E_INVALID;
		if (cnt > 0)
			memcpy(ax, v, sizeof(int64_t) * (size_t)cnt);
		list = ax;
	}
	if (!strcmp(t, "Squeeze"))
		return onnx_squeeze_dims(rank, dims, list, cnt, od, ro, err, n);
	return onnx_unsqueeze_dims(rank, dims, list, cnt, od, ro, err, n);
}
