/*
 * ikern_amx: the int8 microkernel for AMX-INT8 (Sapphire Rapids and
 * later Xeons), compiled with -mamx-tile -mamx-int8 and the AVX-512 flags
 * of ikern_avx512vnni.c, reached only through igemm_desc_amx after cpuid,
 * XGETBV and the kernel's permission (igemm_driver.c) said yes.
 *
 * A tile of up to 32 x 32 int32 sums in four accumulator tiles (tmm0-3:
 * rows 0-15 / 16-31 x columns 0-15 / 16-31), fed per 64 k by two A tiles
 * (tmm4-5: 16 rows of 64 bytes of A_u, read in place with A's row
 * stride) and two B tiles (tmm6-7: 16 groups of a 16-column vector, the
 * igemm layout unchanged: a group's 64 bytes are a B tile's row, the
 * groups gstride apart), multiplied by tdpbusd (u8 x s8, the products of
 * four k summed into each int32, wrapping as vpdpbusd does).
 *
 * Ragged tiles: the tile configuration gives the A and accumulator tiles
 * only the rows the call has (so no row past A's last is read) and omits
 * the second column vector when nr <= 16 (no panel past B's last is
 * read); a thread keeps its configuration until a call needs another.
 * A run of fewer than 16 groups (a K block's or a tap's tail) is copied
 * into zero-padded buffers, so no byte past A's row or B's groups is
 * read.  The accumulators are stored to a buffer on the stack and
 * finished by the AVX-512 epilogue (ikern_ep512.h), bit for bit the same
 * results as the other kernels.
 */
#include <immintrin.h>
#include <string.h>

#include "ikern_ep512.h"

enum { MR = 32, NR = 32, KG = 16 };

/* The tile configuration (palette 1), as ldtilecfg reads it. */
typedef struct tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tilecfg;

static _Thread_local tilecfg cur;

/* Loads the configuration for r0 + r1 rows and nv column vectors unless
 * this thread has it already. */
static void configure(int r0, int r1, int nv)
{
	tilecfg c;

	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int t = 0; t < 8; t++) {
		int rows = 16;
		if (t < 4)
			rows = (t & 2 ? r1 : r0) * (((t & 1) == 0) || nv == 2);
		else if (t < 6)
			rows = t == 4 ? r0 : r1;
		else if (t == 7 && nv < 2)
			rows = 0;
		c.rows[t] = (uint8_t)rows;
		c.colsb[t] = rows ? 64 : 0;
	}
	if (memcmp(&c, &cur, sizeof(c))) {
		_tile_loadconfig(&c);
		cur = c;
	}
}

/* One run of 16 groups: A's two row tiles at a (row stride lda), B's two
 * vectors at b and b + vs (group stride gs). */
static inline __attribute__((always_inline)) void step(const int two_a, const int two_b,
							const uint8_t *a, int64_t lda, const int8_t *b,
							int64_t gs, int64_t vs)
{
	_tile_loadd(6, b, gs);
	_tile_loadd(4, a, lda);
	_tile_dpbusd(0, 4, 6);
	if (two_b) {
		_tile_loadd(7, b + vs, gs);
		_tile_dpbusd(1, 4, 7);
	}
	if (two_a) {
		_tile_loadd(5, a + 16 * lda, lda);
		_tile_dpbusd(2, 5, 6);
		if (two_b)
			_tile_dpbusd(3, 5, 7);
	}
}

static inline __attribute__((always_inline)) void tile(const int two_a, const int two_b,
							const uint8_t *a, int64_t lda,
							const igemm_bwalk *bw, int mr, int32_t *acc)
{
	const int64_t vs = bw->vstride, gs = bw->gstride, gpt = bw->gpt;
	const int64_t full = gpt / KG * KG, rem = gpt - full;
	_Alignas(64) uint8_t at[MR * 64];
	_Alignas(64) int8_t bt[2 * KG * 64];

	_tile_zero(0);
	if (two_b)
		_tile_zero(1);
	if (two_a) {
		_tile_zero(2);
		if (two_b)
			_tile_zero(3);
	}
	if (rem) {
		memset(at, 0, (size_t)mr * 64);
		memset(bt, 0, sizeof(bt));
	}
	for (int t = 0; t < bw->ntaps; t++, a += gpt * 4) {
		const int8_t *bq = bw->b + bw->toff[t];
		for (int64_t q = 0; q < full; q += KG)
			step(two_a, two_b, a + q * 4, lda, bq + q * gs, gs, vs);
		if (!rem)
			continue;
		/* the tail: rem groups into the padded buffers (the bytes past
		 * them stay 0 in A, so B's rows past rem multiply nothing) */
		for (int i = 0; i < mr; i++)
			memcpy(at + i * 64, a + i * lda + full * 4, (size_t)rem * 4);
		for (int64_t g = 0; g < rem; g++) {
			memcpy(bt + g * 64, bq + (full + g) * gs, 64);
			if (two_b)
				memcpy(bt + (KG + g) * 64, bq + (full + g) * gs + vs, 64);
		}
		step(two_a, two_b, at, 64, bt, 64, KG * 64);
	}
	_tile_stored(0, acc, NR * 4);
	if (two_b)
		_tile_stored(1, acc + 16, NR * 4);
	if (two_a) {
		_tile_stored(2, acc + 16 * NR, NR * 4);
		if (two_b)
			_tile_stored(3, acc + 16 * NR + 16, NR * 4);
	}
}

static void kernel(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c, int64_t ldc,
		   int mr, int nr, const igemm_tile_ep *ep)
{
	_Alignas(64) int32_t acc[MR * NR];
	int r0 = mr < 16 ? mr : 16, r1 = mr - r0, nv = nr > 16 ? 2 : 1;

	configure(r0, r1, nv);
	if (r1 && nv == 2)
		tile(1, 1, a, lda, bw, mr, acc);
	else if (r1)
		tile(1, 0, a, lda, bw, mr, acc);
	else if (nv == 2)
		tile(0, 1, a, lda, bw, mr, acc);
	else
		tile(0, 0, a, lda, bw, mr, acc);
	for (int i = 0; i < mr; i++) {
		int32_t *ci = (int32_t *)c + i * ldc;
		for (int v = 0; v < nv; v++)
			ik512_out(ep, i, 16 * v, lane_mask(nr - 16 * v),
				  _mm512_load_si512(acc + i * NR + 16 * v), ci + 16 * v, ldc);
	}
}

const igemm_isa_desc igemm_desc_amx = {
	.id = IGEMM_ISA_AMX, .name = "amx", .mr = MR, .nr = NR, .full_rows = 1,
	.kernel = kernel, .colsum = ik512_colsum,
};
