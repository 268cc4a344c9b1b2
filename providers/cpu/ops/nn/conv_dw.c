/*
 * conv_dw: the depthwise convolution of 1-D and 2-D images (one input and
 * one output channel per group: MobileNet's and EfficientNet's 3x3 and 5x5
 * layers), for conv.c.
 *
 * Each plane is first copied into a zero-padded buffer (one per pool
 * member), so every output pixel reads its whole window without bounds
 * checks: the pad is what ONNX's zero padding means, and the copy costs
 * one pass over the input against kernel-size passes of multiply-adds.
 * Output rows are then computed eight pixels at a time with the taps in
 * registers (bias, residual, taps, activation, one store per pixel);
 * kernels 3x3 / 5x5 / 7x7 (and 1x3, 1x5 ... of 1-D convolutions) at
 * stride 1 or 2 without dilation get unrolled loops, anything else a
 * plain loop over the same padded plane.  Planes are split over the pool.
 */
#include <string.h>

#include "conv_impl.h"
#include "par.h"
#include "vfloat.h"

/* Floats of slack after a padded plane: the last vector of a row reads up
 * to 2 x 8 + 7 past its final pixel. */
#define DW_SLACK 64

typedef struct dw_job {
	const conv_job *j;
	const float *x, *w, *b;
	float *y;
	int64_t channels;
	float *pad;              /* per member, plane_floats each */
	int64_t PH, PW, plane_floats;
} dw_job;

/* The plane at x (IH x IW) into xp (PH x PW) with pt rows and pl columns
 * of zeros before it and zeros after it. */
static void pad_plane(const float *x, int64_t IH, int64_t IW, float *xp, int64_t PH,
		      int64_t PW, int64_t pt, int64_t pl)
{
	int64_t rows = IH < PH - pt ? IH : PH - pt;
	int64_t cols = IW < PW - pl ? IW : PW - pl;

	memset(xp, 0, (size_t)(pt * PW) * sizeof(float));
	for (int64_t r = 0; r < rows; r++) {
		float *d = xp + (pt + r) * PW;

		memset(d, 0, (size_t)pl * sizeof(float));
		memcpy(d + pl, x + r * IW, (size_t)cols * sizeof(float));
		memset(d + pl + cols, 0, (size_t)(PW - pl - cols) * sizeof(float));
	}
	memset(xp + (pt + rows) * PW, 0, (size_t)((PH - pt - rows) * PW + DW_SLACK) * sizeof(float));
}

/* The 8 values r[s * i] for i < 8 (s = 1 or 2). */
static inline __attribute__((always_inline)) vf8 load_s(const float *r, int s)
{
	if (s == 1)
		return vf_load(r);
	return __builtin_shuffle(vf_load(r), vf_load(r + 8), (vi8){0, 2, 4, 6, 8, 10, 12, 14});
}

/* One output row with a KH x KW window at stride s, taps unrolled when
 * the arguments are constants. */
static inline __attribute__((always_inline)) void
dw_row(float *y, const float *res, const float *x, int64_t PW, const float *w, float bias,
       int64_t OW, int KH, int KW, int s, int relu)
{
	int64_t ow = 0;

	for (; ow < OW; ow += 8) {
		vf8 acc = vf_splat(bias);

		if (res)
			acc += OW - ow >= 8 ? vf_load(res + ow) : vf_load_part(res + ow, OW - ow, 0.0f);
		for (int kh = 0; kh < KH; kh++)
			for (int kw = 0; kw < KW; kw++)
				acc += w[kh * KW + kw] * load_s(x + kh * PW + ow * s + kw, s);
		if (relu)
			acc = vf_sel(acc < 0.0f, vf_splat(0.0f), acc);
		if (OW - ow >= 8)
			vf_store(y + ow, acc);
		else
			vf_store_part(y + ow, acc, OW - ow);
	}
}

/* Any window, stride and dilation, one pixel at a time. */
static void dw_row_any(float *y, const float *res, const float *x, int64_t PW, const float *w,
		       float bias, int64_t OW, const cpu_geom *g, int relu)
{
	for (int64_t ow = 0; ow < OW; ow++) {
		float acc = bias + (res ? res[ow] : 0.0f);

		for (int64_t kh = 0; kh < g->k[1]; kh++)
			for (int64_t kw = 0; kw < g->k[2]; kw++)
				acc += w[kh * g->k[2] + kw] *
				       x[kh * g->d[1] * PW + ow * g->s[2] + kw * g->d[2]];
		y[ow] = relu && acc < 0.0f ? 0.0f : acc;
	}
}

#define DW_CASE(KH, KW, S)                                                            \
	for (int64_t oh = 0; oh < OH; oh++)                                           \
		dw_row(y + oh * OW, res ? res + oh * OW : NULL, xp + oh * sh * PW, PW, \
		       w, bias, OW, KH, KW, S, relu)

/* One padded plane into y. */
CPU_MULTIVERSION
static void dw_plane(const cpu_geom *g, const float *xp, int64_t PW, const float *w, float bias,
		     const float *res, float *y, int relu)
{
	int64_t OH = g->out[1], OW = g->out[2], sh = g->s[1];
	int64_t kh = g->k[1], kw = g->k[2], sw = g->s[2];
	int plain = g->d[1] == 1 && g->d[2] == 1 && (sw == 1 || sw == 2) && kh == kw;

	if (plain && kh == 3 && sw == 1)
		DW_CASE(3, 3, 1);
	else if (plain && kh == 3 && sw == 2)
		DW_CASE(3, 3, 2);
	else if (plain && kh == 5 && sw == 1)
		DW_CASE(5, 5, 1);
	else if (plain && kh == 5 && sw == 2)
		DW_CASE(5, 5, 2);
	else if (plain && kh == 7 && sw == 1)
		DW_CASE(7, 7, 1);
	else
		for (int64_t oh = 0; oh < OH; oh++)
			dw_row_any(y + oh * OW, res ? res + oh * OW : NULL, xp + oh * sh * PW, PW, w,
				   bias, OW, g, relu);
}

static void dw_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const dw_job *d = arg;
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t isz = g->in[1] * g->in[2], taps = g->k[1] * g->k[2];
	float *xp = d->pad + member * d->plane_floats;

	for (int64_t p = p0; p < p1; p++) {
		int64_t c = p % d->channels;
		const float *res = j->res ? (const float *)j->res->data + p * j->osz : NULL;

		pad_plane(d->x + p * isz, g->in[1], g->in[2], xp, d->PH, d->PW, g->pb[1], g->pb[2]);
		dw_plane(g, xp, d->PW, d->w + c * taps, d->b ? d->b[c] : 0.0f, res, d->y + p * j->osz,
			 j->relu);
		if (j->act)
			cpu_fuse_act_apply(j->act, d->y + p * j->osz, j->osz);
	}
}

int conv_dw_fits(const conv_job *j)
{
	return j->g.k[0] == 1 && j->g.in[0] == 1 && j->g.out[0] == 1;
}

int conv_dw_run(cpu_ctx *ctx, const conv_job *j, const float *x, const float *w,
		const float *b, float *y, int64_t planes, int64_t channels)
{
	const cpu_geom *g = &j->g;
	int64_t OH = g->out[1], OW = g->out[2];
	int64_t rows = (OH - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
	int64_t cols = (OW - 1) * g->s[2] + (g->k[2] - 1) * g->d[2] + 1;
	int members = cpu_par_members(ctx);
	dw_job d = {j, x, w, b, y, channels, NULL, 0, 0, 0};

	/* Rows a vector reads past the last pixel: up to 8 * stride more. */
	d.PH = rows > g->in[1] + g->pb[1] ? rows : g->in[1] + g->pb[1];
	d.PW = cols + 8 * g->s[2] > g->in[2] + g->pb[2] ? cols + 8 * g->s[2] : g->in[2] + g->pb[2];
	d.plane_floats = d.PH * d.PW + DW_SLACK;
	d.pad = cpu_scratch(ctx, (size_t)members * (size_t)d.plane_floats * sizeof(float));
	if (!d.pad)
		return CPU_E_NOMEM;
	/* ~0.5 ns a multiply-add on one core, vectorized */
	cpu_par_for(ctx, planes, 0.5 * (double)(OH * OW * g->k[1] * g->k[2] + d.plane_floats), 1,
		    dw_range, &d);
	return 0;
}
