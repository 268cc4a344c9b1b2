/*
 * dk_run: one RUN of a loaded subgraph on a device provider (see
 * dk_exec.h): bind the step's inputs, run every node's op, collect what
 * goes back, submit and wait, settle the dynamic device outputs' buffers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_exec.h"
#include "dk_shape.h"
#include "log.h"

static void reset_run(dk_exec *ex, ep_run *r)
{
	ex->run = r;
	ex->up.n = ex->down.n = ex->d2d.n = ex->dynbufs.n = ex->work.n = ex->held.n = 0;
	ex->up_flushed = 0;
	ex->stream = ex->wait = NULL;
	ex->wait_value = 0;
	r->uploads = r->downloads = 0;
	r->upload_bytes = r->download_bytes = 0;
	for (size_t v = 0; v < ex->n_values; v++)
		ex->vals[v] = ex->consts[v];
	dk_wiring_reset(&ex->w);
}

/* After the submission completed (or failed): the run's scratch goes. */
static void end_run(dk_exec *ex, int ok)
{
	const dk_dev_ops *ops = ex->dev->ops;
	void *self = ex->dev->self;

	if (ops->end)
		ops->end(ex, ok);
	for (size_t i = 0; i < ex->temps.n; i++)
		ops->free(self, DK_AT(&ex->temps, dk_buf, i));
	for (size_t i = 0; i < ex->htemps.n; i++)
		free(*DK_AT(&ex->htemps, void *, i));
	ex->temps.n = ex->htemps.n = 0;
	/* A kept buffer whose upload may not have happened is made again. */
	for (size_t k = 0; k < ex->n_nodes; k++) {
		if (ex->nodes[k].keep_fresh && !ok)
			ops->free(self, &ex->nodes[k].keep);
		ex->nodes[k].keep_fresh = 0;
	}
	ex->run = NULL;
}

/* Buffers made for dynamic device outputs join the provider's table when
 * the run succeeded, else they go (the core may repeat the run with the
 * same ids). */
static int settle_dynbufs(dk_exec *ex, int ok, char *err, size_t n)
{
	const dk_dev_ops *ops = ex->dev->ops;
	int rc = 0;

	for (size_t i = 0; i < ex->dynbufs.n; i++) {
		dk_dynbuf *d = DK_AT(&ex->dynbufs, dk_dynbuf, i);

		if (ok && rc == 0 && ops->adopt(ex->dev->self, d->id, d->nbytes, &d->b, err, n) == 0)
			continue;
		if (ok && rc == 0)
			rc = EP_E_NOMEM;
		ops->free(ex->dev->self, &d->b);
	}
	ex->dynbufs.n = 0;
	return rc;
}

/* A binding in a device buffer: float tensors are used in place, the
 * others (what the ops read on the host) fetched now. */
static int bind_device(dk_exec *ex, const ep_tensor *b, dk_val *x, char *err, size_t n)
{
	const char *name = ex->sg->values[b->value].name;
	void *copy, **slot;
	int rc;

	if (ex->dev->f16_as_f32 && b->dtype == DK_FLOAT16)
		return snprintf(err, n, "input '%s': a float16 device buffer needs 16-bit storage",
				name), EP_E_UNSUPPORTED;
	if (dk_dev_dtype(b->dtype))
		return ex->dev->ops->range(ex->dev->self, b->buffer_id, b->buffer_offset, b->nbytes,
					   &x->dev, err, n);
	copy = malloc(b->nbytes ? b->nbytes : 1);
	slot = dk_list_push(&ex->htemps);
	if (!copy || !slot) {
		free(copy);
		if (slot)
			ex->htemps.n--;
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	*slot = copy;
	rc = ex->dev->ops->fetch(ex, b, copy, err, n);
	if (rc)
		return rc;
	x->host = copy;
	ex->run->downloads++;
	ex->run->download_bytes += b->nbytes;
	return 0;
}

/* A binding the step does not produce is one of its inputs: its shape and
 * host bytes come from shared memory; float ones are uploaded into the
 * value's own device memory. */
static int bind_input(dk_exec *ex, const ep_tensor *b, char *err, size_t n)
{
	dk_val *x = &ex->vals[b->value];
	dk_buf *own = &ex->own[b->value];
	int wide = ex->dev->f16_as_f32 && b->dtype == DK_FLOAT16;
	uint64_t dev_bytes = wide ? 2 * b->nbytes : b->nbytes;
	dk_xfer *up;

	if (ex->consts[b->value].ready)
		return 0;
	if (b->dynamic)
		return snprintf(err, n, "input '%s' is bound without a shape",
				ex->sg->values[b->value].name), EP_E_INVALID;
	memset(x, 0, sizeof(*x));
	x->dtype = b->dtype;
	x->rank = b->rank;
	memcpy(x->dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
	x->numel = dk_numel(b->rank, b->dims);
	x->nbytes = b->nbytes;
	x->host = b->data;
	x->ready = 1;
	if (b->buffer_id)
		return bind_device(ex, b, x, err, n);
	if (!dk_dev_dtype(b->dtype))
		return 0;
	if (!own->ptr || own->size < dev_bytes) {
		ex->dev->ops->free(ex->dev->self, own);
		if (ex->dev->ops->alloc(ex->dev->self, dev_bytes, own, err, n))
			return EP_E_NOMEM;
	}
	x->dev = *own;
	if (!b->nbytes)
		return 0;
	up = dk_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*up = (dk_xfer){.dev = *own, .host = b->data, .nbytes = b->nbytes, .f16 = wide};
	ex->run->uploads++;
	ex->run->upload_bytes += b->nbytes;
	return 0;
}

static int ranges_overlap(const ep_tensor *a, const ep_tensor *b)
{
	return a->buffer_id == b->buffer_id && a->buffer_offset < b->buffer_offset + b->nbytes &&
	       b->buffer_offset < a->buffer_offset + a->nbytes;
}

/* Outputs are written in place: one whose device memory is also an input
 * of the run would be overwritten while it is read. */
static int check_device_aliasing(const dk_exec *ex, const ep_run *r, char *err, size_t n)
{
	for (size_t i = 0; i < r->n_bindings; i++) {
		const ep_tensor *o = &r->bindings[i];

		if (!o->buffer_id || o->dynamic || ex->w.producer[o->value] < 0)
			continue;
		for (size_t k = 0; k < r->n_bindings; k++) {
			const ep_tensor *in = &r->bindings[k];

			if (k != i && in->buffer_id && ex->w.producer[in->value] < 0 &&
			    ranges_overlap(o, in))
				return snprintf(err, n, "output '%s' is bound to the device memory of input '%s'",
						ex->sg->values[o->value].name,
						ex->sg->values[in->value].name), EP_E_INVALID;
		}
	}
	return 0;
}

/* Checks each binding's dtype against the loaded value's, notes which
 * binding each value has, and binds those the step does not produce. */
static int bind_inputs(dk_exec *ex, ep_run *r, char *err, size_t n)
{
	const ep_subgraph *sg = ex->sg;

	for (size_t i = 0; i < r->n_bindings; i++) {
		const ep_tensor *b = &r->bindings[i];
		const ep_value *val = &sg->values[b->value];
		int rc;

		if (val->dtype && b->dtype != val->dtype)
			return snprintf(err, n, "value '%s': bound as dtype %d, loaded as %d",
					val->name, b->dtype, val->dtype), EP_E_INVALID;
		ex->w.bound[b->value] = (int)i;
		if (ex->w.producer[b->value] >= 0)
			continue;
		rc = bind_input(ex, b, err, n);
		if (rc)
			return rc;
	}
	return check_device_aliasing(ex, r, err, n);
}

static int run_node(dk_exec *ex, size_t k, char *err, size_t n)
{
	dk_node *nd = &ex->nodes[k];
	dk_ctx c = {.ex = ex, .node = nd, .in = ex->in, .n_in = nd->n_in, .stream = ex->stream,
		    .err = err, .errlen = n};
	int rc;

	for (int i = 0; i < nd->n_in; i++) {
		int v = nd->in[i];

		ex->in[i] = NULL;
		if (v < 0)
			continue;
		if (!ex->vals[v].ready)
			return dk_fail(&c, EP_E_INVALID, "input '%s' has no value",
				       ex->sg->values[v].name);
		ex->in[i] = &ex->vals[v];
	}
	if (!nd->n_in || !ex->in[0])
		return dk_fail(&c, EP_E_INVALID, "input 0 is missing");
	rc = nd->op->run(&c);
	if (rc)
		return rc < 0 ? rc : EP_E_INTERNAL;
	for (int i = 0; i < nd->n_out; i++)
		if (nd->out[i] >= 0 && !ex->vals[nd->out[i]].ready)
			return dk_fail(&c, EP_E_INTERNAL, "output '%s' was not produced",
				       ex->sg->values[nd->out[i]].name);
	return 0;
}

static int run_nodes(dk_exec *ex, char *err, size_t n)
{
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < ex->n_nodes; k++) {
		/* Nodes are recorded here and run at submit: a cancel is
		 * noticed before the work is handed to the device. */
		if (ep_run_cancelled(ex->run->cancel, ex->run->cancel_token))
			return snprintf(err, n, "run cancelled before node %zu of %zu", k, ex->n_nodes),
			       EP_E_CANCELLED;
		if (ex->dev->ops->flush && ex->up_flushed < ex->up.n)
			rc = ex->dev->ops->flush(ex, err, n);
		if (rc == 0)
			rc = run_node(ex, k, err, n);
	}
	return rc;
}

/* ---- what goes back ------------------------------------------------------ */

/* A bound output in a device buffer: written in place by its node, else
 * (a view of another value) copied there after the run's work. */
static int collect_device(dk_exec *ex, ep_tensor *b, const dk_val *x, char *err, size_t n)
{
	dk_buf dst;
	int rc = dk_device_output(ex, b, x->rank, x->dims, x->nbytes, &dst, err, n);
	dk_d2d *c;
	dk_xfer *up;

	if (rc || !x->nbytes || (x->dev.ptr && dk_buf_same(&x->dev, &dst)))
		return rc;
	if (x->dev.ptr) {
		c = dk_list_push(&ex->d2d);
		if (!c)
			return snprintf(err, n, "out of memory"), EP_E_NOMEM;
		*c = (dk_d2d){.src = x->dev, .dst = dst, .nbytes = x->nbytes};
		return 0;
	}
	/* A view of host-only bytes (an int64 weight, say): read only. */
	up = dk_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*up = (dk_xfer){.dev = dst, .host = (void *)x->host, .nbytes = x->nbytes};
	ex->run->uploads++;
	ex->run->upload_bytes += x->nbytes;
	return 0;
}

/* One bound output of the step: where its bytes go after the run. */
static int collect_one(dk_exec *ex, int v, int *overflow, char *err, size_t n)
{
	ep_tensor *b = &ex->run->bindings[ex->w.bound[v]];
	const dk_val *x = &ex->vals[v];
	void *dst = b->data;
	dk_xfer *down;

	if (b->buffer_id)
		return collect_device(ex, b, x, err, n);
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
	down = dk_list_push(&ex->down);
	if (!down)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*down = (dk_xfer){.dev = x->dev, .host = dst, .nbytes = x->nbytes,
			  .f16 = ex->dev->f16_as_f32 && x->dtype == DK_FLOAT16};
	ex->run->downloads++;
	ex->run->download_bytes += x->nbytes;
	return 0;
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

/*
 * Every bound value the step produced that goes back after the RUN, in
 * production order (the core may place a dead value and a later one at the
 * same offset): device-bound and dynamic ones always, host ones only when
 * they leave the step.  A dynamic region too small is reported
 * (EP_E_DYN_OVERFLOW) once all were tried, with what they need.
 */
static int collect(dk_exec *ex, char *err, size_t n)
{
	const ep_run *r = ex->run;
	int overflow = 0;

	for (size_t i = 0; i < ex->w.n_order; i++) {
		int v = ex->w.order[i], rc;
		const ep_tensor *b;

		if (ex->w.bound[v] < 0)
			continue;
		b = &r->bindings[ex->w.bound[v]];
		if (!b->buffer_id && !b->dynamic && !leaves_step(ex->sg, v))
			continue;
		rc = collect_one(ex, v, &overflow, err, n);
		if (rc)
			return rc;
	}
	if (overflow)
		return snprintf(err, n, "dynamic outputs need %llu bytes, the region has %llu",
				(unsigned long long)r->dyn_needed,
				(unsigned long long)r->dyn_size), EP_E_DYN_OVERFLOW;
	return 0;
}

int dk_exec_run(ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	dk_exec *ex = sg->impl;
	double t0 = sys_now_ms(), t1;
	int rc;

	reset_run(ex, r);
	rc = ex->dev->ops->begin(ex, err, n);
	if (rc == 0)
		rc = bind_inputs(ex, r, err, n);
	if (rc == 0)
		rc = run_nodes(ex, err, n);
	if (rc == 0)
		rc = collect(ex, err, n);
	t1 = sys_now_ms();
	/* Whatever was queued finishes before its memory is reused. */
	if (rc == 0) {
		rc = ex->dev->ops->submit(ex, 1, err, n);
	} else {
		char why[512];

		ex->dev->ops->submit(ex, 0, why, sizeof(why));
	}
	if (settle_dynbufs(ex, rc == 0, err, n) && rc == 0)
		rc = EP_E_NOMEM;
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ipc_log(IPC_LOG_DEBUG, "run of %zu nodes: %zu dispatches, %zu uploads, %zu downloads, "
			"%zu device copies; plan %.3f ms, record+submit+wait %.3f ms", ex->n_nodes,
			ex->work.n, ex->up.n, ex->down.n, ex->d2d.n, t1 - t0, sys_now_ms() - t1);
	end_run(ex, rc == 0);
	return rc;
}
