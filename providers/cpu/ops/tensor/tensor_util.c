/*
 * tensor_util: helpers the ops of ops/tensor/ share (declared in
 * tensor_ops.h): strides, index normalisation, a stable sort with a
 * context (TopK, Unique and NonMaxSuppression need ties in index order),
 * numeric comparison across dtypes, and input/attribute readers.
 */
#include <math.h>
#include <stdio.h>

#include "tensor_ops.h"

void tensor_strides(int rank, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		strides[d] = s;
		s *= dims[d];
	}
}

int64_t tensor_norm_index(int64_t v, int64_t n)
{
	if (v < -n || v >= n)
		return -1;
	return v < 0 ? v + n : v;
}

int tensor_supports_any(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL & ~CPU_BIT(CPU_STRING), why, n);
}

void tensor_sort(int64_t *idx, int64_t n, tensor_cmp cmp, const void *ctx, int64_t *tmp)
{
	/* bottom-up merge sort: stable, no recursion, O(n log n) */
	int64_t *src = idx, *dst = tmp;
	for (int64_t w = 1; w < n; w *= 2) {
		for (int64_t lo = 0; lo < n; lo += 2 * w) {
			int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			int64_t a = lo, b = mid, k = lo;
			while (a < mid && b < hi)
				dst[k++] = cmp(ctx, src[b], src[a]) < 0 ? src[b++] : src[a++];
			while (a < mid)
				dst[k++] = src[a++];
			while (b < hi)
				dst[k++] = src[b++];
		}
		int64_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != idx)
		memcpy(idx, src, (size_t)n * sizeof(*idx));
}

int tensor_cmp_elem(int32_t dtype, const void *a, int64_t i, const void *b, int64_t j)
{
	if (cpu_dtype_is_float(dtype)) {
		double x = cpu_get_f64(dtype, a, i), y = cpu_get_f64(dtype, b, j);
		if (isnan(x) || isnan(y))
			return isnan(x) - isnan(y);
		return (x > y) - (x < y);
	}
	if (dtype == CPU_UINT64) {
		uint64_t x = ((const uint64_t *)a)[i], y = ((const uint64_t *)b)[j];
		return (x > y) - (x < y);
	}
	int64_t x = cpu_get_i64(dtype, a, i), y = cpu_get_i64(dtype, b, j);
	return (x > y) - (x < y);
}

int64_t tensor_read_floats(const cpu_tensor *t, double *v, int64_t max)
{
	int64_t n;
	if (!t || !cpu_dtype_is_float(t->dtype) || t->rank > 1)
		return -1;
	n = cpu_numel(t);
	if (n < 0 || n > max)
		return -1;
	for (int64_t i = 0; i < n; i++)
		v[i] = cpu_get_f64(t->dtype, t->data, i);
	return n;
}

int64_t tensor_input_ints(cpu_ctx *ctx, int i, int64_t *v, int64_t max, int optional)
{
	const cpu_tensor *t = cpu_input(ctx, i);
	int64_t n;
	if (!t) {
		if (optional)
			return 0;
		cpu_fail(ctx, CPU_E_INVALID, "input %d is required", i);
		return -1;
	}
	n = cpu_read_ints(t, v, max);
	if (n < 0)
		cpu_fail(ctx, CPU_E_INVALID, "input %d must be a 1-D int32/int64 tensor of at most "
			 "%lld values", i, (long long)max);
	return n;
}

int tensor_attr_is(const Onnx__NodeProto *p, const char *name, const char *dflt, const char *s)
{
	char buf[64];
	if (!cpu_attr_str(p, name, buf, sizeof(buf)))
		return strcmp(dflt, s) == 0;
	return strcmp(buf, s) == 0;
}

void tensor_store_f64(int32_t dtype, void *base, int64_t i, double v)
{
	double lo, hi;
	if (cpu_dtype_is_float(dtype) || dtype == CPU_BOOL) {
		cpu_set_f64(dtype, base, i, v);
		return;
	}
	switch (dtype) {
	case CPU_UINT8: lo = 0; hi = UINT8_MAX; break;
	case CPU_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
	case CPU_UINT16: lo = 0; hi = UINT16_MAX; break;
	case CPU_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
	case CPU_UINT32: lo = 0; hi = UINT32_MAX; break;
	case CPU_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
	case CPU_UINT64: lo = 0; hi = 18446744073709551615.0; break;
	default: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;
	}
	cpu_set_f64(dtype, base, i, v < lo ? lo : v > hi ? hi : v);
}
