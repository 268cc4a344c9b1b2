/*
 * Unit tests for the packed GEMM (providers/cpu/gemm): every microkernel
 * this CPU runs (scalar, AVX2, AVX-512), packed and on-the-fly B, 1 to 3
 * threads, against a double-precision reference on random shapes with
 * ragged edges (M, N, K of 1, primes, just under and over the tile and
 * block sizes), transposed operands, padded strides, alpha/beta (beta 0
 * with NaN in C), bias per row and per column, Relu and Clip, and the
 * per-block callback; batches of products (1 to 16 items, whole or
 * split over the threads, with the caller's scratch or not).  The tolerance scales with K and with the size of
 * the terms summed.  Then the error paths: a packed B that is corrupt,
 * truncated, for another shape, version or ISA; bad arguments; the thread
 * pool's task accounting and its busy fallback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gemm.h"

typedef struct shape {
	int64_t M, N, K;
	int transA, transB;
	int64_t pad;               /* extra row stride on A, B, C */
	float alpha, beta;
	gemm_bias_kind bias;
	gemm_act act;
} shape;

static uint64_t rng = 88172645463325252ull;

static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

static float uniform(void)       /* [-1, 1) */
{
	return (float)next_u32() / 2147483648.0f - 1.0f;
}

static int64_t pick(const int64_t *v, size_t n)
{
	return v[next_u32() % n];
}

static float *rand_buf(size_t n)
{
	float *p = malloc(n * sizeof(float) + 1);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = uniform();
	return p;
}

/* Each C element's post() calls, to check every one is visited once. */
typedef struct post_count {
	unsigned char *seen;
	int64_t ldc;
	float *c0;
} post_count;

static void count_post(void *ctx, float *c, int64_t ldc, int64_t row0, int64_t rows,
		       int64_t col0, int64_t cols)
{
	post_count *pc = ctx;
	assert_int_equal(ldc, pc->ldc);
	assert_ptr_equal(c, pc->c0 + row0 * ldc + col0);
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++)
			__atomic_fetch_add(&pc->seen[(row0 + i) * ldc + col0 + j], 1,
					   __ATOMIC_RELAXED);
}

/* The epilogue shape s asks for (bias: its bias values). */
static gemm_epilogue shape_ep(const shape *s, const float *bias)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;

	ep.alpha = s->alpha;
	ep.beta = s->beta;
	ep.bias = bias;
	ep.bias_kind = s->bias;
	ep.act = s->act;
	ep.clip_min = -0.5f;
	ep.clip_max = 0.75f;
	return ep;
}

/* C against the double-precision product of shape s (C0: C before). */
static void check_c(const shape *s, const float *A, int64_t lda, const float *B, int64_t ldb,
		    const float *bias, const float *C0, const float *C, int64_t ldc,
		    const char *what, int path)
{
	for (int64_t i = 0; i < s->M; i++)
		for (int64_t j = 0; j < ldc; j++) {
			float got = C[i * ldc + j], c0 = C0[i * ldc + j];
			double ref = 0.0, mag = 0.0, tol;
			if (j >= s->N) {   /* padding untouched */
				assert_memory_equal(&got, &c0, sizeof(float));
				continue;
			}
			for (int64_t k = 0; k < s->K; k++) {
				double a = s->transA ? A[k * lda + i] : A[i * lda + k];
				double b = s->transB ? B[j * ldb + k] : B[k * ldb + j];
				ref += a * b;
				mag += fabs(a * b);
			}
			ref *= s->alpha;
			mag *= fabs(s->alpha);
			if (s->beta != 0.0f) {
				ref += (double)s->beta * c0;
				mag += fabs((double)s->beta * c0);
			}
			if (s->bias != GEMM_BIAS_NONE) {
				double b = bias[s->bias == GEMM_BIAS_COL ? j : i];
				ref += b;
				mag += fabs(b);
			}
			if (s->act == GEMM_ACT_RELU)
				ref = ref < 0.0 ? 0.0 : ref;
			else if (s->act == GEMM_ACT_CLIP)
				ref = ref < -0.5 ? -0.5 : ref > 0.75 ? 0.75 : ref;
			tol = 2.0 * FLT_EPSILON * (double)(s->K + 3) * mag + 1e-30;
			if (!(fabs(got - ref) <= tol))
				fail_msg("%s path %d M %ld N %ld K %ld tA %d tB %d C[%ld][%ld] "
					 "= %.9g, want %.9g (tol %.3g)", what, path, (long)s->M,
					 (long)s->N, (long)s->K, s->transA, s->transB, (long)i,
					 (long)j, got, ref, tol);
		}
}

/* Runs one shape on one ISA through both entry points and checks C. */
static void check_shape(const shape *s, gemm_isa isa, cpu_pool *pool, int use_post)
{
	int64_t lda = (s->transA ? s->M : s->K) + s->pad, ldb = (s->transB ? s->K : s->N) + s->pad;
	int64_t ldc = s->N + s->pad, arows = s->transA ? s->K : s->M;
	int64_t brows = s->transB ? s->N : s->K;
	float *A = rand_buf((size_t)(arows * lda + 1)), *B = rand_buf((size_t)(brows * ldb + 1));
	float *C0 = rand_buf((size_t)(s->M * ldc + 1)), *C = malloc((size_t)(s->M * ldc + 1) * 4);
	float *bias = rand_buf((size_t)(s->M > s->N ? s->M : s->N) + 1);
	size_t psize = gemm_pack_b_size(isa, s->K, s->N);
	void *packed = aligned_alloc(64, (psize + 63) / 64 * 64);
	post_count pc = {calloc((size_t)(s->M * ldc + 1), 1), ldc, C};
	gemm_epilogue ep = shape_ep(s, bias);

	assert_non_null(C);
	assert_non_null(packed);
	assert_true(psize > 0);
	if (use_post) {
		ep.post = count_post;
		ep.post_ctx = &pc;
	}
	if (s->beta == 0.0f)   /* beta 0 must not read C */
		for (int64_t i = 0; i < s->M * ldc; i++)
			C0[i] = NAN;
	assert_int_equal(gemm_pack_b(isa, B, ldb, s->transB, s->K, s->N, packed, psize), 0);
	assert_int_equal(gemm_pack_b_check(packed, psize, s->K, s->N), 0);

	for (int path = 0; path < 2; path++) {
		memcpy(C, C0, (size_t)(s->M * ldc) * sizeof(float));
		memset(pc.seen, 0, (size_t)(s->M * ldc));
		if (path == 0)
			assert_int_equal(gemm_compute(pool, s->M, s->N, s->K, A, lda, s->transA,
						      packed, &ep, C, ldc), 0);
		else
			assert_int_equal(gemm_sgemm(pool, isa, s->transA, s->transB, s->M, s->N,
						    s->K, A, lda, B, ldb, &ep, C, ldc), 0);
		check_c(s, A, lda, B, ldb, bias, C0, C, ldc, gemm_isa_name(isa), path);
		for (int64_t i = 0; use_post && i < s->M; i++)
			for (int64_t j = 0; j < s->N; j++)
				if (pc.seen[i * ldc + j] != 1)
					fail_msg("post saw C[%ld][%ld] %d times", (long)i, (long)j,
						 pc.seen[i * ldc + j]);
	}
	free(pc.seen);
	free(packed);
	free(bias);
	free(C);
	free(C0);
	free(B);
	free(A);
}

static const int64_t MS[] = {1, 2, 3, 5, 6, 7, 13, 14, 15, 17, 28, 29, 31, 32, 33, 49, 97, 113};
static const int64_t NS[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 513, 530};
static const int64_t KS[] = {1, 2, 3, 7, 16, 31, 64, 255, 256, 257, 300, 513};

static shape random_shape(void)
{
	static const float alphas[] = {1.0f, 1.0f, -0.5f, 2.0f};
	static const float betas[] = {0.0f, 0.0f, 1.0f, 0.5f};
	shape s;

	s.M = pick(MS, sizeof(MS) / sizeof(MS[0]));
	s.N = pick(NS, sizeof(NS) / sizeof(NS[0]));
	s.K = pick(KS, sizeof(KS) / sizeof(KS[0]));
	s.transA = next_u32() % 3 == 0;
	s.transB = next_u32() % 3 == 0;
	s.pad = next_u32() % 2 ? 0 : 5;
	s.alpha = alphas[next_u32() % 4];
	s.beta = betas[next_u32() % 4];
	s.bias = (gemm_bias_kind)(next_u32() % 3);
	s.act = (gemm_act)(next_u32() % 3);
	return s;
}

static void random_shapes_on(gemm_isa isa, int threads, int count)
{
	cpu_pool *pool = NULL;

	if (!gemm_isa_supported(isa))
		skip();
	if (threads > 0)
		assert_int_equal(cpu_pool_create(threads, &pool), 0);
	for (int i = 0; i < count; i++) {
		shape s = random_shape();
		check_shape(&s, isa, pool, i % 4 == 0);
	}
	cpu_pool_destroy(pool);
}

/* gemm_compute_batch, gemm_sgemm_batch and gemm_compute_batch_part (in
 * one to three parts): `count` items of one shape,
 * each with its own A, B and C (C rows padded), on a pool of `threads`
 * (0: none), with the caller's scratch or none; every item against the
 * double-precision product. */
static void check_batch(const shape *s, int64_t count, int threads, int given_scratch)
{
	int64_t lda = (s->transA ? s->M : s->K) + s->pad, ldb = (s->transB ? s->K : s->N) + s->pad;
	int64_t ldc = s->N + s->pad, arows = s->transA ? s->K : s->M;
	int64_t brows = s->transB ? s->N : s->K, asz = arows * lda, bsz = brows * ldb;
	int64_t csz = s->M * ldc;
	size_t psize = gemm_pack_b_size(GEMM_ISA_AUTO, s->K, s->N), pstride = (psize + 63) / 64 * 64;
	float *A = rand_buf((size_t)(count * asz + 1)), *B = rand_buf((size_t)(count * bsz + 1));
	float *C0 = rand_buf((size_t)(count * csz + 1)), *C = malloc((size_t)(count * csz + 1) * 4);
	float *bias = rand_buf((size_t)(s->M > s->N ? s->M : s->N) + 1);
	char *packed = aligned_alloc(64, pstride * (size_t)count);
	const float **pa = malloc(sizeof(*pa) * (size_t)count), **pb = malloc(sizeof(*pb) * (size_t)count);
	const void **pp = malloc(sizeof(*pp) * (size_t)count);
	float **pc = malloc(sizeof(*pc) * (size_t)count);
	size_t sbytes = gemm_compute_batch_scratch(s->M, s->K, lda, s->transA);
	void *scratch = given_scratch && sbytes ? aligned_alloc(64, (sbytes + 63) / 64 * 64) : NULL;
	gemm_batch b = {count, pa, pb, pp, pc, scratch};
	gemm_epilogue ep = shape_ep(s, bias);
	cpu_pool *pool = NULL;
	char what[96];

	assert_true(C && packed && pa && pb && pp && pc);
	if (threads > 0)
		assert_int_equal(cpu_pool_create(threads, &pool), 0);
	for (int64_t i = 0; i < count; i++) {
		pa[i] = A + i * asz;
		pb[i] = B + i * bsz;
		pc[i] = C + i * csz;
		pp[i] = packed + (size_t)i * pstride;
		assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, pb[i], ldb, s->transB, s->K, s->N,
					     packed + (size_t)i * pstride, psize), 0);
	}
	if (s->beta == 0.0f)
		for (int64_t i = 0; i < count * csz; i++)
			C0[i] = NAN;
	for (int path = 0; path < 3; path++) {
		memcpy(C, C0, (size_t)(count * csz) * sizeof(float));
		if (path == 0) {
			assert_int_equal(gemm_compute_batch(pool, s->M, s->N, s->K, lda, s->transA,
							    &ep, ldc, &b), 0);
		} else if (path == 1) {
			assert_int_equal(gemm_sgemm_batch(pool, GEMM_ISA_AUTO, s->transA, s->transB,
							  s->M, s->N, s->K, lda, ldb, &ep, ldc, &b),
					 0);
		} else {
			/* gemm_compute_batch_part: the parts' columns one after the
			 * other, together every column */
			int parts = 1 + (int)(count % 3);
			int64_t end = 0, c0, c1;

			for (int part = 0; part < parts; part++) {
				assert_int_equal(gemm_compute_batch_part(s->M, s->N, s->K, lda,
									 s->transA, &ep, ldc, &b,
									 part, parts, &c0, &c1), 0);
				assert_true(c0 == end && c1 >= c0);
				end = c1;
			}
			assert_int_equal(end, s->N);
		}
		for (int64_t i = 0; i < count; i++) {
			snprintf(what, sizeof(what), "batch of %ld, item %ld, %d threads",
				 (long)count, (long)i, threads);
			check_c(s, pa[i], lda, pb[i], ldb, bias, C0 + i * csz, pc[i], ldc, what, path);
		}
	}
	cpu_pool_destroy(pool);
	free(scratch);
	free(pc);
	free(pp);
	free(pb);
	free(pa);
	free(packed);
	free(bias);
	free(C);
	free(C0);
	free(B);
	free(A);
}

static void test_batch(void **state)
{
	static const int64_t counts[] = {1, 2, 3, 4, 5, 16};

	(void)state;
	for (int i = 0; i < 120; i++) {
		shape s = random_shape();
		check_batch(&s, pick(counts, sizeof(counts) / sizeof(counts[0])), i % 4,
			    i % 3 == 0);
	}
}

static void test_batch_args(void **state)
{
	float a[4] = {1, 2, 3, 4}, c[4];
	const float *pa[1] = {a}, *pnull[1] = {NULL};
	float *pc[1] = {c};
	size_t psize = gemm_pack_b_size(GEMM_ISA_AUTO, 2, 2);
	void *packed = aligned_alloc(64, (psize + 63) / 64 * 64);
	const void *pp[1] = {packed};
	gemm_batch ok = {1, pa, pa, pp, pc, NULL}, no_a = {1, pnull, pa, pp, pc, NULL};
	gemm_batch no_packed = {1, pa, pa, NULL, pc, NULL}, neg = {-1, pa, pa, pp, pc, NULL};
	gemm_epilogue post = GEMM_EPILOGUE_INIT;

	(void)state;
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, a, 2, 0, 2, 2, packed, psize), 0);
	post.post = count_post;
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, NULL, 2, &ok), 0);
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, NULL, 2, &no_a), -EINVAL);
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, NULL, 2, &no_packed), -EINVAL);
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, NULL, 2, &neg), -EINVAL);
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, &post, 2, &ok), -EINVAL);
	assert_int_equal(gemm_compute_batch(NULL, 2, 3, 2, 2, 0, NULL, 3, &ok), -EINVAL); /* N */
	assert_int_equal(gemm_sgemm_batch(NULL, GEMM_ISA_AUTO, 0, 0, 2, 2, 2, 2, 1, NULL, 2, &ok),
			 -EINVAL);   /* ldb < N */
	assert_int_equal(gemm_compute_batch(NULL, 2, 2, 2, 2, 0, NULL, 2, NULL), -EINVAL);
	free(packed);
}

static void test_scalar(void **state)
{
	(void)state;
	random_shapes_on(GEMM_ISA_SCALAR, 0, 60);
}

static void test_avx2(void **state)
{
	(void)state;
	random_shapes_on(GEMM_ISA_AVX2, 1, 80);
}

static void test_avx512(void **state)
{
	(void)state;
	random_shapes_on(GEMM_ISA_AVX512, 0, 80);
}

static void test_threads(void **state)
{
	(void)state;
	random_shapes_on(GEMM_ISA_AUTO, 2, 50);
	random_shapes_on(GEMM_ISA_AUTO, 3, 30);
	random_shapes_on(GEMM_ISA_SCALAR, 3, 20);
}

/* Shapes the blocking treats specially: several K and N blocks, a row
 * stride that is a multiple of 2 KiB (A is copied), K == 0, big tiles. */
static void test_blocks(void **state)
{
	static const shape fixed[] = {
		{300, 1100, 700, 0, 0, 0, 1.0f, 0.0f, GEMM_BIAS_COL, GEMM_ACT_RELU},
		{40, 70, 1024, 0, 1, 0, 1.0f, 1.0f, GEMM_BIAS_ROW, GEMM_ACT_NONE},
		{33, 64, 512, 1, 0, 0, 0.5f, 0.0f, GEMM_BIAS_NONE, GEMM_ACT_CLIP},
		{7, 9, 0, 0, 0, 3, 1.0f, 0.5f, GEMM_BIAS_COL, GEMM_ACT_RELU},
		{5, 3, 0, 0, 0, 0, 1.0f, 0.0f, GEMM_BIAS_ROW, GEMM_ACT_NONE},
		{196, 256, 2304, 0, 0, 0, 1.0f, 0.0f, GEMM_BIAS_COL, GEMM_ACT_RELU},
	};
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		check_shape(&fixed[i], GEMM_ISA_AUTO, pool, 1);
		check_shape(&fixed[i], GEMM_ISA_AUTO, NULL, 0);
	}
	cpu_pool_destroy(pool);
}

/* M or N of 0: nothing happens, C untouched. */
static void test_empty(void **state)
{
	float c = 42.0f, a = 1.0f, b = 1.0f;
	size_t n = gemm_pack_b_size(GEMM_ISA_AUTO, 1, 0);
	void *p = aligned_alloc(64, 128);

	(void)state;
	assert_true(n > 0 && n <= 128);
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, NULL, 1, 0, 1, 0, p, n), 0);
	assert_int_equal(gemm_compute(NULL, 1, 0, 1, &a, 1, 0, p, NULL, &c, 1), 0);
	assert_int_equal(gemm_sgemm(NULL, GEMM_ISA_AUTO, 0, 0, 0, 1, 1, NULL, 1, &b, 1, NULL, &c,
				    1), 0);
	assert_true(c == 42.0f);
	free(p);
}

/* A packed B read back from a cache must be refused when anything about it
 * is off: every header field, the checksum, the size, the alignment. */
static void test_pack_check(void **state)
{
	int64_t K = 37, N = 45;
	size_t n = gemm_pack_b_size(GEMM_ISA_AUTO, K, N);
	float *B = rand_buf((size_t)(K * N));
	unsigned char *p = aligned_alloc(64, n + 64), *q = aligned_alloc(64, n + 64);
	gemm_isa isa;
	int64_t k, nn;

	(void)state;
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, B, N, 0, K, N, p, n), 0);
	assert_int_equal(gemm_pack_b_check(p, n, K, N), 0);
	assert_int_equal(gemm_pack_b_check(p, n, -1, -1), 0);
	gemm_pack_b_info(p, &isa, &k, &nn);
	assert_int_equal(isa, gemm_isa_best());
	assert_int_equal(k, K);
	assert_int_equal(nn, N);
	assert_int_equal(gemm_pack_b_check(p, n - 1, K, N), -EINVAL);
	assert_int_equal(gemm_pack_b_check(p, 63, K, N), -EINVAL);
	assert_int_equal(gemm_pack_b_check(p, n, K + 1, N), -EINVAL);
	assert_int_equal(gemm_pack_b_check(p, n, K, N - 1), -EINVAL);
	assert_int_equal(gemm_pack_b_check(NULL, n, K, N), -EINVAL);
	memcpy(q + 4, p, n);   /* misaligned copy */
	assert_int_equal(gemm_pack_b_check(q + 4, n, K, N), -EINVAL);
	/* Flip each header byte in turn: every one is covered. */
	for (int i = 0; i < 64; i++) {
		memcpy(q, p, n);
		q[i] ^= 0x40;
		assert_int_not_equal(gemm_pack_b_check(q, n, -1, -1), 0);
	}
	/* gemm_compute refuses the same things. */
	{
		float a[37] = {0}, c[45];
		memcpy(q, p, n);
		q[8] ^= 1;   /* version */
		assert_int_equal(gemm_compute(NULL, 1, N, K, a, K, 0, q, NULL, c, N), -EINVAL);
		assert_int_equal(gemm_compute(NULL, 1, N, K - 1, a, K, 0, p, NULL, c, N),
				 -EINVAL);
		assert_int_equal(gemm_compute(NULL, 1, N, K, a, K, 0, p, NULL, c, N), 0);
	}
	free(q);
	free(p);
	free(B);
}

/* A packed B made for an ISA this CPU lacks is refused with -ENOTSUP, and
 * packing for it is too. */
static void test_pack_isa(void **state)
{
	float b[4] = {1, 2, 3, 4};
	void *p = aligned_alloc(64, 4096);

	(void)state;
	assert_true(gemm_isa_supported(GEMM_ISA_SCALAR));
	assert_true(gemm_isa_supported(gemm_isa_best()));
	assert_string_equal(gemm_isa_name(GEMM_ISA_AVX512), "avx512");
	for (gemm_isa i = GEMM_ISA_SCALAR; i <= GEMM_ISA_AVX512; i++) {
		size_t n = gemm_pack_b_size(i, 2, 2);
		if (gemm_isa_supported(i)) {
			assert_true(n > 0 && n <= 4096);
			assert_int_equal(gemm_pack_b(i, b, 2, 0, 2, 2, p, n), 0);
			assert_int_equal(gemm_pack_b_check(p, n, 2, 2), 0);
		} else {
			assert_int_equal(n, 0);
			assert_int_equal(gemm_pack_b(i, b, 2, 0, 2, 2, p, 4096), -ENOTSUP);
		}
	}
	assert_int_equal(gemm_pack_b((gemm_isa)9, b, 2, 0, 2, 2, p, 4096), -ENOTSUP);
	free(p);
}

static void test_bad_args(void **state)
{
	float a[64] = {0}, b[64] = {0}, c[64];
	size_t n = gemm_pack_b_size(GEMM_ISA_AUTO, 4, 4);
	void *p = aligned_alloc(64, n);
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;

	(void)state;
	assert_int_equal(gemm_pack_b_size(GEMM_ISA_AUTO, -1, 4), 0);
	assert_int_equal(gemm_pack_b_size(GEMM_ISA_AUTO, INT64_MAX / 4, INT64_MAX / 4), 0);
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, b, 3, 0, 4, 4, p, n), -EINVAL); /* ldb */
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, b, 4, 0, 4, 4, p, n - 1), -EINVAL);
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, NULL, 4, 0, 4, 4, p, n), -EINVAL);
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, b, 4, 0, 4, 4, (char *)p + 4, n), -EINVAL);
	assert_int_equal(gemm_pack_b(GEMM_ISA_AUTO, b, 4, 0, 4, 4, p, n), 0);
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, a, 3, 0, p, NULL, c, 4), -EINVAL);
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, a, 4, 0, p, NULL, c, 3), -EINVAL);
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, NULL, 4, 0, p, NULL, c, 4), -EINVAL);
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, a, 4, 0, p, NULL, NULL, 4), -EINVAL);
	assert_int_equal(gemm_compute(NULL, -1, 4, 4, a, 4, 0, p, NULL, c, 4), -EINVAL);
	ep.bias_kind = GEMM_BIAS_COL;   /* without a bias */
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, a, 4, 0, p, &ep, c, 4), -EINVAL);
	ep.bias_kind = GEMM_BIAS_NONE;
	ep.act = (gemm_act)7;
	assert_int_equal(gemm_compute(NULL, 4, 4, 4, a, 4, 0, p, &ep, c, 4), -EINVAL);
	assert_int_equal(gemm_sgemm(NULL, GEMM_ISA_AUTO, 0, 1, 4, 4, 4, a, 4, b, 3, NULL, c, 4),
			 -EINVAL);
	assert_int_equal(gemm_sgemm(NULL, GEMM_ISA_AUTO, 0, 0, 4, 4, 4, a, 4, NULL, 4, NULL, c,
				    4), -EINVAL);
	assert_int_equal(gemm_sgemm(NULL, (gemm_isa)9, 0, 0, 4, 4, 4, a, 4, b, 4, NULL, c, 4),
			 -ENOTSUP);
	free(p);
}

/* ---- thread pool ---- */

typedef struct count_job {
	int *hits;
	int members[64];
} count_job;

static void count_task(void *arg, int64_t i, int member)
{
	count_job *j = arg;
	__atomic_fetch_add(&j->hits[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&j->members[member], 1, __ATOMIC_RELAXED);
}

static void test_pool_tasks(void **state)
{
	cpu_pool *pool;
	int hits[1000];

	(void)state;
	assert_int_equal(cpu_pool_threads(NULL), 1);
	assert_int_equal(cpu_pool_create(3, &pool), 0);
	assert_int_equal(cpu_pool_threads(pool), 3);
	assert_true(cpu_pool_try_begin(pool));
	for (int round = 0; round < 200; round++) {
		count_job j = {hits, {0}};
		int64_t n = 1 + round * 5;
		memset(hits, 0, sizeof(hits));
		cpu_pool_for(pool, round % 4, n, count_task, &j);
		for (int64_t i = 0; i < n; i++)
			assert_int_equal(hits[i], 1);
		assert_int_equal(j.members[0] + j.members[1] + j.members[2], n);
		if (round % 4 == 1)   /* width 1: the caller alone */
			assert_int_equal(j.members[0], n);
	}
	/* Many tiny jobs back to back: late workers must never run a task
	 * of the next job, nor one twice. */
	for (int round = 0; round < 20000; round++) {
		count_job j = {hits, {0}};
		int64_t n = 1 + round % 4;
		memset(hits, 0, (size_t)n * sizeof(int));
		cpu_pool_for(pool, 0, n, count_task, &j);
		for (int64_t i = 0; i < n; i++)
			assert_int_equal(hits[i], 1);
	}
	cpu_pool_end(pool);
	cpu_pool_destroy(pool);
	cpu_pool_destroy(NULL);
	/* Default size: one per CPU. */
	assert_int_equal(cpu_pool_create(0, &pool), 0);
	assert_true(cpu_pool_threads(pool) >= 1);
	cpu_pool_destroy(pool);
}

/* Workers asleep for longer than the spin still wake for the next job. */
static void test_pool_sleep(void **state)
{
	cpu_pool *pool;
	int hits[8];

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	assert_true(cpu_pool_try_begin(pool));
	for (int round = 0; round < 3; round++) {
		count_job j = {hits, {0}};
		struct timespec ts = {0, 5 * 1000 * 1000};
		memset(hits, 0, sizeof(hits));
		nanosleep(&ts, NULL);
		cpu_pool_for(pool, 0, 8, count_task, &j);
		for (int i = 0; i < 8; i++)
			assert_int_equal(hits[i], 1);
	}
	cpu_pool_end(pool);
	cpu_pool_destroy(pool);
}

/* Runs (cpu_pool_run): a run that starts after one that gave the workers
 * jobs wakes them before its first job, with a job that names no task;
 * tasks of the real jobs around such wake-ups still run exactly once. */
static int sleepers_become(cpu_pool *pool, int want)
{
	for (int i = 0; i < 10000 && cpu_pool_sleepers(pool) != want; i++) {
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return cpu_pool_sleepers(pool) == want;
}

/* Whether a worker wakes up (from sleep) within 10 s. */
static int woke_since(cpu_pool *pool, uint32_t wakes)
{
	for (int i = 0; i < 10000 && cpu_pool_wakes(pool) == wakes; i++) {
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return cpu_pool_wakes(pool) != wakes;
}

static void test_pool_runs(void **state)
{
	struct timespec idle = {0, 5 * 1000 * 1000};
	cpu_pool *pool;
	uint32_t wakes;
	int hits[8];

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int round = 0; round < 3; round++) {
		count_job j = {hits, {0}};

		/* a run with a job, then idle: the worker sleeps */
		cpu_pool_run(pool, 1);
		memset(hits, 0, sizeof(hits));
		assert_true(cpu_pool_try_begin(pool));
		cpu_pool_for(pool, 0, 8, count_task, &j);
		cpu_pool_end(pool);
		for (int i = 0; i < 8; i++)
			assert_int_equal(hits[i], 1);
		cpu_pool_run(pool, -1);
		nanosleep(&idle, NULL);
		assert_true(sleepers_become(pool, 1));
		/* the next run wakes it before any job */
		wakes = cpu_pool_wakes(pool);
		cpu_pool_run(pool, 1);
		assert_true(woke_since(pool, wakes));
		cpu_pool_run(pool, -1);
	}
	/* wake-ups between many small jobs: no task lost or run twice */
	for (int round = 0; round < 5000; round++) {
		count_job j = {hits, {0}};
		int64_t n = 1 + round % 4;

		cpu_pool_run(pool, 1);
		memset(hits, 0, (size_t)n * sizeof(int));
		assert_true(cpu_pool_try_begin(pool));
		cpu_pool_for(pool, 0, n, count_task, &j);
		cpu_pool_end(pool);
		for (int64_t i = 0; i < n; i++)
			assert_int_equal(hits[i], 1);
		cpu_pool_run(pool, -1);
	}
	cpu_pool_run(NULL, 1);
	cpu_pool_destroy(pool);
}

/* A GEMM on a pool that is busy (here: held by the test, as a task of a
 * running job would find it) runs on the caller alone, correctly. */
static void test_pool_busy(void **state)
{
	shape s = {50, 70, 90, 1, 1, 0, 1.0f, 0.0f, GEMM_BIAS_COL, GEMM_ACT_RELU};
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	assert_true(cpu_pool_try_begin(pool));
	assert_false(cpu_pool_try_begin(pool));
	check_shape(&s, GEMM_ISA_AUTO, pool, 1);
	cpu_pool_end(pool);
	check_shape(&s, GEMM_ISA_AUTO, pool, 1);
	cpu_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalar),
		cmocka_unit_test(test_avx2),
		cmocka_unit_test(test_avx512),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_pack_check),
		cmocka_unit_test(test_pack_isa),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_pool_tasks),
		cmocka_unit_test(test_pool_sleep),
		cmocka_unit_test(test_pool_runs),
		cmocka_unit_test(test_pool_busy),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_batch_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
