/*
 * cuda_ops_shape: ops that move or re-label float data.  Reshape, Flatten,
 * Squeeze, Unsqueeze and Identity are metadata: the output is a view of
 * the input's device memory, nothing is copied.  Transpose (a permutation
 * that keeps the memory order is a view too), Concat (one copy kernel per
 * input) and Gather move data (k_shape.cu).  Shape-like int64 inputs
 * (Reshape's shape, axes, Gather's indices) are read on the host: they are
 * weights, come from shared memory, or are read back from a device buffer
 * at bind time; no CUDA op makes an int64 tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "ep_ops.h"

static int is_int(int32_t dt)
{
	return dt == CU_INT64 || dt == CU_INT32;
}

/* Float data input 0; input 1 (Reshape's shape, Squeeze's and
 * Unsqueeze's axes from opset 13) int64. */
static int view_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	if (!ep_view_node_ok(p, opset, why, n) || !cu_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != CU_INT64)
		return snprintf(why, n, "input 1 is not int64"), 0;
	return 1;
}

/* The int64 list of input i on the host (*cnt = -1 when absent). */
static int host_list(cu_ctx *c, int i, int64_t *out, int *cnt)
{
	const cu_val *v = cu_in(c, i);

	*cnt = -1;
	if (!v)
		return 0;
	if (!v->host || !is_int(v->dtype) || v->rank > 1 || v->numel > EP_MAX_RANK)
		return cu_fail(c, EP_E_UNSUPPORTED, "input %d must be a short int64 list on the host", i);
	for (int64_t k = 0; k < v->numel; k++)
		out[k] = cu_get_int(v, k);
	*cnt = (int)v->numel;
	return 0;
}

/* Reports a shared shape helper's failure (rc, err) through the context. */
static int shape_fail(cu_ctx *c, int rc, const char *err)
{
	return cu_fail(c, rc, "%s", err);
}

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: a view of input 0 with
 * the dims ep_view_dims gives (input 1, when present, read on the host). */
static int view_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0);
	int64_t list[EP_MAX_RANK], od[EP_MAX_RANK];
	char err[128];
	int cnt, r, rc = host_list(c, 1, list, &cnt);

	if (rc)
		return rc;
	rc = ep_view_dims(c->node->proto, c->node->opset, x->rank, x->dims, x->numel, list, cnt,
			  od, &r, err, sizeof(err));
	if (rc)
		return shape_fail(c, rc, err);
	return cu_out_alias(c, 0, x, r, od);
}

/* ---- Transpose ------------------------------------------------------------ */

static int transpose_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			      int n_in, char *why, size_t n)
{
	(void)opset;
	if (!ep_transpose_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int transpose_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	const int64_t *pv;
	int np = proto_attr_ints(c->node->proto, "perm", &pv), perm[EP_MAX_RANK];
	int64_t od[EP_MAX_RANK], fd[EP_MAX_RANK], fs[EP_MAX_RANK];
	char err[128];
	cuk_perm p = {0};
	int k;

	k = ep_transpose_dims(x->rank, x->dims, pv, np, perm, od, err, sizeof(err));
	if (k)
		return shape_fail(c, k, err);
	k = ep_fold_perm(x->rank, x->dims, perm, fd, fs);
	if (k == 0 || (k == 1 && fs[0] == 1))
		return cu_out_alias(c, 0, x, x->rank, od);
	if (k > CUK_MAX_DIMS)
		return cu_fail(c, EP_E_UNSUPPORTED, "permutation folds to %d dims", k);
	y = cu_out(c, 0, x->dtype, x->rank, od);
	if (!y)
		return c->status;
	p.rank = k;
	for (int i = 0; i < k; i++) {
		p.dims[i] = fd[i];
		p.istr[i] = fs[i];
	}
	return cu_check(c, cuk_transpose(c->stream, x->dtype, x->dev, y->dev, y->numel, &p),
			"transpose kernel");
}

/* ---- Concat --------------------------------------------------------------- */

static int concat_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_concat_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int concat_run(cu_ctx *c)
{
	const cu_val *x0 = cu_in(c, 0), *y;
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x0->rank);
	int64_t od[EP_MAX_RANK], inner = 1, outer = 1, off = 0;

	if (a < 0)
		return cu_fail(c, EP_E_INVALID, "axis out of range");
	memcpy(od, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
	od[a] = 0;
	for (int i = 0; i < c->n_in; i++) {
		const cu_val *x = cu_in(c, i);

		if (!x || x->rank != x0->rank || x->dtype != x0->dtype || !cu_is_float(x->dtype))
			return cu_fail(c, EP_E_INVALID, "input %d does not match input 0", i);
		for (int d = 0; d < x->rank; d++)
			if (d != a && x->dims[d] != x0->dims[d])
				return cu_fail(c, EP_E_INVALID, "input %d: dim %d differs", i, d);
		od[a] += x->dims[a];
	}
	for (int d = 0; d < a; d++)
		outer *= x0->dims[d];
	for (int d = a + 1; d < x0->rank; d++)
		inner *= x0->dims[d];
	y = cu_out(c, 0, x0->dtype, x0->rank, od);
	if (!y)
		return c->status;
	for (int i = 0; i < c->n_in; i++) {
		const cu_val *x = cu_in(c, i);
		int rc = cu_check(c, cuk_concat_copy(c->stream, x->dtype, x->dev, y->dev, outer,
						     x->dims[a] * inner, od[a] * inner, off * inner),
				  "concat kernel");

		if (rc)
			return rc;
		off += x->dims[a];
	}
	return 0;
}

/* ---- Gather --------------------------------------------------------------- */

static int gather_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_gather_node_ok(p, why, n) || !cu_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (n_in < 2 || !is_int(dt[1]))
		return snprintf(why, n, "indices are not int32 or int64"), 0;
	return 1;
}

static int gather_prepare(cu_node *nd, char *err, size_t n)
{
	nd->state = calloc(1, sizeof(int64_t));
	return nd->state ? 0 : (snprintf(err, n, "out of memory"), EP_E_NOMEM);
}

/* The indices, checked and made non-negative, as int64 on the device.
 * Constant ones are kept across runs for the axis length they were
 * normalised with (node->state). */
static int gather_indices(cu_ctx *c, const cu_val *ix, int64_t len, void **out)
{
	int64_t *kept_len = c->node->state, *tmp;
	int keep = ix->is_const && (!c->node->keep.ptr || *kept_len == len);
	int rc;

	if (!ix->host)
		return cu_fail(c, EP_E_UNSUPPORTED, "indices are not on the host");
	if (keep && c->node->keep.ptr)
		return *out = c->node->keep.ptr, 0;
	tmp = malloc((size_t)ix->numel * sizeof(int64_t) + 8);
	if (!tmp)
		return cu_fail(c, EP_E_NOMEM, "out of memory");
	for (int64_t k = 0; k < ix->numel; k++) {
		int64_t v = cu_get_int(ix, k);

		if (v < -len || v >= len) {
			free(tmp);
			return cu_fail(c, EP_E_INVALID, "index %lld is out of range [%lld, %lld)",
				       (long long)v, (long long)-len, (long long)len);
		}
		tmp[k] = v < 0 ? v + len : v;
	}
	*kept_len = keep ? len : *kept_len;
	rc = keep ? cu_upload_keep(c, tmp, (uint64_t)ix->numel * 8, out)
		  : cu_upload_temp(c, tmp, (uint64_t)ix->numel * 8, out);
	free(tmp);
	return rc;
}

static int gather_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *ix = cu_in(c, 1), *y;
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x->rank), r;
	int64_t od[EP_MAX_RANK], inner, outer;
	void *ib;
	int rc;

	if (!ix || !is_int(ix->dtype) || a < 0 || x->rank + ix->rank - 1 > EP_MAX_RANK)
		return cu_fail(c, EP_E_INVALID, "axis out of range or bad indices");
	r = ep_gather_dims(x->rank, x->dims, a, ix->rank, ix->dims, od, &outer, &inner);
	y = cu_out(c, 0, x->dtype, r, od);
	if (!y)
		return c->status;
	if (!y->numel)
		return 0;
	rc = gather_indices(c, ix, x->dims[a], &ib);
	if (rc)
		return rc;
	return cu_check(c, cuk_gather(c->stream, x->dtype, x->dev, ib, y->dev, outer, ix->numel,
				      inner, x->dims[a]), "gather kernel");
}

#define VIEW(name, lo) {name, lo, 22, view_supports, NULL, view_run, NULL}

const cu_op cu_ops_shape[] = {
	VIEW("Reshape", 5),
	VIEW("Flatten", 1),
	VIEW("Squeeze", 1),
	VIEW("Unsqueeze", 1),
	VIEW("Identity", 1),
	{"Transpose", 1, 22, transpose_supports, NULL, transpose_run, NULL},
	{"Concat", 4, 22, concat_supports, NULL, concat_run, NULL},
	{"Gather", 1, 22, gather_supports, gather_prepare, gather_run, NULL},
	{0},
};
