/*
 * igemm_kern: what the int8 microkernel files (ikern_*.c, each compiled
 * with its own -m flags) share with the driver and the packer (baseline
 * x86-64, reaching a kernel only through the descriptor of an ISA the CPU
 * runs).
 *
 * Microkernel contract: for rows [0, mr) of A (row stride lda) and
 * columns [0, nr) of B (walked as igemm_bwalk says, ceil(nr / 16)
 * vectors of 16 columns),
 *   acc[i][j] = sum over the groups of A_u[i][k] * B_s[k][j]
 * which is added to C's int32 values unless ep->first, and stored as
 * int32 unless ep->finish; with finish, the epilogue (igemm_tile_ep) turns
 * it into the result.  1 <= mr <= MR, 1 <= nr <= NR, at least one group.
 */
#ifndef ORTMK_IGEMM_KERN_H
#define ORTMK_IGEMM_KERN_H

#include <stdint.h>

#include "igemm.h"

/* The per-tile epilogue: pointers are at the tile's first row / column. */
typedef struct igemm_tile_ep {
	int first;                     /* C holds nothing yet */
	int finish;                    /* last K block: apply the rest */
	/* y = acc + row_off[i] + col_off[j] + rk_row[i] * rk_col[j]
	 *   + rk2_row[i] * rk2_col[j]   (modulo 2^32; NULLs are 0) */
	const int32_t *row_off, *col_off;
	const int32_t *rk_row, *rk_col;
	const int32_t *rk2_row, *rk2_col;
	/* then, when is_float, as igemm_out (the pointers offset) */
	int is_float;
	float scale;
	const float *scale_row, *scale_col;
	const float *bias_row, *bias_col;
	const float *add;              /* the addend at the tile's (0, 0), C's ldc */
	int clamp;                     /* min(hi, max(lo, y)), as igemm_out */
	float lo, hi;
} igemm_tile_ep;

/* Where a kernel reads B: the 64 bytes of vector v (16 columns x 4 k)
 * of group q of tap t are at
 *   b + toff[t] + q * gstride + v * vstride,      t < ntaps, q < gpt
 * and each row of A holds its groups in that (t, q) order, 4 bytes each.
 * A packed B block is one tap (toff {0}) of kg groups 64 bytes apart,
 * vstride the panel stride; a convolution read in place (igemm_conv.c)
 * has one tap per kernel position, its channel groups a plane apart and
 * the pixels' vectors 64 bytes apart. */
typedef struct igemm_bwalk {
	const int8_t *b;
	int64_t vstride;
	int ntaps;
	const int64_t *toff;
	int64_t gpt, gstride;
} igemm_bwalk;

typedef void igemm_kernel_fn(const uint8_t *a, int64_t lda, const igemm_bwalk *bw, void *c,
			     int64_t ldc, int mr, int nr, const igemm_tile_ep *ep);

/* sums[j] += sum over kg groups of the panel's column j (16 columns). */
typedef void igemm_colsum_fn(const int8_t *panel, int64_t kg, int32_t *sums);

typedef struct igemm_isa_desc {
	igemm_isa id;
	const char *name;
	int mr, nr;                    /* microkernel tile (nr a multiple of 16) */
	int full_rows;                 /* row tiles of mr rows, the last ragged
					* (else nearly equal heights) */
	igemm_kernel_fn *kernel;
	igemm_colsum_fn *colsum;
} igemm_isa_desc;

extern const igemm_isa_desc igemm_desc_scalar;
#ifdef IGEMM_HAVE_AVX2
extern const igemm_isa_desc igemm_desc_avx2;
#endif
#ifdef IGEMM_HAVE_AVXVNNI
extern const igemm_isa_desc igemm_desc_avxvnni;
#endif
#ifdef IGEMM_HAVE_AVX512VNNI
extern const igemm_isa_desc igemm_desc_avx512vnni;
#endif
#ifdef IGEMM_HAVE_AMX
extern const igemm_isa_desc igemm_desc_amx;
#endif

/* NULL when this binary or CPU lacks it (AUTO: the best). */
const igemm_isa_desc *igemm_isa_desc_get(igemm_isa isa);
/* The same for a product of M rows whose kernels walk runs of `groups`
 * groups of 4 k (a K block, or a tap's channels): AUTO may pick a lesser
 * ISA whose kernel suits the shape better (AMX's below 16 of either). */
const igemm_isa_desc *igemm_desc_for(igemm_isa isa, int64_t M, int64_t groups);

/* Rows [*i0, *i1) of row tile t of the `tiles` that cover [m0, m1) (tiles
 * = ceil((m1 - m0) / mr)): nearly equal heights, or mr rows each and the
 * last ragged when the kernel wants full tiles. */
static inline void igemm_tile_rows(const igemm_isa_desc *d, int64_t m0, int64_t m1, int64_t t,
				   int64_t tiles, int64_t *i0, int64_t *i1)
{
	if (d->full_rows) {
		*i0 = m0 + t * d->mr;
		*i1 = *i0 + d->mr < m1 ? *i0 + d->mr : m1;
	} else {
		*i0 = m0 + t * (m1 - m0) / tiles;
		*i1 = m0 + (t + 1) * (m1 - m0) / tiles;
	}
}

/* y clamped as igemm_out says: min(hi, max(lo, y)) in maxps' and minps'
 * operand order, so a NaN stays (Relu's bits at lo 0, hi +inf). */
static inline float igemm_clampf(float y, float lo, float hi)
{
	y = lo > y ? lo : y;
	return hi < y ? hi : y;
}

/* The tile epilogue's clamp from the output's. */
static inline void igemm_ep_clamp(igemm_tile_ep *ep, const igemm_out *o)
{
	ep->clamp = o->clamp;
	ep->lo = o->lo;
	ep->hi = o->hi;
}

/* The scalar epilogue of one element (the kernels' reference, and their
 * tails): y from acc as igemm_tile_ep says, stored at c (int32 or float);
 * addp: the element's addend (ep->add + i * ldc + j) or NULL. */
static inline void igemm_ep_one(const igemm_tile_ep *ep, int i, int j, uint32_t acc, void *c,
				const float *addp)
{
	uint32_t y = acc;
	float f;

	if (ep->row_off)
		y += (uint32_t)ep->row_off[i];
	if (ep->col_off)
		y += (uint32_t)ep->col_off[j];
	if (ep->rk_row)
		y += (uint32_t)ep->rk_row[i] * (uint32_t)ep->rk_col[j];
	if (ep->rk2_row)
		y += (uint32_t)ep->rk2_row[i] * (uint32_t)ep->rk2_col[j];
	if (!ep->is_float) {
		*(int32_t *)c = (int32_t)y;
		return;
	}
	f = (float)(int32_t)y;
	f = f * (ep->scale_row ? ep->scale_row[i] : ep->scale_col ? ep->scale_col[j] : ep->scale);
	if (ep->bias_row)
		f = f + ep->bias_row[i];
	else if (ep->bias_col)
		f = f + ep->bias_col[j];
	if (addp)
		f = f + *addp;
	if (ep->clamp)
		f = igemm_clampf(f, ep->lo, ep->hi);
	*(float *)c = f;
}

#endif
