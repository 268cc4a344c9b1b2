/*
 * Unit tests for the CPU provider's data-movement kernels
 * (providers/cpu/ops: Gather, the Reshape family, Transpose, Cast,
 * ReduceMean, Slice/Concat/Split, Where/Expand/Range, Constant and Shape)
 * and cpu_tensor_from_proto.  Kernels run through cpu_node_init and
 * cpu_node_run with NodeProtos built here (cpu_test_util).  Reference
 * values come from the .npy files in tests/data/ops/, written by
 * tests/data/gen_cpu_op_refs.py with plain numpy; the small cases state
 * their expected values inline.  test_cpu_ops covers the compute kernels
 * and the executor contract.
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

static const char *const X1[] = {"x"}, *const Y1[] = {"y"};

/* ---- data movement ---- */

static void test_gather(void **state)
{
	static const char *const ins[] = {"x", "i"};
	static const int64_t bad[2] = {1, 5}, d2[1] = {2};
	tnode t;
	cpu_tensor x, ti = tens(CPU_INT64, 1, d2, bad);
	const cpu_tensor *in[2] = {&x, &ti};
	(void)state;
	tn(&t, "Gather", 2, 1);
	check_fixture(&t, 13, "gather", ins, 2, Y1, 1, 0);
	x = load("gather", "x");
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "index 5 out of range");
	free(x.data);
	{
		/* axis 1 with int32 indices, -1 meaning the last column */
		static const int32_t idx[3] = {-1, 0, 3};
		static const int64_t d3[1] = {3};
		cpu_tensor out[1], want = load("gather", "y1");
		x = load("gather", "x");
		ti = tens(CPU_INT32, 1, d3, idx);
		tn(&t, "Gather", 2, 1);
		tn_int(&t, "axis", 1);
		char err[ERRLEN];
		assert_int_equal(run(&t, 13, 2, in, 1, out, err), 0);
		expect_close(&out[0], &want, 0);
		free_outs(out, 1);
		free(want.data);
		free(x.data);
	}
}

static void test_reshape_family(void **state)
{
	static const float x[24] = {0};
	static const int64_t dx[3] = {2, 3, 4}, s1[2] = {0, -1}, s2[3] = {-1, 0, 2};
	static const int64_t s_bad[2] = {5, -1}, d2[1] = {2}, d3[1] = {3}, ax[1] = {-2};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), ts = tens(CPU_INT64, 1, d2, s1), out[1];
	const cpu_tensor *in[2] = {&tx, &ts};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "Reshape", 2, 1);
	assert_int_equal(run(&t, 14, 2, in, 1, out, err), 0);
	assert_int_equal(out[0].rank, 2);
	assert_true(out[0].dims[0] == 2 && out[0].dims[1] == 12);
	free_outs(out, 1);
	ts = tens(CPU_INT64, 1, d3, s2);
	assert_int_equal(run(&t, 14, 2, in, 1, out, err), 0);
	assert_true(out[0].dims[0] == 4 && out[0].dims[1] == 3 && out[0].dims[2] == 2);
	free_outs(out, 1);
	ts = tens(CPU_INT64, 1, d2, s_bad);
	expect_error(&t, 14, 2, in, CPU_E_INVALID, "cannot infer -1");
	tn(&t, "Flatten", 1, 1);
	tn_int(&t, "axis", -1);
	assert_int_equal(run(&t, 13, 1, in, 1, out, err), 0);
	assert_true(out[0].dims[0] == 6 && out[0].dims[1] == 4);
	free_outs(out, 1);
	tn(&t, "Unsqueeze", 1, 1);   /* opset 11: axes attribute */
	tn_ints(&t, "axes", ax, 1);
	assert_int_equal(run(&t, 11, 1, in, 1, out, err), 0);
	assert_int_equal(out[0].rank, 4);
	assert_true(out[0].dims[2] == 1 && out[0].dims[3] == 4);
	tx = out[0];   /* and back with Squeeze (opset 13: axes input) */
	ts = tens(CPU_INT64, 1, (const int64_t[]){1}, ax);
	tn(&t, "Squeeze", 2, 1);
	assert_int_equal(run(&t, 13, 2, in, 1, out, err), 0);
	assert_int_equal(out[0].rank, 3);
	assert_int_equal(out[0].dims[2], 4);
	free_outs(out, 1);
	free(tx.data);
}

static void test_transpose(void **state)
{
	static const int64_t perm[3] = {2, 0, 1}, bad[3] = {0, 0, 1};
	tnode t;
	cpu_tensor x;
	const cpu_tensor *in[1] = {&x};
	(void)state;
	tn(&t, "Transpose", 1, 1);
	tn_ints(&t, "perm", perm, 3);
	check_fixture(&t, 13, "transpose", X1, 1, Y1, 1, 0);
	tn(&t, "Transpose", 1, 1);
	tn_ints(&t, "perm", bad, 3);
	x = load("transpose", "x");
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "permutation");
	free(x.data);
}

static void test_cast(void **state)
{
	static const struct { int32_t to; const char *ref; } cases[] = {
		{CPU_INT32, "i32"}, {CPU_FLOAT16, "f16"}, {CPU_BOOL, "b"}, {CPU_DOUBLE, "f64"},
	};
	static const char *const f32[] = {"f32"}, *const i8[] = {"i8"};
	tnode t;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *outs[1] = {cases[i].ref};
		tn(&t, "Cast", 1, 1);
		tn_int(&t, "to", cases[i].to);
		check_fixture(&t, 13, "cast", X1, 1, outs, 1, 0);
	}
	tn(&t, "Cast", 1, 1);
	tn_int(&t, "to", CPU_FLOAT);
	check_fixture(&t, 13, "cast_int", X1, 1, f32, 1, 0);
	tn(&t, "Cast", 1, 1);
	tn_str(&t, "to", "INT8");   /* opset 1-5 names the type */
	check_fixture(&t, 5, "cast_int", X1, 1, i8, 1, 0);
	{
		/* float16 -> float32 */
		static const char *const f16[] = {"f16"}, *const back[] = {"f16f32"};
		tn(&t, "Cast", 1, 1);
		tn_int(&t, "to", CPU_FLOAT);
		check_fixture(&t, 13, "cast", f16, 1, back, 1, 0);
	}
}

static void test_reducemean(void **state)
{
	static const int64_t ax1[1] = {1}, ax02[2] = {0, 2}, d2[1] = {2};
	static const char *const y1[] = {"y1"}, *const y02[] = {"y02"}, *const yall[] = {"yall"};
	cpu_tensor x, axes = tens(CPU_INT64, 1, d2, ax02), out[1], want;
	const cpu_tensor *in[2] = {&x, &axes};
	char err[ERRLEN];
	tnode t;
	(void)state;
	tn(&t, "ReduceMean", 1, 1);
	tn_ints(&t, "axes", ax1, 1);
	check_fixture(&t, 13, "reducemean", X1, 1, y1, 1, 1e-6);
	tn(&t, "ReduceMean", 1, 1);
	tn_ints(&t, "axes", ax02, 2);
	tn_int(&t, "keepdims", 0);
	check_fixture(&t, 13, "reducemean", X1, 1, y02, 1, 1e-6);
	tn(&t, "ReduceMean", 1, 1);
	check_fixture(&t, 13, "reducemean", X1, 1, yall, 1, 1e-6);
	tn(&t, "ReduceMean", 2, 1);   /* opset 18: axes input */
	tn_int(&t, "keepdims", 0);
	x = load("reducemean", "x");
	assert_int_equal(run(&t, 18, 2, in, 1, out, err), 0);
	want = load("reducemean", "y02");
	expect_close(&out[0], &want, 1e-6);
	free_outs(out, 1);
	free(want.data);
	free(x.data);
}

static void test_slice_concat_split(void **state)
{
	static const int32_t x[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
	static const int64_t dx[2] = {3, 4}, d2[1] = {2};
	static const int64_t st[2] = {-1, 100}, en[2] = {-100, 0}, ax[2] = {0, 1}, sp[2] = {-1, -2};
	cpu_tensor tx = tens(CPU_INT32, 2, dx, x), ts = tens(CPU_INT64, 1, d2, st);
	cpu_tensor te = tens(CPU_INT64, 1, d2, en), ta = tens(CPU_INT64, 1, d2, ax);
	cpu_tensor tp = tens(CPU_INT64, 1, d2, sp), out[3];
	const cpu_tensor *in[5] = {&tx, &ts, &te, &ta, &tp};
	char err[ERRLEN];
	int32_t *y;
	tnode t;
	(void)state;
	/* rows backwards from the last, columns 3 and 1 (step -2 from the clamped end) */
	tn(&t, "Slice", 5, 1);
	assert_int_equal(run(&t, 13, 5, in, 1, out, err), 0);
	assert_true(out[0].dims[0] == 3 && out[0].dims[1] == 2);
	y = out[0].data;
	assert_true(y[0] == 11 && y[1] == 9 && y[2] == 7 && y[5] == 1);
	free_outs(out, 1);
	tn(&t, "Concat", 2, 1);
	tn_int(&t, "axis", -1);
	in[1] = &tx;
	assert_int_equal(run(&t, 13, 2, in, 1, out, err), 0);
	assert_true(out[0].dims[0] == 3 && out[0].dims[1] == 8);
	assert_int_equal(((int32_t *)out[0].data)[12], 4);
	assert_int_equal(((int32_t *)out[0].data)[23], 11);
	free_outs(out, 1);
	tn(&t, "Split", 1, 3);   /* even split of the columns would not divide: use rows */
	assert_int_equal(run(&t, 13, 1, in, 3, out, err), 0);
	assert_int_equal(out[2].dims[0], 1);
	assert_int_equal(((int32_t *)out[2].data)[0], 8);
	free_outs(out, 3);
	tn(&t, "Split", 1, 3);
	tn_int(&t, "axis", 1);
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "does not split evenly");
}

static void test_where_expand_range(void **state)
{
	static const uint8_t c[2] = {1, 0};
	static const float a[3] = {1, 2, 3}, b[1] = {-1};
	static const int64_t d2[2] = {2, 1}, d3[1] = {3}, shp[2] = {2, 3};
	static const int64_t r0[1] = {10}, r1[1] = {1}, r2[1] = {-3};
	cpu_tensor tc = tens(CPU_BOOL, 2, d2, c), ta = tens(CPU_FLOAT, 1, d3, a);
	cpu_tensor tb = tens(CPU_FLOAT, 0, NULL, b), out[1];
	const cpu_tensor *in[3] = {&tc, &ta, &tb};
	char err[ERRLEN];
	float *y;
	tnode t;
	(void)state;
	tn(&t, "Where", 3, 1);
	assert_int_equal(run(&t, 16, 3, in, 1, out, err), 0);
	y = out[0].data;
	assert_true(out[0].dims[0] == 2 && out[0].dims[1] == 3);
	assert_true(y[2] == 3.0f && y[3] == -1.0f && y[5] == -1.0f);
	free_outs(out, 1);
	tn(&t, "Expand", 2, 1);
	tc = tens(CPU_INT64, 1, (const int64_t[]){2}, shp);
	in[0] = &ta;
	in[1] = &tc;
	assert_int_equal(run(&t, 13, 2, in, 1, out, err), 0);
	assert_true(((float *)out[0].data)[4] == 2.0f && cpu_numel(&out[0]) == 6);
	free_outs(out, 1);
	tn(&t, "Range", 3, 1);   /* 10, 7, 4: the limit 1 is exclusive */
	ta = tens(CPU_INT64, 0, NULL, r0);
	tb = tens(CPU_INT64, 0, NULL, r1);
	tc = tens(CPU_INT64, 0, NULL, r2);
	in[0] = &ta;
	in[1] = &tb;
	in[2] = &tc;
	assert_int_equal(run(&t, 11, 3, in, 1, out, err), 0);
	assert_int_equal(out[0].dims[0], 3);
	assert_int_equal(((int64_t *)out[0].data)[2], 4);
	free_outs(out, 1);
}

static void test_constants_and_shape(void **state)
{
	static const float raw[3] = {1.5f, -2.0f, 4.0f};
	static const int64_t vals[3] = {2, 0, 3}, dims3[1] = {3};
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	cpu_tensor tx, out[1];
	const cpu_tensor *in[1] = {&tx};
	char err[ERRLEN];
	tnode t;
	Onnx__AttributeProto *a;
	(void)state;
	tp.data_type = CPU_FLOAT;
	tp.n_dims = 1;
	tp.dims = (int64_t *)dims3;
	tp.has_raw_data = 1;
	tp.raw_data.data = (uint8_t *)raw;
	tp.raw_data.len = sizeof(raw);
	tn(&t, "Constant", 0, 1);
	a = tn_attr(&t, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	a->t = &tp;
	assert_int_equal(run(&t, 13, 0, NULL, 1, out, err), 0);
	assert_memory_equal(out[0].data, raw, sizeof(raw));
	free_outs(out, 1);
	tn(&t, "Constant", 0, 1);
	tn_ints(&t, "value_ints", vals, 3);
	assert_int_equal(run(&t, 13, 0, NULL, 1, out, err), 0);
	assert_true(out[0].dtype == CPU_INT64 && out[0].dims[0] == 3);
	tx = out[0];   /* feed [2, 0, 3] to ConstantOfShape (value int32 7) */
	tp.data_type = CPU_INT32;
	tp.n_dims = 0;
	tp.has_raw_data = 0;
	tp.n_int32_data = 1;
	tp.int32_data = (int32_t[]){7};
	tn(&t, "ConstantOfShape", 1, 1);
	a = tn_attr(&t, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	a->t = &tp;
	assert_int_equal(run(&t, 9, 1, in, 1, out, err), 0);
	assert_true(out[0].dtype == CPU_INT32 && out[0].rank == 3 && cpu_numel(&out[0]) == 0);
	free_outs(out, 1);
	tn(&t, "Shape", 1, 1);
	tn_int(&t, "start", -1);
	assert_int_equal(run(&t, 15, 1, in, 1, out, err), 0);
	assert_true(out[0].dims[0] == 1 && ((int64_t *)out[0].data)[0] == 3);
	free_outs(out, 1);
	free(tx.data);
}

static void test_tensor_from_proto(void **state)
{
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	static const int64_t dims[2] = {2, 2};
	int32_t bits[4] = {0x3c00, 0xc000, 0x7c00, 0};   /* float16 1, -2, inf, 0 */
	char err[ERRLEN];
	cpu_tensor *t;
	(void)state;
	tp.data_type = CPU_FLOAT16;
	tp.n_dims = 2;
	tp.dims = (int64_t *)dims;
	tp.n_int32_data = 4;
	tp.int32_data = bits;
	t = cpu_tensor_from_proto(&tp, err, sizeof(err));
	assert_non_null(t);
	assert_true(cpu_get_f64(CPU_FLOAT16, t->data, 1) == -2.0);
	assert_true(isinf(cpu_get_f64(CPU_FLOAT16, t->data, 2)));
	assert_int_equal((uintptr_t)t->data % 64, 0);
	free(t);
	tp.n_int32_data = 3;   /* too few values */
	assert_null(cpu_tensor_from_proto(&tp, err, sizeof(err)));
	assert_non_null(strstr(err, "3 float16 values for 4 elements"));
	tp.has_raw_data = 1;   /* raw_data of the wrong length */
	tp.raw_data.len = 7;
	tp.raw_data.data = (uint8_t *)bits;
	assert_null(cpu_tensor_from_proto(&tp, err, sizeof(err)));
	tp.data_type = CPU_STRING;
	assert_null(cpu_tensor_from_proto(&tp, err, sizeof(err)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_reshape_family),
		cmocka_unit_test(test_transpose),
		cmocka_unit_test(test_cast),
		cmocka_unit_test(test_reducemean),
		cmocka_unit_test(test_slice_concat_split),
		cmocka_unit_test(test_where_expand_range),
		cmocka_unit_test(test_constants_and_shape),
		cmocka_unit_test(test_tensor_from_proto),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
