/*
 * cuda_run: one RUN of a loaded subgraph (see cuda_exec.h): bind the
 * step's inputs and upload them, let every node enqueue its work on the
 * run's stream, enqueue the copies of what the step produced, synchronise
 * the stream once and move the staged downloads to shared memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_buf.h"
#include "log.h"

#define STAGE_ALIGN 64

static void reset_run(cu_exec *ex, ep_run *r)
{
	ex->run = r;
	ex->stream = NULL;
	ex->up.n = ex->down.n = ex->d2d.n = 0;
	for (size_t v = 0; v < ex->n_values; v++)
		ex->vals[v] = ex->consts[v];
	ep_wiring_reset(&ex->w);
}

/* After the stream synchronised (or failed): scratch memory and staging
 * go back to their pools. */
static void end_run(cu_exec *ex, int ok)
{
	cuda_ep *ep = ex->ep;

	for (size_t i = 0; i < ex->temps.n; i++)
		cuda_heap_free(&ep->heap, &((cuda_block *)ex->temps.v)[i]);
	for (size_t i = 0; i < ex->stage.n; i++)
		cuda_pinned_put(&ep->pinned, ((cuda_pinned_buf **)ex->stage.v)[i]);
	for (size_t i = 0; i < ex->htemps.n; i++)
		free(((void **)ex->htemps.v)[i]);
	/* The buffers dynamic device outputs got are the caller's only when
	 * the run succeeded (the core may repeat it with the same ids). */
	for (size_t i = 0; !ok && i < ex->made.n; i++)
		cuda_buf_free(ep, ((uint64_t *)ex->made.v)[i]);
	ex->temps.n = ex->stage.n = ex->htemps.n = ex->made.n = 0;
	/* A kept buffer whose upload may not have happened is made again. */
	for (size_t k = 0; k < ex->n_nodes; k++) {
		if (ex->nodes[k].keep_fresh && !ok)
			cuda_heap_free(&ep->heap, &ex->nodes[k].keep);
		ex->nodes[k].keep_fresh = 0;
	}
	ex->run = NULL;
}

/* The device address of a binding to a device buffer, range checked. */
static void *buffer_at(cu_exec *ex, const ep_tensor *b, uint64_t nbytes, char *err, size_t n)
{
	cuda_dbuf *d = cuda_buf_find(ex->ep, b->buffer_id);

	if (!d || b->buffer_offset > d->nbytes || nbytes > d->nbytes - b->buffer_offset) {
		snprintf(err, n, "value '%s': device buffer %llu [%llu, +%llu) is not allocated",
			 ex->sg->values[b->value].name, (unsigned long long)b->buffer_id,
			 (unsigned long long)b->buffer_offset, (unsigned long long)nbytes);
		return NULL;
	}
	return (char *)d->blk.ptr + b->buffer_offset;
}

/* An int tensor in a device buffer, read to the host (ops read shapes,
 * axes and indices there). */
static int int_to_host(cu_exec *ex, cu_val *x, const void *dev, char *err, size_t n)
{
	void **slot = ep_list_push(&ex->htemps), *h = malloc(x->nbytes ? x->nbytes : 1);
	cudaError_t e;

	if (!slot || !h) {
		free(h);
		if (slot)
			ex->htemps.n--;
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	*slot = h;
	e = cudaMemcpyAsync(h, dev, x->nbytes, cudaMemcpyDeviceToHost, ex->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(ex->stream);
	if (e != cudaSuccess)
		return cuda_err(e, "reading an int tensor", err, n), EP_E_INTERNAL;
	x->host = h;
	return 0;
}

/* A binding the step does not produce is one of its inputs. */
static int bind_input(void *ctx, const ep_tensor *b, char *err, size_t n)
{
	cu_exec *ex = ctx;
	cu_val *x = &ex->vals[b->value];
	cuda_block *own = &ex->own[b->value];
	cu_xfer *up;

	if (ex->consts[b->value].ready)
		return 0;
	if (b->dynamic)
		return snprintf(err, n, "input '%s' is bound without a shape",
				ex->sg->values[b->value].name), EP_E_INVALID;
	memset(x, 0, sizeof(*x));
	x->dtype = b->dtype;
	x->rank = b->rank;
	memcpy(x->dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
	x->numel = ep_numel(b->rank, b->dims);
	x->nbytes = b->nbytes;
	x->host = b->data;
	x->ready = 1;
	if (b->buffer_id) {
		void *p = buffer_at(ex, b, b->nbytes, err, n);

		if (!p)
			return EP_E_INVALID;
		if (cu_is_float(b->dtype))
			return x->dev = p, 0;
		return int_to_host(ex, x, p, err, n);
	}
	if (!cu_is_float(b->dtype))
		return 0;
	if (!own->ptr || own->size < b->nbytes) {
		cuda_heap_free(&ex->ep->heap, own);
		if (cuda_heap_alloc(&ex->ep->heap, b->nbytes, own, err, n))
			return EP_E_NOMEM;
	}
	x->dev = own->ptr;
	if (!b->nbytes)
		return 0;
	up = ep_list_push(&ex->up);
	if (!up)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*up = (cu_xfer){.dev = own->ptr, .host = b->data, .nbytes = b->nbytes};
	return 0;
}

/* Stages the transfers of `l` in one pinned buffer (kept until the end of
 * the run); uploads are copied in now. */
static int stage(cu_exec *ex, ep_list *l, int upload, char *err, size_t n)
{
	cu_xfer *x = l->v;
	uint64_t total = 0;
	cuda_pinned_buf **slot;

	if (!l->n)
		return 0;
	for (size_t i = 0; i < l->n; i++) {
		x[i].stage_off = total;
		total += (x[i].nbytes + STAGE_ALIGN - 1) & ~(uint64_t)(STAGE_ALIGN - 1);
	}
	slot = ep_list_push(&ex->stage);
	if (!slot)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*slot = cuda_stage_get(ex->ep, total, err, n);
	if (!*slot) {
		ex->stage.n--;
		return EP_E_NOMEM;
	}
	for (size_t i = 0; i < l->n; i++) {
		char *s = (char *)(*slot)->ptr + x[i].stage_off;
		cudaError_t e;

		if (upload)
			memcpy(s, x[i].host, x[i].nbytes);
		e = upload ? cudaMemcpyAsync(x[i].dev, s, x[i].nbytes, cudaMemcpyHostToDevice, ex->stream)
			   : cudaMemcpyAsync(s, x[i].dev, x[i].nbytes, cudaMemcpyDeviceToHost, ex->stream);
		if (e != cudaSuccess)
			return cuda_err(e, upload ? "upload" : "download", err, n), EP_E_INTERNAL;
		/* From here on `host` of a download is where its staged bytes
		 * go after the synchronisation. */
		if (!upload)
			x[i].dev = s;
	}
	return 0;
}

static int run_node(cu_exec *ex, size_t k, char *err, size_t n)
{
	cu_node *nd = &ex->nodes[k];
	cu_ctx c = {.ex = ex, .node = nd, .in = ex->in, .n_in = nd->n_in, .stream = ex->stream,
		    .err = err, .errlen = n};
	int rc;

	for (int i = 0; i < nd->n_in; i++) {
		int v = nd->in[i];

		ex->in[i] = NULL;
		if (v < 0)
			continue;
		if (!ex->vals[v].ready)
			return cu_fail(&c, EP_E_INVALID, "input '%s' has no value",
				       ex->sg->values[v].name);
		ex->in[i] = &ex->vals[v];
	}
	if (!nd->n_in || !ex->in[0])
		return cu_fail(&c, EP_E_INVALID, "input 0 is missing");
	rc = nd->op->run(&c);
	if (rc)
		return rc < 0 ? rc : EP_E_INTERNAL;
	for (int i = 0; i < nd->n_out; i++)
		if (nd->out[i] >= 0 && !ex->vals[nd->out[i]].ready)
			return cu_fail(&c, EP_E_INTERNAL, "output '%s' was not produced",
				       ex->sg->values[nd->out[i]].name);
	return 0;
}

/* One bound output of the step: where its bytes go. */
static int collect_one(void *ctx, int v, int *overflow, char *err, size_t n)
{
	cu_exec *ex = ctx;
	ep_tensor *b = &ex->run->bindings[ex->w.bound[v]];
	const cu_val *x = &ex->vals[v];
	void *dst = b->data;
	cu_xfer *t;

	if (b->dynamic) {
		b->rank = x->rank;
		memcpy(b->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
		b->nbytes = x->nbytes;
		if (b->buffer_id) {
			uint64_t *made = ep_list_push(&ex->made);

			b->buffer_offset = 0;
			if (!made)
				return snprintf(err, n, "out of memory"), EP_E_NOMEM;
			*made = b->buffer_id;
			if (cuda_buf_make(ex->ep, b->buffer_id, x->nbytes, err, n))
				return EP_E_NOMEM;
		} else if (!(dst = ep_run_dyn_alloc(ex->run, x->nbytes))) {
			*overflow = 1;
			return 0;
		}
		b->data = b->buffer_id ? NULL : dst;
	} else if (b->nbytes != x->nbytes) {
		return ep_bytes_mismatch(ex->sg, v, b->nbytes, x->nbytes, err, n);
	}
	if (b->buffer_id && !(dst = buffer_at(ex, b, x->nbytes, err, n)))
		return EP_E_INVALID;
	if (!x->nbytes)
		return 0;
	t = ep_list_push(b->buffer_id ? &ex->d2d : &ex->down);
	if (!t)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*t = (cu_xfer){.dev = x->dev, .host = dst, .nbytes = x->nbytes};
	return 0;
}

/* Every bound value the step produced that leaves it (ep_collect_outputs;
 * device-bound and dynamic outputs always), then the enqueued device
 * copies and downloads.  The others stay on the device. */
static int collect(cu_exec *ex, char *err, size_t n)
{
	int rc = ep_collect_outputs(&ex->w, ex->run, 1, collect_one, ex, err, n);

	if (rc)
		return rc;
	for (size_t i = 0; i < ex->d2d.n; i++) {
		cu_xfer *t = &((cu_xfer *)ex->d2d.v)[i];
		cudaError_t e = cudaMemcpyAsync(t->host, t->dev, t->nbytes, cudaMemcpyDeviceToDevice,
						ex->stream);

		if (e != cudaSuccess)
			return cuda_err(e, "device output copy", err, n), EP_E_INTERNAL;
	}
	return stage(ex, &ex->down, 0, err, n);
}

/* Waits for the run.  An error here may leave the CUDA context unusable
 * (an illegal address is sticky): then the process exits with status 70
 * and the supervisor restarts a clean one, as ort-ep-vulkan does on a lost
 * device. */
static int finish(cu_exec *ex, char *err, size_t n)
{
	cudaError_t e = cudaStreamSynchronize(ex->stream);

	if (e == cudaSuccess)
		return 0;
	cuda_err(e, "run", err, n);
	if (cudaDeviceSynchronize() != cudaSuccess) {
		ipc_log(IPC_LOG_ERROR, "%s; the CUDA context is unusable: exiting", err);
		_exit(70);
	}
	return EP_E_INTERNAL;
}

static void count_transfers(cu_exec *ex, ep_run *r)
{
	r->uploads = (uint32_t)ex->up.n;
	r->downloads = (uint32_t)ex->down.n;
	r->upload_bytes = r->download_bytes = 0;
	for (size_t i = 0; i < ex->up.n; i++)
		r->upload_bytes += ((cu_xfer *)ex->up.v)[i].nbytes;
	for (size_t i = 0; i < ex->down.n; i++)
		r->download_bytes += ((cu_xfer *)ex->down.v)[i].nbytes;
}

int cuda_exec_run(cuda_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	cu_exec *ex = sg->impl;
	double t0 = sys_now_ms(), t1;
	int rc;

	reset_run(ex, r);
	rc = cuda_dev_stream(&ep->dev, r->stream, &ex->stream, err, n) ? EP_E_INTERNAL : 0;
	if (rc == 0)
		rc = ep_bind_inputs(&ex->w, r, bind_input, ex, err, n);
	if (rc == 0)
		rc = stage(ex, &ex->up, 1, err, n);
	for (size_t k = 0; rc == 0 && k < ex->n_nodes; k++)
		rc = run_node(ex, k, err, n);
	if (rc == 0)
		rc = collect(ex, err, n);
	t1 = sys_now_ms();
	/* Whatever was enqueued finishes before its memory is reused. */
	if (ex->stream) {
		char why[512];
		int f = finish(ex, why, sizeof(why));

		if (f && !rc) {
			snprintf(err, n, "%s", why);
			rc = f;
		}
	}
	for (size_t i = 0; rc == 0 && i < ex->down.n; i++) {
		cu_xfer *t = &((cu_xfer *)ex->down.v)[i];

		memcpy(t->host, t->dev, t->nbytes);
	}
	if (rc == 0)
		count_transfers(ex, r);
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ipc_log(IPC_LOG_DEBUG, "run of %zu nodes: %zu uploads, %zu downloads, %zu device "
			"copies; enqueue %.3f ms, wait %.3f ms", ex->n_nodes, ex->up.n, ex->down.n,
			ex->d2d.n, t1 - t0, sys_now_ms() - t1);
	end_run(ex, rc == 0);
	return rc;
}
