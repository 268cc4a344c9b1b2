/*
 * dk_load: loading a subgraph onto a device provider (see dk_exec.h): the
 * executor's tables, each node wired to its values and matched to its op,
 * the weights, and their release at unload; the capability-query
 * preamble.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_exec.h"
#include "dk_shape.h"
#include "log.h"

int dk_dev_dtype(int32_t dtype)
{
	return dtype == DK_FLOAT || dtype == DK_FLOAT16;
}

size_t dk_esz(int32_t dtype)
{
	switch (dtype) {
	case DK_FLOAT16: return 2;
	case DK_INT64: return 8;
	default: return 4;
	}
}

void *dk_list_push(dk_list *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		void *nv = realloc(l->v, cap * l->size);

		if (!nv)
			return NULL;
		l->v = nv;
		l->cap = cap;
	}
	memset((char *)l->v + l->n * l->size, 0, l->size);
	return (char *)l->v + l->n++ * l->size;
}

/* ---- wiring ------------------------------------------------------------- */

int dk_wiring_init(dk_wiring *w, const ep_subgraph *sg)
{
	size_t nv = sg->n_values + 1;

	memset(w, 0, sizeof(*w));
	w->sg = sg;
	w->producer = calloc(nv, sizeof(int));
	w->order = calloc(nv, sizeof(int));
	w->bound = calloc(nv, sizeof(int));
	if (!w->producer || !w->order || !w->bound)
		return -1;
	for (size_t v = 0; v < nv; v++)
		w->producer[v] = w->bound[v] = -1;
	return 0;
}

void dk_wiring_fini(dk_wiring *w)
{
	free(w->producer);
	free(w->order);
	free(w->bound);
	memset(w, 0, sizeof(*w));
}

void dk_wiring_reset(dk_wiring *w)
{
	for (size_t v = 0; v < w->sg->n_values; v++)
		w->bound[v] = -1;
}

static int value_index(const ep_subgraph *sg, const char *name)
{
	for (size_t i = 0; i < sg->n_values; i++)
		if (strcmp(sg->values[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int map_names(const ep_subgraph *sg, char **names, size_t cnt, int **out, char *err,
		     size_t n)
{
	*out = calloc(cnt + 1, sizeof(int));
	if (!*out)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	for (size_t i = 0; i < cnt; i++) {
		(*out)[i] = names[i][0] ? value_index(sg, names[i]) : -1;
		if (names[i][0] && (*out)[i] < 0)
			return snprintf(err, n, "value '%s' is not in the subgraph", names[i]),
			       EP_E_INVALID;
	}
	return 0;
}

/* Node k's inputs and outputs as value indexes; each output gets k as its
 * producer and its place in the production order. */
static int node_wire(dk_wiring *w, const Onnx__NodeProto *p, int k, dk_node *nd, char *err,
		     size_t n)
{
	int rc = map_names(w->sg, p->input, p->n_input, &nd->in, err, n);

	if (!rc)
		rc = map_names(w->sg, p->output, p->n_output, &nd->out, err, n);
	for (size_t i = 0; !rc && i < p->n_output; i++) {
		int v = nd->out[i];

		if (v < 0)
			continue;
		if (w->producer[v] < 0)
			w->order[w->n_order++] = v;
		w->producer[v] = k;
	}
	return rc;
}

/* ---- load --------------------------------------------------------------- */

static void exec_free(dk_exec *ex)
{
	void *self = ex->dev->self;

	for (size_t k = 0; ex->nodes && k < ex->n_nodes; k++) {
		dk_node *nd = &ex->nodes[k];

		if (nd->op && nd->op->fini)
			nd->op->fini(nd);
		free(nd->in);
		free(nd->out);
		free(nd->state);
		ex->dev->ops->free(self, &nd->keep);
	}
	for (size_t v = 0; ex->own && v < ex->n_values; v++)
		ex->dev->ops->free(self, &ex->own[v]);
	free(ex->nodes);
	free(ex->consts);
	free(ex->own);
	free(ex->vals);
	dk_wiring_fini(&ex->w);
	free(ex->in);
	free(ex->up.v);
	free(ex->down.v);
	free(ex->d2d.v);
	free(ex->temps.v);
	free(ex->htemps.v);
	free(ex->dynbufs.v);
	free(ex->work.v);
	free(ex->held.v);
	free(ex);
}

static int alloc_tables(dk_exec *ex)
{
	size_t nv = ex->n_values + 1, nn = ex->n_nodes + 1;

	ex->nodes = calloc(nn, sizeof(*ex->nodes));
	ex->consts = calloc(nv, sizeof(*ex->consts));
	ex->own = calloc(nv, sizeof(*ex->own));
	ex->vals = calloc(nv, sizeof(*ex->vals));
	ex->up.size = ex->down.size = sizeof(dk_xfer);
	ex->d2d.size = sizeof(dk_d2d);
	ex->temps.size = sizeof(dk_buf);
	ex->htemps.size = sizeof(void *);
	ex->dynbufs.size = sizeof(dk_dynbuf);
	ex->work.size = ex->dev->work_size ? ex->dev->work_size : 1;
	ex->held.size = ex->dev->held_size ? ex->dev->held_size : 1;
	return !ex->nodes || !ex->consts || !ex->own || !ex->vals ||
	       dk_wiring_init(&ex->w, ex->sg) ? -1 : 0;
}

static int load_node(dk_exec *ex, size_t k, size_t *max_in, char *err, size_t n)
{
	const Onnx__NodeProto *p = ex->sg->graph->node[k];
	dk_node *nd = &ex->nodes[k];
	const char *domain = p->domain ? p->domain : "";
	int rc;

	nd->proto = p;
	nd->opset = ep_subgraph_opset(ex->sg, domain);
	nd->op = ex->dev->ops->find_op(p->op_type, domain, nd->opset);
	if (!nd->op)
		return snprintf(err, n, "node '%s': %s (opset %lld) is not a %s op",
				p->name ? p->name : "", p->op_type, (long long)nd->opset,
				ex->dev->name), EP_E_UNSUPPORTED;
	nd->n_in = (int)p->n_input;
	nd->n_out = (int)p->n_output;
	rc = node_wire(&ex->w, p, (int)k, nd, err, n);
	if (!rc && nd->op->prepare)
		rc = nd->op->prepare(nd, err, n);
	if (!rc && ex->dev->ops->load_node)
		rc = ex->dev->ops->load_node(ex, nd, err, n);
	if (p->n_input > *max_in)
		*max_in = p->n_input;
	return rc;
}

/* The weights as values (metadata, host bytes), then on the device. */
static int load_weights(dk_exec *ex, char *err, size_t n)
{
	const ep_subgraph *sg = ex->sg;
	int rc;

	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];
		dk_val *c;

		if (w->value >= sg->n_values || w->rank > EP_MAX_RANK)
			return snprintf(err, n, "weight %zu names no value of the subgraph", i),
			       EP_E_INVALID;
		c = &ex->consts[w->value];
		c->dtype = w->dtype;
		c->rank = w->rank;
		memcpy(c->dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
		c->numel = dk_numel(w->rank, w->dims);
		c->nbytes = w->nbytes;
		c->host = w->data;
		c->is_const = 1;
		c->ready = 1;
	}
	rc = ex->dev->ops->load_weights(ex, err, n);
	for (size_t i = 0; i < sg->n_weights; i++)
		ex->consts[sg->weights[i].value].dev = ex->own[sg->weights[i].value];
	return rc;
}

/* "subgraph 7 loaded: 3 nodes: Conv Relu MaxPool; device memory ..."
 * (debug; tests read it). */
static void log_loaded(const dk_exec *ex)
{
	const ep_subgraph *sg = ex->sg;
	char ops[1024];
	size_t at = 0;

	ops[0] = 0;
	for (size_t k = 0; k < sg->graph->n_node && at < sizeof(ops); k++)
		at += (size_t)snprintf(ops + at, sizeof(ops) - at, " %s", sg->graph->node[k]->op_type);
	ipc_log(IPC_LOG_DEBUG, "subgraph %u loaded: %zu nodes:%s; device memory %llu bytes in use",
		sg->id, sg->graph->n_node, ops,
		(unsigned long long)ex->dev->mem_in_use(ex->dev->self));
}

int dk_exec_load(const dk_device *dev, ep_subgraph *sg, char *err, size_t n)
{
	dk_exec *ex = calloc(1, sizeof(*ex));
	size_t max_in = 1;
	int rc = 0;

	if (!ex)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	ex->dev = dev;
	ex->sg = sg;
	ex->n_values = sg->n_values;
	ex->n_nodes = sg->graph->n_node;
	if (alloc_tables(ex)) {
		snprintf(err, n, "out of memory");
		rc = EP_E_NOMEM;
	}
	for (size_t k = 0; k < ex->n_nodes && rc == 0; k++)
		rc = load_node(ex, k, &max_in, err, n);
	if (rc == 0)
		rc = load_weights(ex, err, n);
	if (rc == 0 && !(ex->in = calloc(max_in + 1, sizeof(*ex->in)))) {
		snprintf(err, n, "out of memory");
		rc = EP_E_NOMEM;
	}
	if (rc) {
		exec_free(ex);
		return rc;
	}
	sg->impl = ex;
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		log_loaded(ex);
	return 0;
}

void dk_exec_unload(ep_subgraph *sg)
{
	dk_exec *ex = sg->impl;

	if (!ex)
		return;
	/* Its memory goes back to the heap: nothing may still use it. */
	if (ex->dev->ops->unload)
		ex->dev->ops->unload(ex);
	exec_free(ex);
	sg->impl = NULL;
}

/* ---- capability query ---------------------------------------------------- */

const dk_op *dk_op_in(const dk_op *const *tables, size_t n, const char *op_type,
		      const char *domain, int64_t opset)
{
	if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0)
		return NULL;
	for (size_t t = 0; t < n; t++)
		for (const dk_op *op = tables[t]; op->op_type || op->names; op++) {
			const dk_opname one = {op->op_type, op->min_opset, op->max_opset};

			for (const dk_opname *m = op->names ? op->names : &one; m->op_type; m++) {
				if (strcmp(m->op_type, op_type) == 0 && opset >= m->min_opset &&
				    opset <= m->max_opset)
					return op;
				if (!op->names)
					break;
			}
		}
	return NULL;
}

int dk_unavailable(const dk_device *dev, char *err, size_t n)
{
	return snprintf(err, n, "no %s device (%s)", dev->name, dev->why), EP_E_UNSUPPORTED;
}

int dk_supported(const dk_device *dev, const Onnx__NodeProto *node, int64_t opset,
		 const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	const dk_op *op = dev->ok ? dev->ops->find_op(node->op_type, node->domain, opset) : NULL;

	if (!dev->ok)
		return dk_unavailable(dev, why, n), 0;
	if (!op)
		return snprintf(why, n, "%s (opset %lld) is not implemented for %s", node->op_type,
				(long long)opset, dev->name), 0;
	if (n_in < (int)node->n_input)
		return snprintf(why, n, "input dtypes unknown"), 0;
	return op->supports(node, opset, in_dtypes, n_in, why, n);
}
