/*
 * conv_blk: 1x1 and depthwise convolutions on channel-blocked activations,
 * for conv.c, on CPUs with AVX2 + FMA (AVX-512 ones too: there a 1x1
 * layer's tile is eight pixels by two pairs of blocks in zmm, pw_run2, and
 * a first layer's twelve pixels by two pairs, in_row512; the other kernels
 * are the ymm ones, which beat the plain zmm paths on depthwise layers and
 * save the reorders around grouped ones).
 *
 * Layout (NCHWc8): an image's C channels (a multiple of 8) as C / 8 blocks
 * of its H x W pixels, each pixel's eight channels consecutive:
 * x[n][c / 8][h][w][c % 8].  The same bytes as NCHW, in another order, so
 * the core's memory plan holds either.  cpu_layout.c decides at load
 * which values inside a step are kept so: those a 1x1 or depthwise
 * convolution writes and only such convolutions read (node->layout).
 *
 * MobileNet-style networks are chains of 1x1 expansions, depthwise 3x3 or
 * 5x5 layers and 1x1 projections.  Through the GEMM each 1x1 layer packs
 * its input (or transposes it and its output for small images) and each
 * depthwise layer handles every plane's edges on its own; on Zen 3 those
 * layers ran 1.3-1.7x ONNX Runtime's channel-blocked kernels in the model.
 * Here no layer reorders anything:
 *  - 1x1 (stride 1, no padding): tiles of six pixels by sixteen output
 *    channels (two blocks) in twelve registers; for every input channel
 *    two vectors of the filter ([pair of blocks][input channel][16],
 *    packed at load) and six broadcast input values.  A 1x1 layer reading
 *    plain NCHW blocks it into scratch first.  With a stride
 *    (CONV_BLK_PWS, no padding) the kept pixels (every s-th of every
 *    sh-th row) are gathered first (pws_gather), then the same tile.
 *  - 3x3 stride-1 layers (CONV_BLK_W3) are Winograd's (conv_wino.c), its
 *    transforms reading and writing the blocked order.
 *  - a first layer (one group, at most CONV_BLK_IN_MAX_C plain input
 *    channels, more than one tap and at most CONV_BLK_IN_MAX_K a side, no
 *    dilation): the same tile over the
 *    zero-padded input planes, six output pixels of a row, for every
 *    channel and tap two filter vectors and six broadcast values.
 *  - one-group layers of few input channels and at least 64 outputs
 *    that conv_direct.c takes plain (CONV_BLK_KB: SqueezeNet's 16 -> 64
 *    3x3): the first layers' tile over zero-padded blocked input planes,
 *    the filter as [pair][input block][tap][channel of the block][16]
 *    (at batch 32 the plain layers between blocked ones had cost
 *    SqueezeNet's first two Fire modules their reorders and the GEMM's
 *    packing: 1.3x ONNX Runtime's whole model).
 *  - groups of eight input and eight output channels (RegNet): the same
 *    tile over input block g for output block g, one filter vector and
 *    six broadcast values for every tap and channel of the group.
 *  - depthwise (one input and one output channel a group, any kernel,
 *    stride and padding, no dilation): a vector is one pixel's eight
 *    channels, four output pixels of a row at a time in the interior, the
 *    edges one by one; the filter as [block][tap][8].  A plain input is
 *    blocked into scratch first.
 * Bias, a residual of Y's layout, Relu, Clip, HardSwish or HardSigmoid are
 * applied as a tile is stored (MobileNetV3's HardSwish over each finished
 * run of pixels instead, a second pass, took 0.9x of mobilenet_v3_small's
 * time); another fused activation over each finished run of pixels.  A
 * layer whose output is plain (the last one before another kind of node)
 * is computed blocked into scratch and unblocked into Y: its activation
 * in the kernel as above, unless a residual comes first (added as the
 * scratch is unblocked; conv.c applies the activation after).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blk8.h"
#include "conv_impl.h"
#include "gemm.h"
#include "par.h"
#include "vfloat.h"

#define CB 8          /* channels a block */
#define PW_M 16       /* output channels a 1x1 tile: two blocks */
#define PW_P 6        /* pixels a 1x1 tile */
/* A task's input pixels (all channels), at most: this, or half the L2
 * where the filter outgrows that half, and for the channel slices' chunks
 * (pw_schedule).  Each chunk reads the whole filter: ResNet-50's 2048 ->
 * 512 at 7 x 7 in chunks of 12 pixels streamed its 4 MB filter five times
 * (1.3 ms; 0.9 whole, as the GEMM).  Chunks of half the L2 for small
 * filters lost the input from the L2 between pairs: MobileNetV2's 16 ->
 * 96 at 112 x 112 0.54 -> 0.85 ms. */
#define PW_CHUNK_BYTES (128 << 10)
/* A filter of more bytes than this streams from memory for each chunk
 * where the channels are not sliced (the ymm tile: AVX2 CPUs): the tile
 * reads it and the input from L2, and FCN's 2048 -> 512 at 65 x 65 took
 * 2.7x the GEMM's time, 1024 -> 256 2.2x; such a layer on more pixels
 * than a chunk runs on plain copies there (conv_blk_pw_fits).  Sliced,
 * 512 -> 2048 and 2048 -> 512 at 65 x 65 took the GEMM's time. */
#define PW_MAX_STREAMED ((int64_t)512 << 10)
/* Input blocks a slice of the channels (pw_range, AVX-512) */
#define PW_KSLICE 32

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CB_X86 1
#include <immintrin.h>
#define CB_TARGET __attribute__((target("avx2,fma")))
#endif

int conv_blk_enabled(void)
{
#ifdef CB_X86
	static int env = -1;

	if (env < 0) {
		const char *e = getenv("ORTMK_CPU_CONV_BLOCKED");

		env = !(e && e[0] == '0');
	}
	return env && gemm_isa_best() >= GEMM_ISA_AVX2;   /* AVX2 or AVX-512 */
#else
	return 0;
#endif
}

int conv_blk_kind(const Onnx__NodeProto *p, const cpu_tensor *W)
{
	cpu_window win;
	char err[64];
	int64_t group, M, Cg;
	int ones, no_pad = 1;   /* ones: every stride 1 */

	/* a float16 filter: the node runs widened (cpu_f16.c), its kernel on
	 * float32 copies of the same order */
	if (!conv_blk_enabled() || !W || (W->dtype != CPU_FLOAT && W->dtype != CPU_FLOAT16) ||
	    W->rank != 4 ||
	    cpu_window_parse(p, &win, err, sizeof(err)))
		return 0;
	group = cpu_attr_int(p, "group", 1);
	M = W->dims[0];
	Cg = W->dims[1];
	if (M < CB || M % CB)
		return 0;
	/* (dilated too: conv_wino_dilated's sub-images) */
	if (group == 1 && Cg % CB == 0 && conv_wino_takes(W, &win, group))
		return CONV_BLK_W3;
	for (int i = 0; i < win.n_dilations; i++)
		if (win.dilations[i] != 1)
			return 0;
	ones = !cpu_window_strided(&win);
	for (int i = 0; i < win.n_pads; i++)
		no_pad &= win.pads[i] == 0;
	/* (auto_pad SAME on a strided 1x1 pads: left to the GEMM) */
	no_pad &= win.auto_pad == CPU_PAD_NOTSET || win.auto_pad == CPU_PAD_VALID;
	if (group == 1 && Cg % CB == 0 && W->dims[2] == 1 && W->dims[3] == 1 && no_pad)
		return ones ? CONV_BLK_PW : CONV_BLK_PWS;
	if (group == 1 && Cg % CB == 0 && W->dims[2] * W->dims[3] > 1 &&
	    conv_nhwc_takes(Cg, W->dims[2] * W->dims[3], M, !ones) &&
	    !conv_direct_takes(Cg, W->dims[2] * W->dims[3], M))
		return CONV_BLK_NHWC;
	/* (the tile's four output blocks a pass, two filter vectors to twelve
	 * broadcasts: with 16 or 32 outputs half of it, where conv_direct.c
	 * was faster: U-Net's 16 -> 16 at 1024 x 1024 1.4x its time) */
	if (group == 1 && Cg % CB == 0 && W->dims[2] * W->dims[3] > 1 && M >= 64 &&
	    conv_direct_takes(Cg, W->dims[2] * W->dims[3], M))
		return CONV_BLK_KB;
	if (group == M && Cg == 1)
		return CONV_BLK_DW;
	if (group > 1 && Cg == CB && M == group * CB)
		return CONV_BLK_G8;
	/* (ResNet's 7x7 first layer ran 1.3-1.6x its GEMM's time: a tap of one
	 * channel a loop) */
	if (group == 1 && Cg <= CONV_BLK_IN_MAX_C && W->dims[2] * W->dims[3] > 1 &&
	    W->dims[2] <= CONV_BLK_IN_MAX_K && W->dims[3] <= CONV_BLK_IN_MAX_K)
		return CONV_BLK_IN;
	return 0;
}

size_t conv_blk_wsize(int kind, int64_t M, int64_t Cg, int64_t taps)
{
	if (kind == CONV_BLK_PW || kind == CONV_BLK_PWS || kind == CONV_BLK_IN || kind == CONV_BLK_KB)
		return (size_t)((M + PW_M - 1) / PW_M * Cg * taps * PW_M) * sizeof(float);
	if (kind == CONV_BLK_G8)
		return (size_t)(M * CB * taps) * sizeof(float);
	return (size_t)(M * taps) * sizeof(float);
}

void conv_blk_pack(int kind, const float *w, int64_t M, int64_t Cg, int64_t taps, float *dst)
{
	if (kind == CONV_BLK_PW || kind == CONV_BLK_PWS || kind == CONV_BLK_IN) {
		/* [pair][channel][tap][16] (a 1x1 layer has one tap) */
		for (int64_t q = 0; q < (M + PW_M - 1) / PW_M; q++)
			for (int64_t c = 0; c < Cg; c++)
				for (int64_t t = 0; t < taps; t++)
					for (int64_t i = 0; i < PW_M; i++) {
						int64_t m = q * PW_M + i;

						*dst++ = m < M ? w[(m * Cg + c) * taps + t] : 0.0f;
					}
		return;
	}
	if (kind == CONV_BLK_KB) {
		/* [pair][input block][tap][channel of the block][16] */
		for (int64_t q = 0; q < (M + PW_M - 1) / PW_M; q++)
			for (int64_t cb = 0; cb < Cg / CB; cb++)
				for (int64_t t = 0; t < taps; t++)
					for (int64_t c = cb * CB; c < cb * CB + CB; c++)
						for (int64_t i = 0; i < PW_M; i++) {
							int64_t m = q * PW_M + i;

							*dst++ = m < M ? w[(m * Cg + c) * taps + t] : 0.0f;
						}
		return;
	}
	if (kind == CONV_BLK_G8) {
		/* [group][tap][input channel][8 output channels] */
		for (int64_t g = 0; g < M / CB; g++)
			for (int64_t t = 0; t < taps; t++)
				for (int64_t c = 0; c < CB; c++)
					for (int64_t o = 0; o < CB; o++)
						*dst++ = w[((g * CB + o) * CB + c) * taps + t];
		return;
	}
	for (int64_t b = 0; b < M / CB; b++)
		for (int64_t t = 0; t < taps; t++)
			for (int64_t i = 0; i < CB; i++)
				*dst++ = w[(b * CB + i) * taps + t];
}

#ifdef CB_X86

typedef struct blk_job {
	const conv_job *j;
	const float *x, *w, *b;   /* w: conv_blk_pack's layout */
	float *y;
	const float *res;         /* blocked like y, or NULL */
	int kind;                 /* CONV_BLK_* */
	int clamp;                /* Relu or Clip in the store: [lo, hi] */
	float lo, hi;
	/* else HardSigmoid (1) or HardSwish (2) in the store: x * ha + hb,
	 * rounded, clamped to [0, 1] (times x for HardSwish) */
	int hard;
	float ha, hb;
	const cpu_fusion *act;    /* else an activation over each finished run */
	int64_t C, M, P, OP;      /* channels, input and output pixels an image */
	/* 1x1: pixel chunks of `chunk`, pairs of output blocks in groups */
	int64_t chunk, chunks, pairs, pgroups, group_pairs;
	int64_t kslice;           /* input blocks a slice (pw_range), 0: all at once */
	float *acc;               /* per member: a chunk's partial sums (chunk x M) */
	/* depthwise and first layers: output rows in bands */
	int64_t band_rows, bands;
	int64_t PHd, PWd;         /* first layers: the padded planes */
	int zmm;                  /* AVX-512: 1x1 pairs of pairs (pw_run2) */
	int in512;                /* a first layer's rows through in_row512 */
} blk_job;

/* What the store applies to a finished vector (after the residual): the
 * clamp, or the hard activation, rounded as cpu_fuse_act_apply rounds it
 * (the product before the add; max and min keep a NaN). */
static inline __attribute__((always_inline)) CB_TARGET __m256
fin256(const blk_job *d, __m256 v, __m256 lo, __m256 hi)
{
	if (d->clamp)
		return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
	if (d->hard) {
		__m256 t = VF_ROUNDED(_mm256_mul_ps(v, _mm256_set1_ps(d->ha)));
		__m256 h = _mm256_add_ps(t, _mm256_set1_ps(d->hb));

		h = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_setzero_ps(), h));
		return d->hard == 2 ? _mm256_mul_ps(v, h) : h;
	}
	return v;
}

/* ---- the tile ------------------------------------------------------------- */

/* The tile of the 1x1, first and grouped layers: NP output pixels of a
 * row (their windows S pixels apart in the (padded) input xp: planes
 * planes of PP floats, rows of PWd pixels of CIB channels each, 1 plain or
 * 8 blocked) by NB output blocks; taps KH x KW;
 * the filter w as [plane][tap][CIB][WS] (WS 16: two blocks' output
 * channels, 8: one). */
static inline __attribute__((always_inline)) CB_TARGET void
in_tile(const blk_job *d, const float *xp, int64_t planes, int64_t PP, int64_t PWd,
	const int CIB, const int WS, const int S, const int KW, int64_t KH, const float *w,
	const int NB, const int NP, __m256 b0, __m256 b1, float *y0, float *y1, const float *r0,
	const float *r1)
{
	__m256 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1;
	__m256 a30 = b0, a31 = b1, a40 = b0, a41 = b1, a50 = b0, a51 = b1;

	for (int64_t c = 0; c < planes; c++)
		for (int64_t kh = 0; kh < KH; kh++) {
			const float *xr = xp + c * PP + kh * PWd * CIB;

			for (int kw = 0; kw < KW; kw++)
			for (int ci = 0; ci < CIB; ci++, w += WS) {
				__m256 w0 = _mm256_loadu_ps(w), w1 = NB > 1 ? _mm256_loadu_ps(w + 8) : w0;
				__m256 v;
#define IN_PIXEL(p, a0, a1)                                                                \
	if (NP > (p)) {                                                                    \
		v = _mm256_broadcast_ss(xr + ((p) * S + kw) * CIB + ci);                   \
		a0 = _mm256_fmadd_ps(v, w0, a0);                                           \
		if (NB > 1)                                                                \
			a1 = _mm256_fmadd_ps(v, w1, a1);                                   \
	}
				IN_PIXEL(0, a00, a01)
				IN_PIXEL(1, a10, a11)
				IN_PIXEL(2, a20, a21)
				IN_PIXEL(3, a30, a31)
				IN_PIXEL(4, a40, a41)
				IN_PIXEL(5, a50, a51)
#undef IN_PIXEL
			}
		}
	__m256 lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
#define IN_OUT(p, a0, a1)                                                                  \
	if (NP > (p)) {                                                                    \
		if (r0) {                                                                  \
			a0 = _mm256_add_ps(a0, _mm256_loadu_ps(r0 + (p) * CB));            \
			if (NB > 1)                                                        \
				a1 = _mm256_add_ps(a1, _mm256_loadu_ps(r1 + (p) * CB));    \
		}                                                                          \
		a0 = fin256(d, a0, lo, hi);                                                \
		a1 = fin256(d, a1, lo, hi);                                                \
		_mm256_storeu_ps(y0 + (p) * CB, a0);                                       \
		if (NB > 1)                                                                \
			_mm256_storeu_ps(y1 + (p) * CB, a1);                               \
	}
	IN_OUT(0, a00, a01) IN_OUT(1, a10, a11) IN_OUT(2, a20, a21)
	IN_OUT(3, a30, a31) IN_OUT(4, a40, a41) IN_OUT(5, a50, a51)
#undef IN_OUT
}

/* n_px output pixels of a row from x (pixel p's window at x + p S CIB),
 * tile after tile (the last one narrower), into y0 (and y1 with two
 * blocks) with the residual at r0 (r1); then the activation the store did
 * not apply, over the finished pixels. */
static inline __attribute__((always_inline)) CB_TARGET void
tiles(const blk_job *d, const float *x, int64_t planes, int64_t PP, int64_t PWd, const int CIB,
      const int WS, const int S, const int KW, int64_t KH, const float *w, int nb, int64_t n_px,
      __m256 b0, __m256 b1, float *y0, float *y1, const float *r0, const float *r1)
{
	for (int64_t p = 0; p < n_px; p += PW_P) {
		const float *xt = x + p * S * CIB;
		int64_t o = p * CB;
		int np = (int)(n_px - p < PW_P ? n_px - p : PW_P);

#define TILE(nb_, np_)                                                                     \
	in_tile(d, xt, planes, PP, PWd, CIB, WS, S, KW, KH, w, nb_, np_, b0, b1, y0 + o,     \
		y1 + o, r0 ? r0 + o : NULL, r1 ? r1 + o : NULL)
		if (nb == 2) {
			switch (np) {
			case 6: TILE(2, 6); break;
			case 5: TILE(2, 5); break;
			case 4: TILE(2, 4); break;
			case 3: TILE(2, 3); break;
			case 2: TILE(2, 2); break;
			default: TILE(2, 1); break;
			}
		} else {
			switch (np) {
			case 6: TILE(1, 6); break;
			case 5: TILE(1, 5); break;
			case 4: TILE(1, 4); break;
			case 3: TILE(1, 3); break;
			case 2: TILE(1, 2); break;
			default: TILE(1, 1); break;
			}
		}
#undef TILE
	}
	if (d->act) {
		cpu_fuse_act_apply(d->act, y0, n_px * CB);
		if (nb > 1)
			cpu_fuse_act_apply(d->act, y1, n_px * CB);
	}
}

/* The bias of output blocks ob (and ob + 1 when nb is 2), or zeros. */
static inline __attribute__((always_inline)) CB_TARGET void
block_bias(const blk_job *d, int64_t ob, int nb, __m256 *b0, __m256 *b1)
{
	*b0 = d->b ? _mm256_loadu_ps(d->b + ob * CB) : _mm256_setzero_ps();
	*b1 = d->b && nb > 1 ? _mm256_loadu_ps(d->b + ob * CB + CB) : _mm256_setzero_ps();
}

/* ---- 1x1 ----------------------------------------------------------------- */

/* Pixels [p0, p1) of image n, output blocks (2q, 2q + 1). */
static CB_TARGET void pw_run(const blk_job *d, int64_t n, int64_t q, int64_t p0, int64_t p1)
{
	int64_t P = d->P, mb = d->M / CB, ob = 2 * q;
	int NB = ob + 1 < mb ? 2 : 1;
	const float *w = d->w + q * d->C * PW_M;
	const float *xi = d->x + n * d->C * P;
	float *y0 = d->y + (n * mb + ob) * P * CB, *y1 = y0 + P * CB;
	const float *r0 = d->res ? d->res + (n * mb + ob) * P * CB : NULL;
	const float *r1 = r0 ? r0 + P * CB : NULL;
	__m256 b0, b1;

	block_bias(d, ob, NB, &b0, &b1);
	tiles(d, xi + p0 * CB, d->C / CB, P * CB, 1, CB, PW_M, 1, 1, 1, w, NB, p1 - p0, b0, b1,
	      y0 + p0 * CB, y1 + p0 * CB, r0 ? r0 + p0 * CB : NULL, r1 ? r1 + p0 * CB : NULL);
}

/* On AVX-512: two pairs of output blocks at once, eight pixels a tile.
 * A zmm holds a pixel's sixteen output channels of a pair (its low half
 * block 2q's eight, its high half block 2q + 1's), the pair's filter row
 * as packed ([pair][channel][16]); sixteen accumulators, two filter loads
 * and eight broadcasts an input channel (the ymm tile's twelve
 * multiply-adds for eight loads halved the FMA width). */
#define PW_P2 8
#define CB_T512 __attribute__((target("avx512f,avx2,fma")))

/* The low and high halves of a zmm into two blocks' pixel p. */
static inline __attribute__((always_inline)) CB_T512 void
st2(float *ya, float *yb, __m512 v)
{
	_mm256_storeu_ps(ya, _mm512_castps512_ps256(v));
	_mm256_storeu_ps(yb, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

static inline __attribute__((always_inline)) CB_T512 __m512
ld2(const float *ra, const float *rb)
{
	return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(
		_mm256_loadu_ps(ra))), _mm256_castps_pd(_mm256_loadu_ps(rb)), 1));
}

/* fin256 on sixteen lanes. */
static inline __attribute__((always_inline)) CB_T512 __m512
fin512(const blk_job *d, __m512 v, __m512 lo, __m512 hi)
{
	if (d->clamp)
		return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
	if (d->hard) {
		__m512 t = VF_ROUNDED(_mm512_mul_ps(v, _mm512_set1_ps(d->ha)));
		__m512 h = _mm512_add_ps(t, _mm512_set1_ps(d->hb));

		h = _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), h));
		return d->hard == 2 ? _mm512_mul_ps(v, h) : h;
	}
	return v;
}

/* A pixel's pair h of the nb output blocks from a (blocks abs floats
 * apart: block 2h in the low half, 2h + 1 in the high one, which without
 * it (nb == 2h + 1) loads block 2h again and stores nothing). */
static inline __attribute__((always_inline)) CB_T512 __m512
pair_load512(const float *a, int64_t abs, int h, int nb)
{
	return ld2(a + 2 * h * abs, a + (2 * h + (nb > 2 * h + 1)) * abs);
}

static inline __attribute__((always_inline)) CB_T512 void
pair_store512(float *a, int64_t abs, int h, int nb, __m512 v)
{
	a += 2 * h * abs;
	if (nb > 2 * h + 1)
		st2(a, a + abs, v);
	else
		_mm256_storeu_ps(a, _mm512_castps512_ps256(v));
}

/* A pixel's pair h of output blocks (2h and 2h + 1 of the nb from y, bs
 * floats apart) out of v: plus the residual's (at r, the same layout, or
 * NULL), clamped when the job clamps, stored; the pair's second block only
 * where it exists (nb > 2h + 1: else v's high half is dropped and the
 * residual's block 2h is read for it). */
static inline __attribute__((always_inline)) CB_T512 void
pair_out512(const blk_job *d, float *y, const float *r, int64_t bs, int h, int nb, __m512 v,
	    __m512 lo, __m512 hi)
{
	if (r)
		v = _mm512_add_ps(v, pair_load512(r, bs, h, nb));
	pair_store512(y, bs, h, nb, fin512(d, v, lo, hi));
}

/* The bias of the nb (1 to 4) output blocks from ob as two pairs (b0:
 * blocks ob and ob + 1, b1: the next two), zeros past them or without a
 * bias. */
static inline __attribute__((always_inline)) CB_T512 void
block_bias512(const blk_job *d, int64_t ob, int nb, __m512 *b0, __m512 *b1)
{
	*b0 = *b1 = _mm512_setzero_ps();
	if (!d->b)
		return;
	*b0 = _mm512_maskz_loadu_ps(nb > 1 ? 0xffff : 0x00ff, d->b + ob * CB);
	if (nb > 2)
		*b1 = _mm512_maskz_loadu_ps(nb > 3 ? 0xffff : 0x00ff, d->b + ob * CB + PW_M);
}

/* pw_tile512's part of the input channels (pw_range's slices): the
 * accumulators start from the bias or from the partial sums in acc
 * (PW_FROM_ACC), and end in y (with the residual and the activation) or
 * as partial sums in acc (PW_TO_ACC). */
enum { PW_FROM_ACC = 1, PW_TO_ACC = 2 };

/* NP pixels (x: the first's channels, blocks PP floats apart) times the
 * nb (3 or 4) output blocks from y[0] (each of the blocks P * CB floats
 * after the one before, as the residual r), filter pairs at w and w + ws;
 * acc: the partial sums of the same pixels and blocks (blocks abs floats
 * apart) when mode says. */
static inline __attribute__((always_inline)) CB_T512 void
pw_tile512(const blk_job *d, const float *x, int64_t planes, int64_t PP, const float *w,
	   int64_t ws, const int NP, int nb, __m512 b0, __m512 b1, float *y, const float *r,
	   int64_t bs, float *acc, int64_t abs, int mode)
{
	__m512 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1, a30 = b0, a31 = b1;
	__m512 a40 = b0, a41 = b1, a50 = b0, a51 = b1, a60 = b0, a61 = b1, a70 = b0, a71 = b1;

	if (mode & PW_FROM_ACC) {
#define PW_IN(p, a0, a1)                                                                   \
	if (NP > (p)) {                                                                    \
		a0 = pair_load512(acc + (p) * CB, abs, 0, nb);                               \
		a1 = pair_load512(acc + (p) * CB, abs, 1, nb);                               \
	}
		PW_IN(0, a00, a01) PW_IN(1, a10, a11) PW_IN(2, a20, a21) PW_IN(3, a30, a31)
		PW_IN(4, a40, a41) PW_IN(5, a50, a51) PW_IN(6, a60, a61) PW_IN(7, a70, a71)
#undef PW_IN
	}
	for (int64_t c = 0; c < planes; c++) {
		const float *xr = x + c * PP;

		for (int ci = 0; ci < CB; ci++, w += PW_M) {
			__m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + ws), v;
#define PW_PX(p, a0, a1)                                                                   \
	if (NP > (p)) {                                                                    \
		v = _mm512_set1_ps(xr[(p) * CB + ci]);                                     \
		a0 = _mm512_fmadd_ps(v, w0, a0);                                           \
		a1 = _mm512_fmadd_ps(v, w1, a1);                                           \
	}
			PW_PX(0, a00, a01) PW_PX(1, a10, a11) PW_PX(2, a20, a21)
			PW_PX(3, a30, a31) PW_PX(4, a40, a41) PW_PX(5, a50, a51)
			PW_PX(6, a60, a61) PW_PX(7, a70, a71)
#undef PW_PX
		}
	}
	if (mode & PW_TO_ACC) {
#define PW_RAW(p, a0, a1)                                                                  \
	if (NP > (p)) {                                                                    \
		pair_store512(acc + (p) * CB, abs, 0, nb, a0);                             \
		pair_store512(acc + (p) * CB, abs, 1, nb, a1);                             \
	}
		PW_RAW(0, a00, a01) PW_RAW(1, a10, a11) PW_RAW(2, a20, a21) PW_RAW(3, a30, a31)
		PW_RAW(4, a40, a41) PW_RAW(5, a50, a51) PW_RAW(6, a60, a61) PW_RAW(7, a70, a71)
#undef PW_RAW
		return;
	}
	__m512 lo = _mm512_set1_ps(d->lo), hi = _mm512_set1_ps(d->hi);
#define PW_OUT(p, a0, a1)                                                                  \
	if (NP > (p)) {                                                                    \
		int64_t o = (p) * CB;                                                      \
		pair_out512(d, y + o, r ? r + o : NULL, bs, 0, nb, a0, lo, hi);            \
		pair_out512(d, y + o, r ? r + o : NULL, bs, 1, nb, a1, lo, hi);            \
	}
	PW_OUT(0, a00, a01) PW_OUT(1, a10, a11) PW_OUT(2, a20, a21) PW_OUT(3, a30, a31)
	PW_OUT(4, a40, a41) PW_OUT(5, a50, a51) PW_OUT(6, a60, a61) PW_OUT(7, a70, a71)
#undef PW_OUT
}

/* Pixels [p0, p1) of image n, output blocks 2q to 2q + 3 (2q + 2 the
 * last when the blocks end there), over input blocks [c0, c1); acc: this
 * member's partial sums of the chunk (pw_range), mode pw_tile512's. */
static CB_T512 void pw_run2(const blk_job *d, int64_t n, int64_t q, int64_t p0, int64_t p1,
			    int64_t c0, int64_t c1, float *acc, int mode)
{
	int64_t P = d->P, mb = d->M / CB, ob = 2 * q, bs = P * CB, abs = d->chunk * CB;
	int nb = ob + 3 < mb ? 4 : 3;
	const float *w = d->w + q * d->C * PW_M + c0 * CB * PW_M;
	const float *x = d->x + n * d->C * P + c0 * bs + p0 * CB;
	float *y = d->y + (n * mb + ob) * bs + p0 * CB;
	const float *r = d->res ? d->res + (n * mb + ob) * bs + p0 * CB : NULL;
	__m512 b0, b1;

	acc = acc ? acc + ob * abs : NULL;
	block_bias512(d, ob, nb, &b0, &b1);
	for (int64_t p = 0; p < p1 - p0; p += PW_P2) {
		int np = (int)(p1 - p0 - p < PW_P2 ? p1 - p0 - p : PW_P2);
		int64_t o = p * CB;

#define T2(np_)                                                                            \
	pw_tile512(d, x + o, c1 - c0, bs, w, d->C * PW_M, np_, nb, b0, b1, y + o,            \
		   r ? r + o : NULL, bs, acc ? acc + o : NULL, abs, mode)
		switch (np) {
		case 8: T2(8); break;
		case 7: T2(7); break;
		case 6: T2(6); break;
		case 5: T2(5); break;
		case 4: T2(4); break;
		case 3: T2(3); break;
		case 2: T2(2); break;
		default: T2(1); break;
		}
#undef T2
	}
	if (d->act && !(mode & PW_TO_ACC))
		for (int k = 0; k < nb; k++)
			cpu_fuse_act_apply(d->act, y + k * bs, (p1 - p0) * CB);
}

/* Items: (image, pixel chunk, group of block pairs), group fastest.  With
 * d->kslice, the input channels in slices of that many blocks, each
 * slice through every pair of the item before the next (its part of the
 * input and of the filter stay in cache), the partial sums in the
 * member's d->acc; a pair left alone (the ymm tile) takes every channel
 * at once, after. */
static void pw_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const blk_job *d = arg;
	int64_t blocks = d->C / CB, ks = d->kslice ? d->kslice : blocks;
	float *acc = d->kslice ? d->acc + (size_t)member * (size_t)(d->chunk * d->M) : NULL;

	for (int64_t it = i0; it < i1; it++) {
		int64_t grp = it % d->pgroups, ch = it / d->pgroups % d->chunks;
		int64_t n = it / d->pgroups / d->chunks;
		int64_t p0 = ch * d->chunk, p1 = p0 + d->chunk < d->P ? p0 + d->chunk : d->P;
		int64_t q0 = grp * d->group_pairs;
		int64_t q1 = (grp + 1) * d->group_pairs < d->pairs ? (grp + 1) * d->group_pairs :
								      d->pairs;

		for (int64_t c0 = 0; c0 < blocks; c0 += ks) {
			int64_t c1 = c0 + ks < blocks ? c0 + ks : blocks;
			int mode = (c0 > 0 ? PW_FROM_ACC : 0) | (c1 < blocks ? PW_TO_ACC : 0);

			for (int64_t q = q0; q < q1; q++) {
				if (d->zmm && q + 1 < q1)
					pw_run2(d, n, q++, p0, p1, c0, c1, acc, mode);
				else if (c1 == blocks)
					pw_run(d, n, q, p0, p1);
			}
		}
	}
}

/* A few items on several members: the chunks (equal, of at least
 * 4 * PW_P pixels where the image has them, at most twice `most`, the
 * chunk of PW_CHUNK_BYTES) and groups of pairs whose items, claimed in
 * turns, finish first: an item costs its
 * pixels times its pairs, on AVX-512 times its pairs of pairs (a pair
 * left alone runs the ymm tile, at half the rate).  MobileNetV2's 384 ->
 * 96 at 14 x 14 was three chunks of 84, 84 and 28 pixels times two groups
 * of three pairs, each group's third pair alone: no faster at two threads
 * than at one. */
static void pw_balance(blk_job *d, int64_t N, int members, int64_t most)
{
	int64_t max_c = d->P / (4 * PW_P) > 1 ? d->P / (4 * PW_P) : 1, best = INT64_MAX;

	for (int64_t nc = 1; nc <= max_c; nc++) {
		int64_t c = ((d->P + nc - 1) / nc + PW_P - 1) / PW_P * PW_P, ncn;

		if (c > 2 * most)
			continue;
		ncn = (d->P + c - 1) / c;
		for (int64_t pg = 1; pg <= d->pairs && pg <= 2 * members; pg++) {
			int64_t gp = (d->pairs + pg - 1) / pg, pgn = (d->pairs + gp - 1) / gp;
			int64_t items = N * ncn * pgn;
			int64_t cost = (items + members - 1) / members * c * (d->zmm ? (gp + 1) / 2 : gp);

			if (cost < best) {
				best = cost;
				d->chunk = c;
				d->chunks = ncn;
				d->group_pairs = gp;
				d->pgroups = pgn;
			}
		}
	}
}

/* A 1x1 layer's pixels a chunk (pw_schedule) for C input channels. */
static int64_t pw_chunk(int64_t C, int64_t filter_bytes)
{
	int64_t half = conv_l2_bytes() / 2;
	int64_t bytes = filter_bytes > half && half > PW_CHUNK_BYTES ? half : PW_CHUNK_BYTES;
	int64_t chunk = bytes / (C * (int64_t)sizeof(float)) / PW_P * PW_P;

	return chunk < PW_P ? PW_P : chunk;
}

int conv_blk_pw_fits(int64_t C, int64_t M, int64_t pixels)
{
	return gemm_isa_best() == GEMM_ISA_AVX512 ||   /* pw_range's channel slices */
	       (int64_t)sizeof(float) * C * M <= PW_MAX_STREAMED ||
	       pixels <= pw_chunk(C, (int64_t)sizeof(float) * C * M);
}

static int pw_schedule(cpu_ctx *ctx, blk_job *d, int64_t N)
{
	int members = cpu_par_members(ctx);
	int64_t chunk = pw_chunk(d->C, (int64_t)sizeof(float) * d->C * d->M);

	d->pairs = (d->M / CB + 1) / 2;
	/* More pixels than a chunk of every channel: the channels in slices,
	 * chunks of a slice's input and the partial sums */
	d->kslice = 0;
	if (d->zmm && d->C / CB > PW_KSLICE && d->P > chunk) {
		d->kslice = PW_KSLICE;
		chunk = pw_chunk(PW_KSLICE * CB + d->M, INT64_MAX);
	}
	d->chunks = (d->P + chunk - 1) / chunk;
	/* at least two items a member where the work allows, by pixel chunks
	 * first (each reads the whole filter), then by groups of pairs */
	if (N * d->chunks < 2 * members && d->P > 16 * PW_P) {
		int64_t want = (2 * members + N - 1) / N;
		int64_t c2 = (d->P + want - 1) / want;

		c2 = (c2 + PW_P - 1) / PW_P * PW_P;
		if (c2 < 16 * PW_P)
			c2 = 16 * PW_P;
		chunk = c2 < chunk ? c2 : chunk;
		d->chunks = (d->P + chunk - 1) / chunk;
	}
	d->chunk = chunk;
	d->pgroups = N * d->chunks < 2 * members ? (2 * members + N * d->chunks - 1) /
		(N * d->chunks) : 1;
	d->pgroups = d->pgroups < d->pairs ? d->pgroups : d->pairs;
	d->group_pairs = (d->pairs + d->pgroups - 1) / d->pgroups;
	d->pgroups = (d->pairs + d->group_pairs - 1) / d->group_pairs;
	if (members > 1 && N * d->chunks < 2 * members)
		pw_balance(d, N, members, chunk);
	if (d->kslice &&
	    !(d->acc = cpu_scratch(ctx, (size_t)members * (size_t)(d->chunk * d->M) * sizeof(float))))
		return CPU_E_NOMEM;
	/* ~0.012 ns a multiply-add (two FMA ports of eight lanes, 3 GHz, 80%) */
	cpu_par_for(ctx, N * d->chunks * d->pgroups,
		    0.012 * (double)(d->C * d->group_pairs * PW_M * d->chunk), 1, pw_range, d);
	return 0;
}

/* ---- first layers on AVX-512 --------------------------------------------- */

/* A first layer's tile in zmm: NP (up to IN_P2) output pixels of a row
 * times the nb (1 to 4) output blocks from 2q, each pixel's pair of blocks
 * one zmm (as pw_tile512), NQ pairs (filters at w and w + ws, packed
 * [pair][channel][tap][16]); the plain input planes (C of them, PP floats
 * apart, rows of PWd) padded, windows S pixels apart.  Twenty-four
 * accumulators; per input channel and tap two filter loads and twelve
 * broadcasts feed twenty-four multiply-adds (the ymm tile's six pixels of
 * two blocks used half of each FMA: SqueezeNet's 3 -> 64 3x3 / 2 at 224 x
 * 224 0.70 ms in the model, ONNX Runtime 0.34). */
#define IN_P2 12

static inline __attribute__((always_inline)) CB_T512 void
in_tile512(const blk_job *d, const float *xp, int64_t planes, int64_t PP, int64_t PWd,
	   const int CIB, const int S, const int KW, int64_t KH, const float *w, int64_t ws,
	   const int NQ, const int NP, int nb, __m512 b0, __m512 b1, float *y, const float *r,
	   int64_t bs)
{
	__m512 a[IN_P2][2];

	for (int p = 0; p < NP; p++) {
		a[p][0] = b0;
		a[p][1] = b1;
	}
	for (int64_t c = 0; c < planes; c++)
		for (int64_t kh = 0; kh < KH; kh++) {
			const float *xr = xp + c * PP + kh * PWd * CIB;

			for (int kw = 0; kw < KW; kw++)
			for (int ci = 0; ci < CIB; ci++, w += PW_M) {
				__m512 w0 = _mm512_loadu_ps(w), w1 = NQ > 1 ? _mm512_loadu_ps(w + ws) : w0;

#pragma GCC unroll 12
				for (int p = 0; p < NP; p++) {
					__m512 v = _mm512_set1_ps(xr[(p * S + kw) * CIB + ci]);

					a[p][0] = _mm512_fmadd_ps(v, w0, a[p][0]);
					if (NQ > 1)
						a[p][1] = _mm512_fmadd_ps(v, w1, a[p][1]);
				}
			}
		}
	__m512 lo = _mm512_set1_ps(d->lo), hi = _mm512_set1_ps(d->hi);

#pragma GCC unroll 12
	for (int p = 0; p < NP; p++)
#pragma GCC unroll 2
		for (int h = 0; h < NQ; h++)
			pair_out512(d, y + p * CB, r ? r + p * CB : NULL, bs, h, nb, a[p][h], lo, hi);
}

/* Output row oh of image n, blocks 2q to 2q + 3 (fewer where they end):
 * in_tile512 tile after tile, then the activation the store did not
 * apply. */
static inline __attribute__((always_inline)) CB_T512 void
in_row512(const blk_job *d, const float *xp, int64_t n, int64_t q, int64_t oh, const int S,
	  const int KW, const int CIB)
{
	const cpu_geom *g = &d->j->g;
	int64_t OW = g->out[2], KH = g->k[1], mb = d->M / CB, ob = 2 * q, bs = d->OP * CB;
	int64_t PWd = d->PWd, PP = d->PHd * PWd * CIB, ws = d->C * KH * KW * PW_M;
	int nb = (int)(mb - ob < 4 ? mb - ob : 4);
	const float *w = d->w + q * ws, *x = xp + oh * g->s[1] * PWd * CIB;
	int64_t o = ((n * mb + ob) * d->OP + oh * OW) * CB;
	float *y = d->y + o;
	const float *r = d->res ? d->res + o : NULL;
	__m512 b0, b1;

	block_bias512(d, ob, nb, &b0, &b1);
	for (int64_t p = 0; p < OW; p += IN_P2) {
		int np = (int)(OW - p < IN_P2 ? OW - p : IN_P2);
		const float *xt = x + p * S * CIB;
		int64_t to = p * CB;

#define T512(nq_, np_)                                                                     	in_tile512(d, xt, d->C / CIB, PP, PWd, CIB, S, KW, KH, w, ws, nq_, np_, nb, b0, b1, y + to,      		   r ? r + to : NULL, bs)
#define T512_NP(nq_)                                                                       	switch (np) {                                                                      	case 12: T512(nq_, 12); break;                                                     	case 11: T512(nq_, 11); break;                                                     	case 10: T512(nq_, 10); break;                                                     	case 9: T512(nq_, 9); break;                                                       	case 8: T512(nq_, 8); break;                                                       	case 7: T512(nq_, 7); break;                                                       	case 6: T512(nq_, 6); break;                                                       	case 5: T512(nq_, 5); break;                                                       	case 4: T512(nq_, 4); break;                                                       	case 3: T512(nq_, 3); break;                                                       	case 2: T512(nq_, 2); break;                                                       	default: T512(nq_, 1); break;                                                      	}
		if (nb > 2) {
			T512_NP(2)
		} else {
			T512_NP(1)
		}
#undef T512_NP
#undef T512
	}
	if (d->act)
		for (int k = 0; k < nb; k++)
			cpu_fuse_act_apply(d->act, y + k * bs, OW * CB);
}

static CB_T512 void in_row512_any(const blk_job *d, const float *xp, int64_t n, int64_t q,
				  int64_t oh)
{
	const cpu_geom *g = &d->j->g;
	int64_t kw = g->k[2], s = g->s[2];

	/* planes of one plain channel (a first layer's window is at most
	 * CONV_BLK_IN_MAX_K a side), or of a block (CONV_BLK_KB) */
	if (d->kind == CONV_BLK_KB) {
		if (kw == 3 && s == 1)
			in_row512(d, xp, n, q, oh, 1, 3, CB);
		else
			in_row512(d, xp, n, q, oh, (int)s, (int)kw, CB);
	} else if (kw == 3 && s == 2) {
		in_row512(d, xp, n, q, oh, 2, 3, 1);
	} else if (kw == 3 && s == 1) {
		in_row512(d, xp, n, q, oh, 1, 3, 1);
	} else {
		in_row512(d, xp, n, q, oh, (int)s, (int)kw, 1);
	}
}

/* ---- rows: first layers (a few plain input channels), strided 1x1 ----- */

/* Output row oh of image n, output blocks (2q, 2q + 1): the tile over the
 * (padded) input at xp, planes of CIB channels a pixel: a first layer's
 * plain channels (1), or a strided 1x1 layer's blocks (CB, its input as it
 * is: PHd x PWd the image). */
static inline __attribute__((always_inline)) CB_TARGET void
in_row(const blk_job *d, const float *xp, int64_t n, int64_t q, int64_t oh, const int S,
       const int KW, const int CIB)
{
	const cpu_geom *g = &d->j->g;
	int64_t OW = g->out[2], KH = g->k[1], mb = d->M / CB, ob = 2 * q;
	int64_t PWd = d->PWd, PP = d->PHd * PWd * CIB;
	int NB = ob + 1 < mb ? 2 : 1;
	const float *w = d->w + q * d->C * KH * KW * PW_M;
	int64_t o = ((n * mb + ob) * d->OP + oh * OW) * CB;
	float *y0 = d->y + o, *y1 = y0 + d->OP * CB;
	const float *r0 = d->res ? d->res + o : NULL, *r1 = r0 ? r0 + d->OP * CB : NULL;
	__m256 b0, b1;

	block_bias(d, ob, NB, &b0, &b1);
	tiles(d, xp + oh * g->s[1] * PWd * CIB, d->C / CIB, PP, PWd, CIB, PW_M, S, KW, KH, w, NB, OW,
	      b0, b1, y0, y1, r0, r1);
}

/* Output row oh of image n, group grp of eight channels: the tile above
 * over input block grp of the padded blocked input at xp, one output
 * block. */
static inline __attribute__((always_inline)) CB_TARGET void
g8_row(const blk_job *d, const float *xp, int64_t n, int64_t grp, int64_t oh, const int S,
       const int KW)
{
	const cpu_geom *g = &d->j->g;
	int64_t OW = g->out[2], KH = g->k[1], G = d->M / CB;
	int64_t PWd = d->PWd, PP = d->PHd * PWd * CB;
	const float *w = d->w + grp * KH * KW * CB * CB;
	int64_t o = ((n * G + grp) * d->OP + oh * OW) * CB;
	float *y0 = d->y + o;
	const float *r0 = d->res ? d->res + o : NULL;
	__m256 b0, b1;

	block_bias(d, grp, 1, &b0, &b1);
	tiles(d, xp + grp * PP + oh * g->s[1] * PWd * CB, 1, PP, PWd, CB, CB, S, KW, KH, w, 1, OW,
	      b0, b1, y0, y0, r0, NULL);
}

static CB_TARGET void in_row_any(const blk_job *d, const float *xp, int64_t n, int64_t q,
				 int64_t oh)
{
	const cpu_geom *g = &d->j->g;
	int64_t kw = g->k[2], s = g->s[2];

	if (d->kind == CONV_BLK_G8) {
		if (kw == 3 && s == 1)
			g8_row(d, xp, n, q, oh, 1, 3);
		else if (kw == 3 && s == 2)
			g8_row(d, xp, n, q, oh, 2, 3);
		else
			g8_row(d, xp, n, q, oh, (int)s, (int)kw);
		return;
	}
	if (d->kind == CONV_BLK_KB) {
		if (kw == 3 && s == 1)
			in_row(d, xp, n, q, oh, 1, 3, CB);
		else
			in_row(d, xp, n, q, oh, (int)s, (int)kw, CB);
		return;
	}
	/* (a first layer's window is at most CONV_BLK_IN_MAX_K a side) */
	if (kw == 3 && s == 2)
		in_row(d, xp, n, q, oh, 2, 3, 1);
	else if (kw == 3 && s == 1)
		in_row(d, xp, n, q, oh, 1, 3, 1);
	else
		in_row(d, xp, n, q, oh, (int)s, (int)kw, 1);
}

/* Items: (image, band of output rows, pair of output blocks). */
static void in_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const blk_job *d = arg;
	int64_t OH = d->j->g.out[1];

	(void)member;
	for (int64_t it = i0; it < i1; it++) {
		int64_t q = it % d->pairs, band = it / d->pairs % d->bands;
		int64_t n = it / d->pairs / d->bands;
		int64_t oh0 = band * d->band_rows;
		int64_t oh1 = oh0 + d->band_rows < OH ? oh0 + d->band_rows : OH;
		const float *xp = d->x + n * d->C * d->PHd * d->PWd;

		for (int64_t oh = oh0; oh < oh1; oh++)
			if (d->in512)
				in_row512_any(d, xp, n, 2 * q, oh);
			else
				in_row_any(d, xp, n, q, oh);
	}
}

/* Zero-padded copies of the images' planes of cib channels a pixel (1
 * plain, 8 blocked; d->x then points at them), planes over the pool. */
typedef struct pad_job {
	const blk_job *d;
	const float *x;
	float *xp;
	int64_t cib;
} pad_job;

static void pad_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const pad_job *a = arg;
	const blk_job *d = a->d;
	const cpu_geom *g = &d->j->g;
	int64_t IH = g->in[1], IW = g->in[2], pt = g->pb[1], pl = g->pb[2], cib = a->cib;
	/* the columns of an input row inside the padded width: [c0, c1) (a
	 * pad may be negative in effect: the window never reaches the last
	 * ones) */
	int64_t c0 = pl, c1 = pl + IW < d->PWd ? pl + IW : d->PWd;
	size_t row = (size_t)(d->PWd * cib) * sizeof(float);

	(void)member;
	c1 = c1 > c0 ? c1 : c0;
	for (int64_t p = p0; p < p1; p++)
		for (int64_t r = 0; r < d->PHd; r++) {
			float *o = a->xp + (p * d->PHd + r) * d->PWd * cib;
			int64_t h = r - pt;

			if (h < 0 || h >= IH || c1 == c0) {
				memset(o, 0, row);
				continue;
			}
			memset(o, 0, (size_t)(c0 * cib) * sizeof(float));
			memcpy(o + c0 * cib, a->x + (p * IH + h) * IW * cib,
			       (size_t)((c1 - c0) * cib) * sizeof(float));
			memset(o + c1 * cib, 0, (size_t)((d->PWd - c1) * cib) * sizeof(float));
		}
}

/* A strided 1x1 layer's kept pixels (every s-th of every sh-th row),
 * blocked, into xs: the 1x1 tile then runs on them (pw_schedule) at its
 * zmm width, where the strided rows (in_row) took the ymm tile: ResNet's
 * 256 -> 512 projection at 56 -> 28 x 28 3.3 ms against 1.5 through the
 * GEMM.  Planes over the pool. */
typedef struct stride_job {
	const blk_job *d;
	float *xs;
} stride_job;

static void stride_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const stride_job *a = arg;
	const cpu_geom *g = &a->d->j->g;
	int64_t IW = g->in[2], OH = g->out[1], OW = g->out[2], sh = g->s[1], sw = g->s[2];

	(void)member;
	for (int64_t p = p0; p < p1; p++) {
		const float *x = a->d->x + p * a->d->P * CB;
		float *o = a->xs + p * OH * OW * CB;

		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++, o += CB)
				memcpy(o, x + (oh * sh * IW + ow * sw) * CB, sizeof(float) * CB);
	}
}

static int pws_gather(cpu_ctx *ctx, blk_job *d, int64_t N)
{
	int64_t planes = N * d->C / CB;
	stride_job a = {d, cpu_scratch(ctx, (size_t)(planes * d->OP * CB) * sizeof(float))};

	if (!a.xs)
		return CPU_E_NOMEM;
	/* ~0.3 ns a float moved */
	cpu_par_for(ctx, planes, 0.3 * (double)(d->OP * CB), 1, stride_range, &a);
	d->x = a.xs;
	d->P = d->OP;
	d->kind = CONV_BLK_PW;
	return 0;
}

static int in_pad(cpu_ctx *ctx, blk_job *d, int64_t N, int64_t cib)
{
	const cpu_geom *g = &d->j->g;
	int64_t planes = N * d->C / cib;
	pad_job a = {.d = d, .x = d->x, .cib = cib};

	d->PHd = (g->out[1] - 1) * g->s[1] + g->k[1];
	d->PWd = (g->out[2] - 1) * g->s[2] + g->k[2];
	if (!(a.xp = cpu_scratch(ctx, (size_t)(planes * d->PHd * d->PWd * cib) * sizeof(float))))
		return CPU_E_NOMEM;
	/* ~0.1 ns a float written */
	cpu_par_for(ctx, planes, 0.1 * (double)(d->PHd * d->PWd * cib), 1, pad_range, &a);
	d->x = a.xp;
	return 0;
}

static int in_schedule(cpu_ctx *ctx, blk_job *d, int64_t N)
{
	const cpu_geom *g = &d->j->g;
	int members = cpu_par_members(ctx);
	int64_t OH = g->out[1];
	int g8 = d->kind == CONV_BLK_G8;
	int rc = 0;

	if ((rc = in_pad(ctx, d, N, g8 || d->kind == CONV_BLK_KB ? CB : 1)) != 0)
		return rc;
	/* items by pairs of output blocks (two pairs on AVX-512 for a first
	 * layer or a blocked input: in_row512), or by groups */
	d->in512 = d->zmm && (d->kind == CONV_BLK_IN || d->kind == CONV_BLK_KB);
	d->pairs = g8 ? d->M / CB : (d->M / CB + 1) / 2;
	if (d->in512)
		d->pairs = (d->pairs + 1) / 2;
	d->bands = N * d->pairs >= 4 * members ? 1 : (4 * members + N * d->pairs - 1) / (N * d->pairs);
	d->bands = d->bands < OH ? d->bands : OH;
	d->band_rows = (OH + d->bands - 1) / d->bands;
	d->bands = (OH + d->band_rows - 1) / d->band_rows;
	/* ~0.015 ns a multiply-add; ~0.07 in groups of eight, a filter
	 * vector a load (RegNet's 440-channel 3x3 layers at 7 x 7: 115 us
	 * where 0.015 said 23, under cpu_par_for's threshold) */
	cpu_par_for(ctx, N * d->bands * d->pairs,
		    (g8 ? 0.07 : 0.015) *
			    (double)(d->band_rows * g->out[2] * (g8 ? CB * CB : PW_M * d->C) *
				     g->k[1] * g->k[2] * (d->in512 ? 2 : 1)), 1, in_range, d);
	return 0;
}

/* ---- depthwise ------------------------------------------------------------ */

/* Output row oh of block cb of image n. */
static inline __attribute__((always_inline)) CB_TARGET void
dw_row(const blk_job *d, int64_t n, int64_t cb, int64_t oh, const int KW, const int S)
{
	const cpu_geom *g = &d->j->g;
	int64_t IH = g->in[1], IW = g->in[2], OW = g->out[2], KH = g->k[1];
	int64_t sh = g->s[1], pt = g->pb[1], pl = g->pb[2];
	int64_t blocks = d->C / CB, img = (n * blocks + cb);
	const float *x = d->x + img * d->P * CB;
	const float *w = d->w + cb * KH * KW * CB;
	float *y = d->y + (img * d->OP + oh * OW) * CB;
	const float *r = d->res ? d->res + (img * d->OP + oh * OW) * CB : NULL;
	__m256 bias = d->b ? _mm256_loadu_ps(d->b + cb * CB) : _mm256_setzero_ps();
	__m256 lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
	int64_t ih0 = oh * sh - pt, kh0 = ih0 < 0 ? -ih0 : 0;
	int64_t kh1 = IH - ih0 < KH ? IH - ih0 : KH;
	/* outputs whose taps are all inside the row: [ow0, ow1) */
	int64_t ow0 = (pl + S - 1) / S, ow1 = (IW - 1 + pl - (KW - 1)) / S + 1;

	if (IW - 1 + pl - (KW - 1) < 0)
		ow1 = 0;
	ow1 = ow1 > OW ? OW : ow1;
	ow0 = ow0 > ow1 ? ow1 : ow0;
	for (int64_t ow = 0; ow < OW;) {
		if (ow >= ow0 && ow + 4 <= ow1) {
			__m256 a0 = bias, a1 = bias, a2 = bias, a3 = bias;

			for (int64_t kh = kh0; kh < kh1; kh++) {
				const float *xr = x + ((ih0 + kh) * IW + ow * S - pl) * CB;
				const float *wr = w + kh * KW * CB;

#pragma GCC unroll 7
				for (int kw = 0; kw < KW; kw++) {
					__m256 wv = _mm256_loadu_ps(wr + kw * CB);
					const float *xp = xr + kw * CB;

					a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xp), wv, a0);
					a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xp + S * CB), wv, a1);
					a2 = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 2 * S * CB), wv, a2);
					a3 = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 3 * S * CB), wv, a3);
				}
			}
			if (r) {
				a0 = _mm256_add_ps(a0, _mm256_loadu_ps(r + ow * CB));
				a1 = _mm256_add_ps(a1, _mm256_loadu_ps(r + (ow + 1) * CB));
				a2 = _mm256_add_ps(a2, _mm256_loadu_ps(r + (ow + 2) * CB));
				a3 = _mm256_add_ps(a3, _mm256_loadu_ps(r + (ow + 3) * CB));
			}
			a0 = fin256(d, a0, lo, hi);
			a1 = fin256(d, a1, lo, hi);
			a2 = fin256(d, a2, lo, hi);
			a3 = fin256(d, a3, lo, hi);
			_mm256_storeu_ps(y + ow * CB, a0);
			_mm256_storeu_ps(y + (ow + 1) * CB, a1);
			_mm256_storeu_ps(y + (ow + 2) * CB, a2);
			_mm256_storeu_ps(y + (ow + 3) * CB, a3);
			ow += 4;
			continue;
		}
		/* one output, its taps checked against the row's ends */
		__m256 a = bias;
		int64_t iw0 = ow * S - pl;

		for (int64_t kh = kh0; kh < kh1; kh++) {
			const float *xr = x + (ih0 + kh) * IW * CB;
			const float *wr = w + kh * KW * CB;

			for (int kw = 0; kw < KW; kw++) {
				int64_t iw = iw0 + kw;

				if (iw >= 0 && iw < IW)
					a = _mm256_fmadd_ps(_mm256_loadu_ps(xr + iw * CB),
							    _mm256_loadu_ps(wr + kw * CB), a);
			}
		}
		if (r)
			a = _mm256_add_ps(a, _mm256_loadu_ps(r + ow * CB));
		a = fin256(d, a, lo, hi);
		_mm256_storeu_ps(y + ow * CB, a);
		ow++;
	}
	if (d->act)
		cpu_fuse_act_apply(d->act, y, OW * CB);
}

static CB_TARGET void dw_row_any(const blk_job *d, int64_t n, int64_t cb, int64_t oh)
{
	const cpu_geom *g = &d->j->g;
	int64_t kw = g->k[2], s = g->s[2];

	if (kw == 3 && s == 1)
		dw_row(d, n, cb, oh, 3, 1);
	else if (kw == 3 && s == 2)
		dw_row(d, n, cb, oh, 3, 2);
	else if (kw == 5 && s == 1)
		dw_row(d, n, cb, oh, 5, 1);
	else if (kw == 5 && s == 2)
		dw_row(d, n, cb, oh, 5, 2);
	else if (s == 1)
		dw_row(d, n, cb, oh, (int)kw, 1);
	else
		dw_row(d, n, cb, oh, (int)kw, (int)s);
}

/* Items: (image, block, band of output rows). */
static void dw_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const blk_job *d = arg;
	int64_t OH = d->j->g.out[1], blocks = d->C / CB;

	(void)member;
	for (int64_t it = i0; it < i1; it++) {
		int64_t band = it % d->bands, img = it / d->bands;
		int64_t oh0 = band * d->band_rows;
		int64_t oh1 = oh0 + d->band_rows < OH ? oh0 + d->band_rows : OH;

		for (int64_t oh = oh0; oh < oh1; oh++)
			dw_row_any(d, img / blocks, img % blocks, oh);
	}
}

static void dw_schedule(cpu_ctx *ctx, blk_job *d, int64_t N)
{
	const cpu_geom *g = &d->j->g;
	int members = cpu_par_members(ctx);
	int64_t OH = g->out[1], planes = N * d->C / CB;

	/* about eight items a member (planes of a few blocks split unevenly
	 * otherwise: nine blocks on two threads ran 1.15x one) */
	d->bands = planes >= 8 * members ? 1 : (8 * members + planes - 1) / planes;
	d->bands = d->bands < OH ? d->bands : OH;
	d->band_rows = (OH + d->bands - 1) / d->bands;
	d->bands = (OH + d->band_rows - 1) / d->band_rows;
	/* ~0.7 ns a multiply-add of eight lanes and its loads (Zen 3, in
	 * the model: MnasNet's 5x5 layers at 14 x 14 0.68, MobileNet's 3x3
	 * at 112 x 112 0.96; at 0.1 a 200 us layer looked under
	 * cpu_par_for's threshold and ran on one thread) */
	cpu_par_for(ctx, planes * d->bands,
		    0.7 * (double)(d->band_rows * g->out[2] * g->k[1] * g->k[2]), 1, dw_range, d);
}

int conv_blk_run(cpu_ctx *ctx, int kind, const conv_job *j, int64_t N, int64_t C, int64_t M,
		 const float *x, int x_blocked, const float *wpacked, const float *b, float *y,
		 int y_blocked)
{
	const cpu_geom *g = &j->g;
	blk_job d = {.j = j, .x = x, .w = wpacked, .b = b, .y = y, .act = j->act,
		     .lo = -INFINITY, .hi = INFINITY, .kind = kind, .C = C, .M = M,
		     .zmm = gemm_isa_best() == GEMM_ISA_AVX512};

	d.P = g->in[0] * g->in[1] * g->in[2];
	d.OP = j->osz;
	if (y_blocked)
		d.res = j->res ? j->res->data : NULL;
	/* The activation in the kernel, also computing a plain output into
	 * blocked scratch when no residual comes before it (the residual is
	 * added as the scratch is unblocked, and the caller applies the
	 * activation after: conv_blk_activated) */
	if (y_blocked || !j->res) {
		if ((d.clamp = conv_job_clamp(j, &d.lo, &d.hi)) != 0) {
			d.act = NULL;
		} else if (j->act && (j->act->act == CPU_FUSE_ACT_HSIGMOID ||
				      j->act->act == CPU_FUSE_ACT_HSWISH)) {
			d.hard = j->act->act == CPU_FUSE_ACT_HSWISH ? 2 : 1;
			d.ha = d.hard == 2 ? 1.0f / 6.0f : j->act->act_a;
			d.hb = d.hard == 2 ? 0.5f : j->act->act_b;
			d.act = NULL;
		}
	} else {
		d.act = NULL;
	}
	if (!y_blocked && !(d.y = cpu_scratch(ctx, (size_t)(N * M * d.OP) * sizeof(float))))
		return CPU_E_NOMEM;
	if (kind != CONV_BLK_IN && !x_blocked) {
		float *xs = cpu_scratch(ctx, (size_t)(N * C * d.P) * sizeof(float));

		if (!xs)
			return CPU_E_NOMEM;
		cpu_blk8_reorder(ctx, x, xs, N, C, d.P, 1);
		d.x = xs;
	}
	if (kind == CONV_BLK_PWS) {
		int rc = pws_gather(ctx, &d, N);

		if (rc)
			return rc;
		kind = CONV_BLK_PW;
	}
	if (kind == CONV_BLK_PW) {
		int rc = pw_schedule(ctx, &d, N);

		if (rc)
			return rc;
	} else if (kind == CONV_BLK_IN || kind == CONV_BLK_G8 || kind == CONV_BLK_KB) {
		int rc = in_schedule(ctx, &d, N);

		if (rc)
			return rc;
	} else {
		dw_schedule(ctx, &d, N);
	}
	if (!y_blocked)
		cpu_blk8_unblock_add(ctx, d.y, y, j->res ? j->res->data : NULL, N, M, d.OP);
	return 0;
}

#else

int conv_blk_run(cpu_ctx *ctx, int kind, const conv_job *j, int64_t N, int64_t C, int64_t M,
		 const float *x, int x_blocked, const float *wpacked, const float *b, float *y,
		 int y_blocked)
{
	(void)ctx, (void)kind, (void)j, (void)N, (void)C, (void)M, (void)x, (void)x_blocked;
	(void)wpacked, (void)b, (void)y, (void)y_blocked;
	return CPU_E_INTERNAL;
}

#endif

/* Whether conv_blk_run applied j's activation (see conv_impl.h). */
int conv_blk_activated(const conv_job *j, int y_blocked)
{
	return y_blocked || !j->res;
}
