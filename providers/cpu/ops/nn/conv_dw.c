/*
 * conv_dw: the depthwise convolution of 1-D and 2-D images (one input and
 * one output channel per group: MobileNet's and EfficientNet's 3x3 and 5x5
 * layers), for conv.c and qconv_dw.c.
 *
 * NCHW keeps each channel in its own plane, and a plane makes a poor
 * vector: a 7x7 or 14x14 plane is a few partial vectors a row, and even a
 * 112x112 one needs its padded copy, its row ends and its stores each
 * handled apart (the kernel that worked plane by plane ran 2.5x to 8x
 * behind ONNX Runtime's channel-blocked one on MobileNetV2's layers).
 * So eight planes at a time are interleaved, a pixel's eight channels one
 * vector, as a channel-blocked layout has them: every tap is then one
 * vector multiply-add for eight outputs whatever the plane's size, a
 * pixel's neighbours are whole vectors (no unaligned row arithmetic), and
 * the interleaving costs one 8x8 transpose per eight pixels in and out.
 *
 * The input rows go through a ring of padded rows (the window's height),
 * each row transposed into it once: padding is the ring's zero columns and
 * zero rows, so no output checks bounds.  Output rows are computed eight
 * pixels at a time (eight independent sums, each tap's weight vector loaded
 * once for all eight) into a strip kept in L1, whose pixels are then
 * transposed back into the eight planes as runs of the flat plane, with
 * the residual and the clamp (Relu, a fused Clip) on the way; another
 * fused activation runs over the strip before it, or over the planes after
 * when a residual comes first.  Groups of eight planes are split over the
 * pool; a last group of fewer planes computes the missing ones' lanes
 * from a present plane with zero weights and stores nothing of them.
 */
#include <math.h>
#include <string.h>

#include "conv_impl.h"
#include "par.h"
#include "vfloat.h"

/* Planes interleaved (the vector width). */
#define DW_L 8
/* Output pixels a strip holds at most, roughly (8 KiB of results). */
#define DW_STRIP_PX 256

typedef struct dw_job {
	const conv_job *j;
	const float *x, *x_end, *w, *b;
	float *y;
	int64_t planes, channels, taps;
	int64_t IH, IW, OH, OW, sh, sw, dh, dw, KH, KW, pt, pl;
	int64_t PW;              /* padded row width in pixels */
	int64_t ring;            /* padded rows the ring holds */
	int64_t srows;           /* output rows per strip */
	int clamp;               /* clamp to [lo, hi] as pixels are stored */
	float lo, hi;
	const cpu_fusion *act;   /* another activation, or NULL */
	float *buf;              /* per member: buf_floats each */
	int64_t buf_floats, ring_floats, strip_floats;
} dw_job;

/* Padded row r into its ring slot: the image row of each plane (src[q]
 * points at the plane) transposed into pixels pl .. pl + IW, or zeros
 * outside the image.  The pad columns are zero from the start and never
 * written, except by the zero lanes of a row narrower than a vector,
 * which land on them. */
static inline __attribute__((always_inline)) void dw_fill(const dw_job *d, const float *const *src,
							  int64_t r, float *ring)
{
	float *dst = ring + (r % d->ring) * d->PW * DW_L + d->pl * DW_L;
	int64_t ir = r - d->pt, IW = d->IW;
	vf8 v[8];

	if (ir < 0 || ir >= d->IH) {
		for (int64_t i = 0; i < IW; i++)
			vf_store(dst + i * DW_L, vf_splat(0.0f));
		return;
	}
	if (IW < 8) {
		/* a whole vector, the lanes past the row zeroed, where it stays
		 * inside x (all but the last plane's last rows) */
		vi8 in = (vi8){0, 1, 2, 3, 4, 5, 6, 7} < (vi8)(vf8){0} + (int32_t)IW;

		for (int q = 0; q < DW_L; q++) {
			const float *p = src[q] + ir * IW;

			v[q] = p + 8 <= d->x_end ? vf_sel(in, vf_load(p), vf_splat(0.0f))
						 : vf_load_part(p, IW, 0.0f);
		}
		vf_transpose8(v);
		for (int i = 0; i < 8; i++)
			vf_store(dst + i * DW_L, v[i]);
		return;
	}
	for (int64_t c = 0;; c += 8) {
		if (c + 8 > IW)
			c = IW - 8;   /* the last run overlaps: same values again */
		for (int q = 0; q < DW_L; q++)
			v[q] = vf_load(src[q] + ir * IW + c);
		vf_transpose8(v);
		for (int i = 0; i < 8; i++)
			vf_store(dst + (c + i) * DW_L, v[i]);
		if (c + 8 >= IW)
			break;
	}
}

/* Output row oh's pixels (a multiple of 8 of them, the ones past OW
 * spilling into the next row's place) into o: bias plus every tap, the
 * window's rows at rows[kh].  KW, SW and DW are the kernel width, column
 * stride and dilation when they are constants the loops can fold, else 0
 * (left to the loop, the offsets of eight pixels by three taps outgrow
 * the registers). */
static inline __attribute__((always_inline)) void dw_row(const dw_job *d, const float *const *rows,
							 const float *wt, vf8 bias, float *o,
							 const int KW, const int SW, const int DW)
{
	int64_t kwn = KW ? KW : d->KW, sw = SW ? SW : d->sw, dw = DW ? DW : d->dw;

	for (int64_t ow = 0; ow < d->OW; ow += 8) {
		vf8 a[8];

		for (int i = 0; i < 8; i++)
			a[i] = bias;
		for (int64_t kh = 0; kh < d->KH; kh++) {
			const float *row = rows[kh] + ow * sw * DW_L;
			const float *wk = wt + kh * kwn * DW_L;

#pragma GCC unroll 5
			for (int64_t kw = 0; kw < kwn; kw++) {
				const float *p = row + kw * dw * DW_L;
				vf8 wv = vf_load(wk + kw * DW_L);

#pragma GCC unroll 8
				for (int i = 0; i < 8; i++)
					a[i] += wv * vf_load(p + i * sw * DW_L);
			}
		}
		for (int i = 0; i < 8; i++)
			vf_store(o + (ow + i) * DW_L, a[i]);
	}
}

/* One transposed vector of a plane: residual, clamp to [lo, hi] (when
 * clamp), store of m pixels.  The bounds come in registers: read through
 * the job, each store to y (a float, as they are) would reload them. */
static inline __attribute__((always_inline)) void dw_put(vf8 v, float *y, const float *res,
							 int64_t m, int clamp, vf8 lo, vf8 hi)
{
	if (res)
		v += m == 8 ? vf_load(res) : vf_load_part(res, m, 0.0f);
	if (clamp) {
		v = vf_sel(v < lo, lo, v);
		v = vf_sel(v > hi, hi, v);
	}
	if (m == 8)
		vf_store(y, v);
	else
		vf_store_part(y, v, m);
}

/* The strip's n pixels (flat f0 .. f0 + n of each plane) from o into the
 * planes: transposed back, then residual, clamp and store; lanes past
 * `lanes` are dropped.  A whole group takes the loop without a runtime
 * lane count, so the vectors stay in registers. */
static inline __attribute__((always_inline)) void dw_store(const dw_job *d, const float *o,
							   int64_t f0, int64_t n, float *const *dst,
							   const float *const *res, int lanes)
{
	const int clamp = d->clamp;
	const vf8 lo = vf_splat(d->lo), hi = vf_splat(d->hi);
	int64_t f = 0;

	for (; f + 8 <= n; f += 8) {
		vf8 v[8];

		for (int i = 0; i < 8; i++)
			v[i] = vf_load(o + (f + i) * DW_L);
		vf_transpose8(v);
		if (lanes == DW_L)
			for (int q = 0; q < DW_L; q++)
				dw_put(v[q], dst[q] + f0 + f, res ? res[q] + f0 + f : NULL, 8, clamp,
				       lo, hi);
		else
			for (int q = 0; q < lanes; q++)
				dw_put(v[q], dst[q] + f0 + f, res ? res[q] + f0 + f : NULL, 8, clamp,
				       lo, hi);
	}
	if (f == n)
		return;
	/* The tail: a whole vector ending at n stores some pixels twice with
	 * the same values, unless the residual is y itself (it would be added
	 * twice); else the last pixels alone. */
	int64_t m = n - f;

	if (n >= 8 && !(res && (const float *)res[0] == dst[0])) {
		f = n - 8;
		m = 8;
	}
	vf8 v[8];

	for (int i = 0; i < 8; i++)
		v[i] = vf_load(o + (f + i) * DW_L);
	vf_transpose8(v);
	for (int q = 0; q < lanes; q++)
		dw_put(v[q], dst[q] + f0 + f, res ? res[q] + f0 + f : NULL, m, clamp, lo, hi);
}

/* One group of up to eight planes starting at plane p0. */
CPU_MULTIVERSION
static void dw_group(const dw_job *d, int64_t p0, float *buf)
{
	const conv_job *j = d->j;
	int64_t isz = d->IH * d->IW, osz = j->osz;
	int lanes = d->planes - p0 < DW_L ? (int)(d->planes - p0) : DW_L;
	float *ring = buf, *o = buf + d->ring_floats, *wt = o + d->strip_floats;
	const float **win = (const float **)(wt + d->taps * DW_L);
	const float *src[DW_L], *res[DW_L];
	float *dst[DW_L];
	float bias[DW_L];
	int64_t next = 0;   /* the first padded row not yet in the ring */

	for (int q = 0; q < DW_L; q++) {
		int64_t p = p0 + (q < lanes ? q : 0), c = p % d->channels;

		/* a missing plane repeats the first one with zero weights:
		 * its lane is computed and dropped */
		src[q] = d->x + p * isz;
		dst[q] = d->y + p * osz;
		res[q] = j->res ? (const float *)j->res->data + p * osz : NULL;
		bias[q] = d->b ? d->b[c] : 0.0f;
		for (int64_t t = 0; t < d->taps; t++)
			wt[t * DW_L + q] = q < lanes ? d->w[c * d->taps + t] : 0.0f;
	}
	vf8 bv = vf_load(bias);

	for (int64_t oh0 = 0; oh0 < d->OH; oh0 += d->srows) {
		int64_t rows = d->OH - oh0 < d->srows ? d->OH - oh0 : d->srows;

		for (int64_t oh = oh0; oh < oh0 + rows; oh++) {
			int64_t last = oh * d->sh + (d->KH - 1) * d->dh;

			if (next < oh * d->sh)
				next = oh * d->sh;
			for (; next <= last; next++)
				dw_fill(d, src, next, ring);
			float *orow = o + (oh - oh0) * d->OW * DW_L;

			for (int64_t kh = 0; kh < d->KH; kh++)
				win[kh] = ring + ((oh * d->sh + kh * d->dh) % d->ring) * d->PW * DW_L;
			if (d->KW == 3 && d->sw == 1 && d->dw == 1)
				dw_row(d, win, wt, bv, orow, 3, 1, 1);
			else if (d->KW == 3 && d->sw == 2 && d->dw == 1)
				dw_row(d, win, wt, bv, orow, 3, 2, 1);
			else if (d->KW == 5 && d->sw == 1 && d->dw == 1)
				dw_row(d, win, wt, bv, orow, 5, 1, 1);
			else if (d->KW == 5 && d->sw == 2 && d->dw == 1)
				dw_row(d, win, wt, bv, orow, 5, 2, 1);
			else
				dw_row(d, win, wt, bv, orow, 0, 0, 0);
		}
		if (d->act && !j->res)
			cpu_fuse_act_apply(d->act, o, rows * d->OW * DW_L);
		dw_store(d, o, oh0 * d->OW, rows * d->OW, dst, j->res ? res : NULL, lanes);
	}
	if (d->act && j->res)
		for (int q = 0; q < lanes; q++)
			cpu_fuse_act_apply(d->act, dst[q], osz);
}

static void dw_range(void *arg, int64_t g0, int64_t g1, int member)
{
	const dw_job *d = arg;
	float *buf = d->buf + member * d->buf_floats;

	/* the ring's pad columns and the zero rows stay zero from here on */
	memset(buf, 0, (size_t)d->buf_floats * sizeof(float));
	for (int64_t g = g0; g < g1; g++)
		dw_group(d, g * DW_L, buf);
}

int conv_dw_fits(const conv_job *j)
{
	return j->g.k[0] == 1 && j->g.in[0] == 1 && j->g.out[0] == 1;
}

int conv_dw_run(cpu_ctx *ctx, const conv_job *j, const float *x, const float *w,
		const float *b, float *y, int64_t planes, int64_t channels)
{
	const cpu_geom *g = &j->g;
	int members = cpu_par_members(ctx);
	dw_job d = {.j = j, .x = x, .w = w, .b = b, .y = y, .planes = planes, .channels = channels};

	d.IH = g->in[1], d.IW = g->in[2], d.OH = g->out[1], d.OW = g->out[2];
	d.sh = g->s[1], d.sw = g->s[2], d.dh = g->d[1], d.dw = g->d[2];
	d.KH = g->k[1], d.KW = g->k[2], d.pt = g->pb[1], d.pl = g->pb[2];
	d.taps = d.KH * d.KW;
	d.x_end = x + planes * d.IH * d.IW;
	/* every column an output of the rounded-up rows reads, and the image
	 * with a whole vector of it (a row narrower than 8 stores 8 pixels) */
	int64_t owr = (d.OW + 7) / 8 * 8;
	int64_t need = (owr - 1) * d.sw + (d.KW - 1) * d.dw + 1;
	int64_t img = d.pl + (d.IW > 8 ? d.IW : 8);

	d.PW = need > img ? need : img;
	d.ring = (d.KH - 1) * d.dh + 1;
	d.srows = DW_STRIP_PX / d.OW > 0 ? DW_STRIP_PX / d.OW : 1;
	if (d.srows > d.OH)
		d.srows = d.OH;
	/* a strip's pixels a multiple of 8 except the plane's last */
	while ((d.srows * d.OW) % 8 && d.srows < d.OH)
		d.srows++;
	d.ring_floats = d.ring * d.PW * DW_L;
	d.strip_floats = (d.srows * d.OW + 8) * DW_L;
	/* the ring, the strip, the weights, then the window's row pointers */
	d.buf_floats = (d.ring_floats + d.strip_floats + d.taps * DW_L + 2 * d.KH + 15) / 16 * 16;
	d.act = j->act;
	if (j->relu || (j->act && j->act->act == CPU_FUSE_ACT_CLIP)) {
		d.clamp = 1;
		d.lo = j->relu ? 0.0f : j->act->act_a;
		d.hi = j->relu ? INFINITY : j->act->act_b;
		d.act = NULL;
	}
	d.buf = cpu_scratch(ctx, (size_t)members * (size_t)d.buf_floats * sizeof(float));
	if (!d.buf)
		return CPU_E_NOMEM;
	int64_t groups = (planes + DW_L - 1) / DW_L;

	/* ~0.07 ns a multiply-add of a group on one core, plus the transposes */
	cpu_par_for(ctx, groups,
		    0.07 * (double)(d.OH * owr * d.taps * DW_L) +
			    0.15 * (double)(d.IH * d.IW + d.OH * d.OW) * DW_L,
		    1, dw_range, &d);
	return 0;
}
