/*
 * ep_shape: shape and attribute math shared by the device providers (see
 * ep_shape.h).
 */
#include <stdio.h>
#include <string.h>

#include "ep_shape.h"

/* ---- attributes ------------------------------------------------------------ */

int ep_attr_ints(const Onnx__NodeProto *p, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = ep_attr(p, name);

	if (!a)
		return -1;
	*v = a->ints;
	return (int)a->n_ints;
}

int ep_attr_is(const Onnx__NodeProto *p, const char *name, const char *want)
{
	const Onnx__AttributeProto *a = ep_attr(p, name);
	size_t n = strlen(want);

	return a && a->has_s && a->s.len == n && memcmp(a->s.data, want, n) == 0;
}

int ep_attr_unknown(const Onnx__NodeProto *p, const char *const *known, char *why, size_t n)
{
	for (size_t i = 0; i < p->n_attribute; i++) {
		const char *name = p->attribute[i]->name ? p->attribute[i]->name : "";
		int ok = 0;

		for (int k = 0; known[k] && !ok; k++)
			ok = strcmp(known[k], name) == 0;
		if (!ok) {
			snprintf(why, n, "attribute '%s' is not supported", name);
			return 1;
		}
	}
	return 0;
}

int ep_n_outputs(const Onnx__NodeProto *p)
{
	int n = 0;

	for (size_t i = 0; i < p->n_output; i++)
		n += p->output[i][0] != 0;
	return n;
}

/* ---- dims ------------------------------------------------------------------ */

int64_t ep_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

const char *ep_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t at = 0;

	at += (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < rank && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
	return buf;
}

int ep_axis(int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

int ep_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *out)
{
	int r = ra > rb ? ra : rb;

	if (r > EP_MAX_RANK)
		return -1;
	for (int i = 0; i < r; i++) {
		int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
		int64_t db = i < r - rb ? 1 : b[i - (r - rb)];

		if (da != db && da != 1 && db != 1)
			return -1;
		out[i] = da == 1 ? db : da;
	}
	*ro = r;
	return 0;
}

/* ---- view ops ---------------------------------------------------------------- */

int ep_view_node_ok(const Onnx__NodeProto *p, int64_t opset, char *why, size_t n)
{
	static const char *const reshape[] = {"allowzero", NULL}, *const flatten[] = {"axis", NULL};
	static const char *const axes[] = {"axes", NULL}, *const none[] = {NULL};
	const char *t = p->op_type;
	int two = !strcmp(t, "Reshape") || (opset >= 13 && !strcmp(t, "Unsqueeze"));
	int maybe = opset >= 13 && !strcmp(t, "Squeeze");
	const char *const *known = !strcmp(t, "Reshape") ? reshape : !strcmp(t, "Flatten") ? flatten
				   : (!strcmp(t, "Squeeze") || !strcmp(t, "Unsqueeze")) ? axes : none;

	if (p->n_input < 1 || !p->input[0][0] || p->n_output != 1 ||
	    ((int)p->n_input != 1 + two && !(maybe && p->n_input == 2)))
		return snprintf(why, n, "unexpected inputs or outputs"), 0;
	if (two && !p->input[1][0])
		return snprintf(why, n, "input 1 is required"), 0;
	return !ep_attr_unknown(p, known, why, n);
}

int ep_reshape_dims(int rank, const int64_t *dims, int64_t numel, const int64_t *s, int r,
		    int allowzero, int64_t *od, char *err, size_t n)
{
	int64_t known = 1;
	int neg = -1;

	if (r < 0)
		return snprintf(err, n, "shape is missing"), EP_E_INVALID;
	for (int i = 0; i < r; i++) {
		od[i] = s[i];
		if (s[i] == 0 && !allowzero) {
			if (i >= rank)
				return snprintf(err, n, "shape[%d] = 0 copies a missing dim", i),
				       EP_E_INVALID;
			od[i] = dims[i];
		}
		if (s[i] == -1 && neg < 0) {
			neg = i;
			continue;
		}
		if (od[i] < 0)
			return snprintf(err, n, "shape[%d] = %lld", i, (long long)s[i]), EP_E_INVALID;
		known *= od[i];
	}
	if (neg >= 0) {
		if (known == 0 || numel % known)
			return snprintf(err, n, "cannot infer the -1 dim"), EP_E_INVALID;
		od[neg] = numel / known;
	}
	if (ep_numel(r, od) != numel)
		return snprintf(err, n, "cannot reshape %lld elements", (long long)numel), EP_E_INVALID;
	return 0;
}

int ep_flatten_dims(int rank, const int64_t *dims, int64_t axis, int64_t *od, char *err, size_t n)
{
	if (axis < 0)
		axis += rank;
	if (axis < 0 || axis > rank)
		return snprintf(err, n, "axis out of range"), EP_E_INVALID;
	od[0] = od[1] = 1;
	for (int i = 0; i < rank; i++)
		od[i >= axis] *= dims[i];
	return 0;
}

int ep_squeeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
		    int *ro, char *err, size_t n)
{
	int drop[EP_MAX_RANK] = {0}, r = 0;

	for (int i = 0; i < cnt; i++) {
		int a = ep_axis(ax[i], rank);

		if (a < 0 || dims[a] != 1)
			return snprintf(err, n, "axis %lld cannot be squeezed", (long long)ax[i]),
			       EP_E_INVALID;
		drop[a] = 1;
	}
	for (int i = 0; i < rank; i++)
		if (!(cnt < 0 ? dims[i] == 1 : drop[i]))
			od[r++] = dims[i];
	*ro = r;
	return 0;
}

int ep_unsqueeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
		      int *ro, char *err, size_t n)
{
	int r = rank + (cnt > 0 ? cnt : 0), add[EP_MAX_RANK] = {0}, k = 0;

	if (cnt < 1 || r > EP_MAX_RANK)
		return snprintf(err, n, "axes missing or too many"), EP_E_INVALID;
	for (int i = 0; i < cnt; i++) {
		int a = ep_axis(ax[i], r);

		if (a < 0 || add[a])
			return snprintf(err, n, "axis %lld is invalid", (long long)ax[i]), EP_E_INVALID;
		add[a] = 1;
	}
	for (int i = 0; i < r; i++)
		od[i] = add[i] ? 1 : dims[k++];
	*ro = r;
	return 0;
}

int ep_transpose_dims(int rank, const int64_t *dims, const int64_t *pv, int np, int *perm,
		      int64_t *od, char *err, size_t n)
{
	int seen[EP_MAX_RANK] = {0};

	if (np >= 0 && np != rank)
		return snprintf(err, n, "perm has %d entries for rank %d", np, rank), EP_E_INVALID;
	for (int i = 0; i < rank; i++) {
		perm[i] = np >= 0 ? ep_axis(pv[i], rank) : rank - 1 - i;
		if (perm[i] < 0 || seen[perm[i]]++)
			return snprintf(err, n, "perm is not a permutation"), EP_E_INVALID;
		od[i] = dims[perm[i]];
	}
	return 0;
}

int ep_fold_perm(int rank, const int64_t *dims, const int *perm, int64_t *fd, int64_t *fs)
{
	int64_t st[EP_MAX_RANK], s = 1;
	int k = 0;

	for (int i = rank - 1; i >= 0; i--) {
		st[i] = s;
		s *= dims[i];
	}
	for (int i = 0; i < rank; i++) {
		int64_t d = dims[perm[i]];

		if (d == 1)
			continue;
		if (k && fs[k - 1] == st[perm[i]] * d) {
			fd[k - 1] *= d;
			fs[k - 1] = st[perm[i]];
			continue;
		}
		fd[k] = d;
		fs[k++] = st[perm[i]];
	}
	return k;
}

int ep_gather_dims(int rank, const int64_t *dims, int a, int irank, const int64_t *idims,
		   int64_t *od, int64_t *outer, int64_t *inner)
{
	int r = 0;

	*outer = *inner = 1;
	for (int i = 0; i < a; i++) {
		od[r++] = dims[i];
		*outer *= dims[i];
	}
	for (int i = 0; i < irank; i++)
		od[r++] = idims[i];
	for (int i = a + 1; i < rank; i++) {
		od[r++] = dims[i];
		*inner *= dims[i];
	}
	return r;
}

/* ---- Conv and pool windows -------------------------------------------------- */

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

int ep_window_supports(const Onnx__NodeProto *p, char *why, size_t n)
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

int ep_conv_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads",
					    "strides", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output != 1)
		return snprintf(why, n, "expects 2 or 3 inputs and one output"), 0;
	if (ep_attr_unknown(p, known, why, n) || !ep_window_supports(p, why, n))
		return 0;
	if (ep_attr_int(p, "group", 1) < 1)
		return snprintf(why, n, "group < 1"), 0;
	return 1;
}

int ep_pool_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
					    "kernel_shape", "pads", "storage_order", "strides", NULL};
	const int64_t *ks;

	if (p->n_input != 1 || ep_n_outputs(p) != 1 || !p->output[0][0])
		return snprintf(why, n, "expects one input and only the Y output"), 0;
	if (ep_attr_unknown(p, known, why, n) || !ep_window_supports(p, why, n))
		return 0;
	if (ep_attr_ints(p, "kernel_shape", &ks) < 1)
		return snprintf(why, n, "kernel_shape is required"), 0;
	return 1;
}

static int64_t attr_at(const Onnx__NodeProto *p, const char *name, int i, int64_t dflt)
{
	const int64_t *v;
	int cnt = ep_attr_ints(p, name, &v);

	return cnt > i ? v[i] : dflt;
}

/* Output size and pads of one spatial dim (slot j, tensor dim i). */
static int dim_geom(const Onnx__NodeProto *p, int mode, int nsp, int i, int j, ep_window *g)
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

int ep_window_geometry(const Onnx__NodeProto *p, int rank, const int64_t *dims,
		       const int64_t *kern, ep_window *g, int *nspp, char *err, size_t n)
{
	int nsp = rank - 2, mode = auto_pad(p);
	const int64_t *v;
	int nk = ep_attr_ints(p, "kernel_shape", &v);

	if (nsp < 1 || nsp > 3)
		return snprintf(err, n, "input rank %d (1 to 3 spatial dims are supported)", rank),
		       EP_E_UNSUPPORTED;
	if ((nk >= 0 && nk != nsp) || !ints_ok(p, "strides", nsp, 1) ||
	    !ints_ok(p, "dilations", nsp, 1) || !ints_ok(p, "pads", 2 * nsp, 0))
		return snprintf(err, n, "attributes do not match %d spatial dims", nsp), EP_E_INVALID;
	memset(g, 0, sizeof(*g));
	*nspp = nsp;
	for (int j = 0; j < 3; j++) {
		int i = j - (3 - nsp);

		g->in[j] = g->out[j] = g->k[j] = g->s[j] = g->d[j] = 1;
		if (i < 0)
			continue;
		g->in[j] = dims[2 + i];
		g->k[j] = kern[i];
		g->s[j] = attr_at(p, "strides", i, 1);
		g->d[j] = attr_at(p, "dilations", i, 1);
		if (attr_at(p, "kernel_shape", i, kern[i]) != kern[i] || kern[i] < 1)
			return snprintf(err, n, "kernel dim %d is %lld", i, (long long)kern[i]),
			       EP_E_INVALID;
		if (dim_geom(p, mode, nsp, i, j, g))
			return snprintf(err, n, "window exceeds the padded input at dim %d", i),
			       EP_E_INVALID;
	}
	return 0;
}

/* ---- Reduce ops --------------------------------------------------------------- */

int ep_reduce_node_ok(const Onnx__NodeProto *p, int64_t opset, int64_t since, char *why,
		      size_t n)
{
	static const char *const old[] = {"axes", "keepdims", NULL};
	static const char *const cur[] = {"keepdims", "noop_with_empty_axes", NULL};
	int as_input = opset >= since;

	if (p->n_input < 1 || (int)p->n_input > 1 + as_input || p->n_output != 1)
		return snprintf(why, n, "unexpected inputs or outputs"), 0;
	return !ep_attr_unknown(p, as_input ? cur : old, why, n);
}

int ep_reduce_axes(const Onnx__NodeProto *p, int64_t opset, int64_t since, const int64_t *ax,
		   int cnt, int rank, int *red, char *err, size_t n)
{
	if (opset < since)
		cnt = ep_attr_ints(p, "axes", &ax);
	if (cnt > EP_MAX_RANK)
		return snprintf(err, n, "too many axes"), EP_E_INVALID;
	if (cnt <= 0 && ep_attr_int(p, "noop_with_empty_axes", 0))
		return 1;
	for (int i = 0; i < rank; i++)
		red[i] = cnt <= 0;
	for (int i = 0; i < cnt; i++) {
		int a = ep_axis(ax[i], rank);

		if (a < 0)
			return snprintf(err, n, "axis %lld out of range", (long long)ax[i]),
			       EP_E_INVALID;
		red[a] = 1;
	}
	return 0;
}

/* ---- LayerNormalization ------------------------------------------------------ */

int ep_layernorm_node_ok(const Onnx__NodeProto *p, int32_t x_dtype, char *why, size_t n)
{
	static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output < 1 || p->n_output > 3 ||
	    !p->output[0][0])
		return snprintf(why, n, "expects X, Scale, optional B and the Y output"), 0;
	if (ep_attr_unknown(p, known, why, n))
		return 0;
	if (ep_attr_int(p, "stash_type", 1) != 1)
		return snprintf(why, n, "stash_type other than float32"), 0;
	if (x_dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 && ep_n_outputs(p) > 1)
		return snprintf(why, n, "float16 with the Mean/InvStdDev outputs"), 0;
	return 1;
}

int ep_suffix_broadcasts(int sr, const int64_t *s, int xr, const int64_t *x, int a)
{
	int lead = 0;
	int64_t numel = 1;

	for (int i = 0; i < sr; i++)
		numel *= s[i];
	while (lead < sr && s[lead] == 1)
		lead++;
	if (sr - lead > xr - a)
		return numel == 1;
	for (int i = lead; i < sr; i++)
		if (s[i] != x[xr - (sr - i)])
			return 0;
	return 1;
}
