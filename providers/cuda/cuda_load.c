/*
 * cuda_load: copies a subgraph's float weights to device memory at load.
 *
 * Two pinned chunks alternate: while the GPU copies chunk k out of one
 * (cudaMemcpyAsync, then an event), chunk k+1 is read into the other —
 * with pread from the external-data file descriptor the core handed over
 * (so the bytes go disk/page cache -> pinned -> device, and the read-only
 * mapping ep_host made of the file is never faulted in), or copied from
 * the shared weights segment for inline weights.  Before a chunk buffer is
 * refilled, the event of its previous copy is waited on.  The achieved
 * rate is logged at info level (ORTMK_LOG=info):
 *   cuda[PID] info: weights of subgraph 3: 4 tensors, 209715200 bytes
 *   (209715200 from files) in 61.2 ms: 3.43 GB/s (read 40.1 ms)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_exec.h"
#include "log.h"

#define CHUNK ((uint64_t)8 << 20)

static int read_full(int fd, void *buf, uint64_t len, uint64_t off, char *err, size_t n)
{
	uint64_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return snprintf(err, n, "external data: read at offset %llu: %s",
					(unsigned long long)(off + got),
					r < 0 ? strerror(errno) : "unexpected end of file"), -1;
		got += (uint64_t)r;
	}
	return 0;
}

typedef struct loader {
	cuda_ep *ep;
	cudaStream_t s;
	cuda_pinned_buf *buf[2];
	cudaEvent_t ev[2];
	int used[2], next;
	double read_ms;
} loader;

/* One chunk: wait for its buffer, fill it, enqueue its copy. */
static int chunk(loader *l, const ep_weight *w, uint64_t off, uint64_t len, char *dst,
		 char *err, size_t n)
{
	int b = l->next;
	double t0;
	cudaError_t e;

	l->next ^= 1;
	if (l->used[b]) {
		e = cudaEventSynchronize(l->ev[b]);
		if (e != cudaSuccess)
			return cuda_err(e, "weight copy", err, n);
	}
	t0 = sys_now_ms();
	if (w->fd >= 0) {
		if (read_full(w->fd, l->buf[b]->ptr, len, w->file_offset + off, err, n))
			return -1;
	} else {
		memcpy(l->buf[b]->ptr, (const char *)w->data + off, len);
	}
	l->read_ms += sys_now_ms() - t0;
	e = cudaMemcpyAsync(dst + off, l->buf[b]->ptr, len, cudaMemcpyHostToDevice, l->s);
	if (e == cudaSuccess)
		e = cudaEventRecord(l->ev[b], l->s);
	if (e != cudaSuccess)
		return cuda_err(e, "weight copy", err, n);
	l->used[b] = 1;
	return 0;
}

static int load_all(loader *l, const ep_subgraph *sg, cuda_block *dst, uint64_t *bytes,
		    uint64_t *from_files, int *count, char *err, size_t n)
{
	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];

		/* int64 shapes, axes and indices are read on the host. */
		if (!dk_dev_dtype(w->dtype))
			continue;
		if (cuda_heap_alloc(&l->ep->heap, w->nbytes, &dst[i], err, n))
			return EP_E_NOMEM;
		for (uint64_t off = 0; off < w->nbytes; off += CHUNK) {
			uint64_t len = w->nbytes - off < CHUNK ? w->nbytes - off : CHUNK;

			if (chunk(l, w, off, len, dst[i].ptr, err, n))
				return EP_E_INTERNAL;
		}
		*bytes += w->nbytes;
		*from_files += w->fd >= 0 ? w->nbytes : 0;
		(*count)++;
	}
	return 0;
}

int cuda_load_weights(cuda_ep *ep, const ep_subgraph *sg, cuda_block *dst, char *err, size_t n)
{
	loader l = {.ep = ep};
	uint64_t bytes = 0, from_files = 0;
	double t0 = sys_now_ms(), ms;
	int count = 0, rc = 0, nev = 0;
	cudaError_t e = cudaSuccess;

	if (cuda_dev_stream(&ep->dev, 0, &l.s, err, n))
		return EP_E_INTERNAL;
	for (int b = 0; b < 2 && rc == 0; b++) {
		l.buf[b] = cuda_stage_get(ep, CHUNK, err, n);
		if (!l.buf[b])
			rc = EP_E_NOMEM;
		else if ((e = cudaEventCreateWithFlags(&l.ev[b], cudaEventDisableTiming)) != cudaSuccess)
			rc = (cuda_err(e, "cudaEventCreate", err, n), EP_E_INTERNAL);
		else
			nev++;
	}
	if (rc == 0)
		rc = load_all(&l, sg, dst, &bytes, &from_files, &count, err, n);
	/* Always drain: the pinned chunks go back to the pool. */
	e = cudaStreamSynchronize(l.s);
	if (rc == 0 && e != cudaSuccess)
		rc = (cuda_err(e, "weight copy", err, n), EP_E_INTERNAL);
	for (int b = 0; b < nev; b++)
		cudaEventDestroy(l.ev[b]);
	cuda_pinned_put(&ep->pinned, l.buf[0]);
	cuda_pinned_put(&ep->pinned, l.buf[1]);
	ms = sys_now_ms() - t0;
	if (rc == 0 && bytes)
		ipc_log(IPC_LOG_INFO, "weights of subgraph %u: %d tensors, %llu bytes (%llu from "
			"files) in %.1f ms: %.2f GB/s (read %.1f ms)", sg->id, count,
			(unsigned long long)bytes, (unsigned long long)from_files, ms,
			ms > 0 ? (double)bytes / (ms * 1e6) : 0.0, l.read_ms);
	return rc;
}
