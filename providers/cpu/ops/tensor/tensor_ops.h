/*
 * tensor_ops: what the files of ops/tensor/ share — the small helpers of
 * tensor_util.c
 * (strides, index checks, a stable sort, element copies by size, reading
 * shape-like inputs and string attributes).
 */
#ifndef ORTMK_CPU_TENSOR_OPS_H
#define ORTMK_CPU_TENSOR_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_ops.h"

/* ---- tensor_util.c ---- */

/* Row-major element strides of dims (strides[rank-1] = 1). */
void tensor_strides(int rank, const int64_t *dims, int64_t *strides);
/* v with negative values counted from the end of a dim of size n; -1 when
 * outside [-n, n). */
int64_t tensor_norm_index(int64_t v, int64_t n);
/* supports(): input 0 of any dtype with a size. */
int tensor_supports_any(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			int n_in, char *why, size_t n);
/* Stable merge sort of idx[0..n) by cmp(ctx, a, b) (< 0: a first); tmp has
 * room for n entries. */
typedef int (*tensor_cmp)(const void *ctx, int64_t a, int64_t b);
void tensor_sort(int64_t *idx, int64_t n, tensor_cmp cmp, const void *ctx, int64_t *tmp);
/* Compares element i of a with element j of b (same dtype) numerically:
 * -1, 0 or 1; NaN sorts after every number and equals NaN. */
int tensor_cmp_elem(int32_t dtype, const void *a, int64_t i, const void *b, int64_t j);
/* Copies one element of es bytes. */
static inline void tensor_copy_elem(void *dst, const void *src, size_t es)
{
	switch (es) {
	case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
	case 2: memcpy(dst, src, 2); break;
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	default: memcpy(dst, src, es); break;
	}
}
/* Reads a 1-D (or scalar) float/double/float16 tensor into v (at most max
 * values); the count or -1. */
int64_t tensor_read_floats(const cpu_tensor *t, double *v, int64_t max);
/* The int-list input i, or -1 with the error set (absent counts as 0
 * values when optional). */
int64_t tensor_input_ints(cpu_ctx *ctx, int i, int64_t *v, int64_t max, int optional);
/* 1 when the string attribute name equals s (dflt when absent). */
int tensor_attr_is(const Onnx__NodeProto *p, const char *name, const char *dflt, const char *s);
/* Stores v into element i of a dtype, saturating integer targets to their
 * range (interpolating kernels overshoot: cubic, bicubic). */
void tensor_store_f64(int32_t dtype, void *base, int64_t i, double v);

/* Not in the op table: ops/seq's CastLike hands it plain tensors. */
extern const cpu_op cpu_tensor_op_castlike;

#endif
