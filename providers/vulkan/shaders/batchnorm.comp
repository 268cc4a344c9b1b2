#version 450
// batchnorm: BatchNormalization in inference mode, y = (x - mean[c]) /
// sqrt(var[c] + eps) * scale[c] + bias[c], c the channel of element i of
// an [N, C, inner] tensor.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float scale[]; };
layout(std430, binding = 2) readonly buffer Bi { float bias[]; };
layout(std430, binding = 3) readonly buffer M { float mean[]; };
layout(std430, binding = 4) readonly buffer V { float var_[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
	uint n;
	uint C;
	uint inner;
	float eps;
} p;

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint c = (i / p.inner) % p.C;
	y[i] = (x[i] - mean[c]) / sqrt(var_[c] + p.eps) * scale[c] + bias[c];
}
