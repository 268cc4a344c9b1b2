/*
 * tensor_bytes.h: an ONNX TensorProto's typed repeated field as raw
 * little-endian bytes, the layout raw_data has.
 *
 * A TensorProto holds its values either in raw_data or in the repeated
 * field its dtype maps to; every reader of TensorProtos (the core's loader,
 * the CPU provider's constants, ort-model, the conformance runner) turns
 * the second form into the first through these two calls.
 */
#ifndef ORTMK_PROTO_TENSOR_BYTES_H
#define ORTMK_PROTO_TENSOR_BYTES_H

#include <stddef.h>

#include "onnx.pb-c.h"

/* The repeated field that carries t->data_type when raw_data is absent:
 * *count is how many entries it has, *unit how many raw bytes each entry
 * becomes (ONNX stores 8- and 16-bit types, float16 and bfloat16 bit
 * patterns and bool one per int32_data entry, uint32 in uint64_data, a
 * complex number as two float_data or double_data entries).  -EINVAL for a
 * dtype with no such field (undefined, string, the float8 and 4-bit types). */
int proto_typed_field(const Onnx__TensorProto *t, size_t *count, size_t *unit);

/* Writes the count * unit bytes of t's typed field (proto_typed_field must
 * have accepted t) to out, little-endian whatever the host.  Integers and
 * float bit patterns keep their low unit bytes; a bool entry becomes 0 or 1,
 * as ONNX's reference reader (numpy_helper.to_array) makes it. */
void proto_typed_copy(const Onnx__TensorProto *t, void *out);

#endif
