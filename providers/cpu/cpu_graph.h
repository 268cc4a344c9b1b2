/*
 * cpu_graph: the CPU provider's subgraph executor, for the ops whose
 * attributes hold graphs (If, Loop, Scan, SequenceMap in ops/control/).
 * An op compiles its body once in prepare (value names resolved, the
 * body's initializers converted, every node prepared with the model's
 * opsets) and runs it per iteration in compute: inputs in, outputs out,
 * intermediate heap values freed after their last use (uses inside nested
 * subgraphs included), strings and sequences in the run's arena.  Names the
 * body reads from enclosing graphs are looked up through ctx->scope when a
 * run starts; the body's own values form the scope of its nested graphs.
 *
 * Also the value helpers those ops share (cpu_value_*).
 */
#ifndef ORTMK_CPU_GRAPH_H
#define ORTMK_CPU_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

typedef struct cpu_graph cpu_graph;
struct cpu_load_env;   /* cpu_node.h */

/* Compiles gp, which must outlive the result, with the owning node's op
 * table, pre-pack cache and opsets (env is copied).  ai.onnx nodes use
 * default_opset (the owning node's) when env->opsets does not name the
 * domain.  Returns 0 or a cpu_status with err filled. */
int cpu_graph_compile(const Onnx__GraphProto *gp, const struct cpu_load_env *env,
		      int64_t default_opset, cpu_graph **out, char *err, size_t n);
void cpu_graph_free(cpu_graph *g);
int cpu_graph_n_inputs(const cpu_graph *g);
int cpu_graph_n_outputs(const cpu_graph *g);
const Onnx__GraphProto *cpu_graph_proto(const cpu_graph *g);

/* Runs g inside the running node ctx (its arena, scope, threads and error
 * buffer).  in: one entry per graph input (NULL = no value), borrowed for
 * the call.  out: one per graph output; out_heap[i] = 1 when out[i].data
 * was malloc'ed and now belongs to the caller (cpu_value_drop), else it is
 * borrowed: an input, an enclosing value, a constant of g, or arena data.
 * On failure nothing is left to free. */
int cpu_graph_run(cpu_graph *g, cpu_ctx *ctx, const cpu_tensor *const *in, cpu_tensor *out,
		  int *out_heap);

/* Capability check of the ai.onnx nodes inside p's subgraphs (at opset)
 * against ops, for an op's supports(): 1, or 0 with the reason in why. */
int cpu_graph_supported(const cpu_optable *ops, const Onnx__NodeProto *p, int64_t opset,
			char *why, size_t n);

/* ---- values (cpu_value.c) ---- */

/* Copies v into output i of the running node: tensor data is copied,
 * a sequence's items are shared (they live in the arena or shared memory
 * until the run ends), an empty optional stays empty. */
int cpu_value_emit(cpu_ctx *ctx, int i, const cpu_tensor *v);
/* Makes v own its data: a borrowed tensor's bytes are copied to the heap
 * (*heap = 1).  Sequences and empty optionals need nothing. */
int cpu_value_own(cpu_ctx *ctx, cpu_tensor *v, int *heap);
/* Frees what v owns (when *heap) and clears it. */
void cpu_value_drop(cpu_tensor *v, int *heap);
/* A copy of tensor src whose data lives in the run's arena (sequence
 * items must: a sequence outlives the values it was made from). */
int cpu_value_to_arena(cpu_ctx *ctx, const cpu_tensor *src, cpu_tensor *dst);
/* A string TensorProto as one malloc'ed block (header, pointers, bytes),
 * like cpu_tensor_from_proto; NULL with the reason in err. */
cpu_tensor *cpu_strings_from_proto(const Onnx__TensorProto *tp, char *err, size_t n);

#endif
