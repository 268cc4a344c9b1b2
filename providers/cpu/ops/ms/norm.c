/*
 * norm: the layer normalizations of ONNX Runtime's transformer graphs,
 * float32: com.microsoft SkipLayerNormalization and
 * SkipSimplifiedLayerNormalization (x = input + skip [+ bias] over the
 * last axis, then LayerNorm or RMSNorm; optional outputs mean,
 * inv_std_var and the sum x itself), and SimplifiedLayerNormalization,
 * which ONNX Runtime registers in the default domain (RMSNorm over the
 * axes from `axis` on, optional inv_std_var).  The statistics of a row
 * are summed in double (two passes), rows run on the intra-op pool.
 */
#include <math.h>
#include <string.h>

#include "ms_ops.h"
#include "par.h"

void ms_norm_row(const float *x, float *y, int64_t n, const float *gamma, const float *beta,
		 float eps, int simplified, float *mean_out, float *inv_out)
{
	double s = 0.0, q = 0.0;
	float mean, inv;

	for (int64_t i = 0; i < n && !simplified; i++)
		s += x[i];
	mean = n && !simplified ? (float)(s / (double)n) : 0.0f;
	for (int64_t i = 0; i < n; i++) {
		double d = (double)x[i] - mean;
		q += d * d;
	}
	inv = (float)(1.0 / sqrt((n ? q / (double)n : 0.0) + eps));
	for (int64_t i = 0; i < n; i++)
		y[i] = (x[i] - mean) * inv * gamma[i] + (beta ? beta[i] : 0.0f);
	if (mean_out)
		*mean_out = mean;
	if (inv_out)
		*inv_out = inv;
}

static int norm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 5; i++)
		if (!cpu_supports_dtype(dt, n_in, i, CPU_TYPES_F32, why, n))
			return 0;
	return 1;
}

typedef struct skip_job {
	const float *x, *skip, *gamma, *beta, *bias;
	float *y, *sum, *mean, *inv;
	int64_t h, skip_rows;
	float eps;
	int simplified;
} skip_job;

static void skip_rows(void *arg, int64_t r0, int64_t r1, int member)
{
	const skip_job *j = arg;
	(void)member;
	for (int64_t r = r0; r < r1; r++) {
		const float *x = j->x + r * j->h;
		const float *sk = j->skip ? j->skip + (r % j->skip_rows) * j->h : NULL;
		float *s = j->sum + r * j->h;
		float m, v;

		for (int64_t i = 0; i < j->h; i++)
			s[i] = x[i] + (sk ? sk[i] : 0.0f) + (j->bias ? j->bias[i] : 0.0f);
		ms_norm_row(s, j->y + r * j->h, j->h, j->gamma, j->beta, j->eps, j->simplified, &m,
			    &v);
		if (j->mean)
			j->mean[r] = m;
		if (j->inv)
			j->inv[r] = v;
	}
}

/* A 1-D float input of h values (NULL when omitted and optional). */
static const float *row_param(cpu_ctx *ctx, int idx, int64_t h, int required, int *rc)
{
	const cpu_tensor *t = cpu_input(ctx, idx);

	if (!t) {
		if (required)
			*rc = cpu_fail(ctx, CPU_E_INVALID, "%s: input %d is required",
				       ctx->node->proto->op_type, idx);
		return NULL;
	}
	if ((*rc = cpu_check_dtype(ctx, t, idx, CPU_TYPES_F32)))
		return NULL;
	if (cpu_numel(t) != h || t->dims[t->rank - 1] != h) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "%s: input %d must have %lld values (the "
			       "hidden size)", ctx->node->proto->op_type, idx, (long long)h);
		return NULL;
	}
	return t->data;
}

/* Outputs 1..3 of the skip layer norms: mean and inv_std_var with the
 * input's dims and a last dim of 1, the sum with the input's. */
static int skip_outputs(cpu_ctx *ctx, const cpu_tensor *X, skip_job *j)
{
	int64_t sdims[CPU_MAX_RANK];
	cpu_tensor *t;

	memcpy(sdims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	sdims[X->rank - 1] = 1;
	if (ctx->n_out > 1) {
		if (!(t = cpu_output(ctx, 1, CPU_FLOAT, X->rank, sdims)))
			return CPU_E_NOMEM;
		j->mean = t->data;
	}
	if (ctx->n_out > 2) {
		if (!(t = cpu_output(ctx, 2, CPU_FLOAT, X->rank, sdims)))
			return CPU_E_NOMEM;
		j->inv = t->data;
	}
	if (ctx->n_out > 3) {
		if (!(t = cpu_output(ctx, 3, CPU_FLOAT, X->rank, X->dims)))
			return CPU_E_NOMEM;
		j->sum = t->data;
	} else if (!(j->sum = cpu_scratch(ctx, X->nbytes + 1))) {
		return CPU_E_NOMEM;
	}
	return 0;
}

static int skip_norm(cpu_ctx *ctx, int simplified)
{
	const cpu_tensor *X, *Sk;
	cpu_tensor *Y;
	skip_job j;
	int rc = 0;

	memset(&j, 0, sizeof(j));
	if (!(X = cpu_require(ctx, 0, &rc)) || !(Sk = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, Sk, 1, CPU_TYPES_F32)))
		return rc;
	if (X->rank != 2 && X->rank != 3)
		return cpu_fail(ctx, CPU_E_INVALID, "%s: input must be 2-D or 3-D (got rank %d)",
				ctx->node->proto->op_type, X->rank);
	j.h = X->dims[X->rank - 1];
	/* skip: the input's shape, or one batch of it ([1, S, H] or [S, H]) */
	if (Sk->rank < 2 || Sk->dims[Sk->rank - 1] != j.h || cpu_numel(X) % (cpu_numel(Sk) ? cpu_numel(Sk) : 1) ||
	    (cpu_numel(Sk) != cpu_numel(X) && Sk->dims[Sk->rank - 2] != X->dims[X->rank - 2]))
		return cpu_fail(ctx, CPU_E_INVALID, "%s: skip does not match the input",
				ctx->node->proto->op_type);
	j.skip = Sk->data;
	j.skip_rows = j.h ? cpu_numel(Sk) / j.h : 1;
	if (!(j.gamma = row_param(ctx, 2, j.h, 1, &rc)))
		return rc;
	if (!simplified && !(j.beta = row_param(ctx, 3, j.h, 0, &rc)) && rc)
		return rc;
	if (!(j.bias = row_param(ctx, simplified ? 3 : 4, j.h, 0, &rc)) && rc)
		return rc;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)) ||
	    (rc = skip_outputs(ctx, X, &j)))
		return rc ? rc : CPU_E_NOMEM;
	j.x = X->data;
	j.y = Y->data;
	j.eps = cpu_attr_float(ctx->node->proto, "epsilon", 1e-12f);
	j.simplified = simplified;
	if (j.h > 0 && j.skip_rows > 0)
		cpu_par_for(ctx, cpu_numel(X) / j.h, (double)j.h * 0.8 + 10.0, 1, skip_rows, &j);
	return 0;
}

static int skip_ln_compute(cpu_ctx *ctx)
{
	return skip_norm(ctx, 0);
}

static int skip_sln_compute(cpu_ctx *ctx)
{
	return skip_norm(ctx, 1);
}

/* SimplifiedLayerNormalization: RMSNorm of each block X.dims[axis:]. */
static int sln_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X, *Sc;
	cpu_tensor *Y, *I = NULL;
	int64_t sdims[CPU_MAX_RANK], inner = 1;
	skip_job j;
	int axis, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(Sc = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, Sc, 1, CPU_TYPES_F32)))
		return rc;
	if ((axis = cpu_norm_axis(cpu_attr_int(p, "axis", -1), X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "SimplifiedLayerNormalization: axis out of range");
	for (int d = 0; d < X->rank; d++) {
		sdims[d] = d < axis ? X->dims[d] : 1;
		inner *= d < axis ? 1 : X->dims[d];
	}
	if (cpu_numel(Sc) != inner)
		return cpu_fail(ctx, CPU_E_INVALID, "SimplifiedLayerNormalization: scale must have "
				"%lld values", (long long)inner);
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)) ||
	    (ctx->n_out > 1 && !(I = cpu_output(ctx, 1, CPU_FLOAT, X->rank, sdims))))
		return CPU_E_NOMEM;
	memset(&j, 0, sizeof(j));
	j.x = X->data;
	j.sum = Y->data;   /* the "sum" is X itself, normalized in place in Y */
	j.y = Y->data;
	j.gamma = Sc->data;
	j.inv = I ? I->data : NULL;
	j.h = inner;
	j.skip_rows = 1;
	j.eps = cpu_attr_float(p, "epsilon", 1e-5f);
	j.simplified = 1;
	if (inner > 0)
		cpu_par_for(ctx, cpu_numel(X) / inner, (double)inner * 0.6 + 10.0, 1, skip_rows, &j);
	return 0;
}

const cpu_op cpu_op_ms_skip_layer_norm = {
	"SkipLayerNormalization", "com.microsoft", 1, 1, norm_supports, NULL, skip_ln_compute, NULL,
};
const cpu_op cpu_op_ms_skip_simplified_layer_norm = {
	"SkipSimplifiedLayerNormalization", "com.microsoft", 1, 1, norm_supports, NULL,
	skip_sln_compute, NULL,
};
const cpu_op cpu_op_ms_simplified_layer_norm = {
	"SimplifiedLayerNormalization", "", 1, CPU_OPSET_MAX, norm_supports, NULL, sln_compute,
	NULL,
};
