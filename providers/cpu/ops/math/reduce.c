/*
 * reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin over float32,
 * float64, int32 and int64.  The axes come from the attribute (before opset
 * 13 for ReduceSum, 18 for the others) or the optional second input;
 * keepdims and noop_with_empty_axes follow the spec.  The input is walked
 * once with the broadcasting iterator, each element folded into its
 * output's accumulator (double for floats, int64 for ints).
 */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "par.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN };

typedef struct red_run {
	int op, is_float;
	int32_t dt;
	const void *x;
	double *af;
	int64_t *ai;
} red_run;

static int red_op(const char *t)
{
	if (!strcmp(t, "ReduceSum"))
		return R_SUM;
	if (!strcmp(t, "ReduceMean"))
		return R_MEAN;
	return !strcmp(t, "ReduceMax") ? R_MAX : R_MIN;
}

static int red_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const red_run *r = arg;
	for (int64_t i = 0; i < n; i++) {
		int64_t xi = off[0] + i * st[0], ai = off[1] + i * st[1];
		if (r->is_float) {
			double v = r->dt == CPU_FLOAT ? ((const float *)r->x)[xi]
						      : cpu_get_f64(r->dt, r->x, xi);
			double *a = &r->af[ai];
			if (r->op <= R_MEAN)
				*a += v;
			else if (v != v || (r->op == R_MAX ? v > *a : v < *a))
				*a = v;
		} else {
			int64_t v = cpu_get_i64(r->dt, r->x, xi), *a = &r->ai[ai];
			if (r->op <= R_MEAN)
				*a = (int64_t)((uint64_t)*a + (uint64_t)v);
			else if (r->op == R_MAX ? v > *a : v < *a)
				*a = v;
		}
	}
	return 0;
}

/* Marks the reduced axes; returns 1 when the op is a no-op (empty axes with
 * noop_with_empty_axes), 0, or an error status. */
static int red_axes(cpu_ctx *ctx, const cpu_tensor *X, unsigned char *red)
{
	int attr_axes = ctx->node->opset < (red_op(ctx->node->proto->op_type) == R_SUM ? 13 : 18);
	int64_t axes[CPU_MAX_RANK], n = 0;
	const int64_t *a;
	if (attr_axes) {
		n = (int64_t)cpu_attr_ints(ctx->node->proto, "axes", &a);
		for (int64_t i = 0; i < n && n <= CPU_MAX_RANK; i++)
			axes[i] = a[i];
	} else if (cpu_input(ctx, 1)) {
		n = cpu_read_ints(cpu_input(ctx, 1), axes, CPU_MAX_RANK);
	}
	if (n < 0 || n > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "axes must be at most %d int64 values",
				CPU_MAX_RANK);
	if (n == 0 && !attr_axes && cpu_attr_int(ctx->node->proto, "noop_with_empty_axes", 0))
		return 1;
	for (int d = 0; d < X->rank; d++)
		red[d] = n == 0;
	for (int64_t i = 0; i < n; i++) {
		int ax = cpu_norm_axis(axes[i], X->rank);
		if (ax < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
					(long long)axes[i], X->rank);
		red[ax] = 1;
	}
	return 0;
}

static void red_finish(const red_run *r, cpu_tensor *Y, int64_t m, int64_t count)
{
	for (int64_t i = 0; i < m; i++) {
		if (r->is_float) {
			double v = r->af[i];
			if (r->op == R_MEAN)
				v = count ? v / (double)count : NAN;
			cpu_set_f64(Y->dtype, Y->data, i, v);
		} else {
			int64_t v = r->ai[i];
			if (r->op == R_MEAN)
				v = count ? v / count : 0;
			cpu_set_i64(Y->dtype, Y->data, i, v);
		}
	}
}

/* ReduceSum/ReduceMean of float32 over trailing axes (a global pooling
 * written as x.mean([2, 3])): each output one contiguous row, summed in
 * double four lanes at a time, rows over the pool.  The walk of the
 * general path cost 4 ns an element there. */
typedef struct red_rows {
	const float *x;
	float *y;
	int64_t len;
	int mean;
} red_rows;

typedef double vd4 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));

CPU_MULTIVERSION
static void red_rows_range(void *arg, int64_t r0, int64_t r1, int member)
{
	const red_rows *a = arg;

	(void)member;
	for (int64_t r = r0; r < r1; r++) {
		const float *x = a->x + r * a->len;
		vd4 acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
		int64_t i = 0;
		double s;

		for (; i + 8 <= a->len; i += 8) {
			vf4 u, v;

			memcpy(&u, x + i, sizeof(u));
			memcpy(&v, x + i + 4, sizeof(v));
			acc0 += __builtin_convertvector(u, vd4);
			acc1 += __builtin_convertvector(v, vd4);
		}
		acc0 += acc1;
		s = (acc0[0] + acc0[1]) + (acc0[2] + acc0[3]);
		for (; i < a->len; i++)
			s += x[i];
		if (a->mean)
			s = a->len ? s / (double)a->len : NAN;
		a->y[r] = (float)s;
	}
}

/* ReduceSum/ReduceMean of float32 over one run of adjacent axes with
 * axes after it (x viewed as [outer][R][inner], y as [outer][inner]):
 * each output summed in double over r in order, as the general walk does,
 * four outputs of a row a vector (SVTR's mean over the height, 4x ONNX
 * Runtime's time through the walk).  Items: (outer, block of 64 inner);
 * R > 0 (red_compute takes the general walk for an empty reduction). */
typedef struct red_mid {
	const float *x;
	float *y;
	int64_t R, inner, blocks;
	int mean;
} red_mid;

enum { RED_MID_BLOCK = 64 };

CPU_MULTIVERSION
static void red_mid_range(void *arg, int64_t t0, int64_t t1, int member)
{
	const red_mid *a = arg;

	(void)member;
	for (int64_t t = t0; t < t1; t++) {
		int64_t o = t / a->blocks, i0 = t % a->blocks * RED_MID_BLOCK;
		int64_t i1 = i0 + RED_MID_BLOCK < a->inner ? i0 + RED_MID_BLOCK : a->inner;
		const float *x = a->x + o * a->R * a->inner;
		float *y = a->y + o * a->inner;
		int64_t i = i0;

		for (; i + 4 <= i1; i += 4) {
			vd4 acc = {0, 0, 0, 0};

			for (int64_t r = 0; r < a->R; r++) {
				vf4 u;

				memcpy(&u, x + r * a->inner + i, sizeof(u));
				acc += __builtin_convertvector(u, vd4);
			}
			for (int k = 0; k < 4; k++)
				y[i + k] = (float)(a->mean ? acc[k] / (double)a->R : acc[k]);
		}
		for (; i < i1; i++) {
			double s = 0.0;

			for (int64_t r = 0; r < a->R; r++)
				s += x[r * a->inner + i];
			y[i] = (float)(a->mean ? s / (double)a->R : s);
		}
	}
}

static int red_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	unsigned char red[CPU_MAX_RANK];
	int64_t kd[CPU_MAX_RANK], od[CPU_MAX_RANK], m = 1, count = 1;
	int keep = cpu_attr_int(ctx->node->proto, "keepdims", 1) != 0, orank = 0, rc = 0;
	const int64_t *dims[2];
	int ranks[2];
	cpu_bcast bc;
	cpu_tensor *Y;
	red_run r;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_ARITH)))
		return rc;
	if ((rc = red_axes(ctx, X, red)) < 0)
		return rc;
	if (rc == 1)
		return cpu_copy_to_output(ctx, X, X->rank, X->dims);
	for (int d = 0; d < X->rank; d++) {
		kd[d] = red[d] ? 1 : X->dims[d];
		m *= kd[d];
		count *= red[d] ? X->dims[d] : 1;
		if (keep || !red[d])
			od[orank++] = kd[d];
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, orank, od)))
		return CPU_E_NOMEM;
	r.op = red_op(ctx->node->proto->op_type);
	{
		/* float sums and means over one run of reduced axes [d0, d1):
		 * trailing, contiguous rows (red_rows); with kept axes after it,
		 * [outer][R][inner] (red_mid) */
		int d0 = 0, d1, one_run = 1;
		int64_t outer = 1, inner = 1;

		while (d0 < X->rank && !red[d0])
			outer *= X->dims[d0++];
		d1 = d0;
		while (d1 < X->rank && red[d1])
			d1++;
		for (int e = d1; e < X->rank; e++) {
			inner *= X->dims[e];
			one_run &= !red[e];
		}
		if (X->dtype == CPU_FLOAT && r.op <= R_MEAN && one_run && d1 > d0 && count > 0) {
			if (d1 == X->rank) {
				red_rows a = {X->data, Y->data, count, r.op == R_MEAN};

				cpu_par_for(ctx, m, 0.3 * (double)count, 1, red_rows_range, &a);
				return 0;
			}
			if (inner > 0) {
				red_mid a = {X->data, Y->data, count, inner,
					     (inner + RED_MID_BLOCK - 1) / RED_MID_BLOCK,
					     r.op == R_MEAN};

				cpu_par_for(ctx, outer * a.blocks,
					    0.3 * (double)count *
						    (double)(inner < RED_MID_BLOCK ? inner : RED_MID_BLOCK),
					    1, red_mid_range, &a);
				return 0;
			}
		}
	}
	r.is_float = cpu_dtype_is_float(X->dtype);
	r.dt = X->dtype;
	r.x = X->data;
	r.af = r.is_float ? cpu_scratch(ctx, (size_t)m * sizeof(double) + 1) : NULL;
	r.ai = r.is_float ? NULL : cpu_scratch(ctx, (size_t)m * sizeof(int64_t) + 1);
	if (!r.af && !r.ai)
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < m; i++) {
		if (r.is_float)
			r.af[i] = r.op == R_MAX ? -INFINITY : r.op == R_MIN ? INFINITY : 0.0;
		else
			r.ai[i] = r.op == R_MAX ? INT64_MIN : r.op == R_MIN ? INT64_MAX : 0;
	}
	ranks[0] = ranks[1] = X->rank;
	dims[0] = X->dims;
	dims[1] = kd;
	if (cpu_bcast_init(&bc, 2, ranks, dims) != 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "reduction shape");
	cpu_bcast_each(&bc, red_row, &r);
	red_finish(&r, Y, m, count);
	return 0;
}

static int red_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ARITH, why, n);
}

const cpu_op cpu_op_reducesum = { "ReduceSum", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducemean = { "ReduceMean", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducemax = { "ReduceMax", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
const cpu_op cpu_op_reducemin = { "ReduceMin", "", 1, CPU_OPSET_MAX, red_supports, NULL, red_compute, NULL };
