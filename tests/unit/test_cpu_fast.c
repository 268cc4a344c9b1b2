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

#include "cpu_exec.h"
#include "ops/cpu_ops.h"
#include "ops/vmath.h"
#include "threadpool.h"

enum { ERRLEN = 512, MAXA = 10 };

/* ---- NodeProto builder ---- */

typedef struct tnode {
	Onnx__NodeProto p;
	Onnx__AttributeProto attr[MAXA];
	Onnx__AttributeProto *attrp[MAXA];
	int64_t ints[MAXA][16];
	char *in[8], *out[8];
	char names[16][8];
} tnode;

static void tn(tnode *t, const char *op, int n_in, int n_out)
{
	Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
	memset(t, 0, sizeof(*t));
	t->p = init;
	t->p.op_type = (char *)op;
	t->p.name = "t";
	for (int i = 0; i < n_in + n_out; i++)
		snprintf(t->names[i], sizeof(t->names[i]), "%c%d", i < n_in ? 'i' : 'o', i);
	for (int i = 0; i < n_in; i++)
		t->in[i] = t->names[i];
	for (int i = 0; i < n_out; i++)
		t->out[i] = t->names[n_in + i];
	t->p.n_input = (size_t)n_in;
	t->p.input = t->in;
	t->p.n_output = (size_t)n_out;
	t->p.output = t->out;
	t->p.attribute = t->attrp;
}

static Onnx__AttributeProto *tn_attr(tnode *t, const char *name,
				     Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
	size_t k = t->p.n_attribute++;
	assert_true(k < MAXA);
	t->attr[k] = init;
	t->attr[k].name = (char *)name;
	t->attr[k].has_type = 1;
	t->attr[k].type = type;
	t->attrp[k] = &t->attr[k];
	return &t->attr[k];
}

static void tn_int(tnode *t, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = v;
}

static void tn_float(tnode *t, const char *name, float v)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = 1;
	a->f = v;
}

static void tn_ints(tnode *t, const char *name, const int64_t *v, size_t n)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	int64_t *store = t->ints[t->p.n_attribute - 1];
	memcpy(store, v, n * sizeof(int64_t));
	a->n_ints = n;
	a->ints = store;
}

static void tn_str(tnode *t, const char *name, const char *s)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = 1;
	a->s.data = (uint8_t *)s;
	a->s.len = strlen(s);
}

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

/* A 2-member intra-op pool; run_ok uses it every other call, so each
 * kernel is checked on one thread and split over two. */
static gemm_pool *test_pool;
static unsigned run_count;

/* Runs t on in[]; outputs are heap-allocated.  Fails the test on error. */
static void run_ok(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
		   cpu_tensor *out)
{
	const cpu_tensor *planned[8] = {0};
	gemm_pool *pool = run_count++ % 2 ? test_pool : NULL;
	int heap[8] = {0}, rc;
	char err[ERRLEN];
	cpu_node node;
	memset(out, 0, sizeof(*out) * (size_t)n_out);
	rc = cpu_node_init(&node, &t->p, opset, NULL, n_in, n_out, err, ERRLEN);
	if (rc == 0)
		rc = cpu_node_run_pool(&node, NULL, NULL, pool, in, planned, out, heap,
				       pool ? 2 : 1, err, ERRLEN);
	if (rc)
		fail_msg("%s: status %d: %s", t->p.op_type, rc, err);
	cpu_node_fini(&node);
}

static void free_outs(cpu_tensor *out, int n)
{
	for (int i = 0; i < n; i++)
		free(out[i].data);
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
	pc->c = rnd_in(1, 3);
	pc->auto_pad = rnd_in(0, 4) == 0 ? (int)rnd_in(1, 2) : 0;
	pc->ceil = pc->auto_pad ? 0 : (int)rnd_in(0, 1);
	for (int i = 0; i < pc->nsp; i++) {
		int64_t eff;
		pc->k[i] = rnd_in(1, 4);
		pc->s[i] = rnd_in(1, 3);
		pc->d[i] = is_max && rnd_in(0, 3) == 0 ? 2 : 1;   /* AveragePool < 19: no dilations */
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
	run_ok(&t, 19, 1, in, 1, y);
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
		run_ok(&t, 19, 1, in, 2, yi);
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

/* A NaN anywhere in a MaxPool window makes the output NaN, on both paths. */
static void test_pool_nan(void **state)
{
	pool_case pc;
	int64_t xd[4] = {1, 1, 9, 9};
	cpu_tensor x, y[1], yi[2];
	const cpu_tensor *in[1] = {&x};
	tnode t;
	(void)state;
	memset(&pc, 0, sizeof(pc));
	pc.nsp = 2;
	pc.is_max = 1;
	for (int d = 0; d < 2; d++) {
		pc.in[d] = 9;
		pc.k[d] = 3;
		pc.s[d] = 2;
		pc.d[d] = 1;
		pc.pb[d] = pc.pe[d] = 1;
		ref_geom(&pc, d);
	}
	x = rtens(4, xd, -1.0f, 1.0f);
	((float *)x.data)[0] = NAN;            /* a window's first tap */
	((float *)x.data)[1 * 9 + 3] = NAN;    /* first tap of a row of windows (0,1), (0,2) */
	((float *)x.data)[5 * 9 + 5] = NAN;    /* the middle of (2,2)... (3,3) */
	((float *)x.data)[8 * 9 + 8] = -INFINITY;
	tn(&t, "MaxPool", 1, 1);
	set_pool_attrs(&t, &pc);
	run_ok(&t, 12, 1, in, 1, y);
	tn(&t, "MaxPool", 1, 2);
	set_pool_attrs(&t, &pc);
	run_ok(&t, 12, 1, in, 2, yi);
	for (int64_t i = 0; i < pc.out[0] * pc.out[1]; i++) {
		float want = ref_pool_at(&pc, x.data, i / pc.out[1], i % pc.out[1]);
		assert_true(same_float(((float *)y[0].data)[i], want));
		assert_true(same_float(((float *)yi[0].data)[i], want));
	}
	free_outs(y, 1);
	free_outs(yi, 2);
	free(x.data);
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
			run_ok(&t, 13, 1, in, 1, y);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_random),
		cmocka_unit_test(test_pool_common),
		cmocka_unit_test(test_pool_nan),
		cmocka_unit_test(test_global_pool),
	};
	int rc;
	if (gemm_pool_create(2, &test_pool) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	gemm_pool_destroy(test_pool);
	return rc;
}
