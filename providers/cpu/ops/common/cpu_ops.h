/*
 * cpu_ops: what the CPU operators share with each other (not with the
 * executor): the single-precision GEMM, the broadcasting iterator, strided
 * copies, convolution/pooling window geometry and small input helpers.
 */
#ifndef ORTMK_CPU_OPS_H
#define ORTMK_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"
#include "window.h"

/* Newest opset whose semantics the kernels were written against. */
#define CPU_OPSET_MAX 24

/* Hot loops are compiled for AVX-512, AVX2+FMA and baseline x86-64; the
 * loader picks one by cpuid (gcc target_clones, an ifunc). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_MULTIVERSION \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_MULTIVERSION
#endif

/* Whether this CPU runs AVX-512F, for the few kernels written with its
 * intrinsics beside a portable loop (cpuid, asked once; common.c). */
int cpu_has_avx512(void);
/* Whether it runs AVX2 and FMA (x86-64-v3): the 8-lane intrinsic kernels. */
int cpu_has_avx2_fma(void);

/* ---- gemm.c ---- */

/* C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T.
 * op(A) is M x K, op(B) is K x N.  beta == 0 ignores C's prior contents. */
void cpu_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
	       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
	       float *C, int64_t ldc);
/* The same on the intra-op pool (ctx->pool; NULL: the calling thread). */
void cpu_sgemm_pool(struct cpu_pool *pool, int transA, int transB, int64_t M, int64_t N,
		    int64_t K, float alpha, const float *A, int64_t lda, const float *B,
		    int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- cast.c ---- */

/* Y = X converted element by element to Y's dtype (ONNX Cast semantics;
 * same shape; Y may be X itself when the dtypes match). */
void cpu_cast_values(const cpu_tensor *X, cpu_tensor *Y);

/* ---- softmax.c ---- */

/* Softmax over each of `rows` contiguous rows of n floats, in place, on
 * the pool (the fused attention's scores). */
void cpu_softmax_rows(cpu_ctx *ctx, float *x, int64_t rows, int64_t n);

/* ---- common.c ---- */

#define CPU_BIT(dt) (1u << (dt))
#define CPU_TYPES_F32 CPU_BIT(CPU_FLOAT)
#define CPU_TYPES_FLOAT (CPU_BIT(CPU_FLOAT) | CPU_BIT(CPU_DOUBLE))
#define CPU_TYPES_ARITH (CPU_TYPES_FLOAT | CPU_BIT(CPU_INT32) | CPU_BIT(CPU_INT64))
#define CPU_TYPES_INDEX (CPU_BIT(CPU_INT32) | CPU_BIT(CPU_INT64))
/* What the generic (cpu_get_/cpu_set_) elementwise paths handle exactly:
 * uint64 is left out because it goes through int64. */
#define CPU_TYPES_NUMERIC (CPU_TYPES_ARITH | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_INT8) | \
			   CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_INT16) | CPU_BIT(CPU_UINT16) | \
			   CPU_BIT(CPU_UINT32))
#define CPU_TYPES_ALL 0x3ffffeu   /* every dtype with a size */

/* For supports(): accept unless in_dtypes[i] is known and outside mask. */
int cpu_supports_dtype(const int32_t *in_dtypes, int n_in, int i, uint32_t mask,
		       char *why, size_t n);
/* For compute(): 0 when input t (number i) has a dtype in mask, else a
 * CPU_E_UNSUPPORTED error naming the dtype. */
int cpu_check_dtype(cpu_ctx *ctx, const cpu_tensor *t, int i, uint32_t mask);
/* Returns the input or fails with CPU_E_INVALID "input i is required". */
const cpu_tensor *cpu_require(cpu_ctx *ctx, int i, int *rc);
/* axis in [-rank, rank) -> [0, rank); -1 when out of range. */
int cpu_norm_axis(int64_t axis, int rank);
/* Reads a scalar or 1-D int32/int64 tensor into v (at most max values).
 * Returns the count, or -1 (wrong dtype, rank or too many values). */
int64_t cpu_read_ints(const cpu_tensor *t, int64_t *v, int64_t max);
/* Scalar (any rank, one element) as double; -1 on numel != 1. */
int cpu_read_scalar(const cpu_tensor *t, double *v);
/* Copies input to output 0 with the given shape (Identity, Reshape...). */
int cpu_copy_to_output(cpu_ctx *ctx, const cpu_tensor *x, int rank, const int64_t *dims);

/* ---- bcast.c ---- */

#define CPU_BCAST_MAX 3

/* Numpy multidirectional broadcasting of up to three operands.  The
 * iteration shape is the output's with size-1 dims dropped and adjacent dims
 * merged wherever every operand stays contiguous (or broadcast) across them,
 * so same-shape and scalar cases become one flat row. */
typedef struct cpu_bcast {
	int n;
	int out_rank;
	int64_t out_dims[CPU_MAX_RANK];
	int rank;                                   /* >= 1 */
	int64_t dims[CPU_MAX_RANK];
	int64_t strides[CPU_BCAST_MAX][CPU_MAX_RANK]; /* elements; 0 = broadcast */
} cpu_bcast;

/* 0, or -1 when the shapes do not broadcast. */
int cpu_bcast_init(cpu_bcast *b, int n, const int *ranks, const int64_t *const *dims);
/* row(arg, len, off, step): off[k] is operand k's first element, off[n] the
 * output's (dense, row-major), step[k] operand k's stride along the row.
 * Stops at and returns the first nonzero return of row. */
typedef int (*cpu_bcast_row)(void *arg, int64_t len, const int64_t *off, const int64_t *step);
int cpu_bcast_each(const cpu_bcast *b, cpu_bcast_row row, void *arg);
/* Error text "[2,3] vs [4]" style for a failed broadcast. */
void cpu_bcast_error(cpu_ctx *ctx, int n, const cpu_tensor *const *ts);

/* Gathers an N-D strided view (strides in elements, any sign, 0 allowed)
 * starting at src into dense dst. */
void cpu_copy_strided(void *dst, const void *src, size_t esize, int rank,
		      const int64_t *dims, const int64_t *strides);
/* The same split over the pool along the first dim larger than 1 when
 * the copy is large enough to pay for it (par.c). */
void cpu_copy_strided_par(cpu_ctx *ctx, void *dst, const void *src, size_t esize, int rank,
			  const int64_t *dims, const int64_t *strides);

/* ---- window.c: Conv and pooling geometry ---- */

/* ONNX's rules, onnxrules/window.h, under the names the ops use. */
enum { CPU_PAD_NOTSET = ONNX_PAD_NOTSET, CPU_PAD_SAME_UPPER = ONNX_PAD_SAME_UPPER,
       CPU_PAD_SAME_LOWER = ONNX_PAD_SAME_LOWER, CPU_PAD_VALID = ONNX_PAD_VALID };

typedef onnx_window cpu_window;
typedef onnx_geom cpu_geom;

/* onnx_window_parse and onnx_window_geom (window.h says what they check). */
int cpu_window_parse(const Onnx__NodeProto *p, cpu_window *w, char *err, size_t n);
int cpu_window_geom(const cpu_window *w, int nsp, const int64_t *in_sp,
		    const int64_t *kernel, cpu_geom *g, char *err, size_t n);
/* Whether any stride of w is above 1. */
int cpu_window_strided(const cpu_window *w);

/* ---- the plain-tensor Identity and Cast ---- */

/* Not in the op table (not cpu_op_ prefixed): ops/seq's Identity and Cast
 * take sequences, optionals and strings and hand plain tensors to these. */
extern const cpu_op cpu_tensor_op_identity, cpu_tensor_op_cast;

#endif
