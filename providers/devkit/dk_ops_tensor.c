/*
 * dk_ops_tensor: the device-independent halves of the tensor ops both
 * device providers run (see dk_ops.h): the view ops whole, and the node
 * checks, output shapes and index work of Transpose, Concat, Gather and
 * the Reduce ops, leaving each provider its kernel launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_ops.h"
#include "dk_shape.h"

static int is_int(int32_t dt)
{
	return dt == DK_INT64 || dt == DK_INT32;
}

/* ---- the view ops -------------------------------------------------------- */

int dk_view_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n)
{
	if (!dk_view_node_ok(p, opset, why, n) || !dk_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != DK_INT64)
		return snprintf(why, n, "input 1 is not int64"), 0;
	return 1;
}

int dk_host_list(dk_ctx *c, int i, int64_t *out, int *cnt)
{
	const dk_val *v = dk_in(c, i);

	*cnt = -1;
	if (!v)
		return 0;
	if (!v->host || (v->dtype != DK_INT64 && v->dtype != DK_INT32) || v->rank > 1 ||
	    v->numel > EP_MAX_RANK)
		return dk_fail(c, EP_E_UNSUPPORTED, "input %d must be a short int64 list on the host", i);
	for (int64_t k = 0; k < v->numel; k++)
		out[k] = dk_get_int(v, k);
	*cnt = (int)v->numel;
	return 0;
}

int dk_view_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0);
	int64_t list[EP_MAX_RANK], od[EP_MAX_RANK];
	char err[128];
	int cnt, r, rc = dk_host_list(c, 1, list, &cnt);

	if (rc)
		return rc;
	rc = dk_view_dims(c->node->proto, c->node->opset, x->rank, x->dims, x->numel, list, cnt,
			  od, &r, err, sizeof(err));
	if (rc)
		return dk_fail(c, rc, "%s", err);
	return dk_out_alias(c, 0, x, r, od);
}

/* ---- Transpose ------------------------------------------------------------ */

int dk_transpose_out(dk_ctx *c, int max_rank, int64_t *fd, int64_t *fs, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0);
	const int64_t *pv;
	int np = proto_attr_ints(c->node->proto, "perm", &pv), perm[EP_MAX_RANK];
	int64_t od[EP_MAX_RANK];
	char err[128];
	int k = dk_transpose_dims(x->rank, x->dims, pv, np, perm, od, err, sizeof(err));

	if (k)
		return dk_fail(c, k, "%s", err);
	k = dk_fold_perm(x->rank, x->dims, perm, fd, fs);
	if (k == 0 || (k == 1 && fs[0] == 1))
		return dk_out_alias(c, 0, x, x->rank, od);
	if (k > max_rank)
		return dk_fail(c, EP_E_UNSUPPORTED, "permutation folds to %d dims", k);
	*y = dk_out(c, 0, x->dtype, x->rank, od);
	return *y ? k : c->status;
}

/* ---- Concat ----------------------------------------------------------------- */

int dk_concat_out(dk_ctx *c, int *axis, int64_t *outer, int64_t *inner, const dk_val **y)
{
	const dk_val *x0 = dk_in(c, 0);
	int a = x0 ? onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x0->rank) : -1;
	int64_t od[EP_MAX_RANK];

	if (a < 0)
		return dk_fail(c, EP_E_INVALID, "axis out of range");
	memcpy(od, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
	od[a] = 0;
	for (int i = 0; i < c->n_in; i++) {
		const dk_val *x = dk_in(c, i);

		if (!x || x->rank != x0->rank || x->dtype != x0->dtype || !dk_dev_dtype(x->dtype))
			return dk_fail(c, EP_E_INVALID, "input %d does not match input 0", i);
		for (int d = 0; d < x->rank; d++)
			if (d != a && x->dims[d] != x0->dims[d])
				return dk_fail(c, EP_E_INVALID, "input %d: dim %d differs", i, d);
		od[a] += x->dims[a];
	}
	*axis = a;
	*outer = *inner = 1;
	for (int d = 0; d < a; d++)
		*outer *= x0->dims[d];
	for (int d = a + 1; d < x0->rank; d++)
		*inner *= x0->dims[d];
	*y = dk_out(c, 0, x0->dtype, x0->rank, od);
	return *y ? 0 : c->status;
}

/* ---- Gather ----------------------------------------------------------------- */

int dk_gather_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (!dk_gather_node_ok(p, why, n) || !dk_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (n_in < 2 || !is_int(dt[1]))
		return snprintf(why, n, "indices are not int32 or int64"), 0;
	return 1;
}

int dk_gather_prepare(dk_node *nd, char *err, size_t n)
{
	nd->state = calloc(1, sizeof(int64_t));
	return nd->state ? 0 : (snprintf(err, n, "out of memory"), EP_E_NOMEM);
}

/* The indices, checked and made non-negative, on the device as esz-byte
 * ints.  Constant ones are kept across runs for the axis length they were
 * normalised with (node->state). */
static int gather_indices(dk_ctx *c, const dk_val *ix, int64_t len, int esz, dk_buf *out)
{
	int64_t *kept_len = c->node->state;
	int keep = ix->is_const && (!c->node->keep.ptr || *kept_len == len);
	char *tmp;
	int rc;

	if (!ix->host)
		return dk_fail(c, EP_E_UNSUPPORTED, "indices are not on the host");
	if (keep && c->node->keep.ptr)
		return *out = c->node->keep, 0;
	tmp = malloc((size_t)ix->numel * (size_t)esz + 8);
	if (!tmp)
		return dk_fail(c, EP_E_NOMEM, "out of memory");
	for (int64_t k = 0; k < ix->numel; k++) {
		int64_t v = dk_get_int(ix, k);
		int32_t v32;

		if (v < -len || v >= len) {
			free(tmp);
			return dk_fail(c, EP_E_INVALID, "index %lld is out of range [%lld, %lld)",
				       (long long)v, (long long)-len, (long long)len);
		}
		v = v < 0 ? v + len : v;
		v32 = (int32_t)v;
		memcpy(tmp + k * esz, esz == 4 ? (const void *)&v32 : (const void *)&v, (size_t)esz);
	}
	*kept_len = keep ? len : *kept_len;
	rc = keep ? dk_upload_keep(c, tmp, (uint64_t)ix->numel * (uint64_t)esz, out)
		  : dk_upload_temp(c, tmp, (uint64_t)ix->numel * (uint64_t)esz, out);
	free(tmp);
	return rc;
}

int dk_gather_out(dk_ctx *c, int esz, dk_buf *ib, int64_t *outer, int64_t *inner, int64_t *len,
		  const dk_val **y)
{
	const dk_val *x = dk_in(c, 0), *ix = dk_in(c, 1);
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x->rank), r;
	int64_t od[EP_MAX_RANK];

	if (!ix || !is_int(ix->dtype) || a < 0 || x->rank + ix->rank - 1 > EP_MAX_RANK)
		return dk_fail(c, EP_E_INVALID, "axis out of range or bad indices");
	r = dk_gather_dims(x->rank, x->dims, a, ix->rank, ix->dims, od, outer, inner);
	*len = x->dims[a];
	*y = dk_out(c, 0, x->dtype, r, od);
	if (!*y)
		return c->status;
	if (!(*y)->numel)
		return 1;
	return gather_indices(c, ix, x->dims[a], esz, ib);
}

/* ---- the Reduce ops ---------------------------------------------------------- */

int64_t dk_reduce_axes_since(const char *op_type)
{
	return strcmp(op_type, "ReduceSum") == 0 ? 13 : 18;
}

int dk_reduce_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	if (!dk_reduce_node_ok(p, opset, dk_reduce_axes_since(p->op_type), why, n) ||
	    !dk_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != DK_INT64)
		return snprintf(why, n, "axes are not int64"), 0;
	return 1;
}

/* Marks the reduced dims in red[] (dk_reduce_axes, the axes input read
 * on the host); returns 1 when the op is a no-op, < 0 on an error. */
static int reduced_dims(dk_ctx *c, const dk_val *x, int *red)
{
	const Onnx__NodeProto *p = c->node->proto;
	int64_t since = dk_reduce_axes_since(p->op_type), ax[EP_MAX_RANK];
	const dk_val *a = c->node->opset < since ? NULL : dk_in(c, 1);
	char err[128];
	int r;

	if (a && (!a->host || a->rank > 1 || a->numel > EP_MAX_RANK))
		return dk_fail(c, EP_E_UNSUPPORTED, "axes must be a short int64 list on the host");
	for (int i = 0; a && i < a->numel; i++)
		ax[i] = dk_get_int(a, i);
	r = dk_reduce_axes(p, c->node->opset, since, ax, a ? (int)a->numel : -1, x->rank, red, err,
			   sizeof(err));
	return r < 0 ? dk_fail(c, r, "%s", err) : r;
}

/* Groups the dims (outermost first); -1 when there are too many groups. */
static int group_dims(const dk_val *x, const int *red, int max_groups, dk_reduce *g)
{
	int64_t st[EP_MAX_RANK], s = 1;
	int last = -1;

	for (int i = x->rank - 1; i >= 0; i--) {
		st[i] = s;
		s *= x->dims[i];
	}
	memset(g, 0, sizeof(*g));
	g->nout = g->count = 1;
	for (int i = 0; i < x->rank; i++) {
		int64_t d = x->dims[i];
		int64_t *dims = red[i] ? g->rdims : g->kdims, *str = red[i] ? g->rstr : g->kstr;
		int *cnt = red[i] ? &g->nr : &g->nk;

		*(red[i] ? &g->count : &g->nout) *= d;
		if (d == 1)
			continue;
		/* Merges with the previous group when it is of the same kind
		 * and adjacent in memory. */
		if (last == red[i] && str[*cnt - 1] == st[i] * d) {
			dims[*cnt - 1] *= d;
			str[*cnt - 1] = st[i];
			continue;
		}
		if (*cnt == max_groups)
			return -1;
		dims[*cnt] = d;
		str[(*cnt)++] = st[i];
		last = red[i];
	}
	return 0;
}

int dk_reduce_out(dk_ctx *c, int max_groups, dk_reduce *g, const dk_val **y)
{
	const dk_val *x = dk_in(c, 0);
	int red[EP_MAX_RANK] = {0}, keep = proto_attr_int(c->node->proto, "keepdims", 1) != 0, r = 0;
	int64_t od[EP_MAX_RANK];
	int rc;

	if (!dk_dev_dtype(x->dtype))
		return dk_fail(c, EP_E_INVALID, "X is not float");
	rc = reduced_dims(c, x, red);
	if (rc)
		return rc > 0 ? (dk_out_alias(c, 0, x, x->rank, x->dims) ? c->status : 1) : rc;
	for (int i = 0; i < x->rank; i++)
		if (!red[i] || keep)
			od[r++] = red[i] ? 1 : x->dims[i];
	*y = dk_out(c, 0, x->dtype, r, od);
	if (!*y)
		return c->status;
	if (group_dims(x, red, max_groups, g))
		return dk_fail(c, EP_E_UNSUPPORTED, "dims fold to more than %d groups", max_groups);
	return 0;
}
