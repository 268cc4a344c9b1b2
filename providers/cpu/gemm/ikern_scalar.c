/*
 * ikern_scalar: the portable int8 microkernel, for CPUs (or builds)
 * without AVX2.  A 4 x 16 tile of 32-bit sums in plain C over the packed
 * layout (igemm.h); unsigned arithmetic, so the sums wrap as the
 * vector kernels' do.  Same contract as the others (igemm_kern.h).
 */
#include <string.h>

#include "igemm_kern.h"

enum { MR = 4, NR = IGEMM_NR };

static void kernel(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c, int64_t ldc,
		   int mr, int nr, const igemm_tile_ep *ep)
{
	uint32_t acc[MR][NR];

	memset(acc, 0, sizeof(acc));
	for (int i = 0; i < mr; i++) {
		const uint8_t *ai = a + i * lda;
		for (int tap = 0; tap < bw->ntaps; tap++) {
			const int8_t *bg = bw->b + bw->toff[tap];
			for (int64_t g = 0; g < bw->gpt; g++, ai += 4, bg += bw->gstride)
				for (int t = 0; t < 4; t++) {
					uint32_t av = ai[t];
					if (!av)
						continue;
					for (int j = 0; j < NR; j++)
						acc[i][j] += av * (uint32_t)(int32_t)bg[j * 4 + t];
				}
		}
	}
	for (int i = 0; i < mr; i++) {
		int32_t *ci = (int32_t *)c + i * ldc;
		for (int j = 0; j < nr; j++) {
			uint32_t v = acc[i][j] + (ep->first ? 0u : (uint32_t)ci[j]);
			if (ep->finish)
				igemm_ep_one(ep, i, j, v, ci + j, ep->add ? ep->add + i * ldc + j : NULL);
			else
				ci[j] = (int32_t)v;
		}
	}
}

static void colsum(const int8_t *panel, int64_t kg, int32_t *sums)
{
	for (int64_t g = 0; g < kg; g++)
		for (int j = 0; j < NR; j++)
			for (int t = 0; t < 4; t++)
				sums[j] = (int32_t)((uint32_t)sums[j] +
						    (uint32_t)(int32_t)panel[g * 64 + j * 4 + t]);
}

const igemm_isa_desc igemm_desc_scalar = {
	.id = IGEMM_ISA_SCALAR, .name = "scalar", .mr = MR, .nr = NR,
	.kernel = kernel, .colsum = colsum,
};
