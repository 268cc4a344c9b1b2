/*
 * concat: ONNX Concat and Split for any dtype.  Both walk the dims before
 * `axis` as an outer loop and move one contiguous block per input/output.
 * Split's sizes come from the `split` attribute (before opset 13), the
 * second input (from 13), or an even split over the outputs (num_outputs
 * from opset 18 allows a smaller last chunk).
 */
#include <string.h>

#include "cpu_ops.h"
#include "par.h"

static int any_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

static int concat_check(cpu_ctx *ctx, const cpu_tensor *X0, int axis, int64_t *axis_total)
{
	*axis_total = 0;
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *X = cpu_input(ctx, i);
		if (!X)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is missing", i);
		if (X->dtype != X0->dtype || X->rank != X0->rank)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is %s rank %d, input 0 %s rank %d",
					i, cpu_dtype_name(X->dtype), X->rank,
					cpu_dtype_name(X0->dtype), X0->rank);
		for (int d = 0; d < X->rank; d++)
			if (d != axis && X->dims[d] != X0->dims[d])
				return cpu_fail(ctx, CPU_E_INVALID, "input %d dim %d is %lld, input 0 "
						"has %lld", i, d, (long long)X->dims[d],
						(long long)X0->dims[d]);
		*axis_total += X->dims[axis];
	}
	return 0;
}

/* The copies of Concat (parts into the whole) or Split (the whole into
 * parts) as bytes of the whole: its row o (`row` bytes, `end` in all)
 * holds each part's block o (sz[i] times `inner` bytes) in part order. */
typedef struct blocks_job {
	char *whole;
	char *const *parts;
	const int64_t *sz;
	int n, split;
	int64_t row, inner, end;
} blocks_job;

enum { CONCAT_CHUNK = 64 << 10 };   /* bytes of the whole a pool item */

/* Bytes [c0 * CONCAT_CHUNK, c1 * CONCAT_CHUNK) of the whole, clipped to
 * the end. */
static void blocks_range(void *arg, int64_t c0, int64_t c1, int member)
{
	const blocks_job *j = arg;
	int64_t b0 = c0 * CONCAT_CHUNK, b1 = c1 * CONCAT_CHUNK < j->end ? c1 * CONCAT_CHUNK : j->end;

	(void)member;
	for (int64_t o = b0 / j->row; o * j->row < b1; o++) {
		int64_t at = o * j->row;

		for (int i = 0; i < j->n && at < b1; i++) {
			int64_t block = j->sz[i] * j->inner;
			int64_t lo = at > b0 ? at : b0, hi = at + block < b1 ? at + block : b1;
			char *part = j->parts[i] + o * block + (lo - at);

			/* a part the core's plan placed inside the whole (a Concat
			 * whose parts die there: core/plan.c) is already in place */
			if (hi > lo && part != j->whole + lo)
				memcpy(j->split ? part : j->whole + lo, j->split ? j->whole + lo : part,
				       (size_t)(hi - lo));
			at += block;
		}
	}
}

/* ~0.1 ns a byte: up to 4 chunks (256 KiB) stay on the caller
 * (cpu_par_for's threshold), larger ones split over the pool (SqueezeNet's
 * fire Concats, YOLO's 3 MB channel Splits: 2.5x ONNX Runtime's time on
 * one thread). */
static void blocks_copy(cpu_ctx *ctx, const blocks_job *j)
{
	cpu_par_for(ctx, (j->end + CONCAT_CHUNK - 1) / CONCAT_CHUNK, 0.1 * CONCAT_CHUNK, 1,
		    blocks_range, (void *)j);
}

static int concat_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X0;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", 1), dims[CPU_MAX_RANK];
	int64_t outer = 1, inner, total, bytes, *sz;
	char **parts;
	size_t es;
	cpu_tensor *Y;
	int axis, rc = 0;

	if (!(X0 = cpu_require(ctx, 0, &rc)))
		return rc;
	if (ctx->node->opset >= 4 && !cpu_attr(ctx->node->proto, "axis"))
		return cpu_fail(ctx, CPU_E_INVALID, "attribute axis is required");
	if ((axis = cpu_norm_axis(raw, X0->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X0->rank);
	if ((rc = concat_check(ctx, X0, axis, &total)) != 0)
		return rc;
	memcpy(dims, X0->dims, sizeof(int64_t) * (size_t)X0->rank);
	dims[axis] = total;
	if (!(Y = cpu_output(ctx, 0, X0->dtype, X0->rank, dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X0->dtype);
	inner = (int64_t)es;
	for (int d = 0; d < X0->rank; d++) {
		if (d < axis)
			outer *= X0->dims[d];
		else if (d > axis)
			inner *= X0->dims[d];
	}
	bytes = outer * total * inner;
	if (!(sz = cpu_scratch(ctx, (sizeof(int64_t) + sizeof(char *)) * (size_t)ctx->n_in)))
		return CPU_E_NOMEM;
	parts = (char **)(sz + ctx->n_in);
	for (int i = 0; i < ctx->n_in; i++) {
		sz[i] = ctx->in[i]->dims[axis];
		parts[i] = (char *)ctx->in[i]->data;   /* read only: Concat copies into Y */
	}
	blocks_copy(ctx, &(blocks_job){Y->data, parts, sz, ctx->n_in, 0, total * inner, inner,
				       bytes});
	return 0;
}

/* Split sizes into sz[0..n_out); 0 or an error. */
static int split_sizes(cpu_ctx *ctx, int64_t dim, int64_t *sz)
{
	const int64_t *attr;
	int64_t n = -1, sum = 0, chunk;
	const cpu_tensor *S = cpu_input(ctx, 1);
	if (ctx->node->opset < 13 && cpu_attr(ctx->node->proto, "split")) {
		n = (int64_t)cpu_attr_ints(ctx->node->proto, "split", &attr);
		for (int64_t i = 0; i < n && n == ctx->n_out; i++)
			sz[i] = attr[i];
	} else if (S) {
		if (S->rank > 1 || (S->dtype != CPU_INT64 && S->dtype != CPU_INT32))
			return cpu_fail(ctx, CPU_E_INVALID, "split must be a 1-D int64 tensor");
		n = cpu_numel(S);
		for (int64_t i = 0; i < n && n == ctx->n_out; i++)
			sz[i] = cpu_get_i64(S->dtype, S->data, i);
	}
	if (n >= 0 && n != ctx->n_out)
		return cpu_fail(ctx, CPU_E_INVALID, "split has %lld sizes for %d outputs",
				(long long)n, ctx->n_out);
	if (n < 0) {
		/* even split; num_outputs (opset 18) lets the last chunk be smaller */
		chunk = (dim + ctx->n_out - 1) / ctx->n_out;
		if (!cpu_attr(ctx->node->proto, "num_outputs") && dim % ctx->n_out != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "dim %lld does not split evenly into %d",
					(long long)dim, ctx->n_out);
		for (int i = 0; i < ctx->n_out; i++)
			sz[i] = dim - i * chunk < chunk ? (dim - i * chunk > 0 ? dim - i * chunk : 0)
							: chunk;
	}
	for (int i = 0; i < ctx->n_out; i++) {
		if (sz[i] < 0 || sz[i] > dim - sum)
			return cpu_fail(ctx, CPU_E_INVALID, "split sizes do not add up to %lld",
					(long long)dim);
		sum += sz[i];
	}
	if (sum != dim)
		return cpu_fail(ctx, CPU_E_INVALID, "split sizes add up to %lld, not %lld",
				(long long)sum, (long long)dim);
	return 0;
}

static int split_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", 0), dims[CPU_MAX_RANK];
	int64_t outer = 1, inner, *sz, bytes;
	char **out;
	int axis, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (ctx->n_out < 1 || (axis = cpu_norm_axis(raw, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X->rank);
	if (!(sz = cpu_scratch(ctx, (sizeof(int64_t) + sizeof(char *)) * (size_t)ctx->n_out)))
		return CPU_E_NOMEM;
	out = (char **)(sz + ctx->n_out);
	if ((rc = split_sizes(ctx, X->dims[axis], sz)) != 0)
		return rc;
	inner = (int64_t)cpu_dtype_size(X->dtype);
	for (int d = 0; d < X->rank; d++) {
		if (d < axis)
			outer *= X->dims[d];
		else if (d > axis)
			inner *= X->dims[d];
	}
	memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	for (int i = 0; i < ctx->n_out; i++) {
		cpu_tensor *Y;

		dims[axis] = sz[i];
		if (!(Y = cpu_output(ctx, i, X->dtype, X->rank, dims)))
			return CPU_E_NOMEM;
		out[i] = Y->data;
	}
	bytes = outer * X->dims[axis] * inner;
	blocks_copy(ctx, &(blocks_job){(char *)X->data, out, sz, ctx->n_out, 1,
				       X->dims[axis] * inner, inner, bytes});   /* X read only */
	return 0;
}

const cpu_op cpu_op_concat = { "Concat", "", 1, CPU_OPSET_MAX, any_supports, NULL, concat_compute, NULL };
const cpu_op cpu_op_split = { "Split", "", 1, CPU_OPSET_MAX, any_supports, NULL, split_compute, NULL };
