/*
 * convtranspose: ONNX ConvTranspose (all opsets), float32, 1-D to 3-D, with
 * groups, pads, strides, dilations, output_padding, output_shape and
 * auto_pad.  Per (image, group) one GEMM on the pool forms every kernel
 * tap's contribution, col[(m, k), in] = W_g^T[(m, k), c] x X_g[c, in], and
 * a col2im scatter-adds the taps into Y (bias first), output planes split
 * over the pool.
 *
 * Padding follows the ONNX spec text: with output_shape (or auto_pad SAME,
 * whose output is input * stride) the total padding is split evenly, the
 * odd unit going to the end for SAME_UPPER and to the beginning otherwise.
 * A total below zero (an output larger than the transposed convolution
 * covers) leaves zeros plus bias at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_ops.h"
#include "par.h"
#include "vfloat.h"

typedef struct convt_state {
	cpu_window win;
	int64_t group;
	int n_outpad, n_outshape;
	int64_t outpad[CPU_MAX_RANK], outshape[CPU_MAX_RANK];
} convt_state;

/* Geometry padded to 3 spatial dims (leading dims of size 1). */
typedef struct convt_geom {
	int nsp;
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
} convt_geom;

static int read_list(const Onnx__NodeProto *p, const char *name, int64_t *dst, int *count,
		     int64_t min, char *err, size_t n)
{
	const int64_t *v;
	size_t cnt = cpu_attr_ints(p, name, &v);

	if (cnt > CPU_MAX_RANK) {
		snprintf(err, n, "attribute %s has %zu values", name, cnt);
		return CPU_E_INVALID;
	}
	for (size_t i = 0; i < cnt; i++) {
		if (v[i] < min || v[i] > INT32_MAX) {
			snprintf(err, n, "attribute %s[%zu] = %lld is invalid", name, i, (long long)v[i]);
			return CPU_E_INVALID;
		}
		dst[i] = v[i];
	}
	*count = (int)cnt;
	return 0;
}

static int convt_prepare(cpu_node *node, char *err, size_t n)
{
	convt_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	if (!rc)
		rc = read_list(node->proto, "output_padding", st->outpad, &st->n_outpad, 0, err, n);
	if (!rc)
		rc = read_list(node->proto, "output_shape", st->outshape, &st->n_outshape, 0, err, n);
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

static void convt_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int convt_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, CPU_TYPES_F32, why, n);
}

/* Output size and leading pad of spatial dim i (gi in the padded geometry). */
static int dim_geom(cpu_ctx *ctx, const convt_state *st, int nsp, int i, int gi, convt_geom *g)
{
	const cpu_window *w = &st->win;
	int64_t op = st->n_outpad ? st->outpad[i] : 0;
	int64_t full = g->s[gi] * (g->in[gi] - 1) + op + (g->k[gi] - 1) * g->d[gi] + 1, total;
	int upper = w->auto_pad == CPU_PAD_SAME_UPPER;

	if (st->n_outshape || w->auto_pad == CPU_PAD_SAME_UPPER ||
	    w->auto_pad == CPU_PAD_SAME_LOWER) {
		g->out[gi] = st->n_outshape ? st->outshape[st->n_outshape - nsp + i] :
			     g->in[gi] * g->s[gi];
		total = full - g->out[gi];
		g->pb[gi] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
		return 0;
	}
	g->pb[gi] = 0;
	g->out[gi] = full;
	if (w->auto_pad == CPU_PAD_NOTSET && w->n_pads) {
		g->pb[gi] = w->pads[i];
		g->out[gi] -= w->pads[i] + w->pads[nsp + i];
	}
	if (g->out[gi] < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "output dim %d would be %lld", i,
				(long long)g->out[gi]);
	return 0;
}

static int convt_geometry(cpu_ctx *ctx, const convt_state *st, const cpu_tensor *X,
			  const cpu_tensor *W, convt_geom *g)
{
	const cpu_window *w = &st->win;
	int nsp = X->rank - 2, off = 3 - nsp, rc;

	if (nsp < 1 || nsp > 3)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "%d spatial dims (1 to 3 are supported)", nsp);
	if ((w->n_kernel && w->n_kernel != nsp) || (w->n_strides && w->n_strides != nsp) ||
	    (w->n_dilations && w->n_dilations != nsp) || (w->n_pads && w->n_pads != 2 * nsp) ||
	    (st->n_outpad && st->n_outpad != nsp) ||
	    (st->n_outshape && st->n_outshape != nsp && st->n_outshape != nsp + 2))
		return cpu_fail(ctx, CPU_E_INVALID, "kernel_shape/strides/dilations/pads/"
				"output_padding/output_shape do not match %d spatial dims", nsp);
	memset(g, 0, sizeof(*g));
	g->nsp = nsp;
	for (int gi = 0; gi < 3; gi++) {
		int i = gi - off;
		g->in[gi] = g->out[gi] = g->k[gi] = g->s[gi] = g->d[gi] = 1;
		if (i < 0)
			continue;
		g->in[gi] = X->dims[2 + i];
		g->k[gi] = W->dims[2 + i];
		if (w->n_kernel && w->kernel[i] != g->k[gi])
			return cpu_fail(ctx, CPU_E_INVALID, "kernel_shape[%d] = %lld but W has %lld", i,
					(long long)w->kernel[i], (long long)g->k[gi]);
		if (g->in[gi] > INT32_MAX || g->k[gi] > INT32_MAX)
			return cpu_fail(ctx, CPU_E_INVALID, "spatial dims too large");
		g->s[gi] = w->n_strides ? w->strides[i] : 1;
		g->d[gi] = w->n_dilations ? w->dilations[i] : 1;
		if (g->in[gi] == 0 || g->k[gi] == 0)
			return cpu_fail(ctx, CPU_E_INVALID, "empty input or kernel dim %d", i);
		if ((rc = dim_geom(ctx, st, nsp, i, gi, g)))
			return rc;
	}
	return 0;
}

static int convt_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *W,
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
	if (X->dims[1] % group != 0 || W->dims[0] != X->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "X has %lld channels, W is [%lld,%lld,...] "
				"with group %lld", (long long)X->dims[1], (long long)W->dims[0],
				(long long)W->dims[1], (long long)group);
	if (B && (B->rank != 1 || B->dims[0] != W->dims[1] * group))
		return cpu_fail(ctx, CPU_E_INVALID, "bias must be [%lld]",
				(long long)(W->dims[1] * group));
	return 0;
}

/* Scatter-adds one tap row (all input positions) into the output plane y. */
static void col2im_row(float *y, const float *row, const convt_geom *g, int64_t kd, int64_t kh,
		       int64_t kw)
{
	int64_t base = kw * g->d[2] - g->pb[2], s = g->s[2], lo = 0, hi = g->in[2];

	/* input columns whose output column base + iw * s lies in [0, OW) */
	if (base < 0)
		lo = (-base + s - 1) / s;
	if (g->out[2] - base <= 0)
		hi = 0;
	else if ((g->out[2] - 1 - base) / s + 1 < hi)
		hi = (g->out[2] - 1 - base) / s + 1;
	for (int64_t id = 0; id < g->in[0]; id++) {
		int64_t od = id * g->s[0] - g->pb[0] + kd * g->d[0];
		if (od < 0 || od >= g->out[0])
			continue;
		for (int64_t ih = 0; ih < g->in[1]; ih++) {
			int64_t oh = ih * g->s[1] - g->pb[1] + kh * g->d[1];
			const float *src = row + (id * g->in[1] + ih) * g->in[2];
			float *dst;
			if (oh < 0 || oh >= g->out[1])
				continue;
			dst = y + (od * g->out[1] + oh) * g->out[2];
			for (int64_t iw = lo; iw < hi; iw++)
				dst[base + iw * s] += src[iw];
		}
	}
}

/* y[2 i] = a[i] + b0, y[2 i + 1] = c[i] + b0 for i < n: two tap rows of a
 * 2-wide stride-2 window interleaved into one output row. */
CPU_MULTIVERSION
static void interleave2(float *y, const float *a, const float *c, int64_t n, float b0)
{
	const vi8 lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		vf8 va = vf_load(a + i) + b0, vc = vf_load(c + i) + b0;

		vf_store(y + 2 * i, __builtin_shuffle(va, vc, lo));
		vf_store(y + 2 * i + 8, __builtin_shuffle(va, vc, hi));
	}
	for (; i < n; i++) {
		y[2 * i] = a[i] + b0;
		y[2 * i + 1] = c[i] + b0;
	}
}

/* Windows that tile the output (kernel == stride, no dilation, no pads,
 * the output exactly input x stride; the 2x2 stride-2 upsampling of
 * segmentation heads): every output element is one tap plus the bias,
 * written once, row by row, with no zeroing and no adding up. */
static int tiles_output(const convt_geom *g)
{
	for (int i = 0; i < 3; i++)
		if (g->k[i] != g->s[i] || g->d[i] != 1 || g->pb[i] != 0 ||
		    g->out[i] != g->in[i] * g->s[i])
			return 0;
	return 1;
}

static void tile_plane(float *y, const float *col, const convt_geom *g, float b0)
{
	int64_t isz = g->in[0] * g->in[1] * g->in[2], sw = g->s[2], IW = g->in[2];

	for (int64_t id = 0; id < g->in[0]; id++)
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t ih = 0; ih < g->in[1]; ih++)
				for (int64_t kh = 0; kh < g->k[1]; kh++) {
					int64_t od = id * g->s[0] + kd, oh = ih * g->s[1] + kh;
					float *yr = y + (od * g->out[1] + oh) * g->out[2];
					/* tap (kd, kh, kw)'s row ih of image plane id */
					const float *r = col + ((kd * g->k[1] + kh) * g->k[2]) * isz +
							 (id * g->in[1] + ih) * IW;

					if (sw == 2) {
						interleave2(yr, r, r + isz, IW, b0);
						continue;
					}
					for (int64_t kw = 0; kw < sw; kw++)
						for (int64_t iw = 0; iw < IW; iw++)
							yr[iw * sw + kw] = r[kw * isz + iw] + b0;
				}
}

/* Output planes [m0, m1) of one (image, group): bias, then every tap. */
typedef struct col2im_job {
	float *y;
	const float *col, *bias;
	const convt_geom *g;
	int tiles;   /* tiles_output */
} col2im_job;

static void col2im_range(void *arg, int64_t m0, int64_t m1, int member)
{
	const col2im_job *j = arg;
	const convt_geom *g = j->g;
	int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
	int64_t ksz = g->k[0] * g->k[1] * g->k[2];

	(void)member;
	for (int64_t m = m0; m < m1; m++) {
		float *y = j->y + m * osz, v = j->bias ? j->bias[m] : 0.0f;
		const float *col = j->col + m * ksz * isz;

		if (j->tiles) {
			tile_plane(y, col, g, v);
			continue;
		}
		for (int64_t i = 0; i < osz; i++)
			y[i] = v;
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t kh = 0; kh < g->k[1]; kh++)
				for (int64_t kw = 0; kw < g->k[2]; kw++, col += isz)
					col2im_row(y, col, g, kd, kh, kw);
	}
}

static int convt_compute(cpu_ctx *ctx)
{
	const convt_state *st = ctx->node->state;
	const cpu_tensor *X, *W, *B = cpu_input(ctx, 2);
	int64_t dims[CPU_MAX_RANK], G = st->group, N, Cg, Mg, ksz, isz, osz, big[3];
	convt_geom g;
	cpu_tensor *Y;
	float *col;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(W = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = convt_check(ctx, X, W, B, G)) || (rc = convt_geometry(ctx, st, X, W, &g)))
		return rc;
	N = X->dims[0];
	Cg = X->dims[1] / G;
	Mg = W->dims[1];
	ksz = g.k[0] * g.k[1] * g.k[2];
	isz = g.in[0] * g.in[1] * g.in[2];
	osz = g.out[0] * g.out[1] * g.out[2];
	dims[0] = N;
	dims[1] = Mg * G;
	for (int i = 0; i < g.nsp; i++)
		dims[2 + i] = g.out[3 - g.nsp + i];
	big[0] = Mg, big[1] = ksz, big[2] = isz;
	if (cpu_shape_numel(3, big) < 0 || cpu_shape_numel(3, big) > ((int64_t)1 << 40))
		return cpu_fail(ctx, CPU_E_NOMEM, "col buffer too large");
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, dims)))
		return CPU_E_NOMEM;
	if (!(col = cpu_scratch(ctx, (size_t)(Mg * ksz * isz + 1) * sizeof(float))))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < N; b++)
		for (int64_t grp = 0; grp < G; grp++) {
			const float *x = (const float *)X->data + (b * G + grp) * Cg * isz;
			const float *w = (const float *)W->data + grp * Cg * Mg * ksz;
			col2im_job cj = {(float *)Y->data + (b * G + grp) * Mg * osz, col,
					 B ? (const float *)B->data + grp * Mg : NULL, &g, tiles_output(&g)};

			cpu_sgemm_pool(ctx->pool, 1, 0, Mg * ksz, isz, Cg, 1.0f, w, Mg * ksz, x, isz,
				       0.0f, col, isz);
			/* output planes are independent: ~1 ns a tap element */
			cpu_par_for(ctx, Mg, (double)(ksz * isz + osz), 1, col2im_range, &cj);
		}
	return 0;
}

const cpu_op cpu_op_convtranspose = {
	"ConvTranspose", "", 1, CPU_OPSET_MAX, convt_supports, convt_prepare, convt_compute,
	convt_release,
};
