/*
 * loss: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (which is
 * LogSoftmax over the class axis followed by the same NLL, with the log
 * probabilities as an optional second output).  Input (N, C, d1..dk),
 * target (N, d1..dk) int32/int64, optional weight [C], reduction none, sum
 * or mean (the weighted mean divides by the sum of the weights of the
 * samples that count; ignore_index samples weigh 0).  Computed in double.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

enum { RED_NONE, RED_SUM, RED_MEAN };

typedef struct nll_args {
	const cpu_tensor *target;
	const double *weight;        /* NULL: every class weighs 1 */
	int64_t N, C, D;             /* D = d1 * .. * dk */
	int has_ii, reduction;
	int64_t ii;
} nll_args;

static int loss_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, MATH_TYPES_FLOAT, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, MATH_TYPES_FLOAT, why, n);
}

/* Checks shapes and attributes; fills a (weight converted to double). */
static int nll_parse(cpu_ctx *ctx, const cpu_tensor *X, nll_args *a)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *T, *W = cpu_input(ctx, 2);
	char red[16];
	int rc = 0;

	memset(a, 0, sizeof(*a));
	if (!(T = cpu_require(ctx, 1, &rc)) || (rc = cpu_check_dtype(ctx, T, 1, CPU_TYPES_INDEX)))
		return rc;
	if (X->rank < 2 || T->rank != X->rank - 1 || T->dims[0] != X->dims[0])
		return cpu_fail(ctx, CPU_E_INVALID, "target must be (N, d1..dk) for input "
				"(N, C, d1..dk)");
	for (int d = 1; d < T->rank; d++)
		if (T->dims[d] != X->dims[d + 1])
			return cpu_fail(ctx, CPU_E_INVALID, "target dim %d is %lld, input's %lld",
					d, (long long)T->dims[d], (long long)X->dims[d + 1]);
	a->target = T;
	a->N = X->dims[0];
	a->C = X->dims[1];
	a->D = cpu_shape_numel(X->rank - 2, X->dims + 2);
	a->has_ii = cpu_attr(p, "ignore_index") != NULL;
	a->ii = cpu_attr_int(p, "ignore_index", 0);
	if (!cpu_attr_str(p, "reduction", red, sizeof(red)))
		strcpy(red, "mean");
	a->reduction = !strcmp(red, "none") ? RED_NONE : !strcmp(red, "sum") ? RED_SUM
		     : !strcmp(red, "mean") ? RED_MEAN : -1;
	if (a->reduction < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "unknown reduction '%s'", red);
	if (W) {
		if ((rc = cpu_check_dtype(ctx, W, 2, MATH_TYPES_FLOAT)) != 0)
			return rc;
		if (W->rank != 1 || W->dims[0] != a->C)
			return cpu_fail(ctx, CPU_E_INVALID, "weight must have shape [%lld]",
					(long long)a->C);
		if (!(a->weight = math_to_f64(ctx, W)))
			return CPU_E_NOMEM;
	}
	return 0;
}

/* Loss from log-probabilities logp (N, C, D) into output 0 of dtype dt. */
static int nll_run(cpu_ctx *ctx, const nll_args *a, const double *logp, int32_t dt)
{
	int64_t n = a->N * a->D;
	double *loss = cpu_scratch(ctx, (size_t)n * sizeof(double) + 1), sum = 0.0, wsum = 0.0;
	cpu_tensor *Y;
	if (!loss)
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < n; i++) {
		int64_t t = cpu_get_i64(a->target->dtype, a->target->data, i), b = i / a->D;
		double w;
		if (a->has_ii && t == a->ii) {
			loss[i] = 0.0;
			continue;
		}
		if (t < 0 || t >= a->C)
			return cpu_fail(ctx, CPU_E_INVALID, "target %lld out of range [0, %lld)",
					(long long)t, (long long)a->C);
		w = a->weight ? a->weight[t] : 1.0;
		loss[i] = -logp[(b * a->C + t) * a->D + i % a->D] * w;
		sum += loss[i];
		wsum += w;
	}
	if (a->reduction == RED_NONE) {
		if (!(Y = cpu_output(ctx, 0, dt, a->target->rank, a->target->dims)))
			return CPU_E_NOMEM;
		math_from_f64(Y, loss, n);
		return 0;
	}
	if (!(Y = cpu_output(ctx, 0, dt, 0, NULL)))
		return CPU_E_NOMEM;
	cpu_set_f64(dt, Y->data, 0, a->reduction == RED_SUM ? sum : sum / wsum);
	return 0;
}

static int nll_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	nll_args a;
	double *x;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_FLOAT)))
		return rc;
	if ((rc = nll_parse(ctx, X, &a)) != 0)
		return rc;
	if (!(x = math_to_f64(ctx, X)))
		return CPU_E_NOMEM;
	return nll_run(ctx, &a, x, X->dtype);
}

/* In place: log-softmax over C of each of N x D lines (stride D). */
static void log_softmax(double *x, int64_t N, int64_t C, int64_t D)
{
	for (int64_t b = 0; b < N; b++)
		for (int64_t d = 0; d < D; d++) {
			double *line = x + b * C * D + d, m = -INFINITY, s = 0.0, ls;
			for (int64_t c = 0; c < C; c++)
				m = line[c * D] > m ? line[c * D] : m;
			for (int64_t c = 0; c < C; c++)
				s += exp(line[c * D] - m);
			ls = log(s);
			for (int64_t c = 0; c < C; c++)
				line[c * D] = line[c * D] - m - ls;
		}
}

static int sce_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	cpu_tensor *LP;
	nll_args a;
	double *x;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_FLOAT)))
		return rc;
	if ((rc = nll_parse(ctx, X, &a)) != 0)
		return rc;
	if (!(x = math_to_f64(ctx, X)))
		return CPU_E_NOMEM;
	log_softmax(x, a.N, a.C, a.D);
	if ((rc = nll_run(ctx, &a, x, X->dtype)) != 0)
		return rc;
	if (ctx->n_out > 1) {
		if (!(LP = cpu_output(ctx, 1, X->dtype, X->rank, X->dims)))
			return CPU_E_NOMEM;
		math_from_f64(LP, x, cpu_numel(X));
	}
	return 0;
}

const cpu_op cpu_op_nllloss = { "NegativeLogLikelihoodLoss", "", 12, CPU_OPSET_MAX, loss_supports, NULL, nll_compute, NULL };
const cpu_op cpu_op_sceloss = { "SoftmaxCrossEntropyLoss", "", 12, CPU_OPSET_MAX, loss_supports, NULL, sce_compute, NULL };
