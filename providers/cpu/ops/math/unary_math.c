/*
 * unary_math: elementwise functions of one tensor that unary.c does not
 * have — the trigonometric and hyperbolic functions, Sign, Round (half to
 * even), Floor, Ceil, IsNaN, IsInf and the activations Selu, Elu, Celu,
 * Softplus, Softsign, Mish, ThresholdedRelu and
 * Shrink.  Floating types compute in double (float16 and bfloat16 round to
 * nearest even on the way back); Sign and Shrink also take every integer
 * type.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

enum um_op {
	M_COS, M_SIN, M_TAN, M_ACOS, M_ASIN, M_ATAN, M_COSH, M_SINH, M_ACOSH, M_ASINH, M_ATANH,
	M_SIGN, M_ROUND, M_FLOOR, M_CEIL, M_ISNAN, M_ISINF, M_SELU, M_ELU, M_CELU, M_SOFTPLUS,
	M_SOFTSIGN, M_MISH, M_THRESHRELU, M_SHRINK,
};

static const char *const um_names[] = {
	"Cos", "Sin", "Tan", "Acos", "Asin", "Atan", "Cosh", "Sinh", "Acosh", "Asinh", "Atanh",
	"Sign", "Round", "Floor", "Ceil", "IsNaN", "IsInf", "Selu", "Elu", "Celu", "Softplus",
	"Softsign", "Mish", "ThresholdedRelu", "Shrink",
};

typedef struct um_params {
	double alpha, beta, gamma;
	int neg, pos;      /* IsInf: detect_negative, detect_positive */
} um_params;

static int um_op(const char *t)
{
	for (int i = 0; i < (int)(sizeof(um_names) / sizeof(um_names[0])); i++)
		if (strcmp(t, um_names[i]) == 0)
			return i;
	return -1;
}

static uint32_t um_types(int op)
{
	return op == M_SIGN || op == M_SHRINK ? MATH_TYPES_NUM : MATH_TYPES_FLOAT;
}

static double softplus(double x)
{
	return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double um_trig(int op, double x)
{
	switch (op) {
	case M_COS: return cos(x);
	case M_SIN: return sin(x);
	case M_TAN: return tan(x);
	case M_ACOS: return acos(x);
	case M_ASIN: return asin(x);
	case M_ATAN: return atan(x);
	case M_COSH: return cosh(x);
	case M_SINH: return sinh(x);
	case M_ACOSH: return acosh(x);
	case M_ASINH: return asinh(x);
	default: return atanh(x);
	}
}

static double um_f64(int op, double x, const um_params *p)
{
	switch (op) {
	case M_SIGN: return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x;   /* NaN and ±0 stay */
	case M_ROUND: return nearbyint(x);   /* default rounding mode: half to even */
	case M_FLOOR: return floor(x);
	case M_CEIL: return ceil(x);
	case M_ISNAN: return isnan(x);
	case M_ISINF: return isinf(x) && ((x > 0 && p->pos) || (x < 0 && p->neg));
	case M_SELU: return x > 0.0 ? p->gamma * x : p->gamma * (p->alpha * exp(x) - p->alpha);
	case M_ELU: return x >= 0.0 ? x : p->alpha * expm1(x);
	case M_CELU: return x > 0.0 ? x : p->alpha * expm1(x / p->alpha);
	case M_SOFTPLUS: return softplus(x);
	case M_SOFTSIGN: return x / (1.0 + fabs(x));
	case M_MISH: return x * tanh(softplus(x));
	case M_THRESHRELU: return x > p->alpha ? x : 0.0;
	case M_SHRINK: return x < -p->gamma ? x + p->beta : x > p->gamma ? x - p->beta : 0.0;
	default: return um_trig(op, x);
	}
}

static int um_params_of(cpu_ctx *ctx, int op, um_params *p)
{
	const Onnx__NodeProto *n = ctx->node->proto;
	memset(p, 0, sizeof(*p));
	switch (op) {
	case M_SELU:
		p->alpha = cpu_attr_float(n, "alpha", 1.67326319217681884765625f);
		p->gamma = cpu_attr_float(n, "gamma", 1.05070102214813232421875f);
		break;
	case M_ELU: case M_CELU: case M_THRESHRELU:
		p->alpha = cpu_attr_float(n, "alpha", 1.0f);
		if (op == M_CELU && p->alpha == 0.0)
			return cpu_fail(ctx, CPU_E_INVALID, "Celu alpha must not be 0");
		break;
	case M_SHRINK:
		p->beta = cpu_attr_float(n, "bias", 0.0f);
		p->gamma = cpu_attr_float(n, "lambd", 0.5f);
		break;
	case M_ISINF:
		p->neg = cpu_attr_int(n, "detect_negative", 1) != 0;
		p->pos = cpu_attr_int(n, "detect_positive", 1) != 0;
		break;
	default:
		break;
	}
	return 0;
}

/* Sign of an integer tensor, exact for int64 and uint64. */
static void sign_int(const cpu_tensor *X, cpu_tensor *Y, int64_t n)
{
	int is_u = math_dtype_is_unsigned(X->dtype);
	for (int64_t i = 0; i < n; i++) {
		int64_t s;
		if (is_u) {
			s = math_get_u64(X->dtype, X->data, i) != 0;
		} else {
			int64_t v = cpu_get_i64(X->dtype, X->data, i);
			s = v > 0 ? 1 : v < 0 ? -1 : 0;
		}
		cpu_set_i64(Y->dtype, Y->data, i, s);
	}
}

static void um_run(int op, const um_params *p, const cpu_tensor *X, cpu_tensor *Y, int64_t n)
{
	if (op == M_SIGN && !cpu_dtype_is_float(X->dtype)) {
		sign_int(X, Y, n);
	} else if (X->dtype == CPU_FLOAT && Y->dtype == CPU_FLOAT) {
		const float *x = X->data;
		float *y = Y->data;
		for (int64_t i = 0; i < n; i++)
			y[i] = (float)um_f64(op, x[i], p);
	} else if (Y->dtype == CPU_BOOL) {
		uint8_t *y = Y->data;
		for (int64_t i = 0; i < n; i++)
			y[i] = um_f64(op, cpu_get_f64(X->dtype, X->data, i), p) != 0.0;
	} else {
		for (int64_t i = 0; i < n; i++)
			cpu_set_f64(Y->dtype, Y->data, i,
				    um_f64(op, cpu_get_f64(X->dtype, X->data, i), p));
	}
}

static int um_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, um_types(um_op(p->op_type)), why, n);
}

static int um_compute(cpu_ctx *ctx)
{
	int op = um_op(ctx->node->proto->op_type), rc = 0;
	const cpu_tensor *X;
	cpu_tensor *Y;
	um_params p;

	if (op < 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "unknown unary op");
	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, um_types(op))))
		return rc;
	if ((rc = um_params_of(ctx, op, &p)) != 0)
		return rc;
	Y = cpu_output(ctx, 0, op == M_ISNAN || op == M_ISINF ? CPU_BOOL : X->dtype, X->rank,
		       X->dims);
	if (!Y)
		return CPU_E_NOMEM;
	um_run(op, &p, X, Y, cpu_numel(X));
	return 0;
}

const cpu_op cpu_op_cos = { "Cos", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_sin = { "Sin", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_tan = { "Tan", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_acos = { "Acos", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_asin = { "Asin", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_atan = { "Atan", "", 7, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_cosh = { "Cosh", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_sinh = { "Sinh", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_acosh = { "Acosh", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_asinh = { "Asinh", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_atanh = { "Atanh", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_sign = { "Sign", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_round = { "Round", "", 11, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_floor = { "Floor", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_ceil = { "Ceil", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_isnan = { "IsNaN", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_isinf = { "IsInf", "", 10, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_selu = { "Selu", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_elu = { "Elu", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_celu = { "Celu", "", 12, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_softplus = { "Softplus", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_softsign = { "Softsign", "", 1, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_mish = { "Mish", "", 18, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_thresholdedrelu = { "ThresholdedRelu", "", 10, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
const cpu_op cpu_op_shrink = { "Shrink", "", 9, CPU_OPSET_MAX, um_supports, NULL, um_compute, NULL };
