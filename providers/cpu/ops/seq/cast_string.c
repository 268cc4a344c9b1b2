/*
 * cast_string: ONNX Cast and CastLike to and from STRING.  These are the op
 * table's Cast and CastLike: they hand casts without strings to
 * cpu_tensor_op_cast / cpu_tensor_op_castlike (not in the table).
 *
 * Numbers print as numpy's str() does, which is what the ONNX test data
 * holds: the shortest digits that read back to the same value, positional
 * for 1e-4 <= |x| < 1e16 ("0.5", "100.0"), else scientific ("1e-05",
 * "1.5e+16"); NaN and infinities as "NaN", "INF", "-INF".  Strings parse
 * with strtod/strtoll ("NaN", "INF", "+INF", "-inf" included).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seq_ops.h"

/* Shortest %.*e form of x that reads back exactly (as float when single). */
static void shortest(double x, int single, char *digits, int *exp10)
{
	char buf[40];
	int p;

	for (p = 1; p < 17; p++) {
		snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
		if (single ? (float)strtod(buf, NULL) == (float)x : strtod(buf, NULL) == x)
			break;
	}
	snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
	/* buf: d[.ddd]e[+-]xx */
	*exp10 = atoi(strchr(buf, 'e') + 1);
	for (char *s = buf; *s && *s != 'e'; s++)
		if (*s >= '0' && *s <= '9')
			*digits++ = *s;
	*digits = 0;
}

static void format_float(double x, int single, char *out, size_t n)
{
	char d[40];
	int e, nd, o = 0;

	if (isnan(x) || isinf(x)) {
		snprintf(out, n, "%s", isnan(x) ? "NaN" : x > 0 ? "INF" : "-INF");
		return;
	}
	if (x == 0) {
		snprintf(out, n, "%s", signbit(x) ? "-0.0" : "0.0");
		return;
	}
	shortest(fabs(x), single, d, &e);
	nd = (int)strlen(d);
	if (x < 0)
		out[o++] = '-';
	if (fabs(x) < 1e-4 || fabs(x) >= 1e16) {
		snprintf(out + o, n - (size_t)o, "%c%s%.*se%c%02d", d[0], nd > 1 ? "." : "", nd - 1,
			 d + 1, e < 0 ? '-' : '+', abs(e));
		return;
	}
	if (e < 0) {
		out[o++] = '0';
		out[o++] = '.';
		for (int i = 0; i < -e - 1; i++)
			out[o++] = '0';
		snprintf(out + o, n - (size_t)o, "%s", d);
		return;
	}
	for (int i = 0; i <= e || i < nd; i++) {
		if (i == e + 1)
			out[o++] = '.';
		out[o++] = i < nd ? d[i] : '0';
	}
	if (nd <= e + 1) {
		out[o++] = '.';
		out[o++] = '0';
	}
	out[o] = 0;
}

int seq_format_number(int32_t dtype, const void *data, int64_t i, char *buf, size_t n)
{
	if (dtype == CPU_FLOAT || dtype == CPU_FLOAT16 || dtype == CPU_BFLOAT16)
		format_float(cpu_get_f64(dtype, data, i), 1, buf, n);
	else if (dtype == CPU_DOUBLE)
		format_float(((const double *)data)[i], 0, buf, n);
	else if (dtype == CPU_UINT64)
		snprintf(buf, n, "%llu", (unsigned long long)((const uint64_t *)data)[i]);
	else if (cpu_dtype_size(dtype) && dtype != CPU_STRING)
		snprintf(buf, n, "%lld", (long long)cpu_get_i64(dtype, data, i));
	else
		return CPU_E_UNSUPPORTED;
	return 0;
}

static int to_string(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor *Y)
{
	char buf[64];

	for (int64_t i = 0; i < cpu_numel(X); i++) {
		const char **dst = (const char **)Y->data + i;

		if (X->dtype == CPU_STRING) {
			*dst = ((const char *const *)X->data)[i];
			continue;
		}
		if (seq_format_number(X->dtype, X->data, i, buf, sizeof(buf)))
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "cast from %s to string",
					cpu_dtype_name(X->dtype));
		if (!(*dst = cpu_string_new(ctx, buf, strlen(buf))))
			return CPU_E_NOMEM;
	}
	return 0;
}

static int from_string(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor *Y)
{
	for (int64_t i = 0; i < cpu_numel(X); i++) {
		const char *s = ((const char *const *)X->data)[i];

		if (cpu_dtype_is_float(Y->dtype))
			cpu_set_f64(Y->dtype, Y->data, i, strtod(s, NULL));
		else if (Y->dtype == CPU_UINT64)
			((uint64_t *)Y->data)[i] = strtoull(s, NULL, 10);
		else if (Y->dtype == CPU_BOOL)
			((uint8_t *)Y->data)[i] = strcmp(s, "True") == 0 || strcmp(s, "true") == 0 ||
				strtod(s, NULL) != 0;
		else if (cpu_dtype_size(Y->dtype))
			cpu_set_i64(Y->dtype, Y->data, i, strtoll(s, NULL, 10));
		else
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "cast from string to %s",
					cpu_dtype_name(Y->dtype));
	}
	return 0;
}

static int string_cast(cpu_ctx *ctx, const cpu_tensor *X, int32_t to)
{
	cpu_tensor *Y;

	if (X->dtype == CPU_SEQUENCE || X->dtype == CPU_NONE)
		return cpu_fail(ctx, CPU_E_INVALID, "input 0 must be a tensor");
	if (!(Y = cpu_output(ctx, 0, to, X->rank, X->dims)))
		return CPU_E_NOMEM;
	return to == CPU_STRING ? to_string(ctx, X, Y) : from_string(ctx, X, Y);
}

static int32_t cast_to(const Onnx__NodeProto *p)
{
	char s[16];

	if (cpu_attr_str(p, "to", s, sizeof(s)))
		return strcmp(s, "STRING") == 0 ? CPU_STRING : CPU_UNDEFINED;
	return (int32_t)cpu_attr_int(p, "to", 0);
}

static int cast_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	if (cast_to(p) == CPU_STRING || (n_in > 0 && dt && dt[0] == CPU_STRING))
		return 1;
	return cpu_tensor_op_cast.supports ? cpu_tensor_op_cast.supports(p, opset, dt, n_in, why, n) : 1;
}

static int cast_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X = cpu_input(ctx, 0);
	int32_t to = cast_to(ctx->node->proto);

	if (X && (X->dtype == CPU_STRING || to == CPU_STRING))
		return string_cast(ctx, X, to);
	return cpu_tensor_op_cast.compute(ctx);
}

static int castlike_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			     int n_in, char *why, size_t n)
{
	if (n_in > 1 && dt && (dt[0] == CPU_STRING || dt[1] == CPU_STRING))
		return 1;
	return cpu_tensor_op_castlike.supports ? cpu_tensor_op_castlike.supports(p, opset, dt, n_in, why, n) : 1;
}

static int castlike_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X = cpu_input(ctx, 0), *T = cpu_input(ctx, 1);

	if (X && T && (X->dtype == CPU_STRING || T->dtype == CPU_STRING))
		return string_cast(ctx, X, T->dtype);
	return cpu_tensor_op_castlike.compute(ctx);
}

const cpu_op cpu_op_seq_cast = {
	"Cast", "", 1, CPU_OPSET_MAX, cast_supports, NULL, cast_compute, NULL,
};
const cpu_op cpu_op_seq_castlike = {
	"CastLike", "", 15, CPU_OPSET_MAX, castlike_supports, NULL, castlike_compute, NULL,
};
