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
#include "dk_ops.h"

static int bn_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y, *prm[4];
	int64_t inner;

	if (!dk_dev_dtype(x->dtype) || x->rank < 2)
		return dk_fail(c, EP_E_INVALID, "X must be float of rank >= 2");
	for (int i = 0; i < 4; i++) {
		prm[i] = dk_in(c, i + 1);
		if (!prm[i] || prm[i]->dtype != x->dtype || prm[i]->numel != x->dims[1])
			return dk_fail(c, EP_E_INVALID, "input %d must hold %lld values of X's dtype",
				       i + 1, (long long)x->dims[1]);
	}
	y = dk_out(c, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return c->status;
	if (!y->numel)
		return 0;
	inner = x->numel / (x->dims[0] * x->dims[1]);
	return cu_check(c, cuk_batchnorm(c->stream, x->dtype, x->dev.ptr, prm[0]->dev.ptr, prm[1]->dev.ptr,
					 prm[2]->dev.ptr, prm[3]->dev.ptr, y->dev.ptr, x->dims[0], x->dims[1],
					 inner, proto_attr_float(c->node->proto, "epsilon", 1e-5f)),
			"batchnorm kernel");
}

static int softmax_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	int64_t outer, inner, len;

	if (dk_softmax_out(c, &outer, &len, &inner, &y))
		return c->status;
	return cu_check(c, cuk_softmax(c->stream, x->dtype, x->dev.ptr, y->dev.ptr, outer, len, inner,
				       c->node->proto->op_type[0] == 'L'), "softmax kernel");
}

static int ln_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *s = dk_in(c, 1), *b = dk_in(c, 2), *y;
	int64_t rows;
	dk_buf mean, inv;

	if (dk_layernorm_out(c, &rows, &mean, &inv, &y))
		return c->status;
	return cu_check(c, cuk_layernorm(c->stream, x->dtype, x->dev.ptr, s->dev.ptr, b ? b->dev.ptr : NULL,
					 y->dev.ptr, mean.ptr, inv.ptr, rows, rows ? x->numel / rows : 0,
					 s->numel, b ? b->numel : 1,
					 proto_attr_float(c->node->proto, "epsilon", 1e-5f)),
			"layernorm kernel");
}

const dk_op cu_ops_norm[] = {
	{"BatchNormalization", 7, 22, dk_batchnorm_supports, NULL, bn_run, NULL, 0, NULL, NULL},
	{"Softmax", 1, 22, dk_softmax_supports, NULL, softmax_run, NULL, 0, NULL, NULL},
	{"LogSoftmax", 1, 22, dk_softmax_supports, NULL, softmax_run, NULL, 0, NULL, NULL},
	{"LayerNormalization", 17, 22, dk_layernorm_supports, NULL, ln_run, NULL, 0, NULL, NULL},
	{0},
};
