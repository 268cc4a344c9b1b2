/*
 * cpu_graph: compiles and runs the subgraphs of If, Loop, Scan and
 * SequenceMap (see cpu_graph.h).  The layout mirrors the top-level
 * executor (cpu_ep.c): a value table indexed by number, per-node input and
 * output indexes, last uses, and per-run arrays sized once at compile time.
 * What differs: nothing is planned (every node output lives on the heap or
 * in the arena), names the body does not define come from enclosing scopes,
 * and the graph's outputs are handed to the caller rather than published.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_exec.h"
#include "cpu_graph.h"

enum { V_INPUT, V_CONST, V_NODE, V_OUTER };

struct cpu_graph {
	const Onnx__GraphProto *proto;
	const cpu_opsets *opsets;
	struct cpu_pack_cache *pack;  /* the enclosing subgraph's pre-pack cache */
	int64_t default_opset;
	size_t n_values, cap_values;
	const char **names;
	unsigned char *kind;
	cpu_tensor **consts;      /* per value: malloc'ed initializer or NULL */
	int *last_use;            /* last node reading each value, -1 if none */
	unsigned char *is_output;
	int n_in, n_out;
	int *in_idx, *out_idx;
	size_t n_nodes, inited;
	cpu_node *nodes;
	int **node_in, **node_out;
	int **node_refs;          /* values nested subgraphs read, -1 ended */
	const cpu_tensor ***node_consts;
	/* per run */
	cpu_tensor *vals;
	unsigned char *heap, *have;
	const cpu_tensor **in, **planned;
	cpu_tensor *out;
	int *out_heap;
	int max_in, max_out;
	int running;
};

typedef struct graph_scope {
	cpu_scope base;
	cpu_graph *g;
} graph_scope;

/* ---- names ---------------------------------------------------------------- */

static int find_value(const cpu_graph *g, const char *name)
{
	for (size_t v = 0; v < g->n_values; v++)
		if (strcmp(g->names[v], name) == 0)
			return (int)v;
	return -1;
}

static int add_value(cpu_graph *g, const char *name, int kind)
{
	int v = find_value(g, name);

	if (v >= 0)
		return v;
	if (g->n_values == g->cap_values)
		return -1;
	g->names[g->n_values] = name;
	g->kind[g->n_values] = (unsigned char)kind;
	g->last_use[g->n_values] = -1;
	return (int)g->n_values++;
}

static size_t count_names(const Onnx__GraphProto *gp)
{
	size_t total = gp->n_input + gp->n_initializer + gp->n_output;

	for (size_t k = 0; k < gp->n_node; k++)
		total += gp->node[k]->n_input + gp->node[k]->n_output;
	return total;
}

static void refs_graph(const Onnx__GraphProto *gp, void (*fn)(void *, const char *), void *arg)
{
	for (size_t k = 0; k < gp->n_node; k++) {
		const Onnx__NodeProto *p = gp->node[k];

		for (size_t i = 0; i < p->n_input; i++)
			if (p->input[i] && p->input[i][0])
				fn(arg, p->input[i]);
		cpu_graph_refs(p, fn, arg);
	}
	for (size_t i = 0; i < gp->n_output; i++)
		if (gp->output[i]->name && gp->output[i]->name[0])
			fn(arg, gp->output[i]->name);
}

void cpu_graph_refs(const Onnx__NodeProto *p, void (*fn)(void *arg, const char *name), void *arg)
{
	for (size_t a = 0; a < p->n_attribute; a++) {
		const Onnx__AttributeProto *at = p->attribute[a];

		if (at->g)
			refs_graph(at->g, fn, arg);
		for (size_t j = 0; j < at->n_graphs; j++)
			refs_graph(at->graphs[j], fn, arg);
	}
}

static int graph_supported(const Onnx__GraphProto *gp, int64_t opset, char *why, size_t n)
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
		ok = cpu_node_supported(p, opset, dt, (int)p->n_input, why, n);
		free(dt);
		if (!ok)
			return 0;
	}
	return 1;
}

int cpu_graph_supported(const Onnx__NodeProto *p, int64_t opset, char *why, size_t n)
{
	for (size_t a = 0; a < p->n_attribute; a++) {
		const Onnx__AttributeProto *at = p->attribute[a];

		if (at->g && !graph_supported(at->g, opset, why, n))
			return 0;
		for (size_t j = 0; j < at->n_graphs; j++)
			if (!graph_supported(at->graphs[j], opset, why, n))
				return 0;
	}
	return 1;
}

/* ---- compile -------------------------------------------------------------- */

static int alloc_tables(cpu_graph *g)
{
	size_t nv = g->cap_values + 1, nn = g->n_nodes + 1;

	g->names = calloc(nv, sizeof(*g->names));
	g->kind = calloc(nv, 1);
	g->consts = calloc(nv, sizeof(*g->consts));
	g->last_use = calloc(nv, sizeof(int));
	g->is_output = calloc(nv, 1);
	g->vals = calloc(nv, sizeof(*g->vals));
	g->heap = calloc(nv, 1);
	g->have = calloc(nv, 1);
	g->in_idx = calloc((size_t)g->n_in + 1, sizeof(int));
	g->out_idx = calloc((size_t)g->n_out + 1, sizeof(int));
	g->nodes = calloc(nn, sizeof(*g->nodes));
	g->node_in = calloc(nn, sizeof(int *));
	g->node_out = calloc(nn, sizeof(int *));
	g->node_refs = calloc(nn, sizeof(int *));
	g->node_consts = calloc(nn, sizeof(*g->node_consts));
	return g->names && g->kind && g->consts && g->last_use && g->is_output && g->vals &&
	       g->heap && g->have && g->in_idx && g->out_idx && g->nodes && g->node_in &&
	       g->node_out && g->node_refs && g->node_consts ? 0 : CPU_E_NOMEM;
}

static int add_io(cpu_graph *g, char *err, size_t n)
{
	const Onnx__GraphProto *gp = g->proto;

	for (int i = 0; i < g->n_in; i++) {
		const char *name = gp->input[i]->name ? gp->input[i]->name : "";

		if (find_value(g, name) >= 0)
			return snprintf(err, n, "subgraph input '%s' given twice", name), CPU_E_INVALID;
		g->in_idx[i] = add_value(g, name, V_INPUT);
	}
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		int v = add_value(g, tp->name ? tp->name : "", V_CONST);

		if (g->kind[v] != V_CONST || g->consts[v])
			continue;   /* an input with a default: the input wins */
		g->consts[v] = tp->data_type == CPU_STRING ? cpu_strings_from_proto(tp, err, n) :
			cpu_tensor_from_proto(tp, err, n);
		if (!g->consts[v])
			return CPU_E_INVALID;
	}
	return 0;
}

static int map_inputs(cpu_graph *g, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = g->proto->node[k];

	g->node_in[k] = calloc(p->n_input + 1, sizeof(int));
	g->node_out[k] = calloc(p->n_output + 1, sizeof(int));
	g->node_consts[k] = calloc(p->n_input + 1, sizeof(cpu_tensor *));
	if (!g->node_in[k] || !g->node_out[k] || !g->node_consts[k])
		return CPU_E_NOMEM;
	for (size_t i = 0; i < p->n_input; i++) {
		int v = p->input[i][0] ? add_value(g, p->input[i], V_OUTER) : -1;

		g->node_in[k][i] = v;
		if (v >= 0) {
			g->last_use[v] = (int)k;
			g->node_consts[k][i] = g->consts[v];
		}
	}
	for (size_t i = 0; i < p->n_output; i++) {
		int v = p->output[i][0] ? find_value(g, p->output[i]) : -1;

		if (v >= 0)
			return snprintf(err, n, "value '%s' is defined twice or used before it is made",
					p->output[i]), CPU_E_INVALID;
		g->node_out[k][i] = p->output[i][0] ? add_value(g, p->output[i], V_NODE) : -1;
	}
	if ((int)p->n_input > g->max_in)
		g->max_in = (int)p->n_input;
	if ((int)p->n_output > g->max_out)
		g->max_out = (int)p->n_output;
	return 0;
}

typedef struct refs_arg {
	cpu_graph *g;
	int k, n, cap;
	int *list;
} refs_arg;

static void note_ref(void *arg, const char *name)
{
	refs_arg *r = arg;
	int v = find_value(r->g, name);

	if (v < 0 || r->g->last_use[v] == r->k)
		return;   /* from further out, or already noted */
	r->g->last_use[v] = r->k;
	if (r->n + 1 < r->cap)
		r->list[r->n++] = v;
}

/* Values of this graph that node k's subgraphs read live until k has run. */
static int map_refs(cpu_graph *g, size_t k)
{
	refs_arg r = {g, (int)k, 0, (int)g->n_values + 1, NULL};

	r.list = malloc(sizeof(int) * (size_t)r.cap);
	if (!r.list)
		return CPU_E_NOMEM;
	cpu_graph_refs(g->proto->node[k], note_ref, &r);
	r.list[r.n] = -1;
	g->node_refs[k] = r.list;
	return 0;
}

static int init_node(cpu_graph *g, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = g->proto->node[k];
	const char *domain = p->domain ? p->domain : "";
	int64_t opset = cpu_opset_of(g->opsets, domain);
	int rc;

	if (!opset && (!domain[0] || strcmp(domain, "ai.onnx") == 0))
		opset = g->default_opset;
	rc = cpu_node_init_opsets(&g->nodes[k], g->pack, g->opsets, p, opset, g->node_consts[k],
				  (int)p->n_input, (int)p->n_output, err, n);
	if (rc == 0)
		g->inited = k + 1;
	return rc;
}

static int finish_tables(cpu_graph *g)
{
	const Onnx__GraphProto *gp = g->proto;

	for (int i = 0; i < g->n_out; i++) {
		const char *name = gp->output[i]->name ? gp->output[i]->name : "";

		g->out_idx[i] = add_value(g, name, V_OUTER);
		g->is_output[g->out_idx[i]] = 1;
	}
	g->in = calloc((size_t)g->max_in + 1, sizeof(*g->in));
	g->planned = calloc((size_t)g->max_out + 1, sizeof(*g->planned));
	g->out = calloc((size_t)g->max_out + 1, sizeof(*g->out));
	g->out_heap = calloc((size_t)g->max_out + 1, sizeof(int));
	return g->in && g->planned && g->out && g->out_heap ? 0 : CPU_E_NOMEM;
}

int cpu_graph_compile(const Onnx__GraphProto *gp, const cpu_opsets *opsets,
		      int64_t default_opset, struct cpu_pack_cache *pack, cpu_graph **out,
		      char *err, size_t n)
{
	cpu_graph *g = calloc(1, sizeof(*g));
	int rc;

	*out = NULL;
	if (!g)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	g->pack = pack;
	g->proto = gp;
	g->opsets = opsets;
	g->default_opset = default_opset;
	g->n_in = (int)gp->n_input;
	g->n_out = (int)gp->n_output;
	g->n_nodes = gp->n_node;
	g->cap_values = count_names(gp);
	rc = alloc_tables(g);
	if (rc == 0)
		rc = add_io(g, err, n);
	for (size_t k = 0; rc == 0 && k < g->n_nodes; k++)
		rc = map_inputs(g, k, err, n);
	if (rc == 0)
		rc = finish_tables(g);
	for (size_t k = 0; rc == 0 && k < g->n_nodes; k++)
		rc = map_refs(g, k);
	for (size_t k = 0; rc == 0 && k < g->n_nodes; k++)
		rc = init_node(g, k, err, n);
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
	for (size_t k = 0; k < g->inited; k++)
		cpu_node_fini(&g->nodes[k]);
	for (size_t k = 0; k < g->n_nodes; k++) {
		free(g->node_in ? g->node_in[k] : NULL);
		free(g->node_out ? g->node_out[k] : NULL);
		free(g->node_refs ? g->node_refs[k] : NULL);
		free(g->node_consts ? g->node_consts[k] : NULL);
	}
	for (size_t v = 0; g->consts && v < g->n_values; v++)
		free(g->consts[v]);
	free(g->names);
	free(g->kind);
	free(g->consts);
	free(g->last_use);
	free(g->is_output);
	free(g->vals);
	free(g->heap);
	free(g->have);
	free(g->in_idx);
	free(g->out_idx);
	free(g->nodes);
	free(g->node_in);
	free(g->node_out);
	free(g->node_refs);
	free(g->node_consts);
	free(g->in);
	free(g->planned);
	free(g->out);
	free(g->out_heap);
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

static const cpu_tensor *graph_find(const cpu_scope *s, const char *name)
{
	cpu_graph *g = ((const graph_scope *)s)->g;
	int v = find_value(g, name);

	return v >= 0 && g->have[v] ? &g->vals[v] : NULL;
}

static void release(cpu_graph *g, int v)
{
	if (g->heap[v])
		free(g->vals[v].data);
	g->heap[v] = 0;
	g->have[v] = 0;
}

static int bind(cpu_graph *g, cpu_ctx *ctx, const cpu_tensor *const *in)
{
	for (size_t v = 0; v < g->n_values; v++) {
		g->heap[v] = 0;
		g->have[v] = g->consts[v] != NULL;
		if (g->have[v])
			g->vals[v] = *g->consts[v];
	}
	for (int i = 0; i < g->n_in; i++) {
		int v = g->in_idx[i];

		g->have[v] = in && in[i];
		if (g->have[v])
			g->vals[v] = *in[i];
	}
	for (size_t v = 0; v < g->n_values; v++) {
		const cpu_tensor *t;

		if (g->kind[v] != V_OUTER)
			continue;
		t = cpu_scope_lookup(ctx->scope, g->names[v]);
		if (!t)
			return cpu_fail(ctx, CPU_E_INVALID, "subgraph '%s': value '%s' is not defined",
					g->proto->name ? g->proto->name : "", g->names[v]);
		g->vals[v] = *t;
		g->have[v] = 1;
	}
	return 0;
}

static int run_node(cpu_graph *g, cpu_ctx *ctx, const graph_scope *sc, size_t k)
{
	cpu_node *node = &g->nodes[k];
	int rc;

	for (int i = 0; i < node->n_in; i++) {
		int v = g->node_in[k][i];

		if (v >= 0 && !g->have[v])
			return cpu_fail(ctx, CPU_E_INVALID, "subgraph value '%s' has no value",
					g->names[v]);
		g->in[i] = v >= 0 ? &g->vals[v] : NULL;
	}
	rc = cpu_node_run_pool(node, ctx->arena, &sc->base, ctx->pool, g->in, g->planned,
			       g->out, g->out_heap, ctx->threads, ctx->err, ctx->errlen);
	if (rc)
		return rc;
	for (int i = 0; i < node->n_out; i++) {
		int v = g->node_out[k][i];

		if (v < 0) {
			if (g->out_heap[i])
				free(g->out[i].data);
			continue;
		}
		release(g, v);
		g->vals[v] = g->out[i];
		g->heap[v] = (unsigned char)g->out_heap[i];
		g->have[v] = g->out[i].data != NULL || g->out[i].dtype == CPU_NONE;
	}
	return 0;
}

static void release_dead(cpu_graph *g, size_t k)
{
	const cpu_node *node = &g->nodes[k];

	for (int i = 0; i < node->n_in; i++) {
		int v = g->node_in[k][i];

		if (v >= 0 && g->heap[v] && g->last_use[v] == (int)k && !g->is_output[v])
			release(g, v);
	}
	for (int i = 0; g->node_refs[k][i] >= 0; i++) {
		int v = g->node_refs[k][i];

		if (g->heap[v] && g->last_use[v] == (int)k && !g->is_output[v])
			release(g, v);
	}
	for (int i = 0; i < node->n_out; i++) {
		int v = g->node_out[k][i];

		if (v >= 0 && g->heap[v] && g->last_use[v] < 0 && !g->is_output[v])
			release(g, v);
	}
}

/* Hands the outputs over; a value named twice is copied for the second. */
static int take_outputs(cpu_graph *g, cpu_ctx *ctx, cpu_tensor *out, int *out_heap)
{
	int rc = 0;

	for (int i = 0; i < g->n_out; i++) {
		out_heap[i] = 0;
		memset(&out[i], 0, sizeof(out[i]));
	}
	for (int i = 0; i < g->n_out; i++) {
		int v = g->out_idx[i];

		if (!g->have[v]) {
			rc = cpu_fail(ctx, CPU_E_INVALID, "subgraph output '%s' was not produced",
				      g->names[v]);
			break;
		}
		out[i] = g->vals[v];
		out_heap[i] = g->heap[v];
		g->heap[v] = 0;
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
	graph_scope sc = {{ctx->scope, graph_find}, g};
	int rc;

	if (g->running)
		return cpu_fail(ctx, CPU_E_INTERNAL, "subgraph entered twice");
	g->running = 1;
	rc = bind(g, ctx, in);
	for (size_t k = 0; rc == 0 && k < g->n_nodes; k++) {
		rc = run_node(g, ctx, &sc, k);
		if (rc == 0)
			release_dead(g, k);
	}
	if (rc == 0)
		rc = take_outputs(g, ctx, out, out_heap);
	for (size_t v = 0; v < g->n_values; v++)
		release(g, (int)v);
	g->running = 0;
	return rc;
}
