#version 450
#include "elem.glsl"
// binary: c = a OP b with numpy broadcasting.  The host folds the shapes
// to at most 8 dims; sa/sb are element strides of a and b (0 where a dim
// broadcasts).
layout(local_size_x = 64) in;
#include "common.glsl"
#include "mathf.glsl"

layout(std430, binding = 0) readonly buffer A { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B { ELEM b[]; };
layout(std430, binding = 2) writeonly buffer C { ELEM c[]; };
layout(push_constant) uniform P {
	uint n;
	uint op;
	uint rank;
	uint pad;
	uint dims[8];
	uint sa[8];
	uint sb[8];
} p;

// Keep in step with enum vk_binary in vk_ops.h.
#define B_ADD 0u
#define B_SUB 1u
#define B_MUL 2u
#define B_DIV 3u
#define B_POW 4u

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint ia = 0u, ib = 0u, rem = i;
	if (p.rank == 1u) {
		// Same shapes, or a scalar: no division.
		ia = p.sa[0] != 0u ? i : 0u;
		ib = p.sb[0] != 0u ? i : 0u;
	} else {
		for (int d = int(p.rank) - 1; d >= 0; d--) {
			uint k = rem % p.dims[d];
			rem /= p.dims[d];
			ia += k * p.sa[d];
			ib += k * p.sb[d];
		}
	}
	float x = LD(a[ia]), y = LD(b[ib]), r;
	switch (p.op) {
	case B_ADD: r = x + y; break;
	case B_SUB: r = x - y; break;
	case B_MUL: r = x * y; break;
	case B_DIV: r = div_f(x, y); break;
	default: r = pow_f(x, y); break;
	}
	c[i] = ST(r);
}
