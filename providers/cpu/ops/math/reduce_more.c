/*
 * reduce_more: the reductions reduce.c does not have — ReduceL1, ReduceL2,
 * ReduceLogSum, ReduceLogSumExp, ReduceProd, ReduceSumSquare.  Axes come
 * from the attribute before opset 18 and the optional input 1 from then
 * on (noop_with_empty_axes); keepdims as the spec says.  Floating inputs
 * accumulate in double; integer inputs in int64 for L1, Prod and
 * SumSquare (wrapping like the integer type would) and in double for the
 * others.  LogSumExp subtracts each output's maximum first.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

enum { R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_PROD, R_SUMSQ };

typedef struct red_run {
	int op, ints, uns;
	int32_t dt;
	const void *x;
	double *af;
	const double *shift;   /* LogSumExp: per-output maximum */
	int64_t *ai;
} red_run;

static int red_op(const char *t)
{
	static const char *const names[] = {
		"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd",
		"ReduceSumSquare",
	};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(t, names[i]) == 0)
			return i;
	return -1;
}

static double fold_f64(int op, double a, double v, double shift)
{
	switch (op) {
	case R_L1: return a + fabs(v);
	case R_L2: case R_SUMSQ: return a + v * v;
	case R_LOGSUM: return a + v;
	case R_LOGSUMEXP: return a + exp(v - shift);
	default: return a * v;
	}
}

static int64_t fold_i64(int op, int64_t a, int64_t v, int uns)
{
	uint64_t ua = (uint64_t)a, uv = (uint64_t)v;
	switch (op) {
	case R_L1: return (int64_t)(ua + (v < 0 && !uns ? 0 - uv : uv));
	case R_PROD: return (int64_t)(ua * uv);
	default: return (int64_t)(ua + uv * uv);
	}
}

static int red_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const red_run *r = arg;
	for (int64_t i = 0; i < n; i++) {
		int64_t xi = off[0] + i * st[0], ai = off[1] + i * st[1];
		if (r->ints) {
			int64_t v = cpu_get_i64(r->dt, r->x, xi);
			r->ai[ai] = fold_i64(r->op, r->ai[ai], v, r->uns);
		} else {
			double v = r->dt == CPU_FLOAT ? ((const float *)r->x)[xi]
						      : cpu_get_f64(r->dt, r->x, xi);
			r->af[ai] = fold_f64(r->op, r->af[ai], v, r->shift ? r->shift[ai] : 0.0);
		}
	}
	return 0;
}

static int max_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const red_run *r = arg;
	for (int64_t i = 0; i < n; i++) {
		double v = cpu_get_f64(r->dt, r->x, off[0] + i * st[0]);
		double *a = &r->af[off[1] + i * st[1]];
		if (v > *a || v != v)
			*a = v;
	}
	return 0;
}

static double finish_f64(int op, double a, double shift)
{
	switch (op) {
	case R_L2: return sqrt(a);
	case R_LOGSUM: return log(a);
	case R_LOGSUMEXP: return log(a) + shift;
	default: return a;
	}
}

/* LogSumExp's first pass: each output's maximum (0 where not finite, so
 * all -inf gives log(0) = -inf and a +inf gives +inf). */
static double *lse_shift(cpu_ctx *ctx, const cpu_bcast *bc, red_run *r, int64_t m)
{
	double *mx = cpu_scratch(ctx, (size_t)m * sizeof(double) + 1);
	if (!mx)
		return NULL;
	for (int64_t i = 0; i < m; i++)
		mx[i] = -INFINITY;
	r->af = mx;
	cpu_bcast_each(bc, max_row, r);
	for (int64_t i = 0; i < m; i++)
		if (!isfinite(mx[i]))
			mx[i] = 0.0;
	return mx;
}

static int red_run_all(cpu_ctx *ctx, red_run *r, const cpu_tensor *X, const int64_t *kd,
		       cpu_tensor *Y)
{
	const int64_t *dims[2] = {X->dims, kd};
	int ranks[2] = {X->rank, X->rank};
	int64_t m = cpu_numel(Y);
	cpu_bcast bc;

	if (cpu_bcast_init(&bc, 2, ranks, dims) != 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "reduction shape");
	r->shift = NULL;
	if (r->op == R_LOGSUMEXP && !(r->shift = lse_shift(ctx, &bc, r, m)))
		return CPU_E_NOMEM;
	r->af = r->ints ? NULL : cpu_scratch(ctx, (size_t)m * sizeof(double) + 1);
	r->ai = r->ints ? cpu_scratch(ctx, (size_t)m * sizeof(int64_t) + 1) : NULL;
	if (!r->af && !r->ai)
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < m; i++) {
		if (r->ints)
			r->ai[i] = r->op == R_PROD;
		else
			r->af[i] = r->op == R_PROD ? 1.0 : 0.0;
	}
	cpu_bcast_each(&bc, red_row, r);
	for (int64_t i = 0; i < m; i++) {
		if (r->ints)
			cpu_set_i64(Y->dtype, Y->data, i, r->ai[i]);
		else
			cpu_set_f64(Y->dtype, Y->data, i,
				    finish_f64(r->op, r->af[i], r->shift ? r->shift[i] : 0.0));
	}
	return 0;
}

static int red_compute(cpu_ctx *ctx)
{
	int keep = cpu_attr_int(ctx->node->proto, "keepdims", 1) != 0, orank = 0, rc = 0;
	int64_t kd[CPU_MAX_RANK], od[CPU_MAX_RANK];
	unsigned char red[CPU_MAX_RANK];
	const cpu_tensor *X;
	cpu_tensor *Y;
	red_run r;

	memset(&r, 0, sizeof(r));
	if ((r.op = red_op(ctx->node->proto->op_type)) < 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "unknown reduction");
	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, MATH_TYPES_NUM)))
		return rc;
	if ((rc = math_reduce_axes(ctx, X, 18, red)) < 0)
		return rc;
	if (rc == 1)   /* noop: the input itself, as the spec's reference does */
		return cpu_copy_to_output(ctx, X, X->rank, X->dims);
	for (int d = 0; d < X->rank; d++) {
		kd[d] = red[d] ? 1 : X->dims[d];
		if (keep || !red[d])
			od[orank++] = kd[d];
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, orank, od)))
		return CPU_E_NOMEM;
	r.dt = X->dtype;
	r.x = X->data;
	r.uns = math_dtype_is_unsigned(X->dtype);
	r.ints = !cpu_dtype_is_float(X->dtype) &&
		 (r.op == R_L1 || r.op == R_PROD || r.op == R_SUMSQ);
	return red_run_all(ctx, &r, X, kd, Y);
}

static int red_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, MATH_TYPES_NUM, why, n);
}

const cpu_op cpu_op_reducel1 = { "ReduceL1", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducel2 = { "ReduceL2", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducelogsum = { "ReduceLogSum", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducelogsumexp = { "ReduceLogSumExp", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reduceprod = { "ReduceProd", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducesumsquare = { "ReduceSumSquare", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
