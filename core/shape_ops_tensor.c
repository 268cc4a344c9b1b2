/*
 * shape_ops_tensor.c: type and shape inference for the ops that move
 * data between shapes: Reshape, Flatten, Transpose, Concat, Split,
 * Gather, GatherElements and Slice, folding known integer data through
 * them.  Registered in op_table (shape_ops.c).
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"
#include "shape_ops_fn.h"

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

int shape_fn_reshape(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *st = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	int64_t sh[MAXD];
	int n = shape_int_list(c, c->n->opset < 5 ? "shape" : NULL, 1, 5, sh), neg = -1, rc;
	int allowzero = shape_attr_int(c, "allowzero", 0) != 0;
	char why[SHAPE_WHY_LEN];

	o->elem_type = x->elem_type;
	if (n < 0)
		return st->rank == 1 && st->dims[0] >= 0 ?
		       shape_set_rank(c, o, x->elem_type, st->dims[0]) : 0;
	rc = shape_set_rank(c, o, x->elem_type, n);
	if (!rc)
		rc = shape_rule(c, onnx_reshape_spec(x->rank, x->dims, sh, n, allowzero, o->dims, &neg,
						     why, sizeof(why)), why);
	if (rc || x->rank < 0)
		return rc;
	rc = reshape_resolve(c, x, o, neg);
	if (!rc && x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return rc;
}

int shape_fn_flatten(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t axis = shape_attr_int(c, "axis", 1);
	char why[SHAPE_WHY_LEN];

	shape_set_rank(c, o, x->elem_type, 2);
	if (x->rank < 0)
		return 0;
	if (shape_rule(c, onnx_flatten_dims(x->rank, x->dims, axis, o->dims, why, sizeof(why)), why))
		return -EINVAL;
	if (x->has_data)
		shape_set_data(o, x->data, x->ndata);
	return 0;
}

/* A transposed small tensor's data (torchvision's swin_t transposes its
 * pads [2, 4] -> [4, 2]): o's dim d is x's dim perm[d], so element i of o,
 * unravelled, is read at x's stride of that dim for each of its indices. */
static void transpose_data(const graph_tinfo *x, graph_tinfo *o, const int64_t *perm,
			   int has_perm)
{
	int64_t n = graph_tinfo_numel(o), v[MAXD], xs[GRAPH_MAX_RANK], from[GRAPH_MAX_RANK];
	int rank = o->rank;

	if (!x->has_data || n < 0 || n > MAXD || x->ndata != n)
		return;
	for (int e = rank - 1; e >= 0; e--)
		xs[e] = e == rank - 1 ? 1 : xs[e + 1] * x->dims[e + 1];
	for (int d = 0; d < rank; d++)
		from[d] = xs[has_perm ? perm[d] : rank - 1 - d];
	for (int64_t i = 0; i < n; i++) {
		int64_t rest = i, src = 0;

		for (int d = rank - 1; d >= 0; d--) {
			src += rest % o->dims[d] * from[d];
			rest /= o->dims[d];
		}
		v[i] = x->data[src];
	}
	shape_set_data(o, v, n);
}

int shape_fn_transpose(shape_ctx *c)
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
	transpose_data(x, o, perm, n >= 0);
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

int shape_fn_concat(shape_ctx *c)
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
	int n = shape_int_list(c, "split", 1, 13, sz);
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

int shape_fn_split(shape_ctx *c)
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

/* A Gather of a Shape's output: the dims it picks may be known when
 * others are not (a static channel count beside a symbolic batch), and
 * torch computes head sizes and scales from exactly those. */
static void gather_shape_dims(const shape_ctx *c, const graph_tinfo *ix, graph_tinfo *o)
{
	int v = c->n->n_in > 0 ? c->n->in[0] : -1, p;
	int64_t r, start, end, vals[MAXD];
	const graph_node *s;
	const graph_tinfo *src;

	if (o->has_data || !ix->has_data || v < 0 || ix->ndata > MAXD ||
	    (p = c->g->values[v].producer) < 0)
		return;
	s = &c->g->nodes[p];
	if (strcmp(s->op_type, "Shape") != 0 || s->domain[0] || s->n_in < 1 || s->in[0] < 0)
		return;
	src = &c->t[s->in[0]];
	if ((r = src->rank) < 0)
		return;
	start = proto_attr_int(s->proto, "start", 0);
	end = proto_attr_int(s->proto, "end", r);
	start += start < 0 ? r : 0;
	end += end < 0 ? r : 0;
	start = start < 0 ? 0 : start > r ? r : start;
	end = end < start ? start : end > r ? r : end;
	for (int64_t j = 0; j < ix->ndata; j++) {
		int64_t i = ix->data[j] < 0 ? ix->data[j] + (end - start) : ix->data[j];

		if (i < 0 || i >= end - start || src->dims[start + i] < 0)
			return;
		vals[j] = src->dims[start + i];
	}
	shape_set_data(o, vals, ix->ndata);
}

int shape_fn_gather(shape_ctx *c)
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
	if (a == 0 && x->rank == 1)
		gather_shape_dims(c, ix, o);
	return 0;
}

/* GatherElements: the indices' shape. */
int shape_fn_gather_elements(shape_ctx *c)
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
		n[i] = shape_int_list(c, names[i], i + 1, 10, l[i]);
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

int shape_fn_slice(shape_ctx *c)
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
