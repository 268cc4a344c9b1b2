/*
 * seq_ops: what the sequence, optional and string ops share: their table
 * entries (registry_seq.c) and small helpers (seq_util.c).
 */
#ifndef ORTMK_CPU_SEQ_OPS_H
#define ORTMK_CPU_SEQ_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_graph.h"
#include "cpu_ops.h"

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
extern const cpu_op cpu_op_castlike;   /* ops/tensor/castlike.c */

extern const cpu_op cpu_op_seq_identity, cpu_op_seq_cast, cpu_op_seq_castlike;
extern const cpu_op cpu_op_sequenceempty, cpu_op_sequenceconstruct, cpu_op_sequenceinsert,
	cpu_op_sequenceat, cpu_op_sequenceerase, cpu_op_sequencelength,
	cpu_op_splittosequence, cpu_op_concatfromsequence, cpu_op_optional,
	cpu_op_optionalhaselement, cpu_op_optionalgetelement, cpu_op_stringnormalizer;

#endif
