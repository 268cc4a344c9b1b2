#version 450
#include "elem.glsl"
// reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin, one invocation
// per output element (a NaN wins Max and Min, as on cpu).  The host folds the input into alternating kept and reduced dim
// groups: the output index walks the kept dims (kdims, input strides kstr),
// the loop walks the reduced ones (rdims, rstr).
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;                 // output elements
	uint count;             // elements reduced into each
	uint op;                // 0 sum, 1 mean, 2 max, 3 min
	uint nk, nr;
	uint kdims[6];
	uint kstr[6];
	uint rdims[6];
	uint rstr[6];
} p;

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint base = 0u, rem = i;
	for (int d = int(p.nk) - 1; d >= 0; d--) {
		base += (rem % p.kdims[d]) * p.kstr[d];
		rem /= p.kdims[d];
	}
	float inf = uintBitsToFloat(0x7f800000u);
	float sum = 0.0, best = p.op == 3u ? inf : -inf;
	uint inner = p.nr > 0u ? p.rdims[p.nr - 1u] : 1u;
	uint istr = p.nr > 0u ? p.rstr[p.nr - 1u] : 0u;
	for (uint r = 0u; r < p.count; r += inner) {
		uint off = base, q = r / inner;
		for (int d = int(p.nr) - 2; d >= 0; d--) {
			off += (q % p.rdims[d]) * p.rstr[d];
			q /= p.rdims[d];
		}
		for (uint j = 0u; j < inner; j++) {
			float v = LD(x[off + j * istr]);
			sum += v;
			if (isnan(v) || (p.op == 3u ? v < best : v > best))
				best = isnan(best) ? best : v;
		}
	}
	y[i] = ST(p.op >= 2u ? best : (p.op == 1u ? sum / float(p.count) : sum));
}
