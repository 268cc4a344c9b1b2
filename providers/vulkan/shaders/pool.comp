#version 450
#include "elem.glsl"
// pool: MaxPool and AveragePool over 1 to 3 spatial dims (as D x H x W),
// one invocation per output element, with the window geometry of
// providers/cpu/ops/pool.c: taps outside the input are skipped; with
// count_include_pad the divisor counts the taps inside the padded input.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform P {
	uint n;                 // output elements
	uint flags;             // 1: max (else average), 2: count_include_pad
	uint D, H, W;
	uint OD, OH, OW;
	uint KD, KH, KW;
	uint SD, SH, SW;
	int PD, PH, PW;         // leading pads
	int ED, EH, EW;         // trailing pads
	uint DD, DH, DW;
} p;

// Taps [a, b) of a window starting at s whose positions s + k * d lie in
// [lo, hi).
void taps(int s, int k, int d, int lo, int hi, out int a, out int b)
{
	a = s >= lo ? 0 : (lo - s + d - 1) / d;
	b = s >= hi ? 0 : (hi - s + d - 1) / d;
	a = min(a, k);
	b = max(min(b, k), a);
}

void main()
{
	uint i = flat_id();
	if (i >= p.n)
		return;
	uint ow = i % p.OW, oh = (i / p.OW) % p.OH, od = (i / (p.OW * p.OH)) % p.OD;
	uint plane = i / (p.OW * p.OH * p.OD);
	int s[3] = int[3](int(od * p.SD) - p.PD, int(oh * p.SH) - p.PH, int(ow * p.SW) - p.PW);
	int k[3] = int[3](int(p.KD), int(p.KH), int(p.KW));
	int d[3] = int[3](int(p.DD), int(p.DH), int(p.DW));
	int in_[3] = int[3](int(p.D), int(p.H), int(p.W));
	int pb[3] = int[3](p.PD, p.PH, p.PW);
	int pe[3] = int[3](p.ED, p.EH, p.EW);
	int a[3], b[3];
	bool is_max = (p.flags & 1u) != 0u;
	int cnt = 1;
	for (int j = 0; j < 3; j++) {
		int pa, pb_;
		if ((p.flags & 2u) != 0u && !is_max) {
			taps(s[j], k[j], d[j], -pb[j], in_[j] + pe[j], pa, pb_);
			cnt *= pb_ - pa;
		}
		taps(s[j], k[j], d[j], 0, in_[j], a[j], b[j]);
		if ((p.flags & 2u) == 0u || is_max)
			cnt *= b[j] - a[j];
	}
	uint base = plane * p.D * p.H * p.W;
	float best = -3.402823466e38, sum = 0.0;
	bool first = true;
	for (int kd = a[0]; kd < b[0]; kd++)
		for (int kh = a[1]; kh < b[1]; kh++)
			for (int kw = a[2]; kw < b[2]; kw++) {
				int id = s[0] + kd * d[0], ih = s[1] + kh * d[1], iw = s[2] + kw * d[2];
				float v = LD(x[base + (uint(id) * p.H + uint(ih)) * p.W + uint(iw)]);
				sum += v;
				if (first || v > best)
					best = v;
				first = false;
			}
	y[i] = ST(is_max ? best : (cnt > 0 ? sum / float(cnt) : 0.0));
}
