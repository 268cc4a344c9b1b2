/*
 * tensor_fill: seeded random tensor contents and element reads for every
 * numeric ONNX dtype, with float <-> float16/bfloat16 conversion.  Used by
 * ort-run to generate missing inputs and to print outputs.
 */
#ifndef ORTMK_TENSOR_FILL_H
#define ORTMK_TENSOR_FILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ortmk/ortmk.h>

/* The next value of a splitmix64 stream; any state is a valid seed. */
uint64_t tfill_next(uint64_t *state);
/* Fills n elements: floating types uniform in [-1, 1), integer types
 * uniform in [0, 8), bool uniform.  False for types it cannot make
 * (string, undefined). */
bool tfill_random(void *data, ortmk_dtype t, size_t n, uint64_t *state);
/* Element i as a double (NaN for types it cannot read). */
double tfill_element(const void *data, ortmk_dtype t, size_t i);

/* IEEE 754 half, round to nearest even, subnormals and inf/nan kept. */
uint16_t tfill_float_to_half(float f);
float tfill_half_to_float(uint16_t h);
uint16_t tfill_float_to_bf16(float f);
float tfill_bf16_to_float(uint16_t b);

#endif
