/*
 * cumsum: CumSum (running sum along the axis given by the scalar input 1;
 * `exclusive` leaves each element out of its own sum, `reverse` runs from
 * the end) and Det (determinant of the trailing M x M matrices, by LU
 * decomposition with partial pivoting in double).  CumSum sums floats in
 * double and integers in wrapping 64-bit arithmetic.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

static void cumsum_line(const cpu_tensor *X, cpu_tensor *Y, int64_t base, int64_t n,
			int64_t st, int excl, int rev)
{
	int is_f = cpu_dtype_is_float(X->dtype);
	double sf = 0.0;
	uint64_t si = 0;
	for (int64_t k = 0; k < n; k++) {
		int64_t i = base + (rev ? n - 1 - k : k) * st;
		double vf = is_f ? cpu_get_f64(X->dtype, X->data, i) : 0.0;
		uint64_t vi = is_f ? 0 : math_get_u64(X->dtype, X->data, i);
		if (!excl) {
			sf += vf;
			si += vi;
		}
		if (is_f)
			cpu_set_f64(Y->dtype, Y->data, i, sf);
		else
			cpu_set_i64(Y->dtype, Y->data, i, (int64_t)si);
		if (excl) {
			sf += vf;
			si += vi;
		}
	}
}

static int cumsum_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	int excl = cpu_attr_int(p, "exclusive", 0) != 0, rev = cpu_attr_int(p, "reverse", 0) != 0;
	const cpu_tensor *X, *A;
	int64_t ax, outer, n, inner;
	cpu_tensor *Y;
	int rc = 0, axis;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_NUM)))
		return rc;
	if (!(A = cpu_require(ctx, 1, &rc)) || (rc = cpu_check_dtype(ctx, A, 1, CPU_TYPES_INDEX)))
		return rc;
	if (A->rank > 1 || cpu_numel(A) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "axis must be a scalar");
	ax = cpu_get_i64(A->dtype, A->data, 0);
	if ((axis = cpu_norm_axis(ax, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)ax, X->rank);
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	math_split_axis(X, axis, &outer, &n, &inner);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++)
			cumsum_line(X, Y, o * n * inner + i, n, inner, excl, rev);
	return 0;
}

/* Determinant of the n x n row-major matrix a (destroyed). */
static double det_lu(double *a, int64_t n)
{
	double det = 1.0;
	for (int64_t k = 0; k < n; k++) {
		int64_t piv = k;
		for (int64_t r = k + 1; r < n; r++)
			if (fabs(a[r * n + k]) > fabs(a[piv * n + k]))
				piv = r;
		if (a[piv * n + k] == 0.0)
			return 0.0;
		if (piv != k) {
			for (int64_t c = 0; c < n; c++) {
				double t = a[k * n + c];
				a[k * n + c] = a[piv * n + c];
				a[piv * n + c] = t;
			}
			det = -det;
		}
		det *= a[k * n + k];
		for (int64_t r = k + 1; r < n; r++) {
			double f = a[r * n + k] / a[k * n + k];
			for (int64_t c = k + 1; c < n; c++)
				a[r * n + c] -= f * a[k * n + c];
		}
	}
	return det;
}

static int det_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t M, count;
	double *x;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_FLOAT)))
		return rc;
	if (X->rank < 2 || X->dims[X->rank - 1] != X->dims[X->rank - 2])
		return cpu_fail(ctx, CPU_E_INVALID, "input must be [*, M, M]");
	M = X->dims[X->rank - 1];
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank - 2, X->dims)))
		return CPU_E_NOMEM;
	if (!(x = math_to_f64(ctx, X)))
		return CPU_E_NOMEM;
	count = cpu_numel(Y);
	for (int64_t b = 0; b < count; b++)
		cpu_set_f64(Y->dtype, Y->data, b, det_lu(x + b * M * M, M));
	return 0;
}

static int cumsum_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			   int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, MATH_TYPES_NUM, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n);
}

static int det_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, MATH_TYPES_FLOAT, why, n);
}

const cpu_op cpu_op_cumsum = { "CumSum", "", 11, CPU_OPSET_MAX, cumsum_supports, NULL, cumsum_compute, NULL };
const cpu_op cpu_op_det = { "Det", "", 11, CPU_OPSET_MAX, det_supports, NULL, det_compute, NULL };
