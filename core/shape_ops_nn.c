/*
 * shape_ops_nn.c: type and shape inference for convolution and
 * pooling (Conv, ConvTranspose, ConvInteger, QLinearConv, the pools and
 * global pools): kernel, strides, dilations, pads and auto_pad.
 * Registered in op_table (shape_ops.c).
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"
#include "shape_ops_fn.h"
#include "window.h"

/* ------------------------------------------------------ conv and pooling */

/* The attributes as read here (the counts checked against the spatial
 * rank, unknown kernel dims allowed); the output sizes are ONNX's rules in
 * onnxrules/window.c. */
typedef struct window {
	int n;                              /* spatial rank */
	int64_t k[GRAPH_MAX_RANK];          /* kernel; < 0 unknown */
	int64_t s[GRAPH_MAX_RANK], d[GRAPH_MAX_RANK];
	int64_t pads[2 * GRAPH_MAX_RANK];   /* begins, then ends */
	int pad_mode, ceil_mode;            /* ONNX_PAD_*, ceil_mode */
} window;

/* Reads one per-spatial-dim attribute (default `dflt`), requiring `want`
 * values and at least `min` in each. */
static int window_attr(shape_ctx *c, const char *name, int want, int64_t dflt,
		       int64_t min, int64_t *out)
{
	const int64_t *v;
	int n = shape_attr_ints(c, name, &v);

	for (int i = 0; i < want; i++)
		out[i] = dflt;
	if (n < 0)
		return 0;
	if (n != want)
		return shape_fail(c, "%s has %d values, expected %d", name, n, want);
	for (int i = 0; i < n; i++) {
		if (v[i] < min)
			return shape_fail(c, "%s[%d] = %lld is invalid", name, i,
					  (long long)v[i]);
		out[i] = v[i];
	}
	return 0;
}

static int window_read(shape_ctx *c, window *w)
{
	int rc = window_attr(c, "strides", w->n, 1, 1, w->s);

	if (!rc)
		rc = window_attr(c, "dilations", w->n, 1, 1, w->d);
	if (!rc)
		rc = window_attr(c, "pads", 2 * w->n, 0, 0, w->pads);
	/* an unknown auto_pad is for the providers to refuse */
	w->pad_mode = onnx_auto_pad(c->n->proto);
	if (w->pad_mode < 0)
		w->pad_mode = ONNX_PAD_NOTSET;
	w->ceil_mode = shape_attr_int(c, "ceil_mode", 0) != 0;
	return rc;
}

/* Output size of spatial dim i for Conv and pooling: unknown when the
 * input or (but for SAME) the kernel is. */
static int window_out(shape_ctx *c, const window *w, int i, int64_t in, int64_t *out)
{
	int same = w->pad_mode == ONNX_PAD_SAME_UPPER || w->pad_mode == ONNX_PAD_SAME_LOWER;
	onnx_span sp = {.in = in, .k = w->k[i], .s = w->s[i], .d = w->d[i], .pb = w->pads[i],
			.pe = w->pads[i + w->n]};
	int rc;

	*out = SHAPE_NEW;
	if (in < 0 || (!same && w->k[i] < 0))
		return 0;
	if (!same && w->k[i] == 0)
		return shape_fail(c, "kernel dim %d is 0", i);
	rc = onnx_window_span(w->pad_mode, w->ceil_mode, &sp);
	if (rc) {
		char why[160];

		onnx_span_error(rc, &sp, i, why, sizeof(why));
		return shape_fail(c, "%s", why);
	}
	*out = sp.out;
	return 0;
}

/* Spatial rank of an N-C-spatial op: from X, else W, else the kernel. */
static int spatial_rank(shape_ctx *c, const graph_tinfo *x, const graph_tinfo *w,
			int nk)
{
	int n = x->rank >= 0 ? x->rank - 2 : w->rank >= 0 ? w->rank - 2 : nk;

	if ((x->rank >= 0 && x->rank < 3) || n < 1 || n > GRAPH_MAX_RANK - 2)
		return shape_fail(c, "input rank %d, weight rank %d: expected N, C and spatial dims",
				  x->rank, w->rank);
	if ((w->rank >= 0 && w->rank != n + 2) || (nk >= 0 && nk != n))
		return shape_fail(c, "weight/kernel_shape rank does not match %d spatial dims", n);
	return n;
}

/* Where W is and whether its kind is ConvTranspose's (shape_fn_conv's
 * arg: SHAPE_CONV_*). */
static int conv_w(const shape_ctx *c)
{
	return c->arg == SHAPE_CONV_QLINEAR ? 3 : 1;
}

/* Kernel dims from kernel_shape, else from W's trailing dims. */
static void conv_kernel(shape_ctx *c, window *w)
{
	const graph_tinfo *wt = shape_in(c, conv_w(c));
	const int64_t *ks;
	int nk = shape_attr_ints(c, "kernel_shape", &ks);

	for (int i = 0; i < w->n; i++)
		w->k[i] = nk == w->n ? ks[i] : wt->rank == w->n + 2 ? wt->dims[i + 2] : -1;
}

/* N and channel dims of Conv, ConvTranspose, ConvInteger and QLinearConv:
 * W is [M, C/group, k...], for ConvTranspose [C, M/group, k...].  The
 * output type is the input's, ConvInteger's int32, QLinearConv's its
 * output zero point's (uint8 without one).  Returns the spatial rank, -1
 * when unknown, or an error. */
static int conv_channels(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *wt = shape_in(c, conv_w(c));
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *ks;
	int64_t group = shape_attr_int(c, "group", 1), cin = SHAPE_NEW, cout = SHAPE_NEW;
	int nk = shape_attr_ints(c, "kernel_shape", &ks), n, rc, tr = c->arg == SHAPE_CONV_TRANSPOSE;

	if (c->arg == SHAPE_CONV_INTEGER) {
		o->elem_type = DT(INT32);
	} else if (c->arg == SHAPE_CONV_QLINEAR) {
		o->elem_type = shape_in(c, 7)->elem_type ? shape_in(c, 7)->elem_type : DT(UINT8);
	} else {
		if (shape_same_type(c, x->elem_type, wt->elem_type))
			return -EINVAL;
		o->elem_type = x->elem_type ? x->elem_type : wt->elem_type;
	}
	if (x->rank < 0 && wt->rank < 0 && nk < 0)
		return -1;
	n = spatial_rank(c, x, wt, nk);
	if (n < 0)
		return n;
	if (group < 1)
		return shape_fail(c, "group %lld is invalid", (long long)group);
	rc = shape_set_rank(c, o, o->elem_type, n + 2);
	if (rc)
		return rc;
	if (wt->rank >= 0) {
		cin = wt->dims[!tr];
		cout = wt->dims[tr];
	}
	if (!tr && cin >= 0)
		cin *= group;
	if (tr && cout >= 0)
		cout *= group;
	if (x->rank >= 0 && x->dims[1] >= 0 && cin >= 0 && x->dims[1] != cin)
		return shape_fail(c, "input has %lld channels, weight expects %lld (group %lld)",
				  (long long)x->dims[1], (long long)cin, (long long)group);
	o->dims[0] = x->rank >= 0 ? x->dims[0] : SHAPE_NEW;
	o->dims[1] = cout;
	return n;
}

/* Output size of ConvTranspose at spatial dim i: stride * (in - 1) +
 * output_padding + effective kernel - pads, unless auto_pad SAME. */
static int convt_out(shape_ctx *c, const window *w, int i, int64_t in, int64_t op,
		     int64_t *out)
{
	int64_t v, ek, pads = 0;

	*out = SHAPE_NEW;
	if (in >= 0 && (w->pad_mode == ONNX_PAD_SAME_UPPER || w->pad_mode == ONNX_PAD_SAME_LOWER)) {
		if (__builtin_mul_overflow(in, w->s[i], out))
			return shape_fail(c, "output size overflows at spatial dim %d", i);
		return 0;
	}
	if (in < 0 || w->k[i] < 0)
		return 0;
	if (w->pad_mode == ONNX_PAD_NOTSET)
		pads = w->pads[i] + w->pads[i + w->n];
	if (__builtin_mul_overflow(w->s[i], in - 1, &v) ||
	    __builtin_mul_overflow(w->k[i] - 1, w->d[i], &ek) ||
	    __builtin_add_overflow(v, ek + 1, &v) || __builtin_add_overflow(v, op, &v))
		return shape_fail(c, "output size overflows at spatial dim %d", i);
	if (v - pads < 0)
		return shape_fail(c, "negative output size at spatial dim %d", i);
	*out = v - pads;
	return 0;
}

/* Conv, ConvTranspose, ConvInteger, QLinearConv (arg: SHAPE_CONV_*). */
int shape_fn_conv(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *os;
	int64_t op[GRAPH_MAX_RANK];
	int nos = shape_attr_ints(c, "output_shape", &os), rc;
	window w = { .n = conv_channels(c) };

	if (w.n < 0)
		return w.n == -1 ? 0 : w.n;
	conv_kernel(c, &w);
	rc = window_read(c, &w);
	if (!rc && c->arg == SHAPE_CONV_TRANSPOSE)
		rc = window_attr(c, "output_padding", w.n, 0, 0, op);
	for (int i = 0; i < w.n && !rc; i++) {
		int64_t in = x->rank >= 0 ? x->dims[i + 2] : -1;

		if (c->arg != SHAPE_CONV_TRANSPOSE)
			rc = window_out(c, &w, i, in, &o->dims[i + 2]);
		else if (nos >= w.n)
			o->dims[i + 2] = os[nos - w.n + i];
		else
			rc = convt_out(c, &w, i, in, op[i], &o->dims[i + 2]);
	}
	return rc;
}

/* MaxPool, AveragePool, LpPool: kernel_shape is required. */
int shape_fn_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *ks;
	int nk = shape_attr_ints(c, "kernel_shape", &ks), rc;
	window w;

	if (nk <= 0)
		return shape_fail(c, "kernel_shape is required");
	w.n = spatial_rank(c, x, &(graph_tinfo){ .rank = -1 }, nk);
	if (w.n < 0)
		return w.n;
	for (int i = 0; i < w.n; i++)
		w.k[i] = ks[i];
	rc = window_read(c, &w);
	if (rc || (rc = shape_set_rank(c, o, x->elem_type, w.n + 2)))
		return rc;
	for (int i = 0; i < 2 && x->rank >= 0; i++)
		o->dims[i] = x->dims[i];
	for (int i = 0; i < w.n && !rc; i++)
		rc = window_out(c, &w, i, x->rank >= 0 ? x->dims[i + 2] : -1,
				&o->dims[i + 2]);
	shape_copy(shape_out(c, 1), o, 0);
	shape_out(c, 1)->elem_type = DT(INT64);
	return rc;
}

/* Resize's or Upsample's scales on nax axes into s (tracked only while
 * integral, as 2.0 for a 2x upsampling is): 0, or -1 when not known. */
static int resize_scales(shape_ctx *c, int resize, int nax, int64_t *s)
{
	const graph_tinfo *sc = NULL;
	int64_t opset = c->n->opset;

	if (resize && opset >= 11)
		sc = shape_has_in(c, 2) ? shape_in(c, 2) : NULL;
	else if (resize || opset >= 9)
		sc = shape_has_in(c, 1) ? shape_in(c, 1) : NULL;
	if (sc) {
		if (!sc->has_data || sc->ndata != nax)
			return -1;
		memcpy(s, sc->data, (size_t)nax * sizeof(s[0]));
		return 0;
	}
	if (resize)
		return -1;
	/* Upsample 7 and 8: an attribute */
	const Onnx__AttributeProto *a = shape_attr(c, "scales");

	if (!a || a->n_floats != (size_t)nax)
		return -1;
	for (int i = 0; i < nax; i++)
		if (shape_float_int(a->floats[i], &s[i]) < 0 || s[i] < 0 || s[i] > 16777216)
			return -1;
	return 0;
}

/* Resize (10-19) and Upsample (7-9).  Sizes, when given and known, are the
 * output's dims (on `axes` from opset 18; a keep_aspect_ratio_policy other
 * than stretch is left unknown); else each dim is floor(in x scale), known
 * when the scales are.  The sizes and scales of exported models come from
 * Constants or from Shape arithmetic the inference folds. */
int shape_fn_resize(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *sz = NULL;
	graph_tinfo *o = shape_out(c, 0);
	const int64_t *axes = NULL;
	int64_t v[GRAPH_MAX_RANK], ax[GRAPH_MAX_RANK], s[GRAPH_MAX_RANK];
	int resize = strcmp(c->n->op_type, "Resize") == 0, nax, rc;

	if (x->rank < 0) {
		o->elem_type = x->elem_type;
		return 0;
	}
	if ((rc = shape_set_rank(c, o, x->elem_type, x->rank)) != 0)
		return rc;
	for (int i = 0; i < x->rank; i++)
		o->dims[i] = SHAPE_NEW;
	if (resize && c->n->opset >= 11 && shape_has_in(c, 3))
		sz = shape_in(c, 3);
	nax = resize && c->n->opset >= 18 ? shape_attr_ints(c, "axes", &axes) : -1;
	if (nax < 0)
		nax = x->rank;
	if (nax > x->rank)
		return shape_fail(c, "%d axes for rank %d", nax, x->rank);
	for (int i = 0; i < nax; i++) {
		ax[i] = axes ? axes[i] : i;
		ax[i] += ax[i] < 0 ? x->rank : 0;
		if (ax[i] < 0 || ax[i] >= x->rank)
			return shape_fail(c, "axis %lld out of range", (long long)ax[i]);
	}
	for (int i = 0; i < x->rank; i++)
		v[i] = x->dims[i];   /* dims not in axes keep the input's */
	if (sz && sz->ndata > 0) {
		if (!sz->has_data || sz->ndata != nax ||
		    (shape_attr(c, "keep_aspect_ratio_policy") &&
		     !shape_attr_is(c, "keep_aspect_ratio_policy", "stretch")))
			return 0;
		for (int i = 0; i < nax; i++)
			v[ax[i]] = sz->data[i];
	} else {
		if (resize_scales(c, resize, nax, s) < 0)
			return 0;
		for (int i = 0; i < nax; i++)
			if (x->dims[ax[i]] >= 0 &&
			    (s[i] < 0 || __builtin_mul_overflow(x->dims[ax[i]], s[i], &v[ax[i]])))
				return 0;
	}
	for (int i = 0; i < x->rank; i++)
		o->dims[i] = v[i] >= 0 ? v[i] : SHAPE_NEW;
	return 0;
}

/* RNN, GRU, LSTM: Y [seq, dirs, batch, hidden] (layout 1: [batch, seq,
 * dirs, hidden]), Y_h and LSTM's Y_c [dirs, batch, hidden] (layout 1:
 * [batch, dirs, hidden]).  hidden_size is the attribute, or W's rows over
 * the gates (arg: 1, 3, 4). */
int shape_fn_rnn(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *w = shape_in(c, 1);
	int64_t hid = shape_attr_int(c, "hidden_size", -1), layout = shape_attr_int(c, "layout", 0);
	int64_t dirs = shape_attr_is(c, "direction", "bidirectional") ? 2 : 1;
	int64_t seq = SHAPE_NEW, batch = SHAPE_NEW;
	int rc;

	if (x->rank >= 0 && x->rank != 3)
		return shape_fail(c, "X has rank %d, expected 3", x->rank);
	if (x->rank == 3) {
		seq = x->dims[layout ? 1 : 0];
		batch = x->dims[layout ? 0 : 1];
	}
	if (hid < 0 && w->rank == 3 && w->dims[1] >= 0 && w->dims[1] % c->arg == 0)
		hid = w->dims[1] / c->arg;
	if (hid < 0)
		hid = SHAPE_NEW;
	for (int i = 0; i < c->n->n_out && i < 3; i++) {
		graph_tinfo *o = shape_out(c, i);
		int64_t d[4], r = i == 0 ? 4 : 3;

		if (i == 0 && !layout)
			d[0] = seq, d[1] = dirs, d[2] = batch, d[3] = hid;
		else if (i == 0)
			d[0] = batch, d[1] = seq, d[2] = dirs, d[3] = hid;
		else if (!layout)
			d[0] = dirs, d[1] = batch, d[2] = hid;
		else
			d[0] = batch, d[1] = dirs, d[2] = hid;
		if ((rc = shape_set_rank(c, o, x->elem_type, r)) != 0)
			return rc;
		memcpy(o->dims, d, (size_t)r * sizeof(d[0]));
	}
	return 0;
}

int shape_fn_global_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);

	if (x->rank >= 0 && x->rank < 2)
		return shape_fail(c, "input rank %d: expected N, C and spatial dims",
				  x->rank);
	shape_copy(o, x, 0);
	for (int i = 2; i < o->rank; i++)
		o->dims[i] = 1;
	return 0;
}
