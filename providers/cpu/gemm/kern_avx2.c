/*
 * kern_avx2: the GEMM microkernel for AVX2 + FMA, compiled with -mavx2
 * -mfma and reached only through gemm_desc_avx2 after cpuid said yes.
 *
 * Tile: MR = 6 rows x NR = 16 columns, 12 ymm accumulators plus two B
 * loads and one broadcast: 15 of the 16 ymm registers.  Same structure as
 * kern_avx512.c: one specialisation per partial height, masked epilogue
 * for a partial width (the packed B is zero-padded).  A full-width tile
 * loads and stores C with plain moves: AMD's cores run a masked store
 * (vmaskmovps) as a microcoded sequence, and with them the 1x1
 * convolutions of short K (16 to 24 input channels: MobileNetV2's
 * expansions) ran at 31% of the FMA peak on Zen 3, their stores most of
 * the time.
 */
#include <immintrin.h>

#include "gemm_kern.h"

enum { MR = 6, NR = 16 };

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Lanes [0, n) set. */
ALWAYS_INLINE __m256i mask_upto(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Half h (0: columns 0-7, 1: 8-15) of a row of C, nr columns valid:
 * plain when the half is whole, masked when partial, nothing when empty
 * (a ragged panel of 8, as 40- or 120-channel layers leave, then costs no
 * masked move at all). */
ALWAYS_INLINE __m256 load_part(const float *c, __m256i m, const int full, int nr, int h)
{
	if (full || nr >= 8 * (h + 1))
		return _mm256_loadu_ps(c);
	return nr > 8 * h ? _mm256_maskload_ps(c, m) : _mm256_setzero_ps();
}

ALWAYS_INLINE void store_part(float *c, __m256i m, __m256 x, const int full, int nr, int h)
{
	if (full || nr >= 8 * (h + 1))
		_mm256_storeu_ps(c, x);
	else if (nr > 8 * h)
		_mm256_maskstore_ps(c, m, x);
}

ALWAYS_INLINE void store_row(float *c, __m256 x0, __m256 x1, __m256i m0, __m256i m1,
			     const gemm_tile_ep *ep, __m256 bc0, __m256 bc1, const float *brow,
			     const int full, int nr)
{
	if (ep->alpha != 1.0f) {
		__m256 va = _mm256_set1_ps(ep->alpha);
		x0 = _mm256_mul_ps(x0, va);
		x1 = _mm256_mul_ps(x1, va);
	}
	if (ep->beta == 1.0f) {
		x0 = _mm256_add_ps(x0, load_part(c, m0, full, nr, 0));
		x1 = _mm256_add_ps(x1, load_part(c + 8, m1, full, nr, 1));
	} else if (ep->beta != 0.0f) {
		__m256 vb = _mm256_set1_ps(ep->beta);
		x0 = _mm256_fmadd_ps(vb, load_part(c, m0, full, nr, 0), x0);
		x1 = _mm256_fmadd_ps(vb, load_part(c + 8, m1, full, nr, 1), x1);
	}
	if (ep->finish) {
		if (ep->bias_col) {
			x0 = _mm256_add_ps(x0, bc0);
			x1 = _mm256_add_ps(x1, bc1);
		}
		if (brow) {
			__m256 r = _mm256_set1_ps(*brow);
			x0 = _mm256_add_ps(x0, r);
			x1 = _mm256_add_ps(x1, r);
		}
		if (ep->act != GEMM_ACT_NONE) {
			__m256 lo = _mm256_set1_ps(ep->lo), hi = _mm256_set1_ps(ep->hi);
			/* Operand order keeps a NaN (maxps returns its second
			 * operand when either is NaN), as the scalar kernel does. */
			x0 = _mm256_min_ps(hi, _mm256_max_ps(lo, x0));
			x1 = _mm256_min_ps(hi, _mm256_max_ps(lo, x1));
		}
	}
	store_part(c, m0, x0, full, nr, 0);
	store_part(c + 8, m1, x1, full, nr, 1);
}

ALWAYS_INLINE void tile(const int mr, int64_t kc, const float *a, int64_t lda,
			const float *b, float *c, int64_t ldc, int nr, const gemm_tile_ep *ep,
			const int full)
{
	__m256 acc0[MR], acc1[MR];
	__m256i m0 = mask_upto(nr), m1 = mask_upto(nr - 8);
	__m256 bc0 = _mm256_setzero_ps(), bc1 = _mm256_setzero_ps();

#pragma GCC unroll 6
	for (int i = 0; i < mr; i++) {
		acc0[i] = _mm256_setzero_ps();
		acc1[i] = _mm256_setzero_ps();
		_mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
	}
	for (int64_t k = 0; k < kc; k++) {
		__m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
		b += NR;
#pragma GCC unroll 6
		for (int i = 0; i < mr; i++) {
			__m256 av = _mm256_broadcast_ss(a + i * lda + k);
			acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
			acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
		}
	}
	if (ep->finish && ep->bias_col) {
		bc0 = load_part(ep->bias_col, m0, full, nr, 0);
		bc1 = load_part(ep->bias_col + 8, m1, full, nr, 1);
	}
#pragma GCC unroll 6
	for (int i = 0; i < mr; i++)
		store_row(c + i * ldc, acc0[i], acc1[i], m0, m1, ep, bc0, bc1,
			  ep->bias_row ? ep->bias_row + i : NULL, full, nr);
}

/* One specialisation per height, for full (1) or ragged (0) tiles. */
ALWAYS_INLINE void tiles(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
			 int64_t ldc, int mr, int nr, const gemm_tile_ep *ep, const int full)
{
	switch (mr) {
	case 6: tile(6, kc, a, lda, b, c, ldc, nr, ep, full); break;
	case 5: tile(5, kc, a, lda, b, c, ldc, nr, ep, full); break;
	case 4: tile(4, kc, a, lda, b, c, ldc, nr, ep, full); break;
	case 3: tile(3, kc, a, lda, b, c, ldc, nr, ep, full); break;
	case 2: tile(2, kc, a, lda, b, c, ldc, nr, ep, full); break;
	default: tile(1, kc, a, lda, b, c, ldc, nr, ep, full); break;
	}
}

static void kernel(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
		   int64_t ldc, int mr, int nr, const gemm_tile_ep *ep)
{
	if (nr == NR)
		tiles(kc, a, lda, b, c, ldc, mr, nr, ep, 1);
	else
		tiles(kc, a, lda, b, c, ldc, mr, nr, ep, 0);
}

/* KC x NC = 256 x 512 floats = 512 KiB of packed B (Zen 4's 1 MiB L2
 * holds it with the tiles' A and C).  On Zen 3's 512 KiB, 128 columns a
 * block measured no faster against this binary (ViT-B/16 1.01x, Faster
 * R-CNN's 12544-deep box head 1.01x, ab_nodes 4 rounds). */
const gemm_isa_desc gemm_desc_avx2 = {
	.id = GEMM_ISA_AVX2, .name = "avx2",
	.mr = MR, .nr = NR, .kc = 256, .nc = 512, .mc = 120,
	.kernel = kernel,
};
