/*
 * normalize: InstanceNormalization, GroupNormalization (scale and bias per
 * group before opset 21, per channel from 21), LpNormalization (p 1 or 2
 * along one axis), MeanVarianceNormalization (the spec's function:
 * (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes`) and LRN
 * (across channels).  Floating types; the data is converted to double
 * once and every statistic is computed there.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

static int float_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)p;
	(void)opset;
	return math_supports_all(dt, n_in, MATH_TYPES_FLOAT, why, n);
}

/* X (rank >= min_rank) as double with its output Y, the same shape. */
static int nc_setup(cpu_ctx *ctx, int min_rank, const cpu_tensor **X, cpu_tensor **Y,
		    double **x)
{
	int rc = 0;
	if (!(*X = cpu_require(ctx, 0, &rc)) ||
	    (rc = cpu_check_dtype(ctx, *X, 0, MATH_TYPES_FLOAT)) != 0)
		return rc;
	if ((*X)->rank < min_rank)
		return cpu_fail(ctx, CPU_E_INVALID, "input rank %d < %d", (*X)->rank, min_rank);
	if (!(*x = math_to_f64(ctx, *X)))
		return CPU_E_NOMEM;
	if (!(*Y = cpu_output(ctx, 0, (*X)->dtype, (*X)->rank, (*X)->dims)))
		return CPU_E_NOMEM;
	return 0;
}

/* A 1-D float input of n elements, as double (NULL with the error set). */
static double *vec_input(cpu_ctx *ctx, int i, int64_t n)
{
	int rc = 0;
	const cpu_tensor *t = cpu_require(ctx, i, &rc);
	if (!t || cpu_check_dtype(ctx, t, i, MATH_TYPES_FLOAT) != 0)
		return NULL;
	if (t->rank != 1 || t->dims[0] != n) {
		cpu_fail(ctx, CPU_E_INVALID, "input %d must have shape [%lld]", i, (long long)n);
		return NULL;
	}
	return math_to_f64(ctx, t);
}

/* Normalises len values in place to mean 0, variance 1 (+ eps). */
static void norm_block(double *x, int64_t len, double eps)
{
	double s = 0.0, v = 0.0, mean, inv;
	for (int64_t i = 0; i < len; i++)
		s += x[i];
	mean = len ? s / (double)len : 0.0;
	for (int64_t i = 0; i < len; i++)
		v += (x[i] - mean) * (x[i] - mean);
	inv = 1.0 / sqrt((len ? v / (double)len : 0.0) + eps);
	for (int64_t i = 0; i < len; i++)
		x[i] = (x[i] - mean) * inv;
}

static int instnorm_compute(cpu_ctx *ctx)
{
	double eps = cpu_attr_float(ctx->node->proto, "epsilon", 1e-5f), *x, *scale, *bias;
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t C, sp, n;
	int rc;

	if ((rc = nc_setup(ctx, 3, &X, &Y, &x)) != 0)
		return rc;
	C = X->dims[1];
	n = cpu_numel(X);
	sp = cpu_shape_numel(X->rank - 2, X->dims + 2);
	if (!(scale = vec_input(ctx, 1, C)) || !(bias = vec_input(ctx, 2, C)))
		return CPU_E_INVALID;
	for (int64_t b = 0; b < X->dims[0] * C; b++) {
		double *blk = x + b * sp;
		norm_block(blk, sp, eps);
		for (int64_t i = 0; i < sp; i++)
			blk[i] = blk[i] * scale[b % C] + bias[b % C];
	}
	math_from_f64(Y, x, n);
	return 0;
}

static int groupnorm_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	double eps = cpu_attr_float(p, "epsilon", 1e-5f), *x, *scale, *bias;
	int64_t G = cpu_attr_int(p, "num_groups", 0), C, sp, n, per_ch;
	const cpu_tensor *X;
	cpu_tensor *Y;
	int rc;

	if ((rc = nc_setup(ctx, 2, &X, &Y, &x)) != 0)
		return rc;
	C = X->dims[1];
	if (G <= 0 || C % G != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "num_groups %lld does not divide %lld channels",
				(long long)G, (long long)C);
	n = cpu_numel(X);
	sp = cpu_shape_numel(X->rank - 2, X->dims + 2);
	per_ch = ctx->node->opset >= 21;
	if (!(scale = vec_input(ctx, 1, per_ch ? C : G)) ||
	    !(bias = vec_input(ctx, 2, per_ch ? C : G)))
		return CPU_E_INVALID;
	for (int64_t b = 0; b < X->dims[0] * G; b++) {
		int64_t len = (C / G) * sp;
		double *blk = x + b * len;
		norm_block(blk, len, eps);
		for (int64_t i = 0; i < len; i++) {
			int64_t k = per_ch ? (b % G) * (C / G) + i / sp : b % G;
			blk[i] = blk[i] * scale[k] + bias[k];
		}
	}
	math_from_f64(Y, x, n);
	return 0;
}

static int lpnorm_compute(cpu_ctx *ctx)
{
	int64_t ax = cpu_attr_int(ctx->node->proto, "axis", -1), outer, len, inner;
	int64_t pw = cpu_attr_int(ctx->node->proto, "p", 2);
	const cpu_tensor *X;
	cpu_tensor *Y;
	double *x;
	int rc, axis;

	if ((rc = nc_setup(ctx, 0, &X, &Y, &x)) != 0)
		return rc;
	if (pw != 1 && pw != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "p must be 1 or 2, not %lld", (long long)pw);
	if ((axis = cpu_norm_axis(ax, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)ax, X->rank);
	math_split_axis(X, axis, &outer, &len, &inner);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			double *line = x + o * len * inner + i, s = 0.0;
			for (int64_t k = 0; k < len; k++) {
				double v = line[k * inner];
				s += pw == 1 ? fabs(v) : v * v;
			}
			s = pw == 1 ? s : sqrt(s);
			for (int64_t k = 0; k < len; k++)
				line[k * inner] /= s;
		}
	math_from_f64(Y, x, cpu_numel(X));
	return 0;
}

/* ---- MeanVarianceNormalization ---- */

typedef struct mvn_run {
	double *x, *s1, *s2;
	int pass;
} mvn_run;

static int mvn_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const mvn_run *r = arg;
	for (int64_t i = 0; i < n; i++) {
		double *v = &r->x[off[0] + i * st[0]];
		int64_t a = off[1] + i * st[1];
		if (r->pass == 0) {
			r->s1[a] += *v;
			r->s2[a] += *v * *v;
		} else {
			*v = (*v - r->s1[a]) / (sqrt(r->s2[a]) + 1e-9);
		}
	}
	return 0;
}

static int mvn_axes(cpu_ctx *ctx, const cpu_tensor *X, int64_t *kd, int64_t *count)
{
	static const int64_t dflt[3] = {0, 2, 3};
	unsigned char red[CPU_MAX_RANK] = {0};
	const int64_t *axes = dflt;
	size_t n = 3;
	if (cpu_attr(ctx->node->proto, "axes"))
		n = cpu_attr_ints(ctx->node->proto, "axes", &axes);
	memcpy(kd, X->dims, sizeof(int64_t) * (size_t)X->rank);
	*count = 1;
	for (size_t i = 0; i < n; i++) {
		int ax = cpu_norm_axis(axes[i], X->rank);
		if (ax < 0 || red[ax])
			return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d "
					"or repeated", (long long)axes[i], X->rank);
		red[ax] = 1;
		*count *= X->dims[ax];
		kd[ax] = 1;
	}
	return 0;
}

static int mvn_compute(cpu_ctx *ctx)
{
	int64_t kd[CPU_MAX_RANK], count, m;
	const int64_t *dims[2];
	int ranks[2], rc;
	const cpu_tensor *X;
	cpu_tensor *Y;
	cpu_bcast bc;
	mvn_run r;

	if ((rc = nc_setup(ctx, 0, &X, &Y, &r.x)) != 0 || (rc = mvn_axes(ctx, X, kd, &count)))
		return rc;
	m = cpu_shape_numel(X->rank, kd);
	r.s1 = cpu_scratch(ctx, (size_t)m * 2 * sizeof(double) + 1);
	if (!r.s1)
		return CPU_E_NOMEM;
	r.s2 = r.s1 + m;
	memset(r.s1, 0, (size_t)m * 2 * sizeof(double));
	ranks[0] = ranks[1] = X->rank;
	dims[0] = X->dims;
	dims[1] = kd;
	if (cpu_bcast_init(&bc, 2, ranks, dims) != 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "reduction shape");
	r.pass = 0;
	cpu_bcast_each(&bc, mvn_row, &r);
	for (int64_t i = 0; i < m && count > 0; i++) {
		double mean = r.s1[i] / (double)count, var = r.s2[i] / (double)count - mean * mean;
		r.s1[i] = mean;
		r.s2[i] = var > 0.0 ? var : 0.0;
	}
	r.pass = 1;
	cpu_bcast_each(&bc, mvn_row, &r);
	math_from_f64(Y, r.x, cpu_numel(X));
	return 0;
}

/* ---- LRN ---- */

static int lrn_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	double alpha = cpu_attr_float(p, "alpha", 1e-4f), beta = cpu_attr_float(p, "beta", 0.75f);
	double bias = cpu_attr_float(p, "bias", 1.0f), *x, *y;
	int64_t size = cpu_attr_int(p, "size", 0), C, sp, n, lo, hi;
	const cpu_tensor *X;
	cpu_tensor *Y;
	int rc;

	if ((rc = nc_setup(ctx, 3, &X, &Y, &x)) != 0)
		return rc;
	if (size <= 0)
		return cpu_fail(ctx, CPU_E_INVALID, "size must be positive");
	n = cpu_numel(X);
	C = X->dims[1];
	sp = cpu_shape_numel(X->rank - 2, X->dims + 2);
	lo = (size - 1) / 2;
	hi = size - 1 - lo;
	if (!(y = cpu_scratch(ctx, (size_t)n * sizeof(double) + 1)))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < X->dims[0]; b++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t s = 0; s < sp; s++) {
				double sq = 0.0;
				int64_t i = (b * C + c) * sp + s;
				for (int64_t k = c - lo; k <= c + hi; k++) {
					double v = k >= 0 && k < C ? x[(b * C + k) * sp + s] : 0.0;
					sq += v * v;
				}
				y[i] = x[i] / pow(bias + alpha / (double)size * sq, beta);
			}
	math_from_f64(Y, y, n);
	return 0;
}

const cpu_op cpu_op_instancenorm = { "InstanceNormalization", "", 1, CPU_OPSET_MAX, float_supports, NULL, instnorm_compute, NULL };
const cpu_op cpu_op_groupnorm = { "GroupNormalization", "", 18, CPU_OPSET_MAX, float_supports, NULL, groupnorm_compute, NULL };
const cpu_op cpu_op_lpnorm = { "LpNormalization", "", 1, CPU_OPSET_MAX, float_supports, NULL, lpnorm_compute, NULL };
const cpu_op cpu_op_mvn = { "MeanVarianceNormalization", "", 9, CPU_OPSET_MAX, float_supports, NULL, mvn_compute, NULL };
const cpu_op cpu_op_lrn = { "LRN", "", 1, CPU_OPSET_MAX, float_supports, NULL, lrn_compute, NULL };
