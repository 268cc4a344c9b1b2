/*
 * conv_grouped: grouped convolutions with few channels per group (RegNet's
 * and ResNeXt's 3x3 layers: 4 to 32 input and output channels a group) on
 * 1-D and 2-D images, for conv.c.
 *
 * Through the GEMM, each group would be a product with as few rows as the
 * group has output channels, after an im2col of its few input channels:
 * packing dominated and the pool had nothing to split.  Here a group's
 * input planes are copied into zero-padded buffers (as conv_dw.c does),
 * and each output row is computed eight pixels at a time for blocks of
 * eight output channels, all taps of all the group's input channels
 * accumulating in registers: one load of eight input pixels feeds eight
 * multiply-adds.  Filters are re-laid out as [group][channel block]
 * [input channel][kh][kw][8] (zero-padded past the group's last channel),
 * once at load when the filter is constant.  Work is split over the pool
 * by (image, group).
 */
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "par.h"
#include "vfloat.h"

#define GC_BLOCK 8
#define GC_SLACK 64

int conv_grouped_fits(const conv_job *j, int64_t group)
{
	return group > 1 && !(j->Cg == 1 && j->Mg == 1) && j->Cg <= 32 && j->Mg <= 32 &&
	       j->g.k[0] == 1 && j->g.in[0] == 1 && j->g.out[0] == 1;
}

size_t conv_grouped_wsize(int64_t G, int64_t Mg, int64_t Cg, int64_t taps)
{
	int64_t blocks = (Mg + GC_BLOCK - 1) / GC_BLOCK;

	return (size_t)(G * blocks * Cg * taps * GC_BLOCK) * sizeof(float);
}

void conv_grouped_pack(const float *w, int64_t G, int64_t Mg, int64_t Cg, int64_t taps,
		       float *dst)
{
	int64_t blocks = (Mg + GC_BLOCK - 1) / GC_BLOCK;

	for (int64_t g = 0; g < G; g++)
		for (int64_t b = 0; b < blocks; b++)
			for (int64_t c = 0; c < Cg; c++)
				for (int64_t t = 0; t < taps; t++)
					for (int64_t i = 0; i < GC_BLOCK; i++) {
						int64_t m = b * GC_BLOCK + i;

						*dst++ = m < Mg ? w[((g * Mg + m) * Cg + c) * taps + t] : 0.0f;
					}
}

typedef struct gc_job {
	const conv_job *j;
	const float *x, *w, *b;   /* w: packed */
	float *y;
	int64_t G;
	float *pad;               /* per member: Cg padded planes */
	int64_t PH, PW, plane, member_floats;
} gc_job;

/* The 8 values r[s * i] for i < 8 (s = 1 or 2). */
static inline __attribute__((always_inline)) vf8 gc_load(const float *r, int s)
{
	if (s == 1)
		return vf_load(r);
	return __builtin_shuffle(vf_load(r), vf_load(r + 8), (vi8){0, 2, 4, 6, 8, 10, 12, 14});
}

/* One output row of one block of up to 8 channels: y[m * osz + ow]. */
static inline __attribute__((always_inline)) void
gc_row(float *y, const float *res, int64_t osz, const float *xp, int64_t plane, int64_t PW,
       const float *w, const float *bias, int nm, int64_t Cg, int KH, int KW, int s,
       int64_t OW, int relu)
{
	for (int64_t ow = 0; ow < OW; ow += 8) {
		int64_t left = OW - ow < 8 ? OW - ow : 8;
		vf8 acc[GC_BLOCK];

		for (int m = 0; m < GC_BLOCK; m++) {
			acc[m] = vf_splat(m < nm && bias ? bias[m] : 0.0f);
			if (res && m < nm)
				acc[m] += vf_load_part(res + m * osz + ow, left, 0.0f);
		}
		for (int64_t c = 0; c < Cg; c++) {
			const float *xc = xp + c * plane + ow * s;
			const float *wc = w + c * KH * KW * GC_BLOCK;

			for (int kh = 0; kh < KH; kh++)
				for (int kw = 0; kw < KW; kw++) {
					vf8 xv = gc_load(xc + kh * PW + kw, s);
					const float *wt = wc + (kh * KW + kw) * GC_BLOCK;

					for (int m = 0; m < GC_BLOCK; m++)
						acc[m] += wt[m] * xv;
				}
		}
		for (int m = 0; m < nm; m++) {
			vf8 v = relu ? vf_sel(acc[m] < 0.0f, vf_splat(0.0f), acc[m]) : acc[m];

			if (left == 8)
				vf_store(y + m * osz + ow, v);
			else
				vf_store_part(y + m * osz + ow, v, left);
		}
	}
}

#define GC_CASE(KH, KW, S)                                                              \
	for (int64_t oh = 0; oh < OH; oh++)                                             \
		gc_row(y + oh * OW, res ? res + oh * OW : NULL, osz, xp + oh * sh * PW,   \
		       plane, PW, w, bias, nm, Cg, KH, KW, S, OW, relu)

/* One block of output channels of one group from its padded planes. */
CPU_MULTIVERSION
static void gc_block(const cpu_geom *g, const float *xp, int64_t plane, int64_t PW,
		     const float *w, const float *bias, int nm, int64_t Cg, const float *res,
		     float *y, int relu)
{
	int64_t OH = g->out[1], OW = g->out[2], osz = OH * OW, sh = g->s[1];
	int64_t kh = g->k[1], kw = g->k[2], sw = g->s[2];
	int plain = g->d[1] == 1 && g->d[2] == 1 && (sw == 1 || sw == 2);

	if (plain && kh == 3 && kw == 3 && sw == 1)
		GC_CASE(3, 3, 1);
	else if (plain && kh == 3 && kw == 3 && sw == 2)
		GC_CASE(3, 3, 2);
	else if (plain && kh == 1 && kw == 1 && sw == 1)
		GC_CASE(1, 1, 1);
	else if (plain && kh == 5 && kw == 5 && sw == 1)
		GC_CASE(5, 5, 1);
	else
		/* any window: one pixel at a time over the same padded planes */
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++)
				for (int m = 0; m < nm; m++) {
					float acc = (bias ? bias[m] : 0.0f) +
						    (res ? res[m * osz + oh * OW + ow] : 0.0f);

					for (int64_t c = 0; c < Cg; c++)
						for (int64_t i = 0; i < kh; i++)
							for (int64_t k = 0; k < kw; k++)
								acc += w[((c * kh + i) * kw + k) * GC_BLOCK + m] *
								       xp[c * plane + (oh * sh + i * g->d[1]) * PW +
									  ow * sw + k * g->d[2]];
					y[m * osz + oh * OW + ow] = relu && acc < 0.0f ? 0.0f : acc;
				}
}

static void pad_planes(const cpu_geom *g, const float *x, int64_t C, float *xp, int64_t PH,
		       int64_t PW, int64_t plane)
{
	int64_t IH = g->in[1], IW = g->in[2], pt = g->pb[1], pl = g->pb[2];
	int64_t rows = IH < PH - pt ? IH : PH - pt, cols = IW < PW - pl ? IW : PW - pl;

	for (int64_t c = 0; c < C; c++) {
		float *p = xp + c * plane;

		memset(p, 0, (size_t)plane * sizeof(float));
		for (int64_t r = 0; r < rows; r++)
			memcpy(p + (pt + r) * PW + pl, x + (c * IH + r) * IW, (size_t)cols * sizeof(float));
	}
}

static void gc_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const gc_job *d = arg;
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t isz = g->in[1] * g->in[2], taps = g->k[1] * g->k[2];
	int64_t blocks = (j->Mg + GC_BLOCK - 1) / GC_BLOCK, M = d->G * j->Mg;
	float *xp = d->pad + member * d->member_floats;

	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / d->G, grp = it % d->G;

		pad_planes(g, d->x + (n * d->G + grp) * j->Cg * isz, j->Cg, xp, d->PH, d->PW, d->plane);
		for (int64_t b = 0; b < blocks; b++) {
			int64_t m0 = grp * j->Mg + b * GC_BLOCK;
			int nm = (int)(j->Mg - b * GC_BLOCK < GC_BLOCK ? j->Mg - b * GC_BLOCK : GC_BLOCK);
			int64_t yoff = (n * M + m0) * j->osz;

			gc_block(g, xp, d->plane, d->PW,
				 d->w + ((grp * blocks + b) * j->Cg * taps) * GC_BLOCK,
				 d->b ? d->b + m0 : NULL, nm, j->Cg,
				 j->res ? (const float *)j->res->data + yoff : NULL, d->y + yoff, j->relu);
			if (j->act)
				cpu_fuse_act_apply(j->act, d->y + yoff, nm * j->osz);
		}
	}
}

int conv_grouped_run(cpu_ctx *ctx, const conv_job *j, int64_t N, int64_t G, const float *x,
		     const float *wpacked, const float *b, float *y)
{
	const cpu_geom *g = &j->g;
	int64_t OH = g->out[1], OW = g->out[2];
	int64_t rows = (OH - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
	int64_t cols = (OW - 1) * g->s[2] + (g->k[2] - 1) * g->d[2] + 1;
	int members = cpu_par_members(ctx);
	gc_job d = {j, x, wpacked, b, y, G, NULL, 0, 0, 0, 0};

	d.PH = rows > g->in[1] + g->pb[1] ? rows : g->in[1] + g->pb[1];
	/* the last vector of a row reads up to 8 x stride past it */
	d.PW = cols + 8 * g->s[2] > g->in[2] + g->pb[2] ? cols + 8 * g->s[2] : g->in[2] + g->pb[2];
	d.plane = d.PH * d.PW + GC_SLACK;
	d.member_floats = j->Cg * d.plane;
	d.pad = cpu_scratch(ctx, (size_t)members * (size_t)d.member_floats * sizeof(float));
	if (!d.pad)
		return CPU_E_NOMEM;
	/* ~0.15 ns a multiply-add in registers, plus the padding copy */
	cpu_par_for(ctx, N * G,
		    0.15 * (double)(j->Mg * j->Cg * OH * OW * g->k[1] * g->k[2]) +
			    0.3 * (double)d.member_floats, 1, gc_range, &d);
	return 0;
}
