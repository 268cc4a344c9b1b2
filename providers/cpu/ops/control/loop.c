/*
 * loop: ONNX Loop.  The body runs while the trip count (input 0, optional)
 * is not reached and the condition (input 1, optional, then the body's
 * first output) holds.  Loop-carried values (tensors, sequences, optionals)
 * go from one iteration's outputs to the next one's inputs; the heap block
 * of a carried tensor changes hands, a borrowed one is copied first, so the
 * value an iteration reads is never freed under it.  Scan outputs are
 * stacked along a new first axis.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_ops.h"

static const char *const loop_graphs[] = {"body", NULL};

typedef struct loop_run {
	int n_carried, n_scan, n_body_out;
	cpu_tensor *cur;            /* carried values */
	int *cur_heap;
	cpu_tensor *out;            /* one iteration's outputs */
	int *out_heap;
	const cpu_tensor **in;
	ctl_stack *stacks;
	int64_t iter;
	uint8_t cond;
	cpu_tensor iter_t, cond_t;
} loop_run;

static int loop_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)dt;
	(void)n_in;
	return ctl_supports_graphs(p, opset, loop_graphs, why, n);
}

static void loop_release(cpu_node *node)
{
	cpu_graph_free(node->state);
	node->state = NULL;
}

static int loop_prepare(cpu_node *node, char *err, size_t n)
{
	cpu_graph *g = NULL;
	int rc = ctl_compile(node, "body", &g, err, n);

	node->state = g;
	if (rc == 0 && cpu_graph_n_inputs(g) != node->n_in) {
		snprintf(err, n, "the body has %d inputs, the node %d", cpu_graph_n_inputs(g),
			 node->n_in);
		rc = CPU_E_INVALID;
	}
	if (rc == 0 && cpu_graph_n_outputs(g) < node->n_in - 1) {
		snprintf(err, n, "the body has %d outputs for %d loop-carried values",
			 cpu_graph_n_outputs(g), node->n_in - 2);
		rc = CPU_E_INVALID;
	}
	return rc;
}

static int run_alloc(cpu_ctx *ctx, loop_run *r, const cpu_graph *g)
{
	size_t nb = (size_t)r->n_body_out + 1, nc = (size_t)r->n_carried + 1;

	r->cur = cpu_scratch(ctx, nc * sizeof(*r->cur));
	r->cur_heap = cpu_scratch(ctx, nc * sizeof(int));
	r->out = cpu_scratch(ctx, nb * sizeof(*r->out));
	r->out_heap = cpu_scratch(ctx, nb * sizeof(int));
	r->in = cpu_scratch(ctx, (size_t)(cpu_graph_n_inputs(g) + 1) * sizeof(*r->in));
	r->stacks = cpu_scratch(ctx, (size_t)(r->n_scan + 1) * sizeof(*r->stacks));
	if (!r->cur || !r->cur_heap || !r->out || !r->out_heap || !r->in || !r->stacks)
		return CPU_E_NOMEM;
	for (int j = 0; j < r->n_carried; j++) {
		const cpu_tensor *v = cpu_input(ctx, 2 + j);

		if (!v)
			return cpu_fail(ctx, CPU_E_INVALID, "loop-carried input %d is missing", j);
		r->cur[j] = *v;
		r->cur_heap[j] = 0;
	}
	for (int k = 0; k < r->n_scan; k++)
		ctl_stack_init(&r->stacks[k]);
	memset(r->out_heap, 0, nb * sizeof(int));
	r->iter_t.dtype = CPU_INT64;
	r->iter_t.data = &r->iter;
	r->iter_t.nbytes = sizeof(r->iter);
	r->cond_t.dtype = CPU_BOOL;
	r->cond_t.data = &r->cond;
	r->cond_t.nbytes = 1;
	return 0;
}

/* One iteration: run the body, take the carried values and scan items. */
static int iterate(cpu_ctx *ctx, cpu_graph *g, loop_run *r, int *keep_going)
{
	int rc;

	r->in[0] = &r->iter_t;
	r->in[1] = &r->cond_t;
	for (int j = 0; j < r->n_carried; j++)
		r->in[2 + j] = &r->cur[j];
	rc = cpu_graph_run(g, ctx, r->in, r->out, r->out_heap);
	if (rc)
		return rc;
	rc = ctl_read_bool(ctx, &r->out[0], "the body's condition output", keep_going);
	for (int j = 0; j < r->n_carried && rc == 0; j++)
		rc = cpu_value_own(ctx, &r->out[1 + j], &r->out_heap[1 + j]);
	for (int k = 0; k < r->n_scan && rc == 0; k++)
		rc = ctl_stack_push(ctx, &r->stacks[k], &r->out[1 + r->n_carried + k]);
	if (rc == 0) {
		for (int j = 0; j < r->n_carried; j++) {
			cpu_value_drop(&r->cur[j], &r->cur_heap[j]);
			r->cur[j] = r->out[1 + j];
			r->cur_heap[j] = r->out_heap[1 + j];
			r->out_heap[1 + j] = 0;
		}
	}
	for (int i = 0; i < r->n_body_out; i++)
		cpu_value_drop(&r->out[i], &r->out_heap[i]);
	return rc;
}

static int loop_bounds(cpu_ctx *ctx, int64_t *trips, int *cond)
{
	const cpu_tensor *M = cpu_input(ctx, 0), *C = cpu_input(ctx, 1);
	int rc;

	*trips = INT64_MAX;
	*cond = 1;
	if (M) {
		if (M->dtype != CPU_INT64 || cpu_numel(M) != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "the trip count must be one int64");
		*trips = ((const int64_t *)M->data)[0];
	}
	if (C && (rc = ctl_read_bool(ctx, C, "cond", cond)))
		return rc;
	return 0;
}

static int loop_compute(cpu_ctx *ctx)
{
	cpu_graph *g = ctx->node->state;
	loop_run r = {0};
	int64_t trips;
	int go, rc;

	r.n_body_out = cpu_graph_n_outputs(g);
	r.n_carried = ctx->n_in - 2;
	r.n_scan = r.n_body_out - 1 - r.n_carried;
	if ((rc = loop_bounds(ctx, &trips, &go)) || (rc = run_alloc(ctx, &r, g)))
		return rc;
	for (r.iter = 0; rc == 0 && go && r.iter < trips; r.iter++) {
		r.cond = (uint8_t)go;
		rc = iterate(ctx, g, &r, &go);
	}
	for (int j = 0; j < r.n_carried && rc == 0; j++)
		if (j < ctx->n_out)
			rc = cpu_value_emit(ctx, j, &r.cur[j]);
	for (int k = 0; k < r.n_scan && rc == 0; k++)
		if (r.n_carried + k < ctx->n_out)
			rc = ctl_stack_emit(ctx, &r.stacks[k], r.n_carried + k,
					    cpu_graph_proto(g), 1 + r.n_carried + k);
	for (int j = 0; j < r.n_carried; j++)
		cpu_value_drop(&r.cur[j], &r.cur_heap[j]);
	for (int k = 0; k < r.n_scan; k++)
		ctl_stack_free(&r.stacks[k]);
	return rc;
}

const cpu_op cpu_op_loop = {
	"Loop", "", 1, CPU_OPSET_MAX, loop_supports, loop_prepare, loop_compute, loop_release,
};
