#version 450
#include "elem.glsl"
// layernorm: LayerNormalization over the trailing `n` elements of each row,
// one workgroup of 64 per row, two passes (mean, then the variance of
// x - mean).  Scale and bias broadcast over a trailing part of the row
// (index j % sn); Mean and InvStdDev are written when asked for.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) readonly buffer S { ELEM scale[]; };
layout(std430, binding = 2) readonly buffer Bi { ELEM bias[]; };
layout(std430, binding = 3) writeonly buffer Y { ELEM y[]; };
layout(std430, binding = 4) writeonly buffer Mo { float mean_out[]; };
layout(std430, binding = 5) writeonly buffer Io { float invstd_out[]; };
layout(push_constant) uniform P {
	uint rows;
	uint n;
	uint sn, bn;
	float eps;
	uint flags;             // 1: bias, 2: write Mean, 4: write InvStdDev
} p;

shared float red[64];

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
	uint t = gl_LocalInvocationID.x, base = row * p.n;
	float s = 0.0;
	for (uint j = t; j < p.n; j += 64u)
		s += LD(x[base + j]);
	float mean = reduce_sum(s) / float(p.n);
	float q = 0.0;
	for (uint j = t; j < p.n; j += 64u) {
		float d = LD(x[base + j]) - mean;
		q += d * d;
	}
	float inv = 1.0 / sqrt(reduce_sum(q) / float(p.n) + p.eps);
	for (uint j = t; j < p.n; j += 64u) {
		float v = (LD(x[base + j]) - mean) * inv * LD(scale[j % p.sn]);
		if ((p.flags & 1u) != 0u)
			v += LD(bias[j % p.bn]);
		y[base + j] = ST(v);
	}
	if (t == 0u && (p.flags & 2u) != 0u)
		mean_out[row] = mean;
	if (t == 0u && (p.flags & 4u) != 0u)
		invstd_out[row] = inv;
}
