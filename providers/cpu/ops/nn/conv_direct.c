/*
 * conv_direct: one-group convolutions whose filter is short (input
 * channels x taps <= CONV_DIRECT_KMAX: a network's first layers, 3 to 16
 * input channels), on 1-D and 2-D images, for conv.c, on CPUs with
 * AVX-512 or AVX2 + FMA.
 *
 * Through the GEMM such a layer is a product of few rows (K = 27 for a
 * 3x3 filter on an RGB image) whose im2col costs as much as the product,
 * and whose output is written and read back in blocks.  Here the input
 * rows a band of output rows needs are copied into zero-padded rows (a
 * stride-2 row split into its even and odd columns, so that every tap
 * reads consecutive floats), and each output row is computed sixteen
 * pixels a vector (two vectors when the row is wide enough) for blocks of
 * eight output channels: all taps of all input channels accumulate in
 * registers, each load of input pixels feeding eight multiply-adds whose
 * filter value is broadcast.  Bias, a residual and Relu or Clip are
 * applied in registers, another fused activation on the finished band.
 *
 * AVX2 has 16 vector registers, not 32: there a tile is four channels
 * of two output rows, a vector of eight pixels each (eight accumulators;
 * each input load feeds four multiply-adds, each broadcast filter value
 * two), and a band's odd last row eight channels of one vector; the rows,
 * bands (an even number of rows on AVX2) and padding are the same.
 *
 * The filter is laid out as conv_grouped.c lays out one group:
 * [channel block][input channel][kh][kw][8].  Work is split over the pool
 * by (image, band of output rows).  The example CNN's two layers (3 -> 16
 * at 32x32, 16 -> 32 at 16x16): 17 -> 6 and 29 -> 14 us an image (1
 * thread, docs/PERFORMANCE.md); on AVX2 the second now goes to
 * conv_nhwc.c, as every layer of 16 input and output channels and more
 * (conv_direct_takes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "gemm.h"
#include "par.h"

#define CD_BLOCK 8      /* output channels a block (conv_grouped.c's layout) */
#define CD_VEC 16       /* pixels a vector */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CD_X86 1
#include <immintrin.h>
#endif

int conv_direct_takes(int64_t Cg, int64_t taps, int64_t Mg)
{
#ifdef CD_X86
	static int env = -1;
	gemm_isa isa = gemm_isa_best();

	if (env < 0) {
		const char *e = getenv("ORTMK_CPU_CONV_DIRECT");

		env = !(e && e[0] == '0');
	}
	/* 1x1: the GEMM multiplies the input in place, faster (MobileNetV2's
	 * 160 -> 960 at 7x7: 0.10 ms there, 0.40 here).  On AVX2 also a
	 * longer filter with few output channels: the GEMM's im2col and B
	 * packing, each element used by only Mg rows, cost more than the
	 * product (DBNet's 64 -> 16 3x3 at 120x160: 18 ms through the GEMM
	 * on Zen 3, ONNX Runtime 5.2).  Not at 32 output channels: DenseNet's
	 * 128 -> 32 3x3 layers took 1.5x the GEMM's time here.  Nor where
	 * conv_nhwc.c takes the layer (16 input and output channels and
	 * more): there this kernel's four channels of two rows a tile, eight
	 * accumulators, took 1.2-1.5x conv_nhwc.c's time (Zen 3, paired per
	 * layer: 16 -> 16 at 240 x 320 and 256 x 256, 32 -> 16 at 512 x 512,
	 * 64 -> 16 at 120 x 160, 16 -> 32 at 28 x 28; SqueezeNet's 16 -> 64 at
	 * 55 x 55 the same). */
	if (!env || taps <= 1)
		return 0;
	if (isa == GEMM_ISA_AVX512)
		return Cg * taps <= CONV_DIRECT_KMAX;
	return isa == GEMM_ISA_AVX2 && !conv_nhwc_takes(Cg, taps, Mg, 0) &&
	       (Cg * taps <= CONV_DIRECT_KMAX ||
		(Mg <= CONV_DIRECT_FEW_M && Cg * taps <= CONV_DIRECT_FEW_KMAX));
#else
	(void)Cg;
	(void)taps;
	(void)Mg;
	return 0;
#endif
}

int conv_direct_fits(const conv_job *j, int64_t group)
{
#ifdef CD_X86
	const cpu_geom *g = &j->g;

	/* a row uses at least half of the vector lanes it computes (8 pixels
	 * and more; MobileNet's 7x7 layers wasted 9 of 16) */
	return group == 1 && conv_direct_takes(j->Cg, j->ksz / j->Cg, j->Mg) && g->k[0] == 1 &&
	       2 * g->out[2] >= (g->out[2] + CD_VEC - 1) / CD_VEC * CD_VEC &&
	       g->in[0] == 1 && g->out[0] == 1 && g->d[1] == 1 && g->d[2] == 1 &&
	       (g->s[1] == 1 || g->s[1] == 2) && (g->s[2] == 1 || g->s[2] == 2);
#else
	(void)j;
	(void)group;
	return 0;
#endif
}

#ifdef CD_X86

/* Where tap (kh, kw) of an output vector starts in input channel xc's
 * padded rows: a stride-2 row keeps its even columns, then from `half`
 * its odd ones. */
static inline __attribute__((always_inline)) const float *
cd_tap(const float *xc, int kh, int kw, int64_t PW, int S, int64_t half)
{
	return xc + kh * PW + (S == 1 ? kw : (kw & 1) * half + (kw >> 1));
}

typedef struct cd_job {
	const conv_job *j;
	const float *x, *w, *b;   /* w: packed */
	float *y;
	int64_t bands, band_rows; /* output rows a band */
	int64_t PW, half;         /* a padded row; its odd columns start at `half` (stride 2) */
	int64_t rows_max;         /* padded rows a band reads */
	float *pad;               /* per member: Cg x rows_max x PW */
	/* Relu or Clip in registers (clamp to [lo, hi]), or an activation
	 * applied to each finished band (act) */
	int clamp;
	float lo, hi;
	const cpu_fusion *act;
	int64_t member_floats;
	int avx512;               /* else AVX2 + FMA (cd_band2) */
} cd_job;

#define CD_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma")))

/* src[2t] to a[t], src[2t + 1] to b[t] (n values): strided loads gcc
 * vectorizes with permutes. */
CPU_MULTIVERSION
static void cd_split(const float *src, int64_t n, float *a, float *b)
{
	for (int64_t t = 0; t < n / 2; t++) {
		a[t] = src[2 * t];
		b[t] = src[2 * t + 1];
	}
	if (n & 1)
		a[n / 2] = src[n - 1];
}

/* Input rows [r0, r1) of the padded image (row r is input row r - pt) of
 * every channel into xp: plain (stride 1) or split into even columns then
 * odd ones at `half` (stride 2). */
static void cd_pad_rows(const cd_job *d, const float *x, int64_t r0, int64_t r1, float *xp)
{
	const cpu_geom *g = &d->j->g;
	int64_t IH = g->in[1], IW = g->in[2], pt = g->pb[1], pl = g->pb[2], sw = g->s[2];
	int64_t rows = r1 - r0;

	for (int64_t c = 0; c < d->j->Cg; c++)
		for (int64_t r = 0; r < rows; r++) {
			float *p = xp + (c * d->rows_max + r) * d->PW;
			int64_t ir = r0 + r - pt;
			const float *src = x + (c * IH + ir) * IW;

			memset(p, 0, (size_t)d->PW * sizeof(float));
			if (ir < 0 || ir >= IH)
				continue;
			if (sw == 1)
				memcpy(p + pl, src, (size_t)IW * sizeof(float));
			else if (pl % 2 == 0)   /* input column 2t is padded column pl + 2t: even */
				cd_split(src, IW, p + pl / 2, p + d->half + pl / 2);
			else                    /* ... odd */
				cd_split(src, IW, p + d->half + pl / 2, p + pl / 2 + 1);
		}
}

/* NV vectors of up to 16 pixels for a block of up to 8 channels:
 * y[m * osz + v * ys ...] (left[v] of them) from input rows at xr + v * xs:
 * the next 16 pixels of a row (xs = ys = 16), or the same pixels of the
 * next output row when a row is one vector (the filter value broadcast
 * once feeds both). */
static inline __attribute__((always_inline)) CD_TARGET void
cd_tile(float *y, const float *res, int64_t osz, const float *xr, int64_t rstride,
	int64_t PW, int64_t half, const float *w, const float *bias, int nm, int64_t Cg, int KH,
	int KW, int S, const int64_t *left, int64_t xs, int64_t ys, const cd_job *d, int NV)
{
	__m512 acc[CD_BLOCK][2];
	__mmask16 k[2];

	for (int v = 0; v < NV; v++)
		k[v] = left[v] >= CD_VEC ? 0xffff : left[v] <= 0 ? 0 :
		       (__mmask16)((1u << left[v]) - 1);
	for (int m = 0; m < CD_BLOCK; m++)
		for (int v = 0; v < NV; v++) {
			acc[m][v] = _mm512_set1_ps(m < nm && bias ? bias[m] : 0.0f);
			if (res && m < nm)
				acc[m][v] = _mm512_add_ps(acc[m][v],
					_mm512_maskz_loadu_ps(k[v], res + m * osz + v * ys));
		}
	for (int64_t c = 0; c < Cg; c++) {
		const float *xc = xr + c * rstride;
		const float *wc = w + c * KH * KW * CD_BLOCK;

		for (int kh = 0; kh < KH; kh++)
			/* unrolled: a loop kept cd_tap's arithmetic per tap (7x7 / 2:
			 * eight scalar operations for sixteen multiply-adds) */
#pragma GCC unroll 8
			for (int kw = 0; kw < KW; kw++) {
				const float *xt = cd_tap(xc, kh, kw, PW, S, half);
				const float *wt = wc + (kh * KW + kw) * CD_BLOCK;
				__m512 xv[2];

				for (int v = 0; v < NV; v++)
					xv[v] = _mm512_loadu_ps(xt + v * xs);
				for (int m = 0; m < CD_BLOCK; m++) {
					__m512 wv = _mm512_set1_ps(wt[m]);

					for (int v = 0; v < NV; v++)
						acc[m][v] = _mm512_fmadd_ps(wv, xv[v], acc[m][v]);
				}
			}
	}
	/* written out per channel, so that acc stays in registers (a loop
	 * over m, even with constant bounds, spilled it) */
	__m512 lo = _mm512_set1_ps(d->lo), hi = _mm512_set1_ps(d->hi);
	int clamp = d->clamp;

	/* max(lo, x), min(hi, x): the second operand, x, when x is NaN, as
	 * vf_clamp keeps it */
#define CD_STORE(m)                                                                        \
	if ((m) < nm)                                                                      \
		for (int v = 0; v < NV; v++) {                                             \
			__m512 o = acc[m][v];                                              \
			if (clamp)                                                         \
				o = _mm512_min_ps(hi, _mm512_max_ps(lo, o));               \
			_mm512_mask_storeu_ps(y + (m) * osz + v * ys, k[v], o);            \
		}
	CD_STORE(0) CD_STORE(1) CD_STORE(2) CD_STORE(3)
	CD_STORE(4) CD_STORE(5) CD_STORE(6) CD_STORE(7)
#undef CD_STORE
}

/* Output rows [oh0, oh1) of image n, every channel block of a row before
 * the next row (its input rows stay in L1), from padded rows that start at
 * padded row oh0 * sh (xp). */
static inline __attribute__((always_inline)) CD_TARGET void
cd_rows(const cd_job *d, const float *xp, int64_t n, int64_t oh0, int64_t oh1, int KH, int KW,
	int S)
{
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t OW = g->out[2], osz = j->osz, sh = g->s[1], Cg = j->Cg;
	int64_t rstride = d->rows_max * d->PW, wblock = Cg * KH * KW * CD_BLOCK;

	/* rows of one vector go two at a time */
	int64_t pair = OW <= CD_VEC ? 2 : 1;

	for (int64_t oh = oh0; oh < oh1; oh += pair) {
		const float *xr = xp + (oh - oh0) * sh * d->PW;
		int two = pair == 2 && oh + 1 < oh1;

		for (int64_t m0 = 0; m0 < j->Mg; m0 += CD_BLOCK) {
			int nm = (int)(j->Mg - m0 < CD_BLOCK ? j->Mg - m0 : CD_BLOCK);
			int64_t yoff = (n * j->Mg + m0) * osz + oh * OW, ow = 0;
			const float *w = d->w + m0 / CD_BLOCK * wblock, *bias = d->b ? d->b + m0 : NULL;
			const float *res = j->res ? (const float *)j->res->data + yoff : NULL;
			float *y = d->y + yoff;
			int64_t left[2];

			if (pair == 2) {
				left[0] = left[1] = OW;
				cd_tile(y, res, osz, xr, rstride, d->PW, d->half, w, bias, nm, Cg, KH, KW,
					S, left, sh * d->PW, OW, d, two ? 2 : 1);
				continue;
			}
			for (; ow + 2 * CD_VEC <= OW || (ow < OW && OW - ow > CD_VEC); ow += 2 * CD_VEC) {
				left[0] = OW - ow;
				left[1] = OW - ow - CD_VEC;
				cd_tile(y + ow, res ? res + ow : NULL, osz, xr + ow, rstride, d->PW,
					d->half, w, bias, nm, Cg, KH, KW, S, left, CD_VEC, CD_VEC, d, 2);
			}
			if (ow < OW) {
				left[0] = OW - ow;
				cd_tile(y + ow, res ? res + ow : NULL, osz, xr + ow, rstride, d->PW,
					d->half, w, bias, nm, Cg, KH, KW, S, left, CD_VEC, CD_VEC, d, 1);
			}
		}
	}
}

/* ---- AVX2 + FMA: vectors of eight pixels ---- */

#define CD_TARGET2 __attribute__((target("avx2,fma")))
#define CD_VEC2 8

/* Lanes [0, n) set. */
static inline __attribute__((always_inline)) CD_TARGET2 __m256i cd_mask8(int64_t n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)),
				  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* cd_tile's work for one vector of up to 8 pixels (`left` of them) of
 * eight channels (a band's odd last row): the input loads are whole
 * vectors (a padded row has room for them), the residual and the stores
 * masked only in a last partial vector (AMD microcodes a masked store). */
static inline __attribute__((always_inline)) CD_TARGET2 void
cd_tile2(float *y, const float *res, int64_t osz, const float *xr, int64_t rstride, int64_t PW,
	 int64_t half, const float *w, const float *bias, int nm, int64_t Cg, int KH, int KW,
	 int S, int64_t left, const cd_job *d)
{
	__m256 acc[CD_BLOCK];
	__m256i k = cd_mask8(left);
	int full = left >= CD_VEC2;

	for (int m = 0; m < CD_BLOCK; m++) {
		acc[m] = _mm256_set1_ps(m < nm && bias ? bias[m] : 0.0f);
		if (res && m < nm)
			acc[m] = _mm256_add_ps(acc[m], full ? _mm256_loadu_ps(res + m * osz)
							    : _mm256_maskload_ps(res + m * osz, k));
	}
	for (int64_t c = 0; c < Cg; c++) {
		const float *xc = xr + c * rstride;
		const float *wc = w + c * KH * KW * CD_BLOCK;

		for (int kh = 0; kh < KH; kh++) {
			/* the rows of a long filter outnumber the streams the
			 * hardware prefetcher follows: ask for the line two tiles
			 * on */
			if (Cg * KH > 16)
				_mm_prefetch((const char *)(xc + kh * PW + 2 * CD_VEC2), _MM_HINT_T0);
			for (int kw = 0; kw < KW; kw++) {
				const float *xt = cd_tap(xc, kh, kw, PW, S, half);
				const float *wt = wc + (kh * KW + kw) * CD_BLOCK;
				__m256 xv = _mm256_loadu_ps(xt);

				for (int m = 0; m < CD_BLOCK; m++)
					acc[m] = _mm256_fmadd_ps(_mm256_broadcast_ss(wt + m), xv, acc[m]);
			}
		}
	}
	__m256 lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
	int clamp = d->clamp;

#define CD_STORE2(m)                                                                       \
	if ((m) < nm) {                                                                    \
		__m256 o = acc[m];                                                         \
		if (clamp)                                                                 \
			o = _mm256_min_ps(hi, _mm256_max_ps(lo, o));                       \
		if (full)                                                                  \
			_mm256_storeu_ps(y + (m) * osz, o);                                \
		else                                                                       \
			_mm256_maskstore_ps(y + (m) * osz, k, o);                          \
	}
	CD_STORE2(0) CD_STORE2(1) CD_STORE2(2) CD_STORE2(3)
	CD_STORE2(4) CD_STORE2(5) CD_STORE2(6) CD_STORE2(7)
#undef CD_STORE2
}

/* Four channels of the block (those from m_lo; nm in the block) times two
 * output rows of one vector of up to 8 pixels (`left`): 8 accumulators,
 * each weight broadcast once for both rows and each input vector used by
 * four channels, so a product costs 6 / 8 loads (cd_tile2: 9 / 8, which the
 * load ports bound on Zen 3: MobileNet's 3x3/2 stem 396 -> 330 us).  Three
 * rows (12 accumulators) left gcc too few registers: it spilled, 2x slower.
 * Row r of the output is at y + r * ys, its input rows at xr + r * xs. */
static inline __attribute__((always_inline)) CD_TARGET2 void
cd_tile2r(float *y, const float *res, int64_t osz, int64_t ys, const float *xr, int64_t xs,
	  int64_t rstride, int64_t PW, int64_t half, const float *w, const float *bias, int m_lo,
	  int nm, int64_t Cg, int KH, int KW, int S, int64_t left, const cd_job *d)
{
	enum { R = 2 };
	__m256 acc[4][R];
	__m256i k = cd_mask8(left);
	int full = left >= CD_VEC2;

#pragma GCC unroll 4
	for (int m = 0; m < 4; m++)
#pragma GCC unroll 2
		for (int r = 0; r < R; r++) {
			acc[m][r] = _mm256_set1_ps(m_lo + m < nm && bias ? bias[m_lo + m] : 0.0f);
			if (res && m_lo + m < nm) {
				const float *rp = res + (m_lo + m) * osz + r * ys;

				acc[m][r] = _mm256_add_ps(acc[m][r], full ? _mm256_loadu_ps(rp) :
								    _mm256_maskload_ps(rp, k));
			}
		}
	for (int64_t c = 0; c < Cg; c++) {
		const float *xc = xr + c * rstride;
		const float *wc = w + c * KH * KW * CD_BLOCK + m_lo;

		for (int kh = 0; kh < KH; kh++) {
			if (Cg * KH > 16)
				_mm_prefetch((const char *)(xc + kh * PW + 2 * CD_VEC2), _MM_HINT_T0);
			for (int kw = 0; kw < KW; kw++) {
				const float *xt = cd_tap(xc, kh, kw, PW, S, half);
				const float *wt = wc + (kh * KW + kw) * CD_BLOCK;
				__m256 xv[R];

#pragma GCC unroll 2
				for (int r = 0; r < R; r++)
					xv[r] = _mm256_loadu_ps(xt + r * xs);
#pragma GCC unroll 4
				for (int m = 0; m < 4; m++) {
					__m256 wv = _mm256_broadcast_ss(wt + m);

#pragma GCC unroll 2
					for (int r = 0; r < R; r++)
						acc[m][r] = _mm256_fmadd_ps(wv, xv[r], acc[m][r]);
				}
			}
		}
	}
	__m256 lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
	int clamp = d->clamp;

	/* written out per channel, so that acc stays in registers */
#define CD_STORE2R(m)                                                                      \
	if (m_lo + (m) < nm)                                                               \
		for (int r = 0; r < R; r++) {                                              \
			__m256 o = acc[m][r];                                              \
			float *yp = y + (m_lo + (m)) * osz + r * ys;                       \
			if (clamp)                                                         \
				o = _mm256_min_ps(hi, _mm256_max_ps(lo, o));               \
			if (full)                                                          \
				_mm256_storeu_ps(yp, o);                                   \
			else                                                               \
				_mm256_maskstore_ps(yp, k, o);                             \
		}
	CD_STORE2R(0) CD_STORE2R(1) CD_STORE2R(2) CD_STORE2R(3)
#undef CD_STORE2R
}

/* cd_rows on AVX2: two output rows at a time (cd_tile2r), eight pixels a
 * vector; a band's odd last row eight channels at a time (cd_tile2). */
static inline __attribute__((always_inline)) CD_TARGET2 void
cd_rows2(const cd_job *d, const float *xp, int64_t n, int64_t oh0, int64_t oh1, int KH, int KW,
	 int S)
{
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t OW = g->out[2], osz = j->osz, sh = g->s[1], Cg = j->Cg;
	int64_t rstride = d->rows_max * d->PW, wblock = Cg * KH * KW * CD_BLOCK;
	int64_t xs = sh * d->PW;

	for (int64_t oh = oh0; oh < oh1;) {
		const float *xr = xp + (oh - oh0) * sh * d->PW;
		int rows = oh1 - oh >= 2 ? 2 : 1;

		for (int64_t m0 = 0; m0 < j->Mg; m0 += CD_BLOCK) {
			int nm = (int)(j->Mg - m0 < CD_BLOCK ? j->Mg - m0 : CD_BLOCK);
			int64_t yoff = (n * j->Mg + m0) * osz + oh * OW;
			const float *w = d->w + m0 / CD_BLOCK * wblock, *bias = d->b ? d->b + m0 : NULL;
			const float *res = j->res ? (const float *)j->res->data + yoff : NULL;
			float *y = d->y + yoff;

			for (int64_t ow = 0; ow < OW; ow += CD_VEC2) {
				if (rows == 1) {
					cd_tile2(y + ow, res ? res + ow : NULL, osz, xr + ow, rstride,
						 d->PW, d->half, w, bias, nm, Cg, KH, KW, S, OW - ow, d);
					continue;
				}
				for (int h = 0; h < nm; h += 4)
					cd_tile2r(y + ow, res ? res + ow : NULL, osz, OW, xr + ow, xs,
						  rstride, d->PW, d->half, w, bias, h, nm, Cg, KH, KW, S,
						  OW - ow, d);
			}
		}
		oh += rows;
	}
}

static CD_TARGET2 void cd_band2(const cd_job *d, const float *xp, int64_t n, int64_t oh0,
				int64_t oh1)
{
	const cpu_geom *g = &d->j->g;
	int64_t kh = g->k[1], kw = g->k[2], sw = g->s[2];

	if (kh == 3 && kw == 3 && sw == 1)
		cd_rows2(d, xp, n, oh0, oh1, 3, 3, 1);
	else if (kh == 3 && kw == 3 && sw == 2)
		cd_rows2(d, xp, n, oh0, oh1, 3, 3, 2);
	else if (kh == 5 && kw == 5 && sw == 1)
		cd_rows2(d, xp, n, oh0, oh1, 5, 5, 1);
	else if (kh == 7 && kw == 7 && sw == 2)
		cd_rows2(d, xp, n, oh0, oh1, 7, 7, 2);
	else if (sw == 1)
		cd_rows2(d, xp, n, oh0, oh1, (int)kh, (int)kw, 1);
	else
		cd_rows2(d, xp, n, oh0, oh1, (int)kh, (int)kw, 2);
}

#define CD_CASE(KH, KW, S) cd_rows(d, xp, n, oh0, oh1, KH, KW, S)

static CD_TARGET void cd_band(const cd_job *d, const float *xp, int64_t n, int64_t oh0,
			      int64_t oh1)
{
	const cpu_geom *g = &d->j->g;
	int64_t kh = g->k[1], kw = g->k[2], sw = g->s[2];

	if (kh == 3 && kw == 3 && sw == 1)
		CD_CASE(3, 3, 1);
	else if (kh == 3 && kw == 3 && sw == 2)
		CD_CASE(3, 3, 2);
	else if (kh == 5 && kw == 5 && sw == 1)
		CD_CASE(5, 5, 1);
	else if (kh == 7 && kw == 7 && sw == 2)
		CD_CASE(7, 7, 2);
	else if (sw == 1)
		cd_rows(d, xp, n, oh0, oh1, (int)kh, (int)kw, 1);
	else
		cd_rows(d, xp, n, oh0, oh1, (int)kh, (int)kw, 2);
}

static void cd_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const cd_job *d = arg;
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t isz = g->in[1] * g->in[2], OH = g->out[1], sh = g->s[1], OW = g->out[2];
	float *xp = d->pad + member * d->member_floats;

	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / d->bands, oh0 = it % d->bands * d->band_rows;
		int64_t oh1 = oh0 + d->band_rows < OH ? oh0 + d->band_rows : OH;

		cd_pad_rows(d, d->x + n * j->Cg * isz, oh0 * sh, (oh1 - 1) * sh + g->k[1], xp);
		if (d->avx512)
			cd_band(d, xp, n, oh0, oh1);
		else
			cd_band2(d, xp, n, oh0, oh1);
		for (int64_t m = 0; d->act && m < j->Mg; m++)
			cpu_fuse_act_apply(d->act, d->y + (n * j->Mg + m) * j->osz + oh0 * OW,
					   (oh1 - oh0) * OW);
	}
}

int conv_direct_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		    const float *wpacked, const float *b, float *y)
{
	const cpu_geom *g = &j->g;
	int64_t OH = g->out[1], OW = g->out[2], sw = g->s[2], sh = g->s[1];
	int64_t owr = (OW + 2 * CD_VEC - 1) / (2 * CD_VEC) * (2 * CD_VEC);
	int64_t cols = g->in[2] + g->pb[2] + g->pe[2], per_image, bands;
	int members = cpu_par_members(ctx);
	cd_job d = {.j = j, .x = x, .w = wpacked, .b = b, .y = y, .act = j->act,
		    .avx512 = gemm_isa_best() == GEMM_ISA_AVX512};

	if ((d.clamp = conv_job_clamp(j, &d.lo, &d.hi)) != 0)
		d.act = NULL;

	/* A padded row holds every column a tap reads, rounded up to whole
	 * vectors (the last vector's lanes past OW read zeros, not stored). */
	if (sw == 1) {
		d.PW = owr + g->k[2] - 1 > cols ? owr + g->k[2] - 1 : cols;
		d.half = 0;
	} else {
		int64_t need = owr + (g->k[2] - 1) / 2 + 1;

		d.half = need > (cols + 1) / 2 ? need : (cols + 1) / 2;
		d.PW = 2 * d.half;
	}
	d.PW += 16;   /* slack: keeps the rows' starts apart */
	/* Bands: whole images when the batch feeds the pool; else about four
	 * bands a member, so that one image splits over it. */
	bands = N >= 2 * members ? 1 : (4 * members + N - 1) / N;
	bands = bands < OH ? bands : OH;
	d.band_rows = (OH + bands - 1) / bands;
	if (!d.avx512 && d.band_rows > 1 && d.band_rows % 2)
		d.band_rows++;   /* AVX2 takes rows two at a time */
	d.bands = (OH + d.band_rows - 1) / d.band_rows;
	d.rows_max = (d.band_rows - 1) * sh + g->k[1];
	d.member_floats = j->Cg * d.rows_max * d.PW;
	d.pad = cpu_scratch(ctx, (size_t)members * (size_t)d.member_floats * sizeof(float));
	if (!d.pad)
		return CPU_E_NOMEM;
	per_image = j->Mg * j->ksz * j->osz;
	/* ~0.04 ns a multiply-add in registers (0.08 on AVX2), plus the
	 * padding copy */
	cpu_par_for(ctx, N * d.bands, (d.avx512 ? 0.04 : 0.08) * (double)per_image /
		    (double)d.bands +
		    0.3 * (double)d.member_floats, 1, cd_range, &d);
	return 0;
}

#else

int conv_direct_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		    const float *wpacked, const float *b, float *y)
{
	(void)ctx, (void)j, (void)N, (void)x, (void)wpacked, (void)b, (void)y;
	return CPU_E_INVALID;
}

#endif
