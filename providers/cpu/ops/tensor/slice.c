/*
 * slice: ONNX Slice for any dtype.  Before opset 10 starts/ends/axes are
 * attributes; from 10 they (and steps) are int32/int64 inputs.  Starts and
 * ends clamp as the spec says (negative counts from the end, out-of-range
 * clamps, negative steps walk backwards); the result is a strided view
 * gathered with cpu_copy_strided.
 */
#include <string.h>

#include "cpu_ops.h"

typedef struct slice_args {
	int64_t n;
	int64_t starts[CPU_MAX_RANK], ends[CPU_MAX_RANK], axes[CPU_MAX_RANK], steps[CPU_MAX_RANK];
} slice_args;

static int64_t attr_copy(const Onnx__NodeProto *p, const char *name, int64_t *dst)
{
	const int64_t *v;
	size_t n = cpu_attr_ints(p, name, &v);
	if (n > CPU_MAX_RANK)
		return -1;
	for (size_t i = 0; i < n; i++)
		dst[i] = v[i];
	return (int64_t)n;
}

/* Fills a from attributes or inputs; axes default 0..n-1, steps 1. */
static int slice_read(cpu_ctx *ctx, slice_args *a)
{
	int64_t ne, na = -1, ns = -1;
	if (ctx->node->opset < 10) {
		a->n = attr_copy(ctx->node->proto, "starts", a->starts);
		ne = attr_copy(ctx->node->proto, "ends", a->ends);
		if (cpu_attr(ctx->node->proto, "axes"))
			na = attr_copy(ctx->node->proto, "axes", a->axes);
	} else {
		if (!cpu_input(ctx, 1) || !cpu_input(ctx, 2))
			return cpu_fail(ctx, CPU_E_INVALID, "starts and ends are required");
		a->n = cpu_read_ints(cpu_input(ctx, 1), a->starts, CPU_MAX_RANK);
		ne = cpu_read_ints(cpu_input(ctx, 2), a->ends, CPU_MAX_RANK);
		if (cpu_input(ctx, 3))
			na = cpu_read_ints(cpu_input(ctx, 3), a->axes, CPU_MAX_RANK);
		if (cpu_input(ctx, 4))
			ns = cpu_read_ints(cpu_input(ctx, 4), a->steps, CPU_MAX_RANK);
	}
	if (a->n < 0 || ne != a->n || (na != -1 && na != a->n) || (ns != -1 && ns != a->n))
		return cpu_fail(ctx, CPU_E_INVALID, "starts, ends, axes and steps must be int "
				"lists of one length (at most %d)", CPU_MAX_RANK);
	for (int64_t i = 0; i < a->n; i++) {
		if (na == -1)
			a->axes[i] = i;
		if (ns == -1)
			a->steps[i] = 1;
	}
	return 0;
}

/* Clamps [start, end) with step on a dim of size dim; returns the count. */
static int64_t slice_dim(int64_t dim, int64_t *start, int64_t end, int64_t step)
{
	int64_t s = *start, e = end;
	if (s < 0)
		s = s < -dim ? 0 : s + dim;   /* written to avoid overflow */
	if (e < 0)
		e = e < -dim ? -1 : e + dim;
	if (step > 0) {
		s = s > dim ? dim : s;
		e = e < 0 ? 0 : e > dim ? dim : e;
		*start = s;
		return e > s ? 1 + (e - s - 1) / step : 0;
	}
	s = s > dim - 1 ? dim - 1 : s;
	e = e > dim - 1 ? dim - 1 : e;
	*start = s;
	return s > e ? 1 + (s - e - 1) / -step : 0;
}

static int slice_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	slice_args a;
	int64_t dims[CPU_MAX_RANK], st[CPU_MAX_RANK], xs[CPU_MAX_RANK], off = 0;
	unsigned char seen[CPU_MAX_RANK] = {0};
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = slice_read(ctx, &a)) != 0)
		return rc;
	for (int d = X->rank - 1; d >= 0; d--) {
		xs[d] = d == X->rank - 1 ? 1 : xs[d + 1] * X->dims[d + 1];
		dims[d] = X->dims[d];
		st[d] = xs[d];
	}
	for (int64_t i = 0; i < a.n; i++) {
		int ax = cpu_norm_axis(a.axes[i], X->rank);
		int64_t start = a.starts[i];
		if (ax < 0 || seen[ax])
			return cpu_fail(ctx, CPU_E_INVALID, "bad or repeated axis %lld",
					(long long)a.axes[i]);
		if (a.steps[i] == 0)
			return cpu_fail(ctx, CPU_E_INVALID, "step 0 on axis %d", ax);
		seen[ax] = 1;
		/* a step beyond the dim takes one element either way; clamping it
		 * keeps the stride arithmetic below from overflowing */
		if (a.steps[i] > X->dims[ax] || a.steps[i] < -X->dims[ax])
			a.steps[i] = a.steps[i] > 0 ? (X->dims[ax] ? X->dims[ax] : 1)
						    : (X->dims[ax] ? -X->dims[ax] : -1);
		dims[ax] = slice_dim(X->dims[ax], &start, a.ends[i], a.steps[i]);
		if (dims[ax] > 0)
			off += start * xs[ax];
		st[ax] = xs[ax] * a.steps[i];
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	if (cpu_numel(Y) > 0)
		cpu_copy_strided_par(ctx, Y->data,
				     (const char *)X->data + off * (int64_t)cpu_dtype_size(X->dtype),
				     cpu_dtype_size(X->dtype), X->rank, dims, st);
	return 0;
}

static int slice_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			  int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

const cpu_op cpu_op_slice = {
	"Slice", "", 1, CPU_OPSET_MAX, slice_supports, NULL, slice_compute, NULL,
};
