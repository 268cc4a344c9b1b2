/*
 * scale: the element-wise ai.onnx.ml ops, Scaler, Normalizer, Binarizer
 * and Imputer, on float, double, int32 and int64 X.  "Features" are dim 1
 * (dim 0 of a 1-D X), as ONNX Runtime reads them.  Arithmetic is in the
 * input's type promoted with float as C++ promotes it (int64 - float is a
 * float subtraction), which is what ONNX Runtime's templates compute.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ml_ops.h"

static int ml_num_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM, why, n);
}

/* X checked: a numeric tensor of rank >= 1; *stride its feature count. */
static const cpu_tensor *num_input(cpu_ctx *ctx, int64_t *stride, int *rc)
{
	const cpu_tensor *X = cpu_require(ctx, 0, rc);

	if (!X || (*rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM)))
		return NULL;
	if (X->rank < 1) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "X must have at least one dimension");
		return NULL;
	}
	*stride = X->rank == 1 ? X->dims[0] : X->dims[1];
	return X;
}

/* Element i of a float/int32/int64 tensor as C++ promotes it against a
 * float (double stays double and is read elsewhere). */
static float as_float(const cpu_tensor *X, int64_t i)
{
	switch (X->dtype) {
	case CPU_INT32: return (float)((const int32_t *)X->data)[i];
	case CPU_INT64: return (float)((const int64_t *)X->data)[i];
	default: return ((const float *)X->data)[i];
	}
}

/* ---- Scaler: Y = (X - offset) * scale ---- */

static int scaler_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const float *off, *sc;
	size_t no = cpu_attr_floats(p, "offset", &off), ns = cpu_attr_floats(p, "scale", &sc);
	int64_t stride, k;
	int rc = 0;
	const cpu_tensor *X = num_input(ctx, &stride, &rc);
	cpu_tensor *Y;
	float *y;

	if (!X)
		return rc;
	if (ns != no || (ns != 1 && (int64_t)ns != stride))
		return cpu_fail(ctx, CPU_E_INVALID, "scale (%zu) and offset (%zu) must both have 1 "
				"or %lld (the features) values", ns, no, (long long)stride);
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	y = Y->data;
	k = cpu_numel(X);
	for (int64_t i = 0; i < k; i++) {
		int64_t f = ns == 1 ? 0 : i % stride;

		if (X->dtype == CPU_DOUBLE)
			y[i] = (float)((((const double *)X->data)[i] - off[f]) * sc[f]);
		else
			y[i] = (as_float(X, i) - off[f]) * sc[f];
	}
	return 0;
}

/* ---- Normalizer: MAX, L1 or L2 over the features of each row ---- */

enum { NORM_MAX, NORM_L1, NORM_L2 };

static int norm_mode(const Onnx__NodeProto *p)
{
	char s[8];

	if (!cpu_attr_str(p, "norm", s, sizeof(s)))
		snprintf(s, sizeof(s), "MAX");
	return !strcmp(s, "MAX") ? NORM_MAX : !strcmp(s, "L1") ? NORM_L1 :
		!strcmp(s, "L2") ? NORM_L2 : -1;
}

static int norm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	if (norm_mode(p) < 0) {
		snprintf(why, n, "norm must be MAX, L1 or L2");
		return 0;
	}
	return ml_num_supports(p, opset, dt, n_in, why, n);
}

/* x as float, |x| as float and x * x as float, each computed in x's own
 * type first (ONNX Runtime's static_cast<float>(std::abs(x)) etc.). */
static void norm_vals(const cpu_tensor *X, int64_t i, float *v, float *a, float *sq)
{
	switch (X->dtype) {
	case CPU_DOUBLE: {
		double x = ((const double *)X->data)[i];

		*v = (float)x, *a = (float)fabs(x), *sq = (float)(x * x);
		break;
	}
	case CPU_INT32: {
		int32_t x = ((const int32_t *)X->data)[i];

		*v = (float)x, *a = (float)abs(x), *sq = (float)(int32_t)((uint32_t)x * (uint32_t)x);
		break;
	}
	case CPU_INT64: {
		int64_t x = ((const int64_t *)X->data)[i];

		*v = (float)x, *a = (float)llabs(x);
		*sq = (float)(int64_t)((uint64_t)x * (uint64_t)x);
		break;
	}
	default: {
		float x = ((const float *)X->data)[i];

		*v = x, *a = fabsf(x), *sq = x * x;
		break;
	}
	}
}

/* One normalized vector: stride elements `inc` apart from `off`. */
static void norm_one(int mode, const cpu_tensor *X, float *y, int64_t off, int64_t stride,
		     int64_t inc)
{
	float acc = mode == NORM_MAX ? -3.402823466e38f : 0, v, a, sq;

	for (int64_t s = 0, i = off; s < stride; s++, i += inc) {
		norm_vals(X, i, &v, &a, &sq);
		if (mode == NORM_MAX)
			acc = v > acc ? v : acc;
		else
			acc += mode == NORM_L1 ? a : sq;
		y[i] = mode == NORM_L2 ? sq : v;
	}
	for (int64_t s = 0, i = off; s < stride; s++, i += inc) {
		norm_vals(X, i, &v, &a, &sq);
		if (acc == 0)
			y[i] = v;
		else if (mode == NORM_L2)
			y[i] = v < 0 ? -sqrtf(sq / acc) : sqrtf(sq / acc);
		else
			y[i] = v / acc;
	}
}

static int norm_compute(cpu_ctx *ctx)
{
	int mode = norm_mode(ctx->node->proto);
	int64_t stride, inc = 1, loops;
	int rc = 0;
	const cpu_tensor *X = num_input(ctx, &stride, &rc);
	cpu_tensor *Y;

	if (!X)
		return rc;
	if (mode < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "norm must be MAX, L1 or L2");
	if (X->rank > 2)   /* as ONNX Runtime: the spec's rows are [N, C] */
		return cpu_fail(ctx, CPU_E_INVALID, "X must be [N, C] or [C], not of rank %d",
				X->rank);
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	for (int d = 2; d < X->rank; d++)
		inc *= X->dims[d];
	loops = stride > 0 ? cpu_numel(X) / stride : 0;
	for (int64_t k = 0; k < loops; k++)
		norm_one(mode, X, Y->data, k % inc + (k / inc) * stride * inc, stride, inc);
	return 0;
}

/* ---- Binarizer: 1 where X > threshold, else 0 ---- */

static int binarizer_compute(cpu_ctx *ctx)
{
	float th = cpu_attr_float(ctx->node->proto, "threshold", 0.0f);
	int64_t stride, k;
	int rc = 0;
	const cpu_tensor *X = num_input(ctx, &stride, &rc);
	cpu_tensor *Y;

	if (!X)
		return rc;
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	k = cpu_numel(X);
	for (int64_t i = 0; i < k; i++) {
		double x = X->dtype == CPU_DOUBLE ? ((const double *)X->data)[i] : as_float(X, i);

		if (isnan(x))
			return cpu_fail(ctx, CPU_E_INVALID, "X[%lld] is NaN", (long long)i);
		cpu_set_f64(Y->dtype, Y->data, i, x > (double)th ? 1 : 0);
	}
	return 0;
}

/* ---- Imputer: replaced_value_* -> imputed_value_* (NaN matches NaN) ---- */

static int imputer_floats(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor *Y, int64_t stride)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const float *iv;
	size_t ni = cpu_attr_floats(p, "imputed_value_floats", &iv);
	double r = cpu_attr_float(p, "replaced_value_float", 0.0f);

	if (ni != 1 && (int64_t)ni != stride)
		return cpu_fail(ctx, CPU_E_INVALID, "imputed_value_floats must have 1 or %lld "
				"values (has %zu)", (long long)stride, ni);
	for (int64_t i = 0, k = cpu_numel(X); i < k; i++) {
		double x = cpu_get_f64(X->dtype, X->data, i);
		int hit = (isnan(x) && isnan(r)) || x == r;

		cpu_set_f64(Y->dtype, Y->data, i, hit ? iv[ni == 1 ? 0 : i % stride] : x);
	}
	return 0;
}

static int imputer_ints(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor *Y, int64_t stride)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const int64_t *iv;
	size_t ni = cpu_attr_ints(p, "imputed_value_int64s", &iv);
	int64_t r = cpu_attr_int(p, "replaced_value_int64", 0);

	if (ni != 1 && (int64_t)ni != stride)
		return cpu_fail(ctx, CPU_E_INVALID, "imputed_value_int64s must have 1 or %lld "
				"values (has %zu)", (long long)stride, ni);
	for (int64_t i = 0, k = cpu_numel(X); i < k; i++) {
		int64_t x = cpu_get_i64(X->dtype, X->data, i);

		cpu_set_i64(Y->dtype, Y->data, i, x == r ? iv[ni == 1 ? 0 : i % stride] : x);
	}
	return 0;
}

static int imputer_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			    char *why, size_t n)
{
	const float *f;
	const int64_t *v;

	if ((cpu_attr_floats(p, "imputed_value_floats", &f) > 0) ==
	    (cpu_attr_ints(p, "imputed_value_int64s", &v) > 0)) {
		snprintf(why, n, "exactly one of imputed_value_floats and imputed_value_int64s "
			 "must be given");
		return 0;
	}
	return ml_num_supports(p, opset, dt, n_in, why, n);
}

static int imputer_compute(cpu_ctx *ctx)
{
	const float *f;
	int floats = cpu_attr_floats(ctx->node->proto, "imputed_value_floats", &f) > 0;
	int64_t stride;
	int rc = 0;
	const cpu_tensor *X = num_input(ctx, &stride, &rc);
	cpu_tensor *Y;

	if (!X)
		return rc;
	if (floats != cpu_dtype_is_float(X->dtype))
		return cpu_fail(ctx, CPU_E_INVALID, "%s X needs imputed_value_%s",
				cpu_dtype_name(X->dtype), floats ? "int64s" : "floats");
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	return floats ? imputer_floats(ctx, X, Y, stride) : imputer_ints(ctx, X, Y, stride);
}

const cpu_op cpu_op_ml_scaler = {
	"Scaler", ML_DOMAIN, 1, ML_OPSET_MAX, ml_num_supports, NULL, scaler_compute, NULL,
};
const cpu_op cpu_op_ml_normalizer = {
	"Normalizer", ML_DOMAIN, 1, ML_OPSET_MAX, norm_supports, NULL, norm_compute, NULL,
};
const cpu_op cpu_op_ml_binarizer = {
	"Binarizer", ML_DOMAIN, 1, ML_OPSET_MAX, ml_num_supports, NULL, binarizer_compute, NULL,
};
const cpu_op cpu_op_ml_imputer = {
	"Imputer", ML_DOMAIN, 1, ML_OPSET_MAX, imputer_supports, NULL, imputer_compute, NULL,
};
