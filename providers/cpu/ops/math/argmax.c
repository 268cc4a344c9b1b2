/*
 * argmax: ArgMax and ArgMin (int64 indices along one axis; keepdims;
 * select_last_index from opset 12 picks the last of equal extremes) and
 * Hardmax (one-hot of the first maximum: along `axis` from opset 13, over
 * the 2-D coercion at `axis` before).  Every numeric dtype; values compare
 * as double, int64 or uint64 by dtype, and a NaN wins like numpy's argmax.
 */
#include <string.h>

#include "math_ops.h"

/* a better than b for argmax (sign 1) or argmin (sign -1)? */
static int better(const cpu_tensor *X, int64_t a, int64_t b, int sign, int ties)
{
	int32_t dt = X->dtype;
	int c;
	if (cpu_dtype_is_float(dt)) {
		double x = cpu_get_f64(dt, X->data, a), y = cpu_get_f64(dt, X->data, b);
		if (y != y)
			return 0;
		if (x != x)
			return 1;
		c = x > y ? 1 : x < y ? -1 : 0;
	} else if (math_dtype_is_unsigned(dt)) {
		uint64_t x = math_get_u64(dt, X->data, a), y = math_get_u64(dt, X->data, b);
		c = x > y ? 1 : x < y ? -1 : 0;
	} else {
		int64_t x = cpu_get_i64(dt, X->data, a), y = cpu_get_i64(dt, X->data, b);
		c = x > y ? 1 : x < y ? -1 : 0;
	}
	return c * sign > 0 || (c == 0 && ties);
}

/* Index along the line (base, n elements, stride st) of the best value. */
static int64_t best_index(const cpu_tensor *X, int64_t base, int64_t n, int64_t st, int sign,
			  int last)
{
	int64_t best = 0;
	for (int64_t k = 1; k < n; k++)
		if (better(X, base + k * st, base + best * st, sign, last))
			best = k;
	return best;
}

static int num_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, MATH_TYPES_NUM, why, n);
}

static int arg_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	int sign = !strcmp(p->op_type, "ArgMax") ? 1 : -1, rc = 0, axis, orank = 0;
	int keep = cpu_attr_int(p, "keepdims", 1) != 0;
	int last = cpu_attr_int(p, "select_last_index", 0) != 0;
	int64_t od[CPU_MAX_RANK], outer, n, inner, ax = cpu_attr_int(p, "axis", 0);
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t *y;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_NUM)))
		return rc;
	if ((axis = cpu_norm_axis(ax, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)ax, X->rank);
	math_split_axis(X, axis, &outer, &n, &inner);
	if (n == 0 && outer * inner > 0)
		return cpu_fail(ctx, CPU_E_INVALID, "cannot reduce an empty axis %d", axis);
	for (int d = 0; d < X->rank; d++)
		if (d != axis || keep)
			od[orank++] = d == axis ? 1 : X->dims[d];
	if (!(Y = cpu_output(ctx, 0, CPU_INT64, orank, od)))
		return CPU_E_NOMEM;
	y = Y->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++)
			y[o * inner + i] = best_index(X, o * n * inner + i, n, inner, sign, last);
	return 0;
}

static int hardmax_compute(cpu_ctx *ctx)
{
	int legacy = ctx->node->opset < 13, rc = 0, axis;
	int64_t ax = cpu_attr_int(ctx->node->proto, "axis", legacy ? 1 : -1), outer, n, inner;
	const cpu_tensor *X;
	cpu_tensor *Y, flat;
	size_t es;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_NUM)))
		return rc;
	axis = cpu_norm_axis(ax, X->rank);
	if (axis < 0 && !(legacy && ax == X->rank))
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)ax, X->rank);
	if (legacy) {   /* [d0 * .. * d(axis-1), rest]: one line of n, inner 1 */
		flat.rank = 2;
		flat.dims[0] = cpu_shape_numel(axis < 0 ? X->rank : axis, X->dims);
		flat.dims[1] = flat.dims[0] ? cpu_numel(X) / flat.dims[0] : 0;
		math_split_axis(&flat, 1, &outer, &n, &inner);
	} else {
		math_split_axis(X, axis, &outer, &n, &inner);
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	memset(Y->data, 0, (size_t)cpu_numel(X) * es);
	for (int64_t o = 0; o < outer && n > 0; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * n * inner + i;
			int64_t k = best_index(X, base, n, inner, 1, 0);
			cpu_set_f64(X->dtype, Y->data, base + k * inner, 1.0);
		}
	return 0;
}

const cpu_op cpu_op_argmax = { "ArgMax", "", 1, CPU_OPSET_MAX, num_supports, NULL, arg_compute, NULL };
const cpu_op cpu_op_argmin = { "ArgMin", "", 1, CPU_OPSET_MAX, num_supports, NULL, arg_compute, NULL };
const cpu_op cpu_op_hardmax = { "Hardmax", "", 1, CPU_OPSET_MAX, num_supports, NULL, hardmax_compute, NULL };
