/*
 * split_concat: ONNX SplitToSequence (a tensor cut along an axis into a
 * sequence: pieces of one given size, of listed sizes, or of size 1 with
 * the axis kept or dropped) and ConcatFromSequence (a sequence joined
 * along an existing axis, or stacked along a new one).
 */
#include <string.h>

#include "seq_ops.h"

/* Piece sizes from the optional split input; returns the count or -1. */
static int64_t split_sizes(cpu_ctx *ctx, const cpu_tensor *S, int64_t dim, int64_t **sizes)
{
	int64_t n, chunk;

	if (!S) {
		n = dim;
		chunk = 1;
	} else if (S->rank == 0) {
		chunk = cpu_get_i64(S->dtype, S->data, 0);
		if (chunk <= 0)
			return cpu_fail(ctx, CPU_E_INVALID, "split must be positive"), -1;
		n = (dim + chunk - 1) / chunk;
	} else {
		n = cpu_numel(S);
		chunk = 0;
	}
	*sizes = cpu_scratch(ctx, sizeof(int64_t) * (size_t)(n + 1));
	if (!*sizes)
		return -1;
	for (int64_t i = 0, left = dim; i < n; i++) {
		(*sizes)[i] = chunk ? (left < chunk ? left : chunk) : cpu_get_i64(S->dtype, S->data, i);
		if ((*sizes)[i] < 0 || (*sizes)[i] > left)
			return cpu_fail(ctx, CPU_E_INVALID, "split sizes do not add up to %lld",
					(long long)dim), -1;
		left -= (*sizes)[i];
		if (i == n - 1 && left != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "split sizes do not add up to %lld",
					(long long)dim), -1;
	}
	return n;
}

static int split_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X = cpu_input(ctx, 0), *S = cpu_input(ctx, 1);
	int64_t dims[CPU_MAX_RANK], *sizes, n, outer, inner, off = 0;
	int axis, keep = (int)cpu_attr_int(ctx->node->proto, "keepdims", 1), rank;
	size_t es;
	cpu_seq *s;

	if (!X || X->dtype == CPU_SEQUENCE || X->dtype == CPU_NONE || X->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "input 0 must be a tensor of rank >= 1");
	if (S && ((S->dtype != CPU_INT32 && S->dtype != CPU_INT64) || S->rank > 1))
		return cpu_fail(ctx, CPU_E_INVALID, "split must be an int32/int64 scalar or 1-D");
	axis = cpu_norm_axis(cpu_attr_int(ctx->node->proto, "axis", 0), X->rank);
	if (axis < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis out of range");
	if ((n = split_sizes(ctx, S, X->dims[axis], &sizes)) < 0)
		return CPU_E_INVALID;
	if (!(s = cpu_output_sequence(ctx, 0, X->dtype, (size_t)n)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	seq_split_dims(X->rank, X->dims, axis, &outer, &inner);
	for (int64_t i = 0; i < n; i++) {
		cpu_tensor *t;

		memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
		dims[axis] = sizes[i];
		rank = X->rank;
		if (!S && !keep) {
			memmove(dims + axis, dims + axis + 1, sizeof(int64_t) * (size_t)(rank - axis - 1));
			rank--;
		}
		if (!(t = cpu_seq_item(ctx, s, (size_t)i, X->dtype, rank, dims)))
			return CPU_E_NOMEM;
		for (int64_t o = 0; o < outer && sizes[i] > 0 && inner > 0; o++)
			memcpy((char *)t->data + (size_t)(o * sizes[i] * inner) * es,
			       (const char *)X->data + (size_t)((o * X->dims[axis] + off) * inner) * es,
			       (size_t)(sizes[i] * inner) * es);
		off += sizes[i];
	}
	return 0;
}

/* Output dims of the concatenation, checking every item against item 0. */
static int concat_dims(cpu_ctx *ctx, const cpu_seq *in, int axis, int new_axis, int64_t *dims)
{
	const cpu_tensor *t0 = &in->items[0];

	int64_t sum = 0;

	for (size_t i = 0; i < in->n; i++) {
		const cpu_tensor *t = &in->items[i];

		if (t->rank != t0->rank || t->dtype != t0->dtype)
			return cpu_fail(ctx, CPU_E_INVALID, "item %zu differs in rank or dtype", i);
		for (int d = 0; d < t->rank; d++)
			if ((new_axis || d != axis) && t->dims[d] != t0->dims[d])
				return cpu_fail(ctx, CPU_E_INVALID, "item %zu differs in dim %d", i, d);
		sum += new_axis ? 1 : t->dims[axis];
	}
	memcpy(dims, t0->dims, sizeof(int64_t) * (size_t)t0->rank);
	if (new_axis)
		memmove(dims + axis + 1, dims + axis, sizeof(int64_t) * (size_t)(t0->rank - axis));
	dims[axis] = sum;
	return 0;
}

static int concat_compute(cpu_ctx *ctx)
{
	int new_axis = cpu_attr_int(ctx->node->proto, "new_axis", 0) != 0, axis, rc = 0;
	int64_t dims[CPU_MAX_RANK], outer, inner, off = 0;
	const cpu_seq *in;
	cpu_tensor *Y;
	size_t es;

	if (!(in = seq_input(ctx, 0, &rc)))
		return rc;
	if (in->n == 0)
		return cpu_fail(ctx, CPU_E_INVALID, "the sequence is empty");
	if (in->items[0].rank + new_axis > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "rank too large");
	axis = cpu_norm_axis(cpu_attr_int(ctx->node->proto, "axis", 0), in->items[0].rank + new_axis);
	if (axis < 0 || (!new_axis && in->items[0].rank == 0))
		return cpu_fail(ctx, CPU_E_INVALID, "axis out of range");
	if ((rc = concat_dims(ctx, in, axis, new_axis, dims)))
		return rc;
	if (!(Y = cpu_output(ctx, 0, in->items[0].dtype, in->items[0].rank + new_axis, dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(Y->dtype);
	seq_split_dims(Y->rank, Y->dims, axis, &outer, &inner);
	for (size_t i = 0; i < in->n; i++) {
		const cpu_tensor *t = &in->items[i];
		int64_t len = new_axis ? 1 : t->dims[axis];

		for (int64_t o = 0; o < outer && len > 0 && inner > 0; o++)
			memcpy((char *)Y->data + (size_t)((o * Y->dims[axis] + off) * inner) * es,
			       (const char *)t->data + (size_t)(o * len * inner) * es,
			       (size_t)(len * inner) * es);
		off += len;
	}
	return 0;
}

const cpu_op cpu_op_splittosequence = {
	"SplitToSequence", "", 11, CPU_OPSET_MAX, NULL, NULL, split_compute, NULL,
};
const cpu_op cpu_op_concatfromsequence = {
	"ConcatFromSequence", "", 11, CPU_OPSET_MAX, NULL, NULL, concat_compute, NULL,
};
