/*
 * Unit tests for the CPU provider's compute kernels (providers/cpu/ops:
 * GEMM and MatMul, Conv and pooling, elementwise ops and normalisation)
 * and the per-node glue (cpu_exec.c).  Kernels run through cpu_node_init
 * and cpu_node_run with NodeProtos built here (cpu_test_util).  Reference
 * values come from the .npy files in tests/data/ops/, written by
 * tests/data/gen_cpu_op_refs.py with plain numpy; the small cases state
 * their expected values inline.  Error paths (bad dtype, shapes that do
 * not broadcast, a plan the kernel disagrees with, out-of-range indices)
 * are tested as carefully as the results.  test_cpu_data covers the
 * data-movement kernels.
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

#include "cpu_node.h"
#include "cpu_test_util.h"
#include "cpu_f16.h"
#include "cpu_ops.h"
#include "vmath.h"

static const char *const X1[] = {"x"}, *const Y1[] = {"y"};

/* ---- GEMM ---- */

static void naive_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
		       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
		       float *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = 0.0;
			for (int64_t k = 0; k < K; k++)
				s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
				     (tb ? B[j * ldb + k] : B[k * ldb + j]);
			C[i * ldc + j] = (float)(alpha * s + (beta == 0.0f ? 0.0 : beta * C[i * ldc + j]));
		}
}

static void test_sgemm_ragged(void **state)
{
	static const int64_t sizes[][3] = {
		{1, 1, 1}, {1, 37, 19}, {23, 1, 41}, {5, 7, 3}, {6, 32, 256}, {7, 33, 257},
		{13, 65, 300}, {121, 31, 17}, {130, 70, 513}, {64, 1030, 9},
		{1, 384, 128}, {1, 8, 7},   /* a batch-1 RNN step; one block of 8 dots, K short of a vector */
	};
	(void)state;
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++)
		for (int tr = 0; tr < 4; tr++) {
			int ta = tr & 1, tb = tr >> 1;
			int64_t M = sizes[c][0], N = sizes[c][1], K = sizes[c][2], ldc = N + 3;
			int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2;
			float *A = malloc(sizeof(float) * (size_t)(lda * (ta ? K : M)));
			float *B = malloc(sizeof(float) * (size_t)(ldb * (tb ? N : K)));
			float *C = malloc(sizeof(float) * (size_t)(ldc * M));
			float *R = malloc(sizeof(float) * (size_t)(ldc * M));
			float beta = (c % 2) ? 0.5f : 0.0f;
			for (int64_t i = 0; i < lda * (ta ? K : M); i++)
				A[i] = (float)((i * 7 + c) % 13) / 6.0f - 1.0f;
			for (int64_t i = 0; i < ldb * (tb ? N : K); i++)
				B[i] = (float)((i * 5 + tr) % 11) / 5.0f - 1.0f;
			for (int64_t i = 0; i < ldc * M; i++)
				C[i] = R[i] = (c % 2) ? (float)(i % 9) : NAN;  /* beta 0 ignores NaN */
			cpu_sgemm(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, beta, C, ldc);
			naive_gemm(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, beta, R, ldc);
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++)
					if (fabsf(C[i * ldc + j] - R[i * ldc + j]) > 1e-3f * (1.0f + (float)K / 64))
						fail_msg("M%lld N%lld K%lld t%d: C[%lld,%lld] %g vs %g",
							 (long long)M, (long long)N, (long long)K, tr,
							 (long long)i, (long long)j, C[i * ldc + j], R[i * ldc + j]);
			for (int64_t i = 0; i < M; i++)   /* the padding columns are untouched */
				for (int64_t j = N; j < ldc; j++)
					assert_true(memcmp(&C[i * ldc + j], &R[i * ldc + j], 4) == 0 ||
						    (isnan(C[i * ldc + j]) && isnan(R[i * ldc + j])));
			free(A);
			free(B);
			free(C);
			free(R);
		}
}

static void test_gemm_op(void **state)
{
	static const char *const ins[] = {"a", "b", "c"};
	tnode t;
	(void)state;
	tn(&t, "Gemm", 3, 1);
	tn_int(&t, "transA", 1);
	tn_int(&t, "transB", 1);
	tn_float(&t, "alpha", 0.5f);
	tn_float(&t, "beta", 2.0f);
	check_fixture(&t, 13, "gemm_t", ins, 3, Y1, 1, 1e-5);
}

static void test_matmul(void **state)
{
	static const char *const cases[] = {"matmul_bcast", "matmul_1d_a", "matmul_1d_b",
					    "matmul_fold"};
	static const char *const ins[] = {"a", "b"};
	tnode t;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tn(&t, "MatMul", 2, 1);
		check_fixture(&t, 13, cases[i], ins, 2, Y1, 1, 1e-5);
	}
}

/* ---- Conv and pooling ---- */

typedef struct conv_case {
	const char *name;
	int64_t group, nsp, strides[3], pads[6], dil[3];
	const char *auto_pad;
	int bias;
} conv_case;

static void test_conv(void **state)
{
	static const conv_case cases[] = {
		{"conv_group", 2, 2, {1, 1}, {1, 1, 1, 1}, {1, 1}, NULL, 1},
		{"conv_depthwise", 3, 2, {2, 2}, {1, 1, 1, 1}, {1, 1}, NULL, 1},
		{"conv_dilated", 1, 2, {1, 1}, {0, 0, 0, 0}, {2, 2}, NULL, 0},
		{"conv_same_upper", 1, 2, {2, 2}, {0}, {1, 1}, "SAME_UPPER", 1},
		{"conv_same_lower", 1, 2, {1, 2}, {0}, {1, 1}, "SAME_LOWER", 0},
		{"conv_1x1", 1, 2, {1, 1}, {0, 0, 0, 0}, {1, 1}, NULL, 1},
		{"conv_1d", 1, 1, {2}, {1, 2}, {1}, NULL, 1},
		{"conv_3d", 1, 3, {1, 2, 1}, {0, 1, 1, 1, 0, 1}, {1, 1, 1}, NULL, 1},
		{"conv_asym", 1, 2, {2, 3}, {0, 2, 1, 0}, {1, 2}, NULL, 1},
	};
	static const char *const with_b[] = {"x", "w", "b"};
	tnode t;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const conv_case *c = &cases[i];
		tn(&t, "Conv", c->bias ? 3 : 2, 1);
		tn_int(&t, "group", c->group);
		tn_ints(&t, "strides", c->strides, (size_t)c->nsp);
		tn_ints(&t, "dilations", c->dil, (size_t)c->nsp);
		if (c->auto_pad)
			tn_str(&t, "auto_pad", c->auto_pad);
		else
			tn_ints(&t, "pads", c->pads, (size_t)(2 * c->nsp));
		check_fixture(&t, 11, c->name, with_b, c->bias ? 3 : 2, Y1, 1, 1e-4);
	}
}

static void pool_node(tnode *t, const char *op, int n_out, int64_t k0, int64_t k1,
		      int64_t s0, int64_t s1, const int64_t *pads, int ceil)
{
	int64_t k[2] = {k0, k1}, s[2] = {s0, s1};
	tn(t, op, 1, n_out);
	tn_ints(t, "kernel_shape", k, 2);
	tn_ints(t, "strides", s, 2);
	tn_ints(t, "pads", pads, 4);
	tn_int(t, "ceil_mode", ceil);
}

static void test_pool(void **state)
{
	static const int64_t p0[4] = {0}, p1[4] = {1, 1, 1, 1}, p2[4] = {1, 0, 1, 1};
	static const int64_t dil[2] = {2, 1};
	static const char *const yi[] = {"y", "i"};
	tnode t;
	(void)state;
	pool_node(&t, "MaxPool", 1, 3, 3, 2, 2, p0, 1);
	check_fixture(&t, 12, "maxpool_ceil", X1, 1, Y1, 1, 0);
	pool_node(&t, "MaxPool", 1, 2, 2, 2, 2, p1, 1);
	check_fixture(&t, 12, "maxpool_ceil_drop", X1, 1, Y1, 1, 0);
	pool_node(&t, "MaxPool", 2, 3, 2, 2, 1, p2, 0);
	tn_ints(&t, "dilations", dil, 2);
	check_fixture(&t, 12, "maxpool_dilated_idx", X1, 1, yi, 2, 0);
	tn_int(&t, "storage_order", 1);
	{
		/* same pooling, Indices in column-major order */
		cpu_tensor x = load("maxpool_dilated_idx", "x"), out[2], want;
		const cpu_tensor *in[1] = {&x};
		char err[ERRLEN];
		assert_int_equal(run(&t, 12, 1, in, 2, out, err), 0);
		want = load("maxpool_dilated_idx_colmajor", "i");
		expect_close(&out[1], &want, 0);
		free_outs(out, 2);
		free(want.data);
		free(x.data);
	}
	for (int cip = 0; cip < 2; cip++) {
		pool_node(&t, "AveragePool", 1, 3, 3, 2, 2, p1, 1);
		tn_int(&t, "count_include_pad", cip);
		check_fixture(&t, 11, cip ? "avgpool_ceil_cip1" : "avgpool_ceil_cip0", X1, 1, Y1, 1,
			      1e-6);
	}
	tn(&t, "GlobalAveragePool", 1, 1);
	check_fixture(&t, 1, "gap", X1, 1, Y1, 1, 1e-6);
}

/* ---- elementwise and normalisation ---- */

static void test_add_broadcast(void **state)
{
	static const char *const ins[] = {"a", "b"};
	static const int32_t ia[6] = {1, 2, 3, 4, 5, 6}, ib[3] = {10, 20, 30};
	static const int64_t d23[2] = {2, 3}, d3[1] = {3}, d21[2] = {2, 1};
	tnode t;
	cpu_tensor a = tens(CPU_INT32, 2, d23, ia), b = tens(CPU_INT32, 1, d3, ib), out[1];
	const cpu_tensor *in[2] = {&a, &b};
	char err[ERRLEN];
	(void)state;
	tn(&t, "Add", 2, 1);
	check_fixture(&t, 14, "add_bcast", ins, 2, Y1, 1, 1e-6);
	/* int32 along the last dim, then [2,1] - [3] -> [2,3] */
	assert_int_equal(run(&t, 14, 2, in, 1, out, err), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(((int32_t *)out[0].data)[i], ia[i] + ib[i % 3]);
	free_outs(out, 1);
	tn(&t, "Sub", 2, 1);
	a = tens(CPU_INT32, 2, d21, ia);
	assert_int_equal(run(&t, 14, 2, in, 1, out, err), 0);
	assert_int_equal(out[0].rank, 2);
	assert_int_equal(out[0].dims[1], 3);
	assert_int_equal(((int32_t *)out[0].data)[5], 2 - 30);
	free_outs(out, 1);
}

static void test_legacy_broadcast(void **state)
{
	/* opset 6: B [3] lines up with A [2,3,2] at axis 1 */
	static const float fa[12] = {0}, fb[3] = {1, 2, 3};
	static const int64_t da[3] = {2, 3, 2}, db[1] = {3};
	cpu_tensor a = tens(CPU_FLOAT, 3, da, fa), b = tens(CPU_FLOAT, 1, db, fb), out[1];
	const cpu_tensor *in[2] = {&a, &b};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "Add", 2, 1);
	tn_int(&t, "broadcast", 1);
	tn_int(&t, "axis", 1);
	assert_int_equal(run(&t, 6, 2, in, 1, out, err), 0);
	for (int i = 0; i < 12; i++)
		assert_true(((float *)out[0].data)[i] == fb[(i / 2) % 3]);
	free_outs(out, 1);
	tn(&t, "Add", 2, 1);   /* broadcast=0: shapes must match */
	expect_error(&t, 6, 2, in, CPU_E_INVALID, "broadcast=0");
}

static void test_int_div_and_pow(void **state)
{
	static const int64_t a[4] = {7, -7, 7, INT64_MIN}, b[4] = {2, 2, -2, -1}, z[1] = {0};
	static const int64_t d4[1] = {4}, d1[1] = {1};
	static const float fx[3] = {2, 3, -2}, fe[1] = {2};
	static const int64_t d3[1] = {3};
	cpu_tensor ta = tens(CPU_INT64, 1, d4, a), tb = tens(CPU_INT64, 1, d4, b), out[1];
	const cpu_tensor *in[2] = {&ta, &tb};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "Div", 2, 1);
	assert_int_equal(run(&t, 14, 2, in, 1, out, err), 0);
	assert_int_equal(((int64_t *)out[0].data)[0], 3);
	assert_int_equal(((int64_t *)out[0].data)[1], -3);   /* truncates like C */
	assert_int_equal(((int64_t *)out[0].data)[2], -3);
	assert_int_equal(((int64_t *)out[0].data)[3], INT64_MIN);   /* wraps, no trap */
	free_outs(out, 1);
	tb = tens(CPU_INT64, 1, d1, z);
	expect_error(&t, 14, 2, in, CPU_E_INVALID, "division by zero");
	tn(&t, "Pow", 2, 1);
	ta = tens(CPU_FLOAT, 1, d3, fx);
	tb = tens(CPU_FLOAT, 1, d1, fe);
	assert_int_equal(run(&t, 15, 2, in, 1, out, err), 0);
	assert_true(((float *)out[0].data)[1] == 9.0f && ((float *)out[0].data)[2] == 4.0f);
	free_outs(out, 1);
}

static void test_softmax(void **state)
{
	tnode t;
	(void)state;
	tn(&t, "Softmax", 1, 1);   /* opset 11, default axis 1: 2-D coercion */
	check_fixture(&t, 11, "softmax_v11", X1, 1, Y1, 1, 1e-6);
	tn(&t, "Softmax", 1, 1);
	tn_int(&t, "axis", 1);   /* opset 13: the single dim 1 */
	check_fixture(&t, 13, "softmax_v13", X1, 1, Y1, 1, 1e-6);
	tn(&t, "Softmax", 1, 1);
	check_fixture(&t, 13, "softmax_v13_default", X1, 1, Y1, 1, 1e-6);
	{
		/* stability: huge logits do not overflow */
		static const float big[3] = {1000.0f, 1000.0f, -1000.0f};
		static const int64_t d[1] = {3};
		cpu_tensor x = tens(CPU_FLOAT, 1, d, big), out[1];
		const cpu_tensor *in[1] = {&x};
		char err[ERRLEN];
		assert_int_equal(run(&t, 13, 1, in, 1, out, err), 0);
		assert_true(fabsf(((float *)out[0].data)[0] - 0.5f) < 1e-6f);
		assert_true(((float *)out[0].data)[2] == 0.0f);
		free_outs(out, 1);
	}
}

static void test_layernorm(void **state)
{
	static const char *const ins[] = {"x", "s", "b"}, *const ins2[] = {"x", "s"};
	static const char *const outs[] = {"y", "mean", "inv"};
	tnode t;
	(void)state;
	tn(&t, "LayerNormalization", 3, 3);
	check_fixture(&t, 17, "layernorm", ins, 3, outs, 3, 1e-5);
	tn(&t, "LayerNormalization", 2, 1);
	tn_int(&t, "axis", 1);
	tn_float(&t, "epsilon", 1e-3f);
	check_fixture(&t, 17, "layernorm_axis1", ins2, 2, Y1, 1, 1e-5);
}

static void test_batchnorm(void **state)
{
	static const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	static const float sc[2] = {1, 2}, bi[2] = {0, 1}, mu[2] = {2, 6}, va[2] = {4, 1};
	static const int64_t dx[4] = {1, 2, 2, 2}, dc[1] = {2};
	cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), ts = tens(CPU_FLOAT, 1, dc, sc);
	cpu_tensor tb = tens(CPU_FLOAT, 1, dc, bi), tm = tens(CPU_FLOAT, 1, dc, mu);
	cpu_tensor tv = tens(CPU_FLOAT, 1, dc, va), out[1];
	const cpu_tensor *in[5] = {&tx, &ts, &tb, &tm, &tv};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "BatchNormalization", 5, 1);
	tn_float(&t, "epsilon", 0.0f);
	tn_int(&t, "is_test", 1);   /* opset 6 attribute, ignored */
	assert_int_equal(run(&t, 6, 5, in, 1, out, err), 0);
	/* channel 0: (x - 2) / 2; channel 1: (x - 6) * 2 + 1 */
	assert_true(((float *)out[0].data)[0] == -0.5f && ((float *)out[0].data)[3] == 1.0f);
	assert_true(((float *)out[0].data)[4] == -1.0f && ((float *)out[0].data)[7] == 5.0f);
	free_outs(out, 1);
}

static void test_unary(void **state)
{
	static const float x[4] = {-2.0f, -0.5f, 0.0f, 1.5f}, lo[1] = {-1.0f}, hi[1] = {1.0f};
	static const int64_t d4[1] = {4};
	cpu_tensor tx = tens(CPU_FLOAT, 1, d4, x), tlo = tens(CPU_FLOAT, 0, NULL, lo);
	cpu_tensor thi = tens(CPU_FLOAT, 0, NULL, hi), out[1];
	const cpu_tensor *in[3] = {&tx, &tlo, &thi};
	char err[ERRLEN];
	tnode t;
	float *y;
	(void)state;
	tn(&t, "Clip", 3, 1);   /* opset 11+: bounds are inputs */
	assert_int_equal(run(&t, 13, 3, in, 1, out, err), 0);
	y = out[0].data;
	assert_true(y[0] == -1.0f && y[1] == -0.5f && y[3] == 1.0f);
	free_outs(out, 1);
	tn(&t, "Clip", 1, 1);   /* opset 6: attributes */
	tn_float(&t, "min", 0.0f);
	assert_int_equal(run(&t, 6, 1, in, 1, out, err), 0);
	y = out[0].data;
	assert_true(y[0] == 0.0f && y[3] == 1.5f);
	free_outs(out, 1);
	tn(&t, "Gelu", 1, 1);
	assert_int_equal(run(&t, 20, 1, in, 1, out, err), 0);
	assert_true(fabsf(((float *)out[0].data)[3] - 1.3997892f) < 1e-5f);
	free_outs(out, 1);
	tn(&t, "Gelu", 1, 1);
	tn_str(&t, "approximate", "tanh");
	assert_int_equal(run(&t, 20, 1, in, 1, out, err), 0);
	assert_true(fabsf(((float *)out[0].data)[3] - 1.3995716f) < 1e-5f);
	free_outs(out, 1);
	tn(&t, "LeakyRelu", 1, 1);
	assert_int_equal(run(&t, 16, 1, in, 1, out, err), 0);
	assert_true(((float *)out[0].data)[0] == -0.02f);
	free_outs(out, 1);
	tn(&t, "Sigmoid", 1, 1);
	assert_int_equal(run(&t, 13, 1, in, 1, out, err), 0);
	assert_true(fabsf(((float *)out[0].data)[0] - 0.11920292f) < 1e-6f);
	free_outs(out, 1);
}

static void test_vmath_accuracy(void **state)
{
	/* the vectorizable exp/erf/tanh/sigmoid against double libm, 2^20
	 * points over [-12, 12]: relative error within 4 float ulp */
	double worst = 0.0;
	(void)state;
	for (int i = 0; i <= 1 << 20; i++) {
		float x = -12.0f + 24.0f * (float)i / (float)(1 << 20);
		double ref[4] = {erf(x), tanh(x), 1.0 / (1.0 + exp(-(double)x)), exp(-fabs(x))};
		float got[4] = {vm_erf(x), vm_tanh(x), vm_sigmoid(x), vm_exp_nonpos(-fabsf(x))};
		for (int k = 0; k < 4; k++) {
			double rel = ref[k] == 0.0 ? fabs(got[k]) : fabs(got[k] - ref[k]) / fabs(ref[k]);
			if (rel > worst)
				worst = rel;
		}
	}
	if (worst > 4 * 1.1920929e-7)
		fail_msg("worst relative error %g", worst);
}

/* ---- errors, plans and the executor contract ---- */

static void test_errors(void **state)
{
	static const int32_t xi[16] = {0};
	static const float xf[6] = {0}, w[9] = {0};
	static const int64_t d4[4] = {1, 1, 4, 4}, dw[4] = {1, 1, 3, 3}, d23[2] = {2, 3}, d4b[1] = {4};
	static const int64_t neg[4] = {-1, 0, 0, 0};
	cpu_tensor x = tens(CPU_INT32, 4, d4, xi), tw = tens(CPU_FLOAT, 4, dw, w);
	const cpu_tensor *in[2] = {&x, &tw};
	cpu_node node;
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "Conv", 2, 1);   /* int32 input: refused, naming the dtype */
	expect_error(&t, 11, 2, in, CPU_E_UNSUPPORTED, "node 't' (Conv): input 0 dtype int32");
	tn(&t, "Conv", 2, 1);   /* negative pads: refused at init */
	tn_ints(&t, "pads", neg, 4);
	assert_int_equal(cpu_node_init(&node, TEST_LOAD, NULL, &t.p, 11, NULL, 2, 1, err,
				       sizeof(err)), CPU_E_INVALID);
	assert_non_null(strstr(err, "pads[0] = -1"));
	tn(&t, "Conv", 2, 1);   /* 4 channels of weights for 1-channel input, group 2 */
	tn_int(&t, "group", 2);
	x = tens(CPU_FLOAT, 4, d4, xi);
	expect_error(&t, 11, 2, in, CPU_E_INVALID, "group 2");
	tn(&t, "Add", 2, 1);   /* [2,3] + [4] */
	x = tens(CPU_FLOAT, 2, d23, xf);
	tw = tens(CPU_FLOAT, 1, d4b, w);
	expect_error(&t, 14, 2, in, CPU_E_INVALID, "[2,3] and [4] are not broadcast-compatible");
	tw = tens(CPU_DOUBLE, 2, d23, xf);   /* mixed dtypes */
	expect_error(&t, 14, 2, in, CPU_E_INVALID, "float32 and float64");
	tn(&t, "MatMul", 2, 1);
	in[1] = NULL;   /* a required input left out */
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "input 1 is required");
	x.nbytes = 4;   /* a tensor that lies about its size */
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "input 0: 4 bytes for 6");
}

static void test_planned_outputs(void **state)
{
	static const float a[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t d23[2] = {2, 3}, d32[2] = {3, 2};
	float buf[6];
	cpu_tensor ta = tens(CPU_FLOAT, 2, d23, a), plan = tens(CPU_FLOAT, 2, d23, buf), out[1];
	const cpu_tensor *in[2] = {&ta, &ta}, *planned[1] = {&plan};
	int heap[1];
	char err[ERRLEN];
	cpu_run_env env1 = {.threads = 1};
	cpu_node node;
	tnode t;
	(void)state;
	tn(&t, "Mul", 2, 1);
	assert_int_equal(cpu_node_init(&node, TEST_LOAD, NULL, &t.p, 14, NULL, 2, 1, err,
				       sizeof(err)), 0);
	assert_int_equal(cpu_node_run(&node, &env1, in, planned, out, heap, err, sizeof(err)), 0);
	assert_int_equal(heap[0], 0);
	assert_ptr_equal(out[0].data, buf);
	assert_true(buf[5] == 36.0f);
	plan = tens(CPU_FLOAT, 2, d32, buf);   /* the plan disagrees with the kernel */
	assert_int_equal(cpu_node_run(&node, &env1, in, planned, out, heap, err, sizeof(err)),
			 CPU_E_SHAPE);
	assert_non_null(strstr(err, "output 0: planned float32 [3,2] but computed float32 [2,3]"));
	assert_null(out[0].data);
	assert_int_equal(heap[0], 0);
	plan = tens(CPU_INT32, 2, d23, buf);
	assert_int_equal(cpu_node_run(&node, &env1, in, planned, out, heap, err, sizeof(err)),
			 CPU_E_SHAPE);
	cpu_node_fini(&node);
}

static void test_omitted_outputs(void **state)
{
	static const char *const ins[] = {"x", "s", "b"}, *const outs[] = {"y", NULL, NULL};
	static const int64_t k[2] = {2, 2};
	cpu_tensor x = load("maxpool_ceil", "x"), out[2];
	const cpu_tensor *in[1] = {&x};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "LayerNormalization", 3, 3);
	t.out[1] = "";   /* Mean omitted in the graph; InvStdDev requested */
	check_fixture(&t, 17, "layernorm", ins, 3, outs, 3, 1e-5);
	tn(&t, "MaxPool", 1, 2);
	tn_ints(&t, "kernel_shape", k, 2);
	t.out[1] = "";
	assert_int_equal(run(&t, 12, 1, in, 2, out, err), 0);
	assert_non_null(out[0].data);
	assert_null(out[1].data);
	free_outs(out, 2);
	free(x.data);
}

static void test_supported(void **state)
{
	static const int32_t f32[2] = {CPU_FLOAT, CPU_FLOAT}, i64[2] = {CPU_INT64, CPU_INT64};
	char why[256];
	tnode t;
	(void)state;
	tn(&t, "Frobnicate", 1, 1);
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 13, f32, 1, why, sizeof(why)), 0);
	assert_string_equal(why, "no kernel for op 'Frobnicate' (domain '', opset 13)");
	tn(&t, "Conv", 2, 1);
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 11, f32, 2, why, sizeof(why)), 1);
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 11, i64, 2, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "int64"));
	tn(&t, "Gelu", 1, 1);   /* Gelu arrived in opset 20 */
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 17, f32, 1, why, sizeof(why)), 0);
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 20, f32, 1, why, sizeof(why)), 1);
	tn(&t, "Add", 2, 1);
	t.p.domain = "com.example";
	assert_int_equal(cpu_node_supported(&cpu_optable_all, &t.p, 1, f32, 2, why, sizeof(why)), 0);
}

/* The generated op table (ops/gen_registry.py): every entry well formed,
 * no two entries claiming one (op_type, domain, opset), and cpu_op_find
 * resolving each entry's own range to itself, ai.onnx and "" alike. */
static void test_op_table(void **state)
{
	const cpu_optable *t = &cpu_optable_all;
	(void)state;
	assert_true(t->n > 150);
	for (size_t i = 0; i < t->n; i++) {
		const cpu_op *a = t->ops[i];

		assert_non_null(a->op_type);
		assert_non_null(a->domain);
		assert_non_null(a->compute);
		assert_true(a->min_opset >= 1 && a->min_opset <= a->max_opset);
		for (size_t j = i + 1; j < t->n; j++) {
			const cpu_op *b = t->ops[j];

			if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain))
				continue;
			if (a->max_opset >= b->min_opset && b->max_opset >= a->min_opset)
				fail_msg("%s (domain '%s'): opsets %d-%d and %d-%d overlap", a->op_type,
					 a->domain, a->min_opset, a->max_opset, b->min_opset,
					 b->max_opset);
		}
		assert_ptr_equal(cpu_op_find(t, a->op_type, a->domain, a->min_opset), a);
		assert_ptr_equal(cpu_op_find(t, a->op_type, a->domain, a->max_opset), a);
		if (!a->domain[0])
			assert_ptr_equal(cpu_op_find(t, a->op_type, "ai.onnx", a->min_opset), a);
	}
	assert_null(cpu_op_find(t, "NoSuchOp", "", 17));
	assert_null(cpu_op_find(t, "Relu", "com.example", 17));
}

/* The vector float16 conversions (F16C where the CPU has it) agree with
 * the scalar ones bit for bit: every half widened, and floats around
 * every rounding case (ties, subnormals, overflow, NaN) narrowed. */
static void test_f16_convert(void **state)
{
	enum { N = 65536 };
	uint16_t *hx = malloc(N * sizeof(*hx)), *hy = malloc(4 * N * sizeof(*hy));
	float *f = malloc(4 * N * sizeof(*f));
	(void)state;
	assert_non_null(hx);
	assert_non_null(hy);
	assert_non_null(f);
	for (int i = 0; i < N; i++)
		hx[i] = (uint16_t)i;
	cpu_f16_widen(hx, f, N);
	for (int i = 0; i < N; i++) {
		float s = cpu_f16_to_f32(hx[i]);

		if (s != s)
			assert_true(f[i] != f[i]);
		else
			assert_memory_equal(&f[i], &s, sizeof(s));
	}
	for (int i = 0; i < N; i++) {
		/* each half, and the points a quarter, a half and three
		 * quarters of the way to the next one */
		float a = cpu_f16_to_f32(hx[i]), b = cpu_f16_to_f32((uint16_t)(i + 1));

		f[4 * i] = a;
		f[4 * i + 1] = a + (b - a) * 0.25f;
		f[4 * i + 2] = a + (b - a) * 0.5f;
		f[4 * i + 3] = a + (b - a) * 0.75f;
	}
	cpu_f16_narrow(f, hy, 4 * N);
	for (int i = 0; i < 4 * N; i++) {
		uint16_t s = cpu_f32_to_f16(f[i]);

		if (f[i] != f[i])
			assert_true((hy[i] & 0x7c00) == 0x7c00 && (hy[i] & 0x3ff));
		else if (hy[i] != s)
			fail_msg("narrow(%a): vector %#x, scalar %#x", (double)f[i], hy[i], s);
	}
	free(hx);
	free(hy);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_op_table),
		cmocka_unit_test(test_f16_convert),
		cmocka_unit_test(test_sgemm_ragged),
		cmocka_unit_test(test_gemm_op),
		cmocka_unit_test(test_matmul),
		cmocka_unit_test(test_conv),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_add_broadcast),
		cmocka_unit_test(test_legacy_broadcast),
		cmocka_unit_test(test_int_div_and_pow),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_layernorm),
		cmocka_unit_test(test_batchnorm),
		cmocka_unit_test(test_unary),
		cmocka_unit_test(test_vmath_accuracy),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_planned_outputs),
		cmocka_unit_test(test_omitted_outputs),
		cmocka_unit_test(test_supported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
