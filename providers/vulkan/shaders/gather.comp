#version 450
#include "elem.glsl"
// gather: Gather along one axis of an (outer, axis, inner) view with
// indices already made non-negative and checked by the host.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;
	uint nidx;
	uint inner;
	uint axis_len;
} p;

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint r = i % p.inner, j = (i / p.inner) % p.nidx, o = i / (p.inner * p.nidx);
	y[i] = ST(LD(x[(o * p.axis_len + uint(idx[j])) * p.inner + r]));
}
