/*
 * pad: ONNX Pad (constant, reflect, edge, wrap; pads as an attribute
 * before opset 11, as an input after, with the axes input of opset 18;
 * negative pads crop) and CenterCropPad (crop or zero-pad each axis around
 * its centre).  Both describe every output axis by a map from output to
 * input index (-1: the fill value) and copy elements by size, so every
 * dtype works.
 */
#include <stdio.h>

#include "tensor_ops.h"

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* A stretch of the last axis: n outputs from input index `src` on
 * (consecutive), or of the fill value (src < 0). */
typedef struct pad_run {
	int64_t n, src;
} pad_run;

/* The last axis' map as stretches (at most dims[last] of them, into runs);
 * returns how many. */
static int64_t last_axis_runs(const int64_t *map, int64_t n, pad_run *runs)
{
	int64_t nr = 0;

	for (int64_t j = 0; j < n;) {
		int64_t k = j + 1;

		if (map[j] < 0)
			while (k < n && map[k] < 0)
				k++;
		else
			while (k < n && map[k] == map[k - 1] + 1)
				k++;
		runs[nr].n = k - j;
		runs[nr].src = map[j] < 0 ? -1 : map[j];
		nr++;
		j = k;
	}
	return nr;
}

/* Copies X into Y (rank r) where map[d][o] is the input index of output o
 * on axis d, or -1 for fill: each output row as its last axis' stretches,
 * a copied stretch one memcpy (Inception's Pad before AveragePool took
 * 0.65 ms a node element by element).  runs: dims[last] entries. */
static void mapped_copy(const cpu_tensor *X, cpu_tensor *Y, int64_t *const *map, const void *fill,
			pad_run *runs)
{
	int64_t xs[CPU_MAX_RANK], pos[CPU_MAX_RANK] = {0}, rows = 1, nr, W;
	int r = Y->rank, last = r - 1;
	size_t es = cpu_dtype_size(X->dtype);
	char *y = Y->data;
	int zero = 1;

	if (r == 0) {
		tensor_copy_elem(y, X->data, es);
		return;
	}
	for (size_t b = 0; b < es; b++)
		zero &= ((const unsigned char *)fill)[b] == 0;
	tensor_strides(r, X->dims, xs);
	for (int d = 0; d < last; d++)
		rows *= Y->dims[d];
	W = Y->dims[last];
	nr = last_axis_runs(map[last], W, runs);
	for (int64_t row = 0; row < rows; row++) {
		int64_t off = 0;
		int outside = 0;
		for (int d = 0; d < last; d++) {
			outside |= map[d][pos[d]] < 0;
			off += map[d][pos[d]] * xs[d];
		}
		for (int64_t t = 0; t < (outside ? 1 : nr); t++) {
			int64_t n = outside ? W : runs[t].n;

			if (!outside && runs[t].src >= 0)
				memcpy(y, (const char *)X->data + (size_t)(off + runs[t].src) * es,
				       (size_t)n * es);
			else if (zero)
				memset(y, 0, (size_t)n * es);
			else
				for (int64_t j = 0; j < n; j++)
					memcpy(y + (size_t)j * es, fill, es);
			y += (size_t)n * es;
		}
		for (int d = last - 1; d >= 0 && ++pos[d] == Y->dims[d]; d--)
			pos[d] = 0;
	}
}

/* mapped_copy with its stretches in the node's scratch. */
static int copy_out(cpu_ctx *ctx, const cpu_tensor *X, cpu_tensor *Y, int64_t *const *map,
		    const void *fill)
{
	pad_run *runs = cpu_scratch(ctx, sizeof(pad_run) *
					   (size_t)(Y->rank ? Y->dims[Y->rank - 1] + 1 : 1));

	if (!runs)
		return CPU_E_NOMEM;
	mapped_copy(X, Y, map, fill, runs);
	return 0;
}

static int64_t pad_source(int mode, int64_t i, int64_t n)
{
	int64_t period;
	if (i >= 0 && i < n)
		return i;
	switch (mode) {
	case PAD_EDGE:
		return i < 0 ? 0 : n - 1;
	case PAD_REFLECT:
		if (n == 1)
			return 0;
		period = 2 * (n - 1);
		i %= period;
		if (i < 0)
			i += period;
		return i < n ? i : period - i;
	case PAD_WRAP:
		i %= n;
		return i < 0 ? i + n : i;
	default:
		return -1;
	}
}

static int pad_mode(const Onnx__NodeProto *p)
{
	static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
	char s[32];
	if (!cpu_attr_str(p, "mode", s, sizeof(s)))
		return PAD_CONSTANT;
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* pads over every axis (begin..., end...) from the attribute or the
 * pads/axes inputs. */
static int pad_read(cpu_ctx *ctx, int rank, int64_t *pads)
{
	int64_t v[2 * CPU_MAX_RANK], axes[CPU_MAX_RANK], n, na;
	const int64_t *a;
	memset(pads, 0, sizeof(int64_t) * 2 * (size_t)rank);
	if (ctx->node->opset < 11) {
		n = (int64_t)cpu_attr_ints(ctx->node->proto, ctx->node->opset < 2 ? "paddings" : "pads",
					   &a);
		if (n != 2 * rank)
			return cpu_fail(ctx, CPU_E_INVALID, "pads has %lld values for rank %d",
					(long long)n, rank);
		if (n)
			memcpy(pads, a, sizeof(int64_t) * (size_t)n);
		return 0;
	}
	if ((n = tensor_input_ints(ctx, 1, v, 2 * CPU_MAX_RANK, 0)) < 0 ||
	    (na = tensor_input_ints(ctx, 3, axes, CPU_MAX_RANK, 1)) < 0)
		return CPU_E_INVALID;
	if (!cpu_input(ctx, 3))
		for (na = 0; na < rank; na++)
			axes[na] = na;
	if (n != 2 * na)
		return cpu_fail(ctx, CPU_E_INVALID, "pads has %lld values for %lld axes",
				(long long)n, (long long)na);
	for (int64_t i = 0; i < na; i++) {
		int d = cpu_norm_axis(axes[i], rank);
		if (d < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
					(long long)axes[i], rank);
		pads[d] = v[i];
		pads[rank + d] = v[na + i];
	}
	return 0;
}

/* The constant: input 2 (same dtype as X) from opset 11, else the value
 * attribute. */
static int pad_fill(cpu_ctx *ctx, const cpu_tensor *X, unsigned char *fill)
{
	const cpu_tensor *V = cpu_input(ctx, 2);
	memset(fill, 0, 16);
	if (ctx->node->opset < 11) {
		tensor_store_f64(X->dtype, fill, 0, cpu_attr_float(ctx->node->proto, "value", 0));
		return 0;
	}
	if (!V || cpu_numel(V) == 0)
		return 0;
	if (V->dtype != X->dtype || cpu_numel(V) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "constant_value must be one %s",
				cpu_dtype_name(X->dtype));
	memcpy(fill, V->data, cpu_dtype_size(X->dtype));
	return 0;
}

static int pad_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t pads[2 * CPU_MAX_RANK], dims[CPU_MAX_RANK], *map[CPU_MAX_RANK];
	unsigned char fill[16];
	int mode = pad_mode(ctx->node->proto), rc = 0;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (mode < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "unknown pad mode");
	if ((rc = pad_read(ctx, X->rank, pads)) != 0 || (rc = pad_fill(ctx, X, fill)) != 0)
		return rc;
	for (int d = 0; d < X->rank; d++) {
		int64_t pb = pads[d], pe = pads[X->rank + d];
		if (pb < -X->dims[d] || pe < -X->dims[d] || pb > INT32_MAX || pe > INT32_MAX ||
		    (dims[d] = X->dims[d] + pb + pe) < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "pads %lld, %lld do not fit axis %d of %lld",
					(long long)pb, (long long)pe, d, (long long)X->dims[d]);
		if (X->dims[d] == 0 && dims[d] > 0 && mode != PAD_CONSTANT)
			return cpu_fail(ctx, CPU_E_INVALID, "cannot pad empty axis %d in this mode", d);
		if (!(map[d] = cpu_scratch(ctx, sizeof(int64_t) * (size_t)dims[d] + 1)))
			return CPU_E_NOMEM;
		for (int64_t o = 0; o < dims[d]; o++)
			map[d][o] = pad_source(mode, o - pb, X->dims[d]);
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	return cpu_numel(Y) > 0 ? copy_out(ctx, X, Y, map, fill) : 0;
}

static int crop_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t shape[CPU_MAX_RANK], dims[CPU_MAX_RANK], *map[CPU_MAX_RANK], n;
	const int64_t *axes;
	size_t na = cpu_attr_ints(ctx->node->proto, "axes", &axes);
	unsigned char fill[16] = {0};
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((n = tensor_input_ints(ctx, 1, shape, CPU_MAX_RANK, 0)) < 0)
		return CPU_E_INVALID;
	if ((na ? (int64_t)na : X->rank) != n)
		return cpu_fail(ctx, CPU_E_INVALID, "shape has %lld values for %d axes",
				(long long)n, na ? (int)na : X->rank);
	memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	for (int64_t i = 0; i < n; i++) {
		int d = na ? cpu_norm_axis(axes[i], X->rank) : (int)i;
		if (d < 0 || shape[i] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "bad axis or negative size at %lld",
					(long long)i);
		dims[d] = shape[i];
	}
	for (int d = 0; d < X->rank; d++) {
		/* crop starts (dim - size) / 2 in; a pad puts (size - dim) / 2 first */
		int64_t shift = X->dims[d] >= dims[d] ? (X->dims[d] - dims[d]) / 2
						      : -((dims[d] - X->dims[d]) / 2);
		if (!(map[d] = cpu_scratch(ctx, sizeof(int64_t) * (size_t)dims[d] + 1)))
			return CPU_E_NOMEM;
		for (int64_t o = 0; o < dims[d]; o++)
			map[d][o] = pad_source(PAD_CONSTANT, o + shift, X->dims[d]);
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	return cpu_numel(Y) > 0 ? copy_out(ctx, X, Y, map, fill) : 0;
}

static int pad_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			int n_in, char *why, size_t n)
{
	if (pad_mode(p) < 0) {
		snprintf(why, n, "unknown pad mode");
		return 0;
	}
	return tensor_supports_any(p, opset, dt, n_in, why, n);
}

const cpu_op cpu_op_pad = {
	"Pad", "", 1, CPU_OPSET_MAX, pad_supports, NULL, pad_compute, NULL,
};
const cpu_op cpu_op_centercroppad = {
	"CenterCropPad", "", 18, CPU_OPSET_MAX, tensor_supports_any, NULL, crop_compute, NULL,
};
