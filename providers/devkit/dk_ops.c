/*
 * dk_ops: node checks, op codes, broadcast strides, the float dtype check
 * and the view ops shared by the vulkan and cuda ops (see dk_ops.h).
 */
#include "dk_ops.h"

#include <stdio.h>
#include <string.h>

#include "dk_shape.h"

const dk_opname dk_unary_ops[] = {
	{"Relu", 6, 22}, {"Sigmoid", 6, 22}, {"Tanh", 6, 22}, {"Sqrt", 6, 22}, {"Erf", 9, 22},
	{"Gelu", 20, 22}, {"Abs", 6, 22}, {"Neg", 6, 22}, {"LeakyRelu", 6, 22}, {0},
};

const dk_opname dk_binary_ops[] = {
	{"Add", 7, 22}, {"Sub", 7, 22}, {"Mul", 7, 22}, {"Div", 7, 22}, {"Pow", 7, 22}, {0},
};

const dk_opname dk_reduce_ops[] = {
	{"ReduceSum", 1, 22}, {"ReduceMean", 1, 22}, {"ReduceMax", 1, 22}, {"ReduceMin", 1, 22},
	{0},
};

static int code_of(const char *const *names, int cnt, const char *op)
{
	for (int i = 0; i < cnt; i++)
		if (strcmp(names[i], op) == 0)
			return i;
	return -1;
}

int dk_unary_code(const char *op_type)
{
	static const char *const names[] = {"Relu", "Sigmoid", "Tanh", "Sqrt", "Erf", "Gelu", "",
					    "Abs", "Neg", "LeakyRelu"};

	return code_of(names, (int)(sizeof(names) / sizeof(names[0])), op_type);
}

int dk_reduce_code(const char *op_type)
{
	static const char *const names[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};

	return code_of(names, 4, op_type);
}

int dk_binary_code(const char *op_type)
{
	static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};

	return code_of(names, (int)(sizeof(names) / sizeof(names[0])), op_type);
}

int dk_unary_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
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

int dk_binary_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const none[] = {NULL};

	if (p->n_input != 2 || p->n_output != 1)
		return snprintf(why, n, "expects two inputs and one output"), 0;
	return !proto_attr_unknown(p, none, why, n);
}

int dk_gemm_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output != 1)
		return snprintf(why, n, "expects 2 or 3 inputs and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int dk_batchnorm_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", NULL};

	if (p->n_input != 5 || dk_n_outputs(p) != 1 || !p->output[0][0])
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

int dk_softmax_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	return one_in_one_out(p, known, why, n);
}

int dk_transpose_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"perm", NULL};

	return one_in_one_out(p, known, why, n);
}

int dk_concat_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	if (p->n_input < 1 || p->n_output != 1 || !proto_attr(p, "axis"))
		return snprintf(why, n, "expects inputs, one output and an axis"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

int dk_gather_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"axis", NULL};

	if (p->n_input != 2 || p->n_output != 1)
		return snprintf(why, n, "expects two inputs and one output"), 0;
	return !proto_attr_unknown(p, known, why, n);
}

void dk_bcast_strides(int xr, const int64_t *xd, int r, int64_t *st)
{
	int64_t s = 1;

	for (int i = r - 1; i >= 0; i--) {
		int xi = i - (r - xr);
		int64_t d = xi >= 0 ? xd[xi] : 1;

		st[i] = d == 1 ? 0 : s;
		s *= d;
	}
}

void dk_batch_strides(const int64_t *xd, int xr, int nb, const int64_t *bd, int64_t *st)
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
int dk_fold_strides(int r, const int64_t *dims, int64_t *sa, int64_t *sb, int64_t *od)
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

int dk_view_dims(const Onnx__NodeProto *p, int64_t opset, int rank, const int64_t *dims,
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

/* ---- capability checks ------------------------------------------------------ */

static int all_float(int node_ok, const Onnx__NodeProto *p, const int32_t *dt, int n_in,
		     char *why, size_t n)
{
	return node_ok && dk_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

int dk_unary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		      char *why, size_t n)
{
	(void)opset;
	return all_float(dk_unary_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_binary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	return all_float(dk_binary_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_gemm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n)
{
	(void)opset;
	return all_float(dk_gemm_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_batchnorm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)opset;
	return all_float(dk_batchnorm_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return all_float(dk_softmax_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_layernorm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)opset;
	return all_float(dk_layernorm_node_ok(p, n_in > 0 ? dt[0] : 0, why, n), p, dt, n_in, why, n);
}

int dk_transpose_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)opset;
	return all_float(dk_transpose_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_concat_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	return all_float(dk_concat_node_ok(p, why, n), p, dt, n_in, why, n);
}

/* ---- shapes ------------------------------------------------------------------- */

int dk_binary_out(dk_ctx *c, int max_rank, int64_t *fd, int64_t *sa, int64_t *sb,
		  const dk_val **y)
{
	const dk_val *a = dk_in(c, 0), *b = dk_in(c, 1);
	int64_t dims[EP_MAX_RANK];
	char s1[128], s2[128];
	int r, k;

	if (!a || !b || !dk_dev_dtype(a->dtype) || b->dtype != a->dtype)
		return dk_fail(c, EP_E_INVALID, "inputs are not float of one dtype"), -1;
	if ((r = onnx_broadcast(a->rank, a->dims, b->rank, b->dims, dims)) < 0)
		return dk_fail(c, EP_E_INVALID, "%s and %s do not broadcast",
			       dk_shape_str(a->rank, a->dims, s1, sizeof(s1)),
			       dk_shape_str(b->rank, b->dims, s2, sizeof(s2))), -1;
	*y = dk_out(c, 0, a->dtype, r, dims);
	if (!*y)
		return -1;
	dk_bcast_strides(a->rank, a->dims, r, sa);
	dk_bcast_strides(b->rank, b->dims, r, sb);
	k = dk_fold_strides(r, dims, sa, sb, fd);
	if (k > max_rank)
		return dk_fail(c, EP_E_UNSUPPORTED, "broadcast folds to %d dims (at most %d)", k,
			       max_rank), -1;
	return k;
}

static int suffix_of(const dk_val *s, const dk_val *x, int a)
{
	return dk_suffix_broadcasts(s->rank, s->dims, x->rank, x->dims, a);
}

int dk_layernorm_out(dk_ctx *c, int64_t *rows, dk_buf *mean, dk_buf *inv, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0), *s = dk_in(c, 1), *b = dk_in(c, 2);
	int a = x ? onnx_axis(proto_attr_int(c->node->proto, "axis", -1), x->rank) : -1;
	int64_t dims[EP_MAX_RANK];

	if (!x || !s || !dk_dev_dtype(x->dtype) || s->dtype != x->dtype ||
	    (b && b->dtype != x->dtype) || a < 0)
		return dk_fail(c, EP_E_INVALID, "X, Scale, B must be float of one dtype, axis in range");
	if (!suffix_of(s, x, a) || (b && !suffix_of(b, x, a)) || !s->numel || (b && !b->numel))
		return dk_fail(c, EP_E_UNSUPPORTED, "Scale or B does not broadcast as a suffix");
	*rows = 1;
	for (int i = 0; i < x->rank; i++) {
		*rows *= i < a ? x->dims[i] : 1;
		dims[i] = i < a ? x->dims[i] : 1;
	}
	*y = dk_out(c, 0, x->dtype, x->rank, x->dims);
	if (!*y)
		return c->status;
	memset(mean, 0, sizeof(*mean));
	memset(inv, 0, sizeof(*inv));
	/* Mean (1) and InvStdDev (2): float32, [rows..., 1...]. */
	for (int k = 1; k <= 2; k++) {
		const dk_val *o;

		if (k >= c->node->n_out || c->node->out[k] < 0)
			continue;
		o = dk_out(c, k, DK_FLOAT, x->rank, dims);
		if (!o)
			return c->status;
		*(k == 1 ? mean : inv) = o->dev;
	}
	return 0;
}

int dk_matmul_out(dk_ctx *c, dk_matmul *m, const dk_val **y)
{
	const dk_val *A = dk_in(c, 0), *B = dk_in(c, 1);
	int64_t da[EP_MAX_RANK + 1], db[EP_MAX_RANK + 1], od[EP_MAX_RANK];
	int ra, rb, r;
	char s1[128], s2[128];

	if (!A || !B || !dk_dev_dtype(A->dtype) || B->dtype != A->dtype || !A->rank || !B->rank)
		return dk_fail(c, EP_E_INVALID, "needs float operands of one dtype, rank >= 1");
	ra = A->rank + (A->rank == 1);
	rb = B->rank + (B->rank == 1);
	da[0] = 1;
	memcpy(da + (A->rank == 1), A->dims, sizeof(int64_t) * (size_t)A->rank);
	memcpy(db, B->dims, sizeof(int64_t) * (size_t)B->rank);
	if (B->rank == 1)
		db[1] = 1;
	if (da[ra - 1] != db[rb - 2] || (m->nb = onnx_broadcast(ra - 2, da, rb - 2, db, m->bd)) < 0)
		return dk_fail(c, EP_E_INVALID, "%s x %s do not multiply",
			       dk_shape_str(A->rank, A->dims, s1, sizeof(s1)),
			       dk_shape_str(B->rank, B->dims, s2, sizeof(s2)));
	memcpy(od, m->bd, sizeof(int64_t) * (size_t)m->nb);
	r = m->nb;
	if (A->rank > 1)
		od[r++] = da[ra - 2];
	if (B->rank > 1)
		od[r++] = db[rb - 1];
	m->M = da[ra - 2];
	m->K = da[ra - 1];
	m->N = db[rb - 1];
	dk_batch_strides(da, ra, m->nb, m->bd, m->sa);
	dk_batch_strides(db, rb, m->nb, m->bd, m->sb);
	*y = dk_out(c, 0, A->dtype, r, od);
	return *y ? 0 : c->status;
}

int dk_pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n)
{
	(void)opset;
	return all_float(dk_pool_node_ok(p, why, n), p, dt, n_in, why, n);
}

int dk_pool_out(dk_ctx *c, dk_window *g, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0);
	const int64_t *ks;
	int nk = proto_attr_ints(c->node->proto, "kernel_shape", &ks), nsp, rc;
	int64_t dims[5];
	char err[128];

	if (!x || !dk_dev_dtype(x->dtype) || x->rank != nk + 2)
		return dk_fail(c, EP_E_INVALID, "X must be float of rank %d", nk + 2);
	rc = dk_window_geometry(c->node->proto, x->rank, x->dims, ks, g, &nsp, err, sizeof(err));
	if (rc)
		return dk_fail(c, rc, "%s", err);
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[2 + i] = g->out[3 - nsp + i];
	*y = dk_out(c, 0, x->dtype, x->rank, dims);
	return *y ? 0 : c->status;
}

int dk_global_pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	static const char *const none[] = {NULL};

	(void)opset;
	if (p->n_input != 1 || p->n_output != 1)
		return snprintf(why, n, "expects one input and one output"), 0;
	if (proto_attr_unknown(p, none, why, n))
		return 0;
	return dk_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

int64_t dk_global_pool_out(dk_ctx *c, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0);
	int64_t dims[EP_MAX_RANK], S = 1;

	if (!x || !dk_dev_dtype(x->dtype) || x->rank < 2)
		return dk_fail(c, EP_E_INVALID, "X must be float of rank >= 2"), -1;
	for (int i = 0; i < x->rank; i++) {
		dims[i] = i < 2 ? x->dims[i] : 1;
		S *= i < 2 ? 1 : x->dims[i];
	}
	if (!S)
		return dk_fail(c, EP_E_UNSUPPORTED, "empty spatial dims"), -1;
	*y = dk_out(c, 0, x->dtype, x->rank, dims);
	return *y ? S : -1;
}

int dk_softmax_out(dk_ctx *c, int64_t *outer, int64_t *len, int64_t *inner, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0);
	int old = c->node->opset < 13;
	int a = x ? onnx_axis(proto_attr_int(c->node->proto, "axis", old ? 1 : -1), x->rank) : -1;

	if (x && x->rank == 0)
		a = 0;
	if (!x || !dk_dev_dtype(x->dtype) || a < 0)
		return dk_fail(c, EP_E_INVALID, "X must be float with axis in range");
	*outer = *inner = 1;
	for (int i = 0; i < a; i++)
		*outer *= x->dims[i];
	for (int i = a + 1; i < x->rank; i++)
		*inner *= x->dims[i];
	*len = x->rank ? x->dims[a] : 1;
	if (old) {
		*len *= *inner;
		*inner = 1;
	}
	*y = dk_out(c, 0, x->dtype, x->rank, x->dims);
	return *y ? 0 : c->status;
}

int dk_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  int f16, char *why, size_t n)
{
	int end = count < 0 ? n_in : first + count;
	int32_t seen = 0;

	for (int i = first; i < end && i < n_in; i++) {
		if (i < (int)p->n_input && !p->input[i][0])
			continue;
		if (dt[i] != DK_FLOAT && !(f16 && dt[i] == DK_FLOAT16)) {
			snprintf(why, n, "input %d is dtype %d (%s)", i, dt[i],
				 f16 ? "float32 or float16 only" : "float32 only");
			return 0;
		}
		if (seen && dt[i] != seen) {
			snprintf(why, n, "inputs mix float32 and float16");
			return 0;
		}
		seen = dt[i];
	}
	return 1;
}
