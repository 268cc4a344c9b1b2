#version 450
#include "elem.glsl"
// gemm_direct: gemm.comp's product without tiles: one invocation per 4x4
// block of the output, looping over K.  No shared memory and no
// barriers, which is what CPU implementations (lavapipe) run fastest; the
// push constants are gemm.comp's plus the invocation count.
layout(local_size_x = 64) in;
#include "common.glsl"

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
	uint nb;
	uint bdims[4];
	uint a_bs[4];
	uint b_bs[4];
	uint n;                 // invocations: batches * ceil(M / 4) * ceil(N / 4)
} p;

#define RB 4u
#define CB 4u

// Invocation t computes a 4x4 block of y: rows 4 * rb.., columns 4 * cb..
// (cb varies fastest).  Per step of K it reads 4 elements of A and 4 of B
// for 16 multiply-adds; blocks at the edges reread the last row or column
// and drop the extra results.
void main()
{
	uint t = flat_id();
	if (t >= p.n)
		return;
	uint nrb = (p.M + RB - 1u) / RB, ncb = (p.N + CB - 1u) / CB;
	uint cb = t % ncb, rest = t / ncb, rb = rest % nrb, batch = rest / nrb;
	uint a_off = 0u, b_off = 0u, rem = batch;
	for (int d = int(p.nb) - 1; d >= 0; d--) {
		uint k = rem % p.bdims[d];
		rem /= p.bdims[d];
		a_off += k * p.a_bs[d];
		b_off += k * p.b_bs[d];
	}
	uint r0 = rb * RB, c0 = cb * CB;
	uint ar[RB], bc[CB];
	for (uint i = 0u; i < RB; i++)
		ar[i] = a_off + min(r0 + i, p.M - 1u) * p.a_rs;
	for (uint j = 0u; j < CB; j++)
		bc[j] = b_off + min(c0 + j, p.N - 1u) * p.b_cs;
	float acc[RB][CB];
	for (uint i = 0u; i < RB; i++)
		for (uint j = 0u; j < CB; j++)
			acc[i][j] = 0.0;
	for (uint k = 0u; k < p.K; k++) {
		uint ak = k * p.a_cs, bk = k * p.b_rs;
		float av[RB], bv[CB];
		for (uint i = 0u; i < RB; i++)
			av[i] = LD(a[ar[i] + ak]);
		for (uint j = 0u; j < CB; j++)
			bv[j] = LD(b[bc[j] + bk]);
		for (uint i = 0u; i < RB; i++)
			for (uint j = 0u; j < CB; j++)
				acc[i][j] += av[i] * bv[j];
	}
	for (uint i = 0u; i < RB; i++) {
		uint r = r0 + i;
		for (uint j = 0u; j < CB; j++) {
			uint c = c0 + j;
			if (r >= p.M || c >= p.N)
				continue;
			float v = p.alpha * acc[i][j];
			if ((p.flags & 1u) != 0u)
				v += p.beta * LD(bias[r * p.c_rs + c * p.c_cs]);
			y[(batch * p.M + r) * p.N + c] = ST(v);
		}
	}
}
