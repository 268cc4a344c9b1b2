/*
 * dk_ops: the device-independent halves of the ops both device providers
 * run (vulkan: vk_ops_*.c; cuda: cuda_ops_*.c): the node checks a
 * capability query makes, the op codes the kernels share, the broadcast
 * stride math of the binary ops and MatMul, the float dtype check, and the
 * view ops (Reshape and friends), which need no kernel at all.
 *
 * The *_node_ok checks return 1, or 0 with the reason in why.
 */
#ifndef ORTMK_DK_OPS_H
#define ORTMK_DK_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dk_exec.h"
#include "dk_shape.h"
#include "onnx.pb-c.h"

/* The unary op's code, the order of VKX_U_* and CUK_U_* (Relu, Sigmoid,
 * Tanh, Sqrt, Erf, Gelu, -, Abs, Neg, LeakyRelu; code 6 is Gelu's tanh
 * form, chosen by the attribute); -1 for another op. */
int dk_unary_code(const char *op_type);
/* Add, Sub, Mul, Div, Pow: 0..4 (VKX_B_*, CUK_B_*); -1 for another op. */
int dk_binary_code(const char *op_type);

/* The families an op table serves with one entry each (dk_op.names): the
 * unary ops (Relu, Sigmoid, Tanh, Sqrt, Erf, Gelu, Abs, Neg, LeakyRelu),
 * the binary ones (Add, Sub, Mul, Div, Pow) and the Reduce ops (Sum, Mean,
 * Max, Min). */
extern const dk_opname dk_unary_ops[], dk_binary_ops[], dk_reduce_ops[];
/* ReduceSum, ReduceMean, ReduceMax, ReduceMin: 0..3 (VK_R_* order,
 * CUK_R_*). */
int dk_reduce_code(const char *op_type);

/* One input, one output; LeakyRelu's alpha, Gelu's approximate (none or
 * tanh), nothing else. */
int dk_unary_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* The binary ops and MatMul: two inputs, one output, no attributes. */
int dk_binary_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Gemm: two or three inputs, one output, alpha/beta/transA/transB. */
int dk_gemm_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* BatchNormalization in inference mode: five inputs, the Y output only. */
int dk_batchnorm_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Softmax: one input, one output, axis. */
int dk_softmax_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Transpose: one input, one output, perm. */
int dk_transpose_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Concat: inputs, one output, an axis. */
int dk_concat_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* Gather: data and indices, one output, axis (the indices' dtype is for
 * the provider to check). */
int dk_gather_node_ok(const Onnx__NodeProto *p, char *why, size_t n);

/* The whole capability checks of the ops whose inputs are all float of
 * one dtype: the node check above, then the dtypes (MatMul: binary). */
int dk_unary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		      char *why, size_t n);
int dk_binary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n);
int dk_gemm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n);
int dk_batchnorm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n);
int dk_softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n);
int dk_layernorm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n);

/* Row-major element strides of a rank-xr tensor (dims xd) aligned to the
 * last r dims of a broadcast (0 where it has no dim or a dim of 1). */
void dk_bcast_strides(int xr, const int64_t *xd, int r, int64_t *st);
/* Element strides of a matrix stack's (rank xr, dims xd) batch dims
 * aligned to the output's nb batch dims bd (0 where it broadcasts). */
void dk_batch_strides(const int64_t *xd, int xr, int nb, const int64_t *bd, int64_t *st);
/* Folds r dims walked with strides sa and sb: drops dims of 1 and merges
 * neighbours that step alike in both; the folded dims into od (which may
 * be dims itself), sa and sb in place.  Returns the folded rank. */
int dk_fold_strides(int r, const int64_t *dims, int64_t *sa, int64_t *sb, int64_t *od);

/*
 * The output dims of a view op (Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity) of X (rank, dims, numel): list[0..cnt) is the node's int64
 * input 1 (Reshape's shape, the axes from opset 13; cnt -1 when absent),
 * before opset 13 Squeeze's and Unsqueeze's axes come from the attribute.
 * The rank into *ro, the dims into od.
 */
int dk_view_dims(const Onnx__NodeProto *p, int64_t opset, int rank, const int64_t *dims,
		 int64_t numel, const int64_t *list, int cnt, int64_t *od, int *ro, char *err,
		 size_t n);

/*
 * The binary ops' output and walk: inputs 0 and 1 of one float dtype, the
 * output (dk_out) of their broadcast shape in *y, and the broadcast folded
 * (dk_fold_strides) into at most max_rank dims fd with each input's
 * strides sa, sb.  Returns the folded rank, or -1 with c's error set.
 */
int dk_binary_out(dk_ctx *c, int max_rank, int64_t *fd, int64_t *sa, int64_t *sb,
		  const dk_val **y);

/* LayerNormalization: X, Scale and B float of one dtype, Scale and B
 * broadcasting as suffixes of the normalised dims; `rows` rows of
 * numel / rows elements; the output in *y, the optional float32 Mean and
 * InvStdDev outputs' memory in *mean and *inv (ptr NULL when absent). */
int dk_layernorm_out(dk_ctx *c, int64_t *rows, dk_buf *mean, dk_buf *inv, const dk_val **y);

/* MatMul as a batch of M x K by K x N products over nb broadcast batch
 * dims bd, A's and B's element strides along them in sa and sb (0 where
 * one broadcasts). */
typedef struct dk_matmul {
	int64_t M, K, N;
	int nb;
	int64_t bd[EP_MAX_RANK], sa[EP_MAX_RANK], sb[EP_MAX_RANK];
} dk_matmul;

/* MatMul's inputs checked (float of one dtype, rank >= 1, numpy matmul
 * shapes), its geometry into m and its output (dk_out) into *y.  0, or an
 * error with c's set. */
int dk_matmul_out(dk_ctx *c, dk_matmul *m, const dk_val **y);

/* MaxPool and AveragePool: the node check and float inputs; the window
 * geometry of X (rank kernel_shape + 2) into g and the output ([N, C,
 * out...], dk_out) into *y.  0, or an error with c's set. */
int dk_pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n);
int dk_pool_out(dk_ctx *c, dk_window *g, const dk_val **y);

/* GlobalAveragePool, GlobalMaxPool: one float input and output, no
 * attributes; the output ([N, C, 1, ...], dk_out) in *y and the count of
 * spatial elements each output reduces returned (-1: an error, c's set). */
int dk_global_pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n);
int64_t dk_global_pool_out(dk_ctx *c, const dk_val **y);

/*
 * Softmax and LogSoftmax's output (dk_out, X's dtype and shape) in *y and
 * their rows: `outer` x `inner` rows of `len` elements along the axis
 * (before opset 13, everything from the axis on is one row).  0, or an
 * error with c's set.
 */
int dk_softmax_out(dk_ctx *c, int64_t *outer, int64_t *len, int64_t *inner, const dk_val **y);

/* 1 when inputs [first, first + count) present (count -1: all) are all of
 * one float dtype: float32, or float16 when `f16` allows it; else 0 with
 * the reason. */
int dk_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  int f16, char *why, size_t n);

/*
 * Reshape, Flatten, Squeeze, Unsqueeze and Identity, whole: float data
 * input 0 (input 1, Reshape's shape or the axes, int64 and read on the
 * host); the output is a view of input 0 with the dims dk_view_dims gives,
 * nothing is copied.
 */
int dk_view_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		     char *why, size_t n);
int dk_view_run(dk_ctx *c);
/* Input i as an int64 list on the host (*cnt -1 when absent; at most
 * EP_MAX_RANK values). */
int dk_host_list(dk_ctx *c, int i, int64_t *out, int *cnt);

/* ---- dk_ops_tensor.c: the tensor ops' halves -------------------------------- */

/*
 * Each *_supports is the op's whole capability check (float data inputs);
 * each *_out checks the inputs, computes the output shape, gets the output
 * (dk_out) into *y and what the kernel walks.  They return 0 (or the
 * positive value they say), or an error code with c's error set.
 */
int dk_transpose_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n);
/* Transpose: the permutation folded into k <= max_rank dims fd walked with
 * input strides fs; returns k, or 0 when the output is a view (done). */
int dk_transpose_out(dk_ctx *c, int max_rank, int64_t *fd, int64_t *fs, const dk_val **y);
int dk_concat_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n);
/* Concat along *axis: outer blocks of inner elements per unit of the axis. */
int dk_concat_out(dk_ctx *c, int *axis, int64_t *outer, int64_t *inner, const dk_val **y);
int dk_gather_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n);
int dk_gather_prepare(dk_node *nd, char *err, size_t n);
/* Gather: the indices checked, made non-negative and put on the device as
 * esz-byte ints (4 or 8) in *ib; outer / inner around the axis of length
 * *len.  Returns 1 when the output is empty (nothing to launch). */
int dk_gather_out(dk_ctx *c, int esz, dk_buf *ib, int64_t *outer, int64_t *inner, int64_t *len,
		  const dk_val **y);

/* The reduction of a Reduce op: the dims grouped into runs of kept and of
 * reduced dims (outermost first, size-1 dims dropped, neighbours of one
 * kind merged), with X's element strides; count reduced elements per
 * output, nout outputs. */
typedef struct dk_reduce {
	int nk, nr;
	int64_t kdims[EP_MAX_RANK], kstr[EP_MAX_RANK];
	int64_t rdims[EP_MAX_RANK], rstr[EP_MAX_RANK];
	int64_t count, nout;
} dk_reduce;

/* Opset from which a Reduce op's axes are input 1 (ReduceSum 13, the
 * others 18). */
int64_t dk_reduce_axes_since(const char *op_type);
int dk_reduce_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n);
/* At most max_groups groups of each kind in g.  Returns 1 when the op is a
 * no-op (the output is a view of X: done). */
int dk_reduce_out(dk_ctx *c, int max_groups, dk_reduce *g, const dk_val **y);

#endif
