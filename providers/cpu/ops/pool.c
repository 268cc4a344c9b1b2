/*
 * pool: ONNX MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool for
 * float32.  MaxPool and AveragePool handle 1-D to 3-D windows with pads,
 * strides, dilations, auto_pad and ceil_mode; MaxPool's optional Indices
 * output honours storage_order.  AveragePool with count_include_pad divides
 * by the window positions inside the padded input (as PyTorch and ONNX
 * Runtime do), so a ceil_mode window hanging past the end padding is not
 * charged for the overhang.  MaxPool also takes int8 and uint8 (opset 12):
 * their values are exact in float, so each (N, C) plane is widened to float,
 * pooled by the float code and narrowed back, which loses nothing.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

typedef struct pool_state {
	cpu_window win;
	int is_max, count_include_pad, storage_order;
} pool_state;

#define POOL_TYPES_I8 (CPU_BIT(CPU_INT8) | CPU_BIT(CPU_UINT8))

static uint32_t pool_types(const Onnx__NodeProto *p, int64_t opset)
{
	if (opset >= 12 && !strcmp(p->op_type, "MaxPool"))
		return CPU_TYPES_F32 | POOL_TYPES_I8;
	return CPU_TYPES_F32;
}

static int pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			 int n_in, char *why, size_t n)
{
	return cpu_supports_dtype(dt, n_in, 0, pool_types(p, opset), why, n);
}

static int pool_prepare(cpu_node *node, char *err, size_t n)
{
	pool_state *st = calloc(1, sizeof(*st));
	int rc;
	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	if (rc) {
		free(st);
		return rc;
	}
	st->is_max = node->proto->op_type[0] == 'M';
	st->count_include_pad = cpu_attr_int(node->proto, "count_include_pad", 0) != 0;
	st->storage_order = cpu_attr_int(node->proto, "storage_order", 0) != 0;
	node->state = st;
	return 0;
}

static void pool_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* [*a, *b): the kernel taps kk in [0, k) with lo <= start + kk*d < hi. */
static void taps(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *a,
		 int64_t *b)
{
	*a = start >= lo ? 0 : (lo - start + d - 1) / d;
	*b = start >= hi ? 0 : (hi - start + d - 1) / d;
	if (*a > k)
		*a = k;
	if (*b > k)
		*b = k;
	if (*b < *a)
		*b = *a;
}

/* One output element at window start s[3] of the (N, C) plane x. */
static float pool_window(const pool_state *st, const cpu_geom *g, const float *x,
			 const int64_t *s, int64_t *arg)
{
	int64_t a[3], b[3], cnt = 1, best_i = -1;
	float best = -FLT_MAX;
	double sum = 0.0;
	for (int i = 0; i < 3; i++) {
		if (st->count_include_pad && !st->is_max) {
			taps(s[i], g->k[i], g->d[i], -g->pb[i], g->in[i] + g->pe[i], &a[i], &b[i]);
			cnt *= b[i] - a[i];
		}
		taps(s[i], g->k[i], g->d[i], 0, g->in[i], &a[i], &b[i]);
		if (!st->count_include_pad || st->is_max)
			cnt *= b[i] - a[i];
	}
	for (int64_t kd = a[0]; kd < b[0]; kd++)
		for (int64_t kh = a[1]; kh < b[1]; kh++)
			for (int64_t kw = a[2]; kw < b[2]; kw++) {
				int64_t id = s[0] + kd * g->d[0], ih = s[1] + kh * g->d[1];
				int64_t iw = s[2] + kw * g->d[2];
				float v = x[(id * g->in[1] + ih) * g->in[2] + iw];
				if (!st->is_max) {
					sum += v;
				} else if (v > best || best_i < 0) {
					best = v;
					best_i = st->storage_order
						 ? id + (ih + iw * g->in[1]) * g->in[0]
						 : (id * g->in[1] + ih) * g->in[2] + iw;
				}
			}
	if (st->is_max) {
		*arg = best_i;
		return best;
	}
	return cnt ? (float)(sum / (double)cnt) : 0.0f;
}

static void pool_plane(const pool_state *st, const cpu_geom *g, const float *x, float *y,
		       int64_t *ind, int64_t ind_base)
{
	int64_t s[3], arg = -1;
	for (int64_t od = 0; od < g->out[0]; od++)
		for (int64_t oh = 0; oh < g->out[1]; oh++)
			for (int64_t ow = 0; ow < g->out[2]; ow++) {
				s[0] = od * g->s[0] - g->pb[0];
				s[1] = oh * g->s[1] - g->pb[1];
				s[2] = ow * g->s[2] - g->pb[2];
				*y++ = pool_window(st, g, x, s, &arg);
				if (ind)
					*ind++ = arg < 0 ? -1 : ind_base + arg;
			}
}

/* Pools every (N, C) plane; X and Y of another dtype than float go through
 * float copies of one plane at a time. */
static int pool_planes(cpu_ctx *ctx, const cpu_geom *g, const cpu_tensor *X, cpu_tensor *Y,
		       cpu_tensor *I)
{
	const pool_state *st = ctx->node->state;
	int64_t planes = X->dims[0] * X->dims[1];
	int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
	float *xf = NULL, *yf = NULL;
	int wide = X->dtype != CPU_FLOAT;

	if (wide && (!(xf = cpu_scratch(ctx, (size_t)isz * sizeof(float) + 1)) ||
		     !(yf = cpu_scratch(ctx, (size_t)osz * sizeof(float) + 1))))
		return CPU_E_NOMEM;
	for (int64_t p = 0; p < planes; p++) {
		const float *x = wide ? xf : (const float *)X->data + p * isz;
		float *y = wide ? yf : (float *)Y->data + p * osz;
		for (int64_t i = 0; wide && i < isz; i++)
			xf[i] = (float)cpu_get_f64(X->dtype, X->data, p * isz + i);
		pool_plane(st, g, x, y, I ? (int64_t *)I->data + p * osz : NULL, p * isz);
		for (int64_t i = 0; wide && i < osz; i++)
			cpu_set_f64(Y->dtype, Y->data, p * osz + i, yf[i]);
	}
	return 0;
}

static int pool_compute(cpu_ctx *ctx)
{
	const pool_state *st = ctx->node->state;
	const cpu_tensor *X;
	cpu_tensor *Y, *I = NULL;
	int64_t dims[CPU_MAX_RANK];
	cpu_geom g;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	rc = cpu_check_dtype(ctx, X, 0, pool_types(ctx->node->proto, ctx->node->opset));
	if (rc != 0)
		return rc;
	if (X->rank < 3)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need N, C and spatial dims)",
				X->rank);
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, NULL, &g, ctx->err, ctx->errlen);
	if (rc)
		return rc;
	dims[0] = X->dims[0];
	dims[1] = X->dims[1];
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = g.out[3 - (X->rank - 2) + i];
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	if (st->is_max && ctx->n_out > 1 && !(I = cpu_output(ctx, 1, CPU_INT64, X->rank, dims)))
		return CPU_E_NOMEM;
	return pool_planes(ctx, &g, X, Y, I);
}

static int global_compute(cpu_ctx *ctx)
{
	int is_max = ctx->node->proto->op_type[6] == 'M';
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t dims[CPU_MAX_RANK], planes, sz = 1;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) != 0)
		return rc;
	if (X->rank < 2)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need N, C, ...)", X->rank);
	for (int i = 0; i < X->rank; i++) {
		dims[i] = i < 2 ? X->dims[i] : 1;
		if (i >= 2)
			sz *= X->dims[i];
	}
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, dims)))
		return CPU_E_NOMEM;
	planes = X->dims[0] * X->dims[1];
	for (int64_t p = 0; p < planes; p++) {
		const float *x = (const float *)X->data + p * sz;
		double acc = 0.0;
		float m = -FLT_MAX;
		for (int64_t i = 0; i < sz; i++) {
			acc += x[i];
			m = x[i] > m ? x[i] : m;
		}
		((float *)Y->data)[p] = is_max ? m : (sz ? (float)(acc / (double)sz) : 0.0f);
	}
	return 0;
}

const cpu_op cpu_op_maxpool = {
	"MaxPool", "", 1, CPU_OPSET_MAX, pool_supports, pool_prepare, pool_compute, pool_release,
};
const cpu_op cpu_op_averagepool = {
	"AveragePool", "", 1, CPU_OPSET_MAX, pool_supports, pool_prepare, pool_compute,
	pool_release,
};
const cpu_op cpu_op_globalaveragepool = {
	"GlobalAveragePool", "", 1, CPU_OPSET_MAX, pool_supports, NULL, global_compute, NULL,
};
const cpu_op cpu_op_globalmaxpool = {
	"GlobalMaxPool", "", 1, CPU_OPSET_MAX, pool_supports, NULL, global_compute, NULL,
};
