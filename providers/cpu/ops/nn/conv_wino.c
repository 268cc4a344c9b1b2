/*
 * conv_wino: 3x3, stride-1, undilated, ungrouped convolutions by Winograd's
 * F(2x2, 3x3) on the packed GEMM (issue #7: ONNX Runtime's CPU provider has
 * no Winograd convolution; this is where ortmk does fewer flops).
 *
 * Each 2x2 block of outputs (a tile) comes from a 4x4 patch d of the input:
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A
 * so the 16 products per tile and channel pair become 16 GEMMs, one per
 * position xi of the 4x4 transform domain:
 *   M_xi[tiles, M] = V_xi[tiles, C] x U_xi[C, M]
 * with V = B^T d B (the input transform, per tile and channel) and
 * U = G g G^T (the filter transform, done once at load and pre-packed
 * through the pre-pack cache).  2.25x fewer multiplies in the GEMMs than
 * the direct convolution, at the price of the two transforms, which are
 * memory passes; the error stays near fp32 rounding (the transforms'
 * coefficients are 0, +-1 and 1/2).  Called by conv.c.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv_impl.h"
#include "gemm.h"
#include "par.h"
#include "vfloat.h"

enum { XI = 16, CB8 = 8 };

/* conv_wino_fits: tiles x input channels at most this (one transformed
 * input V_xi of up to 512 KiB; ResNet's 56x56x64 layers are 50176, DenseNet's
 * 56x56x128 100352), except for the large layers of WINO_MAX_WHOLE_BYTES */
enum { WINO_MAX_TILE_CHANNELS = 1 << 17 };

/* ... except in bands from this many input channels (conv_wino_fits) */
enum { WINO_BANDS_MIN_C = 64 };

/* The transformed input and products of a whole image (conv_wino_run's
 * scratch without bands), at most, for a layer past
 * WINO_MAX_TILE_CHANNELS (conv_wino_fits). */
#define WINO_MAX_WHOLE_BYTES ((int64_t)128 << 20)

/* conv_wino_dilated: dilations up to this (DeepLabV3's atrous pyramid at
 * 12 to 36 leaves sub-images of a few pixels) */
enum { WINO_MAX_DILATION = 4 };

/* The filter's sixteen transforms, packed, at most (1.8x the filter:
 * FCN's 2048 -> 512 head is 64 MiB) */
#define WINO_MAX_FILTER_BYTES ((size_t)128 << 20)

typedef struct wino_arg {
	const float *w;
	int64_t M, C;
	size_t size;   /* one packed U_xi */
} wino_arg;

/* U_xi[c][m] = (G g G^T)[xi] of filter (m, c), G = [1 0 0; .5 .5 .5;
 * .5 -.5 .5; 0 0 1]; each U_xi packed as a K = C, N = M matrix.  Built as
 * U_xi^T ([xi][m][c]: sixteen sequential streams while the filter is read
 * in order) and packed transposed: with U_xi itself the writes went C x M
 * floats apart and ResNet-18's session creation spent 200 ms here. */
static int wino_pack(void *dst, size_t size, void *arg)
{
	const wino_arg *a = arg;
	float *u = cpu_alloc_big(sizeof(float) * XI * (size_t)(a->C * a->M));

	(void)size;
	if (!u)
		return -1;
	for (int64_t m = 0; m < a->M; m++)
		for (int64_t c = 0; c < a->C; c++) {
			const float *g = a->w + (m * a->C + c) * 9;
			float t[4][3], r[4][4];

			for (int j = 0; j < 3; j++) {     /* G g: rows */
				t[0][j] = g[j];
				t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
				t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
				t[3][j] = g[6 + j];
			}
			for (int i = 0; i < 4; i++) {     /* (G g) G^T: columns */
				r[i][0] = t[i][0];
				r[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
				r[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
				r[i][3] = t[i][2];
			}
			for (int xi = 0; xi < XI; xi++)
				u[(xi * a->M + m) * a->C + c] = r[xi / 4][xi % 4];
		}
	for (int xi = 0; xi < XI; xi++)
		if (gemm_pack_b(GEMM_ISA_AUTO, u + xi * a->C * a->M, a->C, 1, a->C, a->M,
				(char *)dst + xi * a->size, a->size)) {
			free(u);
			return -1;
		}
	free(u);
	return 0;
}

int conv_wino_takes(const cpu_tensor *W, const cpu_window *w, int64_t group)
{
	const char *env = getenv("ORTMK_CPU_WINOGRAD");

	/* ORTMK_CPU_WINOGRAD=0 keeps the direct forms (for comparisons). */
	if (env && strcmp(env, "0") == 0)
		return 0;
	/* (a float16 filter: the node runs widened, cpu_f16.c, on a float32
	 * copy) */
	if (!W || (W->dtype != CPU_FLOAT && W->dtype != CPU_FLOAT16) || W->rank != 4 ||
	    W->dims[2] != 3 || W->dims[3] != 3 || group != 1 || W->dims[0] < 16 || W->dims[1] < 8)
		return 0;
	/* At 16 input channels the sixteen products are 16 deep, shorter
	 * than the tiles' loads and stores: conv_nhwc.c took 0.75-0.85x the
	 * time where it takes the layer (Zen 3, paired: SqueezeNet's 16 -> 64
	 * at 55 x 55, 16 -> 32 at 28 x 28) and never more.  At 32 output
	 * channels and fewer each tile's input transform serves too few
	 * outputs: DenseNet's 128 -> 32 layers took 0.92x (56 x 56), 0.86x
	 * (28 x 28), 0.76x (14 x 14) and 0.53x (7 x 7) of Winograd's time
	 * through conv_nhwc.c. */
	if ((W->dims[1] <= 16 || W->dims[0] <= 32) &&
	    conv_nhwc_takes(W->dims[1], 9, W->dims[0], 0))
		return 0;
	if (cpu_window_strided(w))
		return 0;
	/* dilated: D in both dims, explicit pads of D (conv_wino_dilated) */
	for (int i = 0; i < w->n_dilations; i++)
		if (w->dilations[i] != 1 &&
		    (w->n_dilations != 2 || w->dilations[i] != w->dilations[0] ||
		     w->dilations[i] > WINO_MAX_DILATION || w->auto_pad != ONNX_PAD_NOTSET ||
		     w->n_pads != 4 || w->pads[0] != w->dilations[0] ||
		     w->pads[1] != w->dilations[0] || w->pads[2] != w->dilations[0] ||
		     w->pads[3] != w->dilations[0]))
			return 0;
	return 1;
}

int conv_wino_prepare(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	wino_arg a;
	char fmt[48];

	if (!conv_wino_takes(W, &st->win, st->group) || W->dtype != CPU_FLOAT)
		return 0;
	a.w = W->data;
	a.M = W->dims[0];
	a.C = W->dims[1];
	a.size = gemm_pack_b_size(GEMM_ISA_AUTO, a.C, a.M);
	if (!a.size || a.size > WINO_MAX_FILTER_BYTES / XI)
		return 0;
	snprintf(fmt, sizeof(fmt), "conv-wino23-v%d-%s", GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	st->wino = cpu_prepack(node, 1, fmt, a.size * XI, wino_pack, &a, err, n);
	if (!st->wino)
		return CPU_E_NOMEM;
	for (int xi = 0; xi < XI; xi++)
		if (gemm_pack_b_check((const char *)st->wino + xi * a.size, a.size, a.C, a.M)) {
			st->wino = NULL;
			return 0;
		}
	st->wino_size = a.size;
	st->wino_src = W->data;
	return 0;
}

/* Splits input row src (IW floats, read as if padded by pl zeros on the
 * left and zeros past its end) into its even and odd padded columns:
 * e[j] = d[2j], o[j] = d[2j+1], j < hw. */
static inline void split_row(float *restrict e, float *restrict o, const float *restrict src,
			     int64_t IW, int64_t pl, int64_t hw)
{
	/* j in [lo, hi): both columns 2j - pl and 2j + 1 - pl inside */
	int64_t lo = (pl + 1) / 2, last = IW + pl - 2, hi = last < 0 ? 0 : last / 2 + 1, j = 0;

	if (hi > hw)
		hi = hw;
	if (hi < lo)
		hi = lo;
	for (; j < lo && j < hw; j++) {
		int64_t ce = 2 * j - pl;
		e[j] = ce >= 0 && ce < IW ? src[ce] : 0.0f;
		o[j] = ce + 1 >= 0 && ce + 1 < IW ? src[ce + 1] : 0.0f;
	}
#pragma GCC ivdep
	for (j = lo; j < hi; j++) {
		e[j] = src[2 * j - pl];
		o[j] = src[2 * j + 1 - pl];
	}
	for (j = hi > lo ? hi : j; j < hw; j++) {
		int64_t ce = 2 * j - pl;
		e[j] = ce >= 0 && ce < IW ? src[ce] : 0.0f;
		o[j] = ce + 1 >= 0 && ce + 1 < IW ? src[ce + 1] : 0.0f;
	}
}

/* Floats of input_transform's buffer for up to th tile rows of tw. */
static int64_t in_buf_floats(int64_t th, int64_t tw)
{
	return (2 * (2 * th + 2) + 8) * (tw + 1);
}

/* V[xi][c][t] = (B^T d B)[xi] for tile rows [ty0, ty1) (tile t counted
 * from the first of them) of channels [c0, c1), B^T =
 * [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].  Per channel, every input row
 * the tile rows cover (zero-padded) is split once into its even and odd
 * columns (E and O, hw = tw + 1 floats a row); then per tile row the
 * vertical step combines four rows, and the horizontal step is
 * contiguous: tile tx's four columns are e[tx], o[tx], e[tx+1], o[tx+1].
 * Every loop is unit-stride (or the one even/odd split), so they
 * vectorise. */
CPU_MULTIVERSION
static void input_transform(const float *x, int64_t c0, int64_t c1, int64_t C,
			    const cpu_geom *g, int64_t ty0, int64_t ty1, int64_t tw, float *buf,
			    float *V)
{
	int64_t IH = g->in[1], IW = g->in[2], T = (ty1 - ty0) * tw, hw = tw + 1;
	int64_t nrows = 2 * (ty1 - ty0) + 2, y0 = 2 * ty0 - g->pb[1];
	float *E = buf, *O = E + nrows * hw, *re = O + nrows * hw, *ro = re + 4 * hw;

	for (int64_t c = c0; c < c1; c++) {
		const float *xc = x + c * IH * IW;

		for (int64_t i = 0; i < nrows; i++) {
			int64_t yy = y0 + i;

			if (yy < 0 || yy >= IH) {
				memset(E + i * hw, 0, sizeof(float) * (size_t)hw);
				memset(O + i * hw, 0, sizeof(float) * (size_t)hw);
			} else {
				split_row(E + i * hw, O + i * hw, xc + yy * IW, IW, g->pb[2], hw);
			}
		}
		for (int64_t ty = ty0; ty < ty1; ty++) {
			float *v = V + c * T + (ty - ty0) * tw;
			int64_t r0 = 2 * (ty - ty0) * hw;

			for (int h = 0; h < 2; h++) {
				const float *restrict s = (h ? O : E) + r0;
				float *restrict r = h ? ro : re;

#pragma GCC ivdep
				for (int64_t k = 0; k < hw; k++) {
					r[k] = s[k] - s[2 * hw + k];
					r[hw + k] = s[hw + k] + s[2 * hw + k];
					r[2 * hw + k] = s[2 * hw + k] - s[hw + k];
					r[3 * hw + k] = s[hw + k] - s[3 * hw + k];
				}
			}
			for (int i = 0; i < 4; i++) {
				const float *restrict ei = re + i * hw, *restrict oi = ro + i * hw;
				float *restrict v0 = v + (4 * i) * C * T, *restrict v1 = v0 + C * T;
				float *restrict v2 = v1 + C * T, *restrict v3 = v2 + C * T;

#pragma GCC ivdep
				for (int64_t tx = 0; tx < tw; tx++) {
					v0[tx] = ei[tx] - ei[tx + 1];
					v1[tx] = oi[tx] + ei[tx + 1];
					v2[tx] = ei[tx + 1] - oi[tx];
					v3[tx] = oi[tx] - oi[tx + 1];
				}
			}
		}
	}
}

/* y = A^T M A per tile and output channel (A^T = [1 1 1 0; 0 1 -1 -1])
 * for the whole tile rows [t0, t1) of the image (t0 and t1 multiples of
 * tw) and channels [m0, m1), whose products Mb holds from tile `base` on
 * (T tiles per M_xi), cropped to the output, plus bias and residual, then
 * Relu.  The sums run over the channels of a tile (contiguous in M_xi, so
 * they vectorise) into a buffer of the tile row's two output rows, pixel
 * by pixel (o: 4 * tw * (m1 - m0) floats), which conv_to_planes turns
 * into rows of the planes.  Scattered to the four pixels of each tile instead, every
 * store went to another plane's line. */
CPU_MULTIVERSION
static void output_transform(const float *restrict Mb, int64_t M, const cpu_geom *g,
			     int64_t T, int64_t base, int64_t tw, int64_t t0, int64_t t1,
			     int64_t m0, int64_t m1, const float *restrict bias, const float *res,
			     int relu, float *restrict o, float *y)
{
	int64_t OH = g->out[1], OW = g->out[2], TM = T * M, plane = OH * OW, mn = m1 - m0;
	float *restrict o1 = o + 2 * tw * mn;   /* the second output row */

	for (int64_t ty = t0 / tw; ty < t1 / tw; ty++) {
		for (int64_t tx = 0; tx < tw; tx++) {
			const float *restrict p = Mb + (ty * tw + tx - base) * M;
			float *restrict a = o + 2 * tx * mn, *restrict b = o1 + 2 * tx * mn;

			for (int64_t m = m0; m < m1; m++) {
				float s00 = p[m] + p[TM + m] + p[2 * TM + m];
				float s01 = p[TM + m] - p[2 * TM + m] - p[3 * TM + m];
				float s10 = p[4 * TM + m] + p[5 * TM + m] + p[6 * TM + m];
				float s11 = p[5 * TM + m] - p[6 * TM + m] - p[7 * TM + m];
				float s20 = p[8 * TM + m] + p[9 * TM + m] + p[10 * TM + m];
				float s21 = p[9 * TM + m] - p[10 * TM + m] - p[11 * TM + m];
				float s30 = p[12 * TM + m] + p[13 * TM + m] + p[14 * TM + m];
				float s31 = p[13 * TM + m] - p[14 * TM + m] - p[15 * TM + m];
				float bb = bias ? bias[m] : 0.0f;

				a[m - m0] = s00 + s10 + s20 + bb;
				a[mn + m - m0] = s01 + s11 + s21 + bb;
				b[m - m0] = s10 - s20 - s30 + bb;
				b[mn + m - m0] = s11 - s21 - s31 + bb;
			}
		}
		for (int i = 0; i < 2 && 2 * ty + i < OH; i++) {
			int64_t at = m0 * plane + (2 * ty + i) * OW;

			conv_to_planes(i ? o1 : o, mn, OW, mn, y + at, res ? res + at : NULL, plane,
				       relu);
		}
	}
}

/* ---- channel-blocked values (cpu_layout.c: NCHWc8, each pixel's 8
 * channels of a block consecutive), the same sums in the same order ---- */

/* input_transform of a blocked x ([C/8][IH][IW][8]) for channel blocks
 * [b0, b1): V[xi][t][c], tiles as rows (the GEMM reads V_xi as A), a
 * tile's eight channels of a block one vector. */
CPU_MULTIVERSION
static void input_transform_blk(const float *x, int64_t b0, int64_t b1, int64_t C,
				const cpu_geom *g, int64_t ty0, int64_t ty1, int64_t tw, float *V)
{
	static const float zero[CB8];
	int64_t IH = g->in[1], IW = g->in[2], TC = (ty1 - ty0) * tw * C;

	for (int64_t ty = ty0; ty < ty1; ty++)
		for (int64_t b = b0; b < b1; b++) {
			const float *xb = x + b * IH * IW * CB8;

			for (int64_t tx = 0; tx < tw; tx++) {
				int64_t y0 = 2 * ty - g->pb[1], x0 = 2 * tx - g->pb[2];
				float *v = V + ((ty - ty0) * tw + tx) * C + b * CB8;
				vf8 d[4][4], r[4][4];

				for (int i = 0; i < 4; i++)
					for (int k = 0; k < 4; k++) {
						int64_t yy = y0 + i, xx = x0 + k;

						d[i][k] = vf_load(yy >= 0 && yy < IH && xx >= 0 &&
									  xx < IW ?
								  xb + (yy * IW + xx) * CB8 : zero);
					}
				for (int k = 0; k < 4; k++) {     /* B^T d: rows */
					r[0][k] = d[0][k] - d[2][k];
					r[1][k] = d[1][k] + d[2][k];
					r[2][k] = d[2][k] - d[1][k];
					r[3][k] = d[1][k] - d[3][k];
				}
				for (int i = 0; i < 4; i++) {     /* (B^T d) B: columns */
					vf_store(v + (4 * i) * TC, r[i][0] - r[i][2]);
					vf_store(v + (4 * i + 1) * TC, r[i][1] + r[i][2]);
					vf_store(v + (4 * i + 2) * TC, r[i][2] - r[i][1]);
					vf_store(v + (4 * i + 3) * TC, r[i][1] - r[i][3]);
				}
			}
		}
}

/* output_transform into a blocked y (and a blocked res): channels [m0,
 * m1), multiples of 8, of the whole tile rows [t0, t1). */
CPU_MULTIVERSION
static void output_transform_blk(const float *restrict Mb, int64_t M, const cpu_geom *g,
				 int64_t T, int64_t base, int64_t tw, int64_t t0, int64_t t1,
				 int64_t m0, int64_t m1, const float *restrict bias,
				 const float *res, int relu, float *y)
{
	int64_t OH = g->out[1], OW = g->out[2], TM = T * M, plane = OH * OW;
	const vf8 zero = vf_splat(0.0f);

	for (int64_t ty = t0 / tw; ty < t1 / tw; ty++)
		for (int64_t m = m0; m < m1; m += CB8) {
			vf8 bb = bias ? vf_load(bias + m) : zero;
			float *yb = y + m * plane;
			const float *rb = res ? res + m * plane : NULL;

			for (int64_t tx = 0; tx < tw; tx++) {
				const float *p = Mb + (ty * tw + tx - base) * M + m;
				vf8 q[XI], o[4];

				for (int xi = 0; xi < XI; xi++)
					q[xi] = vf_load(p + xi * TM);
				vf8 s00 = q[0] + q[1] + q[2], s01 = q[1] - q[2] - q[3];
				vf8 s10 = q[4] + q[5] + q[6], s11 = q[5] - q[6] - q[7];
				vf8 s20 = q[8] + q[9] + q[10], s21 = q[9] - q[10] - q[11];
				vf8 s30 = q[12] + q[13] + q[14], s31 = q[13] - q[14] - q[15];

				o[0] = s00 + s10 + s20 + bb;
				o[1] = s01 + s11 + s21 + bb;
				o[2] = s10 - s20 - s30 + bb;
				o[3] = s11 - s21 - s31 + bb;
				for (int i = 0; i < 4; i++) {
					int64_t oy = 2 * ty + i / 2, ox = 2 * tx + i % 2, at;

					if (oy >= OH || ox >= OW)
						continue;
					at = (oy * OW + ox) * CB8;
					/* the residual read before y's pixel is
					 * written: the plan may put y over it */
					if (rb)
						o[i] += vf_load(rb + at);
					if (relu)
						o[i] = vf_sel(o[i] < zero, zero, o[i]);
					vf_store(yb + at, o[i]);
				}
			}
		}
}

/* The transforms of j's layout: blocked (j->xblk, j->yblk) or planes. */
static void transform_in(const conv_job *j, const float *x, int64_t c0, int64_t c1,
			 int64_t ty0, int64_t ty1, int64_t tw, float *buf, float *V)
{
	if (j->xblk)
		input_transform_blk(x, c0 / CB8, c1 / CB8, j->Cg, &j->g, ty0, ty1, tw, V);
	else
		input_transform(x, c0, c1, j->Cg, &j->g, ty0, ty1, tw, buf, V);
}

static void transform_out(const conv_job *j, const float *Mb, int64_t T, int64_t base,
			  int64_t tw, int64_t t0, int64_t t1, int64_t m0, int64_t m1,
			  const float *bias, const float *res, float *o, float *y)
{
	if (j->yblk)
		output_transform_blk(Mb, j->Mg, &j->g, T, base, tw, t0, t1, m0, m1, bias, res,
				     j->relu, y);
	else
		output_transform(Mb, j->Mg, &j->g, T, base, tw, t0, t1, m0, m1, bias, res,
				 j->relu, o, y);
}

/* The GEMMs' A: V_xi stored [C, tiles] (read as A^T) from planes, [tiles,
 * C] from blocked values. */
static int64_t v_lda(const conv_job *j, int64_t T)
{
	return j->xblk ? j->Cg : T;
}

/* A part of n of [0, count) on block boundaries when blocked. */
static void split8(int64_t count, int blocked, int64_t task, int64_t n, int64_t *a, int64_t *b)
{
	int64_t unit = blocked ? CB8 : 1, units = count / unit;

	*a = units * task / n * unit;
	*b = units * (task + 1) / n * unit;
}

/* The transforms split over the pool: input by channels, output by
 * tiles; each member has its own row buffer. */
typedef struct wino_par {
	const conv_job *j;
	const float *x, *bias, *res;
	float *V, *Mb, *y, *bufs;
	int64_t th, tw, chunks;
	size_t buf_floats;
} wino_par;

static void in_task(void *arg, int64_t task, int member)
{
	const wino_par *w = arg;
	int64_t c0, c1;

	split8(w->j->Cg, w->j->xblk, task, w->chunks, &c0, &c1);
	transform_in(w->j, w->x, c0, c1, 0, w->th, w->tw, w->bufs + (size_t)member * w->buf_floats,
		     w->V);
}

/* By output channels, not tiles: a tile writes 2x2 pixels of every
 * channel's plane, so tiles of one row on two threads would write the same
 * cache lines of every plane (at 14x14x256: no gain from a second thread). */
static void out_task(void *arg, int64_t task, int member)
{
	const wino_par *w = arg;
	int64_t T = w->th * w->tw, m0, m1;

	split8(w->j->Mg, w->j->yblk, task, w->chunks, &m0, &m1);
	transform_out(w->j, w->Mb, T, 0, w->tw, 0, T, m0, m1, w->bias, w->res,
		      w->bufs + (size_t)member * w->buf_floats, w->y);
}

static void par_for(cpu_pool *pool, cpu_task_fn *fn, wino_par *w)
{
	int mine = cpu_pool_try_begin(pool), n = mine ? cpu_pool_threads(pool) : 1;

	w->chunks = n > 1 ? 4 * n : 1;
	if (mine)
		cpu_pool_for(pool, n, w->chunks, fn, w);
	else
		fn(w, 0, 0);
	if (mine)
		cpu_pool_end(pool);
}

/* ---- blocked: transform, multiply and transform back a band of tile
 * rows at a time, so the band's V and M_xi stay in L2 ---- */

/* Bytes of V and M_xi a band may take (half the L2 of Zen 4; the rest for
 * U's panels streaming through and the input and output rows). */
#define BAND_BYTES ((int64_t)512 * 1024)

/* A Winograd layer run as tasks of the pool: bands of tile rows
 * (run_bands), or the columns of the whole image split in parts
 * (run_cols); each member with its own V, M_xi, GEMM scratch and row
 * buffer. */
typedef struct wino_task {
	const conv_state *st;
	const wino_par *w;
	int64_t rows, bands;      /* tile rows per band (at most), bands */
	const int64_t *start;     /* band i: tile rows [start[i], start[i + 1]), or NULL:
				   * rows a band from the first */
	int parts;                /* column parts of the product (run_cols), else 1 */
	char *scratch;            /* per member: V, M_xi, GEMM scratch, row buffers */
	size_t member_bytes, m_off, g_off, b_off;
	_Atomic int failed;
} wino_task;

/* Tile rows [ty0, ty1) through the three steps: the input transform, the
 * part-th of b->parts of the sixteen products' columns (on this member
 * alone: inside the pool's job) and the output transform of those
 * channels, then another activation over their rows while they are in
 * cache. */
static void wino_pipe(wino_task *b, int64_t ty0, int64_t ty1, int part, int member)
{
	const wino_par *w = b->w;
	const conv_job *j = w->j;
	int64_t C = j->Cg, M = j->Mg, tw = w->tw, T = (ty1 - ty0) * tw, m0, m1;
	char *mem = b->scratch + (size_t)member * b->member_bytes;
	float *V = (float *)mem, *Mb = (float *)(mem + b->m_off), *buf = (float *)(mem + b->b_off);
	const float *a[XI];
	const void *u[XI];
	float *c[XI];
	gemm_batch batch = {XI, a, NULL, u, c, mem + b->g_off};

	transform_in(j, w->x, 0, C, ty0, ty1, tw, buf, V);
	for (int xi = 0; xi < XI; xi++) {
		a[xi] = V + xi * T * C;
		u[xi] = (const char *)b->st->wino + xi * b->st->wino_size;
		c[xi] = Mb + xi * T * M;
	}
	if (gemm_compute_batch_part(T, M, C, v_lda(j, T), !j->xblk, NULL, M, &batch, part,
				    b->parts, &m0, &m1)) {
		atomic_store(&b->failed, 1);
		return;
	}
	if (m1 <= m0)
		return;
	transform_out(j, Mb, T, ty0 * tw, tw, ty0 * tw, ty1 * tw, m0, m1, w->bias, w->res, buf,
		      w->y);
	if (j->act) {
		int64_t OH = j->g.out[1], OW = j->g.out[2], r0 = 2 * ty0;
		int64_t r1 = 2 * ty1 < OH ? 2 * ty1 : OH, unit = j->yblk ? CB8 : 1;

		/* a block's rows are consecutive, as a plane's */
		for (int64_t m = m0; m < m1 && r1 > r0; m += unit)
			cpu_fuse_act_apply(j->act, w->y + m * OH * OW + r0 * OW * unit,
					   (r1 - r0) * OW * unit);
	}
}

static void band_task(void *arg, int64_t band, int member)
{
	wino_task *b = arg;
	int64_t th = b->w->th;
	int64_t ty0 = b->start ? b->start[band] : band * b->rows;
	int64_t ty1 = b->start ? b->start[band + 1] : ty0 + b->rows < th ? ty0 + b->rows : th;

	wino_pipe(b, ty0, ty1, 0, member);
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* b's per-member scratch for up to T tiles a task. */
static int wino_scratch(cpu_ctx *ctx, wino_task *b, int64_t T, int members)
{
	const conv_job *j = b->w->j;
	int64_t C = j->Cg, M = j->Mg;

	b->m_off = align64(sizeof(float) * XI * (size_t)(T * C));
	b->g_off = b->m_off + align64(sizeof(float) * XI * (size_t)(T * M));
	b->b_off = b->g_off + align64(gemm_compute_batch_scratch(T, C, v_lda(j, T), !j->xblk));
	b->member_bytes = b->b_off + align64(sizeof(float) * b->w->buf_floats);
	b->scratch = cpu_scratch(ctx, b->member_bytes * (size_t)members + 64);
	if (!b->scratch)
		return CPU_E_NOMEM;
	b->scratch = (char *)align64((size_t)(uintptr_t)b->scratch);
	return 0;
}

/* Tasks [0, tasks) of fn on the pool, or here when it is busy (the
 * columns then in one part: one input transform). */
static int wino_go(cpu_ctx *ctx, wino_task *b, cpu_task_fn *fn, int64_t tasks, int members)
{
	if (cpu_pool_try_begin(ctx->pool)) {
		cpu_pool_for(ctx->pool, members, tasks, fn, b);
		cpu_pool_end(ctx->pool);
	} else {
		if (b->parts > 1) {
			b->parts = 1;
			tasks = 1;
		}
		for (int64_t i = 0; i < tasks; i++)
			fn(b, i, 0);
	}
	if (atomic_load(&b->failed))
		return cpu_fail(ctx, CPU_E_INTERNAL, "Winograd GEMM failed");
	return 0;
}

/* Tile rows per band within `budget` bytes, or 0. */
static int64_t band_rows_in(int64_t budget, int64_t th, int64_t tw, int64_t C, int64_t M,
			    int members)
{
	int64_t fit = budget / ((int64_t)sizeof(float) * XI * tw * (C + M));
	int64_t even = th / (4 * members), rows = fit < even ? fit : even;

	if (rows * tw < 28)
		rows = (28 + tw - 1) / tw;
	if (rows > fit || (th + rows - 1) / rows < 2 * members)
		return 0;
	return rows;
}

int64_t conv_l2_bytes(void)
{
	static _Atomic int64_t l2 = -1;
	int64_t v = atomic_load_explicit(&l2, memory_order_relaxed);

	if (v < 0) {
		long s = sysconf(_SC_LEVEL2_CACHE_SIZE);

		atomic_store_explicit(&l2, v = s > 0 ? s : 0, memory_order_relaxed);
	}
	return v;
}

/* Tile rows per band, or 0 when the image is better done whole: a band
 * holds at least two GEMM tiles' worth of tiles (28 rows of A) and there
 * are at least two bands per thread.  Its transformed input and products
 * fill BAND_BYTES, or half the L2 where that is larger and BAND_BYTES
 * holds no band: GoogLeNet's 128 -> 192 at 28 x 28 needs 573 KB for two
 * tile rows, and whole it ran 1.3x the time of bands of 1 MB on a Xeon
 * with 2 MB of L2 (at 2 threads too: the image's transforms and products
 * crossed between the cores). */
static int64_t band_rows(int64_t th, int64_t tw, int64_t C, int64_t M, int members)
{
	int64_t rows = band_rows_in(BAND_BYTES, th, tw, C, M, members);

	if (!rows && conv_l2_bytes() / 2 > BAND_BYTES)
		rows = band_rows_in(conv_l2_bytes() / 2, th, tw, C, M, members);
	return rows;
}

/* Band boundaries into start[0..bands]: bands of `rows` tile rows, the
 * last ones halved until the bands are a multiple of the members (the
 * halves claimed last, so the members finish together: ResNet's 28 x 28
 * layers were seven bands of two rows, 4 : 3 on two threads, and ran at
 * 0.63-0.68 of one thread's time).  0 when they do not fit in
 * WINO_MAX_BANDS or too few bands have two rows to halve. */
enum { WINO_MAX_BANDS = 128 };

static int64_t band_starts(int64_t th, int64_t rows, int members, int64_t *start)
{
	int64_t nb = (th + rows - 1) / rows, k = members > 1 ? (members - nb % members) % members : 0;
	int64_t size[WINO_MAX_BANDS];

	if (k == 0 || nb + k > WINO_MAX_BANDS || k > nb)
		return 0;
	for (int64_t i = 0; i < nb; i++)
		size[i] = i + 1 < nb ? rows : th - (nb - 1) * rows;
	/* halve k bands of two rows or more, from the end (a ragged last band
	 * of one row stays); the second halves go after the last band, and
	 * then every smaller band to the middle */
	for (int64_t i = nb - 1, done = 0; done < k; i--) {
		if (i < 0)
			return 0;
		if (size[i] < 2)
			continue;
		size[nb + done] = size[i] - size[i] / 2;
		size[i] /= 2;
		done++;
	}
	/* The smaller bands in the middle: the pool's caller claims bands from
	 * the first, its workers from the last (threadpool.c), so the ones
	 * claimed last, where the members finish together, are the middle
	 * ones. */
	int64_t full = 0, at = 0;

	for (int64_t i = 0; i < nb + k; i++)
		full += size[i] == rows;
	start[0] = 0;
	for (int64_t i = 0; i < (full + 1) / 2; i++, at++)
		start[at + 1] = start[at] + rows;
	for (int64_t i = 0; i < nb + k; i++)
		if (size[i] != rows) {
			start[at + 1] = start[at] + size[i];
			at++;
		}
	for (; at < nb + k; at++)
		start[at + 1] = start[at] + rows;
	return nb + k;
}

static int run_bands(cpu_ctx *ctx, const conv_state *st, const wino_par *w, int64_t rows)
{
	int64_t start[WINO_MAX_BANDS + 1];
	int members = cpu_pool_threads(ctx->pool), rc;
	wino_task b = {st, w, rows, (w->th + rows - 1) / rows, NULL, 1, NULL, 0, 0, 0, 0, 0};
	int64_t split = band_starts(w->th, rows, members, start);

	if (split) {
		b.bands = split;
		b.start = start;
	}
	if ((rc = wino_scratch(ctx, &b, rows * w->tw, members)) != 0)
		return rc;
	return wino_go(ctx, &b, band_task, b.bands, members);
}

/* ---- an unbanded image of few input channels on several threads: each
 * member transforms the whole input, multiplies it by its share of the
 * output channels' filter panels and transforms its channels back, so
 * nothing one member wrote is read by another and the pool is entered
 * once.  Split by phases instead (input by channels, the sixteen products
 * whole, output by channels), the transforms and products crossed between
 * the cores between three passes: at 2 threads (Xeon, single layers
 * against the phases) SqueezeNet's 48 -> 192 and 64 -> 256 at 13 x 13
 * 119 -> 83 and 153 -> 128 us, 96 -> 192 at 13 x 13 167 -> 141, 64 -> 128
 * at 14 x 14 103 -> 83.  With more input channels the input transform
 * every member repeats costs what the split saves: GoogLeNet's 112 -> 224
 * at 14 x 14 and 160 -> 320 at 7 x 7 the same time, ResNet's 256 -> 256
 * at 14 x 14 and 512 -> 512 at 7 x 7 1.1x. */
#define WINO_COLS_MAX_C 96

static void cols_task(void *arg, int64_t part, int member)
{
	wino_task *b = arg;

	wino_pipe(b, 0, b->w->th, (int)part, member);
}

static int run_cols(cpu_ctx *ctx, const conv_state *st, const wino_par *w, int members)
{
	wino_task b = {st, w, w->th, 1, NULL, members, NULL, 0, 0, 0, 0, 0};
	int rc;

	if ((rc = wino_scratch(ctx, &b, w->th * w->tw, members)) != 0)
		return rc;
	return wino_go(ctx, &b, cols_task, members, members);
}

int conv_wino_fits(const conv_job *j, int members)
{
	int64_t th = (j->g.out[1] + 1) / 2, tw = (j->g.out[2] + 1) / 2;
	int64_t rows = band_rows(th, tw, j->Cg, j->Mg, members);

	/* In bands, an image of any size (from WINO_BANDS_MIN_C input
	 * channels past the bound): a band's transforms and products stay in
	 * its budget.  Large images went to conv_nhwc.c while the
	 * output transform scattered its stores; since it writes whole rows
	 * (single layers, Xeon, 1 / 2 threads, ms): 64 -> 64 at 256 x 256
	 * 26.6 / 14.7 -> 20.2 / 10.8-11.3 (ONNX Runtime 22.4 / 11.4), 128 ->
	 * 128 at 128 x 128 24.3-25.4 / 13.8-14.0 -> 17.0 / 9.2-9.5 (21.8 /
	 * 11.5), 64 -> 128 at 112 x 112 9.6 / 5.1 -> 6.7 / 3.5-3.9 (8.5 /
	 * 4.8).  Not from fewer input channels: Inception's 32 -> 64 at
	 * 147 x 147 took 1.0-1.16x conv_nhwc.c's time at one thread. */
	if (rows > 0 && (th * tw * j->Cg <= WINO_MAX_TILE_CHANNELS || j->Cg >= WINO_BANDS_MIN_C))
		return 1;
	/* Past WINO_MAX_TILE_CHANNELS only a layer that no band holds (a
	 * tile row of its transforms outgrows it) and conv_nhwc.c does not
	 * take, which the im2col GEMM would run with 2.25x the multiplies,
	 * whole: FCN's 2048 -> 512 head at 40 x 40, 210 -> 120 ms at one
	 * thread (ONNX Runtime 163), 108 -> 63 at two (ORT 81), for 65 MB of
	 * scratch and 64 MiB of transformed filter instead of 38. */
	if (th * tw * j->Cg > WINO_MAX_TILE_CHANNELS)
		return rows == 0 && !conv_nhwc_fits(j, 1) &&
		       (int64_t)sizeof(float) * XI * th * tw * (j->Cg + j->Mg) <=
			       WINO_MAX_WHOLE_BYTES;
	/* Unbanded (the transformed input and products of the whole image
	 * outgrow BAND_BYTES a band) over at least 196 tiles, the products
	 * stream through memory: conv_nhwc.c took 0.73-0.91x the time (Zen 3,
	 * paired per layer: Inception's 80 -> 192 at 71 x 71, GoogLeNet's
	 * 16 -> 32, 32 -> 96 and 128 -> 192 at 28 x 28, SqueezeNet's 32 -> 128
	 * at 27 x 27), where banded layers and small images ran 1.0-1.6x
	 * faster through Winograd.  Whether conv_nhwc.c takes the layer
	 * depends on its output size on AVX-512 (Inception's 80 -> 192 at
	 * 71 x 71 there: 15.6 ms through Winograd in the model, 9.5 through
	 * conv_nhwc.c, which packs its filter per run then: 0.1 ms). */
	if (th * tw >= 196 && rows == 0 && conv_nhwc_fits(j, 1))
		return 0;
	return 1;
}

int conv_wino_run(cpu_ctx *ctx, const conv_state *st, const conv_job *j, const float *x,
		  const float *bias, const float *res, float *y)
{
	int64_t th = (j->g.out[1] + 1) / 2, tw = (j->g.out[2] + 1) / 2, T = th * tw;
	int64_t C = j->Cg, M = j->Mg, rows;
	int members = cpu_pool_threads(ctx->pool);
	size_t bf = (size_t)(in_buf_floats(th, tw) > 4 * tw * M ? in_buf_floats(th, tw) :
			     4 * tw * M);
	wino_par w = {j, x, bias, res, NULL, NULL, y, NULL, th, tw, 1, bf};
	const float *a[XI];
	const void *u[XI];
	float *c[XI];
	gemm_batch batch = {XI, a, NULL, u, c, NULL};
	float *V, *Mb, *bufs;

	if ((rows = band_rows(th, tw, C, M, members)) > 0)
		return run_bands(ctx, st, &w, rows);
	if (members > 1 && C <= WINO_COLS_MAX_C)
		return run_cols(ctx, st, &w, members);
	V = cpu_scratch(ctx, sizeof(float) * XI * (size_t)(T * C));
	Mb = cpu_scratch(ctx, sizeof(float) * XI * (size_t)(T * M));
	bufs = cpu_scratch(ctx, sizeof(float) * bf * (size_t)members);
	if (!V || !Mb || !bufs)
		return CPU_E_NOMEM;
	w.V = V;
	w.Mb = Mb;
	w.bufs = bufs;
	par_for(ctx->pool, in_task, &w);
	/* The 16 products are one batch: on a small image (7x7: 16 tiles)
	 * each is too thin to split over threads. */
	for (int xi = 0; xi < XI; xi++) {
		a[xi] = V + xi * T * C;
		u[xi] = (const char *)st->wino + xi * st->wino_size;
		c[xi] = Mb + xi * T * M;
	}
	if (gemm_compute_batch(ctx->pool, T, M, C, v_lda(j, T), !j->xblk, NULL, M, &batch))
		return cpu_fail(ctx, CPU_E_INTERNAL, "Winograd GEMM failed");
	par_for(ctx->pool, out_task, &w);
	/* a small image, in cache: the other activations after the whole */
	if (j->act)
		cpu_fuse_act_apply(j->act, y, j->Mg * j->osz);
	return 0;
}

/* ---- dilated layers ----
 *
 * A 3x3 layer of dilation D with pads D (FCN's and DeepLab's ResNet
 * stages: D 2 and 4) is D x D undilated 3x3 layers with pads 1: output
 * pixel (py + D i, px + D j) reads only input pixels of the same phase
 * (py, px), its taps one sub-image pixel apart.  The sub-images (ceil(H /
 * D) x ceil(W / D), a row or column short for some phases, zero there)
 * are laid side by side into one image, each followed by two zero columns
 * (more to an even width: the tiles of one never cross into the next,
 * and its pads are the gap's zeros), which Winograd runs as one layer;
 * its outputs in the gaps are dropped.  The tiles past the sub-images'
 * own are at most a quarter of the tiles (conv_wino_dilated_fits). */
typedef struct wino_dil {
	const conv_job *j;
	int64_t D, Hs, Ws, P;   /* sub-image rows and columns, a sub-image's stride */
	const float *x, *res;
	float *xs, *ys, *y;
	int64_t C, M;
} wino_dil;

/* The stacked geometry of j into ds and the sub-images' sizes into d. */
static void dil_geom(const conv_job *j, wino_dil *d, conv_job *ds)
{
	int64_t D = j->g.d[1];

	d->D = D;
	d->Hs = (j->g.in[1] + D - 1) / D;
	d->Ws = (j->g.in[2] + D - 1) / D;
	d->P = (d->Ws + 2 + 1) / 2 * 2;
	*ds = *j;
	ds->g.in[1] = ds->g.out[1] = d->Hs;
	ds->g.in[2] = ds->g.out[2] = D * D * d->P;
	for (int i = 1; i < 3; i++) {
		ds->g.d[i] = 1;
		ds->g.pb[i] = ds->g.pe[i] = 1;
	}
	ds->osz = ds->g.out[1] * ds->g.out[2];
	ds->res = NULL;
	ds->relu = 0;
	ds->act = NULL;
}

int conv_wino_dilated_fits(const conv_job *j, int members)
{
	const cpu_geom *g = &j->g;
	int64_t D = g->d[1];
	wino_dil d;
	conv_job ds;

	if (D < 2 || D > WINO_MAX_DILATION || g->d[2] != D || g->in[0] != 1 || g->k[1] != 3 ||
	    g->k[2] != 3 || g->s[1] != 1 || g->s[2] != 1)
		return 0;
	for (int i = 1; i < 3; i++)
		if (g->pb[i] != D || g->pe[i] != D || g->out[i] != g->in[i])
			return 0;
	dil_geom(j, &d, &ds);
	/* the sub-images' own tile columns at least three quarters */
	return 4 * ((d.Ws + 1) / 2) >= 3 * (d.P / 2) && conv_wino_fits(&ds, members);
}

/* Channels [c0, c1) (blocks of 8 when j->xblk): the phases' sub-images
 * side by side into xs (pixel
 * px + D q of input row py + D i is pixel q of sub-image (py, px)'s row
 * i). */
CPU_MULTIVERSION
static void dil_gather(void *arg, int64_t c0, int64_t c1, int member)
{
	const wino_dil *d = arg;
	const cpu_geom *g = &d->j->g;
	int64_t H = g->in[1], W = g->in[2], D = d->D, Wst = D * D * d->P;

	(void)member;
	if (d->j->xblk) {   /* c0, c1: blocks; a pixel's 8 channels moved together */
		for (int64_t c = c0; c < c1; c++) {
			const float *xc = d->x + c * H * W * CB8;
			float *xo = d->xs + c * d->Hs * Wst * CB8;

			memset(xo, 0, sizeof(float) * (size_t)(d->Hs * Wst * CB8));
			for (int64_t r = 0; r < H; r++) {
				const float *row = xc + r * W * CB8;
				float *o = xo + (r / D * Wst + r % D * D * d->P) * CB8;

				for (int64_t px = 0; px < D; px++)
					for (int64_t q = 0, w = px; w < W; q++, w += D)
						vf_store(o + (px * d->P + q) * CB8,
							 vf_load(row + w * CB8));
			}
		}
		return;
	}
	for (int64_t c = c0; c < c1; c++) {
		const float *xc = d->x + c * H * W;
		float *xo = d->xs + c * d->Hs * Wst;

		memset(xo, 0, sizeof(float) * (size_t)(d->Hs * Wst));
		for (int64_t r = 0; r < H; r++) {
			const float *row = xc + r * W;
			float *o = xo + r / D * Wst + r % D * D * d->P;

			for (int64_t px = 0; px < D; px++)
				for (int64_t q = 0, w = px; w < W; q++, w += D)
					o[px * d->P + q] = row[w];
		}
	}
}

/* Output channels [m0, m1) (blocks of 8 when j->yblk): the sub-images'
 * outputs back to their pixels,
 * a row at a time with the residual added, then Relu over the row. */
CPU_MULTIVERSION
static void dil_scatter(void *arg, int64_t m0, int64_t m1, int member)
{
	const wino_dil *d = arg;
	const cpu_geom *g = &d->j->g;
	int64_t H = g->out[1], W = g->out[2], D = d->D, Wst = D * D * d->P;
	int relu = d->j->relu;

	(void)member;
	if (d->j->yblk) {   /* m0, m1: blocks */
		const vf8 zero = vf_splat(0.0f);

		for (int64_t m = m0; m < m1; m++) {
			const float *yc = d->ys + m * d->Hs * Wst * CB8;
			const float *rc = d->res ? d->res + m * H * W * CB8 : NULL;
			float *yo = d->y + m * H * W * CB8;

			for (int64_t r = 0; r < H; r++) {
				const float *s = yc + (r / D * Wst + r % D * D * d->P) * CB8;

				for (int64_t px = 0; px < D; px++)
					for (int64_t q = 0, w = px; w < W; q++, w += D) {
						int64_t at = (r * W + w) * CB8;
						vf8 v = vf_load(s + (px * d->P + q) * CB8);

						if (rc)
							v += vf_load(rc + at);
						if (relu)
							v = vf_sel(v < zero, zero, v);
						vf_store(yo + at, v);
					}
			}
		}
		return;
	}
	for (int64_t m = m0; m < m1; m++) {
		const float *yc = d->ys + m * d->Hs * Wst;
		const float *rc = d->res ? d->res + m * H * W : NULL;
		float *yo = d->y + m * H * W;

		for (int64_t r = 0; r < H; r++) {
			const float *s = yc + r / D * Wst + r % D * D * d->P;
			float *yr = yo + r * W;

			/* the residual read before Y's pixel is written: the plan
			 * may put Y over it */
			for (int64_t px = 0; px < D; px++) {
				const float *sp = s + px * d->P;

				if (rc)
					for (int64_t q = 0, w = px; w < W; q++, w += D)
						yr[w] = sp[q] + rc[r * W + w];
				else
					for (int64_t q = 0, w = px; w < W; q++, w += D)
						yr[w] = sp[q];
			}
			if (relu)
				for (int64_t w = 0; w < W; w++)
					yr[w] = yr[w] < 0.0f ? 0.0f : yr[w];
		}
	}
}

int conv_wino_dilated(cpu_ctx *ctx, const conv_state *st, const conv_job *j, const float *x,
		      const float *bias, const float *res, float *y)
{
	wino_dil d = {.j = j, .x = x, .res = res, .y = y, .C = j->Cg, .M = j->Mg};
	conv_job ds;
	int rc;

	dil_geom(j, &d, &ds);
	d.xs = cpu_scratch(ctx, sizeof(float) * (size_t)(d.C * ds.osz));
	d.ys = cpu_scratch(ctx, sizeof(float) * (size_t)(d.M * ds.osz));
	if (!d.xs || !d.ys)
		return CPU_E_NOMEM;
	/* ~0.5 ns a float moved; blocked, by blocks of 8 channels */
	cpu_par_for(ctx, j->xblk ? d.C / CB8 : d.C, 0.5 * (double)ds.osz * (j->xblk ? CB8 : 1), 1,
		    dil_gather, &d);
	if ((rc = conv_wino_run(ctx, st, &ds, d.xs, bias, NULL, d.ys)) != 0)
		return rc;
	cpu_par_for(ctx, j->yblk ? d.M / CB8 : d.M, 0.5 * (double)ds.osz * (j->yblk ? CB8 : 1), 1,
		    dil_scatter, &d);
	if (j->act)
		cpu_fuse_act_apply(j->act, y, j->Mg * j->osz);
	return 0;
}
