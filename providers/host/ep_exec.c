/*
 * ep_exec: the device-independent half of the vulkan and cuda executors
 * (see ep_exec.h): lists, node wiring, weight/binding/shape checks, which
 * outputs of a RUN go back, and the capability-query preamble.
 */
#include "ep_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_shape.h"
#include "log.h"

void *ep_list_push(ep_list *l)
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

/* ---- load --------------------------------------------------------------- */

static int value_index(const ep_subgraph *sg, const char *name)
{
	for (size_t i = 0; i < sg->n_values; i++)
		if (strcmp(sg->values[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int map_names(const ep_subgraph *sg, char **names, size_t cnt, int **out,
		     char *err, size_t n)
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

int ep_wiring_init(ep_wiring *w, const ep_subgraph *sg)
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

void ep_wiring_fini(ep_wiring *w)
{
	free(w->producer);
	free(w->order);
	free(w->bound);
	memset(w, 0, sizeof(*w));
}

void ep_wiring_reset(ep_wiring *w)
{
	for (size_t v = 0; v < w->sg->n_values; v++)
		w->bound[v] = -1;
}

int ep_node_wire(ep_wiring *w, const Onnx__NodeProto *p, int k, int **in, int **out, char *err,
		 size_t n)
{
	int rc = map_names(w->sg, p->input, p->n_input, in, err, n);

	if (!rc)
		rc = map_names(w->sg, p->output, p->n_output, out, err, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < p->n_output; i++) {
		int v = (*out)[i];

		if (v < 0)
			continue;
		if (w->producer[v] < 0)
			w->order[w->n_order++] = v;
		w->producer[v] = k;
	}
	return 0;
}

int ep_weights_check(const ep_subgraph *sg, char *err, size_t n)
{
	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];

		if (w->value >= sg->n_values || w->rank > EP_MAX_RANK)
			return snprintf(err, n, "weight %zu names no value of the subgraph", i),
			       EP_E_INVALID;
	}
	return 0;
}

void ep_log_loaded(const ep_subgraph *sg, uint64_t dev_bytes)
{
	char ops[1024];
	size_t at = 0;

	ops[0] = 0;
	for (size_t k = 0; k < sg->graph->n_node && at < sizeof(ops); k++)
		at += (size_t)snprintf(ops + at, sizeof(ops) - at, " %s", sg->graph->node[k]->op_type);
	ipc_log(IPC_LOG_DEBUG, "subgraph %u loaded: %zu nodes:%s; device memory %llu bytes in use",
		sg->id, sg->graph->n_node, ops, (unsigned long long)dev_bytes);
}

int ep_node_vfail(char *err, size_t n, const Onnx__NodeProto *p, int code, const char *fmt,
		  va_list ap)
{
	int at = snprintf(err, n, "node '%s' (%s): ", p->name ? p->name : "", p->op_type);

	if (at < 0 || (size_t)at >= n)
		return code;
	vsnprintf(err + at, n - (size_t)at, fmt, ap);
	return code;
}

/* ---- run ---------------------------------------------------------------- */

int ep_bind_inputs(ep_wiring *w, const ep_run *r, ep_bind_fn bind, void *ctx, char *err,
		   size_t n)
{
	const ep_subgraph *sg = w->sg;

	for (size_t i = 0; i < r->n_bindings; i++) {
		const ep_tensor *b = &r->bindings[i];
		const ep_value *val = &sg->values[b->value];
		int rc;

		if (val->dtype && b->dtype != val->dtype)
			return snprintf(err, n, "value '%s': bound as dtype %d, loaded as %d",
					val->name, b->dtype, val->dtype), EP_E_INVALID;
		w->bound[b->value] = (int)i;
		if (w->producer[b->value] >= 0)
			continue;
		rc = bind(ctx, b, err, n);
		if (rc)
			return rc;
	}
	return 0;
}

int ep_check_planned(const ep_wiring *w, const ep_run *r, int v, int32_t dtype, int rank,
		     const int64_t *dims, char *err, size_t n)
{
	const ep_subgraph *sg = w->sg;
	const ep_tensor *b;
	char s1[128], s2[128];

	if (w->bound[v] < 0)
		return 0;
	b = &r->bindings[w->bound[v]];
	if (dtype && b->dtype && b->dtype != dtype)
		return snprintf(err, n, "output '%s' is dtype %d but the core planned %d",
				sg->values[v].name, dtype, b->dtype), EP_E_SHAPE;
	if (b->dynamic)
		return 0;
	if (b->rank != rank || memcmp(b->dims, dims, sizeof(int64_t) * (size_t)rank))
		return snprintf(err, n, "output '%s' is %s but the core planned %s",
				sg->values[v].name, ep_shape_str(rank, dims, s1, sizeof(s1)),
				ep_shape_str(b->rank, b->dims, s2, sizeof(s2))), EP_E_SHAPE;
	return 0;
}

int ep_bytes_mismatch(const ep_subgraph *sg, int v, uint64_t bound, uint64_t produced, char *err,
		      size_t n)
{
	snprintf(err, n, "output '%s': %llu bytes bound, %llu produced", sg->values[v].name,
		 (unsigned long long)bound, (unsigned long long)produced);
	return EP_E_SHAPE;
}

/* 1 when value v leaves the step: a later step reads it or it is a graph
 * output (the core's LoadSubgraph.exported; every bound value when the
 * core does not say). */
static int leaves_step(const ep_subgraph *sg, int v)
{
	const Ortmk__LoadSubgraph *m = sg->msg;

	if (!m || !m->has_exported_known || !m->exported_known)
		return 1;
	for (size_t i = 0; i < m->n_exported; i++)
		if (m->exported[i] == (uint32_t)v)
			return 1;
	return 0;
}

int ep_collect_outputs(const ep_wiring *w, const ep_run *r, int all_dynamic,
		       ep_collect_fn collect, void *ctx, char *err, size_t n)
{
	int overflow = 0;

	for (size_t i = 0; i < w->n_order; i++) {
		int v = w->order[i], rc;
		const ep_tensor *b;

		if (w->bound[v] < 0)
			continue;
		b = &r->bindings[w->bound[v]];
		/* A device-bound output is always finished; a host one
		 * only goes back when a later step reads it. */
		if (!b->buffer_id && !(all_dynamic && b->dynamic) && !leaves_step(w->sg, v))
			continue;
		rc = collect(ctx, v, &overflow, err, n);
		if (rc)
			return rc;
	}
	if (overflow)
		return snprintf(err, n, "dynamic outputs need %llu bytes, the region has %llu",
				(unsigned long long)r->dyn_needed,
				(unsigned long long)r->dyn_size), EP_E_DYN_OVERFLOW;
	return 0;
}

/* ---- capability query ---------------------------------------------------- */

int ep_supported_pre(const char *dev, int ok, const char *dev_why, int found,
		     const Onnx__NodeProto *node, int64_t opset, int n_in, char *why, size_t n)
{
	if (!ok)
		return snprintf(why, n, "no %s device (%s)", dev, dev_why), 0;
	if (!found)
		return snprintf(why, n, "%s (opset %lld) is not implemented for %s", node->op_type,
				(long long)opset, dev), 0;
	if (n_in < (int)node->n_input)
		return snprintf(why, n, "input dtypes unknown"), 0;
	return 1;
}
