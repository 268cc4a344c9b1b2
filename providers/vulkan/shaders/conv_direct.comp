#version 450
#include "elem.glsl"
// conv_direct: the same convolution as conv.comp computed directly, one
// invocation per output position and block of up to 4 output channels,
// with the kernel window clipped to the input once (no padding tests and
// no integer division in the loops).  No shared memory and no barriers:
// the better choice for depthwise and small convolutions, and on CPU
// implementations (lavapipe), where conv.comp's per-element index
// arithmetic dominates.
layout(local_size_x = 64) in;
#include "common.glsl"

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
	uint flags;             // 1: bias; 2: w is packed [G][Cog/4][K][4]
	uint n;                 // invocations: N * G * ceil(Cog / 4) * O
} p;

#define CB 4u

// Taps [a, b) of a window starting at s with positions s + k * d in [0, hi).
void taps(int s, int k, int d, int hi, out int a, out int b)
{
	a = s >= 0 ? 0 : (-s + d - 1) / d;
	b = s >= hi ? 0 : (hi - s + d - 1) / d;
	a = min(a, k);
	b = max(min(b, k), a);
}

void main()
{
	uint t = flat_id();
	if (t >= p.n)
		return;
	uint O = p.OD * p.OH * p.OW, nb = (p.Cog + CB - 1u) / CB;
	uint o = t % O, rest = t / O;
	uint cb = rest % nb, ng = rest / nb, g = ng % p.G, n = ng / p.G;
	uint ow = o % p.OW, oh = (o / p.OW) % p.OH, od = o / (p.OW * p.OH);
	int sd = int(od * p.SD) - p.PD, sh = int(oh * p.SH) - p.PH, sw = int(ow * p.SW) - p.PW;
	int ad, bd, ah, bh, aw, bw;
	taps(sd, int(p.KD), int(p.DD), int(p.D), ad, bd);
	taps(sh, int(p.KH), int(p.DH), int(p.H), ah, bh);
	taps(sw, int(p.KW), int(p.DW), int(p.W), aw, bw);
	uint K = p.Cig * p.KD * p.KH * p.KW, plane = p.D * p.H * p.W;
	uint co0 = cb * CB, nco = min(CB, p.Cog - co0);
	uint xb = (n * p.Cig * p.G + g * p.Cig) * plane;
	bool packed = (p.flags & 2u) != 0u;
	// Unpacked: channel j's row at wb + j * K; packed: tap k's 4 channels
	// side by side at wb + k * 4 (zeros past the last channel).
	uint wb = packed ? (g * nb + cb) * K * CB : (g * p.Cog + co0) * K;
	uint wj = packed ? 1u : K, wk = packed ? CB : 1u;
	float acc[CB] = float[CB](0.0, 0.0, 0.0, 0.0);
	for (uint ci = 0u; ci < p.Cig; ci++) {
		for (int kd = ad; kd < bd; kd++) {
			for (int kh = ah; kh < bh; kh++) {
				uint xr = xb + ci * plane +
					  (uint(sd + kd * int(p.DD)) * p.H + uint(sh + kh * int(p.DH))) * p.W;
				uint wr = wb + ((ci * p.KD + uint(kd)) * p.KH + uint(kh)) * p.KW * wk;
				for (int kw = aw; kw < bw; kw++) {
					float xv = LD(x[xr + uint(sw + kw * int(p.DW))]);
					// Constant trip count (unrolled); channels past
					// the last reread the last one and are dropped.
					for (uint j = 0u; j < CB; j++)
						acc[j] += LD(w[wr + min(j, nco - 1u) * wj + uint(kw) * wk]) * xv;
				}
			}
		}
	}
	uint Co = p.Cog * p.G;
	for (uint j = 0u; j < CB; j++) {
		uint oc = g * p.Cog + co0 + j;
		if (j >= nco)
			break;
		float v = acc[j];
		if ((p.flags & 1u) != 0u)
			v += LD(bias[oc]);
		y[(n * Co + oc) * O + o] = ST(v);
	}
}
