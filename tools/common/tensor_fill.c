/*
 * tensor_fill: random tensor contents for ort-run (see tensor_fill.h).
 *
 * The distributions are documented in `ort-run --help`; integers stay in
 * [0, 8) so that a generated tensor used as Gather indices or a small
 * shape is valid for most models.
 */
#include <math.h>
#include <string.h>

#include "tensor_fill.h"

uint64_t tfill_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint16_t tfill_float_to_half(float f)
{
	uint32_t x, mant, h, rem, halfway, shift;

	memcpy(&x, &f, sizeof x);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	int exp = (int)((x >> 23) & 0xff);
	mant = x & 0x7fffff;
	if (exp == 0xff)
		return sign | 0x7c00 | (mant ? 0x200 : 0);
	int e = exp - 127 + 15;
	if (e >= 0x1f)
		return sign | 0x7c00;
	if (e <= 0) {
		/* Subnormal half: shift the mantissa, implicit bit included,
		 * so that its unit is 2^-24. */
		if (e < -10)
			return sign;
		mant |= 0x800000;
		shift = (uint32_t)(14 - e);
		h = mant >> shift;
		rem = mant & ((1u << shift) - 1);
		halfway = 1u << (shift - 1);
	} else {
		h = ((uint32_t)e << 10) | (mant >> 13);
		rem = mant & 0x1fff;
		halfway = 0x1000;
	}
	/* A carry out of the mantissa correctly bumps the exponent (up to
	 * infinity). */
	if (rem > halfway || (rem == halfway && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

float tfill_half_to_float(uint16_t h)
{
	int exp = (h >> 10) & 0x1f;
	float m = (float)(h & 0x3ff), v;

	if (exp == 0)
		v = ldexpf(m, -24);
	else if (exp == 31)
		v = m != 0.0f ? NAN : INFINITY;
	else
		v = ldexpf(m + 1024.0f, exp - 25);
	return (h & 0x8000) ? -v : v;
}

uint16_t tfill_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof x);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float tfill_bf16_to_float(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, sizeof f);
	return f;
}

bool tfill_random(void *data, ortmk_dtype t, size_t n, uint64_t *state)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = tfill_next(state);
		/* 24 random bits scaled to [0, 2) and shifted: exact in float. */
		float u = (float)(r >> 40) * 0x1p-23f - 1.0f;
		uint8_t small = (uint8_t)(r % 8);
		switch (t) {
		case ORTMK_FLOAT: ((float *)data)[i] = u; break;
		case ORTMK_DOUBLE: ((double *)data)[i] = (double)(r >> 11) * 0x1p-52 - 1.0; break;
		case ORTMK_FLOAT16: ((uint16_t *)data)[i] = tfill_float_to_half(u); break;
		case ORTMK_BFLOAT16: ((uint16_t *)data)[i] = tfill_float_to_bf16(u); break;
		case ORTMK_BOOL: ((uint8_t *)data)[i] = (uint8_t)(r >> 63); break;
		case ORTMK_INT8: case ORTMK_UINT8: ((uint8_t *)data)[i] = small; break;
		case ORTMK_INT16: case ORTMK_UINT16: ((uint16_t *)data)[i] = small; break;
		case ORTMK_INT32: case ORTMK_UINT32: ((uint32_t *)data)[i] = small; break;
		case ORTMK_INT64: case ORTMK_UINT64: ((uint64_t *)data)[i] = small; break;
		default: return false;
		}
	}
	return true;
}

double tfill_element(const void *data, ortmk_dtype t, size_t i)
{
	switch (t) {
	case ORTMK_FLOAT: return ((const float *)data)[i];
	case ORTMK_DOUBLE: return ((const double *)data)[i];
	case ORTMK_FLOAT16: return tfill_half_to_float(((const uint16_t *)data)[i]);
	case ORTMK_BFLOAT16: return tfill_bf16_to_float(((const uint16_t *)data)[i]);
	case ORTMK_BOOL: case ORTMK_UINT8: return ((const uint8_t *)data)[i];
	case ORTMK_INT8: return ((const int8_t *)data)[i];
	case ORTMK_INT16: return ((const int16_t *)data)[i];
	case ORTMK_UINT16: return ((const uint16_t *)data)[i];
	case ORTMK_INT32: return ((const int32_t *)data)[i];
	case ORTMK_UINT32: return ((const uint32_t *)data)[i];
	case ORTMK_INT64: return (double)((const int64_t *)data)[i];
	case ORTMK_UINT64: return (double)((const uint64_t *)data)[i];
	default: return NAN;
	}
}
