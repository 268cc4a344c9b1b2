/*
 * sequence_map: ONNX SequenceMap.  The body runs once per element of the
 * input sequence; each additional input is passed whole when it is a
 * tensor and element by element when it is a sequence (of the same
 * length).  Body output k, collected over the iterations, becomes output
 * sequence k; its items are copied into the run's arena.
 */
#include <stdio.h>
#include <string.h>

#include "control_ops.h"

static const char *const map_graphs[] = {"body", NULL};

static int map_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)dt;
	(void)n_in;
	return ctl_supports_graphs(p, opset, map_graphs, why, n);
}

static void map_release(cpu_node *node)
{
	cpu_graph_free(node->state);
	node->state = NULL;
}

static int map_prepare(cpu_node *node, char *err, size_t n)
{
	cpu_graph *g = NULL;
	int rc = ctl_compile(node, "body", &g, err, n);

	node->state = g;
	if (rc == 0 && (cpu_graph_n_inputs(g) != node->n_in ||
			cpu_graph_n_outputs(g) != node->n_out)) {
		snprintf(err, n, "the body has %d inputs and %d outputs, the node %d and %d",
			 cpu_graph_n_inputs(g), cpu_graph_n_outputs(g), node->n_in, node->n_out);
		rc = CPU_E_INVALID;
	}
	return rc;
}

/* Length of the input sequence; every other sequence input must match. */
static int map_length(cpu_ctx *ctx, size_t *len)
{
	const cpu_tensor *s0 = cpu_input(ctx, 0);

	if (!s0 || s0->dtype != CPU_SEQUENCE)
		return cpu_fail(ctx, CPU_E_INVALID, "input 0 must be a sequence");
	*len = ((const cpu_seq *)s0->data)->n;
	for (int j = 1; j < ctx->n_in; j++) {
		const cpu_tensor *x = cpu_input(ctx, j);

		if (!x)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is missing", j);
		if (x->dtype == CPU_SEQUENCE && ((const cpu_seq *)x->data)->n != *len)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d: a sequence of %zu elements, "
					"input 0 has %zu", j, ((const cpu_seq *)x->data)->n, *len);
	}
	return 0;
}

static int map_iteration(cpu_ctx *ctx, cpu_graph *g, size_t i, const cpu_tensor **in,
			 cpu_tensor *out, int *heap, cpu_tensor *items, size_t len)
{
	int rc;

	for (int j = 0; j < ctx->n_in; j++) {
		const cpu_tensor *x = cpu_input(ctx, j);

		in[j] = x->dtype == CPU_SEQUENCE ? &((const cpu_seq *)x->data)->items[i] : x;
	}
	if ((rc = cpu_graph_run(g, ctx, in, out, heap)))
		return rc;
	for (int k = 0; k < ctx->n_out && rc == 0; k++)
		rc = cpu_value_to_arena(ctx, &out[k], &items[(size_t)k * len + i]);
	for (int k = 0; k < ctx->n_out; k++)
		cpu_value_drop(&out[k], &heap[k]);
	return rc;
}

static int map_compute(cpu_ctx *ctx)
{
	cpu_graph *g = ctx->node->state;
	size_t len = 0, nk = (size_t)ctx->n_out + 1;
	const cpu_tensor **in = cpu_scratch(ctx, sizeof(*in) * ((size_t)ctx->n_in + 1));
	cpu_tensor *out = cpu_scratch(ctx, sizeof(*out) * nk), *items;
	int *heap = cpu_scratch(ctx, sizeof(int) * nk), rc;

	if (!in || !out || !heap)
		return CPU_E_NOMEM;
	if ((rc = map_length(ctx, &len)))
		return rc;
	items = ctx->arena ? cpu_arena_alloc(ctx->arena, sizeof(*items) * (len * nk + 1)) : NULL;
	if (!items)
		return cpu_fail(ctx, CPU_E_NOMEM, "out of memory");
	for (size_t i = 0; i < len && rc == 0; i++)
		rc = map_iteration(ctx, g, i, in, out, heap, items, len);
	for (int k = 0; k < ctx->n_out && rc == 0; k++) {
		int32_t dt = len ? items[(size_t)k * len].dtype :
			ctl_output_elem_type(cpu_graph_proto(g), k);
		cpu_seq *s = cpu_output_sequence(ctx, k, dt, len);

		if (!s)
			return CPU_E_NOMEM;
		if (len)
			memcpy(s->items, &items[(size_t)k * len], len * sizeof(*items));
	}
	return rc;
}

const cpu_op cpu_op_sequencemap = {
	"SequenceMap", "", 17, CPU_OPSET_MAX, map_supports, map_prepare, map_compute, map_release,
};
