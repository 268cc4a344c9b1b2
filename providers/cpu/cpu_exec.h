/*
 * cpu_exec: the CPU provider's one graph executor.  It runs the graph the
 * core loads (built by cpu_ep.c from a LoadSubgraph) and the bodies of If,
 * Loop, Scan and SequenceMap (built by cpu_graph.c from a GraphProto) with
 * the same code.
 *
 * A cpu_plan is what load builds once and runs only read: the values by
 * number (names, constants), the nodes with their input and output value
 * numbers, each value's last reader, and the values nested subgraphs read.
 * A cpu_frame is one run's state: the value table (which values exist, and
 * which of them this process allocated), the arrays a node call uses and
 * the kernels' kept scratch.  Runs never write to the plan, so a second
 * frame of the same plan could run at the same time.
 *
 * A run: cpu_frame_begin (constants in), the caller binds its values
 * (cpu_frame_bind; `placed` marks a value the core planned in shared
 * memory: its producer writes there; `pinned` keeps a value alive until
 * the end), cpu_exec_run (the nodes in order; heap values freed after
 * their last reader), the caller takes its outputs, cpu_frame_end (heap
 * values freed).
 */
#ifndef ORTMK_CPU_EXEC_H
#define ORTMK_CPU_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_node.h"

typedef struct cpu_plan {
	size_t n_values, n_nodes;
	const char **names;             /* per value (borrowed strings) */
	cpu_tensor *consts;             /* per value; data != NULL: a constant */
	cpu_node *nodes;                /* op == NULL: fused away, not run */
	int **node_in, **node_out;      /* value per input/output, -1 omitted */
	const cpu_tensor ***node_consts;/* per node input: constant, or NULL */
	int **node_refs;                /* values k's subgraphs read, -1 ended */
	int *last_use;                  /* last node reading each value, or -1 */
	unsigned char *pinned;          /* per value: never freed during a run */
	int max_in, max_out;
	size_t inited;                  /* nodes [0, inited) went through init */
	/* ORTMK_CPU_PROFILE: per node the nanoseconds its runs took, then the
	 * number of runs (n_nodes + 1 entries; cpu_ep.c reports them), or NULL */
	uint64_t *node_ns;
	/* per node: the CPU_LAYOUT_* bits cpu_layout_plan chose, or NULL */
	unsigned char *layout;
} cpu_plan;

/* Tables for nv values and nn nodes, zeroed (last_use -1).  0 or
 * CPU_E_NOMEM (then cpu_plan_free). */
int cpu_plan_alloc(cpu_plan *p, size_t nv, size_t nn);
/* Finalises the initialised nodes and frees the tables (not the names, nor
 * the constants' data, which the builder owns). */
void cpu_plan_free(cpu_plan *p);
/* The value named name, or -1 (linear: plans are small lists). */
int cpu_plan_find(const cpu_plan *p, const char *name);
/* Calls fn for every name that the subgraphs in p's attributes read from
 * outside themselves or their own nodes: node inputs and graph outputs,
 * recursively (a superset is fine: callers only keep values alive). */
void cpu_exec_refs(const Onnx__NodeProto *p, void (*fn)(void *arg, const char *name),
		   void *arg);
/* Records the values of this plan that node k's subgraphs read (they live
 * until k has run): node_refs[k] and last_use.  0 or CPU_E_NOMEM. */
int cpu_plan_refs(cpu_plan *p, size_t k, const Onnx__NodeProto *proto);
/* Initialises node k with n_in inputs (node_in[k] set): its constant
 * inputs (folded[i] when given and non-NULL, else consts[]), last uses and
 * the call array sizes, then cpu_node_init.  0 or a cpu_status with err. */
int cpu_plan_init_node(cpu_plan *p, size_t k, const cpu_load_env *env,
		       const cpu_fusion *fuse, cpu_tensor *const *folded,
		       const Onnx__NodeProto *proto, int64_t opset, int n_in, char *err,
		       size_t n);

/* float16 kept wide: decides for every node from the declared value
 * dtypes (dtype[v], 0 when unknown) whether it runs widened (cpu_f16.c),
 * then marks each float16 value that a widened node writes, only widened
 * nodes read, no subgraph reads and the caller does not (exported[v] 0):
 * its producer leaves it in float32 and its readers take it as it is (a
 * Cast to float32 counts as a widened reader: it copies).
 * Between the float16 values that cross the provider's boundary the
 * graph then runs in float32, as ONNX Runtime runs a float16 model on a
 * CPU without float16 kernels (its inserted Casts); each value that
 * leaves is rounded to float16 once.  Returns the number of values kept
 * wide, or CPU_E_NOMEM. */
int cpu_plan_wide(cpu_plan *p, const int32_t *dtype, const unsigned char *exported);

typedef struct cpu_frame {
	const cpu_plan *plan;
	cpu_tensor *vals;
	unsigned char *heap, *have, *placed, *pinned;
	/* what cpu_frame_begin restores: the constants (have0[v] set, their
	 * indices in cidx) */
	unsigned char *have0;
	int *cidx;
	size_t n_consts;
	/* one node call */
	const cpu_tensor **in, **planned;
	cpu_tensor *out;
	int *out_heap;
	/* the kernels' kept scratch: one block the nodes share (scratch lives
	 * only while a kernel computes), grown to the largest need, so a
	 * graph holds its biggest node's scratch, not the sum of all */
	cpu_keep *keep;
	/* float16 values kept wide (cpu_plan_wide) that the core placed: a
	 * float32 buffer per value, kept between runs (a dying input's passed
	 * to the output the core placed over it: wide_share), and the planned
	 * tensor a node call writes it through */
	void **wbuf;
	size_t *wcap;
	cpu_tensor *wplanned;
	/* where the core placed each of this run's twins' float16 values
	 * (wide_share) */
	const void **wsrc;
	int busy;                       /* between begin and end */
} cpu_frame;

cpu_frame *cpu_frame_new(const cpu_plan *p);
void cpu_frame_free(cpu_frame *f);
/* Starts a run: constants present, nothing else; pins from the plan. */
void cpu_frame_begin(cpu_frame *f);
/* Value v is t (borrowed until cpu_frame_end). */
void cpu_frame_bind(cpu_frame *f, int v, const cpu_tensor *t, int placed, int pinned);
/* Runs the nodes in order with env (env->keep is set to the frame's).  A value
 * is looked up by name through a scope whose parent is env->scope.  With
 * env->prof, each node run gets a span (cpu_span: from before its inputs
 * are gathered to after its dead inputs are freed, the points
 * ORTMK_CPU_PROFILE times).  0 or a cpu_status with err filled
 * ("node 'x' (Op): ..."). */
int cpu_exec_run(cpu_frame *f, const cpu_run_env *env, char *err, size_t n);
/* Frees what the run allocated (heap values not taken) and ends it. */
void cpu_frame_end(cpu_frame *f);

#endif
