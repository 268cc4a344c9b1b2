/*
 * roi: ONNX RoiAlign (opsets 10 and 16) and MaxRoiPool, for float types.
 *
 * RoiAlign follows ONNX Runtime (whose behaviour the reference copies):
 * each output bin averages (or, for max, takes the largest weighted
 * corner of) a sampling_ratio^2 grid of bilinear samples; samples more
 * than one pixel outside the map count as zero; opset 10 and
 * output_half_pixel skip the -0.5 shift and force ROIs to at least 1x1.
 * MaxRoiPool is Caffe's ROI pooling: rounded ROI corners, bins of
 * floor/ceil extent, the max of each bin (0 for an empty bin).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "par.h"
#include "tensor_ops.h"

#define ROI_FLOATS (CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16))

typedef struct roi_args {
	int64_t oh, ow, ratio;
	double scale;
	int is_max, half_pixel;
} roi_args;

/* Bilinear sample of plane x (h x w) at (y, xx): corner offsets and
 * weights; 0 when the sample is outside the map. */
static int roi_sample(double y, double x, int64_t h, int64_t w, int64_t *pos, double *wt)
{
	int64_t y0, x0, y1, x1;
	double ly, lx;
	if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)
		return 0;
	y = y <= 0 ? 0 : y;
	x = x <= 0 ? 0 : x;
	y0 = (int64_t)y;
	x0 = (int64_t)x;
	if (y0 >= h - 1) {
		y0 = y1 = h - 1;
		y = (double)y0;
	} else {
		y1 = y0 + 1;
	}
	if (x0 >= w - 1) {
		x0 = x1 = w - 1;
		x = (double)x0;
	} else {
		x1 = x0 + 1;
	}
	ly = y - (double)y0;
	lx = x - (double)x0;
	pos[0] = y0 * w + x0;
	pos[1] = y0 * w + x1;
	pos[2] = y1 * w + x0;
	pos[3] = y1 * w + x1;
	wt[0] = (1 - ly) * (1 - lx);
	wt[1] = (1 - ly) * lx;
	wt[2] = ly * (1 - lx);
	wt[3] = ly * lx;
	return 1;
}

/* Samples per bin along a dim: sampling_ratio, or ceil(bin extent); an
 * empty ROI has none and pools to 0, as ONNX Runtime's does. */
static int64_t grid_count(int64_t ratio, double extent)
{
	double g = ratio > 0 ? (double)ratio : ceil(extent);
	return !(g > 0) ? 0 : g > 4096 ? 4096 : (int64_t)g;
}

/* ROI i of R as [x1, y1, x2, y2] on the feature map (scaled, shifted). */
static void roi_box(const roi_args *a, const cpu_tensor *R, int64_t i, double *r)
{
	double off = a->half_pixel ? 0.5 : 0;

	for (int k = 0; k < 4; k++)
		r[k] = cpu_get_f64(R->dtype, R->data, i * 4 + k) * a->scale - off;
}

/* A ROI's bin size and sampling grid (the same for all its bins). */
typedef struct roi_grid {
	double bh, bw;
	int64_t gh, gw, count;
} roi_grid;

static roi_grid roi_grid_of(const roi_args *a, const double *r)
{
	double rh = r[3] - r[1], rw = r[2] - r[0];
	roi_grid g;

	if (!a->half_pixel) {
		rh = rh > 1 ? rh : 1;
		rw = rw > 1 ? rw : 1;
	}
	g.bh = rh / (double)a->oh;
	g.bw = rw / (double)a->ow;
	g.gh = grid_count(a->ratio, rh / (double)a->oh);
	g.gw = grid_count(a->ratio, rw / (double)a->ow);
	g.count = g.gh * g.gw > 1 ? g.gh * g.gw : 1;
	return g;
}

/* One output bin (ph, pw) of one ROI on plane base of X. */
static double roi_bin(const roi_args *a, const cpu_tensor *X, int64_t base, const double *r,
		      int64_t ph, int64_t pw)
{
	int64_t h = X->dims[2], w = X->dims[3];
	roi_grid g = roi_grid_of(a, r);
	double bh = g.bh, bw = g.bw, acc = 0, best = 0;
	int64_t gh = g.gh, gw = g.gw, count = g.count;
	int any = 0;

	for (int64_t iy = 0; iy < gh; iy++)
		for (int64_t ix = 0; ix < gw; ix++) {
			double y = r[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
			double x = r[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
			int64_t pos[4];
			double wt[4], v = 0, m = 0;
			int in = roi_sample(y, x, h, w, pos, wt);
			for (int k = 0; k < 4; k++) {
				double t = in ? wt[k] * cpu_get_f64(X->dtype, X->data, base + pos[k]) : 0;
				v += t;
				m = k == 0 || t > m ? t : m;
			}
			acc += v;
			best = !any || m > best ? m : best;
			any = 1;
		}
	return a->is_max ? best : acc / (double)count;
}

static int roi_parse(cpu_ctx *ctx, roi_args *a)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	char mode[16], ctm[32];
	a->oh = cpu_attr_int(p, "output_height", 1);
	a->ow = cpu_attr_int(p, "output_width", 1);
	a->ratio = cpu_attr_int(p, "sampling_ratio", 0);
	a->scale = cpu_attr_float(p, "spatial_scale", 1.0f);
	if (!cpu_attr_str(p, "mode", mode, sizeof(mode)))
		strcpy(mode, "avg");
	if (!cpu_attr_str(p, "coordinate_transformation_mode", ctm, sizeof(ctm)))
		strcpy(ctm, ctx->node->opset < 16 ? "output_half_pixel" : "half_pixel");
	a->is_max = !strcmp(mode, "max");
	a->half_pixel = !strcmp(ctm, "half_pixel");
	if ((!a->is_max && strcmp(mode, "avg")) ||
	    (!a->half_pixel && strcmp(ctm, "output_half_pixel")))
		return cpu_fail(ctx, CPU_E_INVALID, "unknown mode or coordinate_transformation_mode");
	if (a->oh < 1 || a->ow < 1 || a->oh > INT32_MAX || a->ow > INT32_MAX || a->ratio < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "bad output size or sampling_ratio");
	return 0;
}

/* ---- float32, avg: sample positions and weights once per ROI ----
 * (they do not depend on the channel); the same arithmetic as roi_bin in
 * the same order, so the results are the same to the bit, and ROIs split
 * over the pool. */

#define ROI_FAST_SAMPLES 65536   /* bins x samples per ROI, at most */

typedef struct roi_pre {
	int64_t pos[4];
	double wt[4];
	int in;
} roi_pre;

typedef struct roi_fast_job {
	const roi_args *a;
	const cpu_tensor *X, *R, *B;
	float *y;
	roi_pre *pre;      /* per member: ROI_FAST_SAMPLES */
} roi_fast_job;

static void roi_fast_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const roi_fast_job *j = arg;
	const roi_args *a = j->a;
	const cpu_tensor *X = j->X;
	int64_t C = X->dims[1], h = X->dims[2], w = X->dims[3], bins = a->oh * a->ow;
	const float *x = X->data;
	roi_pre *pre = j->pre + (size_t)member * ROI_FAST_SAMPLES;

	for (int64_t i = i0; i < i1; i++) {
		int64_t b = cpu_get_i64(j->B->dtype, j->B->data, i), gh, gw, g, count;
		double r[4], bh, bw;
		roi_grid gr;

		roi_box(a, j->R, i, r);
		gr = roi_grid_of(a, r);
		bh = gr.bh, bw = gr.bw, gh = gr.gh, gw = gr.gw, count = gr.count;
		g = gh * gw;
		for (int64_t ph = 0, e = 0; ph < a->oh; ph++)
			for (int64_t pw = 0; pw < a->ow; pw++)
				for (int64_t iy = 0; iy < gh; iy++)
					for (int64_t ix = 0; ix < gw; ix++, e++) {
						double yy = r[1] + (double)ph * bh +
							    ((double)iy + 0.5) * bh / (double)gh;
						double xx = r[0] + (double)pw * bw +
							    ((double)ix + 0.5) * bw / (double)gw;

						pre[e].in = roi_sample(yy, xx, h, w, pre[e].pos, pre[e].wt);
					}
		for (int64_t c = 0; c < C; c++) {
			const float *plane = x + (b * C + c) * h * w;
			float *yo = j->y + (i * C + c) * bins;

			for (int64_t bin = 0; bin < bins; bin++) {
				const roi_pre *q = pre + bin * g;
				double acc = 0;

				for (int64_t s = 0; s < g; s++) {
					double v = 0;

					for (int k = 0; k < 4; k++)
						v += q[s].in ? q[s].wt[k] * (double)plane[q[s].pos[k]] : 0;
					acc += v;
				}
				yo[bin] = (float)(acc / (double)count);
			}
		}
	}
}

/* Every ROI's bins x samples fit ROI_FAST_SAMPLES. */
static int roi_fast_fits(const roi_args *a, const cpu_tensor *R)
{
	for (int64_t i = 0; i < R->dims[0]; i++) {
		double r[4];
		roi_grid g;

		roi_box(a, R, i, r);   /* the grid roi_fast_range will use, exactly */
		g = roi_grid_of(a, r);
		if ((double)g.gh * (double)g.gw * (double)(a->oh * a->ow) > ROI_FAST_SAMPLES)
			return 0;
	}
	return 1;
}

static int roialign_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *R, *B;
	int64_t dims[4], nr, C;
	roi_args a;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(R = cpu_require(ctx, 1, &rc)) ||
	    !(B = cpu_require(ctx, 2, &rc)) || (rc = roi_parse(ctx, &a)) != 0)
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, ROI_FLOATS)) ||
	    (rc = cpu_check_dtype(ctx, R, 1, ROI_FLOATS)) ||
	    (rc = cpu_check_dtype(ctx, B, 2, CPU_TYPES_INDEX)))
		return rc;
	if (X->rank != 4 || R->rank != 2 || R->dims[1] != 4 || B->rank != 1 ||
	    B->dims[0] != R->dims[0])
		return cpu_fail(ctx, CPU_E_INVALID, "X must be [N,C,H,W], rois [R,4], "
				"batch_indices [R]");
	if (X->dims[2] < 1 || X->dims[3] < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "X has an empty feature map");
	nr = R->dims[0];
	C = X->dims[1];
	dims[0] = nr;
	dims[1] = C;
	dims[2] = a.oh;
	dims[3] = a.ow;
	if (!(Y = cpu_output(ctx, 0, X->dtype, 4, dims)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < nr; i++) {
		int64_t b = cpu_get_i64(B->dtype, B->data, i);
		if (b < 0 || b >= X->dims[0])
			return cpu_fail(ctx, CPU_E_INVALID, "batch index %lld out of range",
					(long long)b);
	}
	if (X->dtype == CPU_FLOAT && !a.is_max && roi_fast_fits(&a, R)) {
		roi_fast_job j = {&a, X, R, B, Y->data, NULL};

		j.pre = cpu_scratch(ctx, sizeof(roi_pre) * ROI_FAST_SAMPLES *
					 (size_t)cpu_par_members(ctx));
		if (!j.pre)
			return CPU_E_NOMEM;
		/* ~2 ns a corner read */
		cpu_par_for(ctx, nr, 8.0 * (double)(C * a.oh * a.ow * (a.ratio ? a.ratio * a.ratio : 4)),
			    1, roi_fast_range, &j);
		return 0;
	}
	for (int64_t i = 0; i < nr; i++) {
		int64_t b = cpu_get_i64(B->dtype, B->data, i);   /* checked above */
		double r[4];

		roi_box(&a, R, i, r);
		for (int64_t c = 0; c < C; c++)
			for (int64_t ph = 0; ph < a.oh; ph++)
				for (int64_t pw = 0; pw < a.ow; pw++)
					cpu_set_f64(Y->dtype, Y->data, ((i * C + c) * a.oh + ph) * a.ow + pw,
						    roi_bin(&a, X, (b * C + c) * X->dims[2] * X->dims[3],
							    r, ph, pw));
	}
	return 0;
}

/* MaxRoiPool bin: [lo, hi) clipped to [0, n). */
static void pool_range(int64_t p, double bin, int64_t start, int64_t n, int64_t *lo, int64_t *hi)
{
	double a = floor((double)p * bin) + (double)start, b = ceil((double)(p + 1) * bin) + (double)start;
	a = a < 0 ? 0 : a > (double)n ? (double)n : a;
	b = b < 0 ? 0 : b > (double)n ? (double)n : b;
	*lo = (int64_t)a;
	*hi = (int64_t)b;
}

static double roipool_bin(const cpu_tensor *X, int64_t base, const int64_t *box, const int64_t *ps,
			  int64_t ph, int64_t pw)
{
	int64_t h = X->dims[2], w = X->dims[3], y0, y1, x0, x1;
	int64_t rh = box[3] - box[1] + 1, rw = box[2] - box[0] + 1;
	double best = -DBL_MAX;
	rh = rh < 1 ? 1 : rh;
	rw = rw < 1 ? 1 : rw;
	pool_range(ph, (double)rh / (double)ps[0], box[1], h, &y0, &y1);
	pool_range(pw, (double)rw / (double)ps[1], box[0], w, &x0, &x1);
	if (y1 <= y0 || x1 <= x0)
		return 0;
	for (int64_t y = y0; y < y1; y++)
		for (int64_t x = x0; x < x1; x++) {
			double v = cpu_get_f64(X->dtype, X->data, base + y * w + x);
			best = v > best ? v : best;
		}
	return best;
}

static int roipool_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *R;
	const int64_t *ps;
	double scale = cpu_attr_float(ctx->node->proto, "spatial_scale", 1.0f);
	int64_t dims[4], C;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(R = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, ROI_FLOATS)) ||
	    (rc = cpu_check_dtype(ctx, R, 1, ROI_FLOATS)))
		return rc;
	if (cpu_attr_ints(ctx->node->proto, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "pooled_shape must be two positive ints");
	if (X->rank != 4 || R->rank != 2 || R->dims[1] != 5)
		return cpu_fail(ctx, CPU_E_INVALID, "X must be [N,C,H,W] and rois [R,5]");
	C = X->dims[1];
	dims[0] = R->dims[0];
	dims[1] = C;
	dims[2] = ps[0];
	dims[3] = ps[1];
	if (!(Y = cpu_output(ctx, 0, X->dtype, 4, dims)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < R->dims[0]; i++) {
		double b = cpu_get_f64(R->dtype, R->data, i * 5);
		int64_t box[4];
		if (!(b >= 0 && b < (double)X->dims[0]))
			return cpu_fail(ctx, CPU_E_INVALID, "roi %lld: batch index out of range",
					(long long)i);
		for (int k = 0; k < 4; k++) {
			double v = round(cpu_get_f64(R->dtype, R->data, i * 5 + 1 + k) * scale);
			box[k] = (int64_t)(v < -1e15 ? -1e15 : v > 1e15 ? 1e15 : v);
		}
		for (int64_t c = 0; c < C; c++)
			for (int64_t ph = 0; ph < ps[0]; ph++)
				for (int64_t pw = 0; pw < ps[1]; pw++)
					cpu_set_f64(Y->dtype, Y->data, ((i * C + c) * ps[0] + ph) * ps[1] + pw,
						    roipool_bin(X, ((int64_t)b * C + c) * X->dims[2] * X->dims[3],
								box, ps, ph, pw));
	}
	return 0;
}

static int roi_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ROI_FLOATS, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, ROI_FLOATS, why, n);
}

const cpu_op cpu_op_roialign = {
	"RoiAlign", "", 10, CPU_OPSET_MAX, roi_supports, NULL, roialign_compute, NULL,
};
const cpu_op cpu_op_maxroipool = {
	"MaxRoiPool", "", 1, CPU_OPSET_MAX, roi_supports, NULL, roipool_compute, NULL,
};
