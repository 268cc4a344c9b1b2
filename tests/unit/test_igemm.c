/*
 * Unit tests for the int8 GEMM (providers/cpu/gemm/igemm*.c): every
 * microkernel this CPU runs (scalar, AVX2, AVX-VNNI, AVX-512 VNNI) against
 * the ONNX formula element by element (igemm_ref_dot, int32 with
 * wrap-around) on ragged shapes (1, primes, just under and over the tiles,
 * K not a multiple of 4, K over one K block), uint8 and int8 on both
 * sides, zero points per tensor, per row of A and per column of B, A and
 * B packed ahead, raw, or (B) produced by a callback, int32 and float
 * output (scale per tensor, row or column, bias per row or column, an
 * addend, also stored in C itself, Relu, compared bit for bit with the
 * unfused Cast, Mul, Add, Add, Relu), on no pool
 * and on a 2-thread pool.  Then sums that wrap past int32, and the error
 * paths: corrupt or foreign packs, bad arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "igemm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

typedef struct icase {
	int64_t M, N, K;
	int a_signed, b_signed;
	int za_rows, zb_cols;       /* zero points per row / column */
	int a_packed;               /* A through igemm_pack_a */
	int b_mode;                 /* 0 packed, 1 raw, 2 callback */
	int out_float;              /* 0 int32; 1 scale; 2 scale rows + bias rows + relu; 3 cols */
	int pad;                    /* extra stride */
	int add;                    /* float: 1 an addend, 2 the addend in C itself */
} icase;

typedef struct cb_ctx {
	const uint8_t *B;
	int64_t ldb, K, N;
	int32_t off;
} cb_ctx;

static void cb_pack(void *ctx, int64_t g0, int64_t gs, int64_t p0, int64_t p1, int8_t *dst)
{
	const cb_ctx *c = ctx;
	igemm_pack_b_block(c->B, c->ldb, c->off, c->K, c->N, g0, gs, p0, p1, dst);
}

static int32_t zp_of(int is_signed)
{
	return is_signed ? (int32_t)(rnd() % 256) - 128 : (int32_t)(rnd() % 256);
}

/* Runs one case on isa and pool; fails on the first wrong element. */
static void run_case(const icase *cs, igemm_isa isa, cpu_pool *pool)
{
	int64_t M = cs->M, N = cs->N, K = cs->K, lda = K + cs->pad, ldb = N + cs->pad;
	int64_t ldc = N + cs->pad;
	uint8_t *A = malloc((size_t)(M * lda + 1)), *B = malloc((size_t)(K * ldb + 1));
	int32_t *za = malloc((size_t)(M + 1) * 4), *zb = malloc((size_t)(N + 1) * 4);
	float *sc = malloc((size_t)(M + N + 1) * 4), *bias = malloc((size_t)(M + N + 1) * 4);
	int32_t *C = malloc((size_t)(M * ldc + 1) * 4);
	float *addend = malloc((size_t)(M * ldc + 1) * 4);
	int add = cs->out_float && K <= IGEMM_KBLOCK ? cs->add : 0;
	void *pa = NULL, *pb = NULL;
	cb_ctx cb = {B, ldb, K, N, cs->b_signed ? 0 : 128};
	igemm_problem p;
	int rc;

	assert_non_null(A);
	assert_non_null(B);
	assert_non_null(C);
	for (int64_t i = 0; i < M * lda; i++)
		A[i] = (uint8_t)rnd();
	for (int64_t i = 0; i < K * ldb; i++)
		B[i] = (uint8_t)rnd();
	for (int64_t i = 0; i < M; i++)
		za[i] = zp_of(cs->a_signed);
	for (int64_t j = 0; j < N; j++)
		zb[j] = zp_of(cs->b_signed);
	for (int64_t i = 0; i < M + N; i++) {
		sc[i] = (float)(rnd() % 1000 + 1) * 1.7e-5f;
		bias[i] = (float)((int32_t)(rnd() % 2001) - 1000) * 0.013f;
	}
	for (int64_t i = 0; i < M * ldc; i++)
		addend[i] = (float)((int32_t)(rnd() % 2001) - 1000) * 0.07f;
	if (add == 2)
		memcpy(C, addend, (size_t)(M * ldc) * 4);
	memset(&p, 0, sizeof(p));
	p.M = M;
	p.N = N;
	p.K = K;
	if (cs->a_packed) {
		size_t sz = igemm_pack_a_size(M, K);
		assert_true(sz > 0);
		pa = aligned_alloc(64, (sz + 63) & ~(size_t)63);
		assert_int_equal(igemm_pack_a(A, lda, cs->a_signed, M, K, pa, sz), 0);
		assert_int_equal(igemm_pack_a_check(pa, sz, M, K), 0);
		igemm_pack_a_view(pa, &p.A);
	} else {
		p.a_raw = A;
		p.lda_raw = lda;
		p.a_signed = cs->a_signed;
	}
	p.za = za[0];
	p.za_row = cs->za_rows ? za : NULL;
	if (cs->b_mode == 0) {
		size_t sz = igemm_pack_b_size(K, N);
		assert_true(sz > 0);
		pb = aligned_alloc(64, (sz + 63) & ~(size_t)63);
		assert_int_equal(igemm_pack_b(B, ldb, 0, cs->b_signed, K, N, pb, sz), 0);
		assert_int_equal(igemm_pack_b_check(pb, sz, K, N), 0);
		igemm_pack_b_view(pb, &p.B);
	} else if (cs->b_mode == 1) {
		p.b_raw = B;
		p.ldb_raw = ldb;
		p.b_signed = cs->b_signed;
	} else {
		p.b_pack = cb_pack;
		p.b_pack_ctx = &cb;
		p.b_signed = cs->b_signed;
	}
	p.zb = zb[0];
	p.zb_col = cs->zb_cols ? zb : NULL;
	p.out.c = C;
	p.out.ldc = ldc;
	p.out.is_float = cs->out_float != 0;
	p.out.scale = sc[0];
	if (cs->out_float == 2) {
		p.out.scale_row = sc;
		p.out.bias_row = bias;
		p.out.clamp = 1;
		p.out.lo = 0.0f;
		p.out.hi = INFINITY;
	} else if (cs->out_float == 3) {
		p.out.scale_col = sc + M;
		p.out.bias_col = bias + M;
	}
	if (add)
		p.out.add = add == 2 ? (const float *)C : addend;
	rc = igemm_compute(pool, isa, &p);
	assert_int_equal(rc, 0);
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			int32_t want = igemm_ref_dot(A, lda, cs->a_signed, cs->za_rows ? za[i] : za[0], B,
						     ldb, cs->b_signed, cs->zb_cols ? zb[j] : zb[0],
						     i, j, K);
			int32_t got = C[i * ldc + j];
			if (cs->out_float) {
				float f = (float)want, g;
				f = f * (p.out.scale_row ? sc[i] : p.out.scale_col ? sc[M + j] : sc[0]);
				if (p.out.bias_row)
					f = f + bias[i];
				if (p.out.bias_col)
					f = f + bias[M + j];
				if (add)
					f = f + addend[i * ldc + j];
				if (p.out.clamp)
					f = f < 0.0f ? 0.0f : f;
				memcpy(&g, &got, 4);
				memcpy(&want, &f, 4);
				if (want != got)
					fail_msg("%s M%lld N%lld K%lld case (%d%d %d%d %d%d %d): [%lld,%lld] "
						 "%.9g, want %.9g", igemm_isa_name(isa), (long long)M,
						 (long long)N, (long long)K, cs->a_signed, cs->b_signed,
						 cs->za_rows, cs->zb_cols, cs->a_packed, cs->b_mode,
						 cs->out_float, (long long)i, (long long)j, g, f);
			} else if (want != got) {
				fail_msg("%s M%lld N%lld K%lld case (%d%d %d%d %d%d %d): [%lld,%lld] "
					 "%d, want %d", igemm_isa_name(isa), (long long)M, (long long)N,
					 (long long)K, cs->a_signed, cs->b_signed, cs->za_rows,
					 cs->zb_cols, cs->a_packed, cs->b_mode, cs->out_float,
					 (long long)i, (long long)j, got, want);
			}
		}
	free(pa);
	free(pb);
	free(A);
	free(B);
	free(za);
	free(zb);
	free(sc);
	free(bias);
	free(C);
	free(addend);
}

static const int64_t SIZES[] = {1, 2, 3, 5, 6, 7, 13, 16, 17, 31, 47, 64, 65, 100};
enum { NSIZES = sizeof(SIZES) / sizeof(SIZES[0]) };

/* Random cases on every ISA, no pool and a 2-thread pool. */
static void test_random_cases(void **state)
{
	cpu_pool *pool = NULL;
	int tested = 0;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (igemm_isa isa = IGEMM_ISA_SCALAR; isa <= IGEMM_ISA_LAST; isa++) {
		if (!igemm_isa_supported(isa)) {
			printf("igemm: %s not supported here, skipped\n", igemm_isa_name(isa));
			continue;
		}
		tested++;
		for (int n = 0; n < 160; n++) {
			icase cs;
			cs.M = SIZES[rnd() % NSIZES];
			cs.N = SIZES[rnd() % NSIZES] + (rnd() % 3 == 0 ? 64 : 0);
			cs.K = SIZES[rnd() % NSIZES] + (rnd() % 4 == 0 ? (int64_t)(rnd() % 300) : 0);
			cs.a_signed = rnd() & 1;
			cs.b_signed = rnd() & 1;
			cs.za_rows = rnd() % 4 == 0;
			cs.zb_cols = rnd() % 4 == 0;
			cs.a_packed = rnd() & 1;
			cs.b_mode = (int)(rnd() % 3);
			cs.out_float = (int)(rnd() % 4);
			cs.pad = rnd() % 3 == 0 ? (int)(rnd() % 9) : 0;
			cs.add = (int)(rnd() % 3);
			run_case(&cs, isa, n & 1 ? pool : NULL);
		}
		printf("igemm: %s passed\n", igemm_isa_name(isa));
	}
	assert_true(tested >= 1);
	printf("igemm: the best here is %s\n", igemm_isa_name(igemm_isa_best()));
	cpu_pool_destroy(pool);
}

/* K over one K block (2048), so partial sums go through C; big enough
 * that the pool splits rows and columns. */
static void test_k_blocks(void **state)
{
	cpu_pool *pool = NULL;
	static const icase cases[] = {
		{37, 70, 2051, 0, 1, 0, 0, 1, 0, 1, 0, 0},
		{20, 129, 4100, 1, 0, 1, 0, 0, 2, 2, 3, 0},
		{130, 33, 2500, 0, 0, 0, 1, 0, 1, 3, 0, 0},
		{64, 256, 256, 0, 1, 1, 1, 0, 0, 0, 0, 0},
		{7, 900, 147, 0, 0, 0, 0, 1, 2, 2, 0, 2},
		{40, 300, 2048, 0, 1, 0, 0, 1, 0, 1, 0, 2},
	};
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (igemm_isa isa = IGEMM_ISA_SCALAR; isa <= IGEMM_ISA_LAST; isa++) {
		if (!igemm_isa_supported(isa))
			continue;
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			run_case(&cases[c], isa, pool);
			run_case(&cases[c], isa, NULL);
		}
	}
	cpu_pool_destroy(pool);
}

/* Products of 255 by -255 summed 40000 times pass int32's range: the
 * result wraps exactly as the spec's int32 arithmetic does. */
static void test_wraparound(void **state)
{
	enum { M = 3, N = 20, K = 40000 };
	uint8_t *A = malloc(M * K);
	int8_t *B = malloc((size_t)K * N);
	int32_t C[M * N];
	igemm_problem p;
	(void)state;
	assert_non_null(A);
	assert_non_null(B);
	memset(A, 255, M * K);
	memset(B, -128, (size_t)K * N);
	for (igemm_isa isa = IGEMM_ISA_SCALAR; isa <= IGEMM_ISA_LAST; isa++) {
		if (!igemm_isa_supported(isa))
			continue;
		memset(&p, 0, sizeof(p));
		p.M = M;
		p.N = N;
		p.K = K;
		p.a_raw = A;
		p.lda_raw = K;
		p.b_raw = B;
		p.ldb_raw = N;
		p.b_signed = 1;
		p.zb = 127;
		p.out.c = C;
		p.out.ldc = N;
		assert_int_equal(igemm_compute(NULL, isa, &p), 0);
		for (int i = 0; i < M * N; i++) {
			int32_t want = igemm_ref_dot(A, K, 0, 0, B, N, 1, 127, i / N, i % N, K);
			assert_int_equal(want, (int32_t)(uint32_t)(40000u * (uint32_t)-65025));
			assert_int_equal(C[i], want);
		}
	}
	free(A);
	free(B);
}

/* Packs from elsewhere are checked before use. */
static void test_pack_checks(void **state)
{
	uint8_t w[6 * 10];
	size_t sa = igemm_pack_a_size(6, 10), sb = igemm_pack_b_size(10, 6);
	unsigned char *pa = aligned_alloc(64, (sa + 63) & ~(size_t)63);
	unsigned char *pb = aligned_alloc(64, (sb + 63) & ~(size_t)63);
	(void)state;
	for (int i = 0; i < 60; i++)
		w[i] = (uint8_t)(i * 7);
	assert_int_equal(igemm_pack_a(w, 10, 0, 6, 10, pa, sa), 0);
	assert_int_equal(igemm_pack_b(w, 6, 0, 1, 10, 6, pb, sb), 0);
	assert_int_equal(igemm_pack_a_check(pa, sa, 6, 10), 0);
	assert_int_equal(igemm_pack_a_check(pa, sa, -1, -1), 0);
	assert_int_equal(igemm_pack_b_check(pb, sb, 10, 6), 0);
	/* wrong shape, kind, size; a torn header */
	assert_int_equal(igemm_pack_a_check(pa, sa, 6, 11), -EINVAL);
	assert_int_equal(igemm_pack_a_check(pb, sb, -1, -1), -EINVAL);
	assert_int_equal(igemm_pack_b_check(pa, sa, -1, -1), -EINVAL);
	assert_int_equal(igemm_pack_b_check(pb, sb - 1, 10, 6), -EINVAL);
	assert_int_equal(igemm_pack_b_check(pb, 10, 10, 6), -EINVAL);
	assert_int_equal(igemm_pack_a_check(NULL, sa, 6, 10), -EINVAL);
	pa[20] ^= 1;
	assert_int_equal(igemm_pack_a_check(pa, sa, 6, 10), -EINVAL);
	pb[8] ^= 4;   /* the version */
	assert_int_equal(igemm_pack_b_check(pb, sb, 10, 6), -EINVAL);
	/* bad arguments to the packers */
	assert_int_equal(igemm_pack_a(w, 9, 0, 6, 10, pa, sa), -EINVAL);
	assert_int_equal(igemm_pack_a(w, 10, 0, 6, 10, pa, sa - 1), -EINVAL);
	assert_int_equal(igemm_pack_b(w, 5, 0, 0, 10, 6, pb, sb), -EINVAL);
	assert_int_equal(igemm_pack_a_size(-1, 3), 0);
	assert_int_equal(igemm_pack_b_size(3, -1), 0);
	free(pa);
	free(pb);
}

static void test_bad_args(void **state)
{
	uint8_t a[16] = {0};
	int32_t c[16];
	igemm_problem p;
	(void)state;
	memset(&p, 0, sizeof(p));
	p.M = 2;
	p.N = 2;
	p.K = 4;
	p.a_raw = a;
	p.lda_raw = 4;
	p.b_raw = a;
	p.ldb_raw = 2;
	p.out.c = c;
	p.out.ldc = 2;
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), 0);
	p.lda_raw = 3;
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), -EINVAL);
	p.lda_raw = 4;
	p.out.ldc = 1;
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), -EINVAL);
	p.out.ldc = 2;
	p.b_raw = NULL;
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), -EINVAL);
	p.b_raw = a;
	p.M = -1;
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), -EINVAL);
	p.M = 2;
	assert_int_equal(igemm_compute(NULL, (igemm_isa)99, &p), -ENOTSUP);
	/* K = 0: zeros through the epilogue */
	{
		/* an addend needs K in one block */
		uint8_t *big = calloc(2 * (IGEMM_KBLOCK + 1), 1);
		float addend[4] = {0};
		igemm_problem q = p;
		assert_non_null(big);
		q.K = IGEMM_KBLOCK + 1;
		q.a_raw = big;
		q.lda_raw = q.K;
		q.b_raw = big;
		q.out.is_float = 1;
		q.out.add = addend;
		assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &q), -EINVAL);
		q.K = IGEMM_KBLOCK;
		assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &q), 0);
		q.out.is_float = 0;
		assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &q), -EINVAL);
		free(big);
	}
	p.K = 0;
	p.out.is_float = 1;
	p.out.scale = 2.0f;
	memset(c, 0xff, sizeof(c));
	assert_int_equal(igemm_compute(NULL, IGEMM_ISA_AUTO, &p), 0);
	for (int i = 0; i < 4; i++)
		assert_true(((float *)c)[i] == 0.0f);
	assert_string_equal(igemm_isa_name(IGEMM_ISA_AVX512VNNI), "avx512vnni");
	assert_true(igemm_isa_supported(IGEMM_ISA_SCALAR));
	assert_false(igemm_isa_supported(IGEMM_ISA_AUTO));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_cases),
		cmocka_unit_test(test_k_blocks),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_pack_checks),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
