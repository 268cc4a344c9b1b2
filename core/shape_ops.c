/*
 * shape_ops.c: type and shape inference for each ONNX op, and the one table
 * that maps op_type to its function.  The driver (shape.c) calls these in
 * topological order; shape_ops.h describes the contract.
 *
 * Besides shapes, small integer tensors carry their values (graph_tinfo
 * data) so the shape arithmetic PyTorch exports (Shape -> Gather -> Concat
 * -> Reshape) folds into static shapes once the inputs are concrete.
 *
 * Adding an op: write `static int fn_<op>(shape_ctx *c)` (or reuse a family
 * function) and add one line to op_table at the end of the file.
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x
#define MAXD GRAPH_TINFO_MAX_DATA

/* Data operations, the op table's `arg` for the elementwise families. */
enum { OP_NONE, OP_COPY, OP_NEG, OP_ABS, OP_NOT, OP_ADD, OP_SUB, OP_MUL,
       OP_DIV, OP_MAX, OP_MIN, OP_EQ, OP_LT, OP_GT, OP_LE, OP_GE, OP_AND,
       OP_OR };

#define LIST_ABSENT (-1)
#define LIST_UNKNOWN (-2)

/* ---------------------------------------------------------------- lists */

/* An int list that moved from attribute `name` to input `idx` at opset
 * `since` (axes, split, pads, starts...).  Returns its length, LIST_ABSENT
 * when the node gives none, LIST_UNKNOWN when it is an input whose values
 * are not known here. */
static int int_list(const shape_ctx *c, const char *name, int idx, int64_t since,
		    int64_t *buf)
{
	const int64_t *v = NULL;
	int n = -1;

	if (c->n->opset >= since && shape_has_in(c, idx)) {
		n = shape_in_ints(c, idx, &v);
		if (n < 0)
			return LIST_UNKNOWN;
	} else if (name) {
		n = shape_attr_ints(c, name, &v);
	}
	if (n < 0)
		return LIST_ABSENT;
	if (n > MAXD)
		return LIST_UNKNOWN;
	if (n)
		memcpy(buf, v, (size_t)n * sizeof(*buf));
	return n;
}

/* Normalises axes against `rank` into a bit mask; repeated axes fail when
 * `unique` (Unsqueeze, Slice), as the reference implementation does. */
static int axes_mask(shape_ctx *c, const int64_t *ax, int n, int rank, int unique,
		     uint32_t *mask)
{
	int a, rc;

	*mask = 0;
	for (int i = 0; i < n; i++) {
		rc = shape_axis(c, ax[i], rank, &a);
		if (rc)
			return rc;
		if (unique && (*mask & (1u << a)))
			return shape_fail(c, "axis %lld repeated", (long long)ax[i]);
		*mask |= 1u << a;
	}
	return 0;
}

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
static int fn_arith(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int rc = bcast_inputs(c, 0, o);

	if (!rc && c->arg && c->n->n_in == 2)
		binary_data(c, o, c->arg);
	return rc;
}

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual: bool out. */
static int fn_compare(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int rc = bcast_inputs(c, 0, o);

	o->elem_type = DT(BOOL);
	if (!rc && c->arg)
		binary_data(c, o, c->arg);
	return rc;
}

/* Pow: exponent type may differ; output has the base's type. */
static int fn_pow(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);

	o->elem_type = shape_in(c, 0)->elem_type;
	return shape_bcast(c, shape_in(c, 0), shape_in(c, 1), o);
}

static int fn_where(shape_ctx *c)
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
static int fn_unary(shape_ctx *c)
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
static int fn_unary_bool(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, shape_in(c, 0), 0);
	o->elem_type = DT(BOOL);
	return 0;
}

static int fn_softmax(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int64_t axis = shape_attr_int(c, "axis", c->n->opset < 13 ? 1 : -1);
	int a;

	if (x->rank > 0 && shape_axis(c, axis, x->rank, &a))
		return -EINVAL;
	shape_copy(shape_out(c, 0), x, 0);
	return 0;
}

static int fn_dropout(shape_ctx *c)
{
	graph_tinfo *mask = shape_out(c, 1);

	shape_copy(shape_out(c, 0), shape_in(c, 0), 1);
	shape_copy(mask, shape_in(c, 0), 0);
	mask->elem_type = DT(BOOL);
	return 0;
}

/* Y like X; in training mode running mean/var like the inputs they update. */
static int fn_batchnorm(shape_ctx *c)
{
	shape_copy(shape_out(c, 0), shape_in(c, 0), 0);
	shape_copy(shape_out(c, 1), shape_in(c, 3), 0);
	shape_copy(shape_out(c, 2), shape_in(c, 4), 0);
	return 0;
}

/* Y like X; Mean and InvStdDev keep the leading dims and set the normalised
 * ones (axis and after) to 1, in the float stash type. */
static int fn_layernorm(shape_ctx *c)
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

static int fn_matmul(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	char s1[SHAPE_FMT_LEN], s2[SHAPE_FMT_LEN];
	int64_t da[GRAPH_MAX_RANK + 1], db[GRAPH_MAX_RANK + 1], k;
	int ra = a->rank, rb = b->rank, r;

	if (shape_same_type(c, a->elem_type, b->elem_type))
		return -EINVAL;
	o->elem_type = a->elem_type ? a->elem_type : b->elem_type;
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
	r = shape_bcast_dims(da, ra - 2, db, rb - 2, o->dims);
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

static int fn_gemm(shape_ctx *c)
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
			     shape_bcast_dims(o->dims, 2, cc->dims, cc->rank, bc) < 0))
		return shape_fail(c, "C %s does not broadcast to %s",
				  shape_fmt(c, cc, s1), shape_fmt(c, o, s2));
	return 0;
}

/* ------------------------------------------------------ conv and pooling */

enum { PAD_NOTSET, PAD_SAME, PAD_VALID };

typedef struct window {
	int n;                              /* spatial rank */
	int64_t k[GRAPH_MAX_RANK];          /* kernel; < 0 unknown */
	int64_t s[GRAPH_MAX_RANK], d[GRAPH_MAX_RANK];
	int64_t pads[2 * GRAPH_MAX_RANK];   /* begins, then ends */
	int pad_mode, ceil_mode;
} window;

/* Reads one per-spatial-dim attribute (default `dflt`), requiring `want`
 * values and at least `min` in each. */
static int window_attr(shape_ctx *c, const char *name, int want, int64_t dflt,
		       int64_t min, int64_t *out)
{
	const int64_t *v;
	int n = shape_attr_ints(c, name, &v);

	for (int i = 0; i < want; i++)
		out[i] = dflt;
	if (n < 0)
		return 0;
	if (n != want)
		return shape_fail(c, "%s has %d values, expected %d", name, n, want);
	for (int i = 0; i < n; i++) {
		if (v[i] < min)
			return shape_fail(c, "%s[%d] = %lld is invalid", name, i,
					  (long long)v[i]);
		out[i] = v[i];
	}
	return 0;
}

static int window_read(shape_ctx *c, window *w)
{
	int rc = window_attr(c, "strides", w->n, 1, 1, w->s);

	if (!rc)
		rc = window_attr(c, "dilations", w->n, 1, 1, w->d);
	if (!rc)
		rc = window_attr(c, "pads", 2 * w->n, 0, 0, w->pads);
	w->pad_mode = PAD_NOTSET;
	if (shape_attr_is(c, "auto_pad", "SAME_UPPER") ||
	    shape_attr_is(c, "auto_pad", "SAME_LOWER"))
		w->pad_mode = PAD_SAME;
	else if (shape_attr_is(c, "auto_pad", "VALID"))
		w->pad_mode = PAD_VALID;
	w->ceil_mode = shape_attr_int(c, "ceil_mode", 0) != 0;
	return rc;
}

/* Output size of spatial dim i for Conv and pooling.  In ceil mode the last
 * window must start inside the input or its leading padding (PyTorch and
 * onnxruntime drop it otherwise). */
static int window_out(shape_ctx *c, const window *w, int i, int64_t in, int64_t *out)
{
	int64_t ek, span, pb = 0, pe = 0;

	*out = SHAPE_NEW;
	if (in < 0)
		return 0;
	if (w->pad_mode == PAD_SAME) {
		*out = in / w->s[i] + (in % w->s[i] != 0);
		return 0;
	}
	if (w->k[i] < 0)
		return 0;
	if (w->k[i] == 0)
		return shape_fail(c, "kernel dim %d is 0", i);
	if (w->pad_mode == PAD_NOTSET) {
		pb = w->pads[i];
		pe = w->pads[i + w->n];
	}
	if (__builtin_mul_overflow(w->k[i] - 1, w->d[i], &ek) ||
	    __builtin_add_overflow(in, pb, &span) || __builtin_add_overflow(span, pe, &span))
		return shape_fail(c, "kernel or padding too large at spatial dim %d", i);
	span -= ek + 1;
	if (span < 0)
		return shape_fail(c, "kernel %lld (dilation %lld) exceeds input %lld + padding at spatial dim %d",
				  (long long)w->k[i], (long long)w->d[i], (long long)in, i);
	*out = span / w->s[i] + 1;
	if (w->ceil_mode && span % w->s[i]) {
		int64_t starts = (in + pb) / w->s[i] + ((in + pb) % w->s[i] != 0);

		if (*out < starts)
			*out += 1;
	}
	return 0;
}

/* Spatial rank of an N-C-spatial op: from X, else W, else the kernel. */
static int spatial_rank(shape_ctx *c, const graph_tinfo *x, const graph_tinfo *w,
			int nk)
{
	int n = x->rank >= 0 ? x->rank - 2 : w->rank >= 0 ? w->rank - 2 : nk;

	if ((x->rank >= 0 && x->rank < 3) || n < 1 || n > GRAPH_MAX_RANK - 2)
		return shape_fail(c, "input rank %d, weight rank %d: expected N, C and spatial dims",
				  x->rank, w->rank);
	if ((w->rank >= 0 && w->rank != n + 2) || (nk >= 0 && nk != n))
		return shape_fail(c, "weight/kernel_shape rank does not match %d spatial dims", n);
	return n;
}

/* Kernel dims from kernel_shape, else from W's trailing dims. */
static void conv_kernel(shape_ctx *c, window *w)
{
	const graph_tinfo *wt = shape_in(c, 1);
	const int64_t *ks;
	int nk = shape_attr_ints(c, "kernel_shape", &ks);

	for (int i = 0; i < w->n; i++)
		w->k[i] = nk == w->n ? ks[i] : wt->rank == w->n + 2 ? wt->dims[i + 2] : -1;
}

/* N and channel dims of Conv (arg 0) and ConvTranspose (arg 1): W is
 * [M, C/group, k...] for Conv and [C, M/group, k...] for ConvTranspose.
 * Returns the spatial rank, -1 when unknown, or an error. */
static int conv_channels(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *wt = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *ks;
	int64_t group = shape_attr_int(c, "group", 1), cin = SHAPE_NEW, cout = SHAPE_NEW;
	int nk = shape_attr_ints(c, "kernel_shape", &ks), n, rc;

	if (shape_same_type(c, x->elem_type, wt->elem_type))
		return -EINVAL;
	o->elem_type = x->elem_type ? x->elem_type : wt->elem_type;
	if (x->rank < 0 && wt->rank < 0 && nk < 0)
		return -1;
	n = spatial_rank(c, x, wt, nk);
	if (n < 0)
		return n;
	if (group < 1)
		return shape_fail(c, "group %lld is invalid", (long long)group);
	rc = shape_set_rank(c, o, o->elem_type, n + 2);
	if (rc)
		return rc;
	if (wt->rank >= 0) {
		cin = wt->dims[!c->arg];
		cout = wt->dims[c->arg];
	}
	if (!c->arg && cin >= 0)
		cin *= group;
	if (c->arg && cout >= 0)
		cout *= group;
	if (x->rank >= 0 && x->dims[1] >= 0 && cin >= 0 && x->dims[1] != cin)
		return shape_fail(c, "input has %lld channels, weight expects %lld (group %lld)",
				  (long long)x->dims[1], (long long)cin, (long long)group);
	o->dims[0] = x->rank >= 0 ? x->dims[0] : SHAPE_NEW;
	o->dims[1] = cout;
	return n;
}

/* Output size of ConvTranspose at spatial dim i: stride * (in - 1) +
 * output_padding + effective kernel - pads, unless auto_pad SAME. */
static int convt_out(shape_ctx *c, const window *w, int i, int64_t in, int64_t op,
		     int64_t *out)
{
	int64_t v, ek, pads = 0;

	*out = SHAPE_NEW;
	if (in >= 0 && w->pad_mode == PAD_SAME) {
		if (__builtin_mul_overflow(in, w->s[i], out))
			return shape_fail(c, "output size overflows at spatial dim %d", i);
		return 0;
	}
	if (in < 0 || w->k[i] < 0)
		return 0;
	if (w->pad_mode == PAD_NOTSET)
		pads = w->pads[i] + w->pads[i + w->n];
	if (__builtin_mul_overflow(w->s[i], in - 1, &v) ||
	    __builtin_mul_overflow(w->k[i] - 1, w->d[i], &ek) ||
	    __builtin_add_overflow(v, ek + 1, &v) || __builtin_add_overflow(v, op, &v))
		return shape_fail(c, "output size overflows at spatial dim %d", i);
	if (v - pads < 0)
		return shape_fail(c, "negative output size at spatial dim %d", i);
	*out = v - pads;
	return 0;
}

/* Conv (arg 0) and ConvTranspose (arg 1). */
static int fn_conv(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *os;
	int64_t op[GRAPH_MAX_RANK];
	int nos = shape_attr_ints(c, "output_shape", &os), rc;
	window w = { .n = conv_channels(c) };

	if (w.n < 0)
		return w.n == -1 ? 0 : w.n;
	conv_kernel(c, &w);
	rc = window_read(c, &w);
	if (!rc && c->arg)
		rc = window_attr(c, "output_padding", w.n, 0, 0, op);
	for (int i = 0; i < w.n && !rc; i++) {
		int64_t in = x->rank >= 0 ? x->dims[i + 2] : -1;

		if (!c->arg)
			rc = window_out(c, &w, i, in, &o->dims[i + 2]);
		else if (nos >= w.n)
			o->dims[i + 2] = os[nos - w.n + i];
		else
			rc = convt_out(c, &w, i, in, op[i], &o->dims[i + 2]);
	}
	return rc;
}

/* MaxPool, AveragePool, LpPool: kernel_shape is required. */
static int fn_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *ks;
	int nk = shape_attr_ints(c, "kernel_shape", &ks), rc;
	window w;

	if (nk <= 0)
		return shape_fail(c, "kernel_shape is required");
	w.n = spatial_rank(c, x, &(graph_tinfo){ .rank = -1 }, nk);
	if (w.n < 0)
		return w.n;
	for (int i = 0; i < w.n; i++)
		w.k[i] = ks[i];
	rc = window_read(c, &w);
	if (rc || (rc = shape_set_rank(c, o, x->elem_type, w.n + 2)))
		return rc;
	for (int i = 0; i < 2 && x->rank >= 0; i++)
		o->dims[i] = x->dims[i];
	for (int i = 0; i < w.n && !rc; i++)
		rc = window_out(c, &w, i, x->rank >= 0 ? x->dims[i + 2] : -1,
				&o->dims[i + 2]);
	shape_copy(shape_out(c, 1), o, 0);
	shape_out(c, 1)->elem_type = DT(INT64);
	return rc;
}

static int fn_global_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);

	if (x->rank >= 0 && x->rank < 2)
		return shape_fail(c, "input rank %d: expected N, C and spatial dims",
				  x->rank);
	shape_copy(o, x, 0);
	for (int i = 2; i < o->rank; i++)
		o->dims[i] = 1;
	return 0;
}

/* ------------------------------------------------------ reshape family */

/* Resolves Reshape's -1 (at `neg`, or checks the element count when there
 * is none) by dividing the input's dims by the output's: symbols present on
 * both sides cancel, so [B,S,768] -> [B,S,-1,64] gives 12, and one leftover
 * input symbol with a unit ratio is the answer itself. */
static int reshape_resolve(shape_ctx *c, const graph_tinfo *x, graph_tinfo *o, int neg)
{
	char s1[SHAPE_FMT_LEN];
	int64_t pin = 1, pout = 1, left = 0;
	int used[GRAPH_MAX_RANK] = { 0 }, nleft = 0, oleft = 0, j;

	for (int i = 0; i < x->rank; i++) {
		if (x->dims[i] >= 0) {
			if (__builtin_mul_overflow(pin, x->dims[i], &pin))
				return 0;
			continue;
		}
		for (j = 0; j < o->rank; j++)
			if (j != neg && !used[j] && o->dims[j] == x->dims[i])
				break;
		if (j < o->rank) {
			used[j] = 1;
		} else {
			left = x->dims[i];
			nleft++;
		}
	}
	for (j = 0; j < o->rank; j++) {
		if (j != neg && o->dims[j] >= 0 && __builtin_mul_overflow(pout, o->dims[j], &pout))
			return 0;
		oleft += j != neg && o->dims[j] < 0 && !used[j];
	}
	if (oleft || nleft > 1 || (neg >= 0 && pout == 0))
		return 0;
	if (neg < 0) {
		if (nleft == 0 && pin != pout)
			return shape_fail(c, "cannot reshape %s (%lld elements) to %lld elements",
					  shape_fmt(c, x, s1), (long long)pin, (long long)pout);
		return 0;
	}
	if (nleft == 0 && pin % pout)
		return shape_fail(c, "cannot reshape %s (%lld elements) into a multiple of %lld",
				  shape_fmt(c, x, s1), (long long)pin, (long long)pout);
	if (nleft == 0)
		o->dims[neg] = pin / pout;
	else if (pin == pout)
		o->dims[neg] = left;
	return 0;
}

static int fn_reshape(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *st = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	int64_t sh[MAXD];
	int n = int_list(c, c->n->opset < 5 ? "shape" : NULL, 1, 5, sh), neg = -1, rc;
	int allowzero = shape_attr_int(c, "allowzero", 0) != 0;

	o->elem_type = x->elem_type;
	if (n < 0)
		return st->rank == 1 && st->dims[0] >= 0 ?
		       shape_set_rank(c, o, x->elem_type, st->dims[0]) : 0;
	rc = shape_set_rank(c, o, x->elem_type, n);
	for (int i = 0; i < n && !rc; i++) {
		if (sh[i] == 0 && !allowzero) {
			if (x->rank >= 0 && i >= x->rank)
				return shape_fail(c, "shape[%d] = 0 copies a dim the input lacks", i);
			o->dims[i] = x->rank >= 0 ? x->dims[i] : SHAPE_NEW;
		} else if (sh[i] == -1 && neg < 0) {
			neg = i;
		} else if (sh[i] < 0) {
			return shape_fail(c, "shape[%d] = %lld is invalid (one -1 at most)", i,
					  (long long)sh[i]);
		} else {
			o->dims[i] = sh[i];
		}
	}
	if (rc || x->rank < 0)
		return rc;
	rc = reshape_resolve(c, x, o, neg);
	if (!rc && x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return rc;
}

static int fn_flatten(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t axis = shape_attr_int(c, "axis", 1);

	shape_set_rank(c, o, x->elem_type, 2);
	if (x->rank < 0)
		return 0;
	if (axis < -x->rank || axis > x->rank)
		return shape_fail(c, "axis %lld out of range for rank %d", (long long)axis,
				  x->rank);
	if (axis < 0)
		axis += x->rank;
	o->dims[0] = shape_prod(x->dims, (int)axis);
	o->dims[1] = shape_prod(x->dims + axis, x->rank - (int)axis);
	if (x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return 0;
}

static int fn_transpose(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *perm;
	int n = shape_attr_ints(c, "perm", &perm), rank = n >= 0 ? n : x->rank;
	uint32_t seen = 0;

	if (x->rank >= 0 && n >= 0 && n != x->rank)
		return shape_fail(c, "perm has %d entries for rank %d", n, x->rank);
	if (shape_set_rank(c, o, x->elem_type, rank))
		return -EINVAL;
	for (int i = 0; i < rank; i++) {
		int64_t p = n >= 0 ? perm[i] : rank - 1 - i;

		if (p < 0 || p >= rank || (seen & (1u << p)))
			return shape_fail(c, "perm is not a permutation of 0..%d", rank - 1);
		seen |= 1u << p;
		o->dims[i] = x->rank >= 0 ? x->dims[p] : SHAPE_NEW;
	}
	return 0;
}

/* ------------------------------------------------------- concat, split */

static void concat_data(shape_ctx *c, graph_tinfo *o, int axis)
{
	int64_t n = graph_tinfo_numel(o), outer = 1, inner = 1, v[MAXD], k = 0;

	if (n < 0 || n > MAXD)
		return;
	for (int i = 0; i < c->n->n_in; i++)
		if (!shape_in(c, i)->has_data)
			return;
	for (int i = 0; i < axis; i++)
		outer *= o->dims[i];
	for (int i = axis + 1; i < o->rank; i++)
		inner *= o->dims[i];
	for (int64_t b = 0; b < outer; b++) {
		for (int i = 0; i < c->n->n_in; i++) {
			const graph_tinfo *x = shape_in(c, i);
			int64_t len = x->dims[axis] * inner;

			memcpy(v + k, x->data + b * len, (size_t)len * sizeof(v[0]));
			k += len;
		}
	}
	shape_set_data(o, v, n);
}

static int fn_concat(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	char s1[SHAPE_FMT_LEN], s2[SHAPE_FMT_LEN];
	const graph_tinfo *first = NULL;
	int64_t sum = 0;
	int a = 0;

	for (int i = 0; i < c->n->n_in; i++) {
		const graph_tinfo *x = shape_in(c, i);

		if (shape_same_type(c, o->elem_type, x->elem_type))
			return -EINVAL;
		o->elem_type = o->elem_type ? o->elem_type : x->elem_type;
		if (x->rank >= 0 && !first) {
			first = x;
			if (shape_axis(c, shape_attr_int(c, "axis", 0), x->rank, &a))
				return -EINVAL;
			shape_copy(o, x, 0);
		}
	}
	for (int i = 0; first && i < c->n->n_in; i++) {
		const graph_tinfo *x = shape_in(c, i);

		if (x->rank >= 0 && x->rank != o->rank)
			return shape_fail(c, "inputs have ranks %d and %d", first->rank, x->rank);
		for (int j = 0; j < o->rank && x->rank >= 0; j++)
			if (j != a && shape_merge(o->dims[j], x->dims[j], &o->dims[j]) < 0)
				return shape_fail(c, "dim %d differs: %s vs %s", j,
						  shape_fmt(c, first, s1), shape_fmt(c, x, s2));
		if (sum >= 0)
			sum = x->rank >= 0 && x->dims[a] >= 0 ? sum + x->dims[a] : -1;
	}
	if (first) {
		o->dims[a] = sum >= 0 ? sum : SHAPE_NEW;
		concat_data(c, o, a);
	}
	return 0;
}

/* Split sizes: from the `split` list, or equal parts (opset 18 lets the last
 * part be smaller).  A known dim that the parts do not add up to fails. */
static int split_sizes(shape_ctx *c, int64_t dim, int nout, int64_t *sz)
{
	int n = int_list(c, "split", 1, 13, sz);
	int64_t sum = 0, chunk;

	if (n == LIST_UNKNOWN || (n < 0 && dim < 0)) {
		for (int i = 0; i < nout; i++)
			sz[i] = nout == 1 ? dim : SHAPE_NEW;
		return 0;
	}
	if (n >= 0) {
		if (n != nout)
			return shape_fail(c, "split has %d sizes for %d outputs", n, nout);
		for (int i = 0; i < n; i++) {
			if (sz[i] < 0)
				return shape_fail(c, "split[%d] = %lld is invalid", i, (long long)sz[i]);
			sum += sz[i];
		}
		if (dim >= 0 && sum != dim)
			return shape_fail(c, "split sizes add up to %lld, dim is %lld",
					  (long long)sum, (long long)dim);
		return 0;
	}
	chunk = dim / nout + (dim % nout != 0);
	if ((dim % nout && c->n->opset < 18) || chunk * (nout - 1) > dim)
		return shape_fail(c, "cannot split dim %lld into %d parts", (long long)dim, nout);
	for (int i = 0; i < nout; i++)
		sz[i] = i < nout - 1 ? chunk : dim - chunk * (nout - 1);
	return 0;
}

static int fn_split(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int64_t sz[MAXD];
	int nout = c->n->n_out, a, rc;

	for (int i = 0; i < nout; i++)
		shape_copy(shape_out(c, i), x, 0);
	if (x->rank < 0 || nout < 1)
		return 0;
	if (nout > MAXD)
		return SHAPE_DECLARED;
	rc = shape_axis(c, shape_attr_int(c, "axis", 0), x->rank, &a);
	if (!rc)
		rc = split_sizes(c, x->dims[a], nout, sz);
	for (int i = 0; i < nout && !rc; i++)
		shape_out(c, i)->dims[a] = sz[i];
	return rc;
}

/* ------------------------------------------------------ gather, slice */

/* Gather's data: x indexed by known indices along axis a. */
static void gather_data(const graph_tinfo *x, const graph_tinfo *ix, int a,
			graph_tinfo *o)
{
	int64_t n = graph_tinfo_numel(o), outer = 1, inner = 1, v[MAXD], k = 0;

	if (!x->has_data || !ix->has_data || n < 0 || n > MAXD)
		return;
	for (int i = 0; i < a; i++)
		outer *= x->dims[i];
	for (int i = a + 1; i < x->rank; i++)
		inner *= x->dims[i];
	for (int64_t b = 0; b < outer; b++) {
		for (int64_t j = 0; j < ix->ndata; j++) {
			int64_t at = ix->data[j] < 0 ? ix->data[j] + x->dims[a] : ix->data[j];

			memcpy(v + k, x->data + (b * x->dims[a] + at) * inner,
			       (size_t)inner * sizeof(v[0]));
			k += inner;
		}
	}
	shape_set_data(o, v, n);
}

static int fn_gather(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *ix = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	int a, r = 0, rc;

	if (ix->elem_type && ix->elem_type != DT(INT64) && ix->elem_type != DT(INT32))
		return shape_fail(c, "indices must be int32 or int64, not %s",
				  shape_dtype_name(ix->elem_type));
	o->elem_type = x->elem_type;
	if (x->rank < 0 || ix->rank < 0)
		return 0;
	rc = shape_axis(c, shape_attr_int(c, "axis", 0), x->rank, &a);
	if (!rc)
		rc = shape_set_rank(c, o, x->elem_type, x->rank - 1 + ix->rank);
	for (int64_t j = 0; !rc && ix->has_data && x->dims[a] >= 0 && j < ix->ndata; j++)
		if (ix->data[j] < -x->dims[a] || ix->data[j] >= x->dims[a])
			return shape_fail(c, "index %lld out of range for dim %lld",
					  (long long)ix->data[j], (long long)x->dims[a]);
	if (rc)
		return rc;
	for (int i = 0; i < x->rank; i++) {
		if (i != a)
			o->dims[r++] = x->dims[i];
		for (int j = 0; i == a && j < ix->rank; j++)
			o->dims[r++] = ix->dims[j];
	}
	gather_data(x, ix, a, o);
	return 0;
}

/* GatherElements: the indices' shape. */
static int fn_gather_elements(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, shape_in(c, 1), 0);
	o->elem_type = shape_in(c, 0)->elem_type;
	return 0;
}

/* Length of one sliced dim, with start clamped as the reference does.  For
 * an unknown dim only the whole-range slice is known (same symbol). */
static int64_t slice_len(int64_t dim, int64_t *start, int64_t end, int64_t step)
{
	int64_t as = step == INT64_MIN ? INT64_MAX : step < 0 ? -step : step;

	if (dim < 0)
		return step == 1 && *start == 0 && end >= INT32_MAX ? dim : SHAPE_NEW;
	*start += *start < 0 ? dim : 0;
	end += end < 0 ? dim : 0;
	if (step > 0) {
		*start = *start < 0 ? 0 : *start > dim ? dim : *start;
		end = end < 0 ? 0 : end > dim ? dim : end;
		return end > *start ? (end - *start - 1) / as + 1 : 0;
	}
	*start = *start < 0 ? -1 : *start > dim - 1 ? dim - 1 : *start;
	end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
	return *start > end ? (*start - end - 1) / as + 1 : 0;
}

static void slice_data(const graph_tinfo *x, graph_tinfo *o, const int64_t *start,
		       const int64_t *step)
{
	int64_t n = graph_tinfo_numel(o), v[MAXD];

	if (!x->has_data || n < 0 || n > MAXD)
		return;
	for (int64_t i = 0; i < n; i++) {
		int64_t rem = i, src = 0, stride = 1;

		for (int d = o->rank - 1; d >= 0; d--) {
			src += (start[d] + (rem % o->dims[d]) * step[d]) * stride;
			rem /= o->dims[d];
			stride *= x->dims[d];
		}
		v[i] = x->data[src];
	}
	shape_set_data(o, v, n);
}

/* Slice's parameter lists: starts, ends, axes, steps (inputs 1-4 from
 * opset 10, attributes before).  Returns their length or LIST_UNKNOWN. */
static int slice_lists(shape_ctx *c, int64_t (*l)[MAXD])
{
	static const char *const names[] = { "starts", "ends", "axes", NULL };
	int n[4];

	for (int i = 0; i < 4; i++)
		n[i] = int_list(c, names[i], i + 1, 10, l[i]);
	if (n[0] == LIST_UNKNOWN || n[1] == LIST_UNKNOWN || n[2] == LIST_UNKNOWN ||
	    n[3] == LIST_UNKNOWN)
		return LIST_UNKNOWN;
	if (n[0] < 0 || n[1] != n[0] || (n[2] >= 0 && n[2] != n[0]) ||
	    (n[3] >= 0 && n[3] != n[0]))
		return shape_fail(c, "starts, ends, axes and steps differ in length");
	for (int i = 0; i < n[0]; i++) {
		if (n[2] < 0)
			l[2][i] = i;
		if (n[3] < 0)
			l[3][i] = 1;
	}
	return n[0];
}

static int fn_slice(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t l[4][MAXD], start[GRAPH_MAX_RANK] = { 0 }, step[GRAPH_MAX_RANK];
	int n = slice_lists(c, l), a;
	uint32_t seen = 0;

	shape_copy(o, x, 0);
	if (n < LIST_UNKNOWN || x->rank < 0)
		return n < LIST_UNKNOWN ? n : 0;
	for (int i = 0; i < x->rank; i++) {
		step[i] = 1;
		if (n == LIST_UNKNOWN)
			o->dims[i] = SHAPE_NEW;
	}
	for (int i = 0; i < n; i++) {
		if (shape_axis(c, l[2][i], x->rank, &a))
			return -EINVAL;
		if (seen & (1u << a))
			return shape_fail(c, "axis %lld repeated", (long long)l[2][i]);
		if (l[3][i] == 0)
			return shape_fail(c, "step is 0 for axis %d", a);
		seen |= 1u << a;
		start[a] = l[0][i];
		step[a] = l[3][i];
		o->dims[a] = slice_len(x->dims[a], &start[a], l[1][i], step[a]);
	}
	if (n >= 0)
		slice_data(x, o, start, step);
	return 0;
}

/* ------------------------------------------------- shape and dims ops */

static int fn_shape(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t r = x->rank, start = shape_attr_int(c, "start", 0);
	int64_t end = shape_attr_int(c, "end", r);

	shape_set_rank(c, o, DT(INT64), 1);
	if (r < 0)
		return 0;
	start += start < 0 ? r : 0;
	end += end < 0 ? r : 0;
	start = start < 0 ? 0 : start > r ? r : start;
	end = end < 0 ? 0 : end > r ? r : end;
	o->dims[0] = end > start ? end - start : 0;
	for (int64_t i = start; i < end; i++)
		if (x->dims[i] < 0)
			return 0;
	shape_set_data(o, x->dims + start, o->dims[0]);
	return 0;
}

static int fn_size(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int64_t n = graph_tinfo_numel(shape_in(c, 0));

	shape_set_rank(c, o, DT(INT64), 0);
	if (n >= 0)
		shape_set_data(o, &n, 1);
	return 0;
}

/* Unsqueeze and Squeeze take axes from an attribute before opset 13. */
static int fn_unsqueeze(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = int_list(c, "axes", 1, 13, ax), j = 0, rc;
	uint32_t mask;

	o->elem_type = x->elem_type;
	if (n == LIST_ABSENT)
		return shape_fail(c, "axes are required");
	if (n < 0 || x->rank < 0)
		return 0;
	rc = shape_set_rank(c, o, x->elem_type, x->rank + n);
	if (!rc)
		rc = axes_mask(c, ax, n, o->rank, 1, &mask);
	for (int i = 0; i < o->rank && !rc; i++)
		o->dims[i] = (mask & (1u << i)) ? 1 : x->dims[j++];
	if (!rc && x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return rc;
}

static int fn_squeeze(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = int_list(c, "axes", 1, 13, ax), r = 0;
	uint32_t mask = 0;

	o->elem_type = x->elem_type;
	if (n == LIST_UNKNOWN || x->rank < 0)
		return 0;
	if (n > 0 && axes_mask(c, ax, n, x->rank, 0, &mask))
		return -EINVAL;
	for (int i = 0; i < x->rank; i++) {
		int64_t d = x->dims[i];

		if (n <= 0 && d < 0)
			return 0;  /* which dims are 1 is not known */
		if ((mask & (1u << i)) && d >= 0 && d != 1)
			return shape_fail(c, "cannot squeeze dim %d of size %lld", i, (long long)d);
		if ((n > 0 && !(mask & (1u << i))) || (n <= 0 && d != 1))
			o->dims[r++] = d;
	}
	o->rank = r;
	if (x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return 0;
}

/* --------------------------------------------------- constants, casts */

static int constant_tensor(shape_ctx *c, const Onnx__TensorProto *tp, graph_tinfo *o)
{
	int64_t v[MAXD];
	int n;

	if (shape_set_rank(c, o, tp->data_type, (int64_t)tp->n_dims))
		return -EINVAL;
	for (size_t i = 0; i < tp->n_dims; i++)
		o->dims[i] = tp->dims[i];
	n = shape_tensor_ints(tp, v, MAXD);
	if (n >= 0)
		shape_set_data(o, v, n);
	return 0;
}

/* Constant: one of value, sparse_value, value_int(s), value_float(s),
 * value_string(s); a trailing 's' makes it 1-D. */
static int fn_constant(shape_ctx *c)
{
	const Onnx__AttributeProto *a = c->n->proto && c->n->proto->n_attribute == 1 ?
					c->n->proto->attribute[0] : NULL;
	graph_tinfo *o = shape_out(c, 0);
	const char *nm = a && a->name ? a->name : "";
	size_t len = strlen(nm);
	int list = len > 0 && nm[len - 1] == 's', n = 1;
	int64_t v[MAXD];

	if (!a)
		return shape_fail(c, "needs exactly one value attribute");
	if (!strcmp(nm, "value") && a->t)
		return constant_tensor(c, a->t, o);
	if (!strcmp(nm, "sparse_value") && a->sparse_tensor && a->sparse_tensor->values) {
		const Onnx__SparseTensorProto *sp = a->sparse_tensor;

		if (shape_set_rank(c, o, sp->values->data_type, (int64_t)sp->n_dims))
			return -EINVAL;
		for (size_t i = 0; i < sp->n_dims; i++)
			o->dims[i] = sp->dims[i];
		return 0;
	}
	if (!strncmp(nm, "value_int", 9)) {
		o->elem_type = DT(INT64);
		n = list ? (int)a->n_ints : 1;
		for (int i = 0; i < n && i < MAXD; i++)
			v[i] = list ? a->ints[i] : a->i;
	} else if (!strncmp(nm, "value_float", 11)) {
		o->elem_type = DT(FLOAT);
		n = list ? (int)a->n_floats : 1;
		for (int i = 0; i < n && i < MAXD; i++) {
			float f = list ? a->floats[i] : a->f;

			/* INT64_MIN does not fit a float: no data for non-integers. */
			v[i] = f >= -16777216.0f && f <= 16777216.0f && f == (float)(int64_t)f ?
			       (int64_t)f : INT64_MIN;
		}
	} else if (!strncmp(nm, "value_string", 12)) {
		o->elem_type = DT(STRING);
		n = list ? (int)a->n_strings : 1;
	} else {
		return SHAPE_DECLARED;
	}
	o->rank = list;
	o->dims[0] = n;
	if (o->elem_type != DT(STRING))
		shape_set_data(o, v, n);
	return 0;
}

/* Cast (arg 0: `to` attribute) and CastLike (arg 1: input 1's type).
 * Known data survives when it fits: float data is integral by construction,
 * so float -> int truncation is exact. */
static int fn_cast(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int32_t to = c->arg ? shape_in(c, 1)->elem_type : (int32_t)shape_attr_int(c, "to", 0);
	int64_t v[MAXD];

	if (!c->arg && !to)
		return shape_fail(c, "attribute 'to' is required");
	shape_copy(o, x, 0);
	o->elem_type = to;
	if (!x->has_data)
		return 0;
	for (int64_t i = 0; i < x->ndata; i++)
		v[i] = to == DT(BOOL) ? x->data[i] != 0 : x->data[i];
	shape_set_data(o, v, x->ndata);
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
static int fn_reduce(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = int_list(c, "axes", 1, c->arg, ax), keep = shape_attr_int(c, "keepdims", 1) != 0;
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
	if (n > 0 && axes_mask(c, ax, n, x->rank, 0, &mask))
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
static int fn_argreduce(shape_ctx *c)
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

/* ------------------------------------------- shapes taken from data */

static int fn_expand(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *st = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	char s1[SHAPE_FMT_LEN];
	const int64_t *sh;
	int n = shape_in_ints(c, 1, &sh), r;
	int64_t v[MAXD], k;

	o->elem_type = x->elem_type;
	if (n < 0 && st->rank == 1 && st->dims[0] >= 0 && x->rank >= 0) {
		k = st->dims[0] > x->rank ? st->dims[0] : x->rank;
		if (shape_set_rank(c, o, x->elem_type, k))
			return -EINVAL;
		for (int i = 0; i < x->rank; i++)
			if (x->dims[i] >= 0 && x->dims[i] != 1)
				o->dims[k - x->rank + i] = x->dims[i];
	}
	if (n < 0 || x->rank < 0)
		return 0;
	if (n > GRAPH_MAX_RANK)
		return shape_fail(c, "shape has %d dims", n);
	r = shape_bcast_dims(x->dims, x->rank, sh, n, o->dims);
	if (r < 0)
		return shape_fail(c, "cannot expand %s to the requested shape",
				  shape_fmt(c, x, s1));
	o->rank = r;
	k = graph_tinfo_numel(o);
	if (!x->has_data || k < 0 || k > MAXD)
		return 0;
	for (int64_t i = 0; i < k; i++)
		v[i] = x->data[shape_bcast_src(o, x, i)];
	shape_set_data(o, v, k);
	return 0;
}

static int fn_constant_of_shape(shape_ctx *c)
{
	const graph_tinfo *st = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const Onnx__AttributeProto *val = shape_attr(c, "value");
	const int64_t *sh;
	int n = shape_in_ints(c, 0, &sh), nv = 0;
	int64_t fill[MAXD] = { 0 }, numel;

	o->elem_type = val && val->t ? val->t->data_type : DT(FLOAT);
	if (val && val->t)
		nv = shape_tensor_ints(val->t, fill, MAXD);
	if (n < 0)
		return st->rank == 1 && st->dims[0] >= 0 ?
		       shape_set_rank(c, o, o->elem_type, st->dims[0]) : 0;
	if (shape_set_rank(c, o, o->elem_type, n))
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (sh[i] < 0)
			return shape_fail(c, "negative dim %lld", (long long)sh[i]);
		o->dims[i] = sh[i];
	}
	numel = graph_tinfo_numel(o);
	if (nv == 1 || (!val && nv == 0)) {
		int64_t v[MAXD];

		for (int64_t i = 0; i < numel && i < MAXD; i++)
			v[i] = fill[0];
		shape_set_data(o, v, numel);
	}
	return 0;
}

static int fn_range(shape_ctx *c)
{
	const graph_tinfo *s = shape_in(c, 0), *l = shape_in(c, 1), *d = shape_in(c, 2);
	graph_tinfo *o = shape_out(c, 0);
	int64_t diff, n, v[MAXD];

	if (shape_same_type(c, s->elem_type, l->elem_type) ||
	    shape_same_type(c, s->elem_type, d->elem_type))
		return -EINVAL;
	shape_set_rank(c, o, s->elem_type ? s->elem_type : l->elem_type, 1);
	if (!s->has_data || !l->has_data || !d->has_data ||
	    s->ndata != 1 || l->ndata != 1 || d->ndata != 1)
		return 0;
	if (d->data[0] == 0)
		return shape_fail(c, "delta is 0");
	if (__builtin_sub_overflow(l->data[0], s->data[0], &diff))
		return 0;
	n = diff / d->data[0];
	if (diff % d->data[0] && (diff > 0) == (d->data[0] > 0))
		n++;
	o->dims[0] = n > 0 ? n : 0;
	for (int64_t i = 0; i < o->dims[0] && i < MAXD; i++)
		v[i] = s->data[0] + i * d->data[0];
	shape_set_data(o, v, o->dims[0]);
	return 0;
}

static int fn_tile(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *rep;
	int n = shape_in_ints(c, 1, &rep);

	shape_copy(o, x, 0);
	if (x->rank < 0)
		return 0;
	if (n >= 0 && n != x->rank)
		return shape_fail(c, "repeats has %d values for rank %d", n, x->rank);
	for (int i = 0; i < x->rank; i++) {
		if (n >= 0 && rep[i] < 0)
			return shape_fail(c, "repeats[%d] = %lld is negative", i, (long long)rep[i]);
		if (n < 0 || (x->dims[i] < 0 && rep[i] != 1) ||
		    (x->dims[i] >= 0 && __builtin_mul_overflow(x->dims[i], rep[i], &o->dims[i])))
			o->dims[i] = SHAPE_NEW;
	}
	return 0;
}

/* Pad: pads attribute before opset 11, then input 1 (and axes, input 3,
 * from opset 18). */
static int fn_pad(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t p[MAXD], ax[MAXD];
	int n = int_list(c, "pads", 1, 11, p), na = int_list(c, NULL, 3, 18, ax), rc = 0;
	uint32_t mask = 0xffffffffu;

	shape_copy(o, x, 0);
	if (x->rank < 0)
		return 0;
	if (n < 0 || na == LIST_UNKNOWN) {
		for (int i = 0; i < o->rank; i++)
			o->dims[i] = SHAPE_NEW;
		return 0;
	}
	if (na < 0)
		na = x->rank;
	else
		rc = axes_mask(c, ax, na, x->rank, 1, &mask);
	if (!rc && n != 2 * na)
		return shape_fail(c, "pads has %d values for %d axes", n, na);
	for (int i = 0, k = 0; i < x->rank && !rc; i++) {
		int64_t d = x->dims[i], add;

		if (!(mask & (1u << i)))
			continue;
		add = p[k] + p[k + na];
		k++;
		if (d >= 0 && d + add < 0)
			return shape_fail(c, "padding makes dim %d negative", i);
		o->dims[i] = d >= 0 ? d + add : add == 0 ? d : SHAPE_NEW;
	}
	return rc;
}

static int fn_nonzero(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int64_t r = shape_in(c, 0)->rank;

	shape_set_rank(c, o, DT(INT64), 2);
	o->dims[0] = r >= 0 ? r : SHAPE_NEW;
	return 0;
}

/* TopK: K from attribute k before opset 10, input 1 after. */
static int fn_topk(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t k[MAXD];
	int n = int_list(c, NULL, 1, 10, k), a;

	if (c->n->opset < 10) {
		k[0] = shape_attr_int(c, "k", -1);
		n = k[0] >= 0;
	}
	shape_copy(o, x, 0);
	if (x->rank >= 0) {
		if (shape_axis(c, shape_attr_int(c, "axis", -1), x->rank, &a))
			return -EINVAL;
		if (n == 1 && x->dims[a] >= 0 && k[0] > x->dims[a])
			return shape_fail(c, "k = %lld exceeds dim %lld", (long long)k[0],
					  (long long)x->dims[a]);
		o->dims[a] = n == 1 && k[0] >= 0 ? k[0] : SHAPE_NEW;
	}
	shape_copy(shape_out(c, 1), o, 0);
	shape_out(c, 1)->elem_type = DT(INT64);
	return 0;
}

/* ---------------------------------------------------------------- table */

typedef struct op_entry {
	const char *op_type;
	shape_fn fn;
	int arg;
} op_entry;

static const op_entry op_table[] = {
	/* elementwise, broadcasting */
	{ "Add", fn_arith, OP_ADD }, { "Sub", fn_arith, OP_SUB },
	{ "Mul", fn_arith, OP_MUL }, { "Div", fn_arith, OP_DIV },
	{ "Mod", fn_arith, OP_NONE }, { "Pow", fn_pow, 0 },
	{ "Max", fn_arith, OP_MAX }, { "Min", fn_arith, OP_MIN },
	{ "Sum", fn_arith, OP_NONE }, { "Mean", fn_arith, OP_NONE },
	{ "And", fn_arith, OP_AND }, { "Or", fn_arith, OP_OR },
	{ "Xor", fn_arith, OP_NONE }, { "BitShift", fn_arith, OP_NONE },
	{ "PRelu", fn_unary, OP_NONE },
	{ "Equal", fn_compare, OP_EQ }, { "Less", fn_compare, OP_LT },
	{ "Greater", fn_compare, OP_GT }, { "LessOrEqual", fn_compare, OP_LE },
	{ "GreaterOrEqual", fn_compare, OP_GE }, { "Where", fn_where, 0 },
	/* elementwise, one input */
	{ "Identity", fn_unary, OP_COPY }, { "Neg", fn_unary, OP_NEG },
	{ "Abs", fn_unary, OP_ABS }, { "Not", fn_unary, OP_NOT },
	{ "Floor", fn_unary, OP_COPY }, { "Ceil", fn_unary, OP_COPY },
	{ "Round", fn_unary, OP_COPY }, { "Relu", fn_unary, OP_NONE },
	{ "Sigmoid", fn_unary, OP_NONE }, { "Tanh", fn_unary, OP_NONE },
	{ "Erf", fn_unary, OP_NONE }, { "Sqrt", fn_unary, OP_NONE },
	{ "Exp", fn_unary, OP_NONE }, { "Log", fn_unary, OP_NONE },
	{ "Reciprocal", fn_unary, OP_NONE }, { "Sign", fn_unary, OP_NONE },
	{ "Gelu", fn_unary, OP_NONE }, { "LeakyRelu", fn_unary, OP_NONE },
	{ "Elu", fn_unary, OP_NONE }, { "Selu", fn_unary, OP_NONE },
	{ "Celu", fn_unary, OP_NONE }, { "Clip", fn_unary, OP_NONE },
	{ "HardSigmoid", fn_unary, OP_NONE }, { "HardSwish", fn_unary, OP_NONE },
	{ "Softplus", fn_unary, OP_NONE }, { "Softsign", fn_unary, OP_NONE },
	{ "Mish", fn_unary, OP_NONE }, { "ThresholdedRelu", fn_unary, OP_NONE },
	{ "Sin", fn_unary, OP_NONE }, { "Cos", fn_unary, OP_NONE },
	{ "Tan", fn_unary, OP_NONE }, { "Atan", fn_unary, OP_NONE },
	{ "Shrink", fn_unary, OP_NONE }, { "CumSum", fn_unary, OP_NONE },
	{ "Trilu", fn_unary, OP_NONE }, { "IsNaN", fn_unary_bool, 0 },
	{ "IsInf", fn_unary_bool, 0 },
	{ "ScatterND", fn_unary, OP_NONE }, { "ScatterElements", fn_unary, OP_NONE },
	{ "Softmax", fn_softmax, 0 }, { "LogSoftmax", fn_softmax, 0 },
	{ "Hardmax", fn_softmax, 0 }, { "Dropout", fn_dropout, 0 },
	/* normalisation */
	{ "BatchNormalization", fn_batchnorm, 0 },
	{ "InstanceNormalization", fn_unary, OP_NONE },
	{ "GroupNormalization", fn_unary, OP_NONE },
	{ "LpNormalization", fn_unary, OP_NONE }, { "LRN", fn_unary, OP_NONE },
	{ "LayerNormalization", fn_layernorm, 0 },
	/* linear algebra, convolution, pooling */
	{ "MatMul", fn_matmul, 0 }, { "Gemm", fn_gemm, 0 },
	{ "Conv", fn_conv, 0 }, { "ConvTranspose", fn_conv, 1 },
	{ "MaxPool", fn_pool, 0 }, { "AveragePool", fn_pool, 0 },
	{ "LpPool", fn_pool, 0 }, { "GlobalAveragePool", fn_global_pool, 0 },
	{ "GlobalMaxPool", fn_global_pool, 0 }, { "GlobalLpPool", fn_global_pool, 0 },
	/* shape manipulation */
	{ "Reshape", fn_reshape, 0 }, { "Flatten", fn_flatten, 0 },
	{ "Transpose", fn_transpose, 0 }, { "Concat", fn_concat, 0 },
	{ "Split", fn_split, 0 }, { "Gather", fn_gather, 0 },
	{ "GatherElements", fn_gather_elements, 0 }, { "Slice", fn_slice, 0 },
	{ "Shape", fn_shape, 0 }, { "Size", fn_size, 0 },
	{ "Unsqueeze", fn_unsqueeze, 0 }, { "Squeeze", fn_squeeze, 0 },
	{ "Expand", fn_expand, 0 }, { "Tile", fn_tile, 0 }, { "Pad", fn_pad, 0 },
	{ "Constant", fn_constant, 0 }, { "ConstantOfShape", fn_constant_of_shape, 0 },
	{ "Range", fn_range, 0 }, { "Cast", fn_cast, 0 }, { "CastLike", fn_cast, 1 },
	{ "NonZero", fn_nonzero, 0 }, { "TopK", fn_topk, 0 },
	/* reductions: arg is the opset where axes became an input */
	{ "ReduceSum", fn_reduce, 13 }, { "ReduceMean", fn_reduce, 18 },
	{ "ReduceMax", fn_reduce, 18 }, { "ReduceMin", fn_reduce, 18 },
	{ "ReduceProd", fn_reduce, 18 }, { "ReduceL1", fn_reduce, 18 },
	{ "ReduceL2", fn_reduce, 18 }, { "ReduceLogSum", fn_reduce, 18 },
	{ "ReduceLogSumExp", fn_reduce, 18 }, { "ReduceSumSquare", fn_reduce, 18 },
	{ "ArgMax", fn_argreduce, 0 }, { "ArgMin", fn_argreduce, 0 },
};

shape_fn shape_op_find(const char *domain, const char *op_type, int *arg)
{
	if (!op_type || (domain && *domain && strcmp(domain, "ai.onnx") != 0))
		return NULL;
	for (size_t i = 0; i < sizeof(op_table) / sizeof(op_table[0]); i++) {
		if (strcmp(op_table[i].op_type, op_type) == 0) {
			*arg = op_table[i].arg;
			return op_table[i].fn;
		}
	}
	return NULL;
}
