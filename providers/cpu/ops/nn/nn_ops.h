/*
 * nn_ops: what the files of the nn family share (convolution and GEMM
 * helpers live in cpu_ops.h/conv_impl.h): the integer helpers of the
 * quantized ops and the recurrent networks' common code (rnn.h).
 */
#ifndef ORTMK_CPU_NN_OPS_H
#define ORTMK_CPU_NN_OPS_H

#include "cpu_ops.h"

/* ---- qcommon.c: integer helpers of the quantized ops ---- */

#define NN_Q8_TYPES (CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_INT8))

/* C[M, N] = A[M, K] x B[K, N], int32 with wrap-around accumulation. */
void nn_igemm(int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
	      const int32_t *B, int64_t ldb, int32_t *C, int64_t ldc);
/* Zero point input i (NULL: one zero) as int32 values; it must be a scalar
 * or 1-D of the dtype of x.  *count is its element count. */
int nn_load_zp(cpu_ctx *ctx, const cpu_tensor *zp, int i, int32_t x_dtype, const int32_t **v,
	       int64_t *count);
/* t as int32 minus zero point zp[(e / inner) % count] for element e. */
int32_t *nn_centered(cpu_ctx *ctx, const cpu_tensor *t, const int32_t *zp, int64_t count,
		     int64_t inner);
/* Scale input i as floats; a scalar or 1-D float32 tensor.  *count is its
 * element count. */
int nn_load_scale(cpu_ctx *ctx, int i, const float **v, int64_t *count);
/* Stores saturate(round_half_even(acc * mult) + zp) as uint8 or int8. */
void nn_requant(int32_t dtype, void *y, int64_t i, int32_t acc, float mult, int32_t zp);

#endif
