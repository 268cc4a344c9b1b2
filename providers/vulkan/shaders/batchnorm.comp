#version 450
#include "elem.glsl"
// batchnorm: BatchNormalization in inference mode, y = (x - mean[c]) /
// sqrt(var[c] + eps) * scale[c] + bias[c].  The launch is 2-D: x runs over
// the `inner` elements of one (image, channel) plane, y and z over the
// planes, so the channel is found once per workgroup, not per element.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) readonly buffer S { ELEM scale[]; };
layout(std430, binding = 2) readonly buffer Bi { ELEM bias[]; };
layout(std430, binding = 3) readonly buffer M { ELEM mean[]; };
layout(std430, binding = 4) readonly buffer V { ELEM var_[]; };
layout(std430, binding = 5) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint planes;
	uint C;
	uint inner;
	float eps;
} p;

void main()
{
	uint plane = gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
	uint j = gl_GlobalInvocationID.x;
	if (plane >= p.planes || j >= p.inner)
		return;
	uint c = plane % p.C, i = plane * p.inner + j;
	float a = LD(scale[c]) / sqrt(LD(var_[c]) + p.eps);
	y[i] = ST((LD(x[i]) - LD(mean[c])) * a + LD(bias[c]));
}
