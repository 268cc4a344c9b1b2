/*
 * msq: what the quantized com.microsoft ops (ops/msq/) share: reading the
 * per-tensor scales and zero points of the QLinear ops, ONNX Runtime's
 * float quantization step, and the 256-entry lookup tables through which
 * ONNX Runtime computes its QLinear element-wise functions (so the tables
 * here give its bits).  Defined in msq_common.c.
 */
#ifndef ORTMK_CPU_MSQ_H
#define ORTMK_CPU_MSQ_H

#include <stdint.h>

#include "cpu_ops.h"

#define MSQ_Q8 (CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_INT8))

/* Input i: a float32 scalar (any rank, one element) into *v. */
int msq_scale(cpu_ctx *ctx, int i, const char *what, float *v);
/* Input i: an optional zero point of dtype (one element); 0 when omitted. */
int msq_zero_point(cpu_ctx *ctx, int i, const char *what, int32_t dtype, int32_t *v);

/* For supports(): every input in [0, n_in) that is in the mask `q8` (a
 * bit per input index) must be uint8/int8 and the same type as input 0;
 * the others float32.  Inputs whose dtype is unknown pass. */
int msq_supports_q8(const int32_t *dt, int n_in, uint32_t q8, char *why, size_t n);

/* ONNX Runtime's QuantizeLinear of one float (MLAS): x / scale, clamped
 * to the type's range less the zero point, rounded half to even, plus
 * the zero point. */
int32_t msq_quantize(float x, float scale, int32_t zp, int32_t dtype);

/* table[b] = quantize(f(x_scale * (v - x_zp)), y_scale, y_zp) for every
 * byte b read as dtype's value v: f maps n floats at once. */
typedef void msq_map_fn(const float *x, float *y, int n, const void *arg);
void msq_build_table(int32_t dtype, float xs, int32_t xz, float ys, int32_t yz, msq_map_fn *f,
		     const void *arg, uint8_t table[256]);
/* y[i] = table[x[i]] over n bytes, on the pool. */
void msq_apply_table(cpu_ctx *ctx, const uint8_t *table, const uint8_t *x, uint8_t *y,
		     int64_t n);

/* The int8 GEMM's packed form of a constant 2-D B (input `input`, K x N,
 * or N x K when transB) made at load through the pre-pack cache
 * (igemm_pack_b), or NULL when B is not a constant 2-D uint8/int8 or is
 * too large to keep packed: the product then packs B per call. */
typedef struct msq_bpack {
	const void *packed;
	const void *src;          /* B's data the pack was made from */
	int64_t K, N;
} msq_bpack;
int msq_pack_b(cpu_node *node, int input, int transB, msq_bpack *bp, char *err, size_t n);

/* DynamicQuantizeLinear's uint8 quantization of x (n floats) into q, as
 * ONNX Runtime computes it for DynamicQuantizeMatMul: range [min(0, min
 * x), max(0, max x)], scale (hi - lo) / 255 (1 for an all-zero range),
 * zero point round(clamp(-lo / scale, 0, 255)). */
void msq_dynamic_quantize(const float *x, int64_t n, uint8_t *q, float *scale, int32_t *zp);

#endif
