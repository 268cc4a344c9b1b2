/*
 * conv_dw: the depthwise convolution of 1-D and 2-D images (one input and
 * one output channel per group: MobileNet's and EfficientNet's 3x3 and 5x5
 * layers), for conv.c.
 *
 * Each plane is first copied into a zero-padded buffer (one per pool
 * member), so every output pixel reads its whole window without bounds
 * checks: the pad is what ONNX's zero padding means.  With stride s the
 * copy also splits the padded plane into s x s phase planes (padded row r
 * and column c go to phase (r % s, c % s) at (r / s, c / s)), so that in
 * every phase a tap reads consecutive floats for consecutive outputs.
 *
 * The outputs are then computed over the padded geometry flattened: output
 * (oh, ow) is flat index oh * P + ow of a row pitch P a little wider than
 * the output row, and tap (kh, kw) of every output reads its phase plane at
 * a fixed offset from that index.  The whole plane is one long run of
 * vectors, 64 outputs an iteration in eight independent sums (fewer, and
 * the multiply-add chains wait on each other's latency), the last outputs
 * a vector at a time; 3x3 and 5x5 at stride 1 take two output rows at once
 * (dw_pairs), each input vector loaded once for both.  There are
 * no row ends and no partial vectors: the columns past OW are computed and
 * dropped.  That is what makes the small planes of late layers (14x14,
 * 7x7: two to six vectors a row before) run at the speed of the large ones.
 * A strip of rows at a time lands in a small buffer kept in the L1 cache;
 * the epilogue copies each row's OW valid outputs to Y with the residual,
 * Relu or fused activation.  Planes are split over the pool.
 */
#include <math.h>
#include <string.h>

#include "conv_impl.h"
#include "par.h"
#include "vfloat.h"

/* Outputs one iteration of the flat loop computes. */
#define DW_STEP 64
/* Flat outputs a strip computes at most (16 KiB of results). */
#define DW_STRIP 4096

typedef struct dw_job {
	const conv_job *j;
	const float *x, *w, *b;
	float *y;
	int64_t channels;
	int64_t s;               /* stride of both axes (phases per axis) */
	int64_t R2, P2;          /* rows and pitch of one phase plane */
	int64_t strip;           /* output rows per strip */
	int64_t taps;
	int pairs;               /* K of dw_pairs' K x K, or 0 */
	int clamp;               /* clamp to [lo, hi] as rows are stored */
	float lo, hi;
	const cpu_fusion *act;   /* another activation, over each plane after */
	int64_t *off;            /* taps: offset of each tap in the phase buffer */
	float *buf;              /* per member: buf_floats each */
	int64_t buf_floats, phase_floats;
} dw_job;

/* Rows are short (7 to 120 floats): vector loops here cost a fraction of
 * a memset or memcpy call each.  Both may write up to 8 floats past p + n
 * (a whole last vector): the buffer has the slack, and the rows are
 * written in increasing order, so what spills into the next row is
 * overwritten when that row is written. */
static inline __attribute__((always_inline)) void dw_zero(float *p, int64_t n)
{
	int32_t zero = 0;

	/* a zero gcc cannot see, or it turns the loop into a memset call (a
	 * third of the kernel's time on 14x14 planes) */
	__asm__("" : "+r"(zero));
	vf8 z = (vf8)((vi8){0} + zero);

	for (int64_t i = 0; i < n; i += 8)
		vf_store(p + i, z);
}

/* n floats from x to d; n >= 8 takes an overlapping last vector. */
static inline __attribute__((always_inline)) void dw_copy(float *d, const float *x, int64_t n)
{
	int64_t i = 0;

	if (n < 8) {
		for (; i < n; i++)
			d[i] = x[i];
		return;
	}
	for (; i + 8 <= n; i += 8)
		vf_store(d + i, vf_load(x + i));
	if (i < n)
		vf_store(d + n - 8, vf_load(x + n - 8));
}

/* Row r of the padded plane (r in [0, s * R2)) into its phase rows at
 * base (phase (r % s, 0), row r / s): the image row x (or zeros outside
 * the image), split by column phase. */
static inline __attribute__((always_inline)) void dw_copy_row(const dw_job *d, const float *x,
							      int64_t r, float *base)
{
	const cpu_geom *g = &d->j->g;
	int64_t s = d->s, P2 = d->P2, IW = g->in[2], pl = g->pb[2];
	int64_t ir = r - g->pb[1];

	if (ir < 0 || ir >= g->in[1]) {
		for (int64_t q = 0; q < s; q++)
			dw_zero(base + q * d->phase_floats, P2);
		return;
	}
	x += ir * IW;
	if (s == 1) {
		if (IW >= 8) {
			dw_zero(base, pl);
			dw_copy(base + pl, x, IW);
			dw_zero(base + pl + IW, P2 - pl - IW);
		} else {
			dw_zero(base, P2);
			dw_copy(base + pl, x, IW);
		}
		return;
	}
	for (int64_t q = 0; q < s; q++)
		dw_zero(base + q * d->phase_floats, P2);
	/* Image column i is padded column pl + i: phase (pl + i) % s at
	 * (pl + i) / s. */
	int64_t i = 0;

	if (s == 2) {
		float *ev = base + ((pl & 1) ? d->phase_floats : 0) + pl / 2;
		float *od = base + ((pl & 1) ? 0 : d->phase_floats) + (pl + 1) / 2;

		for (; i + 16 <= IW; i += 16) {
			vf8 a = vf_load(x + i), b = vf_load(x + i + 8);

			vf_store(ev + i / 2, __builtin_shuffle(a, b, (vi8){0, 2, 4, 6, 8, 10, 12, 14}));
			vf_store(od + i / 2, __builtin_shuffle(a, b, (vi8){1, 3, 5, 7, 9, 11, 13, 15}));
		}
	}
	/* the rest (all of a row narrower than 16, or any stride above 2)
	 * with the phase and column carried along: no division per float */
	for (int64_t q = (pl + i) % s, c = (pl + i) / s; i < IW; i++) {
		base[q * d->phase_floats + c] = x[i];
		if (++q == s) {
			q = 0;
			c++;
		}
	}
}

/* n flat outputs (a multiple of 8) from xp into t: bias plus the taps,
 * DW_STEP at a time, the rest a vector at a time (the planes of late
 * layers hold a few dozen outputs: rounding them up to DW_STEP wasted a
 * third of the work at 2x6).  T is the tap count (at most DW_TAPS); the
 * weights are splat into registers once. */
#define DW_TAPS 49
static inline __attribute__((always_inline)) void
dw_flat(const float *xp, const int64_t *off, const float *w, float bias, float *t, int64_t n,
	int T)
{
	vf8 wv[DW_TAPS];

	int64_t f = 0;

	for (int k = 0; k < T; k++)
		wv[k] = vf_splat(0.0f) + w[k];
	for (; f + DW_STEP <= n; f += DW_STEP) {
		vf8 a[8];

		for (int v = 0; v < 8; v++)
			a[v] = vf_splat(0.0f) + bias;
#pragma GCC unroll 49
		for (int k = 0; k < T; k++) {
			const float *p = xp + off[k] + f;

#pragma GCC unroll 8
			for (int v = 0; v < 8; v++)
				a[v] += wv[k] * vf_load(p + 8 * v);
		}
		for (int v = 0; v < 8; v++)
			vf_store(t + f + 8 * v, a[v]);
	}
	for (; f < n; f += 8) {
		vf8 a0 = vf_splat(0.0f) + bias;

#pragma GCC unroll 49
		for (int k = 0; k < T; k++)
			a0 += wv[k] * vf_load(xp + off[k] + f);
		vf_store(t + f, a0);
	}
}

/* The same for any tap count, weights read from memory. */
static void dw_flat_any(const float *xp, const int64_t *off, const float *w, int64_t taps,
			float bias, float *t, int64_t n)
{
	n = (n + 31) / 32 * 32;
	for (int64_t f = 0; f < n; f += 32) {
		vf8 a0 = vf_splat(0.0f) + bias, a1 = a0, a2 = a0, a3 = a0;

		for (int64_t k = 0; k < taps; k++) {
			const float *p = xp + off[k] + f;
			vf8 wk = vf_splat(0.0f) + w[k];

			a0 += wk * vf_load(p);
			a1 += wk * vf_load(p + 8);
			a2 += wk * vf_load(p + 16);
			a3 += wk * vf_load(p + 24);
		}
		vf_store(t + f, a0);
		vf_store(t + f + 8, a1);
		vf_store(t + f + 16, a2);
		vf_store(t + f + 24, a3);
	}
}

/* One pair of rows of dw_pairs, 8 x V columns an iteration: 2 x V
 * independent sums, enough multiply-add chains in flight to hide their
 * latency (with 2 x 2 the loop waited on it: 2.4x slower than the FMA
 * throughput on 112x112 planes). */
static inline __attribute__((always_inline)) void
dw_pair_row(const float *x0, int64_t P, const vf8 *wv, float bias, float *t0, int K, const int V)
{
	for (int64_t f = 0; f < P; f += 8 * V) {
		vf8 a[4], b[4];

		for (int v = 0; v < V; v++)
			a[v] = b[v] = vf_splat(0.0f) + bias;
#pragma GCC unroll 6
		for (int i = 0; i <= K; i++)
#pragma GCC unroll 5
			for (int c = 0; c < K; c++)
#pragma GCC unroll 4
				for (int v = 0; v < V; v++) {
					vf8 l = vf_load(x0 + i * P + c + f + 8 * v);

					if (i < K)
						a[v] += wv[i * K + c] * l;
					if (i >= 1)
						b[v] += wv[(i - 1) * K + c] * l;
				}
		for (int v = 0; v < V; v++) {
			vf_store(t0 + f + 8 * v, a[v]);
			vf_store(t0 + P + f + 8 * v, b[v]);
		}
	}
}

/* Stride 1, K x K taps without dilation, on rows of at least 16: two
 * output rows at a time share K - 1 of their K + 1 input rows, so each
 * input vector is loaded once for both ((K + 1) x K loads for 2 x K x K
 * multiply-adds, against 2 x K x K one row at a time: on the large
 * planes of early layers the loads, half of them split across cache
 * lines, were the bound).  Each sum takes its taps in dw_flat's order, so
 * the bits are the same; the last vector of a row runs into the next row,
 * whose outputs those are in the flat layout, computed the same way.  An
 * odd last row goes through dw_flat. */
static inline __attribute__((always_inline)) void
dw_pairs(const float *xp, int64_t P, int64_t rows, const int64_t *off, const float *w, float bias,
	 float *t, int K)
{
	vf8 wv[DW_TAPS];
	int64_t r = 0;

	for (int k = 0; k < K * K; k++)
		wv[k] = vf_splat(0.0f) + w[k];
	for (; r + 2 <= rows; r += 2) {
		const float *x0 = xp + r * P;
		float *t0 = t + r * P;

		if (P >= 32)
			dw_pair_row(x0, P, wv, bias, t0, K, 4);
		else
			dw_pair_row(x0, P, wv, bias, t0, K, 2);
	}
	if (r < rows)
		dw_flat(xp + r * P, off, w, bias, t + r * P, (P + 7) / 8 * 8, K * K);
}

/* Rows of t (pitch P) into y (pitch OW) with the residual and the clamp
 * (Relu: [0, inf], a fused Clip: its bounds; NaN kept, as the separate
 * ops keep it).
 * Without a residual a row's last vector may overlap the one before (the
 * same values stored twice), and a row shorter than a vector is stored
 * whole, spilling into the next row, which is written after it, except in
 * the plane's last row (last: whether these rows end the plane).  With a
 * residual neither (y may be the residual itself): the tail is done a
 * float at a time. */
static inline __attribute__((always_inline)) void
dw_store_rows(const float *t, int64_t P, int64_t rows, int64_t OW, const float *res,
	      const dw_job *d, float *y, int last)
{
	int clamp = d->clamp;
	vf8 lo = vf_splat(d->lo), hi = vf_splat(d->hi);

	for (int64_t r = 0; r < rows; r++, t += P, y += OW, res = res ? res + OW : NULL) {
		int64_t i = 0;

		if (!res && (OW >= 8 || r + 1 < rows || !last)) {
			for (;; i += 8) {
				if (i + 8 > OW)
					i = OW >= 8 ? OW - 8 : 0;
				vf8 v = vf_load(t + i);

				if (clamp) {
					v = vf_sel(v < lo, lo, v);
					v = vf_sel(v > hi, hi, v);
				}
				vf_store(y + i, v);
				if (i + 8 >= OW)
					break;
			}
			continue;
		}
		for (; i + 8 <= OW; i += 8) {
			vf8 v = vf_load(t + i);

			if (res)
				v += vf_load(res + i);
			if (clamp) {
				v = vf_sel(v < lo, lo, v);
				v = vf_sel(v > hi, hi, v);
			}
			vf_store(y + i, v);
		}
		for (; i < OW; i++) {
			float v = t[i] + (res ? res[i] : 0.0f);

			y[i] = !clamp ? v : v < d->lo ? d->lo : v > d->hi ? d->hi : v;
		}
	}
}

/* One plane: the padded phases are in buf, the strips' results go through
 * t (DW_STRIP + DW_STEP floats). */
CPU_MULTIVERSION
static void dw_plane(const dw_job *d, const float *x, float *buf, const float *w, float bias,
		     const float *res, float *y, float *t)
{
	const cpu_geom *g = &d->j->g;
	int64_t OH = g->out[1], OW = g->out[2], P = d->P2;

	if (d->s == 1)
		for (int64_t r = 0; r < d->R2; r++)
			dw_copy_row(d, x, r, buf + r * P);
	else
		for (int64_t r = 0; r < d->s * d->R2; r++)
			dw_copy_row(d, x, r,
				    buf + (r % d->s) * d->s * d->phase_floats + (r / d->s) * P);

	for (int64_t oh = 0; oh < OH; oh += d->strip) {
		int64_t rows = OH - oh < d->strip ? OH - oh : d->strip;
		int64_t n = (rows * P + 7) / 8 * 8;
		const float *xp = buf + oh * P;

		if (d->pairs == 3)
			dw_pairs(xp, P, rows, d->off, w, bias, t, 3);
		else if (d->pairs == 5)
			dw_pairs(xp, P, rows, d->off, w, bias, t, 5);
		else if (d->taps == 9)
			dw_flat(xp, d->off, w, bias, t, n, 9);
		else if (d->taps == 25)
			dw_flat(xp, d->off, w, bias, t, n, 25);
		else if (d->taps == 49)
			dw_flat(xp, d->off, w, bias, t, n, 49);
		else if (d->taps == 3)
			dw_flat(xp, d->off, w, bias, t, n, 3);
		else if (d->taps == 5)
			dw_flat(xp, d->off, w, bias, t, n, 5);
		else
			dw_flat_any(xp, d->off, w, d->taps, bias, t, n);
		dw_store_rows(t, P, rows, OW, res ? res + oh * OW : NULL, d, y + oh * OW,
			      oh + rows == OH);
	}
}

static void dw_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const dw_job *d = arg;
	const conv_job *j = d->j;
	const cpu_geom *g = &j->g;
	int64_t isz = g->in[1] * g->in[2];
	float *buf = d->buf + member * d->buf_floats;
	float *t = buf + d->s * d->s * d->phase_floats;

	/* the slack after each phase plane: read for dropped outputs only,
	 * zeroed so that no garbage (a denormal, a NaN) slows them down */
	for (int64_t ph = 0; ph < d->s * d->s; ph++)
		memset(buf + ph * d->phase_floats + d->R2 * d->P2, 0,
		       (size_t)(d->phase_floats - d->R2 * d->P2) * sizeof(float));
	for (int64_t p = p0; p < p1; p++) {
		int64_t c = p % d->channels;
		const float *res = j->res ? (const float *)j->res->data + p * j->osz : NULL;

		dw_plane(d, d->x + p * isz, buf, d->w + c * d->taps, d->b ? d->b[c] : 0.0f, res, d->y + p * j->osz, t);
		if (d->act)
			cpu_fuse_act_apply(d->act, d->y + p * j->osz, j->osz);
	}
}

int conv_dw_fits(const conv_job *j)
{
	return j->g.k[0] == 1 && j->g.in[0] == 1 && j->g.out[0] == 1 && j->g.s[1] == j->g.s[2] &&
	       j->g.s[1] <= 4;
}

/* The phase planes' rows and pitch: every padded row and column a valid
 * output reads, and the image. */
static void dw_size(dw_job *d)
{
	const cpu_geom *g = &d->j->g;
	int64_t s = d->s;
	int64_t PH = (g->out[1] - 1) * s + (g->k[1] - 1) * g->d[1] + 1;
	int64_t PW = (g->out[2] - 1) * s + (g->k[2] - 1) * g->d[2] + 1;

	if (PH < g->pb[1] + g->in[1])
		PH = g->pb[1] + g->in[1];
	if (PW < g->pb[2] + g->in[2])
		PW = g->pb[2] + g->in[2];
	d->R2 = (PH + s - 1) / s;
	d->P2 = (PW + s - 1) / s;
	/* A flat run of a strip reads up to DW_STEP - 1 outputs past its last
	 * row and a tap's column offset past that: the slack after each phase
	 * plane keeps it inside the buffer (what it reads there is dropped). */
	d->phase_floats = d->R2 * d->P2 + d->P2 + DW_STEP;
}

/* Tap (a, b) reads padded row s * oh + a * dh: phase row (a * dh) % s,
 * (a * dh) / s rows down; the same for columns. */
static void dw_offsets(const dw_job *d, int64_t *off)
{
	const cpu_geom *g = &d->j->g;
	int64_t s = d->s;

	for (int64_t a = 0; a < g->k[1]; a++)
		for (int64_t b = 0; b < g->k[2]; b++) {
			int64_t r = a * g->d[1], c = b * g->d[2];

			off[a * g->k[2] + b] = ((r % s) * s + c % s) * d->phase_floats +
					       (r / s) * d->P2 + c / s;
		}
}

int conv_dw_run(cpu_ctx *ctx, const conv_job *j, const float *x, const float *w,
		const float *b, float *y, int64_t planes, int64_t channels)
{
	const cpu_geom *g = &j->g;
	int members = cpu_par_members(ctx);
	dw_job d = {.j = j, .x = x, .w = w, .b = b, .y = y, .channels = channels, .s = g->s[1]};
	int64_t OH = g->out[1], OW = g->out[2];

	d.taps = g->k[1] * g->k[2];
	d.off = cpu_scratch(ctx, (size_t)d.taps * sizeof(int64_t));
	if (!d.off)
		return CPU_E_NOMEM;
	dw_size(&d);
	dw_offsets(&d, d.off);
	d.strip = DW_STRIP / d.P2 > 0 ? DW_STRIP / d.P2 : 1;
	d.act = j->act;
	if (j->relu || (j->act && j->act->act == CPU_FUSE_ACT_CLIP)) {
		d.clamp = 1;
		d.lo = j->relu ? 0.0f : j->act->act_a;
		d.hi = j->relu ? INFINITY : j->act->act_b;
		d.act = NULL;
	}
	if (d.s == 1 && g->d[1] == 1 && g->d[2] == 1 && g->k[1] == g->k[2] &&
	    (g->k[1] == 3 || g->k[1] == 5) && d.P2 >= 16)
		d.pairs = (int)g->k[1];
	/* the phases, then the strip's results */
	d.buf_floats = (d.s * d.s * d.phase_floats + d.strip * d.P2 + 2 * DW_STEP + 15) / 16 * 16;
	d.buf = cpu_scratch(ctx, (size_t)members * (size_t)d.buf_floats * sizeof(float));
	if (!d.buf)
		return CPU_E_NOMEM;
	/* ~0.15 ns a multiply-add on one core, plus the copy */
	cpu_par_for(ctx, planes,
		    0.15 * (double)(OH * OW * d.taps) + 0.3 * (double)(d.s * d.s * d.phase_floats), 1,
		    dw_range, &d);
	return 0;
}
