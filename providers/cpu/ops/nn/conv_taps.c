/*
 * conv_taps: a dilated convolution whose outer taps read the image for
 * only part of the outputs (DeepLabV3's atrous pyramid: a 3x3 filter at
 * dilation 12 on a 20x20 map, where each outer tap covers 8 of 20 rows or
 * columns), for conv.c, as one product per tap over the outputs it
 * covers instead of im2col's zeros for the rest.
 *
 * For tap (kh, kw) the outputs whose window position lies in the image
 * form a rectangle; its input pixels (one strided rectangle per channel)
 * are gathered into a Cg x rect matrix, multiplied by the tap's Mg x Cg
 * filter slice, and the product added into Y.  Bias, a residual and the
 * fused activation follow on the finished image.  Taken when the taps'
 * rectangles cover at most 60% of taps x outputs (the ASPP layer above:
 * 36%); one group, 1-D and 2-D.
 */
#include <math.h>
#include <string.h>

#include "conv_impl.h"
#include "fuse_tail.h"

/* Outputs o in [0, O) with 0 <= o s + off < I, as [*o0, *o1). */
static void tap_range(int64_t O, int64_t I, int64_t s, int64_t off, int64_t *o0, int64_t *o1)
{
	int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s, hi = I - off > 0 ? (I - off + s - 1) / s : 0;

	lo = lo < O ? lo : O;
	hi = hi < O ? hi : O;
	*o0 = lo;
	*o1 = hi > lo ? hi : lo;
}

/* The rectangle of outputs tap (kh, kw) reads the image for. */
static int64_t tap_rect(const cpu_geom *g, int64_t kh, int64_t kw, int64_t r[4])
{
	tap_range(g->out[1], g->in[1], g->s[1], kh * g->d[1] - g->pb[1], &r[0], &r[1]);
	tap_range(g->out[2], g->in[2], g->s[2], kw * g->d[2] - g->pb[2], &r[2], &r[3]);
	return (r[1] - r[0]) * (r[3] - r[2]);
}

int conv_taps_fits(const conv_job *j, int64_t group)
{
	const cpu_geom *g = &j->g;
	int64_t covered = 0, r[4];

	if (group != 1 || g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1 ||
	    (g->d[1] == 1 && g->d[2] == 1))
		return 0;
	for (int64_t kh = 0; kh < g->k[1]; kh++)
		for (int64_t kw = 0; kw < g->k[2]; kw++)
			covered += tap_rect(g, kh, kw, r);
	return covered * 10 <= g->k[1] * g->k[2] * g->out[1] * g->out[2] * 6;
}

/* The input pixels tap (kh, kw) reads for the outputs in r, channel by
 * channel: xt is Cg x rect. */
static void tap_gather(const conv_job *j, const float *xn, int64_t kh, int64_t kw,
		       const int64_t r[4], float *xt)
{
	const cpu_geom *g = &j->g;
	int64_t IW = g->in[2], isz = g->in[1] * IW, rw = r[3] - r[2];
	int64_t n_rect = (r[1] - r[0]) * rw;
	int64_t oh_in = kh * g->d[1] - g->pb[1], ow_in = kw * g->d[2] - g->pb[2];

	for (int64_t c = 0; c < j->Cg; c++)
		for (int64_t oh = r[0]; oh < r[1]; oh++) {
			const float *src = xn + c * isz + (oh * g->s[1] + oh_in) * IW + ow_in;
			float *dst = xt + c * n_rect + (oh - r[0]) * rw;

			for (int64_t ow = r[2]; ow < r[3]; ow++)
				dst[ow - r[2]] = src[ow * g->s[2]];
		}
}

/* ct (Mg x rect) added into the outputs in r of one image's Y. */
static void tap_add(const conv_job *j, const float *ct, const int64_t r[4], float *yn)
{
	int64_t OW = j->g.out[2], rw = r[3] - r[2], n_rect = (r[1] - r[0]) * rw;

	for (int64_t m = 0; m < j->Mg; m++)
		for (int64_t oh = r[0]; oh < r[1]; oh++) {
			float *yr = yn + m * j->osz + oh * OW;
			const float *cr = ct + m * n_rect + (oh - r[0]) * rw - r[2];

			for (int64_t ow = r[2]; ow < r[3]; ow++)
				yr[ow] += cr[ow];
		}
}

/* Y = the N finished images' sums acc (Y itself, or scratch) plus bias
 * and residual, then the fused activation. */
static void taps_finish(const conv_job *j, int64_t N, const float *b, const float *acc, float *y)
{
	int64_t M = j->Mg, osz = j->osz;

	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < M; m++) {
			float *yr = y + (n * M + m) * osz, bias = b ? b[m] : 0.0f;
			const float *ar = acc + (n * M + m) * osz;
			const float *res = j->res ? (const float *)j->res->data + (n * M + m) * osz : NULL;

			for (int64_t i = 0; i < osz; i++) {
				float v = ar[i] + bias;

				if (res)
					v += res[i];
				if (j->relu)
					v = v > 0.0f || v != v ? v : 0.0f;
				yr[i] = v;
			}
			if (j->act)
				cpu_fuse_act_apply(j->act, yr, osz);
		}
}

void conv_taps_pack(const float *w, int64_t M, int64_t C, int64_t taps, float *dst)
{
	for (int64_t mc = 0; mc < M * C; mc++)
		for (int64_t t = 0; t < taps; t++)
			dst[t * M * C + mc] = w[mc * taps + t];
}

int conv_taps_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x, const float *w,
		  const float *wt, const float *b, float *y)
{
	const cpu_geom *g = &j->g;
	int64_t M = j->Mg, C = j->Cg, KH = g->k[1], KW = g->k[2], osz = j->osz;
	int64_t isz = g->in[1] * g->in[2];
	/* every tap's Mg x Cg slice, from one pass over the filter (a pass
	 * per tap read all of it KH x KW times: 8.8 MB each for the ASPP
	 * layer); a constant filter's at load */
	float *ws = wt ? NULL : cpu_scratch(ctx, (size_t)(M * C * KH * KW) * sizeof(float));
	float *xt = cpu_scratch(ctx, (size_t)(C * osz) * sizeof(float));
	float *ct = cpu_scratch(ctx, (size_t)(M * osz) * sizeof(float));
	/* The sums go to Y unless the plan put Y over the residual or the
	 * input, which they would overwrite before they are read: then to
	 * scratch, and Y is written once at the end. */
	size_t ybytes = (size_t)(N * M * osz) * sizeof(float);
	int over = (j->res && cpu_bytes_overlap(j->res->data, j->res->nbytes, y, ybytes)) ||
		   cpu_bytes_overlap(x, (size_t)(N * C * isz) * sizeof(float), y, ybytes);
	float *acc = over ? cpu_scratch(ctx, (size_t)(N * M * osz) * sizeof(float)) : y;

	if ((!wt && !ws) || !xt || !ct || !acc)
		return CPU_E_NOMEM;
	memset(acc, 0, (size_t)(N * M * osz) * sizeof(float));
	if (!wt) {
		conv_taps_pack(w, M, C, KH * KW, ws);
		wt = ws;
	}
	for (int64_t kh = 0; kh < KH; kh++)
		for (int64_t kw = 0; kw < KW; kw++) {
			int64_t r[4], n_rect = tap_rect(g, kh, kw, r);

			for (int64_t n = 0; n < N && n_rect > 0; n++) {
				tap_gather(j, x + n * C * isz, kh, kw, r, xt);
				cpu_sgemm_pool(ctx->pool, 0, 0, M, n_rect, C, 1.0f,
					       wt + (kh * KW + kw) * M * C, C, xt, n_rect, 0.0f, ct,
					       n_rect);
				tap_add(j, ct, r, acc + n * M * osz);
			}
		}
	taps_finish(j, N, b, acc, y);
	return 0;
}
