/*
 * gemm: the CPU provider's packed single-precision matrix multiply.
 *
 *   C = act(alpha * op(A) * op(B) + beta * C + bias)     row-major, fp32
 *
 * op(A) is M x K, op(B) is K x N.  B is the operand that gets packed: into
 * KC x NR panels for the microkernel of one ISA (AVX-512, AVX2+FMA or
 * scalar, chosen once from cpuid).  Weights (the B of MatMul/Gemm, the
 * filter of a convolution computed as im2col(X)^T x W^T) are packed ONCE at
 * load with gemm_pack_b and then used by every gemm_compute; gemm_sgemm
 * packs B on the fly for products of two activations.  A is read in place
 * (row-major), or copied into a cache-friendly block when it is transposed
 * or its row stride aliases in L1.
 *
 * The packed form starts with a 64-byte header (magic, format version, ISA,
 * panel geometry, K, N, header checksum), so it can be written to disk as a
 * pre-pack cache and validated with gemm_pack_b_check when read back: a
 * cache made for another ISA or shape is refused, never misread.
 *
 * Threads: a cpu_pool (threadpool.h) splits C into one tile per thread; the
 * calling thread takes part.  A NULL pool runs on the caller alone.
 *
 * Errors are negative errno values (-EINVAL, -ENOMEM, -ENOTSUP); 0 is OK.
 * Callers: providers/cpu/ops (MatMul, Gemm, Conv), tests/unit/test_gemm.c,
 * tools/bench-gemm/bench_gemm.c.
 */
#ifndef ORTMK_GEMM_H
#define ORTMK_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"

typedef enum gemm_isa {
	GEMM_ISA_AUTO = 0,      /* the best this CPU supports */
	GEMM_ISA_SCALAR = 1,
	GEMM_ISA_AVX2 = 2,      /* AVX2 + FMA */
	GEMM_ISA_AVX512 = 3,    /* AVX-512 F + VL */
} gemm_isa;

/* The ISA GEMM_ISA_AUTO stands for (decided once, from cpuid). */
gemm_isa gemm_isa_best(void);
/* 1 when this binary has the ISA's kernels and this CPU runs them. */
int gemm_isa_supported(gemm_isa isa);
const char *gemm_isa_name(gemm_isa isa);

typedef enum gemm_act {
	GEMM_ACT_NONE = 0,
	GEMM_ACT_RELU = 1,      /* max(x, 0) */
	GEMM_ACT_CLIP = 2,      /* min(max(x, clip_min), clip_max) */
} gemm_act;

typedef enum gemm_bias_kind {
	GEMM_BIAS_NONE = 0,
	GEMM_BIAS_COL = 1,      /* bias[j], N values: MatMul + Add */
	GEMM_BIAS_ROW = 2,      /* bias[i], M values: Conv with the filter as A */
} gemm_bias_kind;

/* Called once per finished block of C (bias and act applied) while it is
 * hot in cache, for element-wise work the kernel does not fuse (Gelu...).
 * Runs on any pool thread, concurrently for disjoint blocks. */
typedef void gemm_post_fn(void *ctx, float *c, int64_t ldc, int64_t row0, int64_t rows,
			  int64_t col0, int64_t cols);

/* What happens to each result.  NULL stands for {alpha 1, beta 0, nothing
 * else}.  beta == 0 never reads C (it may hold NaN). */
typedef struct gemm_epilogue {
	float alpha, beta;
	const float *bias;
	gemm_bias_kind bias_kind;
	gemm_act act;
	float clip_min, clip_max;
	gemm_post_fn *post;     /* optional */
	void *post_ctx;
} gemm_epilogue;

#define GEMM_EPILOGUE_INIT {1.0f, 0.0f, NULL, GEMM_BIAS_NONE, GEMM_ACT_NONE, 0.0f, 0.0f, \
			    NULL, NULL}

/* ---- B packing (pack.c) ---- */

#define GEMM_PACK_VERSION 1
#define GEMM_PACK_ALIGN 64

/* Bytes gemm_pack_b needs for op(B) of K x N for isa (AUTO: the best), a
 * multiple of GEMM_PACK_ALIGN; 0 when the CPU lacks isa, K or N is
 * negative or the size overflows. */
size_t gemm_pack_b_size(gemm_isa isa, int64_t K, int64_t N);
/* Packs op(B) (B itself, ldb its row stride, or B^T when transB) into dst,
 * which is GEMM_PACK_ALIGN-aligned and at least gemm_pack_b_size bytes.
 * -ENOTSUP when the CPU lacks isa; -EINVAL on a bad argument. */
int gemm_pack_b(gemm_isa isa, const float *B, int64_t ldb, int transB, int64_t K, int64_t N,
		void *dst, size_t dst_size);
/* Validates a packed B read back from anywhere (a pre-pack cache file):
 * header intact, current format version, an ISA this CPU runs, the
 * expected K and N (negative: any) and size >= the size it implies.
 * 0 or -EINVAL / -ENOTSUP. */
int gemm_pack_b_check(const void *packed, size_t size, int64_t K, int64_t N);
/* The ISA, K and N a (checked) packed B was made for; NULLs are skipped. */
void gemm_pack_b_info(const void *packed, gemm_isa *isa, int64_t *K, int64_t *N);

/* ---- products (driver.c) ---- */

/* C (M x N, row stride ldc) from op(A) (A with row stride lda, or A^T when
 * transA) and a packed B of K x N.  The ISA is the packed B's. */
int gemm_compute(cpu_pool *pool, int64_t M, int64_t N, int64_t K, const float *A,
		 int64_t lda, int transA, const void *packed_b, const gemm_epilogue *ep,
		 float *C, int64_t ldc);

/* The same with an unpacked B (isa AUTO: the best): each task packs the
 * kc x NC blocks of B it needs into its scratch as it goes (the pool
 * keeps the scratch between calls; without a pool it is allocated per
 * call).  For a single row of C a plain GEMV that reads B in place is
 * faster. */
int gemm_sgemm(cpu_pool *pool, gemm_isa isa, int transA, int transB, int64_t M, int64_t N,
	       int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
	       const gemm_epilogue *ep, float *C, int64_t ldc);

/* A B that is never stored as a matrix (a convolution's im2col): fn
 * writes rows [k0, k0 + rows) x panels [p0, p1) of op(B) (K x N) into
 * dst in gemm_pack_block's layout: panel after panel, each rows x nr,
 * zero-padded past N.  Called concurrently from pool threads. */
typedef void gemm_pack_fn(void *ctx, int64_t k0, int64_t rows, int64_t p0, int64_t p1,
			  int64_t nr, float *dst);

/* gemm_sgemm with B produced block by block by fn. */
int gemm_sgemm_packer(cpu_pool *pool, gemm_isa isa, int transA, int64_t M, int64_t N,
		      int64_t K, const float *A, int64_t lda, gemm_pack_fn *fn, void *fn_ctx,
		      const gemm_epilogue *ep, float *C, int64_t ldc);

/* A batch of independent products of one shape (batched MatMul, the 16
 * products of a Winograd convolution): item i multiplies A[i] by B[i]
 * (gemm_sgemm_batch) or by the packed packed[i] (gemm_compute_batch, all
 * packed for the same ISA) into C[i], with the same strides and
 * epilogue (whose post must be NULL).  One job on the pool: items go to
 * the threads whole when there are enough of them, so no product is cut
 * into thin slices and the pool is woken once, not once per item. */
typedef struct gemm_batch {
	int64_t count;
	const float *const *A;
	const float *const *B;
	const void *const *packed;
	float *const *C;
	/* gemm_compute_batch without a pool (or inside a task of the pool's
	 * running job): the scratch to use, 64-byte aligned, of
	 * gemm_compute_batch_scratch bytes; NULL: allocated for the call. */
	void *scratch;
} gemm_batch;

/* The scratch gemm_compute_batch needs without a pool (0 for none). */
size_t gemm_compute_batch_scratch(int64_t M, int64_t K, int64_t lda, int transA);

int gemm_compute_batch(cpu_pool *pool, int64_t M, int64_t N, int64_t K, int64_t lda,
		       int transA, const gemm_epilogue *ep, int64_t ldc, const gemm_batch *b);
/* The part-th of `parts` column ranges of every item of gemm_compute_batch
 * (ranges on the packed B's panel boundaries, as gemm_compute would cut
 * the columns), on the calling thread alone: b->scratch as without a pool.
 * Its columns [*c0, *c1) (empty when the panels are fewer than parts). */
int gemm_compute_batch_part(int64_t M, int64_t N, int64_t K, int64_t lda, int transA,
			    const gemm_epilogue *ep, int64_t ldc, const gemm_batch *b, int part,
			    int parts, int64_t *c0, int64_t *c1);
int gemm_sgemm_batch(cpu_pool *pool, gemm_isa isa, int transA, int transB, int64_t M,
		     int64_t N, int64_t K, int64_t lda, int64_t ldb, const gemm_epilogue *ep,
		     int64_t ldc, const gemm_batch *b);

#endif
