/*
 * dk_shape: shape and attribute math shared by the device providers (see
 * dk_shape.h).
 */
#include <stdio.h>
#include <string.h>

#include "dk_shape.h"

/* ---- attributes ------------------------------------------------------------ */

int dk_n_outputs(const Onnx__NodeProto *p)
{
	int n = 0;

	for (size_t i = 0; i < p->n_output; i++)
		n += p->output[i][0] != 0;
	return n;
}

/* ---- dims ------------------------------------------------------------------ */

int64_t dk_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

const char *dk_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t at = 0;

	at += (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < rank && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
	return buf;
}

/* ---- view ops ---------------------------------------------------------------- */

int dk_view_node_ok(const Onnx__NodeProto *p, int64_t opset, char *why, size_t n)
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
	return !proto_attr_unknown(p, known, why, n);
}

int dk_transpose_dims(int rank, const int64_t *dims, const int64_t *pv, int np, int *perm,
		      int64_t *od, char *err, size_t n)
{
	int seen[EP_MAX_RANK] = {0};

	if (np >= 0 && np != rank)
		return snprintf(err, n, "perm has %d entries for rank %d", np, rank), EP_E_INVALID;
	for (int i = 0; i < rank; i++) {
		perm[i] = np >= 0 ? onnx_axis(pv[i], rank) : rank - 1 - i;
		if (perm[i] < 0 || seen[perm[i]]++)
			return snprintf(err, n, "perm is not a permutation"), EP_E_INVALID;
		od[i] = dims[perm[i]];
	}
	return 0;
}

int dk_fold_perm(int rank, const int64_t *dims, const int *perm, int64_t *fd, int64_t *fs)
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

int dk_gather_dims(int rank, const int64_t *dims, int a, int irank, const int64_t *idims,
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

int dk_window_supports(const Onnx__NodeProto *p, char *why, size_t n)
{
	onnx_window w;
	int nk;

	if (onnx_window_parse(p, &w, why, n))
		return 0;
	nk = w.n_kernel;
	if (nk > 3)
		return snprintf(why, n, "%d spatial dims (1 to 3 are supported)", nk), 0;
	if (nk && ((w.n_strides && w.n_strides != nk) || (w.n_dilations && w.n_dilations != nk) ||
		   (w.n_pads && w.n_pads != 2 * nk)))
		return snprintf(why, n, "invalid kernel_shape, strides, dilations or pads"), 0;
	return 1;
}

int dk_conv_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads",
					    "strides", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output != 1)
		return snprintf(why, n, "expects 2 or 3 inputs and one output"), 0;
	if (proto_attr_unknown(p, known, why, n) || !dk_window_supports(p, why, n))
		return 0;
	if (proto_attr_int(p, "group", 1) < 1)
		return snprintf(why, n, "group < 1"), 0;
	return 1;
}

int dk_pool_node_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	static const char *const known[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
					    "kernel_shape", "pads", "storage_order", "strides", NULL};
	const int64_t *ks;

	if (p->n_input != 1 || dk_n_outputs(p) != 1 || !p->output[0][0])
		return snprintf(why, n, "expects one input and only the Y output"), 0;
	if (proto_attr_unknown(p, known, why, n) || !dk_window_supports(p, why, n))
		return 0;
	if (proto_attr_ints(p, "kernel_shape", &ks) < 1)
		return snprintf(why, n, "kernel_shape is required"), 0;
	return 1;
}

int dk_window_geometry(const Onnx__NodeProto *p, int rank, const int64_t *dims,
		       const int64_t *kern, dk_window *g, int *nsp, char *err, size_t n)
{
	onnx_window w;
	int rc = onnx_window_parse(p, &w, err, n);

	*nsp = rank - 2;
	return rc ? rc : onnx_window_geom(&w, rank - 2, dims + 2, kern, g, err, n);
}

/* ---- Reduce ops --------------------------------------------------------------- */

int dk_reduce_node_ok(const Onnx__NodeProto *p, int64_t opset, int64_t since, char *why,
		      size_t n)
{
	static const char *const old[] = {"axes", "keepdims", NULL};
	static const char *const cur[] = {"keepdims", "noop_with_empty_axes", NULL};
	int as_input = opset >= since;

	if (p->n_input < 1 || (int)p->n_input > 1 + as_input || p->n_output != 1)
		return snprintf(why, n, "unexpected inputs or outputs"), 0;
	return !proto_attr_unknown(p, as_input ? cur : old, why, n);
}

int dk_reduce_axes(const Onnx__NodeProto *p, int64_t opset, int64_t since, const int64_t *ax,
		   int cnt, int rank, int *red, char *err, size_t n)
{
	if (opset < since)
		cnt = proto_attr_ints(p, "axes", &ax);
	if (cnt > EP_MAX_RANK)
		return snprintf(err, n, "too many axes"), EP_E_INVALID;
	if (cnt <= 0 && proto_attr_int(p, "noop_with_empty_axes", 0))
		return 1;
	for (int i = 0; i < rank; i++)
		red[i] = cnt <= 0;
	for (int i = 0; i < cnt; i++) {
		int a = onnx_axis(ax[i], rank);

		if (a < 0)
			return snprintf(err, n, "axis %lld out of range", (long long)ax[i]),
			       EP_E_INVALID;
		red[a] = 1;
	}
	return 0;
}

/* ---- LayerNormalization ------------------------------------------------------ */

int dk_layernorm_node_ok(const Onnx__NodeProto *p, int32_t x_dtype, char *why, size_t n)
{
	static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};

	if (p->n_input < 2 || p->n_input > 3 || p->n_output < 1 || p->n_output > 3 ||
	    !p->output[0][0])
		return snprintf(why, n, "expects X, Scale, optional B and the Y output"), 0;
	if (proto_attr_unknown(p, known, why, n))
		return 0;
	if (proto_attr_int(p, "stash_type", 1) != 1)
		return snprintf(why, n, "stash_type other than float32"), 0;
	if (x_dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 && dk_n_outputs(p) > 1)
		return snprintf(why, n, "float16 with the Mean/InvStdDev outputs"), 0;
	return 1;
}

int dk_suffix_broadcasts(int sr, const int64_t *s, int xr, const int64_t *x, int a)
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

_Static_assert((int)EP_E_INVALID == (int)ONNX_E_INVALID &&
	       (int)EP_E_UNSUPPORTED == (int)ONNX_E_UNSUPPORTED,
	       "onnxrules' error codes are the providers'");
