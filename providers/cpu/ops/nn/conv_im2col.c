/*
 * conv_im2col: the data movement of the Conv kernel (conv.c): the im2col
 * that lays the input out for the GEMM, and the depthwise convolution,
 * which has one input channel per output channel and is a sliding window
 * rather than a GEMM, and conv_pack_im2col, which writes the im2col straight
 * into the GEMM's packed panels (no im2col matrix).  They cut each output
 * row into the part whose window lies in the padding and the part that
 * reads the input, so the inner loops carry no bounds checks.
 */
#include <string.h>

#include "conv_impl.h"
#include "vfloat.h"

/* The output columns [lo, hi) of a row whose tap at kernel column kw reads
 * inside the input (the others read padding). */
static void inside(const cpu_geom *g, int64_t kw, int64_t *lo_out, int64_t *hi_out)
{
	int64_t OW = g->out[2], IW = g->in[2], s = g->s[2];
	int64_t base = kw * g->d[2] - g->pb[2], lo = 0, hi;

	if (base < 0)
		lo = (-base + s - 1) / s;
	hi = IW - base > 0 ? (IW - base + s - 1) / s : 0;
	if (lo > OW)
		lo = OW;
	if (hi > OW)
		hi = OW;
	if (hi < lo)
		hi = lo;
	*lo_out = lo;
	*hi_out = hi;
}

/* One im2col row: the input line src for kernel column kw, all output
 * columns (zeros where the window is in the padding). */
static void im2col_line(float *dst, const float *src, const cpu_geom *g, int64_t kw)
{
	int64_t OW = g->out[2], s = g->s[2], base = kw * g->d[2] - g->pb[2], lo, hi;

	inside(g, kw, &lo, &hi);
	for (int64_t ow = 0; ow < lo; ow++)
		dst[ow] = 0.0f;
	if (s == 1) {
		if (hi > lo)
			memcpy(dst + lo, src + base + lo, (size_t)(hi - lo) * sizeof(float));
	} else {
		for (int64_t ow = lo; ow < hi; ow++)
			dst[ow] = src[base + ow * s];
	}
	for (int64_t ow = hi; ow < OW; ow++)
		dst[ow] = 0.0f;
}

void cpu_im2col(const float *x, int64_t C, const cpu_geom *g, float *col)
{
	int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
	int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
	int64_t osz = OD * OH * OW;
	float *row = col;

	for (int64_t c = 0; c < C; c++)
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t kh = 0; kh < g->k[1]; kh++)
				for (int64_t kw = 0; kw < g->k[2]; kw++, row += osz)
					for (int64_t od = 0; od < OD; od++) {
						int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
						for (int64_t oh = 0; oh < OH; oh++) {
							int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
							float *dst = row + (od * OH + oh) * OW;
							if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
								memset(dst, 0, (size_t)OW * sizeof(float));
								continue;
							}
							im2col_line(dst, x + ((c * ID + id) * IH + ih) * IW, g, kw);
						}
					}
}

/* dst[i] = src[2 i], i < n; src[0, avail) may be read.  Eight outputs at
 * a time from two loads and one even-lane shuffle while both loads stay
 * inside avail, then one at a time. */
VF_INLINE void copy_stride2(float *restrict dst, const float *restrict src, int64_t n,
			    int64_t avail)
{
	const vi8 even = {0, 2, 4, 6, 8, 10, 12, 14};
	int64_t i = 0;

	for (; i + 8 <= n && 2 * i + 16 <= avail; i += 8)
		vf_store(dst + i, __builtin_shuffle(vf_load(src + 2 * i), vf_load(src + 2 * i + 8),
						    even));
	for (; i < n; i++)
		dst[i] = src[2 * i];
}

/* Columns [j0, j1) of im2col row t (output pixels in order; zeros where
 * the window is in the padding) into line. */
static inline __attribute__((always_inline)) void
pack_line(const conv_packer *cp, int64_t t, int64_t j0, int64_t j1, float *line)
{
	const cpu_geom *g = cp->g;
	int64_t OH = g->out[1], OW = g->out[2], plane = OH * OW;
	int64_t taps = g->k[0] * g->k[1] * g->k[2], c = t / taps, tk = t % taps;
	int64_t kd = tk / (g->k[1] * g->k[2]), kh = tk / g->k[2] % g->k[1], kw = tk % g->k[2];
	int64_t s = g->s[2], base = kw * g->d[2] - g->pb[2], lo, hi;
	int64_t od = j0 / plane, oh = j0 % plane / OW, ow = j0 % OW, j = j0;
	const float *xc = cp->x + c * g->in[0] * g->in[1] * g->in[2];
	float *o = line;

	inside(g, kw, &lo, &hi);
	while (j < j1) {
		int64_t run = j1 - j < OW - ow ? j1 - j : OW - ow;
		int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
		int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
		int64_t a = ow > lo ? ow : lo, b = ow + run < hi ? ow + run : hi, q = ow;

		if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1])
			a = b = ow + run;   /* all padding */
		for (; q < a && q < ow + run; q++)
			o[q - ow] = 0.0f;
		if (b > a) {
			const float *src = xc + (id * g->in[1] + ih) * g->in[2] + base;
			if (s == 1)
				memcpy(o + (a - ow), src + a, (size_t)(b - a) * sizeof(float));
			else if (s == 2)
				copy_stride2(o + (a - ow), src + 2 * a, b - a, g->in[2] - base - 2 * a);
			else
				for (q = a; q < b; q++)
					o[q - ow] = src[q * s];
			q = b;
		}
		for (; q < ow + run; q++)
			o[q - ow] = 0.0f;
		o += run;
		j += run;
		ow = 0;
		if (++oh == OH) {
			oh = 0;
			od++;
		}
	}
}

/* gemm_pack_fn: rows [k0, k0 + rows) of the im2col matrix, panels [p0,
 * p1) of nr columns.  Each row's columns of a run of panels are first
 * laid out as one line (runs of output rows: whole copies), then cut into
 * the panels: per (row, panel) only a copy of nr floats (the loop that
 * built each panel's piece of a row apart cost as much as the GEMM on
 * YOLO's 3x3/2 layers on Zen 3). */
#define PACK_LINE 2048
CPU_MULTIVERSION
void conv_pack_im2col(void *arg, int64_t k0, int64_t rows, int64_t p0, int64_t p1, int64_t nr,
		      float *dst)
{
	const conv_packer *cp = arg;
	const cpu_geom *g = cp->g;
	int64_t osz = g->out[0] * g->out[1] * g->out[2];
	int64_t chunk = PACK_LINE / nr > 0 ? PACK_LINE / nr : 1;
	float line[PACK_LINE + 64];

	if (nr > PACK_LINE)
		chunk = 0;
	for (int64_t q0 = p0; q0 < p1; q0 += chunk ? chunk : p1 - p0) {
		int64_t q1 = chunk && q0 + chunk < p1 ? q0 + chunk : p1;
		int64_t j0 = q0 * nr, j1 = q1 * nr < osz ? q1 * nr : osz;

		for (int64_t r = 0; r < rows; r++) {
			if (!chunk) {   /* a panel wider than the line: one at a time */
				for (int64_t p = q0; p < q1; p++) {
					int64_t a = p * nr, b = a + nr < osz ? a + nr : osz;
					float *o = dst + ((p - p0) * rows + r) * nr;

					pack_line(cp, k0 + r, a, b, o);
					memset(o + (b - a), 0, (size_t)(nr - (b - a)) * sizeof(float));
				}
				continue;
			}
			pack_line(cp, k0 + r, j0, j1, line);
			memset(line + (j1 - j0), 0, (size_t)((q1 - q0) * nr - (j1 - j0)) * sizeof(float));
			for (int64_t p = q0; p < q1; p++)
				memcpy(dst + ((p - p0) * rows + r) * nr, line + (p - q0) * nr,
				       (size_t)nr * sizeof(float));
		}
	}
}

/* y[ow] += w * x[base + ow * s] for the output columns inside the input. */
CPU_MULTIVERSION
static void dw_tap(float *y, const float *x, const cpu_geom *g, int64_t kw, float w)
{
	int64_t s = g->s[2], base = kw * g->d[2] - g->pb[2], lo, hi;

	inside(g, kw, &lo, &hi);
	if (s == 1)
		for (int64_t ow = lo; ow < hi; ow++)
			y[ow] += w * x[base + ow];
	else
		for (int64_t ow = lo; ow < hi; ow++)
			y[ow] += w * x[base + ow * s];
}

/* One plane: every output row starts at bias + residual (res may be y
 * itself: read before written) and accumulates its taps in place. */
static void dw_plane(const cpu_geom *g, const float *x, const float *w, float bias,
		     const float *res, float *y)
{
	int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
	int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];

	for (int64_t od = 0; od < OD; od++)
		for (int64_t oh = 0; oh < OH; oh++) {
			float *yr = y + (od * OH + oh) * OW;

			const float *rr = res ? res + (od * OH + oh) * OW : NULL;

			for (int64_t ow = 0; ow < OW; ow++)
				yr[ow] = bias + (rr ? rr[ow] : 0.0f);
			for (int64_t kd = 0; kd < g->k[0]; kd++) {
				int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
				if (id < 0 || id >= ID)
					continue;
				for (int64_t kh = 0; kh < g->k[1]; kh++) {
					int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
					const float *xr = x + (id * IH + ih) * IW;
					const float *wr = w + (kd * g->k[1] + kh) * g->k[2];
					if (ih < 0 || ih >= IH)
						continue;
					for (int64_t kw = 0; kw < g->k[2]; kw++)
						dw_tap(yr, xr, g, kw, wr[kw]);
				}
			}
		}
}

void conv_depthwise(const conv_job *j, const float *x, const float *w, const float *b,
		    float *y, int64_t planes, int64_t channels)
{
	int64_t isz = j->g.in[0] * j->g.in[1] * j->g.in[2], osz = j->osz;
	int64_t taps = j->g.k[0] * j->g.k[1] * j->g.k[2];

	for (int64_t p = 0; p < planes; p++) {
		int64_t c = p % channels;
		float *yp = y + p * osz;
		const float *r = j->res ? (const float *)j->res->data + p * osz : NULL;

		dw_plane(&j->g, x + p * isz, w + c * taps, b ? b[c] : 0.0f, r, yp);
		for (int64_t i = 0; j->relu && i < osz; i++)
			yp[i] = yp[i] > 0.0f || yp[i] != yp[i] ? yp[i] : 0.0f;
		if (j->act)
			cpu_fuse_act_apply(j->act, yp, osz);
	}
}
