/*
 * if: ONNX If.  Both branches are compiled at prepare; compute runs the
 * one the condition picks and copies its outputs (tensors, sequences or
 * empty optionals) into the node's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "control_ops.h"

typedef struct if_state {
	cpu_graph *then_g, *else_g;
} if_state;

static const char *const if_graphs[] = {"then_branch", "else_branch", NULL};

static int if_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)dt;
	(void)n_in;
	return ctl_supports_graphs(p, opset, if_graphs, why, n);
}

static void if_release(cpu_node *node)
{
	if_state *st = node->state;

	if (!st)
		return;
	cpu_graph_free(st->then_g);
	cpu_graph_free(st->else_g);
	free(st);
	node->state = NULL;
}

static int if_prepare(cpu_node *node, char *err, size_t n)
{
	if_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	rc = ctl_compile(node, "then_branch", &st->then_g, err, n);
	if (rc == 0)
		rc = ctl_compile(node, "else_branch", &st->else_g, err, n);
	return rc;
}

static int if_compute(cpu_ctx *ctx)
{
	if_state *st = ctx->node->state;
	cpu_graph *g;
	cpu_tensor *out;
	int *heap, cond, rc, n_out;

	if ((rc = ctl_read_bool(ctx, cpu_input(ctx, 0), "cond", &cond)))
		return rc;
	g = cond ? st->then_g : st->else_g;
	n_out = cpu_graph_n_outputs(g);
	if (n_out < ctx->n_out)
		return cpu_fail(ctx, CPU_E_INVALID, "the %s branch has %d outputs, the node %d",
				cond ? "then" : "else", n_out, ctx->n_out);
	out = cpu_scratch(ctx, sizeof(*out) * (size_t)(n_out + 1));
	heap = cpu_scratch(ctx, sizeof(int) * (size_t)(n_out + 1));
	if (!out || !heap)
		return CPU_E_NOMEM;
	rc = cpu_graph_run(g, ctx, NULL, out, heap);
	if (rc)
		return rc;
	for (int i = 0; i < ctx->n_out && rc == 0; i++)
		rc = cpu_value_emit(ctx, i, &out[i]);
	for (int i = 0; i < n_out; i++)
		cpu_value_drop(&out[i], &heap[i]);
	return rc;
}

const cpu_op cpu_op_if = {
	"If", "", 1, CPU_OPSET_MAX, if_supports, if_prepare, if_compute, if_release,
};
