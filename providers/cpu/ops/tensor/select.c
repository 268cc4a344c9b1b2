/*
 * select: ONNX NonZero (the coordinates of the nonzero elements, as
 * [rank, n] int64), Compress (the slices along an axis, or the elements of
 * the flattened input, where a bool condition is true) and OneHot (an
 * on/off tensor with one new axis).  NonZero and Compress move elements by
 * size, so every dtype works; a float is nonzero unless it is +0 or -0.
 * NonZero of bytes (bool, int8) skips zero words of a sparse mask and
 * takes a dense one row by row.
 */
#include "tensor_ops.h"

static int is_nonzero(int32_t dtype, const unsigned char *p, size_t es)
{
	unsigned char last = p[es - 1];
	/* floats: ignore the sign bit (little-endian: the top bit of the last
	 * byte), so -0 counts as zero */
	if (cpu_dtype_is_float(dtype))
		last &= 0x7f;
	if (last)
		return 1;
	for (size_t k = 0; k + 1 < es; k++)
		if (p[k])
			return 1;
	return 0;
}

static int nonzero_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t n, count = 0, dims[2], pos[CPU_MAX_RANK] = {0}, col = 0;
	int rank, rc = 0;
	size_t es;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	n = cpu_numel(X);
	es = cpu_dtype_size(X->dtype);
	int bytes = es == 1 && !cpu_dtype_is_float(X->dtype);   /* bool, (u)int8 */

	if (bytes)
		for (int64_t i = 0; i < n; i++)
			count += ((const unsigned char *)X->data)[i] != 0;
	else
		for (int64_t i = 0; i < n; i++)
			count += is_nonzero(X->dtype, (const unsigned char *)X->data + (size_t)i * es,
					    es);
	rank = X->rank ? X->rank : 1;   /* a scalar reads as one element of rank 1 */
	dims[0] = rank;
	dims[1] = count;
	if (!(Y = cpu_output(ctx, 0, CPU_INT64, 2, dims)))
		return CPU_E_NOMEM;
	if (bytes && count * 8 < n) {
		/* a sparse mask (RetinaNet's 1.3 M scores over a threshold): zero
		 * words skipped eight bytes at a time, a hit's coordinates
		 * divided out of its index */
		const unsigned char *p = X->data;

		for (int64_t i = 0; i < n; i++) {
			uint64_t w;

			if (i + 8 <= n && (memcpy(&w, p + i, 8), w == 0)) {
				i += 7;
				continue;
			}
			if (!p[i])
				continue;
			for (int64_t d = X->rank - 1, r = i; d >= 0; d--) {
				((int64_t *)Y->data)[d * count + col] = r % X->dims[d];
				r /= X->dims[d];
			}
			col++;
		}
		return 0;
	}
	if (bytes && X->rank >= 1) {
		/* row by row along the last axis: the row's other coordinates
		 * written from pos, the last one from the column */
		const unsigned char *p = X->data;
		int64_t W = X->dims[X->rank - 1];

		for (int64_t r = 0; W && r < n / W; r++) {
			for (int64_t j = 0; j < W; j++) {
				if (!p[r * W + j])
					continue;
				for (int d = 0; d < X->rank - 1; d++)
					((int64_t *)Y->data)[d * count + col] = pos[d];
				((int64_t *)Y->data)[(X->rank - 1) * count + col] = j;
				col++;
			}
			for (int d = X->rank - 2; d >= 0 && ++pos[d] == X->dims[d]; d--)
				pos[d] = 0;
		}
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		if (is_nonzero(X->dtype, (const unsigned char *)X->data + (size_t)i * es, es)) {
			for (int d = 0; d < rank; d++)
				((int64_t *)Y->data)[d * count + col] = X->rank ? pos[d] : 0;
			col++;
		}
		for (int d = X->rank - 1; d >= 0 && ++pos[d] == X->dims[d]; d--)
			pos[d] = 0;
	}
	return 0;
}

static int compress_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *C;
	const Onnx__NodeProto *p = ctx->node->proto;
	int64_t dims[CPU_MAX_RANK], outer = 1, inner = 1, len, nc, kept = 0;
	int axis = -1, rank, rc = 0;
	size_t es;
	cpu_tensor *Y;
	char *y;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(C = cpu_require(ctx, 1, &rc)))
		return rc;
	if (C->dtype != CPU_BOOL || C->rank != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "condition must be a 1-D bool tensor");
	if (cpu_attr(p, "axis") &&
	    (axis = cpu_norm_axis(cpu_attr_int(p, "axis", 0), X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis out of range for rank %d", X->rank);
	es = cpu_dtype_size(X->dtype);
	len = axis < 0 ? cpu_numel(X) : X->dims[axis];
	for (int d = 0; axis >= 0 && d < X->rank; d++) {
		if (d < axis)
			outer *= X->dims[d];
		else if (d > axis)
			inner *= X->dims[d];
	}
	nc = C->dims[0] < len ? C->dims[0] : len;
	for (int64_t i = 0; i < nc; i++)
		kept += ((const uint8_t *)C->data)[i] != 0;
	rank = axis < 0 ? 1 : X->rank;
	if (axis >= 0)
		memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	dims[axis < 0 ? 0 : axis] = kept;
	if (!(Y = cpu_output(ctx, 0, X->dtype, rank, dims)))
		return CPU_E_NOMEM;
	y = Y->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < nc; i++) {
			size_t block = (size_t)inner * es;
			if (!((const uint8_t *)C->data)[i])
				continue;
			memcpy(y, (const char *)X->data + (size_t)(o * len + i) * block, block);
			y += block;
		}
	return 0;
}

/* OneHot's depth and off/on values; 0 or an error. */
static int onehot_read(cpu_ctx *ctx, const cpu_tensor *D, const cpu_tensor *V, int64_t *depth)
{
	double d;
	if (cpu_read_scalar(D, &d) || !(d >= 1) || d > 1e12)
		return cpu_fail(ctx, CPU_E_INVALID, "depth must be one value >= 1");
	*depth = (int64_t)d;
	if (V->rank != 1 || V->dims[0] != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "values must be [off_value, on_value]");
	if (V->dtype == CPU_STRING || cpu_dtype_size(V->dtype) == 0)
		return cpu_check_dtype(ctx, V, 2, CPU_TYPES_ALL & ~CPU_BIT(CPU_STRING));
	return 0;
}

static int onehot_compute(cpu_ctx *ctx)
{
	const cpu_tensor *I, *D, *V;
	int64_t depth = 0, dims[CPU_MAX_RANK], outer = 1, inner = 1, raw;
	int axis, rc = 0;
	size_t es;
	cpu_tensor *Y;

	if (!(I = cpu_require(ctx, 0, &rc)) || !(D = cpu_require(ctx, 1, &rc)) ||
	    !(V = cpu_require(ctx, 2, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, I, 0, CPU_TYPES_NUMERIC | CPU_BIT(CPU_UINT64))) ||
	    (rc = onehot_read(ctx, D, V, &depth)))
		return rc;
	raw = cpu_attr_int(ctx->node->proto, "axis", -1);
	if (I->rank + 1 > CPU_MAX_RANK || (axis = cpu_norm_axis(raw, I->rank + 1)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, I->rank + 1);
	for (int d = 0, k = 0; d <= I->rank; d++) {
		dims[d] = d == axis ? depth : I->dims[k++];
		if (d < axis)
			outer *= dims[d];
		else if (d > axis)
			inner *= dims[d];
	}
	if (!(Y = cpu_output(ctx, 0, V->dtype, I->rank + 1, dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(V->dtype);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < depth; k++)
			for (int64_t in = 0; in < inner; in++) {
				int64_t v = cpu_get_i64(I->dtype, I->data, o * inner + in);
				int on = v == k || (v < 0 && v + depth == k);
				tensor_copy_elem((char *)Y->data + (size_t)((o * depth + k) * inner + in) * es,
						 (const char *)V->data + (on ? es : 0), es);
			}
	return 0;
}

const cpu_op cpu_op_nonzero = {
	"NonZero", "", 9, CPU_OPSET_MAX, tensor_supports_any, NULL, nonzero_compute, NULL,
};
const cpu_op cpu_op_compress = {
	"Compress", "", 9, CPU_OPSET_MAX, tensor_supports_any, NULL, compress_compute, NULL,
};
const cpu_op cpu_op_onehot = {
	"OneHot", "", 9, CPU_OPSET_MAX, NULL, NULL, onehot_compute, NULL,
};
