/*
 * cpu_graph: compiles and runs the subgraphs of If, Loop, Scan and
 * SequenceMap (see cpu_graph.h) on the provider's one graph executor
 * (cpu_exec.h).  Compiling resolves the body's value names (its inputs,
 * initializers, node outputs, and names it reads from enclosing graphs),
 * converts its initializers and prepares every node with the model's
 * opsets.  What differs from the graph the core loads: nothing is planned
 * (every node output lives on the heap or in the arena), names the body
 * does not define come from enclosing scopes at the start of each run, and
 * the graph's outputs are handed to the caller rather than published.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_exec.h"
#include "cpu_graph.h"

enum { V_INPUT, V_CONST, V_NODE, V_OUTER };

struct cpu_graph {
	const Onnx__GraphProto *proto;
	cpu_load_env env;             /* ops, the enclosing pre-pack cache, opsets */
	int64_t default_opset;
	cpu_plan plan;
	size_t cap_values;
	unsigned char *kind;
	cpu_tensor **blocks;          /* per value: malloc'ed initializer or NULL */
	int n_in, n_out;
	int *in_idx, *out_idx;
	cpu_frame *frame;             /* reused by every run that finds it free */
	int frame_taken;              /* atomic: frame is in use */
};

/* ---- names ---------------------------------------------------------------- */

static int add_value(cpu_graph *g, const char *name, int kind)
{
	int v = cpu_plan_find(&g->plan, name);

	if (v >= 0)
		return v;
	if (g->plan.n_values == g->cap_values)
		return -1;
	v = (int)g->plan.n_values++;
	g->plan.names[v] = name;
	g->kind[v] = (unsigned char)kind;
	return v;
}

static size_t count_names(const Onnx__GraphProto *gp)
{
	size_t total = gp->n_input + gp->n_initializer + gp->n_output;

	for (size_t k = 0; k < gp->n_node; k++)
		total += gp->node[k]->n_input + gp->node[k]->n_output;
	return total;
}

static int graph_supported(const cpu_optable *ops, const Onnx__GraphProto *gp, int64_t opset,
			   char *why, size_t n)
{
	for (size_t k = 0; k < gp->n_node; k++) {
		const Onnx__NodeProto *p = gp->node[k];
		int32_t *dt;
		int ok;

		if (p->domain && p->domain[0] && strcmp(p->domain, "ai.onnx") != 0)
			continue;   /* its opset is not known here: load decides */
		dt = calloc(p->n_input + 1, sizeof(*dt));
		if (!dt)
			return snprintf(why, n, "out of memory"), 0;
		ok = cpu_node_supported(ops, p, opset, dt, (int)p->n_input, why, n);
		free(dt);
		if (!ok)
			return 0;
	}
	return 1;
}

int cpu_graph_supported(const cpu_optable *ops, const Onnx__NodeProto *p, int64_t opset,
			char *why, size_t n)
{
	for (size_t a = 0; a < p->n_attribute; a++) {
		const Onnx__AttributeProto *at = p->attribute[a];

		if (at->g && !graph_supported(ops, at->g, opset, why, n))
			return 0;
		for (size_t j = 0; j < at->n_graphs; j++)
			if (!graph_supported(ops, at->graphs[j], opset, why, n))
				return 0;
	}
	return 1;
}

/* ---- compile -------------------------------------------------------------- */

static int alloc_tables(cpu_graph *g)
{
	size_t nv = g->cap_values + 1;

	if (cpu_plan_alloc(&g->plan, g->cap_values, g->proto->n_node))
		return CPU_E_NOMEM;
	g->plan.n_values = 0;       /* counts the names added */
	g->kind = calloc(nv, 1);
	g->blocks = calloc(nv, sizeof(*g->blocks));
	g->in_idx = calloc((size_t)g->n_in + 1, sizeof(int));
	g->out_idx = calloc((size_t)g->n_out + 1, sizeof(int));
	return g->kind && g->blocks && g->in_idx && g->out_idx ? 0 : CPU_E_NOMEM;
}

static int add_io(cpu_graph *g, char *err, size_t n)
{
	const Onnx__GraphProto *gp = g->proto;

	for (int i = 0; i < g->n_in; i++) {
		const char *name = gp->input[i]->name ? gp->input[i]->name : "";

		if (cpu_plan_find(&g->plan, name) >= 0)
			return snprintf(err, n, "subgraph input '%s' given twice", name), CPU_E_INVALID;
		g->in_idx[i] = add_value(g, name, V_INPUT);
	}
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		int v = add_value(g, tp->name ? tp->name : "", V_CONST);

		if (g->kind[v] != V_CONST || g->blocks[v])
			continue;   /* an input with a default: the input wins */
		g->blocks[v] = tp->data_type == CPU_STRING ? cpu_strings_from_proto(tp, err, n) :
			cpu_tensor_from_proto(tp, err, n);
		if (!g->blocks[v])
			return CPU_E_INVALID;
		g->plan.consts[v] = *g->blocks[v];
	}
	return 0;
}

static int map_node(cpu_graph *g, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = g->proto->node[k];
	cpu_plan *pl = &g->plan;

	pl->node_in[k] = calloc(p->n_input + 1, sizeof(int));
	pl->node_out[k] = calloc(p->n_output + 1, sizeof(int));
	if (!pl->node_in[k] || !pl->node_out[k])
		return CPU_E_NOMEM;
	for (size_t i = 0; i < p->n_input; i++)
		pl->node_in[k][i] = p->input[i][0] ? add_value(g, p->input[i], V_OUTER) : -1;
	for (size_t i = 0; i < p->n_output; i++) {
		if (p->output[i][0] && cpu_plan_find(pl, p->output[i]) >= 0)
			return snprintf(err, n, "value '%s' is defined twice or used before it is made",
					p->output[i]), CPU_E_INVALID;
		pl->node_out[k][i] = p->output[i][0] ? add_value(g, p->output[i], V_NODE) : -1;
	}
	return 0;
}

static void add_outputs(cpu_graph *g)
{
	const Onnx__GraphProto *gp = g->proto;

	for (int i = 0; i < g->n_out; i++) {
		const char *name = gp->output[i]->name ? gp->output[i]->name : "";

		g->out_idx[i] = add_value(g, name, V_OUTER);
		g->plan.pinned[g->out_idx[i]] = 1;
	}
}

static int init_node(cpu_graph *g, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = g->proto->node[k];
	const char *domain = p->domain ? p->domain : "";
	int64_t opset = cpu_opset_of(g->env.opsets, domain);

	if (!opset && (!domain[0] || strcmp(domain, "ai.onnx") == 0))
		opset = g->default_opset;
	return cpu_plan_init_node(&g->plan, k, &g->env, NULL, NULL, p, opset, (int)p->n_input,
				  err, n);
}

int cpu_graph_compile(const Onnx__GraphProto *gp, const cpu_load_env *env,
		      int64_t default_opset, cpu_graph **out, char *err, size_t n)
{
	cpu_graph *g = calloc(1, sizeof(*g));
	int rc;

	*out = NULL;
	if (!g)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	g->env = *env;
	g->env.layout = 0;
	g->proto = gp;
	g->default_opset = default_opset;
	g->n_in = (int)gp->n_input;
	g->n_out = (int)gp->n_output;
	g->cap_values = count_names(gp);
	rc = alloc_tables(g);
	if (rc == 0)
		rc = add_io(g, err, n);
	for (size_t k = 0; rc == 0 && k < gp->n_node; k++)
		rc = map_node(g, k, err, n);
	if (rc == 0)
		add_outputs(g);
	for (size_t k = 0; rc == 0 && k < gp->n_node; k++)
		rc = cpu_plan_refs(&g->plan, k, gp->node[k]);
	for (size_t k = 0; rc == 0 && k < gp->n_node; k++)
		rc = init_node(g, k, err, n);
	if (rc == 0 && !(g->frame = cpu_frame_new(&g->plan)))
		rc = CPU_E_NOMEM;
	if (rc) {
		if (rc == CPU_E_NOMEM)
			snprintf(err, n, "out of memory");
		cpu_graph_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void cpu_graph_free(cpu_graph *g)
{
	if (!g)
		return;
	cpu_frame_free(g->frame);
	for (size_t v = 0; g->blocks && v < g->plan.n_values; v++)
		free(g->blocks[v]);
	cpu_plan_free(&g->plan);
	free(g->kind);
	free(g->blocks);
	free(g->in_idx);
	free(g->out_idx);
	free(g);
}

int cpu_graph_n_inputs(const cpu_graph *g)
{
	return g->n_in;
}

int cpu_graph_n_outputs(const cpu_graph *g)
{
	return g->n_out;
}

const Onnx__GraphProto *cpu_graph_proto(const cpu_graph *g)
{
	return g->proto;
}

/* ---- run ------------------------------------------------------------------ */

static int bind(cpu_graph *g, cpu_frame *f, cpu_ctx *ctx, const cpu_tensor *const *in)
{
	cpu_frame_begin(f);
	for (int i = 0; i < g->n_in; i++) {
		int v = g->in_idx[i];

		f->have[v] = 0;   /* an input with a default: no value unless given */
		if (in && in[i])
			cpu_frame_bind(f, v, in[i], 0, 0);
	}
	for (size_t v = 0; v < g->plan.n_values; v++) {
		const cpu_tensor *t;

		if (g->kind[v] != V_OUTER)
			continue;
		t = cpu_scope_lookup(ctx->scope, g->plan.names[v]);
		if (!t)
			return cpu_fail(ctx, CPU_E_INVALID, "subgraph '%s': value '%s' is not defined",
					g->proto->name ? g->proto->name : "", g->plan.names[v]);
		cpu_frame_bind(f, (int)v, t, 0, 0);
	}
	return 0;
}

/* Hands the outputs over; a value named twice is copied for the second. */
static int take_outputs(cpu_graph *g, cpu_frame *f, cpu_ctx *ctx, cpu_tensor *out,
			int *out_heap)
{
	int rc = 0;

	for (int i = 0; i < g->n_out; i++) {
		out_heap[i] = 0;
		memset(&out[i], 0, sizeof(out[i]));
	}
	for (int i = 0; i < g->n_out; i++) {
		int v = g->out_idx[i];

		if (!f->have[v]) {
			rc = cpu_fail(ctx, CPU_E_INVALID, "subgraph output '%s' was not produced",
				      g->plan.names[v]);
			break;
		}
		out[i] = f->vals[v];
		out_heap[i] = f->heap[v];
		f->heap[v] = 0;
		for (int j = 0; j < i && rc == 0; j++)
			if (g->out_idx[j] == v && out_heap[j])
				rc = cpu_value_own(ctx, &out[i], &out_heap[i]);
		if (rc)
			break;
	}
	if (rc)
		for (int i = 0; i < g->n_out; i++)
			cpu_value_drop(&out[i], &out_heap[i]);
	return rc;
}

int cpu_graph_run(cpu_graph *g, cpu_ctx *ctx, const cpu_tensor *const *in, cpu_tensor *out,
		  int *out_heap)
{
	/* A frame of its own when this graph is already running (a body that
	 * runs itself, or concurrent runs of the provider): taking the kept
	 * one is atomic, as two runs' threads may get here at once. */
	int mine = !__atomic_exchange_n(&g->frame_taken, 1, __ATOMIC_ACQUIRE);
	cpu_frame *f = mine ? g->frame : cpu_frame_new(&g->plan);
	cpu_run_env env = {ctx->arena, ctx->scope, ctx->pool, ctx->threads, NULL, ctx->cancel,
			   ctx->cancel_token, ctx->prof, ctx->prof_parent, ctx->prof_depth};
	int rc;

	if (!f)
		return cpu_fail(ctx, CPU_E_NOMEM, "out of memory");
	rc = bind(g, f, ctx, in);
	if (rc == 0)
		rc = cpu_exec_run(f, &env, ctx->err, ctx->errlen);
	if (rc == 0)
		rc = take_outputs(g, f, ctx, out, out_heap);
	cpu_frame_end(f);
	if (mine)
		__atomic_store_n(&g->frame_taken, 0, __ATOMIC_RELEASE);
	else
		cpu_frame_free(f);
	return rc;
}
