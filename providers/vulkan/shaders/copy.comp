#version 450
#include "elem.glsl"
// copy: blocks of `blk` elements of x into y, block b at b * dst_blk +
// dst_off (Concat writes each input into its slice this way).
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;
	uint blk;
	uint dst_blk;
	uint dst_off;
} p;

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	y[(i / p.blk) * p.dst_blk + p.dst_off + i % p.blk] = ST(LD(x[i]));
}
