/*
 * nn_ops: what the files of the nn family share (convolution and GEMM
 * helpers live in cpu_ops.h/conv_impl.h, the int8 GEMM in gemm/igemm.h):
 * the integer helpers of the quantized ops and the recurrent networks' common code (rnn.h).
 */
#ifndef ORTMK_CPU_NN_OPS_H
#define ORTMK_CPU_NN_OPS_H

#include "cpu_ops.h"
#include "fuse_tail.h"
#include "igemm.h"

/* ---- qcommon.c: integer helpers of the quantized ops ---- */

#define NN_Q8_TYPES (CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_INT8))

/* Zero point input i (NULL: one zero) as int32 values; it must be a scalar
 * or 1-D of the dtype of x.  *count is its element count. */
int nn_load_zp(cpu_ctx *ctx, const cpu_tensor *zp, int i, int32_t x_dtype, const int32_t **v,
	       int64_t *count);
/* Scale input i as floats; a scalar or 1-D float32 tensor.  *count is its
 * element count. */
int nn_load_scale(cpu_ctx *ctx, int i, const float **v, int64_t *count);
/* Stores saturate(round_half_even(acc * mult) + zp) as uint8 or int8. */
void nn_requant(int32_t dtype, void *y, int64_t i, int32_t acc, float mult, int32_t zp);
/* An igemm status (negative errno) as the kernel's error: "WHAT failed (why)". */
int nn_igemm_fail(cpu_ctx *ctx, int rc, const char *what);
/* qconv.c: the scale of a fused dequantizing tail (cpu_fusion.quant), the
 * product of its scalar inputs as the Mul node computes it. */
int nn_quant_scale(cpu_ctx *ctx, float *s);
/* qconv.c: out's c, add and relu for a fused tail begun as fr, for a
 * product of K terms (tmp: a tensor header that must live until
 * cpu_fuse_end). */
int nn_quant_out(cpu_ctx *ctx, cpu_fuse_run *fr, igemm_out *out, int64_t K, cpu_tensor *tmp);

#endif
