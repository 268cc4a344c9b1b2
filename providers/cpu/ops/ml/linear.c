/*
 * linear: LinearClassifier and LinearRegressor.  Scores are one GEMM,
 * X [N, C] times the coefficients [T, C] transposed, plus the intercepts,
 * in float (X of another type is converted first, as ONNX Runtime does).
 *
 * LinearClassifier's class count is the number of intercepts (ONNX
 * Runtime's reading; without intercepts, the number of labels).  A single
 * score row with two labels is a binary model: Z gets two columns
 * [1 - s, s] and the label is labels[1] when s > 0.  With T >= 2 the label
 * is the first highest raw score's and post_transform applies per row; a
 * single column only ever gets PROBIT (ml_post_row).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ml_ops.h"

typedef struct lin_state {
	int post;
	int64_t T, C;               /* targets (classes), features */
	float *w;                   /* [T, C] */
	float *b;                   /* [T] */
	ml_labels labels;           /* classifier only */
	int binary;                 /* classifier: T == 1 and two labels */
} lin_state;

static void lin_release(cpu_node *node)
{
	lin_state *st = node->state;

	if (st) {
		free(st->w);
		free(st->b);
		ml_labels_free(&st->labels);
		free(st);
	}
	node->state = NULL;
}

static int lin_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM, why, n);
}

/* Coefficients [T, C] and intercepts [T] (zeros when absent or, for the
 * regressor, of another length than T: ONNX Runtime ignores them then). */
static int lin_weights(const Onnx__NodeProto *p, lin_state *st, int classifier, char *err,
		       size_t n)
{
	const float *w, *b;
	size_t nw = cpu_attr_floats(p, "coefficients", &w);
	size_t nb = cpu_attr_floats(p, "intercepts", &b);

	if (nw == 0)
		return snprintf(err, n, "coefficients are required"), CPU_E_INVALID;
	if (classifier)
		st->T = nb ? (int64_t)nb : st->labels.n;
	else
		st->T = cpu_attr_int(p, "targets", 1);
	if (st->T <= 0 || nw % (size_t)st->T)
		return snprintf(err, n, "%zu coefficients do not make %lld rows", nw,
				(long long)st->T), CPU_E_INVALID;
	st->C = (int64_t)nw / st->T;
	st->w = malloc(nw * sizeof(float));
	st->b = calloc((size_t)st->T, sizeof(float));
	if (!st->w || !st->b)
		return CPU_E_NOMEM;
	memcpy(st->w, w, nw * sizeof(float));
	if (nb == (size_t)st->T)
		memcpy(st->b, b, nb * sizeof(float));
	return 0;
}

static int lin_prepare_common(cpu_node *node, int classifier, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	lin_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (ml_parse_post(p, &st->post, err, n))
		return CPU_E_INVALID;
	if (classifier && ml_labels_parse(p, "classlabels_ints", &st->labels, err, n))
		return CPU_E_INVALID;
	if ((rc = lin_weights(p, st, classifier, err, n)))
		return rc;
	if (!classifier)
		return 0;
	if (st->labels.n == 0)
		return snprintf(err, n, "classlabels_ints or classlabels_strings is required"),
			CPU_E_INVALID;
	st->binary = st->T == 1 && st->labels.n == 2;
	if (st->T > 1 && st->labels.n < st->T)
		return snprintf(err, n, "%lld class labels for %lld score rows",
				(long long)st->labels.n, (long long)st->T), CPU_E_INVALID;
	return 0;
}

static int linclf_prepare(cpu_node *node, char *err, size_t n)
{
	return lin_prepare_common(node, 1, err, n);
}

static int linreg_prepare(cpu_node *node, char *err, size_t n)
{
	return lin_prepare_common(node, 0, err, n);
}

/* scores [N, T] = X W^T + b. */
static float *lin_scores(cpu_ctx *ctx, const lin_state *st, int64_t *N, int *rc)
{
	const cpu_tensor *X = cpu_require(ctx, 0, rc);
	const float *x;
	int64_t C;
	float *s;

	if (!X)
		return NULL;
	if ((*rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM)))
		return NULL;
	if (ml_rows(X, N, &C) || C != st->C) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "X must be [N, %lld], not rank %d with %lld "
			       "columns", (long long)st->C, X->rank,
			       (long long)(X->rank ? X->dims[X->rank - 1] : 0));
		return NULL;
	}
	x = ml_as_float(ctx, X);
	s = cpu_scratch(ctx, (size_t)(*N * st->T + 1) * sizeof(float));
	if (!x || !s) {
		*rc = CPU_E_NOMEM;
		return NULL;
	}
	for (int64_t i = 0; i < *N; i++)
		memcpy(s + i * st->T, st->b, (size_t)st->T * sizeof(float));
	if (*N > 0 && st->C > 0)
		cpu_sgemm_pool(ctx->pool, 0, 1, *N, st->T, st->C, 1.0f, x, st->C, st->w, st->C,
			       1.0f, s, st->T);
	return s;
}

static void linclf_row(const lin_state *st, const float *s, cpu_tensor *Y, float *z, int64_t i)
{
	int64_t T = st->T, best = 0;

	if (T == 1) {
		if (st->labels.n == 2)
			ml_labels_put(&st->labels, Y, i, s[0] > 0);
		else
			ml_labels_put_literal(&st->labels, Y, i, s[0] > 0);
		if (st->binary) {
			ml_binary_scores(st->post, ML_SECOND_COMPLEMENT, s[0], z);
		} else {
			z[0] = s[0];
			ml_post_row(st->post, z, 1);
		}
		return;
	}
	for (int64_t j = 1; j < T; j++)
		best = s[j] > s[best] ? j : best;
	ml_labels_put(&st->labels, Y, i, best);
	memcpy(z, s, (size_t)T * sizeof(float));
	ml_post_row(st->post, z, T);
}

static int linclf_compute(cpu_ctx *ctx)
{
	const lin_state *st = ctx->node->state;
	int64_t N, zd[2];
	int rc = 0;
	float *s = lin_scores(ctx, st, &N, &rc);
	cpu_tensor *Y, *Z;

	if (!s)
		return rc;
	zd[0] = N;
	zd[1] = st->binary ? 2 : st->T;
	if (!(Y = ml_labels_output(ctx, &st->labels, N)) ||
	    !(Z = cpu_output(ctx, 1, CPU_FLOAT, 2, zd)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < N; i++)
		linclf_row(st, s + i * st->T, Y, (float *)Z->data + i * zd[1], i);
	return 0;
}

static int linreg_compute(cpu_ctx *ctx)
{
	const lin_state *st = ctx->node->state;
	int64_t N, yd[2];
	int rc = 0;
	float *s = lin_scores(ctx, st, &N, &rc);
	cpu_tensor *Y;

	if (!s)
		return rc;
	yd[0] = N;
	yd[1] = st->T;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, yd)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < N; i++)
		ml_post_row(st->post, s + i * st->T, st->T);
	memcpy(Y->data, s, (size_t)(N * st->T) * sizeof(float));
	return 0;
}

const cpu_op cpu_op_ml_linear_classifier = {
	"LinearClassifier", ML_DOMAIN, 1, ML_OPSET_MAX, lin_supports, linclf_prepare,
	linclf_compute, lin_release,
};
const cpu_op cpu_op_ml_linear_regressor = {
	"LinearRegressor", ML_DOMAIN, 1, ML_OPSET_MAX, lin_supports, linreg_prepare,
	linreg_compute, lin_release,
};
