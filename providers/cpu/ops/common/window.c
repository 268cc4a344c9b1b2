/*
 * window: sliding-window geometry shared by Conv, MaxPool and AveragePool —
 * attribute parsing (kernel_shape, strides, dilations, pads, auto_pad,
 * ceil_mode) and the output size / padding rules of the ONNX spec.
 *
 * ceil_mode follows the ONNX reference (and PyTorch): the output size is
 * rounded up, then a last window that would start in the end padding is
 * dropped.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_ops.h"

static int copy_ints(const Onnx__NodeProto *p, const char *name, int64_t *dst, int max,
		     int64_t min_value, int *count, char *err, size_t n)
{
	const int64_t *v;
	size_t cnt = cpu_attr_ints(p, name, &v);
	if (cnt > (size_t)max) {
		snprintf(err, n, "attribute %s has %zu values (at most %d)", name, cnt, max);
		return CPU_E_INVALID;
	}
	for (size_t i = 0; i < cnt; i++) {
		/* the upper bound keeps the size arithmetic far from overflow */
		if (v[i] < min_value || v[i] > INT32_MAX) {
			snprintf(err, n, "attribute %s[%zu] = %lld must be in [%lld, %d]", name, i,
				 (long long)v[i], (long long)min_value, INT32_MAX);
			return CPU_E_INVALID;
		}
		dst[i] = v[i];
	}
	*count = (int)cnt;
	return 0;
}

int cpu_window_parse(const Onnx__NodeProto *p, cpu_window *w, char *err, size_t n)
{
	char ap[32];
	int rc;
	memset(w, 0, sizeof(*w));
	rc = copy_ints(p, "kernel_shape", w->kernel, CPU_MAX_RANK, 1, &w->n_kernel, err, n);
	if (!rc)
		rc = copy_ints(p, "strides", w->strides, CPU_MAX_RANK, 1, &w->n_strides, err, n);
	if (!rc)
		rc = copy_ints(p, "dilations", w->dilations, CPU_MAX_RANK, 1, &w->n_dilations, err, n);
	if (!rc)
		rc = copy_ints(p, "pads", w->pads, 2 * CPU_MAX_RANK, 0, &w->n_pads, err, n);
	if (rc)
		return rc;
	if (w->n_pads % 2) {
		snprintf(err, n, "attribute pads has an odd count (%d)", w->n_pads);
		return CPU_E_INVALID;
	}
	w->ceil_mode = cpu_attr_int(p, "ceil_mode", 0) != 0;
	if (!cpu_attr_str(p, "auto_pad", ap, sizeof(ap)) || !ap[0] || !strcmp(ap, "NOTSET"))
		w->auto_pad = CPU_PAD_NOTSET;
	else if (!strcmp(ap, "SAME_UPPER"))
		w->auto_pad = CPU_PAD_SAME_UPPER;
	else if (!strcmp(ap, "SAME_LOWER"))
		w->auto_pad = CPU_PAD_SAME_LOWER;
	else if (!strcmp(ap, "VALID"))
		w->auto_pad = CPU_PAD_VALID;
	else {
		snprintf(err, n, "unknown auto_pad '%s'", ap);
		return CPU_E_INVALID;
	}
	return 0;
}

/* Output size and padding of spatial dim i (already in g->in/k/s/d). */
static int dim_geom(const cpu_window *w, int nsp, int i, int gi, cpu_geom *g, char *err,
		    size_t n)
{
	int64_t in = g->in[gi], s = g->s[gi], eff = (g->k[gi] - 1) * g->d[gi] + 1, total;
	switch (w->auto_pad) {
	case CPU_PAD_SAME_UPPER:
	case CPU_PAD_SAME_LOWER:
		g->out[gi] = (in + s - 1) / s;
		total = (g->out[gi] - 1) * s + eff - in;
		if (total < 0)
			total = 0;
		g->pb[gi] = w->auto_pad == CPU_PAD_SAME_UPPER ? total / 2 : total - total / 2;
		g->pe[gi] = total - g->pb[gi];
		return 0;
	case CPU_PAD_VALID:
		g->pb[gi] = g->pe[gi] = 0;
		total = in - eff;
		break;
	default:
		g->pb[gi] = w->n_pads ? w->pads[i] : 0;
		g->pe[gi] = w->n_pads ? w->pads[nsp + i] : 0;
		total = in + g->pb[gi] + g->pe[gi] - eff;
		break;
	}
	if (total < 0) {
		snprintf(err, n, "window of %lld (kernel %lld, dilation %lld) exceeds padded input "
			 "dim %d of %lld", (long long)eff, (long long)g->k[gi], (long long)g->d[gi],
			 i, (long long)(in + g->pb[gi] + g->pe[gi]));
		return CPU_E_INVALID;
	}
	if (w->ceil_mode && w->auto_pad == CPU_PAD_NOTSET) {
		g->out[gi] = (total + s - 1) / s + 1;
		if ((g->out[gi] - 1) * s >= in + g->pb[gi])
			g->out[gi]--;
	} else {
		g->out[gi] = total / s + 1;
	}
	return 0;
}

int cpu_window_geom(const cpu_window *w, int nsp, const int64_t *in_sp,
		    const int64_t *kernel, cpu_geom *g, char *err, size_t n)
{
	int off = 3 - nsp, rc;
	if (nsp < 1 || nsp > 3) {
		snprintf(err, n, "%d spatial dims (1 to 3 are supported)", nsp);
		return CPU_E_UNSUPPORTED;
	}
	if ((!kernel && w->n_kernel != nsp) || (kernel && w->n_kernel && w->n_kernel != nsp)) {
		snprintf(err, n, "kernel_shape has %d dims for %d spatial dims", w->n_kernel, nsp);
		return CPU_E_INVALID;
	}
	if ((w->n_strides && w->n_strides != nsp) || (w->n_dilations && w->n_dilations != nsp) ||
	    (w->n_pads && w->n_pads != 2 * nsp)) {
		snprintf(err, n, "strides/dilations/pads do not match %d spatial dims", nsp);
		return CPU_E_INVALID;
	}
	memset(g, 0, sizeof(*g));
	g->nsp = nsp;
	for (int gi = 0; gi < 3; gi++) {
		int i = gi - off;
		g->in[gi] = g->out[gi] = g->k[gi] = g->s[gi] = g->d[gi] = 1;
		if (i < 0)
			continue;
		g->in[gi] = in_sp[i];
		g->k[gi] = kernel ? kernel[i] : w->kernel[i];
		if (kernel && w->n_kernel && w->kernel[i] != kernel[i]) {
			snprintf(err, n, "kernel_shape[%d] = %lld but the weights have %lld", i,
				 (long long)w->kernel[i], (long long)kernel[i]);
			return CPU_E_INVALID;
		}
		if (g->k[gi] < 1) {
			snprintf(err, n, "kernel dim %d is %lld", i, (long long)g->k[gi]);
			return CPU_E_INVALID;
		}
		g->s[gi] = w->n_strides ? w->strides[i] : 1;
		g->d[gi] = w->n_dilations ? w->dilations[i] : 1;
		rc = dim_geom(w, nsp, i, gi, g, err, n);
		if (rc)
			return rc;
	}
	return 0;
}
