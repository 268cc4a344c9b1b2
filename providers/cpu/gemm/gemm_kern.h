/*
 * gemm_kern: what the per-ISA microkernel files (kern_*.c, each compiled
 * with its own -m flags) share with the packer and the driver, which are
 * compiled for baseline x86-64 and reach the kernels only through the
 * descriptor of an ISA the CPU supports.
 *
 * Microkernel contract: C[0:mr, 0:nr] (row stride ldc) gets
 *   alpha * A[0:mr, 0:kc] * Bpanel + beta * C        (beta 0: C not read)
 * and, when `finish`, + bias then the activation.  A is row-major with row
 * stride lda (k contiguous); Bpanel is kc rows of NR floats (zero-padded
 * past nr), 64-byte aligned.  1 <= mr <= MR, 1 <= nr <= NR, kc >= 1.
 * The optional kernel_t is the same with A stored transposed: element
 * (i, k) at a[k * lda + i], so a tile's mr values of one k are contiguous
 * (A^T operands, Winograd's V, need no transposed copy).
 */
#ifndef ORTMK_GEMM_KERN_H
#define ORTMK_GEMM_KERN_H

#include <stdint.h>

#include "gemm.h"

typedef struct gemm_tile_ep {
	float alpha, beta;
	int finish;               /* last K block: add bias, apply act */
	const float *bias_col;    /* bias of the tile's first column, or NULL */
	const float *bias_row;    /* bias of the tile's first row, or NULL */
	gemm_act act;
	float lo, hi;             /* the clamp for RELU/CLIP */
	/* Floats from the panel to the one to prefetch into L2 as the tile
	 * walks it (the next panel, for a B streaming from memory), or 0. */
	int64_t pf_b;
} gemm_tile_ep;

typedef void gemm_kernel_fn(int64_t kc, const float *a, int64_t lda, const float *b,
			    float *c, int64_t ldc, int mr, int nr, const gemm_tile_ep *ep);

/* The same with B not packed: row k of the tile's nr columns at
 * b + k * ldb, anywhere (no alignment, nothing read past column nr). */
typedef void gemm_kernel_bd_fn(int64_t kc, const float *a, int64_t lda, const float *b,
			       int64_t ldb, float *c, int64_t ldc, int mr, int nr,
			       const gemm_tile_ep *ep);

struct gemm_packed_view;

/* Rows [0, mr) of C (1 <= mr <= 4, row stride ldc) times panels [q0, q1)
 * of a packed B, over all of K: each column's sum is kept in registers
 * across the K blocks and stored once, through the epilogue (finish set;
 * bias_col/bias_row point at column/row 0).  The few rows of a batch-1
 * MatMul/Gemm, where B streams from memory and the product is bound by
 * its bandwidth. */
typedef void gemm_gemv_fn(const struct gemm_packed_view *v, int mr, const float *a,
			  int64_t lda, int64_t q0, int64_t q1, float *c, int64_t ldc,
			  const gemm_tile_ep *ep);

typedef struct gemm_isa_desc {
	gemm_isa id;
	const char *name;
	int mr, nr;               /* microkernel tile */
	int kc;                   /* K block (packed B rows per block), at most */
	int nc;                   /* N block: kc x nc of packed B stays in L2 */
	int mc;                   /* rows of C per group (C group stays in L2) */
	gemm_kernel_fn *kernel;
	gemm_kernel_fn *kernel_t; /* NULL: a transposed A is copied first */
	gemm_kernel_bd_fn *kernel_bd; /* NULL: B is always packed */
	gemm_gemv_fn *gemv;       /* NULL: few rows go through the tiles */
} gemm_isa_desc;

extern const gemm_isa_desc gemm_desc_scalar;
#ifdef GEMM_HAVE_AVX2
extern const gemm_isa_desc gemm_desc_avx2;
#endif
#ifdef GEMM_HAVE_AVX512
extern const gemm_isa_desc gemm_desc_avx512;
#endif

/* NULL when this binary or CPU lacks it (AUTO: the best). */
const gemm_isa_desc *gemm_isa_desc_get(gemm_isa isa);

/* pack.c's view of a checked packed B, for the driver. */
typedef struct gemm_packed_view {
	const gemm_isa_desc *isa;
	int64_t K, N;
	int64_t kc;               /* rows per K block (the last may be shorter) */
	int64_t panels;           /* ceil(N / NR) */
	const float *data;
} gemm_packed_view;

int gemm_packed_view_get(const void *packed, gemm_packed_view *v);

/* The panel of K block starting at row k0 (a multiple of kc), panel p.
 * The panels of one K block are contiguous, each rows x NR. */
static inline const float *gemm_packed_panel(const gemm_packed_view *v, int64_t k0, int64_t p)
{
	int64_t rows = v->K - k0 < v->kc ? v->K - k0 : v->kc;
	return v->data + (k0 * v->panels + p * rows) * v->isa->nr;
}

/* FNV-1a of n bytes: the check word of the float and int8 pack headers
 * (pack.c, igemm_pack.c). */
uint32_t gemm_fnv1a(const void *p, size_t n);

/* Writes a packed B's header for d into dst (checked as gemm_pack_b does)
 * and describes it in v; the panels are left to gemm_pack_panels. */
int gemm_pack_init(const gemm_isa_desc *d, int64_t K, int64_t N, void *dst, size_t dst_size,
		   gemm_packed_view *v);
/* Packs op(B) into a view's layout: the panels [p0, p1) of every K block. */
void gemm_pack_panels(const gemm_packed_view *v, const float *B, int64_t ldb, int transB,
		      int64_t p0, int64_t p1);
/* Rows [k0, k0 + rows) of op(B) (K x N), panels [p0, p1) of width nr, into
 * dst: one panel after the other, each rows x nr, zero-padded past N. */
void gemm_pack_block(const float *B, int64_t ldb, int transB, int64_t N, int64_t nr,
		     int64_t k0, int64_t rows, int64_t p0, int64_t p1, float *dst);
/* The K block depth a packed B of K rows gets: K cut into even blocks of
 * at most d->kc. */
int64_t gemm_choose_kc(const gemm_isa_desc *d, int64_t K);

#endif
