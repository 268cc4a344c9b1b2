/*
 * gather: ONNX Gather for any data dtype with int32/int64 indices (negative
 * indices count from the end).  Every index is bounds-checked before any
 * copy: an out-of-range index is a CPU_E_INVALID error, never a read past
 * the data.
 */
#include <string.h>

#include "cpu_ops.h"

static int gather_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			   int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n);
}

static int gather_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", 0), dims[CPU_MAX_RANK];
	int64_t outer = 1, inner, n_idx, s;
	cpu_tensor *Y;
	char *out;
	int axis, r = 0, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_TYPES_INDEX)) != 0)
		return rc;
	if ((axis = cpu_norm_axis(raw, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X->rank);
	if (X->rank - 1 + I->rank > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "result rank above %d", CPU_MAX_RANK);
	s = X->dims[axis];
	n_idx = cpu_numel(I);
	for (int64_t k = 0; k < n_idx; k++) {
		int64_t v = cpu_get_i64(I->dtype, I->data, k);
		if (v < -s || v >= s)
			return cpu_fail(ctx, CPU_E_INVALID, "index %lld out of range [-%lld, %lld) "
					"on axis %d", (long long)v, (long long)s, (long long)s, axis);
	}
	inner = (int64_t)cpu_dtype_size(X->dtype);
	for (int d = 0; d < X->rank; d++) {
		if (d < axis) {
			outer *= X->dims[d];
			dims[r++] = X->dims[d];
		} else if (d == axis) {
			for (int j = 0; j < I->rank; j++)
				dims[r++] = I->dims[j];
		} else {
			inner *= X->dims[d];
			dims[r++] = X->dims[d];
		}
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, r, dims)))
		return CPU_E_NOMEM;
	out = Y->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < n_idx; k++, out += inner) {
			int64_t v = cpu_get_i64(I->dtype, I->data, k);
			if (v < 0)
				v += s;
			memcpy(out, (const char *)X->data + (o * s + v) * inner, (size_t)inner);
		}
	return 0;
}

const cpu_op cpu_op_gather = {
	"Gather", "", 1, CPU_OPSET_MAX, gather_supports, NULL, gather_compute, NULL,
};
