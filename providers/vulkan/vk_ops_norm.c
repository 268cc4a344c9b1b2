/*
 * vk_ops_norm: BatchNormalization (inference mode; shaders/batchnorm.comp),
 * Softmax and LogSoftmax (opset < 13: over the flattened dims from axis on;
 * 13 and later: over one axis; shaders/softmax.comp) and
 * LayerNormalization with its optional Mean and InvStdDev outputs
 * (shaders/layernorm.comp).
 */
#include <stdio.h>
#include <string.h>

#include "ep_ops.h"
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
static int emit_rows(vk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
		     const void *push, size_t bytes, int64_t rows)
{
	int64_t gx = rows < 65535 ? rows : 65535;

	if (!rows)
		return 0;
	return vk_emit(c, pipe, bufs, n_bufs, writes, push, bytes, (uint32_t)gx,
		       (uint32_t)((rows + gx - 1) / gx), 1);
}

/* ---- BatchNormalization --------------------------------------------------- */

static int bn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (!ep_batchnorm_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int bn_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y, *prm[4];
	bn_push p = {.eps = proto_attr_float(c->node->proto, "epsilon", 1e-5f)};
	uint32_t gy;

	if (!x || x->dtype != vk_node_dtype(c) || x->rank < 2)
		return vk_fail(c, EP_E_INVALID, "X must be float32 of rank >= 2");
	for (int i = 0; i < 4; i++) {
		prm[i] = vk_in(c, i + 1);
		if (!prm[i] || prm[i]->dtype != vk_node_dtype(c) || prm[i]->numel != x->dims[1])
			return vk_fail(c, EP_E_INVALID, "input %d must hold %lld floats", i + 1,
				       (long long)x->dims[1]);
	}
	y = vk_out(c, 0, x->rank, x->dims);
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

static int softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			    char *why, size_t n)
{
	(void)opset;
	if (!ep_softmax_node_ok(p, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int softmax_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *y;
	int old = c->node->opset < 13;
	int a = x ? onnx_axis(proto_attr_int(c->node->proto, "axis", old ? 1 : -1), x->rank) : -1;
	softmax_push p = {.log_ = c->node->proto->op_type[0] == 'L'};
	int64_t outer = 1, inner = 1, len;

	if (x && x->rank == 0 && x->dtype == vk_node_dtype(c))
		a = 0;
	if (!x || x->dtype != vk_node_dtype(c) || a < 0)
		return vk_fail(c, EP_E_INVALID, "X must be float32 with axis in range");
	for (int i = 0; i < a; i++)
		outer *= x->dims[i];
	for (int i = a + 1; i < x->rank; i++)
		inner *= x->dims[i];
	len = x->rank ? x->dims[a] : 1;
	if (old) {
		len *= inner;
		inner = 1;
	}
	y = vk_out(c, 0, x->rank, x->dims);
	if (!y)
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

static int ln_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (!ep_layernorm_node_ok(p, n_in > 0 ? dt[0] : 0, why, n))
		return 0;
	return vk_need_float(p, dt, n_in, 0, -1, why, n);
}

static int suffix_of(const vk_val *s, const vk_val *x, int a)
{
	return ep_suffix_broadcasts(s->rank, s->dims, x->rank, x->dims, a);
}

static int ln_stats(vk_ctx *c, const vk_val *x, int a, vk_buf *mean, vk_buf *inv, uint32_t *flags)
{
	int64_t dims[EP_MAX_RANK];

	for (int i = 0; i < x->rank; i++)
		dims[i] = i < a ? x->dims[i] : 1;
	for (int k = 1; k <= 2; k++) {
		const vk_val *o;

		if (k >= c->node->n_out || c->node->out[k] < 0)
			continue;
		o = vk_out(c, k, x->rank, dims);
		if (!o)
			return c->status;
		*(k == 1 ? mean : inv) = o->dev;
		*flags |= k == 1 ? 2u : 4u;
	}
	return 0;
}

static int ln_plan(vk_ctx *c)
{
	const vk_val *x = vk_in(c, 0), *s = vk_in(c, 1), *b = vk_in(c, 2), *y;
	int a = x ? onnx_axis(proto_attr_int(c->node->proto, "axis", -1), x->rank) : -1;
	ln_push p = {.eps = proto_attr_float(c->node->proto, "epsilon", 1e-5f)};
	int64_t rows = 1;
	vk_buf mean, inv;
	int rc;

	if (!x || !s || x->dtype != vk_node_dtype(c) || a < 0)
		return vk_fail(c, EP_E_INVALID, "X must be float32 with axis in range");
	if (!suffix_of(s, x, a) || (b && !suffix_of(b, x, a)) || !s->numel || (b && !b->numel))
		return vk_fail(c, EP_E_UNSUPPORTED, "Scale or B does not broadcast as a suffix");
	for (int i = 0; i < a; i++)
		rows *= x->dims[i];
	y = vk_out(c, 0, x->rank, x->dims);
	if (!y)
		return c->status;
	mean = inv = y->dev;
	rc = ln_stats(c, x, a, &mean, &inv, &p.flags);
	if (rc)
		return rc;
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

const vk_op vk_ops_norm[] = {
	{"BatchNormalization", 7, 22, bn_supports, NULL, bn_plan, VKX_PIPE(VKP_BATCHNORM), NULL},
	{"Softmax", 1, 22, softmax_supports, NULL, softmax_plan, VKX_PIPE(VKP_SOFTMAX), NULL},
	{"LogSoftmax", 1, 22, softmax_supports, NULL, softmax_plan, VKX_PIPE(VKP_SOFTMAX), NULL},
	{"LayerNormalization", 17, 22, ln_supports, NULL, ln_plan, VKX_PIPE(VKP_LAYERNORM), NULL},
	{0},
};
