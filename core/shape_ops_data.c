/*
 * shape_ops_data.c: type and shape inference for the ops about shapes
 * and known values: Shape, Size, Unsqueeze, Squeeze, Constant, Cast, and
 * the ops whose output shape comes from an input's data (Expand,
 * ConstantOfShape, Range, Tile, Pad, NonZero, TopK).  Registered in
 * op_table (shape_ops.c).
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"
#include "shape_ops_fn.h"

/* ------------------------------------------------- shape and dims ops */

int shape_fn_shape(shape_ctx *c)
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

int shape_fn_size(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int64_t n = graph_tinfo_numel(shape_in(c, 0));

	shape_set_rank(c, o, DT(INT64), 0);
	if (n >= 0)
		shape_set_data(o, &n, 1);
	return 0;
}

/* Unsqueeze and Squeeze take axes from an attribute before opset 13. */
int shape_fn_unsqueeze(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = shape_int_list(c, "axes", 1, 13, ax), rc;
	char why[SHAPE_WHY_LEN];

	o->elem_type = x->elem_type;
	if (n == LIST_ABSENT)
		return shape_fail(c, "axes are required");
	if (n < 0 || x->rank < 0)
		return 0;
	rc = shape_set_rank(c, o, x->elem_type, x->rank + n);
	if (!rc)
		rc = shape_rule(c, onnx_unsqueeze_dims(x->rank, x->dims, ax, n, o->dims, &o->rank,
						       why, sizeof(why)), why);
	if (!rc && x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return rc;
}

int shape_fn_squeeze(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t ax[MAXD];
	int n = shape_int_list(c, "axes", 1, 13, ax), r = 0, rc;
	char why[SHAPE_WHY_LEN];

	o->elem_type = x->elem_type;
	if (n == LIST_UNKNOWN || x->rank < 0)
		return 0;
	rc = onnx_squeeze_dims(x->rank, x->dims, ax, n, o->dims, &r, why, sizeof(why));
	if (rc)
		return rc > 0 ? 0 : shape_rule(c, rc, why);  /* > 0: which dims are 1 is not known */
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
int shape_fn_constant(shape_ctx *c)
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

			/* INT64_MIN does not fit a float: no data for non-integers
			 * (nor for integers past 2^24, which shape_set_data refuses). */
			if (shape_float_int(f, &v[i]) < 0)
				v[i] = INT64_MIN;
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
int shape_fn_cast(shape_ctx *c)
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

/* QuantizeLinear: x's shape in its zero point's type (else output_dtype,
 * else uint8); DequantizeLinear: in its scale's type (else output_dtype,
 * else float32); DynamicQuantizeLinear: in uint8, with a float32 scale
 * and a uint8 zero point, both scalars.  arg: SHAPE_QUANT_*. */
int shape_fn_quantize(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int32_t od = (int32_t)shape_attr_int(c, "output_dtype", 0), et;
	int rc;

	shape_copy(o, x, 0);
	if (c->arg == SHAPE_QUANT_DYNAMIC) {
		o->elem_type = DT(UINT8);
		if ((rc = shape_set_rank(c, shape_out(c, 1), DT(FLOAT), 0)))
			return rc;
		return shape_set_rank(c, shape_out(c, 2), DT(UINT8), 0);
	}
	if (c->arg == SHAPE_QUANT_LINEAR)
		et = shape_in(c, 2)->elem_type ? shape_in(c, 2)->elem_type : od ? od : DT(UINT8);
	else
		et = od ? od : shape_in(c, 1)->elem_type ? shape_in(c, 1)->elem_type : DT(FLOAT);
	o->elem_type = et;
	return 0;
}

/* ------------------------------------------- shapes taken from data */

int shape_fn_expand(shape_ctx *c)
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
	r = onnx_broadcast(x->rank, x->dims, n, sh, o->dims);
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

int shape_fn_constant_of_shape(shape_ctx *c)
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

int shape_fn_range(shape_ctx *c)
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

int shape_fn_tile(shape_ctx *c)
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
int shape_fn_pad(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t p[MAXD], ax[MAXD];
	int n = shape_int_list(c, "pads", 1, 11, p), na = shape_int_list(c, NULL, 3, 18, ax), rc = 0;
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
		rc = shape_axes_mask(c, ax, na, x->rank, 1, &mask);
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

int shape_fn_nonzero(shape_ctx *c)
{
	graph_tinfo *o = shape_out(c, 0);
	int64_t r = shape_in(c, 0)->rank;

	shape_set_rank(c, o, DT(INT64), 2);
	o->dims[0] = r >= 0 ? r : SHAPE_NEW;
	return 0;
}

/* TopK: K from attribute k before opset 10, input 1 after. */
int shape_fn_topk(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t k[MAXD];
	int n = shape_int_list(c, NULL, 1, 10, k), a;

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
