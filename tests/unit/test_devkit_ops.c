/*
 * Unit tests for the device kit's op halves (providers/devkit/dk_ops.c,
 * dk_load.c): an op table served by one entry per family (dk_op.names)
 * and by one entry per op, opset ranges and domains in dk_op_in; the float
 * dtype check the capability queries share; the reduce codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dk_ops.h"

static int run_a(dk_ctx *c)
{
	(void)c;
	return 0;
}

static int run_b(dk_ctx *c)
{
	(void)c;
	return 1;
}

static const dk_op family[] = {
	{.names = dk_unary_ops, .run = run_a},
	{.names = dk_reduce_ops, .run = run_b},
	{0},
};

static const dk_op single[] = {
	{"Conv", 11, 22, NULL, NULL, run_b, NULL, 0, NULL, NULL},
	{0},
};

static void test_op_in(void **state)
{
	const dk_op *const tables[] = {family, single};

	(void)state;
	assert_ptr_equal(dk_op_in(tables, 2, "Relu", "", 14), &family[0]);
	assert_ptr_equal(dk_op_in(tables, 2, "LeakyRelu", "ai.onnx", 6), &family[0]);
	assert_ptr_equal(dk_op_in(tables, 2, "ReduceMin", NULL, 18), &family[1]);
	assert_ptr_equal(dk_op_in(tables, 2, "Conv", "", 11), &single[0]);
	/* Gelu only from opset 20; Conv from 11; nothing past 22 */
	assert_null(dk_op_in(tables, 2, "Gelu", "", 19));
	assert_non_null(dk_op_in(tables, 2, "Gelu", "", 20));
	assert_null(dk_op_in(tables, 2, "Conv", "", 10));
	assert_null(dk_op_in(tables, 2, "Relu", "", 23));
	assert_null(dk_op_in(tables, 2, "Relu", "com.microsoft", 14));
	assert_null(dk_op_in(tables, 2, "Add", "", 14));
}

static Onnx__NodeProto node(char **inputs, size_t n)
{
	Onnx__NodeProto p = ONNX__NODE_PROTO__INIT;

	p.input = inputs;
	p.n_input = n;
	return p;
}

static void test_need_float(void **state)
{
	char *in[] = {"a", "", "c"}, why[128];
	Onnx__NodeProto p = node(in, 3);

	(void)state;
	assert_true(dk_need_float(&p, (int32_t[]){DK_FLOAT, 0, DK_FLOAT}, 3, 0, -1, 1, why, sizeof(why)));
	/* an omitted input is not checked; a float16 one only where allowed */
	assert_true(dk_need_float(&p, (int32_t[]){DK_FLOAT16, 7, DK_FLOAT16}, 3, 0, -1, 1, why,
				  sizeof(why)));
	assert_false(dk_need_float(&p, (int32_t[]){DK_FLOAT16, 0, DK_FLOAT16}, 3, 0, -1, 0, why,
				   sizeof(why)));
	assert_string_equal(why, "input 0 is dtype 10 (float32 only)");
	assert_false(dk_need_float(&p, (int32_t[]){DK_FLOAT, 0, DK_FLOAT16}, 3, 0, -1, 1, why,
				   sizeof(why)));
	assert_string_equal(why, "inputs mix float32 and float16");
	assert_false(dk_need_float(&p, (int32_t[]){DK_FLOAT, 0, DK_INT64}, 3, 0, -1, 1, why,
				   sizeof(why)));
	/* only [first, first + count) */
	assert_true(dk_need_float(&p, (int32_t[]){DK_FLOAT, 0, DK_INT64}, 3, 0, 1, 1, why,
				  sizeof(why)));
}

static void test_codes(void **state)
{
	(void)state;
	assert_int_equal(dk_reduce_code("ReduceSum"), 0);
	assert_int_equal(dk_reduce_code("ReduceMin"), 3);
	assert_int_equal(dk_reduce_code("ReduceProd"), -1);
	assert_int_equal(dk_reduce_axes_since("ReduceSum"), 13);
	assert_int_equal(dk_reduce_axes_since("ReduceMax"), 18);
	assert_int_equal(dk_binary_code("Pow"), 4);
	assert_int_equal(dk_esz(DK_FLOAT16), 2);
	assert_int_equal(dk_esz(DK_INT64), 8);
	assert_true(dk_dev_dtype(DK_FLOAT16));
	assert_false(dk_dev_dtype(DK_INT64));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_op_in),
		cmocka_unit_test(test_need_float),
		cmocka_unit_test(test_codes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
