/*
 * conv_nhwc: one-group 1-D, 2-D and 3-D convolutions with a filter of
 * several taps and at least CONV_NHWC_MIN_C input and CONV_NHWC_MIN_M
 * output channels, for conv.c, on AVX2 + FMA and AVX-512 CPUs (conv_nhwc_takes
 * says which layers on each).
 *
 * Through the GEMM such a layer (Inception's 3x3, 5x5, 1x7 and 7x1 layers,
 * 32 to 288 input channels) packs the im2col of its input, each element
 * then used by only the output channels' rows, and reached 42-54 GFLOP/s
 * in the model on Zen 3 where ONNX Runtime's channel-blocked kernels reach
 * 70-81.  Here a band of input rows is transposed once into channels-last
 * order, zero-padded (the pixel's channels consecutive; a 3-D filter reads
 * one such slab per kernel depth), and each tile of six output pixels
 * times sixteen output channels accumulates in twelve registers: for every
 * tap and input channel, two vectors of the filter (sixteen output
 * channels) and six broadcast input values, twelve multiply-adds for eight
 * loads.  A tile's pixels are the band's next six in order, across rows
 * (a 7 x 7 image is eight tiles and one pixel).  The filter is laid out at
 * load as [block of 16 output channels][tap][input channel][16], so that a
 * tile reads it in order.  Finished output rows ([pixel][16] in scratch)
 * go to Y through 8 x 8 transposes, the residual and Relu or Clip on the
 * way; another fused activation runs over each finished band.
 *
 * On AVX-512 a tile is eight output pixels times two such blocks of
 * sixteen, one zmm each (sixteen accumulators; per input channel two
 * filter loads and eight broadcasts, where one block of twelve pixels
 * bound the tile by its loads), the same filter layout read at two
 * blocks' offsets; a block without a partner, twelve pixels a tile.
 *
 * Work is split over the pool by (image, output depth slice, band of
 * output rows, group of channel blocks): a member transposes its band's
 * input rows into its scratch and then computes its blocks of output
 * channels over the band (the band is re-read from cache per block, the
 * filter block stays in L2 over the band).  Small images split by channel
 * groups rather than into bands of a few pixels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "gemm.h"
#include "par.h"
#include "vfloat.h"

#define CN_M 16   /* output channels a block: two vectors */
#define CN_P 6    /* output pixels a tile */
#define CN_BAND_MIN 96     /* output pixels a band, at least (where the image has them) */
#define CN_BAND_MAX 2048   /* ... at most */
#define CN_LARGE_IMAGE 2048   /* output pixels from which AVX-512 takes any 3 x 3 */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CN_X86 1
#include <immintrin.h>
#endif

size_t conv_nhwc_wsize(int64_t Mg, int64_t Cg, int64_t taps)
{
	return (size_t)((Mg + CN_M - 1) / CN_M * taps * Cg * CN_M) * sizeof(float);
}

void conv_nhwc_pack(const float *w, int64_t Mg, int64_t Cg, int64_t taps, float *dst)
{
	for (int64_t b = 0; b < (Mg + CN_M - 1) / CN_M; b++)
		for (int64_t t = 0; t < taps; t++)
			for (int64_t c = 0; c < Cg; c++)
				for (int64_t i = 0; i < CN_M; i++) {
					int64_t m = b * CN_M + i;

					*dst++ = m < Mg ? w[(m * Cg + c) * taps + t] : 0.0f;
				}
}

void conv_nhwc_unpack(const float *packed, int64_t Mg, int64_t Cg, int64_t taps,
		      const int64_t *kept, int64_t n, float *w)
{
	for (int64_t b = 0; b < (Mg + CN_M - 1) / CN_M; b++)
		for (int64_t k = 0; k < n; k++) {
			const float *p = packed + (b * taps + (kept ? kept[k] : k)) * Cg * CN_M;

			for (int64_t c = 0; c < Cg; c++, p += CN_M)
				for (int64_t i = 0; i < CN_M && b * CN_M + i < Mg; i++)
					w[((b * CN_M + i) * Cg + c) * n + k] = p[i];
		}
}

/* conv_nhwc_takes, also knowing the output pixels a plane (osz; 0: not
 * known yet, at load). */
static int takes(int64_t Cg, int64_t taps, int64_t Mg, int64_t osz, int strided)
{
#ifdef CN_X86
	static int env = -1;
	gemm_isa isa = gemm_isa_best();

	if (env < 0) {
		const char *e = getenv("ORTMK_CPU_CONV_NHWC");

		env = !(e && e[0] == '0');
	}
	/* On AVX-512 3 x 3 filters only with few input or output channels,
	 * on large images or with a stride: otherwise the zmm GEMM was faster
	 * where Winograd does not fit (GoogLeNet's 128 -> 192 at 28 x 28: 1.5
	 * ms, 2.1 here), where Inception's 80 -> 192 at 69 x 69 took 0.76x
	 * the GEMM's time here.  Strided, the GEMM's im2col gathers every
	 * other pixel: here Inception's 288 -> 384, 96 -> 96 and 192 -> 320 /
	 * 2 layers took 0.68-0.82x its time in the model (Xeon), ResNet-50's
	 * 128 -> 128 and 256 -> 256 / 2 0.82-0.85x, 512 -> 512 / 2 at 7 x 7
	 * the same. */
	return env && taps > 1 && Cg >= CONV_NHWC_MIN_C && Mg >= CONV_NHWC_MIN_M &&
	       (isa == GEMM_ISA_AVX2 ||
		(isa == GEMM_ISA_AVX512 &&
		 (taps != 9 || Cg <= 32 || Mg <= 64 || osz >= CN_LARGE_IMAGE || strided)));
#else
	(void)Cg;
	(void)taps;
	(void)Mg;
	(void)osz;
	(void)strided;
	return 0;
#endif
}

int conv_nhwc_takes(int64_t Cg, int64_t taps, int64_t Mg, int strided)
{
	return takes(Cg, taps, Mg, 0, strided);
}

int conv_nhwc_fits(const conv_job *j, int64_t group)
{
	const cpu_geom *g = &j->g;

	return group == 1 && takes(j->Cg, j->ksz / j->Cg, j->Mg, j->osz,
				   g->s[0] > 1 || g->s[1] > 1 || g->s[2] > 1);
}

#ifdef CN_X86

#define CN_TARGET __attribute__((target("avx2,fma")))

typedef struct cn_job {
	const conv_job *j;
	const float *x, *w, *b;   /* w: conv_nhwc_pack's layout */
	float *y;
	int64_t bands, band_rows;
	int64_t mgroups, group_blocks;   /* output channel blocks split in groups */
	int64_t PW;               /* pixels a padded band row */
	int64_t rows_max;         /* padded rows a band reads */
	int64_t member_floats;    /* the band, then its results: band_rows x OW x 16 */
	float *scratch;
	int clamp;                /* Relu or Clip in the store: [lo, hi] */
	float lo, hi;
	const cpu_fusion *act;    /* else an activation over each finished band */
	int zmm;                  /* AVX-512: blocks in pairs (cn_pair), a block
				   * left alone twelve pixels a tile (cn_tile512) */
} cn_job;

/* Padded rows [r0, r1) (padded row r is input row r - pt) of the plane
 * at x (its channels cs floats apart; NULL: a depth slice in the padding)
 * into xp, channels last: pixel (r, col) at xp + ((r - r0) * PW + col) *
 * Cg; padding and the columns past the image are zero. */
static CN_TARGET void cn_band_in(const cn_job *d, const float *x, int64_t cs, int64_t r0,
				 int64_t r1, float *xp)
{
	const cpu_geom *g = &d->j->g;
	int64_t IH = g->in[1], IW = g->in[2], pt = g->pb[1], pl = g->pb[2], C = d->j->Cg;
	int64_t PW = d->PW;

	for (int64_t r = r0; r < r1; r++) {
		float *row = xp + (r - r0) * PW * C;
		int64_t ih = r - pt, c = 0;

		if (!x || ih < 0 || ih >= IH) {
			memset(row, 0, (size_t)(PW * C) * sizeof(float));
			continue;
		}
		memset(row, 0, (size_t)(pl * C) * sizeof(float));
		memset(row + (pl + IW) * C, 0, (size_t)((PW - pl - IW) * C) * sizeof(float));
		row += pl * C;
		if (d->j->xblk) {   /* NCHWc8 (2-D): a pixel's block is 8 floats already */
			for (; c < C; c += 8) {
				const float *src = x + c * cs + ih * IW * 8;

				for (int64_t iw = 0; iw < IW; iw++)
					_mm256_storeu_ps(row + iw * C + c, _mm256_loadu_ps(src + iw * 8));
			}
			continue;
		}
		for (; c + 8 <= C; c += 8) {
			const float *src = x + c * cs + ih * IW;
			int64_t iw = 0;

			for (; iw + 8 <= IW; iw += 8) {
				__m256 v[8];

				for (int k = 0; k < 8; k++)
					v[k] = _mm256_loadu_ps(src + k * cs + iw);
				vf_transpose8((vf8 *)v);
				for (int k = 0; k < 8; k++)
					_mm256_storeu_ps(row + (iw + k) * C + c, v[k]);
			}
			for (; iw < IW; iw++)
				for (int k = 0; k < 8; k++)
					row[iw * C + c + k] = src[k * cs + iw];
		}
		for (; c < C; c++) {
			const float *src = x + c * cs + ih * IW;

			for (int64_t iw = 0; iw < IW; iw++)
				row[iw * C + c] = src[iw];
		}
	}
}

/* P (1 to 6) output pixels (pixel p's first input at xq[p]) times the
 * sixteen output channels of filter block w, over every tap (depth kd's
 * slab at kd * slabf floats, kernel row kh at kh * rowf, column kw at
 * kw * colf) and input channel, from
 * the bias (b0, b1), into out[pixel][16].  Named accumulators, not an
 * array: gcc spilled an array of them. */
static inline __attribute__((always_inline)) CN_TARGET void
cn_tile(const float *const *xq, const float *w, int64_t C, int KD, int KH, int KW, int64_t slabf,
	int64_t rowf, int64_t colf, __m256 b0, __m256 b1, float *out, int P)
{
	__m256 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1;
	__m256 a30 = b0, a31 = b1, a40 = b0, a41 = b1, a50 = b0, a51 = b1;

	for (int kd = 0; kd < KD; kd++)
	for (int kh = 0; kh < KH; kh++)
		for (int kw = 0; kw < KW; kw++) {
			int64_t o = kd * slabf + kh * rowf + kw * colf;
			const float *x0 = xq[0] + o, *x1 = xq[1] + o, *x2 = xq[2] + o;
			const float *x3 = xq[3] + o, *x4 = xq[4] + o, *x5 = xq[5] + o;
			const float *wt = w + ((kd * KH + kh) * KW + kw) * C * CN_M;

			for (int64_t c = 0; c < C; c++) {
				__m256 w0 = _mm256_loadu_ps(wt), w1 = _mm256_loadu_ps(wt + 8), v;

				wt += CN_M;
#define CN_PIXEL(p, xp, a0, a1)                                                            \
	if (P > (p)) {                                                                     \
		v = _mm256_broadcast_ss(xp + c);                                           \
		a0 = _mm256_fmadd_ps(v, w0, a0);                                           \
		a1 = _mm256_fmadd_ps(v, w1, a1);                                           \
	}
				CN_PIXEL(0, x0, a00, a01)
				CN_PIXEL(1, x1, a10, a11)
				CN_PIXEL(2, x2, a20, a21)
				CN_PIXEL(3, x3, a30, a31)
				CN_PIXEL(4, x4, a40, a41)
				CN_PIXEL(5, x5, a50, a51)
#undef CN_PIXEL
			}
		}
#define CN_OUT(p, a0, a1)                                                                  \
	if (P > (p)) {                                                                     \
		_mm256_storeu_ps(out + (p) * CN_M, a0);                                    \
		_mm256_storeu_ps(out + (p) * CN_M + 8, a1);                                \
	}
	CN_OUT(0, a00, a01) CN_OUT(1, a10, a11) CN_OUT(2, a20, a21)
	CN_OUT(3, a30, a31) CN_OUT(4, a40, a41) CN_OUT(5, a50, a51)
#undef CN_OUT
}

#define CN_P512 12   /* output pixels a tile on AVX-512: a zmm each */
#define CN_T512 __attribute__((target("avx512f,avx2,fma")))

/* cn_tile on AVX-512: P (1 to 12) output pixels times the sixteen output
 * channels in one zmm each, twelve multiply-adds for one filter load and
 * twelve broadcasts. */
static inline __attribute__((always_inline)) CN_T512 void
cn_tile512(const float *const *xq, const float *w, int64_t C, int KD, int KH, int KW,
	   int64_t slabf, int64_t rowf, int64_t colf, const float *bias, float *out, int P)
{
	__m512 b = _mm512_loadu_ps(bias);
	__m512 a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b;
	__m512 a6 = b, a7 = b, a8 = b, a9 = b, a10 = b, a11 = b;

	for (int kd = 0; kd < KD; kd++)
	for (int kh = 0; kh < KH; kh++)
		for (int kw = 0; kw < KW; kw++) {
			int64_t o = kd * slabf + kh * rowf + kw * colf;
			const float *wt = w + ((kd * KH + kh) * KW + kw) * C * CN_M;
			const float *x0 = xq[0] + o, *x1 = xq[1] + o, *x2 = xq[2] + o;
			const float *x3 = xq[3] + o, *x4 = xq[4] + o, *x5 = xq[5] + o;
			const float *x6 = xq[6] + o, *x7 = xq[7] + o, *x8 = xq[8] + o;
			const float *x9 = xq[9] + o, *x10 = xq[10] + o, *x11 = xq[11] + o;

			for (int64_t c = 0; c < C; c++, wt += CN_M) {
				__m512 wv = _mm512_loadu_ps(wt);
#define CN_PX(p, xp, a)                                                                    \
	if (P > (p))                                                                       \
		a = _mm512_fmadd_ps(_mm512_set1_ps(xp[c]), wv, a);
				CN_PX(0, x0, a0) CN_PX(1, x1, a1) CN_PX(2, x2, a2)
				CN_PX(3, x3, a3) CN_PX(4, x4, a4) CN_PX(5, x5, a5)
				CN_PX(6, x6, a6) CN_PX(7, x7, a7) CN_PX(8, x8, a8)
				CN_PX(9, x9, a9) CN_PX(10, x10, a10) CN_PX(11, x11, a11)
#undef CN_PX
			}
		}
#define CN_O(p, a)                                                                         \
	if (P > (p))                                                                       \
		_mm512_storeu_ps(out + (p) * CN_M, a);
	CN_O(0, a0) CN_O(1, a1) CN_O(2, a2) CN_O(3, a3) CN_O(4, a4) CN_O(5, a5)
	CN_O(6, a6) CN_O(7, a7) CN_O(8, a8) CN_O(9, a9) CN_O(10, a10) CN_O(11, a11)
#undef CN_O
}

/* One tile of P pixels through cn_tile512, P a constant in each case. */
static CN_T512 void cn_tile512_p(const float *const *xq, const float *w, int64_t C, int KD,
				 int KH, int KW, int64_t slabf, int64_t rowf, int64_t colf,
				 const float *bias, float *out, int P)
{
	switch (P) {
#define CN_C(n)                                                                            \
	case n:                                                                            \
		cn_tile512(xq, w, C, KD, KH, KW, slabf, rowf, colf, bias, out, n);         \
		break;
	CN_C(1) CN_C(2) CN_C(3) CN_C(4) CN_C(5) CN_C(6)
	CN_C(7) CN_C(8) CN_C(9) CN_C(10) CN_C(11)
#undef CN_C
	default:
		cn_tile512(xq, w, C, KD, KH, KW, slabf, rowf, colf, bias, out, CN_P512);
		break;
	}
}

#define CN_P2 8   /* output pixels a tile of two blocks on AVX-512 */

/* Two filter blocks at once on AVX-512 (w and w + wblock): P (1 to 8)
 * output pixels times 32 output channels in sixteen zmm, sixteen
 * multiply-adds for two filter loads and eight broadcasts (cn_tile512's
 * twelve broadcasts for twelve bound it by the loads); block 0's results
 * into out0, block 1's into out1, [pixel][16] each. */
static inline __attribute__((always_inline)) CN_T512 void
cn_tile512x2(const float *const *xq, const float *w, int64_t wblock, int64_t C, int KD, int KH,
	     int KW, int64_t slabf, int64_t rowf, int64_t colf, const float *bias, float *out0,
	     float *out1, int P)
{
	__m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + CN_M);
	__m512 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1, a30 = b0, a31 = b1;
	__m512 a40 = b0, a41 = b1, a50 = b0, a51 = b1, a60 = b0, a61 = b1, a70 = b0, a71 = b1;

	for (int kd = 0; kd < KD; kd++)
	for (int kh = 0; kh < KH; kh++)
		for (int kw = 0; kw < KW; kw++) {
			int64_t o = kd * slabf + kh * rowf + kw * colf;
			const float *wt = w + ((kd * KH + kh) * KW + kw) * C * CN_M;
			const float *x0 = xq[0] + o, *x1 = xq[1] + o, *x2 = xq[2] + o;
			const float *x3 = xq[3] + o, *x4 = xq[4] + o, *x5 = xq[5] + o;
			const float *x6 = xq[6] + o, *x7 = xq[7] + o;

#pragma GCC unroll 4
			for (int64_t c = 0; c < C; c++, wt += CN_M) {
				__m512 w0 = _mm512_loadu_ps(wt), w1 = _mm512_loadu_ps(wt + wblock), v;
#define CN_PX(p, xp, a0, a1)                                                               \
	if (P > (p)) {                                                                     \
		v = _mm512_set1_ps(xp[c]);                                                 \
		a0 = _mm512_fmadd_ps(v, w0, a0);                                           \
		a1 = _mm512_fmadd_ps(v, w1, a1);                                           \
	}
				CN_PX(0, x0, a00, a01) CN_PX(1, x1, a10, a11)
				CN_PX(2, x2, a20, a21) CN_PX(3, x3, a30, a31)
				CN_PX(4, x4, a40, a41) CN_PX(5, x5, a50, a51)
				CN_PX(6, x6, a60, a61) CN_PX(7, x7, a70, a71)
#undef CN_PX
			}
		}
#define CN_O(p, a0, a1)                                                                    \
	if (P > (p)) {                                                                     \
		_mm512_storeu_ps(out0 + (p) * CN_M, a0);                                   \
		_mm512_storeu_ps(out1 + (p) * CN_M, a1);                                   \
	}
	CN_O(0, a00, a01) CN_O(1, a10, a11) CN_O(2, a20, a21) CN_O(3, a30, a31)
	CN_O(4, a40, a41) CN_O(5, a50, a51) CN_O(6, a60, a61) CN_O(7, a70, a71)
#undef CN_O
}

static CN_T512 void cn_tile512x2_p(const float *const *xq, const float *w, int64_t wblock,
				   int64_t C, int KD, int KH, int KW, int64_t slabf, int64_t rowf,
				   int64_t colf, const float *bias, float *out0, float *out1, int P)
{
	switch (P) {
#define CN_C(n)                                                                            \
	case n:                                                                            \
		cn_tile512x2(xq, w, wblock, C, KD, KH, KW, slabf, rowf, colf, bias, out0, out1, \
			     n);                                                           \
		break;
	CN_C(1) CN_C(2) CN_C(3) CN_C(4) CN_C(5) CN_C(6) CN_C(7)
#undef CN_C
	default:
		cn_tile512x2(xq, w, wblock, C, KD, KH, KW, slabf, rowf, colf, bias, out0, out1,
			     CN_P2);
		break;
	}
}

/* Row buffer rb ([pixel][16], OW pixels) to channels [m0, m0 + nm) of
 * output row y (plane stride osz; the residual at res, same layout), with
 * the clamp. */
static CN_TARGET void cn_row_out(const cn_job *d, const float *rb, int64_t OW, float *y,
				 const float *res, int64_t osz, int nm)
{
	__m256 lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
	int64_t p = 0;

	if (d->j->yblk) {   /* NCHWc8: y and res at the row's first pixel of block m0 / 8 */
		for (int h = 0; h < nm; h += 8)
			for (p = 0; p < OW; p++) {
				int64_t at = h * osz + p * 8;
				__m256 v = _mm256_loadu_ps(rb + p * CN_M + h);

				if (res)
					v = _mm256_add_ps(v, _mm256_loadu_ps(res + at));
				if (d->clamp)
					v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
				_mm256_storeu_ps(y + at, v);
			}
		return;
	}

	for (; p + 8 <= OW; p += 8)
		for (int h = 0; h < nm; h += 8) {
			__m256 v[8];

			for (int k = 0; k < 8; k++)
				v[k] = _mm256_loadu_ps(rb + (p + k) * CN_M + h);
			vf_transpose8((vf8 *)v);
			for (int k = 0; k < 8 && h + k < nm; k++) {
				int64_t at = (h + k) * osz + p;

				if (res)
					v[k] = _mm256_add_ps(v[k], _mm256_loadu_ps(res + at));
				/* max(lo, x), min(hi, x): x itself when NaN */
				if (d->clamp)
					v[k] = _mm256_min_ps(hi, _mm256_max_ps(lo, v[k]));
				_mm256_storeu_ps(y + at, v[k]);
			}
		}
	for (; p < OW; p++)
		for (int m = 0; m < nm; m++) {
			float v = rb[p * CN_M + m] + (res ? res[m * osz + p] : 0.0f);

			if (d->clamp && v == v)
				v = v < d->lo ? d->lo : v > d->hi ? d->hi : v;
			y[m * osz + p] = v;
		}
}

/* A tile's input pointers: output pixel p0 + i of the band (the first
 * one again past the P the tile has) at xq[i], i < tp. */
static inline __attribute__((always_inline)) void cn_tile_inputs(const cn_job *d,
								  const float *xp, int64_t p0,
								  int P, int tp, const float **xq)
{
	const cpu_geom *g = &d->j->g;
	int64_t OW = g->out[2];

	for (int i = 0; i < tp; i++) {
		int64_t q = p0 + (i < P ? i : 0), r = q / OW, c = q % OW;

		xq[i] = xp + (r * g->s[1] * d->PW + c * g->s[2]) * d->j->Cg;
	}
}

/* Finished output row oh of depth slice od of image n, channels [m0,
 * m0 + nm), from its row buffer rb to Y. */
static CN_TARGET void cn_finish_row(const cn_job *d, const float *rb, int64_t n, int64_t od,
				    int64_t oh, int64_t m0, int nm)
{
	const conv_job *j = d->j;
	int64_t OW = j->g.out[2];
	int64_t yoff = (n * j->Mg + m0) * j->osz +
		       (od * j->g.out[1] + oh) * OW * (j->yblk ? 8 : 1);

	cn_row_out(d, rb, OW, d->y + yoff, j->res ? (const float *)j->res->data + yoff : NULL,
		   j->osz, nm);
}

/* Blocks m0 / CN_M and the next (nm2 channels in all) over the band's
 * output rows [oh0, oh1) on AVX-512: the second block's results in rb
 * after the first's (the band's pixels x 16 each). */
static CN_TARGET void cn_pair(const cn_job *d, const float *xp, float *rb, const float *w,
			      int64_t wblock, const float *bias, int64_t n, int64_t od, int64_t oh0,
			      int64_t oh1, int64_t m0, int nm2, int KD, int KH, int KW)
{
	const cpu_geom *g = &d->j->g;
	int64_t C = d->j->Cg, OW = g->out[2], PW = d->PW;
	int64_t rowf = g->d[1] * PW * C, colf = g->d[2] * C, slabf = d->rows_max * PW * C;
	int64_t done = 0, np = (oh1 - oh0) * OW, oh = oh0;
	float *rb1 = rb + np * CN_M;

	for (int64_t p0 = 0; p0 < np; p0 += CN_P2) {
		const float *xq[CN_P2];
		int P = (int)(np - p0 < CN_P2 ? np - p0 : CN_P2);

		cn_tile_inputs(d, xp, p0, P, CN_P2, xq);
		cn_tile512x2_p(xq, w, wblock, C, KD, KH, KW, slabf, rowf, colf, bias,
			       rb + p0 * CN_M, rb1 + p0 * CN_M, P);
		for (; done + OW <= p0 + P; done += OW, oh++) {
			cn_finish_row(d, rb + done * CN_M, n, od, oh, m0, CN_M);
			cn_finish_row(d, rb1 + done * CN_M, n, od, oh, m0 + CN_M, nm2 - CN_M);
		}
	}
}

/* Output rows [oh0, oh1) of depth slice od of image n from its band xp
 * (padded rows from oh0 * sh, a slab per kernel depth), blocks [mb0, mb1)
 * of sixteen output channels. */
static inline __attribute__((always_inline)) CN_TARGET void
cn_rows(const cn_job *d, const float *xp, float *rb, int64_t n, int64_t od, int64_t oh0,
	int64_t oh1, int64_t mb0, int64_t mb1, int KH, int KW)
{
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t C = j->Cg, OW = g->out[2], PW = d->PW;
	int64_t rowf = g->d[1] * PW * C, colf = g->d[2] * C, slabf = d->rows_max * PW * C;
	int KD = (int)g->k[0];
	int64_t wblock = KD * KH * KW * C * CN_M;

	for (int64_t m0 = mb0 * CN_M; m0 < j->Mg && m0 < mb1 * CN_M; m0 += CN_M) {
		int nm = (int)(j->Mg - m0 < CN_M ? j->Mg - m0 : CN_M);
		const float *w = d->w + m0 / CN_M * wblock;
		float bias[2 * CN_M] = {0};
		__m256 b0, b1;

		/* AVX-512: blocks in pairs where the group has two left */
		if (d->zmm && m0 + CN_M < j->Mg && m0 + CN_M < mb1 * CN_M) {
			int nm2 = (int)(j->Mg - m0 < 2 * CN_M ? j->Mg - m0 : 2 * CN_M);

			for (int m = 0; d->b && m < nm2; m++)
				bias[m] = d->b[m0 + m];
			cn_pair(d, xp, rb, w, wblock, bias, n, od, oh0, oh1, m0, nm2, KD, KH, KW);
			m0 += CN_M;
			continue;
		}
		for (int m = 0; d->b && m < nm; m++)
			bias[m] = d->b[m0 + m];
		b0 = _mm256_loadu_ps(bias);
		b1 = _mm256_loadu_ps(bias + 8);
		/* the band's output pixels in order, six a tile whatever their row
		 * (a 7 x 7 image: eight tiles and one pixel, not seven rows of a
		 * tile and a one-pixel tail, each streaming the filter block) */
		int64_t done = 0, np = (oh1 - oh0) * OW, oh = oh0;
		int tp = d->zmm ? CN_P512 : CN_P;

		for (int64_t p0 = 0; p0 < np; p0 += tp) {
			const float *xq[CN_P512];
			int P = (int)(np - p0 < tp ? np - p0 : tp);

			cn_tile_inputs(d, xp, p0, P, tp, xq);
			if (d->zmm)
				cn_tile512_p(xq, w, C, KD, KH, KW, slabf, rowf, colf, bias,
					     rb + p0 * CN_M, P);
			else if (P == CN_P)
				cn_tile(xq, w, C, KD, KH, KW, slabf, rowf, colf, b0, b1, rb + p0 * CN_M,
					CN_P);
			else
				switch (P) {
#define CN_TAIL(P)                                                                         \
	case P:                                                                            \
		cn_tile(xq, w, C, KD, KH, KW, slabf, rowf, colf, b0, b1, rb + p0 * CN_M, P); \
		break;
				CN_TAIL(1) CN_TAIL(2) CN_TAIL(3) CN_TAIL(4) CN_TAIL(5)
#undef CN_TAIL
				default: break;
				}
			/* rows finished: to Y while their results are in cache */
			for (; done + OW <= p0 + P; done += OW, oh++)
				cn_finish_row(d, rb + done * CN_M, n, od, oh, m0, nm);
		}
	}
}

static CN_TARGET void cn_band(const cn_job *d, const float *xp, float *rb, int64_t n,
			      int64_t od, int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1)
{
	const cpu_geom *g = &d->j->g;
	int64_t kh = g->k[1], kw = g->k[2];

	if (kh == 3 && kw == 3)
		cn_rows(d, xp, rb, n, od, oh0, oh1, mb0, mb1, 3, 3);
	else if (kh == 5 && kw == 5)
		cn_rows(d, xp, rb, n, od, oh0, oh1, mb0, mb1, 5, 5);
	else
		cn_rows(d, xp, rb, n, od, oh0, oh1, mb0, mb1, (int)kh, (int)kw);
}

static void cn_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const cn_job *d = arg;
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t plane = g->in[1] * g->in[2], isz = g->in[0] * plane, OD = g->out[0];
	int64_t OH = g->out[1], OW = g->out[2], sh = g->s[1], slab = d->rows_max * d->PW * j->Cg;
	float *xp = d->scratch + member * d->member_floats;
	float *rb = xp + g->k[0] * slab;

	for (int64_t it = i0; it < i1; it++) {
		int64_t grp = it % d->mgroups, band = it / d->mgroups % d->bands;
		int64_t od = it / d->mgroups / d->bands % OD, n = it / d->mgroups / d->bands / OD;
		int64_t oh0 = OH * band / d->bands, oh1 = OH * (band + 1) / d->bands;
		int64_t mb0 = grp * d->group_blocks, mb1 = mb0 + d->group_blocks;

		/* a band read by several groups is transposed by each (small
		 * images, where the groups are what splits the work); a slab per
		 * kernel depth */
		for (int64_t kd = 0; kd < g->k[0]; kd++) {
			int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
			const float *src = id >= 0 && id < g->in[0] ?
				d->x + n * j->Cg * isz + id * plane : NULL;

			cn_band_in(d, src, isz, oh0 * sh,
				   (oh1 - 1) * sh + (g->k[1] - 1) * g->d[1] + 1, xp + kd * slab);
		}
		cn_band(d, xp, rb, n, od, oh0, oh1, mb0, mb1);
		/* (blocked: a block's rows are consecutive, as a plane's) */
		for (int64_t m = mb0 * CN_M, u = j->yblk ? 8 : 1; d->act && m < j->Mg &&
		     m < mb1 * CN_M; m += u)
			cpu_fuse_act_apply(d->act,
					   d->y + (n * j->Mg + m) * j->osz + (od * OH + oh0) * OW * u,
					   (oh1 - oh0) * OW * u);
	}
}

/* Groups of channel blocks for d->mgroups (at most `blocks`, each of
 * d->group_blocks), and then the bands and groups nearest d->bands and
 * d->mgroups that make the items (nb planes x bands x groups) a multiple
 * of the members, when some do: the rows of a band are OH / bands, give or
 * take one, so equal counts are equal work.  Inception's 48 -> 64 5 x 5 at
 * 35 x 35 was 7 bands of 5 rows on two threads, 4 : 3; its 288 -> 384
 * 3 x 3 / 2 at 17 x 17 9 items (single layers, Xeon, 2 threads: 571-647
 * -> 518-576 us and 1740-1973 -> 1652-1834). */
static void split_even(cn_job *d, int64_t nb, int64_t OH, int64_t blocks, int members)
{
	int64_t best = 0, bb = d->bands, bg = d->mgroups < blocks ? d->mgroups : blocks;
	/* on AVX-512 blocks go in pairs: an even group size stays even */
	int pairs = d->zmm && (blocks + bg - 1) / bg % 2 == 0;

	for (int64_t b = d->bands; b < d->bands + members && b <= OH; b++)
		for (int64_t g = bg; g < bg + members && g <= blocks; g++) {
			int64_t gb = (blocks + g - 1) / g, gn = (blocks + gb - 1) / gb;

			if ((nb * b * gn) % members == 0 && (!pairs || gb % 2 == 0) &&
			    (!best || nb * b * gn < best)) {
				best = nb * b * gn;
				bb = b;
				bg = gn;
			}
		}
	d->bands = bb;
	d->mgroups = bg < blocks ? bg : blocks;
	d->group_blocks = (blocks + d->mgroups - 1) / d->mgroups;
	d->mgroups = (blocks + d->group_blocks - 1) / d->group_blocks;
}

int conv_nhwc_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		  const float *wpacked, const float *b, float *y)
{
	const cpu_geom *g = &j->g;
	int64_t OH = g->out[1], OW = g->out[2], bands, span, blocks = (j->Mg + CN_M - 1) / CN_M;
	int64_t items, nb;
	int members = cpu_par_members(ctx);
	cn_job d = {.j = j, .x = x, .w = wpacked, .b = b, .y = y, .act = j->act,
		    .lo = -INFINITY, .hi = INFINITY, .zmm = gemm_isa_best() == GEMM_ISA_AVX512};

	if ((d.clamp = conv_job_clamp(j, &d.lo, &d.hi)) != 0)
		d.act = NULL;
	/* A padded row holds every column a tap reads. */
	span = (OW - 1) * g->s[2] + (g->k[2] - 1) * g->d[2] + 1;
	d.PW = span > g->pb[2] + g->in[2] ? span : g->pb[2] + g->in[2];
	/* Work items: (image, band of rows, group of channel blocks), about
	 * four a member when the batch does not feed the pool, by bands of at
	 * least CN_BAND_MIN pixels (a tile streams its filter block: a 7 x 7
	 * image cut into rows spent more on that than on the products), then
	 * by groups of channel blocks.  A band is at most CN_BAND_MAX pixels
	 * (its results wait in scratch). */
	nb = N * g->out[0];   /* (image, output depth slice) planes */
	items = nb >= 2 * members ? nb : 4 * members;
	bands = (items + nb - 1) / nb;
	if (bands > OH * OW / CN_BAND_MIN)
		bands = OH * OW / CN_BAND_MIN;
	if (bands < (OH * OW + CN_BAND_MAX - 1) / CN_BAND_MAX)
		bands = (OH * OW + CN_BAND_MAX - 1) / CN_BAND_MAX;
	bands = bands < 1 ? 1 : bands < OH ? bands : OH;
	d.bands = bands;
	d.mgroups = members > 1 ? (items + nb * bands - 1) / (nb * bands) : 1;
	split_even(&d, nb, OH, blocks, members);
	d.band_rows = (OH + d.bands - 1) / d.bands;   /* the most a band has */
	d.rows_max = (d.band_rows - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
	d.member_floats = g->k[0] * d.rows_max * d.PW * j->Cg +
			  (d.zmm ? 2 : 1) * d.band_rows * OW * CN_M;
	d.scratch = cpu_scratch(ctx, (size_t)members * (size_t)d.member_floats * sizeof(float));
	if (!d.scratch)
		return CPU_E_NOMEM;
	/* ~0.03 ns a multiply-add, plus the transposed copy */
	cpu_par_for(ctx, nb * d.bands * d.mgroups,
		    0.03 * (double)(j->Mg * j->ksz * j->osz) /
		    (double)(g->out[0] * d.bands * d.mgroups) +
		    0.5 * (double)(g->k[0] * d.rows_max * d.PW * j->Cg), 1, cn_range, &d);
	return 0;
}

#else

int conv_nhwc_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		  const float *wpacked, const float *b, float *y)
{
	(void)ctx, (void)j, (void)N, (void)x, (void)wpacked, (void)b, (void)y;
	return CPU_E_INVALID;
}

#endif
