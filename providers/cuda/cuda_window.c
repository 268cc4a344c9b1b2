/*
 * cuda_window: window geometry shared by Conv and the pools (see
 * cuda_window.h).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_window.h"

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

static int auto_pad(const Onnx__NodeProto *p)
{
	if (!ep_attr(p, "auto_pad") || ep_attr_is(p, "auto_pad", "NOTSET") ||
	    ep_attr_is(p, "auto_pad", ""))
		return PAD_NOTSET;
	if (ep_attr_is(p, "auto_pad", "SAME_UPPER"))
		return PAD_SAME_UPPER;
	if (ep_attr_is(p, "auto_pad", "SAME_LOWER"))
		return PAD_SAME_LOWER;
	if (ep_attr_is(p, "auto_pad", "VALID"))
		return PAD_VALID;
	return -1;
}

/* A per-spatial-dim attribute: absent, or `want` values (any count when
 * want < 0) in [lo, INT32_MAX]. */
static int ints_ok(const Onnx__NodeProto *p, const char *name, int want, int64_t lo)
{
	const int64_t *v;
	int cnt = ep_attr_ints(p, name, &v);

	if (cnt < 0)
		return 1;
	if (want >= 0 && cnt != want)
		return 0;
	for (int i = 0; i < cnt; i++)
		if (v[i] < lo || v[i] > INT32_MAX)
			return 0;
	return 1;
}

int cu_window_supports(const Onnx__NodeProto *p, char *why, size_t n)
{
	const int64_t *ks;
	int nk = ep_attr_ints(p, "kernel_shape", &ks);

	if (auto_pad(p) < 0)
		return snprintf(why, n, "unknown auto_pad"), 0;
	if (nk == 0 || nk > 3)
		return snprintf(why, n, "%d spatial dims (1 to 3 are supported)", nk), 0;
	if (!ints_ok(p, "kernel_shape", -1, 1) || !ints_ok(p, "strides", nk, 1) ||
	    !ints_ok(p, "dilations", nk, 1) || !ints_ok(p, "pads", nk < 0 ? -1 : 2 * nk, 0))
		return snprintf(why, n, "invalid kernel_shape, strides, dilations or pads"), 0;
	return 1;
}

static int64_t attr_at(const Onnx__NodeProto *p, const char *name, int i, int64_t dflt)
{
	const int64_t *v;
	int cnt = ep_attr_ints(p, name, &v);

	return cnt > i ? v[i] : dflt;
}

/* Output size and pads of one spatial dim (slot j, tensor dim i). */
static int dim_geom(const Onnx__NodeProto *p, int mode, int nsp, int i, int j, cuk_window *g)
{
	int64_t in = g->in[j], s = g->s[j], eff = (g->k[j] - 1) * g->d[j] + 1, total;

	if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
		g->out[j] = (in + s - 1) / s;
		total = (g->out[j] - 1) * s + eff - in;
		total = total < 0 ? 0 : total;
		g->pb[j] = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
		g->pe[j] = total - g->pb[j];
		return 0;
	}
	g->pb[j] = mode == PAD_VALID ? 0 : attr_at(p, "pads", i, 0);
	g->pe[j] = mode == PAD_VALID ? 0 : attr_at(p, "pads", nsp + i, 0);
	total = in + g->pb[j] + g->pe[j] - eff;
	if (total < 0)
		return -1;
	if (ep_attr_int(p, "ceil_mode", 0) && mode == PAD_NOTSET) {
		g->out[j] = (total + s - 1) / s + 1;
		if ((g->out[j] - 1) * s >= in + g->pb[j])
			g->out[j]--;
	} else {
		g->out[j] = total / s + 1;
	}
	return 0;
}

int cu_window_geometry(cu_ctx *c, const cu_val *x, const int64_t *kern, cuk_window *g, int *nspp)
{
	const Onnx__NodeProto *p = c->node->proto;
	int nsp = x->rank - 2, mode = auto_pad(p);
	const int64_t *v;
	int nk = ep_attr_ints(p, "kernel_shape", &v);

	if (nsp < 1 || nsp > 3)
		return cu_fail(c, EP_E_UNSUPPORTED, "input rank %d (1 to 3 spatial dims are supported)",
			       x->rank);
	if ((nk >= 0 && nk != nsp) || !ints_ok(p, "strides", nsp, 1) ||
	    !ints_ok(p, "dilations", nsp, 1) || !ints_ok(p, "pads", 2 * nsp, 0))
		return cu_fail(c, EP_E_INVALID, "attributes do not match %d spatial dims", nsp);
	memset(g, 0, sizeof(*g));
	*nspp = nsp;
	for (int j = 0; j < 3; j++) {
		int i = j - (3 - nsp);

		g->in[j] = g->out[j] = g->k[j] = g->s[j] = g->d[j] = 1;
		if (i < 0)
			continue;
		g->in[j] = x->dims[2 + i];
		g->k[j] = kern[i];
		g->s[j] = attr_at(p, "strides", i, 1);
		g->d[j] = attr_at(p, "dilations", i, 1);
		if (attr_at(p, "kernel_shape", i, kern[i]) != kern[i] || kern[i] < 1)
			return cu_fail(c, EP_E_INVALID, "kernel dim %d is %lld", i, (long long)kern[i]);
		if (dim_geom(p, mode, nsp, i, j, g))
			return cu_fail(c, EP_E_INVALID, "window exceeds the padded input at dim %d", i);
	}
	return 0;
}
