/*
 * math_common: helpers the math family's kernels share (declared in
 * math_ops.h): the broadcasting driver of the binary ops (Mod, BitShift,
 * And/Or/Xor, PRelu...), unsigned element access, the reduction-axes parser
 * of the extra reductions, conversion to and from double scratch arrays.
 */
#include <stdio.h>
#include <string.h>

#include "math_ops.h"

int math_dtype_is_unsigned(int32_t dtype)
{
	return dtype > 0 && dtype < 32 && (MATH_TYPES_UINT & CPU_BIT(dtype)) != 0;
}

uint64_t math_get_u64(int32_t dtype, const void *base, int64_t i)
{
	switch (dtype) {
	case CPU_UINT8: return ((const uint8_t *)base)[i];
	case CPU_UINT16: return ((const uint16_t *)base)[i];
	case CPU_UINT32: return ((const uint32_t *)base)[i];
	case CPU_UINT64: return ((const uint64_t *)base)[i];
	default: return (uint64_t)cpu_get_i64(dtype, base, i);
	}
}

int math_supports_all(const int32_t *dt, int n_in, uint32_t mask, char *why, size_t n)
{
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, mask, why, n))
			return 0;
	return 1;
}

/* B's shape under the pre-opset-7 broadcast: explicit axis alignment, or
 * equal shapes when `broadcast` is 0. */
static int legacy_b_shape(cpu_ctx *ctx, const cpu_tensor *A, const cpu_tensor *B, int *rank,
			  int64_t *dims)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	int64_t axis;
	*rank = B->rank;
	memcpy(dims, B->dims, sizeof(int64_t) * (size_t)B->rank);
	if (!cpu_attr_int(p, "broadcast", 0)) {
		if (A->rank == B->rank &&
		    !memcmp(A->dims, B->dims, sizeof(int64_t) * (size_t)A->rank))
			return 0;
		return cpu_fail(ctx, CPU_E_INVALID, "shapes differ and broadcast=0 (opset %lld)",
				(long long)ctx->node->opset);
	}
	if (!cpu_attr(p, "axis"))
		return 0;
	axis = cpu_attr_int(p, "axis", 0);
	if (axis < 0)
		axis += A->rank;
	if (axis < 0 || axis + B->rank > A->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "broadcast axis %lld does not fit",
				(long long)axis);
	for (int64_t d = axis + B->rank; d < A->rank; d++)
		dims[(*rank)++] = 1;
	return 0;
}

int math_bin_run(cpu_ctx *ctx, math_bin *m, int32_t ydt, int legacy, cpu_bcast_row row)
{
	int64_t bdims[CPU_MAX_RANK];
	int ranks[2], brank = m->b->rank, rc;
	const int64_t *dims[2];
	const cpu_tensor *ts[2] = {m->a, m->b};
	cpu_bcast bc;

	memcpy(bdims, m->b->dims, sizeof(int64_t) * (size_t)brank);
	if (legacy && ctx->node->opset < 7 &&
	    (rc = legacy_b_shape(ctx, m->a, m->b, &brank, bdims)) != 0)
		return rc;
	ranks[0] = m->a->rank;
	ranks[1] = brank;
	dims[0] = m->a->dims;
	dims[1] = bdims;
	if (cpu_bcast_init(&bc, 2, ranks, dims) != 0) {
		cpu_bcast_error(ctx, 2, ts);
		return CPU_E_INVALID;
	}
	if (!(m->y = cpu_output(ctx, 0, ydt, bc.out_rank, bc.out_dims)))
		return CPU_E_NOMEM;
	return cpu_bcast_each(&bc, row, m);
}

static int read_axes(cpu_ctx *ctx, int attr_axes, int64_t *axes)
{
	const int64_t *a;
	int64_t n = 0;
	if (attr_axes) {
		n = (int64_t)cpu_attr_ints(ctx->node->proto, "axes", &a);
		for (int64_t i = 0; i < n && n <= CPU_MAX_RANK; i++)
			axes[i] = a[i];
	} else if (cpu_input(ctx, 1)) {
		const cpu_tensor *t = cpu_input(ctx, 1);
		n = t->dtype == CPU_INT64 ? cpu_read_ints(t, axes, CPU_MAX_RANK) : -1;
	}
	if (n < 0 || n > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "axes must be at most %d int64 values",
				CPU_MAX_RANK);
	return (int)n;
}

int math_reduce_axes(cpu_ctx *ctx, const cpu_tensor *X, int64_t input_from,
		     unsigned char *red)
{
	int attr_axes = ctx->node->opset < input_from;
	int64_t axes[CPU_MAX_RANK];
	int n = read_axes(ctx, attr_axes, axes);
	if (n < 0)
		return n;
	if (n == 0 && !attr_axes && cpu_attr_int(ctx->node->proto, "noop_with_empty_axes", 0))
		return 1;
	for (int d = 0; d < X->rank; d++)
		red[d] = n == 0;
	for (int i = 0; i < n; i++) {
		int ax = cpu_norm_axis(axes[i], X->rank);
		if (ax < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
					(long long)axes[i], X->rank);
		if (red[ax])
			return cpu_fail(ctx, CPU_E_INVALID, "axis %lld is repeated",
					(long long)axes[i]);
		red[ax] = 1;
	}
	return 0;
}

void math_split_axis(const cpu_tensor *X, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
	*outer = *n = *inner = 1;
	for (int d = 0; d < X->rank; d++) {
		if (d < axis)
			*outer *= X->dims[d];
		else if (d == axis)
			*n *= X->dims[d];
		else
			*inner *= X->dims[d];
	}
}

double *math_to_f64(cpu_ctx *ctx, const cpu_tensor *t)
{
	int64_t n = cpu_numel(t);
	double *v = cpu_scratch(ctx, (size_t)n * sizeof(double) + 1);
	if (!v) {
		cpu_fail(ctx, CPU_E_NOMEM, "out of memory");
		return NULL;
	}
	if (t->dtype == CPU_FLOAT) {
		const float *x = t->data;
		for (int64_t i = 0; i < n; i++)
			v[i] = x[i];
	} else {
		for (int64_t i = 0; i < n; i++)
			v[i] = cpu_get_f64(t->dtype, t->data, i);
	}
	return v;
}

void math_from_f64(cpu_tensor *y, const double *v, int64_t n)
{
	if (y->dtype == CPU_FLOAT) {
		float *out = y->data;
		for (int64_t i = 0; i < n; i++)
			out[i] = (float)v[i];
		return;
	}
	for (int64_t i = 0; i < n; i++)
		cpu_set_f64(y->dtype, y->data, i, v[i]);
}
