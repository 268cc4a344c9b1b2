/*
 * svm: SVMClassifier and SVMRegressor, libsvm's models as the converters
 * write them, computed as ONNX Runtime does (its svmclassifier.cc):
 *
 *  - with support vectors (SVC mode), k[N, V] = kernel(X, SV) in float
 *    (LINEAR x.sv, POLY (gamma x.sv + coef0)^degree, RBF exp(-gamma |x -
 *    sv|^2), SIGMOID tanh(gamma x.sv + coef0)); then for each class pair
 *    (i < j) one decision value in double from the two blocks of dual
 *    coefficients plus rho, a vote for i when it is > 0, else for j; the
 *    label is the class with most votes (the first on a tie).  With
 *    prob_a/prob_b the pairwise values become probabilities through
 *    Platt's sigmoid and libsvm's multiclass coupling; without them Z holds
 *    the pairwise values (a binary model: [-s, s], or [1 - s, s] under a
 *    post_transform);
 *  - without support vectors (liblinear), Z = X coefficients^T + rho[0].
 *
 * X of any numeric type is converted to float first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ml_ops.h"

enum { K_LINEAR, K_POLY, K_RBF, K_SIGMOID };

typedef struct svm_state {
	int kernel, post, svc, one_class;
	float gamma, coef0, degree;
	int64_t cc;                 /* classes (classifier) */
	int64_t V, C;               /* support vectors, features */
	int64_t *vpc, *start;       /* vectors per class and where each starts */
	float *sv;                  /* [V, C] */
	float *coef;                /* SVC: [cc - 1, V]; linear: [cc, C]; regressor [V] or [C] */
	int64_t n_coef;
	float *rho, *pa, *pb;
	int64_t n_rho, n_prob;
	int all_positive;
	ml_labels labels;
} svm_state;

static void svm_release(cpu_node *node)
{
	svm_state *st = node->state;

	if (st) {
		free(st->vpc);
		free(st->start);
		free(st->sv);
		free(st->coef);
		free(st->rho);
		free(st->pa);
		free(st->pb);
		ml_labels_free(&st->labels);
		free(st);
	}
	node->state = NULL;
}

static int svm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM, why, n);
}

/* A FLOATS attribute copied out (NULL, 0 when absent). */
static int floats_copy(const Onnx__NodeProto *p, const char *name, float **out, int64_t *count)
{
	const float *v;
	size_t k = cpu_attr_floats(p, name, &v);

	*out = NULL;
	*count = (int64_t)k;
	if (!k)
		return 0;
	if (!(*out = malloc(k * sizeof(float))))
		return CPU_E_NOMEM;
	memcpy(*out, v, k * sizeof(float));
	return 0;
}

static int svm_kernel_parse(const Onnx__NodeProto *p, svm_state *st, char *err, size_t n)
{
	static const char *const names[] = {"LINEAR", "POLY", "RBF", "SIGMOID"};
	const float *kp;
	size_t nk = cpu_attr_floats(p, "kernel_params", &kp);
	char s[16];

	if (!cpu_attr_str(p, "kernel_type", s, sizeof(s)))
		snprintf(s, sizeof(s), "LINEAR");
	st->kernel = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			st->kernel = i;
	if (st->kernel < 0)
		return snprintf(err, n, "kernel_type '%s' is not LINEAR, POLY, RBF or SIGMOID", s),
			CPU_E_INVALID;
	if (nk && nk < 3)
		return snprintf(err, n, "kernel_params needs gamma, coef0 and degree"), CPU_E_INVALID;
	if (nk) {
		st->gamma = kp[0];
		st->coef0 = kp[1];
		st->degree = kp[2];
	}
	return 0;
}

/* Support vectors [V, C] with V given (classifier: sum of
 * vectors_per_class; regressor: n_supports). */
static int svm_vectors(const Onnx__NodeProto *p, svm_state *st, char *err, size_t n)
{
	int64_t nsv;
	int rc = floats_copy(p, "support_vectors", &st->sv, &nsv);

	if (rc)
		return rc;
	if (st->V <= 0 || nsv == 0 || nsv % st->V)
		return snprintf(err, n, "%lld support_vectors values do not make %lld vectors",
				(long long)nsv, (long long)st->V), CPU_E_INVALID;
	st->C = nsv / st->V;
	st->svc = 1;
	return 0;
}

static int svm_common(const Onnx__NodeProto *p, svm_state *st, char *err, size_t n)
{
	int rc;

	if (ml_parse_post(p, &st->post, err, n))
		return CPU_E_INVALID;
	if ((rc = svm_kernel_parse(p, st, err, n)) ||
	    (rc = floats_copy(p, "coefficients", &st->coef, &st->n_coef)) ||
	    (rc = floats_copy(p, "rho", &st->rho, &st->n_rho)))
		return rc;
	if (st->n_coef == 0 || st->n_rho == 0)
		return snprintf(err, n, "coefficients and rho are required"), CPU_E_INVALID;
	return 0;
}

static int svc_classes(const Onnx__NodeProto *p, svm_state *st, char *err, size_t n)
{
	const int64_t *vpc;
	size_t nv = cpu_attr_ints(p, "vectors_per_class", &vpc);
	int rc;

	if (nv != (size_t)st->cc)
		return snprintf(err, n, "vectors_per_class has %zu entries for %lld classes", nv,
				(long long)st->cc), CPU_E_INVALID;
	st->vpc = malloc(nv * sizeof(int64_t));
	st->start = malloc(nv * sizeof(int64_t));
	if (!st->vpc || !st->start)
		return CPU_E_NOMEM;
	for (size_t i = 0; i < nv; i++) {
		if (vpc[i] < 0)
			return snprintf(err, n, "vectors_per_class[%zu] is negative", i), CPU_E_INVALID;
		st->vpc[i] = vpc[i];
		st->start[i] = st->V;
		st->V += vpc[i];
	}
	if ((rc = svm_vectors(p, st, err, n)))
		return rc;
	if (st->cc < 2 || st->n_coef != (st->cc - 1) * st->V ||
	    st->n_rho < st->cc * (st->cc - 1) / 2)
		return snprintf(err, n, "an SVC of %lld classes and %lld vectors needs %lld "
				"coefficients and %lld rho (has %lld, %lld)", (long long)st->cc,
				(long long)st->V, (long long)((st->cc - 1) * st->V),
				(long long)(st->cc * (st->cc - 1) / 2), (long long)st->n_coef,
				(long long)st->n_rho), CPU_E_INVALID;
	return 0;
}

static int svmclf_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	svm_state *st = calloc(1, sizeof(*st));
	int64_t npb;
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if ((rc = svm_common(p, st, err, n)) ||
	    (rc = floats_copy(p, "prob_a", &st->pa, &st->n_prob)) ||
	    (rc = floats_copy(p, "prob_b", &st->pb, &npb)))
		return rc;
	if (ml_labels_parse(p, "classlabels_ints", &st->labels, err, n))
		return CPU_E_INVALID;
	if (st->labels.n == 0)
		return snprintf(err, n, "classlabels_ints or classlabels_strings is required"),
			CPU_E_INVALID;
	st->cc = st->labels.n;
	if (npb != st->n_prob)
		return snprintf(err, n, "prob_a and prob_b differ in length"), CPU_E_INVALID;
	st->all_positive = 1;
	for (int64_t i = 0; i < st->n_coef; i++)
		st->all_positive &= st->coef[i] >= 0;
	if (cpu_attr(p, "vectors_per_class")) {
		if ((rc = svc_classes(p, st, err, n)))
			return rc;
		if (st->n_prob && st->n_prob < st->cc * (st->cc - 1) / 2)
			return snprintf(err, n, "prob_a needs one value per class pair"),
				CPU_E_INVALID;
		return 0;
	}
	st->kernel = K_LINEAR;
	if (st->n_coef % st->cc)
		return snprintf(err, n, "%lld coefficients do not make %lld rows",
				(long long)st->n_coef, (long long)st->cc), CPU_E_INVALID;
	st->C = st->n_coef / st->cc;
	return 0;
}

static int svmreg_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	svm_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if ((rc = svm_common(p, st, err, n)))
		return rc;
	if (st->post != ML_POST_NONE)
		return snprintf(err, n, "post_transform other than NONE is not supported (ONNX "
				"Runtime ignores it)"), CPU_E_UNSUPPORTED;
	st->one_class = cpu_attr_int(p, "one_class", 0) != 0;
	st->V = cpu_attr_int(p, "n_supports", 0);
	if (st->V > 0) {
		if ((rc = svm_vectors(p, st, err, n)))
			return rc;
		if (st->n_coef < st->V)
			return snprintf(err, n, "%lld coefficients for %lld support vectors",
					(long long)st->n_coef, (long long)st->V), CPU_E_INVALID;
		return 0;
	}
	st->kernel = K_LINEAR;
	st->C = st->n_coef;
	return 0;
}

/* out[N, M] = kernel(x[N, C], b[M, C]) with ONNX Runtime's float
 * arithmetic; `c` is added to LINEAR (liblinear's rho[0]). */
static void svm_kernel(cpu_ctx *ctx, const svm_state *st, const float *x, int64_t N,
		       const float *b, int64_t M, float c, float *out)
{
	int64_t C = st->C;

	if (st->kernel == K_RBF) {
		for (int64_t i = 0; i < N; i++) {
			for (int64_t v = 0; v < M; v++) {
				float sum = 0;

				for (int64_t f = 0; f < C; f++) {
					float d = x[i * C + f] - b[v * C + f];

					sum += d * d;
				}
				out[i * M + v] = expf(-st->gamma * sum);
			}
		}
		return;
	}
	if (st->kernel != K_LINEAR)
		c = st->coef0;
	for (int64_t k = 0; k < N * M; k++)
		out[k] = c;
	if (N > 0 && M > 0 && C > 0)
		cpu_sgemm_pool(ctx->pool, 0, 1, N, M, C, st->kernel == K_LINEAR ? 1.0f : st->gamma,
			       x, C, b, C, 1.0f, out, M);
	for (int64_t k = 0; k < N * M && st->kernel == K_POLY; k++)
		out[k] = st->degree == 2 ? out[k] * out[k] :
			st->degree == 3 ? out[k] * out[k] * out[k] : powf(out[k], st->degree);
	for (int64_t k = 0; k < N * M && st->kernel == K_SIGMOID; k++)
		out[k] = tanhf(out[k]);
}

/* libsvm's pairwise coupling (ONNX Runtime's multiclass_probability),
 * r [k, k] -> p [k]; q and qp are scratch of k * k and k floats. */
static void coupling(int64_t k, const float *r, float *p, float *q, float *qp)
{
	float eps = 0.005f / (float)k;

	memset(q, 0, (size_t)(k * k) * sizeof(float));
	for (int64_t i = 0; i < k; i++) {
		p[i] = 1.0f / (float)k;
		for (int64_t j = 0; j < i; j++) {
			q[i * k + i] += r[j * k + i] * r[j * k + i];
			q[i * k + j] = q[j * k + i];
		}
		for (int64_t j = i + 1; j < k; j++) {
			q[i * k + i] += r[j * k + i] * r[j * k + i];
			q[i * k + j] = -r[j * k + i] * r[i * k + j];
		}
	}
	for (int loop = 0; loop < 100; loop++) {
		float pqp = 0, max_err = 0;

		for (int64_t i = 0; i < k; i++) {
			qp[i] = 0;
			for (int64_t j = 0; j < k; j++)
				qp[i] += q[i * k + j] * p[j];
			pqp += p[i] * qp[i];
		}
		for (int64_t i = 0; i < k; i++)
			max_err = fabsf(qp[i] - pqp) > max_err ? fabsf(qp[i] - pqp) : max_err;
		if (max_err < eps)
			break;
		for (int64_t i = 0; i < k; i++) {
			float diff = (-qp[i] + pqp) / q[i * k + i];

			p[i] += diff;
			pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
			for (int64_t j = 0; j < k; j++) {
				qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
				p[j] /= (1 + diff);
			}
		}
	}
}

/* Pairwise decision values of one row (kernels k[V]) into s, votes into
 * votes[cc]. */
static void svc_pairs(const svm_state *st, const float *k, float *s, int64_t *votes)
{
	int64_t V = st->V, idx = 0;

	memset(votes, 0, (size_t)st->cc * sizeof(int64_t));
	for (int64_t i = 0; i < st->cc - 1; i++) {
		for (int64_t j = i + 1; j < st->cc; j++, idx++) {
			const float *ci = st->coef + (j - 1) * V + st->start[i];
			const float *cj = st->coef + i * V + st->start[j];
			double sum = 0;

			for (int64_t m = 0; m < st->vpc[i]; m++)
				sum += (double)(ci[m] * k[st->start[i] + m]);
			for (int64_t m = 0; m < st->vpc[j]; m++)
				sum += (double)(cj[m] * k[st->start[j] + m]);
			sum += st->rho[idx];
			s[idx] = (float)sum;
			votes[sum > 0 ? i : j]++;
		}
	}
}

/* Pairwise values -> class probabilities z[cc] (r, q, qp scratch). */
static void svc_proba(const svm_state *st, const float *s, float *z, float *r, float *q,
		      float *qp)
{
	int64_t cc = st->cc, idx = 0;

	memset(r, 0, (size_t)(cc * cc) * sizeof(float));
	for (int64_t i = 0; i < cc - 1; i++) {
		for (int64_t j = i + 1; j < cc; j++, idx++) {
			float v = 1 - ml_logistic(s[idx] * st->pa[idx] + st->pb[idx]);

			v = v < 1.0e-7f ? 1.0e-7f : v > 1 - 1.0e-7f ? 1 - 1.0e-7f : v;
			r[i * cc + j] = v;
			r[j * cc + i] = 1 - v;
		}
	}
	coupling(cc, r, z, q, qp);
}

static int64_t argmax_i64(const int64_t *v, int64_t n)
{
	int64_t b = 0;

	for (int64_t i = 1; i < n; i++)
		b = v[i] > v[b] ? i : b;
	return b;
}

/* One row of an SVC classifier: label and scores z. */
static void svc_row(const svm_state *st, const float *k, cpu_tensor *Y, float *z, int64_t row,
		    float *s, int64_t *votes, float *r, float *q, float *qp)
{
	int64_t cc = st->cc, npairs = cc * (cc - 1) / 2, best;

	svc_pairs(st, k, s, votes);
	best = argmax_i64(votes, cc);
	ml_labels_put(&st->labels, Y, row, best);
	if (st->n_prob) {
		svc_proba(st, s, z, r, q, qp);
		ml_post_row(st->post, z, cc);
	} else if (npairs == 1) {
		ml_binary_scores(st->post, st->post == ML_POST_NONE ? ML_SECOND_NEGATE :
				 ML_SECOND_COMPLEMENT, s[0], z);
	} else {
		memcpy(z, s, (size_t)npairs * sizeof(float));
		ml_post_row(st->post, z, npairs);
	}
}

/* One row of a liblinear classifier: z [cc] holds X w^T + rho[0]. */
static void linear_row(const svm_state *st, cpu_tensor *Y, float *z, int64_t row)
{
	int64_t best = 0;

	for (int64_t j = 1; j < st->cc; j++)
		best = z[j] > z[best] ? j : best;
	if (st->cc == 2 && !st->n_prob &&
	    ((st->all_positive && z[best] >= 0.5f) || (!st->all_positive && z[best] > 0)))
		best = 1;
	ml_labels_put(&st->labels, Y, row, best);
	ml_post_row(st->post, z, st->cc);
}

static const float *svm_input(cpu_ctx *ctx, const svm_state *st, int64_t *N, int *rc)
{
	const cpu_tensor *X = cpu_require(ctx, 0, rc);
	const float *x;
	int64_t C;

	if (!X || (*rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM)))
		return NULL;
	if (ml_rows(X, N, &C) || C != st->C) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "X must be [N, %lld]", (long long)st->C);
		return NULL;
	}
	if (!(x = ml_as_float(ctx, X)))
		*rc = CPU_E_NOMEM;
	return x;
}

static int svmclf_compute(cpu_ctx *ctx)
{
	const svm_state *st = ctx->node->state;
	int64_t N, cc = st->cc, npairs = cc * (cc - 1) / 2, zd[2], *votes;
	int rc = 0;
	const float *x = svm_input(ctx, st, &N, &rc);
	float *k, *s, *r, *q, *qp;
	cpu_tensor *Y, *Z;

	if (!x)
		return rc;
	zd[0] = N;
	zd[1] = !st->svc || st->n_prob ? cc : cc > 2 ? npairs : 2;
	if (!(Y = ml_labels_output(ctx, &st->labels, N)) ||
	    !(Z = cpu_output(ctx, 1, CPU_FLOAT, 2, zd)))
		return CPU_E_NOMEM;
	if (!st->svc) {
		svm_kernel(ctx, st, x, N, st->coef, cc, st->rho[0], Z->data);
		for (int64_t i = 0; i < N; i++)
			linear_row(st, Y, (float *)Z->data + i * cc, i);
		return 0;
	}
	k = cpu_scratch(ctx, (size_t)(N * st->V + 1) * sizeof(float));
	s = cpu_scratch(ctx, (size_t)(npairs + 1) * sizeof(float));
	votes = cpu_scratch(ctx, (size_t)cc * sizeof(int64_t));
	r = cpu_scratch(ctx, (size_t)(2 * cc * cc + cc) * sizeof(float));
	if (!k || !s || !votes || !r)
		return CPU_E_NOMEM;
	q = r + cc * cc;
	qp = q + cc * cc;
	svm_kernel(ctx, st, x, N, st->sv, st->V, 0, k);
	for (int64_t i = 0; i < N; i++)
		svc_row(st, k + i * st->V, Y, (float *)Z->data + i * zd[1], i, s, votes, r, q, qp);
	return 0;
}

static int svmreg_compute(cpu_ctx *ctx)
{
	const svm_state *st = ctx->node->state;
	int64_t N, yd[2];
	int rc = 0;
	const float *x = svm_input(ctx, st, &N, &rc);
	float *y, *k;
	cpu_tensor *Y;

	if (!x)
		return rc;
	yd[0] = N;
	yd[1] = 1;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, yd)))
		return CPU_E_NOMEM;
	y = Y->data;
	if (!st->svc) {
		svm_kernel(ctx, st, x, N, st->coef, 1, st->rho[0], y);
	} else {
		if (!(k = cpu_scratch(ctx, (size_t)(N * st->V + 1) * sizeof(float))))
			return CPU_E_NOMEM;
		svm_kernel(ctx, st, x, N, st->sv, st->V, 0, k);
		for (int64_t i = 0; i < N; i++)
			y[i] = st->rho[0];
		if (N > 0)
			cpu_sgemm(0, 1, N, 1, st->V, 1.0f, k, st->V, st->coef, st->V, 1.0f, y, 1);
	}
	for (int64_t i = 0; i < N && st->one_class; i++)
		y[i] = y[i] > 0 ? 1.0f : -1.0f;
	return 0;
}

const cpu_op cpu_op_ml_svm_classifier = {
	"SVMClassifier", ML_DOMAIN, 1, ML_OPSET_MAX, svm_supports, svmclf_prepare,
	svmclf_compute, svm_release,
};
const cpu_op cpu_op_ml_svm_regressor = {
	"SVMRegressor", ML_DOMAIN, 1, ML_OPSET_MAX, svm_supports, svmreg_prepare,
	svmreg_compute, svm_release,
};
