/*
 * cuda_buf: device values of the application (docs/DEVICE.md): buffers the
 * core allocates by id (ALLOC / Release), the buffers dynamic device
 * outputs get, and COPY between host shared memory and device buffers on
 * an ortmk stream.
 *
 * A COPY is enqueued and answered at once: host sources are copied into a
 * pinned staging buffer now (the caller may reuse them after the ACK),
 * cudaMemcpyAsync moves the bytes, and the completion thread (cuda_dev.c)
 * then copies device-to-host results out of staging, returns the staging
 * buffer and signals the fence (or fails it when the stream failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_buf.h"
#include "log.h"

#define STAGE_ALIGN 64

cuda_pinned_buf *cuda_stage_get(cuda_ep *ep, uint64_t nbytes, char *err, size_t n)
{
	cuda_pinned_buf *b = cuda_pinned_get(&ep->pinned, nbytes, err, n);

	if (b)
		return b;
	cuda_dev_sync_all(&ep->dev);
	cuda_dev_drain(&ep->dev);
	return cuda_pinned_get(&ep->pinned, nbytes, err, n);
}

cuda_dbuf *cuda_buf_find(cuda_ep *ep, uint64_t id)
{
	for (size_t i = 0; i < ep->n_bufs; i++)
		if (ep->bufs[i].id == id)
			return &ep->bufs[i];
	return NULL;
}

static int buf_add(cuda_ep *ep, uint64_t id, uint64_t nbytes, char *err, size_t n)
{
	cuda_block blk = {0};

	if (cuda_heap_alloc(&ep->heap, nbytes, &blk, err, n))
		return EP_E_NOMEM;
	if (cuda_buf_adopt(ep, id, nbytes, &blk, err, n)) {
		cuda_heap_free(&ep->heap, &blk);
		return EP_E_NOMEM;
	}
	return 0;
}

int cuda_buf_alloc(void *self, uint64_t id, uint64_t nbytes, char *err, size_t n)
{
	cuda_ep *ep = self;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	cuda_dev_bind(&ep->dev);
	if (!id || cuda_buf_find(ep, id))
		return snprintf(err, n, "buffer id %llu is %s", (unsigned long long)id,
				id ? "in use" : "invalid"), EP_E_INVALID;
	return buf_add(ep, id, nbytes, err, n);
}

void cuda_buf_free(void *self, uint64_t id)
{
	cuda_ep *ep = self;
	cuda_dbuf *b = ep->dk.ok ? cuda_buf_find(ep, id) : NULL;

	if (!b)
		return;
	cuda_dev_bind(&ep->dev);
	/* Copies or runs still enqueued may use it: they finish first. */
	cuda_dev_sync_all(&ep->dev);
	cuda_heap_free(&ep->heap, &b->blk);
	*b = ep->bufs[--ep->n_bufs];
}

int cuda_buf_adopt(cuda_ep *ep, uint64_t id, uint64_t nbytes, const cuda_block *blk, char *err,
		   size_t n)
{
	cuda_dbuf *b;

	if (cuda_buf_find(ep, id))
		cuda_buf_free(ep, id);
	if (ep->n_bufs == ep->cap_bufs) {
		size_t cap = ep->cap_bufs ? 2 * ep->cap_bufs : 16;
		cuda_dbuf *nb = realloc(ep->bufs, cap * sizeof(*nb));

		if (!nb)
			return snprintf(err, n, "out of memory"), EP_E_NOMEM;
		ep->bufs = nb;
		ep->cap_bufs = cap;
	}
	b = &ep->bufs[ep->n_bufs++];
	*b = (cuda_dbuf){.id = id, .blk = *blk, .nbytes = nbytes};
	return 0;
}

void cuda_buf_fini(cuda_ep *ep)
{
	for (size_t i = 0; i < ep->n_bufs; i++)
		cuda_heap_free(&ep->heap, &ep->bufs[i].blk);
	free(ep->bufs);
	ep->bufs = NULL;
	ep->n_bufs = ep->cap_bufs = 0;
}

/* ---- COPY --------------------------------------------------------------- */

typedef struct d2h {
	void *dst;
	uint64_t off, nbytes;
} d2h;

typedef struct copy_job {
	cuda_ep *ep;
	ep_fence fence;
	cuda_pinned_buf *stage;
	d2h *outs;
	size_t n_outs;
} copy_job;

/* Completion thread: no CUDA calls here. */
static void copy_done(void *arg, int ok)
{
	copy_job *j = arg;

	for (size_t i = 0; ok && i < j->n_outs; i++)
		memcpy(j->outs[i].dst, (char *)j->stage->ptr + j->outs[i].off, j->outs[i].nbytes);
	cuda_pinned_put(&j->ep->pinned, j->stage);
	if (ok)
		ep_fence_signal(&j->fence);
	else
		ep_fence_fail(&j->fence);
	free(j->outs);
	free(j);
}

/* The device address of (buffer, offset) for nbytes, or NULL. */
static void *dev_at(cuda_ep *ep, uint64_t id, uint64_t off, uint64_t nbytes, char *err, size_t n)
{
	cuda_dbuf *b = cuda_buf_find(ep, id);

	if (!b || off > b->nbytes || nbytes > b->nbytes - off) {
		snprintf(err, n, "copy: device buffer %llu [%llu, +%llu) is not allocated",
			 (unsigned long long)id, (unsigned long long)off, (unsigned long long)nbytes);
		return NULL;
	}
	return (char *)b->blk.ptr + off;
}

/* Enqueues op i; host sides go through staging at *at. */
static int enqueue_one(copy_job *j, cudaStream_t s, const ep_copy *op, uint64_t *at, char *err,
		       size_t n)
{
	char *st = j->stage ? (char *)j->stage->ptr + *at : NULL;
	void *src = NULL, *dst = NULL;
	cudaError_t e;

	if (op->src_host && op->dst_host)
		return snprintf(err, n, "copy: host to host"), EP_E_INVALID;
	if (!op->src_host && !(src = dev_at(j->ep, op->src_buf, op->src_off, op->nbytes, err, n)))
		return EP_E_INVALID;
	if (!op->dst_host && !(dst = dev_at(j->ep, op->dst_buf, op->dst_off, op->nbytes, err, n)))
		return EP_E_INVALID;
	if (!op->nbytes)
		return 0;
	if (op->src_host) {
		memcpy(st, op->src_host, op->nbytes);
		e = cudaMemcpyAsync(dst, st, op->nbytes, cudaMemcpyHostToDevice, s);
	} else if (op->dst_host) {
		j->outs[j->n_outs++] = (d2h){op->dst_host, *at, op->nbytes};
		e = cudaMemcpyAsync(st, src, op->nbytes, cudaMemcpyDeviceToHost, s);
	} else {
		e = cudaMemcpyAsync(dst, src, op->nbytes, cudaMemcpyDeviceToDevice, s);
	}
	if (op->src_host || op->dst_host)
		*at += (op->nbytes + STAGE_ALIGN - 1) & ~(uint64_t)(STAGE_ALIGN - 1);
	return e == cudaSuccess ? 0 : (cuda_err(e, "copy", err, n), EP_E_INTERNAL);
}

int cuda_copy(void *self, uint32_t stream, const ep_copy *ops, size_t n_ops, ep_fence signal,
	      char *err, size_t n)
{
	cuda_ep *ep = self;
	copy_job *j;
	cudaStream_t s;
	uint64_t total = 0, at = 0;
	int rc = 0;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	cuda_dev_bind(&ep->dev);
	if (cuda_dev_stream(&ep->dev, stream, &s, err, n))
		return EP_E_INTERNAL;
	for (size_t i = 0; i < n_ops; i++)
		if (ops[i].src_host || ops[i].dst_host)
			total += (ops[i].nbytes + STAGE_ALIGN - 1) & ~(uint64_t)(STAGE_ALIGN - 1);
	j = calloc(1, sizeof(*j));
	if (!j || !(j->outs = calloc(n_ops + 1, sizeof(*j->outs)))) {
		free(j);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	j->ep = ep;
	j->fence = signal;
	if (total && !(j->stage = cuda_stage_get(ep, total, err, n)))
		rc = EP_E_NOMEM;
	for (size_t i = 0; rc == 0 && i < n_ops; i++)
		rc = enqueue_one(j, s, &ops[i], &at, err, n);
	if (rc == 0 && cuda_dev_when_done(&ep->dev, s, copy_done, j, err, n))
		rc = EP_E_INTERNAL;
	if (rc) {
		/* Some copies may be enqueued: they read staging. */
		cudaStreamSynchronize(s);
		cuda_pinned_put(&ep->pinned, j->stage);
		free(j->outs);
		free(j);
	}
	return rc;
}

void cuda_stream_free(void *self, uint32_t stream)
{
	cuda_ep *ep = self;

	if (!ep->dk.ok)
		return;
	cuda_dev_bind(&ep->dev);
	cuda_dev_stream_free(&ep->dev, stream);
}
