/*
 * loader.c: turns an ONNX file (or bytes) into the graph IR of graph.h.
 * Parses the ModelProto with protobuf-c, then validates and indexes it:
 * opset imports, values (inputs, initializers, activations) with their
 * declared types and symbolic dims, nodes with resolved inputs and the
 * implicit inputs their subgraphs read, and a topological order.  A model is
 * untrusted input: every violation is a load error naming the node, tensor
 * or file, never a crash.  Called by the session and by tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"

/* Deep enough for real models (If inside Loop inside Scan), shallow enough
 * that a hostile model cannot exhaust the stack through our recursion. */
#define MAX_SUBGRAPH_DEPTH 64

typedef struct load_ctx {
	graph *g;
	const Onnx__GraphProto *gp;
	const char *label;        /* model path, or "model" for bytes */
	graph_namemap symbols;    /* dim_param -> symbol index */
	size_t symbols_cap;
	char *err;
	size_t errlen;
} load_ctx;

/* Names a subgraph reads from its enclosing scopes, without duplicates. */
typedef struct name_list {
	const char **v;
	size_t n, cap;
	graph_namemap seen;
} name_list;

static int fail(load_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	if (c->err && c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static const char *norm_domain(const char *d)
{
	return (!d || strcmp(d, "ai.onnx") == 0) ? "" : d;
}

static int empty(const char *s)
{
	return !s || !*s;
}

/* "node 'name' (Op)", or "node #i (Op)" for unnamed nodes; i is the index
 * in the model, which is what a user can find in a viewer. */
static const char *node_label(const load_ctx *c, size_t i, char *buf, size_t n)
{
	const Onnx__NodeProto *np = c->gp->node[i];
	const char *op = np->op_type ? np->op_type : "?";

	if (!empty(np->name))
		snprintf(buf, n, "node '%s' (%s)", np->name, op);
	else
		snprintf(buf, n, "node #%zu (%s)", i, op);
	return buf;
}

/* ---- model header and opsets ------------------------------------------- */

static int add_opset(load_ctx *c, const char *domain, int64_t version)
{
	graph *g = c->g;
	graph_opset_import *o = &g->opsets[g->n_opsets];

	if (version < 1)
		return fail(c, -EINVAL, "%s: opset import for domain '%s' has no version", c->label, domain);
	if (graph_opset(g, domain) > 0)
		return fail(c, -EINVAL, "%s: domain '%s' is imported twice (opset_import)", c->label, domain);
	o->domain = strdup(domain);
	if (!o->domain)
		return -ENOMEM;
	o->version = version;
	g->n_opsets++;
	return 0;
}

static int load_header(load_ctx *c)
{
	const Onnx__ModelProto *m = c->g->model;
	const Onnx__OperatorSetIdProto *op;
	size_t i;
	int rc = 0;

	if (!m->graph)
		return fail(c, -EINVAL, "%s: not an ONNX model (no graph)", c->label);
	if (!m->has_ir_version || m->ir_version < 1)
		return fail(c, -EINVAL, "%s: not an ONNX model (no ir_version)", c->label);
	c->gp = m->graph;
	c->g->opsets = calloc(m->n_opset_import + 1, sizeof(graph_opset_import));
	if (!c->g->opsets)
		return -ENOMEM;
	/* IR versions before 3 predate opset_import and mean opset 1. */
	if (m->n_opset_import == 0 && m->ir_version < 3)
		return add_opset(c, "", 1);
	if (m->n_opset_import == 0)
		return fail(c, -EINVAL, "%s: model imports no opset (opset_import is empty)", c->label);
	for (i = 0; i < m->n_opset_import && rc == 0; i++) {
		op = m->opset_import[i];
		rc = add_opset(c, norm_domain(op->domain), op->has_version ? op->version : 0);
	}
	return rc;
}

/* ---- values ------------------------------------------------------------ */

/* Adds a value whose name is known to be new; returns its index. */
static int add_value(load_ctx *c, const char *name, enum graph_value_kind kind, int producer)
{
	graph *g = c->g;
	int vi = (int)g->n_values;
	graph_value *v = &g->values[vi];
	int rc;

	memset(v, 0, sizeof(*v));
	v->name = strdup(name);
	if (!v->name)
		return -ENOMEM;
	v->kind = kind;
	v->is_tensor = 1;
	v->rank = -1;
	v->producer = producer;
	v->init.file = -1;
	g->n_values++;
	rc = graph_namemap_put(&g->index, v->name, vi);
	return rc < 0 ? rc : vi;
}

static const char *value_origin(const graph *g, int vi)
{
	switch (g->values[vi].kind) {
	case GRAPH_VALUE_INPUT:
		return "a graph input";
	case GRAPH_VALUE_INITIALIZER:
		return "an initializer";
	default:
		return "the output of another node";
	}
}

/* A symbolic dim: one id per dim_param name, a fresh one for a dim with
 * neither value nor name (ONNX: an unknown, unrelated size). */
static int dim_symbol(load_ctx *c, const Onnx__TensorShapeProto__Dimension *d, int64_t *out)
{
	graph *g = c->g;
	const char *name = NULL;
	char **syms;
	int s;

	if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && !empty(d->dim_param))
		name = d->dim_param;
	s = name ? graph_namemap_get(&c->symbols, name) : -1;
	if (s < 0) {
		if ((size_t)g->n_symbols == c->symbols_cap) {
			c->symbols_cap = c->symbols_cap ? c->symbols_cap * 2 : 16;
			syms = realloc(g->symbols, c->symbols_cap * sizeof(*syms));
			if (!syms)
				return -ENOMEM;
			g->symbols = syms;
		}
		s = g->n_symbols;
		g->symbols[s] = name ? strdup(name) : NULL;
		if (name && !g->symbols[s])
			return -ENOMEM;
		g->n_symbols++;
		if (name && graph_namemap_put(&c->symbols, g->symbols[s], s) < 0)
			return -ENOMEM;
	}
	*out = -(int64_t)s - 1;
	return 0;
}

static int set_type(load_ctx *c, int vi, const Onnx__TypeProto *tp)
{
	graph_value *v = &c->g->values[vi];
	const Onnx__TypeProto__Tensor *tt;
	const Onnx__TensorShapeProto__Dimension *d;
	size_t i;
	int rc;

	v->type = tp;
	if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
		return 0;
	if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
		v->is_tensor = 0;
		return 0;
	}
	tt = tp->tensor_type;
	v->elem_type = tt->has_elem_type ? tt->elem_type : 0;
	if (!tt->shape)
		return 0;
	if (tt->shape->n_dim > GRAPH_MAX_RANK)
		return fail(c, -EINVAL, "value '%s': rank %zu exceeds the maximum of %d",
			    v->name, tt->shape->n_dim, GRAPH_MAX_RANK);
	for (i = 0; i < tt->shape->n_dim; i++) {
		d = tt->shape->dim[i];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
			v->dims[i] = d->dim_value;
			continue;
		}
		rc = dim_symbol(c, d, &v->dims[i]);
		if (rc < 0)
			return rc;
	}
	v->rank = (int)tt->shape->n_dim;
	return 0;
}

static int add_initializers(load_ctx *c)
{
	const Onnx__TensorProto *t;
	graph_value *v;
	size_t i, k;
	int vi;

	if (c->gp->n_sparse_initializer)
		return fail(c, -EINVAL, "%s: sparse initializers are not supported", c->label);
	for (i = 0; i < c->gp->n_initializer; i++) {
		t = c->gp->initializer[i];
		if (empty(t->name))
			return fail(c, -EINVAL, "%s: initializer #%zu has no name", c->label, i);
		if (graph_find_value(c->g, t->name) >= 0)
			return fail(c, -EINVAL, "initializer '%s' is defined twice", t->name);
		if (t->n_dims > GRAPH_MAX_RANK)
			return fail(c, -EINVAL, "initializer '%s': rank %zu exceeds the maximum of %d",
				    t->name, t->n_dims, GRAPH_MAX_RANK);
		vi = add_value(c, t->name, GRAPH_VALUE_INITIALIZER, -1);
		if (vi < 0)
			return vi;
		v = &c->g->values[vi];
		v->elem_type = t->data_type;
		v->rank = (int)t->n_dims;
		for (k = 0; k < t->n_dims; k++)
			v->dims[k] = t->dims[k];
		vi = graph_init_load(c->g, vi, t, c->err, c->errlen);
		if (vi < 0)
			return vi;
	}
	return 0;
}

/* Graph inputs.  One that is also an initializer (every initializer, before
 * IR 4) is a weight with a default, not something the user feeds. */
static int add_inputs(load_ctx *c)
{
	const Onnx__ValueInfoProto *in;
	graph *g = c->g;
	size_t i;
	int vi, rc;

	for (i = 0; i < c->gp->n_input; i++) {
		in = c->gp->input[i];
		if (empty(in->name))
			return fail(c, -EINVAL, "%s: graph input #%zu has no name", c->label, i);
		vi = graph_find_value(g, in->name);
		if (vi >= 0 && g->values[vi].kind == GRAPH_VALUE_INITIALIZER) {
			g->values[vi].type = in->type;
			continue;
		}
		if (vi >= 0)
			return fail(c, -EINVAL, "graph input '%s' is declared twice", in->name);
		vi = add_value(c, in->name, GRAPH_VALUE_INPUT, -1);
		if (vi < 0)
			return vi;
		g->inputs[g->n_inputs++] = vi;
		rc = set_type(c, vi, in->type);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int add_node_outputs(load_ctx *c)
{
	const Onnx__NodeProto *np;
	char lbl[256];
	size_t j, k;
	int vi;

	for (j = 0; j < c->gp->n_node; j++) {
		np = c->gp->node[j];
		for (k = 0; k < np->n_output; k++) {
			if (empty(np->output[k]))
				continue;
			vi = graph_find_value(c->g, np->output[k]);
			if (vi >= 0)
				return fail(c, -EINVAL, "%s: output '%s' is already defined (%s)",
					    node_label(c, j, lbl, sizeof(lbl)), np->output[k],
					    value_origin(c->g, vi));
			vi = add_value(c, np->output[k], GRAPH_VALUE_ACTIVATION, (int)j);
			if (vi < 0)
				return vi;
		}
	}
	return 0;
}

/* Graph outputs, then value_info: declared types for activations, which
 * otherwise start unknown.  An output's own declaration wins. */
static int add_outputs(load_ctx *c)
{
	const Onnx__ValueInfoProto *vi;
	graph *g = c->g;
	size_t i;
	int idx, rc;

	for (i = 0; i < c->gp->n_output + c->gp->n_value_info; i++) {
		int is_out = i < c->gp->n_output;

		vi = is_out ? c->gp->output[i] : c->gp->value_info[i - c->gp->n_output];
		idx = graph_find_value(g, vi->name);
		if (is_out && idx < 0)
			return fail(c, -EINVAL, "%s: graph output '%s' is not produced by any node or input",
				    c->label, vi->name ? vi->name : "");
		if (idx < 0)
			continue;       /* value_info about a name no node uses */
		if (is_out) {
			g->values[idx].is_graph_output = 1;
			g->outputs[g->n_outputs++] = idx;
		}
		if (g->values[idx].kind != GRAPH_VALUE_ACTIVATION || g->values[idx].type)
			continue;
		rc = set_type(c, idx, vi->type);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int build_values(load_ctx *c)
{
	graph *g = c->g;
	size_t j, cap = c->gp->n_initializer + c->gp->n_input;
	int rc;

	for (j = 0; j < c->gp->n_node; j++)
		cap += c->gp->node[j]->n_output;
	/* Sized once so value pointers stay valid while the loader works. */
	g->values = calloc(cap + 1, sizeof(*g->values));
	g->inputs = calloc(c->gp->n_input + 1, sizeof(int));
	g->outputs = calloc(c->gp->n_output + 1, sizeof(int));
	if (!g->values || !g->inputs || !g->outputs)
		return -ENOMEM;
	rc = add_initializers(c);
	if (rc == 0)
		rc = add_inputs(c);
	if (rc == 0)
		rc = add_node_outputs(c);
	if (rc == 0)
		rc = add_outputs(c);
	return rc;
}

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
		rc = empty(sg->input[i]->name) ? 0 : graph_namemap_put(m, sg->input[i]->name, 0);
	for (i = 0; i < sg->n_initializer && rc >= 0; i++)
		rc = empty(sg->initializer[i]->name) ? 0 : graph_namemap_put(m, sg->initializer[i]->name, 0);
	for (i = 0; i < sg->n_node && rc >= 0; i++)
		for (k = 0; k < sg->node[i]->n_output && rc >= 0; k++)
			rc = empty(sg->node[i]->output[k]) ? 0 : graph_namemap_put(m, sg->node[i]->output[k], 0);
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
		return fail(c, -EINVAL, "%s: subgraphs nested deeper than %d", c->label, MAX_SUBGRAPH_DEPTH);
	rc = scope_defs(sg, &local);
	for (i = 0; i < sg->n_node && rc == 0; i++) {
		np = sg->node[i];
		for (k = 0; k < np->n_input && rc == 0; k++)
			if (!empty(np->input[k]) && graph_namemap_get(&local, np->input[k]) < 0)
				rc = list_push(out, np->input[k]);
		if (rc == 0)
			rc = node_subgraph_names(c, np, &inner, depth + 1);
	}
	for (i = 0; i < inner.n && rc == 0; i++)
		if (graph_namemap_get(&local, inner.v[i]) < 0)
			rc = list_push(out, inner.v[i]);
	for (i = 0; i < sg->n_output && rc == 0; i++)
		if (!empty(sg->output[i]->name) && graph_namemap_get(&local, sg->output[i]->name) < 0)
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
			rc = fail(c, -EINVAL, "%s: subgraph reads '%s', which is not defined",
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

	node_label(c, j, lbl, sizeof(lbl));
	if (empty(np->op_type))
		return fail(c, -EINVAL, "%s: node has no op_type", lbl);
	n->proto = np;
	n->op_type = np->op_type;
	n->domain = norm_domain(np->domain);
	n->opset = graph_opset(c->g, n->domain);
	n->ep = -1;
	if (n->opset == 0)
		return fail(c, -EINVAL, "%s: domain '%s' is not imported by the model (opset_import)",
			    lbl, n->domain);
	n->in = calloc(np->n_input + 1, sizeof(int));
	n->out = calloc(np->n_output + 1, sizeof(int));
	if (!n->in || !n->out)
		return -ENOMEM;
	for (k = 0; k < np->n_input; k++, n->n_in++) {
		n->in[k] = empty(np->input[k]) ? -1 : graph_find_value(c->g, np->input[k]);
		if (n->in[k] < 0 && !empty(np->input[k]))
			return fail(c, -EINVAL, "%s: input '%s' is not defined", lbl, np->input[k]);
	}
	for (k = 0; k < np->n_output; k++, n->n_out++)
		n->out[k] = empty(np->output[k]) ? -1 : graph_find_value(c->g, np->output[k]);
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
	return fail(c, -EINVAL, "%s is part of a cycle (through its input '%s')",
		    node_label(c, j, lbl, sizeof(lbl)),
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

/* ---- entry points ------------------------------------------------------ */

/* protobuf bytes carry no terminator; graph_attr_string hands out C strings. */
static int terminate(ProtobufCBinaryData *s)
{
	uint8_t *p;

	if (!s->data)
		return 0;
	p = realloc(s->data, s->len + 1);
	if (!p)
		return -ENOMEM;
	p[s->len] = 0;
	s->data = p;
	return 0;
}

static int terminate_strings(Onnx__GraphProto *gp, int depth)
{
	Onnx__AttributeProto *a;
	size_t i, j, k;
	int rc = 0;

	if (depth > MAX_SUBGRAPH_DEPTH)
		return -EINVAL;
	for (i = 0; i < gp->n_node && rc == 0; i++) {
		for (j = 0; j < gp->node[i]->n_attribute && rc == 0; j++) {
			a = gp->node[i]->attribute[j];
			rc = a->has_s ? terminate(&a->s) : 0;
			for (k = 0; k < a->n_strings && rc == 0; k++)
				rc = terminate(&a->strings[k]);
			if (a->g && rc == 0)
				rc = terminate_strings(a->g, depth + 1);
			for (k = 0; k < a->n_graphs && rc == 0; k++)
				rc = terminate_strings(a->graphs[k], depth + 1);
		}
	}
	return rc;
}

/* Parses `bytes` and builds the graph; takes ownership of model_dir. */
static int load_common(const void *bytes, size_t n, char *model_dir, const char *label,
		       graph **out, char *err, size_t errlen)
{
	load_ctx c = { .label = label, .err = err, .errlen = errlen };
	int rc = -ENOMEM;

	c.g = calloc(1, sizeof(*c.g));
	if (!c.g) {
		free(model_dir);
		goto out;
	}
	c.g->model_dir = model_dir;
	/* protobuf-c copies every field, so the caller's bytes (or the file
	 * mapping) are not needed once this returns. */
	c.g->model = onnx__model_proto__unpack(NULL, n, bytes);
	rc = c.g->model ? 0 : fail(&c, -EINVAL, "%s: not an ONNX model (protobuf parse failed)", label);
	if (rc == 0)
		rc = load_header(&c);
	if (rc == 0)
		rc = build_values(&c);
	if (rc == 0)
		rc = build_nodes(&c);
	if (rc == 0)
		rc = sort_nodes(&c);
	if (rc == 0)
		rc = terminate_strings(c.g->model->graph, 0);
out:
	if (rc == -ENOMEM)
		fail(&c, rc, "%s: out of memory", label);
	graph_namemap_free(&c.symbols);
	if (rc < 0) {
		graph_free(c.g);
		c.g = NULL;
	}
	*out = c.g;
	return rc;
}

int graph_load_bytes(const void *bytes, size_t n, const char *model_dir,
		     graph **out, char *err, size_t errlen)
{
	char *dir = NULL;
	load_ctx c = { .err = err, .errlen = errlen };

	*out = NULL;
	if (model_dir && !(dir = strdup(model_dir)))
		return fail(&c, -ENOMEM, "model: out of memory");
	if (n == 0) {
		free(dir);
		return fail(&c, -EINVAL, "model: not an ONNX model (empty)");
	}
	return load_common(bytes, n, dir, "model", out, err, errlen);
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int graph_load(const char *path, graph **out, char *err, size_t errlen)
{
	load_ctx c = { .err = err, .errlen = errlen };
	void *map = MAP_FAILED;
	struct stat st;
	char *dir = NULL;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(&c, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = fail(&c, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		rc = fail(&c, -EINVAL, "%s: not an ONNX model (%s)", path,
			  S_ISREG(st.st_mode) ? "empty file" : "not a regular file");
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		rc = fail(&c, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	dir = dir_of(path);
	rc = dir ? load_common(map, (size_t)st.st_size, dir, path, out, err, errlen)
		 : fail(&c, -ENOMEM, "%s: out of memory", path);
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	close(fd);
	return rc;
}
