/*
 * Unit tests for onnxrules/dims: broadcasting (clashes, symbols, rank
 * limit) and the view ops' dims (Reshape's 0 / -1 / allowzero, Flatten,
 * Squeeze, Unsqueeze) as the core and the device providers compute them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dims.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

static void dims_equal(const int64_t *got, int n, const int64_t *want)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(got[i], want[i]);
}

static void test_broadcast(void **state)
{
	int64_t o[ONNX_MAX_RANK + 4], big[ONNX_MAX_RANK + 1];

	(void)state;
	assert_int_equal(onnx_broadcast(3, D(2, 1, 3), 2, D(4, 1), o), 3);
	dims_equal(o, 3, D(2, 4, 3));
	assert_int_equal(onnx_broadcast(0, NULL, 2, D(5, 6), o), 2);
	dims_equal(o, 2, D(5, 6));
	/* known dims that are neither equal nor 1 */
	assert_int_equal(onnx_broadcast(2, D(2, 3), 1, D(4), o), -1);
	assert_int_equal(onnx_broadcast(1, D(0), 1, D(2), o), -1);
	assert_int_equal(onnx_broadcast(1, D(0), 1, D(1), o), 1);
	assert_int_equal(o[0], 0);
	/* symbols: against a known n it is n, against itself itself, two
	 * different ones give a fresh unknown */
	assert_int_equal(onnx_broadcast(2, D(-5, 3), 2, D(4, 1), o), 2);
	dims_equal(o, 2, D(4, 3));
	assert_int_equal(onnx_broadcast(2, D(-5, -6), 2, D(-5, -7), o), 2);
	dims_equal(o, 2, D(-5, ONNX_DIM_NEW));
	for (int i = 0; i < ONNX_MAX_RANK + 1; i++)
		big[i] = 1;
	assert_int_equal(onnx_broadcast(ONNX_MAX_RANK + 1, big, 1, D(1), o), -1);
}

static void test_reshape(void **state)
{
	int64_t o[8];
	char err[160];
	int neg;

	(void)state;
	/* 0 copies the input's dim, -1 is inferred */
	assert_int_equal(onnx_reshape_dims(3, D(2, 3, 4), 24, D(0, -1), 2, 0, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(2, 12));
	/* allowzero: a 0 is a 0 */
	assert_int_equal(onnx_reshape_dims(2, D(3, 0), 0, D(0, 3), 2, 1, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(0, 3));
	assert_int_equal(onnx_reshape_dims(2, D(3, 0), 0, D(0, -1), 2, 1, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "cannot reshape 0 elements into a multiple of 0");
	/* without allowzero the same copies the 3 */
	assert_int_equal(onnx_reshape_dims(2, D(3, 0), 0, D(0, 0), 2, 0, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(3, 0));
	assert_int_equal(onnx_reshape_dims(1, D(6), 6, D(0, 0), 2, 0, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "shape[1] = 0 copies a dim the input lacks");
	assert_int_equal(onnx_reshape_dims(1, D(6), 6, D(-1, -1), 2, 0, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "shape[1] = -1 is invalid (one -1 at most)");
	assert_int_equal(onnx_reshape_dims(1, D(6), 6, D(4, -1), 2, 0, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_int_equal(onnx_reshape_dims(1, D(6), 6, D(4), 1, 0, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "cannot reshape 6 elements to 4 elements");
	assert_int_equal(onnx_reshape_dims(1, D(6), 6, NULL, -1, 0, o, err, sizeof(err)),
			 ONNX_E_INVALID);
	/* the spec alone, input rank unknown (the core) */
	assert_int_equal(onnx_reshape_spec(-1, NULL, D(0, -1, 5), 3, 0, o, &neg, err, sizeof(err)), 0);
	assert_int_equal(neg, 1);
	dims_equal(o, 3, D(ONNX_DIM_NEW, ONNX_DIM_NEW, 5));
}

static void test_flatten(void **state)
{
	int64_t o[2];
	char err[160];

	(void)state;
	assert_int_equal(onnx_flatten_dims(3, D(2, 3, 4), 1, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(2, 12));
	assert_int_equal(onnx_flatten_dims(3, D(2, 3, 4), -1, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(6, 4));
	assert_int_equal(onnx_flatten_dims(3, D(2, 3, 4), 3, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(24, 1));
	assert_int_equal(onnx_flatten_dims(3, D(2, 3, 4), 0, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(1, 24));
	assert_int_equal(onnx_flatten_dims(3, D(2, 3, 4), 4, o, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "axis 4 out of range for rank 3");
	/* a symbol alone survives, with others it is unknown */
	assert_int_equal(onnx_flatten_dims(3, D(-7, 1, 4), 2, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(-7, 4));
	assert_int_equal(onnx_flatten_dims(3, D(-7, 2, 4), 2, o, err, sizeof(err)), 0);
	dims_equal(o, 2, D(ONNX_DIM_NEW, 4));
}

static void test_squeeze(void **state)
{
	int64_t o[8];
	char err[160];
	int r;

	(void)state;
	assert_int_equal(onnx_squeeze_dims(4, D(1, 3, 1, 2), D(-2), 1, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 3);
	dims_equal(o, 3, D(1, 3, 2));
	/* absent or empty: every size-1 dim; a repeat is allowed */
	assert_int_equal(onnx_squeeze_dims(4, D(1, 3, 1, 2), NULL, -1, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 2);
	assert_int_equal(onnx_squeeze_dims(4, D(1, 3, 1, 2), NULL, 0, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 2);
	assert_int_equal(onnx_squeeze_dims(2, D(1, 3), D(0, -2), 2, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 1);
	assert_int_equal(onnx_squeeze_dims(2, D(1, 3), D(1), 1, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "cannot squeeze dim 1 of size 3");
	assert_int_equal(onnx_squeeze_dims(2, D(1, 3), D(2), 1, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "axis 2 out of range for rank 2");
	/* unknown dims: listed ones are taken as 1; without axes, unknown */
	assert_int_equal(onnx_squeeze_dims(2, D(-3, 3), D(0), 1, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 1);
	assert_int_equal(onnx_squeeze_dims(2, D(-3, 3), NULL, -1, o, &r, err, sizeof(err)), 1);
}

static void test_unsqueeze(void **state)
{
	int64_t o[ONNX_MAX_RANK], ones[ONNX_MAX_RANK];
	char err[160];
	int r;

	(void)state;
	assert_int_equal(onnx_unsqueeze_dims(2, D(3, 4), D(0, -1), 2, o, &r, err, sizeof(err)), 0);
	assert_int_equal(r, 4);
	dims_equal(o, 4, D(1, 3, 4, 1));
	assert_int_equal(onnx_unsqueeze_dims(2, D(3, 4), D(1, -3), 2, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "axis -3 repeated");
	assert_int_equal(onnx_unsqueeze_dims(2, D(3, 4), D(3), 1, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "axis 3 out of range for rank 3");
	assert_int_equal(onnx_unsqueeze_dims(2, D(3, 4), NULL, -1, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "axes are required");
	for (int i = 0; i < ONNX_MAX_RANK; i++)
		ones[i] = 1;
	assert_int_equal(onnx_unsqueeze_dims(ONNX_MAX_RANK, ones, D(0), 1, o, &r, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "output rank 17 exceeds 16");
}

static void test_axis_and_prod(void **state)
{
	(void)state;
	assert_int_equal(onnx_axis(-1, 3), 2);
	assert_int_equal(onnx_axis(3, 3), -1);
	assert_int_equal(onnx_axis(-4, 3), -1);
	assert_int_equal(onnx_axis(0, 0), -1);
	assert_int_equal(onnx_prod(D(2, 3), 2), 6);
	assert_int_equal(onnx_prod(D(2, -5), 2), ONNX_DIM_NEW);
	assert_int_equal(onnx_prod(D(0, -5), 2), 0);
	assert_int_equal(onnx_prod(D(INT64_MAX, 2), 2), ONNX_DIM_NEW);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_broadcast),
		cmocka_unit_test(test_reshape),
		cmocka_unit_test(test_flatten),
		cmocka_unit_test(test_squeeze),
		cmocka_unit_test(test_unsqueeze),
		cmocka_unit_test(test_axis_and_prod),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
