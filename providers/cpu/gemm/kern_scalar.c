/*
 * kern_scalar: the portable GEMM microkernel, for CPUs (or builds) without
 * AVX2.  A 6 x 8 tile in GCC vector extensions (8 floats: two SSE
 * registers on baseline x86-64, two NEON registers on arm64), which the
 * compiler lowers to whatever the target has; written out with plain
 * loops, gcc vectorizes across k instead and pays a transpose per step.
 * Same contract as the vector kernels (gemm_kern.h).
 */
#include <string.h>

#include "gemm_kern.h"

enum { MR = 6, NR = 8 };

typedef float v8 __attribute__((vector_size(NR * sizeof(float))));

static void kernel(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
		   int64_t ldc, int mr, int nr, const gemm_tile_ep *ep)
{
	v8 acc[MR] = {{0}};
	const float *row[MR];
	float out[NR];

	/* Rows past mr read row 0 again: in bounds, never stored. */
	for (int i = 0; i < MR; i++)
		row[i] = a + (i < mr ? i : 0) * lda;
	for (int64_t k = 0; k < kc; k++) {
		v8 bk;
		memcpy(&bk, b + k * NR, sizeof(bk));
		for (int i = 0; i < MR; i++)
			acc[i] += row[i][k] * bk;
	}
	for (int i = 0; i < mr; i++) {
		float *ci = c + i * ldc;
		memcpy(out, &acc[i], sizeof(out));
		for (int j = 0; j < nr; j++) {
			float x = ep->alpha * out[j];
			if (ep->beta != 0.0f)
				x += ep->beta * ci[j];
			if (ep->finish) {
				if (ep->bias_col)
					x += ep->bias_col[j];
				if (ep->bias_row)
					x += ep->bias_row[i];
				if (ep->act != GEMM_ACT_NONE)
					x = x < ep->lo ? ep->lo : x > ep->hi ? ep->hi : x;
			}
			ci[j] = x;
		}
	}
}

const gemm_isa_desc gemm_desc_scalar = {
	.id = GEMM_ISA_SCALAR, .name = "scalar",
	.mr = MR, .nr = NR, .kc = 256, .nc = 512, .mc = 128,
	.kernel = kernel,
};
