/*
 * Unit tests for the CPU kernels' fast paths (issue #7): separable 2-D
 * pooling, the vectorized exp/erf/tanh/sigmoid of vmath.h, Softmax,
 * LayerNormalization, the broadcasting fast paths of the binary ops and
 * the blocked Transpose.  Each fast path is checked against a reference
 * written plainly here (or double-precision libm for the math functions)
 * on random shapes including odd sizes, pads, ceil_mode and dilations, and
 * where the general kernel still exists (MaxPool with Indices) fast and
 * general paths must agree bit for bit.
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
#include "cpu_ops.h"
#include "fuse_tail.h"
#include "vmath.h"
#include "threadpool.h"

/* ---- tensors, random data, running ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static int64_t rnd_in(int64_t lo, int64_t hi)   /* [lo, hi] */
{
	return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1));
}

static float rnd_f(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f;
}

/* A float32 tensor of random values in [lo, hi); data malloc'ed. */
static cpu_tensor rtens(int rank, const int64_t *dims, float lo, float hi)
{
	cpu_tensor t;
	int64_t n;
	memset(&t, 0, sizeof(t));
	t.dtype = CPU_FLOAT;
	t.rank = rank;
	memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
	n = cpu_numel(&t);
	t.nbytes = (size_t)n * sizeof(float);
	t.data = malloc(t.nbytes + 4);
	assert_non_null(t.data);
	for (int64_t i = 0; i < n; i++)
		((float *)t.data)[i] = rnd_f(lo, hi);
	return t;
}

/* A 2-member intra-op pool; run_alt uses it every other call, so each
 * kernel is checked on one thread and split over two. */
static cpu_pool *test_pool;
static unsigned run_count;

/* run_ok on one thread and on test_pool by turns. */
static void run_alt(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
		    cpu_tensor *out)
{
	cpu_pool *pool = run_count++ % 2 ? test_pool : NULL;
	char err[ERRLEN];
	int rc = run_pool(t, opset, n_in, in, n_out, out, pool, pool ? 2 : 1, err);

	if (rc)
		fail_msg("%s: status %d: %s", t->p.op_type, rc, err);
}

static int same_float(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0 || (isnan(a) && isnan(b));
}

/* ---- pooling ---- */

typedef struct pool_case {
	int nsp, is_max, include_pad, ceil, auto_pad;   /* auto_pad: 0 NOTSET, 1 UPPER, 2 LOWER */
	int64_t n, c, in[2], k[2], s[2], d[2], pb[2], pe[2], out[2];
} pool_case;

/* The ONNX output size (and SAME pads) of spatial dim i, computed here
 * independently of window.c. */
static void ref_geom(pool_case *pc, int i)
{
	int64_t eff = (pc->k[i] - 1) * pc->d[i] + 1, total;
	if (pc->auto_pad) {
		pc->out[i] = (pc->in[i] + pc->s[i] - 1) / pc->s[i];
		total = (pc->out[i] - 1) * pc->s[i] + eff - pc->in[i];
		total = total < 0 ? 0 : total;
		pc->pb[i] = pc->auto_pad == 1 ? total / 2 : total - total / 2;
		pc->pe[i] = total - pc->pb[i];
		return;
	}
	total = pc->in[i] + pc->pb[i] + pc->pe[i] - eff;
	if (pc->ceil) {
		pc->out[i] = (total + pc->s[i] - 1) / pc->s[i] + 1;
		if ((pc->out[i] - 1) * pc->s[i] >= pc->in[i] + pc->pb[i])
			pc->out[i]--;
	} else {
		pc->out[i] = total / pc->s[i] + 1;
	}
}

/* Plain ONNX pooling of one output element at (oh, ow) of plane x. */
static float ref_pool_at(const pool_case *pc, const float *x, int64_t oh, int64_t ow)
{
	int64_t H = pc->nsp == 2 ? pc->in[0] : 1, W = pc->in[pc->nsp - 1];
	int64_t cnt = 0, pad_cnt = 0, seen = 0;
	int64_t kh = pc->nsp == 2 ? pc->k[0] : 1, kw = pc->k[pc->nsp - 1];
	double sum = 0.0;
	float best = 0.0f;
	for (int64_t a = 0; a < kh; a++)
		for (int64_t b = 0; b < kw; b++) {
			int64_t ih = 0, iw, r = pc->nsp - 1;
			if (pc->nsp == 2)
				ih = oh * pc->s[0] - pc->pb[0] + a * pc->d[0];
			iw = ow * pc->s[r] - pc->pb[r] + b * pc->d[r];
			if ((pc->nsp == 1 || (ih >= -pc->pb[0] && ih < H + pc->pe[0])) &&
			    iw >= -pc->pb[r] && iw < W + pc->pe[r])
				pad_cnt++;
			if (ih < 0 || ih >= H || iw < 0 || iw >= W)
				continue;
			float v = x[ih * W + iw];
			sum += v;
			cnt++;
			if (!seen++ || isnan(v) || v > best)
				best = isnan(best) ? best : v;   /* any NaN tap wins */
		}
	if (pc->is_max)
		return best;
	return (float)(sum / (double)(pc->include_pad ? pad_cnt : cnt));
}

static void set_pool_attrs(tnode *t, const pool_case *pc)
{
	int64_t pads[4];
	tn_ints(t, "kernel_shape", pc->k, (size_t)pc->nsp);
	tn_ints(t, "strides", pc->s, (size_t)pc->nsp);
	if (pc->is_max || pc->d[0] != 1 || pc->d[pc->nsp - 1] != 1)
		tn_ints(t, "dilations", pc->d, (size_t)pc->nsp);
	if (pc->auto_pad) {
		tn_str(t, "auto_pad", pc->auto_pad == 1 ? "SAME_UPPER" : "SAME_LOWER");
	} else {
		for (int i = 0; i < pc->nsp; i++) {
			pads[i] = pc->pb[i];
			pads[pc->nsp + i] = pc->pe[i];
		}
		tn_ints(t, "pads", pads, (size_t)(2 * pc->nsp));
		tn_int(t, "ceil_mode", pc->ceil);
	}
	if (!pc->is_max)
		tn_int(t, "count_include_pad", pc->include_pad);
}

/* One random 1-D or 2-D case whose every window has an input tap. */
static void random_pool_case(pool_case *pc, int is_max)
{
	memset(pc, 0, sizeof(*pc));
	pc->nsp = rnd_in(0, 5) ? 2 : 1;
	pc->is_max = is_max;
	pc->include_pad = (int)rnd_in(0, 1);
	pc->n = rnd_in(1, 2);
	/* 8 or 16 channels two times in five: small 2-D planes of a multiple
	 * of eight channels are pooled blocked (pool.c's small_planes_blocked) */
	pc->c = rnd_in(1, 5);
	pc->c = pc->c <= 3 ? pc->c : 8 * (pc->c - 3);
	pc->auto_pad = rnd_in(0, 4) == 0 ? (int)rnd_in(1, 2) : 0;
	pc->ceil = pc->auto_pad ? 0 : (int)rnd_in(0, 1);
	for (int i = 0; i < pc->nsp; i++) {
		int64_t eff;
		pc->k[i] = rnd_in(1, 4);
		pc->s[i] = rnd_in(1, 3);
		pc->d[i] = rnd_in(0, 3) == 0 ? 2 : 1;   /* AveragePool takes them from opset 19 */
		eff = (pc->k[i] - 1) * pc->d[i] + 1;
		pc->in[i] = rnd_in(eff, eff + 40);
		/* pads up to the window's reach keep a tap of every window inside */
		pc->pb[i] = rnd_in(0, eff - 1);
		pc->pe[i] = rnd_in(0, eff - 1);
		ref_geom(pc, i);
	}
}

static void check_pool_case(const pool_case *pc)
{
	int64_t xd[4] = {pc->n, pc->c, pc->in[0], pc->in[1]}, planes = pc->n * pc->c;
	int64_t H = pc->nsp == 2 ? pc->in[0] : 1, W = pc->in[pc->nsp - 1];
	int64_t OH = pc->nsp == 2 ? pc->out[0] : 1, OW = pc->out[pc->nsp - 1];
	cpu_tensor x = rtens(2 + pc->nsp, xd, -4.0f, 4.0f), y[2], yi[2];
	const cpu_tensor *in[1] = {&x};
	tnode t;

	tn(&t, pc->is_max ? "MaxPool" : "AveragePool", 1, 1);
	set_pool_attrs(&t, pc);
	run_alt(&t, 19, 1, in, 1, y);
	assert_int_equal(y[0].rank, 2 + pc->nsp);
	assert_int_equal(y[0].dims[2], pc->out[0]);
	if (pc->nsp == 2)
		assert_int_equal(y[0].dims[3], pc->out[1]);
	for (int64_t p = 0; p < planes; p++)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				float want = ref_pool_at(pc, (float *)x.data + p * H * W, oh, ow);
				float got = ((float *)y[0].data)[(p * OH + oh) * OW + ow];
				if (!(fabsf(got - want) <= 2e-6f * (1.0f + fabsf(want))) ||
				    (pc->is_max && got != want))
					fail_msg("%s %dD in %lldx%lld k %lldx%lld s %lldx%lld d %lldx%lld "
						 "pads %lld,%lld,%lld,%lld ceil %d auto %d incl %d: "
						 "[%lld,%lld,%lld] got %g want %g",
						 t.p.op_type, pc->nsp, (long long)H, (long long)W,
						 (long long)pc->k[0], (long long)pc->k[1],
						 (long long)pc->s[0], (long long)pc->s[1],
						 (long long)pc->d[0], (long long)pc->d[1],
						 (long long)pc->pb[0], (long long)pc->pb[1],
						 (long long)pc->pe[0], (long long)pc->pe[1], pc->ceil,
						 pc->auto_pad, pc->include_pad, (long long)p,
						 (long long)oh, (long long)ow, got, want);
			}
	if (pc->is_max) {
		/* with Indices the general kernel runs: the same bits */
		tn(&t, "MaxPool", 1, 2);
		set_pool_attrs(&t, pc);
		run_alt(&t, 19, 1, in, 2, yi);
		for (int64_t i = 0; i < planes * OH * OW; i++)
			assert_true(same_float(((float *)y[0].data)[i], ((float *)yi[0].data)[i]));
		free_outs(yi, 2);
	}
	free_outs(y, 1);
	free(x.data);
}

static void test_pool_random(void **state)
{
	pool_case pc;
	(void)state;
	for (int i = 0; i < 400; i++) {
		random_pool_case(&pc, i % 2);
		check_pool_case(&pc);
	}
}

/* ResNet's stem pool and the common 2x2/2 and 3x3/1 shapes, larger planes. */
static void test_pool_common(void **state)
{
	static const int64_t shapes[][5] = {   /* H W k s pad */
		{112, 112, 3, 2, 1}, {57, 31, 3, 2, 1}, {64, 48, 2, 2, 0}, {33, 65, 2, 2, 0},
		{56, 56, 3, 1, 1}, {17, 19, 3, 1, 0}, {30, 30, 5, 1, 2}, {29, 37, 3, 2, 0},
		/* 2x2 at stride 2 without pads (pool.c's pool_s2): vectors and a
		 * scalar tail; 3x3 without pads: the separable path's interior */
		{32, 32, 2, 2, 0}, {20, 70, 2, 2, 0}, {35, 111, 3, 2, 0}, {23, 34, 3, 2, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int m = 0; m < 4; m++) {
			pool_case pc;
			memset(&pc, 0, sizeof(pc));
			pc.nsp = 2;
			pc.is_max = m < 2;
			pc.include_pad = m == 3;
			pc.ceil = m == 1;
			pc.n = 1;
			pc.c = i == 0 ? 48 : 3;   /* enough work to be split over the pool */
			for (int d = 0; d < 2; d++) {
				pc.in[d] = shapes[i][d];
				pc.k[d] = shapes[i][2];
				pc.s[d] = shapes[i][3];
				pc.d[d] = 1;
				pc.pb[d] = pc.pe[d] = shapes[i][4];
				ref_geom(&pc, d);
			}
			check_pool_case(&pc);
		}
}

/* A NaN anywhere in a MaxPool window makes the output NaN, on every path:
 * pool_rows' (AVX-512: sixteen a vector, the last through a mask; AVX2:
 * rows of at most 8 and more, column stride 1 and 2,
 * a last vector overlapping the one before), else the separable one,
 * pool_s2's vectors and tail, with Indices. */
static void test_pool_nan(void **state)
{
	static const int64_t shapes[][4] = {{9, 3, 2, 1}, {34, 2, 2, 0}, {37, 2, 2, 0},
					    {37, 3, 2, 0}, {14, 3, 1, 1}, {7, 3, 1, 1},
					    {31, 3, 1, 1}};   /* H=W k s pad */
	(void)state;
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int64_t n = shapes[c][0], xd[4] = {1, 1, n, n};
		pool_case pc;
		cpu_tensor x, y[1], yi[2];
		const cpu_tensor *in[1] = {&x};
		float *xv;
		tnode t;

		memset(&pc, 0, sizeof(pc));
		pc.nsp = 2;
		pc.is_max = 1;
		for (int d = 0; d < 2; d++) {
			pc.in[d] = n;
			pc.k[d] = shapes[c][1];
			pc.s[d] = shapes[c][2];
			pc.d[d] = 1;
			pc.pb[d] = pc.pe[d] = shapes[c][3];
			ref_geom(&pc, d);
		}
		x = rtens(4, xd, -1.0f, 1.0f);
		xv = x.data;
		xv[0] = NAN;                /* a window's first tap */
		xv[1 * n + 3] = NAN;        /* first tap of a row of windows */
		xv[5 * n + 5] = NAN;        /* the middle of windows */
		if (n > 8)
			xv[8 * n + 8] = -INFINITY;
		xv[3 * n + n - 1] = NAN;    /* a row's last column */
		if (n > 30) {
			xv[2 * n + 21] = NAN;   /* an odd column inside a vector */
			xv[7 * n + 30] = NAN;   /* an even one */
			xv[(n - 1) * n + n - 2] = NAN;   /* in the scalar tail */
		}
		tn(&t, "MaxPool", 1, 1);
		set_pool_attrs(&t, &pc);
		run_alt(&t, 12, 1, in, 1, y);
		tn(&t, "MaxPool", 1, 2);
		set_pool_attrs(&t, &pc);
		run_alt(&t, 12, 1, in, 2, yi);
		for (int64_t i = 0; i < pc.out[0] * pc.out[1]; i++) {
			float want = ref_pool_at(&pc, x.data, i / pc.out[1], i % pc.out[1]);
			assert_true(same_float(((float *)y[0].data)[i], want));
			assert_true(same_float(((float *)yi[0].data)[i], want));
		}
		free_outs(y, 1);
		free_outs(yi, 2);
		free(x.data);
	}
}

/* 3x3 windows at stride 1 with pads 1 on planes of up to 64 x 64 (pool.c's
 * flat_plane, AVX-512: the plane as one run of floats, vectors across row
 * ends): odd shapes, single rows and columns, and NaNs and infinities in
 * the first and last columns, whose neighbours across the row end must
 * not enter a window; every mode, several planes split over the pool. */
static void test_pool_flat(void **state)
{
	static const int64_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2}, {17, 17}, {17, 5},
					    {5, 17}, {35, 35}, {8, 8}, {64, 64}, {3, 40}};
	(void)state;
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++)
		for (int m = 0; m < 3; m++) {
			int64_t H = shapes[c][0], W = shapes[c][1], xd[4] = {2, 5, H, W};
			pool_case pc;
			cpu_tensor x, y[1];
			const cpu_tensor *in[1] = {&x};
			float *xv;
			tnode t;

			memset(&pc, 0, sizeof(pc));
			pc.nsp = 2;
			pc.is_max = m == 0;
			pc.include_pad = m == 2;
			pc.n = 2;
			pc.c = 5;
			pc.in[0] = H;
			pc.in[1] = W;
			for (int d = 0; d < 2; d++) {
				pc.k[d] = 3;
				pc.s[d] = pc.d[d] = 1;
				pc.pb[d] = pc.pe[d] = 1;
				ref_geom(&pc, d);
			}
			x = rtens(4, xd, -4.0f, 4.0f);
			xv = x.data;
			/* plane 1: a row's last and the next row's first column, the
			 * last pixel; plane 3 the same with -inf and +inf */
			for (int64_t r = 0; r + 1 < H; r += 2) {
				xv[H * W + r * W + W - 1] = NAN;
				xv[3 * H * W + r * W + W - 1] = INFINITY;
				xv[3 * H * W + (r + 1) * W] = -INFINITY;
			}
			xv[2 * H * W - 1] = NAN;
			tn(&t, pc.is_max ? "MaxPool" : "AveragePool", 1, 1);
			set_pool_attrs(&t, &pc);
			run_alt(&t, 19, 1, in, 1, y);
			for (int64_t p = 0; p < 10; p++)
				for (int64_t i = 0; i < H * W; i++) {
					float want = ref_pool_at(&pc, xv + p * H * W, i / W, i % W);
					float got = ((float *)y[0].data)[p * H * W + i];

					if ((isnan(want) || isinf(want) || pc.is_max) ?
					    !same_float(got, want) :
					    !(fabsf(got - want) <= 2e-6f * (1.0f + fabsf(want))))
						fail_msg("%s %lldx%lld incl %d plane %lld pixel %lld: got %g want %g",
							 t.p.op_type, (long long)H, (long long)W, pc.include_pad,
							 (long long)p, (long long)i, got, want);
				}
			free_outs(y, 1);
			free(x.data);
		}
}

static void test_global_pool(void **state)
{
	static const int64_t shapes[][4] = {{1, 512, 7, 7}, {2, 3, 1, 1}, {1, 5, 13, 17}, {3, 2, 40, 41}};
	(void)state;
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++)
		for (int is_max = 0; is_max < 2; is_max++) {
			cpu_tensor x = rtens(4, shapes[c], -3.0f, 5.0f), y[1];
			const cpu_tensor *in[1] = {&x};
			if (shapes[c][2] * shapes[c][3] > 40)   /* one NaN in plane 0 */
				((float *)x.data)[37] = NAN;
			int64_t planes = shapes[c][0] * shapes[c][1], sz = shapes[c][2] * shapes[c][3];
			tnode t;
			tn(&t, is_max ? "GlobalMaxPool" : "GlobalAveragePool", 1, 1);
			run_alt(&t, 13, 1, in, 1, y);
			assert_int_equal(y[0].dims[2], 1);
			for (int64_t p = 0; p < planes; p++) {
				const float *xp = (const float *)x.data + p * sz;
				double s = 0.0;
				float m = xp[0];
				for (int64_t i = 0; i < sz; i++) {
					s += xp[i];
					m = xp[i] > m || isnan(xp[i]) ? xp[i] : m;
				}
				if (is_max)
					assert_true(same_float(((float *)y[0].data)[p], m));
				else if (isnan(s))
					assert_true(isnan(((float *)y[0].data)[p]));
				else
					assert_true(fabs(((float *)y[0].data)[p] - s / (double)sz) <= 1e-6);
			}
			free_outs(y, 1);
			free(x.data);
		}
}

/* ---- vmath and the unary ops ---- */

static double rel_err(double got, double want)
{
	if (isnan(want))
		return isnan(got) ? 0.0 : INFINITY;
	if (isinf(want))
		return got == want ? 0.0 : INFINITY;
	if (fabs(want) < 1.2e-38)   /* denormal results carry fewer bits */
		return fabs(got - want) <= 1.5e-45 + 1e-7 * fabs(want) ? 0.0 : INFINITY;
	return fabs(got - want) / fabs(want);
}

/* The scalar functions over ~1M float32 spread evenly in bit pattern. */
static void test_vmath_accuracy(void **state)
{
	double worst[7] = {0};
	static const double bound[7] = {2e-7, 5e-7, 4e-7, 3e-7, 4e-7, 3e-7, 5e-7};
	(void)state;
	for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
		uint32_t bits = (uint32_t)b;
		float x;
		memcpy(&x, &bits, sizeof(x));
		float a = -fabsf(x) * 4.3f;   /* exp down to -86: below 2^-126 it flushes to 0 */
		if (!(fabsf(x) <= 20.0f))
			continue;
		vf8 v = {x, -x, x, x, x, x, x, x};
		vf8 tv = vf_tanh(v), sv = vf_sigmoid(v), ev = vf_erf(v);
		double e[7] = {rel_err(vm_exp_nonpos(a), exp((double)a)),
			       rel_err(vm_erf(x), erf(x)), rel_err(vm_tanh(x), tanh(x)),
			       rel_err(vm_sigmoid(x), 1.0 / (1.0 + exp(-(double)x))),
			       fmax(rel_err(tv[0], tanh(x)), rel_err(tv[1], -tanh(x))),
			       fmax(rel_err(sv[0], 1.0 / (1.0 + exp(-(double)x))),
				    rel_err(sv[1], 1.0 / (1.0 + exp((double)x)))),
			       fmax(rel_err(ev[0], erf(x)), rel_err(ev[1], -erf(x)))};
		for (int k = 0; k < 7; k++)
			if (e[k] > worst[k])
				worst[k] = e[k];
	}
	for (int k = 0; k < 7; k++)
		if (worst[k] > bound[k])
			fail_msg("function %d: worst relative error %g", k, worst[k]);
	/* special values */
	assert_true(isnan(vm_exp_nonpos(NAN)) && isnan(vm_erf(NAN)) && isnan(vm_tanh(NAN)) &&
		    isnan(vm_sigmoid(NAN)));
	assert_true(vm_exp_nonpos(-INFINITY) == 0.0f && vm_exp_nonpos(-87.9f) == 0.0f);
	assert_true(vm_exp_nonpos(0.0f) == 1.0f && vm_exp_nonpos(-0.0f) == 1.0f);
	assert_true(vm_erf(INFINITY) == 1.0f && vm_erf(-INFINITY) == -1.0f && vm_erf(4.5f) == 1.0f);
	assert_true(vm_tanh(INFINITY) == 1.0f && vm_tanh(-1e30f) == -1.0f);
	assert_true(vm_sigmoid(INFINITY) == 1.0f && vm_sigmoid(-INFINITY) == 0.0f);
	assert_true(vm_erf(-0.0f) == 0.0f && vm_tanh(1e-30f) == 1e-30f);
	{   /* the 8-lane forms (the RNN gates') */
		vf8 v = {NAN, INFINITY, -INFINITY, 0.0f, -1e30f, 1e-30f, 30.0f, -30.0f};
		vf8 t = vf_tanh(v), g = vf_sigmoid(v), e = vf_erf(v);
		assert_true(isnan(t[0]) && isnan(g[0]) && isnan(e[0]));
		assert_true(e[1] == 1.0f && e[2] == -1.0f && e[3] == 0.0f && e[6] == 1.0f);
		assert_true(t[1] == 1.0f && t[2] == -1.0f && t[3] == 0.0f && t[4] == -1.0f &&
			    t[5] == 1e-30f);
		assert_true(g[1] == 1.0f && g[2] == 0.0f && g[3] == 0.5f && g[6] == 1.0f &&
			    g[7] < 1e-13f && g[7] >= 0.0f);
	}
}

/* vm_logistic (ONNX Runtime's Sigmoid): absolute error within 1.6e-7 of
 * the double formula over the same points, never negative, NaN kept, and
 * the clamp at +-18 (onnxruntime-node's bits themselves are compared by
 * tests/integration/ort_bits_test.py). */
static void test_vm_logistic(void **state)
{
	double worst = 0.0;
	(void)state;
	for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
		uint32_t bits = (uint32_t)b;
		float x, got;
		memcpy(&x, &bits, sizeof(x));
		if (!(fabsf(x) <= 40.0f))
			continue;
		got = vm_logistic(x);
		if (got < 0.0f)
			fail_msg("vm_logistic(%.9g) = %.9g < 0", x, got);
		if (fabs(got - 1.0 / (1.0 + exp(-(double)x))) > worst)
			worst = fabs(got - 1.0 / (1.0 + exp(-(double)x)));
	}
	if (worst > 1.6e-7)
		fail_msg("vm_logistic: worst absolute error %g", worst);
	assert_true(isnan(vm_logistic(NAN)));
	assert_true(vm_logistic(-INFINITY) == vm_logistic(-18.0f) && vm_logistic(-30.0f) == 0.0f);
	assert_true(vm_logistic(INFINITY) == vm_logistic(18.0f) && fabsf(vm_logistic(30.0f) - 1.0f) < 2e-7f);
	assert_true(vm_logistic(0.0f) == 0.5f);
}

/* Every 4099th float bit pattern within [lo, hi] (the infinities pass
 * only as bounds), then NaN, +-inf and -0: at most cap values, their count
 * (not a multiple of 8 or 16, so the wide kernels' tails run). */
static int64_t spread_floats(float *x, int64_t cap, float lo, float hi)
{
	int64_t n = 0;

	for (uint64_t b = 0; b <= 0xffffffffu && n < cap - 4; b += 4099) {
		uint32_t bits = (uint32_t)b;
		float v;
		memcpy(&v, &bits, sizeof(float));
		if (v >= lo && v <= hi)
			x[n++] = v;
	}
	x[n++] = NAN;
	x[n++] = INFINITY;
	x[n++] = -INFINITY;
	x[n++] = -0.0f;
	return n;
}

/* cpu_exp_wide (the AVX2 + FMA kernel, on a CPU without AVX-512) gives
 * vm_exp_mlas's bits (ONNX Runtime's) on every 4099th float of [-120, 100]
 * and the specials, with a partial vector at the end. */
static void test_exp_wide(void **state)
{
	enum { N = 1048583 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	int64_t n;
	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	n = spread_floats(x, N, -120.0f, 100.0f);
	if (!cpu_exp_wide(x, y, n)) {
		print_message("AVX-512, or no AVX2 + FMA: nothing to compare\n");
	} else {
		for (int64_t i = 0; i < n; i++) {
			float want = vm_exp_mlas(x[i]);
			if (memcmp(&want, &y[i], sizeof(float)) && !(isnan(want) && isnan(y[i])))
				fail_msg("exp wide of %.9g: %.9g, scalar %.9g", x[i], y[i], want);
		}
	}
	free(x);
	free(y);
}

/* cpu_logistic_wide (the AVX-512 or the AVX2 + FMA kernel, whichever this
 * CPU runs) gives vm_logistic's bits, and x times them for SiLU, on every
 * 4099th float and the specials, with a partial vector at the end. */
static void test_logistic_wide(void **state)
{
	enum { N = 1048583 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	int64_t n;
	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	n = spread_floats(x, N, -INFINITY, INFINITY);
	for (int silu = 0; silu < 2; silu++) {
		if (!cpu_logistic_wide(x, y, n, silu)) {
			print_message("no AVX-512 or AVX2 + FMA: nothing to compare\n");
			break;
		}
		for (int64_t i = 0; i < n; i++) {
			float want = silu ? x[i] * vm_logistic(x[i]) : vm_logistic(x[i]);
			if (memcmp(&want, &y[i], sizeof(float)) && !(isnan(want) && isnan(y[i])))
				fail_msg("logistic wide (silu %d) of %.9g: %.9g, scalar %.9g", silu,
					 x[i], y[i], want);
		}
	}
	free(x);
	free(y);
}

/* A float tensor of n random values in [lo, hi) with the special values
 * the kernels must get right sprinkled in. */
static cpu_tensor special_tens(int64_t n, float lo, float hi)
{
	static const float sp[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f,
				   88.7f, 88.8f, -87.5f, -103.0f, -110.0f, 3.5f, -9.5f, 1e30f};
	cpu_tensor t = rtens(1, &n, lo, hi);
	for (int64_t i = 0; i < n; i += 97)
		((float *)t.data)[i] = sp[(i / 97) % (int64_t)(sizeof(sp) / sizeof(sp[0]))];
	return t;
}

typedef struct un_case {
	const char *op;
	double tol;
	double (*ref)(double x);
} un_case;

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double ref_relu(double x) { return isnan(x) ? x : x < 0.0 ? 0.0 : x; }
static double ref_leaky(double x) { return x < 0.0 ? 0.01 * x : x; }
static double ref_neg(double x) { return -x; }
static double ref_recip(double x) { return 1.0 / x; }

static void test_unary_ops(void **state)
{
	static const un_case cases[] = {
		{"Exp", 2e-7, exp}, {"Erf", 5e-7, erf}, {"Tanh", 4e-7, tanh},
		{"Sigmoid", 3e-7, ref_sigmoid}, {"Gelu", 6e-7, ref_gelu}, {"Relu", 0, ref_relu},
		{"LeakyRelu", 1e-7, ref_leaky}, {"Neg", 0, ref_neg}, {"Abs", 0, fabs},
		{"Reciprocal", 1e-7, ref_recip},
	};
	static const int64_t sizes[] = {1, 7, 8, 9, 1000, 200003};
	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			cpu_tensor x = special_tens(sizes[z], -12.0f, 12.0f), y[1];
			const cpu_tensor *in[1] = {&x};
			tnode t;
			tn(&t, cases[c].op, 1, 1);
			run_alt(&t, 20, 1, in, 1, y);
			for (int64_t i = 0; i < sizes[z]; i++) {
				float xv = ((float *)x.data)[i], got = ((float *)y[0].data)[i];
				double want = cases[c].ref(xv);
				/* Gelu's 1 + erf cancels for x << 0: absolute error there */
				if (!strcmp(cases[c].op, "Gelu") && fabs(got - want) <= 2e-7 * fabs(xv))
					continue;
				/* Sigmoid is ONNX Runtime's formula (vm_logistic), whose
				 * + 0.5 leaves an absolute error: 1.6e-7 at most */
				if (!strcmp(cases[c].op, "Sigmoid") && fabs(got - want) <= 1.6e-7)
					continue;
				if (rel_err(got, (float)want) > cases[c].tol &&
				    rel_err(got, want) > cases[c].tol)
					fail_msg("%s(%.9g) = %.9g, want %.9g", cases[c].op, xv, got, want);
			}
			free_outs(y, 1);
			free(x.data);
		}
}

/* ---- Softmax ---- */

static void ref_softmax(const float *x, double *y, int64_t outer, int64_t n, int64_t inner,
			int is_log)
{
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			const float *xl = x + o * n * inner + j;
			double *yl = y + o * n * inner + j, m = -INFINITY, s = 0.0;
			for (int64_t i = 0; i < n; i++)
				m = xl[i * inner] > m ? xl[i * inner] : m;
			for (int64_t i = 0; i < n; i++)
				s += exp(xl[i * inner] - m);
			for (int64_t i = 0; i < n; i++)
				yl[i * inner] = is_log ? xl[i * inner] - m - log(s)
						       : exp(xl[i * inner] - m) / s;
		}
}

static void check_softmax(int rank, const int64_t *dims, int axis, int64_t opset, int is_log,
			  float spread)
{
	int64_t outer = 1, n = 1, inner = 1, total;
	cpu_tensor x = rtens(rank, dims, -spread, spread), y[1];
	const cpu_tensor *in[1] = {&x};
	double *want;
	tnode t;
	int ax = axis < 0 ? axis + rank : axis;
	for (int d = 0; d < rank; d++) {
		if (d < ax)
			outer *= dims[d];
		else if (d == ax || opset < 13)
			n *= dims[d];
		else
			inner *= dims[d];
	}
	total = outer * n * inner;
	if (total > 5)   /* a masked position, as attention masks make */
		((float *)x.data)[total / 2] = -INFINITY;
	want = malloc(sizeof(double) * (size_t)total + 1);
	assert_non_null(want);
	ref_softmax(x.data, want, outer, n, inner, is_log);
	tn(&t, is_log ? "LogSoftmax" : "Softmax", 1, 1);
	tn_int(&t, "axis", axis);
	run_alt(&t, opset, 1, in, 1, y);
	for (int64_t i = 0; i < total; i++) {
		double got = ((float *)y[0].data)[i];
		/* the sum is ONNX Runtime's: float lanes (8 on AVX2), so its
		 * rounding grows with sqrt(n) */
		double grow = n > 512 ? sqrt((double)n / 512.0) : 1.0;
		double tol = is_log ? 2e-6 * grow * (1.0 + fabs(want[i]))
				    : 1e-6 * grow * want[i] + 1e-12;
		if (!(fabs(got - want[i]) <= tol) && !(isinf(want[i]) && got == want[i]) &&
		    !(isnan(want[i]) && isnan(got)))
			fail_msg("%s rank %d axis %d opset %lld: [%lld] got %.9g want %.9g",
				 t.p.op_type, rank, axis, (long long)opset, (long long)i, got, want[i]);
	}
	free(want);
	free_outs(y, 1);
	free(x.data);
}

static void test_softmax_random(void **state)
{
	(void)state;
	for (int c = 0; c < 120; c++) {
		int64_t dims[4];
		int rank = (int)rnd_in(1, 4), axis;
		for (int d = 0; d < rank; d++)
			dims[d] = rnd_in(1, c % 3 ? 9 : 40);
		axis = (int)rnd_in(-rank, rank - 1);
		check_softmax(rank, dims, axis, c % 4 ? 13 : 11, c % 2, c % 5 ? 8.0f : 60.0f);
	}
	{   /* BERT's scores, big enough for the pool; a long row; a wide inner */
		static const int64_t s1[4] = {1, 8, 128, 128}, s2[2] = {2, 5003}, s3[3] = {3, 17, 1031};
		check_softmax(4, s1, -1, 13, 0, 10.0f);
		check_softmax(4, s1, 3, 13, 1, 10.0f);
		check_softmax(2, s2, 1, 13, 0, 30.0f);
		check_softmax(3, s3, 1, 13, 0, 5.0f);
		check_softmax(3, s3, 1, 13, 1, 5.0f);
	}
}

/* ---- LayerNormalization ---- */

static void test_layernorm_random(void **state)
{
	(void)state;
	for (int c = 0; c < 60; c++) {
		int64_t dims[4], outer = 1, inner = 1, sdims[4];
		int rank = (int)rnd_in(1, 4), axis = (int)rnd_in(0, rank - 1), nb = c % 3 ? 3 : 2;
		float off = c % 4 ? 0.0f : 1000.0f;   /* a large mean keeps its precision */
		cpu_tensor x, sc, bi, y[3];
		const cpu_tensor *in[3] = {&x, &sc, &bi};
		tnode t;
		for (int d = 0; d < rank; d++) {
			dims[d] = rnd_in(1, c == 0 && d == rank - 1 ? 300 : 12);
			if (d < axis)
				outer *= dims[d];
			else
				inner *= dims[d];
		}
		if (c == 1) {   /* BERT's, big enough for the pool */
			rank = 3;
			axis = 2;
			dims[0] = 2;
			dims[1] = 128;
			dims[2] = 256;
			outer = 256;
			inner = 256;
		}
		x = rtens(rank, dims, off - 3.0f, off + 3.0f);
		sc = rtens(rank - axis, dims + axis, 0.5f, 1.5f);
		bi = rtens(rank - axis, dims + axis, -1.0f, 1.0f);
		tn(&t, "LayerNormalization", nb, 3);
		tn_int(&t, "axis", axis);
		tn_float(&t, "epsilon", 1e-5f);
		run_alt(&t, 17, nb, in, 3, y);
		for (int d = 0; d < rank; d++)
			sdims[d] = d < axis ? dims[d] : 1;
		assert_int_equal(y[1].rank, rank);
		for (int d = 0; d < rank; d++)
			assert_int_equal(y[1].dims[d], sdims[d]);
		for (int64_t o = 0; o < outer; o++) {
			const float *xr = (const float *)x.data + o * inner;
			double m = 0.0, v = 0.0, inv;
			for (int64_t i = 0; i < inner; i++)
				m += xr[i];
			m /= (double)inner;
			for (int64_t i = 0; i < inner; i++)
				v += (xr[i] - m) * (xr[i] - m);
			inv = 1.0 / sqrt(v / (double)inner + 1e-5);
			assert_true(fabs(((float *)y[1].data)[o] - m) <= 1e-6 * (1.0 + fabs(m)));
			assert_true(fabs(((float *)y[2].data)[o] - inv) <= 2e-3 * inv);
			for (int64_t i = 0; i < inner; i++) {
				double want = (xr[i] - m) * inv * ((float *)sc.data)[i] +
					      (nb == 3 ? ((float *)bi.data)[i] : 0.0);
				double got = ((float *)y[0].data)[o * inner + i];
				/* a mean of 1000 leaves x - mean 2^-14 of float precision */
				if (!(fabs(got - want) <= (off != 0.0f ? 2e-3 : 2e-5)))
					fail_msg("rank %d axis %d row %lld [%lld]: got %.8g want %.8g",
						 rank, axis, (long long)o, (long long)i, got, want);
			}
		}
		free_outs(y, 3);
		free(x.data);
		free(sc.data);
		free(bi.data);
	}
}

/* ---- binary ops with broadcasting ---- */

static double ref_bin(const char *op, double a, double b)
{
	switch (op[0]) {
	case 'A': return a + b;
	case 'S': return a - b;
	case 'M':
		if (op[1] == 'u')
			return a * b;
		if (isnan(a) || isnan(b))
			return NAN;
		return op[1] == 'a' ? (a > b ? a : b) : (a < b ? a : b);
	case 'D': return a / b;
	default: return pow(a, b);
	}
}

/* Random shapes that broadcast: each of A's and B's dims is the output's
 * or 1, ranks may differ; plus the same-shape, scalar and bias cases. */
static void test_binary_random(void **state)
{
	static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
	(void)state;
	for (int c = 0; c < 300; c++) {
		const char *op = ops[c % 7];
		int64_t od[4], ad[4], bd[4], total = 1, ast[4], bst[4], sa = 1, sb = 1;
		int rank = (int)rnd_in(1, 4), ar = rank, br = (int)rnd_in(0, rank), kind = c % 5;
		cpu_tensor a, b, y[1];
		const cpu_tensor *in[2] = {&a, &b};
		tnode t;
		for (int d = 0; d < rank; d++) {
			od[d] = rnd_in(1, c < 20 ? 70 : 9);
			total *= od[d];
		}
		for (int d = 0; d < br; d++)   /* B aligns with the last br dims */
			bd[d] = kind == 1 ? od[rank - br + d] : kind == 2 ? 1
				: rnd_in(0, 2) ? od[rank - br + d] : 1;
		if (kind == 3) {   /* bias: [N] over [..., N] */
			br = 1;
			bd[0] = od[rank - 1];
		}
		for (int d = 0; d < rank; d++) {   /* A has the output's dim where B has not */
			int bdim = d - (rank - br);
			int b_full = bdim >= 0 && bd[bdim] == od[d];
			ad[d] = b_full && kind == 4 && rnd_in(0, 1) ? 1 : od[d];
		}
		a = rtens(ar, ad, op[0] == 'P' ? 0.1f : -4.0f, 4.0f);
		b = rtens(br, bd, op[0] == 'P' ? -2.0f : -4.0f, 4.0f);
		if (cpu_numel(&a) > 3 && op[0] == 'M' && op[1] != 'u')
			((float *)a.data)[cpu_numel(&a) / 3] = NAN;
		for (int d = rank - 1; d >= 0; d--) {   /* broadcast strides of A and B */
			int bdim = d - (rank - br);
			ast[d] = ad[d] == 1 ? 0 : sa;
			sa *= ad[d];
			bst[d] = bdim < 0 || bd[bdim] == 1 ? 0 : sb;
			sb *= bdim < 0 ? 1 : bd[bdim];
		}
		tn(&t, op, 2, 1);
		run_alt(&t, 14, 2, in, 1, y);
		assert_int_equal(y[0].rank, rank);
		for (int64_t e = 0; e < total; e++) {
			int64_t r = e, ia = 0, ib = 0;
			for (int d = rank - 1; d >= 0; d--) {
				ia += (r % od[d]) * ast[d];
				ib += (r % od[d]) * bst[d];
				r /= od[d];
			}
			double want = ref_bin(op, ((float *)a.data)[ia], ((float *)b.data)[ib]);
			double got = ((float *)y[0].data)[e];
			if (!(fabs(got - want) <= 2e-7 * fabs(want)) && !(isnan(got) && isnan(want)))
				fail_msg("%s case %d [%lld]: got %.9g want %.9g", op, c, (long long)e, got,
					 want);
		}
		free_outs(y, 1);
		free(a.data);
		free(b.data);
	}
}

/* Max and Min with three inputs fold through the output. */
static void test_variadic_max(void **state)
{
	static const int64_t d0[2] = {3, 5}, d1[1] = {5}, d2[2] = {3, 1};
	cpu_tensor x0 = rtens(2, d0, -1, 1), x1 = rtens(1, d1, -1, 1), x2 = rtens(2, d2, -1, 1), y[1];
	const cpu_tensor *in[3] = {&x0, &x1, &x2};
	tnode t;
	(void)state;
	((float *)x1.data)[2] = NAN;
	tn(&t, "Max", 3, 1);
	run_alt(&t, 13, 3, in, 1, y);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 5; j++) {
			float a = ((float *)x0.data)[i * 5 + j], b = ((float *)x1.data)[j];
			float c = ((float *)x2.data)[i], m = a > b ? a : b;
			m = c > m ? c : m;
			if (j == 2)
				assert_true(isnan(((float *)y[0].data)[i * 5 + j]));
			else
				assert_true(((float *)y[0].data)[i * 5 + j] == m);
		}
	free_outs(y, 1);
	free(x0.data);
	free(x1.data);
	free(x2.data);
}

/* ---- Transpose ---- */

static void test_transpose_random(void **state)
{
	(void)state;
	for (int c = 0; c < 200; c++) {
		int64_t dims[5], perm[5], od[5], xs[5], total = 1;
		int rank = (int)rnd_in(1, 5);
		cpu_tensor x, y[1];
		const cpu_tensor *in[1] = {&x};
		tnode t;
		for (int d = 0; d < rank; d++) {
			dims[d] = rnd_in(1, c < 40 ? 40 : 7);
			perm[d] = d;
		}
		if (c == 2 || c == 3) {   /* NCHW <-> NHWC past cpu_copy_strided_par's
					   * 65536 elements: split over the pool */
			static const int64_t img[4] = {1, 40, 48, 40};
			rank = 4;
			memcpy(dims, img, sizeof(img));
			perm[0] = 0;
			perm[1] = c == 2 ? 2 : 3;
			perm[2] = c == 2 ? 3 : 1;
			perm[3] = c == 2 ? 1 : 2;
		} else if (c == 0 || c == 1) {   /* BERT's heads: [1, 128, 4, 64] */
			static const int64_t bert[4] = {1, 128, 4, 64};
			rank = 4;
			memcpy(dims, bert, sizeof(bert));
			perm[0] = 0;
			perm[1] = 2;
			perm[2] = c ? 3 : 1;
			perm[3] = c ? 1 : 3;
		} else {
			for (int d = rank - 1; d > 0; d--) {   /* Fisher-Yates */
				int k = (int)rnd_in(0, d);
				int64_t tmp = perm[d];
				perm[d] = perm[k];
				perm[k] = tmp;
			}
		}
		xs[rank - 1] = 1;
		for (int d = rank - 2; d >= 0; d--)
			xs[d] = xs[d + 1] * dims[d + 1];
		for (int d = 0; d < rank; d++) {
			od[d] = dims[perm[d]];
			total *= dims[d];
		}
		x = rtens(rank, dims, -1.0f, 1.0f);
		tn(&t, "Transpose", 1, 1);
		tn_ints(&t, "perm", perm, (size_t)rank);
		run_alt(&t, 13, 1, in, 1, y);
		for (int d = 0; d < rank; d++)
			assert_int_equal(y[0].dims[d], od[d]);
		for (int64_t e = 0; e < total; e++) {
			int64_t r = e, src = 0;
			for (int d = rank - 1; d >= 0; d--) {
				src += (r % od[d]) * xs[perm[d]];
				r /= od[d];
			}
			if (((float *)y[0].data)[e] != ((float *)x.data)[src])
				fail_msg("rank %d case %d: element %lld", rank, c, (long long)e);
		}
		free_outs(y, 1);
		free(x.data);
	}
}

/* Empty tensors go through every fast path without touching memory. */
/* ---- ReduceSum / ReduceMean over one run of middle axes ---- */

/* x [outer, R, inner] reduced over R (axes from a to b of a rank-4 shape
 * with axes after them), against a double sum in r order: the fast path
 * (reduce.c's red_mid) sums four outputs a vector and the rest one by
 * one, both in that order, so the float results are the same bits. */
static void test_reduce_middle(void **state)
{
	static const int64_t shapes[][4] = {
		{1, 192, 3, 80}, {2, 5, 7, 67}, {3, 4, 9, 3}, {1, 1, 130, 129},
	};
	static const int64_t axes[][2] = {{2, 2}, {1, 2}, {1, 1}, {2, 2}};
	(void)state;
	for (int c = 0; c < 4; c++)
		for (int op = 0; op < 2; op++) {
			const int64_t *d = shapes[c];
			int64_t a = axes[c][0], b = axes[c][1], outer = 1, R = 1, inner = 1;
			int64_t ax[2] = {a, b};
			cpu_tensor x = rtens(4, d, -3.0f, 3.0f), y[1];
			const cpu_tensor *in[1] = {&x};
			tnode t;

			for (int k = 0; k < 4; k++)
				*(k < a ? &outer : k <= b ? &R : &inner) *= d[k];
			tn(&t, op ? "ReduceMean" : "ReduceSum", 1, 1);
			tn_ints(&t, "axes", ax, a == b ? 1 : 2);
			tn_int(&t, "keepdims", 0);
			run_alt(&t, 11, 1, in, 1, y);
			assert_int_equal(cpu_numel(&y[0]), outer * inner);
			for (int64_t o = 0; o < outer; o++)
				for (int64_t i = 0; i < inner; i++) {
					double sum = 0.0;
					float want, got = ((float *)y[0].data)[o * inner + i];

					for (int64_t r = 0; r < R; r++)
						sum += ((float *)x.data)[(o * R + r) * inner + i];
					want = (float)(op ? sum / (double)R : sum);
					if (got != want)
						fail_msg("%s case %d [%lld, %lld]: got %.9g want %.9g",
							 op ? "ReduceMean" : "ReduceSum", c, (long long)o,
							 (long long)i, got, want);
				}
			free_outs(y, 1);
			free(x.data);
		}
}

static void test_empty_tensors(void **state)
{
	static const int64_t d0[2] = {0, 5}, d1[2] = {3, 0}, d4[4] = {0, 3, 8, 8};
	static const int64_t k[2] = {3, 3}, perm[2] = {1, 0};
	static const char *const un[] = {"Softmax", "Relu", "Exp", "Erf", "GlobalAveragePool"};
	cpu_tensor a = rtens(2, d0, 0, 1), b = rtens(2, d1, 0, 1), p = rtens(4, d4, 0, 1), y[1];
	const cpu_tensor *in[2] = {&a, &a};
	tnode t;
	(void)state;
	for (size_t i = 0; i < sizeof(un) / sizeof(un[0]); i++)
		for (int w = 0; w < 2; w++) {
			in[0] = w ? &b : &a;
			tn(&t, un[i], 1, 1);
			run_alt(&t, 13, 1, in, 1, y);
			assert_int_equal(cpu_numel(&y[0]), 0);
			free_outs(y, 1);
		}
	in[0] = in[1] = &b;
	tn(&t, "Add", 2, 1);
	run_alt(&t, 13, 2, in, 1, y);
	assert_int_equal(y[0].dims[1], 0);
	free_outs(y, 1);
	tn(&t, "Transpose", 1, 1);
	tn_ints(&t, "perm", perm, 2);
	run_alt(&t, 13, 1, in, 1, y);
	assert_int_equal(y[0].dims[0], 0);
	free_outs(y, 1);
	in[0] = &p;
	tn(&t, "MaxPool", 1, 1);
	tn_ints(&t, "kernel_shape", k, 2);
	run_alt(&t, 12, 1, in, 1, y);
	assert_int_equal(y[0].dims[0], 0);
	assert_int_equal(y[0].dims[2], 6);
	free_outs(y, 1);
	free(a.data);
	free(b.data);
	free(p.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_random),
		cmocka_unit_test(test_pool_common),
		cmocka_unit_test(test_pool_nan),
		cmocka_unit_test(test_pool_flat),
		cmocka_unit_test(test_global_pool),
		cmocka_unit_test(test_vmath_accuracy),
		cmocka_unit_test(test_vm_logistic),
		cmocka_unit_test(test_logistic_wide),
		cmocka_unit_test(test_exp_wide),
		cmocka_unit_test(test_unary_ops),
		cmocka_unit_test(test_softmax_random),
		cmocka_unit_test(test_layernorm_random),
		cmocka_unit_test(test_binary_random),
		cmocka_unit_test(test_variadic_max),
		cmocka_unit_test(test_transpose_random),
		cmocka_unit_test(test_reduce_middle),
		cmocka_unit_test(test_empty_tensors),
	};
	int rc;
	if (cpu_pool_create(2, &test_pool) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	cpu_pool_destroy(test_pool);
	return rc;
}
