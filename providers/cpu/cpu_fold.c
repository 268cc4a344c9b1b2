/*
 * cpu_fold: constant folding at load.  A node whose inputs are all
 * constants (weights, or outputs of nodes folded before it) is run once
 * while the subgraph loads, and its outputs become constants of the plan:
 * the node is never run again, and the nodes reading them see constants
 * (so the fusion planner finds, say, the 1/sqrt(d) that torch computes
 * with a Pow of two constants, and kernels pack weights that a Transpose
 * or Cast of an initializer produced).
 *
 * Left alone: nodes with subgraphs, random generators, outputs the core
 * reads after the step (LoadSubgraph.exported: their shared memory must
 * be written), results that are not plain tensors, more than
 * CPU_FOLD_MAX_BYTES of output, and any node whose kernel fails (it fails
 * again at run time, where the error belongs).  Caller: cpu_ep.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_fold.h"

#define CPU_FOLD_MAX_BYTES ((size_t)64 << 20)

static int foldable_op(const Onnx__NodeProto *p)
{
	static const char *const random[] = {
		"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
		"Multinomial", "Bernoulli",
	};

	for (size_t a = 0; a < p->n_attribute; a++)
		if (p->attribute[a]->g || p->attribute[a]->n_graphs)
			return 0;
	for (size_t i = 0; i < sizeof(random) / sizeof(random[0]); i++)
		if (strcmp(p->op_type, random[i]) == 0)
			return 0;
	return 1;
}

/* Node k's inputs are constants, its outputs stay in the provider. */
static int foldable(const cpu_plan *pl, size_t k, const Onnx__NodeProto *p,
		    const unsigned char *exported)
{
	if (!foldable_op(p) || p->n_input > 64)
		return 0;
	for (size_t i = 0; i < p->n_input; i++) {
		int v = pl->node_in[k][i];

		if (v >= 0 && !pl->consts[v].data)
			return 0;
	}
	for (size_t i = 0; i < p->n_output; i++) {
		int v = pl->node_out[k][i];

		if (v >= 0 && (exported[v] || pl->consts[v].data))
			return 0;
	}
	return 1;
}

/* Runs node k once; on success its outputs are constants owned by f. */
static void fold_node(cpu_fold *f, cpu_plan *pl, size_t k, const Onnx__NodeProto *p,
		      int64_t opset, const cpu_load_env *env)
{
	int n_in = (int)p->n_input, n_out = (int)p->n_output, heap[64] = {0}, ok;
	const cpu_tensor *in[64];
	cpu_tensor out[64];
	cpu_run_env run = {NULL, NULL, NULL, 1, NULL, NULL, 0, NULL, -1, 0};
	cpu_node node;
	char err[256];

	if (n_out > 64 || n_out < 1)
		return;
	for (int i = 0; i < n_in; i++)
		in[i] = pl->node_in[k][i] >= 0 ? &pl->consts[pl->node_in[k][i]] : NULL;
	if (cpu_node_init(&node, env, NULL, p, opset, in, n_in, n_out, err, sizeof(err)))
		return;
	ok = cpu_node_run(&node, &run, in, NULL, out, heap, err, sizeof(err)) == 0;
	cpu_node_fini(&node);
	for (int i = 0; ok && i < n_out; i++) {
		int v = pl->node_out[k][i];

		ok = v < 0 || (heap[i] && cpu_dtype_size(out[i].dtype) && out[i].dtype != CPU_STRING &&
			       out[i].nbytes <= CPU_FOLD_MAX_BYTES);
	}
	if (ok && f->n + (size_t)n_out > f->cap) {
		size_t cap = (f->cap + (size_t)n_out) * 2;
		void **blocks = realloc(f->blocks, cap * sizeof(*blocks));

		ok = blocks != NULL;
		if (ok) {
			f->blocks = blocks;
			f->cap = cap;
		}
	}
	for (int i = 0; i < n_out; i++) {
		int v = pl->node_out[k][i];

		if (!ok || v < 0) {
			if (heap[i])
				free(out[i].data);
			continue;
		}
		pl->consts[v] = out[i];
		f->blocks[f->n++] = out[i].data;
	}
	if (ok) {
		f->node[k] = 1;
		f->n_nodes++;
	}
}

int cpu_fold_plan(cpu_fold *f, cpu_plan *pl, const Onnx__GraphProto *g,
		  const unsigned char *exported, int64_t (*opset)(void *arg, const char *domain),
		  void *arg, const cpu_load_env *env)
{
	memset(f, 0, sizeof(*f));
	f->node = calloc(pl->n_nodes + 1, 1);
	if (!f->node)
		return CPU_E_NOMEM;
	for (size_t k = 0; k < pl->n_nodes; k++) {
		const Onnx__NodeProto *p = g->node[k];

		if (foldable(pl, k, p, exported))
			fold_node(f, pl, k, p, opset(arg, p->domain ? p->domain : ""), env);
	}
	return 0;
}

void cpu_fold_free(cpu_fold *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->blocks[i]);
	free(f->blocks);
	free(f->node);
	memset(f, 0, sizeof(*f));
}
