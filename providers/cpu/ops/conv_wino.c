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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "gemm.h"

enum { XI = 16 };

typedef struct wino_arg {
	const float *w;
	int64_t M, C;
	size_t size;   /* one packed U_xi */
} wino_arg;

/* U_xi[c][m] = (G g G^T)[xi] of filter (m, c), G = [1 0 0; .5 .5 .5;
 * .5 -.5 .5; 0 0 1]; each U_xi packed as a K = C, N = M matrix. */
static int wino_pack(void *dst, size_t size, void *arg)
{
	const wino_arg *a = arg;
	float *u = malloc(sizeof(float) * XI * (size_t)(a->C * a->M));

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
				u[(xi * a->C + c) * a->M + m] = r[xi / 4][xi % 4];
		}
	for (int xi = 0; xi < XI; xi++)
		if (gemm_pack_b(GEMM_ISA_AUTO, u + xi * a->C * a->M, a->M, 0, a->C, a->M,
				(char *)dst + xi * a->size, a->size)) {
			free(u);
			return -1;
		}
	free(u);
	return 0;
}

int conv_wino_prepare(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	const cpu_window *w = &st->win;
	wino_arg a;
	char fmt[48];

	const char *env = getenv("ORTMK_CPU_WINOGRAD");

	/* ORTMK_CPU_WINOGRAD=0 keeps the direct forms (for comparisons). */
	if (env && strcmp(env, "0") == 0)
		return 0;
	if (!W || W->dtype != CPU_FLOAT || W->rank != 4 || W->dims[2] != 3 || W->dims[3] != 3 ||
	    st->group != 1 || W->dims[0] < 16 || W->dims[1] < 8)
		return 0;
	for (int i = 0; i < w->n_strides; i++)
		if (w->strides[i] != 1)
			return 0;
	for (int i = 0; i < w->n_dilations; i++)
		if (w->dilations[i] != 1)
			return 0;
	a.w = W->data;
	a.M = W->dims[0];
	a.C = W->dims[1];
	a.size = gemm_pack_b_size(GEMM_ISA_AUTO, a.C, a.M);
	if (!a.size || a.size > ((size_t)64 << 20) / XI)
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

/* V[xi][c][t] = (B^T d B)[xi] for every tile t of channel c, B^T =
 * [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].  Per channel and tile row the
 * vertical step combines four zero-padded input rows over the whole
 * width (rows r[0..3], wp floats each, from buf), then the horizontal
 * step writes each xi's tiles contiguously. */
CPU_MULTIVERSION
static void input_transform(const float *x, int64_t c0, int64_t c1, int64_t C,
			    const cpu_geom *g, int64_t th, int64_t tw, float *buf, float *V)
{
	int64_t IH = g->in[1], IW = g->in[2], T = th * tw, wp = 2 * tw + 2, pl = g->pb[2];
	float *d = buf, *r = buf + 4 * wp;

	for (int64_t c = c0; c < c1; c++) {
		const float *xc = x + c * IH * IW;

		for (int64_t ty = 0; ty < th; ty++) {
			int64_t y0 = 2 * ty - g->pb[1];
			float *v = V + c * T + ty * tw;

			for (int i = 0; i < 4; i++) {
				float *di = d + i * wp;
				int64_t yy = y0 + i, lo = pl < wp ? pl : wp;
				int64_t hi = pl + IW < wp ? pl + IW : wp;

				if (yy < 0 || yy >= IH || hi <= lo) {
					memset(di, 0, sizeof(float) * (size_t)wp);
					continue;
				}
				memset(di, 0, sizeof(float) * (size_t)lo);
				memcpy(di + lo, xc + yy * IW + (lo - pl), sizeof(float) * (size_t)(hi - lo));
				if (hi < wp)
					memset(di + hi, 0, sizeof(float) * (size_t)(wp - hi));
			}
			for (int64_t k = 0; k < wp; k++) {
				r[k] = d[k] - d[2 * wp + k];
				r[wp + k] = d[wp + k] + d[2 * wp + k];
				r[2 * wp + k] = d[2 * wp + k] - d[wp + k];
				r[3 * wp + k] = d[wp + k] - d[3 * wp + k];
			}
			for (int i = 0; i < 4; i++) {
				const float *ri = r + i * wp;
				float *v0 = v + (4 * i) * C * T, *v1 = v0 + C * T;
				float *v2 = v1 + C * T, *v3 = v2 + C * T;

				for (int64_t tx = 0; tx < tw; tx++) {
					const float *q = ri + 2 * tx;
					v0[tx] = q[0] - q[2];
					v1[tx] = q[1] + q[2];
					v2[tx] = q[2] - q[1];
					v3[tx] = q[1] - q[3];
				}
			}
		}
	}
}

/* y = A^T M A per tile and output channel (A^T = [1 1 1 0; 0 1 -1 -1]),
 * cropped to the output, plus bias and residual, then Relu.  The sums run
 * over the channels of a tile (contiguous in M_xi, so they vectorise)
 * into o with the bias added, then scatter to the four output pixels. */
CPU_MULTIVERSION
static void output_transform(const float *restrict Mb, int64_t M, const cpu_geom *g,
			     int64_t th, int64_t tw, int64_t t0, int64_t t1,
			     const float *restrict bias, const float *res, int relu,
			     float *restrict o, float *y)
{
	int64_t OH = g->out[1], OW = g->out[2], T = th * tw, TM = T * M;

	for (int64_t t = t0; t < t1; t++) {
		int64_t ty = t / tw, tx = t % tw;
		const float *restrict p = Mb + t * M;

		for (int64_t m = 0; m < M; m++) {
			float s00 = p[m] + p[TM + m] + p[2 * TM + m];
			float s01 = p[TM + m] - p[2 * TM + m] - p[3 * TM + m];
			float s10 = p[4 * TM + m] + p[5 * TM + m] + p[6 * TM + m];
			float s11 = p[5 * TM + m] - p[6 * TM + m] - p[7 * TM + m];
			float s20 = p[8 * TM + m] + p[9 * TM + m] + p[10 * TM + m];
			float s21 = p[9 * TM + m] - p[10 * TM + m] - p[11 * TM + m];
			float s30 = p[12 * TM + m] + p[13 * TM + m] + p[14 * TM + m];
			float s31 = p[13 * TM + m] - p[14 * TM + m] - p[15 * TM + m];
			float b = bias ? bias[m] : 0.0f;

			o[m] = s00 + s10 + s20 + b;
			o[M + m] = s01 + s11 + s21 + b;
			o[2 * M + m] = s10 - s20 - s30 + b;
			o[3 * M + m] = s11 - s21 - s31 + b;
		}
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2; j++) {
				int64_t oy = 2 * ty + i, ox = 2 * tx + j, plane = OH * OW;
				const float *oi = o + (2 * i + j) * M;
				float *yo = y + oy * OW + ox;

				if (oy >= OH || ox >= OW)
					continue;
				if (res) {
					const float *ro = res + oy * OW + ox;
					for (int64_t m = 0; m < M; m++) {
						float v = oi[m] + ro[m * plane];
						yo[m * plane] = relu && v < 0.0f ? 0.0f : v;
					}
				} else if (relu) {
					for (int64_t m = 0; m < M; m++)
						yo[m * plane] = oi[m] < 0.0f ? 0.0f : oi[m];
				} else {
					for (int64_t m = 0; m < M; m++)
						yo[m * plane] = oi[m];
				}
			}
	}
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
	int64_t C = w->j->Cg, c0 = C * task / w->chunks, c1 = C * (task + 1) / w->chunks;

	input_transform(w->x, c0, c1, C, &w->j->g, w->th, w->tw,
			w->bufs + (size_t)member * w->buf_floats, w->V);
}

static void out_task(void *arg, int64_t task, int member)
{
	const wino_par *w = arg;
	int64_t T = w->th * w->tw, t0 = T * task / w->chunks, t1 = T * (task + 1) / w->chunks;

	output_transform(w->Mb, w->j->Mg, &w->j->g, w->th, w->tw, t0, t1, w->bias, w->res,
			 w->j->relu, w->bufs + (size_t)member * w->buf_floats, w->y);
}

static void par_for(gemm_pool *pool, gemm_task_fn *fn, wino_par *w)
{
	int mine = gemm_pool_try_begin(pool), n = mine ? gemm_pool_threads(pool) : 1;

	w->chunks = n > 1 ? 4 * n : 1;
	if (mine)
		gemm_pool_for(pool, n, w->chunks, fn, w);
	else
		fn(w, 0, 0);
	if (mine)
		gemm_pool_end(pool);
}

int conv_wino_run(cpu_ctx *ctx, const conv_state *st, const conv_job *j, const float *x,
		  const float *bias, const float *res, float *y)
{
	int64_t th = (j->g.out[1] + 1) / 2, tw = (j->g.out[2] + 1) / 2, T = th * tw;
	int64_t C = j->Cg, M = j->Mg;
	int members = gemm_pool_threads(ctx->pool);
	size_t bf = (size_t)(8 * (2 * tw + 2) > 4 * M ? 8 * (2 * tw + 2) : 4 * M);
	float *V = cpu_scratch(ctx, sizeof(float) * XI * (size_t)(T * C));
	float *Mb = cpu_scratch(ctx, sizeof(float) * XI * (size_t)(T * M));
	float *bufs = cpu_scratch(ctx, sizeof(float) * bf * (size_t)members);
	wino_par w = {j, x, bias, res, V, Mb, y, bufs, th, tw, 1, bf};

	if (!V || !Mb || !bufs)
		return CPU_E_NOMEM;
	par_for(ctx->pool, in_task, &w);
	/* V_xi is stored [C, tiles]: the GEMM reads it as A^T. */
	for (int xi = 0; xi < XI; xi++)
		if (gemm_compute(ctx->pool, T, M, C, V + xi * T * C, T, 1,
				 (const char *)st->wino + xi * st->wino_size, NULL, Mb + xi * T * M, M))
			return cpu_fail(ctx, CPU_E_INTERNAL, "Winograd GEMM failed");
	par_for(ctx->pool, out_task, &w);
	return 0;
}
