/*
 * Unit tests for the GEMM's few-row path (providers/cpu/gemm: gemm_compute
 * with 1 to 4 rows and a packed B goes to the ISA's gemv kernel): against
 * a plain double-precision loop on ragged N and K (1, primes, one under
 * and over the panel width and the K block), B plain and transposed,
 * padded strides, alpha/beta (beta 0 with NaN in C), bias per column and
 * per row, Relu and Clip, the per-block callback, with no pool and pools
 * of 1 to 3 threads.  Padding columns of C past N must stay untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gemm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void)       /* [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(uint32_t)(rng >> 32) / 2147483648.0f - 1.0f;
}

static float *rand_buf(size_t n)
{
	float *p = malloc(n * sizeof(float) + 4);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = uniform();
	return p;
}

typedef struct posted {
	int64_t M, N, ldc;
	float *c0;
	int *seen;                 /* M x N: post() calls covering each element */
} posted;

static void count_post(void *ctx, float *c, int64_t ldc, int64_t row0, int64_t rows,
		       int64_t col0, int64_t cols)
{
	posted *pc = ctx;

	assert_int_equal(ldc, pc->ldc);
	assert_ptr_equal(c, pc->c0 + row0 * ldc + col0);
	assert_true(row0 >= 0 && rows >= 0 && row0 + rows <= pc->M);
	assert_true(col0 >= 0 && cols >= 0 && col0 + cols <= pc->N);
	for (int64_t i = row0; i < row0 + rows; i++)
		for (int64_t j = col0; j < col0 + cols; j++)
			pc->seen[i * pc->N + j]++;
}

typedef struct variant {
	int transB;
	float alpha, beta;
	gemm_bias_kind bias;
	gemm_act act;
	int post;
	int64_t pad;
} variant;

/* One product against the double loop. */
static void check(cpu_pool *pool, int64_t M, int64_t N, int64_t K, const variant *v)
{
	int64_t lda = K + v->pad, ldb = (v->transB ? K : N) + v->pad, ldc = N + v->pad;
	float *A = rand_buf((size_t)(M * lda));
	float *B = rand_buf((size_t)((v->transB ? N : K) * ldb));
	float *C = rand_buf((size_t)(M * ldc)), *C0 = malloc((size_t)(M * ldc) * sizeof(float));
	float *bias = rand_buf((size_t)(N > M ? N : M));
	int *seen = calloc((size_t)(M * N), sizeof(int));
	size_t size = gemm_pack_b_size(GEMM_ISA_AUTO, K, N);
	void *packed = aligned_alloc(64, size);
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	posted pc = {M, N, ldc, C, seen};

	assert_non_null(C0);
	assert_non_null(seen);
	assert_non_null(packed);
	if (v->beta == 0.0f)
		for (int64_t i = 0; i < M * ldc; i++)
			C[i] = NAN;   /* beta 0 must not read C */
	memcpy(C0, C, (size_t)(M * ldc) * sizeof(float));
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, B, ldb, v->transB, K, N, packed, size), 0);
	ep.alpha = v->alpha;
	ep.beta = v->beta;
	ep.bias = v->bias != GEMM_BIAS_NONE ? bias : NULL;
	ep.bias_kind = v->bias;
	ep.act = v->act;
	ep.clip_min = -0.5f;
	ep.clip_max = 0.75f;
	if (v->post) {
		ep.post = count_post;
		ep.post_ctx = &pc;
	}
	assert_int_equal(gemm_compute(pool, M, N, K, A, lda, 0, packed, &ep, C, ldc), 0);
	for (int64_t i = 0; i < M; i++) {
		for (int64_t j = 0; j < N; j++) {
			double s = 0.0, mag = 0.0, want, tol;
			for (int64_t k = 0; k < K; k++) {
				double b = v->transB ? B[j * ldb + k] : B[k * ldb + j];
				s += (double)A[i * lda + k] * b;
				mag += fabs((double)A[i * lda + k] * b);
			}
			want = v->alpha * s;
			if (v->beta != 0.0f)
				want += v->beta * (double)C0[i * ldc + j];
			if (v->bias == GEMM_BIAS_COL)
				want += bias[j];
			else if (v->bias == GEMM_BIAS_ROW)
				want += bias[i];
			if (v->act == GEMM_ACT_RELU)
				want = want < 0.0 ? 0.0 : want;
			else if (v->act == GEMM_ACT_CLIP)
				want = want < -0.5 ? -0.5 : want > 0.75 ? 0.75 : want;
			tol = 1e-6 * (double)(K + 4) * (mag * fabs(v->alpha) + 2.0) + 1e-6;
			if (!(fabs((double)C[i * ldc + j] - want) <= tol)) {
				fprintf(stderr, "M %lld N %lld K %lld transB %d: C[%lld][%lld] = %g, want %g\n",
					(long long)M, (long long)N, (long long)K, v->transB,
					(long long)i, (long long)j, (double)C[i * ldc + j], want);
				fail();
			}
			if (v->post)
				assert_int_equal(seen[i * N + j], 1);
		}
		for (int64_t j = N; j < ldc; j++)   /* the padding is not C's */
			assert_memory_equal(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float));
	}
	free(A);
	free(B);
	free(C);
	free(C0);
	free(bias);
	free(seen);
	free(packed);
}

static const int64_t Ns[] = {1, 7, 16, 31, 32, 33, 95, 257, 1000, 1031};
static const int64_t Ks[] = {1, 3, 17, 255, 256, 257, 600, 1030};

static void sweep(cpu_pool *pool, const variant *v)
{
	for (int64_t M = 1; M <= 5; M++)   /* 5: just past the few-row path */
		for (size_t n = 0; n < sizeof(Ns) / sizeof(Ns[0]); n++)
			for (size_t k = 0; k < sizeof(Ks) / sizeof(Ks[0]); k++)
				check(pool, M, Ns[n], Ks[k], v);
}

static void test_plain(void **state)
{
	variant v = {0, 1.0f, 0.0f, GEMM_BIAS_NONE, GEMM_ACT_NONE, 0, 0};

	(void)state;
	sweep(NULL, &v);
	v.transB = 1;
	sweep(NULL, &v);
}

/* mlp1's form: transB, a bias row, Relu. */
static void test_bias_relu(void **state)
{
	variant v = {1, 1.0f, 0.0f, GEMM_BIAS_COL, GEMM_ACT_RELU, 0, 0};

	(void)state;
	sweep(NULL, &v);
	check(NULL, 1, 1024, 1024, &v);
}

static void test_epilogue(void **state)
{
	variant v = {0, 0.5f, 1.0f, GEMM_BIAS_ROW, GEMM_ACT_CLIP, 1, 5};

	(void)state;
	sweep(NULL, &v);
	v.beta = -0.75f;
	v.bias = GEMM_BIAS_COL;
	v.act = GEMM_ACT_RELU;
	v.transB = 1;
	sweep(NULL, &v);
}

static void test_threads(void **state)
{
	variant v = {1, 1.0f, 0.0f, GEMM_BIAS_COL, GEMM_ACT_RELU, 1, 3};

	(void)state;
	for (int t = 1; t <= 3; t++) {
		cpu_pool *pool;

		assert_int_equal(cpu_pool_create(t, &pool), 0);
		sweep(pool, &v);
		for (int64_t M = 1; M <= 4; M++) {
			check(pool, M, 1024, 1024, &v);
			check(pool, M, 4099, 513, &v);
		}
		cpu_pool_destroy(pool);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_bias_relu),
		cmocka_unit_test(test_epilogue),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
