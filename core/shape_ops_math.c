/*
 * shape_ops_math.c: type and shape inference for the elementwise ops
 * (with the integer data they fold), normalisation, MatMul and Gemm, and
 * the reductions.  Registered in op_table (shape_ops.c).
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"
#include "shape_ops_fn.h"

/* ---------------------------------------------------------- elementwise */

static int arith(int op, int32_t et, int64_t a, int64_t b, int64_t *r)
{
	switch (op) {
	case OP_ADD: return __builtin_add_overflow(a, b, r) ? -1 : 0;
	case OP_SUB: return __builtin_sub_overflow(a, b, r) ? -1 : 0;
	case OP_MUL: return __builtin_mul_overflow(a, b, r) ? -1 : 0;
	case OP_DIV:
		/* Integer Div truncates like C; a float quotient is only
		 * tracked while it stays integral. */
		if (b == 0 || (a == INT64_MIN && b == -1))
			return -1;
		if (!shape_is_int(et) && a % b)
			return -1;
		*r = a / b;
		return 0;
	case OP_MOD:
	case OP_FMOD:
		/* Integers only: fmod = 0 takes the divisor's sign (Python's
		 * %), fmod = 1 the dividend's (C's %). */
		if (!shape_is_int(et) || b == 0 || (a == INT64_MIN && b == -1))
			return -1;
		*r = a % b;
		if (op == OP_MOD && *r != 0 && (*r < 0) != (b < 0))
			*r += b;
		return 0;
	case OP_MAX: *r = a > b ? a : b; return 0;
	case OP_MIN: *r = a < b ? a : b; return 0;
	case OP_EQ: *r = a == b; return 0;
	case OP_LT: *r = a < b; return 0;
	case OP_GT: *r = a > b; return 0;
	case OP_LE: *r = a <= b; return 0;
	case OP_GE: *r = a >= b; return 0;
	case OP_AND: *r = a && b; return 0;
	case OP_OR: *r = a || b; return 0;
	default: return -1;
	}
}

static void binary_data(shape_ctx *c, graph_tinfo *o, int op)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, 1);
	int64_t n = graph_tinfo_numel(o), v[MAXD];

	if (!a->has_data || !b->has_data || n < 0 || n > MAXD)
		return;
	for (int64_t i = 0; i < n; i++)
		if (arith(op, a->elem_type, a->data[shape_bcast_src(o, a, i)],
			  b->data[shape_bcast_src(o, b, i)], &v[i]) < 0)
			return;
	shape_set_data(o, v, n);
}

/* Broadcasts inputs [first, n_in) into o, checking that their types agree. */
static int bcast_inputs(shape_ctx *c, int first, graph_tinfo *o)
{
	int rc;

	o->elem_type = 0;
	o->rank = 0;
	for (int i = first; i < c->n->n_in; i++) {
		const graph_tinfo *x = shape_in(c, i);

		if (!shape_has_in(c, i))
			continue;
		rc = shape_same_type(c, o->elem_type, x->elem_type);
		if (!rc)
			rc = shape_bcast(c, o, x, o);
		if (rc)
			return rc;
		if (!o->elem_type)
			o->elem_type = x->elem_type;
	}
	return 0;
}

/* Add, Sub, Mul, Div, Mod, Sum, Max, Min, Mean, And, Or, Xor, BitShift. */
int shape_fn_arith(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int rc = bcast_inputs(c, 0, o);

	if (!rc && c->arg && c->n->n_in == 2)
		binary_data(c, o, c->arg == OP_MOD && shape_attr_int(c, "fmod", 0) ? OP_FMOD : c->arg);
	return rc;
}

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual: bool out. */
int shape_fn_compare(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int rc = bcast_inputs(c, 0, o);

	o->elem_type = DT(BOOL);
	if (!rc && c->arg)
		binary_data(c, o, c->arg);
	return rc;
}

/* Pow: exponent type may differ; output has the base's type. */
int shape_fn_pow(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);

	o->elem_type = shape_in(c, 0)->elem_type;
	return shape_bcast(c, shape_in(c, 0), shape_in(c, 1), o);
}

int shape_fn_where(shape_ctx *c)
{
	const graph_tinfo *cond = shape_in(c, 0), *x = shape_in(c, 1), *y = shape_in(c, 2);
	graph_tinfo *o = shape_out(c, 0);
	int64_t n, v[MAXD];
	int rc = bcast_inputs(c, 1, o);

	if (!rc)
		rc = shape_bcast(c, cond, o, o);
	n = graph_tinfo_numel(o);
	if (rc || !cond->has_data || !x->has_data || !y->has_data || n < 0 || n > MAXD)
		return rc;
	for (int64_t i = 0; i < n; i++)
		v[i] = cond->data[shape_bcast_src(o, cond, i)] ?
		       x->data[shape_bcast_src(o, x, i)] : y->data[shape_bcast_src(o, y, i)];
	shape_set_data(o, v, n);
	return 0;
}

/* Same type and shape as input 0: activations, Identity, normalisations. */
int shape_fn_unary(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t v[MAXD];

	shape_copy(o, x, c->arg == OP_COPY);
	if (!x->has_data || c->arg == OP_NONE || c->arg == OP_COPY)
		return 0;
	for (int64_t i = 0; i < x->ndata; i++) {
		int64_t d = x->data[i];

		if (d == INT64_MIN && c->arg != OP_NOT)
			return 0;
		v[i] = c->arg == OP_NEG ? -d : c->arg == OP_ABS ? (d < 0 ? -d : d) : !d;
	}
	shape_set_data(o, v, x->ndata);
	return 0;
}

/* IsNaN, IsInf: input's shape, bool out. */
int shape_fn_unary_bool(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, shape_in(c, 0), 0);
	o->elem_type = DT(BOOL);
	return 0;
}

int shape_fn_softmax(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int64_t axis = shape_attr_int(c, "axis", c->n->opset < 13 ? 1 : -1);
	int a;

	if (x->rank > 0 && shape_axis(c, axis, x->rank, &a))
		return -EINVAL;
	shape_copy(shape_out(c, 0), x, 0);
	return 0;
}

int shape_fn_dropout(shape_ctx *c)
{
	graph_tinfo *mask = shape_out(c, 1);

	shape_copy(shape_out(c, 0), shape_in(c, 0), 1);
	shape_copy(mask, shape_in(c, 0), 0);
	mask->elem_type = DT(BOOL);
	return 0;
}

/* Y like X; in training mode running mean/var like the inputs they update. */
int shape_fn_batchnorm(shape_ctx *c)
{
	shape_copy(shape_out(c, 0), shape_in(c, 0), 0);
	shape_copy(shape_out(c, 1), shape_in(c, 3), 0);
	shape_copy(shape_out(c, 2), shape_in(c, 4), 0);
	return 0;
}

/* Y like X; Mean and InvStdDev keep the leading dims and set the normalised
 * ones (axis and after) to 1, in the float stash type. */
int shape_fn_layernorm(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int64_t axis = shape_attr_int(c, "axis", -1);
	int a = 0;

	if (x->rank >= 0 && shape_axis(c, axis, x->rank, &a))
		return -EINVAL;
	shape_copy(shape_out(c, 0), x, 0);
	for (int k = 1; k <= 2; k++) {
		graph_tinfo *s = shape_out(c, k);

		shape_copy(s, x, 0);
		s->elem_type = DT(FLOAT);
		for (int i = a; i < s->rank; i++)
			s->dims[i] = 1;
	}
	return 0;
}

/* ------------------------------------------------------------- matmul */

/* MatMul, MatMulInteger (int32 out; A and B may differ in type) and
 * QLinearMatMul (B is input 3; its output zero point's type, uint8
 * without one): arg SHAPE_MATMUL_*. */
int shape_fn_matmul(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, c->arg == SHAPE_MATMUL_QLINEAR ? 3 : 1);
	graph_tinfo *o = shape_out(c, 0);
	char s1[SHAPE_FMT_LEN], s2[SHAPE_FMT_LEN];
	int64_t da[GRAPH_MAX_RANK + 1], db[GRAPH_MAX_RANK + 1], k;
	int ra = a->rank, rb = b->rank, r;

	if (c->arg == SHAPE_MATMUL_INTEGER) {
		o->elem_type = DT(INT32);
	} else if (c->arg == SHAPE_MATMUL_QLINEAR) {
		o->elem_type = shape_in(c, 7)->elem_type ? shape_in(c, 7)->elem_type : DT(UINT8);
	} else {
		if (shape_same_type(c, a->elem_type, b->elem_type))
			return -EINVAL;
		o->elem_type = a->elem_type ? a->elem_type : b->elem_type;
	}
	if (ra < 0 || rb < 0)
		return 0;
	if (ra == 0 || rb == 0)
		return shape_fail(c, "operands cannot be scalars");
	/* 1-D operands are promoted to [1,K] and [K,1], then the added dim
	 * is dropped from the result. */
	da[0] = 1;
	memcpy(da + (ra == 1), a->dims, (size_t)ra * sizeof(da[0]));
	memcpy(db, b->dims, (size_t)rb * sizeof(db[0]));
	db[rb] = 1;
	ra += ra == 1;
	rb += rb == 1;
	if (shape_merge(da[ra - 1], db[rb - 2], &k) < 0)
		return shape_fail(c, "inner dimensions differ: %s x %s",
				  shape_fmt(c, a, s1), shape_fmt(c, b, s2));
	r = onnx_broadcast(ra - 2, da, rb - 2, db, o->dims);
	if (r < 0)
		return shape_fail(c, "cannot broadcast batch dims of %s and %s",
				  shape_fmt(c, a, s1), shape_fmt(c, b, s2));
	if (a->rank > 1)
		o->dims[r++] = da[ra - 2];
	if (b->rank > 1)
		o->dims[r++] = db[rb - 1];
	o->rank = r;
	return 0;
}

int shape_fn_gemm(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, 1), *cc = shape_in(c, 2);
	graph_tinfo *o = shape_out(c, 0);
	char s1[SHAPE_FMT_LEN], s2[SHAPE_FMT_LEN];
	int ta = shape_attr_int(c, "transA", 0) != 0;
	int tb = shape_attr_int(c, "transB", 0) != 0;
	int64_t k, bc[GRAPH_MAX_RANK];

	if (shape_same_type(c, a->elem_type, b->elem_type) ||
	    shape_same_type(c, a->elem_type, cc->elem_type))
		return -EINVAL;
	if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
		return shape_fail(c, "A and B must be 2-D, got %s and %s",
				  shape_fmt(c, a, s1), shape_fmt(c, b, s2));
	shape_set_rank(c, o, a->elem_type ? a->elem_type : b->elem_type, 2);
	if (a->rank == 2)
		o->dims[0] = a->dims[ta];
	if (b->rank == 2)
		o->dims[1] = b->dims[!tb];
	if (a->rank == 2 && b->rank == 2 &&
	    shape_merge(a->dims[!ta], b->dims[tb], &k) < 0)
		return shape_fail(c, "inner dimensions differ: %s x %s (transA=%d, transB=%d)",
				  shape_fmt(c, a, s1), shape_fmt(c, b, s2), ta, tb);
	/* C broadcasts to [M,N] one way only. */
	if (cc->rank > 2 || (cc->rank >= 0 &&
			     onnx_broadcast(2, o->dims, cc->rank, cc->dims, bc) < 0))
		return shape_fail(c, "C %s does not broadcast to %s",
				  shape_fmt(c, cc, s1), shape_fmt(c, o, s2));
	return 0;
}

/* ------------------------------------------------------------- reduce */

static void reduce_all_data(shape_ctx *c, const graph_tinfo *x, graph_tinfo *o)
{
	const char *op = c->n->op_type;
	int64_t acc;

	if (!x->has_data || x->ndata == 0)
		return;
	acc = x->data[0];
	for (int64_t i = 1; i < x->ndata; i++) {
		if (!strcmp(op, "ReduceProd") ? __builtin_mul_overflow(acc, x->data[i], &acc) :
		    !strcmp(op, "ReduceSum") ? __builtin_add_overflow(acc, x->data[i], &acc) :
		    !strcmp(op, "ReduceMax") ? (acc = acc > x->data[i] ? acc : x->data[i], 0) :
		    !strcmp(op, "ReduceMin") ? (acc = acc < x->data[i] ? acc : x->data[i], 0) : 1)
			return;
	}
	shape_set_data(o, &acc, 1);
}

/* Reduce*: axes attribute until opset `arg` (13 for ReduceSum, 18 for the
 * rest), then an optional input. */
int shape_fn_reduce(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = shape_int_list(c, "axes", 1, c->arg, ax), keep = shape_attr_int(c, "keepdims", 1) != 0;
	int r = 0;
	uint32_t mask = 0xffffffffu;

	o->elem_type = x->elem_type;
	if (x->rank < 0)
		return 0;
	if (n == LIST_UNKNOWN) {
		shape_copy(o, x, 0);
		for (int i = 0; i < o->rank; i++)
			o->dims[i] = o->dims[i] == 1 ? 1 : SHAPE_NEW;
		o->rank = keep ? o->rank : -1;
		return 0;
	}
	if (n <= 0 && shape_attr_int(c, "noop_with_empty_axes", 0)) {
		shape_copy(o, x, 1);
		return 0;
	}
	if (n > 0 && shape_axes_mask(c, ax, n, x->rank, 0, &mask))
		return -EINVAL;
	for (int i = 0; i < x->rank; i++) {
		if (!(mask & (1u << i)))
			o->dims[r++] = x->dims[i];
		else if (keep)
			o->dims[r++] = 1;
	}
	o->rank = r;
	if ((mask & ((1u << x->rank) - 1)) == (1u << x->rank) - 1)
		reduce_all_data(c, x, o);
	return 0;
}

/* ArgMax, ArgMin: int64 indices along one axis. */
int shape_fn_argreduce(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int keep = shape_attr_int(c, "keepdims", 1) != 0, a, r = 0;

	shape_copy(o, x, 0);
	o->elem_type = DT(INT64);
	if (x->rank < 0)
		return 0;
	if (shape_axis(c, shape_attr_int(c, "axis", 0), x->rank, &a))
		return -EINVAL;
	for (int i = 0; i < x->rank; i++)
		if (i != a || keep)
			o->dims[r++] = i == a ? 1 : x->dims[i];
	o->rank = r;
	return 0;
}
