/*
 * kern_avx512: the GEMM microkernel for AVX-512 (F + VL), compiled with
 * -mavx512f -mavx512vl and reached only through gemm_desc_avx512 after
 * cpuid said yes.
 *
 * Tile: MR = 14 rows x NR = 32 columns, 28 zmm accumulators; per k two
 * aligned loads of the B panel and 14 broadcasts of A that gcc folds into
 * the FMAs as {1to16} memory operands, so 31 of the 32 zmm registers are in
 * use and the loop is bound by FMA throughput, not loads.  A partial tile
 * (mr < MR) gets its own specialisation of the same code (mr is a
 * constant in each), so ragged edges cost their flops and little more; a
 * partial width (nr < NR) is handled with masked loads and stores in the
 * epilogue only, the packed B being zero-padded.  With ep->pf_b set the
 * tile also prefetches, into L2, the lines pf_b floats past the ones it
 * loads (the driver points it at the next panel of a pre-packed B, which
 * streams from memory: bench-gemm 49x512x4608, ResNet's 7x7 stage as
 * pixels-as-rows, 81 -> 105 GFLOP/s at one thread).
 */
#include <immintrin.h>

#include "gemm_kern.h"

enum { MR = 14, NR = 32 };

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __mmask16 mask_upto(int n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* C tile = epilogue(acc) for one row; the masks cover the nr columns. */
ALWAYS_INLINE void store_row(float *c, __m512 x0, __m512 x1, __mmask16 m0, __mmask16 m1,
			     const gemm_tile_ep *ep, __m512 bc0, __m512 bc1, const float *brow)
{
	if (ep->alpha != 1.0f) {
		__m512 va = _mm512_set1_ps(ep->alpha);
		x0 = _mm512_mul_ps(x0, va);
		x1 = _mm512_mul_ps(x1, va);
	}
	if (ep->beta == 1.0f) {
		x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, c));
		x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, c + 16));
	} else if (ep->beta != 0.0f) {
		__m512 vb = _mm512_set1_ps(ep->beta);
		x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), x0);
		x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), x1);
	}
	if (ep->finish) {
		if (ep->bias_col) {
			x0 = _mm512_add_ps(x0, bc0);
			x1 = _mm512_add_ps(x1, bc1);
		}
		if (brow) {
			__m512 r = _mm512_set1_ps(*brow);
			x0 = _mm512_add_ps(x0, r);
			x1 = _mm512_add_ps(x1, r);
		}
		if (ep->act != GEMM_ACT_NONE) {
			__m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
			/* Operand order keeps a NaN (maxps returns its second
			 * operand when either is NaN), as the scalar kernel does. */
			x0 = _mm512_min_ps(hi, _mm512_max_ps(lo, x0));
			x1 = _mm512_min_ps(hi, _mm512_max_ps(lo, x1));
		}
	}
	_mm512_mask_storeu_ps(c, m0, x0);
	_mm512_mask_storeu_ps(c + 16, m1, x1);
}

/* ku independent accumulator sets over alternating k: a thin tile (mr 1
 * or 2) has too few FMA chains to hide the FMA latency otherwise. */
ALWAYS_INLINE void tile(const int mr, const int ku, const int tr, const int bd, int64_t kc,
			const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
			int64_t ldc, int nr, const gemm_tile_ep *ep)
{
	/* A(i, k): row-major, or transposed when tr */
#define A_AT(i, k) (tr ? a[(k) * lda + (i)] : a[(i) * lda + (k)])
	__m512 acc0[4][MR], acc1[4][MR];
	__mmask16 m0 = mask_upto(nr), m1 = mask_upto(nr - 16);
	__m512 bc0 = _mm512_setzero_ps(), bc1 = _mm512_setzero_ps();
	int64_t k = 0, pf = ep->pf_b;

#pragma GCC unroll 14
	for (int i = 0; i < mr; i++) {
#pragma GCC unroll 4
		for (int u = 0; u < ku; u++) {
			acc0[u][i] = _mm512_setzero_ps();
			acc1[u][i] = _mm512_setzero_ps();
		}
		_mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
		_mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
	}
	for (; k + ku <= kc; k += ku) {
#pragma GCC unroll 4
		for (int u = 0; u < ku; u++) {
			__m512 b0 = bd ? _mm512_maskz_loadu_ps(m0, b) : _mm512_load_ps(b);
			__m512 b1 = bd ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_load_ps(b + 16);
			if (!bd) {
				_mm_prefetch((const char *)(b + pf), _MM_HINT_T1);
				_mm_prefetch((const char *)(b + pf + 16), _MM_HINT_T1);
			}
			b += bd ? ldb : NR;
#pragma GCC unroll 14
			for (int i = 0; i < mr; i++) {
				__m512 av = _mm512_set1_ps(A_AT(i, k + u));
				acc0[u][i] = _mm512_fmadd_ps(av, b0, acc0[u][i]);
				acc1[u][i] = _mm512_fmadd_ps(av, b1, acc1[u][i]);
			}
		}
	}
	for (; k < kc; k++) {
		__m512 b0 = bd ? _mm512_maskz_loadu_ps(m0, b) : _mm512_load_ps(b);
		__m512 b1 = bd ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_load_ps(b + 16);
		b += bd ? ldb : NR;
#pragma GCC unroll 14
		for (int i = 0; i < mr; i++) {
			__m512 av = _mm512_set1_ps(A_AT(i, k));
			acc0[0][i] = _mm512_fmadd_ps(av, b0, acc0[0][i]);
			acc1[0][i] = _mm512_fmadd_ps(av, b1, acc1[0][i]);
		}
	}
#pragma GCC unroll 14
	for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
		for (int u = 1; u < ku; u++) {
			acc0[0][i] = _mm512_add_ps(acc0[0][i], acc0[u][i]);
			acc1[0][i] = _mm512_add_ps(acc1[0][i], acc1[u][i]);
		}
	if (ep->finish && ep->bias_col) {
		bc0 = _mm512_maskz_loadu_ps(m0, ep->bias_col);
		bc1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + 16);
	}
#pragma GCC unroll 14
	for (int i = 0; i < mr; i++)
		store_row(c + i * ldc, acc0[0][i], acc1[0][i], m0, m1, ep, bc0, bc1,
			  ep->bias_row ? ep->bias_row + i : NULL);
#undef A_AT
}

ALWAYS_INLINE void kernel_any(const int tr, const int bd, int64_t kc, const float *a,
			      int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
			      int mr, int nr, const gemm_tile_ep *ep)
{
#define TILE(MR_, KU_) tile(MR_, KU_, tr, bd, kc, a, lda, b, ldb, c, ldc, nr, ep)
	switch (mr) {
	case 14: TILE(14, 1); break;
	case 13: TILE(13, 1); break;
	case 12: TILE(12, 1); break;
	case 11: TILE(11, 1); break;
	case 10: TILE(10, 1); break;
	case 9: TILE(9, 1); break;
	case 8: TILE(8, 1); break;
	case 7: TILE(7, 1); break;
	case 6: TILE(6, 1); break;
	case 5: TILE(5, 1); break;
	case 4: TILE(4, 2); break;
	case 3: TILE(3, 2); break;
	case 2: TILE(2, 4); break;
	default: TILE(1, 4); break;
	}
#undef TILE
}

static void kernel(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
		   int64_t ldc, int mr, int nr, const gemm_tile_ep *ep)
{
	kernel_any(0, 0, kc, a, lda, b, 0, c, ldc, mr, nr, ep);
}

static void kernel_t(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
		     int64_t ldc, int mr, int nr, const gemm_tile_ep *ep)
{
	kernel_any(1, 0, kc, a, lda, b, 0, c, ldc, mr, nr, ep);
}

/* B read in place, row k of the tile's columns at b + k * ldb: masked
 * unaligned loads (the last panel's columns past nr are not read). */
static void kernel_bd(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
		      float *c, int64_t ldc, int mr, int nr, const gemm_tile_ep *ep)
{
	kernel_any(0, 1, kc, a, lda, b, ldb, c, ldc, mr, nr, ep);
}

/* One panel (NR columns) of mr rows over all of K: ku accumulator sets
 * over alternating k (mr * 2 * ku zmm registers, at least 8 chains for
 * the FMA latency); each K block's part of the panel is one contiguous
 * kc x NR run, read front to back, with a software prefetch into L2 PF
 * bytes ahead so the next lines are on their way from L3/DRAM while these
 * are used (mlp1's 4 x 1024 x 1024 at one thread, 07:41: 0.234 ms min
 * with L2 hints at 4 KiB, 0.260 with L1 hints, 0.290 at 1 KiB). */
enum { PF = 4096 };

ALWAYS_INLINE void gemv_panel(const int mr, const int ku, const gemm_packed_view *v,
			      const float *a, int64_t lda, int64_t q, float *c, int64_t ldc,
			      const gemm_tile_ep *ep)
{
	__m512 acc0[4][4], acc1[4][4];
	int64_t j0 = q * NR;
	int nr = (int)(v->N - j0 < NR ? v->N - j0 : NR);
	__mmask16 m0 = mask_upto(nr), m1 = mask_upto(nr - 16);
	__m512 bc0 = _mm512_setzero_ps(), bc1 = _mm512_setzero_ps();

#pragma GCC unroll 4
	for (int u = 0; u < ku; u++)
#pragma GCC unroll 4
		for (int i = 0; i < mr; i++) {
			acc0[u][i] = _mm512_setzero_ps();
			acc1[u][i] = _mm512_setzero_ps();
		}
	for (int64_t k0 = 0; k0 < v->K; k0 += v->kc) {
		int64_t kc = v->K - k0 < v->kc ? v->K - k0 : v->kc, k = 0;
		const float *b = gemm_packed_panel(v, k0, q), *ak = a + k0;

		for (; k + ku <= kc; k += ku) {
#pragma GCC unroll 4
			for (int u = 0; u < ku; u++) {
				__m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
				_mm_prefetch((const char *)b + PF, _MM_HINT_T1);
				_mm_prefetch((const char *)b + PF + 64, _MM_HINT_T1);
				b += NR;
#pragma GCC unroll 4
				for (int i = 0; i < mr; i++) {
					__m512 av = _mm512_set1_ps(ak[i * lda + k + u]);
					acc0[u][i] = _mm512_fmadd_ps(av, b0, acc0[u][i]);
					acc1[u][i] = _mm512_fmadd_ps(av, b1, acc1[u][i]);
				}
			}
		}
		for (; k < kc; k++) {
			__m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
			b += NR;
#pragma GCC unroll 4
			for (int i = 0; i < mr; i++) {
				__m512 av = _mm512_set1_ps(ak[i * lda + k]);
				acc0[0][i] = _mm512_fmadd_ps(av, b0, acc0[0][i]);
				acc1[0][i] = _mm512_fmadd_ps(av, b1, acc1[0][i]);
			}
		}
	}
#pragma GCC unroll 4
	for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
		for (int u = 1; u < ku; u++) {
			acc0[0][i] = _mm512_add_ps(acc0[0][i], acc0[u][i]);
			acc1[0][i] = _mm512_add_ps(acc1[0][i], acc1[u][i]);
		}
	if (ep->bias_col) {
		bc0 = _mm512_maskz_loadu_ps(m0, ep->bias_col + j0);
		bc1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + j0 + 16);
	}
#pragma GCC unroll 4
	for (int i = 0; i < mr; i++)
		store_row(c + i * ldc + j0, acc0[0][i], acc1[0][i], m0, m1, ep, bc0, bc1,
			  ep->bias_row ? ep->bias_row + i : NULL);
}

static void gemv(const gemm_packed_view *v, int mr, const float *a, int64_t lda, int64_t q0,
		 int64_t q1, float *c, int64_t ldc, const gemm_tile_ep *ep)
{
	for (int64_t q = q0; q < q1; q++) {
		switch (mr) {
		case 4: gemv_panel(4, 1, v, a, lda, q, c, ldc, ep); break;
		case 3: gemv_panel(3, 2, v, a, lda, q, c, ldc, ep); break;
		case 2: gemv_panel(2, 2, v, a, lda, q, c, ldc, ep); break;
		default: gemv_panel(1, 4, v, a, lda, q, c, ldc, ep); break;
		}
	}
}

/* KC 256: the A rows of one tile (14 x 1 KiB) stay in L1 while the tile
 * walks the N block; KC x NC = 512 KiB of packed B stays in L2. */
const gemm_isa_desc gemm_desc_avx512 = {
	.id = GEMM_ISA_AVX512, .name = "avx512",
	.mr = MR, .nr = NR, .kc = 256, .nc = 512, .mc = 112,
	.kernel = kernel,
	.kernel_t = kernel_t,
	.kernel_bd = kernel_bd,
	.gemv = gemv,
};
