/*
 * lppool: ONNX LpPool, (sum over the window of |x|^p)^(1/p), for 1 to 3
 * spatial dims with pads, strides, auto_pad and (opset 18) dilations and
 * ceil_mode; padding contributes nothing.  The window geometry is
 * window.c's (shared with Conv and the other pools).  Float types.
 */
#include <math.h>
#include <stdlib.h>

#include "tensor_ops.h"

#define LP_FLOATS (CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16))

static int lp_prepare(cpu_node *node, char *err, size_t n)
{
	cpu_window *w = calloc(1, sizeof(*w));
	int rc;
	if (!w)
		return CPU_E_NOMEM;
	if ((rc = cpu_window_parse(node->proto, w, err, n)) != 0) {
		free(w);
		return rc;
	}
	node->state = w;
	return 0;
}

static void lp_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* p: an int from opset 2, a float before. */
static double lp_p(const Onnx__NodeProto *p, int64_t opset)
{
	const Onnx__AttributeProto *a = cpu_attr(p, "p");
	if (!a)
		return 2.0;
	return opset < 2 ? (double)cpu_attr_float(p, "p", 2.0f) : (double)cpu_attr_int(p, "p", 2);
}

/* One output value at window origin (z, y, x) of a plane. */
static double lp_window(const cpu_geom *g, const cpu_tensor *X, int64_t base, const int64_t *o,
			double p)
{
	double acc = 0;
	int64_t st[3];
	for (int i = 0; i < 3; i++)
		st[i] = o[i] * g->s[i] - g->pb[i];
	for (int64_t a = 0; a < g->k[0]; a++) {
		int64_t z = st[0] + a * g->d[0];
		if (z < 0 || z >= g->in[0])
			continue;
		for (int64_t b = 0; b < g->k[1]; b++) {
			int64_t y = st[1] + b * g->d[1];
			if (y < 0 || y >= g->in[1])
				continue;
			for (int64_t c = 0; c < g->k[2]; c++) {
				int64_t x = st[2] + c * g->d[2];
				if (x < 0 || x >= g->in[2])
					continue;
				acc += pow(fabs(cpu_get_f64(X->dtype, X->data,
							    base + (z * g->in[1] + y) * g->in[2] + x)), p);
			}
		}
	}
	return pow(acc, 1.0 / p);
}

static int lp_compute(cpu_ctx *ctx)
{
	const cpu_window *w = ctx->node->state;
	const cpu_tensor *X;
	int64_t dims[CPU_MAX_RANK], plane_in, plane_out;
	double p = lp_p(ctx->node->proto, ctx->node->opset);
	cpu_geom g;
	cpu_tensor *Y;
	int nsp, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, LP_FLOATS)))
		return rc;
	if (!w || X->rank < 3)
		return cpu_fail(ctx, CPU_E_INVALID, "X must be [N, C, spatial...]");
	if (!(p > 0))
		return cpu_fail(ctx, CPU_E_INVALID, "p must be positive");
	nsp = X->rank - 2;
	if ((rc = cpu_window_geom(w, nsp, X->dims + 2, NULL, &g, ctx->err, ctx->errlen)) != 0)
		return rc;
	dims[0] = X->dims[0];
	dims[1] = X->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[2 + i] = g.out[3 - nsp + i];
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	plane_in = g.in[0] * g.in[1] * g.in[2];
	plane_out = g.out[0] * g.out[1] * g.out[2];
	for (int64_t nc = 0; nc < X->dims[0] * X->dims[1]; nc++) {
		int64_t o[3], at = nc * plane_out;
		for (o[0] = 0; o[0] < g.out[0]; o[0]++)
			for (o[1] = 0; o[1] < g.out[1]; o[1]++)
				for (o[2] = 0; o[2] < g.out[2]; o[2]++)
					cpu_set_f64(Y->dtype, Y->data, at++,
						    lp_window(&g, X, nc * plane_in, o, p));
	}
	return 0;
}

static int lp_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, LP_FLOATS, why, n);
}

const cpu_op cpu_op_lppool = {
	"LpPool", "", 1, CPU_OPSET_MAX, lp_supports, lp_prepare, lp_compute, lp_release,
};
