/*
 * tree_ops: TreeEnsembleRegressor and TreeEnsembleClassifier.  The trees
 * are compiled at prepare (tree_build.c) and summed per row by tree_eval.c;
 * this file turns the sums into outputs exactly as ONNX Runtime's
 * aggregators (tree_ensemble_aggregator.h there) do, including what it
 * does where ONNX is silent:
 *
 *  - an output no tree gave a weight reads 0 (its base value too, but
 *    for a classifier with more than two classes, whose base values fill
 *    such outputs);
 *  - a regressor with one target adds base_values[0] and only applies
 *    PROBIT; AVERAGE divides by the number of trees; MIN and MAX take the
 *    extreme leaf;
 *  - a binary classifier whose weights all name one class scores that one
 *    value: the label is labels[1] when it is > 0.5 (weights all
 *    positive) or > 0 (otherwise), Z is [1 - s, s] or [-s, s] (under
 *    LOGISTIC, [logistic(-s), logistic(s)]); one whose weights name both
 *    classes answers label 1 or 0 (the int64s 1 and 0, or the strings at
 *    index 1 and 0) by the sign of the second score.
 *
 * In float mode (X not double) every step rounds to float, as ONNX
 * Runtime computes in float there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree.h"

typedef struct te_state {
	tree_ens e;
	int post;
	ml_labels labels;             /* classifier */
	int binary_case;              /* classifier: two classes, weights name one */
} te_state;

static void te_release(cpu_node *node)
{
	te_state *st = node->state;

	if (st) {
		tree_free(&st->e);
		ml_labels_free(&st->labels);
		free(st);
	}
	node->state = NULL;
}

static int te_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM, why, n);
}

static int parse_agg(const Onnx__NodeProto *p, int *agg, char *err, size_t n)
{
	static const char *const names[] = {"SUM", "AVERAGE", "MIN", "MAX"};
	char s[16];

	if (!cpu_attr_str(p, "aggregate_function", s, sizeof(s)))
		snprintf(s, sizeof(s), "SUM");
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, names[i]) == 0) {
			*agg = i;
			return 0;
		}
	}
	snprintf(err, n, "aggregate_function '%s' is not SUM, AVERAGE, MIN or MAX", s);
	return -1;
}

static int te_reg_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	te_state *st = calloc(1, sizeof(*st));
	int agg, rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (ml_parse_post(p, &st->post, err, n) || parse_agg(p, &agg, err, n))
		return CPU_E_INVALID;
	if ((rc = tree_build(p, "target", cpu_attr_int(p, "n_targets", 0), &st->e, err, n)))
		return rc;
	st->e.agg = agg;
	st->e.single = st->e.n_out == 1;
	if (st->e.n_base > 1 && st->e.n_base != st->e.n_out)
		return snprintf(err, n, "base_values has %lld entries for %lld targets",
				(long long)st->e.n_base, (long long)st->e.n_out), CPU_E_INVALID;
	return 0;
}

static int te_clf_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	te_state *st = calloc(1, sizeof(*st));
	int64_t nb;
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (ml_parse_post(p, &st->post, err, n) ||
	    ml_labels_parse(p, "classlabels_int64s", &st->labels, err, n))
		return CPU_E_INVALID;
	if (st->labels.n < 2)
		return snprintf(err, n, "needs at least two class labels (has %lld)",
				(long long)st->labels.n), CPU_E_UNSUPPORTED;
	if ((rc = tree_build(p, "class", st->labels.n, &st->e, err, n)))
		return rc;
	st->e.agg = TREE_SUM;
	st->binary_case = st->labels.n == 2 && st->e.n_weight_classes == 1;
	nb = st->e.n_base;
	if (st->labels.n > 2 ? nb != 0 && nb != st->labels.n : nb > 2)
		return snprintf(err, n, "base_values has %lld entries for %lld classes",
				(long long)nb, (long long)st->labels.n), CPU_E_INVALID;
	return 0;
}

/* Rounds to float in float mode. */
static double rnd(int fl, double v)
{
	return fl ? (double)(float)v : v;
}

static void reg_row(const te_state *st, int fl, double *s, const uint8_t *h, float *y)
{
	const tree_ens *e = &st->e;
	int64_t K = e->n_out;
	double ntrees = (double)e->n_trees;

	if (e->single) {
		double origin = e->n_base == 1 ? rnd(fl, e->base[0]) : 0, v = s[0];

		if (e->agg == TREE_AVERAGE)
			v = rnd(fl, v / ntrees);
		v = e->agg >= TREE_MIN && !h[0] ? origin : rnd(fl, v + origin);
		y[0] = st->post == ML_POST_PROBIT ? ml_probit((float)v) : (float)v;
		return;
	}
	for (int64_t k = 0; k < K; k++) {
		double b = e->n_base == K ? rnd(fl, e->base[k]) : 0, v = s[k];

		if (e->agg == TREE_AVERAGE)
			v = rnd(fl, v / ntrees);
		v = rnd(fl, v + b);
		y[k] = h[k] ? (float)v : 0.0f;
	}
	ml_post_row(st->post, y, K);
}

/* A classifier of more than two classes: base values fill the outputs no
 * tree reached; the label is the first highest. */
static int64_t clf_multi(const te_state *st, int fl, double *s, uint8_t *h, float *z)
{
	const tree_ens *e = &st->e;
	int64_t n = st->labels.n, best = -1;

	for (int64_t k = 0; k < e->n_base; k++) {
		s[k] = h[k] ? rnd(fl, s[k] + rnd(fl, e->base[k])) : rnd(fl, e->base[k]);
		h[k] = 1;
	}
	for (int64_t k = 0; k < n; k++) {
		if (h[k] && (best < 0 || s[k] > s[best]))
			best = k;
		z[k] = h[k] ? (float)s[k] : 0.0f;
	}
	ml_post_row(st->post, z, n);
	return best < 0 ? 0 : best;
}

/* The binary classifier (ONNX Runtime's FinalizeScores and
 * _set_score_binary): label and Z of one row. */
static void clf_binary(const te_state *st, int fl, double *s, uint8_t *h, cpu_tensor *Y,
		       int64_t row, float *z)
{
	const tree_ens *e = &st->e;
	int second = -1, size = 2, up;
	double pos, b0 = e->n_base > 0 ? rnd(fl, e->base[0]) : 0;
	double b1 = e->n_base > 1 ? rnd(fl, e->base[1]) : 0;

	if (e->n_base == 2 && h[1]) {
		s[1] = rnd(fl, b1 + s[0]);
		s[0] = -s[1];
	} else if (e->n_base == 2) {
		s[1] = rnd(fl, s[1] + b1);
		s[0] = rnd(fl, s[0] + b0);
	} else if (e->n_base == 1) {
		s[0] = rnd(fl, s[0] + b0);
		size = h[1] ? 2 : 1;
	} else if (e->n_base == 0) {
		second = 3;
		size = h[1] ? 2 : 1;
	}
	pos = size == 2 && h[1] ? s[1] : h[0] ? s[0] : 0;
	if (st->binary_case) {
		up = e->all_positive ? pos > 0.5 : pos > 0;
		second = e->all_positive ? !up : 2 + !up;
		ml_labels_put(&st->labels, Y, row, up);
	} else if (st->labels.strings) {
		ml_labels_put(&st->labels, Y, row, pos > 0);
	} else {
		ml_labels_put_literal(&st->labels, Y, row, pos > 0);
	}
	if (size == 2) {
		z[0] = h[0] ? (float)s[0] : 0.0f;
		z[1] = h[1] ? (float)s[1] : 0.0f;
		ml_post_row(st->post, z, 2);
	} else if (second < 0 && st->post != ML_POST_PROBIT) {
		z[0] = h[0] ? (float)s[0] : 0.0f;
		z[1] = 0;
	} else {
		ml_binary_scores(st->post, second < 2 ? ML_SECOND_COMPLEMENT : ML_SECOND_NEGATE,
				 h[0] ? (float)s[0] : 0.0f, z);
	}
}

/* X, checked, as float rows or (x64) double rows. */
static const void *te_input(cpu_ctx *ctx, const tree_ens *e, int64_t *N, int64_t *C, int *x64,
			    int *rc)
{
	const cpu_tensor *X = cpu_require(ctx, 0, rc);
	const void *x;

	if (!X || (*rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM)))
		return NULL;
	if (ml_rows(X, N, C)) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "X must be [N, C] or [C], not of rank %d",
			       X->rank);
		return NULL;
	}
	if (e->max_feature >= *C) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "the trees read feature %lld but X has %lld",
			       (long long)e->max_feature, (long long)*C);
		return NULL;
	}
	*x64 = X->dtype == CPU_DOUBLE;
	x = *x64 ? X->data : (const void *)ml_as_float(ctx, X);
	if (!x)
		*rc = CPU_E_NOMEM;
	return x;
}

/* Sums for every row: score and has, N * K each. */
static int te_sums(cpu_ctx *ctx, const te_state *st, int64_t *N, int *x64, double **score,
		   uint8_t **has)
{
	int64_t C, K = st->e.single ? 1 : st->e.n_out;
	int rc = 0;
	const void *x = te_input(ctx, &st->e, N, &C, x64, &rc);

	if (!x)
		return rc;
	*score = cpu_scratch(ctx, (size_t)(*N * K + 1) * sizeof(double));
	*has = cpu_scratch(ctx, (size_t)(*N * K + 1));
	if (!*score || !*has)
		return CPU_E_NOMEM;
	return tree_eval(ctx, &st->e, x, *x64, *N, C, *score, *has);
}

static int te_reg_compute(cpu_ctx *ctx)
{
	const te_state *st = ctx->node->state;
	int64_t N, dims[2], K = st->e.single ? 1 : st->e.n_out;
	int x64, rc;
	double *score;
	uint8_t *has;
	cpu_tensor *Y;

	if ((rc = te_sums(ctx, st, &N, &x64, &score, &has)))
		return rc;
	dims[0] = N;
	dims[1] = st->e.n_out;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < N; i++)
		reg_row(st, !x64, score + i * K, has + i * K, (float *)Y->data + i * st->e.n_out);
	return 0;
}

static int te_clf_compute(cpu_ctx *ctx)
{
	const te_state *st = ctx->node->state;
	int64_t N, dims[2], K = st->labels.n;
	int x64, rc;
	double *score;
	uint8_t *has;
	cpu_tensor *Y, *Z;

	if ((rc = te_sums(ctx, st, &N, &x64, &score, &has)))
		return rc;
	dims[0] = N;
	dims[1] = K;
	if (!(Y = ml_labels_output(ctx, &st->labels, N)) ||
	    !(Z = cpu_output(ctx, 1, CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < N; i++) {
		float *z = (float *)Z->data + i * K;

		if (K > 2)
			ml_labels_put(&st->labels, Y, i,
				      clf_multi(st, !x64, score + i * K, has + i * K, z));
		else
			clf_binary(st, !x64, score + i * K, has + i * K, Y, i, z);
	}
	return 0;
}

const cpu_op cpu_op_ml_tree_regressor = {
	"TreeEnsembleRegressor", ML_DOMAIN, 1, ML_OPSET_MAX, te_supports, te_reg_prepare,
	te_reg_compute, te_release,
};
const cpu_op cpu_op_ml_tree_classifier = {
	"TreeEnsembleClassifier", ML_DOMAIN, 1, ML_OPSET_MAX, te_supports, te_clf_prepare,
	te_clf_compute, te_release,
};
