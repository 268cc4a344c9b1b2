/*
 * ikern_ep256: the epilogue of the 8-column (ymm) int8 kernels, shared by
 * ikern_avx2.c and ikern_avxvnni.c; included only by files compiled with
 * -mavx2.  A row's 8 int32 sums from column j are added to C's partial
 * sums (unless the tile is the first K block's) and, on the last K block,
 * finished as igemm_tile_ep says: the vector form of igemm_ep_one, the
 * same operations in the same order (so the same bits), which a ragged
 * edge still goes through.
 */
#ifndef ORTMK_IKERN_EP256_H
#define ORTMK_IKERN_EP256_H

#include <immintrin.h>

#include "igemm_kern.h"

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
	if (ep->clamp)
		f = _mm256_min_ps(_mm256_set1_ps(ep->hi), _mm256_max_ps(_mm256_set1_ps(ep->lo), f));
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

#endif
