/*
 * vk_ops_norm: BatchNormalization (inference mode; shaders/batchnorm.comp),
 * Softmax and LogSoftmax (opset < 13: over the flattened dims from axis on;
 * 13 and later: over one axis; shaders/softmax.comp) and
 * LayerNormalization with its optional Mean and InvStdDev outputs
 * (shaders/layernorm.comp).
 */
#include <stdio.h>
#include <string.h>

#include "dk_ops.h"
#include "vk_ops.h"

typedef struct bn_push {
	uint32_t planes, C, inner;
	float eps;
} bn_push;

typedef struct softmax_push {
	uint32_t rows, n, inner, log_;
} softmax_push;

typedef struct ln_push {
	uint32_t rows, n, sn, bn;
	float eps;
	uint32_t flags;
} ln_push;

/* A launch of one 64-wide workgroup per row, rows spread over x and y. */
static int emit_rows(dk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
		     const void *push, size_t bytes, int64_t rows)
{
	int64_t gx = rows < 65535 ? rows : 65535;

	if (!rows)
		return 0;
	return vk_emit(c, pipe, bufs, n_bufs, writes, push, bytes, (uint32_t)gx,
		       (uint32_t)((rows + gx - 1) / gx), 1);
}

/* ---- BatchNormalization --------------------------------------------------- */

static int bn_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y, *prm[4];
	bn_push p = {.eps = proto_attr_float(c->node->proto, "epsilon", 1e-5f)};
	uint32_t gy;

	if (!x || x->dtype != vk_node_dtype(c) || x->rank < 2)
		return dk_fail(c, EP_E_INVALID, "X must be float32 of rank >= 2");
	for (int i = 0; i < 4; i++) {
		prm[i] = dk_in(c, i + 1);
		if (!prm[i] || prm[i]->dtype != vk_node_dtype(c) || prm[i]->numel != x->dims[1])
			return dk_fail(c, EP_E_INVALID, "input %d must hold %lld floats", i + 1,
				       (long long)x->dims[1]);
	}
	y = dk_out(c, 0, vk_node_dtype(c), x->rank, x->dims);
	if (!y)
		return c->status;
	if (!x->numel)
		return 0;
	p.planes = (uint32_t)(x->dims[0] * x->dims[1]);
	p.C = (uint32_t)x->dims[1];
	p.inner = (uint32_t)(x->numel / p.planes);
	gy = p.planes < 65535 ? p.planes : 65535;
	return vk_emit(c, VKP_BATCHNORM,
		       (vk_buf[]){x->dev, prm[0]->dev, prm[1]->dev, prm[2]->dev, prm[3]->dev, y->dev},
		       6, 32u, &p, sizeof(p), (p.inner + 63) / 64, gy, (p.planes + gy - 1) / gy);
}

/* ---- Softmax, LogSoftmax -------------------------------------------------- */

static int softmax_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	softmax_push p = {.log_ = c->node->proto->op_type[0] == 'L'};
	int64_t outer, inner, len;

	if (dk_softmax_out(c, &outer, &len, &inner, &y))
		return c->status;
	p.rows = (uint32_t)(outer * inner);
	p.n = (uint32_t)len;
	p.inner = (uint32_t)inner;
	if (!x->numel)
		return 0;
	return emit_rows(c, VKP_SOFTMAX, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			 outer * inner);
}

/* ---- LayerNormalization --------------------------------------------------- */

/* Absent Mean / InvStdDev outputs bind Y's memory, flagged unused. */
static int ln_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *s = dk_in(c, 1), *b = dk_in(c, 2), *y;
	ln_push p = {.eps = proto_attr_float(c->node->proto, "epsilon", 1e-5f)};
	int64_t rows;
	vk_buf mean, inv;

	if (dk_layernorm_out(c, &rows, &mean, &inv, &y))
		return c->status;
	p.flags = (mean.ptr ? 2u : 0u) | (inv.ptr ? 4u : 0u);
	if (!mean.ptr)
		mean = y->dev;
	if (!inv.ptr)
		inv = y->dev;
	p.rows = (uint32_t)rows;
	p.n = (uint32_t)(rows ? x->numel / rows : 0);
	p.sn = (uint32_t)s->numel;
	p.bn = b ? (uint32_t)b->numel : 1;
	p.flags |= b ? 1u : 0u;
	if (!x->numel)
		return 0;
	return emit_rows(c, VKP_LAYERNORM,
			 (vk_buf[]){x->dev, s->dev, b ? b->dev : s->dev, y->dev, mean, inv}, 6,
			 8u | 16u | 32u, &p, sizeof(p), rows);
}

const dk_op vk_ops_norm[] = {
	{"BatchNormalization", 7, 22, dk_batchnorm_supports, NULL, bn_plan, NULL,
	 VKX_PIPE(VKP_BATCHNORM), NULL, NULL},
	{"Softmax", 1, 22, dk_softmax_supports, NULL, softmax_plan, NULL, VKX_PIPE(VKP_SOFTMAX),
	 NULL, NULL},
	{"LogSoftmax", 1, 22, dk_softmax_supports, NULL, softmax_plan, NULL, VKX_PIPE(VKP_SOFTMAX),
	 NULL, NULL},
	{"LayerNormalization", 17, 22, dk_layernorm_supports, NULL, ln_plan, NULL,
	 VKX_PIPE(VKP_LAYERNORM), NULL, NULL},
	{0},
};
