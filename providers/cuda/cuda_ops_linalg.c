/*
 * cuda_ops_linalg: MatMul (numpy semantics: 1-D operands promoted, batch
 * dims broadcast) and Gemm (transA/transB, alpha, beta, C broadcast one
 * way) through cuBLAS: cublasSgemmStridedBatched for float32 (TF32 only
 * when ORTMK_CUDA_TF32=1 set the handle's math mode), cublasGemmStrided-
 * BatchedEx for float16 with float32 accumulation.
 *
 * cuBLAS is column-major: a row-major [r, c] matrix is its transpose in
 * column-major with leading dimension c, so Y = op(A) op(B) (row-major) is
 * computed as Y^T = op(B)^T op(A)^T, i.e. cuBLAS's (B, A) with m = N,
 * n = M.  Batch dims fold to as few as possible; the innermost becomes
 * cuBLAS's batch (stride 0 where an operand broadcasts), the others loop.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>

#include "cuda_dev.h"
#include "cuda_ops.h"
#include "dk_ops.h"

typedef struct gemm_desc {
	int32_t dtype;
	int ta, tb;             /* row-major operands transposed */
	int64_t M, N, K;
	float alpha, beta;
	int64_t sa, sb, sc, batch;      /* cuBLAS batch: strides in elements */
} gemm_desc;

static int gemm_call(dk_ctx *c, const gemm_desc *g, const void *A, const void *B, void *C)
{
	cublasHandle_t h = cu_dev(c)->blas;
	cublasOperation_t oa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	int m = (int)g->N, n = (int)g->M, k = (int)g->K;
	int lda = (int)(g->tb ? g->K : g->N), ldb = (int)(g->ta ? g->M : g->K);
	cublasStatus_t st;

	lda = lda > 1 ? lda : 1;
	ldb = ldb > 1 ? ldb : 1;
	cublasSetStream(h, c->stream);
	if (g->dtype == CU_FLOAT)
		st = cublasSgemmStridedBatched(h, ob, oa, m, n, k, &g->alpha, B, lda, g->sb, A, ldb,
					       g->sa, &g->beta, C, m > 1 ? m : 1, g->sc,
					       (int)g->batch);
	else
		st = cublasGemmStridedBatchedEx(h, ob, oa, m, n, k, &g->alpha, B, CUDA_R_16F, lda,
						g->sb, A, CUDA_R_16F, ldb, g->sa, &g->beta, C,
						CUDA_R_16F, m > 1 ? m : 1, g->sc, (int)g->batch,
						CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return dk_fail(c, EP_E_INTERNAL, "cuBLAS gemm %lldx%lldx%lld (batch %lld): %s",
			       (long long)g->M, (long long)g->N, (long long)g->K,
			       (long long)g->batch, cublasGetStatusString(st));
	return 0;
}

static int dims_fit(const gemm_desc *g)
{
	return g->M <= INT_MAX && g->N <= INT_MAX && g->K <= INT_MAX && g->batch <= INT_MAX;
}

/* Loops over every folded batch dim but the last; cuBLAS batches that. */
static int matmul_batches(dk_ctx *c, gemm_desc *g, int k, const int64_t *bd, const int64_t *sa,
			  const int64_t *sb, const dk_val *A, const dk_val *B, const dk_val *Y)
{
	size_t es = dk_esz(A->dtype);
	int64_t outer = 1, idx[EP_MAX_RANK] = {0};

	g->batch = k ? bd[k - 1] : 1;
	g->sa = k ? sa[k - 1] : 0;
	g->sb = k ? sb[k - 1] : 0;
	g->sc = g->M * g->N;
	for (int i = 0; i + 1 < k; i++)
		outer *= bd[i];
	if (!dims_fit(g))
		return dk_fail(c, EP_E_UNSUPPORTED, "dims exceed cuBLAS's int range");
	for (int64_t o = 0; o < outer; o++) {
		int64_t ao = 0, bo = 0, rem = o;
		int rc;

		for (int i = k - 2; i >= 0; i--) {
			idx[i] = rem % bd[i];
			rem /= bd[i];
			ao += idx[i] * sa[i];
			bo += idx[i] * sb[i];
		}
		rc = gemm_call(c, g, (const char *)A->dev.ptr + ao * es, (const char *)B->dev.ptr + bo * es,
			       (char *)Y->dev.ptr + o * g->batch * g->sc * es);
		if (rc)
			return rc;
	}
	return 0;
}

static int matmul_run(dk_ctx *c)
{
	const dk_val *A = dk_in(c, 0), *B = dk_in(c, 1), *Y;
	gemm_desc g = {.alpha = 1.0f};
	dk_matmul m;
	int k;

	if (dk_matmul_out(c, &m, &Y))
		return c->status;
	if (!Y->numel)
		return 0;
	g.dtype = A->dtype;
	g.M = m.M;
	g.K = m.K;
	g.N = m.N;
	k = dk_fold_strides(m.nb, m.bd, m.sa, m.sb, m.bd);
	return matmul_batches(c, &g, k, m.bd, m.sa, m.sb, A, B, Y);
}

/* Y = C broadcast to [M, N] (Gemm's bias, scaled by beta in the product). */
static int fill_bias(dk_ctx *c, const dk_val *C, const dk_val *Y)
{
	int64_t dims[EP_MAX_RANK], st[2];
	cuk_bcast bc = {.rank = 2};
	char s1[128];
	int r;

	if (C->dtype != Y->dtype || C->rank > 2 ||
	    (r = onnx_broadcast(C->rank, C->dims, 2, Y->dims, dims)) < 0 || dims[0] != Y->dims[0] ||
	    dims[1] != Y->dims[1])
		return dk_fail(c, EP_E_INVALID, "C %s does not broadcast to [%lld,%lld]",
			       dk_shape_str(C->rank, C->dims, s1, sizeof(s1)),
			       (long long)Y->dims[0], (long long)Y->dims[1]);
	dk_bcast_strides(C->rank, C->dims, 2, st);
	bc.dims[0] = Y->dims[0];
	bc.dims[1] = Y->dims[1];
	bc.sa[0] = st[0];
	bc.sa[1] = st[1];
	return cu_check(c, cuk_binary(c->stream, Y->dtype, CUK_B_FIRST, C->dev.ptr, C->dev.ptr, Y->dev.ptr,
				      Y->numel, &bc), "bias broadcast");
}

static int gemm_run(dk_ctx *c)
{
	const Onnx__NodeProto *pr = c->node->proto;
	const dk_val *A = dk_in(c, 0), *B = dk_in(c, 1), *C = dk_in(c, 2), *Y;
	gemm_desc g = {.ta = proto_attr_int(pr, "transA", 0) != 0, .tb = proto_attr_int(pr, "transB", 0) != 0,
		       .alpha = proto_attr_float(pr, "alpha", 1.0f), .batch = 1};
	int64_t dims[2];
	char s1[128], s2[128];
	int rc;

	if (!A || !B || A->rank != 2 || B->rank != 2 || !dk_dev_dtype(A->dtype) ||
	    B->dtype != A->dtype)
		return dk_fail(c, EP_E_INVALID, "A and B must be 2-D float of one dtype");
	g.dtype = A->dtype;
	g.M = A->dims[g.ta];
	g.K = A->dims[!g.ta];
	g.N = B->dims[!g.tb];
	if (B->dims[g.tb] != g.K)
		return dk_fail(c, EP_E_INVALID, "%s x %s do not multiply (transA=%d, transB=%d)",
			       dk_shape_str(2, A->dims, s1, sizeof(s1)),
			       dk_shape_str(2, B->dims, s2, sizeof(s2)), g.ta, g.tb);
	dims[0] = g.M;
	dims[1] = g.N;
	Y = dk_out(c, 0, A->dtype, 2, dims);
	if (!Y)
		return c->status;
	if (!Y->numel)
		return 0;
	if (C) {
		rc = fill_bias(c, C, Y);
		if (rc)
			return rc;
		g.beta = proto_attr_float(pr, "beta", 1.0f);
	}
	g.sc = g.M * g.N;
	if (!dims_fit(&g))
		return dk_fail(c, EP_E_UNSUPPORTED, "dims exceed cuBLAS's int range");
	return gemm_call(c, &g, A->dev.ptr, B->dev.ptr, Y->dev.ptr);
}

const dk_op cu_ops_linalg[] = {
	{"MatMul", 1, 22, dk_binary_supports, NULL, matmul_run, NULL, 0, NULL, NULL},
	{"Gemm", 7, 22, dk_gemm_supports, NULL, gemm_run, NULL, 0, NULL, NULL},
	{0},
};
