#version 450
#include "elem.glsl"
// conv: N-D convolution (1 to 3 spatial dims, as D x H x W with unused dims
// 1) with groups, pads, strides and dilations, as an implicit GEMM per
// (image, group): Y[co][o] = sum_k W[co][k] * X_col[k][o] (+ bias[co]),
// k running over (input channel of the group, kd, kh, kw) and o over the
// output positions; X_col is gathered from x on the fly with zero padding.
// Same tiling as gemm.comp: 32 output channels x 32 positions per
// workgroup.
layout(local_size_x = 16, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) readonly buffer W { ELEM w[]; };
layout(std430, binding = 2) readonly buffer Bias { ELEM bias[]; };
layout(std430, binding = 3) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint G, Cig, Cog;
	uint D, H, W;
	uint OD, OH, OW;
	uint KD, KH, KW;
	uint SD, SH, SW;
	int PD, PH, PW;
	uint DD, DH, DW;
	uint flags;             // 1: bias
} p;

#define TM 32
#define TN 32
#define TK 16

shared float As[TK][TM + 1];
shared float Bs[TK][TN + 1];

float x_col(uint x_base, uint k, uint o)
{
	uint kvol = p.KD * p.KH * p.KW;
	uint ci = k / kvol, kr = k % kvol;
	uint kd = kr / (p.KH * p.KW), kh = (kr / p.KW) % p.KH, kw = kr % p.KW;
	uint od = o / (p.OH * p.OW), oh = (o / p.OW) % p.OH, ow = o % p.OW;
	int id = int(od * p.SD + kd * p.DD) - p.PD;
	int ih = int(oh * p.SH + kh * p.DH) - p.PH;
	int iw = int(ow * p.SW + kw * p.DW) - p.PW;
	if (id < 0 || ih < 0 || iw < 0 || id >= int(p.D) || ih >= int(p.H) || iw >= int(p.W))
		return 0.0;
	return LD(x[x_base + ((ci * p.D + uint(id)) * p.H + uint(ih)) * p.W + uint(iw)]);
}

void main()
{
	uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
	uint tid = ty * 16u + tx;
	uint O = p.OD * p.OH * p.OW, K = p.Cig * p.KD * p.KH * p.KW;
	uint row0 = gl_WorkGroupID.y * TM, col0 = gl_WorkGroupID.x * TN;
	uint n = gl_WorkGroupID.z / p.G, g = gl_WorkGroupID.z % p.G;
	uint Ci = p.Cig * p.G, Co = p.Cog * p.G;
	uint x_base = (n * Ci + g * p.Cig) * p.D * p.H * p.W;
	uint w_base = g * p.Cog * K;
	float acc[4][2];
	for (int i = 0; i < 4; i++)
		acc[i][0] = acc[i][1] = 0.0;
	for (uint k0 = 0u; k0 < K; k0 += TK) {
		for (uint e = tid; e < TM * TK; e += 128u) {
			uint r = e / TK, kk = e % TK, gr = row0 + r, gk = k0 + kk;
			As[kk][r] = gr < p.Cog && gk < K ? LD(w[w_base + gr * K + gk]) : 0.0;
		}
		for (uint e = tid; e < TK * TN; e += 128u) {
			uint kk = e / TN, cc = e % TN, gk = k0 + kk, gc = col0 + cc;
			Bs[kk][cc] = gk < K && gc < O ? x_col(x_base, gk, gc) : 0.0;
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
	for (uint i = 0u; i < 4u; i++) {
		uint co = row0 + ty + 8u * i;
		for (uint j = 0u; j < 2u; j++) {
			uint o = col0 + tx + 16u * j;
			if (co >= p.Cog || o >= O)
				continue;
			uint oc = g * p.Cog + co;
			float v = acc[i][j];
			if ((p.flags & 1u) != 0u)
				v += LD(bias[oc]);
			y[(n * Co + oc) * O + o] = ST(v);
		}
	}
}
