/*
 * qconv: ONNX ConvInteger (opset 10) and QLinearConv (opsets 10 and 21) on
 * uint8/int8, 1-D to 3-D, with groups, pads, strides, dilations and
 * auto_pad (window.c's geometry, as Conv).  Input and weights are centred on
 * their zero points into int32 copies, so padding contributes zero (as
 * padding with the input's zero point does); each (image, group) is an
 * int32 im2col and one nn_igemm.  The weight zero point and scale are per
 * tensor or per output channel.  QLinearConv adds the int32 bias and
 * requantizes with x_scale * w_scale[m] / y_scale.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_ops.h"

typedef struct qconv_state {
	cpu_window win;
	int64_t group;
} qconv_state;

/* Where a quantized conv finds its inputs: ConvInteger has x, w, x_zp,
 * w_zp; QLinearConv x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B. */
typedef struct qconv_io {
	int x, xz, w, wz;
} qconv_io;

static const qconv_io io_integer = {0, 2, 1, 3}, io_qlinear = {0, 2, 3, 5};

/* Sizes of one run; y receives int32 accumulators [N, M, out...]. */
typedef struct qconv_run {
	cpu_geom g;
	int64_t N, G, Cg, Mg, ksz, isz, osz;
	const int32_t *x, *w;
	int32_t *y, *col;
} qconv_run;

static int qconv_prepare(cpu_node *node, char *err, size_t n)
{
	qconv_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	st->win.ceil_mode = 0;
	st->group = cpu_attr_int(node->proto, "group", 1);
	if (!rc && (st->group < 1 || st->group > INT32_MAX)) {
		snprintf(err, n, "group must be >= 1 (got %lld)", (long long)st->group);
		rc = CPU_E_INVALID;
	}
	if (rc) {
		free(st);
		return rc;
	}
	node->state = st;
	return 0;
}

static void qconv_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* One im2col row: kernel tap (kd, kh, kw) of channel plane x at every
 * output position, zero where the window lies in the padding. */
static void im2col_tap(int32_t *dst, const int32_t *x, const cpu_geom *g, int64_t kd,
		       int64_t kh, int64_t kw)
{
	for (int64_t od = 0; od < g->out[0]; od++) {
		int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
		for (int64_t oh = 0; oh < g->out[1]; oh++, dst += g->out[2]) {
			int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
			const int32_t *src;
			if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
				memset(dst, 0, (size_t)g->out[2] * sizeof(int32_t));
				continue;
			}
			src = x + (id * g->in[1] + ih) * g->in[2];
			for (int64_t ow = 0; ow < g->out[2]; ow++) {
				int64_t iw = ow * g->s[2] - g->pb[2] + kw * g->d[2];
				dst[ow] = iw >= 0 && iw < g->in[2] ? src[iw] : 0;
			}
		}
	}
}

/* col[(c, kd, kh, kw), (od, oh, ow)] for the C channels at x. */
static void im2col_i32(const int32_t *x, int64_t C, const cpu_geom *g, int32_t *col)
{
	int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];

	for (int64_t c = 0; c < C; c++)
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t kh = 0; kh < g->k[1]; kh++)
				for (int64_t kw = 0; kw < g->k[2]; kw++, col += osz)
					im2col_tap(col, x + c * isz, g, kd, kh, kw);
}

/* Checks shapes and dtypes, resolves the geometry and allocates Y. */
static int qconv_setup(cpu_ctx *ctx, const qconv_io *io, int32_t ydt, qconv_run *r,
		       cpu_tensor **Y)
{
	const qconv_state *st = ctx->node->state;
	const cpu_tensor *X, *W;
	int64_t dims[CPU_MAX_RANK], big[3];
	int rc = 0;

	if (!(X = cpu_require(ctx, io->x, &rc)) || !(W = cpu_require(ctx, io->w, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, io->x, NN_Q8_TYPES)) ||
	    (rc = cpu_check_dtype(ctx, W, io->w, NN_Q8_TYPES)))
		return rc;
	r->G = st->group;
	if (X->rank < 3 || W->rank != X->rank || X->dims[1] % r->G || W->dims[0] % r->G ||
	    W->dims[1] != X->dims[1] / r->G)
		return cpu_fail(ctx, CPU_E_INVALID, "x (rank %d, %lld channels) and w (rank %d, "
				"[%lld,%lld,...]) do not match with group %lld", X->rank,
				(long long)X->dims[1], W->rank, (long long)W->dims[0],
				(long long)W->dims[1], (long long)r->G);
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, W->dims + 2, &r->g, ctx->err,
			     ctx->errlen);
	if (rc)
		return rc;
	r->N = X->dims[0];
	r->Cg = W->dims[1];
	r->Mg = W->dims[0] / r->G;
	r->ksz = r->Cg * r->g.k[0] * r->g.k[1] * r->g.k[2];
	r->isz = r->g.in[0] * r->g.in[1] * r->g.in[2];
	r->osz = r->g.out[0] * r->g.out[1] * r->g.out[2];
	dims[0] = r->N;
	dims[1] = W->dims[0];
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = r->g.out[3 - (X->rank - 2) + i];
	big[0] = r->ksz, big[1] = r->osz, big[2] = 4;
	if (cpu_shape_numel(3, big) < 0 || cpu_shape_numel(3, big) > ((int64_t)1 << 40))
		return cpu_fail(ctx, CPU_E_NOMEM, "im2col buffer too large");
	if (!(*Y = cpu_output(ctx, 0, ydt, X->rank, dims)))
		return CPU_E_NOMEM;
	return 0;
}

/* Centres x and w, then accumulates every (image, group) into r->y. */
static int qconv_accumulate(cpu_ctx *ctx, const qconv_io *io, qconv_run *r)
{
	const cpu_tensor *X = cpu_input(ctx, io->x), *W = cpu_input(ctx, io->w);
	const int32_t *zx, *zw;
	int64_t nx, nw, M = r->Mg * r->G;
	int rc;

	if ((rc = nn_load_zp(ctx, cpu_input(ctx, io->xz), io->xz, X->dtype, &zx, &nx)) ||
	    (rc = nn_load_zp(ctx, cpu_input(ctx, io->wz), io->wz, W->dtype, &zw, &nw)))
		return rc;
	if (nx != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "x's zero point must be a scalar");
	if (nw != 1 && nw != M)
		return cpu_fail(ctx, CPU_E_INVALID, "w's zero point has %lld values (1 or %lld)",
				(long long)nw, (long long)M);
	if (!(r->x = nn_centered(ctx, X, zx, 1, 1)) ||
	    !(r->w = nn_centered(ctx, W, zw, nw, r->ksz ? r->ksz : 1)) ||
	    !(r->col = cpu_scratch(ctx, (size_t)(r->ksz * r->osz + 1) * sizeof(int32_t))))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < r->N; b++)
		for (int64_t grp = 0; grp < r->G; grp++) {
			im2col_i32(r->x + (b * r->G + grp) * r->Cg * r->isz, r->Cg, &r->g, r->col);
			nn_igemm(r->Mg, r->osz, r->ksz, r->w + grp * r->Mg * r->ksz, r->ksz, r->col,
				 r->osz, r->y + (b * r->G + grp) * r->Mg * r->osz, r->osz);
		}
	return 0;
}

static int ci_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, NN_Q8_TYPES, why, n))
			return 0;
	return 1;
}

static int ci_compute(cpu_ctx *ctx)
{
	qconv_run r;
	cpu_tensor *Y = NULL;
	int rc;

	if ((rc = qconv_setup(ctx, &io_integer, CPU_INT32, &r, &Y)))
		return rc;
	r.y = Y->data;
	return qconv_accumulate(ctx, &io_integer, &r);
}

static int qlc_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 8; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i == 1 || i == 4 || i == 6 ? CPU_TYPES_F32 :
					NN_Q8_TYPES, why, n))
			return 0;
	return cpu_supports_dtype(dt, n_in, 8, CPU_BIT(CPU_INT32), why, n);
}

/* y = saturate(round((acc + B[m]) * x_scale * w_scale[m] / y_scale) + y_zp) */
static int qlc_compute(cpu_ctx *ctx)
{
	const cpu_tensor *yz = cpu_input(ctx, 7), *B = cpu_input(ctx, 8);
	const float *xs, *ws, *ys;
	const int32_t *zy;
	int64_t nxs, nws, nys, nzy, M;
	int32_t odt = yz ? yz->dtype : CPU_UINT8;
	qconv_run r;
	cpu_tensor *Y = NULL;
	int rc;

	if (yz && (rc = cpu_check_dtype(ctx, yz, 7, NN_Q8_TYPES)))
		return rc;
	if ((rc = qconv_setup(ctx, &io_qlinear, odt, &r, &Y)) ||
	    (rc = nn_load_scale(ctx, 1, &xs, &nxs)) || (rc = nn_load_scale(ctx, 4, &ws, &nws)) ||
	    (rc = nn_load_scale(ctx, 6, &ys, &nys)) || (rc = nn_load_zp(ctx, yz, 7, odt, &zy, &nzy)))
		return rc;
	M = r.Mg * r.G;
	if (nxs != 1 || nys != 1 || nzy != 1 || (nws != 1 && nws != M))
		return cpu_fail(ctx, CPU_E_INVALID, "x_scale, y_scale and y_zero_point must be "
				"scalars and w_scale a scalar or [%lld]", (long long)M);
	if (B && (B->dtype != CPU_INT32 || B->rank != 1 || B->dims[0] != M))
		return cpu_fail(ctx, CPU_E_INVALID, "B must be int32 [%lld]", (long long)M);
	if (!(r.y = cpu_scratch(ctx, (size_t)(cpu_numel(Y) + 1) * sizeof(int32_t))))
		return CPU_E_NOMEM;
	if ((rc = qconv_accumulate(ctx, &io_qlinear, &r)))
		return rc;
	for (int64_t b = 0, e = 0; b < r.N; b++)
		for (int64_t m = 0; m < M; m++) {
			float mult = xs[0] * ws[nws > 1 ? m : 0] / ys[0];
			int32_t bias = B ? ((const int32_t *)B->data)[m] : 0;
			for (int64_t j = 0; j < r.osz; j++, e++)
				nn_requant(odt, Y->data, e, (int32_t)((uint32_t)r.y[e] + (uint32_t)bias),
					   mult, zy[0]);
		}
	return 0;
}

const cpu_op cpu_op_convinteger = {
	"ConvInteger", "", 10, CPU_OPSET_MAX, ci_supports, qconv_prepare, ci_compute,
	qconv_release,
};
const cpu_op cpu_op_qlinearconv = {
	"QLinearConv", "", 10, CPU_OPSET_MAX, qlc_supports, qconv_prepare, qlc_compute,
	qconv_release,
};
