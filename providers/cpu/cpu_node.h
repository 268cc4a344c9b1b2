/*
 * cpu_node: runs one ONNX node on the CPU provider.  The graph executor
 * (cpu_exec.c) calls these for each node of a plan; they find the operator
 * in the op table they are given, run its prepare once, and per run hand
 * the kernel its inputs and place its outputs (at the core's planned
 * location, or on the heap when the core could not plan the shape).  Error
 * messages name the node: "node 'conv1' (Conv): ...".  The unit tests call
 * them directly to run one kernel.
 */
#ifndef ORTMK_CPU_NODE_H
#define ORTMK_CPU_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

/* What a node is loaded with.  ops is required; pack (the subgraph's
 * pre-pack cache, cpu_prepack.h) and opsets (the model's, for ops that
 * compile subgraphs; node->opsets) may be NULL.  The pointers must outlive
 * the node. */
typedef struct cpu_load_env {
	const cpu_optable *ops;
	struct cpu_pack_cache *pack;
	const cpu_opsets *opsets;
	/* The layout bits of the node being initialised (node->layout;
	 * cpu_plan_init_node sets them from cpu_plan.layout). */
	unsigned layout;
} cpu_load_env;

/* Scratch memory kept between node calls and runs (cpu_scratch): once a
 * run has seen the kernels' needs, later runs with the same shapes
 * allocate nothing.  It belongs to the run's frame (one block its nodes
 * share, cpu_exec.h), not to a node, so that runs in flight together do
 * not share it. */
#define CPU_KEEP_BIG 16
#define CPU_KEEP_BIG_MIN ((size_t)1 << 20)
typedef struct cpu_keep {
	void *p;
	size_t size;
	/* Freed heap outputs of at least CPU_KEEP_BIG_MIN bytes kept for the
	 * next ones: a large tensor of a dynamic shape (a detector's
	 * per-proposal tensors, 100 MB) otherwise costs fresh pages from the
	 * kernel on every run. */
	void *big[CPU_KEEP_BIG];
	size_t big_cap[CPU_KEEP_BIG];
} cpu_keep;
void cpu_keep_free(cpu_keep *k);
/* bytes for a heap output, 64-byte aligned: a kept block of at least that
 * (and at most twice) when k has one, else a new one.  NULL when out of
 * memory. */
void *cpu_keep_alloc(cpu_keep *k, size_t bytes);
/* Gives back a heap output of `bytes` (its tensor's nbytes) from
 * cpu_keep_alloc or aligned_alloc: kept when large and k has room,
 * else freed. */
void cpu_keep_release(cpu_keep *k, void *p, size_t bytes);

/* Profiling (Run.profile): one node as cpu_exec_run ran it.  The spans of
 * a run are reserved in the order nodes begin, so a node inside a
 * control-flow body names an earlier span (the If, Loop or Scan running
 * it) as its parent. */
typedef struct cpu_span {
	const Onnx__NodeProto *proto;   /* borrowed from the plan */
	uint64_t start_ns, dur_ns;      /* CLOCK_MONOTONIC */
	uint32_t node;                  /* index in its graph */
	uint32_t tid;                   /* the thread that called the kernel */
	uint32_t depth;                 /* 0: the step's own nodes */
	int32_t parent;                 /* enclosing span, -1: none */
} cpu_span;

/* A run's spans: at most cap; n counts every reservation (atomic), so
 * n - cap were dropped when it is larger. */
typedef struct cpu_prof {
	cpu_span *spans;
	size_t cap;
	size_t n;
} cpu_prof;

/* What a node runs with (cpu_ctx's fields of the same names).  arena: the
 * run's strings and sequences (NULL: the kernel cannot make them); scope:
 * the enclosing graphs' values (NULL: none); pool: the intra-op thread pool
 * (NULL: the calling thread alone); keep: the frame's kept scratch (NULL:
 * scratch is allocated and freed per run). */
typedef struct cpu_run_env {
	cpu_arena *arena;
	const cpu_scope *scope;
	struct cpu_pool *pool;
	int threads;
	cpu_keep *keep;
	/* The run stops between nodes once *cancel == cancel_token (ep_run;
	 * NULL: never).  Control-flow bodies inherit it: a Loop stops between
	 * iterations too. */
	const _Atomic uint64_t *cancel;
	uint64_t cancel_token;
	/* Profiling: NULL records nothing (the loop's only cost, one test per
	 * node).  Else cpu_exec_run records each node it runs, at prof_depth,
	 * under span prof_parent (-1 at the top; bodies inherit through
	 * cpu_ctx). */
	cpu_prof *prof;
	int32_t prof_parent;
	uint32_t prof_depth;
} cpu_run_env;

/* Capability check: 1 if an entry of ops covers (op_type, domain, opset) and
 * its supports() (if any) accepts, else 0 with the reason in why ("no
 * kernel for op 'Foo' (domain '', opset 13)").  in_dtypes has n_in entries;
 * CPU_UNDEFINED where a dtype is unknown. */
int cpu_node_supported(const cpu_optable *ops, const Onnx__NodeProto *p, int64_t opset,
		       const int32_t *in_dtypes, int n_in, char *why, size_t n);

/* Finds the op and runs prepare.  consts has n_in entries (NULL where the
 * input is not constant) or is NULL; fuse is the fused element-wise tail
 * (node->fuse) or NULL.  The node keeps the consts and fuse pointers, so
 * the caller keeps them (and p) alive until cpu_node_fini.  Returns 0 or a
 * cpu_status with err filled. */
int cpu_node_init(cpu_node *node, const cpu_load_env *env, const cpu_fusion *fuse,
		  const Onnx__NodeProto *p, int64_t opset, const cpu_tensor **consts,
		  int n_in, int n_out, char *err, size_t n);
void cpu_node_fini(cpu_node *node);
/* Decides at load whether node runs widened (CPU_F16_WIDEN) or as it is
 * from the declared dtypes of its n_in inputs (CPU_UNDEFINED for an
 * omitted one); a dtype not known (-1) leaves it to the first run.
 * Returns the node's f16_mode. */
int cpu_node_f16_decide(cpu_node *node, const int32_t *dt);

/* Runs one node.  in: n_in inputs (NULL = omitted).  planned: NULL, or
 * n_out entries; planned[i] != NULL means output i was planned there
 * (dtype, shape and data fixed) and the kernel's output must match it
 * exactly (else CPU_E_SHAPE); otherwise the output is malloc'ed (64-byte
 * aligned, at least 1 byte) into out[i] with out_heap[i] = 1, for the
 * caller to free(out[i].data), or built in the arena (strings, sequences)
 * with out_heap[i] = 0.  On failure every heap output of this call is freed
 * and out[] is zeroed.  Outputs the kernel never produced keep
 * out[i].data == NULL.  Returns 0 or a cpu_status with err filled. */
int cpu_node_run(cpu_node *node, const cpu_run_env *env, const cpu_tensor **in,
		 const cpu_tensor **planned, cpu_tensor *out, int *out_heap, char *err,
		 size_t n);

#endif
