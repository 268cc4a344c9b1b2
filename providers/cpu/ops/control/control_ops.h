/*
 * control_ops: what the control-flow ops (If, Loop, Scan, SequenceMap)
 * share: the small helpers of control_util.c for compiling a graph attribute, reading a condition and
 * stacking per-iteration outputs.
 */
#ifndef ORTMK_CPU_CONTROL_OPS_H
#define ORTMK_CPU_CONTROL_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_graph.h"
#include "cpu_ops.h"

/* Compiles the GRAPH attribute `name` of node into *g. */
int ctl_compile(const cpu_node *node, const char *name, cpu_graph **g, char *err, size_t n);
/* supports(): the graph attributes exist and their nodes have kernels. */
int ctl_supports_graphs(const Onnx__NodeProto *p, int64_t opset, const char *const *attrs,
			char *why, size_t n);
/* A one-element tensor read as a truth value (bool or any numeric dtype). */
int ctl_read_bool(cpu_ctx *ctx, const cpu_tensor *t, const char *what, int *out);
/* The element type a graph output declares (tensor or sequence of
 * tensors), CPU_UNDEFINED when it says none. */
int32_t ctl_output_elem_type(const Onnx__GraphProto *gp, int i);

/* Per-iteration outputs stacked along a new leading axis: every item must
 * have the first item's dtype and shape. */
typedef struct ctl_stack {
	int32_t dtype;
	int rank;                   /* of an item; -1 before the first */
	int64_t dims[CPU_MAX_RANK];
	size_t item_bytes;
	int64_t count;
	char *buf;
	size_t cap;
} ctl_stack;
void ctl_stack_init(ctl_stack *s);
int ctl_stack_push(cpu_ctx *ctx, ctl_stack *s, const cpu_tensor *item);
/* Writes output i: [count, item dims...]; with no items, an empty tensor
 * of the declared dtype (gp's output gi) and shape [0]. */
int ctl_stack_emit(cpu_ctx *ctx, ctl_stack *s, int i, const Onnx__GraphProto *gp, int gi);
void ctl_stack_free(ctl_stack *s);

#endif
