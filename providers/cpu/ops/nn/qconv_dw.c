/*
 * qconv_dw: depthwise ConvInteger/QLinearConv (one input and one output
 * channel per group, 2-D), which as a GEMM would be one row per group.
 * Windows of up to 256 taps go through the float32 depthwise kernel,
 * whose sums are exact here (dw_float).  Larger ones: each plane is
 * copied once into an int16 plane of x - zx padded with
 * zeros (the input zero point, centred), and every output row sums its
 * taps' (w - zw) * x in int32: products fit 17 bits and a window of up to
 * 2^14 taps cannot overflow, so this is the exact int32 of the spec.  The
 * epilogue (int32, or the fused float of igemm_out) is igemm_finish_row,
 * so it rounds exactly as the GEMM path does.  Planes are split over the
 * pool.  Caller: qconv.c.
 */
#include <string.h>

#include "conv_impl.h"
#include "par.h"
#include "qconv_impl.h"

typedef struct dw_job {
	const qconv_run *r;
	const igemm_out *out;
	int64_t rows, cols;        /* padded plane */
	size_t per_member;         /* scratch bytes per member */
	char *scratch;
} dw_job;

/* The plane of x (either type) minus zx, zero-padded, as int16. */
static void pad_plane(const qconv_run *r, const void *x, int xs, int64_t rows, int64_t cols,
		      int16_t *xp)
{
	const cpu_geom *g = &r->g;

	for (int64_t y = 0; y < rows; y++) {
		int64_t ih = y - g->pb[1];
		int16_t *d = xp + y * cols;
		if (ih < 0 || ih >= g->in[1]) {
			memset(d, 0, (size_t)cols * sizeof(int16_t));
			continue;
		}
		for (int64_t c = 0; c < cols; c++) {
			int64_t iw = c - g->pb[2];
			int32_t v = 0;
			if (iw >= 0 && iw < g->in[2])
				v = (xs ? ((const int8_t *)x)[ih * g->in[2] + iw] :
				      ((const uint8_t *)x)[ih * g->in[2] + iw]) - r->zx;
			d[c] = (int16_t)v;
		}
	}
}

/* acc[0..ow) += w * row[k * s] for k < ow */
CPU_MULTIVERSION
static void tap_acc(int32_t *acc, const int16_t *row, int32_t w, int64_t ow, int64_t s)
{
	if (s == 1) {
		for (int64_t k = 0; k < ow; k++)
			acc[k] += w * row[k];
		return;
	}
	for (int64_t k = 0; k < ow; k++)
		acc[k] += w * row[k * s];
}

static void dw_planes(void *arg, int64_t b, int64_t e, int member)
{
	const dw_job *j = arg;
	const qconv_run *r = j->r;
	const cpu_geom *g = &r->g;
	int64_t taps = g->k[1] * g->k[2], OW = g->out[2];
	int xs = r->X->dtype == CPU_INT8, ws = r->W->dtype == CPU_INT8;
	int16_t *xp = (int16_t *)(j->scratch + (size_t)member * j->per_member);
	int32_t *acc = (int32_t *)(xp + ((j->rows * j->cols + 31) & ~(int64_t)31));
	int32_t *wc = acc + ((OW + 15) & ~(int64_t)15);

	for (int64_t pl = b; pl < e; pl++) {
		int64_t c = pl % r->M;
		int32_t zw = r->zw[r->nzw > 1 ? c : 0];
		const void *x = (const char *)r->X->data + pl * r->isz;
		const void *w = (const char *)r->W->data + c * taps;
		void *y = (int32_t *)j->out->c + pl * r->osz;

		for (int64_t t = 0; t < taps; t++)
			wc[t] = (ws ? ((const int8_t *)w)[t] : ((const uint8_t *)w)[t]) - zw;
		pad_plane(r, x, xs, j->rows, j->cols, xp);
		for (int64_t oh = 0; oh < g->out[1]; oh++) {
			memset(acc, 0, (size_t)OW * sizeof(int32_t));
			for (int64_t kh = 0; kh < g->k[1]; kh++) {
				const int16_t *row = xp + (oh * g->s[1] + kh * g->d[1]) * j->cols;
				for (int64_t kw = 0; kw < g->k[2]; kw++)
					tap_acc(acc, row + kw * g->d[2], wc[kh * g->k[2] + kw], OW,
						g->s[2]);
			}
			igemm_finish_row(j->out, c, oh * OW, OW, acc, (int32_t *)y + oh * OW,
					 j->out->add ? j->out->add + pl * r->osz + oh * OW : NULL);
		}
	}
}

/* ---- through the float32 depthwise kernel ---- */

typedef struct dwf_job {
	const qconv_run *r;
	const igemm_out *out;
	float *xf, *yf;
} dwf_job;

/* Planes [b, e) of x minus zx as floats. */
CPU_MULTIVERSION
static void centre_planes(void *arg, int64_t b, int64_t e, int member)
{
	const dwf_job *j = arg;
	const qconv_run *r = j->r;
	float zx = (float)r->zx;

	(void)member;
	if (r->X->dtype == CPU_INT8) {
		const int8_t *x = r->X->data;
		for (int64_t i = b * r->isz; i < e * r->isz; i++)
			j->xf[i] = (float)x[i] - zx;
	} else {
		const uint8_t *x = r->X->data;
		for (int64_t i = b * r->isz; i < e * r->isz; i++)
			j->xf[i] = (float)x[i] - zx;
	}
}

static void finish_planes(void *arg, int64_t b, int64_t e, int member)
{
	const dwf_job *j = arg;
	const qconv_run *r = j->r;
	const igemm_out *o = j->out;

	(void)member;
	for (int64_t pl = b; pl < e; pl++)
		igemm_finish_row_f(o, pl % r->M, r->osz, j->yf + pl * r->osz,
				   (int32_t *)o->c + pl * r->osz, o->add ? o->add + pl * r->osz : NULL);
}

/* The sums in float32 are exact: every partial sum is an integer below
 * 2^24 (at most 256 taps of products up to 255 x 255), so the float
 * depthwise kernel (conv_dw.c: padded planes, taps in registers) gives
 * the spec's int32 sums, whatever its order of additions. */
static int dw_float(cpu_ctx *ctx, const qconv_run *r, const igemm_out *out)
{
	const cpu_geom *g = &r->g;
	int64_t taps = g->k[1] * g->k[2], planes = r->N * r->M;
	float *wf = cpu_scratch(ctx, (size_t)(r->M * taps) * sizeof(float));
	conv_job cj;
	dwf_job j = {r, out, NULL, NULL};
	int ws = r->W->dtype == CPU_INT8, rc;

	j.xf = cpu_scratch(ctx, (size_t)(planes * r->isz) * sizeof(float) + 64);
	j.yf = cpu_scratch(ctx, (size_t)(planes * r->osz) * sizeof(float) + 64);
	if (!wf || !j.xf || !j.yf)
		return CPU_E_NOMEM;
	for (int64_t c = 0; c < r->M; c++)
		for (int64_t t = 0; t < taps; t++)
			wf[c * taps + t] = (float)((ws ? ((const int8_t *)r->W->data)[c * taps + t] :
						((const uint8_t *)r->W->data)[c * taps + t]) -
					       r->zw[r->nzw > 1 ? c : 0]);
	memset(&cj, 0, sizeof(cj));
	cj.g = *g;
	cj.Cg = 1;
	cj.Mg = 1;
	cj.ksz = taps;
	cj.osz = r->osz;
	cpu_par_for(ctx, planes, 0.3 * (double)r->isz, 1, centre_planes, &j);
	if ((rc = conv_dw_run(ctx, &cj, j.xf, wf, NULL, j.yf, planes, r->M)))
		return rc;
	cpu_par_for(ctx, planes, 0.5 * (double)r->osz, 1, finish_planes, &j);
	return 0;
}

int qconv_depthwise(cpu_ctx *ctx, const qconv_run *r, const igemm_out *out)
{
	const cpu_geom *g = &r->g;
	int members = cpu_par_members(ctx);
	int64_t taps = g->k[1] * g->k[2];
	dw_job j;

	j.r = r;
	j.out = out;
	j.rows = (g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
	j.cols = (g->out[2] - 1) * g->s[2] + (g->k[2] - 1) * g->d[2] + 1;
	j.per_member = ((size_t)((j.rows * j.cols + 31) & ~(int64_t)31) * 2 +
			(size_t)((g->out[2] + 15) & ~(int64_t)15) * 4 + (size_t)taps * 4 + 63) &
		       ~(size_t)63;
	if (taps <= 256 && !out->scale_col && !out->bias_col &&
	    conv_dw_fits(&(conv_job){.g = r->g}))
		return dw_float(ctx, r, out);
	if (taps > (1 << 14))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "depthwise window of %lld taps",
				(long long)taps);
	if (!(j.scratch = cpu_scratch(ctx, j.per_member * (size_t)members)))
		return CPU_E_NOMEM;
	cpu_par_for(ctx, r->N * r->M, 0.4 * (double)(r->osz * taps) + (double)(j.rows * j.cols),
		    1, dw_planes, &j);
	return 0;
}
