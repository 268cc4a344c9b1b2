/*
 * window.c: ONNX's sliding-window geometry (see window.h).
 */
#include <stdio.h>
#include <string.h>

#include "node_attr.h"
#include "window.h"

#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

int onnx_auto_pad(const Onnx__NodeProto *p)
{
	static const char *const names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
	const Onnx__AttributeProto *a = proto_attr_typed(p, "auto_pad", AT(STRING));

	if (!a || a->s.len == 0)
		return ONNX_PAD_NOTSET;
	for (int i = 0; i < 4; i++)
		if (a->s.len == strlen(names[i]) && memcmp(a->s.data, names[i], a->s.len) == 0)
			return i;
	return -1;
}

/* SAME_*: the output covers the input at stride s; the padding that needs
 * is split with the odd element at the end (UPPER) or the start (LOWER). */
static int same_span(int upper, onnx_span *sp, int64_t eff)
{
	int64_t total;

	sp->out = sp->in / sp->s + (sp->in % sp->s != 0);
	sp->pb = sp->pe = 0;
	if (eff < 1)
		return 0;
	if (__builtin_mul_overflow(sp->out - 1, sp->s, &total) ||
	    __builtin_add_overflow(total, eff, &total))
		return ONNX_SPAN_OVERFLOW;
	total -= sp->in;
	if (total < 0)
		total = 0;
	sp->pb = upper ? total / 2 : total - total / 2;
	sp->pe = total - sp->pb;
	return 0;
}

int onnx_window_span(int auto_pad, int ceil_mode, onnx_span *sp)
{
	int64_t eff = 0, total;

	if (sp->k >= 1 && (__builtin_mul_overflow(sp->k - 1, sp->d, &eff) ||
			   __builtin_add_overflow(eff, 1, &eff)))
		return ONNX_SPAN_OVERFLOW;
	if (auto_pad == ONNX_PAD_SAME_UPPER || auto_pad == ONNX_PAD_SAME_LOWER)
		return same_span(auto_pad == ONNX_PAD_SAME_UPPER, sp, eff);
	if (auto_pad == ONNX_PAD_VALID)
		sp->pb = sp->pe = 0;
	if (__builtin_add_overflow(sp->in, sp->pb, &total) ||
	    __builtin_add_overflow(total, sp->pe, &total))
		return ONNX_SPAN_OVERFLOW;
	total -= eff;
	if (total < 0)
		return ONNX_SPAN_EXCEEDS;
	sp->out = total / sp->s + 1;
	/* Rounded up, a last window starting in the end padding is dropped
	 * (PyTorch and onnxruntime do the same). */
	if (ceil_mode && auto_pad == ONNX_PAD_NOTSET) {
		sp->out += total % sp->s != 0;
		if ((sp->out - 1) * sp->s >= sp->in + sp->pb)
			sp->out--;
	}
	return 0;
}

int onnx_span_error(int rc, const onnx_span *sp, int i, char *err, size_t n)
{
	if (rc == ONNX_SPAN_EXCEEDS)
		snprintf(err, n, "kernel %lld (dilation %lld) exceeds input %lld + padding at "
			 "spatial dim %d", (long long)sp->k, (long long)sp->d, (long long)sp->in, i);
	else
		snprintf(err, n, "kernel or padding too large at spatial dim %d", i);
	return ONNX_E_INVALID;
}

static int copy_ints(const Onnx__NodeProto *p, const char *name, int64_t *dst, int max,
		     int64_t min_value, int *count, char *err, size_t n)
{
	const Onnx__AttributeProto *a = proto_attr_typed(p, name, AT(INTS));
	size_t cnt = a ? a->n_ints : 0;

	if (cnt > (size_t)max)
		return snprintf(err, n, "attribute %s has %zu values (at most %d)", name, cnt, max),
		       ONNX_E_INVALID;
	for (size_t i = 0; i < cnt; i++) {
		/* the upper bound keeps the size arithmetic far from overflow */
		if (a->ints[i] < min_value || a->ints[i] > INT32_MAX)
			return snprintf(err, n, "attribute %s[%zu] = %lld must be in [%lld, %d]", name,
					i, (long long)a->ints[i], (long long)min_value, INT32_MAX),
			       ONNX_E_INVALID;
		dst[i] = a->ints[i];
	}
	*count = (int)cnt;
	return 0;
}

int onnx_window_parse(const Onnx__NodeProto *p, onnx_window *w, char *err, size_t n)
{
	const Onnx__AttributeProto *ceil = proto_attr_typed(p, "ceil_mode", AT(INT));
	const Onnx__AttributeProto *ap = proto_attr_typed(p, "auto_pad", AT(STRING));
	int rc;

	memset(w, 0, sizeof(*w));
	rc = copy_ints(p, "kernel_shape", w->kernel, ONNX_MAX_RANK, 1, &w->n_kernel, err, n);
	if (!rc)
		rc = copy_ints(p, "strides", w->strides, ONNX_MAX_RANK, 1, &w->n_strides, err, n);
	if (!rc)
		rc = copy_ints(p, "dilations", w->dilations, ONNX_MAX_RANK, 1, &w->n_dilations, err, n);
	if (!rc)
		rc = copy_ints(p, "pads", w->pads, 2 * ONNX_MAX_RANK, 0, &w->n_pads, err, n);
	if (rc)
		return rc;
	if (w->n_pads % 2)
		return snprintf(err, n, "attribute pads has an odd count (%d)", w->n_pads),
		       ONNX_E_INVALID;
	w->ceil_mode = ceil && ceil->i != 0;
	w->auto_pad = onnx_auto_pad(p);
	if (w->auto_pad < 0)
		return snprintf(err, n, "unknown auto_pad '%.*s'", ap->s.len > 31 ? 31 : (int)ap->s.len,
				(const char *)ap->s.data), ONNX_E_INVALID;
	return 0;
}

static int counts_ok(const onnx_window *w, int nsp, const int64_t *kernel, char *err, size_t n)
{
	if ((!kernel && w->n_kernel != nsp) || (kernel && w->n_kernel && w->n_kernel != nsp))
		return snprintf(err, n, "kernel_shape has %d dims for %d spatial dims", w->n_kernel,
				nsp), ONNX_E_INVALID;
	if ((w->n_strides && w->n_strides != nsp) || (w->n_dilations && w->n_dilations != nsp) ||
	    (w->n_pads && w->n_pads != 2 * nsp))
		return snprintf(err, n, "strides/dilations/pads do not match %d spatial dims", nsp),
		       ONNX_E_INVALID;
	return 0;
}

/* Spatial dim i into slot j of g. */
static int geom_dim(const onnx_window *w, int nsp, int i, int j, int64_t k, onnx_geom *g,
		    char *err, size_t n)
{
	onnx_span sp = {.in = g->in[j], .k = k, .s = w->n_strides ? w->strides[i] : 1,
			.d = w->n_dilations ? w->dilations[i] : 1,
			.pb = w->n_pads ? w->pads[i] : 0, .pe = w->n_pads ? w->pads[nsp + i] : 0};
	int rc;

	if (k < 1)
		return snprintf(err, n, "kernel dim %d is %lld", i, (long long)k), ONNX_E_INVALID;
	rc = onnx_window_span(w->auto_pad, w->ceil_mode, &sp);
	if (rc)
		return onnx_span_error(rc, &sp, i, err, n);
	g->k[j] = k;
	g->s[j] = sp.s;
	g->d[j] = sp.d;
	g->out[j] = sp.out;
	g->pb[j] = sp.pb;
	g->pe[j] = sp.pe;
	return 0;
}

int onnx_window_geom(const onnx_window *w, int nsp, const int64_t *in_sp,
		     const int64_t *kernel, onnx_geom *g, char *err, size_t n)
{
	int rc;

	if (nsp < 1 || nsp > 3)
		return snprintf(err, n, "%d spatial dims (1 to 3 are supported)", nsp),
		       ONNX_E_UNSUPPORTED;
	rc = counts_ok(w, nsp, kernel, err, n);
	if (rc)
		return rc;
	memset(g, 0, sizeof(*g));
	g->nsp = nsp;
	for (int j = 0; j < 3; j++) {
		int i = j - (3 - nsp);

		g->in[j] = g->out[j] = g->k[j] = g->s[j] = g->d[j] = 1;
		if (i < 0)
			continue;
		g->in[j] = in_sp[i];
		if (kernel && w->n_kernel && w->kernel[i] != kernel[i])
			return snprintf(err, n, "kernel_shape[%d] = %lld but the weights have %lld", i,
					(long long)w->kernel[i], (long long)kernel[i]), ONNX_E_INVALID;
		rc = geom_dim(w, nsp, i, j, kernel ? kernel[i] : w->kernel[i], g, err, n);
		if (rc)
			return rc;
	}
	return 0;
}
