/*
 * variadic: Sum and Mean of one or more tensors with multidirectional
 * broadcasting (before opset 8 the shapes must agree, which broadcasting
 * also accepts).  Floating types accumulate in a double scratch of the
 * output's shape; integer types (Sum only, as ONNX allows none for Mean)
 * wrap in int64.
 */
#include <string.h>

#include "math_ops.h"

typedef struct var_run {
	int32_t dt;
	const void *x;
	double *af;
	int64_t *ai;
} var_run;

static int var_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const var_run *r = arg;
	for (int64_t i = 0; i < n; i++) {
		int64_t xi = off[0] + i * st[0], ai = off[1] + i * st[1];
		if (r->af)
			r->af[ai] += r->dt == CPU_FLOAT ? ((const float *)r->x)[xi]
							: cpu_get_f64(r->dt, r->x, xi);
		else
			r->ai[ai] = (int64_t)((uint64_t)r->ai[ai] +
					      math_get_u64(r->dt, r->x, xi));
	}
	return 0;
}

/* The common shape of every input, all of one dtype. */
static int var_shape(cpu_ctx *ctx, uint32_t mask, int *rank, int64_t *dims)
{
	int rc = 0;
	const cpu_tensor *X0 = cpu_require(ctx, 0, &rc);
	if (!X0)
		return rc;
	*rank = X0->rank;
	memcpy(dims, X0->dims, sizeof(int64_t) * (size_t)X0->rank);
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *X = cpu_require(ctx, i, &rc);
		int ranks[2];
		const int64_t *ds[2];
		cpu_bcast bc;
		if (!X || (rc = cpu_check_dtype(ctx, X, i, mask)) != 0)
			return rc;
		if (X->dtype != X0->dtype)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is %s, input 0 %s", i,
					cpu_dtype_name(X->dtype), cpu_dtype_name(X0->dtype));
		ranks[0] = *rank;
		ranks[1] = X->rank;
		ds[0] = dims;
		ds[1] = X->dims;
		if (cpu_bcast_init(&bc, 2, ranks, ds) != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d does not broadcast", i);
		*rank = bc.out_rank;
		memcpy(dims, bc.out_dims, sizeof(int64_t) * (size_t)bc.out_rank);
	}
	return 0;
}

static uint32_t var_types(const char *op_type)
{
	return !strcmp(op_type, "Mean") ? MATH_TYPES_FLOAT : MATH_TYPES_NUM;
}

static int var_compute(cpu_ctx *ctx)
{
	int is_mean = !strcmp(ctx->node->proto->op_type, "Mean"), rank = 0, rc, is_f;
	int64_t dims[CPU_MAX_RANK], m;
	cpu_tensor *Y;
	var_run r;

	if (ctx->n_in < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "at least one input is required");
	if ((rc = var_shape(ctx, var_types(ctx->node->proto->op_type), &rank, dims)) != 0)
		return rc;
	r.dt = ctx->in[0]->dtype;
	is_f = cpu_dtype_is_float(r.dt);
	if (!(Y = cpu_output(ctx, 0, r.dt, rank, dims)))
		return CPU_E_NOMEM;
	m = cpu_numel(Y);
	r.af = is_f ? cpu_scratch(ctx, (size_t)m * sizeof(double) + 1) : NULL;
	r.ai = is_f ? NULL : cpu_scratch(ctx, (size_t)m * sizeof(int64_t) + 1);
	if (!r.af && !r.ai)
		return CPU_E_NOMEM;
	if (is_f)
		memset(r.af, 0, (size_t)m * sizeof(double));
	else
		memset(r.ai, 0, (size_t)m * sizeof(int64_t));
	for (int i = 0; i < ctx->n_in; i++) {
		const int64_t *ds[2] = {ctx->in[i]->dims, dims};
		int ranks[2] = {ctx->in[i]->rank, rank};
		cpu_bcast bc;
		if (cpu_bcast_init(&bc, 2, ranks, ds) != 0)
			return cpu_fail(ctx, CPU_E_INTERNAL, "broadcast of input %d", i);
		r.x = ctx->in[i]->data;
		cpu_bcast_each(&bc, var_row, &r);
	}
	for (int64_t i = 0; i < m; i++) {
		if (is_f)
			cpu_set_f64(r.dt, Y->data, i, is_mean ? r.af[i] / ctx->n_in : r.af[i]);
		else
			cpu_set_i64(r.dt, Y->data, i, r.ai[i]);
	}
	return 0;
}

static int var_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return math_supports_all(dt, n_in, var_types(p->op_type), why, n);
}

const cpu_op cpu_op_sum = { "Sum", "", 1, CPU_OPSET_MAX, var_supports, NULL, var_compute, NULL };
const cpu_op cpu_op_mean = { "Mean", "", 1, CPU_OPSET_MAX, var_supports, NULL, var_compute, NULL };
