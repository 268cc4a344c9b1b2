/*
 * cuda_ops_reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin on
 * float32 and float16 (k_reduce.cu): axes from the attribute (ReduceSum
 * before opset 13, the others before 18) or from the int64 input on the
 * host, keepdims, noop_with_empty_axes.  The dims fold into kept and
 * reduced groups (unit dims vanish, neighbours of one kind merge).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"

static int red_op(const char *t)
{
	if (!strcmp(t, "ReduceSum"))
		return CUK_R_SUM;
	if (!strcmp(t, "ReduceMean"))
		return CUK_R_MEAN;
	return !strcmp(t, "ReduceMax") ? CUK_R_MAX : CUK_R_MIN;
}

/* Opset from which the axes are an input rather than an attribute. */
static int64_t axes_input_since(const char *t)
{
	return red_op(t) == CUK_R_SUM ? 13 : 18;
}

static int reduce_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	if (!ep_reduce_node_ok(p, opset, axes_input_since(p->op_type), why, n) ||
	    !cu_need_float(p, dt, n_in, 0, 1, 1, why, n))
		return 0;
	if (p->n_input == 2 && p->input[1][0] && dt[1] != CU_INT64)
		return snprintf(why, n, "axes are not int64"), 0;
	return 1;
}

/* Marks the reduced dims in red[] (ep_reduce_axes, the axes input read
 * on the host); returns 1 when the op is a no-op. */
static int reduced_dims(cu_ctx *c, const cu_val *x, int *red, int *rc)
{
	const Onnx__NodeProto *p = c->node->proto;
	int64_t since = axes_input_since(p->op_type), ax[EP_MAX_RANK];
	const cu_val *a = c->node->opset < since ? NULL : cu_in(c, 1);
	char err[128];
	int r;

	*rc = 0;
	if (a && (!a->host || a->rank > 1 || a->numel > EP_MAX_RANK)) {
		*rc = cu_fail(c, EP_E_UNSUPPORTED, "axes must be a short int64 list on the host");
		return 0;
	}
	for (int i = 0; a && i < a->numel; i++)
		ax[i] = cu_get_int(a, i);
	r = ep_reduce_axes(p, c->node->opset, since, ax, a ? (int)a->numel : -1, x->rank, red, err,
			   sizeof(err));
	if (r < 0) {
		*rc = cu_fail(c, r, "%s", err);
		return 0;
	}
	return r;
}

/* Groups the dims (outermost first); -1 when there are too many groups. */
static int group_dims(const cu_val *x, const int *red, cuk_reduce *r)
{
	int64_t st[EP_MAX_RANK], s = 1;
	int last = -1;

	for (int i = x->rank - 1; i >= 0; i--) {
		st[i] = s;
		s *= x->dims[i];
	}
	r->nout = r->count = 1;
	for (int i = 0; i < x->rank; i++) {
		int64_t d = x->dims[i];
		int64_t *dims = red[i] ? r->rdims : r->kdims, *str = red[i] ? r->rstr : r->kstr;
		int *cnt = red[i] ? &r->nr : &r->nk;

		*(red[i] ? &r->count : &r->nout) *= d;
		if (d == 1)
			continue;
		/* Merges with the previous group when it is of the same kind
		 * and adjacent in memory. */
		if (last == red[i] && str[*cnt - 1] == st[i] * d) {
			dims[*cnt - 1] *= d;
			str[*cnt - 1] = st[i];
			continue;
		}
		if (*cnt == CUK_MAX_DIMS)
			return -1;
		dims[*cnt] = d;
		str[(*cnt)++] = st[i];
		last = red[i];
	}
	return 0;
}

static int reduce_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	int red[EP_MAX_RANK] = {0}, keep = proto_attr_int(c->node->proto, "keepdims", 1) != 0, r = 0, rc;
	int64_t od[EP_MAX_RANK];
	cuk_reduce p = {0};

	if (!cu_is_float(x->dtype))
		return cu_fail(c, EP_E_INVALID, "X is not float");
	if (reduced_dims(c, x, red, &rc))
		return cu_out_alias(c, 0, x, x->rank, x->dims);
	if (rc)
		return rc;
	for (int i = 0; i < x->rank; i++)
		if (!red[i] || keep)
			od[r++] = red[i] ? 1 : x->dims[i];
	y = cu_out(c, 0, x->dtype, r, od);
	if (!y)
		return c->status;
	if (group_dims(x, red, &p))
		return cu_fail(c, EP_E_UNSUPPORTED, "dims fold to more than %d groups", CUK_MAX_DIMS);
	/* An empty reduction gives sum 0, mean NaN (0 / 0), max -inf, min inf. */
	return cu_check(c, cuk_reduce_run(c->stream, x->dtype,
					  red_op(c->node->proto->op_type), x->dev, y->dev, &p),
			"reduce kernel");
}

const cu_op cu_ops_reduce[] = {
	{"ReduceSum", 1, 22, reduce_supports, NULL, reduce_run, NULL},
	{"ReduceMean", 1, 22, reduce_supports, NULL, reduce_run, NULL},
	{"ReduceMax", 1, 22, reduce_supports, NULL, reduce_run, NULL},
	{"ReduceMin", 1, 22, reduce_supports, NULL, reduce_run, NULL},
	{0},
};
