/*
 * tensor_bytes.c: a TensorProto's typed repeated field as raw little-endian
 * bytes (see tensor_bytes.h).  Called by the core's loader (core/graph.c),
 * the CPU provider (cpu_tensor_from_proto), ort-model and the conformance
 * runner, so that all four read the typed form the same way.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tensor_bytes.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

int proto_typed_field(const Onnx__TensorProto *t, size_t *count, size_t *unit)
{
	switch (t->data_type) {
	case DT(FLOAT): case DT(COMPLEX64):
		*count = t->n_float_data, *unit = 4;
		return 0;
	case DT(INT32):
		*count = t->n_int32_data, *unit = 4;
		return 0;
	case DT(INT16): case DT(UINT16): case DT(FLOAT16): case DT(BFLOAT16):
		*count = t->n_int32_data, *unit = 2;
		return 0;
	case DT(INT8): case DT(UINT8): case DT(BOOL):
		*count = t->n_int32_data, *unit = 1;
		return 0;
	case DT(INT64):
		*count = t->n_int64_data, *unit = 8;
		return 0;
	case DT(DOUBLE): case DT(COMPLEX128):
		*count = t->n_double_data, *unit = 8;
		return 0;
	case DT(UINT32):
		*count = t->n_uint64_data, *unit = 4;
		return 0;
	case DT(UINT64):
		*count = t->n_uint64_data, *unit = 8;
		return 0;
	}
	return -EINVAL;
}

/* Entry i of the typed field as a 64-bit pattern whose low bytes are the
 * raw value. */
static uint64_t typed_bits(const Onnx__TensorProto *t, size_t i)
{
	uint32_t b32;
	uint64_t b64;

	switch (t->data_type) {
	case DT(FLOAT): case DT(COMPLEX64):
		memcpy(&b32, &t->float_data[i], 4);
		return b32;
	case DT(INT64):
		return (uint64_t)t->int64_data[i];
	case DT(DOUBLE): case DT(COMPLEX128):
		memcpy(&b64, &t->double_data[i], 8);
		return b64;
	case DT(UINT32): case DT(UINT64):
		return t->uint64_data[i];
	case DT(BOOL):
		return t->int32_data[i] != 0;
	}
	return (uint32_t)t->int32_data[i];
}

void proto_typed_copy(const Onnx__TensorProto *t, void *out)
{
	uint8_t *o = out;
	size_t count, unit, i, b;
	uint64_t bits;

	if (proto_typed_field(t, &count, &unit) < 0)
		return;
	/* Byte by byte so the layout is little-endian whatever the host. */
	for (i = 0; i < count; i++) {
		bits = typed_bits(t, i);
		for (b = 0; b < unit; b++)
			o[i * unit + b] = (uint8_t)(bits >> (8 * b));
	}
}
