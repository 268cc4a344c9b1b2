/*
 * resize_apply: the interpolation half of Resize/Upsample (resize.c holds
 * the attributes and geometry).
 *
 * Each resized axis gets a tap table: for every output coordinate, the
 * input indices and weights that make it (one tap for nearest, 2 or 4 for
 * linear and cubic, more for antialiased downsampling) or a mark meaning
 * "extrapolation value" (tf_crop_and_resize outside the input).  Indices
 * are clamped to the input as the reference's edge padding does.
 *
 * nearest copies elements by size, so it works for every dtype exactly.
 * linear and cubic are separable: one pass per resized axis over a double
 * buffer, then one conversion to the output dtype (integers saturate).
 * Doing the axes one after another gives the same values as the
 * reference's N-D recursion, since every axis's weights sum to one.
 *
 * The common case of real models — float32 images resized bilinearly
 * along their last two axes (a detector's input transform, FPN and U-Net
 * upsampling) — has its own path computing exactly ONNX Runtime's float
 * formula (coordinates and weights in float, four products summed in
 * order): per plane, each input row needed is gathered at the output
 * columns' neighbours once, then output rows are blended; planes are
 * split over the pool.
 */
#include <math.h>

#include "par.h"
#include "resize.h"
#include "vfloat.h"

typedef struct rs_taps {
	int64_t n;            /* taps per output coordinate */
	int64_t *idx;         /* out * n clamped input indices */
	double *w;            /* out * n weights (0 = skip) */
	unsigned char *extrap;/* out flags: use the extrapolation value */
	int identity;         /* output j is input j: nothing to do */
	int any_extrap;       /* some extrap[j] is set */
} rs_taps;

static double coord(const resize_params *p, const resize_geom *g, int d, int64_t j)
{
	double s = g->scale[d], in = (double)g->in[d], len = g->len[d], x = (double)j;
	double st = g->roi_start[d], en = g->roi_end[d], adj;

	switch (p->ctm) {
	case CT_ALIGN_CORNERS:
		return len == 1 ? 0 : x * (in - 1) / (len - 1);
	case CT_ASYMMETRIC:
		return x / s;
	case CT_TF_HALF_PIXEL_FOR_NN:
		return (x + 0.5) / s;
	case CT_PYTORCH_HALF_PIXEL:
		return g->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0;
	case CT_TF_CROP_AND_RESIZE:
		return len > 1 ? st * (in - 1) + x * (en - st) * (in - 1) / (len - 1)
			       : 0.5 * (st + en) * (in - 1);
	case CT_HALF_PIXEL_SYMMETRIC:
		adj = (double)g->out[d] / len;
		return in / 2 * (1 - adj) + (x + 0.5) / s - 0.5;
	default:
		return (x + 0.5) / s - 0.5;
	}
}

static int64_t clamp_idx(int64_t i, int64_t n)
{
	return i < 0 ? 0 : i >= n ? n - 1 : i;
}

static int64_t nearest_idx(int mode, double x, double s)
{
	double f = floor(x), r = x - f;
	if (r == 0)
		return (int64_t)f;
	switch (mode) {
	case NM_ROUND_PREFER_CEIL: return (int64_t)(r < 0.5 ? f : f + 1);
	case NM_FLOOR: return (int64_t)f;
	case NM_CEIL: return (int64_t)f + 1;
	case NM_SIMPLE: return (int64_t)(s < 1 ? ceil(x) : trunc(x));
	default: return (int64_t)(r <= 0.5 ? f : f + 1);
	}
}

static double kernel(const resize_params *p, double t)
{
	double a = p->cubic_a;
	t = fabs(t);
	if (p->mode == RS_LINEAR)
		return t < 1 ? 1 - t : 0;
	if (t <= 1)
		return ((a + 2) * t - (a + 3)) * t * t + 1;
	if (t < 2)
		return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
	return 0;
}

/* First tap offset of linear/cubic at this scale (the count is
 * 2 - 2 * start): 0 and -1, widened by 1/scale when antialiasing a
 * downsample; -1 << 21 when that would take too many taps. */
static int64_t tap_start(const resize_params *p, double s)
{
	double support = p->mode == RS_LINEAR ? 1 : 2, start;
	if (!p->antialias || s >= 1)
		return p->mode == RS_LINEAR ? 0 : -1;
	start = floor(-support / s) + 1;
	return start < -(double)(1 << 20) ? -(1 << 21) : (int64_t)start;
}

/* Taps of output coordinate x (input space) on an axis of n inputs. */
static void interp_taps(const resize_params *p, double x, double s, int64_t n, int64_t start,
			int64_t nt, int64_t *idx, double *w)
{
	double f, r, sum = 0, ss = p->antialias && s < 1 ? s : 1;
	if (x < -1e15 || x > 1e15)
		x = x < 0 ? -1e15 : 1e15;
	f = floor(x);
	r = x - f;
	if (r == 0) {     /* the reference takes the left neighbour at ratio 1 */
		f -= 1;
		r = 1;
	}
	for (int64_t t = 0; t < nt; t++) {
		int64_t i = (int64_t)f + start + t;
		w[t] = kernel(p, (double)(start + t - r) * ss);
		if (p->exclude_outside && (i < 0 || i >= n))
			w[t] = 0;
		sum += w[t];
		idx[t] = clamp_idx(i, n);
	}
	if ((p->antialias || p->exclude_outside) && sum != 0)
		for (int64_t t = 0; t < nt; t++)
			w[t] /= sum;
}

/* Builds axis d's table in scratch memory. */
static int build_taps(cpu_ctx *ctx, const resize_params *p, const resize_geom *g, int d,
		      rs_taps *a)
{
	int64_t out = g->out[d], in = g->in[d], start = 0;
	double s = g->scale[d];

	a->n = 1;
	if (p->mode != RS_NEAREST) {
		start = tap_start(p, s);
		a->n = 2 - 2 * start;
		if (start < -(1 << 20))
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "antialias scale %g needs too many "
					"taps", s);
	}
	a->idx = cpu_scratch(ctx, sizeof(int64_t) * (size_t)(out * a->n) + 1);
	a->w = cpu_scratch(ctx, sizeof(double) * (size_t)(out * a->n) + 1);
	a->extrap = cpu_scratch(ctx, (size_t)out + 1);
	if (!a->idx || !a->w || !a->extrap)
		return CPU_E_NOMEM;
	a->identity = in == out;
	a->any_extrap = 0;
	for (int64_t j = 0; j < out; j++) {
		double x = coord(p, g, d, j);
		int64_t *ix = a->idx + j * a->n;
		double *w = a->w + j * a->n;
		a->extrap[j] = p->ctm == CT_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1));
		if (a->extrap[j]) {   /* harmless taps: the passes test extrap first */
			a->identity = 0;
			a->any_extrap = 1;
			for (int64_t k = 0; k < a->n; k++) {
				ix[k] = 0;
				w[k] = 0;
			}
			continue;
		}
		if (p->mode == RS_NEAREST) {
			double xc = x < -1 ? -1 : x > (double)in ? (double)in : x;
			ix[0] = clamp_idx(nearest_idx(p->nearest, xc, s), in);
			w[0] = 1;
		} else {
			interp_taps(p, x, s, in, start, a->n, ix, w);
		}
		for (int64_t t = 0; t < a->n && a->identity; t++)
			if (w[t] != 0 && (ix[t] != j || w[t] != 1))
				a->identity = 0;
	}
	return 0;
}

/* y[j] = x[j / 2] for j < n, 4-byte elements: each loaded vector of 8
 * written twice over, interleaved (the 2x nearest upsampling of FPNs). */
CPU_MULTIVERSION
static void double_row4(const float *x, float *y, int64_t n)
{
	const vi8 lo = {0, 0, 1, 1, 2, 2, 3, 3}, hi = {4, 4, 5, 5, 6, 6, 7, 7};
	int64_t j = 0;

	for (; j + 16 <= n; j += 16) {
		vf8 v = vf_load(x + j / 2);

		vf_store(y + j, __builtin_shuffle(v, lo));
		vf_store(y + j + 8, __builtin_shuffle(v, hi));
	}
	for (; j < n; j++)
		y[j] = x[j / 2];
}

/* One output row of nearest along the last axis; x is the input row the
 * outer axes picked, or NULL when they are outside (extrapolation). */
static void nearest_row(const rs_taps *t, int64_t n, const char *x, char *y, size_t es,
			const void *extrap, int twice)
{
	if (es == 4 && x && twice) {   /* copies bits: any 4-byte type */
		double_row4((const float *)x, (float *)y, n);
		return;
	}
	if (es == 4 && x && !t->any_extrap) {   /* float32, int32: no dispatch */
		for (int64_t j = 0; j < n; j++)
			memcpy(y + 4 * j, x + 4 * t->idx[j], 4);
		return;
	}
	for (int64_t j = 0; j < n; j++, y += es) {
		if (!x || t->extrap[j])
			memcpy(y, extrap, es);
		else
			tensor_copy_elem(y, x + (size_t)t->idx[j] * es, es);
	}
}

typedef struct nn_job {
	const resize_geom *g;
	const rs_taps *t;
	const cpu_tensor *X;
	cpu_tensor *Y;
	const void *extrap;
	int twice;            /* the last axis is x[j / 2] throughout */
} nn_job;

/* nearest: every output element is one input element (or the
 * extrapolation value), copied by size; output rows [r0, r1). */
static void nearest_rows(void *arg, int64_t r0, int64_t r1, int member)
{
	const nn_job *j = arg;
	const resize_geom *g = j->g;
	const rs_taps *t = j->t;
	const cpu_tensor *X = j->X;
	const void *extrap = j->extrap;
	int64_t xs[CPU_MAX_RANK], pos[CPU_MAX_RANK] = {0}, rem = r0;
	int r = g->rank, last = r - 1;
	size_t es = cpu_dtype_size(X->dtype);
	char *y = (char *)j->Y->data + (size_t)(r0 * g->out[last]) * es;

	(void)member;
	tensor_strides(r, X->dims, xs);
	for (int d = last - 1; d >= 0; d--) {
		pos[d] = rem % g->out[d];
		rem /= g->out[d];
	}
	int64_t prev_off = -1, prev_outside = -1;
	size_t row_bytes = (size_t)g->out[last] * es;

	for (int64_t row = r0; row < r1; row++, y += row_bytes) {
		int64_t off = 0;
		int outside = 0;
		for (int d = 0; d < last; d++) {
			outside |= t[d].extrap[pos[d]];
			off += t[d].idx[pos[d]] * xs[d];
		}
		/* a row made from the same input row as the one before (an
		 * upsampled image's repeated rows): copied from it */
		if (row > r0 && off == prev_off && outside == prev_outside)
			memcpy(y, y - row_bytes, row_bytes);
		else
			nearest_row(&t[last], g->out[last],
				    outside ? NULL : (const char *)X->data + (size_t)off * es, y, es,
				    extrap, j->twice);
		prev_off = off;
		prev_outside = outside;
		for (int d = last - 1; d >= 0 && ++pos[d] == g->out[d]; d--)
			pos[d] = 0;
	}
}

static void run_nearest(cpu_ctx *ctx, const resize_geom *g, const rs_taps *t,
			const cpu_tensor *X, cpu_tensor *Y, const void *extrap)
{
	const rs_taps *tl = &t[g->rank - 1];
	nn_job j = {g, t, X, Y, extrap, !tl->any_extrap};
	int64_t rows = 1;

	for (int64_t k = 0; j.twice && k < g->out[g->rank - 1]; k++)
		j.twice = tl->idx[k] == k / 2;

	for (int d = 0; d < g->rank - 1; d++)
		rows *= g->out[d];
	/* ~0.3 ns an element copied */
	cpu_par_for(ctx, rows, 0.3 * (double)g->out[g->rank - 1], 16, nearest_rows, &j);
}

/* A pass along the innermost axis: one dot product per output. */
static void run_pass_last(const double *src, double *dst, int64_t outer, int64_t nin,
			  int64_t nout, const rs_taps *a, double extrap)
{
	for (int64_t o = 0; o < outer; o++, src += nin)
		for (int64_t j = 0; j < nout; j++) {
			const int64_t *ix = a->idx + j * a->n;
			const double *w = a->w + j * a->n;
			double acc = 0;
			if (a->extrap[j]) {   /* its taps were never filled */
				*dst++ = extrap;
				continue;
			}
			for (int64_t t = 0; t < a->n; t++)
				acc += w[t] * src[ix[t]];
			*dst++ = acc;
		}
}

/* One separable pass along an axis: src is [outer, nin, inner], dst
 * [outer, nout, inner]. */
static void run_pass(const double *src, double *dst, int64_t outer, int64_t nin, int64_t nout,
		     int64_t inner, const rs_taps *a, double extrap)
{
	if (inner == 1) {
		run_pass_last(src, dst, outer, nin, nout, a, extrap);
		return;
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < nout; j++) {
			double *y = dst + (o * nout + j) * inner;
			if (a->extrap[j]) {
				for (int64_t e = 0; e < inner; e++)
					y[e] = extrap;
				continue;
			}
			memset(y, 0, sizeof(double) * (size_t)inner);
			for (int64_t t = 0; t < a->n; t++) {
				double w = a->w[j * a->n + t];
				const double *x = src + (o * nin + a->idx[j * a->n + t]) * inner;
				if (w == 0)
					continue;
				for (int64_t e = 0; e < inner; e++)
					y[e] += w * x[e];
			}
		}
}

/* Largest intermediate of the passes over axes [f, rank), in elements. */
static int64_t max_intermediate(const resize_geom *g, int f)
{
	int64_t best = 1, cur[CPU_MAX_RANK];
	int n = g->rank - f;
	memcpy(cur, g->in + f, sizeof(int64_t) * (size_t)n);
	for (int d = -1; d < n; d++) {
		int64_t v;
		if (d >= 0)
			cur[d] = g->out[f + d];
		if ((v = cpu_shape_numel(n, cur)) < 0)
			return -1;
		best = v > best ? v : best;
	}
	return best;
}

/* The passes over one slice [f, rank) of the tensor (the leading axes
 * before f are not resized): a holds the slice's input as doubles; returns
 * the buffer holding the result. */
static double *run_slice(const resize_params *p, const resize_geom *g, const rs_taps *t, int f,
			 double *a, double *b)
{
	int64_t cur[CPU_MAX_RANK];
	memcpy(cur, g->in, sizeof(int64_t) * (size_t)g->rank);
	for (int d = f; d < g->rank; d++) {
		int64_t outer = 1, inner = 1;
		double *swap;
		if (t[d].identity)
			continue;
		for (int k = f; k < d; k++)
			outer *= cur[k];
		for (int k = d + 1; k < g->rank; k++)
			inner *= cur[k];
		run_pass(a, b, outer, cur[d], g->out[d], inner, &t[d], p->extrapolation);
		cur[d] = g->out[d];
		swap = a;
		a = b;
		b = swap;
	}
	return a;
}

/* One axis of the bilinear path, in float as ONNX Runtime's
 * UpsampleBilinear computes it: the source coordinate in float from the
 * float scale, clamped to [0, in - 1], its two neighbours and their
 * weights d1 = |x - i1|, d2 = |x - i2| (both 1/2 when the neighbours
 * coincide). */
typedef struct bl_axis {
	int64_t *i1, *i2;
	float *d1, *d2;
} bl_axis;

/* out is the resized length: the output size, or input size x scale when
 * a scale was given (align_corners then divides by len - 1, as ONNX's
 * reference does). */
static float bl_coord(const resize_params *p, float x, float s, float out, float in)
{
	switch (p->ctm) {
	case CT_ALIGN_CORNERS: return out == 1 ? 0.0f : x * (in - 1) / (out - 1);
	case CT_ASYMMETRIC: return x / s;
	case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5f) / s;
	case CT_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
	default: return (x + 0.5f) / s - 0.5f;
	}
}

static int bl_setup(cpu_ctx *ctx, const resize_params *p, const resize_geom *g, int d,
		    bl_axis *a)
{
	int64_t in = g->in[d], out = g->out[d];
	/* the scale ONNX Runtime derives from sizes (out / in in float), or
	 * the float it was given */
	float s = g->len[d] == (double)out ? (float)out / (float)in : (float)g->scale[d];

	a->i1 = cpu_scratch(ctx, sizeof(int64_t) * 2 * (size_t)out + 1);
	a->d1 = cpu_scratch(ctx, sizeof(float) * 2 * (size_t)out + 1);
	if (!a->i1 || !a->d1)
		return CPU_E_NOMEM;
	a->i2 = a->i1 + out;
	a->d2 = a->d1 + out;
	for (int64_t j = 0; j < out; j++) {
		float x = s == 1.0f ? (float)j : bl_coord(p, (float)j, s, (float)g->len[d], (float)in);

		x = x < 0.0f ? 0.0f : x > (float)(in - 1) ? (float)(in - 1) : x;
		a->i1[j] = (int64_t)x < in - 1 ? (int64_t)x : in - 1;
		a->i2[j] = a->i1[j] + 1 < in - 1 ? a->i1[j] + 1 : in - 1;
		a->d1[j] = fabsf(x - (float)a->i1[j]);
		a->d2[j] = fabsf(x - (float)a->i2[j]);
		if (a->i1[j] == a->i2[j])
			a->d1[j] = a->d2[j] = 0.5f;
	}
	return 0;
}

typedef struct bl_job {
	const float *x;
	float *y;
	bl_axis h, w;
	int64_t IH, IW, OH, OW;
	float *rows;            /* per member: four rows of OW */
} bl_job;

/* Input row r's values at the output columns' two neighbours. */
static void bl_gather(const bl_job *j, const float *x, int64_t r, float *n1, float *n2)
{
	const float *src = x + r * j->IW;

	for (int64_t o = 0; o < j->OW; o++) {
		n1[o] = src[j->w.i1[o]];
		n2[o] = src[j->w.i2[o]];
	}
}

/* Output row: dx2 dy2 X11 + dx1 dy2 X21 + dx2 dy1 X12 + dx1 dy1 X22 in
 * that order, as ONNX Runtime computes it on this CPU: on AVX-512 the form
 * -ffp-contract=fast gives (the later products fused into the adds: its
 * bits there, ort_bits_test on Zen 4), elsewhere every product rounded
 * before its add (its bits on Zen 3; VF_NO_CONTRACT, as VF_ROUNDED alone
 * did not stop gcc 12 from fusing them). */
static inline __attribute__((always_inline)) void
bl_blend_row(const bl_job *j, float dy1, float dy2, const float *x11, const float *x21,
	     const float *x12, const float *x22, float *y)
{
	const float *dx1 = j->w.d1, *dx2 = j->w.d2;
	int64_t o = 0;

	for (; o + 8 <= j->OW; o += 8) {
		vf8 a = vf_load(dx1 + o), b = vf_load(dx2 + o), t;

		t = VF_ROUNDED(b * dy2 * vf_load(x11 + o)) + VF_ROUNDED(a * dy2 * vf_load(x21 + o));
		t = t + VF_ROUNDED(b * dy1 * vf_load(x12 + o));
		vf_store(y + o, t + VF_ROUNDED(a * dy1 * vf_load(x22 + o)));
	}
	for (; o < j->OW; o++) {
		float t = VF_ROUNDED(dx2[o] * dy2 * x11[o]) + VF_ROUNDED(dx1[o] * dy2 * x21[o]);

		t = t + VF_ROUNDED(dx2[o] * dy1 * x12[o]);
		y[o] = t + VF_ROUNDED(dx1[o] * dy1 * x22[o]);
	}
}

CPU_MULTIVERSION
static void bl_blend_fused(const bl_job *j, float dy1, float dy2, const float *x11,
			   const float *x21, const float *x12, const float *x22, float *y)
{
	bl_blend_row(j, dy1, dy2, x11, x21, x12, x22, y);
}

CPU_MULTIVERSION VF_NO_CONTRACT
static void bl_blend_plain(const bl_job *j, float dy1, float dy2, const float *x11,
			   const float *x21, const float *x12, const float *x22, float *y)
{
	bl_blend_row(j, dy1, dy2, x11, x21, x12, x22, y);
}

static void bl_blend(const bl_job *j, float dy1, float dy2, const float *x11, const float *x21,
		     const float *x12, const float *x22, float *y)
{
	if (cpu_has_avx512())
		bl_blend_fused(j, dy1, dy2, x11, x21, x12, x22, y);
	else
		bl_blend_plain(j, dy1, dy2, x11, x21, x12, x22, y);
}

static void bl_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const bl_job *j = arg;
	float *ra = j->rows + member * 4 * j->OW, *rb = ra + 2 * j->OW;

	for (int64_t pl = p0; pl < p1; pl++) {
		const float *x = j->x + pl * j->IH * j->IW;
		float *y = j->y + pl * j->OH * j->OW;
		int64_t have_a = -1, have_b = -1;

		for (int64_t oh = 0; oh < j->OH; oh++) {
			int64_t r1 = j->h.i1[oh], r2 = j->h.i2[oh];

			if (r1 == have_b && r1 != have_a) {   /* slide down: the old second row */
				float *t = ra;
				ra = rb;
				rb = t;
				have_a = have_b;
				have_b = -1;
			}
			if (r1 != have_a) {
				bl_gather(j, x, r1, ra, ra + j->OW);
				have_a = r1;
			}
			if (r2 != have_b) {
				bl_gather(j, x, r2, rb, rb + j->OW);
				have_b = r2;
			}
			bl_blend(j, j->h.d1[oh], j->h.d2[oh], ra, ra + j->OW, rb, rb + j->OW,
				 y + oh * j->OW);
		}
	}
}

/* float32, only the last two axes resized linearly, nothing antialiased or
 * extrapolated: the bilinear path, which gives ONNX Runtime's bits (an
 * image resized in a detector's transform feeds score thresholds and,
 * quantized, DynamicQuantizeLinear).  1 when it ran (or failed: *rc). */
static int run_bilinear(cpu_ctx *ctx, const resize_params *p, const resize_geom *g,
			const rs_taps *t, const cpu_tensor *X, cpu_tensor *Y, int *rc)
{
	int r = g->rank, members = cpu_par_members(ctx);
	int64_t planes = 1;
	bl_job j;

	if (X->dtype != CPU_FLOAT || Y->dtype != CPU_FLOAT || r < 2 || p->mode != RS_LINEAR ||
	    p->antialias || p->ctm == CT_TF_CROP_AND_RESIZE || p->ctm == CT_HALF_PIXEL_SYMMETRIC)
		return 0;
	for (int d = 0; d < r - 2; d++) {
		if (!t[d].identity)
			return 0;
		planes *= g->in[d];
	}
	for (int d = r - 2; d < r; d++)
		if (t[d].n != 2 || t[d].any_extrap || g->in[d] < 1)
			return 0;
	j = (bl_job){X->data, Y->data, {0}, {0}, g->in[r - 2], g->in[r - 1], g->out[r - 2],
		     g->out[r - 1], NULL};
	j.rows = cpu_scratch(ctx, sizeof(float) * 4 * (size_t)(j.OW * members) + 1);
	if (!j.rows || bl_setup(ctx, p, g, r - 2, &j.h) || bl_setup(ctx, p, g, r - 1, &j.w)) {
		*rc = CPU_E_NOMEM;
		return 1;
	}
	/* ~0.6 ns an output element, a row gathered once per output row */
	cpu_par_for(ctx, planes, 0.6 * (double)(j.OH * j.OW * 2), 1, bl_range, &j);
	*rc = 0;
	return 1;
}

static int run_interp(cpu_ctx *ctx, const resize_params *p, const resize_geom *g,
		      const rs_taps *t, const cpu_tensor *X, cpu_tensor *Y)
{
	int64_t cap, outer = 1, nin, nout;
	double *a, *b;
	int f = 0, rc;

	if (run_bilinear(ctx, p, g, t, X, Y, &rc))
		return rc;
	/* leading axes that are not resized become an outer loop, so the
	 * double buffers hold one slice, not the whole tensor */
	while (f < g->rank - 1 && t[f].identity)
		outer *= g->in[f++];
	cap = max_intermediate(g, f);
	if (cap < 0 || (uint64_t)cap > SIZE_MAX / sizeof(double) / 2)
		return cpu_fail(ctx, CPU_E_NOMEM, "intermediate too large");
	if (!(a = cpu_scratch(ctx, sizeof(double) * (size_t)cap)) ||
	    !(b = cpu_scratch(ctx, sizeof(double) * (size_t)cap)))
		return CPU_E_NOMEM;
	nin = cpu_shape_numel(g->rank - f, g->in + f);
	nout = cpu_shape_numel(g->rank - f, g->out + f);
	for (int64_t o = 0; o < outer; o++) {
		const double *r;
		if (X->dtype == CPU_FLOAT)   /* the common case, without the dtype switch */
			for (int64_t i = 0; i < nin; i++)
				a[i] = ((const float *)X->data)[o * nin + i];
		else
			for (int64_t i = 0; i < nin; i++)
				a[i] = cpu_get_f64(X->dtype, X->data, o * nin + i);
		r = run_slice(p, g, t, f, a, b);
		if (Y->dtype == CPU_FLOAT)
			for (int64_t i = 0; i < nout; i++)
				((float *)Y->data)[o * nout + i] = (float)r[i];
		else
			for (int64_t i = 0; i < nout; i++)
				tensor_store_f64(Y->dtype, Y->data, o * nout + i, r[i]);
	}
	return 0;
}

int resize_run(cpu_ctx *ctx, const resize_params *p, const resize_geom *g,
	       const cpu_tensor *X, cpu_tensor *Y)
{
	rs_taps t[CPU_MAX_RANK];
	unsigned char extrap[16] = {0};
	int rc;

	if (cpu_numel(Y) == 0)
		return 0;
	for (int d = 0; d < g->rank; d++)
		if ((rc = build_taps(ctx, p, g, d, &t[d])) != 0)
			return rc;
	if (p->mode == RS_NEAREST) {
		tensor_store_f64(X->dtype, extrap, 0, p->extrapolation);
		run_nearest(ctx, g, t, X, Y, extrap);
		return 0;
	}
	return run_interp(ctx, p, g, t, X, Y);
}
