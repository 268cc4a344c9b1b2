/*
 * cuda_exec: the CUDA device's operations for the device kit's executor
 * (see cuda_exec.h): memory from the caching heap, the core's buffers by
 * id, the run's stream, staged uploads and downloads, the weights at
 * load; and what the ops call for the device's handles and launch errors.
 */
#include "cuda_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_buf.h"
#include "log.h"

#define STAGE_ALIGN 64

/* ---- memory ------------------------------------------------------------- */

static int cu_ex_mem_alloc(void *self, uint64_t nbytes, dk_buf *out, char *err, size_t n)
{
	cuda_ep *ep = self;
	cuda_block blk = {0};

	memset(out, 0, sizeof(*out));
	if (cuda_heap_alloc(&ep->heap, nbytes, &blk, err, n))
		return EP_E_NOMEM;
	out->ptr = blk.ptr;
	out->size = blk.size;
	return 0;
}

static void cu_ex_mem_free(void *self, dk_buf *b)
{
	cuda_ep *ep = self;
	cuda_block blk = {b->ptr, b->size};

	cuda_heap_free(&ep->heap, &blk);
	memset(b, 0, sizeof(*b));
}

static uint64_t cu_ex_mem_in_use(void *self)
{
	return ((cuda_ep *)self)->heap.in_use;
}

static int cu_ex_buf_range(void *self, uint64_t id, uint64_t off, uint64_t nbytes, dk_buf *out,
		     char *err, size_t n)
{
	cuda_dbuf *d = cuda_buf_find(self, id);

	if (!d || off > d->nbytes || nbytes > d->nbytes - off)
		return snprintf(err, n, "device buffer %llu [%llu, +%llu) is not allocated",
				(unsigned long long)id, (unsigned long long)off,
				(unsigned long long)nbytes), EP_E_INVALID;
	*out = (dk_buf){.ptr = (char *)d->blk.ptr + off, .size = nbytes};
	return 0;
}

static int cu_ex_buf_exists(void *self, uint64_t id)
{
	return cuda_buf_find(self, id) != NULL;
}

static int cu_ex_buf_adopt(void *self, uint64_t id, uint64_t nbytes, const dk_buf *b, char *err,
		     size_t n)
{
	cuda_block blk = {b->ptr, b->size};

	return cuda_buf_adopt(self, id, nbytes, &blk, err, n);
}

/* ---- a run -------------------------------------------------------------- */

static int cu_ex_run_begin(dk_exec *ex, char *err, size_t n)
{
	cudaStream_t s = NULL;

	if (cuda_dev_stream(&cuda_ep_of(ex)->dev, ex->run->stream, &s, err, n))
		return EP_E_INTERNAL;
	ex->stream = s;
	return 0;
}

/* An int tensor in a device buffer, read to the host now. */
static int cu_ex_run_fetch(dk_exec *ex, const ep_tensor *b, void *dst, char *err, size_t n)
{
	dk_buf src;
	cudaError_t e;
	int rc = cu_ex_buf_range(ex->dev->self, b->buffer_id, b->buffer_offset, b->nbytes, &src, err, n);

	if (rc)
		return rc;
	e = cudaMemcpyAsync(dst, src.ptr, b->nbytes, cudaMemcpyDeviceToHost, ex->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(ex->stream);
	return e == cudaSuccess ? 0 : (cuda_err(e, "reading an int tensor", err, n), EP_E_INTERNAL);
}

/* Stages the transfers [from, l->n) in one pinned buffer (held until the
 * run ends) and enqueues them; uploads are copied in now.  The pinned
 * buffer in *stage. */
static int stage(dk_exec *ex, dk_list *l, size_t from, int upload, cuda_pinned_buf **stage,
		 char *err, size_t n)
{
	uint64_t total = 0;
	cuda_pinned_buf **slot;

	for (size_t i = from; i < l->n; i++) {
		dk_xfer *x = DK_AT(l, dk_xfer, i);

		x->stage_off = total;
		total += (x->nbytes + STAGE_ALIGN - 1) & ~(uint64_t)(STAGE_ALIGN - 1);
	}
	if (from >= l->n)
		return 0;
	slot = dk_list_push(&ex->held);
	if (!slot)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*slot = *stage = cuda_stage_get(cuda_ep_of(ex), total, err, n);
	if (!*slot)
		return ex->held.n--, EP_E_NOMEM;
	for (size_t i = from; i < l->n; i++) {
		dk_xfer *x = DK_AT(l, dk_xfer, i);
		char *s = (char *)(*stage)->ptr + x->stage_off;
		cudaError_t e;

		if (upload)
			memcpy(s, x->host, x->nbytes);
		e = upload ? cudaMemcpyAsync(x->dev.ptr, s, x->nbytes, cudaMemcpyHostToDevice,
					     ex->stream)
			   : cudaMemcpyAsync(s, x->dev.ptr, x->nbytes, cudaMemcpyDeviceToHost,
					     ex->stream);
		if (e != cudaSuccess)
			return cuda_err(e, upload ? "upload" : "download", err, n), EP_E_INTERNAL;
	}
	return 0;
}

/* The uploads queued since the last flush go ahead of what the ops
 * enqueue next. */
static int cu_ex_run_flush(dk_exec *ex, char *err, size_t n)
{
	cuda_pinned_buf *s = NULL;
	int rc = stage(ex, &ex->up, ex->up_flushed, 1, &s, err, n);

	ex->up_flushed = ex->up.n;
	return rc;
}

/* Waits for the run.  An error here may leave the CUDA context unusable
 * (an illegal address is sticky): then the process exits with status 70
 * and the supervisor restarts a clean one, as ort-ep-vulkan does on a lost
 * device. */
static int finish(dk_exec *ex, char *err, size_t n)
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

/* The copies into device buffers and the staged downloads, one
 * synchronisation, then the downloads to host memory.  A failed run only
 * waits for what its ops enqueued. */
static int cu_ex_run_submit(dk_exec *ex, int ok, char *err, size_t n)
{
	cuda_pinned_buf *down = NULL;
	int rc = ok ? cu_ex_run_flush(ex, err, n) : 0;

	if (!ex->stream)
		return rc;
	for (size_t i = 0; ok && rc == 0 && i < ex->d2d.n; i++) {
		dk_d2d *c = DK_AT(&ex->d2d, dk_d2d, i);
		cudaError_t e = cudaMemcpyAsync(c->dst.ptr, c->src.ptr, c->nbytes,
						cudaMemcpyDeviceToDevice, ex->stream);

		if (e != cudaSuccess)
			rc = (cuda_err(e, "device output copy", err, n), EP_E_INTERNAL);
	}
	if (ok && rc == 0)
		rc = stage(ex, &ex->down, 0, 0, &down, err, n);
	if (rc == 0)
		rc = finish(ex, err, n);
	else
		finish(ex, (char[256]){0}, 256);
	for (size_t i = 0; ok && rc == 0 && i < ex->down.n; i++) {
		dk_xfer *x = DK_AT(&ex->down, dk_xfer, i);

		memcpy(x->host, (char *)down->ptr + x->stage_off, x->nbytes);
	}
	return rc;
}

/* After the stream synchronised (or failed): staging back to the pool. */
static void cu_ex_run_end(dk_exec *ex, int ok)
{
	(void)ok;
	for (size_t i = 0; i < ex->held.n; i++)
		cuda_pinned_put(&cuda_ep_of(ex)->pinned, *DK_AT(&ex->held, cuda_pinned_buf *, i));
	ex->held.n = 0;
}

/* ---- load --------------------------------------------------------------- */

static int cu_ex_load_weights(dk_exec *ex, char *err, size_t n)
{
	const ep_subgraph *sg = ex->sg;
	cuda_block *dst = calloc(sg->n_weights + 1, sizeof(*dst));
	int rc;

	if (!dst)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	rc = cuda_load_weights(cuda_ep_of(ex), sg, dst, err, n);
	/* The exec owns them now (freed with the other values). */
	for (size_t i = 0; i < sg->n_weights; i++) {
		dk_buf *own = &ex->own[sg->weights[i].value];

		cu_ex_mem_free(ex->dev->self, own);
		*own = (dk_buf){.ptr = dst[i].ptr, .size = dst[i].size};
	}
	free(dst);
	return rc;
}

/* Its memory goes back to the cache: nothing may still use it. */
static void cu_ex_unload(dk_exec *ex)
{
	cuda_dev_sync_all(&cuda_ep_of(ex)->dev);
}

static const dk_dev_ops cuda_dk_ops = {
	.alloc = cu_ex_mem_alloc,
	.free = cu_ex_mem_free,
	.range = cu_ex_buf_range,
	.exists = cu_ex_buf_exists,
	.adopt = cu_ex_buf_adopt,
	.begin = cu_ex_run_begin,
	.fetch = cu_ex_run_fetch,
	.flush = cu_ex_run_flush,
	.submit = cu_ex_run_submit,
	.end = cu_ex_run_end,
	.find_op = cu_op_find,
	.load_weights = cu_ex_load_weights,
	.unload = cu_ex_unload,
};

void cuda_exec_device(cuda_ep *ep)
{
	dk_device *d = &ep->dk;

	d->ops = &cuda_dk_ops;
	d->self = ep;
	d->name = "CUDA";
	d->max_elems = INT64_MAX;
	d->held_size = sizeof(cuda_pinned_buf *);
	d->mem_in_use = cu_ex_mem_in_use;
}

/* ---- the ops' side ------------------------------------------------------ */

int cu_check(dk_ctx *c, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	return dk_fail(c, EP_E_INTERNAL, "%s: %s", what, cudaGetErrorString(e));
}

struct cuda_dev *cu_dev(const dk_ctx *c)
{
	return &cuda_ep_of(c->ex)->dev;
}
