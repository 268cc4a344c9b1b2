/*
 * cuda_ops_norm: BatchNormalization (inference mode), Softmax and
 * LogSoftmax (opset < 13: over the flattened dims from axis on; 13 and
 * later: over one axis) and LayerNormalization with its optional Mean and
 * InvStdDev outputs (k_norm.cu), float32 and float16 (LayerNormalization in
 * float16 with the Y output only).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"
#include "ep_ops.h"

static int bn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (!ep_batchnorm_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int bn_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y, *prm[4];
	int64_t inner;

	if (!cu_is_float(x->dtype) || x->rank < 2)
		return cu_fail(c, EP_E_INVALID, "X must be float of rank >= 2");
	for (int i = 0; i < 4; i++) {
		prm[i] = cu_in(c, i + 1);
		if (!prm[i] || prm[i]->dtype != x->dtype || prm[i]->numel != x->dims[1])
			return cu_fail(c, EP_E_INVALID, "input %d must hold %lld values of X's dtype",
				       i + 1, (long long)x->dims[1]);
	}
	y = cu_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	if (!y->numel)
		return 0;
	inner = x->numel / (x->dims[0] * x->dims[1]);
	return cu_check(c, cuk_batchnorm(c->stream, x->dtype, x->dev, prm[0]->dev, prm[1]->dev,
					 prm[2]->dev, prm[3]->dev, y->dev, x->dims[0], x->dims[1],
					 inner, proto_attr_float(c->node->proto, "epsilon", 1e-5f)),
			"batchnorm kernel");
}

static int softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			    char *why, size_t n)
{
	(void)opset;
	if (!ep_softmax_node_ok(p, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int softmax_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *y;
	int old = c->node->opset < 13;
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", old ? 1 : -1), x->rank);
	int64_t outer = 1, inner = 1, len;

	if (x->rank == 0)
		a = 0;
	if (!cu_is_float(x->dtype) || a < 0)
		return cu_fail(c, EP_E_INVALID, "X must be float with axis in range");
	for (int i = 0; i < a; i++)
		outer *= x->dims[i];
	for (int i = a + 1; i < x->rank; i++)
		inner *= x->dims[i];
	len = x->rank ? x->dims[a] : 1;
	if (old) {
		len *= inner;
		inner = 1;
	}
	y = cu_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	return cu_check(c, cuk_softmax(c->stream, x->dtype, x->dev, y->dev, outer, len, inner,
				       c->node->proto->op_type[0] == 'L'), "softmax kernel");
}

static int ln_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (!ep_layernorm_node_ok(p, n_in > 0 ? dt[0] : 0, why, n))
		return 0;
	return cu_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

static int suffix_of(const cu_val *s, const cu_val *x, int a)
{
	return ep_suffix_broadcasts(s->rank, s->dims, x->rank, x->dims, a);
}

/* The optional Mean (1) and InvStdDev (2) outputs: float32, [rows..., 1...]. */
static int ln_stats(cu_ctx *c, const cu_val *x, int a, float **mean, float **inv)
{
	int64_t dims[EP_MAX_RANK];

	for (int i = 0; i < x->rank; i++)
		dims[i] = i < a ? x->dims[i] : 1;
	for (int k = 1; k <= 2; k++) {
		const cu_val *o;

		if (k >= c->node->n_out || c->node->out[k] < 0)
			continue;
		o = cu_out(c, k, CU_FLOAT, x->rank, dims);
		if (!o)
			return c->status;
		*(k == 1 ? mean : inv) = o->dev;
	}
	return 0;
}

static int ln_run(cu_ctx *c)
{
	const cu_val *x = cu_in(c, 0), *s = cu_in(c, 1), *b = cu_in(c, 2), *y;
	int a = onnx_axis(proto_attr_int(c->node->proto, "axis", -1), x->rank);
	int64_t rows = 1;
	float *mean = NULL, *inv = NULL;
	int rc;

	if (!s || !cu_is_float(x->dtype) || s->dtype != x->dtype || (b && b->dtype != x->dtype) ||
	    a < 0)
		return cu_fail(c, EP_E_INVALID, "X, Scale, B must be float of one dtype, axis in range");
	if (!suffix_of(s, x, a) || (b && !suffix_of(b, x, a)) || !s->numel || (b && !b->numel))
		return cu_fail(c, EP_E_UNSUPPORTED, "Scale or B does not broadcast as a suffix");
	for (int i = 0; i < a; i++)
		rows *= x->dims[i];
	y = cu_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	rc = ln_stats(c, x, a, &mean, &inv);
	if (rc)
		return rc;
	return cu_check(c, cuk_layernorm(c->stream, x->dtype, x->dev, s->dev, b ? b->dev : NULL,
					 y->dev, mean, inv, rows, rows ? x->numel / rows : 0,
					 s->numel, b ? b->numel : 1,
					 proto_attr_float(c->node->proto, "epsilon", 1e-5f)),
			"layernorm kernel");
}

const cu_op cu_ops_norm[] = {
	{"BatchNormalization", 7, 22, bn_supports, NULL, bn_run, NULL},
	{"Softmax", 1, 22, softmax_supports, NULL, softmax_run, NULL},
	{"LogSoftmax", 1, 22, softmax_supports, NULL, softmax_run, NULL},
	{"LayerNormalization", 17, 22, ln_supports, NULL, ln_run, NULL},
	{0},
};
