/*
 * reshape: the ops that only relabel a dense buffer's shape — Reshape (0 and
 * -1, allowzero; shape attribute before opset 5), Flatten, Squeeze and
 * Unsqueeze (axes attribute before opset 13, input after), Identity, and
 * Dropout in inference (identity; the optional mask is all true).  Any dtype:
 * the data is copied byte for byte.
 */
#include <string.h>

#include "cpu_ops.h"

static int reshape_dims(cpu_ctx *ctx, const cpu_tensor *X, const int64_t *shape, int64_t n,
			int allowzero, int64_t *dims)
{
	int64_t known = 1, infer = -1, total = cpu_numel(X);
	for (int64_t i = 0; i < n; i++) {
		dims[i] = shape[i];
		if (shape[i] == 0 && !allowzero) {
			if (i >= X->rank)
				return cpu_fail(ctx, CPU_E_INVALID, "shape[%lld] = 0 but the input "
						"has rank %d", (long long)i, X->rank);
			dims[i] = X->dims[i];
		}
		if (dims[i] == -1) {
			if (infer >= 0)
				return cpu_fail(ctx, CPU_E_INVALID, "more than one -1 in shape");
			infer = i;
		} else if (dims[i] < 0) {
			return cpu_fail(ctx, CPU_E_INVALID, "shape[%lld] = %lld", (long long)i,
					(long long)dims[i]);
		} else {
			if (dims[i] && known > INT64_MAX / dims[i])
				return cpu_fail(ctx, CPU_E_INVALID, "shape overflows");
			known *= dims[i];
		}
	}
	if (infer >= 0) {
		if (known == 0 || total % known != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "cannot infer -1: %lld elements into "
					"blocks of %lld", (long long)total, (long long)known);
		dims[infer] = total / known;
		known = total;
	}
	if (known != total)
		return cpu_fail(ctx, CPU_E_INVALID, "cannot reshape %lld elements into %lld",
				(long long)total, (long long)known);
	return 0;
}

static int reshape_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *S;
	const int64_t *attr;
	int64_t shape[CPU_MAX_RANK], dims[CPU_MAX_RANK], n;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (ctx->node->opset < 5) {
		n = (int64_t)cpu_attr_ints(ctx->node->proto, "shape", &attr);
		if (n > CPU_MAX_RANK)
			return cpu_fail(ctx, CPU_E_INVALID, "shape has %lld dims", (long long)n);
		for (int64_t i = 0; i < n; i++)
			shape[i] = attr[i];
	} else {
		if (!(S = cpu_require(ctx, 1, &rc)))
			return rc;
		n = cpu_read_ints(S, shape, CPU_MAX_RANK);
		if (n < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "shape must be a 1-D int64 tensor of at "
					"most %d values", CPU_MAX_RANK);
	}
	rc = reshape_dims(ctx, X, shape, n, (int)cpu_attr_int(ctx->node->proto, "allowzero", 0),
			  dims);
	return rc ? rc : cpu_copy_to_output(ctx, X, (int)n, dims);
}

static int flatten_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t axis = cpu_attr_int(ctx->node->proto, "axis", 1), dims[2] = {1, 1};
	int rc = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if (axis < 0)
		axis += X->rank;
	if (axis < 0 || axis > X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)cpu_attr_int(ctx->node->proto, "axis", 1), X->rank);
	for (int d = 0; d < X->rank; d++)
		dims[d < axis ? 0 : 1] *= X->dims[d];
	return cpu_copy_to_output(ctx, X, 2, dims);
}

/* Squeeze/Unsqueeze axes: attribute before opset 13, input 1 after.
 * Returns the count (-1 when absent) or sets *rc. */
static int64_t read_axes(cpu_ctx *ctx, int64_t *axes, int *rc)
{
	const int64_t *attr;
	int64_t n;
	if (ctx->node->opset < 13) {
		if (!cpu_attr(ctx->node->proto, "axes"))
			return -1;
		n = (int64_t)cpu_attr_ints(ctx->node->proto, "axes", &attr);
		if (n > CPU_MAX_RANK)
			n = -2;
		for (int64_t i = 0; i >= 0 && i < n; i++)
			axes[i] = attr[i];
	} else {
		if (!cpu_input(ctx, 1))
			return -1;
		n = cpu_read_ints(cpu_input(ctx, 1), axes, CPU_MAX_RANK);
	}
	if (n < 0)
		*rc = cpu_fail(ctx, CPU_E_INVALID, "axes must be at most %d int64 values",
			       CPU_MAX_RANK);
	return n;
}

static int squeeze_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t axes[CPU_MAX_RANK], dims[CPU_MAX_RANK], n;
	unsigned char drop[CPU_MAX_RANK] = {0};
	int rc = 0, r = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	n = read_axes(ctx, axes, &rc);
	if (rc)
		return rc;
	for (int d = 0; n < 0 && d < X->rank; d++)
		drop[d] = X->dims[d] == 1;
	for (int64_t i = 0; i < n; i++) {
		int a = cpu_norm_axis(axes[i], X->rank);
		if (a < 0 || X->dims[a] != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "cannot squeeze axis %lld of shape rank %d",
					(long long)axes[i], X->rank);
		drop[a] = 1;
	}
	for (int d = 0; d < X->rank; d++)
		if (!drop[d])
			dims[r++] = X->dims[d];
	return cpu_copy_to_output(ctx, X, r, dims);
}

static int unsqueeze_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t axes[CPU_MAX_RANK], dims[CPU_MAX_RANK], n;
	unsigned char ins[CPU_MAX_RANK] = {0};
	int rc = 0, r, src = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	n = read_axes(ctx, axes, &rc);
	if (rc)
		return rc;
	if (n < 0 || X->rank + n > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "axes missing or result rank above %d",
				CPU_MAX_RANK);
	r = X->rank + (int)n;
	for (int64_t i = 0; i < n; i++) {
		int a = cpu_norm_axis(axes[i], r);
		if (a < 0 || ins[a])
			return cpu_fail(ctx, CPU_E_INVALID, "bad or repeated axis %lld for rank %d",
					(long long)axes[i], r);
		ins[a] = 1;
	}
	for (int d = 0; d < r; d++)
		dims[d] = ins[d] ? 1 : X->dims[src++];
	return cpu_copy_to_output(ctx, X, r, dims);
}

static int identity_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int rc = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	return cpu_copy_to_output(ctx, X, X->rank, X->dims);
}

static int dropout_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *R = cpu_input(ctx, 1), *T = cpu_input(ctx, 2);
	cpu_tensor *mask;
	int32_t mdt = ctx->node->opset >= 10 ? CPU_BOOL : CPU_FLOAT;
	double training = 0.0, ratio = 0.5;
	int rc = 0;
	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((T && cpu_read_scalar(T, &training) != 0) || (R && cpu_read_scalar(R, &ratio) != 0))
		return cpu_fail(ctx, CPU_E_INVALID, "ratio and training_mode must be scalars");
	/* training with ratio 0 drops nothing: still the identity */
	if (training != 0.0 && ratio != 0.0)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "training_mode with ratio %g is not supported",
				ratio);
	if ((rc = cpu_copy_to_output(ctx, X, X->rank, X->dims)) != 0)
		return rc;
	if (ctx->n_out < 2)
		return 0;
	if (mdt != CPU_BOOL)
		mdt = X->dtype;   /* before opset 10 the mask has the input's type */
	if (!(mask = cpu_output(ctx, 1, mdt, X->rank, X->dims)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < cpu_numel(X); i++)
		cpu_set_i64(mdt, mask->data, i, 1);
	return 0;
}

static int any_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

const cpu_op cpu_op_reshape = { "Reshape", "", 1, CPU_OPSET_MAX, any_supports, NULL, reshape_compute, NULL };
const cpu_op cpu_op_flatten = { "Flatten", "", 1, CPU_OPSET_MAX, any_supports, NULL, flatten_compute, NULL };
const cpu_op cpu_op_squeeze = { "Squeeze", "", 1, CPU_OPSET_MAX, any_supports, NULL, squeeze_compute, NULL };
const cpu_op cpu_op_unsqueeze = { "Unsqueeze", "", 1, CPU_OPSET_MAX, any_supports, NULL, unsqueeze_compute, NULL };
const cpu_op cpu_tensor_op_identity = { "Identity", "", 1, CPU_OPSET_MAX, any_supports, NULL, identity_compute, NULL };
const cpu_op cpu_op_dropout = { "Dropout", "", 1, CPU_OPSET_MAX, any_supports, NULL, dropout_compute, NULL };
