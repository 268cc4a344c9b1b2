/*
 * ikern_avx512vnni: the int8 microkernel for AVX-512 VNNI, compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512vnni and reached only through
 * igemm_desc_avx512vnni after cpuid and XGETBV said yes.
 *
 * A 6 x 64 tile of int32 sums in 24 zmm registers: per group of 4 k, four
 * 64-byte vectors of B (16 columns x 4 bytes each) are loaded,
 * and each row of A broadcasts its 4 bytes into vpdpbusd against them
 * (u8 x s8, four products summed into each 32-bit lane, wrapping).  The
 * epilogue (corrections, float conversion, scale, bias, Relu) runs on the
 * registers before the tile is stored, with masks for a ragged edge.
 * Each (rows, vectors) pair is its own inlined specialisation so the
 * accumulators stay in registers.
 */
#include <immintrin.h>
#include <string.h>

#include "ikern_ep512.h"

enum { MR = 6, NV = 4, NR = NV * 16 };

static inline __attribute__((always_inline)) void tile(const int rows, const int nv,
							const uint8_t *a, int64_t lda,
							const igemm_bwalk *bw, void *c, int64_t ldc,
							int nr, const igemm_tile_ep *ep)
{
	const int64_t vs = bw->vstride, gs = bw->gstride, gpt = bw->gpt;
	__m512i acc[MR][NV];

	for (int i = 0; i < rows; i++)
		for (int v = 0; v < nv; v++)
			acc[i][v] = _mm512_setzero_si512();
	for (int t = 0; t < bw->ntaps; t++) {
		const int8_t *bq = bw->b + bw->toff[t];
		for (int64_t q = 0; q < gpt; q++, a += 4, bq += gs) {
			__m512i bv[NV];
			for (int v = 0; v < nv; v++)
				bv[v] = _mm512_loadu_si512(bq + v * vs);
			for (int i = 0; i < rows; i++) {
				int32_t w;
				memcpy(&w, a + i * lda, 4);
				__m512i av = _mm512_set1_epi32(w);
				for (int v = 0; v < nv; v++)
					acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], av, bv[v]);
			}
		}
	}
	for (int i = 0; i < rows; i++) {
		int32_t *ci = (int32_t *)c + i * ldc;
		for (int v = 0; v < nv; v++)
			ik512_out(ep, i, 16 * v, lane_mask(nr - 16 * v), acc[i][v], ci + 16 * v, ldc);
	}
}

/* One function per vector count, each switching on the rows. */
#define IK_ARGS a, lda, bw, c, ldc, nr, ep
static void tile_v1(int mr, const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c,
		    int64_t ldc, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, 1, IK_ARGS); break;
	case 2: tile(2, 1, IK_ARGS); break;
	case 3: tile(3, 1, IK_ARGS); break;
	case 4: tile(4, 1, IK_ARGS); break;
	case 5: tile(5, 1, IK_ARGS); break;
	default: tile(6, 1, IK_ARGS); break;
	}
}

static void tile_v2(int mr, const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c,
		    int64_t ldc, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, 2, IK_ARGS); break;
	case 2: tile(2, 2, IK_ARGS); break;
	case 3: tile(3, 2, IK_ARGS); break;
	case 4: tile(4, 2, IK_ARGS); break;
	case 5: tile(5, 2, IK_ARGS); break;
	default: tile(6, 2, IK_ARGS); break;
	}
}

static void tile_v3(int mr, const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c,
		    int64_t ldc, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, 3, IK_ARGS); break;
	case 2: tile(2, 3, IK_ARGS); break;
	case 3: tile(3, 3, IK_ARGS); break;
	case 4: tile(4, 3, IK_ARGS); break;
	case 5: tile(5, 3, IK_ARGS); break;
	default: tile(6, 3, IK_ARGS); break;
	}
}

static void tile_v4(int mr, const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c,
		    int64_t ldc, int nr, const igemm_tile_ep *ep)
{
	switch (mr) {
	case 1: tile(1, 4, IK_ARGS); break;
	case 2: tile(2, 4, IK_ARGS); break;
	case 3: tile(3, 4, IK_ARGS); break;
	case 4: tile(4, 4, IK_ARGS); break;
	case 5: tile(5, 4, IK_ARGS); break;
	default: tile(6, 4, IK_ARGS); break;
	}
}
#undef IK_ARGS

static void kernel(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c, int64_t ldc,
		   int mr, int nr, const igemm_tile_ep *ep)
{
	switch ((nr + 15) / 16) {
	case 1: tile_v1(mr, a, lda, bw, c, ldc, nr, ep); break;
	case 2: tile_v2(mr, a, lda, bw, c, ldc, nr, ep); break;
	case 3: tile_v3(mr, a, lda, bw, c, ldc, nr, ep); break;
	default: tile_v4(mr, a, lda, bw, c, ldc, nr, ep); break;
	}
}

const igemm_isa_desc igemm_desc_avx512vnni = {
	.id = IGEMM_ISA_AVX512VNNI, .name = "avx512vnni", .mr = MR, .nr = NR,
	.kernel = kernel, .colsum = ik512_colsum,
};
