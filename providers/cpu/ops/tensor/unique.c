/*
 * unique: ONNX Unique — the distinct elements of the flattened input, or
 * the distinct slices along `axis` (compared element by element, in
 * order, as numpy.unique does), sorted ascending or in order of first
 * occurrence, with the first-occurrence indices, the inverse indices and
 * the counts (all int64).  Any numeric dtype; NaN equals NaN.
 */
#include "tensor_ops.h"

typedef struct uq_view {
	const cpu_tensor *X;
	int64_t n, outer, inner;     /* slice i, element (o, e): (o * n + i) * inner + e */
} uq_view;

static int uq_cmp(const void *ctx, int64_t a, int64_t b)
{
	const uq_view *v = ctx;
	for (int64_t o = 0; o < v->outer; o++)
		for (int64_t e = 0; e < v->inner; e++) {
			int c = tensor_cmp_elem(v->X->dtype, v->X->data, (o * v->n + a) * v->inner + e,
						v->X->data, (o * v->n + b) * v->inner + e);
			if (c)
				return c;
		}
	return 0;
}

static int by_first(const void *ctx, int64_t a, int64_t b)
{
	const int64_t *first = ctx;
	return (first[a] > first[b]) - (first[a] < first[b]);
}

/* Groups equal slices: fills group[i] (each input slice's group), first[g]
 * and count[g] with groups numbered in output order; returns the count. */
static int64_t uq_group(const uq_view *v, int sorted, int64_t *order, int64_t *tmp,
			int64_t *group, int64_t *first, int64_t *count, int64_t *rank)
{
	int64_t ng = 0;
	for (int64_t i = 0; i < v->n; i++)
		order[i] = i;
	tensor_sort(order, v->n, uq_cmp, v, tmp);
	for (int64_t k = 0; k < v->n; k++) {
		if (k == 0 || uq_cmp(v, order[k - 1], order[k]) != 0) {
			first[ng] = order[k];   /* stable: the smallest index comes first */
			count[ng++] = 0;
		}
		group[order[k]] = ng - 1;
		count[ng - 1]++;
	}
	for (int64_t g = 0; g < ng; g++)
		rank[g] = g;
	if (!sorted) {
		/* output order = first occurrence; rank[g] = output slot of group g */
		for (int64_t g = 0; g < ng; g++)
			order[g] = g;
		tensor_sort(order, ng, by_first, first, tmp);
		for (int64_t s = 0; s < ng; s++)
			rank[order[s]] = s;
	}
	return ng;
}

static int uq_outputs(cpu_ctx *ctx, const uq_view *v, int axis, int64_t ng,
		      const int64_t *group, const int64_t *first, const int64_t *count,
		      const int64_t *rank)
{
	const cpu_tensor *X = v->X;
	int64_t dims[CPU_MAX_RANK], one[1] = {ng}, nin[1] = {v->n};
	size_t es = cpu_dtype_size(X->dtype), block = (size_t)v->inner * es;
	cpu_tensor *Y, *I, *R, *C;
	int rank_y = axis < 0 ? 1 : X->rank;

	if (axis >= 0)
		memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	dims[axis < 0 ? 0 : axis] = ng;
	if (!(Y = cpu_output(ctx, 0, X->dtype, rank_y, dims)) ||
	    !(I = cpu_output(ctx, 1, CPU_INT64, 1, one)) ||
	    !(R = cpu_output(ctx, 2, CPU_INT64, 1, nin)) ||
	    !(C = cpu_output(ctx, 3, CPU_INT64, 1, one)))
		return CPU_E_NOMEM;
	for (int64_t g = 0; g < ng; g++) {
		int64_t s = rank[g];
		((int64_t *)I->data)[s] = first[g];
		((int64_t *)C->data)[s] = count[g];
		for (int64_t o = 0; o < v->outer; o++)
			memcpy((char *)Y->data + (size_t)(o * ng + s) * block,
			       (const char *)X->data + (size_t)(o * v->n + first[g]) * block, block);
	}
	for (int64_t i = 0; i < v->n; i++)
		((int64_t *)R->data)[i] = rank[group[i]];
	return 0;
}

static int unique_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X;
	int64_t *a[6], ng;
	uq_view v;
	int axis = -1, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_NUMERIC | CPU_BIT(CPU_UINT64) |
				  CPU_BIT(CPU_BOOL) | CPU_BIT(CPU_BFLOAT16))))
		return rc;
	if (cpu_attr(p, "axis") &&
	    (axis = cpu_norm_axis(cpu_attr_int(p, "axis", 0), X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis out of range for rank %d", X->rank);
	v.X = X;
	v.outer = v.inner = 1;
	v.n = axis < 0 ? cpu_numel(X) : X->dims[axis];
	for (int d = 0; axis >= 0 && d < X->rank; d++) {
		if (d < axis)
			v.outer *= X->dims[d];
		else if (d > axis)
			v.inner *= X->dims[d];
	}
	for (int k = 0; k < 6; k++)
		if (!(a[k] = cpu_scratch(ctx, sizeof(int64_t) * (size_t)v.n + 1)))
			return CPU_E_NOMEM;
	ng = uq_group(&v, cpu_attr_int(p, "sorted", 1) != 0, a[0], a[1], a[2], a[3], a[4], a[5]);
	return uq_outputs(ctx, &v, axis, ng, a[2], a[3], a[4], a[5]);
}

const cpu_op cpu_op_unique = {
	"Unique", "", 11, CPU_OPSET_MAX, NULL, NULL, unique_compute, NULL,
};
