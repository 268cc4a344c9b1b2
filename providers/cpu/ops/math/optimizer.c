/*
 * optimizer: the training-preview update rules of domain
 * ai.onnx.preview.training — Adagrad, Adam and Momentum (standard and
 * nesterov).  Inputs are R (scalar learning rate), T (scalar int64 update
 * count), then n tensors X, n gradients G and n (Adagrad, Momentum: H or V)
 * or 2n (Adam: V, H) state tensors of X's shape; outputs are the n new X
 * followed by the new states, in the same order.  Computed in double with
 * the spec's pseudo code.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "math_ops.h"

enum { OPT_ADAGRAD, OPT_ADAM, OPT_MOMENTUM };

typedef struct opt_params {
	int kind, nesterov, n;      /* n: tensors optimised */
	double r, norm, eps, decay, alpha, beta, post;
	int64_t t;
} opt_params;

static int opt_kind(const char *t)
{
	return !strcmp(t, "Adagrad") ? OPT_ADAGRAD : !strcmp(t, "Adam") ? OPT_ADAM : OPT_MOMENTUM;
}

static int states_of(int kind)
{
	return kind == OPT_ADAM ? 2 : 1;
}

static int opt_attrs(cpu_ctx *ctx, opt_params *o)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	char mode[16];
	o->norm = cpu_attr_float(p, "norm_coefficient", 0.0f);
	o->eps = cpu_attr_float(p, "epsilon", 1e-6f);
	o->decay = cpu_attr_float(p, "decay_factor", 0.0f);
	o->post = cpu_attr_float(p, "norm_coefficient_post", 0.0f);
	o->alpha = cpu_attr_float(p, "alpha", 0.9f);
	o->beta = cpu_attr_float(p, "beta", 0.999f);
	if (o->kind != OPT_MOMENTUM)
		return 0;
	if (!cpu_attr(p, "alpha") || !cpu_attr(p, "beta") || !cpu_attr(p, "norm_coefficient") ||
	    !cpu_attr_str(p, "mode", mode, sizeof(mode)))
		return cpu_fail(ctx, CPU_E_INVALID, "Momentum needs alpha, beta, mode and "
				"norm_coefficient");
	if (strcmp(mode, "standard") && strcmp(mode, "nesterov"))
		return cpu_fail(ctx, CPU_E_INVALID, "unknown mode '%s'", mode);
	o->nesterov = !strcmp(mode, "nesterov");
	return 0;
}

/* R, T, the input count and every tensor's dtype and shape. */
static int opt_inputs(cpu_ctx *ctx, opt_params *o)
{
	int per = 2 + states_of(o->kind), rc = 0;
	const cpu_tensor *R, *T;
	if (!(R = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, R, 0, CPU_TYPES_FLOAT)))
		return rc;
	if (!(T = cpu_require(ctx, 1, &rc)) ||
	    (rc = cpu_check_dtype(ctx, T, 1, CPU_BIT(CPU_INT64))) != 0)
		return rc;
	if (cpu_read_scalar(R, &o->r) != 0 || cpu_numel(T) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "R and T must be scalars");
	o->t = ((const int64_t *)T->data)[0];
	if (ctx->n_in < 2 + per || (ctx->n_in - 2) % per != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "%d inputs: expected R, T and %d per tensor",
				ctx->n_in, per);
	o->n = (ctx->n_in - 2) / per;
	if (ctx->n_out > o->n * (1 + states_of(o->kind)))
		return cpu_fail(ctx, CPU_E_INVALID, "%d outputs for %d tensors", ctx->n_out, o->n);
	for (int i = 2; i < ctx->n_in; i++) {
		const cpu_tensor *t = cpu_require(ctx, i, &rc), *x = ctx->in[2 + (i - 2) % o->n];
		if (!t || (rc = cpu_check_dtype(ctx, t, i, CPU_TYPES_FLOAT)) != 0)
			return rc;
		if (t->dtype != x->dtype || t->rank != x->rank ||
		    memcmp(t->dims, x->dims, sizeof(int64_t) * (size_t)x->rank) != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d differs from its X in dtype "
					"or shape", i);
	}
	return 0;
}

/* One element: x, g, s[0..1] in; x and s[] out. */
static void opt_step(const opt_params *o, double *x, double g, double *s)
{
	double gr = o->norm * *x + g;
	if (o->kind == OPT_ADAGRAD) {
		double r = o->r / (1.0 + (double)o->t * o->decay);
		s[0] = s[0] + gr * gr;
		*x = *x - r * gr / (sqrt(s[0]) + o->eps);
	} else if (o->kind == OPT_ADAM) {
		double r = o->r;
		s[0] = o->alpha * s[0] + (1.0 - o->alpha) * gr;
		s[1] = o->beta * s[1] + (1.0 - o->beta) * gr * gr;
		if (o->t > 0)
			r = o->r * sqrt(1.0 - pow(o->beta, (double)o->t)) /
			    (1.0 - pow(o->alpha, (double)o->t));
		*x = (1.0 - o->post) * (*x - r * (s[0] / (sqrt(s[1]) + o->eps)));
	} else {
		double beta = o->t > 0 ? o->beta : 1.0;
		s[0] = o->alpha * s[0] + beta * gr;
		*x = o->nesterov ? *x - o->r * (gr + o->alpha * s[0]) : *x - o->r * s[0];
	}
}

static int opt_tensor(cpu_ctx *ctx, const opt_params *o, int j)
{
	int ns = states_of(o->kind);
	const cpu_tensor *X = ctx->in[2 + j], *G = ctx->in[2 + o->n + j];
	const cpu_tensor *S[2] = {ctx->in[2 + 2 * o->n + j], NULL};
	cpu_tensor *Y[3], spare[3];
	int64_t n = cpu_numel(X);
	if (ns == 2)
		S[1] = ctx->in[2 + 3 * o->n + j];
	for (int k = 0; k <= ns; k++) {
		if (k * o->n + j < ctx->n_out) {   /* trailing outputs may be left out */
			Y[k] = cpu_output(ctx, k * o->n + j, X->dtype, X->rank, X->dims);
		} else {
			spare[k].dtype = X->dtype;
			spare[k].data = cpu_scratch(ctx, (size_t)n * cpu_dtype_size(X->dtype) + 1);
			Y[k] = spare[k].data ? &spare[k] : NULL;
		}
		if (!Y[k])
			return CPU_E_NOMEM;
	}
	for (int64_t i = 0; i < n; i++) {
		double x = cpu_get_f64(X->dtype, X->data, i), s[2] = {0.0, 0.0};
		for (int k = 0; k < ns; k++)
			s[k] = cpu_get_f64(S[k]->dtype, S[k]->data, i);
		opt_step(o, &x, cpu_get_f64(G->dtype, G->data, i), s);
		cpu_set_f64(X->dtype, Y[0]->data, i, x);
		for (int k = 0; k < ns; k++)
			cpu_set_f64(X->dtype, Y[k + 1]->data, i, s[k]);
	}
	return 0;
}

static int opt_compute(cpu_ctx *ctx)
{
	opt_params o;
	int rc;
	memset(&o, 0, sizeof(o));
	o.kind = opt_kind(ctx->node->proto->op_type);
	if ((rc = opt_attrs(ctx, &o)) != 0 || (rc = opt_inputs(ctx, &o)) != 0)
		return rc;
	for (int j = 0; j < o.n; j++)
		if ((rc = opt_tensor(ctx, &o, j)) != 0)
			return rc;
	return 0;
}

static int opt_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i == 1 ? CPU_BIT(CPU_INT64) : CPU_TYPES_FLOAT,
					why, n))
			return 0;
	return 1;
}

#define TRAINING "ai.onnx.preview.training"
const cpu_op cpu_op_adagrad = { "Adagrad", TRAINING, 1, 1, opt_supports, NULL, opt_compute, NULL };
const cpu_op cpu_op_adam = { "Adam", TRAINING, 1, 1, opt_supports, NULL, opt_compute, NULL };
const cpu_op cpu_op_momentum = { "Momentum", TRAINING, 1, 1, opt_supports, NULL, opt_compute, NULL };
