/*
 * shape_ops.c: type and shape inference for each ONNX op, and the one table
 * that maps op_type to its function.  The driver (shape.c) calls these in
 * topological order; shape_ops.h describes the contract.
 *
 * Besides shapes, small integer tensors carry their values (graph_tinfo
 * data) so the shape arithmetic PyTorch exports (Shape -> Gather -> Concat
 * -> Reshape) folds into static shapes once the inputs are concrete.
 *
 * The op functions live by family in shape_ops_math.c, shape_ops_nn.c,
 * shape_ops_tensor.c and shape_ops_data.c; this file holds the list
 * helpers they share and the table.  Adding an op: write
 * `int shape_fn_<op>(shape_ctx *c)` in its family's file (or reuse a
 * family function), declare it in shape_ops_fn.h and add one line to
 * op_table at the end of this file.
 */
#include <errno.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"
#include "shape_ops_fn.h"

/* ---------------------------------------------------------------- lists */

/* An int list that moved from attribute `name` to input `idx` at opset
 * `since` (axes, split, pads, starts...).  Returns its length, LIST_ABSENT
 * when the node gives none, LIST_UNKNOWN when it is an input whose values
 * are not known here. */
int shape_int_list(const shape_ctx *c, const char *name, int idx, int64_t since,
		   int64_t *buf)
{
	const int64_t *v = NULL;
	int n = -1;

	if (c->n->opset >= since && shape_has_in(c, idx)) {
		n = shape_in_ints(c, idx, &v);
		if (n < 0)
			return LIST_UNKNOWN;
	} else if (name) {
		n = shape_attr_ints(c, name, &v);
	}
	if (n < 0)
		return LIST_ABSENT;
	if (n > MAXD)
		return LIST_UNKNOWN;
	if (n)
		memcpy(buf, v, (size_t)n * sizeof(*buf));
	return n;
}

/* Normalises axes against `rank` into a bit mask; repeated axes fail when
 * `unique` (Unsqueeze, Slice), as the reference implementation does. */
int shape_axes_mask(shape_ctx *c, const int64_t *ax, int n, int rank, int unique,
		    uint32_t *mask)
{
	int a, rc;

	*mask = 0;
	for (int i = 0; i < n; i++) {
		rc = shape_axis(c, ax[i], rank, &a);
		if (rc)
			return rc;
		if (unique && (*mask & (1u << a)))
			return shape_fail(c, "axis %lld repeated", (long long)ax[i]);
		*mask |= 1u << a;
	}
	return 0;
}

/* ---------------------------------------------------------------- table */


static const shape_op_entry op_table[] = {
	/* elementwise, broadcasting */
	{ "Add", shape_fn_arith, OP_ADD }, { "Sub", shape_fn_arith, OP_SUB },
	{ "Mul", shape_fn_arith, OP_MUL }, { "Div", shape_fn_arith, OP_DIV },
	{ "Mod", shape_fn_arith, OP_MOD }, { "Pow", shape_fn_pow, 0 },
	{ "Max", shape_fn_arith, OP_MAX }, { "Min", shape_fn_arith, OP_MIN },
	{ "Sum", shape_fn_arith, OP_NONE }, { "Mean", shape_fn_arith, OP_NONE },
	{ "And", shape_fn_arith, OP_AND }, { "Or", shape_fn_arith, OP_OR },
	{ "Xor", shape_fn_arith, OP_NONE }, { "BitShift", shape_fn_arith, OP_NONE },
	{ "PRelu", shape_fn_unary, OP_NONE },
	{ "Equal", shape_fn_compare, OP_EQ }, { "Less", shape_fn_compare, OP_LT },
	{ "Greater", shape_fn_compare, OP_GT }, { "LessOrEqual", shape_fn_compare, OP_LE },
	{ "GreaterOrEqual", shape_fn_compare, OP_GE }, { "Where", shape_fn_where, 0 },
	/* elementwise, one input */
	{ "Identity", shape_fn_unary, OP_COPY }, { "Neg", shape_fn_unary, OP_NEG },
	{ "Abs", shape_fn_unary, OP_ABS }, { "Not", shape_fn_unary, OP_NOT },
	{ "Floor", shape_fn_unary, OP_COPY }, { "Ceil", shape_fn_unary, OP_COPY },
	{ "Round", shape_fn_unary, OP_COPY }, { "Relu", shape_fn_unary, OP_NONE },
	{ "Sigmoid", shape_fn_unary, OP_NONE }, { "Tanh", shape_fn_unary, OP_NONE },
	{ "Erf", shape_fn_unary, OP_NONE }, { "Sqrt", shape_fn_unary, OP_NONE },
	{ "Exp", shape_fn_unary, OP_NONE }, { "Log", shape_fn_unary, OP_NONE },
	{ "Reciprocal", shape_fn_unary, OP_NONE }, { "Sign", shape_fn_unary, OP_NONE },
	{ "Gelu", shape_fn_unary, OP_NONE }, { "LeakyRelu", shape_fn_unary, OP_NONE },
	{ "Elu", shape_fn_unary, OP_NONE }, { "Selu", shape_fn_unary, OP_NONE },
	{ "Celu", shape_fn_unary, OP_NONE }, { "Clip", shape_fn_unary, OP_NONE },
	{ "HardSigmoid", shape_fn_unary, OP_NONE }, { "HardSwish", shape_fn_unary, OP_NONE },
	{ "Softplus", shape_fn_unary, OP_NONE }, { "Softsign", shape_fn_unary, OP_NONE },
	{ "Mish", shape_fn_unary, OP_NONE }, { "ThresholdedRelu", shape_fn_unary, OP_NONE },
	{ "Sin", shape_fn_unary, OP_NONE }, { "Cos", shape_fn_unary, OP_NONE },
	{ "Tan", shape_fn_unary, OP_NONE }, { "Atan", shape_fn_unary, OP_NONE },
	{ "Shrink", shape_fn_unary, OP_NONE }, { "CumSum", shape_fn_unary, OP_NONE },
	{ "Trilu", shape_fn_unary, OP_NONE }, { "IsNaN", shape_fn_unary_bool, 0 },
	{ "IsInf", shape_fn_unary_bool, 0 },
	{ "ScatterND", shape_fn_unary, OP_NONE }, { "ScatterElements", shape_fn_unary, OP_NONE },
	{ "Softmax", shape_fn_softmax, 0 }, { "LogSoftmax", shape_fn_softmax, 0 },
	{ "Hardmax", shape_fn_softmax, 0 }, { "Dropout", shape_fn_dropout, 0 },
	/* normalisation */
	{ "BatchNormalization", shape_fn_batchnorm, 0 },
	{ "InstanceNormalization", shape_fn_unary, OP_NONE },
	{ "GroupNormalization", shape_fn_unary, OP_NONE },
	{ "LpNormalization", shape_fn_unary, OP_NONE }, { "LRN", shape_fn_unary, OP_NONE },
	{ "LayerNormalization", shape_fn_layernorm, 0 },
	{ "SimplifiedLayerNormalization", shape_fn_simplified_layernorm, 0 },
	/* linear algebra, convolution, pooling */
	{ "MatMul", shape_fn_matmul, SHAPE_MATMUL_FLOAT }, { "Gemm", shape_fn_gemm, 0 },
	{ "MatMulInteger", shape_fn_matmul, SHAPE_MATMUL_INTEGER },
	{ "QLinearMatMul", shape_fn_matmul, SHAPE_MATMUL_QLINEAR },
	{ "Conv", shape_fn_conv, SHAPE_CONV_FLOAT },
	{ "ConvTranspose", shape_fn_conv, SHAPE_CONV_TRANSPOSE },
	{ "ConvInteger", shape_fn_conv, SHAPE_CONV_INTEGER },
	{ "QLinearConv", shape_fn_conv, SHAPE_CONV_QLINEAR },
	{ "MaxPool", shape_fn_pool, 0 }, { "AveragePool", shape_fn_pool, 0 },
	{ "LpPool", shape_fn_pool, 0 }, { "GlobalAveragePool", shape_fn_global_pool, 0 },
	{ "GlobalMaxPool", shape_fn_global_pool, 0 }, { "GlobalLpPool", shape_fn_global_pool, 0 },
	{ "Resize", shape_fn_resize, 0 }, { "Upsample", shape_fn_resize, 0 },
	{ "RNN", shape_fn_rnn, 1 }, { "GRU", shape_fn_rnn, 3 }, { "LSTM", shape_fn_rnn, 4 },
	/* shape manipulation */
	{ "Reshape", shape_fn_reshape, 0 }, { "Flatten", shape_fn_flatten, 0 },
	{ "Transpose", shape_fn_transpose, 0 }, { "Concat", shape_fn_concat, 0 },
	{ "Split", shape_fn_split, 0 }, { "Gather", shape_fn_gather, 0 },
	{ "GatherElements", shape_fn_gather_elements, 0 }, { "Slice", shape_fn_slice, 0 },
	{ "Shape", shape_fn_shape, 0 }, { "Size", shape_fn_size, 0 },
	{ "Unsqueeze", shape_fn_unsqueeze, 0 }, { "Squeeze", shape_fn_squeeze, 0 },
	{ "Expand", shape_fn_expand, 0 }, { "Tile", shape_fn_tile, 0 }, { "Pad", shape_fn_pad, 0 },
	{ "Constant", shape_fn_constant, 0 }, { "ConstantOfShape", shape_fn_constant_of_shape, 0 },
	{ "Range", shape_fn_range, 0 }, { "Cast", shape_fn_cast, 0 }, { "CastLike", shape_fn_cast, 1 },
	/* quantization */
	{ "QuantizeLinear", shape_fn_quantize, SHAPE_QUANT_LINEAR },
	{ "DequantizeLinear", shape_fn_quantize, SHAPE_DEQUANT_LINEAR },
	{ "DynamicQuantizeLinear", shape_fn_quantize, SHAPE_QUANT_DYNAMIC },
	{ "NonZero", shape_fn_nonzero, 0 }, { "TopK", shape_fn_topk, 0 },
	/* reductions: arg is the opset where axes became an input */
	{ "ReduceSum", shape_fn_reduce, 13 }, { "ReduceMean", shape_fn_reduce, 18 },
	{ "ReduceMax", shape_fn_reduce, 18 }, { "ReduceMin", shape_fn_reduce, 18 },
	{ "ReduceProd", shape_fn_reduce, 18 }, { "ReduceL1", shape_fn_reduce, 18 },
	{ "ReduceL2", shape_fn_reduce, 18 }, { "ReduceLogSum", shape_fn_reduce, 18 },
	{ "ReduceLogSumExp", shape_fn_reduce, 18 }, { "ReduceSumSquare", shape_fn_reduce, 18 },
	{ "ArgMax", shape_fn_argreduce, 0 }, { "ArgMin", shape_fn_argreduce, 0 },
};

shape_fn shape_op_find(const char *domain, const char *op_type, int *arg)
{
	if (!op_type)
		return NULL;
	if (domain && strcmp(domain, "com.microsoft") == 0)
		return shape_op_find_ms(op_type, arg);
	if (domain && strcmp(domain, "ai.onnx.ml") == 0)
		return shape_op_find_ml(op_type, arg);
	if (domain && *domain && strcmp(domain, "ai.onnx") != 0)
		return NULL;
	return shape_table_find(op_table, sizeof(op_table) / sizeof(op_table[0]), op_type, arg);
}

shape_fn shape_table_find(const shape_op_entry *t, size_t n, const char *op_type, int *arg)
{
	for (size_t i = 0; i < n && t[i].op_type; i++) {
		if (strcmp(t[i].op_type, op_type) == 0) {
			*arg = t[i].arg;
			return t[i].fn;
		}
	}
	return NULL;
}
