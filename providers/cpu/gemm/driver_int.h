/*
 * driver_int.h: what the GEMM driver (driver.c) shares with its batch entry
 * points (batch.c): the problem being run and the steps of running one.
 */
#ifndef ORTMK_GEMM_DRIVER_INT_H
#define ORTMK_GEMM_DRIVER_INT_H

#include "gemm_kern.h"

/* Below this many flops per thread, waking another one costs more than it
 * saves. */
#define MIN_FLOPS_PER_THREAD (1 << 18)
/* Bytes of packed B a task may expect to keep in L2 (1 MiB on Zen 4,
 * 2 MiB on Sapphire Rapids, shared with A and C). */
#define L2_BUDGET ((int64_t)512 * 1024)
/* Products with at most this many rows and a packed B go to the ISA's
 * gemv kernel when it has one. */
#define GEMV_ROWS 4

typedef struct problem {
	int64_t M, N, K;
	const float *A;
	int64_t lda;
	int transA;
	int copy_a;              /* copy A's blocks (transposed or aliasing) */
	int64_t lds;             /* row stride of the copy */
	gemm_packed_view b;      /* b.data NULL: B is packed on the fly */
	const float *B;          /* ... from here */
	int64_t ldb;
	int transB;
	int b_direct;            /* ... or read in place (kernel_bd) */
	gemm_pack_fn *pack;      /* ... or by this */
	void *pack_ctx;
	gemm_epilogue ep;
	gemm_tile_ep tile;       /* the per-call part of the kernel epilogue */
	float *C;
	int64_t ldc;
	int tm, tn;              /* thread grid */
	cpu_pool *pool;         /* acquired, or NULL */
	size_t b_floats;         /* per-task scratch: packed B block, then A */
	float *own_scratch;      /* without a pool: allocated for the call */
	float *given_scratch;    /* ... or the caller's (gemm_batch.scratch) */
	float *scratch;          /* without a pool: whichever of the two */
} problem;

/* C's rectangle number i of p's tm x tn grid (a pool task). */
void gemm_drv_task(void *arg, int64_t i, int member);
/* The task grid for `threads` (p->tm, p->tn). */
void gemm_drv_split(problem *p, int threads);
/* K == 0: C = act(beta * C + bias), nothing to multiply. */
void gemm_drv_epilogue_only(const problem *p);
/* Checks the arguments both entry points share and fills p. */
int gemm_drv_setup(problem *p, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
		   int transA, const gemm_epilogue *ep, float *C, int64_t ldc);
/* The row stride of A's copy in a task's scratch (kc: the K block), or 0
 * when A is read in place. */
int64_t gemm_drv_copy_stride(const gemm_isa_desc *d, int transA, int64_t lda, int64_t M,
			     int64_t kc);
/* Sizes and reserves the tasks' scratch (pool, caller's or allocated). */
int gemm_drv_scratch_setup(problem *p, cpu_pool *pool);
/* 0 when ORTMK_CPU_GEMV=0 turned the few-row kernel off. */
int gemm_drv_gemv_enabled(void);
/* 0 when ORTMK_CPU_GEMM_DIRECT=0 made every on-the-fly B packed. */
int gemm_drv_direct_enabled(void);
/* A B (K x N) the tasks pack as they go, for the ISA d. */
void gemm_drv_fly_b(problem *p, const gemm_isa_desc *d, int64_t K, int64_t N, int64_t ldb,
		    int transB);

#endif
