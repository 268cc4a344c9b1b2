/*
 * ep_ops: the device-independent halves of the elementwise, linear-algebra,
 * normalisation and view ops both device providers run (vulkan:
 * vk_ops_elem.c, vk_ops_linalg.c, vk_ops_norm.c, vk_ops_shape.c; cuda:
 * cuda_ops_elem.c, cuda_ops_linalg.c, cuda_ops_norm.c, cuda_ops_shape.c):
 * the node checks a capability query makes before looking at dtypes, the
 * op codes the kernels share, the broadcast stride math of the binary ops
 * and MatMul, and the output dims of the view ops.  The dtype checks
 * (which float types a device takes) stay with each provider.
 *
 * The *_node_ok checks return 1, or 0 with the reason in why.
 */
#ifndef ORTMK_EP_OPS_H
#define ORTMK_EP_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* The unary op's code, the order of VKX_U_* and CUK_U_* (Relu, Sigmoid,
 * Tanh, Sqrt, Erf, Gelu, -, Abs, Neg, LeakyRelu; code 6 is Gelu's tanh
 * form, chosen by the attribute); -1 for another op. */
int ep_unary_code(const char *op_type);
/* Add, Sub, Mul, Div, Pow: 0..4 (VKX_B_*, CUK_B_*); -1 for another op. */
int ep_binary_code(const char *op_type);

/* One input, one output; LeakyRelu's alpha, Gelu's approximate (none or
 * tanh), nothing else. */
int ep_unary_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* The binary ops and MatMul: two inputs, one output, no attributes. */
int ep_binary_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Gemm: two or three inputs, one output, alpha/beta/transA/transB. */
int ep_gemm_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* BatchNormalization in inference mode: five inputs, the Y output only. */
int ep_batchnorm_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Softmax: one input, one output, axis. */
int ep_softmax_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Transpose: one input, one output, perm. */
int ep_transpose_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Concat: inputs, one output, an axis. */
int ep_concat_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Gather: data and indices, one output, axis (the indices' dtype is for
 * the provider to check). */
int ep_gather_node_ok(const Onnx__NodeProto *p, char *why, size_t n);

/* Row-major element strides of a rank-xr tensor (dims xd) aligned to the
 * last r dims of a broadcast (0 where it has no dim or a dim of 1). */
void ep_bcast_strides(int xr, const int64_t *xd, int r, int64_t *st);
/* Element strides of a matrix stack's (rank xr, dims xd) batch dims
 * aligned to the output's nb batch dims bd (0 where it broadcasts). */
void ep_batch_strides(const int64_t *xd, int xr, int nb, const int64_t *bd, int64_t *st);
/* Folds r dims walked with strides sa and sb: drops dims of 1 and merges
 * neighbours that step alike in both; the folded dims into od (which may
 * be dims itself), sa and sb in place.  Returns the folded rank. */
int ep_fold_strides(int r, const int64_t *dims, int64_t *sa, int64_t *sb, int64_t *od);

/*
 * The output dims of a view op (Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity) of X (rank, dims, numel): list[0..cnt) is the node's int64
 * input 1 (Reshape's shape, the axes from opset 13; cnt -1 when absent),
 * before opset 13 Squeeze's and Unsqueeze's axes come from the attribute.
 * The rank into *ro, the dims into od.
 */
int ep_view_dims(const Onnx__NodeProto *p, int64_t opset, int rank, const int64_t *dims,
		 int64_t numel, const int64_t *list, int cnt, int64_t *od, int *ro, char *err,
		 size_t n);

#endif
