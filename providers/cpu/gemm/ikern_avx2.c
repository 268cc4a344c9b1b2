/*
 * ikern_avx2: the int8 microkernel for AVX2 CPUs without VNNI (Haswell to
 * Comet Lake, Zen 1-3), compiled with -mavx2 and reached only through
 * igemm_desc_avx2 after cpuid said yes.
 *
 * vpmaddubsw (u8 x s8 pairs summed into int16) would be twice as fast but
 * saturates: 255 * 127 * 2 > 32767, so some sums of real weights would be
 * clipped (ONNX Runtime documents that for its U8S8 AVX2 path).  Here both
 * operands are widened to 16 bits (A zero-extended, B sign-extended) and
 * vpmaddwd sums pairs of 16-bit products into int32, which cannot
 * overflow.  A 3 x 16 tile: per group of 4 k, four loads widen the panel
 * (4 columns x 4 k each), and each row of A, widened and broadcast,
 * multiplies them; a column's two partial sums are added at the end.
 */
#include <immintrin.h>
#include <string.h>

#include "igemm_kern.h"

enum { MR = 3, NR = IGEMM_NR };

static inline __attribute__((always_inline)) void tile(const int rows, const uint8_t *a,
							int64_t lda, const igemm_bwalk *walk,
							void *c, int64_t ldc, int nr,
							const igemm_tile_ep *ep)
{
	const int64_t gs = walk->gstride, gpt = walk->gpt;
	__m256i acc[MR][4];
	uint32_t sums[16];

	for (int i = 0; i < rows; i++)
		for (int q = 0; q < 4; q++)
			acc[i][q] = _mm256_setzero_si256();
	for (int t = 0; t < walk->ntaps; t++) {
		const int8_t *bg = walk->b + walk->toff[t];
		for (int64_t g = 0; g < gpt; g++, a += 4, bg += gs) {
			__m256i aw[MR];
			for (int i = 0; i < rows; i++) {
				int32_t w;
				memcpy(&w, a + i * lda, 4);
				aw[i] = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(w)));
			}
			for (int q = 0; q < 4; q++) {
				__m256i bw = _mm256_cvtepi8_epi16(
					_mm_loadu_si128((const __m128i *)(bg + q * 16)));
				for (int i = 0; i < rows; i++)
					acc[i][q] = _mm256_add_epi32(acc[i][q],
								     _mm256_madd_epi16(bw, aw[i]));
			}
		}
	}
	for (int i = 0; i < rows; i++) {
		int32_t *ci = (int32_t *)c + i * ldc;
		/* hadd gives columns 0 1 4 5 | 2 3 6 7; the permute restores the order */
		__m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][0], acc[i][1]), 0xd8);
		__m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][2], acc[i][3]), 0xd8);
		_mm256_storeu_si256((__m256i *)sums, lo);
		_mm256_storeu_si256((__m256i *)(sums + 8), hi);
		for (int j = 0; j < nr; j++) {
			uint32_t v = sums[j] + (ep->first ? 0u : (uint32_t)ci[j]);
			if (ep->finish)
				igemm_ep_one(ep, i, j, v, ci + j, ep->add ? ep->add + i * ldc + j : NULL);
			else
				ci[j] = (int32_t)v;
		}
	}
}

static void kernel(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c, int64_t ldc,
		   int mr, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, a, lda, bw, c, ldc, nr, ep); break;
	case 2: tile(2, a, lda, bw, c, ldc, nr, ep); break;
	default: tile(3, a, lda, bw, c, ldc, nr, ep); break;
	}
}

/* Column sums: vpmaddubsw of ones by the panel cannot saturate (1 * -128
 * twice), then vpmaddwd by ones adds the pairs. */
static void colsum(const int8_t *panel, int64_t kg, int32_t *sums)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	__m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();

	for (int64_t g = 0; g < kg; g++) {
		__m256i p0 = _mm256_loadu_si256((const __m256i *)(panel + g * 64));
		__m256i p1 = _mm256_loadu_si256((const __m256i *)(panel + g * 64 + 32));
		s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p0), ones16));
		s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p1), ones16));
	}
	s0 = _mm256_add_epi32(s0, _mm256_loadu_si256((const __m256i *)sums));
	s1 = _mm256_add_epi32(s1, _mm256_loadu_si256((const __m256i *)(sums + 8)));
	_mm256_storeu_si256((__m256i *)sums, s0);
	_mm256_storeu_si256((__m256i *)(sums + 8), s1);
}

const igemm_isa_desc igemm_desc_avx2 = {
	.id = IGEMM_ISA_AVX2, .name = "avx2", .mr = MR, .nr = NR,
	.kernel = kernel, .colsum = colsum,
};
