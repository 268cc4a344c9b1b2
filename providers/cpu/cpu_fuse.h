/*
 * cpu_fuse: load-time fusions of the CPU provider (issue #7).  Before the
 * nodes of a subgraph are prepared, cpu_fuse_plan looks for
 *
 *   Conv -> BatchNormalization        constant BN folded into W and bias
 *   Conv (+BN) -> Add -> act          residual and activation in the Conv
 *   MatMul|Gemm -> Add(const row) -> Add -> act | Gelu(Erf form) | Gelu
 *                                     bias, residual, activation in the GEMM
 *   MatMul -> Div|Mul(const scalar) -> ...   the scale as the GEMM's alpha
 *   MatMul (-> Div|Mul) -> Softmax(last axis) -> MatMul   attention: one
 *                                     node, the scores in its scratch
 *   ConvInteger|MatMulInteger -> Cast(float) -> Mul(., Mul(x_scale, w_scale))
 *     (-> Add(const bias)) -> Add -> act
 *                                     dynamic quantization's dequantizing
 *                                     tail in the int8 GEMM's epilogue
 *
 * where act is Relu, Clip (constant bounds), LeakyRelu, HardSigmoid,
 * HardSwish, Sigmoid, Tanh, or torch's SiLU (Sigmoid(x) then Mul(x, .));
 * Relu and Gelu are applied by the kernel as results leave the GEMM, the
 * others by the tail over the node's output (fuse_tail.c),
 *
 * and turns each chain into one node: the head (Conv, MatMul, Gemm) gets
 * the extra inputs and a cpu_fusion (node->fuse), writes the last node's
 * output, and the other nodes of the chain are not run.  A value inside a
 * chain must have exactly one reader, inside the chain, and must not be
 * read by the core after the step (LoadSubgraph.exported); without that
 * list nothing is fused.  An addend must exist when the head runs.
 * Caller: cpu_ep.c.
 */
#ifndef ORTMK_CPU_FUSE_H
#define ORTMK_CPU_FUSE_H

#include <stddef.h>

#include "cpu_kernel.h"

#define CPU_FUSE_MAX_IN 8

typedef struct cpu_fuse_node {
	int skip;                   /* folded into an earlier node: not run */
	int head;                   /* a fused head: the fields below apply */
	cpu_fusion fuse;
	int n_in;                   /* inputs of the fused node */
	int in[CPU_FUSE_MAX_IN];    /* value per input, -1 when omitted */
	/* Constants replacing inputs (BN-folded filter and bias), owned. */
	cpu_tensor *folded[CPU_FUSE_MAX_IN];
	int out0;                   /* the value its output 0 writes */
	int n_fused;                /* nodes of the chain, head included */
} cpu_fuse_node;

/* What the planner reads about the subgraph. */
typedef struct cpu_fuse_graph {
	const Onnx__GraphProto *g;
	size_t n_values;
	int *const *node_in, *const *node_out;   /* value per node input/output, -1 omitted */
	const cpu_tensor *consts;                /* per value; data != NULL for weights */
	const unsigned char *exported;           /* per value: read by the core; NULL: unknown */
	const int *extra_reads;                  /* per value: reads by nested subgraphs */
	int64_t opset;                           /* the ai.onnx opset (Softmax's default axis) */
	const unsigned char *gone;               /* per node: folded at load, not run; or NULL */
} cpu_fuse_graph;

/* One entry per node, or NULL (no memory: run unfused).  Nodes that fuse
 * nothing have head = skip = 0. */
cpu_fuse_node *cpu_fuse_plan(const cpu_fuse_graph *fg);
void cpu_fuse_free(cpu_fuse_node *f, size_t n_nodes);

#endif
