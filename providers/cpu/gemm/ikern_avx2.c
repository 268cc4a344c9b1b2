/*
 * ikern_avx2: the int8 microkernel for AVX2 CPUs without VNNI (Haswell to
 * Comet Lake, Zen 1-3), compiled with -mavx2 and reached only through
 * igemm_desc_avx2 after cpuid said yes.
 *
 * vpmaddubsw (u8 x s8 pairs summed into int16) would be twice as fast but
 * saturates: 255 * 127 * 2 > 32767, so some sums of real weights would be
 * clipped (ONNX Runtime documents that for its U8S8 AVX2 path).  Here both
 * operands are taken as 16-bit values and vpmaddwd sums pairs of 16-bit
 * products into int32, which cannot overflow.
 *
 * A 4 x 16 tile in 8 accumulators, one int32 lane a column (as the VNNI
 * kernels keep them, so the epilogue is ikern_ep256.h's vector one).  A
 * column's 32-bit lane of the packed panel holds its 4 k as bytes b0..b3:
 * shifted as 16-bit words, the lane gives (b0, b2) and (b1, b3)
 * sign-extended, and a row's broadcast 4 bytes give (a0, a2) and (a1, a3)
 * zero-extended; two vpmaddwd then make the lane's 4-k dot product.
 * (The earlier form widened 4 columns x 4 k with vpmovsxbw, 3 rows, and
 * summed lane pairs at the end: it spilled an accumulator and finished
 * every element in scalar code, 28-36 GMAC/s on Zen 3.)
 */
#include <immintrin.h>
#include <string.h>

#include "igemm_kern.h"
#include "ikern_ep256.h"

enum { MR = 4, NR = IGEMM_NR };

static inline __attribute__((always_inline)) void tile(const int rows, const uint8_t *a,
							int64_t lda, const igemm_bwalk *walk,
							void *c, int64_t ldc, int nr,
							const igemm_tile_ep *ep)
{
	const int64_t gs = walk->gstride, gpt = walk->gpt;
	const __m256i even = _mm256_set1_epi32(0x00ff00ff);
	__m256i acc[MR][2];

	for (int i = 0; i < rows; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_si256();
	for (int t = 0; t < walk->ntaps; t++) {
		const int8_t *bg = walk->b + walk->toff[t];

		for (int64_t g = 0; g < gpt; g++, a += 4, bg += gs) {
			__m256i b0 = _mm256_loadu_si256((const __m256i *)bg);
			__m256i b1 = _mm256_loadu_si256((const __m256i *)(bg + 32));
			__m256i e0 = _mm256_srai_epi16(_mm256_slli_epi16(b0, 8), 8);
			__m256i o0 = _mm256_srai_epi16(b0, 8);
			__m256i e1 = _mm256_srai_epi16(_mm256_slli_epi16(b1, 8), 8);
			__m256i o1 = _mm256_srai_epi16(b1, 8);

			for (int i = 0; i < rows; i++) {
				int32_t w;
				memcpy(&w, a + i * lda, 4);
				__m256i aw = _mm256_set1_epi32(w);
				__m256i ae = _mm256_and_si256(aw, even), ao = _mm256_srli_epi16(aw, 8);

				acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(e0, ae));
				acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(e1, ae));
				acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(o0, ao));
				acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(o1, ao));
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
	default: tile(4, a, lda, bw, c, ldc, nr, ep); break;
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
