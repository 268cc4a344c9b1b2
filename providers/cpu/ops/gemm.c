/*
 * gemm: the CPU provider's single-precision matrix multiply, used by MatMul,
 * Gemm and Conv (im2col).  GotoBLAS-style blocking in plain C: op(B) is
 * packed in KC x NC blocks of NR-wide column panels, op(A) (times alpha) in
 * MC x KC blocks of MR-high row panels, and an MR x NR micro-kernel whose
 * loops gcc vectorizes.  The micro-kernel is built for AVX-512, AVX2 and
 * baseline x86-64 and the loader picks one from cpuid (target_clones).
 * Single-row and single-column products skip the packing.
 *
 * A later packed AVX-512 kernel replaces the micro-kernel; callers only see
 * cpu_sgemm.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

enum { MR = 6, NR = 32, KC = 256, MC = 120, NC = 1024 };

/* acc = a_panel (kc x MR) ^T * b_panel (kc x NR); C tile += acc. */
CPU_MULTIVERSION
static void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b,
			 float *restrict c, int64_t ldc, int mr, int nr)
{
	float acc[MR][NR];
	memset(acc, 0, sizeof(acc));
	for (int64_t p = 0; p < kc; p++) {
		const float *bp = b + p * NR;
		const float *ap = a + p * MR;
		for (int i = 0; i < MR; i++)
			for (int j = 0; j < NR; j++)
				acc[i][j] += ap[i] * bp[j];
	}
	if (mr == MR && nr == NR) {
		for (int i = 0; i < MR; i++)
			for (int j = 0; j < NR; j++)
				c[i * ldc + j] += acc[i][j];
		return;
	}
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			c[i * ldc + j] += acc[i][j];
}

/* op(B)[k0:k0+kc, j0:j0+nc] into NR-wide panels, zero-padded. */
static void pack_b(int transB, const float *B, int64_t ldb, int64_t k0, int64_t kc,
		   int64_t j0, int64_t nc, float *out)
{
	for (int64_t jp = 0; jp < nc; jp += NR) {
		int64_t w = nc - jp < NR ? nc - jp : NR;
		float *dst = out + jp * kc;
		for (int64_t p = 0; p < kc; p++) {
			float *d = dst + p * NR;
			if (!transB) {
				const float *s = B + (k0 + p) * ldb + j0 + jp;
				for (int64_t j = 0; j < w; j++)
					d[j] = s[j];
			} else {
				const float *s = B + (j0 + jp) * ldb + k0 + p;
				for (int64_t j = 0; j < w; j++)
					d[j] = s[j * ldb];
			}
			for (int64_t j = w; j < NR; j++)
				d[j] = 0.0f;
		}
	}
}

/* alpha * op(A)[i0:i0+mc, k0:k0+kc] into MR-high panels, zero-padded. */
static void pack_a(int transA, const float *A, int64_t lda, int64_t i0, int64_t mc,
		   int64_t k0, int64_t kc, float alpha, float *out)
{
	for (int64_t ip = 0; ip < mc; ip += MR) {
		int64_t h = mc - ip < MR ? mc - ip : MR;
		float *dst = out + ip * kc;
		for (int64_t p = 0; p < kc; p++) {
			float *d = dst + p * MR;
			for (int64_t i = 0; i < h; i++) {
				int64_t r = i0 + ip + i, k = k0 + p;
				d[i] = alpha * (transA ? A[k * lda + r] : A[r * lda + k]);
			}
			for (int64_t i = h; i < MR; i++)
				d[i] = 0.0f;
		}
	}
}

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

/* One row of C (M == 1): axpy over rows of B, or dots with rows of B^T. */
CPU_MULTIVERSION
static void gemv_row(int transA, int transB, int64_t N, int64_t K, float alpha,
		     const float *A, int64_t lda, const float *B, int64_t ldb, float *C)
{
	int64_t sa = transA ? lda : 1;
	if (transB) {
		for (int64_t j = 0; j < N; j++)
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

static void blocked(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
		    const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
		    int64_t ldc, float *ap, float *bp)
{
	for (int64_t jc = 0; jc < N; jc += NC) {
		int64_t nc = N - jc < NC ? N - jc : NC;
		for (int64_t pc = 0; pc < K; pc += KC) {
			int64_t kc = K - pc < KC ? K - pc : KC;
			pack_b(transB, B, ldb, pc, kc, jc, nc, bp);
			for (int64_t ic = 0; ic < M; ic += MC) {
				int64_t mc = M - ic < MC ? M - ic : MC;
				pack_a(transA, A, lda, ic, mc, pc, kc, alpha, ap);
				for (int64_t jr = 0; jr < nc; jr += NR)
					for (int64_t ir = 0; ir < mc; ir += MR)
						micro_kernel(kc, ap + ir * kc, bp + jr * kc,
							     C + (ic + ir) * ldc + jc + jr, ldc,
							     (int)(mc - ir < MR ? mc - ir : MR),
							     (int)(nc - jr < NR ? nc - jr : NR));
			}
		}
	}
}

void cpu_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
	       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
	       float *C, int64_t ldc)
{
	float *ap = NULL, *bp = NULL;

	if (M <= 0 || N <= 0)
		return;
	scale_c(M, N, beta, C, ldc);
	if (K <= 0 || alpha == 0.0f)
		return;
	if (M == 1) {
		gemv_row(transA, transB, N, K, alpha, A, lda, B, ldb, C);
		return;
	}
	if (N == 1) {
		gemv_col(transA, transB, M, K, alpha, A, lda, B, ldb, C, ldc);
		return;
	}
	ap = aligned_alloc(64, (size_t)MC * KC * sizeof(float));
	bp = aligned_alloc(64, (size_t)KC * (NC + NR) * sizeof(float));
	if (ap && bp)
		blocked(transA, transB, M, N, K, alpha, A, lda, B, ldb, C, ldc, ap, bp);
	else
		naive(transA, transB, M, N, K, alpha, A, lda, B, ldb, C, ldc);
	free(bp);
	free(ap);
}
