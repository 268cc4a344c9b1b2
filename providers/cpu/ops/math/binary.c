/*
 * binary: elementwise ops with numpy broadcasting — Add, Sub, Mul, Div, Pow,
 * Max, Min (variadic) and the comparisons Equal, Less, Greater, LessOrEqual,
 * GreaterOrEqual.  float32 (comparisons too) runs a vectorizable loop per
 * broadcast row (the broadcast iteration merges dims, so same shapes and a
 * scalar make one long row and a bias [N] over [M, N] rows of N), the
 * elements split over the intra-op pool when there are many; the other
 * types go through cpu_get_/cpu_set_ element access (int Div truncates
 * like C and refuses a zero divisor).  uint64 travels as int64 bits: the
 * wrapping +, -, * are the same, order and division are done unsigned.
 * Before opset 7 the `broadcast`/`axis` attributes decide how B lines up
 * with A.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "blk8.h"
#include "cpu_ops.h"
#include "par.h"
#include "vfloat.h"

/* The comparisons come last: op >= OP_EQ means a bool output. */
enum binop {
	OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN, OP_EQ, OP_LT, OP_GT, OP_LE, OP_GE,
};

typedef struct bin_run {
	int op, yk;                 /* yk: index of the output's offset in off[] */
	int32_t adt, bdt, ydt;
	const void *a, *b;
	void *y;
} bin_run;

static int op_of(const char *t)
{
	static const char *const names[] = {
		"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater",
		"LessOrEqual", "GreaterOrEqual",
	};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(t, names[i]) == 0)
			return i;
	return -1;
}

static inline double f64_op(int op, double x, double y)
{
	switch (op) {
	case OP_ADD: return x + y;
	case OP_SUB: return x - y;
	case OP_MUL: return x * y;
	case OP_DIV: return x / y;
	case OP_POW: return pow(x, y);
	case OP_MAX: return (x > y || x != x) ? x : y;   /* NaN propagates */
	case OP_MIN: return (x < y || x != x) ? x : y;
	case OP_EQ: return x == y;
	case OP_LT: return x < y;
	case OP_GT: return x > y;
	case OP_LE: return x <= y;
	default: return x >= y;
	}
}

/* x^e with wrapping multiplication; e_unsigned reads e as a uint64. */
static int64_t ipow(int64_t x, int64_t e, int e_unsigned)
{
	uint64_t r = 1, b = (uint64_t)x, ue = (uint64_t)e;
	if (e < 0 && !e_unsigned)   /* integer result of x^-n: only |x| == 1 survives */
		return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
	for (; ue; ue >>= 1, b *= b)
		if (ue & 1)
			r *= b;
	return (int64_t)r;
}

/* Integer semantics: wrap on overflow (computed unsigned), C truncation. */
static inline __attribute__((always_inline)) int64_t i64_op(int op, int64_t x, int64_t y)
{
	switch (op) {
	case OP_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
	case OP_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
	case OP_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
	case OP_DIV: return y == -1 ? (int64_t)(0 - (uint64_t)x) : x / y;
	case OP_POW: return ipow(x, y, 0);
	case OP_MAX: return x > y ? x : y;
	case OP_MIN: return x < y ? x : y;
	case OP_EQ: return x == y;
	case OP_LT: return x < y;
	case OP_GT: return x > y;
	case OP_LE: return x <= y;
	default: return x >= y;
	}
}

/* uint64 operands held as int64 bits: where the sign matters, look again. */
static inline int64_t u64_op(int op, int64_t sx, int64_t sy)
{
	uint64_t x = (uint64_t)sx, y = (uint64_t)sy;
	switch (op) {
	case OP_DIV: return (int64_t)(x / y);
	case OP_POW: return ipow(sx, sy, 1);
	case OP_MAX: return (int64_t)(x > y ? x : y);
	case OP_MIN: return (int64_t)(x < y ? x : y);
	case OP_LT: return x < y;
	case OP_GT: return x > y;
	case OP_LE: return x <= y;
	case OP_GE: return x >= y;
	default: return i64_op(op, sx, sy);
	}
}

/* float32 op on floats: the same results as through double for + - * /
 * (double rounding is exact for them); Max/Min propagate NaN with two
 * selects, which gcc keeps branch-free. */
static inline __attribute__((always_inline)) float f32_op(int op, float x, float y)
{
	float m;
	switch (op) {
	case OP_ADD: return x + y;
	case OP_SUB: return x - y;
	case OP_MUL: return x * y;
	case OP_DIV: return x / y;
	case OP_MAX:
		m = x > y ? x : y;
		return x != x ? x : m;
	default:
		m = x < y ? x : y;
		return x != x ? x : m;
	}
}

/* op is a constant after inlining, so each case is one vectorizable loop. */
static inline __attribute__((always_inline)) void
f32_loop(int op, const float *a, int64_t sa, const float *b, int64_t sb, float *y, int64_t n)
{
	if (sa == 1 && sb == 1) {
		for (int64_t i = 0; i < n; i++)
			y[i] = f32_op(op, a[i], b[i]);
	} else if (sa == 1 && sb == 0) {
		float bv = b[0];
		for (int64_t i = 0; i < n; i++)
			y[i] = f32_op(op, a[i], bv);
	} else if (sa == 0 && sb == 1) {
		float av = a[0];
		for (int64_t i = 0; i < n; i++)
			y[i] = f32_op(op, av, b[i]);
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = f32_op(op, a[i * sa], b[i * sb]);
	}
}

CPU_MULTIVERSION
static void f32_row(int op, const float *a, int64_t sa, const float *b, int64_t sb, float *y,
		    int64_t n)
{
	switch (op) {
	case OP_ADD: f32_loop(OP_ADD, a, sa, b, sb, y, n); break;
	case OP_SUB: f32_loop(OP_SUB, a, sa, b, sb, y, n); break;
	case OP_MUL: f32_loop(OP_MUL, a, sa, b, sb, y, n); break;
	case OP_DIV: f32_loop(OP_DIV, a, sa, b, sb, y, n); break;
	case OP_MAX: f32_loop(OP_MAX, a, sa, b, sb, y, n); break;
	case OP_MIN: f32_loop(OP_MIN, a, sa, b, sb, y, n); break;
	default:
		/* a constant exponent of 2 (YOLO's and LayerNorm exports'
		 * squares): x * x, the correctly rounded square powf gives too,
		 * at a fraction of a powf call */
		if (sb == 0 && b[0] == 2.0f) {
			for (int64_t i = 0; i < n; i++)
				y[i] = a[i * sa] * a[i * sa];
			break;
		}
		for (int64_t i = 0; i < n; i++)
			y[i] = powf(a[i * sa], b[i * sb]);
		break;
	}
}

/* A comparison of float32 rows into bools (NaN compares false, as
 * f64_op has it): RetinaNet's score threshold over 1.3 M scores took 12 ms
 * through the generic element access. */
CPU_MULTIVERSION
static void f32_cmp_row(int op, const float *a, int64_t sa, const float *b, int64_t sb,
			uint8_t *y, int64_t n)
{
	switch (op) {
	case OP_EQ:
		for (int64_t i = 0; i < n; i++)
			y[i] = a[i * sa] == b[i * sb];
		break;
	case OP_LT:
		for (int64_t i = 0; i < n; i++)
			y[i] = a[i * sa] < b[i * sb];
		break;
	case OP_GT:
		for (int64_t i = 0; i < n; i++)
			y[i] = a[i * sa] > b[i * sb];
		break;
	case OP_LE:
		for (int64_t i = 0; i < n; i++)
			y[i] = a[i * sa] <= b[i * sb];
		break;
	default:
		for (int64_t i = 0; i < n; i++)
			y[i] = a[i * sa] >= b[i * sb];
		break;
	}
}

/* The float32 case over a range of output elements, for cpu_par_for: the
 * range is cut at row boundaries of the broadcast iteration, each row's
 * operand offsets found from its index.  A comparison writes bools to yb. */
typedef struct f32_job {
	const cpu_bcast *bc;
	int op;
	const float *a, *b;
	float *y;
	uint8_t *yb;
} f32_job;

static void row_offsets(const cpu_bcast *bc, int64_t r, int64_t *oa, int64_t *ob)
{
	*oa = *ob = 0;
	for (int d = bc->rank - 2; d >= 0 && r; d--) {
		int64_t idx = r % bc->dims[d];
		r /= bc->dims[d];
		*oa += idx * bc->strides[0][d];
		*ob += idx * bc->strides[1][d];
	}
}

static void f32_range(void *arg, int64_t e0, int64_t e1, int member)
{
	const f32_job *j = arg;
	const cpu_bcast *bc = j->bc;
	int64_t inner = bc->dims[bc->rank - 1], sa = bc->strides[0][bc->rank - 1];
	int64_t sb = bc->strides[1][bc->rank - 1];
	(void)member;
	while (e0 < e1) {
		int64_t r = e0 / inner, c = e0 % inner, len = inner - c, oa, ob;
		len = len < e1 - e0 ? len : e1 - e0;
		row_offsets(bc, r, &oa, &ob);
		if (j->op >= OP_EQ)
			f32_cmp_row(j->op, j->a + oa + c * sa, sa, j->b + ob + c * sb, sb, j->yb + e0,
				    len);
		else
			f32_row(j->op, j->a + oa + c * sa, sa, j->b + ob + c * sb, sb, j->y + e0,
				len);
		e0 += len;
	}
}

/* int64 op int64 into int64 (+ - * Max Min) or bool (the comparisons):
 * i64_op with a constant op, one loop per op, no per-element dtype switch
 * (a GPT export's causal mask, LessOrEqual of a [1, T] and a [T, 1]
 * range, took 13 ns an element through the generic access). */
static inline __attribute__((always_inline)) void
i64_loop(int op, int to_bool, const int64_t *a, int64_t sa, const int64_t *b, int64_t sb,
	 void *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t v = i64_op(op, a[i * sa], b[i * sb]);

		if (to_bool)
			((uint8_t *)y)[i] = (uint8_t)v;
		else
			((int64_t *)y)[i] = v;
	}
}

/* Returns 0 when the row is not of that kind. */
static int i64_row(const bin_run *r, int64_t n, const int64_t *off, const int64_t *st)
{
	const int64_t *a = (const int64_t *)r->a + off[0], *b = (const int64_t *)r->b + off[1];
	int64_t sa = st[0], sb = st[1];

	if (r->adt != CPU_INT64 || r->bdt != CPU_INT64)
		return 0;
	if (r->ydt == CPU_BOOL) {
		uint8_t *y = (uint8_t *)r->y + off[r->yk];

		switch (r->op) {
		case OP_EQ: i64_loop(OP_EQ, 1, a, sa, b, sb, y, n); return 1;
		case OP_LT: i64_loop(OP_LT, 1, a, sa, b, sb, y, n); return 1;
		case OP_GT: i64_loop(OP_GT, 1, a, sa, b, sb, y, n); return 1;
		case OP_LE: i64_loop(OP_LE, 1, a, sa, b, sb, y, n); return 1;
		case OP_GE: i64_loop(OP_GE, 1, a, sa, b, sb, y, n); return 1;
		default: return 0;
		}
	}
	if (r->ydt != CPU_INT64)
		return 0;
	int64_t *y = (int64_t *)r->y + off[r->yk];

	switch (r->op) {
	case OP_ADD: i64_loop(OP_ADD, 0, a, sa, b, sb, y, n); return 1;
	case OP_SUB: i64_loop(OP_SUB, 0, a, sa, b, sb, y, n); return 1;
	case OP_MUL: i64_loop(OP_MUL, 0, a, sa, b, sb, y, n); return 1;
	case OP_MAX: i64_loop(OP_MAX, 0, a, sa, b, sb, y, n); return 1;
	case OP_MIN: i64_loop(OP_MIN, 0, a, sa, b, sb, y, n); return 1;
	default: return 0;
	}
}

/* The other dtypes, one broadcast row at a time. */
static int bin_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	bin_run *r = arg;

	if (i64_row(r, n, off, st))
		return 0;

	int ints = !cpu_dtype_is_float(r->adt) && !cpu_dtype_is_float(r->bdt);
	/* Pow: only the exponent's type says how to read it */
	int uns = (r->op == OP_POW ? r->bdt : r->adt) == CPU_UINT64;
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = off[0] + i * st[0], ib = off[1] + i * st[1];
		if (ints) {
			int64_t x = cpu_get_i64(r->adt, r->a, ia), v = cpu_get_i64(r->bdt, r->b, ib);
			if (r->op == OP_DIV && v == 0)
				return CPU_E_INVALID;
			cpu_set_i64(r->ydt, r->y, off[r->yk] + i,
				    uns ? u64_op(r->op, x, v) : i64_op(r->op, x, v));
		} else {
			double x = cpu_get_f64(r->adt, r->a, ia), v = cpu_get_f64(r->bdt, r->b, ib);
			cpu_set_f64(r->ydt, r->y, off[r->yk] + i, f64_op(r->op, x, v));
		}
	}
	return 0;
}

/* Shape B takes in the pre-opset-7 broadcast: explicit axis alignment. */
static int legacy_b_shape(cpu_ctx *ctx, const cpu_tensor *A, const cpu_tensor *B, int *rank,
			  int64_t *dims)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	int64_t axis;
	*rank = B->rank;
	memcpy(dims, B->dims, sizeof(int64_t) * (size_t)B->rank);
	if (ctx->node->opset >= 7 || !cpu_attr_int(p, "broadcast", 0)) {
		if (ctx->node->opset >= 7 || (A->rank == B->rank &&
		    !memcmp(A->dims, B->dims, sizeof(int64_t) * (size_t)A->rank)))
			return 0;
		return cpu_fail(ctx, CPU_E_INVALID, "shapes differ and broadcast=0 (opset %lld)",
				(long long)ctx->node->opset);
	}
	if (!cpu_attr(p, "axis"))
		return 0;
	axis = cpu_attr_int(p, "axis", 0);
	if (axis < 0)
		axis += A->rank;
	if (axis < 0 || axis + B->rank > A->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "broadcast axis %lld does not fit", (long long)axis);
	for (int64_t d = axis + B->rank; d < A->rank; d++)
		dims[(*rank)++] = 1;
	return 0;
}

/* Y = A op B.  When *Y is already allocated (Max/Min folding) it takes part
 * in the broadcast as a third shape, so A and B spread over all of it. */
static int bin_apply(cpu_ctx *ctx, int op, const cpu_tensor *A, const cpu_tensor *B,
		     int brank, const int64_t *bdims, int32_t ydt, cpu_tensor **Y)
{
	int ranks[3] = {A->rank, brank, *Y ? (*Y)->rank : 0};
	const int64_t *dims[3] = {A->dims, bdims, *Y ? (*Y)->dims : NULL};
	const cpu_tensor *ts[2] = {A, B};
	cpu_bcast bc;
	bin_run r;
	int rc;
	if (cpu_bcast_init(&bc, *Y ? 3 : 2, ranks, dims) != 0) {
		cpu_bcast_error(ctx, 2, ts);
		return CPU_E_INVALID;
	}
	if (!*Y && !(*Y = cpu_output(ctx, 0, ydt, bc.out_rank, bc.out_dims)))
		return CPU_E_NOMEM;
	r.op = op;
	r.yk = bc.n;
	r.adt = A->dtype;
	r.bdt = B->dtype;
	r.ydt = ydt;
	r.a = A->data;
	r.b = B->data;
	r.y = (*Y)->data;
	if (A->dtype == CPU_FLOAT && B->dtype == CPU_FLOAT &&
	    (ydt == CPU_FLOAT || (op >= OP_EQ && ydt == CPU_BOOL))) {
		f32_job j = {&bc, op, A->data, B->data, (*Y)->data, (*Y)->data};
		int square = op == OP_POW && cpu_numel(B) == 1 && *(const float *)B->data == 2.0f;

		cpu_par_for(ctx, cpu_numel(*Y), op == OP_POW && !square ? 5.0 : 0.08, 4096, f32_range,
			    &j);
		return 0;
	}
	rc = cpu_bcast_each(&bc, bin_row, &r);
	if (rc)
		return cpu_fail(ctx, rc, "integer division by zero");
	return 0;
}

static uint32_t types_of(int op)
{
	uint32_t t = CPU_TYPES_NUMERIC | CPU_BIT(CPU_UINT64);
	return op == OP_EQ ? t | CPU_BIT(CPU_BOOL) : t;
}

static int bin_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	int op = op_of(p->op_type);
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, types_of(op), why, n))
			return 0;
	return 1;
}

/* Max/Min: fold the inputs into an output of their common shape. */
static int variadic_compute(cpu_ctx *ctx, int op)
{
	cpu_tensor *Y = NULL, acc;
	int ranks[2];
	const int64_t *dims[2];
	cpu_bcast bc;
	int rc = 0;
	const cpu_tensor *X0 = cpu_require(ctx, 0, &rc);
	if (!X0)
		return rc;
	acc = *X0;
	for (int i = 1; i < ctx->n_in; i++) {
		const cpu_tensor *X = cpu_require(ctx, i, &rc);
		if (!X || (rc = cpu_check_dtype(ctx, X, i, types_of(op))) != 0)
			return rc;
		if (X->dtype != X0->dtype)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is %s, input 0 %s", i,
					cpu_dtype_name(X->dtype), cpu_dtype_name(X0->dtype));
		ranks[0] = acc.rank;
		ranks[1] = X->rank;
		dims[0] = acc.dims;
		dims[1] = X->dims;
		if (cpu_bcast_init(&bc, 2, ranks, dims) != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d does not broadcast", i);
		acc.rank = bc.out_rank;
		memcpy(acc.dims, bc.out_dims, sizeof(acc.dims));
	}
	if (!(Y = cpu_output(ctx, 0, X0->dtype, acc.rank, acc.dims)))
		return CPU_E_NOMEM;
	/* Y = X0 broadcast (X0 op X0 is X0 for Max/Min), then Y = Y op Xi */
	rc = bin_apply(ctx, op, X0, X0, X0->rank, X0->dims, X0->dtype, &Y);
	for (int i = 1; !rc && i < ctx->n_in; i++)
		rc = bin_apply(ctx, op, Y, ctx->in[i], ctx->in[i]->rank, ctx->in[i]->dims,
			       X0->dtype, &Y);
	return rc;
}

/* ---- channel-blocked operands (cpu_layout.h) ---- */

static int64_t pixels(const cpu_tensor *t)
{
	int64_t p = 1;

	for (int i = 2; i < t->rank; i++)
		p *= t->dims[i];
	return p;
}

typedef struct blk_bin {
	int add, x_plain;         /* x_plain: x is NCHW (y blocked all the same) */
	const float *x, *s;       /* x blocked [N][C / 8][P][8]; s [N or 1][C] */
	float *y;
	int64_t blocks, P, s_img; /* s_img: floats of s per image (0: shared) */
} blk_bin;

/* Blocks [b0, b1) (image-major): y = x op s[channel]. */
CPU_MULTIVERSION
static void blk_bin_range(void *arg, int64_t b0, int64_t b1, int member)
{
	const blk_bin *a = arg;

	(void)member;
	for (int64_t b = b0; b < b1; b++) {
		const float *x = a->x + b * a->P * CPU_BLK8;
		float *y = a->y + b * a->P * CPU_BLK8;
		vf8 s = vf_load(a->s + b / a->blocks * a->s_img + b % a->blocks * CPU_BLK8);
		int64_t p = 0;

		if (a->x_plain) {
			/* the block's eight planes through 8 x 8 transposes */
			for (; p + 8 <= a->P; p += 8) {
				vf8 v[8];

				for (int k = 0; k < 8; k++)
					v[k] = vf_load(x + k * a->P + p);
				vf_transpose8(v);
				for (int k = 0; k < 8; k++)
					vf_store(y + (p + k) * CPU_BLK8, a->add ? v[k] + s : v[k] * s);
			}
			for (; p < a->P; p++)
				for (int k = 0; k < CPU_BLK8; k++)
					y[p * CPU_BLK8 + k] = a->add ? x[k * a->P + p] + s[k] :
						x[k * a->P + p] * s[k];
			continue;
		}
		for (; p < a->P; p++)
			vf_store(y + p * CPU_BLK8, a->add ? vf_load(x + p * CPU_BLK8) + s :
				 vf_load(x + p * CPU_BLK8) * s);
	}
}

/* Add or Mul of float32 operands some of which cpu_layout.c keeps
 * channel-blocked (node->layout).  An operand of one pixel an image is the
 * same either way.  Element-wise on operands of one shape, or with a
 * scalar, whatever the order; a blocked image times (plus) a value per
 * channel ([N or 1, C, 1, 1], a squeeze-excite's scale) here; anything
 * else through NCHW copies, the output blocked after when it must be. */
static int bin_blocked(cpu_ctx *ctx, int op, const cpu_tensor *A, const cpu_tensor *B)
{
	unsigned lay = ctx->node->layout;
	int ab = (lay & CPU_LAYOUT_IN_BLK8) && pixels(A) > 1;
	int bb = (lay & CPU_LAYOUT_IN1_BLK8) && pixels(B) > 1;
	int yb = (lay & CPU_LAYOUT_OUT_BLK8) != 0, rc;
	const cpu_tensor *X = ab ? A : B, *S = ab ? B : A;
	cpu_tensor *Y = NULL, pa, pb;

	/* neither operand blocked in a way that matters, the output blocked:
	 * the larger one is the image (the scale's one pixel is the same in
	 * both layouts) */
	if (yb && !ab && !bb && pixels(A) != pixels(B))
		X = pixels(A) > 1 ? A : B, S = pixels(A) > 1 ? B : A;
	if (yb && (ab != bb || (!ab && pixels(X) > 1 && pixels(S) == 1)) && X->rank == 4 &&
	    S->rank == 4 &&
	    S->dims[1] == X->dims[1] && S->dims[2] == 1 && S->dims[3] == 1 &&
	    (S->dims[0] == X->dims[0] || S->dims[0] == 1) && X->dims[1] % CPU_BLK8 == 0 &&
	    cpu_numel(S) > 1) {
		blk_bin a = {op == OP_ADD, !ab && !bb, X->data, S->data, NULL, X->dims[1] / CPU_BLK8,
			     pixels(X), S->dims[0] == 1 ? 0 : X->dims[1]};

		if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 4, X->dims)))
			return CPU_E_NOMEM;
		a.y = Y->data;
		/* ~1 ns a float, not the 0.3 of a pass over this core's own
		 * cache: the layer before split its output over the pool, so
		 * unsplit, half of it comes from the other core (squeeze-excite
		 * Muls at 2 threads: regnet_y_400mf 5.17 -> 5.08 ms,
		 * mobilenet_v3_large 2.86 -> 2.82) */
		cpu_par_for(ctx, X->dims[0] * a.blocks, 1.0 * (double)(a.P * CPU_BLK8), 1,
			    blk_bin_range, &a);
		return 0;
	}
	/* one layout on both sides (or a scalar): the plain kernel as it is */
	if ((ab == bb && (ab || !yb) && A->rank == B->rank &&
	     !memcmp(A->dims, B->dims, sizeof(int64_t) * (size_t)A->rank)) ||
	    (yb && (ab || bb) && cpu_numel(S) == 1))
		return bin_apply(ctx, op, A, B, B->rank, B->dims, A->dtype, &Y);
	/* one shape, one operand blocked, the output blocked (a feature
	 * pyramid's lateral 1x1 plus its upsampled coarser level): the plain
	 * operand blocked into scratch, then element-wise, where unblocking
	 * the other and blocking the sum in place after took 4.5x (DBNet's
	 * 64 x 120 x 160 Add, 0.43 -> 1.9 ms) */
	if (yb && ab != bb && A->rank == 4 && A->rank == B->rank &&
	    !memcmp(A->dims, B->dims, sizeof(int64_t) * 4) && A->dims[1] % CPU_BLK8 == 0) {
		const cpu_tensor *P = ab ? B : A;
		float *s = cpu_scratch(ctx, (size_t)cpu_numel(P) * sizeof(float));

		if (!s)
			return CPU_E_NOMEM;
		cpu_blk8_reorder(ctx, P->data, s, P->dims[0], P->dims[1], pixels(P), 1);
		pa = *P;
		pa.data = s;
		return bin_apply(ctx, op, ab ? A : &pa, ab ? &pa : B, B->rank, B->dims, A->dtype, &Y);
	}
	pa = *A;
	pb = *B;
	if ((ab && (rc = cpu_blk8_plain(ctx, A, &pa)) != 0) ||
	    (bb && (rc = cpu_blk8_plain(ctx, B, &pb)) != 0))
		return rc;
	if ((rc = bin_apply(ctx, op, &pa, &pb, pb.rank, pb.dims, A->dtype, &Y)) != 0)
		return rc;
	return yb && pixels(Y) > 1 ? cpu_blk8_block_inplace(ctx, Y) : 0;
}

static int bin_compute(cpu_ctx *ctx)
{
	int op = op_of(ctx->node->proto->op_type), brank, rc = 0;
	const cpu_tensor *A, *B;
	cpu_tensor *Y = NULL;
	int64_t bdims[CPU_MAX_RANK];
	int32_t ydt;

	if (op < 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "unknown binary op");
	if (!(A = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, A, 0, types_of(op))))
		return rc;
	if (op == OP_MAX || op == OP_MIN)
		return variadic_compute(ctx, op);
	if (!(B = cpu_require(ctx, 1, &rc)) || (rc = cpu_check_dtype(ctx, B, 1, types_of(op))))
		return rc;
	if (op != OP_POW && A->dtype != B->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "operands are %s and %s",
				cpu_dtype_name(A->dtype), cpu_dtype_name(B->dtype));
	if (ctx->node->layout && (op == OP_ADD || op == OP_MUL) && A->dtype == CPU_FLOAT)
		return bin_blocked(ctx, op, A, B);
	if ((rc = legacy_b_shape(ctx, A, B, &brank, bdims)) != 0)
		return rc;
	ydt = op >= OP_EQ ? CPU_BOOL : A->dtype;
	return bin_apply(ctx, op, A, B, brank, bdims, ydt, &Y);
}

const cpu_op cpu_op_add = { "Add", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_sub = { "Sub", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_mul = { "Mul", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_div = { "Div", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_pow = { "Pow", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_max = { "Max", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_min = { "Min", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_equal = { "Equal", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_less = { "Less", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_greater = { "Greater", "", 1, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL };
const cpu_op cpu_op_lessorequal = {
	"LessOrEqual", "", 12, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL,
};
const cpu_op cpu_op_greaterorequal = {
	"GreaterOrEqual", "", 12, CPU_OPSET_MAX, bin_supports, NULL, bin_compute, NULL,
};
