/*
 * seq_ops: what the sequence, optional and string ops share: small
 * helpers (seq_util.c).
 */
#ifndef ORTMK_CPU_SEQ_OPS_H
#define ORTMK_CPU_SEQ_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_graph.h"
#include "cpu_ops.h"
#include "tensor_ops.h"   /* cpu_tensor_op_castlike */

/* Input i as a sequence, or NULL after failing with a message. */
const cpu_seq *seq_input(cpu_ctx *ctx, int i, int *rc);
/* A position input (int32/int64 scalar) checked against [-n, n - 1 + extra]
 * and made non-negative; dflt when the input is omitted. */
int seq_position(cpu_ctx *ctx, int i, size_t n, int extra, int64_t dflt, int64_t *pos);
/* Row-major size split of dims around axis: outer (before), inner (after,
 * in elements). */
void seq_split_dims(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *inner);

/* Number <-> string conversions of Cast (cast_string.c). */
int seq_format_number(int32_t dtype, const void *data, int64_t i, char *buf, size_t n);

/* The tensor-only entries the overrides hand plain tensors to. */
#endif
