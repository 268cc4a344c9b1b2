/*
 * Unit tests for the CPU provider's tensor family (providers/cpu/ops/tensor):
 * the semantics the ONNX conformance data (opsets up to 17) does not pin
 * down — Resize's opset 18/19 attributes (antialias, axes,
 * keep_aspect_ratio_policy, half_pixel_symmetric), the legacy nearest
 * rounding of Resize-10, Pad's wrap mode, axes and negative pads, the
 * scatter reductions, TopK's tie order, unsorted Unique, Col2Im,
 * CenterCropPad, LpPool, 1-D GridSample, MaxRoiPool — and the error paths
 * (indices out of range, bad attributes, shapes and dtypes).  Kernels run
 * through cpu_node_init/cpu_node_run with NodeProtos built here; expected
 * values are stated inline (computed with numpy ports of the ONNX
 * reference implementations).
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
#include "threadpool.h"
#include "cpu_ops.h"

static const int64_t D1[1] = {1}, D2[1] = {2}, D3[1] = {3}, D4[1] = {4}, D5[1] = {5};

/* ---- Resize ---- */

static const float X16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const int64_t D1144[4] = {1, 1, 4, 4}, D1122[4] = {1, 1, 2, 2};

static void test_resize_antialias(void **state)
{
	static const float sc[4] = {1, 1, 0.6f, 0.6f};
	static const double lin[4] = {2.874999930150805, 4.4999998778932575, 9.374999721120613,
				      10.999999668863067};
	static const double cub[4] = {2.518072135338784, 4.285886181017423, 9.589328318053338,
				      11.35714236373198};
	cpu_tensor tx = tens(CPU_FLOAT, 4, D1144, X16), ts = tens(CPU_FLOAT, 1, D4, sc);
	const cpu_tensor *in[3] = {&tx, NULL, &ts};
	tnode t;
	(void)state;
	tn(&t, "Resize", 3, 1);
	tn_skip(&t, 1);
	tn_str(&t, "mode", "linear");
	tn_int(&t, "antialias", 1);
	expect(&t, 18, 3, in, CPU_FLOAT, 4, D1122, lin, 1e-6);
	tn(&t, "Resize", 3, 1);
	tn_skip(&t, 1);
	tn_str(&t, "mode", "cubic");
	tn_int(&t, "antialias", 1);
	expect(&t, 18, 3, in, CPU_FLOAT, 4, D1122, cub, 1e-6);
}

static void test_resize_axes_policy(void **state)
{
	static const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	static const int64_t dx[3] = {1, 3, 4}, sz[2] = {3, 3}, axes[2] = {1, 2},
			     d123[3] = {1, 2, 3};
	static const double nl[6] = {1, 2, 4, 5, 6, 8}, same[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9,
								    10, 11, 12};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), tz = tens(CPU_INT64, 1, D2, sz);
	const cpu_tensor *in[4] = {&tx, NULL, NULL, &tz};
	tnode t;
	(void)state;
	/* not_larger: scale min(3/3, 3/4) = 0.75 on both axes -> [1, 2, 3] */
	tn(&t, "Resize", 4, 1);
	tn_skip(&t, 1);
	tn_skip(&t, 2);
	tn_ints(&t, "axes", axes, 2);
	tn_str(&t, "keep_aspect_ratio_policy", "not_larger");
	expect(&t, 18, 4, in, CPU_FLOAT, 3, d123, nl, 0);
	/* not_smaller: scale max(1, 0.75) = 1 -> unchanged */
	tn(&t, "Resize", 4, 1);
	tn_skip(&t, 1);
	tn_skip(&t, 2);
	tn_ints(&t, "axes", axes, 2);
	tn_str(&t, "mode", "linear");
	tn_str(&t, "keep_aspect_ratio_policy", "not_smaller");
	expect(&t, 18, 4, in, CPU_FLOAT, 3, dx, same, 1e-9);
	tn(&t, "Resize", 4, 1);
	tn_skip(&t, 1);
	tn_skip(&t, 2);
	tn_str(&t, "keep_aspect_ratio_policy", "bigger");
	expect_error(&t, 18, 4, in, CPU_E_INVALID, "keep_aspect_ratio_policy 'bigger'");
	tn(&t, "Resize", 4, 1);   /* two sizes for three axes */
	tn_skip(&t, 1);
	tn_skip(&t, 2);
	expect_error(&t, 18, 4, in, CPU_E_INVALID, "do not match 3 axes");
}

static void test_resize_modes(void **state)
{
	static const float x5[5] = {1, 2, 3, 4, 5}, s06[1] = {0.6f}, s2[1] = {2.0f};
	static const double sym[3] = {1.3333333995607137, 3.0, 4.666666600439286};
	static const double simple[3] = {1, 3, 5};   /* ceil when downsampling */
	static const int64_t big[2] = {INT64_MAX, -3}, d4[1] = {4};
	static const double bigx2[4] = {(double)INT64_MAX, (double)INT64_MAX, -3, -3};
	cpu_tensor tx = tens(CPU_FLOAT, 1, D5, x5), ts = tens(CPU_FLOAT, 1, D1, s06);
	const cpu_tensor *in3[3] = {&tx, NULL, &ts}, *in2[2] = {&tx, &ts};
	tnode t;
	(void)state;
	tn(&t, "Resize", 3, 1);
	tn_skip(&t, 1);
	tn_str(&t, "mode", "linear");
	tn_str(&t, "coordinate_transformation_mode", "half_pixel_symmetric");
	expect(&t, 19, 3, in3, CPU_FLOAT, 1, D3, sym, 1e-6);
	tn(&t, "Resize", 2, 1);   /* Resize-10 nearest, as ONNX Runtime rounds it */
	expect(&t, 10, 2, in2, CPU_FLOAT, 1, D3, simple, 0);
	tn(&t, "Resize", 2, 1);
	tn_str(&t, "mode", "cubic");
	expect_error(&t, 10, 2, in2, CPU_E_INVALID, "needs Resize-11");
	/* nearest copies elements exactly, whatever their type */
	tx = tens(CPU_INT64, 1, D2, big);
	ts = tens(CPU_FLOAT, 1, D1, s2);
	tn(&t, "Resize", 3, 1);
	tn_skip(&t, 1);
	expect(&t, 13, 3, in3, CPU_INT64, 1, d4, bigx2, 0);
}

/* Bilinear along one axis, straight from the ONNX coordinate formulas
 * (half_pixel, align_corners, asymmetric), in double. */
static double bl_axis(const double *v, int64_t n, int64_t o, int64_t on, int mode)
{
	double s = (double)on / (double)n, x;
	int64_t i0, i1;

	if (mode == 0)
		x = ((double)o + 0.5) / s - 0.5;
	else if (mode == 1)
		x = on == 1 ? 0 : (double)o * (double)(n - 1) / (double)(on - 1);
	else
		x = (double)o / s;
	x = x < 0 ? 0 : x > (double)(n - 1) ? (double)(n - 1) : x;
	i0 = (int64_t)floor(x);
	i1 = i0 + 1 < n ? i0 + 1 : i0;
	return v[i0] * (1 - (x - (double)i0)) + v[i1] * (x - (double)i0);
}

/* float32 N x C planes resized along H and W (the bilinear path of
 * resize_apply.c, planes split over the pool) against the formulas. */
static void test_resize_bilinear_planes(void **state)
{
	static const char *const ctm[3] = {"half_pixel", "align_corners", "asymmetric"};
	static const int64_t sizes[3][2] = {{14, 18}, {5, 4}, {7, 31}};
	int64_t dx[4] = {2, 3, 7, 9};
	float x[2 * 3 * 7 * 9];
	cpu_pool *pool;
	(void)state;
	for (int i = 0; i < 2 * 3 * 7 * 9; i++)
		x[i] = (float)((i * 37) % 101) / 10.0f - 5.0f;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int m = 0; m < 3; m++)
		for (int z = 0; z < 3; z++) {
			int64_t sz[4] = {2, 3, sizes[z][0], sizes[z][1]}, dz[1] = {4};
			int64_t OH = sz[2], OW = sz[3], n = 2 * 3 * OH * OW;
			cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), tz = tens(CPU_INT64, 1, dz, sz), out;
			const cpu_tensor *in[4] = {&tx, NULL, NULL, &tz};
			double *want = malloc(sizeof(double) * (size_t)n), row[9], col[7];
			char err[ERRLEN];
			tnode t;

			for (int64_t p = 0; p < 6; p++)
				for (int64_t oh = 0; oh < OH; oh++)
					for (int64_t ow = 0; ow < OW; ow++) {
						for (int64_t ih = 0; ih < 7; ih++) {
							for (int64_t iw = 0; iw < 9; iw++)
								row[iw] = x[(p * 7 + ih) * 9 + iw];
							col[ih] = bl_axis(row, 9, ow, OW, m);
						}
						want[(p * OH + oh) * OW + ow] = bl_axis(col, 7, oh, OH, m);
					}
			tn(&t, "Resize", 4, 1);
			tn_skip(&t, 1);
			tn_skip(&t, 2);
			tn_str(&t, "mode", "linear");
			tn_str(&t, "coordinate_transformation_mode", ctm[m]);
			assert_int_equal(run_pool(&t, 13, 4, in, 1, &out, pool, 2, err), 0);
			assert_int_equal(out.rank, 4);
			assert_memory_equal(out.dims, sz, sizeof(sz));
			for (int64_t i = 0; i < n; i++)
				if (fabs(((float *)out.data)[i] - want[i]) > 1e-5 * (1 + fabs(want[i])))
					fail_msg("%s %lldx%lld [%lld]: %g, want %g", ctm[m], (long long)OH,
						 (long long)OW, (long long)i, ((float *)out.data)[i], want[i]);
			free(out.data);
			free(want);
		}
	cpu_pool_destroy(pool);
}

/* Nearest over N x C planes (resize_apply.c: a row repeated from the row
 * before it, the 2x path that writes each loaded vector twice, the
 * general gather) for float32 and int32, against floor(j / scale) with the
 * asymmetric transformation, rows split over the pool. */
static void test_resize_nearest_planes(void **state)
{
	static const int64_t shapes[][2] = {{5, 9}, {4, 20}, {3, 33}};
	static const float scales[][2] = {{2, 2}, {3, 2}, {2, 3}, {1, 2}, {2.5f, 1.5f}};
	cpu_pool *pool;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (int dt = 0; dt < 2; dt++)
		for (size_t z = 0; z < sizeof(shapes) / sizeof(shapes[0]); z++)
			for (size_t k = 0; k < sizeof(scales) / sizeof(scales[0]); k++) {
				int64_t H = shapes[z][0], W = shapes[z][1], dx[4] = {2, 3, H, W};
				int64_t OH = (int64_t)floor((double)H * scales[k][0]);
				int64_t OW = (int64_t)floor((double)W * scales[k][1]), d4[1] = {4};
				float sc[4] = {1, 1, scales[k][0], scales[k][1]};
				int32_t *x = malloc(sizeof(int32_t) * (size_t)(6 * H * W));
				cpu_tensor tx = tens(dt ? CPU_INT32 : CPU_FLOAT, 4, dx, x);
				cpu_tensor ts = tens(CPU_FLOAT, 1, d4, sc), out;
				const cpu_tensor *in[3] = {&tx, NULL, &ts};
				char err[ERRLEN];
				tnode t;

				for (int64_t i = 0; i < 6 * H * W; i++) {
					float f = (float)((i * 37) % 101) - 50.0f;

					if (dt)
						x[i] = (int32_t)(i * 7919);
					else
						memcpy(&x[i], &f, 4);
				}
				tn(&t, "Resize", 3, 1);
				tn_skip(&t, 1);
				tn_str(&t, "coordinate_transformation_mode", "asymmetric");
				tn_str(&t, "nearest_mode", "floor");
				assert_int_equal(run_pool(&t, 13, 3, in, 1, &out, pool, 2, err), 0);
				assert_int_equal(out.dims[2], OH);
				assert_int_equal(out.dims[3], OW);
				for (int64_t p = 0; p < 6; p++)
					for (int64_t oh = 0; oh < OH; oh++)
						for (int64_t ow = 0; ow < OW; ow++) {
							int64_t ih = (int64_t)floor((double)oh / sc[2]);
							int64_t iw = (int64_t)floor((double)ow / sc[3]);
							int32_t got = ((int32_t *)out.data)[(p * OH + oh) * OW + ow];

							if (got != x[(p * H + ih) * W + iw])
								fail_msg("%dx%d x %gx%g [%lld,%lld,%lld]", (int)H, (int)W,
									 sc[2], sc[3], (long long)p, (long long)oh,
									 (long long)ow);
						}
				free(out.data);
				free(x);
			}
	cpu_pool_destroy(pool);
}

/* Transpose and Slice large enough to be split over the pool
 * (cpu_copy_strided_par) against index arithmetic. */
static void test_strided_par(void **state)
{
	static const int64_t dx[4] = {3, 40, 30, 24}, perm[4] = {0, 3, 1, 2};
	int64_t n = 3 * 40 * 30 * 24, dy[4] = {3, 24, 40, 30};
	float *x = malloc(sizeof(float) * (size_t)n);
	cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), out;
	const cpu_tensor *in[1] = {&tx};
	char err[ERRLEN];
	cpu_pool *pool;
	tnode t;
	(void)state;
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)i;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	tn(&t, "Transpose", 1, 1);
	tn_ints(&t, "perm", perm, 4);
	assert_int_equal(run_pool(&t, 13, 1, in, 1, &out, pool, 2, err), 0);
	assert_memory_equal(out.dims, dy, sizeof(dy));
	for (int64_t a = 0; a < 3; a++)
		for (int64_t c = 0; c < 24; c++)
			for (int64_t h = 0; h < 40; h++)
				for (int64_t w = 0; w < 30; w++)
					assert_true(((float *)out.data)[((a * 24 + c) * 40 + h) * 30 + w] ==
						    x[((a * 40 + h) * 30 + w) * 24 + c]);
	free(out.data);
	{
		/* x[:, 5:37:2, ::-1, 3:] */
		int64_t st[3] = {5, -1, 3}, en[3] = {37, -31, 24}, ax[3] = {1, 2, 3}, sp[3] = {2, -1, 1};
		int64_t d3[1] = {3}, dz[4] = {3, 16, 30, 21};
		cpu_tensor ts = tens(CPU_INT64, 1, d3, st), te = tens(CPU_INT64, 1, d3, en);
		cpu_tensor ta = tens(CPU_INT64, 1, d3, ax), tp = tens(CPU_INT64, 1, d3, sp);
		const cpu_tensor *sin[5] = {&tx, &ts, &te, &ta, &tp};

		tn(&t, "Slice", 5, 1);
		assert_int_equal(run_pool(&t, 13, 5, sin, 1, &out, pool, 2, err), 0);
		assert_memory_equal(out.dims, dz, sizeof(dz));
		for (int64_t a = 0; a < 3; a++)
			for (int64_t h = 0; h < 16; h++)
				for (int64_t w = 0; w < 30; w++)
					for (int64_t c = 0; c < 21; c++)
						assert_true(((float *)out.data)[((a * 16 + h) * 30 + w) * 21 + c] ==
							    x[((a * 40 + 5 + 2 * h) * 30 + 29 - w) * 24 + 3 + c]);
		free(out.data);
	}
	cpu_pool_destroy(pool);
	free(x);
}

/* GridSample with align_corners over a one-pixel-high image: every y
 * denormalises to row 0, even an infinite one (RAFT's coarsest level
 * divides by size - 1 = 0), as ONNX Runtime samples it. */
static void test_gridsample_one_row(void **state)
{
	static const float x[2] = {10, 30};
	static const int64_t dx[4] = {1, 1, 1, 2}, dg[4] = {1, 1, 3, 2}, dy[4] = {1, 1, 1, 3};
	float g[6] = {-0.25f, -INFINITY, 1.0f, INFINITY, -1.0f, 0.5f};
	static const double want[3] = {17.5, 30, 10};
	cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), tg = tens(CPU_FLOAT, 4, dg, g);
	const cpu_tensor *in[2] = {&tx, &tg};
	tnode t;
	(void)state;
	tn(&t, "GridSample", 2, 1);
	tn_int(&t, "align_corners", 1);
	expect(&t, 16, 2, in, CPU_FLOAT, 4, dy, want, 1e-6);
}

static void test_resize_errors(void **state)
{
	static const float sc[4] = {1, 1, 2, 2}, neg[4] = {1, 1, -2, 2};
	static const int64_t sz[4] = {1, 1, 8, 8};
	static const double up[4] = {1, 1, 2, 2};
	static const int64_t d1188[4] = {1, 1, 8, 8};
	cpu_tensor tx = tens(CPU_FLOAT, 4, D1144, X16), ts = tens(CPU_FLOAT, 1, D4, sc);
	cpu_tensor tz = tens(CPU_INT64, 1, D4, sz);
	const cpu_tensor *in[4] = {&tx, NULL, &ts, &tz};
	tnode t;
	(void)state;
	tn(&t, "Resize", 4, 1);
	tn_skip(&t, 1);
	expect_error(&t, 13, 4, in, CPU_E_INVALID, "exactly one of scales and sizes");
	in[3] = NULL;
	ts = tens(CPU_FLOAT, 1, D4, neg);
	expect_error(&t, 13, 4, in, CPU_E_INVALID, "is not positive");
	tn(&t, "Resize", 4, 1);
	tn_str(&t, "mode", "bicubic");
	expect_error(&t, 13, 4, in, CPU_E_INVALID, "mode 'bicubic'");
	/* Upsample-7 takes its scales as an attribute */
	tn(&t, "Upsample", 1, 1);
	tn_floats(&t, "scales", sc, 4);
	in[0] = &tx;
	{
		cpu_tensor out[1];
		char err[ERRLEN];
		assert_int_equal(run(&t, 7, 1, in, 1, out, err), 0);
		assert_int_equal(out[0].dims[2], d1188[2]);
		assert_int_equal(out[0].dims[3], d1188[3]);
		assert_true(((float *)out[0].data)[8 + 2] == (float)up[2]);
		free(out[0].data);
	}
	tn(&t, "Upsample", 1, 1);
	expect_error(&t, 7, 1, in, CPU_E_INVALID, "attribute scales is required");
}

/* ---- gathers and scatters ---- */

static void test_gather_errors(void **state)
{
	static const float x[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t d23[2] = {2, 3}, d22[2] = {2, 2}, d21[2] = {2, 1};
	static const int64_t good[4] = {-1, 0, 2, 1}, bad[4] = {0, 3, 0, 0}, nd[2] = {1, -4};
	static const double ge[4] = {3, 1, 6, 5};
	cpu_tensor tx = tens(CPU_FLOAT, 2, d23, x), ti = tens(CPU_INT64, 2, d22, good);
	const cpu_tensor *in[2] = {&tx, &ti};
	tnode t;
	(void)state;
	tn(&t, "GatherElements", 2, 1);
	tn_int(&t, "axis", 1);
	expect(&t, 13, 2, in, CPU_FLOAT, 2, d22, ge, 0);
	ti = tens(CPU_INT64, 2, d22, bad);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "index 3 out of range [-3, 3) on axis 1");
	ti = tens(CPU_INT64, 1, D4, good);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "must have one rank");
	ti = tens(CPU_INT64, 2, d21, nd);
	tn(&t, "GatherND", 2, 1);
	tn_int(&t, "batch_dims", 1);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "index -4 out of range");
	tn(&t, "GatherND", 2, 1);
	tn_int(&t, "batch_dims", 2);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "batch_dims 2 does not fit");
}

static void test_scatter(void **state)
{
	static const float x[6] = {1, 2, 3, 4, 5, 6}, u[4] = {10, -1, 0, 7};
	static const int64_t d23[2] = {2, 3}, d22[2] = {2, 2};
	static const int64_t idx[4] = {0, 0, 2, -1}, bad[4] = {0, 5, 0, 0};
	static const double mx[6] = {10, 2, 3, 4, 5, 7}, mn[6] = {-1, 2, 3, 4, 5, 0};
	static const int64_t nd_i[2] = {1, 1}, d21[2] = {2, 1};
	static const float nd_u[6] = {2, 2, 2, 3, 3, 3};
	static const double nd_mul[6] = {1, 2, 3, 24, 30, 36};
	cpu_tensor tx = tens(CPU_FLOAT, 2, d23, x), ti = tens(CPU_INT64, 2, d22, idx);
	cpu_tensor tu = tens(CPU_FLOAT, 2, d22, u);
	const cpu_tensor *in[3] = {&tx, &ti, &tu};
	tnode t;
	(void)state;
	tn(&t, "ScatterElements", 3, 1);   /* duplicates fold with the reduction */
	tn_int(&t, "axis", 1);
	tn_str(&t, "reduction", "max");
	expect(&t, 18, 3, in, CPU_FLOAT, 2, d23, mx, 0);
	tn(&t, "ScatterElements", 3, 1);
	tn_int(&t, "axis", 1);
	tn_str(&t, "reduction", "min");
	expect(&t, 18, 3, in, CPU_FLOAT, 2, d23, mn, 0);
	ti = tens(CPU_INT64, 2, d22, bad);
	expect_error(&t, 18, 3, in, CPU_E_INVALID, "index 5 out of range on axis 1");
	tn(&t, "ScatterElements", 3, 1);
	tn_str(&t, "reduction", "xor");
	expect_error(&t, 18, 3, in, CPU_E_INVALID, "unknown reduction");
	ti = tens(CPU_INT64, 2, d21, nd_i);   /* row 1 twice: multiplied by 2, then 3 */
	tu = tens(CPU_FLOAT, 2, d23, nd_u);
	tn(&t, "ScatterND", 3, 1);
	tn_str(&t, "reduction", "mul");
	expect(&t, 18, 3, in, CPU_FLOAT, 2, d23, nd_mul, 0);
	tu = tens(CPU_FLOAT, 2, d22, u);
	expect_error(&t, 18, 3, in, CPU_E_INVALID, "updates dim 1 is 2, expected 3");
}

/* ---- Pad and CenterCropPad ---- */

static void test_pad(void **state)
{
	static const int32_t x[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t d23[2] = {2, 3}, wrap_p[4] = {0, 2, 1, 0}, d35[2] = {3, 5};
	static const double wrap[15] = {2, 3, 1, 2, 3, 5, 6, 4, 5, 6, 2, 3, 1, 2, 3};
	static const int64_t neg_p[2] = {-1, 1}, ax[1] = {-1}, d23b[2] = {2, 3};
	static const int32_t cv[1] = {9};
	static const double crop[6] = {2, 3, 9, 5, 6, 9};
	static const int64_t d0[2] = {2, 0}, bad_p[3] = {1, 1, 1};
	cpu_tensor tx = tens(CPU_INT32, 2, d23, x), tp = tens(CPU_INT64, 1, D4, wrap_p);
	cpu_tensor tv = tens(CPU_INT32, 0, NULL, cv), ta = tens(CPU_INT64, 1, D1, ax);
	const cpu_tensor *in[4] = {&tx, &tp, NULL, NULL};
	tnode t;
	(void)state;
	tn(&t, "Pad", 2, 1);
	tn_str(&t, "mode", "wrap");
	expect(&t, 19, 2, in, CPU_INT32, 2, d35, wrap, 0);
	tp = tens(CPU_INT64, 1, D2, neg_p);   /* last axis: crop 1 in front, pad 1 behind */
	in[2] = &tv;
	in[3] = &ta;
	tn(&t, "Pad", 4, 1);
	expect(&t, 18, 4, in, CPU_INT32, 2, d23b, crop, 0);
	tx = tens(CPU_INT32, 2, d0, x);   /* nothing to reflect */
	tp = tens(CPU_INT64, 1, D2, neg_p);
	tn(&t, "Pad", 4, 1);
	tn_str(&t, "mode", "reflect");
	expect_error(&t, 18, 4, in, CPU_E_INVALID, "do not fit axis 1");
	tx = tens(CPU_INT32, 2, d23, x);
	tp = tens(CPU_INT64, 1, D3, bad_p);
	in[3] = NULL;
	tn(&t, "Pad", 3, 1);
	expect_error(&t, 13, 3, in, CPU_E_INVALID, "pads has 3 values for 2 axes");
	tn(&t, "Pad", 3, 1);
	tn_str(&t, "mode", "mirror");
	expect_error(&t, 13, 3, in, CPU_E_INVALID, "unknown pad mode");
}

static void test_center_crop_pad(void **state)
{
	static const float x[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t d32[2] = {3, 2}, shape[2] = {1, 4}, d14[2] = {1, 4};
	static const double want[4] = {0, 3, 4, 0};   /* middle row, one zero each side */
	cpu_tensor tx = tens(CPU_FLOAT, 2, d32, x), ts = tens(CPU_INT64, 1, D2, shape);
	const cpu_tensor *in[2] = {&tx, &ts};
	tnode t;
	(void)state;
	tn(&t, "CenterCropPad", 2, 1);
	expect(&t, 18, 2, in, CPU_FLOAT, 2, d14, want, 0);
	ts = tens(CPU_INT64, 1, D1, shape);
	expect_error(&t, 18, 2, in, CPU_E_INVALID, "shape has 1 values for 2 axes");
}

/* ---- selection ops ---- */

static void test_topk_unique(void **state)
{
	static const float x[6] = {3, 1, 3, 2, 1, 3};
	static const int64_t k4[1] = {4}, k9[1] = {9};
	static const double v[4] = {3, 3, 3, 2}, i[4] = {0, 2, 5, 3};
	static const float u[5] = {2, 1, 2, 3, 1};
	static const double uy[3] = {2, 1, 3}, ui[3] = {0, 1, 3}, uinv[5] = {0, 1, 0, 2, 1},
			    uc[3] = {2, 2, 1};
	static const int64_t d6[1] = {6};
	cpu_tensor tx = tens(CPU_FLOAT, 1, d6, x), tk = tens(CPU_INT64, 1, D1, k4);
	const cpu_tensor *in[2] = {&tx, &tk};
	tnode t;
	(void)state;
	tn(&t, "TopK", 2, 2);   /* equal values keep index order */
	expect_out(&t, 11, 2, in, 0, CPU_FLOAT, 1, D4, v, 0);
	expect_out(&t, 11, 2, in, 1, CPU_INT64, 1, D4, i, 0);
	tk = tens(CPU_INT64, 1, D1, k9);
	expect_error(&t, 11, 2, in, CPU_E_INVALID, "k = 9 is outside [0, 6]");
	tx = tens(CPU_FLOAT, 1, D5, u);
	tn(&t, "Unique", 1, 4);   /* unsorted: order of first occurrence */
	tn_int(&t, "sorted", 0);
	expect_out(&t, 11, 1, in, 0, CPU_FLOAT, 1, D3, uy, 0);
	expect_out(&t, 11, 1, in, 1, CPU_INT64, 1, D3, ui, 0);
	expect_out(&t, 11, 1, in, 2, CPU_INT64, 1, D5, uinv, 0);
	expect_out(&t, 11, 1, in, 3, CPU_INT64, 1, D3, uc, 0);
}

static void test_nonzero_onehot(void **state)
{
	static const float x[4] = {0.0f, -0.0f, 2.0f, NAN};
	static const int64_t d14[2] = {1, 2}, d22[2] = {2, 2};
	static const double nz[2] = {2, 3};
	static const int64_t idx[2] = {-1, 7}, depth[1] = {3};
	static const float vals[2] = {0, 5};
	static const double oh[6] = {0, 0, 5, 0, 0, 0};   /* -1 is the last; 7 is none */
	static const int64_t d23[2] = {2, 3};
	cpu_tensor tx = tens(CPU_FLOAT, 1, D4, x), td = tens(CPU_INT64, 1, D1, depth);
	cpu_tensor tv = tens(CPU_FLOAT, 1, D2, vals);
	const cpu_tensor *in[3] = {&tx, &td, &tv};
	tnode t;
	(void)state;
	tn(&t, "NonZero", 1, 1);   /* -0 is zero, NaN is not */
	expect(&t, 13, 1, in, CPU_INT64, 2, d14, nz, 0);
	tx = tens(CPU_INT64, 1, D2, idx);
	tn(&t, "OneHot", 3, 1);
	expect(&t, 11, 3, in, CPU_FLOAT, 2, d23, oh, 0);
	tv = tens(CPU_FLOAT, 2, d22, x);
	expect_error(&t, 11, 3, in, CPU_E_INVALID, "values must be [off_value, on_value]");
}

/* ---- image ops ---- */

static void test_col2im(void **state)
{
	/* a 2x3 image from 1x2 blocks (2x2 of them, stride 1): column 0 holds
	 * each block's left pixel, column 1 its right one, which the next block
	 * overlaps */
	static const float x[8] = {1, 2, 3, 4, 10, 20, 30, 40};
	static const int64_t dx[3] = {1, 2, 4}, img[2] = {2, 3}, blk[2] = {1, 2},
			     dy[4] = {1, 1, 2, 3};
	static const double y[6] = {1, 12, 20, 3, 34, 40};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), ti = tens(CPU_INT64, 1, D2, img);
	cpu_tensor tb = tens(CPU_INT64, 1, D2, blk);
	const cpu_tensor *in[3] = {&tx, &ti, &tb};
	tnode t;
	(void)state;
	tn(&t, "Col2Im", 3, 1);
	expect(&t, 18, 3, in, CPU_FLOAT, 4, dy, y, 0);
	ti = tens(CPU_INT64, 1, D2, blk);
	expect_error(&t, 18, 3, in, CPU_E_INVALID, "expected C*2 columns of 1 blocks");
}

static void test_lppool_gridsample(void **state)
{
	static const float x[4] = {3, -4, 0, 1};
	static const int64_t dx[3] = {1, 1, 4}, k[1] = {2}, s[1] = {2}, dy[3] = {1, 1, 2};
	static const double lp[2] = {5, 1};
	static const float g[3] = {-1, 0, 1};
	static const int64_t dg[3] = {1, 3, 1}, dgy[3] = {1, 1, 3};
	/* align_corners: -1 -> pixel 0, 0 -> 1.5, 1 -> 3 */
	static const double gs[3] = {3, -2, 1};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), tg = tens(CPU_FLOAT, 3, dg, g);
	const cpu_tensor *in[2] = {&tx, &tg};
	tnode t;
	(void)state;
	tn(&t, "LpPool", 1, 1);
	tn_ints(&t, "kernel_shape", k, 1);
	tn_ints(&t, "strides", s, 1);
	expect(&t, 11, 1, in, CPU_FLOAT, 3, dy, lp, 1e-6);
	tn(&t, "LpPool", 1, 1);
	expect_error(&t, 11, 1, in, CPU_E_INVALID, "kernel_shape has 0 dims");
	tn(&t, "GridSample", 2, 1);
	tn_str(&t, "mode", "linear");
	tn_int(&t, "align_corners", 1);
	expect(&t, 20, 2, in, CPU_FLOAT, 3, dgy, gs, 1e-6);
	tn(&t, "GridSample", 2, 1);
	tn_str(&t, "padding_mode", "mirror");
	expect_error(&t, 20, 2, in, CPU_E_INVALID, "padding_mode 'mirror'");
}

static void test_roi_pools(void **state)
{
	static const float x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	static const float rois[5] = {0, 0, 0, 3, 3}, bad[5] = {4, 0, 0, 3, 3};
	static const int64_t dr[2] = {1, 5}, ps[2] = {2, 2};
	static const double mx[4] = {6, 8, 14, 16};
	static const int64_t bi[1] = {1}, dr4[2] = {1, 4};
	cpu_tensor tx = tens(CPU_FLOAT, 4, D1144, x), tr = tens(CPU_FLOAT, 2, dr, rois);
	cpu_tensor tb = tens(CPU_INT64, 1, D1, bi);
	const cpu_tensor *in[3] = {&tx, &tr, &tb};
	tnode t;
	(void)state;
	tn(&t, "MaxRoiPool", 2, 1);
	tn_ints(&t, "pooled_shape", ps, 2);
	expect(&t, 1, 2, in, CPU_FLOAT, 4, D1122, mx, 0);
	tr = tens(CPU_FLOAT, 2, dr, bad);
	expect_error(&t, 1, 2, in, CPU_E_INVALID, "batch index out of range");
	tr = tens(CPU_FLOAT, 2, dr4, rois);
	tn(&t, "RoiAlign", 3, 1);
	expect_error(&t, 16, 3, in, CPU_E_INVALID, "batch index 1 out of range");
	tn(&t, "RoiAlign", 3, 1);
	tn_str(&t, "mode", "median");
	expect_error(&t, 16, 3, in, CPU_E_INVALID, "unknown mode");
}

/* ---- shape-checked data movement ---- */

static void test_movement_errors(void **state)
{
	static const float x[16] = {0};
	static const int64_t d1344[4] = {1, 3, 2, 2}, rep[2] = {2, -1}, d22[2] = {2, 2};
	static const int64_t lens[2] = {3, 1}, idx[4] = {0, 1, 2, 99}, kmin[1] = {INT64_MIN};
	static const double tri[4] = {0, 0, 0, 0};
	cpu_tensor tx = tens(CPU_FLOAT, 4, d1344, x), ti = tens(CPU_INT64, 1, D2, rep);
	const cpu_tensor *in[3] = {&tx, &ti, NULL};
	tnode t;
	(void)state;
	tn(&t, "DepthToSpace", 1, 1);
	tn_int(&t, "blocksize", 2);
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "channels 3 not divisible");
	tx = tens(CPU_FLOAT, 2, d22, x);
	tn(&t, "Tile", 2, 1);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "repeats[1] = -1 is invalid");
	ti = tens(CPU_INT64, 1, D2, lens);
	tn(&t, "ReverseSequence", 2, 1);
	expect_error(&t, 10, 2, in, CPU_E_INVALID, "sequence_lens[0] = 3 is outside [0, 2]");
	tn(&t, "EyeLike", 1, 1);
	tx = tens(CPU_FLOAT, 1, D4, x);
	expect_error(&t, 9, 1, in, CPU_E_INVALID, "input rank 1 is not 2");
	tx = tens(CPU_FLOAT, 2, d22, x);
	ti = tens(CPU_INT64, 0, NULL, kmin);   /* k = INT64_MIN keeps nothing of tril */
	tn(&t, "Trilu", 2, 1);
	tn_int(&t, "upper", 0);
	expect(&t, 14, 2, in, CPU_FLOAT, 2, d22, tri, 0);
	{
		static const int64_t d1122[4] = {1, 1, 2, 2}, k2[2] = {2, 2};
		cpu_tensor tv = tens(CPU_FLOAT, 4, d1122, x), tid = tens(CPU_INT64, 4, d1122, idx);
		const cpu_tensor *u[2] = {&tv, &tid};
		tn(&t, "MaxUnpool", 2, 1);
		tn_ints(&t, "kernel_shape", k2, 2);
		tn_ints(&t, "strides", k2, 2);
		expect_error(&t, 11, 2, u, CPU_E_INVALID, "index 99 out of range [0, 16)");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resize_antialias),
		cmocka_unit_test(test_resize_axes_policy),
		cmocka_unit_test(test_resize_modes),
		cmocka_unit_test(test_resize_bilinear_planes),
		cmocka_unit_test(test_resize_nearest_planes),
		cmocka_unit_test(test_strided_par),
		cmocka_unit_test(test_gridsample_one_row),
		cmocka_unit_test(test_resize_errors),
		cmocka_unit_test(test_gather_errors),
		cmocka_unit_test(test_scatter),
		cmocka_unit_test(test_pad),
		cmocka_unit_test(test_center_crop_pad),
		cmocka_unit_test(test_topk_unique),
		cmocka_unit_test(test_nonzero_onehot),
		cmocka_unit_test(test_col2im),
		cmocka_unit_test(test_lppool_gridsample),
		cmocka_unit_test(test_roi_pools),
		cmocka_unit_test(test_movement_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
