/*
 * Unit tests for the quantized ops on the int8 GEMM, through cpu_node:
 * ConvInteger (1-D to 3-D, groups, depthwise, 1x1, pads, strides,
 * dilations, uint8/int8 inputs and filters, weight zero points per tensor
 * and per channel, constant filter packed at load or not) and
 * MatMulInteger (batch broadcast, 1-D operands, constant B packed at load,
 * zero points per row and column) against a plain int32 reference, on no
 * pool and a 2-thread pool; then both with the fused dequantizing tail
 * (cpu_fusion.quant: Cast, Mul by the scales, bias, Relu), bit for bit
 * against the float32 steps of the unfused nodes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_node.h"
#include "cpu_ops.h"
#include "cpu_test_util.h"
#include "threadpool.h"

static uint32_t rng = 4242;

static uint32_t rnd(void)
{
	rng = rng * 1664525u + 1013904223u;
	return rng >> 8;
}

static void fill8(void *p, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)rnd();
}

static int32_t val8(int32_t dt, const void *p, int64_t i)
{
	return dt == CPU_INT8 ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

static int32_t zp8(int32_t dt)
{
	return dt == CPU_INT8 ? (int32_t)(rnd() % 256) - 128 : (int32_t)(rnd() % 256);
}

static void put8(int32_t dt, void *p, int64_t i, int32_t v)
{
	if (dt == CPU_INT8)
		((int8_t *)p)[i] = (int8_t)v;
	else
		((uint8_t *)p)[i] = (uint8_t)v;
}

/* Runs t on in[] (consts[i] constant at load, fu the fusion or NULL) with
 * output 0 at planned (NULL: on the heap, for the caller to free). */
static cpu_tensor run_node(tnode *t, const cpu_fusion *fu, const cpu_tensor **consts, int n_in,
			   const cpu_tensor **in, cpu_pool *pool, const cpu_tensor *planned)
{
	cpu_node node;
	cpu_tensor out;
	const cpu_tensor *pl[1] = {planned};
	int heap = 0;
	char err[ERRLEN];

	if (cpu_node_init(&node, TEST_LOAD, fu, &t->p, 17, consts, n_in, 1, err, sizeof(err)))
		fail_msg("init: %s", err);
	if (cpu_node_run(&node, &(cpu_run_env){.pool = pool, .threads = pool ? 2 : 1}, in, pl, &out,
			 &heap, err, sizeof(err)))
		fail_msg("run: %s", err);
	cpu_node_fini(&node);
	return out;
}

/* ---- ConvInteger ---- */

typedef struct qcase {
	int nsp;                          /* spatial dims, 1 to 3 */
	int64_t N, C, M, G, in[3], k[3], s[3], pb[3], pe[3], d[3];
	int32_t xdt, wdt;
	int w_per_channel, w_const;
} qcase;

static void random_qcase(qcase *c)
{
	int dw = rnd() % 5 == 0;

	memset(c, 0, sizeof(*c));
	c->nsp = rnd() % 6 == 0 ? 1 : rnd() % 8 == 0 ? 3 : 2;
	c->N = 1 + rnd() % 2;
	c->G = dw ? 1 + rnd() % 6 : rnd() % 3 == 0 ? 1 + rnd() % 3 : 1;
	c->C = c->G * (dw ? 1 : 1 + rnd() % 9);
	c->M = c->G * (dw ? 1 : 1 + rnd() % 19);
	for (int i = 0; i < 3; i++) {
		int on = i >= 3 - c->nsp;
		c->k[i] = on ? 1 + rnd() % (c->nsp == 3 ? 2 : 5) : 1;
		c->s[i] = on ? 1 + rnd() % 2 : 1;
		c->d[i] = on && rnd() % 5 == 0 ? 2 : 1;
		c->pb[i] = on ? rnd() % 3 : 0;
		c->pe[i] = on ? rnd() % 3 : 0;
		c->in[i] = on ? (c->d[i] * (c->k[i] - 1) + 1) + rnd() % (c->nsp == 3 ? 5 : 23) : 1;
	}
	c->xdt = rnd() & 1 ? CPU_INT8 : CPU_UINT8;
	c->wdt = rnd() & 1 ? CPU_INT8 : CPU_UINT8;
	c->w_per_channel = rnd() % 3 == 0;
	c->w_const = rnd() % 4 != 0;
}

static int64_t odim(const qcase *c, int i)
{
	return (c->in[i] + c->pb[i] + c->pe[i] - (c->d[i] * (c->k[i] - 1) + 1)) / c->s[i] + 1;
}

/* The spec's int32 sums, modulo 2^32. */
static int32_t *ref_qconv(const qcase *c, const void *x, int32_t zx, const void *w,
			  const int32_t *zw)
{
	int64_t o[3] = {odim(c, 0), odim(c, 1), odim(c, 2)}, osz = o[0] * o[1] * o[2];
	int64_t isz = c->in[0] * c->in[1] * c->in[2], Cg = c->C / c->G, Mg = c->M / c->G;
	int64_t ksz = c->k[0] * c->k[1] * c->k[2];
	int32_t *y = malloc(sizeof(int32_t) * (size_t)(c->N * c->M * osz + 1));

	assert_non_null(y);
	for (int64_t n = 0; n < c->N; n++)
		for (int64_t m = 0; m < c->M; m++)
			for (int64_t p = 0; p < osz; p++) {
				int64_t od = p / (o[1] * o[2]), oh = p / o[2] % o[1], ow = p % o[2];
				int64_t g = m / Mg;
				uint32_t s = 0;
				for (int64_t ci = 0; ci < Cg; ci++)
					for (int64_t t = 0; t < ksz; t++) {
						int64_t kd = t / (c->k[1] * c->k[2]), kh = t / c->k[2] % c->k[1];
						int64_t kw = t % c->k[2];
						int64_t id = od * c->s[0] - c->pb[0] + kd * c->d[0];
						int64_t ih = oh * c->s[1] - c->pb[1] + kh * c->d[1];
						int64_t iw = ow * c->s[2] - c->pb[2] + kw * c->d[2];
						int64_t xc = (n * c->C + g * Cg + ci) * isz;
						int32_t xv, wv;
						if (id < 0 || id >= c->in[0] || ih < 0 || ih >= c->in[1] ||
						    iw < 0 || iw >= c->in[2])
							continue;
						xv = val8(c->xdt, x, xc + (id * c->in[1] + ih) * c->in[2] + iw) - zx;
						wv = val8(c->wdt, w, (m * Cg + ci) * ksz + t) - zw[c->w_per_channel ? m : 0];
						s += (uint32_t)xv * (uint32_t)wv;
					}
				y[(n * c->M + m) * osz + p] = (int32_t)s;
			}
	return y;
}

/* Builds and runs one ConvInteger; with fused, its tail (scales s0 * s1,
 * bias per channel, a residual addend with res: 2 when the core planned
 * the output over the addend itself, then Relu) in float32 steps against
 * the reference. */
static void check_qconv(const qcase *c, cpu_pool *pool, int fused, int res)
{
	int64_t isz = c->in[0] * c->in[1] * c->in[2], ksz = c->k[0] * c->k[1] * c->k[2];
	int64_t o[3] = {odim(c, 0), odim(c, 1), odim(c, 2)}, osz = o[0] * o[1] * o[2];
	int64_t xd[5], wd[5], zd[1] = {c->M}, bd[4] = {1, c->M, 1, 1}, ints[6];
	int r = c->nsp + 2;
	void *x = malloc((size_t)(c->N * c->C * isz + 1)), *w = malloc((size_t)(c->M * (c->C / c->G) * ksz + 1));
	int32_t zx = zp8(c->xdt), *zw = malloc(sizeof(int32_t) * (size_t)c->M);
	uint8_t zxb[1], *zwb = malloc((size_t)c->M);
	float s0 = (float)(rnd() % 1000 + 1) * 1.3e-4f, s1 = (float)(rnd() % 1000 + 1) * 7e-3f;
	float *bias = malloc(sizeof(float) * (size_t)c->M);
	float *rv = malloc(sizeof(float) * (size_t)(c->N * c->M * osz + 1));
	float *rcopy = malloc(sizeof(float) * (size_t)(c->N * c->M * osz + 1));
	cpu_tensor tx, tw, tzx, tzw, ts0, ts1, tb, tr, out;
	const cpu_tensor *in[8], *consts[8] = {0};
	cpu_fusion fu = {-1, -1, CPU_FUSE_ACT_RELU, 0, 0, -1, 0, 0, 0, {0, 0}, 1, 4, 5};
	int n_in = fused ? (res ? 8 : 7) : 4;
	int64_t yd[5];
	int32_t *want;
	tnode t;

	xd[0] = c->N;
	xd[1] = c->C;
	wd[0] = c->M;
	wd[1] = c->C / c->G;
	for (int i = 0; i < c->nsp; i++) {
		xd[2 + i] = c->in[3 - c->nsp + i];
		wd[2 + i] = c->k[3 - c->nsp + i];
	}
	fill8(x, c->N * c->C * isz);
	fill8(w, c->M * (c->C / c->G) * ksz);
	put8(c->xdt, zxb, 0, zx);
	for (int64_t m = 0; m < c->M; m++) {
		zw[m] = c->w_per_channel || m == 0 ? zp8(c->wdt) : zw[0];
		put8(c->wdt, zwb, m, zw[m]);
		bias[m] = (float)((int32_t)(rnd() % 2001) - 1000) * 0.01f;
	}
	tx = tens(c->xdt, r, xd, x);
	tw = tens(c->wdt, r, wd, w);
	tzx = tens(c->xdt, 0, NULL, zxb);
	tzw = tens(c->wdt, c->w_per_channel ? 1 : 0, zd, zwb);
	ts0 = tens(CPU_FLOAT, 0, NULL, &s0);
	ts1 = tens(CPU_FLOAT, 0, NULL, &s1);
	tb = tens(CPU_FLOAT, 4, bd, bias);
	yd[0] = c->N;
	yd[1] = c->M;
	for (int i = 0; i < c->nsp; i++)
		yd[2 + i] = o[3 - c->nsp + i];
	for (int64_t e = 0; e < c->N * c->M * osz; e++)
		rcopy[e] = rv[e] = (float)((int32_t)(rnd() % 2001) - 1000) * 0.05f;
	tr = tens(CPU_FLOAT, r, yd, rv);
	in[7] = &tr;
	in[0] = &tx;
	in[1] = &tw;
	in[2] = &tzx;
	in[3] = &tzw;
	in[4] = &ts0;
	in[5] = &ts1;
	in[6] = &tb;
	if (c->w_const)
		consts[1] = &tw;
	consts[6] = &tb;
	tn(&t, "ConvInteger", n_in, 1);
	for (int i = 0; i < c->nsp; i++) {
		ints[i] = c->pb[3 - c->nsp + i];
		ints[c->nsp + i] = c->pe[3 - c->nsp + i];
	}
	tn_ints(&t, "pads", ints, (size_t)(2 * c->nsp));
	for (int i = 0; i < c->nsp; i++)
		ints[i] = c->s[3 - c->nsp + i];
	tn_ints(&t, "strides", ints, (size_t)c->nsp);
	for (int i = 0; i < c->nsp; i++)
		ints[i] = c->d[3 - c->nsp + i];
	tn_ints(&t, "dilations", ints, (size_t)c->nsp);
	tn_int(&t, "group", c->G);
	if (fused)
		fu.bias_input = 6;
	if (res)
		fu.add_input = 7;
	out = run_node(&t, fused ? &fu : NULL, consts, n_in, in, pool, res == 2 ? &tr : NULL);
	want = ref_qconv(c, x, zx, w, zw);
	assert_int_equal(out.dtype, fused ? CPU_FLOAT : CPU_INT32);
	assert_int_equal(cpu_numel(&out), c->N * c->M * osz);
	for (int64_t e = 0; e < c->N * c->M * osz; e++) {
		int64_t m = e / osz % c->M;
		if (fused) {
			float f = (float)want[e], g = ((float *)out.data)[e];
			f = f * (s0 * s1);
			f = f + bias[m];
			if (res)
				f = f + rcopy[e];
			f = f < 0.0f ? 0.0f : f;
			if (memcmp(&f, &g, 4))
				fail_msg("fused conv %dD N%lld C%lld M%lld G%lld k%lld s%lld [%lld]: %.9g, want %.9g",
					 c->nsp, (long long)c->N, (long long)c->C, (long long)c->M,
					 (long long)c->G, (long long)c->k[2], (long long)c->s[2],
					 (long long)e, g, f);
		} else if (((int32_t *)out.data)[e] != want[e]) {
			fail_msg("conv %dD N%lld C%lld M%lld G%lld k%lld s%lld p%lld d%lld x%d w%d pc%d [%lld]: %d, want %d",
				 c->nsp, (long long)c->N, (long long)c->C, (long long)c->M, (long long)c->G,
				 (long long)c->k[2], (long long)c->s[2], (long long)c->pb[2],
				 (long long)c->d[2], c->xdt, c->wdt, c->w_per_channel, (long long)e,
				 ((int32_t *)out.data)[e], want[e]);
		}
	}
	if (res != 2)
		free(out.data);
	free(want);
	free(x);
	free(w);
	free(zw);
	free(zwb);
	free(bias);
	free(rv);
	free(rcopy);
}

static void test_convinteger_random(void **state)
{
	cpu_pool *pool = NULL;
	qcase c;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int n = 0; n < 300; n++) {
		random_qcase(&c);
		check_qconv(&c, n & 1 ? pool : NULL, 0, 0);
	}
	cpu_pool_destroy(pool);
}

/* Shapes of the zoo's models: 3x3 and 1x1 over many pixels, stride 2,
 * depthwise 5x5, grouped 3x3. */
static void test_convinteger_shapes(void **state)
{
	static const qcase cs[] = {
		{2, 1, 16, 16, 1, {1, 64, 70}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 0, 1},
		{2, 1, 48, 20, 1, {1, 28, 28}, {1, 1, 1}, {1, 1, 1}, {0}, {0}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 0, 1},
		{2, 1, 3, 32, 1, {1, 37, 45}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 1, 1},
		{2, 1, 24, 24, 24, {1, 19, 17}, {1, 5, 5}, {1, 2, 2}, {0, 2, 2}, {0, 2, 2}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 0, 1},
		{2, 2, 32, 32, 4, {1, 14, 14}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 1, 1},
		{2, 1, 130, 7, 1, {1, 9, 9}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_INT8, CPU_INT8, 0, 0},
		{2, 1, 300, 12, 1, {1, 9, 11}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 0, 1},
		/* stride 2 over rows of 32 bytes and more (qconv.c's evens16),
		 * grouped as RegNet's 8-channel groups, int8 input (flipped) */
		{2, 1, 48, 48, 6, {1, 21, 70}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_INT8, CPU_UINT8, 0, 1},
		{2, 1, 5, 8, 1, {1, 9, 67}, {1, 3, 3}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 0, 1},
		/* unpadded 1x1 on small planes, run as one flattened row (7x7:
		 * MobileNetV2's last stage; 5x9 over two images, int8 input) */
		{2, 1, 40, 70, 1, {1, 7, 7}, {1, 1, 1}, {1, 1, 1}, {0}, {0}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 1, 1},
		{2, 2, 13, 9, 1, {1, 5, 9}, {1, 1, 1}, {1, 1, 1}, {0}, {0}, {1, 1, 1},
		 CPU_INT8, CPU_INT8, 0, 1},
		/* shapes AMX takes where the CPU has it (16 rows and 16 groups of
		 * 4 k at least): 40 rows as a full and a ragged tile, 96
		 * channels read in place as 16 + 8 groups a tap; a 1x1 of 80
		 * channels (16 + 4 groups) into 33 rows */
		{2, 1, 96, 40, 1, {1, 11, 37}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1},
		 CPU_UINT8, CPU_UINT8, 1, 1},
		{2, 2, 80, 33, 1, {1, 12, 13}, {1, 1, 1}, {1, 1, 1}, {0}, {0}, {1, 1, 1},
		 CPU_INT8, CPU_UINT8, 0, 1},
	};
	cpu_pool *pool = NULL;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		check_qconv(&cs[i], pool, 0, 0);
		check_qconv(&cs[i], NULL, 1, 0);
		check_qconv(&cs[i], pool, 1, 1);
		/* the output planned over the residual (the bug regnet showed:
		 * the GEMM overwrote the addend before the tail added it) */
		check_qconv(&cs[i], pool, 1, 2);
	}
	cpu_pool_destroy(pool);
}

static void test_convinteger_fused_random(void **state)
{
	cpu_pool *pool = NULL;
	qcase c;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int n = 0; n < 60; n++) {
		random_qcase(&c);
		c.w_per_channel = 0;
		check_qconv(&c, n & 1 ? pool : NULL, 1, (int)(rnd() % 3));
	}
	cpu_pool_destroy(pool);
}

/* ---- MatMulInteger ---- */

/* A [ab..., M, K] (ra dims) x B [bb..., K, N]; 1-D when M or N is 0. */
static void check_qmm(int ra, const int64_t *ad, int rb, const int64_t *bd, int32_t adt,
		      int32_t bdt, int za_rows, int zb_cols, int b_const, int fused, cpu_pool *pool)
{
	int64_t M = ra > 1 ? ad[ra - 2] : 1, K = ad[ra - 1], N = rb > 1 ? bd[rb - 1] : 1;
	int64_t na = 1, nb = 1, batch, zad[1] = {M}, zbd[1] = {N}, bsh[1] = {N};
	int ranks[2] = {ra > 2 ? ra - 2 : 0, rb > 2 ? rb - 2 : 0};
	const int64_t *dims[2] = {ad, bd};
	cpu_bcast bc;
	void *a, *b;
	uint8_t zab[64], zbb[256];
	int32_t za[64], zb[256];
	float s0 = 0.0137f, s1 = (float)(rnd() % 100 + 1) * 1e-3f, bias[256];
	cpu_tensor ta, tb, tza, tzb, ts0, ts1, tbias, out;
	const cpu_tensor *in[7], *consts[7] = {0};
	cpu_fusion fu = {-1, -1, CPU_FUSE_ACT_NONE, 0, 0, -1, 0, 0, 0, {0, 0}, 1, 4, 5};
	tnode t;

	/* fused 2: a Clip follows, clamped in the int8 epilogue */
	if (fused == 2) {
		fu.act = CPU_FUSE_ACT_CLIP;
		fu.act_a = -0.25f;
		fu.act_b = 0.5f;
	}
	assert_true(M <= 64 && N <= 256);
	for (int i = 0; i < ra; i++)
		na *= ad[i];
	for (int i = 0; i < rb; i++)
		nb *= bd[i];
	a = malloc((size_t)na + 1);
	b = malloc((size_t)nb + 1);
	fill8(a, na);
	fill8(b, nb);
	for (int64_t i = 0; i < M; i++) {
		za[i] = za_rows || i == 0 ? zp8(adt) : za[0];
		put8(adt, zab, i, za[i]);
	}
	for (int64_t j = 0; j < N; j++) {
		zb[j] = zb_cols || j == 0 ? zp8(bdt) : zb[0];
		put8(bdt, zbb, j, zb[j]);
		bias[j] = (float)((int32_t)(rnd() % 2001) - 1000) * 0.02f;
	}
	ta = tens(adt, ra, ad, a);
	tb = tens(bdt, rb, bd, b);
	tza = tens(adt, za_rows ? 1 : 0, zad, zab);
	tzb = tens(bdt, zb_cols ? 1 : 0, zbd, zbb);
	ts0 = tens(CPU_FLOAT, 0, NULL, &s0);
	ts1 = tens(CPU_FLOAT, 0, NULL, &s1);
	tbias = tens(CPU_FLOAT, 1, bsh, bias);
	in[0] = &ta;
	in[1] = &tb;
	in[2] = &tza;
	in[3] = &tzb;
	in[4] = &ts0;
	in[5] = &ts1;
	in[6] = &tbias;
	if (b_const)
		consts[1] = &tb;
	consts[6] = &tbias;
	if (fused && rb == 2)
		fu.bias_input = 6;
	tn(&t, "MatMulInteger", fused ? 7 : 4, 1);
	out = run_node(&t, fused ? &fu : NULL, consts, fused ? 7 : 4, in, pool, NULL);
	assert_int_equal(cpu_bcast_init(&bc, 2, ranks, dims), 0);
	batch = cpu_numel(&out) / (M * N);
	for (int64_t e = 0; e < batch * M * N; e++) {
		int64_t bi = e / (M * N), i = e / N % M, j = e % N, ia = 0, ib = 0, r = bi;
		uint32_t s = 0;
		/* the batch entry's offsets in A and B (broadcast strides) */
		for (int d = bc.out_rank - 1; d >= 0; d--) {
			int64_t dimv = bc.out_dims[d], idx = r % dimv;
			int64_t da = d - (bc.out_rank - ranks[0]), db = d - (bc.out_rank - ranks[1]);
			int64_t sa = 1, sb = 1;
			r /= dimv;
			/* A dim the operand lacks (da or db < 0) has no stride. */
			for (int q = da + 1; da >= 0 && q < ranks[0]; q++)
				sa *= ad[q];
			for (int q = db + 1; db >= 0 && q < ranks[1]; q++)
				sb *= bd[q];
			if (da >= 0 && ad[da] > 1)
				ia += idx * sa;
			if (db >= 0 && bd[db] > 1)
				ib += idx * sb;
		}
		for (int64_t k = 0; k < K; k++)
			s += (uint32_t)(val8(adt, a, (ia * M + i) * K + k) - za[i]) *
			     (uint32_t)(val8(bdt, b, (ib * K + k) * N + j) - zb[j]);
		if (fused) {
			float f = (float)(int32_t)s, g = ((float *)out.data)[e];
			f = f * (s0 * s1);
			if (fu.bias_input >= 0)
				f = f + bias[j];
			if (fused == 2)
				f = f < fu.act_a ? fu.act_a : f > fu.act_b ? fu.act_b : f;
			if (memcmp(&f, &g, 4))
				fail_msg("fused matmul M%lld N%lld K%lld [%lld]: %.9g, want %.9g",
					 (long long)M, (long long)N, (long long)K, (long long)e, g, f);
		} else if (((int32_t *)out.data)[e] != (int32_t)s) {
			fail_msg("matmul M%lld N%lld K%lld a%d b%d zr%d zc%d bc%d [%lld]: %d, want %d",
				 (long long)M, (long long)N, (long long)K, adt, bdt, za_rows, zb_cols,
				 b_const, (long long)e, ((int32_t *)out.data)[e], (int32_t)s);
		}
	}
	free(out.data);
	free(a);
	free(b);
}

static void test_matmulinteger_random(void **state)
{
	cpu_pool *pool = NULL;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int n = 0; n < 200; n++) {
		int64_t M = 1 + rnd() % 40, K = 1 + rnd() % 70, N = 1 + rnd() % 130;
		int64_t ad[4], bd[4];
		int ra = 1 + rnd() % 4, rb = rnd() % 3 == 0 ? 2 : 1 + rnd() % 4;
		for (int i = 0; i < ra - 2; i++)
			ad[i] = 1 + rnd() % 3;
		for (int i = 0; i < rb - 2; i++)
			bd[i] = i == rb - 3 && ra > 2 && rnd() % 2 ? ad[ra - 3] : rnd() % 3 ? 1 : 2;
		if (ra >= 2)
			ad[ra - 2] = M;
		ad[ra - 1] = K;
		if (rb >= 2) {
			bd[rb - 2] = K;
			bd[rb - 1] = N;
		} else {
			bd[0] = K;
		}
		/* keep the batch dims broadcastable: equal or 1 */
		for (int i = 0; i < ra - 2 && i < rb - 2; i++) {
			int64_t *x = &ad[ra - 3 - i], *y = &bd[rb - 3 - i];
			if (*x != *y && *x != 1 && *y != 1)
				*y = 1;
		}
		check_qmm(ra, ad, rb, bd, rnd() & 1 ? CPU_INT8 : CPU_UINT8,
			  rnd() & 1 ? CPU_INT8 : CPU_UINT8, ra >= 2 && rnd() % 4 == 0,
			  rb >= 2 && rnd() % 4 == 0, rb == 2 && rnd() % 2, 0, n & 1 ? pool : NULL);
	}
	cpu_pool_destroy(pool);
}

static void test_matmulinteger_fused(void **state)
{
	static const int64_t a1[3] = {2, 64, 256}, b1[2] = {256, 192}, a2[2] = {1, 100},
			     b2[2] = {100, 33}, a3[4] = {1, 4, 16, 32}, b3[4] = {1, 4, 32, 16};
	cpu_pool *pool = NULL;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	check_qmm(3, a1, 2, b1, CPU_UINT8, CPU_INT8, 0, 0, 1, 1, pool);
	check_qmm(3, a1, 2, b1, CPU_UINT8, CPU_INT8, 0, 0, 1, 1, NULL);
	check_qmm(2, a2, 2, b2, CPU_UINT8, CPU_INT8, 0, 0, 1, 1, pool);
	check_qmm(2, a2, 2, b2, CPU_UINT8, CPU_INT8, 0, 0, 1, 2, pool);
	check_qmm(4, a3, 4, b3, CPU_UINT8, CPU_UINT8, 0, 0, 0, 1, pool);
	check_qmm(3, a1, 2, b1, CPU_INT8, CPU_UINT8, 0, 1, 0, 0, pool);
	cpu_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_convinteger_random),
		cmocka_unit_test(test_convinteger_shapes),
		cmocka_unit_test(test_convinteger_fused_random),
		cmocka_unit_test(test_matmulinteger_random),
		cmocka_unit_test(test_matmulinteger_fused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
