/*
 * trilu: ONNX Trilu (keep the upper or lower triangle of the last two dims,
 * shifted by the diagonal offset k) and EyeLike (a 2-D identity, shifted by
 * k, in the input's or the `dtype` attribute's type).  Both work on any
 * dtype: zero is the all-zero bit pattern in every ONNX numeric type.
 */
#include <stdio.h>

#include "tensor_ops.h"

static int trilu_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *K = cpu_input(ctx, 1);
	int upper = cpu_attr_int(ctx->node->proto, "upper", 1) != 0, rc = 0;
	int64_t k = 0, rows, cols, mats = 1;
	double kv;
	size_t es;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (X->rank < 2)
		return cpu_fail(ctx, CPU_E_INVALID, "input rank %d is below 2", X->rank);
	if (K) {
		if ((K->dtype != CPU_INT64 && K->dtype != CPU_INT32) || cpu_read_scalar(K, &kv))
			return cpu_fail(ctx, CPU_E_INVALID, "k must be an int64 scalar");
		k = cpu_get_i64(K->dtype, K->data, 0);
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	rows = X->dims[X->rank - 2];
	cols = X->dims[X->rank - 1];
	for (int d = 0; d < X->rank - 2; d++)
		mats *= X->dims[d];
	es = cpu_dtype_size(X->dtype);
	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < rows; i++) {
			size_t row = (size_t)((m * rows + i) * cols) * es;
			char *y = (char *)Y->data + row;
			const char *x = (const char *)X->data + row;
			/* keep j - i >= k (upper) or j - i <= k (lower); the bounds are
			 * clamped so a huge k cannot overflow */
			int64_t lo = upper ? (k > cols ? cols : i + k < 0 ? 0 : i + k) : 0;
			int64_t hi = upper ? cols : (k >= cols ? cols : i + k + 1 < 0 ? 0 : i + k + 1);
			if (lo > cols)
				lo = cols;
			if (hi > cols)
				hi = cols;
			if (hi < lo)
				hi = lo;
			memset(y, 0, (size_t)lo * es);
			if (y != x)
				memmove(y + (size_t)lo * es, x + (size_t)lo * es, (size_t)(hi - lo) * es);
			memset(y + (size_t)hi * es, 0, (size_t)(cols - hi) * es);
		}
	return 0;
}

static int eyelike_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t k = cpu_attr_int(ctx->node->proto, "k", 0);
	int32_t dt;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	dt = (int32_t)cpu_attr_int(ctx->node->proto, "dtype", X->dtype);
	if (X->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "input rank %d is not 2", X->rank);
	if (dt <= 0 || dt >= 32 || dt == CPU_STRING || cpu_dtype_size(dt) == 0)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "dtype %d is not supported", (int)dt);
	if (!(Y = cpu_output(ctx, 0, dt, 2, X->dims)))
		return CPU_E_NOMEM;
	memset(Y->data, 0, (size_t)cpu_numel(Y) * cpu_dtype_size(dt));
	for (int64_t i = 0; i < X->dims[0]; i++) {
		int64_t j = i + k;
		if (k > X->dims[1] || k < -X->dims[0])
			break;
		if (j >= 0 && j < X->dims[1])
			cpu_set_f64(dt, Y->data, i * X->dims[1] + j, 1.0);
	}
	return 0;
}

static int trilu_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			  int n_in, char *why, size_t n)
{
	return tensor_supports_any(p, opset, dt, n_in, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n);
}

static int eyelike_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	int64_t to = cpu_attr_int(p, "dtype", 0);
	if (cpu_attr(p, "dtype") && (to <= 0 || to >= 32 || to == CPU_STRING ||
				     cpu_dtype_size((int32_t)to) == 0)) {
		snprintf(why, n, "dtype %lld is not supported", (long long)to);
		return 0;
	}
	return tensor_supports_any(p, opset, dt, n_in, why, n);
}

const cpu_op cpu_op_trilu = {
	"Trilu", "", 14, CPU_OPSET_MAX, trilu_supports, NULL, trilu_compute, NULL,
};
const cpu_op cpu_op_eyelike = {
	"EyeLike", "", 9, CPU_OPSET_MAX, eyelike_supports, NULL, eyelike_compute, NULL,
};
