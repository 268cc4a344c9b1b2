/*
 * gather_index: ONNX GatherElements and GatherND, for any data dtype with
 * int32/int64 indices (negative indices count from the end).  Every index
 * is checked against its dim before it is used: an index out of range is a
 * CPU_E_INVALID error, never a read outside the data.
 */
#include "tensor_ops.h"

static int index_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			  int n_in, char *why, size_t n)
{
	return tensor_supports_any(p, opset, dt, n_in, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n);
}

static int bad_index(cpu_ctx *ctx, int64_t v, int64_t dim, int axis)
{
	return cpu_fail(ctx, CPU_E_INVALID, "index %lld out of range [-%lld, %lld) on axis %d",
			(long long)v, (long long)dim, (long long)dim, axis);
}

static int gather_elements_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", 0), n, xs[CPU_MAX_RANK];
	int64_t pos[CPU_MAX_RANK] = {0};
	size_t es;
	cpu_tensor *Y;
	int axis, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_TYPES_INDEX)) != 0)
		return rc;
	if (X->rank < 1 || I->rank != X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "data (rank %d) and indices (rank %d) must have "
				"one rank >= 1", X->rank, I->rank);
	if ((axis = cpu_norm_axis(raw, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X->rank);
	for (int d = 0; d < X->rank; d++)
		if (d != axis && I->dims[d] > X->dims[d])
			return cpu_fail(ctx, CPU_E_INVALID, "indices dim %d (%lld) exceeds data's "
					"(%lld)", d, (long long)I->dims[d], (long long)X->dims[d]);
	if (!(Y = cpu_output(ctx, 0, X->dtype, I->rank, I->dims)))
		return CPU_E_NOMEM;
	tensor_strides(X->rank, X->dims, xs);
	es = cpu_dtype_size(X->dtype);
	n = cpu_numel(I);
	for (int64_t k = 0; k < n; k++) {
		int64_t v = cpu_get_i64(I->dtype, I->data, k), off = 0;
		int64_t at = tensor_norm_index(v, X->dims[axis]);
		if (at < 0)
			return bad_index(ctx, v, X->dims[axis], axis);
		for (int d = 0; d < X->rank; d++)
			off += (d == axis ? at : pos[d]) * xs[d];
		tensor_copy_elem((char *)Y->data + (size_t)k * es,
				 (const char *)X->data + (size_t)off * es, es);
		for (int d = I->rank - 1; d >= 0 && ++pos[d] == I->dims[d]; d--)
			pos[d] = 0;
	}
	return 0;
}

/* Checks GatherND's shapes and fills the output dims; returns the rank or
 * a negative status. */
static int gathernd_shape(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *I, int64_t b,
			  int64_t *dims)
{
	int64_t k;
	int r = 0;
	if (I->rank < 1 || X->rank < 1 || b < 0 || b >= I->rank || b >= X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "batch_dims %lld does not fit data rank %d and "
				"indices rank %d", (long long)b, X->rank, I->rank);
	k = I->dims[I->rank - 1];
	if (k < 1 || b + k > X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "indices' last dim %lld exceeds data rank %d "
				"less batch_dims %lld", (long long)k, X->rank, (long long)b);
	for (int d = 0; d < b; d++)
		if (I->dims[d] != X->dims[d])
			return cpu_fail(ctx, CPU_E_INVALID, "batch dim %d differs: data %lld, "
					"indices %lld", d, (long long)X->dims[d],
					(long long)I->dims[d]);
	for (int d = 0; d < I->rank - 1; d++)
		dims[r++] = I->dims[d];
	for (int d = (int)(b + k); d < X->rank; d++)
		dims[r++] = X->dims[d];
	if (r > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "result rank above %d", CPU_MAX_RANK);
	return r;
}

static int gathernd_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I;
	int64_t b = cpu_attr_int(ctx->node->proto, "batch_dims", 0), dims[2 * CPU_MAX_RANK];
	int64_t xs[CPU_MAX_RANK], k, nb = 1, nt = 1, slice = 1;
	size_t es;
	cpu_tensor *Y;
	int r, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_TYPES_INDEX)) != 0)
		return rc;
	if ((r = gathernd_shape(ctx, X, I, b, dims)) < 0)
		return r;
	if (!(Y = cpu_output(ctx, 0, X->dtype, r, dims)))
		return CPU_E_NOMEM;
	k = I->dims[I->rank - 1];
	tensor_strides(X->rank, X->dims, xs);
	for (int d = 0; d < b; d++)
		nb *= X->dims[d];
	for (int d = (int)b; d < I->rank - 1; d++)
		nt *= I->dims[d];
	for (int d = (int)(b + k); d < X->rank; d++)
		slice *= X->dims[d];
	es = cpu_dtype_size(X->dtype);
	for (int64_t bi = 0; bi < nb; bi++)
		for (int64_t t = 0; t < nt; t++) {
			int64_t row = bi * nt + t, off = b ? bi * xs[b - 1] : 0;
			for (int64_t j = 0; j < k; j++) {
				int64_t v = cpu_get_i64(I->dtype, I->data, row * k + j);
				int64_t at = tensor_norm_index(v, X->dims[b + j]);
				if (at < 0)
					return bad_index(ctx, v, X->dims[b + j], (int)(b + j));
				off += at * xs[b + j];
			}
			if (slice)
				memcpy((char *)Y->data + (size_t)(row * slice) * es,
				       (const char *)X->data + (size_t)off * es, (size_t)slice * es);
		}
	return 0;
}

const cpu_op cpu_op_gatherelements = {
	"GatherElements", "", 11, CPU_OPSET_MAX, index_supports, NULL, gather_elements_compute,
	NULL,
};
const cpu_op cpu_op_gathernd = {
	"GatherND", "", 11, CPU_OPSET_MAX, index_supports, NULL, gathernd_compute, NULL,
};
