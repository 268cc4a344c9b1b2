#version 450
#include "elem.glsl"
// gemm: y[b] = alpha * op(A[b]) x op(B[b]) + beta * bias, batched with
// broadcasting batch dims.  Tiled: a 16x8 workgroup computes a 32x32 block
// of y (each invocation 2 columns x 4 rows) from 32x16 and 16x32 tiles of A
// and B staged in shared memory.  Transposes are strides: A[m][k] is
// a[a_off + m * a_rs + k * a_cs], likewise B, and the bias (stride 0 where
// it broadcasts).
layout(local_size_x = 16, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer A { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B { ELEM b[]; };
layout(std430, binding = 2) readonly buffer Bias { ELEM bias[]; };
layout(std430, binding = 3) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint M, N, K;
	uint a_rs, a_cs, b_rs, b_cs;
	uint c_rs, c_cs;
	uint flags;             // 1: add beta * bias
	float alpha, beta;
	uint nb;                // batch dims (<= 4), outermost first
	uint bdims[4];
	uint a_bs[4];
	uint b_bs[4];
} p;

#define TM 32
#define TN 32
#define TK 16

shared float As[TK][TM + 1];
shared float Bs[TK][TN + 1];

void main()
{
	uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
	uint tid = ty * 16u + tx;
	uint row0 = gl_WorkGroupID.y * TM, col0 = gl_WorkGroupID.x * TN;
	uint batch = gl_WorkGroupID.z, rem = batch, a_off = 0u, b_off = 0u;
	for (int d = int(p.nb) - 1; d >= 0; d--) {
		uint k = rem % p.bdims[d];
		rem /= p.bdims[d];
		a_off += k * p.a_bs[d];
		b_off += k * p.b_bs[d];
	}
	float acc[4][2];
	for (int i = 0; i < 4; i++)
		acc[i][0] = acc[i][1] = 0.0;
	for (uint k0 = 0u; k0 < p.K; k0 += TK) {
		for (uint e = tid; e < TM * TK; e += 128u) {
			uint r = e / TK, kk = e % TK, gr = row0 + r, gk = k0 + kk;
			As[kk][r] = gr < p.M && gk < p.K ? LD(a[a_off + gr * p.a_rs + gk * p.a_cs]) : 0.0;
		}
		for (uint e = tid; e < TK * TN; e += 128u) {
			uint kk = e / TN, cc = e % TN, gk = k0 + kk, gc = col0 + cc;
			Bs[kk][cc] = gk < p.K && gc < p.N ? LD(b[b_off + gk * p.b_rs + gc * p.b_cs]) : 0.0;
		}
		barrier();
		for (uint kk = 0u; kk < TK; kk++) {
			float b0 = Bs[kk][tx], b1 = Bs[kk][tx + 16u];
			for (uint i = 0u; i < 4u; i++) {
				float av = As[kk][ty + 8u * i];
				acc[i][0] += av * b0;
				acc[i][1] += av * b1;
			}
		}
		barrier();
	}
	uint y_off = batch * p.M * p.N;
	for (uint i = 0u; i < 4u; i++) {
		uint r = row0 + ty + 8u * i;
		for (uint j = 0u; j < 2u; j++) {
			uint c = col0 + tx + 16u * j;
			if (r >= p.M || c >= p.N)
				continue;
			float v = p.alpha * acc[i][j];
			if ((p.flags & 1u) != 0u)
				v += p.beta * LD(bias[r * p.c_rs + c * p.c_cs]);
			y[y_off + r * p.N + c] = ST(v);
		}
	}
}
