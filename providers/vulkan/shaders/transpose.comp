#version 450
#include "elem.glsl"
// transpose: y[i] = x[source of i]; the host gives the output dims and,
// for each, the input stride of the axis it came from (folded to <= 8).
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;
	uint rank;
	uint dims[8];
	uint istr[8];
} p;

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint src = 0u, rem = i;
	for (int d = int(p.rank) - 1; d >= 0; d--) {
		src += (rem % p.dims[d]) * p.istr[d];
		rem /= p.dims[d];
	}
	y[i] = ST(LD(x[src]));
}
