/*
 * feature: ArrayFeatureExtractor (columns of X picked by an int64 index
 * tensor, along the last axis; a 1-D X gives [1, k] as ONNX Runtime does)
 * and FeatureVectorizer (inputs' rows concatenated into float rows, each
 * input padded with zeros or cut to its inputdimensions entry).
 */
#include <stdio.h>
#include <string.h>

#include "ml_ops.h"

static int afe_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM | CPU_BIT(CPU_STRING), why, n) &&
		cpu_supports_dtype(dt, n_in, 1, CPU_BIT(CPU_INT64), why, n);
}

static int afe_compute(cpu_ctx *ctx)
{
	int rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc), *I = X ? cpu_require(ctx, 1, &rc) : NULL;
	int64_t dims[CPU_MAX_RANK], stride, k, rows;
	size_t es;
	cpu_tensor *Z;

	if (!I || (rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM | CPU_BIT(CPU_STRING))) ||
	    (rc = cpu_check_dtype(ctx, I, 1, CPU_BIT(CPU_INT64))))
		return rc;
	if (X->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "X must have at least one dimension");
	stride = X->dims[X->rank - 1];
	k = cpu_numel(I);
	if (k == 0)
		return cpu_fail(ctx, CPU_E_INVALID, "the index tensor is empty");
	for (int64_t j = 0; j < k; j++) {
		int64_t v = ((const int64_t *)I->data)[j];

		if (v < 0 || v >= stride)
			return cpu_fail(ctx, CPU_E_INVALID, "index %lld is out of [0, %lld)",
					(long long)v, (long long)stride);
	}
	if (X->rank == 1) {
		dims[0] = 1;
		dims[1] = k;
	} else {
		memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
		dims[X->rank - 1] = k;
	}
	if (!(Z = cpu_output(ctx, 0, X->dtype, X->rank == 1 ? 2 : X->rank, dims)))
		return CPU_E_NOMEM;
	es = X->dtype == CPU_STRING ? sizeof(char *) : cpu_dtype_size(X->dtype);
	rows = stride ? cpu_numel(X) / stride : 0;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < k; j++)
			memcpy((char *)Z->data + (size_t)(r * k + j) * es,
			       (const char *)X->data +
			       (size_t)(r * stride + ((const int64_t *)I->data)[j]) * es, es);
	return 0;
}

static int fv_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, ML_TYPES_NUM, why, n))
			return 0;
	return 1;
}

static int fv_compute(cpu_ctx *ctx)
{
	const int64_t *fd;
	size_t nd = cpu_attr_ints(ctx->node->proto, "inputdimensions", &fd);
	int64_t total = 0, N = -1, dims[2], off = 0;
	cpu_tensor *Y;
	float *y;
	int rc;

	if ((int64_t)nd != ctx->n_in)
		return cpu_fail(ctx, CPU_E_INVALID, "%d inputs but %zu inputdimensions", ctx->n_in,
				nd);
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *X = cpu_require(ctx, i, &rc);
		int64_t rows;

		if (!X || (rc = cpu_check_dtype(ctx, X, i, ML_TYPES_NUM)))
			return rc;
		if (X->rank < 1 || fd[i] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d must have at least one "
					"dimension and a non-negative size", i);
		rows = X->rank == 1 ? 1 : X->dims[0];
		if (N >= 0 && rows != N)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d has %lld rows, input 0 %lld", i,
					(long long)rows, (long long)N);
		N = rows;
		total += fd[i];
	}
	dims[0] = N;
	dims[1] = total;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	y = Y->data;
	memset(y, 0, (size_t)(N * total) * sizeof(float));
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *X = cpu_input(ctx, i);
		int64_t width = X->rank == 1 ? X->dims[0] : (N ? cpu_numel(X) / N : 0);
		int64_t take = width < fd[i] ? width : fd[i];
		const float *x = ml_as_float(ctx, X);

		if (!x)
			return CPU_E_NOMEM;
		for (int64_t r = 0; r < N; r++)
			memcpy(y + r * total + off, x + r * width, (size_t)take * sizeof(float));
		off += fd[i];
	}
	return 0;
}

const cpu_op cpu_op_ml_array_feature_extractor = {
	"ArrayFeatureExtractor", ML_DOMAIN, 1, ML_OPSET_MAX, afe_supports, NULL, afe_compute, NULL,
};
const cpu_op cpu_op_ml_feature_vectorizer = {
	"FeatureVectorizer", ML_DOMAIN, 1, ML_OPSET_MAX, fv_supports, NULL, fv_compute, NULL,
};
