#version 450
#include "elem.glsl"
// unary: y[i] = f(x[i]) for the elementwise ops of vk_ops_elem.c.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "mathf.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;
	uint op;
	float alpha;
} p;

// Keep in step with enum vk_unary in vk_ops.h.
#define U_RELU 0u
#define U_SIGMOID 1u
#define U_TANH 2u
#define U_SQRT 3u
#define U_ERF 4u
#define U_GELU 5u
#define U_GELU_TANH 6u
#define U_ABS 7u
#define U_NEG 8u
#define U_LEAKY_RELU 9u

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	float v = LD(x[i]);
	float r;
	switch (p.op) {
	case U_RELU: r = v > 0.0 ? v : (isnan(v) ? v : 0.0); break;
	case U_SIGMOID: r = sigmoid_f(v); break;
	case U_TANH: r = tanh_f(v); break;
	case U_SQRT: r = sqrt(v); break;
	case U_ERF: r = erf_f(v); break;
	case U_GELU: r = 0.5 * v * (1.0 + erf_f(v * 0.70710678118654752)); break;
	case U_GELU_TANH:
		r = 0.5 * v * (1.0 + tanh_f(0.79788456080286536 * (v + 0.044715 * v * v * v)));
		break;
	case U_ABS: r = abs(v); break;
	case U_NEG: r = -v; break;
	case U_LEAKY_RELU: r = v >= 0.0 ? v : p.alpha * v; break;
	default: r = v; break;
	}
	y[i] = ST(r);
}
