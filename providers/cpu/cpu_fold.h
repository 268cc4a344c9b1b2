/*
 * cpu_fold: constant folding when a subgraph loads (see cpu_fold.c).
 * Caller: cpu_ep.c, between mapping the nodes and planning fusions.
 */
#ifndef ORTMK_CPU_FOLD_H
#define ORTMK_CPU_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_exec.h"

typedef struct cpu_fold {
	unsigned char *node;   /* per node: folded, not to be prepared or run */
	size_t n_nodes;        /* nodes folded */
	void **blocks;         /* the folded constants' data, owned */
	size_t n, cap;
} cpu_fold;

/* Folds what it can of plan pl (node_in/node_out mapped, weights in
 * consts): folded outputs become pl->consts entries.  exported marks the
 * values the core reads after the step; opset(arg, domain) gives the
 * model's opset of a domain.  0 or CPU_E_NOMEM. */
int cpu_fold_plan(cpu_fold *f, cpu_plan *pl, const Onnx__GraphProto *g,
		  const unsigned char *exported, int64_t (*opset)(void *arg, const char *domain),
		  void *arg, const cpu_load_env *env);
void cpu_fold_free(cpu_fold *f);

#endif
