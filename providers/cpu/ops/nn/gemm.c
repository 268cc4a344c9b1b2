/*
 * gemm: the CPU provider's single-precision matrix multiply entry point,
 * used by MatMul, Gemm and Conv (im2col).  The work is done by the packed
 * GEMM in providers/cpu/gemm (per-ISA microkernels chosen from cpuid,
 * BLIS-style blocking); this file keeps the BLAS-like cpu_sgemm signature
 * the ops call (cpu_sgemm_pool: on the intra-op pool), and keeps two shortcuts
 * that beat packing: a single row or a single column of C reads B (or A)
 * in place.  The unblocked loops remain for when the packed B's buffer
 * cannot be allocated.
 *
 * Ops that hold a constant B (weights) can pack it once with gemm_pack_b
 * and call gemm_compute instead (see gemm/gemm.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "gemm.h"
#include "vfloat.h"

static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc)
{
	if (beta == 1.0f)
		return;
	for (int64_t i = 0; i < M; i++) {
		float *c = C + i * ldc;
		if (beta == 0.0f)
			memset(c, 0, (size_t)N * sizeof(float));
		else
			for (int64_t j = 0; j < N; j++)
				c[j] *= beta;
	}
}

/* Dot product with independent partial sums so it vectorizes without
 * -ffast-math. */
static inline float dot(const float *a, int64_t sa, const float *b, int64_t sb, int64_t n)
{
	float part[16] = {0}, s = 0.0f;
	int64_t k = 0;
	if (sa == 1 && sb == 1)
		for (; k + 16 <= n; k += 16)
			for (int t = 0; t < 16; t++)
				part[t] += a[k + t] * b[k + t];
	for (; k < n; k++)
		s += a[k * sa] * b[k * sb];
	for (int t = 0; t < 16; t++)
		s += part[t];
	return s;
}

/* C[j .. j + 8) += alpha * (A . B^T row j + q): eight dots at once, each
 * in its own vector of partial sums, added across by one transpose (a dot
 * at a time, each ending in its own horizontal sum, took 4 us a step of a
 * GRU of 128 units, its 384 x 128 recurrent product). */
static inline __attribute__((always_inline)) void dots8(const float *A, const float *B,
							 int64_t ldb, int64_t K, float alpha,
							 float *C)
{
	vf8 acc[8];
	int64_t k = 0;

	for (int q = 0; q < 8; q++)
		acc[q] = vf_splat(0.0f);
	for (; k + 8 <= K; k += 8) {
		vf8 a = vf_load(A + k);

		for (int q = 0; q < 8; q++)
			acc[q] += a * vf_load(B + q * ldb + k);
	}
	vf_transpose8(acc);
	vf8 s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
	float t[8];

	vf_store(t, s);
	for (int q = 0; q < 8; q++) {
		for (int64_t r = k; r < K; r++)
			t[q] += A[r] * B[q * ldb + r];
		C[q] += alpha * t[q];
	}
}

/* One row of C (M == 1): axpy over rows of B, or dots with rows of B^T. */
CPU_MULTIVERSION
static void gemv_row(int transA, int transB, int64_t N, int64_t K, float alpha,
		     const float *A, int64_t lda, const float *B, int64_t ldb, float *C)
{
	int64_t sa = transA ? lda : 1;
	if (transB) {
		int64_t j = 0;

		if (sa == 1)
			for (; j + 8 <= N; j += 8)
				dots8(A, B + j * ldb, ldb, K, alpha, C + j);
		for (; j < N; j++)
			C[j] += alpha * dot(A, sa, B + j * ldb, 1, K);
		return;
	}
	for (int64_t k = 0; k < K; k++) {
		float a = alpha * A[k * sa];
		const float *b = B + k * ldb;
		for (int64_t j = 0; j < N; j++)
			C[j] += a * b[j];
	}
}

/* One column of C (N == 1): dots of op(A)'s rows with op(B)'s column. */
CPU_MULTIVERSION
static void gemv_col(int transA, int transB, int64_t M, int64_t K, float alpha,
		     const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
		     int64_t ldc)
{
	int64_t sb = transB ? 1 : ldb;
	for (int64_t i = 0; i < M; i++) {
		const float *a = transA ? A + i : A + i * lda;
		C[i * ldc] += alpha * dot(a, transA ? lda : 1, B, sb, K);
	}
}

static void naive(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
		  const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			float s = 0.0f;
			for (int64_t k = 0; k < K; k++)
				s += (transA ? A[k * lda + i] : A[i * lda + k]) *
				     (transB ? B[j * ldb + k] : B[k * ldb + j]);
			C[i * ldc + j] += alpha * s;
		}
}

void cpu_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
	       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
	       float *C, int64_t ldc)
{
	cpu_sgemm_pool(NULL, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cpu_sgemm_pool(struct cpu_pool *pool, int transA, int transB, int64_t M, int64_t N,
		    int64_t K, float alpha, const float *A, int64_t lda, const float *B,
		    int64_t ldb, float beta, float *C, int64_t ldc)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;

	if (M <= 0 || N <= 0)
		return;
	if (K <= 0 || alpha == 0.0f || M == 1 || N == 1) {
		scale_c(M, N, beta, C, ldc);
		if (K <= 0 || alpha == 0.0f)
			return;
		if (M == 1)
			gemv_row(transA, transB, N, K, alpha, A, lda, B, ldb, C);
		else
			gemv_col(transA, transB, M, K, alpha, A, lda, B, ldb, C, ldc);
		return;
	}
	ep.alpha = alpha;
	ep.beta = beta;
	if (gemm_sgemm(pool, GEMM_ISA_AUTO, transA, transB, M, N, K, A, lda, B, ldb, &ep, C,
		       ldc) == 0)
		return;
	scale_c(M, N, beta, C, ldc);   /* no memory to pack B */
	naive(transA, transB, M, N, K, alpha, A, lda, B, ldb, C, ldc);
}
