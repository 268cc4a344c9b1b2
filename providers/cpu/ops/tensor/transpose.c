/*
 * transpose: ONNX Transpose for any dtype (by element size).  The output is
 * a strided view of the input gathered with cpu_copy_strided; dims that stay
 * adjacent merge, so permutations that keep the last dim copy whole rows.
 */
#include "cpu_ops.h"

static int transpose_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			      int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

static int transpose_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	const int64_t *perm;
	int64_t dims[CPU_MAX_RANK], xs[CPU_MAX_RANK], st[CPU_MAX_RANK], p[CPU_MAX_RANK];
	unsigned char seen[CPU_MAX_RANK] = {0};
	size_t np;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	np = cpu_attr_ints(ctx->node->proto, "perm", &perm);
	if (np && np != (size_t)X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "perm has %zu entries for rank %d", np, X->rank);
	xs[X->rank ? X->rank - 1 : 0] = 1;
	for (int d = X->rank - 2; d >= 0; d--)
		xs[d] = xs[d + 1] * X->dims[d + 1];
	for (int i = 0; i < X->rank; i++) {
		p[i] = np ? perm[i] : X->rank - 1 - i;
		if (p[i] < 0 || p[i] >= X->rank || seen[p[i]])
			return cpu_fail(ctx, CPU_E_INVALID, "perm is not a permutation of 0..%d",
					X->rank - 1);
		seen[p[i]] = 1;
		dims[i] = X->dims[p[i]];
		st[i] = xs[p[i]];
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	cpu_copy_strided_par(ctx, Y->data, X->data, cpu_dtype_size(X->dtype), X->rank, dims, st);
	return 0;
}

const cpu_op cpu_op_transpose = {
	"Transpose", "", 1, CPU_OPSET_MAX, transpose_supports, NULL, transpose_compute, NULL,
};
