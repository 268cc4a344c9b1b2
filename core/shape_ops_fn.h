/*
 * shape_ops_fn.h: what the per-op inference files share (shape_ops.c: the
 * op table and the list helpers; shape_ops_math.c, _nn.c, _tensor.c and
 * _data.c: the op functions, one family a file).  Internal to them:
 * shape.c sees only shape_op_find() in shape_ops.h.
 */
#ifndef ORTMK_SHAPE_OPS_FN_H
#define ORTMK_SHAPE_OPS_FN_H

#include <stdint.h>

#include "shape_ops.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x
#define MAXD GRAPH_TINFO_MAX_DATA

/* Data operations, the op table's `arg` for the elementwise families. */
enum { OP_NONE, OP_COPY, OP_NEG, OP_ABS, OP_NOT, OP_ADD, OP_SUB, OP_MUL,
       OP_DIV, OP_MAX, OP_MIN, OP_EQ, OP_LT, OP_GT, OP_LE, OP_GE, OP_AND,
       OP_OR, OP_MOD, OP_FMOD };

#define LIST_ABSENT (-1)
#define LIST_UNKNOWN (-2)

/* An int list that moved from attribute `name` to input `idx` at opset
 * `since` (axes, split, pads, starts...), copied into buf (MAXD entries):
 * its length, LIST_ABSENT or LIST_UNKNOWN. */
int shape_int_list(const shape_ctx *c, const char *name, int idx, int64_t since,
		   int64_t *buf);
/* Axes normalised against rank into a bit mask (a repeat fails if unique). */
int shape_axes_mask(shape_ctx *c, const int64_t *ax, int n, int rank, int unique,
		    uint32_t *mask);

/* The `arg` of shape_fn_conv, shape_fn_matmul and shape_fn_quantize. */
enum { SHAPE_CONV_FLOAT, SHAPE_CONV_TRANSPOSE, SHAPE_CONV_INTEGER, SHAPE_CONV_QLINEAR };
enum { SHAPE_MATMUL_FLOAT, SHAPE_MATMUL_INTEGER, SHAPE_MATMUL_QLINEAR };
enum { SHAPE_QUANT_LINEAR, SHAPE_DEQUANT_LINEAR, SHAPE_QUANT_DYNAMIC };

/* The op functions op_table maps op_types to, by file. */

/* shape_ops_math.c */
int shape_fn_arith(shape_ctx *c);
int shape_fn_compare(shape_ctx *c);
int shape_fn_pow(shape_ctx *c);
int shape_fn_where(shape_ctx *c);
int shape_fn_unary(shape_ctx *c);
int shape_fn_unary_bool(shape_ctx *c);
int shape_fn_softmax(shape_ctx *c);
int shape_fn_dropout(shape_ctx *c);
int shape_fn_batchnorm(shape_ctx *c);
int shape_fn_layernorm(shape_ctx *c);
int shape_fn_matmul(shape_ctx *c);
int shape_fn_gemm(shape_ctx *c);
int shape_fn_simplified_layernorm(shape_ctx *c);   /* shape_ops_ms.c */
int shape_fn_reduce(shape_ctx *c);
int shape_fn_argreduce(shape_ctx *c);

/* shape_ops_nn.c */
int shape_fn_conv(shape_ctx *c);
int shape_fn_pool(shape_ctx *c);
int shape_fn_global_pool(shape_ctx *c);
int shape_fn_resize(shape_ctx *c);
int shape_fn_rnn(shape_ctx *c);

/* shape_ops_tensor.c */
int shape_fn_reshape(shape_ctx *c);
int shape_fn_flatten(shape_ctx *c);
int shape_fn_transpose(shape_ctx *c);
int shape_fn_concat(shape_ctx *c);
int shape_fn_split(shape_ctx *c);
int shape_fn_gather(shape_ctx *c);
int shape_fn_gather_elements(shape_ctx *c);
int shape_fn_slice(shape_ctx *c);

/* shape_ops_data.c */
int shape_fn_shape(shape_ctx *c);
int shape_fn_size(shape_ctx *c);
int shape_fn_unsqueeze(shape_ctx *c);
int shape_fn_squeeze(shape_ctx *c);
int shape_fn_constant(shape_ctx *c);
int shape_fn_cast(shape_ctx *c);
int shape_fn_quantize(shape_ctx *c);
int shape_fn_expand(shape_ctx *c);
int shape_fn_constant_of_shape(shape_ctx *c);
int shape_fn_range(shape_ctx *c);
int shape_fn_tile(shape_ctx *c);
int shape_fn_pad(shape_ctx *c);
int shape_fn_nonzero(shape_ctx *c);
int shape_fn_topk(shape_ctx *c);

#endif
