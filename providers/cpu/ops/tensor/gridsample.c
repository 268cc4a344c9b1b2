/*
 * gridsample: ONNX GridSample for 1 to 3 spatial dims (opset 16's 2-D
 * bilinear/nearest/bicubic, and opset 20's linear/nearest/cubic names).
 * The semantics are the ONNX reference's (which follows PyTorch):
 * denormalise the grid coordinate (align_corners or not), round for
 * nearest (nearbyint in 2-D, half away from zero in 3-D), bring a
 * coordinate outside the borders back for border/reflection padding, then
 * interpolate with per-dim taps whose pixels outside the input read as 0
 * (zeros), clamp (border) or reflect (reflection).  Float types only.
 */
#include <math.h>
#include <stdio.h>

#include "tensor_ops.h"

#define GS_MAX_SP 3

enum { GS_LINEAR, GS_NEAREST, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_params {
	int mode, pad, align;
} gs_params;

/* A dim's taps: pixel offsets (-1: reads 0) and weights. */
typedef struct gs_dim {
	int n;
	int64_t idx[4];
	double w[4];
} gs_dim;

static int gs_parse(const Onnx__NodeProto *p, gs_params *g, char *why, size_t n)
{
	char m[32], pm[32];
	if (!cpu_attr_str(p, "mode", m, sizeof(m)))
		strcpy(m, "bilinear");
	if (!cpu_attr_str(p, "padding_mode", pm, sizeof(pm)))
		strcpy(pm, "zeros");
	g->align = cpu_attr_int(p, "align_corners", 0) != 0;
	if (!strcmp(m, "bilinear") || !strcmp(m, "linear"))
		g->mode = GS_LINEAR;
	else if (!strcmp(m, "nearest"))
		g->mode = GS_NEAREST;
	else if (!strcmp(m, "bicubic") || !strcmp(m, "cubic"))
		g->mode = GS_CUBIC;
	else
		return snprintf(why, n, "mode '%s' is not supported", m), -1;
	if (!strcmp(pm, "zeros"))
		g->pad = GS_ZEROS;
	else if (!strcmp(pm, "border"))
		g->pad = GS_BORDER;
	else if (!strcmp(pm, "reflection"))
		g->pad = GS_REFLECTION;
	else
		return snprintf(why, n, "padding_mode '%s' is not supported", pm), -1;
	return 0;
}

/* Reflects x into [lo, hi] by its nearer border, repeatedly. */
static double gs_reflect(double x, double lo, double hi)
{
	double rng = hi - lo, r;
	if (rng <= 0)
		return lo;
	if (x < lo) {
		r = fmod(lo - x, 2 * rng);
		return r < rng ? lo + r : hi - (r - rng);
	}
	if (x > hi) {
		r = fmod(x - hi, 2 * rng);
		return r < rng ? hi - r : lo + (r - rng);
	}
	return x;
}

/* Pixel i of a dim of size d after padding; -1 reads as zero. */
static int64_t gs_pixel(const gs_params *g, int64_t i, int64_t d, double lo, double hi)
{
	if (g->pad == GS_REFLECTION)
		i = (int64_t)gs_reflect((double)i, lo, hi);
	if (g->pad != GS_ZEROS)
		return i < 0 ? 0 : i >= d ? d - 1 : i;
	return i < 0 || i >= d ? -1 : i;
}

static void gs_cubic(double t, double *w)
{
	const double a = -0.75;
	double u = 1 - t;
	w[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
	w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
	w[2] = ((a + 2) * u - (a + 3)) * u * u + 1;
	w[3] = ((a * (u + 1) - 5 * a) * (u + 1) + 8 * a) * (u + 1) - 4 * a;
}

/* Taps of normalised coordinate v on a dim of size d. */
static void gs_taps(const gs_params *g, int nsp, double v, int64_t d, gs_dim *t)
{
	double lo = g->align ? 0 : -0.5, hi = g->align ? (double)d - 1 : (double)d - 0.5;
	double x = g->align ? (v + 1) / 2 * (double)(d - 1) : ((v + 1) * (double)d - 1) / 2, f;

	/* One pixel with align_corners: every coordinate denormalises to it,
	 * even an infinite one (RAFT's coarsest pyramid level divides by
	 * size - 1 = 0); ONNX Runtime samples pixel 0 there too. */
	if (g->align && d == 1)
		x = 0;
	if (isnan(x))
		x = -8;
	if (g->mode == GS_NEAREST)
		x = nsp == 3 ? round(x) : nearbyint(x);
	if (x < lo || x > hi) {
		if (g->pad == GS_BORDER)
			x = x < 0 ? 0 : x > (double)d - 1 ? (double)d - 1 : x;
		else if (g->pad == GS_REFLECTION)
			x = gs_reflect(x, lo, hi);
	}
	/* beyond this every tap is outside: keep the casts defined */
	x = x < -8 ? -8 : x > (double)d + 8 ? (double)d + 8 : x;
	f = floor(x);
	if (g->mode == GS_NEAREST) {
		t->n = 1;
		t->w[0] = 1;
		t->idx[0] = gs_pixel(g, (int64_t)x, d, lo, hi);
		return;
	}
	if (g->mode == GS_LINEAR) {
		t->n = 2;
		t->w[0] = 1 - (x - f);
		t->w[1] = x - f;
	} else {
		t->n = 4;
		gs_cubic(x - f, t->w);
	}
	for (int k = 0; k < t->n; k++)
		t->idx[k] = gs_pixel(g, (int64_t)f + k - (t->n == 4), d, lo, hi);
}

/* The (offset, weight) list of one output point; returns its length. */
static int gs_point(const gs_dim *t, int nsp, const int64_t *xs, int64_t *off, double *w)
{
	int k[GS_MAX_SP] = {0}, n = 0;
	for (;;) {
		int64_t o = 0;
		double wt = 1;
		for (int i = 0; i < nsp; i++) {
			if (t[i].idx[k[i]] < 0)
				wt = 0;
			o += t[i].idx[k[i]] * xs[i];
			wt *= t[i].w[k[i]];
		}
		if (wt != 0) {
			off[n] = o;
			w[n++] = wt;
		}
		int i = nsp - 1;
		while (i >= 0 && ++k[i] == t[i].n)
			k[i--] = 0;
		if (i < 0)
			return n;
	}
}

static int gs_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *G, int64_t *dims)
{
	int nsp = X->rank - 2;
	uint32_t f = CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16);
	int rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, f)) || (rc = cpu_check_dtype(ctx, G, 1, f)))
		return rc;
	if (nsp < 1 || nsp > GS_MAX_SP || G->rank != X->rank || G->dims[0] != X->dims[0] ||
	    G->dims[G->rank - 1] != nsp)
		return cpu_fail(ctx, CPU_E_INVALID, "X must be [N, C, 1 to 3 spatial dims] and grid "
				"[N, out dims..., %d]", nsp > 0 ? nsp : 1);
	dims[0] = X->dims[0];
	dims[1] = X->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[2 + i] = G->dims[1 + i];
	return 0;
}

static int gs_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *G;
	int64_t dims[CPU_MAX_RANK], xs[CPU_MAX_RANK], npts, off[64], plane, C;
	double w[64];
	gs_params g;
	cpu_tensor *Y;
	int nsp, rc = 0;
	char why[128];

	if (!(X = cpu_require(ctx, 0, &rc)) || !(G = cpu_require(ctx, 1, &rc)))
		return rc;
	if (gs_parse(ctx->node->proto, &g, why, sizeof(why)))
		return cpu_fail(ctx, CPU_E_INVALID, "%s", why);
	if ((rc = gs_check(ctx, X, G, dims)) != 0)
		return rc;
	nsp = X->rank - 2;
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	tensor_strides(nsp, X->dims + 2, xs);
	plane = cpu_shape_numel(nsp, X->dims + 2);
	npts = cpu_shape_numel(nsp, dims + 2);
	C = X->dims[1];
	for (int64_t b = 0; b < X->dims[0]; b++)
		for (int64_t p = 0; p < npts; p++) {
			gs_dim t[GS_MAX_SP];
			int64_t gbase = (b * npts + p) * nsp;
			int n;
			for (int i = 0; i < nsp; i++)   /* the grid lists x (last dim) first */
				gs_taps(&g, nsp, cpu_get_f64(G->dtype, G->data, gbase + nsp - 1 - i),
					X->dims[2 + i], &t[i]);
			n = gs_point(t, nsp, xs, off, w);
			for (int64_t c = 0; c < C; c++) {
				int64_t xb = (b * C + c) * plane;
				double acc = 0;
				for (int k = 0; k < n; k++)
					acc += w[k] * cpu_get_f64(X->dtype, X->data, xb + off[k]);
				cpu_set_f64(Y->dtype, Y->data, (b * C + c) * npts + p, acc);
			}
		}
	return 0;
}

static int gs_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	gs_params g;
	uint32_t f = CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16);
	(void)opset;
	if (gs_parse(p, &g, why, n))
		return 0;
	return cpu_supports_dtype(dt, n_in, 0, f, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, f, why, n);
}

const cpu_op cpu_op_gridsample = {
	"GridSample", "", 16, CPU_OPSET_MAX, gs_supports, NULL, gs_compute, NULL,
};
