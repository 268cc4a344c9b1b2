/*
 * conv: ONNX Conv (all opsets) for float32, 1-D to 3-D, with groups
 * (depthwise included), pads, strides, dilations, auto_pad and an optional
 * bias.  Each (image, group) is an im2col into scratch followed by one
 * cpu_sgemm: Y_g[M/g, out] = W_g[M/g, C/g*k] x col[C/g*k, out].  A 1x1
 * stride-1 unpadded convolution multiplies the input directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

typedef struct conv_state {
	cpu_window win;
	int64_t group;
} conv_state;

static int conv_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n);
}

static int conv_prepare(cpu_node *node, char *err, size_t n)
{
	conv_state *st = calloc(1, sizeof(*st));
	int rc;
	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	st->group = cpu_attr_int(node->proto, "group", 1);
	if (!rc && st->group < 1) {
		snprintf(err, n, "group must be >= 1 (got %lld)", (long long)st->group);
		rc = CPU_E_INVALID;
	}
	st->win.ceil_mode = 0;   /* a pooling attribute, not Conv's */
	if (rc) {
		free(st);
		return rc;
	}
	node->state = st;
	return 0;
}

static void conv_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* One im2col row: the input line ih/id of channel plane x for kernel column
 * kw, all output columns (zeros where the window is in the padding). */
static void im2col_line(float *dst, const float *src, const cpu_geom *g, int64_t kw)
{
	int64_t OW = g->out[2], IW = g->in[2], s = g->s[2];
	int64_t base = kw * g->d[2] - g->pb[2], lo = 0, hi;
	if (base < 0)
		lo = (-base + s - 1) / s;
	hi = IW - base > 0 ? (IW - base + s - 1) / s : 0;
	if (lo > OW)
		lo = OW;
	if (hi > OW)
		hi = OW;
	if (hi < lo)
		hi = lo;
	for (int64_t ow = 0; ow < lo; ow++)
		dst[ow] = 0.0f;
	if (s == 1) {
		if (hi > lo)
			memcpy(dst + lo, src + base + lo, (size_t)(hi - lo) * sizeof(float));
	} else {
		for (int64_t ow = lo; ow < hi; ow++)
			dst[ow] = src[base + ow * s];
	}
	for (int64_t ow = hi; ow < OW; ow++)
		dst[ow] = 0.0f;
}

/* col[(c, kd, kh, kw), (od, oh, ow)] for the C channels at x. */
static void im2col(const float *x, int64_t C, const cpu_geom *g, float *col)
{
	int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
	int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
	int64_t osz = OD * OH * OW;
	float *row = col;
	for (int64_t c = 0; c < C; c++)
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t kh = 0; kh < g->k[1]; kh++)
				for (int64_t kw = 0; kw < g->k[2]; kw++, row += osz)
					for (int64_t od = 0; od < OD; od++) {
						int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
						for (int64_t oh = 0; oh < OH; oh++) {
							int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
							float *dst = row + (od * OH + oh) * OW;
							if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
								memset(dst, 0, (size_t)OW * sizeof(float));
								continue;
							}
							im2col_line(dst, x + ((c * ID + id) * IH + ih) * IW, g, kw);
						}
					}
}

static int conv_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *W,
		      const cpu_tensor *B, int64_t group)
{
	int rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32);
	if (!rc)
		rc = cpu_check_dtype(ctx, W, 1, CPU_TYPES_F32);
	if (!rc && B)
		rc = cpu_check_dtype(ctx, B, 2, CPU_TYPES_F32);
	if (rc)
		return rc;
	if (X->rank < 3 || W->rank != X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d and W rank %d (need equal, >= 3)",
				X->rank, W->rank);
	if (group > X->dims[1] || X->dims[1] % group != 0 || W->dims[1] != X->dims[1] / group ||
	    W->dims[0] % group != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "X has %lld channels, W is [%lld,%lld,...] "
				"with group %lld", (long long)X->dims[1], (long long)W->dims[0],
				(long long)W->dims[1], (long long)group);
	if (B && (B->rank != 1 || B->dims[0] != W->dims[0]))
		return cpu_fail(ctx, CPU_E_INVALID, "bias must be [%lld]", (long long)W->dims[0]);
	return 0;
}

static int conv_compute(cpu_ctx *ctx)
{
	const conv_state *st = ctx->node->state;
	const cpu_tensor *X, *W, *B = cpu_input(ctx, 2);
	int64_t dims[CPU_MAX_RANK], N, M, G = st->group, Cg, Mg, ksz = 1, isz = 1, osz;
	cpu_geom g;
	cpu_tensor *Y;
	float *col = NULL;
	int rc = 0, direct = 1;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(W = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = conv_check(ctx, X, W, B, G)) != 0)
		return rc;
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, W->dims + 2, &g, ctx->err,
			     ctx->errlen);
	if (rc)
		return rc;
	N = X->dims[0];
	M = W->dims[0];
	Cg = W->dims[1];
	Mg = M / G;
	dims[0] = N;
	dims[1] = M;
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = g.out[3 - (X->rank - 2) + i];
	osz = g.out[0] * g.out[1] * g.out[2];
	for (int i = 0; i < 3; i++) {
		ksz *= g.k[i];
		isz *= g.in[i];
		direct &= g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
	}
	ksz *= Cg;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, dims)))
		return CPU_E_NOMEM;
	if (!direct && osz && (uint64_t)ksz > SIZE_MAX / sizeof(float) / 2 / (uint64_t)osz)
		return cpu_fail(ctx, CPU_E_NOMEM, "im2col buffer too large");
	if (!direct && !(col = cpu_scratch(ctx, (size_t)ksz * (size_t)osz * sizeof(float))))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < N; b++)
		for (int64_t grp = 0; grp < G; grp++) {
			const float *x = (const float *)X->data + (b * G + grp) * Cg * isz;
			float *y = (float *)Y->data + (b * M + grp * Mg) * osz;
			const float *w = (const float *)W->data + grp * Mg * ksz;
			if (!direct)
				im2col(x, Cg, &g, col);
			for (int64_t m = 0; B && m < Mg; m++)
				for (int64_t j = 0; j < osz; j++)
					y[m * osz + j] = ((const float *)B->data)[grp * Mg + m];
			cpu_sgemm(0, 0, Mg, osz, ksz, 1.0f, w, ksz, direct ? x : col, osz,
				  B ? 1.0f : 0.0f, y, osz);
		}
	return 0;
}

const cpu_op cpu_op_conv = {
	"Conv", "", 1, CPU_OPSET_MAX, conv_supports, conv_prepare, conv_compute, conv_release,
};
