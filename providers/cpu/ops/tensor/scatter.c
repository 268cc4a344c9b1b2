/*
 * scatter: ONNX ScatterElements (and its deprecated name Scatter) and
 * ScatterND, with the reductions none/add/mul/max/min.  The output starts
 * as a copy of data; each update then lands on the element (or slice) its
 * index names, combined with the reduction.  Every index is checked
 * against its dim first: out of range is an error, never a write outside
 * the output.  Duplicate indices with reduction none: the last one wins.
 */
#include <stdio.h>

#include "tensor_ops.h"

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int red_parse(const Onnx__NodeProto *p)
{
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	char s[16];
	if (!cpu_attr_str(p, "reduction", s, sizeof(s)))
		return RED_NONE;
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static double red_f64(int red, double a, double b)
{
	switch (red) {
	case RED_ADD: return a + b;
	case RED_MUL: return a * b;
	case RED_MAX: return a > b ? a : b;
	default: return a < b ? a : b;
	}
}

static uint64_t red_u64(int red, uint64_t a, uint64_t b, int is_signed)
{
	int64_t x = (int64_t)a, y = (int64_t)b;
	switch (red) {
	case RED_ADD: return a + b;   /* unsigned: wraps like the target type */
	case RED_MUL: return a * b;
	case RED_MAX: return is_signed ? (uint64_t)(x > y ? x : y) : (a > b ? a : b);
	default: return is_signed ? (uint64_t)(x < y ? x : y) : (a < b ? a : b);
	}
}

/* y[i] = red(y[i], u[j]) for one element of dtype dt. */
static void red_apply(int32_t dt, int red, void *y, int64_t i, const void *u, int64_t j, size_t es)
{
	if (red == RED_NONE) {
		tensor_copy_elem((char *)y + (size_t)i * es, (const char *)u + (size_t)j * es, es);
	} else if (cpu_dtype_is_float(dt)) {
		cpu_set_f64(dt, y, i, red_f64(red, cpu_get_f64(dt, y, i), cpu_get_f64(dt, u, j)));
	} else if (dt == CPU_UINT64) {
		((uint64_t *)y)[i] = red_u64(red, ((uint64_t *)y)[i], ((const uint64_t *)u)[j], 0);
	} else {
		uint64_t a = (uint64_t)cpu_get_i64(dt, y, i), b = (uint64_t)cpu_get_i64(dt, u, j);
		int sgn = dt != CPU_BOOL && (cpu_dtype_is_signed(dt) || dt == CPU_INT64);
		cpu_set_i64(dt, y, i, (int64_t)red_u64(red, a, b, sgn));
	}
}

static int red_get(cpu_ctx *ctx, int *red)
{
	*red = red_parse(ctx->node->proto);
	if (*red < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "unknown reduction");
	return 0;
}

static int scatter_out(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor **Y)
{
	if (!(*Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	if (cpu_numel(X))
		memcpy((*Y)->data, X->data, (size_t)cpu_numel(X) * cpu_dtype_size(X->dtype));
	return 0;
}

static int se_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *I, const cpu_tensor *U,
		    int axis)
{
	int rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_TYPES_INDEX)) != 0)
		return rc;
	if (U->dtype != X->dtype || I->rank != X->rank || U->rank != X->rank || X->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "data, indices and updates must share a rank "
				"(and data and updates a dtype)");
	for (int d = 0; d < X->rank; d++)
		if (I->dims[d] != U->dims[d] || (d != axis && I->dims[d] > X->dims[d]))
			return cpu_fail(ctx, CPU_E_INVALID, "indices/updates dim %d does not fit", d);
	return 0;
}

static int se_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I, *U;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", 0), xs[CPU_MAX_RANK], n;
	int64_t pos[CPU_MAX_RANK] = {0};
	int axis, red, rc = 0;
	size_t es;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)) ||
	    !(U = cpu_require(ctx, 2, &rc)) || (rc = red_get(ctx, &red)) != 0)
		return rc;
	if ((axis = cpu_norm_axis(raw, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X->rank);
	if ((rc = se_check(ctx, X, I, U, axis)) != 0 || (rc = scatter_out(ctx, X, &Y)) != 0)
		return rc;
	tensor_strides(X->rank, X->dims, xs);
	es = cpu_dtype_size(X->dtype);
	n = cpu_numel(I);
	for (int64_t k = 0; k < n; k++) {
		int64_t v = cpu_get_i64(I->dtype, I->data, k), off = 0;
		int64_t at = tensor_norm_index(v, X->dims[axis]);
		if (at < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "index %lld out of range on axis %d",
					(long long)v, axis);
		for (int d = 0; d < X->rank; d++)
			off += (d == axis ? at : pos[d]) * xs[d];
		red_apply(X->dtype, red, Y->data, off, U->data, k, es);
		for (int d = I->rank - 1; d >= 0 && ++pos[d] == I->dims[d]; d--)
			pos[d] = 0;
	}
	return 0;
}

static int snd_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *I, const cpu_tensor *U)
{
	int64_t k;
	int rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_TYPES_INDEX)) != 0)
		return rc;
	if (I->rank < 1 || U->dtype != X->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "indices must have rank >= 1, updates data's dtype");
	k = I->dims[I->rank - 1];
	if (k < 1 || k > X->rank || U->rank != I->rank - 1 + X->rank - k)
		return cpu_fail(ctx, CPU_E_INVALID, "indices' last dim %lld does not fit data rank %d "
				"and updates rank %d", (long long)k, X->rank, U->rank);
	for (int d = 0; d < U->rank; d++) {
		int64_t want = d < I->rank - 1 ? I->dims[d] : X->dims[k + d - (I->rank - 1)];
		if (U->dims[d] != want)
			return cpu_fail(ctx, CPU_E_INVALID, "updates dim %d is %lld, expected %lld", d,
					(long long)U->dims[d], (long long)want);
	}
	return 0;
}

static int snd_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I, *U;
	int64_t xs[CPU_MAX_RANK], k, nt, slice;
	int red, rc = 0;
	size_t es;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)) ||
	    !(U = cpu_require(ctx, 2, &rc)) || (rc = red_get(ctx, &red)) != 0 ||
	    (rc = snd_check(ctx, X, I, U)) != 0 || (rc = scatter_out(ctx, X, &Y)) != 0)
		return rc;
	tensor_strides(X->rank, X->dims, xs);
	k = I->dims[I->rank - 1];
	nt = cpu_numel(I) / k;
	slice = k < X->rank ? xs[k - 1] : 1;
	es = cpu_dtype_size(X->dtype);
	for (int64_t t = 0; t < nt; t++) {
		int64_t off = 0;
		for (int64_t j = 0; j < k; j++) {
			int64_t v = cpu_get_i64(I->dtype, I->data, t * k + j);
			int64_t at = tensor_norm_index(v, X->dims[j]);
			if (at < 0)
				return cpu_fail(ctx, CPU_E_INVALID, "index %lld out of range on axis %lld",
						(long long)v, (long long)j);
			off += at * xs[j];
		}
		for (int64_t e = 0; e < slice; e++)
			red_apply(X->dtype, red, Y->data, off + e, U->data, t * slice + e, es);
	}
	return 0;
}

static int scatter_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	if (red_parse(p) < 0) {
		snprintf(why, n, "unknown reduction");
		return 0;
	}
	return tensor_supports_any(p, opset, dt, n_in, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n);
}

const cpu_op cpu_op_scatterelements = {
	"ScatterElements", "", 11, CPU_OPSET_MAX, scatter_supports, NULL, se_compute, NULL,
};
const cpu_op cpu_op_scatter = {
	"Scatter", "", 9, 10, scatter_supports, NULL, se_compute, NULL,
};
const cpu_op cpu_op_scatternd = {
	"ScatterND", "", 11, CPU_OPSET_MAX, scatter_supports, NULL, snd_compute, NULL,
};
