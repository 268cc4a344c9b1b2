/*
 * unary: elementwise functions of one tensor — Relu, LeakyRelu, Sigmoid,
 * Tanh, Erf, Gelu, Sqrt, Exp, Log, Neg, Abs, Reciprocal, Clip, HardSigmoid
 * and HardSwish.  float32
 * runs a per-op vectorized loop (vmath.h for Sigmoid, Tanh, Erf, Gelu and
 * Exp; Sqrt and Log on libm), split over the intra-op pool when
 * the tensor is large; NaN stays NaN; float64 and float16 use the double libm;
 * the ops that ONNX defines on integers (Relu, Neg, Abs, Clip) also take
 * int32/int64.
 */
#include <math.h>
#include <string.h>

#include "cpu_f16.h"
#include "cpu_ops.h"
#include "fuse_tail.h"
#include "par.h"
#include "vmath.h"

enum unop {
	U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF, U_GELU, U_SQRT, U_EXP, U_LOG, U_NEG, U_ABS,
	U_RECIP, U_CLIP, U_HSIGMOID, U_HSWISH,
};

static const char *const un_names[] = {
	"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu", "Sqrt", "Exp", "Log", "Neg",
	"Abs", "Reciprocal", "Clip", "HardSigmoid", "HardSwish",
};

typedef struct un_params {
	double alpha, beta, lo, hi;
	int gelu_tanh;
} un_params;

static int un_op(const char *t)
{
	for (int i = 0; i < (int)(sizeof(un_names) / sizeof(un_names[0])); i++)
		if (strcmp(t, un_names[i]) == 0)
			return i;
	return -1;
}

static uint32_t un_types(int op)
{
	if (op == U_RELU || op == U_NEG || op == U_ABS || op == U_CLIP)
		return CPU_TYPES_NUMERIC;
	if (op == U_HSIGMOID || op == U_HSWISH)
		return CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16);
	return CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16);
}

static inline float un_f32(int op, float x, const un_params *p)
{
	switch (op) {
	case U_RELU: return x < 0.0f ? 0.0f : x;
	case U_LEAKY: return x < 0.0f ? (float)p->alpha * x : x;
	case U_SIGMOID: return vm_logistic(x);
	case U_TANH: return vm_tanh(x);
	case U_ERF: return vm_erf(x);
	case U_GELU:
		if (p->gelu_tanh)
			return 0.5f * x * (1.0f + vm_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
		return 0.5f * x * (1.0f + vm_erf(x * 0.70710678118654752f));
	case U_SQRT: return sqrtf(x);
	case U_EXP: return vm_exp_mlas(x);
	case U_LOG: return logf(x);
	case U_NEG: return -x;
	case U_ABS: return fabsf(x);
	case U_RECIP: return 1.0f / x;
	case U_HSIGMOID:
		return fmaxf(0.0f, fminf(1.0f, VF_ROUNDED((float)p->alpha * x) + (float)p->beta));
	case U_HSWISH:
		return x * fmaxf(0.0f, fminf(1.0f, VF_ROUNDED(x * (1.0f / 6.0f)) + 0.5f));
	default: return x < (float)p->lo ? (float)p->lo : x > (float)p->hi ? (float)p->hi : x;
	}
}

static double un_f64(int op, double x, const un_params *p)
{
	switch (op) {
	case U_RELU: return x < 0.0 ? 0.0 : x;
	case U_LEAKY: return x < 0.0 ? p->alpha * x : x;
	case U_SIGMOID: return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
	case U_TANH: return tanh(x);
	case U_ERF: return erf(x);
	case U_GELU:
		if (p->gelu_tanh)
			return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
		return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
	case U_SQRT: return sqrt(x);
	case U_EXP: return exp(x);
	case U_LOG: return log(x);
	case U_NEG: return -x;
	case U_ABS: return fabs(x);
	case U_RECIP: return 1.0 / x;
	case U_HSIGMOID: return fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
	case U_HSWISH: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
	default: return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
	}
}

static int64_t un_i64(int op, int64_t x, const un_params *p)
{
	switch (op) {
	case U_RELU: return x > 0 ? x : 0;
	case U_NEG: return (int64_t)(0 - (uint64_t)x);
	case U_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
	default: {
		int64_t lo = p->lo <= -9.2e18 ? INT64_MIN : (int64_t)p->lo;
		int64_t hi = p->hi >= 9.2e18 ? INT64_MAX : (int64_t)p->hi;
		return x < lo ? lo : x > hi ? hi : x;
	}
	}
}

/* One vector of op (a constant after inlining). */
static inline __attribute__((always_inline)) vf8
un_vec(int op, vf8 x, const un_params *p)
{
	switch (op) {
	case U_RELU: return vf_sel(x < 0.0f, vf_splat(0.0f), x);   /* NaN stays NaN */
	case U_LEAKY: return vf_sel(x < 0.0f, x * (float)p->alpha, x);
	case U_NEG: return -x;
	case U_ABS: return vf_abs(x);
	case U_RECIP: return 1.0f / x;
	case U_HSIGMOID: return vf_hsigmoid(x, (float)p->alpha, (float)p->beta);
	case U_HSWISH: return x * vf_hsigmoid(x, 1.0f / 6.0f, 0.5f);
	default: return vf_clamp(x, (float)p->lo, (float)p->hi);
	}
}

static inline __attribute__((always_inline)) void
f32_vloop(int op, const float *x, float *y, int64_t n, const un_params *p)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		vf_store(y + i, un_vec(op, vf_load(x + i), p));
	if (i < n)
		vf_store_part(y + i, un_vec(op, vf_load_part(x + i, n - i, 0.0f), p), n - i);
}

/* The scalar formula, left to gcc's vectorizer: for the functions with a
 * division (Sigmoid, Tanh, Erf, Gelu) its 16 lanes on AVX-512 beat the
 * 8-lane vectors (measured 40 against 59 us for Sigmoid of 128x1024). */
static inline __attribute__((always_inline)) void
f32_sloop(int op, const float *x, float *y, int64_t n, const un_params *p)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = un_f32(op, x[i], p);
}

/* Tanh, Erf and Gelu on explicit 8-lane vectors, for a CPU without
 * AVX-512: gcc's x86-64-v3 clone of the scalar loop ran them one float at
 * a time (Erf over 1x128x1024: 406 us on Zen 3). */
static inline __attribute__((always_inline)) vf8 un_vec_smooth(int op, vf8 x, const un_params *p)
{
	switch (op) {
	case U_TANH: return vf_tanh(x);
	case U_ERF: return vf_erf(x);
	default:
		if (p->gelu_tanh)
			return 0.5f * x * (1.0f + vf_tanh(0.7978845608028654f *
							   (x + 0.044715f * x * x * x)));
		return 0.5f * x * (1.0f + vf_erf(x * 0.70710678118654752f));
	}
}

static inline __attribute__((always_inline)) void
f32_smooth(int op, const float *x, float *y, int64_t n, const un_params *p)
{
	int64_t i = 0;

	if (cpu_has_avx512()) {   /* the scalar loop on 16 lanes is faster there */
		f32_sloop(op, x, y, n, p);
		return;
	}
	for (; i + 8 <= n; i += 8)
		vf_store(y + i, un_vec_smooth(op, vf_load(x + i), p));
	for (; i < n; i++)
		y[i] = un_f32(op, x[i], p);
}

/* A switch of constant-op loops; Sqrt and Log call libm per element. */
CPU_MULTIVERSION
static void f32_run(int op, const float *x, float *y, int64_t n, const un_params *p)
{
	switch (op) {
	case U_RELU: f32_vloop(U_RELU, x, y, n, p); break;
	case U_LEAKY: f32_vloop(U_LEAKY, x, y, n, p); break;
	case U_SIGMOID:
		if (!cpu_logistic_wide(x, y, n, 0))
			f32_sloop(U_SIGMOID, x, y, n, p);
		break;
	case U_TANH: f32_smooth(U_TANH, x, y, n, p); break;
	case U_ERF: f32_smooth(U_ERF, x, y, n, p); break;
	case U_GELU: f32_smooth(U_GELU, x, y, n, p); break;
	case U_EXP:
		if (!cpu_exp_wide(x, y, n))
			f32_sloop(U_EXP, x, y, n, p);
		break;
	case U_NEG: f32_vloop(U_NEG, x, y, n, p); break;
	case U_ABS: f32_vloop(U_ABS, x, y, n, p); break;
	case U_RECIP: f32_vloop(U_RECIP, x, y, n, p); break;
	case U_CLIP: f32_vloop(U_CLIP, x, y, n, p); break;
	case U_HSIGMOID: f32_vloop(U_HSIGMOID, x, y, n, p); break;
	case U_HSWISH: f32_vloop(U_HSWISH, x, y, n, p); break;
	default:
		for (int64_t i = 0; i < n; i++)
			y[i] = un_f32(op, x[i], p);
		break;
	}
}

typedef struct un_job {
	int op;
	const float *x;
	float *y;
	const un_params *p;
} un_job;

static void un_range(void *arg, int64_t b, int64_t e, int member)
{
	const un_job *j = arg;
	(void)member;
	f32_run(j->op, j->x + b, j->y + b, e - b, j->p);
}

/* float16 through the float32 loop, a cache-sized chunk at a time. */
static void un_range16(void *arg, int64_t b, int64_t e, int member)
{
	const un_job *j = arg;
	float buf[1024];

	(void)member;
	for (int64_t i = b; i < e; i += 1024) {
		int64_t m = e - i < 1024 ? e - i : 1024;

		cpu_f16_widen((const uint16_t *)j->x + i, buf, m);
		f32_run(j->op, buf, buf, m, j->p);
		cpu_f16_narrow(buf, (uint16_t *)j->y + i, m);
	}
}

/* ns per element on one core, for cpu_par_for. */
static double un_cost(int op)
{
	switch (op) {
	case U_SIGMOID: case U_TANH: case U_ERF: case U_GELU: case U_EXP: case U_LOG:
		return 0.3;
	default:
		return 0.05;
	}
}

/* Clip's bounds: attributes before opset 11, optional scalar inputs after. */
static int clip_bounds(cpu_ctx *ctx, un_params *p)
{
	const Onnx__NodeProto *node = ctx->node->proto;
	p->lo = -INFINITY;
	p->hi = INFINITY;
	if (ctx->node->opset < 11) {
		p->lo = cpu_attr_float(node, "min", -3.402823e+38f);
		p->hi = cpu_attr_float(node, "max", 3.402823e+38f);
		return 0;
	}
	for (int i = 1; i <= 2; i++) {
		const cpu_tensor *t = cpu_input(ctx, i);
		double v;
		if (!t)
			continue;
		if (t->dtype != ctx->in[0]->dtype || cpu_read_scalar(t, &v) != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "Clip %s must be a %s scalar",
					i == 1 ? "min" : "max", cpu_dtype_name(ctx->in[0]->dtype));
		if (i == 1)
			p->lo = v;
		else
			p->hi = v;
	}
	return 0;
}

static int un_params_of(cpu_ctx *ctx, int op, un_params *p)
{
	char approx[16];
	memset(p, 0, sizeof(*p));
	p->alpha = cpu_attr_float(ctx->node->proto, "alpha", op == U_HSIGMOID ? 0.2f : 0.01f);
	p->beta = cpu_attr_float(ctx->node->proto, "beta", 0.5f);
	if (op == U_GELU && cpu_attr_str(ctx->node->proto, "approximate", approx, sizeof(approx))) {
		if (!strcmp(approx, "tanh"))
			p->gelu_tanh = 1;
		else if (strcmp(approx, "none") != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "unknown approximate '%s'", approx);
	}
	return op == U_CLIP ? clip_bounds(ctx, p) : 0;
}

static int un_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, un_types(un_op(p->op_type)), why, n);
}

static int un_compute(cpu_ctx *ctx)
{
	int op = un_op(ctx->node->proto->op_type), rc = 0;
	const cpu_tensor *X;
	cpu_tensor *Y;
	un_params p;
	int64_t n;

	if (op < 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "unknown unary op");
	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, un_types(op))))
		return rc;
	if ((rc = un_params_of(ctx, op, &p)) != 0)
		return rc;
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	n = cpu_numel(X);
	if (X->dtype == CPU_FLOAT || (X->dtype == CPU_FLOAT16 && op != U_SQRT && op != U_LOG)) {
		un_job j = {op, X->data, Y->data, &p};
		cpu_par_for(ctx, n, un_cost(op), 4096, X->dtype == CPU_FLOAT ? un_range : un_range16,
			    &j);
	} else if (cpu_dtype_is_float(X->dtype)) {
		for (int64_t i = 0; i < n; i++)
			cpu_set_f64(X->dtype, Y->data, i, un_f64(op, cpu_get_f64(X->dtype, X->data, i), &p));
	} else {
		for (int64_t i = 0; i < n; i++)
			cpu_set_i64(X->dtype, Y->data, i,
				    un_i64(op, cpu_get_i64(X->dtype, X->data, i), &p));
	}
	return 0;
}

const cpu_op cpu_op_relu = { "Relu", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_leakyrelu = { "LeakyRelu", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_sigmoid = { "Sigmoid", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_tanh = { "Tanh", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_erf = { "Erf", "", 9, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_gelu = { "Gelu", "", 20, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_sqrt = { "Sqrt", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_exp = { "Exp", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_log = { "Log", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_neg = { "Neg", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_abs = { "Abs", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_reciprocal = { "Reciprocal", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_hardsigmoid = { "HardSigmoid", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_hardswish = { "HardSwish", "", 14, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
const cpu_op cpu_op_clip = { "Clip", "", 1, CPU_OPSET_MAX, un_supports, NULL, un_compute, NULL };
