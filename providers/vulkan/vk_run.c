/*
 * vk_run: one RUN of a loaded subgraph (see vk_exec.h): bind the step's
 * inputs, plan every node on the host, collect what goes back to shared
 * memory, then record, submit and wait (vk_record.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "vk_exec.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void reset_run(vk_exec *ex, ep_run *r)
{
	ex->run = r;
	ex->disp.n = ex->up.n = ex->down.n = 0;
	for (size_t v = 0; v < ex->n_values; v++) {
		ex->vals[v] = ex->consts[v];
		ex->bound[v] = -1;
	}
}

static void end_run(vk_exec *ex, int ok)
{
	vk_heap *h = &ex->ep->heap;

	for (size_t i = 0; i < ex->temps.n; i++)
		vk_heap_free(h, &((vk_buf *)ex->temps.v)[i]);
	for (size_t i = 0; i < ex->htemps.n; i++)
		free(((void **)ex->htemps.v)[i]);
	ex->temps.n = ex->htemps.n = 0;
	/* A kept buffer whose upload never ran must be made again. */
	for (size_t k = 0; k < ex->n_nodes; k++) {
		if (ex->nodes[k].keep_fresh && !ok)
			vk_heap_free(h, &ex->nodes[k].keep);
		ex->nodes[k].keep_fresh = 0;
	}
	ex->run = NULL;
}

/* A binding the step does not produce is one of its inputs: its shape and
 * host bytes come from shared memory; float32 ones are uploaded. */
static int bind_input(vk_exec *ex, const ep_tensor *b, char *err, size_t n)
{
	vk_val *x = &ex->vals[b->value];
	vk_buf *own = &ex->own[b->value];
	vk_xfer *up;

	if (b->dynamic)
		return snprintf(err, n, "input '%s' is bound without a shape",
				ex->sg->values[b->value].name), EP_E_INVALID;
	memset(x, 0, sizeof(*x));
	x->dtype = b->dtype;
	x->rank = b->rank;
	memcpy(x->dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
	x->numel = vk_numel(b->rank, b->dims);
	x->nbytes = b->nbytes;
	x->host = b->data;
	x->dev.block = -1;
	x->ready = 1;
	if (b->dtype != VK_FLOAT)
		return 0;
	if (own->block < 0 || own->size < b->nbytes) {
		vk_heap_free(&ex->ep->heap, own);
		if (vk_heap_alloc(&ex->ep->heap, b->nbytes, own, err, n))
			return EP_E_NOMEM;
	}
	x->dev = *own;
	if (!b->nbytes)
		return 0;
	up = vk_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	up->dev = *own;
	up->host = b->data;
	up->nbytes = b->nbytes;
	return 0;
}

static int bind_inputs(vk_exec *ex, ep_run *r, char *err, size_t n)
{
	for (size_t i = 0; i < r->n_bindings; i++) {
		const ep_tensor *b = &r->bindings[i];
		const ep_value *val = &ex->sg->values[b->value];
		int rc;

		if (val->dtype && b->dtype != val->dtype)
			return snprintf(err, n, "value '%s': bound as dtype %d, loaded as %d",
					val->name, b->dtype, val->dtype), EP_E_INVALID;
		ex->bound[b->value] = (int)i;
		if (ex->producer[b->value] >= 0 || ex->consts[b->value].ready)
			continue;
		rc = bind_input(ex, b, err, n);
		if (rc)
			return rc;
	}
	return 0;
}

static int plan_node(vk_exec *ex, size_t k, char *err, size_t n)
{
	vk_node *nd = &ex->nodes[k];
	vk_ctx c = {.ex = ex, .node = nd, .in = ex->in, .n_in = nd->n_in, .err = err, .errlen = n};
	int rc;

	for (int i = 0; i < nd->n_in; i++) {
		int v = nd->in[i];

		ex->in[i] = NULL;
		if (v < 0)
			continue;
		if (!ex->vals[v].ready)
			return vk_fail(&c, EP_E_INVALID, "input '%s' has no value",
				       ex->sg->values[v].name);
		ex->in[i] = &ex->vals[v];
	}
	if (!nd->n_in || !ex->in[0])
		return vk_fail(&c, EP_E_INVALID, "input 0 is missing");
	rc = nd->op->plan(&c);
	if (rc)
		return rc < 0 ? rc : EP_E_INTERNAL;
	for (int i = 0; i < nd->n_out; i++)
		if (nd->out[i] >= 0 && !ex->vals[nd->out[i]].ready)
			return vk_fail(&c, EP_E_INTERNAL, "output '%s' was not produced",
				       ex->sg->values[nd->out[i]].name);
	return 0;
}

/* One bound output of the step: where its bytes go after the run. */
static int collect_one(vk_exec *ex, int v, int *overflow, char *err, size_t n)
{
	ep_tensor *b = &ex->run->bindings[ex->bound[v]];
	const vk_val *x = &ex->vals[v];
	void *dst = b->data;
	vk_xfer *down;

	if (b->dynamic) {
		dst = ep_run_dyn_alloc(ex->run, x->nbytes);
		if (!dst) {
			*overflow = 1;
			return 0;
		}
		b->data = dst;
		b->nbytes = x->nbytes;
		b->rank = x->rank;
		memcpy(b->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
	} else if (b->nbytes != x->nbytes) {
		return snprintf(err, n, "output '%s': %llu bytes bound, %llu produced",
				ex->sg->values[v].name, (unsigned long long)b->nbytes,
				(unsigned long long)x->nbytes), EP_E_SHAPE;
	}
	if (!x->nbytes)
		return 0;
	down = vk_list_push(&ex->down);
	if (!down)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	down->dev = x->dev;
	down->host = dst;
	down->nbytes = x->nbytes;
	return 0;
}

/* 1 when value v leaves the step: a later step reads it or it is a graph
 * output (the core's LoadSubgraph.exported; every bound value when the
 * core does not say). */
static int leaves_step(const vk_exec *ex, int v)
{
	const Ortmk__LoadSubgraph *m = ex->sg->msg;

	if (!m || !m->has_exported_known || !m->exported_known)
		return 1;
	for (size_t i = 0; i < m->n_exported; i++)
		if (m->exported[i] == (uint32_t)v)
			return 1;
	return 0;
}

/* Every bound value the step produced that leaves it goes back, in
 * production order (the core may place a dead value and a later one at the
 * same offset); the others stay on the device. */
static int collect_downloads(vk_exec *ex, char *err, size_t n)
{
	int overflow = 0;

	for (size_t k = 0; k < ex->n_nodes; k++) {
		const vk_node *nd = &ex->nodes[k];

		for (int i = 0; i < nd->n_out; i++) {
			int v = nd->out[i], rc;

			if (v < 0 || ex->bound[v] < 0 || !leaves_step(ex, v))
				continue;
			rc = collect_one(ex, v, &overflow, err, n);
			if (rc)
				return rc;
		}
	}
	if (overflow)
		return snprintf(err, n, "dynamic outputs need %llu bytes, the region has %llu",
				(unsigned long long)ex->run->dyn_needed,
				(unsigned long long)ex->run->dyn_size), EP_E_DYN_OVERFLOW;
	return 0;
}

int vk_exec_run(vk_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	vk_exec *ex = sg->impl;
	double t0 = now_ms(), t1;
	int rc;

	(void)ep;
	reset_run(ex, r);
	rc = bind_inputs(ex, r, err, n);
	for (size_t k = 0; rc == 0 && k < ex->n_nodes; k++)
		rc = plan_node(ex, k, err, n);
	if (rc == 0)
		rc = collect_downloads(ex, err, n);
	t1 = now_ms();
	if (rc == 0)
		rc = vk_record_and_run(ex, err, n);
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ipc_log(IPC_LOG_DEBUG, "run of %zu nodes: %zu dispatches, %zu uploads, %zu downloads; "
			"plan %.3f ms, record+submit+wait %.3f ms", ex->n_nodes, ex->disp.n, ex->up.n,
			ex->down.n, t1 - t0, now_ms() - t1);
	end_run(ex, rc == 0);
	return rc;
}
