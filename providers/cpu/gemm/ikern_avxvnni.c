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

enum { MR = 6, NR = IGEMM_NR };

static inline __attribute__((always_inline)) void finish_vec(const igemm_tile_ep *ep, int i,
							      int j, __m256i y, void *c,
							      const float *addp)
{
	__m256 f, s;

	if (ep->row_off)
		y = _mm256_add_epi32(y, _mm256_set1_epi32(ep->row_off[i]));
	if (ep->col_off)
		y = _mm256_add_epi32(y, _mm256_loadu_si256((const __m256i *)(ep->col_off + j)));
	if (ep->rk_row)
		y = _mm256_add_epi32(y, _mm256_mullo_epi32(_mm256_set1_epi32(ep->rk_row[i]),
			_mm256_loadu_si256((const __m256i *)(ep->rk_col + j))));
	if (ep->rk2_row)
		y = _mm256_add_epi32(y, _mm256_mullo_epi32(_mm256_set1_epi32(ep->rk2_row[i]),
			_mm256_loadu_si256((const __m256i *)(ep->rk2_col + j))));
	if (!ep->is_float) {
		_mm256_storeu_si256(c, y);
		return;
	}
	f = _mm256_cvtepi32_ps(y);
	s = ep->scale_row ? _mm256_set1_ps(ep->scale_row[i]) :
	    ep->scale_col ? _mm256_loadu_ps(ep->scale_col + j) : _mm256_set1_ps(ep->scale);
	f = _mm256_mul_ps(f, s);
	if (ep->bias_row)
		f = _mm256_add_ps(f, _mm256_set1_ps(ep->bias_row[i]));
	else if (ep->bias_col)
		f = _mm256_add_ps(f, _mm256_loadu_ps(ep->bias_col + j));
	if (addp)
		f = _mm256_add_ps(f, _mm256_loadu_ps(addp));
	if (ep->relu)
		f = _mm256_max_ps(_mm256_setzero_ps(), f);
	_mm256_storeu_ps(c, f);
}

/* Row i's 8 sums from column j: accumulated into C, finished or stored;
 * addp: the addend of row i, column j, or NULL. */
static inline __attribute__((always_inline)) void store_vec(const igemm_tile_ep *ep, int i,
							     int j, int n, __m256i y,
							     int32_t *c, const float *addp)
{
	uint32_t tmp[8];

	if (n >= 8) {
		if (!ep->first)
			y = _mm256_add_epi32(y, _mm256_loadu_si256((const __m256i *)c));
		if (ep->finish)
			finish_vec(ep, i, j, y, c, addp);
		else
			_mm256_storeu_si256((__m256i *)c, y);
		return;
	}
	_mm256_storeu_si256((__m256i *)tmp, y);
	for (int l = 0; l < n; l++) {
		uint32_t v = tmp[l] + (ep->first ? 0u : (uint32_t)c[l]);
		if (ep->finish)
			igemm_ep_one(ep, i, j + l, v, c + l, addp ? addp + l : NULL);
		else
			c[l] = (int32_t)v;
	}
}

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
