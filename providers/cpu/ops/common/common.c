/*
 * common: small helpers the CPU operators share (dtype checks for
 * supports/compute, required inputs, axis normalisation, reading shape-like
 * int tensors).  Declared in cpu_ops.h.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_ops.h"

int cpu_has_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static int have = -1;

	if (have < 0)
		have = __builtin_cpu_supports("avx512f") != 0;
	return have;
#else
	return 0;
#endif
}

int cpu_has_avx2_fma(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static int have = -1;

	if (have < 0)
		have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return have;
#else
	return 0;
#endif
}

static void mask_names(uint32_t mask, char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int dt = 1; dt < 32 && used < n; dt++) {
		int w;
		if (!(mask & CPU_BIT(dt)))
			continue;
		w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", cpu_dtype_name(dt));
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

int cpu_supports_dtype(const int32_t *in_dtypes, int n_in, int i, uint32_t mask,
		       char *why, size_t n)
{
	char names[200];
	int32_t dt;
	if (!in_dtypes || i >= n_in)
		return 1;
	dt = in_dtypes[i];
	if (dt == CPU_UNDEFINED || (dt > 0 && dt < 32 && (mask & CPU_BIT(dt))))
		return 1;
	mask_names(mask, names, sizeof(names));
	snprintf(why, n, "input %d dtype %s is not supported (supported: %s)", i,
		 cpu_dtype_name(dt), names);
	return 0;
}

int cpu_check_dtype(cpu_ctx *ctx, const cpu_tensor *t, int i, uint32_t mask)
{
	char names[200];
	if (t->dtype > 0 && t->dtype < 32 && (mask & CPU_BIT(t->dtype)))
		return 0;
	mask_names(mask, names, sizeof(names));
	return cpu_fail(ctx, CPU_E_UNSUPPORTED, "input %d dtype %s is not supported (supported: %s)",
			i, cpu_dtype_name(t->dtype), names);
}

const cpu_tensor *cpu_require(cpu_ctx *ctx, int i, int *rc)
{
	const cpu_tensor *t = cpu_input(ctx, i);
	if (!t)
		*rc = cpu_fail(ctx, CPU_E_INVALID, "input %d is required", i);
	return t;
}

int cpu_norm_axis(int64_t axis, int rank)
{
	if (axis < -(int64_t)rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

int64_t cpu_read_ints(const cpu_tensor *t, int64_t *v, int64_t max)
{
	int64_t n;
	if (!t || (t->dtype != CPU_INT64 && t->dtype != CPU_INT32) || t->rank > 1)
		return -1;
	n = cpu_numel(t);
	if (n < 0 || n > max)
		return -1;
	for (int64_t i = 0; i < n; i++)
		v[i] = cpu_get_i64(t->dtype, t->data, i);
	return n;
}

int cpu_read_scalar(const cpu_tensor *t, double *v)
{
	if (!t || cpu_numel(t) != 1 || cpu_dtype_size(t->dtype) == 0)
		return -1;
	*v = cpu_get_f64(t->dtype, t->data, 0);
	return 0;
}

int cpu_copy_to_output(cpu_ctx *ctx, const cpu_tensor *x, int rank, const int64_t *dims)
{
	cpu_tensor *y;
	size_t bytes;
	if (cpu_shape_numel(rank, dims) != cpu_numel(x))
		return cpu_fail(ctx, CPU_E_INTERNAL, "output element count differs from input");
	y = cpu_output(ctx, 0, x->dtype, rank, dims);
	if (!y)
		return CPU_E_NOMEM;
	bytes = (size_t)cpu_numel(x) * cpu_dtype_size(x->dtype);
	if (bytes && y->data != x->data)
		memmove(y->data, x->data, bytes);
	return 0;
}
