/*
 * ikern_avxvnni: the int8 microkernel for AVX-VNNI (the VEX-encoded
 * vpdpbusd on ymm of Alder Lake, Sapphire Rapids and Zen 5 class CPUs;
 * also what an AVX-512 machine runs when ORTMK_IGEMM_ISA=avxvnni), compiled
 * with -mavx2 -mavxvnni and reached only through igemm_desc_avxvnni after
 * cpuid said yes.
 *
 * A 6 x 16 tile (one B panel) in 12 ymm accumulators: per group of 4 k,
 * the panel's 64 bytes are two ymm loads and each row of A broadcasts its
 * 4 bytes into two vpdpbusd.  Full 8-column vectors get the vector
 * epilogue; a ragged edge goes through igemm_ep_one.
 */
#include <immintrin.h>
#include <string.h>

#include "igemm_kern.h"
#include "ikern_ep256.h"

enum { MR = 6, NR = IGEMM_NR };

static inline __attribute__((always_inline)) void tile(const int rows, const uint8_t *a,
							int64_t lda, const igemm_bwalk *bw,
							void *c, int64_t ldc, int nr,
							const igemm_tile_ep *ep)
{
	const int64_t gs = bw->gstride, gpt = bw->gpt;
	__m256i acc[MR][2];

	for (int i = 0; i < rows; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_si256();
	for (int t = 0; t < bw->ntaps; t++) {
		const int8_t *bq = bw->b + bw->toff[t];
		for (int64_t q = 0; q < gpt; q++, a += 4, bq += gs) {
			__m256i b0 = _mm256_loadu_si256((const __m256i *)bq);
			__m256i b1 = _mm256_loadu_si256((const __m256i *)(bq + 32));
			for (int i = 0; i < rows; i++) {
				int32_t w;
				memcpy(&w, a + i * lda, 4);
				__m256i av = _mm256_set1_epi32(w);
				acc[i][0] = _mm256_dpbusd_avx_epi32(acc[i][0], av, b0);
				acc[i][1] = _mm256_dpbusd_avx_epi32(acc[i][1], av, b1);
			}
		}
	}
	for (int i = 0; i < rows; i++) {
		int32_t *ci = (int32_t *)c + i * ldc;
		const float *ad = ep->add ? ep->add + i * ldc : NULL;
		store_vec(ep, i, 0, nr, acc[i][0], ci, ad);
		if (nr > 8)
			store_vec(ep, i, 8, nr - 8, acc[i][1], ci + 8, ad ? ad + 8 : NULL);
	}
}

static void kernel(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c, int64_t ldc,
		   int mr, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, a, lda, bw, c, ldc, nr, ep); break;
	case 2: tile(2, a, lda, bw, c, ldc, nr, ep); break;
	case 3: tile(3, a, lda, bw, c, ldc, nr, ep); break;
	case 4: tile(4, a, lda, bw, c, ldc, nr, ep); break;
	case 5: tile(5, a, lda, bw, c, ldc, nr, ep); break;
	default: tile(6, a, lda, bw, c, ldc, nr, ep); break;
	}
}

static void colsum(const int8_t *panel, int64_t kg, int32_t *sums)
{
	const __m256i ones = _mm256_set1_epi8(1);
	__m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();

	for (int64_t g = 0; g < kg; g++) {
		s0 = _mm256_dpbusd_avx_epi32(s0, ones,
					     _mm256_loadu_si256((const __m256i *)(panel + g * 64)));
		s1 = _mm256_dpbusd_avx_epi32(s1, ones,
					     _mm256_loadu_si256((const __m256i *)(panel + g * 64 + 32)));
	}
	s0 = _mm256_add_epi32(s0, _mm256_loadu_si256((const __m256i *)sums));
	s1 = _mm256_add_epi32(s1, _mm256_loadu_si256((const __m256i *)(sums + 8)));
	_mm256_storeu_si256((__m256i *)sums, s0);
	_mm256_storeu_si256((__m256i *)(sums + 8), s1);
}

const igemm_isa_desc igemm_desc_avxvnni = {
	.id = IGEMM_ISA_AVXVNNI, .name = "avxvnni", .mr = MR, .nr = NR,
	.kernel = kernel, .colsum = colsum,
};
