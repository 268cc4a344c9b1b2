/*
 * vk_ops_shape: ops that move or re-label float32 data.  Reshape, Flatten,
 * Squeeze, Unsqueeze and Identity are metadata: the output is a view of
 * the input's device buffer, nothing is copied.  Transpose (shaders/
 * transpose.comp; a permutation that keeps the memory order is a view
 * too), Concat (one shaders/copy.comp dispatch per input) and Gather
 * (shaders/gather.comp) move data.  Shape-like int64 inputs (Reshape's
 * shape, axes, Gather's indices) are read on the host: they are weights or
 * come from shared memory, never from this device, as no Vulkan op makes
 * an int64 tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_ops.h"
#include "vk_ops.h"

#define TR_MAX_RANK 8

typedef struct transpose_push {
	uint32_t n, rank;
	uint32_t dims[TR_MAX_RANK], istr[TR_MAX_RANK];
} transpose_push;

typedef struct copy_push {
	uint32_t n, blk, dst_blk, dst_off;
} copy_push;

typedef struct gather_push {
	uint32_t n, nidx, inner, axis_len;
} gather_push;

static int is_int(int32_t dt)
{
	return dt == VKX_INT64 || dt == VKX_INT32;
}

/* Float32 data input 0; input 1 (Reshape's shape, Squeeze's and
 * Unsqueeze's axes from opset 13) int64. */
static int view_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	if (!ep_view_node_ok(p, opset, why, n) || !vk_need_float(p, dt, n_in, 0, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != VKX_INT64)
		return snprintf(why, n, "input 1 is not int64"), 0;
	return 1;
}

/* The int64 list of input i on the host (n = -1 when absent). */
static int host_list(vk_ctx *c, int i, int64_t *out, int *cnt)
{
	const vk_val *v = vk_in(c, i);

	*cnt = -1;
	if (!v)
		return 0;
	if (!v->host || !is_int(v->dtype) || v->rank > 1 || v->numel > EP_MAX_RANK)
		return vk_fail(c, EP_E_UNSUPPORTED, "input %d must be a short int64 list on the host", i);
	for (int64_t k = 0; k < v->numel; k++)
		out[k] = vk_get_int(v, k);
	*cnt = (int)v->numel;
	return 0;
}

/* Reports a shared shape helper's failure (rc, err) through the context. */
static int shape_fail(vk_ctx *c, int rc, const char *err)
{
	return vk_fail(c, rc, "%s", err);
}

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: a view of input 0 with
 * the dims ep_view_dims gives (input 1, when present, read on the host). */
static int view_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0);
	int64_t list[EP_MAX_RANK], od[EP_MAX_RANK];
	char err[128];
	int cnt, r, rc = host_list(c, 1, list, &cnt);

	if (rc)
		return rc;
	rc = ep_view_dims(c->node->proto, c->node->opset, x->rank, x->dims, x->numel, list, cnt,
			  od, &r, err, sizeof(err));
	if (rc)
		return shape_fail(c, rc, err);
	return vk_out_alias(c, 0, x, r, od);
}

/* ---- Transpose ------------------------------------------------------------ */

static int transpose_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			      int n_in, char *why, size_t n)
{
	(void)opset;
	if (!ep_transpose_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int transpose_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y;
	const int64_t *pv;
	int np = proto_attr_ints(c->node->proto, "perm", &pv), perm[EP_MAX_RANK];
	int64_t od[EP_MAX_RANK], fd[EP_MAX_RANK], fs[EP_MAX_RANK];
	char err[128];
	transpose_push p = {0};
	int k;

	k = ep_transpose_dims(x->rank, x->dims, pv, np, perm, od, err, sizeof(err));
	if (k)
		return shape_fail(c, k, err);
	k = ep_fold_perm(x->rank, x->dims, perm, fd, fs);
	if (k == 0 || (k == 1 && fs[0] == 1))
		return vk_out_alias(c, 0, x, x->rank, od);
	if (k > TR_MAX_RANK)
		return vk_fail(c, EP_E_UNSUPPORTED, "permutation folds to %d dims", k);
	y = vk_out(c, 0, x->rank, od);
	if (!y)
		return c->status;
	p.n = (uint32_t)y->numel;
	p.rank = (uint32_t)k;
	for (int i = 0; i < k; i++) {
		p.dims[i] = (uint32_t)fd[i];
		p.istr[i] = (uint32_t)fs[i];
	}
	return vk_emit_1d(c, VKP_TRANSPOSE, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

/* ---- Concat --------------------------------------------------------------- */

static int concat_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_concat_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int concat_plan(vk_ctx *c)
{
	const vk_val *x0 = vk_in(c, 0), *y;
	int a = x0 ? onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x0->rank) : -1;
	int64_t od[EP_MAX_RANK], inner = 1, off = 0;

	if (a < 0)
		return vk_fail(c, EP_E_INVALID, "axis out of range");
	memcpy(od, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
	od[a] = 0;
	for (int i = 0; i < c->n_in; i++) {
		const vk_val *x = vk_in(c, i);

		if (!x || x->rank != x0->rank || x->dtype != vk_node_dtype(c))
			return vk_fail(c, EP_E_INVALID, "input %d does not match input 0", i);
		for (int d = 0; d < x->rank; d++)
			if (d != a && x->dims[d] != x0->dims[d])
				return vk_fail(c, EP_E_INVALID, "input %d: dim %d differs", i, d);
		od[a] += x->dims[a];
	}
	for (int d = a + 1; d < x0->rank; d++)
		inner *= x0->dims[d];
	y = vk_out(c, 0, x0->rank, od);
	if (!y)
		return c->status;
	for (int i = 0; i < c->n_in; i++) {
		const vk_val *x = vk_in(c, i);
		copy_push p = {(uint32_t)x->numel, (uint32_t)(x->dims[a] * inner),
			       (uint32_t)(od[a] * inner), (uint32_t)(off * inner)};
		int rc;

		off += x->dims[a];
		if (!x->numel)
			continue;
		rc = vk_emit_1d(c, VKP_COPY, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
				(uint64_t)x->numel);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- Gather --------------------------------------------------------------- */

static int gather_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (!ep_gather_node_ok(p, why, n) || !vk_need_float(p, dt, n_in, 0, 1, why, n))
		return 0;
	if (!is_int(dt[1]))
		return snprintf(why, n, "indices are not int32 or int64"), 0;
	return 1;
}

/* The indices as non-negative int32 on the device. */
static int gather_indices(vk_ctx *c, const vk_val *ix, int64_t len, vk_buf *out)
{
	int32_t *tmp;
	int rc;

	if (!ix->host)
		return vk_fail(c, EP_E_UNSUPPORTED, "indices are not on the host");
	if (ix->is_const && c->node->keep.block >= 0) {
		*out = c->node->keep;
		return 0;
	}
	tmp = malloc((size_t)ix->numel * sizeof(int32_t) + 4);
	if (!tmp)
		return vk_fail(c, EP_E_NOMEM, "out of memory");
	for (int64_t k = 0; k < ix->numel; k++) {
		int64_t v = vk_get_int(ix, k);

		if (v < -len || v >= len) {
			free(tmp);
			return vk_fail(c, EP_E_INVALID, "index %lld is out of range [%lld, %lld)",
				       (long long)v, (long long)-len, (long long)len);
		}
		tmp[k] = (int32_t)(v < 0 ? v + len : v);
	}
	rc = ix->is_const ? vk_upload_keep(c, tmp, (uint64_t)ix->numel * 4, out)
			  : vk_upload_temp(c, tmp, (uint64_t)ix->numel * 4, out);
	free(tmp);
	return rc;
}

static int gather_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *ix = vk_in(c, 1), *y;
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", 0), x->rank), r;
	int64_t od[EP_MAX_RANK], inner, outer;
	gather_push p = {0};
	vk_buf ib;
	int rc;

	if (a < 0 || x->rank + ix->rank - 1 > EP_MAX_RANK)
		return vk_fail(c, EP_E_INVALID, "axis out of range");
	r = ep_gather_dims(x->rank, x->dims, a, ix->rank, ix->dims, od, &outer, &inner);
	y = vk_out(c, 0, r, od);
	if (!y)
		return c->status;
	if (!y->numel)
		return 0;
	rc = gather_indices(c, ix, x->dims[a], &ib);
	if (rc)
		return rc;
	p = (gather_push){(uint32_t)y->numel, (uint32_t)ix->numel, (uint32_t)inner,
			  (uint32_t)x->dims[a]};
	return vk_emit_1d(c, VKP_GATHER, (vk_buf[]){x->dev, ib, y->dev}, 3, 4u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

#define VIEW(name, lo) {name, lo, 22, view_supports, NULL, view_plan, 0, NULL}

const vk_op vk_ops_shape[] = {
	VIEW("Reshape", 5),
	VIEW("Flatten", 1),
	VIEW("Squeeze", 1),
	VIEW("Unsqueeze", 1),
	VIEW("Identity", 1),
	{"Transpose", 1, 22, transpose_supports, NULL, transpose_plan, VKX_PIPE(VKP_TRANSPOSE), NULL},
	{"Concat", 4, 22, concat_supports, NULL, concat_plan, VKX_PIPE(VKP_COPY), NULL},
	{"Gather", 1, 22, gather_supports, NULL, gather_plan, VKX_PIPE(VKP_GATHER), NULL},
	{0},
};
