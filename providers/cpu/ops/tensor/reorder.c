/*
 * reorder: ops that only permute elements — ReverseSequence (reverse the
 * first seq_len[b] steps of each batch entry), DepthToSpace (DCR and CRD)
 * and SpaceToDepth.  The last two are a 6-D transposed view of the input
 * gathered with cpu_copy_strided.  Every dtype works.
 */
#include <stdio.h>

#include "tensor_ops.h"

static int revseq_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *L;
	int64_t ta = cpu_attr_int(ctx->node->proto, "time_axis", 0);
	int64_t ba = cpu_attr_int(ctx->node->proto, "batch_axis", 1);
	int64_t xs[CPU_MAX_RANK], inner;
	size_t es;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(L = cpu_require(ctx, 1, &rc)))
		return rc;
	if (X->rank < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
		return cpu_fail(ctx, CPU_E_INVALID, "need rank >= 2 and time/batch axes {0, 1}");
	if ((L->dtype != CPU_INT64 && L->dtype != CPU_INT32) || L->rank != 1 ||
	    L->dims[0] != X->dims[ba])
		return cpu_fail(ctx, CPU_E_INVALID, "sequence_lens must be int [batch]");
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	tensor_strides(X->rank, X->dims, xs);
	inner = xs[1];
	if (Y->data != X->data && cpu_numel(X))
		memmove(Y->data, X->data, (size_t)cpu_numel(X) * es);
	for (int64_t b = 0; b < X->dims[ba]; b++) {
		int64_t len = cpu_get_i64(L->dtype, L->data, b);
		if (len < 0 || len > X->dims[ta])
			return cpu_fail(ctx, CPU_E_INVALID, "sequence_lens[%lld] = %lld is outside "
					"[0, %lld]", (long long)b, (long long)len,
					(long long)X->dims[ta]);
		for (int64_t t = 0; t < len; t++) {
			int64_t src = b * xs[ba] + (len - 1 - t) * xs[ta];
			int64_t dst = b * xs[ba] + t * xs[ta];
			memcpy((char *)Y->data + (size_t)dst * es,
			       (const char *)X->data + (size_t)src * es, (size_t)inner * es);
		}
	}
	return 0;
}

/* Gathers X viewed as the 6-D shape v (dense) permuted by perm into Y. */
static void gather6(const cpu_tensor *X, cpu_tensor *Y, const int64_t *v, const int *perm)
{
	int64_t vs[6], dims[6], st[6];
	tensor_strides(6, v, vs);
	for (int i = 0; i < 6; i++) {
		dims[i] = v[perm[i]];
		st[i] = vs[perm[i]];
	}
	cpu_copy_strided(Y->data, X->data, cpu_dtype_size(X->dtype), 6, dims, st);
}

static int block_check(cpu_ctx *ctx, const cpu_tensor *X, int64_t b)
{
	if (X->rank != 4)
		return cpu_fail(ctx, CPU_E_INVALID, "input must be 4-D (got rank %d)", X->rank);
	if (b < 1 || b > 65536)
		return cpu_fail(ctx, CPU_E_INVALID, "blocksize %lld is invalid", (long long)b);
	return 0;
}

static int d2s_compute(cpu_ctx *ctx)
{
	static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3};
	const cpu_tensor *X;
	int64_t b = cpu_attr_int(ctx->node->proto, "blocksize", 0), c, dims[4], v[6];
	int is_crd = tensor_attr_is(ctx->node->proto, "mode", "DCR", "CRD"), rc = 0;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = block_check(ctx, X, b)) != 0)
		return rc;
	if (X->dims[1] % (b * b))
		return cpu_fail(ctx, CPU_E_INVALID, "channels %lld not divisible by blocksize^2",
				(long long)X->dims[1]);
	c = X->dims[1] / (b * b);
	dims[0] = X->dims[0];
	dims[1] = c;
	dims[2] = X->dims[2] * b;
	dims[3] = X->dims[3] * b;
	if (!(Y = cpu_output(ctx, 0, X->dtype, 4, dims)))
		return CPU_E_NOMEM;
	v[0] = X->dims[0];
	v[1] = is_crd ? c : b;
	v[2] = b;
	v[3] = is_crd ? b : c;
	v[4] = X->dims[2];
	v[5] = X->dims[3];
	if (cpu_numel(Y))
		gather6(X, Y, v, is_crd ? crd : dcr);
	return 0;
}

static int s2d_compute(cpu_ctx *ctx)
{
	static const int perm[6] = {0, 3, 5, 1, 2, 4};
	const cpu_tensor *X;
	int64_t b = cpu_attr_int(ctx->node->proto, "blocksize", 0), dims[4], v[6];
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = block_check(ctx, X, b)) != 0)
		return rc;
	if (X->dims[2] % b || X->dims[3] % b)
		return cpu_fail(ctx, CPU_E_INVALID, "spatial dims not divisible by blocksize");
	dims[0] = X->dims[0];
	dims[1] = X->dims[1] * b * b;
	dims[2] = X->dims[2] / b;
	dims[3] = X->dims[3] / b;
	if (!(Y = cpu_output(ctx, 0, X->dtype, 4, dims)))
		return CPU_E_NOMEM;
	v[0] = X->dims[0];
	v[1] = X->dims[1];
	v[2] = dims[2];
	v[3] = b;
	v[4] = dims[3];
	v[5] = b;
	if (cpu_numel(Y))
		gather6(X, Y, v, perm);
	return 0;
}

static int d2s_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	if (!tensor_attr_is(p, "mode", "DCR", "DCR") && !tensor_attr_is(p, "mode", "DCR", "CRD")) {
		snprintf(why, n, "mode must be DCR or CRD");
		return 0;
	}
	return tensor_supports_any(p, opset, dt, n_in, why, n);
}

const cpu_op cpu_op_reversesequence = {
	"ReverseSequence", "", 10, CPU_OPSET_MAX, tensor_supports_any, NULL, revseq_compute, NULL,
};
const cpu_op cpu_op_depthtospace = {
	"DepthToSpace", "", 1, CPU_OPSET_MAX, d2s_supports, NULL, d2s_compute, NULL,
};
const cpu_op cpu_op_spacetodepth = {
	"SpaceToDepth", "", 1, CPU_OPSET_MAX, tensor_supports_any, NULL, s2d_compute, NULL,
};
