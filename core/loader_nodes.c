/*
 * loader_nodes.c: the loader's node pass (see loader.c): each NodeProto
 * becomes a graph_node with its inputs resolved to values, the names its
 * subgraphs read from enclosing scopes become its implicit inputs, and the
 * nodes are put in a topological order (Kahn's algorithm, model order
 * among ready nodes) or the load fails naming a node on a cycle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/* Names a subgraph reads from its enclosing scopes, without duplicates. */
typedef struct name_list {
	const char **v;
	size_t n, cap;
	graph_namemap seen;
} name_list;

/* ---- nodes and implicit inputs ----------------------------------------- */

static int list_push(name_list *l, const char *s)
{
	const char **v;
	int rc;

	rc = graph_namemap_put(&l->seen, s, 0);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		v = realloc(l->v, l->cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
	}
	l->v[l->n++] = s;
	return 0;
}

static void list_free(name_list *l)
{
	free(l->v);
	graph_namemap_free(&l->seen);
	memset(l, 0, sizeof(*l));
}

/* Names a subgraph defines: its inputs, initializers and node outputs. */
static int scope_defs(const Onnx__GraphProto *sg, graph_namemap *m)
{
	size_t i, k;
	int rc = 0;

	for (i = 0; i < sg->n_input && rc >= 0; i++)
		rc = load_empty(sg->input[i]->name) ? 0 : graph_namemap_put(m, sg->input[i]->name, 0);
	for (i = 0; i < sg->n_initializer && rc >= 0; i++)
		rc = load_empty(sg->initializer[i]->name) ? 0 : graph_namemap_put(m, sg->initializer[i]->name, 0);
	for (i = 0; i < sg->n_node && rc >= 0; i++)
		for (k = 0; k < sg->node[i]->n_output && rc >= 0; k++)
			rc = load_empty(sg->node[i]->output[k]) ? 0 : graph_namemap_put(m, sg->node[i]->output[k], 0);
	return rc < 0 ? rc : 0;
}

static int free_names(load_ctx *c, const Onnx__GraphProto *sg, name_list *out, int depth);

/* Free names of every subgraph attribute of `np`, appended to `out`. */
static int node_subgraph_names(load_ctx *c, const Onnx__NodeProto *np, name_list *out, int depth)
{
	const Onnx__AttributeProto *a;
	size_t i, k;
	int rc = 0;

	for (i = 0; i < np->n_attribute && rc == 0; i++) {
		a = np->attribute[i];
		if (a->g)
			rc = free_names(c, a->g, out, depth);
		for (k = 0; k < a->n_graphs && rc == 0; k++)
			rc = free_names(c, a->graphs[k], out, depth);
	}
	return rc;
}

/* Appends to `out` what `sg` reads but does not define (node inputs, the
 * free names of nested subgraphs, outputs that name outer values): the
 * enclosing scope has to provide them. */
static int free_names(load_ctx *c, const Onnx__GraphProto *sg, name_list *out, int depth)
{
	graph_namemap local = { 0 };
	name_list inner = { 0 };
	const Onnx__NodeProto *np;
	size_t i, k;
	int rc;

	if (depth > MAX_SUBGRAPH_DEPTH)
		return load_fail(c, -EINVAL, "%s: subgraphs nested deeper than %d", c->label, MAX_SUBGRAPH_DEPTH);
	rc = scope_defs(sg, &local);
	for (i = 0; i < sg->n_node && rc == 0; i++) {
		np = sg->node[i];
		for (k = 0; k < np->n_input && rc == 0; k++)
			if (!load_empty(np->input[k]) && graph_namemap_get(&local, np->input[k]) < 0)
				rc = list_push(out, np->input[k]);
		if (rc == 0)
			rc = node_subgraph_names(c, np, &inner, depth + 1);
	}
	for (i = 0; i < inner.n && rc == 0; i++)
		if (graph_namemap_get(&local, inner.v[i]) < 0)
			rc = list_push(out, inner.v[i]);
	for (i = 0; i < sg->n_output && rc == 0; i++)
		if (!load_empty(sg->output[i]->name) && graph_namemap_get(&local, sg->output[i]->name) < 0)
			rc = list_push(out, sg->output[i]->name);
	list_free(&inner);
	graph_namemap_free(&local);
	return rc;
}

static int resolve_implicit(load_ctx *c, size_t j, const char *lbl)
{
	graph_node *n = &c->g->nodes[j];
	name_list names = { 0 };
	size_t i;
	int rc, vi;

	rc = node_subgraph_names(c, c->gp->node[j], &names, 1);
	if (rc < 0 || names.n == 0)
		goto out;
	n->implicit = calloc(names.n, sizeof(int));
	if (!n->implicit) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < names.n; i++) {
		vi = graph_find_value(c->g, names.v[i]);
		if (vi < 0) {
			rc = load_fail(c, -EINVAL, "%s: subgraph reads '%s', which is not defined",
				  lbl, names.v[i]);
			goto out;
		}
		n->implicit[n->n_implicit++] = vi;
	}
out:
	list_free(&names);
	return rc;
}

static int build_node(load_ctx *c, size_t j)
{
	const Onnx__NodeProto *np = c->gp->node[j];
	graph_node *n = &c->g->nodes[j];
	char lbl[256];
	size_t k;

	load_node_label(c, j, lbl, sizeof(lbl));
	if (load_empty(np->op_type))
		return load_fail(c, -EINVAL, "%s: node has no op_type", lbl);
	n->proto = np;
	n->op_type = np->op_type;
	n->domain = load_norm_domain(np->domain);
	n->opset = graph_opset(c->g, n->domain);
	n->ep = -1;
	if (n->opset == 0)
		return load_fail(c, -EINVAL, "%s: domain '%s' is not imported by the model (opset_import)",
			    lbl, n->domain);
	n->in = calloc(np->n_input + 1, sizeof(int));
	n->out = calloc(np->n_output + 1, sizeof(int));
	if (!n->in || !n->out)
		return -ENOMEM;
	for (k = 0; k < np->n_input; k++, n->n_in++) {
		n->in[k] = load_empty(np->input[k]) ? -1 : graph_find_value(c->g, np->input[k]);
		if (n->in[k] < 0 && !load_empty(np->input[k]))
			return load_fail(c, -EINVAL, "%s: input '%s' is not defined", lbl, np->input[k]);
	}
	for (k = 0; k < np->n_output; k++, n->n_out++)
		n->out[k] = load_empty(np->output[k]) ? -1 : graph_find_value(c->g, np->output[k]);
	return resolve_implicit(c, j, lbl);
}

static int build_nodes(load_ctx *c)
{
	size_t j;
	int rc = 0;

	c->g->nodes = calloc(c->gp->n_node + 1, sizeof(graph_node));
	if (!c->g->nodes)
		return -ENOMEM;
	/* Counted up front: graph_free copes with zeroed nodes. */
	c->g->n_nodes = c->gp->n_node;
	for (j = 0; j < c->gp->n_node && rc == 0; j++)
		rc = build_node(c, j);
	return rc;
}

/* ---- topological order ------------------------------------------------- */

/* Producer (model order) of node n's k-th dependency: its inputs, then its
 * implicit inputs; -1 for graph inputs, initializers and omitted inputs. */
static int dep_value(const graph_node *n, int k)
{
	return k < n->n_in ? n->in[k] : n->implicit[k - n->n_in];
}

static int dep_producer(const graph *g, const graph_node *n, int k)
{
	int v = dep_value(n, k);

	return v < 0 ? -1 : g->values[v].producer;
}

static void heap_push(int *h, size_t *n, int v)
{
	size_t i = (*n)++;

	while (i > 0 && h[(i - 1) / 2] > v) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = v;
}

static int heap_pop(int *h, size_t *n)
{
	int top = h[0], last = h[--*n];
	size_t i = 0, ch;

	for (;;) {
		ch = 2 * i + 1;
		if (ch >= *n)
			break;
		if (ch + 1 < *n && h[ch + 1] < h[ch])
			ch++;
		if (h[ch] >= last)
			break;
		h[i] = h[ch];
		i = ch;
	}
	h[i] = last;
	return top;
}

/* An input of unsorted node j whose producer is unsorted too; every
 * unsorted node has one, or its in-degree would have reached 0. */
static int unsorted_dep(const graph *g, size_t j, const int *indeg)
{
	const graph_node *n = &g->nodes[j];
	int k, p;

	for (k = 0; k < n->n_in + n->n_implicit; k++) {
		p = dep_producer(g, n, k);
		if (p >= 0 && indeg[p] > 0)
			return k;
	}
	return -1;
}

/* Walks back from an unsorted node along unsorted producers.  After n steps
 * the walk is inside a cycle, so the node named is really on it, not merely
 * downstream of one. */
static int report_cycle(load_ctx *c, const int *indeg)
{
	const graph *g = c->g;
	size_t j = 0, step;
	int k = -1;
	char lbl[256];

	while (indeg[j] == 0)
		j++;
	for (step = 0; step < g->n_nodes; step++) {
		k = unsorted_dep(g, j, indeg);
		j = (size_t)dep_producer(g, &g->nodes[j], k);
	}
	k = unsorted_dep(g, j, indeg);
	return load_fail(c, -EINVAL, "%s is part of a cycle (through its input '%s')",
		    load_node_label(c, j, lbl, sizeof(lbl)),
		    g->values[dep_value(&g->nodes[j], k)].name);
}

/* Kahn's algorithm with a min-heap of ready nodes: the smallest model index
 * goes first, so an already sorted model keeps its order exactly. */
static int kahn(const graph *g, int *indeg, const int *end, const int *edges, int *order)
{
	size_t n = g->n_nodes, ready = 0, done = 0, j;
	int *heap = malloc((n + 1) * sizeof(int));
	int p, e;

	if (!heap)
		return -ENOMEM;
	for (j = 0; j < n; j++)
		if (indeg[j] == 0)
			heap_push(heap, &ready, (int)j);
	while (ready) {
		p = heap_pop(heap, &ready);
		order[done++] = p;
		for (e = p ? end[p - 1] : 0; e < end[p]; e++)
			if (--indeg[edges[e]] == 0)
				heap_push(heap, &ready, edges[e]);
	}
	free(heap);
	return (int)done;
}

/* Edges producer -> consumer in CSR form: node p's consumers are
 * edges[end[p-1] .. end[p]).  indeg counts each consumer's edges. */
static int build_edges(const graph *g, int *indeg, int *end, int **edges_out)
{
	size_t n = g->n_nodes, j, total = 0;
	int k, p, *edges;

	for (j = 0; j < n; j++)
		for (k = 0; k < g->nodes[j].n_in + g->nodes[j].n_implicit; k++)
			if ((p = dep_producer(g, &g->nodes[j], k)) >= 0) {
				end[p]++;
				indeg[j]++;
				total++;
			}
	for (j = 1; j < n; j++)
		end[j] += end[j - 1];
	edges = malloc((total + 1) * sizeof(int));
	if (!edges)
		return -ENOMEM;
	/* Filled back to front so each end[p] ends up at its start, then
	 * shifted: cheaper than a second cursor array. */
	for (j = n; j-- > 0;)
		for (k = g->nodes[j].n_in + g->nodes[j].n_implicit; k-- > 0;)
			if ((p = dep_producer(g, &g->nodes[j], k)) >= 0)
				edges[--end[p]] = (int)j;
	for (j = 0; j + 1 < n; j++)
		end[j] = end[j + 1];
	if (n)
		end[n - 1] = (int)total;
	*edges_out = edges;
	return 0;
}

static int sort_nodes(load_ctx *c)
{
	graph *g = c->g;
	size_t n = g->n_nodes, k;
	int *indeg = calloc(n + 1, sizeof(int)), *end = calloc(n + 1, sizeof(int));
	int *order = calloc(n + 1, sizeof(int)), *edges = NULL;
	graph_node *sorted = malloc((n + 1) * sizeof(graph_node));
	int rc = -ENOMEM;

	if (!indeg || !end || !order || !sorted || build_edges(g, indeg, end, &edges) < 0)
		goto out;
	rc = kahn(g, indeg, end, edges, order);
	if (rc >= 0 && (size_t)rc < n)
		rc = report_cycle(c, indeg);
	if (rc < 0)
		goto out;
	for (k = 0; k < n; k++) {
		sorted[k] = g->nodes[order[k]];
		end[order[k]] = (int)k;        /* reused: old index -> new */
	}
	for (k = 0; k < g->n_values; k++)
		if (g->values[k].producer >= 0)
			g->values[k].producer = end[g->values[k].producer];
	free(g->nodes);
	g->nodes = sorted;
	sorted = NULL;
	rc = 0;
out:
	free(sorted);
	free(edges);
	free(order);
	free(end);
	free(indeg);
	return rc;
}

int load_nodes(load_ctx *c)
{
	int rc = build_nodes(c);

	return rc == 0 ? sort_nodes(c) : rc;
}
