#version 450
#include "elem.glsl"
// softmax: Softmax and LogSoftmax along one axis of an (outer, n, inner)
// view, one workgroup of 64 per row (row = (outer, inner) pair): max,
// then the sum of exp(x - max), then the outputs.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint rows;
	uint n;
	uint inner;
	uint log_;              // 1: LogSoftmax
} p;

shared float red[64];

float reduce_max(float v)
{
	uint t = gl_LocalInvocationID.x;
	red[t] = v;
	barrier();
	for (uint s = 32u; s > 0u; s >>= 1) {
		if (t < s)
			red[t] = max(red[t], red[t + s]);
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}

float reduce_sum(float v)
{
	uint t = gl_LocalInvocationID.x;
	red[t] = v;
	barrier();
	for (uint s = 32u; s > 0u; s >>= 1) {
		if (t < s)
			red[t] += red[t + s];
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}

void main()
{
	uint row = flat_group();
	if (row >= p.rows)
		return;
	uint t = gl_LocalInvocationID.x;
	uint base = (row / p.inner) * p.n * p.inner + row % p.inner;
	float m = -uintBitsToFloat(0x7f800000u);
	for (uint j = t; j < p.n; j += 64u)
		m = max(m, LD(x[base + j * p.inner]));
	m = reduce_max(m);
	float s = 0.0;
	for (uint j = t; j < p.n; j += 64u)
		s += exp(LD(x[base + j * p.inner]) - m);
	s = reduce_sum(s);
	float ls = log(s);
	for (uint j = t; j < p.n; j += 64u) {
		float v = LD(x[base + j * p.inner]) - m;
		y[base + j * p.inner] = ST(p.log_ != 0u ? v - ls : exp(v) / s);
	}
}
