/*
 * qlinear_pool: com.microsoft QLinearGlobalAveragePool, QLinearAveragePool
 * (uint8/int8, per-tensor scales, channels_last 0 or 1, 1-D to 3-D
 * windows, pads, strides, auto_pad, ceil_mode, count_include_pad) and
 * NhwcMaxPool (uint8/int8 in NHWC, with dilations).
 *
 * The averages follow ONNX Runtime's arithmetic, so the bytes match:
 *  - the global pool (and an AveragePool whose window is the whole
 *    unpadded image, which ONNX Runtime sends down the same path) sums the
 *    integers and requantizes once: round((sum - x_zp n) * s) + y_zp with
 *    s = x_scale / (y_scale * n);
 *  - the windowed pool dequantizes every value to float32, sums a window
 *    in memory order (row, column, depth), divides by the window's count
 *    (the kernel's size with count_include_pad, whatever the padding; else
 *    the positions inside the image) and quantizes round(y / y_scale +
 *    y_zp).  Windows are not dilated: the op has no dilations.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "msq.h"
#include "par.h"

/* X, x_scale, x_zero_point, y_scale, y_zero_point */
#define QP_Q8 (CPU_BIT(0) | CPU_BIT(2) | CPU_BIT(4))

/* A tensor as batch x channels x (up to 3) spatial dims, either layout. */
typedef struct qp_layout {
	int nsp, last;
	int64_t n, c, sp[3], spn;
} qp_layout;

static int qp_layout_of(cpu_ctx *ctx, const cpu_tensor *x, int last, qp_layout *l)
{
	if (x->rank < 3 || x->rank > 5)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "input rank %d: 1 to 3 spatial dims are "
				"supported", x->rank);
	l->nsp = x->rank - 2;
	l->last = last;
	l->n = x->dims[0];
	l->c = last ? x->dims[x->rank - 1] : x->dims[1];
	l->spn = 1;
	for (int i = 0; i < l->nsp; i++) {
		l->sp[i] = x->dims[last ? 1 + i : 2 + i];
		l->spn *= l->sp[i];
	}
	return 0;
}

/* Output dims for spatial dims out (the layout of l). */
static void qp_out_dims(const qp_layout *l, const int64_t *out, int64_t *dims)
{
	dims[0] = l->n;
	dims[l->last ? l->nsp + 1 : 1] = l->c;
	for (int i = 0; i < l->nsp; i++)
		dims[l->last ? 1 + i : 2 + i] = out[i];
}

typedef struct qp_params {
	float xs, ys;
	int32_t xz, yz, dt;
} qp_params;

static int qp_load(cpu_ctx *ctx, const cpu_tensor *x, qp_params *q)
{
	int rc;

	q->dt = x->dtype;
	if ((rc = cpu_check_dtype(ctx, x, 0, MSQ_Q8)) ||
	    (rc = msq_scale(ctx, 1, "x_scale", &q->xs)) ||
	    (rc = msq_zero_point(ctx, 2, "x_zero_point", x->dtype, &q->xz)) ||
	    (rc = msq_scale(ctx, 3, "y_scale", &q->ys)) ||
	    (rc = msq_zero_point(ctx, 4, "y_zero_point", x->dtype, &q->yz)))
		return rc;
	return 0;
}

static inline int32_t qp_get(int32_t dt, const uint8_t *p, int64_t i)
{
	return dt == CPU_INT8 ? (int32_t)((const int8_t *)p)[i] : (int32_t)p[i];
}

static inline uint8_t qp_sat(int32_t dt, int32_t v)
{
	int32_t lo = dt == CPU_INT8 ? -128 : 0, hi = dt == CPU_INT8 ? 127 : 255;

	return (uint8_t)(v < lo ? lo : v > hi ? hi : v);
}

/* The integer global average over the spatial dims of l into y (N x C in
 * the element order of l's layout with one pixel). */
static void qp_global(const qp_layout *l, const qp_params *q, const uint8_t *x, uint8_t *y)
{
	float s = q->xs / (q->ys * (float)l->spn);
	int32_t bias = -q->xz * (int32_t)l->spn;

	for (int64_t n = 0; n < l->n; n++)
		for (int64_t c = 0; c < l->c; c++) {
			int32_t acc = 0;
			const uint8_t *p = x + n * l->c * l->spn + (l->last ? c : c * l->spn);
			int64_t step = l->last ? l->c : 1;
			float v;

			for (int64_t i = 0; i < l->spn; i++)
				acc += qp_get(q->dt, p, i * step);
			v = (float)(acc + bias) * s;
			y[n * l->c + c] = qp_sat(q->dt, (int32_t)nearbyintf(v) + q->yz);
		}
}

static int gap_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x;
	int64_t ones[3] = {1, 1, 1}, dims[CPU_MAX_RANK];
	qp_layout l;
	qp_params q;
	cpu_tensor *y;
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)) || (rc = qp_load(ctx, x, &q)) ||
	    (rc = qp_layout_of(ctx, x, cpu_attr_int(ctx->node->proto, "channels_last", 0) != 0, &l)))
		return rc;
	qp_out_dims(&l, ones, dims);
	if (!(y = cpu_output(ctx, 0, x->dtype, x->rank, dims)))
		return CPU_E_NOMEM;
	qp_global(&l, &q, x->data, y->data);
	return 0;
}

static int qp_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	const int64_t *v;
	size_t nd = cpu_attr_ints(p, "dilations", &v);

	(void)opset;
	if (!strcmp(p->op_type, "QLinearAveragePool"))
		for (size_t i = 0; i < nd; i++)
			if (v[i] != 1) {
				snprintf(why, n, "attribute 'dilations' is not part of "
					 "QLinearAveragePool (only 1 is accepted)");
				return 0;
			}
	return msq_supports_q8(dt, n_in, QP_Q8, why, n);
}

/* Geometry of a windowed pool over layout l.  SAME_UPPER / SAME_LOWER
 * with a dilated window: ONNX Runtime sizes the padding from the
 * undilated kernel, then the output from that padding and the dilated
 * window; so does this, for the same output shape. */
static int qp_geom(cpu_ctx *ctx, const qp_layout *l, cpu_geom *g)
{
	cpu_window w;
	char err[160];

	if (cpu_window_parse(ctx->node->proto, &w, err, sizeof(err)) ||
	    cpu_window_geom(&w, l->nsp, l->sp, NULL, g, err, sizeof(err)))
		return cpu_fail(ctx, CPU_E_INVALID, "%s", err);
	if (w.auto_pad != CPU_PAD_SAME_UPPER && w.auto_pad != CPU_PAD_SAME_LOWER)
		return 0;
	for (int s = 3 - l->nsp; s < 3; s++) {
		int64_t pad = ((g->in[s] + g->s[s] - 1) / g->s[s] - 1) * g->s[s] + g->k[s] - g->in[s];

		pad = pad > 0 ? pad : 0;
		g->pb[s] = w.auto_pad == CPU_PAD_SAME_LOWER ? (pad + 1) / 2 : pad / 2;
		g->pe[s] = pad - g->pb[s];
		g->out[s] = (g->in[s] + pad - g->d[s] * (g->k[s] - 1) - 1) / g->s[s] + 1;
		if (g->out[s] < 1)
			return cpu_fail(ctx, CPU_E_INVALID, "the window is larger than the input");
	}
	return 0;
}

typedef struct avg_job {
	const qp_layout *l;
	const cpu_geom *g;
	const qp_params *q;
	const float *xf;
	uint8_t *y;
	int include_pad;
	int64_t ksize, osp;
} avg_job;

/* Output pixels [b, e) of every (batch, channel) plane: item = (n, c). */
static void avg_planes(void *arg, int64_t b, int64_t e, int member)
{
	const avg_job *j = arg;
	const qp_layout *l = j->l;
	const cpu_geom *g = j->g;
	int64_t cs = l->last ? 1 : l->spn, ps = l->last ? l->c : 1;   /* channel, pixel strides */

	(void)member;
	for (int64_t it = b; it < e; it++) {
		int64_t n = it / l->c, c = it % l->c, o = 0;
		const float *x = j->xf + n * l->c * l->spn + c * cs;
		uint8_t *y = j->y + n * l->c * j->osp + (l->last ? c : c * j->osp);

		for (int64_t o0 = 0; o0 < g->out[0]; o0++)
		for (int64_t o1 = 0; o1 < g->out[1]; o1++)
		for (int64_t o2 = 0; o2 < g->out[2]; o2++, o++) {
			int64_t s0 = o0 * g->s[0] - g->pb[0], s1 = o1 * g->s[1] - g->pb[1];
			int64_t s2 = o2 * g->s[2] - g->pb[2];
			int64_t e0 = s0 + g->k[0] < g->in[0] ? s0 + g->k[0] : g->in[0];
			int64_t e1 = s1 + g->k[1] < g->in[1] ? s1 + g->k[1] : g->in[1];
			int64_t e2 = s2 + g->k[2] < g->in[2] ? s2 + g->k[2] : g->in[2];
			float sum = 0.0f;
			int64_t cnt;

			s0 = s0 > 0 ? s0 : 0;
			s1 = s1 > 0 ? s1 : 0;
			s2 = s2 > 0 ? s2 : 0;
			for (int64_t i0 = s0; i0 < e0; i0++)
				for (int64_t i1 = s1; i1 < e1; i1++)
					for (int64_t i2 = s2; i2 < e2; i2++)
						sum += x[((i0 * g->in[1] + i1) * g->in[2] + i2) * ps];
			cnt = j->include_pad ? j->ksize : (e0 - s0) * (e1 - s1) * (e2 - s2);
			sum /= (float)cnt;
			y[o * ps] = qp_sat(j->q->dt, (int32_t)nearbyintf(sum / j->q->ys +
								    (float)j->q->yz));
		}
	}
}

static int avg_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *x;
	int64_t dims[CPU_MAX_RANK], out[3], nx;
	int global = 1, rc = 0;
	qp_layout l;
	qp_params q;
	cpu_geom g;
	cpu_tensor *y;
	avg_job j;
	float *xf;

	if (!(x = cpu_require(ctx, 0, &rc)) || (rc = qp_load(ctx, x, &q)) ||
	    (rc = qp_layout_of(ctx, x, cpu_attr_int(p, "channels_last", 0) != 0, &l)) ||
	    (rc = qp_geom(ctx, &l, &g)))
		return rc;
	for (int i = 0; i < l.nsp; i++) {
		int s = 3 - l.nsp + i;
		out[i] = g.out[s];
		global &= g.k[s] == g.in[s] && g.pb[s] == 0 && g.pe[s] == 0;
	}
	qp_out_dims(&l, out, dims);
	if (!(y = cpu_output(ctx, 0, x->dtype, x->rank, dims)))
		return CPU_E_NOMEM;
	if (global) {
		qp_global(&l, &q, x->data, y->data);
		return 0;
	}
	nx = cpu_numel(x);
	if (!(xf = cpu_scratch(ctx, (size_t)(nx ? nx : 1) * sizeof(float))))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < nx; i++)
		xf[i] = q.xs * (float)(qp_get(q.dt, x->data, i) - q.xz);
	memset(&j, 0, sizeof(j));
	j.l = &l;
	j.g = &g;
	j.q = &q;
	j.xf = xf;
	j.y = y->data;
	j.include_pad = cpu_attr_int(p, "count_include_pad", 0) != 0;
	j.ksize = g.k[0] * g.k[1] * g.k[2];
	j.osp = g.out[0] * g.out[1] * g.out[2];
	cpu_par_for(ctx, l.n * l.c, (double)j.osp * (double)j.ksize, 1, avg_planes, &j);
	return 0;
}

typedef struct max_job {
	const qp_layout *l;
	const cpu_geom *g;
	const uint8_t *x;
	uint8_t *y;
	int32_t dt;
	int64_t osp;
} max_job;

static void max_planes(void *arg, int64_t b, int64_t e, int member)
{
	const max_job *j = arg;
	const qp_layout *l = j->l;
	const cpu_geom *g = j->g;

	(void)member;
	for (int64_t it = b; it < e; it++) {
		int64_t n = it / l->c, c = it % l->c, o = 0;
		const uint8_t *x = j->x + n * l->c * l->spn + c;
		uint8_t *y = j->y + n * l->c * j->osp + c;

		for (int64_t o0 = 0; o0 < g->out[0]; o0++)
		for (int64_t o1 = 0; o1 < g->out[1]; o1++)
		for (int64_t o2 = 0; o2 < g->out[2]; o2++, o++) {
			int32_t m = j->dt == CPU_INT8 ? -128 : 0;

			for (int64_t k0 = 0; k0 < g->k[0]; k0++) {
				int64_t i0 = o0 * g->s[0] - g->pb[0] + k0 * g->d[0];
				if (i0 < 0 || i0 >= g->in[0])
					continue;
				for (int64_t k1 = 0; k1 < g->k[1]; k1++) {
					int64_t i1 = o1 * g->s[1] - g->pb[1] + k1 * g->d[1];
					if (i1 < 0 || i1 >= g->in[1])
						continue;
					for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
						int64_t i2 = o2 * g->s[2] - g->pb[2] + k2 * g->d[2];
						int32_t v;
						if (i2 < 0 || i2 >= g->in[2])
							continue;
						v = qp_get(j->dt, x, ((i0 * g->in[1] + i1) * g->in[2] + i2) *
							   l->c);
						m = v > m ? v : m;
					}
				}
			}
			y[o * l->c] = (uint8_t)m;
		}
	}
}

static int maxpool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			    char *why, size_t n)
{
	(void)opset;
	if (!cpu_attr(p, "kernel_shape")) {
		snprintf(why, n, "attribute 'kernel_shape' is required");
		return 0;
	}
	return msq_supports_q8(dt, n_in, CPU_BIT(0), why, n);
}

static int maxpool_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x;
	int64_t dims[CPU_MAX_RANK], out[3];
	qp_layout l;
	cpu_geom g;
	cpu_tensor *y;
	max_job j;
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, x, 0, MSQ_Q8)) ||
	    (rc = qp_layout_of(ctx, x, 1, &l)) || (rc = qp_geom(ctx, &l, &g)))
		return rc;
	for (int i = 0; i < l.nsp; i++)
		out[i] = g.out[3 - l.nsp + i];
	qp_out_dims(&l, out, dims);
	if (!(y = cpu_output(ctx, 0, x->dtype, x->rank, dims)))
		return CPU_E_NOMEM;
	j.l = &l;
	j.g = &g;
	j.x = x->data;
	j.y = y->data;
	j.dt = x->dtype;
	j.osp = g.out[0] * g.out[1] * g.out[2];
	cpu_par_for(ctx, l.n * l.c, (double)j.osp * (double)(g.k[0] * g.k[1] * g.k[2]), 1,
		    max_planes, &j);
	return 0;
}

const cpu_op cpu_op_msq_qlinearglobalaveragepool = {
	"QLinearGlobalAveragePool", "com.microsoft", 1, CPU_OPSET_MAX, qp_supports, NULL,
	gap_compute, NULL,
};
const cpu_op cpu_op_msq_qlinearaveragepool = {
	"QLinearAveragePool", "com.microsoft", 1, CPU_OPSET_MAX, qp_supports, NULL, avg_compute,
	NULL,
};
const cpu_op cpu_op_msq_nhwcmaxpool = {
	"NhwcMaxPool", "com.microsoft", 1, CPU_OPSET_MAX, maxpool_supports, NULL, maxpool_compute,
	NULL,
};
