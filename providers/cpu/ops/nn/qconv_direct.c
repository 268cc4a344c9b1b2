/*
 * qconv_direct: stride-1 2-D ConvInteger/QLinearConv without an im2col
 * (gemm/igemm_conv.c reads the input in place).  Per (image, group) the
 * input is rewritten once into channel-interleaved padded planes: plane
 * cg holds channels 4cg..4cg+3 of every padded pixel next to each other,
 * as the int8 kernels' B operand (the top bit flipped for uint8), pads
 * holding the input zero point and missing channels 0.  The filter is
 * packed at load in the matching (tap, channel group, channel) order
 * (qconv_direct_filter).  When the filter's zero point is not 0 the GEMM
 * also needs, per output pixel, the sum of B over its window: the channel
 * sums of each padded pixel, then their box sum over the taps.
 * Caller: qconv.c.
 */
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "nn_ops.h"
#include "par.h"
#include "qconv_impl.h"

int qconv_direct_fits(const qconv_run *r)
{
	const cpu_geom *g = &r->g;

	return r->X->rank == 4 && g->s[1] == 1 && g->s[2] == 1 && !(r->Cg == 1 && r->Mg == 1) &&
	       g->k[1] * g->k[2] * ((r->Cg + 3) / 4) * 4 <= 16384;
}

/* The filter's k in (tap, channel group, channel) order, missing channels
 * as the bytes that become 0 in A (0, or 0x80 for int8). */
void qconv_direct_order(const void *w, int is_signed, int64_t M, int64_t Cg, int64_t taps,
			uint8_t *dst)
{
	int64_t cg = (Cg + 3) / 4, kd = taps * cg * 4;
	const uint8_t *src = w;

	for (int64_t m = 0; m < M; m++)
		for (int64_t t = 0; t < taps; t++)
			for (int64_t c = 0; c < cg * 4; c++)
				dst[m * kd + t * cg * 4 + c] = c < Cg ? src[(m * Cg + c) * taps + t] :
							       (uint8_t)(is_signed ? 0x80 : 0);
}

typedef struct x4_job {
	const qconv_run *r;
	const uint8_t *x;            /* the group's first channel */
	int8_t *x4;
	int32_t *sums;               /* per padded pixel, or NULL */
	int64_t cg, hp, wp;
	uint8_t flip, pad;
} x4_job;

/* Four channel rows of 16 bytes into 64 bytes of pixel-major groups. */
static void interleave4(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
			const uint8_t *r3, uint8_t flip, int8_t *dst)
{
#ifdef __SSE2__
	__m128i f = _mm_set1_epi8((char)flip);
	__m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)r0), f);
	__m128i a1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)r1), f);
	__m128i a2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)r2), f);
	__m128i a3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)r3), f);
	__m128i lo01 = _mm_unpacklo_epi8(a0, a1), hi01 = _mm_unpackhi_epi8(a0, a1);
	__m128i lo23 = _mm_unpacklo_epi8(a2, a3), hi23 = _mm_unpackhi_epi8(a2, a3);

	_mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(lo01, lo23));
	_mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(lo01, lo23));
	_mm_storeu_si128((__m128i *)(dst + 32), _mm_unpacklo_epi16(hi01, hi23));
	_mm_storeu_si128((__m128i *)(dst + 48), _mm_unpackhi_epi16(hi01, hi23));
#else
	for (int j = 0; j < 16; j++) {
		dst[j * 4] = (int8_t)(r0[j] ^ flip);
		dst[j * 4 + 1] = (int8_t)(r1[j] ^ flip);
		dst[j * 4 + 2] = (int8_t)(r2[j] ^ flip);
		dst[j * 4 + 3] = (int8_t)(r3[j] ^ flip);
	}
#endif
}

/* Padded row y of plane cg: pixel x reads input column x - pads_left. */
static void x4_row(const x4_job *j, int64_t cg, int64_t y)
{
	const qconv_run *r = j->r;
	const cpu_geom *g = &r->g;
	int64_t ih = y - g->pb[1], W = g->in[2], pl = g->pb[2];
	int inside = ih >= 0 && ih < g->in[1];
	int8_t *d = j->x4 + ((cg * j->hp + y) * j->wp) * 4;
	uint8_t padv[4], miss[16];
	const uint8_t *src[4];

	/* a missing channel reads bytes that the flip turns into 0 */
	memset(miss, j->flip, sizeof(miss));
	for (int t = 0; t < 4; t++) {
		int64_t c = cg * 4 + t;
		padv[t] = c < r->Cg ? j->pad : 0;
		src[t] = c >= r->Cg ? NULL : inside ? j->x + (c * g->in[1] + ih) * W : NULL;
	}
	for (int64_t x = 0; x < j->wp;) {
		int64_t iw = x - pl;
		if (inside && iw >= 0 && iw + 16 <= W && x + 16 <= j->wp) {
			const uint8_t *p[4];
			for (int t = 0; t < 4; t++)
				p[t] = src[t] ? src[t] + iw : miss;
			interleave4(p[0], p[1], p[2], p[3], j->flip, d + x * 4);
			x += 16;
			continue;
		}
		for (int t = 0; t < 4; t++)
			d[x * 4 + t] = (int8_t)(src[t] && iw >= 0 && iw < W ? src[t][iw] ^ j->flip : padv[t]);
		x++;
	}
}

/* Rows [b, e) of every plane (index = cg * hp + y), and the channel sums
 * of the padded rows when asked. */
static void x4_rows(void *arg, int64_t b, int64_t e, int member)
{
	const x4_job *j = arg;

	(void)member;
	for (int64_t i = b; i < e; i++)
		x4_row(j, i / j->hp, i % j->hp);
}

CPU_MULTIVERSION
static void sum_rows(void *arg, int64_t b, int64_t e, int member)
{
	const x4_job *j = arg;
	int64_t plane = j->hp * j->wp * 4;

	(void)member;
	for (int64_t y = b; y < e; y++) {
		int32_t *s = j->sums + y * j->wp;
		memset(s, 0, (size_t)j->wp * sizeof(int32_t));
		for (int64_t cg = 0; cg < j->cg; cg++) {
			const int8_t *d = j->x4 + cg * plane + y * j->wp * 4;
			for (int64_t x = 0; x < j->wp; x++)
				s[x] += d[4 * x] + d[4 * x + 1] + d[4 * x + 2] + d[4 * x + 3];
		}
	}
}

typedef struct box_job {
	const qconv_run *r;
	const int32_t *sums;
	int32_t *colsum;
	int64_t wp;
} box_job;

/* colsum[y][x] = sum over the taps of sums[y + kh dh][x + kw dw] */
CPU_MULTIVERSION
static void box_rows(void *arg, int64_t b, int64_t e, int member)
{
	const box_job *j = arg;
	const cpu_geom *g = &j->r->g;
	int64_t OW = g->out[2];

	(void)member;
	for (int64_t y = b; y < e; y++) {
		int32_t *o = j->colsum + y * OW;
		memset(o, 0, (size_t)OW * sizeof(int32_t));
		for (int64_t kh = 0; kh < g->k[1]; kh++)
			for (int64_t kw = 0; kw < g->k[2]; kw++) {
				const int32_t *s = j->sums + (y + kh * g->d[1]) * j->wp + kw * g->d[2];
				for (int64_t x = 0; x < OW; x++)
					o[x] += s[x];
			}
	}
}

/* An unpadded 1x1 convolution's planes are its output planes: flattened
 * into one row of H x W pixels, whose 16-pixel vectors then fill every
 * lane but the last one's (a 7x7 image by rows used 7 of 16 lanes:
 * MobileNetV2's 320 -> 1280 at 7x7 ran at a third of the kernel's rate). */
static void flatten_1x1(qconv_run *r)
{
	cpu_geom *g = &r->g;

	if (g->k[0] != 1 || g->k[1] != 1 || g->k[2] != 1)
		return;
	for (int i = 0; i < 3; i++)
		if (g->pb[i] || g->pe[i] || g->s[i] != 1)
			return;
	g->in[2] *= g->in[1];
	g->out[2] *= g->out[1];
	g->in[1] = g->out[1] = 1;
}

int qconv_direct(cpu_ctx *ctx, const qconv_run *r0, const igemm_a *A, const igemm_out *out)
{
	qconv_run flat = *r0, *r = &flat;
	const cpu_geom *g = &r->g;
	int64_t cg = (r->Cg + 3) / 4, taps, hp, wp;
	int64_t *toff;
	int8_t *x4;
	int xs = r->X->dtype == CPU_INT8;
	int32_t za_off = A->off;
	int need_cs = r->nzw > 1 || r->zw[0] + za_off != 0;
	int32_t *sums = NULL, *colsum = NULL;
	x4_job j;
	box_job bj;
	int rc;

	flatten_1x1(r);
	taps = g->k[1] * g->k[2];
	hp = g->out[1] + (g->k[1] - 1) * g->d[1];
	wp = g->out[2] + (g->k[2] - 1) * g->d[2];
	toff = cpu_scratch(ctx, (size_t)taps * sizeof(int64_t));
	x4 = cpu_scratch(ctx, (size_t)(cg * hp * wp * 4) + 256);
	if (!toff || !x4)
		return CPU_E_NOMEM;
	if (need_cs && (!(sums = cpu_scratch(ctx, (size_t)(hp * wp) * sizeof(int32_t))) ||
			!(colsum = cpu_scratch(ctx, (size_t)r->osz * sizeof(int32_t)))))
		return CPU_E_NOMEM;
	memset(x4 + cg * hp * wp * 4, 0, 256);
	for (int64_t kh = 0; kh < g->k[1]; kh++)
		for (int64_t kw = 0; kw < g->k[2]; kw++)
			toff[kh * g->k[2] + kw] = (kh * g->d[1] * wp + kw * g->d[2]) * 4;
	j.r = r;
	j.x4 = x4;
	j.sums = sums;
	j.cg = cg;
	j.hp = hp;
	j.wp = wp;
	j.flip = xs ? 0 : 0x80;
	j.pad = (uint8_t)r->zx ^ j.flip;
	bj.r = r;
	bj.sums = sums;
	bj.colsum = colsum;
	bj.wp = wp;
	for (int64_t n = 0; n < r->N; n++)
		for (int64_t grp = 0; grp < r->G; grp++) {
			int64_t m0 = grp * r->Mg;
			igemm_conv cv;

			j.x = (const uint8_t *)r->X->data + (n * r->G + grp) * r->Cg * r->isz;
			cpu_par_for(ctx, cg * hp, 0.5 * (double)wp, 1, x4_rows, &j);
			if (need_cs) {
				cpu_par_for(ctx, hp, 0.3 * (double)(wp * cg), 1, sum_rows, &j);
				cpu_par_for(ctx, g->out[1], 0.1 * (double)(g->out[2] * taps), 1, box_rows, &bj);
			}
			memset(&cv, 0, sizeof(cv));
			cv.M = r->Mg;
			cv.K = r->ksz;
			cv.A = *A;
			cv.A.a += m0 * A->lda;
			cv.A.rowsum += m0;
			cv.za = r->zw[0];
			cv.za_row = r->nzw > 1 ? r->zw + m0 : NULL;
			cv.x4 = x4;
			cv.cg = cg;
			cv.hp = hp;
			cv.wp = wp;
			cv.ntaps = (int)taps;
			cv.toff = toff;
			cv.oh = g->out[1];
			cv.ow = g->out[2];
			cv.colsum = colsum;
			cv.zb = r->zx;
			cv.b_off = xs ? 0 : 128;
			cv.out = qconv_group_out(r, out, n, m0);
			if ((rc = igemm_conv_compute(ctx->pool, IGEMM_ISA_AUTO, &cv)))
				return nn_igemm_fail(ctx, rc, "int8 convolution");
		}
	return 0;
}
