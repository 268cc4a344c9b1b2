/*
 * Unit tests for proto/tensor_bytes: every dtype's typed repeated field
 * comes out as the raw little-endian bytes numpy gives for the same tensor
 * (expected bytes from onnx.helper.make_tensor + numpy_helper.to_array +
 * tobytes(), onnx 1.12), bool entries other than 0 and 1 become 1 as in
 * numpy_helper, and dtypes with no typed field are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tensor_bytes.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

static Onnx__TensorProto proto(int32_t dtype)
{
	Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;

	t.has_data_type = 1;
	t.data_type = dtype;
	return t;
}

/* Checks the field's size and the bytes proto_typed_copy writes (and that
 * it writes no more). */
static void expect(const Onnx__TensorProto *t, size_t count, size_t unit,
		   const uint8_t *want)
{
	uint8_t out[64];
	size_t c, u;

	assert_int_equal(proto_typed_field(t, &c, &u), 0);
	assert_int_equal(c, count);
	assert_int_equal(u, unit);
	memset(out, 0xa5, sizeof(out));
	proto_typed_copy(t, out);
	assert_memory_equal(out, want, count * unit);
	assert_int_equal(out[count * unit], 0xa5);
}

static void test_float_double(void **state)
{
	Onnx__TensorProto f = proto(DT(FLOAT)), d = proto(DT(DOUBLE));
	float fv[] = { 0.5f, -1.0f };
	double dv[] = { 1.5 };

	(void)state;
	f.n_float_data = 2, f.float_data = fv;
	expect(&f, 2, 4, (const uint8_t[]){ 0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf });
	d.n_double_data = 1, d.double_data = dv;
	expect(&d, 1, 8, (const uint8_t[]){ 0, 0, 0, 0, 0, 0, 0xf8, 0x3f });
}

static void test_small_ints_in_int32(void **state)
{
	Onnx__TensorProto i8 = proto(DT(INT8)), u16 = proto(DT(UINT16));
	Onnx__TensorProto h = proto(DT(FLOAT16)), i32 = proto(DT(INT32));
	int32_t i8v[] = { -1, 2, 127 }, u16v[] = { 65535 }, hv[] = { 0x3c00 }, i32v[] = { -2 };

	(void)state;
	i8.n_int32_data = 3, i8.int32_data = i8v;
	expect(&i8, 3, 1, (const uint8_t[]){ 0xff, 0x02, 0x7f });
	u16.n_int32_data = 1, u16.int32_data = u16v;
	expect(&u16, 1, 2, (const uint8_t[]){ 0xff, 0xff });
	h.n_int32_data = 1, h.int32_data = hv;
	expect(&h, 1, 2, (const uint8_t[]){ 0x00, 0x3c });
	i32.n_int32_data = 1, i32.int32_data = i32v;
	expect(&i32, 1, 4, (const uint8_t[]){ 0xfe, 0xff, 0xff, 0xff });
}

static void test_bool_is_zero_or_one(void **state)
{
	Onnx__TensorProto b = proto(DT(BOOL));
	int32_t bv[] = { 0, 1, 2, 256, -1 };

	(void)state;
	b.n_int32_data = 5, b.int32_data = bv;
	expect(&b, 5, 1, (const uint8_t[]){ 0, 1, 1, 1, 1 });
}

static void test_64_bit_fields(void **state)
{
	Onnx__TensorProto l = proto(DT(INT64)), u32 = proto(DT(UINT32)), u64 = proto(DT(UINT64));
	int64_t lv[] = { 1, -2 };
	uint64_t u32v[] = { 0xdeadbeef }, u64v[] = { 0x0102030405060708u };

	(void)state;
	l.n_int64_data = 2, l.int64_data = lv;
	expect(&l, 2, 8, (const uint8_t[]){ 1, 0, 0, 0, 0, 0, 0, 0,
					     0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff });
	u32.n_uint64_data = 1, u32.uint64_data = u32v;
	expect(&u32, 1, 4, (const uint8_t[]){ 0xef, 0xbe, 0xad, 0xde });
	u64.n_uint64_data = 1, u64.uint64_data = u64v;
	expect(&u64, 1, 8, (const uint8_t[]){ 8, 7, 6, 5, 4, 3, 2, 1 });
}

/* complex64 is two float_data entries per element (real, imaginary). */
static void test_complex(void **state)
{
	Onnx__TensorProto c = proto(DT(COMPLEX64));
	float cv[] = { 1.0f, -2.0f };

	(void)state;
	c.n_float_data = 2, c.float_data = cv;
	expect(&c, 2, 4, (const uint8_t[]){ 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0 });
}

static void test_no_typed_field(void **state)
{
	static const int32_t refused[] = { DT(UNDEFINED), DT(STRING), 17, 21, 99, -1 };
	uint8_t out[4] = { 0xa5, 0xa5, 0xa5, 0xa5 };
	size_t c, u;

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		Onnx__TensorProto t = proto(refused[i]);

		assert_int_equal(proto_typed_field(&t, &c, &u), -EINVAL);
		proto_typed_copy(&t, out);   /* writes nothing */
		assert_int_equal(out[0], 0xa5);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_float_double),
		cmocka_unit_test(test_small_ints_in_int32),
		cmocka_unit_test(test_bool_is_zero_or_one),
		cmocka_unit_test(test_64_bit_fields),
		cmocka_unit_test(test_complex),
		cmocka_unit_test(test_no_typed_field),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
