/*
 * Unit tests for the CPU provider's GEMM-based kernels on the packed GEMM
 * and the thread pool (ops/conv.c, conv_im2col.c, matmul.c, fuse_tail.c)
 * and the load-time fusion planner (cpu_fuse.c).  Every result is checked
 * against a plain double-precision loop written here (the reference
 * kernel): random shapes with ragged edges (sizes that are not multiples
 * of the 14 x 32 tile or the K block), groups, depthwise, strides, pads,
 * dilations, 1x1; every Conv form (pixels-as-rows with the packed filter,
 * channels-as-rows, Winograd F(2x2, 3x3) when the filter is constant and
 * the convolution 3x3 stride 1); with and without a pool; fused tails (bias, residual,
 * Relu, Gelu) including an addend that broadcasts and outputs planned over
 * an input's memory, as the core's plan does for fused-away nodes.
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
#include "cpu_fuse.h"
#include "cpu_test_util.h"
#include "threadpool.h"

/* Allocation counter for test_no_alloc: glibc lets the executable
 * interpose malloc and friends; counting is off except inside that test.
 * Not under AddressSanitizer, which interposes them itself (the test then
 * skips). */
#ifndef __SANITIZE_ADDRESS__
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
static int counting, allocs;

void *malloc(size_t n)
{
	allocs += counting;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	allocs += counting;
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	allocs += counting;
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	allocs += counting;
	return __libc_memalign(align, n);
}
#else
static int counting, allocs;
#endif

static uint32_t rng = 12345;

static float frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)(rng >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
}

static float *rand_buf(int64_t n)
{
	float *p = malloc(sizeof(float) * (size_t)(n + 1));

	assert_non_null(p);
	for (int64_t i = 0; i < n; i++)
		p[i] = frand();
	return p;
}

/* Runs node t (n_in inputs, W etc. constant where consts[i]) on in[] with
 * output 0 planned at `planned` (or heap when NULL); returns the output. */
static cpu_tensor run_node(tnode *t, const cpu_fusion *fu, const cpu_tensor **consts, int n_in,
			   const cpu_tensor **in, const cpu_tensor *planned, cpu_pool *pool)
{
	cpu_node node;
	cpu_tensor out;
	const cpu_tensor *pl[1] = {planned};
	int heap = 0;
	char err[ERRLEN];

	if (cpu_node_init(&node, TEST_LOAD, fu, &t->p, 17, consts, n_in, 1, err,
			  sizeof(err)))
		fail_msg("init: %s", err);
	if (cpu_node_run(&node, &(cpu_run_env){.pool = pool, .threads = pool ? 2 : 1}, in, pl, &out,
			 &heap, err, sizeof(err)))
		fail_msg("run: %s", err);
	cpu_node_fini(&node);
	assert_int_equal(heap, planned == NULL);
	return out;
}

static void expect_near(const float *got, const double *want, int64_t n, double tol,
			const char *what)
{
	for (int64_t i = 0; i < n; i++)
		if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i])))
			fail_msg("%s: [%lld] %g, want %g", what, (long long)i, got[i], want[i]);
}

/* ---- Conv ---- */

typedef struct ccase {
	int64_t N, C, H, W, M, G, kh, kw, s, p, d;
} ccase;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d)
{
	return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

/* The reference: y = act(conv(x, w) + b + res[broadcast]), res of shape
 * [1, M, 1, 1] when res_channel, else y's shape. */
static double *ref_conv(const ccase *c, const float *x, const float *w, const float *b,
			const float *res, int res_channel, int relu)
{
	int64_t OH = out_dim(c->H, c->kh, c->s, c->p, c->d), OW = out_dim(c->W, c->kw, c->s, c->p, c->d);
	int64_t Cg = c->C / c->G, Mg = c->M / c->G, n = c->N * c->M * OH * OW;
	double *y = malloc(sizeof(double) * (size_t)n);

	for (int64_t bi = 0; bi < c->N; bi++)
		for (int64_t m = 0; m < c->M; m++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					int64_t g = m / Mg, o = ((bi * c->M + m) * OH + oh) * OW + ow;
					double s = b ? b[m] : 0.0;
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t i = 0; i < c->kh; i++)
							for (int64_t j = 0; j < c->kw; j++) {
								int64_t ih = oh * c->s - c->p + i * c->d;
								int64_t iw = ow * c->s - c->p + j * c->d;
								if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
									continue;
								s += (double)x[((bi * c->C + g * Cg + ci) * c->H + ih) * c->W + iw] *
								     w[((m * Cg + ci) * c->kh + i) * c->kw + j];
							}
					if (res)
						s += res[res_channel ? m : o];
					y[o] = relu && s < 0 ? 0.0 : s;
				}
	return y;
}

static void conv_node(tnode *t, const ccase *c, int n_in)
{
	int64_t v2[2];

	tn(t, "Conv", n_in, 1);
	tn_int(t, "group", c->G);
	v2[0] = c->s;
	v2[1] = c->s;
	tn_ints(t, "strides", v2, 2);
	v2[0] = c->d;
	v2[1] = c->d;
	tn_ints(t, "dilations", v2, 2);
	{
		int64_t pads[4] = {c->p, c->p, c->p, c->p};
		tn_ints(t, "pads", pads, 4);
	}
}

/* One case: W constant or not, bias or not, residual (same shape, per
 * channel, or none) with Relu, pool or not, output on the heap or planned
 * over the residual's or the input's memory. */
static void conv_run(const ccase *c, int w_const, int bias, int res_kind, int relu,
		     cpu_pool *pool, int plan_over)
{
	int64_t OH = out_dim(c->H, c->kh, c->s, c->p, c->d), OW = out_dim(c->W, c->kw, c->s, c->p, c->d);
	int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, c->C / c->G, c->kh, c->kw};
	int64_t yd[4] = {c->N, c->M, OH, OW}, rd[4] = {1, c->M, 1, 1}, bd[1] = {c->M};
	int64_t nx = c->N * c->C * c->H * c->W, ny = c->N * c->M * OH * OW;
	int64_t big = nx > ny ? nx : ny;
	float *x = rand_buf(big), *w = rand_buf(c->M * wd[1] * c->kh * c->kw), *b = rand_buf(c->M);
	float *r = rand_buf(big);
	cpu_tensor X = tens(CPU_FLOAT, 4, xd, x), Wt = tens(CPU_FLOAT, 4, wd, w);
	cpu_tensor B = tens(CPU_FLOAT, 1, bd, b), R = tens(CPU_FLOAT, 4, res_kind == 2 ? rd : yd, r);
	cpu_tensor P, out;
	const cpu_tensor *in[4] = {&X, &Wt, bias ? &B : NULL, res_kind ? &R : NULL};
	const cpu_tensor *consts[4] = {NULL, w_const ? &Wt : NULL, bias ? &B : NULL, NULL};
	/* relu: 0 none, 1 Relu, 2 Clip [-0.5, 1.5], 3 HardSwish, 4 SiLU */
	static const cpu_fuse_act acts[5] = {CPU_FUSE_ACT_NONE, CPU_FUSE_ACT_RELU, CPU_FUSE_ACT_CLIP,
					     CPU_FUSE_ACT_HSWISH, CPU_FUSE_ACT_SILU};
	cpu_fusion fu = {res_kind ? 3 : -1, -1, acts[relu], 0, 0, -1, -0.5f, 1.5f, 0, {0, 0}, 0, -1, -1};
	int fused = res_kind || relu;
	double *want = ref_conv(c, x, w, bias ? b : NULL, res_kind ? r : NULL, res_kind == 2,
				relu == 1);
	char what[160];
	tnode t;

	conv_node(&t, c, 3);
	if (!bias)
		tn_skip(&t, 2);
	/* Planned over the residual (same shape only) or over X's memory:
	 * the data the kernel still has to read. */
	P = tens(CPU_FLOAT, 4, yd, plan_over == 1 ? r : x);
	if (plan_over == 2)
		P.nbytes = (size_t)ny * sizeof(float);
	for (int64_t i = 0; i < ny && relu > 1; i++) {
		double v = want[i];

		want[i] = relu == 2 ? (v < -0.5 ? -0.5 : v > 1.5 ? 1.5 : v) :
			  relu == 3 ? v * fmin(1.0, fmax(0.0, v / 6 + 0.5)) : v / (1 + exp(-v));
	}
	out = run_node(&t, fused ? &fu : NULL, consts, fused ? 4 : 3, in, plan_over ? &P : NULL, pool);
	snprintf(what, sizeof(what), "conv N%lld C%lld %lldx%lld M%lld g%lld k%lldx%lld s%lld p%lld "
		 "d%lld wc%d b%d res%d relu%d pool%d plan%d", (long long)c->N, (long long)c->C,
		 (long long)c->H, (long long)c->W, (long long)c->M, (long long)c->G, (long long)c->kh,
		 (long long)c->kw, (long long)c->s, (long long)c->p, (long long)c->d, w_const, bias,
		 res_kind, relu, pool != NULL, plan_over);
	assert_int_equal(out.rank, 4);
	assert_memory_equal(out.dims, yd, sizeof(yd));
	expect_near(out.data, want, ny, 1e-4, what);
	if (!plan_over)
		free(out.data);
	free(want);
	free(x);
	free(w);
	free(b);
	free(r);
}

static const ccase conv_cases[] = {
	/* N  C   H   W   M   G kh kw s p d */
	{1, 3, 17, 19, 37, 1, 3, 3, 1, 1, 1},      /* ragged M, rows form */
	{1, 16, 5, 5, 64, 1, 3, 3, 1, 1, 1},       /* 25 pixels < 2 x 64: packed filter form */
	{2, 20, 7, 6, 45, 1, 3, 3, 2, 1, 1},       /* strided, batch 2, ragged */
	{1, 8, 9, 9, 30, 2, 3, 3, 1, 2, 2},        /* groups, dilation, pad 2 */
	{1, 33, 6, 6, 40, 1, 1, 1, 1, 0, 1},       /* 1x1 direct, packed form */
	{1, 12, 16, 16, 24, 1, 1, 1, 1, 0, 1},     /* 1x1 direct, rows form */
	{1, 6, 11, 13, 6, 6, 3, 3, 1, 1, 1},       /* depthwise */
	{1, 104, 14, 13, 104, 13, 3, 3, 1, 1, 1},  /* grouped 8+8 a group (RegNet) */
	{2, 48, 15, 17, 48, 6, 3, 3, 2, 1, 1},     /* grouped 8+8, stride 2, batch 2 */
	{1, 15, 9, 21, 36, 3, 3, 3, 1, 1, 1},      /* grouped 5 in, 12 out: a ragged block */
	{1, 64, 7, 9, 64, 2, 3, 3, 1, 1, 1},       /* grouped 32+32 */
	{1, 24, 10, 10, 48, 4, 1, 1, 1, 0, 1},     /* grouped 1x1 (ShuffleNet) */
	{1, 16, 12, 12, 16, 4, 5, 5, 1, 2, 1},     /* grouped 5x5 */
	{1, 16, 11, 11, 32, 4, 3, 3, 3, 1, 1},     /* grouped, stride 3: any-window path */
	{2, 5, 21, 37, 5, 5, 3, 3, 2, 1, 1},       /* depthwise 3x3/2, vector tails */
	{1, 4, 19, 26, 4, 4, 5, 5, 1, 2, 1},       /* depthwise 5x5/1 */
	{1, 3, 18, 33, 3, 3, 5, 5, 2, 2, 1},       /* depthwise 5x5/2 */
	{1, 2, 15, 17, 2, 2, 7, 7, 1, 3, 1},       /* depthwise 7x7/1 */
	{1, 3, 12, 14, 3, 3, 3, 3, 2, 0, 1},       /* depthwise 3x3/2 unpadded, odd */
	{1, 3, 13, 20, 3, 3, 3, 3, 1, 2, 2},       /* depthwise dilated */
	{1, 4, 1, 50, 4, 4, 1, 5, 1, 2, 1},        /* depthwise 1x5 (a 1-D signal) */
	{1, 2, 9, 9, 2, 2, 3, 1, 3, 1, 1},         /* depthwise 3x1, stride 3 */
	{2, 4, 10, 9, 8, 4, 3, 2, 2, 1, 2},        /* grouped 2 per group, 3x2 */
	{1, 5, 23, 23, 9, 1, 7, 7, 2, 3, 1},       /* 7x7 stride 2 (ResNet stem) */
	{1, 300, 4, 4, 70, 1, 3, 3, 1, 1, 1},      /* K 2700; Winograd (3x3 s1) */
	{2, 8, 7, 9, 16, 1, 3, 3, 1, 0, 1},        /* Winograd, odd 5x7 output, no pad */
	{1, 24, 6, 5, 33, 1, 3, 3, 1, 2, 1},       /* Winograd, pad 2, ragged M */
	{1, 16, 41, 39, 24, 1, 3, 3, 1, 1, 1},     /* Winograd in bands, ragged last band */
	{1, 64, 30, 30, 64, 1, 3, 3, 1, 1, 1},     /* Winograd in bands of two tile rows */
	/* seven bands of two tile rows: on the pool of two, one halved; five
	 * of three rows: one cut into one and two */
	{1, 64, 28, 28, 64, 1, 3, 3, 1, 1, 1},
	{1, 24, 30, 20, 40, 1, 3, 3, 1, 1, 1},
	/* two tile rows need 545 KB: whole, or in bands of half the L2
	 * where that is 1 MB or more */
	{1, 64, 24, 28, 240, 1, 3, 3, 1, 1, 1},
	/* unbanded, few input channels: on the pool of two each member
	 * transforms the whole input and takes half the output channels'
	 * panels (conv_wino.c run_cols); 48 outputs: a panel and a ragged one */
	{1, 64, 13, 13, 256, 1, 3, 3, 1, 1, 1},
	{2, 40, 9, 11, 48, 1, 3, 3, 1, 1, 1},
	/* dilated 3x3 with pads of the dilation: Winograd over the phase
	 * sub-images side by side (conv_wino_dilated); odd sizes leave some
	 * phases a row or column short */
	{1, 24, 13, 15, 40, 1, 3, 3, 1, 2, 2},
	{2, 32, 24, 24, 48, 1, 3, 3, 1, 4, 4},
	{1, 16, 21, 22, 64, 1, 3, 3, 1, 3, 3},
	{1, 48, 20, 18, 40, 1, 3, 3, 1, 2, 2},     /* the output over the input too */
	/* dilation 4 on 8 x 8: the outer taps cover half the outputs
	 * (conv_taps.c), also with the output over the residual or the input */
	{1, 24, 8, 8, 40, 1, 3, 3, 1, 4, 4},
	{1, 48, 8, 8, 40, 1, 3, 3, 1, 4, 4},
	/* 41 x 41 tiles x 80 channels, past the bound of an unbanded
	 * Winograd layer: in bands (conv_wino_fits) */
	{1, 80, 82, 81, 16, 1, 3, 3, 1, 1, 1},
	/* batches of 3 and 4 with a pool of 2: the images split over the pool,
	 * each member with its own im2col and transpose scratch */
	{3, 16, 5, 5, 64, 1, 3, 3, 1, 1, 1},       /* packed filter form, im2col */
	{3, 33, 6, 6, 40, 1, 1, 1, 1, 0, 1},       /* 1x1 direct, packed form */
	{4, 12, 16, 16, 24, 1, 1, 1, 1, 0, 1},     /* 1x1 direct, rows form */
	{4, 20, 9, 7, 45, 1, 3, 3, 2, 1, 1},       /* strided rows form, im2col packer */
	/* dilation past the image (DeepLabV3's atrous pyramid): the outer
	 * taps read only padding and are dropped (conv_prune_taps) */
	{1, 16, 5, 6, 8, 1, 3, 3, 1, 6, 6},        /* down to 1x1: the direct form */
	{1, 12, 5, 12, 9, 1, 3, 3, 1, 6, 6},       /* rows dropped, columns kept: 1x3 */
	{1, 6, 7, 7, 10, 1, 3, 3, 2, 8, 8},        /* down to 1x1 at stride 2 */
	{1, 8, 4, 4, 8, 8, 3, 3, 1, 4, 4},         /* depthwise down to 1x1 */
	{1, 16, 6, 6, 16, 2, 5, 5, 1, 8, 4},       /* grouped 5x5, the outer two of each side */
};

static void test_conv_forms(void **state)
{
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++)
		for (int v = 0; v < 4; v++)
			conv_run(&conv_cases[i], v & 1, v >> 1, 0, 0, (v & 1) ? pool : NULL, 0);
	cpu_pool_destroy(pool);
}

/* A layer past conv_wino_fits' tiles x channels bound whose tile row of
 * transforms no band holds (768 + 80 channels x 20 tiles a row: 1.1 MB)
 * and which conv_nhwc.c does not take (80 outputs, 720 pixels): Winograd
 * over the whole image (FCN's 2048 -> 512 head), not the im2col GEMM. */
static void test_conv_wino_whole(void **state)
{
	static const ccase c = {1, 768, 18, 40, 80, 1, 3, 3, 1, 1, 1};
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	conv_run(&c, 1, 1, 1, 1, pool, 0);   /* residual + Relu */
	conv_run(&c, 1, 1, 0, 0, NULL, 0);
	cpu_pool_destroy(pool);
}

static void test_conv_fused(void **state)
{
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++) {
		const ccase *c = &conv_cases[i];
		int64_t OH = out_dim(c->H, c->kh, c->s, c->p, c->d);
		int64_t OW = out_dim(c->W, c->kw, c->s, c->p, c->d);
		int same_xy = c->N * c->C * c->H * c->W >= c->N * c->M * OH * OW;

		conv_run(c, 1, 1, 1, 1, pool, 0);      /* residual + Relu, heap */
		conv_run(c, 1, 0, 0, 1, NULL, 0);      /* Relu only */
		conv_run(c, 1, 1, 2, 1, pool, 0);      /* per-channel addend: the tail */
		conv_run(c, 1, 1, 1, 1, pool, 1);      /* output over the residual */
		conv_run(c, 0, 1, 1, 0, NULL, 1);
		for (int act = 2; act <= 4; act++) {   /* the other activations, every form */
			conv_run(c, 1, 1, 0, act, pool, 0);
			conv_run(c, 1, 1, 1, act, NULL, 0);
		}
		if (same_xy)
			conv_run(c, 1, 1, 1, 1, pool, 2);   /* output over the input */
	}
	cpu_pool_destroy(pool);
}

/* ---- MatMul / Gemm with a fused tail ---- */

static double gelu(double x)
{
	return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void matmul_case(int64_t batch, int64_t M, int64_t K, int64_t N, cpu_fuse_act act,
			int with_bias, int with_res, cpu_pool *pool, int plan_over_a)
{
	int64_t ad[3] = {batch, M, K}, bd2[2] = {K, N}, yd[3] = {batch, M, N}, vd[1] = {N};
	int64_t rows = batch * M, na = rows * K, ny = rows * N;
	float *a = rand_buf(na > ny ? na : ny), *b = rand_buf(K * N), *bias = rand_buf(N);
	float *r = rand_buf(ny);
	double *want = malloc(sizeof(double) * (size_t)ny);
	cpu_tensor A = tens(CPU_FLOAT, 3, ad, a), B = tens(CPU_FLOAT, 2, bd2, b);
	cpu_tensor V = tens(CPU_FLOAT, 1, vd, bias), R = tens(CPU_FLOAT, 3, yd, r), P, out;
	const cpu_tensor *in[4] = {&A, &B, with_bias ? &V : NULL, with_res ? &R : NULL};
	const cpu_tensor *consts[4] = {NULL, &B, with_bias ? &V : NULL, NULL};
	cpu_fusion fu = {with_res ? 3 : -1, with_bias ? 2 : -1, act, 0, 0, -1, 0, 0, 0, {0, 0}, 0, -1, -1};
	char what[128];
	tnode t;

	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = with_bias ? bias[j] : 0.0;
			for (int64_t k = 0; k < K; k++)
				s += (double)a[i * K + k] * b[k * N + j];
			s += with_res ? r[i * N + j] : 0.0;
			want[i * N + j] = act == CPU_FUSE_ACT_RELU ? (s > 0 ? s : 0) :
					  act == CPU_FUSE_ACT_GELU ? gelu(s) : s;
		}
	tn(&t, "MatMul", 2, 1);
	P = tens(CPU_FLOAT, 3, yd, a);
	out = run_node(&t, &fu, consts, 4, in, plan_over_a ? &P : NULL, pool);
	snprintf(what, sizeof(what), "matmul %lldx%lldx%lldx%lld act%d bias%d res%d pool%d plan%d",
		 (long long)batch, (long long)M, (long long)K, (long long)N, (int)act, with_bias,
		 with_res, pool != NULL, plan_over_a);
	assert_memory_equal(out.dims, yd, sizeof(yd));
	expect_near(out.data, want, ny, 2e-5 * (1 + K / 64), what);
	if (!plan_over_a)
		free(out.data);
	free(want);
	free(a);
	free(b);
	free(bias);
	free(r);
}

static void test_matmul_fused(void **state)
{
	static const int64_t shapes[][4] = {
		{1, 1, 1024, 1000}, {2, 5, 67, 33}, {1, 128, 256, 1024}, {3, 17, 300, 70},
	};
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const int64_t *s = shapes[i];
		matmul_case(s[0], s[1], s[2], s[3], CPU_FUSE_ACT_GELU, 1, 0, pool, 0);
		matmul_case(s[0], s[1], s[2], s[3], CPU_FUSE_ACT_NONE, 1, 1, NULL, 0);
		matmul_case(s[0], s[1], s[2], s[3], CPU_FUSE_ACT_RELU, 0, 1, pool, 0);
		matmul_case(s[0], s[1], s[2], s[3], CPU_FUSE_ACT_RELU, 1, 1, pool, 1);
	}
	cpu_pool_destroy(pool);
}

/* Attention scores: batched MatMul of two activations with the scale of
 * a fused Div (the planner's Div by 8 becomes 0.125), then a residual. */
static void test_matmul_scale(void **state)
{
	int64_t ad[3] = {4, 16, 8}, bd[3] = {4, 8, 19}, yd[3] = {4, 16, 19}, ny = 4 * 16 * 19;
	float *a = rand_buf(4 * 16 * 8), *b = rand_buf(4 * 8 * 19), *r = rand_buf(ny);
	double *want = malloc(sizeof(double) * (size_t)ny);
	cpu_tensor A = tens(CPU_FLOAT, 3, ad, a), B = tens(CPU_FLOAT, 3, bd, b);
	cpu_tensor R = tens(CPU_FLOAT, 3, yd, r), out;
	const cpu_tensor *in[4] = {&A, &B, NULL, &R}, *consts[4] = {NULL, NULL, NULL, NULL};
	cpu_fusion fu = {3, -1, CPU_FUSE_ACT_NONE, 0.125f, 0, -1, 0, 0, 0, {0, 0}, 0, -1, -1};
	cpu_pool *pool;
	tnode t;

	(void)state;
	for (int64_t h = 0; h < 4; h++)
		for (int64_t i = 0; i < 16; i++)
			for (int64_t j = 0; j < 19; j++) {
				double s = 0;
				for (int64_t k = 0; k < 8; k++)
					s += (double)a[(h * 16 + i) * 8 + k] * b[(h * 8 + k) * 19 + j];
				want[(h * 16 + i) * 19 + j] = s * 0.125 + r[(h * 16 + i) * 19 + j];
			}
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	tn(&t, "MatMul", 2, 1);
	out = run_node(&t, &fu, consts, 4, in, NULL, pool);
	assert_memory_equal(out.dims, yd, sizeof(yd));
	expect_near(out.data, want, ny, 1e-5, "scaled matmul");
	free(out.data);
	cpu_pool_destroy(pool);
	free(want);
	free(a);
	free(b);
	free(r);
}

/* Gemm as nn.Linear exports it (transB 1, C a row) with a fused Relu, and
 * with a C of [M, N] (not foldable): alpha and beta apply. */
static void test_gemm_linear(void **state)
{
	static const int64_t shapes[][3] = {{1, 1024, 1024}, {32, 100, 37}, {15, 9, 70}};
	cpu_pool *pool;

	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int full_c = 0; full_c < 2; full_c++) {
			int64_t M = shapes[i][0], K = shapes[i][1], N = shapes[i][2];
			int64_t ad[2] = {M, K}, bd[2] = {N, K}, cd[2] = {full_c ? M : 1, N}, yd[2] = {M, N};
			float *a = rand_buf(M * K), *b = rand_buf(N * K), *cc = rand_buf(M * N);
			double *want = malloc(sizeof(double) * (size_t)(M * N));
			cpu_tensor A = tens(CPU_FLOAT, 2, ad, a), B = tens(CPU_FLOAT, 2, bd, b);
			cpu_tensor C = tens(CPU_FLOAT, 2, cd, cc), out;
			const cpu_tensor *in[3] = {&A, &B, &C}, *consts[3] = {NULL, &B, &C};
			cpu_fusion fu = {-1, -1, CPU_FUSE_ACT_RELU, 0, 0, -1, 0, 0, 0, {0, 0}, 0, -1, -1};
			tnode t;

			for (int64_t r = 0; r < M; r++)
				for (int64_t j = 0; j < N; j++) {
					double s = 0;
					for (int64_t k = 0; k < K; k++)
						s += (double)a[r * K + k] * b[j * K + k];
					s = 0.5 * s + 2.0 * cc[(full_c ? r : 0) * N + j];
					want[r * N + j] = s > 0 ? s : 0;
				}
			tn(&t, "Gemm", 3, 1);
			tn_int(&t, "transB", 1);
			tn_float(&t, "alpha", 0.5f);
			tn_float(&t, "beta", 2.0f);
			out = run_node(&t, &fu, consts, 3, in, NULL, (i & 1) ? pool : NULL);
			assert_memory_equal(out.dims, yd, sizeof(yd));
			expect_near(out.data, want, M * N, 2e-5 * (1 + K / 64), "gemm linear");
			free(out.data);
			free(want);
			free(a);
			free(b);
			free(cc);
		}
	cpu_pool_destroy(pool);
}

/* ---- the planner ---- */

/* A graph of `n` nodes over value names v0..; node k: op, inputs, output. */
typedef struct tgraph {
	Onnx__GraphProto g;
	tnode nodes[8];
	Onnx__NodeProto *pn[8];
	int in[8][CPU_FUSE_MAX_IN], out[8][2];
	int *inp[8], *outp[8];
	cpu_tensor consts[16];
	unsigned char exported[16];
	int extra[16];
} tgraph;

static void tg_node(tgraph *tg, int k, const char *op, int n_in, const int *ins, int out)
{
	tn(&tg->nodes[k], op, n_in, 1);
	tg->pn[k] = &tg->nodes[k].p;
	memcpy(tg->in[k], ins, sizeof(int) * (size_t)n_in);
	tg->out[k][0] = out;
	tg->inp[k] = tg->in[k];
	tg->outp[k] = tg->out[k];
}

static cpu_fuse_node *tg_plan(tgraph *tg, int n)
{
	Onnx__GraphProto init = ONNX__GRAPH_PROTO__INIT;
	cpu_fuse_graph fg = {&tg->g, 16, tg->inp, tg->outp, tg->consts, tg->exported, tg->extra,
			     17, NULL};

	tg->g = init;
	tg->g.n_node = (size_t)n;
	tg->g.node = tg->pn;
	return cpu_fuse_plan(&fg);
}

/* Conv(x=0, w=1) -> 2 -> BN(2, 3..6) -> 7 -> Add(7, 8) -> 9 -> Relu -> 10. */
static void resnet_block(tgraph *tg, float *w, float *p)
{
	static const int64_t wd[4] = {2, 1, 1, 1}, pd[1] = {2};
	static const int conv_in[2] = {0, 1}, bn_in[5] = {2, 3, 4, 5, 6}, add_in[2] = {7, 8};
	static const int relu_in[1] = {9};

	memset(tg, 0, sizeof(*tg));
	tg->consts[1] = tens(CPU_FLOAT, 4, wd, w);
	for (int i = 0; i < 4; i++)
		tg->consts[3 + i] = tens(CPU_FLOAT, 1, pd, p + 2 * i);
	tg_node(tg, 0, "Conv", 2, conv_in, 2);
	tg_node(tg, 1, "BatchNormalization", 5, bn_in, 7);
	tg_node(tg, 2, "Add", 2, add_in, 9);
	tg_node(tg, 3, "Relu", 1, relu_in, 10);
	tg->exported[10] = 1;
}

static void test_fuse_plan(void **state)
{
	/* scale, B, mean, var per channel */
	float w[2] = {2.0f, -1.0f}, p[8] = {1.0f, 3.0f, 0.5f, -0.5f, 0.25f, 1.0f, 3.0f, 0.0f};
	tgraph tg;
	cpu_fuse_node *f;
	const float *fw, *fb;

	(void)state;
	resnet_block(&tg, w, p);
	f = tg_plan(&tg, 4);
	assert_non_null(f);
	assert_true(f[0].head && f[1].skip && f[2].skip && f[3].skip);
	assert_int_equal(f[0].n_fused, 4);
	assert_int_equal(f[0].out0, 10);
	assert_int_equal(f[0].fuse.act, CPU_FUSE_ACT_RELU);
	assert_int_equal(f[0].fuse.add_input, 3);
	assert_int_equal(f[0].in[3], 8);
	/* numpy's BN: (y - mean) / sqrt(var + eps) * scale + B */
	fw = f[0].folded[1]->data;
	fb = f[0].folded[2]->data;
	assert_float_equal(fw[0], 2.0 * 1.0 / sqrt(3.0 + 1e-5), 1e-6);
	assert_float_equal(fw[1], -1.0 * 3.0 / sqrt(0.0 + 1e-5), 1e-3);
	assert_float_equal(fb[0], (0.0 - 0.25) * 1.0 / sqrt(3.0 + 1e-5) + 0.5, 1e-6);
	assert_float_equal(fb[1], (0.0 - 1.0) * 3.0 / sqrt(1e-5) - 0.5, 1e-2);
	cpu_fuse_free(f, 4);

	/* The Conv output is read by the core: nothing follows it. */
	resnet_block(&tg, w, p);
	tg.exported[2] = 1;
	f = tg_plan(&tg, 4);
	assert_false(f[0].head || f[1].skip);
	cpu_fuse_free(f, 4);

	/* The sum is read by the core: Conv+BN+Add fuse, Relu runs alone. */
	resnet_block(&tg, w, p);
	tg.exported[9] = 1;
	f = tg_plan(&tg, 4);
	assert_true(f[0].head && f[1].skip && f[2].skip && !f[3].skip);
	assert_int_equal(f[0].out0, 9);
	assert_int_equal(f[0].fuse.act, CPU_FUSE_ACT_NONE);
	cpu_fuse_free(f, 4);

	/* The addend is produced after the head: no Add fusion. */
	resnet_block(&tg, w, p);
	{
		static const int add_in[2] = {7, 12}, late_in[1] = {0};

		memcpy(tg.in[2], add_in, sizeof(add_in));
		tg_node(&tg, 4, "Relu", 1, late_in, 12);   /* written after the head */
	}
	f = tg_plan(&tg, 5);
	assert_true(f[0].head && f[1].skip && !f[2].skip);
	assert_int_equal(f[0].out0, 7);
	cpu_fuse_free(f, 5);

	/* A node between Conv and BN: the chain must be consecutive. */
	resnet_block(&tg, w, p);
	{
		static const int mid_in[1] = {0};

		tg_node(&tg, 4, "Relu", 1, mid_in, 13);
		tg.pn[4] = tg.pn[3];
		tg.pn[3] = tg.pn[2];
		tg.pn[2] = tg.pn[1];
		tg.pn[1] = &tg.nodes[4].p;
		memcpy(tg.in[5], tg.in[1], sizeof(tg.in[1]));
		memcpy(tg.in[1], tg.in[4], sizeof(tg.in[4]));
		memcpy(tg.in[4], tg.in[3], sizeof(tg.in[3]));
		memcpy(tg.in[3], tg.in[2], sizeof(tg.in[2]));
		memcpy(tg.in[2], tg.in[5], sizeof(tg.in[5]));
		tg.out[4][0] = 10;
		tg.out[3][0] = 9;
		tg.out[2][0] = 7;
		tg.out[1][0] = 13;
	}
	f = tg_plan(&tg, 5);
	assert_false(f[0].head);
	cpu_fuse_free(f, 5);

	/* BN(0, 1..4) -> 5 -> Relu -> 6: a BatchNormalization no Conv took
	 * fuses its activation (DenseNet), not an Add. */
	memset(&tg, 0, sizeof(tg));
	{
		static const int bn_in[5] = {0, 1, 2, 3, 4}, relu_in[1] = {5}, add_in[2] = {5, 0};

		tg_node(&tg, 0, "BatchNormalization", 5, bn_in, 5);
		tg_node(&tg, 1, "Relu", 1, relu_in, 6);
		tg.exported[6] = 1;
		f = tg_plan(&tg, 2);
		assert_true(f[0].head && f[1].skip);
		assert_int_equal(f[0].out0, 6);
		assert_int_equal(f[0].fuse.act, CPU_FUSE_ACT_RELU);
		cpu_fuse_free(f, 2);
		tg_node(&tg, 1, "Add", 2, add_in, 6);
		f = tg_plan(&tg, 2);
		assert_false(f[0].head || f[1].skip);
		cpu_fuse_free(f, 2);
	}

	/* MatMul(0, 1) -> 2 -> Div(2, 3 = 8) -> 4 -> Softmax: the scale fuses,
	 * a Div by a non-constant does not. */
	memset(&tg, 0, sizeof(tg));
	{
		static const int64_t sd[1] = {1};
		static const float eight = 8.0f;
		static const int mm_in[2] = {0, 1}, div_in[2] = {2, 3}, sm_in[1] = {4};

		tg.consts[3] = tens(CPU_FLOAT, 1, sd, &eight);
		tg_node(&tg, 0, "MatMul", 2, mm_in, 2);
		tg_node(&tg, 1, "Div", 2, div_in, 4);
		tg_node(&tg, 2, "Softmax", 1, sm_in, 5);
		tg.exported[5] = 1;
		f = tg_plan(&tg, 3);
		assert_true(f[0].head && f[1].skip && !f[2].skip);
		assert_float_equal(f[0].fuse.scale, 0.125, 0);
		assert_int_equal(f[0].out0, 4);
		cpu_fuse_free(f, 3);
		tg.consts[3].data = NULL;
		f = tg_plan(&tg, 3);
		assert_false(f[0].head);
		cpu_fuse_free(f, 3);
	}

	/* Without the list of exported values nothing is fused. */
	resnet_block(&tg, w, p);
	{
		Onnx__GraphProto init = ONNX__GRAPH_PROTO__INIT;
		cpu_fuse_graph fg = {&tg.g, 16, tg.inp, tg.outp, tg.consts, NULL, tg.extra, 17, NULL};
		tg.g = init;
		tg.g.n_node = 4;
		tg.g.node = tg.pn;
		assert_null(cpu_fuse_plan(&fg));
	}
}

/* cpu_keep's large-output recycling: a released block of 1 MiB or more
 * serves the next output it fits (up to twice its size), smaller ones are
 * freed, and with every slot taken a larger block evicts the smallest. */
static void test_keep_recycle(void **state)
{
	cpu_keep k;
	void *a, *b, *c, *blocks[CPU_KEEP_BIG];
	size_t mib = (size_t)1 << 20;

	(void)state;
	memset(&k, 0, sizeof(k));
	a = cpu_keep_alloc(&k, 3 * mib);
	assert_non_null(a);
	assert_int_equal((uintptr_t)a % 64, 0);
	memset(a, 1, 3 * mib);
	cpu_keep_release(&k, a, 3 * mib);
	assert_ptr_equal(cpu_keep_alloc(&k, 2 * mib), a);        /* fits: reused */
	cpu_keep_release(&k, a, 3 * mib);
	b = cpu_keep_alloc(&k, mib);                              /* 3x larger: not */
	assert_ptr_not_equal(b, a);
	c = cpu_keep_alloc(&k, 4 * mib);                          /* too small: not */
	assert_ptr_not_equal(c, a);
	cpu_keep_release(&k, b, mib);
	cpu_keep_release(&k, c, 4 * mib);
	cpu_keep_free(&k);
	for (int i = 0; i < CPU_KEEP_BIG; i++)
		assert_null(k.big[i]);
	for (int i = 0; i < CPU_KEEP_BIG; i++) {
		blocks[i] = cpu_keep_alloc(&k, (size_t)(i + 1) * mib);
		assert_non_null(blocks[i]);
	}
	for (int i = 0; i < CPU_KEEP_BIG; i++)
		cpu_keep_release(&k, blocks[i], (size_t)(i + 1) * mib);
	a = cpu_keep_alloc(&k, 40 * mib);
	cpu_keep_release(&k, a, 40 * mib);                        /* evicts the 1 MiB one */
	for (int i = 0; i < CPU_KEEP_BIG; i++)
		assert_int_not_equal(k.big_cap[i], mib);
	assert_ptr_equal(cpu_keep_alloc(&k, 30 * mib), a);
	free(a);
	a = cpu_keep_alloc(&k, 1000);                             /* small: never kept */
	cpu_keep_release(&k, a, 1000);
	cpu_keep_free(&k);
}

/* Once a node has run with a shape, running it again allocates nothing:
 * Conv (both forms, im2col scratch, fused residual and Relu), MatMul with
 * a fused bias and Gelu, on a one-thread and a two-thread pool. */
static void test_no_alloc(void **state)
{
#ifndef COUNT_ALLOCS
	skip();
#endif
	static const ccase cs[] = {{1, 16, 12, 12, 24, 1, 3, 3, 1, 1, 1},
				   {1, 16, 5, 5, 64, 1, 3, 3, 1, 1, 1}};
	(void)state;
	for (int threads = 1; threads <= 2; threads++) {
		cpu_pool *pool;

		assert_int_equal(cpu_pool_create(threads, &pool), 0);
		for (size_t i = 0; i < 2; i++) {
			const ccase *c = &cs[i];
			int64_t xd[4] = {1, c->C, c->H, c->W}, wd[4] = {c->M, c->C, 3, 3};
			int64_t yd[4] = {1, c->M, c->H, c->W}, bd[1] = {c->M};
			int64_t ny = c->M * c->H * c->W;
			float *x = rand_buf(c->C * c->H * c->W), *w = rand_buf(c->M * c->C * 9);
			float *b = rand_buf(c->M), *r = rand_buf(ny), *y = rand_buf(ny);
			cpu_tensor X = tens(CPU_FLOAT, 4, xd, x), W = tens(CPU_FLOAT, 4, wd, w);
			cpu_tensor B = tens(CPU_FLOAT, 1, bd, b), R = tens(CPU_FLOAT, 4, yd, r);
			cpu_tensor Y = tens(CPU_FLOAT, 4, yd, y), out;
			const cpu_tensor *in[4] = {&X, &W, &B, &R}, *consts[4] = {NULL, &W, &B, NULL};
			const cpu_tensor *pl[1] = {&Y};
			cpu_fusion fu = {3, -1, CPU_FUSE_ACT_RELU, 0, 0, -1, 0, 0, 0, {0, 0}, 0, -1, -1};
			cpu_keep keep = {0};
			cpu_run_env env = {.pool = pool, .threads = threads, .keep = &keep};
			cpu_node node;
			char err[ERRLEN];
			int heap;
			tnode t;

			conv_node(&t, c, 3);
			assert_int_equal(cpu_node_init(&node, TEST_LOAD, &fu, &t.p, 17,
						       consts, 4, 1, err, sizeof(err)), 0);
			for (int run = 0; run < 3; run++) {
				counting = 1;
				assert_int_equal(cpu_node_run(&node, &env, in, pl, &out, &heap, err,
							      sizeof(err)), 0);
				counting = 0;
				/* The first run sizes the scratch (the counter works). */
				if (run == 0)
					assert_true(allocs > 0);
				else
					assert_int_equal(allocs, 0);
				allocs = 0;
			}
			cpu_node_fini(&node);
			cpu_keep_free(&keep);
			free(x);
			free(w);
			free(b);
			free(r);
			free(y);
		}
		{
			int64_t ad[2] = {64, 96}, bd[2] = {96, 80}, yd[2] = {64, 80}, vd[1] = {80};
			float *a = rand_buf(64 * 96), *b = rand_buf(96 * 80), *v = rand_buf(80);
			float *y = rand_buf(64 * 80);
			cpu_tensor A = tens(CPU_FLOAT, 2, ad, a), B = tens(CPU_FLOAT, 2, bd, b);
			cpu_tensor V = tens(CPU_FLOAT, 1, vd, v), Y = tens(CPU_FLOAT, 2, yd, y), out;
			const cpu_tensor *in[3] = {&A, &B, &V}, *consts[3] = {NULL, &B, &V};
			const cpu_tensor *pl[1] = {&Y};
			cpu_fusion fu = {-1, 2, CPU_FUSE_ACT_GELU, 0, 0, -1, 0, 0, 0, {0, 0}, 0, -1, -1};
			cpu_keep keep = {0};
			cpu_run_env env = {.pool = pool, .threads = threads, .keep = &keep};
			cpu_node node;
			char err[ERRLEN];
			int heap;
			tnode t;

			tn(&t, "MatMul", 2, 1);
			assert_int_equal(cpu_node_init(&node, TEST_LOAD, &fu, &t.p, 17,
						       consts, 3, 1, err, sizeof(err)), 0);
			for (int run = 0; run < 3; run++) {
				counting = run > 0;
				assert_int_equal(cpu_node_run(&node, &env, in, pl, &out, &heap, err,
							      sizeof(err)), 0);
				counting = 0;
			}
			assert_int_equal(allocs, 0);
			cpu_node_fini(&node);
			cpu_keep_free(&keep);
			free(a);
			free(b);
			free(v);
			free(y);
		}
		cpu_pool_destroy(pool);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conv_forms),
		cmocka_unit_test(test_conv_fused),
		cmocka_unit_test(test_conv_wino_whole),
		cmocka_unit_test(test_matmul_fused),
		cmocka_unit_test(test_matmul_scale),
		cmocka_unit_test(test_gemm_linear),
		cmocka_unit_test(test_fuse_plan),
		cmocka_unit_test(test_no_alloc),
		cmocka_unit_test(test_keep_recycle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
