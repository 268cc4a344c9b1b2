/*
 * cast: ONNX Cast between float32, float64, float16, bfloat16, bool and the
 * 8- to 64-bit integers.  Floating sources convert through double
 * (float to int saturates, NaN gives 0), integer sources through int64
 * (wrapping like C); float32 <-> float16 and same-type casts have direct
 * loops.  Before opset 6 `to` is a type name string.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_f16.h"
#include "cpu_ops.h"

#define CAST_TYPES (CPU_TYPES_ALL & ~CPU_BIT(CPU_STRING))

static int32_t cast_target(const Onnx__NodeProto *p)
{
	static const char *const names[] = {
		"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
		"STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
		"COMPLEX128", "BFLOAT16",
	};
	char s[32];
	if (!cpu_attr_str(p, "to", s, sizeof(s)))
		return (int32_t)cpu_attr_int(p, "to", 0);
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return 0;
}

static int cast_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	int32_t to = cast_target(p);
	(void)opset;
	if (to <= 0 || to >= 32 || !(CAST_TYPES & CPU_BIT(to))) {
		snprintf(why, n, "cast to %s (%d) is not supported", cpu_dtype_name(to), (int)to);
		return 0;
	}
	return cpu_supports_dtype(dt, n_in, 0, CAST_TYPES, why, n);
}

static int cast_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int32_t to = cast_target(ctx->node->proto);
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CAST_TYPES)))
		return rc;
	if (to <= 0 || to >= 32 || !(CAST_TYPES & CPU_BIT(to)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "cast to %s (%d) is not supported",
				cpu_dtype_name(to), (int)to);
	/* float32 to float16 read only by widened nodes (cpu_plan_wide): the
	 * value stays float32, as ONNX Runtime drops this Cast with the one
	 * back to float32 it inserts before them */
	if (to == CPU_FLOAT16 && X->dtype == CPU_FLOAT && cpu_output_kept_wide(ctx, 0))
		Y = cpu_output_wide(ctx, 0, X->rank, X->dims);
	else
		Y = cpu_output(ctx, 0, to, X->rank, X->dims);
	if (!Y)
		return CPU_E_NOMEM;
	cpu_cast_values(X, Y);
	return 0;
}

/* The casts to and between floats whose one rounding (or none) is the
 * generic path's through double, as plain loops gcc vectorizes: the
 * generic path converts element by element through calls (an int32 ->
 * float Cast of 1.2M values after an unfused ConvInteger: 11 ms, ONNX
 * Runtime's 0.95).  Returns 0 when the pair is not one of them. */
CPU_MULTIVERSION
static int cast_fast(int32_t from, int32_t to, const void *x, void *y, int64_t n)
{
#define CAST_LOOP(TI, TO)                                                              \
	do {                                                                           \
		const TI *s = x;                                                       \
		TO *d = y;                                                             \
		for (int64_t i = 0; i < n; i++)                                        \
			d[i] = (TO)s[i];                                               \
		return 1;                                                              \
	} while (0)
	if (to == CPU_FLOAT) {
		switch (from) {
		case CPU_INT32: CAST_LOOP(int32_t, float);
		case CPU_UINT8: CAST_LOOP(uint8_t, float);
		case CPU_INT8: CAST_LOOP(int8_t, float);
		case CPU_UINT16: CAST_LOOP(uint16_t, float);
		case CPU_INT16: CAST_LOOP(int16_t, float);
		case CPU_DOUBLE: CAST_LOOP(double, float);
		default: return 0;
		}
	}
	if (to == CPU_DOUBLE && from == CPU_FLOAT)
		CAST_LOOP(float, double);
#undef CAST_LOOP
	return 0;
}

void cpu_cast_values(const cpu_tensor *X, cpu_tensor *Y)
{
	int64_t n = cpu_numel(X);
	int32_t from = X->dtype, to = Y->dtype;

	if (from != to && cast_fast(from, to, X->data, Y->data, n))
		return;
	if (from == to) {
		if (n && Y->data != X->data)
			memmove(Y->data, X->data, (size_t)n * cpu_dtype_size(to));
	} else if (from == CPU_FLOAT && to == CPU_FLOAT16) {
		cpu_f16_narrow(X->data, Y->data, n);   /* F16C where the CPU has it */
	} else if (from == CPU_FLOAT16 && to == CPU_FLOAT) {
		cpu_f16_widen(X->data, Y->data, n);
	} else if (cpu_dtype_is_float(from) || cpu_dtype_is_float(to)) {
		for (int64_t i = 0; i < n; i++)
			cpu_set_f64(to, Y->data, i, cpu_get_f64(from, X->data, i));
	} else {
		for (int64_t i = 0; i < n; i++)
			cpu_set_i64(to, Y->data, i, cpu_get_i64(from, X->data, i));
	}
}

const cpu_op cpu_tensor_op_cast = { "Cast", "", 1, CPU_OPSET_MAX, cast_supports, NULL, cast_compute, NULL };
