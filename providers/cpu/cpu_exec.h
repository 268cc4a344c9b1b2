/*
 * cpu_exec: runs one ONNX node on the CPU provider.  The executor (cpu_ep.c)
 * calls these for each node of a loaded subgraph; they find the operator in
 * the registry, run its prepare once, and per run hand the kernel its inputs
 * and place its outputs (at the core's planned location, or on the heap when
 * the core could not plan the shape).  Error messages name the node:
 * "node 'conv1' (Conv): ...".
 */
#ifndef ORTMK_CPU_EXEC_H
#define ORTMK_CPU_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

/* Capability check: 1 if an op entry covers (op_type, domain, opset) and its
 * supports() (if any) accepts, else 0 with the reason in why
 * ("no kernel for op 'Foo' (domain '', opset 13)").  in_dtypes has n_in
 * entries; CPU_UNDEFINED where a dtype is unknown. */
int cpu_node_supported(const Onnx__NodeProto *p, int64_t opset, const int32_t *in_dtypes,
		       int n_in, char *why, size_t n);

/* Finds the op and runs prepare.  consts has n_in entries (NULL where the
 * input is not constant); the node keeps the consts pointer array, so the
 * caller keeps it (and p) alive until cpu_node_fini.  Returns 0 or a
 * cpu_status with err filled. */
int cpu_node_init(cpu_node *node, const Onnx__NodeProto *p, int64_t opset,
		  const cpu_tensor **consts, int n_in, int n_out, char *err, size_t n);
/* The same with the subgraph's pre-pack cache (cpu_prepack.h). */
int cpu_node_init_cached(cpu_node *node, struct cpu_pack_cache *pack, const Onnx__NodeProto *p,
			 int64_t opset, const cpu_tensor **consts, int n_in, int n_out,
			 char *err, size_t n);
/* The same with the model's opsets (node->opsets, set before prepare), for
 * ops that compile subgraphs; opsets may be NULL. */
int cpu_node_init_opsets(cpu_node *node, struct cpu_pack_cache *pack, const cpu_opsets *opsets,
			 const Onnx__NodeProto *p, int64_t opset, const cpu_tensor **consts,
			 int n_in, int n_out, char *err, size_t n);
/* The same with a fused element-wise tail (node->fuse; may be NULL),
 * which must outlive the node. */
int cpu_node_init_fused(cpu_node *node, struct cpu_pack_cache *pack, const cpu_opsets *opsets,
			const cpu_fusion *fuse, const Onnx__NodeProto *p, int64_t opset,
			const cpu_tensor **consts, int n_in, int n_out, char *err, size_t n);
void cpu_node_fini(cpu_node *node);

/* Runs one node.  in: n_in inputs (NULL = omitted).  planned: n_out entries;
 * planned[i] != NULL means the core planned output i there (dtype, shape and
 * data fixed) and the kernel's output must match it exactly (else
 * CPU_E_SHAPE); planned[i] == NULL means the output is malloc'ed (64-byte
 * aligned, at least 1 byte) into out[i] with out_heap[i] = 1, for the caller
 * to free(out[i].data).  On failure every heap output of this call is freed
 * and out[] is zeroed.  Outputs the kernel never produced keep
 * out[i].data == NULL.  Returns 0 or a cpu_status with err filled. */
int cpu_node_run(cpu_node *node, const cpu_tensor **in, const cpu_tensor **planned,
		 cpu_tensor *out, int *out_heap, int threads, char *err, size_t n);
/* The same with the run's arena, where kernels put strings and sequences
 * (cpu_kernel.h); outputs built there have out_heap 0. */
int cpu_node_run_in(cpu_node *node, cpu_arena *arena, const cpu_tensor **in,
		    const cpu_tensor **planned, cpu_tensor *out, int *out_heap, int threads,
		    char *err, size_t n);
/* The same with the scope the node's subgraphs read enclosing values from
 * (ctx->scope; NULL for none). */
int cpu_node_run_scoped(cpu_node *node, cpu_arena *arena, const cpu_scope *scope,
			const cpu_tensor **in, const cpu_tensor **planned, cpu_tensor *out,
			int *out_heap, int threads, char *err, size_t n);
/* The same with the intra-op thread pool (ctx->pool; NULL for none). */
int cpu_node_run_pool(cpu_node *node, cpu_arena *arena, const cpu_scope *scope,
		      struct cpu_pool *pool, const cpu_tensor **in, const cpu_tensor **planned,
		      cpu_tensor *out, int *out_heap, int threads, char *err, size_t n);

#endif
