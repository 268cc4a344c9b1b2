/*
 * resize: ONNX Resize (opsets 10 to 19+) and Upsample (7 to 9): parsing the
 * attributes once at prepare, and turning roi/scales/sizes (inputs, or an
 * attribute for Upsample-7) into the output size and the per-axis scale
 * the coordinate transforms use.  The interpolation is resize_apply.c.
 *
 * Where the spec is loose we follow the ONNX reference implementation
 * (onnx/reference/ops/op_resize.py), which made the conformance data:
 * output sizes from scales are floor(scale * size) without the roi factor,
 * align_corners and tf_crop_and_resize use scale * size (unrounded) as the
 * resized length, and keep_aspect_ratio_policy rounds half up.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "resize.h"

static int pick(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* String attribute name as an index into names, dflt when absent; -1 (with
 * err) for a value outside names. */
static int attr_enum(const Onnx__NodeProto *p, const char *name, const char *const *names,
		     int n, int dflt, char *err, size_t errlen)
{
	char buf[64];
	int v;
	if (!cpu_attr_str(p, name, buf, sizeof(buf)))
		return dflt;
	if ((v = pick(buf, names, n)) < 0)
		snprintf(err, errlen, "%s '%s' is not supported", name, buf);
	return v;
}

static int parse_params(const cpu_node *node, resize_params *r, char *err, size_t n)
{
	static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear", "trilinear"};
	static const char *const ctms[] = {
		"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
		"asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize",
	};
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	static const char *const pols[] = {"stretch", "not_larger", "not_smaller"};
	const Onnx__NodeProto *p = node->proto;
	const int64_t *axes;
	const float *sc;

	r->legacy = p->op_type[0] == 'U' || node->opset < 11;
	r->mode = attr_enum(p, "mode", modes, 5, RS_NEAREST, err, n);
	if (r->mode >= 3)
		r->mode = RS_LINEAR;
	if (r->mode < 0 || (r->legacy && r->mode == RS_CUBIC)) {
		if (r->mode == RS_CUBIC)
			snprintf(err, n, "mode 'cubic' needs Resize-11 or later");
		return CPU_E_INVALID;
	}
	r->ctm = r->legacy ? CT_ASYMMETRIC
			   : attr_enum(p, "coordinate_transformation_mode", ctms, 7, 0, err, n);
	r->nearest = r->legacy ? NM_SIMPLE : attr_enum(p, "nearest_mode", nms, 4, 0, err, n);
	r->policy = attr_enum(p, "keep_aspect_ratio_policy", pols, 3, 0, err, n);
	if (r->ctm < 0 || r->nearest < 0 || r->policy < 0)
		return CPU_E_INVALID;
	r->antialias = cpu_attr_int(p, "antialias", 0) != 0;
	r->exclude_outside = cpu_attr_int(p, "exclude_outside", 0) != 0;
	r->cubic_a = cpu_attr_float(p, "cubic_coeff_a", -0.75f);
	r->extrapolation = cpu_attr_float(p, "extrapolation_value", 0.0f);
	r->n_axes = (int)cpu_attr_ints(p, "axes", &axes);
	if (r->n_axes > CPU_MAX_RANK) {
		snprintf(err, n, "axes has more than %d values", CPU_MAX_RANK);
		return CPU_E_INVALID;
	}
	if (r->n_axes)
		memcpy(r->axes, axes, sizeof(int64_t) * (size_t)r->n_axes);
	if (p->op_type[0] == 'U' && node->opset < 9) {
		size_t ns = cpu_attr_floats(p, "scales", &sc);
		if (ns == 0 || ns > CPU_MAX_RANK) {
			snprintf(err, n, "attribute scales is required (at most %d values)", CPU_MAX_RANK);
			return CPU_E_INVALID;
		}
		r->n_attr_scales = (int)ns;
		for (size_t i = 0; i < ns; i++)
			r->attr_scales[i] = sc[i];
	}
	return 0;
}

static int resize_prepare(cpu_node *node, char *err, size_t n)
{
	resize_params *r = calloc(1, sizeof(*r));
	int rc;
	if (!r)
		return CPU_E_NOMEM;
	if ((rc = parse_params(node, r, err, n)) != 0) {
		free(r);
		return rc;
	}
	node->state = r;
	return 0;
}

static void resize_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* The resized axes (attribute axes or all), normalised; -1 on error. */
static int resolve_axes(cpu_ctx *ctx, const resize_params *p, int rank, int *axes)
{
	unsigned char seen[CPU_MAX_RANK] = {0};
	if (!p->n_axes) {
		for (int i = 0; i < rank; i++)
			axes[i] = i;
		return rank;
	}
	for (int i = 0; i < p->n_axes; i++) {
		axes[i] = cpu_norm_axis(p->axes[i], rank);
		if (axes[i] < 0 || seen[axes[i]]) {
			cpu_fail(ctx, CPU_E_INVALID, "axes[%d] = %lld is out of range or repeated", i,
				 (long long)p->axes[i]);
			return -1;
		}
		seen[axes[i]] = 1;
	}
	return p->n_axes;
}

/* Output sizes from requested sizes, with keep_aspect_ratio_policy. */
static void from_sizes(const resize_params *p, resize_geom *g, int na, const int *axes,
		       const int64_t *sizes)
{
	double s = 0;
	for (int i = 0; i < na; i++) {
		int d = axes[i];
		g->out[d] = sizes[i];
		g->scale[d] = g->in[d] ? (double)sizes[i] / (double)g->in[d] : 1.0;
		g->len[d] = (double)sizes[i];
		if (i == 0 || (p->policy == KA_NOT_LARGER ? g->scale[d] < s : g->scale[d] > s))
			s = g->scale[d];
	}
	if (p->policy == KA_STRETCH)
		return;
	for (int i = 0; i < na; i++) {
		int d = axes[i];
		g->scale[d] = s;
		g->out[d] = (int64_t)(s * (double)g->in[d] + 0.5);
		g->len[d] = s * (double)g->in[d];
	}
}

static int from_scales(cpu_ctx *ctx, resize_geom *g, int na, const int *axes, const double *sc)
{
	for (int i = 0; i < na; i++) {
		int d = axes[i];
		double len = sc[i] * (double)g->in[d];
		if (!(sc[i] > 0) || !(len < 4e18))
			return cpu_fail(ctx, CPU_E_INVALID, "scale %g on axis %d is not positive or "
					"too large", sc[i], d);
		g->scale[d] = sc[i];
		g->len[d] = len;
		g->out[d] = (int64_t)floor(len);
	}
	return 0;
}

/* Reads roi/scales/sizes as this opset places them. */
static int read_inputs(cpu_ctx *ctx, const resize_params *p, double *roi, int64_t *nroi,
		       double *sc, int64_t *nsc, int64_t *sizes, int64_t *nsz)
{
	const cpu_tensor *R = NULL, *S, *Z = NULL;
	*nroi = *nsc = *nsz = 0;
	if (p->n_attr_scales) {
		*nsc = p->n_attr_scales;
		memcpy(sc, p->attr_scales, sizeof(double) * (size_t)*nsc);
		return 0;
	}
	if (p->legacy) {
		S = cpu_input(ctx, 1);
	} else {
		R = cpu_input(ctx, 1);
		S = cpu_input(ctx, 2);
		Z = cpu_input(ctx, 3);
	}
	if (R && cpu_numel(R) > 0 && (*nroi = tensor_read_floats(R, roi, 2 * CPU_MAX_RANK)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "roi must be a 1-D float tensor of at most %d "
				"values", 2 * CPU_MAX_RANK);
	if (S && cpu_numel(S) > 0 && (*nsc = tensor_read_floats(S, sc, CPU_MAX_RANK)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "scales must be a 1-D float tensor of at most "
				"%d values", CPU_MAX_RANK);
	if (Z && cpu_numel(Z) > 0 && (*nsz = cpu_read_ints(Z, sizes, CPU_MAX_RANK)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "sizes must be a 1-D int64 tensor of at most "
				"%d values", CPU_MAX_RANK);
	return 0;
}

static int resize_geometry(cpu_ctx *ctx, const resize_params *p, const cpu_tensor *X,
			   resize_geom *g)
{
	double roi[2 * CPU_MAX_RANK], sc[CPU_MAX_RANK];
	int64_t sizes[CPU_MAX_RANK], nroi, nsc, nsz;
	int axes[CPU_MAX_RANK], na, rc;

	if ((rc = read_inputs(ctx, p, roi, &nroi, sc, &nsc, sizes, &nsz)) != 0)
		return rc;
	if ((na = resolve_axes(ctx, p, X->rank, axes)) < 0)
		return CPU_E_INVALID;
	if ((nsc > 0) == (nsz > 0))
		return cpu_fail(ctx, CPU_E_INVALID, "exactly one of scales and sizes must be given");
	if ((nsc && nsc != na) || (nsz && nsz != na) || (nroi && nroi != 2 * na))
		return cpu_fail(ctx, CPU_E_INVALID, "scales/sizes/roi do not match %d axes", na);
	g->rank = X->rank;
	for (int d = 0; d < X->rank; d++) {
		g->in[d] = g->out[d] = X->dims[d];
		g->scale[d] = 1.0;
		g->len[d] = (double)X->dims[d];
		g->roi_start[d] = 0.0;
		g->roi_end[d] = 1.0;
	}
	for (int i = 0; i < na && nroi; i++) {
		g->roi_start[axes[i]] = roi[i];
		g->roi_end[axes[i]] = roi[na + i];
	}
	for (int i = 0; i < nsz; i++)
		if (sizes[i] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "sizes[%d] = %lld is negative", i,
					(long long)sizes[i]);
	if (nsz)
		from_sizes(p, g, na, axes, sizes);
	else if ((rc = from_scales(ctx, g, na, axes, sc)) != 0)
		return rc;
	if (cpu_shape_numel(g->rank, g->out) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "output size overflows");
	return 0;
}

static int resize_compute(cpu_ctx *ctx)
{
	const resize_params *p = ctx->node->state;
	const cpu_tensor *X;
	resize_geom g;
	cpu_tensor *Y;
	int rc = 0;

	if (!p)
		return cpu_fail(ctx, CPU_E_INTERNAL, "Resize was not prepared");
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (X->dtype == CPU_STRING || cpu_dtype_size(X->dtype) == 0)
		return cpu_check_dtype(ctx, X, 0, CPU_TYPES_ALL & ~CPU_BIT(CPU_STRING));
	if (X->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "input must have rank >= 1");
	if ((rc = resize_geometry(ctx, p, X, &g)) != 0)
		return rc;
	if (cpu_numel(X) == 0 && cpu_shape_numel(g.rank, g.out) > 0)
		return cpu_fail(ctx, CPU_E_INVALID, "cannot resize an empty tensor to a non-empty one");
	if (!(Y = cpu_output(ctx, 0, X->dtype, g.rank, g.out)))
		return CPU_E_NOMEM;
	return resize_run(ctx, p, &g, X, Y);
}

static int resize_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			   int n_in, char *why, size_t n)
{
	cpu_node node = { .proto = p, .opset = opset };
	resize_params r;
	memset(&r, 0, sizeof(r));
	if (parse_params(&node, &r, why, n) != 0)
		return 0;
	return tensor_supports_any(p, opset, dt, n_in, why, n);
}

const cpu_op cpu_op_resize = {
	"Resize", "", 10, CPU_OPSET_MAX, resize_supports, resize_prepare, resize_compute,
	resize_release,
};
const cpu_op cpu_op_upsample = {
	"Upsample", "", 7, 10, resize_supports, resize_prepare, resize_compute, resize_release,
};
