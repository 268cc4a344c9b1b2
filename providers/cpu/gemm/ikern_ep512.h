/*
 * ikern_ep512: what the zmm int8 kernels share (ikern_avx512vnni.c and
 * ikern_amx.c; included only by files compiled with AVX-512 F/BW/VL and
 * VNNI): the masked epilogue of 16 results of a row, the vector form of
 * igemm_ep_one with the same operations in the same order (so the same
 * bits), and the column sums of a packed panel through vpdpbusd.
 */
#ifndef ORTMK_IKERN_EP512_H
#define ORTMK_IKERN_EP512_H

#include <immintrin.h>

#include "igemm_kern.h"

static inline __mmask16 lane_mask(int n)
{
	return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u);
}

/* The epilogue of one vector: 16 results of row i from column j. */
static inline __attribute__((always_inline)) void finish_vec(const igemm_tile_ep *ep, int i,
							      int j, __mmask16 m, __m512i y,
							      void *c, const float *addp)
{
	__m512 f, s;

	if (ep->row_off)
		y = _mm512_add_epi32(y, _mm512_set1_epi32(ep->row_off[i]));
	if (ep->col_off)
		y = _mm512_add_epi32(y, _mm512_maskz_loadu_epi32(m, ep->col_off + j));
	if (ep->rk_row)
		y = _mm512_add_epi32(y, _mm512_mullo_epi32(_mm512_set1_epi32(ep->rk_row[i]),
							   _mm512_maskz_loadu_epi32(m, ep->rk_col + j)));
	if (ep->rk2_row)
		y = _mm512_add_epi32(y, _mm512_mullo_epi32(_mm512_set1_epi32(ep->rk2_row[i]),
							   _mm512_maskz_loadu_epi32(m, ep->rk2_col + j)));
	if (!ep->is_float) {
		_mm512_mask_storeu_epi32(c, m, y);
		return;
	}
	f = _mm512_cvtepi32_ps(y);
	s = ep->scale_row ? _mm512_set1_ps(ep->scale_row[i]) :
	    ep->scale_col ? _mm512_maskz_loadu_ps(m, ep->scale_col + j) : _mm512_set1_ps(ep->scale);
	f = _mm512_mul_ps(f, s);
	if (ep->bias_row)
		f = _mm512_add_ps(f, _mm512_set1_ps(ep->bias_row[i]));
	else if (ep->bias_col)
		f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(m, ep->bias_col + j));
	if (addp)
		f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(m, addp));
	/* max(lo, f), min(hi, .) return f for NaN and a tie: igemm_ep_one's bits */
	if (ep->clamp)
		f = _mm512_min_ps(_mm512_set1_ps(ep->hi), _mm512_max_ps(_mm512_set1_ps(ep->lo), f));
	_mm512_mask_storeu_ps(c, m, f);
}

/* Result vector y of row i, columns [j, j + 16) under m, into C at cij
 * (row i's column j): added to C's partial sums unless the tile is the
 * first K block's, finished on the last one. */
static inline __attribute__((always_inline)) void ik512_out(const igemm_tile_ep *ep, int i, int j,
							     __mmask16 m, __m512i y, int32_t *cij,
							     int64_t ldc)
{
	if (!ep->first)
		y = _mm512_add_epi32(y, _mm512_maskz_loadu_epi32(m, cij));
	if (ep->finish)
		finish_vec(ep, i, j, m, y, cij, ep->add ? ep->add + i * ldc + j : NULL);
	else
		_mm512_mask_storeu_epi32(cij, m, y);
}

static inline void ik512_colsum(const int8_t *panel, int64_t kg, int32_t *sums)
{
	const __m512i ones = _mm512_set1_epi8(1);
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
	int64_t g = 0;

	for (; g + 2 <= kg; g += 2) {
		s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_loadu_si512(panel + g * 64));
		s1 = _mm512_dpbusd_epi32(s1, ones, _mm512_loadu_si512(panel + g * 64 + 64));
	}
	if (g < kg)
		s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_loadu_si512(panel + g * 64));
	s0 = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_loadu_si512(sums));
	_mm512_storeu_si512(sums, s0);
}

#endif
