/*
 * cpu_f16: float16 tensors through float32 kernels (see cpu_f16.c), for
 * the per-node glue (cpu_node.c) and the kernels that convert themselves.
 */
#ifndef ORTMK_CPU_F16_H
#define ORTMK_CPU_F16_H

#include <stdint.h>

#include "cpu_kernel.h"

/* y[i] = x[i] widened (exact) / narrowed (round to nearest even). */
void cpu_f16_widen(const uint16_t *x, float *y, int64_t n);
void cpu_f16_narrow(const float *x, uint16_t *y, int64_t n);

/* 1 when op refuses node p with these input dtypes, some of them float16,
 * but accepts it with float32 in their place: the node runs widened. */
int cpu_f16_widens(const cpu_op *op, const Onnx__NodeProto *p, int64_t opset,
		   const int32_t *in_dtypes, int n_in);

/* A float32 copy of float16 tensor t in one malloc'ed block (header then
 * data, 64-byte aligned; free()), or NULL when out of memory. */
cpu_tensor *cpu_f16_widen_tensor(const cpu_tensor *t);

#endif
