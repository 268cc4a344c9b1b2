/*
 * vk_ops_reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin on float32
 * (shaders/reduce.comp): axes from the attribute (ReduceSum before opset
 * 13, the others before 18) or from the int64 input on the host, keepdims,
 * noop_with_empty_axes.  The dims are folded into alternating kept and
 * reduced groups (unit dims vanish, neighbours of one kind merge).
 */
#include <stdio.h>
#include <string.h>

#include "vk_ops.h"

enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN };

static int red_op(const char *t)
{
	if (!strcmp(t, "ReduceSum"))
		return RED_SUM;
	if (!strcmp(t, "ReduceMean"))
		return RED_MEAN;
	return !strcmp(t, "ReduceMax") ? RED_MAX : RED_MIN;
}

/* Opset from which the axes are an input rather than an attribute. */
static int64_t axes_input_since(const char *t)
{
	return red_op(t) == RED_SUM ? 13 : 18;
}

static int reduce_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	if (!ep_reduce_node_ok(p, opset, axes_input_since(p->op_type), why, n) ||
	    !vk_need_float(p, dt, n_in, 0, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != VKX_INT64)
		return snprintf(why, n, "axes are not int64"), 0;
	return 1;
}

/* Marks the reduced dims in red[] (ep_reduce_axes, the axes input read
 * on the host); returns 1 when the op is a no-op. */
static int reduced_dims(vk_ctx *c, const vk_val *x, int *red, int *rc)
{
	const Onnx__NodeProto *p = c->node->proto;
	int64_t since = axes_input_since(p->op_type), ax[EP_MAX_RANK];
	const vk_val *a = c->node->opset < since ? NULL : vk_in(c, 1);
	char err[128];
	int r;

	*rc = 0;
	if (a && (!a->host || a->rank > 1 || a->numel > EP_MAX_RANK)) {
		*rc = vk_fail(c, EP_E_UNSUPPORTED, "axes must be a short int64 list on the host");
		return 0;
	}
	for (int i = 0; a && i < a->numel; i++)
		ax[i] = vk_get_int(a, i);
	r = ep_reduce_axes(p, c->node->opset, since, ax, a ? (int)a->numel : -1, x->rank, red, err,
			   sizeof(err));
	if (r < 0) {
		*rc = vk_fail(c, r, "%s", err);
		return 0;
	}
	return r;
}

/* Groups the dims into the push constants; -1 when there are too many. */
static int group_dims(const vk_val *x, const int *red, vk_reduce_push *p)
{
	int64_t st = 1, count = 1, nout = 1;
	int last = -1;

	for (int i = x->rank - 1; i >= 0; i--) {
		int64_t d = x->dims[i];
		uint32_t *dims = red[i] ? p->rdims : p->kdims, *str = red[i] ? p->rstr : p->kstr;
		uint32_t *cnt = red[i] ? &p->nr : &p->nk;

		if (d != 1 && last == red[i]) {
			dims[*cnt - 1] *= (uint32_t)d;
		} else if (d != 1) {
			if (*cnt == VKX_REDUCE_GROUPS)
				return -1;
			dims[*cnt] = (uint32_t)d;
			str[(*cnt)++] = (uint32_t)st;
			last = red[i];
		}
		*(red[i] ? &count : &nout) *= d;
		st *= d;
	}
	/* Built innermost first; the shader wants outermost first. */
	for (uint32_t i = 0; i < p->nk / 2; i++) {
		uint32_t t = p->kdims[i], u = p->kstr[i];

		p->kdims[i] = p->kdims[p->nk - 1 - i];
		p->kstr[i] = p->kstr[p->nk - 1 - i];
		p->kdims[p->nk - 1 - i] = t;
		p->kstr[p->nk - 1 - i] = u;
	}
	for (uint32_t i = 0; i < p->nr / 2; i++) {
		uint32_t t = p->rdims[i], u = p->rstr[i];

		p->rdims[i] = p->rdims[p->nr - 1 - i];
		p->rstr[i] = p->rstr[p->nr - 1 - i];
		p->rdims[p->nr - 1 - i] = t;
		p->rstr[p->nr - 1 - i] = u;
	}
	p->count = (uint32_t)count;
	p->n = (uint32_t)nout;
	return 0;
}

static int reduce_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y;
	int red[EP_MAX_RANK] = {0}, keep = proto_attr_int(c->node->proto, "keepdims", 1) != 0, r = 0, rc;
	int64_t od[EP_MAX_RANK];
	vk_reduce_push p = {.op = (uint32_t)red_op(c->node->proto->op_type)};

	if (x->dtype != vk_node_dtype(c))
		return vk_fail(c, EP_E_INVALID, "X is not float32");
	if (reduced_dims(c, x, red, &rc))
		return vk_out_alias(c, 0, x, x->rank, x->dims);
	if (rc)
		return rc;
	for (int i = 0; i < x->rank; i++)
		if (!red[i] || keep)
			od[r++] = red[i] ? 1 : x->dims[i];
	y = vk_out(c, 0, r, od);
	if (!y)
		return c->status;
	if (group_dims(x, red, &p))
		return vk_fail(c, EP_E_UNSUPPORTED, "dims fold to more than %d groups",
			       VKX_REDUCE_GROUPS);
	/* An empty reduction gives sum 0, mean NaN (0 / 0), max -inf, min inf. */
	if (!y->numel)
		return 0;
	return vk_emit_1d(c, VKP_REDUCE, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

const vk_op vk_ops_reduce[] = {
	{"ReduceSum", 1, 22, reduce_supports, NULL, reduce_plan, VKX_PIPE(VKP_REDUCE), NULL},
	{"ReduceMean", 1, 22, reduce_supports, NULL, reduce_plan, VKX_PIPE(VKP_REDUCE), NULL},
	{"ReduceMax", 1, 22, reduce_supports, NULL, reduce_plan, VKX_PIPE(VKP_REDUCE), NULL},
	{"ReduceMin", 1, 22, reduce_supports, NULL, reduce_plan, VKX_PIPE(VKP_REDUCE), NULL},
	{0},
};
