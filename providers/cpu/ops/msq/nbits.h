/*
 * nbits: MatMulNBits' weight layout and kernels (nbits_kern.c), shared
 * with the op (matmulnbits.c).
 *
 * The weight W (K x N) arrives as N rows of k_blocks blobs of
 * block_size * bits / 8 bytes, each column of W quantized in blocks of
 * block_size along K:  W[k][n] = (q[n][k] - zp[n][b]) * scale[n][b],
 * b = k / block_size.  At load it is re-laid out once (through the
 * pre-pack cache when constant):
 *  - 4 bits: each run of 16 values along K becomes 8 bytes whose low
 *    nibbles are values 0..7 and high nibbles 8..15, so eight lanes
 *    unpack with one widening load, a mask and a shift;
 *  - 2 and 8 bits: one byte per value.
 * Scales and zero points become two floats per block, scale and
 * zp * scale, so a column's product with a row a of A is
 *   sum_b scale[b] * dot(a_b, q_b) - sum_b zs[b] * sum(a_b)
 * where the block sums of a are computed once per row: the inner loop
 * converts q to float and multiplies, with no zero point to subtract.
 */
#ifndef ORTMK_CPU_NBITS_H
#define ORTMK_CPU_NBITS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

typedef struct nbits_w {
	int64_t K, N, bs, nb;      /* nb = ceil(K / bs) blocks per column */
	int bits;
	const uint8_t *q;          /* the re-laid-out values (nbits_q_size bytes) */
	const float *scale, *zs;   /* N x nb each */
} nbits_w;

/* Bytes of the re-laid-out values of one column / all of them. */
int64_t nbits_col_bytes(const nbits_w *w);
/* Re-lays out src (N x nb x blob bytes as the op receives B) into dst. */
void nbits_relayout(const nbits_w *w, const uint8_t *src, uint8_t *dst);

/* Y (rows x N, row stride ldy) = A (rows x K, row stride lda) x W (+ bias
 * per column, or NULL), one column at a time: for a few rows. */
int nbits_gemv(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t lda, int64_t rows,
	       const float *bias, float *Y, int64_t ldy);
/* ONNX Runtime's int8 quantization of a block of A (accuracy_level 4):
 * *scale = max|a| / 127; returns the factor q = nearbyintf(a * factor)
 * uses (0 for an all-zero block). */
static inline float nbits_q8_factor(const float *a, int64_t len, float *scale)
{
	float amax = 0.0f;

	for (int64_t k = 0; k < len; k++)
		amax = __builtin_fabsf(a[k]) > amax ? __builtin_fabsf(a[k]) : amax;
	*scale = amax / 127.0f;
	return amax != 0.0f ? 127.0f / amax : 0.0f;
}

/* sum x[i] * y[i], vectorized. */
float nbits_dot(const float *x, const float *y, int64_t n);
/* accuracy_level 4 in integers (nbits_q8.c): A quantized to int8 per
 * block, dot products in vpdpbusd.  Only where nbits_q8_available. */
int nbits_q8_available(const nbits_w *w);
int nbits_gemv_q8(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t lda, int64_t rows,
		  const float *bias, float *Y, int64_t ldy);
/* The same for many rows, through the float GEMM with W dequantized
 * block by block into its panels. */
int nbits_gemm(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t M, const float *bias,
	       float *Y);

#endif
