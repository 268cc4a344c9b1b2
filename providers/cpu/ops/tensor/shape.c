/*
 * shape: the shape-computation ops — Shape (start/end from opset 15), Size,
 * ConstantOfShape (value attribute, float32 zero by default) and Range
 * (float32/float64/int16/int32/int64).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

static int shape_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t start = cpu_attr_int(ctx->node->proto, "start", 0), end, n;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	end = cpu_attr_int(ctx->node->proto, "end", X->rank);
	if (start < 0)
		start += X->rank;
	if (end < 0)
		end += X->rank;
	start = start < 0 ? 0 : start > X->rank ? X->rank : start;
	end = end < 0 ? 0 : end > X->rank ? X->rank : end;
	n = end > start ? end - start : 0;
	if (!(Y = cpu_output(ctx, 0, CPU_INT64, 1, &n)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < n; i++)
		((int64_t *)Y->data)[i] = X->dims[start + i];
	return 0;
}

static int size_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	cpu_tensor *Y;
	int rc = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (!(Y = cpu_output(ctx, 0, CPU_INT64, 0, NULL)))
		return CPU_E_NOMEM;
	*(int64_t *)Y->data = cpu_numel(X);
	return 0;
}

/* ConstantOfShape keeps its one-element value tensor in node->state. */
static int cos_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__TensorProto *tp = cpu_attr_tensor(node->proto, "value");
	cpu_tensor *v;
	if (!tp)
		return 0;
	if (!(v = cpu_tensor_from_proto(tp, err, n)))
		return CPU_E_INVALID;
	if (cpu_numel(v) != 1) {
		snprintf(err, n, "value must hold one element (has %lld)", (long long)cpu_numel(v));
		free(v);
		return CPU_E_INVALID;
	}
	node->state = v;
	return 0;
}

static void cos_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int cos_compute(cpu_ctx *ctx)
{
	static const float zero = 0.0f;
	const cpu_tensor *v = ctx->node->state, *S;
	const void *val = v ? v->data : &zero;
	int32_t dt = v ? v->dtype : CPU_FLOAT;
	size_t es = cpu_dtype_size(dt);
	int64_t dims[CPU_MAX_RANK], n, total;
	cpu_tensor *Y;
	int rc = 0;

	if (!(S = cpu_require(ctx, 0, &rc)))
		return rc;
	n = cpu_read_ints(S, dims, CPU_MAX_RANK);
	if (n < 0 || S->dtype != CPU_INT64 || cpu_shape_numel((int)n, dims) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "input must be a 1-D int64 shape of at most %d "
				"non-negative dims", CPU_MAX_RANK);
	if (!(Y = cpu_output(ctx, 0, dt, (int)n, dims)))
		return CPU_E_NOMEM;
	total = cpu_numel(Y);
	/* the value broadcast by a stride-0 copy (copy_row fills by element
	 * type: one memcpy call an element took 5 ns) */
	cpu_copy_strided(Y->data, val, es, 1, &total, &(int64_t){0});
	return 0;
}

static int64_t range_count(cpu_ctx *ctx, int32_t dt, const cpu_tensor *const *t, int *rc)
{
	double s, l, d, n;
	if (dt == CPU_FLOAT || dt == CPU_DOUBLE) {
		s = cpu_get_f64(dt, t[0]->data, 0);
		l = cpu_get_f64(dt, t[1]->data, 0);
		d = cpu_get_f64(dt, t[2]->data, 0);
		n = ceil((l - s) / d);
		if (d == 0.0 || isnan(n) || n > 1e15) {
			*rc = cpu_fail(ctx, CPU_E_INVALID, "bad range (%g, %g, %g)", s, l, d);
			return -1;
		}
		return n > 0.0 ? (int64_t)n : 0;
	} else {
		int64_t is = cpu_get_i64(dt, t[0]->data, 0), il = cpu_get_i64(dt, t[1]->data, 0);
		int64_t id = cpu_get_i64(dt, t[2]->data, 0);
		if (id == 0) {
			*rc = cpu_fail(ctx, CPU_E_INVALID, "range delta is 0");
			return -1;
		}
		/* the difference of two int64 fits in uint64 */
		if (id > 0)
			return il > is ? (int64_t)(((uint64_t)il - (uint64_t)is - 1) / (uint64_t)id) + 1 : 0;
		return is > il ? (int64_t)(((uint64_t)is - (uint64_t)il - 1) / (0 - (uint64_t)id)) + 1 : 0;
	}
}

static int range_compute(cpu_ctx *ctx)
{
	const cpu_tensor *t[3];
	cpu_tensor *Y;
	int64_t n;
	int rc = 0;

	for (int i = 0; i < 3; i++) {
		if (!(t[i] = cpu_require(ctx, i, &rc)))
			return rc;
		if (t[i]->dtype != t[0]->dtype || cpu_numel(t[i]) != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "start, limit and delta must be scalars "
					"of one dtype");
	}
	if ((rc = cpu_check_dtype(ctx, t[0], 0, CPU_TYPES_ARITH | CPU_BIT(CPU_INT16))) != 0)
		return rc;
	if ((n = range_count(ctx, t[0]->dtype, t, &rc)) < 0)
		return rc;
	if (!(Y = cpu_output(ctx, 0, t[0]->dtype, 1, &n)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < n; i++) {
		if (cpu_dtype_is_float(t[0]->dtype))
			cpu_set_f64(t[0]->dtype, Y->data, i, cpu_get_f64(t[0]->dtype, t[0]->data, 0) +
				    (double)i * cpu_get_f64(t[0]->dtype, t[2]->data, 0));
		else
			cpu_set_i64(t[0]->dtype, Y->data, i,
				    (int64_t)((uint64_t)cpu_get_i64(t[0]->dtype, t[0]->data, 0) +
					      (uint64_t)i * (uint64_t)cpu_get_i64(t[0]->dtype, t[2]->data, 0)));
	}
	return 0;
}

static int any_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

const cpu_op cpu_op_shape = { "Shape", "", 1, CPU_OPSET_MAX, any_supports, NULL, shape_compute, NULL };
const cpu_op cpu_op_size = { "Size", "", 1, CPU_OPSET_MAX, any_supports, NULL, size_compute, NULL };
const cpu_op cpu_op_constantofshape = {
	"ConstantOfShape", "", 9, CPU_OPSET_MAX, NULL, cos_prepare, cos_compute, cos_release,
};
const cpu_op cpu_op_range = { "Range", "", 11, CPU_OPSET_MAX, NULL, NULL, range_compute, NULL };
