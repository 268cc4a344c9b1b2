/*
 * vk_run: one RUN of a loaded subgraph (see vk_exec.h): bind the step's
 * inputs, plan every node on the host, collect what goes back to shared
 * memory, then record, submit and wait (vk_record.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vk_exec.h"

static void reset_run(vk_exec *ex, ep_run *r)
{
	ex->run = r;
	ex->disp.n = ex->up.n = ex->down.n = ex->d2d.n = ex->dynbufs.n = 0;
	ex->wait_sem = VK_NULL_HANDLE;
	ex->wait_value = 0;
	r->uploads = r->downloads = 0;
	r->upload_bytes = r->download_bytes = 0;
	for (size_t v = 0; v < ex->n_values; v++)
		ex->vals[v] = ex->consts[v];
	ep_wiring_reset(&ex->w);
}

/* Buffers made for dynamic device outputs join the table when the run
 * succeeded, else they go (the core may repeat the run with the same ids). */
static int settle_dynbufs(vk_exec *ex, int ok, char *err, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < ex->dynbufs.n; i++) {
		vk_dynbuf *d = &((vk_dynbuf *)ex->dynbufs.v)[i];

		if (ok && rc == 0 && vk_dm_adopt(&ex->ep->dm, d->id, d->nbytes, &d->b, err, n) == 0)
			continue;
		if (ok && rc == 0)
			rc = EP_E_NOMEM;
		vk_heap_free(&ex->ep->heap, &d->b);
	}
	ex->dynbufs.n = 0;
	return rc;
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

/* An input in a device buffer that the ops read on the host (int64
 * shapes, axes, indices): fetched now, on the run's stream. */
static int fetch_input(vk_exec *ex, const ep_tensor *b, vk_val *x, char *err, size_t n)
{
	void *copy = malloc(b->nbytes ? b->nbytes : 1), **slot = ep_list_push(&ex->htemps);
	vk_copy_op op = {.src_buf = b->buffer_id, .src_off = b->buffer_offset, .nbytes = b->nbytes};
	vk_stream *s;
	int rc;

	if (!copy || !slot) {
		free(copy);
		if (slot)
			ex->htemps.n--;
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	*slot = copy;
	op.dst_host = copy;
	rc = vk_dm_copy(&ex->ep->dm, ex->run->stream, &op, 1, NULL, err, n);
	if (rc)
		return rc == -ENOMEM ? EP_E_NOMEM : EP_E_INVALID;
	s = vk_stream_get(&ex->ep->dm.streams, ex->run->stream, 0, err, n);
	vk_stream_sync(s);
	x->host = copy;
	ex->run->downloads++;
	ex->run->download_bytes += b->nbytes;
	return 0;
}

/* A binding the step does not produce is one of its inputs: its shape and
 * host bytes come from shared memory; float32 ones are uploaded.  One
 * bound to a device buffer is used in place (float32) or fetched to the
 * host (what the ops read there). */
static int bind_input(void *ctx, const ep_tensor *b, char *err, size_t n)
{
	vk_exec *ex = ctx;
	vk_val *x = &ex->vals[b->value];
	vk_buf *own = &ex->own[b->value];
	int wide = vk_f16_as_f32(&ex->ep->dev, b->dtype);
	uint64_t dev_bytes = wide ? 2 * b->nbytes : b->nbytes;
	vk_xfer *up;

	if (ex->consts[b->value].ready)
		return 0;
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
	if (b->buffer_id && vk_f16_as_f32(&ex->ep->dev, b->dtype))
		return snprintf(err, n, "input '%s': a float16 device buffer needs 16-bit storage",
				ex->sg->values[b->value].name), EP_E_UNSUPPORTED;
	if (b->buffer_id && vk_dev_dtype(b->dtype))
		return vk_dm_range(&ex->ep->dm, b->buffer_id, b->buffer_offset, b->nbytes, &x->dev,
				   err, n) ? EP_E_INVALID : 0;
	if (b->buffer_id)
		return fetch_input(ex, b, x, err, n);
	if (!vk_dev_dtype(b->dtype))
		return 0;
	if (own->block < 0 || own->size < dev_bytes) {
		vk_heap_free(&ex->ep->heap, own);
		if (vk_heap_alloc(&ex->ep->heap, dev_bytes, own, err, n))
			return EP_E_NOMEM;
	}
	x->dev = *own;
	if (!b->nbytes)
		return 0;
	up = ep_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	up->dev = *own;
	up->host = b->data;
	up->nbytes = b->nbytes;
	up->f16 = wide;
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
static int check_device_aliasing(vk_exec *ex, const ep_run *r, char *err, size_t n)
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

static int bind_inputs(vk_exec *ex, ep_run *r, char *err, size_t n)
{
	int rc = ep_bind_inputs(&ex->w, r, bind_input, ex, err, n);

	return rc ? rc : check_device_aliasing(ex, r, err, n);
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

int vk_run_device_output(vk_exec *ex, ep_tensor *b, int rank, const int64_t *dims,
			 uint64_t nbytes, vk_buf *out, char *err, size_t n)
{
	const char *name = ex->sg->values[b->value].name;
	vk_dynbuf *d;

	if (!b->dynamic) {
		if (b->nbytes != nbytes)
			return ep_bytes_mismatch(ex->sg, (int)b->value, b->nbytes, nbytes, err, n);
		return vk_dm_range(&ex->ep->dm, b->buffer_id, b->buffer_offset, nbytes, out, err, n) ?
		       EP_E_INVALID : 0;
	}
	for (size_t i = 0; i < ex->dynbufs.n; i++) {
		d = &((vk_dynbuf *)ex->dynbufs.v)[i];
		if (d->id == b->buffer_id) {
			*out = d->b;
			return 0;
		}
	}
	if (vk_dm_find(&ex->ep->dm, b->buffer_id))
		return snprintf(err, n, "output '%s': device buffer %llu already exists", name,
				(unsigned long long)b->buffer_id), EP_E_INVALID;
	d = ep_list_push(&ex->dynbufs);
	if (!d)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	if (vk_heap_alloc(&ex->ep->heap, nbytes, &d->b, err, n)) {
		ex->dynbufs.n--;
		return EP_E_NOMEM;
	}
	d->id = b->buffer_id;
	d->nbytes = nbytes;
	b->rank = rank;
	memcpy(b->dims, dims, sizeof(int64_t) * (size_t)rank);
	b->nbytes = nbytes;
	b->buffer_offset = 0;
	*out = d->b;
	return 0;
}

/* A bound output in a device buffer: written in place by its node, else
 * (a view of another value) copied there after the dispatches. */
static int collect_device(vk_exec *ex, ep_tensor *b, const vk_val *x, char *err, size_t n)
{
	vk_buf dst;
	int rc = vk_run_device_output(ex, b, x->rank, x->dims, x->nbytes, &dst, err, n);
	vk_d2d *c;
	vk_xfer *up;

	if (rc || !x->nbytes || (x->dev.block >= 0 && x->dev.buf == dst.buf && x->dev.off == dst.off))
		return rc;
	if (x->dev.block >= 0) {
		c = ep_list_push(&ex->d2d);
		if (!c)
			return snprintf(err, n, "out of memory"), EP_E_NOMEM;
		c->src = x->dev;
		c->dst = dst;
		c->nbytes = x->nbytes;
		return 0;
	}
	/* A view of host-only bytes (an int64 weight, say). */
	up = ep_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	up->dev = dst;
	up->host = (void *)x->host;   /* read only: an upload */
	up->nbytes = x->nbytes;
	ex->run->uploads++;
	ex->run->upload_bytes += x->nbytes;
	return 0;
}

/* One bound output of the step: where its bytes go after the run. */
static int collect_one(void *ctx, int v, int *overflow, char *err, size_t n)
{
	vk_exec *ex = ctx;
	ep_tensor *b = &ex->run->bindings[ex->w.bound[v]];
	const vk_val *x = &ex->vals[v];
	void *dst = b->data;
	vk_xfer *down;

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
		return ep_bytes_mismatch(ex->sg, v, b->nbytes, x->nbytes, err, n);
	}
	if (!x->nbytes)
		return 0;
	down = ep_list_push(&ex->down);
	if (!down)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	down->dev = x->dev;
	down->host = dst;
	down->nbytes = x->nbytes;
	down->f16 = vk_f16_as_f32(&ex->ep->dev, x->dtype);
	ex->run->downloads++;
	ex->run->download_bytes += x->nbytes;
	return 0;
}

int vk_exec_run(vk_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	vk_exec *ex = sg->impl;
	double t0 = sys_now_ms(), t1;
	int rc;

	vk_stream *s = vk_stream_get(&ep->dm.streams, r->stream, 0, err, n);

	reset_run(ex, r);
	/* After the stream's earlier work: its downloads to host memory are
	 * done now, its device work is waited for by the submission. */
	if (s)
		vk_stream_order(s, &ex->wait_sem, &ex->wait_value);
	vk_dm_collect(&ep->dm);
	rc = bind_inputs(ex, r, err, n);
	for (size_t k = 0; rc == 0 && k < ex->n_nodes; k++)
		rc = plan_node(ex, k, err, n);
	if (rc == 0)
		rc = ep_collect_outputs(&ex->w, r, 0, collect_one, ex, err, n);
	t1 = sys_now_ms();
	if (rc == 0)
		rc = vk_record_and_run(ex, err, n);
	if (settle_dynbufs(ex, rc == 0, err, n) && rc == 0)
		rc = EP_E_NOMEM;
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ipc_log(IPC_LOG_DEBUG, "run of %zu nodes: %zu dispatches, %zu uploads, %zu downloads, "
			"%zu device copies; plan %.3f ms, record+submit+wait %.3f ms", ex->n_nodes,
			ex->disp.n, ex->up.n, ex->down.n, ex->d2d.n, t1 - t0, sys_now_ms() - t1);
	end_run(ex, rc == 0);
	return rc;
}
